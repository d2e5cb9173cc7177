//! Explanations (pure): when a wait times out or a gate rejects, the likely causes and the
//! human-readable account of the live state (conditions, pods, events).

use crate::cluster::argo::Application;
use crate::cluster::event_time;
use crate::observe::evidence::Evidence;
use crate::observe::predicates::{Field, Target, Unmet};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Event, Pod, PodCondition};

/// Everything besides the evidence that explains a wait: read once, when it times out.
#[derive(Debug, Clone, Default)]
pub struct Context {
    pub application: Option<Application>,
    pub deployment: Option<Deployment>,
    pub pods: Vec<Pod>,
    pub events: Vec<Event>,
    pub replica_sets: Vec<ReplicaSet>,
    /// How long the service has had no ready endpoint, as the wait saw it.
    pub zero_endpoints_for: Option<std::time::Duration>,
    /// "health Progressing -> Degraded at +21.3s" lines.
    pub flips: Vec<String>,
    pub last_watch_error: Option<String>,
    /// Ready endpoints in a fresh list of the Service's EndpointSlices (not the watch), so a
    /// lagging watch is told apart from a cluster that really lists none.
    pub listed_ready_endpoints: Option<i64>,
    /// Context reads that failed (named, so the explanation never hides a blind spot).
    pub read_errors: Vec<String>,
}

const REVISION: &str = "deployment.kubernetes.io/revision";
const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";

/// The ReplicaSet the Deployment currently rolls out (highest revision annotation).
fn current_replica_set<'a>(
    deployment: &Deployment,
    sets: &'a [ReplicaSet],
) -> Option<&'a ReplicaSet> {
    let want = deployment.metadata.annotations.as_ref()?.get(REVISION)?;
    sets.iter().find(|rs| {
        rs.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(REVISION))
            == Some(want)
    })
}

/// Likely causes, from patterns that fool the usual checks (pure). Each line says what is
/// going on and why the evidence looks the way it does.
pub fn likely_causes(target: Target, unmet: &[Unmet], ev: &Evidence, cx: &Context) -> Vec<String> {
    let mut causes = Vec::new();
    let unmet_names: Vec<Field> = unmet.iter().map(|u| u.what).collect();
    let explainers: [Explainer; 4] = [
        nothing_ready,
        revision_not_applied,
        comparison_errors,
        controllers_behind,
    ];
    for explain in explainers {
        explain(&mut causes, target, &unmet_names, ev, cx);
    }
    causes
}

/// Adds the causes it recognises in the evidence to `causes`.
type Explainer = fn(&mut Vec<String>, Target, &[Field], &Evidence, &Context);

/// Nothing ready: a rollback to a reused ReplicaSet (no deadline signal), or not yet.
fn nothing_ready(
    causes: &mut Vec<String>,
    target: Target,
    _unmet_names: &[Field],
    ev: &Evidence,
    cx: &Context,
) {
    let rs = cx
        .deployment
        .as_ref()
        .and_then(|d| current_replica_set(d, &cx.replica_sets));
    let reused = rs.and_then(|rs| {
        rs.metadata
            .annotations
            .as_ref()?
            .get(REVISION_HISTORY)
            .cloned()
    });
    let progressing = ev.conditions.iter().find(|c| c.type_ == "Progressing");
    let stale_progress = progressing.is_some_and(|c| {
        c.status == "True" && c.reason.as_deref() == Some("NewReplicaSetAvailable")
    });
    if target == Target::Failed && !ev.progress_deadline_exceeded && ev.ready_endpoints == 0 {
        if let (Some(rs), Some(history), true) = (rs, &reused, stale_progress) {
            causes.push(format!(
                "the Deployment rolled back to an existing ReplicaSet {} (revision-history {history}); Kubernetes \
                 does not re-arm progressDeadlineSeconds for a reused ReplicaSet (kubernetes/kubernetes#106054), so \
                 the Progressing condition is still True/NewReplicaSetAvailable from its last success and Argo CD \
                 reports {} instead of Degraded. The service has had 0 ready endpoints for {}: this IS the outage, \
                 only the deadline signal is missing",
                rs.metadata.name.as_deref().unwrap_or("?"),
                ev.health.as_deref().unwrap_or("?"),
                cx.zero_endpoints_for.map_or("an unknown time".into(), |d| format!("{:.1}s", d.as_secs_f64())),
            ));
        } else if ev.health.as_deref() == Some("Progressing") {
            causes.push(format!(
                "nothing is ready and the progress deadline has not passed yet (0 ready endpoints for {}); wait at \
                 least the Deployment's progressDeadlineSeconds",
                cx.zero_endpoints_for.map_or("an unknown time".into(), |d| format!("{:.1}s", d.as_secs_f64()))
            ));
        }
    }
}

