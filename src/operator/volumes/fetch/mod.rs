//! `mlkube volume-fetch` and `mlkube volume-clean`: what the volume controller's pods run.
//!
//! # Expected flow
//! The fetcher lists the objects under `s3://bucket/prefix`, downloads each into
//! `<dest>.partial/<key below the prefix>`, and renames the directory to `<dest>` once all are
//! complete (their sizes checked against the listing). Its one-line outcome goes to stdout and
//! to the container's termination message, where the controller reads it into the
//! VolumeManager's status.
//!
//! # Guarantees
//! - Nothing half-placed: on any failure, timeout or SIGTERM the partial directory is removed,
//!   and `<dest>` only ever appears complete.
//! - The message of a failure starts with its cause: `bad credentials`, `no such bucket`,
//!   `no such key`, `source unreachable`, `timeout`, then the details.
//! - A key is never written outside `<dest>`: keys with `..`, empty or absolute segments are
//!   refused.
//! - A connection that fails is tried again, for up to [`CONNECT_PATIENCE`], before the source is
//!   called unreachable: a NetworkPolicy controller admits a new pod's address a moment after
//!   the pod starts, and a store may be restarting.

mod s3;
pub mod sigv4;

use std::io::Write;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;

use super::pods::CREDENTIAL_KEYS;
use s3::{CallError, S3};
use sigv4::Credentials;

/// How long the first request may keep failing to connect before the source is unreachable.
const CONNECT_PATIENCE: Duration = Duration::from_secs(30);

/// Where the kubelet reads a container's termination message from.
const TERMINATION_LOG: &str = "/dev/termination-log";

/// What the fetcher is asked to place.
#[derive(Clone, Debug)]
pub struct FetchArgs {
    pub endpoint: String,
    pub bucket: String,
    pub prefix: String,
    pub region: String,
    /// The Secret the access key comes from, for messages.
    pub secret: String,
    pub timeout: Duration,
    pub dest: PathBuf,
}

/// Why a fetch failed; the message is what the VolumeManager's status shows.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error(
        "bad credentials: Secret {secret} has no access key (keys awsAccessKeyID and awsSecretAccessKey, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), or does not exist"
    )]
    NoCredentials { secret: String },
    #[error(
        "bad credentials: {endpoint} refused the access key of Secret {secret} ({code}: {message})"
    )]
    Credentials {
        endpoint: String,
        secret: String,
        code: String,
        message: String,
    },
    #[error("no such bucket: {bucket} at {endpoint}")]
    NoSuchBucket { endpoint: String, bucket: String },
    #[error("no such key: no object under {url} at {endpoint}")]
    NoSuchKey { endpoint: String, url: String },
    #[error("source unreachable: {endpoint}: {detail}")]
    Unreachable { endpoint: String, detail: String },
    #[error("timeout: {url} was not placed within {seconds}s (options.timeoutForDataDownload)")]
    Timeout { url: String, seconds: u64 },
    #[error("{endpoint} answered {status} {code}: {message}")]
    Answer {
        endpoint: String,
        status: u16,
        code: String,
        message: String,
    },
    #[error("the object {key:?} cannot be a file below {dest}")]
    UnsafeKey { key: String, dest: String },
    #[error("the object {key} ended after {got} of {expected} bytes")]
    Short {
        key: String,
        got: u64,
        expected: u64,
    },
    #[error("cannot write {path}: {detail}")]
    Write { path: String, detail: String },
    #[error("stopped by SIGTERM")]
    Stopped,
}

/// Run the fetcher; the outcome is printed and left as the termination message. True on success.
pub fn run_fetch(args: &FetchArgs) -> bool {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return report(Err(format!("cannot start: {e}"))),
    };
    let partial = partial_dir(&args.dest);
    let outcome = runtime.block_on(async {
        let stop = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut term) => {
                    term.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            outcome = tokio::time::timeout(args.timeout, fetch(args, &partial)) => outcome
                .unwrap_or_else(|_| Err(FetchError::Timeout { url: url(args), seconds: args.timeout.as_secs() })),
            () = stop => Err(FetchError::Stopped),
        }
    });
    if outcome.is_err() {
        let _ = std::fs::remove_dir_all(&partial);
    }
    report(outcome.map_err(|e| e.to_string()))
}

/// `mlkube volume-clean PATH`: remove a VolumeManager's directory from this node.
pub fn run_clean(path: &Path) -> bool {
    let outcome = match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(format!("removed {}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Ok(format!("{} was already gone", path.display()))
        }
        Err(e) => Err(format!("cannot remove {}: {e}", path.display())),
    };
    report(outcome)
}

