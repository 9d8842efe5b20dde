//! FrameworkController's configuration file, `frameworkcontroller.yaml`: read as
//! FrameworkController reads it, every field optional with its default, and checked by the
//! same rules, each refusal naming the field and what to write instead.
//!
//! The fields the Framework controller applies: `podFailureSpec` (how a failed pod is
//! classified, [`super::pod_failure`]), the Framework's retry delay for a transient conflict
//! (`frameworkMinRetryDelaySecForTransientConflictFailed` and its max), how long a created
//! object may take to reach the cache (`objectLocalCacheCreationTimeoutSec`) and how many
//! Frameworks are reconciled at once (`workerNumber`). The others are read and checked, and
//! apply elsewhere or not at all: the connection (`kubeApiServerAddress`, `kubeConfigFilePath`,
//! `kubeClientQps`, `kubeClientBurst`) is the operator's own (`--kubeconfig`), the CRD is
//! applied by the deployer, not the controller (`crdEstablishedCheck*`), completed Frameworks
//! are kept until deleted (`frameworkCompletedRetainSec`), snapshots are not logged
//! (`logObjectSnapshot`), and statuses are never compressed (`largeFrameworkCompression: true`
//! is refused: a Framework too large to store is refused at admission instead).
//!
//! Without a file, the configuration is `frameworkcontroller.yaml` beside this module: the same
//! values as FrameworkController's default file.

use std::collections::BTreeMap;
use std::sync::LazyLock;
use std::time::Duration;

use regex::Regex;
use serde::Deserialize;

use super::api::CompletionTypeAttribute;
use super::pod_failure::{CodeInfo, ContainerPattern, PodPattern, Range, Texts};

/// The file FrameworkController reads from its working directory.
pub const FILE_NAME: &str = "frameworkcontroller.yaml";

/// The configuration when no file is given.
pub const DEFAULT: &str = include_str!("frameworkcontroller.yaml");

/// The configuration when no file is given, read once.
pub static BUILTIN: LazyLock<FcConfig> = LazyLock::new(FcConfig::default);

/// The configuration the Framework controller runs with.
#[derive(Clone, Debug)]
pub struct FcConfig {
    /// The configured codes, after the container contract's built-in ones.
    pub pod_failure: Vec<CodeInfo>,
    /// The range of the Framework's delay before it retries a transient conflict, in seconds.
    pub conflict_delay_sec: (i64, i64),
    /// How long a created ConfigMap or pod may take to appear in the cache.
    pub cache_creation_timeout: Duration,
    /// How many Frameworks are reconciled at once, if the file says.
    pub workers: Option<u16>,
}

