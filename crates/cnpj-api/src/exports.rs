//! A search exported, for the pages for people (`crate::site`, `/search/export`): what it would
//! cost, free, then its rows as search items, charged per row like batch.

use std::sync::Arc;

use cnpj_store::{Store, StoreError};
use serde_json::Value;

use crate::error::ApiError;
use crate::params::{self, Params};
use crate::server::{Caller, Shared, blocking, charge};

/// The most rows a search's export holds.
pub const EXPORT_MAX: u64 = 10_000;

/// What exporting a search would cost, free: `(total, rows, credits)`, the matches, the rows an
/// export of at most `rows` holds (never over `EXPORT_MAX`) and their price, per row like batch.
pub async fn export_cost(
    state: &Shared,
    store: Arc<Store>,
    params: &Params,
    rows: u64,
) -> Result<(u64, u64, i64), ApiError> {
    let locale = params::locale(params)?;
    let filters = params::search_filters(params, state.partners)?;
    let too_broad = params::too_broad(params);
    let (total, _) = blocking(move || match store.search(&filters, 1, 1, locale) {
        Err(StoreError::OverBudget) => Err(too_broad),
        found => Ok(found?),
    })
    .await?;
    let rows = rows.min(EXPORT_MAX).min(total);
    Ok((total, rows, rows as i64 * state.prices.batch_item))
}

/// The first `rows` matches (at most `EXPORT_MAX`) of a search as search items, in its order,
/// charged per row found like batch (as `export`; a 402 charges nothing).
pub async fn export(
    state: &Shared,
    caller: &Caller,
    store: Arc<Store>,
    params: &Params,
    rows: u64,
) -> Result<Vec<Value>, ApiError> {
    const PAGE: u64 = 1_000;
    let locale = params::locale(params)?;
    let filters = params::search_filters(params, state.partners)?;
    let too_broad = params::too_broad(params);
    let rows = rows.min(EXPORT_MAX);
    let records = blocking(move || {
        let mut records = Vec::new();
        for page in 1..=rows.div_ceil(PAGE) {
            let (_, found) = match store.search(&filters, page, PAGE, locale) {
                Err(StoreError::OverBudget) => return Err(too_broad),
                found => found?,
            };
            let last = (found.len() as u64) < PAGE;
            records.extend(found);
            if last {
                break;
            }
        }
        records.truncate(rows as usize);
        Ok(records)
    })
    .await?;
    if !records.is_empty() {
        charge(state, caller, records.len() as i64 * state.prices.batch_item, "export").await?;
    }
    Ok(records.iter().map(|r| r.search_item()).collect())
}
