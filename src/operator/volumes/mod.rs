//! The volume controller: Kubeflow's KVC `VolumeManager` (`kvc.kubeflow.org/v1`), run by
//! `mlkube operator --controllers volumes`. It places each `volumeConfigs` entry's data on
//! nodes and reports in the status how a pod reads it.
//!
//! `api` holds the types, `checks` says whether an entry may be placed at all, `source` reads
//! a volume's source from its entry, `nodes` says which nodes may hold a volume's data, `pods`
//! builds the pods that place and remove data (they run
//! mlkube's own binary: `fetch` is the S3 fetcher they run), `plan` decides (pure), and
//! `controller` watches and carries the plan out on the runtime every controller shares.

pub mod api;
pub mod checks;
pub mod controller;
pub mod fetch;
pub mod nodes;
pub mod plan;
pub mod pods;
pub mod source;
