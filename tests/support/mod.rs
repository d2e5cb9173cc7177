//! Shared by the integration tests: one insta configuration (snapshots in `snapshots/`, no
//! module prefix) and one set of evidence redactions.
#![allow(dead_code)]

pub mod peers;

/// The project's snapshot settings.
pub fn snapshot_settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"));
    s.set_prepend_module_to_snapshot(false);
    s
}

/// Snapshot settings for evidence JSON: times and SHAs redacted. `live` also redacts what a
/// real run varies (generations, URLs, messages, error bodies) but keeps the healthy page
/// exact.
pub fn evidence_settings(live: bool) -> insta::Settings {
    let mut s = snapshot_settings();
    s.add_redaction(".observed_at", "[time]");
    s.add_redaction(".target_revision", "[sha]");
    s.add_redaction(".observed_revision", "[sha]");
    s.add_redaction(".operation_revision", "[sha]");
    if live {
        s.set_omit_expression(true);
        s.add_redaction(".generation", "[generation]");
        s.add_redaction(".observed_generation", "[generation]");
        s.add_redaction(".http_url", "[url]");
        s.add_redaction(".conditions[].message", "[message]");
        // A 503 from the service proxy carries an API Status whose text varies by Kubernetes
        // version; the healthy page is compared exactly.
        s.add_dynamic_redaction(".http_body", |v, _| {
            if v.as_str() == Some("labhub-cnpe-v1") {
                v
            } else {
                "[error body]".into()
            }
        });
        s.add_dynamic_redaction(".http_error", |v, _| {
            if v.as_str().is_some() {
                "[error]".into()
            } else {
                v
            }
        });
    }
    s
}

// ---- the real-cluster harness shared by tests/lab.rs and tests/traps.rs

use cnpe_lab::cluster::provision::{self, ClusterChoice, Provisioned};
use cnpe_lab::config::Config;
use cnpe_lab::lock::{LabLock, LockError};

pub const HOW_TO_GET_A_CLUSTER: &str =
    "run `CNPE_CLUSTER=hermetic cargo test --test lab` (builds and starts our \
own Kubernetes + Argo CD; air-gapped, root) or point KUBECONFIG at a lab cluster";

/// `CNPE_LAB_REQUIRED=1` (CI sets it whenever it brought a cluster up): no usable cluster is
/// a failure, not an ignore.
pub fn required() -> bool {
    std::env::var("CNPE_LAB_REQUIRED").is_ok_and(|v| v == "1")
}

/// Why a real-cluster suite does not run (typed: nothing re-parses a message).
#[derive(Debug)]
pub enum NotRun {
    /// `--list`: nothing runs.
    Listing,
    Config(String),
    Provision(String),
    /// Another cnpe-lab process holds the evidence directory: always a failure.
    Locked(LockError),
    /// No usable cluster (kubeconfig, connection, an API that does not answer).
    Unreachable(String),
    /// The cluster answers but the lab's records are missing: the suite was asked for on a
    /// live cluster before the lab ran, always a failure.
    LabMissing(String),
    /// The cluster and the records are there but preparing the fixture failed: a failure.
    Broken(String),
}

impl NotRun {
    /// Whether every trial fails (rather than being ignored).
    pub fn fails(&self) -> bool {
        match self {
            NotRun::Listing => false,
            NotRun::Locked(_) | NotRun::LabMissing(_) | NotRun::Broken(_) => true,
            NotRun::Config(_) | NotRun::Provision(_) | NotRun::Unreachable(_) => required(),
        }
    }

    pub fn why(&self) -> String {
        match self {
            NotRun::Listing => "listing only".into(),
            NotRun::Config(s)
            | NotRun::Provision(s)
            | NotRun::Unreachable(s)
            | NotRun::LabMissing(s)
            | NotRun::Broken(s) => s.clone(),
            NotRun::Locked(e) => e.to_string(),
        }
    }
}

