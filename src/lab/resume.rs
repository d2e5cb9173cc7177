//! Resume, decided in one pure place. A run reads what is recorded into one [`Recorded`] value;
//! [`plan`] decides from it what each step still has to do. A crash at any point leaves a
//! prefix of the record sequence, and the plan for every prefix finishes the rest without
//! redoing (or overwriting) anything that was recorded.

use crate::records::{Record, RecordPaths};
use serde::{Deserialize, Serialize};

/// What the evidence directory holds, in the order the lab writes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recorded {
    pub baseline_sha: bool,
    pub wiring: bool,
    pub baseline_json: bool,
    pub bad_sha: bool,
    /// `revision-bad.json`: when targetRevision was first pointed at the bad SHA.
    pub bad_target_set: bool,
    pub failed_json: bool,
    pub recovered_sha: bool,
    /// `revision-recovered.json`: when targetRevision was first pointed at the revert.
    pub recovered_target_set: bool,
    pub recovered_json: bool,
}

/// The records in write order (the wiring is two files written together), for reading what
/// is recorded, messages and the crash simulation in tests.
pub const RECORD_ORDER: [&[Record]; 9] = [
    &[Record::BaselineSha],
    &[Record::Project, Record::Application],
    &[Record::BaselineJson],
    &[Record::BadSha],
    &[Record::RevisionBad],
    &[Record::FailedJson],
    &[Record::RecoveredSha],
    &[Record::RevisionRecovered],
    &[Record::RecoveredJson],
];

/// "project.json+application.json": one entry of [`RECORD_ORDER`] by name.
pub fn record_names(group: &[Record]) -> String {
    group.iter().map(|r| r.file()).collect::<Vec<_>>().join("+")
}

impl Recorded {
    /// What the evidence directory holds (a `.sha` record is also checked to hold a SHA).
    pub fn read(paths: &RecordPaths) -> anyhow::Result<Self> {
        let mut flags = [false; 9];
        for (flag, group) in flags.iter_mut().zip(RECORD_ORDER) {
            let mut all = true;
            for r in group.iter() {
                let path = paths.path(*r);
                let present = if r.file().ends_with(".sha") {
                    crate::records::read_sha(&path)?.is_some()
                } else {
                    path.exists()
                };
                all &= present;
            }
            *flag = all;
        }
        Ok(Self::from_flags(flags))
    }

    fn from_flags(f: [bool; 9]) -> Self {
        Recorded {
            baseline_sha: f[0],
            wiring: f[1],
            baseline_json: f[2],
            bad_sha: f[3],
            bad_target_set: f[4],
            failed_json: f[5],
            recovered_sha: f[6],
            recovered_target_set: f[7],
            recovered_json: f[8],
        }
    }

    fn flags(&self) -> [bool; 9] {
        [
            self.baseline_sha,
            self.wiring,
            self.baseline_json,
            self.bad_sha,
            self.bad_target_set,
            self.failed_json,
            self.recovered_sha,
            self.recovered_target_set,
            self.recovered_json,
        ]
    }

    /// The first `n` records of [`RECORD_ORDER`] present (a crash after the n-th write).
    pub fn prefix(n: usize) -> Self {
        Self::from_flags(std::array::from_fn(|i| i < n))
    }
}

/// What the plan says for the parts of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub commit_baseline: bool,
    /// Applying the Application at the baseline: only before it was moved to the bad SHA.
    pub apply_application: bool,
    pub wait_first_success: bool,
    pub commit_bad: bool,
    pub point_at_bad: bool,
    pub wait_outage: bool,
    pub commit_revert: bool,
    pub point_at_revert: bool,
    pub wait_recovery: bool,
}

/// Records that exist without the ones they depend on: somebody edited the directory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{present} is recorded but {missing} is not: the evidence directory was changed by hand; reset the lab to start over")]
pub struct Inconsistent {
    pub present: String,
    pub missing: String,
}

