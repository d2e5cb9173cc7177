//! Builders for everything the lab writes: `app/release.json` (a v1 List of the Deployment and
//! Service), `project.json` and `application.json`. Built from typed structs (k8s-openapi and
//! [`crate::cluster::argo`]), never from hand-written JSON text.

use crate::cluster::argo::{
    self, AppProject, AppProjectSpec, Application, ApplicationSpec, Automated, Destination,
    GroupKind, Source, SyncPolicy,
};
use crate::config::Config;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, HTTPGetAction, PodSpec, PodTemplateSpec, Probe, ResourceRequirements,
    Service, ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// Where nginx serves its page from, inside the image.
pub const NGINX_HTML_DIR: &str = "/usr/share/nginx/html";
/// The path of the release in the GitOps repository (Argo CD's `spec.source.path` is `app`).
pub const RELEASE_PATH: &str = "app/release.json";
pub const APP_DIR: &str = "app";
pub const HEALTHY_READINESS_PATH: &str = "/";
/// Step 4's only change: a path nginx answers with 404, so the pod never becomes ready.
pub const BAD_READINESS_PATH: &str = "/not-ready";
/// The JSON path of the one field step 4 changes, as [`json_diff`] names it.
pub const READINESS_PATH_POINTER: &str =
    "/items/0/spec/template/spec/containers/0/readinessProbe/httpGet/path";

/// The release as one `v1` `List`. The List wraps two different kinds, which no single
/// k8s-openapi type does, so it holds their typed serializations.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceList {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub items: Vec<Value>,
}

/// The Deployment's `progressDeadlineSeconds`: when Kubernetes gives up on a rollout.
pub const PROGRESS_DEADLINE_SECONDS: i32 = 20;

/// The container's start command: write the page with no trailing newline, then run nginx in
/// the foreground. `html_dir` is a parameter only so a test can run the script for real.
pub fn start_script(body: &str, html_dir: &str) -> String {
    format!(
        "printf '%s' {} > {} && exec nginx -g 'daemon off;'",
        shell_quote(body),
        shell_quote(&format!("{html_dir}/index.html"))
    )
}

/// POSIX single-quoting: safe for any body, including quotes and `$`.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn labels(cfg: &Config) -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_string(), cfg.workload.clone())])
}

fn quantity(s: &str) -> Quantity {
    Quantity(s.to_string())
}

pub fn deployment(cfg: &Config, readiness_path: &str) -> Deployment {
    let container = Container {
        name: cfg.workload.clone(),
        image: Some(cfg.image.clone()),
        command: Some(vec![
            "/bin/sh".into(),
            "-c".into(),
            start_script(&cfg.body, NGINX_HTML_DIR),
        ]),
        ports: Some(vec![ContainerPort {
            container_port: 80,
            name: Some("http".into()),
            ..Default::default()
        }]),
        readiness_probe: Some(Probe {
            http_get: Some(HTTPGetAction {
                path: Some(readiness_path.to_string()),
                port: IntOrString::Int(80),
                ..Default::default()
            }),
            period_seconds: Some(2),
            failure_threshold: Some(1),
            ..Default::default()
        }),
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".into(), quantity("25m")),
                ("memory".into(), quantity("32Mi")),
            ])),
            limits: Some(BTreeMap::from([
                ("cpu".into(), quantity("200m")),
                ("memory".into(), quantity("128Mi")),
            ])),
            ..Default::default()
        }),
        ..Default::default()
    };
    Deployment {
        metadata: ObjectMeta {
            name: Some(cfg.workload.clone()),
            namespace: Some(cfg.namespace.clone()),
            labels: Some(labels(cfg)),
            ..Default::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            progress_deadline_seconds: Some(PROGRESS_DEADLINE_SECONDS),
            strategy: Some(DeploymentStrategy {
                type_: Some("Recreate".into()),
                ..Default::default()
            }),
            selector: LabelSelector {
                match_labels: Some(labels(cfg)),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(cfg)),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![container],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        status: None,
    }
}

pub fn service(cfg: &Config) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(cfg.workload.clone()),
            namespace: Some(cfg.namespace.clone()),
            labels: Some(labels(cfg)),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            selector: Some(labels(cfg)),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: 80,
                target_port: Some(IntOrString::Int(80)),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

