//! Wait predicates (pure): given evidence, which conditions of "healthy at SHA" or "failed at
//! SHA" are still unmet, each with the live value, so a human can read why.

use crate::observe::evidence::Evidence;
use crate::serving::verdict::Condition;
use serde::Serialize;
use std::fmt;

/// The evidence fields a lab wait follows (closed set), named as in lab.md's evidence table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    TargetRevision,
    ObservedRevision,
    OperationRevision,
    OperationPhase,
    Sync,
    ObservedGeneration,
    Health,
    Replicas,
    Updated,
    Ready,
    Available,
    ReadyEndpoints,
    ProgressDeadlineExceeded,
    HttpCode,
    HttpBody,
}

impl Field {
    pub const ALL: [Field; 15] = [
        Field::TargetRevision,
        Field::ObservedRevision,
        Field::OperationRevision,
        Field::OperationPhase,
        Field::Sync,
        Field::ObservedGeneration,
        Field::Health,
        Field::Replicas,
        Field::Updated,
        Field::Ready,
        Field::Available,
        Field::ReadyEndpoints,
        Field::ProgressDeadlineExceeded,
        Field::HttpCode,
        Field::HttpBody,
    ];

    /// The evidence field's name (`ready_endpoints`).
    pub fn as_str(self) -> &'static str {
        match self {
            Field::TargetRevision => "target_revision",
            Field::ObservedRevision => "observed_revision",
            Field::OperationRevision => "operation_revision",
            Field::OperationPhase => "operation_phase",
            Field::Sync => "sync",
            Field::ObservedGeneration => "observed_generation",
            Field::Health => "health",
            Field::Replicas => "replicas",
            Field::Updated => "updated",
            Field::Ready => "ready",
            Field::Available => "available",
            Field::ReadyEndpoints => "ready_endpoints",
            Field::ProgressDeadlineExceeded => "progress_deadline_exceeded",
            Field::HttpCode => "http_code",
            Field::HttpBody => "http_body",
        }
    }

    /// The gate's condition that decides the same fact, so "healthy at SHA" is the gate's
    /// approval seen through the lab's evidence: a field unmet in the lab's wait is this
    /// condition unmet in the gate's decision on the same objects (`tests/serving.rs` holds the
    /// two against each other). `None`: the lab asks more than the gate, and says why.
    pub fn condition(self) -> Option<Condition> {
        Some(match self {
            Field::ObservedRevision => Condition::SyncRevision,
            Field::OperationRevision => Condition::OperationRevision,
            Field::OperationPhase => Condition::OperationPhase,
            Field::Sync => Condition::SyncStatus,
            Field::ObservedGeneration => Condition::WorkloadGeneration,
            Field::Health => Condition::HealthStatus,
            Field::Replicas | Field::Updated | Field::Ready | Field::Available => {
                Condition::WorkloadReplicas
            }
            Field::ReadyEndpoints => Condition::AtLeastOneEndpoint,
            Field::HttpCode | Field::HttpBody => Condition::EndpointAnswers,
            // The lab pins spec.source.targetRevision to the SHA it committed (lab.md); the gate
            // is handed the SHA and checks what Argo CD synced, whatever the spec tracks.
            Field::TargetRevision => return None,
            // The outage's own signal (the failed wait); the gate rejects on health Degraded.
            Field::ProgressDeadlineExceeded => return None,
        })
    }

    pub fn is_http(self) -> bool {
        matches!(self, Field::HttpCode | Field::HttpBody)
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unmet {
    pub what: Field,
    pub want: String,
    pub found: String,
}

impl fmt::Display for Unmet {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}: want {}, found {}", self.what, self.want, self.found)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Healthy,
    Failed,
}

impl Target {
    pub fn name(self) -> &'static str {
        match self {
            Target::Healthy => "healthy",
            Target::Failed => "failed",
        }
    }
}

struct Conditions(Vec<Unmet>);

