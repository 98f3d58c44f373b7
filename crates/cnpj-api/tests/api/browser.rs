//! Chromium for the tests that drive pages (`docs`, `walk`): chromedriver started per test on a
//! free loopback port, a headless session with a profile of its own, what the browser logged,
//! and waiting for an element.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::parse_reply;

/// chromedriver on a free loopback port, stopped when dropped.
pub(crate) struct Driver {
    child: Child,
    url: String,
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
        Driver { child, url: format!("http://127.0.0.1:{port}") }
    }

    /// A new headless Chromium session, with a profile of its own and no network but loopback's.
    pub(crate) async fn session(&self, profile: &std::path::Path) -> Client {
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
            "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args},
            "goog:loggingPrefs": {"browser": "ALL"},
        });
        let Value::Object(caps) = caps else { unreachable!("an object literal") };
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        ClientBuilder::new(connector).capabilities(caps).connect(&self.url).await.expect("a Chromium session")
    }

    /// What the browser logged since the last look (chromedriver's log endpoint): console
    /// messages, CSP refusals, failed loads.
    pub(crate) fn browser_log(&self, session: &str) -> Value {
        let addr = self.url.trim_start_matches("http://");
        let body = json!({"type": "browser"}).to_string();
        let head = format!("POST /session/{session}/se/log HTTP/1.1\r\nHost: {addr}\r\n");
        let raw = format!("{head}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len());
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        stream.write_all(raw.as_bytes()).unwrap();
        let reply = parse_reply(&read_answer(&mut stream));
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.body["value"].clone()
    }
}

/// An HTTP answer read to the end of its `Content-Length` (chromedriver keeps the connection open,
/// whatever the request or its own `Connection: close` say).
fn read_answer(stream: &mut TcpStream) -> Vec<u8> {
    let mut reader = BufReader::new(stream);
    let (mut raw, mut length) = (Vec::new(), 0);
    loop {
        let start = raw.len();
        assert!(reader.read_until(b'\n', &mut raw).unwrap() > 0, "a whole answer from chromedriver");
        let line = String::from_utf8_lossy(&raw[start..]).to_ascii_lowercase();
        if let Some(value) = line.strip_prefix("content-length:") {
            length = value.trim().parse().unwrap();
        }
        if line == "\r\n" {
            break;
        }
    }
    let start = raw.len();
    raw.resize(start + length, 0);
    reader.read_exact(&mut raw[start..]).unwrap();
    raw
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits up to 30 s for an element.
pub(crate) async fn element(client: &Client, css: &str) -> fantoccini::elements::Element {
    let wait = client.wait().at_most(Duration::from_secs(30));
    wait.for_element(Locator::Css(css)).await.unwrap_or_else(|e| panic!("{css}: {e}"))
}
