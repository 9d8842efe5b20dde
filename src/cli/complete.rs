//! Shell completion: `mlkube completion <shell>` prints a small script that asks the binary
//! itself, through the hidden verb `mlkube __complete -- <words>`, what may come next.
//!
//! The answer comes from the same clap command tree that parses (verbs, flags that are not
//! hidden, the values of closed choices) and from the app the words point at (`--app`, else
//! the nearest app.yaml): environment, component, prototype and parameter names, chosen by an
//! argument's value name (`ENV`, `COMPONENT`, `PROTOTYPE`, `KEY`). An argument whose values
//! mlkube cannot list (a directory, a file, a free value) gets no candidates, and the scripts
//! then let the shell complete file names. Errors are never printed: a completion that cannot
//! read the app offers nothing from it.

use std::path::{Path, PathBuf};

use clap::{Arg, ArgAction, Command, CommandFactory, ValueEnum};

use super::Cli;
use crate::app::App;
use crate::app::{change, prototype};
use crate::render::jsonnet::Evaluator;

/// The shells `mlkube completion` writes a script for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
    Powershell,
}

/// The script that makes `shell` complete `mlkube` by asking `mlkube __complete`.
pub fn script(shell: Shell) -> &'static str {
    match shell {
        Shell::Bash => BASH,
        Shell::Zsh => ZSH,
        Shell::Fish => FISH,
        Shell::Powershell => POWERSHELL,
    }
}

const BASH: &str = r#"# mlkube completion for bash: the candidates come from `mlkube __complete`.
_mlkube() {
    local IFS=$'\n'
    local cur=${COMP_WORDS[COMP_CWORD]}
    COMPREPLY=($(mlkube __complete -- "${COMP_WORDS[@]:1:COMP_CWORD-1}" "$cur" 2>/dev/null))
}
complete -o default -F _mlkube mlkube
"#;

const ZSH: &str = r#"#compdef mlkube
# mlkube completion for zsh: the candidates come from `mlkube __complete`.
_mlkube() {
    local -a candidates
    candidates=("${(@f)$(mlkube __complete -- "${(@)words[2,CURRENT]}" 2>/dev/null)}")
    candidates=(${candidates:#})
    if (( ${#candidates} )); then
        compadd -a candidates
    else
        _files
    fi
}
if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then
    _mlkube "$@"
else
    compdef _mlkube mlkube
fi
"#;

const FISH: &str = r#"# mlkube completion for fish: the candidates come from `mlkube __complete`.
function __mlkube_complete
    set -l candidates (mlkube __complete -- (commandline -opc)[2..-1] (commandline -ct) 2>/dev/null)
    if test (count $candidates) -gt 0
        printf '%s\n' $candidates
    else
        __fish_complete_path (commandline -ct)
    end
end
complete -c mlkube -f -a '(__mlkube_complete)'
"#;

const POWERSHELL: &str = r#"# mlkube completion for PowerShell: the candidates come from `mlkube __complete`.
Register-ArgumentCompleter -Native -CommandName mlkube -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)
    $words = @($commandAst.CommandElements |
        Where-Object { $_.Extent.EndOffset -lt $cursorPosition -or ($_.Extent.EndOffset -eq $cursorPosition -and $wordToComplete -ne '') } |
        Select-Object -Skip 1 |
        ForEach-Object { $_.ToString() })
    if ($wordToComplete -eq '') { $words += '' }
    mlkube __complete -- @words 2>$null | ForEach-Object {
        [System.Management.Automation.CompletionResult]::new($_, $_, 'ParameterValue', $_)
    }
}
"#;

/// The candidates for the last of `words` (the words after `mlkube`, the last one the word
/// being completed, possibly empty), one per line, in the order to offer them.
pub fn candidates(words: &[String]) -> Vec<String> {
    let (partial, before) = match words.split_last() {
        Some((partial, before)) => (partial.as_str(), before),
        None => ("", words),
    };
    let mut root = Cli::command();
    root.build();
    let position = walk(&root, before);
    if let Some((flag, _)) = partial.strip_prefix("--").and_then(|p| p.split_once('='))
        && position.pending.is_none()
    {
        return flag_values(&position, flag, partial);
    }
    let mut found = match &position.pending {
        Some(arg) => values(arg, &position),
        None if partial.starts_with('-') && !position.after_double_dash => flags(position.command),
        None => {
            let subcommands = visible_subcommands(position.command);
            if subcommands.is_empty() {
                positional(position.command, position.positionals)
                    .map(|arg| values(arg, &position))
                    .unwrap_or_default()
            } else {
                subcommands
            }
        }
    };
    found.retain(|candidate| candidate.starts_with(partial));
    found
}

/// The values of `--flag=` as whole words (`--output=json`), for shells that complete them so.
fn flag_values(position: &Position<'_>, flag: &str, partial: &str) -> Vec<String> {
    let Some(arg) = position
        .command
        .get_arguments()
        .find(|a| a.get_long() == Some(flag) && !a.is_hide_set())
    else {
        return Vec::new();
    };
    values(arg, position)
        .into_iter()
        .map(|value| format!("--{flag}={value}"))
        .filter(|candidate| candidate.starts_with(partial))
        .collect()
}

/// Where the words before the cursor left the parse.
struct Position<'a> {
    /// The innermost verb named.
    command: &'a Command,
    /// The flag whose value comes next, or `None`.
    pending: Option<&'a Arg>,
    /// How many positional values the verb has been given.
    positionals: usize,
    after_double_dash: bool,
    /// `--app DIR`, when given.
    app: Option<PathBuf>,
    /// The values given so far, by argument id, for candidates that depend on them (a
    /// parameter's component).
    given: Vec<(String, String)>,
}

fn walk<'a>(root: &'a Command, words: &[String]) -> Position<'a> {
    let mut position = Position {
        command: root,
        pending: None,
        positionals: 0,
        after_double_dash: false,
        app: None,
        given: Vec::new(),
    };
    for word in words {
        if let Some(arg) = position.pending.take() {
            position.record(arg, word);
        } else if position.after_double_dash || !word.starts_with('-') || word == "-" {
            position.positional(word);
        } else if word == "--" {
            position.after_double_dash = true;
        } else {
            position.flag(word);
        }
    }
    position
}

