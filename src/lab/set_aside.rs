//! Setting an earlier cluster's run aside, intact: its evidence directory's files, its working
//! copy and its bare repository move into dated folders beside them (renames on the same
//! filesystem: nothing is copied, rewritten or deleted, and nothing is moved over an existing
//! name). `cluster.json` moves last, so a run killed midway finds it still naming the earlier
//! cluster and finishes the move into the same folders.

use crate::lab::standing::aside_name;
use crate::records::Record;
use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};

/// Where the earlier run's parts went (`None`: that part did not exist).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetAside {
    pub evidence: PathBuf,
    pub gitops: Option<PathBuf>,
    pub bare: Option<PathBuf>,
}

impl SetAside {
    /// The folders, for the one line a run says.
    pub fn describe(&self) -> String {
        let mut parts = vec![format!("records in {}", self.evidence.display())];
        if let Some(g) = &self.gitops {
            parts.push(format!("working copy in {}", g.display()));
        }
        if let Some(b) = &self.bare {
            parts.push(format!("bare repository in {}", b.display()));
        }
        parts.join(", ")
    }
}

/// Moves the run recorded at `recorded_at` aside: the bare repository, the working copy, then
/// every file of `evidence_dir` but the lab's lock (held by this run), `cluster.json` last.
pub fn set_aside(
    evidence_dir: &Path,
    gitops_dir: &Path,
    bare_repo: &Path,
    recorded_at: &str,
) -> Result<SetAside> {
    let bare = move_beside(bare_repo, recorded_at)?;
    let gitops = move_beside(gitops_dir, recorded_at)?;
    let target = beside(evidence_dir, recorded_at)?;
    std::fs::create_dir_all(&target).with_context(|| {
        format!(
            "creating {} for the earlier run's records",
            target.display()
        )
    })?;
    let (lock, cluster) = (Record::Lock.file(), Record::Cluster.file());
    let mut names: Vec<_> = std::fs::read_dir(evidence_dir)
        .with_context(|| format!("reading {}", evidence_dir.display()))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<std::io::Result<_>>()
        .with_context(|| format!("reading {}", evidence_dir.display()))?;
    names.retain(|n| n != lock && n != cluster);
    names.sort();
    for name in names
        .iter()
        .map(PathBuf::from)
        .chain([PathBuf::from(cluster)])
    {
        let from = evidence_dir.join(&name);
        if from.symlink_metadata().is_err() {
            continue;
        }
        rename_new(&from, &target.join(&name))?;
    }
    Ok(SetAside {
        evidence: target,
        gitops,
        bare,
    })
}

/// `path`'s dated name beside it.
fn beside(path: &Path, recorded_at: &str) -> Result<PathBuf> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| anyhow!("{} has no name to set aside under", path.display()))?;
    let parent = path
        .parent()
        .ok_or_else(|| anyhow!("{} has no parent directory", path.display()))?;
    Ok(parent.join(aside_name(name, recorded_at)))
}

/// Renames a whole directory to its dated name; `None` when there is none (never created, or
/// already moved by an interrupted run: then its folder is returned).
fn move_beside(path: &Path, recorded_at: &str) -> Result<Option<PathBuf>> {
    let target = beside(path, recorded_at)?;
    if path.symlink_metadata().is_err() {
        return Ok(target.exists().then_some(target));
    }
    rename_new(path, &target)?;
    Ok(Some(target))
}

