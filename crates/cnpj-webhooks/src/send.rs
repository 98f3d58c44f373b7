//! One delivery: a POST of the body to the webhook, with its id, timestamp and signature, to an
//! address the policy allowed (the name is resolved once, checked, and connected to as
//! checked), never following a redirect, reading at most 64 KiB of the answer's head and 64 KiB
//! of its body, in 10 s at most.

use std::io::Read;
use std::net::SocketAddr;
use std::time::Duration;

use ureq::Agent;
use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};
use ureq_3 as ureq;

use crate::guard::{Policy, Refused};
use crate::sign::signature;

/// The longest a delivery may take, connection to answer.
const TIMEOUT: Duration = Duration::from_secs(10);
/// The most of an answer's head, and of its body, read.
const MAX_ANSWER: usize = 64 * 1024;

/// An answer: 2xx delivers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub status: u16,
}

impl Outcome {
    pub fn delivered(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The URL leads where the policy does not allow.
    #[error("refused: {0}")]
    Refused(Refused),
    /// No answer (connection, TLS, timeout, a head over 64 KiB).
    #[error("{0}")]
    Transport(String),
}

/// The addresses the policy checked: the connection goes to these, never to a second lookup
/// (which a name's owner could answer otherwise).
#[derive(Debug)]
struct Checked(Vec<SocketAddr>);

impl Resolver for Checked {
    fn resolve(&self, _: &Uri, _: &Config, _: NextTimeout) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let mut addresses = self.empty();
        for address in &self.0 {
            if addresses.try_push(*address).is_err() {
                break;
            }
        }
        Ok(addresses)
    }
}

