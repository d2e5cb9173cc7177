//! The one runner policy, used by `cnpe-lab run` / `verify` and by `cargo test --test lab`:
//! steps run in order; when an action fails, later actions are skipped (they build on it);
//! grading checks always run, each on its own.

use crate::lab::Lab;
use crate::step::{Step, StepKind};
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

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Passed(String),
    /// The full explanation.
    Failed(String),
    /// Not run because an earlier action failed.
    Skipped {
        after: Step,
    },
}

impl Outcome {
    pub fn passed(&self) -> bool {
        matches!(self, Outcome::Passed(_))
    }
}

#[derive(Debug, Clone)]
pub struct StepResult {
    pub step: Step,
    pub outcome: Outcome,
    pub seconds: f64,
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
    failed_action: Option<Step>,
    pub results: Vec<StepResult>,
}

impl Runner {
    pub fn new(lab: Lab) -> Self {
        Self {
            lab,
            failed_action: None,
            results: Vec::new(),
        }
    }

    /// Runs one step under the policy and keeps its result.
    pub async fn run(&mut self, step: Step) -> &StepResult {
        let t = Instant::now();
        let outcome = match should_skip(step, self.failed_action) {
            Some(after) => Outcome::Skipped { after },
            None => match self.lab.run(step).await {
                Ok(summary) => Outcome::Passed(summary),
                Err(e) => {
                    if step.kind() == StepKind::Action {
                        self.failed_action = Some(step);
                    }
                    Outcome::Failed(format!("{e:#}"))
                }
            },
        };
        self.results.push(StepResult {
            step,
            outcome,
            seconds: t.elapsed().as_secs_f64(),
        });
        self.results.last().expect("just pushed")
    }

    /// Runs every step of `mode`, announcing each as it begins and reporting its result as it
    /// comes (the begin line is what an operator, or the kill-and-resume faults, act on).
    pub async fn run_all(
        &mut self,
        mode: Mode,
        mut begins: impl FnMut(Step),
        mut report: impl FnMut(&StepResult),
    ) {
        for step in mode.steps() {
            begins(step);
            report(self.run(step).await);
        }
    }

    pub fn passed(&self) -> usize {
        self.results.iter().filter(|r| r.outcome.passed()).count()
    }
}

/// The line the CLI prints when a step begins.
pub fn render_begin(step: Step) -> String {
    format!("--   {step}: begins")
}

/// One line per result, as the CLI prints it.
pub fn render(r: &StepResult) -> String {
    match &r.outcome {
        Outcome::Passed(s) => format!("ok   {}: {s}", r.step),
        Outcome::Failed(e) => format!("FAIL {}: {e}", r.step),
        Outcome::Skipped { after } => format!("SKIP {}: {after} failed", r.step),
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
