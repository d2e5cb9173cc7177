//! The gate's pure core on routes: counterexamples where Argo CD says Synced and Healthy at
//! the SHA and every endpoint of the Application's Services serves the new page, while the
//! Ingress or HTTPRoute its clients arrive through sends them elsewhere (a leftover Service, a
//! weight left at 100 % on the old backend, a Service that does not exist, a route no Gateway
//! accepted); the positive cases; and a property over random backends, weights and acceptance.

use cnpe_lab::serving::decide;
use cnpe_lab::serving::routes::RouteKind;
use cnpe_lab::serving::verdict::{Condition, Decision, Verdict};
use proptest::prelude::*;
use rstest::rstest;
use serde_json::json;

#[path = "support/world.rs"]
mod world;
use world::*;

const INGRESS: (&str, &str, &str) = ("networking.k8s.io", "Ingress", "web");
const HTTP_ROUTE: (&str, &str, &str) = ("gateway.networking.k8s.io", "HTTPRoute", "web");

/// The promoted canary Rollout world, with `route` listed by the Application.
fn routed(route: (&str, &str, &str)) -> World {
    let mut w = promoted(canary());
    w.app = application(&[
        ("argoproj.io", "Rollout", "web"),
        ("", "Service", "web"),
        route,
    ]);
    w
}

/// Service legacy outside the Application, serving the old page from an old pod.
fn with_legacy(w: &mut World) {
    w.services.push(service("legacy"));
}

fn unmet_of(v: &Verdict, c: Condition) -> Vec<String> {
    v.unmet
        .iter()
        .filter(|u| u.condition == c)
        .map(|u| format!("{}: {}", u.subject, u.found))
        .collect()
}

#[rstest]
#[case::ingress(INGRESS, None)]
#[case::http_route_unweighted(HTTP_ROUTE, Some(vec![("web", None)]))]
#[case::http_route_all_to_web(HTTP_ROUTE, Some(vec![("web", Some(100)), ("legacy", Some(0))]))]
fn a_route_to_the_applications_service_is_approved(
    #[case] route: (&str, &str, &str),
    #[case] backends: Option<Vec<(&str, Option<i32>)>>,
) {
    let mut w = routed(route);
    with_legacy(&mut w);
    match backends {
        None => w.ingresses.push(ingress("web", "web")),
        Some(b) => w.http_routes.push(http_route("web", &b)),
    }
    let v = w.decide();
    assert_eq!(v.decision, Decision::Approved, "{}", text(&v));
    assert_eq!(v.routes.len(), 1);
    let to_web = v.routes[0]
        .backends
        .iter()
        .find(|b| b.backend.name == "web")
        .expect("the backend web is reported");
    assert_eq!(to_web.problem, None);
    assert!(text(&v).contains("routes:\n"), "{}", text(&v));
}

/// Trap: the Ingress still sends clients to Service legacy (outside the Application) that
/// serves the old page; every endpoint the gate probes serves the new one.
#[test]
fn an_ingress_to_a_service_outside_the_application_is_named() {
    let mut w = routed(INGRESS);
    with_legacy(&mut w);
    w.ingresses.push(ingress("web", "legacy"));
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending, "{}", text(&v));
    assert_eq!(
        unmet_of(&v, Condition::RouteBackend),
        ["Ingress shop/web host shop.example path /: Service shop/legacy, which the Application does not manage"],
        "{}",
        text(&v)
    );
    assert_eq!(conditions(&v), [Condition::RouteBackend]);
    assert!(
        v.likely_causes
            .iter()
            .any(|c| c.contains("leftover backend")),
        "{:?}",
        v.likely_causes
    );
}

