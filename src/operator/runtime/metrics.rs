//! Prometheus metrics, rendered in the text exposition format by hand (a handful of counters and
//! one histogram do not need a metrics library).
//!
//! Names follow upstream's (`training_operator_jobs_*_total{job_namespace,framework}`) so
//! existing dashboards keep working; the reconcile-duration histogram, error counter and
//! work-queue depth are new, as are `mlkube_build_info` and the standard `process_*` metrics
//! (see `process`). Every metric has its `# HELP` and `# TYPE`. Labels come from a fixed set:
//! the job's namespace, and operation names that are `&'static str`.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use super::lock;

mod process;

/// What happened to a job, for metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    Created,
    Succeeded,
    Failed,
    Restarted,
}

/// Upper bounds of the reconcile-duration histogram, in seconds.
const BUCKETS: [f64; 10] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0];

#[derive(Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// Every metric the operator exports.
#[derive(Default)]
pub struct Metrics {
    /// (transition name, framework, namespace) → count.
    jobs: Mutex<BTreeMap<(&'static str, &'static str, String), u64>>,
    /// operation → count (pods created, services deleted, ...).
    objects: Mutex<BTreeMap<&'static str, u64>>,
    /// reconcile failures by the operation that failed.
    errors: Mutex<BTreeMap<&'static str, u64>>,
    reconcile: Mutex<Histogram>,
    reconciles: AtomicU64,
    /// Jobs with a change waiting for a reconcile.
    queue_depth: AtomicI64,
    /// Reconciles started and not yet finished.
    in_flight: AtomicI64,
    /// 1 while this replica holds the lease (or runs without leader election).
    leader: AtomicI64,
}

impl Metrics {
    /// A job of `framework` (`tensorflow`, ...) changed state.
    pub fn job(&self, transition: Transition, framework: &'static str, namespace: &str) {
        let name = match transition {
            Transition::Created => "created",
            Transition::Succeeded => "successful",
            Transition::Failed => "failed",
            Transition::Restarted => "restarted",
        };
        *lock(&self.jobs)
            .entry((name, framework, namespace.to_owned()))
            .or_default() += 1;
    }

    pub fn job_deleted(&self, framework: &'static str, namespace: &str) {
        *lock(&self.jobs)
            .entry(("deleted", framework, namespace.to_owned()))
            .or_default() += 1;
    }

    /// An object operation: `created_pods`, `deleted_pods`, `succeeded_service_creation`, ...
    pub fn object(&self, operation: &'static str) {
        *lock(&self.objects).entry(operation).or_default() += 1;
    }

    pub fn error(&self, operation: &'static str) {
        *lock(&self.errors).entry(operation).or_default() += 1;
    }

    pub fn reconciled(&self, took: Duration) {
        self.reconciles.fetch_add(1, Ordering::Relaxed);
        let seconds = took.as_secs_f64();
        let mut h = lock(&self.reconcile);
        for (bucket, bound) in h.counts.iter_mut().zip(BUCKETS) {
            if seconds <= bound {
                *bucket += 1;
            }
        }
        h.count += 1;
        h.sum += seconds;
    }

    /// A reconcile started (`1`) or finished (`-1`).
    pub fn in_flight_add(&self, n: i64) {
        self.in_flight.fetch_add(n, Ordering::Relaxed);
    }

    /// Jobs entered (`1`) or left (`-1`) one of the frameworks' work queues.
    pub fn queue_depth_add(&self, jobs: i64) {
        self.queue_depth.fetch_add(jobs, Ordering::Relaxed);
    }

    pub fn set_leader(&self, leader: bool) {
        self.leader.store(i64::from(leader), Ordering::Relaxed);
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.render_jobs(&mut out);
        self.render_objects(&mut out);
        self.render_errors(&mut out);
        self.render_reconcile_duration(&mut out);
        self.render_gauges(&mut out);
        render_build_info(&mut out);
        process::render(&mut out);
        out
    }

