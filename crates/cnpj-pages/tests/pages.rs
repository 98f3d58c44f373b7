//! The pages as a person uses them: the real router on a loopback port over a real SQLite
//! accounts store, driven by a small HTTP client that keeps cookies like a browser. Every
//! security rule of the pages has a test here that fails without it.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use cnpj_accounts::{Accounts, Attempt, LinkKind, NewWatchlist, Plans, Role, Status, hash_password};
use cnpj_pages::{Config, Mailer, Signup};

struct Site {
    addr: String,
    accounts: Arc<Accounts>,
    dir: tempfile::TempDir,
    _runtime: tokio::runtime::Runtime,
}

fn site_with(signup: Signup, secure_cookies: bool) -> Site {
    site_mailing(signup, secure_cookies, None)
}

/// A site that mails through the SMTP server at `smtp` when given.
fn site_mailing(signup: Signup, secure_cookies: bool, smtp: Option<&str>) -> Site {
    let dir = tempfile::tempdir().unwrap();
    let plans = Plans::parse(
        "default = \"free\"\n[plans.free]\nmonthly_allowance = 10\n[plans.pro]\nmonthly_allowance = 1000\n\
         [plans.tiny]\nmax_watched = 3\n",
    )
    .unwrap();
    let accounts = Arc::new(Accounts::open(&dir.path().join("accounts.sqlite")).unwrap().with_plans(plans));
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let mail = smtp.map(|smtp| {
        Mailer::new(&format!("smtp://{smtp}"), "Registry <no-reply@example.com>", &format!("http://{addr}")).unwrap()
    });
    let webhooks = cnpj_webhooks::Policy::default();
    let router = cnpj_pages::router(Arc::clone(&accounts), Config { signup, secure_cookies, mail, webhooks }, None);
    runtime.spawn(async move {
        axum::serve(listener, router.into_make_service_with_connect_info::<SocketAddr>()).await.unwrap();
    });
    Site { addr, accounts, dir, _runtime: runtime }
}

fn site() -> Site {
    site_with(Signup::Invite, true)
}

const PASSWORD: &str = "correct horse battery";

impl Site {
    /// An active person with `PASSWORD`.
    fn person(&self, email: &str, name: &str) -> i64 {
        let hash = hash_password(PASSWORD).unwrap();
        self.accounts.create_person(email, &hash, name, "en", Status::Active).unwrap().id
    }

    fn sql(&self, statement: &str) {
        rusqlite::Connection::open(self.dir.path().join("accounts.sqlite")).unwrap().execute_batch(statement).unwrap();
    }

    fn browser(&self) -> Browser {
        self.browser_from(None)
    }

    /// A browser whose requests come from the loopback address `from` (127.0.0.1 when none).
    fn browser_from(&self, from: Option<&str>) -> Browser {
        let origin = Some(format!("http://{}", self.addr));
        Browser { addr: self.addr.clone(), from: from.map(str::to_owned), cookies: HashMap::new(), origin }
    }
}

#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    fn set_cookies(&self) -> Vec<&str> {
        self.headers.iter().filter(|(k, _)| k.eq_ignore_ascii_case("set-cookie")).map(|(_, v)| v.as_str()).collect()
    }

    /// The value of the first hidden `csrf_token` of the page.
    fn csrf(&self) -> String {
        let at = self.body.find("name=\"csrf_token\" value=\"").expect("a form with a CSRF token") + 25;
        self.body[at..].split('"').next().unwrap().to_owned()
    }
}

/// One request on a new connection; the response read to its end.
fn send(addr: &str, method: &str, path: &str, headers: &[(String, String)], body: Option<&str>) -> Reply {
    send_from(None, addr, method, path, headers, body)
}

/// A connection to `addr` from the loopback address `from` (127.0.0.1 when none): another peer.
fn connect(from: Option<&str>, addr: &str) -> TcpStream {
    let Some(from) = from else { return TcpStream::connect(addr).unwrap() };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
    let stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
        socket.connect(addr.parse().unwrap()).await.unwrap().into_std().unwrap()
    });
    stream.set_nonblocking(false).unwrap();
    stream
}

fn send_from(
    from: Option<&str>,
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: Option<&str>,
) -> Reply {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        head.push_str(&format!("Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n", b.len()));
    }
    head.push_str("\r\n");
    head.push_str(body.unwrap_or(""));
    let mut stream = connect(from, addr);
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    stream.write_all(head.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("a whole response");
    let mut lines = head.lines();
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers =
        lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned())).collect();
    let mut reply = Reply { status, headers, body: body.to_owned() };
    if reply.header("transfer-encoding") == Some("chunked") {
        reply.body = dechunk(&reply.body);
    }
    reply
}

fn dechunk(mut data: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = data.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        data = &rest[size + 2..];
    }
    out
}

fn form(fields: &[(&str, &str)]) -> String {
    fields.iter().map(|(k, v)| format!("{k}={}", encode(v))).collect::<Vec<_>>().join("&")
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Keeps cookies as a browser does and sends this site as the `Origin` of its POSTs.
struct Browser {
    addr: String,
    from: Option<String>,
    cookies: HashMap<String, String>,
    origin: Option<String>,
}

impl Browser {
    fn headers(&self) -> Vec<(String, String)> {
        let mut headers = Vec::new();
        if !self.cookies.is_empty() {
            let cookie = self.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; ");
            headers.push(("Cookie".to_owned(), cookie));
        }
        headers
    }

    fn keep(&mut self, reply: &Reply) {
        for set in reply.set_cookies() {
            let (pair, attributes) = set.split_once(';').unwrap_or((set, ""));
            let (name, value) = pair.split_once('=').unwrap();
            if attributes.contains("Max-Age=0") {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_owned(), value.to_owned());
            }
        }
    }

    fn get(&mut self, path: &str) -> Reply {
        let reply = send_from(self.from.as_deref(), &self.addr, "GET", path, &self.headers(), None);
        self.keep(&reply);
        reply
    }

    fn post(&mut self, path: &str, fields: &[(&str, &str)]) -> Reply {
        let mut headers = self.headers();
        if let Some(origin) = &self.origin {
            headers.push(("Origin".to_owned(), origin.clone()));
        }
        let reply = send_from(self.from.as_deref(), &self.addr, "POST", path, &headers, Some(&form(fields)));
        self.keep(&reply);
        reply
    }

    /// A POST of the form on `page` (its CSRF token added).
    fn submit(&mut self, page: &str, action: &str, fields: &[(&str, &str)]) -> Reply {
        let csrf = self.get(page).csrf();
        let mut all = vec![("csrf_token", csrf.as_str())];
        all.extend_from_slice(fields);
        self.post(action, &all)
    }

    fn session(&self) -> Option<String> {
        self.cookies.get("cnpj_session").cloned()
    }

    fn log_in(&mut self, email: &str, password: &str) -> Reply {
        self.submit("/login", "/login", &[("email", email), ("password", password)])
    }
}

