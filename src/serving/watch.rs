//! The gate's watches: one kube-runtime reflector per kind, shared by the whole run (however
//! many Applications it decides), each event announced on one channel so the decision loop
//! re-decides at once. Scope: the Applications in Argo CD's namespace; the other kinds in the
//! Applications' one destination namespace when there is one (what a namespaced Role allows:
//! the PostSync hook), else cluster-wide (a fleet: streams do not grow with the number of
//! Applications).

use crate::cluster::argo::Application;
use crate::cluster::gateway::HttpRoute;
use crate::cluster::live::{spawn_reflector, LastError, Seen};
use crate::cluster::rollouts::Rollout;
use crate::cluster::Cluster;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
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
    Ingress,
    /// Watched only where the cluster serves Gateway API's HTTPRoute CRD.
    HttpRoute,
}

impl Kind {
    pub const ALL: [Kind; 11] = [
        Kind::Application,
        Kind::Deployment,
        Kind::ReplicaSet,
        Kind::StatefulSet,
        Kind::DaemonSet,
        Kind::Pod,
        Kind::Service,
        Kind::EndpointSlice,
        Kind::Rollout,
        Kind::Ingress,
        Kind::HttpRoute,
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
            Kind::Ingress => ("networking.k8s.io", "ingresses"),
            Kind::HttpRoute => (crate::cluster::gateway::GROUP, "httproutes"),
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
            Kind::Ingress => "Ingress",
            Kind::HttpRoute => "HTTPRoute",
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
        self.crd_version().is_some()
    }

    /// The API version of an add-on's kind (what discovery is asked for).
    fn crd_version(self) -> Option<&'static str> {
        match self {
            Kind::Rollout => Some(crate::cluster::argo::VERSION),
            Kind::HttpRoute => Some(crate::cluster::gateway::VERSION),
            _ => None,
        }
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

pub use crate::cluster::live::WatchError;

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
    pub ingresses: Store<Ingress>,
    /// Empty (no writer) where Gateway API is not installed.
    pub http_routes: Store<HttpRoute>,
}

