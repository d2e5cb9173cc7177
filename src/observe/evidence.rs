//! Evidence: the JSON object of lab.md ("the state file the gate reads"), derived purely from
//! the live API objects and one real HTTP result. Every field is always present; unknown values
//! are `null`; Deployment counters the API omits when zero are reported as integer 0.

pub use crate::cluster::probe::HttpOutcome;
pub use crate::cluster::LiveState;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: Option<String>,
    pub message: Option<String>,
}

/// Field order and names exactly as lab.md's table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    pub observed_at: String,
    pub application: String,
    pub project: Option<String>,
    pub target_revision: Option<String>,
    pub observed_revision: Option<String>,
    pub operation_revision: Option<String>,
    pub operation_phase: Option<String>,
    pub sync: Option<String>,
    pub health: Option<String>,
    pub namespace: String,
    pub deployment: String,
    pub generation: Option<i64>,
    pub observed_generation: i64,
    pub replicas: i32,
    pub updated: i32,
    pub ready: i32,
    pub available: i32,
    pub ready_endpoints: i64,
    pub progress_deadline_exceeded: bool,
    pub conditions: Vec<Condition>,
    pub http_url: String,
    pub http_code: Option<u16>,
    pub http_body: Option<String>,
    pub http_error: Option<String>,
}

/// Names of the observed objects (from the configuration).
#[derive(Debug, Clone)]
pub struct Subject {
    pub application: String,
    pub namespace: String,
    pub deployment: String,
}

impl Subject {
    pub fn from_config(cfg: &crate::config::Config) -> Self {
        Self {
            application: cfg.application.clone(),
            namespace: cfg.namespace.clone(),
            deployment: cfg.workload.clone(),
        }
    }
}

/// Endpoints of all slices whose `ready` is not false (a missing `ready` means ready; a slice
/// with `endpoints: null` has none).
pub fn ready_endpoints(slices: &[EndpointSlice]) -> i64 {
    slices
        .iter()
        .flat_map(|s| s.endpoints.iter().flatten())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
        .count() as i64
}

pub fn derive(
    subject: &Subject,
    live: &LiveState,
    http: &HttpOutcome,
    observed_at: chrono::DateTime<chrono::Utc>,
) -> Evidence {
    let app = live.application.as_ref();
    let status = app.and_then(|a| a.status.as_ref());
    let op = status.and_then(|s| s.operation_state.as_ref());
    let dep = live.deployment.as_ref();
    let dstatus = dep.and_then(|d| d.status.as_ref());
    let conditions: Vec<Condition> = dstatus
        .and_then(|s| s.conditions.as_ref())
        .map(|cs| {
            cs.iter()
                .map(|c| Condition {
                    type_: c.type_.clone(),
                    status: c.status.clone(),
                    reason: c.reason.clone(),
                    message: c.message.clone(),
                })
                .collect()
        })
        .unwrap_or_default();
    let progress_deadline_exceeded = conditions.iter().any(|c| {
        c.type_ == "Progressing" && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
    });
    Evidence {
        observed_at: observed_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        application: subject.application.clone(),
        project: app.map(|a| a.spec.project.clone()),
        target_revision: app.and_then(|a| a.spec.source.target_revision.clone()),
        observed_revision: status
            .and_then(|s| s.sync.as_ref())
            .and_then(|s| s.revision.clone()),
        operation_revision: op
            .and_then(|o| o.sync_result.as_ref())
            .and_then(|r| r.revision.clone()),
        operation_phase: op.and_then(|o| o.phase.clone()),
        sync: status
            .and_then(|s| s.sync.as_ref())
            .and_then(|s| s.status.clone()),
        health: status
            .and_then(|s| s.health.as_ref())
            .and_then(|h| h.status.clone()),
        namespace: subject.namespace.clone(),
        deployment: subject.deployment.clone(),
        generation: dep.and_then(|d| d.metadata.generation),
        observed_generation: dstatus.and_then(|s| s.observed_generation).unwrap_or(0),
        replicas: dstatus.and_then(|s| s.replicas).unwrap_or(0),
        updated: dstatus.and_then(|s| s.updated_replicas).unwrap_or(0),
        ready: dstatus.and_then(|s| s.ready_replicas).unwrap_or(0),
        available: dstatus.and_then(|s| s.available_replicas).unwrap_or(0),
        ready_endpoints: ready_endpoints(&live.slices),
        progress_deadline_exceeded,
        conditions,
        http_url: http.url.clone(),
        http_code: http.code,
        http_body: http.body.clone(),
        http_error: http.error.clone(),
    }
}

impl Evidence {
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("evidence serializes")
    }
}
