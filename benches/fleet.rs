//! `cargo bench --bench fleet`: what the gate's [`FleetIndex`] costs for a fleet of 1,000 and
//! 10,000 Applications: building it, routing one object change to the Applications it can
//! affect, and the memory it holds.
//!
//! The fleet: N Applications `argocd/app-NNNNN`, each Synced + Healthy, deploying to its own
//! namespace `app-NNNNN`, with `status.resources` listing a Deployment `web` and a Service
//! `web` there (as Argo CD reports them). Each Application's world also has the Deployment's
//! ReplicaSet `web-<hash>`, 2 ready Pods `web-<hash>-<suffix>` owned by it (labels, ownerRef,
//! container, status as the kubelet writes it) and an EndpointSlice `web-<suffix>` labelled
//! with its Service and listing the 2 pods. Only the Applications go into the index; the other
//! objects are the events routed through it.
//!
//! Checked once before timing, for every Application of each fleet: a Pod update, an
//! EndpointSlice update, a ReplicaSet update, a Deployment and Service update and an
//! Application update each route to exactly that one Application.
//!
//! Benched (criterion): building the index (N upserts into an empty index; the drop is not
//! timed), and routing one Pod, EndpointSlice or Application change (`FleetIndex::affected`),
//! each iteration taking the next event of a corpus of 4,096 spread over the whole fleet (so
//! the bench is not one hot key); plus re-indexing one Application (`upsert` of an indexed
//! Application, what a fleet gate does on an Application update besides routing it).
//! Printed after the benches (not asserted): per-event p50/p99/max of 100,000 single routings
//! timed with `Instant`, events per second of 100,000 routings in one timed loop, and the
//! index's memory per Application from a counting global allocator.

#[path = "../tests/support/typed.rs"]
mod typed;

use cnpe_lab::cluster::argo::{Application, ApplicationSpec, Destination, Source, SyncPolicy};
use cnpe_lab::cluster::kind::Kind;
use cnpe_lab::serving::index::{AppKey, FleetIndex};
use criterion::{criterion_group, BatchSize, BenchmarkId, Criterion, Throughput};
use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStatus, ReplicaSet, ReplicaSetSpec, ReplicaSetStatus,
};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, ContainerState, ContainerStateRunning, ContainerStatus,
    ObjectReference, Pod, PodCondition, PodIP, PodSpec, PodStatus, PodTemplateSpec,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, OwnerReference, Time,
};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::{BTreeMap, BTreeSet};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Live heap bytes, bytes ever requested and allocation calls, for the memory printout (the
/// bench runs on one thread; criterion measures nothing while these are read).
struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static CALLS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
            ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
            CALLS.fetch_add(1, Ordering::Relaxed);
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
            ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
            CALLS.fetch_add(1, Ordering::Relaxed);
        }
        p
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            LIVE.fetch_add(new_size, Ordering::Relaxed);
            ALLOCATED.fetch_add(new_size, Ordering::Relaxed);
            CALLS.fetch_add(1, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const SIZES: [usize; 2] = [1_000, 10_000];
const SHA: &str = "3b18e512dba79e4c8300dd08aeb37f8e728b8dad";
const ARGOCD: &str = "argocd";
const WEB: &str = "web";
const PODS_PER: usize = 2;
/// Events per routing corpus (a power of two: the bench indexes it with a mask).
const CORPUS: usize = 4096;

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

/// Application `i`'s name, which is also its destination namespace.
fn name(i: usize) -> String {
    format!("app-{i:05}")
}

/// A pod-template-hash-shaped string per Application (10 characters of the alphabet the
/// Deployment controller uses).
fn hash(i: usize) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut h = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..10)
        .map(|_| {
            let c = ALPHABET[(h % ALPHABET.len() as u64) as usize] as char;
            h /= ALPHABET.len() as u64;
            h = h.wrapping_mul(31).wrapping_add(7);
            c
        })
        .collect()
}

fn owner(kind: &str, name: &str, namespace: &str) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid(&format!("{namespace}/{name}")),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn meta(i: usize, object: &str, labels: &[(&str, &str)]) -> ObjectMeta {
    let ns = name(i);
    ObjectMeta {
        name: Some(object.into()),
        namespace: Some(ns.clone()),
        uid: Some(uid(&format!("{ns}/{object}"))),
        resource_version: Some("48213977".into()),
        creation_timestamp: Some(time(-3600)),
        labels: Some(map(labels)),
        ..Default::default()
    }
}

