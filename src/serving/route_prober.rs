//! `--via-route`'s shell: each [`ClientRequest`] sent through the ingress controller as a
//! client sends it (the controller's address with the route's path, the route's host as the
//! Host header), `tries` times per round and one round per interval at most. Answers are
//! evidence, never errors.

use crate::cluster::probe::{answer, read_bounded};
use crate::serving::model::ProbeAnswer;
use crate::serving::via_route::ClientRequest;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// One round of one request, as the decision loop hears of it.
#[derive(Debug, Clone)]
pub struct RouteRound {
    pub request: ClientRequest,
    pub answers: Vec<ProbeAnswer>,
    pub arrived: Instant,
}

pub struct RouteProber {
    client: reqwest::Client,
    base: reqwest::Url,
    interval: Duration,
    last_sent: HashMap<ClientRequest, Instant>,
    in_flight: Arc<Mutex<HashSet<ClientRequest>>>,
    sent: Arc<AtomicU64>,
    tx: mpsc::UnboundedSender<RouteRound>,
}

/// `base` with `path` (and its query) in place of its own: the URL type builds it.
pub fn url_through(base: &reqwest::Url, path: &str) -> reqwest::Url {
    let mut url = base.clone();
    let (p, q) = path
        .split_once('?')
        .map_or((path, None), |(p, q)| (p, Some(q)));
    url.set_path(p);
    url.set_query(q);
    url
}

impl RouteProber {
    pub fn new(
        client: reqwest::Client,
        base: reqwest::Url,
        interval: Duration,
        tx: mpsc::UnboundedSender<RouteRound>,
    ) -> Self {
        RouteProber {
            client,
            base,
            interval,
            last_sent: HashMap::new(),
            in_flight: Arc::new(Mutex::new(HashSet::new())),
            sent: Arc::new(AtomicU64::new(0)),
            tx,
        }
    }

    /// Requests sent through the controller so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// When the next round of these requests falls due.
    pub fn next_due(&self, requests: &[ClientRequest]) -> Option<Instant> {
        requests
            .iter()
            .map(|r| {
                self.last_sent
                    .get(r)
                    .map_or_else(Instant::now, |t| *t + self.interval)
            })
            .min()
    }

    /// Starts a round of every request whose last round is at least one interval old and that
    /// has none in flight.
    pub fn round_due(&mut self, requests: &[ClientRequest]) {
        let now = Instant::now();
        for r in requests {
            if self
                .last_sent
                .get(r)
                .is_some_and(|t| now.duration_since(*t) < self.interval)
                || !self.in_flight.lock().unwrap().insert(r.clone())
            {
                continue;
            }
            self.last_sent.insert(r.clone(), now);
            let (client, url, in_flight, sent, tx, request) = (
                self.client.clone(),
                url_through(&self.base, &r.path),
                self.in_flight.clone(),
                self.sent.clone(),
                self.tx.clone(),
                r.clone(),
            );
            tokio::spawn(async move {
                let mut answers = Vec::new();
                for _ in 0..request.tries {
                    sent.fetch_add(1, Ordering::Relaxed);
                    let mut get = client.get(url.clone());
                    if let Some(host) = &request.host {
                        get = get.header(reqwest::header::HOST, host.as_str());
                    }
                    answers.push(answer(async { read_bounded(get.send().await?).await }).await);
                }
                in_flight.lock().unwrap().remove(&request);
                let _ = tx.send(RouteRound {
                    request,
                    answers,
                    arrived: Instant::now(),
                });
            });
        }
    }

    /// Forgets requests no longer wanted.
    pub fn retain(&mut self, requests: &HashSet<ClientRequest>) {
        self.last_sent.retain(|r, _| requests.contains(r));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serving::model::{RouteKind, RouteRef};
    use std::io::{BufRead, BufReader, Write};

    /// A loopback HTTP server that answers every request with its Host header and path, the
    /// way an ingress controller routes by them.
    fn echo_server() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let (mut path, mut host) = (String::new(), String::new());
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                    let l = line.trim_end().to_string();
                    line.clear();
                    if l.is_empty() {
                        break;
                    }
                    if let Some(p) = l.strip_prefix("GET ") {
                        path = p.split(' ').next().unwrap_or("").to_string();
                    }
                    if let Some((k, v)) = l.split_once(':') {
                        if k.eq_ignore_ascii_case("host") {
                            host = v.trim().to_string();
                        }
                    }
                }
                let body = format!("host={host} path={path}");
                let mut conn = conn;
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        port
    }

    fn request(host: Option<&str>, path: &str, tries: u32) -> ClientRequest {
        ClientRequest {
            route: RouteRef {
                kind: RouteKind::HttpRoute,
                namespace: "shop".into(),
                name: "web".into(),
            },
            host: host.map(str::to_string),
            path: path.into(),
            tries,
        }
    }

    /// A round sends `tries` requests with the route's host as the Host header and its path;
    /// a request for any host sends the controller's own address.
    #[tokio::test]
    async fn a_round_asks_as_a_client_with_the_routes_host_and_path() {
        let port = echo_server();
        let base = reqwest::Url::parse(&format!("http://127.0.0.1:{port}/")).unwrap();
        let client = crate::cluster::probe::http_client_builder()
            .build()
            .unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut prober = RouteProber::new(client, base, Duration::from_secs(60), tx);
        let named = request(Some("shop.example"), "/cart?x=1", 3);
        let any = request(None, "/", 1);
        prober.round_due(&[named.clone(), any.clone()]);
        // Not due again within the interval: nothing more is sent.
        prober.round_due(&[named.clone(), any.clone()]);
        let mut rounds = HashMap::new();
        for _ in 0..2 {
            let r = tokio::time::timeout(Duration::from_secs(10), rx.recv())
                .await
                .expect("a round within 10 s")
                .expect("the channel is open");
            rounds.insert(r.request.clone(), r.answers);
        }
        let bodies = |r: &ClientRequest| -> Vec<String> {
            rounds[r]
                .iter()
                .map(|a| a.body.clone().unwrap_or_default())
                .collect()
        };
        assert_eq!(bodies(&named), vec!["host=shop.example path=/cart?x=1"; 3]);
        assert_eq!(bodies(&any), vec![format!("host=127.0.0.1:{port} path=/")]);
        assert_eq!(prober.sent(), 4);
        assert!(
            rx.try_recv().is_err(),
            "a second round was sent within the interval"
        );
    }

    #[test]
    fn the_route_path_replaces_the_controllers() {
        let base = reqwest::Url::parse("http://127.0.0.1:18080/").unwrap();
        assert_eq!(
            url_through(&base, "/shop/cart?x=1").as_str(),
            "http://127.0.0.1:18080/shop/cart?x=1"
        );
        assert_eq!(url_through(&base, "/").as_str(), "http://127.0.0.1:18080/");
    }
}
