//! The lab's live state: the one watch layer ([`crate::cluster::watch`]) on the lab's
//! Application, its Deployment and its Service's EndpointSlices, by name and label. One
//! `LiveWatch` is shared by every wait of a run: it costs one list and one watch request per
//! kind (plus a re-watch when the server ends a watch), instead of three GETs per poll, and it
//! wakes a waiter the moment an event arrives.

use crate::cluster::watch::{by_name, Change, Kind, Scope, WatchError, Watches};
use crate::cluster::{Cluster, LiveState};
use kube::runtime::watcher;
use std::time::Duration;
use tokio::sync::mpsc;

pub struct LiveWatch {
    watches: Watches,
    changes: mpsc::UnboundedReceiver<Change>,
}

impl LiveWatch {
    /// Starts the three watches. They fill their stores in the background; [`Self::ready`]
    /// waits for the first complete listing.
    pub fn start(cluster: &Cluster) -> Self {
        let cfg = cluster.config();
        let (tx, changes) = mpsc::unbounded_channel();
        let mut watches = Watches::new(Scope::Namespace(cfg.namespace.clone()));
        watches.add(cluster, Kind::Application, by_name(&cfg.application), &tx);
        watches.add(cluster, Kind::Deployment, by_name(&cfg.workload), &tx);
        watches.add(
            cluster,
            Kind::EndpointSlice,
            watcher::Config::default().labels(&cluster.slice_selector()),
            &tx,
        );
        LiveWatch { watches, changes }
    }

    /// Waits until every watch has listed once, or `deadline` passes (then names the watches
    /// that have not and the last error).
    pub async fn ready(&self, deadline: Duration) -> anyhow::Result<()> {
        self.watches.ready(deadline).await
    }

    /// The objects as the watches last saw them (each watch selects only the lab's objects).
    pub fn snapshot(&self) -> LiveState {
        let s = &self.watches.stores;
        LiveState {
            application: s.applications.state().first().map(|a| (**a).clone()),
            deployment: s.deployments.state().first().map(|d| (**d).clone()),
            slices: s
                .endpoint_slices
                .state()
                .iter()
                .map(|e| (**e).clone())
                .collect(),
        }
    }

    /// Resolves at the next watch event, or after `timeout`. True if something changed; the
    /// events queued meanwhile are taken with it (the waiter re-reads the whole snapshot).
    pub async fn changed(&mut self, timeout: Duration) -> bool {
        match tokio::time::timeout(timeout, self.changes.recv()).await {
            Ok(Some(_)) => {
                while self.changes.try_recv().is_ok() {}
                true
            }
            _ => false,
        }
    }

    pub fn last_error(&self) -> Option<WatchError> {
        self.watches.last_error()
    }
}
