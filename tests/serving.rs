//! The gate's pure core against counterexamples: every state below is one where a usual check
//! (Argo CD Synced + Healthy, `kubectl rollout status`, one GET through the Service) approves
//! a release that does not serve, built from typed k8s-openapi objects. Plus the positive
//! case, final rejections, the deadline, properties over random endpoints and Application
//! status strings, and snapshots of the text and OpenMetrics renderings.

#[path = "support/typed.rs"]
mod typed;

use cnpe_lab::cluster::argo::{
    AppCondition, Application, ApplicationSpec, ApplicationStatus, Destination, HealthStatus,
    Operation, ResourceStatus, SyncOperation, SyncResult,
};
use cnpe_lab::serving::decide::{self, Request};
use cnpe_lab::serving::expect::Expect;
use cnpe_lab::serving::model::{EndpointKey, Objects, ProbeAnswer, Probes};
use cnpe_lab::serving::verdict::{
    escape_label, openmetrics, Condition, Decision, LieWindow, Verdict,
};
use cnpe_lab::serving::workloads::{self, WorkloadKind, WorkloadRef};
use k8s_openapi::api::apps::v1::{
    DaemonSet, DaemonSetStatus, Deployment, DeploymentCondition, DeploymentSpec, DeploymentStatus,
    ReplicaSet, RollingUpdateStatefulSetStrategy, StatefulSet, StatefulSetSpec, StatefulSetStatus,
    StatefulSetUpdateStrategy,
};
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodCondition, PodStatus};
use k8s_openapi::api::discovery::v1::{
    Endpoint as SliceEndpoint, EndpointConditions, EndpointPort, EndpointSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;
use rstest::rstest;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const SHA: &str = "3b18e512dba79e4c8300dd08aeb37f8e728b8dad";
const OLD_SHA: &str = "4c29f623ecb80f5d9411ee19bfc48f9f839c9ebe";
const NS: &str = "shop";
const BODY: &str = "shop r2";
const OLD_BODY: &str = "shop r1";

/// Seconds after a fixed instant (the gate starts at 0).
fn t(secs: i64) -> Timestamp {
    "2026-12-04T10:00:00Z".parse::<Timestamp>().unwrap()
        + k8s_openapi::jiff::SignedDuration::from_secs(secs)
}

fn ts(secs: i64) -> String {
    t(secs).to_string()
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(NS.into()),
        uid: Some(format!("uid-{name}")),
        generation: Some(1),
        ..Default::default()
    }
}

fn owner(kind: &str, name: &str) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: kind.into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        controller: Some(true),
        ..Default::default()
    }
}

fn labels(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

/// An Application Synced + Healthy at `SHA`, operation Succeeded at it, reconciled after it,
/// managing `resources` (group, kind, name) in namespace `shop`.
fn application(resources: &[(&str, &str, &str)]) -> Application {
    Application {
        api_version: "argoproj.io/v1alpha1".into(),
        kind: "Application".into(),
        metadata: ObjectMeta {
            name: Some("shop".into()),
            namespace: Some("argocd".into()),
            ..Default::default()
        },
        spec: ApplicationSpec {
            project: "default".into(),
            destination: Destination {
                namespace: Some(NS.into()),
                ..Default::default()
            },
            ..Default::default()
        },
        status: Some(typed::synced_status(
            SHA,
            t(0),
            resources
                .iter()
                .map(|(g, k, n)| typed::managed(g, k, NS, n))
                .collect(),
        )),
    }
}

fn deployment(
    name: &str,
    replicas: i32,
    updated: i32,
    ready: i32,
    available: i32,
    total: i32,
) -> Deployment {
    Deployment {
        metadata: ObjectMeta {
            generation: Some(2),
            ..meta(name)
        },
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            ..Default::default()
        }),
        status: Some(DeploymentStatus {
            observed_generation: Some(2),
            replicas: Some(total),
            updated_replicas: Some(updated),
            ready_replicas: Some(ready),
            available_replicas: Some(available),
            ..Default::default()
        }),
    }
}

fn replica_set(deployment: &str, hash: &str, revision: u32) -> ReplicaSet {
    ReplicaSet {
        metadata: ObjectMeta {
            labels: labels(&[("pod-template-hash", hash)]),
            annotations: labels(&[("deployment.kubernetes.io/revision", &revision.to_string())]),
            owner_references: Some(vec![owner("Deployment", deployment)]),
            ..meta(&format!("{deployment}-{hash}"))
        },
        ..Default::default()
    }
}

fn ready_condition(ready: bool) -> Option<PodStatus> {
    Some(PodStatus {
        phase: Some("Running".into()),
        conditions: Some(vec![PodCondition {
            type_: "Ready".into(),
            status: if ready { "True" } else { "False" }.into(),
            ..Default::default()
        }]),
        ..Default::default()
    })
}

/// A pod of ReplicaSet `<deployment>-<hash>`.
fn rs_pod(name: &str, deployment: &str, hash: &str, ready: bool) -> Pod {
    Pod {
        metadata: ObjectMeta {
            labels: labels(&[("app", "web"), ("pod-template-hash", hash)]),
            owner_references: Some(vec![owner("ReplicaSet", &format!("{deployment}-{hash}"))]),
            ..meta(name)
        },
        spec: None,
        status: ready_condition(ready),
    }
}

fn stray_pod(name: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            labels: labels(&[("app", "web")]),
            ..meta(name)
        },
        spec: None,
        status: ready_condition(true),
    }
}

/// Slice conditions: (ready, serving, terminating).
type Conds = (Option<bool>, Option<bool>, Option<bool>);

/// One address of a slice: (ip, pod, ready, serving, terminating).
type Addr<'a> = (
    &'a str,
    Option<&'a str>,
    Option<bool>,
    Option<bool>,
    Option<bool>,
);

