//! Watchlists over HTTP (Bearer, counted by the rate limit): `POST`/`GET /api/v1/watchlists`,
//! `GET`/`PATCH`/`DELETE /api/v1/watchlists/{id}` (entries paged), free; and
//! `GET /api/v1/watchlists/{id}/events`, the changes of the list's entries, answered by the very
//! function `/changes` pages with and priced like it. The rules of a list (its name, 1,000 CNPJs
//! a request, every invalid one named, the cap of the user's plan) are the accounts store's, which
//! the profile pages use too; a refused request is a 400 naming each problem and stores nothing;
//! another user's list, like a missing one, is a 404. The webhook secret is in the answer that
//! made it, and never again.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use cnpj_accounts::{AccountsError, NewWatchlist, Watchlist, WatchlistChange};
use cnpj_store::{EVENTS, Store, Watched};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::changes;
use crate::error::ApiError;
use crate::params::{self, Params};
use crate::server::{self, Caller, Served, Shared, blocking, timed};

/// The routes, each behind its methods' check and authentication (events also behind the
/// dataset the request arrived on).
pub fn routes(state: &Shared) -> Router<Shared> {
    let authenticate = || middleware::from_fn_with_state(Arc::clone(state), server::authenticate);
    let methods = |allowed: &'static str| middleware::from_fn_with_state(allowed, server::only_method);
    let lists = Router::new()
        .route("/api/v1/watchlists", get(list_route).post(create_route).fallback(server::not_allowed("GET, POST")))
        .route_layer(authenticate())
        .route_layer(methods("GET, POST"));
    let list = Router::new()
        .route(
            "/api/v1/watchlists/{id}",
            get(read_route)
                .patch(update_route)
                .delete(delete_route)
                .fallback(server::not_allowed("GET, PATCH, DELETE")),
        )
        .route_layer(authenticate())
        .route_layer(methods("GET, PATCH, DELETE"));
    let events = Router::new()
        .route("/api/v1/watchlists/{id}/events", get(events_route).fallback(server::not_allowed("GET")))
        .route_layer(authenticate())
        .route_layer(middleware::from_fn_with_state(Arc::clone(state), server::with_dataset))
        .route_layer(methods("GET"));
    lists.merge(list).merge(events)
}

/// A list's id from the path: a positive integer, else no such list.
fn list_id(raw: Result<Path<String>, PathRejection>) -> Result<i64, ApiError> {
    raw.ok().and_then(|Path(raw)| params::watchlist_id(&raw)).ok_or(ApiError::WatchlistNotFound)
}

/// A request body as JSON of `T` (unknown properties refused), else a 400 naming the body.
fn body<T: serde::de::DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> Result<T, ApiError> {
    let bytes = body.map_err(ApiError::body_refused)?;
    serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::invalid("body", format!("The body is not as documented: {e}.")))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    name: String,
    cnpjs: Vec<String>,
    events: Option<Value>,
    webhook_url: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateBody {
    name: Option<String>,
    #[serde(default)]
    add: Vec<String>,
    #[serde(default)]
    remove: Vec<String>,
    events: Option<Value>,
    /// `null` removes the webhook; absent keeps it.
    #[serde(default, deserialize_with = "present")]
    webhook_url: Option<Option<String>>,
    #[serde(default)]
    rotate_secret: bool,
}

/// A property that is present (`null` included) as `Some`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// The events followed: `"all"` (none listed), or one name or more of the change events.
fn events(raw: &Value) -> Result<Vec<String>, ApiError> {
    let wrong = || {
        let message = format!("The events are \"all\" or a list of one or more of {}.", EVENTS.join(", "));
        ApiError::invalid("events", message)
    };
    match raw {
        Value::String(all) if all == "all" => Ok(Vec::new()),
        Value::Array(names) if !names.is_empty() => {
            let names: Vec<&str> = names.iter().map(Value::as_str).collect::<Option<_>>().ok_or_else(wrong)?;
            if let Some(unknown) = names.iter().find(|n| !EVENTS.contains(n)) {
                return Err(ApiError::invalid(
                    "events",
                    format!("Unknown event {unknown:?}: use {}.", EVENTS.join(", ")),
                ));
            }
            Ok(EVENTS.iter().filter(|e| names.contains(e)).map(|e| (*e).to_owned()).collect())
        }
        _ => Err(wrong()),
    }
}

/// A webhook URL as the policy allows it to be set (where a name leads is checked when a
/// delivery connects).
fn webhook_url(raw: &str, policy: cnpj_webhooks::Policy) -> Result<String, ApiError> {
    match policy.check_written(raw) {
        Ok(()) => Ok(raw.to_owned()),
        Err(refused) => Err(ApiError::invalid("webhook_url", format!("The webhook_url is refused: {refused}."))),
    }
}

