//! Evidence derivation and the wait predicates on realistic API objects (shaped as the API
//! server returns them), with insta snapshots of the evidence JSON.

mod support;

use chrono::TimeZone;
use cnpe_lab::cluster::argo::Application;
use cnpe_lab::observe::evidence::{
    derive, ready_endpoints, Evidence, HttpOutcome, LiveState, Subject,
};
use cnpe_lab::observe::explain;
use cnpe_lab::observe::predicates::{self, Field, Target};
use cnpe_lab::release_gate as gate;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::{json, Value};

const SHA: &str = "3b18e512dba79e4c8300dd08aeb37f8e728b8dad";
const OLD: &str = "4c29f623ecb80f5d9411ee19bfc48f9f839c9ebe";
const BODY: &str = "labhub-cnpe-v1";
const URL: &str = "https://10.99.0.1:6443/api/v1/namespaces/cnpe-shop/services/web:80/proxy/";

fn subject() -> Subject {
    Subject {
        application: "cnpe-shop".into(),
        namespace: "cnpe-shop".into(),
        deployment: "web".into(),
    }
}

fn at() -> chrono::DateTime<chrono::Utc> {
    chrono::Utc.with_ymd_and_hms(2026, 12, 2, 15, 4, 5).unwrap()
}

fn app(target: &str, status: Option<Value>) -> Application {
    let mut v = json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": "cnpe-shop", "namespace": "argocd", "generation": 4},
        "spec": {
            "project": "cnpe-delivery",
            "source": {"repoURL": "git://gitd.gitsrv.svc.cluster.local:9418/app.git", "path": "app", "targetRevision": target},
            "destination": {"server": "https://kubernetes.default.svc", "namespace": "cnpe-shop"},
            "syncPolicy": {"automated": {"prune": true, "selfHeal": true}}
        }
    });
    if let Some(s) = status {
        v["status"] = s;
    }
    serde_json::from_value(v).unwrap()
}

fn app_status(revision: &str, sync: &str, health: &str) -> Value {
    json!({
        "sync": {"status": sync, "revision": revision, "comparedTo": {"source": {"targetRevision": revision}}},
        "health": {"status": health, "lastTransitionTime": "2026-12-02T15:04:00Z"},
        "operationState": {
            "phase": "Succeeded", "message": "successfully synced (all tasks run)",
            "startedAt": "2026-12-02T15:03:58Z", "finishedAt": "2026-12-02T15:03:59Z",
            "syncResult": {"revision": revision, "resources": []}
        },
        "reconciledAt": "2026-12-02T15:04:00Z"
    })
}

fn deployment(generation: i64, status: Value) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "cnpe-shop", "generation": generation},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}},
        "status": status
    }))
    .unwrap()
}

fn healthy_deployment() -> Deployment {
    deployment(
        3,
        json!({
            "observedGeneration": 3, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability."},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "message": "ReplicaSet \"web-5d8f9c7b6\" has successfully progressed."}
            ]
        }),
    )
}

fn stuck_deployment(deadline_passed: bool) -> Deployment {
    let progressing = if deadline_passed {
        json!({"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": "ReplicaSet \"web-6f6b546d76\" has timed out progressing."})
    } else {
        json!({"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated", "message": "ReplicaSet \"web-6f6b546d76\" is progressing."})
    };
    // ready/available are omitted by the API when zero.
    deployment(
        4,
        json!({
            "observedGeneration": 4, "replicas": 1, "updatedReplicas": 1, "unavailableReplicas": 1,
            "conditions": [
                {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable", "message": "Deployment does not have minimum availability."},
                progressing
            ]
        }),
    )
}

fn slice(name: &str, endpoints: Value) -> EndpointSlice {
    serde_json::from_value(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
        "metadata": {"name": name, "namespace": "cnpe-shop", "labels": {"kubernetes.io/service-name": "web"}},
        "endpoints": endpoints,
        "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]
    }))
    .unwrap()
}

fn endpoint(ip: &str, ready: Option<bool>) -> Value {
    match ready {
        Some(r) => {
            json!({"addresses": [ip], "conditions": {"ready": r, "serving": r, "terminating": false}})
        }
        None => json!({"addresses": [ip]}),
    }
}

fn ok_http() -> HttpOutcome {
    HttpOutcome {
        url: URL.into(),
        code: Some(200),
        body: Some(BODY.into()),
        error: None,
    }
}

