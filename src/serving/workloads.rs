//! Workload checks (pure): is a Deployment, StatefulSet, DaemonSet or bare Pod fully at its
//! newest revision, with every desired replica updated, ready and available, and no ready or
//! serving pod of an older revision? Stricter than gitops-engine's health (held against its
//! own fixtures in tests/serving_health.rs).

use crate::cluster::rollouts::{Rollout, POD_TEMPLATE_HASH, WORKLOAD_GENERATION};
use crate::serving::model::Objects;
use crate::serving::verdict::{Condition, Unmet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// The workload kinds the gate checks (closed set). Each is one row of [`WorkloadKind::ALL`]
/// with its API group and kind; its check is [`check`]'s arm of the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum WorkloadKind {
    Deployment,
    StatefulSet,
    DaemonSet,
    Pod,
    /// Argo Rollouts' Rollout (argoproj.io): canary or blue-green.
    Rollout,
}

impl WorkloadKind {
    pub const ALL: [WorkloadKind; 5] = [
        WorkloadKind::Deployment,
        WorkloadKind::StatefulSet,
        WorkloadKind::DaemonSet,
        WorkloadKind::Pod,
        WorkloadKind::Rollout,
    ];

    /// (API group, kind) as Argo CD's `status.resources` and ownerReferences name it.
    pub fn group_kind(self) -> (&'static str, &'static str) {
        match self {
            WorkloadKind::Deployment => ("apps", "Deployment"),
            WorkloadKind::StatefulSet => ("apps", "StatefulSet"),
            WorkloadKind::DaemonSet => ("apps", "DaemonSet"),
            WorkloadKind::Pod => ("", "Pod"),
            WorkloadKind::Rollout => (crate::cluster::argo::GROUP, "Rollout"),
        }
    }

    pub fn from_group_kind(group: &str, kind: &str) -> Option<WorkloadKind> {
        Self::ALL
            .into_iter()
            .find(|k| k.group_kind() == (group, kind))
    }

