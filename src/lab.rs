//! The lab's steps 1-8 and the grader's checks, one method per [`Step`], on one fixture. Used
//! by `tests/lab.rs` and `cnpe-lab run` / `verify` through [`crate::runner::Runner`].
//!
//! Reruns resume from what is recorded: [`crate::resume::plan`] decides what each step still
//! has to do, so `baseline.json` and `failed.json` are never overwritten. `cnpe-lab reset`
//! starts over.

use crate::cluster::Cluster;
use crate::config::Config;
use crate::evidence::{self, Evidence, Subject};
use crate::gate;
use crate::git::{parse_sha, GitOps};
use crate::history;
use crate::live::LiveWatch;
use crate::manifests::{self, to_file_bytes, RELEASE_PATH};
use crate::observer::{wait_for, Flip, Progress, WaitSpec};
use crate::probe::Probe;
use crate::records::{self, RecordPaths, WriteOutcome};
use crate::resume::{self, Plan, Recorded, RevisionChange};
use crate::step::Step;
use crate::wait::{self, Target};
use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Serialize)]
pub struct StepTiming {
    pub step: String,
    pub started_at: String,
    pub seconds: f64,
    pub outcome: String,
}

/// One wait of the run: how long, what it cost, how fast it answered, what flipped.
#[derive(Debug, Clone, Serialize)]
pub struct WaitTiming {
    pub step: String,
    pub target: &'static str,
    pub seconds: f64,
    pub watch_events: u32,
    pub probes: u32,
    /// From the watch event that completed the Kubernetes part of the goal to the return.
    pub ms_after_event: f64,
    pub flips: Vec<Flip>,
}

#[derive(Debug, Default, Clone, Serialize)]
pub struct Timeline {
    pub steps: Vec<StepTiming>,
    pub waits: Vec<WaitTiming>,
    /// Seconds from the recorded targetRevision change to the bad SHA until the recorded outage
    /// (both from the records, so a resumed run measures the original change).
    pub detection_seconds: Option<f64>,
    /// Seconds from the recorded targetRevision change to the revert until the recorded recovery.
    pub recovery_seconds: Option<f64>,
    pub api_requests: u64,
    pub api_requests_counted: &'static str,
    pub total_seconds: f64,
}

/// Step 4's commit message (the lab's text); also how a resumed run recognises its own commit.
const BAD_MESSAGE: &str = "Readiness probe on /not-ready";

const REQUESTS_COUNTED: &str =
    "every HTTP request this run's client sent: each GET/PATCH/list, each (re)started \
watch, each probe through the service proxy; events streamed over an open watch are not requests";

pub struct Lab {
    pub cfg: Config,
    pub cluster: Cluster,
    pub records: RecordPaths,
    pub timeline: Timeline,
    probe: Probe,
    live: Option<LiveWatch>,
    started: Instant,
    current_step: Option<Step>,
}

fn ok_or_resumed(o: WriteOutcome) -> &'static str {
    match o {
        WriteOutcome::Created => "recorded",
        WriteOutcome::AlreadyRecorded => "already recorded (identical)",
    }
}

