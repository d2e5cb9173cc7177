//! The lab's steps 1-8 and the grader's checks, as one fixture with one method per step. Used by
//! `tests/lab.rs` (ordered trials) and `cnpe-lab run` / `verify`: one code path for both.
//!
//! Reruns resume from what is recorded: a step whose record exists verifies it instead of
//! redoing it, so `baseline.json` and `failed.json` are never overwritten. `cnpe-lab reset`
//! starts over.

use crate::argo::GroupKind;
use crate::cluster::Cluster;
use crate::config::Config;
use crate::evidence::Evidence;
use crate::gate;
use crate::git::{parse_sha, GitOps};
use crate::history;
use crate::manifests::{self, to_file_bytes, RELEASE_PATH};
use crate::observer::wait_for;
use crate::records::{self, RecordPaths, WriteOutcome};
use crate::wait::{self, Target};
use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use serde_json::{json, Value};
use std::time::Instant;

/// The lab's steps and grading checks, in order, as trial names. (No name contains "gate", so
/// `cargo test gate` selects only the gate's own tests, never a lone lab step.)
pub const STEPS: [&str; 12] = [
    "step1_baseline_release_in_git",
    "step2_least_privilege_wiring",
    "step3_record_first_success",
    "step4_valid_but_wrong_release",
    "step5_observe_the_synced_outage",
    "step6_recover_through_git",
    "step7_verify_recovery",
    "step8_release_approval",
    "grade_git_history",
    "grade_saved_records",
    "grade_live_wiring",
    "grade_live_service",
];

#[derive(Debug, Clone, Serialize)]
pub struct StepTiming {
    pub step: String,
    pub started_at: String,
    pub seconds: f64,
    pub outcome: String,
}

#[derive(Debug, Default, Clone, Serialize)]
pub struct Timeline {
    pub steps: Vec<StepTiming>,
    /// Seconds from setting targetRevision to the bad SHA until the outage was observed.
    pub detection_seconds: Option<f64>,
    /// Seconds from setting targetRevision to the recovered SHA until healthy was observed.
    pub recovery_seconds: Option<f64>,
    pub api_requests: u64,
    pub total_seconds: f64,
}

pub struct Lab {
    pub cfg: Config,
    pub cluster: Cluster,
    pub records: RecordPaths,
    pub timeline: Timeline,
    started: Instant,
    bad_target_set: Option<Instant>,
    recovered_target_set: Option<Instant>,
}

fn ok_or_resumed(o: WriteOutcome) -> &'static str {
    match o {
        WriteOutcome::Created => "recorded",
        WriteOutcome::AlreadyRecorded => "already recorded (identical)",
    }
}

impl Lab {
    pub async fn connect(cfg: Config) -> Result<Self> {
        let cluster = Cluster::connect(&cfg).await?;
        Ok(Self {
            records: cfg.records(),
            cfg,
            cluster,
            timeline: Timeline::default(),
            started: Instant::now(),
            bad_target_set: None,
            recovered_target_set: None,
        })
    }

    /// Runs step `name` (one of [`STEPS`]) and records its timing. Returns a one-line summary.
    pub async fn run_step(&mut self, name: &str) -> Result<String> {
        let started_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let t = Instant::now();
        let result = match name {
            "step1_baseline_release_in_git" => self.step1().await,
            "step2_least_privilege_wiring" => self.step2().await,
            "step3_record_first_success" => self.step3().await,
            "step4_valid_but_wrong_release" => self.step4().await,
            "step5_observe_the_synced_outage" => self.step5().await,
            "step6_recover_through_git" => self.step6().await,
            "step7_verify_recovery" => self.step7().await,
            "step8_release_approval" => self.step8().await,
            "grade_git_history" => self.grade_history(),
            "grade_saved_records" => self.grade_records(),
            "grade_live_wiring" => self.grade_wiring(None).await,
            "grade_live_service" => self.grade_service().await,
            other => Err(anyhow!("unknown step {other}")),
        };
        self.timeline.steps.push(StepTiming {
            step: name.into(),
            started_at,
            seconds: t.elapsed().as_secs_f64(),
            outcome: match &result {
                Ok(s) => format!("ok: {s}"),
                Err(e) => format!("failed: {}", format!("{e:#}").lines().next().unwrap_or("")),
            },
        });
        self.timeline.api_requests = self.cluster.request_count();
        self.timeline.total_seconds = self.started.elapsed().as_secs_f64();
        result
    }

