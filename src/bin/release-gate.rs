//! `release-gate STATE_JSON EXPECTED_SHA EXPECTED_BODY`: exit 0 only when the state is really
//! serving EXPECTED_SHA with EXPECTED_BODY. Exit 1 on a rejection (each violation on stderr, one
//! per line), exit 2 on usage errors and unreadable files. The state file is only ever read.

#![warn(clippy::too_many_lines)]

use clap::Parser;
use cnpe_lab::records;
use cnpe_lab::release_gate as gate;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "release-gate",
    about = "Approve a release only if it is really serving the expected revision"
)]
struct Args {
    /// Print the verdict as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Evidence JSON written by `cnpe-lab observe` / `wait`.
    state_json: PathBuf,
    /// The full 40-hex lowercase commit SHA that must be serving.
    expected_sha: String,
    /// The exact HTTP body the service must return.
    expected_body: String,
}

/// How long reading the state may take. A regular file is read at once; a FIFO or pipe with no
/// writer (`release-gate <(...)` gone wrong) would otherwise block forever.
const READ_DEADLINE: Duration = Duration::from_secs(5);

fn read_with_deadline(path: &Path) -> anyhow::Result<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    let owned = path.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(records::read_bounded(&owned));
    });
    match rx.recv_timeout(READ_DEADLINE) {
        Ok(result) => result,
        Err(_) => {
            anyhow::bail!("no data within {READ_DEADLINE:?} (a pipe or FIFO with no writer?)")
        }
    }
}

fn main() -> ExitCode {
    // Only an approval exits 0: help and version requests (`-h` where a body was meant) are
    // usage outcomes like any other parse error, so the gate can never pass by accident.
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(2);
        }
    };
    let bytes = match read_with_deadline(&args.state_json) {
        Ok(b) => b,
        Err(e) => {
            eprintln!(
                "release-gate: cannot read {}: {e:#}",
                args.state_json.display()
            );
            return ExitCode::from(2);
        }
    };
    let verdict = gate::evaluate_bytes(&bytes, &args.expected_sha, &args.expected_body);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&verdict).expect("verdict serializes")
        );
    }
    if verdict.approved {
        eprintln!(
            "release-gate: APPROVED {} ({})",
            args.expected_sha,
            args.state_json.display()
        );
        ExitCode::SUCCESS
    } else {
        for line in verdict.report_lines() {
            eprintln!("release-gate: REJECTED {line}");
        }
        eprintln!(
            "release-gate: {} rejected: {} violation(s)",
            args.state_json.display(),
            verdict.violations.len() + usize::from(verdict.input_error.is_some())
        );
        ExitCode::from(1)
    }
}
