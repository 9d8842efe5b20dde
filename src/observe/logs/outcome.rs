//! How the jobs whose logs were read ended, said after their lines so that no failure hides
//! behind quiet logs: each chosen container that did not succeed (`worker-0: container
//! tensorflow was OOMKilled (exit code 137)`, also one that restarted since), and each job that
//! failed, with its Failed condition's message. The caller exits non-zero when one failed.
//! Pure.

use super::jobs::{self, Found};
use super::replicas;
use super::{Output, Request};

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

/// The message of a job's Failed condition (else its reason).
pub fn failed_message(object: &serde_json::Value) -> &str {
    object["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .find(|c| c["type"] == "Failed" && c["status"] == "True")
        .and_then(|c| c["message"].as_str().or(c["reason"].as_str()))
        .unwrap_or("no message")
}
