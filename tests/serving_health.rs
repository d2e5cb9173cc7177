//! `cargo test --test serving_health`: our workload check
//! ([`cnpe_lab::serving::workloads::check`]) held against a suite nobody here wrote:
//! gitops-engine's health fixtures for Deployment, StatefulSet, DaemonSet and Pod, in the
//! gitops-engine that Argo CD v3.5.2 builds with (the pseudo-version pinned in
//! `ci/hermetic/modules/argocd/go.mod`), read from the Go module cache at run time.
//!
//! For each fixture: its expected health is read from gitops-engine's own Go test source
//! (`assertAppHealth(t, "./testdata/x.yaml", HealthStatusX)` in `pkg/health/*_test.go`), the
//! YAML is parsed into the typed k8s-openapi workload, `check` runs on an `Objects` holding that
//! workload alone (no ReplicaSet, no pods besides a bare Pod itself), and the invariant is:
//! **our check never approves (empty `unmet`) a workload gitops-engine calls anything but
//! Healthy**. Where ours is stricter, the table says why. Known disagreements where ours
//! approves and gitops-engine does not are listed in [`KNOWN_GAPS`], each with its reason; a
//! listed gap that no longer reproduces fails too, so the list cannot go stale.
//!
//! Where the fixtures come from: `CNPE_GITOPS_ENGINE_DIR` (the gitops-engine module root), else
//! `$CNPE_HERMETIC_CACHE/gomod` (default `/var/cache/cnpe-hermetic/gomod`, what
//! `ci/hermetic` downloads into) at the pinned version. When they are absent the suite says so
//! loudly with the command that provides them; it FAILS under `CNPE_LAB_REQUIRED=1` or
//! `CI=true`, and is ignored otherwise.
//!
//! The table is printed; `CNPE_UPDATE_DOCS=1` writes it to `docs/gitops-engine-fixtures.md`
//! (otherwise a differing doc is reported, not failed).

use cnpe_lab::serving::model::Objects;
use cnpe_lab::serving::verdict::{Condition, Unmet};
use cnpe_lab::serving::workloads::{self, WorkloadCheck, WorkloadKind, WorkloadRef};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The command that provides the module cache (it downloads every module Argo CD builds with).
const PROVIDE: &str = "bash ci/hermetic/build.sh";
/// The module gitops-engine is, since Argo CD v3.3 (nested in the argo-cd repository).
const MODULE: &str = "github.com/argoproj/argo-cd/gitops-engine";
/// The Argo CD version the lab runs (ci/hermetic/versions.env), for a gitops-engine nested in
/// the argo-cd module itself.
const ARGOCD_MODULE: &str = "github.com/argoproj/argo-cd/v3";
const DOC: &str = "docs/gitops-engine-fixtures.md";

/// Fixtures where ours approves and gitops-engine does not: (file, why). Each is a decision
/// owned by src/serving/workloads.rs; a listed gap that no longer reproduces fails the suite.
const KNOWN_GAPS: &[(&str, &str)] = &[];

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn env_is(name: &str, value: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == value)
}

fn required() -> bool {
    env_is("CNPE_LAB_REQUIRED", "1") || env_is("CI", "true")
}

/// One `KEY=value` of ci/hermetic/versions.env.
fn pinned_env(key: &str) -> Option<String> {
    let text = std::fs::read_to_string(manifest_dir().join("ci/hermetic/versions.env")).ok()?;
    text.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{key}=")))
        .map(|v| v.trim().trim_matches('"').to_string())
}

/// The gitops-engine pseudo-version ci/hermetic pins (its `replace` in the argocd wrapper).
fn pinned_gitops_engine() -> Option<String> {
    let text =
        std::fs::read_to_string(manifest_dir().join("ci/hermetic/modules/argocd/go.mod")).ok()?;
    text.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("replace ")?;
        let (from, to) = rest.split_once("=>")?;
        if from.trim() != MODULE {
            return None;
        }
        let mut to = to.split_whitespace();
        (to.next()? == MODULE).then(|| to.next().map(str::to_string))?
    })
}

