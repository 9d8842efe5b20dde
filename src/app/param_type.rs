//! What a prototype parameter's value may be: its type and the rules beyond the type that a
//! prototype declares (`minimum`, `maximum`, `enum`, `items`), checked when a value is set
//! (`param set`, `component add --param`) and when an environment is rendered.
//!
//! Beside JSON's types there are two of Kubernetes': a `quantity` (`500m`, `1Gi`, `2`), as
//! requests and limits take it, and an `image` reference (`registry:5000/team/model:1.0`), both
//! checked here so a typo fails when it is typed, not at apply with the API server's regex or
//! at the kubelet's pull.

use serde_json::{Map, Value};

/// The types a prototype parameter can declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    String,
    Integer,
    Number,
    Boolean,
    Array,
    Object,
    Quantity,
    Image,
}

/// Every type's name, as a prototype declares it.
const TYPE_NAMES: &str = "string, integer, number, boolean, array, object, quantity or image";

impl ParamType {
    fn parse(name: &str) -> Option<ParamType> {
        Some(match name {
            "string" => ParamType::String,
            "integer" => ParamType::Integer,
            "number" => ParamType::Number,
            "boolean" => ParamType::Boolean,
            "array" => ParamType::Array,
            "object" => ParamType::Object,
            "quantity" => ParamType::Quantity,
            "image" => ParamType::Image,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Integer => "integer",
            ParamType::Number => "number",
            ParamType::Boolean => "boolean",
            ParamType::Array => "array",
            ParamType::Object => "object",
            ParamType::Quantity => "quantity",
            ParamType::Image => "image",
        }
    }

    /// Whether a value typed on the command line is taken as it is, never as JSON: `2` is the
    /// quantity "2", not a number.
    pub fn is_text(self) -> bool {
        matches!(
            self,
            ParamType::String | ParamType::Quantity | ParamType::Image
        )
    }

    /// The type as a sentence names it: "an integer", or in the plural "integers".
    fn phrase(self, plural: bool) -> String {
        let (article, noun, after) = match self {
            ParamType::String => ("a", "string", ""),
            ParamType::Integer => ("an", "integer", ""),
            ParamType::Number => ("a", "number", ""),
            ParamType::Boolean => ("a", "boolean", ""),
            ParamType::Array => ("an", "array", ""),
            ParamType::Object => ("an", "object", ""),
            ParamType::Quantity => (
                "a",
                "quantity",
                " such as 500m, 1Gi or 2 (a number and an optional suffix: m, k, M, G, T, P, E, \
                 Ki, Mi, Gi, Ti, Pi or Ei)",
            ),
            ParamType::Image => (
                "an",
                "image reference",
                " such as tensorflow/serving:2.18.0 ([registry/]repository in lowercase, then \
                 an optional :tag and @digest)",
            ),
        };
        match (plural, self) {
            (true, ParamType::Quantity) => format!("quantities{after}"),
            (true, _) => format!("{noun}s{after}"),
            (false, _) => format!("{article} {noun}{after}"),
        }
    }
}

/// A value's type and the rules it must follow beyond it.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueRule {
    pub kind: ParamType,
    /// Bounds of an integer or number, inclusive.
    pub minimum: Option<f64>,
    pub maximum: Option<f64>,
    /// The values allowed, when the prototype lists them (`enum`).
    pub one_of: Vec<Value>,
    /// What each element of an array must be.
    pub items: Option<Box<ValueRule>>,
}

/// Why a value does not follow its rule: what was expected, and a guess at what was meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub expected: String,
    pub hint: Option<String>,
}

