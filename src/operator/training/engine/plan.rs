//! The heart of the operator, and pure: from a defaulted job, the pods and services observed and
//! the current time, compute the new status and the actions that bring the cluster there.
//! `observe` sorts the pods into replica indexes; this decides.
//!
//! # Expected flow
//! A finished job only gets its cleanPodPolicy applied and its TTL checked. A suspended job
//! loses its pods and services. Otherwise every replica index gets a pod and a service; failed
//! pods are restarted or fail the job by their replica's restartPolicy; then the job is
//! Succeeded (the framework decides: for TFJob the Chief/Master, else workers), Failed (a
//! replica failed for good, the backoff limit or the active deadline was passed), Restarting
//! or Running.
//!
//! # Where this differs from upstream, on purpose
//! - A succeeded index is remembered in `replicaStatuses[t].succeededIndexes` and never run
//!   again, even when its pod has been garbage-collected.
//! - Restarts by recreation (ExitCode, OnFailure, Always) are counted in
//!   `replicaStatuses[t].restarts` and count toward `backoffLimit` with the kubelet's container
//!   restarts. The job fails when the total reaches the limit, as upstream does for kubelet
//!   restarts and a Kubernetes Job for its pods (upstream never counts recreations).
//! - Success is decided before failures: a job whose Chief succeeded is Succeeded, whatever
//!   the workers do after.
//! - `replicas: 0` means no pods and no services.
//! - A pod being deleted is neither active nor failed (upstream counts a deleted Running pod as
//!   failed, which failed ExitCode jobs on exit code 137); its index waits until it is gone.
//! - Once the job has ended, `active` counts the pods left: those its cleanPodPolicy deletes
//!   are not active, as in a Kubernetes Job's status (upstream keeps the counts the job had
//!   when it failed). Replicas still running when it succeeded count as succeeded, as
//!   upstream's do, an MPIJob's Workers too (upstream's MPIJob leaves them at 0).
//! - The active deadline returns a requeue at the deadline, and passing it stops the running
//!   and pending pods whatever the cleanPodPolicy, as a Kubernetes Job does and as the field's
//!   upstream documentation says ("before the system tries to terminate it"); the policy then
//!   applies to the rest. Upstream deleted every pod and service at the deadline up to v1.9.3,
//!   and since kubeflow/trainer#3420 deletes only what the policy says, so with the default
//!   `None` its pods outlive the deadline.
//! - Condition messages are upstream's, word for word, then say why: `Evicted`,
//!   `OOMKilled`, `exit code N of container C`; at the backoff limit, how the last run of each
//!   restarted container ended.
//! - A job whose pod and service names would be longer than 63 characters fails at once
//!   (upstream's service create fails every time, and the job stays Created).
//!
//! # Where it follows upstream's fix
//! At the backoff limit the cleanPodPolicy alone decides which pods and services go, as at
//! every other end of a job: with `None` they all stay, and with them the logs that explain
//! the failure (a crash-looping pod keeps being restarted by the kubelet until it or the job is
//! deleted); `Running` deletes the running and pending ones, `All` every one. Upstream deleted
//! them all up to v1.9.3, because it set the Failed condition only after the cleanup
//! (kubeflow/trainer#3419, fixed by #3420).
//!
//! # Assumptions
//! The caller passes only the job's own pods and services (controller owner reference), and
//! marks as being deleted (`deletionTimestamp`) the pods it has deleted but may still see in a
//! stale cache, so a failure is never handled twice.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use super::autoscaling;
use super::build;
use super::conditions::{self as cond, FALSE, TRUE};
use super::observe::{
    self, Deletion, Observation, Observed, ReplicaPods, Slot, failure_reason, phase, terminating,
};
use crate::operator::runtime::metrics::Transition;
use crate::operator::training::api::{
    CleanPodPolicy, JobStatus, ReplicaStatus, RestartPolicy, RunPolicy,
};
use crate::operator::training::framework::{Event, Outcome, ReplicaType, TrainingJob};

/// The outcome of one reconcile.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    pub status: JobStatus,
    pub create_pods: Vec<(ReplicaType, i32)>,
    pub delete_pods: Vec<Deletion>,
    pub create_services: Vec<(ReplicaType, i32)>,
    pub delete_services: Vec<String>,
    pub events: Vec<Event>,
    pub transitions: Vec<Transition>,
    /// The TTL after finishing has passed: delete the job itself.
    pub delete_job: bool,
    /// Reconcile again after this long even if nothing happens (deadline, TTL).
    pub requeue_after: Option<Duration>,
}

impl Plan {
    fn record(&mut self, warning: bool, reason: String, message: String) {
        self.events.push(Event {
            warning,
            reason,
            message,
            occurrence: None,
        });
    }
}

/// What the replicas add up to, for the decision.
#[derive(Default)]
struct Tally<'a> {
    /// Per replica type, its restart policy and the indexes that failed for good, with why.
    permanent_failures: Vec<(ReplicaType, RestartPolicy, Vec<String>)>,
    /// Failed pods to delete and run again, with why, as a condition message says it:
    /// `worker 1: exit code 1 of container tensorflow`.
    restarts_wanted: Vec<(ReplicaType, &'a Pod, String)>,
    /// Restarts so far, by the operator and by the kubelet.
    restart_total: i32,
    /// Why the replicas seen now were (or are about to be) restarted, e.g.
    /// `worker 0: exit code 1 of container tensorflow`.
    restart_reasons: Vec<String>,
    /// Replicas that will not start without help.
    stuck: Vec<String>,
}

/// The job as a reconcile sees it: its names and run policy.
struct Job<'a, J> {
    job: &'a J,
    name: String,
    kind: &'static str,
    clean_pod_policy: CleanPodPolicy,
}

impl<J: TrainingJob> Job<'_, J> {
    fn reason(&self, what: &str) -> String {
        J::FRAMEWORK.reason(what)
    }

    fn run_policy(&self) -> crate::operator::training::api::RunPolicy {
        self.job.run_policy().cloned().unwrap_or_default()
    }
}

/// Compute the status and actions of one reconcile. `job` must be defaulted.
pub fn plan<J: TrainingJob>(job: &J, observed: Observed<'_>, now: &Time) -> Plan {
    let mut plan = Plan {
        status: job.status().cloned().unwrap_or_default(),
        ..Plan::default()
    };
    let name = job.name_any();
    let run_policy = job.run_policy().cloned().unwrap_or_default();
    let job = Job {
        job,
        name,
        kind: J::FRAMEWORK.kind,
        clean_pod_policy: run_policy.clean_pod_policy.unwrap_or(CleanPodPolicy::None),
    };

    if cond::is_finished(&plan.status) {
        finished(&job, observed, now, &mut plan);
        return plan;
    }
    if plan.status.conditions.is_empty() {
        mark_created(&job, now, &mut plan);
    }
    if run_policy.suspend == Some(true) {
        suspend(&job, observed, now, &mut plan);
        return plan;
    }
    if let Some(longest) = name_too_long(job.job) {
        let message = format!(
            "{} {} has failed because its name is too long: pod and service {longest} would have {} characters, more than {MAX_NAME}",
            job.kind,
            job.name,
            longest.len()
        );
        fail(&job, observed, now, &mut plan, message, Stop::RunningPods);
        return plan;
    }
    if cond::is_true(&plan.status, cond::SUSPENDED) {
        mark_resumed(&job, now, &mut plan);
    }
    if plan.status.start_time.is_none() {
        plan.status.start_time = Some(now.clone());
    }

    let observation = observe::observe(job.job, observed);
    let tally = tally(&job, &observation, &mut plan);
    hold_back(job.job, &mut plan);
    decide(&job, observed, now, tally, &mut plan);
    autoscaling::check(job.job, now, &mut plan.status.conditions, &mut plan.events);
    plan.events.extend(job.job.pod_state_events(observed.pods));
    plan
}

