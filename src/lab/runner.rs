//! The one runner, used by `cnpe-lab run` / `verify` and by `cargo test --test lab`, and the
//! run's only record keeper: it times each step once, keeps the timeline and hands each result
//! to the one [`Reporter`]. Policy: steps run in order; when an action fails, later actions are
//! skipped (they build on it); grading checks always run, each on its own.

use crate::lab::manifests::PROGRESS_DEADLINE_SECONDS;
use crate::lab::step::{Step, StepKind};
use crate::lab::Lab;
use crate::report::timeline::{StepTiming, Timeline};
use crate::report::{Echo, Outcome, Reporter, Suite, TrialResult};
use std::time::Instant;

/// Which steps a run includes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Steps 1-8 (resuming from records), then the grading checks.
    Run,
    /// Only the grading checks, on what is recorded and live.
    Verify,
}

impl Mode {
    pub fn steps(self) -> Vec<Step> {
        Step::ALL
            .into_iter()
            .filter(|s| self == Mode::Run || s.kind() == StepKind::Grading)
            .collect()
    }
}

/// Decides whether `step` runs, given the first failed action so far (pure).
pub fn should_skip(step: Step, failed_action: Option<Step>) -> Option<Step> {
    match (step.kind(), failed_action) {
        (StepKind::Action, Some(f)) => Some(f),
        _ => None,
    }
}

pub struct Runner {
    pub lab: Lab,
    pub reporter: Reporter,
    failed_action: Option<Step>,
    /// An action step ran (then the run has files to write).
    acted: bool,
    timeline: Timeline,
    started: Instant,
}

impl Runner {
    pub fn new(lab: Lab, echo: Echo) -> Self {
        let reporter = Reporter::new(Suite::Lab, &lab.records.dir, echo)
            .with_picture(PROGRESS_DEADLINE_SECONDS as i64);
        Self {
            lab,
            reporter,
            failed_action: None,
            acted: false,
            timeline: Timeline::new(),
            started: Instant::now(),
        }
    }

    /// Runs one step under the policy, times it, files its waits and reports it.
    pub async fn run(&mut self, step: Step) -> TrialResult {
        let name = step.trial_name();
        self.reporter.begins(name);
        let started_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let t = Instant::now();
        let outcome = match should_skip(step, self.failed_action) {
            Some(after) => Outcome::Skipped {
                after: after.trial_name().into(),
            },
            None => {
                self.acted |= step.kind() == StepKind::Action;
                match self.lab.run(step).await {
                    Ok(done) => {
                        self.timeline
                            .waits
                            .extend(done.waits.into_iter().map(|mut w| {
                                w.step = name.into();
                                w
                            }));
                        Outcome::Passed(done.summary)
                    }
                    Err(e) => {
                        if step.kind() == StepKind::Action {
                            self.failed_action = Some(step);
                        }
                        Outcome::Failed(format!("{e:#}"))
                    }
                }
            }
        };
        let seconds = t.elapsed().as_secs_f64();
        self.timeline.steps.push(StepTiming {
            step: name.into(),
            started_at,
            seconds,
            outcome: match &outcome {
                Outcome::Passed(s) => format!("ok: {s}"),
                Outcome::Failed(e) => format!("failed: {}", e.lines().next().unwrap_or("")),
                Outcome::Skipped { after } => format!("skipped: {after} failed"),
                Outcome::Ignored(why) => format!("ignored: {why}"),
            },
        });
        let result = TrialResult {
            name: name.into(),
            outcome,
            seconds,
        };
        self.reporter.finished(result.clone());
        result
    }

    /// Runs every step of `mode`.
    pub async fn run_all(&mut self, mode: Mode) {
        for step in mode.steps() {
            self.run(step).await;
        }
    }

    /// The first action that did not pass, if any.
    pub fn failed_action(&self) -> Option<Step> {
        self.failed_action
    }

    /// The timeline so far, with the figures read from the records (detection, recovery, the
    /// lie window) and the request counts.
    pub fn timeline(&self) -> Timeline {
        let mut t = self.timeline.clone();
        match self.lab.measured_times() {
            Ok((detection, recovery)) => {
                t.detection_seconds = detection;
                t.recovery_seconds = recovery;
            }
            Err(e) => eprintln!("timeline: detection and recovery not measured: {e:#}"),
        }
        match self.lab.lie_window() {
            Ok(w) => t.lie_window = w,
            Err(e) => eprintln!("timeline: lie window not measured: {e:#}"),
        }
        (t.api_requests, t.http_probes) = self.lab.request_counts();
        t.total_seconds = self.started.elapsed().as_secs_f64();
        t
    }

    /// Writes the run's files through the reporter when an action ran (a `verify` writes
    /// nothing): `timeline.json`, the JUnit files, `report.svg`.
    pub fn finish(&self) {
        if self.acted {
            self.reporter.write(Some(&self.timeline()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_action_skips_later_actions_but_never_grading() {
        for failed in Step::ALL
            .into_iter()
            .filter(|s| s.kind() == StepKind::Action)
        {
            for step in Step::ALL {
                let skip = should_skip(step, Some(failed));
                assert_eq!(
                    skip.is_some(),
                    step.kind() == StepKind::Action,
                    "{step} after {failed}"
                );
            }
        }
        assert!(Step::ALL.iter().all(|s| should_skip(*s, None).is_none()));
    }

    #[test]
    fn verify_runs_only_the_grading_checks_in_order() {
        let v = Mode::Verify.steps();
        assert_eq!(
            v,
            [
                Step::GradeGitHistory,
                Step::GradeSavedRecords,
                Step::GradeLiveWiring,
                Step::GradeLiveService
            ]
        );
        assert_eq!(Mode::Run.steps(), Step::ALL.to_vec());
    }
}
