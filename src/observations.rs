//! The append-only record of every observation a run makes (`observations.ndjson`: one JSON
//! object per line, a rerun appends), and the moments the picture marks, read back from the
//! lab's write-once records.

use crate::evidence::Evidence;
use crate::records::RecordPaths;
use crate::resume::RevisionChange;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

/// One observation: the signals the picture shows, at one instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observation {
    pub at: String,
    pub sync: Option<String>,
    pub health: Option<String>,
    pub operation_phase: Option<String>,
    pub target_revision: Option<String>,
    pub observed_revision: Option<String>,
    pub ready_endpoints: i64,
    pub http_code: Option<u16>,
    /// False when the wait did not probe HTTP for this observation (it probes only while the
    /// Kubernetes part of its goal holds): then `http_code` says nothing.
    #[serde(default = "probed_by_default")]
    pub http_probed: bool,
    pub progress_deadline_exceeded: bool,
}

fn probed_by_default() -> bool {
    true
}

impl From<&Evidence> for Observation {
    fn from(ev: &Evidence) -> Self {
        Observation {
            at: ev.observed_at.clone(),
            sync: ev.sync.clone(),
            health: ev.health.clone(),
            operation_phase: ev.operation_phase.clone(),
            target_revision: ev.target_revision.clone(),
            observed_revision: ev.observed_revision.clone(),
            ready_endpoints: ev.ready_endpoints,
            http_code: ev.http_code,
            http_probed: !ev
                .http_error
                .as_deref()
                .is_some_and(|e| e.starts_with(crate::observer::NOT_PROBED)),
            progress_deadline_exceeded: ev.progress_deadline_exceeded,
        }
    }
}

impl Observation {
    /// Argo says Synced while nothing serves: the lab's point.
    pub fn synced_not_serving(&self) -> bool {
        self.sync.as_deref() == Some("Synced")
            && (self.ready_endpoints == 0 || self.http_code != Some(200))
    }
}

/// Appends one line with O_APPEND in a single write, so concurrent appends never interleave
/// within a line and nothing earlier is ever truncated.
pub fn append(path: &Path, obs: &Observation) -> Result<()> {
    let mut line = serde_json::to_vec(obs)?;
    line.push(b'\n');
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    f.write_all(&line)
        .with_context(|| format!("appending to {}", path.display()))
}

/// Every observation, strictly: a malformed line is an error naming the file and the line.
pub fn read_all(path: &Path) -> Result<Vec<Observation>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(o) => out.push(o),
            Err(e) => bail!(
                "{} line {}: not an observation ({e}; line starts {:?})",
                path.display(),
                i + 1,
                line.chars().take(24).collect::<String>()
            ),
        }
    }
    Ok(out)
}

/// What a mark on the picture stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MarkKind {
    /// targetRevision pointed at a release.
    TargetRevisionSet,
    /// The bad release's progress deadline (the change plus progressDeadlineSeconds).
    ProgressDeadline,
    OutageDetected,
    Recovered,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mark {
    pub kind: MarkKind,
    pub at: String,
    pub label: String,
}

fn observed_at(path: &Path) -> Result<Option<String>> {
    Ok(
        crate::records::read_json(path)?
            .and_then(|v| v["observed_at"].as_str().map(str::to_string)),
    )
}