/// A job seen for the first time: its Created condition, and the transition the metrics count.
fn mark_created<J: TrainingJob>(job: &Job<'_, J>, now: &Time, plan: &mut Plan) {
    let message = format!("{} {} is created.", job.kind, job.name);
    cond::set(
        &mut plan.status,
        cond::CREATED,
        TRUE,
        &job.reason("Created"),
        &message,
        now,
    );
    plan.transitions.push(Transition::Created);
}

/// A suspended job no longer suspended: Suspended=False, and its start time is now, so the
/// active deadline counts from the resumption.
fn mark_resumed<J: TrainingJob>(job: &Job<'_, J>, now: &Time, plan: &mut Plan) {
    let message = format!("{} {} is resumed.", job.kind, job.name);
    let reason = job.reason("Resumed");
    cond::set(
        &mut plan.status,
        cond::SUSPENDED,
        FALSE,
        &reason,
        &message,
        now,
    );
    plan.status.start_time = Some(now.clone());
    plan.record(false, reason, message);
}

/// Leave out the pods the framework holds back for now (MPIJob's Launcher, until its Workers
/// run), and the services of a framework without them.
fn hold_back<J: TrainingJob>(job: &J, plan: &mut Plan) {
    let status = &plan.status;
    plan.create_pods
        .retain(|&(rtype, _)| !job.holds_back(rtype, status));
    if !job.has_services() {
        plan.create_services.clear();
    }
}

/// Count every replica type: its status, the pods and services to create and delete, and
/// what failed.
fn tally<'a, J: TrainingJob>(
    job: &Job<'_, J>,
    observation: &Observation<'a>,
    plan: &mut Plan,
) -> Tally<'a> {
    plan.delete_pods.extend(observation.strays.iter().cloned());
    let mut tally = Tally::default();
    for replica in &observation.replicas {
        let status = tally_replica(job, replica, plan, &mut tally);
        plan.status
            .replica_statuses
            .insert(replica.rtype.key().to_owned(), status);
    }
    tally
}

/// One replica type's status; its pods and services to create and delete go into the plan,
/// its failures and restarts into the tally.
fn tally_replica<'a, J: TrainingJob>(
    job: &Job<'_, J>,
    replica: &ReplicaPods<'a>,
    plan: &mut Plan,
    tally: &mut Tally<'a>,
) -> ReplicaStatus {
    let rtype = replica.rtype;
    let previous = plan
        .status
        .replica_statuses
        .get(rtype.key())
        .cloned()
        .unwrap_or_default();
    let mut succeeded_indexes: BTreeSet<i32> = previous.succeeded_indexes.iter().copied().collect();
    let mut status = fresh_status(job, rtype, previous.restarts);
    tally.restart_total += previous.restarts;
    plan.delete_pods
        .extend(replica.surplus_pods.iter().cloned());
    plan.delete_services
        .extend(replica.surplus_services.iter().cloned());

    let policy = replica.spec.restart_policy.unwrap_or(RestartPolicy::Never);
    let mut failures = Vec::new();
    for &(index, slot) in &replica.slots {
        let remembered = succeeded_indexes.contains(&index);
        let pod = match slot {
            Slot::Empty if !remembered => {
                plan.create_pods.push((rtype, index));
                continue;
            }
            Slot::Empty | Slot::Leaving => continue,
            Slot::Pod(pod) => pod,
        };
        match phase(pod) {
            "Succeeded" => {
                succeeded_indexes.insert(index);
            }
            "Failed" if remembered => {}
            "Failed" => {
                if let Some(failure) = tally_failed(job, (rtype, index), pod, policy, plan, tally) {
                    status.failed += 1;
                    failures.push(failure);
                }
            }
            "Running" => {
                status.active += 1;
                tally_running::<J>((rtype, index), pod, policy, tally);
            }
            _ => tally_pending(job, (rtype, index), pod, plan, tally),
        }
    }
    plan.create_services
        .extend(replica.missing_services.iter().map(|&index| (rtype, index)));
    status.succeeded = succeeded_count(&succeeded_indexes, replica.replicas);
    status.succeeded_indexes = succeeded_indexes.into_iter().collect();
    if !failures.is_empty() {
        tally.permanent_failures.push((rtype, policy, failures));
    }
    status
}

/// A replica type's status before its pods are counted: its selector where upstream writes
/// one, and the restarts so far.
fn fresh_status<J: TrainingJob>(
    job: &Job<'_, J>,
    rtype: ReplicaType,
    restarts: i32,
) -> ReplicaStatus {
    ReplicaStatus {
        restarts,
        selector: J::FRAMEWORK
            .status_selector
            .then(|| build::selector(J::FRAMEWORK, &job.name, rtype)),
        ..ReplicaStatus::default()
    }
}

/// A failed pod of replica `index` of type `rtype`: its Warning event, then a restart if its
/// restart policy runs it again. Else it failed for good: its part of the condition message.
fn tally_failed<'a, J: TrainingJob>(
    job: &Job<'_, J>,
    (rtype, index): (ReplicaType, i32),
    pod: &'a Pod,
    policy: RestartPolicy,
    plan: &mut Plan,
    tally: &mut Tally<'a>,
) -> Option<String> {
    let why = failure_reason(pod, J::FRAMEWORK.container);
    plan.events.push(failure_event(job, pod, &why));
    if retries(policy, pod, J::FRAMEWORK.container) {
        let part = replica_why(rtype, index, &why);
        tally.restart_reasons.push(part.clone());
        tally.restarts_wanted.push((rtype, pod, part));
        None
    } else {
        Some(replica_why(rtype, index, &why))
    }
}

/// A running pod: the kubelet's restarts of its containers count toward the backoff limit
/// (unless its restart policy is `Never`), and a container that will not start is stuck.
fn tally_running<J: TrainingJob>(
    (rtype, index): (ReplicaType, i32),
    pod: &Pod,
    policy: RestartPolicy,
    tally: &mut Tally<'_>,
) {
    if policy != RestartPolicy::Never {
        tally.restart_total += observe::kubelet_restarts(pod);
        if let Some(why) = observe::last_exit(pod, J::FRAMEWORK.container) {
            tally.restart_reasons.push(replica_why(rtype, index, &why));
        }
    }
    if let Some((reason, container)) = observe::stuck_reason(pod) {
        tally.stuck.push(format!(
            "{} {index}: {reason} in container {container}",
            rtype.lower()
        ));
    }
}

/// A pod not running yet: a Warning event, once, for a container that waits and will not start
/// without help (it is also stuck), and upstream's event for a pod the scheduler cannot place.
fn tally_pending<J: TrainingJob>(
    job: &Job<'_, J>,
    (rtype, index): (ReplicaType, i32),
    pod: &Pod,
    plan: &mut Plan,
    tally: &mut Tally<'_>,
) {
    if let Some((reason, container)) = observe::stuck_reason(pod) {
        plan.events.push(Event {
            warning: true,
            reason: reason.clone(),
            message: format!(
                "Pod: {}.{}: container {container} is waiting: {reason}",
                job.job.namespace().unwrap_or_default(),
                pod.name_any()
            ),
            // A pending pod's container waits once: it starts, or the pod goes.
            occurrence: Some(format!("{}/{container}", pod.uid().unwrap_or_default())),
        });
        tally.stuck.push(format!(
            "{} {index}: {reason} in container {container}",
            rtype.lower()
        ));
    }
    plan.events.extend(not_scheduled_event(pod));
}

