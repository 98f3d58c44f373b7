//! The HTTP service: routes, authentication and rate limiting, what each endpoint answers (for its
//! route and its MCP tool alike), credits, dataset swap; and the probes and status an operator (or
//! a load balancer) asks for, none of them authenticated, charged or counted: `/healthz` (the
//! process answers), `/readyz` (the dataset and the accounts store answer) and `/api/v1/status`
//! (the dataset served: its month, its build, since when).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use cnpj_accounts::{Accounts, User};
use cnpj_model::{BatchRecord, CnpjQuery, Locale};
use cnpj_store::{SearchFilters, Store, StoreError};
use serde_json::{Value, json};

use crate::docs;
use crate::error::ApiError;
use crate::limits::{BatchCache, RateLimiter};
use crate::observe::{self, COMPANY_ROUTE, Usage};
use crate::params::{self, Params};
use crate::usage::{self as counting, UsageCounter};

/// Credits per request (by default 1: a detail found, each batch CNPJ found, a non-empty page).
#[derive(Clone, Copy, Debug)]
pub struct Prices {
    /// A detail record found; a company history answered (priced like detail).
    pub detail: i64,
    pub batch_item: i64,
    /// A search, or a page of changes (priced like search), with at least one item.
    pub search: i64,
}

impl Default for Prices {
    fn default() -> Prices {
        Prices { detail: 1, batch_item: 1, search: 1 }
    }
}

/// The dataset being served, and since when (a swap resets it).
#[derive(Clone)]
pub struct Served {
    pub store: Arc<Store>,
    pub since: SystemTime,
}

pub struct AppState {
    served: RwLock<Served>,
    pub(crate) accounts: Arc<Accounts>,
    limiter: RateLimiter,
    cache: BatchCache,
    pub(crate) prices: Prices,
    usage: UsageCounter,
    pub(crate) watchlists: crate::watching::Settings,
}

impl AppState {
    pub fn new(store: Store, accounts: Accounts, limiter: RateLimiter, prices: Prices) -> AppState {
        AppState {
            served: RwLock::new(Served { store: Arc::new(store), since: SystemTime::now() }),
            accounts: Arc::new(accounts),
            limiter,
            cache: BatchCache::new(Duration::from_secs(6 * 3600)),
            prices,
            usage: UsageCounter::default(),
            watchlists: crate::watching::Settings::default(),
        }
    }

    pub fn accounts(&self) -> &Arc<Accounts> {
        &self.accounts
    }

    /// Writes the usage counted so far to the accounts store (blocking).
    pub fn flush_usage(&self) {
        if let Err(e) = timed("record_usage", || self.usage.flush(&self.accounts)) {
            tracing::warn!(error = %e, "writing the usage counts failed; kept for the next try");
        }
    }

    /// Counts a request of `user_id` in usage (no token: a page's, `crate::site`).
    pub(crate) fn count_usage(&self, user_id: i64, endpoint: &'static str, status: u16, credits: i64) {
        self.usage.record(user_id, endpoint, status, credits, None);
    }

    /// The rate limit of `user_id` at `per_minute`, counted for one more request: the requests
    /// left, or a 429 (shared by replicas on Postgres, in memory on SQLite, as `authenticate`).
    pub(crate) async fn admit(self: &Arc<Self>, user_id: i64, per_minute: u32) -> Result<u32, ApiError> {
        let verdict = if self.accounts.is_shared() {
            let (accounts, window) = (Arc::clone(&self.accounts), self.limiter.window());
            blocking(move || Ok(timed("rate_check", || accounts.rate_check(user_id, per_minute, window))?)).await?
        } else {
            self.limiter.check(user_id, per_minute)
        };
        verdict.map_err(|retry_after| ApiError::TooManyRequests { retry_after })
    }

    /// The watchlists' settings (the default cap of watched CNPJs per user, which webhook
    /// URLs are allowed).
    pub fn with_watchlists(mut self, settings: crate::watching::Settings) -> AppState {
        self.watchlists = settings;
        self
    }