    fn sha(&self, path: std::path::PathBuf) -> Result<String> {
        records::read_sha(&path)?.ok_or_else(|| anyhow!("{} is not recorded yet (run the earlier steps)", path.display()))
    }

    fn bare(&self) -> Result<git2::Repository> {
        git2::Repository::open_bare(&self.cfg.bare_repo).with_context(|| format!("opening {}", self.cfg.bare_repo.display()))
    }

    /// The release file at `sha` in the pushed repository, parsed.
    fn pushed_release(&self, sha: &str) -> Result<Value> {
        history::release_at(&self.bare()?, parse_sha(sha)?)
    }

    async fn step1(&mut self) -> Result<String> {
        let git = GitOps::prepare(&self.cfg)?;
        let want = serde_json::to_value(manifests::baseline_release(&self.cfg))?;
        if let Some(sha) = records::read_sha(&self.records.baseline_sha())? {
            let diff = manifests::json_diff(&want, &self.pushed_release(&sha)?);
            if !diff.is_empty() {
                bail!("baseline.sha records {sha}, whose {RELEASE_PATH} differs from step 1 at {diff:?}");
            }
            return Ok(format!("resumed: baseline {sha} already recorded and pushed"));
        }
        let oid = git.commit_file(RELEASE_PATH, &to_file_bytes(&manifests::baseline_release(&self.cfg)), "Baseline release: web serves labhub-cnpe-v1")?;
        git.push()?;
        let sha = oid.to_string();
        records::write_sha(&self.records.baseline_sha(), &sha)?;
        // Prove it is really on the pushed branch, as Argo CD will fetch it.
        let diff = manifests::json_diff(&want, &self.pushed_release(&sha)?);
        if !diff.is_empty() {
            bail!("pushed release differs from step 1 at {diff:?}");
        }
        Ok(format!("baseline {sha} committed, pushed to {} and recorded", self.cfg.branch))
    }

    async fn step2(&mut self) -> Result<String> {
        let baseline = self.sha(self.records.baseline_sha())?;
        let project = manifests::project(&self.cfg);
        let application = manifests::application(&self.cfg, &baseline);
        let p = records::write_once(&self.records.project(), &to_file_bytes(&project))?;
        let a = records::write_once(&self.records.application(), &to_file_bytes(&application))?;
        self.cluster.ensure_namespace().await?;
        self.cluster.apply_project(&project).await?;
        // Once step 4 moved the Application on, re-applying step 2 would move it back.
        let later = records::read_sha(&self.records.bad_sha())?.is_some();
        if !later {
            self.cluster.apply_application(&application).await?;
        } else if self.cluster.application().await?.is_none() {
            bail!(
                "{} records later steps, but Application {} does not exist on this cluster (a new cluster?). \
                 The records are kept; to start over run `cnpe-lab reset --yes` (deletes them) or point \
                 CNPE_EVIDENCE_DIR, CNPE_GITOPS_DIR and CNPE_BARE_REPO at fresh directories",
                self.records.bad_sha().display(),
                self.cfg.application
            );
        }
        self.grade_wiring(if later { None } else { Some(baseline.clone()) }).await?;
        Ok(format!(
            "project.json {}, application.json {}; {}; live wiring is least-privilege",
            ok_or_resumed(p),
            ok_or_resumed(a),
            if later { "application left at its later revision" } else { "both applied" }
        ))
    }

