//! Where in a Jsonnet file a runtime error happened, for the errors jrsonnet reports without a
//! location: a missing field (`no such field`), an operator applied to the wrong types, an
//! index out of bounds. jrsonnet's stack only has frames for calls, imports, assertions and
//! `error`, so a typo in a component's own body would otherwise name no line at all.
//!
//! Two facts locate such an error: the name of a missing field, whose reads (`.name`,
//! `['name']`) can be found among the file's tokens, and the field of the output being rendered
//! when it failed (`data.msg`), whose definition (`msg:` inside `data:`) can be found the same
//! way. This reads tokens, not the syntax tree, so it can be fooled by an object built with `+`
//! or by a function; the caller uses it only where jrsonnet gives nothing better.

use std::ops::Range;

use jrsonnet_lexer::{SyntaxKind, lex};

/// One step of the path to an output field: an object's key, or an array's index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Key(String),
    Index(usize),
}

/// `data.msg`, `items[1].name`.
pub fn path_text(path: &[Step]) -> String {
    let mut text = String::new();
    for step in path {
        match step {
            Step::Key(key) if text.is_empty() => text.push_str(key),
            Step::Key(key) => {
                text.push('.');
                text.push_str(key);
            }
            Step::Index(index) => text.push_str(&format!("[{index}]")),
        }
    }
    text
}

/// A token that is not whitespace or a comment, with its byte range.
struct Token<'s> {
    kind: SyntaxKind,
    text: &'s str,
    start: usize,
}

fn tokens(source: &str) -> Vec<Token<'_>> {
    lex(source)
        .into_iter()
        .filter(|lexeme| {
            !matches!(
                lexeme.kind,
                SyntaxKind::WHITESPACE
                    | SyntaxKind::SINGLE_LINE_SLASH_COMMENT
                    | SyntaxKind::SINGLE_LINE_HASH_COMMENT
                    | SyntaxKind::MULTI_LINE_COMMENT
            )
        })
        .map(|lexeme| Token {
            kind: lexeme.kind,
            text: lexeme.text,
            start: lexeme.range.0 as usize,
        })
        .collect()
}

/// The text of a plain string token (`'a'`, `"a"`), quotes removed; escapes are not undone,
/// which only matters for names no field has.
fn string_text<'s>(token: &Token<'s>) -> Option<&'s str> {
    match token.kind {
        SyntaxKind::STRING_SINGLE | SyntaxKind::STRING_DOUBLE => {
            token.text.get(1..token.text.len().saturating_sub(1))
        }
        _ => None,
    }
}

/// Whether a token names `name`: an identifier, or a string with that text.
fn names(token: &Token<'_>, name: &str) -> bool {
    match token.kind {
        SyntaxKind::IDENT => token.text == name,
        _ => string_text(token) == Some(name),
    }
}

/// Byte offsets of every read of the field `field`: the name in `.field` and the string in
/// `['field']`.
pub fn field_reads(source: &str, field: &str) -> Vec<usize> {
    let tokens = tokens(source);
    let mut reads = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let next = tokens.get(i + 1);
        let after = tokens.get(i + 2);
        match (token.kind, next, after) {
            (SyntaxKind::DOT, Some(name), _)
                if name.kind == SyntaxKind::IDENT && name.text == field =>
            {
                reads.push(name.start);
            }
            (SyntaxKind::L_BRACK, Some(name), Some(close))
                if close.kind == SyntaxKind::R_BRACK && string_text(name) == Some(field) =>
            {
                reads.push(name.start);
            }
            _ => {}
        }
    }
    reads
}

/// Where an output field is defined: the offset of its key and the byte range of its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definition {
    pub key: usize,
    pub value: Range<usize>,
}

/// The definition of the deepest key of `path` found in the file's object literals, each key
/// inside the value of the one before (array indexes are skipped).
pub fn field_definition(source: &str, path: &[Step]) -> Option<Definition> {
    let keys: Vec<&str> = path
        .iter()
        .filter_map(|step| match step {
            Step::Key(key) => Some(key.as_str()),
            Step::Index(_) => None,
        })
        .collect();
    let tokens = tokens(source);
    let (depth, found) = deepest(&tokens, 0..tokens.len(), &keys);
    let (key, value) = found.filter(|_| depth > 0)?;
    let end = tokens.get(value.end).map_or(source.len(), |t| t.start);
    Some(Definition {
        key: tokens[key].start,
        value: tokens.get(value.start).map_or(end, |t| t.start)..end,
    })
}

