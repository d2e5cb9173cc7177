//! Steps 3, 5 and 7: wait on live state for the first success, the outage and the recovery,
//! and record each write-once.

use crate::lab::{Lab, StepDone};
use crate::observe::predicates::Target;
use crate::records::Record;
use anyhow::Result;

impl Lab {
    pub(in crate::lab) async fn record_first_success(&mut self) -> Result<StepDone> {
        let sha = self.records.sha(Record::BaselineSha)?;
        let path = self.records.path(Record::BaselineJson);
        if !self.plan()?.wait_first_success {
            self.recorded_evidence(&path, Target::Healthy, &sha)?;
            return Ok("resumed: baseline.json already records the first success".into());
        }
        let (_, wait) = self.wait_and_record(Target::Healthy, &sha, path).await?;
        Ok(StepDone {
            summary: format!(
                "healthy at baseline {sha} after {:.1}s; baseline.json recorded",
                wait.seconds
            ),
            waits: vec![wait],
        })
    }

    pub(in crate::lab) async fn observe_outage(&mut self) -> Result<StepDone> {
        let bad = self.records.sha(Record::BadSha)?;
        let path = self.records.path(Record::FailedJson);
        if !self.plan()?.wait_outage {
            self.recorded_evidence(&path, Target::Failed, &bad)?;
            return Ok("resumed: failed.json already records the outage".into());
        }
        let (ev, wait) = self.wait_and_record(Target::Failed, &bad, path).await?;
        let http = ev.http_code.map_or_else(
            || format!("no response ({})", ev.http_error.as_deref().unwrap_or("?")),
            |c| c.to_string(),
        );
        Ok(StepDone {
            summary: format!(
                "Synced + {} with ProgressDeadlineExceeded, 0 ready endpoints, HTTP {http} after {:.1}s; \
                 failed.json recorded",
                ev.health.as_deref().unwrap_or("?"),
                wait.seconds
            ),
            waits: vec![wait],
        })
    }

    pub(in crate::lab) async fn verify_recovery(&mut self) -> Result<StepDone> {
        let rec = self.records.sha(Record::RecoveredSha)?;
        let path = self.records.path(Record::RecoveredJson);
        if !self.plan()?.wait_recovery {
            self.recorded_evidence(&path, Target::Healthy, &rec)?;
            return Ok(
                "resumed: recovered.json already records the recovery (live service graded below)"
                    .into(),
            );
        }
        let (_, wait) = self.wait_and_record(Target::Healthy, &rec, path).await?;
        Ok(StepDone {
            summary: format!(
                "healthy at recovered {rec} after {:.1}s; recovered.json recorded",
                wait.seconds
            ),
            waits: vec![wait],
        })
    }
}