    /// `training_operator_jobs_*_total`, upstream's: one counter per transition, by namespace
    /// and framework.
    fn render_jobs(&self, out: &mut String) {
        let jobs = lock(&self.jobs);
        for name in ["created", "deleted", "successful", "failed", "restarted"] {
            let metric = format!("training_operator_jobs_{name}_total");
            let _ = writeln!(
                out,
                "# HELP {metric} Jobs {name}, by namespace and framework."
            );
            let _ = writeln!(out, "# TYPE {metric} counter");
            for ((_, framework, namespace), value) in
                jobs.iter().filter(|((n, _, _), _)| *n == name)
            {
                let _ = writeln!(
                    out,
                    "{metric}{{job_namespace=\"{}\",framework=\"{framework}\"}} {value}",
                    escape(namespace)
                );
            }
        }
    }

    /// One counter per object operation seen (`created_pods_total`, ...).
    fn render_objects(&self, out: &mut String) {
        let objects = lock(&self.objects);
        for (operation, value) in objects.iter() {
            let metric = format!("{operation}_total");
            let _ = writeln!(out, "# HELP {metric} {}", object_help(operation));
            let _ = writeln!(out, "# TYPE {metric} counter");
            let _ = writeln!(out, "{metric} {value}");
        }
    }

    /// `mlkube_operator_reconcile_errors_total`, by the operation that failed.
    fn render_errors(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "# HELP mlkube_operator_reconcile_errors_total Failed reconciles, by the operation that failed."
        );
        let _ = writeln!(out, "# TYPE mlkube_operator_reconcile_errors_total counter");
        for (operation, value) in lock(&self.errors).iter() {
            let _ = writeln!(
                out,
                "mlkube_operator_reconcile_errors_total{{operation=\"{operation}\"}} {value}"
            );
        }
    }

    /// The reconcile-duration histogram.
    fn render_reconcile_duration(&self, out: &mut String) {
        let h = lock(&self.reconcile);
        let metric = "mlkube_operator_reconcile_duration_seconds";
        let _ = writeln!(out, "# HELP {metric} Time one reconcile of one job took.");
        let _ = writeln!(out, "# TYPE {metric} histogram");
        for (count, bound) in h.counts.iter().zip(BUCKETS) {
            let _ = writeln!(out, "{metric}_bucket{{le=\"{bound}\"}} {count}");
        }
        let _ = writeln!(out, "{metric}_bucket{{le=\"+Inf\"}} {}", h.count);
        let _ = writeln!(out, "{metric}_sum {}", h.sum);
        let _ = writeln!(out, "{metric}_count {}", h.count);
    }

    /// The gauges: work-queue depth, reconciles in flight, and whether this replica leads.
    fn render_gauges(&self, out: &mut String) {
        for (metric, help, value) in [
            (
                "mlkube_operator_workqueue_depth",
                "Jobs with a change waiting for a reconcile.",
                &self.queue_depth,
            ),
            (
                "mlkube_operator_reconciles_in_flight",
                "Reconciles started and not yet finished.",
                &self.in_flight,
            ),
        ] {
            let _ = writeln!(out, "# HELP {metric} {help}");
            let _ = writeln!(out, "# TYPE {metric} gauge");
            let _ = writeln!(out, "{metric} {}", value.load(Ordering::Relaxed).max(0));
        }
        let _ = writeln!(
            out,
            "# HELP mlkube_operator_is_leader 1 while this replica holds the leader lease."
        );
        let _ = writeln!(out, "# TYPE mlkube_operator_is_leader gauge");
        let _ = writeln!(
            out,
            "mlkube_operator_is_leader {}",
            self.leader.load(Ordering::Relaxed)
        );
    }
}

/// What an object counter counts, for its `# HELP` line.
fn object_help(operation: &str) -> String {
    let known = match operation {
        "created_pods" => "Pods the operator created.",
        "deleted_pods" => "Pods the operator deleted.",
        "succeeded_service_creation" => "Services the operator created.",
        "failed_service_creation" => "Service creations the API server refused.",
        "created_pod_groups" => "PodGroups the operator created for gang scheduling.",
        "updated_pod_groups" => "PodGroups the operator updated to follow their job.",
        "deleted_pod_groups" => "PodGroups the operator deleted.",
        "mlkube_operator_events_dropped" => {
            "Events not recorded because too many were waiting to be written."
        }
        other => return format!("Times the operator did {other}."),
    };
    known.to_owned()
}

