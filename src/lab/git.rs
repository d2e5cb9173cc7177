//! The lab's Git side, with git2: prepare the working copy and its bare remote, commit the
//! release, push fast-forward only, revert. History is never rewritten: there is no force push
//! and no reset anywhere in this module, and a push that would not fast-forward is refused.
//!
//! Crash windows: a run SIGKILLed inside a Git write leaves that write's lock file behind
//! (`index.lock`, `refs/heads/<branch>.lock`, ...), and libgit2 then refuses every later write
//! ("the index is locked; this might be due to a concurrent or crashed process"). Only a caller
//! holding the lab's own lock ([`LabLock`]) can open [`GitOps`], and it removes those files
//! when no live process holds them (see [`GitOps::prepare`]); a lock file that a live process
//! holds is refused, naming the file and the process.

use crate::config::Config;
use crate::lock::LabLock;
use anyhow::{anyhow, bail, Context, Result};
use git2::{
    build::CheckoutBuilder, Oid, PushOptions, RemoteCallbacks, Repository, RepositoryInitOptions,
    Signature,
};
use std::path::{Path, PathBuf};

pub const REMOTE: &str = "origin";

/// The working copy of the lab, with `origin` pointing at the bare repository.
pub struct GitOps {
    pub repo: Repository,
    branch: String,
    name: String,
    email: String,
    /// Stale lock files [`GitOps::prepare`] removed (left by a killed run).
    removed: Vec<PathBuf>,
}

/// Opens the bare repository, creating it when missing. A path that exists but is not a bare
/// repository (a file, a working copy, an unrelated directory) is an error naming it.
///
/// Creation is atomic (see [`init_atomically`]): a run killed while creating it leaves no
/// half-made repository at `path` for the resume to refuse.
pub fn ensure_bare(path: &Path, branch: &str) -> Result<Repository> {
    if path.exists() {
        if !path.is_dir() {
            bail!(
                "bare repository path {} exists and is not a directory",
                path.display()
            );
        }
        let repo = Repository::open_bare(path).with_context(|| {
            format!("{} exists but is not a bare git repository", path.display())
        })?;
        return Ok(repo);
    }
    init_atomically(path, |staging| {
        let mut opts = RepositoryInitOptions::new();
        opts.bare(true).initial_head(branch);
        Repository::init_opts(staging, &opts)?;
        Ok(())
    })
    .with_context(|| format!("creating bare repository {}", path.display()))?;
    Repository::open_bare(path).with_context(|| format!("opening {}", path.display()))
}

/// Where [`init_atomically`] builds a repository before moving it to `path`: a hidden sibling
/// (same filesystem, so the move is one rename) whose name says whose it is.
pub fn staging_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "repo".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.cnpe-init"))
}

/// Builds a repository in [`staging_path`] with `init`, then renames it to `path` (absent or
/// an empty directory): libgit2 writes a new repository file by file, and a SIGKILL between
/// two of them used to leave a directory that was no repository, which every resume refused.
/// A staging directory left by a killed run is removed first: the caller holds the lab's lock,
/// and the name is this lab's own.
fn init_atomically(path: &Path, init: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let staging = staging_path(path);
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating directory {}", parent.display()))?;
    }
    if staging.exists() {
        eprintln!(
            "cnpe-lab: removing {}, a repository a killed run had not finished creating",
            staging.display()
        );
        std::fs::remove_dir_all(&staging)
            .with_context(|| format!("removing {}", staging.display()))?;
    }
    init(&staging)?;
    std::fs::rename(&staging, path).with_context(|| {
        format!(
            "moving the new repository {} to {}",
            staging.display(),
            path.display()
        )
    })
}

