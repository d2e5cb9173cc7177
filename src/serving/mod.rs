//! The any-Application gate, `cnpe-lab gate`: it approves an Argo CD Application only when,
//! at one instant, Argo CD is at the expected SHA and fresh, every workload of the Application
//! runs only the new revision, and every ready or serving endpoint of every Service of the
//! Application answers 2xx with the expected content. Not to be confused with
//! [`crate::release_gate`], the lab's `release-gate` contract on a recorded state file.
//!
//! Pure core (a function of the objects, the probe answers and the clock it is given):
//! [`expect`] (what an answer must contain), [`model`] (the inputs), [`workloads`] (revision and
//! readiness of Deployments, StatefulSets, DaemonSets and Pods), [`decide`] (the decision and
//! which endpoints to probe), [`verdict`] (the verdict, its JSON and text, the lie window, the
//! OpenMetrics file) and [`index`] (which Applications an object change can affect, so a fleet
//! never rescans everything).

pub mod decide;
pub mod expect;
pub mod index;
pub mod model;
pub mod prober;
pub mod route_prober;
pub mod routes;
pub mod run;
pub mod verdict;
pub mod via_route;
pub mod workloads;
