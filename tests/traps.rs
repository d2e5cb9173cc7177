//! `cargo test --test traps`: false-approval traps and faults on the real cluster, after the
//! lab (`traps` sorts after `lab`, so plain `cargo test` runs them in that order). Each trap
//! puts the cluster into a state where a common check approves a release that does not serve
//! (or is not what was asked for), runs the usual checks side by side, and proves that our gate
//! rejects it and our wait says what is really going on. Verdicts and latencies go to
//! `$CNPE_EVIDENCE_DIR/traps.json`. The traps leave the Application at the recovered SHA,
//! serving. Same loud-ignore and CNPE_LAB_REQUIRED rules as the lab.

#[path = "traps/faults.rs"]
mod faults;
#[path = "traps/kills.rs"]
mod kills;
mod support;

use support::peers::{self, Peer, PeerResult, Verdict};

use cnpe_lab::config::Config;
use cnpe_lab::lab::manifests;
use cnpe_lab::lock::LabLock;
use cnpe_lab::observe::evidence::Evidence;
use cnpe_lab::observe::observer;
use cnpe_lab::observe::observer::WaitError;
use cnpe_lab::observe::predicates::{Field, Target};
use cnpe_lab::records;
use cnpe_lab::report::{Echo, Outcome, Reporter, Suite, TrialResult};
use libtest_mimic::{Completion, Failed, Trial};
use serde::Serialize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Serialize)]
struct TrapRecord {
    trap: &'static str,
    release: String,
    /// Whether the release really served the expected revision and body, measured when our
    /// wait ended: HTTP 200 with the expected page and Argo CD's operation Succeeded at it.
    serves_expected: bool,
    peers: Vec<PeerResult>,
}

struct Fixture {
    lab: support::LabCluster,
    results: Vec<TrapRecord>,
}

impl std::ops::Deref for Fixture {
    type Target = support::LabCluster;
    fn deref(&self) -> &Self::Target {
        &self.lab
    }
}

impl std::ops::DerefMut for Fixture {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.lab
    }
}

impl Fixture {
    async fn observe(&self) -> Evidence {
        observer::observe_once(&self.cluster, Some(&self.live), &self.probe)
            .await
            .expect("a snapshot of the watches needs no request")
    }

    /// Runs every peer at once, right after a change, each timed from `changed`.
    async fn peers(
        &mut self,
        changed: Instant,
        sha: &str,
    ) -> (Vec<PeerResult>, Result<Evidence, WaitError>) {
        let deadline = self.cfg.wait_deadline;
        let ns = self.cfg.namespace.clone();
        let workload = format!("deploy/{}", self.cfg.workload);
        let rollout = peers::rollout_status(&ns, &workload, deadline);
        let read = async {
            let ev = self.observe().await;
            let ok =
                ev.sync.as_deref() == Some("Synced") && ev.health.as_deref() == Some("Healthy");
            let http_ok = ev.http_code == Some(200)
                && ev.http_body.as_deref() == Some(self.cfg.body.as_str());
            let gate = cnpe_lab::release_gate::evaluate_value(&ev.to_value(), sha, &self.cfg.body);
            vec![
                PeerResult::new(
                    Peer::SyncedHealthyRead,
                    Verdict::of(ok),
                    changed,
                    format!(
                        "{}/{}",
                        ev.sync.as_deref().unwrap_or("-"),
                        ev.health.as_deref().unwrap_or("-")
                    ),
                ),
                PeerResult::new(
                    Peer::HttpBodyCheck,
                    Verdict::of(http_ok),
                    changed,
                    format!(
                        "HTTP {:?} {:?}",
                        ev.http_code,
                        ev.http_body.as_deref().unwrap_or("")
                    ),
                ),
                PeerResult::new(
                    Peer::CnpeGate,
                    Verdict::of(gate.approved),
                    changed,
                    gate.report_lines().join("; "),
                ),
            ]
        };
        let as_pods =
            peers::argo_runs_as_pods(self.cluster.client(), &self.cfg.argocd_namespace).await;
        let argo_wait = peers::argocd_app_wait(
            as_pods,
            &self.cfg.argocd_namespace,
            &self.cfg.application,
            deadline,
        );
        let (rollout, reads, argo) = tokio::join!(rollout, read, argo_wait);
        // Our wait runs last on the shared watches (it needs &mut), from the same change.
        let body = self.cfg.body.clone();
        let left = deadline
            .saturating_sub(changed.elapsed())
            .max(Duration::from_secs(5));
        let waited = self.lab.wait(Target::Healthy, sha, &body, left).await;
        let ours = PeerResult::new(
            Peer::CnpeWait,
            Verdict::of(waited.is_ok()),
            changed,
            match &waited {
                Ok(_) => "reached".into(),
                Err(e) => e
                    .to_string()
                    .lines()
                    .take(12)
                    .collect::<Vec<_>>()
                    .join(" | "),
            },
        );
        let mut all = vec![rollout];
        all.extend(reads);
        all.push(argo);
        all.push(ours);
        (all, waited.map(|w| w.evidence))
    }
}

