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
    /// `reconciledAt` at or after `operationState.finishedAt` (in hook mode, while the
    /// operation runs: its `startedAt`).
    Fresh,
    /// No ComparisonError / InvalidSpecError / SyncError (any `*Error`) condition.
    NoSpecErrors,
    /// A workload listed in `status.resources` is absent from the cluster.
    WorkloadExists,
    /// A Deployment with `spec.paused`: its rollout never progresses, so it never approves.
    WorkloadPaused,
    WorkloadGeneration,
    WorkloadReplicas,
    WorkloadRevision,
    /// An AnalysisRun of a Rollout (canary step or background, blue-green pre- or
    /// post-promotion) that is not Successful.
    AnalysisPassed,
    /// A ready or serving pod of an older revision.
    OldRevisionServing,
    AtLeastOneEndpoint,
    EndpointAnswers,
    /// An endpoint whose pod no workload of the Application owns.
    StrayEndpoint,
    /// An endpoint whose pod belongs to a managed resource of a kind the gate does not model
    /// (a bare ReplicaSet, a custom controller): its revision cannot be read, so it fails
    /// closed, by name.
    UnmodeledWorkload,
    /// A backend of a route of the Application (Ingress, HTTPRoute) that gets traffic and is
    /// not a Service of the Application (outside it, missing, another kind, a port it lacks).
    RouteBackend,
    /// An HTTPRoute rule whose weights send nothing to the Application's Services.
    RouteWeight,
    /// An HTTPRoute not Accepted (or with unresolved references) by a Gateway it names.
    RouteAccepted,
    /// `--via-route`: a request through the ingress controller, as a client sends it (Host,
    /// path), answered with something other than the release.
    RouteAnswers,
    Deadline,
}

impl Condition {
    /// Every condition, in the order they are checked.
    pub const ALL: [Condition; 24] = [
        Condition::ApplicationExists,
        Condition::SyncRevision,
        Condition::OperationRevision,
        Condition::OperationPhase,
        Condition::SyncStatus,
        Condition::HealthStatus,
        Condition::Fresh,
        Condition::NoSpecErrors,
        Condition::WorkloadExists,
        Condition::WorkloadPaused,
        Condition::WorkloadGeneration,
        Condition::WorkloadReplicas,
        Condition::WorkloadRevision,
        Condition::AnalysisPassed,
        Condition::OldRevisionServing,
        Condition::AtLeastOneEndpoint,
        Condition::EndpointAnswers,
        Condition::StrayEndpoint,
        Condition::UnmodeledWorkload,
        Condition::RouteBackend,
        Condition::RouteWeight,
        Condition::RouteAccepted,
        Condition::RouteAnswers,
        Condition::Deadline,
    ];

