//! The loop: translate what the caches hold, publish it for Traefik, write the statuses that
//! changed; again on every change, and every little while to retry a write that failed.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::serve::Published;
use super::status;
use super::translate::translate;
use super::watch::{Caches, gateway_api};
use super::world::{Served, World, name, namespace};

/// A look after a write failed comes this soon; after every write went, this late (a change
/// wakes it anyway).
const RETRY: Duration = Duration::from_secs(2);
const IDLE: Duration = Duration::from_secs(60);
/// Events that come together (a rollout's endpoints) are taken in one look.
const GATHER: Duration = Duration::from_millis(100);

/// What the loop needs besides the caches.
pub struct Looping {
    pub client: Client,
    pub served: Served,
    /// The Gateway's address, as its status says it.
    pub hostname: String,
    pub published: Arc<Published>,
}

/// Run the loop until the process ends.
pub async fn run(looping: Looping, caches: Caches, changed: Arc<Notify>) {
    caches.synced().await;
    tracing::info!("caches synced; serving routes");
    loop {
        let world = caches.world();
        let made = translate(&world, &looping.served);
        looping.published.publish(made.config.to_string());
        let now = Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        let mut written = write_routes(&looping, &world, &made.verdicts, &now).await;
        if let Some(gateway) = status::gateway(
            &world.gateway,
            &looping.served,
            &made.attached,
            &looping.hostname,
            &now,
        ) {
            written &= write(
                &looping.client,
                &world.gateway,
                "Gateway",
                "gateways",
                gateway,
            )
            .await;
        }
        let class = caches.class();
        if let Some(accepted) = (!class.is_null())
            .then(|| status::class(&class, &now))
            .flatten()
        {
            written &= write(
                &looping.client,
                &class,
                "GatewayClass",
                "gatewayclasses",
                accepted,
            )
            .await;
        }
        let pause = if written { IDLE } else { RETRY };
        tokio::select! {
            () = changed.notified() => {}
            () = tokio::time::sleep(pause) => {}
        }
        tokio::time::sleep(GATHER).await;
    }
}

/// Write each route's status that changed; whether every write went.
async fn write_routes(
    looping: &Looping,
    world: &World,
    verdicts: &std::collections::BTreeMap<(String, String), super::translate::Verdict>,
    now: &str,
) -> bool {
    let mut written = true;
    for route in &world.routes {
        let key = (namespace(route).to_owned(), name(route).to_owned());
        let Some(verdict) = verdicts.get(&key) else {
            continue;
        };
        if let Some(made) = status::route(route, verdict, &looping.served, now) {
            written &= write(&looping.client, route, "HTTPRoute", "httproutes", made).await;
        }
    }
    written
}

/// Patch `object`'s status to `made`, at the version read (a status another writer changed
/// since is read again, not overwritten).
async fn write(client: &Client, object: &Value, kind: &str, plural: &str, made: Value) -> bool {
    let resource = gateway_api(kind, plural, "v1");
    let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let patch = json!({
        "metadata": { "resourceVersion": object["metadata"]["resourceVersion"] },
        "status": made,
    });
    match api
        .patch_status(name(object), &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => true,
        // Another writer came first (the other gateway pods write the same statuses), or the
        // object went: the next look reads what is there now.
        Err(kube::Error::Api(status)) if matches!(status.code, 404 | 409) => {
            tracing::debug!(
                kind,
                namespace = namespace(object),
                name = name(object),
                code = status.code,
                "status changed meanwhile; looking again"
            );
            false
        }
        Err(e) => {
            let e = crate::error_text::OneLine(&e);
            tracing::warn!(kind, namespace = namespace(object), name = name(object), error = %e, "status not written; trying again");
            false
        }
    }
}
