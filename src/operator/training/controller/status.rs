//! Writing a job's status: once per change, and never from a cache that has not shown the
//! operator's own last write yet.
//!
//! # Expected flow
//! A reconcile computes the status from the job in the watch cache. If the cache still holds
//! the version of the job that the operator's last status write replaced, everything computed
//! from it is out of date: the reconcile stops before acting, and the watch event of that
//! write, which is on its way, starts the next one. Otherwise a status that differs from the
//! cached one is written, with the resourceVersion it was computed from.
//!
//! # Guarantees
//! - A stale cache costs no request. Writing from it would be refused with 409 (the
//!   resourceVersion is old) and retried: at 1,000 jobs, a write and a reconcile wasted each
//!   time a pod's watch event overtook the job's.
//! - The write is still conditional on the resourceVersion, so a change by another writer
//!   (a user suspending the job) turns into a conflict and a retry, never into a lost update.
//! - A write that changed nothing on the server (same resourceVersion, no watch event) is not
//!   remembered, so it never holds a job back.
//! - Memory: one entry per job between a status write and the reconcile that sees it.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::{Api, ResourceExt};

use super::{Context, ReconcileError};
use crate::operator::runtime::lock;
use crate::operator::runtime::writes::replace_status;
use crate::operator::training::api::JobStatus;
use crate::operator::training::framework::TrainingJob;

/// Per job (namespace, name), the resourceVersion its last status write replaced.
#[derive(Default)]
pub(super) struct Written {
    replaced: Mutex<HashMap<(String, String), String>>,
}

impl Written {
    /// Whether `job`, as cached, is the version the operator's last status write replaced.
    pub(super) fn is_stale<J: TrainingJob>(&self, job: &J, namespace: &str) -> bool {
        let key = (namespace.to_owned(), job.name_any());
        let mut replaced = lock(&self.replaced);
        let Some(version) = replaced.get(&key) else {
            return false;
        };
        if job.resource_version().as_ref() == Some(version) {
            return true;
        }
        // The cache has moved past the write: nothing to remember any more.
        replaced.remove(&key);
        false
    }

    /// The job is gone: forget its last write.
    pub(super) fn forget(&self, namespace: &str, name: &str) {
        lock(&self.replaced).remove(&(namespace.to_owned(), name.to_owned()));
    }

    fn wrote(&self, namespace: &str, name: &str, replaced_version: String) {
        lock(&self.replaced).insert((namespace.to_owned(), name.to_owned()), replaced_version);
    }
}

/// Write `status` to the job's status subresource if it differs from the cached one.
pub(super) async fn write<J: TrainingJob>(
    job: &J,
    ctx: &Context,
    namespace: &str,
    status: &JobStatus,
) -> Result<(), ReconcileError> {
    let old = job.status().cloned().unwrap_or_default();
    if *status == old {
        return Ok(());
    }
    let name = job.name_any();
    let mut updated = job.clone();
    *updated.status_mut() = Some(status.clone());
    let api: Api<J> = Api::namespaced(ctx.client.clone(), namespace);
    let stored =
        replace_status(&api, &updated)
            .await
            .map_err(|source| ReconcileError::WriteStatus {
                kind: J::FRAMEWORK.kind,
                namespace: namespace.to_owned(),
                name: name.clone(),
                source,
            })?;
    // A write the server found to change nothing keeps the resourceVersion and sends no watch
    // event: remembering it would leave the job waiting for a cache update that never comes.
    if let Some(version) = job.resource_version()
        && stored.resource_version().as_ref() != Some(&version)
    {
        ctx.written.wrote(namespace, &name, version);
    }
    if let Some(condition) = status.conditions.last()
        && old.conditions.last() != Some(condition)
    {
        let reason = condition.reason.as_deref().unwrap_or("");
        let message = condition.message.as_deref().unwrap_or("");
        if condition.type_ == "Failed" {
            tracing::warn!(condition = %condition.type_, reason, "job failed: {message}");
        } else {
            tracing::info!(condition = %condition.type_, reason, "status");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::training::fixtures::job;

    #[test]
    fn a_job_is_stale_while_the_cache_shows_the_version_the_last_write_replaced() {
        let written = Written::default();
        let mut cached = job("mnist").replica("Worker", 2).build();
        cached.metadata.resource_version = Some("7".into());
        assert!(!written.is_stale(&cached, "ns"), "never written");

        written.wrote("ns", "mnist", "7".into());
        assert!(written.is_stale(&cached, "ns"));
        assert!(
            !written.is_stale(&cached, "other"),
            "a job of the same name elsewhere"
        );

        cached.metadata.resource_version = Some("8".into());
        assert!(!written.is_stale(&cached, "ns"), "the cache saw the write");
        cached.metadata.resource_version = Some("7".into());
        assert!(
            !written.is_stale(&cached, "ns"),
            "once seen, the write is forgotten"
        );
    }

    #[test]
    fn a_gone_job_is_forgotten() {
        let written = Written::default();
        written.wrote("ns", "mnist", "7".into());
        written.forget("ns", "mnist");
        assert!(lock(&written.replaced).is_empty());
    }
}
