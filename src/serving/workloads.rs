//! Workload checks (pure): is a Deployment, StatefulSet, DaemonSet or bare Pod fully at its
//! newest revision, with every desired replica updated, ready and available, and no ready or
//! serving pod of an older revision? Stricter than gitops-engine's health (held against its
//! own fixtures in tests/serving_health.rs).

use crate::serving::model::Objects;
use crate::serving::verdict::Unmet;

/// The workload kinds the gate checks (closed set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum WorkloadKind {
    Deployment,
    StatefulSet,
    DaemonSet,
    Pod,
}

/// A workload of the Application (from `status.resources`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct WorkloadRef {
    pub kind: WorkloadKind,
    pub namespace: String,
    pub name: String,
}

/// What one workload's check found: its unmet conditions (empty = at its newest revision,
/// fully rolled out) and, for each of its pods, the revision label the pod carries and
/// whether that is the newest one.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct WorkloadCheck {
    pub workload: WorkloadRef,
    pub unmet: Vec<Unmet>,
    /// Pod name -> (its revision, whether it is the workload's newest revision).
    pub pods: Vec<PodRevision>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PodRevision {
    pub pod: String,
    pub revision: Option<String>,
    pub newest: bool,
    pub ready: bool,
}

/// Checks one workload against the objects (missing workload = unmet, named).
pub fn check(workload: &WorkloadRef, objects: &Objects) -> WorkloadCheck {
    let _ = (workload, objects);
    unimplemented!("helper")
}

/// The workload (of `workloads`) that owns `pod`, following ownerReferences through
/// ReplicaSets; `None` for a pod no workload of the Application owns (a stray).
pub fn owner_of<'a>(
    pod: &k8s_openapi::api::core::v1::Pod,
    workloads: &'a [WorkloadRef],
    objects: &Objects,
) -> Option<&'a WorkloadRef> {
    let _ = (pod, workloads, objects);
    unimplemented!("helper")
}
