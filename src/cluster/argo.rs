//! Argo CD's AppProject and Application as typed serde structs, following the CRD fields the lab
//! uses (see shared/facts/argo-k8s.md). Spec types serialize for apply; status types only read,
//! every field optional because Argo CD fills them in over time.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

pub const API_VERSION: &str = "argoproj.io/v1alpha1";
pub const GROUP: &str = "argoproj.io";
pub const VERSION: &str = "v1alpha1";
/// Annotation that asks the controller for a refresh; it removes it when done.
pub const REFRESH_ANNOTATION: &str = "argocd.argoproj.io/refresh";

/// The merge patch that requests a normal refresh of an Application and, when given, changes
/// its targetRevision and nothing else (steps 4 and 6 must not touch the rest of the spec).
pub fn refresh_patch(target_revision: Option<&str>) -> serde_json::Value {
    let mut patch =
        serde_json::json!({"metadata": {"annotations": {REFRESH_ANNOTATION: "normal"}}});
    if let Some(revision) = target_revision {
        patch["spec"] = serde_json::json!({"source": {"targetRevision": revision}});
    }
    patch
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppProject {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: AppProjectSpec,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppProjectSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub source_repos: Vec<String>,
    #[serde(default)]
    pub destinations: Vec<Destination>,
    /// `None` (absent) would allow every namespaced kind; the lab always sets it.
    #[serde(default)]
    pub namespace_resource_whitelist: Option<Vec<GroupKind>>,
    /// Always serialized, `[]` included: no cluster-scoped kind.
    #[serde(default)]
    pub cluster_resource_whitelist: Option<Vec<GroupKind>>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GroupKind {
    pub group: String,
    pub kind: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Destination {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Application {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: ApplicationSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ApplicationStatus>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSpec {
    pub project: String,
    /// Absent on a multi-source Application (`sources`); the lab always sets it.
    #[serde(default)]
    pub source: Source,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sources: Option<Vec<Source>>,
    pub destination: Destination,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_policy: Option<SyncPolicy>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Source {
    #[serde(rename = "repoURL")]
    pub repo_url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_revision: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncPolicy {
    /// Presence enables auto-sync.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub automated: Option<Automated>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Automated {
    #[serde(default)]
    pub prune: bool,
    #[serde(default)]
    pub self_heal: bool,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationStatus {
    #[serde(default)]
    pub sync: Option<SyncStatus>,
    #[serde(default)]
    pub health: Option<HealthStatus>,
    #[serde(default)]
    pub operation_state: Option<OperationState>,
    #[serde(default)]
    pub conditions: Option<Vec<AppCondition>>,
    #[serde(default)]
    pub reconciled_at: Option<String>,
    /// The resources Argo CD manages for this Application (what the gate checks).
    #[serde(default)]
    pub resources: Option<Vec<ResourceStatus>>,
}

/// One managed resource in `status.resources`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceStatus {
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub hook: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncStatus {
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub revision: Option<String>,
    /// One revision per source of a multi-source Application (`spec.sources`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revisions: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthStatus {
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperationState {
    #[serde(default)]
    pub phase: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub started_at: Option<String>,
    #[serde(default)]
    pub finished_at: Option<String>,
    #[serde(default)]
    pub sync_result: Option<SyncResult>,
    /// The operation this state reports on (what was asked for).
    #[serde(default)]
    pub operation: Option<Operation>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Operation {
    #[serde(default)]
    pub sync: Option<SyncOperation>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncOperation {
    #[serde(default)]
    pub revision: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncResult {
    #[serde(default)]
    pub revision: Option<String>,
    /// One revision per source of a multi-source Application.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revisions: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppCondition {
    #[serde(rename = "type", default)]
    pub type_: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub last_transition_time: Option<String>,
}

/// Both kinds as typed kube resources, so `Api<Application>` reads, applies and watches them
/// without a `DynamicObject` round trip.
macro_rules! argo_resource {
    ($ty:ty, $kind:literal, $plural:literal) => {
        impl kube::Resource for $ty {
            type DynamicType = ();
            type Scope = kube::core::NamespaceResourceScope;
            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                GROUP.into()
            }
            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                VERSION.into()
            }
            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}
argo_resource!(Application, "Application", "applications");
argo_resource!(AppProject, "AppProject", "appprojects");
