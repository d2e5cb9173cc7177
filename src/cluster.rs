//! The cluster adapter (kube-rs): the only module that talks to the Kubernetes API. It applies
//! the lab's AppProject and Application, changes an Application's targetRevision, reads the
//! live objects an observation needs, and probes the service. It never patches the Deployment.

use crate::argo::{self, AppProject, Application};
use crate::config::Config;
use crate::evidence::{self, Evidence, HttpOutcome, LiveState, Subject};
use anyhow::{bail, Context, Result};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::Client;
use serde_json::{json, Value};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Our field manager for server-side apply.
pub const FIELD_MANAGER: &str = "cnpe-lab";
/// How long one HTTP probe may take before it counts as a transport error.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(5);

/// The lab's safety rule: act only on a local/lab cluster. Loopback, private and link-local
/// addresses, `localhost`, `*.local` and in-cluster service names are accepted; anything else
/// needs `CNPE_ALLOW_REMOTE=1`.
pub fn check_api_server(url: &str, allow_remote: bool) -> Result<()> {
    let host = host_of(url);
    let local = match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => ip.is_loopback() || ip.is_private() || ip.is_link_local(),
        Ok(IpAddr::V6(ip)) => ip.is_loopback() || (ip.segments()[0] & 0xfe00) == 0xfc00,
        Err(_) => {
            let h = host.to_ascii_lowercase();
            h == "localhost" || h.ends_with(".local") || h.ends_with(".localhost") || h == "kubernetes.default.svc"
                || h.starts_with("kubernetes.default.svc.")
        }
    };
    if local || allow_remote {
        return Ok(());
    }
    bail!(
        "refusing to act on the API server at {url}: host {host:?} is not loopback, a private address or a \
         .local/in-cluster name, so it is probably not the lab's own cluster. Set CNPE_ALLOW_REMOTE=1 if it is."
    )
}

fn host_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if let Some(v6) = authority.strip_prefix('[') {
        return v6.split(']').next().unwrap_or("").to_string();
    }
    authority.rsplit_once(':').map_or(authority, |(h, _)| h).to_string()
}

pub struct Cluster {
    client: Client,
    cfg: Config,
    api_url: String,
    requests: Arc<AtomicU64>,
}

fn gvk_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(argo::GROUP, argo::VERSION, kind), plural)
}

impl Cluster {
    /// Connects with the usual kubeconfig resolution (`KUBECONFIG`, then `~/.kube/config`, then
    /// in-cluster) and applies the safety rule before any request.
    pub async fn connect(cfg: &Config) -> Result<Self> {
        let mut kcfg = kube::Config::infer().await.context("loading kubeconfig (KUBECONFIG or ~/.kube/config)")?;
        // kube retries 503s with backoff by default; a 503 from the service proxy is evidence
        // (no ready endpoint), and our waits poll anyway, so every request is made exactly once.
        kcfg.default_retry = false;
        let api_url = kcfg.cluster_url.to_string().trim_end_matches('/').to_string();
        check_api_server(&api_url, cfg.allow_remote)?;
        let client = Client::try_from(kcfg).context("building the Kubernetes client")?;
        Ok(Self { client, cfg: cfg.clone(), api_url, requests: Arc::new(AtomicU64::new(0)) })
    }

    pub fn api_url(&self) -> &str {
        &self.api_url
    }

    /// API requests made so far by this adapter (for the timeline).
    pub fn request_count(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    fn count(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// The server's version string; proves the API answers.
    pub async fn version(&self) -> Result<String> {
        self.count();
        let v = self.client.apiserver_version().await.with_context(|| format!("GET {}/version", self.api_url))?;
        Ok(v.git_version)
    }

    fn applications(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.cfg.argocd_namespace, &gvk_resource("Application", "applications"))
    }

    fn projects(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.cfg.argocd_namespace, &gvk_resource("AppProject", "appprojects"))
    }

