//! FrameworkBarrier, FrameworkController's init-container extension, as `mlkube
//! framework-barrier`: it waits until every Task the Framework's spec asks for has a pod IP in
//! the status, then writes `framework.json` (the Framework) and `injector.sh`, which exports
//! `FB_{ROLE}_IPS` (the IPs by index) and `FB_{ROLE}_ADDRESSES` (`ip:${FB_{ROLE}_PORT}`, the
//! port the caller sets) for each TaskRole, the role's name upper-cased; both go to the working
//! directory, as FrameworkController's barrier writes them.
//!
//! Its settings come from the environment the controller gives every pod (`FC_FRAMEWORK_NAMESPACE`,
//! `FC_FRAMEWORK_NAME`) and `BARRIER_CHECK_INTERVAL_SEC` (default 10, at least 5) and
//! `BARRIER_CHECK_TIMEOUT_SEC` (default 600, 60 to 1200). Exit codes follow the container
//! contract: 0 passed; 201 (transient conflict: a fancy retry backs off) when the Tasks were not
//! all ready in time; 210 (permanent) for bad settings or a Framework that does not exist; 1
//! for anything else.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use kube::{Api, Client};

use super::api::{Framework, TaskStatus};

pub const PASSED: u8 = 0;
pub const UNKNOWN_FAILURE: u8 = 1;
pub const TIMED_OUT: u8 = 201;
pub const PERMANENT_FAILURE: u8 = 210;

/// What the barrier waits for, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    pub namespace: String,
    pub name: String,
    pub interval: Duration,
    pub timeout: Duration,
}

/// The settings from the environment `var` reads, or what is wrong with them.
pub fn settings(var: impl Fn(&str) -> Option<String>) -> Result<Settings, String> {
    let name = var("FC_FRAMEWORK_NAME").unwrap_or_default();
    if name.is_empty() {
        return Err("FC_FRAMEWORK_NAME is not set: run it in a Framework's pod, or set it".into());
    }
    let seconds = |key: &str, default: u64, range: std::ops::RangeInclusive<u64>| {
        let value = var(key).map_or(Ok(default), |v| v.trim().parse::<u64>());
        match value {
            Ok(n) if range.contains(&n) => Ok(Duration::from_secs(n)),
            _ => Err(format!(
                "{key} must be a number of seconds from {} to {}",
                range.start(),
                range.end()
            )),
        }
    };
    Ok(Settings {
        namespace: var("FC_FRAMEWORK_NAMESPACE").unwrap_or_else(|| "default".into()),
        name,
        interval: seconds("BARRIER_CHECK_INTERVAL_SEC", 10, 5..=u64::MAX)?,
        timeout: seconds("BARRIER_CHECK_TIMEOUT_SEC", 600, 60..=1200)?,
    })
}

/// The pod IPs of every TaskRole's Tasks `0..taskNumber`, once each of them has one and none is
/// pending deletion; `None` until then.
pub fn ready_ips(framework: &Framework) -> Option<BTreeMap<String, Vec<String>>> {
    let roles = framework
        .status
        .as_ref()
        .map(|s| &s.attempt_status.task_role_statuses);
    let mut ips = BTreeMap::new();
    for role in &framework.spec.task_roles {
        let status = roles.and_then(|r| r.iter().find(|s| s.name == role.name));
        let tasks = status.map_or(&[][..], |s| &s.task_statuses[..]);
        let wanted = usize::try_from(role.task_number).unwrap_or(0);
        let found: Vec<String> = tasks.iter().take(wanted).filter_map(ip_of).collect();
        if found.len() < wanted {
            return None;
        }
        ips.insert(role.name.clone(), found);
    }
    Some(ips)
}

fn ip_of(task: &TaskStatus) -> Option<String> {
    let ip = task.attempt_status.pod_ip.as_deref().unwrap_or_default();
    (!task.deletion_pending && !ip.is_empty()).then(|| ip.to_owned())
}