fn unavailable_http() -> HttpOutcome {
    let status = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"no endpoints available for service \"web\"","reason":"ServiceUnavailable","code":503}"#;
    HttpOutcome {
        url: URL.into(),
        code: Some(503),
        body: Some(format!("{status}\n")),
        error: None,
    }
}

fn snapshot(name: &str, ev: &Evidence) {
    support::evidence_settings(false).bind(|| insta::assert_json_snapshot!(name, ev));
}

fn healthy_state() -> LiveState {
    LiveState {
        application: Some(app(SHA, Some(app_status(SHA, "Synced", "Healthy")))),
        deployment: Some(healthy_deployment()),
        slices: vec![slice(
            "web-abc12",
            json!([endpoint("10.88.0.7", Some(true))]),
        )],
    }
}

#[test]
fn healthy_release_evidence() {
    let ev = derive(&subject(), &healthy_state(), &ok_http(), at());
    assert_eq!(ev.observed_at, "2026-12-02T15:04:05.000Z");
    assert_eq!(
        (
            ev.replicas,
            ev.updated,
            ev.ready,
            ev.available,
            ev.ready_endpoints
        ),
        (1, 1, 1, 1, 1)
    );
    assert_eq!((ev.generation, ev.observed_generation), (Some(3), 3));
    assert!(predicates::healthy(&ev, SHA, BODY).is_empty());
    assert!(gate::evaluate_value(&ev.to_value(), SHA, BODY).approved);
    snapshot("evidence_healthy", &ev);
}

#[test]
fn every_field_of_lab_md_is_present_in_order() {
    let ev = derive(
        &subject(),
        &LiveState::default(),
        &HttpOutcome {
            url: URL.into(),
            code: None,
            body: None,
            error: Some("refused".into()),
        },
        at(),
    );
    let keys: Vec<String> = ev.to_value().as_object().unwrap().keys().cloned().collect();
    assert_eq!(
        keys,
        [
            "observed_at",
            "application",
            "project",
            "target_revision",
            "observed_revision",
            "operation_revision",
            "operation_phase",
            "sync",
            "health",
            "namespace",
            "deployment",
            "generation",
            "observed_generation",
            "replicas",
            "updated",
            "ready",
            "available",
            "ready_endpoints",
            "progress_deadline_exceeded",
            "conditions",
            "http_url",
            "http_code",
            "http_body",
            "http_error"
        ]
    );
}

#[test]
fn stuck_before_the_deadline_is_not_yet_failed() {
    let live = LiveState {
        application: Some(app(SHA, Some(app_status(SHA, "Synced", "Progressing")))),
        deployment: Some(stuck_deployment(false)),
        slices: vec![slice(
            "web-abc12",
            json!([endpoint("10.88.0.8", Some(false))]),
        )],
    };
    let ev = derive(&subject(), &live, &unavailable_http(), at());
    assert!(!ev.progress_deadline_exceeded);
    assert_eq!((ev.ready, ev.available, ev.ready_endpoints), (0, 0, 0));
    let unmet: Vec<&str> = predicates::failed(&ev, SHA)
        .iter()
        .map(|u| u.what.as_str())
        .collect();
    assert_eq!(
        unmet,
        ["health", "progress_deadline_exceeded"],
        "wait, don't give up"
    );
    snapshot("evidence_stuck_before_deadline", &ev);
}

#[test]
fn synced_outage_after_the_deadline() {
    let live = LiveState {
        application: Some(app(SHA, Some(app_status(SHA, "Synced", "Degraded")))),
        deployment: Some(stuck_deployment(true)),
        slices: vec![slice(
            "web-abc12",
            json!([endpoint("10.88.0.8", Some(false))]),
        )],
    };
    let ev = derive(&subject(), &live, &unavailable_http(), at());
    assert!(ev.progress_deadline_exceeded);
    assert_eq!(
        (ev.replicas, ev.updated, ev.ready, ev.available),
        (1, 1, 0, 0)
    );
    assert!(predicates::failed(&ev, SHA).is_empty());
    assert!(!predicates::healthy(&ev, SHA, BODY).is_empty());
    let verdict = gate::evaluate_value(&ev.to_value(), SHA, BODY);
    assert!(
        !verdict.approved,
        "negative control: the gate rejects the outage"
    );
    assert_eq!(
        verdict.failing_fields(),
        [
            "health",
            "available",
            "ready",
            "ready_endpoints",
            "http_code",
            "http_body"
        ]
    );
    snapshot("evidence_synced_outage", &ev);
}

