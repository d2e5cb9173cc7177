//! The lab's records on disk: `.sha` files and evidence JSON. Write-once: a record, once made,
//! is never overwritten (a rerun may write the identical bytes again, which changes nothing), so
//! the record of the outage survives the recovery and any rerun.

use crate::release_gate::strict_json::MAX_INPUT_BYTES;
use crate::sha::Sha;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    Created,
    /// The file already held exactly these bytes.
    AlreadyRecorded,
}

/// Creates `path` with `bytes`, or confirms it already holds them. Refuses (naming the file) to
/// replace different content. The new file appears atomically and complete: it is written to a
/// temporary name and hard-linked into place, which fails if the name exists.
pub fn write_once(path: &Path, bytes: &[u8]) -> Result<WriteOutcome> {
    if let Some(existing) = read_if_exists(path)? {
        if existing == bytes {
            return Ok(WriteOutcome::AlreadyRecorded);
        }
        bail!(
            "{} already records something else; records are write-once (reset the lab to start over)",
            path.display()
        );
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(dir).with_context(|| format!("creating directory {}", dir.display()))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("record"),
        std::process::id()
    ));
    if let Err(e) = fs::write(&tmp, bytes) {
        // A full or failing filesystem must not leave a half-written temporary file behind.
        let _ = fs::remove_file(&tmp);
        return Err(e)
            .with_context(|| format!("writing {} (for {})", tmp.display(), path.display()));
    }
    let linked = fs::hard_link(&tmp, path);
    let _ = fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(WriteOutcome::Created),
        // Someone created it between our check and the link: compare again, never replace.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => write_once(path, bytes),
        Err(e) => Err(e).with_context(|| format!("creating {}", path.display())),
    }
}

fn read_if_exists(path: &Path) -> Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Reads at most [`MAX_INPUT_BYTES`] + 1 bytes, so an oversized input is detected (and rejected
/// by the parser) without holding it in memory.
pub fn read_bounded(path: &Path) -> Result<Vec<u8>> {
    let file = fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut buf = Vec::new();
    file.take(MAX_INPUT_BYTES as u64 + 1)
        .read_to_end(&mut buf)
        .with_context(|| format!("reading {}", path.display()))?;
    Ok(buf)
}

/// Records a full SHA (as `git rev-parse` prints it: the SHA and a newline).
pub fn write_sha(path: &Path, sha: &Sha) -> Result<WriteOutcome> {
    write_once(path, format!("{sha}\n").as_bytes())
}

/// Reads a `.sha` record; `None` when it does not exist, an error naming the file when it holds
/// anything but one full lowercase SHA.
pub fn read_sha(path: &Path) -> Result<Option<Sha>> {
    let Some(bytes) = read_if_exists(path)? else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(&bytes);
    let sha = text.trim_end_matches('\n');
    match Sha::parse(sha) {
        Ok(sha) => Ok(Some(sha)),
        Err(_) => bail!(
            "{} does not hold a full lowercase SHA (found {:?})",
            path.display(),
            truncate(sha)
        ),
    }
}

/// Records evidence JSON, pretty-printed with a final newline.
pub fn write_json(path: &Path, value: &serde_json::Value) -> Result<WriteOutcome> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    write_once(path, text.as_bytes())
}

/// Writes `value` as `<stem>.json` in `dir`, or as `<stem>-N.json` with the first free N, so
/// a later run never replaces an earlier run's file (timelines, trap verdicts, fault outcomes).
pub fn write_json_numbered(dir: &Path, stem: &str, value: &serde_json::Value) -> Result<PathBuf> {
    let mut n = 1;
    loop {
        let path = dir.join(numbered_name(stem, n));
        if !path.exists() {
            // write_once refuses, never replaces, if another process took the name meanwhile.
            write_json(&path, value)?;
            return Ok(path);
        }
        n += 1;
    }
}

/// The newest of the files [`write_json_numbered`] wrote for `stem` in `dir` (the last run's).
pub fn latest_numbered(dir: &Path, stem: &str) -> Option<PathBuf> {
    (1..)
        .map(|n| dir.join(numbered_name(stem, n)))
        .take_while(|p| p.exists())
        .last()
}

fn numbered_name(stem: &str, n: u32) -> String {
    if n == 1 {
        format!("{stem}.json")
    } else {
        format!("{stem}-{n}.json")
    }
}

/// Reads an evidence file strictly (duplicate keys rejected), naming the file on error.
pub fn read_json(path: &Path) -> Result<Option<serde_json::Value>> {
    if !path.exists() {
        return Ok(None);
    }
    let bytes = read_bounded(path)?;
    let value = crate::release_gate::strict_json::parse_value(&bytes)
        .with_context(|| format!("{} is not valid evidence JSON", path.display()))?;
    Ok(Some(value))
}

