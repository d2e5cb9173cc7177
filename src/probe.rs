//! The HTTP probe: one real GET of the workload's Service, either through the API server's
//! service proxy (works wherever the API works: kind, k3s, our hermetic cluster) or directly
//! at `CNPE_HTTP_URL`. A 503 or a transport error is evidence, not an error.

use crate::cluster::Cluster;
use crate::evidence::HttpOutcome;
use anyhow::Result;
use std::time::Duration;

/// How long one HTTP probe may take before it counts as a transport error.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone)]
pub enum Probe {
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

impl Probe {
    pub fn for_cluster(cluster: &Cluster) -> Result<Self> {
        let cfg = cluster.config();
        Ok(match &cfg.http_url {
            Some(url) => Probe::Direct {
                client: reqwest::Client::builder().timeout(HTTP_TIMEOUT).build()?,
                url: url.clone(),
            },
            None => Probe::ServiceProxy {
                client: cluster.client(),
                api_url: cluster.api_url(),
                path: format!(
                    "/api/v1/namespaces/{}/services/{}:80/proxy/",
                    cfg.namespace, cfg.workload
                ),
            },
        })
    }

    /// The URL the probe requests (recorded in the evidence).
    pub fn url(&self) -> String {
        match self {
            Probe::ServiceProxy { api_url, path, .. } => format!("{api_url}{path}"),
            Probe::Direct { url, .. } => url.clone(),
        }
    }

    pub async fn get(&self) -> HttpOutcome {
        let url = self.url();
        let result = match self {
            Probe::ServiceProxy { client, path, .. } => {
                tokio::time::timeout(HTTP_TIMEOUT, proxy_get(client, path)).await
            }
            Probe::Direct { client, url } => {
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
