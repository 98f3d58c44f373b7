//! The pages for people walked through as a person uses them, in headless Chromium (module
//! `browser`) against the real binary: Ana signs up by the operator's invitation, makes a token,
//! calls the API with it, sees the request and its credit in her usage, revokes the token (then
//! 401), and resets her password by the mailed link; the admin (made by the operator's commands)
//! grants her credits, which her page then shows; Bea signs up herself and verifies her email by
//! the mailed link; a used link gives the error page. Mail goes to an SMTP server on loopback.
//!
//! Every page is checked by axe-core (`scripts/setup-test-deps` installs it), injected through
//! WebDriver, which the pages' Content-Security-Policy does not govern (the test shows that the
//! policy refuses the page's own inline script): no serious or critical violation. The profile
//! and admin pages are also checked, and screenshot whole, at 360 and 1,440 px wide, into
//! `$CARGO_TARGET_TMPDIR/pages/` (the paths are printed) for a reviewer to look at.
//!
//! Usage counts are written every 5 s and at shutdown: instead of waiting, the walk stops the
//! server with SIGTERM and starts it again on the same address, as an operator turning on mail
//! and open sign-up would; Ana's session outlives the restart (sessions live in the store).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use fantoccini::Client;
use serde_json::{Value, json};

use crate::browser::{self, Driver, element};
use crate::changes::{build_month, serve};
use crate::watchlists::Receiver;
use crate::{Server, api, exited, get, root};

const CNPJ: &str = "11222333000181";
const PASSWORD: &str = "ana's long secret";
const NEW_PASSWORD: &str = "ana's newer secret";
const ADMIN_PASSWORD: &str = "the operator's secret";

#[test]
fn a_person_walks_through_the_pages() {
    let mut first = Server::start(&["--insecure-cookies"]);
    let base = format!("http://{}", first.addr);
    api(&first.accounts, &["accounts", "create-user", "root"]);
    set_login(&first, "root", "admin@example.com", ADMIN_PASSWORD);
    api(&first.accounts, &["accounts", "role", "root", "admin"]);
    let invite =
        api(&first.accounts, &["--public-url", &base, "accounts", "invite", "ana@example.com", "--credits", "5"]);

    let (profile, driver) = (tempfile::tempdir().unwrap(), Driver::start());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let walk = runtime.block_on(Walk::start(&driver, profile.path(), &base));
    let token = runtime.block_on(sign_up_by_invitation(&walk, &invite));
    assert_eq!(get(&first, &format!("/api/v1/companies/{CNPJ}"), &token).status, 200);

    // SIGTERM writes the usage counts; the server comes back on its address, with mail.
    first.signal("-TERM");
    assert!(exited(&mut first), "exit 0");
    let mail = Mailbox::start();
    let smtp = format!("smtp://{}", mail.addr);
    let dataset = vec!["--db".into(), first.db.clone().into()];
    let options = ["--listen", &first.addr, "--public-url", &base, "--insecure-cookies", "--signup", "open"];
    let mail_options = ["--smtp-url", &smtp, "--mail-from", "Registry <no-reply@example.com>"];
    let extra: Vec<&str> = options.iter().chain(&mail_options).copied().collect();
    let second = Server::spawn(tempfile::tempdir().unwrap(), first.db.clone(), dataset, first.accounts.clone(), &extra);

    runtime.block_on(async {
        usage_then_revocation(&walk, &second, &token).await;
        reset_by_mail(&walk, &mail).await;
        admin_grants_credits(&walk).await;
        sign_up_verified_by_mail(&walk, &mail).await;
        walk.logged_nothing_but(&[&format!("{base}/verify?token=")]).await;
        walk.client.clone().close().await.unwrap();
    });
}

