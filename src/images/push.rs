//! A push: which images a registry lacks ([`plan`]: every destination asked before anything is
//! written), then their copies, one at a time ([`push`]).

use super::registry::Registry;
use super::{Image, ImagesError};
use crate::render::images::ImageRegistry;

/// One image of a push: where it goes, and what the registry has there now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    pub image: Image,
    /// `<registry>/<path>/<name>:<tag>`.
    pub destination: String,
    /// The digest of the manifest the registry has at the destination, if any.
    pub present: Option<String>,
}

impl Planned {
    /// Whether the registry already has the archive's manifest there.
    pub fn up_to_date(&self) -> bool {
        self.present.as_deref() == Some(self.image.digest.as_str())
    }
}

/// What a push reports as it goes.
#[derive(Debug)]
pub enum Progress<'a> {
    /// The copy of the `index`th image (from 1) of `total` starts.
    Pushing {
        index: usize,
        total: usize,
        planned: &'a Planned,
    },
    /// It ended, and the registry has the manifest `digest` there.
    Pushed {
        planned: &'a Planned,
        digest: &'a str,
    },
    /// The registry had it already: nothing was copied.
    UpToDate { planned: &'a Planned },
}

/// How many images a push copied, and how many the registry had already.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    pub pushed: usize,
    pub up_to_date: usize,
}

/// Each image with its destination under `to` and what `registry` has there; the first
/// question the registry does not answer fails the whole plan, before anything is written.
pub fn plan(
    images: Vec<Image>,
    to: &ImageRegistry,
    registry: &dyn Registry,
) -> Result<Vec<Planned>, ImagesError> {
    images
        .into_iter()
        .map(|image| {
            let destination = to.image(&image.name, &image.tag);
            let present = registry
                .digest(&destination)
                .map_err(|source| ImagesError::Inspect {
                    reference: destination.clone(),
                    source,
                })?;
            Ok(Planned {
                image,
                destination,
                present,
            })
        })
        .collect()
}

/// Copy each planned image the registry does not have yet, in order, telling `report` as each
/// starts and ends; the first copy that fails stops the push.
pub fn push(
    plan: &[Planned],
    registry: &dyn Registry,
    report: &mut dyn FnMut(Progress<'_>),
) -> Result<Summary, ImagesError> {
    let mut summary = Summary::default();
    for (index, planned) in plan.iter().enumerate() {
        if planned.up_to_date() {
            report(Progress::UpToDate { planned });
            summary.up_to_date += 1;
            continue;
        }
        let total = plan.len();
        report(Progress::Pushing {
            index: index + 1,
            total,
            planned,
        });
        let digest = registry
            .copy(&planned.image.archive, &planned.destination)
            .map_err(|source| ImagesError::Copy {
                reference: planned.destination.clone(),
                source,
            })?;
        report(Progress::Pushed {
            planned,
            digest: &digest,
        });
        summary.pushed += 1;
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    use super::{Progress, Summary, plan, push};
    use crate::images::Image;
    use crate::images::registry::{Registry, RegistryError};
    use crate::render::images::ImageRegistry;

    /// A registry in memory: its manifests' digests by reference, and the copies asked of it.
    #[derive(Default)]
    struct Memory {
        manifests: RefCell<BTreeMap<String, String>>,
        /// A reference it refuses to answer for.
        down: Option<&'static str>,
        copies: RefCell<Vec<String>>,
    }

    impl Registry for Memory {
        fn digest(&self, reference: &str) -> Result<Option<String>, RegistryError> {
            if self.down.is_some_and(|down| reference.contains(down)) {
                return Err(RegistryError::Refused {
                    message: "connection refused".into(),
                    hint: None,
                });
            }
            Ok(self.manifests.borrow().get(reference).cloned())
        }

        fn copy(&self, archive: &Path, reference: &str) -> Result<String, RegistryError> {
            // The archive's name stands for its manifest's digest here.
            let digest = format!("sha256:{}", archive.display());
            self.copies.borrow_mut().push(reference.to_owned());
            self.manifests
                .borrow_mut()
                .insert(reference.to_owned(), digest.clone());
            Ok(digest)
        }
    }

    fn image(name: &str, digest: &str) -> Image {
        Image {
            name: name.into(),
            tag: "0.1.0".into(),
            reference: format!("docker.io/mlkube/{name}:0.1.0"),
            archive: PathBuf::from(digest),
            size: 1,
            digest: format!("sha256:{digest}"),
        }
    }

    fn to() -> ImageRegistry {
        ImageRegistry::parse("127.0.0.1:5000/mlkube").unwrap()
    }

    #[test]
    fn an_image_the_registry_has_with_the_same_manifest_is_not_copied_again() {
        let registry = Memory::default();
        registry.manifests.borrow_mut().extend([
            (
                "127.0.0.1:5000/mlkube/busybox:0.1.0".into(),
                "sha256:b1".into(),
            ),
            (
                "127.0.0.1:5000/mlkube/serving:0.1.0".into(),
                "sha256:old".into(),
            ),
        ]);
        let images = vec![
            image("busybox", "b1"),
            image("serving", "s2"),
            image("training", "t3"),
        ];
        let planned = plan(images, &to(), &registry).unwrap();
        let up_to_date: Vec<bool> = planned.iter().map(|p| p.up_to_date()).collect();
        assert_eq!(up_to_date, [true, false, false]);
        assert!(
            registry.copies.borrow().is_empty(),
            "planning writes nothing"
        );

        let mut said = Vec::new();
        let summary = push(&planned, &registry, &mut |progress| {
            said.push(match progress {
                Progress::Pushing {
                    index,
                    total,
                    planned,
                } => {
                    format!("pushing {index}/{total} {}", planned.image.name)
                }
                Progress::Pushed { planned, digest } => {
                    format!("pushed {}@{digest}", planned.destination)
                }
                Progress::UpToDate { planned } => format!("up to date {}", planned.destination),
            })
        })
        .unwrap();
        assert_eq!(
            summary,
            Summary {
                pushed: 2,
                up_to_date: 1
            }
        );
        assert_eq!(
            said,
            [
                "up to date 127.0.0.1:5000/mlkube/busybox:0.1.0",
                "pushing 2/3 serving",
                "pushed 127.0.0.1:5000/mlkube/serving:0.1.0@sha256:s2",
                "pushing 3/3 training",
                "pushed 127.0.0.1:5000/mlkube/training:0.1.0@sha256:t3",
            ]
        );
        // A second push finds everything there.
        let again = plan(vec![image("serving", "s2")], &to(), &registry).unwrap();
        assert!(again[0].up_to_date());
    }

    #[test]
    fn a_registry_that_does_not_answer_fails_the_plan_before_any_copy() {
        let registry = Memory {
            down: Some("training"),
            ..Memory::default()
        };
        let images = vec![image("busybox", "b1"), image("training", "t3")];
        let error = plan(images, &to(), &registry).unwrap_err();
        assert_eq!(
            error.to_string(),
            "cannot ask the registry for 127.0.0.1:5000/mlkube/training:0.1.0"
        );
        assert!(registry.copies.borrow().is_empty());
    }
}
