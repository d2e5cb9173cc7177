//! The run SIGKILLed in each step in turn, then resumed: the real `cnpe-lab run` binary, killed
//! the moment it announces the step, then run again to completion. Each trial uses its own
//! tenant of the cluster (Application, AppProject and namespace `cnpe-kill`, a bare repository
//! next to the lab's so the same git daemon serves it, its own directories), so the lab's
//! evidence and the traps' state are never touched. A run that ends before the signal lands
//! (the last steps take milliseconds, and on busy cores the run can finish before this process
//! reads its line) did not reach the window: it is run again from a reset tenant, up to 3
//! times. Proves, every time: 12/12 after the resume, every record the killed run left is byte-identical afterwards (observations are
//! append-only: kept as a prefix), and the outage is measured from the recorded
//! targetRevision change (so never shorter than the progress deadline).
//!
//! Two more trials leave, after the SIGKILL, the lock file a kill inside a Git write leaves
//! (`.git/index.lock` in the working copy, `refs/heads/<branch>.lock` in the bare repository):
//! the resume must remove it, say so, and still pass 12/12.

use cnpe_lab::config::Config;
use cnpe_lab::lab::step::Step;
use cnpe_lab::records::{Keeping, Record};
use cnpe_lab::report::timeline::StepResult;
use cnpe_lab::report::Reporter;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};

/// The tenants' Application, AppProject, namespace and bare repository name: `cnpe-kill-N`,
/// one per slot (the trials run on [`SLOTS`] tenants at once: each lab run mostly waits on
/// the cluster; one at a time took 14 min of CI, three at a time five rounds of about 42 s).
const TENANT: &str = "cnpe-kill";
/// How many kill trials run at once, each on its own tenant.
pub const SLOTS: usize = 4;
/// Bound on one whole `cnpe-lab run` (the lab takes about 40 s on the hermetic cluster).
const RUN_DEADLINE: Duration = Duration::from_secs(300);

struct Tenant {
    name: String,
    _dir: tempfile::TempDir,
    evidence: PathBuf,
    gitops: PathBuf,
    bare: PathBuf,
    branch: String,
    env: Vec<(&'static str, String)>,
}

/// A Git lock file left behind after the SIGKILL, exactly as a kill inside that write leaves it.
#[derive(Debug, Clone, Copy)]
pub enum StaleLock {
    /// `.git/index.lock` in the working copy (a kill in a commit's index write or the revert's
    /// checkout: the bug first seen on a fresh machine).
    WorkingCopyIndex,
    /// `refs/heads/<branch>.lock` in the bare repository (a kill in the push).
    BareBranch,
}

impl StaleLock {
    fn path(self, t: &Tenant) -> PathBuf {
        match self {
            StaleLock::WorkingCopyIndex => t.gitops.join(".git/index.lock"),
            StaleLock::BareBranch => t.bare.join(format!("refs/heads/{}.lock", t.branch)),
        }
    }