impl GitOps {
    /// Opens the working copy, creating it (with `origin` = the bare repo) when missing. An
    /// existing working copy must already have `origin`: we never guess a remote for it.
    ///
    /// `lock` proves that this process holds the lab's lock on `cfg`'s evidence directory, so
    /// no other cnpe-lab process works in these repositories: a Git lock file (see
    /// [`lock_files`]) that no live process holds was left by a killed run of this lab, and is
    /// removed (said on stderr, and listed by [`Self::removed_locks`]). One that a live process
    /// holds (a user's `git commit` in progress) is an error naming the file and the holder.
    pub fn prepare(cfg: &Config, lock: &LabLock) -> Result<Self> {
        if lock.path().parent() != Some(cfg.evidence_dir.as_path()) {
            bail!(
                "the lab lock held ({}) is not the one of {}: refusing to touch its repositories",
                lock.path().display(),
                cfg.evidence_dir.display()
            );
        }
        ensure_bare(&cfg.bare_repo, &cfg.branch)?;
        let mut removed = clear_stale_locks(&cfg.bare_repo, RepoKind::Bare, &cfg.branch, lock)?;
        let dir = &cfg.gitops_dir;
        let repo = if dir.join(".git").exists() {
            removed.extend(clear_stale_locks(
                &dir.join(".git"),
                RepoKind::WorkingCopy,
                &cfg.branch,
                lock,
            )?);
            let repo = Repository::open(dir)
                .with_context(|| format!("opening working copy {}", dir.display()))?;
            if repo.find_remote(REMOTE).is_err() {
                bail!("working copy {} has no remote {REMOTE:?}; add it: git -C {} remote add origin {}",
                    dir.display(), dir.display(), cfg.bare_repo.display());
            }
            repo
        } else {
            if dir.exists()
                && std::fs::read_dir(dir)
                    .map(|mut d| d.next().is_some())
                    .unwrap_or(true)
            {
                bail!(
                    "{} exists, is not empty and is not a git working copy",
                    dir.display()
                );
            }
            let url = cfg
                .bare_repo
                .to_str()
                .ok_or_else(|| anyhow!("CNPE_BARE_REPO is not UTF-8"))?;
            // Atomic like the bare repository: a kill here leaves no `.git` without `origin`.
            init_atomically(dir, |staging| {
                let mut opts = RepositoryInitOptions::new();
                opts.initial_head(&cfg.branch);
                Repository::init_opts(staging, &opts)?.remote(REMOTE, url)?;
                Ok(())
            })
            .with_context(|| format!("creating working copy {}", dir.display()))?;
            Repository::open(dir).with_context(|| format!("opening {}", dir.display()))?
        };
        Ok(Self {
            repo,
            branch: cfg.branch.clone(),
            name: cfg.git_name.clone(),
            email: cfg.git_email.clone(),
            removed,
        })
    }

    /// The stale lock files [`Self::prepare`] removed, if any.
    pub fn removed_locks(&self) -> &[PathBuf] {
        &self.removed
    }

    pub fn workdir(&self) -> &Path {
        self.repo.workdir().expect("a working copy has a workdir")
    }

    /// Refuses to commit on top of uncommitted changes: they would silently enter the release.
    pub fn ensure_clean(&self) -> Result<()> {
        self.ensure_clean_but(None)
    }

    /// As [`Self::ensure_clean`], except that `own` (a path and the exact bytes about to be
    /// written there) may already be in place: that is this same commit, interrupted after its
    /// write (a crash there must not block the resume). A prefix of those bytes (empty
    /// included) is accepted too: the write truncates the file first, so a kill inside it
    /// leaves one, and overwriting it loses nothing. Any other content is still refused.
    fn ensure_clean_but(&self, own: Option<(&str, &[u8])>) -> Result<()> {
        self.refuse_changes_but(|path, here| {
            Ok(own.is_some_and(|(rel, bytes)| {
                path == rel && here.is_some_and(|h| bytes.starts_with(h))
            }))
        })?;
        Ok(())
    }

    /// Refuses, naming them, the uncommitted paths that `expected` (path, working-copy bytes
    /// or None if deleted) does not accept; returns how many it accepted.
    fn refuse_changes_but(
        &self,
        expected: impl Fn(&str, Option<&[u8]>) -> Result<bool>,
    ) -> Result<usize> {
        let statuses = self
            .repo
            .statuses(Some(git2::StatusOptions::new().include_untracked(true)))?;
        let (mut accepted, mut dirty) = (0, Vec::new());
        for s in statuses.iter() {
            let path = s.path().unwrap_or("?");
            let here = match std::fs::read(self.workdir().join(path)) {
                Ok(b) => Some(b),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(e).with_context(|| format!("reading {path}")),
            };
            if expected(path, here.as_deref())? {
                accepted += 1;
            } else {
                dirty.push(path.to_string());
            }
        }
        if let Some(first) = dirty.first() {
            bail!(
                "working copy {} has uncommitted changes ({first}{}); commit or remove them first",
                self.workdir().display(),
                if dirty.len() > 1 {
                    format!(" and {} more", dirty.len() - 1)
                } else {
                    String::new()
                }
            );
        }
        Ok(accepted)
    }

