//! `release-gate.py` as the lab's grader runs it: `python3 <dir>/release-gate.py STATE SHA BODY`.
//! The launcher must give exactly the compiled gate's verdict and fail closed on its own errors.

use cnpe_lab::lab::launcher::{self, install, run_py, Installed};
use cnpe_lab::records::WriteOutcome;
use serde_json::{json, Value};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const SHA: &str = "3b18e512dba79e4c8300dd08aeb37f8e728b8dad";
const OTHER_SHA: &str = "4c29f623ecb80f5d9411ee19bfc48f9f839c9ebe";
const BODY: &str = "labhub-cnpe-v1";
const GATE: &str = env!("CARGO_BIN_EXE_release-gate");

fn valid() -> Value {
    json!({
        "observed_at": "2026-12-02T15:04:05Z",
        "target_revision": SHA,
        "observed_revision": SHA,
        "sync": "Synced",
        "health": "Healthy",
        "generation": 3,
        "observed_generation": 3,
        "replicas": 1,
        "updated": 1,
        "ready": 1,
        "available": 1,
        "ready_endpoints": 1,
        "progress_deadline_exceeded": false,
        "http_code": 200,
        "http_body": BODY,
        "http_error": null
    })
}

fn with(field: &str, value: Option<Value>) -> Value {
    let mut v = valid();
    let m = v.as_object_mut().unwrap();
    match value {
        Some(x) => m.insert(field.into(), x),
        None => m.remove(field),
    };
    v
}

struct Lab {
    dir: tempfile::TempDir,
    installed: Installed,
}

impl Lab {
    /// Installs from a private copy of the gate, so a test may delete or chmod it.
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src-release-gate");
        fs::copy(GATE, &src).unwrap();
        let installed = install(&dir.path().join("cnpe"), &src).unwrap();
        Lab { dir, installed }
    }
    fn state(&self, name: &str, v: &Value) -> PathBuf {
        let p = self.dir.path().join(name);
        fs::write(&p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
        p
    }
    fn py(&self, state: &Path, sha: &str, body: &str) -> Output {
        run_py(&self.installed.script, state, sha, body).unwrap()
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn binary(state: &Path, sha: &str, body: &str) -> Output {
    Command::new(GATE)
        .arg(state)
        .arg(sha)
        .arg(body)
        .output()
        .unwrap()
}

#[test]
fn installs_both_files_executable() {
    let lab = Lab::new();
    let i = &lab.installed;
    assert_eq!(
        (i.script_outcome, i.binary_outcome),
        (WriteOutcome::Created, WriteOutcome::Created)
    );
    assert_eq!(i.script, lab.dir.path().join("cnpe/release-gate.py"));
    assert_eq!(i.binary, lab.dir.path().join("cnpe/bin/release-gate"));
    for p in [&i.script, &i.binary] {
        assert_eq!(
            fs::metadata(p).unwrap().permissions().mode() & 0o7777,
            0o755,
            "{}",
            p.display()
        );
    }
    assert_eq!(fs::read(&i.binary).unwrap(), fs::read(GATE).unwrap());
    // No temporary files left behind.
    let mut names: Vec<_> = fs::read_dir(lab.dir.path().join("cnpe"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["bin", "release-gate.py"]);
    assert_eq!(
        fs::read_dir(lab.dir.path().join("cnpe/bin"))
            .unwrap()
            .count(),
        1
    );
}

#[test]
fn approves_a_serving_state_and_leaves_the_state_file_alone() {
    let lab = Lab::new();
    let state = lab.state("good.json", &valid());
    let before = (
        fs::read(&state).unwrap(),
        fs::metadata(&state).unwrap().modified().unwrap(),
    );
    let o = lab.py(&state, SHA, BODY);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("APPROVED"), "{}", text(&o));
    let after = (
        fs::read(&state).unwrap(),
        fs::metadata(&state).unwrap().modified().unwrap(),
    );
    assert_eq!(before, after);
}

#[test]
fn rejects_with_the_gates_own_lines() {
    let lab = Lab::new();
    let state = lab.state("bad.json", &with("ready_endpoints", Some(json!(true))));
    let o = lab.py(&state, SHA, BODY);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let direct = binary(&state, SHA, BODY);
    assert_eq!(
        (o.stdout.clone(), o.stderr.clone()),
        (direct.stdout, direct.stderr)
    );
    assert!(
        text(&o).contains("release-gate: REJECTED ready_endpoints: must be the JSON integer 1"),
        "{}",
        text(&o)
    );
}

#[test]
fn wrong_argument_count_is_a_usage_error() {
    let lab = Lab::new();
    let state = lab.state("good.json", &valid());
    let s = state.to_str().unwrap();
    for args in [vec![], vec![s], vec![s, SHA], vec![s, SHA, BODY, "extra"]] {
        let o = Command::new("python3")
            .arg(&lab.installed.script)
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(
            text(&o).contains(&format!("expected exactly 3 arguments, got {}", args.len())),
            "{}",
            text(&o)
        );
        assert!(o.stdout.is_empty());
    }
}

#[test]
fn a_deleted_binary_fails_closed_naming_it() {
    let lab = Lab::new();
    let state = lab.state("good.json", &valid());
    fs::remove_file(&lab.installed.binary).unwrap();
    let o = lab.py(&state, SHA, BODY);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains(&lab.installed.binary.display().to_string()) && t.contains("missing"),
        "{t}"
    );
    assert_eq!(t.lines().count(), 1, "one line: {t}");
}

#[test]
fn a_non_executable_binary_fails_closed() {
    let lab = Lab::new();
    let state = lab.state("good.json", &valid());
    fs::set_permissions(&lab.installed.binary, fs::Permissions::from_mode(0o644)).unwrap();
    let o = lab.py(&state, SHA, BODY);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("not executable"), "{}", text(&o));
}

