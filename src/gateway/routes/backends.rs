//! A route's backendRefs as the servers Traefik sends to: each Service port's ready endpoints,
//! read from the Service's EndpointSlices (Traefik reaches the pods, not the Service's virtual
//! address, so a pod taken out of the endpoints gets no new request). A reference that cannot
//! be followed (not a Service, a Service that is not there, another namespace's Service without
//! a ReferenceGrant there) is said, as the ResolvedRefs condition's reason and message.

use serde_json::Value;

use super::world::{GROUP, World, name, namespace};

/// A backendRef, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backend {
    /// `<namespace>/<name>:<port>` of the Service, for messages and names.
    pub service: String,
    pub weight: i64,
    /// `http://<address>:<port>` of each endpoint that takes requests.
    pub servers: Vec<String>,
}

/// Why a backendRef was not resolved: ResolvedRefs' reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    pub reason: &'static str,
    pub message: String,
}

/// The backend `reference` (a backendRef of a rule of a route in `from`) names.
pub fn resolve(world: &World, from: &str, reference: &Value) -> Result<Backend, Unresolved> {
    let group = reference["group"].as_str().unwrap_or_default();
    let kind = reference["kind"].as_str().unwrap_or("Service");
    let target = reference["name"].as_str().unwrap_or_default();
    if !group.is_empty() || kind != "Service" {
        return Err(Unresolved {
            reason: "InvalidKind",
            message: format!(
                "backendRef {target} is a {kind} of group {group:?}: only Services are served"
            ),
        });
    }
    let namespace_of = reference["namespace"].as_str().unwrap_or(from);
    if namespace_of != from && !granted(world, from, namespace_of, target) {
        return Err(Unresolved {
            reason: "RefNotPermitted",
            message: format!(
                "Service {namespace_of}/{target} is in another namespace, and no ReferenceGrant \
                 there lets HTTPRoutes of {from} refer to it"
            ),
        });
    }
    let service = format!("{namespace_of}/{target}");
    let Some(found) =
        (world.services.iter()).find(|s| namespace(s) == namespace_of && name(s) == target)
    else {
        return Err(Unresolved {
            reason: "BackendNotFound",
            message: format!("Service {service} is not there"),
        });
    };
    let number = reference["port"].as_i64().unwrap_or_default();
    let Some(port) = (found["spec"]["ports"].as_array().into_iter().flatten())
        .find(|p| p["port"].as_i64() == Some(number))
    else {
        return Err(Unresolved {
            reason: "BackendNotFound",
            message: format!("Service {service} has no port {number}"),
        });
    };
    let port_name = port["name"].as_str().unwrap_or_default();
    Ok(Backend {
        service: format!("{service}:{number}"),
        weight: reference["weight"].as_i64().unwrap_or(1),
        servers: servers(world, namespace_of, target, port_name),
    })
}

/// Whether a ReferenceGrant in `to` lets HTTPRoutes of `from` refer to the Service `target`.
fn granted(world: &World, from: &str, to: &str, target: &str) -> bool {
    (world.grants.iter().filter(|g| namespace(g) == to)).any(|grant| {
        let spec = &grant["spec"];
        let from_ok = (spec["from"].as_array().into_iter().flatten())
            .any(|f| f["group"] == GROUP && f["kind"] == "HTTPRoute" && f["namespace"] == from);
        let to_ok = (spec["to"].as_array().into_iter().flatten()).any(|t| {
            t["group"].as_str().unwrap_or_default().is_empty()
                && t["kind"] == "Service"
                && t["name"].as_str().is_none_or(|n| n == target)
        });
        from_ok && to_ok
    })
}