#[test]
fn sign_up_by_invitation_make_and_revoke_a_token_log_out() {
    let s = site();
    let invite = s.accounts.make_link(LinkKind::Invite, "ana@example.com", None, None, 25).unwrap();
    let mut b = s.browser();
    assert_eq!(b.get("/signup").status, 200, "a page saying an invitation is needed");
    let page = b.get(&format!("/signup?invite={invite}"));
    assert!(page.body.contains("ana@example.com"), "{}", page.body);
    let made = b.submit(
        &format!("/signup?invite={invite}"),
        "/signup",
        &[("invite", &invite), ("display_name", "Ana"), ("password", PASSWORD)],
    );
    assert_eq!((made.status, made.header("location")), (303, Some("/account")), "{}", made.body);
    let cookie = made.set_cookies().into_iter().find(|c| c.starts_with("cnpj_session=")).unwrap().to_owned();
    for flag in ["HttpOnly", "SameSite=Lax", "Path=/", "Secure"] {
        assert!(cookie.contains(flag), "{cookie}");
    }
    let account = b.get("/account");
    assert_eq!(account.status, 200);
    assert!(account.body.contains("Ana") && account.body.contains(">25<"), "credits of the invitation");

    let made = b.submit("/account", "/account/tokens", &[("name", "laptop"), ("expires_days", "30")]);
    let at = made.body.find("id=\"new-token\">").expect("the new token is shown") + 15;
    let token = made.body[at..].split('<').next().unwrap().to_owned();
    let user = s.accounts.authenticate(&token).unwrap().expect("the token works");
    assert!(!b.get("/account").body.contains(&token), "shown once");
    let revoke = b.submit("/account", &format!("/account/tokens/{}/revoke", &token[..12]), &[]);
    assert_eq!(revoke.status, 303);
    assert!(s.accounts.authenticate(&token).unwrap().is_none(), "revoked");
    assert_eq!(s.accounts.tokens(user.id).unwrap().len(), 1);

    let session = b.session().unwrap();
    let out = b.submit("/account", "/logout", &[]);
    assert_eq!((out.status, b.session()), (303, None));
    assert!(s.accounts.session(&session).unwrap().is_none(), "logout deletes the session in the store");
    let mut replay = s.browser();
    replay.cookies.insert("cnpj_session".into(), session);
    assert_eq!(replay.get("/account").header("location"), Some("/login"));
    assert_eq!(b.get(&format!("/signup?invite={invite}")).status, 404, "the invitation was used");
}

#[test]
fn cookies_without_secure_only_when_asked() {
    let s = site_with(Signup::Invite, false);
    s.person("bia@example.com", "Bia");
    let mut b = s.browser();
    let login = b.log_in("bia@example.com", PASSWORD);
    let cookie = login.set_cookies().into_iter().find(|c| c.starts_with("cnpj_session=")).unwrap();
    assert!(cookie.contains("HttpOnly") && !cookie.contains("Secure"), "{cookie}");
}

#[test]
fn a_post_without_a_valid_csrf_token_or_from_elsewhere_is_403_and_changes_nothing() {
    let s = site();
    let id = s.person("cid@example.com", "Cid");
    let mut b = s.browser();
    b.log_in("cid@example.com", PASSWORD);
    let csrf = b.get("/account").csrf();
    let mut other = s.browser();
    s.person("dan@example.com", "Dan");
    other.log_in("dan@example.com", PASSWORD);
    let foreign = other.get("/account").csrf();
    // The fields sent and the Origin.
    type Case<'a> = (Vec<(&'a str, &'a str)>, Option<String>);
    let cases: Vec<Case> = vec![
        (vec![("name", "x")], Some(format!("http://{}", s.addr))),
        (vec![("csrf_token", "0000"), ("name", "x")], Some(format!("http://{}", s.addr))),
        (vec![("csrf_token", &foreign), ("name", "x")], Some(format!("http://{}", s.addr))),
        (vec![("csrf_token", &csrf), ("name", "x")], Some("https://evil.example".to_owned())),
    ];
    for (fields, origin) in cases {
        b.origin = origin;
        let r = b.post("/account/tokens", &fields);
        assert_eq!(r.status, 403, "{fields:?}");
        let r = b.post("/account/delete", &[fields[0], ("password", PASSWORD)]);
        assert_eq!(r.status, 403);
    }
    assert!(s.accounts.tokens(id).unwrap().is_empty() && s.accounts.person(id).unwrap().unwrap().email.is_some());
    // A Referer from elsewhere (no Origin) is refused too; none at all is allowed.
    let mut headers = b.headers();
    headers.push(("Referer".into(), "https://evil.example/page".into()));
    let body = form(&[("csrf_token", &csrf), ("name", "x")]);
    assert_eq!(send(&s.addr, "POST", "/account/tokens", &headers, Some(&body)).status, 403);
    b.origin = None;
    assert_eq!(b.post("/account/tokens", &[("csrf_token", &csrf), ("name", "ok")]).status, 200);
    assert_eq!(s.accounts.tokens(id).unwrap().len(), 1);
    // Before login, the forms' token is bound to the form cookie.
    let mut anonymous = s.browser();
    assert_eq!(anonymous.post("/login", &[("email", "cid@example.com"), ("password", PASSWORD)]).status, 403);
    assert_eq!(
        anonymous.post("/login", &[("csrf_token", &csrf), ("email", "cid@example.com"), ("password", PASSWORD)]).status,
        403
    );
}

#[test]
fn the_session_id_changes_at_login_and_at_a_password_change() {
    let s = site();
    let id = s.person("eva@example.com", "Eva");
    let mut b = s.browser();
    let csrf = b.get("/login").csrf();
    let planted = s.accounts.open_session(id).unwrap();
    b.cookies.insert("cnpj_session".into(), planted.clone());
    b.post("/login", &[("csrf_token", &csrf), ("email", "eva@example.com"), ("password", PASSWORD)]);
    let first = b.session().unwrap();
    assert_ne!(first, planted, "a new id at login");
    assert!(s.accounts.session(&planted).unwrap().is_none(), "the one the browser had is gone");
    let wrong =
        b.submit("/account", "/account/password", &[("current", "not it at all"), ("password", "a brand new secret")]);
    assert_eq!(wrong.status, 400);
    let changed =
        b.submit("/account", "/account/password", &[("current", PASSWORD), ("password", "a brand new secret")]);
    assert_eq!(changed.status, 303);
    let second = b.session().unwrap();
    assert_ne!(second, first);
    assert!(s.accounts.session(&first).unwrap().is_none() && s.accounts.session(&second).unwrap().is_some());
    assert!(s.accounts.verify_login("eva@example.com", "a brand new secret").unwrap().is_some());
}

