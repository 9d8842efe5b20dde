//! One reconcile of an InferenceService, step by step (see `controller` for the flow and its
//! guarantees): prepare the revision's pod, make sure its revision exists, decide the
//! traffic, write the route, the address and the autoscalers, retire, report.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use serde_json::json;

use super::api::{InferenceService, InferenceServiceStatus};
use super::context::{self as controller, Context, ReconcileError, route_resource};
use super::objects;
use super::predictor::{self, Built, Inputs};
use super::select;
use super::status;
use super::traffic::{self, Decision, Observed};
use crate::operator::runtime::FIELD_MANAGER;
use crate::operator::runtime::events::EventType;
use crate::operator::runtime::writes::replace_status;

/// A spec that cannot be served: KServe's reason and a message naming the fix.
struct Refusal {
    reason: &'static str,
    message: String,
}

impl Refusal {
    fn new(reason: &'static str, message: impl ToString) -> Refusal {
        Refusal {
            reason,
            message: message.to_string(),
        }
    }
}

/// Carry one reconcile of `isvc` out.
pub async fn carry_out(isvc: &InferenceService, ctx: &Context) -> Result<Action, ReconcileError> {
    let built = match prepare(isvc, ctx).await? {
        Ok(built) => built,
        Err(refusal) => return refuse(isvc, ctx, refusal).await,
    };
    let latest = objects::revision_name(&isvc.name_any(), &built.hash);
    if let Err(refusal) = ensure_revision(isvc, ctx, &latest, &built).await? {
        return refuse(isvc, ctx, refusal).await;
    }
    let deployments = ctx.deployments(isvc);
    let mut revisions = controller::revisions(&deployments);
    if !revisions.iter().any(|r| r.name == latest) {
        // Created a moment ago: not cached yet, and not ready.
        revisions.push(traffic::Revision {
            name: &latest,
            ready: false,
        });
    }
    let route = ctx.route(isvc);
    let (named, acknowledged) = route.as_deref().map(objects::routed).unwrap_or_default();
    // Until the gateway has taken the route's latest generation (and a drain has passed),
    // any revision there is may still get requests: none is retired.
    let drained = acknowledged && route.as_deref().is_some_and(|r| ctx.drained(r));
    let routed: Vec<&str> = match drained {
        true => named.iter().map(String::as_str).collect(),
        false => revisions.iter().map(|r| r.name).collect(),
    };
    let before = isvc.status.clone().unwrap_or_default();
    let predictor = before.components.get("predictor");
    let decision = traffic::decide(&Observed {
        latest: &latest,
        revisions: &revisions,
        rolled_out: predictor.and_then(|p| p.latest_rolledout_revision.as_deref()),
        previous_rolled_out: predictor.and_then(|p| p.previous_rolledout_revision.as_deref()),
        canary_percent: isvc.spec.predictor.canary_traffic_percent,
        routed: &routed,
    });
    let rerouted = match write_serving(isvc, ctx, &decision, &built, &deployments).await? {
        Ok(rerouted) => rerouted,
        Err(refusal) => return refuse(isvc, ctx, refusal).await,
    };
    retire(isvc, ctx, &decision.retire).await?;
    let seen = RouteSeen {
        rerouted,
        written: route.as_deref().and_then(|r| ctx.written(r)),
        acknowledged,
        drained,
    };
    let pending = ingress_pending(route.as_deref(), &seen);
    let settling = pending.is_some();
    report(
        isvc,
        ctx,
        &before,
        &decision,
        &latest,
        &deployments,
        pending,
    )
    .await?;
    // A retirement, and the ingress's readiness, wait for the drain: look again once it is over.
    let retiring = (revisions.iter())
        .any(|r| !decision.traffic.iter().any(|(n, _)| n == r.name) && r.name != latest);
    let waiting = acknowledged && !drained && (retiring || settling);
    Ok(if waiting {
        Action::requeue(controller::DRAIN)
    } else {
        Action::await_change()
    })
}