impl Conditions {
    fn need<T: PartialEq + fmt::Debug>(&mut self, what: Field, found: T, want: T) {
        if found != want {
            self.0.push(Unmet {
                what,
                want: format!("{want:?}"),
                found: format!("{found:?}"),
            });
        }
    }
    fn need_that(&mut self, what: Field, ok: bool, want: &str, found: String) {
        if !ok {
            self.0.push(Unmet {
                what,
                want: want.into(),
                found,
            });
        }
    }
}

/// Argo CD has applied `sha`: target, compared and operation revision all equal it, and the
/// sync operation Succeeded. Before this holds, health may describe the previous revision.
fn applied(c: &mut Conditions, ev: &Evidence, sha: &str) {
    c.need(
        Field::TargetRevision,
        ev.target_revision.as_deref(),
        Some(sha),
    );
    c.need(
        Field::ObservedRevision,
        ev.observed_revision.as_deref(),
        Some(sha),
    );
    c.need(
        Field::OperationRevision,
        ev.operation_revision.as_deref(),
        Some(sha),
    );
    c.need(
        Field::OperationPhase,
        ev.operation_phase.as_deref(),
        Some("Succeeded"),
    );
    c.need(Field::Sync, ev.sync.as_deref(), Some("Synced"));
    c.need_that(
        Field::ObservedGeneration,
        ev.generation.is_some_and(|g| g == ev.observed_generation),
        "equal to generation",
        format!(
            "{} (generation {:?})",
            ev.observed_generation, ev.generation
        ),
    );
}

/// Serving `sha` with `body`: what the gate approves, plus the operation having finished.
pub fn healthy(ev: &Evidence, sha: &str, body: &str) -> Vec<Unmet> {
    let mut c = Conditions(Vec::new());
    applied(&mut c, ev, sha);
    c.need(Field::Health, ev.health.as_deref(), Some("Healthy"));
    c.need(Field::Replicas, ev.replicas, 1);
    c.need(Field::Updated, ev.updated, 1);
    c.need(Field::Ready, ev.ready, 1);
    c.need(Field::Available, ev.available, 1);
    c.need(Field::ReadyEndpoints, ev.ready_endpoints, 1);
    c.need(Field::HttpCode, ev.http_code, Some(200));
    c.need(Field::HttpBody, ev.http_body.as_deref(), Some(body));
    c.0
}

/// The Synced outage at `sha`: applied, Degraded by the progress deadline, nothing serving.
pub fn failed(ev: &Evidence, sha: &str) -> Vec<Unmet> {
    let mut c = Conditions(Vec::new());
    applied(&mut c, ev, sha);
    c.need(Field::Health, ev.health.as_deref(), Some("Degraded"));
    c.need(
        Field::ProgressDeadlineExceeded,
        ev.progress_deadline_exceeded,
        true,
    );
    c.need(Field::Ready, ev.ready, 0);
    c.need(Field::Available, ev.available, 0);
    c.need(Field::ReadyEndpoints, ev.ready_endpoints, 0);
    c.need_that(
        Field::HttpCode,
        ev.http_code != Some(200),
        "anything but 200 (or no response)",
        format!("{:?}", ev.http_code),
    );
    c.0
}

pub fn unmet(target: Target, ev: &Evidence, sha: &str, body: &str) -> Vec<Unmet> {
    match target {
        Target::Healthy => healthy(ev, sha, body),
        Target::Failed => failed(ev, sha),
    }
}

/// The live values a wait follows, for the timeline's "what flipped when" (pure).
pub fn tracked_values(ev: &Evidence) -> Vec<(Field, String)> {
    let o = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    vec![
        (Field::Sync, o(&ev.sync)),
        (Field::Health, o(&ev.health)),
        (Field::OperationPhase, o(&ev.operation_phase)),
        (
            Field::ObservedRevision,
            ev.observed_revision
                .as_deref()
                .map_or("-".into(), |r| crate::sha::short(r).to_string()),
        ),
        (Field::ReadyEndpoints, ev.ready_endpoints.to_string()),
        (
            Field::ProgressDeadlineExceeded,
            ev.progress_deadline_exceeded.to_string(),
        ),
        (
            Field::HttpCode,
            ev.http_code.map_or("-".into(), |c| c.to_string()),
        ),
    ]
}
