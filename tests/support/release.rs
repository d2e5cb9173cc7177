//! Releases for the gate's traps (pure, typed k8s-openapi; a test fixture, so not in the
//! library: the gate does not depend on the lab's manifests): the
//! lab's nginx serving a page, varied in replicas, rollout strategy and readiness, next to a
//! StatefulSet, with its own AppProject and Application. The lab's own manifests are
//! [`cnpe_lab::lab::manifests`] and do not change.
#![allow(dead_code, unused_imports)] // each test binary including it uses a part

use cnpe_lab::cluster::argo::{self, AppProject, AppProjectSpec, Destination, GroupKind};
use cnpe_lab::config::Config;
use cnpe_lab::lab::manifests::{self as lab, ResourceList, NGINX_HTML_DIR};
use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment, StatefulSet,
    StatefulSetSpec, StatefulSetUpdateStrategy,
};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, HTTPGetAction, PodSpec, PodTemplateSpec, Probe, Service, ServicePort,
    ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;
use std::collections::BTreeMap;

/// How a Deployment rolls out (closed set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rollout {
    Recreate,
    RollingUpdate {
        max_unavailable: i32,
        max_surge: i32,
    },
}

/// One nginx workload: its name (also its Service's and its `app` label), replicas, page and
/// readiness path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Web {
    pub name: String,
    pub replicas: i32,
    pub body: String,
    pub readiness_path: String,
}

impl Web {
    pub fn new(name: &str, replicas: i32, body: &str) -> Self {
        Web {
            name: name.into(),
            replicas,
            body: body.into(),
            readiness_path: lab::HEALTHY_READINESS_PATH.into(),
        }
    }

    /// The same workload whose pods never get ready (nginx answers 404 on the path).
    pub fn never_ready(mut self) -> Self {
        self.readiness_path = lab::BAD_READINESS_PATH.into();
        self
    }

    /// The label its pods carry and its Service selects.
    pub fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("app".to_string(), self.name.clone())])
    }
}

fn meta(cfg: &Config, name: &str, labels: BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(cfg.namespace.clone()),
        labels: Some(labels),
        ..Default::default()
    }
}

/// The pod template: the lab's image and start script with this page and readiness path.
pub fn pod_template(cfg: &Config, web: &Web) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(web.labels()),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "web".into(),
                image: Some(cfg.image.clone()),
                command: Some(vec![
                    "/bin/sh".into(),
                    "-c".into(),
                    lab::start_script(&web.body, NGINX_HTML_DIR),
                ]),
                ports: Some(vec![ContainerPort {
                    container_port: 80,
                    name: Some("http".into()),
                    ..Default::default()
                }]),
                readiness_probe: Some(Probe {
                    http_get: Some(HTTPGetAction {
                        path: Some(web.readiness_path.clone()),
                        port: IntOrString::Int(80),
                        ..Default::default()
                    }),
                    period_seconds: Some(2),
                    failure_threshold: Some(1),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            // Old pods go at once: a trap state should not wait out a grace period.
            termination_grace_period_seconds: Some(1),
            ..Default::default()
        }),
    }
}

pub fn deployment(cfg: &Config, web: &Web, rollout: Rollout) -> Deployment {
    let strategy = match rollout {
        Rollout::Recreate => DeploymentStrategy {
            type_: Some("Recreate".into()),
            ..Default::default()
        },
        Rollout::RollingUpdate {
            max_unavailable,
            max_surge,
        } => DeploymentStrategy {
            type_: Some("RollingUpdate".into()),
            rolling_update: Some(RollingUpdateDeployment {
                max_unavailable: Some(IntOrString::Int(max_unavailable)),
                max_surge: Some(IntOrString::Int(max_surge)),
            }),
        },
    };
    Deployment {
        metadata: meta(cfg, &web.name, web.labels()),
        spec: Some(DeploymentSpec {
            replicas: Some(web.replicas),
            progress_deadline_seconds: Some(lab::PROGRESS_DEADLINE_SECONDS),
            strategy: Some(strategy),
            selector: LabelSelector {
                match_labels: Some(web.labels()),
                ..Default::default()
            },
            template: pod_template(cfg, web),
            ..Default::default()
        }),
        status: None,
    }
}