    /// The name used in the JSON, the text and the metrics (`stray_endpoint`).
    pub fn as_str(self) -> &'static str {
        match self {
            Condition::ApplicationExists => "application_exists",
            Condition::SyncRevision => "sync_revision",
            Condition::OperationRevision => "operation_revision",
            Condition::OperationPhase => "operation_phase",
            Condition::SyncStatus => "sync_status",
            Condition::HealthStatus => "health_status",
            Condition::Fresh => "fresh",
            Condition::NoSpecErrors => "no_spec_errors",
            Condition::WorkloadExists => "workload_exists",
            Condition::WorkloadPaused => "workload_paused",
            Condition::WorkloadGeneration => "workload_generation",
            Condition::WorkloadReplicas => "workload_replicas",
            Condition::WorkloadRevision => "workload_revision",
            Condition::AnalysisPassed => "analysis_passed",
            Condition::OldRevisionServing => "old_revision_serving",
            Condition::AtLeastOneEndpoint => "at_least_one_endpoint",
            Condition::EndpointAnswers => "endpoint_answers",
            Condition::StrayEndpoint => "stray_endpoint",
            Condition::UnmodeledWorkload => "unmodeled_workload",
            Condition::RouteBackend => "route_backend",
            Condition::RouteWeight => "route_weight",
            Condition::RouteAccepted => "route_accepted",
            Condition::RouteAnswers => "route_answers",
            Condition::Deadline => "deadline",
        }
    }
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approved => "approved",
            Decision::Pending => "pending",
            Decision::Rejected => "rejected",
        }
    }
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
    ///
    /// The seconds between the previous call and this one are added to a counter when the
    /// PREVIOUS call's state was a lie (what was seen holds until the next observation; the
    /// first call only records). An `at` earlier than the previous one (a clock step back)
    /// adds nothing and does not move the window back, so no interval is counted twice.
    pub fn observe(&mut self, at: Timestamp, synced: bool, healthy: bool, all_serving: bool) {
        let (synced_lie, healthy_lie) = (synced && !all_serving, healthy && !all_serving);
        let mut since = at;
        if let Some((prev, prev_synced_lie, prev_healthy_lie)) = self.last {
            let secs = at.duration_since(prev).as_secs_f64();
            if secs > 0.0 {
                if prev_synced_lie {
                    self.synced_not_serving_seconds += secs;
                }
                if prev_healthy_lie {
                    self.healthy_not_serving_seconds += secs;
                }
            } else {
                since = prev;
            }
        }
        self.last = Some((since, synced_lie, healthy_lie));
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub application: String,
    pub sha: crate::sha::Sha,
    pub decision: Decision,
    pub decided_at: Timestamp,
    pub unmet: Vec<Unmet>,
    pub endpoints: Vec<EndpointReport>,
    /// The Application's Ingresses and HTTPRoutes and where each sends clients (left out of
    /// the JSON when it has none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<crate::serving::model::RouteReport>,
    pub likely_causes: Vec<String>,
    pub lie_window: LieWindow,
}

impl Verdict {
    /// The text for stderr: the decision, each unmet condition with its live value, each
    /// endpoint and its answer, the likely causes.
    ///
    /// Layout: `gate <ns>/<app> at <sha12>: APPROVED|PENDING|REJECTED`, then `unmet:` (one
    /// line per condition with want and live value), `endpoints:` (pod, owner, revision,
    /// conditions, answer), `routes:` (each backend of each Ingress and HTTPRoute, when there are
    /// any), `likely causes:`, and the lie window. Bodies are cut to
    /// [`SHOWN_BODY`] characters. Only what is in the verdict is printed: no credential ever is.
    pub fn render_text(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let decision = match self.decision {
            Decision::Approved => "APPROVED",
            Decision::Pending => "PENDING",
            Decision::Rejected => "REJECTED",
        };
        let sha = self.sha.short12();
        let _ = writeln!(out, "gate {} at {sha}: {decision}", self.application);
        if !self.unmet.is_empty() {
            out.push_str("unmet:\n");
            for u in &self.unmet {
                let _ = writeln!(
                    out,
                    "  - {} {}: want {}, found {}",
                    u.condition.as_str(),
                    u.subject,
                    u.want,
                    u.found
                );
            }
        }
        if self.endpoints.is_empty() {
            out.push_str("endpoints: none\n");
        } else {
            out.push_str("endpoints:\n");
            for e in &self.endpoints {
                let mut flags = Vec::new();
                if e.ready {
                    flags.push("ready");
                }
                if e.serving {
                    flags.push("serving");
                }
                if e.terminating {
                    flags.push("terminating");
                }
                let answer = match &e.answer {
                    None => "no answer yet".to_string(),
                    Some(a) => describe_answer(a),
                };
                let _ = writeln!(
                    out,
                    "  - {} pod {} of {}, revision {}{}, {}: {}, {}",
                    endpoint_address(&e.endpoint),
                    e.endpoint.pod.as_deref().unwrap_or("-"),
                    e.owner
                        .as_deref()
                        .unwrap_or("no workload of the Application"),
                    e.revision.as_deref().unwrap_or("-"),
                    if e.newest_revision {
                        " (newest)"
                    } else {
                        " (NOT newest)"
                    },
                    flags.join("+"),
                    answer,
                    if e.matched { "matched" } else { "not matched" }
                );
            }
        }
        if !self.routes.is_empty() {
            out.push_str("routes:\n");
            for r in &self.routes {
                for b in &r.backends {
                    let weight = b
                        .backend
                        .weight
                        .map(|w| format!(" weight {w}"))
                        .unwrap_or_default();
                    let _ = writeln!(
                        out,
                        "  - {} {} -> {}/{}{weight}: {}",
                        r.route.subject(),
                        b.backend.rule,
                        b.backend.namespace,
                        b.backend.name,
                        b.problem
                            .as_deref()
                            .unwrap_or("a Service of the Application")
                    );
                }
            }
        }
        if !self.likely_causes.is_empty() {
            out.push_str("likely causes:\n");
            for c in &self.likely_causes {
                let _ = writeln!(out, "  - {c}");
            }
        }
        let _ = writeln!(
            out,
            "lie window: Argo CD Synced while not serving {:.1}s, Healthy while not serving {:.1}s",
            self.lie_window.synced_not_serving_seconds, self.lie_window.healthy_not_serving_seconds
        );
        out
    }

