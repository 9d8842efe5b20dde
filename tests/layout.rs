//! The layout of `src/`, checked: the rules that let the source tree be read as layers.
//!
//! Folders under `src/` are layers, and arrows point down: a file uses the files below it and
//! is used by the files above it, never both, so there is no import cycle among the files of
//! `src/` (the files of a cycle can only be read, changed and tested together). `cli` is the top
//! layer: it turns the command line into calls of the layers below, so nothing outside
//! `src/cli/` depends on it (`main.rs` and `lib.rs` only wire it up). And no function needs
//! scrolling: none is longer than 80 lines, counted from the line of its `fn` to the line of its
//! closing brace (test functions too; declarations without a body are not functions here).
//!
//! Inside a layer, a folder may be built of rooms (its sub-folders), floor by floor ([`ROOMS`]):
//! a room uses only its own files and the rooms on the floors below its own, so rooms on one
//! floor never use each other, and the folder's own files (`deploy/apply.rs`, `operator/mod.rs`)
//! sit above every room and are used by none. Every sub-folder of such a folder is in the table.
//!
//! The checks read the sources with a scanner of their own, so they run offline and without a
//! compiler: `cargo test --test layout`. Comments (nested ones too), string literals (normal,
//! raw, byte, C), char literals and lifetimes do not confuse it. Each failure lists every
//! offender at once: a function's `file:line`, name and length; a cycle's files and the
//! references between them.
//!
//! How the import graph is drawn: one node per file, named by its module path (`src/a/b.rs` and
//! `src/a/b/mod.rs` are `a::b`, `src/lib.rs` is the crate root, `src/main.rs` a node of its
//! own). File A has an edge to file B when A's code names a path that resolves to B: every path
//! of a `use` tree, and every path in the code that starts with `crate::`, `super::`, `self::`,
//! or the name of a child module A declares with `mod name;`. A path resolves to the deepest file
//! whose module path is a prefix of it. Test code is not part of the graph: items under
//! `#[cfg(test)]` are dropped, and a file declared by `#[cfg(test)] mod name;` is left out with
//! the files under it. A file's references to its own ancestors and descendants are not edges:
//! a parent module owns its children.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The longest a function may be, in lines from its `fn` to its closing brace.
const MAX_FUNCTION_LINES: usize = 80;

/// The module path of `src/main.rs`: a segment no Rust path can spell, so nothing resolves to it.
const MAIN: &str = "<main>";

#[test]
fn no_function_over_80_lines() {
    let mut long: Vec<Function> = source_files()
        .iter()
        .flat_map(|file| functions(&file.path, &file.tokens))
        .filter(|function| function.lines > MAX_FUNCTION_LINES)
        .collect();
    long.sort_by(|a, b| (b.lines, &a.path, a.line).cmp(&(a.lines, &b.path, b.line)));
    let mut report = format!(
        "{} functions in src/ are longer than {MAX_FUNCTION_LINES} lines (from `fn` to the \
         closing brace); split each along the steps its comments name:\n",
        long.len()
    );
    for function in &long {
        let place = format!("{}:{}", function.path, function.line);
        report += &format!(
            "    {place:<48} {:<24} {} lines\n",
            function.name, function.lines
        );
    }
    assert!(long.is_empty(), "{report}");
}

#[test]
fn no_import_cycle_among_src_files() {
    let graph = ImportGraph::new(source_files());
    let cycles: Vec<Vec<usize>> = strongly_connected(&graph.successors())
        .into_iter()
        .filter(|component| component.len() > 1)
        .collect();
    let mut report = format!(
        "{} import cycles among the files of src/ (each: its files, then the references \
         between them, `file -> file it uses (lines that do)`); break each so arrows point down:\n",
        cycles.len()
    );
    for cycle in &cycles {
        let files: Vec<&str> = cycle
            .iter()
            .map(|&f| graph.files[f].path.as_str())
            .collect();
        report += &format!("  cycle: {}\n", files.join(", "));
        for &from in cycle {
            for (to, lines) in &graph.edges[from] {
                if cycle.contains(to) {
                    report += &format!("    {}\n", graph.describe_edge(from, *to, lines));
                }
            }
        }
    }
    assert!(cycles.is_empty(), "{report}");
}

#[test]
fn nothing_outside_cli_depends_on_cli() {
    let graph = ImportGraph::new(source_files());
    let in_cli = |f: usize| graph.files[f].module.first().is_some_and(|s| s == "cli");
    let wiring = |f: usize| graph.files[f].module.is_empty() || graph.files[f].module == [MAIN];
    let mut report = String::new();
    let mut count = 0;
    for (from, edges) in graph.edges.iter().enumerate() {
        for (to, lines) in edges {
            if in_cli(*to) && !in_cli(from) && !wiring(from) {
                report += &format!("    {}\n", graph.describe_edge(from, *to, lines));
                count += 1;
            }
        }
    }
    assert!(
        count == 0,
        "{count} references into src/cli/ from files outside it (cli is the top layer; move \
         what they use below it):\n{report}"
    );
}

