//! The permissions matrix (issue 46): every ServiceAccount the default app creates may do
//! exactly what its table here says, in the app's namespace and in another one, as a
//! `SelfSubjectRulesReview` reports it for a token from the TokenRequest API, beyond what every
//! authenticated identity may. A Role widened in a component fails this test, and so does one
//! narrowed below what its controller calls. The controllers' tables are `identity.rs`'s; the
//! profile's ServiceAccount is `tenancy.rs`'s.

use std::collections::BTreeSet;

use crate::identity::{
    PLACES_VOLUMES, RUNS_JOBS, SEES_NODES, Uses, assert_exactly, expected, nobody, uses,
};
use crate::inference_service::install_crds;
use crate::operator::install_crd;
use crate::operator_identity::{Permission, permissions, token_kubeconfig};
use crate::support::{
    AppsCleanup, TestNamespace, client_from, lock_shared_cluster_objects, mlkube_ok,
};
use crate::volumes::apply_crd;

/// The Gateway API CRDs the gateway's Role names, from `crds/`.
const GATEWAY_CRDS: [&str; 7] = [
    include_str!("../../crds/gatewayclasses.gateway.networking.k8s.io.yaml"),
    include_str!("../../crds/gateways.gateway.networking.k8s.io.yaml"),
    include_str!("../../crds/httproutes.gateway.networking.k8s.io.yaml"),
    include_str!("../../crds/grpcroutes.gateway.networking.k8s.io.yaml"),
    include_str!("../../crds/tlsroutes.gateway.networking.k8s.io.yaml"),
    include_str!("../../crds/referencegrants.gateway.networking.k8s.io.yaml"),
    include_str!("../../crds/backendtlspolicies.gateway.networking.k8s.io.yaml"),
];

const READ: &[&str] = &["get", "list", "watch"];
const WATCH: &[&str] = &["list", "watch"];
const SPAWN: &[&str] = &["create", "delete", "get", "list", "watch"];
const OWNS: &[&str] = &["create", "delete", "get", "list", "patch", "watch"];

/// The hub's KubeSpawner: its users' pods and claims, and the events it reports.
const SPAWNS_NOTEBOOKS: &[Uses] = &[
    uses("", "pods", SPAWN),
    uses("", "persistentvolumeclaims", SPAWN),
    uses("", "events", READ),
];

/// A notebook of the hub's own namespace: TFJobs, and a view of what they run.
const RUNS_A_NOTEBOOK: &[Uses] = &[
    uses(
        "kubeflow.org",
        "tfjobs",
        &[
            "create", "delete", "get", "list", "patch", "update", "watch",
        ],
    ),
    uses("", "pods", READ),
    uses("", "pods/log", READ),
    uses("", "services", READ),
    uses("", "events", READ),
];

/// `mlkube gateway-routes` in its namespace: what it translates for Traefik, and the statuses it
/// writes. No Secret, no ConfigMap: Traefik itself holds no credentials.
const ROUTES_TRAFFIC: &[Uses] = &[
    uses("", "services", WATCH),
    uses("discovery.k8s.io", "endpointslices", WATCH),
    uses("gateway.networking.k8s.io", "gateways", WATCH),
    uses("gateway.networking.k8s.io", "httproutes", WATCH),
    uses("gateway.networking.k8s.io", "referencegrants", WATCH),
    uses("gateway.networking.k8s.io", "gateways/status", &["patch"]),
    uses("gateway.networking.k8s.io", "httproutes/status", &["patch"]),
];

/// It cluster-wide: GatewayClasses, to read its own (whose status alone it writes: see
/// [`gateway_class_status`]).
const SEES_GATEWAY_CLASSES: &[Uses] = &[uses("gateway.networking.k8s.io", "gatewayclasses", WATCH)];

/// The object store's init container: its two Secrets read (the administrator's keys and the
/// read-only ones), made once (`create` cannot be limited to a name), and the read-only ones
/// annotated with the store's endpoint for KServe. Its model-keys container: the jobs' requests
/// watched, a Secret made for each, an event for each it refuses, and the jobs each names read
/// (once they have finished, their keys no longer write).
const KEEPS_ITS_KEYS: &[Uses] = &[
    Uses {
        name: Some("object-store-credentials"),
        ..uses("", "secrets", &["get"])
    },
    Uses {
        name: Some("object-store-read-credentials"),
        ..uses("", "secrets", &["get", "patch"])
    },
    uses("", "secrets", &["create"]),
    uses("", "configmaps", WATCH),
    uses("", "events", &["create"]),
    uses("kubeflow.org", "tfjobs", &["get"]),
    uses("kubeflow.org", "pytorchjobs", &["get"]),
    uses("kubeflow.org", "mxjobs", &["get"]),
    uses("kubeflow.org", "xgboostjobs", &["get"]),
    uses("kubeflow.org", "mpijobs", &["get"]),
    uses("kubeflow.org", "paddlejobs", &["get"]),
    uses("kubeflow.org", "jaxjobs", &["get"]),
];