/// `mlkube_build_info`: always 1, its labels say which build runs: the crate's version, the
/// git commit it was built from (`unknown` outside a checkout) and the compiler (see
/// `build.rs`).
fn render_build_info(out: &mut String) {
    let labels = [
        ("version", env!("CARGO_PKG_VERSION")),
        ("git_commit", env!("MLKUBE_GIT_COMMIT")),
        ("rustc", env!("MLKUBE_RUSTC_VERSION")),
    ]
    .map(|(label, value)| format!("{label}=\"{}\"", escape(value)))
    .join(",");
    let _ = writeln!(
        out,
        "# HELP mlkube_build_info The running build of mlkube; always 1."
    );
    let _ = writeln!(out, "# TYPE mlkube_build_info gauge");
    let _ = writeln!(out, "mlkube_build_info{{{labels}}} 1");
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_job_counters_by_namespace_and_the_histogram() {
        let metrics = Metrics::default();
        metrics.job(Transition::Created, "tensorflow", "team-a");
        metrics.job(Transition::Created, "tensorflow", "team-a");
        metrics.job(Transition::Failed, "tensorflow", "team-b");
        metrics.job(Transition::Created, "pytorch", "team-a");
        metrics.object("created_pods");
        metrics.reconciled(Duration::from_millis(20));
        metrics.queue_depth_add(7);
        metrics.in_flight_add(1);
        let text = metrics.render();
        assert!(text.contains("training_operator_jobs_created_total{job_namespace=\"team-a\",framework=\"tensorflow\"} 2"), "{text}");
        assert!(text.contains("training_operator_jobs_failed_total{job_namespace=\"team-b\",framework=\"tensorflow\"} 1"));
        assert!(text.contains("training_operator_jobs_created_total{job_namespace=\"team-a\",framework=\"pytorch\"} 1"), "{text}");
        assert!(text.contains("created_pods_total 1"));
        assert!(text.contains("mlkube_operator_reconcile_duration_seconds_bucket{le=\"0.025\"} 1"));
        assert!(text.contains("mlkube_operator_reconcile_duration_seconds_bucket{le=\"0.01\"} 0"));
        assert!(text.contains("mlkube_operator_reconcile_duration_seconds_count 1"));
        assert!(
            text.contains("mlkube_operator_workqueue_depth 7\n"),
            "{text}"
        );
        assert!(
            text.contains("mlkube_operator_reconciles_in_flight 1\n"),
            "{text}"
        );
    }

    /// The value of `label` on the `mlkube_build_info` line of `text`.
    fn build_info_label(text: &str, label: &str) -> String {
        let line = text
            .lines()
            .find(|l| l.starts_with("mlkube_build_info{"))
            .unwrap_or_else(|| panic!("no mlkube_build_info in\n{text}"));
        assert!(line.ends_with("} 1"), "{line}");
        let start = format!("{label}=\"");
        let value = line
            .split_once(&start)
            .and_then(|(_, rest)| rest.split_once('"'))
            .map(|(value, _)| value.to_owned());
        value.unwrap_or_else(|| panic!("no {label} label in {line}"))
    }

    #[test]
    fn build_info_is_one_and_names_the_version() {
        let text = Metrics::default().render();
        assert_eq!(
            build_info_label(&text, "version"),
            env!("CARGO_PKG_VERSION")
        );
        assert!(build_info_label(&text, "rustc").starts_with("1."), "{text}");
    }

    /// Built from a git checkout, the label is its HEAD; from a tarball, `unknown`.
    #[test]
    fn build_info_names_the_git_commit_it_was_built_from() {
        let head = std::process::Command::new("git")
            .args(["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "HEAD"])
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned());
        let text = Metrics::default().render();
        assert_eq!(
            build_info_label(&text, "git_commit"),
            head.as_deref().unwrap_or("unknown")
        );
    }

    #[test]
    fn process_metrics_are_exported() {
        let text = Metrics::default().render();
        for metric in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_start_time_seconds",
            "process_open_fds",
        ] {
            assert!(
                text.lines().any(|l| l.starts_with(&format!("{metric} "))),
                "no {metric} in\n{text}"
            );
        }
    }
}
