//! The companies over HTTP (Bearer, rate-limited): `GET /api/v1/companies/search` and its
//! `/count`, `GET /api/v1/companies/{cnpj}` (and its `/history`, answered by `crate::changes`,
//! and its `/network`, by `crate::partners`),
//! `POST /api/v1/companies/batch`, `GET /api/v1/reference-data` and `GET /api/v1/cities`; and a
//! company's page for people. What each endpoint answers (the whole JSON body) is one function,
//! for its route, its MCP tool (`crate::mcp`) and the pages (`crate::site`) alike: one path for
//! validation, prices, locales and errors. `store` is the dataset the request arrived on.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use cnpj_model::{BatchRecord, CnpjQuery, Locale};
use cnpj_store::{SearchFilters, Store, StoreError};
use serde_json::{Value, json};

use crate::changes;
use crate::error::ApiError;
use crate::observe::COMPANY_ROUTE;
use crate::params::{self, Params};
use crate::server::{self, AppState, Caller, Served, Shared, blocking, charge, of_company, pagination};

/// The routes, each behind its method's check, the dataset the request arrived on and
/// authentication.
pub fn routes(state: &Shared) -> Router<Shared> {
    let gets = Router::new()
        .route("/api/v1/companies/search", get(search_route).fallback(server::not_allowed("GET")))
        .route("/api/v1/companies/count", get(count_route).fallback(server::not_allowed("GET")))
        .route(COMPANY_ROUTE, get(detail_route).fallback(server::not_allowed("GET")))
        .route("/api/v1/reference-data", get(reference_data_route).fallback(server::not_allowed("GET")))
        .route("/api/v1/cities", get(cities_route).fallback(server::not_allowed("GET")));
    let posts = Router::new().route("/api/v1/companies/batch", post(batch_route).fallback(server::not_allowed("POST")));
    server::dataset_routes(state, "GET", gets).merge(server::dataset_routes(state, "POST", posts))
}

/// GET /api/v1/companies/{cnpj}, and `…/history`.
async fn detail_route(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    Extension(Served { store, .. }): Extension<Served>,
    cnpj: Result<Path<String>, PathRejection>,
    params: Params,
) -> Result<Json<Value>, ApiError> {
    // A path that does not decode to UTF-8 (`%FF`) is no CNPJ either.
    let Path(cnpj) = cnpj.map_err(|_| ApiError::invalid("cnpj", "Invalid CNPJ: not UTF-8 text."))?;
    if let Some(cnpj) = cnpj.strip_suffix("/history") {
        return changes::history(&state, &caller, store, cnpj, &params).await.map(Json);
    }
    match cnpj.strip_suffix("/network") {
        Some(_) if !state.partners => Err(ApiError::NotFound),
        Some(cnpj) => crate::partners::network(&state, &caller, store, cnpj, &params).await.map(Json),
        None => detail(&state, &caller, store, &cnpj, &params).await.map(Json),
    }
}

async fn search_route(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    Extension(Served { store, .. }): Extension<Served>,
    params: Params,
) -> Result<Json<Value>, ApiError> {
    search(&state, &caller, store, &params).await.map(Json)
}

async fn count_route(
    State(state): State<Shared>,
    Extension(Served { store, .. }): Extension<Served>,
    params: Params,
) -> Result<Json<Value>, ApiError> {
    count(&state, store, &params).await.map(Json)
}

async fn reference_data_route(
    Extension(Served { store, .. }): Extension<Served>,
    params: Params,
) -> Result<Json<Value>, ApiError> {
    reference_data(&store, &params).map(Json)
}

async fn cities_route(
    Extension(Served { store, .. }): Extension<Served>,
    params: Params,
) -> Result<Json<Value>, ApiError> {
    cities(&store, &params).map(Json)
}

async fn batch_route(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    Extension(Served { store, .. }): Extension<Served>,
    params: Params,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let body = body.map_err(ApiError::body_refused)?;
    batch(&state, &caller, store, &params, &body).await.map(Json)
}

/// A detail record (the CNPJ as sent in the path).
pub async fn detail(
    state: &Shared,
    caller: &Caller,
    store: Arc<Store>,
    cnpj: &str,
    params: &Params,
) -> Result<Value, ApiError> {
    of_company(state, caller, cnpj, params, "detail", move |query, locale| store.detail(query, locale)).await
}

