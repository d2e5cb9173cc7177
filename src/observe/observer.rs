//! Waiting on live state: evaluate the pure predicates at every watch event and probe HTTP at
//! the probe interval (and at once when the Kubernetes part of the goal starts to hold), until
//! the goal holds or the deadline passes. It only reads: waiting never deploys or
//! repairs anything.

use crate::cluster::live::LiveWatch;
use crate::cluster::probe::Probe;
use crate::cluster::Cluster;
use crate::config::Config;
use crate::observe::evidence::{self, Evidence, HttpOutcome, Subject};
use crate::observe::explain;
use crate::observe::predicates::{self, Field, Target, Unmet};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// What a wait tells whoever follows it (typed; the wait prints nothing itself):
/// [`crate::report::waits`] turns these into stderr lines, the lab's run appends every
/// observation to `observations.ndjson`.
#[derive(Debug)]
pub enum WaitEvent<'a> {
    /// Every evidence evaluated.
    Observed(&'a Evidence),
    /// After a look that left conditions unmet.
    Unmet {
        target: Target,
        elapsed: Duration,
        unmet: &'a [Unmet],
    },
    /// A followed value changed; `unmet` is what is still unmet.
    Flipped {
        target: Target,
        flip: &'a Flip,
        unmet: &'a [Unmet],
    },
    Reached {
        target: Target,
        elapsed: Duration,
        events: u32,
        probes: u32,
    },
    /// The deadline passed (the error follows).
    TimedOut { target: Target },
}

/// One condition changing its live value during a wait ("health Progressing -> Degraded").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Flip {
    pub what: Field,
    pub from: String,
    pub to: String,
    /// Seconds since the wait started.
    pub at_seconds: f64,
}

impl std::fmt::Display for Flip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} -> {} at +{:.1}s",
            self.what, self.from, self.to, self.at_seconds
        )
    }
}

#[derive(Debug)]
pub struct Waited {
    pub evidence: Evidence,
    pub elapsed: Duration,
    /// Watch events seen and HTTP probes made during the wait.
    pub events: u32,
    pub probes: u32,
    /// From the watch event that completed the Kubernetes part to the return.
    pub latency_after_event: Duration,
    pub flips: Vec<Flip>,
}

#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    #[error("wait {target} {sha}: not reached within {deadline:?}\n{explanation}")]
    Timeout {
        target: &'static str,
        sha: String,
        deadline: Duration,
        unmet: Vec<Unmet>,
        evidence: Box<Evidence>,
        explanation: String,
    },
    #[error("wait {target} {sha}: reading the cluster failed: {source:#}")]
    Api {
        target: &'static str,
        sha: String,
        source: anyhow::Error,
    },
}

pub struct WaitSpec<'a> {
    pub target: Target,
    pub sha: &'a str,
    pub body: &'a str,
    pub deadline: Duration,
    /// HTTP is probed at this interval during the whole wait.
    pub probe_interval: Duration,
}

impl<'a> WaitSpec<'a> {
    /// A wait with the configured deadline and probe interval.
    pub fn new(cfg: &Config, target: Target, sha: &'a str, body: &'a str) -> Self {
        WaitSpec {
            target,
            sha,
            body,
            deadline: cfg.wait_deadline,
            probe_interval: cfg.probe_interval,
        }
    }

    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }
}

/// One observation of the live state: from the run's watches when they run (no extra
/// requests), else by concurrent GETs; and one real probe. The one "observe once" of the
/// lab, the traps and `cnpe-lab observe`.
pub async fn observe_once(
    cluster: &Cluster,
    live: Option<&LiveWatch>,
    probe: &Probe,
) -> anyhow::Result<Evidence> {
    let state = match live {
        Some(live) => live.snapshot(),
        None => cluster.live_state().await?,
    };
    let http = probe.get().await;
    Ok(evidence::derive(
        &Subject::from_config(cluster.config()),
        &state,
        &http,
        chrono::Utc::now(),
    ))
}

/// The `http_error` of evidence for which the wait made no probe.
pub const NOT_PROBED: &str = "not probed";

