//! The lab's steps 1-8 and the grader's checks, one method per [`Step`], on one fixture. Used
//! by `tests/lab.rs` and `cnpe-lab run` / `verify` through [`crate::lab::runner::Runner`].
//!
//! Reruns resume from what is recorded: [`crate::lab::resume::plan`] decides what each step still
//! has to do, so `baseline.json` and `failed.json` are never overwritten. `cnpe-lab reset`
//! starts over.

pub mod git;
pub mod grade;
pub mod history;
pub mod launcher;
pub mod manifests;
pub mod resume;
pub mod runner;
pub mod set_aside;
pub mod standing;
pub mod step;

use crate::cluster::live::LiveWatch;
use crate::cluster::probe::Probe;
use crate::cluster::Cluster;
use crate::config::Config;
use crate::lab::git::{parse_sha, GitOps};
use crate::lab::resume::{Plan, Recorded};
use crate::lab::step::Step;
use crate::lock::LabLock;
use crate::observe::evidence::Evidence;
use crate::observe::observations::{self, LieWindow, Observation};
use crate::observe::observer::{self, wait_for, WaitEvent, WaitSpec};
use crate::observe::predicates::{self, Target};
use crate::records::{self, Record, RecordPaths, RevisionChange, WriteOutcome};
use crate::report::timeline::WaitTiming;
use crate::report::waits::WaitLines;
use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};

mod steps;

/// Step 4's commit message (the lab's text); also how a resumed run recognises its own commit.
const BAD_MESSAGE: &str = "Readiness probe on /not-ready";

/// What a step hands back to the runner: its one-line summary and its waits' timings (the
/// runner, the run's only record keeper, times the step and files both).
#[derive(Debug, Default)]
pub struct StepDone {
    pub summary: String,
    pub waits: Vec<WaitTiming>,
}

impl From<String> for StepDone {
    fn from(summary: String) -> Self {
        StepDone {
            summary,
            waits: Vec::new(),
        }
    }
}

impl From<&str> for StepDone {
    fn from(summary: &str) -> Self {
        summary.to_string().into()
    }
}

/// The lab's fixture: configuration, the cluster, the records, the run's shared watches and,
/// for a run that changes lab state, the lab's lock (held as long as the fixture lives).
pub struct Lab {
    pub cfg: Config,
    pub cluster: Cluster,
    pub records: RecordPaths,
    probe: Probe,
    live: Option<LiveWatch>,
    lock: Option<LabLock>,
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
    if let Err(e) = observations::append(path, &Observation::from(ev)) {
        eprintln!("warning: observation not kept in {}: {e:#}", path.display());
    }
}

pub(crate) fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

impl Lab {
    /// `lock`: the lab's lock on `cfg.evidence_dir`, required by the steps that write Git
    /// (`cnpe-lab run`, `tests/lab.rs`); `None` for a read-only `verify`.
    pub async fn connect(cfg: Config, lock: Option<LabLock>) -> Result<Self> {
        let cluster = Cluster::connect(&cfg).await?;
        Ok(Self {
            records: RecordPaths::new(&cfg.evidence_dir),
            probe: Probe::for_cluster(&cluster)?,
            cfg,
            cluster,
            live: None,
            lock,
        })
    }

    /// The working copy, for a Git write: only with the lab's lock (see [`GitOps::prepare`]).
    fn git(&self) -> Result<GitOps> {
        let lock = self.lock.as_ref().ok_or_else(|| {
            anyhow!(
                "writing Git needs the lab's lock on {}: only `cnpe-lab run` takes it",
                self.cfg.evidence_dir.display()
            )
        })?;
        GitOps::prepare(&self.cfg, lock)
    }

    /// Runs one step: a plain dispatch to its body.
    pub async fn run(&mut self, step: Step) -> Result<StepDone> {
        match step {
            Step::CommitBaseline => self.commit_baseline().map(Into::into),
            Step::ApplyWiring => self.apply_wiring().await.map(Into::into),
            Step::RecordFirstSuccess => self.record_first_success().await,
            Step::ReleaseBadCommit => self.release_bad_commit().await.map(Into::into),
            Step::ObserveOutage => self.observe_outage().await,
            Step::RevertThroughGit => self.revert_through_git().await.map(Into::into),
            Step::VerifyRecovery => self.verify_recovery().await,
            Step::ApproveRelease => self.approve_release().map(Into::into),
            Step::GradeGitHistory => self.grade_git_history().map(Into::into),
            Step::GradeSavedRecords => self.grade_saved_records().map(Into::into),
            Step::GradeLiveWiring => self.grade_live_wiring(None).await.map(Into::into),
            Step::GradeLiveService => self.grade_live_service().await.map(Into::into),
        }
    }