#[test]
fn counters_the_api_omits_are_integer_zero() {
    let live = LiveState {
        deployment: Some(deployment(1, json!({}))),
        ..Default::default()
    };
    let ev = derive(&subject(), &live, &ok_http(), at());
    assert_eq!(
        (
            ev.observed_generation,
            ev.replicas,
            ev.updated,
            ev.ready,
            ev.available
        ),
        (0, 0, 0, 0, 0)
    );
    let v = ev.to_value();
    for k in [
        "observed_generation",
        "replicas",
        "updated",
        "ready",
        "available",
        "ready_endpoints",
    ] {
        assert_eq!(v[k], json!(0), "{k}");
        assert!(v[k].is_i64() || v[k].is_u64());
    }
}

#[test]
fn ready_endpoints_sum_over_slices_and_skip_only_ready_false() {
    let slices = vec![
        slice(
            "web-a",
            json!([
                endpoint("10.88.0.7", Some(true)),
                endpoint("10.88.0.8", Some(false))
            ]),
        ),
        slice("web-b", json!([endpoint("10.88.0.9", None)])), // missing ready means ready
        slice("web-c", Value::Null),                          // endpoints: null = none
    ];
    assert_eq!(ready_endpoints(&slices), 2);
    assert_eq!(ready_endpoints(&[]), 0);
    assert_eq!(ready_endpoints(&[slice("web-d", json!([]))]), 0);
}

#[test]
fn deployment_missing() {
    let live = LiveState {
        application: Some(app(SHA, Some(app_status(SHA, "OutOfSync", "Missing")))),
        ..Default::default()
    };
    let ev = derive(&subject(), &live, &unavailable_http(), at());
    assert_eq!(ev.generation, None);
    assert!(ev.conditions.is_empty());
    assert_eq!(ev.to_value()["generation"], Value::Null);
    snapshot("evidence_deployment_missing", &ev);
}

#[test]
fn application_without_status() {
    let live = LiveState {
        application: Some(app(SHA, None)),
        deployment: Some(healthy_deployment()),
        slices: vec![],
    };
    let ev = derive(&subject(), &live, &ok_http(), at());
    assert_eq!(ev.target_revision.as_deref(), Some(SHA));
    assert_eq!(
        (
            ev.observed_revision.as_deref(),
            ev.sync.as_deref(),
            ev.health.as_deref()
        ),
        (None, None, None)
    );
    assert_eq!(
        (
            ev.operation_revision.as_deref(),
            ev.operation_phase.as_deref()
        ),
        (None, None)
    );
    let unmet: Vec<&str> = predicates::healthy(&ev, SHA, BODY)
        .iter()
        .map(|u| u.what.as_str())
        .collect();
    assert_eq!(
        unmet,
        [
            "observed_revision",
            "operation_revision",
            "operation_phase",
            "sync",
            "health",
            "ready_endpoints"
        ]
    );
    snapshot("evidence_application_without_status", &ev);
}

#[test]
fn application_missing_and_transport_error() {
    let http = HttpOutcome {
        url: URL.into(),
        code: None,
        body: None,
        error: Some("connection refused".into()),
    };
    let ev = derive(&subject(), &LiveState::default(), &http, at());
    assert_eq!(ev.project, None);
    assert_eq!(ev.application, "cnpe-shop");
    assert_eq!(
        (ev.http_code, ev.http_error.as_deref()),
        (None, Some("connection refused"))
    );
    let v = ev.to_value();
    assert_eq!(
        (&v["http_code"], &v["http_body"]),
        (&Value::Null, &Value::Null)
    );
}

/// A stale Healthy (the previous revision still reported) must never satisfy the wait.
#[test]
fn stale_revision_never_counts_as_healthy() {
    let live = LiveState {
        application: Some(app(SHA, Some(app_status(OLD, "Synced", "Healthy")))),
        deployment: Some(healthy_deployment()),
        slices: vec![slice(
            "web-abc12",
            json!([endpoint("10.88.0.7", Some(true))]),
        )],
    };
    let ev = derive(&subject(), &live, &ok_http(), at());
    let unmet = predicates::healthy(&ev, SHA, BODY);
    assert_eq!(
        unmet.iter().map(|u| u.what.as_str()).collect::<Vec<_>>(),
        ["observed_revision", "operation_revision"]
    );
    assert!(
        unmet[0].found.contains(OLD),
        "the live value is shown: {}",
        unmet[0]
    );
}