fn verdict_of(peers: &[PeerResult], p: Peer) -> &PeerResult {
    peers
        .iter()
        .find(|r| r.peer == p)
        .expect("every peer reports")
}

/// Whether the release served the expected page at the expected revision (measured).
fn serves(ev: &Evidence, sha: &str, body: &str) -> bool {
    ev.http_code == Some(200)
        && ev.http_body.as_deref() == Some(body)
        && ev.operation_revision.as_deref() == Some(sha)
        && ev.operation_phase.as_deref() == Some("Succeeded")
}

fn timeout_parts(waited: &Result<Evidence, WaitError>) -> Result<(&Evidence, &str), String> {
    match waited {
        Err(WaitError::Timeout {
            evidence,
            explanation,
            ..
        }) => Ok((evidence, explanation)),
        Err(e) => Err(format!("our wait failed for another reason: {e}")),
        Ok(_) => Err("our wait approved".into()),
    }
}

fn contains_all(text: &str, needles: &[&str]) -> Result<(), String> {
    match needles.iter().find(|n| !text.contains(**n)) {
        Some(n) => Err(format!("explanation lacks {n:?}:\n{text}")),
        None => Ok(()),
    }
}

/// 1 + 2: redeploy the bad SHA (its template was deployed before, so the Deployment goes back
/// to an existing ReplicaSet). Right after the change the old generation is still Synced and
/// Healthy; then the rollback never re-arms the progress deadline (kubernetes#106054).
async fn trap_stale_healthy_and_reused_replica_set(f: &mut Fixture) -> Result<String, String> {
    let bad = f.bad.clone();
    let changed = f.point_at(&bad).await?;
    let (peers, waited) = f.peers(changed, &bad).await;
    peers::check_peers(&peers, &[])?;
    let (ev, _) = timeout_parts(&waited)?;
    // The trap's state: the bad release's pods never get ready, so nothing is routed.
    let Err(WaitError::Timeout { unmet, .. }) = &waited else {
        unreachable!("timeout_parts checked it")
    };
    if !unmet
        .iter()
        .any(|u| u.what == Field::ReadyEndpoints && u.found == "0")
    {
        return Err(format!(
            "trap not reached: the wait's unmet conditions do not show 0 ready endpoints: {unmet:?}"
        ));
    }
    let serves_expected = serves(ev, &bad, &f.cfg.body);
    // What is really going on, whichever way this cluster's Deployment controller goes.
    let (body, deadline) = (f.cfg.body.clone(), f.cfg.wait_deadline);
    let outage = f.lab.wait(Target::Failed, &bad, &body, deadline).await;
    let how = match &outage {
        Ok(w) => format!(
            "this cluster re-armed the deadline: Degraded after {:.1}s",
            w.elapsed.as_secs_f64()
        ),
        Err(WaitError::Timeout {
            explanation: outage_text,
            evidence,
            ..
        }) => {
            if evidence.ready_endpoints != 0 {
                return Err(format!(
                    "the bad release has ready endpoints?\n{outage_text}"
                ));
            }
            contains_all(
                outage_text,
                &[
                    "existing ReplicaSet",
                    "kubernetes/kubernetes#106054",
                    "NewReplicaSetAvailable",
                    "0 ready endpoints for",
                ],
            )?;
            "rollback to a reused ReplicaSet: explanation names it, the stale Progressing condition, #106054 and the outage time".into()
        }
        Err(e) => return Err(format!("{e}")),
    };
    f.results.push(TrapRecord {
        trap: "stale_healthy_then_reused_replica_set",
        release: bad,
        serves_expected,
        peers,
    });
    f.restore().await?;
    Ok(how)
}

