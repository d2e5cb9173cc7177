//! The lab's safety rule (pure): act only on a local or lab cluster. Loopback, private,
//! link-local and unique-local addresses, `localhost`, `*.local` / `*.localhost` and in-cluster
//! service names are accepted; anything else needs `CNPE_ALLOW_REMOTE=1`. Checked on the
//! kubeconfig's parsed `http::Uri`, before any request is made.

use anyhow::{bail, Result};
use std::net::IpAddr;

/// Whether `host` (as `http::Uri::host` gives it, IPv6 in brackets) names a lab-local server.
pub fn is_local_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => ip.is_loopback() || ip.is_private() || ip.is_link_local(),
        Ok(IpAddr::V6(ip)) => {
            ip.is_loopback() || ip.is_unique_local() || ip.is_unicast_link_local()
        }
        Err(_) => {
            let h = bare.to_ascii_lowercase();
            h == "localhost"
                || h.ends_with(".local")
                || h.ends_with(".localhost")
                || h == "kubernetes.default.svc"
                || h.starts_with("kubernetes.default.svc.")
        }
    }
}

/// Refuses an API server that is not lab-local unless `allow_remote`.
pub fn check_api_server(url: &http::Uri, allow_remote: bool) -> Result<()> {
    let host = url.host().unwrap_or("");
    if allow_remote || is_local_host(host) {
        return Ok(());
    }
    bail!(
        "refusing to act on the API server at {url}: host {host:?} is not loopback, a private \
         address or a .local/in-cluster name, so it is probably not the lab's own cluster. Set \
         CNPE_ALLOW_REMOTE=1 if it is."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(url: &str, allow: bool) -> Result<()> {
        check_api_server(&url.parse().unwrap(), allow)
    }

    #[test]
    fn lab_clusters_are_accepted() {
        for url in [
            "https://127.0.0.1:6443",
            "https://10.99.0.1:6443",
            "https://192.168.1.5",
            "https://172.20.0.2:6443/",
            "https://[::1]:6443",
            "https://[fd00::5]:6443",
            "https://[fe80::1]:6443",
            "https://localhost:6443",
            "https://k3s.local:6443",
            "https://kubernetes.default.svc",
            "https://kubernetes.default.svc.cluster.local:443",
        ] {
            assert!(check(url, false).is_ok(), "{url}");
        }
    }

    #[test]
    fn remote_clusters_are_refused_unless_allowed() {
        for url in [
            "https://35.1.2.3:443",
            "https://prod.example.com",
            "https://172.32.0.1",
            "https://user@8.8.8.8:6443",
            "https://[2001:db8::1]:6443",
            "https://localhost.example.com",
        ] {
            let err = check(url, false).unwrap_err().to_string();
            assert!(err.contains("CNPE_ALLOW_REMOTE=1"), "{err}");
            assert!(check(url, true).is_ok());
        }
    }
}
