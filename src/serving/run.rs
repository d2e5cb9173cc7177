//! The gate's shell: resolve the Applications and their SHAs, start the watches, probe the
//! endpoints, and call the pure [`decide`](crate::serving::decide::decide) at every watch event
//! and probe answer until each Application is approved or rejected (or once, with `--once`).

use crate::cluster::argo::Application;
use crate::cluster::watch::{AppFilter, Change, Kind, Scope, Stores, Watches};
use crate::cluster::Cluster;
use crate::serving::decide::{self, Request};
use crate::serving::expect::Expect;
use crate::serving::index::{AppKey, FleetIndex};
use crate::serving::model::{EndpointKey, Objects, Probes};
use crate::serving::prober::{Probed, Prober, Via};
use crate::serving::route_prober::{RouteProber, RouteRound};
use crate::serving::verdict::{Decision, LieWindow, Verdict};
use crate::serving::via_route::{ClientRequest, RouteAnswers};
use crate::sha::Sha;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::reflector::ObjectRef;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Where each Application's expected SHA comes from (closed set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShaSource {
    /// `--sha`: the same for every Application.
    Given(Sha),
    /// `--sha-from-target`: its `spec.source.targetRevision` (must be a full SHA).
    FromTarget,
    /// `--sha-from-operation`: the revision of its current sync operation (the PostSync hook).
    FromOperation,
}

/// How endpoints are probed (closed set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeChoice {
    /// Directly inside the cluster (in-cluster configuration), else through the pod proxy.
    Auto,
    Direct,
    PodProxy,
}

#[derive(Debug, Clone)]
pub struct Options {
    pub apps: AppFilter,
    pub sha: ShaSource,
    pub expect_body: Option<String>,
    pub expect_contains: Option<String>,
    pub expect_json: Option<String>,
    pub path: String,
    pub timeout: Duration,
    pub once: bool,
    pub probe_interval: Duration,
    pub probe_concurrency: usize,
    pub probe: ProbeChoice,
    /// Hook mode (`--in-hook`, implied by `--sha-from-operation`): the gate runs inside the
    /// sync operation to the SHA, as a PostSync hook; see
    /// [`Request::in_operation`](crate::serving::decide::Request::in_operation).
    pub in_hook: bool,
    /// Print a line on stderr whenever an Application's unmet conditions change.
    pub progress: bool,
    /// `--via-route URL`: the ingress controller's address as clients reach it; every route's
    /// requests go through it too (see [`crate::serving::via_route`]).
    pub via_route: Option<reqwest::Url>,
}

/// Why the gate could not decide at all (exit 2): never a rejection of a release.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Cluster(String),
}

/// What the run cost, for the verdict JSON and the fleet measurements.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunStats {
    pub applications: usize,
    pub scope: String,
    pub probe_via: String,
    /// Watch streams (one reflector per kind).
    pub watch_streams: usize,
    /// Watch requests sent (each stream's first watch and every re-watch).
    pub watch_requests: u64,
    /// API requests other than probes (lists, watches, GETs).
    pub api_requests: u64,
    pub probes: u64,
    /// Requests sent through the ingress controller (`--via-route`).
    pub route_requests: u64,
    pub watch_events: u64,
    pub evaluations: u64,
    /// From the watch event or probe answer that led to a decision to the decision (ms).
    pub decision_latency_ms_p50: f64,
    pub decision_latency_ms_p99: f64,
    pub decision_latency_ms_max: f64,
    /// Latency of each final decision (ms), one per Application.
    pub final_decision_latency_ms: Vec<f64>,
    pub wall_seconds: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub approved: bool,
    pub verdicts: Vec<Verdict>,
    pub run: RunStats,
}

/// One Application being decided.
struct Pending {
    request: Request,
    lie: LieWindow,
    verdict: Option<Verdict>,
    done: bool,
    /// Earliest input (event or answer) not yet decided on.
    dirty_since: Option<Instant>,
    /// Namespaces of its managed resources (for selecting objects and routing events).
    namespaces: BTreeSet<String>,
    endpoints: Vec<EndpointKey>,
    /// Its requests through the ingress controller (`--via-route`).
    requests: Vec<ClientRequest>,
    last_unmet: Vec<String>,
}

