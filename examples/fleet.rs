//! The gate's cost as the fleet grows (`bash ci/fleet.sh` runs it on the hermetic cluster):
//! for each N, N Applications (one small nginx each, a namespace each) are released to a new
//! commit at once and gated in ONE `cnpe-lab gate --selector` run (the real binary, under
//! `/usr/bin/time` for its peak RSS). Prints a Markdown table: watch streams, watch requests,
//! API requests other than probes, probes, decision latency after the deciding event (p50 /
//! p99), peak RSS and the wall time from the release to the last verdict.
//!
//! Usage: `cargo run --release --example fleet -- [N...]` (default 1 10 30), with KUBECONFIG
//! at the cluster and the lab's CNPE_* settings (its bare repository's directory must be
//! served by the cluster's git daemon: a repository `cnpe-fleet.git` is created next to it).

use cnpe_lab::cluster::Cluster;
use cnpe_lab::config::Config;
use cnpe_lab::lab::git::GitOps;
use cnpe_lab::lab::manifests::to_file_bytes;
#[path = "../tests/support/release.rs"]
mod release;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use release::{Release, Rollout, Web};
use std::time::{Duration, Instant};

const FLEET: &str = "cnpe-fleet";
const LABEL: &str = "cnpe.fleet";

fn fleet_cfg(lab: &Config, work: &std::path::Path, i: usize) -> Config {
    let mut c = lab.clone();
    let parent = lab.bare_repo.parent().expect("CNPE_BARE_REPO has a parent");
    c.bare_repo = parent.join(format!("{FLEET}.git"));
    c.gitops_dir = work.join("gitops");
    c.evidence_dir = work.join("evidence");
    let (scheme_host, _) = lab
        .repo_url
        .rsplit_once('/')
        .expect("CNPE_REPO_URL has a path");
    c.repo_url = format!("{scheme_host}/{FLEET}.git");
    c.namespace = format!("{FLEET}-{i}");
    c.project = FLEET.into();
    c.application = format!("{FLEET}-{i}");
    c
}

fn body(i: usize, release: u32) -> String {
    format!("fleet app {i} release-{release}")
}

fn commit_all(git: &GitOps, cfgs: &[Config], release: u32) -> anyhow::Result<String> {
    let mut last = None;
    for (i, c) in cfgs.iter().enumerate() {
        let r = Release {
            deployments: vec![(Web::new("web", 1, &body(i, release)), Rollout::Recreate)],
            ..Default::default()
        };
        last = Some(git.commit_file(
            &format!("apps/{i}/release.json"),
            &to_file_bytes(&r.build(c)),
            &format!("fleet: app {i} release-{release}"),
        )?);
    }
    git.push()?;
    Ok(last.expect("at least one app").to_string())
}

