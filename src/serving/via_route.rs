//! `--via-route` (pure): what a client of the ingress controller gets. From each route of the
//! Application, the requests its rules imply (Host header, path, and enough tries that every
//! weighted backend is reached), and what an answer through the controller leaves unmet. The
//! shell sends the requests (`prober::probe_through`); nothing here does I/O.

use crate::serving::model::{Objects, ProbeAnswer, RouteKind, RouteRef};
use crate::serving::verdict::{Condition, Unmet};
use serde::Serialize;
use std::collections::BTreeMap;

/// The most requests one (host, path) gets per round: a backend with 9 % of the weight is
/// still reached with 99 % (50 tries); a smaller share is named as not checked.
pub const MAX_TRIES: u32 = 50;

/// One request a client would send through the ingress controller.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ClientRequest {
    pub route: RouteRef,
    /// The Host header (`None`: a rule for any host; the controller's own address is sent).
    pub host: Option<String>,
    pub path: String,
    /// How many times per round, so that the smallest weighted backend answers at least once
    /// with 99 % ([`tries_for`]).
    pub tries: u32,
}

impl ClientRequest {
    /// "HTTPRoute shop/web at shop.example/".
    pub fn subject(&self) -> String {
        format!(
            "{} at {}{}",
            self.route.subject(),
            self.host.as_deref().unwrap_or("(any host)"),
            self.path
        )
    }
}

/// The newest round of answers through the controller, per request.
pub type RouteAnswers = BTreeMap<ClientRequest, Vec<ProbeAnswer>>;

/// Tries so that a backend with the smallest positive share of `weights` is reached at least
/// once with 99 %: n = ceil(ln 0.01 / ln(1 - p)), between 1 and [`MAX_TRIES`].
pub fn tries_for(weights: &[i32]) -> u32 {
    let total: i64 = weights
        .iter()
        .filter(|w| **w > 0)
        .map(|w| i64::from(*w))
        .sum();
    let smallest = weights.iter().filter(|w| **w > 0).min();
    let (Some(&smallest), true) = (smallest, total > 0) else {
        return 1;
    };
    let p = f64::from(smallest) / total as f64;
    if p >= 1.0 {
        return 1;
    }
    let n = (0.01f64.ln() / (1.0 - p).ln()).ceil();
    (n as u32).clamp(1, MAX_TRIES)
}

/// The path a client sends for a rule's path match: the gate's `--path` when the match covers
/// it (a prefix, or no match), else the match's own value (an exact path, another prefix).
fn request_path(kind: Option<&str>, value: Option<&str>, gate_path: &str) -> String {
    let value = value.unwrap_or("/");
    match kind {
        Some("Exact") => value.to_string(),
        // A regular expression: the gate cannot invent a matching path; it sends --path.
        Some("RegularExpression") => gate_path.to_string(),
        _ if covers(value, gate_path) => gate_path.to_string(),
        _ => value.to_string(),
    }
}

