//! Leader election with a `coordination.k8s.io/v1` Lease, so only one operator replica acts.
//!
//! # Expected flow
//! `acquire` polls until the Lease is free, expired or ours, and takes it with an update that
//! carries the resourceVersion it read; `hold` then renews it every `renew_every` and returns
//! when a renewal fails for longer than the lease lasts. The caller stops reconciling then
//! (the binary exits and is restarted).
//!
//! # Guarantees
//! Two replicas never both believe they hold the lease for longer than clock skew plus one
//! renewal period: every take-over is a compare-and-swap on the resourceVersion.
//!
//! # Caveats
//! Leadership is not a fence: a replica that stalls past its lease may still send a write it
//! had in flight. The operator does not rely on leadership for correctness: pod names are
//! deterministic (a second create fails with AlreadyExists) and status writes carry the
//! resourceVersion they were computed from.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::{Api, Client};

use super::writes::{Created, create_once, is_conflict, post_params};
use crate::error_text::OneLine;

/// The Lease's name, in the operator's namespace.
pub const LEASE_NAME: &str = "mlkube-tfjob-operator";

#[derive(Clone, Debug)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    /// Who we are: the pod name (HOSTNAME) and a per-process suffix.
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_every: Duration,
}

impl LeaseConfig {
    pub fn new(namespace: String) -> Self {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "mlkube".to_owned());
        let nanos = Timestamp::now().subsec_nanosecond();
        LeaseConfig {
            namespace,
            name: LEASE_NAME.to_owned(),
            identity: format!("{host}_{}_{nanos:x}", std::process::id()),
            lease_duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(5),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("lost the leader lease {namespace}/{name}: not renewed for {seconds}s")]
    Lost {
        namespace: String,
        name: String,
        seconds: u64,
    },
}

/// Take or renew the lease once; `Ok(true)` when we hold it afterwards.
pub async fn try_acquire(api: &Api<Lease>, config: &LeaseConfig) -> Result<bool, kube::Error> {
    let now = MicroTime(Timestamp::now());
    let duration = i32::try_from(config.lease_duration.as_secs()).unwrap_or(15);
    let Some(mut lease) = api.get_opt(&config.name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(config.name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(config.identity.clone()),
                lease_duration_seconds: Some(duration),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        return match create_once(api, &lease).await {
            Ok(Created::New(_)) => Ok(true),
            Ok(Created::Exists) => Ok(false),
            Err(e) => Err(e),
        };
    };
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    let ours = spec.holder_identity.as_deref() == Some(config.identity.as_str());
    let held_by_other = spec
        .holder_identity
        .as_deref()
        .is_some_and(|h| !h.is_empty())
        && !ours;
    if held_by_other {
        let renewed = spec.renew_time.as_ref().map_or(0, |t| t.0.as_second());
        let lasts = i64::from(spec.lease_duration_seconds.unwrap_or(duration));
        if renewed + lasts > now.0.as_second() {
            return Ok(false);
        }
    }
    if !ours {
        spec.acquire_time = Some(now.clone());
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
    }
    spec.holder_identity = Some(config.identity.clone());
    spec.lease_duration_seconds = Some(duration);
    spec.renew_time = Some(now);
    match api.replace(&config.name, &post_params(), &lease).await {
        Ok(_) => Ok(true),
        Err(e) if is_conflict(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Wait until this replica holds the lease.
pub async fn acquire(client: Client, config: &LeaseConfig) {
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    loop {
        match try_acquire(&api, config).await {
            Ok(true) => {
                tracing::info!(lease = %config.name, identity = %config.identity, "acquired the leader lease");
                return;
            }
            Ok(false) => {
                tracing::debug!(lease = %config.name, "the leader lease is held by another replica")
            }
            Err(e) => {
                tracing::warn!(lease = %config.name, error = %OneLine(&e), "cannot read or take the leader lease")
            }
        }
        tokio::time::sleep(config.renew_every).await;
    }
}

/// Give the lease up, if this replica still holds it, so a standby takes over at its next
/// attempt instead of waiting for the lease to run out. Best effort: on failure the lease
/// simply runs out.
pub async fn release(client: Client, config: &LeaseConfig) {
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    let Ok(Some(mut lease)) = api.get_opt(&config.name).await else {
        return;
    };
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    if spec.holder_identity.as_deref() != Some(config.identity.as_str()) {
        return;
    }
    spec.holder_identity = None;
    match api.replace(&config.name, &post_params(), &lease).await {
        Ok(_) => tracing::info!(lease = %config.name, "released the leader lease"),
        Err(e) => {
            tracing::warn!(lease = %config.name, error = %OneLine(&e), "cannot release the leader lease; it runs out instead")
        }
    }
}

/// Renew the lease until a renewal has failed for longer than the lease lasts.
pub async fn hold(client: Client, config: LeaseConfig) -> LeaderError {
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    let mut last_renewed = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(config.renew_every).await;
        match try_acquire(&api, &config).await {
            Ok(true) => last_renewed = tokio::time::Instant::now(),
            Ok(false) => {
                return LeaderError::Lost {
                    namespace: config.namespace,
                    name: config.name,
                    seconds: last_renewed.elapsed().as_secs(),
                };
            }
            Err(e) => {
                tracing::warn!(lease = %config.name, error = %OneLine(&e), "cannot renew the leader lease")
            }
        }
        if last_renewed.elapsed() > config.lease_duration {
            return LeaderError::Lost {
                namespace: config.namespace,
                name: config.name,
                seconds: last_renewed.elapsed().as_secs(),
            };
        }
    }
}