/// Where the fixtures are: the directory, or every place looked at and how to provide it.
fn locate() -> Result<PathBuf, String> {
    if let Ok(dir) = std::env::var("CNPE_GITOPS_ENGINE_DIR") {
        let dir = PathBuf::from(dir);
        return if dir.join("pkg/health").is_dir() {
            Ok(dir)
        } else {
            Err(format!(
                "CNPE_GITOPS_ENGINE_DIR={} has no pkg/health",
                dir.display()
            ))
        };
    }
    let cache =
        std::env::var("CNPE_HERMETIC_CACHE").unwrap_or_else(|_| "/var/cache/cnpe-hermetic".into());
    let gomod = PathBuf::from(cache).join("gomod");
    let mut tried = Vec::new();
    match pinned_gitops_engine() {
        Some(v) => tried.push(gomod.join(format!("{MODULE}@{v}"))),
        None => {
            return Err(
                "no `replace github.com/argoproj/argo-cd/gitops-engine => ... VERSION` in ci/hermetic/modules/argocd/go.mod"
                    .into(),
            )
        }
    }
    // Upstream keeps it at ./gitops-engine of the argo-cd module (excluded from the module
    // zip today, being a module of its own; looked at in case that changes).
    if let Some(v) = pinned_env("ARGOCD_VERSION") {
        tried.push(gomod.join(format!("{ARGOCD_MODULE}@{v}/gitops-engine")));
    }
    tried
        .iter()
        .find(|d| d.join("pkg/health").is_dir())
        .cloned()
        .ok_or_else(|| {
            let list: Vec<String> = tried.iter().map(|d| d.display().to_string()).collect();
            format!("not found at {}", list.join(" nor "))
        })
}

/// gitops-engine's health codes (pkg/health/health.go).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Expected(String);