/// Argo CD has not applied the revision, it is not pinned, or it serves the wrong content.
fn revision_not_applied(
    causes: &mut Vec<String>,
    target: Target,
    unmet_names: &[Field],
    ev: &Evidence,
    _cx: &Context,
) {
    if unmet_names.iter().any(|w| {
        matches!(
            *w,
            Field::ObservedRevision | Field::OperationRevision | Field::OperationPhase
        )
    }) {
        let op = ev.operation_phase.as_deref().unwrap_or("none");
        causes.push(format!(
            "Argo CD has not finished applying {}: compared revision {}, operation {op} at {}. Health and sync \
             still describe the previous revision, so a Synced/Healthy read now would be stale",
            crate::sha::short(ev.target_revision.as_deref().unwrap_or("?")),
            ev.observed_revision.as_deref().map_or("none", crate::sha::short),
            ev.operation_revision.as_deref().map_or("none", crate::sha::short),
        ));
    }
    if let Some(t) = &ev.target_revision {
        if !crate::sha::is_full_sha(t) {
            causes.push(format!(
                "targetRevision is {t:?}, not a full SHA: what it means moves with the branch, so no revision-pinned \
                 check can hold"
            ));
        }
    }
    if target == Target::Healthy && unmet_names == [Field::HttpBody] {
        causes.push(format!(
            "Kubernetes and Argo CD say everything is fine, but the page is {:?}, not the expected body: the release \
             serves the wrong content",
            ev.http_body.as_deref().unwrap_or("")
        ));
    }
}

/// Argo CD could not generate manifests for the revision.
fn comparison_errors(
    causes: &mut Vec<String>,
    _target: Target,
    _unmet_names: &[Field],
    ev: &Evidence,
    cx: &Context,
) {
    // Argo CD could not generate manifests for the revision (Git server unreachable, unknown
    // revision, bad path): nothing it reports describes the revision asked for.
    let comparison_errors = cx
        .application
        .as_ref()
        .and_then(|a| a.status.as_ref())
        .into_iter()
        .flat_map(|st| st.conditions.iter().flatten())
        .filter(|c| c.type_.as_deref() == Some("ComparisonError"));
    for c in comparison_errors {
        let message = c.message.as_deref().unwrap_or("");
        let unreachable = [
            "unable to connect",
            "Connection refused",
            "connection refused",
            "i/o timeout",
            "no such host",
        ]
        .iter()
        .any(|n| message.contains(n));
        let hint = if unreachable {
            "the repo-server cannot reach the Git server: is the git daemon up and the repoURL right? Argo CD \
             retries only at its next reconciliation (timeout.reconciliation), so once Git is back request a \
             refresh (annotation argocd.argoproj.io/refresh=normal)."
        } else {
            "check the repoURL, the revision and the path in the Application"
        };
        let first_line = message.lines().next().unwrap_or("");
        causes.push(format!(
            "Argo CD cannot load {} from Git (ComparisonError): {hint} Its sync and health still describe the \
             previous revision. Argo CD says: {first_line}",
            crate::sha::short(ev.target_revision.as_deref().unwrap_or("?")),
        ));
    }
}

/// A controller (deployment, EndpointSlice, endpoints) or the watch is behind the API.
fn controllers_behind(
    causes: &mut Vec<String>,
    target: Target,
    unmet_names: &[Field],
    ev: &Evidence,
    cx: &Context,
) {
    // Argo CD applied the spec but the Deployment controller has not looked at it yet.
    if unmet_names.contains(&Field::ObservedGeneration)
        && ev.operation_phase.as_deref() == Some("Succeeded")
    {
        causes.push(format!(
            "Argo CD applied the Deployment (generation {}), but kube-controller-manager's deployment \
             controller has not caught up (observedGeneration {}): nothing rolls out until it does. Is \
             kube-controller-manager running? It lags after an API server restart while its informers resync",
            ev.generation.map_or("?".into(), |g| g.to_string()),
            ev.observed_generation
        ));
    }
    // Ready pods the Service does not route to: no probe, sync or health check sees this.
    let ready_pods = ready_pod_names(&cx.pods);
    if target == Target::Healthy && ev.ready_endpoints == 0 && !ready_pods.is_empty() {
        match cx.listed_ready_endpoints {
            Some(0) => causes.push(format!(
                "pod {} is Ready but the Service's EndpointSlices list no ready endpoint, so traffic cannot reach \
                 it: kube-controller-manager's EndpointSlice controller has not caught up. It lags after an API \
                 server restart (its informers resync and its retries for the Service back off, up to minutes); \
                 the next change to the Service's pods makes it sync again",
                ready_pods.join(", ")
            )),
            Some(n) => causes.push(format!(
                "the EndpointSlice watch is behind the API: a fresh list shows {n} ready endpoint(s) for Ready pod \
                 {}; the watch should catch up on its own",
                ready_pods.join(", ")
            )),
            None => {}
        }
    }
    // The API server's service proxy routes by the older v1 Endpoints object, which another
    // controller maintains: it can say "no endpoints" while the EndpointSlices list one.
    let proxy_sees_none = ev.http_code == Some(503)
        && ev
            .http_body
            .as_deref()
            .is_some_and(|b| b.contains("no endpoints available for service"));
    if target == Target::Healthy && ev.ready_endpoints > 0 && proxy_sees_none {
        causes.push(format!(
            "the Service's EndpointSlices list {} ready endpoint(s), but the API server's service proxy answers 503 \
             \"no endpoints available\": it routes by the v1 Endpoints object, which kube-controller-manager's \
             endpoints controller has not caught up with. It lags after an API server restart (its informers \
             resync and its retries for the Service back off, up to minutes); the next change to the Service's \
             pods makes it sync again",
            ev.ready_endpoints
        ));
    }
    if let Some(e) = &cx.last_watch_error {
        causes.push(format!("the API had errors during the wait; last: {e}"));
    }
}

