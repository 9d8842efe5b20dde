//! Whether what was applied is well: the wait until it is healthy ([`wait`]), and why a pod
//! does not run, in words a user can act on ([`blocked`]).
//!
//! Above the cluster seam only; beside the checks before a write, which it does not use.
//! `logs` and a sweep's notes ([`crate::observe`]) say why a pod is blocked through it too.

pub mod answer;
pub mod blocked;
pub mod wait;
