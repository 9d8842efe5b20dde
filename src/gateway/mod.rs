//! The gateway component's own processes, run from the mlkube image beside Traefik.
//!
//! - [`routes`]: `mlkube gateway-routes`, the Gateway's HTTPRoutes as Traefik's configuration.
//! - [`fallback`]: `mlkube gateway-fallback`, the 404 for a path no route takes.

pub mod fallback;
pub mod routes;