fn slice(
    name: &str,
    service: &str,
    ports: &[(Option<i32>, Option<&str>)],
    addrs: &[Addr],
) -> EndpointSlice {
    EndpointSlice {
        address_type: "IPv4".into(),
        metadata: ObjectMeta {
            labels: labels(&[("kubernetes.io/service-name", service)]),
            ..meta(name)
        },
        ports: Some(
            ports
                .iter()
                .map(|(p, proto)| EndpointPort {
                    port: *p,
                    protocol: proto.map(str::to_string),
                    ..Default::default()
                })
                .collect(),
        ),
        endpoints: Some(
            addrs
                .iter()
                .map(|(ip, pod, ready, serving, terminating)| SliceEndpoint {
                    addresses: vec![ip.to_string()],
                    conditions: Some(EndpointConditions {
                        ready: *ready,
                        serving: *serving,
                        terminating: *terminating,
                    }),
                    target_ref: pod.map(|p| ObjectReference {
                        kind: Some("Pod".into()),
                        name: Some(p.into()),
                        namespace: Some(NS.into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .collect(),
        ),
    }
}

fn key(service: &str, pod: Option<&str>, ip: &str) -> EndpointKey {
    EndpointKey {
        namespace: NS.into(),
        service: service.into(),
        pod: pod.map(str::to_string),
        ip: ip.into(),
        port: 8080,
    }
}

fn answer(at: i64, code: u16, body: &str) -> ProbeAnswer {
    ProbeAnswer {
        at: t(at),
        code: Some(code),
        body: Some(body.into()),
        error: None,
    }
}

/// The objects and answers of one state, and when it is decided.
#[derive(Clone)]
struct World {
    app: Option<Application>,
    deployments: Vec<Deployment>,
    replica_sets: Vec<ReplicaSet>,
    stateful_sets: Vec<StatefulSet>,
    daemon_sets: Vec<DaemonSet>,
    pods: Vec<Pod>,
    slices: Vec<EndpointSlice>,
    probes: Probes,
    now: i64,
    expect: Expect,
    /// Hook mode (`Request::in_operation`): the gate runs inside the sync operation.
    in_operation: bool,
}

impl World {
    fn objects(&self) -> Objects {
        fn arcs<T: Clone>(v: &[T]) -> Vec<Arc<T>> {
            v.iter().cloned().map(Arc::new).collect()
        }
        Objects {
            application: self.app.clone().map(Arc::new),
            deployments: arcs(&self.deployments),
            replica_sets: arcs(&self.replica_sets),
            stateful_sets: arcs(&self.stateful_sets),
            daemon_sets: arcs(&self.daemon_sets),
            pods: arcs(&self.pods),
            services: Vec::new(),
            endpoint_slices: arcs(&self.slices),
            ..Default::default()
        }
    }

    fn request(&self) -> Request {
        Request {
            namespace: "argocd".into(),
            name: "shop".into(),
            sha: cnpe_lab::sha::Sha::parse(SHA).unwrap(),
            expect: self.expect.clone(),
            path: "/".into(),
            started: t(0),
            deadline: t(300),
            max_answer_age: Duration::from_secs(10),
            in_operation: self.in_operation,
            via_route: false,
        }
    }

    fn decide(&self) -> Verdict {
        decide::decide(
            &self.request(),
            &self.objects(),
            &self.probes,
            t(self.now),
            &LieWindow::default(),
        )
    }

    fn status(&mut self) -> &mut ApplicationStatus {
        self.app.as_mut().unwrap().status.as_mut().unwrap()
    }

    fn deployment(&mut self) -> &mut Deployment {
        &mut self.deployments[0]
    }
}

fn body(text: &str) -> Expect {
    Expect::from_flags(Some(text), None, None, SHA).unwrap()
}

/// The release that serves: Deployment web at revision 2 (hash `new`), 3 of 3 pods ready
/// behind Service web, each answering the expected page; the ReplicaSet of revision 1 scaled
/// to zero. Every other state below is this one with one thing wrong.
fn serving() -> World {
    let pods: Vec<Pod> = ["a", "b", "c"]
        .iter()
        .map(|s| rs_pod(&format!("web-new-{s}"), "web", "new", true))
        .collect();
    let mut probes = Probes::new();
    for (i, s) in ["a", "b", "c"].iter().enumerate() {
        let pod = format!("web-new-{s}");
        probes.insert(
            key("web", Some(&pod), &format!("10.0.0.{}", i + 1)),
            answer(20, 200, BODY),
        );
    }
    World {
        app: Some(application(&[
            ("apps", "Deployment", "web"),
            ("", "Service", "web"),
        ])),
        deployments: vec![deployment("web", 3, 3, 3, 3, 3)],
        replica_sets: vec![replica_set("web", "old", 1), replica_set("web", "new", 2)],
        stateful_sets: Vec::new(),
        daemon_sets: Vec::new(),
        pods,
        slices: vec![slice(
            "web-abcde",
            "web",
            &[(Some(8080), None)],
            &[
                ("10.0.0.1", Some("web-new-a"), Some(true), None, None),
                ("10.0.0.2", Some("web-new-b"), Some(true), None, None),
                ("10.0.0.3", Some("web-new-c"), Some(true), None, None),
            ],
        )],
        probes,
        now: 25,
        expect: body(BODY),
        in_operation: false,
    }
}

fn conditions(v: &Verdict) -> Vec<Condition> {
    v.unmet.iter().map(|u| u.condition).collect()
}

fn causes(v: &Verdict) -> String {
    v.likely_causes.join("\n")
}

/// Adds an endpoint 10.0.0.9 for `pod` to the Service's slice, answering `body`.
fn add_endpoint(
    w: &mut World,
    pod: &str,
    conds: (Option<bool>, Option<bool>, Option<bool>),
    body: &str,
) {
    w.slices.push(slice(
        "web-fghij",
        "web",
        &[(Some(8080), None)],
        &[("10.0.0.9", Some(pod), conds.0, conds.1, conds.2)],
    ));
    w.probes
        .insert(key("web", Some(pod), "10.0.0.9"), answer(20, 200, body));
}

// ---- the positive case

#[test]
fn the_serving_release_is_approved() {
    let w = serving();
    let v = w.decide();
    assert_eq!(v.decision, Decision::Approved, "{}", v.render_text());
    assert!(v.unmet.is_empty());
    assert!(v.likely_causes.is_empty());
    assert_eq!(v.endpoints.len(), 3);
    for e in &v.endpoints {
        assert!(e.matched && e.newest_revision && e.ready && e.serving && !e.terminating);
        assert_eq!(e.owner.as_deref(), Some("Deployment shop/web"));
        assert_eq!(e.revision.as_deref(), Some("new"));
    }
    assert_eq!(v.application, "argocd/shop");
    assert_eq!(v.decided_at, t(25));
}

// ---- what the usual checks approve (each one Synced + Healthy at the SHA)

/// Trap 1: a pod no workload owns carries the Service's labels and serves the old page.
#[test]
fn stray_pod_behind_the_service() {
    let mut w = serving();
    w.pods.push(stray_pod("web-stray"));
    add_endpoint(&mut w, "web-stray", (Some(true), None, None), OLD_BODY);
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending);
    assert_eq!(
        conditions(&v),
        [Condition::EndpointAnswers, Condition::StrayEndpoint]
    );
    let stray = &v.unmet[1];
    assert_eq!(
        stray.subject,
        "endpoint 10.0.0.9:8080 (pod web-stray) of Service shop/web"
    );
    assert_eq!(stray.found, "pod web-stray has no owner");
    assert!(causes(&v).contains(
        "pod web-stray behind Service shop/web is owned by no workload of the Application: a leftover pod or a Service selector that is too broad"
    ));
    let report = v
        .endpoints
        .iter()
        .find(|e| e.endpoint.pod.as_deref() == Some("web-stray"))
        .unwrap();
    assert_eq!(report.owner, None);
    assert!(!report.newest_revision && !report.matched);
}

/// Even when the stray serves exactly the expected page, it is traffic the Application does
/// not run.
#[test]
fn stray_pod_serving_the_right_page_is_still_unmet() {
    let mut w = serving();
    w.pods.push(stray_pod("web-stray"));
    add_endpoint(&mut w, "web-stray", (None, None, None), BODY);
    let v = w.decide();
    assert_eq!(conditions(&v), [Condition::StrayEndpoint]);
}

/// An endpoint with no pod at all (a hand-made EndpointSlice).
#[test]
fn endpoint_without_a_pod_is_a_stray() {
    let mut w = serving();
    w.slices.push(slice(
        "web-manual",
        "web",
        &[(Some(8080), None)],
        &[("192.0.2.1", None, None, None, None)],
    ));
    w.probes
        .insert(key("web", None, "192.0.2.1"), answer(20, 200, BODY));
    let v = w.decide();
    assert_eq!(conditions(&v), [Condition::StrayEndpoint]);
    assert!(v.unmet[0].found.contains("no targetRef"));
}

/// Trap 4: the Deployment's counters still count an old pod that is ready and serving the
/// expected page (maxUnavailable 1, new pods never ready).
#[test]
fn old_revision_pod_still_ready() {
    let mut w = serving();
    *w.deployment() = deployment("web", 3, 1, 3, 3, 4);
    w.pods[0] = rs_pod("web-new-a", "web", "new", false);
    w.pods.push(rs_pod("web-old-x", "web", "old", true));
    add_endpoint(&mut w, "web-old-x", (Some(true), None, None), BODY);
    w.slices[0] = slice(
        "web-abcde",
        "web",
        &[(Some(8080), None)],
        &[
            ("10.0.0.1", Some("web-new-a"), Some(false), None, None),
            ("10.0.0.2", Some("web-new-b"), Some(true), None, None),
            ("10.0.0.3", Some("web-new-c"), Some(true), None, None),
        ],
    );
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending);
    assert_eq!(
        conditions(&v),
        [Condition::WorkloadReplicas, Condition::OldRevisionServing]
    );
    assert_eq!(v.unmet[0].subject, "Deployment shop/web");
    assert_eq!(
        v.unmet[0].want,
        "3 updated ready available replicas of revision 2 (new), and no other"
    );
    assert_eq!(
        v.unmet[0].found,
        "1 updated, 3 ready, 3 available, 4 in total; pod web-old-x of revision 1 (old) ready"
    );
    assert_eq!(v.unmet[1].found, "pod web-old-x of revision 1 (old) ready");
    let old = v
        .endpoints
        .iter()
        .find(|e| e.endpoint.pod.as_deref() == Some("web-old-x"))
        .unwrap();
    assert_eq!(old.revision.as_deref(), Some("old"));
    assert!(!old.newest_revision);
    assert!(
        old.matched,
        "it serves the right page: only its revision gives it away"
    );
}

/// The counters can be right while an old pod is ready (its ReplicaSet being scaled down):
/// the pod itself is named.
#[test]
fn old_revision_pod_ready_with_perfect_counters() {
    let mut w = serving();
    w.pods.push(rs_pod("web-old-x", "web", "old", true));
    let v = w.decide();
    assert_eq!(conditions(&v), [Condition::OldRevisionServing]);
}

/// Trap 2: right after the sync Argo CD's health is from before it.
#[test]
fn stale_healthy_right_after_the_sync() {
    let mut w = serving();
    w.status().reconciled_at = Some(ts(3));
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending);
    assert_eq!(conditions(&v), [Condition::Fresh]);
    assert_eq!(
        v.unmet[0].found,
        format!("reconciledAt {} before finishedAt {}", t(3), t(5))
    );
    assert!(causes(&v).contains(
        "Argo CD has not reconciled since the sync finished: its Healthy is from before the rollout"
    ));
}

#[rstest]
#[case::missing(None, "no status.reconciledAt")]
#[case::garbage(
    Some("yesterday"),
    "status.reconciledAt \"yesterday\" is not a timestamp"
)]
fn reconciled_at_missing_or_unreadable_is_not_fresh(#[case] at: Option<&str>, #[case] found: &str) {
    let mut w = serving();
    w.status().reconciled_at = at.map(str::to_string);
    let v = w.decide();
    assert_eq!(conditions(&v), [Condition::Fresh]);
    assert_eq!(v.unmet[0].found, found);
}