/// Why a configuration is refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{0}")]
    Yaml(#[from] serde_yaml::Error),
    #[error("{field} {value} {rule}")]
    Field {
        field: String,
        value: String,
        rule: String,
    },
    #[error("podFailureSpec[{index}]: {problem}")]
    Spec { index: usize, problem: String },
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Raw {
    // Read so that a file with them is taken (and their types checked); not acted on.
    #[serde(rename = "kubeApiServerAddress")]
    _kube_api_server_address: Option<String>,
    #[serde(rename = "kubeConfigFilePath")]
    _kube_config_file_path: Option<String>,
    kube_client_qps: Option<f64>,
    kube_client_burst: Option<i64>,
    worker_number: Option<i64>,
    large_framework_compression: Option<bool>,
    #[serde(rename = "crdEstablishedCheckIntervalSec")]
    crd_check_interval_sec: Option<i64>,
    #[serde(rename = "crdEstablishedCheckTimeoutSec")]
    crd_check_timeout_sec: Option<i64>,
    object_local_cache_creation_timeout_sec: Option<i64>,
    framework_completed_retain_sec: Option<i64>,
    #[serde(rename = "frameworkMinRetryDelaySecForTransientConflictFailed")]
    min_conflict_delay_sec: Option<i64>,
    #[serde(rename = "frameworkMaxRetryDelaySecForTransientConflictFailed")]
    max_conflict_delay_sec: Option<i64>,
    #[serde(rename = "logObjectSnapshot")]
    _log_object_snapshot: Option<serde_yaml::Value>,
    pod_failure_spec: Option<Vec<RawCodeInfo>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawCodeInfo {
    code: Option<i32>,
    #[serde(default)]
    phrase: String,
    #[serde(default, rename = "type")]
    type_: RawType,
    #[serde(default)]
    pod_patterns: Vec<Option<RawPodPattern>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawType {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    attributes: Vec<CompletionTypeAttribute>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawPodPattern {
    name_regex: Option<String>,
    reason_regex: Option<String>,
    message_regex: Option<String>,
    #[serde(default)]
    containers: Vec<Option<RawContainerPattern>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawContainerPattern {
    name_regex: Option<String>,
    reason_regex: Option<String>,
    message_regex: Option<String>,
    #[serde(default)]
    signal_range: RawRange,
    #[serde(default)]
    code_range: RawRange,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawRange {
    min: Option<i32>,
    max: Option<i32>,
}

impl Default for FcConfig {
    fn default() -> Self {
        FcConfig::parse(DEFAULT).expect("the built-in configuration is valid")
    }
}

impl FcConfig {
    /// The configuration a file's text gives, checked as FrameworkController checks it.
    pub fn parse(text: &str) -> Result<FcConfig, ConfigError> {
        let raw: Raw = serde_yaml::from_str::<Option<Raw>>(text)?.unwrap_or_default();
        check_unapplied(&raw)?;
        let min = raw.min_conflict_delay_sec.unwrap_or(60);
        let max = raw.max_conflict_delay_sec.unwrap_or(15 * 60);
        at_least(
            "frameworkMinRetryDelaySecForTransientConflictFailed",
            min,
            0,
        )?;
        at_least(
            "frameworkMaxRetryDelaySecForTransientConflictFailed",
            max,
            min,
        )?;
        let cache = raw.object_local_cache_creation_timeout_sec.unwrap_or(300);
        at_least("objectLocalCacheCreationTimeoutSec", cache, 60)?;
        let workers = raw.worker_number.map(workers).transpose()?;
        let spec = raw.pod_failure_spec.unwrap_or_default();
        let pod_failure = spec
            .into_iter()
            .enumerate()
            .map(|(index, info)| {
                code_info(info).map_err(|problem| ConfigError::Spec { index, problem })
            })
            .collect::<Result<Vec<_>, _>>()?;
        unique_codes(&pod_failure)?;
        Ok(FcConfig {
            pod_failure: [contract(), pod_failure].concat(),
            conflict_delay_sec: (min, max),
            cache_creation_timeout: Duration::from_secs(cache.unsigned_abs()),
            workers,
        })
    }
}

/// The fields read and checked that the controller does not apply: in range, and no
/// compression asked for.
fn check_unapplied(raw: &Raw) -> Result<(), ConfigError> {
    if let Some(qps) = raw.kube_client_qps.filter(|q| *q <= 0.0 || *q > 10000.0) {
        return Err(field("kubeClientQps", qps, "should be within (0, 10000]"));
    }
    if let Some(burst) = raw.kube_client_burst.filter(|b| !(0..=10000).contains(b)) {
        return Err(field(
            "kubeClientBurst",
            burst,
            "should be within [0, 10000]",
        ));
    }
    at_least(
        "crdEstablishedCheckIntervalSec",
        raw.crd_check_interval_sec.unwrap_or(1),
        1,
    )?;
    at_least(
        "crdEstablishedCheckTimeoutSec",
        raw.crd_check_timeout_sec.unwrap_or(60),
        10,
    )?;
    at_least(
        "frameworkCompletedRetainSec",
        raw.framework_completed_retain_sec.unwrap_or(0),
        0,
    )?;
    if raw.large_framework_compression == Some(true) {
        return Err(field(
            "largeFrameworkCompression",
            true,
            "is not supported: mlkube never compresses a Framework's status, and refuses at \
             admission a Framework too large to store (more than 800 Tasks); set it to false",
        ));
    }
    Ok(())
}

fn field(name: &str, value: impl ToString, rule: &str) -> ConfigError {
    ConfigError::Field {
        field: name.to_owned(),
        value: value.to_string(),
        rule: rule.to_owned(),
    }
}

fn at_least(name: &str, value: i64, least: i64) -> Result<(), ConfigError> {
    if value < least {
        return Err(field(
            name,
            value,
            &format!("should not be less than {least}"),
        ));
    }
    Ok(())
}

fn workers(n: i64) -> Result<u16, ConfigError> {
    u16::try_from(n)
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| field("workerNumber", n, "should be within [1, 65535]"))
}

/// The container contract's codes, which FrameworkController defines before any configured
/// one: exit code 200, 201 or 210 of any container.
fn contract() -> Vec<CodeInfo> {
    use CompletionTypeAttribute::{Conflict, Permanent, Transient};
    let any = || Some(Regex::new("(?ms).*").expect("a valid regex"));
    let texts = || Texts {
        name: any(),
        reason: None,
        message: any(),
    };
    let info = |code: i32, phrase: &str, attributes: Vec<CompletionTypeAttribute>| CodeInfo {
        code,
        phrase: phrase.to_owned(),
        attributes,
        patterns: vec![PodPattern {
            containers: vec![ContainerPattern {
                texts: texts(),
                code: Range::exactly(code),
                ..ContainerPattern::default()
            }],
            ..PodPattern::default()
        }],
    };
    vec![
        info(200, "ContainerTransientFailed", vec![Transient]),
        info(
            201,
            "ContainerTransientConflictFailed",
            vec![Transient, Conflict],
        ),
        info(210, "ContainerPermanentFailed", vec![Permanent]),
    ]
}

fn code_info(raw: RawCodeInfo) -> Result<CodeInfo, String> {
    let code = raw.code.ok_or("code is missing")?;
    if (-999..=0).contains(&code) || (200..=219).contains(&code) {
        return Err(format!(
            "code {code} is reserved (-999 to 0, and 200 to 219, are FrameworkController's own); \
             choose another"
        ));
    }
    if raw.type_.name.as_deref().is_some_and(|n| n != "Failed") {
        return Err(
            "type.name must be Failed (or left out): the spec classifies failed pods".into(),
        );
    }
    if raw.pod_patterns.is_empty() {
        return Err(format!("code {code} has no podPatterns"));
    }
    let patterns = raw
        .pod_patterns
        .into_iter()
        .map(|p| pod_pattern(p.ok_or("a pod pattern is empty (null)")?))
        .collect::<Result<Vec<_>, String>>()?;
    Ok(CodeInfo {
        code,
        phrase: raw.phrase,
        attributes: raw.type_.attributes,
        patterns,
    })
}

fn pod_pattern(raw: RawPodPattern) -> Result<PodPattern, String> {
    let containers = raw
        .containers
        .into_iter()
        .map(|c| container_pattern(c.ok_or("a container pattern is empty (null)")?))
        .collect::<Result<Vec<_>, String>>()?;
    let regexes = [raw.name_regex, raw.reason_regex, raw.message_regex];
    Ok(PodPattern {
        texts: texts("", regexes)?,
        containers,
    })
}

fn container_pattern(raw: RawContainerPattern) -> Result<ContainerPattern, String> {
    let range = |r: RawRange| Range {
        min: r.min,
        max: r.max,
    };
    let regexes = [raw.name_regex, raw.reason_regex, raw.message_regex];
    Ok(ContainerPattern {
        texts: texts("containers[].", regexes)?,
        signal: range(raw.signal_range),
        code: range(raw.code_range),
    })
}

/// A pattern's name, reason and message regexes, its fields named after `prefix`.
fn texts(prefix: &str, [name, reason, message]: [Option<String>; 3]) -> Result<Texts, String> {
    Ok(Texts {
        name: regex(&format!("{prefix}nameRegex"), name)?,
        reason: regex(&format!("{prefix}reasonRegex"), reason)?,
        message: regex(&format!("{prefix}messageRegex"), message)?,
    })
}

/// A pattern's regex; an empty one matches anything, as one left out.
fn regex(field: &str, text: Option<String>) -> Result<Option<Regex>, String> {
    match text.filter(|t| !t.is_empty()) {
        None => Ok(None),
        Some(text) => Regex::new(&text)
            .map(Some)
            .map_err(|e| format!("{field} {text:?} is not a valid regular expression: {e}")),
    }
}

fn unique_codes(spec: &[CodeInfo]) -> Result<(), ConfigError> {
    let mut seen: BTreeMap<i32, usize> = BTreeMap::new();
    for (index, info) in spec.iter().enumerate() {
        if let Some(first) = seen.insert(info.code, index) {
            return Err(ConfigError::Spec {
                index,
                problem: format!(
                    "code {} is already podFailureSpec[{first}]'s; give each code once, with all its podPatterns",
                    info.code
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    use super::*;
    use crate::operator::fc::completion::classify_failed;

    fn exited(code: i32, reason: &str) -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": "p"}, "status": {"phase": "Failed",
            "reason": reason, "containerStatuses": [{"name": "main", "ready": false,
            "restartCount": 0, "image": "x", "imageID": "",
            "state": {"terminated": {"exitCode": code}}}]}}),
        )
        .unwrap()
    }

    fn refusal(text: &str) -> String {
        FcConfig::parse(text).expect_err(text).to_string()
    }

    #[test]
    fn without_a_file_the_defaults_are_frameworkcontrollers() {
        let config = FcConfig::default();
        let codes: Vec<i32> = config.pod_failure.iter().map(|c| c.code).collect();
        assert_eq!(codes.len(), 3 + 22);
        assert_eq!(codes[..5], [200, 201, 210, -1000, -1001]);
        assert_eq!(config.conflict_delay_sec, (60, 900));
        assert_eq!(config.cache_creation_timeout, Duration::from_secs(300));
        assert_eq!(config.workers, None);
    }

    #[test]
    fn a_files_spec_replaces_the_defaults_after_the_container_contract() {
        let config = FcConfig::parse(
            "podFailureSpec:\n- code: 300\n  phrase: DataMissing\n  type: {attributes: \
             [Permanent]}\n  podPatterns:\n  - containers: [{codeRange: {min: 3, max: 3}}]\n\
             frameworkMinRetryDelaySecForTransientConflictFailed: 5\n\
             frameworkMaxRetryDelaySecForTransientConflictFailed: 10\nworkerNumber: 4\n",
        )
        .expect("a valid file");
        let status = classify_failed(&exited(3, ""), &config.pod_failure).status;
        assert_eq!((status.code, status.phrase.as_str()), (300, "DataMissing"));
        assert_eq!(
            status.diagnostics,
            r#"Pod failed: PodPattern matched: {"containers":[{"code":3}]}"#
        );
        assert_eq!(
            status.type_.attributes,
            [CompletionTypeAttribute::Permanent]
        );
        // No default rule is left: an eviction is told by its container's exit alone.
        let evicted = classify_failed(&exited(137, "Evicted"), &config.pod_failure).status;
        assert_eq!(
            (evicted.code, evicted.phrase.as_str()),
            (137, "ContainerUnrecognizedFailed")
        );
        let contract = classify_failed(&exited(210, ""), &config.pod_failure).status;
        assert_eq!(contract.code, 210);
        assert_eq!(config.conflict_delay_sec, (5, 10));
        assert_eq!(config.workers, Some(4));
    }

    #[test]
    fn a_file_frameworkcontroller_would_refuse_is_refused_naming_the_field() {
        let spec = |entry: &str| format!("podFailureSpec:\n- {entry}\n");
        let pattern = "podPatterns: [{reasonRegex: x}]";
        for (text, expected) in [
            (
                spec(&format!("{{code: -5, {pattern}}}")),
                "podFailureSpec[0]: code -5 is reserved",
            ),
            (
                spec(&format!("{{code: 205, {pattern}}}")),
                "code 205 is reserved",
            ),
            (
                spec("{code: 300}"),
                "podFailureSpec[0]: code 300 has no podPatterns",
            ),
            (
                spec(&format!("{{{pattern}}}")),
                "podFailureSpec[0]: code is missing",
            ),
            (
                format!(
                    "{}- {{code: 300, {pattern}}}\n",
                    spec(&format!("{{code: 300, {pattern}}}"))
                ),
                "podFailureSpec[1]: code 300 is already podFailureSpec[0]'s",
            ),
            (
                spec("{code: 300, podPatterns: [{reasonRegex: '(x'}]}"),
                "reasonRegex \"(x\" is not a valid regular expression",
            ),
            (
                spec(&format!(
                    "{{code: 300, type: {{name: Succeeded}}, {pattern}}}"
                )),
                "type.name must be Failed",
            ),
            (
                "podFailureSpecs: []\n".into(),
                "unknown field `podFailureSpecs`",
            ),
            (
                "largeFrameworkCompression: true\n".into(),
                "largeFrameworkCompression true is not supported",
            ),
            (
                "frameworkMinRetryDelaySecForTransientConflictFailed: 100\n\
                 frameworkMaxRetryDelaySecForTransientConflictFailed: 50\n"
                    .into(),
                "frameworkMaxRetryDelaySecForTransientConflictFailed 50 should not be less than 100",
            ),
            (
                "workerNumber: 0\n".into(),
                "workerNumber 0 should be within [1, 65535]",
            ),
            (
                "kubeClientQps: 0\n".into(),
                "kubeClientQps 0 should be within (0, 10000]",
            ),
            (
                "objectLocalCacheCreationTimeoutSec: 10\n".into(),
                "should not be less than 60",
            ),
        ] {
            let error = refusal(&text);
            assert!(error.contains(expected), "{text}: {error}");
        }
        let empty = FcConfig::parse("").expect("an empty file is all defaults");
        assert_eq!(empty.pod_failure.len(), 3, "the container contract alone");
    }
}