/// The SHA the Application must be at.
fn sha_of(app: &Application, source: &ShaSource) -> Result<Sha, String> {
    let name = app.metadata.name.as_deref().unwrap_or("?");
    match source {
        ShaSource::Given(s) => Ok(s.clone()),
        ShaSource::FromTarget => {
            let t = app
                .spec
                .source
                .target_revision
                .as_deref()
                .unwrap_or_default();
            Sha::parse(t).map_err(|_| {
                format!(
                    "Application {name}: --sha-from-target needs spec.source.targetRevision to be a full SHA, found {t:?}"
                )
            })
        }
        ShaSource::FromOperation => {
            // The resolved revision (syncResult, set once the operation resolved it) first;
            // the asked one (operation.sync.revision) only when it is a full SHA: a manual
            // sync asks for the targetRevision, e.g. "main" or "HEAD". Two different full
            // SHAs: no single revision to gate.
            let op = app.status.as_ref().and_then(|s| s.operation_state.as_ref());
            let asked = op
                .and_then(|o| o.operation.as_ref())
                .and_then(|o| o.sync.as_ref())
                .and_then(|s| s.revision.clone())
                .filter(|r| !r.is_empty());
            let synced = op
                .and_then(|o| o.sync_result.as_ref())
                .and_then(|r| r.revision.clone())
                .filter(|r| !r.is_empty());
            let full = |r: &Option<String>| r.as_deref().and_then(|r| Sha::parse(r).ok());
            match (full(&synced), full(&asked)) {
                (Some(s), Some(a)) if s != a => Err(format!(
                    "Application {name}: --sha-from-operation found two revisions in its current operation: syncResult.revision {s} and operation.sync.revision {a}"
                )),
                (Some(r), _) | (None, Some(r)) => Ok(r),
                (None, None) => Err(format!(
                    "Application {name}: --sha-from-operation found no full SHA in its current operation (syncResult.revision {synced:?}, operation.sync.revision {asked:?})"
                )),
            }
        }
    }
}

/// The namespaces an Application's managed resources live in (its destination when it lists
/// none yet).
fn namespaces_of(app: &Application) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = app
        .status
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|r| r.namespace.clone())
        .filter(|n| !n.is_empty())
        .collect();
    if out.is_empty() {
        if let Some(ns) = app.spec.destination.namespace.clone() {
            out.insert(ns);
        }
    }
    out
}