/// A person follows companies on the profile page: a list made with CNPJs pasted (in any of
/// their forms) and a webhook to a receiver on loopback, its secret read once; once a month is
/// served the delivery arrives signed with that secret and shows on the list's page as delivered;
/// the retry button sends it again with the same id. Every page checked by axe, and screenshot.
#[test]
fn a_person_follows_companies_and_gets_their_signed_webhook() {
    let dir = tempfile::tempdir().unwrap();
    let (september, october) = (dir.path().join("2026-09.duckdb"), dir.path().join("2026-10.duckdb"));
    build_month(&root().join("data/sample-dump"), &september, None);
    build_month(&root().join("data/sample-dump-next"), &october, Some(&september));
    let flags = ["--allow-private-webhooks", "--allow-http-webhooks", "--webhook-interval", "1", "--insecure-cookies"];
    let s = serve(dir, october, &flags);
    s.user("lia", 10);
    set_login(&s, "lia", "lia@example.com", PASSWORD);
    let receiver = Receiver::answering(204, Duration::ZERO, 0);
    let (profile, driver) = (tempfile::tempdir().unwrap(), Driver::start());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let secret = runtime.block_on(async {
        let walk = Walk::start(&driver, profile.path(), &format!("http://{}", s.addr)).await;
        walk.log_in("lia@example.com", PASSWORD).await;
        walk.fill("#list-name", "suppliers").await;
        walk.fill("#list-cnpjs", "44.555.666/0002-62\n22333444\n12345678000276\n66777888").await;
        walk.fill("#list-webhook", &receiver.url).await;
        walk.click("#watchlists form button[type=submit]").await;
        let secret = walk.text("#new-secret").await;
        assert_eq!(walk.text("#entries-count").await, "4");
        walk.axe("a new watchlist, its secret shown once").await;
        // The list's own address (the page answers the form's POST).
        let script = "return document.querySelector(\"form[action$='/entries']\").getAttribute('action')";
        let entries = walk.client.execute(script, vec![]).await.unwrap();
        let list = entries.as_str().unwrap().trim_end_matches("/entries").to_owned();
        walk.open(&list).await;
        assert!(walk.client.find(fantoccini::Locator::Css("#new-secret")).await.is_err(), "the secret only once");

        s.signal("-HUP");
        let rows = delivered(&walk, &list, "1").await;
        assert_eq!(rows.len(), 1, "one page: {rows:?}");
        walk.screenshots("watchlist").await;
        walk.click("#deliveries button[type=submit]").await;
        delivered(&walk, &list, "2").await;
        walk.axe("a delivery retried").await;
        walk.logged_nothing_but(&[]).await;
        secret
    });
    let got = receiver.got.lock().unwrap();
    assert_eq!(got.len(), 2, "delivered, then retried");
    assert!(got.iter().all(|r| r.signed_by(&secret)), "signed with the secret shown");
    assert_eq!(got[0].headers["x-registry-delivery"], got[1].headers["x-registry-delivery"], "the same id");
    assert_eq!(got[0].body, got[1].body, "the same page");
}

