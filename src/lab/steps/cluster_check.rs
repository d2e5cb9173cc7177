//! Before the first action of a run: are the records this cluster's? (`crate::lab::standing`.)

use crate::lab::resume::Recorded;
use crate::lab::set_aside::set_aside;
use crate::lab::standing::{short_uid, standing, ClusterIdentity, ClusterRecord, Standing};
use crate::lab::{now_rfc3339, Lab};
use crate::records::{self, Record};
use anyhow::{Context, Result};

impl Lab {
    /// Records this cluster when nothing is recorded yet (or the records predate
    /// `cluster.json` and the lab's Application is here); on a new cluster, sets the earlier
    /// run aside so the lab starts from step 1. Returns the one line to say, if any.
    pub(crate) async fn take_stock(&mut self) -> Result<Option<String>> {
        let live = ClusterIdentity {
            kube_system_uid: self.cluster.kube_system_uid().await?,
        };
        let path = self.records.path(Record::Cluster);
        let recorded: Option<ClusterRecord> = records::read_json(&path)?
            .map(|v| {
                serde_json::from_value(v)
                    .with_context(|| format!("{} is not a cluster record", path.display()))
            })
            .transpose()?;
        let other_records = self.recorded()? != Recorded::default();
        let application_exists = match (&recorded, other_records) {
            (None, true) => self.cluster.application().await?.is_some(),
            _ => false,
        };
        let record_this = |lab: &Lab| -> Result<()> {
            let this = ClusterRecord {
                kube_system_uid: live.kube_system_uid.clone(),
                recorded_at: now_rfc3339(),
            };
            records::write_json(
                &lab.records.path(Record::Cluster),
                &serde_json::to_value(this)?,
            )?;
            Ok(())
        };
        match standing(recorded.as_ref(), other_records, &live, application_exists) {
            Standing::Same | Standing::Unknown => Ok(None),
            Standing::Fresh => record_this(self).map(|()| None),
            Standing::Adopted => {
                record_this(self)?;
                Ok(Some(format!(
                    "cnpe-lab: the records do not say which cluster they were made on (made before {}); \
                     Application {} is here, so they are taken as this cluster's and {} now says so",
                    Record::Cluster.file(),
                    self.cfg.application,
                    Record::Cluster.file()
                )))
            }
            Standing::New { recorded } => {
                let moved = set_aside(
                    &self.cfg.evidence_dir,
                    &self.cfg.gitops_dir,
                    &self.cfg.bare_repo,
                    &recorded.recorded_at,
                )?;
                record_this(self)?;
                Ok(Some(format!(
                    "cnpe-lab: a new cluster (kube-system {} here, {} in the records made from {}): \
                     the earlier run is kept intact ({}); the lab starts from step 1",
                    short_uid(&live.kube_system_uid),
                    short_uid(&recorded.kube_system_uid),
                    recorded.recorded_at,
                    moved.describe()
                )))
            }
        }
    }
}
