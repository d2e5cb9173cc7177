//! The one watch layer of the lab's waits and the gate: one kube-runtime reflector per
//! [`Kind`] watched, with our backoff, its store shared by whoever decides, and every event
//! announced as one [`Change`] on one channel so a waiter re-decides at once.
//!
//! The gate watches the Applications in Argo CD's namespace and every other kind in the
//! Applications' one destination namespace when there is one (what a namespaced Role allows:
//! the PostSync hook), else cluster-wide (a fleet: streams do not grow with the number of
//! Applications). The lab watches its Application, its Deployment and its Service's
//! EndpointSlices by name or label ([`Watches::add`] takes each kind's watcher config).

use crate::cluster::argo::Application;
use crate::cluster::gateway::HttpRoute;
pub use crate::cluster::kind::Kind;
use crate::cluster::rollouts::Rollout;
use crate::cluster::Cluster;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::NamespaceResourceScope;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::reflector::{self, Store};
use kube::runtime::utils::ResetTimerBackoff;
use kube::runtime::{watcher, WatchStreamExt};
use kube::Api;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The longest pause between two attempts of a failing watch.
pub const RETRY_CAP: Duration = Duration::from_secs(2);

/// Exponential from 200 ms to [`RETRY_CAP`] with jitter, reset after a minute without errors:
/// kube-runtime's own [`watcher::ExponentialBackoff`], configured through its public
/// `From<ExponentialBuilder>`. A transient API error (API server restart, network blip) is
/// retried until the waiter's own deadline, and the waiter must see the server back within
/// seconds, not kube's default 30 s.
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
/// cannot list can name it.
#[derive(Debug, Clone)]
pub struct WatchError {
    /// The kind watched ("Application", "HTTPRoute").
    pub kind: &'static str,
    pub at: Instant,
    pub message: String,
}

/// Shared by the watches of one waiter: the newest error of any of them.
pub type LastError = Arc<Mutex<Option<WatchError>>>;

/// One watch event, as a waiter hears of it.
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

impl Change {
    /// A completed (re)list: the store is whole again, anything in it may have changed.
    pub fn is_relist(&self) -> bool {
        self.name.is_empty()
    }
}

/// Where the non-Application kinds are watched.
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

impl AppFilter {
    /// The Application watch's config: one name is a field selector (the server sends only
    /// it), several are filtered by the caller.
    pub fn watcher_config(&self) -> watcher::Config {
        match self {
            AppFilter::Names(n) if n.len() == 1 => by_name(&n[0]),
            AppFilter::Names(_) => watcher::Config::default(),
            AppFilter::Selector(s) => watcher::Config::default().labels(s),
        }
    }
}

/// A watch of one object by name (a field selector).
pub fn by_name(name: &str) -> watcher::Config {
    watcher::Config::default().fields(&format!("metadata.name={name}"))
}

/// One kind's object names per namespace, kept beside its store by its reflector task: a
/// decision reads the objects of its namespaces by name ([`Stores::in_namespaces`]) instead of
/// scanning every object of a cluster-wide store. A relist is buffered and swapped in whole at
/// its end, as kube-runtime's store does.
#[derive(Debug, Clone, Default)]
pub struct Names(Arc<RwLock<BTreeMap<String, BTreeSet<String>>>>);

/// A relist in progress: the names listed so far.
type Relist = Option<BTreeMap<String, BTreeSet<String>>>;

impl Names {
    /// Follows one watcher event (the same sequence the store follows).
    pub fn follow<K: kube::Resource>(&self, relist: &mut Relist, event: &watcher::Event<K>) {
        let key = |o: &K| {
            let m = o.meta();
            (
                m.namespace.clone().unwrap_or_default(),
                m.name.clone().unwrap_or_default(),
            )
        };
        match event {
            watcher::Event::Apply(o) => {
                let (ns, name) = key(o);
                self.0.write().unwrap().entry(ns).or_default().insert(name);
            }
            watcher::Event::Delete(o) => {
                let (ns, name) = key(o);
                let mut names = self.0.write().unwrap();
                if let Some(set) = names.get_mut(&ns) {
                    set.remove(&name);
                    if set.is_empty() {
                        names.remove(&ns);
                    }
                }
            }
            watcher::Event::Init => *relist = Some(BTreeMap::new()),
            watcher::Event::InitApply(o) => {
                let (ns, name) = key(o);
                relist
                    .get_or_insert_with(BTreeMap::new)
                    .entry(ns)
                    .or_default()
                    .insert(name);
            }
            watcher::Event::InitDone => {
                *self.0.write().unwrap() = relist.take().unwrap_or_default()
            }
        }
    }

