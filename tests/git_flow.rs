//! The lab's Git workflow on real repositories in temporary directories, the grader's history
//! checks passing on the real flow and failing on histories built to violate each of them, and a
//! real `git daemon` serving the bare repo over git:// as Argo CD's repo-server reads it.

use cnpe_lab::config::Config;
use cnpe_lab::lab::git::{ensure_bare, GitOps};
use cnpe_lab::lab::history::{self, CHECK_NAMES};
use cnpe_lab::lab::manifests::{self, to_file_bytes, RELEASE_PATH};
use cnpe_lab::lock::LabLock;
use git2::{Oid, Repository};
use std::path::Path;
use std::process::Command;

struct Lab {
    _dir: tempfile::TempDir,
    cfg: Config,
    /// The lab's own lock, as `cnpe-lab run` holds it: what `GitOps::prepare` requires.
    lock: LabLock,
}

fn lab() -> Lab {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config {
        gitops_dir: dir.path().join("gitops"),
        bare_repo: dir.path().join("bare/app.git"),
        evidence_dir: dir.path().join("cnpe"),
        ..Config::default()
    };
    let lock = cnpe_lab::lock::acquire(&cfg.evidence_dir).unwrap();
    Lab {
        _dir: dir,
        cfg,
        lock,
    }
}

fn bare(l: &Lab) -> Repository {
    Repository::open_bare(&l.cfg.bare_repo).unwrap()
}

/// Steps 1, 4 and 6 exactly as the lab does them.
fn run_flow(l: &Lab) -> (GitOps, Oid, Oid, Oid) {
    let g = GitOps::prepare(&l.cfg, &l.lock).unwrap();
    let base = commit(&g, &manifests::baseline_release(&l.cfg), "Baseline release");
    g.push().unwrap();
    let bad = commit(
        &g,
        &manifests::bad_release(&l.cfg),
        "Readiness probe on /not-ready",
    );
    g.push().unwrap();
    let rec = g.revert(bad).unwrap();
    g.push().unwrap();
    (g, base, bad, rec)
}

/// Commits `release` as app/release.json, as the lab's steps do.
fn commit(g: &GitOps, release: &manifests::ResourceList, message: &str) -> Oid {
    g.commit_file(RELEASE_PATH, &to_file_bytes(release), message)
        .unwrap()
}

fn check(l: &Lab, base: Oid, bad: Oid, rec: Oid) -> history::HistoryReport {
    history::check(
        &bare(l),
        &l.cfg,
        &base.to_string(),
        &bad.to_string(),
        &rec.to_string(),
    )
}

/// A second clone of the lab's bare repo, as another user would have.
fn other_clone(l: &Lab) -> (tempfile::TempDir, std::path::PathBuf) {
    let other = tempfile::tempdir().unwrap();
    let bare = l.cfg.bare_repo.to_str().unwrap();
    git(other.path(), &["clone", "-q", bare, "c"]);
    let c = other.path().join("c");
    (other, c)
}

/// `git commit` by someone other than the lab, with `extra` arguments (e.g. --allow-empty).
fn commit_as_someone_else(dir: &Path, extra: &[&str], message: &str) {
    let mut args = vec!["-c", "user.name=x", "-c", "user.email=x@x", "commit", "-q"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["-m", message]);
    git(dir, &args);
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_real_flow_passes_every_history_check() {
    let l = lab();
    let (g, base, bad, rec) = run_flow(&l);
    let report = check(&l, base, bad, rec);
    assert!(report.passed(), "{}", report.render());
    assert_eq!(report.checks.len(), CHECK_NAMES.len());
    // The pushed branch is at the recovered commit; the working copy file equals the baseline.
    assert_eq!(
        bare(&l).find_reference("refs/heads/main").unwrap().target(),
        Some(rec)
    );
    assert_eq!(
        std::fs::read(g.workdir().join(RELEASE_PATH)).unwrap(),
        to_file_bytes(&manifests::baseline_release(&l.cfg))
    );
    // git itself agrees: rev-list shows three commits, revert message names the bad SHA.
    let log = git(&l.cfg.bare_repo, &["rev-list", "main"]);
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        [rec.to_string(), bad.to_string(), base.to_string()]
    );
    let msg = git(&l.cfg.bare_repo, &["log", "-1", "--format=%B", "main"]);
    assert!(
        msg.starts_with("Revert \"Readiness probe on /not-ready\""),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("This reverts commit {bad}.")),
        "{msg}"
    );
    assert_ne!(rec, base, "recovery is a NEW commit, not the old baseline");
}

