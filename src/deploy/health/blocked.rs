//! Why a pod does not run, and how its containers ended, in words a user can act on: what the
//! scheduler (`PodScheduled` false: `0/1 nodes are available: 1 Insufficient cpu.`) and the
//! kubelet (a waiting container's reason and message, a terminated one's reason and exit code)
//! wrote into its status. Pure, on pods as JSON; `status`, the apply's wait, `logs` and a
//! sweep's notes all say it the same way.
//!
//! Only reasons that waiting may not end count as blocking: a container being created or an
//! init container still running is just starting. An image that cannot be pulled is *lasting*:
//! the kubelet retries with a growing back-off, but only a change of the image (or of what the
//! nodes can reach) ends it, so a caller may stop waiting. A pod that cannot be scheduled may
//! still be placed once a node has room, so it is blocking but not lasting.

use serde_json::Value;

/// Why a pod or one of its containers does not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// One line: what the scheduler or kubelet said, with the image or node where they matter.
    pub text: String,
    /// Waiting will not end it (an image that cannot be pulled).
    pub lasting: bool,
}

/// The waiting reasons of a container whose image the kubelet cannot get. The kubelet retries,
/// but only a change of the image (or of what the nodes can reach) ends them.
pub const IMAGE_PULL_FAILURES: [&str; 4] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
];

/// Waiting reasons of a container that is only starting.
const STARTING: [&str; 2] = ["ContainerCreating", "PodInitializing"];

/// Why the scheduler has not placed the pod, if it says.
pub fn unscheduled(pod: &Value) -> Option<Blocked> {
    let condition = pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "PodScheduled" && c["status"] == "False")?;
    let said = condition["message"]
        .as_str()
        .or(condition["reason"].as_str())
        .unwrap_or("no reason given");
    Some(Blocked {
        text: format!("cannot be scheduled: {}", said.trim()),
        lasting: false,
    })
}

/// Why the container `name` of `pod` has not started, if anything but its start holds it: its
/// pod is not scheduled, its image cannot be pulled, it crashes and is backed off, or the
/// kubelet cannot create it (a missing Secret or ConfigMap, a bad command).
pub fn container_blocked(pod: &Value, name: &str) -> Option<Blocked> {
    let Some(status) = container_status(pod, name) else {
        return unscheduled(pod);
    };
    let Some(waiting) = status["state"]["waiting"].as_object() else {
        // Between two restarts a failed container is terminated, not waiting: how it ended
        // says why.
        let text = ended(status).filter(|_| status["state"]["terminated"].is_object())?;
        return Some(Blocked {
            text,
            lasting: false,
        });
    };
    let reason = waiting.get("reason").and_then(Value::as_str)?;
    let message = waiting.get("message").and_then(Value::as_str);
    if STARTING.contains(&reason) {
        return None;
    }
    if IMAGE_PULL_FAILURES.contains(&reason) {
        let image = image_of(&pod["spec"], name).unwrap_or("?");
        return Some(Blocked {
            text: image_pull_message(image, reason, message),
            lasting: true,
        });
    }
    let text = match (reason, ended(status)) {
        ("CrashLoopBackOff", Some(ended)) => format!(
            "crashing ({reason}): {ended}, restarted {} times",
            status["restartCount"].as_i64().unwrap_or(0)
        ),
        (_, _) => match message.map(str::trim).filter(|m| !m.is_empty()) {
            Some(message) => format!("{reason}: {message}"),
            None => reason.to_string(),
        },
    };
    Some(Blocked {
        text,
        lasting: false,
    })
}

/// The first reason any container of the pod is blocked, as `pod NAME: container C ...`, or
/// `pod NAME cannot be scheduled: ...`.
pub fn pod_blocked(pod: &Value) -> Option<Blocked> {
    let name = pod["metadata"]["name"].as_str().unwrap_or("?");
    if let Some(blocked) = unscheduled(pod) {
        return Some(Blocked {
            text: format!("pod {name} {}", blocked.text),
            ..blocked
        });
    }
    ["initContainers", "containers"]
        .iter()
        .flat_map(|field| pod["spec"][field].as_array().into_iter().flatten())
        .filter_map(|c| c["name"].as_str())
        .find_map(|container| {
            let blocked = container_blocked(pod, container)?;
            Some(Blocked {
                text: format!("pod {name}: container {container}: {}", blocked.text),
                ..blocked
            })
        })
}