/// One gate run over the fleet: its verdict JSON, peak RSS (KiB) and wall time.
fn gate(sha: &str, release: u32, timeout: u64) -> anyhow::Result<(serde_json::Value, u64, f64)> {
    let bin = std::env::var("CNPE_LAB_BIN").unwrap_or_else(|_| "target/release/cnpe-lab".into());
    let rss = tempfile::NamedTempFile::new()?;
    let t = Instant::now();
    let out = std::process::Command::new("/usr/bin/time")
        .arg("-o")
        .arg(rss.path())
        .args(["-f", "%M", &bin, "gate", "--selector"])
        .arg(format!("{LABEL}=1"))
        .args(["--sha", sha, "--expect-contains"])
        .arg(format!("release-{release}"))
        .args(["--timeout", &timeout.to_string()])
        .output()?;
    let wall = t.elapsed().as_secs_f64();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    if out.status.code() != Some(0) {
        anyhow::bail!(
            "the gate did not approve the fleet at {sha} (exit {:?}):\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let kib = std::fs::read_to_string(rss.path())?
        .lines()
        .last()
        .unwrap_or("0")
        .trim()
        .parse()
        .unwrap_or(0);
    Ok((v, kib, wall))
}

async fn tear_down(lab: &Config, work: &std::path::Path, n: usize) -> anyhow::Result<()> {
    for i in 0..n {
        let c = fleet_cfg(lab, work, i);
        Cluster::connect(&c)
            .await?
            .delete_lab_objects(Duration::from_secs(180))
            .await?;
    }
    Ok(())
}

async fn measure(lab: &Config, n: usize) -> anyhow::Result<String> {
    let work = tempfile::Builder::new().prefix("cnpe-fleet.").tempdir()?;
    let cfgs: Vec<Config> = (0..n).map(|i| fleet_cfg(lab, work.path(), i)).collect();
    tear_down(lab, work.path(), 30.max(n)).await?;
    let _ = std::fs::remove_dir_all(&cfgs[0].bare_repo);
    let lock = cnpe_lab::lock::acquire(&cfgs[0].evidence_dir)?;
    let git = GitOps::prepare(&cfgs[0], &lock)?;
    let c1 = commit_all(&git, &cfgs, 1)?;
    let cluster = Cluster::connect(&cfgs[0]).await?;
    let mut project = release::project(&cfgs[0], &[("apps", "Deployment"), ("", "Service")]);
    project.spec.destinations[0].namespace = Some(format!("{FLEET}-*"));
    cluster.apply_project(&project).await?;
    let namespaces: Api<Namespace> = Api::all(cluster.client());
    for (i, c) in cfgs.iter().enumerate() {
        let ns = Namespace {
            metadata: kube::api::ObjectMeta {
                name: Some(c.namespace.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        match namespaces.create(&PostParams::default(), &ns).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
        let mut app = release::application(c, &c1);
        app.spec.source.path = Some(format!("apps/{i}"));
        app.metadata.labels = Some([(LABEL.to_string(), "1".to_string())].into());
        Cluster::connect(c).await?.apply_application(&app).await?;
    }
    // Everything serving release 1 first (the gate itself says when).
    gate(&c1, 1, 300)?;
    // The release: one commit for all, every Application pointed at it at once.
    let c2 = commit_all(&git, &cfgs, 2)?;
    let released = Instant::now();
    let target = c2.as_str();
    let patches = cfgs
        .iter()
        .map(|c| async move { Cluster::connect(c).await?.set_target_revision(target).await });
    for r in futures::future::join_all(patches).await {
        r?;
    }
    let sha = c2.clone();
    let (v, kib, _) = tokio::task::spawn_blocking(move || gate(&sha, 2, 300)).await??;
    let to_last = released.elapsed().as_secs_f64();
    let run = &v["run"];
    // The deciding decision of each Application (the one that approved or rejected it).
    let mut finals: Vec<f64> = run["final_decision_latency_ms"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| x.as_f64())
        .collect();
    finals.sort_by(f64::total_cmp);
    let at = |p: f64| {
        finals
            .get(((finals.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    let row = format!(
        "| {n} | {} | {} | {} | {} | {} / {} | {:.1} / {:.1} / {:.1} | {:.1} / {:.1} | {:.1} | {to_last:.1} |",
        run["watch_streams"],
        run["watch_requests"],
        run["api_requests"],
        run["probes"],
        run["watch_events"],
        run["evaluations"],
        run["decision_latency_ms_p50"].as_f64().unwrap_or(f64::NAN),
        run["decision_latency_ms_p99"].as_f64().unwrap_or(f64::NAN),
        run["decision_latency_ms_max"].as_f64().unwrap_or(f64::NAN),
        at(0.5),
        at(0.99),
        kib as f64 / 1024.0,
    );
    tear_down(lab, work.path(), n).await?;
    let _ = std::fs::remove_dir_all(&cfgs[0].bare_repo);
    Ok(row)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let lab = Config::from_env()?;
    let ns: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let ns = if ns.is_empty() { vec![1, 10, 30] } else { ns };
    println!(
        "| N | watch streams | watch requests | API requests (no probes) | probes | watch events / decisions | every decision ms p50 / p99 / max | deciding decision ms p50 / p99 | gate peak RSS MiB | release to last verdict s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for n in ns {
        println!("{}", measure(&lab, n).await?);
    }
    Ok(())
}