impl ValueRule {
    /// The rule a prototype declares: `{ type, minimum?, maximum?, enum?, items? }`, beside
    /// `default` and `description`, which are the caller's.
    pub fn parse(spec: &Map<String, Value>) -> Result<ValueRule, String> {
        let kind = spec
            .get("type")
            .and_then(Value::as_str)
            .and_then(ParamType::parse)
            .ok_or_else(|| format!("needs a type: {TYPE_NAMES}"))?;
        let numeric = matches!(kind, ParamType::Integer | ParamType::Number);
        let bound = |key: &str| -> Result<Option<f64>, String> {
            match spec.get(key) {
                None => Ok(None),
                Some(value) if numeric => value
                    .as_f64()
                    .map(Some)
                    .ok_or_else(|| format!("`{key}` must be a number")),
                Some(_) => Err(format!("`{key}` applies to integers and numbers only")),
            }
        };
        let one_of = match spec.get("enum") {
            None => Vec::new(),
            Some(Value::Array(values)) if !values.is_empty() => values.clone(),
            Some(_) => return Err("`enum` must be a non-empty list of values".into()),
        };
        let items = match spec.get("items") {
            None => None,
            Some(Value::Object(items)) if kind == ParamType::Array => Some(Box::new(
                ValueRule::parse(items).map_err(|e| format!("items: {e}"))?,
            )),
            Some(_) => return Err("`items` must be a rule `{ type: ... }` of an array".into()),
        };
        if let Some(key) = spec.keys().find(|key| {
            ![
                "type",
                "minimum",
                "maximum",
                "enum",
                "items",
                "default",
                "description",
            ]
            .contains(&key.as_str())
        }) {
            return Err(format!(
                "unknown field `{key}`; a param has type, default, description, and may have \
                 minimum, maximum, enum and items"
            ));
        }
        let rule = ValueRule {
            kind,
            minimum: bound("minimum")?,
            maximum: bound("maximum")?,
            one_of,
            items,
        };
        if let Some(bad) = rule.one_of.iter().find(|v| rule.check_type(v).is_err()) {
            return Err(format!(
                "`enum` lists {bad}, which is not {}",
                kind.phrase(false)
            ));
        }
        Ok(rule)
    }

    /// Whether `value` follows the rule; if not, what it should be.
    pub fn check(&self, value: &Value) -> Result<(), Mismatch> {
        self.check_type(value)?;
        if let Some(items) = &self.items {
            for (index, item) in value.as_array().into_iter().flatten().enumerate() {
                items.check(item).map_err(|mismatch| Mismatch {
                    expected: format!("{}; entry {index}, {item}, is not", self.describe()),
                    hint: mismatch.hint,
                })?;
            }
        }
        Ok(())
    }

    /// The type, bounds and listed values, without the items.
    fn check_type(&self, value: &Value) -> Result<(), Mismatch> {
        let mismatch = |hint: Option<String>| Mismatch {
            expected: self.describe(),
            hint,
        };
        let fits = match self.kind {
            ParamType::String => value.is_string(),
            ParamType::Integer => value.as_f64().is_some_and(|f| f.fract() == 0.0),
            ParamType::Number => value.is_number(),
            ParamType::Boolean => value.is_boolean(),
            ParamType::Array => value.is_array(),
            ParamType::Object => value.is_object(),
            ParamType::Quantity => match value {
                Value::Number(n) => n.as_f64().is_some_and(|f| f >= 0.0),
                Value::String(text) if is_quantity(text) => true,
                Value::String(text) => return Err(mismatch(quantity_hint(text))),
                _ => false,
            },
            ParamType::Image => match value {
                Value::String(text) => match image_problem(text) {
                    None => true,
                    Some(problem) => return Err(mismatch(Some(problem))),
                },
                _ => false,
            },
        };
        let number = value.as_f64();
        let within = |bound: Option<f64>, ok: fn(f64, f64) -> bool| match (bound, number) {
            (Some(bound), Some(n)) => ok(n, bound),
            _ => true,
        };
        if !fits
            || !within(self.minimum, |n, min| n >= min)
            || !within(self.maximum, |n, max| n <= max)
            || (!self.one_of.is_empty() && !self.one_of.contains(value))
        {
            return Err(mismatch(None));
        }
        Ok(())
    }

    /// What a value must be, as the end of "must be ...": "an integer of at least 1".
    pub fn describe(&self) -> String {
        self.phrase(false)
    }

