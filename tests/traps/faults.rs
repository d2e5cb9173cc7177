//! The faults half of `cargo test --test traps`, each fault bounded in time. On the hermetic
//! cluster (whose processes this suite can stop, start and pause), during a wait: Argo CD's
//! controller and repo-server stopped, the git daemon down during Argo's fetch, the API server
//! restarted, and the API server hung (SIGSTOP). Anywhere as root: the evidence directory on a
//! full and on a read-only filesystem. Each fault proves the run either completes correctly
//! once the fault ends, or fails with an explanation that names the fault, and that no record
//! is lost or overwritten. (The real binary SIGKILLed in each step and resumed: `kills.rs`.)

use crate::support::LabCluster;
use cnpe_lab::lab::manifests;
use cnpe_lab::observe::observer::WaitError;
use cnpe_lab::observe::predicates::Target;
use cnpe_lab::records;
use cnpe_lab::report::Outcome;
use cnpe_lab::sha::Sha;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How long a fault lasts while a wait is under way (the wait's own deadline is longer).
const FAULT: Duration = Duration::from_secs(8);
/// A wait that must NOT complete while the fault lasts.
const DURING: Duration = Duration::from_secs(10);

/// The hermetic cluster's process table (`NAME PID` lines written by ci/hermetic/up.sh).
pub fn hermetic_pids() -> Result<Vec<(String, i32)>, String> {
    let run = std::env::var("CNPE_HERMETIC_RUN")
        .unwrap_or_else(|_| "/var/cache/cnpe-hermetic/run".into());
    let admin = Path::new(&run).join("admin.kubeconfig");
    let kubeconfig = std::env::var_os("KUBECONFIG").map(PathBuf::from);
    if kubeconfig.as_deref() != Some(admin.as_path()) {
        return Err(format!(
            "KUBECONFIG is not the hermetic cluster's ({}): these faults pause its host processes",
            admin.display()
        ));
    }
    let text = std::fs::read_to_string(Path::new(&run).join("pids"))
        .map_err(|e| format!("{run}/pids: {e}"))?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter_map(|(n, p)| p.trim().parse().ok().map(|p| (n.to_string(), p)))
        .collect())
}

/// Processes stopped with SIGSTOP; continued on drop, so a failing trial never leaves the
/// cluster paused.
struct Paused(Vec<(String, i32)>);

fn signal(sig: &str, pid: i32) -> Result<(), String> {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .map_err(|e| e.to_string())?
        .success();
    if ok {
        Ok(())
    } else {
        Err(format!("kill {sig} {pid} failed"))
    }
}

fn pause(names: &[&str]) -> Result<Paused, String> {
    let pids = hermetic_pids()?;
    let mut paused = Paused(Vec::new());
    for name in names {
        let (n, p) = pids
            .iter()
            .find(|(n, _)| n == name)
            .ok_or_else(|| format!("{name} is not in the pids file"))?;
        signal("-STOP", *p)?;
        paused.0.push((n.clone(), *p));
    }
    Ok(paused)
}

impl Drop for Paused {
    fn drop(&mut self) {
        for (_, p) in &self.0 {
            let _ = signal("-CONT", *p);
        }
    }
}

/// A fault's own release: the baseline serving `labhub-cnpe-fault-<fault>`, committed and
/// pushed; returns its SHA and body.
fn fault_release(lab: &LabCluster, fault: &str) -> Result<(String, String), String> {
    let body = format!("labhub-cnpe-fault-{fault}");
    let mut c = lab.cfg.clone();
    c.body = body.clone();
    let release = serde_json::to_value(manifests::baseline_release(&c)).unwrap();
    let sha = lab.commit(&release, &format!("Fault test: {fault}"))?;
    Ok((sha, body))
}

/// Every fault ends as the lab does: the fault's release reverted in Git (history kept) and
/// the recorded recovery serving again.
async fn end_fault(lab: &mut LabCluster, sha: &str) -> Result<(), String> {
    lab.revert(sha)?;
    lab.restore().await
}

pub async fn argo_stopped(lab: &mut LabCluster) -> Result<String, String> {
    restart_during_wait(
        lab,
        &Outage {
            fault: "argocd-stopped",
            components: &["argocd-application-controller", "argocd-repo-server"],
            before_the_change: true,
            named_during: &["observed_revision", "Argo CD has not finished applying"],
            after_start: AfterStart::Nothing,
            named_if_not_serving: None,
        },
    )
    .await
}

