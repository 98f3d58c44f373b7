//! `cnpj-etl export`: a built dataset, whole or filtered, as Parquet or CSV for other engines;
//! and the export with a line per table that `run --export` uses too.

use std::process::ExitCode;

use anyhow::Context;

use super::print;
use crate::cli::ExportArgs;

pub fn export(args: ExportArgs, quiet: bool) -> anyhow::Result<ExitCode> {
    let ExportArgs { db, out, format, locale, partition_by, memory_limit, filters } = args;
    let opts = cnpj_store::ExportOptions {
        db,
        out,
        format: format.into(),
        locale,
        partition_by_uf: partition_by.is_some(),
        filters: filters.filters(),
        memory_limit,
        producer: producer(),
    };
    let manifest = export_dataset(&opts, quiet)?;
    print(&serde_json::to_string_pretty(&manifest)?)?;
    Ok(ExitCode::SUCCESS)
}

/// The `producer` of an export's manifest: this program and its version.
pub fn producer() -> String {
    format!("cnpj-etl {}", env!("CARGO_PKG_VERSION"))
}

/// Exports a dataset (see `cnpj_store::export`), with a line per table on stderr.
pub fn export_dataset(opts: &cnpj_store::ExportOptions, quiet: bool) -> anyhow::Result<cnpj_store::Manifest> {
    let started = std::time::Instant::now();
    let manifest = cnpj_store::export(opts)
        .with_context(|| format!("exporting {} into {}", opts.db.display(), opts.out.display()))?;
    if !quiet {
        for t in &manifest.tables {
            let bytes: u64 = t.files.iter().map(|f| f.bytes).sum();
            eprintln!("  {:<16}{:>14} rows {:>6} files {:>14} bytes", t.name, t.rows, t.files.len(), bytes);
        }
        eprintln!("exported {} in {:.1} s", opts.out.display(), started.elapsed().as_secs_f64());
    }
    Ok(manifest)
}
