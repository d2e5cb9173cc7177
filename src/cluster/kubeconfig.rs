//! Loads the Kubernetes client configuration like `kube::Config::infer()`, but an error about a
//! kubeconfig names the file and, for YAML errors, the line and column: never its content.
//!
//! Why: kube's errors quote the file. `serde_saphyr` (kube 5's YAML parser) renders a snippet of
//! the source lines around the error in both `Display` and `Debug` (so a bad indentation under
//! `token:` printed the token), its messages quote scalars (`invalid type: string "..."`), the
//! base64 decoder names the offending byte, and `pem` errors quote BEGIN/END tags and headers.
//! A CI log must never receive a token or a client key, so every message here is rebuilt from
//! the error's *kind* and position only, and the original error is dropped (not kept as a
//! `source`, which `{:#}` / `{:?}` would print).
//!
//! Resolution, as `infer()`: `KUBECONFIG` (a `:`-separated list, merged first-wins; empty entries
//! ignored), else `~/.kube/config`, else the in-cluster service account. One deliberate
//! difference: `infer()` silently falls back to in-cluster when a kubeconfig *exists but is
//! broken*; here that is an error, so a typo never points the lab at a different cluster.

use anyhow::{anyhow, Result};
use kube::config::{
    Config, InClusterError, KubeConfigOptions, Kubeconfig, KubeconfigError, LoadDataError,
};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// Where the kubeconfig came from; the prefix of every message about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The files listed in `KUBECONFIG`, in order.
    Env(Vec<PathBuf>),
    /// `~/.kube/config`.
    Default(PathBuf),
    /// No kubeconfig: `KUBECONFIG` unset or empty, and no home directory or no default file.
    InCluster,
}

impl Source {
    /// The resolution of `kube::Config::infer()` for the given `KUBECONFIG` value and home
    /// directory. `~/.kube/config` counts when it exists (or cannot be checked).
    pub fn resolve(kubeconfig_env: Option<&OsStr>, home: Option<&Path>) -> Source {
        if let Some(value) = kubeconfig_env {
            let paths: Vec<PathBuf> = std::env::split_paths(value)
                .filter(|p| !p.as_os_str().is_empty())
                .collect();
            if !paths.is_empty() {
                return Source::Env(paths);
            }
        }
        match home.map(|h| h.join(".kube").join("config")) {
            Some(p) if !matches!(p.try_exists(), Ok(false)) => Source::Default(p),
            _ => Source::InCluster,
        }
    }

    /// The resolution for this process's environment.
    pub fn from_env() -> Source {
        Source::resolve(
            std::env::var_os("KUBECONFIG").as_deref(),
            std::env::home_dir().as_deref(),
        )
    }

    fn label(&self) -> String {
        match self {
            Source::Env(paths) => format!("KUBECONFIG {}", join(paths)),
            Source::Default(p) => format!("kubeconfig {}", p.display()),
            Source::InCluster => "in-cluster configuration".into(),
        }
    }
}

fn join(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":")
}

/// Loads the configuration from this process's environment (see the module docs).
pub async fn load() -> Result<Config> {
    load_from(&Source::from_env()).await
}

/// Loads the configuration from an explicit [`Source`].
pub async fn load_from(source: &Source) -> Result<Config> {
    let mut config = match source {
        Source::Env(paths) => load_files(source, paths).await?,
        Source::Default(path) => load_files(source, std::slice::from_ref(path)).await?,
        Source::InCluster => Config::incluster().map_err(|e| {
            anyhow!(
                "no kubeconfig (KUBECONFIG is unset and ~/.kube/config does not exist) and no in-cluster configuration: {}",
                in_cluster_reason(&e)
            )
        })?,
    };
    config.apply_debug_overrides();
    Ok(config)
}