#[test]
fn sessions_end_after_two_idle_hours_and_thirty_days() {
    let s = site();
    s.person("fay@example.com", "Fay");
    let mut b = s.browser();
    b.log_in("fay@example.com", PASSWORD);
    assert_eq!(b.get("/account").status, 200);
    s.sql("UPDATE sessions SET seen_at = seen_at - 7100");
    assert_eq!(b.get("/account").status, 200, "seen again: the idle clock restarts");
    s.sql("UPDATE sessions SET seen_at = seen_at - 7200");
    assert_eq!(b.get("/account").header("location"), Some("/login"), "2 hours idle");
    b.log_in("fay@example.com", PASSWORD);
    s.sql("UPDATE sessions SET created_at = created_at - 30 * 86400 + 60");
    assert_eq!(b.get("/account").status, 200);
    s.sql("UPDATE sessions SET created_at = created_at - 60");
    assert_eq!(b.get("/account").header("location"), Some("/login"), "30 days in all");
}

/// The error text of a login page.
fn login_error(r: &Reply) -> String {
    let at = r.body.find("class=\"error\" role=\"alert\">").expect("an error") + 27;
    r.body[at..].split('<').next().unwrap().to_owned()
}

#[test]
fn logins_are_throttled_alike_for_unknown_emails_and_wrong_passwords() {
    let s = site();
    s.person("gil@example.com", "Gil");
    let mut b = s.browser();
    let timed = |b: &mut Browser, email: &str| {
        let csrf = b.get("/login").csrf();
        let started = Instant::now();
        let r = b.post("/login", &[("csrf_token", &csrf), ("email", email), ("password", "wrong password!")]);
        (r, started.elapsed())
    };
    let (unknown, unknown_time) = timed(&mut b, "nobody@example.com");
    let (wrong, wrong_time) = timed(&mut b, "gil@example.com");
    assert_eq!((unknown.status, wrong.status), (401, 401));
    assert_eq!(login_error(&unknown), login_error(&wrong), "one message");
    let (fast, slow) = (unknown_time.min(wrong_time), unknown_time.max(wrong_time));
    assert!(slow < fast * 4 + Duration::from_millis(30), "a similar time: {unknown_time:?} vs {wrong_time:?}");
    for _ in 0..4 {
        timed(&mut b, "gil@example.com");
    }
    let (locked, _) = timed(&mut b, "gil@example.com");
    assert_eq!(locked.status, 429, "after 5 failures of the account from the address");
    assert!(locked.header("retry-after").is_some());
    let refused = b.log_in("gil@example.com", PASSWORD);
    assert_eq!(refused.status, 429, "even with the right password, while it waits");
    for _ in 0..4 {
        timed(&mut b, "nobody@example.com");
    }
    let (unknown_locked, _) = timed(&mut b, "nobody@example.com");
    assert_eq!(unknown_locked.status, 429, "an unknown email waits alike");
    assert_eq!(login_error(&refused), login_error(&unknown_locked));
    // Five wrong passwords from one address lock no one out from another.
    let mut elsewhere = s.browser_from(Some("127.0.0.2"));
    assert_eq!(elsewhere.log_in("gil@example.com", PASSWORD).status, 303, "the owner, from another address");
}

#[test]
fn an_account_is_locked_only_past_50_failures_save_to_its_devices_and_a_reset_ends_it() {
    let s = site();
    let id = s.person("ivy@example.com", "Ivy");
    let mut own = s.browser();
    let first = own.log_in("ivy@example.com", PASSWORD);
    assert_eq!(first.status, 303);
    let device = own.cookies.get("cnpj_device").cloned().expect("a device cookie");
    let set = first.set_cookies().into_iter().find(|c| c.starts_with("cnpj_device=")).unwrap();
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Lax") && set.contains("Secure"), "{set}");
    own.submit("/account", "/logout", &[]);
    assert_eq!(own.cookies.get("cnpj_device"), Some(&device), "kept after logging out");
    // 50 wrong passwords from 13 addresses, 4 each (under each address's own throttle).
    for n in 0..50 {
        let mut attacker = s.browser_from(Some(&format!("127.0.{}.{}", 1 + n / 4, 10 + n / 4)));
        assert_eq!(attacker.log_in("ivy@example.com", "not ivy's password").status, 401, "failure {n}");
    }
    let mut fresh = s.browser_from(Some("127.0.99.1"));
    let locked = fresh.log_in("ivy@example.com", PASSWORD);
    assert_eq!(locked.status, 429, "50 failures in 15 minutes lock the account");
    assert!(locked.header("retry-after").is_some());
    let mut forged = s.browser();
    forged.cookies.insert("cnpj_device".into(), format!("{id}.1.{}", "0".repeat(64)));
    assert_eq!(forged.log_in("ivy@example.com", PASSWORD).status, 429, "a forged device cookie");
    assert_eq!(own.log_in("ivy@example.com", PASSWORD).status, 303, "a device that logged in before gets in");
    assert_eq!(fresh.log_in("ivy@example.com", PASSWORD).status, 429, "the lock stays for others");
    let link = s.accounts.make_link(LinkKind::Reset, "ivy@example.com", Some(id), None, 0).unwrap();
    let reset = fresh.submit(
        &format!("/password/reset?token={link}"),
        "/password/reset",
        &[("token", &link), ("password", "ivy's brand new secret")],
    );
    assert_eq!(reset.status, 200);
    assert_eq!(fresh.log_in("ivy@example.com", "ivy's brand new secret").status, 303, "a reset ends the lock");
}