/// How many of the succeeded indexes the replica type still has: those of replicas scaled
/// away since are remembered, but no longer counted.
fn succeeded_count(succeeded_indexes: &BTreeSet<i32>, replicas: i32) -> i32 {
    i32::try_from(succeeded_indexes.iter().filter(|&&i| i < replicas).count()).unwrap_or(i32::MAX)
}

/// One replica's part in a condition message: `worker 0: exit code 1 of container tensorflow`.
fn replica_why(rtype: ReplicaType, index: i32, why: &str) -> String {
    format!("{} {index}: {why}", rtype.lower())
}

/// Upstream's condition message, then ours: why, replica by replica.
fn explained(upstream: String, reasons: &[String]) -> String {
    if reasons.is_empty() {
        return upstream;
    }
    format!("{upstream} {}", reasons.join("; "))
}

/// Whether a failed pod is run again under its replica's restart policy.
fn retries(policy: RestartPolicy, pod: &Pod, container: &str) -> bool {
    match policy {
        RestartPolicy::Never => false,
        RestartPolicy::OnFailure | RestartPolicy::Always => true,
        RestartPolicy::ExitCode => {
            observe::exit_code(pod, container).is_none_or(|code| code >= 128)
        }
    }
}

/// The Warning event of a failed pod, named for how it failed.
fn failure_event<J: TrainingJob>(job: &Job<'_, J>, pod: &Pod, why: &str) -> Event {
    let reason = match observe::exit_code(pod, J::FRAMEWORK.container) {
        Some(_) if why.starts_with("OOMKilled") => "OOMKilled".to_owned(),
        Some(_) => "ExitedWithCode".to_owned(),
        None => pod
            .status
            .as_ref()
            .and_then(|s| s.reason.clone())
            .unwrap_or_else(|| "PodFailed".to_owned()),
    };
    Event {
        warning: true,
        reason,
        message: format!(
            "Pod: {}.{} failed: {why}",
            job.job.namespace().unwrap_or_default(),
            pod.name_any()
        ),
        occurrence: None,
    }
}

/// Upstream's event for a pod the scheduler cannot place, word for word: its condition's
/// reason (`Unschedulable`) and message. One occurrence per pod and transition of the
/// condition: a pod created again, or scheduled and then not, is another.
fn not_scheduled_event(pod: &Pod) -> Option<Event> {
    let condition = observe::not_scheduled(pod)?;
    let since = condition
        .last_transition_time
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default();
    Some(Event {
        warning: true,
        reason: condition
            .reason
            .clone()
            .unwrap_or_else(|| "Unschedulable".to_owned()),
        message: format!(
            "Error pod {} condition message: {}",
            pod.name_any(),
            condition.message.as_deref().unwrap_or_default()
        ),
        occurrence: Some(format!("{}@{since}", pod.uid().unwrap_or_default())),
    })
}

/// Decide the job's state from the tally: success first, then a failure for good, the backoff
/// limit, the active deadline, restarts, and running.
fn decide<J: TrainingJob>(
    job: &Job<'_, J>,
    observed: Observed<'_>,
    now: &Time,
    tally: Tally<'_>,
    plan: &mut Plan,
) {
    // Success first: a job whose Chief (or workers) succeeded is done, whatever else failed.
    if job.job.succeeded(&plan.status) {
        succeed(job, observed, now, plan);
        return;
    }

    if let Some(message) = failed_for_good(job, &tally) {
        fail(job, observed, now, plan, message, Stop::ByPolicy);
        return;
    }

    let run_policy = job.run_policy();
    if let Some(message) = past_backoff_limit(job, &run_policy, &tally) {
        fail(job, observed, now, plan, message, Stop::ByPolicy);
        return;
    }

    if let Some(message) = past_deadline(job, &run_policy, &tally, now, plan) {
        fail(job, observed, now, plan, message, Stop::RunningPods);
        return;
    }

    if !tally.restarts_wanted.is_empty() {
        restart(job, &tally.restarts_wanted, now, plan);
        return;
    }

    if job.job.running(&plan.status) {
        let message = job.job.message(Outcome::Running);
        cond::set(
            &mut plan.status,
            cond::RUNNING,
            TRUE,
            &job.reason("Running"),
            &message,
            now,
        );
    }
}

/// Mark the job Succeeded and finish it: nothing more is created, and the cleanPodPolicy and
/// the TTL apply.
fn succeed<J: TrainingJob>(job: &Job<'_, J>, observed: Observed<'_>, now: &Time, plan: &mut Plan) {
    let message = job.job.message(Outcome::Succeeded);
    let reason = job.reason("Succeeded");
    cond::set(
        &mut plan.status,
        cond::SUCCEEDED,
        TRUE,
        &reason,
        &message,
        now,
    );
    plan.status.completion_time = Some(now.clone());
    plan.record(false, reason, message);
    plan.transitions.push(Transition::Succeeded);
    plan.create_pods.clear();
    plan.create_services.clear();
    finished(job, observed, now, plan);
}

/// The Failed condition's message when a replica type whose failures the job does not tolerate
/// failed for good.
fn failed_for_good<J: TrainingJob>(job: &Job<'_, J>, tally: &Tally<'_>) -> Option<String> {
    let &(rtype, policy, ref failures) = tally
        .permanent_failures
        .iter()
        .find(|(rtype, _, _)| !job.job.tolerates_failures_of(*rtype))?;
    // Upstream words a failure by exit code in its shared pod handling, and that message
    // stays: a condition is not rewritten with the same reason.
    let upstream = if policy == RestartPolicy::ExitCode {
        format!(
            "job \"{}\" is failing because \"{rtype}\" replica(s) failed.",
            job.name
        )
    } else {
        job.job.message(Outcome::Failed {
            replicas: failures.len(),
            rtype,
        })
    };
    Some(explained(upstream, failures))
}

/// The Failed condition's message when the restarts so far and those wanted now reach the
/// backoff limit.
fn past_backoff_limit<J: TrainingJob>(
    job: &Job<'_, J>,
    run_policy: &RunPolicy,
    tally: &Tally<'_>,
) -> Option<String> {
    let wanted = i32::try_from(tally.restarts_wanted.len()).unwrap_or(i32::MAX);
    let restarts = tally.restart_total.saturating_add(wanted);
    let limit = run_policy.backoff_limit?;
    if restarts <= 0 || restarts < limit {
        return None;
    }
    let upstream = format!(
        "Job {} has failed because it has reached the specified backoff limit: {restarts} restarts, limit {limit}.",
        job.name,
    );
    Some(explained(upstream, &tally.restart_reasons))
}

