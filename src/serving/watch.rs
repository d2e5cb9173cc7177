//! The gate's watches: one kube-runtime reflector per kind, shared by the whole run (however
//! many Applications it decides), each event announced on one channel so the decision loop
//! re-decides at once. Scope: the Applications in Argo CD's namespace; the other kinds in the
//! Applications' one destination namespace when there is one (what a namespaced Role allows:
//! the PostSync hook), else cluster-wide (a fleet: streams do not grow with the number of
//! Applications).

use crate::cluster::argo::Application;
use crate::cluster::live::watch_backoff;
use crate::cluster::rollouts::Rollout;
use crate::cluster::Cluster;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Api;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The kinds the gate watches (closed set), one reflector each. [`Kind::ALL`] with
/// [`Kind::api`] is the one list the ServiceAccount's RBAC in `deploy/` is checked against
/// (tests/deploy_rbac.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Kind {
    Application,
    Deployment,
    ReplicaSet,
    StatefulSet,
    DaemonSet,
    Pod,
    Service,
    EndpointSlice,
    /// Watched only where the cluster serves Argo Rollouts' CRD.
    Rollout,
}

impl Kind {
    pub const ALL: [Kind; 9] = [
        Kind::Application,
        Kind::Deployment,
        Kind::ReplicaSet,
        Kind::StatefulSet,
        Kind::DaemonSet,
        Kind::Pod,
        Kind::Service,
        Kind::EndpointSlice,
        Kind::Rollout,
    ];

    /// (API group, resource plural), as RBAC names it.
    pub fn api(self) -> (&'static str, &'static str) {
        match self {
            Kind::Application => (crate::cluster::argo::GROUP, "applications"),
            Kind::Deployment => ("apps", "deployments"),
            Kind::ReplicaSet => ("apps", "replicasets"),
            Kind::StatefulSet => ("apps", "statefulsets"),
            Kind::DaemonSet => ("apps", "daemonsets"),
            Kind::Pod => ("", "pods"),
            Kind::Service => ("", "services"),
            Kind::EndpointSlice => ("discovery.k8s.io", "endpointslices"),
            Kind::Rollout => (crate::cluster::argo::GROUP, "rollouts"),
        }
    }

    /// (API group, kind) as Argo CD's `status.resources` names it.
    pub fn group_kind(self) -> (&'static str, &'static str) {
        let group = self.api().0;
        let kind = match self {
            Kind::Application => "Application",
            Kind::Deployment => "Deployment",
            Kind::ReplicaSet => "ReplicaSet",
            Kind::StatefulSet => "StatefulSet",
            Kind::DaemonSet => "DaemonSet",
            Kind::Pod => "Pod",
            Kind::Service => "Service",
            Kind::EndpointSlice => "EndpointSlice",
            Kind::Rollout => "Rollout",
        };
        (group, kind)
    }

    pub fn from_group_kind(group: &str, kind: &str) -> Option<Kind> {
        Self::ALL
            .into_iter()
            .find(|k| k.group_kind() == (group, kind))
    }

    /// Whether the gate watches it only when the cluster serves it (a CRD of an add-on).
    pub fn optional(self) -> bool {
        self == Kind::Rollout
    }
}

/// One watch event, as the decision loop hears of it.
#[derive(Debug, Clone)]
pub struct Change {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    /// The object's labels and owner references too (what [`FleetIndex`] routes on); empty
    /// after a relist.
    ///
    /// [`FleetIndex`]: crate::serving::index::FleetIndex
    pub meta: ObjectMeta,
    /// When the event arrived (decision latency is measured from here).
    pub at: Instant,
}

/// Where the workload kinds are watched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    Namespace(String),
    Cluster,
}

/// Which Applications: by name, or by label selector (all in Argo CD's namespace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppFilter {
    Names(Vec<String>),
    Selector(String),
}

/// The newest watch error, so a verdict can name it.
#[derive(Debug, Clone)]
pub struct WatchError {
    pub kind: Kind,
    pub at: Instant,
    pub message: String,
}