#[test]
fn generation_not_yet_observed_is_unmet() {
    let mut live = healthy_state();
    live.deployment = Some(deployment(
        4,
        serde_json::to_value(healthy_deployment().status).unwrap(),
    ));
    let ev = derive(&subject(), &live, &ok_http(), at());
    let unmet = predicates::healthy(&ev, SHA, BODY);
    assert_eq!(unmet.len(), 1);
    assert_eq!(
        unmet[0].to_string(),
        "observed_generation: want equal to generation, found 3 (generation Some(4))"
    );
}

#[test]
fn explanation_names_unmet_conditions_events_and_pods() {
    let live = LiveState {
        application: Some(app(SHA, Some(app_status(SHA, "Synced", "Progressing")))),
        deployment: Some(stuck_deployment(false)),
        slices: vec![],
    };
    let ev = derive(&subject(), &live, &unavailable_http(), at());
    let unmet = predicates::failed(&ev, SHA);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web-6f6b546d76-x2x9q", "namespace": "cnpe-shop"},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady", "message": "containers with unready status: [web]"}]}
    }))
    .unwrap();
    let event: Event = serde_json::from_value(json!({
        "metadata": {"name": "web.1", "namespace": "cnpe-shop"},
        "involvedObject": {"kind": "Pod", "name": "web-6f6b546d76-x2x9q"},
        "reason": "Unhealthy", "type": "Warning",
        "message": "Readiness probe failed: HTTP probe failed with statuscode: 404",
        "lastTimestamp": "2026-12-02T15:04:03Z"
    }))
    .unwrap();
    let cx = explain::Context {
        application: live.application.clone(),
        pods: vec![pod],
        events: vec![event],
        ..Default::default()
    };
    let text = explain::explain(Target::Failed, SHA, &unmet, &ev, &cx);
    for needle in [
        "still unmet for `failed`",
        "health: want Some(\"Degraded\"), found Some(\"Progressing\")",
        "progress_deadline_exceeded: want true, found false",
        "Progressing=True ReplicaSetUpdated",
        "operation Succeeded: successfully synced (all tasks run)",
        "web-6f6b546d76-x2x9q phase=Running Ready=False containers with unready status: [web]",
        "Readiness probe failed: HTTP probe failed with statuscode: 404",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
}

/// The rollback to a known-bad ReplicaSet (kubernetes#106054): Progressing stays
/// True/NewReplicaSetAvailable, Argo says Progressing for good, nothing serves. The explanation
/// must name the reused ReplicaSet, the stale condition, the upstream issue and the outage time.
#[test]
fn explanation_names_a_rollback_to_a_reused_replica_set() {
    let mut d = healthy_deployment();
    d.metadata.annotations = Some(
        [(
            "deployment.kubernetes.io/revision".to_string(),
            "3".to_string(),
        )]
        .into(),
    );
    let status = json!({
        "observedGeneration": 3, "replicas": 1, "updatedReplicas": 1, "unavailableReplicas": 1,
        "conditions": [
            {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable", "message": "Deployment does not have minimum availability."},
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "message": "ReplicaSet \"web-6f6b546d76\" has successfully progressed."}
        ]
    });
    d.status = serde_json::from_value(status).unwrap();
    let live = LiveState {
        application: Some(app(SHA, Some(app_status(SHA, "Synced", "Progressing")))),
        deployment: Some(d.clone()),
        slices: vec![slice("web-a", json!([endpoint("10.88.0.9", Some(false))]))],
    };
    let ev = derive(&subject(), &live, &unavailable_http(), at());
    let unmet = predicates::failed(&ev, SHA);
    let rs: k8s_openapi::api::apps::v1::ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "web-6f6b546d76", "namespace": "cnpe-shop", "annotations": {
            "deployment.kubernetes.io/revision": "3", "deployment.kubernetes.io/revision-history": "1"}}
    }))
    .unwrap();
    let cx = explain::Context {
        application: live.application.clone(),
        deployment: Some(d),
        replica_sets: vec![rs],
        zero_endpoints_for: Some(std::time::Duration::from_millis(61_500)),
        ..Default::default()
    };
    let text = explain::explain(Target::Failed, SHA, &unmet, &ev, &cx);
    for needle in [
        "Likely cause",
        "existing ReplicaSet web-6f6b546d76",
        "kubernetes/kubernetes#106054",
        "NewReplicaSetAvailable",
        "0 ready endpoints for 61.5s",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    // Without the reuse marker, no such claim is made.
    let mut plain = cx.clone();
    plain.replica_sets[0]
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .remove("deployment.kubernetes.io/revision-history");
    assert!(!explain::explain(Target::Failed, SHA, &unmet, &ev, &plain).contains("106054"));
}

