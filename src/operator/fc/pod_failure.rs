//! How a failed pod is classified: FrameworkController's `podFailureSpec`, a list of completion
//! codes each with the pod patterns that select it, tried in order (the container contract's
//! 200, 201 and 210 first, built in, then the configured ones); the first pattern that matches
//! gives the code, and the diagnostics show what it matched.
//!
//! A pod pattern matches when each of its regexes finds a match in the pod's name, status reason
//! and status message, and each of its container patterns matches some container of the pod
//! (init containers first); a container pattern matches when each regex finds a match in the
//! container's name and, once terminated, its reason and message, and its signal and exit code
//! are in range. A field the pattern leaves out matches anything, and is left out of what the
//! diagnostics show; what they show of a field is the text its regex found, as
//! FrameworkController's own matching shows it.

use k8s_openapi::api::core::v1::{ContainerStateTerminated, ContainerStatus, Pod};
use regex::Regex;
use serde::Serialize;

use super::api::{CompletionStatus, CompletionType, CompletionTypeAttribute, CompletionTypeName};

/// A completion code of the failure spec: its number, phrase, attributes and the patterns that
/// select it.
#[derive(Clone, Debug)]
pub struct CodeInfo {
    pub code: i32,
    pub phrase: String,
    pub attributes: Vec<CompletionTypeAttribute>,
    pub patterns: Vec<PodPattern>,
}

/// The regexes a pattern applies to a pod's or a container's name, reason and message; one
/// left out matches anything.
#[derive(Clone, Debug, Default)]
pub struct Texts {
    pub name: Option<Regex>,
    pub reason: Option<Regex>,
    pub message: Option<Regex>,
}

#[derive(Clone, Debug, Default)]
pub struct PodPattern {
    pub texts: Texts,
    pub containers: Vec<ContainerPattern>,
}

#[derive(Clone, Debug, Default)]
pub struct ContainerPattern {
    pub texts: Texts,
    pub signal: Range,
    pub code: Range,
}

/// An inclusive range of integers; a bound left out is open, both left out match anything.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Range {
    pub min: Option<i32>,
    pub max: Option<i32>,
}

impl Range {
    pub const fn exactly(n: i32) -> Range {
        Range {
            min: Some(n),
            max: Some(n),
        }
    }

    fn is_any(&self) -> bool {
        self.min.is_none() && self.max.is_none()
    }

    fn contains(&self, n: i32) -> bool {
        self.min.is_none_or(|min| n >= min) && self.max.is_none_or(|max| n <= max)
    }
}

impl CodeInfo {
    pub fn status(&self, diagnostics: impl Into<String>) -> CompletionStatus {
        CompletionStatus {
            code: self.code,
            phrase: self.phrase.clone(),
            type_: CompletionType {
                name: CompletionTypeName::Failed,
                attributes: self.attributes.clone(),
            },
            diagnostics: diagnostics.into(),
        }
    }
}

/// What a pattern matched of a pod, as the diagnostics show it.
#[derive(Serialize, Default)]
pub struct MatchedPod<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "str::is_empty")]
    reason: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    message: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    containers: Vec<MatchedContainer<'a>>,
}

#[derive(Serialize, Default, PartialEq, Eq)]
struct MatchedContainer<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "str::is_empty")]
    reason: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    message: &'a str,
    #[serde(skip_serializing_if = "is_zero")]
    signal: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<i32>,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// The first code of `spec` one of whose patterns matches `pod`, with what it matched.
pub fn first_match<'a>(
    spec: &'a [CodeInfo],
    pod: &'a Pod,
) -> Option<(&'a CodeInfo, MatchedPod<'a>)> {
    spec.iter().find_map(|info| {
        let matched = info.patterns.iter().find_map(|p| match_pod(p, pod))?;
        Some((info, matched))
    })
}

/// What `text` holds that `regex` finds: `Some("")` for no regex (the field is not looked at,
/// and not shown), `None` when the regex finds nothing.
fn found<'a>(regex: Option<&Regex>, text: &'a str) -> Option<&'a str> {
    match regex {
        None => Some(""),
        Some(regex) => regex.find(text).map(|m| m.as_str()),
    }
}

fn match_pod<'a>(pattern: &PodPattern, pod: &'a Pod) -> Option<MatchedPod<'a>> {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let status = pod.status.as_ref();
    let reason = status.and_then(|s| s.reason.as_deref()).unwrap_or_default();
    let message = status
        .and_then(|s| s.message.as_deref())
        .unwrap_or_default();
    let texts = &pattern.texts;
    let mut matched = MatchedPod {
        name: match &texts.name {
            Some(regex) => Some(regex.find(name)?.as_str()),
            None => None,
        },
        reason: found(texts.reason.as_ref(), reason)?,
        message: found(texts.message.as_ref(), message)?,
        containers: Vec::new(),
    };
    let containers = all_containers(pod);
    for container_pattern in &pattern.containers {
        let seen = containers
            .iter()
            .find_map(|c| match_container(container_pattern, c))?;
        if seen != MatchedContainer::default() {
            matched.containers.push(seen);
        }
    }
    Some(matched)
}

/// Every container status of the pod, init containers first.
fn all_containers(pod: &Pod) -> Vec<&ContainerStatus> {
    let Some(status) = pod.status.as_ref() else {
        return Vec::new();
    };
    (status.init_container_statuses.iter().flatten())
        .chain(status.container_statuses.iter().flatten())
        .collect()
}

fn match_container<'a>(
    pattern: &ContainerPattern,
    container: &'a ContainerStatus,
) -> Option<MatchedContainer<'a>> {
    let terminated: Option<&ContainerStateTerminated> =
        container.state.as_ref().and_then(|s| s.terminated.as_ref());
    let texts = &pattern.texts;
    let needs_end = texts.reason.is_some()
        || texts.message.is_some()
        || !pattern.signal.is_any()
        || !pattern.code.is_any();
    if needs_end && terminated.is_none() {
        return None;
    }
    let reason = terminated.and_then(|t| t.reason.as_deref());
    let message = terminated.and_then(|t| t.message.as_deref());
    let name = match &texts.name {
        Some(regex) => Some(regex.find(&container.name)?.as_str()),
        None => None,
    };
    let signal = terminated.and_then(|t| t.signal).unwrap_or(0);
    let code = terminated.map_or(0, |t| t.exit_code);
    let in_range = |range: &Range, n: i32| range.is_any() || range.contains(n);
    if !in_range(&pattern.signal, signal) || !in_range(&pattern.code, code) {
        return None;
    }
    Some(MatchedContainer {
        name,
        reason: found(texts.reason.as_ref(), reason.unwrap_or_default())?,
        message: found(texts.message.as_ref(), message.unwrap_or_default())?,
        signal: if pattern.signal.is_any() { 0 } else { signal },
        code: (!pattern.code.is_any()).then_some(code),
    })
}