fn on_delete_world(update_revision_pods: bool) -> World {
    let mut w = serving();
    w.app = Some(application(&[
        ("apps", "StatefulSet", "db"),
        ("", "Service", "db"),
    ]));
    w.deployments.clear();
    w.replica_sets.clear();
    let rev = if update_revision_pods {
        "db-v2"
    } else {
        "db-v1"
    };
    w.stateful_sets = vec![StatefulSet {
        metadata: ObjectMeta {
            generation: Some(2),
            ..meta("db")
        },
        spec: Some(StatefulSetSpec {
            replicas: Some(2),
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some("OnDelete".into()),
                rolling_update: None,
            }),
            ..Default::default()
        }),
        status: Some(StatefulSetStatus {
            observed_generation: Some(2),
            replicas: 2,
            ready_replicas: Some(2),
            current_replicas: Some(if update_revision_pods { 0 } else { 2 }),
            updated_replicas: Some(if update_revision_pods { 2 } else { 0 }),
            current_revision: Some("db-v1".into()),
            update_revision: Some("db-v2".into()),
            ..Default::default()
        }),
    }];
    w.pods = (0..2)
        .map(|i| Pod {
            metadata: ObjectMeta {
                labels: labels(&[("app", "db"), ("controller-revision-hash", rev)]),
                owner_references: Some(vec![owner("StatefulSet", "db")]),
                ..meta(&format!("db-{i}"))
            },
            spec: None,
            status: ready_condition(true),
        })
        .collect();
    w.slices = vec![slice(
        "db-xyz",
        "db",
        &[(Some(8080), None)],
        &[
            ("10.0.1.1", Some("db-0"), Some(true), None, None),
            ("10.0.1.2", Some("db-1"), Some(true), None, None),
        ],
    )];
    let served = if update_revision_pods { BODY } else { OLD_BODY };
    w.probes = [("db-0", "10.0.1.1"), ("db-1", "10.0.1.2")]
        .iter()
        .map(|(p, ip)| (key("db", Some(p), ip), answer(20, 200, served)))
        .collect();
    w
}

/// Trap 3: updateStrategy OnDelete; Argo CD says Healthy (ready replicas reached), every pod
/// still at the old revision.
#[test]
fn statefulset_on_delete_keeps_the_old_revision() {
    let v = on_delete_world(false).decide();
    assert_eq!(v.decision, Decision::Pending);
    assert_eq!(
        conditions(&v),
        [
            Condition::WorkloadRevision,
            Condition::OldRevisionServing,
            Condition::EndpointAnswers,
            Condition::EndpointAnswers
        ]
    );
    assert_eq!(v.unmet[0].subject, "StatefulSet shop/db");
    assert_eq!(
        v.unmet[0].found,
        "currentRevision db-v1, updateRevision db-v2, 0 of 2 updated; pod db-0 at db-v1, pod db-1 at db-v1"
    );
    assert!(causes(&v).contains(
        "StatefulSet shop/db has updateStrategy OnDelete: pods keep the old revision until deleted"
    ));
    assert!(v
        .endpoints
        .iter()
        .all(|e| e.revision.as_deref() == Some("db-v1") && !e.newest_revision));
}

/// Once its pods are deleted by hand they come back at updateRevision: approved although
/// currentRevision never advances under OnDelete (kubernetes#106055).
#[test]
fn statefulset_on_delete_with_every_pod_updated_is_approved() {
    let v = on_delete_world(true).decide();
    assert_eq!(v.decision, Decision::Approved, "{}", v.render_text());
}

/// A partitioned rolling update: the pods below the partition keep the old revision.
#[test]
fn statefulset_partition_names_the_partition() {
    let mut w = on_delete_world(false);
    let spec = w.stateful_sets[0].spec.as_mut().unwrap();
    spec.update_strategy = Some(StatefulSetUpdateStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateStatefulSetStrategy {
            partition: Some(2),
            max_unavailable: None,
        }),
    });
    let v = w.decide();
    assert!(conditions(&v).contains(&Condition::WorkloadRevision));
    assert!(causes(&v).contains("rolling-update partition of 2"));
}

/// Trap 5: back at a known-bad release whose ReplicaSet still exists: the Deployment reuses
/// it, its pods never get ready and Kubernetes arms no progress deadline, so Argo CD stays
/// Progressing and only the gate's deadline ends it.
fn rollback_world() -> World {
    let mut w = serving();
    w.status().health = Some(HealthStatus {
        status: Some("Progressing".into()),
        message: Some(
            "Waiting for rollout to finish: 0 of 3 updated replicas are available...".into(),
        ),
    });
    let mut bad = replica_set("web", "bad", 3);
    bad.metadata.annotations.as_mut().unwrap().insert(
        "deployment.kubernetes.io/revision-history".into(),
        "1".into(),
    );
    w.replica_sets = vec![replica_set("web", "new", 2), bad];
    *w.deployment() = deployment("web", 3, 3, 0, 0, 3);
    w.pods = ["a", "b", "c"]
        .iter()
        .map(|s| rs_pod(&format!("web-bad-{s}"), "web", "bad", false))
        .collect();
    w.slices = vec![slice(
        "web-abcde",
        "web",
        &[(Some(8080), None)],
        &[
            (
                "10.0.0.1",
                Some("web-bad-a"),
                Some(false),
                Some(false),
                None,
            ),
            (
                "10.0.0.2",
                Some("web-bad-b"),
                Some(false),
                Some(false),
                None,
            ),
        ],
    )];
    w.probes.clear();
    w
}

#[test]
fn rollback_to_a_bad_replica_set_waits_then_the_deadline_rejects() {
    let mut w = rollback_world();
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending);
    assert_eq!(
        conditions(&v),
        [
            Condition::HealthStatus,
            Condition::WorkloadReplicas,
            Condition::AtLeastOneEndpoint
        ]
    );
    assert!(
        causes(&v).contains("kubernetes/kubernetes#106054"),
        "{}",
        causes(&v)
    );
    w.now = 301;
    let v = w.decide();
    assert_eq!(v.decision, Decision::Rejected);
    assert_eq!(conditions(&v).last(), Some(&Condition::Deadline));
    let deadline = v.unmet.last().unwrap();
    assert_eq!(deadline.subject, "Application argocd/shop");
    assert!(
        deadline
            .found
            .starts_with("pending: health_status Application argocd/shop: Progressing"),
        "{}",
        deadline.found
    );
    assert!(causes(&v).contains("did not converge by the gate's deadline"));
}

/// The same rollback when the bad ReplicaSet's pods do get ready but serve the bad page.
#[test]
fn rollback_to_a_replica_set_serving_bad_content() {
    let mut w = serving();
    for p in w.probes.values_mut() {
        *p = answer(20, 200, "shop r3: broken");
    }
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending);
    assert_eq!(conditions(&v), [Condition::EndpointAnswers; 3]);
    assert!(causes(&v)
        .contains("endpoint serves other content: wrong image or config in the new revision"));
    assert!(v.endpoints.iter().all(|e| !e.matched));
}

/// 200 with the wrong body: the live body is named (cut to 120 characters).
#[test]
fn ok_with_the_wrong_body() {
    let mut w = serving();
    let long = "x".repeat(500);
    w.probes.insert(
        key("web", Some("web-new-b"), "10.0.0.2"),
        answer(20, 200, &long),
    );
    let v = w.decide();
    assert_eq!(conditions(&v), [Condition::EndpointAnswers]);
    let u = &v.unmet[0];
    assert_eq!(
        u.subject,
        "endpoint 10.0.0.2:8080 (pod web-new-b) of Service shop/web"
    );
    assert_eq!(u.found, format!("HTTP 200 \"{}…\"", "x".repeat(120)));
    assert!(u.want.contains("body == \"shop r2\""));
}

#[rstest]
#[case::older_than_max_age(answer(14, 200, BODY), 25, "the last answer is 11.0s old")]
#[case::before_the_gate_started(answer(-1, 200, BODY), 5, "only an answer from before the gate started")]
#[case::server_error(
    answer(20, 503, "no endpoints available for service"),
    25,
    "HTTP 503 \"no endpoints available for service\""
)]
#[case::transport_error(ProbeAnswer { at: t(20), code: None, body: None, error: Some("connection refused".into()) }, 25, "no answer: connection refused")]
fn answers_that_do_not_count(#[case] a: ProbeAnswer, #[case] now: i64, #[case] found: &str) {
    let mut w = serving();
    w.now = now;
    // The other endpoints answered just now (fresh whatever `now` is).
    for p in w.probes.values_mut() {
        *p = answer(now, 200, BODY);
    }
    w.probes
        .insert(key("web", Some("web-new-c"), "10.0.0.3"), a);
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending);
    assert_eq!(conditions(&v), [Condition::EndpointAnswers]);
    assert!(v.unmet[0].found.starts_with(found), "{}", v.unmet[0].found);
}

#[test]
fn an_endpoint_never_probed_is_unmet() {
    let mut w = serving();
    w.probes.remove(&key("web", Some("web-new-a"), "10.0.0.1"));
    let v = w.decide();
    assert_eq!(conditions(&v), [Condition::EndpointAnswers]);
    assert_eq!(v.unmet[0].found, "no answer yet");
}