/// The folders of `src/` built of rooms, each with its floors, lowest first, and on each floor its
/// rooms (sub-folders), which never use each other.
const ROOMS: &[Rooms] = &[
    Rooms {
        folder: "deploy",
        floors: &[&["cluster"], &["inventory"], &["checks", "health"]],
    },
    // `training` reads the VolumeManager a job names (`volumes/api`: its data), so `volumes` is
    // a floor below it; `fc` uses neither, and `runtime` no controller's room.
    Rooms {
        folder: "operator",
        floors: &[&["runtime"], &["volumes"], &["training", "fc", "serving"]],
    },
];

#[test]
fn rooms_use_only_the_floors_below_them() {
    let graph = ImportGraph::new(source_files());
    let found = room_violations(&graph, ROOMS);
    let floors: Vec<String> = ROOMS.iter().map(Rooms::describe).collect();
    assert!(
        found.is_empty(),
        "{} breaks of the floors of rooms, each a sub-folder in no room or a reference up or \
         sideways (the rooms, lowest floor first: {}; a room uses only its own files and the \
         floors below it, and the folder's own files sit above them all): move what is used down \
         into a lower room, or the code that uses it up; put a new sub-folder on its floor in \
         `ROOMS` (tests/layout.rs):\n{}",
        found.len(),
        floors.join("; "),
        found.join("\n")
    );
}

/// A folder of `src/` built of rooms: its sub-folders, floor by floor, lowest first.
struct Rooms {
    /// The folder's path under `src/`: `deploy`.
    folder: &'static str,
    /// The rooms on each floor, lowest first.
    floors: &'static [&'static [&'static str]],
}

/// Where a file stands in a folder of rooms.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Place {
    /// Directly in the folder: above every room.
    Own,
    /// In a room, on a floor (0 the lowest).
    Room { floor: usize, room: &'static str },
}

impl Rooms {
    /// Where the file at `path` (`src/...`) stands: `None` outside the folder, `Err` with the
    /// sub-folder when no floor has it.
    fn place(&self, path: &str) -> Option<Result<Place, String>> {
        let inside = path.strip_prefix(&format!("src/{}/", self.folder))?;
        let Some((room, _)) = inside.split_once('/') else {
            return Some(Ok(Place::Own));
        };
        let found = (self.floors.iter().enumerate())
            .find_map(|(floor, rooms)| Some((floor, *rooms.iter().find(|r| **r == room)?)));
        Some(match found {
            Some((floor, room)) => Ok(Place::Room { floor, room }),
            None => Err(format!("src/{}/{room}/", self.folder)),
        })
    }

    /// Why a file at `from` may not use one at `to`; `None` when it may.
    fn forbids(&self, from: Place, to: Place) -> Option<String> {
        let Place::Room { floor, room } = from else {
            return None;
        };
        match to {
            Place::Own => Some(format!(
                "{room} uses {}/'s own files, which sit above every room",
                self.folder
            )),
            Place::Room { room: used, .. } if used == room => None,
            Place::Room { floor: below, .. } if below < floor => None,
            Place::Room {
                floor: beside,
                room: used,
            } if beside == floor => Some(format!("{room} uses {used}, a room beside it")),
            Place::Room { room: used, .. } => Some(format!("{room} uses {used}, a room above it")),
        }
    }

    /// `deploy/: cluster < inventory < {checks, health}`, for a failure message.
    fn describe(&self) -> String {
        let floors: Vec<String> = (self.floors.iter())
            .map(|rooms| match rooms {
                [room] => room.to_string(),
                _ => format!("{{{}}}", rooms.join(", ")),
            })
            .collect();
        format!("{}/: {}", self.folder, floors.join(" < "))
    }
}

/// What breaks the rules of `rules` in `graph`, one line each: the sub-folders in no room, then
/// every reference that goes up or sideways, with the rule it breaks.
fn room_violations(graph: &ImportGraph, rules: &[Rooms]) -> Vec<String> {
    let mut unplaced = BTreeSet::new();
    let mut references = Vec::new();
    for rooms in rules {
        let places: Vec<Option<Place>> = (graph.files.iter())
            .map(|file| match rooms.place(&file.path)? {
                Ok(place) => Some(place),
                Err(folder) => {
                    unplaced.insert(format!("    {folder} is no room of {}/", rooms.folder));
                    None
                }
            })
            .collect();
        for (from, edges) in graph.edges.iter().enumerate() {
            for (to, lines) in edges {
                let (Some(used_by), Some(used)) = (places[from], places[*to]) else {
                    continue;
                };
                if let Some(why) = rooms.forbids(used_by, used) {
                    references.push(format!(
                        "    {}: {why}",
                        graph.describe_edge(from, *to, lines)
                    ));
                }
            }
        }
    }
    unplaced.into_iter().chain(references).collect()
}

/// One `.rs` file under `src/`, scanned.
struct SourceFile {
    /// Its path from the crate root (`src/deploy/apply.rs`), as failure messages name it.
    path: String,
    /// Its module path: `["deploy", "apply"]`; empty for `lib.rs`, `[MAIN]` for `main.rs`.
    module: Vec<String>,
    tokens: Vec<Token>,
}

impl SourceFile {
    /// Scans `source`, the text of the file at `path` (`src/...`).
    fn new(path: &str, source: &str) -> SourceFile {
        let within_src = Path::new(path)
            .strip_prefix("src")
            .expect("a file under src/");
        SourceFile {
            path: path.to_string(),
            module: module_path(within_src),
            tokens: tokenize(source),
        }
    }
}

/// Every `.rs` file under `src/`, in path order.
fn source_files() -> Vec<SourceFile> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = Vec::new();
    collect_rust_files(&root.join("src"), &mut paths);
    paths.sort();
    paths
        .iter()
        .map(|path| {
            let source = std::fs::read_to_string(path)
                .unwrap_or_else(|error| panic!("read {}: {error}", path.display()));
            let relative = path
                .strip_prefix(root)
                .expect("a file under the crate root");
            SourceFile::new(&relative.to_string_lossy(), &source)
        })
        .collect()
}

