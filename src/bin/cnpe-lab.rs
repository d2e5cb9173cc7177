//! `cnpe-lab`: the lab's observation tool and runner.
//!
//!   cnpe-lab observe                      evidence JSON of the live state, once
//!   cnpe-lab wait healthy|failed FULL_SHA poll until it holds (deadline CNPE_WAIT_SECONDS, 45 s)
//!   cnpe-lab render --sha SHA --out DIR   write release.json, project.json, application.json
//!   cnpe-lab run                          perform the whole lab, then grade it
//!   cnpe-lab verify                       only the grader's checks
//!   cnpe-lab reset --yes                  delete the lab's Application, namespace and directories
//!
//! JSON goes to stdout, diagnostics to stderr. Exit 0 success, 1 failure, 2 usage error.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use cnpe_lab::cluster::Cluster;
use cnpe_lab::config::Config;
use cnpe_lab::lab::{Lab, STEPS};
use cnpe_lab::manifests::{self, to_file_bytes};
use cnpe_lab::observer::{wait_for, WaitError};
use cnpe_lab::wait::Target;
use cnpe_lab::{gate, records};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "cnpe-lab", about = "Synced is not serving: the GitOps lab on a real cluster", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the evidence JSON of the live state (one read).
    Observe,
    /// Poll until the state holds for FULL_SHA, then print its evidence JSON.
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
    /// Perform steps 1-8 (resuming from records) and grade the result.
    Run,
    /// Only the grader's checks on what is recorded and live.
    Verify,
    /// Delete the lab's Application, AppProject, namespace, evidence, working copy and bare repo.
    Reset {
        /// Required: this deletes the lab's records and Git history.
        #[arg(long)]
        yes: bool,
    },
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
        if !gate::is_full_sha(sha) {
            return usage(format!("{sha:?} is not a full 40-hex lowercase SHA"));
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio runtime");
    match rt.block_on(run(cli.command, cfg)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cnpe-lab: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn print_json(v: &serde_json::Value) {
    println!("{}", serde_json::to_string_pretty(v).expect("JSON"));
}

async fn run(command: Command, cfg: Config) -> Result<ExitCode> {
    match command {
        Command::Render { sha, out } => {
            for (name, bytes) in [
                ("release.json", to_file_bytes(&manifests::baseline_release(&cfg))),
                ("project.json", to_file_bytes(&manifests::project(&cfg))),
                ("application.json", to_file_bytes(&manifests::application(&cfg, &sha))),
            ] {
                records::write_once(&out.join(name), &bytes)?;
                eprintln!("wrote {}", out.join(name).display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Observe => {
            let cluster = Cluster::connect(&cfg).await?;
            print_json(&cluster.observe().await?.to_value());
            Ok(ExitCode::SUCCESS)
        }
        Command::Wait { state, sha } => {
            let cluster = Cluster::connect(&cfg).await?;
            let target = match state {
                WaitState::Healthy => Target::Healthy,
                WaitState::Failed => Target::Failed,
            };
            match wait_for(&cluster, target, &sha, &cfg.body, cfg.wait_deadline, cfg.poll_interval, true).await {
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
        Command::Run | Command::Verify => {
            let verify_only = matches!(command, Command::Verify);
            let mut lab = Lab::connect(cfg).await?;
            let mut failed: Option<&str> = None;
            let mut results = Vec::new();
            for step in STEPS {
                let grading = step.starts_with("grade");
                if verify_only && !grading {
                    continue;
                }
                if let (Some(f), false) = (failed, grading) {
                    eprintln!("SKIP {step}: {f} failed");
                    results.push(false);
                    continue;
                }
                match lab.run_step(step).await {
                    Ok(s) => {
                        eprintln!("ok   {step}: {s}");
                        results.push(true);
                    }
                    Err(e) => {
                        eprintln!("FAIL {step}: {e:#}");
                        results.push(false);
                        if !grading {
                            failed = Some(step);
                        }
                    }
                }
            }
            if !verify_only {
                let p = lab.write_timeline().context("writing the timeline")?;
                eprintln!("{}\ntimeline: {}", lab.summary(), p.display());
            }
            let passed = results.iter().filter(|r| **r).count();
            eprintln!("{passed} passed, {} failed", results.len() - passed);
            Ok(if passed == results.len() { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        Command::Reset { yes } => {
            if !yes {
                eprintln!("cnpe-lab: reset deletes the Application {}, AppProject {}, namespace {}, {}, {} and {}; pass --yes",
                    cfg.application, cfg.project, cfg.namespace, cfg.evidence_dir.display(), cfg.gitops_dir.display(), cfg.bare_repo.display());
                return Ok(ExitCode::from(2));
            }
            let cluster = Cluster::connect(&cfg).await?;
            cluster.delete_lab_objects(std::time::Duration::from_secs(120)).await?;
            for dir in [&cfg.evidence_dir, &cfg.gitops_dir, &cfg.bare_repo] {
                match std::fs::remove_dir_all(dir) {
                    Ok(()) => eprintln!("removed {}", dir.display()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e).with_context(|| format!("removing {}", dir.display())),
                }
            }
            eprintln!("reset done: the next run starts from step 1");
            Ok(ExitCode::SUCCESS)
        }
    }
}
