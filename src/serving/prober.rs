//! The gate's probes: every endpoint on its own, directly (`http://IP:PORT/PATH`, inside the
//! cluster: the PostSync hook) or through the API server's pod proxy (outside it), at most
//! `concurrency` requests in flight and each endpoint at most once per interval. An answer is
//! evidence, never an error: a refused connection or a 503 is what the endpoint said.

use crate::cluster::probe::{answer, read_bounded, through_api};
use crate::serving::model::{EndpointKey, ProbeAnswer};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Semaphore};

pub use crate::cluster::probe::PROBE_TIMEOUT;

/// How endpoints are reached (closed set).
#[derive(Clone)]
pub enum Via {
    /// `http://IP:PORT/PATH` (inside the cluster).
    Direct(reqwest::Client),
    /// `GET /api/v1/namespaces/NS/pods/POD:PORT/proxy/PATH` with the cluster's client.
    PodProxy(kube::Client),
}

impl Via {
    pub fn name(&self) -> &'static str {
        match self {
            Via::Direct(_) => "direct",
            Via::PodProxy(_) => "pod proxy",
        }
    }
}

/// One probe's result, as the decision loop hears of it.
#[derive(Debug, Clone)]
pub struct Probed {
    pub key: EndpointKey,
    pub answer: ProbeAnswer,
    /// When the answer arrived (decision latency is measured from here).
    pub arrived: Instant,
}

pub struct Prober {
    via: Via,
    path: String,
    interval: Duration,
    permits: Arc<Semaphore>,
    last_sent: HashMap<EndpointKey, Instant>,
    in_flight: Arc<std::sync::Mutex<HashSet<EndpointKey>>>,
    sent: Arc<AtomicU64>,
    tx: mpsc::UnboundedSender<Probed>,
}

impl Prober {
    pub fn new(
        via: Via,
        path: &str,
        interval: Duration,
        concurrency: usize,
        tx: mpsc::UnboundedSender<Probed>,
    ) -> Self {
        Prober {
            via,
            path: if path.starts_with('/') {
                path.to_string()
            } else {
                format!("/{path}")
            },
            interval,
            permits: Arc::new(Semaphore::new(concurrency.max(1))),
            last_sent: HashMap::new(),
            in_flight: Arc::new(std::sync::Mutex::new(HashSet::new())),
            sent: Arc::new(AtomicU64::new(0)),
            tx,
        }
    }

    pub fn via(&self) -> &'static str {
        self.via.name()
    }

    /// Probes sent so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// When the next probe of these endpoints falls due (for the loop's timer).
    pub fn next_due(&self, endpoints: &[EndpointKey]) -> Option<Instant> {
        endpoints
            .iter()
            .map(|k| {
                self.last_sent
                    .get(k)
                    .map_or_else(Instant::now, |t| *t + self.interval)
            })
            .min()
    }

    /// Starts a probe of every endpoint whose last probe is at least one interval old and
    /// that has none in flight. Returns how many started.
    pub fn probe_due(&mut self, endpoints: &[EndpointKey]) -> usize {
        let now = Instant::now();
        let mut started = 0;
        for key in endpoints {
            if self
                .last_sent
                .get(key)
                .is_some_and(|t| now.duration_since(*t) < self.interval)
            {
                continue;
            }
            if !self.in_flight.lock().unwrap().insert(key.clone()) {
                continue;
            }
            self.last_sent.insert(key.clone(), now);
            started += 1;
            let (via, path, permits, in_flight, sent, tx, key) = (
                self.via.clone(),
                self.path.clone(),
                self.permits.clone(),
                self.in_flight.clone(),
                self.sent.clone(),
                self.tx.clone(),
                key.clone(),
            );
            tokio::spawn(async move {
                let Ok(_permit) = permits.acquire_owned().await else {
                    return;
                };
                sent.fetch_add(1, Ordering::Relaxed);
                let answer = probe(&via, &key, &path).await;
                in_flight.lock().unwrap().remove(&key);
                let _ = tx.send(Probed {
                    key,
                    answer,
                    arrived: Instant::now(),
                });
            });
        }
        started
    }

    /// Forgets endpoints that are gone (so a returning address is probed at once).
    pub fn retain(&mut self, endpoints: &HashSet<EndpointKey>) {
        self.last_sent.retain(|k, _| endpoints.contains(k));
    }
}

/// One GET of one endpoint, bounded by [`PROBE_TIMEOUT`]; never fails.
pub async fn probe(via: &Via, key: &EndpointKey, path: &str) -> ProbeAnswer {
    answer(get(via, key, path)).await
}

/// The URL of a direct probe (the URL type builds it: IPv6 brackets, path encoding).
pub fn direct_url(key: &EndpointKey, path: &str) -> anyhow::Result<reqwest::Url> {
    let ip: std::net::IpAddr = key
        .ip
        .parse()
        .map_err(|e| anyhow::anyhow!("endpoint address {:?}: {e}", key.ip))?;
    let mut url = reqwest::Url::parse("http://endpoint.invalid/")?;
    url.set_ip_host(ip)
        .map_err(|()| anyhow::anyhow!("cannot use {ip} as a host"))?;
    url.set_port(Some(key.port))
        .map_err(|()| anyhow::anyhow!("cannot set port {}", key.port))?;
    let (p, q) = path
        .split_once('?')
        .map_or((path, None), |(p, q)| (p, Some(q)));
    url.set_path(p);
    url.set_query(q);
    Ok(url)
}

/// The API path of a pod-proxy probe.
pub fn proxy_path(key: &EndpointKey, path: &str) -> anyhow::Result<String> {
    let pod = key.pod.as_deref().ok_or_else(|| {
        anyhow::anyhow!(
            "address {} has no pod (no targetRef): it cannot be reached through the pod proxy",
            key.ip
        )
    })?;
    Ok(format!(
        "/api/v1/namespaces/{}/pods/{pod}:{}/proxy{path}",
        key.namespace, key.port
    ))
}

async fn get(via: &Via, key: &EndpointKey, path: &str) -> anyhow::Result<(u16, String)> {
    match via {
        Via::Direct(client) => read_bounded(client.get(direct_url(key, path)?).send().await?).await,
        Via::PodProxy(client) => through_api(client, &proxy_path(key, path)?).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ip: &str, pod: Option<&str>) -> EndpointKey {
        EndpointKey {
            namespace: "shop".into(),
            service: "web".into(),
            pod: pod.map(str::to_string),
            ip: ip.into(),
            port: 8080,
        }
    }

    #[test]
    fn direct_urls_are_built_by_the_url_type() {
        let u = direct_url(&key("10.244.0.7", None), "/healthz?x=1").unwrap();
        assert_eq!(u.as_str(), "http://10.244.0.7:8080/healthz?x=1");
        let v6 = direct_url(&key("fd00::7", None), "/").unwrap();
        assert_eq!(v6.as_str(), "http://[fd00::7]:8080/");
        assert!(direct_url(&key("not-an-ip", None), "/").is_err());
    }

    #[test]
    fn the_pod_proxy_needs_a_pod() {
        assert_eq!(
            proxy_path(&key("10.244.0.7", Some("web-1")), "/").unwrap(),
            "/api/v1/namespaces/shop/pods/web-1:8080/proxy/"
        );
        let e = proxy_path(&key("10.244.0.7", None), "/").unwrap_err();
        assert!(e.to_string().contains("no pod"), "{e}");
    }
}
