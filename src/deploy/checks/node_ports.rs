//! One Service per node port: node ports are the cluster's, not a namespace's, and the API
//! server's dry run does not allocate them, so a clash (a second app's gateway on the first
//! one's 30080) passed `apply --dry-run` and failed the real apply halfway. Before an apply
//! writes anything, a dry run too, each node port a rendered Service asks for is checked against
//! the Services on the cluster; a clash is refused naming the Service that holds the port and
//! the component's param that moves ours. Nothing is written.
//!
//! A Service of this plan holding its own port (a re-apply) is no clash. A user who may not list
//! Services outside their namespace is not checked: the server's refusal at the write stays.

use serde_json::Value;

use crate::deploy::cluster::Cluster;
use crate::deploy::cluster::key::Key;
use crate::deploy::inventory::plan::Plan;

#[derive(Debug, thiserror::Error)]
pub enum NodePortError {
    #[error(
        "{ours} asks for node port {port}, which {theirs} already holds: a node port belongs to \
         one Service in the whole cluster; nothing was written\n  hint: give component \
         `{component}` another port (`mlkube param set {component} nodePort PORT --env {env}`, \
         30000-32767), or leave it to the cluster (nodePort: null)"
    )]
    Taken {
        ours: Key,
        port: i64,
        theirs: Key,
        component: String,
        env: String,
    },
    #[error("cannot list the cluster's Services to check the node ports asked for")]
    List {
        #[source]
        source: kube::Error,
    },
}

/// The node ports a Service asks for.
fn node_ports(service: &Value) -> impl Iterator<Item = i64> + '_ {
    service["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["nodePort"].as_i64())
}

/// Refuse a plan with a Service whose node port another Service on the cluster holds.
pub async fn check(cluster: &impl Cluster, plan: &Plan) -> Result<(), NodePortError> {
    let asking: Vec<_> = plan
        .objects
        .iter()
        .filter(|d| d.key.group.is_empty() && d.key.kind == "Service")
        .filter(|d| node_ports(&d.value).next().is_some())
        .collect();
    if asking.is_empty() {
        return Ok(());
    }
    let Some(services) = cluster.resolve("v1", "Service") else {
        return Ok(());
    };
    let live = match cluster.list(&services, None, "").await {
        Ok(live) => live,
        // A user allowed into their namespace only cannot see the others': the server's own
        // refusal at the write stays.
        Err(kube::Error::Api(e)) if e.code == 403 => return Ok(()),
        Err(source) => return Err(NodePortError::List { source }),
    };
    for desired in asking {
        for port in node_ports(&desired.value) {
            let holder = live.iter().find(|service| {
                Key::of(service).is_some_and(|key| key != desired.key)
                    && node_ports(service).any(|p| p == port)
            });
            if let Some(theirs) = holder.and_then(Key::of) {
                return Err(NodePortError::Taken {
                    ours: desired.key.clone(),
                    port,
                    theirs,
                    component: desired.component.clone(),
                    env: plan.applyset.env.clone(),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::deploy::cluster::memory::MemoryCluster;
    use crate::deploy::inventory::applyset::ApplySet;
    use crate::deploy::inventory::plan;
    use crate::render::manifest::{Manifest, Object};

    fn service(namespace: &str, port: Option<i64>) -> Value {
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "gateway", "namespace": namespace},
               "spec": {"type": "NodePort",
                        "ports": [{"port": 80, "targetPort": 8000, "nodePort": port}]}})
    }

    fn plan_in(namespace: &str, port: Option<i64>) -> Plan {
        let mut value = service(namespace, port);
        value["metadata"]["labels"] = json!({"mlkube.io/component": "gateway"});
        let objects = vec![Object {
            component: "gateway".into(),
            value,
        }];
        let set = ApplySet::new("app", "local", namespace);
        plan::plan(&Manifest { objects }, &set, &[]).expect("a valid plan")
    }

    #[tokio::test]
    async fn a_node_port_another_service_holds_is_refused_naming_it_and_the_param() {
        let cluster = MemoryCluster::new();
        let namespace =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "first"}});
        cluster.create_as("kubectl-create", namespace);
        cluster.create_as("kubectl-create", service("first", Some(30080)));

        let error = check(&cluster, &plan_in("second", Some(30080)))
            .await
            .expect_err("30080 is first's")
            .to_string();
        assert!(
            error.starts_with(
                "Service second/gateway asks for node port 30080, which Service first/gateway \
                 already holds"
            ),
            "{error}"
        );
        assert!(
            error.contains("`mlkube param set gateway nodePort PORT --env local`"),
            "{error}"
        );

        check(&cluster, &plan_in("second", Some(30081)))
            .await
            .expect("30081 is free");
        check(&cluster, &plan_in("second", None))
            .await
            .expect("a port the cluster picks");
        check(&cluster, &plan_in("first", Some(30080)))
            .await
            .expect("the Service holding its own port is applied again");
    }
}
