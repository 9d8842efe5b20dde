//! What a Framework's spec must be for the controller to run it: TaskRole names unique, few
//! enough Tasks that the status fits in one object, and every pod template readable as a pod
//! template.
//!
//! The CRD refuses the first two at admission (`crd`); the controller checks all three again
//! (`sync::decide`), for a Framework the API server let through: one created before the CRD had
//! the rules, or through a CRD without them, and a pod template of the wrong shape, which the
//! CRD keeps as it is. Such a Framework fails at once with the [`Refusal`]'s completion, which
//! says what to fix, instead of churning its pods, failing every status write or retrying the
//! pod's build forever.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde::Deserialize;

use super::api::{FrameworkSpec, MAX_TASK_ROLES, MAX_TASKS};
use super::completion::{self as cc, Code};

/// Why the controller will not run a Framework's spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Two TaskRoles of one name, at these indexes of `spec.taskRoles`: their pods would have
    /// the same names.
    DuplicateTaskRole {
        name: String,
        first: usize,
        second: usize,
    },
    /// More TaskRoles than [`MAX_TASK_ROLES`].
    TooManyTaskRoles { roles: usize },
    /// More Tasks in all than [`MAX_TASKS`].
    TooManyTasks { tasks: i64 },
    /// The pod template of `spec.taskRoles[index]` is not a `core/v1` PodTemplateSpec: at
    /// `path` (inside the template), `error`.
    PodTemplate {
        index: usize,
        role: String,
        path: String,
        error: String,
    },
}

/// The first reason the controller will not run `spec`, if any.
pub fn refusal(spec: &FrameworkSpec) -> Option<Refusal> {
    let roles = &spec.task_roles;
    if roles.len() > MAX_TASK_ROLES {
        return Some(Refusal::TooManyTaskRoles { roles: roles.len() });
    }
    for (second, role) in roles.iter().enumerate() {
        if let Some(first) = roles[..second].iter().position(|r| r.name == role.name) {
            return Some(Refusal::DuplicateTaskRole {
                name: role.name.clone(),
                first,
                second,
            });
        }
    }
    let tasks: i64 = roles.iter().map(|r| i64::from(r.task_number.max(0))).sum();
    if tasks > i64::from(MAX_TASKS) {
        return Some(Refusal::TooManyTasks { tasks });
    }
    roles.iter().enumerate().find_map(|(index, role)| {
        let error = read_template(&role.task.pod).err()?;
        Some(Refusal::PodTemplate {
            index,
            role: role.name.clone(),
            path: locate(&role.task.pod, &error),
            error,
        })
    })
}

/// Whether `template` reads as a pod template; serde's message of why not. The `{{FC_...}}`
/// placeholders stand in strings and are replaced by names, so they never change its shape.
fn read_template(template: &serde_json::Value) -> Result<(), String> {
    PodTemplateSpec::deserialize(template)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// Where in `template` the first field of the wrong shape is, as a path from the template
/// (`spec.containers[0].ports`); empty for the template itself. serde names no path, so this
/// descends into the first member whose removal changes the error: a pod template's fields are
/// all optional to the reader, so removing one never adds an error.
fn locate(template: &serde_json::Value, error: &str) -> String {
    let mut path: Vec<Step> = Vec::new();
    while let Some(node) = at(template, &path) {
        let members: Vec<Step> = match node {
            serde_json::Value::Object(map) => map.keys().cloned().map(Step::Key).collect(),
            serde_json::Value::Array(items) => (0..items.len()).map(Step::Index).collect(),
            _ => break,
        };
        let culprit = members.into_iter().find(|member| {
            let mut without = template.clone();
            remove(&mut without, &path, member);
            read_template(&without).err().as_deref() != Some(error)
        });
        let Some(member) = culprit else {
            break;
        };
        path.push(member);
    }
    let mut text = String::new();
    for step in &path {
        match step {
            Step::Key(key) if text.is_empty() => text += key,
            Step::Key(key) => text += &format!(".{key}"),
            Step::Index(index) => text += &format!("[{index}]"),
        }
    }
    text
}

#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
}

fn at<'a>(value: &'a serde_json::Value, path: &[Step]) -> Option<&'a serde_json::Value> {
    path.iter().try_fold(value, |node, step| match step {
        Step::Key(key) => node.get(key),
        Step::Index(index) => node.get(index),
    })
}