/// An old pod on its way out: not ready any more, but the slice still routes to it (serving,
/// terminating) and it answers the old page.
#[test]
fn terminating_but_serving_old_revision() {
    let mut w = serving();
    w.pods.push(rs_pod("web-old-x", "web", "old", false));
    add_endpoint(
        &mut w,
        "web-old-x",
        (Some(false), Some(true), Some(true)),
        OLD_BODY,
    );
    let eps = decide::endpoints(&w.objects());
    let old = eps
        .iter()
        .find(|e| e.key.pod.as_deref() == Some("web-old-x"))
        .unwrap();
    assert!(!old.ready && old.serving && old.terminating);
    let v = w.decide();
    assert_eq!(
        conditions(&v),
        [Condition::OldRevisionServing, Condition::EndpointAnswers]
    );
    assert_eq!(
        v.unmet[0].found,
        "pod web-old-x of revision old is terminating but still serving"
    );
    let report = v
        .endpoints
        .iter()
        .find(|e| e.endpoint.pod.as_deref() == Some("web-old-x"))
        .unwrap();
    assert!(report.terminating && !report.newest_revision);
}

#[test]
fn no_service_is_never_approved() {
    let mut w = serving();
    w.app = Some(application(&[("apps", "Deployment", "web")]));
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending);
    assert_eq!(conditions(&v), [Condition::AtLeastOneEndpoint]);
    assert_eq!(
        v.unmet[0].found,
        "the Application lists no Service: nothing to probe"
    );
    assert!(v.endpoints.is_empty());
}

#[test]
fn a_service_with_no_ready_endpoint_is_unmet() {
    let mut w = serving();
    w.slices.clear();
    let v = w.decide();
    assert_eq!(conditions(&v), [Condition::AtLeastOneEndpoint]);
    assert_eq!(
        v.unmet[0].found,
        "no ready or serving endpoint behind Service shop/web"
    );
}

// ---- Argo CD's side, one condition at a time

#[test]
fn degraded_at_the_sha_after_the_sync_is_final() {
    let mut w = serving();
    w.status().health = Some(HealthStatus {
        status: Some("Degraded".into()),
        message: Some("Deployment \"web\" exceeded its progress deadline".into()),
    });
    let v = w.decide();
    assert_eq!(v.decision, Decision::Rejected);
    assert_eq!(conditions(&v), [Condition::HealthStatus]);
    assert!(causes(&v).contains("exceeded its progress deadline"));
}

/// A Degraded from before the sync (not reconciled since) must not reject the new release.
#[test]
fn stale_degraded_is_not_final() {
    let mut w = serving();
    w.status().health = Some(HealthStatus {
        status: Some("Degraded".into()),
        message: None,
    });
    w.status().reconciled_at = Some(ts(3));
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending);
    assert_eq!(conditions(&v), [Condition::HealthStatus, Condition::Fresh]);
}

/// Seen on a cluster: right after the sync to the SHA, Argo CD still said Degraded (the release
/// before) with OutOfSync, or Synced in the very second the operation finished; a second
/// later it said Healthy. Neither is final.
#[rstest]
#[case::out_of_sync_same_second("OutOfSync", 5)]
#[case::out_of_sync_later("OutOfSync", 10)]
#[case::synced_same_second("Synced", 5)]
fn degraded_in_the_syncs_own_second_or_out_of_sync_is_not_final(
    #[case] sync: &str,
    #[case] reconciled: i64,
) {
    let mut w = serving();
    w.status().health = Some(HealthStatus {
        status: Some("Degraded".into()),
        message: None,
    });
    w.status().sync.as_mut().unwrap().status = Some(sync.into());
    w.status().reconciled_at = Some(ts(reconciled));
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending, "{}", v.render_text());
    assert!(conditions(&v).contains(&Condition::HealthStatus));
}

#[rstest]
#[case::failed("Failed", SHA, Decision::Rejected)]
#[case::error("Error", SHA, Decision::Rejected)]
#[case::failed_elsewhere("Failed", OLD_SHA, Decision::Pending)]
#[case::running("Running", SHA, Decision::Pending)]
#[case::terminating("Terminating", SHA, Decision::Pending)]
fn operation_phase(#[case] phase: &str, #[case] at: &str, #[case] decision: Decision) {
    let mut w = serving();
    let op = w.status().operation_state.as_mut().unwrap();
    op.phase = Some(phase.into());
    op.message = Some("one or more objects failed to apply".into());
    op.sync_result.as_mut().unwrap().revision = Some(at.into());
    let v = w.decide();
    assert_eq!(v.decision, decision, "{}", v.render_text());
    assert!(conditions(&v).contains(&Condition::OperationPhase));
    assert_eq!(
        conditions(&v).contains(&Condition::OperationRevision),
        at != SHA
    );
}

// ---- hook mode: the gate as a PostSync hook Job, inside the sync operation to the SHA

/// What a PostSync hook sees of the release that serves: the operation to the SHA still
/// Running (started at 1 s, no finishedAt; Argo CD waits on the hook), Synced + Healthy at the
/// SHA from a reconciliation after the operation started, every endpoint serving.
fn hook_world() -> World {
    let mut w = serving();
    w.in_operation = true;
    let op = w.status().operation_state.as_mut().unwrap();
    op.phase = Some("Running".into());
    op.message = Some("waiting for completion of hook batch/Job/shop-gate".into());
    op.finished_at = None;
    w
}

#[test]
fn hook_running_at_the_sha_with_everything_serving_is_approved() {
    let v = hook_world().decide();
    assert_eq!(v.decision, Decision::Approved, "{}", v.render_text());
    assert!(v.unmet.is_empty() && v.likely_causes.is_empty());
}

/// The deadlock this mode removes: the same state without hook mode waits on the operation,
/// which cannot end before the hook does (existing behaviour, unchanged).
#[test]
fn without_hook_mode_a_running_operation_stays_pending() {
    let mut w = hook_world();
    w.in_operation = false;
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending, "{}", v.render_text());
    assert_eq!(conditions(&v), [Condition::OperationPhase]);
    assert_eq!(v.unmet[0].want, "operation Succeeded");
    assert_eq!(
        v.unmet[0].found,
        "Running: waiting for completion of hook batch/Job/shop-gate"
    );
    w.now = 301;
    for a in w.probes.values_mut() {
        a.at = t(300);
    }
    assert_eq!(w.decide().decision, Decision::Rejected);
}

/// The operation in hook mode, one state at a time: (phase, syncResult.revision,
/// operation.sync.revision) -> decision and whether OperationRevision is unmet. Another
/// revision than the SHA, from either field, is never approved: final, since the hook's own
/// operation is then over (or the SHA given is not its revision).
#[rstest]
#[case::running_at_the_sha("Running", Some(SHA), Some(SHA), Decision::Approved, false)]
#[case::running_manual_sync_of_a_branch(
    "Running",
    Some(SHA),
    Some("main"),
    Decision::Approved,
    false
)]
#[case::running_asked_sha_no_result_yet("Running", None, Some(SHA), Decision::Approved, false)]
#[case::running_at_another_revision(
    "Running",
    Some(OLD_SHA),
    Some(OLD_SHA),
    Decision::Rejected,
    true
)]
#[case::running_result_elsewhere("Running", Some(OLD_SHA), Some(SHA), Decision::Rejected, true)]
#[case::running_asked_elsewhere("Running", Some(SHA), Some(OLD_SHA), Decision::Rejected, true)]
#[case::running_branch_no_result_yet("Running", None, Some("main"), Decision::Pending, true)]
#[case::succeeded_at_the_sha("Succeeded", Some(SHA), Some(SHA), Decision::Approved, false)]
#[case::succeeded_elsewhere("Succeeded", Some(OLD_SHA), Some(OLD_SHA), Decision::Rejected, true)]
#[case::failed_at_the_sha("Failed", Some(SHA), Some(SHA), Decision::Rejected, false)]
#[case::error_at_the_sha("Error", Some(SHA), Some(SHA), Decision::Rejected, false)]
#[case::failed_elsewhere("Failed", Some(OLD_SHA), Some(OLD_SHA), Decision::Rejected, true)]
#[case::terminating_at_the_sha("Terminating", Some(SHA), Some(SHA), Decision::Pending, false)]
fn hook_operation(
    #[case] phase: &str,
    #[case] result: Option<&str>,
    #[case] asked: Option<&str>,
    #[case] decision: Decision,
    #[case] revision_unmet: bool,
) {
    let mut w = hook_world();
    let op = w.status().operation_state.as_mut().unwrap();
    op.phase = Some(phase.into());
    if phase != "Running" {
        op.finished_at = Some(ts(5));
    }
    op.sync_result = result.map(|r| SyncResult {
        revision: Some(r.into()),
        revisions: None,
    });
    op.operation = Some(Operation {
        sync: Some(SyncOperation {
            revision: asked.map(str::to_string),
        }),
    });
    let v = w.decide();
    assert_eq!(v.decision, decision, "{}", v.render_text());
    assert_eq!(
        conditions(&v).contains(&Condition::OperationRevision),
        revision_unmet,
        "{}",
        v.render_text()
    );
    if revision_unmet && decision == Decision::Rejected {
        assert!(
            causes(&v).contains("hook mode: the sync operation is for 4c29f623ecb8")
                && causes(&v)
                    .contains("a hook never approves another revision than its operation's"),
            "{}",
            causes(&v)
        );
    }
}

/// The Application compared at another revision while the operation is at the SHA: not
/// approved (SyncRevision unchanged by hook mode).
#[test]
fn hook_with_the_application_compared_at_another_revision_is_not_approved() {
    let mut w = hook_world();
    w.status().sync.as_mut().unwrap().revision = Some(OLD_SHA.into());
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending);
    assert_eq!(conditions(&v), [Condition::SyncRevision]);
}