/// `injector.sh`: a script to source that exports each role's IPs and addresses.
pub fn injector(ips: &BTreeMap<String, Vec<String>>) -> String {
    let mut script =
        String::from("#!/bin/sh\necho ./injector.sh: exporting the addresses of the Tasks\n");
    for (role, list) in ips {
        let prefix = format!("FB_{}", role.to_uppercase());
        let addresses: Vec<String> = list
            .iter()
            .map(|ip| format!("{ip}:${{{prefix}_PORT}}"))
            .collect();
        script += &format!("export {prefix}_IPS={}\n", list.join(","));
        script += &format!("export {prefix}_ADDRESSES={}\n", addresses.join(","));
        script += &format!(
            "echo {prefix}_IPS=${{{prefix}_IPS}} {prefix}_ADDRESSES=${{{prefix}_ADDRESSES}}\n"
        );
    }
    script
}

/// Waits at the barrier, writes the two files into `dir` and gives the exit code.
pub async fn run(settings: &Settings, dir: &Path) -> u8 {
    let client = match Client::try_default().await {
        Ok(client) => client,
        Err(error) => {
            return failed(
                UNKNOWN_FAILURE,
                &format!("no client for the cluster: {error}"),
            );
        }
    };
    let frameworks = Api::<Framework>::namespaced(client, &settings.namespace);
    let (name, started) = (&settings.name, Instant::now());
    loop {
        match frameworks.get_opt(name).await {
            Ok(Some(framework)) => {
                if let Some(ips) = ready_ips(&framework) {
                    return write(dir, &framework, &ips);
                }
                eprintln!("framework-barrier: waiting until every Task of {name} has a pod IP");
            }
            Ok(None) => {
                return failed(
                    PERMANENT_FAILURE,
                    &format!("Framework {name} does not exist"),
                );
            }
            Err(error) => eprintln!("framework-barrier: reading Framework {name}: {error}"),
        }
        if started.elapsed() + settings.interval > settings.timeout {
            let waited = settings.timeout.as_secs();
            return failed(
                TIMED_OUT,
                &format!("not every Task of {name} had a pod IP within {waited}s"),
            );
        }
        tokio::time::sleep(settings.interval).await;
    }
}

fn write(dir: &Path, framework: &Framework, ips: &BTreeMap<String, Vec<String>>) -> u8 {
    let json = serde_json::to_string(framework).unwrap_or_default();
    let written = std::fs::write(dir.join("framework.json"), json)
        .and_then(|()| std::fs::write(dir.join("injector.sh"), injector(ips)));
    match written {
        Ok(()) => {
            eprintln!(
                "framework-barrier: passed; wrote framework.json and injector.sh in {}",
                dir.display()
            );
            PASSED
        }
        Err(error) => failed(
            UNKNOWN_FAILURE,
            &format!("writing into {}: {error}", dir.display()),
        ),
    }
}