    /// Leaves the file (created with O_EXCL, nothing written: libgit2 buffers until it
    /// renames). One the kill itself left is kept as it is.
    fn leave(self, t: &Tenant) -> Result<PathBuf, String> {
        let path = self.path(t);
        let repo = match self {
            StaleLock::WorkingCopyIndex => t.gitops.join(".git"),
            StaleLock::BareBranch => t.bare.clone(),
        };
        if !repo.is_dir() {
            return Err(format!(
                "trial not reached: {} does not exist after the kill",
                repo.display()
            ));
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(_) => Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(path),
            Err(e) => Err(format!("leaving {}: {e}", path.display())),
        }
    }
}

/// The lab's repository URL with the repository name replaced (same server, same directory).
fn tenant_repo_url(repo_url: &str, name: &str) -> Result<String, String> {
    let uri: http::Uri = repo_url
        .parse()
        .map_err(|e| format!("CNPE_REPO_URL {repo_url:?}: {e}"))?;
    let (scheme, authority) = match (uri.scheme_str(), uri.authority()) {
        (Some(s), Some(a)) => (s, a.as_str()),
        _ => return Err(format!("CNPE_REPO_URL {repo_url:?} has no scheme or host")),
    };
    let dir = uri.path().rsplit_once('/').map_or("", |(d, _)| d);
    Ok(format!("{scheme}://{authority}{dir}/{name}.git"))
}

fn tenant(cfg: &Config, slot: usize) -> Result<Tenant, String> {
    let name = format!("{TENANT}-{slot}");
    let dir = tempfile::Builder::new()
        .prefix("cnpe-kill.")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let parent = cfg
        .bare_repo
        .parent()
        .ok_or("CNPE_BARE_REPO has no parent directory")?;
    let evidence = dir.path().join("cnpe");
    let gitops = dir.path().join("gitops");
    let bare = parent.join(format!("{name}.git"));
    let env = vec![
        ("CNPE_EVIDENCE_DIR", evidence.display().to_string()),
        ("CNPE_GITOPS_DIR", gitops.display().to_string()),
        ("CNPE_BARE_REPO", bare.display().to_string()),
        ("CNPE_REPO_URL", tenant_repo_url(&cfg.repo_url, &name)?),
        ("CNPE_APPLICATION", name.clone()),
        ("CNPE_PROJECT", name.clone()),
        ("CNPE_NAMESPACE", name.clone()),
    ];
    Ok(Tenant {
        name,
        _dir: dir,
        evidence,
        gitops,
        bare,
        branch: cfg.branch.clone(),
        env,
    })
}

fn cnpe_lab(t: &Tenant, args: &[&str]) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_cnpe-lab"));
    c.args(args)
        .envs(t.env.iter().map(|(k, v)| (*k, v.as_str())))
        // Act on the cluster this suite is connected to, never provision another.
        .env_remove("CNPE_CLUSTER")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    c
}

/// Runs to completion within `deadline`; returns (success, stderr).
async fn run_to_end(
    t: &Tenant,
    args: &[&str],
    deadline: Duration,
) -> Result<(bool, String), String> {
    let out = tokio::time::timeout(deadline, cnpe_lab(t, args).output())
        .await
        .map_err(|_| format!("cnpe-lab {args:?} ran past {deadline:?}"))?
        .map_err(|e| format!("cnpe-lab {args:?}: {e}"))?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// Every file under `dir` (one level of subdirectories), by relative path.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                files.insert(rel, bytes);
            }
        }
    }
    files
}

/// How a file of the evidence directory may change across a resume (a stranger: never).
fn kept(rel: &str) -> Keeping {
    Record::of_file(rel).map_or(Keeping::WriteOnce, |r| match r.keeping() {
        // A numbered file is a record of its run: the killed run's is never touched.
        Keeping::Numbered => Keeping::WriteOnce,
        k => k,
    })
}

/// Always leaves the tenant gone: its Application, project, namespace and directories.
async fn reset(t: &Tenant) -> Result<(), String> {
    match run_to_end(t, &["reset", "--yes"], Duration::from_secs(180)).await? {
        (true, _) => Ok(()),
        (false, err) => Err(format!(
            "cnpe-lab reset of the {} tenant failed: {err}",
            t.name
        )),
    }
}

/// One kill trial: the step whose beginning the SIGKILL hits, and what is left behind.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    pub step: Step,
    pub stale: Option<StaleLock>,
}

impl Scenario {
    /// Every kill trial: each of the 12 steps, then the two stale-lock windows.
    pub fn all() -> Vec<Scenario> {
        let mut out: Vec<Scenario> = Step::ALL
            .into_iter()
            .map(|step| Scenario { step, stale: None })
            .collect();
        out.push(Scenario {
            step: Step::ReleaseBadCommit,
            stale: Some(StaleLock::WorkingCopyIndex),
        });
        out.push(Scenario {
            step: Step::RevertThroughGit,
            stale: Some(StaleLock::BareBranch),
        });
        out
    }

