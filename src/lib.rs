//! cnpe-lab: automates the GitOps lab "a Synced outage, recovered through Git" on a real
//! Kubernetes cluster with a real Argo CD, and gates releases on what is really serving.
//!
//! Functional core (pure, exhaustively tested): [`gate`], [`strict_json`], [`evidence`],
//! [`manifests`], [`argo`], [`wait`], [`history`]. I/O shell: [`git`], [`cluster`], [`probe`],
//! [`records`], and [`lab`], which runs the steps.

pub mod gate;
pub mod records;
pub mod strict_json;