/// The URLs of the endpoints of Service `service`'s port `port_name` that take requests: the
/// ready ones; when none is, those still serving while they stop (as kube-proxy does), so a
/// backend whose every pod is draining still answers.
fn servers(world: &World, namespace_of: &str, service: &str, port_name: &str) -> Vec<String> {
    let slices = (world.slices.iter()).filter(|s| {
        namespace(s) == namespace_of
            && s["metadata"]["labels"]["kubernetes.io/service-name"] == service
    });
    let mut ready = Vec::new();
    let mut serving = Vec::new();
    for slice in slices {
        let Some(port) = (slice["ports"].as_array().into_iter().flatten())
            .find(|p| p["name"].as_str().unwrap_or_default() == port_name)
            .and_then(|p| p["port"].as_i64())
        else {
            continue;
        };
        for endpoint in slice["endpoints"].as_array().into_iter().flatten() {
            let conditions = &endpoint["conditions"];
            let list = if conditions["ready"] != false {
                &mut ready
            } else if conditions["serving"] == true {
                &mut serving
            } else {
                continue;
            };
            for address in endpoint["addresses"].as_array().into_iter().flatten() {
                let address = address.as_str().unwrap_or_default();
                let host = if address.contains(':') {
                    format!("[{address}]")
                } else {
                    address.to_owned()
                };
                list.push(format!("http://{host}:{port}"));
            }
        }
    }
    let mut chosen = if ready.is_empty() { serving } else { ready };
    chosen.sort();
    chosen.dedup();
    chosen
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn world() -> World {
        World {
            services: vec![json!({
                "metadata": { "namespace": "ml", "name": "digits-v1" },
                "spec": { "ports": [{ "name": "http", "port": 8080 }, { "name": "grpc", "port": 9000 }] },
            })],
            slices: vec![json!({
                "metadata": { "namespace": "ml", "name": "digits-v1-x", "labels": { "kubernetes.io/service-name": "digits-v1" } },
                "ports": [{ "name": "http", "port": 8500 }, { "name": "grpc", "port": 8501 }],
                "endpoints": [
                    { "addresses": ["10.0.0.2"], "conditions": { "ready": true } },
                    { "addresses": ["10.0.0.3"], "conditions": { "ready": false, "serving": true, "terminating": true } },
                    { "addresses": ["10.0.0.1"], "conditions": {} },
                ],
            })],
            ..World::default()
        }
    }

    #[test]
    fn a_service_port_is_its_ready_endpoints_target_port() {
        let reference = json!({ "name": "digits-v1", "port": 8080, "weight": 90 });
        let backend = resolve(&world(), "ml", &reference).unwrap();
        assert_eq!(
            backend.servers,
            ["http://10.0.0.1:8500", "http://10.0.0.2:8500"]
        );
        assert_eq!(backend.weight, 90);
        assert_eq!(backend.service, "ml/digits-v1:8080");
    }

    #[test]
    fn endpoints_that_still_serve_while_they_stop_are_taken_only_when_none_is_ready() {
        let mut world = world();
        world.slices[0]["endpoints"][0]["conditions"]["ready"] = json!(false);
        world.slices[0]["endpoints"][2]["conditions"]["ready"] = json!(false);
        let reference = json!({ "name": "digits-v1", "port": 9000 });
        let backend = resolve(&world, "ml", &reference).unwrap();
        assert_eq!(backend.servers, ["http://10.0.0.3:8501"]);
        assert_eq!(backend.weight, 1);
    }

    #[test]
    fn a_reference_that_cannot_be_followed_says_why() {
        let world = world();
        let reason = |reference: Value| resolve(&world, "ml", &reference).unwrap_err().reason;
        assert_eq!(
            reason(json!({ "name": "nope", "port": 8080 })),
            "BackendNotFound"
        );
        assert_eq!(
            reason(json!({ "name": "digits-v1", "port": 1 })),
            "BackendNotFound"
        );
        assert_eq!(
            reason(json!({ "kind": "Pod", "name": "x", "port": 1 })),
            "InvalidKind"
        );
        let elsewhere = json!({ "name": "digits-v1", "namespace": "ml", "port": 8080 });
        assert_eq!(
            resolve(&world, "team-a", &elsewhere).unwrap_err().reason,
            "RefNotPermitted"
        );
    }

    #[test]
    fn a_reference_grant_in_the_services_namespace_lets_another_namespaces_routes_refer_to_it() {
        let mut world = world();
        world.grants.push(json!({
            "metadata": { "namespace": "ml", "name": "routes-of-team-a" },
            "spec": {
                "from": [{ "group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "team-a" }],
                "to": [{ "group": "", "kind": "Service" }],
            },
        }));
        let elsewhere = json!({ "name": "digits-v1", "namespace": "ml", "port": 8080 });
        assert!(resolve(&world, "team-a", &elsewhere).is_ok());
        assert_eq!(
            resolve(&world, "team-b", &elsewhere).unwrap_err().reason,
            "RefNotPermitted"
        );
    }
}
