//! The gate's inputs: the objects of one Application as the watches last saw them, the
//! endpoints to probe and the probe answers.

use crate::cluster::argo::Application;
use crate::cluster::gateway::HttpRoute;
use crate::cluster::rollouts::Rollout;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::Ingress;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Everything the decision reads about one Application: the Application and the objects in
/// the namespaces of its managed resources (the shell selects them through [`super::index`]).
/// `Arc`s, because they come from the watches' stores and are shared, never copied.
#[derive(Debug, Clone, Default)]
pub struct Objects {
    pub application: Option<Arc<Application>>,
    pub deployments: Vec<Arc<Deployment>>,
    pub replica_sets: Vec<Arc<ReplicaSet>>,
    pub stateful_sets: Vec<Arc<StatefulSet>>,
    pub daemon_sets: Vec<Arc<DaemonSet>>,
    /// Empty where Argo Rollouts is not installed (its CRD not served).
    pub rollouts: Vec<Arc<Rollout>>,
    pub pods: Vec<Arc<Pod>>,
    pub services: Vec<Arc<Service>>,
    pub endpoint_slices: Vec<Arc<EndpointSlice>>,
    pub ingresses: Vec<Arc<Ingress>>,
    /// Empty where Gateway API's CRDs are not installed.
    pub http_routes: Vec<Arc<HttpRoute>>,
}

/// One endpoint to probe on its own: a ready or serving address of a Service's EndpointSlice.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct EndpointKey {
    pub namespace: String,
    pub service: String,
    /// The pod behind the address (the slice's targetRef), when it names one.
    pub pod: Option<String>,
    pub ip: String,
    /// The port the pod listens on (the slice's port, i.e. the Service's target port).
    pub port: u16,
}

/// An endpoint and what the slice says of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Endpoint {
    pub key: EndpointKey,
    /// EndpointSlice conditions (a missing `ready` means true; `serving` defaults to `ready`).
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
}

/// One probe answer for one endpoint (the one answer type of every probe).
pub use crate::cluster::probe::ProbeAnswer;

/// The latest answer of each endpoint, as the shell last probed it.
pub type Probes = BTreeMap<EndpointKey, ProbeAnswer>;

// ---- routes (what src/serving/routes.rs reads and the verdict reports)

/// The route kinds the gate reads (closed set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum RouteKind {
    Ingress,
    #[serde(rename = "HTTPRoute")]
    HttpRoute,
}

impl RouteKind {
    pub const ALL: [RouteKind; 2] = [RouteKind::Ingress, RouteKind::HttpRoute];

    /// (API group, kind) as Argo CD's `status.resources` names it.
    pub fn group_kind(self) -> (&'static str, &'static str) {
        match self {
            RouteKind::Ingress => ("networking.k8s.io", "Ingress"),
            RouteKind::HttpRoute => (crate::cluster::gateway::GROUP, "HTTPRoute"),
        }
    }

    pub fn from_group_kind(group: &str, kind: &str) -> Option<RouteKind> {
        Self::ALL
            .into_iter()
            .find(|k| k.group_kind() == (group, kind))
    }

    pub fn as_str(self) -> &'static str {
        self.group_kind().1
    }
}

/// A route of the Application (from `status.resources`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct RouteRef {
    pub kind: RouteKind,
    pub namespace: String,
    pub name: String,
}

impl RouteRef {
    /// "HTTPRoute shop/web".
    pub fn subject(&self) -> String {
        format!("{} {}/{}", self.kind.as_str(), self.namespace, self.name)
    }
}

/// A port as a route names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum PortRef {
    Number(i32),
    Name(String),
}

/// One backend of one rule of a route, as the route states it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Backend {
    /// "host shop.example path /", "rule 1 path /", "default backend".
    pub rule: String,
    /// `Some((group, kind))` when the backend is not a core Service (an Ingress `resource`
    /// backend, an HTTPRoute backendRef of another kind): the gate cannot follow it.
    pub other_kind: Option<(String, String)>,
    pub namespace: String,
    pub name: String,
    pub port: Option<PortRef>,
    /// The HTTPRoute weight (`None`: an Ingress backend, which gets all its rule's traffic).
    pub weight: Option<i32>,
}

impl Backend {
    pub fn gets_traffic(&self) -> bool {
        self.weight.is_none_or(|w| w > 0)
    }

    pub(crate) fn service(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackendReport {
    #[serde(flatten)]
    pub backend: Backend,
    /// Why it fails RouteBackend; `None` when it is a Service of the Application (or gets no
    /// traffic).
    pub problem: Option<String>,
}

/// One route in the verdict: its backends, each with whether it passed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RouteReport {
    pub route: RouteRef,
    pub backends: Vec<BackendReport>,
}
