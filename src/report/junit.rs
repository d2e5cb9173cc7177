//! `junit.xml` from the lab's and the traps' trials, written with quick-junit (a maintained
//! JUnit data model and serializer) rather than hand-made XML. Each suite keeps its own
//! `junit-<suite>.xml`; `junit.xml` is rebuilt from all of them, so the lab and the traps
//! both appear whichever ran last.

use anyhow::{Context, Result};
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How one trial ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TrialOutcome {
    Passed,
    /// The failure text is our full explanation.
    Failed {
        message: String,
    },
    Ignored {
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct TrialRecord {
    pub name: String,
    pub outcome: TrialOutcome,
    pub seconds: f64,
}

fn suite(name: &str, trials: &[TrialRecord]) -> TestSuite {
    let mut s = TestSuite::new(name);
    for t in trials {
        let status = match &t.outcome {
            TrialOutcome::Passed => TestCaseStatus::success(),
            TrialOutcome::Failed { message } => {
                let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
                st.set_message(message.lines().next().unwrap_or("failed"));
                st.set_description(message.clone());
                st
            }
            TrialOutcome::Ignored { reason } => {
                let mut st = TestCaseStatus::skipped();
                st.set_message(reason.clone());
                st
            }
        };
        let mut case = TestCase::new(t.name.clone(), status);
        case.set_time(Duration::from_secs_f64(t.seconds.max(0.0)));
        s.add_test_case(case);
    }
    s
}

/// One suite as JUnit XML (pure).
pub fn to_junit_xml(suite_name: &str, trials: &[TrialRecord]) -> Result<String> {
    let mut r = Report::new("cnpe-lab");
    r.add_test_suite(suite(suite_name, trials));
    Ok(r.to_string()?)
}

/// Writes `junit-<suite>.xml` and rebuilds `junit.xml` from every suite file in `dir`, under
/// a lock: two suites finishing together each keep their suite in `junit.xml`. Both files are
/// replaced atomically (a reader never sees half of one).
pub fn write_junit(dir: &Path, suite_name: &str, trials: &[TrialRecord]) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let lock_path = dir.join(".junit.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("opening {}", lock_path.display()))?;
    lock.lock()
        .with_context(|| format!("locking {}", lock_path.display()))?;
    let own = dir.join(format!("junit-{suite_name}.xml"));
    replace(&own, &to_junit_xml(suite_name, trials)?)?;
    let mut all = Report::new("cnpe-lab");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("junit-") && n.ends_with(".xml"))
        })
        .collect();
    files.sort();
    for f in files {
        let xml =
            std::fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?;
        let parsed = Report::deserialize_from_str(&xml)
            .with_context(|| format!("{} is not JUnit XML", f.display()))?;
        all.add_test_suites(parsed.test_suites);
    }
    let path = dir.join("junit.xml");
    replace(&path, &all.to_string()?)?;
    Ok(path)
}

/// Writes `path` through a temporary file renamed over it.
fn replace(path: &Path, text: &str) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    std::io::Write::write_all(&mut tmp, text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    tmp.persist(path)
        .with_context(|| format!("replacing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trials() -> Vec<TrialRecord> {
        vec![
            TrialRecord {
                name: "step1".into(),
                outcome: TrialOutcome::Passed,
                seconds: 0.5,
            },
            TrialRecord {
                name: "step5".into(),
                outcome: TrialOutcome::Failed {
                    message: "wait failed: not reached\nhealth: want Degraded".into(),
                },
                seconds: 45.0,
            },
            TrialRecord {
                name: "trap".into(),
                outcome: TrialOutcome::Ignored {
                    reason: "no cluster".into(),
                },
                seconds: 0.0,
            },
        ]
    }

    #[test]
    fn suites_round_trip_with_failures_and_skips() {
        let xml = to_junit_xml("lab", &trials()).unwrap();
        let r = Report::deserialize_from_str(&xml).unwrap();
        let s = &r.test_suites[0];
        assert_eq!(
            (s.name.as_str(), s.test_cases.len(), s.failures, s.tests),
            ("lab", 3, 1, 3)
        );
        assert!(xml.contains("health: want Degraded"), "{xml}");
        assert!(xml.contains("<skipped"), "{xml}");
    }

    #[test]
    fn failure_text_with_markup_characters_round_trips() {
        let nasty = "want <body> & \"quotes\" 'apos' ]]> <![CDATA[ x ]]>\nline 2 & <b>";
        let xml = to_junit_xml(
            "traps",
            &[TrialRecord {
                name: "t<&>".into(),
                outcome: TrialOutcome::Failed {
                    message: nasty.into(),
                },
                seconds: 1.0,
            }],
        )
        .unwrap();
        let r = Report::deserialize_from_str(&xml).unwrap();
        let case = &r.test_suites[0].test_cases[0];
        assert_eq!(case.name.as_str(), "t<&>");
        let TestCaseStatus::NonSuccess { description, .. } = &case.status else {
            panic!("not a failure: {:?}", case.status)
        };
        assert_eq!(
            description.as_ref().map(|d| d.to_string()).as_deref(),
            Some(nasty)
        );
    }

    #[test]
    fn suites_finishing_together_both_reach_junit_xml() {
        for round in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let names = ["lab", "traps", "serving-traps", "extra"];
            std::thread::scope(|s| {
                for n in names {
                    let d = dir.path();
                    s.spawn(move || write_junit(d, n, &trials()).unwrap());
                }
            });
            let r = Report::deserialize_from_str(
                &std::fs::read_to_string(dir.path().join("junit.xml")).unwrap(),
            )
            .unwrap();
            let mut got: Vec<&str> = r.test_suites.iter().map(|s| s.name.as_str()).collect();
            got.sort();
            let mut want = names.to_vec();
            want.sort();
            assert_eq!(got, want, "round {round}");
        }
    }

    #[test]
    fn junit_xml_holds_every_suite_and_a_rerun_replaces_only_its_own() {
        let dir = tempfile::tempdir().unwrap();
        write_junit(dir.path(), "lab", &trials()).unwrap();
        write_junit(dir.path(), "traps", &trials()[..1]).unwrap();
        write_junit(dir.path(), "lab", &trials()[..2]).unwrap();
        let r = Report::deserialize_from_str(
            &std::fs::read_to_string(dir.path().join("junit.xml")).unwrap(),
        )
        .unwrap();
        let names: Vec<(&str, usize)> = r
            .test_suites
            .iter()
            .map(|s| (s.name.as_str(), s.test_cases.len()))
            .collect();
        assert_eq!(names, [("lab", 2), ("traps", 1)]);
    }
}
