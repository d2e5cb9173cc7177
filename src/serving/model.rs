//! The gate's inputs: the objects of one Application as the watches last saw them, the
//! endpoints to probe and the probe answers.

use crate::cluster::argo::Application;
use crate::cluster::gateway::HttpRoute;
use crate::cluster::rollouts::Rollout;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::jiff::Timestamp;
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

/// One probe answer for one endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProbeAnswer {
    pub at: Timestamp,
    pub code: Option<u16>,
    /// The body (lossily decoded when it is not UTF-8; then it can never equal an expected body
    /// that differs in bytes). The shell bounds its size.
    pub body: Option<String>,
    /// A transport error, when there was no answer.
    pub error: Option<String>,
}

/// The latest answer of each endpoint, as the shell last probed it.
pub type Probes = BTreeMap<EndpointKey, ProbeAnswer>;
