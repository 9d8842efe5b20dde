//! Which runtime serves a predictor's model, as KServe picks it: the runtime the model names
//! (a ServingRuntime of the namespace before a ClusterServingRuntime of that name), else the
//! runtimes that auto-select the model's format over its protocol, the namespace's before the
//! cluster's, each group by the format's priority (highest first; none last), then the
//! runtime's lowest protocol, the newest, and the name. Pure.
//!
//! One difference, on purpose: where the first two candidates tie (the same priority), KServe
//! takes the newer, so creating a runtime can silently move every InferenceService that does
//! not name one on its next revision. Here a tie is refused, saying which runtimes claim the
//! format and how to choose (`Unresolved::Ambiguous`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::api::{ModelSpec, ServingRuntimeSpec};

/// The protocol a model speaks when it names none.
pub const DEFAULT_PROTOCOL: &str = "v1";

/// A runtime the predictor could use.
#[derive(Clone, Copy, Debug)]
pub struct Runtime<'a> {
    pub name: &'a str,
    /// A ClusterServingRuntime (else a ServingRuntime of the InferenceService's namespace).
    pub cluster: bool,
    pub created: Option<&'a Time>,
    pub spec: &'a ServingRuntimeSpec,
}

impl Runtime<'_> {
    fn kind(&self) -> &'static str {
        if self.cluster {
            "ClusterServingRuntime"
        } else {
            "ServingRuntime"
        }
    }

    fn usable(&self) -> bool {
        self.spec.disabled != Some(true)
            && self.spec.multi_model != Some(true)
            && self.spec.worker_spec.is_none()
    }

    fn speaks(&self, protocol: &str) -> bool {
        self.spec.protocol_versions.is_empty()
            || self.spec.protocol_versions.iter().any(|p| p == protocol)
    }

    /// Whether it lists the model's format (and version, when the model gives one); with
    /// `auto`, only entries that auto-select count, as KServe counts them when the model
    /// names no runtime.
    fn lists(&self, format: &str, version: Option<&str>, auto: bool) -> bool {
        (self.spec.supported_model_formats.iter())
            .filter(|f| !auto || f.auto_select == Some(true))
            .any(|f| f.name == format && (version.is_none() || f.version.as_deref() == version))
    }

    fn priority(&self, format: &str) -> Option<i32> {
        (self.spec.supported_model_formats.iter())
            .find(|f| f.name == format)
            .and_then(|f| f.priority)
    }

    /// The lowest protocol it speaks, in KServe's order (v1, v2, grpc-v1, grpc-v2); 5 when it
    /// names none.
    fn lowest_protocol(&self) -> u8 {
        (self.spec.protocol_versions.iter())
            .map(|p| match p.as_str() {
                "v1" => 1,
                "v2" => 2,
                "grpc-v1" => 3,
                "grpc-v2" => 4,
                _ => 5,
            })
            .min()
            .unwrap_or(5)
    }
}

/// Why no runtime was chosen: the reason KServe gives, and a message that names the fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unresolved {
    #[error(
        "predictor.model.modelFormat.name is not set: name the model's format, e.g. xgboost or \
         sklearn"
    )]
    NoFormat,
    #[error(
        "no ServingRuntime {name} in namespace {namespace} and no ClusterServingRuntime {name}: \
         name one of {known} in predictor.model.runtime, or leave it out to auto-select one"
    )]
    NoSuchRuntime {
        name: String,
        namespace: String,
        known: String,
    },
    #[error(
        "{kind} {name} is disabled: name another runtime in predictor.model.runtime, or enable it"
    )]
    Disabled { kind: &'static str, name: String },
    #[error(
        "{kind} {name} does not support model format {format}{version} (it serves {offers}): \
         correct predictor.model.modelFormat, or name a runtime that serves it"
    )]
    FormatNotServed {
        kind: &'static str,
        name: String,
        format: String,
        version: String,
        offers: String,
    },
    #[error(
        "{kind} {name} does not speak protocol {protocol} (it speaks {speaks}): set \
         predictor.model.protocolVersion to one of them"
    )]
    ProtocolNotSpoken {
        kind: &'static str,
        name: String,
        protocol: String,
        speaks: String,
    },
    #[error(
        "no runtime supports model format {format}{version}; the runtimes here serve {known}: \
         correct predictor.model.modelFormat, or add a ServingRuntime for it"
    )]
    UnknownFormat {
        format: String,
        version: String,
        known: String,
    },
    #[error(
        "{runtimes} serve model format {format}{version}, but none auto-selects it over protocol \
         {protocol}{speaks}: {fix}"
    )]
    NoneAutoSelects {
        format: String,
        version: String,
        protocol: String,
        runtimes: String,
        speaks: String,
        fix: String,
    },
    #[error(
        "{first} and {second} both auto-select model format {format} at the same priority: set \
         predictor.model.runtime to the one to use, or give one a higher priority for {format}"
    )]
    Ambiguous {
        format: String,
        first: String,
        second: String,
    },
}

