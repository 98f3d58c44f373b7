//! The API reference page at `/docs`: Swagger UI (vendored by `scripts/vendor-swagger-ui` into
//! `assets/swagger-ui/`, embedded in the binary) rendering the served OpenAPI document. Like
//! `/healthz`, it needs no token and is neither charged nor counted; it fetches nothing from
//! elsewhere (its Content-Security-Policy allows this origin only).

use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::{HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// The vendored Swagger UI's version: it names the bundle's and stylesheet's URLs, which are
/// therefore cached for good.
static VERSION: LazyLock<&str> = LazyLock::new(|| include_str!("../assets/swagger-ui/VERSION").trim());

static PAGE: LazyLock<String> = LazyLock::new(|| include_str!("../assets/docs.html").replace("{version}", &VERSION));

/// Scripts, styles and requests of this origin only; images also as `data:` URLs (the
/// stylesheet's icons); nothing may frame the page or be posted from it.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// The page and its start script change with the binary, under the same URLs.
const REVALIDATE: &str = "no-cache";

/// A response with these headers, `nosniff` on every one.
fn file(content_type: &'static str, cache: &'static str, body: impl IntoResponse) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

/// GET /docs.
pub async fn page() -> Response {
    let mut response = file("text/html; charset=utf-8", REVALIDATE, PAGE.as_str());
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(HeaderName::from_static("cross-origin-opener-policy"), HeaderValue::from_static("same-origin"));
    response
}

/// GET /docs/{file}: the page's script and stylesheets; any other name is a 404.
pub async fn asset(Path(name): Path<String>) -> Response {
    const JS: &str = "text/javascript; charset=utf-8";
    let version = *VERSION;
    if name == format!("swagger-ui-bundle-{version}.js") {
        file(JS, IMMUTABLE, &include_bytes!("../assets/swagger-ui/swagger-ui-bundle.js")[..])
    } else if name == format!("swagger-ui-{version}.css") {
        file("text/css; charset=utf-8", IMMUTABLE, &include_bytes!("../assets/swagger-ui/swagger-ui.css")[..])
    } else if name == "docs.js" {
        file(JS, REVALIDATE, include_str!("../assets/docs.js"))
    } else {
        ApiError::NotFound.into_response()
    }
}