#[rstest]
#[case::missing_service("web-v2", "Service shop/web-v2 does not exist")]
#[case::unknown_port("web:8080", "Service shop/web has no port 8080 (it has 80 (http))")]
fn a_broken_ingress_backend_is_named(#[case] backend: &str, #[case] found: &str) {
    let mut w = routed(INGRESS);
    let (name, port) = backend.split_once(':').unwrap_or((backend, "80"));
    let mut i = ingress("web", name);
    let path = &mut i.spec.as_mut().unwrap().rules.as_mut().unwrap()[0]
        .http
        .as_mut()
        .unwrap()
        .paths[0];
    path.backend
        .service
        .as_mut()
        .unwrap()
        .port
        .as_mut()
        .unwrap()
        .number = Some(port.parse().unwrap());
    w.ingresses.push(i);
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending, "{}", text(&v));
    assert_eq!(
        unmet_of(&v, Condition::RouteBackend),
        [format!(
            "Ingress shop/web host shop.example path /: {found}"
        )]
    );
}

#[test]
fn an_ingress_resource_backend_cannot_be_followed_and_is_named() {
    let mut w = routed(INGRESS);
    w.ingresses.push(from(json!({
        "metadata": {"name": "web", "namespace": NS},
        "spec": {"defaultBackend": {"resource": {"apiGroup": "k8s.example", "kind": "StorageBucket", "name": "static"}}}
    })));
    let v = w.decide();
    assert_eq!(
        unmet_of(&v, Condition::RouteBackend),
        ["Ingress shop/web default backend: a backend of kind k8s.example/StorageBucket static: the gate follows Service backends only"]
    );
}

/// Trap: an HTTPRoute with weights 100/0: every client goes to the old backend.
#[test]
fn an_http_route_weighted_100_0_to_the_old_backend_is_named() {
    let mut w = routed(HTTP_ROUTE);
    with_legacy(&mut w);
    w.http_routes.push(http_route(
        "web",
        &[("legacy", Some(100)), ("web", Some(0))],
    ));
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending, "{}", text(&v));
    assert_eq!(
        unmet_of(&v, Condition::RouteWeight),
        ["HTTPRoute shop/web rule 1 path /: weights shop/legacy 100, shop/web 0 (0 % to the Application's Services)"]
    );
    assert_eq!(
        unmet_of(&v, Condition::RouteBackend),
        ["HTTPRoute shop/web rule 1 path /: Service shop/legacy, which the Application does not manage"]
    );
    assert!(v
        .likely_causes
        .iter()
        .any(|c| c.contains("the release gets 0 %")));
}

#[test]
fn an_http_route_with_every_weight_zero_is_named() {
    let mut w = routed(HTTP_ROUTE);
    w.http_routes.push(http_route("web", &[("web", Some(0))]));
    let v = w.decide();
    assert_eq!(conditions(&v), [Condition::RouteWeight], "{}", text(&v));
    assert!(v
        .likely_causes
        .iter()
        .any(|c| c.contains("no backend at all")));
}

#[rstest]
#[case::no_status(None, "no status from Gateway cnpe-ingress/web")]
#[case::not_accepted(Some(("Accepted", "NotAllowedByListeners")), "Gateway cnpe-ingress/web: Accepted False (NotAllowedByListeners: x)")]
#[case::refs_unresolved(Some(("ResolvedRefs", "BackendNotFound")), "Gateway cnpe-ingress/web: ResolvedRefs False (BackendNotFound: x)")]
fn an_http_route_no_gateway_accepted_is_named(
    #[case] failing: Option<(&str, &str)>,
    #[case] found: &str,
) {
    let mut w = routed(HTTP_ROUTE);
    let mut r = http_route("web", &[("web", None)]);
    match failing {
        None => r.status = None,
        Some((t, reason)) => {
            let c = r.status.as_mut().unwrap().parents[0]
                .conditions
                .iter_mut()
                .find(|c| c.type_ == t)
                .unwrap();
            c.status = "False".into();
            c.reason = reason.into();
            c.message = "x".into();
        }
    }
    w.http_routes.push(r);
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending, "{}", text(&v));
    let got = unmet_of(&v, Condition::RouteAccepted);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].contains(found), "{got:?}");
}