/// Configuration, cluster (CNPE_CLUSTER), lock: everything before the first trial.
/// Provisioning runs before any async runtime thread reads the environment it sets.
pub fn prepare(listing: bool) -> (Result<(Config, LabLock), NotRun>, Option<Provisioned>) {
    let cfg = match Config::from_env() {
        Ok(c) => c,
        Err(e) => return (Err(NotRun::Config(format!("configuration: {e:#}"))), None),
    };
    let choice = match ClusterChoice::from_env() {
        Ok(c) => c,
        Err(e) => return (Err(NotRun::Config(format!("{e:#}"))), None),
    };
    if listing {
        return (Err(NotRun::Listing), None);
    }
    let provisioned = match provision::provision(choice, &cfg.bare_repo) {
        Ok(p) => p,
        Err(e) => {
            return (
                Err(NotRun::Provision(format!("CNPE_CLUSTER={choice:?}: {e:#}"))),
                None,
            )
        }
    };
    match cnpe_lab::lock::acquire(&cfg.evidence_dir) {
        Ok(lock) => (Ok((cfg, lock)), provisioned),
        Err(e) => (Err(NotRun::Locked(e)), provisioned),
    }
}

/// How a cluster suite's `main` begins (tests/lab.rs and tests/traps.rs).
pub struct Suite<T> {
    pub args: libtest_mimic::Arguments,
    pub rt: tokio::runtime::Runtime,
    /// The fixture, which holds the lab's lock until the suite ends: no other cnpe-lab process
    /// uses the directories meanwhile, and its Git writes may clear what a killed run left.
    pub connected: Option<T>,
    pub availability: Availability,
    pub provisioned: Option<Provisioned>,
}

/// Arguments (one test thread: the trials share one cluster), configuration, cluster, lock
/// (handed to `connect`, whose fixture keeps it), the connected fixture or why there is none,
/// and the NOT RUN banner.
pub fn start_suite<T>(
    suite: &str,
    connect: impl FnOnce(&tokio::runtime::Runtime, Config, LabLock) -> Result<T, NotRun>,
) -> Suite<T> {
    let mut args = libtest_mimic::Arguments::from_args();
    args.test_threads = Some(1);
    let (prepared, provisioned) = prepare(args.list);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let connected = prepared.and_then(|(cfg, lock)| connect(&rt, cfg, lock));
    let availability = Availability::new(suite, connected.as_ref().err());
    Suite {
        args,
        rt,
        connected: connected.ok(),
        availability,
        provisioned,
    }
}

/// The API server answers within 10 s.
pub async fn api_answers(cluster: &cnpe_lab::cluster::Cluster) -> Result<(), NotRun> {
    match tokio::time::timeout(std::time::Duration::from_secs(10), cluster.version()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(NotRun::Unreachable(format!(
            "API server {} does not answer: {e:#}",
            cluster.api_url()
        ))),
        Err(_) => Err(NotRun::Unreachable(format!(
            "API server {} does not answer within 10s",
            cluster.api_url()
        ))),
    }
}

// ---- a connected lab cluster after the lab: shared by the traps and the faults

use cnpe_lab::cluster::live::LiveWatch;
use cnpe_lab::cluster::probe::Probe;
use cnpe_lab::cluster::Cluster;
use cnpe_lab::lab::git::{parse_sha, GitOps};
use cnpe_lab::lab::manifests::{to_file_bytes, RELEASE_PATH};
use cnpe_lab::observe::observer::{wait_for, WaitError, WaitSpec, Waited};
use cnpe_lab::observe::predicates::Target;
use cnpe_lab::records::{self, Record, RecordPaths};
use std::time::{Duration, Instant};

pub const RUN_THE_LAB_FIRST: &str =
    "the traps and faults run after the lab (cargo test --test lab)";

pub struct LabCluster {
    pub cfg: Config,
    pub cluster: Cluster,
    pub probe: Probe,
    pub live: LiveWatch,
    pub records: RecordPaths,
    pub recovered: String,
    pub bad: String,
    /// The lab's lock, held while the suite runs; what [`GitOps::prepare`] requires.
    pub lock: LabLock,
}

