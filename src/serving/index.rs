//! Which Applications an object change can affect (pure), so a gate over a fleet re-decides
//! only those and never rescans the fleet on an event: Applications by name; workloads and
//! Services by the Applications whose `status.resources` list them; ReplicaSets and Pods by
//! owner; EndpointSlices by Service; and every object by namespace.

use crate::cluster::argo::Application;
use crate::cluster::kind::Kind;
use crate::serving::decide::SERVICE_NAME_LABEL;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// An Application, by namespace and name.
pub type AppKey = (String, String);

/// A managed object: its kind, namespace and name.
type ObjectKey = (Kind, String, String);

/// The Applications of a fleet and what their `status.resources` list, indexed both ways.
///
/// Routing of [`FleetIndex::affected`]:
/// - Application: itself (also when not indexed yet: it may have just appeared).
/// - Deployment, StatefulSet, DaemonSet, Service: the Applications listing it, else none.
/// - Rollout: the Applications listing it.
/// - ReplicaSet: the Applications listing the Deployment or Rollout that owns it, or itself.
/// - Pod: the Applications listing its workload (a ReplicaSet's Deployment or Rollout is its
///   name without the trailing `-<pod-template-hash>`, as both controllers name it), or
///   listing it as a bare Pod; a pod no listed workload owns (a stray, which can still sit
///   behind a Service) goes to every Application with resources in its namespace.
/// - EndpointSlice: the Applications listing its Service (label
///   `kubernetes.io/service-name`); a slice without that label, by namespace.
/// - An event with an empty namespace (a relist): every Application.
#[derive(Debug, Clone, Default)]
pub struct FleetIndex {
    /// Each Application's entries in the two maps below, so that re-indexing or forgetting it
    /// touches only those (never a scan of the fleet).
    apps: BTreeMap<AppKey, Indexed>,
    by_object: HashMap<ObjectKey, BTreeSet<AppKey>>,
    by_namespace: HashMap<String, BTreeSet<AppKey>>,
}

/// Where one Application is indexed.
#[derive(Debug, Clone, Default)]
struct Indexed {
    objects: BTreeSet<ObjectKey>,
    namespaces: BTreeSet<String>,
}

fn kind_of(group: &str, kind: &str) -> Option<Kind> {
    Kind::from_group_kind(group, kind).filter(|k| *k != Kind::Application)
}

impl FleetIndex {
    pub fn new() -> Self {
        Self::default()
    }

    /// How many Applications are indexed.
    pub fn len(&self) -> usize {
        self.apps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.apps.is_empty()
    }

