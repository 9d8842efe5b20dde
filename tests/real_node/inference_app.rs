//! The inference-service prototype on the real nodes, through mlkube's own verbs, as the README
//! shows it: a component serving v1 of the digits model (the XGBoostJobs' versions in the
//! object store, fetched with the store's read-only keys, which the store annotates KServe's
//! way), then `param set version v2` with `canaryTrafficPercent 10` applied (the apply waits
//! for the canary's revision), then `canaryTrafficPercent null` (promotion: the controller
//! retires v1's revision), with a request loop through the gateway that sees no failure. A
//! format no runtime serves makes `apply` fail at once with the controller's reason.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use mlkube::operator::serving::api::InferenceService;

use crate::gateway::gateway;
use crate::inference::{
    ROLLOUTS, answered_by, condition, latest_created, predict, request_loop, traffic, until,
};
use crate::platform::{self, NAMESPACE, assert_success, mlkube, set_param};
use crate::serving::{Http, digits_models_once};
use crate::support;
use crate::volume_support::object_store;

const COMPONENT: &str = "digits-kserve";

/// The component in the platform's app, added once.
fn component(dir: &Path) {
    let listed = mlkube(dir, &["component", "list", "-o", "name"]);
    if !String::from_utf8_lossy(&listed.stdout)
        .lines()
        .any(|l| l == COMPONENT)
    {
        let add = mlkube(
            dir,
            &[
                "component",
                "add",
                "inference-service",
                COMPONENT,
                "--param",
                "storageUri=s3://models/xgboost-digits/{version}/",
            ],
        );
        assert_success("component add inference-service", &add);
    }
}

/// Serve `version`, naming it in the answers, at `canary` percent (`null` promotes).
fn serve(dir: &Path, version: &str, canary: &str) {
    set_param(dir, COMPONENT, "version", version, None);
    set_param(
        dir,
        COMPONENT,
        "args",
        &format!(r#"["--version", "{version}"]"#),
        None,
    );
    set_param(dir, COMPONENT, "canaryTrafficPercent", canary, None);
    set_param(dir, COMPONENT, "modelFormat", "xgboost", None);
}

fn apply(dir: &Path) -> std::process::Output {
    mlkube(dir, &["apply", "local", "-c", COMPONENT, "--timeout", "5m"])
}

#[tokio::test]
async fn the_inference_service_prototype_rolls_out_a_canary_and_promotes_it_through_apply() {
    let _alone = ROLLOUTS.lock().await;
    object_store();
    gateway();
    digits_models_once().await;
    let dir = platform::app();
    component(dir);
    let client = support::client().await;
    let api = Api::<InferenceService>::namespaced(client.clone(), NAMESPACE);
    let http: Http = HttpClient::builder(TokioExecutor::new()).build_http();

    serve(dir, "v1", "null");
    assert_success("apply v1", &apply(dir));
    let first = until(&api, COMPONENT, "v1 served", |i| traffic(i).len() == 1).await;
    let r1 = latest_created(&first).expect("a revision");
    answered_by(&http, COMPONENT, "v1", 5).await;

    let stop = Arc::new(AtomicBool::new(false));
    let looping = request_loop(http.clone(), stop.clone(), COMPONENT);
    serve(dir, "v2", "10");
    let diff = mlkube(dir, &["diff", "local", "-c", COMPONENT]);
    let shown = String::from_utf8_lossy(&diff.stdout);
    assert!(
        shown.contains("canaryTrafficPercent: 10") && shown.contains("xgboost-digits/v2/"),
        "the diff shows the canary: {shown}"
    );
    assert_success("apply the canary", &apply(dir));
    // The apply waited for the canary's revision: it serves its share already.
    let split = api.get(COMPONENT).await.expect("the InferenceService");
    let r2 = latest_created(&split).expect("a revision");
    assert_ne!(r1, r2, "a new revision");
    let mut split = traffic(&split);
    let mut expected = vec![(r1.clone(), 90), (r2, 10)];
    split.sort();
    expected.sort();
    assert_eq!(split, expected);
    answered_by(&http, COMPONENT, "v2", 1).await;

    serve(dir, "v2", "null");
    assert_success("apply the promotion", &apply(dir));
    // The apply returned once the gateway had taken the promotion's weights: v1 answers no
    // more, though its revision is still there until the drain has passed.
    for _ in 0..30 {
        let answer = predict(&http, COMPONENT).await;
        assert_eq!(
            answer.as_deref(),
            Ok("v2"),
            "right after the promotion's apply"
        );
    }
    let deployments = Api::<Deployment>::namespaced(client.clone(), NAMESPACE);
    support::eventually(
        &format!("{r1} retired"),
        Duration::from_secs(120),
        || async { matches!(deployments.get_opt(&r1).await, Ok(None)).then_some(()) },
    )
    .await;
    answered_by(&http, COMPONENT, "v2", 20).await;
    stop.store(true, Ordering::Relaxed);
    let (seen, failed) = looping.await.expect("the request loop");
    eprintln!(
        "prototype: apply v1 → canary → promote: {} requests, {} failed",
        seen.len() + failed.len(),
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "failed: {:?}",
        &failed[..failed.len().min(5)]
    );

    a_format_no_runtime_serves_fails_the_apply_with_the_reason(dir, &api).await;
    let delete = mlkube(dir, &["delete", "local", "-c", COMPONENT, "--yes"]);
    assert_success("delete the component", &delete);
}

/// `modelFormat onnx`: no runtime here serves it, so the controller refuses the
/// spec, and the apply stops with its reason (not at the timeout); v2 goes on serving.
async fn a_format_no_runtime_serves_fails_the_apply_with_the_reason(
    dir: &Path,
    api: &Api<InferenceService>,
) {
    set_param(dir, COMPONENT, "modelFormat", "onnx", None);
    let refused = apply(dir);
    let said = String::from_utf8_lossy(&refused.stderr).into_owned()
        + &String::from_utf8_lossy(&refused.stdout);
    assert!(!refused.status.success(), "{said}");
    assert!(
        said.contains("NoSupportingRuntime") && said.contains("onnx"),
        "the apply names the reason: {said}"
    );
    let isvc = api.get(COMPONENT).await.expect("the InferenceService");
    assert_eq!(
        condition(&isvc, "Ready").map(|c| c.0).as_deref(),
        Some("False")
    );
    assert_eq!(traffic(&isvc).len(), 1, "what served goes on serving");
    set_param(dir, COMPONENT, "modelFormat", "xgboost", None);
}