#[test]
fn passwords_must_be_long_uncommon_and_not_the_email() {
    let s = site_with(Signup::Open, true);
    let mut b = s.browser();
    for (password, message) in [
        ("short1", "at least 10"),
        ("1234567890", "too common"),
        ("qwertyuiop", "too common"),
        ("hal@example.com", "cannot be your email"),
        ("            ", "only white space"),
        ("aaaaaaaaaaaa", "one character repeated"),
        ("000000000000", "one character repeated"),
        ("password1234", "too common"),
        ("Sunshine2024", "too common"),
    ] {
        let r = b.submit("/signup?locale=en", "/signup", &[("email", "hal@example.com"), ("password", password)]);
        assert_eq!(r.status, 400, "{password}");
        assert!(r.body.contains(message), "{password}: {}", r.body);
    }
    for (password, message) in [
        ("            ", "não pode ser só espaços"),
        ("aaaaaaaaaaaa", "um só caractere repetido"),
        ("password1234", "comum demais"),
    ] {
        let r = b.submit("/signup?locale=pt-BR", "/signup", &[("email", "hal@example.com"), ("password", password)]);
        assert!(r.status == 400 && r.body.contains(message), "{password}: {}", r.body);
    }
    let r = b.submit(
        "/signup?locale=en",
        "/signup",
        &[("email", "x<svg/onload=alert(1)>@evil.example"), ("password", PASSWORD)],
    );
    assert_eq!(r.status, 400);
    assert!(r.body.contains("Give a valid email"), "{}", r.body);
    assert!(s.accounts.person_by_email("x<svg/onload=alert(1)>@evil.example").unwrap().is_none());
    assert!(s.accounts.person_by_email("hal@example.com").unwrap().is_none());
    let r = b.submit("/signup", "/signup", &[("email", "Hal@Example.com"), ("password", PASSWORD)]);
    assert_eq!(r.status, 303, "open sign-up");
    let mut again = s.browser();
    let r = again.submit("/signup?locale=en", "/signup", &[("email", "hal@example.com"), ("password", PASSWORD)]);
    assert!(r.body.contains("exists already"));
}

#[test]
fn open_sign_ups_are_throttled_by_address_and_by_network() {
    let s = site_with(Signup::Open, true);
    let sign_up = |from: &str, n: usize| {
        let mut b = s.browser_from(Some(from));
        let email = format!("user{n}@example.com");
        b.submit("/signup?locale=es", "/signup", &[("email", &email), ("password", PASSWORD)])
    };
    let mut statuses = Vec::new();
    for n in 0..20 {
        let r = sign_up("127.0.0.1", n);
        if r.status == 429 {
            assert!(r.header("retry-after").is_some_and(|s| s.parse::<u64>().unwrap() > 3500), "{r:?}");
            assert!(r.body.contains("Demasiados intentos"), "in the visitor's language: {}", r.body);
        }
        statuses.push(r.status);
    }
    assert_eq!(statuses, [[303; 5].as_slice(), &[429; 15]].concat(), "5 an hour from an address");
    assert!(s.accounts.person_by_email("user5@example.com").unwrap().is_none(), "a 429 made nothing");
    let mut n = 100;
    for from in ["127.0.0.2", "127.0.0.3", "127.0.0.4"] {
        for _ in 0..5 {
            n += 1;
            assert_eq!(sign_up(from, n).status, 303, "{from}");
        }
    }
    assert_eq!(sign_up("127.0.0.5", 200).status, 429, "20 an hour from a /24");
    assert_eq!(sign_up("127.0.1.5", 201).status, 303, "another /24");
    let mut b = s.browser_from(Some("127.0.2.1"));
    let taken = b.submit("/signup?locale=en", "/signup", &[("email", "user0@example.com"), ("password", PASSWORD)]);
    assert!(taken.status == 400 && taken.body.contains("exists already"), "without mail, a taken email is said");
}

/// A page's body with its CSRF tokens taken out.
fn without_tokens(body: &str) -> String {
    body.split("name=\"csrf_token\" value=\"").map(|part| part.split_once('"').map_or(part, |(_, rest)| rest)).collect()
}

#[test]
fn with_mail_a_taken_email_is_answered_as_a_new_one_and_its_owner_told() {
    let (smtp, mails) = smtp_server();
    let s = site_mailing(Signup::Open, true, Some(&smtp));
    s.person("ola@example.com", "Ola");
    let sign_up = |email: &str| {
        let mut b = s.browser();
        let csrf = b.get("/signup?locale=en").csrf();
        let started = Instant::now();
        let r = b.post("/signup", &[("csrf_token", &csrf), ("email", email), ("password", PASSWORD)]);
        (r, started.elapsed())
    };
    let (new, new_time) = sign_up("new@example.com");
    let (taken, taken_time) = sign_up("OLA@example.com");
    assert_eq!((new.status, without_tokens(&new.body)), (taken.status, without_tokens(&taken.body)));
    assert_eq!(taken.status, 200);
    let (fast, slow) = (new_time.min(taken_time), new_time.max(taken_time));
    assert!(slow < fast * 4 + Duration::from_millis(30), "a similar time: {new_time:?} vs {taken_time:?}");
    let mut sent: Vec<String> = (0..2).map(|_| mails.recv_timeout(Duration::from_secs(10)).expect("a mail")).collect();
    sent.sort_by_key(|m| !m.contains("To: ola@example.com"));
    assert!(sent[0].contains("Subject: A sign-up with your email"), "{}", sent[0]);
    assert_eq!(link_in(&sent[0], &s.addr, "/password/forgot"), "/password/forgot");
    assert!(sent[1].contains("To: new@example.com") && sent[1].contains("Subject: Confirm your email"));
    let owner = s.accounts.verify_login("ola@example.com", PASSWORD).unwrap();
    assert!(owner.is_some(), "the owner's account is as it was");
}

#[test]
fn pages_send_csp_no_framing_same_origin_referrers_and_no_store() {
    let s = site_with(Signup::Open, true);
    s.person("ivo@example.com", "Ivo");
    let mut b = s.browser();
    let mut pages = vec![b.get("/login"), b.get("/signup"), b.get("/password/forgot")];
    b.log_in("ivo@example.com", PASSWORD);
    pages.push(b.get("/account"));
    for r in &pages {
        let csp = r.header("content-security-policy").unwrap();
        assert!(csp.contains("default-src 'self'") && csp.contains("frame-ancestors 'none'"), "{csp}");
        assert!(!csp.contains("unsafe-inline") && csp.contains("script-src 'none'"), "{csp}");
        assert_eq!(r.header("referrer-policy"), Some("same-origin"));
        assert_eq!(r.header("cache-control"), Some("no-store"));
        assert!(!r.body.contains("<script") && !r.body.contains(" style="), "no inline script or style");
    }
    assert_eq!(b.get("/pages/style.css").status, 200);
}

