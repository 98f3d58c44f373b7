//! `cnpj-etl`: builds a registry dataset from a month of RFB zips and shows its records.
//!
//! Exit codes: 0 success; 1 the work failed (build error, CNPJ not found); 2 invalid arguments.

mod progress;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use cnpj_build::{BuildOptions, BuildReport};
use cnpj_model::{CnpjQuery, Locale};
use cnpj_store::Store;

#[derive(Debug, Parser)]
#[command(name = "cnpj-etl", version, about = "Build and inspect the CNPJ registry dataset")]
struct Cli {
    /// More log output on stderr (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// No progress bars and no summary.
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build a DuckDB dataset from a folder of one month's RFB zips; replaces --db only on success.
    Build {
        /// Folder with the month's zips (Empresas*, Estabelecimentos*, Socios*, Simples, lookups; tax-regime zips optional).
        #[arg(long)]
        input: PathBuf,
        /// The dataset file to create or replace.
        #[arg(long)]
        db: PathBuf,
        /// Also write the build report (JSON) here.
        #[arg(long)]
        report: Option<PathBuf>,
        /// DuckDB's memory limit during the build.
        #[arg(long, default_value = "2GB")]
        memory_limit: String,
    },
    /// Print the detail record of a CNPJ (14 characters, or 8 for the head office) as JSON.
    Show {
        #[arg(long)]
        db: PathBuf,
        #[arg(long, default_value = "pt-br")]
        locale: Locale,
        /// The CNPJ, masked or not.
        cnpj: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let default = match cli.verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| default.into());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Build { input, db, report, memory_limit } => {
            let opts = BuildOptions { memory_limit, ..BuildOptions::new(&input, &db) };
            let observer = progress::Bars::new(cli.quiet);
            let result = cnpj_build::build(&opts, &observer);
            observer.clear();
            let built = result.with_context(|| format!("building {} from {}", db.display(), input.display()))?;
            if let Some(path) = report {
                let json = serde_json::to_string_pretty(&built)?;
                std::fs::write(&path, json + "\n").with_context(|| format!("writing {}", path.display()))?;
            }
            if !cli.quiet {
                eprint!("{}", summary(&built));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Show { db, locale, cnpj } => {
            let query = match CnpjQuery::parse(&cnpj) {
                Ok(q) => q,
                Err(e) => {
                    eprintln!("error: {cnpj:?} is not a CNPJ: {e}");
                    return Ok(ExitCode::from(2));
                }
            };
            let store = Store::open(&db)?;
            match store.detail(&query, locale)? {
                Some(record) => {
                    println!("{}", serde_json::to_string_pretty(&record)?);
                    Ok(ExitCode::SUCCESS)
                }
                None => {
                    eprintln!("error: no company with CNPJ {cnpj} in {}", db.display());
                    Ok(ExitCode::FAILURE)
                }
            }
        }
    }
}

fn summary(r: &BuildReport) -> String {
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
    out
}
