//! Every route has its Gateway: an HTTPRoute attached to a Gateway that neither the plan renders
//! nor the cluster has is never accepted, so no request reaches what it routes to, and the apply
//! used to write it and wait its whole timeout before the question came. Before an apply writes
//! anything, a dry run too, each Gateway a rendered route names is looked for in the plan, then
//! on the cluster; a missing one is refused naming the route, the Gateway and the param that
//! names it. Nothing is written.
//!
//! A Gateway in a namespace the user may not read is not checked: the route's own status says.

use crate::deploy::cluster::Cluster;
use crate::deploy::cluster::key::Key;
use crate::deploy::inventory::plan::{Desired, Plan};

const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error(
        "{route} is attached to Gateway {gateway}, which neither this app renders nor the \
         cluster has, so no request would reach what it routes to; nothing was written\n  hint: \
         {hint}"
    )]
    Missing {
        route: Key,
        gateway: String,
        hint: String,
    },
    #[error("cannot read Gateway {gateway}, which {route} is attached to")]
    Read {
        route: Key,
        gateway: String,
        #[source]
        source: kube::Error,
    },
}

/// The Gateways (namespace, name) a route is attached to; a parentRef without a namespace is
/// in the route's.
fn gateways_of(route: &Desired) -> Vec<(String, String)> {
    let own = route.key.namespace.clone().unwrap_or_default();
    route.value["spec"]["parentRefs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["kind"].as_str().unwrap_or("Gateway") == "Gateway")
        .filter(|r| r["group"].as_str().unwrap_or(GATEWAY_GROUP) == GATEWAY_GROUP)
        .filter_map(|r| {
            let namespace = r["namespace"].as_str().map_or(own.clone(), str::to_owned);
            Some((namespace, r["name"].as_str()?.to_owned()))
        })
        .collect()
}

/// Refuse a plan with a route attached to a Gateway that is nowhere.
pub async fn check(cluster: &impl Cluster, plan: &Plan) -> Result<(), GatewayError> {
    let routes = plan.objects.iter().filter(|d| {
        d.key.group == GATEWAY_GROUP && matches!(d.key.kind.as_str(), "HTTPRoute" | "GRPCRoute")
    });
    let rendered: Vec<&Key> = plan
        .objects
        .iter()
        .map(|d| &d.key)
        .filter(|k| k.group == GATEWAY_GROUP && k.kind == "Gateway")
        .collect();
    for route in routes {
        for (namespace, name) in gateways_of(route) {
            let in_plan = rendered
                .iter()
                .any(|k| k.name == name && k.namespace.as_deref() == Some(namespace.as_str()));
            if in_plan || on_cluster(cluster, route, &namespace, &name).await? {
                continue;
            }
            return Err(missing(plan, route, &namespace, &name, &rendered));
        }
    }
    Ok(())
}

/// Whether the cluster has the Gateway (or may not be asked: its kind is not served, which the
/// route's own kind check reports, or the user may not read it).
async fn on_cluster(
    cluster: &impl Cluster,
    route: &Desired,
    namespace: &str,
    name: &str,
) -> Result<bool, GatewayError> {
    let Some(gateways) = cluster.resolve(&format!("{GATEWAY_GROUP}/v1"), "Gateway") else {
        return Ok(true);
    };
    match cluster.get(&gateways, Some(namespace), name).await {
        Ok(found) => Ok(found.is_some()),
        Err(kube::Error::Api(e)) if e.code == 403 => Ok(true),
        Err(source) => Err(GatewayError::Read {
            route: route.key.clone(),
            gateway: format!("{namespace}/{name}"),
            source,
        }),
    }
}

/// The refusal, its hint naming the component's `gateway` param and the Gateways the app has.
fn missing(
    plan: &Plan,
    route: &Desired,
    namespace: &str,
    name: &str,
    rendered: &[&Key],
) -> GatewayError {
    let (component, env) = (&route.component, &plan.applyset.env);
    let ours = match rendered.first() {
        Some(key) => format!(" (this app renders {key}: `{}`)", key.name),
        None => String::new(),
    };
    GatewayError::Missing {
        route: route.key.clone(),
        gateway: format!("{namespace}/{name}"),
        hint: format!(
            "name an existing Gateway{ours}: `mlkube param set {component} gateway NAME --env \
             {env}`, or apply the component that renders {name} first"
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::deploy::checks::fixtures::{object, plan_of};
    use crate::deploy::cluster::memory::MemoryCluster;

    fn gateway(name: &str) -> Value {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
               "metadata": {"name": name, "namespace": "ml"},
               "spec": {"gatewayClassName": "traefik", "listeners": []}})
    }

    fn route(parent: &str) -> Value {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
               "metadata": {"name": "mnist", "namespace": "ml"},
               "spec": {"parentRefs": [{"name": parent}], "rules": []}})
    }

    /// A cluster that serves Gateways (their CRD created), and has none.
    async fn serving_gateways() -> MemoryCluster {
        let cluster = MemoryCluster::new();
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "gateways.gateway.networking.k8s.io"},
            "spec": {"group": GATEWAY_GROUP, "scope": "Namespaced",
                "names": {"plural": "gateways", "kind": "Gateway"},
                "versions": [{"name": "v1", "served": true, "storage": true}]}});
        cluster.create_as("kubectl-create", crd);
        cluster.refresh().await.expect("discovery again");
        cluster
    }

    #[tokio::test]
    async fn a_route_to_a_gateway_that_is_nowhere_is_refused_naming_the_param() {
        let cluster = serving_gateways().await;
        let with_ours = |parent: &str| {
            plan_of(vec![
                object("gateway", gateway("gateway")),
                object("mnist", route(parent)),
            ])
        };
        let error = check(&cluster, &with_ours("nosuch"))
            .await
            .expect_err("no Gateway nosuch")
            .to_string();
        assert!(
            error.starts_with(
                "HTTPRoute.gateway.networking.k8s.io ml/mnist is attached to Gateway ml/nosuch, \
                 which neither this app renders nor the cluster has"
            ),
            "{error}"
        );
        assert!(
            error.contains(
                "(this app renders Gateway.gateway.networking.k8s.io ml/gateway: `gateway`): \
                 `mlkube param set mnist gateway NAME --env local`"
            ),
            "{error}"
        );
        check(&cluster, &with_ours("gateway"))
            .await
            .expect("the app's own Gateway");

        let namespace =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}});
        cluster.create_as("kubectl-create", namespace);
        cluster.create_as("kubectl-create", gateway("shared"));
        check(&cluster, &plan_of(vec![object("mnist", route("shared"))]))
            .await
            .expect("a Gateway on the cluster");
    }
}