/// A hook with no operation to be inside of: unmet, named.
#[test]
fn hook_without_an_operation_is_not_approved() {
    let mut w = hook_world();
    w.status().operation_state = None;
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending);
    assert_eq!(conditions(&v), [Condition::OperationPhase]);
    assert_eq!(v.unmet[0].found, "no operationState");
}

/// Inside its own Running operation the hook needs no reconciliation since the sync started:
/// measured on kind (Argo CD v3.5.2), `reconciledAt` stays at its value from before the sync
/// until the operation ends, so requiring one deadlocked the hook until its timeout. Argo CD
/// starts PostSync only after its own health check of this operation's resources, and the
/// gate's live workload and endpoint checks decide the rest.
#[rstest]
#[case::reconciled_before_the_start(Some(ts(0)), Some(ts(1)))]
#[case::reconciled_after_the_start(Some(ts(10)), Some(ts(1)))]
#[case::no_started_at(Some(ts(10)), None)]
#[case::no_reconciled_at(None, Some(ts(1)))]
fn hook_inside_its_running_operation_needs_no_reconciliation_since_the_start(
    #[case] reconciled: Option<String>,
    #[case] started: Option<String>,
) {
    let mut w = hook_world();
    w.status().reconciled_at = reconciled;
    w.status().operation_state.as_mut().unwrap().started_at = started;
    let v = w.decide();
    assert_eq!(v.decision, Decision::Approved, "{}", v.render_text());
}

/// Once the hook's operation has finished (the gate outlived it), freshness is against its
/// finishedAt again: a reconciliation between start and finish is not enough.
#[test]
fn hook_after_the_operation_finished_is_fresh_against_finished_at() {
    let mut w = hook_world();
    let op = w.status().operation_state.as_mut().unwrap();
    op.phase = Some("Succeeded".into());
    op.finished_at = Some(ts(12));
    let v = w.decide();
    assert_eq!(conditions(&v), [Condition::Fresh]);
    assert_eq!(
        v.unmet[0].found,
        format!("reconciledAt {} before finishedAt {}", t(10), t(12))
    );
}

/// Argo CD starts the hook once its resources are Healthy, but Healthy does not look at what
/// serves: a stray pod or a serving old-revision pod behind the Service keeps the hook from
/// approving, and at the gate's deadline it rejects for that reason (the operation then fails).
#[rstest]
#[case::stray_endpoint(Condition::StrayEndpoint, "is owned by no workload of the Application")]
#[case::old_revision_endpoint(
    Condition::OldRevisionServing,
    "of an older revision of Deployment shop/web is still serving"
)]
fn hook_rejects_a_release_that_does_not_serve_at_the_deadline(
    #[case] condition: Condition,
    #[case] cause: &str,
) {
    let mut w = hook_world();
    if condition == Condition::StrayEndpoint {
        w.pods.push(stray_pod("web-stray"));
        add_endpoint(&mut w, "web-stray", (Some(true), None, None), OLD_BODY);
    } else {
        w.pods.push(rs_pod("web-old-x", "web", "old", false));
        add_endpoint(
            &mut w,
            "web-old-x",
            (Some(false), Some(true), Some(true)),
            OLD_BODY,
        );
    }
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending, "{}", v.render_text());
    assert!(conditions(&v).contains(&condition));
    w.now = 301;
    for a in w.probes.values_mut() {
        a.at = t(300);
    }
    let v = w.decide();
    assert_eq!(v.decision, Decision::Rejected, "{}", v.render_text());
    let c = conditions(&v);
    assert!(c.contains(&condition), "{c:?}");
    assert_eq!(c.last(), Some(&Condition::Deadline));
    assert!(
        !c.iter().any(|c| matches!(
            c,
            Condition::OperationRevision | Condition::OperationPhase | Condition::Fresh
        )),
        "the hook's own operation is not what blocks it: {c:?}"
    );
    assert!(causes(&v).contains(cause), "{}", causes(&v));
    assert!(causes(&v).contains("did not converge by the gate's deadline"));
}

#[test]
fn another_revision_is_pending() {
    let mut w = serving();
    w.status().sync.as_mut().unwrap().revision = Some(OLD_SHA.into());
    w.status().sync.as_mut().unwrap().status = Some("OutOfSync".into());
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending);
    assert_eq!(
        conditions(&v),
        [Condition::SyncRevision, Condition::SyncStatus]
    );
    assert_eq!(v.unmet[0].found, OLD_SHA);
    assert_eq!(v.unmet[1].found, "OutOfSync");
}

/// A multi-source Application carries one revision per source.
#[test]
fn multi_source_revisions() {
    let mut w = serving();
    let st = w.status();
    st.sync.as_mut().unwrap().revision = None;
    st.sync.as_mut().unwrap().revisions = Some(vec![OLD_SHA.into(), SHA.into()]);
    let r = st
        .operation_state
        .as_mut()
        .unwrap()
        .sync_result
        .as_mut()
        .unwrap();
    r.revision = None;
    r.revisions = Some(vec![OLD_SHA.into(), SHA.into()]);
    assert_eq!(w.decide().decision, Decision::Approved);
}

#[test]
fn comparison_error_is_named() {
    let mut w = serving();
    w.status().conditions = Some(vec![
        AppCondition {
            type_: Some("ComparisonError".into()),
            message: Some("rpc error: repository not accessible".into()),
            last_transition_time: None,
        },
        AppCondition {
            type_: Some("OrphanedResourceWarning".into()),
            message: Some("a warning is not an error".into()),
            last_transition_time: None,
        },
    ]);
    let v = w.decide();
    assert_eq!(conditions(&v), [Condition::NoSpecErrors]);
    assert_eq!(
        v.unmet[0].found,
        "ComparisonError: rpc error: repository not accessible"
    );
}

#[test]
fn a_missing_application_is_pending() {
    let mut w = serving();
    w.app = None;
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending);
    assert_eq!(conditions(&v), [Condition::ApplicationExists]);
    assert!(v.endpoints.is_empty());
}

// ---- workloads

#[test]
fn paused_deployment_never_approves() {
    let mut w = serving();
    w.deployment().spec.as_mut().unwrap().paused = Some(true);
    let v = w.decide();
    assert_eq!(conditions(&v), [Condition::WorkloadPaused]);
    assert!(causes(&v).contains("paused"));
}

#[test]
fn unobserved_generation() {
    let mut w = serving();
    w.deployment().metadata.generation = Some(3);
    let v = w.decide();
    assert_eq!(conditions(&v), [Condition::WorkloadGeneration]);
    assert_eq!(v.unmet[0].found, "observedGeneration 2");
}

#[test]
fn listed_workload_absent_is_named() {
    let mut w = serving();
    w.app = Some(application(&[
        ("apps", "Deployment", "web"),
        ("apps", "Deployment", "worker"),
        ("", "Service", "web"),
    ]));
    let v = w.decide();
    assert_eq!(conditions(&v), [Condition::WorkloadExists]);
    assert_eq!(v.unmet[0].subject, "Deployment shop/worker");
}

#[test]
fn daemon_set_pod_of_an_older_generation() {
    let ds = DaemonSet {
        metadata: ObjectMeta {
            generation: Some(4),
            ..meta("agent")
        },
        spec: None,
        status: Some(DaemonSetStatus {
            observed_generation: Some(4),
            desired_number_scheduled: 2,
            updated_number_scheduled: Some(2),
            number_available: Some(2),
            number_ready: 2,
            ..Default::default()
        }),
    };
    let pod = |name: &str, generation: &str| Pod {
        metadata: ObjectMeta {
            labels: labels(&[("pod-template-generation", generation)]),
            owner_references: Some(vec![owner("DaemonSet", "agent")]),
            ..meta(name)
        },
        spec: None,
        status: ready_condition(true),
    };
    let objects = Objects {
        daemon_sets: vec![Arc::new(ds)],
        pods: vec![Arc::new(pod("agent-a", "4")), Arc::new(pod("agent-b", "3"))],
        ..Default::default()
    };
    let r = WorkloadRef {
        kind: WorkloadKind::DaemonSet,
        namespace: NS.into(),
        name: "agent".into(),
    };
    let c = workloads::check(&r, &objects);
    let found: Vec<Condition> = c.unmet.iter().map(|u| u.condition).collect();
    assert_eq!(
        found,
        [Condition::WorkloadRevision, Condition::OldRevisionServing]
    );
    assert_eq!(c.pods.iter().filter(|p| p.newest).count(), 1);
}

#[test]
fn bare_pod_must_be_ready() {
    let p = Pod {
        status: ready_condition(false),
        ..stray_pod("one")
    };
    let objects = Objects {
        pods: vec![Arc::new(p.clone())],
        ..Default::default()
    };
    let r = [WorkloadRef {
        kind: WorkloadKind::Pod,
        namespace: NS.into(),
        name: "one".into(),
    }];
    let c = workloads::check(&r[0], &objects);
    assert_eq!(c.unmet.len(), 1);
    assert_eq!(c.unmet[0].condition, Condition::WorkloadReplicas);
    assert_eq!(c.unmet[0].found, "Running, Ready False");
    assert_eq!(workloads::owner_of(&p, &r, &objects), Some(&r[0]));
}