/// A rename that never replaces: the lab's lock keeps other cnpe-lab processes out, so checking
/// first is enough.
fn rename_new(from: &Path, to: &Path) -> Result<()> {
    if to.symlink_metadata().is_ok() {
        bail!(
            "cannot set {} aside: {} already exists (nothing was moved over it; move one of them by hand)",
            from.display(),
            to.display()
        );
    }
    std::fs::rename(from, to).with_context(|| {
        format!(
            "moving {} to {} (set aside on the same filesystem, never copied)",
            from.display(),
            to.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    const AT: &str = "2026-12-05T10:15:00.123Z";

    fn earlier_run(root: &Path) -> (PathBuf, PathBuf, PathBuf) {
        let (ev, wc, bare) = (
            root.join("cnpe"),
            root.join("gitops"),
            root.join("bare/app.git"),
        );
        fs::create_dir_all(ev.join("bin")).unwrap();
        fs::write(ev.join("failed.json"), "outage\n").unwrap();
        fs::write(ev.join("bin/release-gate"), "gate").unwrap();
        fs::write(ev.join(Record::Cluster.file()), "cluster\n").unwrap();
        fs::write(ev.join(Record::Lock.file()), "pid 1\n").unwrap();
        fs::create_dir_all(wc.join(".git")).unwrap();
        fs::write(wc.join("release.json"), "{}").unwrap();
        fs::create_dir_all(&bare).unwrap();
        fs::write(bare.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        (ev, wc, bare)
    }

    #[test]
    fn everything_moves_intact_into_dated_folders_beside_it_but_the_lock() {
        let root = tempfile::tempdir().unwrap();
        let (ev, wc, bare) = earlier_run(root.path());
        let moved = set_aside(&ev, &wc, &bare, AT).unwrap();
        let stamp = "earlier-20261205T101500Z";
        assert_eq!(moved.evidence, root.path().join(format!("cnpe.{stamp}")));
        assert_eq!(
            moved.gitops,
            Some(root.path().join(format!("gitops.{stamp}")))
        );
        assert_eq!(
            moved.bare,
            Some(root.path().join(format!("bare/app.git.{stamp}")))
        );
        assert_eq!(
            fs::read(moved.evidence.join("failed.json")).unwrap(),
            b"outage\n"
        );
        assert_eq!(
            fs::read(moved.evidence.join("bin/release-gate")).unwrap(),
            b"gate"
        );
        assert!(moved.evidence.join(Record::Cluster.file()).exists());
        assert!(moved.gitops.unwrap().join("release.json").exists());
        assert!(moved.bare.unwrap().join("HEAD").exists());
        // Only the lock (held by this run) stays; the working copy and bare repo are gone.
        let left: Vec<_> = fs::read_dir(&ev)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, [Record::Lock.file()]);
        assert!(!wc.exists() && !bare.exists());
    }

    #[test]
    fn an_interrupted_move_finishes_into_the_same_folders() {
        let root = tempfile::tempdir().unwrap();
        let (ev, wc, bare) = earlier_run(root.path());
        // Killed after the bare repository and one record had moved.
        let first = move_beside(&bare, AT).unwrap().unwrap();
        let target = beside(&ev, AT).unwrap();
        fs::create_dir_all(&target).unwrap();
        fs::rename(ev.join("failed.json"), target.join("failed.json")).unwrap();
        let moved = set_aside(&ev, &wc, &bare, AT).unwrap();
        assert_eq!(moved.bare, Some(first));
        assert_eq!(fs::read(target.join("failed.json")).unwrap(), b"outage\n");
        assert!(target.join("bin/release-gate").exists());
        assert!(target.join(Record::Cluster.file()).exists());
    }

    #[test]
    fn nothing_is_moved_over_an_existing_name() {
        let root = tempfile::tempdir().unwrap();
        let (ev, wc, bare) = earlier_run(root.path());
        let target = beside(&ev, AT).unwrap();
        fs::create_dir_all(&target).unwrap();
        fs::write(target.join("failed.json"), "another run's outage\n").unwrap();
        let err = format!("{:#}", set_aside(&ev, &wc, &bare, AT).unwrap_err());
        assert!(
            err.contains("failed.json") && err.contains("already exists"),
            "{err}"
        );
        assert_eq!(
            fs::read(target.join("failed.json")).unwrap(),
            b"another run's outage\n"
        );
        assert_eq!(fs::read(ev.join("failed.json")).unwrap(), b"outage\n");
        // cluster.json moves last: it still names the earlier cluster.
        assert!(ev.join(Record::Cluster.file()).exists());
    }
}