    /// Step 2's checks against the live objects: everything the grader reads.
    async fn grade_wiring(&mut self, expect_revision: Option<String>) -> Result<String> {
        let expect_revision = match expect_revision {
            Some(r) => Some(r),
            None => records::read_sha(&self.records.recovered_sha())?,
        };
        let mut problems = Vec::new();
        let project = self.cluster.project().await?.ok_or_else(|| anyhow!("AppProject {} not found", self.cfg.project))?;
        let app = self.cluster.application().await?.ok_or_else(|| anyhow!("Application {} not found", self.cfg.application))?;
        let s = &project.spec;
        if s.source_repos != [self.cfg.repo_url.clone()] {
            problems.push(format!("project sourceRepos {:?}, want exactly [{:?}]", s.source_repos, self.cfg.repo_url));
        }
        let dest_ok = s.destinations.len() == 1
            && s.destinations[0].namespace.as_deref() == Some(&self.cfg.namespace)
            && (s.destinations[0].server.as_deref() == Some(&self.cfg.destination_server)
                || s.destinations[0].name.as_deref() == Some("in-cluster"));
        if !dest_ok {
            problems.push(format!("project destinations {:?}, want exactly in-cluster/{}", s.destinations, self.cfg.namespace));
        }
        let mut kinds = s.namespace_resource_whitelist.clone().unwrap_or_default();
        kinds.sort();
        let want = vec![GroupKind { group: "".into(), kind: "Service".into() }, GroupKind { group: "apps".into(), kind: "Deployment".into() }];
        if s.namespace_resource_whitelist.is_none() || kinds != want {
            problems.push(format!("project namespaceResourceWhitelist {:?}, want exactly apps/Deployment and /Service", s.namespace_resource_whitelist));
        }
        if !s.cluster_resource_whitelist.as_ref().is_none_or(|c| c.is_empty()) {
            problems.push(format!("project clusterResourceWhitelist {:?}, want empty", s.cluster_resource_whitelist));
        }
        let a = &app.spec;
        if a.project != self.cfg.project {
            problems.push(format!("application project {:?}, want {:?}", a.project, self.cfg.project));
        }
        if a.source.repo_url != self.cfg.repo_url || a.source.path.as_deref() != Some(manifests::APP_DIR) {
            problems.push(format!("application source {:?}/{:?}, want {:?}/app", a.source.repo_url, a.source.path, self.cfg.repo_url));
        }
        if let Some(r) = &expect_revision {
            if a.source.target_revision.as_deref() != Some(r) {
                problems.push(format!("application targetRevision {:?}, want {r}", a.source.target_revision));
            }
        } else if !a.source.target_revision.as_deref().is_some_and(gate::is_full_sha) {
            problems.push(format!("application targetRevision {:?} is not a full SHA", a.source.target_revision));
        }
        if a.destination.namespace.as_deref() != Some(&self.cfg.namespace) {
            problems.push(format!("application destination namespace {:?}", a.destination.namespace));
        }
        let auto = a.sync_policy.as_ref().and_then(|p| p.automated.as_ref());
        if !auto.is_some_and(|x| x.prune && x.self_heal) {
            problems.push(format!("application automated sync {auto:?}, want prune and selfHeal"));
        }
        for c in app.status.iter().flat_map(|s| s.conditions.iter().flatten()) {
            if matches!(c.type_.as_deref(), Some("InvalidSpecError" | "ComparisonError")) {
                problems.push(format!("application condition {:?}: {}", c.type_, c.message.as_deref().unwrap_or("")));
            }
        }
        if !problems.is_empty() {
            bail!("live wiring is wrong:\n  - {}", problems.join("\n  - "));
        }
        Ok("project allows one repo, one destination, Deployment+Service, no cluster kinds; application wired".into())
    }

    async fn wait_and_record(&mut self, target: Target, sha: &str, path: std::path::PathBuf) -> Result<(Evidence, f64)> {
        let w = wait_for(&self.cluster, target, sha, &self.cfg.body, self.cfg.wait_deadline, self.cfg.poll_interval, false)
            .await
            .map_err(|e| anyhow!("{e}"))?;
        records::write_json(&path, &w.evidence.to_value())?;
        Ok((w.evidence, w.elapsed.as_secs_f64()))
    }

    /// A recorded evidence file re-read strictly and checked against its predicate.
    fn recorded(&self, path: &std::path::Path, target: Target, sha: &str) -> Result<Option<Evidence>> {
        let Some(v) = records::read_json(path)? else { return Ok(None) };
        let ev: Evidence = serde_json::from_value(v).with_context(|| format!("{} is not lab evidence", path.display()))?;
        let unmet = wait::unmet(target, &ev, sha, &self.cfg.body);
        if !unmet.is_empty() {
            bail!("{} does not show `{}` at {sha}: {}", path.display(), target.name(),
                unmet.iter().map(|u| u.to_string()).collect::<Vec<_>>().join("; "));
        }
        Ok(Some(ev))
    }

