//! The cluster's network namespaces (its own, with the control plane and node 1, and one per
//! further node) have no way out: no default route, no link but their loopback, the pods' bridge
//! and their veths, and the links between the nodes; and a DNS server that answers cluster names
//! only. Checked with route look-ups and a resolver in a pod; no packet is sent anywhere outside.

use std::process::Command;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

use crate::support::{self, TestNamespace, eventually};

/// `mlkube-<port>` and `mlkube-<port>-<K>`, the namespaces `local-cluster.sh` made for the
/// cluster the tests use and its nodes after the first.
fn cluster_namespaces() -> Vec<String> {
    let own = cluster_netns();
    let (_, list) = ip(&["netns", "list"]);
    let mut found: Vec<String> = list
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| {
            *name == own
                || name
                    .strip_prefix(&format!("{own}-"))
                    .is_some_and(|k| k.parse::<u32>().is_ok())
        })
        .map(str::to_string)
        .collect();
    found.sort();
    found
}

/// `mlkube-<port>`, the namespace `local-cluster.sh` made for the cluster the tests use.
fn cluster_netns() -> String {
    let kubeconfig = std::fs::read_to_string(support::kubeconfig_path()).expect("read KUBECONFIG");
    let server = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: https://127.0.0.1:"))
        .expect("the local cluster's kubeconfig names its forwarder on 127.0.0.1");
    format!("mlkube-{}", server.trim())
}

fn ip(args: &[&str]) -> (bool, String) {
    let output = Command::new("ip")
        .args(args)
        .output()
        .expect("ip (iproute2) runs");
    let text = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}

#[test]
fn the_namespaces_have_no_route_out_and_no_link_but_their_own() {
    let namespaces = cluster_namespaces();
    assert!(
        namespaces.len() >= 2,
        "the real-node tests run on at least two nodes, each in a namespace: {namespaces:?}"
    );
    for netns in namespaces {
        has_no_way_out(&netns);
    }
}

/// No default route, no route to an address outside, and only the cluster's own links: lo, the
/// pods' bridge (cni0) and their veths, the nodes' bridge (mlkube0) and its veths in the
/// cluster's namespace, a node's end of its link (eth0) in its own.
fn has_no_way_out(netns: &str) {
    let (_, routes) = ip(&["-n", netns, "route", "show"]);
    assert!(
        !routes.contains("default"),
        "no default route in {netns}:\n{routes}"
    );
    // A route look-up sends nothing: TEST-NET-1 stands for any address outside.
    let (found, lookup) = ip(&["-n", netns, "route", "get", "192.0.2.1"]);
    assert!(
        !found && lookup.contains("unreachable"),
        "{netns}: {lookup}"
    );
    let (_, links) = ip(&["-n", netns, "-br", "link"]);
    for link in links.lines().filter_map(|l| l.split_whitespace().next()) {
        let link = link.split('@').next().unwrap_or(link);
        assert!(
            ["lo", "cni0", "mlkube0", "eth0"].contains(&link) || link.starts_with("veth"),
            "{netns} has only its loopback, the bridges and their veths:\n{links}"
        );
    }
}

#[tokio::test]
async fn pods_resolve_cluster_names_and_nothing_else() {
    let ns = TestNamespace::new("real-dns").await;
    let script = "import socket\n\
        for name in ['kubernetes.default.svc', 'kubernetes.default', 'example.com']:\n\
        \x20   try:\n\
        \x20       print(name, socket.getaddrinfo(name, 443)[0][4][0], flush=True)\n\
        \x20   except socket.gaierror as e:\n\
        \x20       print(name, 'unresolved', e.errno, flush=True)\n";
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "resolver" },
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "containers": [{
                "name": "python",
                "image": "mlkube/training:0.1.0",
                "command": ["python3", "-c", script],
            }],
        },
    }))
    .expect("a valid Pod");
    let pods = Api::<Pod>::namespaced(ns.client.clone(), &ns.name);
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create the pod");
    let timeout = std::time::Duration::from_secs(120);
    eventually("the resolver pod to finish", timeout, || async {
        let phase = pods.get("resolver").await.ok()?.status?.phase?;
        (phase == "Succeeded").then_some(())
    })
    .await;
    let logs = pods
        .logs("resolver", &Default::default())
        .await
        .expect("the pod's logs");
    assert!(logs.contains("kubernetes.default.svc 10.0.0.1"), "{logs}");
    assert!(
        logs.contains("kubernetes.default 10.0.0.1"),
        "short names resolve: {logs}"
    );
    assert!(
        logs.contains("example.com unresolved"),
        "no name outside: {logs}"
    );
}
