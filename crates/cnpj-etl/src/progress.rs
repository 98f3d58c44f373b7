//! Progress display. On a terminal: for the build, a line per file being read (name, bytes, a
//! bar, MiB/s and rows/s, within 80 columns) under the stage line (elapsed time and an estimate
//! for the whole build); for the download, a line per transfer under the total. Off a terminal
//! (a log file, a scheduler), no bars: one log line per file at info level instead. Nothing with
//! `--quiet`.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cnpj_build::Observer;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Reading the main tables takes about half of a build (measured at scale 0.1: 132 s of 258 s;
/// the rest stores what was read): the whole build is estimated as twice the reading.
const READ_SHARE: f64 = 0.5;

/// Whether progress is drawn: stderr is a terminal and `--quiet` is off.
pub fn drawn(quiet: bool) -> bool {
    !quiet && std::io::stderr().is_terminal()
}

fn target(quiet: bool) -> ProgressDrawTarget {
    if drawn(quiet) { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() }
}

/// `180k`, `1.2M`, `950`: a count as people read it.
fn human(n: f64) -> String {
    match n {
        n if n >= 9.95e5 => format!("{:.1}M", n / 1e6),
        n if n >= 9.95e3 => format!("{:.0}k", n / 1e3),
        n if n >= 1e3 => format!("{:.1}k", n / 1e3),
        n => format!("{n:.0}"),
    }
}

/// The stage line's tail after the elapsed time (`00:02:00`): once a twentieth of the input is
/// read, the estimate for the whole build.
fn estimate(elapsed: Duration, read: u64, input: u64) -> String {
    if input == 0 || read * 20 < input {
        return String::new();
    }
    let share = (read as f64 / input as f64).min(1.0);
    let s = (elapsed.as_secs_f64() / share / READ_SHARE) as u64;
    format!(" of about {:02}:{:02}:{:02}", s / 3600, s % 3600 / 60, s % 60)
}

pub struct Bars {
    multi: MultiProgress,
    stage: ProgressBar,
    started: Instant,
    input: AtomicU64,
    /// Bytes of the files read to the end.
    done: AtomicU64,
    /// Per file being read: its line, when it started, and its bytes read so far.
    files: Mutex<HashMap<i32, (ProgressBar, Instant, u64)>>,
}

impl Bars {
    pub fn new(quiet: bool) -> Bars {
        let multi = MultiProgress::with_draw_target(target(quiet));
        let stage = multi.add(ProgressBar::new_spinner());
        stage.set_style(
            ProgressStyle::with_template("{spinner} {msg} · {elapsed_precise}{prefix}").expect("a valid template"),
        );
        stage.enable_steady_tick(Duration::from_millis(200));
        Bars {
            multi,
            stage,
            started: Instant::now(),
            input: AtomicU64::new(0),
            done: AtomicU64::new(0),
            files: Mutex::new(HashMap::new()),
        }
    }

    pub fn clear(&self) {
        self.stage.finish_and_clear();
        let _ = self.multi.clear();
    }
}

/// A counter of rows for work of unknown length (hidden when quiet).
pub fn rows_bar(quiet: bool, what: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(None, target(quiet));
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg}: {human_pos} rows, {elapsed}").expect("a valid template"),
    );
    bar.set_message(what.to_owned());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

impl Observer for Bars {
    fn stage(&self, name: &str) {
        tracing::info!(stage = name);
        self.stage.set_message(name.to_owned());
    }

    fn input(&self, bytes: u64) {
        self.input.store(bytes, Ordering::Relaxed);
    }

    fn file_started(&self, id: i32, name: &str, bytes: u64) {
        let bar = self.multi.add(ProgressBar::new(bytes));
        bar.set_style(
            ProgressStyle::with_template(
                "{msg:24!} {binary_bytes:>9}/{binary_total_bytes:<9} {bar:10} {binary_bytes_per_sec:>11} {prefix}",
            )
            .expect("a valid template"),
        );
        bar.set_message(name.to_owned());
        self.files.lock().expect("not poisoned").insert(id, (bar, Instant::now(), 0));
    }