    pub fn head(&self) -> Result<Option<Oid>> {
        match self.repo.head() {
            Ok(h) => Ok(h.target()),
            Err(e) if e.code() == git2::ErrorCode::UnbornBranch => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The blob at `path` in commit `oid`, if any.
    pub fn file_at(&self, oid: Oid, path: &str) -> Result<Option<Vec<u8>>> {
        file_at(&self.repo, oid, path)
    }

    /// Writes `bytes` to `rel_path` and commits it on the branch. Returns the full SHA.
    pub fn commit_file(&self, rel_path: &str, bytes: &[u8], message: &str) -> Result<Oid> {
        self.ensure_clean_but(Some((rel_path, bytes)))?;
        let full = self.workdir().join(rel_path);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&full, bytes).with_context(|| format!("writing {}", full.display()))?;
        let mut index = self.repo.index()?;
        index.add_path(Path::new(rel_path))?;
        index.write()?;
        let tree = self.repo.find_tree(index.write_tree()?)?;
        let parent = self.head()?.map(|o| self.repo.find_commit(o)).transpose()?;
        if let Some(p) = &parent {
            if p.tree_id() == tree.id() {
                bail!("committing {rel_path} would change nothing: it already holds these bytes");
            }
        }
        let sig = self.signature()?;
        let parents: Vec<&git2::Commit> = parent.iter().collect();
        let oid = self
            .repo
            .commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)?;
        Ok(oid)
    }

    /// HEAD, when it is a commit with the single parent `parent` whose message contains
    /// `message_has`: a commit this lab made in a step that was killed before recording it.
    pub fn interrupted_commit(&self, parent: Oid, message_has: &str) -> Result<Option<Oid>> {
        let Some(head) = self.head()? else {
            return Ok(None);
        };
        let commit = self.repo.find_commit(head)?;
        let ours = commit.parent_count() == 1
            && commit.parent_id(0)? == parent
            && commit.message().is_ok_and(|m| m.contains(message_has));
        Ok(ours.then_some(head))
    }

    /// Finishes a revert killed after its commit and before its checkout had finished: every
    /// uncommitted path must hold `previous`'s version (what the checkout was about to replace),
    /// HEAD's version (written, and the index not yet: the checkout writes the files first) or
    /// a prefix of it (a file cut short by the kill: the checkout truncates, then writes); then
    /// the working copy is checked out at HEAD. Each of these is in a commit, so nothing is
    /// lost. Anything else is refused, untouched.
    pub fn finish_checkout(&self, previous: Oid) -> Result<()> {
        let head = self
            .head()?
            .ok_or_else(|| anyhow!("nothing committed yet: no checkout to finish"))?;
        let left = self.refuse_changes_but(|path, here| {
            if here == self.file_at(previous, path)?.as_deref() {
                return Ok(true);
            }
            Ok(match (here, self.file_at(head, path)?) {
                (None, None) => true,
                (Some(h), Some(target)) => target.starts_with(h),
                _ => false,
            })
        })?;
        if left > 0 {
            // The index first: a checkout leaves alone an entry whose file already matches HEAD,
            // and a kill after the file write and before the index write left exactly that.
            let mut index = self.repo.index()?;
            index.read_tree(&self.repo.find_commit(head)?.tree()?)?;
            index.write()?;
            self.repo
                .checkout_head(Some(CheckoutBuilder::new().force()))?;
        }
        Ok(())
    }