/// Adds the `.rs` files under `dir`, at any depth, to `paths`.
fn collect_rust_files(dir: &Path, paths: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|error| panic!("read {}: {error}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            collect_rust_files(&path, paths);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            paths.push(path);
        }
    }
}

/// The module path of a file, given its path within `src/`: `a/b.rs` and `a/b/mod.rs` are
/// `["a", "b"]`, `lib.rs` the crate root `[]`, and `main.rs` a root of its own, `[MAIN]`.
fn module_path(within_src: &Path) -> Vec<String> {
    let mut segments: Vec<String> = within_src
        .with_extension("")
        .iter()
        .map(|segment| segment.to_string_lossy().into_owned())
        .collect();
    if segments.last().is_some_and(|last| last == "mod") {
        segments.pop();
    }
    match segments.as_slice() {
        [only] if only == "lib" => Vec::new(),
        [only] if only == "main" => vec![MAIN.to_string()],
        _ => segments,
    }
}

/// A token of Rust source, with the line it starts on. Its text is an identifier or keyword (a
/// number reads as one too), `::`, a placeholder for a literal (`""` for a string, `''` for a
/// char), a lifetime or label (`'a`), or a single punctuation character. Comments are no tokens.
#[derive(Clone, Debug, PartialEq)]
struct Token {
    text: String,
    line: usize,
}

/// The tokens of `source`.
fn tokenize(source: &str) -> Vec<Token> {
    let mut scanner = Scanner {
        chars: source.chars().collect(),
        at: 0,
        line: 1,
        tokens: Vec::new(),
    };
    while let Some(next) = scanner.peek(0) {
        scanner.scan_one(next);
    }
    scanner.tokens
}

/// Whether `c` can be part of an identifier (or of a number).
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether a token is an identifier or keyword (not a number, literal, lifetime or punctuation).
fn is_identifier(text: &str) -> bool {
    text.starts_with(|c: char| c.is_alphabetic() || c == '_')
}

/// The tokenizer's position in a source, and the tokens it has read so far.
struct Scanner {
    chars: Vec<char>,
    at: usize,
    line: usize,
    tokens: Vec<Token>,
}

impl Scanner {
    /// The character `ahead` places after the current one.
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn starts_with(&self, text: &str) -> bool {
        text.chars()
            .enumerate()
            .all(|(i, c)| self.peek(i) == Some(c))
    }

    /// Moves past `count` characters, counting the line breaks among them.
    fn advance(&mut self, count: usize) {
        for _ in 0..count {
            if self.peek(0) == Some('\n') {
                self.line += 1;
            }
            self.at += 1;
        }
    }

    fn push(&mut self, text: String, line: usize) {
        self.tokens.push(Token { text, line });
    }

    /// Reads what starts at the current character, `next`: a token, or space or a comment.
    fn scan_one(&mut self, next: char) {
        if next.is_whitespace() {
            self.advance(1);
        } else if self.starts_with("//") {
            while self.peek(0).is_some_and(|c| c != '\n') {
                self.advance(1);
            }
        } else if self.starts_with("/*") {
            self.skip_block_comment();
        } else if let Some((opening, raw_hashes)) = self.string_start() {
            self.skip_string(opening, raw_hashes);
        } else if next == '\'' || self.starts_with("b'") {
            self.char_or_lifetime();
        } else if is_word_char(next) {
            let line = self.line;
            let word = self.take_word();
            self.push(word, line);
        } else if self.starts_with("::") {
            self.push("::".to_string(), self.line);
            self.advance(2);
        } else {
            self.push(next.to_string(), self.line);
            self.advance(1);
        }
    }

    /// Reads an identifier, keyword or number.
    fn take_word(&mut self) -> String {
        let mut word = String::new();
        while let Some(c) = self.peek(0).filter(|&c| is_word_char(c)) {
            word.push(c);
            self.advance(1);
        }
        word
    }

    /// Skips a block comment; they nest.
    fn skip_block_comment(&mut self) {
        let mut depth = 0;
        while self.peek(0).is_some() {
            if self.starts_with("/*") {
                depth += 1;
                self.advance(2);
            } else if self.starts_with("*/") {
                depth -= 1;
                self.advance(2);
                if depth == 0 {
                    return;
                }
            } else {
                self.advance(1);
            }
        }
    }

