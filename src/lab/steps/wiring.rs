//! Step 2 and its grading check: the least-privilege AppProject and the Application.

use super::settled_note;
use crate::lab::manifests::{self, to_file_bytes};
use crate::lab::{ok_or_resumed, Lab};
use crate::records::{self, Record};
use crate::sha::Sha;
use anyhow::{anyhow, bail, Result};

impl Lab {
    pub(in crate::lab) async fn apply_wiring(&mut self) -> Result<String> {
        let baseline = self.records.sha(Record::BaselineSha)?;
        let plan = self.plan()?;
        let project = manifests::project(&self.cfg);
        let application = manifests::application(&self.cfg, &baseline);
        let p = records::write_once(
            &self.records.path(Record::Project),
            &to_file_bytes(&project),
        )?;
        let a = records::write_once(
            &self.records.path(Record::Application),
            &to_file_bytes(&application),
        )?;
        self.cluster.ensure_namespace().await?;
        self.cluster.apply_project(&project).await?;
        if plan.apply_application {
            self.cluster.apply_application(&application).await?;
        } else if self.cluster.application().await?.is_none() {
            let why = if self.records.path(Record::Cluster).exists() {
                "the records' own cluster, by cluster.json: was the Application deleted?"
            } else {
                "a new cluster? the records have no cluster.json to tell"
            };
            bail!(
                "{} records later steps, but Application {} does not exist on this cluster ({why}). \
                 The records are kept; to start over run `cnpe-lab reset --yes` (deletes them) or point \
                 CNPE_EVIDENCE_DIR, CNPE_GITOPS_DIR and CNPE_BARE_REPO at fresh directories",
                self.records.path(Record::RevisionBad).display(),
                self.cfg.application
            );
        }
        let settled = self
            .cluster
            .settle_project_reference(self.cfg.wait_deadline)
            .await?;
        let expect = if plan.apply_application {
            Some(baseline)
        } else {
            None
        };
        self.grade_live_wiring(expect).await?;
        Ok(format!(
            "project.json {}, application.json {}; {}; live wiring is least-privilege{}",
            ok_or_resumed(p),
            ok_or_resumed(a),
            if plan.apply_application {
                "both applied"
            } else {
                "application left at its later revision"
            },
            settled_note(settled)
        ))
    }

    /// Step 2's checks against the live objects: everything the grader reads.
    pub(in crate::lab) async fn grade_live_wiring(
        &mut self,
        expect_revision: Option<Sha>,
    ) -> Result<String> {
        let expect_revision = match expect_revision {
            Some(r) => Some(r),
            None => records::read_sha(&self.records.path(Record::RecoveredSha))?,
        };
        let project = self
            .cluster
            .project()
            .await?
            .ok_or_else(|| anyhow!("AppProject {} not found", self.cfg.project))?;
        let app = self
            .cluster
            .application()
            .await?
            .ok_or_else(|| anyhow!("Application {} not found", self.cfg.application))?;
        let problems =
            crate::lab::grade::wiring(&self.cfg, &project, &app, expect_revision.as_deref());
        if !problems.is_empty() {
            bail!("live wiring is wrong:\n  - {}", problems.join("\n  - "));
        }
        Ok("project allows one repo, one destination, Deployment+Service, no cluster kinds; application wired".into())
    }
}
