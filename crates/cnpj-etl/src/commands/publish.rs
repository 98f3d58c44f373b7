//! `cnpj-etl publish`: a built DuckDB dataset copied into a Postgres schema and swapped in (what
//! `build --postgres` and `run --postgres` do after the build).

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

use crate::cli::{PostgresArgs, PublishArgs};
use crate::progress;

pub fn publish(args: PublishArgs, quiet: bool) -> anyhow::Result<ExitCode> {
    publish_dataset(&args.db, &args.pg, args.pg_streams, quiet)?;
    Ok(ExitCode::SUCCESS)
}

/// Copies the dataset at `db` into Postgres and swaps it in (see `cnpj_load::postgres`).
pub fn publish_dataset(db: &Path, pg: &PostgresArgs, streams: u8, quiet: bool) -> anyhow::Result<()> {
    let url = pg.postgres.as_deref().context("--postgres URL is required")?;
    let started = std::time::Instant::now();
    let bar = progress::rows_bar(quiet, "copying into Postgres");
    let published = cnpj_load::postgres::publish(db, url, &pg.schema, usize::from(streams), &|n| bar.inc(n));
    bar.finish_and_clear();
    let published =
        published.with_context(|| format!("publishing {} into Postgres schema {}", db.display(), pg.schema))?;
    if !quiet {
        let rows: u64 = published.tables.iter().map(|(_, n)| n).sum();
        eprintln!(
            "published {rows} rows into Postgres schema {} in {:.1} s (previous kept as {}_previous)",
            published.schema,
            started.elapsed().as_secs_f64(),
            published.schema
        );
    }
    Ok(())
}