/// Decides what is left to do. Records must form a prefix of [`RECORD_ORDER`], except that
/// the evidence of a wait (`baseline.json`) may be missing while later records exist only if
/// it was never going to be needed again, which never happens: any gap is [`Inconsistent`].
pub fn plan(r: &Recorded) -> Result<Plan, Inconsistent> {
    let flags = r.flags();
    if let Some(gap) = flags.iter().position(|f| !f) {
        if let Some(later) = flags[gap..].iter().position(|f| *f) {
            return Err(Inconsistent {
                present: record_names(RECORD_ORDER[gap + later]),
                missing: record_names(RECORD_ORDER[gap]),
            });
        }
    }
    Ok(Plan {
        commit_baseline: !r.baseline_sha,
        apply_application: !r.bad_target_set,
        wait_first_success: !r.baseline_json,
        commit_bad: !r.bad_sha,
        // Re-pointing is idempotent until the outage is recorded; after that the app has moved on.
        point_at_bad: !r.failed_json,
        wait_outage: !r.failed_json,
        commit_revert: !r.recovered_sha,
        point_at_revert: !r.recovered_json,
        wait_recovery: !r.recovered_json,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::seconds_between;

    /// Replays the rest of a run from a plan: each "do" writes the records it owns.
    fn finish(mut r: Recorded) -> (Recorded, Vec<&'static str>) {
        let p = plan(&r).unwrap();
        let mut did = Vec::new();
        let mut act = |cond: bool, name: &'static str, flag: &mut bool| {
            if cond {
                assert!(!*flag, "plan redoes {name}, which is already recorded");
                *flag = true;
                did.push(name);
            }
        };
        act(p.commit_baseline, "commit baseline", &mut r.baseline_sha);
        let wiring_missing = !r.wiring;
        act(
            p.wait_first_success,
            "wait first success",
            &mut r.baseline_json,
        );
        act(p.commit_bad, "commit bad", &mut r.bad_sha);
        if p.point_at_bad && !r.bad_target_set {
            r.bad_target_set = true;
        }
        act(p.wait_outage, "wait outage", &mut r.failed_json);
        act(p.commit_revert, "commit revert", &mut r.recovered_sha);
        if p.point_at_revert && !r.recovered_target_set {
            r.recovered_target_set = true;
        }
        act(p.wait_recovery, "wait recovery", &mut r.recovered_json);
        if wiring_missing {
            r.wiring = true;
            did.push("record wiring");
        }
        (r, did)
    }

    #[test]
    fn a_crash_after_every_record_resumes_to_a_complete_run_without_redoing_anything() {
        for n in 0..=RECORD_ORDER.len() {
            let (done, _) = finish(Recorded::prefix(n));
            assert_eq!(
                done,
                Recorded::prefix(RECORD_ORDER.len()),
                "crash after {n} records"
            );
        }
    }

    #[test]
    fn the_application_is_never_moved_back_to_the_baseline_once_pointed_at_the_bad_sha() {
        for n in 0..=RECORD_ORDER.len() {
            let p = plan(&Recorded::prefix(n)).unwrap();
            assert_eq!(p.apply_application, n <= 4, "after {n} records");
        }
    }

    #[test]
    fn a_crash_between_pointing_and_recording_the_outage_points_again() {
        // revision-bad.json written, failed.json not: the patch may not have happened.
        let p = plan(&Recorded::prefix(5)).unwrap();
        assert!(p.point_at_bad && p.wait_outage && !p.commit_bad);
        // The revert: same rule.
        let p = plan(&Recorded::prefix(8)).unwrap();
        assert!(p.point_at_revert && p.wait_recovery && !p.commit_revert && !p.point_at_bad);
    }

    #[test]
    fn a_complete_run_does_nothing_again() {
        let (_, did) = finish(Recorded::prefix(RECORD_ORDER.len()));
        assert!(did.is_empty(), "{did:?}");
    }

    #[test]
    fn gaps_are_refused_naming_both_files() {
        let r = Recorded {
            baseline_sha: true,
            wiring: true,
            failed_json: true,
            ..Default::default()
        };
        let e = plan(&r).unwrap_err();
        assert_eq!(
            (e.present.as_str(), e.missing.as_str()),
            ("failed.json", "baseline.json")
        );
        assert!(e
            .to_string()
            .contains("failed.json is recorded but baseline.json is not"));
    }

    #[test]
    fn times_are_measured_between_recorded_instants() {
        assert_eq!(
            seconds_between("2026-12-03T07:00:00.000Z", "2026-12-03T07:00:21.350Z"),
            Some(21.35)
        );
        assert_eq!(seconds_between("garbage", "2026-12-03T07:00:21Z"), None);
    }
}