/// 3: Synced and Healthy at the right SHA while the page is wrong.
async fn trap_wrong_body(f: &mut Fixture) -> Result<String, String> {
    let mut wrong = f.cfg.clone();
    wrong.body = "labhub-cnpe-trap-wrong-body".into();
    let release = serde_json::to_value(manifests::baseline_release(&wrong)).unwrap();
    let sha = f.commit(&release, "Trap: a release whose page differs")?;
    let changed = f.point_at(&sha).await?;
    let (peers, waited) = f.peers(changed, &sha).await;
    peers::check_peers(&peers, &[])?;
    let (ev, explanation) = timeout_parts(&waited)?;
    // The trap is real only if everything but the body says "serving".
    if ev.sync.as_deref() != Some("Synced")
        || ev.health.as_deref() != Some("Healthy")
        || ev.http_code != Some(200)
    {
        return Err(format!(
            "trap not reached: {}/{} HTTP {:?}\n{explanation}",
            ev.sync.as_deref().unwrap_or("-"),
            ev.health.as_deref().unwrap_or("-"),
            ev.http_code
        ));
    }
    contains_all(explanation, &["http_body", "serves the wrong content"])?;
    let gate = cnpe_lab::release_gate::evaluate_value(&ev.to_value(), &sha, &f.cfg.body);
    if gate.approved || !gate.failing_fields().contains(&"http_body") {
        return Err(format!(
            "the gate does not name http_body: {:?}",
            gate.report_lines()
        ));
    }
    f.results.push(TrapRecord {
        trap: "synced_healthy_wrong_body",
        release: sha.clone(),
        serves_expected: serves(ev, &sha, &f.cfg.body),
        peers,
    });
    // Revert in Git first: the branch tip must not keep a trap release if restoring fails.
    f.revert(&sha)?;
    f.restore().await?;
    Ok(format!(
        "{sha}: Synced/Healthy/HTTP 200 with the wrong page; gate names http_body; reverted in Git"
    ))
}

/// 4: the observed revision is right, but the operation failed (a kind outside the project's
/// whitelist), while the OLD release keeps serving the expected page.
async fn trap_operation_failed(f: &mut Fixture) -> Result<String, String> {
    let mut release = serde_json::to_value(manifests::baseline_release(&f.cfg)).unwrap();
    release["items"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "trap-not-permitted", "namespace": f.cfg.namespace},
            "data": {"why": "ConfigMap is not in the project's namespaceResourceWhitelist"}
        }));
    let sha = f.commit(
        &release,
        "Trap: a release with a kind the project does not permit",
    )?;
    let changed = f.point_at(&sha).await?;
    let (peers, waited) = f.peers(changed, &sha).await;
    peers::check_peers(&peers, &[])?;
    let (ev, explanation) = timeout_parts(&waited)?;
    if ev.observed_revision.as_deref() != Some(sha.as_str())
        || ev.operation_phase.as_deref() == Some("Succeeded")
    {
        return Err(format!(
            "trap not reached: observed {:?}, operation {:?}\n{explanation}",
            ev.observed_revision, ev.operation_phase
        ));
    }
    contains_all(
        explanation,
        &["operation_phase", "Argo CD has not finished applying"],
    )?;
    if verdict_of(&peers, Peer::HttpBodyCheck).verdict != Verdict::Approved {
        return Err(format!(
            "expected the old release to keep serving the page: {:?}",
            verdict_of(&peers, Peer::HttpBodyCheck)
        ));
    }
    f.results.push(TrapRecord {
        trap: "observed_revision_right_operation_failed",
        release: sha.clone(),
        serves_expected: serves(ev, &sha, &f.cfg.body),
        peers,
    });
    // Revert in Git first: the branch tip must not keep a trap release if restoring fails.
    f.revert(&sha)?;
    f.restore().await?;
    Ok(format!(
        "{sha}: observed revision right, operation {:?}, old page still served; rejected",
        ev.operation_phase
    ))
}

