//! What the benchmark harnesses share: measuring a child process.

use std::process::Command;
use std::time::{Duration, Instant};

/// Wall time, CPU seconds and peak RSS (bytes) of a child, polled from /proc.
pub fn measure_child(mut cmd: Command) -> (Duration, f64, u64) {
    let started = Instant::now();
    let mut child = cmd.spawn().expect("the command starts");
    let pid = child.id();
    let (mut cpu, mut rss) = (0.0, 0u64);
    let ticks = 100.0; // USER_HZ on Linux
    loop {
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
            if let (Some(u), Some(s)) = (fields.get(11), fields.get(12)) {
                cpu = (u.parse::<f64>().unwrap_or(0.0) + s.parse::<f64>().unwrap_or(0.0)) / ticks;
            }
        }
        if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status"))
            && let Some(kb) = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))
        {
            rss = rss.max(kb.trim().trim_end_matches(" kB").trim().parse::<u64>().unwrap_or(0) * 1024);
        }
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "the command failed");
            return (started.elapsed(), cpu, rss);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
