//! The gateway component's own processes, run from the mlkube image beside Traefik.
//!
//! - [`fallback`]: `mlkube gateway-fallback`, the 404 for a path no route takes.

pub mod fallback;
