//! The one reporter of a run (the nextest pattern): the runner, the lab's test binary, the
//! traps and the CLI hand each trial's result to a [`Reporter`], which alone turns an outcome
//! into the stderr line, the libtest verdict and the JUnit case, and at the end writes
//! `timeline.json`, the JUnit files and `report.svg`.

pub mod junit;
pub mod svg;
pub mod timeline;
pub mod waits;

use crate::records;
use junit::{TrialOutcome, TrialRecord};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use timeline::Timeline;

/// How one trial ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// With its one-line summary.
    Passed(String),
    /// With the full explanation.
    Failed(String),
    /// Not run because an earlier action (named) failed: reported as not run (libtest
    /// ignored, JUnit skipped), so the one real failure leads the output.
    Skipped { after: String },
    /// Not run here, with the reason (no cluster, not the hermetic cluster, ...).
    Ignored(String),
}

impl Outcome {
    pub fn passed(&self) -> bool {
        matches!(self, Outcome::Passed(_))
    }

    /// The stderr line the CLI prints for a trial.
    pub fn line(&self, name: &str) -> String {
        match self {
            Outcome::Passed(s) => format!("ok   {name}: {s}"),
            Outcome::Failed(e) => format!("FAIL {name}: {e}"),
            Outcome::Skipped { after } => format!("SKIP {name}: not run, {after} failed"),
            Outcome::Ignored(why) => format!("IGN  {name}: {why}"),
        }
    }

    /// The JUnit case's status.
    pub fn junit(&self) -> TrialOutcome {
        match self {
            Outcome::Passed(_) => TrialOutcome::Passed,
            Outcome::Failed(e) => TrialOutcome::Failed { message: e.clone() },
            Outcome::Skipped { after } => TrialOutcome::Ignored {
                reason: format!("not run: {after} failed"),
            },
            Outcome::Ignored(why) => TrialOutcome::Ignored {
                reason: why.clone(),
            },
        }
    }

    /// The verdict a libtest-mimic trial returns.
    pub fn libtest(&self) -> Result<libtest_mimic::Completion, libtest_mimic::Failed> {
        match self {
            Outcome::Passed(_) => Ok(libtest_mimic::Completion::Completed),
            Outcome::Ignored(why) => Ok(libtest_mimic::Completion::ignored_with(why.clone())),
            Outcome::Failed(e) => Err(e.clone().into()),
            Outcome::Skipped { after } => Ok(libtest_mimic::Completion::ignored_with(format!(
                "not run: {after} failed"
            ))),
        }
    }

    /// From a libtest-mimic verdict (for trials whose body returns one).
    pub fn from_libtest(r: &Result<libtest_mimic::Completion, libtest_mimic::Failed>) -> Self {
        match r {
            Ok(libtest_mimic::Completion::Completed) => Outcome::Passed(String::new()),
            Ok(_) => Outcome::Ignored("not run here (see the banner)".into()),
            Err(e) => Outcome::Failed(e.message().unwrap_or("failed").to_string()),
        }
    }
}

/// One trial's result as the reporter keeps it.
#[derive(Debug, Clone)]
pub struct TrialResult {
    pub name: String,
    pub outcome: Outcome,
    pub seconds: f64,
}

/// The suites that report (closed set): each has its own JUnit file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    Lab,
    Traps,
    /// The any-Application gate's traps.
    ServingTraps,
}

impl Suite {
    pub fn name(self) -> &'static str {
        match self {
            Suite::Lab => "lab",
            Suite::Traps => "traps",
            Suite::ServingTraps => "serving-traps",
        }
    }
}

/// Who reads the stderr lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Echo {
    /// `cnpe-lab run`: a begin line and a result line per trial.
    Cli,
    /// A libtest-mimic binary (which prints its own verdict lines): begin lines and the
    /// summary of each passed trial.
    Libtest,
}

/// The one place a run's results are turned into text, verdicts and files. Shared by the
/// trials of a test binary (interior mutability: libtest-mimic runs them through `Fn`s).
pub struct Reporter {
    suite: Suite,
    dir: PathBuf,
    echo: Echo,
    /// Draw `report.svg`, marking this progress deadline (seconds).
    picture: Option<i64>,
    results: Mutex<Vec<TrialResult>>,
}

impl Reporter {
    pub fn new(suite: Suite, dir: &Path, echo: Echo) -> Self {
        Reporter {
            suite,
            dir: dir.to_path_buf(),
            echo,
            picture: None,
            results: Mutex::new(Vec::new()),
        }
    }

    /// Also draw `report.svg` (the lab's picture) when writing.
    pub fn with_picture(mut self, progress_deadline_seconds: i64) -> Self {
        self.picture = Some(progress_deadline_seconds);
        self
    }

    /// The line announcing a trial (operators, and the kill-and-resume faults, act on it).
    pub fn begin_line(name: &str) -> String {
        format!("--   {name}: begins")
    }

    pub fn begins(&self, name: &str) {
        eprintln!("{}", Self::begin_line(name));
    }