/// 5: targetRevision is a branch name. The branch tip serves the right page, but what it means
/// moves with every push: no revision-pinned approval can hold.
async fn trap_branch_target(f: &mut Fixture) -> Result<String, String> {
    let git = f.git()?;
    let tip = git
        .head()
        .map_err(|e| format!("{e:#}"))?
        .ok_or("no HEAD")?
        .to_string();
    let branch = f.cfg.branch.clone();
    let changed = f.point_at(&branch).await?;
    let (peers, waited) = f.peers(changed, &tip).await;
    peers::check_peers(&peers, &[])?;
    let (ev, explanation) = timeout_parts(&waited)?;
    if ev.target_revision.as_deref() != Some(branch.as_str()) {
        return Err(format!(
            "trap not reached: targetRevision {:?}",
            ev.target_revision
        ));
    }
    contains_all(explanation, &["not a full SHA"])?;
    f.results.push(TrapRecord {
        trap: "target_revision_is_a_branch",
        release: format!("{branch} ({tip})"),
        serves_expected: serves(ev, &tip, &f.cfg.body),
        peers,
    });
    f.restore().await?;
    Ok(format!(
        "targetRevision {branch:?} (tip {tip}): rejected, cause named"
    ))
}

type TrapFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, String>> + 'a>>;
type TrapFn = for<'a> fn(&'a mut Fixture) -> TrapFuture<'a>;

const TRAPS: [(&str, TrapFn); 4] = [
    ("trap_stale_healthy_then_reused_replica_set", |f| {
        Box::pin(trap_stale_healthy_and_reused_replica_set(f))
    }),
    ("trap_synced_healthy_wrong_body", |f| {
        Box::pin(trap_wrong_body(f))
    }),
    ("trap_observed_revision_right_operation_failed", |f| {
        Box::pin(trap_operation_failed(f))
    }),
    ("trap_target_revision_is_a_branch", |f| {
        Box::pin(trap_branch_target(f))
    }),
];

/// Faults on the hermetic cluster (its processes can be paused); ignored elsewhere, with why.
const FAULTS: [(&str, TrapFn); 4] = [
    ("fault_git_daemon_down_during_an_argo_fetch", |f| {
        Box::pin(faults::git_daemon_down(&mut f.lab))
    }),
    ("fault_api_server_restarted_during_a_wait", |f| {
        Box::pin(faults::api_server_restarted(&mut f.lab))
    }),
    ("fault_argocd_stopped_during_a_wait", |f| {
        Box::pin(faults::argo_stopped(&mut f.lab))
    }),
    ("fault_api_server_stopped_during_a_wait", |f| {
        Box::pin(faults::api_server_stopped(&mut f.lab))
    }),
];

/// One fault trial's outcome, for `faults.json` and the summary at the end of the log.
#[derive(Debug, Clone, Serialize)]
struct FaultRecord {
    fault: String,
    passed: bool,
    /// What happened and the recovery time, or why it failed.
    detail: String,
    seconds: f64,
}

struct Shared {
    faults: Mutex<Vec<FaultRecord>>,
    /// The kill trials' results: (trial name, result, seconds), run together once.
    kills: std::sync::OnceLock<Vec<kills::KillResult>>,
    /// The kill trials this invocation selected (its name filter and --skip): only those run.
    kill_selection: Vec<kills::Scenario>,
    rt: tokio::runtime::Runtime,
    fixture: Mutex<Option<Fixture>>,
    availability: support::Availability,
    /// The one reporter (JUnit), when connected to a lab cluster.
    reporter: Option<Reporter>,
}

fn connect(
    rt: &tokio::runtime::Runtime,
    cfg: Config,
    lock: LabLock,
) -> Result<Fixture, support::NotRun> {
    rt.block_on(async {
        let mut lab = support::LabCluster::connect(cfg, lock).await?;
        // Start from the recovered release, serving (an interrupted earlier run may not have).
        lab.restore().await.map_err(support::NotRun::Broken)?;
        Ok(Fixture {
            lab,
            results: Vec::new(),
        })
    })
}

