//! Completion codes: FrameworkController's predefined ones, and how a failed pod is turned into
//! one (its pod failure classification: the container contract 200/201/210 first, then the
//! rules of FrameworkController's default configuration, then the failing container's exit).

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use serde::Serialize;

use super::api::{
    CompletionStatus, CompletionType, CompletionTypeAttribute as Attr, CompletionTypeName,
    ContainerCompletionStatus, PodCompletionStatus, TaskAttemptCompletionStatus,
};

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

/// What a pod rule looks at.
enum Pattern {
    /// The pod's status reason, compared without case.
    PodReason(&'static [&'static str]),
    /// Its reason starts with this (compared without case).
    PodReasonPrefix(&'static str),
    /// A terminated container with this reason (any if `None`), an exit code in
    /// `min..=max`, and, if given, one of these words in its message.
    Container {
        reason: Option<&'static str>,
        min: i32,
        max: i32,
        message_has: &'static [&'static str],
    },
}

const fn exit(min: i32, max: i32) -> Pattern {
    Pattern::Container {
        reason: None,
        min,
        max,
        message_has: &[],
    }
}

const fn cannot_run(code: i32, message_has: &'static [&'static str]) -> Pattern {
    Pattern::Container {
        reason: Some("ContainerCannotRun"),
        min: code,
        max: code,
        message_has,
    }
}

/// The classification, first match wins: the container contract, then FrameworkController's
/// default `podFailureSpec`.
const RULES: &[(Code, Pattern)] = &[
    (CONTAINER_TRANSIENT_FAILED, exit(200, 200)),
    (CONTAINER_TRANSIENT_CONFLICT_FAILED, exit(201, 201)),
    (CONTAINER_PERMANENT_FAILED, exit(210, 210)),
    (
        failed(-1000, "PodEvicted", &[Attr::Transient]),
        Pattern::PodReason(&["Evicted"]),
    ),
    (
        failed(-1001, "PodNodeLost", &[Attr::Transient]),
        Pattern::PodReason(&["NodeLost"]),
    ),
    (
        failed(
            -1002,
            "PodScheduledToInsufficientResourceNode",
            &[Attr::Transient],
        ),
        Pattern::PodReasonPrefix("OutOf"),
    ),
    (
        failed(-1003, "PodPreemptedForCriticalPod", &[Attr::Transient]),
        Pattern::PodReason(&["Preempting"]),
    ),
    (
        failed(-1004, "PodDeadlineExceeded", &[Attr::Permanent]),
        Pattern::PodReason(&["DeadlineExceeded"]),
    ),
    (
        failed(-1005, "PodNodeAdmissionForbidden", &[Attr::Permanent]),
        Pattern::PodReason(&["Forbidden"]),
    ),
    (
        failed(-1006, "PodNodeAdmissionUnexpectedError", &[Attr::Transient]),
        Pattern::PodReason(&[
            "UnexpectedAdmissionError",
            "UnknownReason",
            "InvalidNodeInfo",
            "UnexpectedPredicateFailureType",
        ]),
    ),
    (
        failed(-1200, "ContainerDockerOOMKilled", &[Attr::Permanent]),
        Pattern::Container {
            reason: Some("OOMKilled"),
            min: 1,
            max: i32::MAX,
            message_has: &[],
        },
    ),
    (
        failed(-1201, "ContainerDockerCreationError", &[]),
        cannot_run(125, &[]),
    ),
    (
        failed(
            -1202,
            "ContainerDockerStartCmdPermissionDenied",
            &[Attr::Permanent],
        ),
        cannot_run(126, &[]),
    ),
    (
        failed(-1203, "ContainerDockerStartCmdNotFound", &[Attr::Permanent]),
        cannot_run(127, &[]),
    ),
    (
        failed(-1203, "ContainerDockerStartCmdNotFound", &[Attr::Permanent]),
        cannot_run(128, &["not found", "cannot find", "no such"]),
    ),
    (
        failed(-1204, "ContainerDockerStartUnknownError", &[]),
        cannot_run(128, &[]),
    ),
    (
        failed(130, "ContainerSigIntReceived", &[Attr::Transient]),
        exit(130, 130),
    ),
    (
        failed(131, "ContainerSigQuitReceived", &[Attr::Transient]),
        exit(131, 131),
    ),
    (
        failed(132, "ContainerSigIllReceived", &[Attr::Permanent]),
        exit(132, 132),
    ),
    (failed(134, "ContainerSigAbrtReceived", &[]), exit(134, 134)),
    (
        failed(135, "ContainerSigBusReceived", &[Attr::Permanent]),
        exit(135, 135),
    ),
    (
        failed(136, "ContainerSigFpeReceived", &[Attr::Permanent]),
        exit(136, 136),
    ),
    (
        failed(137, "ContainerSigKillReceived", &[Attr::Transient]),
        exit(137, 137),
    ),
    (
        failed(139, "ContainerSigSegvReceived", &[Attr::Permanent]),
        exit(139, 139),
    ),
    (
        failed(141, "ContainerSigPipeReceived", &[Attr::Permanent]),
        exit(141, 141),
    ),
    (
        failed(143, "ContainerSigTermReceived", &[Attr::Transient]),
        exit(143, 143),
    ),
];

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

