//! `timeline.json`: what a run did and when, built by the runner (the run's only record
//! keeper) from each step's result and wait timings.

use crate::observe::observations::LieWindow;
use crate::observe::observer::Flip;
use crate::report::Outcome;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize)]
pub struct StepTiming {
    pub step: String,
    pub started_at: String,
    pub seconds: f64,
    /// For a reader: the step's one-line summary or first line of its failure.
    pub outcome: String,
    /// For a program (the kill trials read it): how the step ended.
    pub result: StepResult,
}

/// How a step ended, as `timeline.json` writes it (closed set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepResult {
    Passed,
    Failed,
    Skipped,
    Ignored,
}

impl StepResult {
    pub fn of(outcome: &Outcome) -> Self {
        match outcome {
            Outcome::Passed(_) => StepResult::Passed,
            Outcome::Failed(_) => StepResult::Failed,
            Outcome::Skipped { .. } => StepResult::Skipped,
            Outcome::Ignored(_) => StepResult::Ignored,
        }
    }
}

/// One wait of the run: how long, what it cost, how fast it answered, what flipped.
#[derive(Debug, Clone, Serialize)]
pub struct WaitTiming {
    pub step: String,
    pub target: &'static str,
    pub seconds: f64,
    pub watch_events: u32,
    pub probes: u32,
    /// From the watch event that completed the Kubernetes part of the goal to the return.
    pub ms_after_event: f64,
    pub flips: Vec<Flip>,
}

/// What `api_requests` counts, written into the file so a reader need not guess.
pub const REQUESTS_COUNTED: &str =
    "every HTTP request this run's Kubernetes client sent except the HTTP probes: each \
GET/PATCH/list and each (re)started watch; events streamed over an open watch are not requests. \
The probes of the service (through the API server's service proxy or direct) are `http_probes`";

/// A figure of the timeline that is read from the records (closed set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Figure {
    Detection,
    Recovery,
    LieWindow,
}

#[derive(Debug, Default, Clone, Serialize)]
pub struct Timeline {
    pub steps: Vec<StepTiming>,
    pub waits: Vec<WaitTiming>,
    /// Seconds from the recorded targetRevision change to the bad SHA until the recorded outage
    /// (both from the records, so a resumed run measures the original change).
    pub detection_seconds: Option<f64>,
    /// Seconds from the recorded targetRevision change to the revert until the recorded recovery.
    pub recovery_seconds: Option<f64>,
    /// While the bad release was live: how long Argo CD said Synced (and Healthy) at the bad
    /// SHA while nothing served, when serving stopped and when Argo CD said Degraded, from
    /// `observations.ndjson` and the recorded change.
    pub lie_window: Option<LieWindow>,
    /// The figures above that come from records an earlier run made (a resumed run measures
    /// the original changes): not this run's measurements.
    pub figures_of_an_earlier_run: Vec<Figure>,
    pub api_requests: u64,
    pub http_probes: u64,
    pub api_requests_counted: &'static str,
    pub total_seconds: f64,
}

impl Timeline {
    pub fn new() -> Self {
        Timeline {
            api_requests_counted: REQUESTS_COUNTED,
            ..Default::default()
        }
    }

    /// The one-line summary printed at the end of a run.
    pub fn summary(&self) -> String {
        let earlier = |fig: Figure| {
            if self.figures_of_an_earlier_run.contains(&fig) {
                " (an earlier run's record)"
            } else {
                ""
            }
        };
        let f = |x: Option<f64>, fig: Figure| {
            x.map_or("n/a".to_string(), |s| format!("{s:.1}s{}", earlier(fig)))
        };
        let slowest = self
            .waits
            .iter()
            .map(|w| w.ms_after_event)
            .fold(0.0, f64::max);
        let lie = self.lie_window.as_ref().map_or(String::new(), |l| {
            format!(
                "; Argo CD said Synced for {:.1}s while not serving{}",
                l.synced_not_serving_seconds,
                earlier(Figure::LieWindow)
            )
        });
        format!(
            "lab: {} steps in {:.1}s; outage detected {} after the targetRevision change; recovered {} after it{lie}; \
             {} API requests and {} HTTP probes; waits answered at most {slowest:.0} ms after the deciding watch event",
            self.steps.len(),
            self.total_seconds,
            f(self.detection_seconds, Figure::Detection),
            f(self.recovery_seconds, Figure::Recovery),
            self.api_requests,
            self.http_probes,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_s_result_is_written_for_programs_and_read_back() {
        let cases = [
            (Outcome::Passed("x".into()), "passed"),
            (Outcome::Failed("x".into()), "failed"),
            (Outcome::Skipped { after: "s".into() }, "skipped"),
            (Outcome::Ignored("why".into()), "ignored"),
        ];
        for (outcome, text) in cases {
            let result = StepResult::of(&outcome);
            let json = serde_json::to_string(&result).unwrap();
            assert_eq!(json, format!("\"{text}\""));
            assert_eq!(serde_json::from_str::<StepResult>(&json).unwrap(), result);
        }
    }

    #[test]
    fn the_summary_says_which_figures_an_earlier_run_measured() {
        let mut t = Timeline::new();
        t.detection_seconds = Some(22.6);
        t.recovery_seconds = Some(8.25);
        let fresh = t.summary();
        assert!(fresh.contains("outage detected 22.6s after"), "{fresh}");
        assert!(!fresh.contains("earlier run"), "{fresh}");
        t.figures_of_an_earlier_run = vec![Figure::Detection];
        let resumed = t.summary();
        assert!(
            resumed.contains("outage detected 22.6s (an earlier run's record) after"),
            "{resumed}"
        );
        assert!(resumed.contains("recovered 8.2s after"), "{resumed}");
    }
}
