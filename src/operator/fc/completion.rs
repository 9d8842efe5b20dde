//! Completion codes: FrameworkController's predefined ones, and how a failed pod is turned into
//! one (its pod failure classification, [`pod_failure`]: the container contract 200/201/210
//! first, then the configuration's `podFailureSpec`, then the failing container's exit).

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use super::api::{
    CompletionStatus, CompletionType, CompletionTypeAttribute as Attr, CompletionTypeName,
    ContainerCompletionStatus, PodCompletionStatus, TaskAttemptCompletionStatus,
};
use super::pod_failure::{self, CodeInfo};

/// A predefined completion code: its number, phrase and type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Code {
    pub code: i32,
    pub phrase: &'static str,
    pub succeeded: bool,
    pub attributes: &'static [Attr],
}

const fn failed(code: i32, phrase: &'static str, attributes: &'static [Attr]) -> Code {
    Code {
        code,
        phrase,
        succeeded: false,
        attributes,
    }
}

pub const SUCCEEDED: Code = Code {
    code: 0,
    phrase: "Succeeded",
    succeeded: true,
    attributes: &[],
};
pub const CONTAINER_TRANSIENT_FAILED: Code =
    failed(200, "ContainerTransientFailed", &[Attr::Transient]);
pub const CONTAINER_TRANSIENT_CONFLICT_FAILED: Code = failed(
    201,
    "ContainerTransientConflictFailed",
    &[Attr::Transient, Attr::Conflict],
);
pub const CONTAINER_PERMANENT_FAILED: Code =
    failed(210, "ContainerPermanentFailed", &[Attr::Permanent]);
pub const CONFIG_MAP_EXTERNAL_DELETED: Code =
    failed(-100, "ConfigMapExternalDeleted", &[Attr::Transient]);
pub const POD_EXTERNAL_DELETED: Code = failed(-101, "PodExternalDeleted", &[Attr::Transient]);
pub const CONFIG_MAP_LOCAL_CACHE_CREATION_TIMEOUT: Code = failed(
    -110,
    "ConfigMapLocalCacheCreationTimeout",
    &[Attr::Transient],
);
pub const POD_LOCAL_CACHE_CREATION_TIMEOUT: Code =
    failed(-111, "PodLocalCacheCreationTimeout", &[Attr::Transient]);
pub const POD_CREATION_PERMANENT_ERROR: Code =
    failed(-200, "PodCreationPermanentError", &[Attr::Permanent]);
pub const STOP_FRAMEWORK_REQUESTED: Code =
    failed(-210, "StopFrameworkRequested", &[Attr::Permanent]);
pub const FRAMEWORK_ATTEMPT_COMPLETION: Code =
    failed(-220, "FrameworkAttemptCompletion", &[Attr::Permanent]);
pub const DELETE_TASK_REQUESTED: Code = failed(-230, "DeleteTaskRequested", &[Attr::Permanent]);
/// mlkube's own, in the controller's reserved range: the spec cannot run as it is (TaskRole
/// names not unique, too many Tasks); see `check`. Never retried.
pub const FRAMEWORK_SPEC_INVALID: Code = failed(-240, "FrameworkSpecInvalid", &[Attr::Permanent]);
pub const POD_FAILED_WITHOUT_FAILED_CONTAINER: Code =
    failed(-300, "PodFailedWithoutFailedContainer", &[]);
pub const POD_CREATION_UNKNOWN_ERROR: Code = failed(-310, "PodCreationUnknownError", &[]);

/// The codes that end an attempt on purpose: never retried.
pub const NEVER_RETRIED: [i32; 4] = [
    STOP_FRAMEWORK_REQUESTED.code,
    FRAMEWORK_ATTEMPT_COMPLETION.code,
    DELETE_TASK_REQUESTED.code,
    FRAMEWORK_SPEC_INVALID.code,
];

impl Code {
    pub fn status(&self, diagnostics: impl Into<String>) -> CompletionStatus {
        CompletionStatus {
            code: self.code,
            phrase: self.phrase.to_owned(),
            type_: CompletionType {
                name: if self.succeeded {
                    CompletionTypeName::Succeeded
                } else {
                    CompletionTypeName::Failed
                },
                attributes: self.attributes.to_vec(),
            },
            diagnostics: diagnostics.into(),
        }
    }

    pub fn task(&self, diagnostics: impl Into<String>) -> TaskAttemptCompletionStatus {
        TaskAttemptCompletionStatus {
            status: self.status(diagnostics),
            pod: None,
        }
    }
}

