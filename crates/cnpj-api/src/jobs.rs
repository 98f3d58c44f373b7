//! Export jobs over HTTP (contract §15; Bearer, rate-limited as the other dataset routes):
//! `POST /api/v1/exports` `{filters, format, locale}` counts the search's rows (its exact total),
//! holds a credit a row (the batch price) with the job's insert, and answers 202 with the job;
//! `GET /api/v1/exports` (the caller's jobs), `GET /api/v1/exports/{id}` and
//! `GET /api/v1/exports/{id}/file` (the file, streamed) answer the job's owner only: another
//! user's id is a 404 as an unknown one is. The jobs run in `crate::runner`. The pages' export of a
//! whole result (`crate::site`) calls `create` and `job` as the routes do.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use cnpj_accounts::{ExportJob, NewExport};
use cnpj_store::{Store, StoreError};
use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::exporting::FORMATS;
use crate::params::{self, Params, SEARCH_FILTERS};
use crate::server::{self, Caller, Served, Shared, blocking, timed};

/// A search's parameters by name, values as the query string takes them.
type Pairs = Vec<(String, String)>;

/// The jobs a user's list shows at most.
const LISTED: i64 = 100;

/// The routes, behind their methods' checks and authentication (`POST` and the list also on the
/// dataset the request arrived on).
pub fn routes(state: &Shared) -> Router<Shared> {
    let list = Router::new()
        .route("/api/v1/exports", get(list_route).post(create_route).fallback(server::not_allowed("GET, POST")));
    let one = Router::new()
        .route("/api/v1/exports/{id}", get(read_route).fallback(server::not_allowed("GET")))
        .route("/api/v1/exports/{id}/file", get(file_route).fallback(server::not_allowed("GET")));
    server::dataset_routes(state, "GET, POST", list).merge(server::dataset_routes(state, "GET", one))
}

async fn create_route(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    Extension(Served { store, .. }): Extension<Served>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(ApiError::body_refused)?;
    let (pairs, format) = request(&body)?;
    let answer = create(&state, &caller, store, pairs, format).await?;
    Ok((StatusCode::ACCEPTED, Json(answer)).into_response())
}

async fn list_route(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<Value>, ApiError> {
    let (accounts, user) = (Arc::clone(state.accounts()), caller.user_id());
    let jobs = blocking(move || Ok(timed("exports", || accounts.exports(user, LISTED))?)).await?;
    Ok(Json(json!({"success": true, "data": jobs.iter().map(described).collect::<Vec<_>>()})))
}

async fn read_route(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<Value>, ApiError> {
    let Path(id) = id.map_err(|_| ApiError::ExportNotFound)?;
    let found = job(&state, caller.user_id(), id).await?;
    Ok(Json(json!({"success": true, "data": described(&found)})))
}

async fn file_route(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let Path(id) = id.map_err(|_| ApiError::ExportNotFound)?;
    let found = job(&state, caller.user_id(), id).await?;
    file(&state, &found).await
}

/// A job's file, streamed: 409 before it is done, 410 once it expired.
pub async fn file(state: &Shared, found: &ExportJob) -> Result<Response, ApiError> {
    match (found.status.as_str(), &found.file) {
        ("done", Some(file)) => stream(state.exports.dir.join(file), found).await,
        ("expired", _) => Err(ApiError::ExportExpired),
        _ => Err(ApiError::ExportNotReady),
    }
}

/// The search parameters and the format of a job's body, `{filters: {…}, format, locale}`: a
/// filter's value a string, a number, a boolean or a list of them (a comma-separated list);
/// anything else, or a name that is no search filter, is a 400 naming it.
pub fn request(body: &[u8]) -> Result<(Pairs, &'static str), ApiError> {
    let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(body) else {
        return Err(ApiError::invalid(
            "body",
            "The body must be a JSON object {\"filters\": {…}, \"format\": \"csv\"}.",
        ));
    };
    if let Some(unknown) = map.keys().find(|k| !["filters", "format", "locale"].contains(&k.as_str())) {
        return Err(ApiError::invalid(unknown, "Unknown property: the body is {filters, format, locale}."));
    }
    let format = match map.get("format") {
        None => "csv",
        Some(Value::String(f)) => FORMATS
            .iter()
            .find(|(name, ..)| name == f)
            .map(|(name, ..)| *name)
            .ok_or_else(|| ApiError::invalid("format", "The format must be one of csv, parquet, jsonl."))?,
        Some(_) => return Err(ApiError::invalid("format", "The format must be one of csv, parquet, jsonl.")),
    };
    let mut pairs = Vec::new();
    match map.get("locale") {
        None => {}
        Some(Value::String(locale)) => pairs.push(("locale".to_owned(), locale.clone())),
        Some(_) => return Err(ApiError::invalid("locale", "The locale must be one of pt-br, en, es.")),
    }
    match map.get("filters") {
        None => {}
        Some(Value::Object(filters)) => pairs.extend(filter_pairs(filters)?),
        Some(_) => return Err(ApiError::invalid("filters", "The filters must be an object of search parameters.")),
    }
    Ok((pairs, format))
}

/// The filters of a job's body as query parameters.
fn filter_pairs(filters: &Map<String, Value>) -> Result<Pairs, ApiError> {
    let scalar = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    };
    filters
        .iter()
        .map(|(name, value)| {
            if !SEARCH_FILTERS.contains(&name.as_str()) {
                return Err(ApiError::invalid(name, "Unknown filter: use the parameters of /companies/search."));
            }
            let text = match value {
                Value::Array(items) => items.iter().map(scalar).collect::<Option<Vec<_>>>().map(|v| v.join(",")),
                other => scalar(other),
            };
            let text = text.ok_or_else(|| ApiError::invalid(name, format!("The {name} must be a string.")))?;
            Ok((name.clone(), text))
        })
        .collect()
}

/// Accepts a job of the search `pairs` in `format`: its rows counted (the index's exact total),
/// validated as search validates them (each bad filter a 400 naming it), their credits held with
/// the job's insert (402 when the balance is short: nothing held). The runner is woken.
pub async fn create(
    state: &Shared,
    caller: &Caller,
    store: Arc<Store>,
    pairs: Vec<(String, String)>,
    format: &'static str,
) -> Result<Value, ApiError> {
    let params = Params::from_pairs(pairs.clone());
    let locale = params::locale(&params)?;
    let filters = params::search_filters(&params, state.partners)?;
    let too_broad = params::too_broad(&params);
    let build_id = store.build_id().to_owned();
    let rows = blocking(move || match store.search_count(&filters) {
        Err(StoreError::OverBudget) => Err(too_broad),
        counted => Ok(counted?),
    })
    .await? as i64;
    let credits = rows * state.prices.batch_item;
    let filters_json =
        Value::Object(pairs.into_iter().filter(|(k, _)| k != "locale").map(|(k, v)| (k, Value::String(v))).collect());
    let (accounts, user_id) = (Arc::clone(state.accounts()), caller.user_id());
    let created = blocking(move || {
        let new = NewExport {
            user_id,
            filters: &filters_json.to_string(),
            format,
            locale: locale.code(),
            build_id: &build_id,
            rows,
            credits,
        };
        Ok(timed("create_export", || accounts.create_export(&new))?)
    })
    .await?;
    let job = created.map_err(|_| ApiError::InsufficientCredits)?;
    caller.add_charged(credits);
    metrics::counter!("cnpj_credits_charged_total", "endpoint" => "export_job").increment(credits.unsigned_abs());
    state.exports.wake.notify_one();
    let (accounts, user_id) = (Arc::clone(state.accounts()), caller.user_id());
    let remaining = blocking(move || Ok(accounts.charge(user_id, 0, "balance")?.unwrap_or(0))).await?;
    Ok(json!({"success": true, "data": described(&job), "credits_used": credits, "credits_remaining": remaining}))
}

/// One of the user's jobs; another user's, or none, is `ApiError::ExportNotFound`.
pub async fn job(state: &Shared, user_id: i64, id: String) -> Result<ExportJob, ApiError> {
    if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ApiError::ExportNotFound);
    }
    let accounts = Arc::clone(state.accounts());
    blocking(move || Ok(timed("export", || accounts.export(user_id, &id))?)).await?.ok_or(ApiError::ExportNotFound)
}

