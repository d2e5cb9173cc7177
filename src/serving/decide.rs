//! The decision (pure): a function of the request, the objects, the probe answers and the clock.

use crate::cluster::argo::Application;
use crate::serving::expect::Expect;
use crate::serving::model::{Endpoint, EndpointKey, Objects, ProbeAnswer, Probes};
use crate::serving::routes::{self, RouteKind, RouteRef, RouteReport};
use crate::serving::verdict::{
    endpoint_address, shown_body, Condition, Decision, EndpointReport, LieWindow, Unmet, Verdict,
};
use crate::serving::via_route::{self, ClientRequest, RouteAnswers};
use crate::serving::workloads::{self, PodRevision, WorkloadCheck, WorkloadKind, WorkloadRef};
use crate::sha::Sha;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use std::collections::BTreeMap;
use std::time::Duration;

/// What is asked: Application `namespace/name` at `sha` serving what `expect` says on `path`,
/// decided by `deadline` (the gate's own deadline).
#[derive(Debug, Clone)]
pub struct Request {
    pub namespace: String,
    pub name: String,
    pub sha: Sha,
    pub expect: Expect,
    pub path: String,
    pub started: Timestamp,
    pub deadline: Timestamp,
    /// An answer older than this does not count (the shell re-probes at a fixed interval).
    pub max_answer_age: Duration,
    /// Hook mode: the gate runs inside the sync operation to `sha` (an Argo CD PostSync hook
    /// Job), so that operation is still `Running` while the gate decides. Then an operation
    /// `Running` at `sha` meets OperationRevision, OperationPhase and Fresh (Argo CD does not
    /// update `reconciledAt` while its operation runs; measured on kind). An
    /// operation whose revision is known and is not `sha` is a final rejection: the hook's
    /// own operation is over (another sync replaced it) or `sha` is not its revision, and a
    /// hook never approves another revision than its operation's. Without it a `Running`
    /// operation is pending, as a gate outside the operation must wait for it to end.
    pub in_operation: bool,
    /// `--via-route`: every route's requests through the ingress controller must answer the
    /// release too ([`crate::serving::via_route`]); an Application without a route then
    /// never approves (nothing to send through the controller).
    pub via_route: bool,
}

/// The label an EndpointSlice names its Service with.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// A managed resource of the Application: (kind, namespace, name), hooks left out (a hook is
/// a Job or Pod of one sync, e.g. the gate itself, not what the release serves). An empty
/// namespace is the Application's destination namespace.
fn resources(app: &Application) -> impl Iterator<Item = (String, String, String, String)> + '_ {
    resource_statuses(app).filter_map(|(r, ns)| {
        Some((
            r.group.clone().unwrap_or_default(),
            r.kind.clone()?,
            ns,
            r.name.clone()?,
        ))
    })
}

/// The Application's managed resources (hooks left out) with their namespace (an empty one
/// is the destination namespace).
fn resource_statuses(
    app: &Application,
) -> impl Iterator<Item = (&crate::cluster::argo::ResourceStatus, String)> + '_ {
    let default_ns = app.spec.destination.namespace.clone().unwrap_or_default();
    app.status
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .into_iter()
        .flatten()
        .filter(|r| r.hook != Some(true))
        .map(move |r| {
            let ns = r
                .namespace
                .clone()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| default_ns.clone());
            (r, ns)
        })
}

