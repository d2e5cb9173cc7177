//! The grader's checks: Git history, the saved records and the live service.

use crate::lab::{history, keep_observation, Lab};
use crate::observe::explain;
use crate::observe::predicates::{self, Target};
use crate::records::{self, Record};
use crate::release_gate as gate;
use anyhow::{bail, Result};

impl Lab {
    pub(in crate::lab) fn grade_git_history(&mut self) -> Result<String> {
        let (b, x, r) = (
            self.records.sha(Record::BaselineSha)?,
            self.records.sha(Record::BadSha)?,
            self.records.sha(Record::RecoveredSha)?,
        );
        let report = history::check(&self.bare()?, &self.cfg, &b, &x, &r);
        if !report.passed() {
            bail!("git history fails the grader:\n{}", report.render());
        }
        Ok(format!("{} history checks pass", report.checks.len()))
    }

    pub(in crate::lab) fn grade_saved_records(&mut self) -> Result<String> {
        let (b, x, r) = (
            self.records.sha(Record::BaselineSha)?,
            self.records.sha(Record::BadSha)?,
            self.records.sha(Record::RecoveredSha)?,
        );
        let mut missing = Vec::new();
        for (path, target, sha) in [
            (self.records.path(Record::BaselineJson), Target::Healthy, &b),
            (self.records.path(Record::FailedJson), Target::Failed, &x),
            (
                self.records.path(Record::RecoveredJson),
                Target::Healthy,
                &r,
            ),
        ] {
            if self.recorded_evidence(&path, target, sha)?.is_none() {
                missing.push(path.display().to_string());
            }
        }
        let project = records::read_json(&self.records.path(Record::Project))?;
        let app = records::read_json(&self.records.path(Record::Application))?;
        missing.extend(crate::lab::grade::recorded_manifests(
            &self.cfg,
            &b,
            project.as_ref(),
            app.as_ref(),
        ));
        if !missing.is_empty() {
            bail!("records missing or wrong: {missing:?}");
        }
        Ok("3 sha files, project.json, application.json and 3 evidence files re-read and consistent".into())
    }

    pub(in crate::lab) async fn grade_live_service(&mut self) -> Result<String> {
        let rec = self.records.sha(Record::RecoveredSha)?;
        let ev = self.observe().await?;
        keep_observation(&self.records.path(Record::Observations), &ev);
        let unmet = predicates::healthy(&ev, &rec, &self.cfg.body);
        if !unmet.is_empty() {
            let cluster = self.cluster.clone();
            let cx = crate::observe::observer::context(&cluster, self.live(), None, &[]).await;
            bail!(
                "the live service is not healthy at the recovered SHA:\n{}",
                explain::explain(Target::Healthy, &rec, &unmet, &ev, &cx)
            );
        }
        let v = gate::evaluate_value(&ev.to_value(), &rec, &self.cfg.body);
        if !v.approved {
            bail!(
                "the gate rejects the live state: {}",
                v.report_lines().join("; ")
            );
        }
        Ok(format!(
            "live: Synced, Healthy, HTTP 200 {:?} at {rec}; gate approves",
            ev.http_body.as_deref().unwrap_or("")
        ))
    }
}
