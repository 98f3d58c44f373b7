//! `cnpj-etl build`: a month folder into a DuckDB file and/or a Postgres schema; and the build
//! with progress bars and a summary that `run` uses too.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use cnpj_build::{BuildOptions, BuildReport};

use super::publish::publish_dataset;
use super::writable;
use crate::cli::BuildArgs;
use crate::progress;

pub fn build(args: BuildArgs, quiet: bool) -> anyhow::Result<ExitCode> {
    let BuildArgs { input, month, db, pg, pg_streams, report, memory_limit, checks, previous, guard } = args;
    if let Some(db) = &db {
        writable(db, "--db")?;
    }
    if let Some(report) = &report {
        writable(report, "--report")?;
    }
    // With --postgres only, the DuckDB build goes to a temporary file, deleted afterwards.
    let scratch = match &db {
        Some(_) => None,
        None => Some(tempfile::Builder::new().prefix("cnpj-build-").tempdir().context("creating a temporary folder")?),
    };
    let db = db.unwrap_or_else(|| scratch.as_ref().expect("a scratch folder").path().join("dataset.duckdb"));
    // The build writes the report before it renames the dataset into place.
    let opts =
        checks.apply(BuildOptions { month, memory_limit, report: report.clone(), ..BuildOptions::new(&input, &db) });
    if let Err(code) = build_month(&guard.apply(previous, opts), quiet, report.as_deref())? {
        return Ok(code);
    }
    if pg.postgres.is_some() {
        publish_dataset(&db, &pg, pg_streams, quiet)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs a build with progress bars; a month refused by the guard is reported with its own exit
/// code (the error is printed here), any other failure is an error. The summary names the report
/// `shown` (where it ends up).
pub fn build_month(
    opts: &BuildOptions,
    quiet: bool,
    shown: Option<&Path>,
) -> anyhow::Result<Result<BuildReport, ExitCode>> {
    let observer = progress::Bars::new(quiet);
    let result = cnpj_build::build(opts, &observer);
    observer.clear();
    match result {
        Err(e @ cnpj_build::BuildError::Anomalies { .. }) => {
            eprintln!("error: {e}");
            Ok(Err(ExitCode::from(crate::EXIT_ANOMALIES)))
        }
        result => {
            let built =
                result.with_context(|| format!("building {} from {}", opts.db.display(), opts.input.display()))?;
            if !quiet {
                eprint!("{}", summary_text(&built, shown));
            }
            Ok(Ok(built))
        }
    }
}

/// What a build did, for stderr: the dataset, its tables, its rows, and where its report is.
fn summary_text(r: &BuildReport, report: Option<&Path>) -> String {
    let mut out = format!(
        "built {} (source month {}) in {:.1} s\n",
        r.dataset,
        r.source_month.as_deref().unwrap_or("unknown"),
        r.seconds.total
    );
    for t in &r.tables {
        out.push_str(&format!("  {:<22}{:>14}\n", t.table, t.rows));
    }
    out.push_str(&format!(
        "  rows read {}, loaded {}, duplicates {} ({} differing), rejected {}\n",
        r.rows_read, r.rows_loaded, r.duplicates, r.duplicates_differing, r.rows_rejected
    ));
    if !r.unknown_codes.is_empty() {
        out.push_str(&format!("  unknown codes: {} (see the report)\n", r.unknown_codes.len()));
    }
    if let Some(report) = report {
        let page = cnpj_build::page_path(report);
        out.push_str(&format!("  report {}, its page {}\n", report.display(), page.display()));
    }
    out
}
