//! `run --metrics-file`: when a run ends, whatever its outcome, its metrics and those of the dataset
//! it leaves in `--db`, in the Prometheus text format of node_exporter's textfile collector,
//! written to a temporary file beside the target and renamed over it.

use std::fmt::Display;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;

use crate::EXIT_ANOMALIES;
use crate::cli::{Cli, Command};

/// The one value carried over from the previous file when this run did not succeed.
const LAST_SUCCESS: &str = "cnpj_etl_last_success_timestamp_seconds";

/// Runs the command with `run`; when it is a `run` with `--metrics-file`, writes the metrics when
/// it ends. A file that cannot be written is a warning: the run's exit code stands.
pub fn recorded(cli: Cli, run: fn(Cli) -> anyhow::Result<ExitCode>) -> anyhow::Result<ExitCode> {
    let Command::Run(args) = &cli.command else { return run(cli) };
    let (Some(path), db) = (&args.metrics_file, &args.db) else { return run(cli) };
    let (path, db) = (path.clone(), db.clone());
    let (started, clock) = (Instant::now(), SystemTime::now());
    let result = run(cli);
    let took = started.elapsed();
    let outcome = Outcome {
        ended: unix_seconds(clock + took),
        seconds: took.as_secs_f64(),
        exit_code: exit_code(&result),
        previous_success: std::fs::read_to_string(&path).ok().as_deref().and_then(last_success),
    };
    if let Err(e) = write(&path, &text(&outcome, dataset(&db).as_ref())) {
        tracing::warn!("--metrics-file not written: {e:#}");
    }
    result
}

/// What the run itself did.
struct Outcome {
    /// When it ended, Unix seconds.
    ended: f64,
    seconds: f64,
    exit_code: u8,
    /// The last success time the previous file holds.
    previous_success: Option<f64>,
}

/// The dataset in `--db` once the run ended (the month it built, or the one it left served).
#[derive(Debug, PartialEq)]
struct Dataset {
    month: Option<String>,
    build_id: String,
    rows_loaded: Option<u64>,
    rows_rejected: Option<u64>,
}

fn unix_seconds(time: SystemTime) -> f64 {
    time.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// The process's exit code for `result`, as `main` chooses it.
fn exit_code(result: &anyhow::Result<ExitCode>) -> u8 {
    match result {
        Ok(code) => (0..=u8::MAX).find(|&n| ExitCode::from(n) == *code).unwrap_or(1),
        Err(_) => 1,
    }
}

/// The value of the last success time in a metrics file's text.
fn last_success(text: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(LAST_SUCCESS)?.strip_prefix(' ')?.trim().parse().ok())
}

/// The dataset at `db`, from its metadata and the build report stored in it; none when there is
/// no dataset or it cannot be read (a warning).
fn dataset(db: &Path) -> Option<Dataset> {
    if !db.is_file() {
        return None;
    }
    let read = cnpj_load::PreviousDataset::read(db)
        .map_err(|e| tracing::warn!("--metrics-file: the dataset's metrics are left out: {e}"))
        .ok()?;
    let report: Option<serde_json::Value> = read.report.as_deref().and_then(|r| serde_json::from_str(r).ok());
    let count = |key: &str| report.as_ref().and_then(|r| r[key].as_u64());
    Some(Dataset {
        month: read.month,
        build_id: read.build_id,
        rows_loaded: count("rows_loaded"),
        rows_rejected: count("rows_rejected"),
    })
}

/// The metrics file's text.
fn text(run: &Outcome, dataset: Option<&Dataset>) -> String {
    let mut out = String::new();
    gauge(&mut out, "cnpj_etl_last_run_timestamp_seconds", "When the last run ended (Unix time).", "", run.ended);
    let success = if run.exit_code == 0 { Some(run.ended) } else { run.previous_success };
    if let Some(success) = success {
        gauge(&mut out, LAST_SUCCESS, "When the last run that exited 0 ended (Unix time).", "", success);
    }
    gauge(&mut out, "cnpj_etl_last_run_duration_seconds", "How long the last run took.", "", run.seconds);
    let help = "The last run's exit code: 0 success, 1 failure, 3 the guard refused the month, 4 nothing new.";
    gauge(&mut out, "cnpj_etl_last_run_exit_code", help, "", run.exit_code);
    let help = "1 when the guard refused the last run's month.";
    gauge(&mut out, "cnpj_etl_last_run_guard_refused", help, "", u8::from(run.exit_code == EXIT_ANOMALIES));
    if let Some(dataset) = dataset {
        dataset_gauges(&mut out, dataset);
    }
    out
}

/// The gauges of the dataset `--db` holds after the run.
fn dataset_gauges(out: &mut String, d: &Dataset) {
    let month = d.month.as_deref().unwrap_or_default();
    let labels = format!("{{month=\"{}\",build_id=\"{}\"}}", label(month), label(&d.build_id));
    gauge(out, "cnpj_etl_dataset_info", "The dataset --db holds after the last run (always 1).", &labels, 1);
    // `YYYY-MM` as the number YYYYMM.
    if let Some((year, month)) = month.split_once('-')
        && let Ok(number) = format!("{year}{month}").parse::<u32>()
    {
        gauge(out, "cnpj_etl_dataset_month", "The month of the dataset --db holds, as YYYYMM.", "", number);
    }
    if let Some(rows) = d.rows_loaded {
        gauge(out, "cnpj_etl_dataset_rows_loaded", "Rows loaded by the build of the dataset --db holds.", "", rows);
    }
    if let Some(rows) = d.rows_rejected {
        gauge(out, "cnpj_etl_dataset_rows_rejected", "Rows rejected by the build of the dataset --db holds.", "", rows);
    }
}

