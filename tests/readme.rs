//! The README's examples that need no cluster run as written, with the built binary.
//!
//! Which lines run, by rule: in the section "The workflow, by example", every line of a code
//! block (indented four spaces) that is a `cd`, or an `mlkube` command (also after a `$ `
//! prompt) whose every verb works on the app alone: `init`, `env`, `prototype`, `component`,
//! `param`, `show` and `completion`. They run in order, each with `bash -c` in a temporary
//! directory (`cd` moves it; a block that begins with `mlkube init` begins in a fresh one;
//! a shell variable set on a line of its own, `name=...`, is set for the lines after it), the built `mlkube` first on PATH, HOME a temporary one and `fpath` and
//! `PROFILE` set as zsh and PowerShell set them, so that the completion lines write there.
//! Each must exit 0, or 0 or 1 where its comment documents `exit 0: ..., 1: ...`. Where the
//! README shows a command's output (the lines after a `$ ` command), stdout must be that
//! output, or begin with it where the README ends it with `...`.
//!
//! And where the README lists the kinds of training jobs a verb reads, the list is the
//! operator's whole (its kubeflow.org/v1 kinds and FrameworkController's Framework).

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

/// One example line of the README.
#[derive(Debug)]
struct Example {
    line: usize,
    /// The first example of its code block.
    starts_block: bool,
    command: String,
    /// The output the README shows after a `$ ` command.
    shown: Vec<String>,
}

/// The section's code lines, with the output shown after each `$ ` command.
fn examples(readme: &str, section: &str) -> Vec<Example> {
    let mut examples: Vec<Example> = Vec::new();
    let mut inside = false;
    let mut prompt_open = false;
    let mut in_block = false;
    for (index, line) in readme.lines().enumerate() {
        if let Some(heading) = line.strip_prefix("## ") {
            inside = heading == section;
            continue;
        }
        let Some(code) = line.strip_prefix("    ").filter(|_| inside) else {
            prompt_open = false;
            in_block = false;
            continue;
        };
        let starts_block = !std::mem::replace(&mut in_block, true);
        if let Some(command) = code.strip_prefix("$ ") {
            examples.push(Example {
                line: index + 1,
                starts_block,
                command: command.to_owned(),
                shown: Vec::new(),
            });
            prompt_open = true;
        } else if prompt_open {
            examples.last_mut().unwrap().shown.push(code.to_owned());
        } else if code.starts_with("mlkube ") || code.starts_with("cd ") || assignment(code) {
            examples.push(Example {
                line: index + 1,
                starts_block,
                command: code.to_owned(),
                shown: Vec::new(),
            });
        }
    }
    examples
}

/// `name=value`, as a shell reads it.
fn assignment(code: &str) -> bool {
    code.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit())
    })
}

/// A `cd`, a shell variable, or a command whose every `mlkube` (also after `&&`, `|` or `xargs`) runs an app verb.
fn needs_no_cluster(command: &str) -> bool {
    let words: Vec<&str> = command.split_whitespace().collect();
    words.first() == Some(&"cd")
        || assignment(command)
        || (words.first() == Some(&"mlkube")
            && words
                .windows(2)
                .filter(|pair| pair[0] == "mlkube")
                .all(|pair| APP_VERBS.contains(&pair[1])))
}

fn binary_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_mlkube"))
        .parent()
        .unwrap()
        .to_owned()
}

#[test]
fn the_workflow_examples_that_need_no_cluster_run_as_written() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let examples: Vec<Example> = examples(&readme, "The workflow, by example")
        .into_iter()
        .filter(|e| needs_no_cluster(&e.command))
        .collect();
    assert!(
        examples.len() > 20,
        "the section's examples are found: {examples:?}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    for dir in [
        ".local/share/bash-completion/completions",
        ".config/fish/completions",
        "zfunc",
    ] {
        std::fs::create_dir_all(home.join(dir)).unwrap();
    }
    let path = format!(
        "{}:{}",
        binary_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cwd = tmp.path().to_owned();
    let mut variables = String::new();
    for (number, example) in examples.iter().enumerate() {
        if example.starts_block && example.command.starts_with("mlkube init ") {
            cwd = tmp.path().join(format!("block-{number}"));
            std::fs::create_dir_all(&cwd).unwrap();
        }
        if let Some(dir) = example.command.strip_prefix("cd ") {
            cwd = cwd.join(dir.trim());
            continue;
        }
        if assignment(&example.command) {
            variables.push_str(&example.command);
            variables.push('\n');
            continue;
        }
        let script = format!(
            // zsh counts array elements from 1, bash from 0.
            "fpath=(\"$HOME/zfunc\" \"$HOME/zfunc\"); PROFILE=\"$HOME/profile.ps1\"\n{variables}{}",
            example.command
        );
        let output = Command::new("bash")
            .args(["--norc", "--noprofile", "-c", &script])
            .current_dir(&cwd)
            .env("PATH", &path)
            .env("HOME", &home)
            .env("KUBECONFIG", tmp.path().join("no-kubeconfig"))
            .env("NO_COLOR", "1")
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        let code = output.status.code().unwrap_or(-1);
        let documented_differences = example.command.contains("exit 0:") && code == 1;
        assert!(
            code == 0 || documented_differences,
            "README.md:{}: `{}` exited {code}:\n{}",
            example.line,
            example.command,
            String::from_utf8_lossy(&output.stderr)
        );
        if example.shown.is_empty() {
            continue;
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        let (shown, prefix_only) = match example.shown.split_last() {
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
            "README.md:{}: `{}` printed\n{stdout}\nwhere the README shows\n{expected}",
            example.line, example.command
        );
    }
    assert!(home.join("zfunc/_mlkube").is_file());
    assert!(home.join("profile.ps1").is_file());
}

/// The README's paragraph that begins with `start`, up to the next blank line.
fn paragraph<'r>(readme: &'r str, start: &str) -> &'r str {
    let from = readme
        .find(start)
        .unwrap_or_else(|| panic!("the README has no paragraph `{start}`"));
    let rest = &readme[from..];
    &rest[..rest.find("\n\n").unwrap_or(rest.len())]
}

#[test]
fn the_logs_section_names_every_kind_logs_reads() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let logs = paragraph(&readme, "**Logs of a training job.**");
    let missing: Vec<String> = mlkube::observe::logs::JobKind::all()
        .map(|k| format!("`{}`", k.name().to_lowercase()))
        .filter(|kind| !logs.contains(kind.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "the logs section leaves out {missing:?}:\n{logs}"
    );
}