/// Argo CD's repo-server cannot fetch (the git daemon is down): the Application keeps its old
/// sync/health with a ComparisonError condition. The explanation must say Git is unreachable.
#[test]
fn explanation_names_an_unreachable_git_server() {
    let mut application = app(SHA, Some(app_status(SHA, "Unknown", "Healthy")));
    let conditions = json!([{"type": "ComparisonError", "message":
        "Failed to load target state: failed to generate manifest for source 1 of 1: rpc error: code = Unknown desc = Failed to fetch default: `git fetch origin --tags --force --prune` failed exit status 128: fatal: unable to connect to gitd.gitsrv.svc.cluster.local:\ngitd.gitsrv.svc.cluster.local[0: 127.0.0.1]: errno=Connection refused"}]);
    application.status.as_mut().unwrap().conditions = serde_json::from_value(conditions).unwrap();
    let live = LiveState {
        application: Some(application),
        deployment: Some(healthy_deployment()),
        slices: vec![],
    };
    let ev = derive(&subject(), &live, &ok_http(), at());
    let unmet = predicates::healthy(&ev, SHA, BODY);
    let cx = explain::Context {
        application: live.application.clone(),
        ..Default::default()
    };
    let causes = explain::likely_causes(Target::Healthy, &unmet, &ev, &cx);
    let git = causes
        .iter()
        .find(|c| c.contains("ComparisonError"))
        .unwrap_or_else(|| panic!("no Git cause in {causes:?}"));
    assert!(git.contains("cannot reach the Git server"), "{git}");
    assert!(
        git.contains("unable to connect to gitd.gitsrv.svc.cluster.local"),
        "{git}"
    );
    // Another comparison error gets the general hint, not the unreachable one.
    let mut other = cx.clone();
    other
        .application
        .as_mut()
        .unwrap()
        .status
        .as_mut()
        .unwrap()
        .conditions = serde_json::from_value(
        json!([{"type": "ComparisonError", "message": "unable to resolve 'nope' to a commit SHA"}]),
    )
    .unwrap();
    let causes = explain::likely_causes(Target::Healthy, &unmet, &ev, &other);
    assert!(
        causes
            .iter()
            .any(|c| c.contains("check the repoURL, the revision and the path")),
        "{causes:?}"
    );
    assert!(
        !causes.iter().any(|c| c.contains("cannot reach")),
        "{causes:?}"
    );
}

fn ready_pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "cnpe-shop"},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .unwrap()
}

/// After an API-server restart kube-controller-manager's EndpointSlice controller can lag for
/// minutes: the pod is Ready, Argo CD says Healthy, and the Service routes nowhere.
#[test]
fn explanation_tells_a_lagging_endpoint_controller_from_a_lagging_watch() {
    let live = LiveState {
        application: Some(app(SHA, Some(app_status(SHA, "Synced", "Healthy")))),
        deployment: Some(healthy_deployment()),
        slices: vec![],
    };
    let ev = derive(&subject(), &live, &unavailable_http(), at());
    let unmet = predicates::healthy(&ev, SHA, BODY);
    assert!(unmet.iter().any(|u| u.what == Field::ReadyEndpoints));
    let cx = |listed: Option<i64>| explain::Context {
        pods: vec![ready_pod("web-757cc8677d-d4p5t")],
        listed_ready_endpoints: listed,
        ..Default::default()
    };
    let causes = explain::likely_causes(Target::Healthy, &unmet, &ev, &cx(Some(0)));
    let lag = causes
        .iter()
        .find(|c| c.contains("EndpointSlice controller has not caught up"))
        .unwrap_or_else(|| panic!("no endpoint-controller cause in {causes:?}"));
    assert!(lag.contains("pod web-757cc8677d-d4p5t is Ready"), "{lag}");
    let causes = explain::likely_causes(Target::Healthy, &unmet, &ev, &cx(Some(1)));
    assert!(
        causes
            .iter()
            .any(|c| c.contains("watch is behind the API: a fresh list shows 1 ready")),
        "{causes:?}"
    );
    assert!(!causes.iter().any(|c| c.contains("has not caught up")));
    // Unknown fresh count, or no Ready pod: nothing is claimed.
    for quiet in [cx(None), explain::Context::default()] {
        let causes = explain::likely_causes(Target::Healthy, &unmet, &ev, &quiet);
        assert!(
            !causes.iter().any(|c| c.contains("EndpointSlice")),
            "{causes:?}"
        );
    }
}

