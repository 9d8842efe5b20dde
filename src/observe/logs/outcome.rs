//! How the jobs whose logs were read ended, said after their lines so that no failure hides
//! behind quiet logs: each chosen container that did not succeed (`worker-0: container
//! tensorflow was OOMKilled (exit code 137)`, also one that restarted since), and each job that
//! failed, with its Failed condition's message. A Framework's pods are gone once it completed,
//! so how its Tasks ended is read from its status (`worker-1: container worker exited with code
//! 1 ...`), and why it failed from its completion status. The caller exits non-zero when one
//! failed. Pure.

use std::borrow::Cow;

use super::jobs::{self, Found};
use super::{Output, Request};
use super::{kind, replicas};

/// What the logs' jobs came to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The jobs that failed, `tfjob ml/mnist`.
    pub failed: Vec<String>,
}

impl Outcome {
    pub fn any_failed(&self) -> bool {
        !self.failed.is_empty()
    }
}

/// Note how the chosen containers that did not succeed ended, and which jobs failed and why.
pub fn report(found: &[Found], request: &Request, out: &mut dyn Output) -> Outcome {
    let all = replicas::replicas(found);
    for (of, container) in replicas::targets(&all, found, request) {
        if let Some(ended) = &container.ended {
            let restarts = match container.restarts {
                0 => String::new(),
                1 => ", restarted once".to_string(),
                n => format!(", restarted {n} times"),
            };
            out.note(&format!(
                "{}: container {} {ended}{restarts}",
                of.label, of.container
            ));
        }
    }
    let mut outcome = Outcome::default();
    for job in found {
        if jobs::condition(&job.object) == Some("Failed") {
            framework_tasks(job, request, out);
            out.note(&format!(
                "{} failed: {}",
                job.job,
                failed_message(&job.object)
            ));
            outcome.failed.push(job.job.to_string());
        }
    }
    outcome
}

/// How a failed Framework's Tasks ended, from its status, for those whose pods are gone (the
/// others' containers were noted from their pods).
fn framework_tasks(job: &Found, request: &Request, out: &mut dyn Output) {
    if !kind::is_framework(&job.object) {
        return;
    }
    let pods: Vec<&str> = job
        .pods
        .iter()
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    for (task, ended) in kind::failed_tasks(&job.object) {
        if pods.contains(&format!("{}-{task}", job.job.name).as_str()) {
            continue;
        }
        let label = if request.jobs.len() > 1 {
            format!("{}/{task}", job.job.name)
        } else {
            task
        };
        out.note(&format!("{label}: {ended}"));
    }
}

/// The message of a job's Failed condition (else its reason); a Framework's completion status.
pub fn failed_message(object: &serde_json::Value) -> Cow<'_, str> {
    if kind::is_framework(object) {
        return kind::framework_completion(object)
            .map_or("no completion status".into(), Cow::Owned);
    }
    let message = object["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .find(|c| c["type"] == "Failed" && c["status"] == "True")
        .and_then(|c| c["message"].as_str().or(c["reason"].as_str()))
        .unwrap_or("no message");
    Cow::Borrowed(message)
}
