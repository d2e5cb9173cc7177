//! The trap fixtures' release builders (`tests/support/release.rs`, used by
//! `tests/serving_traps.rs`): each builds what Argo CD applies and the gate reads.

#[path = "support/release.rs"]
mod release;

use cnpe_lab::config::Config;
use release::*;

fn cfg() -> Config {
    Config {
        namespace: "cnpe-gate".into(),
        ..Config::default()
    }
}

#[test]
fn a_release_holds_each_workload_and_its_service() {
    let r = Release {
        deployments: vec![(
            Web::new("web", 3, "v1"),
            Rollout::RollingUpdate {
                max_unavailable: 1,
                max_surge: 0,
            },
        )],
        stateful_sets: vec![(Web::new("db", 2, "v1"), true)],
        canaries: vec![(
            Web::new("canary", 2, "v1"),
            vec![
                serde_json::json!({"setWeight": 50}),
                serde_json::json!({"pause": {}}),
            ],
        )],
        blue_greens: vec![],
        extra: vec![],
    }
    .build(&cfg());
    let kinds: Vec<&str> = r
        .items
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "Deployment",
            "Service",
            "StatefulSet",
            "Service",
            "Rollout",
            "Service"
        ]
    );
    let canary = &r.items[4];
    assert_eq!(canary["apiVersion"], "argoproj.io/v1alpha1");
    assert_eq!(canary["spec"]["selector"]["matchLabels"]["app"], "canary");
    assert_eq!(
        canary["spec"]["template"]["metadata"]["labels"]["app"],
        "canary"
    );
    assert_eq!(
        canary["spec"]["strategy"]["canary"]["steps"][0]["setWeight"],
        50
    );
    // It parses as the gate reads Rollouts.
    let read: cnpe_lab::cluster::rollouts::Rollout =
        serde_json::from_value(canary.clone()).unwrap();
    assert_eq!(read.spec.replicas, Some(2));
    let d = &r.items[0];
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"], 1);
    assert_eq!(d["metadata"]["namespace"], "cnpe-gate");
    assert_eq!(r.items[2]["spec"]["updateStrategy"]["type"], "OnDelete");
    assert_eq!(r.items[2]["spec"]["serviceName"], "db");
    let never = Web::new("web", 1, "v1").never_ready();
    let dep = deployment(&cfg(), &never, Rollout::Recreate);
    let probe = serde_json::to_value(&dep).unwrap()["spec"]["template"]["spec"]["containers"][0]
        ["readinessProbe"]["httpGet"]["path"]
        .clone();
    assert_eq!(probe, "/not-ready");
}

/// The route builders make objects the gate reads as it reads the cluster's: the Ingress and the
/// HTTPRoute parse as typed objects, and their backends are what the trap means.
#[test]
fn the_route_builders_parse_as_the_gate_reads_routes() {
    use cnpe_lab::cluster::gateway::HttpRoute;
    use cnpe_lab::serving::routes::{http_route_backends, ingress_backends};
    use k8s_openapi::api::networking::v1::Ingress;
    let cfg = cfg();
    let ing: Ingress = serde_json::from_value(ingress(&cfg, "web", "legacy")).unwrap();
    assert_eq!(ing.metadata.namespace.as_deref(), Some("cnpe-gate"));
    let spec = ing.spec.as_ref().unwrap();
    assert_eq!(spec.ingress_class_name.as_deref(), Some(INGRESS_CLASS));
    let to: Vec<String> = ingress_backends(&ing)
        .iter()
        .map(|b| format!("{}:{:?}", b.name, b.port))
        .collect();
    assert_eq!(to.len(), 1);
    assert!(to[0].starts_with("legacy:"), "{to:?}");
    let route: HttpRoute =
        serde_json::from_value(http_route(&cfg, "web", &[("legacy", 100), ("web", 0)])).unwrap();
    let parents = &route.spec.parent_refs;
    assert_eq!(parents.len(), 1);
    assert_eq!(parents[0].namespace.as_deref(), Some(INGRESS_NAMESPACE));
    assert_eq!(parents[0].name, GATEWAY);
    let weights: Vec<(String, Option<i32>)> = http_route_backends(&route)
        .iter()
        .flatten()
        .map(|b| (b.name.clone(), b.weight))
        .collect();
    assert_eq!(
        weights,
        [
            ("legacy".to_string(), Some(100)),
            ("web".to_string(), Some(0))
        ]
    );
}

#[test]
fn a_blue_green_release_has_its_active_and_preview_services_and_reads_as_the_gate_reads_it() {
    let r = Release {
        blue_greens: vec![Web::new("bg", 2, "v1")],
        extra: vec![release::analysis_template(&cfg(), "check", 1)],
        ..Default::default()
    }
    .build(&cfg());
    let names: Vec<(&str, &str)> = r
        .items
        .iter()
        .map(|i| {
            (
                i["kind"].as_str().unwrap(),
                i["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("Rollout", "bg"),
            ("Service", "bg"),
            ("Service", "bg-preview"),
            ("AnalysisTemplate", "check")
        ]
    );
    let bg = &r.items[0]["spec"]["strategy"]["blueGreen"];
    assert_eq!(bg["activeService"], "bg");
    assert_eq!(bg["previewService"], "bg-preview");
    assert_eq!(bg["autoPromotionEnabled"], false);
    assert_eq!(r.items[2]["spec"]["selector"]["app"], "bg");
    let read: cnpe_lab::cluster::rollouts::Rollout =
        serde_json::from_value(r.items[0].clone()).unwrap();
    assert!(read.spec.strategy.blue_green.is_some());
    let job = &r.items[3]["spec"]["metrics"][0]["provider"]["job"]["spec"];
    assert_eq!(
        job["template"]["spec"]["containers"][0]["command"][2],
        "exit 1"
    );
    assert_eq!(r.items[3]["spec"]["metrics"][0]["failureLimit"], 0);
}
