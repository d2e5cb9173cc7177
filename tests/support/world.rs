//! A world the pure gate decides on, written as the controllers write their objects (JSON):
//! an Application Synced and Healthy at SHA, a Rollout fully promoted at NEW, its pods behind
//! Service web answering the expected page. Shared by the Rollout and the route tests.

#![allow(dead_code)]

use cnpe_lab::cluster::argo::Application;
use cnpe_lab::cluster::gateway::HttpRoute;
use cnpe_lab::cluster::rollouts::Rollout;
use cnpe_lab::serving::decide::{self, Request};
use cnpe_lab::serving::expect::Expect;
use cnpe_lab::serving::model::{EndpointKey, Objects, ProbeAnswer, Probes};
use cnpe_lab::serving::verdict::{Condition, LieWindow, Verdict};
use cnpe_lab::serving::via_route::RouteAnswers;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::jiff::Timestamp;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

pub const SHA: &str = "3b18e512dba79e4c8300dd08aeb37f8e728b8dad";
pub const NS: &str = "shop";
pub const NEW: &str = "6b7c9d";
pub const OLD: &str = "5d8f7c";
pub const BODY: &str = "shop r2";
pub const OLD_BODY: &str = "shop r1";

pub fn t(secs: i64) -> Timestamp {
    "2026-12-06T10:00:00Z".parse::<Timestamp>().unwrap()
        + k8s_openapi::jiff::SignedDuration::from_secs(secs)
}

pub fn from<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// Synced and Healthy at SHA, the sync finished at 5 s and reconciled at 10 s; `resources` are
/// (group, kind, name) in namespace shop, each Healthy by Argo CD.
pub fn application(resources: &[(&str, &str, &str)]) -> Application {
    let resources: Vec<Value> = resources
        .iter()
        .map(|(g, k, n)| {
            json!({"group": g, "version": "v1", "kind": k, "namespace": NS, "name": n,
                   "status": "Synced", "health": {"status": "Healthy"}})
        })
        .collect();
    from(json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": "shop", "namespace": "argocd"},
        "spec": {"project": "default", "source": {"repoURL": "git://x"},
                 "destination": {"namespace": NS}},
        "status": {
            "sync": {"status": "Synced", "revision": SHA},
            "health": {"status": "Healthy"},
            "reconciledAt": t(10).to_string(),
            "operationState": {"phase": "Succeeded", "startedAt": t(1).to_string(),
                "finishedAt": t(5).to_string(), "syncResult": {"revision": SHA},
                "operation": {"sync": {"revision": SHA}}},
            "resources": resources,
        }
    }))
}

/// Rollout web, 2 replicas, fully promoted at NEW; `strategy` is its spec.strategy.
pub fn rollout(strategy: Value) -> Rollout {
    from(json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
        "metadata": {"name": "web", "namespace": NS, "uid": "uid-web", "generation": 3},
        "spec": {"replicas": 2, "strategy": strategy},
        "status": {"phase": "Healthy", "observedGeneration": "3", "currentPodHash": NEW,
            "stableRS": NEW, "currentStepIndex": 2, "replicas": 2, "updatedReplicas": 2,
            "readyReplicas": 2, "availableReplicas": 2,
            "blueGreen": {"activeSelector": NEW}}
    }))
}

pub fn canary() -> Value {
    json!({"canary": {"steps": [{"setWeight": 50}, {"pause": {}}]}})
}

pub fn replica_set(hash: &str, owner: (&str, &str)) -> ReplicaSet {
    from(json!({
        "metadata": {"name": format!("web-{hash}"), "namespace": NS, "uid": format!("uid-rs-{hash}"),
            "labels": {"rollouts-pod-template-hash": hash},
            "ownerReferences": [{"apiVersion": owner.0, "kind": owner.1, "name": "web",
                "uid": "uid-web", "controller": true}]}
    }))
}