#[test]
fn force_pushed_branch_fails_reachability() {
    let l = lab();
    let (_g, base, bad, rec) = run_flow(&l);
    // Someone rewrites the branch behind our back: main -> baseline, then a new "recovery".
    let (_other, c) = other_clone(&l);
    git(&c, &["reset", "-q", "--hard", &base.to_string()]);
    commit_as_someone_else(&c, &["--allow-empty"], "rewritten");
    git(&c, &["push", "-q", "--force", "origin", "main"]);
    let report = check(&l, base, bad, rec);
    assert!(!report.passed());
    assert!(
        report.failed("bad reachable from branch"),
        "{}",
        report.render()
    );
    assert!(
        report.failed("recovered reachable from branch"),
        "{}",
        report.render()
    );
    assert!(
        !report.failed("baseline reachable from branch"),
        "{}",
        report.render()
    );
}

#[test]
fn bad_commit_that_also_changes_the_image_fails() {
    let l = lab();
    let g = GitOps::prepare(&l.cfg, &l.lock).unwrap();
    let base = commit(&g, &manifests::baseline_release(&l.cfg), "base");
    let mut bad_cfg = l.cfg.clone();
    bad_cfg.image = "docker.io/library/nginx:1.28-alpine".into();
    let bad = commit(&g, &manifests::bad_release(&bad_cfg), "bad");
    let rec = g.revert(bad).unwrap();
    g.push().unwrap();
    let report = check(&l, base, bad, rec);
    assert_eq!(
        report.failures().iter().map(|c| c.name).collect::<Vec<_>>(),
        ["bad differs only in the readiness path"],
        "{}",
        report.render()
    );
    assert!(report.render().contains("/image"), "{}", report.render());
}

#[test]
fn commit_refuses_a_staged_extra_file() {
    let l = lab();
    let g = GitOps::prepare(&l.cfg, &l.lock).unwrap();
    let base = commit(&g, &manifests::baseline_release(&l.cfg), "base");
    std::fs::write(g.workdir().join("app/extra.json"), "{}").unwrap();
    let mut index = g.repo.index().unwrap();
    index.add_path(Path::new("app/extra.json")).unwrap();
    index.write().unwrap();
    let bad = g.commit_file(
        RELEASE_PATH,
        &to_file_bytes(&manifests::bad_release(&l.cfg)),
        "bad",
    );
    // A dirty index is refused outright: nothing sneaks into the release.
    assert!(bad.unwrap_err().to_string().contains("uncommitted changes"));
    let _ = base;
}

#[test]
fn bad_commit_that_also_adds_a_file_fails() {
    let l = lab();
    let g = GitOps::prepare(&l.cfg, &l.lock).unwrap();
    let base = commit(&g, &manifests::baseline_release(&l.cfg), "base");
    // Made with git itself: the release change plus an extra file in one commit.
    std::fs::write(
        g.workdir().join(RELEASE_PATH),
        to_file_bytes(&manifests::bad_release(&l.cfg)),
    )
    .unwrap();
    std::fs::write(g.workdir().join("app/configmap.json"), "{}").unwrap();
    git(g.workdir(), &["add", "-A"]);
    commit_as_someone_else(g.workdir(), &[], "bad plus extra");
    let bad = g.head().unwrap().unwrap();
    let rec = g.revert(bad).unwrap();
    g.push().unwrap();
    let report = check(&l, base, bad, rec);
    assert_eq!(
        report.failures().iter().map(|c| c.name).collect::<Vec<_>>(),
        ["bad differs only in the readiness path"],
        "{}",
        report.render()
    );
    assert!(
        report.render().contains("app/configmap.json"),
        "{}",
        report.render()
    );
}

#[test]
fn recovery_whose_tree_differs_from_the_baseline_fails() {
    let l = lab();
    let g = GitOps::prepare(&l.cfg, &l.lock).unwrap();
    let base = commit(&g, &manifests::baseline_release(&l.cfg), "base");
    let bad = commit(&g, &manifests::bad_release(&l.cfg), "bad");
    // A "fix forward" that keeps the message form of a revert but changes something else.
    let mut other = l.cfg.clone();
    other.body = "labhub-cnpe-v2".into();
    let msg = format!("Revert \"bad\"\n\nThis reverts commit {bad}.\n");
    let rec = commit(&g, &manifests::baseline_release(&other), &msg);
    g.push().unwrap();
    let report = check(&l, base, bad, rec);
    assert_eq!(
        report.failures().iter().map(|c| c.name).collect::<Vec<_>>(),
        ["recovered app/ tree equals baseline"],
        "{}",
        report.render()
    );
}

#[test]
fn recovery_that_is_not_a_revert_fails() {
    let l = lab();
    let g = GitOps::prepare(&l.cfg, &l.lock).unwrap();
    let base = commit(&g, &manifests::baseline_release(&l.cfg), "base");
    let bad = commit(&g, &manifests::bad_release(&l.cfg), "bad");
    // Same tree as the baseline, but written by hand: not git's revert of the bad commit.
    let rec = commit(&g, &manifests::baseline_release(&l.cfg), "fix probe");
    g.push().unwrap();
    let report = check(&l, base, bad, rec);
    assert_eq!(
        report.failures().iter().map(|c| c.name).collect::<Vec<_>>(),
        ["recovered message reverts bad"],
        "{}",
        report.render()
    );
}