/// The runtime, the store's credentials and the revision's pod; or why the spec cannot be
/// served.
async fn prepare(
    isvc: &InferenceService,
    ctx: &Context,
) -> Result<Result<Built, Refusal>, ReconcileError> {
    if let Some(refusal) = unsupported(isvc) {
        return Ok(Err(refusal));
    }
    let namespace = isvc.namespace().unwrap_or_default();
    let predictor = &isvc.spec.predictor;
    let (own, cluster) = ctx.runtimes_for(&namespace);
    let candidates = controller::candidates(&own, &cluster);
    let runtime = match (&predictor.model, &predictor.containers) {
        (Some(model), None) => match select::select(model, &namespace, &candidates) {
            Ok(runtime) => Some((runtime.name, runtime.spec)),
            Err(e) => return Ok(Err(Refusal::new(e.reason(), e))),
        },
        _ => None,
    };
    let uri = predictor
        .model
        .as_ref()
        .and_then(|m| m.storage_uri.as_deref());
    let store_env = match uri {
        Some(uri) if uri.starts_with("s3://") => controller::store_env(ctx.client(), isvc)
            .await
            .map_err(controller::failed(
                isvc,
                "read the store's credentials from the ServiceAccount",
            ))?,
        _ => Vec::new(),
    };
    let inputs = Inputs {
        isvc,
        runtime,
        storage_image: &ctx.settings().storage_image,
        store_env: &store_env,
    };
    Ok(predictor::build(&inputs).map_err(|e| Refusal::new("InvalidPredictorSpec", e)))
}

/// What the spec asks that is not served here.
fn unsupported(isvc: &InferenceService) -> Option<Refusal> {
    let name = isvc.name_any();
    if name.len() > objects::MAX_NAME {
        return Some(Refusal::new(
            "InvalidSpec",
            format!(
                "the name {name} is longer than {} characters, so its revisions' Services would not be DNS labels: give the InferenceService a shorter name",
                objects::MAX_NAME
            ),
        ));
    }
    let parts: Vec<&str> = (isvc.spec.other.keys())
        .filter(|k| matches!(k.as_str(), "transformer" | "explainer"))
        .map(String::as_str)
        .collect();
    if let Some(part) = parts.first() {
        return Some(Refusal::new(
            "InvalidSpec",
            format!(
                "spec.{part} is not served here (predictors only, in raw-deployment mode): remove it, or run the {part} as a predictor of its own InferenceService"
            ),
        ));
    }
    match isvc.spec.predictor.canary_traffic_percent {
        Some(p) if !(0..=100).contains(&p) => Some(Refusal::new(
            "InvalidSpec",
            format!("predictor.canaryTrafficPercent is {p}: give a percent from 0 to 100"),
        )),
        _ => None,
    }
}

/// Create the revision's Deployment and Service when absent; or why a name is taken.
async fn ensure_revision(
    isvc: &InferenceService,
    ctx: &Context,
    revision: &str,
    built: &Built,
) -> Result<Result<(), Refusal>, ReconcileError> {
    let namespace = isvc.namespace().unwrap_or_default();
    let deployment = objects::deployment(isvc, revision, &built.template, &built.hash);
    let cached = ctx
        .deployments(isvc)
        .into_iter()
        .find(|d| d.name_any() == revision);
    let deployments: Api<Deployment> = Api::namespaced(ctx.client().clone(), &namespace);
    // The count is the spec's only without an autoscaler (which owns it otherwise).
    let replicas = deployment.spec.as_ref().and_then(|s| s.replicas);
    match cached {
        Some(live)
            if replicas.is_some() && live.spec.as_ref().and_then(|s| s.replicas) != replicas =>
        {
            controller::apply(&deployments, revision, &deployment)
                .await
                .map_err(controller::failed(isvc, "scale a revision"))?;
        }
        Some(_) => {}
        None => {
            let ours = controller::create_owned(&deployments, &deployment, isvc)
                .await
                .map_err(controller::failed(isvc, "create a revision"))?;
            if ours.is_none() {
                return Ok(Err(taken("Deployment", revision)));
            }
            ctx.metrics().object("revision created");
        }
    }
    if ctx.service(isvc, revision).is_none() {
        let service = objects::service(
            isvc,
            revision,
            revision,
            objects::container_port(&built.template),
        );
        let services: Api<Service> = Api::namespaced(ctx.client().clone(), &namespace);
        if controller::create_owned(&services, &service, isvc)
            .await
            .map_err(controller::failed(isvc, "create a revision's Service"))?
            .is_none()
        {
            return Ok(Err(taken("Service", revision)));
        }
    }
    Ok(Ok(()))
}

