//! The command line explains itself: every verb has a description and an example, every
//! argument a description, and `mlkube completion <shell>` prints a script for each shell.

use std::process::Command;

use clap::CommandFactory;
use mlkube::cli::Cli;

/// Every command of the tree with its path, e.g. `mlkube env set`.
fn commands(command: &clap::Command, path: &str, out: &mut Vec<(String, clap::Command)>) {
    out.push((path.to_owned(), command.clone()));
    for sub in command.get_subcommands() {
        commands(sub, &format!("{path} {}", sub.get_name()), out);
    }
}

fn text(styled: Option<&clap::builder::StyledStr>) -> String {
    styled.map(ToString::to_string).unwrap_or_default()
}

#[test]
fn every_verb_has_a_description_and_an_example_and_every_argument_a_description() {
    let mut all = Vec::new();
    commands(&Cli::command(), "mlkube", &mut all);
    assert!(all.len() > 25, "the tree has every verb: {}", all.len());
    let mut blank = Vec::new();
    for (path, command) in &all {
        if text(command.get_about()).trim().is_empty() {
            blank.push(format!("{path}: no description"));
        }
        let examples = text(command.get_after_help()) + &text(command.get_after_long_help());
        if !examples.contains("Examples:\n  mlkube ") {
            blank.push(format!("{path}: no example"));
        }
        for arg in command.get_arguments() {
            let id = arg.get_id().as_str();
            if matches!(id, "help" | "version") || arg.is_hide_set() {
                continue;
            }
            let help = text(arg.get_help()) + &text(arg.get_long_help());
            if help.trim().is_empty() {
                blank.push(format!("{path}: argument `{id}` has no description"));
            }
        }
    }
    assert!(blank.is_empty(), "blank help:\n{}", blank.join("\n"));
}

#[test]
fn help_shows_the_examples() {
    let output = Command::new(env!("CARGO_BIN_EXE_mlkube"))
        .args(["env", "set", "--help"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success());
    assert!(
        stdout.contains("Examples:\n  mlkube env set dev --namespace ml-dev\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("--server <URL>\n          Pin it to this API server URL"),
        "{stdout}"
    );
}

#[test]
fn completion_prints_a_script_for_each_shell() {
    for (shell, marker) in [
        ("bash", "_mlkube()"),
        ("zsh", "#compdef mlkube"),
        ("fish", "complete -c mlkube"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_mlkube"))
            .args(["completion", shell])
            .current_dir(std::env::temp_dir())
            .output()
            .unwrap();
        let script = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{shell}: {output:?}");
        assert!(script.contains(marker), "{shell}: no {marker}");
        assert!(script.contains("prototype"), "{shell}: verbs are completed");
        assert!(output.stderr.is_empty(), "{shell}: {output:?}");
    }
    let output = Command::new(env!("CARGO_BIN_EXE_mlkube"))
        .args(["completion", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("[possible values: bash,"));
}
