//! Gateway API's HTTPRoute (gateway.networking.k8s.io/v1) as a typed serde struct, read only:
//! the fields the gate decides on (pinned release v1.6.3, `apis/v1/httproute_types.go`).
//! Every field is optional: a route written for another version must still parse.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};

pub const GROUP: &str = "gateway.networking.k8s.io";
pub const VERSION: &str = "v1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRoute {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: HttpRouteSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RouteStatus>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteSpec {
    #[serde(default)]
    pub parent_refs: Vec<ParentReference>,
    #[serde(default)]
    pub hostnames: Vec<String>,
    #[serde(default)]
    pub rules: Vec<HttpRouteRule>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentReference {
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub section_name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteRule {
    #[serde(default)]
    pub matches: Vec<HttpRouteMatch>,
    #[serde(default)]
    pub backend_refs: Vec<BackendRef>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteMatch {
    #[serde(default)]
    pub path: Option<PathMatch>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathMatch {
    /// Exact, PathPrefix (the default) or RegularExpression.
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    #[serde(default)]
    pub value: Option<String>,
}

/// A backend of a rule. `group` "" and `kind` "Service" are the defaults; `weight` defaults
/// to 1 and 0 sends it no traffic.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendRef {
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub port: Option<i32>,
    #[serde(default)]
    pub weight: Option<i32>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteStatus {
    #[serde(default)]
    pub parents: Vec<RouteParentStatus>,
}

/// What one parent (a Gateway's listener) says of the route: `Accepted`, `ResolvedRefs`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteParentStatus {
    #[serde(default)]
    pub parent_ref: ParentReference,
    #[serde(default)]
    pub controller_name: String,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

crate::cluster::argo::argo_resource!(
    HttpRoute,
    "HTTPRoute",
    "httproutes",
    crate::cluster::gateway::GROUP,
    crate::cluster::gateway::VERSION
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_weighted_route_parses_with_its_defaults_left_empty() {
        let r: HttpRoute = serde_json::from_value(serde_json::json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {
                "parentRefs": [{"name": "web", "namespace": "cnpe-ingress"}],
                "hostnames": ["shop.example"],
                "rules": [{
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "backendRefs": [
                        {"name": "web", "port": 80, "weight": 0},
                        {"name": "legacy", "port": 80}
                    ]
                }]
            },
            "status": {"parents": [{
                "parentRef": {"name": "web", "namespace": "cnpe-ingress"},
                "controllerName": "traefik.io/gateway-controller",
                "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                    "message": "", "lastTransitionTime": "2026-12-06T10:00:00Z"}]
            }]}
        }))
        .unwrap();
        let refs = &r.spec.rules[0].backend_refs;
        assert_eq!(refs[0].weight, Some(0));
        assert_eq!((refs[1].name.as_str(), refs[1].weight), ("legacy", None));
        assert_eq!(refs[1].kind, None);
        let parents = &r.status.as_ref().unwrap().parents;
        assert_eq!(parents[0].conditions[0].type_, "Accepted");
        assert_eq!(
            <HttpRoute as kube::Resource>::api_version(&()),
            "gateway.networking.k8s.io/v1"
        );
    }
}