#[test]
fn owner_of_follows_replica_sets_and_checks_uids() {
    let w = serving();
    let objects = w.objects();
    let wl = [WorkloadRef {
        kind: WorkloadKind::Deployment,
        namespace: NS.into(),
        name: "web".into(),
    }];
    assert_eq!(workloads::owner_of(&w.pods[0], &wl, &objects), Some(&wl[0]));
    assert_eq!(workloads::owner_of(&stray_pod("s"), &wl, &objects), None);
    // A ReplicaSet of a Deployment of the same name, deleted and recreated: not ours.
    let mut w2 = serving();
    w2.replica_sets[1]
        .metadata
        .owner_references
        .as_mut()
        .unwrap()[0]
        .uid = "uid-gone".into();
    assert_eq!(workloads::owner_of(&w2.pods[0], &wl, &w2.objects()), None);
    // Another Application's Deployment.
    let other = [WorkloadRef {
        kind: WorkloadKind::Deployment,
        namespace: NS.into(),
        name: "api".into(),
    }];
    assert_eq!(workloads::owner_of(&w.pods[0], &other, &objects), None);
}

// ---- endpoints

#[test]
fn endpoints_ports_conditions_and_order() {
    let mut w = serving();
    w.slices = vec![
        slice(
            "web-2",
            "web",
            &[
                (Some(8080), None),
                (Some(9090), Some("TCP")),
                (Some(53), Some("UDP")),
                (None, None),
            ],
            &[
                ("10.0.0.2", Some("web-new-b"), None, None, None),
                (
                    "10.0.0.1",
                    Some("web-new-a"),
                    Some(false),
                    Some(false),
                    None,
                ),
            ],
        ),
        // The same address from a second slice (a split in progress): merged.
        slice(
            "web-1",
            "web",
            &[(Some(8080), None)],
            &[(
                "10.0.0.2",
                Some("web-new-b"),
                Some(false),
                Some(true),
                Some(true),
            )],
        ),
        // A Service the Application does not list.
        slice(
            "other-1",
            "other",
            &[(Some(8080), None)],
            &[("10.0.9.9", None, None, None, None)],
        ),
    ];
    let eps = decide::endpoints(&w.objects());
    let got: Vec<(String, u16, bool, bool, bool)> = eps
        .iter()
        .map(|e| {
            (
                e.key.ip.clone(),
                e.key.port,
                e.ready,
                e.serving,
                e.terminating,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("10.0.0.2".to_string(), 8080, true, true, true),
            ("10.0.0.2".to_string(), 9090, true, true, false),
        ]
    );
}

// ---- lie window, --once, metrics

#[test]
fn lie_window_counts_from_the_previous_state() {
    let mut l = LieWindow::default();
    l.observe(t(0), true, false, false); // recorded only
    l.observe(t(10), true, true, false); // [0,10]: synced lie
    l.observe(t(15), false, false, true); // [10,15]: both lies
    l.observe(t(40), true, true, true); // [15,40]: none
    l.observe(t(30), true, true, false); // clock back: nothing added, the state taken
    l.observe(t(42), true, true, false); // [40,42]: both (the state seen at "30")
    l.observe(t(45), false, false, true); // [42,45]: both
    l.observe(t(50), true, true, true); // [45,50]: none
    assert_eq!(l.synced_not_serving_seconds, 10.0 + 5.0 + 2.0 + 3.0);
    assert_eq!(l.healthy_not_serving_seconds, 5.0 + 2.0 + 3.0);
}

#[test]
fn once_turns_pending_into_a_named_rejection() {
    let mut w = serving();
    w.status().reconciled_at = Some(ts(3));
    let mut v = w.decide();
    assert_eq!(v.decision, Decision::Pending);
    v.reject_unapproved("approved in one snapshot (--once)");
    assert_eq!(v.decision, Decision::Rejected);
    let u = v.unmet.last().unwrap();
    assert_eq!(u.condition, Condition::Deadline);
    assert_eq!(u.want, "approved in one snapshot (--once)");
    assert!(u
        .found
        .starts_with("pending: fresh Application argocd/shop: reconciledAt"));
    let mut ok = serving().decide();
    ok.reject_unapproved("approved in one snapshot (--once)");
    assert_eq!(ok.decision, Decision::Approved);
    assert!(ok.unmet.is_empty());
}

#[rstest]
#[case("plain", "plain")]
#[case("a\\b", "a\\\\b")]
#[case("say \"hi\"", "say \\\"hi\\\"")]
#[case("two\nlines", "two\\nlines")]
fn label_escaping(#[case] raw: &str, #[case] escaped: &str) {
    assert_eq!(escape_label(raw), escaped);
}

/// Past the deadline: a stray pod serving the old page, health not fresh, one endpoint
/// answering 500.
fn rejected_verdict(application: &str) -> Verdict {
    let mut w = serving();
    w.pods.push(stray_pod("web-stray"));
    add_endpoint(&mut w, "web-stray", (Some(true), None, None), OLD_BODY);
    w.status().reconciled_at = Some(ts(3));
    for a in w.probes.values_mut() {
        a.at = t(295);
    }
    w.probes.insert(
        key("web", Some("web-new-c"), "10.0.0.3"),
        answer(296, 500, "<html><body>upstream failed</body></html>"),
    );
    w.now = 301;
    let mut l = LieWindow::default();
    l.observe(t(10), true, true, false);
    l.observe(t(301), true, false, false);
    let mut v = decide::decide(&w.request(), &w.objects(), &w.probes, t(w.now), &l);
    v.application = application.into();
    v
}

fn snapshots() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"));
    s.set_prepend_module_to_snapshot(false);
    s
}

#[test]
fn rejected_verdict_text() {
    let v = rejected_verdict("argocd/shop");
    assert_eq!(v.decision, Decision::Rejected);
    let text = v.render_text();
    assert!(text.starts_with("gate argocd/shop at 3b18e512dba7: REJECTED\nunmet:\n"));
    snapshots().bind(|| insta::assert_snapshot!("serving_rejected_verdict_text", text));
}

#[test]
fn rejected_verdict_openmetrics() {
    let v = rejected_verdict("argocd/shop \"quoted\"\nline");
    let text = openmetrics(&[v, serving().decide()]);
    assert!(text.ends_with("# EOF\n"));
    assert!(text.contains(
        "cnpe_gate_approved{application=\"argocd/shop \\\"quoted\\\"\\nline\",sha=\"3b18e512dba79e4c8300dd08aeb37f8e728b8dad\"} 0\n"
    ));
    assert!(text.contains("cnpe_gate_approved{application=\"argocd/shop\",sha=\"3b18e512dba79e4c8300dd08aeb37f8e728b8dad\"} 1\n"));
    assert!(text.contains(",condition=\"stray_endpoint\"} 1\n"));
    snapshots().bind(|| insta::assert_snapshot!("serving_rejected_verdict_openmetrics", text));
}

// ---- properties

/// What one random endpoint is.
#[derive(Debug, Clone, Copy)]
enum Who {
    Newest,
    Old,
    Stray,
}

#[derive(Debug, Clone, Copy)]
enum Said {
    Nothing,
    BeforeStart,
    Stale,
    Match,
    WrongBody,
    ServerError,
    Refused,
}

fn who() -> impl Strategy<Value = Who> {
    prop_oneof![Just(Who::Newest), Just(Who::Old), Just(Who::Stray)]
}

fn said() -> impl Strategy<Value = Said> {
    prop_oneof![
        1 => Just(Said::Nothing),
        1 => Just(Said::BeforeStart),
        1 => Just(Said::Stale),
        4 => Just(Said::Match),
        1 => Just(Said::WrongBody),
        1 => Just(Said::ServerError),
        1 => Just(Said::Refused),
    ]
}

/// One random endpoint: whose pod, its slice `ready` and `serving`, `terminating`, and what
/// it answered.
type RandomEndpoint = (Who, Option<bool>, Option<bool>, bool, Said);

fn random_world(eps: &[RandomEndpoint]) -> World {
    let mut w = serving();
    w.pods.clear();
    w.probes.clear();
    let mut addrs: Vec<(String, String, Conds)> = Vec::new();
    for (i, (who, ready, serving, terminating, said)) in eps.iter().enumerate() {
        let name = format!("p{i}");
        let is_ready = ready.unwrap_or(true);
        w.pods.push(match who {
            Who::Newest => rs_pod(&name, "web", "new", is_ready),
            Who::Old => rs_pod(&name, "web", "old", is_ready),
            Who::Stray => Pod {
                status: ready_condition(is_ready),
                ..stray_pod(&name)
            },
        });
        let ip = format!("10.0.0.{}", i + 1);
        let a = match said {
            Said::Nothing => None,
            Said::BeforeStart => Some(answer(-5, 200, BODY)),
            Said::Stale => Some(answer(10, 200, BODY)),
            Said::Match => Some(answer(24, 200, BODY)),
            Said::WrongBody => Some(answer(24, 200, OLD_BODY)),
            Said::ServerError => Some(answer(24, 500, BODY)),
            Said::Refused => Some(ProbeAnswer {
                at: t(24),
                code: None,
                body: None,
                error: Some("refused".into()),
            }),
        };
        if let Some(a) = a {
            w.probes.insert(key("web", Some(&name), &ip), a);
        }
        addrs.push((ip, name, (*ready, *serving, Some(*terminating))));
    }
    let newest = eps.iter().filter(|e| matches!(e.0, Who::Newest)).count() as i32;
    *w.deployment() = deployment("web", newest, newest, newest, newest, newest);
    let refs: Vec<Addr> = addrs
        .iter()
        .map(|(ip, p, (r, s, t))| (ip.as_str(), Some(p.as_str()), *r, *s, *t))
        .collect();
    w.slices = vec![slice("web-rand", "web", &[(Some(8080), None)], &refs)];
    w
}

