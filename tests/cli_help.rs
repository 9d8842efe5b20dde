//! The command line explains itself: every verb has a description and an example, every
//! argument a description, and `mlkube completion <shell>` prints a script for each shell.

use std::process::Command;

use clap::CommandFactory;
use mlkube::cli::Cli;
use mlkube::operator::training::registry;

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
fn the_operator_verb_names_every_kind_the_operator_runs() {
    let cli = Cli::command();
    let operator = cli.find_subcommand("operator").expect("the operator verb");
    let about = text(operator.get_about());
    let missing: Vec<&str> = registry::ALL
        .iter()
        .map(|r| r.framework.kind)
        .filter(|kind| {
            !about.contains(&format!(" {kind},")) && !about.contains(&format!(" {kind})"))
        })
        .collect();
    assert!(missing.is_empty(), "`{about}` leaves out {missing:?}");
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
        assert!(
            script.contains("mlkube __complete --"),
            "{shell}: the binary completes"
        );
        assert!(output.stderr.is_empty(), "{shell}: {output:?}");
    }
    let output = Command::new(env!("CARGO_BIN_EXE_mlkube"))
        .args(["completion", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("[possible values: bash,"));
}

/// A fresh app `platform` (the platform's components) in a temporary directory.
fn new_app() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_mlkube"))
        .args(["init", "platform"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let app = tmp.path().join("platform");
    (tmp, app)
}

/// `mlkube __complete -- <words>` in `dir`: the candidates, one per line.
fn complete(dir: &std::path::Path, words: &[&str]) -> Vec<String> {
    let output = Command::new(env!("CARGO_BIN_EXE_mlkube"))
        .arg("__complete")
        .arg("--")
        .args(words)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(output.status.success(), "{words:?}: {output:?}");
    assert!(output.stderr.is_empty(), "{words:?}: {output:?}");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn completion_offers_the_apps_environments_components_and_prototypes() {
    let (_tmp, app) = new_app();
    assert_eq!(complete(&app, &["apply", ""]), ["local", "dev", "prod"]);
    assert_eq!(complete(&app, &["diff", "--summary", "p"]), ["prod"]);
    assert_eq!(
        complete(&app, &["show", "local", "-c", ""]),
        [
            "gateway",
            "mnist",
            "notebook-hub",
            "object-store",
            "training-operator",
            "volume-controller"
        ]
    );
    assert_eq!(
        complete(
            &app,
            &["param", "set", "mnist", "minReplicas", "3", "--env", "d"]
        ),
        ["dev"]
    );
    assert_eq!(
        complete(&app, &["param", "diff", "local", ""]),
        ["local", "dev", "prod"]
    );
    assert_eq!(
        complete(&app, &["component", "rm", "vol"]),
        ["volume-controller"]
    );
    assert_eq!(
        complete(&app, &["param", "set", "mnist", "model"]),
        ["modelFormat", "modelFormatVersion"]
    );
    let prototypes = complete(&app, &["component", "add", ""]);
    for prototype in ["tf-job", "serving", "training-operator", "notebook-hub"] {
        assert!(prototypes.contains(&prototype.to_owned()), "{prototypes:?}");
    }
    // Another app, named with --app, from outside it.
    let outside = app.parent().unwrap();
    assert_eq!(
        complete(outside, &["status", "--app", "platform", "l"]),
        ["local"]
    );
    assert_eq!(complete(outside, &["status", "l"]), Vec::<String>::new());
    let verbs = complete(&app, &[""]);
    assert!(verbs.contains(&"apply".to_owned()) && verbs.contains(&"prototype".to_owned()));
    assert!(!verbs.iter().any(|v| v.starts_with("__")), "{verbs:?}");
}

#[test]
fn completion_offers_no_hidden_flag_and_no_app_where_it_is_not_read() {
    let (_tmp, app) = new_app();
    for verb in ["apply", "diff", "delete"] {
        let flags = complete(&app, &[verb, "local", "--"]);
        assert!(flags.contains(&"--context".to_owned()), "{verb}: {flags:?}");
        assert!(flags.contains(&"--app".to_owned()), "{verb}: {flags:?}");
        assert!(
            !flags.contains(&"--manifest".to_owned()),
            "{verb}: {flags:?}"
        );
    }
    for words in [
        &["init", "x", "--"][..],
        &["operator", "--"],
        &["prototype", "list", "--"],
        &["completion", "--"],
    ] {
        let flags = complete(&app, words);
        assert!(!flags.contains(&"--app".to_owned()), "{words:?}: {flags:?}");
    }
    assert!(complete(&app, &["operator", "--"]).contains(&"--leader-elect".to_owned()));
}

#[test]
fn verbs_that_read_no_app_neither_list_nor_take_app_and_operator_help_speaks_of_no_environment() {
    for verb in [
        &["init"][..],
        &["operator"],
        &["prototype", "list"],
        &["completion"],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_mlkube"))
            .args(verb)
            .arg("--help")
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{verb:?}");
        assert!(!help.contains("--app"), "{verb:?}:\n{help}");
    }
    let output = Command::new(env!("CARGO_BIN_EXE_mlkube"))
        .args(["operator", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&output.stdout).to_lowercase();
    assert!(!help.contains("environment"), "{help}");
    assert!(help.contains("--context <name>"), "{help}");
    let output = Command::new(env!("CARGO_BIN_EXE_mlkube"))
        .args(["init", "x", "--app", "y"])
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("reads no app"),
        "{output:?}"
    );
    let output = Command::new(env!("CARGO_BIN_EXE_mlkube"))
        .args(["show", "--help"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&output.stdout).contains("--app <DIR>"));
}

#[test]
fn the_bash_script_completes_through_the_binary() {
    let (_tmp, app) = new_app();
    let script = Command::new(env!("CARGO_BIN_EXE_mlkube"))
        .args(["completion", "bash"])
        .output()
        .unwrap();
    let script = String::from_utf8(script.stdout).unwrap();
    let bin_dir = std::path::Path::new(env!("CARGO_BIN_EXE_mlkube"))
        .parent()
        .unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let test = format!(
        "{script}\nCOMP_WORDS=(mlkube apply '')\nCOMP_CWORD=2\n_mlkube\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n\
         COMP_WORDS=(mlkube show local -c tr)\nCOMP_CWORD=4\n_mlkube\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n"
    );
    let output = Command::new("bash")
        .args(["--norc", "-c", &test])
        .current_dir(&app)
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "local\ndev\nprod\ntraining-operator\n"
    );
}