    /// Turns a verdict that is not approved into a rejection that says why: a
    /// [`Condition::Deadline`] unmet on the Application naming `want` and the first unmet
    /// condition (found "pending: <first unmet>" for a pending verdict). Used at the gate's
    /// deadline and with `--once`. An approved verdict is left as it is.
    pub fn reject_unapproved(&mut self, want: &str) {
        if self.decision == Decision::Approved {
            return;
        }
        let first = self.unmet.first().map_or_else(
            || "nothing named".to_string(),
            |u| format!("{} {}: {}", u.condition.as_str(), u.subject, u.found),
        );
        let found = match self.decision {
            Decision::Pending => format!("pending: {first}"),
            _ => format!("rejected: {first}"),
        };
        self.decision = Decision::Rejected;
        self.unmet.push(Unmet {
            condition: Condition::Deadline,
            subject: format!("Application {}", self.application),
            want: want.to_string(),
            found,
        });
    }
}

/// How many characters of a body a message shows.
pub const SHOWN_BODY: usize = 120;

/// A body cut to [`SHOWN_BODY`] characters, quoted (newlines escaped), "…" when cut.
pub fn shown_body(body: &str) -> String {
    let mut cut: String = body.chars().take(SHOWN_BODY).collect();
    if cut.len() < body.len() {
        cut.push('…');
    }
    format!("{cut:?}")
}

/// "10.0.0.7:8080", "[fd00::7]:8080".
pub fn endpoint_address(key: &EndpointKey) -> String {
    if key.ip.contains(':') {
        format!("[{}]:{}", key.ip, key.port)
    } else {
        format!("{}:{}", key.ip, key.port)
    }
}

/// One probe answer for a human: "HTTP 200 \"v2\" at T", "no answer: refused at T".
pub fn describe_answer(a: &ProbeAnswer) -> String {
    match (a.code, &a.error) {
        (Some(code), _) => format!(
            "HTTP {code} {} at {}",
            shown_body(a.body.as_deref().unwrap_or("")),
            a.at
        ),
        (None, Some(e)) => format!("no answer: {e} at {}", a.at),
        (None, None) => format!("no answer at {}", a.at),
    }
}

