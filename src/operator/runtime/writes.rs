//! The writes every controller makes, with the API server's answers that are outcomes rather
//! than errors named as such: an object that already exists, one that is gone, one that changed
//! since it was read.
//!
//! # Guarantees
//! - [`create_once`] never makes a second object: with deterministic names, "already exists"
//!   is the answer that the object is there ([`Created::Exists`]).
//! - [`delete_exactly`] deletes only the object of the UID it was decided on: a newer object
//!   of the same name is never deleted in its place ([`Deleted::Replaced`]).
//! - Every write is made as [`FIELD_MANAGER`], so `managedFields` says which fields are ours.
//!
//! # Errors
//! Any other answer is the caller's error, returned unchanged: the caller knows which object
//! and which step it was, and says so in its event and its log line.

use kube::api::{DeleteParams, PostParams, Preconditions};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::FIELD_MANAGER;

/// Whether `error` is the API server's answer with this HTTP status.
fn is_status(error: &kube::Error, codes: &[u16]) -> bool {
    matches!(error, kube::Error::Api(status) if codes.contains(&status.code))
}

/// Whether the object is not there (404): deleted already, or never created.
pub fn is_gone(error: &kube::Error) -> bool {
    is_status(error, &[404])
}

/// Whether the object is not as the write expected (409): it exists already (a create), it
/// changed since it was read (a write that held a resourceVersion), or it is another object
/// of the same name (a delete that held a UID).
pub fn is_conflict(error: &kube::Error) -> bool {
    is_status(error, &[409])
}

/// The parameters of a create or replace made as the operator.
pub fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    }
}

/// How a create went, when the API server did not refuse it.
#[derive(Debug)]
pub enum Created<K> {
    /// Created now: the object as stored.
    New(K),
    /// An object of that name exists already.
    Exists,
}

/// Create `object` unless one of its name exists.
pub async fn create_once<K>(api: &Api<K>, object: &K) -> Result<Created<K>, kube::Error>
where
    K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    match api.create(&post_params(), object).await {
        Ok(created) => Ok(Created::New(created)),
        Err(e) if is_conflict(&e) => Ok(Created::Exists),
        Err(e) => Err(e),
    }
}

/// How a delete went, when the API server did not refuse it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deleted {
    /// The deletion was accepted (the object may linger while its finalizers run).
    Sent,
    /// No object of that name.
    Gone,
    /// The object of that name is another one (another UID): left alone.
    Replaced,
}

/// Delete `name`, only if it is still the object of `uid` (`None`: whichever has the name),
/// with `params`' propagation and grace period.
pub async fn delete_exactly<K>(
    api: &Api<K>,
    name: &str,
    uid: Option<String>,
    params: DeleteParams,
) -> Result<Deleted, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let params = DeleteParams {
        preconditions: uid.map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..params
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(Deleted::Sent),
        Err(e) if is_gone(&e) => Ok(Deleted::Gone),
        Err(e) if is_conflict(&e) && params.preconditions.is_some() => Ok(Deleted::Replaced),
        Err(e) => Err(e),
    }
}

/// Replace the status of `object` (its status subresource) with the status it carries, holding
/// its resourceVersion: a change made since it was read is a conflict ([`is_conflict`]), never
/// a lost write. The object as stored after.
pub async fn replace_status<K>(api: &Api<K>, object: &K) -> Result<K, kube::Error>
where
    K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let mut updated = object.clone();
    // The server keeps the managed fields it has; sending ours back would only cost bytes.
    updated.meta_mut().managed_fields = None;
    api.replace_status(&object.name_any(), &post_params(), &updated)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(
            kube::core::Status::failure("refused", "Refused").with_code(code),
        ))
    }

    #[test]
    fn answers_that_are_outcomes_are_named() {
        assert!(is_gone(&answer(404)));
        assert!(!is_gone(&answer(409)));
        assert!(is_conflict(&answer(409)));
        assert!(!is_conflict(&answer(500)));
        assert!(is_status(&answer(413), &[400, 413]));
    }
}