    /// The dataset being served; a request keeps the one it started with (`with_dataset`).
    pub fn served(&self) -> Served {
        self.served.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Opens the dataset again and serves it from now on; the batch cache is dropped.
    pub fn reload(&self) -> Result<String, cnpj_store::StoreError> {
        let store = self.served().store.reopen()?;
        let month = store.source_month().to_owned();
        let served = Served { store: Arc::new(store), since: SystemTime::now() };
        *self.served.write().unwrap_or_else(std::sync::PoisonError::into_inner) = served;
        self.cache.clear();
        Ok(month)
    }

    /// At shutdown, once the last request was answered: writes the usage counts, then the
    /// accounts store's debits into its file.
    pub fn flush(&self) {
        self.flush_usage();
        match self.accounts.flush() {
            Ok(()) => tracing::info!("accounts store flushed"),
            Err(e) => tracing::error!(error = %e, "flushing the accounts store failed"),
        }
    }
}

/// The authenticated user of a request, and the credits charged to them by it.
#[derive(Clone)]
pub struct Caller {
    pub(crate) user: User,
    charged: Arc<AtomicI64>,
}

impl Caller {
    /// A caller that no token named: a person of the pages (`crate::site`), charged nothing yet.
    pub(crate) fn new(user: User) -> Caller {
        Caller { user, charged: Arc::default() }
    }

    pub fn user_id(&self) -> i64 {
        self.user.id
    }

    /// The credits charged to this caller so far.
    pub(crate) fn charged(&self) -> i64 {
        self.charged.load(Ordering::SeqCst)
    }
}

/// Runs `f`, a call of the accounts store, timed in `cnpj_accounts_duration_seconds`.
pub(crate) fn timed<T>(operation: &'static str, f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let result = f();
    metrics::histogram!("cnpj_accounts_duration_seconds", "operation" => operation).record(started.elapsed());
    result
}

pub type Shared = Arc<AppState>;

pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| ApiError::Internal(e.to_string()))?
}

/// The largest request body (413 beyond it).
pub const MAX_BODY: usize = 64 * 1024;
/// The longest request target (path and query) answered with more than a 414.
pub const MAX_URI: usize = 8 * 1024;

/// The month of the dataset that answered, on every response of a route that reads it.
const DATASET_MONTH: HeaderName = HeaderName::from_static("x-dataset-month");

/// Every route. Each answers its methods: any other, HEAD included, is a 405 with `Allow`, before
/// authentication (so it is neither charged nor counted by the rate limit). `mcp` answers `/mcp`
/// (the MCP endpoint, whose tools call the functions below); `routes` are the other modules'
/// (the account, watchlists, their deliveries), each behind its own methods and authentication;
/// `pages` the pages for people (`cnpj-pages`, which answer their own methods).
pub fn router<M>(state: Shared, body_timeout: Duration, mcp: M, routes: Router<Shared>, pages: Router) -> Router
where
    M: tower::Service<Request, Error = std::convert::Infallible> + Clone + Send + Sync + 'static,
    M::Response: IntoResponse,
    M::Future: Send + 'static,
{
    let authenticate = || middleware::from_fn_with_state(Arc::clone(&state), authenticate);
    let with_dataset = || middleware::from_fn_with_state(Arc::clone(&state), with_dataset);
    let gets = Router::new()
        .route("/api/v1/companies/search", get(search_route).fallback(not_allowed("GET")))
        .route(COMPANY_ROUTE, get(detail_route).fallback(not_allowed("GET")))
        .route("/api/v1/changes", get(changes_route).fallback(not_allowed("GET")))
        .route("/api/v1/reference-data", get(reference_data_route).fallback(not_allowed("GET")))
        .route("/api/v1/cities", get(cities_route).fallback(not_allowed("GET")))
        .route_layer(authenticate())
        .route("/api/v1/status", get(status).fallback(not_allowed("GET")))
        .route_layer(with_dataset())
        .route("/healthz", get(healthz).fallback(not_allowed("GET")))
        .route("/readyz", get(readyz).fallback(not_allowed("GET")))
        .route("/api/v1/openapi.json", get(openapi).fallback(not_allowed("GET")))
        .route("/docs", get(docs::page).fallback(not_allowed("GET")))
        .route("/docs/{file}", get(docs::asset).fallback(not_allowed("GET")))
        .route_layer(middleware::from_fn_with_state("GET", only_method));
    let posts = Router::new()
        .route("/api/v1/companies/batch", post(batch_route).fallback(not_allowed("POST")))
        .route_layer(authenticate())
        .route_layer(with_dataset())
        .route_layer(middleware::from_fn_with_state("POST", only_method));
    // Authenticated and rate-limited as the REST routes are (its tools charge as they do).
    let mcp = Router::new()
        .route_service("/mcp", mcp)
        .route_layer(authenticate())
        .route_layer(with_dataset())
        .route_layer(middleware::from_fn_with_state("POST", only_method));
    Router::new()
        .merge(gets)
        .merge(posts)
        .merge(routes)
        .merge(mcp)
        .with_state(state)
        .merge(pages)
        .fallback(|| async { ApiError::NotFound })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .layer(middleware::from_fn_with_state(body_timeout, read_body))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(|_| ApiError::Internal("panic".into()).into_response()))
        .layer(middleware::from_fn(observe::observe))
}

