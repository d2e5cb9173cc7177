//! The observation loop: poll live state until a wait predicate holds or the deadline passes.
//! It only reads: waiting never deploys or repairs anything.

use crate::cluster::Cluster;
use crate::evidence::Evidence;
use crate::wait::{self, Target, Unmet};
use std::io::Write;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Waited {
    pub evidence: Evidence,
    pub elapsed: Duration,
    pub polls: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    #[error("wait {target} {sha}: not reached within {deadline:?}\n{explanation}")]
    Timeout { target: &'static str, sha: String, deadline: Duration, unmet: Vec<Unmet>, evidence: Box<Evidence>, explanation: String },
    #[error("wait {target} {sha}: reading the cluster failed: {source:#}")]
    Api { target: &'static str, sha: String, source: anyhow::Error },
}

/// Polls every `poll` until `target` holds for `sha` or `deadline` passes. With `progress`, one
/// updating line on stderr shows what is still unmet and the elapsed time.
pub async fn wait_for(
    cluster: &Cluster,
    target: Target,
    sha: &str,
    body: &str,
    deadline: Duration,
    poll: Duration,
    progress: bool,
) -> Result<Waited, WaitError> {
    let start = Instant::now();
    let mut polls = 0;
    loop {
        polls += 1;
        match cluster.observe().await {
            Ok(ev) => {
                let unmet = wait::unmet(target, &ev, sha, body);
                if unmet.is_empty() {
                    if progress {
                        eprint!("\r\x1b[2K");
                        eprintln!("wait {}: reached after {:.1}s ({polls} polls)", target.name(), start.elapsed().as_secs_f64());
                    }
                    return Ok(Waited { evidence: ev, elapsed: start.elapsed(), polls });
                }
                if progress {
                    let names: Vec<&str> = unmet.iter().map(|u| u.what).collect();
                    eprint!("\r\x1b[2Kwait {} {:>5.1}s: unmet {}", target.name(), start.elapsed().as_secs_f64(), names.join(", "));
                    let _ = std::io::stderr().flush();
                }
                if start.elapsed() >= deadline {
                    if progress {
                        eprintln!();
                    }
                    let explanation = explain(cluster, target, sha, &unmet, &ev).await;
                    return Err(WaitError::Timeout {
                        target: target.name(),
                        sha: sha.into(),
                        deadline,
                        unmet,
                        evidence: Box::new(ev),
                        explanation,
                    });
                }
            }
            // A transient API error is retried until the deadline, then reported as the cause.
            Err(e) => {
                if start.elapsed() >= deadline {
                    return Err(WaitError::Api { target: target.name(), sha: sha.into(), source: e });
                }
                eprintln!("wait {}: reading the cluster failed, retrying: {e:#}", target.name());
            }
        }
        tokio::time::sleep(poll.min(deadline.saturating_sub(start.elapsed())).max(Duration::from_millis(50))).await;
    }
}

/// Reads the extra context for a human (pods, events, Application) and renders it.
pub async fn explain(cluster: &Cluster, target: Target, sha: &str, unmet: &[Unmet], ev: &Evidence) -> String {
    let app = cluster.application().await.ok().flatten();
    let pods = cluster.pods().await.unwrap_or_default();
    let events = cluster.events().await.unwrap_or_default();
    wait::explain(target, sha, unmet, ev, app.as_ref(), &pods, &events)
}
