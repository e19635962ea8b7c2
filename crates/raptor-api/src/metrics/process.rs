//! The process's own metrics, read from `/proc` at each scrape (Linux; elsewhere none are set),
//! under the names Prometheus' client libraries use: `process_resident_memory_bytes`,
//! `process_virtual_memory_bytes`, `process_open_fds`, `process_max_fds`,
//! `process_cpu_seconds_total` (user + system) and `process_start_time_seconds` (unix).

/// Clock ticks per second of `/proc/self/stat`'s times (`USER_HZ`, 100 on every Linux
/// architecture Raptor is built for).
const TICKS_PER_SECOND: f64 = 100.0;

/// Sets every process gauge that can be read; one that cannot is left out.
pub(super) fn record() {
    if let Some(status) = read("/proc/self/status") {
        if let Some(kib) = status_kib(&status, "VmRSS:") {
            metrics::gauge!("process_resident_memory_bytes").set(kib * 1024.0);
        }
        if let Some(kib) = status_kib(&status, "VmSize:") {
            metrics::gauge!("process_virtual_memory_bytes").set(kib * 1024.0);
        }
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        metrics::gauge!("process_open_fds").set(fds.count() as f64);
    }
    if let Some(max) = read("/proc/self/limits").and_then(|l| max_open_files(&l)) {
        metrics::gauge!("process_max_fds").set(max);
    }
    if let Some(stat) = read("/proc/self/stat").and_then(|s| Stat::parse(&s)) {
        if let Some(boot) = read("/proc/stat").and_then(|s| boot_time(&s)) {
            metrics::gauge!("process_start_time_seconds")
                .set(boot + stat.starttime / TICKS_PER_SECOND);
        }
    }
}

/// `process_cpu_seconds_total` (user + system) in the text exposition, typed a counter: the
/// recorder's counters hold whole numbers, and this one counts hundredths of a second.
/// Empty where `/proc/self/stat` cannot be read.
pub(super) fn cpu_exposition() -> String {
    match read("/proc/self/stat").and_then(|s| Stat::parse(&s)) {
        Some(stat) => format!(
            "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n\
             # TYPE process_cpu_seconds_total counter\n\
             process_cpu_seconds_total {}\n",
            (stat.utime + stat.stime) / TICKS_PER_SECOND
        ),
        None => String::new(),
    }
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// A `Name:   1234 kB` line of `/proc/self/status`, in KiB.
fn status_kib(status: &str, name: &str) -> Option<f64> {
    let line = status.lines().find(|l| l.starts_with(name))?;
    line[name.len()..].split_whitespace().next()?.parse().ok()
}

/// The soft limit of `Max open files` in `/proc/self/limits`.
fn max_open_files(limits: &str) -> Option<f64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `btime` of `/proc/stat`: the boot time, unix seconds.
fn boot_time(stat: &str) -> Option<f64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

/// The fields of `/proc/self/stat` used here, in clock ticks.
#[derive(Debug, PartialEq)]
struct Stat {
    utime: f64,
    stime: f64,
    starttime: f64,
}

impl Stat {
    /// Fields 14, 15 and 22 (1-based); the command name (field 2) is in parentheses and may
    /// hold spaces, so fields are counted from the last `)`.
    fn parse(stat: &str) -> Option<Self> {
        let rest = &stat[stat.rfind(')')? + 1..];
        // `rest` starts at field 3.
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3)?.parse::<f64>().ok();
        Some(Self {
            utime: field(14)?,
            stime: field(15)?,
            starttime: field(22)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_are_read_by_field() {
        let stat = "4242 (raptor (x) y) S 1 4242 4242 0 -1 4194560 900 0 0 0 \
                    250 75 0 0 20 0 9 0 123456 1000000 2000 18446744073709551615";
        assert_eq!(
            Stat::parse(stat),
            Some(Stat {
                utime: 250.0,
                stime: 75.0,
                starttime: 123456.0
            })
        );
        assert_eq!(Stat::parse("garbage"), None);
        let status = "Name:\traptor\nVmSize:\t  204800 kB\nVmRSS:\t   51200 kB\n";
        assert_eq!(status_kib(status, "VmRSS:"), Some(51200.0));
        assert_eq!(status_kib(status, "VmSwap:"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(max_open_files(limits), Some(1024.0));
        assert_eq!(
            boot_time("cpu  1 2 3\nbtime 1764547200\n"),
            Some(1_764_547_200.0)
        );
    }

    #[test]
    fn this_process_has_memory_and_open_files() {
        if !cfg!(target_os = "linux") {
            return;
        }
        let status = read("/proc/self/status").expect("/proc/self/status");
        assert!(status_kib(&status, "VmRSS:").expect("VmRSS") > 0.0);
        let stat = Stat::parse(&read("/proc/self/stat").expect("stat")).expect("parsed");
        assert!(stat.starttime > 0.0);
    }
}