#[test]
fn pointing_back_at_the_old_baseline_is_not_a_recovery() {
    let l = lab();
    let (_g, base, bad, _rec) = run_flow(&l);
    let report = check(&l, base, bad, base);
    assert!(report.failed("recovered is a child of bad"));
    assert!(report.failed("recovered message reverts bad"));
}

#[test]
fn push_that_would_not_fast_forward_is_refused_and_the_remote_kept() {
    let l = lab();
    let (g, _base, _bad, rec) = run_flow(&l);
    // Another clone pushes a new commit; our local branch is now behind and diverges.
    let (_other, c) = other_clone(&l);
    commit_as_someone_else(&c, &["--allow-empty"], "theirs");
    git(&c, &["push", "-q", "origin", "main"]);
    let theirs = bare(&l)
        .find_reference("refs/heads/main")
        .unwrap()
        .target()
        .unwrap();
    let mine = g.commit_file("app/note.txt", b"mine", "mine").unwrap();
    let err = g.push().unwrap_err().to_string();
    assert!(
        err.contains("refusing to push") && err.contains("rewrite history"),
        "{err}"
    );
    assert_eq!(
        bare(&l).find_reference("refs/heads/main").unwrap().target(),
        Some(theirs)
    );
    assert_ne!(mine, rec);
}

/// A run SIGKILLed inside commit_file, after writing the file and before committing it (seen
/// in the step-4 kill trial), leaves exactly the bytes it was about to commit: the resume
/// commits them. Anything else beside them is still refused.
#[test]
fn an_interrupted_commit_of_the_same_bytes_is_completed_on_resume() {
    let l = lab();
    let g = GitOps::prepare(&l.cfg, &l.lock).unwrap();
    let base = commit(&g, &manifests::baseline_release(&l.cfg), "base");
    let bad = to_file_bytes(&manifests::bad_release(&l.cfg));
    std::fs::write(g.workdir().join(RELEASE_PATH), &bad).unwrap();
    git(g.workdir(), &["add", RELEASE_PATH]); // also when the crash came after the index write
    std::fs::write(g.workdir().join("app/notes.txt"), "mine").unwrap();
    let err = g.commit_file(RELEASE_PATH, &bad, "bad").unwrap_err();
    assert!(
        err.to_string()
            .contains("uncommitted changes (app/notes.txt)"),
        "{err}"
    );
    assert_eq!(
        g.head().unwrap(),
        Some(base),
        "nothing committed on refusal"
    );
    std::fs::remove_file(g.workdir().join("app/notes.txt")).unwrap();
    let oid = g.commit_file(RELEASE_PATH, &bad, "bad").unwrap();
    assert_eq!(
        g.file_at(oid, RELEASE_PATH).unwrap().as_deref(),
        Some(&bad[..])
    );
    let repo = Repository::open(g.workdir()).unwrap();
    assert_eq!(repo.find_commit(oid).unwrap().parent_id(0).ok(), Some(base));
}

/// A run SIGKILLed inside the revert, after its commit and before its checkout: the resume
/// recognises the revert as its own and finishes the checkout; a foreign edit is refused.
#[test]
fn an_interrupted_revert_is_recognised_and_its_checkout_finished() {
    let l = lab();
    let g = GitOps::prepare(&l.cfg, &l.lock).unwrap();
    let base = commit(&g, &manifests::baseline_release(&l.cfg), "Baseline release");
    let bad_bytes = to_file_bytes(&manifests::bad_release(&l.cfg));
    let bad = g
        .commit_file(RELEASE_PATH, &bad_bytes, "Readiness probe on /not-ready")
        .unwrap();
    assert_eq!(
        g.interrupted_commit(base, "Readiness probe").unwrap(),
        Some(bad)
    );
    assert_eq!(g.interrupted_commit(base, "something else").unwrap(), None);
    let bad_hex = bad.to_string();
    let revert = [
        "-c",
        "user.name=x",
        "-c",
        "user.email=x@x",
        "revert",
        "--no-edit",
        &bad_hex,
    ];
    git(g.workdir(), &revert);
    let rec = g.head().unwrap().unwrap();
    let ours = format!("This reverts commit {bad}.");
    assert_eq!(g.interrupted_commit(bad, &ours).unwrap(), Some(rec));
    assert_eq!(
        g.interrupted_commit(base, &ours).unwrap(),
        None,
        "wrong parent"
    );
    // The state the crash left: HEAD is the revert, the file still holds the bad release.
    std::fs::write(g.workdir().join(RELEASE_PATH), &bad_bytes).unwrap();
    std::fs::write(g.workdir().join("app/notes.txt"), "mine").unwrap();
    let err = g.finish_checkout(bad).unwrap_err().to_string();
    assert!(err.contains("uncommitted changes (app/notes.txt)"), "{err}");
    assert_eq!(
        std::fs::read(g.workdir().join(RELEASE_PATH)).unwrap(),
        bad_bytes
    );
    std::fs::remove_file(g.workdir().join("app/notes.txt")).unwrap();
    g.finish_checkout(bad).unwrap();
    assert_eq!(
        std::fs::read(g.workdir().join(RELEASE_PATH)).unwrap(),
        to_file_bytes(&manifests::baseline_release(&l.cfg))
    );
    g.ensure_clean().unwrap();
}