    /// HTTP requests of the run's Kubernetes client other than probes, and the probes.
    pub fn request_counts(&self) -> (u64, u64) {
        (self.cluster.request_count(), self.probe.count())
    }

    /// Detection and recovery seconds, from the records (so a resumed run reports the
    /// original changes).
    pub fn measured_times(&self) -> Result<(Option<f64>, Option<f64>)> {
        Ok((
            self.measured(
                &self.records.path(Record::RevisionBad),
                &self.records.path(Record::FailedJson),
            )?,
            self.measured(
                &self.records.path(Record::RevisionRecovered),
                &self.records.path(Record::RecoveredJson),
            )?,
        ))
    }

    /// The lie window of the recorded bad release, from every observation kept.
    pub fn lie_window(&self) -> Result<Option<LieWindow>> {
        let Some(bad) = self.revision_change(&self.records.path(Record::RevisionBad))? else {
            return Ok(None);
        };
        let until = self
            .revision_change(&self.records.path(Record::RevisionRecovered))?
            .map(|c| c.set_at);
        let all = observations::read_all(&self.records.path(Record::Observations))?;
        Ok(observations::lie_window(
            &all,
            &bad.sha,
            &bad.set_at,
            until.as_deref(),
        ))
    }

    /// What is recorded, read into one value.
    pub fn recorded(&self) -> Result<Recorded> {
        Recorded::read(&self.records)
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

    /// The run's watches, started at the first wait and shared by every later one.
    fn live(&mut self) -> &mut LiveWatch {
        let cluster = &self.cluster;
        self.live.get_or_insert_with(|| LiveWatch::start(cluster))
    }

    /// Waits for `target` at `sha` on live watches, keeping every observation, and records the
    /// evidence write-once at `path`. Returns the evidence and the wait's timing.
    async fn wait_and_record(
        &mut self,
        target: Target,
        sha: &str,
        path: PathBuf,
    ) -> Result<(Evidence, WaitTiming)> {
        let body = self.cfg.body.clone();
        let spec = WaitSpec::new(&self.cfg, target, sha, &body);
        let observations = self.records.path(Record::Observations);
        let lines = WaitLines::for_stderr();
        let mut keep = |e: &WaitEvent<'_>| {
            if let WaitEvent::Observed(ev) = e {
                keep_observation(&observations, ev);
            }
            lines.on(e);
        };
        let cluster = self.cluster.clone();
        let probe = self.probe.clone();
        let w = wait_for(&cluster, self.live(), &probe, &spec, &mut keep)
            .await
            .map_err(|e| anyhow!("{e}"))?;
        let timing = WaitTiming {
            step: String::new(),
            target: target.name(),
            seconds: w.elapsed.as_secs_f64(),
            watch_events: w.events,
            probes: w.probes,
            ms_after_event: w.latency_after_event.as_secs_f64() * 1000.0,
            flips: w.flips.clone(),
        };
        records::write_json(&path, &w.evidence.to_value())?;
        Ok((w.evidence, timing))
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
        let unmet = predicates::unmet(target, &ev, sha, &self.cfg.body);
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

    /// Points targetRevision at `sha`, first recording (write-once) when that change was made,
    /// then makes sure Argo CD compared it (a resumed run's patch is often identical to the
    /// killed run's, and no watch event follows an identical patch): see
    /// [`Cluster::settle_refresh`]. Within a third of the wait deadline, so the step's own
    /// wait still has the rest. Returns what it had to do beyond the patch, if anything, for
    /// the step's line.
    async fn point_at(&mut self, role: &str, sha: &str, record: PathBuf) -> Result<Option<String>> {
        let change = RevisionChange {
            role: role.into(),
            sha: sha.into(),
            set_at: now_rfc3339(),
        };
        if !record.exists() {
            records::write_json(&record, &serde_json::to_value(&change)?)?;
        }
        self.cluster.set_target_revision(sha).await?;
        self.cluster
            .settle_refresh(sha, self.cfg.wait_deadline / 3)
            .await
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
            .and_then(|at| records::seconds_between(&c.set_at, at)))
    }

    /// One observation of the live state (from the run's watches once they run).
    pub async fn observe(&mut self) -> Result<Evidence> {
        observer::observe_once(&self.cluster, self.live.as_ref(), &self.probe).await
    }
}