/// The API server stops answering mid-wait for [`FAULT`]; the wait rides it out to its
/// deadline and completes once the server answers again.
pub async fn api_server_stopped(lab: &mut LabCluster) -> Result<String, String> {
    let (sha, body) = fault_release(lab, "api-server-stopped")?;
    lab.point_at(&sha).await?;
    let paused = pause(&["kube-apiserver"])?;
    // The fault's duration is the fault itself, not a synchronisation: it ends on its own.
    let ender = std::thread::spawn(move || {
        std::thread::sleep(FAULT);
        drop(paused);
        Instant::now()
    });
    let deadline = lab.cfg.wait_deadline * 2 + FAULT;
    let result = lab.wait(Target::Healthy, &sha, &body, deadline).await;
    let finished = Instant::now();
    let ended = ender.join().map_err(|_| "the fault thread panicked")?;
    let waited =
        result.map_err(|e| format!("the wait did not ride out the stopped API server: {e}"))?;
    let after = finished.saturating_duration_since(ended);
    end_fault(lab, &sha).await?;
    Ok(format!(
        "api-server-stopped {FAULT:?}: the wait rode it out; serving after {:.1}s in all ({:.1}s after the fault ended)",
        waited.elapsed.as_secs_f64(),
        after.as_secs_f64()
    ))
}

/// Stops or starts one hermetic component for real (ci/hermetic/component.sh: SIGTERM and a
/// fresh process with up.sh's command line), not a pause.
fn component(action: &str, name: &str) -> Result<(), String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("ci/hermetic/component.sh");
    let out = Command::new("bash")
        .arg(&script)
        .args([action, name])
        .output()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "component.sh {action} {name}: exit {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Components stopped for real; started again on drop if the trial did not, so a failing
/// trial never leaves the cluster without them.
struct Stopped {
    names: Vec<&'static str>,
    /// When the first stop began: the outage lasts from here to the start.
    since: Instant,
    started: bool,
}

impl Stopped {
    fn stop(names: &[&'static str]) -> Result<Stopped, String> {
        let mut s = Stopped {
            names: Vec::new(),
            since: Instant::now(),
            started: false,
        };
        for n in names {
            component("stop", n)?;
            s.names.push(n);
        }
        Ok(s)
    }
    /// Starts them again; returns when, and how long the outage lasted.
    fn start(mut self) -> Result<(Instant, Duration), String> {
        self.started = true;
        for n in &self.names {
            component("start", n)?;
        }
        Ok((Instant::now(), self.since.elapsed()))
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        if !self.started {
            for n in &self.names {
                let _ = component("start", n);
            }
        }
    }
}

/// What the operator does once the component is back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AfterStart {
    Nothing,
    /// Argo CD does not retry a failed Git fetch before its next reconciliation (180 s here):
    /// the likely cause tells the user to request a refresh, and so does the test.
    RequestRefresh,
}

/// A real component outage during a wait.
struct Outage {
    fault: &'static str,
    components: &'static [&'static str],
    /// The outage begins before the targetRevision change (the change must then wait for the
    /// component), or right after it.
    before_the_change: bool,
    /// What the explanation must name while the components are stopped.
    named_during: &'static [&'static str],
    after_start: AfterStart,
    /// A likely cause that makes "still not serving after the start" a correct outcome: the
    /// harness refuses to call it serving and names why (confirmed by a probe of its own).
    named_if_not_serving: Option<&'static str>,
}

