//! The grader's checks as pure functions of what was read (live objects, records), so each can
//! be tested off the cluster on realistic objects, failing ones included.

use crate::cluster::argo::{AppProject, Application, GroupKind};
use crate::config::Config;
use crate::lab::manifests;
use crate::sha::is_full_sha;
use serde_json::{json, Value};

/// Step 2's checks on the live AppProject and Application: everything the grader reads. Empty
/// means wired least-privilege. `expect_revision` is the SHA the Application must target (none:
/// any full SHA).
pub fn wiring(
    cfg: &Config,
    project: &AppProject,
    app: &Application,
    expect_revision: Option<&str>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let s = &project.spec;
    if s.source_repos != [cfg.repo_url.clone()] {
        problems.push(format!(
            "project sourceRepos {:?}, want exactly [{:?}]",
            s.source_repos, cfg.repo_url
        ));
    }
    let dest_ok = s.destinations.len() == 1
        && s.destinations[0].namespace.as_deref() == Some(&cfg.namespace)
        && (s.destinations[0].server.as_deref() == Some(&cfg.destination_server)
            || s.destinations[0].name.as_deref() == Some("in-cluster"));
    if !dest_ok {
        problems.push(format!(
            "project destinations {:?}, want exactly in-cluster/{}",
            s.destinations, cfg.namespace
        ));
    }
    let mut kinds = s.namespace_resource_whitelist.clone().unwrap_or_default();
    kinds.sort();
    let want = vec![
        GroupKind {
            group: "".into(),
            kind: "Service".into(),
        },
        GroupKind {
            group: "apps".into(),
            kind: "Deployment".into(),
        },
    ];
    if s.namespace_resource_whitelist.is_none() || kinds != want {
        problems.push(format!(
            "project namespaceResourceWhitelist {:?}, want exactly apps/Deployment and /Service",
            s.namespace_resource_whitelist
        ));
    }
    if !s
        .cluster_resource_whitelist
        .as_ref()
        .is_none_or(|c| c.is_empty())
    {
        problems.push(format!(
            "project clusterResourceWhitelist {:?}, want empty",
            s.cluster_resource_whitelist
        ));
    }
    let a = &app.spec;
    if a.project != cfg.project {
        problems.push(format!(
            "application project {:?}, want {:?}",
            a.project, cfg.project
        ));
    }
    if a.source.repo_url != cfg.repo_url || a.source.path.as_deref() != Some(manifests::APP_DIR) {
        problems.push(format!(
            "application source {:?}/{:?}, want {:?}/{}",
            a.source.repo_url,
            a.source.path,
            cfg.repo_url,
            manifests::APP_DIR
        ));
    }
    match expect_revision {
        Some(r) if a.source.target_revision.as_deref() != Some(r) => {
            problems.push(format!(
                "application targetRevision {:?}, want {r}",
                a.source.target_revision
            ));
        }
        None if !a.source.target_revision.as_deref().is_some_and(is_full_sha) => {
            problems.push(format!(
                "application targetRevision {:?} is not a full SHA",
                a.source.target_revision
            ));
        }
        _ => {}
    }
    if a.destination.namespace.as_deref() != Some(&cfg.namespace) {
        problems.push(format!(
            "application destination namespace {:?}",
            a.destination.namespace
        ));
    }
    let auto = a.sync_policy.as_ref().and_then(|p| p.automated.as_ref());
    if !auto.is_some_and(|x| x.prune && x.self_heal) {
        problems.push(format!(
            "application automated sync {auto:?}, want prune and selfHeal"
        ));
    }
    for c in app
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
    {
        if matches!(
            c.type_.as_deref(),
            Some("InvalidSpecError" | "ComparisonError")
        ) {
            problems.push(format!(
                "application condition {:?}: {}",
                c.type_,
                c.message.as_deref().unwrap_or("")
            ));
        }
    }
    problems
}

/// The recorded manifests equal what step 2 writes for this configuration and baseline.
pub fn recorded_manifests(
    cfg: &Config,
    baseline: &str,
    project: Option<&Value>,
    app: Option<&Value>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let want_project = serde_json::to_value(manifests::project(cfg)).expect("project serializes");
    if project != Some(&want_project) {
        problems.push("project.json (missing or not step 2's project)".to_string());
    }
    let want_app = serde_json::to_value(manifests::application(cfg, baseline))
        .expect("application serializes");
    if app != Some(&want_app) {
        problems.push("application.json (missing or not step 2's application)".to_string());
    }
    problems
}

