//! The gate's verdict: the decision, every unmet condition with its live value, every endpoint
//! probed with its pod, revision and answer, the likely causes, and the lie window; rendered as
//! JSON (`--json`, stdout), as text (stderr) and as OpenMetrics (`--metrics`).

use crate::serving::model::{EndpointKey, ProbeAnswer};
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

/// The decision (closed set). `Pending` is never a final answer: the shell keeps waiting, and
/// at the deadline (or with `--once`) a pending decision becomes `Rejected`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Approved,
    /// Not yet; may still become approved before the deadline.
    Pending,
    /// Final: Argo CD says Degraded or the operation Failed at the SHA, or the deadline passed.
    Rejected,
}

/// The conditions the gate requires (closed set), in the order they are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    ApplicationExists,
    SyncRevision,
    OperationRevision,
    OperationPhase,
    SyncStatus,
    HealthStatus,
    /// `reconciledAt` at or after `operationState.finishedAt`.
    Fresh,
    /// No ComparisonError / InvalidSpecError condition.
    NoSpecErrors,
    WorkloadGeneration,
    WorkloadReplicas,
    WorkloadRevision,
    /// A ready or serving pod of an older revision.
    OldRevisionServing,
    AtLeastOneEndpoint,
    EndpointAnswers,
    /// An endpoint whose pod no workload of the Application owns.
    StrayEndpoint,
    Deadline,
}

/// One unmet condition, with what it was about and the live value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unmet {
    pub condition: Condition,
    /// "Application argocd/shop", "Deployment shop/web", "endpoint 10.0.0.7:8080 (pod web-x)".
    pub subject: String,
    pub want: String,
    pub found: String,
}

/// One endpoint as probed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EndpointReport {
    pub endpoint: EndpointKey,
    /// "Deployment shop/web", or `None` for a stray pod.
    pub owner: Option<String>,
    pub revision: Option<String>,
    pub newest_revision: bool,
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
    pub answer: Option<ProbeAnswer>,
    pub matched: bool,
}

/// Seconds during which Argo CD reported Synced (and, apart, Healthy) at the SHA while not
/// every endpoint served the expected content. Fed one instant at a time (pure accumulator).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LieWindow {
    pub synced_not_serving_seconds: f64,
    pub healthy_not_serving_seconds: f64,
    #[serde(skip)]
    last: Option<(Timestamp, bool, bool)>,
}

impl LieWindow {
    /// At `at`: whether Argo CD said Synced / Healthy at the SHA and whether every endpoint
    /// served. The state holds until the next call.
    pub fn observe(&mut self, at: Timestamp, synced: bool, healthy: bool, all_serving: bool) {
        let _ = (at, synced, healthy, all_serving);
        unimplemented!("helper")
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub application: String,
    pub sha: String,
    pub decision: Decision,
    pub decided_at: Timestamp,
    pub unmet: Vec<Unmet>,
    pub endpoints: Vec<EndpointReport>,
    pub likely_causes: Vec<String>,
    pub lie_window: LieWindow,
}

impl Verdict {
    /// The text for stderr: the decision, each unmet condition with its live value, each
    /// endpoint and its answer, the likely causes.
    pub fn render_text(&self) -> String {
        unimplemented!("helper")
    }
}

/// The verdicts as an OpenMetrics text file (node-exporter textfile style), `# EOF` last.
pub fn openmetrics(verdicts: &[Verdict]) -> String {
    let _ = verdicts;
    unimplemented!("helper")
}
