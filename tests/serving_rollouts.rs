//! The gate's pure core on Argo Rollouts and on kinds it does not model: counterexamples where
//! Argo CD says Synced and Healthy at the SHA (what `argocd app wait --health` approves) while
//! clients are served the old release, the positive cases, and a property over random Rollout
//! status values. Objects are written as the controllers write them (JSON).

use cnpe_lab::serving::verdict::{Condition, Decision};
use cnpe_lab::serving::workloads::{self, WorkloadKind};
use proptest::prelude::*;
use rstest::rstest;
use serde_json::{json, Value};

#[path = "support/world.rs"]
mod world;
use world::*;

#[rstest]
#[case::canary(canary())]
#[case::blue_green(json!({"blueGreen": {"activeService": "web", "previewService": "web-preview"}}))]
fn a_fully_promoted_rollout_is_approved(#[case] strategy: Value) {
    let v = promoted(strategy).decide();
    assert_eq!(v.decision, Decision::Approved, "{}", text(&v));
    for e in &v.endpoints {
        assert_eq!(e.owner.as_deref(), Some("Rollout shop/web"));
        assert_eq!(e.revision.as_deref(), Some(NEW));
        assert!(e.newest_revision && e.matched);
    }
}

/// Trap: a canary paused at 50 %. Argo CD calls a paused Rollout Suspended (or Healthy once
/// its step pause is set by an older controller); `kubectl argo rollouts status` returns
/// "Paused". Half the clients get the old page from the stable ReplicaSet.
#[test]
fn a_canary_paused_at_50_percent_is_pending_naming_step_and_weight() {
    let mut w = promoted(canary());
    let st = w.status();
    st.phase = Some("Paused".into());
    st.message = Some("CanaryPauseStep".into());
    st.stable_rs = Some(OLD.into());
    st.current_step_index = Some(1);
    st.pause_conditions = vec![from(json!({"reason": "CanaryPauseStep"}))];
    st.updated_replicas = Some(1);
    // One old pod still serves behind the same Service (no traffic router: replica ratio).
    w.replica_sets.truncate(2);
    w.pods.pop();
    w.slices.pop();
    w.probes.remove(&key("web", "web-new-b", "10.0.0.2"));
    w.serve("web", "web-old-a", OLD, "10.0.0.3", OLD_BODY);
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending, "{}", text(&v));
    let c = conditions(&v);
    for want in [
        Condition::WorkloadPaused,
        Condition::WorkloadReplicas,
        Condition::WorkloadRevision,
        Condition::OldRevisionServing,
        Condition::EndpointAnswers,
    ] {
        assert!(c.contains(&want), "{want:?} missing: {}", text(&v));
    }
    let paused = v
        .unmet
        .iter()
        .find(|u| u.condition == Condition::WorkloadPaused)
        .unwrap();
    assert_eq!(paused.subject, "Rollout shop/web");
    assert_eq!(
        paused.found,
        "paused (CanaryPauseStep) at step 2 of 2 (pause), canary weight 50% (setWeight)"
    );
    assert!(
        v.likely_causes
            .iter()
            .any(|c| c.contains("kubectl argo rollouts promote")),
        "{}",
        text(&v)
    );
}

/// With a traffic router, the weight named is the router's, not the step's.
#[test]
fn the_traffic_routers_weight_is_named_when_there_is_one() {
    let mut r = rollout(
        json!({"canary": {"steps": [{"setWeight": 20}, {"pause": {}}, {"setWeight": 80}]}}),
    );
    let st = r.status.as_mut().unwrap();
    st.current_step_index = Some(1);
    st.canary.weights = Some(from(
        json!({"canary": {"weight": 30}, "stable": {"weight": 70}}),
    ));
    assert_eq!(
        workloads::canary_position(&r).as_deref(),
        Some("step 2 of 3 (pause), canary weight 30% (traffic router)")
    );
    r.status.as_mut().unwrap().current_step_index = Some(3);
    r.status.as_mut().unwrap().canary.weights = None;
    assert_eq!(
        workloads::canary_position(&r).as_deref(),
        Some("step 3 of 3 (done), canary weight 80% (setWeight)")
    );
}