/// Print the outcome and leave it as the termination message.
fn report(outcome: Result<String, String>) -> bool {
    let (line, ok) = match outcome {
        Ok(line) => (line, true),
        Err(line) => (line, false),
    };
    if ok {
        println!("{line}");
    } else {
        eprintln!("error: {line}");
    }
    if let Ok(mut log) = std::fs::OpenOptions::new()
        .write(true)
        .open(TERMINATION_LOG)
    {
        let _ = log.write_all(line.as_bytes());
    }
    ok
}

fn url(args: &FetchArgs) -> String {
    if args.prefix.is_empty() {
        format!("s3://{}", args.bucket)
    } else {
        format!("s3://{}/{}", args.bucket, args.prefix)
    }
}

fn partial_dir(dest: &Path) -> PathBuf {
    let mut name = dest.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    dest.with_file_name(name)
}

/// The access key from the environment (the pod takes it from the Secret).
fn credentials(args: &FetchArgs) -> Result<Credentials, FetchError> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let pair = |id: usize, secret: usize| {
        Some(Credentials {
            access_key: var(CREDENTIAL_KEYS[id].0)?,
            secret_key: var(CREDENTIAL_KEYS[secret].0)?,
        })
    };
    pair(0, 1)
        .or_else(|| pair(2, 3))
        .ok_or_else(|| FetchError::NoCredentials {
            secret: args.secret.clone(),
        })
}

/// List, download into `partial`, then move it to `dest`.
async fn fetch(args: &FetchArgs, partial: &Path) -> Result<String, FetchError> {
    let started = Instant::now();
    let credentials = credentials(args)?;
    let client =
        S3::new(&args.endpoint, &args.region, credentials).map_err(|e| classify(args, e))?;
    let objects = list_patiently(&client, args)
        .await
        .map_err(|e| classify(args, e))?;
    let chosen: Vec<(PathBuf, s3::Object)> = objects
        .into_iter()
        .filter(|o| !o.key.ends_with('/'))
        .filter_map(|o| Some((below_prefix(&args.prefix, &o.key)?, o)))
        .collect();
    if chosen.is_empty() {
        return Err(FetchError::NoSuchKey {
            endpoint: args.endpoint.clone(),
            url: url(args),
        });
    }
    let _ = std::fs::remove_dir_all(partial);
    let write_error = |path: &Path, e: std::io::Error| FetchError::Write {
        path: path.display().to_string(),
        detail: e.to_string(),
    };
    std::fs::create_dir(partial).map_err(|e| write_error(partial, e))?;
    let total: u64 = chosen.iter().map(|(_, o)| o.size).sum();
    println!(
        "downloading {} objects ({total} bytes) from {} into {}",
        chosen.len(),
        url(args),
        partial.display()
    );
    let mut bytes = 0;
    for (relative, object) in &chosen {
        let Some(relative) = safe(relative) else {
            return Err(FetchError::UnsafeKey {
                key: object.key.clone(),
                dest: args.dest.display().to_string(),
            });
        };
        bytes += download(&client, args, object, &partial.join(relative)).await?;
    }
    let _ = std::fs::remove_dir_all(&args.dest);
    std::fs::rename(partial, &args.dest).map_err(|e| write_error(&args.dest, e))?;
    Ok(format!(
        "placed {} objects ({bytes} bytes) from {} in {:.1}s",
        chosen.len(),
        url(args),
        started.elapsed().as_secs_f64()
    ))
}

/// The listing, its connection tried again with a growing pause (up to 4 s) while it fails, for
/// up to [`CONNECT_PATIENCE`]; any answer of the store is final.
async fn list_patiently(client: &S3, args: &FetchArgs) -> Result<Vec<s3::Object>, CallError> {
    let deadline = Instant::now() + CONNECT_PATIENCE;
    let mut pause = Duration::from_millis(250);
    loop {
        match client.list(&args.bucket, &args.prefix).await {
            Err(CallError::Connect(_)) if Instant::now() + pause < deadline => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(4));
            }
            outcome => return outcome,
        }
    }
}

/// A key's path below the prefix: the keys `prefix/...`, or the one object named `prefix`
/// (by its last segment); None for keys that only share the prefix's first characters.
fn below_prefix(prefix: &str, key: &str) -> Option<PathBuf> {
    if prefix.is_empty() {
        return Some(PathBuf::from(key));
    }
    if key == prefix {
        return Some(PathBuf::from(key.rsplit('/').next()?));
    }
    key.strip_prefix(prefix)?
        .strip_prefix('/')
        .map(PathBuf::from)
}

/// `path` when it stays below its base: relative, only normal segments.
fn safe(path: &Path) -> Option<&Path> {
    let normal = path.components().all(|c| matches!(c, Component::Normal(_)));
    (normal && path.components().next().is_some() && !path.to_string_lossy().contains("//"))
        .then_some(path)
}

