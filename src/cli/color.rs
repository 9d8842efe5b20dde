//! Whether mlkube colours what it prints: `--color auto|always|never`, chosen once per process.
//!
//! `auto` colours a stream only when it is a terminal and `NO_COLOR` is unset or empty; an
//! explicit `always` or `never` wins over both. Colour only decorates words that already say
//! what they mean (`error`, `+`/`-` lines of a diff).

use std::ffi::OsString;
use std::io::IsTerminal;
use std::sync::OnceLock;

use clap::ValueEnum;

/// When to colour output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// Colour a terminal, unless `NO_COLOR` is set.
    #[default]
    Auto,
    /// Always colour, even into a pipe or a file.
    Always,
    /// Never colour.
    Never,
}

static CHOICE: OnceLock<ColorChoice> = OnceLock::new();

/// Record the `--color` choice; the first one recorded holds for the process.
pub fn choose(choice: ColorChoice) {
    let _ = CHOICE.set(choice);
}

/// Whether stdout is coloured.
pub fn stdout() -> bool {
    enabled(
        chosen(),
        std::io::stdout().is_terminal(),
        std::env::var_os("NO_COLOR"),
    )
}

/// Whether stderr is coloured.
pub fn stderr() -> bool {
    enabled(
        chosen(),
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR"),
    )
}

/// The `--color` value among raw arguments (`--color never` or `--color=never`), for clap's own
/// help and errors, which it prints before the arguments are parsed.
pub fn from_args(args: impl IntoIterator<Item = OsString>) -> Option<ColorChoice> {
    let mut args = args
        .into_iter()
        .map(|arg| arg.to_string_lossy().into_owned());
    let mut found = None;
    while let Some(arg) = args.next() {
        let value = match arg.strip_prefix("--color") {
            Some("") => args.next(),
            Some(rest) => rest.strip_prefix('=').map(str::to_owned),
            None if arg == "--" => break,
            None => None,
        };
        if let Some(choice) = value.and_then(|v| ColorChoice::from_str(&v, false).ok()) {
            found = Some(choice);
        }
    }
    found
}

impl From<ColorChoice> for clap::ColorChoice {
    fn from(choice: ColorChoice) -> Self {
        match choice {
            ColorChoice::Auto => clap::ColorChoice::Auto,
            ColorChoice::Always => clap::ColorChoice::Always,
            ColorChoice::Never => clap::ColorChoice::Never,
        }
    }
}

fn chosen() -> ColorChoice {
    CHOICE.get().copied().unwrap_or_default()
}

/// The decision, apart from the process: the choice, whether the stream is a terminal, and
/// `NO_COLOR`.
fn enabled(choice: ColorChoice, terminal: bool, no_color: Option<OsString>) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => terminal && no_color.is_none_or(|value| value.is_empty()),
    }
}

/// `word` in bold red when `on`, else as it is.
pub fn red(word: &str, on: bool) -> String {
    if on {
        format!("\x1b[1;31m{word}\x1b[0m")
    } else {
        word.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::{ColorChoice, enabled, from_args};

    #[test]
    fn the_last_color_flag_before_dash_dash_counts() {
        let args = |list: &[&str]| list.iter().map(Into::into).collect::<Vec<_>>();
        assert_eq!(
            from_args(args(&["mlkube", "--color", "never", "env", "list"])),
            Some(ColorChoice::Never)
        );
        assert_eq!(
            from_args(args(&["mlkube", "--color=never", "show", "--color=always"])),
            Some(ColorChoice::Always)
        );
        assert_eq!(
            from_args(args(&["mlkube", "init", "--", "--color=never"])),
            None
        );
        assert_eq!(from_args(args(&["mlkube", "--color", "sometimes"])), None);
    }

    #[test]
    fn auto_colours_a_terminal_unless_no_color_is_set() {
        assert!(enabled(ColorChoice::Auto, true, None));
        assert!(enabled(ColorChoice::Auto, true, Some("".into())));
        assert!(!enabled(ColorChoice::Auto, true, Some("1".into())));
        assert!(!enabled(ColorChoice::Auto, false, None));
    }

    #[test]
    fn always_and_never_win_over_the_terminal_and_no_color() {
        assert!(enabled(ColorChoice::Always, false, Some("1".into())));
        assert!(!enabled(ColorChoice::Never, true, None));
    }
}