/// The objects one decision reads: the Application by name, the rest of its namespaces by
/// name from each kind's index (no store is scanned).
fn objects_for(stores: &Stores, app: &Request, namespaces: &BTreeSet<String>) -> Objects {
    let mut objects = Objects {
        application: stores
            .applications
            .get(&ObjectRef::new(&app.name).within(&app.namespace)),
        ..Objects::default()
    };
    macro_rules! read {
        ($($field:ident: $kind:expr),* $(,)?) => {
            $(objects.$field = stores.in_namespaces($kind, &stores.$field, namespaces);)*
        };
    }
    read!(
        deployments: Kind::Deployment,
        replica_sets: Kind::ReplicaSet,
        stateful_sets: Kind::StatefulSet,
        daemon_sets: Kind::DaemonSet,
        pods: Kind::Pod,
        services: Kind::Service,
        endpoint_slices: Kind::EndpointSlice,
        rollouts: Kind::Rollout,
        ingresses: Kind::Ingress,
        http_routes: Kind::HttpRoute,
    );
    objects
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Runs the gate: `Ok` with every Application's verdict, or `Err` when it could not decide at
/// all (an Application that does not exist, a SHA it cannot learn, an unusable cluster).
pub async fn run(cluster: &Cluster, opts: &Options) -> Result<Outcome, GateError> {
    let started = Instant::now();
    let started_at = Timestamp::now();
    let (tx, mut changes) = mpsc::unbounded_channel::<Change>();
    let mut watches = Watches::start_applications(cluster, &opts.apps, &tx);
    let chosen = chosen_applications(cluster, opts, &watches).await?;
    let deadline = started_at
        .checked_add(k8s_openapi::jiff::SignedDuration::try_from(opts.timeout).unwrap_or_default())
        .unwrap_or(started_at);
    let pending = pending_for(&chosen, opts, started_at, deadline)?;
    let scope = scope_of(&pending);
    let served = Watches::optional_served(cluster).await;
    watches.start_workloads(cluster, scope.clone(), &served, &tx);
    drop(tx);
    let left = opts.timeout.saturating_sub(started.elapsed());
    watches
        .ready(
            left.max(Duration::from_secs(5))
                .min(Duration::from_secs(60)),
        )
        .await
        .map_err(|e| GateError::Cluster(format!("{e:#}")))?;
    let (ptx, mut answers) = mpsc::unbounded_channel::<Probed>();
    let prober = Prober::new(
        probe_via(cluster, opts.probe)?,
        &opts.path,
        opts.probe_interval,
        opts.probe_concurrency,
        ptx,
    );
    let (rtx, mut rounds) = mpsc::unbounded_channel::<RouteRound>();
    let route_prober = match &opts.via_route {
        Some(base) => Some(RouteProber::new(
            http_client()?,
            base.clone(),
            opts.probe_interval,
            rtx,
        )),
        None => None,
    };
    let mut gate = GateLoop::new(opts, &watches.stores, pending, prober, &chosen, deadline);
    gate.route_prober = route_prober;
    if opts.once {
        gate.probe_every_endpoint_once(&mut answers).await;
        gate.ask_every_route_once(&mut rounds).await;
    }
    gate.decide_until_done(&mut changes, &mut answers, &mut rounds)
        .await;
    Ok(gate.outcome(cluster, &scope, watches.kinds.len(), started))
}

/// The Applications the run decides: the watch's first listing, by name or selector.
async fn chosen_applications(
    cluster: &Cluster,
    opts: &Options,
    watches: &Watches,
) -> Result<Vec<Arc<Application>>, GateError> {
    let store = &watches.stores.applications;
    let namespace = &cluster.config().argocd_namespace;
    let listing = Duration::from_secs(30).min(opts.timeout.max(Duration::from_secs(5)));
    if tokio::time::timeout(listing, store.wait_until_ready())
        .await
        .is_err()
    {
        let why = watches
            .last_error()
            .map(|e| e.message)
            .unwrap_or_else(|| "no answer".into());
        return Err(GateError::Cluster(format!(
            "cannot list Applications in namespace {namespace} within {listing:?}: {why}"
        )));
    }
    let listed = store.state();
    match &opts.apps {
        AppFilter::Names(names) => names
            .iter()
            .map(|n| {
                listed
                    .iter()
                    .find(|a| a.metadata.name.as_deref() == Some(n))
                    .cloned()
                    .ok_or_else(|| {
                        GateError::Usage(format!(
                            "Application {n} does not exist in namespace {namespace} (CNPE_ARGOCD_NAMESPACE)"
                        ))
                    })
            })
            .collect(),
        AppFilter::Selector(sel) if listed.is_empty() => Err(GateError::Usage(format!(
            "no Application in namespace {namespace} matches --selector {sel}"
        ))),
        AppFilter::Selector(_) => {
            let mut l = listed;
            l.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            Ok(l)
        }
    }
}

/// One decision request per chosen Application (its SHA and expectation resolved here, at the
/// edge: a SHA it cannot learn or an expectation that does not parse is a usage error).
fn pending_for(
    chosen: &[Arc<Application>],
    opts: &Options,
    started_at: Timestamp,
    deadline: Timestamp,
) -> Result<BTreeMap<String, Pending>, GateError> {
    let mut pending = BTreeMap::new();
    for app in chosen {
        let name = app.metadata.name.clone().unwrap_or_default();
        let sha = sha_of(app, &opts.sha).map_err(GateError::Usage)?;
        let expect = Expect::from_flags(
            opts.expect_body.as_deref(),
            opts.expect_contains.as_deref(),
            opts.expect_json.as_deref(),
            &sha,
        )
        .map_err(|e| GateError::Usage(e.to_string()))?;
        let request = Request {
            namespace: app.metadata.namespace.clone().unwrap_or_default(),
            name: name.clone(),
            sha,
            expect,
            path: opts.path.clone(),
            started: started_at,
            deadline,
            max_answer_age: opts.probe_interval * 3,
            in_operation: opts.in_hook || opts.sha == ShaSource::FromOperation,
            via_route: opts.via_route.is_some(),
        };
        pending.insert(
            name,
            Pending {
                request,
                lie: LieWindow::default(),
                verdict: None,
                done: false,
                dirty_since: Some(Instant::now()),
                namespaces: namespaces_of(app),
                endpoints: Vec::new(),
                requests: Vec::new(),
                last_unmet: Vec::new(),
            },
        );
    }
    Ok(pending)
}

/// One namespace when every Application manages resources in the same one, else the cluster.
fn scope_of(pending: &BTreeMap<String, Pending>) -> Scope {
    let all: BTreeSet<&String> = pending.values().flat_map(|p| &p.namespaces).collect();
    match all.into_iter().collect::<Vec<_>>().as_slice() {
        [one] => Scope::Namespace((*one).clone()),
        _ => Scope::Cluster,
    }
}

fn probe_via(cluster: &Cluster, choice: ProbeChoice) -> Result<Via, GateError> {
    let in_cluster = matches!(
        crate::cluster::kubeconfig::Source::from_env(),
        crate::cluster::kubeconfig::Source::InCluster
    );
    match choice {
        ProbeChoice::Direct => direct(),
        ProbeChoice::Auto if in_cluster => direct(),
        ProbeChoice::PodProxy | ProbeChoice::Auto => Ok(Via::PodProxy(cluster.client())),
    }
}

/// The run loop's state: wait for an event, update the snapshot, decide, report.
struct GateLoop<'a> {
    opts: &'a Options,
    stores: &'a Stores,
    deadline: Timestamp,
    pending: BTreeMap<String, Pending>,
    /// Applications with an input they have not been decided on.
    dirty: BTreeSet<String>,
    undecided: usize,
    probes: Probes,
    prober: Prober,
    /// The Applications behind each endpoint wanted, to route an answer.
    by_endpoint: HashMap<EndpointKey, BTreeSet<String>>,
    /// Routes a watch event to the Applications it can affect: no per-event scan of the fleet.
    index: FleetIndex,
    decided: BTreeSet<AppKey>,
    /// `--via-route`: requests through the ingress controller, their newest answers, and the
    /// Applications behind each.
    route_prober: Option<RouteProber>,
    route_answers: RouteAnswers,
    by_request: HashMap<ClientRequest, BTreeSet<String>>,
    /// The probe schedule changes only when the endpoints wanted change or time passes.
    reschedule: bool,
    next_probe: Option<Instant>,
    latencies: Vec<f64>,
    finals: Vec<f64>,
    events: u64,
    evaluations: u64,
}