    /// The string literal that starts here, if one does: the length of its opening (prefix,
    /// `#`s and quote), and for a raw string its number of `#`s.
    fn string_start(&self) -> Option<(usize, Option<usize>)> {
        for prefix in ["br", "cr", "r"] {
            if self.starts_with(prefix) {
                let hashes = (prefix.len()..)
                    .take_while(|&i| self.peek(i) == Some('#'))
                    .count();
                if self.peek(prefix.len() + hashes) == Some('"') {
                    return Some((prefix.len() + hashes + 1, Some(hashes)));
                }
            }
        }
        ["b\"", "c\"", "\""]
            .into_iter()
            .find(|opening| self.starts_with(opening))
            .map(|opening| (opening.len(), None))
    }

    /// Skips a string literal whose opening is `opening` characters long, leaving `""`.
    fn skip_string(&mut self, opening: usize, raw_hashes: Option<usize>) {
        self.push("\"\"".to_string(), self.line);
        self.advance(opening);
        let closing = format!("\"{}", "#".repeat(raw_hashes.unwrap_or(0)));
        while self.peek(0).is_some() {
            if raw_hashes.is_none() && self.peek(0) == Some('\\') {
                self.advance(2);
            } else if self.starts_with(&closing) {
                self.advance(closing.len());
                return;
            } else {
                self.advance(1);
            }
        }
    }

    /// Reads what starts with a quote (after a `b` for a byte): a char literal, leaving `''`,
    /// or a lifetime or loop label, leaving `'name`.
    fn char_or_lifetime(&mut self) {
        if self.peek(0) == Some('b') {
            self.advance(1);
        }
        let line = self.line;
        if self.peek(1) == Some('\\') {
            self.advance(3);
            while self.peek(0).is_some_and(|c| c != '\'') {
                self.advance(1);
            }
            self.advance(1);
            self.push("''".to_string(), line);
        } else if self.peek(2) == Some('\'') {
            self.advance(3);
            self.push("''".to_string(), line);
        } else {
            self.advance(1);
            let name = self.take_word();
            self.push(format!("'{name}"), line);
        }
    }
}

/// A function with a body, and its length.
#[derive(Debug, PartialEq)]
struct Function {
    path: String,
    /// The line of its `fn`.
    line: usize,
    name: String,
    /// Lines from its `fn` to its closing brace, both included.
    lines: usize,
}

/// Every function with a body among a file's tokens, nested ones and test functions too.
fn functions(path: &str, tokens: &[Token]) -> Vec<Function> {
    let mut found = Vec::new();
    for (at, keyword) in tokens.iter().enumerate() {
        if keyword.text != "fn" {
            continue;
        }
        let Some(name) = tokens.get(at + 1).filter(|name| is_identifier(&name.text)) else {
            continue;
        };
        if let Some(close) = body_end(tokens, at) {
            found.push(Function {
                path: path.to_string(),
                line: keyword.line,
                name: name.text.clone(),
                lines: tokens[close].line - keyword.line + 1,
            });
        }
    }
    found
}

/// The index of the brace closing the body of the function whose `fn` is at `at`, or `None` for
/// a declaration without a body (its `;` comes first; one inside `[u8; 4]` does not count).
fn body_end(tokens: &[Token], at: usize) -> Option<usize> {
    let mut nesting = 0usize;
    for (i, token) in tokens.iter().enumerate().skip(at + 1) {
        match token.text.as_str() {
            "(" | "[" => nesting += 1,
            ")" | "]" => nesting = nesting.saturating_sub(1),
            ";" if nesting == 0 => return None,
            "{" if nesting == 0 => return closing(tokens, i, "{", "}"),
            _ => {}
        }
    }
    None
}

