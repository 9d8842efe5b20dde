//! The registry a push writes to, as the two questions a push asks of it ([`Registry`]), and
//! their answers by a real client, Debian's `skopeo` ([`Skopeo`]).
//!
//! skopeo finds credentials as it always does: those `skopeo login <registry>` wrote to its
//! auth.json (`${XDG_RUNTIME_DIR}/containers/auth.json`, or `$REGISTRY_AUTH_FILE`), then
//! Docker's `~/.docker/config.json`. mlkube never sees them.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest as _, Sha256};

/// What a push asks of a registry.
pub trait Registry {
    /// The digest (`sha256:<hex>`) of the manifest `reference` names, or `None` when the
    /// registry has none under that name.
    fn digest(&self, reference: &str) -> Result<Option<String>, RegistryError>;
    /// Copy the OCI archive at `archive` to `reference`, giving the digest of the manifest
    /// the registry then has.
    fn copy(&self, archive: &Path, reference: &str) -> Result<String, RegistryError>;
}

/// Why the registry did not answer, or refused.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("cannot run {}", program.display())]
    Run {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read the digest skopeo wrote to {}", path.display())]
    Digest {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// skopeo's own message, and a hint when its cause is one a user can fix.
    #[error("{message}{}", hint.as_ref().map(|h| format!("\nhint: {h}")).unwrap_or_default())]
    Refused {
        message: String,
        hint: Option<String>,
    },
}

/// The registry, through the `skopeo` on PATH.
#[derive(Debug, Clone)]
pub struct Skopeo {
    program: PathBuf,
    /// Plain HTTP, or HTTPS without verifying the certificate (skopeo's `--tls-verify=false`).
    insecure: bool,
}

impl Skopeo {
    /// The `skopeo` on PATH, if there is one.
    pub fn find(insecure: bool) -> Option<Skopeo> {
        let path = std::env::var_os("PATH")?;
        let program = std::env::split_paths(&path)
            .map(|dir| dir.join("skopeo"))
            .find(|candidate| candidate.is_file())?;
        Some(Skopeo { program, insecure })
    }

    /// Run skopeo with `args`; its stdout, or its message when it failed.
    fn run(&self, args: &[String]) -> Result<Result<Vec<u8>, String>, RegistryError> {
        let output = Command::new(&self.program)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|source| RegistryError::Run {
                program: self.program.clone(),
                source,
            })?;
        Ok(if output.status.success() {
            Ok(output.stdout)
        } else {
            Err(message(&String::from_utf8_lossy(&output.stderr)))
        })
    }

    /// `--tls-verify=false` (or its `--dest-` form) when insecure.
    fn tls(&self, flag: &str) -> Option<String> {
        self.insecure.then(|| format!("{flag}=false"))
    }
}

impl Registry for Skopeo {
    fn digest(&self, reference: &str) -> Result<Option<String>, RegistryError> {
        let mut args = vec!["inspect".to_owned(), "--raw".to_owned()];
        args.extend(self.tls("--tls-verify"));
        args.push(format!("docker://{reference}"));
        match self.run(&args)? {
            Ok(manifest) => Ok(Some(sha256(&manifest))),
            Err(message) if absent(&message) => Ok(None),
            Err(message) => Err(refused(message, reference)),
        }
    }

    fn copy(&self, archive: &Path, reference: &str) -> Result<String, RegistryError> {
        let digest_file = std::env::temp_dir().join(format!(
            "mlkube-push-{}-{}.digest",
            std::process::id(),
            crate::random::id()
        ));
        let mut args = vec!["copy", "--quiet", "--preserve-digests"]
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>();
        args.extend(self.tls("--dest-tls-verify"));
        args.extend(["--digestfile".to_owned(), digest_file.display().to_string()]);
        args.push(format!("oci-archive:{}", archive.display()));
        args.push(format!("docker://{reference}"));
        let copied = self.run(&args)?;
        let digest = std::fs::read_to_string(&digest_file);
        let _ = std::fs::remove_file(&digest_file);
        copied.map_err(|message| refused(message, reference))?;
        digest
            .map(|d| d.trim().to_owned())
            .map_err(|source| RegistryError::Digest {
                path: digest_file,
                source,
            })
    }
}

