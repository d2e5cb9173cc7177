//! `CNPE_CLUSTER`: where the lab runs. `current` (default) uses the cluster in the kubeconfig
//! and changes nothing on the host; `hermetic` builds (if missing) and starts our own
//! Kubernetes + Argo CD from `ci/hermetic`; `kind` starts `ci/kind` (offline images unless
//! `CNPE_KIND_ONLINE=1`). A started cluster is left running; the last line says how to stop it.
//! Used by `cnpe-lab run`, `cargo test --test lab` and `cargo test --test traps` alike.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterChoice {
    Current,
    Hermetic,
    Kind,
}

impl std::str::FromStr for ClusterChoice {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "" | "current" => Ok(ClusterChoice::Current),
            "hermetic" => Ok(ClusterChoice::Hermetic),
            "kind" => Ok(ClusterChoice::Kind),
            other => bail!("CNPE_CLUSTER={other:?}: use current, hermetic or kind"),
        }
    }
}

impl ClusterChoice {
    pub fn from_env() -> Result<Self> {
        std::env::var("CNPE_CLUSTER").unwrap_or_default().parse()
    }

    /// The command that stops a cluster this choice started.
    pub fn stop_command(self) -> Option<&'static str> {
        match self {
            ClusterChoice::Current => None,
            ClusterChoice::Hermetic => Some("bash ci/hermetic/down.sh"),
            ClusterChoice::Kind => Some("bash ci/kind/down.sh"),
        }
    }
}

/// A cluster this process started (or found already running) on request.
#[derive(Debug, Clone)]
pub struct Provisioned {
    pub choice: ClusterChoice,
    pub kubeconfig: PathBuf,
}

impl Provisioned {
    pub fn farewell(&self) -> String {
        format!(
            "cnpe-lab: the {:?} cluster is left running (KUBECONFIG={}); stop it with `{}` (from {})",
            self.choice,
            self.kubeconfig.display(),
            self.choice.stop_command().unwrap_or(""),
            repo_root().display()
        )
    }
}

/// The repository holding `ci/`: `CNPE_REPO_ROOT`, else the checkout `cargo` runs this from
/// (it sets `CARGO_MANIFEST_DIR` for tests and `cargo run`), else the one it was built in. The
/// compile-time path alone is not enough: checkouts that share one `CARGO_TARGET_DIR` reuse each
/// other's unchanged library, and with it a path that may be gone.
pub fn repo_root() -> PathBuf {
    ["CNPE_REPO_ROOT", "CARGO_MANIFEST_DIR"]
        .iter()
        .find_map(std::env::var_os)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

fn script(root: &Path, rel: &str, args: &[&str], bare_repo: &Path) -> Result<()> {
    let status = Command::new("bash")
        .arg(root.join(rel))
        .args(args)
        .env("CNPE_BARE_REPO", bare_repo)
        .current_dir(root)
        .status()
        .with_context(|| format!("running {rel}"))?;
    if !status.success() {
        bail!(
            "{rel} {} failed ({status}); its output is above",
            args.join(" ")
        );
    }
    Ok(())
}

fn output(root: &Path, rel: &str) -> Result<PathBuf> {
    let out = Command::new("bash")
        .arg(root.join(rel))
        .current_dir(root)
        .output()
        .with_context(|| format!("running {rel}"))?;
    if !out.status.success() {
        bail!(
            "{rel} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// Starts the chosen cluster (never for `current`) and points `KUBECONFIG` at it. Call before
/// any thread reads the environment (before the async runtime starts).
pub fn provision(choice: ClusterChoice, bare_repo: &Path) -> Result<Option<Provisioned>> {
    let root = repo_root();
    let kubeconfig = match choice {
        ClusterChoice::Current => return Ok(None),
        ClusterChoice::Hermetic => {
            eprintln!(
                "cnpe-lab: CNPE_CLUSTER=hermetic: building (if missing) and starting Kubernetes + Argo CD as host \
                 processes; this changes the host (a network interface, iptables rules, /etc/hosts; root needed)"
            );
            script(&root, "ci/hermetic/build.sh", &[], bare_repo)?;
            script(&root, "ci/hermetic/up.sh", &[], bare_repo)?;
            output(&root, "ci/hermetic/kubeconfig.sh")?
        }
        ClusterChoice::Kind => {
            let online = std::env::var("CNPE_KIND_ONLINE").is_ok_and(|v| v == "1");
            eprintln!(
                "cnpe-lab: CNPE_CLUSTER=kind: creating a kind cluster with podman ({}); this changes the host \
                 (podman configuration and network, a privileged node container; root needed)",
                if online { "pulling pinned upstream images" } else { "images built locally, offline" }
            );
            script(
                &root,
                "ci/kind/up.sh",
                if online { &[] } else { &["--offline"] },
                bare_repo,
            )?;
            output(&root, "ci/kind/kubeconfig.sh")?
        }
    };
    if !kubeconfig.is_file() {
        bail!(
            "the {choice:?} cluster's kubeconfig {} does not exist",
            kubeconfig.display()
        );
    }
    // SAFETY of set_var: called before any other thread exists (documented precondition).
    std::env::set_var("KUBECONFIG", &kubeconfig);
    Ok(Some(Provisioned { choice, kubeconfig }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_parse_and_unknown_ones_name_the_variable() {
        assert_eq!("".parse::<ClusterChoice>().unwrap(), ClusterChoice::Current);
        assert_eq!(
            "hermetic".parse::<ClusterChoice>().unwrap(),
            ClusterChoice::Hermetic
        );
        assert_eq!(
            "kind".parse::<ClusterChoice>().unwrap(),
            ClusterChoice::Kind
        );
        let e = "k3s".parse::<ClusterChoice>().unwrap_err().to_string();
        assert!(e.starts_with("CNPE_CLUSTER=\"k3s\""), "{e}");
        assert_eq!(ClusterChoice::Current.stop_command(), None);
    }

    #[test]
    fn current_never_runs_anything() {
        assert!(
            provision(ClusterChoice::Current, Path::new("/nonexistent/app.git"))
                .unwrap()
                .is_none()
        );
    }
}
