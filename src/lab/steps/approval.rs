//! Step 8: `release-gate.py` installed where the grader runs it, tested as processes.

use crate::lab::{ok_or_resumed, Lab};
use crate::records::{self, Record};
use crate::release_gate as gate;
use anyhow::{bail, Result};
use std::path::Path;

impl Lab {
    /// Step 8: installs `release-gate.py` (write-once) where the lab's grader runs it, then
    /// tests the gate THROUGH that file, as processes: it approves the recovery, rejects the
    /// outage, the stale baseline and every per-field counterexample (in a temporary copy),
    /// and leaves recovered.json's bytes and mtime untouched.
    pub(in crate::lab) fn approve_release(&mut self) -> Result<String> {
        let rec = self.records.sha(Record::RecoveredSha)?;
        let bad = self.records.sha(Record::BadSha)?;
        let body = self.cfg.body.clone();
        let installed = crate::lab::launcher::install(
            &self.records.dir,
            &crate::lab::launcher::gate_binary()?,
        )?;
        let script = self.records.path(Record::GatePy);
        let recovered_path = self.records.path(Record::RecoveredJson);
        let before = (
            records::read_bounded(&recovered_path)?,
            std::fs::metadata(&recovered_path)?.modified()?,
        );
        let verdict = |state: &Path, sha: &str| -> Result<(bool, String)> {
            let out = crate::lab::launcher::run_py(&script, state, sha, &body)?;
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            Ok((out.status.success(), text.trim().to_string()))
        };
        let (ok, text) = verdict(&recovered_path, &rec)?;
        if !ok {
            bail!("{} rejects recovered.json: {text}", script.display());
        }
        for (name, path, sha) in [
            (
                "failed.json (the recorded outage) for the bad SHA",
                self.records.path(Record::FailedJson),
                &bad,
            ),
            (
                "failed.json (the recorded outage) for the recovered SHA",
                self.records.path(Record::FailedJson),
                &rec,
            ),
            (
                "baseline.json (a stale revision) for the recovered SHA",
                self.records.path(Record::BaselineJson),
                &rec,
            ),
        ] {
            if verdict(&path, sha)?.0 {
                bail!(
                    "negative control broken: {} approves {name}",
                    script.display()
                );
            }
        }
        let tmp = tempfile::tempdir()?;
        let copy = tmp.path().join("state.json");
        let base: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&before.0)?;
        let states = crate::lab::grade::counterexample_states(&base);
        let mut escaped = Vec::new();
        for (field, label, state) in &states {
            std::fs::write(&copy, serde_json::to_vec_pretty(state)?)?;
            let (approved, text) = verdict(&copy, &rec)?;
            // The compiled gate also names the field; the in-process verdict checks that.
            let named = gate::evaluate_bytes(&std::fs::read(&copy)?, &rec, &body)
                .failing_fields()
                .contains(field);
            if approved || !named {
                escaped.push(format!("{field} {label}: {text}"));
            }
        }
        let after = (
            records::read_bounded(&recovered_path)?,
            std::fs::metadata(&recovered_path)?.modified()?,
        );
        if after != before {
            bail!("recovered.json changed during the gate checks");
        }
        if !escaped.is_empty() {
            bail!("counterexamples release-gate.py did not reject by name: {escaped:?}");
        }
        if states.len() < 5 * gate::REQUIRED_FIELDS.len() {
            bail!(
                "only {} counterexamples evaluated: the check would prove little",
                states.len()
            );
        }
        Ok(format!(
            "{} {}; as processes it approves recovered.json, rejects failed.json and the stale baseline.json and all {} \
             counterexamples by field; recovered.json untouched",
            script.display(),
            ok_or_resumed(installed.script_outcome),
            states.len()
        ))
    }
}
