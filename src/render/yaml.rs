//! YAML output for JSON values: what `mlkube show` prints.
//!
//! A general YAML serializer decides how to write each string by asking whether a YAML parser
//! would read it back as something else, which made printing a third of the time of a large
//! render. Manifests need much less: block mappings and sequences, and strings written plain
//! only when they cannot be mistaken for anything else under YAML 1.1 or 1.2 (a conservative
//! rule: a letter first, no indicators, no keywords), as a literal block when they
//! span lines, and double-quoted otherwise. The tests read the output back with a YAML parser.

use std::fmt::Write as _;

use serde_json::Value;

/// One YAML document (without the `---` line) for a value, ending with a newline.
pub fn document(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) if !map.is_empty() => mapping(map, 0, false, out),
        Value::Array(items) if !items.is_empty() => sequence(items, 0, false, out),
        scalar_value => {
            scalar(scalar_value, 0, out);
            out.push('\n');
        }
    }
}

fn indent(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

/// A block mapping at `level`; with `inline_first`, the first key goes where the cursor is
/// (after a sequence's `- `).
fn mapping(
    map: &serde_json::Map<String, Value>,
    level: usize,
    inline_first: bool,
    out: &mut String,
) {
    for (index, (key, value)) in map.iter().enumerate() {
        if index > 0 || !inline_first {
            indent(out, level);
        }
        string(key, level, out);
        out.push(':');
        match value {
            Value::Object(inner) if !inner.is_empty() => {
                out.push('\n');
                mapping(inner, level + 2, false, out);
            }
            // Sequences in a mapping sit at the key's indentation, as kubectl prints them.
            Value::Array(items) if !items.is_empty() => {
                out.push('\n');
                sequence(items, level, false, out);
            }
            other => {
                out.push(' ');
                scalar(other, level + 2, out);
                out.push('\n');
            }
        }
    }
}

fn sequence(items: &[Value], level: usize, inline_first: bool, out: &mut String) {
    for (index, item) in items.iter().enumerate() {
        if index > 0 || !inline_first {
            indent(out, level);
        }
        out.push_str("- ");
        match item {
            Value::Object(inner) if !inner.is_empty() => mapping(inner, level + 2, true, out),
            Value::Array(inner) if !inner.is_empty() => sequence(inner, level + 2, true, out),
            other => {
                scalar(other, level + 2, out);
                out.push('\n');
            }
        }
    }
}

/// A scalar (or an empty collection); block content, if any, is indented to `level`.
fn scalar(value: &Value, level: usize, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => string(s, level, out),
        Value::Array(_) => out.push_str("[]"),
        Value::Object(_) => out.push_str("{}"),
    }
}

fn string(s: &str, level: usize, out: &mut String) {
    if is_plain(s) {
        out.push_str(s);
    } else if is_literal_block(s) {
        literal_block(s, level, out);
    } else {
        double_quoted(s, out);
    }
}

const KEYWORDS: &[&str] = &["null", "true", "false", "yes", "no", "on", "off", "y", "n"];

/// Safe to write without quotes in block context: starts with a letter or `/` (so it is no
/// number, date or indicator), holds printable ASCII only, has no `: ` or ` #` (a key, a
/// comment) and no trailing space or `:`, and is no YAML 1.1 keyword (`yes`, `off`...).
fn is_plain(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    (first.is_ascii_alphabetic() || first == '/')
        && s.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !s.ends_with([' ', ':'])
        && !s.contains(": ")
        && !s.contains(" #")
        && !KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(s))
}

/// Multi-line text that reads back exactly from a literal block: no leading blank or space,
/// and only printable characters and tabs.
fn is_literal_block(s: &str) -> bool {
    s.contains('\n')
        && !s.starts_with([' ', '\t', '\n'])
        && s.chars().all(|c| c == '\n' || c == '\t' || printable(c))
}

fn printable(c: char) -> bool {
    !(c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}'))
}