#[test]
fn dirty_working_copy_is_refused() {
    let l = lab();
    let g = GitOps::prepare(&l.cfg, &l.lock).unwrap();
    commit(&g, &manifests::baseline_release(&l.cfg), "base");
    std::fs::write(g.workdir().join(RELEASE_PATH), "edited by hand").unwrap();
    let err = g
        .commit_file(
            RELEASE_PATH,
            &to_file_bytes(&manifests::bad_release(&l.cfg)),
            "bad",
        )
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("uncommitted changes (app/release.json)"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(g.workdir().join(RELEASE_PATH)).unwrap(),
        "edited by hand"
    );
}

#[test]
fn working_copy_without_origin_is_refused() {
    let l = lab();
    Repository::init(&l.cfg.gitops_dir).unwrap();
    let err = GitOps::prepare(&l.cfg, &l.lock).err().unwrap().to_string();
    assert!(err.contains("no remote \"origin\""), "{err}");
}

#[test]
fn bare_repo_path_that_is_a_file_is_refused_and_kept() {
    let l = lab();
    std::fs::create_dir_all(l.cfg.bare_repo.parent().unwrap()).unwrap();
    std::fs::write(&l.cfg.bare_repo, "not a repo").unwrap();
    let err = GitOps::prepare(&l.cfg, &l.lock).err().unwrap().to_string();
    assert!(
        err.contains("app.git") && err.contains("not a directory"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&l.cfg.bare_repo).unwrap(),
        "not a repo"
    );
}

#[test]
fn non_empty_directory_is_not_taken_over() {
    let l = lab();
    std::fs::create_dir_all(&l.cfg.gitops_dir).unwrap();
    std::fs::write(l.cfg.gitops_dir.join("notes.txt"), "mine").unwrap();
    let err = GitOps::prepare(&l.cfg, &l.lock).err().unwrap().to_string();
    assert!(err.contains("not a git working copy"), "{err}");
}

#[test]
fn existing_bare_path_that_is_a_working_copy_is_refused() {
    let l = lab();
    Repository::init(&l.cfg.bare_repo).unwrap();
    assert!(ensure_bare(&l.cfg.bare_repo, "main").is_err());
}

/// A run SIGKILLed while libgit2 was creating the repositories left only their staging
/// directories, half-written (a `config` and no HEAD): the resume removes them, says so, and
/// the whole flow then passes. (Before, the half-made bare repository sat at its final path
/// and every resume refused it: seen in CI's step-1 kill trial.)
#[test]
fn repositories_a_killed_run_was_creating_are_created_again_on_resume() {
    let l = lab();
    for path in [&l.cfg.bare_repo, &l.cfg.gitops_dir] {
        let staging = cnpe_lab::lab::git::staging_path(path);
        std::fs::create_dir_all(staging.join("objects")).unwrap();
        std::fs::write(staging.join("config"), "[core]\n").unwrap();
        assert!(!path.exists());
    }
    let (g, base, bad, rec) = run_flow(&l);
    let report = check(&l, base, bad, rec);
    assert!(report.passed(), "{report:?}");
    drop(g);
    for path in [&l.cfg.bare_repo, &l.cfg.gitops_dir] {
        assert!(!cnpe_lab::lab::git::staging_path(path).exists());
    }
    assert_eq!(branch_tip(&bare(&l), "refs/heads/main"), Some(rec));
}

/// What sits at the final path is never taken for the lab's own: a directory that is not a
/// repository (the user's, or a half-made one from a lab older than atomic creation) is
/// refused, naming it, and kept.
#[test]
fn a_directory_at_the_bare_path_that_is_no_repository_is_refused_and_kept() {
    let l = lab();
    std::fs::create_dir_all(&l.cfg.bare_repo).unwrap();
    std::fs::write(l.cfg.bare_repo.join("config"), "[core]\n").unwrap();
    let err = format!("{:#}", GitOps::prepare(&l.cfg, &l.lock).err().unwrap());
    assert!(
        err.contains("app.git exists but is not a bare git repository"),
        "{err}"
    );
    assert!(l.cfg.bare_repo.join("config").exists());
}