#[rstest]
#[case::ingress(INGRESS)]
#[case::http_route(HTTP_ROUTE)]
fn a_listed_route_that_is_absent_is_named(#[case] route: (&str, &str, &str)) {
    let v = routed(route).decide();
    let got = unmet_of(&v, Condition::RouteBackend);
    assert_eq!(got.len(), 1, "{}", text(&v));
    assert!(got[0].contains("absent from the watch"), "{got:?}");
}

#[test]
fn routes_of_reads_both_kinds_from_status_resources() {
    let w = routed(INGRESS);
    let got = decide::routes_of(&w.app);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].kind, RouteKind::Ingress);
    for k in RouteKind::ALL {
        let (g, kind) = k.group_kind();
        assert_eq!(RouteKind::from_group_kind(g, kind), Some(k));
    }
    assert_eq!(RouteKind::from_group_kind("", "Ingress"), None);
}

#[derive(Debug, Clone, Copy)]
enum Target {
    App,
    Outside,
    Missing,
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        Just(Target::App),
        Just(Target::Outside),
        Just(Target::Missing)
    ]
}

proptest! {
    /// Whatever an HTTPRoute's backends, weights and acceptance: approved iff it is accepted,
    /// every backend that gets traffic (weight unset or above 0) is the Application's Service,
    /// and the Application's Services get a weight above 0. Never a final rejection (a route
    /// can be fixed while the gate waits). The converse on the good values keeps the property
    /// from holding vacuously.
    #[test]
    fn approved_means_every_client_reaches_the_release(
        backends in prop::collection::vec((target(), prop::option::of(0i32..3)), 1..4),
        accepted in any::<bool>(),
    ) {
        let mut w = routed(HTTP_ROUTE);
        with_legacy(&mut w);
        let names: Vec<(&str, Option<i32>)> = backends
            .iter()
            .map(|(t, weight)| {
                let name = match t {
                    Target::App => "web",
                    Target::Outside => "legacy",
                    Target::Missing => "gone",
                };
                (name, *weight)
            })
            .collect();
        let mut r = http_route("web", &names);
        if !accepted {
            r.status = None;
        }
        w.http_routes.push(r);
        let v = w.decide();
        let traffic = |w: &Option<i32>| w.is_none_or(|w| w > 0);
        let good = accepted
            && backends.iter().all(|(t, w)| matches!(t, Target::App) || !traffic(w))
            && backends.iter().any(|(t, w)| matches!(t, Target::App) && traffic(w));
        prop_assert_eq!(v.decision == Decision::Approved, good, "{}", v.render_text());
        prop_assert_ne!(v.decision, Decision::Rejected);
    }
}

/// What a user reads when a route sends the clients elsewhere: the route section with each
/// backend and its problem, the unmet conditions and the likely causes.
#[test]
fn a_rejected_route_reads_as_a_route_section() {
    let mut w = routed(HTTP_ROUTE);
    with_legacy(&mut w);
    w.http_routes.push(http_route(
        "web",
        &[("legacy", Some(100)), ("web", Some(0))],
    ));
    let text = text(&w.decide());
    assert!(text.contains("routes:"), "{text}");
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"));
    s.set_prepend_module_to_snapshot(false);
    s.bind(|| insta::assert_snapshot!("serving_route_weighted_verdict_text", text));
}

// ---- --via-route: what a client of the ingress controller gets

/// `bodies` as one round of answers through the controller for every request the routes imply.
fn through_the_controller(w: &mut World, bodies: &[&str]) {
    let requests = decide::client_requests_of(&w.request(), &w.objects());
    let round: Vec<_> = bodies.iter().map(|b| answer(b)).collect();
    w.route_answers = Some(requests.into_iter().map(|r| (r, round.clone())).collect());
}