pub struct Watches {
    pub stores: Stores,
    pub scope: Scope,
    /// The kinds watched: one reflector (one watch stream, re-established when the server
    /// ends it) each.
    pub kinds: Vec<Kind>,
    last_error: LastError,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Watches {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// One reflector of the gate: every object it sees, and every completed (re)list, is one
/// [`Change`] on the run's channel.
fn spawn<K>(
    kind: Kind,
    api: Api<K>,
    cfg: watcher::Config,
    tx: mpsc::UnboundedSender<Change>,
    last_error: LastError,
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
    spawn_reflector(
        kind.group_kind().1,
        api,
        cfg,
        last_error,
        move |seen, at| {
            let meta = match seen {
                Seen::Object(o) => ObjectMeta {
                    namespace: o.namespace.clone(),
                    name: o.name.clone(),
                    labels: o.labels.clone(),
                    owner_references: o.owner_references.clone(),
                    ..Default::default()
                },
                Seen::Relisting | Seen::Failed => return true,
                // The store is complete again: everything may have changed.
                Seen::Listed => ObjectMeta::default(),
            };
            tx.send(Change {
                kind,
                namespace: meta.namespace.clone().unwrap_or_default(),
                name: meta.name.clone().unwrap_or_default(),
                meta,
                at,
            })
            .is_ok()
        },
    )
}

impl Watches {
    /// Starts the Application watch only (the scope of the others depends on what the
    /// Applications manage): see [`Watches::start_workloads`].
    pub fn start_applications(
        cluster: &Cluster,
        filter: &AppFilter,
        tx: mpsc::UnboundedSender<Change>,
    ) -> (Store<Application>, JoinHandle<()>, LastError) {
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

    /// The add-on kinds (see [`Kind::optional`]) the cluster serves (their CRDs installed): one
    /// discovery request each, which needs no RBAC beyond an authenticated user's.
    pub async fn optional_served(cluster: &Cluster) -> Vec<Kind> {
        let mut out = Vec::new();
        for kind in Kind::ALL {
            let Some(version) = kind.crd_version() else {
                continue;
            };
            let (group, name) = kind.group_kind();
            let gvk = kube::api::GroupVersionKind::gvk(group, version, name);
            if kube::discovery::pinned_kind(&cluster.client(), &gvk)
                .await
                .is_ok()
            {
                out.push(kind);
            }
        }
        out
    }

    /// Starts the other watches in `scope`, sharing the Application watch's channel: the
    /// built-in kinds, and the add-on kinds in `served` (see [`Watches::optional_served`]).
    pub fn start_workloads(
        cluster: &Cluster,
        applications: (Store<Application>, JoinHandle<()>, LastError),
        scope: Scope,
        served: &[Kind],
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
        let kinds: Vec<Kind> = Kind::ALL
            .into_iter()
            .filter(|k| *k != Kind::Application && (!k.optional() || served.contains(k)))
            .collect();
        let mut tasks = vec![app_task];
        // A kind not watched keeps an empty store (no writer): its objects are never seen.
        macro_rules! watch {
            ($kind:expr) => {
                if kinds.contains(&$kind) {
                    let (store, task) = spawn(
                        $kind,
                        api!(),
                        watcher::Config::default(),
                        tx.clone(),
                        last_error.clone(),
                    );
                    tasks.push(task);
                    store
                } else {
                    reflector::store().0
                }
            };
        }
        let stores = Stores {
            applications: apps,
            deployments: watch!(Kind::Deployment),
            replica_sets: watch!(Kind::ReplicaSet),
            stateful_sets: watch!(Kind::StatefulSet),
            daemon_sets: watch!(Kind::DaemonSet),
            pods: watch!(Kind::Pod),
            services: watch!(Kind::Service),
            endpoint_slices: watch!(Kind::EndpointSlice),
            rollouts: watch!(Kind::Rollout),
            ingresses: watch!(Kind::Ingress),
            http_routes: watch!(Kind::HttpRoute),
        };
        let kinds = std::iter::once(Kind::Application).chain(kinds).collect();
        Watches {
            stores,
            scope,
            kinds,
            last_error,
            tasks,
        }
    }

    /// Waits until every watch has listed once, or `deadline` passes (then names the watches
    /// that have not, and the last error: a Forbidden here is the ServiceAccount's RBAC).
    pub async fn ready(&self, deadline: Duration) -> anyhow::Result<()> {
        let all = async {
            for kind in &self.kinds {
                self.wait_listed(*kind).await;
            }
        };
        if tokio::time::timeout(deadline, all).await.is_ok() {
            return Ok(());
        }
        let mut missing = Vec::new();
        for kind in &self.kinds {
            if tokio::time::timeout(Duration::ZERO, self.wait_listed(*kind))
                .await
                .is_err()
            {
                missing.push(kind.group_kind().1);
            }
        }
        anyhow::bail!(
            "the {} watch(es) did not list within {deadline:?}{}",
            missing.join(", "),
            self.last_error()
                .map(|e| format!("; last error ({}): {}", e.kind, e.message))
                .unwrap_or_default()
        )
    }

    /// Until `kind`'s store has listed once (a store without a writer never does).
    async fn wait_listed(&self, kind: Kind) {
        let s = &self.stores;
        let _ = match kind {
            Kind::Application => s.applications.wait_until_ready().await,
            Kind::Deployment => s.deployments.wait_until_ready().await,
            Kind::ReplicaSet => s.replica_sets.wait_until_ready().await,
            Kind::StatefulSet => s.stateful_sets.wait_until_ready().await,
            Kind::DaemonSet => s.daemon_sets.wait_until_ready().await,
            Kind::Pod => s.pods.wait_until_ready().await,
            Kind::Service => s.services.wait_until_ready().await,
            Kind::EndpointSlice => s.endpoint_slices.wait_until_ready().await,
            Kind::Rollout => s.rollouts.wait_until_ready().await,
            Kind::Ingress => s.ingresses.wait_until_ready().await,
            Kind::HttpRoute => s.http_routes.wait_until_ready().await,
        };
    }

    pub fn last_error(&self) -> Option<WatchError> {
        self.last_error.lock().unwrap().clone()
    }
}
