//! `mlkube images`: the platform's images as the mlkube checkout builds them, and their copy
//! into any registry, from which a cluster of the user's pulls them (an environment's
//! `imageRegistry` points its manifests there: [`crate::render::images`]).
//!
//! Expected flow: [`source::checkout`] finds the checkout; [`source::build`] runs its
//! `image/node-images.sh`, which builds only what changed, and reads each image it prints with
//! the digest of its OCI archive's manifest ([`archive`]); [`push::plan`] asks the registry
//! ([`registry::Registry`], by skopeo) what it has at each destination; [`push::push`] copies
//! the images it lacks, one at a time, and reports each as it starts and ends.
//!
//! Guarantees: every destination is asked before anything is written, so a registry that does
//! not answer, speaks plain HTTP to an HTTPS client or refuses the credentials fails the push
//! before its first copy. An image the registry has with the archive's manifest digest is not
//! copied again. The copy keeps the manifest as built (skopeo's `--preserve-digests`), so the
//! registry reports the archive's digest.
//!
//! Caveats: building (which `list` and a dry run do too) writes the local image cache; a dry
//! run writes nothing to the registry. The registry is asked by tag: an image pushed there by
//! someone else between the question and the copy is overwritten.
//!
//! It uses the render layer for the platform's image names and the `<registry>/<path>` of a
//! destination; nothing below the command line uses it.

pub mod archive;
pub mod push;
pub mod registry;
pub mod source;

use std::path::PathBuf;

/// A platform image as `image/node-images.sh` built it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// One of [`crate::render::images::PLATFORM`].
    pub name: String,
    pub tag: String,
    /// The reference it was built as: `docker.io/mlkube/<name>:<tag>`.
    pub reference: String,
    /// Its OCI archive.
    pub archive: PathBuf,
    /// The archive's size in bytes.
    pub size: u64,
    /// The digest of its manifest: `sha256:<hex>`.
    pub digest: String,
}

/// Why the images could not be built, read or pushed.
#[derive(Debug, thiserror::Error)]
pub enum ImagesError {
    #[error(
        "no {} in {}{}\nhint: run mlkube images in the mlkube checkout, or pass --source DIR (or \
         set MLKUBE_SOURCE) naming it",
        source::SCRIPT,
        list(tried),
        if *above { " or a folder above" } else { "" }
    )]
    NoCheckout { tried: Vec<PathBuf>, above: bool },
    #[error("cannot run {}", script.display())]
    Run {
        script: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} failed ({status}); its messages above say why", script.display())]
    Build { script: PathBuf, status: String },
    #[error(
        "{} printed `{line}`, which is not `docker.io/mlkube/<name>:<tag> <archive>` of a \
         platform image", script.display()
    )]
    Output { script: PathBuf, line: String },
    #[error("{} printed no image {name}", script.display())]
    NotBuilt { script: PathBuf, name: String },
    #[error("cannot read the OCI archive {}", path.display())]
    Archive {
        path: PathBuf,
        #[source]
        source: archive::ArchiveError,
    },
    #[error(
        "skopeo is not on PATH; it copies the images into the registry\nhint: install it: apt-get install skopeo"
    )]
    SkopeoMissing,
    #[error("cannot ask the registry for {reference}")]
    Inspect {
        reference: String,
        #[source]
        source: registry::RegistryError,
    },
    #[error("cannot push {reference}")]
    Copy {
        reference: String,
        #[source]
        source: registry::RegistryError,
    },
}

/// `a`, `a or b`, `a, b or c`: the directories tried.
fn list(dirs: &[PathBuf]) -> String {
    let names: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    }
}