    /// The names in `namespace`, sorted.
    pub fn in_namespace(&self, namespace: &str) -> Vec<String> {
        self.0
            .read()
            .unwrap()
            .get(namespace)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// One store per kind; a kind not watched keeps an empty store (no writer): its objects are
/// never seen.
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
    /// Each watched kind's names per namespace.
    names: BTreeMap<Kind, Names>,
}

impl Stores {
    /// The objects of `store` (of `kind`) in `namespaces`, by name (sorted by namespace, then
    /// name), without scanning the store.
    pub fn in_namespaces<K>(
        &self,
        kind: Kind,
        store: &Store<K>,
        namespaces: &BTreeSet<String>,
    ) -> Vec<Arc<K>>
    where
        K: kube::Resource<DynamicType = ()> + Clone,
    {
        let Some(names) = self.names.get(&kind) else {
            return Vec::new();
        };
        namespaces
            .iter()
            .flat_map(|ns| {
                names
                    .in_namespace(ns)
                    .into_iter()
                    .filter_map(move |n| store.get(&ObjectRef::new(&n).within(ns)))
            })
            .collect()
    }
}

impl Default for Stores {
    fn default() -> Self {
        Stores {
            applications: reflector::store().0,
            deployments: reflector::store().0,
            replica_sets: reflector::store().0,
            stateful_sets: reflector::store().0,
            daemon_sets: reflector::store().0,
            pods: reflector::store().0,
            services: reflector::store().0,
            endpoint_slices: reflector::store().0,
            rollouts: reflector::store().0,
            ingresses: reflector::store().0,
            http_routes: reflector::store().0,
            names: BTreeMap::new(),
        }
    }
}

pub struct Watches {
    pub stores: Stores,
    pub scope: Scope,
    /// The kinds watched: one reflector (one watch stream, re-established when the server
    /// ends it) each, in the order started.
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

/// One reflector: kube-runtime's watcher and store with [`watch_backoff`]. Every object it
/// sees, and every completed (re)list, is one [`Change`] on `tx`; an error is kept in
/// `last_error` and retried. The watch ends when `tx`'s receiver is gone.
fn spawn<K>(
    kind: Kind,
    api: Api<K>,
    cfg: watcher::Config,
    tx: mpsc::UnboundedSender<Change>,
    last_error: LastError,
    names: Names,
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
        let mut relist: Relist = None;
        while let Some(item) = stream.next().await {
            let at = Instant::now();
            if let Ok(event) = &item {
                names.follow(&mut relist, event);
            }
            let meta = match &item {
                Ok(watcher::Event::Apply(o))
                | Ok(watcher::Event::Delete(o))
                | Ok(watcher::Event::InitApply(o)) => {
                    let o = o.meta();
                    ObjectMeta {
                        namespace: o.namespace.clone(),
                        name: o.name.clone(),
                        labels: o.labels.clone(),
                        owner_references: o.owner_references.clone(),
                        ..Default::default()
                    }
                }
                Ok(watcher::Event::Init) => continue,
                // The store is complete again: everything may have changed.
                Ok(watcher::Event::InitDone) => ObjectMeta::default(),
                Err(e) => {
                    *last_error.lock().unwrap() = Some(WatchError {
                        kind: kind.group_kind().1,
                        at,
                        message: format!("{e}"),
                    });
                    continue;
                }
            };
            let change = Change {
                kind,
                namespace: meta.namespace.clone().unwrap_or_default(),
                name: meta.name.clone().unwrap_or_default(),
                meta,
                at,
            };
            if tx.send(change).is_err() {
                return;
            }
        }
    });
    (reader, task)
}

impl Watches {
    /// No watch yet: every store empty, the other kinds to be watched in `scope`.
    pub fn new(scope: Scope) -> Watches {
        Watches {
            stores: Stores::default(),
            scope,
            kinds: Vec::new(),
            last_error: Arc::new(Mutex::new(None)),
            tasks: Vec::new(),
        }
    }

    fn api<K>(&self, cluster: &Cluster) -> Api<K>
    where
        K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
    {
        match &self.scope {
            Scope::Namespace(ns) => Api::namespaced(cluster.client(), ns),
            Scope::Cluster => Api::all(cluster.client()),
        }
    }