/// How many of `keys` were found nested, and the token index of the deepest key with the token
/// range of its value.
fn deepest(
    tokens: &[Token<'_>],
    range: Range<usize>,
    keys: &[&str],
) -> (usize, Option<(usize, Range<usize>)>) {
    let Some((first, rest)) = keys.split_first() else {
        return (0, None);
    };
    let mut best = (0, None);
    for i in range.clone() {
        let Some(value_start) = key_at(tokens, i, first) else {
            continue;
        };
        let value = value_start..value_end(tokens, value_start, range.end);
        let (depth, inner) = deepest(tokens, value.clone(), rest);
        if depth + 1 > best.0 {
            best = (depth + 1, inner.or(Some((i, value))));
        }
    }
    best
}

/// If the token at `i` is the key `name` of an object member (`{ name: `, `, 'name'+::`),
/// the index of the first token of its value.
fn key_at(tokens: &[Token<'_>], i: usize, name: &str) -> Option<usize> {
    let before = tokens.get(i.checked_sub(1)?)?;
    if !matches!(before.kind, SyntaxKind::L_BRACE | SyntaxKind::COMMA) || !names(&tokens[i], name) {
        return None;
    }
    let mut next = i + 1;
    if tokens.get(next)?.kind == SyntaxKind::PLUS {
        next += 1;
    }
    if tokens.get(next)?.kind != SyntaxKind::COLON {
        return None;
    }
    while tokens
        .get(next)
        .is_some_and(|t| t.kind == SyntaxKind::COLON)
    {
        next += 1;
    }
    Some(next)
}

/// The index of the token that ends a member's value starting at `start`: the `,` or closing
/// bracket at its own depth.
fn value_end(tokens: &[Token<'_>], start: usize, limit: usize) -> usize {
    let mut depth = 0usize;
    for (i, token) in tokens.iter().enumerate().take(limit).skip(start) {
        match token.kind {
            SyntaxKind::L_BRACE | SyntaxKind::L_BRACK | SyntaxKind::L_PAREN => depth += 1,
            SyntaxKind::R_BRACE | SyntaxKind::R_BRACK | SyntaxKind::R_PAREN if depth == 0 => {
                return i;
            }
            SyntaxKind::R_BRACE | SyntaxKind::R_BRACK | SyntaxKind::R_PAREN => depth -= 1,
            SyntaxKind::COMMA if depth == 0 => return i,
            _ => {}
        }
    }
    limit
}

/// The 1-based line and column (in characters) of a byte offset.
pub fn line_column(source: &str, offset: usize) -> (usize, usize) {
    let before = source.get(..offset).unwrap_or(source);
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.matches('\n').count() + 1;
    (line, before[line_start..].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Step {
        Step::Key(name.to_owned())
    }

    #[test]
    fn reads_of_a_field_by_dot_and_by_string_index_not_in_comments_or_strings() {
        let source = "local a = { x: 1 };\n// a.x\n[a.x, a['x'], 'a.x', a.xy, a[\"x\"]]\n";
        let found: Vec<(usize, usize)> = field_reads(source, "x")
            .into_iter()
            .map(|offset| line_column(source, offset))
            .collect();
        assert_eq!(found, [(3, 4), (3, 9), (3, 30)]);
    }

    #[test]
    fn the_definition_of_a_nested_field_and_its_value() {
        let source = "{\n  msg: 0,\n  data: {\n    ok: 1,\n    msg: 'a' - 1,\n  },\n}\n";
        let found = field_definition(source, &[key("data"), key("msg")]).unwrap();
        assert_eq!(line_column(source, found.key), (5, 5));
        assert_eq!(&source[found.value], "'a' - 1");
        // A path whose end is built elsewhere names the deepest key written out.
        let found = field_definition(source, &[key("data"), key("other")]).unwrap();
        assert_eq!(line_column(source, found.key), (3, 3));
        assert_eq!(field_definition(source, &[key("nothing")]), None);
    }

    #[test]
    fn keys_in_any_member_syntax_and_indexes_skipped() {
        let source = "{ items+: [{ 'name':: f(1, 2), }] }";
        let found = field_definition(source, &[key("items"), Step::Index(0), key("name")]).unwrap();
        assert_eq!(&source[found.value], "f(1, 2)");
        assert_eq!(
            path_text(&[key("items"), Step::Index(0), key("name")]),
            "items[0].name"
        );
    }
}