/// The Failed condition's message once the active deadline has passed; until then, a requeue
/// at the deadline goes into the plan.
fn past_deadline<J: TrainingJob>(
    job: &Job<'_, J>,
    run_policy: &RunPolicy,
    tally: &Tally<'_>,
    now: &Time,
    plan: &mut Plan,
) -> Option<String> {
    let deadline = run_policy.active_deadline_seconds?;
    let start = plan.status.start_time.clone()?;
    let elapsed = seconds_between(&start, now);
    if elapsed >= deadline {
        let mut message = format!(
            "Job {} has failed because it was active longer than specified deadline",
            job.name
        );
        if !tally.stuck.is_empty() {
            message.push_str(&format!(" (stuck: {})", tally.stuck.join("; ")));
        }
        return Some(message);
    }
    let left = u64::try_from(deadline - elapsed).unwrap_or(0);
    plan.requeue_after = Some(Duration::from_secs(left));
    None
}

/// Delete the failed pods that run again, count the restarts, and mark the job Restarting in
/// the words of upstream's controller of the job's kind, then why, replica by replica.
fn restart<J: TrainingJob>(
    job: &Job<'_, J>,
    restarts_wanted: &[(ReplicaType, &Pod, String)],
    now: &Time,
    plan: &mut Plan,
) {
    for (rtype, pod, _) in restarts_wanted {
        plan.delete_pods.push(Deletion::of(pod));
        if let Some(status) = plan.status.replica_statuses.get_mut(rtype.key()) {
            status.restarts += 1;
            status.failed += 1;
        }
        plan.transitions.push(Transition::Restarted);
    }
    let Some(rtype) = restarts_wanted.iter().map(|(rtype, _, _)| *rtype).min() else {
        return;
    };
    // Upstream counts every failed pod of the type, those failed for good that it tolerates too.
    let failed = plan
        .status
        .replica_statuses
        .get(rtype.key())
        .map_or(0, |s| s.failed);
    let upstream = job.job.message(Outcome::Restarting {
        replicas: usize::try_from(failed).unwrap_or_default(),
        rtype,
    });
    let reasons: Vec<String> = restarts_wanted
        .iter()
        .map(|(_, _, why)| why.clone())
        .collect();
    let message = explained(upstream, &reasons);
    let reason = job.reason("Restarting");
    cond::set(
        &mut plan.status,
        cond::RESTARTING,
        TRUE,
        &reason,
        &message,
        now,
    );
    plan.record(true, reason, message);
}

/// The most characters a pod's or service's name may have (a DNS-1035 label, for the service).
pub const MAX_NAME: usize = 63;

/// The longest of the job's pod and service names, if it is too long for a service.
fn name_too_long<J: TrainingJob>(job: &J) -> Option<String> {
    job.replicas()
        .map(|(rtype, spec)| job.pod_name(rtype, spec.replicas.unwrap_or(1).max(1) - 1))
        .max_by_key(String::len)
        .filter(|longest| longest.len() > MAX_NAME)
}

fn seconds_between(from: &Time, to: &Time) -> i64 {
    to.0.as_second() - from.0.as_second()
}

/// Which pods a failure deletes before the cleanPodPolicy applies to the rest.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// None: the policy alone decides, as at every end of a job (a replica failed for good,
    /// the backoff limit).
    ByPolicy,
    /// The running and pending ones, whatever the policy: the job must not run on (the active
    /// deadline, a name too long for its services).
    RunningPods,
}

/// Mark the job Failed, stop what `stop` says, and clean up as a finished job.
fn fail<J: TrainingJob>(
    job: &Job<'_, J>,
    observed: Observed<'_>,
    now: &Time,
    plan: &mut Plan,
    message: String,
    stop: Stop,
) {
    let reason = job.reason("Failed");
    cond::set(&mut plan.status, cond::FAILED, TRUE, &reason, &message, now);
    plan.status.completion_time = Some(now.clone());
    // A Normal event, as upstream records it (the pods' failures before it are Warnings).
    plan.record(false, reason, message);
    plan.transitions.push(Transition::Failed);
    plan.create_pods.clear();
    plan.create_services.clear();
    plan.delete_pods.clear();
    if stop == Stop::RunningPods {
        for pod in observed
            .pods
            .iter()
            .filter(|p| !terminating(p) && matches!(phase(p), "Running" | "Pending"))
        {
            plan.delete_pods.push(Deletion::of(pod));
        }
    }
    // Every policy but None deletes the running pods too.
    if stop == Stop::RunningPods || job.clean_pod_policy != CleanPodPolicy::None {
        for status in plan.status.replica_statuses.values_mut() {
            status.active = 0;
        }
    }
    finished(job, observed, now, plan);
}

/// A finished job: apply the cleanPodPolicy, count Succeeded jobs' active replicas as
/// succeeded, and check the TTL.
fn finished<J: TrainingJob>(job: &Job<'_, J>, observed: Observed<'_>, now: &Time, plan: &mut Plan) {
    clean_up(job.clean_pod_policy, observed, plan);
    if cond::is_true(&plan.status, cond::SUCCEEDED) {
        for status in plan.status.replica_statuses.values_mut() {
            status.succeeded += status.active;
            status.active = 0;
        }
    }
    let ttl = job.run_policy().ttl_seconds_after_finished;
    if let (Some(ttl), Some(done)) = (ttl, plan.status.completion_time.as_ref()) {
        let left = i64::from(ttl) - seconds_between(done, now);
        if left <= 0 {
            plan.delete_job = true;
        } else {
            plan.requeue_after = Some(Duration::from_secs(u64::try_from(left).unwrap_or(0)));
        }
    }
}

/// The pods and services the cleanPodPolicy deletes once the job finished.
fn clean_up(policy: CleanPodPolicy, observed: Observed<'_>, plan: &mut Plan) {
    let doomed = |pod: &Pod| match policy {
        CleanPodPolicy::All => true,
        CleanPodPolicy::Running => matches!(phase(pod), "Running" | "Pending"),
        CleanPodPolicy::None => false,
    };
    for pod in observed
        .pods
        .iter()
        .filter(|p| !terminating(p) && doomed(p))
    {
        if !plan.delete_pods.iter().any(|d| d.name == pod.name_any()) {
            plan.delete_pods.push(Deletion::of(pod));
        }
    }
    for service in observed.services {
        let name = service.name_any();
        let goes = match policy {
            CleanPodPolicy::All => true,
            CleanPodPolicy::Running => plan.delete_pods.iter().any(|d| d.name == name),
            CleanPodPolicy::None => false,
        };
        if goes && !plan.delete_services.contains(&name) {
            plan.delete_services.push(name);
        }
    }
}