fn taken(kind: &str, name: &str) -> Refusal {
    Refusal::new(
        "NameTaken",
        format!(
            "{kind} {name} exists and is not this InferenceService's: rename or delete it, or give the InferenceService another name"
        ),
    )
}

/// Write the address Service, the route and the autoscalers for `decision`.
async fn write_serving(
    isvc: &InferenceService,
    ctx: &Context,
    decision: &Decision,
    built: &Built,
    deployments: &[Arc<Deployment>],
) -> Result<Result<bool, Refusal>, ReconcileError> {
    let namespace = isvc.namespace().unwrap_or_default();
    let client = ctx.client().clone();
    let address_name = format!("{}-predictor", isvc.name_any());
    let stable = decision
        .rolled_out
        .clone()
        .unwrap_or_else(|| decision.traffic[0].0.clone());
    let address = objects::service(
        isvc,
        &address_name,
        &stable,
        objects::container_port(&built.template),
    );
    let services: Api<Service> = Api::namespaced(client.clone(), &namespace);
    match ctx.service(isvc, &address_name) {
        Some(live) if !controller::controlled_by(live.owner_references(), isvc) => {
            return Ok(Err(taken("Service", &address_name)));
        }
        Some(live)
            if live.spec.as_ref().and_then(|s| s.selector.as_ref())
                == address.spec.as_ref().and_then(|s| s.selector.as_ref()) => {}
        Some(_) => controller::apply(&services, &address_name, &address)
            .await
            .map_err(controller::failed(isvc, "point the address Service"))?,
        None => {
            if controller::create_owned(&services, &address, isvc)
                .await
                .map_err(controller::failed(isvc, "create the address Service"))?
                .is_none()
            {
                return Ok(Err(taken("Service", &address_name)));
            }
        }
    }
    if let Err(refusal) = write_policy(isvc, ctx).await? {
        return Ok(Err(refusal));
    }
    let rerouted = match write_route(isvc, ctx, decision).await? {
        Ok(rerouted) => rerouted,
        Err(refusal) => return Ok(Err(refusal)),
    };
    write_autoscalers(isvc, ctx, deployments).await?;
    Ok(Ok(rerouted))
}

/// The NetworkPolicy that keeps every pod but the namespace's and the gateway's away from the
/// revisions' servers: created when missing, brought back to what it must be when changed.
async fn write_policy(
    isvc: &InferenceService,
    ctx: &Context,
) -> Result<Result<(), Refusal>, ReconcileError> {
    let policy = objects::network_policy(isvc, &ctx.settings().ingress);
    let name = policy.name_any();
    let api: Api<NetworkPolicy> =
        Api::namespaced(ctx.client().clone(), &isvc.namespace().unwrap_or_default());
    match ctx.policy(isvc, &name) {
        Some(live) if !controller::controlled_by(live.owner_references(), isvc) => {
            Ok(Err(taken("NetworkPolicy", &name)))
        }
        Some(live) if live.spec == policy.spec => Ok(Ok(())),
        Some(_) => controller::apply(&api, &name, &policy)
            .await
            .map(Ok)
            .map_err(controller::failed(isvc, "restore the NetworkPolicy")),
        None => match controller::create_owned(&api, &policy, isvc).await {
            Ok(Some(_)) => Ok(Ok(())),
            Ok(None) => Ok(Err(taken("NetworkPolicy", &name))),
            Err(e) => Err(controller::failed(isvc, "create the NetworkPolicy")(e)),
        },
    }
}

