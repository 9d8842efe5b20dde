//! Where the platform's images come from: the mlkube checkout's `image/node-images.sh`, which
//! builds only what changed and prints one line per image, `<reference> <archive>`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{Image, ImagesError, archive};
use crate::render::images::{HOME, PLATFORM};

/// The script that builds the images, relative to the checkout.
pub const SCRIPT: &str = "image/node-images.sh";

/// The checkout to build in: `explicit` (`--source` or `$MLKUBE_SOURCE`), which must have the
/// script, else the nearest folder that has it at or above one of `fallbacks` (the current
/// directory, the running binary's folder), in that order.
pub fn checkout(explicit: Option<&Path>, fallbacks: &[&Path]) -> Result<PathBuf, ImagesError> {
    let has_script = |dir: &Path| dir.join(SCRIPT).is_file();
    let (tried, found) = match explicit {
        Some(dir) => (vec![dir], has_script(dir).then_some(dir)),
        None => {
            let mut above = fallbacks.iter().flat_map(|dir| dir.ancestors());
            (fallbacks.to_vec(), above.find(|dir| has_script(dir)))
        }
    };
    found
        .map(Path::to_path_buf)
        .ok_or_else(|| ImagesError::NoCheckout {
            tried: tried.iter().map(|dir| dir.to_path_buf()).collect(),
            above: explicit.is_none(),
        })
}

/// Run the checkout's script for `names` (every image when empty), which builds what is
/// missing, its progress on our stderr; then read each image it printed.
pub fn build(checkout: &Path, names: &[String]) -> Result<Vec<Image>, ImagesError> {
    let script = checkout.join(SCRIPT);
    let output = Command::new("bash")
        .arg(&script)
        .args(names)
        .current_dir(checkout)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|source| ImagesError::Run {
            script: script.clone(),
            source,
        })?;
    if !output.status.success() {
        return Err(ImagesError::Build {
            script,
            status: output.status.to_string(),
        });
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let images = stdout
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| image(line, checkout, &script))
        .collect::<Result<Vec<Image>, ImagesError>>()?;
    match names
        .iter()
        .find(|name| !images.iter().any(|i| &&i.name == name))
    {
        Some(name) => Err(ImagesError::NotBuilt {
            script,
            name: name.clone(),
        }),
        None => Ok(images),
    }
}

/// The image of one line of the script's output: a platform image's reference and its archive
/// (relative to the checkout when not absolute).
fn image(line: &str, checkout: &Path, script: &Path) -> Result<Image, ImagesError> {
    let unexpected = || ImagesError::Output {
        script: script.to_owned(),
        line: line.to_owned(),
    };
    let (reference, archive) = line.trim().split_once(' ').ok_or_else(unexpected)?;
    let short = reference
        .strip_prefix(HOME)
        .and_then(|rest| rest.strip_prefix('/'))
        .ok_or_else(unexpected)?;
    let (name, tag) = short.split_once(':').ok_or_else(unexpected)?;
    if !PLATFORM.contains(&name) || tag.is_empty() {
        return Err(unexpected());
    }
    let archive = checkout.join(archive.trim());
    let read_error = |source| ImagesError::Archive {
        path: archive.clone(),
        source,
    };
    let size = std::fs::metadata(&archive)
        .map_err(|e| read_error(archive::ArchiveError::Read(e)))?
        .len();
    let digest = archive::manifest_digest(&archive).map_err(read_error)?;
    Ok(Image {
        name: name.to_owned(),
        tag: tag.to_owned(),
        reference: reference.to_owned(),
        archive,
        size,
        digest,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{SCRIPT, checkout};

    #[test]
    fn the_checkout_is_the_one_named_else_the_first_that_has_the_script() {
        let tmp = tempfile::tempdir().unwrap();
        let with = tmp.path().join("has-script");
        let without = tmp.path().join("no-script");
        std::fs::create_dir_all(with.join("image")).unwrap();
        std::fs::write(with.join(SCRIPT), "").unwrap();
        std::fs::create_dir_all(&without).unwrap();
        assert_eq!(checkout(None, &[&without, &with]).unwrap(), with);
        assert_eq!(checkout(Some(&with), &[&without]).unwrap(), with);
        // A checkout that is named must have it: no other is tried.
        let error = checkout(Some(&without), &[&with]).unwrap_err().to_string();
        assert!(error.contains(&without.display().to_string()), "{error}");
        assert!(!error.contains(&with.display().to_string()), "{error}");
        let none: [&Path; 0] = [];
        assert!(checkout(None, &none).is_err());
    }
}
