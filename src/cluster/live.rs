//! Live state from watches (kube-runtime reflectors) on the Application, the Deployment and the
//! workload's EndpointSlices. One `LiveWatch` is shared by every wait of a run: it costs one
//! list and one watch request per object kind (plus a re-watch when the server ends a watch),
//! instead of three GETs per poll, and it wakes a waiter the moment an event arrives.

use crate::cluster::argo::Application;
use crate::cluster::{Cluster, LiveState};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::{self, Store};
use kube::runtime::utils::ResetTimerBackoff;
use kube::runtime::{watcher, WatchStreamExt};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The longest pause between two attempts of a failing watch.
pub const RETRY_CAP: Duration = Duration::from_secs(2);

/// Exponential from 200 ms to [`RETRY_CAP`] with jitter, reset after a minute without errors:
/// kube-runtime's own [`watcher::ExponentialBackoff`], configured through its public
/// `From<ExponentialBuilder>`. Every watch of ours (the lab's waits, `cnpe-lab gate`) uses it:
/// a transient API error (API server restart, network blip) is retried until the waiter's own
/// deadline, and the waiter must see the server back within seconds, not kube's default 30 s.
pub fn watch_backoff() -> ResetTimerBackoff<watcher::ExponentialBackoff> {
    let b: watcher::ExponentialBackoff = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(RETRY_CAP)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .into();
    ResetTimerBackoff::new(b, Duration::from_secs(60))
}

/// The newest watch error of a set of watches, kept so a wait that times out or a gate that
/// cannot list can name it. One type for the lab's waits and the gate.
#[derive(Debug, Clone)]
pub struct WatchError {
    /// The kind watched ("Application", "HTTPRoute").
    pub kind: &'static str,
    pub at: Instant,
    pub message: String,
}

/// Shared by the watches of one waiter: the newest error of any of them.
pub type LastError = Arc<Mutex<Option<WatchError>>>;

/// What a reflector saw, for its owner to react to.
pub enum Seen<'a> {
    /// An object was listed, added, changed or deleted.
    Object(&'a kube::api::ObjectMeta),
    /// A (re)list began: the store will be replaced.
    Relisting,
    /// A (re)list completed: the store is whole again, everything may have changed.
    Listed,
    /// The watch failed (recorded in the [`LastError`]); it is retried with [`watch_backoff`].
    Failed,
}

/// Starts one reflector (kube-runtime's watcher + store) with our backoff: the one reflector
/// start of the lab's waits and of the gate. `on_seen` is called for every item, at the
/// instant it arrived; returning false ends the watch (its receiver is gone).
pub fn spawn_reflector<K, F>(
    kind: &'static str,
    api: kube::Api<K>,
    cfg: watcher::Config,
    last_error: LastError,
    mut on_seen: F,
) -> (Store<K>, JoinHandle<()>)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    F: FnMut(Seen<'_>, Instant) -> bool + Send + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher(api, cfg).backoff(watch_backoff()));
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            let at = Instant::now();
            let seen = match &item {
                Ok(watcher::Event::Apply(o))
                | Ok(watcher::Event::Delete(o))
                | Ok(watcher::Event::InitApply(o)) => Seen::Object(o.meta()),
                Ok(watcher::Event::Init) => Seen::Relisting,
                Ok(watcher::Event::InitDone) => Seen::Listed,
                Err(e) => {
                    *last_error.lock().unwrap() = Some(WatchError {
                        kind,
                        at,
                        message: format!("{e}"),
                    });
                    Seen::Failed
                }
            };
            if !on_seen(seen, at) {
                return;
            }
        }
    });
    (reader, task)
}

pub struct LiveWatch {
    application: Store<Application>,
    deployment: Store<Deployment>,
    slices: Store<EndpointSlice>,
    changes: watch::Receiver<u64>,
    last_error: LastError,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for LiveWatch {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// A lab waiter wakes at every item, errors included (it re-reads the stores and the error).
fn notifier(notify: watch::Sender<u64>) -> impl FnMut(Seen<'_>, Instant) -> bool + Send {
    move |_, _| {
        notify.send_modify(|n| *n += 1);
        true
    }
}

impl LiveWatch {
    /// Starts the three watches. They fill their stores in the background; [`Self::ready`]
    /// waits for the first complete listing.
    pub fn start(cluster: &Cluster) -> Self {
        let cfg = cluster.config();
        let (tx, rx) = watch::channel(0u64);
        let last_error = Arc::new(Mutex::new(None));
        let by_name =
            |name: &str| watcher::Config::default().fields(&format!("metadata.name={name}"));
        let (application, t1) = spawn_reflector(
            "Application",
            cluster.applications(),
            by_name(&cfg.application),
            last_error.clone(),
            notifier(tx.clone()),
        );
        let (deployment, t2) = spawn_reflector(
            "Deployment",
            cluster.deployments(),
            by_name(&cfg.workload),
            last_error.clone(),
            notifier(tx.clone()),
        );
        let (slices, t3) = spawn_reflector(
            "EndpointSlice",
            cluster.endpoint_slices_api(),
            watcher::Config::default().labels(&cluster.slice_selector()),
            last_error.clone(),
            notifier(tx),
        );
        LiveWatch {
            application,
            deployment,
            slices,
            changes: rx,
            last_error,
            tasks: vec![t1, t2, t3],
        }
    }

    /// Waits until every watch has listed once, or `deadline` passes (then names the watches
    /// that have not and the last error).
    pub async fn ready(&self, deadline: Duration) -> anyhow::Result<()> {
        let all = async {
            let _ = self.application.wait_until_ready().await;
            let _ = self.deployment.wait_until_ready().await;
            let _ = self.slices.wait_until_ready().await;
        };
        if tokio::time::timeout(deadline, all).await.is_ok() {
            return Ok(());
        }
        // Which watches have not listed yet: a ready store answers at once.
        let now = Duration::ZERO;
        let mut missing = Vec::new();
        if tokio::time::timeout(now, self.application.wait_until_ready())
            .await
            .is_err()
        {
            missing.push("Application");
        }
        if tokio::time::timeout(now, self.deployment.wait_until_ready())
            .await
            .is_err()
        {
            missing.push("Deployment");
        }
        if tokio::time::timeout(now, self.slices.wait_until_ready())
            .await
            .is_err()
        {
            missing.push("EndpointSlice");
        }
        anyhow::bail!(
            "the {} watch(es) did not list within {deadline:?}{}",
            missing.join(", "),
            self.last_error()
                .map(|e| format!("; last error ({}): {}", e.kind, e.message))
                .unwrap_or_default()
        )
    }

    /// The objects as the watches last saw them.
    pub fn snapshot(&self) -> LiveState {
        LiveState {
            application: self.application.state().first().map(|a| (**a).clone()),
            deployment: self.deployment.state().first().map(|d| (**d).clone()),
            slices: self.slices.state().iter().map(|s| (**s).clone()).collect(),
        }
    }

    /// Resolves at the next watch event (or error), or after `timeout`. True if something
    /// changed.
    pub async fn changed(&mut self, timeout: Duration) -> bool {
        matches!(
            tokio::time::timeout(timeout, self.changes.changed()).await,
            Ok(Ok(()))
        )
    }

    pub fn last_error(&self) -> Option<WatchError> {
        self.last_error.lock().unwrap().clone()
    }
}