/// A real git daemon on loopback serves the bare repo; cloning over git:// sees the pushed SHA.
#[test]
fn git_daemon_serves_the_pushed_sha_over_git_protocol() {
    let l = lab();
    let (_g, _base, _bad, rec) = run_flow(&l);
    let base_path = l.cfg.bare_repo.parent().unwrap();
    let port = {
        let sock = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        sock.local_addr().unwrap().port()
    };
    // Run git-daemon itself (not the `git daemon` wrapper, which forks it) so kill() stops it.
    let exec_path = git(Path::new("."), &["--exec-path"]);
    let mut daemon = Command::new(Path::new(exec_path.trim()).join("git-daemon"))
        .args([
            "--export-all",
            "--reuseaddr",
            "--listen=127.0.0.1",
            &format!("--port={port}"),
        ])
        .arg(format!("--base-path={}", base_path.display()))
        .arg(base_path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("git daemon (Debian package git) must be installed");
    struct Kill<'a>(&'a mut std::process::Child);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _guard = Kill(&mut daemon);
    let url = format!("git://127.0.0.1:{port}/app.git");
    let dest = tempfile::tempdir().unwrap();
    // The daemon needs a moment to listen: poll with a deadline rather than sleeping blindly.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let cloned = loop {
        match Repository::clone(&url, dest.path().join("clone")) {
            Ok(r) => break r,
            Err(e) if std::time::Instant::now() < deadline => {
                let _ = std::fs::remove_dir_all(dest.path().join("clone"));
                std::thread::yield_now();
                let _ = e;
            }
            Err(e) => panic!("cloning {url}: {e}"),
        }
    };
    let head = cloned
        .find_reference("refs/remotes/origin/main")
        .unwrap()
        .target()
        .unwrap();
    assert_eq!(head, rec);
    assert!(cloned.find_commit(rec).is_ok());
}

// ---- crash windows: what a SIGKILL inside each Git write leaves, and the resume through it

/// Which repository a lock file is in.
#[derive(Debug, Clone, Copy)]
enum Repo {
    WorkingCopy,
    Bare,
}

/// Where in the lab's Git writes the run was killed; each sets up the state that kill leaves
/// (before its lock file) and then performs the lab's next operation, as the resumed step does.
#[derive(Debug, Clone, Copy)]
enum Window {
    /// In `commit_file` of the bad release: the file written (and, with `staged`, the index
    /// too: then the kill came in the ref update), nothing committed.
    Commit { staged: bool },
    /// In the revert before its commit: HEAD is still the bad commit.
    RevertCommit,
    /// In the revert's checkout: HEAD is the revert, its file written, the index not yet.
    RevertCheckout,
    /// In the push of the bad commit into the bare repository: nothing pushed.
    Push,
    /// In the push, after the bare repository took the commit, before the working copy's
    /// remote-tracking branch was updated.
    PushTracking,
}

/// The lab after steps 1-3: the baseline committed and pushed. Returns the working copy and
/// the baseline.
fn after_baseline(l: &Lab) -> (GitOps, Oid) {
    let g = GitOps::prepare(&l.cfg, &l.lock).unwrap();
    let base = commit(&g, &manifests::baseline_release(&l.cfg), "Baseline release");
    g.push().unwrap();
    (g, base)
}

fn bad_bytes(l: &Lab) -> Vec<u8> {
    to_file_bytes(&manifests::bad_release(&l.cfg))
}

/// The lock file as libgit2 leaves it when killed: created with O_EXCL, nothing flushed yet.
fn leave_lock(path: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o666)
        .open(path)
        .unwrap();
}

fn lock_path(l: &Lab, repo: Repo, rel: &str) -> std::path::PathBuf {
    match repo {
        Repo::WorkingCopy => l.cfg.gitops_dir.join(".git").join(rel),
        Repo::Bare => l.cfg.bare_repo.join(rel),
    }
}

fn branch_tip(repo: &Repository, name: &str) -> Option<Oid> {
    repo.find_reference(name).ok()?.target()
}

/// Sets up what a kill in `window` leaves besides its lock file. Returns the bad commit, once
/// there is one.
fn reach(l: &Lab, g: &GitOps, window: Window) -> Option<Oid> {
    let bad = bad_bytes(l);
    match window {
        Window::Commit { staged } => {
            std::fs::write(g.workdir().join(RELEASE_PATH), &bad).unwrap();
            if staged {
                git(g.workdir(), &["add", RELEASE_PATH]);
            }
            None
        }
        Window::RevertCommit | Window::RevertCheckout | Window::PushTracking => {
            let oid = g.commit_file(RELEASE_PATH, &bad, BAD_MESSAGE).unwrap();
            g.push().unwrap();
            match window {
                Window::RevertCheckout => {
                    let hex = oid.to_string();
                    let revert = [GIT_AS_X.as_slice(), &["revert", "--no-edit", &hex]].concat();
                    git(g.workdir(), &revert);
                    // The checkout wrote the file; the kill came before the index: it still
                    // holds the bad commit's tree.
                    git(g.workdir(), &["read-tree", &hex]);
                }
                Window::PushTracking => {
                    // The bare repository took it; the remote-tracking branch was not updated.
                    let base = g.repo.find_commit(oid).unwrap().parent_id(0).unwrap();
                    let tracking = format!("refs/remotes/origin/{}", l.cfg.branch);
                    git(g.workdir(), &["update-ref", &tracking, &base.to_string()]);
                }
                _ => {}
            }
            Some(oid)
        }
        Window::Push => Some(g.commit_file(RELEASE_PATH, &bad, BAD_MESSAGE).unwrap()),
    }
}

