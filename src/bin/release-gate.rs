//! `release-gate STATE_JSON EXPECTED_SHA EXPECTED_BODY`: exit 0 only when the state is really
//! serving EXPECTED_SHA with EXPECTED_BODY. Exit 1 on a rejection (each violation on stderr, one
//! per line), exit 2 on usage errors and unreadable files. The state file is only ever read.

use clap::Parser;
use cnpe_lab::{gate, records};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "release-gate", about = "Approve a release only if it is really serving the expected revision")]
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

fn main() -> ExitCode {
    let args = Args::parse();
    let bytes = match records::read_bounded(&args.state_json) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("release-gate: cannot read {}: {e:#}", args.state_json.display());
            return ExitCode::from(2);
        }
    };
    let verdict = gate::evaluate_bytes(&bytes, &args.expected_sha, &args.expected_body);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&verdict).expect("verdict serializes"));
    }
    if verdict.approved {
        eprintln!("release-gate: APPROVED {} ({})", args.expected_sha, args.state_json.display());
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