impl<'a> GateLoop<'a> {
    fn new(
        opts: &'a Options,
        stores: &'a Stores,
        mut pending: BTreeMap<String, Pending>,
        prober: Prober,
        chosen: &[Arc<Application>],
        deadline: Timestamp,
    ) -> Self {
        let mut index = FleetIndex::new();
        for app in chosen {
            index.upsert(app);
        }
        // The first decisions follow no event: their latency counts from here, not from before
        // the watches' initial listing (which would count the listing as decision latency).
        let listed_at = Instant::now();
        for p in pending.values_mut() {
            p.dirty_since = Some(listed_at);
        }
        GateLoop {
            opts,
            stores,
            deadline,
            dirty: pending.keys().cloned().collect(),
            undecided: pending.len(),
            decided: pending
                .values()
                .map(|p| (p.request.namespace.clone(), p.request.name.clone()))
                .collect(),
            pending,
            probes: Probes::new(),
            prober,
            by_endpoint: HashMap::new(),
            route_prober: None,
            route_answers: RouteAnswers::new(),
            by_request: HashMap::new(),
            index,
            reschedule: true,
            next_probe: None,
            latencies: Vec::new(),
            finals: Vec::new(),
            events: 0,
            evaluations: 0,
        }
    }

    /// `--once`: one snapshot, every endpoint probed once before the one decision each.
    async fn probe_every_endpoint_once(&mut self, answers: &mut mpsc::UnboundedReceiver<Probed>) {
        let mut all: HashSet<EndpointKey> = HashSet::new();
        for p in self.pending.values_mut() {
            let objects = objects_for(self.stores, &p.request, &p.namespaces);
            p.endpoints = endpoint_keys(&objects);
            all.extend(p.endpoints.iter().cloned());
        }
        let keys: Vec<EndpointKey> = all.into_iter().collect();
        self.prober.probe_due(&keys);
        let until = Instant::now() + crate::serving::prober::PROBE_TIMEOUT + Duration::from_secs(1);
        for _ in 0..keys.len() {
            match tokio::time::timeout_at(until.into(), answers.recv()).await {
                Ok(Some(a)) => {
                    self.probes.insert(a.key, a.answer);
                }
                _ => break,
            }
        }
    }