    /// Keeps a result and prints its line.
    pub fn finished(&self, result: TrialResult) {
        match (self.echo, &result.outcome) {
            (Echo::Cli, o) => eprintln!("{}", o.line(&result.name)),
            (Echo::Libtest, Outcome::Passed(s)) if !s.is_empty() => {
                eprintln!("  {}: {s}", result.name)
            }
            (Echo::Libtest, _) => {}
        }
        self.results.lock().unwrap().push(result);
    }

    pub fn results(&self) -> Vec<TrialResult> {
        self.results.lock().unwrap().clone()
    }

    /// (passed, total) so far.
    pub fn tally(&self) -> (usize, usize) {
        let r = self.results.lock().unwrap();
        (r.iter().filter(|t| t.outcome.passed()).count(), r.len())
    }

    /// The closing line of a run: "N passed, N failed", then ", N skipped" when trials did not
    /// run (an earlier one failed, or not here): counted apart, they are not failures of their
    /// own.
    pub fn closing_line(&self) -> String {
        let r = self.results.lock().unwrap();
        let passed = r.iter().filter(|t| t.outcome.passed()).count();
        let failed = r
            .iter()
            .filter(|t| matches!(t.outcome, Outcome::Failed(_)))
            .count();
        let skipped = r.len() - passed - failed;
        match skipped {
            0 => format!("{passed} passed, {failed} failed"),
            n => format!("{passed} passed, {failed} failed, {n} skipped"),
        }
    }

    /// Writes the run's files: `timeline.json` (or `timeline-N.json`; records, never
    /// replaced) when given, then the reports rebuilt from the records: the JUnit files and
    /// `report.svg`. A report that cannot be written is printed, never hidden, and never
    /// fails the lab's own records.
    pub fn write(&self, timeline: Option<&Timeline>) {
        if let Some(t) = timeline {
            match serde_json::to_value(t)
                .map_err(anyhow::Error::from)
                .and_then(|v| records::write_json_numbered(&self.dir, "timeline", &v))
            {
                Ok(p) => eprintln!("{}\ntimeline: {}", t.summary(), p.display()),
                Err(e) => eprintln!("{}\ntimeline not written: {e:#}", t.summary()),
            }
        }
        let trials: Vec<TrialRecord> = self
            .results()
            .iter()
            .map(|r| TrialRecord {
                name: r.name.clone(),
                outcome: r.outcome.junit(),
                seconds: r.seconds,
            })
            .collect();
        match junit::write_junit(&self.dir, self.suite.name(), &trials) {
            Ok(p) => eprintln!("junit: {}", p.display()),
            Err(e) => eprintln!("junit.xml not written: {e:#}"),
        }
        if let Some(deadline) = self.picture {
            match svg::write_report(&self.dir, deadline) {
                Ok(p) => eprintln!("report: {}", p.display()),
                Err(e) => eprintln!("report.svg not written: {e:#}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_mapping_from_an_outcome_to_line_junit_and_libtest() {
        let cases = [
            (Outcome::Passed("done".into()), "ok   t: done", true),
            (Outcome::Failed("why".into()), "FAIL t: why", false),
            (
                Outcome::Skipped {
                    after: "step4".into(),
                },
                "SKIP t: not run, step4 failed",
                true,
            ),
            (
                Outcome::Ignored("no cluster".into()),
                "IGN  t: no cluster",
                true,
            ),
        ];
        for (o, line, libtest_ok) in cases {
            assert_eq!(o.line("t"), line);
            assert_eq!(o.libtest().is_ok(), libtest_ok, "{o:?}");
            let junit_failed = matches!(o.junit(), TrialOutcome::Failed { .. });
            assert_eq!(junit_failed, matches!(o, Outcome::Failed(_)));
            let junit_skipped = matches!(o.junit(), TrialOutcome::Ignored { .. });
            assert_eq!(
                junit_skipped,
                matches!(o, Outcome::Ignored(_) | Outcome::Skipped { .. })
            );
        }
    }

    #[test]
    fn every_reported_trial_reaches_junit() {
        let dir = tempfile::tempdir().unwrap();
        let r = Reporter::new(Suite::Traps, dir.path(), Echo::Libtest);
        for (name, o) in [
            ("a", Outcome::Passed("x".into())),
            ("b", Outcome::Failed("y <&>".into())),
            ("c", Outcome::Ignored("z".into())),
            ("d", Outcome::Skipped { after: "b".into() }),
        ] {
            r.finished(TrialResult {
                name: name.into(),
                outcome: o,
                seconds: 1.0,
            });
        }
        r.write(None);
        let xml = std::fs::read_to_string(dir.path().join("junit-traps.xml")).unwrap();
        let report = quick_junit::Report::deserialize_from_str(&xml).unwrap();
        let names: Vec<&str> = report.test_suites[0]
            .test_cases
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(names, ["a", "b", "c", "d"]);
        let d = &report.test_suites[0].test_cases[3].status;
        assert!(
            matches!(d, quick_junit::TestCaseStatus::Skipped { message: Some(m), .. } if m.as_str() == "not run: b failed"),
            "{d:?}"
        );
        assert_eq!(r.tally(), (1, 4));
        assert_eq!(r.closing_line(), "1 passed, 1 failed, 2 skipped");
    }
}
