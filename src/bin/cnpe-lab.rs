//! `cnpe-lab`: the lab's observation tool and runner.
//!
//!   cnpe-lab observe                      evidence JSON of the live state, once
//!   cnpe-lab wait healthy|failed FULL_SHA watch until it holds (deadline CNPE_WAIT_SECONDS, 45 s)
//!   cnpe-lab render --sha SHA --out DIR   write release.json, project.json, application.json
//!   cnpe-lab run                          perform the whole lab, then grade it
//!   cnpe-lab verify                       only the grader's checks
//!   cnpe-lab report                       render report.svg again from the records
//!   cnpe-lab steps                        list the steps and checks
//!   cnpe-lab reset --yes                  delete the lab's Application, namespace and directories
//!   cnpe-lab gate --app NAME --sha SHA --expect-body TEXT ...
//!                                         approve an Argo CD Application only when every
//!                                         endpoint serves the expected revision (exit 0/1/2)
//!
//! JSON goes to stdout, diagnostics to stderr. Exit 0 success, 1 failure, 2 usage error or
//! another cnpe-lab process holding the evidence directory.

#![warn(clippy::too_many_lines)]

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use cnpe_lab::cluster::live::LiveWatch;
use cnpe_lab::cluster::probe::Probe;
use cnpe_lab::cluster::provision;
use cnpe_lab::cluster::Cluster;
use cnpe_lab::config::Config;
use cnpe_lab::lab::manifests::{self, to_file_bytes};
use cnpe_lab::lab::runner::{Mode, Runner};
use cnpe_lab::lab::step::Step;
use cnpe_lab::lab::Lab;
use cnpe_lab::lock::LabLock;
use cnpe_lab::observe::observer::{self, wait_for, WaitError, WaitSpec};
use cnpe_lab::observe::predicates::Target;
use cnpe_lab::records;
use cnpe_lab::report::waits::WaitLines;
use cnpe_lab::report::Echo;
use cnpe_lab::sha;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "cnpe-lab",
    about = "Synced is not serving: the GitOps lab on a real cluster",
    version
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the evidence JSON of the live state (one read).
    Observe,
    /// Watch until the state holds for FULL_SHA, then print its evidence JSON.
    Wait {
        state: WaitState,
        /// Full 40-hex lowercase commit SHA.
        sha: String,
    },
    /// Write the lab's manifests for SHA into DIR (existing different files are kept: error).
    Render {
        #[arg(long)]
        sha: String,
        #[arg(long)]
        out: PathBuf,
    },
    /// Perform steps 1-8 (resuming from records) and grade the result. CNPE_CLUSTER=hermetic
    /// or kind starts that cluster first.
    Run,
    /// Only the grader's checks on what is recorded and live.
    Verify,
    /// Render report.svg (and nothing else) from the records in CNPE_EVIDENCE_DIR.
    Report,
    /// List the lab's steps and grading checks.
    Steps,
    /// Approve any Argo CD Application only when, at one instant, Argo CD is at the SHA and
    /// fresh, every workload runs only the new revision and every ready or serving endpoint
    /// answers 2xx with the expected content. Exit 0 approved, 1 rejected, 2 usage errors, an
    /// unusable kubeconfig or an Application that does not exist.
    Gate(Box<GateArgs>),
    /// Delete the lab's Application, AppProject, namespace, evidence, working copy and bare repo.
    Reset {
        /// Required: this deletes the lab's records and Git history.
        #[arg(long)]
        yes: bool,
    },
}

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("apps").required(true).args(["app", "selector"])))]
#[command(group(clap::ArgGroup::new("revision").required(true).args(["sha", "sha_from_target", "sha_from_operation"])))]
#[command(group(clap::ArgGroup::new("expect").required(true).args(["expect_body", "expect_contains", "expect_json"])))]
struct GateArgs {
    /// An Application in Argo CD's namespace (CNPE_ARGOCD_NAMESPACE); repeat for several.
    #[arg(long, value_name = "NAME")]
    app: Vec<String>,
    /// Every Application with this label (LABEL=VALUE).
    #[arg(long, value_name = "LABEL=VALUE")]
    selector: Option<String>,
    /// The full 40-hex SHA every Application must be at.
    #[arg(long, value_name = "FULL_SHA")]
    sha: Option<String>,
    /// Each Application's SHA is its spec.source.targetRevision (must be a full SHA).
    #[arg(long)]
    sha_from_target: bool,
    /// Each Application's SHA is the revision of its current sync operation (a PostSync hook).
    /// Implies --in-hook.
    #[arg(long)]
    sha_from_operation: bool,
    /// The gate runs inside the sync operation to the SHA (an Argo CD PostSync hook Job): that
    /// operation Running at the SHA counts, freshness is judged from its startedAt, and an
    /// operation for another revision rejects at once. Implied by --sha-from-operation.
    #[arg(long)]
    in_hook: bool,
    /// Every endpoint answers exactly this body (`{sha}` stands for the SHA).
    #[arg(long, value_name = "TEXT")]
    expect_body: Option<String>,
    /// Every endpoint's body contains this text (`{sha}` stands for the SHA).
    #[arg(long, value_name = "TEXT")]
    expect_contains: Option<String>,
    /// Every endpoint answers JSON with VALUE at the RFC 6901 POINTER (`{sha}` stands for the SHA).
    #[arg(long, value_name = "POINTER=VALUE")]
    expect_json: Option<String>,
    /// The HTTP path probed on every endpoint.
    #[arg(long, default_value = "/")]
    path: String,
    /// Seconds before a release that is not approved is rejected (the gate's own deadline).
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// Decide on one snapshot (one probe of each endpoint) instead of waiting.
    #[arg(long)]
    once: bool,
    /// Also write the verdict JSON to FILE (refused if FILE exists: a verdict is a record).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write the figures as OpenMetrics text to FILE (replaced atomically: a textfile gauge).
    #[arg(long, value_name = "FILE")]
    metrics: Option<PathBuf>,
    /// At most this many probes in flight.
    #[arg(long, default_value_t = 16)]
    probe_concurrency: usize,
    /// How endpoints are reached: directly (inside the cluster), through the API server's pod
    /// proxy, or auto (direct with an in-cluster configuration, else the pod proxy).
    #[arg(long, value_enum, default_value = "auto")]
    probe: ProbeArg,
    /// Also send every route's requests through the ingress controller at URL, as a client
    /// does (the route's host as the Host header, its path), enough times per round to reach
    /// every weighted backend; each answer must be the release (condition route_answers).
    #[arg(long, value_name = "URL")]
    via_route: Option<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum ProbeArg {
    Auto,
    Direct,
    Proxy,
}

#[derive(Clone, Copy, ValueEnum)]
enum WaitState {
    Healthy,
    Failed,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let usage = |msg: String| {
        eprintln!("cnpe-lab: {msg}");
        ExitCode::from(2)
    };
    let cfg = match Config::from_env() {
        Ok(c) => c,
        Err(e) => return usage(format!("{e:#}")),
    };
    if let Command::Wait { sha, .. } | Command::Render { sha, .. } = &cli.command {
        if let Err(e) = sha::Sha::parse(sha) {
            return usage(e.to_string());
        }
    }
    if let Command::Gate(g) = &cli.command {
        if let Err(e) = gate_usage(g) {
            return usage(e);
        }
    }
    // Commands that change lab state hold the evidence directory's lock for their lifetime
    // (`run` hands it to the lab, whose Git steps need it).
    let lock = match &cli.command {
        Command::Run | Command::Reset { yes: true } => {
            match cnpe_lab::lock::acquire(&cfg.evidence_dir) {
                Ok(l) => Some(l),
                Err(e) => return usage(format!("{e}")),
            }
        }
        _ => None,
    };
    // CNPE_CLUSTER=hermetic|kind: start that cluster first (before any thread exists).
    let provisioned = match &cli.command {
        Command::Run => match provision::ClusterChoice::from_env()
            .and_then(|c| provision::provision(c, &cfg.bare_repo))
        {
            Ok(p) => p,
            Err(e) => {
                eprintln!("cnpe-lab: {e:#}");
                return ExitCode::from(1);
            }
        },
        _ => None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let code = match rt.block_on(run(cli.command, cfg, lock)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cnpe-lab: {e:#}");
            ExitCode::from(1)
        }
    };
    if let Some(p) = provisioned {
        eprintln!("{}", p.farewell());
    }
    code
}

fn print_json(v: &serde_json::Value) {
    println!("{}", serde_json::to_string_pretty(v).expect("JSON"));
}

async fn run(command: Command, cfg: Config, lock: Option<LabLock>) -> Result<ExitCode> {
    match command {
        Command::Steps => {
            for s in Step::ALL {
                println!(
                    "{:<34} {:<7} {}",
                    s.trial_name(),
                    format!("{:?}", s.kind()).to_lowercase(),
                    s.doc()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Render { sha, out } => {
            for (name, bytes) in [
                (
                    "release.json",
                    to_file_bytes(&manifests::baseline_release(&cfg)),
                ),
                ("project.json", to_file_bytes(&manifests::project(&cfg))),
                (
                    "application.json",
                    to_file_bytes(&manifests::application(&cfg, &sha)),
                ),
            ] {
                records::write_once(&out.join(name), &bytes)?;
                eprintln!("wrote {}", out.join(name).display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Report => {
            let path = cnpe_lab::report::svg::write_report(
                &cfg.evidence_dir,
                manifests::PROGRESS_DEADLINE_SECONDS as i64,
            )?;
            eprintln!("wrote {}", path.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Observe => {
            let cluster = Cluster::connect(&cfg).await?;
            let probe = Probe::for_cluster(&cluster)?;
            let ev = observer::observe_once(&cluster, None, &probe).await?;
            print_json(&ev.to_value());
            Ok(ExitCode::SUCCESS)
        }
        Command::Wait { state, sha } => wait(cfg, state, &sha).await,
        Command::Run | Command::Verify => {
            let mode = if matches!(command, Command::Verify) {
                Mode::Verify
            } else {
                Mode::Run
            };
            let mut runner = Runner::new(Lab::connect(cfg, lock).await?, Echo::Cli);
            runner.run_all(mode).await;
            runner.finish();
            let (passed, total) = runner.reporter.tally();
            eprintln!("{}", runner.reporter.closing_line());
            Ok(if passed == total {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Gate(g) => gate(*g, cfg).await,
        Command::Reset { yes } => reset(cfg, yes).await,
    }
}

/// `wait`: one lab wait, its evidence on stdout (exit 1 when not reached).
async fn wait(cfg: Config, state: WaitState, sha: &str) -> Result<ExitCode> {
    let cluster = Cluster::connect(&cfg).await?;
    let target = match state {
        WaitState::Healthy => Target::Healthy,
        WaitState::Failed => Target::Failed,
    };
    let mut live = LiveWatch::start(&cluster);
    let probe = Probe::for_cluster(&cluster)?;
    let spec = WaitSpec::new(&cfg, target, sha, &cfg.body);
    let lines = WaitLines::for_stderr();
    match wait_for(&cluster, &mut live, &probe, &spec, &mut |e| lines.on(e)).await {
        Ok(w) => {
            print_json(&w.evidence.to_value());
            Ok(ExitCode::SUCCESS)
        }
        Err(e @ WaitError::Timeout { .. }) | Err(e @ WaitError::Api { .. }) => {
            eprintln!("cnpe-lab: {e}");
            Ok(ExitCode::from(1))
        }
    }
}

/// `reset --yes`: the lab's objects, directories and records gone; the lock file stays.
async fn reset(cfg: Config, yes: bool) -> Result<ExitCode> {
    if !yes {
        eprintln!(
            "cnpe-lab: reset deletes the Application {}, AppProject {}, namespace {}, {}, {} and {}; pass --yes",
            cfg.application,
            cfg.project,
            cfg.namespace,
            cfg.evidence_dir.display(),
            cfg.gitops_dir.display(),
            cfg.bare_repo.display()
        );
        return Ok(ExitCode::from(2));
    }
    let cluster = Cluster::connect(&cfg).await?;
    cluster
        .delete_lab_objects(std::time::Duration::from_secs(120))
        .await?;
    for dir in [&cfg.gitops_dir, &cfg.bare_repo] {
        remove_dir(dir)?;
    }
    // The lock file stays (we hold it); everything else in the evidence directory goes.
    if let Ok(entries) = std::fs::read_dir(&cfg.evidence_dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.file_name() == Some(std::ffi::OsStr::new(cnpe_lab::lock::LOCK_FILE)) {
                continue;
            }
            if path.is_dir() {
                remove_dir(&path)?;
            } else {
                std::fs::remove_file(&path)
                    .with_context(|| format!("removing {}", path.display()))?;
            }
        }
        eprintln!("emptied {}", cfg.evidence_dir.display());
    }
    eprintln!("reset done: the next run starts from step 1");
    Ok(ExitCode::SUCCESS)
}

fn remove_dir(dir: &std::path::Path) -> Result<()> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {
            eprintln!("removed {}", dir.display());
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing {}", dir.display())),
    }
}

/// `--via-route`: an http(s) URL of the ingress controller (the URL type parses it).
fn via_route_url(u: &str) -> std::result::Result<reqwest::Url, String> {
    let url = reqwest::Url::parse(u).map_err(|e| format!("--via-route {u:?}: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(format!(
            "--via-route {u:?}: give the ingress controller's http(s) address, e.g. http://127.0.0.1:18080"
        ));
    }
    Ok(url)
}

/// Usage checks of `gate` that need no cluster (exit 2).
fn gate_usage(g: &GateArgs) -> std::result::Result<(), String> {
    if let Some(s) = &g.sha {
        sha::Sha::parse(s).map_err(|e| format!("--sha {e}"))?;
    }
    if let Some(sel) = &g.selector {
        if !sel.contains('=') || sel.starts_with('=') {
            return Err(format!("--selector {sel:?}: use LABEL=VALUE"));
        }
    }
    if g.timeout == 0 {
        return Err("--timeout must be at least 1 second".into());
    }
    if g.probe_concurrency == 0 {
        return Err("--probe-concurrency must be at least 1".into());
    }
    if !g.path.starts_with('/') {
        return Err(format!("--path {:?} must start with /", g.path));
    }
    if let Some(u) = &g.via_route {
        via_route_url(u)?;
    }
    if let Some(f) = &g.json {
        if f.exists() {
            return Err(format!(
                "--json {}: the file exists; a verdict never replaces a file",
                f.display()
            ));
        }
    }
    // The expectation's own checks (with a placeholder SHA; `{sha}` is filled in per app).
    cnpe_lab::serving::expect::Expect::from_flags(
        g.expect_body.as_deref(),
        g.expect_contains.as_deref(),
        g.expect_json.as_deref(),
        "0000000000000000000000000000000000000000",
    )
    .map(|_| ())
    .map_err(|e| e.to_string())
}

async fn gate(g: GateArgs, cfg: Config) -> Result<ExitCode> {
    use cnpe_lab::cluster::watch::AppFilter;
    use cnpe_lab::serving::run::{self, GateError, Options, ProbeChoice, ShaSource};
    let cluster = match Cluster::connect(&cfg).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cnpe-lab gate: {e:#}");
            return Ok(ExitCode::from(2));
        }
    };
    let opts = Options {
        apps: match g.selector {
            Some(s) => AppFilter::Selector(s),
            None => AppFilter::Names(g.app),
        },
        sha: match (g.sha.as_deref().map(sha::Sha::parse), g.sha_from_target) {
            (Some(Ok(s)), _) => ShaSource::Given(s),
            (Some(Err(e)), _) => {
                eprintln!("cnpe-lab gate: --sha {e}");
                return Ok(ExitCode::from(2));
            }
            (None, true) => ShaSource::FromTarget,
            (None, false) => ShaSource::FromOperation,
        },
        expect_body: g.expect_body,
        expect_contains: g.expect_contains,
        expect_json: g.expect_json,
        path: g.path,
        timeout: std::time::Duration::from_secs(g.timeout),
        once: g.once,
        probe_interval: cfg.probe_interval,
        probe_concurrency: g.probe_concurrency,
        probe: match g.probe {
            ProbeArg::Auto => ProbeChoice::Auto,
            ProbeArg::Direct => ProbeChoice::Direct,
            ProbeArg::Proxy => ProbeChoice::PodProxy,
        },
        in_hook: g.in_hook,
        progress: true,
        via_route: g
            .via_route
            .as_deref()
            .map(via_route_url)
            .transpose()
            .map_err(|e| anyhow::anyhow!(e))?,
    };
    let outcome = match run::run(&cluster, &opts).await {
        Ok(o) => o,
        Err(e @ (GateError::Usage(_) | GateError::Cluster(_))) => {
            eprintln!("cnpe-lab gate: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    for v in &outcome.verdicts {
        eprintln!("{}", v.render_text());
    }
    let value = serde_json::to_value(&outcome)?;
    print_json(&value);
    if let Some(path) = &g.json {
        let mut text = serde_json::to_string_pretty(&value)?;
        text.push('\n');
        records::write_once(path, text.as_bytes())
            .with_context(|| format!("--json {}", path.display()))?;
    }
    if let Some(path) = &g.metrics {
        write_replacing(
            path,
            cnpe_lab::serving::verdict::openmetrics(&outcome.verdicts).as_bytes(),
        )
        .with_context(|| format!("--metrics {}", path.display()))?;
    }
    Ok(if outcome.approved {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Replaces `path` atomically (a temporary file renamed over it): a metrics textfile is a
/// gauge that is current, not a record.
fn write_replacing(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut tmp, bytes)?;
    tmp.persist(path)?;
    Ok(())
}
