//! Tests on the real nodes: `MLKUBE_CLUSTER_NODE=real cluster/local-cluster.sh up`, where
//! containers really run (on each of two nodes or more, containerd, a kubelet, kube-proxy and
//! flannel in a network namespace of its own), from the images `image/node-images.sh` builds,
//! which the nodes pull from the cluster's registry.
//!
//! What only a real kubelet shows is proved here: the operator running in-cluster from its
//! image as its ServiceAccount (in-cluster config, probes), real training jobs reading the
//! environment the operator injects over cluster DNS, real exit codes, OOM kills and crash loops,
//! container logs through `mlkube logs`, the notebook hub spawning a notebook on a volume of
//! its user's, claims of the default StorageClass, the object store keeping its objects, and
//! the gateway splitting requests from the host by an HTTPRoute's weights, `mlkube images push`
//! putting an image into the registry the nodes pull from with its archive's digest, KServe's
//! InferenceService served by the operator (a canary that follows readiness) and driven by
//! KServe's own Python SDK, a second app that shares the first one's operator and gateway; and
//! what only several nodes show: distributed training across two nodes, pulls from the registry.
//!
//! One test binary, one module per area. Every test shares one platform (`platform.rs`): the
//! default app's `local` environment with the operator, applied once by `mlkube apply`. The
//! drain of a node (`drain.rs`) would evict the others' pods: it is ignored here and runs alone,
//! `cargo test --test real_node -- --ignored drain`.

mod drain;
mod failures;
mod framework;
mod gateway;
mod gateway_retry;
mod hub;
mod images;
mod inference;
mod inference_app;
mod jobs;
mod kserve_sdk;
mod model_keys;
mod models;
mod mpi;
mod network;
mod operators;
mod platform;
mod pytorch;
mod registry;
mod remote;
mod second_app;
mod serving;
mod serving_paths;
mod spread;
mod storage;
mod story;
mod stuck;
#[path = "../cluster/support.rs"]
#[allow(dead_code)]
mod support;
mod sweeps;
mod training;
mod volume_nodes;
mod volume_support;
mod volumes;