/// A refusal of the accounts store as the API answers it: a 400 naming each problem under the
/// property it was sent in (`field`: where the CNPJs added were).
fn refused(error: AccountsError, field: &str) -> ApiError {
    match error {
        AccountsError::InvalidCnpjs(invalid) => {
            let mut errors = Map::new();
            for i in invalid {
                let message = json!(format!("Invalid CNPJ {:?}: {}.", i.entry, i.reason));
                let listed = errors.entry(i.field).or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(messages) = listed {
                    messages.push(message);
                }
            }
            ApiError::BadRequest(errors)
        }
        AccountsError::TooManyCnpjs(field) => {
            ApiError::invalid(field, format!("At most {} CNPJs a request.", cnpj_accounts::MAX_PER_REQUEST))
        }
        AccountsError::WatchlistName => {
            ApiError::invalid("name", format!("The name must have 1 to {} characters.", cnpj_accounts::MAX_NAME))
        }
        AccountsError::OverCap { cap, watched } => ApiError::invalid(
            field,
            format!("At most {cap} CNPJs may be watched over all your lists; this would make {watched}."),
        ),
        other => ApiError::Internal(other.to_string()),
    }
}

/// A list as answered.
fn described(list: &Watchlist) -> Map<String, Value> {
    let events = if list.events.is_empty() { json!("all") } else { json!(list.events) };
    let body = json!({
        "id": list.id,
        "name": list.name,
        "events": events,
        "webhook_url": list.webhook_url,
        "entries_count": list.entries,
        "created_at": cnpj_model::utc_text(list.created_at),
        "updated_at": cnpj_model::utc_text(list.updated_at),
    });
    let Value::Object(map) = body else { unreachable!("an object literal") };
    map
}

/// A list as created or changed: with its new webhook secret, when one was made.
fn saved(saved: cnpj_accounts::Saved) -> Value {
    let mut data = described(&saved.watchlist);
    if let Some(secret) = saved.webhook_secret {
        data.insert("webhook_secret".into(), json!(secret));
    }
    json!({"success": true, "data": data})
}

/// POST /api/v1/watchlists: 201 with the list.
async fn create_route(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request: CreateBody = body(raw)?;
    let events = request.events.as_ref().map(events).transpose()?.unwrap_or_default();
    let policy = state.watchlists.webhooks;
    let url = request.webhook_url.as_deref().map(|u| webhook_url(u, policy)).transpose()?;
    let (accounts, user) = (Arc::clone(&state.accounts), caller.user.id);
    let created = blocking(move || {
        let list =
            NewWatchlist { name: &request.name, cnpjs: &request.cnpjs, events: &events, webhook_url: url.as_deref() };
        timed("watchlists", || accounts.create_watchlist(user, &list)).map_err(|e| refused(e, "cnpjs"))
    })
    .await?;
    Ok((StatusCode::CREATED, Json(saved(created))).into_response())
}

