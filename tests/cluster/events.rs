//! The events the operator records on jobs, on the real control plane: a state a job's pod is
//! in (a container that will not start without help) is one event per occurrence, however
//! many reconciles see it, and the next occurrence counts into it; an MPIJob has upstream's
//! events of its own.

use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use mlkube::operator::training::framework::TrainingJob;
use mlkube::operator::training::frameworks::mpi::MPIJob;
use mlkube::operator::training::frameworks::tensorflow::TFJob;
use serde_json::json;

use crate::operator::{
    Operator, TIMEOUT, await_condition_type, await_running, driven_by_hand, example_in, reconciles,
    start_operator,
};
use crate::support::{TestNamespace, eventually, submit};

/// The Events (`events.k8s.io/v1`) on job `job` with this reason.
pub(crate) async fn job_events(ns: &TestNamespace, job: &str, reason: &str) -> Vec<Event> {
    Api::<Event>::namespaced(ns.client.clone(), &ns.name)
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(job))
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

/// How many times each Event says it happened.
pub(crate) fn counts(events: &[Event]) -> Vec<i32> {
    events
        .iter()
        .map(|e| e.series.as_ref().map_or(1, |s| s.count))
        .collect()
}

/// Play the kubelet that cannot pull the image: `pod` is Pending, its container waiting.
async fn hold_waiting(ns: &TestNamespace, pod: &str, reason: &str) {
    let status = json!({ "status": {
        "phase": "Pending",
        "containerStatuses": [{
            "name": "tensorflow", "ready": false, "restartCount": 0,
            "image": "kubeflow/tf-dist-mnist-test:1.0", "imageID": "",
            "state": { "waiting": { "reason": reason, "message": "back-off pulling the image" } }
        }]
    }});
    Api::<Pod>::namespaced(ns.client.clone(), &ns.name)
        .patch_status(pod, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap_or_else(|e| panic!("cannot patch the status of pod {pod}: {e}"));
}

/// Change the job's annotations `times` times, each once the operator has reconciled since
/// the last: as many reconciles that see the same pods.
async fn touch_job<J: TrainingJob>(ns: &TestNamespace, operator: &Operator, job: &str, times: u32) {
    let jobs = Api::<J>::namespaced(ns.client.clone(), &ns.name);
    for n in 0..times {
        let seen = reconciles(&operator.metrics);
        let patch =
            json!({ "metadata": { "annotations": { "mlkube.io/test-touch": n.to_string() } } });
        jobs.patch(job, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .expect("the job's annotations change");
        eventually("a reconcile of the touched job", TIMEOUT, || async {
            (reconciles(&operator.metrics) > seen).then_some(())
        })
        .await;
    }
}

#[tokio::test]
async fn regression_a_container_held_waiting_is_one_event_per_occurrence_over_many_reconciles() {
    let ns = TestNamespace::new("events-stuck").await;
    let operator = start_operator(&ns).await;
    let job: TFJob = serde_json::from_value(driven_by_hand(json!({
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob",
        "metadata": { "name": "pull" },
        "spec": { "tfReplicaSpecs": { "Worker": { "replicas": 2, "restartPolicy": "OnFailure",
            "template": { "spec": { "containers": [{
                "name": "tensorflow", "image": "kubeflow/tf-dist-mnist-test:1.0" }] } } } } }
    })))
    .expect("a valid TFJob");
    submit(&ns, &job).await;
    let running = await_running(&ns, "pull", &["pull-worker-0", "pull-worker-1"]).await;
    let first = running["pull-worker-0"].uid();

    hold_waiting(&ns, "pull-worker-0", "ImagePullBackOff").await;
    eventually("an ImagePullBackOff event on the job", TIMEOUT, || async {
        let events = job_events(&ns, "pull", "ImagePullBackOff").await;
        (!events.is_empty()).then_some(())
    })
    .await;
    touch_job::<TFJob>(&ns, &operator, "pull", 5).await;
    let events = job_events(&ns, "pull", "ImagePullBackOff").await;
    assert_eq!(
        counts(&events),
        [1],
        "reconciles that see the same waiting container record nothing more: {events:?}"
    );
    let note = events[0].note.as_deref().unwrap_or_default();
    assert_eq!(
        note,
        format!(
            "Pod: {}.pull-worker-0: container tensorflow is waiting: ImagePullBackOff",
            ns.name
        )
    );

    // The pod created again, and held waiting too: another occurrence, counted.
    Api::<Pod>::namespaced(ns.client.clone(), &ns.name)
        .delete("pull-worker-0", &DeleteParams::default())
        .await
        .expect("delete the waiting pod");
    eventually("the pod created again and Running", TIMEOUT, || async {
        let pods = await_running(&ns, "pull", &["pull-worker-0"]).await;
        (pods["pull-worker-0"].uid() != first).then_some(())
    })
    .await;
    hold_waiting(&ns, "pull-worker-0", "ImagePullBackOff").await;
    eventually("the second occurrence to count", TIMEOUT, || async {
        let events = job_events(&ns, "pull", "ImagePullBackOff").await;
        (counts(&events) == [2]).then_some(())
    })
    .await;
    touch_job::<TFJob>(&ns, &operator, "pull", 3).await;
    let events = job_events(&ns, "pull", "ImagePullBackOff").await;
    assert_eq!(counts(&events), [2], "{events:?}");
}

/// Play the kubelet that evicts `pod`.
async fn evict(ns: &TestNamespace, pod: &str) {
    let status = json!({ "status": {
        "phase": "Failed", "reason": "Evicted",
        "message": "The node was low on resource: memory."
    }});
    Api::<Pod>::namespaced(ns.client.clone(), &ns.name)
        .patch_status(pod, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap_or_else(|e| panic!("cannot patch the status of pod {pod}: {e}"));
}

/// The one event on `job` with `reason` and `note`, once it is there.
async fn await_event(ns: &TestNamespace, job: &str, reason: &str, note: &str) -> Event {
    let what = format!("a {reason} event `{note}` on {job}");
    eventually(&what, TIMEOUT, || async {
        let events = job_events(ns, job, reason).await;
        let mut with_note = events
            .into_iter()
            .filter(|e| e.note.as_deref() == Some(note));
        let event = with_note.next()?;
        assert!(with_note.next().is_none(), "one Event per note");
        Some(event)
    })
    .await
}

/// Upstream's MPIJob controller's own events: the Launcher created, the Launcher running with
/// every Worker (once, however many reconciles see it), Workers evicted.
#[tokio::test]
async fn an_mpijob_records_upstreams_launcher_running_and_evicted_events() {
    let ns = TestNamespace::new("events-mpi").await;
    let operator = start_operator(&ns).await;
    let job: MPIJob = example_in(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mpi"),
        "tensorflow-mnist.yaml",
    );
    submit(&ns, &job).await;
    let name = "tensorflow-mnist";
    await_running(
        &ns,
        name,
        &[
            "tensorflow-mnist-worker-0",
            "tensorflow-mnist-worker-1",
            "tensorflow-mnist-launcher",
        ],
    )
    .await;

    let created = "launcher pod created success: tensorflow-mnist-launcher";
    let created = await_event(&ns, name, "MPIJobRunning", created).await;
    assert_eq!(created.type_.as_deref(), Some("Normal"));
    let running = format!("MPIJob {}/{name} is running", ns.name);
    await_event(&ns, name, "MPIJobRunning", &running).await;
    touch_job::<MPIJob>(&ns, &operator, name, 3).await;
    let running = await_event(&ns, name, "MPIJobRunning", &running).await;
    assert_eq!(
        counts(&[running]),
        [1],
        "once, however many reconciles see it"
    );

    evict(&ns, "tensorflow-mnist-worker-1").await;
    let evicted = await_event(&ns, name, "MPIJobEvicted", "1/2 workers are evicted").await;
    assert_eq!(evicted.type_.as_deref(), Some("Warning"));
    let jobs = Api::<MPIJob>::namespaced(ns.client.clone(), &ns.name);
    await_condition_type(&jobs, name, "Failed", TIMEOUT).await;
}