    /// `git revert <bad>` on top of HEAD: a NEW commit whose tree undoes `bad`, with git's
    /// message ("Revert \"...\"" / `This reverts commit SHA.`). Returns its SHA.
    pub fn revert(&self, bad: Oid) -> Result<Oid> {
        self.ensure_clean()?;
        let bad_commit = self
            .repo
            .find_commit(bad)
            .with_context(|| format!("no commit {bad} to revert"))?;
        let head = self
            .head()?
            .ok_or_else(|| anyhow!("nothing committed yet: cannot revert"))?;
        let head_commit = self.repo.find_commit(head)?;
        let mut index = self
            .repo
            .revert_commit(&bad_commit, &head_commit, 0, None)?;
        if index.has_conflicts() {
            bail!("reverting {bad} conflicts with {head}; resolve by hand, never by rewriting history");
        }
        let tree = self.repo.find_tree(index.write_tree_to(&self.repo)?)?;
        let message = format!(
            "Revert \"{}\"\n\nThis reverts commit {}.\n",
            bad_commit.summary().ok().flatten().unwrap_or(""),
            bad
        );
        let sig = self.signature()?;
        let oid = self
            .repo
            .commit(Some("HEAD"), &sig, &sig, &message, &tree, &[&head_commit])?;
        self.repo
            .checkout_head(Some(CheckoutBuilder::new().force()))?;
        Ok(oid)
    }

    /// Pushes HEAD to `origin`'s branch, fast-forward only. A remote branch that is not an
    /// ancestor of HEAD is refused with a clear error; the remote is never force-updated.
    pub fn push(&self) -> Result<()> {
        let head = self
            .head()?
            .ok_or_else(|| anyhow!("nothing committed yet: nothing to push"))?;
        let remote_path = self
            .repo
            .find_remote(REMOTE)?
            .url()
            .unwrap_or("")
            .to_string();
        let remote_ref = format!("refs/heads/{}", self.branch);
        if let Ok(bare) = Repository::open(&remote_path) {
            if let Ok(r) = bare.find_reference(&remote_ref) {
                let theirs = r
                    .target()
                    .ok_or_else(|| anyhow!("{remote_ref} in {remote_path} is symbolic"))?;
                let ff = theirs == head
                    || (self.repo.find_commit(theirs).is_ok()
                        && self.repo.graph_descendant_of(head, theirs)?);
                if !ff {
                    bail!(
                        "refusing to push: {remote_ref} in {remote_path} is at {theirs}, which is not an \
                         ancestor of {head}; that push would rewrite history (fetch and rebuild on top instead)"
                    );
                }
            }
        }
        let rejected = std::cell::RefCell::new(None::<String>);
        let mut callbacks = RemoteCallbacks::new();
        callbacks.push_update_reference(|refname, status| {
            if let Some(msg) = status {
                *rejected.borrow_mut() = Some(format!("{refname}: {msg}"));
            }
            Ok(())
        });
        let mut opts = PushOptions::new();
        opts.remote_callbacks(callbacks);
        let refspec = format!("refs/heads/{0}:refs/heads/{0}", self.branch); // no '+': never forced
        self.repo
            .find_remote(REMOTE)?
            .push(&[&refspec], Some(&mut opts))
            .with_context(|| format!("pushing {} to {remote_path}", self.branch))?;
        drop(opts);
        if let Some(r) = rejected.into_inner() {
            bail!("push rejected by {remote_path}: {r}");
        }
        Ok(())
    }

    fn signature(&self) -> Result<Signature<'static>> {
        Ok(Signature::now(&self.name, &self.email)?)
    }
}

/// Which kind of repository a git directory is: the lock files a write takes differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepoKind {
    /// The working copy's `.git`.
    WorkingCopy,
    /// The bare repository the lab pushes to.
    Bare,
}

/// The lock files, relative to the git directory, that a Git write of the lab can leave behind
/// when it is killed (libgit2's `filebuf.c` creates `<file>.lock` with `O_EXCL`, keeps it open
/// while writing and renames it over `<file>`). Measured with strace on the lab's own commit,
/// push and revert (libgit2 1.9):
/// - working copy: `index.lock` (`commit_file`'s index write, the revert's checkout),
///   `refs/heads/<branch>.lock` (every commit), `refs/remotes/origin/<branch>.lock` (the push
///   updating the remote-tracking branch), `HEAD.lock` and `config.lock` (creating it);
/// - bare repository: `refs/heads/<branch>.lock` (the push), `HEAD.lock` and `config.lock`
///   (creating it);
/// - both: `packed-refs.lock`, which libgit2 takes only to delete or pack refs (never in the
///   lab's flow) and git when packing them (`git gc`, `git pack-refs`).
///
/// Reflogs are appended without a lock file. A push's pack arrives under unique temporary
/// names (`objects/pack/pack_git2_*`) that never block a later write: those are left alone.
pub fn lock_files(kind: RepoKind, branch: &str) -> Vec<String> {
    let mut files = vec![
        "HEAD.lock".to_string(),
        "config.lock".to_string(),
        "packed-refs.lock".to_string(),
        format!("refs/heads/{branch}.lock"),
    ];
    if kind == RepoKind::WorkingCopy {
        files.push("index.lock".into());
        files.push(format!("refs/remotes/{REMOTE}/{branch}.lock"));
    }
    files
}

