//! The docs' examples that need no cluster run as written, with the built binary.
//!
//! Which lines run, by rule: every line of a code block (indented four spaces) that is a `cd`,
//! or an `mlkube` command (also after a `$ ` prompt; a line ending in `\` goes on on the next)
//! whose every verb works on the app alone: `init`, `env`, `prototype`, `component`, `param`,
//! `show` and `completion`. A page's lines run in order, each with `bash -c` (`cd` moves the
//! directory they run in; a block that begins with `mlkube init` begins in a fresh one; a shell
//! variable set on a line of its own, `name=...`, is set for the lines after it), the built
//! `mlkube` first on PATH, HOME and TMPDIR temporary ones and `fpath` and `PROFILE` set as zsh
//! and PowerShell set them, so that the completion lines write there. docs/workflow.md begins
//! in an empty directory, as it makes its app; every other page and the README begin in the
//! quickstart's app as `mlkube init` makes it, `$TMPDIR/mlkube-quickstart`.
//! Each must exit 0, or 0 or 1 where its comment documents `exit 0: ..., 1: ...`. Where a page
//! shows a command's output (the lines after a `$ ` command), stdout must be that output, or
//! begin with it where the page ends it with `...`.
//!
//! And where the docs list the kinds of training jobs a verb reads, the list is the operator's
//! whole (its kubeflow.org/v1 kinds and FrameworkController's Framework).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The verbs that read or change the app and never talk to a cluster.
const APP_VERBS: [&str; 7] = [
    "init",
    "env",
    "prototype",
    "component",
    "param",
    "show",
    "completion",
];

/// One example line of a page.
#[derive(Debug)]
struct Example {
    line: usize,
    /// The first example of its code block.
    starts_block: bool,
    command: String,
    /// The output the page shows after a `$ ` command.
    shown: Vec<String>,
}

/// A page's code lines, with the output shown after each `$ ` command.
fn examples(page: &str) -> Vec<Example> {
    let mut examples: Vec<Example> = Vec::new();
    let mut prompt_open = false;
    let mut in_block = false;
    // The previous line ended in `\\`; it was (part of) the last example.
    let (mut continued, mut extending) = (false, false);
    for (index, line) in page.lines().enumerate() {
        let Some(code) = line.strip_prefix("    ") else {
            (prompt_open, in_block, continued) = (false, false, false);
            continue;
        };
        let starts_block = !std::mem::replace(&mut in_block, true);
        if std::mem::replace(&mut continued, code.ends_with('\\')) {
            if extending && let Some(last) = examples.last_mut() {
                let command = last.command.trim_end_matches('\\').trim_end();
                last.command = format!("{command} {}", code.trim());
            }
            continue;
        }
        extending = false;
        let prompt = code.strip_prefix("$ ");
        if prompt_open && prompt.is_none() {
            examples.last_mut().unwrap().shown.push(code.to_owned());
            continue;
        }
        prompt_open = prompt.is_some();
        let command = prompt.unwrap_or(code);
        if prompt.is_some() || runnable_line(command) {
            examples.push(Example {
                line: index + 1,
                starts_block,
                command: command.to_owned(),
                shown: Vec::new(),
            });
            extending = true;
        }
    }
    examples
}

/// A line the examples may run: a command of `mlkube`, a `cd`, or a shell variable.
fn runnable_line(code: &str) -> bool {
    code.starts_with("mlkube ") || code.starts_with("cd ") || assignment(code)
}

/// `name=value`, as a shell reads it.
fn assignment(code: &str) -> bool {
    code.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit())
    })
}

/// A shell variable, or commands joined by `&&` each of which is a `cd` or a command whose
/// every `mlkube` (also after `|` or `xargs`) runs an app verb.
fn needs_no_cluster(command: &str) -> bool {
    assignment(command)
        || command.split("&&").all(|part| {
            let words: Vec<&str> = part.split_whitespace().collect();
            words.first() == Some(&"cd")
                || (words.first() == Some(&"mlkube")
                    && words
                        .windows(2)
                        .filter(|pair| pair[0] == "mlkube")
                        .all(|pair| APP_VERBS.contains(&pair[1])))
        })
}

fn binary_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_mlkube"))
        .parent()
        .unwrap()
        .to_owned()
}