/// A 405 naming the route's methods in `Allow`.
fn method_not_allowed(allowed: &'static str) -> Response {
    let mut response = ApiError::MethodNotAllowed.into_response();
    response.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allowed));
    response
}

/// The fallback of a route for the methods it does not answer (axum's would say `GET,HEAD`; a
/// route's own fallback is also kept by `method_not_allowed_fallback`, and so stays behind
/// `only_method`).
pub(crate) fn not_allowed(allowed: &'static str) -> impl Fn() -> std::future::Ready<Response> + Clone {
    move || std::future::ready(method_not_allowed(allowed))
}

/// The route layer that answers a wrong method before authentication (HEAD on a GET route included,
/// which axum would give to the GET handler, charging it); `allowed` is one method or several
/// (`GET, POST`).
pub(crate) async fn only_method(State(allowed): State<&'static str>, request: Request, next: Next) -> Response {
    if allowed.split(", ").any(|method| method == request.method().as_str()) {
        return next.run(request).await;
    }
    method_not_allowed(allowed)
}

/// Before routing: a request target over `MAX_URI` is a 414, and a body is read whole (at most
/// `MAX_BODY`, else 413) within `timeout` of the request head, else 408 and the connection closed.
async fn read_body(State(timeout): State<Duration>, request: Request, next: Next) -> Response {
    if request.uri().path_and_query().map_or(0, |pq| pq.as_str().len()) > MAX_URI {
        return ApiError::UriTooLong.into_response();
    }
    let headers = request.headers();
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return ApiError::PayloadTooLarge.into_response();
    }
    if declared.unwrap_or(0) == 0 && !headers.contains_key(header::TRANSFER_ENCODING) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let limited = http_body_util::Limited::new(body, MAX_BODY);
    let bytes = match tokio::time::timeout(timeout, http_body_util::BodyExt::collect(limited)).await {
        Err(_) => return ApiError::RequestTimeout.into_response(),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => return ApiError::PayloadTooLarge.into_response(),
        Ok(Err(e)) => return ApiError::invalid("body", format!("The body could not be read: {e}.")).into_response(),
        Ok(Ok(collected)) => collected.to_bytes(),
    };
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

/// The token of an `Authorization: Bearer <token>` header; the scheme is case-insensitive
/// (RFC 9110 §11.1).
fn bearer_token(request: &Request) -> Option<String> {
    let value = request.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim_start().split_once([' ', '\t'])?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then(|| token.to_owned())
}

