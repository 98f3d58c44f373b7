//! The watchlists on the profile pages: a list made on `/account` (where `profile` lists them), and
//! a page per list, `/account/watchlists/{id}`: its CNPJs (pasted
//! one a line, up to 1,000 at once, added or removed), its webhook (set or removed, its secret made
//! again; a secret is shown once, in the answer that made it), its newest deliveries (status,
//! attempts, last error; one retried), its deletion. Every change goes through the accounts
//! store's functions that the API's routes call, with the same rules (a name of 1 to 100
//! characters, every invalid CNPJ named and nothing stored, the cap of the user's plan) and the
//! same webhook check; another user's list is not found.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use cnpj_accounts::{Accounts, AccountsError, Delivery, NewWatchlist, Saved, WatchlistChange};
use cnpj_model::InvalidCnpj;
use cnpj_webhooks::Refused;

use crate::i18n::{Lang, fill};
use crate::profile::{Shown, allowed, show, time};
use crate::templates::{self, DeliveryLine, ListForm};
use crate::{Fields, Pages, Visit, blocking, see_other};

/// CNPJs shown on a list's page at a time.
const PER_PAGE: u64 = 100;
/// Deliveries shown (the newest).
const DELIVERIES: u64 = 50;

/// A form's field as sent (`""` when absent).
fn raw(form: &Fields, name: &str) -> String {
    form.get(name).unwrap_or_default().to_owned()
}

/// The CNPJs pasted in a text area: one a line, blank lines skipped.
fn pasted(text: &str) -> Vec<String> {
    text.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect()
}

/// A list's id from the path: digits of a positive integer, else none.
fn list_id(raw: &str) -> Option<i64> {
    raw.bytes().all(|b| b.is_ascii_digit()).then(|| raw.parse::<i64>().ok()).flatten().filter(|id| *id > 0)
}

/// Why a CNPJ is invalid, in the page's language.
fn reason(lang: Lang, why: &InvalidCnpj) -> String {
    match why {
        InvalidCnpj::Length(n) => fill(lang.t("cnpj_length"), &[&n.to_string()]),
        InvalidCnpj::Character(c) => fill(lang.t("cnpj_character"), &[&format!("{c:?}")]),
        InvalidCnpj::NonNumericCheckDigits => lang.t("cnpj_check_numeric").to_owned(),
        InvalidCnpj::CheckDigits { expected } => fill(lang.t("cnpj_check_digits"), &[expected]),
    }
}

/// A refusal of the accounts store in the page's language: the message and each invalid CNPJ
/// (any other error stays one).
fn refusal(lang: Lang, error: AccountsError) -> Result<(String, Vec<String>), AccountsError> {
    let message = match error {
        AccountsError::InvalidCnpjs(invalid) => {
            let named = invalid.iter().map(|i| format!("{}: {}", i.entry, reason(lang, &i.reason))).collect();
            return Ok((lang.t("cnpjs_invalid").to_owned(), named));
        }
        AccountsError::TooManyCnpjs(_) => lang.t("too_many_cnpjs").to_owned(),
        AccountsError::WatchlistName => lang.t("list_name_invalid").to_owned(),
        AccountsError::OverCap { cap, watched } => fill(lang.t("over_cap"), &[&cap.to_string(), &watched.to_string()]),
        other => return Err(other),
    };
    Ok((message, Vec::new()))
}

/// A webhook URL from a form: `None` when empty (no webhook), else checked as the API checks it.
fn webhook_url(pages: &Pages, lang: Lang, sent: &str) -> Result<Option<String>, String> {
    let url = sent.trim();
    if url.is_empty() {
        return Ok(None);
    }
    pages.config.webhooks.check_written(url).map(|()| Some(url.to_owned())).map_err(|refused| {
        let why = match refused {
            Refused::Scheme => lang.t("webhook_scheme").to_owned(),
            Refused::NotPublic { .. } => lang.t("webhook_private").to_owned(),
            _ => lang.t("webhook_malformed").to_owned(),
        };
        fill(lang.t("webhook_refused"), &[&why])
    })
}