/// Write the HTTPRoute of `decision`'s traffic: whether it changed.
async fn write_route(
    isvc: &InferenceService,
    ctx: &Context,
    decision: &Decision,
) -> Result<Result<bool, Refusal>, ReconcileError> {
    let namespace = isvc.namespace().unwrap_or_default();
    let resource = route_resource();
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client().clone(), &namespace, &resource);
    let desired = objects::route(isvc, &ctx.settings().ingress, &decision.traffic);
    let live = ctx.route(isvc);
    if let Some(live) = &live {
        if !controller::controlled_by(live.owner_references(), isvc) {
            return Ok(Err(taken("HTTPRoute", &isvc.name_any())));
        }
        if objects::same_route(&live.data["spec"], &desired["spec"]) {
            return Ok(Ok(false));
        }
    } else {
        let object: DynamicObject = serde_json::from_value(desired.clone())
            .unwrap_or_else(|_| DynamicObject::new(&isvc.name_any(), &resource));
        let created = controller::create_owned(&api, &object, isvc)
            .await
            .map_err(controller::failed(isvc, "create the HTTPRoute"))?;
        let Some(created) = created else {
            return Ok(Err(taken("HTTPRoute", &isvc.name_any())));
        };
        ctx.wrote(&created);
        return Ok(Ok(true));
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let written = api
        .patch(&isvc.name_any(), &params, &Patch::Apply(&desired))
        .await
        .map_err(controller::failed(isvc, "write the HTTPRoute"))?;
    ctx.wrote(&written);
    Ok(Ok(true))
}

/// An autoscaler per revision while `maxReplicas` exceeds `minReplicas`; none otherwise. The
/// revision's Deployment carries the hash of the autoscaler written last, so an unchanged one
/// is not written again at every reconcile.
async fn write_autoscalers(
    isvc: &InferenceService,
    ctx: &Context,
    deployments: &[Arc<Deployment>],
) -> Result<(), ReconcileError> {
    let namespace = isvc.namespace().unwrap_or_default();
    let api: Api<HorizontalPodAutoscaler> = Api::namespaced(ctx.client().clone(), &namespace);
    for deployment in deployments {
        let revision = deployment.name_any();
        let written = deployment.annotations().get(AUTOSCALED);
        match objects::autoscaler(isvc, &revision) {
            Some(hpa) => {
                let hash = predictor::hex_prefix(&json!(hpa.spec));
                if written == Some(&hash) {
                    continue;
                }
                controller::apply(&api, &revision, &hpa)
                    .await
                    .map_err(controller::failed(isvc, "write an autoscaler"))?;
                mark_autoscaled(ctx, isvc, &revision, Some(&hash)).await?;
            }
            None if written.is_some() => {
                controller::delete(&api, &revision)
                    .await
                    .map_err(controller::failed(isvc, "delete an autoscaler"))?;
                mark_autoscaled(ctx, isvc, &revision, None).await?;
            }
            None => {}
        }
    }
    Ok(())
}

/// The annotation on a revision's Deployment while an autoscaler scales it: the hash of the
/// autoscaler's spec.
const AUTOSCALED: &str = "serving.mlkube.io/autoscaled";

async fn mark_autoscaled(
    ctx: &Context,
    isvc: &InferenceService,
    revision: &str,
    hash: Option<&str>,
) -> Result<(), ReconcileError> {
    let api: Api<Deployment> =
        Api::namespaced(ctx.client().clone(), &isvc.namespace().unwrap_or_default());
    let body = json!({ "metadata": { "annotations": { AUTOSCALED: hash } } });
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    api.patch(revision, &params, &Patch::Merge(body))
        .await
        .map(|_| ())
        .map_err(controller::failed(isvc, "mark a revision autoscaled"))
}