/// POSTs `body` (JSON) to `url`, signed with `secret` at `timestamp` (Unix seconds).
pub fn send(
    policy: Policy,
    url: &str,
    secret: &str,
    delivery_id: &str,
    timestamp: i64,
    body: &[u8],
) -> Result<Outcome, SendError> {
    let addresses = policy.check(url).map_err(SendError::Refused)?;
    let config = Agent::config_builder()
        .timeout_global(Some(TIMEOUT))
        .max_redirects(0)
        .http_status_as_error(false)
        .max_response_header_size(MAX_ANSWER)
        // Never a proxy from the environment (ureq's default reads ALL_PROXY and the like):
        // the connection goes to the addresses checked.
        .proxy(None)
        .user_agent(concat!("cnpj-registry-webhooks/", env!("CARGO_PKG_VERSION")))
        .build();
    let agent = Agent::with_parts(config, DefaultConnector::default(), Checked(addresses));
    let timestamp = timestamp.to_string();
    let response = agent
        .post(url)
        .header("Content-Type", "application/json")
        .header("X-Registry-Delivery", delivery_id)
        .header("X-Registry-Timestamp", &timestamp)
        .header("X-Registry-Signature", &signature(secret, &timestamp, body))
        .send(body)
        .map_err(|e| match e {
            ureq::Error::LargeResponseHeader(..) => SendError::Transport("the answer's head is over 64 KiB".into()),
            e => SendError::Transport(e.to_string()),
        })?;
    let status = response.status().as_u16();
    // Read (and drop) at most 64 KiB, within what is left of the timeout.
    let reader = response.into_body().into_reader().take(MAX_ANSWER as u64);
    let _ = std::io::copy(&mut { reader }, &mut std::io::sink());
    Ok(Outcome { status })
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Write};
    use std::net::{TcpListener, TcpStream};
    use std::thread::JoinHandle;
    use std::time::Instant;

    use super::*;

    const LAB: Policy = Policy { allow_http: true, allow_private: true };

    /// A receiver on loopback that reads one request (head and body), then answers it by
    /// `respond`; hands back the request and what `respond` returned.
    fn receiver_with<T: Send + 'static>(
        respond: impl FnOnce(&TcpStream) -> T + Send + 'static,
    ) -> (String, JoinHandle<(String, T)>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let handle = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            while reader.read_line(&mut head).unwrap() > 2 && !head.ends_with("\r\n\r\n") {}
            let length: usize = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
                .unwrap_or(0);
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let responded = respond(&stream);
            (head + &String::from_utf8(body).unwrap(), responded)
        });
        (url, handle)
    }

    /// A receiver that answers `answer`.
    fn receiver(answer: &'static [u8]) -> (String, JoinHandle<(String, ())>) {
        receiver_with(move |mut stream| {
            let _ = stream.write_all(answer);
        })
    }

    /// Answers 200 after `delay`.
    fn silent(mut stream: &TcpStream, delay: Duration) {
        std::thread::sleep(delay);
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    }

    /// Writes `head`, then `byte` every 100 ms until the client goes away (30 s at most).
    fn trickle(mut stream: &TcpStream, head: &[u8], byte: u8) {
        let _ = stream.write_all(head);
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until && stream.write_all(&[byte]).is_ok() {
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn header<'a>(request: &'a str, name: &str) -> Option<&'a str> {
        request.lines().find_map(|l| l.split_once(": ").filter(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v))
    }

    #[test]
    fn a_delivery_is_signed_and_a_2xx_delivers_it() {
        let (url, handle) = receiver(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n");
        let outcome = send(LAB, &url, "whsec_k", "wl1-2026-10-1", 1_700_000_000, br#"{"a":1}"#).unwrap();
        assert!(outcome.delivered());
        let (request, ()) = handle.join().unwrap();
        assert!(request.starts_with("POST /hook HTTP/1.1"), "{request}");
        assert_eq!(header(&request, "X-Registry-Delivery"), Some("wl1-2026-10-1"));
        assert_eq!(header(&request, "X-Registry-Timestamp"), Some("1700000000"));
        let signed = signature("whsec_k", "1700000000", br#"{"a":1}"#);
        assert_eq!(header(&request, "X-Registry-Signature"), Some(signed.as_str()));
        assert!(request.ends_with(r#"{"a":1}"#));
    }

    #[test]
    fn redirects_are_not_followed() {
        let (url, handle) =
            receiver(b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/\r\nContent-Length: 0\r\n\r\n");
        let outcome = send(LAB, &url, "k", "d", 1, b"{}").unwrap();
        assert_eq!((outcome.status, outcome.delivered()), (302, false), "a redirect is an answer, not followed");
        handle.join().unwrap();
    }

    /// An answer without end: the sender reads 64 KiB of it and hangs up, at once rather than at
    /// the timeout; the receiver's writes fail once the buffers between them are full, long
    /// before the 256 MiB it would send a reader of everything.
    #[test]
    fn an_endless_answer_is_read_to_64_kib_only() {
        let (url, handle) = receiver_with(|mut stream| {
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n");
            let chunk = [b'x'; 16 * 1024];
            let mut written = 0_usize;
            while written < 256 << 20 && stream.write_all(&chunk).is_ok() {
                written += chunk.len();
            }
            written
        });
        let started = Instant::now();
        assert!(send(LAB, &url, "k", "d", 1, b"{}").unwrap().delivered());
        assert!(started.elapsed() < TIMEOUT / 2, "{:?}", started.elapsed());
        let (_, written) = handle.join().unwrap();
        assert!(written < 64 << 20, "the receiver wrote {written} bytes");
    }

    /// A head of 90 fields of 90 KiB (8 MiB, within what ureq 2 read whole): refused past 64 KiB,
    /// at once, as no answer.
    #[test]
    fn an_answer_s_head_is_read_to_64_kib_only() {
        let (url, handle) = receiver_with(|mut stream| {
            let field = format!("X-Pad: {}\r\n", "a".repeat(90 * 1024));
            let mut written = stream.write_all(b"HTTP/1.1 200 OK\r\n").map(|()| 17).unwrap_or(0);
            for _ in 0..90 {
                if stream.write_all(field.as_bytes()).is_err() {
                    break;
                }
                written += field.len();
            }
            let _ = stream.write_all(b"Content-Length: 0\r\n\r\n");
            written
        });
        let started = Instant::now();
        let refused = send(LAB, &url, "k", "d", 1, b"{}");
        assert!(matches!(&refused, Err(SendError::Transport(e)) if e.contains("64 KiB")), "{refused:?}");
        assert!(started.elapsed() < TIMEOUT / 2, "{:?}", started.elapsed());
        handle.join().unwrap();
    }

    /// How a receiver answers.
    type Respond = Box<dyn FnOnce(&TcpStream) + Send>;

    /// A silent receiver, and receivers that trickle their answer's head or body a byte at a
    /// time: each holds the sender for the timeout, not longer (no answer, or the 2xx it sent).
    #[test]
    fn a_slow_answer_holds_the_sender_for_the_timeout_at_most() {
        let cases: [(&str, Respond, Option<u16>); 3] = [
            ("silent", Box::new(|s| silent(s, Duration::from_secs(15))), None),
            ("head trickled", Box::new(|s| trickle(s, b"HTTP/1.1 200 OK\r\nX-Slow: ", b'a')), None),
            (
                "body trickled",
                Box::new(|s| trickle(s, b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n", b'a')),
                Some(200),
            ),
        ];
        let sent: Vec<_> = cases
            .into_iter()
            .map(|(case, respond, expected)| {
                let (url, receiving) = receiver_with(respond);
                let sending = std::thread::spawn(move || {
                    let started = Instant::now();
                    let status = send(LAB, &url, "k", "d", 1, b"{}").map(|o| o.status).ok();
                    (status, started.elapsed())
                });
                (case, expected, sending, receiving)
            })
            .collect();
        for (case, expected, sending, receiving) in sent {
            let (status, took) = sending.join().unwrap();
            assert_eq!(status, expected, "{case}");
            assert!(
                took >= TIMEOUT - Duration::from_secs(1) && took < TIMEOUT + Duration::from_secs(2),
                "{case}: {took:?}"
            );
            drop(receiving);
        }
    }

    #[test]
    fn a_refused_address_is_never_connected_to() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("https://{}/hook", listener.local_addr().unwrap());
        let strict = Policy::default();
        assert!(matches!(send(strict, &url, "k", "d", 1, b"{}"), Err(SendError::Refused(Refused::NotPublic { .. }))));
        let http = format!("http://{}/hook", listener.local_addr().unwrap());
        let private_only = Policy { allow_private: true, ..strict };
        assert!(matches!(send(private_only, &http, "k", "d", 1, b"{}"), Err(SendError::Refused(Refused::Scheme))));
        let localhost = url.replace("127.0.0.1", "localhost");
        assert!(
            matches!(send(strict, &localhost, "k", "d", 1, b"{}"), Err(SendError::Refused(_))),
            "a name resolving to loopback"
        );
        listener.set_nonblocking(true).unwrap();
        assert!(listener.accept().is_err(), "no connection was made");
    }
}