/// A path prefix (element-wise, as Kubernetes and Gateway API match) covers `path`.
fn covers(prefix: &str, path: &str) -> bool {
    let prefix = prefix.trim_end_matches('/');
    let path = path.split('?').next().unwrap_or(path);
    prefix.is_empty()
        || path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The requests a client of `route` sends, one per (host, path), sorted; empty when the route
/// is not in the watch (the route check names that).
pub fn client_requests(route: &RouteRef, objects: &Objects, gate_path: &str) -> Vec<ClientRequest> {
    let same = |ns: Option<&str>, name: Option<&str>| {
        ns == Some(route.namespace.as_str()) && name == Some(route.name.as_str())
    };
    // (host, path) -> tries: the same pair from two rules keeps the larger count.
    let mut wanted: BTreeMap<(Option<String>, String), u32> = BTreeMap::new();
    let mut want = |host: Option<String>, path: String, tries: u32| {
        let t = wanted.entry((host, path)).or_insert(tries);
        *t = (*t).max(tries);
    };
    match route.kind {
        RouteKind::Ingress => {
            let spec = objects
                .ingresses
                .iter()
                .find(|i| same(i.metadata.namespace.as_deref(), i.metadata.name.as_deref()))
                .and_then(|i| i.spec.as_ref());
            if let Some(spec) = spec {
                if spec.default_backend.is_some() {
                    want(None, gate_path.to_string(), 1);
                }
                for rule in spec.rules.iter().flatten() {
                    for p in rule.http.iter().flat_map(|h| &h.paths) {
                        let path =
                            request_path(Some(p.path_type.as_str()), p.path.as_deref(), gate_path);
                        want(rule.host.clone(), path, 1);
                    }
                }
            }
        }
        RouteKind::HttpRoute => {
            let found = objects
                .http_routes
                .iter()
                .find(|r| same(r.metadata.namespace.as_deref(), r.metadata.name.as_deref()));
            if let Some(r) = found {
                let hosts: Vec<Option<String>> = if r.spec.hostnames.is_empty() {
                    vec![None]
                } else {
                    r.spec.hostnames.iter().cloned().map(Some).collect()
                };
                for rule in &r.spec.rules {
                    let weights: Vec<i32> = rule
                        .backend_refs
                        .iter()
                        .map(|b| b.weight.unwrap_or(1))
                        .collect();
                    let tries = tries_for(&weights);
                    let paths: Vec<String> = if rule.matches.is_empty() {
                        vec![gate_path.to_string()]
                    } else {
                        rule.matches
                            .iter()
                            .map(|m| {
                                let p = m.path.as_ref();
                                request_path(
                                    p.and_then(|p| p.type_.as_deref()),
                                    p.and_then(|p| p.value.as_deref()),
                                    gate_path,
                                )
                            })
                            .collect()
                    };
                    for host in &hosts {
                        for path in &paths {
                            want(host.clone(), path.clone(), tries);
                        }
                    }
                }
            }
        }
    }
    wanted
        .into_iter()
        .map(|((host, path), tries)| ClientRequest {
            route: route.clone(),
            host,
            path,
            tries,
        })
        .collect()
}

/// How one answer is judged: `None` when it is the release, else what was found and the
/// likely cause (the decision's own rule for endpoint answers).
pub type Judge<'a> = &'a dyn Fn(&ProbeAnswer) -> Option<(String, Option<String>)>;

/// What the answers through the controller leave unmet (RouteAnswers), with likely causes:
/// every answer of a request's newest round must pass `judge`; `want` says what it asks.
pub fn check_answers(
    wanted: &[ClientRequest],
    answers: &RouteAnswers,
    judge: Judge<'_>,
    want: &str,
) -> (Vec<Unmet>, Vec<(Condition, String)>) {
    let mut unmet = Vec::new();
    let mut causes = Vec::new();
    let want = format!("every answer through the ingress controller {want}");
    for cr in wanted {
        let got = answers.get(cr).map(Vec::as_slice).unwrap_or_default();
        if got.is_empty() {
            unmet.push(Unmet {
                condition: Condition::RouteAnswers,
                subject: cr.subject(),
                want: want.clone(),
                found: "not asked through the ingress controller yet".into(),
            });
            continue;
        }
        let failed: Vec<(String, Option<String>)> = got.iter().filter_map(judge).collect();
        let Some((first, cause)) = failed.first() else {
            continue;
        };
        unmet.push(Unmet {
            condition: Condition::RouteAnswers,
            subject: cr.subject(),
            want: want.clone(),
            found: format!(
                "{} of {} answers were not the release; the first: {first}",
                failed.len(),
                got.len()
            ),
        });
        causes.push((
            Condition::RouteAnswers,
            format!(
                "a client of {} gets what the endpoints do not serve ({} of {} answers){}: the route, its weights or the controller send it elsewhere",
                cr.subject(),
                failed.len(),
                got.len(),
                cause
                    .as_deref()
                    .map(|c| format!("; {c}"))
                    .unwrap_or_default()
            ),
        ));
    }
    (unmet, causes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tries_reach_the_smallest_weight_with_99_percent() {
        assert_eq!(tries_for(&[]), 1);
        assert_eq!(tries_for(&[1]), 1);
        assert_eq!(tries_for(&[100, 0]), 1);
        assert_eq!(tries_for(&[50, 50]), 7); // 0.5^7 < 0.01 <= 0.5^6
        assert_eq!(tries_for(&[90, 10]), 44);
        assert_eq!(tries_for(&[99, 1]), MAX_TRIES);
        for n in 1..=MAX_TRIES {
            // 1 - (1 - p)^n >= 0.99 at the count chosen, unless capped.
            let w = [100 - n as i32 % 50, n as i32 % 50 + 1];
            let t = tries_for(&w);
            let p = f64::from(w[1].min(w[0])) / f64::from(w[0] + w[1]);
            assert!(
                t == MAX_TRIES || 1.0 - (1.0 - p).powi(t as i32) >= 0.99,
                "{w:?}: {t}"
            );
        }
    }

    #[test]
    fn a_prefix_covers_the_gates_path_element_wise() {
        assert_eq!(request_path(Some("Prefix"), Some("/"), "/"), "/");
        assert_eq!(
            request_path(Some("Prefix"), Some("/"), "/healthz"),
            "/healthz"
        );
        assert_eq!(
            request_path(Some("PathPrefix"), Some("/shop"), "/shop/cart"),
            "/shop/cart"
        );
        assert_eq!(
            request_path(Some("PathPrefix"), Some("/shop"), "/shopping"),
            "/shop"
        );
        assert_eq!(
            request_path(Some("Exact"), Some("/version"), "/"),
            "/version"
        );
        assert_eq!(
            request_path(Some("RegularExpression"), Some("/v[0-9]+"), "/"),
            "/"
        );
        assert_eq!(request_path(None, None, "/x?y=1"), "/x?y=1");
    }
}