/// The code of a Task's attempt whose pod the API server refused, by the refusal's HTTP status
/// and message: one a retry cannot fix (bad request, forbidden, too large, invalid) completes
/// the attempt; `None` for the rest (a quota exceeded among them), which is retried with
/// backoff and never recorded.
pub fn classify_pod_creation_error(status: u16, message: &str) -> Option<Code> {
    if ![400, 403, 413, 422].contains(&status) || message.contains("exceeded quota") {
        return None;
    }
    Some(if [413, 422].contains(&status) {
        POD_CREATION_PERMANENT_ERROR
    } else {
        POD_CREATION_UNKNOWN_ERROR
    })
}

/// The containers of `pod` that terminated, init containers first.
fn terminated(pod: &Pod) -> Vec<ContainerCompletionStatus> {
    let Some(status) = pod.status.as_ref() else {
        return Vec::new();
    };
    let statuses: Vec<&ContainerStatus> = status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten())
        .collect();
    statuses
        .into_iter()
        .filter_map(|c| {
            let t = c.state.as_ref()?.terminated.as_ref()?;
            Some(ContainerCompletionStatus {
                name: c.name.clone(),
                reason: t.reason.clone().filter(|r| !r.is_empty()),
                message: t.message.clone().filter(|m| !m.is_empty()),
                signal: t.signal.filter(|s| *s != 0),
                code: t.exit_code,
            })
        })
        .collect()
}

/// What `pod` says about how it ended, for the Task's completion status.
pub fn pod_completion(pod: &Pod) -> PodCompletionStatus {
    let status = pod.status.as_ref();
    PodCompletionStatus {
        reason: status
            .and_then(|s| s.reason.clone())
            .filter(|r| !r.is_empty()),
        message: status
            .and_then(|s| s.message.clone())
            .filter(|m| !m.is_empty()),
        containers: terminated(pod),
    }
}

/// The completion of a pod in phase Failed, classified by `spec` (the configuration's
/// `podFailureSpec`, after the container contract).
pub fn classify_failed(pod: &Pod, spec: &[CodeInfo]) -> TaskAttemptCompletionStatus {
    let detail = pod_completion(pod);
    let json = serde_json::to_string(&detail).unwrap_or_default();
    let status = if let Some((code, seen)) = pod_failure::first_match(spec, pod) {
        let seen = serde_json::to_string(&seen).unwrap_or_default();
        code.status(format!("Pod failed: PodPattern matched: {seen}"))
    } else {
        let diagnostics = format!("Pod failed: PodPattern unmatched: {json}");
        // The last container to finish with a failure speaks for the pod.
        let last_failed = pod
            .status
            .iter()
            .flat_map(|s| {
                s.init_container_statuses
                    .iter()
                    .flatten()
                    .chain(s.container_statuses.iter().flatten())
            })
            .filter_map(|c| c.state.as_ref()?.terminated.as_ref())
            .filter(|t| t.exit_code != 0)
            .max_by_key(|t| t.finished_at.as_ref().map(|f| f.0));
        match last_failed {
            Some(t) => failed(t.exit_code, "ContainerUnrecognizedFailed", &[]).status(diagnostics),
            None => POD_FAILED_WITHOUT_FAILED_CONTAINER.status(diagnostics),
        }
    };
    TaskAttemptCompletionStatus {
        status,
        pod: Some(detail),
    }
}