fn truncate(s: &str) -> String {
    s.chars().take(60).collect()
}

/// When targetRevision was first pointed at a release (write-once, so a resumed run measures
/// detection and recovery from the original change, not from its own re-patch).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevisionChange {
    pub role: String,
    pub sha: String,
    pub set_at: String,
}

/// Seconds from a recorded targetRevision change to a recorded observation time (RFC 3339).
pub fn seconds_between(from: &str, to: &str) -> Option<f64> {
    let a = chrono::DateTime::parse_from_rfc3339(from).ok()?;
    let b = chrono::DateTime::parse_from_rfc3339(to).ok()?;
    Some((b - a).num_milliseconds() as f64 / 1000.0)
}

/// How a file of the evidence directory is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keeping {
    /// A record: written once, never rewritten.
    WriteOnce,
    /// Appended to only.
    AppendOnly,
    /// One new file per run (`<stem>.json`, then `<stem>-N.json`), never replaced.
    Numbered,
    /// A report rebuilt from the records on every run (or the lock file's hint).
    Regenerated,
}

/// Every file the lab keeps in the evidence directory: the one list of their names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Record {
    BaselineSha,
    BadSha,
    RecoveredSha,
    Project,
    Application,
    BaselineJson,
    FailedJson,
    RecoveredJson,
    /// When targetRevision was first pointed at the bad SHA.
    RevisionBad,
    /// When targetRevision was first pointed at the revert.
    RevisionRecovered,
    /// Every observation of every run, one JSON object per line.
    Observations,
    /// Step 8's deliverable and the compiled gate it runs.
    GatePy,
    GateBinary,
    Timeline,
    Traps,
    Faults,
    /// The any-Application gate's traps (tests/serving_traps.rs).
    GateTraps,
    /// `junit-<suite>.xml`, one per suite.
    JunitSuite,
    Junit,
    ReportSvg,
    Lock,
    /// Which cluster the records belong to (`crate::lab::standing`).
    Cluster,
}

impl Record {
    pub const ALL: [Record; 22] = [
        Record::BaselineSha,
        Record::BadSha,
        Record::RecoveredSha,
        Record::Project,
        Record::Application,
        Record::BaselineJson,
        Record::FailedJson,
        Record::RecoveredJson,
        Record::RevisionBad,
        Record::RevisionRecovered,
        Record::Observations,
        Record::GatePy,
        Record::GateBinary,
        Record::Timeline,
        Record::Traps,
        Record::Faults,
        Record::GateTraps,
        Record::JunitSuite,
        Record::Junit,
        Record::ReportSvg,
        Record::Lock,
        Record::Cluster,
    ];

    /// The file's name (for numbered files the first one's; for `JunitSuite` the prefix).
    pub fn file(self) -> &'static str {
        match self {
            Record::BaselineSha => "baseline.sha",
            Record::BadSha => "bad.sha",
            Record::RecoveredSha => "recovered.sha",
            Record::Project => "project.json",
            Record::Application => "application.json",
            Record::BaselineJson => "baseline.json",
            Record::FailedJson => "failed.json",
            Record::RecoveredJson => "recovered.json",
            Record::RevisionBad => "revision-bad.json",
            Record::RevisionRecovered => "revision-recovered.json",
            Record::Observations => "observations.ndjson",
            Record::GatePy => "release-gate.py",
            Record::GateBinary => "bin/release-gate",
            Record::Timeline => "timeline.json",
            Record::Traps => "traps.json",
            Record::Faults => "faults.json",
            Record::GateTraps => "gate-traps.json",
            Record::JunitSuite => "junit-",
            Record::Junit => "junit.xml",
            Record::ReportSvg => "report.svg",
            Record::Lock => crate::lock::LOCK_FILE,
            Record::Cluster => "cluster.json",
        }
    }

    pub fn keeping(self) -> Keeping {
        match self {
            Record::Observations => Keeping::AppendOnly,
            Record::Timeline | Record::Traps | Record::Faults | Record::GateTraps => {
                Keeping::Numbered
            }
            Record::JunitSuite | Record::Junit | Record::ReportSvg | Record::Lock => {
                Keeping::Regenerated
            }
            _ => Keeping::WriteOnce,
        }
    }

    /// Which record a path relative to the evidence directory is (`timeline-3.json` is a
    /// timeline, `junit-traps.xml` a suite's JUnit file); `None` for a stranger.
    pub fn of_file(rel: &str) -> Option<Record> {
        Record::ALL.into_iter().find(|r| match r.keeping() {
            Keeping::Numbered => {
                let stem = r.file().trim_end_matches(".json");
                rel == r.file()
                    || rel
                        .strip_prefix(stem)
                        .and_then(|rest| rest.strip_prefix('-'))
                        .and_then(|rest| rest.strip_suffix(".json"))
                        .is_some_and(|n| n.parse::<u32>().is_ok())
            }
            _ if *r == Record::JunitSuite => rel.starts_with(r.file()) && rel.ends_with(".xml"),
            _ => rel == r.file(),
        })
    }
}