/// One gauge: its HELP and TYPE lines and its sample.
fn gauge(out: &mut String, name: &str, help: &str, labels: &str, value: impl Display) {
    out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} gauge\n{name}{labels} {value}\n"));
}

/// A label value with `\`, `"` and newlines escaped.
fn label(value: &str) -> String {
    value.replace('\\', r"\\").replace('"', "\\\"").replace('\n', r"\n")
}

/// Writes `text` to a temporary file beside `path` (a name the collector ignores: it reads
/// `*.prom` only), readable by all (the collector runs as another user), then renames it over
/// `path`: the collector never reads half a file.
fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let folder = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut file = tempfile::Builder::new()
        .prefix(".cnpj_etl-")
        .suffix(".tmp")
        .tempfile_in(folder)
        .with_context(|| format!("creating a temporary file in {}", folder.display()))?;
    file.as_file().set_permissions(std::fs::Permissions::from_mode(0o644)).context("making it readable")?;
    file.write_all(text.as_bytes()).and_then(|()| file.as_file().sync_all()).context("writing it")?;
    file.persist(path).with_context(|| format!("renaming it to {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(run: Outcome, dataset: Option<Dataset>, expected: &[&str]) {
        let text = text(&run, dataset.as_ref());
        let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(samples, expected, "{text}");
        assert_eq!(text.lines().filter(|l| l.starts_with("# TYPE ")).count(), expected.len(), "{text}");
    }

    fn outcome(exit_code: u8, previous_success: Option<f64>) -> Outcome {
        Outcome { ended: 1_800_000_000.5, seconds: 12.25, exit_code, previous_success }
    }

    fn september() -> Dataset {
        Dataset {
            month: Some("2026-09".into()),
            build_id: "b\"1".into(),
            rows_loaded: Some(120),
            rows_rejected: Some(3),
        }
    }

    #[test]
    fn a_run_and_its_dataset() {
        let run = [
            "cnpj_etl_last_run_timestamp_seconds 1800000000.5",
            "cnpj_etl_last_success_timestamp_seconds 1800000000.5",
            "cnpj_etl_last_run_duration_seconds 12.25",
            "cnpj_etl_last_run_exit_code 0",
            "cnpj_etl_last_run_guard_refused 0",
        ];
        let dataset = [
            r#"cnpj_etl_dataset_info{month="2026-09",build_id="b\"1"} 1"#,
            "cnpj_etl_dataset_month 202609",
            "cnpj_etl_dataset_rows_loaded 120",
            "cnpj_etl_dataset_rows_rejected 3",
        ];
        check(outcome(0, Some(1.0)), Some(september()), &[&run[..], &dataset[..]].concat());
        check(outcome(0, None), None, &run);
    }

    #[test]
    fn a_run_that_did_not_succeed_carries_the_last_success_over() {
        check(
            outcome(3, Some(1_700_000_000.25)),
            None,
            &[
                "cnpj_etl_last_run_timestamp_seconds 1800000000.5",
                "cnpj_etl_last_success_timestamp_seconds 1700000000.25",
                "cnpj_etl_last_run_duration_seconds 12.25",
                "cnpj_etl_last_run_exit_code 3",
                "cnpj_etl_last_run_guard_refused 1",
            ],
        );
        // Never a success: no last success time.
        let never = text(&outcome(1, None), None);
        assert!(!never.contains(LAST_SUCCESS), "{never}");
        let unknown_month = Dataset { month: None, rows_loaded: None, rows_rejected: None, ..september() };
        let samples = text(&outcome(4, None), Some(&unknown_month));
        assert!(samples.ends_with("cnpj_etl_dataset_info{month=\"\",build_id=\"b\\\"1\"} 1\n"), "{samples}");
    }

    #[test]
    fn the_last_success_is_read_back() {
        let written = text(&outcome(0, None), Some(&september()));
        assert_eq!(last_success(&written), Some(1_800_000_000.5));
        assert_eq!(last_success("cnpj_etl_last_success_timestamp_seconds_x 2\n"), None);
        assert_eq!(last_success("# HELP cnpj_etl_last_success_timestamp_seconds x\n"), None);
        assert_eq!(last_success("cnpj_etl_last_success_timestamp_seconds nonsense\n"), None);
        assert_eq!(last_success(""), None);
    }

    #[test]
    fn exit_codes_are_those_main_exits_with() {
        assert_eq!(exit_code(&Ok(ExitCode::SUCCESS)), 0);
        assert_eq!(exit_code(&Ok(ExitCode::from(crate::EXIT_NOTHING_NEW))), 4);
        assert_eq!(exit_code(&Ok(ExitCode::from(EXIT_ANOMALIES))), 3);
        assert_eq!(exit_code(&Err(anyhow::anyhow!("failed"))), 1);
    }

    #[test]
    fn the_file_is_replaced_whole_and_readable_by_the_collector() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cnpj_etl.prom");
        std::fs::write(&path, "old").unwrap();
        write(&path, "new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o644);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file left");
    }
}
