//! Typed objects as the controllers write them (k8s-openapi and our Argo CD types), shared by
//! the pure gate tests and the benches, so a test's world and a bench's world have one shape:
//! an Application Synced and Healthy at a SHA, the resources it manages, and ready
//! EndpointSlice entries. Included by `#[path]` (benches cannot `mod` a tests/ folder).

#![allow(dead_code)]

use cnpe_lab::cluster::argo::{
    ApplicationStatus, HealthStatus, Operation, OperationState, ResourceStatus, SyncOperation,
    SyncResult, SyncStatus,
};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::discovery::v1::{
    Endpoint as SliceEndpoint, EndpointConditions, EndpointPort, EndpointSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// A resource the Application manages, Synced (Argo CD's resource list carries no health for
/// Deployments and Services in these worlds).
pub fn managed(group: &str, kind: &str, namespace: &str, name: &str) -> ResourceStatus {
    ResourceStatus {
        group: Some(group.into()),
        version: Some("v1".into()),
        kind: Some(kind.into()),
        namespace: Some(namespace.into()),
        name: Some(name.into()),
        status: Some("Synced".into()),
        hook: None,
        health: None,
    }
}

/// Synced and Healthy at `sha`: the sync operation to `sha` started 1 s after `zero`,
/// Succeeded at 5 s, and the Application was reconciled at 10 s.
pub fn synced_status(
    sha: &str,
    zero: Timestamp,
    resources: Vec<ResourceStatus>,
) -> ApplicationStatus {
    let at = |secs| (zero + SignedDuration::from_secs(secs)).to_string();
    ApplicationStatus {
        sync: Some(SyncStatus {
            status: Some("Synced".into()),
            revision: Some(sha.into()),
            revisions: None,
        }),
        health: Some(HealthStatus {
            status: Some("Healthy".into()),
            message: None,
        }),
        operation_state: Some(OperationState {
            phase: Some("Succeeded".into()),
            message: Some("successfully synced (all tasks run)".into()),
            started_at: Some(at(1)),
            finished_at: Some(at(5)),
            sync_result: Some(SyncResult {
                revision: Some(sha.into()),
                revisions: None,
            }),
            operation: Some(Operation {
                sync: Some(SyncOperation {
                    revision: Some(sha.into()),
                }),
            }),
        }),
        conditions: None,
        reconciled_at: Some(at(10)),
        resources: Some(resources),
    }
}

/// A ready, serving, not terminating endpoint of a pod.
pub fn ready_endpoint(ip: String, pod: ObjectReference, node: Option<&str>) -> SliceEndpoint {
    SliceEndpoint {
        addresses: vec![ip],
        conditions: Some(EndpointConditions {
            ready: Some(true),
            serving: Some(true),
            terminating: Some(false),
        }),
        node_name: node.map(Into::into),
        target_ref: Some(pod),
        ..Default::default()
    }
}

/// The labels the EndpointSlice controller puts on a slice of Service `service`.
pub fn slice_labels(service: &str) -> [(&'static str, &str); 2] {
    [
        ("kubernetes.io/service-name", service),
        (
            "endpointslice.kubernetes.io/managed-by",
            "endpointslice-controller.k8s.io",
        ),
    ]
}

/// An IPv4 EndpointSlice with one TCP port `http` 8080, as the EndpointSlice controller writes
/// it (`metadata` carries the labels of [`slice_labels`]).
pub fn http_slice(metadata: ObjectMeta, endpoints: Vec<SliceEndpoint>) -> EndpointSlice {
    EndpointSlice {
        address_type: "IPv4".into(),
        metadata,
        ports: Some(vec![EndpointPort {
            name: Some("http".into()),
            port: Some(8080),
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        endpoints: Some(endpoints),
    }
}