/// The lab's record files, under the evidence directory.
#[derive(Debug, Clone)]
pub struct RecordPaths {
    pub dir: PathBuf,
}

impl RecordPaths {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    pub fn path(&self, r: Record) -> PathBuf {
        self.dir.join(r.file())
    }

    /// Reads a `.sha` record that must exist (an error names it and the steps that make it).
    pub fn sha(&self, r: Record) -> Result<Sha> {
        let path = self.path(r);
        read_sha(&path)?.ok_or_else(|| {
            anyhow::anyhow!(
                "{} is not recorded yet (run the earlier steps)",
                path.display()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_latest_numbered_file_is_the_last_run_s() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(latest_numbered(dir.path(), "timeline"), None);
        for run in 1..=3 {
            let p = write_json_numbered(dir.path(), "timeline", &serde_json::json!({"run": run}))
                .unwrap();
            assert_eq!(latest_numbered(dir.path(), "timeline"), Some(p));
        }
    }

    use super::*;

    #[test]
    fn write_once_refuses_different_content_and_keeps_the_original() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("failed.json");
        assert_eq!(write_once(&p, b"outage").unwrap(), WriteOutcome::Created);
        assert_eq!(
            write_once(&p, b"outage").unwrap(),
            WriteOutcome::AlreadyRecorded
        );
        let err = write_once(&p, b"healthy").unwrap_err().to_string();
        assert!(err.contains("failed.json"), "{err}");
        assert_eq!(fs::read(&p).unwrap(), b"outage");
        // No temporary files left behind.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn numbered_json_takes_the_next_free_name_and_keeps_the_earlier_files() {
        let dir = tempfile::tempdir().unwrap();
        let first = serde_json::json!({"run": 1});
        let second = serde_json::json!({"run": 2});
        let p1 = write_json_numbered(dir.path(), "timeline", &first).unwrap();
        let p2 = write_json_numbered(dir.path(), "timeline", &second).unwrap();
        let p3 = write_json_numbered(dir.path(), "timeline", &second).unwrap();
        assert_eq!(p1, dir.path().join("timeline.json"));
        assert_eq!(p2, dir.path().join("timeline-2.json"));
        assert_eq!(p3, dir.path().join("timeline-3.json"));
        assert_eq!(read_json(&p1).unwrap(), Some(first));
        assert_eq!(read_json(&p2).unwrap(), Some(second));
    }

    #[test]
    fn sha_file_holding_something_else_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.sha");
        fs::write(&p, "HEAD~1\n").unwrap();
        let err = read_sha(&p).unwrap_err().to_string();
        assert!(err.contains("bad.sha"), "{err}");
        let sha = Sha::parse("0123456789abcdef0123456789abcdef01234567").unwrap();
        assert!(write_sha(&p, &sha).is_err());
        assert_eq!(fs::read(&p).unwrap(), b"HEAD~1\n");
    }

    #[test]
    fn every_file_is_recognised_with_how_it_is_kept() {
        for r in Record::ALL {
            if r != Record::JunitSuite {
                assert_eq!(Record::of_file(r.file()), Some(r), "{r:?}");
            }
        }
        assert_eq!(Record::of_file("timeline-12.json"), Some(Record::Timeline));
        assert_eq!(Record::of_file("traps-2.json"), Some(Record::Traps));
        assert_eq!(Record::of_file("junit-lab.xml"), Some(Record::JunitSuite));
        assert_eq!(Record::of_file("timeline-x.json"), None);
        assert_eq!(Record::of_file("notes.txt"), None);
        assert_eq!(Record::FailedJson.keeping(), Keeping::WriteOnce);
        assert_eq!(Record::Observations.keeping(), Keeping::AppendOnly);
        assert_eq!(Record::ReportSvg.keeping(), Keeping::Regenerated);
    }

    #[test]
    fn sha_round_trip_and_rerun_is_a_no_op() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("baseline.sha");
        let sha = Sha::parse("0123456789abcdef0123456789abcdef01234567").unwrap();
        assert_eq!(write_sha(&p, &sha).unwrap(), WriteOutcome::Created);
        assert_eq!(write_sha(&p, &sha).unwrap(), WriteOutcome::AlreadyRecorded);
        assert_eq!(read_sha(&p).unwrap(), Some(sha));
        // A short or upper-case form never reaches a record: it is not a Sha.
        assert!(Sha::parse("ABCDEF").is_err());
    }
}
