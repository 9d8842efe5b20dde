//! MX_CONFIG: the whole job's layout as one JSON document, upstream's format byte for byte:
//! `{"cluster":{<type>:[{"url":..,"port":..}]},"labels":{<type>:..},"task":{"type":..,"index":..}}`
//! with lower-case replica types as sorted keys, bare service names as urls, each type's
//! `mxjob-port`, and as each type's label its pod template's `tuner-server-key` annotation.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{MXJob, MXNET};
use crate::operator::training::engine::build;
use crate::operator::training::framework::{Placement, ReplicaType, TrainingJob};

/// The environment variable MXNet's tuning scripts read.
pub const ENV_NAME: &str = "MX_CONFIG";

/// The pod template annotation whose value becomes the replica type's label.
const TUNER_SERVER_KEY: &str = "tuner-server-key";

#[derive(Serialize)]
pub struct MxConfig {
    cluster: BTreeMap<&'static str, Vec<Address>>,
    labels: BTreeMap<&'static str, String>,
    task: Task,
}

#[derive(Serialize, Clone, Default)]
pub struct Address {
    pub url: String,
    pub port: i32,
}

#[derive(Serialize)]
struct Task {
    #[serde(rename = "type")]
    type_: &'static str,
    index: i32,
}

impl MxConfig {
    pub fn of(job: &MXJob, placement: &Placement<'_>, rtype: ReplicaType, index: i32) -> MxConfig {
        let mut cluster = BTreeMap::new();
        let mut labels = BTreeMap::new();
        for (t, replica) in job.replicas() {
            let port = MXNET.port_of(replica);
            let addresses = (0..job.replicas_of(t).unwrap_or(0))
                .map(|i| Address {
                    url: build::name(placement.job, t, i),
                    port,
                })
                .collect();
            cluster.insert(t.lower(), addresses);
            let label = replica
                .template
                .metadata
                .as_ref()
                .and_then(|m| m.annotations.as_ref())
                .and_then(|a| a.get(TUNER_SERVER_KEY))
                .cloned()
                .unwrap_or_default();
            labels.insert(t.lower(), label);
        }
        MxConfig {
            cluster,
            labels,
            task: Task {
                type_: rtype.lower(),
                index,
            },
        }
    }

    /// Replica `index` of `rtype`, or an empty url and port 0 when there is none.
    pub fn address(&self, rtype: ReplicaType, index: usize) -> Address {
        self.cluster
            .get(rtype.lower())
            .and_then(|addresses| addresses.get(index))
            .cloned()
            .unwrap_or_default()
    }

    /// How many replicas of `rtype` the job has.
    pub fn count(&self, rtype: ReplicaType) -> usize {
        self.cluster.get(rtype.lower()).map_or(0, Vec::len)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("MX_CONFIG serialises to JSON")
    }
}
