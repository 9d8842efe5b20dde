//! Nothing written by an apply that the server rejects in a dry run, against the real API
//! server: through the library and through the binary, in a namespace that exists and in one
//! the apply creates; and what `diff` and `apply` say to a kubeconfig without RBAC.

use std::path::Path;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service, ServiceAccount};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use mlkube::deploy::apply::ApplyOptions;
use mlkube::deploy::inventory::applyset::ApplySet;
use mlkube::render::manifest::Object;
use serde_json::json;

use crate::deploy::{Env, config_map, deployment, options, service};
use crate::operator_identity::token_kubeconfig;
use crate::support::{TestNamespace, mlkube};

/// A Service whose port the server refuses: ports end at 65535.
fn bad_port(ns: &str) -> Object {
    let mut bad = service(ns, "serving", "bad-port");
    bad.value["spec"]["ports"][0]["port"] = json!(70000);
    bad
}

const BAD_PORT_REASON: &str =
    "spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive";

/// A Deployment whose selector does not match its pod template's labels.
fn mismatched(ns: &str) -> Object {
    let mut mismatched = deployment(ns, "serving", "mismatched", 1);
    mismatched.value["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
    mismatched
}

/// Every ConfigMap, Secret, Service and Deployment in `ns` (the inventory's Secret included)
/// with its resource version, which moves with any write: `Kind name@version`. The
/// controller-manager's own `kube-root-ca.crt` is left out; it appears on its own schedule.
async fn contents(client: &Client, ns: &str) -> Vec<String> {
    async fn of<K>(client: &Client, ns: &str) -> Vec<String>
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned,
    {
        let kind = K::kind(&());
        Api::<K>::namespaced(client.clone(), ns)
            .list(&ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("list {kind} in {ns}: {e}"))
            .items
            .iter()
            .map(|o| o.meta())
            .filter(|m| m.name.as_deref() != Some("kube-root-ca.crt"))
            .map(|m| {
                let name = m.name.clone().unwrap_or_default();
                let version = m.resource_version.clone().unwrap_or_default();
                format!("{kind} {name}@{version}")
            })
            .collect()
    }
    let mut all = of::<ConfigMap>(client, ns).await;
    all.extend(of::<Secret>(client, ns).await);
    all.extend(of::<Service>(client, ns).await);
    all.extend(of::<Deployment>(client, ns).await);
    all.sort();
    all
}

#[tokio::test]
async fn an_apply_with_one_object_the_server_rejects_writes_nothing_in_an_existing_namespace() {
    let test = TestNamespace::new("preflight-existing").await;
    let ns = test.name.as_str();
    let env = Env::new(ns).await;
    let settings = |level: &str| config_map(ns, "c", "settings", json!({"level": level}));
    env.apply(vec![settings("info")], &options())
        .await
        .expect("the first apply");
    let before = contents(&test.client, ns).await;
    assert!(
        before
            .iter()
            .any(|o| o.starts_with(&format!("Secret {}@", env.set.name))),
        "the inventory is there to be left alone: {before:?}"
    );

    let objects = vec![
        settings("debug"),
        config_map(ns, "c", "added", json!({})),
        deployment(ns, "serving", "serving", 1),
        bad_port(ns),
    ];
    for dry_run in [true, false] {
        let options = ApplyOptions {
            dry_run,
            ..options()
        };
        let message = env
            .apply(objects.clone(), &options)
            .await
            .expect_err("the server rejects the Service")
            .to_string();
        assert!(
            message.contains("the server rejected 1 object(s) in a dry run; nothing was written:"),
            "{message}"
        );
        assert!(
            message.contains(&format!(
                "  Service {ns}/bad-port: Service \"bad-port\" is invalid: {BAD_PORT_REASON}"
            )),
            "{message}"
        );
        assert_eq!(
            contents(&test.client, ns).await,
            before,
            "dry run: {dry_run}: nothing written, the inventory untouched"
        );
    }
}

#[tokio::test]
async fn in_a_namespace_the_apply_creates_only_the_namespace_is_written_before_a_rejection() {
    let test = TestNamespace::new("preflight-new").await;
    // The environment's namespace does not exist yet (removed on drop all the same).
    let fresh = TestNamespace {
        client: test.client.clone(),
        name: format!("{}-new", test.name),
    };
    let ns = fresh.name.as_str();
    let env = Env::new(ns).await;
    let objects = vec![
        config_map(ns, "c", "settings", json!({"level": "info"})),
        mismatched(ns),
    ];
    let namespaces = Api::<Namespace>::all(test.client.clone());

    // A dry run cannot create the namespace, so the server cannot judge what goes in it.
    let dry = ApplyOptions {
        dry_run: true,
        ..options()
    };
    let report = env.apply(objects.clone(), &dry).await.expect("the dry run");
    let unchecked: Vec<String> = report
        .unchecked
        .iter()
        .map(|(k, _)| k.to_string())
        .collect();
    assert_eq!(
        unchecked,
        [
            format!("ConfigMap {ns}/settings"),
            format!("Deployment.apps {ns}/mismatched")
        ]
    );
    assert!(
        report.unchecked[0]
            .1
            .to_string()
            .contains(&format!("namespace `{ns}` does not exist yet")),
        "{:?}",
        report.unchecked
    );
    assert!(namespaces.get_opt(ns).await.expect("get").is_none());

    let message = env
        .apply(objects, &options())
        .await
        .expect_err("the server rejects the Deployment")
        .to_string();
    assert!(
        message.contains(&format!(
            "the server rejected 1 object(s) in a dry run; nothing was written but what their \
             check needed first: Namespace {ns}:"
        )),
        "{message}"
    );
    assert!(
        message.contains(&format!("  Deployment.apps {ns}/mismatched: "))
            && message.contains("`selector` does not match template `labels`"),
        "{message}"
    );
    // The documented rule: the namespace was created to check what goes in it, and nothing
    // else was written, the inventory neither.
    let created = namespaces.get(ns).await.expect("the namespace was created");
    assert_eq!(
        created.metadata.labels.unwrap_or_default()["app.kubernetes.io/managed-by"],
        "mlkube"
    );
    assert_eq!(contents(&test.client, ns).await, Vec::<String>::new());
}

/// `objects` as YAML documents in `dir/objects.yaml`, for `--manifest`.
fn manifest(dir: &Path, objects: &[Object]) -> String {
    let path = dir.join("objects.yaml");
    let documents: Vec<String> = objects
        .iter()
        .map(|o| serde_yaml::to_string(&o.value).expect("YAML"))
        .collect();
    std::fs::write(&path, documents.join("---\n")).expect("write the manifest");
    path.to_str().expect("a UTF-8 path").to_string()
}

#[tokio::test]
async fn the_binary_names_each_rejected_object_with_the_servers_reason_and_exits_2() {
    let test = TestNamespace::new("preflight-cli").await;
    let ns = test.name.as_str();
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let objects = [config_map(ns, "c", "settings", json!({})), bad_port(ns)];
    let manifest = manifest(tmp.path(), &objects);

    for extra in [vec!["--dry-run"], vec!["--yes"]] {
        let mut args = vec!["apply", ns, "--manifest", &manifest, "--no-wait"];
        args.extend(&extra);
        let out = mlkube(tmp.path(), &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "mlkube: error: the server rejected 1 object(s) in a dry run; nothing was \
                 written:\n  Service {ns}/bad-port: Service \"bad-port\" is invalid: \
                 {BAD_PORT_REASON}\n  hint: "
            )),
            "{extra:?}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{extra:?}: nothing was applied");
    }
    assert_eq!(contents(&test.client, ns).await, Vec::<String>::new());
}