#[test]
fn a_binary_that_cannot_be_executed_fails_closed() {
    let lab = Lab::new();
    let state = lab.state("good.json", &valid());
    // Executable bit set, but not a program: execv fails with ENOEXEC.
    fs::remove_file(&lab.installed.binary).unwrap();
    fs::write(&lab.installed.binary, b"\x00\x01garbage").unwrap();
    fs::set_permissions(&lab.installed.binary, fs::Permissions::from_mode(0o755)).unwrap();
    let o = lab.py(&state, SHA, BODY);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("cannot run the release gate"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_gate_killed_by_a_signal_is_not_an_approval() {
    let lab = Lab::new();
    let state = lab.state("good.json", &valid());
    fs::remove_file(&lab.installed.binary).unwrap();
    fs::write(&lab.installed.binary, "#!/bin/sh\nkill -9 $$\n").unwrap();
    fs::set_permissions(&lab.installed.binary, fs::Permissions::from_mode(0o755)).unwrap();
    let o = lab.py(&state, SHA, BODY);
    assert!(!o.status.success(), "{}", text(&o));
}

#[test]
fn reinstalling_the_same_binary_is_a_no_op() {
    let lab = Lab::new();
    let src = lab.dir.path().join("src-release-gate");
    let dir = lab.dir.path().join("cnpe");
    let mtimes = |i: &Installed| {
        [&i.script, &i.binary].map(|p| fs::metadata(p).unwrap().modified().unwrap())
    };
    let before = mtimes(&lab.installed);
    let again = install(&dir, &src).unwrap();
    assert_eq!(
        (again.script_outcome, again.binary_outcome),
        (WriteOutcome::AlreadyRecorded, WriteOutcome::AlreadyRecorded)
    );
    assert_eq!(mtimes(&again), before);
}

#[test]
fn a_different_existing_launcher_is_refused_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("release-gate.py");
    fs::write(&script, "#!/usr/bin/env python3\nprint('my own gate')\n").unwrap();
    let err = format!("{:#}", install(dir.path(), Path::new(GATE)).unwrap_err());
    assert!(err.contains(&script.display().to_string()), "{err}");
    assert_eq!(
        fs::read_to_string(&script).unwrap(),
        "#!/usr/bin/env python3\nprint('my own gate')\n"
    );
}

#[test]
fn a_different_existing_binary_is_refused_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin/release-gate");
    fs::create_dir_all(bin.parent().unwrap()).unwrap();
    fs::write(&bin, b"older gate").unwrap();
    let err = format!("{:#}", install(dir.path(), Path::new(GATE)).unwrap_err());
    assert!(err.contains(&bin.display().to_string()), "{err}");
    assert_eq!(fs::read(&bin).unwrap(), b"older gate");
    assert!(
        !dir.path().join("release-gate.py").exists(),
        "no launcher without its gate"
    );
}

