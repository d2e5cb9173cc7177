//! cnpe-lab: automates the GitOps lab "a Synced outage, recovered through Git" on a real
//! Kubernetes cluster with a real Argo CD, and gates releases on what is really serving.
//!
//! Functional core (pure, exhaustively tested): [`gate`], [`strict_json`], [`sha`],
//! [`evidence`], [`manifests`], [`argo`], [`wait`] (predicates and explanations), [`grade`],
//! [`resume`], [`step`], [`safety`], [`config`].
//! I/O shell, one job each: [`git`] and [`history`] (git2), [`cluster`] (the Kubernetes API),
//! [`live`] (watches), [`probe`] (the HTTP probe), [`observer`] (waiting on live state),
//! [`records`] (write-once files), [`lock`], [`kubeconfig`], [`launcher`] (release-gate.py),
//! [`provision`] (CNPE_CLUSTER), [`lab`] (the steps) and [`runner`] (the one run policy).

// functional core
pub mod argo;
pub mod config;
pub mod evidence;
pub mod gate;
pub mod grade;
pub mod manifests;
pub mod resume;
pub mod safety;
pub mod sha;
pub mod step;
pub mod strict_json;
pub mod wait;

// I/O shell
pub mod cluster;
pub mod git;
pub mod history;
pub mod junit;
pub mod kubeconfig;
pub mod lab;
pub mod launcher;
pub mod live;
pub mod lock;
pub mod observations;
pub mod observer;
pub mod probe;
pub mod provision;
pub mod records;
pub mod report;
pub mod runner;
