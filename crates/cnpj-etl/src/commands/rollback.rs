//! `cnpj-etl rollback`: the Postgres schema kept by the last publication served again.

use std::process::ExitCode;

use anyhow::Context;

use crate::cli::RollbackArgs;

pub fn rollback(args: RollbackArgs) -> anyhow::Result<ExitCode> {
    let pg = args.pg;
    let url = pg.postgres.as_deref().context("--postgres URL is required")?;
    cnpj_load::postgres::rollback(url, &pg.schema)?;
    eprintln!("schema {} serves the previous dataset again", pg.schema);
    Ok(ExitCode::SUCCESS)
}