    fn file_progress(&self, id: i32, bytes: u64, rows: u64) {
        let mut files = self.files.lock().expect("not poisoned");
        if let Some((bar, started, read)) = files.get_mut(&id) {
            bar.set_position(bytes);
            *read = bytes;
            let seconds = started.elapsed().as_secs_f64().max(1e-3);
            bar.set_prefix(format!("{} rows/s", human(rows as f64 / seconds)));
        }
        let read = self.done.load(Ordering::Relaxed) + files.values().map(|(_, _, read)| read).sum::<u64>();
        drop(files);
        self.stage.set_prefix(estimate(self.started.elapsed(), read, self.input.load(Ordering::Relaxed)));
    }

    fn file_finished(&self, id: i32, rows: u64) {
        if let Some((bar, started, read)) = self.files.lock().expect("not poisoned").remove(&id) {
            self.done.fetch_add(read, Ordering::Relaxed);
            let seconds = started.elapsed().as_secs_f64();
            tracing::info!(
                file = %bar.message(),
                rows,
                seconds = format!("{seconds:.1}"),
                rate = format!("{} rows/s", human(rows as f64 / seconds.max(1e-3))),
                "read"
            );
            bar.finish_and_clear();
        }
    }
}

pub struct DownloadBars {
    multi: MultiProgress,
    total: ProgressBar,
    files: Mutex<HashMap<String, (ProgressBar, u64)>>,
}

impl DownloadBars {
    pub fn new(quiet: bool) -> DownloadBars {
        let multi = MultiProgress::with_draw_target(target(quiet));
        let total = multi.add(ProgressBar::new(0));
        total.set_style(
            ProgressStyle::with_template(
                "total {binary_bytes:>9}/{binary_total_bytes:<9} {bar:30} {binary_bytes_per_sec:>11} ETA {eta}",
            )
            .expect("a valid template"),
        );
        DownloadBars { multi, total, files: Mutex::new(HashMap::new()) }
    }

    pub fn clear(&self) {
        self.total.finish_and_clear();
        let _ = self.multi.clear();
    }
}

impl cnpj_download::Observer for DownloadBars {
    fn listed(&self, month: &str, files: usize, bytes: u64) {
        tracing::info!(month, files, bytes, "listed");
        self.total.set_length(bytes);
    }

    fn file_started(&self, name: &str, size: u64, have: u64) {
        let bar = self.multi.add(ProgressBar::new(size));
        bar.set_style(
            ProgressStyle::with_template(
                "{msg:24!} {binary_bytes:>9}/{binary_total_bytes:<9} {bar:20} {binary_bytes_per_sec:>11}",
            )
            .expect("a valid template"),
        );
        bar.set_message(name.to_owned());
        bar.set_position(have);
        self.total.inc(have);
        self.files.lock().expect("not poisoned").insert(name.to_owned(), (bar, have));
    }

    fn file_progress(&self, name: &str, bytes: u64) {
        if let Some((bar, last)) = self.files.lock().expect("not poisoned").get_mut(name) {
            // A restart from zero (server ignored Range) moves the file's bar back, not the total's.
            self.total.inc(bytes.saturating_sub(*last));
            *last = bytes.max(*last);
            bar.set_position(bytes);
        }
    }

    fn file_finished(&self, name: &str) {
        if let Some((bar, _)) = self.files.lock().expect("not poisoned").remove(name) {
            tracing::info!(file = name, "verified");
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(n: f64, expected: &str) {
        assert_eq!(human(n), expected, "{n}");
    }

    #[test]
    fn counts_read_as_people_expect() {
        check(950.0, "950");
        check(1_234.0, "1.2k");
        check(180_400.0, "180k");
        check(52_371_031.72, "52.4M");
        check(999_700.0, "1.0M");
    }

    #[test]
    fn the_stage_line_estimates_the_whole_build_from_the_input_read() {
        assert_eq!(estimate(Duration::from_secs(30), 1, 100), "", "too early to tell");
        // A quarter read in 2 minutes: reading takes 8, the build about twice that.
        assert_eq!(estimate(Duration::from_secs(120), 25, 100), " of about 00:16:00");
        assert_eq!(estimate(Duration::from_secs(4000), 100, 100), " of about 02:13:20");
    }
}
