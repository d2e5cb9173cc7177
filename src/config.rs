//! One configuration for every environment (lab VM, kind, our hermetic cluster). The lab's
//! values are the defaults; each can be overridden by a `CNPE_*` environment variable, and an
//! invalid value is an error that names the variable.

use anyhow::{bail, Result};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `CNPE_GITOPS_DIR`: the git working copy the lab commits in.
    pub gitops_dir: PathBuf,
    /// `CNPE_BARE_REPO`: the bare repository the working copy pushes to (served by git daemon).
    pub bare_repo: PathBuf,
    /// `CNPE_EVIDENCE_DIR`: where `.sha` files, manifests and evidence JSON are recorded.
    pub evidence_dir: PathBuf,
    /// `CNPE_REPO_URL`: the URL Argo CD reads the bare repository from.
    pub repo_url: String,
    /// `CNPE_BRANCH`: the branch pushed to, so Argo CD's repo-server can fetch the SHAs.
    pub branch: String,
    /// `CNPE_NAMESPACE`: where the workload runs.
    pub namespace: String,
    /// `CNPE_ARGOCD_NAMESPACE`: where Argo CD and its Application/AppProject live.
    pub argocd_namespace: String,
    /// `CNPE_PROJECT`: the AppProject name.
    pub project: String,
    /// `CNPE_APPLICATION`: the Application name.
    pub application: String,
    /// `CNPE_WORKLOAD`: the Deployment and Service name.
    pub workload: String,
    /// `CNPE_BODY`: the exact page the healthy release serves.
    pub body: String,
    /// `CNPE_IMAGE`: the container image.
    pub image: String,
    /// `CNPE_DESTINATION_SERVER`: the in-cluster server URL in Argo CD's terms.
    pub destination_server: String,
    /// `CNPE_WAIT_SECONDS`: deadline of one `wait`.
    pub wait_deadline: Duration,
    /// `CNPE_PROBE_MS`: the HTTP re-probe interval during a wait (`CNPE_POLL_MS`, its old
    /// name, is accepted with a warning).
    pub probe_interval: Duration,
    /// `CNPE_HTTP_URL`: a direct URL for the service; unset = the API server's service proxy.
    pub http_url: Option<String>,
    /// `CNPE_GIT_NAME` / `CNPE_GIT_EMAIL`: the identity of the lab's commits.
    pub git_name: String,
    pub git_email: String,
    /// `CNPE_ALLOW_REMOTE=1`: allow an API server that is not loopback/private/.local.
    pub allow_remote: bool,
    /// What the environment asked for that still works but should change (printed once).
    pub warnings: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            gitops_dir: "/srv/gitops".into(),
            bare_repo: "/srv/bare/app.git".into(),
            evidence_dir: "/root/cnpe".into(),
            repo_url: "git://gitd.gitsrv.svc.cluster.local:9418/app.git".into(),
            branch: "main".into(),
            namespace: "cnpe-shop".into(),
            argocd_namespace: "argocd".into(),
            project: "cnpe-delivery".into(),
            application: "cnpe-shop".into(),
            workload: "web".into(),
            body: "labhub-cnpe-v1".into(),
            image: "docker.io/library/nginx:1.27-alpine".into(),
            destination_server: "https://kubernetes.default.svc".into(),
            wait_deadline: Duration::from_secs(45),
            probe_interval: Duration::from_millis(500),
            http_url: None,
            git_name: "cnpe lab".into(),
            git_email: "cnpe-lab@example.invalid".into(),
            allow_remote: false,
            warnings: Vec::new(),
        }
    }
}

impl Config {
    /// The lab's defaults overridden by the process environment.
    pub fn from_env() -> Result<Self> {
        let c = Self::from_lookup(|k| std::env::var(k).ok())?;
        for w in &c.warnings {
            eprintln!("cnpe-lab: warning: {w}");
        }
        Ok(c)
    }

