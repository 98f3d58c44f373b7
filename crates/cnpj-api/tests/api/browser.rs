//! Chromium for the tests that drive pages (`docs`, `walk`, `pages_walk`): chromedriver started
//! per test on a free loopback port, a headless session with a profile of its own, what the
//! browser logged, waiting for an element, and axe-core run inside a page (injected through
//! WebDriver, which the pages' CSP does not govern).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::{Reply, parse_reply};

/// chromedriver on a free loopback port, stopped when dropped, with the sessions it opened (a
/// test that panicked leaves its own open, whose Chromium would outlive a killed chromedriver).
pub(crate) struct Driver {
    child: Child,
    url: String,
    sessions: Mutex<Vec<String>>,
}

impl Driver {
    pub(crate) fn start() -> Driver {
        let mut child = Command::new("chromedriver")
            .arg("--port=0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver runs (Debian: apt-get install chromium-driver; scripts/setup-test-deps installs it)");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let port = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| l.split("started successfully on port ").nth(1).map(|p| p.trim_end_matches('.').to_owned()))
            .expect("chromedriver prints its port");
        // Keep reading its output, so that it never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Driver { child, url: format!("http://127.0.0.1:{port}"), sessions: Mutex::default() }
    }

    /// A new headless Chromium session, with a profile of its own and no network but loopback's.
    pub(crate) async fn session(&self, profile: &std::path::Path) -> Client {
        self.session_with(profile, json!({})).await
    }

    /// `session` with Chromium's preferences `prefs` (e.g. where downloads go).
    pub(crate) async fn session_with(&self, profile: &std::path::Path, prefs: Value) -> Client {
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1280,2000",
        ];
        let mut args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        let caps = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args, "prefs": prefs},
            "goog:loggingPrefs": {"browser": "ALL"},
        });
        let Value::Object(caps) = caps else { unreachable!("an object literal") };
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client =
            ClientBuilder::new(connector).capabilities(caps).connect(&self.url).await.expect("a Chromium session");
        let id = client.session_id().await.unwrap().expect("a session id");
        self.sessions.lock().unwrap().push(id);
        client
    }

    /// What the browser logged since the last look (chromedriver's log endpoint): console
    /// messages, CSP refusals, failed loads.
    pub(crate) fn browser_log(&self, session: &str) -> Value {
        let path = format!("/session/{session}/se/log");
        let reply = self.call("POST", &path, &json!({"type": "browser"})).expect("chromedriver answers");
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.body["value"].clone()
    }

    /// A request to chromedriver, its answer read to the end of its `Content-Length` (chromedriver
    /// keeps the connection open, whatever the request or its own `Connection: close` say).
    fn call(&self, method: &str, path: &str, body: &Value) -> std::io::Result<Reply> {
        let (addr, body) = (self.url.trim_start_matches("http://"), body.to_string());
        let head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\n");
        let raw = format!("{head}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len());
        let stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        (&stream).write_all(raw.as_bytes())?;
        let mut reader = BufReader::new(stream);
        let (mut answer, mut length) = (Vec::new(), 0);
        loop {
            let start = answer.len();
            if reader.read_until(b'\n', &mut answer)? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            let line = String::from_utf8_lossy(&answer[start..]).to_ascii_lowercase();
            if let Some(value) = line.strip_prefix("content-length:") {
                length = value.trim().parse().map_err(std::io::Error::other)?;
            }
            if line == "\r\n" {
                break;
            }
        }
        let start = answer.len();
        answer.resize(start + length, 0);
        reader.read_exact(&mut answer[start..])?;
        Ok(parse_reply(&answer))
    }
}

impl Drop for Driver {
    /// Quits the sessions still open (their browsers), then stops chromedriver.
    fn drop(&mut self) {
        for session in self.sessions.get_mut().map(std::mem::take).unwrap_or_default() {
            let _ = self.call("DELETE", &format!("/session/{session}"), &json!({}));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits up to 30 s for an element.
pub(crate) async fn element(client: &Client, css: &str) -> fantoccini::elements::Element {
    let wait = client.wait().at_most(Duration::from_secs(30));
    wait.for_element(Locator::Css(css)).await.unwrap_or_else(|e| panic!("{css}: {e}"))
}

/// Runs axe-core on the page; answers its version, how many rules passed, and its violations,
/// each with the nodes it found.
const AXE_RUN: &str = "const done = arguments[arguments.length - 1];
    axe.run(document, {resultTypes: ['violations']}).then(
        r => done({version: axe.version, passed: r.passes.length, violations: r.violations.map(v => ({
            id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.map(n => n.target.join(' ') + ': ' + n.failureSummary)}))}),
        e => done({violations: [{id: 'axe failed', impact: 'critical', help: String(e), nodes: []}]}));";

/// axe-core's script, as `scripts/setup-test-deps` installs it.
fn axe_script() -> &'static str {
    static SCRIPT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SCRIPT.get_or_init(|| {
        let path =
            std::path::Path::new(&std::env::var("HOME").unwrap()).join(".cache/cnpj-registry/axe-core/axe.min.js");
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (scripts/setup-test-deps installs axe-core)", path.display()))
    })
}

/// Runs axe-core in the page open in `client` (`page` names it in the output): fails on any
/// serious or critical violation, prints the others.
pub(crate) async fn axe(client: &Client, page: &str) {
    if client.execute("return typeof axe", vec![]).await.unwrap() != json!("object") {
        client.execute(axe_script(), vec![]).await.unwrap();
    }
    let found = client.execute_async(AXE_RUN, vec![]).await.unwrap();
    let violations = found["violations"].as_array().unwrap();
    println!("axe {}, {page}: {} rules passed, {} violated", found["version"], found["passed"], violations.len());
    let (grave, other): (Vec<&Value>, Vec<&Value>) =
        violations.iter().partition(|v| v["impact"] == "serious" || v["impact"] == "critical");
    let line = |v: &&Value| format!("{} ({}): {}; {}", v["id"], v["impact"], v["help"], v["nodes"]);
    for v in &other {
        println!("axe, {page}: {}", line(v));
    }
    let listed: Vec<String> = grave.iter().map(line).collect();
    let url = client.current_url().await.map(|u| u.to_string()).unwrap_or_default();
    assert!(grave.is_empty(), "axe, {page} ({url}):\n{}", listed.join("\n"));
}