/// `sha256:<hex>` of `bytes`.
fn sha256(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// skopeo's message in its stderr: the `msg="..."` of its last log line, else the last line.
fn message(stderr: &str) -> String {
    let last = stderr.trim().lines().last().unwrap_or_default();
    let Some((_, rest)) = last.split_once("msg=\"") else {
        return last.to_owned();
    };
    let text = rest.strip_suffix('"').unwrap_or(rest).replace("\\\"", "\"");
    // `Error parsing image name "docker://...": ` repeats the reference the error names.
    let text = text
        .strip_prefix("Error parsing image name ")
        .unwrap_or(&text);
    match text.strip_prefix('"').and_then(|t| t.split_once("\": ")) {
        Some((_, cause)) => cause.to_owned(),
        None => text.to_owned(),
    }
}

/// Whether skopeo's message says the registry has no such manifest (or repository).
fn absent(message: &str) -> bool {
    ["manifest unknown", "name unknown", "not found"]
        .iter()
        .any(|word| message.contains(word))
}

/// skopeo's refusal of `reference`, with a hint for the causes a user can fix.
fn refused(message: String, reference: &str) -> RegistryError {
    let host = reference.split('/').next().unwrap_or(reference);
    let hint = if message.contains("server gave HTTP response to HTTPS client") {
        Some(format!("{host} speaks plain HTTP: pass --insecure"))
    } else if ["unauthorized", "authentication required", "denied"]
        .iter()
        .any(|w| message.contains(w))
    {
        Some(format!(
            "log in first: skopeo login {host} (skopeo keeps the credentials in its auth.json)"
        ))
    } else if message.contains("x509") || message.contains("certificate") {
        Some(format!(
            "the certificate of {host} is not trusted here: add its CA to the system's, or pass \
             --insecure"
        ))
    } else if [
        "connection refused",
        "no such host",
        "timeout",
        "no route to host",
    ]
    .iter()
    .any(|w| message.contains(w))
    {
        Some(format!(
            "is a registry running at {host}? check the address, and that it answers: curl \
             http://{host}/v2/ (or https://)"
        ))
    } else {
        None
    };
    RegistryError::Refused { message, hint }
}

#[cfg(test)]
mod tests {
    use super::{absent, message, refused};

    #[test]
    fn skopeos_messages_are_read_from_its_log_line_and_their_causes_hinted() {
        let line = "time=\"2026-11-28T12:25:45Z\" level=fatal msg=\"Error parsing image name \
                    \\\"docker://127.0.0.1:1/mlkube/busybox:1\\\": reading manifest 1 in \
                    127.0.0.1:1/mlkube/busybox: manifest unknown: manifest unknown\"\n";
        let text = message(line);
        assert_eq!(
            text,
            "reading manifest 1 in 127.0.0.1:1/mlkube/busybox: manifest unknown: manifest unknown"
        );
        assert!(absent(&text));
        for (said, hint) in [
            (
                "Get \"https://h:5000/v2/\": http: server gave HTTP response to HTTPS client",
                "h:5000 speaks plain HTTP: pass --insecure",
            ),
            (
                "dial tcp 127.0.0.1:5000: connect: connection refused",
                "curl http://h:5000/v2/",
            ),
            (
                "unauthorized: authentication required",
                "skopeo login h:5000",
            ),
            (
                "x509: certificate signed by unknown authority",
                "add its CA",
            ),
        ] {
            assert!(!absent(said), "{said}");
            let error = refused(said.to_owned(), "h:5000/mlkube/busybox:1").to_string();
            assert!(error.starts_with(said) && error.contains(hint), "{error}");
        }
    }
}