/// The index of the `closer` that closes the `opener` at `open` (a `}` or a `]`).
fn closing(tokens: &[Token], open: usize, opener: &str, closer: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, token) in tokens.iter().enumerate().skip(open) {
        match token.text.as_str() {
            text if text == opener => depth += 1,
            text if text == closer => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// A file's code outside `#[cfg(test)]`.
struct NonTestCode {
    /// Its tokens, test-only items dropped.
    tokens: Vec<Token>,
    /// The modules it declares test-only, `#[cfg(test)] mod name;`: whole files of tests.
    test_modules: BTreeSet<String>,
}

/// Drops the items under `#[cfg(test)]` (or `#[cfg(all(test, ...))]`) from a file's tokens.
fn without_test_items(tokens: &[Token]) -> NonTestCode {
    let mut code = NonTestCode {
        tokens: Vec::new(),
        test_modules: BTreeSet::new(),
    };
    let mut at = 0;
    while at < tokens.len() {
        match attribute_end(tokens, at).filter(|&end| is_test_only(&tokens[at + 2..end - 1])) {
            Some(end) => {
                let mut item = end;
                while let Some(next) = attribute_end(tokens, item) {
                    item = next;
                }
                if let Some(name) = declared_module(&tokens[item..]) {
                    code.test_modules.insert(name);
                }
                at = item_end(tokens, item);
            }
            None => {
                code.tokens.push(tokens[at].clone());
                at += 1;
            }
        }
    }
    code
}

/// The index after the outer attribute (`#[...]`) that starts at `at`, if one does.
fn attribute_end(tokens: &[Token], at: usize) -> Option<usize> {
    if tokens.get(at)?.text != "#" || tokens.get(at + 1)?.text != "[" {
        return None;
    }
    closing(tokens, at + 1, "[", "]").map(|close| close + 1)
}

/// Whether an attribute, given by the tokens between its brackets, makes its item test-only:
/// `cfg(test)`, or `cfg(all(...))` with `test` among its conditions.
fn is_test_only(attribute: &[Token]) -> bool {
    let text: String = attribute.iter().map(|token| token.text.as_str()).collect();
    let all_of = text
        .strip_prefix("cfg(all(")
        .and_then(|rest| rest.strip_suffix("))"));
    text == "cfg(test)"
        || all_of.is_some_and(|conditions| top_level_split(conditions).contains(&"test"))
}

/// `text` split at the commas outside parentheses.
fn top_level_split(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// The name of the module that `tokens` begin declaring without a body, `[pub[(...)]] mod name;`.
fn declared_module(tokens: &[Token]) -> Option<String> {
    let texts: Vec<&str> = tokens.iter().map(|token| token.text.as_str()).collect();
    let mut rest = texts.as_slice();
    if let ["pub", after @ ..] = rest {
        rest = after;
        if let ["(", ..] = rest {
            let close = rest.iter().position(|&text| text == ")")?;
            rest = &rest[close + 1..];
        }
    }
    match rest {
        ["mod", name, ";", ..] if is_identifier(name) => Some(name.to_string()),
        _ => None,
    }
}

/// The index after the item that starts at `at`: after its first `;` outside any brackets, or
/// after the brace that closes its first block.
fn item_end(tokens: &[Token], at: usize) -> usize {
    let (mut nesting, mut depth) = (0usize, 0usize);
    for (i, token) in tokens.iter().enumerate().skip(at) {
        match token.text.as_str() {
            "(" | "[" => nesting += 1,
            ")" | "]" => nesting = nesting.saturating_sub(1),
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            ";" if nesting == 0 && depth == 0 => return i + 1,
            _ => {}
        }
    }
    tokens.len()
}

/// The modules a file declares without a body, `mod name;`: its child files.
fn child_modules(tokens: &[Token]) -> BTreeSet<String> {
    tokens
        .windows(3)
        .filter(|window| window[0].text == "mod" && window[2].text == ";")
        .filter(|window| is_identifier(&window[1].text))
        .map(|window| window[1].text.clone())
        .collect()
}

/// A path a file names, segment by segment, with the line that names it.
type NamedPath = (usize, Vec<String>);

/// Every path the `use` declarations among `tokens` import, with the line of their `use`:
/// `use a::{b, c::d as e, f::*, self}` imports `a::b`, `a::c::d`, `a::f` and `a`.
fn use_paths(tokens: &[Token]) -> Vec<NamedPath> {
    let mut paths = Vec::new();
    for (at, keyword) in tokens.iter().enumerate() {
        let tree_start = tokens.get(at + 1).map(|token| token.text.as_str());
        let is_declaration = tree_start.is_some_and(|t| is_identifier(t) || t == "::" || t == "{");
        if keyword.text != "use" || !is_declaration {
            continue;
        }
        let tree: Vec<&str> = tokens[at + 1..]
            .iter()
            .map(|token| token.text.as_str())
            .take_while(|&text| text != ";")
            .collect();
        let mut expanded = Vec::new();
        expand_use_item(&tree, &mut 0, &[], &mut expanded);
        paths.extend(expanded.into_iter().map(|path| (keyword.line, path)));
    }
    paths
}

/// Expands the use tree item at `at` (a path, perhaps ending in `*`, `as name` or a braced
/// list), under `prefix`, into the paths it imports.
fn expand_use_item(tree: &[&str], at: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut path = prefix.to_vec();
    if matches!(tree.get(*at), None | Some(&",") | Some(&"}")) {
        return;
    }
    while let Some(&token) = tree.get(*at) {
        match token {
            "::" | "*" => *at += 1,
            "as" => *at += 2,
            "self" if !path.is_empty() => *at += 1,
            "{" => {
                *at += 1;
                expand_use_list(tree, at, &path, out);
                return;
            }
            word if is_identifier(word) => {
                path.push(word.to_string());
                *at += 1;
            }
            _ => break,
        }
    }
    out.push(path);
}

/// Expands the items of a braced use list, from its first item to past its `}`.
fn expand_use_list(tree: &[&str], at: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
    loop {
        expand_use_item(tree, at, prefix, out);
        match tree.get(*at) {
            Some(&",") => *at += 1,
            Some(&"}") => {
                *at += 1;
                return;
            }
            _ => return,
        }
    }
}

/// Every path written in the code, with its line: an identifier followed by `::` and more
/// identifiers (`crate::a::b`, `super::super::c`, `child::d`; `use` trees included).
fn code_paths(tokens: &[Token]) -> Vec<NamedPath> {
    let mut paths = Vec::new();
    let mut at = 0;
    while at < tokens.len() {
        let follows_separator = at > 0 && tokens[at - 1].text == "::";
        if !is_identifier(&tokens[at].text) || follows_separator {
            at += 1;
            continue;
        }
        let mut path = vec![tokens[at].text.clone()];
        let mut next = at + 1;
        while tokens.get(next).is_some_and(|token| token.text == "::")
            && let Some(segment) = tokens.get(next + 1).filter(|t| is_identifier(&t.text))
        {
            path.push(segment.text.clone());
            next += 2;
        }
        if path.len() > 1 {
            paths.push((tokens[at].line, path));
        }
        at = next;
    }
    paths
}

/// The module paths of the files of `src/`, to resolve the paths the code names.
struct Modules {
    /// Each file's module path, by the file's index.
    paths: Vec<Vec<String>>,
    /// Each file's index, by its module path.
    by_path: BTreeMap<Vec<String>, usize>,
}

impl Modules {
    fn new(paths: Vec<Vec<String>>) -> Modules {
        let by_path = (paths.iter().cloned()).zip(0..).collect();
        Modules { paths, by_path }
    }

    /// The file that `path`, written in the file of module `from` (which declares
    /// `child_modules`), refers to: `None` for a path that starts elsewhere (a crate, a type).
    fn resolve(
        &self,
        from: &[String],
        path: &[String],
        child_modules: &BTreeSet<String>,
    ) -> Option<usize> {
        let first = path.first()?.as_str();
        let (base, rest): (&[String], &[String]) = match first {
            "crate" => (&[], &path[1..]),
            "self" => (from, &path[1..]),
            "super" => {
                let supers = path
                    .iter()
                    .take_while(|segment| *segment == "super")
                    .count();
                (&from[..from.len().saturating_sub(supers)], &path[supers..])
            }
            _ if child_modules.contains(first) => (from, path),
            _ => return None,
        };
        self.owner(&[base, rest].concat())
    }

    /// The deepest file whose module path is a prefix of `path`.
    fn owner(&self, path: &[String]) -> Option<usize> {
        (0..=path.len())
            .rev()
            .find_map(|length| self.by_path.get(&path[..length]).copied())
    }
}

/// The import graph of `src/`: for each file (by index), the files its non-test code refers to,
/// each with the lines that do. Test files have no edges, and no edges lead to them.
struct ImportGraph {
    files: Vec<SourceFile>,
    edges: Vec<BTreeMap<usize, BTreeSet<usize>>>,
}

impl ImportGraph {
    fn new(files: Vec<SourceFile>) -> ImportGraph {
        let modules = Modules::new(files.iter().map(|file| file.module.clone()).collect());
        let code: Vec<NonTestCode> = files
            .iter()
            .map(|f| without_test_items(&f.tokens))
            .collect();
        let test_files: BTreeSet<Vec<String>> = files
            .iter()
            .zip(&code)
            .flat_map(|(file, code)| {
                let parent = &file.module;
                code.test_modules
                    .iter()
                    .map(move |name| [parent.clone(), vec![name.clone()]].concat())
            })
            .collect();
        let is_test =
            |module: &[String]| (1..=module.len()).any(|k| test_files.contains(&module[..k]));
        let edges = (files.iter().zip(&code))
            .map(|(file, code)| {
                if is_test(&file.module) {
                    return BTreeMap::new();
                }
                let mut edges = file_edges(&modules, &file.module, &code.tokens);
                edges.retain(|to, _| !is_test(&files[*to].module));
                edges
            })
            .collect();
        ImportGraph { files, edges }
    }

    /// Each file's successors, for the search for cycles.
    fn successors(&self) -> Vec<Vec<usize>> {
        self.edges
            .iter()
            .map(|edges| edges.keys().copied().collect())
            .collect()
    }

    /// `from -> to (lines ...)`, for a failure message.
    fn describe_edge(&self, from: usize, to: usize, lines: &BTreeSet<usize>) -> String {
        let numbers: Vec<String> = lines.iter().map(usize::to_string).collect();
        let (from, to) = (&self.files[from].path, &self.files[to].path);
        let noun = if lines.len() == 1 { "line" } else { "lines" };
        format!("{from} -> {to} ({noun} {})", numbers.join(", "))
    }
}

/// The files that the code of the file of module `from` refers to, with the lines that do; but
/// not itself, its ancestors or its descendants.
fn file_edges(
    modules: &Modules,
    from: &[String],
    tokens: &[Token],
) -> BTreeMap<usize, BTreeSet<usize>> {
    let children = child_modules(tokens);
    let mut edges: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    for (line, path) in use_paths(tokens).into_iter().chain(code_paths(tokens)) {
        let Some(to) = modules.resolve(from, &path, &children) else {
            continue;
        };
        let target = modules.paths[to].as_slice();
        if !(from.starts_with(target) || target.starts_with(from)) {
            edges.entry(to).or_default().insert(line);
        }
    }
    edges
}

/// The strongly connected components of a graph given by each node's successors (Tarjan), each
/// sorted, in the order of their first node.
fn strongly_connected(successors: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let mut search = Tarjan {
        successors,
        index: vec![None; successors.len()],
        low: vec![0; successors.len()],
        stack: Vec::new(),
        on_stack: vec![false; successors.len()],
        next_index: 0,
        components: Vec::new(),
    };
    for node in 0..successors.len() {
        if search.index[node].is_none() {
            search.visit(node);
        }
    }
    let mut components = search.components;
    components
        .iter_mut()
        .for_each(|component| component.sort_unstable());
    components.sort();
    components
}

/// The state of Tarjan's depth-first search for strongly connected components.
struct Tarjan<'a> {
    successors: &'a [Vec<usize>],
    /// The order in which the search reached each node.
    index: Vec<Option<usize>>,
    /// The lowest index reachable from each node through the nodes still on the stack.
    low: Vec<usize>,
    stack: Vec<usize>,
    on_stack: Vec<bool>,
    next_index: usize,
    components: Vec<Vec<usize>>,
}

impl Tarjan<'_> {
    fn visit(&mut self, node: usize) {
        self.index[node] = Some(self.next_index);
        self.low[node] = self.next_index;
        self.next_index += 1;
        self.stack.push(node);
        self.on_stack[node] = true;
        for &next in &self.successors[node] {
            match self.index[next] {
                None => {
                    self.visit(next);
                    self.low[node] = self.low[node].min(self.low[next]);
                }
                Some(index) if self.on_stack[next] => self.low[node] = self.low[node].min(index),
                Some(_) => {}
            }
        }
        if Some(self.low[node]) == self.index[node] {
            let mut component = Vec::new();
            while let Some(member) = self.stack.pop() {
                self.on_stack[member] = false;
                component.push(member);
                if member == node {
                    break;
                }
            }
            self.components.push(component);
        }
    }
}

/// The scanner's own tests: these must pass whatever the state of the tree.
mod scanner {
    use super::*;

    fn texts(source: &str) -> Vec<String> {
        tokenize(source)
            .into_iter()
            .map(|token| token.text)
            .collect()
    }

    fn paths(named: Vec<NamedPath>) -> Vec<String> {
        named.into_iter().map(|(_, path)| path.join("::")).collect()
    }

    #[test]
    fn braces_in_literals_comments_and_lifetimes_do_not_count() {
        let source = r####"
fn tricky<'a>(text: &'a str) -> char {
    let open = '{';
    let close = "}\"{";
    let raw = r#"}"{"#;
    let bytes = (b'}', b"{", br##"}"#"##, '\'', '\u{7b}');
    // } a brace in a comment
    /* { /* nested } */ } */
    'outer: loop { break 'outer; }
    '}'
}
fn next() {}
"####;
        let found = functions("src/x.rs", &tokenize(source));
        let summary: Vec<(&str, usize, usize)> = found
            .iter()
            .map(|f| (f.name.as_str(), f.line, f.lines))
            .collect();
        assert_eq!(summary, [("tricky", 2, 10), ("next", 12, 1)]);
    }

    #[test]
    fn literals_and_lifetimes_become_placeholders() {
        let source = "let s: &'static str = \"a // b\"; let c = b'\"'; x /* y */ :: z";
        let expected = [
            "let", "s", ":", "&", "'static", "str", "=", "\"\"", ";", "let", "c", "=", "''", ";",
            "x", "::", "z",
        ];
        assert_eq!(texts(source), expected);
    }

    #[test]
    fn a_body_is_the_first_brace_outside_the_signature_s_brackets() {
        let source = "trait T {
    fn declared(&self);
    fn defined(&self, x: [u8; 2]) -> [u8; 2] {
        x
    }
}
fn destructured(Point { x, y }: Point) -> i32 {
    x + y
}
";
        let found = functions("src/x.rs", &tokenize(source));
        let names: Vec<(&str, usize)> = found.iter().map(|f| (f.name.as_str(), f.lines)).collect();
        assert_eq!(names, [("defined", 3), ("destructured", 3)]);
    }

    #[test]
    fn use_trees_expand_to_every_path_they_import() {
        let source = "pub(crate) use crate::{a::{b, c as d}, e::*, self as f, g::{self},
    h::i::J,
};
use super::super::k;";
        let expected = [
            "crate::a::b",
            "crate::a::c",
            "crate::e",
            "crate",
            "crate::g",
            "crate::h::i::J",
            "super::super::k",
        ];
        assert_eq!(paths(use_paths(&tokenize(source))), expected);
    }

    #[test]
    fn code_paths_start_at_an_identifier() {
        let source = "let x = crate::a::b(super::c::D::new(), Vec::<u8>::new::x);";
        assert_eq!(
            paths(code_paths(&tokenize(source))),
            ["crate::a::b", "super::c::D::new"]
        );
    }

    #[test]
    fn test_items_and_test_modules_are_dropped() {
        let source = "mod live;
#[cfg(test)]
mod fixtures;
#[cfg(all(test, feature = \"x\"))]
use crate::b::Thing;
pub fn f() -> crate::c::C { todo!() }
#[cfg(test)]
#[allow(dead_code)]
mod tests {
    use crate::d::*;
    #[test]
    fn t() { crate::e::x(); }
}
#[cfg(not(test))]
fn g() -> crate::f::F {}";
        let code = without_test_items(&tokenize(source));
        assert_eq!(code.test_modules, BTreeSet::from(["fixtures".to_string()]));
        assert_eq!(
            child_modules(&code.tokens),
            BTreeSet::from(["live".to_string()])
        );
        assert_eq!(
            paths(code_paths(&code.tokens)),
            ["crate::c::C", "crate::f::F"]
        );
    }

    #[test]
    fn paths_resolve_to_the_deepest_file() {
        let modules = Modules::new(
            [vec![], vec!["a"], vec!["a", "b"], vec!["c"]]
                .into_iter()
                .map(|path| path.into_iter().map(String::from).collect())
                .collect(),
        );
        let from = ["a".to_string(), "b".to_string()];
        let children = BTreeSet::from(["kid".to_string()]);
        let resolve = |path: &str| {
            let segments: Vec<String> = path.split("::").map(String::from).collect();
            modules.resolve(&from, &segments, &children)
        };
        assert_eq!(resolve("super::super::c::X"), Some(3));
        assert_eq!(resolve("super::Y"), Some(1));
        assert_eq!(resolve("crate::a::b::d::e"), Some(2));
        assert_eq!(resolve("crate::zz"), Some(0));
        assert_eq!(resolve("kid::x"), Some(2));
        assert_eq!(resolve("self::y"), Some(2));
        assert_eq!(resolve("std::fs::read"), None);
    }

    #[test]
    fn the_graph_leaves_out_tests_and_a_parent_s_own_children() {
        let files = [
            ("src/lib.rs", "pub mod a;\npub mod b;\nuse crate::a::A;"),
            (
                "src/a/mod.rs",
                "mod inner;\n#[cfg(test)]\nmod fixtures;\nuse crate::b::B;",
            ),
            (
                "src/a/inner.rs",
                "use super::A;\nuse crate::a::fixtures::F;",
            ),
            ("src/a/fixtures.rs", "use crate::b::B;"),
            ("src/b.rs", "pub fn f() -> crate::a::inner::I {}"),
            ("src/main.rs", "fn main() { crate::b::f() }"),
        ];
        let graph = ImportGraph::new(files.iter().map(|(p, s)| SourceFile::new(p, s)).collect());
        let edges: Vec<String> = (graph.edges.iter().enumerate())
            .flat_map(|(from, edges)| edges.iter().map(move |(to, lines)| (from, *to, lines)))
            .map(|(from, to, lines)| graph.describe_edge(from, to, lines))
            .collect();
        let expected = [
            "src/a/mod.rs -> src/b.rs (line 4)",
            "src/b.rs -> src/a/inner.rs (line 1)",
            "src/main.rs -> src/b.rs (line 1)",
        ];
        assert_eq!(edges, expected);
        let cycles: Vec<Vec<usize>> = strongly_connected(&graph.successors())
            .into_iter()
            .filter(|component| component.len() > 1)
            .collect();
        assert!(cycles.is_empty(), "{cycles:?}");
    }

    #[test]
    fn a_room_uses_its_own_files_and_the_floors_below_and_nothing_else() {
        let files = [
            ("src/lib.rs", "pub mod d;"),
            (
                "src/d/mod.rs",
                "pub mod low;\npub mod mid;\npub mod side;\npub mod verb;",
            ),
            (
                "src/d/verb.rs",
                "use crate::d::low::a;\nuse crate::d::mid::b;",
            ),
            ("src/d/low/mod.rs", "pub mod a;"),
            ("src/d/low/a.rs", "use crate::d::verb::V;"),
            (
                "src/d/mid/b.rs",
                "use crate::d::low::a::A;\nuse crate::d::side::c::C;",
            ),
            ("src/d/mid/mod.rs", "use super::b::B;"),
            ("src/d/side/c.rs", "use crate::d::mid::b::B;"),
            ("src/d/stray/x.rs", "use crate::d::verb::V;"),
        ];
        let graph = ImportGraph::new(files.iter().map(|(p, s)| SourceFile::new(p, s)).collect());
        let rules = [Rooms {
            folder: "d",
            floors: &[&["low"], &["mid", "side"]],
        }];
        let expected = [
            "    src/d/stray/ is no room of d/",
            "    src/d/low/a.rs -> src/d/verb.rs (line 1): low uses d/'s own files, which sit above \
             every room",
            "    src/d/mid/b.rs -> src/d/side/c.rs (line 2): mid uses side, a room beside it",
            "    src/d/side/c.rs -> src/d/mid/b.rs (line 1): side uses mid, a room beside it",
        ];
        assert_eq!(room_violations(&graph, &rules), expected);
        assert_eq!(rules[0].describe(), "d/: low < {mid, side}");
    }

    #[test]
    fn tarjan_finds_each_cycle_once() {
        let successors = [vec![1], vec![2], vec![0, 3], vec![3], vec![3, 5], vec![4]];
        assert_eq!(
            strongly_connected(&successors),
            [vec![0, 1, 2], vec![3], vec![4, 5]]
        );
    }
}
