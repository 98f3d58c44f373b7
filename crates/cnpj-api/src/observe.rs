//! What every request leaves behind: its `X-Request-Id` (a sane one sent is kept, else a new
//! random one), one log line (`--log-format`: text or JSON) and the HTTP metrics (requests by
//! route, method and status; latency by route; refusals; requests in flight). The route is the
//! template the router matched, as the OpenAPI document writes it, never the raw path (so the
//! metrics' series do not grow with the CNPJs asked for); a path no route matches is `unmatched`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The router's route of a company: a catch-all, so that a masked CNPJ with a raw `/`
/// (11.222.333/0001-81) still matches; `…/history` is a company's history, `…/network` its network.
pub const COMPANY_ROUTE: &str = "/api/v1/companies/{*cnpj}";

/// The route label of a request that no route matched.
const UNMATCHED: &str = "unmatched";

/// The methods counted by name; any other is `other`.
const METHODS: [&str; 9] = ["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "TRACE", "CONNECT"];

/// Who a request was answered for and the credits it was charged: put on the response by
/// authentication.
#[derive(Clone, Copy, Debug)]
pub struct Usage {
    pub user_id: i64,
    pub credits: i64,
}

/// The outermost layer, run after routing (so the route is known): the request id on the
/// response, the metrics and the log line. Events logged while answering carry the id in the
/// span `request`.
pub async fn observe(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let id = request_id(request.headers());
    let method = method_label(request.method().as_str());
    let route = route_label(request.extensions().get::<MatchedPath>().map(MatchedPath::as_str), request.uri().path());
    let in_flight = InFlight::start();
    let span = tracing::info_span!("request", id = id.to_str().unwrap_or_default());
    let mut response = next.run(request).instrument(span).await;
    drop(in_flight);
    let latency = started.elapsed();
    let status = response.status().as_u16();
    let usage = response.extensions().get::<Usage>().copied();
    metrics::counter!("cnpj_http_requests_total", "route" => route.clone(), "method" => method, "status" => status.to_string())
        .increment(1);
    metrics::histogram!("cnpj_http_request_duration_seconds", "route" => route.clone()).record(latency);
    if let Some(reason) = refusal(status) {
        metrics::counter!("cnpj_http_refusals_total", "reason" => reason).increment(1);
    }
    tracing::info!(
        request_id = id.to_str().unwrap_or_default(),
        method,
        route = route.as_str(),
        status,
        latency_ms = latency.as_micros() as f64 / 1000.0,
        user_id = usage.map(|u| u.user_id),
        credits = usage.map(|u| u.credits),
        "request"
    );
    response.headers_mut().insert(REQUEST_ID, id);
    response
}

/// The request's own id when it is 1 to 64 characters of `A-Z a-z 0-9 . _ -`, else a new one.
fn request_id(headers: &HeaderMap) -> HeaderValue {
    let sane = |v: &&HeaderValue| {
        (1..=64).contains(&v.len()) && v.as_bytes().iter().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(b))
    };
    headers.get(REQUEST_ID).filter(sane).cloned().unwrap_or_else(new_request_id)
}

/// 32 hex digits: 16 random bytes (should the system refuse them, the clock and a counter).
fn new_request_id() -> HeaderValue {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut bytes = [0u8; 16];
    let id = match getrandom::fill(&mut bytes) {
        Ok(()) => u128::from_le_bytes(bytes),
        Err(_) => {
            let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
            nanos << 32 | u128::from(COUNTER.fetch_add(1, Ordering::Relaxed))
        }
    };
    HeaderValue::from_str(&format!("{id:032x}")).expect("hex digits are a header value")
}

fn method_label(method: &str) -> &'static str {
    METHODS.into_iter().find(|m| *m == method).unwrap_or("other")
}

/// The route template as the OpenAPI document writes it. The router's catch-all for a company
/// (so that a mask's raw `/` still matches) is the detail, or the history for `…/history`.
fn route_label(matched: Option<&str>, path: &str) -> String {
    match matched {
        None => UNMATCHED.to_owned(),
        Some(COMPANY_ROUTE) if path.ends_with("/history") => "/api/v1/companies/{cnpj}/history".to_owned(),
        Some(COMPANY_ROUTE) if path.ends_with("/network") => "/api/v1/companies/{cnpj}/network".to_owned(),
        Some(COMPANY_ROUTE) => "/api/v1/companies/{cnpj}".to_owned(),
        Some(route) => route.to_owned(),
    }
}

/// The requests refused for their caller: no valid token, no credits, over the rate limit.
fn refusal(status: u16) -> Option<&'static str> {
    match status {
        401 => Some("unauthenticated"),
        402 => Some("insufficient_credits"),
        429 => Some("rate_limited"),
        _ => None,
    }
}

/// Counts a request in flight until dropped (also when the client goes away mid-request).
struct InFlight;

impl InFlight {
    fn start() -> InFlight {
        metrics::gauge!("cnpj_http_requests_in_flight").increment(1.0);
        InFlight
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        metrics::gauge!("cnpj_http_requests_in_flight").decrement(1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(sent: Option<&str>, kept: bool) {
        let mut headers = HeaderMap::new();
        if let Some(sent) = sent {
            headers.insert(REQUEST_ID, HeaderValue::from_bytes(sent.as_bytes()).unwrap());
        }
        let id = request_id(&headers);
        let id = id.to_str().unwrap();
        if kept {
            assert_eq!(Some(id), sent);
        } else {
            assert_ne!(Some(id), sent);
            assert!(id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()), "{sent:?} → {id}");
        }
    }

    #[test]
    fn a_sane_request_id_is_kept_any_other_replaced() {
        check(Some("abc-123_DEF.9"), true);
        check(Some(&"a".repeat(64)), true);
        check(None, false);
        check(Some(""), false);
        check(Some(&"a".repeat(65)), false);
        check(Some("a b"), false);
        check(Some("a/b"), false);
        check(Some("ação"), false);
        assert_ne!(request_id(&HeaderMap::new()), request_id(&HeaderMap::new()), "new ids differ");
    }

    #[test]
    fn labels_are_bounded() {
        assert_eq!(route_label(None, "/api/v1/companies/11222333000181"), "unmatched");
        assert_eq!(route_label(Some(COMPANY_ROUTE), "/api/v1/companies/11222333000181"), "/api/v1/companies/{cnpj}");
        assert_eq!(route_label(Some(COMPANY_ROUTE), "/api/v1/companies/1/history"), "/api/v1/companies/{cnpj}/history");
        assert_eq!(route_label(Some("/api/v1/cities"), "/api/v1/cities"), "/api/v1/cities");
        assert_eq!((method_label("GET"), method_label("BREW")), ("GET", "other"));
        assert_eq!((refusal(402), refusal(404)), (Some("insufficient_credits"), None));
    }
}
