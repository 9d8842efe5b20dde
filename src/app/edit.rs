//! Edit the fields of a Jsonnet params file in place, so hand edits survive the verbs.
//!
//! `param set` and `component add/rm` change one field of `components/params.libsonnet` or
//! `environments/<env>/params.libsonnet`. Rewriting the file from its evaluated value would
//! lose comments, locals and computed values, so this edits the text instead: it finds the
//! top-level object literal, walks nested object literals by field name, and replaces, inserts
//! or removes one field, leaving every other byte as it was. A file whose shape it cannot follow
//! (the path leads to something that is not an object literal) is an error that says so.

use serde_json::Value;

/// Why a params file could not be edited.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum EditError {
    #[error("cannot read the Jsonnet at byte {offset}: {problem}")]
    Scan {
        offset: usize,
        problem: &'static str,
    },
    #[error("the file does not end with an object literal `{{ ... }}`")]
    NoTopLevelObject,
    #[error(
        "`{path}` is not an object literal `{{ ... }}`, so mlkube cannot add to it\nhint: edit \
         the file by hand"
    )]
    NotAnObjectLiteral { path: String },
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Open,
    Close,
    Comma,
    Colon,
    Plus,
    Ident,
    Str,
    Other,
}

#[derive(Debug, Clone)]
struct Token {
    kind: Kind,
    start: usize,
    end: usize,
    /// The field name this token spells, for identifiers and strings.
    text: String,
}

fn scan(src: &str) -> Result<Vec<Token>, EditError> {
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < src.len() {
        if let Some(end) = skip_blank(src, i)? {
            i = end;
            continue;
        }
        let token = token_at(src, i)?;
        i = token.end;
        tokens.push(token);
    }
    Ok(tokens)
}

/// Where whitespace or a comment starting at `i` ends, so the scan can pass over it; `None`
/// when a token starts at `i`.
fn skip_blank(src: &str, i: usize) -> Result<Option<usize>, EditError> {
    let bytes = src.as_bytes();
    let end = match bytes[i] {
        b' ' | b'\t' | b'\r' | b'\n' => i + 1,
        b'#' => src[i..].find('\n').map_or(bytes.len(), |n| i + n),
        b'/' if bytes.get(i + 1) == Some(&b'/') => {
            src[i..].find('\n').map_or(bytes.len(), |n| i + n)
        }
        b'/' if bytes.get(i + 1) == Some(&b'*') => {
            let end = src[i + 2..].find("*/").ok_or(EditError::Scan {
                offset: i,
                problem: "unterminated comment",
            })?;
            i + 2 + end + 2
        }
        _ => return Ok(None),
    };
    Ok(Some(end))
}

/// The token starting at `start`, which is not whitespace or a comment.
fn token_at(src: &str, start: usize) -> Result<Token, EditError> {
    let bytes = src.as_bytes();
    let c = bytes[start];
    let err = |problem| EditError::Scan {
        offset: start,
        problem,
    };
    let token = |kind, end: usize, text: String| Token {
        kind,
        start,
        end,
        text,
    };
    Ok(match c {
        b'{' | b'[' | b'(' => token(Kind::Open, start + 1, String::new()),
        b'}' | b']' | b')' => token(Kind::Close, start + 1, String::new()),
        b',' => token(Kind::Comma, start + 1, String::new()),
        b':' => token(Kind::Colon, start + 1, String::new()),
        b'+' => token(Kind::Plus, start + 1, String::new()),
        b'|' if src[start..].starts_with("|||") => {
            let end = text_block_end(src, start).ok_or_else(|| err("unterminated text block"))?;
            token(Kind::Str, end, String::new())
        }
        b'\'' | b'"' => {
            let (end, text) =
                quoted(src, start + 1, c).ok_or_else(|| err("unterminated string"))?;
            token(Kind::Str, end, text)
        }
        b'@' if matches!(bytes.get(start + 1), Some(b'\'' | b'"')) => {
            let (end, text) = verbatim(src, start).ok_or_else(|| err("unterminated string"))?;
            token(Kind::Str, end, text)
        }
        c if c.is_ascii_alphabetic() || c == b'_' => {
            let end = src[start..]
                .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
                .map_or(bytes.len(), |n| start + n);
            token(Kind::Ident, end, src[start..end].to_owned())
        }
        _ => {
            let len = src[start..].chars().next().map_or(1, char::len_utf8);
            token(Kind::Other, start + len, String::new())
        }
    })
}