/// The operator's InferenceService controller (`servingGateway`), cluster-wide as `local` runs
/// it; each verb is a call in `src/operator/serving/`.
const SERVES_MODELS: &[Uses] = &[
    uses("serving.kserve.io", "inferenceservices", WATCH),
    uses("serving.kserve.io", "servingruntimes", WATCH),
    uses("serving.kserve.io", "clusterservingruntimes", WATCH),
    uses("serving.kserve.io", "inferenceservices/status", &["update"]),
    uses(
        "serving.kserve.io",
        "inferenceservices/finalizers",
        &["update"],
    ),
    uses("apps", "deployments", OWNS),
    uses("", "services", OWNS),
    uses(
        "networking.k8s.io",
        "networkpolicies",
        &["create", "get", "list", "patch", "watch"],
    ),
    uses("", "pods", WATCH),
    uses(
        "gateway.networking.k8s.io",
        "httproutes",
        &["create", "get", "list", "patch", "watch"],
    ),
    uses(
        "autoscaling",
        "horizontalpodautoscalers",
        &["create", "delete", "patch"],
    ),
    // The predictor's ServiceAccount and its Secrets, for the store's endpoint: get, never list.
    uses("", "serviceaccounts", &["get"]),
    uses("", "secrets", &["get"]),
];

/// A ServiceAccount, what it may do in the app's namespace and elsewhere, and the permissions
/// on objects named after the namespace it holds in both.
type Row<'a> = (
    &'a str,
    &'a [&'a [Uses]],
    &'a [&'a [Uses]],
    &'a BTreeSet<Permission>,
);

/// The patch of the gateway's own GatewayClass's status, named after the namespace.
fn gateway_class_status(namespace: &str) -> Permission {
    Permission {
        group: "gateway.networking.k8s.io".into(),
        resource: "gatewayclasses/status".into(),
        verb: "patch".into(),
        name: Some(format!("{namespace}-gateway")),
    }
}

#[tokio::test]
async fn every_service_account_of_the_default_app_may_do_exactly_its_table() {
    let _shared = lock_shared_cluster_objects().await;
    let ns = TestNamespace::new("permissions").await;
    // The CRDs the components need, installed the way the operator's tests install them; the
    // app renders none, so that it shares no cluster-scoped object but its own RBAC. The
    // Gateway API's are applied as mlkube would (they are shared with the gateway's tests).
    install_crd(&ns.client).await;
    install_crds(&ns).await;
    for crd in GATEWAY_CRDS {
        apply_crd(&ns, serde_yaml::from_str(crd).expect("a CRD is YAML")).await;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let app = dir.path().join("app");
    let path = app.to_str().expect("a UTF-8 path");
    mlkube_ok(dir.path(), &["init", path, "--namespace", &ns.name]);
    // No node port either: another test's gateway may hold the local environment's.
    for (component, param, value) in [
        ("gateway", "nodePort", "null"),
        ("gateway", "crds", "false"),
        ("training-operator", "installCrd", "false"),
        ("volume-controller", "installCrd", "false"),
        ("volume-controller", "installStorageClass", "false"),
    ] {
        let set = ["param", "set", component, param, value, "--env", "local"];
        mlkube_ok(&app, &set);
    }
    mlkube_ok(&app, &["apply", "local", "--no-wait"]);
    let _deleted = AppsCleanup(vec![app.clone()]);

    let own = ns.name.as_str();
    let class = BTreeSet::from([gateway_class_status(own)]);
    let tables: [Row; 7] = [
        (
            "training-operator",
            &[RUNS_JOBS, SERVES_MODELS],
            &[RUNS_JOBS, SERVES_MODELS],
            &BTreeSet::new(),
        ),
        // It only lists the store's read-only keys for the predictor's storage initializer.
        ("mnist", &[], &[], &BTreeSet::new()),
        (
            "volume-controller",
            &[PLACES_VOLUMES, SEES_NODES],
            &[SEES_NODES],
            &BTreeSet::new(),
        ),
        (
            "gateway",
            &[ROUTES_TRAFFIC, SEES_GATEWAY_CLASSES],
            &[SEES_GATEWAY_CLASSES],
            &class,
        ),
        ("notebook-hub", &[SPAWNS_NOTEBOOKS], &[], &BTreeSet::new()),
        (
            "notebook-hub-notebook",
            &[RUNS_A_NOTEBOOK],
            &[],
            &BTreeSet::new(),
        ),
        ("object-store", &[KEEPS_ITS_KEYS], &[], &BTreeSet::new()),
    ];
    let nobody = nobody(&ns).await;
    for (account, in_own, elsewhere, named) in tables {
        let client = client_from(&token_kubeconfig(&ns.client, own, account).await).await;
        for (namespace, table) in [(own, in_own), ("default", elsewhere)] {
            let everyone = permissions(&nobody, namespace).await;
            let granted: BTreeSet<Permission> = permissions(&client, namespace)
                .await
                .difference(&everyone)
                .cloned()
                .collect();
            let mut wanted = expected(table);
            wanted.extend(named.iter().cloned());
            assert_exactly(
                &granted,
                &wanted,
                &format!("{account}, in namespace {namespace}"),
            );
        }
    }
}
