//! The two S3 calls the fetcher makes, ListObjectsV2 and GetObject, over HTTP/1.1 (TLS for
//! `https://` endpoints, trusting the system's roots), path-style (`endpoint/bucket/key`, which
//! every S3-compatible server answers), signed with SigV4. An error answer is read for its S3
//! error code, which is what tells bad credentials from a missing bucket.

use http_body_util::{BodyExt, Empty};
use hyper::body::{Bytes, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::sigv4::{self, Credentials, Stamp};

/// One object of a listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object {
    pub key: String,
    pub size: u64,
}

/// Why a call failed.
#[derive(Debug)]
pub enum CallError {
    /// No connection: DNS, refused, TLS.
    Connect(String),
    /// The server answered with an error: HTTP status, S3 error code and message.
    Answer {
        status: u16,
        code: String,
        message: String,
    },
    /// The answer could not be read.
    Read(String),
}

type Https = hyper_rustls::HttpsConnector<HttpConnector>;

/// A client of one endpoint, with one access key.
pub struct S3 {
    client: Client<Https, Empty<Bytes>>,
    /// `http` or `https`.
    scheme: String,
    /// Host and port, as the URL gives them.
    authority: String,
    /// The path before the bucket, without a trailing `/` (usually empty).
    base: String,
    region: String,
    credentials: Credentials,
}

impl S3 {
    pub fn new(endpoint: &str, region: &str, credentials: Credentials) -> Result<S3, CallError> {
        let (scheme, rest) = endpoint
            .split_once("://")
            .ok_or_else(|| CallError::Connect(format!("{endpoint} is not a URL")))?;
        let (authority, base) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls_config()?)
            .https_or_http()
            .enable_http1()
            .build();
        Ok(S3 {
            client: Client::builder(TokioExecutor::new()).build(connector),
            scheme: scheme.to_owned(),
            authority: authority.to_owned(),
            base: base.trim_end_matches('/').to_owned(),
            region: region.to_owned(),
            credentials,
        })
    }

    /// Every object whose key starts with `prefix`, page by page.
    pub async fn list(&self, bucket: &str, prefix: &str) -> Result<Vec<Object>, CallError> {
        let mut objects = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut query = vec![
                ("list-type".to_owned(), "2".to_owned()),
                ("prefix".to_owned(), prefix.to_owned()),
            ];
            if let Some(token) = &token {
                query.push(("continuation-token".to_owned(), token.clone()));
            }
            let answer = self.get(&format!("/{bucket}"), &query).await?;
            let body = answer
                .into_body()
                .collect()
                .await
                .map_err(|e| CallError::Read(e.to_string()))?
                .to_bytes();
            let page = String::from_utf8_lossy(&body);
            objects.extend(listed(&page));
            token = (element(&page, "IsTruncated").as_deref() == Some("true"))
                .then(|| element(&page, "NextContinuationToken"))
                .flatten();
            if token.is_none() {
                return Ok(objects);
            }
        }
    }

    /// The object `key` of `bucket`: its body, to be read frame by frame.
    pub async fn object(&self, bucket: &str, key: &str) -> Result<Incoming, CallError> {
        Ok(self
            .get(&format!("/{bucket}/{key}"), &[])
            .await?
            .into_body())
    }

    /// A signed GET of `path` (bucket and key, unencoded); an error answer is an error.
    async fn get(
        &self,
        path: &str,
        query: &[(String, String)],
    ) -> Result<hyper::Response<Incoming>, CallError> {
        let path = format!("{}{path}", self.base);
        let host = self.authority.as_str();
        let request = sigv4::Request {
            method: "GET",
            host,
            path: &path,
            query,
            headers: &[],
        };
        let headers = sigv4::sign(&request, &self.credentials, &self.region, &Stamp::now());
        let query = sigv4::canonical_query(query);
        let mut uri = format!("{}://{host}{}", self.scheme, sigv4::encode(&path, true));
        if !query.is_empty() {
            uri = format!("{uri}?{query}");
        }
        let mut builder = hyper::Request::get(uri).header("host", host);
        for (name, value) in &headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        let request = builder
            .body(Empty::new())
            .map_err(|e| CallError::Connect(e.to_string()))?;
        let answer = self
            .client
            .request(request)
            .await
            .map_err(|e| CallError::Connect(chain(&e)))?;
        if answer.status().is_success() {
            return Ok(answer);
        }
        let status = answer.status().as_u16();
        let body = answer
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let body = String::from_utf8_lossy(&body);
        Err(CallError::Answer {
            status,
            code: element(&body, "Code").unwrap_or_default(),
            message: element(&body, "Message").unwrap_or_default(),
        })
    }
}

/// TLS trusting the system's roots, as many as load: none is no error until an `https://`
/// endpoint's certificate cannot be verified.
fn tls_config() -> Result<rustls::ClientConfig, CallError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| CallError::Connect(format!("no TLS configuration: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// An error and its causes on one line, without repeats.
fn chain(error: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = vec![error.to_string()];
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    parts.join(": ")
}

/// The objects of a ListObjectsV2 page.
fn listed(page: &str) -> Vec<Object> {
    page.split("<Contents>")
        .skip(1)
        .filter_map(|contents| {
            let contents = contents.split("</Contents>").next()?;
            Some(Object {
                key: element(contents, "Key")?,
                size: element(contents, "Size")?.parse().ok()?,
            })
        })
        .collect()
}

/// The text of the first `<name>` element of `xml`, unescaped.
fn element(xml: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let start = xml.find(&open)? + open.len();
    let end = start + xml[start..].find(&format!("</{name}>"))?;
    Some(unescape(&xml[start..end]))
}

/// XML's five entities and character references.
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let Some(end) = rest.find(';') else { break };
        let entity = &rest[1..end];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => entity
                .strip_prefix("#x")
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| entity.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_listing_page() {
        let page = "<?xml version=\"1.0\"?><ListBucketResult><Name>b</Name>\
            <IsTruncated>true</IsTruncated><NextContinuationToken>t&amp;1</NextContinuationToken>\
            <Contents><Key>digits/a&amp;b.csv</Key><Size>12</Size></Contents>\
            <Contents><Key>digits/&#233;.bin</Key><LastModified>x</LastModified><Size>0</Size></Contents>\
            </ListBucketResult>";
        assert_eq!(
            listed(page),
            [
                Object {
                    key: "digits/a&b.csv".into(),
                    size: 12
                },
                Object {
                    key: "digits/é.bin".into(),
                    size: 0
                },
            ]
        );
        assert_eq!(
            element(page, "NextContinuationToken").as_deref(),
            Some("t&1")
        );
        assert_eq!(element(page, "Missing"), None);
    }

    #[test]
    fn reads_an_error_code() {
        let body = "<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message></Error>";
        assert_eq!(element(body, "Code").as_deref(), Some("NoSuchBucket"));
    }
}