/// What a list's page shows besides the list: its messages, a secret just made, the forms'
/// fields as sent.
#[derive(Default)]
struct Said {
    error: Option<String>,
    invalid: Vec<String>,
    notice: Option<&'static str>,
    new_secret: Option<String>,
    add: String,
    remove: String,
    /// `None`: the list's own.
    webhook_url: Option<String>,
}

fn delivery_line(lang: Lang, d: Delivery) -> DeliveryLine {
    let status = match d.status.as_str() {
        "pending" => lang.t("delivery_pending").to_owned(),
        "waiting_credits" => lang.t("delivery_waiting_credits").to_owned(),
        "delivered" => lang.t("delivery_delivered").to_owned(),
        "failed" => lang.t("delivery_failed").to_owned(),
        other => other.to_owned(),
    };
    DeliveryLine {
        retry: matches!(d.status.as_str(), "failed" | "delivered"),
        id: d.id,
        month: d.month,
        page: format!("{}/{}", d.page, d.pages),
        status,
        attempts: d.attempts,
        last_error: d.last_error.unwrap_or_default(),
    }
}

/// The page of one of the user's lists, its CNPJs from page `page` (`None`: they have no such
/// list).
fn list_page(
    a: &Accounts,
    visit: &Visit,
    user: i64,
    id: i64,
    page: u64,
    said: Said,
) -> Result<Option<templates::Watchlist>, AccountsError> {
    let offset = (page - 1).saturating_mul(PER_PAGE);
    let Some((list, cnpjs)) = a.watchlist(user, id, offset, Some(PER_PAGE))? else { return Ok(None) };
    let Some((total, deliveries)) = a.deliveries(user, id, 0, DELIVERIES)? else { return Ok(None) };
    let lang = visit.lang;
    let events = if list.events.is_empty() { lang.t("all_events").to_owned() } else { list.events.join(", ") };
    Ok(Some(templates::Watchlist {
        common: visit.common("watchlist"),
        error: said.error,
        invalid: said.invalid,
        notice: said.notice.map(|k| lang.t(k).to_owned()),
        new_secret: said.new_secret,
        id,
        name: list.name,
        entries: list.entries,
        events,
        webhook: list.webhook_url.clone().unwrap_or_else(|| lang.t("none").to_owned()),
        has_webhook: list.webhook_url.is_some(),
        created: time(list.created_at),
        cnpjs,
        previous: (page > 1).then(|| page - 1),
        next: (offset.saturating_add(PER_PAGE) < list.entries.max(0) as u64).then(|| page + 1),
        add: said.add,
        remove: said.remove,
        webhook_url: said.webhook_url.or(list.webhook_url).unwrap_or_default(),
        deliveries: deliveries.into_iter().map(|d| delivery_line(lang, d)).collect(),
        deliveries_shown: fill(lang.t("deliveries_shown"), &[&total.min(DELIVERIES).to_string(), &total.to_string()]),
    }))
}

/// Renders one of the user's lists (404 when they have none such).
async fn show_list(
    pages: &Pages,
    visit: Visit,
    user: i64,
    id: i64,
    page: u64,
    status: StatusCode,
    said: Said,
) -> Response {
    let visit = Arc::new(visit);
    let v = Arc::clone(&visit);
    match blocking(pages, move |a| list_page(a, &v, user, id, page, said)).await {
        Ok(Some(page)) => visit.render(status, &page),
        Ok(None) => visit.not_found(),
        Err(e) => e.into_response(),
    }
}

/// A list as just made or changed: its page, with the notice and the secret just made (shown
/// this once).
async fn saved(pages: &Pages, visit: Visit, user: i64, saved: Saved, notice: &'static str) -> Response {
    let said = Said { notice: Some(notice), new_secret: saved.webhook_secret, ..Said::default() };
    show_list(pages, visit, user, saved.watchlist.id, 1, StatusCode::OK, said).await
}

