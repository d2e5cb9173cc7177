//! cnpe-lab: automates the GitOps lab "a Synced outage, recovered through Git" on a real
//! Kubernetes cluster with a real Argo CD, and gates releases on what is really serving.
//!
//! The folders are the layers:
//! - [`release_gate`]: the lab's `release-gate` contract (pure, fail-closed) and its strict JSON.
//! - [`observe`]: evidence derivation, wait predicates and explanations (pure), the observer
//!   that waits on live watches, and the append-only observations.
//! - [`lab`]: the lab's steps, the one runner, resume, grading, history,
//!   the Git workflow, manifests and `release-gate.py`.
//! - [`cluster`]: the Kubernetes side: the API, watches, the HTTP probe, kubeconfig, the
//!   safety rule, typed Argo CD objects, `CNPE_CLUSTER` provisioning.
//! - [`report`]: the one reporter of a run (stderr lines, `timeline.json`, JUnit, `report.svg`).
//!
//! Shared by all: [`config`], [`sha`], [`lock`], [`records`] (write-once files and the one list
//! of the evidence directory's files).

#![warn(clippy::too_many_lines)]

pub mod cluster;
pub mod config;
pub mod lab;
pub mod lock;
pub mod observe;
pub mod records;
pub mod release_gate;
pub mod report;
pub mod serving;
pub mod sha;