/// The file at `path` in the checkout.
fn page(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Where a page's examples run: a temporary HOME (with the completion directories), TMPDIR
/// and PATH, and the directory the next line runs in.
struct Shell {
    tmp: tempfile::TempDir,
    path: String,
    cwd: PathBuf,
    variables: String,
}

impl Shell {
    fn new() -> Shell {
        let tmp = tempfile::tempdir().unwrap();
        for dir in [
            "home/.local/share/bash-completion/completions",
            "home/.config/fish/completions",
            "home/zfunc",
            "tmp",
        ] {
            std::fs::create_dir_all(tmp.path().join(dir)).unwrap();
        }
        let path = format!(
            "{}:{}",
            binary_dir().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let cwd = tmp.path().to_owned();
        Shell {
            tmp,
            path,
            cwd,
            variables: String::new(),
        }
    }

    fn home(&self) -> PathBuf {
        self.tmp.path().join("home")
    }

    /// `script` in bash, in the current directory: its exit code, stdout and stderr.
    fn run(&self, script: &str) -> (i32, String, String) {
        let script = format!(
            // zsh counts array elements from 1, bash from 0.
            "fpath=(\"$HOME/zfunc\" \"$HOME/zfunc\"); PROFILE=\"$HOME/profile.ps1\"\n{}{script}",
            self.variables
        );
        let output = Command::new("bash")
            .args(["--norc", "--noprofile", "-c", &script])
            .current_dir(&self.cwd)
            .env("PATH", &self.path)
            .env("HOME", self.home())
            .env("TMPDIR", self.tmp.path().join("tmp"))
            .env("KUBECONFIG", self.tmp.path().join("no-kubeconfig"))
            .env("NO_COLOR", "1")
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        let code = output.status.code().unwrap_or(-1);
        (code, text(&output.stdout), text(&output.stderr))
    }

    /// Run the page's examples that need no cluster, in order; `name` is the page's path.
    fn run_examples(&mut self, name: &str, examples: &[Example]) {
        for (number, example) in examples.iter().enumerate() {
            if example.starts_block && example.command.starts_with("mlkube init ") {
                self.cwd = self.tmp.path().join(format!("block-{number}"));
                std::fs::create_dir_all(&self.cwd).unwrap();
            }
            if example.command.starts_with("cd ") && !example.command.contains("&&") {
                let (code, stdout, stderr) = self.run(&format!("{} && pwd", example.command));
                assert_eq!(code, 0, "{name}:{}: {stderr}", example.line);
                self.cwd = PathBuf::from(stdout.trim_end());
                continue;
            }
            if assignment(&example.command) {
                self.variables.push_str(&example.command);
                self.variables.push('\n');
                continue;
            }
            self.run_example(name, example);
        }
    }

    /// Run `example`: it succeeds and prints what the page shows, or, where the page shows an
    /// error (`mlkube: error: ...`), it fails with exit 2 and says that on stderr.
    fn run_example(&self, name: &str, example: &Example) {
        let (code, stdout, stderr) = self.run(&example.command);
        let shows_an_error = example
            .shown
            .first()
            .is_some_and(|line| line.starts_with("mlkube: error: "));
        let (expected_code, stdout) = if shows_an_error {
            (2, stderr.clone())
        } else {
            (0, stdout)
        };
        let documented_differences = example.command.contains("exit 0:") && code == 1;
        assert!(
            code == expected_code || documented_differences,
            "{name}:{}: `{}` exited {code}:\n{stderr}",
            example.line,
            example.command,
        );
        let (shown, prefix_only) = match example.shown.split_last() {
            None => return,
            Some((last, rest)) if last == "..." => (rest, true),
            _ => (&example.shown[..], false),
        };
        let mut expected = shown.join("\n");
        expected.push('\n');
        let matches = if prefix_only {
            stdout.starts_with(&expected)
        } else {
            stdout == expected
        };
        assert!(
            matches,
            "{name}:{}: `{}` printed\n{stdout}\nwhere the page shows\n{expected}",
            example.line, example.command
        );
    }
}

/// The examples of the page at `path` that need no cluster.
fn app_examples(path: &str) -> Vec<Example> {
    examples(&page(path))
        .into_iter()
        .filter(|e| needs_no_cluster(&e.command))
        .collect()
}

#[test]
fn the_workflow_examples_that_need_no_cluster_run_as_written() {
    let examples = app_examples("docs/workflow.md");
    assert!(
        examples.len() > 20,
        "the page's examples are found: {examples:?}"
    );
    let mut shell = Shell::new();
    shell.run_examples("docs/workflow.md", &examples);
    assert!(shell.home().join("zfunc/_mlkube").is_file());
    assert!(shell.home().join("profile.ps1").is_file());
}

/// The README and the docs' pages other than the workflow's.
fn pages_on_the_quickstarts_app() -> Vec<String> {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    let mut pages: Vec<String> = std::fs::read_dir(docs)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md") && name != "workflow.md")
        .map(|name| format!("docs/{name}"))
        .collect();
    pages.sort();
    pages.insert(0, "README.md".into());
    pages
}

#[test]
fn every_other_pages_examples_that_need_no_cluster_run_as_written_in_the_quickstarts_app() {
    let mut ran = 0;
    for name in pages_on_the_quickstarts_app() {
        let examples = app_examples(&name);
        let mut shell = Shell::new();
        let (code, _, stderr) = shell.run("mlkube init \"$TMPDIR/mlkube-quickstart\"");
        assert_eq!(code, 0, "{stderr}");
        shell.cwd = shell.tmp.path().join("tmp/mlkube-quickstart");
        shell.run_examples(&name, &examples);
        ran += examples.len();
    }
    assert!(ran > 10, "the pages' examples are found: {ran}");
}

#[test]
fn a_command_that_goes_on_on_the_next_line_is_one_example() {
    let page = "text\n\n    mlkube component add tf-job a \\\n      --param x=1 \\\n      --param y=2\n    mlkube show local\n";
    let found: Vec<String> = examples(page).into_iter().map(|e| e.command).collect();
    assert_eq!(
        found,
        [
            "mlkube component add tf-job a --param x=1 --param y=2",
            "mlkube show local"
        ]
    );
}

/// The page's paragraph that begins with `start`, up to the next blank line.
fn paragraph<'r>(page: &'r str, start: &str) -> &'r str {
    let from = page
        .find(start)
        .unwrap_or_else(|| panic!("the page has no paragraph `{start}`"));
    let rest = &page[from..];
    &rest[..rest.find("\n\n").unwrap_or(rest.len())]
}

#[test]
fn the_logs_section_names_every_kind_logs_reads() {
    let workflow = page("docs/workflow.md");
    let logs = paragraph(&workflow, "**Logs of a training job.**");
    let missing: Vec<String> = mlkube::observe::logs::JobKind::all()
        .map(|k| format!("`{}`", k.name().to_lowercase()))
        .filter(|kind| !logs.contains(kind.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "the logs section leaves out {missing:?}:\n{logs}"
    );
}
