//! The platform's images, and the registry an environment pulls them from.
//!
//! `image/node-images.sh` builds the platform's images ([`PLATFORM`]) as
//! `docker.io/mlkube/<name>:<tag>`, and the components, the job prototypes and the operator name
//! them so, or as `mlkube/<name>:<tag>` for short. An environment's `imageRegistry`
//! ([`ImageRegistry`], e.g. `127.0.0.1:18445/mlkube`) points every one of them at another
//! registry, where `mlkube images push` put them: `<imageRegistry>/<name>:<tag>`.
//!
//! Why a rewrite of the rendered objects rather than a parameter threaded through every
//! prototype: the rewrite ([`rewrite`]) runs once over everything an environment renders, so it
//! reaches every place an image is named (containers and init containers of any kind, a
//! Framework's task roles, the images the operator is told to use for the pods it creates, as
//! `--volume-image` or `--mpi-kubectl-delivery-image`, the notebook images in the hub's
//! settings.json) in hand-written components and in prototypes not written yet alike, none of
//! which has to remember it. A reference is rewritten where it stands as a whole word: a string
//! that is the reference, or that holds it between characters no reference has
//! (`--flag=<ref>`, `"<ref>"` in JSON text). Any other image (`python:3.12`,
//! `registry.example.com/team/model:1`, `tensorflow/serving:2.18.0`) is left as it is. An image
//! the operator would otherwise use without the manifest naming it is named by its prototype
//! (training-operator passes `--mpi-kubectl-delivery-image` whenever it runs MPIJobs), so it is
//! rewritten too.
//!
//! Pure: no network, no files.

use std::fmt;

use serde_json::Value;

/// The platform's images, by name, as `image/node-images.sh` builds them.
pub const PLATFORM: [&str; 10] = [
    "pause",
    "mlkube",
    "training",
    "notebook-hub",
    "kubectl-delivery",
    "busybox",
    "object-store",
    "dnsutils",
    "serving",
    "gateway",
];

/// Where the platform's images are named today: Docker Hub's `mlkube/` repositories.
pub const HOME: &str = "docker.io/mlkube";

/// The short spelling of [`HOME`], as the components write it.
const SHORT: &str = "mlkube/";

/// What [`HOME`] has before [`SHORT`]: Docker Hub, the registry of a name without one.
const DOCKER_HUB: &str = "docker.io/";

/// A registry and a path in it, where the platform's images live as `<registry>/<path>/<name>:<tag>`:
/// `127.0.0.1:18445/mlkube`, `registry.example.com/team`. No scheme, no tag, no digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRegistry {
    /// `host[:port]`, the host in lowercase.
    host: String,
    /// The path after the host, without a leading or trailing `/`.
    path: String,
}

/// Why a text is not `<registry>/<path>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{given}` is not <registry>/<path>: {problem}\nhint: give a registry's host[:port] and a \
     path, without a scheme or tag, e.g. 127.0.0.1:5000/mlkube or registry.example.com/team"
)]
pub struct RegistryError {
    pub given: String,
    pub problem: String,
}

impl ImageRegistry {
    /// Read `host[:port]/path`, as `imageRegistry` and `mlkube images push` take it.
    pub fn parse(text: &str) -> Result<ImageRegistry, RegistryError> {
        let invalid = |problem: String| RegistryError {
            given: text.to_owned(),
            problem,
        };
        if let Some((scheme, _)) = text.split_once("://") {
            return Err(invalid(format!(
                "it has a scheme; drop `{scheme}://` (plain HTTP is a property of the registry, \
                 not of the name)"
            )));
        }
        if text.is_empty() || text.contains(char::is_whitespace) {
            return Err(invalid("it is empty or has spaces".into()));
        }
        if text.contains('@') {
            return Err(invalid("it has a digest; each image keeps its own".into()));
        }
        let Some((host, path)) = text.split_once('/') else {
            return Err(invalid(format!(
                "it names no path after the registry, e.g. {text}/mlkube"
            )));
        };
        host_problem(host).map_or(Ok(()), |p| Err(invalid(p)))?;
        path_problem(path).map_or(Ok(()), |p| Err(invalid(p)))?;
        Ok(ImageRegistry {
            host: host.to_ascii_lowercase(),
            path: path.to_owned(),
        })
    }

    /// `host[:port]`: what `skopeo login` takes.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The platform image `name:tag` in this registry.
    pub fn image(&self, name: &str, tag: &str) -> String {
        format!("{self}/{name}:{tag}")
    }
}

impl fmt::Display for ImageRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.host, self.path)
    }
}

impl std::str::FromStr for ImageRegistry {
    type Err = RegistryError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        ImageRegistry::parse(text)
    }
}