/// The verdicts as an OpenMetrics text file (node-exporter textfile style), `# EOF` last.
///
/// Gauges, one family at a time, each sample labelled `application` and `sha`:
/// `cnpe_gate_approved` (1/0), `cnpe_gate_decision` (1 for the decision in label `decision`,
/// 0 for the others), `cnpe_gate_unmet` (per `condition`, every condition listed, 0 included,
/// so a series never vanishes), `cnpe_gate_endpoints`, `cnpe_gate_endpoints_matched`,
/// `cnpe_gate_lie_synced_not_serving_seconds`, `cnpe_gate_lie_healthy_not_serving_seconds`
/// and `cnpe_gate_decided_timestamp_seconds`. Label values are escaped as the spec says
/// (backslash, double quote, newline).
pub fn openmetrics(verdicts: &[Verdict]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let labels = |v: &Verdict| {
        format!(
            "application=\"{}\",sha=\"{}\"",
            escape_label(&v.application),
            escape_label(&v.sha)
        )
    };
    let family = |out: &mut String, name: &str, help: &str| {
        let _ = writeln!(out, "# TYPE {name} gauge");
        let _ = writeln!(out, "# HELP {name} {help}");
    };
    // A family with one sample per verdict, labelled by Application and SHA.
    let per_verdict =
        |out: &mut String, name: &str, help: &str, value: &dyn Fn(&Verdict) -> String| {
            family(out, name, help);
            for v in verdicts {
                let _ = writeln!(out, "{name}{{{}}} {}", labels(v), value(v));
            }
        };
    per_verdict(
        &mut out,
        "cnpe_gate_approved",
        "1 when the gate approved the Application at the SHA, else 0.",
        &|v| u8::from(v.decision == Decision::Approved).to_string(),
    );
    family(
        &mut out,
        "cnpe_gate_decision",
        "1 for the gate's decision (approved, pending or rejected), 0 for the others.",
    );
    for v in verdicts {
        for d in [Decision::Approved, Decision::Pending, Decision::Rejected] {
            let _ = writeln!(
                out,
                "cnpe_gate_decision{{{},decision=\"{}\"}} {}",
                labels(v),
                d.as_str(),
                u8::from(v.decision == d)
            );
        }
    }
    family(
        &mut out,
        "cnpe_gate_unmet",
        "Unmet conditions of the verdict, per condition.",
    );
    for v in verdicts {
        for c in Condition::ALL {
            let n = v.unmet.iter().filter(|u| u.condition == c).count();
            let _ = writeln!(
                out,
                "cnpe_gate_unmet{{{},condition=\"{}\"}} {n}",
                labels(v),
                c.as_str()
            );
        }
    }
    per_verdict(
        &mut out,
        "cnpe_gate_endpoints",
        "Ready or serving endpoints of the Application's Services.",
        &|v| v.endpoints.len().to_string(),
    );
    per_verdict(
        &mut out,
        "cnpe_gate_endpoints_matched",
        "Endpoints whose fresh answer was 2xx with the expected content.",
        &|v| v.endpoints.iter().filter(|e| e.matched).count().to_string(),
    );
    per_verdict(
        &mut out,
        "cnpe_gate_lie_synced_not_serving_seconds",
        "Seconds Argo CD said Synced at the SHA while not every endpoint served the expected content.",
        &|v| number(v.lie_window.synced_not_serving_seconds),
    );
    per_verdict(
        &mut out,
        "cnpe_gate_lie_healthy_not_serving_seconds",
        "Seconds Argo CD said Healthy at the SHA while not every endpoint served the expected content.",
        &|v| number(v.lie_window.healthy_not_serving_seconds),
    );
    per_verdict(
        &mut out,
        "cnpe_gate_decided_timestamp_seconds",
        "When the verdict was decided (Unix seconds).",
        &|v| number(v.decided_at.as_millisecond() as f64 / 1000.0),
    );
    out.push_str("# EOF\n");
    out
}

/// A label value escaped per OpenMetrics: `\` -> `\\`, `"` -> `\"`, newline -> `\n`.
pub fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A sample value: finite numbers as Rust prints them (`12`, `0.5`); never NaN or infinite.
fn number(x: f64) -> String {
    if x.is_finite() {
        format!("{x}")
    } else {
        "0".into()
    }
}
