//! The JSON error envelope: every error is `{"success": false, "message": …}`,
//! with `errors: {param: [msg]}` on 400.

use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

#[derive(Debug)]
pub enum ApiError {
    /// Invalid input: parameter → messages.
    BadRequest(Map<String, Value>),
    Unauthenticated,
    InsufficientCredits,
    CompanyNotFound,
    /// No partner of that id this month.
    PartnerNotFound,
    /// No such watchlist of the caller's (another user's is not theirs to know of).
    WatchlistNotFound,
    /// No such delivery of that list.
    DeliveryNotFound,
    /// No such export job of the caller's (another user's is not theirs to know of).
    ExportNotFound,
    /// An export job's file asked before the job is done (queued, running or failed).
    ExportNotReady,
    /// An export job's file deleted past its time (`--export-ttl`).
    ExportExpired,
    NotFound,
    MethodNotAllowed,
    /// The body did not arrive within the body timeout (the connection is then closed).
    RequestTimeout,
    PayloadTooLarge,
    UriTooLong,
    TooManyRequests {
        retry_after: u64,
    },
    /// A readiness probe's 503: what does not answer.
    NotReady(String),
    Internal(String),
}

impl ApiError {
    pub fn invalid(param: &str, message: impl Into<String>) -> ApiError {
        let mut errors = Map::new();
        errors.insert(param.to_owned(), json!([message.into()]));
        ApiError::BadRequest(errors)
    }

    /// A JSON body that could not be read (batch, export jobs, watchlists): a 413 when it is too
    /// large, else a 400 naming `body`.
    pub fn body_refused(rejection: BytesRejection) -> ApiError {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge
        } else {
            ApiError::invalid("body", rejection.body_text())
        }
    }

    /// The status and message of the error table.
    pub(crate) fn status(&self) -> (StatusCode, std::borrow::Cow<'static, str>) {
        let (status, message) = match self {
            ApiError::BadRequest(_) => (StatusCode::BAD_REQUEST, "Invalid input parameters"),
            ApiError::Unauthenticated => (StatusCode::UNAUTHORIZED, "Unauthenticated."),
            ApiError::InsufficientCredits => (StatusCode::PAYMENT_REQUIRED, "Insufficient credits."),
            ApiError::CompanyNotFound => (StatusCode::NOT_FOUND, "Company not found."),
            ApiError::PartnerNotFound => (StatusCode::NOT_FOUND, "Partner not found."),
            ApiError::WatchlistNotFound => (StatusCode::NOT_FOUND, "Watchlist not found."),
            ApiError::DeliveryNotFound => (StatusCode::NOT_FOUND, "Delivery not found."),
            ApiError::ExportNotFound => (StatusCode::NOT_FOUND, "Export not found."),
            ApiError::ExportNotReady => (StatusCode::CONFLICT, "Export not ready."),
            ApiError::ExportExpired => (StatusCode::GONE, "Export expired."),
            ApiError::NotFound => (StatusCode::NOT_FOUND, "Not found."),
            ApiError::MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, "Method not allowed."),
            ApiError::RequestTimeout => (StatusCode::REQUEST_TIMEOUT, "Request timeout."),
            ApiError::PayloadTooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "Payload too large."),
            ApiError::UriTooLong => (StatusCode::URI_TOO_LONG, "URI too long."),
            ApiError::TooManyRequests { .. } => (StatusCode::TOO_MANY_REQUESTS, "Too many requests."),
            ApiError::NotReady(what) => return (StatusCode::SERVICE_UNAVAILABLE, format!("Not ready: {what}.").into()),
            ApiError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "Internal server error."),
        };
        (status, message.into())
    }

    /// The JSON envelope (an internal error's detail goes to the log only).
    pub fn body(&self) -> Value {
        if let ApiError::Internal(detail) = self {
            tracing::error!(%detail, "internal error");
        }
        let mut body = json!({"success": false, "message": self.status().1});
        if let ApiError::BadRequest(errors) = self {
            body["errors"] = Value::Object(errors.clone());
        }
        body
    }
}

impl<E: std::fmt::Display> From<E> for ApiError
where
    E: std::error::Error,
{
    fn from(e: E) -> ApiError {
        ApiError::Internal(e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status().0, Json(self.body())).into_response();
        match self {
            ApiError::Unauthenticated => {
                response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            ApiError::TooManyRequests { retry_after } => {
                response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
            }
            ApiError::RequestTimeout => {
                response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            _ => {}
        }
        response
    }
}
