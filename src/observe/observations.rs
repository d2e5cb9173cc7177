//! The append-only record of every observation a run makes (`observations.ndjson`: one JSON
//! object per line, a rerun appends), and the moments the picture marks, read back from the
//! lab's write-once records.

use crate::observe::evidence::Evidence;
use crate::records::{Record, RecordPaths, RevisionChange};
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
                .is_some_and(|e| e.starts_with(crate::observe::observer::NOT_PROBED)),
            progress_deadline_exceeded: ev.progress_deadline_exceeded,
        }
    }
}

impl Observation {
    /// Argo says Synced while nothing serves: the lab's point.
    pub fn synced_not_serving(&self) -> bool {
        self.sync.as_deref() == Some("Synced") && self.not_serving()
    }
}

/// The lie window of a bad release, as numbers: how long Argo CD said Synced (and, apart,
/// Healthy) at the bad SHA while the service did not serve (0 ready endpoints, or a probe that
/// did not answer 200), when serving stopped and when Argo CD said Degraded, in seconds after
/// the recorded targetRevision change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LieWindow {
    pub bad_sha: String,
    pub synced_not_serving_seconds: f64,
    pub healthy_not_serving_seconds: f64,
    pub serving_stopped_after_seconds: Option<f64>,
    pub degraded_after_seconds: Option<f64>,
}

impl Observation {
    /// Not serving: no ready endpoint, or a probe that did not get 200.
    pub fn not_serving(&self) -> bool {
        self.ready_endpoints == 0 || (self.http_probed && self.http_code != Some(200))
    }

    fn at_sha(&self, sha: &str) -> bool {
        self.observed_revision.as_deref() == Some(sha)
    }
}

