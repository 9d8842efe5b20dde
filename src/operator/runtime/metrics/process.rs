//! The standard `process_*` metrics of the operator's own process, read from `/proc` at each
//! scrape: CPU time, resident memory, start time and open file descriptors. Where `/proc` is
//! missing (not Linux) they are left out rather than reported as zero.

use std::fmt::Write;

/// What `/proc` says about this process now.
#[derive(Debug, PartialEq)]
struct Sample {
    cpu_seconds: f64,
    resident_bytes: u64,
    start_time_seconds: f64,
    open_fds: usize,
}

/// Append the process metrics to `out`.
pub(super) fn render(out: &mut String) {
    let Some(sample) = sample() else {
        return;
    };
    for (metric, kind, help, value) in [
        (
            "process_cpu_seconds_total",
            "counter",
            "User and system CPU time the process spent, in seconds.",
            sample.cpu_seconds.to_string(),
        ),
        (
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory of the process, in bytes.",
            sample.resident_bytes.to_string(),
        ),
        (
            "process_start_time_seconds",
            "gauge",
            "When the process started, in seconds since the Unix epoch.",
            sample.start_time_seconds.to_string(),
        ),
        (
            "process_open_fds",
            "gauge",
            "File descriptors the process has open.",
            sample.open_fds.to_string(),
        ),
    ] {
        let _ = writeln!(out, "# HELP {metric} {help}");
        let _ = writeln!(out, "# TYPE {metric} {kind}");
        let _ = writeln!(out, "{metric} {value}");
    }
}

fn sample() -> Option<Sample> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let boot = std::fs::read_to_string("/proc/stat").ok()?;
    let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count();
    // SAFETY: sysconf reads a configuration value and touches no memory of ours.
    let (ticks, page) = unsafe {
        (
            libc::sysconf(libc::_SC_CLK_TCK),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let clock = Clock {
        ticks_per_second: u64::try_from(ticks).ok().filter(|&t| t > 0)?,
        page_bytes: u64::try_from(page).ok().filter(|&p| p > 0)?,
        boot_time_seconds: boot_time(&boot)?,
    };
    parse_stat(&stat, &clock, open_fds)
}

/// The machine's units and when it booted, to turn `/proc/self/stat` into seconds and bytes.
struct Clock {
    ticks_per_second: u64,
    page_bytes: u64,
    boot_time_seconds: u64,
}

/// `btime` of `/proc/stat`: when the machine booted, in seconds since the Unix epoch.
fn boot_time(proc_stat: &str) -> Option<u64> {
    proc_stat
        .lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|t| t.trim().parse().ok())
}

/// The fields of `/proc/self/stat` (see proc(5)) the metrics need.
fn parse_stat(stat: &str, clock: &Clock, open_fds: usize) -> Option<Sample> {
    // The command name is in parentheses and may hold spaces: count fields after it, from
    // field 3 (`state`) on.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let field = |number: usize| -> Option<u64> { fields.get(number - 3)?.parse().ok() };
    let ticks = clock.ticks_per_second as f64;
    Some(Sample {
        cpu_seconds: (field(14)? + field(15)?) as f64 / ticks,
        resident_bytes: field(24)? * clock.page_bytes,
        start_time_seconds: clock.boot_time_seconds as f64 + field(22)? as f64 / ticks,
        open_fds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_become_seconds_and_bytes() {
        // A process named `mlkube (op)`: the parentheses and space must not shift the fields.
        let stat = "4242 (mlkube (op)) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 \
                    7 0 12000 104857600 2560 18446744073709551615";
        let clock = Clock {
            ticks_per_second: 100,
            page_bytes: 4096,
            boot_time_seconds: 1_700_000_000,
        };
        let sample = parse_stat(stat, &clock, 9).unwrap();
        assert_eq!(
            sample,
            Sample {
                cpu_seconds: 3.0,
                resident_bytes: 2560 * 4096,
                start_time_seconds: 1_700_000_120.0,
                open_fds: 9,
            }
        );
    }

    #[test]
    fn boot_time_is_read_from_proc_stat() {
        let proc_stat = "cpu  1 2 3\nintr 5\nbtime 1700000000\nprocesses 9\n";
        assert_eq!(boot_time(proc_stat), Some(1_700_000_000));
    }

    #[test]
    fn this_process_is_measured() {
        let mut out = String::new();
        render(&mut out);
        let value = |metric: &str| -> f64 {
            out.lines()
                .find_map(|l| l.strip_prefix(&format!("{metric} ")))
                .unwrap_or_else(|| panic!("no {metric} in\n{out}"))
                .parse()
                .unwrap()
        };
        assert!(value("process_resident_memory_bytes") > 1_000_000.0);
        assert!(value("process_open_fds") >= 3.0);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let started = value("process_start_time_seconds");
        assert!(
            started <= now + 1.0 && started > now - 86_400.0 * 365.0,
            "{started}"
        );
        assert!(value("process_cpu_seconds_total") >= 0.0);
    }
}
