//! The watched objects as Traefik's dynamic configuration, and what each route's status says.
//!
//! Each match of each rule of a taken route (for each of its host names) is one router on the
//! entry point; a rule's backendRefs are one weighted service whose children are the Services'
//! ready endpoints, so a canary gets its weight's share. A backendRef that cannot be followed
//! keeps its share, answered 503 (Traefik's answer when a service has no server), as the
//! Gateway API asks: the other backends do not take its traffic.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::attach::{self, Parent, Refusal};
use super::backends::{self, Backend};
use super::rules;
use super::world::{Served, World, name, namespace};

/// A route's parents this gateway answers for, and whether its backends resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub parents: Vec<Parent>,
    /// Why the route cannot be served at all (a filter, a match type), whatever its parents.
    pub unsupported: Option<Refusal>,
    pub resolved: Result<(), Refusal>,
}

/// What the translation made.
#[derive(Debug, Clone, Default)]
pub struct Translation {
    /// Traefik's dynamic configuration: `http.routers` and `http.services`.
    pub config: Value,
    /// By route (namespace, name), every route watched: an empty `parents` for one that does
    /// not name this Gateway, so an entry this gateway wrote before is taken out.
    pub verdicts: BTreeMap<(String, String), Verdict>,
    /// Routes taken, by listener name.
    pub attached: BTreeMap<String, i64>,
}

/// Translate `world` for the Gateway `served`.
pub fn translate(world: &World, served: &Served) -> Translation {
    let mut routes: Vec<&Value> = world.routes.iter().collect();
    routes.sort_by_key(|r| {
        let created = r["metadata"]["creationTimestamp"]
            .as_str()
            .unwrap_or_default();
        (
            created.to_owned(),
            namespace(r).to_owned(),
            name(r).to_owned(),
        )
    });
    let mut made = Translation::default();
    let (mut routers, mut services) = (Map::new(), Map::new());
    for (age, route) in routes.into_iter().enumerate() {
        let parents = attach::parents(world, served, route);
        let taken: Vec<&str> = (parents.iter())
            .filter_map(|p| p.listeners.as_ref().ok())
            .flatten()
            .map(String::as_str)
            .collect();
        let (verdict, made_here) = route_verdict(world, served, route, parents.clone(), age);
        if verdict.unsupported.is_none() && !taken.is_empty() {
            let (route_routers, route_services) = made_here;
            routers.extend(route_routers);
            services.extend(route_services);
            for listener in dedup(taken) {
                *made.attached.entry(listener).or_default() += 1;
            }
        }
        let key = (namespace(route).to_owned(), name(route).to_owned());
        made.verdicts.insert(key, verdict);
    }
    made.config = config(routers, services);
    made
}

/// The configuration of `routers` and `services`, leaving out what is empty: Traefik refuses an
/// empty map ("cannot be a standalone element") and would keep serving the routes before it.
fn config(routers: Map<String, Value>, services: Map<String, Value>) -> Value {
    let mut http = Map::new();
    for (key, map) in [("routers", routers), ("services", services)] {
        if !map.is_empty() {
            http.insert(key.to_owned(), Value::Object(map));
        }
    }
    if http.is_empty() {
        return json!({});
    }
    json!({ "http": http })
}

fn dedup(names: Vec<&str>) -> Vec<String> {
    let mut names: Vec<String> = names.into_iter().map(str::to_owned).collect();
    names.sort();
    names.dedup();
    names
}

type Made = (Map<String, Value>, Map<String, Value>);

/// A route's verdict, and its routers and services (served only when a parent took it).
fn route_verdict(
    world: &World,
    served: &Served,
    route: &Value,
    parents: Vec<Parent>,
    age: usize,
) -> (Verdict, Made) {
    let mut verdict = Verdict {
        parents,
        unsupported: unsupported(route),
        resolved: Ok(()),
    };
    let (mut routers, mut services) = (Map::new(), Map::new());
    if verdict.parents.is_empty() {
        return (verdict, (routers, services));
    }
    let hosts = route_hosts(world, &verdict.parents, route);
    let prefix = format!("{}_{}", namespace(route), name(route).replace('.', "_"));
    for (index, rule) in (route["spec"]["rules"].as_array().into_iter().flatten()).enumerate() {
        let service = format!("s_{prefix}_r{index}");
        let (made, unresolved) = rule_services(world, route, rule, &service);
        if let (Some(first), Ok(())) = (unresolved, &verdict.resolved) {
            verdict.resolved = Err(first);
        }
        services.extend(made);
        let matches = rule["matches"]
            .as_array()
            .filter(|m| !m.is_empty())
            .cloned();
        for (m, matched) in matches
            .unwrap_or_else(|| vec![json!({})])
            .iter()
            .enumerate()
        {
            for (h, host) in hosts.iter().enumerate() {
                match rules::rule(host.as_deref(), matched, age) {
                    Ok(made) => {
                        let router = json!({
                            "entryPoints": [served.entry_point],
                            "rule": made.rule,
                            "priority": made.priority,
                            "service": service,
                        });
                        routers.insert(format!("r_{prefix}_r{index}_m{m}_h{h}"), router);
                    }
                    Err(rules::Unsupported(why)) => {
                        verdict
                            .unsupported
                            .get_or_insert(Refusal::new("UnsupportedValue", why));
                    }
                }
            }
        }
    }
    (verdict, (routers, services))
}

