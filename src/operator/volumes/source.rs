//! A volume's source, read from its `volumeConfigs` entry: what to place and from where, or
//! why it cannot be placed (the message that goes into its status, saying what to fix).

use std::time::Duration;

use super::api::{CREDENTIALS_SECRET, DOWNLOAD_TIMEOUT, REGION, VolumeConfig};

/// How long a download may take when `timeoutForDataDownload` is not given.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The longest download a volume may ask for: a week. Longer is a typo, and would overflow the
/// fetcher pod's deadline.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);

/// The region signed into requests when `options.region` is not given.
pub const DEFAULT_REGION: &str = "us-east-1";

/// Where a volume's data comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Objects of an S3 bucket, copied onto nodes.
    S3(S3Source),
    /// A directory an NFS server exports, mounted where it is.
    Nfs { server: String, path: String },
}

/// An S3 (or S3-compatible) source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Source {
    /// The endpoint's base URL, e.g. `http://object-store.ml:9000`.
    pub endpoint: String,
    pub bucket: String,
    /// The key prefix (no leading `/`), empty for the whole bucket.
    pub prefix: String,
    /// The Secret that holds the access key.
    pub secret: String,
    pub region: String,
    pub timeout: Duration,
}

impl S3Source {
    /// The source as `s3://bucket/prefix`.
    pub fn url(&self) -> String {
        if self.prefix.is_empty() {
            format!("s3://{}", self.bucket)
        } else {
            format!("s3://{}/{}", self.bucket, self.prefix)
        }
    }
}

/// The source of `config`, or the message that says why there is none.
pub fn source(config: &VolumeConfig) -> Result<Source, String> {
    match config.source_type.as_str() {
        "S3" | "S3-Dev" => s3(config).map(Source::S3),
        "NFS" => nfs(config),
        "Pachyderm" => Err(
            "sourceType Pachyderm is not supported by this volume controller; \
             hint: export the repository's data to S3 and use sourceType S3-Dev, or NFS"
                .to_owned(),
        ),
        other => Err(format!(
            "sourceType {other:?} is not one of S3, S3-Dev, NFS, Pachyderm"
        )),
    }
}

fn s3(config: &VolumeConfig) -> Result<S3Source, String> {
    let kind = &config.source_type;
    let region = option(config, REGION).unwrap_or(DEFAULT_REGION).to_owned();
    let endpoint = match config.endpoint_url.as_deref().map(str::trim) {
        Some(url) if !url.is_empty() => url.trim_end_matches('/').to_owned(),
        _ if kind == "S3" => format!("https://s3.{region}.amazonaws.com"),
        _ => {
            return Err(
                "sourceType S3-Dev needs endpointURL, e.g. http://object-store:9000".to_owned(),
            );
        }
    };
    let rest = endpoint
        .strip_prefix("http://")
        .or_else(|| endpoint.strip_prefix("https://"));
    if rest.is_none_or(|host| host.is_empty() || host.contains(char::is_whitespace)) {
        return Err(format!(
            "endpointURL {endpoint:?} is not an http:// or https:// URL"
        ));
    }
    let url = config.source_url.as_deref().unwrap_or_default().trim();
    let Some(path) = url.strip_prefix("s3://") else {
        return Err(format!(
            "sourceURL {url:?} is not an S3 URL; hint: write s3://bucket/path"
        ));
    };
    let (bucket, prefix) = path.split_once('/').unwrap_or((path, ""));
    if bucket.is_empty() {
        return Err(format!("sourceURL {url:?} names no bucket"));
    }
    let Some(secret) = option(config, CREDENTIALS_SECRET) else {
        return Err(format!(
            "options.{CREDENTIALS_SECRET} is missing: name the Secret that holds the access key"
        ));
    };
    let timeout = match option(config, DOWNLOAD_TIMEOUT) {
        None => DEFAULT_TIMEOUT,
        Some(text) => duration(text).ok_or_else(|| {
            format!(
                "options.{DOWNLOAD_TIMEOUT} {text:?} is not a duration such as 600, 90s, 10m or 1h"
            )
        })?,
    };
    if timeout > MAX_TIMEOUT {
        return Err(format!(
            "options.{DOWNLOAD_TIMEOUT} {:?} is longer than the most a download may take, 168h (a week)",
            option(config, DOWNLOAD_TIMEOUT).unwrap_or_default()
        ));
    }
    Ok(S3Source {
        endpoint,
        bucket: bucket.to_owned(),
        prefix: prefix.trim_matches('/').to_owned(),
        secret: secret.to_owned(),
        region,
        timeout,
    })
}

fn nfs(config: &VolumeConfig) -> Result<Source, String> {
    match (option(config, "server"), option(config, "path")) {
        (Some(server), Some(path)) if path.starts_with('/') => Ok(Source::Nfs {
            server: server.to_owned(),
            path: path.to_owned(),
        }),
        (Some(_), Some(path)) => Err(format!(
            "options.path {path:?} of an NFS volume must be absolute"
        )),
        _ => Err("an NFS volume needs options.server and options.path".to_owned()),
    }
}