/// Where the `|||` text block starting at `from` ends: a text block ends at a line holding only
/// `|||` (after indentation). `None` when no such line follows.
fn text_block_end(src: &str, from: usize) -> Option<usize> {
    let mut pos = from + 3;
    loop {
        let n = src[pos..].find('\n')?;
        let line_start = pos + n + 1;
        let rest = &src[line_start..];
        let trimmed = rest.trim_start_matches([' ', '\t']);
        if trimmed.starts_with("|||") {
            return Some(line_start + (rest.len() - trimmed.len()) + 3);
        }
        pos = line_start;
    }
}

/// A verbatim string `@'...'` or `@"..."` starting at `from` (the `@`); returns the end (after
/// the quote) and the text, in which a doubled quote stands for one.
fn verbatim(src: &str, from: usize) -> Option<(usize, String)> {
    let bytes = src.as_bytes();
    let quote = bytes[from + 1];
    let mut pos = from + 2;
    loop {
        match bytes.get(pos) {
            None => return None,
            Some(&q) if q == quote && bytes.get(pos + 1) == Some(&quote) => pos += 2,
            Some(&q) if q == quote => break,
            Some(_) => pos += 1,
        }
    }
    let text = src[from + 2..pos].replace(
        &format!("{0}{0}", quote as char),
        &(quote as char).to_string(),
    );
    Some((pos + 1, text))
}

/// A quoted string body starting at `from`; returns the end (after the quote) and the text.
fn quoted(src: &str, from: usize, quote: u8) -> Option<(usize, String)> {
    let mut text = String::new();
    let mut chars = src[from..].char_indices();
    while let Some((offset, ch)) = chars.next() {
        match ch {
            '\\' => {
                let (_, escaped) = chars.next()?;
                text.push(match escaped {
                    'n' => '\n',
                    't' => '\t',
                    other => other,
                });
            }
            ch if ch as u32 == u32::from(quote) => return Some((from + offset + 1, text)),
            ch => text.push(ch),
        }
    }
    None
}

/// One member of an object literal: a field, a `local`, or an `assert`.
struct Member {
    /// Token indices of the member, without its trailing comma.
    first: usize,
    last: usize,
    /// Token index of the comma after it, if any.
    comma: Option<usize>,
    /// For a field: its name, and the token range of its value.
    field: Option<(String, usize, usize)>,
}

struct Parsed {
    tokens: Vec<Token>,
    /// For each opening token, the index of its closing token.
    matching: Vec<Option<usize>>,
}

impl Parsed {
    fn new(src: &str) -> Result<Parsed, EditError> {
        let tokens = scan(src)?;
        let mut matching = vec![None; tokens.len()];
        let mut stack = Vec::new();
        for (index, token) in tokens.iter().enumerate() {
            match token.kind {
                Kind::Open => stack.push(index),
                Kind::Close => {
                    let open = stack.pop().ok_or(EditError::Scan {
                        offset: token.start,
                        problem: "unbalanced closing bracket",
                    })?;
                    matching[open] = Some(index);
                }
                _ => {}
            }
        }
        if let Some(&open) = stack.last() {
            return Err(EditError::Scan {
                offset: tokens[open].start,
                problem: "unclosed bracket",
            });
        }
        Ok(Parsed { tokens, matching })
    }

    /// The file's value: the last top-level `{` whose `}` ends the file.
    fn top_level_object(&self) -> Result<usize, EditError> {
        let last = self
            .tokens
            .len()
            .checked_sub(1)
            .ok_or(EditError::NoTopLevelObject)?;
        (0..self.tokens.len())
            .filter(|&i| self.matching[i] == Some(last))
            .find(|&i| self.is_brace(i))
            .ok_or(EditError::NoTopLevelObject)
    }

    fn is_brace(&self, index: usize) -> bool {
        self.tokens[index].kind == Kind::Open
            && self.tokens[index].end - self.tokens[index].start == 1
    }