pub async fn search(state: &Shared, caller: &Caller, store: Arc<Store>, params: &Params) -> Result<Value, ApiError> {
    let locale = params::locale(params)?;
    let (page, per_page) = params::pagination(params)?;
    let filters = params::search_filters(params, state.partners)?;
    let too_broad = params::too_broad(params);
    let (total, records) = blocking(move || match store.search(&filters, page, per_page, locale) {
        Err(StoreError::OverBudget) => Err(too_broad),
        found => Ok(found?),
    })
    .await?;
    if !records.is_empty() {
        charge(state, caller, state.prices.search, "search").await?;
    }
    let mut body = serde_json::Map::from_iter([("success".to_owned(), Value::Bool(true))]);
    body.extend(pagination(total, page, per_page, records.len()));
    body.insert("data".into(), records.iter().map(|r| r.search_item()).collect());
    Ok(Value::Object(body))
}

/// GET /api/v1/companies/count: the total a search of the same filters would answer, free (the
/// route's rate limit counts it), so that a query is sized before it is paid for.
pub async fn count(state: &Shared, store: Arc<Store>, params: &Params) -> Result<Value, ApiError> {
    let filters = params::search_filters(params, state.partners)?;
    let too_broad = params::too_broad(params);
    let total = blocking(move || match store.search_count(&filters) {
        Err(StoreError::OverBudget) => Err(too_broad),
        counted => Ok(counted?),
    })
    .await?;
    Ok(json!({"success": true, "total": total}))
}

/// A company's page for people (`cnpj-pages`), for the CNPJ as sent: its batch record (the
/// detail record with its tax regime; `null` when it is not in this month), a page of its
/// company's establishments (`page`, `per_page` as in search) and its history, newest first.
/// Read like detail and priced like detail: 1 when either the record or a history answers. With
/// partners served (`serve --partners`), also `partners`: the company's partners with their ids,
/// in the record's order, for the page to link each to its own.
pub async fn company_page(
    state: &Shared,
    caller: &Caller,
    store: Arc<Store>,
    cnpj: &str,
    params: &Params,
) -> Result<Value, ApiError> {
    let (page, per_page) = params::pagination(params)?;
    let with_partners = state.partners;
    of_company(state, caller, cnpj, params, "detail", move |query, locale| {
        let record = store.batch(query, locale)?;
        let Some(history) = store.history(query, locale)? else { return Ok(None) };
        let basico = query.basico().as_bytes().try_into().expect("a cnpj_basico has 8 characters");
        let company = SearchFilters { cnpj: Some(CnpjQuery::Basico(basico)), ..Default::default() };
        let (total, establishments) = store.search(&company, page, per_page, locale)?;
        let mut listed = pagination(total, page, per_page, establishments.len());
        listed.insert("data".into(), establishments.iter().map(|r| r.search_item()).collect());
        let mut page = json!({"record": record, "establishments": listed, "history": history});
        if with_partners {
            let partners = store.company_partners(query)?.into_iter();
            page["partners"] = partners
                .map(|(id, nome, documento)| json!({"partner_id": id, "nome": nome, "documento": documento}))
                .collect();
        }
        Ok(Some(page))
    })
    .await
}

pub fn reference_data(store: &Store, params: &Params) -> Result<Value, ApiError> {
    let locale = params::locale(params)?;
    Ok(json!({"success": true, "data": store.reference_data(locale)}))
}

pub fn cities(store: &Store, params: &Params) -> Result<Value, ApiError> {
    params::locale(params)?;
    let (page, per_page) = params::pagination(params)?;
    let state_filter = params::city_state(params)?;
    let (total, items) = store.cities(state_filter.as_deref(), params::term(params)?, page, per_page);
    let pages = pagination(total, page, per_page, items.len());
    Ok(json!({"success": true, "data": items, "pagination": pages}))
}

const INVALID_FORMAT: &str = "Invalid CNPJ format. Provide 8 digits (cnpj_basico) or 14 digits (full CNPJ).";