/// Every `assertAppHealth(t, "PATH", HealthStatusX)` in `pkg/health/*_test.go`: the fixture
/// path (relative to pkg/health, normalised) -> the status code ("Healthy", "Degraded", ...).
fn expectations(health: &Path) -> Result<BTreeMap<PathBuf, Expected>, String> {
    let mut out = BTreeMap::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(health)
        .map_err(|e| format!("{}: {e}", health.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with("_test.go"))
        .collect();
    files.sort();
    for file in files {
        let src = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let mut rest = src.as_str();
        while let Some(at) = rest.find("assertAppHealth(") {
            rest = &rest[at + "assertAppHealth(".len()..];
            let Some(end) = rest.find(')') else { break };
            let args: Vec<&str> = rest[..end].split(',').map(str::trim).collect();
            // The definition `assertAppHealth(t *testing.T, yamlPath string, ...)` has no
            // quoted path: skipped by the shape check.
            if let [_, path, status] = args.as_slice() {
                if let (Some(path), Some(code)) = (
                    path.strip_prefix('"').and_then(|p| p.strip_suffix('"')),
                    status.strip_prefix("HealthStatus"),
                ) {
                    out.insert(normalise(Path::new(path)), Expected(code.to_string()));
                }
            }
        }
    }
    Ok(out)
}

/// `./testdata/x.yaml` -> `testdata/x.yaml`, `../utils/kube/testdata/y.yaml` kept as is.
fn normalise(p: &Path) -> PathBuf {
    p.components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect()
}

#[derive(serde::Deserialize)]
struct Head {
    kind: Option<String>,
}

/// One fixture, parsed and checked.
struct Fixture {
    /// Relative to pkg/health.
    path: PathBuf,
    kind: WorkloadKind,
    expected: Option<Expected>,
    /// The parse error, if the typed object could not be read.
    parsed: Result<Checked, String>,
}

struct Checked {
    check: WorkloadCheck,
    /// Deployments only: the check again with one ReplicaSet it owns, of the revision its
    /// `deployment.kubernetes.io/revision` annotation names (so its status logic is held
    /// against the fixture too, not only the missing ReplicaSet).
    with_replica_set: Option<WorkloadCheck>,
    /// Status fields the fixture lacks that our check reads (they count as 0).
    missing: Vec<&'static str>,
    /// The fixture had no namespace (the check ran with "default", as the apiserver would).
    defaulted_namespace: bool,
}

impl Fixture {
    fn name(&self) -> String {
        self.path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    fn approved(&self) -> Option<bool> {
        self.parsed.as_ref().ok().map(|c| c.check.unmet.is_empty())
    }

    /// Deployments: whether ours approves it given its ReplicaSet too.
    fn approved_with_replica_set(&self) -> Option<bool> {
        self.parsed
            .as_ref()
            .ok()
            .and_then(|c| c.with_replica_set.as_ref())
            .map(|c| c.unmet.is_empty())
    }

    fn healthy(&self) -> Option<bool> {
        self.expected.as_ref().map(|e| e.0 == "Healthy")
    }

    fn known_gap(&self) -> Option<&'static str> {
        let name = self.name();
        KNOWN_GAPS
            .iter()
            .find(|(f, _)| *f == name)
            .map(|(_, why)| *why)
    }
}

fn kind_of(kind: &str) -> Option<WorkloadKind> {
    Some(match kind {
        "Deployment" => WorkloadKind::Deployment,
        "StatefulSet" => WorkloadKind::StatefulSet,
        "DaemonSet" => WorkloadKind::DaemonSet,
        "Pod" => WorkloadKind::Pod,
        _ => return None,
    })
}

/// The workload's reference, defaulting a missing namespace to "default".
fn reference(kind: WorkloadKind, meta: &mut ObjectMeta) -> (WorkloadRef, bool) {
    let defaulted = meta.namespace.is_none();
    let namespace = meta
        .namespace
        .get_or_insert_with(|| "default".into())
        .clone();
    (
        WorkloadRef {
            kind,
            namespace,
            name: meta.name.clone().unwrap_or_default(),
        },
        defaulted,
    )
}

fn parse_and_check(kind: WorkloadKind, text: &str) -> Result<Checked, String> {
    fn yaml<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
        serde_norway::from_str(text).map_err(|e| e.to_string())
    }
    let mut objects = Objects::default();
    let mut missing = Vec::new();
    let mut with_rs: Option<Objects> = None;
    let (workload, defaulted_namespace) = match kind {
        WorkloadKind::Deployment => {
            let mut d: Deployment = yaml(text)?;
            let st = d.status.clone().unwrap_or_default();
            for (field, v) in [
                ("status.updatedReplicas", st.updated_replicas),
                ("status.readyReplicas", st.ready_replicas),
                ("status.availableReplicas", st.available_replicas),
                ("status.replicas", st.replicas),
            ] {
                if v.is_none() {
                    missing.push(field);
                }
            }
            let r = reference(kind, &mut d.metadata);
            let rs = owned_replica_set(&d);
            objects.deployments.push(Arc::new(d));
            let mut o = objects.clone();
            o.replica_sets.push(Arc::new(rs));
            with_rs = Some(o);
            r
        }
        WorkloadKind::StatefulSet => {
            let mut s: StatefulSet = yaml(text)?;
            let st = s.status.clone().unwrap_or_default();
            if st.ready_replicas.is_none() {
                missing.push("status.readyReplicas");
            }
            if st.update_revision.is_none() {
                missing.push("status.updateRevision");
            }
            let r = reference(kind, &mut s.metadata);
            objects.stateful_sets.push(Arc::new(s));
            r
        }
        WorkloadKind::DaemonSet => {
            let mut d: DaemonSet = yaml(text)?;
            let st = d.status.clone().unwrap_or_default();
            if st.updated_number_scheduled.is_none() {
                missing.push("status.updatedNumberScheduled");
            }
            if st.number_available.is_none() {
                missing.push("status.numberAvailable");
            }
            let r = reference(kind, &mut d.metadata);
            objects.daemon_sets.push(Arc::new(d));
            r
        }
        WorkloadKind::Pod => {
            let mut p: Pod = yaml(text)?;
            let r = reference(kind, &mut p.metadata);
            objects.pods.push(Arc::new(p));
            r
        }
        // gitops-engine has no Rollout fixtures: Argo CD's Lua ones are in rollout_health.rs.
        WorkloadKind::Rollout => return Err("not a gitops-engine kind".into()),
    };
    Ok(Checked {
        check: workloads::check(&workload, &objects),
        with_replica_set: with_rs.map(|o| workloads::check(&workload, &o)),
        missing,
        defaulted_namespace,
    })
}

/// The ReplicaSet a Deployment's controller would own: its revision annotation (else 1), an
/// ownerReference with the Deployment's uid. Its pod-template-hash is made up (no pods).
fn owned_replica_set(d: &Deployment) -> ReplicaSet {
    let revision = d
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(workloads::REVISION))
        .cloned()
        .unwrap_or_else(|| "1".into());
    let name = d.metadata.name.clone().unwrap_or_default();
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some(format!("{name}-fixture")),
            namespace: d.metadata.namespace.clone(),
            labels: Some([("pod-template-hash".to_string(), "fixture".to_string())].into()),
            annotations: Some([(workloads::REVISION.to_string(), revision)].into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                name,
                uid: d.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                ..Default::default()
            }]),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Every fixture of our four kinds: `testdata/*.yaml` plus any other file the Go tests assert
