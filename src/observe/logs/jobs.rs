//! The jobs whose logs are read: their kinds as the command line names them, finding them and
//! their pods on the cluster, and what a job's conditions say when it has no pods.

use std::fmt;

use k8s_openapi::api::core::v1::Pod;
use kube::discovery::ApiResource;
use serde_json::Value;

use super::kind::{self, JobKind};
use super::{LogSource, LogsError, Output, Request};

/// A job by kind, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRef {
    pub kind: JobKind,
    pub namespace: String,
    pub name: String,
}

impl JobRef {
    /// `tfjob`: the kind as `kubectl` and this command's `KIND/NAME` write it.
    pub fn lower_kind(&self) -> String {
        self.kind.name().to_ascii_lowercase()
    }

    /// The job's resource, `kubeflow.org/v1` `tfjobs`.
    pub fn resource(&self) -> ApiResource {
        let group = self.kind.group();
        ApiResource {
            group: group.into(),
            version: "v1".into(),
            api_version: format!("{group}/v1"),
            kind: self.kind.name().into(),
            plural: self.kind.plural().into(),
        }
    }
}

impl fmt::Display for JobRef {
    /// `tfjob ml/mnist`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.lower_kind(), self.namespace, self.name)
    }
}

/// The kinds of jobs as the messages list them: `tfjob, pytorchjob, ..., framework`.
pub fn kinds() -> String {
    let kinds: Vec<String> = JobKind::all()
        .map(|k| k.name().to_ascii_lowercase())
        .collect();
    kinds.join(", ")
}

/// The kind `text` names, in any of the forms `kubectl` takes, in any case: `tfjob`, `tfjobs`,
/// `TFJob`, `tfjobs.kubeflow.org`, `tfjob.kubeflow.org`, `tfjobs.v1.kubeflow.org`; `framework`,
/// `frameworks.frameworkcontroller.microsoft.com`, ...
pub fn kind_of(text: &str) -> Result<JobKind, LogsError> {
    let lower = text.to_ascii_lowercase();
    JobKind::all()
        .find(|k| {
            let group = k.group();
            let resource = lower
                .strip_suffix(&format!(".v1.{group}"))
                .or_else(|| lower.strip_suffix(&format!(".{group}")))
                .unwrap_or(&lower);
            resource == k.plural() || resource == k.name().to_ascii_lowercase()
        })
        .ok_or_else(|| LogsError::UnknownKind {
            kind: text.to_string(),
            kinds: kinds(),
        })
}

/// A job named `KIND/NAME` on the command line, in `namespace`.
pub fn parse(target: &str, namespace: &str) -> Result<JobRef, LogsError> {
    let bad = || LogsError::BadTarget {
        target: target.to_string(),
    };
    let (kind, name) = target.split_once('/').ok_or_else(bad)?;
    if name.is_empty() || name.contains('/') {
        return Err(bad());
    }
    Ok(JobRef {
        kind: kind_of(kind)?,
        namespace: namespace.to_string(),
        name: name.to_string(),
    })
}

/// The job a rendered object is, if it is one.
pub fn rendered(object: &Value, default_namespace: &str) -> Option<JobRef> {
    let group = object["apiVersion"].as_str()?.split('/').next()?;
    let kind = JobKind::all().find(|k| object["kind"] == k.name() && group == k.group())?;
    Some(JobRef {
        kind,
        namespace: object["metadata"]["namespace"]
            .as_str()
            .unwrap_or(default_namespace)
            .to_string(),
        name: object["metadata"]["name"].as_str()?.to_string(),
    })
}

/// A job as the cluster has it, with its pods.
#[derive(Debug, Clone)]
pub struct Found {
    pub job: JobRef,
    pub object: Value,
    pub pods: Vec<Pod>,
}

/// Read every job of the request and list its pods. A job that is missing is an error when it
/// was named, or when every job the environment renders is; otherwise a note.
pub async fn find(
    source: &impl LogSource,
    request: &Request,
    out: &mut dyn Output,
) -> Result<Vec<Found>, LogsError> {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for job in &request.jobs {
        match source.job(job).await? {
            Some(object) => {
                let pods = source.pods(job).await?;
                found.push(Found {
                    job: job.clone(),
                    object,
                    pods,
                });
            }
            None => missing.push(job),
        }
    }
    match (&request.env, missing.as_slice()) {
        (_, []) => {}
        (None, [job, ..]) => return Err(not_found(source, job).await),
        (Some(env), missing) if found.is_empty() => {
            let names: Vec<String> = missing.iter().map(ToString::to_string).collect();
            return Err(LogsError::NotApplied {
                jobs: names.join(", "),
                them: if missing.len() == 1 { "it" } else { "them" },
                env: env.clone(),
            });
        }
        (Some(_), missing) => {
            for job in missing {
                out.note(&format!("{job} not found on the cluster: not applied yet?"));
            }
        }
    }
    Ok(found)
}

