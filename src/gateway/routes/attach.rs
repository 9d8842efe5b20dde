//! Which of a route's parentRefs name the served Gateway, and whether one of its listeners
//! takes the route: the listener the reference names (sectionName, port), served (HTTP, on
//! Traefik's entry point), allowing the route's namespace and kind, sharing a host name.

use serde_json::Value;

use super::world::{GROUP, Served, World, namespace};

/// Why a parent did not accept a route, or a listener is not served: a condition's reason
/// and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: &'static str,
    pub message: String,
}

impl Refusal {
    pub fn new(reason: &'static str, message: impl Into<String>) -> Refusal {
        Refusal {
            reason,
            message: message.into(),
        }
    }
}

/// A parentRef of a route that names the served Gateway, and the listeners that took it.
#[derive(Debug, Clone, PartialEq)]
pub struct Parent {
    pub reference: Value,
    pub listeners: Result<Vec<String>, Refusal>,
}

/// Whether `listener` of the Gateway is served, or why not.
pub fn listener_served(served: &Served, listener: &Value) -> Result<(), Refusal> {
    let protocol = listener["protocol"].as_str().unwrap_or_default();
    if protocol != "HTTP" {
        return Err(Refusal::new(
            "UnsupportedProtocol",
            format!("protocol {protocol} is not served: only HTTP"),
        ));
    }
    let port = listener["port"].as_i64().unwrap_or_default();
    if port != served.port {
        return Err(Refusal::new(
            "PortUnavailable",
            format!(
                "port {port} is not served: the gateway listens on {} alone",
                served.port
            ),
        ));
    }
    Ok(())
}

/// The route's parentRefs that name the served Gateway, each with the listeners that took it.
pub fn parents(world: &World, served: &Served, route: &Value) -> Vec<Parent> {
    let own = namespace(route);
    (route["spec"]["parentRefs"].as_array().into_iter().flatten())
        .filter(|r| r["group"].as_str().unwrap_or(GROUP) == GROUP)
        .filter(|r| r["kind"].as_str().unwrap_or("Gateway") == "Gateway")
        .filter(|r| r["namespace"].as_str().unwrap_or(own) == served.namespace)
        .filter(|r| r["name"] == served.name.as_str())
        .map(|reference| Parent {
            reference: reference.clone(),
            listeners: listeners(world, served, route, reference),
        })
        .collect()
}

