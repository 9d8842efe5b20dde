//! What the translation reads: the served Gateway and, from the namespaces it watches, the
//! HTTPRoutes, Services, EndpointSlices and ReferenceGrants, each as the API server's JSON.

use serde_json::Value;

/// The Gateway API's group.
pub const GROUP: &str = "gateway.networking.k8s.io";

/// One look at the watched objects.
#[derive(Debug, Default, Clone)]
pub struct World {
    /// The Gateway this process serves; `Null` until it is there.
    pub gateway: Value,
    pub routes: Vec<Value>,
    pub services: Vec<Value>,
    pub slices: Vec<Value>,
    pub grants: Vec<Value>,
}

/// What this process serves: its Gateway, and the one entry point Traefik listens on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    pub namespace: String,
    pub name: String,
    /// The controllerName its GatewayClass names, written in each route's status.
    pub controller: String,
    /// The port of Traefik's entry point: a listener on another is not served.
    pub port: i64,
    /// The name of that entry point in Traefik's configuration.
    pub entry_point: String,
}

pub fn name(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

pub fn namespace(object: &Value) -> &str {
    object["metadata"]["namespace"].as_str().unwrap_or_default()
}

pub fn generation(object: &Value) -> i64 {
    object["metadata"]["generation"]
        .as_i64()
        .unwrap_or_default()
}

/// The Served of the tests: the Gateway `kubeflow/gateway` on port 8000.
#[cfg(test)]
pub fn example() -> Served {
    Served {
        namespace: "kubeflow".into(),
        name: "gateway".into(),
        controller: "traefik.io/gateway-controller".into(),
        port: 8000,
        entry_point: "web".into(),
    }
}
