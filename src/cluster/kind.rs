//! The kinds of object the watches follow (closed set, pure): the API names RBAC grants and
//! Argo CD's resource list uses, and which are add-ons watched only where served. The lab's
//! waits and the gate watch subsets of this one list.

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
    pub fn crd_version(self) -> Option<&'static str> {
        match self {
            Kind::Rollout => Some(crate::cluster::argo::VERSION),
            Kind::HttpRoute => Some(crate::cluster::gateway::VERSION),
            _ => None,
        }
    }
}