/// Every object check passes (the route sends clients to web) and every endpoint serves the
/// release; through the controller, clients get the release too: approved.
#[rstest]
#[case::ingress(INGRESS)]
#[case::http_route(HTTP_ROUTE)]
fn via_route_approves_what_clients_get_through_the_controller(#[case] route: (&str, &str, &str)) {
    let mut w = routed(route);
    match route.1 {
        "Ingress" => w.ingresses.push(ingress("web", "web")),
        _ => w.http_routes.push(http_route("web", &[("web", None)])),
    }
    through_the_controller(&mut w, &[BODY]);
    let v = w.decide();
    assert_eq!(v.decision, Decision::Approved, "{}", text(&v));
}

/// Trap the object checks cannot see: the route and every endpoint are right, but the
/// controller answers one client in seven with the old page (a stale configuration, another
/// route with the same host winning).
#[test]
fn via_route_names_a_client_who_gets_the_old_page() {
    let mut w = routed(HTTP_ROUTE);
    w.http_routes
        .push(http_route("web", &[("web", Some(50)), ("web", Some(50))]));
    let mut bodies = vec![BODY; 6];
    bodies.push(OLD_BODY);
    through_the_controller(&mut w, &bodies);
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending, "{}", text(&v));
    assert_eq!(
        unmet_of(&v, Condition::RouteAnswers),
        vec!["HTTPRoute shop/web at shop.example/: 1 of 7 answers were not the release; the first: HTTP 200 \"shop r1\"".to_string()]
    );
    assert!(
        v.likely_causes
            .iter()
            .any(|c| c.contains("a client of HTTPRoute shop/web")),
        "{:?}",
        v.likely_causes
    );
}

/// Not asked yet, or only answers from before the gate started: never approved.
#[rstest]
#[case::not_asked(None, "not asked through the ingress controller yet")]
#[case::before_the_gate(Some(-5), "only an answer from before the gate started")]
fn via_route_needs_fresh_answers(#[case] at: Option<i64>, #[case] found: &str) {
    let mut w = routed(INGRESS);
    w.ingresses.push(ingress("web", "web"));
    through_the_controller(&mut w, &[BODY]);
    match at {
        None => w.route_answers = Some(Default::default()),
        Some(secs) => {
            for round in w.route_answers.as_mut().unwrap().values_mut() {
                round[0].at = t(secs);
            }
        }
    }
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending, "{}", text(&v));
    let got = unmet_of(&v, Condition::RouteAnswers);
    assert!(got.len() == 1 && got[0].contains(found), "{got:?}");
}

/// --via-route on an Application without a route: nothing to send through the controller,
/// so it never approves (the flag asks a question the gate cannot answer).
#[test]
fn via_route_without_a_route_fails_closed() {
    let mut w = promoted(canary());
    w.route_answers = Some(Default::default());
    let v = w.decide();
    assert_eq!(v.decision, Decision::Pending, "{}", text(&v));
    assert_eq!(conditions(&v), vec![Condition::RouteAnswers]);
}

/// The requests follow the route: each host and path once, tries from the weights, and the
/// gate's --path where a prefix covers it.
#[test]
fn client_requests_follow_the_routes_hosts_paths_and_weights() {
    let mut w = routed(HTTP_ROUTE);
    w.http_routes.push(http_route(
        "web",
        &[("web", Some(90)), ("canary", Some(10))],
    ));
    let r = decide::client_requests_of(&w.request(), &w.objects());
    assert_eq!(r.len(), 1);
    assert_eq!(
        (r[0].host.as_deref(), r[0].path.as_str(), r[0].tries),
        (Some("shop.example"), "/", 44)
    );
    let mut w = routed(INGRESS);
    w.ingresses.push(ingress("web", "web"));
    let r = decide::client_requests_of(&w.request(), &w.objects());
    assert_eq!(
        (r[0].host.as_deref(), r[0].tries),
        (Some("shop.example"), 1)
    );
}