#[test]
fn text_people_type_is_shown_as_text() {
    let s = site();
    let evil = "<script>alert(1)</script>";
    let id = s.person("jo@example.com", evil);
    let mut b = s.browser();
    b.log_in("jo@example.com", PASSWORD);
    b.submit("/account", "/account/tokens", &[("name", evil)]);
    let page = b.get("/account");
    assert!(!page.body.contains(evil) && !page.body.contains("<script"), "escaped");
    let shown = "&#60;script&#62;alert(1)&#60;/script&#62;";
    assert_eq!(page.body.matches(shown).count(), 3, "the name, the token's name and its revoke button's label");
    assert_eq!(s.accounts.tokens(id).unwrap()[0].name, evil, "stored as typed");
}

#[test]
fn the_language_by_query_then_cookie_then_accept_language() {
    let s = site();
    let mut b = s.browser();
    assert!(b.get("/login").body.contains("Entrar"), "pt-br by default");
    assert!(b.get("/login?locale=es").body.contains("Iniciar sesión"));
    assert!(b.get("/login").body.contains("Iniciar sesión"), "remembered in a cookie");
    let headers = vec![("Accept-Language".to_owned(), "en-GB,en;q=0.9".to_owned())];
    assert!(send(&s.addr, "GET", "/login", &headers, None).body.contains("Log in"));
}

#[test]
fn reset_by_link_and_delete_the_account() {
    let s = site();
    let id = s.person("kim@example.com", "Kim");
    s.accounts.charge(id, 0, "detail").unwrap().unwrap();
    let mut old = s.browser();
    old.log_in("kim@example.com", PASSWORD);
    let mut b = s.browser();
    let forgot = b.submit("/password/forgot", "/password/forgot", &[("email", "kim@example.com")]);
    let unknown = b.submit("/password/forgot", "/password/forgot", &[("email", "nobody@example.com")]);
    assert_eq!((forgot.status, forgot.body.len()), (unknown.status, unknown.body.len()), "the same answer");
    let link = s.accounts.make_link(LinkKind::Reset, "kim@example.com", Some(id), None, 0).unwrap();
    let reset_page = format!("/password/reset?token={link}");
    let r = b.submit(&reset_page, "/password/reset", &[("token", &link), ("password", "short")]);
    assert_eq!(r.status, 400);
    let r = b.submit(&reset_page, "/password/reset", &[("token", &link), ("password", "my new long secret")]);
    assert_eq!(r.status, 200);
    assert_eq!(b.get(&reset_page).status, 404, "single use");
    assert_eq!(old.get("/account").header("location"), Some("/login"), "sessions end at a reset");
    assert_eq!(b.log_in("kim@example.com", "my new long secret").status, 303);

    s.accounts.grant("kim@example.com", 5).unwrap();
    s.accounts.charge(id, 2, "detail").unwrap().unwrap();
    let refused = b.submit("/account", "/account/delete", &[("password", "not my password")]);
    assert_eq!(refused.status, 400);
    let deleted = b.submit("/account", "/account/delete", &[("password", "my new long secret")]);
    assert_eq!((deleted.status, b.session()), (200, None));
    let erased = s.accounts.person(id).unwrap().unwrap();
    assert_eq!((erased.email, erased.display_name), (None, None));
    assert_eq!(s.accounts.ledger(id, 50).unwrap().len(), 1, "the ledger stays under the anonymous id");
    assert_eq!(b.log_in("kim@example.com", "my new long secret").status, 401);
}

#[test]
fn sign_up_modes() {
    let closed = site_with(Signup::Closed, true);
    assert_eq!(closed.browser().get("/signup").status, 404);
    let mut b = closed.browser();
    let csrf = b.get("/login").csrf();
    assert_eq!(b.post("/signup", &[("csrf_token", &csrf), ("email", "x@y.org"), ("password", PASSWORD)]).status, 404);
    let invite = site();
    let mut b = invite.browser();
    let r = b.submit("/login", "/signup", &[("email", "x@y.org"), ("password", PASSWORD)]);
    assert_eq!(r.status, 404, "no invitation, no account");
    assert!(invite.accounts.person_by_email("x@y.org").unwrap().is_none());
}

#[test]
fn admins_list_grant_change_plans_disable_and_revoke_with_an_audit_log() {
    let s = site();
    let admin = s.person("root@example.com", "Root");
    s.accounts.set_role("root@example.com", Role::Admin).unwrap();
    let user = s.person("mia@example.com", "<b>Mia</b>");
    let token = s.accounts.create_token(user, "script", None).unwrap();
    let mut mia = s.browser();
    mia.log_in("mia@example.com", PASSWORD);
    assert_eq!(mia.get("/admin").status, 404, "not an admin");
    assert_eq!(s.browser().get("/admin").status, 404, "nobody");

    let mut b = s.browser();
    b.log_in("root@example.com", PASSWORD);
    let list = b.get("/admin");
    assert_eq!(list.status, 200);
    assert!(list.body.contains("mia@example.com") && list.body.contains("root@example.com"));
    assert_eq!(list.header("cache-control"), Some("no-store"));
    let found = b.get("/admin?q=MIA");
    assert!(found.body.contains("mia@example.com") && !found.body.contains("root@example.com"), "search");

    let grant =
        b.submit("/admin", &format!("/admin/users/{user}/grant"), &[("credits", "40"), ("reason", "a <i>gift</i>")]);
    assert_eq!(grant.status, 303);
    assert_eq!(s.accounts.person(user).unwrap().unwrap().credits, 40);
    assert!(mia.get("/account").body.contains(">40<"), "the user sees the credits");
    let bad = b.submit("/admin", &format!("/admin/users/{user}/plan"), &[("plan", "gold")]);
    assert_eq!(bad.status, 400);
    b.submit("/admin", &format!("/admin/users/{user}/plan"), &[("plan", "pro")]);
    assert_eq!(s.accounts.person(user).unwrap().unwrap().plan.as_deref(), Some("pro"));

    b.submit("/admin", &format!("/admin/users/{user}/status"), &[("status", "disabled")]);
    assert_eq!(mia.get("/account").header("location"), Some("/login"), "a disabled user's sessions end");
    assert!(s.accounts.authenticate(&token).unwrap().is_none(), "and their tokens are refused");
    let row = b.get("/admin?q=mia&locale=en").body;
    assert!(row.contains("<td>disabled</td>") && row.contains(">Enable</button>"), "in the page's language: {row}");
    assert!(b.get("/admin?q=mia&locale=pt-br").body.contains("<td>desativado</td>"));
    b.submit("/admin", &format!("/admin/users/{user}/status"), &[("status", "active")]);
    assert!(s.accounts.authenticate(&token).unwrap().is_some());
    b.submit("/admin", "/admin/tokens/revoke", &[("prefix", &token[..12])]);
    assert!(s.accounts.authenticate(&token).unwrap().is_none());

    let forged =
        b.post(&format!("/admin/users/{user}/grant"), &[("csrf_token", "nope"), ("credits", "5"), ("reason", "x")]);
    assert_eq!(forged.status, 403);
    mia.log_in("mia@example.com", PASSWORD);
    let from_mia = mia.submit("/account", &format!("/admin/users/{user}/grant"), &[("credits", "5"), ("reason", "x")]);
    assert_eq!(from_mia.status, 404, "only an admin");
    assert_eq!(s.accounts.person(user).unwrap().unwrap().credits, 40, "nothing changed");

    let page = b.get("/admin");
    let log = &page.body[page.body.find("id=\"audit\"").unwrap()..];
    assert_eq!(log.matches("<tr>").count(), 1 + 5, "the header and five actions");
    assert!(log.contains("40 credits: a &#60;i&#62;gift&#60;/i&#62;") && !page.body.contains("<b>Mia"), "escaped");
    assert_eq!(s.accounts.audit_log(10).unwrap()[0].admin, "root@example.com");
    let _ = admin;
}