    /// "Deployment, StatefulSet, DaemonSet, Pod, Rollout".
    pub fn names() -> String {
        Self::ALL
            .iter()
            .map(|k| k.group_kind().1)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A workload of the Application (from `status.resources`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct WorkloadRef {
    pub kind: WorkloadKind,
    pub namespace: String,
    pub name: String,
}

impl WorkloadRef {
    /// "Deployment shop/web".
    pub fn subject(&self) -> String {
        format!("{:?} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// The annotation a Deployment's ReplicaSets carry their revision number in.
pub const REVISION: &str = "deployment.kubernetes.io/revision";
/// Set on a ReplicaSet the Deployment went back to (a rollback to an existing ReplicaSet).
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";

/// What one workload's check found: its unmet conditions (empty = at its newest revision,
/// fully rolled out) and, for each of its pods, the revision label the pod carries and
/// whether that is the newest one.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct WorkloadCheck {
    pub workload: WorkloadRef,
    pub unmet: Vec<Unmet>,
    /// Pod name -> (its revision, whether it is the workload's newest revision).
    pub pods: Vec<PodRevision>,
    /// Short human sentences explaining the unmet conditions, each with the condition it
    /// explains (the verdict's `likely_causes` are made of these).
    pub likely_causes: Vec<(Condition, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PodRevision {
    pub pod: String,
    pub revision: Option<String>,
    pub newest: bool,
    pub ready: bool,
}

/// Whether the pod's `Ready` condition is `True`.
pub fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

/// Whether `r` points at `owner` (kind and name; the uid too when both sides have one, so a
/// workload deleted and recreated under the same name does not own the old one's objects).
fn refers_to(r: &OwnerReference, kind: &str, owner: &ObjectMeta) -> bool {
    r.kind == kind
        && Some(r.name.as_str()) == owner.name.as_deref()
        && match owner.uid.as_deref() {
            Some(uid) if !r.uid.is_empty() => r.uid == uid,
            _ => true,
        }
}

fn owned_by(meta: &ObjectMeta, kind: &str, owner: &ObjectMeta) -> bool {
    meta.namespace == owner.namespace
        && meta
            .owner_references
            .as_ref()
            .is_some_and(|refs| refs.iter().any(|r| refers_to(r, kind, owner)))
}

fn find<'a, K: kube::Resource>(
    list: &'a [std::sync::Arc<K>],
    namespace: &str,
    name: &str,
) -> Option<&'a K> {
    list.iter().map(|o| o.as_ref()).find(|o| {
        o.meta().namespace.as_deref() == Some(namespace) && o.meta().name.as_deref() == Some(name)
    })
}

fn name_of(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

/// "pod web-abc of revision 6 (pod-template-hash 5d8f)" lists, at most five named.
fn list_pods(pods: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut out = pods
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if pods.len() > SHOWN {
        out.push_str(&format!(" and {} more", pods.len() - SHOWN));
    }
    out
}

struct Found {
    check: WorkloadCheck,
    subject: String,
    /// Pod -> its ReplicaSet's revision number (Deployments), for messages.
    numbers: std::collections::HashMap<String, i64>,
}

impl Found {
    /// "pod web-abc of revision 6 (5d8f7c)" or "pod db-0 of revision db-7f9c".
    fn pod_desc(&self, p: &PodRevision) -> String {
        let label = p.revision.as_deref().unwrap_or("(none)");
        match self.numbers.get(&p.pod) {
            Some(n) => format!("pod {} of revision {n} ({label})", p.pod),
            None => format!("pod {} of revision {label}", p.pod),
        }
    }

    fn unmet(&mut self, condition: Condition, want: String, found: String) {
        self.check.unmet.push(Unmet {
            condition,
            subject: self.subject.clone(),
            want,
            found,
        });
    }

    /// An unmet condition and the likely cause that explains it.
    fn fail(&mut self, condition: Condition, want: String, found: String, cause: String) {
        self.unmet(condition, want, found);
        self.cause(condition, cause);
    }

    fn cause(&mut self, condition: Condition, text: String) {
        if !self.check.likely_causes.iter().any(|(_, t)| *t == text) {
            self.check.likely_causes.push((condition, text));
        }
    }

    fn generation(&mut self, meta: &ObjectMeta, observed: Option<i64>) {
        let generation = meta.generation.unwrap_or(0);
        let observed = observed.unwrap_or(0);
        if observed < generation {
            self.fail(
                Condition::WorkloadGeneration,
                format!("observedGeneration >= generation {generation}"),
                format!("observedGeneration {observed}"),
                format!(
                    "the controller has not yet observed the latest spec of {}: its status describes an older one",
                    self.subject
                ),
            );
        }
    }

    /// Ready pods not at the newest revision: one unmet naming them.
    fn old_ready(&mut self, newest: &str) {
        let old: Vec<String> = self
            .check
            .pods
            .iter()
            .filter(|p| p.ready && !p.newest)
            .map(|p| self.pod_desc(p))
            .collect();
        if !old.is_empty() {
            self.fail(
                Condition::OldRevisionServing,
                format!("no ready pod of a revision other than {newest}"),
                format!("{} ready", list_pods(&old)),
                format!(
                    "{} still has ready pods of an older revision: old and new content are served side by side",
                    self.subject
                ),
            );
        }
    }

    fn old_ready_names(&self) -> Vec<String> {
        self.check
            .pods
            .iter()
            .filter(|p| p.ready && !p.newest)
            .map(|p| format!("{} ready", self.pod_desc(p)))
            .collect()
    }
}

/// Checks one workload against the objects (missing workload = unmet, named).
///
/// - Deployment: `observedGeneration >= generation` (WorkloadGeneration); not `spec.paused`
///   (WorkloadPaused: a paused rollout never completes, so it never approves); a newest
///   ReplicaSet exists (the one it owns with the highest `deployment.kubernetes.io/revision`;
///   else WorkloadRevision); `spec.replicas` (default 1) == updated == ready == available ==
///   `status.replicas` (WorkloadReplicas, which also fails while old pods still exist); its
///   pods' revision is their `pod-template-hash`, newest when their ReplicaSet is the newest.
/// - StatefulSet: observedGeneration; ready == `status.replicas` == `spec.replicas`
///   (WorkloadReplicas); `updateRevision == currentRevision`, or for OnDelete / a partition
///   `updatedReplicas == spec.replicas` (WorkloadRevision, since `currentRevision` never
///   advances under OnDelete); every pod's `controller-revision-hash` == `updateRevision`
///   (WorkloadRevision, naming the pods).
/// - DaemonSet: observedGeneration; updated == available == ready == desired scheduled
///   (WorkloadReplicas); every pod's `pod-template-generation` == `metadata.generation`
///   (WorkloadRevision). Conservative: a spec change outside the template bumps the
///   generation without recreating pods, and then the gate waits (never approves falsely).
/// - Pod (bare): its Ready condition True (WorkloadReplicas); its revision is none, always
///   the newest.
///
/// For every kind, ready pods not of the newest revision are one OldRevisionServing unmet
/// naming them (at most five, then a count).
pub fn check(workload: &WorkloadRef, objects: &Objects) -> WorkloadCheck {
    let mut f = Found {
        check: WorkloadCheck {
            workload: workload.clone(),
            unmet: Vec::new(),
            pods: Vec::new(),
            likely_causes: Vec::new(),
        },
        subject: workload.subject(),
        numbers: Default::default(),
    };
    let (ns, name) = (workload.namespace.as_str(), workload.name.as_str());
    let exists = match workload.kind {
        WorkloadKind::Deployment => {
            find(&objects.deployments, ns, name).map(|d| deployment(&mut f, d, objects))
        }
        WorkloadKind::StatefulSet => {
            find(&objects.stateful_sets, ns, name).map(|s| stateful_set(&mut f, s, objects))
        }
        WorkloadKind::DaemonSet => {
            find(&objects.daemon_sets, ns, name).map(|d| daemon_set(&mut f, d, objects))
        }
        WorkloadKind::Pod => find(&objects.pods, ns, name).map(|p| bare_pod(&mut f, p)),
        WorkloadKind::Rollout => {
            find(&objects.rollouts, ns, name).map(|r| rollout(&mut f, r, objects))
        }
    };
    if exists.is_none() {
        f.fail(
            Condition::WorkloadExists,
            "it exists (listed in the Application's status.resources)".into(),
            "absent from the cluster".into(),
            format!(
                "{} is listed by the Application but absent: pruned, deleted by hand, or not created yet",
                f.subject
            ),
        );
    }
    f.check
}

fn deployment(f: &mut Found, d: &k8s_openapi::api::apps::v1::Deployment, objects: &Objects) {
    let spec = d.spec.as_ref();
    let st = d.status.clone().unwrap_or_default();
    f.generation(&d.metadata, st.observed_generation);
    if spec.and_then(|s| s.paused) == Some(true) {
        f.fail(
            Condition::WorkloadPaused,
            "spec.paused false".into(),
            "paused".into(),
            format!(
                "{} is paused (kubectl rollout pause): its rollout does not progress until resumed",
                f.subject
            ),
        );
    }
    let sets: Vec<&k8s_openapi::api::apps::v1::ReplicaSet> = objects
        .replica_sets
        .iter()
        .map(|r| r.as_ref())
        .filter(|rs| owned_by(&rs.metadata, "Deployment", &d.metadata))
        .collect();
    let rev = |rs: &k8s_openapi::api::apps::v1::ReplicaSet| {
        annotation(&rs.metadata, REVISION)
            .and_then(|r| r.parse::<i64>().ok())
            .unwrap_or(0)
    };
    let newest = sets
        .iter()
        .max_by_key(|rs| {
            (
                rev(rs),
                rs.metadata.creation_timestamp.as_ref().map(|t| t.0),
                rs.metadata.name.clone(),
            )
        })
        .copied();
    let hash_of = |rs: &k8s_openapi::api::apps::v1::ReplicaSet| {
        label(&rs.metadata, "pod-template-hash").map(str::to_string)
    };
    let newest_desc = newest.map_or_else(
        || "(no ReplicaSet)".to_string(),
        |rs| {
            format!(
                "{} ({})",
                rev(rs),
                hash_of(rs).unwrap_or_else(|| name_of(&rs.metadata))
            )
        },
    );
    // Its pods: those of its ReplicaSets.
    for p in objects.pods.iter() {
        let Some(rs) = sets
            .iter()
            .find(|rs| owned_by(&p.metadata, "ReplicaSet", &rs.metadata))
        else {
            continue;
        };
        let is_newest = newest.is_some_and(|n| n.metadata.name == rs.metadata.name);
        let revision = label(&p.metadata, "pod-template-hash")
            .map(str::to_string)
            .or_else(|| hash_of(rs));
        f.numbers.insert(name_of(&p.metadata), rev(rs));
        f.check.pods.push(PodRevision {
            pod: name_of(&p.metadata),
            revision,
            newest: is_newest,
            ready: pod_ready(p),
        });
    }
    f.check.pods.sort_by(|a, b| a.pod.cmp(&b.pod));
    let Some(newest) = newest else {
        f.fail(
            Condition::WorkloadRevision,
            "a ReplicaSet of its current template".into(),
            "no ReplicaSet owned by it".into(),
            format!(
                "{} has no ReplicaSet yet: the Deployment controller has not acted on it",
                f.subject
            ),
        );
        f.old_ready(&newest_desc);
        return;
    };
    let desired = spec.and_then(|s| s.replicas).unwrap_or(1);
    let (u, r, a, t) = (
        st.updated_replicas.unwrap_or(0),
        st.ready_replicas.unwrap_or(0),
        st.available_replicas.unwrap_or(0),
        st.replicas.unwrap_or(0),
    );
    if [u, r, a, t].iter().any(|n| *n != desired) {
        let mut found = format!("{u} updated, {r} ready, {a} available, {t} in total");
        let old = f.old_ready_names();
        if !old.is_empty() {
            found.push_str(&format!("; {}", list_pods(&old)));
        }
        f.unmet(
            Condition::WorkloadReplicas,
            format!("{desired} updated ready available replicas of revision {newest_desc}, and no other"),
            found,
        );
        if annotation(&newest.metadata, REVISION_HISTORY).is_some() {
            let text = format!(
                "{} went back to an existing ReplicaSet ({}, revision-history): Kubernetes sets no progress deadline then (kubernetes/kubernetes#106054), so Argo CD never says Degraded",
                f.subject,
                name_of(&newest.metadata)
            );
            f.cause(Condition::WorkloadReplicas, text);
        }
        let text = format!(
            "{} has not finished rolling out: new pods not ready (crash loop, failing readiness probe, image pull or scheduling) or old pods still running",
            f.subject
        );
        f.cause(Condition::WorkloadReplicas, text);
    }
    f.old_ready(&newest_desc);
}

fn stateful_set(f: &mut Found, s: &k8s_openapi::api::apps::v1::StatefulSet, objects: &Objects) {
    let spec = s.spec.as_ref();
    let st = s.status.clone().unwrap_or_default();
    f.generation(&s.metadata, st.observed_generation);
    let desired = spec.and_then(|s| s.replicas).unwrap_or(1);
    let strategy = spec.and_then(|s| s.update_strategy.as_ref());
    let on_delete = strategy.and_then(|u| u.type_.as_deref()) == Some("OnDelete");
    let partition = strategy
        .and_then(|u| u.rolling_update.as_ref())
        .and_then(|r| r.partition)
        .unwrap_or(0);
    let update = st.update_revision.clone();
    for p in objects.pods.iter() {
        if !owned_by(&p.metadata, "StatefulSet", &s.metadata) {
            continue;
        }
        let revision = label(&p.metadata, "controller-revision-hash").map(str::to_string);
        f.check.pods.push(PodRevision {
            pod: name_of(&p.metadata),
            newest: update.is_some() && revision == update,
            revision,
            ready: pod_ready(p),
        });
    }
    f.check.pods.sort_by(|a, b| a.pod.cmp(&b.pod));
    let newest_desc = update.clone().unwrap_or_else(|| "(none)".into());
    let (ready, total, updated) = (
        st.ready_replicas.unwrap_or(0),
        st.replicas,
        st.updated_replicas.unwrap_or(0),
    );
    if ready != desired || total != desired {
        f.fail(
            Condition::WorkloadReplicas,
            format!("{desired} ready replicas"),
            format!("{ready} ready, {total} in total"),
            format!(
                "{} has not all its replicas ready: pods failing readiness, crash-looping or not scheduled",
                f.subject
            ),
        );
    }
    let rolled = match &update {
        None => false,
        Some(u) => {
            st.current_revision.as_ref() == Some(u)
                || ((on_delete || partition > 0) && updated == desired)
        }
    };
    let old: Vec<String> = f
        .check
        .pods
        .iter()
        .filter(|p| !p.newest)
        .map(|p| {
            format!(
                "pod {} at {}",
                p.pod,
                p.revision
                    .as_deref()
                    .unwrap_or("(no controller-revision-hash)")
            )
        })
        .collect();
    if !rolled || !old.is_empty() {
        let mut found = format!(
            "currentRevision {}, updateRevision {newest_desc}, {updated} of {desired} updated",
            st.current_revision.as_deref().unwrap_or("(none)")
        );
        if !old.is_empty() {
            found.push_str(&format!("; {}", list_pods(&old)));
        }
        f.unmet(
            Condition::WorkloadRevision,
            format!("every pod at updateRevision {newest_desc}"),
            found,
        );
        let text = if on_delete {
            format!(
                "{} has updateStrategy OnDelete: pods keep the old revision until deleted",
                f.subject
            )
        } else if partition > 0 {
            format!(
                "{} has a rolling-update partition of {partition}: pods below that ordinal keep the old revision",
                f.subject
            )
        } else {
            format!(
                "{} is still rolling its pods to the new revision",
                f.subject
            )
        };
        f.cause(Condition::WorkloadRevision, text);
    }
    f.old_ready(&newest_desc);
}

fn daemon_set(f: &mut Found, d: &k8s_openapi::api::apps::v1::DaemonSet, objects: &Objects) {
    let st = d.status.clone().unwrap_or_default();
    f.generation(&d.metadata, st.observed_generation);
    let generation = d.metadata.generation.unwrap_or(0).to_string();
    for p in objects.pods.iter() {
        if !owned_by(&p.metadata, "DaemonSet", &d.metadata) {
            continue;
        }
        let revision = label(&p.metadata, "pod-template-generation").map(str::to_string);
        f.check.pods.push(PodRevision {
            pod: name_of(&p.metadata),
            newest: revision.as_deref() == Some(generation.as_str()),
            revision,
            ready: pod_ready(p),
        });
    }
    f.check.pods.sort_by(|a, b| a.pod.cmp(&b.pod));
    let desired = st.desired_number_scheduled;
    let (u, a, r) = (
        st.updated_number_scheduled.unwrap_or(0),
        st.number_available.unwrap_or(0),
        st.number_ready,
    );
    if [u, a, r].iter().any(|n| *n != desired) {
        f.fail(
            Condition::WorkloadReplicas,
            format!("{desired} updated ready available pods (one per scheduled node)"),
            format!("{u} updated, {r} ready, {a} available"),
            format!(
                "{} has not finished rolling out on every node: new pods not ready or not scheduled",
                f.subject
            ),
        );
    }
    let old: Vec<String> = f
        .check
        .pods
        .iter()
        .filter(|p| !p.newest)
        .map(|p| {
            format!(
                "pod {} of generation {}",
                p.pod,
                p.revision.as_deref().unwrap_or("(none)")
            )
        })
        .collect();
    if !old.is_empty() {
        f.fail(
            Condition::WorkloadRevision,
            format!("every pod of pod-template-generation {generation}"),
            list_pods(&old),
            format!(
                "{} still runs pods of an older template: the rolling update has not reached every node (or updateStrategy is OnDelete)",
                f.subject
            ),
        );
    }
    f.old_ready(&format!("generation {generation}"));
}

/// The canary step a Rollout is at, for messages: "step 2 of 4 (pause), canary weight 50%".
/// The weight is the traffic router's when there is one, else the last setWeight at or
/// before the step (without traffic routing the replica ratio approximates it).
pub fn canary_position(r: &Rollout) -> Option<String> {
    let steps = &r.spec.strategy.canary.as_ref()?.steps;
    let st = r.status.as_ref();
    let index = st.and_then(|s| s.current_step_index).unwrap_or(0).max(0) as usize;
    if steps.is_empty() {
        return None;
    }
    let step = steps
        .get(index)
        .and_then(|s| s.keys().next().cloned())
        .unwrap_or_else(|| "done".into());
    let routed = st
        .and_then(|s| s.canary.weights.as_ref())
        .map(|w| w.canary.weight);
    let set = steps
        .iter()
        .take(index + 1)
        .filter_map(|s| s.get("setWeight").and_then(|w| w.as_i64()))
        .next_back();
    let weight = match (routed, set) {
        (Some(w), _) => format!(", canary weight {w}% (traffic router)"),
        (None, Some(w)) => format!(", canary weight {w}% (setWeight)"),
        (None, None) => String::new(),
    };
    Some(format!(
        "step {} of {} ({step}){weight}",
        (index + 1).min(steps.len()),
        steps.len()
    ))
}

/// A Rollout: fully promoted at its current pod template hash.
fn rollout(f: &mut Found, r: &Rollout, objects: &Objects) {
    let st = r.status.clone().unwrap_or_default();
    rollout_generations(f, r);
    let current = st.current_pod_hash.clone();
    let position = canary_position(r);
    let at = position
        .as_ref()
        .map(|p| format!(" at {p}"))
        .unwrap_or_default();
    rollout_pauses(f, r, &st, &at);
    rollout_analyses(f, &st);
    if st.abort == Some(true) {
        f.fail(
            Condition::WorkloadRevision,
            "not aborted".into(),
            format!(
                "aborted{}",
                st.message.as_deref().map(|m| format!(": {m}")).unwrap_or_default()
            ),
            format!(
                "{} was aborted (a failed AnalysisRun or `kubectl argo rollouts abort`): traffic went back to the stable ReplicaSet {}, the new revision serves nobody",
                f.subject,
                st.stable_rs.as_deref().unwrap_or("(none)")
            ),
        );
    }
    rollout_pods(f, r, objects, &current);
    let current_desc = current.clone().unwrap_or_else(|| "(none)".into());
    rollout_promotion(f, r, &st, &current, position.as_deref(), &current_desc);
    rollout_replicas(f, r, &st, &current_desc);
    f.old_ready(&current_desc);
}

/// The controller has acted on the latest spec (and on its workloadRef's latest change).
fn rollout_generations(f: &mut Found, r: &Rollout) {
    let generation = r.metadata.generation.unwrap_or(0);
    if r.observed_generation() < generation {
        f.generation(&r.metadata, Some(r.observed_generation()));
    }
    if let Some((wanted, observed)) = r.workload_generations() {
        if wanted != observed {
            let show = |g: Option<i64>| g.map_or("(none)".to_string(), |g| g.to_string());
            f.fail(
                Condition::WorkloadGeneration,
                format!("status.workloadObservedGeneration == annotation {WORKLOAD_GENERATION}"),
                format!(
                    "workloadObservedGeneration {}, {WORKLOAD_GENERATION} {}",
                    show(observed),
                    show(wanted)
                ),
                format!(
                    "{} takes its pod template from a workloadRef whose latest change the controller has not acted on yet",
                    f.subject
                ),
            );
        }
    }
}

/// `spec.paused`, pause conditions, controllerPause: named with the canary position.
fn rollout_pauses(
    f: &mut Found,
    r: &Rollout,
    st: &crate::cluster::rollouts::RolloutStatus,
    at: &str,
) {
    if r.spec.paused == Some(true) {
        f.fail(
            Condition::WorkloadPaused,
            "spec.paused false".into(),
            format!("spec.paused true{at}"),
            format!(
                "{} is paused (kubectl argo rollouts pause): it does not progress until resumed",
                f.subject
            ),
        );
    }
    if !st.pause_conditions.is_empty() || st.controller_pause == Some(true) {
        let reasons: Vec<&str> = st
            .pause_conditions
            .iter()
            .map(|p| p.reason.as_str())
            .collect();
        let reasons = if reasons.is_empty() {
            "controllerPause".to_string()
        } else {
            reasons.join(", ")
        };
        f.fail(
            Condition::WorkloadPaused,
            "no pause condition (fully promoted)".into(),
            format!("paused ({reasons}){at}"),
            format!(
                "{} is paused ({reasons}){at}: the new revision serves only part of the traffic until the pause ends or `kubectl argo rollouts promote`; the gate keeps waiting",
                f.subject
            ),
        );
    }
}

/// Every AnalysisRun the status names (step, background, pre- and post-promotion) Successful.
fn rollout_analyses(f: &mut Found, st: &crate::cluster::rollouts::RolloutStatus) {
    let analyses = [
        ("step", st.canary.current_step_analysis_run_status.as_ref()),
        (
            "background",
            st.canary.current_background_analysis_run_status.as_ref(),
        ),
        (
            "pre-promotion",
            st.blue_green.pre_promotion_analysis_run_status.as_ref(),
        ),
        (
            "post-promotion",
            st.blue_green.post_promotion_analysis_run_status.as_ref(),
        ),
    ];
    for (which, a) in analyses {
        let Some(a) = a else { continue };
        if a.status == "Successful" {
            continue;
        }
        let message = a
            .message
            .as_deref()
            .map(|m| format!(": {m}"))
            .unwrap_or_default();
        let cause = match a.status.as_str() {
            "Failed" | "Error" | "Inconclusive" => format!(
                "the {which} AnalysisRun {} of {} ended {}{message}: Argo Rollouts does not promote it (and aborts on Failed/Error), whatever Argo CD's sync status says",
                a.name, f.subject, a.status
            ),
            _ => format!(
                "the {which} AnalysisRun {} of {} is {}: the release is not promoted until it succeeds",
                a.name,
                f.subject,
                if a.status.is_empty() { "without a status yet" } else { a.status.as_str() }
            ),
        };
        f.fail(
            Condition::AnalysisPassed,
            format!("{which} AnalysisRun {} Successful", a.name),
            format!(
                "{}{message}",
                if a.status.is_empty() {
                    "(no status)"
                } else {
                    a.status.as_str()
                }
            ),
            cause,
        );
    }
}

/// Its pods: those of the ReplicaSets it owns, newest when of `currentPodHash`.
fn rollout_pods(f: &mut Found, r: &Rollout, objects: &Objects, current: &Option<String>) {
    let sets: Vec<&k8s_openapi::api::apps::v1::ReplicaSet> = objects
        .replica_sets
        .iter()
        .map(|r| r.as_ref())
        .filter(|rs| owned_by(&rs.metadata, "Rollout", &r.metadata))
        .collect();
    for p in objects.pods.iter() {
        let Some(rs) = sets
            .iter()
            .find(|rs| owned_by(&p.metadata, "ReplicaSet", &rs.metadata))
        else {
            continue;
        };
        let revision = label(&p.metadata, POD_TEMPLATE_HASH)
            .or_else(|| label(&rs.metadata, POD_TEMPLATE_HASH))
            .map(str::to_string);
        f.check.pods.push(PodRevision {
            pod: name_of(&p.metadata),
            newest: current.is_some() && revision == *current,
            revision,
            ready: pod_ready(p),
        });
    }
    f.check.pods.sort_by(|a, b| a.pod.cmp(&b.pod));
}

/// Fully promoted: phase Healthy, stableRS == currentPodHash, and (blue-green) the active
/// Service selecting it.
fn rollout_promotion(
    f: &mut Found,
    r: &Rollout,
    st: &crate::cluster::rollouts::RolloutStatus,
    current: &Option<String>,
    position: Option<&str>,
    current_desc: &str,
) {
    let phase = st.phase.as_deref().unwrap_or("(no phase)");
    let blue_green = r.spec.strategy.blue_green.is_some();
    let active_ok = !blue_green || st.blue_green.active_selector == *current;
    if current.is_none() || phase != "Healthy" || st.stable_rs != *current || !active_ok {
        let mut found = format!(
            "phase {phase}{}, stableRS {}, currentPodHash {current_desc}",
            st.message
                .as_deref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default(),
            st.stable_rs.as_deref().unwrap_or("(none)"),
        );
        if blue_green {
            found.push_str(&format!(
                ", active Service selects {}",
                st.blue_green
                    .active_selector
                    .as_deref()
                    .unwrap_or("(nothing yet)")
            ));
        }
        if let Some(p) = &position {
            found.push_str(&format!(", {p}"));
        }
        let text = if blue_green && !active_ok {
            format!(
                "{}'s active Service still selects {} while the new revision is {current_desc}: clients are served the old release until it is promoted",
                f.subject,
                st.blue_green.active_selector.as_deref().unwrap_or("nothing")
            )
        } else {
            format!(
                "{} is not fully promoted: the stable ReplicaSet is not the current one, so part or all of the traffic still goes to the old revision",
                f.subject
            )
        };
        f.fail(
            Condition::WorkloadRevision,
            format!("phase Healthy, fully promoted: stableRS == currentPodHash {current_desc}"),
            found,
            text,
        );
    }
}

fn rollout_replicas(
    f: &mut Found,
    r: &Rollout,
    st: &crate::cluster::rollouts::RolloutStatus,
    current_desc: &str,
) {
    let desired = r.spec.replicas.unwrap_or(1);
    let (u, rd, a, t) = (
        st.updated_replicas.unwrap_or(0),
        st.ready_replicas.unwrap_or(0),
        st.available_replicas.unwrap_or(0),
        st.replicas.unwrap_or(0),
    );
    if [u, rd, a, t].iter().any(|n| *n != desired) {
        f.fail(
            Condition::WorkloadReplicas,
            format!("{desired} updated ready available replicas of {current_desc}, and no other"),
            format!("{u} updated, {rd} ready, {a} available, {t} in total"),
            format!(
                "{} has not finished rolling out: new pods not ready, or old ones still running (a canary step, or a blue-green scaleDownDelay)",
                f.subject
            ),
        );
    }
}

fn bare_pod(f: &mut Found, p: &Pod) {
    let ready = pod_ready(p);
    // A pod with restartPolicy Never or OnFailure runs to completion (a job-like or hook pod):
    // serving from it now says nothing about serving later (gitops-engine calls it Progressing
    // while it runs).
    let restart = p
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always");
    if restart != "Always" {
        f.fail(
            Condition::WorkloadReplicas,
            "a long-running pod (restartPolicy Always)".into(),
            format!("restartPolicy {restart}: it runs to completion"),
            format!(
                "{} has restartPolicy {restart}: it exits when done, so it is not a serving release (use a Deployment)",
                f.subject
            ),
        );
    }
    f.check.pods.push(PodRevision {
        pod: name_of(&p.metadata),
        revision: None,
        newest: true,
        ready,
    });
    if !ready {
        let phase = p
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "no phase".into());
        let cond = p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .map_or_else(
                || "no Ready condition".to_string(),
                |c| {
                    format!(
                        "Ready {}{}",
                        c.status,
                        c.reason
                            .as_ref()
                            .map_or(String::new(), |r| format!(" ({r})"))
                    )
                },
            );
        f.fail(
            Condition::WorkloadReplicas,
            "Ready True".into(),
            format!("{phase}, {cond}"),
            format!(
                "{} is not ready: failing readiness probe, crash loop or image pull",
                f.subject
            ),
        );
    }
}

/// The workload (of `workloads`) that owns `pod`, following ownerReferences through
/// ReplicaSets; `None` for a pod no workload of the Application owns (a stray).
///
/// Pod -> ReplicaSet -> Deployment or Rollout, Pod -> StatefulSet, Pod -> DaemonSet, by kind, name and
/// namespace (and uid when both sides carry one); a pod listed itself as a bare Pod is its own
/// owner. A pod whose ReplicaSet is not in `objects`, or whose owner is not one of
/// `workloads` (another Application's, or a ReplicaSet created by hand), is a stray.
pub fn owner_of<'a>(
    pod: &Pod,
    workloads: &'a [WorkloadRef],
    objects: &Objects,
) -> Option<&'a WorkloadRef> {
    let ns = pod.metadata.namespace.as_deref()?;
    let name = pod.metadata.name.as_deref()?;
    let by = |kind: WorkloadKind, owner: &str| {
        workloads
            .iter()
            .find(|w| w.kind == kind && w.namespace == ns && w.name == owner)
    };
    // The owner object must be the one the reference names (uid), when it is known.
    let uid_ok = |r: &OwnerReference, meta: Option<&ObjectMeta>| match meta {
        Some(m) => refers_to(r, &r.kind, m),
        None => true,
    };
    for r in pod.metadata.owner_references.iter().flatten() {
        let found = match r.kind.as_str() {
            "ReplicaSet" => find(&objects.replica_sets, ns, &r.name)
                .filter(|rs| refers_to(r, "ReplicaSet", &rs.metadata))
                .and_then(|rs| {
                    rs.metadata.owner_references.iter().flatten().find_map(|d| {
                        match d.kind.as_str() {
                            "Deployment" => by(WorkloadKind::Deployment, &d.name).filter(|w| {
                                uid_ok(
                                    d,
                                    find(&objects.deployments, &w.namespace, &w.name)
                                        .map(|x| &x.metadata),
                                )
                            }),
                            "Rollout" => by(WorkloadKind::Rollout, &d.name).filter(|w| {
                                uid_ok(
                                    d,
                                    find(&objects.rollouts, &w.namespace, &w.name)
                                        .map(|x| &x.metadata),
                                )
                            }),
                            _ => None,
                        }
                    })
                }),
            "StatefulSet" => by(WorkloadKind::StatefulSet, &r.name).filter(|w| {
                uid_ok(
                    r,
                    find(&objects.stateful_sets, &w.namespace, &w.name).map(|x| &x.metadata),
                )
            }),
            "DaemonSet" => by(WorkloadKind::DaemonSet, &r.name).filter(|w| {
                uid_ok(
                    r,
                    find(&objects.daemon_sets, &w.namespace, &w.name).map(|x| &x.metadata),
                )
            }),
            _ => None,
        };
        if found.is_some() {
            return found;
        }
    }
    by(WorkloadKind::Pod, name)
}