    /// Indexes (or re-indexes) an Application from its `status.resources`; its destination
    /// namespace counts as one of its namespaces even before it lists anything.
    pub fn upsert(&mut self, app: &Application) {
        let key: AppKey = (
            app.metadata.namespace.clone().unwrap_or_default(),
            app.metadata.name.clone().unwrap_or_default(),
        );
        self.remove(&key.0, &key.1);
        let default_ns = app.spec.destination.namespace.clone().unwrap_or_default();
        let mut objects = BTreeSet::new();
        let mut namespaces: BTreeSet<String> = BTreeSet::new();
        if !default_ns.is_empty() {
            namespaces.insert(default_ns.clone());
        }
        for r in app
            .status
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .into_iter()
            .flatten()
        {
            let ns = r
                .namespace
                .clone()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| default_ns.clone());
            if !ns.is_empty() {
                namespaces.insert(ns.clone());
            }
            let (Some(kind), Some(name)) = (
                kind_of(
                    r.group.as_deref().unwrap_or(""),
                    r.kind.as_deref().unwrap_or(""),
                ),
                r.name.clone(),
            ) else {
                continue;
            };
            objects.insert((kind, ns, name));
        }
        for o in &objects {
            self.by_object
                .entry(o.clone())
                .or_default()
                .insert(key.clone());
        }
        for ns in &namespaces {
            self.by_namespace
                .entry(ns.clone())
                .or_default()
                .insert(key.clone());
        }
        self.apps.insert(
            key,
            Indexed {
                objects,
                namespaces,
            },
        );
    }

    /// Forgets an Application.
    pub fn remove(&mut self, namespace: &str, name: &str) {
        let key: AppKey = (namespace.to_string(), name.to_string());
        let Some(indexed) = self.apps.remove(&key) else {
            return;
        };
        for o in &indexed.objects {
            if let Some(apps) = self.by_object.get_mut(o) {
                apps.remove(&key);
                if apps.is_empty() {
                    self.by_object.remove(o);
                }
            }
        }
        for ns in &indexed.namespaces {
            if let Some(apps) = self.by_namespace.get_mut(ns) {
                apps.remove(&key);
                if apps.is_empty() {
                    self.by_namespace.remove(ns);
                }
            }
        }
    }

    fn listing(&self, kind: Kind, ns: &str, name: &str) -> BTreeSet<AppKey> {
        self.by_object
            .get(&(kind, ns.to_string(), name.to_string()))
            .cloned()
            .unwrap_or_default()
    }

    fn in_namespace(&self, ns: &str) -> BTreeSet<AppKey> {
        self.by_namespace.get(ns).cloned().unwrap_or_default()
    }

    /// The Applications a change of an object of `kind` with `meta` can affect (see the
    /// type's documentation for the routing).
    pub fn affected(&self, kind: Kind, meta: &ObjectMeta) -> BTreeSet<AppKey> {
        let ns = meta.namespace.as_deref().unwrap_or("");
        let name = meta.name.as_deref().unwrap_or("");
        if kind == Kind::Application {
            return BTreeSet::from([(ns.to_string(), name.to_string())]);
        }
        if ns.is_empty() {
            return self.apps.keys().cloned().collect();
        }
        let owners = meta.owner_references.iter().flatten();
        match kind {
            Kind::Application => unreachable!("handled above"),
            Kind::Deployment
            | Kind::StatefulSet
            | Kind::DaemonSet
            | Kind::Service
            | Kind::Rollout
            | Kind::Ingress
            | Kind::HttpRoute => self.listing(kind, ns, name),
            Kind::ReplicaSet => owners
                .filter_map(|o| match o.kind.as_str() {
                    "Deployment" => Some((Kind::Deployment, o.name.as_str())),
                    "Rollout" => Some((Kind::Rollout, o.name.as_str())),
                    _ => None,
                })
                .flat_map(|(k, owner)| self.listing(k, ns, owner))
                .chain(self.listing(Kind::ReplicaSet, ns, name))
                .collect(),
            Kind::Pod => {
                let hash = meta.labels.as_ref().and_then(|l| {
                    l.get("pod-template-hash")
                        .or_else(|| l.get(crate::cluster::rollouts::POD_TEMPLATE_HASH))
                });
                let mut out: BTreeSet<AppKey> = self.listing(Kind::Pod, ns, name);
                for o in owners {
                    match o.kind.as_str() {
                        "ReplicaSet" => {
                            let deployment = hash
                                .and_then(|h| o.name.strip_suffix(&format!("-{h}")))
                                .or_else(|| o.name.rsplit_once('-').map(|(d, _)| d));
                            if let Some(d) = deployment {
                                out.extend(self.listing(Kind::Deployment, ns, d));
                                out.extend(self.listing(Kind::Rollout, ns, d));
                            }
                            out.extend(self.listing(Kind::ReplicaSet, ns, &o.name));
                        }
                        "StatefulSet" => out.extend(self.listing(Kind::StatefulSet, ns, &o.name)),
                        "DaemonSet" => out.extend(self.listing(Kind::DaemonSet, ns, &o.name)),
                        _ => {}
                    }
                }
                if out.is_empty() {
                    // A stray can sit behind any Service of the namespace.
                    self.in_namespace(ns)
                } else {
                    out
                }
            }
            Kind::EndpointSlice => {
                match meta.labels.as_ref().and_then(|l| l.get(SERVICE_NAME_LABEL)) {
                    Some(service) => self.listing(Kind::Service, ns, service),
                    None => self.in_namespace(ns),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::argo::{ApplicationSpec, ApplicationStatus, Destination, ResourceStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn app(name: &str, ns: &str, resources: &[(&str, &str, &str)]) -> Application {
        Application {
            api_version: String::new(),
            kind: String::new(),
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("argocd".into()),
                ..Default::default()
            },
            spec: ApplicationSpec {
                destination: Destination {
                    namespace: Some(ns.into()),
                    ..Default::default()
                },
                ..Default::default()
            },
            status: Some(ApplicationStatus {
                resources: Some(
                    resources
                        .iter()
                        .map(|(g, k, n)| ResourceStatus {
                            group: Some(g.to_string()),
                            kind: Some(k.to_string()),
                            namespace: Some(ns.into()),
                            name: Some(n.to_string()),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
        }
    }

    fn meta(ns: &str, name: &str) -> ObjectMeta {
        ObjectMeta {
            namespace: Some(ns.into()),
            name: Some(name.into()),
            ..Default::default()
        }
    }

    fn owned(ns: &str, name: &str, kind: &str, owner: &str, hash: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            owner_references: Some(vec![OwnerReference {
                kind: kind.into(),
                name: owner.into(),
                ..Default::default()
            }]),
            labels: hash.map(|h| [("pod-template-hash".to_string(), h.to_string())].into()),
            ..meta(ns, name)
        }
    }

    fn key(name: &str) -> AppKey {
        ("argocd".into(), name.into())
    }

    fn fleet() -> FleetIndex {
        let mut f = FleetIndex::new();
        f.upsert(&app(
            "shop",
            "shop",
            &[("apps", "Deployment", "web"), ("", "Service", "web")],
        ));
        f.upsert(&app(
            "db",
            "shop",
            &[("apps", "StatefulSet", "db"), ("", "Service", "db")],
        ));
        f.upsert(&app("blog", "blog", &[("apps", "Deployment", "web")]));
        f
    }

    #[test]
    fn routes_each_kind_to_its_applications() {
        let f = fleet();
        let one = |k: &str| BTreeSet::from([key(k)]);
        assert_eq!(
            f.affected(Kind::Application, &meta("argocd", "new")),
            one("new")
        );
        assert_eq!(
            f.affected(Kind::Deployment, &meta("shop", "web")),
            one("shop")
        );
        assert_eq!(
            f.affected(Kind::Deployment, &meta("blog", "web")),
            one("blog")
        );
        assert!(f
            .affected(Kind::Deployment, &meta("shop", "other"))
            .is_empty());
        assert_eq!(
            f.affected(
                Kind::ReplicaSet,
                &owned("shop", "web-5d8f", "Deployment", "web", None)
            ),
            one("shop")
        );
        assert_eq!(
            f.affected(
                Kind::Pod,
                &owned("shop", "web-5d8f-x", "ReplicaSet", "web-5d8f", Some("5d8f"))
            ),
            one("shop")
        );
        assert_eq!(
            f.affected(Kind::Pod, &owned("shop", "db-0", "StatefulSet", "db", None)),
            one("db")
        );
        let mut slice = meta("shop", "db-abc");
        slice.labels = Some([(SERVICE_NAME_LABEL.to_string(), "db".to_string())].into());
        assert_eq!(f.affected(Kind::EndpointSlice, &slice), one("db"));
    }

    #[test]
    fn rollouts_their_replica_sets_and_pods_route_to_the_application_listing_them() {
        let mut f = fleet();
        f.upsert(&app(
            "canary",
            "apps",
            &[("argoproj.io", "Rollout", "web"), ("", "Service", "web")],
        ));
        let one = BTreeSet::from([key("canary")]);
        assert_eq!(f.affected(Kind::Rollout, &meta("apps", "web")), one);
        assert_eq!(
            f.affected(
                Kind::ReplicaSet,
                &owned("apps", "web-6b7c9d", "Rollout", "web", None)
            ),
            one
        );
        // A Rollout's pods carry rollouts-pod-template-hash, not pod-template-hash.
        let mut pod = owned("apps", "web-6b7c9d-x1", "ReplicaSet", "web-6b7c9d", None);
        pod.labels = Some(
            [(
                crate::cluster::rollouts::POD_TEMPLATE_HASH.to_string(),
                "6b7c9d".to_string(),
            )]
            .into(),
        );
        assert_eq!(f.affected(Kind::Pod, &pod), one);
        // The same name in another namespace is another Application's or none.
        assert!(f.affected(Kind::Rollout, &meta("shop", "web")).is_empty());
    }

    #[test]
    fn strays_and_relists_fan_out() {
        let f = fleet();
        assert_eq!(
            f.affected(Kind::Pod, &meta("shop", "web-stray")),
            BTreeSet::from([key("db"), key("shop")])
        );
        assert_eq!(f.affected(Kind::Pod, &meta("", "")).len(), 3);
        assert!(f.affected(Kind::Pod, &meta("elsewhere", "x")).is_empty());
    }

    #[test]
    fn reindexing_and_removal_forget_old_resources() {
        let mut f = fleet();
        f.upsert(&app("shop", "shop", &[("apps", "Deployment", "api")]));
        assert!(f
            .affected(Kind::Deployment, &meta("shop", "web"))
            .is_empty());
        assert_eq!(
            f.affected(Kind::Deployment, &meta("shop", "api")),
            BTreeSet::from([key("shop")])
        );
        f.remove("argocd", "blog");
        assert!(f
            .affected(Kind::Deployment, &meta("blog", "web"))
            .is_empty());
        assert_eq!(f.len(), 2);
        f.remove("argocd", "shop");
        f.remove("argocd", "db");
        f.remove("argocd", "db");
        assert!(f.is_empty());
        assert!(f.by_object.is_empty() && f.by_namespace.is_empty());
    }
}
