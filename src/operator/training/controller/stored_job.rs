//! A job as the operator's cache keeps it: its metadata, and the rest of it as JSON, read back
//! into the framework's type for each reconcile. A TFJob's pod templates are k8s-openapi
//! structs with a slot for every field of a pod spec and of each container, about 4 KB a
//! replica type before any of their strings; the JSON of the same job is a few hundred bytes.
//! At 10,000 jobs the typed cache was most of the operator's memory.
//!
//! # Guarantees
//! - A job is read from the watch as the framework's type first, so a job the type cannot
//!   read is refused by the watch as before.
//! - `job()` gives back the job as it was read, metadata included (what the watch's `modify`
//!   removed from the metadata aside).

use std::borrow::Cow;
use std::marker::PhantomData;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};

use crate::operator::training::framework::TrainingJob;

#[derive(Clone, Debug)]
pub struct StoredJob<J> {
    metadata: ObjectMeta,
    /// The job without its metadata, as JSON.
    rest: Box<str>,
    framework: PhantomData<fn() -> J>,
}

impl<J: TrainingJob> StoredJob<J> {
    pub fn new(job: &J) -> serde_json::Result<Self> {
        let mut rest = serde_json::to_value(job)?;
        if let Some(fields) = rest.as_object_mut() {
            fields.remove("metadata");
        }
        Ok(StoredJob {
            metadata: job.meta().clone(),
            rest: rest.to_string().into_boxed_str(),
            framework: PhantomData,
        })
    }

    /// The job, as the framework's type.
    pub fn job(&self) -> serde_json::Result<J> {
        let mut job: serde_json::Value = serde_json::from_str(&self.rest)?;
        if let Some(fields) = job.as_object_mut() {
            fields.insert("metadata".into(), serde_json::to_value(&self.metadata)?);
        }
        serde_json::from_value(job)
    }
}

impl<'de, J: TrainingJob> Deserialize<'de> for StoredJob<J> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let job = J::deserialize(deserializer)?;
        StoredJob::new(&job).map_err(D::Error::custom)
    }
}

impl<J: TrainingJob> Resource for StoredJob<J> {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        J::kind(&())
    }
    fn group(_: &()) -> Cow<'_, str> {
        J::group(&())
    }
    fn version(_: &()) -> Cow<'_, str> {
        J::version(&())
    }
    fn plural(_: &()) -> Cow<'_, str> {
        J::plural(&())
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::training::frameworks::pytorch::PyTorchJob;
    use crate::operator::training::frameworks::tensorflow::TFJob;
    use serde_json::json;

    fn served() -> serde_json::Value {
        json!({
            "apiVersion": "kubeflow.org/v1", "kind": "TFJob",
            "metadata": { "name": "mnist", "namespace": "ml", "uid": "u1",
                          "resourceVersion": "9", "labels": { "team": "vision" } },
            "spec": {
                "runPolicy": { "cleanPodPolicy": "None", "backoffLimit": 3 },
                "tfReplicaSpecs": {
                    "Worker": { "replicas": 3, "restartPolicy": "OnFailure", "template": {
                        "metadata": { "annotations": { "a": "b" } },
                        "spec": { "containers": [{
                            "name": "tensorflow", "image": "tf:2",
                            "env": [{ "name": "X", "value": "1" }],
                            "resources": { "limits": { "nvidia.com/gpu": "1" } },
                        }] },
                    } },
                },
            },
            "status": {
                "conditions": [{ "type": "Created", "status": "True", "reason": "TFJobCreated",
                                 "lastTransitionTime": "2026-11-23T09:00:00Z" }],
                "replicaStatuses": { "Worker": { "active": 2 } },
                "startTime": "2026-11-23T09:00:00Z",
            },
        })
    }

    #[test]
    fn a_stored_job_reads_back_as_the_job_it_was_read_from() {
        let job: TFJob = serde_json::from_value(served()).unwrap();
        let stored: StoredJob<TFJob> = serde_json::from_value(served()).unwrap();
        assert_eq!(
            serde_json::to_value(stored.job().unwrap()).unwrap(),
            serde_json::to_value(&job).unwrap()
        );
        assert_eq!(stored.meta(), job.meta());
    }

    #[test]
    fn what_the_metadata_lost_in_the_cache_is_lost_in_the_job_too() {
        let mut stored: StoredJob<TFJob> = serde_json::from_value(served()).unwrap();
        stored.meta_mut().labels = None;
        assert_eq!(stored.job().unwrap().meta().labels, None);
    }

    #[test]
    fn a_job_its_type_cannot_read_is_refused_as_before() {
        let mut bad = served();
        bad["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = json!("three");
        assert!(serde_json::from_value::<TFJob>(bad.clone()).is_err());
        assert!(serde_json::from_value::<StoredJob<TFJob>>(bad).is_err());
    }

    #[test]
    fn a_stored_job_is_watched_at_its_framework_s_path() {
        assert_eq!(StoredJob::<TFJob>::kind(&()), "TFJob");
        assert_eq!(
            StoredJob::<PyTorchJob>::url_path(&(), Some("ml")),
            "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs"
        );
    }
}
