//! Which cluster the records belong to, decided in one pure place. A run records the cluster it
//! starts on (`cluster.json`: the `kube-system` namespace's UID, which every new cluster gets
//! afresh and no restart of the same one changes). On the next run the live UID says whether
//! the records are this cluster's (resume), another cluster's (set them aside and start over:
//! the hermetic cluster loses its objects whenever it stops, kind's `down.sh` deletes its
//! cluster), or nobody knows (records made before runs kept `cluster.json`).

use serde::{Deserialize, Serialize};

/// What identifies a cluster: its `kube-system` namespace's UID.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterIdentity {
    pub kube_system_uid: String,
}

/// `cluster.json`: the cluster a run's records were made on, and when the first of them was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterRecord {
    pub kube_system_uid: String,
    pub recorded_at: String,
}

/// A UID's first group, for messages.
pub fn short_uid(uid: &str) -> &str {
    uid.split('-').next().unwrap_or(uid)
}

/// What the records are to the live cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// Nothing recorded yet: a first run; record this cluster.
    Fresh,
    /// `cluster.json` names this cluster: resume from the records.
    Same,
    /// `cluster.json` names another cluster: the earlier run's records, working copy and bare
    /// repository go aside intact and the lab starts from step 1.
    New { recorded: ClusterRecord },
    /// Records without `cluster.json`, and the lab's Application exists here: the records are
    /// taken to be this cluster's (as every run did before `cluster.json`); record it.
    Adopted,
    /// Records without `cluster.json`, and no Application: maybe a new cluster, maybe one whose
    /// Application was deleted. Nothing is moved or recorded; step 2 refuses as it always has.
    Unknown,
}

/// Decides from what is recorded (`recorded`: `cluster.json`; `other_records`: any other lab
/// record), the live identity and whether the lab's Application exists.
pub fn standing(
    recorded: Option<&ClusterRecord>,
    other_records: bool,
    live: &ClusterIdentity,
    application_exists: bool,
) -> Standing {
    match recorded {
        Some(r) if r.kube_system_uid == live.kube_system_uid => Standing::Same,
        Some(r) => Standing::New {
            recorded: r.clone(),
        },
        None if !other_records => Standing::Fresh,
        None if application_exists => Standing::Adopted,
        None => Standing::Unknown,
    }
}

/// The dated name a path is set aside under, beside it: `cnpe` recorded on
/// 2026-12-05T10:15:00.123Z becomes `cnpe.earlier-20261205T101500Z`. Derived from the record, so
/// an interrupted move resumes into the same folder.
pub fn aside_name(name: &str, recorded_at: &str) -> String {
    let stamp: String = recorded_at
        .split('.')
        .next()
        .unwrap_or(recorded_at)
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    let stamp = if stamp.ends_with('Z') {
        stamp
    } else {
        format!("{stamp}Z")
    };
    format!("{name}.earlier-{stamp}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn id(uid: &str) -> ClusterIdentity {
        ClusterIdentity {
            kube_system_uid: uid.into(),
        }
    }

    fn rec(uid: &str) -> ClusterRecord {
        ClusterRecord {
            kube_system_uid: uid.into(),
            recorded_at: "2026-12-05T10:15:00.123Z".into(),
        }
    }

    #[rstest]
    #[case::first_run(None, false, true, Standing::Fresh)]
    #[case::first_run_app_left_over(None, false, false, Standing::Fresh)]
    #[case::same_cluster(Some("aaaa-1"), true, true, Standing::Same)]
    #[case::same_cluster_app_deleted(Some("aaaa-1"), true, false, Standing::Same)]
    #[case::new_cluster(Some("bbbb-2"), true, false, Standing::New { recorded: rec("bbbb-2") })]
    #[case::new_cluster_with_an_app_of_that_name(Some("bbbb-2"), true, true, Standing::New { recorded: rec("bbbb-2") })]
    #[case::old_records_app_here(None, true, true, Standing::Adopted)]
    #[case::old_records_no_app(None, true, false, Standing::Unknown)]
    fn records_against_the_live_cluster(
        #[case] recorded_uid: Option<&str>,
        #[case] other_records: bool,
        #[case] application_exists: bool,
        #[case] want: Standing,
    ) {
        let recorded = recorded_uid.map(rec);
        assert_eq!(
            standing(
                recorded.as_ref(),
                other_records,
                &id("aaaa-1"),
                application_exists
            ),
            want
        );
    }

    #[test]
    fn the_aside_name_is_dated_by_the_record_and_stable() {
        assert_eq!(
            aside_name("cnpe", "2026-12-05T10:15:00.123Z"),
            "cnpe.earlier-20261205T101500Z"
        );
        assert_eq!(
            aside_name("app.git", "2026-12-05T10:15:00Z"),
            "app.git.earlier-20261205T101500Z"
        );
        assert_eq!(short_uid("5f1c2d3e-aaaa-bbbb"), "5f1c2d3e");
    }
}