impl LabCluster {
    /// Connects and reads the lab's records; an error says what is missing.
    pub async fn connect(cfg: Config, lock: LabLock) -> Result<Self, NotRun> {
        let unreachable = |e: anyhow::Error| NotRun::Unreachable(format!("{e:#}"));
        let cluster = Cluster::connect(&cfg).await.map_err(unreachable)?;
        api_answers(&cluster).await?;
        let records = RecordPaths::new(&cfg.evidence_dir);
        let sha = |r: Record| -> Result<String, NotRun> {
            let p = records.path(r);
            records::read_sha(&p)
                .map_err(|e| NotRun::Broken(format!("{e:#}")))?
                .map(|sha| sha.to_string())
                .ok_or_else(|| {
                    NotRun::LabMissing(format!(
                        "{} is not recorded: {RUN_THE_LAB_FIRST}",
                        p.display()
                    ))
                })
        };
        let (recovered, bad) = (sha(Record::RecoveredSha)?, sha(Record::BadSha)?);
        if !records.path(Record::RecoveredJson).exists() {
            return Err(NotRun::LabMissing(format!(
                "recovered.json is not recorded: {RUN_THE_LAB_FIRST}"
            )));
        }
        Ok(LabCluster {
            probe: Probe::for_cluster(&cluster).map_err(unreachable)?,
            live: LiveWatch::start(&cluster),
            cfg,
            cluster,
            records,
            recovered,
            bad,
            lock,
        })
    }

    /// The working copy, for a Git write (under the lab's lock).
    pub fn git(&self) -> Result<GitOps, String> {
        GitOps::prepare(&self.cfg, &self.lock).map_err(|e| format!("{e:#}"))
    }

    pub async fn point_at(&self, revision: &str) -> Result<Instant, String> {
        self.cluster
            .set_target_revision(revision)
            .await
            .map_err(|e| format!("{e:#}"))?;
        Ok(Instant::now())
    }

    /// Waits on the shared watches (quietly: the caller reports).
    pub async fn wait(
        &mut self,
        target: Target,
        sha: &str,
        body: &str,
        deadline: Duration,
    ) -> Result<Waited, WaitError> {
        let spec = WaitSpec::new(&self.cfg, target, sha, body).deadline(deadline);
        wait_for(
            &self.cluster,
            &mut self.live,
            &self.probe,
            &spec,
            &mut |_| {},
        )
        .await
    }