    /// The members of the object literal opened at `open`.
    fn members(&self, src: &str, open: usize) -> Vec<Member> {
        let close = self.matching[open].unwrap_or(open);
        let mut members = Vec::new();
        let mut i = open + 1;
        while i < close {
            let first = i;
            let mut j = i;
            while j < close && self.tokens[j].kind != Kind::Comma {
                if self.tokens[j].kind == Kind::Open {
                    j = self.matching[j].unwrap_or(j);
                }
                j += 1;
            }
            let comma = (j < close).then_some(j);
            let last = j - 1;
            let field = self.field(src, first, last);
            members.push(Member {
                first,
                last,
                comma,
                field,
            });
            i = j + 1;
        }
        members
    }

    /// `name: value`, `name+: value`, `'name':: value`... as (name, value tokens).
    fn field(&self, _src: &str, first: usize, last: usize) -> Option<(String, usize, usize)> {
        let name = &self.tokens[first];
        if !matches!(name.kind, Kind::Ident | Kind::Str) || name.text.is_empty() {
            return None;
        }
        if name.kind == Kind::Ident && matches!(name.text.as_str(), "local" | "assert") {
            return None;
        }
        let mut k = first + 1;
        if self.tokens.get(k).map(|t| t.kind) == Some(Kind::Plus) {
            k += 1;
        }
        let mut colons = 0;
        while self.tokens.get(k).map(|t| t.kind) == Some(Kind::Colon) {
            colons += 1;
            k += 1;
        }
        (colons > 0 && k <= last).then(|| (name.text.clone(), k, last))
    }
}

/// Set `path` (e.g. `["components", "mnist", "replicas"]`) to the Jsonnet expression `value`,
/// creating the objects on the way if they are missing.
pub fn set_field(src: &str, path: &[&str], value: &str) -> Result<String, EditError> {
    let parsed = Parsed::new(src)?;
    let mut open = parsed.top_level_object()?;
    for (depth, key) in path.iter().enumerate() {
        let members = parsed.members(src, open);
        let found = members
            .iter()
            .find_map(|m| m.field.as_ref().filter(|(name, ..)| name == key));
        let is_last = depth + 1 == path.len();
        match found {
            Some(&(_, first, last)) if is_last => {
                let (start, end) = (parsed.tokens[first].start, parsed.tokens[last].end);
                return Ok(format!("{}{value}{}", &src[..start], &src[end..]));
            }
            Some(&(_, first, last)) => {
                if !(parsed.is_brace(first) && parsed.matching[first] == Some(last)) {
                    return Err(EditError::NotAnObjectLiteral {
                        path: path[..=depth].join("."),
                    });
                }
                open = first;
            }
            None => {
                let indent = member_indent(src, &parsed, open, &members);
                let text = nested_field(&path[depth..], value, &indent);
                return Ok(insert_member(src, &parsed, open, &members, &text, &indent));
            }
        }
    }
    Ok(src.to_owned())
}

/// Remove the field at `path` (with its line, when it has lines of its own); `Ok(None)` when
/// there is no such field.
pub fn remove_field(src: &str, path: &[&str]) -> Result<Option<String>, EditError> {
    let parsed = Parsed::new(src)?;
    let mut open = parsed.top_level_object()?;
    for (depth, key) in path.iter().enumerate() {
        let members = parsed.members(src, open);
        let Some(member) = members
            .iter()
            .find(|m| m.field.as_ref().is_some_and(|(name, ..)| name == key))
        else {
            return Ok(None);
        };
        let Some((_, first, last)) = member.field.as_ref() else {
            return Ok(None);
        };
        if depth + 1 < path.len() {
            if !(parsed.is_brace(*first) && parsed.matching[*first] == Some(*last)) {
                return Ok(None);
            }
            open = *first;
            continue;
        }
        let mut start = parsed.tokens[member.first].start;
        let mut end = match member.comma {
            Some(comma) => parsed.tokens[comma].end,
            None => parsed.tokens[member.last].end,
        };
        let line_start = src[..start].rfind('\n').map_or(0, |n| n + 1);
        if src[line_start..start].trim().is_empty() {
            let rest_of_line = src[end..].find('\n').map_or(src.len(), |n| end + n);
            let tail = src[end..rest_of_line].trim();
            if tail.is_empty() || tail.starts_with("//") || tail.starts_with('#') {
                start = line_start;
                end = (rest_of_line + 1).min(src.len());
            }
        }
        return Ok(Some(format!("{}{}", &src[..start], &src[end..])));
    }
    Ok(None)
}