fn not_probed(url: String) -> HttpOutcome {
    HttpOutcome {
        url,
        code: None,
        body: None,
        error: Some(format!("{NOT_PROBED} yet")),
    }
}

fn is_http(u: &Unmet) -> bool {
    u.what.is_http()
}

/// Waits on `live` until `spec.target` holds, telling `on_event` what it sees.
pub async fn wait_for(
    cluster: &Cluster,
    live: &mut LiveWatch,
    probe: &Probe,
    spec: &WaitSpec<'_>,
    on_event: &mut dyn FnMut(&WaitEvent<'_>),
) -> Result<Waited, WaitError> {
    let name = spec.target.name();
    let subject = Subject::from_config(cluster.config());
    if let Err(e) = live.ready(spec.deadline).await {
        return Err(WaitError::Api {
            target: name,
            sha: spec.sha.into(),
            source: e,
        });
    }
    let mut w = Watching::new();
    loop {
        let (ev, unmet) = w.look(live, probe, &subject, spec).await;
        on_event(&WaitEvent::Observed(&ev));
        for flip in track_flips(&mut w.found, &ev, w.start) {
            on_event(&WaitEvent::Flipped {
                target: spec.target,
                flip: &flip,
                unmet: &unmet,
            });
            w.flips.push(flip);
        }
        if unmet.is_empty() {
            let waited = w.reached(ev);
            on_event(&WaitEvent::Reached {
                target: spec.target,
                elapsed: waited.elapsed,
                events: waited.events,
                probes: waited.probes,
            });
            return Ok(waited);
        }
        on_event(&WaitEvent::Unmet {
            target: spec.target,
            elapsed: w.start.elapsed(),
            unmet: &unmet,
        });
        let left = spec.deadline.saturating_sub(w.start.elapsed());
        if left.is_zero() {
            on_event(&WaitEvent::TimedOut {
                target: spec.target,
            });
            return Err(w.timed_out(cluster, live, spec, unmet, ev).await);
        }
        // Sleep until the next watch event or the next probe, whichever comes first.
        let since_probe = w
            .last_probe
            .as_ref()
            .map_or(Duration::ZERO, |(t, _)| t.elapsed());
        let nap = spec
            .probe_interval
            .saturating_sub(since_probe)
            .max(Duration::from_millis(1))
            .min(left);
        if live.changed(nap).await {
            w.events += 1;
        }
    }
}

/// What one wait has seen so far.
struct Watching {
    start: Instant,
    events: u32,
    probes: u32,
    last_probe: Option<(Instant, HttpOutcome)>,
    /// Since when the Kubernetes part of the goal holds.
    kube_met_at: Option<Instant>,
    found: BTreeMap<Field, String>,
    flips: Vec<Flip>,
    zero_endpoints_since: Option<Instant>,
}

impl Watching {
    fn new() -> Self {
        Watching {
            start: Instant::now(),
            events: 0,
            probes: 0,
            last_probe: None,
            kube_met_at: None,
            found: BTreeMap::new(),
            flips: Vec::new(),
            zero_endpoints_since: None,
        }
    }

    /// The evidence now and what it leaves unmet, probing HTTP when due.
    async fn look(
        &mut self,
        live: &LiveWatch,
        probe: &Probe,
        subject: &Subject,
        spec: &WaitSpec<'_>,
    ) -> (Evidence, Vec<Unmet>) {
        let state = live.snapshot();
        let http = self
            .last_probe
            .as_ref()
            .map(|(_, h)| h.clone())
            .unwrap_or_else(|| not_probed(probe.url()));
        let mut ev = evidence::derive(subject, &state, &http, chrono::Utc::now());
        let mut unmet = predicates::unmet(spec.target, &ev, spec.sha, spec.body);
        if unmet.iter().all(is_http) {
            self.kube_met_at.get_or_insert_with(Instant::now);
        } else {
            self.kube_met_at = None;
        }
        // HTTP is probed at the probe interval during the whole wait (so the record shows
        // what users got), and at once when the Kubernetes part starts to hold: an answer from
        // before that says nothing about the goal.
        let kube_met_at = self.kube_met_at;
        let due = self.last_probe.as_ref().is_none_or(|(t, _)| {
            t.elapsed() >= spec.probe_interval || kube_met_at.is_some_and(|k| *t < k)
        });
        if due {
            let h = probe.get().await;
            self.probes += 1;
            self.last_probe = Some((Instant::now(), h.clone()));
            ev = evidence::derive(subject, &state, &h, chrono::Utc::now());
            unmet = predicates::unmet(spec.target, &ev, spec.sha, spec.body);
        }
        if ev.ready_endpoints == 0 {
            self.zero_endpoints_since.get_or_insert_with(Instant::now);
        } else {
            self.zero_endpoints_since = None;
        }
        (ev, unmet)
    }

    fn reached(self, ev: Evidence) -> Waited {
        Waited {
            evidence: ev,
            elapsed: self.start.elapsed(),
            events: self.events,
            probes: self.probes,
            latency_after_event: self.kube_met_at.map(|t| t.elapsed()).unwrap_or_default(),
            flips: self.flips,
        }
    }

    /// The deadline passed: the unmet conditions with their live values, explained.
    async fn timed_out(
        self,
        cluster: &Cluster,
        live: &LiveWatch,
        spec: &WaitSpec<'_>,
        unmet: Vec<Unmet>,
        ev: Evidence,
    ) -> WaitError {
        let context = crate::observe::observer::context(
            cluster,
            live,
            self.zero_endpoints_since.map(|t| t.elapsed()),
            &self.flips,
        )
        .await;
        let explanation = explain::explain(spec.target, spec.sha, &unmet, &ev, &context);
        WaitError::Timeout {
            target: spec.target.name(),
            sha: spec.sha.into(),
            deadline: spec.deadline,
            unmet,
            evidence: Box::new(ev),
            explanation,
        }
    }
}

/// The followed values that changed since the last look (and now `found`).
fn track_flips(found: &mut BTreeMap<Field, String>, ev: &Evidence, start: Instant) -> Vec<Flip> {
    let now: BTreeMap<Field, String> = predicates::tracked_values(ev).into_iter().collect();
    let at_seconds = start.elapsed().as_secs_f64();
    let flips = now
        .iter()
        .filter_map(|(what, value)| {
            let old = found.get(what).filter(|old| *old != value)?;
            Some(Flip {
                what: *what,
                from: old.clone(),
                to: value.clone(),
                at_seconds,
            })
        })
        .collect();
    *found = now;
    flips
}

/// Reads the extra context for a human (Application, pods, events, ReplicaSets). Best effort:
/// a read that fails is named in the explanation instead.
pub async fn context(
    cluster: &Cluster,
    live: &LiveWatch,
    zero_endpoints_for: Option<Duration>,
    flips: &[Flip],
) -> explain::Context {
    let (pods, events, replica_sets, slices) = tokio::join!(
        cluster.pods(),
        cluster.events(),
        cluster.replica_sets(),
        cluster.endpoint_slices()
    );
    let mut read_errors = Vec::new();
    let mut keep = |what: &str, e: anyhow::Error| read_errors.push(format!("{what}: {e:#}"));
    let pods = pods.unwrap_or_else(|e| {
        keep("pods", e);
        vec![]
    });
    let events = events.unwrap_or_else(|e| {
        keep("events", e);
        vec![]
    });
    let replica_sets = replica_sets.unwrap_or_else(|e| {
        keep("replicasets", e);
        vec![]
    });
    let listed_ready_endpoints = slices
        .map(|s| crate::observe::evidence::ready_endpoints(&s))
        .map_err(|e| keep("endpointslices", e))
        .ok();
    let state = live.snapshot();
    explain::Context {
        application: state.application,
        deployment: state.deployment,
        pods,
        events,
        replica_sets,
        zero_endpoints_for,
        flips: flips.iter().map(|f| f.to_string()).collect(),
        last_watch_error: live.last_error().map(|e| {
            format!(
                "{} watch, {:.0}s ago: {}",
                e.kind,
                e.at.elapsed().as_secs_f64(),
                e.message
            )
        }),
        listed_ready_endpoints,
        read_errors,
    }
}
