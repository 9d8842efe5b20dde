//! An HTTPRoute match as a Traefik router rule, and the router's priority.
//!
//! Traefik takes, of the routers whose rule matches a request, the one with the highest
//! priority; the Gateway API says which match wins (the most specific host name, then an exact
//! path, then the longest prefix, then a method, then the most headers, then the most query
//! parameters, then the oldest route). The priority encodes that order in decimal places:
//! host name, path, method and counts, then the route's age among equals.
//!
//! Values are written as JSON strings, whose escapes Traefik's rule parser reads as Go's: a
//! value cannot close its string and add a matcher of its own.

use serde_json::Value;

/// Routes told apart by age within one priority: at most this many, the rest share the last.
pub const AGE_SLOTS: i64 = 1000;

/// One router's rule and priority.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub rule: String,
    pub priority: i64,
}

/// Why a match cannot be served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported(pub String);

/// The rule for `host` (None: any host) and `matched` (one of a rule's `matches`, `{}` for
/// none), the route being the `age`-th oldest.
pub fn rule(host: Option<&str>, matched: &Value, age: usize) -> Result<Rule, Unsupported> {
    let (path, path_score) = path(&matched["path"])?;
    let mut parts = vec![path];
    let mut score = path_score;
    if let Some(method) = matched["method"].as_str() {
        parts.push(format!("Method({})", quoted(method)));
        score += 400;
    }
    let headers = pairs(&matched["headers"], "Header")?;
    score += 20 * headers.len() as i64;
    parts.extend(headers);
    let queries = pairs(&matched["queryParams"], "Query")?;
    score += queries.len() as i64;
    parts.extend(queries);
    if let Some(host) = host {
        parts.insert(0, host_rule(host));
        score += host_score(host);
    }
    let age = AGE_SLOTS - 1 - (age as i64).min(AGE_SLOTS - 1);
    Ok(Rule {
        rule: parts.join(" && "),
        priority: score * AGE_SLOTS + age,
    })
}

/// A value as a string literal of Traefik's rule syntax.
fn quoted(value: &str) -> String {
    Value::from(value).to_string()
}

/// The path matcher and its score: an exact path above every prefix, a longer prefix above a
/// shorter one (paths are at most 1,024 characters). A prefix matches whole segments:
/// `/v1/models/a` takes `/v1/models/a` and `/v1/models/a/...`, not `/v1/models/ab`.
fn path(path: &Value) -> Result<(String, i64), Unsupported> {
    let value = path["value"].as_str().unwrap_or("/");
    match path["type"].as_str().unwrap_or("PathPrefix") {
        "Exact" => Ok((format!("Path({})", quoted(value)), 3_000_000)),
        "PathPrefix" => {
            let trimmed = value.trim_end_matches('/');
            let score = 1_000_000 + 1_000 * value.len() as i64;
            if trimmed.is_empty() {
                return Ok(("PathPrefix(\"/\")".to_owned(), score));
            }
            let rule = format!(
                "(Path({}) || PathPrefix({}))",
                quoted(trimmed),
                quoted(&format!("{trimmed}/"))
            );
            Ok((rule, score))
        }
        "RegularExpression" => Ok((
            format!("PathRegexp({})", quoted(value)),
            1_000_000 + 1_000 * value.len() as i64,
        )),
        other => Err(Unsupported(format!(
            "path match type {other} is not served"
        ))),
    }
}

/// Header or query parameter matchers (`Header`, `HeaderRegexp`, `Query`, `QueryRegexp`).
fn pairs(list: &Value, matcher: &str) -> Result<Vec<String>, Unsupported> {
    let mut rules = Vec::new();
    for pair in list.as_array().into_iter().flatten() {
        let name = pair["name"].as_str().unwrap_or_default();
        let value = pair["value"].as_str().unwrap_or_default();
        let suffix = match pair["type"].as_str().unwrap_or("Exact") {
            "Exact" => "",
            "RegularExpression" => "Regexp",
            other => {
                return Err(Unsupported(format!(
                    "{matcher} match type {other} is not served"
                )));
            }
        };
        rules.push(format!(
            "{matcher}{suffix}({}, {})",
            quoted(name),
            quoted(value)
        ));
    }
    Ok(rules)
}