async fn load_files(source: &Source, paths: &[PathBuf]) -> Result<Config> {
    let mut merged = Kubeconfig::default();
    for path in paths {
        let label = match source {
            Source::Env(_) => format!("KUBECONFIG {}", path.display()),
            _ => format!("kubeconfig {}", path.display()),
        };
        let one =
            Kubeconfig::read_from(path).map_err(|e| anyhow!("{label}: {}", file_reason(&e)))?;
        merged = merged
            .merge(one)
            .map_err(|e| anyhow!("{}: {}", source.label(), config_reason(&e)))?;
    }
    let config = Config::from_custom_kubeconfig(merged, &KubeConfigOptions::default())
        .await
        .map_err(|e| anyhow!("{}: {}", source.label(), config_reason(&e)))?;
    // The client key, client certificate and token file are only read when a client is built;
    // build one now (no connection is made) so their errors are sanitized here too.
    kube::client::ClientBuilder::try_from(config.clone())
        .map_err(|e| anyhow!("{}: {}", source.label(), client_reason(&e)))?;
    Ok(config)
}

/// For tools that take Argo CD's namespace from the kube context (`argocd --core` reads
/// `argocd-cm` there, argo-cd#7721): a kubeconfig document that only adds a context like the
/// current one with `namespace` set and makes it current, and the `KUBECONFIG` value that puts
/// it in front of the files in use. It names the cluster and user entries of the current
/// context and copies no credential.
pub fn with_namespace(source: &Source, namespace: &str) -> Result<(String, std::ffi::OsString)> {
    let paths = match source {
        Source::Env(paths) => paths.clone(),
        Source::Default(p) => vec![p.clone()],
        Source::InCluster => anyhow::bail!("no kubeconfig file to add a context to (in-cluster)"),
    };
    let mut merged = Kubeconfig::default();
    for path in &paths {
        let one = Kubeconfig::read_from(path)
            .map_err(|e| anyhow!("kubeconfig {}: {}", path.display(), file_reason(&e)))?;
        merged = merged
            .merge(one)
            .map_err(|e| anyhow!("{}: {}", source.label(), config_reason(&e)))?;
    }
    let current = merged
        .current_context
        .clone()
        .ok_or_else(|| anyhow!("{}: no current-context is set", source.label()))?;
    let context = merged
        .contexts
        .iter()
        .find(|c| c.name == current)
        .and_then(|c| c.context.clone())
        .ok_or_else(|| anyhow!("{}: the current context has no entry", source.label()))?;
    let name = format!("cnpe-{namespace}");
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": name,
        "contexts": [{"name": name, "context": {
            "cluster": context.cluster,
            "user": context.user,
            "namespace": namespace,
        }}],
    });
    Ok((doc.to_string(), std::env::join_paths(paths)?))
}

/// Why one file could not be read as a kubeconfig, with no byte of its content.
fn file_reason(e: &KubeconfigError) -> String {
    match e {
        KubeconfigError::ReadConfig(io, _) => match io.kind() {
            std::io::ErrorKind::NotFound => "the file does not exist".into(),
            std::io::ErrorKind::PermissionDenied => "permission denied reading the file".into(),
            // kube's own errors for bad encodings ("Invalid UTF-8", ...), fixed strings.
            std::io::ErrorKind::InvalidData => "the file is not UTF-8 or UTF-16 text".into(),
            kind => format!("the file cannot be read ({kind})"),
        },
        KubeconfigError::Parse(yaml) => match yaml.location() {
            Some(at) => format!(
                "not a valid kubeconfig (YAML error at line {} column {})",
                at.line(),
                at.column()
            ),
            None => "not a valid kubeconfig (YAML error)".into(),
        },
        other => config_reason(other),
    }
}