impl Unresolved {
    /// KServe's reason for the failure, as its status says it.
    pub fn reason(&self) -> &'static str {
        match self {
            Unresolved::NoFormat => "InvalidPredictorSpec",
            Unresolved::NoSuchRuntime { .. } => "RuntimeNotRecognized",
            Unresolved::Disabled { .. } => "RuntimeDisabled",
            Unresolved::Ambiguous { .. } => "AmbiguousRuntime",
            _ => "NoSupportingRuntime",
        }
    }
}

/// The runtime that serves `model` in `namespace`, from `runtimes` (the namespace's
/// ServingRuntimes and every ClusterServingRuntime).
pub fn select<'a>(
    model: &ModelSpec,
    namespace: &str,
    runtimes: &[Runtime<'a>],
) -> Result<Runtime<'a>, Box<Unresolved>> {
    let format = (model.model_format.as_ref())
        .filter(|f| !f.name.is_empty())
        .ok_or(Unresolved::NoFormat)?;
    let version = format.version.as_deref();
    let protocol = model
        .protocol_version
        .as_deref()
        .unwrap_or(DEFAULT_PROTOCOL);
    if let Some(name) = model.runtime.as_deref() {
        return named(name, namespace, &format.name, version, protocol, runtimes);
    }
    let mut candidates: Vec<Runtime<'a>> = (runtimes.iter().copied())
        .filter(|r| r.usable() && r.lists(&format.name, version, true) && r.speaks(protocol))
        .collect();
    candidates.sort_by(|a, b| {
        (a.cluster.cmp(&b.cluster))
            .then_with(|| {
                let (pa, pb) = (a.priority(&format.name), b.priority(&format.name));
                // Some before None, higher before lower.
                pb.is_some().cmp(&pa.is_some()).then(pb.cmp(&pa))
            })
            .then_with(|| a.lowest_protocol().cmp(&b.lowest_protocol()))
            .then_with(|| b.created.map(|t| t.0).cmp(&a.created.map(|t| t.0)))
            .then_with(|| a.name.cmp(b.name))
    });
    match candidates.as_slice() {
        [first, second, ..]
            if first.cluster == second.cluster
                && first.priority(&format.name) == second.priority(&format.name) =>
        {
            Err(Box::new(Unresolved::Ambiguous {
                format: format.name.clone(),
                first: format!("{} {}", first.kind(), first.name),
                second: format!("{} {}", second.kind(), second.name),
            }))
        }
        [first, ..] => Ok(*first),
        [] => Err(Box::new(none_auto_selects(
            &format.name,
            version,
            protocol,
            runtimes,
        ))),
    }
}

/// The runtime the model names: the namespace's before the cluster's, if it serves the model.
fn named<'a>(
    name: &str,
    namespace: &str,
    format: &str,
    version: Option<&str>,
    protocol: &str,
    runtimes: &[Runtime<'a>],
) -> Result<Runtime<'a>, Box<Unresolved>> {
    let found = (runtimes.iter().filter(|r| r.name == name))
        .min_by_key(|r| r.cluster)
        .copied();
    let Some(runtime) = found else {
        return Err(Box::new(Unresolved::NoSuchRuntime {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            known: listed(runtimes.iter().map(|r| r.name.to_owned())),
        }));
    };
    if runtime.spec.disabled == Some(true) {
        return Err(Box::new(Unresolved::Disabled {
            kind: runtime.kind(),
            name: name.to_owned(),
        }));
    }
    if !runtime.lists(format, version, false) {
        return Err(Box::new(Unresolved::FormatNotServed {
            kind: runtime.kind(),
            name: name.to_owned(),
            format: format.to_owned(),
            version: version_text(version),
            offers: listed(formats(&[runtime])),
        }));
    }
    if !runtime.speaks(protocol) {
        return Err(Box::new(Unresolved::ProtocolNotSpoken {
            kind: runtime.kind(),
            name: name.to_owned(),
            protocol: protocol.to_owned(),
            speaks: runtime.spec.protocol_versions.join(", "),
        }));
    }
    Ok(runtime)
}