const BAD_MESSAGE: &str = "Readiness probe on /not-ready";
const GIT_AS_X: [&str; 4] = ["-c", "user.name=x", "-c", "user.email=x@x"];

/// The lab's next operation after a kill in `window`, as the resumed step performs it, on a
/// working copy opened anew (as the resumed run does). Returns it and the new branch tip.
fn resume(l: &Lab, window: Window, bad: Option<Oid>) -> Result<(GitOps, Oid), String> {
    let err = |e: anyhow::Error| format!("{e:#}");
    let g = GitOps::prepare(&l.cfg, &l.lock).map_err(err)?;
    let tip = match window {
        Window::Commit { .. } => g
            .commit_file(RELEASE_PATH, &bad_bytes(l), BAD_MESSAGE)
            .map_err(err)?,
        Window::RevertCommit => g.revert(bad.unwrap()).map_err(err)?,
        Window::RevertCheckout => {
            let bad = bad.unwrap();
            let ours = format!("This reverts commit {bad}.");
            let rec = g
                .interrupted_commit(bad, &ours)
                .map_err(err)?
                .ok_or("the interrupted revert was not recognised")?;
            g.finish_checkout(bad).map_err(err)?;
            rec
        }
        Window::Push | Window::PushTracking => bad.unwrap(),
    };
    g.push().map_err(err)?;
    Ok((g, tip))
}

/// Each lock file a killed Git write of the lab can leave (see `git::lock_files`), reached on
/// purpose: the resumed operation removes it and succeeds. Without that, the four marked
/// "blocks" failed the resume (libgit2: "the index is locked; ...", "failed to lock file
/// ... for writing"); the others would block a user's next git command in that repository.
#[rstest::rstest]
#[case::index_lock_in_commit_files_index_write(Repo::WorkingCopy, "index.lock", Window::Commit { staged: false })] // blocks
#[case::branch_lock_in_commit_files_ref_update(Repo::WorkingCopy, "refs/heads/main.lock", Window::Commit { staged: true })] // blocks
#[case::branch_lock_in_the_reverts_commit(
    Repo::WorkingCopy,
    "refs/heads/main.lock",
    Window::RevertCommit
)] // blocks
#[case::index_lock_in_the_reverts_checkout(Repo::WorkingCopy, "index.lock", Window::RevertCheckout)] // blocks
#[case::tracking_branch_lock_after_the_push(
    Repo::WorkingCopy,
    "refs/remotes/origin/main.lock",
    Window::PushTracking
)] // blocks
#[case::bare_branch_lock_in_the_push(Repo::Bare, "refs/heads/main.lock", Window::Push)] // blocks
#[case::head_lock_in_creating_the_working_copy(Repo::WorkingCopy, "HEAD.lock", Window::Commit { staged: false })]
#[case::config_lock_in_creating_the_working_copy(Repo::WorkingCopy, "config.lock", Window::Commit { staged: false })]
#[case::packed_refs_lock_in_the_working_copy(Repo::WorkingCopy, "packed-refs.lock", Window::Commit { staged: true })]
#[case::bare_head_lock_in_creating_it(Repo::Bare, "HEAD.lock", Window::Push)]
#[case::bare_config_lock_in_creating_it(Repo::Bare, "config.lock", Window::Push)]
#[case::bare_packed_refs_lock(Repo::Bare, "packed-refs.lock", Window::Push)]
fn a_stale_lock_left_by_a_killed_git_write_is_removed_and_the_resume_succeeds(
    #[case] repo: Repo,
    #[case] rel: &str,
    #[case] window: Window,
) {
    let l = lab();
    let (g, base) = after_baseline(&l);
    let bad = reach(&l, &g, window);
    drop(g);
    let lock = lock_path(&l, repo, rel);
    leave_lock(&lock);

    let (g, tip) = resume(&l, window, bad).unwrap_or_else(|e| panic!("{window:?}: {e}"));
    assert!(!lock.exists(), "{} was not removed", lock.display());
    assert_eq!(g.removed_locks(), std::slice::from_ref(&lock));
    // The resume did exactly what the killed run was doing: one commit on top, pushed.
    let head = g.head().unwrap().unwrap();
    assert_eq!(head, tip);
    let parent = g.repo.find_commit(tip).unwrap().parent_id(0).unwrap();
    let expected = match window {
        Window::RevertCommit | Window::RevertCheckout => bad.unwrap(),
        Window::Commit { .. } | Window::Push | Window::PushTracking => base,
    };
    assert_eq!(parent, expected, "{window:?}");
    assert_eq!(branch_tip(&bare(&l), "refs/heads/main"), Some(tip));
    assert_eq!(
        branch_tip(&g.repo, "refs/remotes/origin/main"),
        Some(tip),
        "the remote-tracking branch follows the push"
    );
    g.ensure_clean().unwrap();
}