/// What a matched pattern saw of the pod, as FrameworkController's diagnostics show it: only the
/// fields the pattern looked at (the pod's reason and message; a container's name, reason when
/// the pattern names one, message and exit code), empty ones left out.
#[derive(Serialize)]
struct MatchedPod<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    containers: Vec<MatchedContainer<'a>>,
}

#[derive(Serialize)]
struct MatchedContainer<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
    code: i32,
}

/// What `pattern` matched of `pod`, or `None`.
fn matched<'a>(pattern: &Pattern, pod: &'a PodCompletionStatus) -> Option<MatchedPod<'a>> {
    let reason = pod.reason.as_deref().unwrap_or_default();
    let by_reason = || MatchedPod {
        reason: pod.reason.as_deref(),
        message: pod.message.as_deref(),
        containers: Vec::new(),
    };
    match pattern {
        Pattern::PodReason(reasons) => reasons
            .iter()
            .any(|r| r.eq_ignore_ascii_case(reason))
            .then(by_reason),
        Pattern::PodReasonPrefix(prefix) => (reason.len() > prefix.len()
            && (reason.get(..prefix.len())).is_some_and(|r| r.eq_ignore_ascii_case(prefix))
            && !reason.contains(char::is_whitespace))
        .then(by_reason),
        Pattern::Container { reason, .. } => {
            let container = pod
                .containers
                .iter()
                .find(|c| container_matches(pattern, c))?;
            Some(MatchedPod {
                reason: None,
                message: None,
                containers: vec![MatchedContainer {
                    name: &container.name,
                    reason: reason.and(container.reason.as_deref()),
                    message: container.message.as_deref(),
                    code: container.code,
                }],
            })
        }
    }
}

/// Whether the terminated container `c` matches the container pattern `pattern`.
fn container_matches(pattern: &Pattern, c: &ContainerCompletionStatus) -> bool {
    let Pattern::Container {
        reason,
        min,
        max,
        message_has,
    } = pattern
    else {
        return false;
    };
    let message = c.message.as_deref().unwrap_or_default().to_lowercase();
    (min..=max).contains(&&c.code)
        && reason.is_none_or(|r| {
            c.reason
                .as_deref()
                .is_some_and(|cr| cr.eq_ignore_ascii_case(r))
        })
        && (message_has.is_empty() || message_has.iter().any(|w| message.contains(w)))
}

/// The completion of a pod in phase Failed.
pub fn classify_failed(pod: &Pod) -> TaskAttemptCompletionStatus {
    let detail = pod_completion(pod);
    let json = serde_json::to_string(&detail).unwrap_or_default();
    let first_match = RULES
        .iter()
        .find_map(|(code, p)| Some((code, matched(p, &detail)?)));
    let status = if let Some((code, seen)) = first_match {
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
            let c = classify_failed(&failed_pod(None, &[(exit, Some("Error"))]));
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
        let diagnostics = |pod: Pod| classify_failed(&pod).status.diagnostics;
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
        let c = classify_failed(&failed_pod(None, &[(3, None), (1, Some("Error"))]));
        assert_eq!(
            (c.status.code, c.status.phrase.as_str()),
            (1, "ContainerUnrecognizedFailed")
        );
        assert!(c.status.type_.attributes.is_empty());
        let c = classify_failed(&failed_pod(None, &[(0, None)]));
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
            classify_failed(&failed_pod(Some("Evicted"), &[]))
                .status
                .code,
            -1000
        );
        assert_eq!(
            classify_failed(&failed_pod(Some("OutOfcpu"), &[]))
                .status
                .code,
            -1002
        );
        let oom = classify_failed(&failed_pod(None, &[(137, Some("OOMKilled"))]));
        assert_eq!(oom.status.code, -1200);
        assert!(oom.status.has(Attr::Permanent));
    }

    #[test]
    fn a_pod_reason_of_any_text_is_classified_without_panicking() {
        // "OutOf" is 5 bytes; "Out" followed by a 3-byte character cuts inside it.
        for reason in ["Out\u{20ac}cpu", "\u{20ac}\u{20ac}", "O"] {
            let c = classify_failed(&failed_pod(Some(reason), &[]));
            assert_eq!(c.status.code, -300, "{reason}");
        }
    }
}
