//! A served model across nodes: both versions of a 90/10 canary run two replicas, which the
//! `serving` prototype spreads over the nodes; the split through the gateway stays within its
//! bound; and `kubectl drain` of a node that holds a replica of each version (and perhaps one of
//! the gateway's two pods) fails no request of a steady stream through the gateway. What makes
//! it so: each version's PodDisruptionBudget lets the drain evict one replica at a time, an
//! evicted pod goes on serving until the gateway has taken it out, and so do Traefik's pods,
//! which close kept-alive connections before they stop.
//!
//! A drain evicts every pod of its node, other tests' too, so this test is ignored in the
//! suite's run and runs alone, after the others: `cargo test --test real_node -- --ignored
//! drain`. It needs two schedulable nodes labelled `type=real` and fails, saying so, with fewer.

use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::ListParams;

use crate::gateway::gateway;
use crate::platform::{NAMESPACE, app, assert_success, mlkube, set_param};
use crate::serving::{
    Http, apply, assert_none_failed, digits_models, request_loop, serve_digits, split_is_ninety_ten,
};
use crate::support::{self, eventually};
use crate::volume_support::object_store;

/// The component, and the model its route serves: apart from serving.rs's `digits`.
const SERVING: &str = "digits-spread";
const VERSIONS: [&str; 2] = ["v1", "v2"];
const REPLICAS: usize = 2;
/// The nodes of the cluster's real nodes, as the kubelet labels them.
const REAL_NODES: &str = "type=real";
const TIMEOUT: Duration = Duration::from_secs(300);

/// `kubectl ARGS...` against the test cluster.
fn kubectl(args: &[&str]) -> Output {
    Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", support::kubeconfig_path())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "kubectl {args:?} did not run ({e}): put the cluster's kubectl on PATH, e.g. \
                 `eval \"$(cluster/local-cluster.sh env)\"`"
            )
        })
}

/// Nodes labelled `type=real` that are Ready and not cordoned.
async fn schedulable_real_nodes() -> Vec<String> {
    let nodes = Api::<Node>::all(support::client().await);
    let listed = nodes
        .list(&ListParams::default().labels(REAL_NODES))
        .await
        .expect("list the nodes");
    listed
        .items
        .into_iter()
        .filter(|node| {
            let cordoned = node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
            let ready = node
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            ready && !cordoned
        })
        .filter_map(|node| node.metadata.name)
        .collect()
}

/// The nodes of `version`'s Ready pods that are not going (a drained pod is Ready until it is
/// told to stop, then not).
async fn nodes_of(pods: &Api<Pod>, version: &str) -> Vec<String> {
    ready_pods_nodes(
        pods,
        &format!("app.kubernetes.io/instance={SERVING},version={version}"),
    )
    .await
}

/// The nodes of the Ready pods, not going, of `selector`.
async fn ready_pods_nodes(pods: &Api<Pod>, selector: &str) -> Vec<String> {
    let ready = support::ready_pods(pods, selector).await;
    ready.into_iter().map(|(_, node)| node).collect()
}

/// Uncordons the node when dropped, also when the test fails: the cluster outlives the test.
struct Cordoned(String);

impl Drop for Cordoned {
    fn drop(&mut self) {
        let uncordon = kubectl(&["uncordon", &self.0]);
        if !uncordon.status.success() {
            eprintln!(
                "warning: could not uncordon {}: {}",
                self.0,
                String::from_utf8_lossy(&uncordon.stderr)
            );
        }
    }
}

/// The serving component: serving.rs's digits, each version two replicas at 90/10, applied
/// afresh (ready once every replica answers): pods a failed run left, packed on one node after
/// its drain, would stay where they are.
fn serve_two_replicas_of_each_version() {
    serve_digits(SERVING, "v1:90,v2:10");
    set_param(app(), SERVING, "replicas", &REPLICAS.to_string(), None);
    let delete = mlkube(app(), &["delete", "local", "-c", SERVING, "--yes"]);
    assert_success(&format!("mlkube delete local -c {SERVING}"), &delete);
    let applied = apply(SERVING, &["--prune", "--yes"]);
    assert_success(&format!("mlkube apply local -c {SERVING}"), &applied);
}

