//! `cnpe-lab` as a process, where no cluster is needed: usage errors exit 2 with a message
//! naming what is wrong, and the safety rule refuses a non-lab API server before any request.

use std::process::{Command, Output};

fn cnpe_lab(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cnpe-lab"));
    c.args(args).env_remove("KUBECONFIG");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn wait_needs_a_full_lowercase_sha() {
    for sha in [
        "HEAD",
        "3b18e51",
        "3B18E512DBA79E4C8300DD08AEB37F8E728B8DAD",
    ] {
        let o = cnpe_lab(&["wait", "healthy", sha], &[]);
        assert_eq!(o.status.code(), Some(2), "{sha}");
        assert!(
            stderr(&o).contains("not a full 40-hex lowercase SHA"),
            "{}",
            stderr(&o)
        );
        assert!(o.stdout.is_empty(), "nothing on stdout for a usage error");
    }
}

#[test]
fn wait_needs_a_known_state() {
    let o = cnpe_lab(
        &[
            "wait",
            "serving",
            "3b18e512dba79e4c8300dd08aeb37f8e728b8dad",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn invalid_configuration_names_the_variable() {
    let o = cnpe_lab(&["observe"], &[("CNPE_WAIT_SECONDS", "soon")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("CNPE_WAIT_SECONDS"), "{}", stderr(&o));
}

#[test]
fn reset_requires_yes_and_says_what_it_deletes() {
    let o = cnpe_lab(
        &["reset"],
        &[("CNPE_EVIDENCE_DIR", "/tmp/cnpe-cli-test-evidence")],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("/tmp/cnpe-cli-test-evidence") && stderr(&o).contains("--yes"),
        "{}",
        stderr(&o)
    );
}

/// 203.0.113.0/24 is TEST-NET-3: the refusal must come before any connection attempt.
#[test]
fn a_remote_api_server_is_refused_before_any_request() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("config");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: prod\n  cluster:\n    server: https://203.0.113.10:6443\n\
         contexts:\n- name: prod\n  context:\n    cluster: prod\n    user: u\ncurrent-context: prod\nusers:\n- name: u\n  user:\n    token: x\n",
    )
    .unwrap();
    let o = cnpe_lab(
        &["observe"],
        &[("KUBECONFIG", kubeconfig.to_str().unwrap())],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("refusing to act on the API server at https://203.0.113.10:6443"),
        "{err}"
    );
    assert!(err.contains("CNPE_ALLOW_REMOTE=1"), "{err}");
    assert!(o.stdout.is_empty());
}

/// `gate --in-hook` (hook mode with an explicit SHA) parses, and usage checks still come
/// before any cluster; `--help` documents that `--sha-from-operation` implies it.
#[test]
fn gate_in_hook_is_a_flag_checked_before_any_cluster() {
    let o = cnpe_lab(
        &[
            "gate",
            "--app",
            "shop",
            "--sha",
            "3b18e512dba79e4c8300dd08aeb37f8e728b8dad",
            "--in-hook",
            "--expect-body",
            "shop r2",
            "--timeout",
            "0",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--timeout must be at least 1 second"),
        "{}",
        stderr(&o)
    );
    let help = cnpe_lab(&["gate", "--help"], &[]);
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(text.contains("--in-hook"), "{text}");
    assert!(text.contains("Implied by --sha-from-operation"), "{text}");
}
