//! The cluster API (kube-rs): the only module that reads or writes Kubernetes objects. It
//! applies the lab's AppProject and Application, changes an Application's targetRevision, and
//! reads the objects an observation or an explanation needs. It never patches the Deployment.
//! Every request is counted by a client layer, so the count cannot miss a call site.

pub mod argo;
pub mod gateway;
pub mod kind;
pub mod kubeconfig;
pub mod live;
pub mod probe;
pub mod provision;
pub mod rollouts;
pub mod safety;
pub mod watch;

use crate::cluster::argo::{AppProject, Application};
use crate::config::Config;
use anyhow::{anyhow, bail, Context, Result};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::Client;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What one observation read from the cluster (any part may be missing).
#[derive(Debug, Clone, Default)]
pub struct LiveState {
    pub application: Option<Application>,
    pub deployment: Option<Deployment>,
    pub slices: Vec<EndpointSlice>,
}

/// The newest time an event carries (typed: `lastTimestamp`, `eventTime`, `firstTimestamp`,
/// then its creation), for sorting and display.
pub fn event_time(e: &Event) -> Option<k8s_openapi::jiff::Timestamp> {
    e.last_timestamp
        .as_ref()
        .map(|t| t.0)
        .or_else(|| e.event_time.as_ref().map(|t| t.0))
        .or_else(|| e.first_timestamp.as_ref().map(|t| t.0))
        .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// A request through the API server's service or pod proxy (an HTTP probe, not an API call).
pub fn is_proxy_path(path: &str) -> bool {
    // /api/v1/namespaces/NS/(services|pods)/NAME/proxy[/...]
    let parts: Vec<&str> = path.split('/').collect();
    matches!(
        parts.as_slice(),
        [
            "",
            "api",
            "v1",
            "namespaces",
            _,
            "services" | "pods",
            _,
            "proxy",
            ..
        ]
    )
}

/// Our field manager for server-side apply.
pub const FIELD_MANAGER: &str = "cnpe-lab";

#[derive(Clone)]
pub struct Cluster {
    client: Client,
    cfg: Config,
    api_url: http::Uri,
    requests: Arc<AtomicU64>,
    watches: Arc<AtomicU64>,
}

impl Cluster {
    /// Connects with the usual kubeconfig resolution (`KUBECONFIG`, then `~/.kube/config`, then
    /// in-cluster; errors name the file, never its contents) and applies the safety rule
    /// before any request.
    pub async fn connect(cfg: &Config) -> Result<Self> {
        let mut kcfg = crate::cluster::kubeconfig::load().await?;
        // kube retries 503s with backoff by default; a 503 from the service proxy is evidence
        // (no ready endpoint), and the waits follow watches anyway: every request is made once.
        kcfg.default_retry = false;
        let api_url = kcfg.cluster_url.clone();
        crate::cluster::safety::check_api_server(&api_url, cfg.allow_remote)?;
        let requests = Arc::new(AtomicU64::new(0));
        let watches = Arc::new(AtomicU64::new(0));
        let counter = requests.clone();
        let watch_counter = watches.clone();
        let client = kube::client::ClientBuilder::try_from(kcfg)
            .context("building the Kubernetes client")?
            .with_layer(&tower::util::MapRequestLayer::new(
                move |req: http::Request<kube::client::Body>| {
                    // Probes through the service or pod proxy are counted by the probe itself.
                    if !is_proxy_path(req.uri().path()) {
                        counter.fetch_add(1, Ordering::Relaxed);
                    }
                    if req.uri().query().is_some_and(|q| q.contains("watch=true")) {
                        watch_counter.fetch_add(1, Ordering::Relaxed);
                    }
                    req
                },
            ))
            .build();
        Ok(Self {
            client,
            cfg: cfg.clone(),
            api_url,
            requests,
            watches,
        })
    }

    pub fn client(&self) -> Client {
        self.client.clone()
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn api_url(&self) -> String {
        self.api_url.to_string().trim_end_matches('/').to_string()
    }

    /// HTTP requests this client has sent so far, probes apart: each GET/PATCH, each list and
    /// each (re)started watch count once; events streamed over an open watch are not requests.
    pub fn request_count(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Watch requests among them: each watch stream opened or re-opened.
    pub fn watch_count(&self) -> u64 {
        self.watches.load(Ordering::Relaxed)
    }

    /// The server's version string; proves the API answers.
    pub async fn version(&self) -> Result<String> {
        let v = self
            .client
            .apiserver_version()
            .await
            .with_context(|| format!("GET {}/version", self.api_url()))?;
        Ok(v.git_version)
    }

    pub fn applications(&self) -> Api<Application> {
        Api::namespaced(self.client.clone(), &self.cfg.argocd_namespace)
    }

    fn projects(&self) -> Api<AppProject> {
        Api::namespaced(self.client.clone(), &self.cfg.argocd_namespace)
    }

    pub fn deployments(&self) -> Api<Deployment> {
        Api::namespaced(self.client.clone(), &self.cfg.namespace)
    }

    pub fn endpoint_slices_api(&self) -> Api<EndpointSlice> {
        Api::namespaced(self.client.clone(), &self.cfg.namespace)
    }

    /// The label selecting the workload Service's EndpointSlices.
    pub fn slice_selector(&self) -> String {
        format!("kubernetes.io/service-name={}", self.cfg.workload)
    }

    pub async fn ensure_namespace(&self) -> Result<()> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        if let Some(ns) = api.get_opt(&self.cfg.namespace).await? {
            if ns.status.and_then(|s| s.phase).as_deref() == Some("Terminating") {
                bail!("namespace {} is still terminating (a reset is in progress); retry when it is gone", self.cfg.namespace);
            }
            return Ok(());
        }
        let ns = Namespace {
            metadata: kube::api::ObjectMeta {
                name: Some(self.cfg.namespace.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        match api.create(&PostParams::default(), &ns).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(e).with_context(|| format!("creating namespace {}", self.cfg.namespace)),
        }
    }

    pub async fn apply_project(&self, p: &AppProject) -> Result<()> {
        let name = p.metadata.name.as_deref().unwrap_or_default();
        self.projects()
            .patch(
                name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(p),
            )
            .await
            .with_context(|| format!("server-side apply of AppProject {name}"))?;
        Ok(())
    }

    pub async fn apply_application(&self, a: &Application) -> Result<()> {
        let name = a.metadata.name.as_deref().unwrap_or_default();
        self.applications()
            .patch(
                name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(a),
            )
            .await
            .with_context(|| format!("server-side apply of Application {name}"))?;
        Ok(())
    }

    /// Steps 4 and 6: change ONLY the Application's targetRevision and request a refresh.
    pub async fn set_target_revision(&self, revision: &str) -> Result<()> {
        self.patch_application(
            &argo::refresh_patch(Some(revision)),
            &format!("setting targetRevision to {revision}"),
        )
        .await
    }

    /// Waits up to `within` until Argo CD has compared `sha` (status.sync.revision); if it has
    /// not, requests a refresh again with an annotation value that differs from what the
    /// Application carries (a real change, so the controller gets a watch event), says so, and
    /// returns what it did. Does not wait after that: the wait that follows names whatever is
    /// still unmet.
    ///
    /// Seen once in 54 kill trials on the hermetic cluster: after step 6 set targetRevision,
    /// Argo CD v3.5.2's controller did not reconcile the Application for 56 s (no "Refreshing
    /// app status" in its log), and the resumed run's identical patch changed nothing on the
    /// server, so no event woke the controller; step 7 timed out at the old revision.
    pub async fn settle_refresh(&self, sha: &str, within: Duration) -> Result<Option<String>> {
        let name = self.cfg.application.clone();
        let wanted = sha.to_string();
        let compared = tokio::time::timeout(
            within,
            await_condition(
                self.applications(),
                &name,
                move |a: Option<&Application>| a.is_none_or(|a| a.compared(&wanted)),
            ),
        )
        .await;
        if let Ok(r) = compared {
            r.with_context(|| format!("watching Application {name}"))?;
            return Ok(None);
        }
        let current = self.application().await?;
        let Some(app) = current.filter(|a| !a.compared(sha)) else {
            return Ok(None);
        };
        let pending = app.pending_refresh();
        let note = format!(
            "Argo CD had not compared {} on Application {name} {within:?} after targetRevision \
             was set (refresh request pending: {}; {}); requested a refresh again with a \
             changed value, so its controller gets a new event",
            &sha[..sha.len().min(7)],
            pending.unwrap_or("none, it was taken"),
            self.controller_hint(),
        );
        self.patch_application(
            &argo::changed_refresh_patch(pending),
            "requesting the refresh again",
        )
        .await?;
        eprintln!("cnpe-lab: {note}");
        Ok(Some(note))
    }

    /// Where to look when Argo CD's controller does not react: it runs in a pod on kind and the
    /// lab VM, and as a host process on the hermetic cluster.
    fn controller_hint(&self) -> String {
        format!(
            "is argocd-application-controller running and keeping up? In pods: `kubectl -n {} get \
             pods`; on the hermetic cluster it is a host process (`bash ci/hermetic/up.sh` \
             restarts a stopped component)",
            self.cfg.argocd_namespace
        )
    }

    /// Asks Argo CD to compare again now (what `argocd app get --refresh` does): after a
    /// failed fetch it otherwise retries only at its next reconciliation.
    pub async fn request_refresh(&self) -> Result<()> {
        self.patch_application(&argo::refresh_patch(None), "requesting a refresh")
            .await
    }

    async fn patch_application(&self, patch: &serde_json::Value, what: &str) -> Result<()> {
        self.applications()
            .patch(
                &self.cfg.application,
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
            .with_context(|| format!("Application {}: {what}", self.cfg.application))?;
        Ok(())
    }

    /// After step 2's applies: waits until Argo CD has evaluated the Application and, when it
    /// shows [`Application::missing_project_condition`] although the AppProject is live,
    /// requests one refresh and waits for it to go. Seen in CI: a run SIGKILLed as step 2
    /// began, whose resume graded the wiring while the condition was there. Returns what it
    /// did, if anything.
    pub async fn settle_project_reference(&self, deadline: Duration) -> Result<Option<String>> {
        let name = self.cfg.application.clone();
        let app = tokio::time::timeout(
            deadline,
            await_condition(self.applications(), &name, |a: Option<&Application>| {
                a.is_some_and(Application::evaluated)
            }),
        )
        .await
        .map_err(|_| {
            anyhow!(
                "Application {name}: Argo CD did not evaluate it within {deadline:?} (no status.sync.status): {}",
                self.controller_hint()
            )
        })?
        .with_context(|| format!("watching Application {name}"))?;
        let Some(condition) = app.as_ref().and_then(|a| a.missing_project_condition()) else {
            return Ok(None);
        };
        let message = condition.message.clone().unwrap_or_default();
        if self.project().await?.is_none() {
            bail!(
                "Application {name}: {message}, and AppProject {} is indeed not on the cluster",
                self.cfg.project
            );
        }
        self.request_refresh().await?;
        let cleared = tokio::time::timeout(
            deadline,
            await_condition(self.applications(), &name, |a: Option<&Application>| {
                a.is_some_and(|a| a.evaluated() && a.missing_project_condition().is_none())
            }),
        )
        .await;
        match cleared {
            Ok(r) => {
                r.with_context(|| format!("watching Application {name}"))?;
                let note = format!(
                    "Argo CD evaluated Application {name} before its cache held AppProject {} \
                 ({message:?}); one refresh request cleared it",
                    self.cfg.project
                );
                eprintln!("cnpe-lab: {note}");
                Ok(Some(note))
            }
            Err(_) => bail!(
                "Application {name}: still {message:?} {deadline:?} after a refresh request, although \
                 AppProject {} exists: Argo CD's project cache is not following the cluster \
                 (argocd-application-controller's log; restart it to rebuild its cache)",
                self.cfg.project
            ),
        }
    }

    /// The `kube-system` namespace's UID: what tells one cluster from another (every new
    /// cluster makes it afresh; restarting the same cluster keeps it).
    pub async fn kube_system_uid(&self) -> Result<String> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let ns = api
            .get("kube-system")
            .await
            .context("reading namespace kube-system (what identifies the cluster)")?;
        ns.metadata
            .uid
            .ok_or_else(|| anyhow!("namespace kube-system has no metadata.uid"))
    }

    pub async fn application(&self) -> Result<Option<Application>> {
        self.applications()
            .get_opt(&self.cfg.application)
            .await
            .with_context(|| {
                format!(
                    "reading Application {}/{}",
                    self.cfg.argocd_namespace, self.cfg.application
                )
            })
    }

    pub async fn project(&self) -> Result<Option<AppProject>> {
        self.projects()
            .get_opt(&self.cfg.project)
            .await
            .with_context(|| {
                format!(
                    "reading AppProject {}/{}",
                    self.cfg.argocd_namespace, self.cfg.project
                )
            })
    }

    pub async fn deployment(&self) -> Result<Option<Deployment>> {
        self.deployments()
            .get_opt(&self.cfg.workload)
            .await
            .with_context(|| {
                format!(
                    "reading Deployment {}/{}",
                    self.cfg.namespace, self.cfg.workload
                )
            })
    }

    pub async fn endpoint_slices(&self) -> Result<Vec<EndpointSlice>> {
        let lp = ListParams::default().labels(&self.slice_selector());
        Ok(self
            .endpoint_slices_api()
            .list(&lp)
            .await
            .context("listing EndpointSlices")?
            .items)
    }

    pub async fn pods(&self) -> Result<Vec<Pod>> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.cfg.namespace);
        let lp = ListParams::default().labels(&format!("app={}", self.cfg.workload));
        Ok(api.list(&lp).await.context("listing pods")?.items)
    }

    /// The workload's ReplicaSets (for explaining a rollback to an existing one).
    pub async fn replica_sets(&self) -> Result<Vec<ReplicaSet>> {
        let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), &self.cfg.namespace);
        let lp = ListParams::default().labels(&format!("app={}", self.cfg.workload));
        Ok(api.list(&lp).await.context("listing ReplicaSets")?.items)
    }

    /// Events in the workload namespace and for the Application, oldest first.
    pub async fn events(&self) -> Result<Vec<Event>> {
        let ns: Api<Event> = Api::namespaced(self.client.clone(), &self.cfg.namespace);
        let mut events = ns
            .list(&ListParams::default())
            .await
            .context("listing events")?
            .items;
        let argo: Api<Event> = Api::namespaced(self.client.clone(), &self.cfg.argocd_namespace);
        let lp =
            ListParams::default().fields(&format!("involvedObject.name={}", self.cfg.application));
        events.extend(
            argo.list(&lp)
                .await
                .context("listing Application events")?
                .items,
        );
        events.sort_by_key(event_time);
        Ok(events)
    }

    /// The objects one observation needs, by three concurrent GETs (for one-shot reads; waits
    /// use [`crate::cluster::live::LiveWatch`]).
    pub async fn live_state(&self) -> Result<LiveState> {
        let (application, deployment, slices) = tokio::join!(
            self.application(),
            self.deployment(),
            self.endpoint_slices()
        );
        Ok(LiveState {
            application: application?,
            deployment: deployment?,
            slices: slices?,
        })
    }

    /// Explicit reset: deletes the lab's Application, AppProject and workload namespace, and
    /// waits (watching, with a deadline) until the Application and the namespace are gone.
    /// Never touches anything else.
    pub async fn delete_lab_objects(&self, deadline: Duration) -> Result<()> {
        let dp = DeleteParams::default();
        let app_uid = self.application().await?.and_then(|a| a.metadata.uid);
        for result in [
            self.applications()
                .delete(&self.cfg.application, &dp)
                .await
                .map(|_| ()),
            self.projects()
                .delete(&self.cfg.project, &dp)
                .await
                .map(|_| ()),
        ] {
            match result {
                Ok(()) => {}
                Err(kube::Error::Api(s)) if s.is_not_found() => {}
                Err(e) => return Err(e).context("deleting the lab's Application/AppProject"),
            }
        }
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let ns_uid = namespaces
            .get_opt(&self.cfg.namespace)
            .await?
            .and_then(|n| n.metadata.uid);
        match namespaces.delete(&self.cfg.namespace, &dp).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            Err(e) => {
                return Err(e).with_context(|| format!("deleting namespace {}", self.cfg.namespace))
            }
        }
        let gone = async {
            if let Some(uid) = &app_uid {
                await_condition(
                    self.applications(),
                    &self.cfg.application,
                    conditions::is_deleted(uid),
                )
                .await?;
            }
            if let Some(uid) = &ns_uid {
                await_condition(
                    namespaces.clone(),
                    &self.cfg.namespace,
                    conditions::is_deleted(uid),
                )
                .await?;
            }
            Ok::<_, kube::runtime::wait::Error>(())
        };
        match tokio::time::timeout(deadline, gone).await {
            Ok(r) => r.context("watching the lab's objects being deleted"),
            Err(_) => {
                let app_left = self.application().await?.is_some();
                let ns_left = namespaces.get_opt(&self.cfg.namespace).await?;
                bail!(
                    "reset: after {deadline:?} still present: application={app_left} namespace={} \
                     (a finalizer holding it? `kubectl get ns {} -o yaml`)",
                    ns_left.is_some(),
                    self.cfg.namespace
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_through_the_proxy_are_told_apart_from_api_calls() {
        assert!(is_proxy_path(
            "/api/v1/namespaces/shop/services/web:80/proxy/"
        ));
        assert!(is_proxy_path(
            "/api/v1/namespaces/shop/pods/web-1:8080/proxy/x"
        ));
        assert!(is_proxy_path(
            "/api/v1/namespaces/shop/pods/web-1:8080/proxy"
        ));
        assert!(!is_proxy_path("/api/v1/namespaces/shop/pods"));
        assert!(!is_proxy_path("/api/v1/namespaces/shop/pods/web-1"));
        assert!(!is_proxy_path(
            "/apis/apps/v1/namespaces/proxy/deployments/proxy/proxy"
        ));
    }
}