/// `app/release.json` with the given readiness path (`/` for the baseline, `/not-ready` for
/// step 4: the ONLY difference between the two).
pub fn release(cfg: &Config, readiness_path: &str) -> ResourceList {
    ResourceList {
        api_version: "v1",
        kind: "List",
        items: vec![
            to_value(&deployment(cfg, readiness_path)),
            to_value(&service(cfg)),
        ],
    }
}

pub fn baseline_release(cfg: &Config) -> ResourceList {
    release(cfg, HEALTHY_READINESS_PATH)
}

pub fn bad_release(cfg: &Config) -> ResourceList {
    release(cfg, BAD_READINESS_PATH)
}

/// Pretty JSON with a final newline: the bytes committed to Git and written to disk.
pub fn to_file_bytes<T: Serialize>(value: &T) -> Vec<u8> {
    let mut s = serde_json::to_string_pretty(value).expect("manifests serialize");
    s.push('\n');
    s.into_bytes()
}

fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("k8s-openapi types serialize")
}

/// Step 2: exactly one repo, one destination, Deployment + Service, no cluster-scoped kind.
pub fn project(cfg: &Config) -> AppProject {
    AppProject {
        api_version: argo::API_VERSION.into(),
        kind: "AppProject".into(),
        metadata: ObjectMeta {
            name: Some(cfg.project.clone()),
            namespace: Some(cfg.argocd_namespace.clone()),
            ..Default::default()
        },
        spec: AppProjectSpec {
            description: Some(
                "cnpe lab: one repo, one namespace, Deployment and Service only".into(),
            ),
            source_repos: vec![cfg.repo_url.clone()],
            destinations: vec![Destination {
                server: Some(cfg.destination_server.clone()),
                name: None,
                namespace: Some(cfg.namespace.clone()),
            }],
            namespace_resource_whitelist: Some(vec![
                GroupKind {
                    group: "apps".into(),
                    kind: "Deployment".into(),
                },
                GroupKind {
                    group: "".into(),
                    kind: "Service".into(),
                },
            ]),
            cluster_resource_whitelist: Some(vec![]),
        },
    }
}

/// Step 2 (and 4, 6 with a new SHA): the Application pinned to a full SHA.
pub fn application(cfg: &Config, target_revision: &str) -> Application {
    Application {
        api_version: argo::API_VERSION.into(),
        kind: "Application".into(),
        metadata: ObjectMeta {
            name: Some(cfg.application.clone()),
            namespace: Some(cfg.argocd_namespace.clone()),
            ..Default::default()
        },
        spec: ApplicationSpec {
            project: cfg.project.clone(),
            source: Source {
                repo_url: cfg.repo_url.clone(),
                path: Some(APP_DIR.into()),
                target_revision: Some(target_revision.into()),
            },
            sources: None,
            destination: Destination {
                server: Some(cfg.destination_server.clone()),
                name: None,
                namespace: Some(cfg.namespace.clone()),
            },
            sync_policy: Some(SyncPolicy {
                automated: Some(Automated {
                    prune: true,
                    self_heal: true,
                }),
            }),
        },
        status: None,
    }
}

/// JSON pointers of every leaf where `a` and `b` differ (added, removed or changed). Used to
/// prove that step 4 changed exactly one field, on parsed JSON rather than text.
pub fn json_diff(a: &Value, b: &Value) -> Vec<String> {
    let mut out = Vec::new();
    diff_into(a, b, String::new(), &mut out);
    out
}

fn diff_into(a: &Value, b: &Value, at: String, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                match (x.get(k), y.get(k)) {
                    (Some(va), Some(vb)) => diff_into(va, vb, p, out),
                    _ => out.push(p),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for i in 0..x.len().max(y.len()) {
                let p = format!("{at}/{i}");
                match (x.get(i), y.get(i)) {
                    (Some(va), Some(vb)) => diff_into(va, vb, p, out),
                    _ => out.push(p),
                }
            }
        }
        _ if a == b => {}
        _ => out.push(if at.is_empty() { "/".into() } else { at }),
    }
}