fn failed(code: u8, message: &str) -> u8 {
    eprintln!("framework-barrier: {message} (exit code {code})");
    code
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn framework(tasks: serde_json::Value) -> Framework {
        let task = |ip: &str, pending: bool| {
            json!({"index": 0, "instanceUID": "u", "startTime": "2026-11-27T00:00:00Z",
                   "state": "AttemptRunning", "transitionTime": "2026-11-27T00:00:00Z",
                   "deletionPending": pending,
                   "retryPolicyStatus": {"totalRetriedCount": 0, "accountableRetriedCount": 0},
                   "attemptStatus": {"id": 0, "startTime": "2026-11-27T00:00:00Z",
                                     "podName": "p", "podIP": ip}})
        };
        let statuses: Vec<_> = tasks
            .as_object()
            .unwrap()
            .iter()
            .map(|(role, list)| {
                let list: Vec<_> = list
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| task(t[0].as_str().unwrap(), t[1].as_bool().unwrap()))
                    .collect();
                json!({"name": role, "instanceUID": "r", "podGracefulDeletionTimeoutSec": null,
                   "taskStatuses": list})
            })
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "frameworkcontroller.microsoft.com/v1", "kind": "Framework",
            "metadata": {"name": "fw"},
            "spec": {"taskRoles": [{"name": "ps", "taskNumber": 1, "task": {"pod": {}}},
                                   {"name": "worker", "taskNumber": 2, "task": {"pod": {}}}]},
            "status": {"startTime": "2026-11-27T00:00:00Z", "state": "AttemptRunning",
                       "transitionTime": "2026-11-27T00:00:00Z",
                       "retryPolicyStatus": {"totalRetriedCount": 0, "accountableRetriedCount": 0},
                       "attemptStatus": {"id": 0, "startTime": "2026-11-27T00:00:00Z",
                                         "configMapName": "fw-attempt",
                                         "taskRoleStatuses": statuses}}
        }))
        .expect("a Framework")
    }

    #[test]
    fn the_barrier_passes_once_every_task_the_spec_asks_for_has_a_pod_ip() {
        let waiting = framework(json!({"ps": [["10.0.0.1", false]],
                                       "worker": [["10.0.0.2", false], ["", false]]}));
        assert_eq!(ready_ips(&waiting), None, "worker 1 has no IP yet");
        let pending = framework(json!({"ps": [["10.0.0.1", false]],
                                       "worker": [["10.0.0.2", false], ["10.0.0.3", true]]}));
        assert_eq!(
            ready_ips(&pending),
            None,
            "a Task pending deletion is not ready"
        );
        let ready = framework(json!({"ps": [["10.0.0.1", false]],
                                     "worker": [["10.0.0.2", false], ["10.0.0.3", false], ["10.0.0.4", false]]}));
        let ips = ready_ips(&ready).expect("every Task of the spec has an IP");
        assert_eq!(
            ips["worker"],
            ["10.0.0.2", "10.0.0.3"],
            "Tasks beyond taskNumber are left out"
        );
        let script = injector(&ips);
        assert!(script.contains("export FB_PS_IPS=10.0.0.1\n"), "{script}");
        assert!(sourced(&script).contains("FB_WORKER_ADDRESSES=10.0.0.2:7000,10.0.0.3:7000"));
        assert!(
            script.contains(
                "export FB_WORKER_ADDRESSES=10.0.0.2:${FB_WORKER_PORT},10.0.0.3:${FB_WORKER_PORT}\n"
            ),
            "{script}"
        );
    }

    /// What `sh` prints sourcing the script with the workers' port set, or a panic with its error.
    fn sourced(script: &str) -> String {
        let output = std::process::Command::new("sh")
            .args(["-c", &format!("FB_WORKER_PORT=7000\n{script}")])
            .output()
            .expect("sh runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success() && stderr.is_empty(),
            "{stderr}\n{script}"
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    #[test]
    fn settings_come_from_the_pods_environment_within_the_barriers_limits() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |key: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let ok = settings(env(&[
            ("FC_FRAMEWORK_NAME", "fw"),
            ("FC_FRAMEWORK_NAMESPACE", "ns"),
        ]));
        let ok = ok.expect("the defaults");
        assert_eq!((ok.interval.as_secs(), ok.timeout.as_secs()), (10, 600));
        assert!(
            settings(env(&[]))
                .unwrap_err()
                .contains("FC_FRAMEWORK_NAME")
        );
        let fast = settings(env(&[
            ("FC_FRAMEWORK_NAME", "fw"),
            ("BARRIER_CHECK_INTERVAL_SEC", "1"),
        ]));
        assert!(
            fast.unwrap_err()
                .contains("BARRIER_CHECK_INTERVAL_SEC must be a number of seconds from 5")
        );
        let long = settings(env(&[
            ("FC_FRAMEWORK_NAME", "fw"),
            ("BARRIER_CHECK_TIMEOUT_SEC", "3600"),
        ]));
        assert!(long.unwrap_err().contains("from 60 to 1200"));
    }
}