    pub fn trial_name(&self) -> String {
        let what = match self.stale {
            None => "",
            Some(StaleLock::WorkingCopyIndex) => "_then_a_stale_index_lock",
            Some(StaleLock::BareBranch) => "_then_a_stale_bare_branch_lock",
        };
        format!("fault_sigkill_in_{}{what}", self.step.trial_name())
    }
}

/// One kill trial's name, result and seconds.
pub type KillResult = (String, Result<String, String>, f64);

/// Runs every scenario, [`SLOTS`] at a time on their own tenants; returns each trial's name,
/// result and seconds, in the order given.
pub async fn run_all(cfg: &Config, scenarios: &[Scenario]) -> Vec<KillResult> {
    let slot_runs = (0..SLOTS).map(|slot| async move {
        let mut out = Vec::new();
        for (i, sc) in scenarios.iter().enumerate().skip(slot).step_by(SLOTS) {
            let t0 = std::time::Instant::now();
            let result = killed_in(cfg, slot + 1, *sc).await;
            out.push((i, sc.trial_name(), result, t0.elapsed().as_secs_f64()));
        }
        out
    });
    let mut all: Vec<_> = futures::future::join_all(slot_runs)
        .await
        .into_iter()
        .flatten()
        .collect();
    all.sort_by_key(|(i, ..)| *i);
    all.into_iter().map(|(_, n, r, s)| (n, r, s)).collect()
}

/// SIGKILLed as the scenario's step begins (its stale lock left behind), then resumed, on
/// tenant `slot`; the tenant is removed before and after, whatever happened.
async fn killed_in(cfg: &Config, slot: usize, sc: Scenario) -> Result<String, String> {
    let t = tenant(cfg, slot)?;
    reset(&t).await?;
    let result = kill_and_resume(&t, sc.step, sc.stale).await;
    let cleaned = reset(&t).await;
    let line = result?;
    cleaned?;
    Ok(line)
}

