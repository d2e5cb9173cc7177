//! The lab lock against other holders: this process, another process, and a process that dies.

use cnpe_lab::lock::{acquire, LockError, LOCK_FILE};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The tests of this file run one at a time: flock(2) locks belong to the open file
/// description, which a child forked by a parallel test shares until its exec, so a lock
/// dropped in one test can still be held for a moment by another test's child (this flaked
/// in CI once).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A separate process that takes the same flock(2) lock (python's fcntl.flock is flock(2), like
/// std's File::lock on Linux), optionally writes its pid, says "locked", then waits for stdin to
/// close.
fn holder(lock_file: &Path, write_pid: bool) -> Child {
    let program = r#"
import fcntl, os, sys
f = open(sys.argv[1], "a+")
fcntl.flock(f.fileno(), fcntl.LOCK_EX)
if sys.argv[2] == "1":
    f.truncate(0)
    f.write("pid %d\nstarted whenever\n" % os.getpid())
    f.flush()
print("locked", flush=True)
sys.stdin.read()
"#;
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(program)
        .arg(lock_file)
        .arg(if write_pid { "1" } else { "0" })
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "locked\n");
    child
}

#[test]
fn a_second_acquire_in_the_same_process_is_held_by_us() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let first = acquire(dir.path()).unwrap();
    let err = acquire(dir.path()).unwrap_err();
    match &err {
        LockError::Held { path, pid } => {
            assert_eq!(path, &dir.path().join(LOCK_FILE));
            assert_eq!(*pid, Some(std::process::id()));
        }
        other => panic!("expected Held, got {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        format!(
            "another cnpe-lab process (pid {}) is using {}; wait for it to finish",
            std::process::id(),
            dir.path().display()
        )
    );
    drop(first);
    acquire(dir.path()).unwrap();
}

#[test]
fn another_process_holding_it_is_named_and_its_death_releases_it() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let ev = dir.path().join("cnpe");
    std::fs::create_dir(&ev).unwrap();
    let mut child = holder(&ev.join(LOCK_FILE), true);
    match acquire(&ev) {
        Err(LockError::Held { pid, .. }) => assert_eq!(pid, Some(child.id())),
        other => panic!("expected Held, got {other:?}"),
    }
    // A crash (SIGKILL: no cleanup code runs) leaves no stale lock: the kernel released it.
    child.kill().unwrap();
    child.wait().unwrap();
    let lock = acquire(&ev).unwrap();
    let text = std::fs::read_to_string(lock.path()).unwrap();
    assert!(
        text.starts_with(&format!("pid {}\n", std::process::id())),
        "{text}"
    );
}

#[test]
fn a_holder_that_wrote_no_pid_is_still_a_holder() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let lock_file = dir.path().join(LOCK_FILE);
    std::fs::write(&lock_file, "").unwrap();
    let mut child = holder(&lock_file, false);
    let err = acquire(dir.path()).unwrap_err();
    assert!(matches!(err, LockError::Held { pid: None, .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "another cnpe-lab process is using {}; wait for it to finish",
            dir.path().display()
        )
    );
    // Closing stdin ends the holder normally; the lock goes with it.
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    acquire(dir.path()).unwrap();
}

#[test]
fn a_stale_pid_in_an_unlocked_file_does_not_block() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(LOCK_FILE),
        "pid 1\nstarted 1970-01-01T00:00:00Z\n",
    )
    .unwrap();
    let lock = acquire(dir.path()).unwrap();
    let text = std::fs::read_to_string(lock.path()).unwrap();
    assert!(
        text.starts_with(&format!("pid {}\n", std::process::id())),
        "{text}"
    );
    assert!(!text.contains("1970"), "old note replaced entirely: {text}");
}

#[test]
fn io_errors_name_the_path() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    // The evidence "directory" is a regular file.
    let not_a_dir = dir.path().join("cnpe");
    std::fs::write(&not_a_dir, "x").unwrap();
    let err = acquire(&not_a_dir).unwrap_err();
    assert!(matches!(err, LockError::Io { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains(&not_a_dir.join(LOCK_FILE).display().to_string()),
        "{err}"
    );
}
