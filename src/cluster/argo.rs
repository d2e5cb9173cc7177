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

/// A refresh request whose value differs from `current` (what the Application carries now):
/// patching the same value again changes nothing on the server, so no watch event reaches Argo
/// CD's controller; "hard" also makes the repo-server render the manifests again.
pub fn changed_refresh_patch(current: Option<&str>) -> serde_json::Value {
    let value = if current == Some("hard") {
        "normal"
    } else {
        "hard"
    };
    serde_json::json!({"metadata": {"annotations": {REFRESH_ANNOTATION: value}}})
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
    /// Argo CD's health of this one resource (absent for kinds without a health check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<HealthStatus>,
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

/// Namespaced custom kinds as typed kube resources, so `Api<Application>` (and Argo Rollouts'
/// `Api<Rollout>`, Gateway API's `Api<HttpRoute>`) reads, applies and watches them without a
/// `DynamicObject` round trip. Without a group and version: argoproj.io/v1alpha1.
macro_rules! argo_resource {
    ($ty:ty, $kind:literal, $plural:literal) => {
        $crate::cluster::argo::argo_resource!(
            $ty,
            $kind,
            $plural,
            $crate::cluster::argo::GROUP,
            $crate::cluster::argo::VERSION
        );
    };
    ($ty:ty, $kind:literal, $plural:literal, $group:expr, $version:expr) => {
        impl kube::Resource for $ty {
            type DynamicType = ();
            type Scope = kube::core::NamespaceResourceScope;
            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                $group.into()
            }
            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                $version.into()
            }
            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}
argo_resource!(Application, "Application", "applications");
argo_resource!(AppProject, "AppProject", "appprojects");
pub(crate) use argo_resource;

impl Application {
    /// Whether Argo CD's last comparison was of `sha` (status.sync.revision, or one of
    /// status.sync.revisions for a multi-source Application).
    pub fn compared(&self, sha: &str) -> bool {
        let sync = self.status.as_ref().and_then(|s| s.sync.as_ref());
        sync.is_some_and(|s| {
            s.revision.as_deref() == Some(sha) || s.revisions.iter().flatten().any(|r| r == sha)
        })
    }

    /// The refresh Argo CD has been asked for and has not yet taken: its controller removes
    /// the annotation when the reconciliation that took it ends.
    pub fn pending_refresh(&self) -> Option<&str> {
        self.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(REFRESH_ANNOTATION))
            .map(String::as_str)
    }

    /// Whether Argo CD's controller has evaluated this Application at least once: it sets
    /// `status.sync.status` on every evaluation, `Unknown` when a spec error stopped it.
    pub fn evaluated(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.sync.as_ref())
            .and_then(|s| s.status.as_deref())
            .is_some_and(|s| !s.is_empty())
    }

    /// The InvalidSpecError Argo CD sets when, on evaluating this Application, its project
    /// cache had no AppProject of `spec.project` (an Application applied right after its
    /// project). Argo CD v3.5.2 evaluates an Application again on every update of it (its own
    /// status write included) but not when a project appears (its project informer only
    /// invalidates the cache: controller/appcontroller.go), so the condition is usually gone
    /// milliseconds later, and stays until the next periodic reconciliation when both
    /// evaluations ran before the project reached the cache.
    pub fn missing_project_condition(&self) -> Option<&AppCondition> {
        let wanted = format!(
            "Application referencing project {} which does not exist",
            self.spec.project
        );
        self.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .find(|c| {
                c.type_.as_deref() == Some("InvalidSpecError")
                    && c.message.as_deref() == Some(wanted.as_str())
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(status: serde_json::Value) -> Application {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web"},
            "spec": {"project": "shop", "source": {"repoURL": "git://x/app.git"},
                     "destination": {"namespace": "shop"}},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn a_refresh_request_is_pending_until_the_controller_removes_its_annotation() {
        let mut a = app(serde_json::json!({}));
        assert_eq!(a.pending_refresh(), None);
        a.metadata.annotations =
            Some([(REFRESH_ANNOTATION.to_string(), "normal".to_string())].into());
        assert_eq!(a.pending_refresh(), Some("normal"));
    }

    #[test]
    fn compared_only_when_the_last_comparison_was_of_that_revision() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        assert!(!app(serde_json::json!({})).compared(sha));
        assert!(
            !app(serde_json::json!({"sync": {"status": "Synced", "revision": "f00"}}))
                .compared(sha)
        );
        assert!(
            app(serde_json::json!({"sync": {"status": "OutOfSync", "revision": sha}}))
                .compared(sha)
        );
        assert!(app(serde_json::json!({"sync": {"revisions": ["f00", sha]}})).compared(sha));
    }

    #[test]
    fn a_repeated_refresh_request_always_changes_the_annotation() {
        let value = |p: serde_json::Value| p["metadata"]["annotations"][REFRESH_ANNOTATION].clone();
        assert_eq!(value(changed_refresh_patch(None)), "hard");
        assert_eq!(value(changed_refresh_patch(Some("normal"))), "hard");
        assert_eq!(value(changed_refresh_patch(Some("hard"))), "normal");
    }

    #[test]
    fn evaluated_only_once_the_controller_wrote_a_sync_status() {
        assert!(!app(serde_json::json!({})).evaluated());
        assert!(!app(serde_json::json!({"sync": {"status": ""}})).evaluated());
        assert!(app(serde_json::json!({"sync": {"status": "Unknown"}})).evaluated());
        assert!(app(serde_json::json!({"sync": {"status": "Synced"}})).evaluated());
    }

    #[test]
    fn missing_project_condition_is_the_one_for_its_own_project() {
        let cond = |message: &str, type_: &str| {
            serde_json::json!({"sync": {"status": "Unknown"},
                               "conditions": [{"type": type_, "message": message}]})
        };
        let own = "Application referencing project shop which does not exist";
        assert!(app(cond(own, "InvalidSpecError"))
            .missing_project_condition()
            .is_some());
        assert!(app(cond(own, "ComparisonError"))
            .missing_project_condition()
            .is_none());
        let other = "Application referencing project shopping which does not exist";
        assert!(app(cond(other, "InvalidSpecError"))
            .missing_project_condition()
            .is_none());
        let not_permitted = "application repo git://x/app.git is not permitted in project 'shop'";
        assert!(app(cond(not_permitted, "InvalidSpecError"))
            .missing_project_condition()
            .is_none());
        assert!(app(serde_json::json!({}))
            .missing_project_condition()
            .is_none());
    }
}