    /// The rule as a noun phrase, in the plural for a list's items: "integers of at least 1".
    fn phrase(&self, plural: bool) -> String {
        if !self.one_of.is_empty() {
            let among = if plural { "values among" } else { "one of" };
            return format!("{among} {}", listing(&self.one_of));
        }
        if let Some(items) = &self.items {
            return format!("a list of {}", items.phrase(true));
        }
        let bounds = match (self.minimum, self.maximum) {
            (Some(min), Some(max)) => format!(" from {} to {}", number(min), number(max)),
            (Some(min), None) => format!(" of at least {}", number(min)),
            (None, Some(max)) => format!(" of at most {}", number(max)),
            (None, None) => String::new(),
        };
        format!("{}{bounds}", self.kind.phrase(plural))
    }

    /// The rule in a few words, for the TYPE column of `prototype describe`: `integer >= 1`,
    /// `string: Always|Never`, `array of image`.
    pub fn summary(&self) -> String {
        let mut text = self.kind.as_str().to_owned();
        if !self.one_of.is_empty() {
            let values: Vec<String> = self.one_of.iter().map(plain).collect();
            text = format!("{text}: {}", values.join("|"));
        }
        match (self.minimum, self.maximum) {
            (Some(min), Some(max)) => text = format!("{text} {}..{}", number(min), number(max)),
            (Some(min), None) => text = format!("{text} >= {}", number(min)),
            (None, Some(max)) => text = format!("{text} <= {}", number(max)),
            (None, None) => {}
        }
        if let Some(items) = &self.items {
            text = format!("{text} of {}", items.summary());
        }
        text
    }

    /// The rule as a prototype declares it, for `prototype describe -o json`.
    pub fn to_json(&self) -> Map<String, Value> {
        let mut json = Map::new();
        json.insert("type".into(), self.kind.as_str().into());
        if let Some(min) = self.minimum {
            json.insert("minimum".into(), number(min));
        }
        if let Some(max) = self.maximum {
            json.insert("maximum".into(), number(max));
        }
        if !self.one_of.is_empty() {
            json.insert("enum".into(), Value::Array(self.one_of.clone()));
        }
        if let Some(items) = &self.items {
            json.insert("items".into(), Value::Object(items.to_json()));
        }
        json
    }
}

/// A bound as JSON: a whole number as an integer (`1`, not `1.0`).
fn number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9e15 {
        Value::from(n as i64)
    } else {
        Value::from(n)
    }
}