fn line_indent(src: &str, offset: usize) -> &str {
    let line_start = src[..offset].rfind('\n').map_or(0, |n| n + 1);
    let line = &src[line_start..];
    &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
}

/// The indentation of the members of the object at `open`: that of its first member, or its
/// own line's plus two spaces.
fn member_indent(src: &str, parsed: &Parsed, open: usize, members: &[Member]) -> String {
    let open_offset = parsed.tokens[open].start;
    if let Some(first) = members.first() {
        let offset = parsed.tokens[first.first].start;
        if src[open_offset..offset].contains('\n') {
            return line_indent(src, offset).to_owned();
        }
    }
    format!("{}  ", line_indent(src, open_offset))
}

/// `key: value,` for the last key, nested in `key: { ... },` for the ones before it.
fn nested_field(path: &[&str], value: &str, indent: &str) -> String {
    match path {
        [] => String::new(),
        [key] => format!("{}: {value},", field_name(key)),
        [key, rest @ ..] => {
            let inner = format!("{indent}  ");
            format!(
                "{}: {{\n{inner}{}\n{indent}}},",
                field_name(key),
                nested_field(rest, value, &inner)
            )
        }
    }
}

/// Insert a member (`text`, ending with a comma) at the end of the object at `open`.
fn insert_member(
    src: &str,
    parsed: &Parsed,
    open: usize,
    members: &[Member],
    text: &str,
    indent: &str,
) -> String {
    let close = parsed.matching[open].unwrap_or(open);
    let close_offset = parsed.tokens[close].start;
    let mut out = String::with_capacity(src.len() + text.len() + 8);
    let last = members.last();
    let multi_line = src[parsed.tokens[open].start..close_offset].contains('\n');
    if !multi_line {
        // `{}` or `{ a: 1 }` on one line: open it up.
        let outer = line_indent(src, parsed.tokens[open].start);
        let mut body = String::new();
        for member in members {
            let end = member.comma.unwrap_or(member.last);
            let start = parsed.tokens[member.first].start;
            let mut item = src[start..parsed.tokens[member.last].end].to_owned();
            item.push(',');
            let _ = end;
            body.push_str(&format!("{indent}{item}\n"));
        }
        body.push_str(&format!("{indent}{text}\n"));
        out.push_str(&src[..parsed.tokens[open].end]);
        out.push('\n');
        out.push_str(&body);
        out.push_str(outer);
        out.push_str(&src[close_offset..]);
        return out;
    }
    // When the closing brace has a line of its own, the new member goes on a line before it.
    let line_start = src[..close_offset].rfind('\n').map_or(0, |n| n + 1);
    let brace_on_own_line = src[line_start..close_offset].trim().is_empty();
    let insert_at = if brace_on_own_line {
        line_start
    } else {
        close_offset
    };
    match last {
        Some(member) if member.comma.is_none() => {
            let end = parsed.tokens[member.last].end;
            out.push_str(&src[..end]);
            out.push(',');
            out.push_str(&src[end..insert_at]);
        }
        _ => out.push_str(&src[..insert_at]),
    }
    if !brace_on_own_line {
        out.push('\n');
    }
    out.push_str(indent);
    out.push_str(text);
    out.push('\n');
    if !brace_on_own_line {
        out.push_str(line_indent(src, parsed.tokens[open].start));
    }
    out.push_str(&src[insert_at..]);
    out
}

const KEYWORDS: &[&str] = &[
    "assert",
    "else",
    "error",
    "false",
    "for",
    "function",
    "if",
    "import",
    "importstr",
    "importbin",
    "in",
    "local",
    "null",
    "tailstrict",
    "then",
    "self",
    "super",
    "true",
];

/// A field name as Jsonnet source: bare when it is an identifier, quoted otherwise.
pub fn field_name(name: &str) -> String {
    let mut chars = name.chars();
    let identifier = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !KEYWORDS.contains(&name);
    if identifier {
        name.to_owned()
    } else {
        string_literal(name)
    }
}