    /// Back to the recorded recovery, serving: every trap and fault ends here.
    pub async fn restore(&mut self) -> Result<(), String> {
        let rec = self.recovered.clone();
        // A failing sync retries with backoff and blocks the next one: terminate it first, as
        // `argocd app terminate-op` does (phase Terminating on the Application).
        let app = self
            .cluster
            .application()
            .await
            .map_err(|e| format!("{e:#}"))?;
        let running = app
            .and_then(|a| a.status?.operation_state?.phase)
            .as_deref()
            == Some("Running");
        if running {
            let patch = serde_json::json!({"status": {"operationState": {"phase": "Terminating"}}});
            self.cluster
                .applications()
                .patch(
                    &self.cfg.application,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&patch),
                )
                .await
                .map_err(|e| format!("terminating the running sync: {e:#}"))?;
            // The controller ends it on its next pass: follow the Application until it has.
            let deadline = Instant::now() + self.cfg.wait_deadline;
            loop {
                let app = self
                    .cluster
                    .application()
                    .await
                    .map_err(|e| format!("{e:#}"))?;
                let phase = app.and_then(|a| a.status?.operation_state?.phase);
                if !matches!(phase.as_deref(), Some("Running" | "Terminating")) {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(format!(
                        "the running sync did not terminate within {:?} (phase {phase:?})",
                        self.cfg.wait_deadline
                    ));
                }
                self.live.changed(Duration::from_secs(1)).await;
            }
        }
        self.point_at(&rec).await?;
        // After a failed sync whose old release kept running, the live state already matches
        // `rec`: auto-sync has nothing to do and the failed operation would stay the last one.
        // Ask for one sync explicitly (what `argocd app sync` writes), so the operation is ours.
        let app = self
            .cluster
            .application()
            .await
            .map_err(|e| format!("{e:#}"))?;
        let op = app.and_then(|a| a.status?.operation_state);
        let done = op.as_ref().is_some_and(|o| {
            o.phase.as_deref() == Some("Succeeded")
                && o.sync_result.as_ref().and_then(|r| r.revision.as_deref()) == Some(rec.as_str())
        });
        if !done {
            let patch = serde_json::json!({"operation": {"initiatedBy": {"username": "cnpe-lab-traps"}, "sync": {"revision": rec}}});
            self.cluster
                .applications()
                .patch(
                    &self.cfg.application,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&patch),
                )
                .await
                .map_err(|e| format!("requesting a sync of the recovered release: {e:#}"))?;
        }
        let (body, deadline) = (self.cfg.body.clone(), self.cfg.wait_deadline * 2);
        self.wait(Target::Healthy, &rec, &body, deadline)
            .await
            .map(|_| ())
            .map_err(|e| format!("restoring the recovered release failed: {e}"))
    }

    /// Commits `release` on the working copy (history only grows) and pushes it.
    pub fn commit(&self, release: &serde_json::Value, message: &str) -> Result<String, String> {
        let git = self.git()?;
        let bytes = to_file_bytes(release);
        // An earlier interrupted trial may have left exactly this release at HEAD: reuse it.
        if let Some(h) = git.head().map_err(|e| format!("{e:#}"))? {
            if git
                .file_at(h, RELEASE_PATH)
                .map_err(|e| format!("{e:#}"))?
                .as_deref()
                == Some(&bytes[..])
            {
                git.push().map_err(|e| format!("{e:#}"))?;
                return Ok(h.to_string());
            }
        }
        let oid = git
            .commit_file(RELEASE_PATH, &bytes, message)
            .map_err(|e| format!("{e:#}"))?;
        git.push().map_err(|e| format!("{e:#}"))?;
        Ok(oid.to_string())
    }

    /// Reverts `sha` through Git (a new commit) and pushes.
    pub fn revert(&self, sha: &str) -> Result<String, String> {
        let git = self.git()?;
        let oid = git
            .revert(parse_sha(sha).map_err(|e| format!("{e:#}"))?)
            .map_err(|e| format!("{e:#}"))?;
        git.push().map_err(|e| format!("{e:#}"))?;
        Ok(oid.to_string())
    }
}

/// A real-cluster suite's verdict before its first trial: run, ignore (loudly) or fail.
pub struct Availability {
    /// Why not, and whether that fails every trial.
    pub unavailable: Option<(String, bool)>,
}

impl Availability {
    /// Prints the NOT RUN banner (not when only listing).
    pub fn new(suite: &str, not_run: Option<&NotRun>) -> Self {
        let unavailable = not_run.map(|n| (n.why(), n.fails()));
        if let (Some((why, fail)), false) = (&unavailable, matches!(not_run, Some(NotRun::Listing)))
        {
            eprintln!("\n=================== {suite} NOT RUN ===================");
            eprintln!("{why}");
            eprintln!(
                "every trial {}; {HOW_TO_GET_A_CLUSTER}",
                if *fail {
                    "FAILS"
                } else {
                    "is IGNORED (not passed)"
                }
            );
            eprintln!("=======================================================\n");
        }
        Availability { unavailable }
    }

    /// For a trial: `Some` when it must not run (ignored or failed).
    pub fn verdict(&self, suite: &str) -> Option<cnpe_lab::report::Outcome> {
        let (why, fail) = self.unavailable.as_ref()?;
        Some(if *fail {
            cnpe_lab::report::Outcome::Failed(format!("{suite} NOT RUN: {why}"))
        } else {
            cnpe_lab::report::Outcome::Ignored(format!(
                "see {suite} NOT RUN above; {HOW_TO_GET_A_CLUSTER}"
            ))
        })
    }
}
