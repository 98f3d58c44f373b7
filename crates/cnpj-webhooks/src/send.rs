//! One delivery: a POST of the body to the webhook, with its id, timestamp and signature, to an
//! address the policy allowed (the name is resolved once, checked, and connected to as
//! checked), never following a redirect, reading at most 64 KiB of the answer's body (its head
//! as ureq bounds it: 100 fields of 100 KiB), in 10 s at most.

use std::io::Read;
use std::time::Duration;

use crate::guard::{Policy, Refused};
use crate::sign::signature;

/// The longest a delivery may take, connection to answer.
const TIMEOUT: Duration = Duration::from_secs(10);
/// The most of an answer read.
const MAX_ANSWER: u64 = 64 * 1024;

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
    /// No answer (connection, TLS, timeout).
    #[error("{0}")]
    Transport(String),
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
    // Checked before connecting (a refusal is named as such), and again by the resolver that
    // the connection uses: the addresses connected to are the ones checked.
    policy.check(url).map_err(SendError::Refused)?;
    let agent = ureq::AgentBuilder::new()
        .timeout(TIMEOUT)
        .redirects(0)
        .user_agent(concat!("cnpj-registry-webhooks/", env!("CARGO_PKG_VERSION")))
        .resolver(move |netloc: &str| {
            let (host, port) = netloc.rsplit_once(':').unwrap_or((netloc, ""));
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let port = port.parse().map_err(|_| std::io::Error::other(format!("no port in {netloc}")))?;
            policy.resolve(host, port).map_err(|e| std::io::Error::new(std::io::ErrorKind::PermissionDenied, e))
        })
        .build();
    let timestamp = timestamp.to_string();
    let request = agent
        .post(url)
        .set("Content-Type", "application/json")
        .set("X-Registry-Delivery", delivery_id)
        .set("X-Registry-Timestamp", &timestamp)
        .set("X-Registry-Signature", &signature(secret, &timestamp, body));
    let response = match request.send_bytes(body) {
        Ok(response) => response,
        Err(ureq::Error::Status(_, response)) => response,
        Err(ureq::Error::Transport(e)) => return Err(SendError::Transport(e.to_string())),
    };
    let status = response.status();
    // Read (and drop) at most 64 KiB, within what is left of the timeout.
    let _ = std::io::copy(&mut response.into_reader().take(MAX_ANSWER), &mut std::io::sink());
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
        assert!(matches!(send(strict, &url, "k", "d", 1, b"{}"), Err(SendError::Refused(Refused::Address { .. }))));
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