/// Removes the lock files of [`lock_files`] present in `git_dir` that no live process holds;
/// returns them. `_lab` is the proof that no other cnpe-lab process works in this repository,
/// so a lock file nobody holds was left by a killed run of this lab. If a live process holds
/// any of them, nothing is removed and the error names the file and the process.
pub fn clear_stale_locks(
    git_dir: &Path,
    kind: RepoKind,
    branch: &str,
    _lab: &LabLock,
) -> Result<Vec<PathBuf>> {
    let present: Vec<PathBuf> = lock_files(kind, branch)
        .iter()
        .map(|f| git_dir.join(f))
        .filter(|p| p.symlink_metadata().is_ok())
        .collect();
    if present.is_empty() {
        return Ok(present);
    }
    let repo_dir = match kind {
        RepoKind::WorkingCopy => git_dir.parent().unwrap_or(git_dir),
        RepoKind::Bare => git_dir,
    };
    let processes = holders::scan()?;
    for lock in &present {
        let held_by = holders::live_holders(&processes, lock, repo_dir);
        if !held_by.is_empty() {
            let named: Vec<String> = held_by
                .iter()
                .map(|h| format!("pid {} ({}), which {}", h.pid, h.comm, h.how))
                .collect();
            bail!(
                "{} is held by a live process: {}; not removing it: wait for that process to \
                 finish (or end it), then run again",
                lock.display(),
                named.join("; ")
            );
        }
    }
    for lock in &present {
        std::fs::remove_file(lock)
            .with_context(|| format!("removing the stale lock file {}", lock.display()))?;
        eprintln!(
            "cnpe-lab: removed the stale lock file {} (no live process holds it: left by a killed run)",
            lock.display()
        );
    }
    Ok(present)
}

/// Who holds a Git lock file, found without its cooperation in `/proc`.
mod holders {
    use anyhow::{Context, Result};
    use std::path::{Path, PathBuf};

    /// One live process, as much of it as we may read.
    pub struct Process {
        pub pid: u32,
        pub comm: String,
        pub args: Vec<String>,
        pub cwd: Option<PathBuf>,
        /// What its file descriptors point at.
        pub open: Vec<PathBuf>,
    }

    /// A live process that holds a lock file, and how we know.
    pub struct Holder {
        pub pid: u32,
        pub comm: String,
        pub how: String,
    }

