//! Tests on the real node: `MLKUBE_CLUSTER_NODE=real cluster/local-cluster.sh up`, where
//! containers really run (containerd, a kubelet, kube-proxy and CoreDNS in the cluster's network
//! namespace), from the images `image/node-images.sh` builds and the cluster imports.
//!
//! What only a real kubelet shows is proved here: the operator running in-cluster from its
//! image as its ServiceAccount (in-cluster config, probes), real training jobs reading the
//! environment the operator injects over cluster DNS, real exit codes, OOM kills and crash loops,
//! container logs through `mlkube logs`, the notebook hub spawning a notebook on a volume of
//! its user's, claims of the default StorageClass, the object store keeping its objects, and
//! the gateway splitting requests from the host by an HTTPRoute's weights.
//!
//! One test binary, one module per area. Every test shares one platform (`platform.rs`): the
//! default app's `local` environment with the operator, applied once by `mlkube apply`.

mod failures;
mod framework;
mod gateway;
mod hub;
mod jobs;
mod models;
mod mpi;
mod network;
mod operators;
mod platform;
mod pytorch;
mod serving;
mod storage;
mod stuck;
#[path = "../cluster/support.rs"]
#[allow(dead_code)]
mod support;
mod sweeps;
mod training;
mod volume_nodes;
mod volumes;
