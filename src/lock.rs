//! One cnpe-lab at a time: every command that changes lab state holds an exclusive lock on
//! `<evidence dir>/.cnpe-lab.lock` for as long as it runs.
//!
//! The lock is `flock(2)` (std's [`File::try_lock`]), owned by the open file: the kernel releases
//! it when the file is closed or the process dies in any way, so a crash never leaves a stale
//! lock and there is nothing to clean up. The file's content (the holder's pid and start time)
//! is only a hint for the message a second process prints; it is not a record and is rewritten
//! by every holder.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The lock file's name inside the evidence directory.
pub const LOCK_FILE: &str = ".cnpe-lab.lock";

/// Held while alive; dropping it (or the process ending) releases the lock.
#[derive(Debug)]
pub struct LabLock {
    file: File,
    path: PathBuf,
}

impl LabLock {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The locked file (for tests and diagnostics).
    pub fn file(&self) -> &File {
        &self.file
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another open file description holds the lock (another process, or this one).
    #[error("{}", held_message(path, *pid))]
    Held {
        /// The lock file.
        path: PathBuf,
        /// The holder's pid as it recorded it, if it could be read.
        pid: Option<u32>,
    },
    /// Creating, opening, locking or writing the lock file failed.
    #[error("lock file {}: {action}: {source}", path.display())]
    Io {
        path: PathBuf,
        action: &'static str,
        #[source]
        source: io::Error,
    },
}

fn held_message(path: &Path, pid: Option<u32>) -> String {
    let dir = path.parent().unwrap_or(path);
    match pid {
        Some(pid) => format!(
            "another cnpe-lab process (pid {pid}) is using {}; wait for it to finish",
            dir.display()
        ),
        None => format!(
            "another cnpe-lab process is using {}; wait for it to finish",
            dir.display()
        ),
    }
}

/// Takes the lab's exclusive lock without waiting. Creates `evidence_dir` if needed.
pub fn acquire(evidence_dir: &Path) -> Result<LabLock, LockError> {
    let path = evidence_dir.join(LOCK_FILE);
    let io_err = |action, source| LockError::Io {
        path: path.clone(),
        action,
        source,
    };
    std::fs::create_dir_all(evidence_dir).map_err(|e| io_err("creating its directory", e))?;
    // Never truncate on open: until we hold the lock, the content is the holder's.
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| io_err("opening", e))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let pid = read_pid(&mut file);
            return Err(LockError::Held { path, pid });
        }
        Err(TryLockError::Error(e)) => return Err(io_err("locking", e)),
    }
    let note = format!(
        "pid {}\nstarted {}\n",
        std::process::id(),
        chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    );
    (|| {
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        file.write_all(note.as_bytes())?;
        file.flush()
    })()
    .map_err(|e| io_err("recording the holder", e))?;
    Ok(LabLock { file, path })
}

/// The pid a holder wrote (`pid N` on the first line); `None` if absent or unreadable (a holder
/// that has locked but not yet written, or a foreign file).
fn read_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.take(4096).read_to_string(&mut text).ok()?;
    text.lines()
        .next()?
        .strip_prefix("pid ")?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_the_holder_and_releases_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let ev = dir.path().join("cnpe");
        let lock = acquire(&ev).unwrap();
        assert_eq!(lock.path(), ev.join(LOCK_FILE));
        let text = std::fs::read_to_string(lock.path()).unwrap();
        assert!(
            text.starts_with(&format!("pid {}\nstarted ", std::process::id())),
            "{text}"
        );
        drop(lock);
        acquire(&ev).unwrap();
    }

    #[test]
    fn held_message_without_a_pid() {
        let e = LockError::Held {
            path: "/root/cnpe/.cnpe-lab.lock".into(),
            pid: None,
        };
        assert_eq!(
            e.to_string(),
            "another cnpe-lab process is using /root/cnpe; wait for it to finish"
        );
    }
}
