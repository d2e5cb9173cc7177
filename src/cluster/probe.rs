//! The HTTP probe: one real GET of the workload's Service, either through the API server's
//! service proxy (works wherever the API works: kind, k3s, our hermetic cluster) or directly
//! at `CNPE_HTTP_URL`. A 503 or a transport error is evidence, not an error.

use crate::cluster::Cluster;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The outcome of one real HTTP GET of the service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpOutcome {
    pub url: String,
    pub code: Option<u16>,
    pub body: Option<String>,
    /// Transport error, when there was no response.
    pub error: Option<String>,
}

/// How long one HTTP probe may take before it counts as a transport error.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(5);

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
                client: http_client_builder().timeout(HTTP_TIMEOUT).build()?,
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
        let url = self.url();
        self.sent.fetch_add(1, Ordering::Relaxed);
        let result = match &self.target {
            ProbeTarget::ServiceProxy { client, path, .. } => {
                tokio::time::timeout(HTTP_TIMEOUT, proxy_get(client, path)).await
            }
            ProbeTarget::Direct { client, url } => {
                tokio::time::timeout(HTTP_TIMEOUT, direct_get(client, url)).await
            }
        };
        match result {
            Ok(Ok((code, body))) => HttpOutcome {
                url,
                code: Some(code),
                body: Some(body),
                error: None,
            },
            Ok(Err(e)) => HttpOutcome {
                url,
                code: None,
                body: None,
                error: Some(format!("{e:#}")),
            },
            Err(_) => HttpOutcome {
                url,
                code: None,
                body: None,
                error: Some(format!("no response within {HTTP_TIMEOUT:?}")),
            },
        }
    }
}

async fn proxy_get(client: &kube::Client, path: &str) -> Result<(u16, String)> {
    let req = http::Request::get(path).body(kube::client::Body::empty())?;
    let resp = client.send(req).await?;
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect_bytes().await?;
    Ok((code, body_text(&bytes)))
}

async fn direct_get(client: &reqwest::Client, url: &str) -> Result<(u16, String)> {
    let resp = client.get(url).send().await?;
    let code = resp.status().as_u16();
    let bytes = resp.bytes().await?;
    Ok((code, body_text(&bytes)))
}

/// The body as text, byte for byte when it is UTF-8 (nginx's page is); otherwise lossily, which
/// can never equal an expected body that differs in bytes.
fn body_text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[cfg(test)]
mod tests {
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
