//! Partners over HTTP (contract §14, Bearer, rate-limited): `GET /api/v1/partners/search`,
//! `GET /api/v1/partners/{partner_id}` and a company's network (`GET
//! /api/v1/companies/{cnpj}/network`, routed by `crate::companies`). As for the companies, each
//! answer is one function for its route, its MCP tool and the pages. Served unless `serve
//! --partners off` (then these routes are not there: 404).

use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Extension, Json, Router};
use cnpj_store::{Store, StoreError};
use serde_json::Value;

use crate::error::ApiError;
use crate::params::{self, Params};
use crate::server::{self, Caller, Served, Shared, blocking, charge, of_company, pagination};

pub fn routes(state: &Shared) -> Router<Shared> {
    let routes = Router::new()
        .route("/api/v1/partners/search", get(search_route).fallback(server::not_allowed("GET")))
        .route("/api/v1/partners/{partner_id}", get(partner_route).fallback(server::not_allowed("GET")));
    server::dataset_routes(state, "GET", routes)
}

async fn search_route(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    Extension(Served { store, .. }): Extension<Served>,
    params: Params,
) -> Result<Json<Value>, ApiError> {
    search(&state, &caller, store, &params).await.map(Json)
}

async fn partner_route(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    Extension(Served { store, .. }): Extension<Served>,
    id: Result<Path<String>, PathRejection>,
    params: Params,
) -> Result<Json<Value>, ApiError> {
    let Ok(Path(id)) = id else { return Err(ApiError::PartnerNotFound) };
    partner(&state, &caller, store, &id, &params).await.map(Json)
}

/// The partners' search: priced like a search (when the page has items).
pub async fn search(state: &Shared, caller: &Caller, store: Arc<Store>, params: &Params) -> Result<Value, ApiError> {
    let locale = params::locale(params)?;
    let (page, per_page) = params::pagination(params)?;
    let filters = params::partner_filters(params)?;
    let named = if filters.name.is_some() { "name" } else { "state" };
    let (total, items) = blocking(move || match store.search_partners(&filters, page, per_page, locale) {
        Err(StoreError::OverBudget) => Err(ApiError::invalid(
            named,
            "Too broad to search in time: add letters or digits to the name, or another filter.",
        )),
        found => Ok(found?),
    })
    .await?;
    if !items.is_empty() {
        charge(state, caller, state.prices.search, "partner_search").await?;
    }
    let mut body = serde_json::Map::from_iter([("success".to_owned(), Value::Bool(true))]);
    body.extend(pagination(total, page, per_page, items.len()));
    body.insert("data".into(), serde_json::to_value(items)?);
    Ok(Value::Object(body))
}

/// A partner with a page of its companies: priced like detail (when found).
pub async fn partner(
    state: &Shared,
    caller: &Caller,
    store: Arc<Store>,
    id: &str,
    params: &Params,
) -> Result<Value, ApiError> {
    let locale = params::locale(params)?;
    let (page, per_page) = params::pagination(params)?;
    let id = params::partner_id(id).ok_or(ApiError::PartnerNotFound)?;
    let found = blocking(move || Ok(store.partner(&id, page, per_page, locale)?)).await?;
    let (total, record) = found.ok_or(ApiError::PartnerNotFound)?;
    charge(state, caller, state.prices.detail, "partner").await?;
    let listed = record.companies.len();
    let mut body = serde_json::Map::from_iter([("success".to_owned(), Value::Bool(true))]);
    body.insert("data".into(), serde_json::to_value(record)?);
    body.extend(pagination(total, page, per_page, listed));
    Ok(Value::Object(body))
}

/// A company's network (the CNPJ as sent): priced like detail (when the company is found).
pub async fn network(
    state: &Shared,
    caller: &Caller,
    store: Arc<Store>,
    cnpj: &str,
    params: &Params,
) -> Result<Value, ApiError> {
    let options = params::network_options(params)?;
    of_company(state, caller, cnpj, params, "network", move |query, locale| store.network(query, options, locale)).await
}