proptest! {
    /// Approved implies: nothing unmet, and every ready-or-serving endpoint is a pod the
    /// Application owns, of the newest revision, with a fresh matching 2xx answer. And the
    /// converse, so the property cannot hold vacuously.
    #[test]
    fn approved_means_every_endpoint_serves(
        eps in prop::collection::vec(
            (who(), prop::option::of(any::<bool>()), prop::option::of(any::<bool>()), any::<bool>(), said()),
            0..6,
        )
    ) {
        let w = random_world(&eps);
        let v = w.decide();
        prop_assert_eq!(v.decision == Decision::Approved, v.unmet.is_empty());
        prop_assert_ne!(v.decision, Decision::Rejected);
        let included: Vec<_> = eps
            .iter()
            .filter(|(_, r, s, _, _)| r.unwrap_or(true) || s.unwrap_or(r.unwrap_or(true)))
            .collect();
        prop_assert_eq!(v.endpoints.len(), included.len());
        let all_good = !included.is_empty()
            && included.iter().all(|(who, _, _, _, said)| matches!(who, Who::Newest) && matches!(said, Said::Match))
            && !eps.iter().any(|(who, r, _, _, _)| matches!(who, Who::Old) && r.unwrap_or(true));
        prop_assert_eq!(v.decision == Decision::Approved, all_good, "{}", v.render_text());
        if v.decision == Decision::Approved {
            for e in &v.endpoints {
                prop_assert!(e.owner.as_deref() == Some("Deployment shop/web"));
                prop_assert!(e.newest_revision);
                prop_assert!(e.matched);
                let a = e.answer.as_ref().unwrap();
                prop_assert!(a.at >= t(0) && t(25).duration_since(a.at).as_secs_f64() <= 10.0);
                prop_assert!(matches!(a.code, Some(200..=299)));
                prop_assert_eq!(a.body.as_deref(), Some(BODY));
            }
        }
    }

    /// Whatever strings Argo CD (or a broken controller) puts in the status, decide never
    /// panics, and approves only the exact good values.
    #[test]
    fn arbitrary_application_status_never_panics(
        sync in prop::option::of(".{0,12}"),
        health in prop::option::of(prop_oneof![Just("Healthy".to_string()), Just("Degraded".to_string()), ".{0,12}"]),
        phase in prop::option::of(prop_oneof![Just("Succeeded".to_string()), Just("Failed".to_string()), ".{0,12}"]),
        revision in prop::option::of(prop_oneof![Just(SHA.to_string()), ".{0,45}"]),
        reconciled in prop::option::of(prop_oneof![Just(ts(10)), Just(ts(2)), ".{0,30}"]),
        finished in prop::option::of(prop_oneof![Just(ts(5)), ".{0,30}"]),
        condition in prop::option::of(".{0,20}"),
        resource_kind in prop::option::of(".{0,12}"),
    ) {
        let mut w = serving();
        let st = w.status();
        st.sync.as_mut().unwrap().status = sync.clone();
        st.sync.as_mut().unwrap().revision = revision.clone();
        st.health.as_mut().unwrap().status = health.clone();
        let op = st.operation_state.as_mut().unwrap();
        op.phase = phase.clone();
        op.finished_at = finished;
        op.sync_result.as_mut().unwrap().revision = revision.clone();
        st.reconciled_at = reconciled;
        st.conditions = condition.map(|c| vec![AppCondition { type_: Some(c), message: Some("m\n\"".into()), last_transition_time: None }]);
        if let Some(k) = resource_kind {
            st.resources.as_mut().unwrap().push(ResourceStatus { kind: Some(k), name: Some("x".into()), ..Default::default() });
        }
        let v = w.decide();
        let _ = v.render_text();
        prop_assert!(openmetrics(std::slice::from_ref(&v)).ends_with("# EOF\n"));
        if v.decision == Decision::Approved {
            prop_assert_eq!(sync.as_deref(), Some("Synced"));
            prop_assert_eq!(health.as_deref(), Some("Healthy"));
            prop_assert_eq!(phase.as_deref(), Some("Succeeded"));
            prop_assert_eq!(revision.as_deref(), Some(SHA));
        }
    }
}