fn literal_block(s: &str, level: usize, out: &mut String) {
    let body = s.trim_end_matches('\n');
    let trailing = s.len() - body.len();
    out.push_str(match trailing {
        0 => "|-",
        1 => "|",
        _ => "|+",
    });
    for line in body.split('\n') {
        out.push('\n');
        if !line.is_empty() {
            indent(out, level);
            out.push_str(line);
        }
    }
    // Keep-chomping: the extra newlines are part of the value.
    for _ in 1..trailing {
        out.push('\n');
    }
}

fn double_quoted(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if !printable(c) => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(value: &Value) -> String {
        let mut out = String::new();
        document(value, &mut out);
        let back: Value =
            serde_yaml::from_str(&out).unwrap_or_else(|e| panic!("not YAML ({e}):\n{out}"));
        assert_eq!(&back, value, "read back differently:\n{out}");
        out
    }

    #[test]
    fn strings_that_look_like_other_things_read_back_as_strings() {
        let tricky = [
            "",
            "true",
            "No",
            "on",
            "y",
            "null",
            "NULL",
            "~",
            "0x1F",
            "0o17",
            "017",
            "1e3",
            "1_000",
            "-.5",
            ".inf",
            ".NaN",
            "12:30",
            "2001-12-14",
            "1.0",
            "+1",
            "-",
            "- a",
            "a: b",
            "a:",
            "#c",
            "a #c",
            "@x",
            "`x",
            "!tag",
            "&anchor",
            "*alias",
            "%d",
            "{x}",
            "[x]",
            "x,y",
            "'q'",
            "\"q\"",
            " lead",
            "trail ",
            "tab\there",
            "é ü",
            "\u{85}",
            "\u{2028}",
            "\u{7f}",
            "cr\r\nlf",
            "?",
            "|",
            ">",
            "=",
            "<<",
        ];
        for s in tricky {
            round_trip(&json!({ "k": s, s: [s], "list": [[s]] }));
        }
    }

    #[test]
    fn multi_line_strings_become_literal_blocks() {
        let value = json!({
            "a": "one\ntwo\n", "b": "one\ntwo", "c": "one\n\n\n", "d": "x\n\n  indented\n",
            "e": " starts with space\nx", "f": "\nleading newline", "g": "a\n  ",
            "items": [{"script": "set -e\necho hi\n", "x": 1}],
        });
        let out = round_trip(&value);
        assert!(out.contains("a: |\n  one\n  two\n"), "{out}");
        assert!(out.contains("b: |-\n  one\n  two\n"), "{out}");
        assert!(
            out.contains("- script: |\n    set -e\n    echo hi\n  x: 1\n"),
            "{out}"
        );
    }

    #[test]
    fn manifests_print_as_kubectl_prints_them() {
        let value = json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app.kubernetes.io/part-of": "platform"}},
            "spec": {
                "replicas": 2,
                "template": {"spec": {"containers": [
                    {"name": "main", "image": "tensorflow/serving:2.18.0", "args": ["--port=9000"],
                     "resources": {"requests": {"cpu": "100m"}}, "env": [], "ports": [{"containerPort": 80}]},
                ]}},
                "empty": {}, "ratio": 0.5, "flag": false, "none": null,
                "nested": [[1, 2], []],
            },
        });
        let out = round_trip(&value);
        assert_eq!(
            out,
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels:\n    \
             app.kubernetes.io/part-of: platform\nspec:\n  replicas: 2\n  template:\n    spec:\n      \
             containers:\n      - name: main\n        image: tensorflow/serving:2.18.0\n        \
             args:\n        - \"--port=9000\"\n        resources:\n          requests:\n            \
             cpu: \"100m\"\n        env: []\n        ports:\n        - containerPort: 80\n  \
             empty: {}\n  ratio: 0.5\n  flag: false\n  none: null\n  nested:\n  - - 1\n    - 2\n  - []\n"
        );
    }
}