/// The workloads of the Application: every resource in its `status.resources` of a kind of
/// [`WorkloadKind::ALL`] (Deployment, StatefulSet, DaemonSet, bare Pod, Rollout), sorted,
/// without duplicates.
pub fn workloads_of(app: &Application) -> Vec<WorkloadRef> {
    let mut out: Vec<WorkloadRef> = resources(app)
        .filter_map(|(group, kind, namespace, name)| {
            let kind = WorkloadKind::from_group_kind(&group, &kind)?;
            Some(WorkloadRef {
                kind,
                namespace,
                name,
            })
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The routes of the Application: every Ingress and HTTPRoute in its `status.resources`,
/// sorted, without duplicates.
pub fn routes_of(app: &Application) -> Vec<RouteRef> {
    let mut out: Vec<RouteRef> = resources(app)
        .filter_map(|(group, kind, namespace, name)| {
            Some(RouteRef {
                kind: RouteKind::from_group_kind(&group, &kind)?,
                namespace,
                name,
            })
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The Services of the Application, as (namespace, name), sorted, without duplicates.
pub fn services_of(app: &Application) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = resources(app)
        .filter(|(group, kind, _, _)| group.is_empty() && kind == "Service")
        .map(|(_, _, ns, name)| (ns, name))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The endpoints to probe: every ready or serving address (terminating ones included) of the
/// EndpointSlices of every Service in the Application's `status.resources`.
///
/// A slice belongs to a Service by its label `kubernetes.io/service-name` and namespace.
/// Conditions: a missing `ready` means true, a missing `serving` means `ready`, a missing
/// `terminating` means false; an address neither ready nor serving is left out. Ports: every
/// TCP port of the slice (a missing protocol is TCP) that has a number in 1..=65535, so a
/// Service exposing two TCP ports is probed on both; UDP/SCTP ports and ports without a
/// number are skipped (nothing HTTP to ask). One [`Endpoint`] per (Service, pod, address,
/// port), sorted by key; the same key from two slices (during a slice split) is merged, each
/// condition true if any slice says so.
pub fn endpoints(objects: &Objects) -> Vec<Endpoint> {
    let Some(app) = &objects.application else {
        return Vec::new();
    };
    let services = services_of(app);
    let mut out: BTreeMap<EndpointKey, Endpoint> = BTreeMap::new();
    for slice in &objects.endpoint_slices {
        let Some(ns) = slice.metadata.namespace.as_deref() else {
            continue;
        };
        let Some(service) = slice
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(SERVICE_NAME_LABEL))
        else {
            continue;
        };
        if !services
            .iter()
            .any(|(n, s)| n.as_str() == ns && s == service)
        {
            continue;
        }
        let ports: Vec<u16> = slice
            .ports
            .iter()
            .flatten()
            .filter(|p| p.protocol.as_deref().unwrap_or("TCP") == "TCP")
            .filter_map(|p| p.port.and_then(|n| u16::try_from(n).ok()))
            .filter(|n| *n > 0)
            .collect();
        for e in slice.endpoints.iter().flatten() {
            let c = e.conditions.clone().unwrap_or_default();
            let ready = c.ready.unwrap_or(true);
            let serving = c.serving.unwrap_or(ready);
            let terminating = c.terminating.unwrap_or(false);
            if !ready && !serving {
                continue;
            }
            let pod = e
                .target_ref
                .as_ref()
                .filter(|r| r.kind.as_deref() == Some("Pod"))
                .and_then(|r| r.name.clone());
            for ip in &e.addresses {
                for port in &ports {
                    let key = EndpointKey {
                        namespace: ns.to_string(),
                        service: service.clone(),
                        pod: pod.clone(),
                        ip: ip.clone(),
                        port: *port,
                    };
                    let entry = out.entry(key.clone()).or_insert(Endpoint {
                        key,
                        ready: false,
                        serving: false,
                        terminating: false,
                    });
                    entry.ready |= ready;
                    entry.serving |= serving;
                    entry.terminating |= terminating;
                }
            }
        }
    }
    out.into_values().collect()
}

/// Unmet conditions and likely causes as they are found (sorted at the end).
#[derive(Default)]
struct Draft {
    unmet: Vec<Unmet>,
    causes: Vec<(Condition, String)>,
    /// A final rejection (Failed/Error operation or Degraded health at the SHA).
    final_reject: bool,
}

impl Draft {
    fn unmet(&mut self, condition: Condition, subject: &str, want: String, found: String) {
        self.unmet.push(Unmet {
            condition,
            subject: subject.to_string(),
            want,
            found,
        });
    }

    fn cause(&mut self, condition: Condition, text: String) {
        self.causes.push((condition, text));
    }
}

fn short(s: &str, n: usize) -> String {
    let mut out: String = s.chars().take(n).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

fn contains_sha(one: Option<&str>, many: Option<&Vec<String>>, sha: &str) -> bool {
    one == Some(sha) || many.is_some_and(|m| m.iter().any(|r| r == sha))
}

fn revisions_text(one: Option<&str>, many: Option<&Vec<String>>) -> String {
    match (one, many) {
        (Some(r), _) if !r.is_empty() => r.to_string(),
        (_, Some(m)) if !m.is_empty() => m.join(", "),
        _ => "none".into(),
    }
}

/// What Argo CD says of the Application at `sha`: (Synced at it, Healthy at it), with the same
/// revision rule as the decision (`status.sync.revision`, or one of `revisions` for a
/// multi-source Application). The lie window is made of these.
pub fn argo_says(app: Option<&Application>, sha: &str) -> (bool, bool) {
    let Some(st) = app.and_then(|a| a.status.as_ref()) else {
        return (false, false);
    };
    let sync = st.sync.as_ref();
    let at = sync.is_some_and(|s| contains_sha(s.revision.as_deref(), s.revisions.as_ref(), sha));
    let synced = sync.and_then(|s| s.status.as_deref()) == Some("Synced");
    let healthy = st.health.as_ref().and_then(|h| h.status.as_deref()) == Some("Healthy");
    (at && synced, at && healthy)
}

/// Argo CD's side: revision, operation, sync, health, freshness, error conditions.
fn argo(d: &mut Draft, request: &Request, app: &Application, subject: &str) {
    let sha = request.sha.as_str();
    let sha12 = request.sha.short12();
    let status = app.status.clone().unwrap_or_default();
    let sync = status.sync.clone().unwrap_or_default();
    let at_sha = contains_sha(sync.revision.as_deref(), sync.revisions.as_ref(), sha);
    if !at_sha {
        d.unmet(
            Condition::SyncRevision,
            subject,
            format!("status.sync.revision {sha}"),
            revisions_text(sync.revision.as_deref(), sync.revisions.as_ref()),
        );
        d.cause(
            Condition::SyncRevision,
            format!("Argo CD has not compared the Application at {sha12} yet: targetRevision not moved there, or the commit not fetched yet"),
        );
    }
    let op = status.operation_state.as_ref();
    let finished_at_sha = operation(d, request, op, subject);
    let sync_status = sync.status.as_deref().unwrap_or("none");
    if sync_status != "Synced" {
        d.unmet(
            Condition::SyncStatus,
            subject,
            "Synced".into(),
            sync_status.to_string(),
        );
        d.cause(
            Condition::SyncStatus,
            format!("Argo CD says {sync_status}: the live objects do not match Git at {sha12} (sync not run or not finished)"),
        );
    }
    // Freshness: a reconciliation at or after the operation's end (in hook mode, while the
    // operation runs: its start).
    let fresh = fresh(d, &status, op, request.in_operation, subject);
    // Final only when Argo CD compared the live objects after the sync (Synced) in a
    // reconciliation that began after the operation ended: both timestamps have one-second
    // resolution, and a reconciliation in the sync's own second can carry the Degraded of
    // the release before (seen on a cluster: Degraded + OutOfSync with reconciledAt ==
    // finishedAt, Healthy a second later).
    let compared_after = sync_status == "Synced" && reconciled_after_finish(&status, op);
    let degraded_is_final = at_sha && finished_at_sha && fresh && compared_after;
    health(d, &status, degraded_is_final, sha12, subject);
    for c in status.conditions.iter().flatten() {
        let t = c.type_.as_deref().unwrap_or("");
        if t.ends_with("Error") {
            let m = short(c.message.as_deref().unwrap_or(""), 200);
            d.unmet(
                Condition::NoSpecErrors,
                subject,
                "no ComparisonError, InvalidSpecError or SyncError condition".into(),
                format!("{t}: {m}"),
            );
            d.cause(Condition::NoSpecErrors, format!("Argo CD reports {t}: {m}"));
        }
    }
}

/// Health: Healthy, or what it is; Degraded is a final rejection when `degraded_is_final`.
fn health(
    d: &mut Draft,
    status: &crate::cluster::argo::ApplicationStatus,
    degraded_is_final: bool,
    sha12: &str,
    subject: &str,
) {
    let health = status.health.clone().unwrap_or_default();
    let h = health.status.as_deref().unwrap_or("none");
    if h == "Healthy" {
        return;
    }
    let message = health.message.as_deref().unwrap_or("");
    d.unmet(
        Condition::HealthStatus,
        subject,
        "Healthy".into(),
        if message.is_empty() {
            h.to_string()
        } else {
            format!("{h}: {}", short(message, 200))
        },
    );
    if h == "Degraded" && degraded_is_final {
        d.final_reject = true;
        d.cause(
            Condition::HealthStatus,
            format!(
                "Argo CD says Degraded at {sha12} after the sync: {}",
                if message.is_empty() {
                    "a workload failed (e.g. ProgressDeadlineExceeded)"
                } else {
                    message
                }
            ),
        );
    } else {
        d.cause(
            Condition::HealthStatus,
            format!("Argo CD health is {h}: the rollout has not finished (or Argo CD has not looked since)"),
        );
    }
}

/// The operation: at the SHA and Succeeded (in hook mode also Running). Returns whether it is
/// over, at the SHA (no operation at all counts as over).
fn operation(
    d: &mut Draft,
    request: &Request,
    op: Option<&crate::cluster::argo::OperationState>,
    subject: &str,
) -> bool {
    let sha = request.sha.as_str();
    let Some(op) = op else {
        if request.in_operation {
            d.unmet(
                Condition::OperationPhase,
                subject,
                format!("a sync operation to {sha} Running (hook mode) or Succeeded"),
                "no operationState".into(),
            );
            d.cause(
                Condition::OperationPhase,
                "hook mode (--in-hook / --sha-from-operation) but the Application shows no sync operation: the gate is not running inside one".into(),
            );
        }
        return true;
    };
    let at = operation_revision(d, request, op, subject);
    operation_phase(d, request, op, &at, subject)
}

/// Where the operation stands against the SHA.
struct OperationAt {
    /// The operation is for the SHA (hook mode: not known to be for another).
    at_sha: bool,
    /// It is at the SHA, or has no result yet and asks for the SHA.
    here: bool,
}

fn operation_revision(
    d: &mut Draft,
    request: &Request,
    op: &crate::cluster::argo::OperationState,
    subject: &str,
) -> OperationAt {
    let sha = request.sha.as_str();
    let sha12 = request.sha.short12();
    let hook = request.in_operation;
    let result = op.sync_result.clone().unwrap_or_default();
    let result_has_sha = contains_sha(result.revision.as_deref(), result.revisions.as_ref(), sha);
    let result_names_one = result.revision.as_deref().is_some_and(|r| !r.is_empty())
        || result.revisions.as_ref().is_some_and(|m| !m.is_empty());
    let asked = op
        .operation
        .as_ref()
        .and_then(|o| o.sync.as_ref())
        .and_then(|s| s.revision.clone());
    let asked_at_sha = asked.as_deref() == Some(sha);
    // Hook mode: the revision the operation is known to be for when it is not the SHA
    // (its result names others, or it asked for another full SHA; a branch name such as
    // "main" or "HEAD" that a manual sync asks for says nothing).
    let other: Option<String> = if !hook {
        None
    } else if result_names_one && !result_has_sha {
        Some(revisions_text(
            result.revision.as_deref(),
            result.revisions.as_ref(),
        ))
    } else {
        asked
            .clone()
            .filter(|a| crate::sha::is_full_sha(a) && a.as_str() != sha)
    };
    let at_sha = if hook {
        other.is_none() && (result_has_sha || (!result_names_one && asked_at_sha))
    } else {
        result_has_sha
    };
    let here = at_sha || (op.sync_result.is_none() && asked_at_sha);
    if at_sha {
        return OperationAt { at_sha, here };
    }
    let phase = op.phase.as_deref().unwrap_or("");
    let phase_text = if phase.is_empty() { "no phase" } else { phase };
    let found = match (&op.sync_result, &asked, &other) {
        (_, _, Some(o)) if result_has_sha => {
            format!("the operation asks for {o} while its syncResult says {sha}")
        }
        (_, _, Some(o)) => format!("{o} ({phase_text})"),
        (None, Some(a), None) => format!("no syncResult yet (the operation asks for {a})"),
        (None, None, None) => "no syncResult yet".into(),
        _ => revisions_text(result.revision.as_deref(), result.revisions.as_ref()),
    };
    d.unmet(
        Condition::OperationRevision,
        subject,
        if hook {
            format!("the current sync operation (syncResult.revision and operation.sync.revision) at {sha}")
        } else {
            format!("operationState.syncResult.revision {sha}")
        },
        found,
    );
    if let Some(o) = &other {
        let o12: String = o.chars().take(12).collect();
        d.final_reject = true;
        d.cause(
            Condition::OperationRevision,
            format!("hook mode: the sync operation is for {o12} ({phase_text}), not {sha12}: another sync replaced the one this hook runs in, or the SHA given is not the operation's; a hook never approves another revision than its operation's"),
        );
    } else if hook {
        d.cause(
            Condition::OperationRevision,
            format!("hook mode: the sync operation has not resolved its revision yet (it asks for {}); waiting for syncResult.revision {sha12}", asked.as_deref().unwrap_or("none")),
        );
    } else if !asked_at_sha {
        d.cause(
            Condition::OperationRevision,
            format!(
                "the last sync operation was for another revision: no sync to {sha12} has run yet"
            ),
        );
    }
    OperationAt { at_sha, here }
}

/// The operation's phase; returns whether it is over (Succeeded), at the SHA.
fn operation_phase(
    d: &mut Draft,
    request: &Request,
    op: &crate::cluster::argo::OperationState,
    at: &OperationAt,
    subject: &str,
) -> bool {
    let sha12 = request.sha.short12();
    let hook = request.in_operation;
    let phase = op.phase.as_deref().unwrap_or("");
    let message = op.message.as_deref().unwrap_or("");
    let want_phase = if hook {
        format!(
            "operation Running (hook mode: the gate runs inside the sync to {sha12}) or Succeeded"
        )
    } else {
        "operation Succeeded".to_string()
    };
    match phase {
        "Succeeded" => return at.at_sha,
        // The hook's own operation: it cannot end while the hook runs.
        "Running" if hook && at.at_sha => {}
        "Running" | "Terminating" => {
            d.unmet(
                Condition::OperationPhase,
                subject,
                want_phase,
                format!("{phase}: {}", short(message, 200)),
            );
        }
        "Failed" | "Error" => {
            d.unmet(
                Condition::OperationPhase,
                subject,
                want_phase,
                format!("{phase}: {}", short(message, 200)),
            );
            if at.here {
                d.final_reject = true;
                d.cause(
                    Condition::OperationPhase,
                    format!(
                        "the sync to {sha12} failed ({phase}): {}",
                        short(message, 200)
                    ),
                );
            } else {
                d.cause(
                    Condition::OperationPhase,
                    "the last sync operation (for another revision) failed".into(),
                );
            }
        }
        unknown => {
            d.unmet(
                Condition::OperationPhase,
                subject,
                want_phase,
                if unknown.is_empty() {
                    "no phase".into()
                } else {
                    format!("phase {unknown:?}")
                },
            );
        }
    }
    false
}

/// `status.reconciledAt` strictly after `operationState.finishedAt` (both parse, an operation
/// exists and is not running).
fn reconciled_after_finish(
    status: &crate::cluster::argo::ApplicationStatus,
    op: Option<&crate::cluster::argo::OperationState>,
) -> bool {
    let parse = |t: Option<&str>| t.and_then(|t| t.parse::<Timestamp>().ok());
    match (
        parse(status.reconciled_at.as_deref()),
        op.and_then(|o| parse(o.finished_at.as_deref())),
    ) {
        (Some(reconciled), Some(finished)) => reconciled > finished,
        _ => false,
    }
}

/// `status.reconciledAt` at or after `operationState.finishedAt` (Argo CD's health right after
/// a sync can be from before it). Without an operation, a parseable `reconciledAt` suffices
/// (health and comparison then come from the same reconciliation). While the operation runs
/// there is nothing to be fresh against yet: OperationPhase is unmet then, not Fresh. In hook
/// mode (`in_operation`) a Running operation is the gate's own, which never finishes before
/// the gate does, and during which Argo CD does not update `reconciledAt`: Fresh is met (Argo
/// CD starts PostSync hooks only after the sync's resources are applied and Healthy).
fn fresh(
    d: &mut Draft,
    status: &crate::cluster::argo::ApplicationStatus,
    op: Option<&crate::cluster::argo::OperationState>,
    in_operation: bool,
    subject: &str,
) -> bool {
    let running = op.is_some_and(|o| o.phase.as_deref() == Some("Running"));
    if in_operation && running {
        // Measured on kind: Argo CD does not update reconciledAt while its operation runs, so
        // the hook inside it could never see a reconciliation after the start. Argo CD starts
        // PostSync only after its own health check of this operation's resources; the live
        // workload and endpoint checks decide the rest.
        return true;
    }
    let (field, edge) = if in_operation && running {
        ("startedAt", "started")
    } else {
        ("finishedAt", "finished")
    };
    let want = format!("status.reconciledAt at or after operationState.{field}");
    let cause = format!(
        "Argo CD has not reconciled since the sync {edge}: its Healthy is from before the rollout"
    );
    let reconciled = match status.reconciled_at.as_deref() {
        None => {
            d.unmet(
                Condition::Fresh,
                subject,
                want,
                "no status.reconciledAt".into(),
            );
            return false;
        }
        Some(r) => match r.parse::<Timestamp>() {
            Ok(t) => t,
            Err(_) => {
                d.unmet(
                    Condition::Fresh,
                    subject,
                    want,
                    format!("status.reconciledAt {:?} is not a timestamp", short(r, 60)),
                );
                return false;
            }
        },
    };
    let Some(op) = op else {
        return true;
    };
    if !(in_operation && running) && matches!(op.phase.as_deref(), Some("Running" | "Terminating"))
    {
        return false;
    }
    let edge_at = if in_operation && running {
        op.started_at.as_deref()
    } else {
        op.finished_at.as_deref()
    };
    let edge_at = match edge_at.map(|f| (f, f.parse::<Timestamp>())) {
        Some((_, Ok(t))) => t,
        Some((f, Err(_))) => {
            d.unmet(
                Condition::Fresh,
                subject,
                want,
                format!(
                    "operationState.{field} {:?} is not a timestamp",
                    short(f, 60)
                ),
            );
            return false;
        }
        None => {
            d.unmet(
                Condition::Fresh,
                subject,
                want,
                format!("the operation has no {field}"),
            );
            return false;
        }
    };
    if reconciled < edge_at {
        d.unmet(
            Condition::Fresh,
            subject,
            want,
            format!("reconciledAt {reconciled} before {field} {edge_at}"),
        );
        d.cause(Condition::Fresh, cause);
        return false;
    }
    true
}

/// Why an answer does not count, and the likely cause; `None` when it counts.
/// One answer judged: `None` when it passes, else what was found and the likely cause.
fn judge(
    request: &Request,
    now: Timestamp,
    answer: Option<&ProbeAnswer>,
) -> Option<(String, Option<String>)> {
    let Some(a) = answer else {
        return Some(("no answer yet".into(), None));
    };
    if a.at < request.started {
        return Some((
            format!("only an answer from before the gate started (at {})", a.at),
            None,
        ));
    }
    let max = SignedDuration::try_from(request.max_answer_age).unwrap_or(SignedDuration::MAX);
    let age = now.duration_since(a.at);
    if age > max {
        return Some((
            format!(
                "the last answer is {:.1}s old (at {}), more than {:.1}s",
                age.as_secs_f64(),
                a.at,
                request.max_answer_age.as_secs_f64()
            ),
            None,
        ));
    }
    let body = a.body.as_deref().unwrap_or("");
    match a.code {
        None => Some((
            format!(
                "no answer: {}",
                a.error.as_deref().unwrap_or("unknown error")
            ),
            Some(
                "endpoint does not answer: wrong port, not listening yet, or a NetworkPolicy"
                    .into(),
            ),
        )),
        Some(code) if !(200..300).contains(&code) => Some((
            format!("HTTP {code} {}", shown_body(body)),
            Some(format!(
                "endpoint answers HTTP {code}: the application fails, or --path is wrong"
            )),
        )),
        Some(code) if !request.expect.matches(body) => Some((
            format!("HTTP {code} {}", shown_body(body)),
            Some("endpoint serves other content: wrong image or config in the new revision".into()),
        )),
        Some(_) => None,
    }
}

fn find_pod<'a>(objects: &'a Objects, namespace: &str, name: &str) -> Option<&'a Pod> {
    objects.pods.iter().map(|p| p.as_ref()).find(|p| {
        p.metadata.namespace.as_deref() == Some(namespace)
            && p.metadata.name.as_deref() == Some(name)
    })
}

/// The decision at `now`. `lie` is the lie window so far (copied into the verdict).
///
/// Every condition of [`Condition`] is checked (the Argo CD ones only when the Application
/// exists) and each failure is an [`Unmet`] with the live value; unmet conditions are listed
/// in the enum's order. Approved iff nothing is unmet. Rejected (final) when the sync
/// operation at the SHA Failed/Errored, or health is Degraded at the SHA after the operation
/// finished AND Argo CD reconciled since (a stale Degraded of the release before must not
/// reject this one); else Pending. Past `request.deadline`, anything not approved is
/// Rejected with a Deadline unmet. Endpoints: each ready or serving endpoint must come from a
/// pod a workload of the Application owns (else StrayEndpoint), of its newest revision (else
/// OldRevisionServing, also for a terminating-but-serving old pod), and have an answer taken
/// at or after `request.started`, at most `max_answer_age` old at `now`, 2xx, whose body
/// `expect` matches (else EndpointAnswers). An Application without any Service is unmet
/// (AtLeastOneEndpoint): the gate refuses to approve what it cannot probe.
///
/// Hook mode (`request.in_operation`, the gate as a PostSync hook Job): an operation Running
/// at the SHA meets OperationRevision and OperationPhase, Fresh is `reconciledAt` at or after
/// its `startedAt`, and an operation known to be for another revision is Rejected (final);
/// see [`Request::in_operation`].
pub fn decide(
    request: &Request,
    objects: &Objects,
    probes: &Probes,
    now: Timestamp,
    lie: &LieWindow,
) -> Verdict {
    decide_with_routes(request, objects, probes, &RouteAnswers::new(), now, lie)
}

/// [`decide`] with the answers through the ingress controller (`--via-route`): each
/// request of [`client_requests_of`] must be answered with the release.
pub fn decide_with_routes(
    request: &Request,
    objects: &Objects,
    probes: &Probes,
    route_answers: &RouteAnswers,
    now: Timestamp,
    lie: &LieWindow,
) -> Verdict {
    let application = format!("{}/{}", request.namespace, request.name);
    let subject = format!("Application {application}");
    let mut d = Draft::default();
    let mut reports = Vec::new();
    let mut route_reports: Vec<RouteReport> = Vec::new();
    match &objects.application {
        None => {
            d.unmet(
                Condition::ApplicationExists,
                &subject,
                format!(
                    "Application {} in namespace {}",
                    request.name, request.namespace
                ),
                "absent from the watch (deleted?)".into(),
            );
            d.cause(
                Condition::ApplicationExists,
                format!("the Application {application} is gone: deleted, or renamed"),
            );
        }
        Some(app) => {
            argo(&mut d, request, app, &subject);
            let checks = workload_checks(&mut d, app, objects);
            let services = services_of(app);
            let eps = endpoints(objects);
            at_least_one_endpoint(&mut d, &services, &eps, &subject);
            route_reports = route_checks(&mut d, app, objects, &services);
            if request.via_route {
                through_the_controller(&mut d, request, objects, route_answers, now, &subject);
            }
            let wl: Vec<WorkloadRef> = checks.iter().map(|c| c.workload.clone()).collect();
            for ep in &eps {
                reports.push(endpoint(
                    &mut d, request, objects, probes, now, &wl, &checks, ep,
                ));
            }
            if now > request.deadline {
                deadline_causes(&mut d, objects, &checks);
            }
        }
    }
    d.unmet.sort_by_key(|u| u.condition);
    let decision = if d.unmet.is_empty() {
        Decision::Approved
    } else if d.final_reject {
        Decision::Rejected
    } else {
        Decision::Pending
    };
    let mut verdict = Verdict {
        application,
        sha: request.sha.clone(),
        decision,
        decided_at: now,
        unmet: d.unmet,
        endpoints: reports,
        routes: route_reports,
        likely_causes: Vec::new(),
        lie_window: lie.clone(),
    };
    if now > request.deadline && verdict.decision != Decision::Approved {
        verdict.reject_unapproved(&format!(
            "approved by the gate's deadline {}",
            request.deadline
        ));
        d.causes.push((
            Condition::Deadline,
            format!(
                "the release did not converge by the gate's deadline ({})",
                request.deadline
            ),
        ));
    }
    d.causes.sort_by_key(|(c, _)| *c);
    for (_, text) in d.causes {
        if !verdict.likely_causes.contains(&text) {
            verdict.likely_causes.push(text);
        }
    }
    verdict
}

/// Each workload of the Application checked: its revision, rollout and pods.
fn workload_checks(d: &mut Draft, app: &Application, objects: &Objects) -> Vec<WorkloadCheck> {
    let mut checks = Vec::new();
    for w in &workloads_of(app) {
        let c = workloads::check(w, objects);
        d.unmet.extend(c.unmet.iter().cloned());
        d.causes.extend(c.likely_causes.iter().cloned());
        checks.push(c);
    }
    checks
}

/// The gate refuses to approve what it cannot probe.
fn at_least_one_endpoint(
    d: &mut Draft,
    services: &[(String, String)],
    eps: &[Endpoint],
    subject: &str,
) {
    if services.is_empty() {
        d.unmet(
            Condition::AtLeastOneEndpoint,
            subject,
            "at least one ready or serving endpoint behind its Services".into(),
            "the Application lists no Service: nothing to probe".into(),
        );
        d.cause(
            Condition::AtLeastOneEndpoint,
            "the Application lists no Service: the gate cannot see what it serves, so it never approves it".into(),
        );
    } else if eps.is_empty() {
        let names: Vec<String> = services.iter().map(|(n, s)| format!("{n}/{s}")).collect();
        d.unmet(
            Condition::AtLeastOneEndpoint,
            subject,
            "at least one ready or serving endpoint behind its Services".into(),
            format!(
                "no ready or serving endpoint behind Service {}",
                names.join(", ")
            ),
        );
        d.cause(
            Condition::AtLeastOneEndpoint,
            format!("no pod behind Service {} is ready: failing readiness, or a selector that matches no pod", names.join(", ")),
        );
    }
}

/// The requests a client sends through the ingress controller to the Application's routes.
pub fn client_requests_of(request: &Request, objects: &Objects) -> Vec<ClientRequest> {
    let Some(app) = objects.application.as_deref() else {
        return Vec::new();
    };
    routes_of(app)
        .iter()
        .flat_map(|r| via_route::client_requests(r, objects, &request.path))
        .collect()
}

/// `--via-route`: what clients of the ingress controller get must be the release too.
fn through_the_controller(
    d: &mut Draft,
    request: &Request,
    objects: &Objects,
    route_answers: &RouteAnswers,
    now: Timestamp,
    subject: &str,
) {
    let wanted = client_requests_of(request, objects);
    if wanted.is_empty() {
        d.unmet(
            Condition::RouteAnswers,
            subject,
            "an Ingress or HTTPRoute of the Application with a host or path to request (--via-route)".into(),
            "the Application lists no route the gate can send a request through".into(),
        );
        d.cause(
            Condition::RouteAnswers,
            "--via-route asks what clients of the ingress controller get, but the Application has no Ingress or HTTPRoute (or none in the watch yet): drop --via-route, or add the route".into(),
        );
        return;
    }
    let judge = |a: &ProbeAnswer| judge(request, now, Some(a));
    let want = format!(
        "2xx with {}, since the gate started, at most {:.1}s old",
        request.expect.describe(),
        request.max_answer_age.as_secs_f64()
    );
    let (unmet, causes) = via_route::check_answers(&wanted, route_answers, &judge, &want);
    d.unmet.extend(unmet);
    d.causes.extend(causes);
}

/// Each Ingress and HTTPRoute of the Application checked against its Services.
fn route_checks(
    d: &mut Draft,
    app: &Application,
    objects: &Objects,
    services: &[(String, String)],
) -> Vec<RouteReport> {
    routes_of(app)
        .iter()
        .map(|r| {
            let c = routes::check(r, objects, services);
            d.unmet.extend(c.unmet);
            d.causes.extend(c.likely_causes);
            RouteReport {
                route: c.route,
                backends: c.backends,
            }
        })
        .collect()
}

/// At the deadline: a Deployment that never finished rolling out while Kubernetes reported
/// no ProgressDeadlineExceeded (what a rollback to an existing ReplicaSet leaves).
fn deadline_causes(d: &mut Draft, objects: &Objects, checks: &[WorkloadCheck]) {
    for c in checks {
        if c.workload.kind != WorkloadKind::Deployment
            || !c
                .unmet
                .iter()
                .any(|u| u.condition == Condition::WorkloadReplicas)
        {
            continue;
        }
        let exceeded = objects
            .deployments
            .iter()
            .find(|x| {
                x.metadata.namespace.as_deref() == Some(c.workload.namespace.as_str())
                    && x.metadata.name.as_deref() == Some(c.workload.name.as_str())
            })
            .and_then(|x| x.status.as_ref()?.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter().any(|k| {
                    k.type_ == "Progressing"
                        && k.reason.as_deref() == Some("ProgressDeadlineExceeded")
                })
            });
        if !exceeded {
            d.cause(
                Condition::Deadline,
                format!(
                    "{} did not finish rolling out by the gate's deadline and Kubernetes reported no ProgressDeadlineExceeded: after a rollback to an existing ReplicaSet it sets none (kubernetes/kubernetes#106054)",
                    c.workload.subject()
                ),
            );
        }
    }
}

/// The managed resource of the Application that `pod`'s owner chain ends at, when it is of a
/// kind the gate does not model: ("apps/ReplicaSet", "shop/web-5d8f", Argo CD's health).
/// The chain: the pod's owners, and a ReplicaSet's owners (as far as the watches see).
fn unmodeled_owner(pod: &Pod, objects: &Objects) -> Option<(String, String, String)> {
    let app = objects.application.as_deref()?;
    let ns = pod.metadata.namespace.as_deref()?;
    let group_of = |api_version: &str| {
        api_version
            .rsplit_once('/')
            .map_or(String::new(), |(g, _)| g.to_string())
    };
    let managed = |group: &str, kind: &str, name: &str| {
        resource_statuses(app).find(|(r, rns)| {
            r.group.as_deref().unwrap_or("") == group
                && r.kind.as_deref() == Some(kind)
                && r.name.as_deref() == Some(name)
                && rns == ns
        })
    };
    let mut chain: Vec<&k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> =
        pod.metadata.owner_references.iter().flatten().collect();
    for r in pod.metadata.owner_references.iter().flatten() {
        if r.kind == "ReplicaSet" {
            if let Some(rs) = objects.replica_sets.iter().find(|x| {
                x.metadata.namespace.as_deref() == Some(ns)
                    && x.metadata.name.as_deref() == Some(r.name.as_str())
            }) {
                chain.extend(rs.metadata.owner_references.iter().flatten());
            }
        }
    }
    chain.iter().find_map(|r| {
        let group = group_of(&r.api_version);
        if WorkloadKind::from_group_kind(&group, &r.kind).is_some() {
            return None;
        }
        let (status, _) = managed(&group, &r.kind, &r.name)?;
        let kind = if group.is_empty() {
            r.kind.clone()
        } else {
            format!("{group}/{}", r.kind)
        };
        let health = status
            .health
            .as_ref()
            .and_then(|h| h.status.clone())
            .unwrap_or_else(|| "none reported".into());
        Some((kind, format!("{ns}/{}", r.name), health))
    })
}

/// The endpoint's owner: a workload of the Application, else why not (stray, or a kind the
/// gate does not model).
#[allow(clippy::too_many_arguments)]
fn owner_conditions(
    d: &mut Draft,
    objects: &Objects,
    subject: &str,
    svc: &str,
    pod_name: Option<&str>,
    pod: Option<&Pod>,
    owner: Option<&WorkloadRef>,
    wl: &[WorkloadRef],
) {
    let want_owner = format!(
        "a pod owned by a workload of the Application ({})",
        if wl.is_empty() {
            "it lists none".to_string()
        } else {
            wl.iter()
                .map(WorkloadRef::subject)
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    let unmodeled = pod
        .filter(|_| owner.is_none())
        .and_then(|p| unmodeled_owner(p, objects));
    match (pod_name, pod, owner) {
        (_, _, Some(_)) => {}
        (None, _, _) => {
            d.unmet(
                Condition::StrayEndpoint,
                subject,
                want_owner,
                "no pod behind the address (no targetRef): a manual EndpointSlice or an external address".into(),
            );
            d.cause(
                Condition::StrayEndpoint,
                format!("Service {svc} has an endpoint that is no pod: traffic can reach something the Application does not run"),
            );
        }
        (Some(p), None, _) => {
            d.unmet(
                Condition::StrayEndpoint,
                subject,
                want_owner,
                format!("pod {p} is not in the watch (deleted, or not seen yet)"),
            );
        }
        (Some(p), Some(_), None) if unmodeled.is_some() => {
            let (kind, name, health) = unmodeled.unwrap_or_default();
            d.unmet(
                Condition::UnmodeledWorkload,
                subject,
                format!(
                    "a pod of a workload kind the gate models ({}), whose revision it reads",
                    WorkloadKind::names()
                ),
                format!(
                    "pod {p} belongs to {kind} {name}, a managed resource of the Application of a kind the gate does not model (Argo CD health: {health})"
                ),
            );
            d.cause(
                Condition::UnmodeledWorkload,
                format!("{kind} {name} is of a kind the gate does not model: it checked Argo CD's health of it ({health}) and what every endpoint answers, but cannot read which revision its pods run, so it does not approve (fails closed)"),
            );
        }
        (Some(p), Some(obj), None) => {
            let owners: Vec<String> = obj
                .metadata
                .owner_references
                .iter()
                .flatten()
                .map(|r| format!("{} {}", r.kind, r.name))
                .collect();
            d.unmet(
                Condition::StrayEndpoint,
                subject,
                want_owner,
                if owners.is_empty() {
                    format!("pod {p} has no owner")
                } else {
                    format!("pod {p} is owned by {}", owners.join(", "))
                },
            );
            d.cause(
                Condition::StrayEndpoint,
                format!("pod {p} behind Service {svc} is owned by no workload of the Application: a leftover pod or a Service selector that is too broad"),
            );
        }
    }
}

/// One endpoint: its owner, revision and answer, and what it leaves unmet.
#[allow(clippy::too_many_arguments)]
fn endpoint(
    d: &mut Draft,
    request: &Request,
    objects: &Objects,
    probes: &Probes,
    now: Timestamp,
    wl: &[WorkloadRef],
    checks: &[WorkloadCheck],
    ep: &Endpoint,
) -> EndpointReport {
    let key = &ep.key;
    let svc = format!("{}/{}", key.namespace, key.service);
    let pod_name = key.pod.as_deref();
    let subject = format!(
        "endpoint {} (pod {}) of Service {svc}",
        endpoint_address(key),
        pod_name.unwrap_or("-")
    );
    let pod = pod_name.and_then(|p| find_pod(objects, &key.namespace, p));
    let owner = pod.and_then(|p| workloads::owner_of(p, wl, objects));
    let revision: Option<&PodRevision> = owner.and_then(|w| {
        checks
            .iter()
            .find(|c| &c.workload == w)
            .and_then(|c| c.pods.iter().find(|p| Some(p.pod.as_str()) == pod_name))
    });
    owner_conditions(d, objects, &subject, &svc, pod_name, pod, owner, wl);
    let newest = revision.is_some_and(|r| r.newest);
    if let (Some(w), Some(r)) = (owner, revision) {
        // A ready old pod is already named by its workload's check; this catches the one
        // the pod status no longer calls ready but the slice still routes to (terminating).
        if !r.newest && !r.ready {
            d.unmet(
                Condition::OldRevisionServing,
                &subject,
                format!("only pods of the newest revision of {} serve", w.subject()),
                format!(
                    "pod {} of revision {} is {}",
                    r.pod,
                    r.revision.as_deref().unwrap_or("(none)"),
                    if ep.terminating {
                        "terminating but still serving"
                    } else {
                        "serving"
                    }
                ),
            );
            d.cause(
                Condition::OldRevisionServing,
                format!("pod {} of an older revision of {} is still serving: traffic still reaches the old release", r.pod, w.subject()),
            );
        }
    } else if owner.is_some() {
        // Owned but not listed by its workload's check (should not happen): not newest.
        d.unmet(
            Condition::OldRevisionServing,
            &subject,
            "a pod of the newest revision".into(),
            "the pod's revision is unknown".into(),
        );
    }
    let answer = probes.get(key);
    let verdict = judge(request, now, answer);
    if let Some((found, cause)) = &verdict {
        d.unmet(
            Condition::EndpointAnswers,
            &subject,
            format!(
                "a 2xx answer with {} since the gate started, at most {:.1}s old",
                request.expect.describe(),
                request.max_answer_age.as_secs_f64()
            ),
            found.clone(),
        );
        if let Some(c) = cause {
            d.cause(Condition::EndpointAnswers, c.clone());
        }
    }
    EndpointReport {
        endpoint: key.clone(),
        owner: owner.map(WorkloadRef::subject),
        revision: revision.and_then(|r| r.revision.clone()),
        newest_revision: newest,
        ready: ep.ready,
        serving: ep.serving,
        terminating: ep.terminating,
        answer: answer.cloned(),
        matched: verdict.is_none(),
    }
}