    /// The lab's defaults overridden by `lookup` (the environment, or a map in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let mut c = Self::default();
        let get = |name: &str| lookup(name).filter(|v| !v.is_empty());
        if let Some(v) = get("CNPE_GITOPS_DIR") {
            c.gitops_dir = absolute_path("CNPE_GITOPS_DIR", &v)?;
        }
        if let Some(v) = get("CNPE_BARE_REPO") {
            c.bare_repo = absolute_path("CNPE_BARE_REPO", &v)?;
        }
        if let Some(v) = get("CNPE_EVIDENCE_DIR") {
            c.evidence_dir = absolute_path("CNPE_EVIDENCE_DIR", &v)?;
        }
        if let Some(v) = get("CNPE_REPO_URL") {
            c.repo_url = url_like("CNPE_REPO_URL", &v)?;
        }
        if let Some(v) = get("CNPE_BRANCH") {
            if v.starts_with('-') || v.contains(['.', ' ', ':', '~', '^']) {
                bail!("CNPE_BRANCH={v:?}: not a simple branch name");
            }
            c.branch = v;
        }
        for (name, slot) in [
            ("CNPE_NAMESPACE", &mut c.namespace),
            ("CNPE_ARGOCD_NAMESPACE", &mut c.argocd_namespace),
            ("CNPE_PROJECT", &mut c.project),
            ("CNPE_APPLICATION", &mut c.application),
            ("CNPE_WORKLOAD", &mut c.workload),
        ] {
            if let Some(v) = get(name) {
                *slot = dns_label(name, &v)?;
            }
        }
        if let Some(v) = lookup("CNPE_BODY") {
            if v.is_empty() {
                bail!("CNPE_BODY is set but empty: the healthy page needs a body to compare");
            }
            c.body = v;
        }
        if let Some(v) = get("CNPE_IMAGE") {
            if v.contains(char::is_whitespace) {
                bail!("CNPE_IMAGE={v:?}: an image reference has no whitespace");
            }
            c.image = v;
        }
        if let Some(v) = get("CNPE_DESTINATION_SERVER") {
            c.destination_server = url_like("CNPE_DESTINATION_SERVER", &v)?;
        }
        if let Some(v) = get("CNPE_WAIT_SECONDS") {
            c.wait_deadline = Duration::from_secs(positive("CNPE_WAIT_SECONDS", &v, 3600)?);
        }
        match (get("CNPE_PROBE_MS"), get("CNPE_POLL_MS")) {
            (Some(v), old) => {
                c.probe_interval = Duration::from_millis(positive("CNPE_PROBE_MS", &v, 60_000)?);
                if old.is_some() {
                    c.warnings.push(
                        "CNPE_POLL_MS is ignored: CNPE_PROBE_MS, its new name, is set".into(),
                    );
                }
            }
            (None, Some(v)) => {
                c.probe_interval = Duration::from_millis(positive("CNPE_POLL_MS", &v, 60_000)?);
                c.warnings.push(
                    "CNPE_POLL_MS is the old name of CNPE_PROBE_MS (the HTTP re-probe interval); \
                     it is accepted for now: rename it"
                        .into(),
                );
            }
            (None, None) => {}
        }
        if let Some(v) = get("CNPE_HTTP_URL") {
            c.http_url = Some(url_like("CNPE_HTTP_URL", &v)?);
        }
        if let Some(v) = get("CNPE_GIT_NAME") {
            c.git_name = v;
        }
        if let Some(v) = get("CNPE_GIT_EMAIL") {
            c.git_email = v;
        }
        if let Some(v) = get("CNPE_ALLOW_REMOTE") {
            c.allow_remote = match v.as_str() {
                "1" | "true" => true,
                "0" | "false" => false,
                _ => bail!("CNPE_ALLOW_REMOTE={v:?}: use 1 or 0"),
            };
        }
        Ok(c)
    }
}

fn absolute_path(name: &str, v: &str) -> Result<PathBuf> {
    let p = PathBuf::from(v);
    if !p.is_absolute() {
        bail!("{name}={v:?}: must be an absolute path");
    }
    Ok(p)
}

fn url_like(name: &str, v: &str) -> Result<String> {
    match v.split_once("://") {
        Some((scheme, rest))
            if !scheme.is_empty() && !rest.is_empty() && !v.contains(char::is_whitespace) =>
        {
            Ok(v.to_string())
        }
        _ => bail!("{name}={v:?}: must be a URL such as scheme://host/path"),
    }
}

