//! `cargo bench --bench gate`: what one decision of the gate costs on a large Application.
//!
//! The world: an Application (Synced + Healthy at the SHA, operation Succeeded, reconciled
//! after it) managing 50 Deployments and 50 Services in one namespace. Each Deployment has its
//! current ReplicaSet (revision 2) and the previous one scaled to zero (revision 1, as
//! `revisionHistoryLimit` keeps it), 10 ready pods owned by the current ReplicaSet, and a
//! Service whose EndpointSlice lists those 10 pods as ready; every one of the 500 endpoints has
//! a fresh 200 answer with the expected body, so the decision is Approved (the longest path:
//! every condition checked, nothing short-circuits). Pods are realistic: labels, ownerRefs, a
//! container with ports, probes and resources, four conditions, a container status, and
//! `managedFields` as kubectl/kubelet write them.
//!
//! The same world shipped through Argo Rollouts: each Deployment is a fully promoted canary
//! Rollout instead (four steps done, stable == current), its ReplicaSets owned by the Rollout
//! and labelled `rollouts-pod-template-hash` as the Rollouts controller labels them and their
//! pods. Same pods, slices and answers: the two decisions differ only in the workload kind.
//!
//! Benched (criterion): `decide::decide` on both worlds and `decide::endpoints`. Printed after
//! the benches (not asserted): the per-call p50/p99 of 1,000 timed calls of each, and the memory
//! of holding 1,000 Pods as k8s-openapi structs, with and without `managedFields`: bytes of
//! their JSON (a proxy), and the live heap they hold, from a counting global allocator.

#[path = "../tests/support/typed.rs"]
mod typed;

use cnpe_lab::cluster::argo::{Application, ApplicationSpec, Destination};
use cnpe_lab::cluster::rollouts::{Rollout, POD_TEMPLATE_HASH};
use cnpe_lab::serving::decide::{self, Request};
use cnpe_lab::serving::expect::Expect;
use cnpe_lab::serving::model::{EndpointKey, Objects, ProbeAnswer, Probes};
use cnpe_lab::serving::verdict::{Decision, LieWindow};
use criterion::{criterion_group, Criterion};
use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentCondition, DeploymentSpec, DeploymentStatus, ReplicaSet, ReplicaSetSpec,
    ReplicaSetStatus,
};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, ContainerState, ContainerStateRunning, ContainerStatus,
    HTTPGetAction, ObjectReference, Pod, PodCondition, PodIP, PodSpec, PodStatus, PodTemplateSpec,
    Probe, ResourceRequirements,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    FieldsV1, LabelSelector, ManagedFieldsEntry, ObjectMeta, OwnerReference, Time,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Live heap bytes, for the memory printout (the benches run on one thread at a time).
struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            LIVE.fetch_add(new_size, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const SHA: &str = "3b18e512dba79e4c8300dd08aeb37f8e728b8dad";
const NS: &str = "shop";
const DEPLOYMENTS: usize = 50;
const PODS_PER: usize = 10;
const BODY: &str = "<html><body><h1>shop</h1><p>release 3b18e512dba7</p></body></html>\n";

fn t(secs: i64) -> Timestamp {
    "2026-12-04T10:00:00Z".parse::<Timestamp>().unwrap() + SignedDuration::from_secs(secs)
}

fn time(secs: i64) -> Time {
    Time(t(secs))
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn owner(kind: &str, name: &str) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid(name),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// A stable UUID-shaped uid per name.
fn uid(name: &str) -> String {
    let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        h >> 32,
        (h >> 16) & 0xffff,
        h & 0xfff,
        (h >> 20) & 0xfff,
        h & 0xffff_ffff_ffff
    )
}

fn meta(name: &str, labels: &[(&str, &str)]) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(NS.into()),
        uid: Some(uid(name)),
        resource_version: Some("48213977".into()),
        generation: Some(2),
        creation_timestamp: Some(time(-3600)),
        labels: Some(map(labels)),
        ..Default::default()
    }
}

