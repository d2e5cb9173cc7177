//! `cargo test --test lab`: the whole lab as ordered trials on one thread sharing one fixture,
//! through the same `Runner` as `cnpe-lab run`, then the grader's checks. `CNPE_CLUSTER=hermetic`
//! or `kind` starts that cluster first. With no usable cluster every trial is ignored, loudly,
//! with the command that provides one, unless `CNPE_LAB_REQUIRED=1` (set by CI whenever it
//! brought a cluster up): then every trial fails with the same explanation.

mod support;

use cnpe_lab::config::Config;
use cnpe_lab::lab::runner::Runner;
use cnpe_lab::lab::step::Step;
use cnpe_lab::lab::Lab;
use cnpe_lab::lock::LabLock;
use cnpe_lab::records::Record;
use cnpe_lab::report::{Echo, Outcome, TrialResult};
use libtest_mimic::{Completion, Failed, Trial};
use std::sync::{Arc, Mutex};
use std::time::Instant;

struct Shared {
    rt: tokio::runtime::Runtime,
    runner: Mutex<Option<Runner>>,
    /// Why the lab cannot run, and whether that is a failure (required) or an ignore.
    availability: support::Availability,
}

/// The connected runner, or why the lab cannot run here.
fn connect(
    rt: &tokio::runtime::Runtime,
    cfg: Config,
    lock: LabLock,
) -> Result<Runner, support::NotRun> {
    rt.block_on(async {
        let lab = Lab::connect(cfg, Some(lock))
            .await
            .map_err(|e| support::NotRun::Unreachable(format!("{e:#}")))?;
        support::api_answers(&lab.cluster).await?;
        Ok(Runner::new(lab, Echo::Libtest))
    })
}

fn main() {
    let suite = support::start_suite("LAB", connect);
    let shared = Arc::new(Shared {
        rt: suite.rt,
        runner: Mutex::new(suite.connected),
        availability: suite.availability,
    });
    let (args, provisioned) = (suite.args, suite.provisioned);

    let mut trials: Vec<Trial> = Step::ALL
        .iter()
        .map(|step| {
            let shared = shared.clone();
            let step = *step;
            Trial::ignorable_test(step.trial_name(), move || run_trial(&shared, step))
        })
        .collect();
    trials.push({
        let shared = shared.clone();
        Trial::ignorable_test("evidence_snapshots", move || snapshots(&shared))
    });
    let conclusion = libtest_mimic::run(&args, trials);

    // The one reporter writes the timeline, the JUnit files and the picture.
    if let Some(runner) = shared.runner.lock().unwrap().as_ref() {
        runner.finish();
    }
    if let Some(p) = provisioned {
        eprintln!("{}", p.farewell());
    }
    conclusion.exit();
}

fn run_trial(shared: &Shared, step: Step) -> Result<Completion, Failed> {
    if let Some(o) = shared.availability.verdict("LAB") {
        return o.libtest();
    }
    let mut guard = shared.runner.lock().unwrap();
    let runner = guard.as_mut().expect("connected");
    shared.rt.block_on(runner.run(step)).outcome.libtest()
}

/// The three evidence files, with run-specific values redacted, so any change in what the lab
/// records is reviewed (snapshots/lab_*.snap). Reported like every step.
fn snapshots(shared: &Shared) -> Result<Completion, Failed> {
    if let Some(o) = shared.availability.verdict("LAB") {
        return o.libtest();
    }
    let guard = shared.runner.lock().unwrap();
    let runner = guard.as_ref().expect("connected");
    let t = Instant::now();
    let outcome = match runner.failed_action() {
        Some(failed) => Outcome::Skipped {
            after: failed.trial_name().into(),
        },
        None => match snapshot_outcome(runner) {
            Ok(()) => Outcome::Passed(
                "baseline, failed and recovered evidence match their snapshots".into(),
            ),
            Err(e) => Outcome::Failed(e),
        },
    };
    runner.reporter.finished(TrialResult {
        name: "evidence_snapshots".into(),
        outcome: outcome.clone(),
        seconds: t.elapsed().as_secs_f64(),
    });
    outcome.libtest()
}

fn snapshot_outcome(runner: &Runner) -> Result<(), String> {
    let records = &runner.lab.records;
    let files = [
        ("lab_baseline_json", Record::BaselineJson),
        ("lab_failed_json", Record::FailedJson),
        ("lab_recovered_json", Record::RecoveredJson),
    ];
    for (name, record) in files {
        let path = records.path(record);
        let value = cnpe_lab::records::read_json(&path)
            .map_err(|e| format!("{e:#}"))?
            .ok_or_else(|| format!("{} missing", path.display()))?;
        let outcome = std::panic::catch_unwind(|| {
            support::evidence_settings(true).bind(|| insta::assert_json_snapshot!(name, value));
        });
        if outcome.is_err() {
            return Err(format!(
                "evidence snapshot {name} differs (see above; review with cargo insta review)"
            ));
        }
    }
    Ok(())
}
