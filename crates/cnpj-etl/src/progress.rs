//! Progress bars (indicatif): for the build, one per file being read plus the current stage; for
//! the download, one per active transfer plus the total (bytes, rate, ETA).
//! Drawn on stderr only when it is a terminal and `--quiet` is off.

use std::collections::HashMap;
use std::sync::Mutex;

use cnpj_build::Observer;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Bars {
    multi: MultiProgress,
    stage: ProgressBar,
    files: Mutex<HashMap<i32, ProgressBar>>,
}

impl Bars {
    pub fn new(quiet: bool) -> Bars {
        let target = if quiet { ProgressDrawTarget::hidden() } else { ProgressDrawTarget::stderr() };
        let multi = MultiProgress::with_draw_target(target);
        let stage = multi.add(ProgressBar::new_spinner());
        stage.enable_steady_tick(std::time::Duration::from_millis(200));
        Bars { multi, stage, files: Mutex::new(HashMap::new()) }
    }

    pub fn clear(&self) {
        self.stage.finish_and_clear();
        let _ = self.multi.clear();
    }
}

/// A counter of rows for work of unknown length (hidden when quiet).
pub fn rows_bar(quiet: bool, what: &str) -> ProgressBar {
    let target = if quiet { ProgressDrawTarget::hidden() } else { ProgressDrawTarget::stderr() };
    let bar = ProgressBar::with_draw_target(None, target);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg}: {human_pos} rows, {per_sec}").expect("a valid template"),
    );
    bar.set_message(what.to_owned());
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

impl Observer for Bars {
    fn stage(&self, name: &str) {
        tracing::info!(stage = name);
        self.stage.set_message(name.to_owned());
    }

    fn file_started(&self, id: i32, name: &str, bytes: u64) {
        let bar = self.multi.add(ProgressBar::new(bytes));
        bar.set_style(
            ProgressStyle::with_template("{msg:45!} {bytes:>10}/{total_bytes:<10} {bar:30} {prefix} rows {per_sec}")
                .expect("a valid template"),
        );
        bar.set_message(name.to_owned());
        self.files.lock().expect("not poisoned").insert(id, bar);
    }

    fn file_progress(&self, id: i32, bytes: u64, rows: u64) {
        if let Some(bar) = self.files.lock().expect("not poisoned").get(&id) {
            bar.set_position(bytes);
            bar.set_prefix(rows.to_string());
        }
    }

    fn file_finished(&self, id: i32, rows: u64) {
        if let Some(bar) = self.files.lock().expect("not poisoned").remove(&id) {
            tracing::info!(file = %bar.message(), rows, "read");
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
        let target = if quiet { ProgressDrawTarget::hidden() } else { ProgressDrawTarget::stderr() };
        let multi = MultiProgress::with_draw_target(target);
        let total = multi.add(ProgressBar::new(0));
        total.set_style(
            ProgressStyle::with_template(
                "total {bytes:>10}/{total_bytes:<10} {bar:40} {binary_bytes_per_sec} ETA {eta}",
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
            ProgressStyle::with_template("{msg:28!} {bytes:>10}/{total_bytes:<10} {bar:30} {binary_bytes_per_sec}")
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
