//! An MPIJob's own objects on the real control plane: its ConfigMap and its launcher's
//! ServiceAccount, Role and RoleBinding are watched, so one deleted comes back and one changed
//! by hand is set back, within seconds and without any change to the job.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use mlkube::operator::training::frameworks::mpi::MPIJob;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::operator::{await_running, example_in, start_operator};
use crate::support::{TestNamespace, eventually, submit};

/// How soon a companion is repaired at most: its watch event queues the job at once; this is
/// room for a loaded 2-core machine.
const REPAIRED_WITHIN: Duration = Duration::from_secs(10);

const JOB: &str = "tensorflow-mnist";
const HOSTFILE: &str = "tensorflow-mnist-worker-0 slots=1\ntensorflow-mnist-worker-1 slots=1\n";

/// Delete `name` of kind `K` and wait for the operator to create it again; how long it took.
async fn deleted_comes_back<K>(ns: &TestNamespace, name: &str) -> Duration
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api = Api::<K>::namespaced(ns.client.clone(), &ns.name);
    let before = api
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("{} {name} exists: {e}", K::kind(&())))
        .uid();
    api.delete(name, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("delete {} {name}: {e}", K::kind(&())));
    let deleted = Instant::now();
    let what = format!("{} {name} created again", K::kind(&()));
    eventually(&what, REPAIRED_WITHIN, || async {
        let now = api.get_opt(name).await.ok()??;
        (now.uid() != before).then_some(())
    })
    .await;
    deleted.elapsed()
}

#[tokio::test]
async fn regression_an_mpijobs_own_objects_deleted_or_changed_are_repaired_at_once() {
    let ns = TestNamespace::new("mpi-companions").await;
    let _operator = start_operator(&ns).await;
    let job: MPIJob = example_in(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mpi"),
        "tensorflow-mnist.yaml",
    );
    submit(&ns, &job).await;
    await_running(
        &ns,
        JOB,
        &[
            "tensorflow-mnist-worker-0",
            "tensorflow-mnist-worker-1",
            "tensorflow-mnist-launcher",
        ],
    )
    .await;

    let launcher = "tensorflow-mnist-launcher";
    let mut took = vec![
        deleted_comes_back::<ConfigMap>(&ns, "tensorflow-mnist-config").await,
        deleted_comes_back::<Role>(&ns, launcher).await,
        deleted_comes_back::<RoleBinding>(&ns, launcher).await,
        deleted_comes_back::<ServiceAccount>(&ns, launcher).await,
    ];
    let role = Api::<Role>::namespaced(ns.client.clone(), &ns.name)
        .get(launcher)
        .await
        .expect("the Role is back");
    let granted: Vec<_> = role
        .rules
        .unwrap_or_default()
        .into_iter()
        .map(|r| (r.resources, r.verbs, r.resource_names))
        .collect();
    assert_eq!(
        granted.len(),
        2,
        "the Role as the job asks for it: {granted:?}"
    );

    // The hostfile edited by hand: set back, with the operator's other keys.
    let config_maps = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    let edit = json!({ "data": { "hostfile": "elsewhere slots=64\n" } });
    config_maps
        .patch(
            "tensorflow-mnist-config",
            &PatchParams::default(),
            &Patch::Merge(edit),
        )
        .await
        .expect("the hostfile is edited");
    let edited = Instant::now();
    eventually("the hostfile set back", REPAIRED_WITHIN, || async {
        let data = config_maps
            .get("tensorflow-mnist-config")
            .await
            .ok()?
            .data?;
        (data.get("hostfile").map(String::as_str) == Some(HOSTFILE)).then_some(())
    })
    .await;
    took.push(edited.elapsed());
    eprintln!("repaired after {took:?}");

    // Nothing else moved: the job was not touched, its pods are the ones it had.
    let pods = await_running(&ns, JOB, &[launcher]).await;
    assert_eq!(pods.len(), 3, "{:?}", pods.keys());
}
