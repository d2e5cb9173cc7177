//! The lab's steps and the grader's checks as one closed set. Trial names are the public
//! contract (`cargo test --test lab step5`, evidence timelines), so they never change; no name
//! contains "gate", so `cargo test gate` never selects a lone lab step.

/// Whether a step changes the world (and later steps depend on it) or only grades it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StepKind {
    /// Performs a lab step; when it fails, later actions are skipped.
    Action,
    /// An independent grading check; it runs whatever happened before.
    Grading,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Step {
    CommitBaseline,
    ApplyWiring,
    RecordFirstSuccess,
    ReleaseBadCommit,
    ObserveOutage,
    RevertThroughGit,
    VerifyRecovery,
    ApproveRelease,
    GradeGitHistory,
    GradeSavedRecords,
    GradeLiveWiring,
    GradeLiveService,
}

impl Step {
    /// Every step in run order.
    pub const ALL: [Step; 12] = [
        Step::CommitBaseline,
        Step::ApplyWiring,
        Step::RecordFirstSuccess,
        Step::ReleaseBadCommit,
        Step::ObserveOutage,
        Step::RevertThroughGit,
        Step::VerifyRecovery,
        Step::ApproveRelease,
        Step::GradeGitHistory,
        Step::GradeSavedRecords,
        Step::GradeLiveWiring,
        Step::GradeLiveService,
    ];

    pub fn trial_name(self) -> &'static str {
        match self {
            Step::CommitBaseline => "step1_baseline_release_in_git",
            Step::ApplyWiring => "step2_least_privilege_wiring",
            Step::RecordFirstSuccess => "step3_record_first_success",
            Step::ReleaseBadCommit => "step4_valid_but_wrong_release",
            Step::ObserveOutage => "step5_observe_the_synced_outage",
            Step::RevertThroughGit => "step6_recover_through_git",
            Step::VerifyRecovery => "step7_verify_recovery",
            Step::ApproveRelease => "step8_release_approval",
            Step::GradeGitHistory => "grade_git_history",
            Step::GradeSavedRecords => "grade_saved_records",
            Step::GradeLiveWiring => "grade_live_wiring",
            Step::GradeLiveService => "grade_live_service",
        }
    }

    pub fn kind(self) -> StepKind {
        match self {
            Step::GradeGitHistory
            | Step::GradeSavedRecords
            | Step::GradeLiveWiring
            | Step::GradeLiveService => StepKind::Grading,
            _ => StepKind::Action,
        }
    }

    /// One line on what the step does, for `--list` output and reports.
    pub fn doc(self) -> &'static str {
        match self {
            Step::CommitBaseline => "commit and push the baseline release; record baseline.sha",
            Step::ApplyWiring => {
                "record and apply the least-privilege AppProject and the Application"
            }
            Step::RecordFirstSuccess => {
                "wait until the baseline really serves; record baseline.json"
            }
            Step::ReleaseBadCommit => {
                "commit the readiness path /not-ready, push, point targetRevision at it"
            }
            Step::ObserveOutage => {
                "wait for Synced + Degraded with nothing serving; record failed.json"
            }
            Step::RevertThroughGit => {
                "git revert the bad commit (history kept), push, point targetRevision at it"
            }
            Step::VerifyRecovery => "wait until the revert really serves; record recovered.json",
            Step::ApproveRelease => {
                "install release-gate.py; it approves the recovery and rejects everything else"
            }
            Step::GradeGitHistory => "the grader's nine history checks on the pushed repository",
            Step::GradeSavedRecords => {
                "every record re-read strictly and consistent with the others"
            }
            Step::GradeLiveWiring => {
                "the live AppProject and Application are least-privilege and wired"
            }
            Step::GradeLiveService => {
                "the live service serves the recovered release; the gate approves it"
            }
        }
    }

    pub fn from_trial_name(name: &str) -> Option<Step> {
        Step::ALL.into_iter().find(|s| s.trial_name() == name)
    }

    /// The lab step number (1-8) of an action.
    pub fn number(self) -> Option<usize> {
        Step::ALL[..8]
            .iter()
            .position(|s| *s == self)
            .map(|i| i + 1)
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.trial_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_ordered_and_round_trip() {
        let names: Vec<_> = Step::ALL.iter().map(|s| s.trial_name()).collect();
        let mut dedup = names.clone();
        dedup.sort();
        dedup.dedup();
        assert_eq!(dedup.len(), names.len());
        for s in Step::ALL {
            assert_eq!(Step::from_trial_name(s.trial_name()), Some(s));
            assert!(
                !s.trial_name().contains("gate"),
                "{s} would be selected by `cargo test gate`"
            );
        }
        assert_eq!(Step::from_trial_name("step9"), None);
    }

    #[test]
    fn actions_come_first_and_are_numbered_like_the_lab() {
        for (i, s) in Step::ALL.iter().enumerate() {
            let want = if i < 8 {
                StepKind::Action
            } else {
                StepKind::Grading
            };
            assert_eq!(s.kind(), want, "{s}");
            assert_eq!(s.number(), (i < 8).then_some(i + 1));
            if let Some(n) = s.number() {
                assert!(s.trial_name().starts_with(&format!("step{n}_")), "{s}");
            }
        }
    }
}
