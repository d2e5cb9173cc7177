//! The decision (pure): a function of the request, the objects, the probe answers and the clock.

use crate::serving::expect::Expect;
use crate::serving::model::{Endpoint, Objects, Probes};
use crate::serving::verdict::Verdict;
use k8s_openapi::jiff::Timestamp;
use std::time::Duration;

/// What is asked: Application `namespace/name` at `sha` serving what `expect` says on `path`,
/// decided by `deadline` (the gate's own deadline).
#[derive(Debug, Clone)]
pub struct Request {
    pub namespace: String,
    pub name: String,
    pub sha: String,
    pub expect: Expect,
    pub path: String,
    pub started: Timestamp,
    pub deadline: Timestamp,
    /// An answer older than this does not count (the shell re-probes at a fixed interval).
    pub max_answer_age: Duration,
}

/// The endpoints to probe: every ready or serving address (terminating ones included) of the
/// EndpointSlices of every Service in the Application's `status.resources`.
pub fn endpoints(objects: &Objects) -> Vec<Endpoint> {
    let _ = objects;
    unimplemented!("helper")
}

/// The decision at `now`. `lie` is the lie window so far (copied into the verdict).
pub fn decide(
    request: &Request,
    objects: &Objects,
    probes: &Probes,
    now: Timestamp,
    lie: &crate::serving::verdict::LieWindow,
) -> Verdict {
    let _ = (request, objects, probes, now, lie);
    unimplemented!("helper")
}