/// Why a (parsed) kubeconfig is unusable, with no value from it (names included: a context or
/// file name is content too).
fn config_reason(e: &KubeconfigError) -> String {
    match e {
        KubeconfigError::CurrentContextNotSet => "no current-context is set".into(),
        KubeconfigError::KindMismatch => {
            "files or documents with different `kind` cannot be merged".into()
        }
        KubeconfigError::ApiVersionMismatch => {
            "files or documents with different `apiVersion` cannot be merged".into()
        }
        KubeconfigError::LoadContext(_) => {
            "the current-context is not defined under `contexts`".into()
        }
        KubeconfigError::LoadClusterOfContext(_) => {
            "the current context's cluster is not defined under `clusters`".into()
        }
        KubeconfigError::FindPath => "no home directory to find ~/.kube/config in".into(),
        KubeconfigError::ReadConfig(..) | KubeconfigError::Parse(_) => file_reason(e),
        KubeconfigError::MissingClusterUrl => {
            "the current context's cluster has no `server`".into()
        }
        KubeconfigError::ParseClusterUrl(_) => {
            "the current context's cluster `server` is not a valid URL".into()
        }
        KubeconfigError::ParseProxyUrl(_) => {
            "the proxy URL (`proxy-url` or HTTPS_PROXY) is not valid".into()
        }
        KubeconfigError::LoadCertificateAuthority(d) => {
            format!("certificate-authority(-data) {}", data_reason(d))
        }
        KubeconfigError::LoadClientCertificate(d) => {
            format!("client-certificate(-data) {}", data_reason(d))
        }
        KubeconfigError::LoadClientKey(d) => format!("client-key(-data) {}", data_reason(d)),
        KubeconfigError::ParseCertificates(_) => {
            "certificate-authority(-data) is not valid PEM".into()
        }
        #[allow(unreachable_patterns)]
        _ => "not usable as a kubeconfig".into(),
    }
}

fn data_reason(e: &LoadDataError) -> String {
    match e {
        LoadDataError::DecodeBase64(_) => "is not valid base64".into(),
        LoadDataError::ReadFile(io, _) => {
            format!("names a file that cannot be read ({})", io.kind())
        }
        LoadDataError::NoBase64DataOrFile => {
            "is missing (a client certificate needs its key and vice versa)".into()
        }
    }
}

fn client_reason(e: &kube::Error) -> String {
    match e {
        kube::Error::InferKubeconfig(k) => config_reason(k),
        kube::Error::RustlsTls(_) => {
            "the client certificate, client key or certificate authority is not usable for TLS"
                .into()
        }
        kube::Error::Auth(_) => {
            "the user's credentials (token, token file, exec or auth provider) are not usable"
                .into()
        }
        _ => "a Kubernetes client cannot be built from it".into(),
    }
}

fn in_cluster_reason(e: &InClusterError) -> String {
    match e {
        InClusterError::ReadEnvironmentVariable(_) => {
            "KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT are not set".into()
        }
        InClusterError::ParseClusterPort(_) | InClusterError::ParseClusterUrl(_) => {
            "KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT do not form a valid URL".into()
        }
        InClusterError::ReadDefaultNamespace(io) => format!(
            "the service account namespace cannot be read ({})",
            io.kind()
        ),
        InClusterError::ReadCertificateBundle(io) => {
            format!("the service account CA cannot be read ({})", io.kind())
        }
        InClusterError::ParseCertificates(_) => "the service account CA is not valid PEM".into(),
        #[allow(unreachable_patterns)]
        _ => "the in-cluster configuration cannot be loaded".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolution_follows_infer() {
        let home = tempfile::tempdir().unwrap();
        let h = Some(home.path());
        assert_eq!(
            Source::resolve(Some(OsStr::new("/a:/b::/c")), h),
            Source::Env(vec!["/a".into(), "/b".into(), "/c".into()])
        );
        // An empty KUBECONFIG (or only separators) is as good as unset.
        assert_eq!(Source::resolve(Some(OsStr::new(":")), h), Source::InCluster);
        assert_eq!(Source::resolve(None, None), Source::InCluster);
        std::fs::create_dir(home.path().join(".kube")).unwrap();
        std::fs::write(home.path().join(".kube/config"), "").unwrap();
        assert_eq!(
            Source::resolve(Some(OsStr::new("")), h),
            Source::Default(home.path().join(".kube/config"))
        );
    }
}
