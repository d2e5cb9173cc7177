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