/// A non-empty option.
fn option<'a>(config: &'a VolumeConfig, key: &str) -> Option<&'a str> {
    config
        .options
        .get(key)
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
}

/// A positive duration: whole seconds, or a number with `s`, `m` or `h`.
pub fn duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let (number, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => text.split_at(i),
        None => (text, "s"),
    };
    let n: u64 = number.parse().ok().filter(|&n| n > 0)?;
    let seconds = match unit {
        "s" => n,
        "m" => n.checked_mul(60)?,
        "h" => n.checked_mul(3600)?,
        _ => return None,
    };
    Some(Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(kind: &str, url: &str, options: &[(&str, &str)]) -> VolumeConfig {
        VolumeConfig {
            id: "data".into(),
            replicas: 1,
            source_type: kind.into(),
            source_url: Some(url.into()),
            options: options
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ..VolumeConfig::default()
        }
    }

    #[test]
    fn an_s3_dev_source_names_its_endpoint_bucket_prefix_and_secret() {
        let mut c = config(
            "S3-Dev",
            "s3://datasets/digits/v1/",
            &[(CREDENTIALS_SECRET, "store"), (DOWNLOAD_TIMEOUT, "90s")],
        );
        c.endpoint_url = Some("http://store.ml:9000/".into());
        let Ok(Source::S3(s3)) = source(&c) else {
            panic!("{:?}", source(&c))
        };
        assert_eq!(s3.endpoint, "http://store.ml:9000");
        assert_eq!(
            (s3.bucket.as_str(), s3.prefix.as_str()),
            ("datasets", "digits/v1")
        );
        assert_eq!(s3.secret, "store");
        assert_eq!(s3.region, DEFAULT_REGION);
        assert_eq!(s3.timeout, Duration::from_secs(90));
        assert_eq!(s3.url(), "s3://datasets/digits/v1");
    }

    #[test]
    fn s3_without_an_endpoint_is_the_regions_aws_endpoint() {
        let c = config(
            "S3",
            "s3://bucket",
            &[(CREDENTIALS_SECRET, "aws"), (REGION, "eu-west-1")],
        );
        let Ok(Source::S3(s3)) = source(&c) else {
            panic!()
        };
        assert_eq!(s3.endpoint, "https://s3.eu-west-1.amazonaws.com");
        assert_eq!(s3.prefix, "");
    }

    #[test]
    fn bad_sources_say_what_to_fix() {
        let secret = [(CREDENTIALS_SECRET, "s")];
        let cases = [
            (config("S3-Dev", "s3://b/k", &secret), "needs endpointURL"),
            (config("S3", "http://b/k", &secret), "is not an S3 URL"),
            (config("S3", "s3:///k", &secret), "names no bucket"),
            (
                config("S3", "s3://b/k", &[]),
                "awsCredentialsSecretName is missing",
            ),
            (
                config(
                    "S3",
                    "s3://b",
                    &[(CREDENTIALS_SECRET, "s"), (DOWNLOAD_TIMEOUT, "soon")],
                ),
                "is not a duration",
            ),
            (
                config(
                    "S3",
                    "s3://b",
                    &[
                        (CREDENTIALS_SECRET, "s"),
                        (DOWNLOAD_TIMEOUT, "18446744073709551615"),
                    ],
                ),
                "is longer than the most a download may take",
            ),
            (
                config(
                    "S3",
                    "s3://b",
                    &[(CREDENTIALS_SECRET, "s"), (DOWNLOAD_TIMEOUT, "169h")],
                ),
                "168h (a week)",
            ),
            (config("Pachyderm", "", &[]), "Pachyderm is not supported"),
            (config("FTP", "", &[]), "is not one of"),
            (
                config("NFS", "", &[("server", "nfs")]),
                "needs options.server and options.path",
            ),
            (
                config("NFS", "", &[("server", "nfs"), ("path", "x")]),
                "must be absolute",
            ),
        ];
        for (c, expected) in cases {
            let message = source(&c).expect_err(expected);
            assert!(message.contains(expected), "{message:?} lacks {expected:?}");
        }
        let mut c = config("S3-Dev", "s3://b", &secret);
        c.endpoint_url = Some("store:9000".into());
        assert!(
            source(&c)
                .unwrap_err()
                .contains("not an http:// or https:// URL")
        );
    }

    #[test]
    fn an_nfs_source_is_its_server_and_path() {
        let c = config(
            "NFS",
            "",
            &[("server", "10.0.0.2"), ("path", "/exports/data")],
        );
        assert_eq!(
            source(&c),
            Ok(Source::Nfs {
                server: "10.0.0.2".into(),
                path: "/exports/data".into()
            })
        );
    }

    #[test]
    fn durations_are_seconds_minutes_or_hours() {
        assert_eq!(duration("600"), Some(Duration::from_secs(600)));
        assert_eq!(duration("10m"), Some(Duration::from_secs(600)));
        assert_eq!(duration("2h"), Some(Duration::from_secs(7200)));
        for bad in ["", "0", "-5", "5d", "m", "1.5m"] {
            assert_eq!(duration(bad), None, "{bad:?}");
        }
    }
}
