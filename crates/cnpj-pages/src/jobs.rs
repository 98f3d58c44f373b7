//! A search's whole result as an export job, for people logged in (contract §15):
//! `GET /search/exports` shows the rows the search finds and their cost (a credit a row; asking is
//! free), a choice of format and the form that confirms it; `POST /search/exports` (with its CSRF
//! token) has the registry accept the job (its credits held) and sends the person to the job's
//! page, `GET /search/exports/{id}`, which refreshes itself (a `Refresh` header, no script) while
//! the job waits or runs, showing the rows written, then links to its file,
//! `GET /search/exports/{id}/file`. Another person's job is not found, as an unknown one.

use askama::Template;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::Value;

use crate::export::{Unpriced, form_refused, search_filters, with_balance};
use crate::registry::Pairs;
use crate::search::query;
use crate::{Common, Fields, Pages, Visit, see_other, show};

/// Seconds between two refreshes of a job's page while it waits or runs.
const REFRESH: u32 = 3;

#[derive(Template)]
#[template(path = "export_job_confirm.html")]
pub(crate) struct ConfirmPage {
    pub common: Common,
    pub filters: Pairs,
    pub back: String,
    pub rows: String,
    pub credits: String,
    pub balance: String,
    pub affordable: bool,
    pub empty: bool,
    pub invalid: Vec<(String, String)>,
}

#[derive(Template)]
#[template(path = "export_job.html")]
pub(crate) struct JobPage {
    pub common: Common,
    pub status: String,
    pub status_label: String,
    pub format: String,
    pub rows: String,
    pub written: String,
    /// Percent of the rows written.
    pub percent: u64,
    pub credits: String,
    pub file: Option<String>,
    pub expires: String,
    pub working: bool,
}

/// GET /search/exports: the rows of the whole result, their cost, and the form that confirms it.
pub(crate) async fn confirm(State(pages): State<Pages>, visit: Visit, RawQuery(raw): RawQuery) -> Response {
    let (Some((_, session)), Some(registry)) = (visit.session.as_ref(), pages.registry.as_deref()) else {
        return see_other("/login");
    };
    let lang = visit.lang;
    let filters = search_filters(&Fields::parse(raw.as_deref().unwrap_or("").as_bytes()));
    let mut page = ConfirmPage {
        common: visit.common("export_all"),
        back: format!("/search?{}", query(&filters)),
        filters: filters.clone(),
        rows: String::new(),
        credits: String::new(),
        balance: String::new(),
        affordable: false,
        empty: false,
        invalid: Vec::new(),
    };
    let answer = registry.count(&session.person, filters).await;
    let (rows, balance) = match with_balance(&pages, &visit, session.person.id, answer).await {
        Ok(priced) => priced,
        Err(Unpriced::Invalid(invalid)) => {
            page.invalid = invalid;
            return visit.render(StatusCode::BAD_REQUEST, &page);
        }
        Err(Unpriced::Page(response)) => return response,
    };
    page.rows = show::count(lang, rows);
    page.credits = show::count(lang, rows);
    page.balance = show::count(lang, balance.max(0) as u64);
    page.affordable = rows as i64 <= balance;
    page.empty = rows == 0;
    visit.render(StatusCode::OK, &page)
}

/// POST /search/exports: the confirmed job, accepted; then its page.
pub(crate) async fn create(State(pages): State<Pages>, visit: Visit, body: Bytes) -> Response {
    let form = Fields::parse(&body);
    let (Some((_, session)), Some(registry)) = (visit.session.as_ref(), pages.registry.as_deref()) else {
        return see_other("/login");
    };
    if !visit.post_allowed(form.get("csrf_token"), true) {
        return visit.forbidden();
    }
    let mut params = search_filters(&form);
    params.push(("locale".to_owned(), visit.lang.locale().code().to_owned()));
    let format = form.get("format").unwrap_or("csv").to_owned();
    match registry.create_export_job(&session.person, params, format).await {
        Ok(body) => see_other(&format!("/search/exports/{}", body["data"]["id"].as_str().unwrap_or_default())),
        Err(refusal) => form_refused(&visit, "export_all", &refusal),
    }
}

/// GET /search/exports/{id}: the job's progress, refreshing itself until it ends; then its file.
pub(crate) async fn page(State(pages): State<Pages>, visit: Visit, Path(id): Path<String>) -> Response {
    let (Some((_, session)), Some(registry)) = (visit.session.as_ref(), pages.registry.as_deref()) else {
        return see_other("/login");
    };
    let job = match registry.export_job(&session.person, id).await {
        Ok(job) => job,
        Err(refusal) => return visit.refused(&refusal),
    };
    let page = job_page(&visit, &job);
    let working = page.working;
    let mut response = visit.render(StatusCode::OK, &page);
    if working {
        response.headers_mut().insert("refresh", HeaderValue::from(REFRESH));
    }
    response
}

/// A job as its page shows it.
fn job_page(visit: &Visit, job: &Value) -> JobPage {
    let lang = visit.lang;
    let number = |key: &str| job[key].as_u64().unwrap_or(0);
    let text = |key: &str| job[key].as_str().unwrap_or_default().to_owned();
    let status = text("status");
    let (rows, written) = (number("rows"), number("rows_written"));
    let file = (status == "done").then(|| format!("/search/exports/{}/file", text("id")));
    JobPage {
        common: visit.common("export_job"),
        status_label: lang.t(&format!("job_{status}")).to_owned(),
        working: status == "queued" || status == "running",
        status,
        format: text("format").to_uppercase(),
        rows: show::count(lang, rows),
        written: show::count(lang, written),
        percent: (written * 100).checked_div(rows).unwrap_or(100).min(100),
        credits: show::count(lang, number("credits")),
        file,
        expires: job["expires_at"].as_str().map(|t| show::date(lang, &t[..10.min(t.len())])).unwrap_or_default(),
    }
}

/// GET /search/exports/{id}/file: the job's file, once done.
pub(crate) async fn file(State(pages): State<Pages>, visit: Visit, Path(id): Path<String>) -> Response {
    let (Some((_, session)), Some(registry)) = (visit.session.as_ref(), pages.registry.as_deref()) else {
        return see_other("/login");
    };
    match registry.export_job_file(&session.person, id).await {
        Ok(response) => response,
        Err(refusal) => visit.refused(&refusal),
    }
}
