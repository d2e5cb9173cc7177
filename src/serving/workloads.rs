//! Workload checks (pure): is a Deployment, StatefulSet, DaemonSet or bare Pod fully at its
//! newest revision, with every desired replica updated, ready and available, and no ready or
//! serving pod of an older revision? Stricter than gitops-engine's health (held against its
//! own fixtures in tests/serving_health.rs).

use crate::serving::model::Objects;
use crate::serving::verdict::{Condition, Unmet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// The workload kinds the gate checks (closed set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum WorkloadKind {
    Deployment,
    StatefulSet,
    DaemonSet,
    Pod,
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
/// Pod -> ReplicaSet -> Deployment, Pod -> StatefulSet, Pod -> DaemonSet, by kind, name and
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
                        (d.kind == "Deployment")
                            .then(|| by(WorkloadKind::Deployment, &d.name))
                            .flatten()
                            .filter(|w| {
                                uid_ok(
                                    d,
                                    find(&objects.deployments, &w.namespace, &w.name)
                                        .map(|x| &x.metadata),
                                )
                            })
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