/// Trap: a blue-green Rollout whose active Service still selects the old ReplicaSet (waiting
/// for promotion). The new pods are Ready behind the preview Service; clients get the old page.
#[test]
fn blue_green_active_service_on_the_old_replica_set() {
    let mut w =
        promoted(json!({"blueGreen": {"activeService": "web", "previewService": "web-preview"}}));
    w.app = application(&[
        ("argoproj.io", "Rollout", "web"),
        ("", "Service", "web"),
        ("", "Service", "web-preview"),
    ]);
    let st = w.status();
    st.phase = Some("Paused".into());
    st.stable_rs = Some(OLD.into());
    st.blue_green.active_selector = Some(OLD.into());
    st.blue_green.preview_selector = Some(NEW.into());
    st.pause_conditions = vec![from(json!({"reason": "BlueGreenPause"}))];
    st.replicas = Some(4);
    w.pods.clear();
    w.slices.clear();
    w.probes.clear();
    w.serve("web", "web-old-a", OLD, "10.0.0.1", OLD_BODY);
    w.serve("web", "web-old-b", OLD, "10.0.0.2", OLD_BODY);
    w.serve("web-preview", "web-new-a", NEW, "10.0.0.3", BODY);
    w.serve("web-preview", "web-new-b", NEW, "10.0.0.4", BODY);
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending, "{}", text(&v));
    let revision = v
        .unmet
        .iter()
        .find(|u| u.condition == Condition::WorkloadRevision)
        .expect("WorkloadRevision");
    assert!(
        revision
            .found
            .contains(&format!("active Service selects {OLD}")),
        "{}",
        revision.found
    );
    assert!(
        v.likely_causes
            .iter()
            .any(|c| c.contains("active Service still selects")),
        "{}",
        text(&v)
    );
    assert!(conditions(&v).contains(&Condition::OldRevisionServing));
}

/// Trap: an AnalysisRun failed and the Rollout aborted back to the stable ReplicaSet, while
/// the Application still says Synced at the SHA (an aborted Rollout is Degraded in Argo CD's
/// health, but only once it reconciles; until then Healthy is the old word).
#[rstest]
#[case::step("canary", "currentStepAnalysisRunStatus", "Failed", true)]
#[case::background("canary", "currentBackgroundAnalysisRunStatus", "Error", true)]
#[case::step_running("canary", "currentStepAnalysisRunStatus", "Running", false)]
#[case::pre_promotion("blueGreen", "prePromotionAnalysisRunStatus", "Inconclusive", false)]
#[case::post_promotion("blueGreen", "postPromotionAnalysisRunStatus", "Pending", false)]
fn an_analysis_run_that_is_not_successful_is_named(
    #[case] section: &str,
    #[case] field: &str,
    #[case] status: &str,
    #[case] aborted: bool,
) {
    let strategy = if section == "canary" {
        canary()
    } else {
        json!({"blueGreen": {"activeService": "web"}})
    };
    let mut w = promoted(strategy);
    let mut st = serde_json::to_value(w.status().clone()).unwrap();
    st[section][field] = json!({"name": "web-6b7c9d-3", "status": status, "message": "metric \"success-rate\" assessed Failed"});
    if aborted {
        st["abort"] = json!(true);
        st["phase"] = json!("Degraded");
        st["message"] = json!("RolloutAborted: Rollout aborted update to revision 3");
        st["stableRS"] = json!(OLD);
    }
    *w.status() = from(st);
    let v = w.decide();
    assert_ne!(v.decision, Decision::Approved, "{}", text(&v));
    let analysis = v
        .unmet
        .iter()
        .find(|u| u.condition == Condition::AnalysisPassed)
        .unwrap_or_else(|| panic!("AnalysisPassed missing: {}", text(&v)));
    assert!(analysis
        .want
        .contains("AnalysisRun web-6b7c9d-3 Successful"));
    assert!(analysis.found.starts_with(status), "{}", analysis.found);
    let aborted_named = v
        .unmet
        .iter()
        .any(|u| u.condition == Condition::WorkloadRevision && u.found.starts_with("aborted"));
    assert_eq!(aborted_named, aborted, "{}", text(&v));
}

#[test]
fn paused_by_hand_or_not_observed_is_named() {
    let mut w = promoted(canary());
    w.rollouts[0].spec.paused = Some(true);
    w.rollouts[0].metadata.generation = Some(4);
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending);
    assert_eq!(
        conditions(&v),
        [Condition::WorkloadPaused, Condition::WorkloadGeneration]
    );
}

#[test]
fn a_listed_rollout_that_is_absent_is_named() {
    let mut w = promoted(canary());
    w.rollouts.clear();
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending);
    assert!(
        conditions(&v).contains(&Condition::WorkloadExists),
        "{}",
        text(&v)
    );
    // Its pods' revision cannot be read without it: not the newest, named per endpoint.
    assert!(conditions(&v).contains(&Condition::OldRevisionServing));
}

