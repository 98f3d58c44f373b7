//! Changes over HTTP (Bearer, rate-limited): `GET /api/v1/changes`, the events of the
//! months held, filtered; and what it and a company's history answer (the history's route,
//! `GET /api/v1/companies/{cnpj}/history`, is the companies'), for their routes and MCP tools
//! (`crate::mcp`) alike. A watchlist's events are a page of changes too (`crate::watchlists`).

use std::sync::Arc;

use axum::extract::State;
use axum::routing::get;
use axum::{Extension, Json, Router};
use cnpj_store::Store;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::params::{self, Params};
use crate::server::{self, Caller, Served, Shared, blocking, charge, of_company, pagination};

/// The route, behind its method's check, the dataset the request arrived on and authentication.
pub fn routes(state: &Shared) -> Router<Shared> {
    let routes = Router::new().route("/api/v1/changes", get(changes_route).fallback(server::not_allowed("GET")));
    server::dataset_routes(state, "GET", routes)
}

async fn changes_route(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    Extension(Served { store, .. }): Extension<Served>,
    params: Params,
) -> Result<Json<Value>, ApiError> {
    changes(&state, &caller, store, &params).await.map(Json)
}

/// GET /api/v1/companies/{cnpj}/history: priced like detail, 1 when it answers.
pub async fn history(
    state: &Shared,
    caller: &Caller,
    store: Arc<Store>,
    cnpj: &str,
    params: &Params,
) -> Result<Value, ApiError> {
    of_company(state, caller, cnpj, params, "history", move |query, locale| store.history(query, locale)).await
}

/// GET /api/v1/changes: the envelope and pagination of search, priced like search.
pub async fn changes(state: &Shared, caller: &Caller, store: Arc<Store>, params: &Params) -> Result<Value, ApiError> {
    let filters = params::change_filters(params)?;
    changes_page(state, caller, store, params, filters, "changes").await
}

/// A page of the changes `filters` match (`/changes`, and a watchlist's events): the envelope
/// and pagination of search, priced like search (charged as `what`).
pub(crate) async fn changes_page(
    state: &Shared,
    caller: &Caller,
    store: Arc<Store>,
    params: &Params,
    filters: cnpj_store::ChangeFilters,
    what: &'static str,
) -> Result<Value, ApiError> {
    let locale = params::locale(params)?;
    let (page, per_page) = params::pagination(params)?;
    let (total, items) = blocking(move || Ok(store.changes(&filters, page, per_page, locale)?)).await?;
    if !items.is_empty() {
        charge(state, caller, state.prices.search, what).await?;
    }
    let mut body = serde_json::Map::from_iter([("success".to_owned(), Value::Bool(true))]);
    body.extend(pagination(total, page, per_page, items.len()));
    body.insert("data".into(), json!(items));
    Ok(Value::Object(body))
}