/// The API server's service proxy routes by v1 Endpoints: after an API-server restart it can
/// answer "no endpoints available" while the EndpointSlices already list the Ready pod.
#[test]
fn explanation_names_a_proxy_routing_by_stale_endpoints() {
    let live = LiveState {
        application: Some(app(SHA, Some(app_status(SHA, "Synced", "Healthy")))),
        deployment: Some(healthy_deployment()),
        slices: vec![slice("web-a", json!([endpoint("10.88.0.11", Some(true))]))],
    };
    let ev = derive(&subject(), &live, &unavailable_http(), at());
    assert_eq!(ev.ready_endpoints, 1);
    let unmet = predicates::healthy(&ev, SHA, BODY);
    let causes = explain::likely_causes(Target::Healthy, &unmet, &ev, &explain::Context::default());
    let proxy = causes
        .iter()
        .find(|c| c.contains("service proxy answers 503"))
        .unwrap_or_else(|| panic!("no proxy cause in {causes:?}"));
    assert!(
        proxy.contains("endpoints controller has not caught up"),
        "{proxy}"
    );
    // A 503 with no ready endpoint at all is the outage itself, not a lagging proxy.
    let none = LiveState {
        slices: vec![],
        ..live
    };
    let ev = derive(&subject(), &none, &unavailable_http(), at());
    let unmet = predicates::healthy(&ev, SHA, BODY);
    let causes = explain::likely_causes(Target::Healthy, &unmet, &ev, &explain::Context::default());
    assert!(
        !causes.iter().any(|c| c.contains("service proxy")),
        "{causes:?}"
    );
}

/// Argo CD's sync succeeded but the Deployment controller has not observed the new spec (it
/// lags after an API-server restart): the old pods still serve and nothing rolls out.
#[test]
fn explanation_names_a_deployment_controller_that_has_not_caught_up() {
    let mut lagging = healthy_deployment();
    lagging.metadata.generation = Some(4);
    let live = LiveState {
        application: Some(app(SHA, Some(app_status(SHA, "Synced", "Progressing")))),
        deployment: Some(lagging),
        slices: vec![slice("web-a", json!([endpoint("10.88.0.9", Some(true))]))],
    };
    let ev = derive(&subject(), &live, &ok_http(), at());
    let unmet = predicates::healthy(&ev, SHA, BODY);
    assert!(unmet.iter().any(|u| u.what == Field::ObservedGeneration));
    let causes = explain::likely_causes(Target::Healthy, &unmet, &ev, &explain::Context::default());
    let lag = causes
        .iter()
        .find(|c| c.contains("deployment controller has not caught up"))
        .unwrap_or_else(|| panic!("no deployment-controller cause in {causes:?}"));
    assert!(
        lag.contains("generation 4") && lag.contains("observedGeneration 3"),
        "{lag}"
    );
    // While Argo CD is still applying, the lag is Argo CD's, and is named as such instead.
    let mut applying = live.clone();
    let status = applying
        .application
        .as_mut()
        .unwrap()
        .status
        .as_mut()
        .unwrap();
    status.operation_state.as_mut().unwrap().phase = Some("Running".into());
    let ev = derive(&subject(), &applying, &ok_http(), at());
    let unmet = predicates::healthy(&ev, SHA, BODY);
    let causes = explain::likely_causes(Target::Healthy, &unmet, &ev, &explain::Context::default());
    assert!(
        !causes.iter().any(|c| c.contains("deployment controller")),
        "{causes:?}"
    );
}