/// A kind the gate does not model (a bare ReplicaSet managed by the Application, or a custom
/// controller's object owning it) fails closed by name: never approved, never "stray".
#[rstest]
#[case::bare_replica_set("apps", "ReplicaSet", "web-6b7c9d", "apps/ReplicaSet shop/web-6b7c9d")]
#[case::custom_controller("example.com", "WebApp", "web", "example.com/WebApp shop/web")]
fn an_unmodeled_kind_fails_closed_by_name(
    #[case] group: &str,
    #[case] kind: &str,
    #[case] name: &str,
    #[case] named: &str,
) {
    let mut w = promoted(canary());
    w.app = application(&[(group, kind, name), ("", "Service", "web")]);
    w.rollouts.clear();
    let api_version = if group == "apps" {
        "apps/v1".to_string()
    } else {
        format!("{group}/v1")
    };
    // The ReplicaSet of NEW is owned by the custom object (or is itself the managed resource).
    w.replica_sets = vec![replica_set(NEW, (&api_version, kind))];
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending, "{}", text(&v));
    assert_eq!(
        conditions(&v),
        [Condition::UnmodeledWorkload, Condition::UnmodeledWorkload],
        "{}",
        text(&v)
    );
    let u = &v.unmet[0];
    assert!(u.found.contains(named), "{}", u.found);
    assert!(u.found.contains("Argo CD health: Healthy"), "{}", u.found);
    assert!(u.want.contains(&WorkloadKind::names()));
    assert!(
        v.likely_causes[0].contains("cannot read which revision"),
        "{}",
        text(&v)
    );
}

#[test]
fn workload_kinds_round_trip_their_group_and_kind() {
    for k in WorkloadKind::ALL {
        let (g, n) = k.group_kind();
        assert_eq!(WorkloadKind::from_group_kind(g, n), Some(k));
    }
    assert_eq!(WorkloadKind::from_group_kind("apps", "ReplicaSet"), None);
    assert_eq!(WorkloadKind::from_group_kind("", "Rollout"), None);
}

fn phase() -> impl Strategy<Value = Option<String>> {
    prop::option::of(prop_oneof![
        Just("Healthy".to_string()),
        Just("Paused".to_string()),
        Just("Progressing".to_string()),
        Just("Degraded".to_string()),
        ".{0,8}"
    ])
}

fn hash() -> impl Strategy<Value = Option<String>> {
    prop::option::of(prop_oneof![Just(NEW.to_string()), Just(OLD.to_string())])
}

fn analysis() -> impl Strategy<Value = Option<String>> {
    prop::option::of(prop_oneof![
        Just("Successful".to_string()),
        Just("Running".to_string()),
        Just("Failed".to_string()),
        Just("Inconclusive".to_string()),
        ".{0,8}"
    ])
}

proptest! {
    /// Whatever the Rollout's status says, an approval implies it is fully promoted at the
    /// current hash: phase Healthy, stableRS == currentPodHash (the hash its serving pods
    /// carry), no pause of any kind, not aborted, every AnalysisRun Successful, the active
    /// Service on the current hash for blue-green. And the converse on the good values, so
    /// the property cannot hold vacuously.
    #[test]
    fn approved_means_fully_promoted(
        blue_green in any::<bool>(),
        phase in phase(),
        stable in hash(),
        current in hash(),
        active in hash(),
        paused in prop::option::of(any::<bool>()),
        pause_reason in prop::option::of(prop_oneof![Just("CanaryPauseStep".to_string()), Just("BlueGreenPause".to_string())]),
        aborted in prop::option::of(any::<bool>()),
        step in analysis(),
        background in analysis(),
        step_index in prop::option::of(-1i32..4),
    ) {
        let strategy = if blue_green {
            json!({"blueGreen": {"activeService": "web"}})
        } else {
            canary()
        };
        let mut w = promoted(strategy);
        w.rollouts[0].spec.paused = paused;
        let st = w.status();
        st.phase = phase.clone();
        st.stable_rs = stable.clone();
        st.current_pod_hash = current.clone();
        st.blue_green.active_selector = active.clone();
        st.pause_conditions = pause_reason.iter().map(|r| from(json!({"reason": r}))).collect();
        st.abort = aborted;
        st.current_step_index = step_index;
        let run = |s: &Option<String>| s.as_ref().map(|s| from(json!({"name": "r", "status": s})));
        if blue_green {
            st.blue_green.pre_promotion_analysis_run_status = run(&step);
            st.blue_green.post_promotion_analysis_run_status = run(&background);
        } else {
            st.canary.current_step_analysis_run_status = run(&step);
            st.canary.current_background_analysis_run_status = run(&background);
        }
        let v = w.decide();
        let ok = |s: &Option<String>| s.as_deref().is_none_or(|s| s == "Successful");
        let good = phase.as_deref() == Some("Healthy")
            && current.as_deref() == Some(NEW)
            && stable == current
            && (!blue_green || active == current)
            && paused != Some(true)
            && pause_reason.is_none()
            && aborted != Some(true)
            && ok(&step)
            && ok(&background);
        prop_assert_eq!(v.decision == Decision::Approved, good, "{}", v.render_text());
        prop_assert_ne!(v.decision, Decision::Rejected);
    }
}