    async fn step3(&mut self) -> Result<String> {
        let sha = self.sha(self.records.baseline_sha())?;
        if self.recorded(&self.records.baseline_json(), Target::Healthy, &sha)?.is_some() {
            return Ok("resumed: baseline.json already records the first success".into());
        }
        let (_, secs) = self.wait_and_record(Target::Healthy, &sha, self.records.baseline_json()).await?;
        Ok(format!("healthy at baseline {sha} after {secs:.1}s; baseline.json recorded"))
    }

    async fn step4(&mut self) -> Result<String> {
        let baseline = self.sha(self.records.baseline_sha())?;
        let mut summary = match records::read_sha(&self.records.bad_sha())? {
            Some(bad) => {
                let diff = manifests::json_diff(&self.pushed_release(&baseline)?, &self.pushed_release(&bad)?);
                if diff != [manifests::READINESS_PATH_POINTER] {
                    bail!("bad.sha records {bad}, which differs from the baseline at {diff:?}, not only the readiness path");
                }
                format!("resumed: bad {bad} already recorded")
            }
            None => {
                let git = GitOps::prepare(&self.cfg)?;
                if git.head()?.map(|h| h.to_string()) != Some(baseline.clone()) {
                    bail!("the working copy's HEAD is not the baseline {baseline}; refusing to build step 4 on anything else");
                }
                let oid = git.commit_file(RELEASE_PATH, &to_file_bytes(&manifests::bad_release(&self.cfg)), "Readiness probe on /not-ready")?;
                git.push()?;
                records::write_sha(&self.records.bad_sha(), &oid.to_string())?;
                format!("bad {oid} committed (readiness path /not-ready only), pushed and recorded")
            }
        };
        let bad = self.sha(self.records.bad_sha())?;
        let later = self.records.failed_json().exists() || records::read_sha(&self.records.recovered_sha())?.is_some();
        if !later {
            self.cluster.set_target_revision(&bad).await?;
            self.bad_target_set = Some(Instant::now());
            summary.push_str("; targetRevision set and refresh requested");
        }
        Ok(summary)
    }

    async fn step5(&mut self) -> Result<String> {
        let bad = self.sha(self.records.bad_sha())?;
        if self.recorded(&self.records.failed_json(), Target::Failed, &bad)?.is_some() {
            return Ok("resumed: failed.json already records the outage".into());
        }
        let (ev, secs) = self.wait_and_record(Target::Failed, &bad, self.records.failed_json()).await?;
        self.timeline.detection_seconds = self.bad_target_set.map(|t| t.elapsed().as_secs_f64());
        Ok(format!(
            "Synced + {} with ProgressDeadlineExceeded, 0 ready endpoints, HTTP {} after {secs:.1}s; failed.json recorded",
            ev.health.as_deref().unwrap_or("?"),
            ev.http_code.map_or_else(|| format!("no response ({})", ev.http_error.as_deref().unwrap_or("?")), |c| c.to_string())
        ))
    }

    async fn step6(&mut self) -> Result<String> {
        let bad = self.sha(self.records.bad_sha())?;
        let mut summary = match records::read_sha(&self.records.recovered_sha())? {
            Some(rec) => format!("resumed: recovered {rec} already recorded"),
            None => {
                let git = GitOps::prepare(&self.cfg)?;
                if git.head()?.map(|h| h.to_string()) != Some(bad.clone()) {
                    bail!("the working copy's HEAD is not the bad commit {bad}; refusing to revert on top of anything else");
                }
                let oid = git.revert(parse_sha(&bad)?)?;
                git.push()?;
                records::write_sha(&self.records.recovered_sha(), &oid.to_string())?;
                format!("revert {oid} of {bad} committed, pushed and recorded")
            }
        };
        let rec = self.sha(self.records.recovered_sha())?;
        let baseline = self.sha(self.records.baseline_sha())?;
        let (base_tree, rec_tree) = {
            let repo = self.bare()?;
            (crate::git::subtree_id(&repo, parse_sha(&baseline)?, manifests::APP_DIR)?, crate::git::subtree_id(&repo, parse_sha(&rec)?, manifests::APP_DIR)?)
        };
        if base_tree.is_none() || base_tree != rec_tree {
            bail!("recovered app/ tree {rec_tree:?} differs from the baseline's {base_tree:?}");
        }
        summary.push_str(&format!("; app/ tree equals the baseline's ({})", base_tree.unwrap()));
        if !self.records.recovered_json().exists() {
            self.cluster.set_target_revision(&rec).await?;
            self.recovered_target_set = Some(Instant::now());
            summary.push_str("; targetRevision set and refresh requested");
        }
        Ok(summary)
    }