/// Download one object into `path`; its size.
async fn download(
    client: &S3,
    args: &FetchArgs,
    object: &s3::Object,
    path: &Path,
) -> Result<u64, FetchError> {
    let write_error = |e: std::io::Error| FetchError::Write {
        path: path.display().to_string(),
        detail: e.to_string(),
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(write_error)?;
    }
    let mut file = std::fs::File::create(path).map_err(write_error)?;
    let mut body = client
        .object(&args.bucket, &object.key)
        .await
        .map_err(|e| classify(args, e))?;
    let mut got = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| FetchError::Unreachable {
            endpoint: args.endpoint.clone(),
            detail: format!("reading {}: {e}", object.key),
        })?;
        if let Some(data) = frame.data_ref() {
            file.write_all(data).map_err(write_error)?;
            got += data.len() as u64;
        }
    }
    file.sync_all().map_err(write_error)?;
    if got != object.size {
        return Err(FetchError::Short {
            key: object.key.clone(),
            got,
            expected: object.size,
        });
    }
    Ok(got)
}

/// What a failed call means, by its S3 error code.
fn classify(args: &FetchArgs, error: CallError) -> FetchError {
    let endpoint = args.endpoint.clone();
    match error {
        CallError::Connect(detail) | CallError::Read(detail) => {
            FetchError::Unreachable { endpoint, detail }
        }
        CallError::Answer { code, .. } if code == "NoSuchBucket" => FetchError::NoSuchBucket {
            endpoint,
            bucket: args.bucket.clone(),
        },
        CallError::Answer { code, .. } if code == "NoSuchKey" => FetchError::NoSuchKey {
            endpoint,
            url: url(args),
        },
        CallError::Answer {
            status,
            code,
            message,
        } if status == 403
            || matches!(
                code.as_str(),
                "InvalidAccessKeyId" | "SignatureDoesNotMatch" | "AccessDenied"
            ) =>
        {
            FetchError::Credentials {
                endpoint,
                secret: args.secret.clone(),
                code,
                message,
            }
        }
        CallError::Answer {
            status,
            code,
            message,
        } => FetchError::Answer {
            endpoint,
            status,
            code,
            message,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_below_the_prefix_become_relative_paths() {
        assert_eq!(
            below_prefix("digits", "digits/train.csv"),
            Some("train.csv".into())
        );
        assert_eq!(
            below_prefix("digits", "digits/a/b.npz"),
            Some("a/b.npz".into())
        );
        assert_eq!(below_prefix("digits", "digits2/x"), None);
        assert_eq!(
            below_prefix("d/file.csv", "d/file.csv"),
            Some("file.csv".into())
        );
        assert_eq!(below_prefix("", "x/y"), Some("x/y".into()));
    }

    #[test]
    fn keys_that_would_leave_the_volume_are_refused() {
        for bad in ["../etc/passwd", "a/../../b", "/abs", "a//b", ""] {
            assert!(safe(Path::new(bad)).is_none(), "{bad:?}");
        }
        assert!(safe(Path::new("a/b.csv")).is_some());
    }

    fn args() -> FetchArgs {
        FetchArgs {
            endpoint: "http://store:9000".into(),
            bucket: "datasets".into(),
            prefix: "digits".into(),
            region: "us-east-1".into(),
            secret: "store".into(),
            timeout: Duration::from_secs(60),
            dest: "/kvc/digits".into(),
        }
    }

    #[test]
    fn failures_name_their_cause_first() {
        let answer = |status: u16, code: &str| CallError::Answer {
            status,
            code: code.into(),
            message: "m".into(),
        };
        let cases = [
            (
                answer(403, "InvalidAccessKeyId"),
                "bad credentials: http://store:9000 refused",
            ),
            (answer(403, "SignatureDoesNotMatch"), "bad credentials:"),
            (
                answer(404, "NoSuchBucket"),
                "no such bucket: datasets at http://store:9000",
            ),
            (
                answer(404, "NoSuchKey"),
                "no such key: no object under s3://datasets/digits",
            ),
            (
                CallError::Connect("connection refused".into()),
                "source unreachable: http://store:9000: connection refused",
            ),
            (
                answer(500, "InternalError"),
                "http://store:9000 answered 500 InternalError: m",
            ),
        ];
        for (error, expected) in cases {
            let message = classify(&args(), error).to_string();
            assert!(
                message.starts_with(expected),
                "{message:?} does not start with {expected:?}"
            );
        }
        let timeout = FetchError::Timeout {
            url: url(&args()),
            seconds: 60,
        }
        .to_string();
        assert!(timeout.starts_with("timeout: s3://datasets/digits was not placed within 60s"));
    }

    #[test]
    fn the_partial_copy_sits_beside_the_destination() {
        assert_eq!(
            partial_dir(Path::new("/kvc/digits")),
            Path::new("/kvc/digits.partial")
        );
    }
}
