//! A served model's replicas against the real control plane's scheduler and disruption
//! controller: `mlkube apply` of a serving component with two replicas puts them on two of the
//! kwok nodes, the disruption controller computes the version's PodDisruptionBudget over exactly
//! them (one eviction allowed), and the Eviction API, which `kubectl drain` calls, takes one.
//!
//! A pod is evicted in the test's own namespace, never a node drained: the other tests run on
//! the same nodes. The real-node test `drain.rs` drains a node under traffic.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::EvictParams;

use crate::support::{TestNamespace, empty_app, eventually, mlkube_ok, ready_pods};

const TIMEOUT: Duration = Duration::from_secs(90);
const SELECTOR: &str = "app.kubernetes.io/instance=digits,version=v1";

#[tokio::test]
async fn two_replicas_land_on_two_nodes_and_their_budget_allows_evicting_one() {
    let ns = TestNamespace::new("disruption").await;
    let (_dir, app) = empty_app(&ns);
    mlkube_ok(
        &app,
        &[
            "component",
            "add",
            "serving",
            "digits",
            "--param",
            "replicas=2",
        ],
    );
    mlkube_ok(&app, &["apply", "local", "--timeout", "2m"]);

    let pods = Api::<Pod>::namespaced(ns.client.clone(), &ns.name);
    let placed = ready_pods(&pods, SELECTOR).await;
    let nodes: BTreeSet<&String> = placed.iter().map(|(_, node)| node).collect();
    assert_eq!(placed.len(), 2, "{placed:?}");
    assert_eq!(
        nodes.len(),
        2,
        "the replicas spread over two nodes: {placed:?}"
    );

    let budgets = Api::<PodDisruptionBudget>::namespaced(ns.client.clone(), &ns.name);
    let what = "the budget to count the two pods and allow one eviction";
    eventually(what, TIMEOUT, || async {
        let status = budgets.get("digits-v1").await.ok()?.status?;
        let two = status.expected_pods == 2 && status.current_healthy == 2;
        (two && status.disruptions_allowed == 1).then_some(())
    })
    .await;

    // What `kubectl drain` asks: evicting one replica is allowed, and it is replaced. (That the
    // next eviction waits for the replacement to be Ready cannot be seen here: kwok makes it
    // Ready at once. The real-node drain test waits on real pods.)
    let (evicted, _) = &placed[0];
    pods.evict(evicted, &EvictParams::default())
        .await
        .unwrap_or_else(|e| panic!("the budget allows evicting {evicted}: {e}"));
    eventually("two Ready replicas again", TIMEOUT, || async {
        let ready = ready_pods(&pods, SELECTOR).await;
        (ready.len() == 2 && !ready.iter().any(|(name, _)| name == evicted)).then_some(())
    })
    .await;
}