/// GET /api/v1/watchlists: the caller's lists, oldest first.
async fn list_route(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<Value>, ApiError> {
    let (accounts, user) = (Arc::clone(&state.accounts), caller.user.id);
    let lists = blocking(move || Ok(timed("watchlists", || accounts.watchlists(user))?)).await?;
    let data: Vec<Value> = lists.iter().map(|l| Value::Object(described(l))).collect();
    Ok(Json(json!({"success": true, "data": data})))
}

/// GET /api/v1/watchlists/{id}: the list, its entries paged (`page`, `per_page` up to 1,000).
async fn read_route(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    id: Result<Path<String>, PathRejection>,
    params: Params,
) -> Result<Json<Value>, ApiError> {
    let id = list_id(id)?;
    let (page, per_page) = params::entries_pagination(&params)?;
    let (accounts, user) = (Arc::clone(&state.accounts), caller.user.id);
    let offset = (page - 1).saturating_mul(per_page);
    let found = blocking(move || Ok(timed("watchlists", || accounts.watchlist(user, id, offset, Some(per_page)))?));
    let (list, entries) = found.await?.ok_or(ApiError::WatchlistNotFound)?;
    let mut data = described(&list);
    data.insert("entries".into(), json!(entries));
    let mut body = Map::from_iter([("success".to_owned(), Value::Bool(true))]);
    body.extend(server::pagination(list.entries as u64, page, per_page, entries.len()));
    body.insert("data".into(), Value::Object(data));
    Ok(Json(Value::Object(body)))
}

/// PATCH /api/v1/watchlists/{id}: the list changed.
async fn update_route(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    id: Result<Path<String>, PathRejection>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let id = list_id(id)?;
    let request: UpdateBody = body(raw)?;
    let events = request.events.as_ref().map(events).transpose()?;
    let policy = state.watchlists.webhooks;
    let url = match &request.webhook_url {
        Some(Some(url)) => Some(Some(webhook_url(url, policy)?)),
        Some(None) => Some(None),
        None => None,
    };
    let (accounts, user) = (Arc::clone(&state.accounts), caller.user.id);
    let changed = blocking(move || {
        let change = WatchlistChange {
            name: request.name.as_deref(),
            add: &request.add,
            remove: &request.remove,
            events: events.as_deref(),
            webhook_url: url.as_ref().map(Option::as_deref),
            rotate_secret: request.rotate_secret,
        };
        timed("watchlists", || accounts.update_watchlist(user, id, &change)).map_err(|e| refused(e, "add"))
    })
    .await?;
    Ok(Json(saved(changed.ok_or(ApiError::WatchlistNotFound)?)))
}

/// Adds `cnpj` to one of the user's lists, as a PATCH's `add` does (a page's button,
/// `crate::site`): a 400 for an invalid CNPJ or past the cap, a 404 for no such list of theirs.
pub(crate) async fn add(state: &Shared, user: i64, id: i64, cnpj: String) -> Result<(), ApiError> {
    let accounts = Arc::clone(&state.accounts);
    let changed = blocking(move || {
        let change = WatchlistChange { add: &[cnpj], ..Default::default() };
        timed("watchlists", || accounts.update_watchlist(user, id, &change)).map_err(|e| refused(e, "add"))
    })
    .await?;
    changed.map(drop).ok_or(ApiError::WatchlistNotFound)
}

/// DELETE /api/v1/watchlists/{id}.
async fn delete_route(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<Value>, ApiError> {
    let id = list_id(id)?;
    let (accounts, user) = (Arc::clone(&state.accounts), caller.user.id);
    let deleted = blocking(move || Ok(timed("watchlists", || accounts.delete_watchlist(user, id))?)).await?;
    if !deleted {
        return Err(ApiError::WatchlistNotFound);
    }
    Ok(Json(json!({"success": true})))
}

async fn events_route(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    Extension(Served { store, .. }): Extension<Served>,
    id: Result<Path<String>, PathRejection>,
    params: Params,
) -> Result<Json<Value>, ApiError> {
    let Ok(Path(id)) = id else { return Err(ApiError::WatchlistNotFound) };
    events_of(&state, &caller, store, &id, &params).await.map(Json)
}

/// GET /api/v1/watchlists/{id}/events (and the MCP tool `watchlist_events`): the changes of the
/// list's entries and events, `month` or `since`, paged and priced like `/changes`.
pub async fn events_of(
    state: &Shared,
    caller: &Caller,
    store: Arc<Store>,
    id: &str,
    params: &Params,
) -> Result<Value, ApiError> {
    let id = list_id(Ok(Path(id.to_owned())))?;
    let mut filters = params::watchlist_event_filters(params)?;
    let (list, watched) = watched(state, caller, id).await?;
    filters.events = list.events;
    filters.watched = Some(watched);
    changes::changes_page(state, caller, store, params, filters, "watchlist_events").await
}

/// One of the caller's lists and its entries: from memory while its revision is the one read.
async fn watched(state: &Shared, caller: &Caller, id: i64) -> Result<(Watchlist, Arc<Watched>), ApiError> {
    let (state, user) = (Arc::clone(state), caller.user.id);
    blocking(move || {
        let accounts = &state.accounts;
        let (list, _) =
            timed("watchlists", || accounts.watchlist(user, id, 0, Some(0)))?.ok_or(ApiError::WatchlistNotFound)?;
        if let Some(watched) = state.watchlists.kept(user, id, list.revision) {
            return Ok((list, watched));
        }
        let (list, entries) =
            timed("watchlists", || accounts.watchlist(user, id, 0, None))?.ok_or(ApiError::WatchlistNotFound)?;
        let watched = Arc::new(Watched::new(entries.iter().map(String::as_str)));
        state.watchlists.keep(user, id, list.revision, Arc::clone(&watched));
        Ok((list, watched))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(e: ApiError) -> String {
        match e {
            ApiError::BadRequest(errors) => errors.keys().next().cloned().unwrap_or_default(),
            other => format!("{other:?}"),
        }
    }

    fn check_events(raw: Value, expected: Result<&[&str], ()>) {
        let got = events(&raw).map_err(named);
        let expected = expected.map(|e| e.iter().map(|e| (*e).to_owned()).collect()).map_err(|()| "events".to_owned());
        assert_eq!(got, expected, "{raw}");
    }

    #[test]
    fn events_are_all_or_known_names_in_their_order() {
        check_events(json!("all"), Ok(&[]));
        check_events(json!(["moved", "opened", "moved"]), Ok(&["opened", "moved"]));
        for bad in [json!([]), json!("All"), json!(["closed"]), json!([1]), json!(null), json!({"moved": true})] {
            check_events(bad, Err(()));
        }
    }

    #[test]
    fn ids_are_positive_integers() {
        let id = |raw: &str| list_id(Ok(Path(raw.to_owned()))).ok();
        assert_eq!((id("1"), id("42")), (Some(1), Some(42)));
        for bad in ["0", "-1", "", "1.0", "x", "99999999999999999999", "+1"] {
            assert_eq!(id(bad), None, "{bad}");
        }
    }
}