/// A child process that is ended when the test ends, however it ends.
struct Holder(std::process::Child);

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A lock file that a live process has open (`sleep` with it on its stdin, as libgit2 and git
/// keep the file open while writing it) is refused, naming the file, the pid and the command,
/// and kept; once that process has ended, the same file is stale and the resume removes it.
#[rstest::rstest]
#[case::index_lock_in_the_working_copy(Repo::WorkingCopy, "index.lock")]
#[case::branch_lock_in_the_bare_repository(Repo::Bare, "refs/heads/main.lock")]
fn a_lock_file_a_live_process_has_open_is_refused_naming_it_and_kept(
    #[case] repo: Repo,
    #[case] rel: &str,
) {
    let l = lab();
    let (g, base) = after_baseline(&l);
    drop(g);
    let lock = lock_path(&l, repo, rel);
    leave_lock(&lock);
    // While this test has the lock file open, a sibling case's fork would copy the descriptor
    // into its child until that child execs; opening and spawning one case at a time keeps
    // the only holder the one this case started.
    static SPAWNING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let child = {
        let _one_at_a_time = SPAWNING.lock().unwrap_or_else(|e| e.into_inner());
        Command::new("sleep")
            .arg("infinity")
            .stdin(std::fs::File::open(&lock).unwrap())
            .spawn()
            .unwrap()
    };
    let mut holder = Holder(child);
    let pid = holder.0.id();
    // spawn() returns once the child is inside exec, its stdin already the lock file, but the
    // kernel renames it (`/proc/PID/comm`) a moment later: wait for the name the error quotes.
    let comm = format!("/proc/{pid}/comm");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::read_to_string(&comm)
        .unwrap_or_default()
        .trim_end()
        != "sleep"
    {
        assert!(
            std::time::Instant::now() < deadline,
            "pid {pid} is not `sleep` after 10 s"
        );
        std::thread::yield_now();
    }
    let err = GitOps::prepare(&l.cfg, &l.lock).err().unwrap().to_string();
    assert!(
        err.contains(&lock.display().to_string())
            && err.contains(&format!("pid {pid} (sleep)"))
            && err.contains("has it open"),
        "{err}"
    );
    assert!(lock.exists(), "a held lock file was removed");
    assert_eq!(branch_tip(&bare(&l), "refs/heads/main"), Some(base));

    holder.0.kill().unwrap();
    holder.0.wait().unwrap();
    let g = GitOps::prepare(&l.cfg, &l.lock).unwrap();
    assert_eq!(g.removed_locks(), std::slice::from_ref(&lock));
    assert!(!lock.exists());
}

/// A user's `git commit -a` waiting for its editor holds `index.lock` with the file closed (no
/// process has it open): the git command running in the working copy is the holder. The lab
/// refuses, naming it, and leaves the lock, so the user's commit completes.
#[test]
fn a_git_commit_in_progress_in_the_working_copy_is_refused_and_completes() {
    use std::io::BufRead;
    let l = lab();
    let (g, base) = after_baseline(&l);
    std::fs::write(g.workdir().join(RELEASE_PATH), bad_bytes(&l)).unwrap();
    let workdir = g.workdir().to_path_buf();
    drop(g);
    // The editor says it is open, then waits for a line (or the end) on its stdin.
    let child = Command::new("git")
        .arg("-C")
        .arg(&workdir)
        .args(GIT_AS_X)
        .args(["commit", "-q", "-a", "-e", "-m", "a user's commit"])
        .env("GIT_EDITOR", "echo editor open; read -r line; true")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut user = Holder(child);
    let mut first = String::new();
    // Kept open until git ends: a closed pipe would kill it with SIGPIPE.
    let mut editor_says = std::io::BufReader::new(user.0.stdout.take().unwrap());
    editor_says.read_line(&mut first).unwrap();
    assert_eq!(
        first, "editor open\n",
        "git commit did not reach its editor"
    );
    let lock = workdir.join(".git/index.lock");
    assert!(
        lock.exists(),
        "git commit -a holds index.lock while its editor runs"
    );

    let err = GitOps::prepare(&l.cfg, &l.lock).err().unwrap().to_string();
    let pid = user.0.id();
    assert!(
        err.contains(&lock.display().to_string())
            && err.contains(&format!("pid {pid} (git)"))
            && err.contains("commit -q -a -e"),
        "{err}"
    );
    assert!(lock.exists(), "the user's lock was removed");

    drop(user.0.stdin.take()); // the editor closes
    assert!(user.0.wait().unwrap().success(), "the user's commit failed");
    drop(editor_says);
    assert!(!lock.exists());
    let g = GitOps::prepare(&l.cfg, &l.lock).unwrap();
    let head = g.head().unwrap().unwrap();
    let user_commit = g.repo.find_commit(head).unwrap();
    assert_eq!(user_commit.message().ok(), Some("a user's commit\n"));
    assert_eq!(user_commit.parent_id(0).unwrap(), base);
    assert!(g.removed_locks().is_empty());
}

/// `std::fs::write` truncates, then writes: a kill inside `commit_file`'s write leaves a
/// prefix of the bytes being committed (empty included), which the resume completes.
#[rstest::rstest]
#[case::empty(0)]
#[case::half(2)]
fn a_commit_killed_inside_its_file_write_is_completed_on_resume(#[case] divisor: usize) {
    let l = lab();
    let (g, base) = after_baseline(&l);
    let bad = bad_bytes(&l);
    let cut = bad.len().checked_div(divisor).unwrap_or(0);
    std::fs::write(g.workdir().join(RELEASE_PATH), &bad[..cut]).unwrap();
    let oid = g.commit_file(RELEASE_PATH, &bad, BAD_MESSAGE).unwrap();
    assert_eq!(g.file_at(oid, RELEASE_PATH).unwrap(), Some(bad));
    assert_eq!(g.repo.find_commit(oid).unwrap().parent_id(0).unwrap(), base);
}

/// The revert's checkout truncates the file, then writes it, then the index: a kill in
/// between leaves a prefix of HEAD's version; finishing the checkout restores it. Bytes that
/// are neither the previous version nor (a prefix of) HEAD's are still refused, untouched.
#[test]
fn a_revert_killed_inside_its_checkout_is_finished_on_resume() {
    let l = lab();
    let (g, _base) = after_baseline(&l);
    let bad = reach(&l, &g, Window::RevertCheckout).unwrap();
    let baseline = to_file_bytes(&manifests::baseline_release(&l.cfg));
    let file = g.workdir().join(RELEASE_PATH);
    std::fs::write(&file, b"{\"edited\": true}").unwrap();
    let err = g.finish_checkout(bad).unwrap_err().to_string();
    assert!(
        err.contains("uncommitted changes (app/release.json)"),
        "{err}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"{\"edited\": true}");
    std::fs::write(&file, &baseline[..baseline.len() / 3]).unwrap();
    g.finish_checkout(bad).unwrap();
    assert_eq!(std::fs::read(&file).unwrap(), baseline);
    g.ensure_clean().unwrap();
}

/// The lab reverts in memory (`revert_commit`, then its own commit): a kill before that commit
/// leaves no sequencer state (REVERT_HEAD, MERGE_MSG), only unreferenced objects, so the
/// resume reverts exactly once.
#[test]
fn a_revert_killed_before_its_commit_leaves_no_revert_state() {
    let l = lab();
    let (g, _base) = after_baseline(&l);
    let bad = reach(&l, &g, Window::RevertCommit).unwrap();
    let bad_commit = g.repo.find_commit(bad).unwrap();
    let mut index = g
        .repo
        .revert_commit(&bad_commit, &bad_commit, 0, None)
        .unwrap();
    index.write_tree_to(&g.repo).unwrap(); // what the killed run had written
    let git_dir = l.cfg.gitops_dir.join(".git");
    for state in ["REVERT_HEAD", "MERGE_MSG", "MERGE_HEAD", "sequencer"] {
        assert!(!git_dir.join(state).exists(), "{state} left behind");
    }
    assert_eq!(g.head().unwrap(), Some(bad));
    let (g, rec) = resume(&l, Window::RevertCommit, Some(bad)).unwrap();
    assert_eq!(g.repo.find_commit(rec).unwrap().parent_id(0).unwrap(), bad);
    for state in ["REVERT_HEAD", "MERGE_MSG"] {
        assert!(
            !git_dir.join(state).exists(),
            "{state} left by the lab's revert"
        );
    }
}

/// The lab lock proves nothing about another evidence directory's repositories.
#[test]
fn the_lock_of_another_evidence_directory_is_no_proof() {
    let l = lab();
    let other = lab();
    let err = GitOps::prepare(&l.cfg, &other.lock)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("is not the one of")
            && err.contains(&l.cfg.evidence_dir.display().to_string()),
        "{err}"
    );
}