/// Why `host` is not a registry's `host[:port]`, or `None`.
fn host_problem(host: &str) -> Option<String> {
    let (name, port) = match host.split_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (host, None),
    };
    if port.is_some_and(|p| p.parse::<u16>().map_or(true, |p| p == 0)) {
        return Some(format!(
            "the port of `{host}` is not a number from 1 to 65535"
        ));
    }
    let labels_ok = !name.is_empty()
        && name.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if !labels_ok {
        return Some(format!("`{host}` is not a host name or address"));
    }
    // As Docker reads a name: its first part is a registry only when it looks like a host.
    if port.is_none() && !name.contains('.') && name != "localhost" {
        return Some(format!(
            "`{host}` is not a registry (a registry's host has a dot or a port, or is \
             localhost); for Docker Hub write docker.io/{host}"
        ));
    }
    None
}

/// Why `path` is not a repository path (lowercase parts joined by `/`), or `None`.
fn path_problem(path: &str) -> Option<String> {
    if path.is_empty() || path.ends_with('/') {
        return Some("the path after the registry is empty or ends with `/`".into());
    }
    if path.contains(':') {
        return Some("it has a tag; each image keeps its own".into());
    }
    for part in path.split('/') {
        let bytes = part.as_bytes();
        let ok = !bytes.is_empty()
            && bytes[0].is_ascii_alphanumeric()
            && bytes[bytes.len() - 1].is_ascii_alphanumeric()
            && bytes
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(b));
        if !ok {
            return Some(format!(
                "`{part}` in the path is not lowercase letters and digits joined by `.`, `_` \
                 or `-`"
            ));
        }
    }
    None
}

/// Point every platform image named anywhere in `value` at `registry`; gives how many
/// references it rewrote.
pub fn rewrite(value: &mut Value, registry: &ImageRegistry) -> usize {
    match value {
        Value::String(text) => match rewrite_text(text, registry) {
            Some((rewritten, count)) => {
                *text = rewritten;
                count
            }
            None => 0,
        },
        Value::Array(items) => items.iter_mut().map(|v| rewrite(v, registry)).sum(),
        Value::Object(fields) => fields.values_mut().map(|v| rewrite(v, registry)).sum(),
        _ => 0,
    }
}

/// `text` with each platform image that stands in it as a whole word pointed at `registry`,
/// and how many; `None` when it names none.
pub fn rewrite_text(text: &str, registry: &ImageRegistry) -> Option<(String, usize)> {
    let mut out = String::new();
    let mut copied = 0;
    let mut count = 0;
    for (at, _) in text.match_indices(SHORT) {
        if at < copied {
            continue;
        }
        let Some(found) = platform_reference(text, at) else {
            continue;
        };
        out.push_str(&text[copied..found.start]);
        out.push_str(&format!("{registry}/{}{}", found.name, found.rest));
        copied = found.end;
        count += 1;
    }
    (count > 0).then(|| {
        out.push_str(&text[copied..]);
        (out, count)
    })
}

/// A platform image reference found in a text.
struct Found<'a> {
    /// Where it starts (at `docker.io/` when it is spelled so) and ends, in bytes.
    start: usize,
    end: usize,
    name: &'a str,
    /// What follows the name: `:tag`, `@digest` or both.
    rest: &'a str,
}

/// The platform image reference whose `mlkube/` is at `at` in `text`, if one stands there as a
/// whole word.
fn platform_reference(text: &str, at: usize) -> Option<Found<'_>> {
    let start = match text[..at].strip_suffix(DOCKER_HUB) {
        Some(before) => before.len(),
        None => at,
    };
    if text[..start].chars().next_back().is_some_and(in_reference) {
        return None;
    }
    let after = &text[at + SHORT.len()..];
    let name_len = after
        .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
        .unwrap_or(after.len());
    let name = &after[..name_len];
    if !PLATFORM.contains(&name) {
        return None;
    }
    let rest_len = tag_and_digest(&after[name_len..])?;
    let end = at + SHORT.len() + name_len + rest_len;
    if text[end..].chars().next().is_some_and(in_reference) {
        return None;
    }
    Some(Found {
        start,
        end,
        name,
        rest: &after[name_len..name_len + rest_len],
    })
}

/// The length of the `:tag`, `@digest` or `:tag@digest` at the start of `text`; `None` when
/// it has neither (a reference without them is not one of the images the platform builds).
fn tag_and_digest(text: &str) -> Option<usize> {
    let tag_len = match text.strip_prefix(':') {
        Some(tag) => {
            let len = tag
                .find(|c: char| !(c.is_ascii_alphanumeric() || "_.-".contains(c)))
                .unwrap_or(tag.len());
            (len > 0 && len <= 128).then_some(len + 1)?
        }
        None => 0,
    };
    let digest_len = match text[tag_len..].strip_prefix('@') {
        Some(digest) => {
            let (algorithm, hex) = digest.split_once(':')?;
            let hex_len = hex
                .find(|c: char| !c.is_ascii_hexdigit())
                .unwrap_or(hex.len());
            let algorithm_ok =
                !algorithm.is_empty() && algorithm.bytes().all(|b| b.is_ascii_alphanumeric());
            (algorithm_ok && hex_len >= 32).then_some(1 + algorithm.len() + 1 + hex_len)?
        }
        None => 0,
    };
    (tag_len + digest_len > 0).then_some(tag_len + digest_len)
}

