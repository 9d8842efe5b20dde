//! Rendering: the Jsonnet evaluator with the embedded component library, the processing of
//! rendered objects into a complete, ordered [`manifest::Manifest`], its YAML, and the one table
//! of kinds and apply tiers ([`kinds`]) that `show`, `apply` and `delete` all use, and the
//! platform's images with the rewrite that points an environment at its registry ([`images`]).
//!
//! The app layer drives it (`App::render`); the deploy layer sees only the manifest. Nothing
//! here touches the network or the clock.

pub mod images;
pub mod jsonnet;
pub mod kinds;
pub mod library;
pub mod locate;
pub mod manifest;
pub mod yaml;
