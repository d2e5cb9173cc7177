//! The HTTP probe, the one place a GET is sent and its answer read: bounded in time and size, and
//! an answer, never an error (a 503 or a refused connection is what the endpoint said). The lab's
//! [`Probe`] GETs its Service through the API server's service proxy (works wherever the API
//! works: kind, k3s, our hermetic cluster) or directly at `CNPE_HTTP_URL`; the gate's probers
//! send their GETs through [`answer`], [`through_api`] and [`read_bounded`].

use crate::cluster::Cluster;
use anyhow::Result;
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// One HTTP answer as evidence: a status and body, or the transport error or timeout that took
/// their place. Every probe of the project (the lab's Service, the gate's endpoints, a client's
/// request through a route) ends as one of these.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProbeAnswer {
    pub at: Timestamp,
    pub code: Option<u16>,
    /// The body (lossily decoded when it is not UTF-8; then it can never equal an expected body
    /// that differs in bytes), at most [`MAX_BODY`] of it.
    pub body: Option<String>,
    /// A transport error, when there was no answer.
    pub error: Option<String>,
}

/// How long one probe may take before it counts as a transport error.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// The most of a body that is kept (an expected body is small; a huge page is not read whole).
pub const MAX_BODY: usize = 1 << 20;

/// One GET, bounded by [`PROBE_TIMEOUT`], as evidence: never an error.
pub async fn answer(get: impl std::future::Future<Output = Result<(u16, String)>>) -> ProbeAnswer {
    let result = tokio::time::timeout(PROBE_TIMEOUT, get).await;
    let at = Timestamp::now();
    let (code, body, error) = match result {
        Ok(Ok((code, body))) => (Some(code), Some(body), None),
        Ok(Err(e)) => (None, None, Some(format!("{e:#}"))),
        Err(_) => (
            None,
            None,
            Some(format!("no answer within {PROBE_TIMEOUT:?}")),
        ),
    };
    ProbeAnswer {
        at,
        code,
        body,
        error,
    }
}

/// `GET path` through the API server (a service or pod proxy path) with the cluster's client:
/// the status and at most [`MAX_BODY`] of the body.
pub async fn through_api(client: &kube::Client, path: &str) -> Result<(u16, String)> {
    let req = http::Request::get(path).body(kube::client::Body::empty())?;
    let resp = client.send(req).await?;
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect_bytes().await?;
    Ok((code, body_text(&bytes[..bytes.len().min(MAX_BODY)])))
}

/// A sent request's status and at most [`MAX_BODY`] of its body, read chunk by chunk so a huge
/// page is never held whole.
pub async fn read_bounded(mut resp: reqwest::Response) -> Result<(u16, String)> {
    let code = resp.status().as_u16();
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        let room = MAX_BODY.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if room <= chunk.len() {
            break;
        }
    }
    Ok((code, body_text(&body)))
}

/// The outcome of the lab's GET of its Service, as its evidence records it: the URL and the
/// answer without its instant (the lab's records keep the shape they always had).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpOutcome {
    pub url: String,
    pub code: Option<u16>,
    pub body: Option<String>,
    /// Transport error, when there was no response.
    pub error: Option<String>,
}

impl HttpOutcome {
    pub fn of(url: String, answer: ProbeAnswer) -> Self {
        HttpOutcome {
            url,
            code: answer.code,
            body: answer.body,
            error: answer.error,
        }
    }
}

/// The probe of the lab's Service, counting every request it sends (apart from the cluster
/// client's other requests: the timeline reports both).
#[derive(Clone)]
pub struct Probe {
    target: ProbeTarget,
    sent: Arc<AtomicU64>,
}

#[derive(Clone)]
enum ProbeTarget {
    /// `GET /api/v1/namespaces/NS/services/NAME:80/proxy/` with the cluster's client.
    ServiceProxy {
        client: kube::Client,
        api_url: String,
        path: String,
    },
    /// `GET url` with a plain HTTP client (the lab VM, where the ClusterIP is reachable).
    Direct {
        client: reqwest::Client,
        url: String,
    },
}