/// A suspended job: no pods, no services, Running=False and Suspended=True.
fn suspend<J: TrainingJob>(job: &Job<'_, J>, observed: Observed<'_>, now: &Time, plan: &mut Plan) {
    for pod in observed.pods.iter().filter(|p| !terminating(p)) {
        plan.delete_pods.push(Deletion::of(pod));
    }
    plan.delete_services
        .extend(observed.services.iter().map(ResourceExt::name_any));
    for status in plan.status.replica_statuses.values_mut() {
        status.active = 0;
    }
    let message = format!("{} {} is suspended.", job.kind, job.name);
    let reason = job.reason("Suspended");
    cond::set_false_if_present(&mut plan.status, cond::RUNNING, &reason, &message, now);
    cond::set_false_if_present(&mut plan.status, cond::RESTARTING, &reason, &message, now);
    if cond::set(
        &mut plan.status,
        cond::SUSPENDED,
        TRUE,
        &reason,
        &message,
        now,
    ) {
        plan.record(false, reason, message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::training::fixtures::{at, job, pod};
    use crate::operator::training::frameworks::tensorflow::{self, SuccessPolicy, TFJob};
    use k8s_openapi::api::core::v1::Service;

    const W: ReplicaType = tensorflow::WORKER;
    const PS: ReplicaType = tensorflow::PS;
    const CHIEF: ReplicaType = tensorflow::CHIEF;

    fn run(job: &TFJob, pods: &[Pod], now: i64) -> Plan {
        let services: Vec<Service> = job
            .replicas()
            .flat_map(|(t, r)| (0..r.replicas.unwrap_or(1)).map(move |i| (t, i)))
            .map(|(t, i)| build::service(job, t, i))
            .collect();
        plan(
            job,
            Observed {
                pods,
                services: &services,
            },
            &at(now),
        )
    }

    /// The plan applied: the job with the new status, as the next reconcile sees it.
    fn after(mut job: TFJob, plan: &Plan) -> TFJob {
        job.status = Some(plan.status.clone());
        job
    }

    fn last(plan: &Plan) -> (&str, &str) {
        let c = plan.status.conditions.last().unwrap();
        (c.type_.as_str(), c.status.as_str())
    }

    fn message(plan: &Plan) -> &str {
        plan.status
            .conditions
            .last()
            .unwrap()
            .message
            .as_deref()
            .unwrap()
    }

    #[test]
    fn a_new_job_gets_created_condition_and_every_pod_and_service() {
        let job = job("j").replica("Worker", 2).replica("PS", 1).build();
        let plan = plan(
            &job,
            Observed {
                pods: &[],
                services: &[],
            },
            &at(0),
        );
        assert_eq!(last(&plan), ("Created", "True"));
        assert_eq!(plan.create_pods, [(PS, 0), (W, 0), (W, 1)]);
        assert_eq!(plan.create_services.len(), 3);
        assert_eq!(plan.status.start_time, Some(at(0)));
        assert_eq!(plan.transitions, [Transition::Created]);
    }

    #[test]
    fn running_when_the_workers_run() {
        let job = job("j").replica("Worker", 2).replica("PS", 1).build();
        let pods = [
            pod(&job, W, 0).running().build(),
            pod(&job, W, 1).running().build(),
            pod(&job, PS, 0).running().build(),
        ];
        let plan = run(&job, &pods, 1);
        assert!(
            plan.create_pods.is_empty()
                && plan.create_services.is_empty()
                && plan.delete_pods.is_empty()
        );
        assert_eq!(last(&plan), ("Running", "True"));
        assert_eq!(plan.status.replica_statuses["Worker"].active, 2);
        assert_eq!(plan.status.replica_statuses["PS"].active, 1);
    }

    #[test]
    fn a_tfjobs_replica_status_has_no_selector_as_upstreams() {
        let job = job("j").replica("Worker", 1).build();
        let plan = run(&job, &[pod(&job, W, 0).running().build()], 1);
        let worker = &plan.status.replica_statuses["Worker"];
        assert_eq!((worker.active, worker.selector.as_deref()), (1, None));
        assert_eq!(worker.label_selector, None);
    }

    #[test]
    fn worker_zero_succeeding_completes_the_job_by_default() {
        let job = job("j").replica("Worker", 2).replica("PS", 1).build();
        let pods = [
            pod(&job, W, 0).succeeded().build(),
            pod(&job, W, 1).running().build(),
            pod(&job, PS, 0).running().build(),
        ];
        let plan = run(&job, &pods, 5);
        assert_eq!(last(&plan), ("Succeeded", "True"));
        assert_eq!(plan.status.completion_time, Some(at(5)));
        assert!(plan.transitions.contains(&Transition::Succeeded));
        // cleanPodPolicy None: nothing is deleted.
        assert!(plan.delete_pods.is_empty());
    }

    #[test]
    fn all_workers_success_policy_waits_for_every_worker() {
        let mut job = job("j").replica("Worker", 2).build();
        job.spec.success_policy = Some(SuccessPolicy::AllWorkers);
        let pods = [
            pod(&job, W, 0).succeeded().build(),
            pod(&job, W, 1).running().build(),
        ];
        assert_eq!(last(&run(&job, &pods, 1)), ("Running", "True"));
        let pods = [
            pod(&job, W, 0).succeeded().build(),
            pod(&job, W, 1).succeeded().build(),
        ];
        assert_eq!(last(&run(&job, &pods, 1)), ("Succeeded", "True"));
    }

    #[test]
    fn with_a_chief_only_the_chief_decides() {
        let job = job("j").replica("Chief", 1).replica("Worker", 2).build();
        let pods = [
            pod(&job, CHIEF, 0).running().build(),
            pod(&job, W, 0).succeeded().build(),
            pod(&job, W, 1).succeeded().build(),
        ];
        assert_eq!(last(&run(&job, &pods, 1)), ("Running", "True"));
    }

    #[test]
    fn regression_chief_succeeded_wins_over_worker_failures() {
        let job = job("j").replica("Chief", 1).replica("Worker", 2).build();
        let pods = [
            pod(&job, CHIEF, 0).succeeded().build(),
            pod(&job, W, 0).failed(1).build(),
            pod(&job, W, 1).running().build(),
        ];
        let plan = run(&job, &pods, 1);
        assert_eq!(last(&plan), ("Succeeded", "True"));
        // And a worker failing after the job succeeded changes nothing.
        let job = after(job, &plan);
        let pods = [
            pod(&job, CHIEF, 0).succeeded().build(),
            pod(&job, W, 0).failed(1).build(),
            pod(&job, W, 1).failed(2).build(),
        ];
        let later = run(&job, &pods, 2);
        assert_eq!(later.status.conditions, plan.status.conditions);
        assert!(later.create_pods.is_empty());
    }

    #[test]
    fn never_policy_failure_fails_the_job_with_the_exit_code_and_container() {
        let job = job("j").replica("Worker", 2).build();
        let pods = [
            pod(&job, W, 0).running().build(),
            pod(&job, W, 1).failed(3).build(),
        ];
        let plan = run(&job, &pods, 1);
        assert_eq!(last(&plan), ("Failed", "True"));
        assert_eq!(
            plan.status.conditions.last().unwrap().reason.as_deref(),
            Some("TFJobFailed")
        );
        assert_eq!(
            message(&plan),
            "TFJob ns/j has failed because 1 Worker replica(s) failed. worker 1: exit code 3 of container tensorflow"
        );
        assert!(plan.events.iter().any(|e| e.reason == "ExitedWithCode"));
        let failed = plan.events.iter().find(|e| e.reason == "TFJobFailed");
        assert!(
            failed.is_some_and(|e| !e.warning),
            "the job's failure is a Normal event, as upstream's: {failed:?}"
        );
    }

    #[test]
    fn failure_reason_says_oomkilled_and_evicted() {
        let job = job("j").replica("Worker", 2).build();
        let oom = pod(&job, W, 1).failed(137).build();
        assert_eq!(
            failure_reason(&oom, "tensorflow"),
            "OOMKilled: exit code 137 of container tensorflow"
        );
        let evicted = pod(&job, W, 1).failed_by("Evicted").build();
        assert!(failure_reason(&evicted, "tensorflow").starts_with("Evicted: "));
        let plan = run(&job, &[pod(&job, W, 0).running().build(), oom], 1);
        assert!(message(&plan).contains("OOMKilled"), "{}", message(&plan));
        assert!(plan.events.iter().any(|e| e.reason == "OOMKilled"));
    }

    #[test]
    fn a_pod_the_scheduler_cannot_place_is_an_event_per_occurrence_in_upstreams_words() {
        let job = job("j").replica("Worker", 2).build();
        let why = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.";
        let pending =
            |uid: &str, since: i64| pod(&job, W, 0).uid(uid).unschedulable(why, since).build();
        let events = |pods: &[Pod]| {
            run(&job, pods, 10)
                .events
                .into_iter()
                .filter(|e| e.reason == "Unschedulable")
                .collect::<Vec<_>>()
        };
        let first = events(&[pending("a", 1), pod(&job, W, 1).running().build()]);
        assert_eq!(
            first,
            [Event {
                warning: true,
                reason: "Unschedulable".into(),
                message: format!("Error pod j-worker-0 condition message: {why}"),
                occurrence: first[0].occurrence.clone(),
            }]
        );
        let occurrence = |pods: &[Pod]| events(pods)[0].occurrence.clone().unwrap();
        let seen = occurrence(&[pending("a", 1)]);
        assert_eq!(seen, occurrence(&[pending("a", 1)]), "the same state");
        assert_ne!(seen, occurrence(&[pending("b", 1)]), "another pod");
        assert_ne!(seen, occurrence(&[pending("a", 5)]), "another transition");
        let scheduled = pod(&job, W, 0).build();
        assert!(events(&[scheduled]).is_empty());
    }

    #[test]
    fn image_pull_backoff_is_reported_as_an_event_and_in_the_deadline_failure() {
        let job = job("j")
            .replica("Worker", 2)
            .run_policy(|r| r.active_deadline_seconds = Some(60))
            .build();
        let pods = [
            pod(&job, W, 0).waiting("ImagePullBackOff").build(),
            pod(&job, W, 1).running().build(),
        ];
        let plan = run(&job, &pods, 10);
        assert!(
            plan.events
                .iter()
                .any(|e| e.reason == "ImagePullBackOff" && e.warning)
        );
        // One occurrence per pod: the same pod seen again is the same, a new pod another.
        let occurrence = |pod: Pod| {
            run(&job, &[pod], 10)
                .events
                .into_iter()
                .find(|e| e.reason == "ImagePullBackOff")
                .and_then(|e| e.occurrence)
                .expect("a stuck container is a state with its occurrence")
        };
        let stuck = |uid: &str| pod(&job, W, 0).uid(uid).waiting("ImagePullBackOff").build();
        assert_eq!(occurrence(stuck("a")), occurrence(stuck("a")));
        assert_ne!(occurrence(stuck("a")), occurrence(stuck("b")));
        let job = after(job, &plan);
        let plan = run(&job, &pods, 100);
        assert_eq!(last(&plan), ("Failed", "True"));
        assert!(
            message(&plan).contains("ImagePullBackOff in container tensorflow"),
            "{}",
            message(&plan)
        );
    }

    #[test]
    fn exit_code_policy_restarts_retryable_codes_and_fails_on_program_errors() {
        let job = job("j")
            .replica("Worker", 2)
            .restart("Worker", RestartPolicy::ExitCode)
            .build();
        let pods = [
            pod(&job, W, 0).running().build(),
            pod(&job, W, 1).failed(137).uid("u1").build(),
        ];
        let plan = run(&job, &pods, 1);
        assert_eq!(last(&plan), ("Restarting", "True"));
        assert_eq!(
            plan.delete_pods,
            [Deletion {
                name: "j-worker-1".into(),
                uid: Some("u1".into())
            }]
        );
        assert_eq!(plan.status.replica_statuses["Worker"].restarts, 1);
        assert!(plan.transitions.contains(&Transition::Restarted));

        let pods = [
            pod(&job, W, 0).running().build(),
            pod(&job, W, 1).failed(1).build(),
        ];
        assert_eq!(last(&run(&job, &pods, 1)), ("Failed", "True"));
    }

    #[test]
    fn a_pod_being_deleted_is_neither_failed_nor_recreated() {
        let job = job("j")
            .replica("Worker", 2)
            .restart("Worker", RestartPolicy::ExitCode)
            .build();
        let pods = [
            pod(&job, W, 0).running().build(),
            pod(&job, W, 1).failed(137).deleting().build(),
        ];
        let plan = run(&job, &pods, 1);
        assert!(plan.create_pods.is_empty());
        assert!(plan.delete_pods.is_empty());
        assert_ne!(last(&plan).0, "Failed");
        assert_eq!(plan.status.replica_statuses["Worker"].restarts, 0);
    }

    #[test]
    fn regression_exit_code_restarts_count_toward_backoff_limit() {
        let job = job("j")
            .replica("Worker", 1)
            .replica("PS", 1)
            .restart("Worker", RestartPolicy::ExitCode)
            .run_policy(|r| r.backoff_limit = Some(2))
            .build();
        let mut job = job;
        // The first restart is allowed; the pod is recreated (the count survives that).
        for round in 1..=1 {
            let pods = [
                pod(&job, W, 0).failed(137).build(),
                pod(&job, PS, 0).running().build(),
            ];
            let plan = run(&job, &pods, round);
            assert_eq!(last(&plan), ("Restarting", "True"), "round {round}");
            assert_eq!(
                plan.status.replica_statuses["Worker"].restarts,
                i32::try_from(round).unwrap()
            );
            job = after(job, &plan);
            let recreated = run(&job, &[pod(&job, PS, 0).running().build()], round);
            assert_eq!(recreated.create_pods, [(W, 0)]);
        }
        let pods = [
            pod(&job, W, 0).failed(137).build(),
            pod(&job, PS, 0).running().build(),
        ];
        let plan = run(&job, &pods, 2);
        assert_eq!(last(&plan), ("Failed", "True"));
        assert!(
            message(&plan).contains("backoff limit"),
            "{}",
            message(&plan)
        );
        // cleanPodPolicy None: the pods stay, with their logs.
        assert!(plan.delete_pods.is_empty(), "{:?}", plan.delete_pods);
    }

    #[test]
    fn kubelet_restarts_count_toward_backoff_limit() {
        let job = job("j")
            .replica("Worker", 2)
            .restart("Worker", RestartPolicy::OnFailure)
            .run_policy(|r| r.backoff_limit = Some(2))
            .build();
        let pods = [
            pod(&job, W, 0).running().restarts(1).build(),
            pod(&job, W, 1).running().build(),
        ];
        assert_eq!(last(&run(&job, &pods, 1)), ("Running", "True"));
        let pods = [
            pod(&job, W, 0).running().restarts(1).build(),
            pod(&job, W, 1).running().restarts(1).build(),
        ];
        assert_eq!(last(&run(&job, &pods, 1)), ("Failed", "True"));
    }

    #[test]
    fn backoff_limit_zero_fails_on_the_first_restart() {
        let job = job("j")
            .replica("Worker", 2)
            .restart("Worker", RestartPolicy::OnFailure)
            .run_policy(|r| r.backoff_limit = Some(0))
            .build();
        let pods = [
            pod(&job, W, 0).failed_by("Evicted").build(),
            pod(&job, W, 1).running().build(),
        ];
        assert_eq!(last(&run(&job, &pods, 1)), ("Failed", "True"));
    }

    #[test]
    fn regression_active_deadline_requeues_at_the_deadline_and_fails_after_it() {
        let job = job("j")
            .replica("Worker", 2)
            .run_policy(|r| r.active_deadline_seconds = Some(30))
            .build();
        let pods = [
            pod(&job, W, 0).running().build(),
            pod(&job, W, 1).running().build(),
        ];
        let plan = run(&job, &pods, 0);
        assert_eq!(plan.requeue_after, Some(Duration::from_secs(30)));
        let job = after(job, &plan);
        let plan = run(&job, &pods, 20);
        assert_eq!(plan.requeue_after, Some(Duration::from_secs(10)));
        let plan = run(&job, &pods, 30);
        assert_eq!(last(&plan), ("Failed", "True"));
        assert!(message(&plan).contains("active longer than specified deadline"));
        // Running pods are stopped even with cleanPodPolicy None: a deadline stops the job.
        assert_eq!(plan.delete_pods.len(), 2);
        assert_eq!(plan.status.completion_time, Some(at(30)));
    }

    #[test]
    fn regression_replicas_zero_means_no_pods_and_no_churn() {
        let job = job("j").replica("Worker", 0).replica("PS", 1).build();
        let plan = plan(
            &job,
            Observed {
                pods: &[],
                services: &[],
            },
            &at(0),
        );
        assert_eq!(plan.create_pods, [(PS, 0)]);
        assert_eq!(plan.create_services.len(), 1);
        let job = after(job, &plan);
        let plan = run(&job, &[pod(&job, PS, 0).running().build()], 1);
        assert!(plan.create_pods.is_empty() && plan.delete_pods.is_empty());
    }

    #[test]
    fn scale_down_deletes_pods_past_the_last_index() {
        let job = job("j").replica("Worker", 1).replica("PS", 1).build();
        let bigger = crate::operator::training::fixtures::job("j")
            .replica("Worker", 3)
            .build();
        let pods = [
            pod(&job, W, 0).running().build(),
            pod(&bigger, W, 2).running().build(),
            pod(&job, PS, 0).running().build(),
        ];
        let plan = run(&job, &pods, 0);
        assert_eq!(
            plan.delete_pods
                .iter()
                .map(|d| d.name.as_str())
                .collect::<Vec<_>>(),
            ["j-worker-2"]
        );
    }

    #[test]
    fn regression_a_succeeded_index_whose_pod_was_collected_never_runs_again() {
        let job = job("j").replica("Worker", 2).replica("PS", 1).build();
        let mut job = job;
        job.spec.success_policy = Some(SuccessPolicy::AllWorkers);
        let pods = [
            pod(&job, W, 0).running().build(),
            pod(&job, W, 1).succeeded().build(),
            pod(&job, PS, 0).running().build(),
        ];
        let plan = run(&job, &pods, 1);
        assert_eq!(
            plan.status.replica_statuses["Worker"].succeeded_indexes,
            [1]
        );
        let job = after(job, &plan);
        // worker 1's pod is gone (garbage-collected); it is not recreated.
        let pods = [
            pod(&job, W, 0).running().build(),
            pod(&job, PS, 0).running().build(),
        ];
        let plan = run(&job, &pods, 2);
        assert!(plan.create_pods.is_empty(), "{:?}", plan.create_pods);
        assert_eq!(plan.status.replica_statuses["Worker"].succeeded, 1);
        assert_eq!(plan.status.replica_statuses["Worker"].active, 1);
    }

    #[test]
    fn finished_job_applies_clean_pod_policy_running() {
        let job = job("j")
            .replica("Worker", 2)
            .replica("PS", 1)
            .run_policy(|r| r.clean_pod_policy = Some(CleanPodPolicy::Running))
            .build();
        let pods = [
            pod(&job, W, 0).succeeded().build(),
            pod(&job, W, 1).succeeded().build(),
            pod(&job, PS, 0).running().build(),
        ];
        let plan = run(&job, &pods, 1);
        assert_eq!(last(&plan), ("Succeeded", "True"));
        assert_eq!(
            plan.delete_pods
                .iter()
                .map(|d| d.name.as_str())
                .collect::<Vec<_>>(),
            ["j-ps-0"]
        );
        assert_eq!(plan.delete_services, ["j-ps-0"]);
        assert_eq!(plan.status.replica_statuses["PS"].active, 0);
        assert_eq!(plan.status.replica_statuses["PS"].succeeded, 1);
    }

    #[test]
    fn finished_job_applies_clean_pod_policy_all() {
        let job = job("j")
            .replica("Worker", 1)
            .replica("PS", 1)
            .run_policy(|r| r.clean_pod_policy = Some(CleanPodPolicy::All))
            .build();
        let pods = [
            pod(&job, W, 0).succeeded().build(),
            pod(&job, PS, 0).running().build(),
        ];
        let plan = run(&job, &pods, 1);
        assert_eq!(plan.delete_pods.len(), 2);
        assert_eq!(plan.delete_services.len(), 2);
    }

    #[test]
    fn ttl_deletes_the_job_after_it_finished_and_requeues_until_then() {
        let job = job("j")
            .replica("Worker", 2)
            .run_policy(|r| r.ttl_seconds_after_finished = Some(60))
            .build();
        let pods = [
            pod(&job, W, 0).succeeded().build(),
            pod(&job, W, 1).succeeded().build(),
        ];
        let plan = run(&job, &pods, 10);
        assert_eq!(plan.requeue_after, Some(Duration::from_secs(60)));
        let job = after(job, &plan);
        assert!(!run(&job, &pods, 69).delete_job);
        assert!(run(&job, &pods, 70).delete_job);
    }

    #[test]
    fn suspend_deletes_everything_and_resume_resets_start_time() {
        let job = job("j")
            .replica("Worker", 2)
            .run_policy(|r| r.suspend = Some(true))
            .build();
        let pods = [
            pod(&job, W, 0).running().build(),
            pod(&job, W, 1).running().build(),
        ];
        let mut running = job.clone();
        running.status = Some(run(&job, &pods, 0).status);
        let plan = run(&job, &pods, 5);
        assert_eq!(last(&plan), ("Suspended", "True"));
        assert_eq!(plan.delete_pods.len(), 2);
        assert_eq!(plan.delete_services.len(), 2);
        assert!(plan.create_pods.is_empty());
        assert!(plan.events.iter().any(|e| e.reason == "TFJobSuspended"));

        let mut job = after(job, &plan);
        job.spec.run_policy.as_mut().unwrap().suspend = Some(false);
        let plan = run(&job, &[], 50);
        assert!(plan.status.conditions.iter().any(|c| c.type_ == "Suspended"
            && c.status == "False"
            && c.reason.as_deref() == Some("TFJobResumed")));
        assert_eq!(plan.status.start_time, Some(at(50)));
        assert_eq!(plan.create_pods.len(), 2);
    }

    #[test]
    fn dynamic_worker_failures_do_not_fail_the_job() {
        let mut job = job("j").replica("Worker", 2).replica("PS", 1).build();
        job.spec.enable_dynamic_worker = Some(true);
        let pods = [
            pod(&job, W, 0).running().build(),
            pod(&job, W, 1).failed(1).build(),
            pod(&job, PS, 0).running().build(),
        ];
        assert_eq!(last(&run(&job, &pods, 1)), ("Running", "True"));
    }

    #[test]
    fn unchanged_observation_changes_nothing() {
        let job = job("j").replica("Worker", 2).build();
        let pods = [
            pod(&job, W, 0).running().build(),
            pod(&job, W, 1).running().build(),
        ];
        let first = run(&job, &pods, 1);
        let job = after(job, &first);
        let second = run(&job, &pods, 2);
        assert_eq!(second.status, first.status);
        assert!(second.events.is_empty() && second.transitions.is_empty());
    }

    #[test]
    fn regression_backoff_limit_fails_the_job_when_the_restarts_reach_it() {
        let job = job("j")
            .replica("Worker", 2)
            .restart("Worker", RestartPolicy::OnFailure)
            .run_policy(|r| r.backoff_limit = Some(3))
            .build();
        let restarted = |count| {
            [
                pod(&job, W, 0).running().restarts(count).build(),
                pod(&job, W, 1).running().build(),
            ]
        };
        assert_eq!(last(&run(&job, &restarted(2), 1)), ("Running", "True"));
        let plan = run(&job, &restarted(3), 1);
        assert_eq!(last(&plan), ("Failed", "True"));
        assert_eq!(
            message(&plan),
            "Job j has failed because it has reached the specified backoff limit: 3 restarts, limit 3."
        );

        // A recreation that makes the count reach the limit is not made.
        let first = run(&job, &restarted(2), 1);
        let job = after(job.clone(), &first);
        let pods = [
            pod(&job, W, 0).running().restarts(2).build(),
            pod(&job, W, 1).failed_by("Evicted").build(),
        ];
        let plan = run(&job, &pods, 2);
        assert_eq!(last(&plan), ("Failed", "True"));
        assert!(plan.create_pods.is_empty());
    }

    /// The names of the pods and of the services a plan deletes, sorted.
    fn deleted(plan: &Plan) -> (Vec<&str>, Vec<&str>) {
        let mut pods: Vec<&str> = plan.delete_pods.iter().map(|d| d.name.as_str()).collect();
        let mut services: Vec<&str> = plan.delete_services.iter().map(String::as_str).collect();
        pods.sort_unstable();
        services.sort_unstable();
        (pods, services)
    }

    /// The pods deleted at the backoff limit lost the logs that explain it: the real node showed
    /// `kubectl logs` with nothing to read. The limit now cleans up as every other end does.
    #[test]
    fn regression_the_backoff_limit_cleans_up_by_the_clean_pod_policy() {
        let everything = vec!["j-ps-0", "j-worker-0", "j-worker-1"];
        let cases = [
            (CleanPodPolicy::None, vec![], vec![]),
            (
                CleanPodPolicy::Running,
                vec!["j-ps-0", "j-worker-0"],
                vec!["j-ps-0", "j-worker-0"],
            ),
            (CleanPodPolicy::All, everything.clone(), everything),
        ];
        for (policy, pods_deleted, services_deleted) in cases {
            let job = job("j")
                .replica("Worker", 2)
                .replica("PS", 1)
                .restart("Worker", RestartPolicy::OnFailure)
                .run_policy(|r| {
                    r.backoff_limit = Some(1);
                    r.clean_pod_policy = Some(policy);
                })
                .build();
            let pods = [
                pod(&job, W, 0).restarted(1, 1).build(),
                pod(&job, W, 1).succeeded().build(),
                // No status yet: Pending.
                pod(&job, PS, 0).build(),
            ];
            let plan = run(&job, &pods, 1);
            assert_eq!(last(&plan), ("Failed", "True"), "{policy:?}");
            assert_eq!(
                deleted(&plan),
                (pods_deleted.clone(), services_deleted),
                "{policy:?}"
            );
            let active = plan.status.replica_statuses["Worker"].active;
            assert_eq!(active, i32::from(pods_deleted.is_empty()), "{policy:?}");
        }
    }

    #[test]
    fn the_backoff_limit_message_says_how_each_restarted_container_ended() {
        let job = job("j")
            .replica("Worker", 3)
            .restart("Worker", RestartPolicy::OnFailure)
            .run_policy(|r| r.backoff_limit = Some(3))
            .build();
        let pods = [
            pod(&job, W, 0).restarted(1, 1).build(),
            pod(&job, W, 1).restarted(1, 137).build(),
            pod(&job, W, 2).failed_by("Evicted").build(),
        ];
        let plan = run(&job, &pods, 1);
        assert_eq!(last(&plan), ("Failed", "True"));
        assert_eq!(
            message(&plan),
            "Job j has failed because it has reached the specified backoff limit: 3 restarts, limit 3. \
             worker 0: exit code 1 of container tensorflow; \
             worker 1: OOMKilled: exit code 137 of container tensorflow; \
             worker 2: Evicted: The node was low on resource: Evicted"
        );
    }

    #[test]
    fn regression_condition_messages_are_upstreams_word_for_word_then_ours() {
        let job = job("j").replica("Worker", 2).build();
        let running = [
            pod(&job, W, 0).running().build(),
            pod(&job, W, 1).running().build(),
        ];
        assert_eq!(message(&run(&job, &running, 1)), "TFJob ns/j is running.");
        let created = plan(
            &job,
            Observed {
                pods: &[],
                services: &[],
            },
            &at(0),
        );
        assert_eq!(message(&created), "TFJob j is created.");

        let mut suspended = job.clone();
        suspended.spec.run_policy.as_mut().unwrap().suspend = Some(true);
        let plan = run(&suspended, &running, 2);
        assert_eq!(message(&plan), "TFJob j is suspended.");
        let resumed = run(&after(job.clone(), &plan), &[], 3);
        let condition = resumed
            .status
            .conditions
            .iter()
            .find(|c| c.type_ == "Suspended")
            .unwrap();
        assert_eq!(condition.message.as_deref(), Some("TFJob j is resumed."));

        let restarting = job_with_restarts(RestartPolicy::OnFailure);
        let pods = [
            pod(&restarting, W, 0).running().build(),
            pod(&restarting, W, 1).failed(137).build(),
        ];
        assert_eq!(
            message(&run(&restarting, &pods, 1)),
            "job j is restarting because Worker replica(s) failed. worker 1: OOMKilled: exit code 137 of container tensorflow"
        );
        let exit_code = job_with_restarts(RestartPolicy::ExitCode);
        let pods = [
            pod(&exit_code, W, 0).running().build(),
            pod(&exit_code, W, 1).failed(2).build(),
        ];
        assert_eq!(
            message(&run(&exit_code, &pods, 1)),
            "job \"j\" is failing because \"Worker\" replica(s) failed. worker 1: exit code 2 of container tensorflow"
        );
        let pods = [
            pod(&job, W, 0).succeeded().build(),
            pod(&job, W, 1).running().build(),
        ];
        assert_eq!(
            message(&run(&job, &pods, 1)),
            "TFJob ns/j successfully completed."
        );
    }

    fn job_with_restarts(policy: RestartPolicy) -> TFJob {
        job("j")
            .replica("Worker", 2)
            .restart("Worker", policy)
            .build()
    }

    #[test]
    fn regression_a_name_too_long_for_its_services_fails_the_job_at_once() {
        // 54 characters: `-worker-9` still fits in 63, `-worker-10` does not.
        let name = "a".repeat(54);
        let fits = job(&name).replica("Worker", 10).build();
        assert_eq!(run(&fits, &[], 0).create_pods.len(), 10);

        let too_long = job(&name).replica("Worker", 11).build();
        let plan = run(&too_long, &[], 0);
        assert_eq!(last(&plan), ("Failed", "True"));
        assert!(plan.create_pods.is_empty() && plan.create_services.is_empty());
        assert_eq!(
            message(&plan),
            format!(
                "TFJob {name} has failed because its name is too long: pod and service {name}-worker-10 would have 64 characters, more than 63"
            )
        );
    }
}
