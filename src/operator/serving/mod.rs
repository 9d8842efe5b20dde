//! KServe's InferenceService (`serving.kserve.io/v1beta1`) in raw-deployment mode, run by
//! `mlkube operator --controllers serving`: a model on a runtime picked from the
//! (Cluster)ServingRuntimes as KServe picks it, revisions of Deployments and Services, an
//! HTTPRoute on the platform's Gateway with KServe's host names, and a canary that gets its
//! share only while it is ready, decided again whenever a revision's readiness changes.
//!
//! `api` holds the types, `select` picks the runtime, `predictor` builds a revision's pod,
//! `objects` the objects that serve it, `traffic` decides where requests go, `status` says it
//! in KServe's shape (all four pure), `controller` watches, `carry` carries one reconcile
//! out, and `context` is what its steps share (caches, client, the writes they make).

pub mod api;
pub mod carry;
pub mod context;
pub mod controller;
pub mod objects;
pub mod predictor;
pub mod select;
pub mod status;
pub mod traffic;