    async fn step7(&mut self) -> Result<String> {
        let rec = self.sha(self.records.recovered_sha())?;
        if self.recorded(&self.records.recovered_json(), Target::Healthy, &rec)?.is_some() {
            return Ok("resumed: recovered.json already records the recovery (live service graded below)".into());
        }
        let (_, secs) = self.wait_and_record(Target::Healthy, &rec, self.records.recovered_json()).await?;
        self.timeline.recovery_seconds = self.recovered_target_set.map(|t| t.elapsed().as_secs_f64());
        Ok(format!("healthy at recovered {rec} after {secs:.1}s; recovered.json recorded"))
    }

    /// Step 8: the gate approves the recovery, rejects the outage and the stale baseline, and
    /// rejects every per-field counterexample, made in a temporary copy.
    async fn step8(&mut self) -> Result<String> {
        let rec = self.sha(self.records.recovered_sha())?;
        let bad = self.sha(self.records.bad_sha())?;
        let body = self.cfg.body.clone();
        let read = |p: std::path::PathBuf| records::read_bounded(&p);
        let recovered = read(self.records.recovered_json())?;
        let before = (recovered.clone(), std::fs::metadata(self.records.recovered_json())?.modified()?);

        let v = gate::evaluate_bytes(&recovered, &rec, &body);
        if !v.approved {
            bail!("the gate rejects recovered.json: {}", v.report_lines().join("; "));
        }
        for (name, sha) in [("failed.json", &bad), ("failed.json", &rec)] {
            let v = gate::evaluate_bytes(&read(self.records.failed_json())?, sha, &body);
            if v.approved {
                bail!("negative control broken: the gate approves {name} (the recorded outage) for {sha}");
            }
        }
        if gate::evaluate_bytes(&read(self.records.baseline_json())?, &rec, &body).approved {
            bail!("the gate approves baseline.json for the recovered SHA: a stale revision passes");
        }

        let tmp = tempfile::tempdir()?;
        let copy = tmp.path().join("state.json");
        std::fs::write(&copy, &recovered)?;
        let base: serde_json::Map<String, Value> = serde_json::from_slice(&recovered)?;
        let mut count = 0;
        let mut escaped = Vec::new();
        for field in gate::REQUIRED_FIELDS {
            for (label, replacement) in counterexamples(field, &base[field]) {
                let mut state = base.clone();
                match replacement {
                    Some(v) => state.insert(field.into(), v),
                    None => state.remove(field),
                };
                std::fs::write(&copy, serde_json::to_vec_pretty(&state)?)?;
                let v = gate::evaluate_bytes(&read(copy.clone())?, &rec, &body);
                count += 1;
                if v.approved || !v.failing_fields().contains(&field) {
                    escaped.push(format!("{field} {label}"));
                }
            }
        }
        let after = (read(self.records.recovered_json())?, std::fs::metadata(self.records.recovered_json())?.modified()?);
        if after != before {
            bail!("recovered.json changed during the gate checks");
        }
        if !escaped.is_empty() {
            bail!("counterexamples the gate did not reject by name: {escaped:?}");
        }
        if count < 5 * gate::REQUIRED_FIELDS.len() {
            bail!("only {count} counterexamples evaluated: the check would prove little");
        }
        Ok(format!("approves recovered.json; rejects failed.json and the stale baseline.json; rejects all {count} counterexamples by field; recovered.json untouched"))
    }