    pub async fn ensure_namespace(&self) -> Result<()> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        self.count();
        if let Some(ns) = api.get_opt(&self.cfg.namespace).await? {
            if ns.status.and_then(|s| s.phase).as_deref() == Some("Terminating") {
                bail!("namespace {} is still terminating (a reset is in progress); retry when it is gone", self.cfg.namespace);
            }
            return Ok(());
        }
        let ns = Namespace {
            metadata: kube::api::ObjectMeta { name: Some(self.cfg.namespace.clone()), ..Default::default() },
            ..Default::default()
        };
        self.count();
        match api.create(&PostParams::default(), &ns).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(e).with_context(|| format!("creating namespace {}", self.cfg.namespace)),
        }
    }

    async fn apply(&self, api: &Api<DynamicObject>, name: &str, value: Value) -> Result<()> {
        self.count();
        api.patch(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&value))
            .await
            .with_context(|| format!("server-side apply of {} {name}", value["kind"].as_str().unwrap_or("object")))?;
        Ok(())
    }

    pub async fn apply_project(&self, p: &AppProject) -> Result<()> {
        self.apply(&self.projects(), p.metadata.name.as_deref().unwrap_or_default(), serde_json::to_value(p)?).await
    }

    pub async fn apply_application(&self, a: &Application) -> Result<()> {
        self.apply(&self.applications(), a.metadata.name.as_deref().unwrap_or_default(), serde_json::to_value(a)?).await
    }

    /// Steps 4 and 6: change ONLY the Application's targetRevision and request a refresh.
    pub async fn set_target_revision(&self, sha: &str) -> Result<()> {
        let patch = json!({
            "metadata": {"annotations": {argo::REFRESH_ANNOTATION: "normal"}},
            "spec": {"source": {"targetRevision": sha}}
        });
        self.count();
        self.applications()
            .patch(&self.cfg.application, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("setting targetRevision of Application {} to {sha}", self.cfg.application))?;
        Ok(())
    }

    pub async fn application(&self) -> Result<Option<Application>> {
        self.count();
        let obj = self.applications().get_opt(&self.cfg.application).await
            .with_context(|| format!("reading Application {}/{}", self.cfg.argocd_namespace, self.cfg.application))?;
        obj.map(|o| serde_json::from_value(serde_json::to_value(o)?).context("decoding the Application")).transpose()
    }

    pub async fn project(&self) -> Result<Option<AppProject>> {
        self.count();
        let obj = self.projects().get_opt(&self.cfg.project).await
            .with_context(|| format!("reading AppProject {}/{}", self.cfg.argocd_namespace, self.cfg.project))?;
        obj.map(|o| serde_json::from_value(serde_json::to_value(o)?).context("decoding the AppProject")).transpose()
    }

    pub async fn deployment(&self) -> Result<Option<Deployment>> {
        self.count();
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), &self.cfg.namespace);
        api.get_opt(&self.cfg.workload).await.with_context(|| format!("reading Deployment {}/{}", self.cfg.namespace, self.cfg.workload))
    }

    pub async fn endpoint_slices(&self) -> Result<Vec<EndpointSlice>> {
        self.count();
        let api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), &self.cfg.namespace);
        let lp = ListParams::default().labels(&format!("kubernetes.io/service-name={}", self.cfg.workload));
        Ok(api.list(&lp).await.context("listing EndpointSlices")?.items)
    }

    pub async fn pods(&self) -> Result<Vec<Pod>> {
        self.count();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.cfg.namespace);
        let lp = ListParams::default().labels(&format!("app={}", self.cfg.workload));
        Ok(api.list(&lp).await.context("listing pods")?.items)
    }

    /// Events in the workload namespace and for the Application, newest last.
    pub async fn events(&self) -> Result<Vec<Event>> {
        self.count();
        let ns: Api<Event> = Api::namespaced(self.client.clone(), &self.cfg.namespace);
        let mut events = ns.list(&ListParams::default()).await.context("listing events")?.items;
        self.count();
        let argo: Api<Event> = Api::namespaced(self.client.clone(), &self.cfg.argocd_namespace);
        let lp = ListParams::default().fields(&format!("involvedObject.name={}", self.cfg.application));
        events.extend(argo.list(&lp).await.context("listing Application events")?.items);
        events.sort_by_key(event_time);
        Ok(events)
    }

    /// The URL the probe requests: the API server's service proxy unless `CNPE_HTTP_URL` is set.
    pub fn http_url(&self) -> String {
        match &self.cfg.http_url {
            Some(u) => u.clone(),
            None => format!("{}{}", self.api_url, self.proxy_path()),
        }
    }

    fn proxy_path(&self) -> String {
        format!("/api/v1/namespaces/{}/services/{}:80/proxy/", self.cfg.namespace, self.cfg.workload)
    }

    /// One real GET of the service. A 503 or a transport error is evidence, not an error.
    pub async fn probe(&self) -> HttpOutcome {
        let url = self.http_url();
        let result = match &self.cfg.http_url {
            Some(u) => tokio::time::timeout(HTTP_TIMEOUT, direct_get(u)).await,
            None => {
                self.count();
                tokio::time::timeout(HTTP_TIMEOUT, self.proxy_get()).await
            }
        };
        match result {
            Ok(Ok((code, body))) => HttpOutcome { url, code: Some(code), body: Some(body), error: None },
            Ok(Err(e)) => HttpOutcome { url, code: None, body: None, error: Some(format!("{e:#}")) },
            Err(_) => HttpOutcome { url, code: None, body: None, error: Some(format!("no response within {HTTP_TIMEOUT:?}")) },
        }
    }

    async fn proxy_get(&self) -> Result<(u16, String)> {
        let req = http::Request::get(self.proxy_path()).body(kube::client::Body::empty())?;
        let resp = self.client.send(req).await?;
        let code = resp.status().as_u16();
        let bytes = resp.into_body().collect_bytes().await?;
        Ok((code, body_text(&bytes)))
    }

    /// Reads everything one observation needs: Application, Deployment, EndpointSlices (3 API
    /// requests) and the HTTP probe (1 more through the service proxy).
    pub async fn live_state(&self) -> Result<(LiveState, HttpOutcome)> {
        let (application, deployment, slices, http) =
            tokio::join!(self.application(), self.deployment(), self.endpoint_slices(), self.probe());
        Ok((LiveState { application: application?, deployment: deployment?, slices: slices? }, http))
    }

    pub async fn observe(&self) -> Result<Evidence> {
        let (live, http) = self.live_state().await?;
        Ok(evidence::derive(&Subject::from_config(&self.cfg), &live, &http, chrono::Utc::now()))
    }

    /// Explicit reset: deletes the lab's Application, AppProject and workload namespace, and
    /// waits until the namespace is gone. Never touches anything else.
    pub async fn delete_lab_objects(&self, deadline: Duration) -> Result<()> {
        let dp = DeleteParams::default();
        for (api, name) in [(self.applications(), &self.cfg.application), (self.projects(), &self.cfg.project)] {
            self.count();
            match api.delete(name, &dp).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e).with_context(|| format!("deleting {name}")),
            }
        }
        let ns: Api<Namespace> = Api::all(self.client.clone());
        self.count();
        match ns.delete(&self.cfg.namespace, &dp).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e).with_context(|| format!("deleting namespace {}", self.cfg.namespace)),
        }
        let start = std::time::Instant::now();
        loop {
            self.count();
            let app_gone = self.applications().get_opt(&self.cfg.application).await?.is_none();
            let ns_gone = ns.get_opt(&self.cfg.namespace).await?.is_none();
            if app_gone && ns_gone {
                return Ok(());
            }
            if start.elapsed() > deadline {
                bail!("reset: after {deadline:?} still present: application={} namespace={}", !app_gone, !ns_gone);
            }
            tokio::time::sleep(self.cfg.poll_interval).await;
        }
    }
}