    /// Starts the watch of `kind` with `cfg` (Applications in Argo CD's namespace, the other
    /// kinds in the scope), sending its changes to `tx`. A kind is watched once.
    pub fn add(
        &mut self,
        cluster: &Cluster,
        kind: Kind,
        cfg: watcher::Config,
        tx: &mpsc::UnboundedSender<Change>,
    ) {
        if self.kinds.contains(&kind) {
            return;
        }
        let last_error = self.last_error.clone();
        let tx = tx.clone();
        let names = Names::default();
        self.stores.names.insert(kind, names.clone());
        macro_rules! start {
            ($store:ident, $api:expr) => {{
                let (store, task) = spawn(kind, $api, cfg, tx, last_error, names);
                self.stores.$store = store;
                task
            }};
        }
        let task = match kind {
            Kind::Application => start!(applications, cluster.applications()),
            Kind::Deployment => start!(deployments, self.api(cluster)),
            Kind::ReplicaSet => start!(replica_sets, self.api(cluster)),
            Kind::StatefulSet => start!(stateful_sets, self.api(cluster)),
            Kind::DaemonSet => start!(daemon_sets, self.api(cluster)),
            Kind::Pod => start!(pods, self.api(cluster)),
            Kind::Service => start!(services, self.api(cluster)),
            Kind::EndpointSlice => start!(endpoint_slices, self.api(cluster)),
            Kind::Rollout => start!(rollouts, self.api(cluster)),
            Kind::Ingress => start!(ingresses, self.api(cluster)),
            Kind::HttpRoute => start!(http_routes, self.api(cluster)),
        };
        self.tasks.push(task);
        self.kinds.push(kind);
    }

    /// The gate's first step: the Application watch only (the scope of the others depends
    /// on what the Applications manage): see [`Watches::start_workloads`].
    pub fn start_applications(
        cluster: &Cluster,
        filter: &AppFilter,
        tx: &mpsc::UnboundedSender<Change>,
    ) -> Watches {
        let mut w = Watches::new(Scope::Cluster);
        w.add(cluster, Kind::Application, filter.watcher_config(), tx);
        w
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

    /// The gate's second step: every other kind in `scope`, whole, on the same channel: the
    /// built-in kinds, and the add-on kinds in `served` (see [`Watches::optional_served`]).
    pub fn start_workloads(
        &mut self,
        cluster: &Cluster,
        scope: Scope,
        served: &[Kind],
        tx: &mpsc::UnboundedSender<Change>,
    ) {
        self.scope = scope;
        for kind in Kind::ALL {
            if kind != Kind::Application && (!kind.optional() || served.contains(&kind)) {
                self.add(cluster, kind, watcher::Config::default(), tx);
            }
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
            // A store that has listed answers at once.
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

    /// The newest error of any of these watches.
    pub fn last_error(&self) -> Option<WatchError> {
        self.last_error.lock().unwrap().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    fn pod(ns: &str, name: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn names_follow_applies_deletes_and_a_relist_swapped_in_at_its_end() {
        let names = Names::default();
        let mut relist = None;
        let mut follow = |e: watcher::Event<Pod>| names.follow(&mut relist, &e);
        follow(watcher::Event::Init);
        follow(watcher::Event::InitApply(pod("a", "web-1")));
        follow(watcher::Event::InitApply(pod("b", "db-0")));
        assert!(
            names.in_namespace("a").is_empty(),
            "a relist shows nothing until it is done"
        );
        follow(watcher::Event::InitDone);
        assert_eq!(names.in_namespace("a"), ["web-1"]);
        follow(watcher::Event::Apply(pod("a", "web-0")));
        follow(watcher::Event::Apply(pod("a", "web-1")));
        assert_eq!(names.in_namespace("a"), ["web-0", "web-1"]);
        follow(watcher::Event::Delete(pod("b", "db-0")));
        assert!(names.in_namespace("b").is_empty());
        // A relist replaces everything: what it does not list is gone.
        follow(watcher::Event::Init);
        follow(watcher::Event::InitApply(pod("a", "web-2")));
        assert_eq!(names.in_namespace("a"), ["web-0", "web-1"]);
        follow(watcher::Event::InitDone);
        assert_eq!(names.in_namespace("a"), ["web-2"]);
        assert!(names.in_namespace("c").is_empty());
    }

    #[test]
    fn stores_read_objects_of_their_namespaces_by_name_only() {
        let (reader, mut writer) = reflector::store::<Pod>();
        let mut stores = Stores::default();
        let names = Names::default();
        stores.names.insert(Kind::Pod, names.clone());
        let mut relist = None;
        for e in [
            watcher::Event::Init,
            watcher::Event::InitApply(pod("a", "web-1")),
            watcher::Event::InitApply(pod("a", "web-0")),
            watcher::Event::InitApply(pod("b", "db-0")),
            watcher::Event::InitApply(pod("c", "other")),
            watcher::Event::InitDone,
        ] {
            writer.apply_watcher_event(&e);
            names.follow(&mut relist, &e);
        }
        let wanted: BTreeSet<String> = ["a", "b"].map(String::from).into();
        let got: Vec<String> = stores
            .in_namespaces(Kind::Pod, &reader, &wanted)
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(got, ["web-0", "web-1", "db-0"]);
        // A kind not watched has no names: nothing, whatever its store holds.
        assert!(stores
            .in_namespaces(Kind::Service, &reader, &wanted)
            .is_empty());
    }
}
