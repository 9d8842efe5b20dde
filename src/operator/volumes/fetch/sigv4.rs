//! AWS Signature Version 4 for S3 requests without a body (GET), written from AWS's
//! specification: a canonical request, the string to sign, a key derived by HMAC-SHA256 from
//! the secret, date, region and service, and the `Authorization` header.

use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

/// The SHA-256 of an empty payload, as `x-amz-content-sha256` states it.
pub const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// An access key.
#[derive(Clone, Debug)]
pub struct Credentials {
    pub access_key: String,
    pub secret_key: String,
}

/// The moment a request is signed, as SigV4 writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// `YYYYMMDD`.
    pub date: String,
    /// `YYYYMMDDTHHMMSSZ`.
    pub time: String,
}

impl Stamp {
    pub fn now() -> Stamp {
        let seconds = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        Stamp::at(seconds)
    }

    /// The stamp of `seconds` after the Unix epoch (UTC).
    pub fn at(seconds: u64) -> Stamp {
        let days = i64::try_from(seconds / 86_400).unwrap_or_default();
        let rest = seconds % 86_400;
        let (y, m, d) = civil(days);
        let date = format!("{y:04}{m:02}{d:02}");
        let time = format!(
            "{date}T{:02}{:02}{:02}Z",
            rest / 3600,
            rest % 3600 / 60,
            rest % 60
        );
        Stamp { date, time }
    }
}

/// The proleptic Gregorian date of a day count from 1970-01-01 (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A request to sign: `path` and `query` as they are, before encoding.
pub struct Request<'a> {
    pub method: &'a str,
    /// The `Host` header: the endpoint's host, and its port when the URL names one.
    pub host: &'a str,
    pub path: &'a str,
    pub query: &'a [(String, String)],
    /// Other headers to sign, lowercase names.
    pub headers: &'a [(String, String)],
}

/// Percent-encode `text` as SigV4 does: everything but `A-Za-z0-9-_.~`, and `/` too unless
/// `keep_slash`.
pub fn encode(text: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(byte));
            }
            b'/' if keep_slash => out.push('/'),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// The query string, encoded and sorted as the canonical request has it (and as it is sent).
pub fn canonical_query(query: &[(String, String)]) -> String {
    let mut pairs: Vec<(String, String)> = query
        .iter()
        .map(|(k, v)| (encode(k, false), encode(v, false)))
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// The headers to send with `request`: `x-amz-date`, `x-amz-content-sha256` and
/// `authorization`.
pub fn sign(
    request: &Request<'_>,
    credentials: &Credentials,
    region: &str,
    stamp: &Stamp,
) -> Vec<(String, String)> {
    let mut headers: Vec<(String, String)> = request.headers.to_vec();
    headers.push(("host".into(), request.host.to_owned()));
    headers.push(("x-amz-content-sha256".into(), EMPTY_SHA256.into()));
    headers.push(("x-amz-date".into(), stamp.time.clone()));
    headers.sort();
    let signed: Vec<&str> = headers.iter().map(|(k, _)| k.as_str()).collect();
    let signed = signed.join(";");
    let canonical_headers: String = headers
        .iter()
        .map(|(k, v)| format!("{k}:{}\n", v.trim()))
        .collect();
    let canonical = format!(
        "{}\n{}\n{}\n{canonical_headers}\n{signed}\n{EMPTY_SHA256}",
        request.method,
        encode(request.path, true),
        canonical_query(request.query),
    );
    let scope = format!("{}/{region}/s3/aws4_request", stamp.date);
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{}\n{scope}\n{}",
        stamp.time,
        hex(&Sha256::digest(canonical.as_bytes()))
    );
    let key = [stamp.date.as_str(), region, "s3", "aws4_request"]
        .iter()
        .fold(
            format!("AWS4{}", credentials.secret_key).into_bytes(),
            |key, part| hmac(&key, part.as_bytes()).to_vec(),
        );
    let signature = hex(&hmac(&key, to_sign.as_bytes()));
    let authorization = format!(
        "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed}, Signature={signature}",
        credentials.access_key
    );
    headers.retain(|(k, _)| k.starts_with("x-amz-"));
    headers.push(("authorization".into(), authorization));
    headers
}

/// HMAC-SHA256 (RFC 2104).
fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > block.len() {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let inner_pad: Vec<u8> = block.iter().map(|b| b ^ 0x36).collect();
    let outer_pad: Vec<u8> = block.iter().map(|b| b ^ 0x5c).collect();
    let mut inner = Sha256::new();
    inner.update(&inner_pad);
    inner.update(data);
    let mut outer = Sha256::new();
    outer.update(&outer_pad);
    outer.update(inner.finalize());
    let mut out = [0u8; 32];
    out.copy_from_slice(&outer.finalize());
    out
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> Credentials {
        Credentials {
            access_key: "AKIAIOSFODNN7EXAMPLE".into(),
            secret_key: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
        }
    }

    fn stamp() -> Stamp {
        Stamp {
            date: "20130524".into(),
            time: "20130524T000000Z".into(),
        }
    }

    fn authorization(headers: &[(String, String)]) -> &str {
        &headers
            .iter()
            .find(|(k, _)| k == "authorization")
            .unwrap()
            .1
    }

    /// The GET Object example of AWS's SigV4 documentation for S3.
    #[test]
    fn signs_awss_get_object_example() {
        let headers = sign(
            &Request {
                method: "GET",
                host: "examplebucket.s3.amazonaws.com",
                path: "/test.txt",
                query: &[],
                headers: &[("range".into(), "bytes=0-9".into())],
            },
            &example(),
            "us-east-1",
            &stamp(),
        );
        assert_eq!(
            authorization(&headers),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, \
             SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, \
             Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
    }

    /// The GET Bucket (list objects) example of the same documentation.
    #[test]
    fn signs_awss_list_objects_example() {
        let query = [
            ("max-keys".to_owned(), "2".to_owned()),
            ("prefix".to_owned(), "J".to_owned()),
        ];
        let headers = sign(
            &Request {
                method: "GET",
                host: "examplebucket.s3.amazonaws.com",
                path: "/",
                query: &query,
                headers: &[],
            },
            &example(),
            "us-east-1",
            &stamp(),
        );
        assert!(
            authorization(&headers).ends_with(
                "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"
            ),
            "{}",
            authorization(&headers)
        );
    }

    #[test]
    fn encodes_as_sigv4_does() {
        assert_eq!(encode("a b/c~d*é", true), "a%20b/c~d%2A%C3%A9");
        assert_eq!(encode("a/b", false), "a%2Fb");
        let query = [
            ("prefix".to_owned(), "data/x y".to_owned()),
            ("list-type".to_owned(), "2".to_owned()),
        ];
        assert_eq!(canonical_query(&query), "list-type=2&prefix=data%2Fx%20y");
    }

    #[test]
    fn stamps_are_utc_dates_and_times() {
        assert_eq!(
            Stamp::at(1_369_353_600),
            Stamp {
                date: "20130524".into(),
                time: "20130524T000000Z".into()
            }
        );
        assert_eq!(Stamp::at(951_827_696).time, "20000229T123456Z");
        assert_eq!(Stamp::at(0).date, "19700101");
    }
}
