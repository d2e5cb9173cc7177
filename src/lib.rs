//! cnpe-lab: automates the GitOps lab "a Synced outage, recovered through Git" on a real
//! Kubernetes cluster with a real Argo CD, and gates releases on what is really serving.
//!
//! Functional core (pure, exhaustively tested): [`gate`], [`strict_json`], [`evidence`],
//! [`manifests`], [`argo`], [`wait`], [`history`]. I/O shell: [`git`], [`cluster`], [`probe`],
//! [`records`], and [`lab`], which runs the steps.

pub mod gate;
pub mod records;
pub mod strict_json;
pub mod argo;
pub mod config;
pub mod manifests;
pub mod git;
pub mod history;
pub mod evidence;
pub mod wait;
pub mod cluster;
pub mod observer;
pub mod lab;