/// With the components stopped, a wait to its deadline must fail naming what the outage holds
/// back; after they start again, the same wait must complete, or (only when the outage says
/// so) time out naming the cause while a probe confirms the service does not answer.
async fn restart_during_wait(lab: &mut LabCluster, o: &Outage) -> Result<String, String> {
    let (sha, body) = fault_release(lab, o.fault)?;
    let stopped = if o.before_the_change {
        let s = Stopped::stop(o.components)?;
        lab.point_at(&sha).await?;
        s
    } else {
        lab.point_at(&sha).await?;
        Stopped::stop(o.components)?
    };
    let name = o.components.join(" and ");
    let timed_out = match lab.wait(Target::Healthy, &sha, &body, DURING).await {
        Err(WaitError::Timeout { explanation, .. }) => explanation,
        Err(WaitError::Api { source, .. }) => format!("{source:#}"),
        Ok(_) => return Err(format!("the wait completed while {name} was stopped")),
    };
    if let Some(n) = o.named_during.iter().find(|n| !timed_out.contains(**n)) {
        return Err(format!(
            "with {name} stopped the wait's explanation lacks {n:?}:\n{timed_out}"
        ));
    }
    let (started, outage) = stopped.start()?;
    if o.after_start == AfterStart::RequestRefresh {
        lab.cluster
            .request_refresh()
            .await
            .map_err(|e| format!("{e:#}"))?;
    }
    let deadline = lab.cfg.wait_deadline * 2;
    let after = match lab.wait(Target::Healthy, &sha, &body, deadline).await {
        Ok(_) => format!(
            "serving {} {:.1}s after {name} started again",
            &sha[..7],
            started.elapsed().as_secs_f64()
        ),
        Err(WaitError::Timeout { explanation, .. })
            if o.named_if_not_serving
                .is_some_and(|n| explanation.contains(n)) =>
        {
            let http = lab.probe.get().await;
            let cause = explanation
                .lines()
                .find(|l| l.contains(o.named_if_not_serving.unwrap_or_default()))
                .unwrap_or_default()
                .trim()
                .trim_start_matches("- ");
            let answer = match (http.code, http.body.as_deref()) {
                (Some(code), Some(page)) => format!("{code} {:?}", truncate(page, 60)),
                (Some(code), None) => code.to_string(),
                (None, _) => http.error.unwrap_or_default(),
            };
            // It may have caught up between the deadline and this probe: that is a recovery.
            let now = if http.code == Some(200) && http.body.as_deref() == Some(body.as_str()) {
                "serving just after the deadline"
            } else {
                "not serving"
            };
            format!(
                "{now} {} {:.0}s after {name} started again (the service answers {answer}); at the deadline the wait said why: {cause}",
                &sha[..7],
                started.elapsed().as_secs_f64(),
            )
        }
        Err(e) => return Err(format!("after {name} started again: {e}")),
    };
    // Reverting rolls a new pod, which also makes a lagging EndpointSlice controller sync.
    end_fault(lab, &sha).await?;
    let how = match o.after_start {
        AfterStart::Nothing => "",
        AfterStart::RequestRefresh => " (after one refresh request)",
    };
    Ok(format!(
        "{}: with {name} stopped ({:.1}s) the wait timed out naming {:?}; {after}{how}",
        o.fault,
        outage.as_secs_f64(),
        o.named_during
    ))
}

/// The API server stopped (connections refused) during a wait, then started: the wait names
/// the refused connection at its deadline; the next wait rides out the start. Serving usually
/// takes ~30 s after the start, all of it Kubernetes and Argo CD catching up (read from their
/// logs): the controller's reconcile that failed during the outage is retried ~18 s later, and
/// the node, whose lease lapsed during the ~31 s outage, is NotReady for ~10 s, so the new pod
/// is not scheduled until the kubelet reports Ready again. Sometimes kube-controller-manager's
/// EndpointSlice or endpoints controller is still behind (its informers were refused by the
/// new API server's not-yet-synced RBAC and backed off): the pod is Ready, Argo CD says Synced
/// and Healthy, and the Service routes nowhere for minutes. The harness must then refuse, and
/// say so.
pub async fn api_server_restarted(lab: &mut LabCluster) -> Result<String, String> {
    restart_during_wait(
        lab,
        &Outage {
            fault: "api-server-restarted",
            components: &["kube-apiserver"],
            before_the_change: false,
            named_during: &["watch", "Connection refused"],
            after_start: AfterStart::Nothing,
            named_if_not_serving: Some("controller has not caught up"),
        },
    )
    .await
}

/// The git daemon down while Argo CD fetches the new revision (the lab pushes to the bare
/// repository on disk, as the lab VM does, so only Argo's fetch goes through the daemon).
pub async fn git_daemon_down(lab: &mut LabCluster) -> Result<String, String> {
    restart_during_wait(
        lab,
        &Outage {
            fault: "git-daemon-down",
            components: &["git-daemon"],
            before_the_change: true,
            named_during: &["ComparisonError", "cannot reach the Git server"],
            after_start: AfterStart::RequestRefresh,
            named_if_not_serving: None,
        },
    )
    .await
}

