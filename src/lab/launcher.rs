//! Step 8's deliverable where the lab's grader looks for it: `<evidence dir>/release-gate.py`.
//!
//! There is ONE gate, the compiled Rust one ([`crate::release_gate`], `src/bin/release-gate.rs`). The
//! installed Python file is only a launcher: it hands its three arguments, unchanged, to a copy of
//! that binary at `<evidence dir>/bin/release-gate` and exits with its status. It interprets
//! nothing, so there is no second implementation of the contract to drift from the first.
//!
//! Both files are installed write-once, like every record: the same bytes again is a no-op,
//! different bytes are refused naming the file, nothing is ever overwritten. Each appears
//! atomically and complete with mode 0755 (written and chmod-ed under a temporary name, then
//! linked into place without clobbering).

use crate::records::WriteOutcome;
use anyhow::{anyhow, bail, Context, Result};
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Environment variable naming the compiled gate explicitly (checked before the search).
pub const GATE_BIN_ENV: &str = "CNPE_RELEASE_GATE_BIN";
/// The launcher's file name in the evidence directory (what the grader executes).
pub const SCRIPT_NAME: &str = "release-gate.py";
/// The installed gate binary, relative to the evidence directory (and to the launcher).
pub const BINARY_REL: &str = "bin/release-gate";
/// Mode of both installed files.
pub const MODE: u32 = 0o755;

/// What [`install`] put in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// `<dir>/release-gate.py`
    pub script: PathBuf,
    /// `<dir>/bin/release-gate`
    pub binary: PathBuf,
    pub script_outcome: WriteOutcome,
    pub binary_outcome: WriteOutcome,
}

/// Installs `<evidence_dir>/bin/release-gate` (a copy of `gate_binary`) and
/// `<evidence_dir>/release-gate.py` (the launcher), both 0755, write-once.
///
/// The binary is installed first, so a launcher in place always has its gate next to it (unless
/// someone deletes it later, which the launcher reports as an error, never as an approval).
pub fn install(evidence_dir: &Path, gate_binary: &Path) -> Result<Installed> {
    let bytes = fs::read(gate_binary).with_context(|| {
        format!(
            "reading the compiled release gate {}",
            gate_binary.display()
        )
    })?;
    if bytes.is_empty() {
        bail!(
            "{} is empty: not a release-gate binary",
            gate_binary.display()
        );
    }
    let binary = evidence_dir.join(BINARY_REL);
    let script = evidence_dir.join(SCRIPT_NAME);
    let binary_outcome = write_once_executable(&binary, &bytes)?;
    let script_outcome = write_once_executable(&script, launcher_source(&binary).as_bytes())?;
    Ok(Installed {
        script,
        binary,
        script_outcome,
        binary_outcome,
    })
}

/// The launcher's source. `installed_binary` is baked in as a fallback only, for when the script
/// was copied away from its `bin/` directory; the primary location is always relative to the
/// script's own real path.
pub fn launcher_source(installed_binary: &Path) -> String {
    LAUNCHER_TEMPLATE.replace(
        "@INSTALLED_BINARY@",
        &python_bytes_literal(installed_binary),
    )
}