#[tokio::test]
async fn diff_and_apply_without_rbac_show_the_403_with_an_rbac_hint_and_exit_2() {
    let test = TestNamespace::new("preflight-rbac").await;
    let ns = test.name.as_str();
    let nobody: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "nobody"}})).expect("a ServiceAccount");
    Api::<ServiceAccount>::namespaced(test.client.clone(), ns)
        .create(&PostParams::default(), &nobody)
        .await
        .expect("create the ServiceAccount");
    let kubeconfig = token_kubeconfig(&test.client, ns, "nobody").await;
    let kubeconfig = kubeconfig.to_str().expect("a UTF-8 path");
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let manifest = manifest(tmp.path(), &[config_map(ns, "c", "settings", json!({}))]);
    let set = ApplySet::new("manifest", ns, ns);

    for verb in ["diff", "apply"] {
        let mut args = vec![
            verb,
            ns,
            "--manifest",
            &manifest,
            "--kubeconfig",
            kubeconfig,
        ];
        if verb == "apply" {
            args.push("--yes");
        }
        let out = mlkube(tmp.path(), &args);
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(2), "{verb}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "  caused by: secrets \"{}\" is forbidden: User \
                 \"system:serviceaccount:{ns}:nobody\" cannot get resource \"secrets\" in API \
                 group \"\" in the namespace \"{ns}\" (Forbidden, HTTP 403)\n",
                set.name
            )),
            "{verb}: {stderr}"
        );
        assert!(
            stderr.contains(
                "  hint: the account of this kubeconfig context lacks an RBAC permission"
            ),
            "{verb}: {stderr}"
        );
        assert!(!stderr.contains("Status {"), "{verb}: {stderr}");
        assert!(
            out.stdout.is_empty(),
            "{verb}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    assert_eq!(contents(&test.client, ns).await, Vec::<String>::new());
}