/// Delete the retired revisions' Deployments (their pods with them), Services and autoscalers.
async fn retire(
    isvc: &InferenceService,
    ctx: &Context,
    retired: &[String],
) -> Result<(), ReconcileError> {
    let namespace = isvc.namespace().unwrap_or_default();
    let client = ctx.client().clone();
    for revision in retired {
        let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), &namespace);
        controller::delete(&hpas, revision)
            .await
            .map_err(controller::failed(isvc, "delete a retired autoscaler"))?;
        let services: Api<Service> = Api::namespaced(client.clone(), &namespace);
        controller::delete(&services, revision)
            .await
            .map_err(controller::failed(isvc, "delete a retired Service"))?;
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
        controller::delete(&deployments, revision)
            .await
            .map_err(controller::failed(isvc, "retire a revision"))?;
        ctx.metrics().object("revision retired");
        ctx.events().publish(
            isvc,
            EventType::Normal,
            "RevisionRetired".into(),
            format!("revision {revision} gets no requests any more and was deleted"),
            "Retire",
        );
    }
    Ok(())
}

/// What a reconcile knows of the gateway and the InferenceService's route (as cached).
struct RouteSeen {
    /// This reconcile wrote the route's weights.
    rerouted: bool,
    /// The route's generation this process wrote last, if it wrote one.
    written: Option<i64>,
    /// The gateway accepted the route's generation...
    acknowledged: bool,
    /// ...at least [`controller::DRAIN`] ago.
    drained: bool,
}

/// Why the ingress is not ready; `None` once the gateway serves the route as written. Weights
/// this process wrote are not served until the gateway accepted them and
/// [`controller::DRAIN`] passed (it applies a route a moment after it says so); a route it did
/// not write (an operator that restarted) is served once accepted, so a restart takes no
/// ingress down.
fn ingress_pending(route: Option<&DynamicObject>, seen: &RouteSeen) -> Option<String> {
    const REROUTED: &str =
        "the HTTPRoute's weights were just written; waiting for the gateway to take them up";
    if seen.rerouted {
        return Some(REROUTED.into());
    }
    let Some(route) = route else {
        return Some("the HTTPRoute was just created; waiting for the gateway to accept it".into());
    };
    let generation = route.metadata.generation.unwrap_or_default();
    if seen.written.is_some_and(|written| generation < written) {
        // The cache has not caught up with the write yet.
        return Some(REROUTED.into());
    }
    if seen.acknowledged && (seen.drained || seen.written != Some(generation)) {
        return None;
    }
    if seen.acknowledged {
        return Some(format!(
            "the gateway accepted HTTPRoute {}'s weights; they are served within {} s",
            route.name_any(),
            controller::DRAIN.as_secs()
        ));
    }
    let conditions: Vec<&serde_json::Value> = (route.data["status"]["parents"]
        .as_array()
        .into_iter()
        .flatten())
    .flat_map(|p| p["conditions"].as_array().into_iter().flatten())
    .filter(|c| c["type"] == "Accepted")
    .collect();
    if conditions.iter().any(|c| c["status"] == "True") {
        return Some(format!(
            "the gateway has not taken HTTPRoute {}'s latest generation yet",
            route.name_any()
        ));
    }
    let refused = conditions
        .iter()
        .find_map(|c| c["message"].as_str().filter(|m| !m.is_empty()));
    Some(match refused {
        Some(message) => format!(
            "the gateway refused HTTPRoute {}: {message}",
            route.name_any()
        ),
        None => format!(
            "the gateway has not accepted HTTPRoute {} yet; check that the Gateway the operator's --serving-gateway names exists and admits routes from this namespace",
            route.name_any()
        ),
    })
}

