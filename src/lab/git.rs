//! The lab's Git side, with git2: prepare the working copy and its bare remote, commit the
//! release, push fast-forward only, revert. History is never rewritten: there is no force push
//! and no reset anywhere in this module, and a push that would not fast-forward is refused.

use crate::config::Config;
use anyhow::{anyhow, bail, Context, Result};
use git2::{
    build::CheckoutBuilder, Oid, PushOptions, RemoteCallbacks, Repository, RepositoryInitOptions,
    Signature,
};
use std::path::Path;

pub const REMOTE: &str = "origin";

/// The working copy of the lab, with `origin` pointing at the bare repository.
pub struct GitOps {
    pub repo: Repository,
    branch: String,
    name: String,
    email: String,
}

/// Opens the bare repository, creating it when missing. A path that exists but is not a bare
/// repository (a file, a working copy, an unrelated directory) is an error naming it.
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
    let mut opts = RepositoryInitOptions::new();
    opts.bare(true).initial_head(branch).mkpath(true);
    Repository::init_opts(path, &opts)
        .with_context(|| format!("creating bare repository {}", path.display()))
}

impl GitOps {
    /// Opens the working copy, creating it (with `origin` = the bare repo) when missing. An
    /// existing working copy must already have `origin`: we never guess a remote for it.
    pub fn prepare(cfg: &Config) -> Result<Self> {
        ensure_bare(&cfg.bare_repo, &cfg.branch)?;
        let dir = &cfg.gitops_dir;
        let repo = if dir.join(".git").exists() {
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
            let mut opts = RepositoryInitOptions::new();
            opts.initial_head(&cfg.branch).mkpath(true);
            let repo = Repository::init_opts(dir, &opts)
                .with_context(|| format!("creating {}", dir.display()))?;
            let url = cfg
                .bare_repo
                .to_str()
                .ok_or_else(|| anyhow!("CNPE_BARE_REPO is not UTF-8"))?;
            repo.remote(REMOTE, url)?;
            repo
        };
        Ok(Self {
            repo,
            branch: cfg.branch.clone(),
            name: cfg.git_name.clone(),
            email: cfg.git_email.clone(),
        })
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
    /// write (a crash there must not block the resume). Any other content is still refused.
    fn ensure_clean_but(&self, own: Option<(&str, &[u8])>) -> Result<()> {
        self.refuse_changes_but(|path, here| {
            Ok(own.is_some_and(|(rel, bytes)| path == rel && here == Some(bytes)))
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

    /// Finishes a revert killed after its commit and before its checkout: every uncommitted
    /// path must still hold `previous`'s version (what the checkout was about to replace);
    /// then the working copy is checked out at HEAD. Anything else is refused, untouched.
    pub fn finish_checkout(&self, previous: Oid) -> Result<()> {
        let left = self.refuse_changes_but(|path, here| {
            Ok(here == self.file_at(previous, path)?.as_deref())
        })?;
        if left > 0 {
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

pub fn parse_sha(sha: &str) -> Result<Oid> {
    if !crate::sha::is_full_sha(sha) {
        bail!("{sha:?} is not a full lowercase 40-hex SHA");
    }
    Ok(Oid::from_str(sha)?)
}