fn ready_condition(pod: &Pod) -> Option<&PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
}

/// Pods whose Ready condition is True and that are not being deleted.
fn ready_pod_names(pods: &[Pod]) -> Vec<&str> {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| ready_condition(p).is_some_and(|c| c.status == "True"))
        .filter_map(|p| p.metadata.name.as_deref())
        .collect()
}

/// Why a wait has not succeeded, for a human: the unmet conditions with live values, the likely
/// cause, what flipped during the wait, then the Deployment's conditions, the Application's
/// conditions and operation message, the pods' readiness and the newest events (readiness probe
/// failures show up there).
pub fn explain(target: Target, sha: &str, unmet: &[Unmet], ev: &Evidence, cx: &Context) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "still unmet for `{}` at {sha}:", target.name());
    for u in unmet {
        let _ = writeln!(s, "  - {u}");
    }
    let causes = likely_causes(target, unmet, ev, cx);
    if !causes.is_empty() {
        let _ = writeln!(s, "Likely cause:");
        for c in &causes {
            let _ = writeln!(s, "  - {c}");
        }
    }
    if !cx.flips.is_empty() {
        let _ = writeln!(s, "Changes seen during the wait:");
        for f in &cx.flips {
            let _ = writeln!(s, "  - {f}");
        }
    }
    let _ = writeln!(
        s,
        "Deployment {}/{} conditions:",
        ev.namespace, ev.deployment
    );
    if ev.conditions.is_empty() {
        let _ = writeln!(
            s,
            "  (none: the Deployment is missing or has no status yet)"
        );
    }
    for c in &ev.conditions {
        let _ = writeln!(
            s,
            "  - {}={} {} {}",
            c.type_,
            c.status,
            c.reason.as_deref().unwrap_or(""),
            c.message.as_deref().unwrap_or("")
        );
    }
    let app = cx.application.as_ref();
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
                let _ = writeln!(
                    s,
                    "  operation {}: {}",
                    op.phase.as_deref().unwrap_or("?"),
                    op.message.as_deref().unwrap_or("")
                );
            }
            if let Some(h) = st.health.as_ref().and_then(|h| h.message.as_ref()) {
                let _ = writeln!(s, "  health message: {h}");
            }
            for c in st.conditions.iter().flatten() {
                let _ = writeln!(
                    s,
                    "  condition {}: {}",
                    c.type_.as_deref().unwrap_or("?"),
                    c.message.as_deref().unwrap_or("")
                );
            }
        }
    }
    let _ = writeln!(s, "Pods:");
    if cx.pods.is_empty() {
        let _ = writeln!(s, "  (none)");
    }
    for p in &cx.pods {
        let name = p.metadata.name.as_deref().unwrap_or("?");
        let st = p.status.as_ref();
        let ready = ready_condition(p)
            .map(|c| format!("Ready={} {}", c.status, c.message.as_deref().unwrap_or("")))
            .unwrap_or_else(|| "Ready=?".into());
        let _ = writeln!(
            s,
            "  - {name} phase={} {ready}",
            st.and_then(|s| s.phase.as_deref()).unwrap_or("?")
        );
    }
    let _ = writeln!(s, "Newest events:");
    let skip = cx.events.len().saturating_sub(8);
    for e in cx.events.iter().skip(skip) {
        let _ = writeln!(
            s,
            "  - {} {} {}/{}: {} {}",
            event_time(e).map(|t| t.to_string()).unwrap_or_default(),
            e.type_.as_deref().unwrap_or(""),
            e.involved_object.kind.as_deref().unwrap_or(""),
            e.involved_object.name.as_deref().unwrap_or(""),
            e.reason.as_deref().unwrap_or(""),
            e.message.as_deref().unwrap_or("").trim()
        );
    }
    for r in &cx.read_errors {
        let _ = writeln!(s, "(could not read {r})");
    }
    s
}