/// The completion of a pod in phase Succeeded.
pub fn succeeded(pod: &Pod) -> TaskAttemptCompletionStatus {
    TaskAttemptCompletionStatus {
        status: SUCCEEDED.status("Pod succeeded"),
        pod: Some(pod_completion(pod)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::fc::config::BUILTIN;

    fn spec() -> &'static [CodeInfo] {
        &BUILTIN.pod_failure
    }
    use serde_json::json;

    fn failed_pod(reason: Option<&str>, exits: &[(i32, Option<&str>)]) -> Pod {
        let containers: Vec<_> = exits
            .iter()
            .enumerate()
            .map(|(i, (code, reason))| {
                json!({"name": format!("c{i}"), "ready": false, "restartCount": 0, "image": "x",
                       "imageID": "", "state": {"terminated": {"exitCode": code, "reason": reason,
                       "finishedAt": format!("2026-01-01T00:00:0{i}Z")}}})
            })
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "status": {"phase": "Failed", "reason": reason, "containerStatuses": containers}
        }))
        .unwrap()
    }

    #[test]
    fn the_container_contract_decides_first() {
        for (exit, code, attributes) in [
            (200, 200, vec![Attr::Transient]),
            (201, 201, vec![Attr::Transient, Attr::Conflict]),
            (210, 210, vec![Attr::Permanent]),
            (137, 137, vec![Attr::Transient]),
            (139, 139, vec![Attr::Permanent]),
        ] {
            let c = classify_failed(&failed_pod(None, &[(exit, Some("Error"))]), spec());
            assert_eq!(c.status.code, code, "{exit}");
            assert_eq!(c.status.type_.attributes, attributes, "{exit}");
            assert!(
                c.status
                    .diagnostics
                    .starts_with("Pod failed: PodPattern matched: ")
            );
        }
    }

    #[test]
    fn a_matched_pattern_shows_only_what_it_looked_at_as_frameworkcontroller_does() {
        let diagnostics = |pod: Pod| classify_failed(&pod, spec()).status.diagnostics;
        let prefix = "Pod failed: PodPattern matched: ";
        for (pod, seen) in [
            (
                failed_pod(None, &[(0, None), (210, Some("Error"))]),
                r#"{"containers":[{"name":"c1","code":210}]}"#,
            ),
            (
                failed_pod(None, &[(137, Some("Error"))]),
                r#"{"containers":[{"name":"c0","code":137}]}"#,
            ),
            (
                failed_pod(None, &[(137, Some("OOMKilled"))]),
                r#"{"containers":[{"name":"c0","reason":"OOMKilled","code":137}]}"#,
            ),
            (
                failed_pod(Some("Evicted"), &[(137, Some("Error"))]),
                r#"{"reason":"Evicted"}"#,
            ),
        ] {
            assert_eq!(diagnostics(pod), format!("{prefix}{seen}"));
        }
        let mut evicted = failed_pod(Some("Evicted"), &[]);
        evicted.status.as_mut().unwrap().message = Some("The node was low on memory.".into());
        assert_eq!(
            diagnostics(evicted),
            format!(r#"{prefix}{{"reason":"Evicted","message":"The node was low on memory."}}"#)
        );
    }

    #[test]
    fn an_unknown_exit_is_the_last_failed_containers_code_without_attributes() {
        let c = classify_failed(&failed_pod(None, &[(3, None), (1, Some("Error"))]), spec());
        assert_eq!(
            (c.status.code, c.status.phrase.as_str()),
            (1, "ContainerUnrecognizedFailed")
        );
        assert!(c.status.type_.attributes.is_empty());
        let c = classify_failed(&failed_pod(None, &[(0, None)]), spec());
        assert_eq!(c.status.code, -300);
    }

    #[test]
    fn a_pod_refused_for_good_completes_its_attempt_and_the_rest_is_retried() {
        for (status, message, code) in [
            (400, "Pod in version v1 cannot be handled", Some(-310)),
            (403, "pods is forbidden: unable to validate", Some(-310)),
            (403, "pods is forbidden: exceeded quota: compute", None),
            (413, "request entity too large", Some(-200)),
            (
                422,
                "Pod is invalid: spec.containers: Required value",
                Some(-200),
            ),
            (409, "pods already exists", None),
            (429, "too many requests", None),
            (500, "etcdserver: request timed out", None),
        ] {
            let seen = classify_pod_creation_error(status, message).map(|c| c.code);
            assert_eq!(seen, code, "{status} {message}");
        }
    }

    #[test]
    fn pod_reasons_and_oom_follow_the_default_configuration() {
        assert_eq!(
            classify_failed(&failed_pod(Some("Evicted"), &[]), spec())
                .status
                .code,
            -1000
        );
        assert_eq!(
            classify_failed(&failed_pod(Some("OutOfcpu"), &[]), spec())
                .status
                .code,
            -1002
        );
        let oom = classify_failed(&failed_pod(None, &[(137, Some("OOMKilled"))]), spec());
        assert_eq!(oom.status.code, -1200);
        assert!(oom.status.has(Attr::Permanent));
    }

    #[test]
    fn a_pod_reason_of_any_text_is_classified_without_panicking() {
        // "OutOf" is 5 bytes; "Out" followed by a 3-byte character cuts inside it.
        for reason in ["Out\u{20ac}cpu", "\u{20ac}\u{20ac}", "O"] {
            let c = classify_failed(&failed_pod(Some(reason), &[]), spec());
            assert_eq!(c.status.code, -300, "{reason}");
        }
    }
}