impl<'a> Position<'a> {
    fn record(&mut self, arg: &Arg, value: &str) {
        if arg.get_id() == "app" {
            self.app = Some(PathBuf::from(value));
        }
        self.given
            .push((arg.get_id().to_string(), value.to_owned()));
    }

    fn positional(&mut self, word: &str) {
        if !self.after_double_dash
            && let Some(sub) = self.command.find_subcommand(word)
        {
            self.command = sub;
            self.positionals = 0;
            return;
        }
        if let Some(arg) = positional(self.command, self.positionals) {
            self.record(arg, word);
        }
        self.positionals += 1;
    }

    /// `--name`, `--name=value`, `-o`, `-ojson`.
    fn flag(&mut self, word: &str) {
        let command = self.command;
        let (arg, inline) = match word.strip_prefix("--") {
            Some(long) => {
                let (name, inline) = match long.split_once('=') {
                    Some((name, value)) => (name, Some(value)),
                    None => (long, None),
                };
                (
                    command.get_arguments().find(|a| a.get_long() == Some(name)),
                    inline,
                )
            }
            None => {
                let mut shorts = word[1..].chars();
                let short = shorts.next();
                let rest = shorts.as_str();
                let arg = command.get_arguments().find(|a| a.get_short() == short);
                (arg, (!rest.is_empty()).then_some(rest))
            }
        };
        let Some(arg) = arg.filter(|a| takes_value(a)) else {
            return;
        };
        match inline {
            Some(value) => self.record(arg, value),
            None => self.pending = Some(arg),
        }
    }

    fn value_of(&self, id: &str) -> Option<&str> {
        self.given
            .iter()
            .rev()
            .find(|(given, _)| given == id)
            .map(|(_, value)| value.as_str())
    }
}

fn takes_value(arg: &Arg) -> bool {
    matches!(arg.get_action(), ArgAction::Set | ArgAction::Append)
}

/// The verb's `index`-th positional argument; the last one takes every further value when it
/// is repeated.
fn positional(command: &Command, index: usize) -> Option<&Arg> {
    let positionals: Vec<&Arg> = command.get_positionals().collect();
    positionals.get(index).copied().or_else(|| {
        positionals
            .last()
            .copied()
            .filter(|a| matches!(a.get_action(), ArgAction::Append))
    })
}

fn visible_subcommands(command: &Command) -> Vec<String> {
    command
        .get_subcommands()
        .filter(|sub| !sub.is_hide_set() && sub.get_name() != "help")
        .map(|sub| sub.get_name().to_owned())
        .collect()
}

