//! Steps 1, 4 and 6: the Git side of the lab (commit, push, revert; history only grows).

use super::settled_note;
use crate::lab::git::{parse_sha, sha_of, GitOps};
use crate::lab::manifests::{self, to_file_bytes, RELEASE_PATH};
use crate::lab::{history, Lab, BAD_MESSAGE};
use crate::records::{self, Record};
use anyhow::{bail, Result};

impl Lab {
    pub(in crate::lab) fn commit_baseline(&mut self) -> Result<String> {
        let git = self.git()?;
        let want = serde_json::to_value(manifests::baseline_release(&self.cfg))?;
        if !self.plan()?.commit_baseline {
            let sha = self.records.sha(Record::BaselineSha)?;
            let diff = manifests::json_diff(&want, &self.pushed_release(&sha)?);
            if !diff.is_empty() {
                bail!("baseline.sha records {sha}, whose {RELEASE_PATH} differs from step 1 at {diff:?}");
            }
            return Ok(format!(
                "resumed: baseline {sha} already recorded and pushed"
            ));
        }
        let bytes = to_file_bytes(&manifests::baseline_release(&self.cfg));
        let oid = git.commit_file(
            RELEASE_PATH,
            &bytes,
            "Baseline release: web serves labhub-cnpe-v1",
        )?;
        git.push()?;
        let sha = sha_of(oid)?;
        records::write_sha(&self.records.path(Record::BaselineSha), &sha)?;
        // Prove it is really on the pushed branch, as Argo CD will fetch it.
        let diff = manifests::json_diff(&want, &self.pushed_release(&sha)?);
        if !diff.is_empty() {
            bail!("pushed release differs from step 1 at {diff:?}");
        }
        Ok(format!(
            "baseline {sha} committed, pushed to {} and recorded{}",
            self.cfg.branch,
            removed_note(&git)
        ))
    }

    pub(in crate::lab) async fn release_bad_commit(&mut self) -> Result<String> {
        let baseline = self.records.sha(Record::BaselineSha)?;
        let plan = self.plan()?;
        let mut summary = if !plan.commit_bad {
            let bad = self.records.sha(Record::BadSha)?;
            let diff = manifests::json_diff(
                &self.pushed_release(&baseline)?,
                &self.pushed_release(&bad)?,
            );
            if diff != [manifests::READINESS_PATH_POINTER] {
                bail!("bad.sha records {bad}, which differs from the baseline at {diff:?}, not only the readiness path");
            }
            format!("resumed: bad {bad} already recorded")
        } else {
            let git = self.git()?;
            let bytes = to_file_bytes(&manifests::bad_release(&self.cfg));
            let head = git.head()?.map(|h| h.to_string());
            // Killed after committing, before recording: adopt that commit, never add another.
            let interrupted = git
                .interrupted_commit(parse_sha(&baseline)?, BAD_MESSAGE)?
                .filter(|h| {
                    git.file_at(*h, RELEASE_PATH).ok().flatten().as_deref() == Some(&bytes[..])
                });
            let (oid, how) = if let Some(h) = interrupted {
                (h, "adopted from an interrupted run")
            } else if head.as_deref() == Some(baseline.as_str()) {
                (
                    git.commit_file(RELEASE_PATH, &bytes, BAD_MESSAGE)?,
                    "committed",
                )
            } else {
                bail!("the working copy's HEAD is not the baseline {baseline}; refusing to build step 4 on anything else");
            };
            git.push()?;
            records::write_sha(&self.records.path(Record::BadSha), &sha_of(oid)?)?;
            format!(
                "bad {oid} {how} (readiness path /not-ready only), pushed and recorded{}",
                removed_note(&git)
            )
        };
        if plan.point_at_bad {
            let bad = self.records.sha(Record::BadSha)?;
            let settled = self
                .point_at("bad", &bad, self.records.path(Record::RevisionBad))
                .await?;
            summary.push_str("; targetRevision set and refresh requested");
            summary.push_str(&settled_note(settled));
        }
        Ok(summary)
    }

    pub(in crate::lab) async fn revert_through_git(&mut self) -> Result<String> {
        let bad = self.records.sha(Record::BadSha)?;
        let plan = self.plan()?;
        let mut summary = if !plan.commit_revert {
            format!(
                "resumed: recovered {} already recorded",
                self.records.sha(Record::RecoveredSha)?
            )
        } else {
            let git = self.git()?;
            let bad_oid = parse_sha(&bad)?;
            // Killed after the revert's commit, before recording it: adopt it (and finish its
            // checkout), never revert twice.
            let interrupted =
                git.interrupted_commit(bad_oid, &format!("This reverts commit {bad}."))?;
            let (oid, how) = if let Some(h) = interrupted {
                git.finish_checkout(bad_oid)?;
                (h, "adopted from an interrupted run")
            } else if git.head()? == Some(bad_oid) {
                (git.revert(bad_oid)?, "committed")
            } else {
                bail!("the working copy's HEAD is not the bad commit {bad}; refusing to revert on top of anything else");
            };
            git.push()?;
            records::write_sha(&self.records.path(Record::RecoveredSha), &sha_of(oid)?)?;
            format!(
                "revert {oid} of {bad} {how}, pushed and recorded{}",
                removed_note(&git)
            )
        };
        let rec = self.records.sha(Record::RecoveredSha)?;
        let baseline = self.records.sha(Record::BaselineSha)?;
        let (same, detail) =
            history::same_app_tree(&self.bare()?, parse_sha(&baseline)?, parse_sha(&rec)?)?;
        if !same {
            bail!("the revert did not restore the baseline's app/ tree: {detail}");
        }
        summary.push_str("; app/ tree equals the baseline's");
        if plan.point_at_revert {
            let settled = self
                .point_at(
                    "recovered",
                    &rec,
                    self.records.path(Record::RevisionRecovered),
                )
                .await?;
            summary.push_str("; targetRevision set and refresh requested");
            summary.push_str(&settled_note(settled));
        }
        Ok(summary)
    }
}

/// "; removed the stale lock file(s) ..." when [`GitOps::prepare`] removed any, else nothing.
fn removed_note(git: &GitOps) -> String {
    let removed = git.removed_locks();
    if removed.is_empty() {
        return String::new();
    }
    let names: Vec<String> = removed.iter().map(|p| p.display().to_string()).collect();
    format!(
        "; removed the stale lock file(s) {} left by a killed run",
        names.join(", ")
    )
}