/// The host names the route is served for, over the listeners that took it.
fn route_hosts(world: &World, parents: &[Parent], route: &Value) -> Vec<Option<String>> {
    let taken: Vec<&String> = parents
        .iter()
        .filter_map(|p| p.listeners.as_ref().ok())
        .flatten()
        .collect();
    let mut hosts: Vec<Option<String>> = (world.gateway["spec"]["listeners"]
        .as_array()
        .into_iter()
        .flatten())
    .filter(|l| taken.iter().any(|t| l["name"] == t.as_str()))
    .flat_map(|l| attach::hosts(l, route))
    .collect();
    hosts.sort();
    hosts.dedup();
    hosts
}

/// Why the route cannot be served: filters (on a rule or a backendRef) are not.
fn unsupported(route: &Value) -> Option<Refusal> {
    let filtered = |v: &Value| v["filters"].as_array().is_some_and(|f| !f.is_empty());
    let rules: Vec<&Value> = route["spec"]["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let any = rules
        .iter()
        .any(|r| filtered(r) || (r["backendRefs"].as_array().into_iter().flatten()).any(filtered));
    any.then(|| {
        Refusal::new(
            "UnsupportedValue",
            "filters are not served by this gateway: take them out of the route",
        )
    })
}

/// The weighted service `service` of a rule and its children, and the first backendRef that
/// did not resolve.
fn rule_services(
    world: &World,
    route: &Value,
    rule: &Value,
    service: &str,
) -> (Map<String, Value>, Option<Refusal>) {
    let mut made = Map::new();
    let mut children = Vec::new();
    let mut unresolved = None;
    for (index, reference) in (rule["backendRefs"].as_array().into_iter().flatten()).enumerate() {
        let backend = match backends::resolve(world, namespace(route), reference) {
            Ok(backend) => backend,
            Err(why) => {
                unresolved.get_or_insert(Refusal::new(why.reason, why.message));
                Backend {
                    service: String::new(),
                    weight: reference["weight"].as_i64().unwrap_or(1),
                    servers: Vec::new(),
                }
            }
        };
        if backend.weight <= 0 {
            continue;
        }
        let child = format!("{service}_b{index}");
        made.insert(child.clone(), load_balancer(&backend.servers));
        children.push(json!({ "name": child, "weight": backend.weight }));
    }
    let own = if children.is_empty() {
        load_balancer(&[])
    } else {
        json!({ "weighted": { "services": children } })
    };
    made.insert(service.to_owned(), own);
    (made, unresolved)
}

/// A service of `servers`, passing the client's Host header on.
fn load_balancer(servers: &[String]) -> Value {
    let servers: Vec<Value> = servers.iter().map(|url| json!({ "url": url })).collect();
    json!({ "loadBalancer": { "servers": servers, "passHostHeader": true } })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::routes::status;
    use crate::gateway::routes::world::example as served;

    fn service(name: &str, address: &str) -> (Value, Value) {
        let service = json!({
            "metadata": { "namespace": "kubeflow", "name": name },
            "spec": { "ports": [{ "name": "http", "port": 8080 }] },
        });
        let slice = json!({
            "metadata": { "namespace": "kubeflow", "name": format!("{name}-1"), "labels": { "kubernetes.io/service-name": name } },
            "ports": [{ "name": "http", "port": 9000 }],
            "endpoints": [{ "addresses": [address], "conditions": { "ready": true } }],
        });
        (service, slice)
    }

    fn world(routes: Vec<Value>) -> World {
        let (v1, v1_slice) = service("digits-v1", "10.0.0.1");
        let (v2, v2_slice) = service("digits-v2", "10.0.0.2");
        World {
            gateway: json!({
                "metadata": { "namespace": "kubeflow", "name": "gateway", "generation": 1 },
                "spec": { "listeners": [{ "name": "http", "protocol": "HTTP", "port": 8000 }] },
            }),
            routes,
            services: vec![v1, v2],
            slices: vec![v1_slice, v2_slice],
            grants: Vec::new(),
        }
    }

    fn canary(backends: Value) -> Value {
        json!({
            "metadata": { "namespace": "kubeflow", "name": "digits", "generation": 2 },
            "spec": {
                "parentRefs": [{ "name": "gateway" }],
                "rules": [{
                    "matches": [{ "path": { "type": "PathPrefix", "value": "/v2/models/digits" } }],
                    "backendRefs": backends,
                }],
            },
        })
    }

    #[test]
    fn a_canary_route_is_one_router_to_a_weighted_service_of_each_versions_endpoints() {
        let backends = json!([{ "name": "digits-v1", "port": 8080, "weight": 90 }, { "name": "digits-v2", "port": 8080, "weight": 10 }]);
        let made = translate(&world(vec![canary(backends)]), &served());
        let http = &made.config["http"];
        let router = &http["routers"]["r_kubeflow_digits_r0_m0_h0"];
        assert_eq!(
            router["rule"],
            r#"(Path("/v2/models/digits") || PathPrefix("/v2/models/digits/"))"#
        );
        assert_eq!(router["entryPoints"], json!(["web"]));
        assert_eq!(router["service"], "s_kubeflow_digits_r0");
        assert_eq!(
            http["services"]["s_kubeflow_digits_r0"]["weighted"]["services"],
            json!([{ "name": "s_kubeflow_digits_r0_b0", "weight": 90 }, { "name": "s_kubeflow_digits_r0_b1", "weight": 10 }])
        );
        assert_eq!(
            http["services"]["s_kubeflow_digits_r0_b1"]["loadBalancer"]["servers"],
            json!([{ "url": "http://10.0.0.2:9000" }])
        );
        assert_eq!(made.attached.get("http"), Some(&1));
        let verdict = &made.verdicts[&("kubeflow".to_owned(), "digits".to_owned())];
        assert_eq!(verdict.resolved, Ok(()));
    }

    #[test]
    fn a_missing_backend_keeps_its_share_answered_by_no_server_and_says_so_in_the_status() {
        let backends = json!([{ "name": "digits-v1", "port": 8080, "weight": 50 }, { "name": "digits-v3", "port": 8080, "weight": 50 }]);
        let route = canary(backends);
        let made = translate(&world(vec![route.clone()]), &served());
        let services = &made.config["http"]["services"];
        assert_eq!(
            services["s_kubeflow_digits_r0_b1"]["loadBalancer"]["servers"],
            json!([])
        );
        let verdict = &made.verdicts[&("kubeflow".to_owned(), "digits".to_owned())];
        let written = status::route(&route, verdict, &served(), "2026-12-01T00:00:00Z").unwrap();
        let conditions = &written["parents"][0]["conditions"];
        assert_eq!(conditions[0]["type"], "Accepted");
        assert_eq!(conditions[0]["status"], "True");
        assert_eq!(conditions[1]["reason"], "BackendNotFound");
        assert_eq!(conditions[1]["observedGeneration"], 2);
        assert_eq!(
            written["parents"][0]["controllerName"],
            "traefik.io/gateway-controller"
        );
    }

    #[test]
    fn a_route_with_filters_is_refused_and_not_served() {
        let mut route = canary(json!([{ "name": "digits-v1", "port": 8080 }]));
        route["spec"]["rules"][0]["filters"] = json!([{ "type": "RequestHeaderModifier" }]);
        let made = translate(&world(vec![route.clone()]), &served());
        // Nothing to serve is an empty configuration, which Traefik takes (an empty map of
        // routers it refuses, and would keep the routes it had).
        assert_eq!(made.config, json!({}));
        assert!(made.attached.is_empty());
        let verdict = &made.verdicts[&("kubeflow".to_owned(), "digits".to_owned())];
        let written = status::route(&route, verdict, &served(), "now").unwrap();
        assert_eq!(
            written["parents"][0]["conditions"][0]["reason"],
            "UnsupportedValue"
        );
    }

    #[test]
    fn a_status_that_says_the_same_is_not_written_again_and_other_controllers_entries_stay() {
        let mut route = canary(json!([{ "name": "digits-v1", "port": 8080 }]));
        let other = json!({ "parentRef": { "name": "mesh" }, "controllerName": "istio.io/gateway-controller", "conditions": [] });
        route["status"] = json!({ "parents": [other] });
        let made = translate(&world(vec![route.clone()]), &served());
        let verdict = &made.verdicts[&("kubeflow".to_owned(), "digits".to_owned())];
        let written = status::route(&route, verdict, &served(), "then").unwrap();
        assert_eq!(written["parents"][0], other);
        assert_eq!(
            written["parents"][1]["conditions"][0]["lastTransitionTime"],
            "then"
        );
        route["status"] = written;
        assert_eq!(status::route(&route, verdict, &served(), "later"), None);
        // The route moved to another Gateway: this gateway's entry goes, the other stays.
        route["spec"]["parentRefs"] = json!([{ "name": "elsewhere" }]);
        let made = translate(&world(vec![route.clone()]), &served());
        let verdict = &made.verdicts[&("kubeflow".to_owned(), "digits".to_owned())];
        let written = status::route(&route, verdict, &served(), "later").unwrap();
        assert_eq!(written["parents"], json!([other]));
    }

    #[test]
    fn the_gateway_says_its_address_and_how_many_routes_each_listener_took() {
        let routes = vec![canary(json!([{ "name": "digits-v1", "port": 8080 }]))];
        let world = world(routes);
        let made = translate(&world, &served());
        let written = status::gateway(
            &world.gateway,
            &served(),
            &made.attached,
            "gateway.kubeflow.svc",
            "now",
        )
        .unwrap();
        assert_eq!(
            written["addresses"],
            json!([{ "type": "Hostname", "value": "gateway.kubeflow.svc" }])
        );
        assert_eq!(written["listeners"][0]["attachedRoutes"], 1);
        assert_eq!(written["conditions"][1]["type"], "Programmed");
        assert_eq!(written["conditions"][1]["status"], "True");
    }
}