#[test]
fn the_installed_gate_is_a_copy() {
    let lab = Lab::new();
    fs::remove_file(lab.dir.path().join("src-release-gate")).unwrap();
    let state = lab.state("good.json", &valid());
    assert_eq!(lab.py(&state, SHA, BODY).status.code(), Some(0));
}

#[test]
fn a_symlink_to_the_launcher_still_finds_its_gate() {
    let lab = Lab::new();
    let state = lab.state("good.json", &valid());
    let link = lab.dir.path().join("linked-gate.py");
    std::os::unix::fs::symlink(&lab.installed.script, &link).unwrap();
    assert_eq!(
        run_py(&link, &state, SHA, BODY).unwrap().status.code(),
        Some(0)
    );
}

#[test]
fn the_launcher_is_python3_standard_library_only() {
    let lab = Lab::new();
    let src = fs::read_to_string(&lab.installed.script).unwrap();
    assert!(src.starts_with("#!/usr/bin/env python3\n"), "{src}");
    // Parse the real import statements (not a regex over the text).
    let program = r#"
import ast, sys
tree = ast.parse(open(sys.argv[1]).read())
names = set()
for node in ast.walk(tree):
    if isinstance(node, ast.Import):
        names.update(a.name.split(".")[0] for a in node.names)
    elif isinstance(node, ast.ImportFrom):
        names.add((node.module or "").split(".")[0] if node.level == 0 else ".")
    elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "__import__":
        names.add("__import__")
bad = sorted(n for n in names if n not in sys.stdlib_module_names)
print(" ".join(sorted(names)))
sys.exit(1 if bad else 0)
"#;
    let o = Command::new("python3")
        .arg("-c")
        .arg(program)
        .arg(&lab.installed.script)
        .output()
        .unwrap();
    assert!(o.status.success(), "non-stdlib imports: {}", text(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "errno os sys time"
    );
}

#[test]
fn arguments_that_look_like_options_are_values() {
    let lab = Lab::new();
    let state = lab.state("good.json", &valid());
    // `-h`/`--help` as EXPECTED_BODY must be a (wrong) body, never the gate's help (exit 0).
    for body in ["-h", "--help", "--json", "--", "-"] {
        let o = lab.py(&state, SHA, body);
        assert_eq!(o.status.code(), Some(1), "{body:?}: {}", text(&o));
        assert!(
            text(&o).contains("REJECTED http_body"),
            "{body:?}: {}",
            text(&o)
        );
    }
    // A body that really is `--help` is approved when served.
    let served = lab.state("help.json", &with("http_body", Some(json!("--help"))));
    assert_eq!(lab.py(&served, SHA, "--help").status.code(), Some(0));
}

#[test]
fn arguments_reach_the_gate_byte_for_byte() {
    let lab = Lab::new();
    for body in [
        "labhub cnpe v1",
        "  spaced  ",
        "line\nbreak",
        "ünïcødé ✓",
        "$HOME `x` \"q\" 'q' \\",
    ] {
        let served = lab.state("odd.json", &with("http_body", Some(json!(body))));
        let o = lab.py(&served, SHA, body);
        assert_eq!(o.status.code(), Some(0), "{body:?}: {}", text(&o));
        // And one character less is rejected.
        let mut shorter = body.to_string();
        shorter.pop();
        let o = lab.py(&served, SHA, &shorter);
        assert_eq!(o.status.code(), Some(1), "{body:?}: {}", text(&o));
    }
}

/// The verdict through the launcher equals the binary's: exit code, stdout and stderr.
#[test]
fn the_launcher_gives_the_binarys_verdict() {
    let lab = Lab::new();
    let mut cases: Vec<(String, Option<Vec<u8>>, &str, &str)> = vec![
        (
            "approve".into(),
            Some(serde_json::to_vec(&valid()).unwrap()),
            SHA,
            BODY,
        ),
        (
            "other sha".into(),
            Some(serde_json::to_vec(&valid()).unwrap()),
            OTHER_SHA,
            BODY,
        ),
        (
            "short sha".into(),
            Some(serde_json::to_vec(&valid()).unwrap()),
            &SHA[..7],
            BODY,
        ),
        (
            "other body".into(),
            Some(serde_json::to_vec(&valid()).unwrap()),
            SHA,
            "labhub-cnpe-v2",
        ),
        (
            "malformed json".into(),
            Some(b"{\"sync\": \"Synced\",".to_vec()),
            SHA,
            BODY,
        ),
        ("not an object".into(), Some(b"[1, 2]".to_vec()), SHA, BODY),
        (
            "duplicate key".into(),
            Some(b"{\"sync\": \"Synced\", \"sync\": \"OutOfSync\"}".to_vec()),
            SHA,
            BODY,
        ),
        ("empty file".into(), Some(vec![]), SHA, BODY),
        ("missing file".into(), None, SHA, BODY),
    ];
    for (field, value) in [
        ("target_revision", Some(json!(OTHER_SHA))),
        ("observed_revision", None),
        ("sync", Some(json!("OutOfSync"))),
        ("health", Some(json!("Degraded"))),
        ("replicas", Some(json!("1"))),
        ("updated", Some(json!(1.0))),
        ("available", Some(json!(0))),
        ("ready", Some(json!(null))),
        ("ready_endpoints", Some(json!(true))),
        ("generation", Some(json!(4))),
        ("observed_generation", Some(json!("3"))),
        ("http_code", Some(json!(503))),
        ("http_body", Some(json!(format!("{BODY}\n")))),
    ] {
        cases.push((
            format!("{field}={value:?}"),
            Some(serde_json::to_vec(&with(field, value)).unwrap()),
            SHA,
            BODY,
        ));
    }
    let mut exits = std::collections::BTreeSet::new();
    for (i, (name, bytes, sha, body)) in cases.iter().enumerate() {
        let state = lab.dir.path().join(format!("case-{i}.json"));
        if let Some(b) = bytes {
            fs::write(&state, b).unwrap();
        }
        let direct = binary(&state, sha, body);
        let via = lab.py(&state, sha, body);
        assert_eq!(
            via.status.code(),
            direct.status.code(),
            "{name}: {}",
            text(&via)
        );
        assert_eq!(via.stdout, direct.stdout, "{name}");
        assert_eq!(via.stderr, direct.stderr, "{name}");
        exits.insert(direct.status.code());
        if name == "missing file" {
            assert_eq!(via.status.code(), Some(2), "{name}: {}", text(&via));
        }
    }
    assert_eq!(
        exits,
        [Some(0), Some(1), Some(2)].into_iter().collect(),
        "all three verdicts covered"
    );
}

#[test]
fn gate_binary_finds_the_compiled_gate() {
    // Test binaries live in target/debug/deps; the gate in target/debug.
    let found = launcher::gate_binary().unwrap();
    assert_eq!(
        fs::read(&found).unwrap(),
        fs::read(GATE).unwrap(),
        "{}",
        found.display()
    );
}

#[test]
fn the_launcher_runs_through_its_shebang_too() {
    let lab = Lab::new();
    let state = lab.state("good.json", &valid());
    let o = Command::new(&lab.installed.script)
        .arg(&state)
        .arg(SHA)
        .arg(BODY)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = Command::new(&lab.installed.script)
        .arg(&state)
        .arg(OTHER_SHA)
        .arg(BODY)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

#[test]
fn a_launcher_copied_away_from_bin_uses_the_installed_gate() {
    let lab = Lab::new();
    let state = lab.state("good.json", &valid());
    let elsewhere = tempfile::tempdir().unwrap();
    let copy = elsewhere.path().join("release-gate.py");
    fs::copy(&lab.installed.script, &copy).unwrap();
    assert_eq!(
        run_py(&copy, &state, SHA, BODY).unwrap().status.code(),
        Some(0)
    );
    assert_eq!(
        run_py(&copy, &state, OTHER_SHA, BODY)
            .unwrap()
            .status
            .code(),
        Some(1)
    );
}
