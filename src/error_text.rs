//! An error and its causes as text for people, the same for the command line's messages and
//! the operator's log lines.
//!
//! Our own messages never repeat their source; some libraries' do (kube's `ServiceError: {0}`,
//! its kubeconfig errors that embed their io error), so a cause whose text the one before
//! already holds is left out. An API server's answer (`kube::Error::Api`) is told as its
//! message, reason and HTTP code, never as the client's debug dump of it.

use std::error::Error;
use std::fmt;

/// One error of a chain, as it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub text: String,
    /// The HTTP status when this is an API server's answer (401, 403, ...).
    pub http_status: Option<u16>,
}

/// `error` and its causes, outermost first, as [`Link`]s. An API server's answer ends the
/// chain: what it says is all there is.
pub fn chain(error: &(dyn Error + 'static)) -> Vec<Link> {
    let mut links = Vec::new();
    let mut before = String::new();
    let mut next = Some(error);
    while let Some(current) = next {
        if let Some(kube::Error::Api(status)) = current.downcast_ref::<kube::Error>() {
            links.push(Link {
                text: format!(
                    "{} ({}, HTTP {})",
                    status.message, status.reason, status.code
                ),
                http_status: Some(status.code),
            });
            break;
        }
        let text = current.to_string();
        if links.is_empty() || !before.contains(&text) {
            links.push(Link {
                text: text.clone(),
                http_status: None,
            });
        }
        before = text;
        next = current.source();
    }
    links
}

/// An error and its causes on one line, `error: cause: cause`, for a log field.
pub struct OneLine<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for OneLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let texts: Vec<String> = chain(self.0).into_iter().map(|link| link.text).collect();
        f.write_str(&texts.join(": "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A library's error that repeats its source in its own message, as kube's `ServiceError`.
    #[derive(Debug, thiserror::Error)]
    #[error("ServiceError: {0}")]
    struct Repeating(#[source] std::io::Error);

    fn forbidden() -> kube::Error {
        let status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": 403, "reason": "Forbidden",
            "message": "leases.coordination.k8s.io \"op\" is forbidden"
        }))
        .expect("a Status");
        kube::Error::Api(Box::new(status))
    }

    #[test]
    fn a_cause_the_error_before_already_tells_is_left_out() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let error = Repeating(refused);
        assert_eq!(OneLine(&error).to_string(), "ServiceError: refused");
    }

    #[test]
    fn an_api_answer_is_its_message_reason_and_code_never_the_status_dump() {
        let error = forbidden();
        let links = chain(&error);
        assert_eq!(
            links,
            [Link {
                text: "leases.coordination.k8s.io \"op\" is forbidden (Forbidden, HTTP 403)".into(),
                http_status: Some(403),
            }]
        );
        assert!(!OneLine(&error).to_string().contains("Status"));
    }
}
