//! Wait predicates (pure): given evidence, which conditions of "healthy at SHA" or "failed at
//! SHA" are still unmet, each with the live value, so a human can read why.

use crate::evidence::Evidence;
use serde::Serialize;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unmet {
    pub what: &'static str,
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
    fn need<T: PartialEq + fmt::Debug>(&mut self, what: &'static str, found: T, want: T) {
        if found != want {
            self.0.push(Unmet { what, want: format!("{want:?}"), found: format!("{found:?}") });
        }
    }
    fn need_that(&mut self, what: &'static str, ok: bool, want: &str, found: String) {
        if !ok {
            self.0.push(Unmet { what, want: want.into(), found });
        }
    }
}

/// Argo CD has applied `sha`: target, compared and operation revision all equal it, and the
/// sync operation Succeeded. Before this holds, health may describe the previous revision.
fn applied(c: &mut Conditions, ev: &Evidence, sha: &str) {
    c.need("target_revision", ev.target_revision.as_deref(), Some(sha));
    c.need("observed_revision", ev.observed_revision.as_deref(), Some(sha));
    c.need("operation_revision", ev.operation_revision.as_deref(), Some(sha));
    c.need("operation_phase", ev.operation_phase.as_deref(), Some("Succeeded"));
    c.need("sync", ev.sync.as_deref(), Some("Synced"));
    c.need_that(
        "observed_generation",
        ev.generation.is_some_and(|g| g == ev.observed_generation),
        "equal to generation",
        format!("{} (generation {:?})", ev.observed_generation, ev.generation),
    );
}

/// Serving `sha` with `body`: what the gate approves, plus the operation having finished.
pub fn healthy(ev: &Evidence, sha: &str, body: &str) -> Vec<Unmet> {
    let mut c = Conditions(Vec::new());
    applied(&mut c, ev, sha);
    c.need("health", ev.health.as_deref(), Some("Healthy"));
    c.need("replicas", ev.replicas, 1);
    c.need("updated", ev.updated, 1);
    c.need("ready", ev.ready, 1);
    c.need("available", ev.available, 1);
    c.need("ready_endpoints", ev.ready_endpoints, 1);
    c.need("http_code", ev.http_code, Some(200));
    c.need("http_body", ev.http_body.as_deref(), Some(body));
    c.0
}

/// The Synced outage at `sha`: applied, Degraded by the progress deadline, nothing serving.
pub fn failed(ev: &Evidence, sha: &str) -> Vec<Unmet> {
    let mut c = Conditions(Vec::new());
    applied(&mut c, ev, sha);
    c.need("health", ev.health.as_deref(), Some("Degraded"));
    c.need("progress_deadline_exceeded", ev.progress_deadline_exceeded, true);
    c.need("ready", ev.ready, 0);
    c.need("available", ev.available, 0);
    c.need("ready_endpoints", ev.ready_endpoints, 0);
    c.need_that(
        "http_code",
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

/// Why a wait has not succeeded, for a human: the unmet conditions with live values, then the
/// Deployment's conditions, the Application's conditions and operation message, the pods'
/// readiness and the newest events (readiness probe failures show up there).
pub fn explain(
    target: Target,
    sha: &str,
    unmet: &[Unmet],
    ev: &Evidence,
    app: Option<&crate::argo::Application>,
    pods: &[k8s_openapi::api::core::v1::Pod],
    events: &[k8s_openapi::api::core::v1::Event],
) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "still unmet for `{}` at {sha}:", target.name());
    for u in unmet {
        let _ = writeln!(s, "  - {u}");
    }
    let _ = writeln!(s, "Deployment {}/{} conditions:", ev.namespace, ev.deployment);
    if ev.conditions.is_empty() {
        let _ = writeln!(s, "  (none: the Deployment is missing or has no status yet)");
    }
    for c in &ev.conditions {
        let _ = writeln!(s, "  - {}={} {} {}", c.type_, c.status, c.reason.as_deref().unwrap_or(""), c.message.as_deref().unwrap_or(""));
    }
    let status = app.and_then(|a| a.status.as_ref());
    let _ = writeln!(s, "Application {}:", ev.application);
    match (app, status) {
        (None, _) => {
            let _ = writeln!(s, "  (not found)");
        }
        (Some(_), None) => {
            let _ = writeln!(s, "  (no status yet: has the controller seen it?)");
        }
        (Some(_), Some(st)) => {
            if let Some(op) = &st.operation_state {
                let _ = writeln!(s, "  operation {}: {}", op.phase.as_deref().unwrap_or("?"), op.message.as_deref().unwrap_or(""));
            }
            if let Some(h) = st.health.as_ref().and_then(|h| h.message.as_ref()) {
                let _ = writeln!(s, "  health message: {h}");
            }
            for c in st.conditions.iter().flatten() {
                let _ = writeln!(s, "  condition {}: {}", c.type_.as_deref().unwrap_or("?"), c.message.as_deref().unwrap_or(""));
            }
        }
    }
    let _ = writeln!(s, "Pods:");
    if pods.is_empty() {
        let _ = writeln!(s, "  (none)");
    }
    for p in pods {
        let name = p.metadata.name.as_deref().unwrap_or("?");
        let st = p.status.as_ref();
        let ready = st
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .map(|c| format!("Ready={} {}", c.status, c.message.as_deref().unwrap_or("")))
            .unwrap_or_else(|| "Ready=?".into());
        let _ = writeln!(s, "  - {name} phase={} {ready}", st.and_then(|s| s.phase.as_deref()).unwrap_or("?"));
    }
    let _ = writeln!(s, "Newest events:");
    for e in events.iter().rev().take(8).collect::<Vec<_>>().into_iter().rev() {
        let _ = writeln!(
            s,
            "  - {} {} {}/{}: {} {}",
            crate::cluster::event_time(e),
            e.type_.as_deref().unwrap_or(""),
            e.involved_object.kind.as_deref().unwrap_or(""),
            e.involved_object.name.as_deref().unwrap_or(""),
            e.reason.as_deref().unwrap_or(""),
            e.message.as_deref().unwrap_or("").trim()
        );
    }
    s
}