fn remove(value: &mut serde_json::Value, path: &[Step], member: &Step) {
    let node = path.iter().try_fold(value, |node, step| match step {
        Step::Key(key) => node.get_mut(key),
        Step::Index(index) => node.get_mut(index),
    });
    match (node, member) {
        (Some(serde_json::Value::Object(map)), Step::Key(key)) => {
            map.shift_remove(key);
        }
        (Some(serde_json::Value::Array(items)), Step::Index(index)) if *index < items.len() => {
            items.remove(*index);
        }
        _ => {}
    }
}

impl Refusal {
    /// The completion the Framework's attempt fails with.
    pub fn code(&self) -> Code {
        match self {
            Refusal::PodTemplate { .. } => cc::POD_CREATION_PERMANENT_ERROR,
            _ => cc::FRAMEWORK_SPEC_INVALID,
        }
    }

    /// The reason of the Warning event that reports it.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::DuplicateTaskRole { .. } => "DuplicateTaskRoleName",
            Refusal::TooManyTaskRoles { .. } => "TooManyTaskRoles",
            Refusal::TooManyTasks { .. } => "TooManyTasks",
            Refusal::PodTemplate { .. } => "InvalidPodTemplate",
        }
    }

    /// What is wrong and how to fix it: the completion's diagnostics and the event's note.
    pub fn message(&self) -> String {
        match self {
            Refusal::DuplicateTaskRole {
                name,
                first,
                second,
            } => format!(
                "spec.taskRoles[{first}] and spec.taskRoles[{second}] are both named {name:?}, and pods are named <framework>-<taskrole>-<index>; hint: give every TaskRole a name of its own, then create the Framework again"
            ),
            Refusal::TooManyTaskRoles { roles } => format!(
                "spec.taskRoles has {roles} TaskRoles, more than the {MAX_TASK_ROLES} a Framework may have; hint: merge TaskRoles, or split the Framework into several, then create it again"
            ),
            Refusal::TooManyTasks { tasks } => format!(
                "the TaskRoles' taskNumbers add up to {tasks} Tasks, more than the {MAX_TASKS} a Framework may have (its status holds every Task and must fit in one object of at most 1.5 MiB); hint: split the job into Frameworks of at most {MAX_TASKS} Tasks, then create them again"
            ),
            Refusal::PodTemplate {
                index,
                role,
                path,
                error,
            } => {
                let at = if path.is_empty() {
                    format!("spec.taskRoles[{index}].task.pod")
                } else {
                    format!("spec.taskRoles[{index}].task.pod.{path}")
                };
                format!(
                    "the pod template of TaskRole {role:?} is not a core/v1 PodTemplateSpec: {at}: {error}; hint: give {at} the type `kubectl explain pod.{}` shows, then create the Framework again",
                    explained(path)
                )
            }
        }
    }
}