/// The listeners that take `route` through `reference`, or why none does.
fn listeners(
    world: &World,
    served: &Served,
    route: &Value,
    reference: &Value,
) -> Result<Vec<String>, Refusal> {
    if world.gateway.is_null() {
        return Err(Refusal::new(
            "NoMatchingParent",
            format!("Gateway {} is not there", served.name),
        ));
    }
    let named: Vec<&Value> = (world.gateway["spec"]["listeners"]
        .as_array()
        .into_iter()
        .flatten())
    .filter(|l| reference["sectionName"].is_null() || l["name"] == reference["sectionName"])
    .filter(|l| reference["port"].is_null() || l["port"] == reference["port"])
    .filter(|l| listener_served(served, l).is_ok())
    .collect();
    if named.is_empty() {
        return Err(Refusal::new(
            "NoMatchingParent",
            "no served listener of the Gateway has the sectionName and port the parentRef names",
        ));
    }
    let allowed: Vec<&Value> = named
        .into_iter()
        .filter(|l| allows(served, l, route))
        .collect();
    if allowed.is_empty() {
        return Err(Refusal::new(
            "NotAllowedByListeners",
            format!(
                "no listener of the Gateway allows HTTPRoutes of namespace {}",
                namespace(route)
            ),
        ));
    }
    let taken: Vec<String> = (allowed.into_iter())
        .filter(|l| !hosts(l, route).is_empty())
        .map(|l| l["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    if taken.is_empty() {
        return Err(Refusal::new(
            "NoMatchingListenerHostname",
            "no host name of the route is one the listener answers",
        ));
    }
    Ok(taken)
}

/// Whether `listener` allows routes of the route's namespace and kind. A namespace selector is
/// not served (this process does not read Namespaces).
fn allows(served: &Served, listener: &Value, route: &Value) -> bool {
    let allowed = &listener["allowedRoutes"];
    let namespace_ok = match allowed["namespaces"]["from"].as_str().unwrap_or("Same") {
        "All" => true,
        "Same" => namespace(route) == served.namespace,
        _ => false,
    };
    let kinds = allowed["kinds"].as_array().filter(|k| !k.is_empty());
    let kind_ok = kinds.is_none_or(|kinds| {
        kinds
            .iter()
            .any(|k| k["kind"] == "HTTPRoute" && k["group"].as_str().unwrap_or(GROUP) == GROUP)
    });
    namespace_ok && kind_ok
}

/// The host names `listener` answers for `route`: `None` for any, else the route's names the
/// listener's matches (the listener's own when the route has none); empty when they share none.
pub fn hosts(listener: &Value, route: &Value) -> Vec<Option<String>> {
    let names: Vec<&str> = (route["spec"]["hostnames"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    match listener["hostname"].as_str() {
        None if names.is_empty() => vec![None],
        None => names.into_iter().map(|n| Some(n.to_owned())).collect(),
        Some(own) if names.is_empty() => vec![Some(own.to_owned())],
        Some(own) => (names.into_iter())
            .filter_map(|n| shared(own, n))
            .map(Some)
            .collect(),
    }
}

/// The names both `a` and `b` answer, as the more specific of the two; None if none.
fn shared(a: &str, b: &str) -> Option<String> {
    let covers = |wild: &str, host: &str| {
        wild.strip_prefix('*')
            .is_some_and(|suffix| host.ends_with(suffix) && host.len() > suffix.len())
    };
    if a == b {
        Some(a.to_owned())
    } else if covers(a, b) {
        Some(b.to_owned())
    } else if covers(b, a) {
        Some(a.to_owned())
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::gateway::routes::world::example as served;

    fn world(from: &str) -> World {
        World {
            gateway: json!({
                "metadata": { "namespace": "kubeflow", "name": "gateway" },
                "spec": { "listeners": [{ "name": "http", "protocol": "HTTP", "port": 8000, "allowedRoutes": { "namespaces": { "from": from } } }] },
            }),
            ..World::default()
        }
    }

    fn route(namespace: &str, parent: Value) -> Value {
        json!({ "metadata": { "namespace": namespace, "name": "r" }, "spec": { "parentRefs": [parent] } })
    }

    #[test]
    fn a_route_of_the_gateways_namespace_is_taken_and_another_namespaces_only_with_all() {
        let same = route("kubeflow", json!({ "name": "gateway" }));
        let parents = parents(&world("Same"), &served(), &same);
        assert_eq!(parents[0].listeners, Ok(vec!["http".to_owned()]));
        let other = route(
            "team-a",
            json!({ "name": "gateway", "namespace": "kubeflow" }),
        );
        let refused = parents_of(&world("Same"), &other);
        assert_eq!(refused.unwrap_err().reason, "NotAllowedByListeners");
        assert!(parents_of(&world("All"), &other).is_ok());
    }

    fn parents_of(world: &World, route: &Value) -> Result<Vec<String>, Refusal> {
        parents(world, &served(), route).remove(0).listeners
    }

    #[test]
    fn a_reference_to_another_gateway_is_not_ours_and_a_missing_listener_is_no_matching_parent() {
        let elsewhere = route("kubeflow", json!({ "name": "other" }));
        assert!(parents(&world("Same"), &served(), &elsewhere).is_empty());
        let section = route(
            "kubeflow",
            json!({ "name": "gateway", "sectionName": "https" }),
        );
        assert_eq!(
            parents_of(&world("Same"), &section).unwrap_err().reason,
            "NoMatchingParent"
        );
        let mut unserved = world("Same");
        unserved.gateway["spec"]["listeners"][0]["port"] = json!(9000);
        let plain = route("kubeflow", json!({ "name": "gateway" }));
        assert_eq!(
            parents_of(&unserved, &plain).unwrap_err().reason,
            "NoMatchingParent"
        );
        let refusal = listener_served(&served(), &unserved.gateway["spec"]["listeners"][0]);
        assert_eq!(refusal.unwrap_err().reason, "PortUnavailable");
    }

    #[test]
    fn a_listeners_host_name_narrows_the_routes_and_one_it_does_not_share_refuses_it() {
        let listener = json!({ "hostname": "*.example.com" });
        let route = json!({ "spec": { "hostnames": ["a.example.com", "a.example.org"] } });
        assert_eq!(hosts(&listener, &route), [Some("a.example.com".to_owned())]);
        let none = json!({ "spec": {} });
        assert_eq!(hosts(&listener, &none), [Some("*.example.com".to_owned())]);
        assert_eq!(hosts(&json!({}), &none), [None]);
        let apart = json!({ "spec": { "hostnames": ["b.example.org"] } });
        assert!(hosts(&listener, &apart).is_empty());
    }
}
