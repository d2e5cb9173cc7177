//! Routes (pure): what the Application's Ingresses and HTTPRoutes send clients to. The
//! endpoint checks prove what each Service of the Application serves; a route can still send
//! clients elsewhere (a leftover `legacy` Service, a weight left at 100 % on the old backend,
//! a Service that does not exist), and then no client sees the release the endpoints serve.
//!
//! Rules, for every route the Application manages:
//! - every backend that gets traffic (an Ingress backend; an HTTPRoute backendRef whose
//!   weight is not 0) is a Service the Application manages, present in the watch, with the
//!   port the route names (RouteBackend; its endpoints are then probed like every Service's);
//! - every HTTPRoute rule sends traffic (a weight above 0) to at least one Service of the
//!   Application (RouteWeight: 0 % to the release is named, with the weights);
//! - every HTTPRoute is Accepted, with its references resolved, by each Gateway it names
//!   (RouteAccepted: a route no Gateway took serves nobody).
//!
//! Nothing here is final: a route can be fixed in Git and synced while the gate waits.

use crate::cluster::gateway::HttpRoute;
use crate::serving::model::Objects;
use crate::serving::verdict::{Condition, Unmet};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::{Ingress, IngressBackend};
use serde::Serialize;

pub use crate::serving::model::{
    Backend, BackendReport, PortRef, RouteKind, RouteRef, RouteReport,
};

/// What the check found of one route: its backends (each with whether it passed) and the
/// unmet conditions with their likely causes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RouteCheck {
    pub route: RouteRef,
    pub backends: Vec<BackendReport>,
    #[serde(skip)]
    pub unmet: Vec<Unmet>,
    #[serde(skip)]
    pub likely_causes: Vec<(Condition, String)>,
}

fn ingress_backend(rule: String, namespace: &str, b: &IngressBackend) -> Backend {
    match (&b.service, &b.resource) {
        (Some(s), _) => Backend {
            rule,
            other_kind: None,
            namespace: namespace.to_string(),
            name: s.name.clone(),
            port: s.port.as_ref().and_then(|p| match (p.number, &p.name) {
                (Some(n), _) => Some(PortRef::Number(n)),
                (None, Some(n)) => Some(PortRef::Name(n.clone())),
                (None, None) => None,
            }),
            weight: None,
        },
        (None, Some(r)) => Backend {
            rule,
            other_kind: Some((r.api_group.clone().unwrap_or_default(), r.kind.clone())),
            namespace: namespace.to_string(),
            name: r.name.clone(),
            port: None,
            weight: None,
        },
        (None, None) => Backend {
            rule,
            other_kind: Some((String::new(), "(none)".into())),
            namespace: namespace.to_string(),
            name: String::new(),
            port: None,
            weight: None,
        },
    }
}

/// Every backend of an Ingress: its default backend and each rule's paths.
pub fn ingress_backends(ingress: &Ingress) -> Vec<Backend> {
    let ns = ingress.metadata.namespace.clone().unwrap_or_default();
    let Some(spec) = &ingress.spec else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(b) = &spec.default_backend {
        out.push(ingress_backend("default backend".into(), &ns, b));
    }
    for r in spec.rules.iter().flatten() {
        let host = r.host.as_deref().unwrap_or("*");
        for p in r.http.iter().flat_map(|h| &h.paths) {
            let rule = format!("host {host} path {}", p.path.as_deref().unwrap_or("/"));
            out.push(ingress_backend(rule, &ns, &p.backend));
        }
    }
    out
}

/// Every backendRef of every rule of an HTTPRoute, grouped by rule.
pub fn http_route_backends(route: &HttpRoute) -> Vec<Vec<Backend>> {
    let ns = route.metadata.namespace.clone().unwrap_or_default();
    route
        .spec
        .rules
        .iter()
        .enumerate()
        .map(|(i, rule)| {
            let paths: Vec<&str> = rule
                .matches
                .iter()
                .filter_map(|m| m.path.as_ref()?.value.as_deref())
                .collect();
            let label = format!(
                "rule {} path {}",
                i + 1,
                if paths.is_empty() {
                    "/".to_string()
                } else {
                    paths.join(", ")
                }
            );
            rule.backend_refs
                .iter()
                .map(|b| {
                    let group = b.group.clone().unwrap_or_default();
                    let kind = b.kind.clone().unwrap_or_else(|| "Service".into());
                    Backend {
                        rule: label.clone(),
                        other_kind: (!(group.is_empty() && kind == "Service"))
                            .then_some((group, kind)),
                        namespace: b.namespace.clone().unwrap_or_else(|| ns.clone()),
                        name: b.name.clone(),
                        port: b.port.map(PortRef::Number),
                        weight: Some(b.weight.unwrap_or(1)),
                    }
                })
                .collect()
        })
        .collect()
}

