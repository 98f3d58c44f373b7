//! What keeps the pages safe: the cookies (session, form, locale) and their flags, the CSRF token
//! of every form (bound to the session, or before login to a random form cookie), the
//! `Origin`/`Referer` check, whether a GET was the person's own step here (a charged page opened
//! from another site is not: fetch metadata, else the `Referer`), the password rules (a bundled
//! list of the 100,000 most common passwords), the device cookie's name, and the headers of every
//! page (CSP without inline script, no framing, no referrer off the site, no caching).

use std::collections::HashSet;
use std::sync::LazyLock;

use axum::http::{HeaderMap, HeaderValue, header};
use sha2::{Digest, Sha256};

pub const SESSION_COOKIE: &str = "cnpj_session";
pub const FORM_COOKIE: &str = "cnpj_form";
pub const LOCALE_COOKIE: &str = "cnpj_locale";
/// A token of the last account this browser logged in to: past that account's lock.
pub const DEVICE_COOKIE: &str = "cnpj_device";

/// The value of a cookie of the request.
pub fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim().to_owned())
        .filter(|v| !v.is_empty() && v.len() <= 128)
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Lax, Path=/, Secure unless `secure` is off;
/// `max_age` 0 deletes it.
pub fn set_cookie(name: &str, value: &str, max_age: i64, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    let text = format!("{name}={value}; Max-Age={max_age}; Path=/; HttpOnly; SameSite=Lax{secure}");
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("invalid=; Max-Age=0"))
}

/// The CSRF token of the forms of whoever holds `secret` (a session id, or the form cookie).
pub fn csrf_token(secret: &str) -> String {
    hex::encode(Sha256::digest(format!("cnpj-pages csrf\n{secret}").as_bytes()))
}

/// Whether `sent` is the CSRF token of `secret` (in constant time).
pub fn csrf_ok(secret: Option<&str>, sent: Option<&str>) -> bool {
    let (Some(secret), Some(sent)) = (secret, sent) else { return false };
    let expected = csrf_token(secret);
    expected.len() == sent.len() && expected.bytes().zip(sent.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// Whether `url` (an `Origin` or a `Referer`) is this service: the same host and port as the
/// request's `Host`.
fn is_here(headers: &HeaderMap, url: &HeaderValue) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else { return false };
    let authority = url.to_str().ok().and_then(|url| {
        let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"))?;
        Some(rest.split(['/', '?', '#']).next().unwrap_or("").to_ascii_lowercase())
    });
    authority.is_some_and(|a| a == host.to_ascii_lowercase())
}

/// Whether the request's `Origin` (else `Referer`), when present, is this service.
pub fn same_origin(headers: &HeaderMap) -> bool {
    let from = headers.get(header::ORIGIN).or_else(|| headers.get(header::REFERER));
    headers.contains_key(header::HOST) && from.is_none_or(|url| is_here(headers, url))
}

/// Whether a GET was the person's own step on this site, so that a page may charge them for it:
/// `Sec-Fetch-Site` is `same-origin` (a link or a form of these pages) or `none` (an address typed,
/// a bookmark: the person's own act); without that header (an older browser, a program), the
/// `Referer` is this service (the pages send it to themselves: `Referrer-Policy: same-origin`).
/// A link from another site (`cross-site`, and `same-site`: another host is another party) or a
/// request that shows neither is not, whatever its query string holds.
pub fn own_navigation(headers: &HeaderMap) -> bool {
    match headers.get("sec-fetch-site").map(HeaderValue::as_bytes) {
        Some(b"same-origin" | b"none") => true,
        Some(_) => false,
        None => headers.get(header::REFERER).is_some_and(|url| is_here(headers, url)),
    }
}

/// A random value for a cookie: 32 bytes, hex.
pub fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the system's random source");
    hex::encode(bytes)
}

/// The bundled list of common passwords (see `data/README.md`), lower-cased, built once.
static COMMON_PASSWORDS: LazyLock<HashSet<&'static str>> =
    LazyLock::new(|| include_str!("../data/common-passwords.txt").lines().collect());

/// The longest password taken (argon2 hashes any length; a form's field is bounded).
const MAX_PASSWORD: usize = 1024;

/// Whether a password is on the list, or is an entry of it with digits added at the end
/// (`password1234`), compared lower-cased.
fn common(password: &str) -> bool {
    let lower = password.to_lowercase();
    let stem = lower.trim_end_matches(|c: char| c.is_ascii_digit());
    COMMON_PASSWORDS.contains(lower.as_str()) || (stem.len() < lower.len() && COMMON_PASSWORDS.contains(stem))
}

