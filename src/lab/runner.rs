//! The one runner, used by `cnpe-lab run` / `verify` and by `cargo test --test lab`, and the
//! run's only record keeper: it times each step once, keeps the timeline and hands each result
//! to the one [`Reporter`]. Policy: steps run in order; when an action fails, every later step
//! is not run (the actions build on it, and the grading checks would only list what it left
//! undone), so the one real failure leads the output. `verify` has no actions: its grading checks
//! always run, each on its own. Before the first action the runner asks whether the records are
//! this cluster's ([`Lab::take_stock`]).

use crate::lab::manifests::PROGRESS_DEADLINE_SECONDS;
use crate::lab::resume::Recorded;
use crate::lab::step::{Step, StepKind};
use crate::lab::Lab;
use crate::report::timeline::{Figure, StepResult, StepTiming, Timeline};
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

/// Decides whether `step` runs, given the first failed action so far (pure): after a failed
/// action nothing more runs.
pub fn should_skip(_step: Step, failed_action: Option<Step>) -> Option<Step> {
    failed_action
}

pub struct Runner {
    pub lab: Lab,
    pub reporter: Reporter,
    failed_action: Option<Step>,
    /// An action step ran (then the run has files to write).
    acted: bool,
    /// What was recorded when this run's first action began (after [`Lab::take_stock`]):
    /// figures read from those records are an earlier run's.
    recorded_before: Option<Recorded>,
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
            recorded_before: None,
            timeline: Timeline::new(),
            started: Instant::now(),
        }
    }

    /// Runs one step under the policy, times it, files its waits and reports it.
    pub async fn run(&mut self, step: Step) -> TrialResult {
        let name = step.trial_name();
        let started_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let t = Instant::now();
        let outcome = match should_skip(step, self.failed_action) {
            Some(after) => Outcome::Skipped {
                after: after.trial_name().into(),
            },
            None => {
                self.reporter.begins(name);
                let first_action = step.kind() == StepKind::Action && !self.acted;
                self.acted |= step.kind() == StepKind::Action;
                let checked = if first_action {
                    self.take_stock().await
                } else {
                    Ok(())
                };
                let result = match checked {
                    Ok(()) => self.lab.run(step).await,
                    Err(e) => Err(e),
                };
                match result {
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
            result: StepResult::of(&outcome),
        });
        let result = TrialResult {
            name: name.into(),
            outcome,
            seconds,
        };
        self.reporter.finished(result.clone());
        result
    }

    /// Before the first action: the records are this cluster's, or an earlier cluster's run
    /// goes aside (one line on stderr); then what is recorded, to tell this run's figures apart.
    async fn take_stock(&mut self) -> anyhow::Result<()> {
        if let Some(line) = self.lab.take_stock().await? {
            eprintln!("{line}");
        }
        self.recorded_before = Some(self.lab.recorded()?);
        Ok(())
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
        if let Some(before) = &self.recorded_before {
            t.figures_of_an_earlier_run = earlier_figures(before);
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

/// Which of the timeline's figures come from records an earlier run made (pure): detection and
/// the lie window from `failed.json`, recovery from `recovered.json`.
pub fn earlier_figures(before: &Recorded) -> Vec<Figure> {
    let mut out = Vec::new();
    if before.failed_json {
        out.extend([Figure::Detection, Figure::LieWindow]);
    }
    if before.recovered_json {
        out.push(Figure::Recovery);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_a_failed_action_nothing_more_runs_and_names_it() {
        for failed in Step::ALL
            .into_iter()
            .filter(|s| s.kind() == StepKind::Action)
        {
            for step in Step::ALL {
                assert_eq!(should_skip(step, Some(failed)), Some(failed), "{step}");
            }
        }
        assert!(Step::ALL.iter().all(|s| should_skip(*s, None).is_none()));
    }

    #[test]
    fn figures_read_from_records_an_earlier_run_made_are_marked() {
        assert!(earlier_figures(&Recorded::default()).is_empty());
        // Resumed after the outage was recorded: detection and lie window are the earlier run's.
        assert_eq!(
            earlier_figures(&Recorded::prefix(6)),
            [Figure::Detection, Figure::LieWindow]
        );
        assert_eq!(
            earlier_figures(&Recorded::prefix(9)),
            [Figure::Detection, Figure::LieWindow, Figure::Recovery]
        );
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
