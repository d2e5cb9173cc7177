//! Argo Rollouts' Rollout (argoproj.io/v1alpha1) as a typed serde struct, read only: the
//! fields the gate decides on (pinned release v1.10.1, `pkg/apis/rollouts/v1alpha1/types.go`).
//! Every field is optional: the controller fills the status in over time, and a Rollout
//! written for another version must still parse.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// The label Argo Rollouts puts on a Rollout's ReplicaSets and pods (and injects into the
/// selectors of its canary, stable, active and preview Services).
pub const POD_TEMPLATE_HASH: &str = "rollouts-pod-template-hash";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: RolloutSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RolloutStatus>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutSpec {
    #[serde(default)]
    pub replicas: Option<i32>,
    /// `kubectl argo rollouts pause`.
    #[serde(default)]
    pub paused: Option<bool>,
    #[serde(default)]
    pub strategy: Strategy,
    /// The pod template taken from another workload (a Deployment scaled to zero), whose
    /// generation the annotation [`WORKLOAD_GENERATION`] carries.
    #[serde(default)]
    pub workload_ref: Option<serde_json::Value>,
}

/// The generation of the `workloadRef`'s object the Rollout was last asked to follow.
pub const WORKLOAD_GENERATION: &str = "rollout.argoproj.io/workload-generation";

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Strategy {
    #[serde(default)]
    pub canary: Option<CanaryStrategy>,
    #[serde(default)]
    pub blue_green: Option<BlueGreenStrategy>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CanaryStrategy {
    #[serde(default)]
    pub canary_service: Option<String>,
    #[serde(default)]
    pub stable_service: Option<String>,
    /// Each step is one of setWeight, pause, analysis, experiment, setCanaryScale, ...: kept
    /// as JSON so a step type this code does not know still parses (and is named by its key).
    #[serde(default)]
    pub steps: Vec<serde_json::Map<String, serde_json::Value>>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlueGreenStrategy {
    #[serde(default)]
    pub active_service: Option<String>,
    #[serde(default)]
    pub preview_service: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// Healthy, Progressing, Paused or Degraded (v1.0 and later).
    #[serde(default)]
    pub phase: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    /// A string in the CRD ("3"); a number is accepted too.
    #[serde(default)]
    pub observed_generation: Option<serde_json::Value>,
    /// The pod template hash of the current spec (the release being rolled out).
    #[serde(default)]
    pub current_pod_hash: Option<String>,
    /// The `workloadRef` object's generation the controller has acted on (a string, too).
    #[serde(default)]
    pub workload_observed_generation: Option<serde_json::Value>,
    /// The pod template hash of the stable ReplicaSet (what a fully promoted Rollout serves).
    #[serde(rename = "stableRS", default)]
    pub stable_rs: Option<String>,
    #[serde(default)]
    pub current_step_index: Option<i32>,
    #[serde(default)]
    pub pause_conditions: Vec<PauseCondition>,
    #[serde(default)]
    pub controller_pause: Option<bool>,
    #[serde(default)]
    pub abort: Option<bool>,
    #[serde(default)]
    pub replicas: Option<i32>,
    #[serde(default)]
    pub updated_replicas: Option<i32>,
    #[serde(default)]
    pub ready_replicas: Option<i32>,
    #[serde(default)]
    pub available_replicas: Option<i32>,
    #[serde(default)]
    pub canary: CanaryStatus,
    #[serde(default)]
    pub blue_green: BlueGreenStatus,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PauseCondition {
    /// CanaryPauseStep, BlueGreenPause, AnalysisRunInconclusive, InconclusiveExperiment.
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub start_time: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CanaryStatus {
    #[serde(default)]
    pub current_step_analysis_run_status: Option<AnalysisRunStatus>,
    #[serde(default)]
    pub current_background_analysis_run_status: Option<AnalysisRunStatus>,
    /// Set only with traffic routing (a mesh or an ingress controller splits the traffic).
    #[serde(default)]
    pub weights: Option<TrafficWeights>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrafficWeights {
    #[serde(default)]
    pub canary: WeightDestination,
    #[serde(default)]
    pub stable: WeightDestination,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WeightDestination {
    #[serde(default)]
    pub weight: i32,
    #[serde(default)]
    pub pod_template_hash: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlueGreenStatus {
    /// The pod template hash the active Service selects.
    #[serde(default)]
    pub active_selector: Option<String>,
    #[serde(default)]
    pub preview_selector: Option<String>,
    #[serde(default)]
    pub pre_promotion_analysis_run_status: Option<AnalysisRunStatus>,
    #[serde(default)]
    pub post_promotion_analysis_run_status: Option<AnalysisRunStatus>,
}

/// What the Rollout's status says of one of its AnalysisRuns.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisRunStatus {
    #[serde(default)]
    pub name: String,
    /// Pending, Running, Successful, Failed, Error or Inconclusive.
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub message: Option<String>,
}

fn number(v: Option<&serde_json::Value>) -> Option<i64> {
    match v? {
        serde_json::Value::String(s) => s.parse().ok(),
        serde_json::Value::Number(n) => n.as_i64(),
        _ => None,
    }
}

impl Rollout {
    /// `status.observedGeneration` as a number (0 when absent or unreadable).
    pub fn observed_generation(&self) -> i64 {
        number(
            self.status
                .as_ref()
                .and_then(|s| s.observed_generation.as_ref()),
        )
        .unwrap_or(0)
    }

    /// With a `workloadRef`: (the referenced workload's generation the annotation names, the
    /// one the status says was observed); `None` without a `workloadRef`.
    pub fn workload_generations(&self) -> Option<(Option<i64>, Option<i64>)> {
        self.spec.workload_ref.as_ref()?;
        let wanted = self
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(WORKLOAD_GENERATION))
            .and_then(|g| g.parse().ok());
        let observed = number(
            self.status
                .as_ref()
                .and_then(|s| s.workload_observed_generation.as_ref()),
        );
        Some((wanted, observed))
    }
}

crate::cluster::argo::argo_resource!(Rollout, "Rollout", "rollouts");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_the_controller_writes() {
        let r: Rollout = serde_json::from_value(serde_json::json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
            "metadata": {"name": "web", "namespace": "shop", "generation": 2},
            "spec": {"replicas": 2, "strategy": {"canary": {"steps": [
                {"setWeight": 50}, {"pause": {}}, {"experiment": {"templates": []}}]}}},
            "status": {"phase": "Paused", "observedGeneration": "2", "currentPodHash": "6b7c",
                "stableRS": "5d8f", "currentStepIndex": 1,
                "pauseConditions": [{"reason": "CanaryPauseStep", "startTime": "2026-12-06T10:00:00Z"}],
                "canary": {"currentStepAnalysisRunStatus": {"name": "web-6b7c-2", "status": "Running"}}}
        }))
        .unwrap();
        assert_eq!(r.observed_generation(), 2);
        let st = r.status.as_ref().unwrap();
        assert_eq!(st.stable_rs.as_deref(), Some("5d8f"));
        assert_eq!(st.pause_conditions[0].reason, "CanaryPauseStep");
        assert_eq!(r.spec.strategy.canary.as_ref().unwrap().steps.len(), 3);
        assert_eq!(
            st.canary
                .current_step_analysis_run_status
                .as_ref()
                .unwrap()
                .status,
            "Running"
        );
        let numeric: Rollout = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web"}, "status": {"observedGeneration": 7}
        }))
        .unwrap();
        assert_eq!(numeric.observed_generation(), 7);
    }
}