/// The `kubectl explain` path of a field of a pod template at `path`, without list indexes.
fn explained(path: &str) -> String {
    let mut text = String::new();
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => in_index = true,
            ']' => in_index = false,
            _ if !in_index => text.push(c),
            _ => {}
        }
    }
    if text.is_empty() { "spec".into() } else { text }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::operator::fc::api::TaskRoleSpec;
    use crate::operator::fc::config::BUILTIN;

    fn role(name: &str, tasks: i32, pod: serde_json::Value) -> TaskRoleSpec {
        let mut role = TaskRoleSpec {
            name: name.into(),
            task_number: tasks,
            ..TaskRoleSpec::default()
        };
        role.task.pod = pod;
        role
    }

    fn good_pod() -> serde_json::Value {
        json!({ "spec": { "containers": [{ "name": "main", "image": "ubuntu", "ports": [{ "containerPort": 80 }] }] } })
    }

    fn spec(roles: Vec<TaskRoleSpec>) -> FrameworkSpec {
        FrameworkSpec {
            task_roles: roles,
            ..FrameworkSpec::default()
        }
    }

    #[test]
    fn a_framework_within_the_bounds_is_run() {
        let spec = spec(vec![
            role("ps", 1, good_pod()),
            role("worker", MAX_TASKS - 1, good_pod()),
        ]);
        assert_eq!(refusal(&spec), None);
        assert_eq!(refusal(&FrameworkSpec::default()), None, "no TaskRole");
    }

    #[test]
    fn two_task_roles_of_one_name_are_refused_naming_both() {
        let spec = spec(vec![
            role("worker", 1, good_pod()),
            role("ps", 1, good_pod()),
            role("worker", 2, good_pod()),
        ]);
        let refused = refusal(&spec).expect("refused");
        assert_eq!(
            refused,
            Refusal::DuplicateTaskRole {
                name: "worker".into(),
                first: 0,
                second: 2
            }
        );
        assert_eq!(refused.code().code, cc::FRAMEWORK_SPEC_INVALID.code);
        let message = refused.message();
        assert!(
            message
                .starts_with("spec.taskRoles[0] and spec.taskRoles[2] are both named \"worker\""),
            "{message}"
        );
        assert!(message.contains("hint: give every TaskRole a name of its own"));
    }

    #[test]
    fn more_tasks_in_all_than_the_bound_are_refused_even_if_each_role_is_within_it() {
        let over = spec(vec![
            role("a", MAX_TASKS, good_pod()),
            role("b", 1, good_pod()),
        ]);
        let refused = refusal(&over).expect("refused");
        let tasks = i64::from(MAX_TASKS) + 1;
        assert_eq!(refused, Refusal::TooManyTasks { tasks });
        assert!(
            refused.message().contains(&format!(
                "add up to {tasks} Tasks, more than the {MAX_TASKS}"
            )),
            "{}",
            refused.message()
        );
        // A count the CRD would refuse on its own does not overflow the sum.
        let huge = spec_of_max_counts();
        assert!(matches!(refusal(&huge), Some(Refusal::TooManyTasks { .. })));
        let negative = spec(vec![role("a", -5, good_pod())]);
        assert_eq!(refusal(&negative), None, "a negative count is no Task");
    }

    fn spec_of_max_counts() -> FrameworkSpec {
        spec(
            (0..MAX_TASK_ROLES)
                .map(|i| role(&format!("r{i}"), i32::MAX, good_pod()))
                .collect(),
        )
    }

    #[test]
    fn more_task_roles_than_the_bound_are_refused() {
        let roles = (0..=MAX_TASK_ROLES)
            .map(|i| role(&format!("r{i}"), 0, good_pod()))
            .collect();
        let refused = refusal(&spec(roles)).expect("refused");
        assert_eq!(
            refused,
            Refusal::TooManyTaskRoles {
                roles: MAX_TASK_ROLES + 1
            }
        );
    }

    #[test]
    fn a_pod_template_of_the_wrong_shape_is_refused_naming_the_field() {
        let mut bad = good_pod();
        bad["spec"]["containers"][0]["ports"] = json!("80");
        let spec = spec(vec![role("ps", 1, good_pod()), role("worker", 1, bad)]);
        let refused = refusal(&spec).expect("refused");
        let Refusal::PodTemplate {
            index, role, path, ..
        } = &refused
        else {
            panic!("{refused:?}");
        };
        assert_eq!(
            (*index, role.as_str(), path.as_str()),
            (1, "worker", "spec.containers[0].ports")
        );
        assert_eq!(refused.code().code, cc::POD_CREATION_PERMANENT_ERROR.code);
        assert_eq!(
            refused.message(),
            "the pod template of TaskRole \"worker\" is not a core/v1 PodTemplateSpec: \
             spec.taskRoles[1].task.pod.spec.containers[0].ports: invalid type: string \"80\", \
             expected a sequence; hint: give spec.taskRoles[1].task.pod.spec.containers[0].ports \
             the type `kubectl explain pod.spec.containers.ports` shows, then create the Framework again"
        );
    }

    #[test]
    fn a_template_that_is_no_object_at_all_is_located_at_its_top() {
        let mut bad = good_pod();
        bad["spec"] = json!(["a", "list"]);
        let refused = refusal(&spec(vec![role("worker", 1, bad)])).expect("refused");
        assert!(
            matches!(&refused, Refusal::PodTemplate { path, .. } if path == "spec"),
            "{refused:?}"
        );
        assert!(
            refused
                .message()
                .contains("`kubectl explain pod.spec` shows"),
            "{}",
            refused.message()
        );
    }

    #[test]
    fn what_the_pod_template_reader_accepts_is_not_refused() {
        // Quantities as numbers, unknown fields (a newer API's), placeholders in strings.
        let pod = json!({
            "metadata": { "labels": { "app": "{{FC_TASKROLE_NAME}}" } },
            "spec": {
                "hostname": "{{FC_TASKROLE_NAME}}-{{FC_TASK_INDEX}}",
                "someFutureField": { "x": 1 },
                "containers": [{ "name": "main", "resources": { "limits": { "cpu": 1, "memory": "1Gi" } } }]
            }
        });
        assert_eq!(refusal(&spec(vec![role("worker", 1, pod)])), None);
        assert_eq!(
            refusal(&spec(vec![role("worker", 1, json!({}))])),
            None,
            "an empty template is the API server's to refuse, pod by pod"
        );
    }

    /// A Task's status as large as it gets without its containers' own messages: names as
    /// long as the schema allows, every time, UID and address set, retried often, and failed
    /// by a 63-character container OOM-killed (the longest predefined completion with its pod's
    /// detail).
    fn largest_task(index: i32) -> crate::operator::fc::api::TaskStatus {
        use crate::operator::fc::api::TaskState;
        let (framework, role) = ("f".repeat(63), "r".repeat(63));
        let now = || {
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now())
        };
        let mut task = crate::operator::fc::sync::new_status(
            &spec(vec![role_named(&role, 1)]),
            &framework,
            now(),
            &|| "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9".into(),
        )
        .attempt_status
        .task_role_statuses
        .remove(0)
        .task_statuses
        .remove(0);
        task.index = index;
        task.attempt_status.pod_name =
            crate::operator::fc::objects::pod_name(&framework, &role, index);
        task.state = TaskState::Completed;
        (task.run_time, task.completion_time) = (Some(now()), Some(now()));
        task.retry_policy_status.total_retried_count = i32::MAX;
        task.retry_policy_status.accountable_retried_count = i32::MAX;
        let attempt = &mut task.attempt_status;
        attempt.id = i32::MAX;
        (attempt.run_time, attempt.completion_time) = (Some(now()), Some(now()));
        attempt.instance_uid = Some(format!("{}_{}", i32::MAX, task.instance_uid));
        attempt.pod_uid = Some(task.instance_uid.clone());
        attempt.pod_node_name = Some("n".repeat(63));
        attempt.pod_ip = Some("fd00:1234:5678:9abc:def0:1234:5678:9abc".into());
        attempt.pod_host_ip = attempt.pod_ip.clone();
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
            "status": { "phase": "Failed", "containerStatuses": [{
                "name": "c".repeat(63), "image": "", "imageID": "", "ready": false, "restartCount": 0,
                "state": { "terminated": { "exitCode": 137, "reason": "OOMKilled", "signal": 9 } }
            }] }
        }))
        .unwrap();
        attempt.completion_status = Some(cc::classify_failed(&pod, &BUILTIN.pod_failure));
        task
    }

    fn role_named(name: &str, tasks: i32) -> TaskRoleSpec {
        role(name, tasks, good_pod())
    }

    #[test]
    fn the_status_of_the_most_tasks_fits_in_one_object_with_room_for_the_spec() {
        let one = serde_json::to_string(&largest_task(99_999)).unwrap().len();
        let short =
            cc::FRAMEWORK_ATTEMPT_COMPLETION.task("Stop to complete current FrameworkAttempt");
        let mut stopped = largest_task(99_999);
        stopped.attempt_status.completion_status = Some(short);
        let typical = serde_json::to_string(&stopped).unwrap().len();
        eprintln!("a Task's status: {one} bytes at most, {typical} stopped by its attempt");
        // Per Task, the JSON and the comma between two; of etcd's request limit of 1.5 MiB,
        // the spec, the metadata (a client's last-applied annotation repeats the spec) and the
        // rest of the status keep 384 KiB.
        let tasks = usize::try_from(MAX_TASKS).unwrap() * (one + 1);
        assert!(
            tasks <= 1536 * 1024 - 384 * 1024,
            "{MAX_TASKS} Tasks take {tasks} bytes"
        );
        assert!(
            tasks + usize::try_from(MAX_TASKS).unwrap() * 100 > 1536 * 1024 - 384 * 1024,
            "the bound is measured, not loose: {tasks}"
        );
    }
}