/// GET /account/watchlists/{id}?page=N (without a session: to /login).
pub(crate) async fn page(
    State(pages): State<Pages>,
    visit: Visit,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    let Some((_, session)) = visit.session.clone() else { return see_other("/login") };
    let Some(id) = list_id(&id) else { return visit.not_found() };
    let page = form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .find(|(k, _)| k == "page")
        .and_then(|(_, v)| v.parse::<u64>().ok())
        .filter(|p| (1..=u64::from(u32::MAX)).contains(p))
        .unwrap_or(1);
    show_list(&pages, visit, session.person.id, id, page, StatusCode::OK, Said::default()).await
}

/// POST /account/watchlists: a name, CNPJs one a line, an optional webhook URL; the list's page
/// follows (with the webhook's secret, shown once), or `/account` again saying why not.
pub(crate) async fn create(State(pages): State<Pages>, visit: Visit, body: Bytes) -> Response {
    let form = Fields::parse(&body);
    let session = match allowed(&visit, &form) {
        Ok(s) => s,
        Err(response) => return *response,
    };
    let (lang, user) = (visit.lang, session.person.id);
    let sent = ListForm {
        name: raw(&form, "name"),
        cnpjs: raw(&form, "cnpjs"),
        webhook_url: raw(&form, "webhook_url"),
        ..ListForm::default()
    };
    let url = webhook_url(&pages, lang, &sent.webhook_url);
    let (name, cnpjs) = (sent.name.clone(), pasted(&sent.cnpjs));
    let refused = |error: String, invalid: Vec<String>| Shown {
        list_form: ListForm { error: Some(error), invalid, ..sent },
        ..Shown::default()
    };
    let url = match url {
        Ok(url) => url,
        Err(error) => return show(&pages, visit, StatusCode::BAD_REQUEST, refused(error, Vec::new())).await,
    };
    let made = blocking(&pages, move |a| {
        let list = NewWatchlist { name: &name, cnpjs: &cnpjs, events: &[], webhook_url: url.as_deref() };
        match a.create_watchlist(user, &list) {
            Ok(made) => Ok(Ok(made)),
            Err(e) => refusal(lang, e).map(Err),
        }
    })
    .await;
    match made {
        Ok(Ok(made)) => saved(&pages, visit, user, made, "list_created").await,
        Ok(Err((error, invalid))) => show(&pages, visit, StatusCode::BAD_REQUEST, refused(error, invalid)).await,
        Err(e) => e.into_response(),
    }
}

/// The user and the list of a POST from this site's own form on a list's page, or the answer to
/// give instead (to /login, 403, 404).
fn posted(visit: &Visit, form: &Fields, id: &str) -> Result<(i64, i64), Box<Response>> {
    let session = allowed(visit, form)?;
    let id = list_id(id).ok_or_else(|| Box::new(visit.not_found()))?;
    Ok((session.person.id, id))
}

/// A change a form asks for, owned (to cross into the store's thread).
#[derive(Default)]
struct Asked {
    add: Vec<String>,
    remove: Vec<String>,
    webhook_url: Option<Option<String>>,
    rotate_secret: bool,
}

/// Makes the change `asked` to one of the user's lists and shows the list: saved (with a secret
/// just made), refused (saying why, with the forms as sent, `sent`), or not found.
async fn change(pages: &Pages, visit: Visit, user: i64, id: i64, asked: Asked, sent: Said) -> Response {
    let lang = visit.lang;
    let changed = blocking(pages, move |a| {
        let change = WatchlistChange {
            add: &asked.add,
            remove: &asked.remove,
            webhook_url: asked.webhook_url.as_ref().map(Option::as_deref),
            rotate_secret: asked.rotate_secret,
            ..WatchlistChange::default()
        };
        match a.update_watchlist(user, id, &change) {
            Ok(changed) => Ok(Ok(changed)),
            Err(e) => refusal(lang, e).map(Err),
        }
    })
    .await;
    match changed {
        Ok(Ok(Some(changed))) => saved(pages, visit, user, changed, "saved").await,
        Ok(Ok(None)) => visit.not_found(),
        Ok(Err((error, invalid))) => {
            let said = Said { error: Some(error), invalid, ..sent };
            show_list(pages, visit, user, id, 1, StatusCode::BAD_REQUEST, said).await
        }
        Err(e) => e.into_response(),
    }
}