/// Per-field counterexamples: missing, null, wrong JSON types and close-but-wrong values.
pub fn counterexamples(field: &str, good: &Value) -> Vec<(&'static str, Option<Value>)> {
    let mut out: Vec<(&'static str, Option<Value>)> =
        vec![("missing", None), ("null", Some(Value::Null))];
    match good {
        Value::Number(n) => {
            let i = n.as_i64().unwrap_or(0);
            out.push(("as bool", Some(json!(true))));
            out.push(("as string", Some(json!(i.to_string()))));
            out.push(("as float", Some(json!(i as f64))));
            out.push((
                "off by one",
                Some(json!(if field == "observed_generation" {
                    i - 1
                } else {
                    i + 1
                })),
            ));
            if field != "observed_generation" {
                out.push(("zero", Some(json!(0))));
            }
        }
        Value::String(s) => {
            out.push(("as bool", Some(json!(true))));
            out.push(("as integer", Some(json!(1))));
            out.push(("trailing newline", Some(json!(format!("{s}\n")))));
            out.push(("upper-cased", Some(json!(s.to_uppercase()))));
            out.push(("empty", Some(json!(""))));
        }
        _ => {}
    }
    out
}

/// Every counterexample of a state object: (field, label, the modified state).
pub fn counterexample_states(
    base: &serde_json::Map<String, Value>,
) -> Vec<(&'static str, &'static str, Value)> {
    let mut out = Vec::new();
    for field in crate::release_gate::REQUIRED_FIELDS {
        let Some(good) = base.get(field) else {
            continue;
        };
        for (label, replacement) in counterexamples(field, good) {
            let mut state = base.clone();
            match replacement {
                Some(v) => state.insert(field.into(), v),
                None => state.remove(field),
            };
            out.push((field, label, Value::Object(state)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::argo::ApplicationStatus;

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    fn live(cfg: &Config) -> (AppProject, Application) {
        (manifests::project(cfg), manifests::application(cfg, SHA))
    }

    #[test]
    fn the_labs_own_manifests_are_wired() {
        let cfg = Config::default();
        let (p, a) = live(&cfg);
        assert_eq!(wiring(&cfg, &p, &a, Some(SHA)), Vec::<String>::new());
        assert_eq!(wiring(&cfg, &p, &a, None), Vec::<String>::new());
    }

    #[test]
    fn each_widening_of_the_project_is_named() {
        let cfg = Config::default();
        let (mut p, a) = live(&cfg);
        p.spec.source_repos.push("*".into());
        p.spec.namespace_resource_whitelist = None;
        p.spec.cluster_resource_whitelist = Some(vec![GroupKind {
            group: "".into(),
            kind: "Namespace".into(),
        }]);
        let got = wiring(&cfg, &p, &a, Some(SHA)).join("\n");
        for want in [
            "sourceRepos",
            "namespaceResourceWhitelist None",
            "clusterResourceWhitelist",
        ] {
            assert!(got.contains(want), "{want} missing from {got}");
        }
    }

    #[test]
    fn a_branch_target_a_wrong_revision_and_spec_errors_are_named() {
        let cfg = Config::default();
        let (p, mut a) = live(&cfg);
        a.spec.source.target_revision = Some("main".into());
        assert!(wiring(&cfg, &p, &a, None)[0].contains("is not a full SHA"));
        assert!(wiring(&cfg, &p, &a, Some(SHA))[0].contains("want 0123456789"));
        a.spec.source.target_revision = Some(SHA.into());
        a.spec.sync_policy = None;
        let status: ApplicationStatus = serde_json::from_value(serde_json::json!({
            "conditions": [{"type": "InvalidSpecError", "message": "application repo x is not permitted in project 'cnpe-delivery'"}]
        }))
        .unwrap();
        a.status = Some(status);
        let got = wiring(&cfg, &p, &a, Some(SHA)).join("\n");
        assert!(got.contains("automated sync None"), "{got}");
        assert!(got.contains("is not permitted in project"), "{got}");
    }

    #[test]
    fn recorded_manifests_must_be_step_twos() {
        let cfg = Config::default();
        let p = serde_json::to_value(manifests::project(&cfg)).unwrap();
        let a = serde_json::to_value(manifests::application(&cfg, SHA)).unwrap();
        assert!(recorded_manifests(&cfg, SHA, Some(&p), Some(&a)).is_empty());
        let other = "1123456789abcdef0123456789abcdef01234567";
        assert_eq!(recorded_manifests(&cfg, other, Some(&p), Some(&a)).len(), 1);
        assert_eq!(recorded_manifests(&cfg, SHA, None, None).len(), 2);
    }

    #[test]
    fn counterexamples_cover_every_required_field_several_ways() {
        let state = serde_json::json!({
            "application": "cnpe-shop", "target_revision": SHA, "generation": 3, "observed_generation": 3
        });
        let states = counterexample_states(state.as_object().unwrap());
        assert!(states
            .iter()
            .any(|(f, l, v)| *f == "generation" && *l == "off by one" && v["generation"] == 4));
        assert!(states.iter().any(|(f, l, v)| *f == "observed_generation"
            && *l == "off by one"
            && v["observed_generation"] == 2));
        assert!(states
            .iter()
            .any(|(f, l, v)| *f == "target_revision" && *l == "missing" && v.get(f).is_none()));
        assert!(states.iter().all(|(f, _, v)| v.get(f) != state.get(f)));
    }
}