/// Why a password is refused (a key of the pages' texts), if it is: under 10 characters, all
/// white space, one character repeated, among the 100,000 most common passwords (or one of them
/// with digits added), or the email itself (OWASP ASVS level 2).
pub fn password_problem(password: &str, email: &str) -> Option<&'static str> {
    let mut chars = password.chars();
    let first = chars.next();
    if password.chars().count() < 10 {
        Some("pw_short")
    } else if password.len() > MAX_PASSWORD {
        Some("pw_long")
    } else if password.chars().all(char::is_whitespace) {
        Some("pw_blank")
    } else if chars.all(|c| Some(c) == first) {
        Some("pw_repeated")
    } else if common(password) {
        Some("pw_common")
    } else if password.trim().eq_ignore_ascii_case(email.trim()) {
        Some("pw_email")
    } else {
        None
    }
}

/// The headers of every page: CSP (`default-src 'self'`, no script, no framing), same-origin
/// referrers, no caching, no sniffing.
pub fn page_headers(headers: &mut HeaderMap) {
    let csp = "default-src 'self'; script-src 'none'; object-src 'none'; img-src 'self' data:; \
               frame-ancestors 'none'; form-action 'self'; base-uri 'none'";
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(csp));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(password: &str, email: &str, expected: Option<&str>) {
        assert_eq!(password_problem(password, email), expected, "{password}");
    }

    #[test]
    fn password_rules() {
        check("short", "a@b.c", Some("pw_short"));
        check("1234567890", "a@b.c", Some("pw_common"));
        check("QWERTYUIOP", "a@b.c", Some("pw_common"));
        check("ana@example.com", "Ana@Example.com", Some("pw_email"));
        check("correct horse battery", "a@b.c", None);
        check(&"x".repeat(2000), "a@b.c", Some("pw_long"));
        check("            ", "a@b.c", Some("pw_blank"));
        check(" \t \n \u{a0}  \t   ", "a@b.c", Some("pw_blank"));
        check("aaaaaaaaaaaa", "a@b.c", Some("pw_repeated"));
        check("000000000000", "a@b.c", Some("pw_repeated"));
        check("ééééééééééé", "a@b.c", Some("pw_repeated"));
        check("password1234", "a@b.c", Some("pw_common"));
        check("Sunshine2024", "a@b.c", Some("pw_common"));
        check("qwertyuiop123", "a@b.c", Some("pw_common"));
        check("1234567890123", "a@b.c", Some("pw_common"));
        check("8401957362", "a@b.c", None);
        check("password1234!", "a@b.c", None);
        check("aaaaaaaaaaab", "a@b.c", None);
        assert!(COMMON_PASSWORDS.len() > 47_000, "the bundled list");
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        pairs.iter().map(|(k, v)| (k.parse().unwrap(), v.parse().unwrap())).collect()
    }

    #[test]
    fn origins_and_csrf_tokens() {
        assert!(same_origin(&headers(&[("host", "127.0.0.1:8080")])), "neither header: allowed");
        assert!(same_origin(&headers(&[("host", "127.0.0.1:8080"), ("origin", "http://127.0.0.1:8080")])));
        assert!(same_origin(&headers(&[("host", "x.org"), ("referer", "https://x.org/login?a=1")])));
        assert!(!same_origin(&headers(&[("host", "x.org"), ("origin", "https://evil.org")])));
        assert!(!same_origin(&headers(&[("host", "x.org"), ("origin", "null")])));
        assert!(!same_origin(&headers(&[("host", "x.org"), ("origin", "https://x.org.evil.org")])));
        assert!(!same_origin(&headers(&[("origin", "http://x.org")])), "no Host");
        assert!(csrf_ok(Some("s"), Some(&csrf_token("s"))));
        assert!(!csrf_ok(Some("s"), Some(&csrf_token("t"))));
        assert!(!csrf_ok(None, Some(&csrf_token("s"))) && !csrf_ok(Some("s"), None));
        let h = headers(&[("cookie", "a=1; cnpj_session=abc ; b=2")]);
        assert_eq!(cookie(&h, SESSION_COOKIE).as_deref(), Some("abc"));
        assert_eq!(cookie(&h, "c"), None);
    }

    fn navigation(pairs: &[(&str, &str)], expected: bool) {
        let mut all = vec![("host", "x.org")];
        all.extend(pairs);
        assert_eq!(own_navigation(&headers(&all)), expected, "{pairs:?}");
    }

    #[test]
    fn a_charged_page_is_the_persons_own_step() {
        navigation(&[("sec-fetch-site", "same-origin")], true);
        navigation(&[("sec-fetch-site", "none")], true);
        navigation(&[("sec-fetch-site", "cross-site")], false);
        navigation(&[("sec-fetch-site", "same-site"), ("referer", "https://x.org/search")], false);
        navigation(&[("sec-fetch-site", "cross-site"), ("referer", "https://x.org/search")], false);
        navigation(&[("referer", "https://x.org/search?state=SP")], true);
        navigation(&[("referer", "https://evil.org/x.org")], false);
        navigation(&[("referer", "https://x.org.evil.org/")], false);
        navigation(&[], false);
    }
}
