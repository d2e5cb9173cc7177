//! cnpe-lab: automates the GitOps lab "a Synced outage, recovered through Git" on a real
//! Kubernetes cluster with a real Argo CD, and gates releases on what is really serving.
//!
//! Functional core (pure, exhaustively tested): [`gate`], [`strict_json`], [`evidence`],
//! [`manifests`], [`argo`], [`wait`], [`config`]. I/O shell: [`git`] and [`history`] (git2),
//! [`cluster`] (kube-rs, including the HTTP probe), [`observer`] (the polling loop),
//! [`records`] (write-once files), [`launcher`] (installs step 8's `release-gate.py`), [`lock`]
//! (one cnpe-lab per evidence dir), [`kubeconfig`] (loading without quoting the file), and
//! [`lab`], which runs the steps and the grading.

// functional core
pub mod argo;
pub mod config;
pub mod evidence;
pub mod gate;
pub mod manifests;
pub mod strict_json;
pub mod wait;

// I/O shell
pub mod cluster;
pub mod git;
pub mod history;
pub mod kubeconfig;
pub mod lab;
pub mod launcher;
pub mod lock;
pub mod observer;
pub mod records;