fn application(i: usize) -> Application {
    let ns = name(i);
    let resources = [("apps", "Deployment"), ("", "Service")]
        .map(|(group, kind)| typed::managed(group, kind, &ns, WEB))
        .into();
    Application {
        api_version: "argoproj.io/v1alpha1".into(),
        kind: "Application".into(),
        metadata: ObjectMeta {
            name: Some(ns.clone()),
            namespace: Some(ARGOCD.into()),
            uid: Some(uid(&format!("{ARGOCD}/{ns}"))),
            resource_version: Some("48213977".into()),
            generation: Some(7),
            labels: Some(map(&[("team", &ns)])),
            ..Default::default()
        },
        spec: ApplicationSpec {
            project: "default".into(),
            source: Source {
                repo_url: "https://git.example/fleet/apps.git".into(),
                path: Some(format!("apps/{ns}")),
                target_revision: Some("main".into()),
            },
            sources: None,
            destination: Destination {
                server: Some("https://kubernetes.default.svc".into()),
                name: None,
                namespace: Some(ns.clone()),
            },
            sync_policy: Some(SyncPolicy::default()),
        },
        status: Some(typed::synced_status(SHA, t(0), resources)),
    }
}

fn container() -> Container {
    Container {
        name: WEB.into(),
        image: Some("registry.example/fleet/web:1.4.2".into()),
        ports: Some(vec![ContainerPort {
            container_port: 8080,
            name: Some("http".into()),
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        ..Default::default()
    }
}

fn deployment(i: usize) -> Deployment {
    let mut metadata = meta(i, WEB, &[("app.kubernetes.io/instance", &name(i))]);
    metadata.generation = Some(2);
    metadata.annotations = Some(map(&[("deployment.kubernetes.io/revision", "2")]));
    let n = PODS_PER as i32;
    Deployment {
        metadata,
        spec: Some(DeploymentSpec {
            replicas: Some(n),
            selector: LabelSelector {
                match_labels: Some(map(&[("app", WEB)])),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(map(&[("app", WEB)])),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![container()],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        status: Some(DeploymentStatus {
            observed_generation: Some(2),
            replicas: Some(n),
            updated_replicas: Some(n),
            ready_replicas: Some(n),
            available_replicas: Some(n),
            ..Default::default()
        }),
    }
}

fn replica_set(i: usize) -> ReplicaSet {
    let h = hash(i);
    let mut metadata = meta(
        i,
        &format!("{WEB}-{h}"),
        &[("app", WEB), ("pod-template-hash", &h)],
    );
    metadata.generation = Some(2);
    metadata.annotations = Some(map(&[("deployment.kubernetes.io/revision", "2")]));
    metadata.owner_references = Some(vec![owner("Deployment", WEB, &name(i))]);
    let n = PODS_PER as i32;
    ReplicaSet {
        metadata,
        spec: Some(ReplicaSetSpec {
            replicas: Some(n),
            selector: LabelSelector {
                match_labels: Some(map(&[("app", WEB), ("pod-template-hash", &h)])),
                ..Default::default()
            },
            ..Default::default()
        }),
        status: Some(ReplicaSetStatus {
            replicas: n,
            ready_replicas: Some(n),
            available_replicas: Some(n),
            observed_generation: Some(2),
            ..Default::default()
        }),
    }
}

fn pod_name(i: usize, p: usize) -> String {
    format!("{WEB}-{}-{}", hash(i), &hash(i * PODS_PER + p + 7)[..5])
}

fn ip(i: usize, p: usize) -> String {
    format!(
        "10.{}.{}.{}",
        64 + i / 256 / 100,
        i / 100 % 256,
        i % 100 * 2 + p + 10
    )
}

fn pod(i: usize, p: usize) -> Pod {
    let h = hash(i);
    let rs = format!("{WEB}-{h}");
    let mut metadata = meta(
        i,
        &pod_name(i, p),
        &[("app", WEB), ("pod-template-hash", &h)],
    );
    metadata.generate_name = Some(format!("{rs}-"));
    metadata.owner_references = Some(vec![owner("ReplicaSet", &rs, &name(i))]);
    let condition = |type_: &str| PodCondition {
        type_: type_.into(),
        status: "True".into(),
        last_transition_time: Some(time(-3000)),
        ..Default::default()
    };
    let pod_ip = ip(i, p);
    Pod {
        metadata,
        spec: Some(PodSpec {
            containers: vec![container()],
            node_name: Some(format!("node-{:02}", i % 40)),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![
                condition("Initialized"),
                condition("Ready"),
                condition("ContainersReady"),
                condition("PodScheduled"),
            ]),
            container_statuses: Some(vec![ContainerStatus {
                name: WEB.into(),
                image: "registry.example/fleet/web:1.4.2".into(),
                image_id: "registry.example/fleet/web@sha256:5f0c2a1b7e9d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b".into(),
                ready: true,
                started: Some(true),
                state: Some(ContainerState {
                    running: Some(ContainerStateRunning {
                        started_at: Some(time(-3100)),
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            pod_ip: Some(pod_ip.clone()),
            pod_ips: Some(vec![PodIP { ip: pod_ip }]),
            start_time: Some(time(-3200)),
            ..Default::default()
        }),
    }
}

fn endpoint_slice(i: usize) -> EndpointSlice {
    let metadata = meta(
        i,
        &format!("{WEB}-{}", &hash(i + 1_000_003)[..5]),
        &typed::slice_labels(WEB),
    );
    let endpoints = (0..PODS_PER)
        .map(|p| {
            let target = ObjectReference {
                kind: Some("Pod".into()),
                name: Some(pod_name(i, p)),
                namespace: Some(name(i)),
                ..Default::default()
            };
            typed::ready_endpoint(ip(i, p), target, None)
        })
        .collect();
    typed::http_slice(metadata, endpoints)
}

fn build(apps: &[Application]) -> FleetIndex {
    let mut index = FleetIndex::new();
    for app in apps {
        index.upsert(app);
    }
    index
}

fn only(i: usize) -> BTreeSet<AppKey> {
    BTreeSet::from([(ARGOCD.to_string(), name(i))])
}

/// The bench measures the right thing: every object of every Application's world routes to
/// exactly that Application.
fn check(index: &FleetIndex, n: usize) {
    assert_eq!(index.len(), n);
    for i in 0..n {
        let want = only(i);
        let app = application(i);
        assert_eq!(index.affected(Kind::Application, &app.metadata), want);
        assert_eq!(
            index.affected(Kind::Deployment, &deployment(i).metadata),
            want
        );
        assert_eq!(index.affected(Kind::Service, &meta(i, WEB, &[])), want);
        assert_eq!(
            index.affected(Kind::ReplicaSet, &replica_set(i).metadata),
            want
        );
        for p in 0..PODS_PER {
            assert_eq!(
                index.affected(Kind::Pod, &pod(i, p).metadata),
                want,
                "pod {i}/{p}"
            );
        }
        assert_eq!(
            index.affected(Kind::EndpointSlice, &endpoint_slice(i).metadata),
            want
        );
    }
}

/// One routing event: a kind and the changed object's metadata (all `affected` reads).
type Event = (Kind, ObjectMeta);

/// `CORPUS` events of `kind` spread over the fleet (Application `j * n / CORPUS`, cycling),
/// so successive routings do not hit one hot key.
fn corpus(kind: Kind, n: usize) -> Vec<Event> {
    (0..CORPUS)
        .map(|j| {
            let i = (j * 7919) % n;
            let meta = match kind {
                Kind::Pod => pod(i, j % PODS_PER).metadata,
                Kind::EndpointSlice => endpoint_slice(i).metadata,
                Kind::Application => application(i).metadata,
                other => unreachable!("no corpus of {other:?}"),
            };
            (kind, meta)
        })
        .collect()
}

const KINDS: [(Kind, &str); 3] = [
    (Kind::Pod, "pod"),
    (Kind::EndpointSlice, "endpointslice"),
    (Kind::Application, "application"),
];

struct Fleet {
    n: usize,
    apps: Vec<Application>,
    index: FleetIndex,
}

fn fleet(n: usize) -> Fleet {
    let apps: Vec<Application> = (0..n).map(application).collect();
    let index = build(&apps);
    check(&index, n);
    Fleet { n, apps, index }
}

fn bench_fleet(c: &mut Criterion) {
    for n in SIZES {
        let f = fleet(n);
        let mut g = c.benchmark_group(format!("fleet/{n}"));
        g.sample_size(if n >= 10_000 { 20 } else { 50 });
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(BenchmarkId::new("build", n), |b| {
            b.iter_batched(
                || (),
                |()| build(black_box(&f.apps)),
                BatchSize::PerIteration,
            )
        });
        g.sample_size(100);
        g.throughput(Throughput::Elements(1));
        for (kind, label) in KINDS {
            let events = corpus(kind, f.n);
            let mut k = 0usize;
            g.bench_function(BenchmarkId::new("route", label), |b| {
                b.iter(|| {
                    let (kind, meta) = &events[k & (CORPUS - 1)];
                    k = k.wrapping_add(1);
                    f.index.affected(*kind, black_box(meta))
                })
            });
        }
        // Re-indexing one Application (same resources) in the full index: every upsert
        // replaces an indexed Application, so the index stays at N.
        let mut index = f.index.clone();
        let mut k = 0usize;
        g.bench_function(BenchmarkId::new("reindex", "application"), |b| {
            b.iter(|| {
                index.upsert(black_box(&f.apps[(k * 7919) % f.n]));
                k = k.wrapping_add(1);
            })
        });
        g.finish();
    }
}

/// p50 / p99 / max of `n` single timed calls of `f(0)`, `f(1)`, ...
fn percentiles(n: usize, mut f: impl FnMut(usize)) -> (Duration, Duration, Duration) {
    let mut times: Vec<Duration> = Vec::with_capacity(n);
    for j in 0..n {
        let t0 = Instant::now();
        f(j);
        times.push(t0.elapsed());
    }
    times.sort();
    (times[n / 2], times[n * 99 / 100], times[n - 1])
}

fn per_event() {
    const N: usize = 100_000;
    let (p50, p99, max) = percentiles(N, |j| {
        black_box(j);
    });
    println!("timer overhead, {N} empty timed calls: p50 {p50:?}  p99 {p99:?}  max {max:?}");
    for n in SIZES {
        let f = fleet(n);
        for (kind, label) in KINDS {
            let events = corpus(kind, n);
            let route = |j: usize| {
                let (kind, meta) = &events[j & (CORPUS - 1)];
                black_box(f.index.affected(*kind, black_box(meta)));
            };
            for j in 0..10_000 {
                route(j);
            }
            let (p50, p99, max) = percentiles(N, route);
            let t0 = Instant::now();
            for j in 0..N {
                route(j);
            }
            let loop_time = t0.elapsed();
            let (calls0, bytes0) = (
                CALLS.load(Ordering::Relaxed),
                ALLOCATED.load(Ordering::Relaxed),
            );
            for j in 0..CORPUS {
                route(j);
            }
            let calls = CALLS.load(Ordering::Relaxed) - calls0;
            let bytes = ALLOCATED.load(Ordering::Relaxed) - bytes0;
            println!(
                "fleet {n}: route {label:<13} {N} single timed: p50 {p50:?}  p99 {p99:?}  max {max:?}; \
                 {N} in one loop: {loop_time:?} = {:.0} events/s; {:.1} allocations, {} bytes per routing",
                N as f64 / loop_time.as_secs_f64(),
                calls as f64 / CORPUS as f64,
                bytes / CORPUS
            );
        }
        let mut index = f.index.clone();
        let (p50, p99, max) = percentiles(1_000, |j| {
            index.upsert(black_box(&f.apps[(j * 7919) % n]));
        });
        println!("fleet {n}: reindex application 1000 single timed: p50 {p50:?}  p99 {p99:?}  max {max:?}");
    }
}

fn build_and_memory() {
    for n in SIZES {
        let apps: Vec<Application> = (0..n).map(application).collect();
        let mut times = Vec::new();
        for _ in 0..10 {
            let t0 = Instant::now();
            let index = build(&apps);
            times.push(t0.elapsed());
            drop(black_box(index));
        }
        times.sort();
        let live0 = LIVE.load(Ordering::Relaxed);
        let allocated0 = ALLOCATED.load(Ordering::Relaxed);
        let index = build(&apps);
        let live = LIVE.load(Ordering::Relaxed) - live0;
        let allocated = ALLOCATED.load(Ordering::Relaxed) - allocated0;
        let live_apps0 = LIVE.load(Ordering::Relaxed);
        let apps2: Vec<Application> = (0..n).map(application).collect();
        let apps_heap = LIVE.load(Ordering::Relaxed) - live_apps0;
        println!(
            "fleet {n}: build (N upserts into an empty index), 10 timed builds: min {:?}  median {:?}  max {:?} ({:.0} upserts/s at the median)",
            times[0],
            times[5],
            times[9],
            n as f64 / times[5].as_secs_f64()
        );
        println!(
            "fleet {n}: index memory: {allocated} bytes allocated while building ({} per Application), \
             {live} bytes live after ({} per Application); the Applications themselves: {apps_heap} bytes ({} per Application)",
            allocated / n,
            live / n,
            apps_heap / n
        );
        drop(black_box(apps2));
        drop(black_box(index));
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5));
    targets = bench_fleet
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    // `cargo bench` passes --bench; `cargo test --benches` runs this binary without it:
    // keep that a quick smoke run.
    if std::env::args().any(|a| a == "--bench") {
        build_and_memory();
        per_event();
    }
}
