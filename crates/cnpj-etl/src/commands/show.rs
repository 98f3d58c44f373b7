//! `cnpj-etl show`: the detail record of a CNPJ, as JSON, from a DuckDB file or a Postgres schema.

use std::process::ExitCode;

use anyhow::Context;
use cnpj_model::CnpjQuery;
use cnpj_store::{Source, Store};

use super::print;
use crate::cli::ShowArgs;

pub fn show(args: ShowArgs) -> anyhow::Result<ExitCode> {
    let ShowArgs { db, pg, locale, cnpj } = args;
    let query = match CnpjQuery::parse(&cnpj) {
        Ok(q) => q,
        Err(e) => {
            eprintln!("error: {cnpj:?} is not a CNPJ: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let source = pg.source().or(db.map(Source::DuckDb)).context("--db or --postgres is required")?;
    let store = Store::open(&source)?;
    match store.detail(&query, locale)? {
        Some(record) => {
            print(&serde_json::to_string_pretty(&record)?)?;
            Ok(ExitCode::SUCCESS)
        }
        None => {
            eprintln!("error: no company with CNPJ {cnpj} in {source}");
            Ok(ExitCode::FAILURE)
        }
    }
}