/// A tiny SMTP server on loopback: it takes every mail and hands over each one's text.
fn smtp_server() -> (String, mpsc::Receiver<String>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (sent, received) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let sent = sent.clone();
            std::thread::spawn(move || smtp_session(stream, &sent));
        }
    });
    (addr, received)
}

fn smtp_session(stream: TcpStream, sent: &mpsc::Sender<String>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    out.write_all(b"220 localhost ESMTP\r\n")?;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let command = line.trim_end().to_ascii_uppercase();
        let verb = command.split([' ', ':']).next().unwrap_or("");
        match verb {
            "EHLO" => out.write_all(b"250-localhost\r\n250 8BITMIME\r\n")?,
            "HELO" | "MAIL" | "RCPT" | "RSET" | "NOOP" => out.write_all(b"250 OK\r\n")?,
            "DATA" => {
                out.write_all(b"354 go on\r\n")?;
                let mut data = String::new();
                loop {
                    line.clear();
                    if reader.read_line(&mut line)? == 0 || line == ".\r\n" {
                        break;
                    }
                    data.push_str(&line);
                }
                let _ = sent.send(data);
                out.write_all(b"250 queued\r\n")?;
            }
            "QUIT" => return out.write_all(b"221 bye\r\n"),
            _ => out.write_all(b"500 unknown\r\n")?,
        }
    }
}

/// The link to `path` on the site at `addr` in a mail (quoted-printable decoded), relative to
/// the site.
fn link_in(mail: &str, addr: &str, path: &str) -> String {
    let mut text = String::new();
    let body = mail.split_once("\r\n\r\n").expect("a head and a body").1;
    let mut rest = body.replace("=\r\n", "");
    while let Some(at) = rest.find('=') {
        text.push_str(&rest[..at]);
        let code = u8::from_str_radix(rest.get(at + 1..at + 3).unwrap_or("xx"), 16).expect("quoted-printable");
        text.push(char::from(code));
        rest = rest[at + 3..].to_owned();
    }
    text.push_str(&rest);
    let at = text.find(path).unwrap_or_else(|| panic!("no {path} in {text}"));
    assert!(text[..at].ends_with(&format!("http://{addr}")), "links start with the site's address: {text}");
    text[at..].split_whitespace().next().unwrap().to_owned()
}

#[test]
fn mail_verifies_a_sign_up_and_sends_reset_links() {
    let (smtp, mails) = smtp_server();
    let s = site_mailing(Signup::Open, true, Some(&smtp));
    let mut b = s.browser();
    let r = b.submit(
        "/signup?locale=en",
        "/signup",
        &[("email", "Nia@Example.com"), ("display_name", "Nia"), ("password", PASSWORD)],
    );
    assert_eq!(r.status, 200);
    assert!(r.body.contains("confirmation link was sent"), "{}", r.body);
    assert_eq!(b.log_in("nia@example.com", PASSWORD).status, 401, "not usable before it is verified");
    let mail = mails.recv_timeout(Duration::from_secs(10)).expect("the verification mail");
    assert!(mail.contains("To: nia@example.com") && mail.contains("Subject: Confirm your email"), "{mail}");
    let verify = link_in(&mail, &s.addr, "/verify?token=");
    assert_eq!(b.get(&verify).status, 200);
    assert_eq!(b.get(&verify).status, 404, "single use");
    assert_eq!(b.log_in("nia@example.com", PASSWORD).status, 303);

    let mut other = s.browser();
    let unknown = other.submit("/password/forgot?locale=en", "/password/forgot", &[("email", "nobody@example.com")]);
    assert!(mails.recv_timeout(Duration::from_secs(1)).is_err(), "no mail for an unknown email");
    let known = other.submit("/password/forgot?locale=en", "/password/forgot", &[("email", "NIA@example.com")]);
    assert_eq!((unknown.status, unknown.body.len()), (known.status, known.body.len()), "the same answer");
    let mail = mails.recv_timeout(Duration::from_secs(10)).expect("the reset mail");
    let reset = link_in(&mail, &s.addr, "/password/reset?token=");
    let token = reset.split("token=").nth(1).unwrap().to_owned();
    let r = other.submit(&reset, "/password/reset", &[("token", &token), ("password", "a fresh long secret")]);
    assert_eq!(r.status, 200);
    assert_eq!(b.get("/account").header("location"), Some("/login"), "the reset ended the old session");
    assert_eq!(other.log_in("nia@example.com", "a fresh long secret").status, 303);
}

/// A tiny deterministic generator for the fuzz test.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn text(&mut self) -> String {
        let len = match self.next() % 4 {
            0 => 0,
            1 => (self.next() % 20) as usize,
            2 => (self.next() % 2000) as usize,
            _ => 20_000,
        };
        (0..len).map(|_| char::from_u32((self.next() % 0x2FF) as u32 + 1).unwrap_or('x')).collect()
    }
}