async fn direct_get(url: &str) -> Result<(u16, String)> {
    let resp = reqwest::Client::builder().timeout(HTTP_TIMEOUT).build()?.get(url).send().await?;
    let code = resp.status().as_u16();
    let bytes = resp.bytes().await?;
    Ok((code, body_text(&bytes)))
}

/// The body as text, byte for byte when it is UTF-8 (nginx's page is); otherwise lossily, which
/// can never equal an expected body that differs in bytes.
fn body_text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Sort key for events: the newest timestamp the event carries, as RFC 3339 text.
pub fn event_time(e: &Event) -> String {
    let v = serde_json::to_value(e).unwrap_or(Value::Null);
    ["lastTimestamp", "eventTime", "firstTimestamp"]
        .iter()
        .find_map(|k| v.get(*k).and_then(Value::as_str).map(str::to_string))
        .or_else(|| v.pointer("/metadata/creationTimestamp").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lab_clusters_are_accepted() {
        for url in [
            "https://127.0.0.1:6443",
            "https://10.99.0.1:6443",
            "https://192.168.1.5",
            "https://172.20.0.2:6443/",
            "https://[::1]:6443",
            "https://localhost:6443",
            "https://k3s.local:6443",
            "https://kubernetes.default.svc",
            "https://kubernetes.default.svc.cluster.local:443",
        ] {
            assert!(check_api_server(url, false).is_ok(), "{url}");
        }
    }

    #[test]
    fn remote_clusters_are_refused_unless_allowed() {
        for url in ["https://35.1.2.3:443", "https://prod.example.com", "https://172.32.0.1", "https://user@8.8.8.8:6443"] {
            let err = check_api_server(url, false).unwrap_err().to_string();
            assert!(err.contains("CNPE_ALLOW_REMOTE=1"), "{err}");
            assert!(check_api_server(url, true).is_ok());
        }
    }
}