/// A reqwest client builder that can build: reqwest is compiled without a TLS crypto provider
/// (`rustls-no-provider`), so without a process default its `build()` fails ("builder error",
/// found when the gate first ran inside a cluster). ring, which kube already uses, is installed
/// as that default once.
pub fn http_client_builder() -> reqwest::ClientBuilder {
    static PROVIDER: std::sync::Once = std::sync::Once::new();
    PROVIDER.call_once(|| {
        // Err means another provider is the default already: that one serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::builder()
}

impl Probe {
    pub fn for_cluster(cluster: &Cluster) -> Result<Self> {
        let cfg = cluster.config();
        let target = match &cfg.http_url {
            Some(url) => ProbeTarget::Direct {
                client: http_client_builder().timeout(PROBE_TIMEOUT).build()?,
                url: url.clone(),
            },
            None => ProbeTarget::ServiceProxy {
                client: cluster.client(),
                api_url: cluster.api_url(),
                path: format!(
                    "/api/v1/namespaces/{}/services/{}:80/proxy/",
                    cfg.namespace, cfg.workload
                ),
            },
        };
        Ok(Probe {
            target,
            sent: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Probes sent so far.
    pub fn count(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// The URL the probe requests (recorded in the evidence).
    pub fn url(&self) -> String {
        match &self.target {
            ProbeTarget::ServiceProxy { api_url, path, .. } => format!("{api_url}{path}"),
            ProbeTarget::Direct { url, .. } => url.clone(),
        }
    }

    pub async fn get(&self) -> HttpOutcome {
        self.sent.fetch_add(1, Ordering::Relaxed);
        let answer = match &self.target {
            ProbeTarget::ServiceProxy { client, path, .. } => {
                answer(through_api(client, path)).await
            }
            ProbeTarget::Direct { client, url } => {
                answer(async { read_bounded(client.get(url).send().await?).await }).await
            }
        };
        HttpOutcome::of(self.url(), answer)
    }
}

/// The body as text, byte for byte when it is UTF-8 (nginx's page is); otherwise lossily, which
/// can never equal an expected body that differs in bytes.
fn body_text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// A loopback server that answers one request with `head` then `body` and closes.
    fn serve_once(head: &'static str, body: Vec<u8>) -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            if let Ok((mut conn, _)) = listener.accept() {
                let mut request = [0u8; 1024];
                let _ = conn.read(&mut request);
                let _ = write!(
                    conn,
                    "{head}Content-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn.write_all(&body);
            }
        });
        url
    }

    async fn get(url: &str) -> ProbeAnswer {
        let client = http_client_builder().build().unwrap();
        answer(async { read_bounded(client.get(url).send().await?).await }).await
    }

    #[tokio::test]
    async fn an_answer_is_its_status_and_body() {
        let a = get(&serve_once(
            "HTTP/1.1 503 Service Unavailable\r\n",
            b"down".to_vec(),
        ))
        .await;
        assert_eq!(
            (a.code, a.body.as_deref(), a.error),
            (Some(503), Some("down"), None)
        );
    }

    /// A huge page is cut at MAX_BODY (never held whole), and bytes that are not UTF-8 are kept
    /// lossily, so they can never equal an expected body.
    #[tokio::test]
    async fn a_body_is_bounded_and_decoded_lossily() {
        let mut body = vec![b'a'; MAX_BODY + 4096];
        body[0] = 0xff;
        let a = get(&serve_once("HTTP/1.1 200 OK\r\n", body)).await;
        let text = a.body.expect("a body");
        assert!(text.starts_with('\u{fffd}'), "{:?}", &text[..8]);
        assert_eq!(text.len(), MAX_BODY - 1 + '\u{fffd}'.len_utf8());
    }

    /// A refused connection is an answer with its error, not a failure of the probe.
    #[tokio::test]
    async fn a_refused_connection_is_evidence() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let a = get(&format!("http://127.0.0.1:{port}/")).await;
        assert_eq!((a.code, a.body), (None, None));
        assert!(a.error.is_some_and(|e| !e.is_empty()));
    }

    /// The lab's records keep their shape: the URL and the answer without its instant.
    #[test]
    fn the_lab_outcome_is_the_answer_with_its_url() {
        let answer = ProbeAnswer {
            at: Timestamp::UNIX_EPOCH,
            code: Some(200),
            body: Some("ok".into()),
            error: None,
        };
        let outcome = HttpOutcome::of("http://x/".into(), answer);
        assert_eq!(
            serde_json::to_value(&outcome).unwrap(),
            serde_json::json!({"url": "http://x/", "code": 200, "body": "ok", "error": null})
        );
    }

    /// `cnpe-lab gate --probe direct` (every in-cluster run, the PostSync hook) builds its client
    /// here; without a crypto provider installed reqwest's build() failed with "builder error".
    #[test]
    fn the_http_client_builds() {
        super::http_client_builder()
            .timeout(std::time::Duration::from_secs(1))
            .build()
            .expect("the probe's HTTP client builds");
    }
}