fn dns_label(name: &str, v: &str) -> Result<String> {
    let ok = v.len() <= 63
        && v.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !v.starts_with('-')
        && !v.ends_with('-');
    if !ok {
        bail!("{name}={v:?}: must be a DNS label (lowercase letters, digits, '-', at most 63)");
    }
    Ok(v.to_string())
}

fn positive(name: &str, v: &str, max: u64) -> Result<u64> {
    match v.parse::<u64>() {
        Ok(n) if n > 0 && n <= max => Ok(n),
        _ => bail!("{name}={v:?}: must be a whole number from 1 to {max}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn with(pairs: &[(&str, &str)]) -> Result<Config> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn defaults_are_the_labs_values() {
        let c = with(&[]).unwrap();
        assert_eq!(c.gitops_dir, PathBuf::from("/srv/gitops"));
        assert_eq!(c.bare_repo, PathBuf::from("/srv/bare/app.git"));
        assert_eq!(c.evidence_dir, PathBuf::from("/root/cnpe"));
        assert_eq!(
            c.repo_url,
            "git://gitd.gitsrv.svc.cluster.local:9418/app.git"
        );
        assert_eq!(
            (c.namespace.as_str(), c.argocd_namespace.as_str()),
            ("cnpe-shop", "argocd")
        );
        assert_eq!(
            (c.project.as_str(), c.application.as_str()),
            ("cnpe-delivery", "cnpe-shop")
        );
        assert_eq!(c.body, "labhub-cnpe-v1");
        assert_eq!(c.image, "docker.io/library/nginx:1.27-alpine");
        assert_eq!(c.wait_deadline, Duration::from_secs(45));
        assert_eq!(c.http_url, None);
    }

    #[test]
    fn overrides_apply() {
        let c = with(&[
            ("CNPE_EVIDENCE_DIR", "/tmp/ev"),
            ("CNPE_WAIT_SECONDS", "90"),
            ("CNPE_HTTP_URL", "http://10.0.0.1/"),
        ])
        .unwrap();
        assert_eq!(c.evidence_dir, PathBuf::from("/tmp/ev"));
        assert_eq!(c.wait_deadline, Duration::from_secs(90));
        assert_eq!(c.http_url.as_deref(), Some("http://10.0.0.1/"));
    }

    #[test]
    fn invalid_values_name_the_variable() {
        for (k, v) in [
            ("CNPE_GITOPS_DIR", "relative/dir"),
            ("CNPE_BARE_REPO", "app.git"),
            ("CNPE_REPO_URL", "gitd:9418/app.git"),
            ("CNPE_NAMESPACE", "Cnpe_Shop"),
            ("CNPE_PROJECT", "-x"),
            ("CNPE_WAIT_SECONDS", "0"),
            ("CNPE_WAIT_SECONDS", "45s"),
            ("CNPE_POLL_MS", "-1"),
            ("CNPE_PROBE_MS", "0"),
            ("CNPE_ALLOW_REMOTE", "yes"),
            ("CNPE_BODY", ""),
            ("CNPE_BRANCH", "a b"),
        ] {
            let err = with(&[(k, v)]).unwrap_err().to_string();
            assert!(err.starts_with(k), "{k}={v}: {err}");
        }
    }

    #[test]
    fn the_probe_interval_takes_its_old_name_with_a_warning() {
        let from = |pairs: &[(&str, &str)]| {
            let m: std::collections::HashMap<String, String> = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            Config::from_lookup(move |k| m.get(k).cloned()).unwrap()
        };
        let new = from(&[("CNPE_PROBE_MS", "250")]);
        assert_eq!(new.probe_interval, Duration::from_millis(250));
        assert!(new.warnings.is_empty());
        let old = from(&[("CNPE_POLL_MS", "300")]);
        assert_eq!(old.probe_interval, Duration::from_millis(300));
        assert!(
            old.warnings[0].contains("CNPE_PROBE_MS"),
            "{:?}",
            old.warnings
        );
        let both = from(&[("CNPE_PROBE_MS", "250"), ("CNPE_POLL_MS", "300")]);
        assert_eq!(both.probe_interval, Duration::from_millis(250));
        assert!(both.warnings[0].contains("ignored"), "{:?}", both.warnings);
    }
}