/// The list page's deliveries once its first has been attempted `attempts` times (20 s at most).
async fn delivered(walk: &Walk<'_>, list: &str, attempts: &str) -> Vec<Vec<String>> {
    for _ in 0..100 {
        walk.open(list).await;
        if walk.client.find(fantoccini::Locator::Css("#deliveries")).await.is_ok() {
            let rows = walk.rows("#deliveries").await;
            if rows.first().is_some_and(|r| r[3] == attempts) {
                return rows;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("no delivery attempted {attempts} times on {list}");
}

/// Gives `user` an email and a password (`accounts set-login`, the password on stdin).
fn set_login(s: &Server, user: &str, email: &str, password: &str) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cnpj-api"))
        .args(s.accounts.args())
        .args(["accounts", "set-login", user, "--email", email])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(format!("{password}\n").as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// The invitation's page, the policy against inline script shown, the sign-up, then a token
/// made on the profile page; the token.
async fn sign_up_by_invitation(walk: &Walk<'_>, invite: &str) -> String {
    walk.client.goto(invite).await.unwrap();
    assert_eq!(walk.value("#email").await, "ana@example.com");
    walk.inline_script_is_refused().await;
    walk.axe("sign-up by invitation").await;
    walk.fill("#display_name", "Ana").await;
    walk.fill("#password", PASSWORD).await;
    walk.click("main form button[type=submit]").await;
    assert_eq!(walk.path().await, "/account");
    assert!(walk.text("h1").await.contains("Ana"));
    assert_eq!(walk.text("#credits").await, "5", "the invitation's credits");
    walk.axe("profile").await;

    walk.fill("#token-name", "laptop").await;
    walk.click("form[action='/account/tokens'] button").await;
    let token = walk.text("#new-token").await;
    assert!(token.starts_with("cnpj_"), "{token}");
    walk.axe("profile with a new token").await;
    token
}

/// After the restart: the request and its credit on the profile page; the token revoked there
/// is refused.
async fn usage_then_revocation(walk: &Walk<'_>, s: &Server, token: &str) {
    walk.open("/account").await;
    assert_eq!(walk.path().await, "/account", "the session outlived the restart");
    let usage = walk.rows("#usage").await;
    let today = &usage.first().expect("a usage row")[0];
    assert_eq!(usage, [[today.as_str(), "detail", "1", "1"]], "the request and its credit");
    assert_eq!(walk.rows("#ledger").await[0][1..], ["detail".to_owned(), "1".to_owned()], "the debit");
    assert_eq!(walk.text("#credits").await, "4");
    element(&walk.client, "figure.chart svg").await;
    walk.axe("profile with usage").await;

    walk.click("form[action$='/revoke'] button").await;
    assert_eq!(walk.path().await, "/account");
    assert!(walk.client.find_all(fantoccini::Locator::Css("form[action$='/revoke']")).await.unwrap().is_empty());
    let refused = get(s, &format!("/api/v1/companies/{CNPJ}"), token);
    assert_eq!(refused.status, 401, "the revoked token: {}", refused.body);
}

/// Log out, the forgotten password, the mailed link, the new password, log in with it.
async fn reset_by_mail(walk: &Walk<'_>, mail: &Mailbox) {
    walk.log_out().await;
    walk.axe("log in").await;
    walk.click("main a[href='/password/forgot']").await;
    walk.axe("forgotten password").await;
    walk.fill("#email", "ana@example.com").await;
    walk.click("main form button[type=submit]").await;
    element(&walk.client, ".notice").await;
    walk.axe("forgotten password, link sent").await;

    let link = mail.link("ana@example.com", &format!("{}/password/reset?token=", walk.base));
    walk.client.goto(&link).await.unwrap();
    walk.axe("password reset").await;
    walk.fill("#password", NEW_PASSWORD).await;
    walk.click("main form button[type=submit]").await;
    element(&walk.client, ".notice").await;
    walk.axe("log in after a reset").await;
    walk.log_in("ana@example.com", NEW_PASSWORD).await;
}

/// The admin finds Ana and grants her credits (in the audit log); Ana's page shows them. Both
/// pages screenshot.
async fn admin_grants_credits(walk: &Walk<'_>) {
    walk.log_out().await;
    walk.log_in("admin@example.com", ADMIN_PASSWORD).await;
    walk.click("nav a[href='/admin']").await;
    walk.axe("admin").await;
    walk.fill("#q", "ana").await;
    walk.click("form[role=search] button").await;
    let users = walk.rows("#users").await;
    assert_eq!(users[0][..5], ["ana@example.com", "free", "active", "0", "4"].map(str::to_owned), "{users:?}");
    walk.fill("input[id^=grant-]", "20").await;
    walk.fill("input[id^=reason-]", "welcome").await;
    walk.click("form[action$='/grant'] button").await;
    assert_eq!(walk.path().await, "/admin");
    let audit = walk.rows("#audit").await;
    assert_eq!(audit[0][1..], ["root", "grant", "ana@example.com", "20 credits: welcome"].map(str::to_owned));
    walk.screenshots("admin").await;

    walk.log_out().await;
    walk.log_in("ana@example.com", NEW_PASSWORD).await;
    assert_eq!(walk.text("#credits").await, "24", "the credits granted");
    walk.screenshots("account").await;
}

/// Open sign-up: Bea's account is usable once she follows the mailed link; the link, used again,
/// gives the error page.
async fn sign_up_verified_by_mail(walk: &Walk<'_>, mail: &Mailbox) {
    walk.log_out().await;
    walk.click("main a[href='/signup']").await;
    walk.axe("open sign-up").await;
    walk.fill("#email", "bea@example.com").await;
    walk.fill("#display_name", "Bea").await;
    walk.fill("#password", "bea's long secret").await;
    walk.click("main form button[type=submit]").await;
    walk.axe("sign-up, mail sent").await;

    let link = mail.link("bea@example.com", &format!("{}/verify?token=", walk.base));
    walk.client.goto(&link).await.unwrap();
    walk.axe("verified").await;
    walk.click("main a[href='/login']").await;
    walk.log_in("bea@example.com", "bea's long secret").await;
    assert!(walk.text("h1").await.contains("Bea"));

    walk.client.goto(&link).await.unwrap();
    assert_eq!(walk.status().await, 404);
    element(&walk.client, "main .error").await;
    walk.axe("error page").await;
}

/// A browser on the site at `base`.
struct Walk<'a> {
    driver: &'a Driver,
    client: Client,
    base: String,
    shots: PathBuf,
}

impl<'a> Walk<'a> {
    async fn start(driver: &'a Driver, profile: &Path, base: &str) -> Walk<'a> {
        let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pages");
        std::fs::create_dir_all(&shots).unwrap();
        let client = driver.session(profile).await;
        Walk { driver, client, base: base.to_owned(), shots }
    }

    /// Opens `path` of the site.
    async fn open(&self, path: &str) {
        self.client.goto(&format!("{}{path}", self.base)).await.unwrap();
    }

    /// Clicks `css` and waits for the page it leads to.
    async fn click(&self, css: &str) {
        let button = element(&self.client, css).await;
        self.client.execute("window.walkLeft = true", vec![]).await.unwrap();
        button.click().await.unwrap();
        self.until("return !window.walkLeft && document.readyState === 'complete'").await;
    }

    /// Waits (30 s at most) until `script` answers true.
    async fn until(&self, script: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.client.execute(script, vec![]).await.ok() != Some(Value::Bool(true)) {
            assert!(Instant::now() < deadline, "30 s without: {script}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn fill(&self, css: &str, text: &str) {
        let input = element(&self.client, css).await;
        input.clear().await.unwrap();
        input.send_keys(text).await.unwrap();
    }

    async fn text(&self, css: &str) -> String {
        element(&self.client, css).await.text().await.unwrap().trim().to_owned()
    }

    async fn value(&self, css: &str) -> String {
        element(&self.client, css).await.prop("value").await.unwrap().unwrap_or_default()
    }

    async fn path(&self) -> String {
        self.client.current_url().await.unwrap().path().to_owned()
    }

    /// The HTTP status the page was served with.
    async fn status(&self) -> u64 {
        let script = "return performance.getEntriesByType('navigation')[0].responseStatus";
        self.client.execute(script, vec![]).await.unwrap().as_u64().unwrap()
    }

    /// The text of the cells of each row of the table `css`'s body.
    async fn rows(&self, css: &str) -> Vec<Vec<String>> {
        element(&self.client, css).await;
        let script = "return [...document.querySelectorAll(arguments[0] + ' tbody tr')]
            .map(r => [...r.cells].map(c => c.textContent.trim()))";
        serde_json::from_value(self.client.execute(script, vec![json!(css)]).await.unwrap()).unwrap()
    }

    async fn log_in(&self, email: &str, password: &str) {
        if self.path().await != "/login" {
            self.open("/login").await;
        }
        self.fill("#email", email).await;
        self.fill("#password", password).await;
        self.click("main form button[type=submit]").await;
        assert_eq!(self.path().await, "/account", "{email} logged in");
    }

    async fn log_out(&self) {
        self.click("nav form[action='/logout'] button").await;
        assert_eq!(self.path().await, "/login");
    }

    /// The page's policy refuses an inline script the page adds, which the browser logs; a
    /// script sent by WebDriver runs (axe-core's too).
    async fn inline_script_is_refused(&self) {
        let script = "const s = document.createElement('script');
            s.textContent = 'document.body.dataset.inline = \"ran\"';
            document.head.append(s);
            return document.body.dataset.inline === undefined";
        assert_eq!(self.client.execute(script, vec![]).await.unwrap(), json!(true), "an inline script ran");
        let log = self.driver.browser_log(&self.session().await);
        let refused = log.as_array().unwrap().iter().any(|e| {
            let message = e["message"].as_str().unwrap_or("");
            message.contains("inline script") && message.contains("Content Security Policy")
        });
        assert!(refused, "the refusal logged: {log}");
    }

    /// axe-core run in the page: every serious or critical violation fails the test (all listed);
    /// the others are printed.
    async fn axe(&self, page: &str) {
        browser::axe(&self.client, page).await;
    }

    /// The whole page at 360 and 1,440 px wide: checked by axe, nothing wider than the window,
    /// screenshot into the output folder.
    async fn screenshots(&self, name: &str) {
        for width in [360, 1440] {
            // The window's inside as high as the page (the window's frame added), so that no
            // scroll bar takes from its width.
            self.client.set_window_size(width, 800).await.unwrap();
            self.until(&format!("return window.innerWidth === {width}")).await;
            let script = "return document.documentElement.scrollHeight + outerHeight - innerHeight";
            let high = self.client.execute(script, vec![]).await.unwrap();
            self.client.set_window_size(width, high.as_u64().unwrap() as u32).await.unwrap();
            let script = "const page = document.documentElement; return [page.scrollWidth, page.clientWidth]";
            let [wide, window]: [u32; 2] =
                serde_json::from_value(self.client.execute(script, vec![]).await.unwrap()).unwrap();
            assert_eq!((wide, window), (width, width), "{name} at {width} px: the page is wider than the window");
            let shot = self.shots.join(format!("{name}-{width}.png"));
            std::fs::write(&shot, self.client.screenshot().await.unwrap()).unwrap();
            println!("screenshot: {}", shot.display());
            self.axe(&format!("{name} at {width} px")).await;
        }
        self.client.set_window_size(1280, 2000).await.unwrap();
    }

    async fn session(&self) -> String {
        self.client.session_id().await.unwrap().unwrap()
    }

    /// Nothing logged by the browser since the last look but a warning or error about `expected`
    /// (addresses whose answers are errors on purpose).
    async fn logged_nothing_but(&self, expected: &[&str]) {
        let log = self.driver.browser_log(&self.session().await);
        let problems: Vec<&Value> = log
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["level"] != "INFO")
            .filter(|e| !expected.iter().any(|url| e["message"].as_str().unwrap_or("").contains(url)))
            .collect();
        assert!(problems.is_empty(), "the browser logged: {}", json!(problems));
    }
}

/// An SMTP server on loopback: it takes every mail and hands over each one's text.
struct Mailbox {
    addr: String,
    mails: mpsc::Receiver<String>,
}

impl Mailbox {
    fn start() -> Mailbox {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (sent, mails) = mpsc::channel();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let sent = sent.clone();
                std::thread::spawn(move || smtp_session(stream, &sent));
            }
        });
        Mailbox { addr, mails }
    }

    /// The link starting with `start` in the next mail (within 30 s), which goes to `to`.
    fn link(&self, to: &str, start: &str) -> String {
        let mail = self.mails.recv_timeout(Duration::from_secs(30)).expect("a mail within 30 s");
        assert!(mail.contains(&format!("To: {to}")), "{mail}");
        let body = quoted_printable(mail.split_once("\r\n\r\n").expect("a head and a body").1);
        let at = body.find(start).unwrap_or_else(|| panic!("{start} in {body}"));
        body[at..].split_whitespace().next().unwrap().to_owned()
    }
}

fn smtp_session(stream: TcpStream, sent: &mpsc::Sender<String>) -> std::io::Result<()> {
    let (mut reader, mut out) = (BufReader::new(stream.try_clone()?), stream);
    out.write_all(b"220 localhost ESMTP\r\n")?;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        match line.get(..4).unwrap_or("").to_ascii_uppercase().as_str() {
            "EHLO" => out.write_all(b"250-localhost\r\n250 8BITMIME\r\n")?,
            "DATA" => {
                out.write_all(b"354 go on\r\n")?;
                let mut data = String::new();
                while reader.read_line(&mut data)? > 0 && !data.ends_with("\r\n.\r\n") {}
                let _ = sent.send(data);
                out.write_all(b"250 queued\r\n")?;
            }
            "QUIT" => return out.write_all(b"221 bye\r\n"),
            _ => out.write_all(b"250 OK\r\n")?,
        }
    }
}

/// Quoted-printable decoded (soft line breaks joined, `=XX` turned into its byte).
fn quoted_printable(text: &str) -> String {
    let joined = text.replace("=\r\n", "");
    let mut bytes = Vec::new();
    let mut rest = joined.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        match (b, tail.get(..2).and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok())) {
            (b'=', Some(decoded)) => {
                bytes.push(decoded);
                rest = &tail[2..];
            }
            _ => {
                bytes.push(b);
                rest = tail;
            }
        }
    }
    String::from_utf8(bytes).unwrap()
}
