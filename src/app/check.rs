//! The last check of an edit before it is written: the app, with the edited files staged in
//! place of those on disk ([`App::staging`]), still renders the components the edit reaches in
//! every environment it reaches. A type cannot say everything a value must be; the prototypes
//! check the rest when they render (a sweep's grid and its size against `maxJobs`, a random
//! search's ranges, a traffic rule's weights), and that check is made here, when the value is
//! typed, instead of at the next `show`, `diff` or `apply`.
//!
//! A prototype's refusal (`component <prototype>: param <param>: <problem>`) is told as the
//! param and its problem, without the library's trace; any other failure keeps the render's
//! error, location and trace, as its cause. A component that did not render before the edit is
//! not the edit's to refuse, unless its prototype now refuses a value: an edit that mends a
//! broken environment, leaves it as broken as it was, or sets one of several params a
//! hand-written component needs (it then fails on the next one), goes through.

use super::render::RenderError;
use super::{App, AppError};

/// What an edit reaches: the environments and components whose render it may change.
pub(crate) struct Reach<'a> {
    /// The edit as a refusal names it: `sweep.grid = {}`, `adding component `sweep``.
    pub edit: String,
    pub environments: Vec<String>,
    pub components: Vec<String>,
    /// What to do about a param a prototype refused, given the prototype and the param.
    pub hint: &'a dyn Fn(&str, &str) -> String,
}

/// How an edit breaks one environment.
struct Broken {
    /// `component `sweep`, param `grid`: is empty; ...`, or which component stopped rendering.
    problem: String,
    /// The prototype and the param it refused, when a prototype refused one.
    param: Option<(String, String)>,
    /// The render's error, when it is not a prototype's refusal of a param.
    source: Option<RenderError>,
}

/// Refuse the edit `after` stages on `before` when it makes a component it reaches fail to
/// render in an environment it reaches, or makes its prototype refuse a value there; the
/// refusal names the environments that fail the same way as the first.
pub(crate) fn keeps_rendering(
    before: &App,
    after: &App,
    reach: &Reach<'_>,
) -> Result<(), AppError> {
    let mut broken: Vec<(String, Broken)> = reach
        .environments
        .iter()
        .filter_map(|env| {
            Some((
                env.clone(),
                new_failure(before, after, env, &reach.components)?,
            ))
        })
        .collect();
    if broken.is_empty() {
        return Ok(());
    }
    let environments = broken
        .iter()
        .filter(|(_, b)| b.problem == broken[0].1.problem)
        .map(|(env, _)| env.clone())
        .collect();
    let (_, first) = broken.swap_remove(0);
    let hint = match &first.param {
        Some((prototype, param)) => (reach.hint)(prototype, param),
        None => "fix what the render says below".to_owned(),
    };
    Err(AppError::WouldNotRender {
        edit: reach.edit.clone(),
        environments,
        problem: first.problem,
        hint,
        source: first.source.map(Box::new),
    })
}

/// The first environment of `reach` where `after` fails to render a component of `reach`, and
/// the render's error: after [`keeps_rendering`] passed, a failure the app had before the edit.
pub(crate) fn still_broken(after: &App, reach: &Reach<'_>) -> Option<(String, RenderError)> {
    reach.environments.iter().find_map(|env| {
        let error = after.render(env, &reach.components).err()?;
        Some((env.clone(), error))
    })
}

/// How the edit breaks `env`, if it does: each failing component of `components` is rendered
/// before the edit too, and a failure it had the same already is passed over.
fn new_failure(before: &App, after: &App, env: &str, components: &[String]) -> Option<Broken> {
    let mut scope = components.to_vec();
    while !scope.is_empty() {
        let error = after.render(env, &scope).err()?;
        let component = match &error {
            RenderError::Evaluate { component, .. } => Some(component.clone()),
            _ => None,
        };
        let alone = component.clone().map_or_else(|| scope.clone(), |c| vec![c]);
        let earlier = before.render(env, &alone).err();
        let new = earlier.as_ref().map(signature) != Some(signature(&error));
        if new && (earlier.is_none() || refuses_a_value(&error)) {
            return Some(Broken::of(error));
        }
        match component {
            Some(failed) => scope.retain(|c| *c != failed),
            None => return None,
        }
    }
    None
}

/// Whether `error` is a prototype's refusal of a param's value.
fn refuses_a_value(error: &RenderError) -> bool {
    matches!(error, RenderError::Evaluate { source, .. } if param_refusal(&source.message).is_some())
}

/// What tells one failure from another: the component and the evaluator's message (not where
/// it was raised, which an edit of an unrelated line moves), else the whole error.
fn signature(error: &RenderError) -> String {
    match error {
        RenderError::Evaluate {
            component, source, ..
        } => format!("{component}: {}", source.message),
        other => {
            let mut text = other.to_string();
            let mut cause = std::error::Error::source(other);
            while let Some(error) = cause {
                text = format!("{text}: {error}");
                cause = std::error::Error::source(error);
            }
            text
        }
    }
}

impl Broken {
    fn of(error: RenderError) -> Broken {
        if let RenderError::Evaluate {
            component, source, ..
        } = &error
            && let Some((prototype, param, problem)) = param_refusal(&source.message)
        {
            return Broken {
                problem: format!("component `{component}`, param `{param}`: {problem}"),
                param: Some((prototype.to_owned(), param.to_owned())),
                source: None,
            };
        }
        let problem = match &error {
            RenderError::Evaluate { component, .. } => {
                format!("component `{component}` would not render")
            }
            _ => "it would not render".to_owned(),
        };
        Broken {
            problem,
            param: None,
            source: Some(error),
        }
    }
}

/// The prototype, the param and the problem of a prototype's refusal, as the library's
/// `u.fail` words it: `component <prototype>: param <param>: <problem>`.
fn param_refusal(message: &str) -> Option<(&str, &str, &str)> {
    let text = message.strip_prefix("runtime error: ").unwrap_or(message);
    let (prototype, rest) = text.strip_prefix("component ")?.split_once(": param ")?;
    let (param, problem) = rest.split_once(": ")?;
    let word = |s: &str| !s.is_empty() && !s.contains(char::is_whitespace);
    (word(prototype) && word(param)).then_some((prototype, param, problem))
}

/// `environment `dev``, or `environments `local`, `dev` and `prod``.
pub(super) fn environments_text(environments: &[String]) -> String {
    let quoted: Vec<String> = environments.iter().map(|e| format!("`{e}`")).collect();
    match quoted.split_last() {
        Some((last, [])) => format!("environment {last}"),
        Some((last, rest)) => format!("environments {} and {last}", rest.join(", ")),
        None => "no environment".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prototypes_refusal_is_read_as_its_param_and_problem() {
        assert_eq!(
            param_refusal(
                "runtime error: component pytorch-job-sweep: param grid: is empty; give each \
                 hyperparameter a list"
            ),
            Some((
                "pytorch-job-sweep",
                "grid",
                "is empty; give each hyperparameter a list"
            ))
        );
        assert_eq!(
            param_refusal("component serving: param trafficRule: weights sum to 110: v1:90"),
            Some(("serving", "trafficRule", "weights sum to 110: v1:90"))
        );
        assert_eq!(param_refusal("runtime error: boom"), None);
        assert_eq!(param_refusal("component a b: param c: d"), None);
    }

    #[test]
    fn environments_are_listed_in_words() {
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(environments_text(&names(&["dev"])), "environment `dev`");
        assert_eq!(
            environments_text(&names(&["local", "dev", "prod"])),
            "environments `local`, `dev` and `prod`"
        );
    }
}