#[test]
fn random_forms_never_answer_5xx_nor_change_anything_without_session_and_token() {
    let s = site_with(Signup::Open, true);
    let id = s.person("lia@example.com", "Lia");
    let mut b = s.browser();
    b.log_in("lia@example.com", PASSWORD);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let actions = [
        "/admin/users/1/grant",
        "/admin/tokens/revoke",
        "/signup",
        "/login",
        "/logout",
        "/password/forgot",
        "/password/reset",
        "/account/tokens",
        "/account/tokens/cnpj_abcdefg/revoke",
        "/account/password",
        "/account/delete",
        "/account/watchlists",
        "/account/watchlists/1/entries",
        "/account/watchlists/1/webhook",
        "/account/watchlists/1/deliveries/wl1-2026-10-1/retry",
    ];
    let names = [
        "email",
        "password",
        "name",
        "expires_days",
        "token",
        "invite",
        "current",
        "display_name",
        "csrf_token",
        "cnpjs",
        "add",
        "webhook_url",
    ];
    for round in 0..300 {
        let action = actions[(rng.next() % actions.len() as u64) as usize];
        let fields: Vec<(String, String)> = (0..rng.next() % 5)
            .map(|_| (names[(rng.next() % names.len() as u64) as usize].to_owned(), rng.text()))
            .collect();
        let borrowed: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let method = ["POST", "GET", "PUT", "DELETE"][(rng.next() % 4) as usize];
        let r = if method == "POST" {
            b.post(action, &borrowed)
        } else {
            send(&s.addr, method, action, &b.headers(), Some(&form(&borrowed)))
        };
        assert!(
            r.status < 500,
            "round {round}: {method} {action} {:?}: {}",
            borrowed.iter().map(|(k, v)| (k, v.len())).collect::<Vec<_>>(),
            r.status
        );
    }
    let lia = s.accounts.person(id).unwrap().unwrap();
    assert!(lia.email.is_some() && s.accounts.tokens(id).unwrap().is_empty(), "nothing changed");
    assert!(s.accounts.watchlists(id).unwrap().is_empty(), "no list made");
    assert_eq!(s.accounts.person_by_email("lia@example.com").unwrap().map(|p| p.id), Some(id));
    assert!(s.accounts.verify_login("lia@example.com", PASSWORD).unwrap().is_some(), "the password is the same");
}

/// The text of the element with `id` (up to the next tag).
fn text_of(r: &Reply, id: &str) -> Option<String> {
    let at = r.body.find(&format!("id=\"{id}\""))?;
    let from = at + r.body[at..].find('>')? + 1;
    Some(r.body[from..].split('<').next().unwrap().to_owned())
}

/// The items of the list of invalid CNPJs of a refused form.
fn invalid_named(r: &Reply) -> Vec<String> {
    let Some(at) = r.body.find("<ul class=\"invalid\">") else { return Vec::new() };
    let list = &r.body[at..r.body[at..].find("</ul>").unwrap() + at];
    list.split("<li>").skip(1).map(|i| i.split('<').next().unwrap().to_owned()).collect()
}

/// CNPJs refused on the list's `page` and on `/account`: every invalid one named, nothing stored,
/// the text kept; at most 1,000 lines at once (`ana` has one list of 2 entries).
fn refused_on_the_pages(s: &Site, b: &mut Browser, ana: i64, page: &str) {
    let id = s.accounts.watchlists(ana).unwrap()[0].id;
    let pasted = "44555666\n11222333000182\nnope\n";
    let refused = b.submit(page, &format!("{page}/entries"), &[("add", pasted)]);
    assert_eq!(refused.status, 400);
    assert!(refused.body.contains("These CNPJs are not valid; nothing was saved:"), "{}", refused.body);
    assert_eq!(
        invalid_named(&refused),
        ["11222333000182: wrong check digits (expected 81)", "nope: has 4 characters; a CNPJ has 14 (or 8, its base)"]
    );
    assert!(refused.body.contains(">44555666\n11222333000182\nnope\n</textarea>"), "the text kept to fix it");
    assert_eq!(s.accounts.watchlist(ana, id, 0, None).unwrap().unwrap().1, ["11222333000181", "33683111"]);
    let refused = b.submit("/account", "/account/watchlists", &[("name", "other"), ("cnpjs", "1\n33683111")]);
    assert_eq!((refused.status, invalid_named(&refused).len()), (400, 1));
    assert_eq!(s.accounts.watchlists(ana).unwrap().len(), 1, "no list made");

    // At most 1,000 lines at once.
    let lines = |n: usize| vec!["44555666"; n].join("\n");
    let over = b.submit(page, &format!("{page}/entries"), &[("add", &lines(1001))]);
    assert_eq!(over.status, 400);
    assert!(over.body.contains("At most 1,000 CNPJs at once. Nothing was saved."));
    assert_eq!(s.accounts.watchlists(ana).unwrap()[0].entries, 2);
    let added = b.submit(page, &format!("{page}/entries"), &[("add", &lines(1000)), ("remove", "33.683.111")]);
    assert_eq!((added.status, text_of(&added, "entries-count").as_deref()), (200, Some("2")));
}

/// The webhook's secret is shown once, then never; a new one likewise.
fn secret_shown_once(b: &mut Browser, page: &str) {
    let refused = b.submit(page, &format!("{page}/webhook"), &[("webhook_url", "http://hooks.example.com/")]);
    assert!(refused.status == 400 && refused.body.contains("Webhook URL refused: it must start with https://."));
    let hooked = b.submit(page, &format!("{page}/webhook"), &[("webhook_url", "https://hooks.example.com/cnpj")]);
    let secret = text_of(&hooked, "new-secret").expect("the secret, shown now");
    assert!(secret.starts_with("whsec_"), "{secret}");
    let again = b.get(page);
    assert!(!again.body.contains(&secret) && text_of(&again, "new-secret").is_none(), "never again");
    assert_eq!(text_of(&again, "webhook").as_deref(), Some("https://hooks.example.com/cnpj"));
    let rotated = text_of(&b.submit(page, &format!("{page}/secret"), &[]), "new-secret").expect("a new secret");
    assert_ne!(rotated, secret);
    assert!(!b.get(page).body.contains(&rotated));
    let unhooked = b.submit(page, &format!("{page}/webhook"), &[("webhook_url", "")]);
    assert_eq!(text_of(&unhooked, "webhook").as_deref(), Some("none"));
}