    /// `--once --via-route`: one round of every route's requests through the controller.
    async fn ask_every_route_once(&mut self, rounds: &mut mpsc::UnboundedReceiver<RouteRound>) {
        let Some(rp) = &mut self.route_prober else {
            return;
        };
        let mut all: HashSet<ClientRequest> = HashSet::new();
        for p in self.pending.values_mut() {
            let objects = objects_for(self.stores, &p.request, &p.namespaces);
            p.requests = decide::client_requests_of(&p.request, &objects);
            all.extend(p.requests.iter().cloned());
        }
        let requests: Vec<ClientRequest> = all.into_iter().collect();
        rp.round_due(&requests);
        // A round is `tries` requests one after the other, each bounded by PROBE_TIMEOUT.
        let most = requests.iter().map(|r| r.tries).max().unwrap_or(0);
        let until = Instant::now() + crate::serving::prober::PROBE_TIMEOUT * (most + 1);
        for _ in 0..requests.len() {
            match tokio::time::timeout_at(until.into(), rounds.recv()).await {
                Ok(Some(r)) => {
                    self.route_answers.insert(r.request, r.answers);
                }
                _ => break,
            }
        }
    }

    async fn decide_until_done(
        &mut self,
        changes: &mut mpsc::UnboundedReceiver<Change>,
        answers: &mut mpsc::UnboundedReceiver<Probed>,
        rounds: &mut mpsc::UnboundedReceiver<RouteRound>,
    ) {
        loop {
            self.decide_dirty();
            if self.undecided == 0 {
                return;
            }
            self.schedule_probes();
            let wake = self.wake_at();
            tokio::select! {
                Some(c) = changes.recv() => {
                    // Take every event already queued: one decision for a burst.
                    let mut next = Some(c);
                    while let Some(c) = next {
                        self.on_change(&c);
                        next = changes.try_recv().ok();
                    }
                }
                Some(a) = answers.recv() => {
                    let mut next = Some(a);
                    while let Some(a) = next {
                        self.on_answer(a);
                        next = answers.try_recv().ok();
                    }
                }
                Some(r) = rounds.recv() => self.on_round(r),
                _ = tokio::time::sleep_until(wake.into()) => self.on_wake(),
            }
        }
    }

    /// Sleep until the next probe due, or the deadline (an event or answer wakes earlier).
    fn wake_at(&self) -> Instant {
        let to_deadline = Duration::try_from(self.deadline.duration_since(Timestamp::now()))
            .unwrap_or(Duration::ZERO);
        self.next_probe
            .unwrap_or_else(|| Instant::now() + self.opts.probe_interval)
            .min(Instant::now() + to_deadline + Duration::from_millis(1))
    }

    fn on_change(&mut self, c: &Change) {
        self.events += 1;
        for key in route(&mut self.index, self.stores, c, &self.decided) {
            mark(&mut self.pending, &mut self.dirty, &key.1, c.at);
        }
    }

    fn on_answer(&mut self, a: Probed) {
        for name in self.by_endpoint.get(&a.key).into_iter().flatten() {
            mark(&mut self.pending, &mut self.dirty, name, a.arrived);
        }
        self.probes.insert(a.key, a.answer);
    }

    fn on_round(&mut self, r: RouteRound) {
        for name in self.by_request.get(&r.request).into_iter().flatten() {
            mark(&mut self.pending, &mut self.dirty, name, r.arrived);
        }
        self.route_answers.insert(r.request, r.answers);
    }

    /// A probe fell due (its answer will mark the Applications behind it), or the deadline
    /// passed: then every undecided Application is decided once more.
    fn on_wake(&mut self) {
        if Timestamp::now() >= self.deadline {
            let t = Instant::now();
            for (name, p) in self.pending.iter_mut().filter(|(_, p)| !p.done) {
                p.dirty_since.get_or_insert(t);
                self.dirty.insert(name.clone());
            }
        }
        self.reschedule = true;
    }