/// The long flags a verb shows in its help.
fn flags(command: &Command) -> Vec<String> {
    command
        .get_arguments()
        .filter(|arg| !arg.is_hide_set() && !arg.is_positional())
        .filter_map(|arg| arg.get_long().map(|long| format!("--{long}")))
        .collect()
}

/// The values an argument can take: its closed choices, or the app's names its value name
/// asks for.
fn values(arg: &Arg, position: &Position<'_>) -> Vec<String> {
    let choices: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|value| !value.is_hide_set())
        .map(|value| value.get_name().to_owned())
        .collect();
    if !choices.is_empty() {
        return choices;
    }
    let value_name = arg
        .get_value_names()
        .and_then(|names| names.first())
        .map(|name| name.as_str().to_owned())
        .unwrap_or_else(|| arg.get_id().as_str().to_uppercase());
    let app = || App::discover(position.app.as_deref()).ok();
    let names = match value_name.as_str() {
        "ENV" | "ENV_A" | "ENV_B" => app().map(|app| environments(&app)),
        "COMPONENT" => app().map(|app| components(&app)),
        "PROTOTYPE" => Some(prototypes(Path::new("."))),
        "KEY" => app().and_then(|app| params(&app, position.value_of("component")?)),
        _ => None,
    };
    names.unwrap_or_default()
}

fn environments(app: &App) -> Vec<String> {
    app.environments().iter().map(|e| e.name.clone()).collect()
}

fn components(app: &App) -> Vec<String> {
    app.components()
        .map(|components| components.into_iter().map(|c| c.name).collect())
        .unwrap_or_default()
}

fn prototypes(root: &Path) -> Vec<String> {
    prototype::all(&Evaluator::new(root))
        .map(|all| all.into_iter().map(|p| p.name).collect())
        .unwrap_or_default()
}

/// The parameters of a component's prototype (`global`: of every prototype the app uses;
/// `defaults`: of every prototype, as they reach the components added later too).
fn params(app: &App, component: &str) -> Option<Vec<String>> {
    let evaluator = Evaluator::new(app.root());
    if component == change::DEFAULTS && !components(app).iter().any(|c| c == component) {
        return library_params(&evaluator);
    }
    let mut names = Vec::new();
    for entry in app.components().ok()? {
        if component != "global" && entry.name != component {
            continue;
        }
        let Some(prototype) = entry.prototype else {
            continue;
        };
        if let Ok(prototype) = prototype::find(&evaluator, &prototype) {
            names.extend(prototype.param_names());
        }
    }
    names.sort();
    names.dedup();
    Some(names)
}

/// The parameters of every prototype of the library.
fn library_params(evaluator: &Evaluator) -> Option<Vec<String>> {
    let mut names: Vec<String> = prototype::all(evaluator)
        .ok()?
        .into_iter()
        .flat_map(|p| p.param_names())
        .collect();
    names.sort();
    names.dedup();
    Some(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn complete(words: &[&str]) -> Vec<String> {
        let words: Vec<String> = words.iter().map(|w| (*w).to_owned()).collect();
        candidates(&words)
    }

    #[test]
    fn verbs_then_their_subcommands() {
        let verbs = complete(&[""]);
        assert!(verbs.contains(&"apply".to_owned()), "{verbs:?}");
        assert!(!verbs.iter().any(|v| v.starts_with("__")), "{verbs:?}");
        assert_eq!(complete(&["env", "s"]), ["set"]);
    }

    #[test]
    fn flags_leave_out_hidden_ones_and_values_of_closed_choices_are_listed() {
        let flags = complete(&["diff", "local", "--"]);
        assert!(flags.contains(&"--summary".to_owned()), "{flags:?}");
        assert!(!flags.contains(&"--manifest".to_owned()), "{flags:?}");
        assert_eq!(complete(&["diff", "local", "-o", ""]), ["text", "json"]);
        assert_eq!(
            complete(&["diff", "local", "--output=j"]),
            ["--output=json"]
        );
        assert_eq!(complete(&["show", "-o", "y"]), ["yaml"]);
    }

    #[test]
    fn prototypes_come_from_the_library() {
        let names = complete(&["component", "add", "tf-"]);
        assert!(names.contains(&"tf-job".to_owned()), "{names:?}");
        assert!(names.iter().all(|n| n.starts_with("tf-")), "{names:?}");
        // An old name still works, but only the new one is offered.
        assert!(!names.contains(&"tf-serving".to_owned()), "{names:?}");
    }
}