fn main() {
    let suite = support::start_suite("TRAPS", connect);
    let reporter = suite
        .connected
        .as_ref()
        .map(|f| Reporter::new(Suite::Traps, &f.records.dir, Echo::Libtest));
    let shared = Arc::new(Shared {
        faults: Mutex::new(Vec::new()),
        kills: std::sync::OnceLock::new(),
        kill_selection: kills::Scenario::all()
            .into_iter()
            .filter(|sc| selected(&suite.args, &sc.trial_name()))
            .collect(),
        rt: suite.rt,
        fixture: Mutex::new(suite.connected),
        availability: suite.availability,
        reporter,
    });
    let (args, provisioned) = (suite.args, suite.provisioned);
    let mut trials: Vec<Trial> = TRAPS
        .iter()
        .map(|(name, trap)| {
            let shared = shared.clone();
            let trap = *trap;
            Trial::ignorable_test(*name, move || run_trial(&shared, name, trap))
        })
        .collect();
    trials.extend(FAULTS.iter().map(|(name, fault)| {
        let shared = shared.clone();
        let fault = *fault;
        Trial::ignorable_test(*name, move || {
            if let Err(why) = faults::hermetic_pids() {
                if shared.availability.unavailable.is_none() {
                    let o = Outcome::Ignored(format!("not the hermetic cluster: {why}"));
                    return report(&shared, name, o, 0.0);
                }
            }
            run_trial(&shared, name, fault)
        })
    }));
    // The real binary SIGKILLed as each step begins, then resumed (any cluster; own tenants),
    // and twice more with the lock file a kill inside a Git write leaves (a stale index.lock,
    // seen on a fresh machine; the bare repository's branch lock): all must resume 12/12.
    // They run kills::SLOTS at a time, when the first of them is reached (after the faults).
    trials.extend(kills::Scenario::all().into_iter().map(|sc| {
        let shared = shared.clone();
        let name = sc.trial_name();
        Trial::ignorable_test(name.clone(), move || kill_trial(&shared, &name))
    }));
    // Off the cluster, as root: the evidence directory on a full and a read-only filesystem.
    for (name, trial) in [
        (
            "fault_evidence_dir_on_a_full_filesystem",
            faults::full_filesystem as fn() -> Outcome,
        ),
        (
            "fault_evidence_dir_on_a_read_only_filesystem",
            faults::read_only_filesystem,
        ),
    ] {
        let shared = shared.clone();
        trials.push(Trial::ignorable_test(name, move || {
            let t0 = Instant::now();
            let outcome = trial();
            // Through `finish`, so faults.json (and ci/repeat-faults.sh's table) has them too.
            finish(&shared, name, outcome, t0.elapsed().as_secs_f64())
        }));
    }
    // Off the cluster: the traps' peer assertions fail on records that are no trap.
    {
        let shared = shared.clone();
        let name = "peer_checks_fail_on_records_that_are_no_trap";
        trials.push(Trial::ignorable_test(name, move || {
            let t0 = Instant::now();
            let cases = peers::checks_of_the_checks();
            let failed: Vec<String> = cases
                .iter()
                .filter_map(|(case, r)| r.as_ref().err().map(|e| format!("{case}: {e}")))
                .collect();
            let outcome = if failed.is_empty() {
                Outcome::Passed(format!("{} cases, each as expected", cases.len()))
            } else {
                Outcome::Failed(failed.join("\n"))
            };
            report(&shared, name, outcome, t0.elapsed().as_secs_f64())
        }));
    }
    let conclusion = libtest_mimic::run(&args, trials);
    if let Some(f) = shared.fixture.lock().unwrap().as_mut() {
        // Whatever happened, leave the recovered release serving.
        if let Err(e) = shared.rt.block_on(f.restore()) {
            eprintln!("traps: {e}");
        }
        if !f.results.is_empty() {
            let verdicts = serde_json::to_value(&f.results).unwrap();
            match records::write_json_numbered(&f.records.dir, "traps", &verdicts) {
                Ok(path) => eprintln!("traps: verdicts in {}", path.display()),
                Err(e) => eprintln!("traps: verdicts not written: {e:#}"),
            }
            for t in &f.results {
                let line: Vec<String> = t
                    .peers
                    .iter()
                    .map(|p| format!("{:?}={:?} ({:.1}s)", p.peer, p.verdict, p.seconds))
                    .collect();
                eprintln!("  {}: {}", t.trap, line.join(", "));
            }
        }
    }
    let faults = shared.faults.lock().unwrap().clone();
    if !faults.is_empty() {
        eprintln!("fault outcomes (recovery times in each line):");
        for r in &faults {
            let verdict = if r.passed { "ok  " } else { "FAIL" };
            let first = r.detail.lines().next().unwrap_or("");
            eprintln!("  {verdict} {} ({:.0}s): {first}", r.fault, r.seconds);
        }
        if let Some(f) = shared.fixture.lock().unwrap().as_ref() {
            let outcomes = serde_json::to_value(&faults).unwrap();
            match records::write_json_numbered(&f.records.dir, "faults", &outcomes) {
                Ok(path) => eprintln!("traps: fault outcomes in {}", path.display()),
                Err(e) => eprintln!("traps: fault outcomes not written: {e:#}"),
            }
        }
    }
    if let Some(r) = &shared.reporter {
        r.write(None);
    }
    if let Some(p) = provisioned {
        eprintln!("{}", p.farewell());
    }
    conclusion.exit();
}