/// The resumed run to its end: (success, stderr, what the concurrent run did). With
/// `concurrent`, once the resumed run has announced its first step (it holds the lock from
/// before that line), a second `cnpe-lab run` on the same directories must exit 2 at once
/// naming the holder's pid; a run that queued on the lock instead is stopped at 30 s.
async fn resume(t: &Tenant, concurrent: bool) -> Result<(bool, String, String), String> {
    let mut child = cnpe_lab(t, &["run"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cnpe-lab run (resume): {e}"))?;
    let mut lines = BufReader::new(child.stderr.take().expect("piped")).lines();
    let mut err = Vec::new();
    let mut refusal = String::new();
    let work = async {
        if concurrent {
            let first = Reporter::begin_line(Step::ALL[0].trial_name());
            while let Some(l) = lines.next_line().await.map_err(|e| e.to_string())? {
                let hit = l == first;
                err.push(l);
                if hit {
                    break;
                }
            }
            let started = Instant::now();
            let second = tokio::time::timeout(
                Duration::from_secs(30),
                cnpe_lab(t, &["run"]).stderr(Stdio::piped()).output(),
            )
            .await
            .map_err(|_| {
                "a concurrent cnpe-lab run queued on the lock instead of being refused (30 s)"
                    .to_string()
            })?
            .map_err(|e| format!("the concurrent cnpe-lab run: {e}"))?;
            let text = String::from_utf8_lossy(&second.stderr).into_owned();
            if second.status.code() != Some(2) || !text.contains("another cnpe-lab process (pid") {
                return Err(format!(
                    "a concurrent cnpe-lab run was not refused with exit 2 naming the holder: exit {:?}: {text}",
                    second.status.code()
                ));
            }
            refusal = format!(
                "; a concurrent run was refused (exit 2) after {} ms",
                started.elapsed().as_millis()
            );
        }
        while let Some(l) = lines.next_line().await.map_err(|e| e.to_string())? {
            err.push(l);
        }
        Ok::<_, String>(())
    };
    tokio::time::timeout(RUN_DEADLINE, work)
        .await
        .map_err(|_| format!("the resumed run ran past {RUN_DEADLINE:?}"))??;
    let status = child.wait().await.map_err(|e| e.to_string())?;
    Ok((status.success(), err.join("\n"), refusal))
}

/// How many times a trial runs the lab again when the run ended before its SIGKILL landed.
const KILL_ATTEMPTS: usize = 3;

/// Runs `cnpe-lab run` until it announces `step`, then SIGKILLs it at once. Returns the seconds
/// until the kill, or `None` when the run had already ended successfully (the last steps take
/// milliseconds: on 2 busy cores the run can finish before this process reads its line).
async fn run_and_kill(t: &Tenant, step: Step) -> Result<Option<f64>, String> {
    let begin = Reporter::begin_line(step.trial_name());
    let mut child = cnpe_lab(t, &["run"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cnpe-lab run: {e}"))?;
    let started = Instant::now();
    let mut lines = BufReader::new(child.stderr.take().expect("piped")).lines();
    let mut seen = Vec::new();
    let reached = tokio::time::timeout(RUN_DEADLINE, async {
        while let Ok(Some(l)) = lines.next_line().await {
            let hit = l == begin;
            seen.push(l);
            if hit {
                return true;
            }
        }
        false
    })
    .await;
    if reached != Ok(true) {
        let _ = child.start_kill();
        return Err(format!(
            "the run {} before announcing {step}:\n{}",
            if reached.is_err() {
                "ran past its deadline"
            } else {
                "ended"
            },
            seen.join("\n")
        ));
    }
    child.start_kill().map_err(|e| format!("SIGKILL: {e}"))?;
    let status = child.wait().await.map_err(|e| e.to_string())?;
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        Some(9) => Ok(Some(started.elapsed().as_secs_f64())),
        _ if status.success() => Ok(None),
        _ => Err(format!("the run was not killed by SIGKILL: {status}")),
    }
}

/// The run's own record says it: its timeline (`timeline.json`, or `timeline-N.json` when an
/// earlier run wrote one: the newest) lists every step of the lab, in order, each `passed`.
fn every_step_passed(evidence: &Path) -> Result<(), String> {
    #[derive(serde::Deserialize)]
    struct Row {
        step: String,
        result: StepResult,
    }
    #[derive(serde::Deserialize)]
    struct Run {
        steps: Vec<Row>,
    }
    let stem = Record::Timeline.file().trim_end_matches(".json");
    let path = cnpe_lab::records::latest_numbered(evidence, stem)
        .ok_or_else(|| format!("no {} in {}", Record::Timeline.file(), evidence.display()))?;
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let run: Run =
        serde_json::from_str(&text).map_err(|e| format!("parsing {}: {e}", path.display()))?;
    let want: Vec<&str> = Step::ALL.iter().map(|s| s.trial_name()).collect();
    let got: Vec<&str> = run.steps.iter().map(|r| r.step.as_str()).collect();
    if got != want {
        return Err(format!(
            "{} lists steps {got:?}, not the lab's {want:?}",
            path.display()
        ));
    }
    match run.steps.iter().find(|r| r.result != StepResult::Passed) {
        Some(r) => Err(format!(
            "{}: step {} {:?}",
            path.display(),
            r.step,
            r.result
        )),
        None => Ok(()),
    }
}

async fn kill_and_resume(
    t: &Tenant,
    step: Step,
    stale: Option<StaleLock>,
) -> Result<String, String> {
    // 1. Run until the step is announced, then SIGKILL at once; a run that ended before the
    // signal landed did not reach the window: the tenant is reset and the lab run again.
    let mut attempt = 1;
    let killed_after = loop {
        match run_and_kill(t, step).await? {
            Some(after) => break after,
            None if attempt < KILL_ATTEMPTS => {
                eprintln!(
                    "  {step}: the run ended before its SIGKILL landed (attempt {attempt} of {KILL_ATTEMPTS}); again from a reset tenant"
                );
                reset(t).await?;
                attempt += 1;
            }
            None => {
                return Err(format!(
                    "the run ended before its SIGKILL landed in {step}, {KILL_ATTEMPTS} times: the window was never reached"
                ))
            }
        }
    };
    let stale = stale.map(|s| s.leave(t)).transpose()?;
    let before = snapshot(&t.evidence);

    // 2. Resume to the end. While the resumed run holds the lock, a second run on the same
    // directory is refused at once, naming the holder (checked once, in step 5's trial).
    let t0 = Instant::now();
    let (ok, err, refusal) = resume(t, step == Step::ObserveOutage).await?;
    let resumed_in = t0.elapsed().as_secs_f64();
    if let Err(why) = ok
        .then_some(())
        .ok_or_else(|| "it exited non-zero".to_string())
        .and_then(|()| every_step_passed(&t.evidence))
    {
        return Err(format!(
            "after SIGKILL in {step}{} the resumed run did not pass 12/12 ({why}):\n{err}",
            stale
                .as_ref()
                .map_or(String::new(), |p| format!(" and a stale {}", p.display()))
        ));
    }
    let mut stale_note = String::new();
    if let Some(lock) = &stale {
        let said = format!("removed the stale lock file {}", lock.display());
        if lock.exists() || !err.contains(&said) {
            return Err(format!(
                "after SIGKILL in {step} the resume passed but did not remove the stale {} \
                 saying so (still there: {}):\n{err}",
                lock.display(),
                lock.exists()
            ));
        }
        stale_note = format!("; the stale {} was removed", lock.display());
    }

    // 3. Nothing the killed run recorded was lost or rewritten.
    let after = snapshot(&t.evidence);
    for (rel, old) in &before {
        let new = after.get(rel);
        let fine = match (kept(rel), new) {
            (Keeping::Regenerated, _) => true,
            (_, None) => false,
            (Keeping::WriteOnce | Keeping::Numbered, Some(n)) => n == old,
            (Keeping::AppendOnly, Some(n)) => n.starts_with(old),
        };
        if !fine {
            return Err(format!(
                "after SIGKILL in {step} and the resume, {rel} was {}",
                if new.is_none() { "lost" } else { "rewritten" }
            ));
        }
    }

    // 4. The outage is measured from the recorded targetRevision change.
    let timeline: serde_json::Value = serde_json::from_slice(
        after
            .get("timeline.json")
            .ok_or("the resumed run wrote no timeline.json")?,
    )
    .map_err(|e| format!("timeline.json: {e}"))?;
    // Every resumed run ends with the outage recorded: its detection time must be there.
    let detection = timeline["detection_seconds"].as_f64().ok_or_else(|| {
        format!("after SIGKILL in {step} the resumed run's timeline.json has no detection_seconds")
    })?;
    let floor = cnpe_lab::lab::manifests::PROGRESS_DEADLINE_SECONDS as f64;
    if detection < floor {
        return Err(format!(
            "after SIGKILL in {step} the outage was 'detected' {detection:.1}s after the targetRevision change, \
             less than the {floor}s progress deadline: measured from the wrong moment"
        ));
    }
    let identical = before
        .keys()
        .filter(|r| kept(r) == Keeping::WriteOnce)
        .count();
    let f = |x: Option<f64>| x.map_or("n/a".into(), |s| format!("{s:.1}s"));
    // What the resumed run had to mend in Argo CD on its way (its "cnpe-lab: " lines, e.g. a
    // refresh requested again), so faults.json shows how often a remedy was needed.
    let remedies: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("cnpe-lab: Argo CD"))
        .collect();
    let remedy_note = if remedies.is_empty() {
        String::new()
    } else {
        format!("; the resumed run said: {}", remedies.join(" / "))
    };
    Ok(format!(
        "SIGKILL in {step} (after {killed_after:.1}s, {} files on disk): resumed 12/12 in {resumed_in:.1}s; \
         {identical} records byte-identical; outage detected {detection:.1}s and recovered {} after their recorded \
         changes{refusal}{stale_note}{remedy_note}{}",
        before.len(),
        f(timeline["recovery_seconds"].as_f64()),
        if attempt > 1 {
            format!(
                "; {} earlier run(s) ended before the SIGKILL landed",
                attempt - 1
            )
        } else {
            String::new()
        },
    ))
}