/// Why a named job was not found: the kind and namespace searched, and a job of the same name
/// and another kind if there is one.
async fn not_found(source: &impl LogSource, job: &JobRef) -> LogsError {
    let mut others = Vec::new();
    for kind in JobKind::all().filter(|k| *k != job.kind) {
        let other = JobRef {
            kind,
            ..job.clone()
        };
        // Only a hint: a kind the cluster does not serve, or any failure, says nothing.
        if let Ok(Some(_)) = source.job(&other).await {
            others.push(other);
        }
    }
    let searched = format!(
        "searched {}.{} in namespace {}",
        job.kind.plural(),
        job.kind.group(),
        job.namespace
    );
    let hint = match others.first() {
        Some(other) => format!(
            "there is a {} of that name: `mlkube logs -n {} {}/{}`",
            other.lower_kind(),
            other.namespace,
            other.lower_kind(),
            other.name
        ),
        None => format!(
            "no other kind of training job is called {name} there either; list them with \
             `kubectl get {} -n {}`, or pass the job's namespace with -n",
            job.kind.plural(),
            job.namespace,
            name = job.name,
        ),
    };
    LogsError::JobNotFound {
        job: format!("{} {}", job.lower_kind(), job.name),
        searched,
        hint,
    }
}

/// The type of a job's last true condition: `Created`, `Running`, `Succeeded`, ...; of a
/// Framework, its state in those words ([`kind::framework_condition`]).
pub fn condition(object: &Value) -> Option<&str> {
    if kind::is_framework(object) {
        return kind::framework_condition(object);
    }
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .rev()
        .find(|c| c["status"] == "True")?["type"]
        .as_str()
}

/// Whether a job has ended, Succeeded or Failed: its pods will not be replaced.
pub fn finished(object: &Value) -> bool {
    matches!(condition(object), Some("Succeeded" | "Failed"))
}

/// Why a job has no pods, from its conditions and clean-pod policy.
pub fn no_pods(job: &JobRef, object: &Value) -> LogsError {
    let (state, hint) = why_no_pods(object);
    LogsError::NoPods {
        job: job.to_string(),
        state,
        hint,
    }
}

/// Why none of several jobs has pods, each job's state in turn.
pub fn none_has_pods(found: &[Found]) -> LogsError {
    match found {
        [one] => no_pods(&one.job, &one.object),
        several => {
            let each: Vec<String> = several
                .iter()
                .map(|f| format!("{} has no pods {}", f.job, why_no_pods(&f.object).0))
                .collect();
            LogsError::NoPodsInAny {
                each: each.join("; "),
                hint: several.first().map_or("", |f| why_no_pods(&f.object).1),
            }
        }
    }
}