/// on (gitops-engine's healthy Deployment is `../utils/kube/testdata/nginx.yaml`).
fn load(health: &Path) -> Result<(Vec<Fixture>, usize), String> {
    let expected = expectations(health)?;
    let mut paths: Vec<PathBuf> = std::fs::read_dir(health.join("testdata"))
        .map_err(|e| format!("{}/testdata: {e}", health.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .filter_map(|p| p.strip_prefix(health).ok().map(Path::to_path_buf))
        .collect();
    for p in expected.keys() {
        if !paths.contains(p) {
            paths.push(p.clone());
        }
    }
    paths.sort();
    let mut out = Vec::new();
    for path in paths {
        let full = health.join(&path);
        let text =
            std::fs::read_to_string(&full).map_err(|e| format!("{}: {e}", full.display()))?;
        let Ok(head) = serde_norway::from_str::<Head>(&text) else {
            continue;
        };
        let Some(kind) = head.kind.as_deref().and_then(kind_of) else {
            continue;
        };
        out.push(Fixture {
            expected: expected.get(&path).cloned(),
            parsed: parse_and_check(kind, &text),
            path,
            kind,
        });
    }
    Ok((out, expected.len()))
}

fn condition_list(unmet: &[Unmet]) -> String {
    let mut c: Vec<&str> = unmet.iter().map(|u| u.condition.as_str()).collect();
    c.dedup();
    c.join(", ")
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// Why ours does not approve a fixture gitops-engine calls Healthy.
fn why_stricter(f: &Fixture, c: &Checked) -> String {
    let mut why = Vec::new();
    for u in &c.check.unmet {
        let text = match (f.kind, u.condition) {
            (WorkloadKind::Deployment, Condition::WorkloadRevision)
                if u.found.contains("no ReplicaSet") =>
            {
                "no ReplicaSet in the objects: without its newest ReplicaSet ours cannot tell which revision is rolled out (gitops-engine reads the Deployment's status alone)".to_string()
            }
            (WorkloadKind::Pod, Condition::WorkloadReplicas) => format!(
                "the pod is not Ready ({}): it serves nothing; gitops-engine judges a pod by phase and restart policy, and calls a Succeeded pod Healthy",
                u.found
            ),
            (_, Condition::WorkloadReplicas) if !c.missing.is_empty() => format!(
                "{} missing (read as 0): want {}, found {}",
                c.missing.join(", "),
                u.want,
                u.found
            ),
            _ => format!("{}: want {}, found {}", u.condition.as_str(), u.want, u.found),
        };
        if !why.contains(&text) {
            why.push(text);
        }
    }
    if f.kind == WorkloadKind::DaemonSet
        && c.check
            .unmet
            .iter()
            .any(|u| u.condition == Condition::WorkloadReplicas)
    {
        why.push("gitops-engine calls any observed OnDelete DaemonSet Healthy without counting updated pods".into());
    }
    why.join("; ")
}

fn table(fixtures: &[Fixture]) -> String {
    let mut out = String::from(
        "| fixture | kind | gitops-engine | ours | unmet conditions | where ours is stricter, why | ours given its ReplicaSet (Deployments) |\n|---|---|---|---|---|---|---|\n",
    );
    for f in fixtures {
        let theirs = f
            .expected
            .as_ref()
            .map_or("(no expectation)", |e| e.0.as_str());
        let (ours, conds, why) = match &f.parsed {
            Err(e) => ("parse error".to_string(), cell(e), String::new()),
            Ok(c) if c.check.unmet.is_empty() => {
                let why = match (f.healthy(), f.known_gap()) {
                    (Some(false), Some(gap)) => format!("KNOWN GAP (ours approves): {gap}"),
                    (Some(false), None) => {
                        "VIOLATION: ours approves what gitops-engine does not".into()
                    }
                    _ => String::new(),
                };
                ("approved".to_string(), String::new(), why)
            }
            Ok(c) => {
                let why = if f.healthy() == Some(true) {
                    why_stricter(f, c)
                } else {
                    "(both do not approve)".into()
                };
                (
                    "not approved".to_string(),
                    condition_list(&c.check.unmet),
                    why,
                )
            }
        };
        let note = match &f.parsed {
            Ok(c) if c.defaulted_namespace => " (no namespace: checked as default)",
            _ => "",
        };
        let with_rs = match f
            .parsed
            .as_ref()
            .ok()
            .and_then(|c| c.with_replica_set.as_ref())
        {
            None => "-".to_string(),
            Some(c) if c.unmet.is_empty() => "approved".into(),
            Some(c) => format!("not approved: {}", condition_list(&c.unmet)),
        };
        out.push_str(&format!(
            "| `{}`{note} | {:?} | {theirs} | {ours} | {conds} | {} | {with_rs} |\n",
            f.path.display(),
            f.kind,
            cell(&why)
        ));
    }
    out
}

fn summary(fixtures: &[Fixture]) -> String {
    let mut out = String::from("| kind | fixtures | gitops-engine Healthy | ours approves | ours stricter (Healthy there, not approved here) | ours approves a non-Healthy |\n|---|---|---|---|---|---|\n");
    for kind in [
        WorkloadKind::Deployment,
        WorkloadKind::StatefulSet,
        WorkloadKind::DaemonSet,
        WorkloadKind::Pod,
    ] {
        let of: Vec<&Fixture> = fixtures.iter().filter(|f| f.kind == kind).collect();
        let count = |p: &dyn Fn(&Fixture) -> bool| of.iter().filter(|f| p(f)).count();
        out.push_str(&format!(
            "| {kind:?} | {} | {} | {} | {} | {} |\n",
            of.len(),
            count(&|f| f.healthy() == Some(true)),
            count(&|f| f.approved() == Some(true)),
            count(&|f| f.healthy() == Some(true) && f.approved() == Some(false)),
            count(&|f| f.healthy() == Some(false) && f.approved() == Some(true)),
        ));
    }
    out
}

fn document(source: &str, fixtures: &[Fixture]) -> String {
    format!(
        "# gitops-engine's health fixtures against our workload check\n\n\
         Generated by `tests/serving_health.rs` (`CNPE_UPDATE_DOCS=1 cargo test --test serving_health`);\n\
         do not edit by hand.\n\n\
         Source: `{source}` (the gitops-engine Argo CD v3.5.2 builds with, pinned in\n\
         `ci/hermetic/modules/argocd/go.mod`), read from the Go module cache; `bash ci/hermetic/build.sh`\n\
         provides it. gitops-engine's status is what its own Go tests assert\n\
         (`assertAppHealth(t, PATH, HealthStatusX)` in `pkg/health/*_test.go`, parsed, not copied).\n\
         Ours is `cnpe_lab::serving::workloads::check` on an `Objects` holding the workload alone: no\n\
         ReplicaSet and no pods (a bare Pod is its own workload). The invariant the test holds: ours\n\
         never approves what gitops-engine calls anything but Healthy (known gaps are listed in the\n\
         test, and fail it when they stop reproducing). Deployments are checked a second time given\n\
         one ReplicaSet they own (of the revision their annotation names), so their status logic is\n\
         held too, not only the missing ReplicaSet; the same invariant holds there.\n\n\
         ## Summary\n\n{}\n## Every fixture\n\n{}",
        summary(fixtures),
        table(fixtures)
    )
}

fn missing_trial(reason: String) -> Trial {
    let banner = format!(
        "\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\
         !! SERVING HEALTH: gitops-engine's health fixtures are NOT available:\n\
         !!   {reason}\n\
         !! Provide them with:   {PROVIDE}\n\
         !! (or only the module: GOMODCACHE=${{CNPE_HERMETIC_CACHE:-/var/cache/cnpe-hermetic}}/gomod go mod download {MODULE}@{};\n\
         !!  or point CNPE_GITOPS_ENGINE_DIR at a gitops-engine checkout)\n\
         !! {}\n\
         !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n",
        pinned_gitops_engine().unwrap_or_else(|| "<the version ci/hermetic/modules/argocd/go.mod pins>".into()),
        if required() {
            "CNPE_LAB_REQUIRED=1 or CI=true: this is a FAILURE."
        } else {
            "Skipped (ignored). Set CNPE_LAB_REQUIRED=1 or CI=true to make this a failure."
        }
    );
    eprintln!("{banner}");
    Trial::ignorable_test("gitops_engine_fixtures_available", move || {
        if required() {
            Err(Failed::from(format!(
                "gitops-engine's fixtures are missing ({reason}); run `{PROVIDE}`"
            )))
        } else {
            Ok(Completion::ignored_with(format!(
                "gitops-engine's fixtures are missing: run `{PROVIDE}`"
            )))
        }
    })
}

fn main() {
    let args = Arguments::from_args();
    let dir = match locate() {
        Ok(d) => d,
        Err(reason) => libtest_mimic::run(&args, vec![missing_trial(reason)]).exit(),
    };
    let health = dir.join("pkg/health");
    let (fixtures, asserted) = match load(&health) {
        Ok(x) => x,
        Err(e) => {
            let t = Trial::test("gitops_engine_fixtures_readable", move || {
                Err(Failed::from(format!("reading the fixtures: {e}")))
            });
            libtest_mimic::run(&args, vec![t]).exit()
        }
    };
    let source = format!(
        "{}/pkg/health",
        dir.file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| dir.display().to_string())
    );
    let doc = document(&source, &fixtures);
    println!("\ngitops-engine fixtures from {}\n", health.display());
    println!("{}", summary(&fixtures));
    println!("{}", table(&fixtures));
    let doc_path = manifest_dir().join(DOC);
    if env_is("CNPE_UPDATE_DOCS", "1") {
        std::fs::write(&doc_path, &doc).expect("writing docs/gitops-engine-fixtures.md");
        println!("wrote {}", doc_path.display());
    } else if std::fs::read_to_string(&doc_path).ok().as_deref() != Some(doc.as_str()) {
        eprintln!(
            "NOTE: {DOC} differs from what these fixtures give: regenerate it with \
             `CNPE_UPDATE_DOCS=1 cargo test --test serving_health`"
        );
    }

    let mut trials = Vec::new();
    trials.push(Trial::test("go_expectations_parsed", move || {
        if asserted == 0 {
            return Err("no assertAppHealth(t, PATH, HealthStatusX) call found in pkg/health/*_test.go: gitops-engine's test source changed shape; update expectations()".into());
        }
        Ok(())
    }));
    for kind in [
        WorkloadKind::Deployment,
        WorkloadKind::StatefulSet,
        WorkloadKind::DaemonSet,
        WorkloadKind::Pod,
    ] {
        let n = fixtures.iter().filter(|f| f.kind == kind).count();
        trials.push(Trial::test(format!("fixtures_read::{kind:?}"), move || {
            if n == 0 {
                return Err(
                    format!("no {kind:?} fixture read: the suite would pass vacuously").into(),
                );
            }
            Ok(())
        }));
    }
    let names: Vec<String> = fixtures.iter().map(Fixture::name).collect();
    trials.push(Trial::test("known_gaps_are_fixtures", move || {
        for (gap, _) in KNOWN_GAPS {
            if !names.iter().any(|n| n == gap) {
                return Err(format!(
                    "KNOWN_GAPS lists {gap}, which is no fixture any more: remove it"
                )
                .into());
            }
        }
        Ok(())
    }));
    for f in fixtures {
        let name = format!("fixture::{}", f.path.display());
        trials.push(Trial::test(name, move || {
            let c = f.parsed.as_ref().map_err(|e| format!("{} does not parse as a typed {:?}: {e}", f.path.display(), f.kind))?;
            let Some(expected) = &f.expected else {
                return Err(format!("{} has no assertAppHealth expectation in gitops-engine's tests: its test source changed shape?", f.path.display()).into());
            };
            let approved = c.check.unmet.is_empty();
            if expected.0 != "Healthy" && f.approved_with_replica_set() == Some(true) {
                return Err(format!(
                    "given its ReplicaSet, ours APPROVES {} (Deployment), which gitops-engine calls {}",
                    f.path.display(),
                    expected.0
                )
                .into());
            }
            match (expected.0 == "Healthy", approved, f.known_gap()) {
                (false, true, None) => Err(format!(
                    "ours APPROVES {} ({:?}), which gitops-engine calls {}",
                    f.path.display(),
                    f.kind,
                    expected.0
                )
                .into()),
                (false, true, Some(gap)) => {
                    eprintln!("KNOWN GAP {}: gitops-engine {}, ours approves: {gap}", f.name(), expected.0);
                    Ok(())
                }
                (_, _, Some(_)) => Err(format!(
                    "{} is listed in KNOWN_GAPS but is no gap (gitops-engine {}, ours {}): remove it from KNOWN_GAPS",
                    f.name(),
                    expected.0,
                    if approved { "approves" } else { "does not approve" }
                )
                .into()),
                _ => Ok(()),
            }
        }));
    }
    libtest_mimic::run(&args, trials).exit();
}