/// POST /api/v1/companies/batch, its body as sent.
pub async fn batch(
    state: &Shared,
    caller: &Caller,
    store: Arc<Store>,
    params: &Params,
    body: &[u8],
) -> Result<Value, ApiError> {
    let locale = params::locale(params)?;
    let entries = batch_entries(body)?;
    let total_requested = entries.len();
    let items = distinct(entries);
    let lookup_state = Arc::clone(state);
    let results = blocking(move || look_up(&lookup_state, &store, items, locale)).await?;
    let found = results.iter().filter(|(_, r)| matches!(r, Ok(Some(_)))).count() as i64;
    let cost = found * state.prices.batch_item;
    let remaining = charge(state, caller, cost, "batch").await?;
    let data: Vec<Value> = results
        .into_iter()
        .map(|(cnpj, result)| match result {
            Ok(Some(record)) => json!({"cnpj": cnpj, "success": true, "data": *record}),
            Ok(None) => json!({"cnpj": cnpj, "success": false, "error": "Company not found."}),
            Err(()) => json!({"cnpj": cnpj, "success": false, "error": INVALID_FORMAT}),
        })
        .collect();
    Ok(json!({
        "success": true,
        "data": data,
        "total_requested": total_requested,
        "total_found": found,
        "credits_used": cost,
        "credits_remaining": remaining,
    }))
}

/// The entries of a batch's body, `{"cnpjs": [1 to 100 strings]}` and nothing else.
fn batch_entries(body: &[u8]) -> Result<Vec<String>, ApiError> {
    match serde_json::from_slice::<Value>(body) {
        // `additionalProperties: false`, as the OpenAPI document says.
        Ok(Value::Object(map)) if map.keys().any(|k| k != "cnpjs") => {
            let unknown = map.keys().find(|k| *k != "cnpjs").map_or("", String::as_str);
            Err(ApiError::invalid(unknown, "Unknown property: the body is {\"cnpjs\": [strings]}."))
        }
        Ok(Value::Object(map)) => match map.get("cnpjs") {
            Some(Value::Array(items)) if (1..=100).contains(&items.len()) => items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or_else(|| ApiError::invalid("cnpjs", "Every entry must be a string.")),
            Some(Value::Array(_)) => Err(ApiError::invalid("cnpjs", "Send 1 to 100 CNPJs.")),
            _ => Err(ApiError::invalid("cnpjs", "The body must be {\"cnpjs\": [strings]}.")),
        },
        _ => Err(ApiError::invalid("body", "The body must be a JSON object {\"cnpjs\": [strings]}.")),
    }
}

/// A batch's entries parsed (`Err` for an invalid one), deduplicated by normalized form (an
/// invalid entry by its exact text), keeping first occurrences.
fn distinct(entries: Vec<String>) -> Vec<(String, Result<CnpjQuery, ()>)> {
    let mut seen: HashMap<String, ()> = HashMap::new();
    let mut items = Vec::new();
    for entry in entries {
        let parsed = CnpjQuery::parse(&entry).map_err(|_| ());
        let key = match &parsed {
            Ok(CnpjQuery::Full(c)) => c.to_string(),
            Ok(q @ CnpjQuery::Basico(_)) => q.basico().to_owned(),
            Err(()) => format!("invalid:{entry}"),
        };
        if seen.insert(key, ()).is_none() {
            items.push((entry, parsed));
        }
    }
    items
}

/// What a batch found of each entry, from the batch cache or the store (blocking); the cache's
/// hits and misses are counted in `cnpj_batch_cache_lookups_total`.
#[allow(clippy::type_complexity)]
fn look_up(
    state: &AppState,
    store: &Store,
    items: Vec<(String, Result<CnpjQuery, ()>)>,
    locale: Locale,
) -> Result<Vec<(String, Result<Option<Arc<BatchRecord>>, ()>)>, ApiError> {
    let mut results = Vec::with_capacity(items.len());
    for (entry, parsed) in items {
        let found = match parsed {
            Err(()) => Err(()),
            Ok(query) => {
                let key = match &query {
                    CnpjQuery::Full(c) => c.to_string(),
                    q => q.basico().to_owned(),
                };
                let cached = state.cache.get(&key, locale);
                let result = if cached.is_some() { "hit" } else { "miss" };
                metrics::counter!("cnpj_batch_cache_lookups_total", "result" => result).increment(1);
                match cached {
                    Some(cached) => Ok(cached),
                    None => {
                        let record = store.batch(&query, locale)?.map(Arc::new);
                        state.cache.put(&key, locale, record.clone());
                        Ok(record)
                    }
                }
            }
        };
        results.push((entry, found));
    }
    Ok(results)
}