fn truncate(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

// ---- the evidence directory on a full and on a read-only filesystem (root, no cluster)

struct Mount(PathBuf);

impl Mount {
    fn tmpfs(size: &str) -> Result<Mount, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let opts = format!("size={size}");
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &opts, "cnpe-fault"])
            .arg(dir.path())
            .status();
        match ok {
            Ok(s) if s.success() => Ok(Mount(dir.keep())),
            _ => Err("cannot mount a tmpfs here (needs root and mount privileges)".into()),
        }
    }
    fn remount_ro(&self) -> Result<(), String> {
        let ok = Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(&self.0)
            .status()
            .map_err(|e| e.to_string())?;
        if ok.success() {
            Ok(())
        } else {
            Err("remount ro failed".into())
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// A trial's result as the reporter takes it.
fn outcome(r: Result<String, String>) -> Outcome {
    match r {
        Ok(s) => Outcome::Passed(s),
        Err(e) => Outcome::Failed(e),
    }
}

pub fn full_filesystem() -> Outcome {
    match Mount::tmpfs("64k") {
        Ok(m) => outcome(full_filesystem_on(&m)),
        Err(why) => Outcome::Ignored(why),
    }
}

fn full_filesystem_on(m: &Mount) -> Result<String, String> {
    let dir = m.0.join("cnpe");
    let first = dir.join("baseline.sha");
    let sha = Sha::parse("0123456789abcdef0123456789abcdef01234567").map_err(|e| e.to_string())?;
    records::write_sha(&first, &sha).map_err(|e| format!("{e:#}"))?;
    // Fill the filesystem.
    let filler = std::fs::File::create(m.0.join("filler")).unwrap();
    let _ = std::io::Write::write_all(&mut &filler, &vec![0u8; 256 * 1024]);
    let big = serde_json::json!({"observed_at": "x", "pad": "y".repeat(8192)});
    let err = records::write_json(&dir.join("failed.json"), &big)
        .expect_err("a full filesystem must fail the write");
    let text = format!("{err:#}");
    // The record it was writing, by its full path (the temporary file's name alone would not
    // tell a user which record is missing).
    let record = dir.join("failed.json").display().to_string();
    if !text.contains(&format!("(for {record})")) {
        return Err(format!(
            "the error does not name the record {record}: {text}"
        ));
    }
    if !text.contains("No space left") {
        return Err(format!("the error does not name the fault: {text}"));
    }
    if dir.join("failed.json").exists() {
        return Err("a partial failed.json was left in place".into());
    }
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    if leftovers.len() != 1 {
        return Err(format!("temporary files left behind: {leftovers:?}"));
    }
    let kept = records::read_sha(&first).map_err(|e| format!("{e:#}"))?;
    if kept.as_deref() != Some("0123456789abcdef0123456789abcdef01234567") {
        return Err("the earlier record was damaged".into());
    }
    Ok(format!("full filesystem: {text}"))
}

pub fn read_only_filesystem() -> Outcome {
    match Mount::tmpfs("1m") {
        Ok(m) => outcome(read_only_filesystem_on(&m)),
        Err(why) => Outcome::Ignored(why),
    }
}

fn read_only_filesystem_on(m: &Mount) -> Result<String, String> {
    let dir = m.0.join("cnpe");
    let sha = Sha::parse("0123456789abcdef0123456789abcdef01234567").map_err(|e| e.to_string())?;
    records::write_sha(&dir.join("baseline.sha"), &sha).map_err(|e| format!("{e:#}"))?;
    m.remount_ro()?;
    let err = records::write_sha(&dir.join("bad.sha"), &sha)
        .expect_err("a read-only filesystem must fail the write");
    let text = format!("{err:#}");
    if !text.contains("Read-only file system") || !text.contains("bad.sha") {
        return Err(format!(
            "the error does not name the fault and the file: {text}"
        ));
    }
    if records::read_sha(&dir.join("baseline.sha")).map_err(|e| format!("{e:#}"))? != Some(sha) {
        return Err("the earlier record is unreadable".into());
    }
    // The whole command: it refuses at once, naming the directory, before touching a cluster.
    let out = Command::new(env!("CARGO_BIN_EXE_cnpe-lab"))
        .arg("run")
        .env("CNPE_EVIDENCE_DIR", &dir)
        .env_remove("CNPE_CLUSTER")
        .env("KUBECONFIG", "/nonexistent")
        .output()
        .map_err(|e| e.to_string())?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.success()
        || !stderr.contains(&dir.display().to_string())
        || !stderr.contains("Read-only file system")
    {
        return Err(format!(
            "cnpe-lab run on a read-only evidence dir: exit {:?}, stderr {stderr}",
            out.status.code()
        ));
    }
    Ok(format!("read-only filesystem: {}", stderr.trim()))
}