/// The marks, from the write-once records (so a resumed run shows the original change).
pub fn marks(records: &RecordPaths, progress_deadline_seconds: i64) -> Result<Vec<Mark>> {
    let mut out = Vec::new();
    for path in [records.revision_bad(), records.revision_recovered()] {
        let Some(v) = crate::records::read_json(&path)? else {
            continue;
        };
        let c: RevisionChange = serde_json::from_value(v)
            .with_context(|| format!("{} is not a revision change", path.display()))?;
        out.push(Mark {
            kind: MarkKind::TargetRevisionSet,
            at: c.set_at.clone(),
            label: format!("{} {}", c.role, crate::sha::short(&c.sha)),
        });
        if c.role == "bad" {
            if let Ok(t) = chrono::DateTime::parse_from_rfc3339(&c.set_at) {
                let deadline = t + chrono::Duration::seconds(progress_deadline_seconds);
                out.push(Mark {
                    kind: MarkKind::ProgressDeadline,
                    at: deadline.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                    label: format!("progress deadline ({progress_deadline_seconds}s)"),
                });
            }
        }
    }
    if let Some(at) = observed_at(&records.failed_json())? {
        out.push(Mark {
            kind: MarkKind::OutageDetected,
            at,
            label: "outage detected".into(),
        });
    }
    if let Some(at) = observed_at(&records.recovered_json())? {
        out.push(Mark {
            kind: MarkKind::Recovered,
            at,
            label: "recovered".into(),
        });
    }
    out.sort_by(|a, b| a.at.cmp(&b.at));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(at: &str, sync: &str, endpoints: i64, code: Option<u16>) -> Observation {
        Observation {
            at: at.into(),
            sync: Some(sync.into()),
            health: Some("Healthy".into()),
            operation_phase: Some("Succeeded".into()),
            target_revision: None,
            observed_revision: None,
            ready_endpoints: endpoints,
            http_code: code,
            http_probed: true,
            progress_deadline_exceeded: false,
        }
    }

    #[test]
    fn appends_accumulate_and_read_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("observations.ndjson");
        assert!(read_all(&p).unwrap().is_empty());
        let a = obs("2026-12-03T07:00:00.000Z", "Synced", 1, Some(200));
        let b = obs("2026-12-03T07:00:01.000Z", "Synced", 0, Some(503));
        append(&p, &a).unwrap();
        append(&p, &b).unwrap();
        assert_eq!(read_all(&p).unwrap(), vec![a.clone(), b.clone()]);
        assert!(!a.synced_not_serving() && b.synced_not_serving());
        assert_eq!(std::fs::read_to_string(&p).unwrap().lines().count(), 2);
    }

    #[test]
    fn a_malformed_line_names_the_file_and_line_without_dumping_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("observations.ndjson");
        append(&p, &obs("t", "Synced", 1, Some(200))).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .unwrap()
            .write_all(b"{\"at\": \"x\", \"secret\": \"0123456789abcdefghijklmnopqrstuvwxyz\"}\n")
            .unwrap();
        let e = read_all(&p).unwrap_err().to_string();
        assert!(e.contains("observations.ndjson line 2"), "{e}");
        assert!(!e.contains("klmnopqrstuvwxyz"), "{e}");
    }

    #[test]
    fn marks_come_from_the_records_in_time_order() {
        let dir = tempfile::tempdir().unwrap();
        let r = RecordPaths::new(dir.path());
        let sha = "0123456789abcdef0123456789abcdef01234567";
        let change =
            |role: &str, at: &str| serde_json::json!({"role": role, "sha": sha, "set_at": at});
        crate::records::write_json(
            &r.revision_bad(),
            &change("bad", "2026-12-03T07:00:00.000Z"),
        )
        .unwrap();
        crate::records::write_json(
            &r.failed_json(),
            &serde_json::json!({"observed_at": "2026-12-03T07:00:22.000Z"}),
        )
        .unwrap();
        crate::records::write_json(
            &r.revision_recovered(),
            &change("recovered", "2026-12-03T07:00:30.000Z"),
        )
        .unwrap();
        let m = marks(&r, 20).unwrap();
        let kinds: Vec<MarkKind> = m.iter().map(|m| m.kind).collect();
        assert_eq!(
            kinds,
            [
                MarkKind::TargetRevisionSet,
                MarkKind::ProgressDeadline,
                MarkKind::OutageDetected,
                MarkKind::TargetRevisionSet
            ]
        );
        assert_eq!(m[0].label, "bad 0123456");
        assert_eq!(m[1].at, "2026-12-03T07:00:20.000Z");
    }
}