    /// Every process in `/proc`. Processes that end meanwhile, or that we may not inspect
    /// (another user's, when not root), are read as far as possible.
    pub fn scan() -> Result<Vec<Process>> {
        let entries = std::fs::read_dir("/proc")
            .context("reading /proc, needed to tell a stale Git lock file from a held one")?;
        let mut all = Vec::new();
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            let dir = entry.path();
            let Ok(comm) = std::fs::read_to_string(dir.join("comm")) else {
                continue; // ended meanwhile
            };
            let args = std::fs::read(dir.join("cmdline"))
                .map(|raw| {
                    raw.split(|b| *b == 0)
                        .filter(|a| !a.is_empty())
                        .map(|a| String::from_utf8_lossy(a).into_owned())
                        .collect()
                })
                .unwrap_or_default();
            let open = std::fs::read_dir(dir.join("fd"))
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|fd| std::fs::read_link(fd.path()).ok())
                .collect();
            all.push(Process {
                pid,
                comm: comm.trim_end().to_string(),
                args,
                cwd: std::fs::read_link(dir.join("cwd")).ok(),
                open,
            });
        }
        Ok(all)
    }

    /// A git command that may write the repository it runs in. git's own lock files are not
    /// always open while held (`git commit -a` closes `index.lock` while the editor runs), so
    /// such a command inside the repository counts as a holder. Serving a fetch (`git daemon`,
    /// `git upload-pack`, as the lab's git daemon does for Argo CD) writes nothing.
    pub fn is_writing_git(p: &Process) -> bool {
        let git = p.comm == "git" || p.comm.starts_with("git-");
        let serving = p.comm == "git-daemon"
            || p.comm.starts_with("git-upload-")
            || matches!(
                p.args.get(1).map(String::as_str),
                Some("upload-pack" | "upload-archive" | "daemon")
            );
        git && !serving
    }

    /// Every live process that has `lock` open (libgit2 and git keep it open while they write
    /// it) and every writing git command running inside `repo_dir`. All are named: a process
    /// that forked and has not yet exec'd also holds the parent's descriptors, and the user
    /// must see the real writer among them.
    pub fn live_holders(processes: &[Process], lock: &Path, repo_dir: &Path) -> Vec<Holder> {
        let lock = std::fs::canonicalize(lock).unwrap_or_else(|_| lock.to_path_buf());
        let repo = std::fs::canonicalize(repo_dir).unwrap_or_else(|_| repo_dir.to_path_buf());
        let holder = |p: &Process, how: String| Holder {
            pid: p.pid,
            comm: p.comm.clone(),
            how,
        };
        let open = processes
            .iter()
            .filter(|p| p.open.contains(&lock))
            .map(|p| holder(p, "has it open".into()));
        let writing = processes
            .iter()
            .filter(|p| !p.open.contains(&lock))
            .filter(|p| is_writing_git(p) && p.cwd.as_ref().is_some_and(|c| c.starts_with(&repo)))
            .map(|p| {
                holder(
                    p,
                    format!(
                        "is a git command running in {} ({})",
                        repo.display(),
                        p.args.join(" ")
                    ),
                )
            });
        open.chain(writing).collect()
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn process(comm: &str, args: &[&str]) -> Process {
            Process {
                pid: 1,
                comm: comm.into(),
                args: args.iter().map(|a| a.to_string()).collect(),
                cwd: None,
                open: Vec::new(),
            }
        }

        #[test]
        fn git_commands_that_write_count_and_fetch_servers_do_not() {
            for (comm, args, writes) in [
                ("git", &["git", "commit", "-a"][..], true),
                ("git", &["git", "-c", "a=b", "gc"][..], true),
                (
                    "git-receive-pac",
                    &["git-receive-pack", "/srv/bare"][..],
                    true,
                ),
                ("git", &["git", "upload-pack", "--strict", "."][..], false),
                ("git-upload-pack", &["git-upload-pack", "."][..], false),
                ("git-daemon", &["git-daemon", "--export-all"][..], false),
                ("git_flow-0e0857", &["git_flow-0e0857c4"][..], false),
                ("vim", &["vim", ".git/COMMIT_EDITMSG"][..], false),
            ] {
                assert_eq!(
                    is_writing_git(&process(comm, args)),
                    writes,
                    "{comm} {args:?}"
                );
            }
        }
    }
}

/// The blob at `path` in commit `oid` of `repo`, if any.
pub fn file_at(repo: &Repository, oid: Oid, path: &str) -> Result<Option<Vec<u8>>> {
    let tree = repo.find_commit(oid)?.tree()?;
    match tree.get_path(Path::new(path)) {
        Ok(entry) => Ok(Some(repo.find_blob(entry.id())?.content().to_vec())),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The tree id of directory `dir` in commit `oid`, if it exists.
pub fn subtree_id(repo: &Repository, oid: Oid, dir: &str) -> Result<Option<Oid>> {
    let tree = repo.find_commit(oid)?.tree()?;
    match tree.get_path(Path::new(dir)) {
        Ok(entry) => Ok(Some(entry.id())),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The commit's SHA as the records keep it (a SHA-1 Oid always displays as 40 lowercase hex).
pub fn sha_of(oid: Oid) -> Result<crate::sha::Sha> {
    Ok(crate::sha::Sha::parse(&oid.to_string())?)
}

pub fn parse_sha(sha: &str) -> Result<Oid> {
    if !crate::sha::is_full_sha(sha) {
        bail!("{sha:?} is not a full lowercase 40-hex SHA");
    }
    Ok(Oid::from_str(sha)?)
}