/// Whether `c` can be part of an image reference, so that a reference next to it is not a
/// whole word.
fn in_reference(c: char) -> bool {
    c.is_ascii_alphanumeric() || "._-/:@".contains(c)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{ImageRegistry, rewrite, rewrite_text};

    fn registry() -> ImageRegistry {
        ImageRegistry::parse("127.0.0.1:18445/mlkube").unwrap()
    }

    fn rewritten(text: &str) -> String {
        rewrite_text(text, &registry()).map_or_else(|| text.to_owned(), |(t, _)| t)
    }

    #[test]
    fn a_registry_is_a_host_and_a_path() {
        for (given, shown) in [
            ("127.0.0.1:18445/mlkube", "127.0.0.1:18445/mlkube"),
            (
                "Registry.Example.com/team/ml",
                "registry.example.com/team/ml",
            ),
            ("localhost/mlkube", "localhost/mlkube"),
            ("docker.io/someone", "docker.io/someone"),
        ] {
            assert_eq!(ImageRegistry::parse(given).unwrap().to_string(), shown);
        }
        for (bad, problem) in [
            ("http://127.0.0.1:5000/mlkube", "scheme"),
            ("127.0.0.1:5000", "no path"),
            ("127.0.0.1:5000/", "empty"),
            ("127.0.0.1:5000/mlkube/", "ends with `/`"),
            ("127.0.0.1:5000/mlkube:0.1.0", "tag"),
            ("127.0.0.1:5000/mlkube@sha256:00", "digest"),
            ("someone/mlkube", "docker.io/someone"),
            ("127.0.0.1:99999/mlkube", "port"),
            ("registry.example.com/Team", "`Team`"),
            ("registry example.com/team", "spaces"),
            ("", "empty"),
        ] {
            let error = ImageRegistry::parse(bad).unwrap_err().to_string();
            assert!(error.contains(problem), "{bad}: {error}");
            assert!(error.contains("hint: "), "{bad}: {error}");
        }
    }

    #[test]
    fn platform_images_move_to_the_registry_and_others_stay() {
        for (before, after) in [
            (
                "mlkube/serving:0.1.0",
                "127.0.0.1:18445/mlkube/serving:0.1.0",
            ),
            (
                "docker.io/mlkube/training:0.1.0",
                "127.0.0.1:18445/mlkube/training:0.1.0",
            ),
            ("mlkube/mlkube:0.1.0", "127.0.0.1:18445/mlkube/mlkube:0.1.0"),
            (
                "--volume-image=mlkube/mlkube:0.1.0",
                "--volume-image=127.0.0.1:18445/mlkube/mlkube:0.1.0",
            ),
            (
                "{\"notebookImages\": [\"mlkube/notebook-hub:0.1.0\", \"jupyter/scipy-notebook:1\"]}",
                "{\"notebookImages\": [\"127.0.0.1:18445/mlkube/notebook-hub:0.1.0\", \"jupyter/scipy-notebook:1\"]}",
            ),
            (
                "mlkube/busybox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                "127.0.0.1:18445/mlkube/busybox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            ),
        ] {
            assert_eq!(rewritten(before), after, "{before}");
            // Once there, a second rewrite changes nothing.
            assert_eq!(rewritten(after), after, "{after}");
        }
        for untouched in [
            "python:3.12",
            "mlkube/serving",
            "mlkube/unknown:0.1.0",
            "registry.example.com/mlkube/serving:0.1.0",
            "ghcr.io/mlkube/serving:0.1.0",
            "/etc/mlkube/hub",
            "/opt/mlkube/examples/train.py",
            "mlkube/serving:0.1.0/more", // a word that goes on is not the reference
            "tensorflow/serving:2.18.0",
        ] {
            assert_eq!(rewritten(untouched), untouched);
        }
    }

    #[test]
    fn every_string_of_an_object_is_rewritten_but_not_its_keys() {
        let mut object = json!({
            "spec": {"containers": [
                {"image": "mlkube/serving:0.1.0", "args": ["--volume-image", "mlkube/mlkube:0.1.0"]},
                {"image": "python:3.12"},
            ]},
            "mlkube/serving:0.1.0": 1,
        });
        assert_eq!(rewrite(&mut object, &registry()), 2);
        assert_eq!(
            object,
            json!({
                "spec": {"containers": [
                    {"image": "127.0.0.1:18445/mlkube/serving:0.1.0", "args": ["--volume-image", "127.0.0.1:18445/mlkube/mlkube:0.1.0"]},
                    {"image": "python:3.12"},
                ]},
                "mlkube/serving:0.1.0": 1,
            })
        );
    }
}