/// Write the status if it changed, and say what the traffic did.
async fn report(
    isvc: &InferenceService,
    ctx: &Context,
    before: &InferenceServiceStatus,
    decision: &Decision,
    latest: &str,
    deployments: &[Arc<Deployment>],
    ingress_pending: Option<String>,
) -> Result<(), ReconcileError> {
    let pods = ctx.pods(isvc);
    let not_ready = not_ready(deployments, &pods, latest);
    let mut ready: Vec<&Arc<Deployment>> = deployments
        .iter()
        .filter(|d| !not_ready.iter().any(|(n, _)| *n == d.name_any()))
        .collect();
    ready.sort_by_key(|d| d.metadata.creation_timestamp.as_ref().map(|t| t.0));
    let latest_ready = ready.last().map(|d| d.name_any());
    let url = format!("http://{}", objects::host(isvc, &ctx.settings().ingress));
    let served = status::Served {
        decision,
        latest,
        latest_ready: latest_ready.as_deref(),
        not_ready: &not_ready,
        url,
        address: objects::address(isvc),
        ingress_pending,
    };
    let now = now();
    let status = status::served(before, isvc.metadata.generation, &served, &now);
    say_traffic(isvc, ctx, before, decision);
    write_status(isvc, ctx, before, &status).await
}

/// Events for a canary held back and for its share returned.
fn say_traffic(
    isvc: &InferenceService,
    ctx: &Context,
    before: &InferenceServiceStatus,
    decision: &Decision,
) {
    let Some(held) = &decision.held else { return };
    let had = (before.components.get("predictor").into_iter())
        .flat_map(|p| p.traffic.iter())
        .any(|t| t.revision_name == held.revision && t.percent > 0);
    let (reason, note) = if had {
        (
            "TrafficReturned",
            format!(
                "revision {} stopped being ready; its {}% went back to {}",
                held.revision, held.asked, held.keeps
            ),
        )
    } else {
        (
            "CanaryHeld",
            format!(
                "revision {} is not ready; {} keeps the {}% asked for it until it is",
                held.revision, held.keeps, held.asked
            ),
        )
    };
    ctx.events().publish_state(
        isvc,
        EventType::Warning,
        reason.into(),
        note.clone(),
        "Route",
        &format!("{reason}/{}", held.revision),
    );
}

/// Each revision that is not ready, and why: its pods' waiting reasons, or that none is ready.
fn not_ready(
    deployments: &[Arc<Deployment>],
    pods: &[Arc<Pod>],
    latest: &str,
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let names = (deployments.iter())
        .filter(|d| !controller::available(d))
        .map(|d| d.name_any());
    let latest_missing = !deployments.iter().any(|d| d.name_any() == latest);
    for name in names.chain(latest_missing.then(|| latest.to_owned())) {
        let why = (pods.iter())
            .filter(|p| p.labels().get(predictor::REVISION_LABEL) == Some(&name))
            .find_map(|p| pod_problem(p))
            .unwrap_or_else(|| {
                "no pod of it is available yet (Ready for a few seconds)".to_owned()
            });
        out.push((name, why));
    }
    out
}

/// What keeps `pod` from being ready, when its containers say: a waiting reason with its
/// message, or the last termination's message (the storage initializer says what it missed).
fn pod_problem(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    let containers = (status.init_container_statuses.iter().flatten())
        .chain(status.container_statuses.iter().flatten());
    containers.filter(|c| !c.ready).find_map(|c| {
        let waiting = c.state.as_ref()?.waiting.as_ref()?;
        let reason = waiting.reason.clone().unwrap_or_default();
        let last = (c.last_state.as_ref())
            .and_then(|s| s.terminated.as_ref())
            .and_then(|t| t.message.clone());
        let detail = last
            .or_else(|| waiting.message.clone())
            .map(|m| format!(": {}", m.trim()))
            .unwrap_or_default();
        Some(format!(
            "container {} of pod {}: {reason}{detail}",
            c.name,
            pod.name_any()
        ))
    })
}