/// managedFields as the apiserver records them: the applier's (Argo CD, server-side diff off:
/// kubectl-client-side-apply style) and the kubelet's status writes.
fn managed_fields(kind: &str) -> Vec<ManagedFieldsEntry> {
    let spec = serde_json::json!({
        "f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:app.kubernetes.io/instance": {}, "f:pod-template-hash": {}},
                       "f:ownerReferences": {".": {}, "k:{\"uid\":\"x\"}": {}}},
        "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {},
            "f:ports": {".": {}, "k:{\"containerPort\":8080,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:name": {}, "f:protocol": {}}},
            "f:readinessProbe": {".": {}, "f:failureThreshold": {}, "f:httpGet": {".": {}, "f:path": {}, "f:port": {}, "f:scheme": {}}, "f:periodSeconds": {}},
            "f:resources": {".": {}, "f:limits": {".": {}, "f:memory": {}}, "f:requests": {".": {}, "f:cpu": {}, "f:memory": {}}},
            "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {}}},
            "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {}, "f:schedulerName": {},
            "f:securityContext": {}, "f:terminationGracePeriodSeconds": {}}
    });
    let status = serde_json::json!({
        "f:status": {"f:conditions": {
            "k:{\"type\":\"ContainersReady\"}": {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}},
            "k:{\"type\":\"Initialized\"}": {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}},
            "k:{\"type\":\"PodReadyToStartContainers\"}": {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}},
            "k:{\"type\":\"Ready\"}": {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}}},
            "f:containerStatuses": {}, "f:hostIP": {}, "f:hostIPs": {}, "f:phase": {}, "f:podIP": {},
            "f:podIPs": {".": {}, "k:{\"ip\":\"10.88.0.1\"}": {".": {}, "f:ip": {}}}, "f:startTime": {}}
    });
    let (manager, fields) = if kind == "Pod" {
        ("kube-controller-manager", spec)
    } else {
        ("argocd-controller", spec)
    };
    vec![
        ManagedFieldsEntry {
            api_version: Some("v1".into()),
            fields_type: Some("FieldsV1".into()),
            fields_v1: Some(FieldsV1(fields)),
            manager: Some(manager.into()),
            operation: Some("Update".into()),
            time: Some(time(-3600)),
            subresource: None,
        },
        ManagedFieldsEntry {
            api_version: Some("v1".into()),
            fields_type: Some("FieldsV1".into()),
            fields_v1: Some(FieldsV1(status)),
            manager: Some("kubelet".into()),
            operation: Some("Update".into()),
            time: Some(time(-3500)),
            subresource: Some("status".into()),
        },
    ]
}