/// The lie window (pure): each observation holds until the next one; only observations from
/// the bad change (`from`) until the next change (`until`, when there was one) count, and the
/// last of them holds until `until`.
pub fn lie_window(
    observations: &[Observation],
    bad_sha: &str,
    from: &str,
    until: Option<&str>,
) -> Option<LieWindow> {
    use chrono::DateTime;
    let t0 = DateTime::parse_from_rfc3339(from).ok()?;
    let end = until.and_then(|u| DateTime::parse_from_rfc3339(u).ok());
    let mut timed: Vec<(f64, &Observation)> = observations
        .iter()
        .filter_map(|o| {
            let t = DateTime::parse_from_rfc3339(&o.at).ok()?;
            let in_range = t >= t0 && end.is_none_or(|e| t < e);
            in_range.then(|| ((t - t0).num_milliseconds() as f64 / 1000.0, o))
        })
        .collect();
    timed.sort_by(|a, b| a.0.total_cmp(&b.0));
    let end_s = end.map(|e| (e - t0).num_milliseconds() as f64 / 1000.0);
    let mut w = LieWindow {
        bad_sha: bad_sha.to_string(),
        synced_not_serving_seconds: 0.0,
        healthy_not_serving_seconds: 0.0,
        serving_stopped_after_seconds: None,
        degraded_after_seconds: None,
    };
    for (i, (t, o)) in timed.iter().enumerate() {
        let next = timed.get(i + 1).map(|(n, _)| *n).or(end_s).unwrap_or(*t);
        let dt = (next - t).max(0.0);
        let lying = o.at_sha(bad_sha) && o.not_serving();
        if lying && o.sync.as_deref() == Some("Synced") {
            w.synced_not_serving_seconds += dt;
            if o.health.as_deref() == Some("Healthy") {
                w.healthy_not_serving_seconds += dt;
            }
        }
        if o.not_serving() && w.serving_stopped_after_seconds.is_none() {
            w.serving_stopped_after_seconds = Some(*t);
        }
        if o.at_sha(bad_sha)
            && o.health.as_deref() == Some("Degraded")
            && w.degraded_after_seconds.is_none()
        {
            w.degraded_after_seconds = Some(*t);
        }
    }
    let round = |x: f64| (x * 1000.0).round() / 1000.0;
    w.synced_not_serving_seconds = round(w.synced_not_serving_seconds);
    w.healthy_not_serving_seconds = round(w.healthy_not_serving_seconds);
    Some(w)
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
    for path in [
        records.path(Record::RevisionBad),
        records.path(Record::RevisionRecovered),
    ] {
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
    if let Some(at) = observed_at(&records.path(Record::FailedJson))? {
        out.push(Mark {
            kind: MarkKind::OutageDetected,
            at,
            label: "outage detected".into(),
        });
    }
    if let Some(at) = observed_at(&records.path(Record::RecoveredJson))? {
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
    fn concurrent_appends_keep_every_line_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("observations.ndjson");
        let (writers, each) = (8, 200);
        std::thread::scope(|s| {
            for w in 0..writers {
                let p = &p;
                s.spawn(move || {
                    for i in 0..each {
                        let mut o = obs(&format!("w{w}-{i}"), "Synced", i, Some(200));
                        // Long lines make a torn write likely if appends were not atomic.
                        o.target_revision = Some("x".repeat(3000));
                        append(p, &o).unwrap();
                    }
                });
            }
        });
        let all = read_all(&p).unwrap();
        assert_eq!(all.len(), writers * each as usize);
        for w in 0..writers {
            let mine: Vec<i64> = all
                .iter()
                .filter(|o| o.at.starts_with(&format!("w{w}-")))
                .map(|o| o.ready_endpoints)
                .collect();
            // Each writer's lines are all there, in the order it wrote them.
            assert_eq!(mine, (0..each).collect::<Vec<_>>(), "writer {w}");
        }
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
    fn the_lie_window_counts_synced_at_the_bad_sha_while_not_serving() {
        let bad = "b".repeat(40);
        let good = "a".repeat(40);
        let at = |s: u32| format!("2026-12-03T07:00:{s:02}.000Z");
        let o = |s: u32, sync: &str, health: &str, rev: &str, endpoints: i64, code: Option<u16>| {
            let mut x = obs(&at(s), sync, endpoints, code);
            x.health = Some(health.into());
            x.observed_revision = Some(rev.into());
            x
        };
        let timeline = vec![
            o(0, "Synced", "Healthy", &good, 1, Some(200)), // before the change: not counted
            o(2, "OutOfSync", "Healthy", &good, 1, Some(200)),
            o(3, "Synced", "Healthy", &bad, 0, Some(503)), // stale Healthy, nothing serves
            o(5, "Synced", "Progressing", &bad, 0, Some(503)),
            o(22, "Synced", "Degraded", &bad, 0, Some(503)),
            o(40, "Synced", "Healthy", &good, 1, Some(200)), // after the revert: not counted
        ];
        let w = lie_window(&timeline, &bad, &at(1), Some(&at(30))).unwrap();
        assert_eq!(w.synced_not_serving_seconds, 27.0); // 3..30
        assert_eq!(w.healthy_not_serving_seconds, 2.0); // 3..5
        assert_eq!(w.serving_stopped_after_seconds, Some(2.0));
        assert_eq!(w.degraded_after_seconds, Some(21.0));
        // A probe that did not run says nothing: endpoints decide.
        let mut unprobed = o(3, "Synced", "Healthy", &bad, 1, None);
        unprobed.http_probed = false;
        let quiet = lie_window(&[unprobed], &bad, &at(1), Some(&at(4))).unwrap();
        assert_eq!(quiet.synced_not_serving_seconds, 0.0);
    }

    #[test]
    fn marks_come_from_the_records_in_time_order() {
        let dir = tempfile::tempdir().unwrap();
        let r = RecordPaths::new(dir.path());
        let sha = "0123456789abcdef0123456789abcdef01234567";
        let change =
            |role: &str, at: &str| serde_json::json!({"role": role, "sha": sha, "set_at": at});
        crate::records::write_json(
            &r.path(Record::RevisionBad),
            &change("bad", "2026-12-03T07:00:00.000Z"),
        )
        .unwrap();
        crate::records::write_json(
            &r.path(Record::FailedJson),
            &serde_json::json!({"observed_at": "2026-12-03T07:00:22.000Z"}),
        )
        .unwrap();
        crate::records::write_json(
            &r.path(Record::RevisionRecovered),
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