/// A StatefulSet of the same nginx; `on_delete` keeps its pods at their revision until they
/// are deleted by hand (what Argo CD's health does not look at).
pub fn stateful_set(cfg: &Config, web: &Web, on_delete: bool) -> StatefulSet {
    StatefulSet {
        metadata: meta(cfg, &web.name, web.labels()),
        spec: Some(StatefulSetSpec {
            replicas: Some(web.replicas),
            service_name: Some(web.name.clone()),
            pod_management_policy: Some("Parallel".into()),
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some(
                    if on_delete {
                        "OnDelete"
                    } else {
                        "RollingUpdate"
                    }
                    .into(),
                ),
                ..Default::default()
            }),
            selector: LabelSelector {
                match_labels: Some(web.labels()),
                ..Default::default()
            },
            template: pod_template(cfg, web),
            ..Default::default()
        }),
        status: None,
    }
}

pub fn service(cfg: &Config, web: &Web) -> Service {
    Service {
        metadata: meta(cfg, &web.name, web.labels()),
        spec: Some(ServiceSpec {
            selector: Some(web.labels()),
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

/// An Argo Rollouts canary Rollout of the same nginx (argoproj.io/v1alpha1; written as JSON,
/// its schema is not in k8s-openapi) with `steps` (e.g. `{"setWeight": 50}`, `{"pause": {}}`)
/// and no traffic router: the canary weight is the ratio of new to old pods behind its Service.
pub fn canary_rollout(cfg: &Config, web: &Web, steps: &[Value]) -> Value {
    rollout(cfg, web, serde_json::json!({"canary": {"steps": steps}}))
}

/// A Rollout of the nginx `web` with `strategy`.
fn rollout(cfg: &Config, web: &Web, strategy: Value) -> Value {
    serde_json::json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": meta(cfg, &web.name, web.labels()),
        "spec": {
            "replicas": web.replicas,
            "selector": {"matchLabels": web.labels()},
            "template": value(&pod_template(cfg, web)),
            "strategy": strategy,
        },
    })
}

/// An Argo Rollouts blue-green Rollout of the same nginx: Service `web.name` is its active
/// side, `{web.name}-preview` its preview; a new revision waits on the preview side until
/// promoted (`autoPromotionEnabled: false`), and the old side goes 3 s after the switch.
pub fn blue_green_rollout(cfg: &Config, web: &Web) -> Value {
    rollout(
        cfg,
        web,
        serde_json::json!({"blueGreen": {
            "activeService": web.name,
            "previewService": preview_service_name(web),
            "autoPromotionEnabled": false,
            "scaleDownDelaySeconds": 3,
        }}),
    )
}

pub fn preview_service_name(web: &Web) -> String {
    format!("{}-preview", web.name)
}

/// An AnalysisTemplate `name` with one metric: a Job running the lab's image that exits with
/// `exit_code` (0: the analysis succeeds; otherwise it fails at once, failureLimit 0).
pub fn analysis_template(cfg: &Config, name: &str, exit_code: u8) -> Value {
    serde_json::json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisTemplate",
        "metadata": meta(cfg, name, BTreeMap::from([("app".to_string(), name.to_string())])),
        "spec": {"metrics": [{
            "name": "check",
            "failureLimit": 0,
            "provider": {"job": {"spec": {
                "backoffLimit": 0,
                "template": {"spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{
                        "name": "check",
                        "image": cfg.image,
                        "command": ["/bin/sh", "-c", format!("exit {exit_code}")],
                    }],
                }},
            }}},
        }]},
    })
}

/// The namespace of the ingress controller and its Gateway on our clusters
/// (ci/hermetic/addons.sh, ci/kind/up.sh).
pub const INGRESS_NAMESPACE: &str = "cnpe-ingress";
/// The Gateway every HTTPRoute of a release attaches to, and the IngressClass of an Ingress.
pub const GATEWAY: &str = "web";
pub const INGRESS_CLASS: &str = "traefik";

