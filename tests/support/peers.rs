//! The common checks our traps run side by side with ours (shared by tests/traps.rs and
//! tests/serving_traps.rs): how each is run on the real cluster and how its answer becomes a
//! verdict. An error is its own verdict, never counted as a rejection.

use cnpe_lab::cluster::kubeconfig;
use serde::Serialize;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The checks (closed set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Peer {
    /// `kubectl rollout status` (per workload).
    KubectlRolloutStatus,
    /// The Application's sync/health read at once: approve on Synced + Healthy.
    SyncedHealthyRead,
    /// The same read 10 s after the change (Kargo's first fix for stale health, kargo#2205).
    HealthyAfterCooldown,
    /// `argocd app wait --core --sync --health` (where Argo CD runs as pods).
    ArgocdAppWait,
    /// One HTTP GET through the Service: approve on 200 with the expected body.
    HttpBodyCheck,
    /// The lab's release gate on one live observation.
    CnpeGate,
    /// Our `wait healthy` on the expected SHA, to its deadline.
    CnpeWait,
    /// `cnpe-lab gate`: every endpoint, Argo CD fresh at the SHA, every workload at it.
    CnpeServingGate,
    /// `kubectl argo rollouts status` (Argo Rollouts' plugin, from the module the controller
    /// is built from): once (`--watch=false`, exit 0 unless Degraded) or watching to a timeout
    /// (exit 0 only on Healthy).
    ArgoRolloutsStatus,
}

impl Peer {
    /// Ours, as opposed to the common checks the traps are about.
    pub fn ours(self) -> bool {
        matches!(
            self,
            Peer::CnpeGate | Peer::CnpeWait | Peer::CnpeServingGate
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Approved,
    Rejected,
    /// The peer ran and failed for a reason of its own (a configuration error, a crash): it
    /// said nothing about the release, so it is neither an approval nor a rejection.
    Errored,
    /// The peer cannot run on this cluster (the reason is in `detail`).
    NotRun,
}

impl Verdict {
    /// A command-line peer's verdict: exit 0 approves; a non-zero exit is a rejection only
    /// when the output says the release was judged (`judged` holds), else the peer errored.
    pub fn of_command(code: Option<i32>, output: &str, judged: &[&str]) -> Verdict {
        match code {
            Some(0) => Verdict::Approved,
            _ if judged.iter().any(|j| output.contains(j)) => Verdict::Rejected,
            _ => Verdict::Errored,
        }
    }

    pub fn of(approved: bool) -> Verdict {
        if approved {
            Verdict::Approved
        } else {
            Verdict::Rejected
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct PeerResult {
    pub peer: Peer,
    /// What it checked, when a peer runs once per workload ("deploy/web").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    pub verdict: Verdict,
    /// From the change to the verdict.
    pub seconds: f64,
    pub detail: String,
}

impl PeerResult {
    pub fn new(peer: Peer, verdict: Verdict, since: Instant, detail: impl Into<String>) -> Self {
        PeerResult {
            peer,
            subject: None,
            verdict,
            seconds: since.elapsed().as_secs_f64(),
            detail: detail.into(),
        }
    }

    pub fn on(mut self, subject: &str) -> Self {
        self.subject = Some(subject.into());
        self
    }
}

/// Why `argocd app wait --core` cannot run on a cluster whose Argo CD runs as host processes.
pub const NOT_PODS: &str = "Argo CD does not run as pods here";

pub fn find_tool(name: &str, env: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env) {
        return Some(p.into());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/var/cache/cnpe-hermetic/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Runs a peer's command; returns its exit code and its output's last line.
pub async fn run_tool(
    program: &PathBuf,
    args: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
    timeout: Duration,
) -> (Option<i32>, String) {
    let child = tokio::process::Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(timeout, child).await {
        Ok(Ok(out)) => {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            (
                out.status.code(),
                text.lines().last().unwrap_or("").trim().to_string(),
            )
        }
        Ok(Err(e)) => (None, format!("could not run: {e}")),
        Err(_) => (None, format!("no answer within {timeout:?}")),
    }
}

/// `kubectl rollout status WORKLOAD` in `ns`, to `deadline`.
pub async fn rollout_status(ns: &str, workload: &str, deadline: Duration) -> PeerResult {
    let since = Instant::now();
    let Some(k) = find_tool("kubectl", "CNPE_KUBECTL") else {
        return PeerResult::new(
            Peer::KubectlRolloutStatus,
            Verdict::NotRun,
            since,
            "kubectl not found",
        )
        .on(workload);
    };
    let t = format!("--timeout={}s", deadline.as_secs());
    let (code, detail) = run_tool(
        &k,
        &["-n", ns, "rollout", "status", workload, &t],
        &[],
        deadline + Duration::from_secs(5),
    )
    .await;
    let verdict = Verdict::of_command(
        code,
        &detail,
        &["timed out", "exceeded its progress deadline"],
    );
    PeerResult::new(Peer::KubectlRolloutStatus, verdict, since, detail).on(workload)
}

/// `kubectl argo rollouts status ROLLOUT` in `ns`: `watch` to `deadline`, or once.
pub async fn argo_rollouts_status(
    ns: &str,
    rollout: &str,
    watch: bool,
    deadline: Duration,
) -> PeerResult {
    let since = Instant::now();
    let subject = format!(
        "rollout/{rollout} {}",
        if watch { "--timeout" } else { "--watch=false" }
    );
    let Some(plugin) = find_tool("kubectl-argo-rollouts", "CNPE_ARGO_ROLLOUTS_PLUGIN") else {
        return PeerResult::new(
            Peer::ArgoRolloutsStatus,
            Verdict::NotRun,
            since,
            "kubectl-argo-rollouts not found (ci/hermetic/build.sh rollouts builds it)",
        )
        .on(&subject);
    };
    let t = format!("{}s", deadline.as_secs());
    let mut args = vec!["-n", ns, "status", rollout];
    if watch {
        args.extend(["--timeout", &t]);
    } else {
        args.push("--watch=false");
    }
    let (code, detail) = run_tool(&plugin, &args, &[], deadline + Duration::from_secs(5)).await;
    let verdict = Verdict::of_command(code, &detail, &["exceeded timeout", "degraded"]);
    PeerResult::new(Peer::ArgoRolloutsStatus, verdict, since, detail).on(&subject)
}

/// Whether Argo CD runs as pods in `argocd_namespace` (else `argocd --core` cannot run).
pub async fn argo_runs_as_pods(client: kube::Client, argocd_namespace: &str) -> bool {
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(client, argocd_namespace);
    let lp = kube::api::ListParams::default().labels("app.kubernetes.io/name=argocd-repo-server");
    pods.list(&lp)
        .await
        .map(|l| !l.items.is_empty())
        .unwrap_or(false)
}

/// `argocd app wait NS/APP --core --sync --health` to `deadline`, with a kube context whose
/// namespace is Argo CD's (core mode reads it there, argo-cd#7721).
pub async fn argocd_app_wait(
    as_pods: bool,
    argocd_namespace: &str,
    app: &str,
    deadline: Duration,
) -> PeerResult {
    let since = Instant::now();
    let peer = Peer::ArgocdAppWait;
    if !as_pods {
        return PeerResult::new(
            peer,
            Verdict::NotRun,
            since,
            format!("{NOT_PODS} (--core port-forwards to its pods)"),
        );
    }
    let Some(a) = find_tool("argocd", "CNPE_ARGOCD") else {
        return PeerResult::new(peer, Verdict::NotRun, since, "argocd CLI not found");
    };
    let overlay = kubeconfig::with_namespace(&kubeconfig::Source::from_env(), argocd_namespace)
        .and_then(|(doc, rest)| {
            let dir = tempfile::tempdir()?;
            let path = dir.path().join("argocd-core.kubeconfig");
            std::fs::write(&path, doc)?;
            let mut list = path.into_os_string();
            list.push(":");
            list.push(rest);
            Ok((dir, list))
        });
    let (_dir, kubeconfig) = match overlay {
        Ok(x) => x,
        Err(e) => {
            return PeerResult::new(
                peer,
                Verdict::Errored,
                since,
                format!("no kube context for core mode: {e:#}"),
            )
        }
    };
    let t = deadline.as_secs().to_string();
    let target = format!("{argocd_namespace}/{app}");
    let (code, detail) = run_tool(
        &a,
        &[
            "app",
            "wait",
            &target,
            "--core",
            "--sync",
            "--health",
            "--timeout",
            &t,
        ],
        &[("KUBECONFIG", kubeconfig.as_os_str())],
        deadline + Duration::from_secs(5),
    )
    .await;
    let verdict = Verdict::of_command(code, &detail, &["timed out", "Degraded", "degraded"]);
    PeerResult::new(peer, verdict, since, detail)
}

/// The trap's peers did what a trap is about: every peer that can run on this cluster ran
/// (an error is not a verdict; `allowed_errors` names peer/subject pairs whose error is the
/// peer's own answer, like `kubectl rollout status` refusing an OnDelete StatefulSet), at
/// least one common check approved (the false approval the trap exists for), and all of ours
/// rejected.
pub fn check_peers(peers: &[PeerResult], allowed_errors: &[(Peer, &str)]) -> Result<(), String> {
    for r in peers {
        let allowed_not_run = r.peer == Peer::ArgocdAppWait && r.detail.starts_with(NOT_PODS);
        let allowed_error = allowed_errors
            .iter()
            .any(|(p, s)| *p == r.peer && r.subject.as_deref() == Some(*s));
        match r.verdict {
            Verdict::Errored if !allowed_error => {
                return Err(format!(
                    "peer {:?} {} did not run properly: {}",
                    r.peer,
                    r.subject.as_deref().unwrap_or(""),
                    r.detail
                ))
            }
            Verdict::NotRun if !allowed_not_run => {
                return Err(format!(
                    "peer {:?} should run on this cluster but did not: {}",
                    r.peer, r.detail
                ))
            }
            _ => {}
        }
    }
    if !peers
        .iter()
        .any(|r| !r.peer.ours() && r.verdict == Verdict::Approved)
    {
        return Err(format!(
            "no common check approved, so this is not a false-approval trap here: {:?}",
            peers
                .iter()
                .map(|r| (r.peer, r.subject.clone(), r.verdict.clone()))
                .collect::<Vec<_>>()
        ));
    }
    for r in peers.iter().filter(|r| r.peer.ours()) {
        if r.verdict != Verdict::Rejected {
            return Err(format!("FALSE APPROVAL by {:?}: {}", r.peer, r.detail));
        }
    }
    Ok(())
}

/// What argocd printed on kind before core mode got Argo CD's namespace: an error, which must not
/// count as a rejection.
const ARGOCD_FATAL: &str = r#"{"level":"fatal","msg":"configmap \"argocd-cm\" not found"}"#;

/// Checks of the checks, off the cluster: each case gives [`check_peers`] (or
/// [`Verdict::of_command`]) a trap record that must fail it, and one that must pass, so a
/// trap's peer assertions are seen to fail when the trap state is not what it claims.
/// Returns each case's name and its result (Err: the check did not do what it says).
pub fn checks_of_the_checks() -> Vec<(&'static str, Result<String, String>)> {
    let t = Instant::now();
    let r = |peer, verdict| PeerResult::new(peer, verdict, t, "");
    let rejected_by_ours = || {
        vec![
            r(Peer::CnpeGate, Verdict::Rejected),
            r(Peer::CnpeWait, Verdict::Rejected),
        ]
    };
    let with = |extra: Vec<PeerResult>| {
        let mut v = extra;
        v.extend(rejected_by_ours());
        v
    };
    let must_fail =
        |peers: Vec<PeerResult>, allowed: &[(Peer, &str)], needle: &str| match check_peers(
            &peers, allowed,
        ) {
            Ok(()) => Err(format!(
                "check_peers passed a record it must fail ({needle})"
            )),
            Err(e) if e.contains(needle) => Ok(e),
            Err(e) => Err(format!(
                "check_peers failed for another reason than {needle:?}: {e}"
            )),
        };
    let argo_not_pods = PeerResult::new(
        Peer::ArgocdAppWait,
        Verdict::NotRun,
        t,
        format!("{NOT_PODS} (--core port-forwards to its pods)"),
    );
    let mut cases = vec![
        (
            "a trap where no common check approved is no trap",
            must_fail(
                with(vec![
                    r(Peer::SyncedHealthyRead, Verdict::Rejected),
                    r(Peer::HttpBodyCheck, Verdict::Rejected),
                ]),
                &[],
                "no common check approved",
            ),
        ),
        (
            "a trap where one of ours approved fails as a false approval",
            must_fail(
                vec![
                    r(Peer::SyncedHealthyRead, Verdict::Approved),
                    r(Peer::CnpeGate, Verdict::Rejected),
                    r(Peer::CnpeWait, Verdict::Approved),
                ],
                &[],
                "FALSE APPROVAL by CnpeWait",
            ),
        ),
        (
            "a peer that errored is not counted, it fails the trap",
            must_fail(
                with(vec![
                    r(Peer::SyncedHealthyRead, Verdict::Approved),
                    PeerResult::new(Peer::ArgocdAppWait, Verdict::Errored, t, ARGOCD_FATAL),
                ]),
                &[],
                "did not run properly",
            ),
        ),
        (
            "argocd app wait not run where Argo CD runs as pods fails the trap",
            must_fail(
                with(vec![
                    r(Peer::SyncedHealthyRead, Verdict::Approved),
                    r(Peer::ArgocdAppWait, Verdict::NotRun),
                ]),
                &[],
                "should run on this cluster but did not",
            ),
        ),
        (
            "an allowed error is allowed only for its own peer and subject",
            must_fail(
                with(vec![
                    r(Peer::SyncedHealthyRead, Verdict::Approved),
                    r(Peer::KubectlRolloutStatus, Verdict::Errored).on("statefulset/db"),
                ]),
                &[(Peer::KubectlRolloutStatus, "deploy/web")],
                "did not run properly",
            ),
        ),
    ];
    let passing = with(vec![
        r(Peer::SyncedHealthyRead, Verdict::Approved),
        argo_not_pods,
        r(Peer::KubectlRolloutStatus, Verdict::Errored).on("statefulset/db"),
    ]);
    cases.push((
        "a real trap record passes (argocd not on pods, an allowed error)",
        check_peers(&passing, &[(Peer::KubectlRolloutStatus, "statefulset/db")])
            .map(|()| "passed".into()),
    ));
    // A timeout is the peer's own "not yet", a rejection; ARGOCD_FATAL is an error.
    let judged = ["timed out", "Degraded", "degraded"];
    for (name, code, out, want) in [
        (
            "argocd's fatal configuration error is Errored",
            Some(20),
            ARGOCD_FATAL,
            Verdict::Errored,
        ),
        (
            "a timed-out wait is Rejected",
            Some(1),
            "timed out (30s) waiting for app",
            Verdict::Rejected,
        ),
        (
            "a killed peer (no exit code) without a judgement is Errored",
            None,
            "no answer within 30s",
            Verdict::Errored,
        ),
        ("exit 0 is Approved", Some(0), "", Verdict::Approved),
    ] {
        let got = Verdict::of_command(code, out, &judged);
        cases.push((
            name,
            if got == want {
                Ok(format!("{got:?}"))
            } else {
                Err(format!(
                    "Verdict::of_command({code:?}, {out:?}) = {got:?}, want {want:?}"
                ))
            },
        ));
    }
    cases
}