fn run_trial(
    shared: &Shared,
    name: &str,
    trap: impl for<'a> FnOnce(&'a mut Fixture) -> TrapFuture<'a>,
) -> Result<Completion, Failed> {
    let t0 = Instant::now();
    let outcome = trial_outcome(shared, trap);
    finish(shared, name, outcome, t0.elapsed().as_secs_f64())
}

/// Whether libtest's name filter and `--skip` select `name` (the kill trials run as one batch,
/// so a filtered invocation such as `-- fault_sigkill_in_step1` must run only its own).
fn selected(args: &libtest_mimic::Arguments, name: &str) -> bool {
    let matches = |pattern: &str| {
        if args.exact {
            name == pattern
        } else {
            name.contains(pattern)
        }
    };
    args.filter.as_deref().is_none_or(matches) && !args.skip.iter().any(|s| matches(s))
}

/// A kill trial: its result from the batch that runs every kill trial at once.
fn kill_trial(shared: &Shared, name: &str) -> Result<Completion, Failed> {
    if let Some(o) = shared.availability.verdict("TRAPS") {
        return finish(shared, name, o, 0.0);
    }
    let results = shared.kills.get_or_init(|| {
        let cfg = shared
            .fixture
            .lock()
            .unwrap()
            .as_ref()
            .expect("connected")
            .cfg
            .clone();
        let chosen = &shared.kill_selection;
        eprintln!(
            "  running the {} selected kill trials, {} at a time on their own tenants",
            chosen.len(),
            kills::SLOTS
        );
        shared.rt.block_on(kills::run_all(&cfg, chosen))
    });
    let (outcome, seconds) = match results.iter().find(|(n, ..)| n == name) {
        Some((_, Ok(line), s)) => (Outcome::Passed(line.clone()), *s),
        Some((_, Err(e), s)) => (Outcome::Failed(e.clone()), *s),
        None => (Outcome::Failed(format!("{name} was not run")), 0.0),
    };
    finish(shared, name, outcome, seconds)
}

/// Keeps a fault trial's outcome for faults.json and reports the trial.
fn finish(
    shared: &Shared,
    name: &str,
    outcome: Outcome,
    seconds: f64,
) -> Result<Completion, Failed> {
    if name.starts_with("fault_") && !matches!(outcome, Outcome::Ignored(_)) {
        shared.faults.lock().unwrap().push(FaultRecord {
            fault: name.into(),
            passed: outcome.passed(),
            detail: match &outcome {
                Outcome::Passed(s) | Outcome::Failed(s) | Outcome::Ignored(s) => s.clone(),
                Outcome::Skipped { after } => format!("skipped after {after}"),
            },
            seconds,
        });
    }
    report(shared, name, outcome, seconds)
}

/// Hands a trial's outcome to the reporter (when connected) and returns its verdict.
fn report(
    shared: &Shared,
    name: &str,
    outcome: Outcome,
    seconds: f64,
) -> Result<Completion, Failed> {
    let verdict = outcome.libtest();
    match &shared.reporter {
        Some(r) => r.finished(TrialResult {
            name: name.into(),
            outcome,
            seconds,
        }),
        None => {
            if let Outcome::Passed(s) = &outcome {
                eprintln!("  {s}");
            }
        }
    }
    verdict
}

fn trial_outcome(
    shared: &Shared,
    trap: impl for<'a> FnOnce(&'a mut Fixture) -> TrapFuture<'a>,
) -> Outcome {
    if let Some(o) = shared.availability.verdict("TRAPS") {
        return o;
    }
    let mut guard = shared.fixture.lock().unwrap();
    let f = guard.as_mut().expect("connected");
    match shared.rt.block_on(trap(f)) {
        Ok(summary) => Outcome::Passed(summary),
        Err(e) => {
            let _ = shared.rt.block_on(f.restore());
            Outcome::Failed(e)
        }
    }
}
