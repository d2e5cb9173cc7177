//! Wait predicates (pure): given evidence, which conditions of "healthy at SHA" or "failed at
//! SHA" are still unmet, each with the live value, so a human can read why.

use crate::observe::evidence::Evidence;
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
            self.0.push(Unmet {
                what,
                want: format!("{want:?}"),
                found: format!("{found:?}"),
            });
        }
    }
    fn need_that(&mut self, what: &'static str, ok: bool, want: &str, found: String) {
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
    c.need("target_revision", ev.target_revision.as_deref(), Some(sha));
    c.need(
        "observed_revision",
        ev.observed_revision.as_deref(),
        Some(sha),
    );
    c.need(
        "operation_revision",
        ev.operation_revision.as_deref(),
        Some(sha),
    );
    c.need(
        "operation_phase",
        ev.operation_phase.as_deref(),
        Some("Succeeded"),
    );
    c.need("sync", ev.sync.as_deref(), Some("Synced"));
    c.need_that(
        "observed_generation",
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
    c.need(
        "progress_deadline_exceeded",
        ev.progress_deadline_exceeded,
        true,
    );
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

/// The live values a wait follows, for the timeline's "what flipped when" (pure).
pub fn tracked_values(ev: &Evidence) -> Vec<(&'static str, String)> {
    let o = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    vec![
        ("sync", o(&ev.sync)),
        ("health", o(&ev.health)),
        ("operation_phase", o(&ev.operation_phase)),
        (
            "observed_revision",
            ev.observed_revision
                .as_deref()
                .map_or("-".into(), |r| crate::sha::short(r).to_string()),
        ),
        ("ready_endpoints", ev.ready_endpoints.to_string()),
        (
            "progress_deadline_exceeded",
            ev.progress_deadline_exceeded.to_string(),
        ),
        (
            "http_code",
            ev.http_code.map_or("-".into(), |c| c.to_string()),
        ),
    ]
}