fn string_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for ch in s.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            ch if ch.is_control() => out.push_str(&format!("\\u{:04x}", ch as u32)),
            ch => out.push(ch),
        }
    }
    out.push('\'');
    out
}

/// A JSON value as a one-line Jsonnet literal, strings in single quotes.
pub fn literal(value: &Value) -> String {
    match value {
        Value::String(s) => string_literal(s),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(literal).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) if map.is_empty() => "{}".to_owned(),
        Value::Object(map) => {
            let fields: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", field_name(k), literal(v)))
                .collect();
            format!("{{ {} }}", fields.join(", "))
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARAMS: &str = "// Parameters.\nlocal image = 'x';\n{\n  global: {\n  },\n  components: {\n    // the model\n    mnist: {\n      modelName: 'mnist',  // keep\n      replicas: 1 + 1,\n    },\n  },\n}\n";

    #[test]
    fn replaces_a_value_and_keeps_everything_else() {
        let out = set_field(PARAMS, &["components", "mnist", "replicas"], "3").unwrap();
        assert_eq!(out, PARAMS.replace("replicas: 1 + 1", "replicas: 3"));
    }

    #[test]
    fn inserts_a_field_after_the_last_one() {
        let out = set_field(PARAMS, &["components", "mnist", "numGpus"], "1").unwrap();
        assert!(
            out.contains("      replicas: 1 + 1,\n      numGpus: 1,\n    },\n"),
            "{out}"
        );
    }

    #[test]
    fn inserts_nested_objects_that_are_missing() {
        let out = set_field(PARAMS, &["components", "other", "a"], "'b'").unwrap();
        assert!(
            out.contains("    },\n    other: {\n      a: 'b',\n    },\n  },\n}\n"),
            "{out}"
        );
        let out = set_field(PARAMS, &["global", "image"], "'y'").unwrap();
        assert!(
            out.contains("  global: {\n    image: 'y',\n  },\n"),
            "{out}"
        );
    }

    #[test]
    fn opens_up_one_line_objects_and_adds_missing_commas() {
        let out = set_field(
            "{ global: {}, components: { a: { x: 1 } } }",
            &["components", "a", "y"],
            "2",
        )
        .unwrap();
        assert_eq!(
            out,
            "{ global: {}, components: { a: {\n  x: 1,\n  y: 2,\n} } }"
        );
        let out = set_field("{\n  a: 1\n}\n", &["b"], "2").unwrap();
        assert_eq!(out, "{\n  a: 1,\n  b: 2,\n}\n");
    }

    #[test]
    fn removes_a_field_with_its_line() {
        let out = remove_field(PARAMS, &["components", "mnist", "modelName"])
            .unwrap()
            .unwrap();
        assert!(!out.contains("modelName"));
        assert!(
            out.contains("    mnist: {\n      replicas: 1 + 1,\n"),
            "{out}"
        );
        let out = remove_field(PARAMS, &["components", "mnist"])
            .unwrap()
            .unwrap();
        assert!(
            out.contains("  components: {\n    // the model\n  },\n"),
            "{out}"
        );
        assert_eq!(remove_field(PARAMS, &["components", "nope"]).unwrap(), None);
    }

    #[test]
    fn refuses_paths_through_expressions() {
        let src = "{ components: { a: base + { x: 1 } } }";
        let error = set_field(src, &["components", "a", "y"], "1").unwrap_err();
        assert_eq!(
            error,
            EditError::NotAnObjectLiteral {
                path: "components.a".into()
            }
        );
    }

    #[test]
    fn skips_strings_comments_and_text_blocks() {
        let src = "{\n  a: '}', // }\n  b: |||\n    {\n  |||,\n  'c-d': \"x\",\n}\n";
        let out = set_field(src, &["c-d"], "'y'").unwrap();
        assert!(out.contains("'c-d': 'y',"), "{out}");
    }

    #[test]
    fn literals_are_readable_jsonnet() {
        let value = serde_json::json!({"a b": ["x", 1, true, null], "c": "it's"});
        assert_eq!(
            literal(&value),
            "{ 'a b': ['x', 1, true, null], c: 'it\\'s' }"
        );
    }
}