    fn grade_history(&mut self) -> Result<String> {
        let (b, x, r) = (self.sha(self.records.baseline_sha())?, self.sha(self.records.bad_sha())?, self.sha(self.records.recovered_sha())?);
        let report = history::check(&self.bare()?, &self.cfg, &b, &x, &r);
        if !report.passed() {
            bail!("git history fails the grader:\n{}", report.render());
        }
        Ok(format!("{} history checks pass", report.checks.len()))
    }

    fn grade_records(&mut self) -> Result<String> {
        let (b, x, r) = (self.sha(self.records.baseline_sha())?, self.sha(self.records.bad_sha())?, self.sha(self.records.recovered_sha())?);
        let mut missing = Vec::new();
        for (path, target, sha) in [
            (self.records.baseline_json(), Target::Healthy, &b),
            (self.records.failed_json(), Target::Failed, &x),
            (self.records.recovered_json(), Target::Healthy, &r),
        ] {
            if self.recorded(&path, target, sha)?.is_none() {
                missing.push(path.display().to_string());
            }
        }
        let project = records::read_json(&self.records.project())?;
        if project != Some(serde_json::to_value(manifests::project(&self.cfg))?) {
            missing.push("project.json (missing or not step 2's project)".into());
        }
        let app = records::read_json(&self.records.application())?;
        if app != Some(serde_json::to_value(manifests::application(&self.cfg, &b))?) {
            missing.push("application.json (missing or not step 2's application)".into());
        }
        if !missing.is_empty() {
            bail!("records missing or wrong: {missing:?}");
        }
        Ok("3 sha files, project.json, application.json and 3 evidence files re-read and consistent".into())
    }

    async fn grade_service(&mut self) -> Result<String> {
        let rec = self.sha(self.records.recovered_sha())?;
        let ev = self.cluster.observe().await?;
        let unmet = wait::healthy(&ev, &rec, &self.cfg.body);
        if !unmet.is_empty() {
            let explanation = crate::observer::explain(&self.cluster, Target::Healthy, &rec, &unmet, &ev).await;
            bail!("the live service is not healthy at the recovered SHA:\n{explanation}");
        }
        let v = gate::evaluate_value(&ev.to_value(), &rec, &self.cfg.body);
        if !v.approved {
            bail!("the gate rejects the live state: {}", v.report_lines().join("; "));
        }
        Ok(format!("live: Synced, Healthy, HTTP 200 {:?} at {rec}; gate approves", ev.http_body.as_deref().unwrap_or("")))
    }

    /// Writes `timeline.json` (or `timeline-N.json` if an earlier run's timeline is there).
    pub fn write_timeline(&self) -> Result<std::path::PathBuf> {
        let mut path = self.records.timeline();
        let mut n = 1;
        while path.exists() {
            n += 1;
            path = self.records.dir.join(format!("timeline-{n}.json"));
        }
        records::write_json(&path, &serde_json::to_value(&self.timeline)?)?;
        Ok(path)
    }

    pub fn summary(&self) -> String {
        let t = &self.timeline;
        let f = |x: Option<f64>| x.map_or("n/a (resumed)".to_string(), |s| format!("{s:.1}s"));
        format!(
            "lab: {} steps in {:.1}s; outage detected {} after the targetRevision change; recovered {} after it; {} API requests",
            t.steps.len(),
            t.total_seconds,
            f(t.detection_seconds),
            f(t.recovery_seconds),
            t.api_requests
        )
    }
}

/// Per-field counterexamples: missing, null, wrong JSON types and close-but-wrong values.
pub fn counterexamples(field: &str, good: &Value) -> Vec<(&'static str, Option<Value>)> {
    let mut out: Vec<(&'static str, Option<Value>)> = vec![("missing", None), ("null", Some(Value::Null))];
    match good {
        Value::Number(n) => {
            let i = n.as_i64().unwrap_or(0);
            out.push(("as bool", Some(json!(true))));
            out.push(("as string", Some(json!(i.to_string()))));
            out.push(("as float", Some(json!(i as f64))));
            out.push(("off by one", Some(json!(if field == "observed_generation" { i - 1 } else { i + 1 }))));
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