/// Gives a data route the dataset served when the request arrived (kept to its end, across a
/// swap), and puts its month on the response.
pub(crate) async fn with_dataset(State(state): State<Shared>, mut request: Request, next: Next) -> Response {
    let served = state.served();
    let month = HeaderValue::from_str(served.store.source_month()).ok().filter(|m| !m.is_empty());
    request.extensions_mut().insert(served);
    let mut response = next.run(request).await;
    if let Some(month) = month {
        response.headers_mut().insert(DATASET_MONTH, month);
    }
    response
}

/// The rate limit as counted for this request, put on it by authentication.
#[derive(Clone, Copy, Debug)]
pub struct RateInfo {
    pub per_minute: u32,
    pub remaining: u32,
}

/// Bearer token → user; then the rate limit of their plan; the limit headers go on every
/// authenticated response, the user and the credits charged on its extensions (`Usage`, for the
/// log), and the request is counted (`UsageCounter`, in memory).
pub(crate) async fn authenticate(State(state): State<Shared>, mut request: Request, next: Next) -> Response {
    let token = bearer_token(&request);
    let Some(token) = token else { return ApiError::Unauthenticated.into_response() };
    let accounts = Arc::clone(&state.accounts);
    let window = state.limiter.window();
    let prefix: String = token.chars().take(12).collect();
    // Accounts shared by replicas (Postgres) count requests there, in the same blocking call.
    let checked = blocking(move || {
        let Some(user) = timed("authenticate", || accounts.authenticate(&token))? else { return Ok(None) };
        let limit = accounts.plans().of(user.plan.as_deref()).1.requests_per_minute;
        let verdict = if accounts.is_shared() {
            Some(timed("rate_check", || accounts.rate_check(user.id, limit, window))?)
        } else {
            None
        };
        Ok(Some((user, limit, verdict)))
    })
    .await;
    let (user, limit, verdict) = match checked {
        Ok(Some(found)) => found,
        Ok(None) => return ApiError::Unauthenticated.into_response(),
        Err(e) => return e.into_response(),
    };
    let verdict = verdict.unwrap_or_else(|| state.limiter.check(user.id, limit));
    let charged = Arc::new(AtomicI64::new(0));
    let user_id = user.id;
    let endpoint = counting::endpoint(request.uri().path());
    let (mut response, remaining) = match verdict {
        Ok(remaining) => {
            request.extensions_mut().insert(Caller { user, charged: Arc::clone(&charged) });
            request.extensions_mut().insert(RateInfo { per_minute: limit, remaining });
            (next.run(request).await, remaining)
        }
        Err(retry_after) => (ApiError::TooManyRequests { retry_after }.into_response(), 0),
    };
    let credits = charged.load(Ordering::SeqCst);
    state.usage.record(user_id, endpoint, response.status().as_u16(), credits, Some(&prefix));
    let headers = response.headers_mut();
    headers.insert("x-ratelimit-limit", HeaderValue::from(limit));
    headers.insert("x-ratelimit-remaining", HeaderValue::from(remaining));
    response.extensions_mut().insert(Usage { user_id, credits });
    response
}

/// Debits `amount`; `Err(402)` when the balance cannot cover it (nothing is debited). Counted in
/// `cnpj_credits_charged_total` by what was charged.
pub(crate) async fn charge(state: &Shared, caller: &Caller, amount: i64, what: &'static str) -> Result<i64, ApiError> {
    let accounts = Arc::clone(&state.accounts);
    let id = caller.user.id;
    let remaining = blocking(move || {
        timed("charge", || accounts.charge(id, amount, what))?.map_err(|_| ApiError::InsufficientCredits)
    })
    .await?;
    caller.charged.fetch_add(amount, Ordering::SeqCst);
    metrics::counter!("cnpj_credits_charged_total", "endpoint" => what).increment(amount.unsigned_abs());
    Ok(remaining)
}

/// How long each readiness check may take.
const READY_WITHIN: Duration = Duration::from_secs(5);