/// An Ingress `name` of class traefik sending every host's `/` to Service `backend` port 80.
/// Host-less on purpose: a client reaches it through the controller without a Host header.
pub fn ingress(cfg: &Config, name: &str, backend: &str) -> Value {
    serde_json::json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": meta(cfg, name, BTreeMap::from([("app".to_string(), name.to_string())])),
        "spec": {
            "ingressClassName": INGRESS_CLASS,
            "rules": [{"http": {"paths": [{"path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": backend, "port": {"number": 80}}}}]}}],
        },
    })
}

/// An HTTPRoute `name` on Gateway cnpe-ingress/web sending `/` (any host) to the weighted
/// Services `backends` (name, weight) on port 80.
pub fn http_route(cfg: &Config, name: &str, backends: &[(&str, i32)]) -> Value {
    let refs: Vec<Value> = backends
        .iter()
        .map(|(b, w)| serde_json::json!({"name": b, "port": 80, "weight": w}))
        .collect();
    serde_json::json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": meta(cfg, name, BTreeMap::from([("app".to_string(), name.to_string())])),
        "spec": {
            "parentRefs": [{"name": GATEWAY, "namespace": INGRESS_NAMESPACE}],
            "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                "backendRefs": refs}],
        },
    })
}

fn value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("k8s-openapi types serialize")
}

/// A release: Deployments (with their rollout), StatefulSets (OnDelete or not), Argo Rollouts
/// canaries, a Service for each, and any extra objects (the hook Job), as one `v1` List.
#[derive(Debug, Clone, Default)]
pub struct Release {
    pub deployments: Vec<(Web, Rollout)>,
    pub stateful_sets: Vec<(Web, bool)>,
    /// Argo Rollouts canaries: the workload and its steps.
    pub canaries: Vec<(Web, Vec<Value>)>,
    /// Argo Rollouts blue-green Rollouts (with their active and preview Services).
    pub blue_greens: Vec<Web>,
    pub extra: Vec<Value>,
}

impl Release {
    pub fn build(&self, cfg: &Config) -> ResourceList {
        let mut items = Vec::new();
        for (web, rollout) in &self.deployments {
            items.push(value(&deployment(cfg, web, *rollout)));
            items.push(value(&service(cfg, web)));
        }
        for (web, on_delete) in &self.stateful_sets {
            items.push(value(&stateful_set(cfg, web, *on_delete)));
            items.push(value(&service(cfg, web)));
        }
        for (web, steps) in &self.canaries {
            items.push(canary_rollout(cfg, web, steps));
            items.push(value(&service(cfg, web)));
        }
        for web in &self.blue_greens {
            items.push(blue_green_rollout(cfg, web));
            items.push(value(&service(cfg, web)));
            let mut preview = service(cfg, web);
            preview.metadata.name = Some(preview_service_name(web));
            items.push(value(&preview));
        }
        items.extend(self.extra.iter().cloned());
        ResourceList {
            api_version: "v1",
            kind: "List",
            items,
        }
    }
}

/// The project of such a release: its one repo and namespace, the kinds it deploys.
pub fn project(cfg: &Config, kinds: &[(&str, &str)]) -> AppProject {
    AppProject {
        api_version: argo::API_VERSION.into(),
        kind: "AppProject".into(),
        metadata: ObjectMeta {
            name: Some(cfg.project.clone()),
            namespace: Some(cfg.argocd_namespace.clone()),
            ..Default::default()
        },
        spec: AppProjectSpec {
            description: Some("cnpe gate: one repo, one namespace".into()),
            source_repos: vec![cfg.repo_url.clone()],
            destinations: vec![Destination {
                server: Some(cfg.destination_server.clone()),
                name: None,
                namespace: Some(cfg.namespace.clone()),
            }],
            namespace_resource_whitelist: Some(
                kinds
                    .iter()
                    .map(|(g, k)| GroupKind {
                        group: g.to_string(),
                        kind: k.to_string(),
                    })
                    .collect(),
            ),
            cluster_resource_whitelist: Some(vec![]),
        },
    }
}

/// The Application of such a release, pinned to `target_revision`, auto-synced: the lab's own
/// (same repository layout, project and destination from `cfg`).
pub use cnpe_lab::lab::manifests::application;