async fn write_status(
    isvc: &InferenceService,
    ctx: &Context,
    before: &InferenceServiceStatus,
    status: &InferenceServiceStatus,
) -> Result<(), ReconcileError> {
    if isvc.status.is_some() && before == status {
        return Ok(());
    }
    // Replaced whole, holding the version read: fields the status no longer has go, and a
    // change made since is a conflict and a retry.
    let api: Api<InferenceService> =
        Api::namespaced(ctx.client().clone(), &isvc.namespace().unwrap_or_default());
    let mut updated = isvc.clone();
    updated.status = Some(status.clone());
    replace_status(&api, &updated)
        .await
        .map(|_| ())
        .map_err(controller::failed(isvc, "write the status"))
}

/// Refuse the spec: the status and a Warning event say why; nothing that serves changes.
async fn refuse(
    isvc: &InferenceService,
    ctx: &Context,
    refusal: Refusal,
) -> Result<Action, ReconcileError> {
    let before = isvc.status.clone().unwrap_or_default();
    let status = status::refused(
        &before,
        isvc.metadata.generation,
        refusal.reason,
        &refusal.message,
        &now(),
    );
    ctx.events().publish_state(
        isvc,
        EventType::Warning,
        refusal.reason.into(),
        refusal.message.clone(),
        "Reconcile",
        &refusal.message,
    );
    write_status(isvc, ctx, &before, &status).await?;
    Ok(Action::await_change())
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn route(accepted: Option<(&str, i64)>, generation: i64) -> DynamicObject {
        let conditions: Vec<_> = (accepted.into_iter())
            .map(|(status, observed)| {
                json!({ "type": "Accepted", "status": status, "observedGeneration": observed })
            })
            .collect();
        let mut route: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": { "name": "digits", "generation": generation },
            "status": { "parents": [{ "conditions": conditions }] },
        }))
        .unwrap();
        route.metadata.generation = Some(generation);
        route
    }

    fn seen(route: &DynamicObject, written: Option<i64>, drained: bool) -> RouteSeen {
        RouteSeen {
            rerouted: false,
            written,
            acknowledged: objects::routed(route).1,
            drained,
        }
    }

    #[test]
    fn the_ingress_is_ready_only_once_the_gateway_served_the_weights_written_for_a_moment() {
        let taken = route(Some(("True", 3)), 3);
        assert_eq!(
            ingress_pending(Some(&taken), &seen(&taken, Some(3), true)),
            None
        );
        let just = ingress_pending(Some(&taken), &seen(&taken, Some(3), false)).unwrap();
        assert!(just.contains("served within 5 s"), "{just}");
        // A route this process did not write (it restarted): ready once accepted.
        assert_eq!(
            ingress_pending(Some(&taken), &seen(&taken, None, false)),
            None
        );
        // The cache still holds the generation before this process's write.
        let stale = ingress_pending(Some(&taken), &seen(&taken, Some(4), true)).unwrap();
        assert!(stale.contains("just written"), "{stale}");

        let written = RouteSeen {
            rerouted: true,
            ..seen(&taken, Some(3), true)
        };
        let why = ingress_pending(Some(&taken), &written).unwrap();
        assert!(why.contains("just written"), "{why}");

        let older = route(Some(("True", 2)), 3);
        let why = ingress_pending(Some(&older), &seen(&older, None, false)).unwrap();
        assert!(why.contains("latest generation"), "{why}");
        let never = route(None, 1);
        let why = ingress_pending(Some(&never), &seen(&never, None, false)).unwrap();
        assert!(why.contains("has not accepted HTTPRoute digits"), "{why}");
        assert!(ingress_pending(None, &seen(&never, None, false)).is_some());
    }
}