/// POST /account/watchlists/{id}/entries: CNPJs to add and to remove, one a line.
pub(crate) async fn entries(State(pages): State<Pages>, visit: Visit, Path(id): Path<String>, body: Bytes) -> Response {
    let form = Fields::parse(&body);
    let (user, id) = match posted(&visit, &form, &id) {
        Ok(found) => found,
        Err(response) => return *response,
    };
    let (add, remove) = (raw(&form, "add"), raw(&form, "remove"));
    let asked = Asked { add: pasted(&add), remove: pasted(&remove), ..Asked::default() };
    change(&pages, visit, user, id, asked, Said { add, remove, ..Said::default() }).await
}

/// POST /account/watchlists/{id}/webhook: the webhook's URL (empty: none); a first webhook gets
/// a secret.
pub(crate) async fn webhook(State(pages): State<Pages>, visit: Visit, Path(id): Path<String>, body: Bytes) -> Response {
    let form = Fields::parse(&body);
    let (user, id) = match posted(&visit, &form, &id) {
        Ok(found) => found,
        Err(response) => return *response,
    };
    let sent = raw(&form, "webhook_url");
    match webhook_url(&pages, visit.lang, &sent) {
        Ok(url) => {
            let asked = Asked { webhook_url: Some(url), ..Asked::default() };
            change(&pages, visit, user, id, asked, Said { webhook_url: Some(sent), ..Said::default() }).await
        }
        Err(error) => {
            let said = Said { error: Some(error), webhook_url: Some(sent), ..Said::default() };
            show_list(&pages, visit, user, id, 1, StatusCode::BAD_REQUEST, said).await
        }
    }
}

/// POST /account/watchlists/{id}/secret: a new webhook secret, shown once.
pub(crate) async fn rotate_secret(
    State(pages): State<Pages>,
    visit: Visit,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let form = Fields::parse(&body);
    let (user, id) = match posted(&visit, &form, &id) {
        Ok(found) => found,
        Err(response) => return *response,
    };
    let asked = Asked { rotate_secret: true, ..Asked::default() };
    change(&pages, visit, user, id, asked, Said::default()).await
}

/// POST /account/watchlists/{id}/delete: the list, its entries and deliveries; back to /account.
pub(crate) async fn delete(State(pages): State<Pages>, visit: Visit, Path(id): Path<String>, body: Bytes) -> Response {
    let form = Fields::parse(&body);
    let (user, id) = match posted(&visit, &form, &id) {
        Ok(found) => found,
        Err(response) => return *response,
    };
    match blocking(&pages, move |a| a.delete_watchlist(user, id)).await {
        Ok(true) => see_other("/account"),
        Ok(false) => visit.not_found(),
        Err(e) => e.into_response(),
    }
}

/// POST /account/watchlists/{id}/deliveries/{delivery}/retry: due now, for 24 hours more (as
/// `POST /api/v1/watchlists/{id}/deliveries/{delivery_id}/retry`); back to the list's page.
pub(crate) async fn retry(
    State(pages): State<Pages>,
    visit: Visit,
    Path((id, delivery)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let form = Fields::parse(&body);
    let (user, id) = match posted(&visit, &form, &id) {
        Ok(found) => found,
        Err(response) => return *response,
    };
    match blocking(&pages, move |a| a.retry_delivery(user, id, &delivery)).await {
        Ok(Some(_)) => see_other(&format!("/account/watchlists/{id}")),
        Ok(None) => visit.not_found(),
        Err(e) => e.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pasted_lines_trimmed() {
        assert_eq!(pasted(" 11.222.333/0001-81 \r\n\n\t\n33683111"), ["11.222.333/0001-81", "33683111"]);
        assert_eq!(
            (list_id("12"), list_id("0"), list_id("+1"), list_id("x"), list_id("")),
            (Some(12), None, None, None, None)
        );
    }
}