/// `b"..."` with every byte outside printable ASCII (and `"` / `\`) hex-escaped, so any Unix
/// path (even non-UTF-8) round-trips exactly and nothing in it can end the literal.
fn python_bytes_literal(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::from("b\"");
    for &b in path.as_os_str().as_bytes() {
        if (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\' {
            out.push(b as char);
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out.push('"');
    out
}

const LAUNCHER_TEMPLATE: &str = r#"#!/usr/bin/env python3
"""release-gate.py STATE_JSON EXPECTED_FULL_SHA EXPECTED_BODY

Launcher installed by cnpe-lab. The release gate itself is the compiled cnpe-lab `release-gate`
in bin/ next to this file: its three arguments are handed over unchanged and its exit status is
this script's (0 approved, 1 rejected, 2 unreadable input). This file interprets nothing. Any
launcher failure is a one-line message on stderr and exit 2, never 0.
"""
import errno
import os
import sys
import time

USAGE = "usage: release-gate.py STATE_JSON EXPECTED_FULL_SHA EXPECTED_BODY"
INSTALLED_BINARY = @INSTALLED_BINARY@


def fail(message):
    sys.stderr.write("release-gate.py: %s\n" % message)
    sys.stderr.flush()
    return 2


def show(path):
    return os.fsdecode(path)


def main():
    args = sys.argv[1:]
    if len(args) != 3:
        return fail("expected exactly 3 arguments, got %d; %s" % (len(args), USAGE))
    here = os.path.dirname(os.path.realpath(os.fsencode(__file__)))
    gate = os.path.join(here, b"bin", b"release-gate")
    if not os.path.exists(gate) and os.path.exists(INSTALLED_BINARY):
        gate = INSTALLED_BINARY
    if not os.path.isfile(gate):
        return fail("the release gate binary %s is missing; reinstall it with cnpe-lab" % show(gate))
    if not os.access(gate, os.X_OK):
        return fail("the release gate binary %s is not executable" % show(gate))
    # Exactly the bytes we were given; "--" ends option parsing, so an argument such as
    # "--help" or "-h" is a value to check, never an option of the gate.
    argv = [gate, b"--"] + [os.fsencode(a) for a in args]
    for _ in range(100):
        try:
            os.execv(gate, argv)
        except OSError as e:
            # A file just installed by another thread may still be open for writing in a
            # forked child for a moment: retry that, report anything else.
            if e.errno == errno.ETXTBSY:
                time.sleep(0.02)
                continue
            return fail("cannot run the release gate %s: %s" % (show(gate), e.strerror or e))
    return fail("cannot run the release gate %s: text file busy" % show(gate))


if __name__ == "__main__":
    try:
        code = main()
    except Exception as e:  # never let a launcher bug look like anything but a failure
        code = fail("launcher error: %s" % type(e).__name__)
    sys.exit(code)
"#;

/// Creates `path` with `bytes` and mode 0755, or confirms it already holds exactly these bytes
/// (then only the mode is made 0755 again). Refuses, naming the file, to replace different
/// content. The file is complete and executable before its name appears.
pub fn write_once_executable(path: &Path, bytes: &[u8]) -> Result<WriteOutcome> {
    match fs::read(path) {
        Ok(existing) if existing == bytes => {
            fs::set_permissions(path, fs::Permissions::from_mode(MODE))
                .with_context(|| format!("setting mode 0755 on {}", path.display()))?;
            return Ok(WriteOutcome::AlreadyRecorded);
        }
        Ok(_) => bail!(
            "{} already exists with different content; installed files are write-once (remove it or reset the lab to reinstall)",
            path.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(dir).with_context(|| format!("creating directory {}", dir.display()))?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}.tmp-"))
        .tempfile_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    tmp.write_all(bytes)
        .with_context(|| format!("writing {}", tmp.path().display()))?;
    tmp.as_file()
        .set_permissions(fs::Permissions::from_mode(MODE))
        .with_context(|| format!("setting mode 0755 on {}", tmp.path().display()))?;
    tmp.as_file()
        .sync_all()
        .with_context(|| format!("syncing {}", tmp.path().display()))?;
    match tmp.persist_noclobber(path) {
        Ok(_) => Ok(WriteOutcome::Created),
        // Someone created it between our check and the link: compare again, never replace.
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {
            write_once_executable(path, bytes)
        }
        Err(e) => Err(e.error).with_context(|| format!("creating {}", path.display())),
    }
}

/// The compiled `release-gate`: `$CNPE_RELEASE_GATE_BIN` if set, else next to the current
/// executable (`target/debug/`), or one level up (test binaries live in `target/debug/deps/`).
pub fn gate_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the current executable")?;
    gate_binary_from(std::env::var_os(GATE_BIN_ENV).map(PathBuf::from), &exe)
}

/// [`gate_binary`] with its inputs explicit.
pub fn gate_binary_from(explicit: Option<PathBuf>, current_exe: &Path) -> Result<PathBuf> {
    if let Some(p) = explicit.filter(|p| !p.as_os_str().is_empty()) {
        if p.is_file() {
            return Ok(p);
        }
        bail!(
            "{GATE_BIN_ENV}={} is not a file (build it with `cargo build --bin release-gate`)",
            p.display()
        );
    }
    let mut tried = Vec::new();
    let dir = current_exe.parent();
    for candidate in [dir, dir.and_then(Path::parent)]
        .into_iter()
        .flatten()
        .map(|d| d.join("release-gate"))
    {
        if candidate.is_file() {
            return Ok(candidate);
        }
        tried.push(candidate.display().to_string());
    }
    Err(anyhow!(
        "the compiled release gate was not found (tried {}); run `cargo build --bin release-gate` or set {GATE_BIN_ENV}",
        tried.join(", ")
    ))
}

/// Runs `python3 SCRIPT STATE SHA BODY` as its own process, exactly as the lab's grader does.
pub fn run_py(script: &Path, state: &Path, sha: &str, body: &str) -> Result<Output> {
    Command::new("python3")
        .arg(script)
        .arg(state)
        .arg(sha)
        .arg(body)
        .output()
        .with_context(|| format!("running python3 {}", script.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_literal_escapes_everything_that_could_end_it() {
        use std::os::unix::ffi::OsStrExt;
        let p = Path::new(std::ffi::OsStr::from_bytes(b"/a b/\"q\"\\x/\n/\xff"));
        assert_eq!(
            python_bytes_literal(p),
            r#"b"/a b/\x22q\x22\x5cx/\x0a/\xff""#
        );
    }

    #[test]
    fn gate_binary_search_names_what_it_tried() {
        let dir = tempfile::tempdir().unwrap();
        let deps = dir.path().join("deps");
        fs::create_dir(&deps).unwrap();
        let exe = deps.join("launcher-abc123");
        let err = gate_binary_from(None, &exe).unwrap_err().to_string();
        assert!(err.contains("cargo build --bin release-gate"), "{err}");
        assert!(
            err.contains(&deps.join("release-gate").display().to_string()),
            "{err}"
        );
        fs::write(dir.path().join("release-gate"), b"x").unwrap();
        assert_eq!(
            gate_binary_from(None, &exe).unwrap(),
            dir.path().join("release-gate")
        );
        fs::write(deps.join("release-gate"), b"x").unwrap();
        assert_eq!(
            gate_binary_from(None, &exe).unwrap(),
            deps.join("release-gate")
        );
        let err = gate_binary_from(Some(dir.path().join("nope")), &exe)
            .unwrap_err()
            .to_string();
        assert!(err.contains(GATE_BIN_ENV) && err.contains("nope"), "{err}");
    }
}