    fn schedule_probes(&mut self) {
        if !self.reschedule {
            return;
        }
        let wanted: HashSet<EndpointKey> = self.by_endpoint.keys().cloned().collect();
        let keys: Vec<EndpointKey> = wanted.iter().cloned().collect();
        self.prober.retain(&wanted);
        self.prober.probe_due(&keys);
        self.next_probe = self.prober.next_due(&keys);
        if let Some(rp) = &mut self.route_prober {
            let wanted: HashSet<ClientRequest> = self.by_request.keys().cloned().collect();
            let requests: Vec<ClientRequest> = wanted.iter().cloned().collect();
            rp.retain(&wanted);
            rp.round_due(&requests);
            self.next_probe = match (self.next_probe, rp.next_due(&requests)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        self.reschedule = false;
    }

    /// Decides every Application with an input it has not been decided on.
    fn decide_dirty(&mut self) {
        let now_i = Instant::now();
        let now = Timestamp::now();
        for name in std::mem::take(&mut self.dirty) {
            let Some(p) = self.pending.get_mut(&name).filter(|p| !p.done) else {
                continue;
            };
            let Some(since) = p.dirty_since.take() else {
                continue;
            };
            let objects = objects_for(self.stores, &p.request, &p.namespaces);
            if let Some(app) = &objects.application {
                // Resources can appear after the first listing (a sync in progress).
                p.namespaces.extend(namespaces_of(app));
            }
            let endpoints = endpoint_keys(&objects);
            if endpoints != p.endpoints {
                rewire(&mut self.by_endpoint, &name, &p.endpoints, &endpoints);
                p.endpoints = endpoints;
                self.reschedule = true;
            }
            if self.route_prober.is_some() {
                let requests = decide::client_requests_of(&p.request, &objects);
                if requests != p.requests {
                    rewire(&mut self.by_request, &name, &p.requests, &requests);
                    p.requests = requests;
                    self.reschedule = true;
                }
            }
            self.evaluations += 1;
            let inputs = (&self.probes, &self.route_answers);
            let v = decision(p, &objects, inputs, now, self.opts.once);
            let ms = now_i.saturating_duration_since(since).as_secs_f64() * 1000.0;
            self.latencies.push(ms);
            report_progress(self.opts, p, &v);
            if v.decision != Decision::Pending {
                p.done = true;
                self.undecided -= 1;
                rewire(&mut self.by_endpoint, &name, &p.endpoints, &[]);
                rewire(&mut self.by_request, &name, &p.requests, &[]);
                self.reschedule = true;
                self.finals.push(ms);
            }
            p.verdict = Some(v);
        }
    }

    fn outcome(
        mut self,
        cluster: &Cluster,
        scope: &Scope,
        watch_streams: usize,
        started: Instant,
    ) -> Outcome {
        self.latencies.sort_by(f64::total_cmp);
        let verdicts: Vec<Verdict> = std::mem::take(&mut self.pending)
            .into_values()
            .filter_map(|p| p.verdict)
            .collect();
        let approved =
            !verdicts.is_empty() && verdicts.iter().all(|v| v.decision == Decision::Approved);
        Outcome {
            approved,
            run: RunStats {
                applications: verdicts.len(),
                scope: match scope {
                    Scope::Namespace(n) => format!("namespace {n}"),
                    Scope::Cluster => "cluster".into(),
                },
                probe_via: self.prober.via().into(),
                watch_streams,
                watch_requests: cluster.watch_count(),
                api_requests: cluster.request_count(),
                probes: self.prober.sent(),
                route_requests: self.route_prober.as_ref().map_or(0, RouteProber::sent),
                watch_events: self.events,
                evaluations: self.evaluations,
                decision_latency_ms_p50: percentile(&self.latencies, 0.5),
                decision_latency_ms_p99: percentile(&self.latencies, 0.99),
                decision_latency_ms_max: self.latencies.last().copied().unwrap_or(0.0),
                final_decision_latency_ms: self.finals,
                wall_seconds: started.elapsed().as_secs_f64(),
            },
            verdicts,
        }
    }
}

fn endpoint_keys(objects: &Objects) -> Vec<EndpointKey> {
    decide::endpoints(objects)
        .into_iter()
        .map(|e| e.key)
        .collect()
}

/// One decision on a snapshot, with the lie window carried from the decisions before it.
fn decision(
    p: &mut Pending,
    objects: &Objects,
    (probes, route_answers): (&Probes, &RouteAnswers),
    now: Timestamp,
    once: bool,
) -> Verdict {
    let mut v = decide::decide_with_routes(&p.request, objects, probes, route_answers, now, &p.lie);
    let all_serving = !v.endpoints.is_empty() && v.endpoints.iter().all(|e| e.matched);
    let (synced, healthy) = decide::argo_says(objects.application.as_deref(), &p.request.sha);
    p.lie.observe(now, synced, healthy, all_serving);
    v.lie_window = p.lie.clone();
    if once && v.decision == Decision::Pending {
        // One snapshot, no second look: say why it was not approved in it.
        v.reject_unapproved("approved in one snapshot (--once)");
    }
    v
}

/// `--progress`: a line on stderr whenever a pending Application's unmet conditions change.
fn report_progress(opts: &Options, p: &mut Pending, v: &Verdict) {
    let unmet: Vec<String> = v
        .unmet
        .iter()
        .map(|u| format!("{:?} {}: {}", u.condition, u.subject, u.found))
        .collect();
    if opts.progress && unmet != p.last_unmet && v.decision == Decision::Pending {
        let elapsed = Timestamp::now()
            .duration_since(p.request.started)
            .as_secs_f64();
        eprintln!(
            "gate {} [{elapsed:.1}s]: waiting on {}",
            p.request.name,
            if unmet.is_empty() {
                "nothing".to_string()
            } else {
                unmet.join("; ")
            }
        );
    }
    p.last_unmet = unmet;
}

fn direct() -> Result<Via, GateError> {
    http_client().map(Via::Direct)
}

/// The HTTP client of direct probes and of requests through the ingress controller.
fn http_client() -> Result<reqwest::Client, GateError> {
    crate::cluster::probe::http_client_builder()
        .timeout(crate::serving::prober::PROBE_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| {
            // reqwest's "builder error" alone hides the cause (e.g. no CA certificates to load).
            let mut why = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                why.push_str(&format!(": {s}"));
                source = s.source();
            }
            GateError::Cluster(format!("HTTP client: {why}"))
        })
}

/// The Applications an event can affect, keeping `index` current: an Application's event
/// re-indexes it from the store (it is gone: forgotten); a relist of Applications re-indexes
/// every one it had.
fn route(
    index: &mut FleetIndex,
    stores: &Stores,
    c: &Change,
    decided: &BTreeSet<AppKey>,
) -> BTreeSet<AppKey> {
    if c.kind == Kind::Application {
        let keys: BTreeSet<AppKey> = if c.is_relist() {
            decided.clone()
        } else {
            let key = (c.namespace.clone(), c.name.clone());
            if !decided.contains(&key) {
                // Not one this run decides.
                return BTreeSet::new();
            }
            BTreeSet::from([key])
        };
        for (ns, name) in &keys {
            match stores.applications.get(&ObjectRef::new(name).within(ns)) {
                Some(app) => index.upsert(&app),
                None => index.remove(ns, name),
            }
        }
        // A deleted Application is still decided (its absence rejects it).
        return keys;
    }
    index.affected(c.kind, &c.meta)
}

/// Marks one Application for a new decision, from the earliest input it has not seen.
fn mark(
    pending: &mut BTreeMap<String, Pending>,
    dirty: &mut BTreeSet<String>,
    name: &str,
    at: Instant,
) {
    if let Some(p) = pending.get_mut(name).filter(|p| !p.done) {
        p.dirty_since.get_or_insert(at);
        dirty.insert(name.to_string());
    }
}

/// Moves `name` from the Applications behind its old endpoints (or requests) to those behind
/// its new ones.
fn rewire<K: std::hash::Hash + Eq + Clone>(
    by_endpoint: &mut HashMap<K, BTreeSet<String>>,
    name: &str,
    old: &[K],
    new: &[K],
) {
    for k in old {
        if let Some(names) = by_endpoint.get_mut(k) {
            names.remove(name);
            if names.is_empty() {
                by_endpoint.remove(k);
            }
        }
    }
    for k in new {
        by_endpoint
            .entry(k.clone())
            .or_default()
            .insert(name.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::argo::{
        ApplicationSpec, ApplicationStatus, Operation, OperationState, SyncOperation, SyncResult,
    };

    const SHA: &str = "3b18e512dba79e4c8300dd08aeb37f8e728b8dad";
    const OLD: &str = "4c29f623ecb80f5d9411ee19bfc48f9f839c9ebe";

    fn app(result: Option<&str>, asked: Option<&str>) -> Application {
        Application {
            status: Some(ApplicationStatus {
                operation_state: Some(OperationState {
                    phase: Some("Running".into()),
                    sync_result: result.map(|r| SyncResult {
                        revision: Some(r.into()),
                        revisions: None,
                    }),
                    operation: Some(Operation {
                        sync: Some(SyncOperation {
                            revision: asked.map(str::to_string),
                        }),
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            api_version: crate::cluster::argo::API_VERSION.into(),
            kind: "Application".into(),
            metadata: Default::default(),
            spec: ApplicationSpec::default(),
        }
    }

    /// The PostSync hook's SHA: the resolved revision, or the asked one when it is a full SHA
    /// (a manual sync asks for the targetRevision, e.g. "main"); two different SHAs refuse.
    #[test]
    fn sha_from_operation() {
        let s = |r, a| sha_of(&app(r, a), &ShaSource::FromOperation);
        assert_eq!(s(Some(SHA), Some(SHA)), Ok(Sha::parse(SHA).unwrap()));
        assert_eq!(s(Some(SHA), Some("main")), Ok(Sha::parse(SHA).unwrap()));
        assert_eq!(s(Some(SHA), None), Ok(Sha::parse(SHA).unwrap()));
        assert_eq!(s(None, Some(SHA)), Ok(Sha::parse(SHA).unwrap()));
        assert!(s(Some(SHA), Some(OLD))
            .unwrap_err()
            .contains("two revisions"));
        assert!(s(None, Some("main"))
            .unwrap_err()
            .contains("found no full SHA"));
        assert!(s(Some("3b18e51"), None)
            .unwrap_err()
            .contains("found no full SHA"));
    }

    fn stores_with(apps: &[Application]) -> Stores {
        use kube::runtime::{reflector, watcher};
        let (applications, mut writer) = reflector::store();
        for a in apps {
            writer.apply_watcher_event(&watcher::Event::Apply(a.clone()));
        }
        let mut stores = Stores::default();
        stores.applications = applications;
        stores
    }

    fn managed(name: &str) -> Application {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "argocd"},
            "spec": {"project": "p", "source": {"repoURL": "git://x"},
                     "destination": {"namespace": name}},
            "status": {"resources": [{"group": "apps", "kind": "Deployment",
                                      "namespace": name, "name": "web"}]},
        }))
        .unwrap()
    }

    fn change(kind: Kind, ns: &str, name: &str, owner: Option<(&str, &str)>) -> Change {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
        Change {
            kind,
            namespace: ns.into(),
            name: name.into(),
            meta: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                owner_references: owner.map(|(k, n)| {
                    vec![OwnerReference {
                        kind: k.into(),
                        name: n.into(),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            },
            at: Instant::now(),
        }
    }

    fn key(name: &str) -> AppKey {
        ("argocd".into(), name.into())
    }

    /// An event reaches only the Applications it can affect; an Application's own event
    /// re-indexes it from the store, and a deleted one is still decided but no longer routed to.
    #[test]
    fn events_are_routed_to_their_applications_only() {
        let (shop, blog) = (managed("shop"), managed("blog"));
        let decided = BTreeSet::from([key("shop"), key("blog")]);
        let mut index = FleetIndex::new();
        index.upsert(&shop);
        index.upsert(&blog);
        let stores = stores_with(std::slice::from_ref(&blog));
        let pod = change(
            Kind::Pod,
            "shop",
            "web-5d8f-x",
            Some(("ReplicaSet", "web-5d8f")),
        );
        assert_eq!(
            route(&mut index, &stores, &pod, &decided),
            BTreeSet::from([key("shop")])
        );
        let other = change(Kind::Application, "argocd", "other", None);
        assert!(route(&mut index, &stores, &other, &decided).is_empty());
        // "shop" is not in the store: deleted. Its event still marks it (its absence rejects).
        let gone = change(Kind::Application, "argocd", "shop", None);
        assert_eq!(
            route(&mut index, &stores, &gone, &decided),
            BTreeSet::from([key("shop")])
        );
        assert!(route(&mut index, &stores, &pod, &decided).is_empty());
        let deployment = change(Kind::Deployment, "blog", "web", None);
        assert_eq!(
            route(&mut index, &stores, &deployment, &decided),
            BTreeSet::from([key("blog")])
        );
        // A relist of Applications marks every decided one.
        let relist = change(Kind::Application, "", "", None);
        assert_eq!(route(&mut index, &stores, &relist, &decided), decided);
    }

    #[test]
    fn rewire_moves_an_application_between_endpoints_and_forgets_empty_ones() {
        let ep = |ip: &str| EndpointKey {
            namespace: "shop".into(),
            service: "web".into(),
            ip: ip.into(),
            port: 80,
            pod: None,
        };
        let mut by: HashMap<EndpointKey, BTreeSet<String>> = HashMap::new();
        rewire(&mut by, "shop", &[], &[ep("10.0.0.1"), ep("10.0.0.2")]);
        rewire(&mut by, "blog", &[], &[ep("10.0.0.2")]);
        rewire(
            &mut by,
            "shop",
            &[ep("10.0.0.1"), ep("10.0.0.2")],
            &[ep("10.0.0.3")],
        );
        assert!(!by.contains_key(&ep("10.0.0.1")));
        assert_eq!(by[&ep("10.0.0.2")], BTreeSet::from(["blog".to_string()]));
        assert_eq!(by[&ep("10.0.0.3")], BTreeSet::from(["shop".to_string()]));
        rewire(&mut by, "blog", &[ep("10.0.0.2")], &[]);
        rewire(&mut by, "shop", &[ep("10.0.0.3")], &[]);
        assert!(by.is_empty());
    }
}