/// GET /healthz: reads nothing.
async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// GET /readyz: 200, or 503 naming what does not answer (the error itself is logged, not shown).
async fn readyz(State(state): State<Shared>) -> Response {
    let store = state.served().store;
    let accounts = Arc::clone(&state.accounts);
    let checks = async {
        check("the dataset", blocking(move || Ok(store.ping()?))).await?;
        check("the accounts store", blocking(move || Ok(timed("ping", || accounts.ping())?))).await
    };
    match checks.await {
        Ok(()) => Json(json!({"status": "ready"})).into_response(),
        Err(e) => e.into_response(),
    }
}

/// A readiness check: its answer within `READY_WITHIN`, else `ApiError::NotReady` naming `what`.
async fn check(what: &str, answer: impl Future<Output = Result<(), ApiError>>) -> Result<(), ApiError> {
    let error = match tokio::time::timeout(READY_WITHIN, answer).await {
        Ok(Ok(())) => return Ok(()),
        Ok(Err(e)) => format!("{e:?}"),
        Err(_) => format!("no answer within {} s", READY_WITHIN.as_secs()),
    };
    tracing::warn!(%error, "not ready: {what} does not answer");
    Err(ApiError::NotReady(format!("{what} does not answer")))
}

/// GET /api/v1/status.
async fn status(Extension(served): Extension<Served>) -> Json<Value> {
    let known = |text: &str| if text.is_empty() { Value::Null } else { json!(text) };
    let since = served.since.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let store = &served.store;
    Json(json!({
        "success": true,
        "data": {
            "dataset_month": known(store.source_month()),
            "build_id": known(store.build_id()),
            "built_at": known(store.built_at()),
            "served_since": cnpj_model::utc_text(since),
        },
    }))
}

async fn openapi() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], include_str!("../../../schemas/openapi.json"))
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
    match cnpj.strip_suffix("/history") {
        Some(cnpj) => history(&state, &caller, store, cnpj, &params).await.map(Json),
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

async fn changes_route(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    Extension(Served { store, .. }): Extension<Served>,
    params: Params,
) -> Result<Json<Value>, ApiError> {
    changes(&state, &caller, store, &params).await.map(Json)
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
    let body = body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge
        } else {
            ApiError::invalid("body", e.body_text())
        }
    })?;
    batch(&state, &caller, store, &params, &body).await.map(Json)
}

// What each endpoint answers (the whole JSON body), for its route and its MCP tool alike
// (`crate::mcp`): one path for validation, prices, locales and errors. `store` is the dataset the
// request arrived on.

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

/// A company's answer (its detail or its history) for the CNPJ as sent, priced like detail when
/// it answers (charged as `what`).
async fn of_company<T: serde::Serialize + Send + 'static>(
    state: &Shared,
    caller: &Caller,
    cnpj: &str,
    params: &Params,
    what: &'static str,
    look_up: impl FnOnce(&CnpjQuery, Locale) -> Result<Option<T>, StoreError> + Send + 'static,
) -> Result<Value, ApiError> {
    let locale = params::locale(params)?;
    let query = CnpjQuery::parse(cnpj).map_err(|e| ApiError::invalid("cnpj", format!("Invalid CNPJ: {e}.")))?;
    let data = blocking(move || Ok(look_up(&query, locale)?)).await?.ok_or(ApiError::CompanyNotFound)?;
    charge(state, caller, state.prices.detail, what).await?;
    Ok(json!({"success": true, "data": data}))
}