/// Why a pod whose containers run is still not ready: a container running again after a run
/// that failed, and not ready, says how that run ended (`pod P: container C: not ready after 2
/// restarts; last ended with exit code 1 (Error): ...`). A model server that fails to load its
/// model spends most of each restart loading it again, neither waiting nor terminated. Never
/// lasting: this run may come up.
pub fn pod_restarting(pod: &Value) -> Option<Blocked> {
    let name = pod["metadata"]["name"].as_str().unwrap_or("?");
    let statuses = pod["status"]["containerStatuses"].as_array()?;
    statuses
        .iter()
        .filter(|s| s["state"]["running"].is_object() && s["ready"] != true)
        .find_map(|status| {
            let restarts = status["restartCount"].as_i64().filter(|n| *n > 0)?;
            let container = status["name"].as_str().unwrap_or("?");
            Some(Blocked {
                text: format!(
                    "pod {name}: container {container}: not ready after {restarts} restarts; {}",
                    ended(status)?
                ),
                lasting: false,
            })
        })
}

/// How a container that did not succeed ended, from its current state or (after a restart)
/// its last one: `ended with exit code 3 (Error)`, `was OOMKilled (exit code 137)`, followed by
/// the last line of its termination message when it wrote one.
pub fn ended(status: &Value) -> Option<String> {
    let failed = |terminated: &Value| {
        let code = terminated["exitCode"].as_i64().unwrap_or(0);
        let reason = terminated["reason"].as_str().unwrap_or("");
        let said = terminated["message"].as_str().map(str::trim).unwrap_or("");
        let said = match said.lines().last() {
            Some(line) if !line.is_empty() => format!(": {line}"),
            _ => String::new(),
        };
        (code != 0 || !matches!(reason, "" | "Completed")).then(|| match reason {
            "OOMKilled" => format!("was OOMKilled (exit code {code}){said}"),
            "" => format!("ended with exit code {code}{said}"),
            reason => format!("ended with exit code {code} ({reason}){said}"),
        })
    };
    let current = &status["state"]["terminated"];
    if current.is_object() {
        return failed(current);
    }
    failed(&status["lastState"]["terminated"]).map(|last| format!("last {last}"))
}

/// The status of the container (or init container) `name` of a pod.
pub fn container_status<'a>(pod: &'a Value, name: &str) -> Option<&'a Value> {
    ["initContainerStatuses", "containerStatuses"]
        .iter()
        .flat_map(|field| pod["status"][field].as_array().into_iter().flatten())
        .find(|s| s["name"] == name)
}

/// The image of the container (or init container) called `name` in a pod spec.
pub fn image_of<'a>(spec: &'a Value, name: &str) -> Option<&'a str> {
    ["initContainers", "containers"]
        .iter()
        .flat_map(|field| spec[field].as_array().into_iter().flatten())
        .find(|c| c["name"] == name)?["image"]
        .as_str()
}