fn find_service<'a>(objects: &'a Objects, namespace: &str, name: &str) -> Option<&'a Service> {
    objects.services.iter().map(|s| s.as_ref()).find(|s| {
        s.metadata.namespace.as_deref() == Some(namespace)
            && s.metadata.name.as_deref() == Some(name)
    })
}

/// Why `b` fails RouteBackend, or `None`.
fn backend_problem(
    b: &Backend,
    objects: &Objects,
    services: &[(String, String)],
) -> Option<String> {
    if !b.gets_traffic() {
        return None;
    }
    if let Some((group, kind)) = &b.other_kind {
        let kind = if group.is_empty() {
            kind.clone()
        } else {
            format!("{group}/{kind}")
        };
        return Some(format!(
            "a backend of kind {kind} {}: the gate follows Service backends only",
            b.name
        ));
    }
    let managed = services
        .iter()
        .any(|(n, s)| *n == b.namespace && *s == b.name);
    let Some(svc) = find_service(objects, &b.namespace, &b.name) else {
        return Some(if managed {
            format!(
                "Service {} is listed by the Application but does not exist (not in the watch)",
                b.service()
            )
        } else {
            format!("Service {} does not exist", b.service())
        });
    };
    if !managed {
        return Some(format!(
            "Service {}, which the Application does not manage",
            b.service()
        ));
    }
    let ports: Vec<&k8s_openapi::api::core::v1::ServicePort> = svc
        .spec
        .iter()
        .flat_map(|s| s.ports.iter().flatten())
        .collect();
    let has = |p: &PortRef| {
        ports.iter().any(|sp| match p {
            PortRef::Number(n) => sp.port == *n,
            PortRef::Name(n) => sp.name.as_deref() == Some(n.as_str()),
        })
    };
    match &b.port {
        Some(p) if !has(p) => {
            let listed: Vec<String> = ports
                .iter()
                .map(|sp| match &sp.name {
                    Some(n) if !n.is_empty() => format!("{} ({n})", sp.port),
                    _ => sp.port.to_string(),
                })
                .collect();
            Some(format!(
                "Service {} has no port {} (it has {})",
                b.service(),
                match p {
                    PortRef::Number(n) => n.to_string(),
                    PortRef::Name(n) => n.clone(),
                },
                if listed.is_empty() {
                    "none".to_string()
                } else {
                    listed.join(", ")
                }
            ))
        }
        _ => None,
    }
}

fn condition_true(
    conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    t: &str,
) -> Option<bool> {
    conditions
        .iter()
        .find(|c| c.type_ == t)
        .map(|c| c.status == "True")
}

/// RouteAccepted of an HTTPRoute: each parentRef has a status entry with Accepted True and
/// (when reported) ResolvedRefs True.
fn acceptance(route: &HttpRoute, subject: &str, out: &mut RouteCheck) {
    let ns = route.metadata.namespace.clone().unwrap_or_default();
    let parents = route
        .status
        .as_ref()
        .map(|s| s.parents.as_slice())
        .unwrap_or_default();
    let want = "Accepted and ResolvedRefs True from every Gateway in spec.parentRefs".to_string();
    if route.spec.parent_refs.is_empty() {
        out.unmet.push(Unmet {
            condition: Condition::RouteAccepted,
            subject: subject.to_string(),
            want,
            found: "no spec.parentRefs: the route names no Gateway".into(),
        });
        out.likely_causes.push((
            Condition::RouteAccepted,
            format!("{subject} names no Gateway, so no client reaches it"),
        ));
        return;
    }
    for p in &route.spec.parent_refs {
        let pns = p.namespace.clone().unwrap_or_else(|| ns.clone());
        let gateway = format!("{pns}/{}", p.name);
        let status = parents.iter().find(|s| {
            s.parent_ref.name == p.name
                && s.parent_ref.namespace.clone().unwrap_or_else(|| ns.clone()) == pns
                && (p.section_name.is_none() || s.parent_ref.section_name == p.section_name)
        });
        let found = match status {
            None => Some(format!("no status from Gateway {gateway} (not accepted yet, or no controller for its class)")),
            Some(s) => {
                let describe = |t: &str| {
                    s.conditions
                        .iter()
                        .find(|c| c.type_ == t)
                        .map(|c| format!("{t} {} ({}: {})", c.status, c.reason, c.message))
                        .unwrap_or_else(|| format!("no {t} condition"))
                };
                match (
                    condition_true(&s.conditions, "Accepted"),
                    condition_true(&s.conditions, "ResolvedRefs"),
                ) {
                    (Some(true), None | Some(true)) => None,
                    (Some(true), Some(false)) => {
                        Some(format!("Gateway {gateway}: {}", describe("ResolvedRefs")))
                    }
                    _ => Some(format!("Gateway {gateway}: {}", describe("Accepted"))),
                }
            }
        };
        if let Some(found) = found {
            out.likely_causes.push((
                Condition::RouteAccepted,
                format!("{subject} is not serving through Gateway {gateway}: {found}"),
            ));
            out.unmet.push(Unmet {
                condition: Condition::RouteAccepted,
                subject: subject.to_string(),
                want: want.clone(),
                found,
            });
        }
    }
}