proptest! {
    /// Hook mode never approves another revision than the operation's, whatever the phase
    /// and the two revision fields say: approved implies the phase is Running or Succeeded,
    /// neither field names another revision, and one of them names the SHA.
    #[test]
    fn hook_never_approves_another_revision(
        phase in prop::option::of(prop_oneof![Just("Running".to_string()), Just("Succeeded".to_string()), Just("Failed".to_string()), Just("Terminating".to_string()), ".{0,12}"]),
        result in prop::option::of(prop_oneof![Just(SHA.to_string()), Just(OLD_SHA.to_string()), Just(String::new()), ".{0,45}"]),
        asked in prop::option::of(prop_oneof![Just(SHA.to_string()), Just(OLD_SHA.to_string()), Just("main".to_string()), ".{0,45}"]),
        finished in prop::option::of(Just(ts(5))),
    ) {
        let mut w = hook_world();
        let op = w.status().operation_state.as_mut().unwrap();
        op.phase = phase.clone();
        op.finished_at = finished;
        op.sync_result = Some(SyncResult { revision: result.clone(), revisions: None });
        op.operation = Some(Operation { sync: Some(SyncOperation { revision: asked.clone() }) });
        let v = w.decide();
        if v.decision == Decision::Approved {
            prop_assert!(matches!(phase.as_deref(), Some("Running" | "Succeeded")));
            let full_other = |r: &Option<String>| r.as_deref().is_some_and(|r| r != SHA && r.len() == 40 && r.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
            prop_assert!(!full_other(&asked), "asked {asked:?}");
            prop_assert!(result.as_deref().is_none_or(|r| r.is_empty() || r == SHA), "result {result:?}");
            prop_assert!(result.as_deref() == Some(SHA) || asked.as_deref() == Some(SHA));
        }
        if full_other_known(&result, &asked) {
            prop_assert_eq!(v.decision, Decision::Rejected);
        }
    }
}

/// Whether a hook's operation names another revision than SHA (result non-empty and not SHA,
/// or asked a full SHA that is not SHA).
fn full_other_known(result: &Option<String>, asked: &Option<String>) -> bool {
    let full = |r: &str| {
        r.len() == 40
            && r.chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    };
    result.as_deref().is_some_and(|r| !r.is_empty() && r != SHA)
        || asked.as_deref().is_some_and(|a| full(a) && a != SHA)
}

/// At the deadline, kubernetes#106054 is named only when Kubernetes reported no
/// ProgressDeadlineExceeded for the unfinished Deployment.
#[rstest]
#[case::no_progress_deadline(false, true)]
#[case::progress_deadline_exceeded(true, false)]
fn deadline_names_106054_only_without_a_progress_deadline(
    #[case] exceeded: bool,
    #[case] named: bool,
) {
    let mut w = serving();
    *w.deployment() = deployment("web", 3, 3, 2, 2, 3);
    if exceeded {
        w.deployment().status.as_mut().unwrap().conditions = Some(vec![DeploymentCondition {
            type_: "Progressing".into(),
            status: "False".into(),
            reason: Some("ProgressDeadlineExceeded".into()),
            ..Default::default()
        }]);
    }
    w.now = 301;
    for a in w.probes.values_mut() {
        a.at = t(300);
    }
    let v = w.decide();
    assert_eq!(v.decision, Decision::Rejected);
    assert_eq!(
        conditions(&v),
        [Condition::WorkloadReplicas, Condition::Deadline]
    );
    assert_eq!(
        causes(&v).contains("kubernetes/kubernetes#106054"),
        named,
        "{}",
        causes(&v)
    );
}

/// The lie window's "Argo CD says Synced/Healthy at the SHA" uses the decision's revision
/// rule: a multi-source Application names its SHA in `revisions`, and another SHA is not it.
#[test]
fn argo_says_uses_the_decisions_revision_rule() {
    use cnpe_lab::serving::decide::argo_says;
    let mut app = application(&[]);
    assert_eq!(argo_says(Some(&app), SHA), (true, true));
    assert_eq!(argo_says(None, SHA), (false, false));
    let sync = app.status.as_mut().unwrap().sync.as_mut().unwrap();
    sync.revision = None;
    sync.revisions = Some(vec!["0".repeat(40), SHA.into()]);
    assert_eq!(argo_says(Some(&app), SHA), (true, true));
    assert_eq!(argo_says(Some(&app), &"1".repeat(40)), (false, false));
    app.status.as_mut().unwrap().health.as_mut().unwrap().status = Some("Degraded".into());
    assert_eq!(argo_says(Some(&app), SHA), (true, false));
}

// ---- the lab's waits against the gate's decision, on the same objects
//
// The lab's "healthy at SHA" wait decides on its evidence (lab.md's table), the gate on the
// objects themselves. Every evidence field names the gate condition that decides the same fact
// (`Field::condition`); these hold the two against each other: on the lab's own world (one
// replica, targetRevision pinned), whatever the lab still waits for, the gate names too, and
// the lab's healthy is the gate's approval.

use cnpe_lab::observe::evidence::{derive, Evidence, HttpOutcome, LiveState, Subject};
use cnpe_lab::observe::predicates::{self as lab_wait, Field};

/// lab.md's release: Deployment web at one replica behind Service web, the Application's
/// targetRevision pinned to the SHA, the one endpoint answering the page.
fn lab_world() -> World {
    let mut w = serving();
    *w.deployment() = deployment("web", 1, 1, 1, 1, 1);
    w.pods.truncate(1);
    w.slices = vec![slice(
        "web-abcde",
        "web",
        &[(Some(8080), None)],
        &[("10.0.0.1", Some("web-new-a"), Some(true), None, None)],
    )];
    w.probes
        .retain(|k, _| k.pod.as_deref() == Some("web-new-a"));
    w.app.as_mut().unwrap().spec.source.target_revision = Some(SHA.into());
    w
}

/// The lab's evidence of the same objects: its Service answers what its one endpoint answers.
fn lab_evidence(w: &World) -> Evidence {
    let live = LiveState {
        application: w.app.clone(),
        deployment: w.deployments.first().cloned(),
        slices: w.slices.clone(),
    };
    let answer = w.probes.values().next().cloned().unwrap_or(ProbeAnswer {
        at: t(20),
        code: None,
        body: None,
        error: Some("connection refused".into()),
    });
    let subject = Subject {
        application: "shop".into(),
        namespace: NS.into(),
        deployment: "web".into(),
    };
    let http = HttpOutcome::of("http://web.shop/".into(), answer);
    derive(&subject, &live, &http, chrono::Utc::now())
}

/// One thing wrong with the lab's release, as the controllers would write it.
type Wrong = fn(&mut World);

const WRONGS: [(&str, Wrong); 9] = [
    ("health progressing", |w| {
        w.status().health.as_mut().unwrap().status = Some("Progressing".into())
    }),
    ("out of sync", |w| {
        w.status().sync.as_mut().unwrap().status = Some("OutOfSync".into())
    }),
    ("synced the old revision", |w| {
        w.status().sync.as_mut().unwrap().revision = Some(OLD_SHA.into())
    }),
    ("operation running", |w| {
        w.status().operation_state.as_mut().unwrap().phase = Some("Running".into())
    }),
    ("operation of the old revision", |w| {
        let op = w.status().operation_state.as_mut().unwrap();
        op.sync_result.as_mut().unwrap().revision = Some(OLD_SHA.into());
        op.operation = Some(Operation {
            sync: Some(SyncOperation {
                revision: Some(OLD_SHA.into()),
            }),
        });
    }),
    ("controller behind the spec", |w| {
        w.deployment().status.as_mut().unwrap().observed_generation = Some(1)
    }),
    ("nothing ready", |w| {
        *w.deployment() = deployment("web", 1, 1, 0, 0, 1);
        w.pods[0] = rs_pod("web-new-a", "web", "new", false);
        w.slices[0] = slice(
            "web-abcde",
            "web",
            &[(Some(8080), None)],
            &[("10.0.0.1", Some("web-new-a"), Some(false), None, None)],
        );
    }),
    ("answers 503", |w| {
        for a in w.probes.values_mut() {
            *a = answer(20, 503, "Service Unavailable");
        }
    }),
    ("answers the old page", |w| {
        for a in w.probes.values_mut() {
            *a = answer(20, 200, OLD_BODY);
        }
    }),
];

/// The gate conditions the lab's unmet fields name, and the fields the gate has no word for.
fn lab_unmet_as_gate_conditions(w: &World) -> (Vec<Condition>, Vec<Field>) {
    let ev = lab_evidence(w);
    let unmet = lab_wait::healthy(&ev, SHA, BODY);
    let mut conditions: Vec<Condition> = unmet.iter().filter_map(|u| u.what.condition()).collect();
    conditions.dedup();
    let unmapped = unmet
        .iter()
        .map(|u| u.what)
        .filter(|f| f.condition().is_none())
        .collect();
    (conditions, unmapped)
}

/// Whether the gate's unmet conditions name `lab`'s. With no endpoint ready the gate has no
/// answer to judge and says so (`AtLeastOneEndpoint`), where the lab's GET of the Service gets
/// the error or 503 that follows from it.
fn gate_names(gate: &[Condition], lab: Condition) -> bool {
    gate.contains(&lab)
        || (lab == Condition::EndpointAnswers && gate.contains(&Condition::AtLeastOneEndpoint))
}

#[test]
fn the_labs_healthy_release_is_the_gates_approved_release() {
    let w = lab_world();
    let unmet = lab_wait::healthy(&lab_evidence(&w), SHA, BODY);
    assert!(unmet.is_empty(), "the lab still waits for {unmet:?}");
    let v = w.decide();
    assert_eq!(v.decision, Decision::Approved, "{}", v.render_text());
}

#[rstest]
#[case::health_progressing(0, &[Condition::HealthStatus])]
#[case::out_of_sync(1, &[Condition::SyncStatus])]
#[case::synced_the_old_revision(2, &[Condition::SyncRevision])]
#[case::operation_running(3, &[Condition::OperationPhase])]
#[case::operation_of_the_old_revision(4, &[Condition::OperationRevision])]
#[case::controller_behind_the_spec(5, &[Condition::WorkloadGeneration])]
#[case::nothing_ready(6, &[Condition::WorkloadReplicas, Condition::AtLeastOneEndpoint])]
#[case::answers_503(7, &[Condition::EndpointAnswers])]
#[case::answers_the_old_page(8, &[Condition::EndpointAnswers])]
fn what_the_lab_waits_for_the_gate_names(#[case] wrong: usize, #[case] want: &[Condition]) {
    let mut w = lab_world();
    (WRONGS[wrong].1)(&mut w);
    let (lab, unmapped) = lab_unmet_as_gate_conditions(&w);
    assert_eq!(lab, want, "{}: the lab's unmet fields", WRONGS[wrong].0);
    assert!(unmapped.is_empty(), "{unmapped:?}");
    let v = w.decide();
    assert_ne!(v.decision, Decision::Approved, "{}", v.render_text());
    for c in want {
        assert!(
            gate_names(&conditions(&v), *c),
            "{}: the gate does not name {c:?}: {:?}",
            WRONGS[wrong].0,
            conditions(&v)
        );
    }
}

/// The lab's failed wait (lab.md's Synced outage) is the gate's final rejection on health.
#[test]
fn the_labs_synced_outage_is_the_gates_rejection() {
    let mut w = lab_world();
    (WRONGS[6].1)(&mut w);
    (WRONGS[7].1)(&mut w);
    w.status().health.as_mut().unwrap().status = Some("Degraded".into());
    w.deployment().status.as_mut().unwrap().conditions = Some(vec![DeploymentCondition {
        type_: "Progressing".into(),
        status: "False".into(),
        reason: Some("ProgressDeadlineExceeded".into()),
        ..Default::default()
    }]);
    let unmet = lab_wait::failed(&lab_evidence(&w), SHA);
    assert!(
        unmet.is_empty(),
        "the lab's failed wait still waits for {unmet:?}"
    );
    let v = w.decide();
    assert_eq!(v.decision, Decision::Rejected, "{}", v.render_text());
    assert!(conditions(&v).contains(&Condition::HealthStatus));
}

#[test]
fn every_lab_field_but_two_names_a_gate_condition() {
    let unmapped: Vec<Field> = Field::ALL
        .into_iter()
        .filter(|f| f.condition().is_none())
        .collect();
    assert_eq!(
        unmapped,
        [Field::TargetRevision, Field::ProgressDeadlineExceeded]
    );
    for f in Field::ALL {
        assert_eq!(
            serde_json::to_value(f).unwrap(),
            serde_json::Value::String(f.as_str().into()),
            "the timeline's flip names stay lab.md's field names"
        );
    }
}

proptest! {
    /// Any combination of wrongs: every gate condition the lab's unmet fields name is among
    /// the gate's unmet, and the lab waits on exactly when the gate does not approve.
    #[test]
    fn the_lab_never_waits_on_what_the_gate_would_approve(mask in 0u16..(1 << WRONGS.len())) {
        let mut w = lab_world();
        for (i, (_, wrong)) in WRONGS.iter().enumerate() {
            if mask & (1 << i) != 0 {
                wrong(&mut w);
            }
        }
        let (lab, unmapped) = lab_unmet_as_gate_conditions(&w);
        prop_assert!(unmapped.is_empty());
        let v = w.decide();
        let gate = conditions(&v);
        for c in &lab {
            prop_assert!(gate_names(&gate, *c), "lab {:?}, gate {:?}", lab, gate);
        }
        prop_assert_eq!(lab.is_empty(), v.decision == Decision::Approved, "lab {:?}, gate {:?}", lab, gate);
    }
}
