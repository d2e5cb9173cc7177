//! Shared by the integration tests: one insta configuration (snapshots in `snapshots/`, no
//! module prefix) and one set of evidence redactions.
#![allow(dead_code)]

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

use cnpe_lab::config::Config;
use cnpe_lab::lock::LabLock;
use cnpe_lab::provision::{self, ClusterChoice, Provisioned};

pub const HOW_TO_GET_A_CLUSTER: &str =
    "run `CNPE_CLUSTER=hermetic cargo test --test lab` (builds and starts our \
own Kubernetes + Argo CD; air-gapped, root) or point KUBECONFIG at a lab cluster";

/// `CNPE_LAB_REQUIRED=1` (CI sets it whenever it brought a cluster up): no usable cluster is
/// a failure, not an ignore.
pub fn required() -> bool {
    std::env::var("CNPE_LAB_REQUIRED").is_ok_and(|v| v == "1")
}

/// Configuration, cluster (CNPE_CLUSTER), lock: everything before the first trial.
/// Provisioning runs before any async runtime thread reads the environment it sets.
pub fn prepare(listing: bool) -> (Result<(Config, LabLock), String>, Option<Provisioned>) {
    let cfg = match Config::from_env() {
        Ok(c) => c,
        Err(e) => return (Err(format!("configuration: {e:#}")), None),
    };
    let choice = match ClusterChoice::from_env() {
        Ok(c) => c,
        Err(e) => return (Err(format!("{e:#}")), None),
    };
    if listing {
        return (Err("listing only".into()), None);
    }
    let provisioned = match provision::provision(choice, &cfg.bare_repo) {
        Ok(p) => p,
        Err(e) => return (Err(format!("CNPE_CLUSTER={choice:?}: {e:#}")), None),
    };
    // Another cnpe-lab process using the same directories is an error, never an ignore.
    match cnpe_lab::lock::acquire(&cfg.evidence_dir) {
        Ok(lock) => (Ok((cfg, lock)), provisioned),
        Err(e) => (Err(format!("{e}")), provisioned),
    }
}

/// The API server answers within 10 s.
pub async fn api_answers(cluster: &cnpe_lab::cluster::Cluster) -> Result<(), String> {
    match tokio::time::timeout(std::time::Duration::from_secs(10), cluster.version()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!(
            "API server {} does not answer: {e:#}",
            cluster.api_url()
        )),
        Err(_) => Err(format!(
            "API server {} does not answer within 10s",
            cluster.api_url()
        )),
    }
}