pub async fn search(state: &Shared, caller: &Caller, store: Arc<Store>, params: &Params) -> Result<Value, ApiError> {
    let locale = params::locale(params)?;
    let (page, per_page) = params::pagination(params)?;
    let filters = params::search_filters(params)?;
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

/// The most rows a search's export holds.
pub const EXPORT_MAX: u64 = 10_000;

/// A company's page for people (`cnpj-pages`), for the CNPJ as sent: its batch record (the
/// detail record with its tax regime; `null` when it is not in this month), a page of its
/// company's establishments (`page`, `per_page` as in search) and its history, newest first.
/// Read like detail and priced like detail: 1 when either the record or a history answers.
pub async fn company_page(
    state: &Shared,
    caller: &Caller,
    store: Arc<Store>,
    cnpj: &str,
    params: &Params,
) -> Result<Value, ApiError> {
    let (page, per_page) = params::pagination(params)?;
    of_company(state, caller, cnpj, params, "detail", move |query, locale| {
        let record = store.batch(query, locale)?;
        let Some(history) = store.history(query, locale)? else { return Ok(None) };
        let basico = query.basico().as_bytes().try_into().expect("a cnpj_basico has 8 characters");
        let company = SearchFilters { cnpj: Some(CnpjQuery::Basico(basico)), ..Default::default() };
        let (total, establishments) = store.search(&company, page, per_page, locale)?;
        let mut listed = pagination(total, page, per_page, establishments.len());
        listed.insert("data".into(), establishments.iter().map(|r| r.search_item()).collect());
        Ok(Some(json!({"record": record, "establishments": listed, "history": history})))
    })
    .await
}

/// What exporting a search would cost, free: `(total, rows, credits)`, the matches, the rows an
/// export of at most `rows` holds (never over `EXPORT_MAX`) and their price, per row like batch.
pub async fn export_cost(
    state: &Shared,
    store: Arc<Store>,
    params: &Params,
    rows: u64,
) -> Result<(u64, u64, i64), ApiError> {
    let locale = params::locale(params)?;
    let filters = params::search_filters(params)?;
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
    let filters = params::search_filters(params)?;
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

/// A page's pagination fields (an empty page has `from` = `to` = 0).
pub(crate) fn pagination(total: u64, page: u64, per_page: u64, items: usize) -> serde_json::Map<String, Value> {
    let from = if items == 0 { 0 } else { (page - 1) * per_page + 1 };
    let to = if items == 0 { 0 } else { from + items as u64 - 1 };
    let fields = json!({
        "total": total,
        "per_page": per_page,
        "current_page": page,
        "last_page": total.div_ceil(per_page).max(1),
        "from": from,
        "to": to,
    });
    let Value::Object(map) = fields else { unreachable!("an object literal") };
    map
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

/// Writes the usage counts every `FLUSH_EVERY` (the last ones at shutdown, `AppState::flush`).
pub fn flush_usage_periodically(state: Shared) {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(counting::FLUSH_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            ticks.tick().await;
            let s = Arc::clone(&state);
            if let Err(e) = tokio::task::spawn_blocking(move || s.flush_usage()).await {
                tracing::error!(error = %e, "writing the usage counts panicked");
            }
        }
    });
}

/// Reloads the dataset on SIGHUP, for a swap without restart.
pub fn reload_on_sighup(state: Shared) -> std::io::Result<()> {
    let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            let s = Arc::clone(&state);
            match tokio::task::spawn_blocking(move || s.reload()).await {
                Ok(Ok(month)) => tracing::info!(source_month = %month, "dataset reloaded"),
                Ok(Err(e)) => tracing::error!(error = %e, "dataset reload failed; still serving the previous one"),
                Err(e) => tracing::error!(error = %e, "dataset reload panicked"),
            }
        }
    });
    Ok(())
}

/// Reloads a Postgres dataset once a newer publication was swapped in (checked every `every`).
pub fn watch_publications(state: Shared, every: Duration) {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let s = Arc::clone(&state);
            let reloaded = tokio::task::spawn_blocking(move || match s.served().store.is_current() {
                Ok(true) => Ok(None),
                Ok(false) => s.reload().map(Some),
                Err(e) => Err(e),
            })
            .await;
            match reloaded {
                Ok(Ok(Some(month))) => tracing::info!(source_month = %month, "new publication swapped in: reloaded"),
                Ok(Ok(None)) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "checking for a new publication failed"),
                Err(e) => tracing::error!(error = %e, "publication check panicked"),
            }
        }
    });
}

/// Completes at SIGTERM or Ctrl-C (SIGINT), caught from this call on.
pub fn shutdown_signal() -> std::io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let (mut term, mut interrupt) = (signal(SignalKind::terminate())?, signal(SignalKind::interrupt())?);
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {},
            _ = interrupt.recv() => {},
        }
    })
}
