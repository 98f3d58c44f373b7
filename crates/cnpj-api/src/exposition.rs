//! The metrics listener (`serve --metrics-listen`): `GET /metrics` in the Prometheus text format.
//! The series counted while serving go through the `metrics` facade into the recorder that
//! `install` sets up (no recorder, no cost: the listener is off by default); the dataset's series
//! are read at each scrape, so that only the dataset served now has one and its age is current.
//! docs/operating.md lists every series.

use std::fmt::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::error::ApiError;
use crate::server::{Served, Shared};

/// The latency histograms' buckets, in seconds.
const BUCKETS: [f64; 14] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// How often the recorder drains its histograms' samples between scrapes.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// Installs the process's metrics recorder (call it once, within the runtime: it starts the
/// recorder's upkeep) and describes every series.
pub fn install() -> anyhow::Result<PrometheusHandle> {
    let handle = PrometheusBuilder::new().set_buckets(&BUCKETS)?.install_recorder()?;
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(UPKEEP_EVERY);
        loop {
            ticks.tick().await;
            upkeep.run_upkeep();
        }
    });
    describe_counter!("cnpj_http_requests_total", "HTTP requests answered, by route template, method and status.");
    describe_histogram!(
        "cnpj_http_request_duration_seconds",
        Unit::Seconds,
        "Time to answer a request (its response head), by route template."
    );
    describe_gauge!("cnpj_http_requests_in_flight", "Requests being answered.");
    describe_counter!(
        "cnpj_http_refusals_total",
        "Requests refused for their caller: unauthenticated (401), insufficient_credits (402), rate_limited (429)."
    );
    describe_counter!("cnpj_credits_charged_total", "Credits charged, by the endpoint that charged them.");
    describe_counter!(
        "cnpj_webhook_deliveries_total",
        "Webhook delivery attempts, by outcome: delivered, rejected (not 2xx), unreachable, refused (the address), \
         failed, waiting_credits, error."
    );
    describe_counter!("cnpj_searches_total", "Searches answered, by the search index or by SQL.");
    describe_counter!("cnpj_searches_over_budget_total", "Searches by SQL stopped at their budget (answered 400).");
    describe_counter!("cnpj_batch_cache_lookups_total", "Batch entries looked up in the batch cache: hit or miss.");
    describe_histogram!(
        "cnpj_accounts_duration_seconds",
        Unit::Seconds,
        "Time of a call of the accounts store, by operation."
    );
    Ok(handle)
}

#[derive(Clone)]
struct Scrape {
    state: Shared,
    handle: PrometheusHandle,
}

/// `GET /metrics`; anything else is a 404 in the JSON envelope.
pub fn router(state: Shared, handle: PrometheusHandle) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .fallback(|| async { ApiError::NotFound })
        .with_state(Scrape { state, handle })
}

async fn scrape(State(scrape): State<Scrape>) -> impl IntoResponse {
    let mut text = scrape.handle.render();
    text.push_str(&dataset_series(&scrape.state.served(), SystemTime::now()));
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text)
}

/// `cnpj_dataset_info{month, build_id} 1` and `cnpj_dataset_age_seconds` (since it was built,
/// when that is known) of the dataset served.
fn dataset_series(served: &Served, now: SystemTime) -> String {
    let store = &served.store;
    let mut text = String::new();
    let _ = writeln!(text, "# HELP cnpj_dataset_info The dataset served: its month and build id (always 1).");
    let _ = writeln!(text, "# TYPE cnpj_dataset_info gauge");
    let (month, build) = (label(store.source_month()), label(store.build_id()));
    let _ = writeln!(text, "cnpj_dataset_info{{month=\"{month}\",build_id=\"{build}\"}} 1");
    let built = cnpj_model::utc_seconds(store.built_at());
    let now = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    if let Some(built) = built {
        let _ = writeln!(text, "# HELP cnpj_dataset_age_seconds Seconds since the dataset served was built.");
        let _ = writeln!(text, "# TYPE cnpj_dataset_age_seconds gauge");
        let _ = writeln!(text, "cnpj_dataset_age_seconds {}", now - built);
    }
    text
}

/// A label value as the text format writes it (`\`, `"` and line feeds escaped).
fn label(value: &str) -> String {
    value.replace('\\', r"\\").replace('"', "\\\"").replace('\n', r"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label("2026-09"), "2026-09");
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