/// `image X cannot be pulled: <the kubelet's message> (<reason>); hint: <what to do>`.
pub fn image_pull_message(image: &str, reason: &str, message: Option<&str>) -> String {
    let what = match message.map(str::trim).filter(|m| !m.is_empty()) {
        Some(message) => format!("{message} ({reason})"),
        None => reason.to_string(),
    };
    let hint = match reason {
        "InvalidImageName" => "fix the image reference in the component's image param",
        "ErrImageNeverPull" => {
            "the pod's imagePullPolicy is Never: import the image into the nodes' container \
             runtime, or set the component's image param to an image they have"
        }
        _ => {
            "build the image and import it into the cluster's nodes (or push it to a registry \
             they can pull from), or set the component's image param to an image that exists"
        }
    };
    format!("image {image} cannot be pulled: {what}; hint: {hint}")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(status: Value) -> Value {
        json!({"metadata": {"name": "mnist-worker-0"},
               "spec": {"containers": [{"name": "tensorflow", "image": "example/train:1"}]},
               "status": status})
    }

    fn waiting(reason: &str, message: &str) -> Value {
        pod(
            json!({"containerStatuses": [{"name": "tensorflow", "restartCount": 0,
            "state": {"waiting": {"reason": reason, "message": message}}}]}),
        )
    }

    #[test]
    fn an_image_that_cannot_be_pulled_is_lasting_and_names_the_image() {
        let blocked = container_blocked(&waiting("ErrImagePull", "not found"), "tensorflow")
            .expect("blocked");
        assert!(blocked.lasting);
        assert!(
            blocked
                .text
                .starts_with("image example/train:1 cannot be pulled: not found (ErrImagePull)"),
            "{}",
            blocked.text
        );
        let whole = pod_blocked(&waiting("ImagePullBackOff", "Back-off")).expect("blocked");
        assert!(
            whole
                .text
                .starts_with("pod mnist-worker-0: container tensorflow: image example/train:1"),
            "{}",
            whole.text
        );
    }

    #[test]
    fn a_pod_the_scheduler_cannot_place_says_what_it_lacks_and_is_not_lasting() {
        let pending = pod(json!({"phase": "Pending", "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/1 nodes are available: 1 Insufficient cpu."}]}));
        let blocked = container_blocked(&pending, "tensorflow").expect("blocked");
        assert_eq!(
            blocked.text,
            "cannot be scheduled: 0/1 nodes are available: 1 Insufficient cpu."
        );
        assert!(!blocked.lasting);
        assert_eq!(
            pod_blocked(&pending).expect("blocked").text,
            "pod mnist-worker-0 cannot be scheduled: 0/1 nodes are available: 1 Insufficient cpu."
        );
    }

    #[test]
    fn a_container_only_starting_is_not_blocked_and_a_crash_loop_says_how_it_ended() {
        assert_eq!(
            container_blocked(&waiting("ContainerCreating", ""), "tensorflow"),
            None
        );
        assert_eq!(container_blocked(&pod(json!({})), "tensorflow"), None);
        let crashing = pod(json!({"containerStatuses": [{"name": "tensorflow",
            "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}));
        assert_eq!(
            container_blocked(&crashing, "tensorflow")
                .expect("blocked")
                .text,
            "crashing (CrashLoopBackOff): last ended with exit code 1 (Error), restarted 2 times"
        );
        let config = waiting("CreateContainerConfigError", "secret \"s3\" not found");
        assert_eq!(
            container_blocked(&config, "tensorflow")
                .expect("blocked")
                .text,
            "CreateContainerConfigError: secret \"s3\" not found"
        );
    }

    #[test]
    fn a_failed_container_between_restarts_says_how_it_ended_and_what_it_wrote() {
        let failed = pod(
            json!({"containerStatuses": [{"name": "tensorflow", "restartCount": 1,
            "state": {"terminated": {"exitCode": 1, "reason": "Error",
                "message": "loading the model\ns3://models/v3/ holds no objects\n"}}}]}),
        );
        assert_eq!(
            container_blocked(&failed, "tensorflow")
                .expect("blocked")
                .text,
            "ended with exit code 1 (Error): s3://models/v3/ holds no objects"
        );
        let succeeded = pod(json!({"containerStatuses": [{"name": "tensorflow",
            "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}));
        assert_eq!(container_blocked(&succeeded, "tensorflow"), None);
    }

    #[test]
    fn a_container_running_again_after_a_failure_says_how_it_ended_until_ready() {
        let running_again = |ready: bool| {
            pod(
                json!({"containerStatuses": [{"name": "tensorflow", "restartCount": 2,
                "ready": ready, "state": {"running": {}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                    "message": "s3://models/v3/ holds no objects"}}}]}),
            )
        };
        assert_eq!(container_blocked(&running_again(false), "tensorflow"), None);
        assert_eq!(
            pod_restarting(&running_again(false)).expect("restarting"),
            Blocked {
                text: "pod mnist-worker-0: container tensorflow: not ready after 2 restarts; \
                       last ended with exit code 1 (Error): s3://models/v3/ holds no objects"
                    .to_string(),
                lasting: false,
            }
        );
        assert_eq!(pod_restarting(&running_again(true)), None);
        let first_run = pod(json!({"containerStatuses": [{"name": "tensorflow",
            "restartCount": 0, "ready": false, "state": {"running": {}}}]}));
        assert_eq!(pod_restarting(&first_run), None);
    }

    #[test]
    fn a_container_ended_is_told_only_when_it_did_not_succeed() {
        let oom = json!({"state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}});
        assert_eq!(
            ended(&oom).as_deref(),
            Some("was OOMKilled (exit code 137)")
        );
        let ok = json!({"state": {"terminated": {"exitCode": 0, "reason": "Completed"}}});
        assert_eq!(ended(&ok), None);
        let restarted = json!({"state": {"running": {}},
            "lastState": {"terminated": {"exitCode": 3, "reason": "Error"}}});
        assert_eq!(
            ended(&restarted).as_deref(),
            Some("last ended with exit code 3 (Error)")
        );
        assert_eq!(ended(&json!({"state": {"running": {}}})), None);
    }
}