/// Appends one observation to observations.ndjson. A failure to keep it is reported but does
/// not fail the step: the records that grade the lab are written separately, write-once.
fn keep_observation(path: &Path, ev: &Evidence) {
    if let Err(e) = crate::observations::append(path, &crate::observations::Observation::from(ev)) {
        eprintln!("warning: observation not kept in {}: {e:#}", path.display());
    }
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

impl Lab {
    pub async fn connect(cfg: Config) -> Result<Self> {
        let cluster = Cluster::connect(&cfg).await?;
        Ok(Self {
            records: RecordPaths::new(&cfg.evidence_dir),
            probe: Probe::for_cluster(&cluster)?,
            cfg,
            cluster,
            timeline: Timeline {
                api_requests_counted: REQUESTS_COUNTED,
                ..Default::default()
            },
            live: None,
            started: Instant::now(),
            current_step: None,
        })
    }

    /// Runs one step and records its timing. Returns a one-line summary.
    pub async fn run(&mut self, step: Step) -> Result<String> {
        let started_at = now_rfc3339();
        let t = Instant::now();
        self.current_step = Some(step);
        let result = match step {
            Step::CommitBaseline => self.commit_baseline(),
            Step::ApplyWiring => self.apply_wiring().await,
            Step::RecordFirstSuccess => self.record_first_success().await,
            Step::ReleaseBadCommit => self.release_bad_commit().await,
            Step::ObserveOutage => self.observe_outage().await,
            Step::RevertThroughGit => self.revert_through_git().await,
            Step::VerifyRecovery => self.verify_recovery().await,
            Step::ApproveRelease => self.approve_release(),
            Step::GradeGitHistory => self.grade_git_history(),
            Step::GradeSavedRecords => self.grade_saved_records(),
            Step::GradeLiveWiring => self.grade_live_wiring(None).await,
            Step::GradeLiveService => self.grade_live_service().await,
        };
        self.timeline.steps.push(StepTiming {
            step: step.trial_name().into(),
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

    fn sha(&self, path: PathBuf) -> Result<String> {
        records::read_sha(&path)?.ok_or_else(|| {
            anyhow!(
                "{} is not recorded yet (run the earlier steps)",
                path.display()
            )
        })
    }

    /// What is recorded, read into one value.
    pub fn recorded(&self) -> Result<Recorded> {
        let r = &self.records;
        Ok(Recorded {
            baseline_sha: records::read_sha(&r.baseline_sha())?.is_some(),
            wiring: r.project().exists() && r.application().exists(),
            baseline_json: r.baseline_json().exists(),
            bad_sha: records::read_sha(&r.bad_sha())?.is_some(),
            bad_target_set: r.revision_bad().exists(),
            failed_json: r.failed_json().exists(),
            recovered_sha: records::read_sha(&r.recovered_sha())?.is_some(),
            recovered_target_set: r.revision_recovered().exists(),
            recovered_json: r.recovered_json().exists(),
        })
    }

    fn plan(&self) -> Result<Plan> {
        Ok(resume::plan(&self.recorded()?)?)
    }

    fn bare(&self) -> Result<git2::Repository> {
        git2::Repository::open_bare(&self.cfg.bare_repo)
            .with_context(|| format!("opening {}", self.cfg.bare_repo.display()))
    }

    /// The release file at `sha` in the pushed repository, parsed.
    fn pushed_release(&self, sha: &str) -> Result<serde_json::Value> {
        history::release_at(&self.bare()?, parse_sha(sha)?)
    }

    fn commit_baseline(&mut self) -> Result<String> {
        let git = GitOps::prepare(&self.cfg)?;
        let want = serde_json::to_value(manifests::baseline_release(&self.cfg))?;
        if !self.plan()?.commit_baseline {
            let sha = self.sha(self.records.baseline_sha())?;
            let diff = manifests::json_diff(&want, &self.pushed_release(&sha)?);
            if !diff.is_empty() {
                bail!("baseline.sha records {sha}, whose {RELEASE_PATH} differs from step 1 at {diff:?}");
            }
            return Ok(format!(
                "resumed: baseline {sha} already recorded and pushed"
            ));
        }
        let bytes = to_file_bytes(&manifests::baseline_release(&self.cfg));
        let oid = git.commit_file(
            RELEASE_PATH,
            &bytes,
            "Baseline release: web serves labhub-cnpe-v1",
        )?;
        git.push()?;
        let sha = oid.to_string();
        records::write_sha(&self.records.baseline_sha(), &sha)?;
        // Prove it is really on the pushed branch, as Argo CD will fetch it.
        let diff = manifests::json_diff(&want, &self.pushed_release(&sha)?);
        if !diff.is_empty() {
            bail!("pushed release differs from step 1 at {diff:?}");
        }
        Ok(format!(
            "baseline {sha} committed, pushed to {} and recorded",
            self.cfg.branch
        ))
    }

    async fn apply_wiring(&mut self) -> Result<String> {
        let baseline = self.sha(self.records.baseline_sha())?;
        let plan = self.plan()?;
        let project = manifests::project(&self.cfg);
        let application = manifests::application(&self.cfg, &baseline);
        let p = records::write_once(&self.records.project(), &to_file_bytes(&project))?;
        let a = records::write_once(&self.records.application(), &to_file_bytes(&application))?;
        self.cluster.ensure_namespace().await?;
        self.cluster.apply_project(&project).await?;
        if plan.apply_application {
            self.cluster.apply_application(&application).await?;
        } else if self.cluster.application().await?.is_none() {
            bail!(
                "{} records later steps, but Application {} does not exist on this cluster (a new cluster?). \
                 The records are kept; to start over run `cnpe-lab reset --yes` (deletes them) or point \
                 CNPE_EVIDENCE_DIR, CNPE_GITOPS_DIR and CNPE_BARE_REPO at fresh directories",
                self.records.revision_bad().display(),
                self.cfg.application
            );
        }
        let expect = if plan.apply_application {
            Some(baseline)
        } else {
            None
        };
        self.grade_live_wiring(expect).await?;
        Ok(format!(
            "project.json {}, application.json {}; {}; live wiring is least-privilege",
            ok_or_resumed(p),
            ok_or_resumed(a),
            if plan.apply_application {
                "both applied"
            } else {
                "application left at its later revision"
            }
        ))
    }

    /// Step 2's checks against the live objects: everything the grader reads.
    async fn grade_live_wiring(&mut self, expect_revision: Option<String>) -> Result<String> {
        let expect_revision = match expect_revision {
            Some(r) => Some(r),
            None => records::read_sha(&self.records.recovered_sha())?,
        };
        let project = self
            .cluster
            .project()
            .await?
            .ok_or_else(|| anyhow!("AppProject {} not found", self.cfg.project))?;
        let app = self
            .cluster
            .application()
            .await?
            .ok_or_else(|| anyhow!("Application {} not found", self.cfg.application))?;
        let problems = crate::grade::wiring(&self.cfg, &project, &app, expect_revision.as_deref());
        if !problems.is_empty() {
            bail!("live wiring is wrong:\n  - {}", problems.join("\n  - "));
        }
        Ok("project allows one repo, one destination, Deployment+Service, no cluster kinds; application wired".into())
    }

    /// The run's watches, started at the first wait and shared by every later one.
    fn live(&mut self) -> &mut LiveWatch {
        let cluster = &self.cluster;
        self.live.get_or_insert_with(|| LiveWatch::start(cluster))
    }

    /// Waits for `target` at `sha` on live watches, keeping every observation, and records the
    /// evidence write-once at `path`.
    async fn wait_and_record(
        &mut self,
        target: Target,
        sha: &str,
        path: PathBuf,
    ) -> Result<(Evidence, f64)> {
        let spec = WaitSpec {
            target,
            sha,
            body: &self.cfg.body.clone(),
            deadline: self.cfg.wait_deadline,
            probe_interval: self.cfg.poll_interval,
            progress: Progress::for_stderr(),
        };
        let observations = self.records.observations();
        let mut keep = |ev: &Evidence| keep_observation(&observations, ev);
        let cluster = self.cluster.clone();
        let probe = self.probe.clone();
        let w = wait_for(&cluster, self.live(), &probe, &spec, &mut keep)
            .await
            .map_err(|e| anyhow!("{e}"))?;
        self.timeline.waits.push(WaitTiming {
            step: self
                .current_step
                .map(|s| s.trial_name())
                .unwrap_or("")
                .into(),
            target: target.name(),
            seconds: w.elapsed.as_secs_f64(),
            watch_events: w.events,
            probes: w.probes,
            ms_after_event: w.latency_after_event.as_secs_f64() * 1000.0,
            flips: w.flips.clone(),
        });
        records::write_json(&path, &w.evidence.to_value())?;
        Ok((w.evidence, w.elapsed.as_secs_f64()))
    }

    /// A recorded evidence file re-read strictly and checked against its predicate.
    fn recorded_evidence(
        &self,
        path: &Path,
        target: Target,
        sha: &str,
    ) -> Result<Option<Evidence>> {
        let Some(v) = records::read_json(path)? else {
            return Ok(None);
        };
        let ev: Evidence = serde_json::from_value(v)
            .with_context(|| format!("{} is not lab evidence", path.display()))?;
        let unmet = wait::unmet(target, &ev, sha, &self.cfg.body);
        if !unmet.is_empty() {
            bail!(
                "{} does not show `{}` at {sha}: {}",
                path.display(),
                target.name(),
                unmet
                    .iter()
                    .map(|u| u.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
        Ok(Some(ev))
    }

    async fn record_first_success(&mut self) -> Result<String> {
        let sha = self.sha(self.records.baseline_sha())?;
        if !self.plan()?.wait_first_success {
            self.recorded_evidence(&self.records.baseline_json(), Target::Healthy, &sha)?;
            return Ok("resumed: baseline.json already records the first success".into());
        }
        let (_, secs) = self
            .wait_and_record(Target::Healthy, &sha, self.records.baseline_json())
            .await?;
        Ok(format!(
            "healthy at baseline {sha} after {secs:.1}s; baseline.json recorded"
        ))
    }

    /// Points targetRevision at `sha`, first recording (write-once) when that change was made.
    async fn point_at(&mut self, role: &str, sha: &str, record: PathBuf) -> Result<()> {
        let change = RevisionChange {
            role: role.into(),
            sha: sha.into(),
            set_at: now_rfc3339(),
        };
        if !record.exists() {
            records::write_json(&record, &serde_json::to_value(&change)?)?;
        }
        self.cluster.set_target_revision(sha).await
    }

    async fn release_bad_commit(&mut self) -> Result<String> {
        let baseline = self.sha(self.records.baseline_sha())?;
        let plan = self.plan()?;
        let mut summary = if !plan.commit_bad {
            let bad = self.sha(self.records.bad_sha())?;
            let diff = manifests::json_diff(
                &self.pushed_release(&baseline)?,
                &self.pushed_release(&bad)?,
            );
            if diff != [manifests::READINESS_PATH_POINTER] {
                bail!("bad.sha records {bad}, which differs from the baseline at {diff:?}, not only the readiness path");
            }
            format!("resumed: bad {bad} already recorded")
        } else {
            let git = GitOps::prepare(&self.cfg)?;
            let bytes = to_file_bytes(&manifests::bad_release(&self.cfg));
            let head = git.head()?.map(|h| h.to_string());
            // Killed after committing, before recording: adopt that commit, never add another.
            let interrupted = git
                .interrupted_commit(parse_sha(&baseline)?, BAD_MESSAGE)?
                .filter(|h| {
                    git.file_at(*h, RELEASE_PATH).ok().flatten().as_deref() == Some(&bytes[..])
                });
            let (oid, how) = if let Some(h) = interrupted {
                (h, "adopted from an interrupted run")
            } else if head == Some(baseline.clone()) {
                (
                    git.commit_file(RELEASE_PATH, &bytes, BAD_MESSAGE)?,
                    "committed",
                )
            } else {
                bail!("the working copy's HEAD is not the baseline {baseline}; refusing to build step 4 on anything else");
            };
            git.push()?;
            records::write_sha(&self.records.bad_sha(), &oid.to_string())?;
            format!("bad {oid} {how} (readiness path /not-ready only), pushed and recorded")
        };
        if plan.point_at_bad {
            let bad = self.sha(self.records.bad_sha())?;
            self.point_at("bad", &bad, self.records.revision_bad())
                .await?;
            summary.push_str("; targetRevision set and refresh requested");
        }
        Ok(summary)
    }

    fn revision_change(&self, path: &Path) -> Result<Option<RevisionChange>> {
        records::read_json(path)?
            .map(|v| {
                serde_json::from_value(v)
                    .with_context(|| format!("{} is not a revision change record", path.display()))
            })
            .transpose()
    }

    /// Seconds from the recorded change to the recorded evidence.
    fn measured(&self, change: &Path, evidence: &Path) -> Result<Option<f64>> {
        let (Some(c), Some(e)) = (self.revision_change(change)?, records::read_json(evidence)?)
        else {
            return Ok(None);
        };
        Ok(e["observed_at"]
            .as_str()
            .and_then(|at| resume::seconds_between(&c.set_at, at)))
    }

    async fn observe_outage(&mut self) -> Result<String> {
        let bad = self.sha(self.records.bad_sha())?;
        let summary = if !self.plan()?.wait_outage {
            self.recorded_evidence(&self.records.failed_json(), Target::Failed, &bad)?;
            "resumed: failed.json already records the outage".to_string()
        } else {
            let (ev, secs) = self
                .wait_and_record(Target::Failed, &bad, self.records.failed_json())
                .await?;
            format!(
                "Synced + {} with ProgressDeadlineExceeded, 0 ready endpoints, HTTP {} after {secs:.1}s; failed.json recorded",
                ev.health.as_deref().unwrap_or("?"),
                ev.http_code.map_or_else(|| format!("no response ({})", ev.http_error.as_deref().unwrap_or("?")), |c| c.to_string())
            )
        };
        self.timeline.detection_seconds =
            self.measured(&self.records.revision_bad(), &self.records.failed_json())?;
        Ok(summary)
    }

    async fn revert_through_git(&mut self) -> Result<String> {
        let bad = self.sha(self.records.bad_sha())?;
        let plan = self.plan()?;
        let mut summary = if !plan.commit_revert {
            format!(
                "resumed: recovered {} already recorded",
                self.sha(self.records.recovered_sha())?
            )
        } else {
            let git = GitOps::prepare(&self.cfg)?;
            let bad_oid = parse_sha(&bad)?;
            // Killed after the revert's commit, before recording it: adopt it (and finish its
            // checkout), never revert twice.
            let interrupted =
                git.interrupted_commit(bad_oid, &format!("This reverts commit {bad}."))?;
            let (oid, how) = if let Some(h) = interrupted {
                git.finish_checkout(bad_oid)?;
                (h, "adopted from an interrupted run")
            } else if git.head()? == Some(bad_oid) {
                (git.revert(bad_oid)?, "committed")
            } else {
                bail!("the working copy's HEAD is not the bad commit {bad}; refusing to revert on top of anything else");
            };
            git.push()?;
            records::write_sha(&self.records.recovered_sha(), &oid.to_string())?;
            format!("revert {oid} of {bad} {how}, pushed and recorded")
        };
        let rec = self.sha(self.records.recovered_sha())?;
        let baseline = self.sha(self.records.baseline_sha())?;
        let (same, detail) =
            history::same_app_tree(&self.bare()?, parse_sha(&baseline)?, parse_sha(&rec)?)?;
        if !same {
            bail!("the revert did not restore the baseline's app/ tree: {detail}");
        }
        summary.push_str("; app/ tree equals the baseline's");
        if plan.point_at_revert {
            self.point_at("recovered", &rec, self.records.revision_recovered())
                .await?;
            summary.push_str("; targetRevision set and refresh requested");
        }
        Ok(summary)
    }

    async fn verify_recovery(&mut self) -> Result<String> {
        let rec = self.sha(self.records.recovered_sha())?;
        let summary = if !self.plan()?.wait_recovery {
            self.recorded_evidence(&self.records.recovered_json(), Target::Healthy, &rec)?;
            "resumed: recovered.json already records the recovery (live service graded below)"
                .to_string()
        } else {
            let (_, secs) = self
                .wait_and_record(Target::Healthy, &rec, self.records.recovered_json())
                .await?;
            format!("healthy at recovered {rec} after {secs:.1}s; recovered.json recorded")
        };
        self.timeline.recovery_seconds = self.measured(
            &self.records.revision_recovered(),
            &self.records.recovered_json(),
        )?;
        Ok(summary)
    }

    /// Step 8: installs `release-gate.py` (write-once) where the lab's grader runs it, then
    /// tests the gate THROUGH that file, as processes: it approves the recovery, rejects the
    /// outage, the stale baseline and every per-field counterexample (in a temporary copy),
    /// and leaves recovered.json's bytes and mtime untouched.
    fn approve_release(&mut self) -> Result<String> {
        let rec = self.sha(self.records.recovered_sha())?;
        let bad = self.sha(self.records.bad_sha())?;
        let body = self.cfg.body.clone();
        let installed =
            crate::launcher::install(&self.records.dir, &crate::launcher::gate_binary()?)?;
        let script = self.records.gate_py();
        let recovered_path = self.records.recovered_json();
        let before = (
            records::read_bounded(&recovered_path)?,
            std::fs::metadata(&recovered_path)?.modified()?,
        );
        let verdict = |state: &Path, sha: &str| -> Result<(bool, String)> {
            let out = crate::launcher::run_py(&script, state, sha, &body)?;
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            Ok((out.status.success(), text.trim().to_string()))
        };
        let (ok, text) = verdict(&recovered_path, &rec)?;
        if !ok {
            bail!("{} rejects recovered.json: {text}", script.display());
        }
        for (name, path, sha) in [
            (
                "failed.json (the recorded outage) for the bad SHA",
                self.records.failed_json(),
                &bad,
            ),
            (
                "failed.json (the recorded outage) for the recovered SHA",
                self.records.failed_json(),
                &rec,
            ),
            (
                "baseline.json (a stale revision) for the recovered SHA",
                self.records.baseline_json(),
                &rec,
            ),
        ] {
            if verdict(&path, sha)?.0 {
                bail!(
                    "negative control broken: {} approves {name}",
                    script.display()
                );
            }
        }
        let tmp = tempfile::tempdir()?;
        let copy = tmp.path().join("state.json");
        let base: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&before.0)?;
        let states = crate::grade::counterexample_states(&base);
        let mut escaped = Vec::new();
        for (field, label, state) in &states {
            std::fs::write(&copy, serde_json::to_vec_pretty(state)?)?;
            let (approved, text) = verdict(&copy, &rec)?;
            // The compiled gate also names the field; the in-process verdict checks that.
            let named = gate::evaluate_bytes(&std::fs::read(&copy)?, &rec, &body)
                .failing_fields()
                .contains(field);
            if approved || !named {
                escaped.push(format!("{field} {label}: {text}"));
            }
        }
        let after = (
            records::read_bounded(&recovered_path)?,
            std::fs::metadata(&recovered_path)?.modified()?,
        );
        if after != before {
            bail!("recovered.json changed during the gate checks");
        }
        if !escaped.is_empty() {
            bail!("counterexamples release-gate.py did not reject by name: {escaped:?}");
        }
        if states.len() < 5 * gate::REQUIRED_FIELDS.len() {
            bail!(
                "only {} counterexamples evaluated: the check would prove little",
                states.len()
            );
        }
        Ok(format!(
            "{} {}; as processes it approves recovered.json, rejects failed.json and the stale baseline.json and all {} \
             counterexamples by field; recovered.json untouched",
            script.display(),
            ok_or_resumed(installed.script_outcome),
            states.len()
        ))
    }

    fn grade_git_history(&mut self) -> Result<String> {
        let (b, x, r) = (
            self.sha(self.records.baseline_sha())?,
            self.sha(self.records.bad_sha())?,
            self.sha(self.records.recovered_sha())?,
        );
        let report = history::check(&self.bare()?, &self.cfg, &b, &x, &r);
        if !report.passed() {
            bail!("git history fails the grader:\n{}", report.render());
        }
        Ok(format!("{} history checks pass", report.checks.len()))
    }

    fn grade_saved_records(&mut self) -> Result<String> {
        let (b, x, r) = (
            self.sha(self.records.baseline_sha())?,
            self.sha(self.records.bad_sha())?,
            self.sha(self.records.recovered_sha())?,
        );
        let mut missing = Vec::new();
        for (path, target, sha) in [
            (self.records.baseline_json(), Target::Healthy, &b),
            (self.records.failed_json(), Target::Failed, &x),
            (self.records.recovered_json(), Target::Healthy, &r),
        ] {
            if self.recorded_evidence(&path, target, sha)?.is_none() {
                missing.push(path.display().to_string());
            }
        }
        let project = records::read_json(&self.records.project())?;
        let app = records::read_json(&self.records.application())?;
        missing.extend(crate::grade::recorded_manifests(
            &self.cfg,
            &b,
            project.as_ref(),
            app.as_ref(),
        ));
        if !missing.is_empty() {
            bail!("records missing or wrong: {missing:?}");
        }
        Ok("3 sha files, project.json, application.json and 3 evidence files re-read and consistent".into())
    }

    /// One observation of the live state: from the run's watches when they run (no extra
    /// requests), else by GETs.
    pub async fn observe(&mut self) -> Result<Evidence> {
        let state = match &self.live {
            Some(live) => live.snapshot(),
            None => self.cluster.live_state().await?,
        };
        let http = self.probe.get().await;
        Ok(evidence::derive(
            &Subject::from_config(&self.cfg),
            &state,
            &http,
            chrono::Utc::now(),
        ))
    }

    async fn grade_live_service(&mut self) -> Result<String> {
        let rec = self.sha(self.records.recovered_sha())?;
        let ev = self.observe().await?;
        keep_observation(&self.records.observations(), &ev);
        let unmet = wait::healthy(&ev, &rec, &self.cfg.body);
        if !unmet.is_empty() {
            let cluster = self.cluster.clone();
            let cx = crate::observer::context(&cluster, self.live(), None, &[]).await;
            bail!(
                "the live service is not healthy at the recovered SHA:\n{}",
                wait::explain(Target::Healthy, &rec, &unmet, &ev, &cx)
            );
        }
        let v = gate::evaluate_value(&ev.to_value(), &rec, &self.cfg.body);
        if !v.approved {
            bail!(
                "the gate rejects the live state: {}",
                v.report_lines().join("; ")
            );
        }
        Ok(format!(
            "live: Synced, Healthy, HTTP 200 {:?} at {rec}; gate approves",
            ev.http_body.as_deref().unwrap_or("")
        ))
    }

    /// Writes `timeline.json` (or `timeline-N.json` if an earlier run's timeline is there).
    pub fn write_timeline(&self) -> Result<PathBuf> {
        records::write_json_numbered(
            &self.records.dir,
            "timeline",
            &serde_json::to_value(&self.timeline)?,
        )
    }

    pub fn summary(&self) -> String {
        let t = &self.timeline;
        let f = |x: Option<f64>| x.map_or("n/a".to_string(), |s| format!("{s:.1}s"));
        let slowest = t.waits.iter().map(|w| w.ms_after_event).fold(0.0, f64::max);
        format!(
            "lab: {} steps in {:.1}s; outage detected {} after the targetRevision change; recovered {} after it; \
             {} API requests; waits answered at most {slowest:.0} ms after the deciding watch event",
            t.steps.len(),
            t.total_seconds,
            f(t.detection_seconds),
            f(t.recovery_seconds),
            t.api_requests
        )
    }

    /// Deadline for tests that need the run's own wait deadline.
    pub fn wait_deadline(&self) -> Duration {
        self.cfg.wait_deadline
    }
}

impl Lab {
    /// `junit.xml` (this run's trials) and `report.svg` (the picture of every observation).
    /// Reports, not records: regenerated each run; a failure to write one is printed, never
    /// hidden, and never fails the lab's own records.
    pub fn write_reports(&self, results: &[crate::runner::StepResult]) {
        use crate::junit::{TrialOutcome, TrialRecord};
        use crate::runner::Outcome;
        let trials: Vec<TrialRecord> = results
            .iter()
            .map(|r| TrialRecord {
                name: r.step.trial_name().into(),
                outcome: match &r.outcome {
                    Outcome::Passed(_) => TrialOutcome::Passed,
                    Outcome::Failed(e) => TrialOutcome::Failed { message: e.clone() },
                    Outcome::Skipped { after } => TrialOutcome::Failed {
                        message: format!("skipped: {after} failed"),
                    },
                },
                seconds: r.seconds,
            })
            .collect();
        match crate::junit::write_junit(&self.records.dir, "lab", &trials) {
            Ok(p) => eprintln!("junit: {}", p.display()),
            Err(e) => eprintln!("junit.xml not written: {e:#}"),
        }
        match crate::report::write_report(&self.records.dir) {
            Ok(p) => eprintln!("report: {}", p.display()),
            Err(e) => eprintln!("report.svg not written: {e:#}"),
        }
    }
}