/// A string as it is, anything else as JSON.
fn plain(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// `A, B or C`.
fn listing(values: &[Value]) -> String {
    let names: Vec<String> = values.iter().map(plain).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

/// Suffixes of a Kubernetes quantity (binary, decimal), as the API server parses them.
const QUANTITY_SUFFIXES: [&str; 13] = [
    "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "m", "k", "M", "G", "T", "P", "E",
];

/// A non-negative Kubernetes quantity: digits with an optional fraction, then a suffix or a
/// decimal exponent (`1e3`).
fn is_quantity(text: &str) -> bool {
    let text = text.strip_prefix('+').unwrap_or(text);
    let number_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(number_end);
    let digits = number.replace('.', "");
    let number_ok = !digits.is_empty() && number.matches('.').count() <= 1;
    let exponent = |s: &str| {
        let s = s.strip_prefix(['-', '+']).unwrap_or(s);
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
    };
    let suffix_ok = suffix.is_empty()
        || QUANTITY_SUFFIXES.contains(&suffix)
        || suffix.strip_prefix(['e', 'E']).is_some_and(exponent);
    number_ok && suffix_ok
}

/// For `1Gb`, `512MB` or `2 gi`: the quantity that was probably meant.
fn quantity_hint(text: &str) -> Option<String> {
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let number_end = compact.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = compact.split_at(number_end);
    let unit = unit.trim_end_matches(['b', 'B']);
    let mut chars = unit.chars();
    let prefix = chars.next()?.to_ascii_uppercase();
    let binary = format!("{number}{prefix}i");
    let rest = chars.as_str();
    let guess = match (prefix, rest) {
        ('K' | 'M' | 'G' | 'T' | 'P' | 'E', "" | "i" | "I") => binary,
        _ => return None,
    };
    is_quantity(&guess).then(|| format!("did you mean {guess}?"))
}

/// Why `reference` is not an image reference, or `None`: `[host[:port]/]path[:tag][@digest]`,
/// the path lowercase components separated by `/` (as the distribution spec's grammar).
fn image_problem(reference: &str) -> Option<String> {
    if reference.is_empty() {
        return Some("it is empty".into());
    }
    if reference.chars().any(char::is_whitespace) {
        return Some("an image reference has no spaces".into());
    }
    let (name, digest) = match reference.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (reference, None),
    };
    if let Some(problem) = digest.and_then(digest_problem) {
        return Some(problem);
    }
    // A tag follows the last `:` after the last `/` (a `:` before it is a registry's port).
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    let (repository, tag) = match name[last_slash..].rfind(':') {
        Some(i) => (&name[..last_slash + i], Some(&name[last_slash + i + 1..])),
        None => (name, None),
    };
    if let Some(problem) = tag.and_then(tag_problem) {
        return Some(problem);
    }
    repository_problem(repository)
}

/// Why the digest after an image's `@` is not `<algorithm>:<hex>`, or `None`.
fn digest_problem(digest: &str) -> Option<String> {
    let valid = digest.split_once(':').is_some_and(|(algorithm, hex)| {
        !algorithm.is_empty()
            && algorithm
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+._-".contains(&b))
            && hex.len() >= 32
            && hex.bytes().all(|b| b.is_ascii_hexdigit())
    });
    if valid {
        return None;
    }
    Some(format!(
        "the digest `{digest}` is not <algorithm>:<hex>, e.g. sha256:<64 hex digits>"
    ))
}

/// Why an image's tag is not one the registries take, or `None`.
fn tag_problem(tag: &str) -> Option<String> {
    let valid = tag.len() <= 128
        && tag
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    if valid {
        return None;
    }
    Some(format!(
        "the tag `{tag}` is not up to 128 letters, digits, `_`, `.` and `-`, starting \
         with a letter, digit or `_`"
    ))
}

/// Why an image's repository (the reference without tag and digest) is not an optional registry
/// followed by a lowercase path, or `None`.
fn repository_problem(repository: &str) -> Option<String> {
    let mut parts: Vec<&str> = repository.split('/').collect();
    // The first part is a registry when it looks like a host: a dot, a port, or localhost.
    if parts.len() > 1 && (parts[0].contains(['.', ':']) || parts[0] == "localhost") {
        let host = parts.remove(0);
        let (host_name, port) = host.split_once(':').unwrap_or((host, ""));
        let host_ok = !host_name.is_empty()
            && host_name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.".contains(&b));
        if !host_ok || !port.bytes().all(|b| b.is_ascii_digit()) {
            return Some(format!("the registry `{host}` is not a host[:port]"));
        }
    }
    let path_ok = |part: &str| {
        let bytes = part.as_bytes();
        !bytes.is_empty()
            && bytes[0].is_ascii_alphanumeric()
            && bytes[bytes.len() - 1].is_ascii_alphanumeric()
            && bytes
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(b))
    };
    match parts.iter().find(|part| !path_ok(part)) {
        Some(part) if part.bytes().any(|b| b.is_ascii_uppercase()) => {
            Some(format!("the repository `{repository}` must be lowercase"))
        }
        Some(part) => Some(format!(
            "`{part}` in the repository `{repository}` is not lowercase letters and digits \
             joined by `.`, `_` or `-`"
        )),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(spec: Value) -> ValueRule {
        ValueRule::parse(spec.as_object().unwrap()).unwrap()
    }

    #[test]
    fn quantities_as_the_api_server_parses_them() {
        for ok in [
            "500m",
            "1Gi",
            "2",
            "0.5",
            "1.5Gi",
            "1e3",
            "1E-2",
            "+1",
            "128974848",
            "129M",
        ] {
            assert!(is_quantity(ok), "{ok}");
        }
        for bad in [
            "1Gb", "1GB", "", "Gi", "1..2", "-1", "1 Gi", "1gi", "one", "1Ki2",
        ] {
            assert!(!is_quantity(bad), "{bad}");
        }
        let memory = rule(json!({ "type": "quantity" }));
        assert_eq!(
            memory.check(&json!("1Gb")).unwrap_err().hint.as_deref(),
            Some("did you mean 1Gi?")
        );
        assert_eq!(
            memory.check(&json!("512 mb")).unwrap_err().hint.as_deref(),
            Some("did you mean 512Mi?")
        );
        assert!(memory.check(&json!(2)).is_ok());
        assert!(memory.check(&json!(-1)).is_err());
    }

    #[test]
    fn image_references() {
        for ok in [
            "tensorflow/serving:2.18.0",
            "alpine",
            "docker.io/kubeflow/jaxjob-simple:latest",
            "localhost:5000/ml/model:v1_2-rc.3",
            "registry.example.com:443/a/b/c",
            "mlkube/mlkube@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(image_problem(ok), None, "{ok}");
        }
        for (bad, problem) in [
            ("", "it is empty"),
            ("tensorflow/serving 2.18", "no spaces"),
            ("TensorFlow/serving", "must be lowercase"),
            ("tensorflow/serving:", "the tag ``"),
            ("tensorflow/serving:-1", "the tag `-1`"),
            ("a/b@sha256:xyz", "the digest"),
            ("a//b", "`` in the repository"),
        ] {
            let found = image_problem(bad).unwrap_or_else(|| panic!("{bad} accepted"));
            assert!(found.contains(problem), "{bad}: {found}");
        }
    }

    #[test]
    fn bounds_enums_and_items_say_what_is_allowed() {
        let replicas = rule(json!({ "type": "integer", "minimum": 1 }));
        assert!(replicas.check(&json!(1)).is_ok());
        assert!(replicas.check(&json!(2.0)).is_ok());
        let error = replicas.check(&json!(-1)).unwrap_err();
        assert_eq!(error.expected, "an integer of at least 1");
        assert_eq!(replicas.summary(), "integer >= 1");

        let chief = rule(json!({ "type": "integer", "minimum": 0, "maximum": 1 }));
        assert_eq!(
            chief.check(&json!(2)).unwrap_err().expected,
            "an integer from 0 to 1"
        );
        assert_eq!(chief.summary(), "integer 0..1");

        let policy = rule(json!({ "type": "string", "enum": ["Never", "OnFailure", "Always"] }));
        assert!(policy.check(&json!("Never")).is_ok());
        assert_eq!(
            policy.check(&json!("Sometimes")).unwrap_err().expected,
            "one of Never, OnFailure or Always"
        );
        assert_eq!(policy.summary(), "string: Never|OnFailure|Always");

        let images = rule(json!({ "type": "array", "items": { "type": "image" } }));
        assert!(images.check(&json!(["a/b:1", "c"])).is_ok());
        let error = images.check(&json!(["a/b:1", "C D"])).unwrap_err();
        assert!(
            error
                .expected
                .starts_with("a list of image references such as")
                && error.expected.ends_with("; entry 1, \"C D\", is not"),
            "{}",
            error.expected
        );
        assert_eq!(images.summary(), "array of image");
        assert_eq!(
            images.to_json(),
            *json!({ "type": "array", "items": { "type": "image" } })
                .as_object()
                .unwrap()
        );
    }

    #[test]
    fn a_malformed_declaration_is_refused() {
        let parse = |spec: Value| ValueRule::parse(spec.as_object().unwrap()).unwrap_err();
        assert!(parse(json!({ "type": "text" })).starts_with("needs a type"));
        assert!(parse(json!({ "type": "string", "minimum": 1 })).contains("integers and numbers"));
        assert!(
            parse(json!({ "type": "integer", "mininum": 1 })).contains("unknown field `mininum`")
        );
        assert!(parse(json!({ "type": "string", "enum": [1] })).contains("not a string"));
        assert!(
            parse(json!({ "type": "string", "items": { "type": "string" } })).contains("items")
        );
    }
}