pub fn pod(name: &str, hash: &str) -> Pod {
    from(json!({
        "metadata": {"name": name, "namespace": NS, "labels": {"rollouts-pod-template-hash": hash},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": format!("web-{hash}"), "uid": format!("uid-rs-{hash}"), "controller": true}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    }))
}

/// A slice of Service `service` with one address per (ip, pod).
pub fn slice(service: &str, addrs: &[(&str, &str)]) -> EndpointSlice {
    let endpoints: Vec<Value> = addrs
        .iter()
        .map(|(ip, p)| {
            json!({"addresses": [ip], "conditions": {"ready": true},
                   "targetRef": {"kind": "Pod", "name": p, "namespace": NS}})
        })
        .collect();
    from(json!({
        "addressType": "IPv4",
        "metadata": {"name": format!("{service}-abcde"), "namespace": NS,
            "labels": {"kubernetes.io/service-name": service}},
        "ports": [{"port": 8080}],
        "endpoints": endpoints,
    }))
}

pub fn key(service: &str, pod: &str, ip: &str) -> EndpointKey {
    EndpointKey {
        namespace: NS.into(),
        service: service.into(),
        pod: Some(pod.into()),
        ip: ip.into(),
        port: 8080,
    }
}

pub fn answer(body: &str) -> ProbeAnswer {
    ProbeAnswer {
        at: t(20),
        code: Some(200),
        body: Some(body.into()),
        error: None,
    }
}

#[derive(Clone)]
pub struct World {
    pub app: Application,
    pub rollouts: Vec<Rollout>,
    pub replica_sets: Vec<ReplicaSet>,
    pub pods: Vec<Pod>,
    pub slices: Vec<EndpointSlice>,
    pub probes: Probes,
    pub services: Vec<Service>,
    pub ingresses: Vec<Ingress>,
    pub http_routes: Vec<HttpRoute>,
    /// `Some`: the gate runs with `--via-route`, with these answers through the controller.
    pub route_answers: Option<RouteAnswers>,
}

impl World {
    pub fn objects(&self) -> Objects {
        fn arcs<T: Clone>(v: &[T]) -> Vec<Arc<T>> {
            v.iter().cloned().map(Arc::new).collect()
        }
        Objects {
            application: Some(Arc::new(self.app.clone())),
            rollouts: arcs(&self.rollouts),
            replica_sets: arcs(&self.replica_sets),
            pods: arcs(&self.pods),
            endpoint_slices: arcs(&self.slices),
            services: arcs(&self.services),
            ingresses: arcs(&self.ingresses),
            http_routes: arcs(&self.http_routes),
            ..Default::default()
        }
    }

    pub fn request(&self) -> Request {
        Request {
            namespace: "argocd".into(),
            name: "shop".into(),
            sha: cnpe_lab::sha::Sha::parse(SHA).unwrap(),
            expect: Expect::from_flags(Some(BODY), None, None, SHA).unwrap(),
            path: "/".into(),
            started: t(0),
            deadline: t(300),
            max_answer_age: Duration::from_secs(10),
            in_operation: false,
            via_route: self.route_answers.is_some(),
        }
    }

    pub fn decide(&self) -> Verdict {
        decide::decide_with_routes(
            &self.request(),
            &self.objects(),
            &self.probes,
            self.route_answers.as_ref().unwrap_or(&RouteAnswers::new()),
            t(25),
            &LieWindow::default(),
        )
    }

    pub fn status(&mut self) -> &mut cnpe_lab::cluster::rollouts::RolloutStatus {
        self.rollouts[0].status.as_mut().unwrap()
    }

    /// Pod `name` of revision `hash` behind Service `service` at `ip`, answering `body`.
    pub fn serve(&mut self, service: &str, name: &str, hash: &str, ip: &str, body: &str) {
        self.pods.push(pod(name, hash));
        self.slices.push(slice(service, &[(ip, name)]));
        self.probes.insert(key(service, name, ip), answer(body));
    }
}

/// Rollout web with `strategy`, fully promoted at NEW: two pods of NEW behind Service web
/// answering the expected page, the old ReplicaSet scaled to zero.
pub fn promoted(strategy: Value) -> World {
    let mut w = World {
        app: application(&[("argoproj.io", "Rollout", "web"), ("", "Service", "web")]),
        rollouts: vec![rollout(strategy)],
        replica_sets: vec![
            replica_set(OLD, ("argoproj.io/v1alpha1", "Rollout")),
            replica_set(NEW, ("argoproj.io/v1alpha1", "Rollout")),
        ],
        pods: Vec::new(),
        slices: Vec::new(),
        probes: Probes::new(),
        services: vec![service("web")],
        ingresses: Vec::new(),
        http_routes: Vec::new(),
        route_answers: None,
    };
    w.serve("web", "web-new-a", NEW, "10.0.0.1", BODY);
    w.serve("web", "web-new-b", NEW, "10.0.0.2", BODY);
    w
}

pub fn conditions(v: &Verdict) -> Vec<Condition> {
    v.unmet.iter().map(|u| u.condition).collect()
}

pub fn text(v: &Verdict) -> String {
    v.render_text()
}

/// Service `name` in shop: port 80 (named http) to the pods' 8080.
pub fn service(name: &str) -> Service {
    from(json!({
        "metadata": {"name": name, "namespace": NS},
        "spec": {"selector": {"app": name},
                 "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}
    }))
}

/// Ingress `name` in shop: host shop.example, path / to Service `backend` port 80.
pub fn ingress(name: &str, backend: &str) -> Ingress {
    from(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"ingressClassName": "traefik", "rules": [{"host": "shop.example", "http": {"paths": [
            {"path": "/", "pathType": "Prefix",
             "backend": {"service": {"name": backend, "port": {"number": 80}}}}]}}]}
    }))
}

/// HTTPRoute `name` in shop on Gateway cnpe-ingress/web, accepted by it, path / to the
/// weighted `backends` (Service, weight) on port 80.
pub fn http_route(name: &str, backends: &[(&str, Option<i32>)]) -> HttpRoute {
    let refs: Vec<Value> = backends
        .iter()
        .map(|(b, w)| match w {
            Some(w) => json!({"name": b, "port": 80, "weight": w}),
            None => json!({"name": b, "port": 80}),
        })
        .collect();
    from(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"parentRefs": [{"name": "web", "namespace": "cnpe-ingress"}],
                 "hostnames": ["shop.example"],
                 "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                            "backendRefs": refs}]},
        "status": {"parents": [{"parentRef": {"name": "web", "namespace": "cnpe-ingress"},
            "controllerName": "traefik.io/gateway-controller",
            "conditions": [
                {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
                 "lastTransitionTime": "2026-12-06T10:00:00Z"},
                {"type": "ResolvedRefs", "status": "True", "reason": "ResolvedRefs", "message": "",
                 "lastTransitionTime": "2026-12-06T10:00:00Z"}]}]}
    }))
}
