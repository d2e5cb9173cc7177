//! The gate's read-only RBAC is checked against the one list of what it watches
//! ([`Kind::ALL`] with [`Kind::api`]): the Roles in `deploy/` grant exactly those
//! (group, resource) pairs, and `ci/hook-rbac.sh`'s live matrix asks about exactly those. A
//! kind added to the gate without its RBAC (or RBAC left for a kind no longer watched) fails
//! here, before a hook Job meets a Forbidden on a cluster.

use cnpe_lab::cluster::kind::Kind;
use std::collections::BTreeSet;
use std::path::Path;

type Grant = (String, String);

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every (apiGroup, resource) granted by the Roles of a multi-document YAML file.
fn granted(file: &str) -> BTreeSet<Grant> {
    let text = std::fs::read_to_string(root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut out = BTreeSet::new();
    for doc in serde_norway::Deserializer::from_str(&text) {
        let v: serde_json::Value = serde::Deserialize::deserialize(doc)
            .unwrap_or_else(|e| panic!("{file}: not YAML: {e}"));
        if v["kind"] != "Role" {
            continue;
        }
        for rule in v["rules"].as_array().into_iter().flatten() {
            for g in rule["apiGroups"].as_array().into_iter().flatten() {
                for r in rule["resources"].as_array().into_iter().flatten() {
                    out.insert((
                        g.as_str().unwrap_or_default().to_string(),
                        r.as_str().unwrap_or_default().to_string(),
                    ));
                }
            }
        }
    }
    out
}

fn watched(argocd_namespace: bool) -> BTreeSet<Grant> {
    Kind::ALL
        .into_iter()
        .filter(|k| (*k == Kind::Application) == argocd_namespace)
        .map(|k| {
            let (g, r) = k.api();
            (g.to_string(), r.to_string())
        })
        .collect()
}

#[test]
fn the_application_namespace_role_grants_what_the_gate_watches() {
    assert_eq!(granted("deploy/app/rbac.yaml"), watched(false));
}

#[test]
fn the_argocd_namespace_role_grants_applications_only() {
    assert_eq!(granted("deploy/argocd/rbac.yaml"), watched(true));
}

/// `app_resources=(deployments.apps ... pods ...)` in ci/hook-rbac.sh, as (group, resource).
#[test]
fn the_live_rbac_matrix_asks_about_what_the_gate_watches() {
    let text = std::fs::read_to_string(root().join("ci/hook-rbac.sh")).unwrap();
    let start = text
        .find("app_resources=(")
        .expect("app_resources=( in ci/hook-rbac.sh")
        + "app_resources=(".len();
    let end = start + text[start..].find(')').expect("app_resources closes");
    let asked: BTreeSet<Grant> = text[start..end]
        .split_whitespace()
        .map(|r| match r.split_once('.') {
            Some((res, group)) => (group.to_string(), res.to_string()),
            None => (String::new(), r.to_string()),
        })
        .collect();
    assert_eq!(asked, watched(false));
}

#[test]
fn every_kind_maps_back_from_its_group_and_kind() {
    for k in Kind::ALL {
        let (g, n) = k.group_kind();
        assert_eq!(Kind::from_group_kind(g, n), Some(k));
        assert_eq!(k.api().0, g);
    }
}

/// The literal (apiGroup, resource) pairs of `NAME = { ... }` in ci/check-deploy.py.
fn python_rules(name: &str) -> BTreeSet<Grant> {
    let text = std::fs::read_to_string(root().join("ci/check-deploy.py")).unwrap();
    let open = format!("{name} = {{");
    let start = text
        .find(&open)
        .unwrap_or_else(|| panic!("{open} in ci/check-deploy.py"))
        + open.len();
    let end = start + text[start..].find('}').expect("the set closes");
    let body = &text[start..end];
    let pairs: BTreeSet<Grant> = body
        .split(')')
        .filter_map(|t| {
            let t = t.trim_start_matches([',', ' ', '\n']).strip_prefix('(')?;
            let (g, r) = t.split_once(',')?;
            let unquote = |s: &str| s.trim().trim_matches('"').to_string();
            Some((unquote(g), unquote(r)))
        })
        .collect();
    assert!(
        !pairs.is_empty(),
        "{name} in ci/check-deploy.py lists no pair"
    );
    pairs
}

/// ci/check-deploy.py checks the rendered RBAC against its own list: that list is Kind::ALL.
#[test]
fn the_deploy_checker_lists_what_the_gate_watches() {
    assert_eq!(python_rules("APP_RULES"), watched(false));
    assert_eq!(python_rules("ARGOCD_RULES"), watched(true));
}

/// The README's stream count ("9 streams") is the number of kinds always watched.
#[test]
fn the_readme_counts_the_streams_the_gate_opens() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let always = Kind::ALL.into_iter().filter(|k| !k.optional()).count();
    let said: Vec<&str> = readme
        .split(" streams")
        .zip(readme.split(" streams").skip(1))
        .filter_map(|(before, _)| before.rsplit([' ', '\n']).next())
        .filter(|n| n.chars().all(|c| c.is_ascii_digit()) && !n.is_empty())
        .collect();
    assert!(
        !said.is_empty(),
        "README.md no longer says how many streams the gate opens"
    );
    for n in said {
        assert_eq!(
            n,
            always.to_string(),
            "README.md says {n} streams; Kind::ALL always watches {always}"
        );
    }
}