/// A job as the API describes it.
pub fn described(job: &ExportJob) -> Value {
    let time = |at: Option<i64>| at.map(cnpj_model::utc_text);
    let filters: Value = serde_json::from_str(&job.filters).unwrap_or(Value::Null);
    let file = (job.status == "done").then(|| format!("/api/v1/exports/{}/file", job.id));
    json!({
        "id": job.id,
        "status": job.status,
        "format": job.format,
        "locale": job.locale,
        "filters": filters,
        "rows": job.rows,
        "rows_written": job.rows_written,
        "credits": job.credits,
        "created_at": cnpj_model::utc_text(job.created_at),
        "finished_at": time(job.finished_at),
        "expires_at": time(job.expires_at),
        "error": job.error,
        "file": file,
    })
}

/// A file's chunks, read off the runtime's threads.
struct FileBody(tokio::sync::mpsc::Receiver<std::io::Result<Bytes>>);

impl axum::body::HttpBody for FileBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, std::io::Error>>> {
        self.0.poll_recv(cx).map(|chunk| chunk.map(|r| r.map(hyper::body::Frame::data)))
    }
}

/// The job's file as the answer, streamed in chunks of 256 KiB.
async fn stream(path: std::path::PathBuf, job: &ExportJob) -> Result<Response, ApiError> {
    use std::io::Read;
    let file = std::fs::File::open(&path).map_err(|e| ApiError::Internal(format!("{}: {e}", path.display())))?;
    let length = file.metadata().map(|m| m.len()).ok();
    let (send, receive) = tokio::sync::mpsc::channel(4);
    tokio::task::spawn_blocking(move || {
        let mut file = file;
        loop {
            let mut chunk = vec![0u8; 256 * 1024];
            let read = match file.read(&mut chunk) {
                Ok(0) => return,
                Ok(n) => n,
                Err(e) => {
                    let _ = send.blocking_send(Err(e));
                    return;
                }
            };
            chunk.truncate(read);
            if send.blocking_send(Ok(Bytes::from(chunk))).is_err() {
                return;
            }
        }
    });
    let (_, extension, media) = FORMATS.iter().find(|(name, ..)| *name == job.format).unwrap_or(&FORMATS[0]);
    let disposition = format!("attachment; filename=\"cnpj-export-{}.{extension}\"", job.id);
    let mut response = Response::new(Body::new(FileBody(receive)));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, header::HeaderValue::from_static(media));
    if let Ok(value) = header::HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    if let Some(length) = length {
        headers.insert(header::CONTENT_LENGTH, header::HeaderValue::from(length));
    }
    Ok(response)
}