/// RouteWeight of one HTTPRoute rule: some traffic reaches a Service of the Application.
fn weights(rule: &[Backend], services: &[(String, String)], subject: &str, out: &mut RouteCheck) {
    let to_app: i32 = rule
        .iter()
        .filter(|b| b.other_kind.is_none())
        .filter(|b| {
            services
                .iter()
                .any(|(n, s)| *n == b.namespace && *s == b.name)
        })
        .filter_map(|b| b.weight)
        .map(|w| w.max(0))
        .sum();
    if to_app > 0 || rule.is_empty() {
        return;
    }
    let total: i32 = rule.iter().filter_map(|b| b.weight).map(|w| w.max(0)).sum();
    let listed: Vec<String> = rule
        .iter()
        .map(|b| format!("{} {}", b.service(), b.weight.unwrap_or(1)))
        .collect();
    let label = &rule[0].rule;
    out.unmet.push(Unmet {
        condition: Condition::RouteWeight,
        subject: format!("{subject} {label}"),
        want: "a weight above 0 to a Service of the Application".into(),
        found: format!(
            "weights {} (0 % to the Application's Services)",
            listed.join(", ")
        ),
    });
    out.likely_causes.push((
        Condition::RouteWeight,
        if total == 0 {
            format!("{subject} {label} gives every backend weight 0: clients of it get no backend at all")
        } else {
            format!("{subject} {label} sends 100 % of its clients to Services outside the Application: the release gets 0 % (a weight never moved to the new backend, or a backend left behind)")
        },
    ));
}

/// The check of one route the Application manages; `services` are the Application's.
pub fn check(route: &RouteRef, objects: &Objects, services: &[(String, String)]) -> RouteCheck {
    let subject = route.subject();
    let mut out = RouteCheck {
        route: route.clone(),
        backends: Vec::new(),
        unmet: Vec::new(),
        likely_causes: Vec::new(),
    };
    let same = |ns: Option<&str>, name: Option<&str>| {
        ns == Some(route.namespace.as_str()) && name == Some(route.name.as_str())
    };
    let rules: Vec<Vec<Backend>> = match route.kind {
        RouteKind::Ingress => objects
            .ingresses
            .iter()
            .find(|i| same(i.metadata.namespace.as_deref(), i.metadata.name.as_deref()))
            .map(|i| ingress_backends(i).into_iter().map(|b| vec![b]).collect()),
        RouteKind::HttpRoute => objects
            .http_routes
            .iter()
            .find(|r| same(r.metadata.namespace.as_deref(), r.metadata.name.as_deref()))
            .map(|r| {
                acceptance(r, &subject, &mut out);
                http_route_backends(r)
            }),
    }
    .unwrap_or_else(|| {
        out.unmet.push(Unmet {
            condition: Condition::RouteBackend,
            subject: subject.clone(),
            want: format!("{subject} in the cluster"),
            found: "absent from the watch (not applied yet, or deleted)".into(),
        });
        Vec::new()
    });
    if rules.iter().all(Vec::is_empty)
        && !out
            .unmet
            .iter()
            .any(|u| u.condition == Condition::RouteBackend)
    {
        out.unmet.push(Unmet {
            condition: Condition::RouteBackend,
            subject: subject.clone(),
            want: "at least one backend".into(),
            found: "the route names no backend".into(),
        });
    }
    for rule in &rules {
        if route.kind == RouteKind::HttpRoute {
            weights(rule, services, &subject, &mut out);
        }
        for b in rule {
            let problem = backend_problem(b, objects, services);
            if let Some(p) = &problem {
                out.unmet.push(Unmet {
                    condition: Condition::RouteBackend,
                    subject: format!("{subject} {}", b.rule),
                    want: "a backend that is a Service of the Application, with the port the route names".into(),
                    found: p.clone(),
                });
                out.likely_causes.push((
                    Condition::RouteBackend,
                    format!("{subject} sends clients of {} to {p}: what they get is not the release the gate probed (a leftover backend, or a Service renamed in one place)", b.rule),
                ));
            }
            out.backends.push(BackendReport {
                backend: b.clone(),
                problem,
            });
        }
    }
    out
}