pub struct Stores {
    pub applications: Store<Application>,
    pub deployments: Store<Deployment>,
    pub replica_sets: Store<ReplicaSet>,
    pub stateful_sets: Store<StatefulSet>,
    pub daemon_sets: Store<DaemonSet>,
    pub pods: Store<Pod>,
    pub services: Store<Service>,
    pub endpoint_slices: Store<EndpointSlice>,
    /// Empty (no writer) where Argo Rollouts is not installed.
    pub rollouts: Store<Rollout>,
}

pub struct Watches {
    pub stores: Stores,
    pub scope: Scope,
    /// The kinds watched: one reflector (one watch stream, re-established when the server
    /// ends it) each.
    pub kinds: Vec<Kind>,
    last_error: Arc<Mutex<Option<WatchError>>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Watches {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn spawn<K>(
    kind: Kind,
    api: Api<K>,
    cfg: watcher::Config,
    tx: mpsc::UnboundedSender<Change>,
    last_error: Arc<Mutex<Option<WatchError>>>,
) -> (Store<K>, JoinHandle<()>)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher(api, cfg).backoff(watch_backoff()));
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            let at = Instant::now();
            let meta = match &item {
                Ok(watcher::Event::Apply(o))
                | Ok(watcher::Event::Delete(o))
                | Ok(watcher::Event::InitApply(o)) => ObjectMeta {
                    namespace: o.meta().namespace.clone(),
                    name: o.meta().name.clone(),
                    labels: o.meta().labels.clone(),
                    owner_references: o.meta().owner_references.clone(),
                    ..Default::default()
                },
                Ok(watcher::Event::Init) => continue,
                // The store is complete again: everything may have changed.
                Ok(watcher::Event::InitDone) => ObjectMeta::default(),
                Err(e) => {
                    *last_error.lock().unwrap() = Some(WatchError {
                        kind,
                        at,
                        message: format!("{e}"),
                    });
                    continue;
                }
            };
            if tx
                .send(Change {
                    kind,
                    namespace: meta.namespace.clone().unwrap_or_default(),
                    name: meta.name.clone().unwrap_or_default(),
                    meta,
                    at,
                })
                .is_err()
            {
                return;
            }
        }
    });
    (reader, task)
}

impl Watches {
    /// Starts the Application watch only (the scope of the others depends on what the
    /// Applications manage): see [`Watches::start_workloads`].
    pub fn start_applications(
        cluster: &Cluster,
        filter: &AppFilter,
        tx: mpsc::UnboundedSender<Change>,
    ) -> (
        Store<Application>,
        JoinHandle<()>,
        Arc<Mutex<Option<WatchError>>>,
    ) {
        let last_error = Arc::new(Mutex::new(None));
        let cfg = match filter {
            AppFilter::Names(n) if n.len() == 1 => {
                watcher::Config::default().fields(&format!("metadata.name={}", n[0]))
            }
            AppFilter::Names(_) => watcher::Config::default(),
            AppFilter::Selector(s) => watcher::Config::default().labels(s),
        };
        let (store, task) = spawn(
            Kind::Application,
            cluster.applications(),
            cfg,
            tx,
            last_error.clone(),
        );
        (store, task, last_error)
    }

    /// Whether the cluster serves Argo Rollouts' Rollout (its CRD is installed): one
    /// discovery request, which needs no RBAC beyond an authenticated user's.
    pub async fn rollouts_served(cluster: &Cluster) -> bool {
        let gvk = kube::api::GroupVersionKind::gvk(
            crate::cluster::argo::GROUP,
            crate::cluster::argo::VERSION,
            "Rollout",
        );
        kube::discovery::pinned_kind(&cluster.client(), &gvk)
            .await
            .is_ok()
    }