/// The host matcher: a name as it is, a wildcard (`*.example.com`) as one or more labels
/// before its suffix.
fn host_rule(host: &str) -> String {
    match host.strip_prefix("*.") {
        None => format!("Host({})", quoted(host)),
        Some(suffix) => {
            let pattern = format!(
                "^[a-z0-9-]+(\\.[a-z0-9-]+)*\\.{}$",
                suffix.replace('.', "\\.")
            );
            format!("HostRegexp({})", quoted(&pattern))
        }
    }
}

/// A host name above none, an exact name above a wildcard, a longer wildcard above a shorter.
fn host_score(host: &str) -> i64 {
    const TIER: i64 = 10_000_000_000;
    match host.strip_prefix("*.") {
        None => 2 * TIER,
        Some(suffix) => TIER + 10_000_000 * suffix.len() as i64,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn prefix(value: &str) -> Value {
        json!({ "path": { "type": "PathPrefix", "value": value } })
    }

    #[test]
    fn a_prefix_matches_whole_segments_and_an_exact_path_wins_over_any_prefix() {
        let long = rule(None, &prefix("/v1/models/digits/"), 0).unwrap();
        assert_eq!(
            long.rule,
            r#"(Path("/v1/models/digits") || PathPrefix("/v1/models/digits/"))"#
        );
        let root = rule(None, &prefix("/"), 0).unwrap();
        assert_eq!(root.rule, r#"PathPrefix("/")"#);
        let exact = json!({ "path": { "type": "Exact", "value": "/v1/models/digits:predict" } });
        let exact = rule(None, &exact, 0).unwrap();
        assert_eq!(exact.rule, r#"Path("/v1/models/digits:predict")"#);
        assert!(exact.priority > long.priority && long.priority > root.priority);
    }

    #[test]
    fn a_host_wins_over_none_an_exact_host_over_a_wildcard_and_an_older_route_over_a_newer() {
        let any = rule(None, &prefix("/"), 0).unwrap();
        let wild = rule(Some("*.example.com"), &prefix("/"), 0).unwrap();
        let exact = rule(Some("a.example.com"), &prefix("/"), 0).unwrap();
        assert!(exact.priority > wild.priority && wild.priority > any.priority);
        assert_eq!(exact.rule, r#"Host("a.example.com") && PathPrefix("/")"#);
        assert!(wild.rule.starts_with("HostRegexp("));
        let newer = rule(None, &prefix("/"), 1).unwrap();
        assert!(any.priority > newer.priority);
        // A longer path of a host-less route stays below any route with a host.
        let deep = rule(None, &prefix(&"/a".repeat(500)), 0).unwrap();
        assert!(wild.priority > deep.priority);
    }

    #[test]
    fn methods_headers_and_queries_add_matchers_in_the_order_of_their_precedence() {
        let matched = json!({
            "path": { "type": "PathPrefix", "value": "/v2" },
            "method": "POST",
            "headers": [{ "name": "x-canary", "value": "yes" }],
            "queryParams": [{ "type": "RegularExpression", "name": "v", "value": "^2" }],
        });
        let both = rule(None, &matched, 0).unwrap();
        assert_eq!(
            both.rule,
            r#"(Path("/v2") || PathPrefix("/v2/")) && Method("POST") && Header("x-canary", "yes") && QueryRegexp("v", "^2")"#
        );
        let headers_only = json!({
            "path": { "type": "PathPrefix", "value": "/v2" },
            "headers": [{ "name": "a", "value": "1" }, { "name": "b", "value": "2" }],
        });
        let headers_only = rule(None, &headers_only, 0).unwrap();
        assert!(both.priority > headers_only.priority);
        assert!(headers_only.priority > rule(None, &prefix("/v2"), 0).unwrap().priority);
    }

    #[test]
    fn a_value_cannot_close_its_string_and_add_a_matcher() {
        let sneaky = json!({ "headers": [{ "name": "a", "value": "x\") || PathPrefix(\"/" }] });
        let made = rule(None, &sneaky, 0).unwrap();
        assert_eq!(
            made.rule,
            r#"PathPrefix("/") && Header("a", "x\") || PathPrefix(\"/")"#
        );
    }
}