/// What the job's state says about its missing pods, and the hint that goes with it.
fn why_no_pods(object: &Value) -> (String, &'static str) {
    if let Some(end @ ("Succeeded" | "Failed")) = kind::is_framework(object)
        .then(|| condition(object))
        .flatten()
    {
        return (
            format!("left: it {end} and its attempt's pods were deleted with the attempt"),
            "FrameworkController deletes a completed attempt's pods, and their logs with them; \
             `mlkube logs -f` while the Framework runs reads them to the end",
        );
    }
    let policy = object["spec"]["runPolicy"]["cleanPodPolicy"]
        .as_str()
        .unwrap_or("None");
    match condition(object) {
        Some(end @ ("Succeeded" | "Failed")) if policy != "None" => (
            format!("left: it {end} and cleanPodPolicy {policy} deleted them"),
            "their logs went with them; set runPolicy.cleanPodPolicy to None to keep the pods \
             (and logs) of finished jobs",
        ),
        Some(end @ ("Succeeded" | "Failed")) => (
            format!("left ({end}): they were deleted"),
            "their logs went with them",
        ),
        Some("Suspended") => (
            "(Suspended)".to_string(),
            "a suspended job runs no pods: set runPolicy.suspend to false to resume it",
        ),
        Some(state) => (
            format!("yet ({state})"),
            "the operator creates them; `mlkube logs -f` waits for them",
        ),
        None => (
            "yet (no condition yet)".to_string(),
            "the training-job operator creates the pods and the conditions: is it running and \
             watching this namespace?",
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_kind_is_taken_in_every_form_kubectl_takes() {
        for form in [
            "tfjob",
            "tfjobs",
            "TFJob",
            "TFJobs",
            "tfjobs.kubeflow.org",
            "tfjob.kubeflow.org",
            "tfjobs.v1.kubeflow.org",
        ] {
            assert_eq!(kind_of(form).expect(form).name(), "TFJob", "{form}");
        }
        for (form, kind) in [
            ("pytorchjob", "PyTorchJob"),
            ("mxjobs", "MXJob"),
            ("XGBoostJob", "XGBoostJob"),
            ("jaxjob", "JAXJob"),
            ("paddlejobs", "PaddleJob"),
            ("framework", "Framework"),
            ("Frameworks", "Framework"),
            ("frameworks.frameworkcontroller.microsoft.com", "Framework"),
            (
                "framework.v1.frameworkcontroller.microsoft.com",
                "Framework",
            ),
        ] {
            assert_eq!(kind_of(form).expect(form).name(), kind);
        }
    }

    #[test]
    fn an_unknown_kind_or_a_name_without_one_says_how_to_write_it() {
        let error = parse("deployment/resnet", "ml").unwrap_err().to_string();
        assert_eq!(
            error,
            "`deployment` is not a kind of training job\n  hint: name the job as KIND/NAME, KIND \
             one of tfjob, pytorchjob, mxjob, xgboostjob, jaxjob, paddlejob, mpijob, framework (or its \
             plural, e.g. tfjobs/mnist)"
        );
        for bad in ["tfjob/", "tfjob/a/b", "mnist"] {
            assert!(
                matches!(parse(bad, "ml"), Err(LogsError::BadTarget { .. })),
                "{bad}"
            );
        }
        let job = parse("tfjobs/mnist", "ml").expect("a job");
        assert_eq!(job.to_string(), "tfjob ml/mnist");
    }

    #[test]
    fn a_rendered_training_job_is_found_by_its_kind_and_group() {
        let job = json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                         "metadata": {"name": "dist"}});
        let found = rendered(&job, "ml").expect("a training job");
        assert_eq!(found.to_string(), "pytorchjob ml/dist");
        let other = json!({"apiVersion": "example.com/v1", "kind": "TFJob",
                           "metadata": {"name": "x", "namespace": "ml"}});
        assert!(rendered(&other, "ml").is_none());
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                                "metadata": {"name": "x"}});
        assert!(rendered(&deployment, "ml").is_none());
    }

    fn job_with(conditions: serde_json::Value, policy: Option<&str>) -> serde_json::Value {
        let mut job = json!({"status": {"conditions": conditions}});
        if let Some(policy) = policy {
            job["spec"]["runPolicy"]["cleanPodPolicy"] = json!(policy);
        }
        job
    }

    #[test]
    fn a_job_without_pods_is_told_by_its_last_condition_and_clean_pod_policy() {
        let job = JobRef {
            kind: kind_of("tfjob").unwrap(),
            namespace: "ml".into(),
            name: "x".into(),
        };
        let first_line = |object: &serde_json::Value| {
            no_pods(&job, object)
                .to_string()
                .lines()
                .next()
                .unwrap_or_default()
                .to_string()
        };
        let created = json!([{"type": "Created", "status": "True"}]);
        assert_eq!(
            first_line(&job_with(created, None)),
            "tfjob ml/x has no pods yet (Created)"
        );
        let cleaned = json!([{"type": "Created", "status": "True"},
                             {"type": "Running", "status": "False"},
                             {"type": "Succeeded", "status": "True"}]);
        assert_eq!(
            first_line(&job_with(cleaned.clone(), Some("Running"))),
            "tfjob ml/x has no pods left: it Succeeded and cleanPodPolicy Running deleted them"
        );
        assert_eq!(
            first_line(&job_with(cleaned, None)),
            "tfjob ml/x has no pods left (Succeeded): they were deleted"
        );
        let suspended = json!([{"type": "Suspended", "status": "True"}]);
        assert_eq!(
            first_line(&job_with(suspended, None)),
            "tfjob ml/x has no pods (Suspended)"
        );
        assert_eq!(
            first_line(&json!({})),
            "tfjob ml/x has no pods yet (no condition yet)"
        );
        assert!(finished(
            &json!({"status": {"conditions": [{"type": "Failed", "status": "True"}]}})
        ));
    }
}