    /// Starts the other watches in `scope`, sharing the Application watch's channel: the
    /// seven built-in kinds, and Rollouts when `rollouts` (see [`Watches::rollouts_served`]).
    pub fn start_workloads(
        cluster: &Cluster,
        applications: (
            Store<Application>,
            JoinHandle<()>,
            Arc<Mutex<Option<WatchError>>>,
        ),
        scope: Scope,
        rollouts: bool,
        tx: mpsc::UnboundedSender<Change>,
    ) -> Watches {
        let (apps, app_task, last_error) = applications;
        let client = cluster.client();
        macro_rules! api {
            () => {
                match &scope {
                    Scope::Namespace(ns) => Api::namespaced(client.clone(), ns),
                    Scope::Cluster => Api::all(client.clone()),
                }
            };
        }
        let cfg = watcher::Config::default;
        let e = &last_error;
        let (deployments, t1) = spawn(Kind::Deployment, api!(), cfg(), tx.clone(), e.clone());
        let (replica_sets, t2) = spawn(Kind::ReplicaSet, api!(), cfg(), tx.clone(), e.clone());
        let (stateful_sets, t3) = spawn(Kind::StatefulSet, api!(), cfg(), tx.clone(), e.clone());
        let (daemon_sets, t4) = spawn(Kind::DaemonSet, api!(), cfg(), tx.clone(), e.clone());
        let (pods, t5) = spawn(Kind::Pod, api!(), cfg(), tx.clone(), e.clone());
        let (services, t6) = spawn(Kind::Service, api!(), cfg(), tx.clone(), e.clone());
        let mut tasks = vec![app_task, t1, t2, t3, t4, t5, t6];
        let rollouts = if rollouts {
            let (store, task) = spawn(Kind::Rollout, api!(), cfg(), tx.clone(), e.clone());
            tasks.push(task);
            Some(store)
        } else {
            None
        };
        let (endpoint_slices, t7) = spawn(Kind::EndpointSlice, api!(), cfg(), tx, e.clone());
        tasks.push(t7);
        let kinds = Kind::ALL
            .into_iter()
            .filter(|k| !k.optional() || rollouts.is_some())
            .collect();
        Watches {
            stores: Stores {
                applications: apps,
                deployments,
                replica_sets,
                stateful_sets,
                daemon_sets,
                pods,
                services,
                endpoint_slices,
                rollouts: rollouts.unwrap_or_else(|| reflector::store().0),
            },
            scope,
            kinds,
            last_error,
            tasks,
        }
    }

    /// Waits until every watch has listed once, or `deadline` passes (then names the watches
    /// that have not, and the last error: a Forbidden here is the ServiceAccount's RBAC).
    pub async fn ready(&self, deadline: Duration) -> anyhow::Result<()> {
        let s = &self.stores;
        let all = async {
            let _ = s.applications.wait_until_ready().await;
            let _ = s.deployments.wait_until_ready().await;
            let _ = s.replica_sets.wait_until_ready().await;
            let _ = s.stateful_sets.wait_until_ready().await;
            let _ = s.daemon_sets.wait_until_ready().await;
            let _ = s.pods.wait_until_ready().await;
            let _ = s.services.wait_until_ready().await;
            let _ = s.endpoint_slices.wait_until_ready().await;
            if self.kinds.contains(&Kind::Rollout) {
                let _ = s.rollouts.wait_until_ready().await;
            }
        };
        if tokio::time::timeout(deadline, all).await.is_ok() {
            return Ok(());
        }
        let now = Duration::ZERO;
        let mut missing = Vec::new();
        macro_rules! check {
            ($store:expr, $name:literal) => {
                if tokio::time::timeout(now, $store.wait_until_ready())
                    .await
                    .is_err()
                {
                    missing.push($name);
                }
            };
        }
        check!(s.applications, "Application");
        check!(s.deployments, "Deployment");
        check!(s.replica_sets, "ReplicaSet");
        check!(s.stateful_sets, "StatefulSet");
        check!(s.daemon_sets, "DaemonSet");
        check!(s.pods, "Pod");
        check!(s.services, "Service");
        check!(s.endpoint_slices, "EndpointSlice");
        if self.kinds.contains(&Kind::Rollout) {
            check!(s.rollouts, "Rollout");
        }
        anyhow::bail!(
            "the {} watch(es) did not list within {deadline:?}{}",
            missing.join(", "),
            self.last_error()
                .map(|e| format!("; last error ({:?}): {}", e.kind, e.message))
                .unwrap_or_default()
        )
    }

    pub fn last_error(&self) -> Option<WatchError> {
        self.last_error.lock().unwrap().clone()
    }
}