fn container() -> Container {
    Container {
        name: "web".into(),
        image: Some("registry.example/shop/web@sha256:5f0c2a1b7e9d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b".into()),
        image_pull_policy: Some("IfNotPresent".into()),
        ports: Some(vec![ContainerPort {
            container_port: 8080,
            name: Some("http".into()),
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        readiness_probe: Some(Probe {
            http_get: Some(HTTPGetAction {
                path: Some("/healthz".into()),
                port: IntOrString::String("http".into()),
                scheme: Some("HTTP".into()),
                ..Default::default()
            }),
            period_seconds: Some(5),
            failure_threshold: Some(3),
            ..Default::default()
        }),
        resources: Some(ResourceRequirements {
            requests: Some(
                [
                    ("cpu".to_string(), Quantity("100m".into())),
                    ("memory".to_string(), Quantity("128Mi".into())),
                ]
                .into(),
            ),
            limits: Some([("memory".to_string(), Quantity("256Mi".into()))].into()),
            ..Default::default()
        }),
        termination_message_path: Some("/dev/termination-log".into()),
        termination_message_policy: Some("File".into()),
        ..Default::default()
    }
}

fn pod_spec() -> PodSpec {
    PodSpec {
        containers: vec![container()],
        dns_policy: Some("ClusterFirst".into()),
        enable_service_links: Some(true),
        node_name: Some("cnpe-node".into()),
        restart_policy: Some("Always".into()),
        scheduler_name: Some("default-scheduler".into()),
        service_account_name: Some("default".into()),
        termination_grace_period_seconds: Some(30),
        ..Default::default()
    }
}

fn condition(type_: &str) -> PodCondition {
    PodCondition {
        type_: type_.into(),
        status: "True".into(),
        last_transition_time: Some(time(-3000)),
        ..Default::default()
    }
}

fn ip(d: usize, p: usize) -> String {
    format!("10.88.{}.{}", d + 1, p + 10)
}

fn pod(d: usize, p: usize, with_managed_fields: bool) -> Pod {
    let deployment = format!("web-{d:02}");
    let hash = format!("7f9c{d:02}b5d8");
    let name = format!("{deployment}-{hash}-x{p:03}z");
    let mut metadata = meta(
        &name,
        &[
            ("app", &deployment),
            ("app.kubernetes.io/instance", "shop"),
            ("pod-template-hash", &hash),
        ],
    );
    metadata.generation = None;
    metadata.generate_name = Some(format!("{deployment}-{hash}-"));
    metadata.owner_references = Some(vec![owner("ReplicaSet", &format!("{deployment}-{hash}"))]);
    if with_managed_fields {
        metadata.managed_fields = Some(managed_fields("Pod"));
    }
    let pod_ip = ip(d, p);
    Pod {
        metadata,
        spec: Some(pod_spec()),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![
                condition("PodReadyToStartContainers"),
                condition("Initialized"),
                condition("Ready"),
                condition("ContainersReady"),
                condition("PodScheduled"),
            ]),
            container_statuses: Some(vec![ContainerStatus {
                name: "web".into(),
                image: "registry.example/shop/web@sha256:5f0c2a1b7e9d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b".into(),
                image_id: "registry.example/shop/web@sha256:5f0c2a1b7e9d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b".into(),
                container_id: Some(format!("containerd://{}", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")),
                ready: true,
                started: Some(true),
                restart_count: 0,
                state: Some(ContainerState {
                    running: Some(ContainerStateRunning {
                        started_at: Some(time(-3100)),
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            host_ip: Some("10.99.0.1".into()),
            pod_ip: Some(pod_ip.clone()),
            pod_ips: Some(vec![PodIP { ip: pod_ip }]),
            qos_class: Some("Burstable".into()),
            start_time: Some(time(-3200)),
            ..Default::default()
        }),
    }
}

fn deployment(d: usize) -> Deployment {
    let name = format!("web-{d:02}");
    let mut metadata = meta(&name, &[("app.kubernetes.io/instance", "shop")]);
    metadata.annotations = Some(map(&[("deployment.kubernetes.io/revision", "2")]));
    metadata.managed_fields = Some(managed_fields("Deployment"));
    let n = PODS_PER as i32;
    Deployment {
        metadata,
        spec: Some(DeploymentSpec {
            replicas: Some(n),
            selector: LabelSelector {
                match_labels: Some(map(&[("app", &name)])),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(map(&[("app", &name)])),
                    ..Default::default()
                }),
                spec: Some(pod_spec()),
            },
            ..Default::default()
        }),
        status: Some(DeploymentStatus {
            observed_generation: Some(2),
            replicas: Some(n),
            updated_replicas: Some(n),
            ready_replicas: Some(n),
            available_replicas: Some(n),
            conditions: Some(vec![
                DeploymentCondition {
                    type_: "Available".into(),
                    status: "True".into(),
                    reason: Some("MinimumReplicasAvailable".into()),
                    message: Some("Deployment has minimum availability.".into()),
                    ..Default::default()
                },
                DeploymentCondition {
                    type_: "Progressing".into(),
                    status: "True".into(),
                    reason: Some("NewReplicaSetAvailable".into()),
                    message: Some(format!(
                        "ReplicaSet \"{name}-7f9c{d:02}b5d8\" has successfully progressed."
                    )),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        }),
    }
}

fn replica_set(d: usize, hash: &str, revision: u32, replicas: i32) -> ReplicaSet {
    let deployment = format!("web-{d:02}");
    let mut metadata = meta(
        &format!("{deployment}-{hash}"),
        &[("app", &deployment), ("pod-template-hash", hash)],
    );
    metadata.annotations = Some(map(&[
        ("deployment.kubernetes.io/revision", &revision.to_string()),
        ("deployment.kubernetes.io/desired-replicas", "10"),
        ("deployment.kubernetes.io/max-replicas", "13"),
    ]));
    metadata.owner_references = Some(vec![owner("Deployment", &deployment)]);
    ReplicaSet {
        metadata,
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(map(&[("app", &deployment), ("pod-template-hash", hash)])),
                ..Default::default()
            },
            template: Some(PodTemplateSpec {
                metadata: None,
                spec: Some(pod_spec()),
            }),
            ..Default::default()
        }),
        status: Some(ReplicaSetStatus {
            replicas,
            ready_replicas: Some(replicas),
            available_replicas: Some(replicas),
            fully_labeled_replicas: Some(replicas),
            observed_generation: Some(2),
            ..Default::default()
        }),
    }
}

fn endpoint_slice(d: usize) -> EndpointSlice {
    let service = format!("web-{d:02}");
    let metadata = meta(&format!("{service}-k2x8q"), &typed::slice_labels(&service));
    let endpoints = (0..PODS_PER)
        .map(|p| {
            let target = ObjectReference {
                kind: Some("Pod".into()),
                name: pod(d, p, false).metadata.name,
                namespace: Some(NS.into()),
                uid: Some(uid(&format!("web-{d:02}-7f9c{d:02}b5d8-x{p:03}z"))),
                ..Default::default()
            };
            typed::ready_endpoint(ip(d, p), target, Some("cnpe-node"))
        })
        .collect();
    typed::http_slice(metadata, endpoints)
}

fn application() -> Application {
    let resources = (0..DEPLOYMENTS)
        .flat_map(|d| {
            [("apps", "Deployment"), ("", "Service")]
                .map(|(group, kind)| typed::managed(group, kind, NS, &format!("web-{d:02}")))
        })
        .collect();
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
        status: Some(typed::synced_status(SHA, t(0), resources)),
    }
}

struct World {
    request: Request,
    objects: Objects,
    probes: Probes,
    now: Timestamp,
}

fn world() -> World {
    let mut objects = Objects {
        application: Some(Arc::new(application())),
        ..Default::default()
    };
    let mut probes = Probes::new();
    for d in 0..DEPLOYMENTS {
        objects.deployments.push(Arc::new(deployment(d)));
        objects
            .replica_sets
            .push(Arc::new(replica_set(d, &format!("6c4d{d:02}a9e1"), 1, 0)));
        objects
            .replica_sets
            .push(Arc::new(replica_set(d, &format!("7f9c{d:02}b5d8"), 2, 10)));
        objects.endpoint_slices.push(Arc::new(endpoint_slice(d)));
        for p in 0..PODS_PER {
            let pod = pod(d, p, true);
            probes.insert(
                EndpointKey {
                    namespace: NS.into(),
                    service: format!("web-{d:02}"),
                    pod: pod.metadata.name.clone(),
                    ip: ip(d, p),
                    port: 8080,
                },
                ProbeAnswer {
                    at: t(20),
                    code: Some(200),
                    body: Some(BODY.into()),
                    error: None,
                },
            );
            objects.pods.push(Arc::new(pod));
        }
    }
    World {
        request: Request {
            namespace: "argocd".into(),
            name: "shop".into(),
            sha: cnpe_lab::sha::Sha::parse(SHA).unwrap(),
            expect: Expect::from_flags(None, Some("release {sha}"), None, &SHA[..12])
                .expect("expectation"),
            path: "/".into(),
            started: t(0),
            deadline: t(300),
            max_answer_age: Duration::from_secs(10),
            in_operation: false,
            via_route: false,
        },
        objects,
        probes,
        now: t(25),
    }
}

/// Deployment `d` as a fully promoted canary Rollout: every step done, stable == current.
fn rollout(d: usize) -> Rollout {
    let hash = format!("7f9c{d:02}b5d8");
    let n = PODS_PER;
    let mut r: Rollout = serde_json::from_value(serde_json::json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "metadata": {},
        "spec": {"replicas": n, "strategy": {"canary": {"steps": [
            {"setWeight": 20}, {"pause": {"duration": "30s"}}, {"setWeight": 50}, {"pause": {}}]}}},
        "status": {"phase": "Healthy", "observedGeneration": "2", "currentPodHash": hash,
            "stableRS": hash, "currentStepIndex": 4, "replicas": n, "updatedReplicas": n,
            "readyReplicas": n, "availableReplicas": n}
    }))
    .expect("a Rollout");
    r.metadata = meta(
        &format!("web-{d:02}"),
        &[("app.kubernetes.io/instance", "shop")],
    );
    r.metadata.managed_fields = Some(managed_fields("Rollout"));
    r
}

/// `labels` with Deployment's `pod-template-hash` renamed to Argo Rollouts' label.
fn rollouts_labels(meta: &mut ObjectMeta) {
    if let Some(labels) = meta.labels.as_mut() {
        if let Some(hash) = labels.remove("pod-template-hash") {
            labels.insert(POD_TEMPLATE_HASH.into(), hash);
        }
    }
}

/// [`world`] shipped through Argo Rollouts (see the top of this file).
fn rollout_world() -> World {
    let mut w = world();
    let o = &mut w.objects;
    o.deployments.clear();
    o.rollouts = (0..DEPLOYMENTS).map(|d| Arc::new(rollout(d))).collect();
    for rs in o.replica_sets.iter_mut() {
        let rs = Arc::make_mut(rs);
        rollouts_labels(&mut rs.metadata);
        let owner_name = rs.metadata.owner_references.as_ref().expect("owned")[0]
            .name
            .clone();
        let mut by = owner("Rollout", &owner_name);
        by.api_version = "argoproj.io/v1alpha1".into();
        rs.metadata.owner_references = Some(vec![by]);
        if let Some(a) = rs.metadata.annotations.as_mut() {
            let revision = a.remove("deployment.kubernetes.io/revision");
            a.retain(|k, _| !k.starts_with("deployment.kubernetes.io/"));
            a.extend(revision.map(|r| ("rollout.argoproj.io/revision".to_string(), r)));
        }
    }
    for pod in o.pods.iter_mut() {
        rollouts_labels(&mut Arc::make_mut(pod).metadata);
    }
    let mut app = (**o.application.as_ref().expect("the Application")).clone();
    for r in app
        .status
        .as_mut()
        .and_then(|s| s.resources.as_mut())
        .expect("resources")
    {
        if r.kind.as_deref() == Some("Deployment") {
            r.group = Some("argoproj.io".into());
            r.version = Some("v1alpha1".into());
            r.kind = Some("Rollout".into());
        }
    }
    o.application = Some(Arc::new(app));
    w
}

fn decide_on(w: &World) -> cnpe_lab::serving::verdict::Verdict {
    decide::decide(
        black_box(&w.request),
        black_box(&w.objects),
        black_box(&w.probes),
        w.now,
        &LieWindow::default(),
    )
}

fn bench_gate(c: &mut Criterion) {
    let w = world();
    let r = rollout_world();
    // Each world is what it claims: approved, 500 endpoints, owned by its workload kind.
    for (world, kind) in [(&w, "Deployment"), (&r, "Rollout")] {
        let v = decide_on(world);
        assert_eq!(v.decision, Decision::Approved, "{kind}: {:#?}", v.unmet);
        assert_eq!(v.endpoints.len(), DEPLOYMENTS * PODS_PER);
        for e in &v.endpoints {
            let owner = e.owner.as_deref().unwrap_or("none");
            assert!(owner.starts_with(&format!("{kind} {NS}/web-")), "{owner}");
        }
    }
    assert_eq!(decide::endpoints(&w.objects).len(), DEPLOYMENTS * PODS_PER);

    let mut g = c.benchmark_group("gate");
    g.bench_function("decide/50-deployments-500-endpoints", |b| {
        b.iter(|| decide_on(&w))
    });
    g.bench_function("decide/50-rollouts-500-endpoints", |b| {
        b.iter(|| decide_on(&r))
    });
    g.bench_function("endpoints/50-services-500-endpoints", |b| {
        b.iter(|| decide::endpoints(black_box(&w.objects)))
    });
    g.finish();
}

/// p50 / p99 / max of `n` single timed calls.
fn percentiles(n: usize, mut f: impl FnMut()) -> (Duration, Duration, Duration) {
    let mut times: Vec<Duration> = (0..n)
        .map(|_| {
            let t0 = Instant::now();
            f();
            t0.elapsed()
        })
        .collect();
    times.sort();
    (times[n / 2], times[n * 99 / 100], times[n - 1])
}

fn per_call() {
    let w = world();
    let n = 1000;
    for (world, label) in [(&w, "Deployments"), (&rollout_world(), "Rollouts   ")] {
        for _ in 0..50 {
            black_box(decide_on(world));
        }
        let (p50, p99, max) = percentiles(n, || {
            black_box(decide_on(world));
        });
        println!(
            "per call, {n} timed calls: decide, 50 {label} p50 {p50:?}  p99 {p99:?}  max {max:?}"
        );
    }
    let (p50, p99, max) = percentiles(n, || {
        black_box(decide::endpoints(black_box(&w.objects)));
    });
    println!("per call, {n} timed calls: endpoints p50 {p50:?}  p99 {p99:?}  max {max:?}");
}

fn memory() {
    const N: usize = 1000;
    for with in [true, false] {
        let before = LIVE.load(Ordering::Relaxed);
        let pods: Vec<Pod> = (0..N)
            .map(|i| pod(i / PODS_PER % 100, i % PODS_PER, with))
            .collect();
        let heap = LIVE.load(Ordering::Relaxed) - before;
        let json: usize = pods
            .iter()
            .map(|p| serde_json::to_vec(p).expect("json").len())
            .sum();
        println!(
            "memory, {N} Pods {} managedFields: heap held {} bytes ({} per pod, Vec included), JSON {} bytes ({} per pod)",
            if with { "with" } else { "without" },
            heap,
            heap / N,
            json,
            json / N
        );
        drop(black_box(pods));
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(10));
    targets = bench_gate
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    // `cargo bench` passes --bench; `cargo test --benches` runs this binary without it:
    // keep that a quick smoke run.
    if std::env::args().any(|a| a == "--bench") {
        per_call();
        memory();
    }
}