/// Why no runtime auto-selects the format: none lists it at all, or those that do speak
/// another protocol, or do not auto-select it.
fn none_auto_selects(
    format: &str,
    version: Option<&str>,
    protocol: &str,
    runtimes: &[Runtime<'_>],
) -> Unresolved {
    let serving: Vec<&Runtime> = (runtimes.iter())
        .filter(|r| r.usable() && r.lists(format, version, false))
        .collect();
    if serving.is_empty() {
        return Unresolved::UnknownFormat {
            format: format.to_owned(),
            version: version_text(version),
            known: listed(formats(runtimes)),
        };
    }
    let names = listed(serving.iter().map(|r| format!("{} {}", r.kind(), r.name)));
    let other_protocols: Vec<&str> = (serving.iter())
        .filter(|r| r.lists(format, version, true) && !r.speaks(protocol))
        .flat_map(|r| r.spec.protocol_versions.iter().map(String::as_str))
        .collect();
    let (speaks, fix) = match other_protocols.first() {
        Some(other) => (
            format!(
                " (they speak {})",
                listed(other_protocols.iter().map(|p| p.to_string()))
            ),
            format!("set predictor.model.protocolVersion: {other}"),
        ),
        None => (
            String::new(),
            format!("set predictor.model.runtime: {}", serving[0].name),
        ),
    };
    Unresolved::NoneAutoSelects {
        format: format.to_owned(),
        version: version_text(version),
        protocol: protocol.to_owned(),
        runtimes: names,
        speaks,
        fix,
    }
}

fn version_text(version: Option<&str>) -> String {
    version.map(|v| format!(" version {v}")).unwrap_or_default()
}

/// Every format the runtimes list, once each.
fn formats<'a>(runtimes: &'a [Runtime<'a>]) -> impl Iterator<Item = String> + 'a {
    (runtimes.iter())
        .filter(|r| r.usable())
        .flat_map(|r| r.spec.supported_model_formats.iter())
        .map(|f| match &f.version {
            Some(v) => format!("{} {v}", f.name),
            None => f.name.clone(),
        })
}

/// `a, b, c` sorted and once each; `none` when empty.
fn listed(items: impl Iterator<Item = String>) -> String {
    let set: std::collections::BTreeSet<String> = items.collect();
    if set.is_empty() {
        return "none".to_owned();
    }
    set.into_iter().collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::serving::api::{ModelFormat, SupportedModelFormat};

    fn spec(
        formats: &[(&str, Option<&str>, bool, Option<i32>)],
        protocols: &[&str],
    ) -> ServingRuntimeSpec {
        ServingRuntimeSpec {
            supported_model_formats: (formats.iter())
                .map(|(name, version, auto, priority)| SupportedModelFormat {
                    name: (*name).to_owned(),
                    version: version.map(str::to_owned),
                    auto_select: Some(*auto),
                    priority: *priority,
                })
                .collect(),
            protocol_versions: protocols.iter().map(|p| (*p).to_owned()).collect(),
            ..ServingRuntimeSpec::default()
        }
    }

    fn model(format: &str, runtime: Option<&str>, protocol: Option<&str>) -> ModelSpec {
        ModelSpec {
            model_format: Some(ModelFormat {
                name: format.to_owned(),
                version: None,
            }),
            runtime: runtime.map(str::to_owned),
            protocol_version: protocol.map(str::to_owned),
            ..ModelSpec::default()
        }
    }

    fn cluster<'a>(name: &'a str, spec: &'a ServingRuntimeSpec) -> Runtime<'a> {
        Runtime {
            name,
            cluster: true,
            created: None,
            spec,
        }
    }

    #[test]
    fn the_highest_priority_auto_selecting_runtime_that_speaks_the_protocol_wins() {
        let mlserver = spec(
            &[
                ("xgboost", None, true, Some(2)),
                ("sklearn", None, true, Some(1)),
            ],
            &["v2"],
        );
        let xgb = spec(&[("xgboost", None, true, Some(1))], &["v1", "v2"]);
        let runtimes = [cluster("mlserver", &mlserver), cluster("xgbserver", &xgb)];
        let pick = |m: &ModelSpec| select(m, "ns", &runtimes).map(|r| r.name);
        assert_eq!(pick(&model("xgboost", None, Some("v2"))), Ok("mlserver"));
        // v1 (the default) only xgbserver speaks.
        assert_eq!(pick(&model("xgboost", None, None)), Ok("xgbserver"));
        assert_eq!(pick(&model("sklearn", None, Some("v2"))), Ok("mlserver"));
    }

    #[test]
    fn a_namespace_runtime_comes_before_a_cluster_one_whatever_its_priority() {
        let high = spec(&[("xgboost", None, true, Some(9))], &["v2"]);
        let low = spec(&[("xgboost", None, true, None)], &["v2"]);
        let runtimes = [
            cluster("cluster-one", &high),
            Runtime {
                name: "own",
                cluster: false,
                created: None,
                spec: &low,
            },
        ];
        let chosen = select(&model("xgboost", None, Some("v2")), "ns", &runtimes);
        assert_eq!(chosen.map(|r| r.name), Ok("own"));
    }

    #[test]
    fn a_named_runtime_must_exist_serve_the_format_and_speak_the_protocol() {
        let mlserver = spec(&[("xgboost", None, false, None)], &["v2"]);
        let runtimes = [cluster("mlserver", &mlserver)];
        assert_eq!(
            select(
                &model("xgboost", Some("mlserver"), Some("v2")),
                "ns",
                &runtimes
            )
            .map(|r| r.name),
            Ok("mlserver"),
            "a named runtime need not auto-select"
        );
        let missing =
            select(&model("xgboost", Some("nope"), Some("v2")), "ns", &runtimes).unwrap_err();
        assert_eq!(missing.reason(), "RuntimeNotRecognized");
        assert!(
            missing.to_string().contains("name one of mlserver"),
            "{missing}"
        );
        let format = select(
            &model("onnx", Some("mlserver"), Some("v2")),
            "ns",
            &runtimes,
        )
        .unwrap_err();
        assert!(
            format
                .to_string()
                .contains("does not support model format onnx (it serves xgboost)"),
            "{format}"
        );
        let protocol =
            select(&model("xgboost", Some("mlserver"), None), "ns", &runtimes).unwrap_err();
        assert!(
            protocol
                .to_string()
                .contains("set predictor.model.protocolVersion"),
            "{protocol}"
        );
    }

    #[test]
    fn each_failure_to_auto_select_says_what_to_set() {
        let mlserver = spec(
            &[
                ("xgboost", None, true, Some(1)),
                ("lightgbm", None, false, None),
            ],
            &["v2"],
        );
        let runtimes = [cluster("mlserver", &mlserver)];
        let error = |m: ModelSpec| select(&m, "ns", &runtimes).unwrap_err().to_string();
        assert!(error(model("onnx", None, None)).contains(
            "no runtime supports model format onnx; the runtimes here serve lightgbm, xgboost"
        ));
        assert!(
            error(model("xgboost", None, None)).contains("set predictor.model.protocolVersion: v2")
        );
        assert!(
            error(model("lightgbm", None, Some("v2")))
                .contains("set predictor.model.runtime: mlserver")
        );
        assert!(error(ModelSpec::default()).contains("modelFormat.name is not set"));
    }

    #[test]
    fn two_runtimes_claiming_a_format_at_one_priority_are_refused_naming_both() {
        let a = spec(&[("xgboost", None, true, Some(1))], &["v2"]);
        let b = spec(&[("xgboost", None, true, Some(1))], &["v2"]);
        let c = spec(&[("xgboost", None, true, Some(2))], &["v2"]);
        let tied = [cluster("a", &a), cluster("b", &b)];
        let error = select(&model("xgboost", None, Some("v2")), "ns", &tied).unwrap_err();
        assert_eq!(error.reason(), "AmbiguousRuntime");
        assert!(
            error
                .to_string()
                .contains("ClusterServingRuntime a and ClusterServingRuntime b"),
            "{error}"
        );
        let ranked = [cluster("a", &a), cluster("b", &b), cluster("c", &c)];
        assert_eq!(
            select(&model("xgboost", None, Some("v2")), "ns", &ranked).map(|r| r.name),
            Ok("c")
        );
    }

    #[test]
    fn disabled_multi_model_and_multi_node_runtimes_are_never_auto_selected() {
        let mut disabled = spec(&[("xgboost", None, true, Some(5))], &["v2"]);
        disabled.disabled = Some(true);
        let mut multi = spec(&[("xgboost", None, true, Some(4))], &["v2"]);
        multi.multi_model = Some(true);
        let plain = spec(&[("xgboost", None, true, None)], &["v2"]);
        let runtimes = [
            cluster("off", &disabled),
            cluster("mm", &multi),
            cluster("plain", &plain),
        ];
        assert_eq!(
            select(&model("xgboost", None, Some("v2")), "ns", &runtimes).map(|r| r.name),
            Ok("plain")
        );
        let named =
            select(&model("xgboost", Some("off"), Some("v2")), "ns", &runtimes).unwrap_err();
        assert_eq!(named.reason(), "RuntimeDisabled");
    }
}