#[tokio::test]
#[ignore = "drains a node, evicting every pod on it: run it alone, `cargo test --test real_node -- --ignored drain`"]
async fn two_replicas_of_each_version_on_two_nodes_split_within_bound_and_a_drain_fails_no_request()
{
    let nodes = schedulable_real_nodes().await;
    assert!(
        nodes.len() >= 2,
        "this test needs at least 2 schedulable nodes labelled {REAL_NODES} (Ready, not \
         cordoned), found {}: {nodes:?}; start the local cluster with two real nodes or more",
        nodes.len()
    );
    object_store();
    gateway();
    digits_models().await;
    serve_two_replicas_of_each_version();

    let client = support::client().await;
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    for version in VERSIONS {
        let on = nodes_of(&pods, version).await;
        assert_eq!(on.len(), REPLICAS, "{version}'s ready replicas: {on:?}");
        assert_ne!(
            on[0], on[1],
            "{version}'s two replicas share a node of {nodes:?}"
        );
    }
    // Each version's budget covers its two pods and allows one eviction.
    let budgets = Api::<PodDisruptionBudget>::namespaced(client.clone(), NAMESPACE);
    for version in VERSIONS {
        let name = format!("{SERVING}-{version}");
        let what = format!("{name}'s budget to count its two healthy pods and allow one eviction");
        eventually(&what, Duration::from_secs(60), || async {
            let status = budgets.get(&name).await.ok()?.status?;
            let two = usize::try_from(status.current_healthy).ok()? == REPLICAS
                && usize::try_from(status.expected_pods).ok()? == REPLICAS;
            (two && status.disruptions_allowed == 1).then_some(())
        })
        .await;
    }

    let http: Http = HttpClient::builder(TokioExecutor::new()).build_http();
    split_is_ninety_ten(&http, SERVING).await;

    // A node of a v1 replica, not the object store's: the store's volume (local-path) lives on
    // its node, so draining that node would leave the store Pending until the node is back, and
    // the evicted replicas' replacements could not fetch their models meanwhile.
    let store = ready_pods_nodes(
        &pods,
        "app.kubernetes.io/name=object-store,app.kubernetes.io/instance=object-store",
    )
    .await;
    let node = nodes_of(&pods, "v1")
        .await
        .into_iter()
        .find(|n| !store.contains(n))
        .unwrap_or_else(|| panic!("a node of a v1 replica without the object store ({store:?})"));
    eprintln!(
        "draining {node}; the gateway's pods are on {:?}",
        ready_pods_nodes(
            &pods,
            "app.kubernetes.io/name=gateway,app.kubernetes.io/instance=gateway"
        )
        .await
    );
    let stop = Arc::new(AtomicBool::new(false));
    let looping = request_loop(http, stop.clone(), SERVING);
    // Requests flowing before the drain starts, and each kept-alive connection settled.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let started = Instant::now();
    let cordoned = Cordoned(node.clone());
    let drain = {
        let node = node.clone();
        tokio::task::spawn_blocking(move || {
            kubectl(&[
                "drain",
                &node,
                "--ignore-daemonsets",
                "--delete-emptydir-data",
                "--timeout=5m",
            ])
        })
    };
    let drained = drain.await.expect("kubectl drain ran");
    assert_success(&format!("kubectl drain {node}"), &drained);
    eprintln!("drained {node} in {:.1} s", started.elapsed().as_secs_f64());
    // The evicted replicas replaced on the other nodes and Ready, the stream still flowing.
    eventually(
        "each version back at two ready replicas, none on the drained node",
        TIMEOUT,
        || async {
            for version in VERSIONS {
                let on = nodes_of(&pods, version).await;
                (on.len() == REPLICAS && !on.contains(&node)).then_some(())?;
            }
            Some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    let (seen, failed) = looping.await.expect("the request loop");
    drop(cordoned);
    let uncordoned = Api::<Node>::all(client).get(&node).await.expect("the node");
    assert_ne!(
        uncordoned.spec.and_then(|s| s.unschedulable),
        Some(true),
        "{node} is uncordoned"
    );
    assert_none_failed(&format!("drain of {node}"), &seen, &failed);

    let delete = mlkube(app(), &["delete", "local", "-c", SERVING, "--yes"]);
    assert_success(&format!("mlkube delete local -c {SERVING}"), &delete);
}
