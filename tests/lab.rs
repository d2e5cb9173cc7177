//! `cargo test --test lab`: the whole lab against the cluster in the current kubeconfig, as
//! ordered trials on one thread sharing one fixture, then the grader's checks. With no
//! reachable cluster every trial is ignored, loudly, with the command that provides one.

use cnpe_lab::config::Config;
use cnpe_lab::lab::{Lab, STEPS};
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const HOW_TO_GET_A_CLUSTER: &str = "start one: `bash ci/hermetic/up.sh && export KUBECONFIG=$(bash ci/hermetic/kubeconfig.sh)` \
(air-gapped, after ci/hermetic/build.sh) or `bash ci/kind/up.sh` (with internet and a container engine)";

struct Shared {
    rt: tokio::runtime::Runtime,
    lab: Mutex<Option<Lab>>,
    failed_step: Mutex<Option<String>>,
}

/// Why the lab cannot run here, or the connected fixture.
fn connect(rt: &tokio::runtime::Runtime) -> Result<Lab, String> {
    let cfg = Config::from_env().map_err(|e| format!("configuration: {e:#}"))?;
    rt.block_on(async {
        let lab = Lab::connect(cfg).await.map_err(|e| format!("{e:#}"))?;
        match tokio::time::timeout(Duration::from_secs(10), lab.cluster.version()).await {
            Ok(Ok(_)) => Ok(lab),
            Ok(Err(e)) => Err(format!("API server {} does not answer: {e:#}", lab.cluster.api_url())),
            Err(_) => Err(format!("API server {} does not answer within 10s", lab.cluster.api_url())),
        }
    })
}

fn main() {
    let mut args = Arguments::from_args();
    args.test_threads = Some(1); // the steps are ordered and share one cluster

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let connected = connect(&rt);
    if let Err(why) = &connected {
        eprintln!("\n==================== LAB NOT RUN ====================");
        eprintln!("no usable cluster: {why}");
        eprintln!("every lab trial is IGNORED (not passed); {HOW_TO_GET_A_CLUSTER}");
        eprintln!("=====================================================\n");
    }
    let unavailable = connected.as_ref().err().cloned();
    let shared = Arc::new(Shared { rt, lab: Mutex::new(connected.ok()), failed_step: Mutex::new(None) });

    let mut trials: Vec<Trial> = STEPS
        .iter()
        .map(|step| {
            let shared = shared.clone();
            let unavailable = unavailable.clone();
            Trial::ignorable_test(*step, move || run_trial(&shared, step, unavailable.as_deref()))
        })
        .collect();
    trials.push({
        let shared = shared.clone();
        let unavailable = unavailable.clone();
        Trial::ignorable_test("evidence_snapshots", move || snapshots(&shared, unavailable.as_deref()))
    });
    let conclusion = libtest_mimic::run(&args, trials);

    if let Some(lab) = shared.lab.lock().unwrap().as_ref() {
        if !lab.timeline.steps.is_empty() {
            match lab.write_timeline() {
                Ok(p) => eprintln!("{}\ntimeline: {}", lab.summary(), p.display()),
                Err(e) => eprintln!("{}\ntimeline not written: {e:#}", lab.summary()),
            }
        }
    }
    conclusion.exit();
}

fn run_trial(shared: &Shared, step: &str, unavailable: Option<&str>) -> Result<Completion, Failed> {
    if let Some(why) = unavailable {
        let _ = why;
        return Ok(Completion::ignored_with(format!("no cluster, see LAB NOT RUN above; {HOW_TO_GET_A_CLUSTER}")));
    }
    if let Some(failed) = shared.failed_step.lock().unwrap().clone() {
        return Err(format!("skipped: {failed} failed").into());
    }
    let mut guard = shared.lab.lock().unwrap();
    let lab = guard.as_mut().expect("connected");
    match shared.rt.block_on(lab.run_step(step)) {
        Ok(summary) => {
            eprintln!("  {step}: {summary}");
            Ok(Completion::Completed)
        }
        Err(e) => {
            // Grading trials are independent checks; a failed lab step stops the later steps.
            if step.starts_with("step") {
                *shared.failed_step.lock().unwrap() = Some(step.to_string());
            }
            Err(format!("{e:#}").into())
        }
    }
}

/// The three evidence files, with run-specific values redacted, so any change in what the lab
/// records is reviewed (snapshots/lab_*.snap).
fn snapshots(shared: &Shared, unavailable: Option<&str>) -> Result<Completion, Failed> {
    if let Some(why) = unavailable {
        let _ = why;
        return Ok(Completion::ignored_with(format!("no cluster, see LAB NOT RUN above; {HOW_TO_GET_A_CLUSTER}")));
    }
    if let Some(failed) = shared.failed_step.lock().unwrap().clone() {
        return Err(format!("skipped: {failed} failed").into());
    }
    let guard = shared.lab.lock().unwrap();
    let lab = guard.as_ref().expect("connected");
    let files = [
        ("lab_baseline_json", lab.records.baseline_json()),
        ("lab_failed_json", lab.records.failed_json()),
        ("lab_recovered_json", lab.records.recovered_json()),
    ];
    for (name, path) in files {
        let value = cnpe_lab::records::read_json(&path)
            .map_err(|e| format!("{e:#}"))?
            .ok_or_else(|| format!("{} missing", path.display()))?;
        let outcome = std::panic::catch_unwind(|| {
            let mut settings = insta::Settings::clone_current();
            settings.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"));
            settings.set_prepend_module_to_snapshot(false);
            settings.set_omit_expression(true);
            settings.bind(|| {
                insta::assert_json_snapshot!(name, value, {
                    ".observed_at" => "[time]",
                    ".target_revision" => "[sha]",
                    ".observed_revision" => "[sha]",
                    ".operation_revision" => "[sha]",
                    ".generation" => "[generation]",
                    ".observed_generation" => "[generation]",
                    ".http_url" => "[url]",
                    ".conditions[].message" => "[message]",
                    ".http_body" => insta::dynamic_redaction(|v, _| {
                        // A 503 from the service proxy carries an API Status: its text varies by
                        // Kubernetes version; the healthy page is compared exactly.
                        if v.as_str() == Some("labhub-cnpe-v1") { v } else { "[error body]".into() }
                    }),
                    ".http_error" => insta::dynamic_redaction(|v, _| if v.as_str().is_some() { "[error]".into() } else { v }),
                });
            });
        });
        if outcome.is_err() {
            return Err(format!("evidence snapshot {name} differs (see above; review with cargo insta review)").into());
        }
    }
    Ok(Completion::Completed)
}
