//! `cargo test --test rollout_health`: the gate's Rollout check held against a suite nobody
//! here wrote: Argo CD's own health fixtures for Argo Rollouts' Rollout
//! (`resource_customizations/argoproj.io/Rollout/health_test.yaml` and its `testdata/`, the
//! Lua health check `argocd app wait --health` trusts), in the Argo CD version the lab runs,
//! read from the Go module cache at run time.
//!
//! For each fixture the Rollout alone is checked (no ReplicaSet, no pods) and the invariant is:
//! **the gate never approves a Rollout Argo CD calls anything but Healthy**. Where Argo CD says
//! Healthy and ours does not, the trial prints which conditions are unmet (stricter, by design:
//! ours also wants the pods it owns). One trial per fixture; when the module cache is absent the
//! suite says so loudly with the command that provides it, FAILS under `CNPE_LAB_REQUIRED=1`
//! or `CI=true`, and is ignored otherwise.

use cnpe_lab::cluster::rollouts::Rollout;
use cnpe_lab::serving::model::Objects;
use cnpe_lab::serving::workloads::{self, WorkloadKind, WorkloadRef};
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const PROVIDE: &str = "bash ci/hermetic/build.sh";

fn required() -> bool {
    std::env::var("CNPE_LAB_REQUIRED").is_ok_and(|v| v == "1")
        || std::env::var("CI").is_ok_and(|v| v == "true")
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `resource_customizations/argoproj.io/Rollout` of the pinned Argo CD in the module cache.
fn locate() -> Result<PathBuf, String> {
    let versions = std::fs::read_to_string(root().join("ci/hermetic/versions.env"))
        .map_err(|e| format!("ci/hermetic/versions.env: {e}"))?;
    let version = versions
        .lines()
        .find_map(|l| l.trim().strip_prefix("ARGOCD_VERSION="))
        .ok_or("no ARGOCD_VERSION= in ci/hermetic/versions.env")?
        .trim_matches('"')
        .to_string();
    let cache =
        std::env::var("CNPE_HERMETIC_CACHE").unwrap_or_else(|_| "/var/cache/cnpe-hermetic".into());
    let dir = PathBuf::from(cache).join(format!(
        "gomod/github.com/argoproj/argo-cd/v3@{version}/resource_customizations/argoproj.io/Rollout"
    ));
    if dir.join("health_test.yaml").is_file() {
        Ok(dir)
    } else {
        Err(format!("{} has no health_test.yaml", dir.display()))
    }
}

#[derive(serde::Deserialize)]
struct Suite {
    tests: Vec<Case>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Case {
    health_status: Health,
    input_path: String,
}

#[derive(serde::Deserialize)]
struct Health {
    status: String,
}

fn missing(reason: String) -> Trial {
    eprintln!(
        "\n!!!!! ROLLOUT HEALTH: Argo CD's Rollout health fixtures are NOT available: {reason}\n\
         !!!!! Provide them with:   {PROVIDE}\n\
         !!!!! {}\n",
        if required() {
            "CNPE_LAB_REQUIRED=1 or CI=true: this is a FAILURE."
        } else {
            "Skipped (ignored). Set CNPE_LAB_REQUIRED=1 or CI=true to make this a failure."
        }
    );
    Trial::ignorable_test("argocd_rollout_fixtures_available", move || {
        if required() {
            Err(Failed::from(format!(
                "Argo CD's Rollout fixtures are missing ({reason}); run `{PROVIDE}`"
            )))
        } else {
            Ok(Completion::ignored_with(format!(
                "Argo CD's Rollout fixtures are missing: run `{PROVIDE}`"
            )))
        }
    })
}

/// The trial of one fixture: Err when ours approves what Argo CD does not call Healthy.
fn judge(dir: &Path, case: &Case) -> Result<(), Failed> {
    let path = dir.join(&case.input_path);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut rollout: Rollout = serde_norway::from_str(&text)
        .map_err(|e| format!("{}: not a Rollout: {e}", case.input_path))?;
    let namespace = rollout
        .metadata
        .namespace
        .get_or_insert_with(|| "default".into())
        .clone();
    let workload = WorkloadRef {
        kind: WorkloadKind::Rollout,
        namespace,
        name: rollout.metadata.name.clone().unwrap_or_default(),
    };
    let objects = Objects {
        rollouts: vec![Arc::new(rollout)],
        ..Default::default()
    };
    let check = workloads::check(&workload, &objects);
    let approved = check.unmet.is_empty();
    let argo = case.health_status.status.as_str();
    let ours: Vec<String> = check
        .unmet
        .iter()
        .map(|u| format!("{} ({})", u.condition.as_str(), u.found))
        .collect();
    println!(
        "{:<60} Argo CD {argo:<12} ours {}",
        case.input_path,
        if approved {
            "approved".to_string()
        } else {
            format!("not approved: {}", ours.join("; "))
        }
    );
    if approved && argo != "Healthy" {
        return Err(format!(
            "{}: the gate approves a Rollout Argo CD calls {argo}",
            case.input_path
        )
        .into());
    }
    Ok(())
}

fn main() {
    let args = Arguments::from_args();
    let dir = match locate() {
        Ok(d) => d,
        Err(reason) => libtest_mimic::run(&args, vec![missing(reason)]).exit(),
    };
    let suite: Result<Suite, String> = std::fs::read_to_string(dir.join("health_test.yaml"))
        .map_err(|e| e.to_string())
        .and_then(|t| serde_norway::from_str(&t).map_err(|e| e.to_string()));
    let suite = match suite {
        Ok(s) if !s.tests.is_empty() => s,
        Ok(_) => libtest_mimic::run(
            &args,
            vec![Trial::test("argocd_rollout_fixtures_listed", || {
                Err("health_test.yaml lists no test".into())
            })],
        )
        .exit(),
        Err(e) => libtest_mimic::run(
            &args,
            vec![Trial::test("argocd_rollout_fixtures_readable", move || {
                Err(format!("health_test.yaml: {e}").into())
            })],
        )
        .exit(),
    };
    let trials = suite
        .tests
        .into_iter()
        .map(|case| {
            let dir = dir.clone();
            let name = format!(
                "argocd_rollout::{}",
                case.input_path.trim_start_matches("testdata/")
            );
            Trial::test(name, move || judge(&dir, &case))
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