#[test]
fn watchlists_are_made_filled_and_refused_on_the_profile_pages() {
    let s = site();
    let ana = s.person("ana@example.com", "Ana");
    let mut b = s.browser();
    b.log_in("ana@example.com", PASSWORD);
    assert_eq!(text_of(&b.get("/account?locale=en"), "watched").as_deref(), Some("0 / 10000"), "the plan's cap");
    let made = b.submit(
        "/account",
        "/account/watchlists",
        &[
            ("name", " suppliers "),
            ("cnpjs", "11.222.333/0001-81\r\n\r\n33683111\r\n11222333000181"),
            ("webhook_url", ""),
        ],
    );
    assert_eq!(made.status, 200, "{}", made.body);
    assert!(made.body.contains("List created.") && text_of(&made, "new-secret").is_none(), "no webhook, no secret");
    assert_eq!(text_of(&made, "entries-count").as_deref(), Some("2"));
    let id = s.accounts.watchlists(ana).unwrap()[0].id;
    let page = format!("/account/watchlists/{id}");
    let account = b.get("/account");
    assert!(account.body.contains(&format!("<a href=\"{page}\">suppliers</a></td><td class=\"num\">2<")), "listed");

    refused_on_the_pages(&s, &mut b, ana, &page);

    // The cap is the user's plan's.
    s.accounts.admin_set_plan(ana, ana, "tiny").unwrap();
    let capped = b.submit(&page, &format!("{page}/entries"), &[("add", "33683111\n10000001")]);
    assert_eq!(capped.status, 400);
    let message = "Your plan allows up to 3 CNPJs watched over all your lists; this would make 4. Nothing was saved.";
    assert!(capped.body.contains(message), "{}", capped.body);
    assert_eq!(s.accounts.watchlists(ana).unwrap()[0].entries, 2);
    assert_eq!(b.submit(&page, &format!("{page}/entries"), &[("add", "33683111")]).status, 200, "up to the cap");

    secret_shown_once(&mut b, &page);

    // A name typed is shown as text; a list deleted.
    let evil = "<script>alert(1)</script>";
    s.accounts.admin_set_plan(ana, ana, "free").unwrap();
    let made = b.submit("/account", "/account/watchlists", &[("name", evil), ("cnpjs", "")]);
    assert_eq!(made.status, 200);
    let shown = "&#60;script&#62;alert(1)&#60;/script&#62;";
    for r in [&made, &b.get("/account")] {
        assert!(!r.body.contains("<script") && r.body.contains(shown), "escaped");
    }
    assert_eq!(s.accounts.watchlists(ana).unwrap()[1].name, evil, "stored as typed");
    let deleted = b.submit(&page, &format!("{page}/delete"), &[]);
    assert_eq!((deleted.status, deleted.header("location")), (303, Some("/account")));
    assert_eq!(b.get(&page).status, 404);
}

#[test]
fn another_users_list_is_not_found_and_a_form_without_its_token_changes_nothing() {
    let s = site();
    let ana = s.person("ana@example.com", "Ana");
    s.person("bia@example.com", "Bia");
    let cnpjs = ["33683111".to_owned()];
    let hooked = NewWatchlist { name: "l", cnpjs: &cnpjs, events: &[], webhook_url: Some("https://h.example/x") };
    let id = s.accounts.create_watchlist(ana, &hooked).unwrap().watchlist.id;
    let page = format!("/account/watchlists/{id}");
    let posts =
        ["entries", "webhook", "secret", "delete", "deliveries/wl1-2026-10-1/retry"].map(|p| format!("{page}/{p}"));
    let mut bia = s.browser();
    bia.log_in("bia@example.com", PASSWORD);
    assert_eq!(bia.get(&page).status, 404);
    assert_eq!(bia.get("/account/watchlists/x").status, 404);
    for action in &posts {
        let r = bia.submit("/account", action, &[("add", "11222333"), ("webhook_url", "")]);
        assert_eq!(r.status, 404, "{action}");
    }
    let mut b = s.browser();
    b.log_in("ana@example.com", PASSWORD);
    let csrf = b.get(&page).csrf();
    for action in posts.iter().chain([&"/account/watchlists".to_owned()]) {
        let fields = [("name", "x"), ("add", "11222333"), ("webhook_url", "")];
        assert_eq!(b.post(action, &fields).status, 403, "no token: {action}");
        b.origin = Some("https://evil.example".into());
        let r = b.post(action, &[("csrf_token", &csrf), fields[0], fields[1], fields[2]]);
        assert_eq!(r.status, 403, "another origin: {action}");
        b.origin = Some(format!("http://{}", s.addr));
    }
    let lists = s.accounts.watchlists(ana).unwrap();
    assert_eq!(lists.len(), 1, "nothing made, nothing deleted");
    assert_eq!((lists[0].entries, lists[0].webhook_url.as_deref()), (1, Some("https://h.example/x")));
    assert_eq!(lists[0].revision, 0, "nothing changed");
}

#[test]
fn a_failed_delivery_is_shown_and_retried_from_the_list_page() {
    let s = site();
    let ana = s.person("ana@example.com", "Ana");
    let cnpjs = ["33683111".to_owned()];
    let hooked = NewWatchlist { name: "l", cnpjs: &cnpjs, events: &[], webhook_url: Some("https://h.example/x") };
    let id = s.accounts.create_watchlist(ana, &hooked).unwrap().watchlist.id;
    s.accounts.enqueue(ana, id, "2026-10", &["{}".to_owned(), "{}".to_owned()]).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let due = s.accounts.claim_deliveries(now, 60, 10).unwrap();
    s.accounts.finish_delivery(&due[0].delivery.id, &Attempt::Failed { error: "HTTP 410 <gone>".into() }, now).unwrap();
    s.accounts.finish_delivery(&due[1].delivery.id, &Attempt::WaitingCredits { next_at: now + 60 }, now).unwrap();
    let page = format!("/account/watchlists/{id}");
    let mut b = s.browser();
    b.log_in("ana@example.com", PASSWORD);
    let shown = b.get(&format!("{page}?locale=en"));
    let table = &shown.body[shown.body.find("id=\"deliveries\"").expect("the deliveries")..];
    assert!(
        table.contains("<td>1/2</td><td>failed</td><td class=\"num\">1</td><td>HTTP 410 &#60;gone&#62;</td>"),
        "{table}"
    );
    assert!(table.contains("<td>2/2</td><td>waiting for credits</td>"), "{table}");
    let retry = format!("{page}/deliveries/{}/retry", due[0].delivery.id);
    assert_eq!(table.matches("/retry\"").count(), 1, "a retry button for the failed one");
    assert!(table.contains(&retry));
    let retried = b.submit(&page, &retry, &[]);
    assert_eq!((retried.status, retried.header("location")), (303, Some(page.as_str())));
    let (_, deliveries) = s.accounts.deliveries(ana, id, 0, 10).unwrap().unwrap();
    assert_eq!(deliveries[0].status, "pending", "due again, as the API's retry makes it");
    assert!(b.get(&page).body.contains("<td>1/2</td><td>pending</td>"));
    assert_eq!(b.submit(&page, &format!("{page}/deliveries/wl{id}-2026-10-9/retry"), &[]).status, 404);
}
