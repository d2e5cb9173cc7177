//! `cargo test --test lab`: the whole lab as ordered trials on one thread sharing one fixture,
//! through the same `Runner` as `cnpe-lab run`, then the grader's checks. `CNPE_CLUSTER=hermetic`
//! or `kind` starts that cluster first. With no usable cluster every trial is ignored, loudly,
//! with the command that provides one, unless `CNPE_LAB_REQUIRED=1` (set by CI whenever it
//! brought a cluster up): then every trial fails with the same explanation.

mod support;

use cnpe_lab::config::Config;
use cnpe_lab::lab::Lab;
use cnpe_lab::runner::{Outcome, Runner};
use cnpe_lab::step::{Step, StepKind};
use libtest_mimic::{Completion, Failed, Trial};
use std::sync::{Arc, Mutex};

struct Shared {
    rt: tokio::runtime::Runtime,
    runner: Mutex<Option<Runner>>,
    /// Why the lab cannot run, and whether that is a failure (required) or an ignore.
    availability: support::Availability,
}

/// The connected runner, or why the lab cannot run here.
fn connect(rt: &tokio::runtime::Runtime, cfg: Config) -> Result<Runner, String> {
    rt.block_on(async {
        let lab = Lab::connect(cfg).await.map_err(|e| format!("{e:#}"))?;
        support::api_answers(&lab.cluster).await?;
        Ok(Runner::new(lab))
    })
}

fn main() {
    let suite = support::start_suite("LAB", connect);
    let shared = Arc::new(Shared {
        rt: suite.rt,
        runner: Mutex::new(suite.connected),
        availability: suite.availability,
    });
    let (args, provisioned, _lock) = (suite.args, suite.provisioned, suite.lock);

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

    if let Some(runner) = shared.runner.lock().unwrap().as_ref() {
        if !runner.lab.timeline.steps.is_empty() {
            match runner.lab.write_timeline() {
                Ok(p) => eprintln!("{}\ntimeline: {}", runner.lab.summary(), p.display()),
                Err(e) => eprintln!("{}\ntimeline not written: {e:#}", runner.lab.summary()),
            }
            runner.lab.write_reports(&runner.results);
        }
    }
    if let Some(p) = provisioned {
        eprintln!("{}", p.farewell());
    }
    conclusion.exit();
}

fn run_trial(shared: &Shared, step: Step) -> Result<Completion, Failed> {
    if let Some(r) = shared.availability.verdict("LAB") {
        return r;
    }
    let mut guard = shared.runner.lock().unwrap();
    let runner = guard.as_mut().expect("connected");
    let result = shared.rt.block_on(runner.run(step));
    match &result.outcome {
        Outcome::Passed(summary) => {
            eprintln!("  {step}: {summary}");
            Ok(Completion::Completed)
        }
        Outcome::Failed(explanation) => Err(explanation.clone().into()),
        Outcome::Skipped { after } => Err(format!("skipped: {after} failed").into()),
    }
}

/// The three evidence files, with run-specific values redacted, so any change in what the lab
/// records is reviewed (snapshots/lab_*.snap).
fn snapshots(shared: &Shared) -> Result<Completion, Failed> {
    if let Some(r) = shared.availability.verdict("LAB") {
        return r;
    }
    let guard = shared.runner.lock().unwrap();
    let runner = guard.as_ref().expect("connected");
    if let Some(failed) = runner
        .results
        .iter()
        .find(|r| r.step.kind() == StepKind::Action && !r.outcome.passed())
    {
        return Err(format!("skipped: {} did not pass", failed.step).into());
    }
    let records = &runner.lab.records;
    let files = [
        ("lab_baseline_json", records.baseline_json()),
        ("lab_failed_json", records.failed_json()),
        ("lab_recovered_json", records.recovered_json()),
    ];
    for (name, path) in files {
        let value = cnpe_lab::records::read_json(&path)
            .map_err(|e| format!("{e:#}"))?
            .ok_or_else(|| format!("{} missing", path.display()))?;
        let outcome = std::panic::catch_unwind(|| {
            support::evidence_settings(true).bind(|| insta::assert_json_snapshot!(name, value));
        });
        if outcome.is_err() {
            return Err(format!(
                "evidence snapshot {name} differs (see above; review with cargo insta review)"
            )
            .into());
        }
    }
    Ok(Completion::Completed)
}
