//! The accept loop: HTTP/1.1 connections (hyper) up to a cap, each watched for slow clients: the
//! first request head must arrive within the header timeout of the connection, a later one within
//! the header timeout of its first byte, and a keep-alive connection waits at most the idle
//! timeout for it. A connection past its deadline is closed. (The body timeout is the router's:
//! `server::router`.) The answers hyper writes itself, to requests it cannot parse (400, 414, 431),
//! are rewritten into the JSON error envelope; an HTTP/2 connection preface, which hyper drops
//! without a word, is answered 505 in the envelope. A shutdown stops accepting and waits for the
//! requests in flight, at most `DRAIN`.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Instant;
use tower::Service;

/// How long slow clients may hold a connection, and how many connections may be open.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
}

/// How long a shutdown waits for the requests in flight.
pub const DRAIN: Duration = Duration::from_secs(30);

/// Serves `router` on `listener` until `shutdown` completes, then stops listening, lets the open
/// connections finish their requests (idle ones are closed at once) and returns once every one is
/// closed, or after `DRAIN` (the rest are dropped). At the cap, new connections wait in the
/// listen backlog until one closes.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let max = u32::try_from(limits.max_connections).map_err(|_| io::Error::other("too many connections"))?;
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let (stop, stopping) = watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => (stream, peer),
                Err(e) => {
                    // Out of file descriptors, or a connection reset before it was accepted.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let (stream, peer) = stream;
        let _ = stream.set_nodelay(true);
        tokio::spawn(connection(stream, peer, router.clone(), limits, stopping.clone(), permit));
    }
    drop(listener);
    stop.send_replace(true);
    // Every connection holds a permit until it is closed.
    if tokio::time::timeout(DRAIN, permits.acquire_many(max)).await.is_err() {
        let open = limits.max_connections - permits.available_permits();
        tracing::warn!(open, "connections still answering after {} s are dropped", DRAIN.as_secs());
    }
    Ok(())
}

/// What a connection is doing, shared by its socket, its service and its watchdog. Times are
/// milliseconds since `origin` (the accept).
struct Activity {
    origin: Instant,
    /// Requests begun, and requests answered (their response head ready).
    begun: AtomicU64,
    answered: AtomicU64,
    /// When the last response was ready.
    idle_since: AtomicU64,
    /// 1 + when the first byte of the next request head was read (0: none yet).
    head_started: AtomicU64,
    /// Wakes the watchdog when a request ends.
    changed: Notify,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            origin: Instant::now(),
            begun: AtomicU64::new(0),
            answered: AtomicU64::new(0),
            idle_since: AtomicU64::new(0),
            head_started: AtomicU64::new(0),
            changed: Notify::new(),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn in_flight(&self) -> bool {
        self.begun.load(Ordering::SeqCst) > self.answered.load(Ordering::SeqCst)
    }

    /// When the connection is to be closed, unless a request is being answered.
    fn deadline(&self, limits: &Limits) -> Option<Instant> {
        if self.in_flight() {
            return None;
        }
        let at = |ms: u64, after: Duration| self.origin + Duration::from_millis(ms) + after;
        Some(match (self.begun.load(Ordering::SeqCst), self.head_started.load(Ordering::SeqCst)) {
            (0, _) => at(0, limits.header_timeout),
            (_, 0) => at(self.idle_since.load(Ordering::SeqCst), limits.idle_timeout),
            (_, started) => at(started - 1, limits.header_timeout),
        })
    }

    /// A request head was parsed; its guard marks the response ready when dropped.
    fn begin(self: &Arc<Activity>) -> Answering {
        self.head_started.store(0, Ordering::SeqCst);
        self.begun.fetch_add(1, Ordering::SeqCst);
        Answering(Arc::clone(self))
    }
}

struct Answering(Arc<Activity>);

impl Drop for Answering {
    fn drop(&mut self) {
        let activity = &self.0;
        activity.idle_since.store(activity.now(), Ordering::SeqCst);
        activity.answered.fetch_add(1, Ordering::SeqCst);
        activity.changed.notify_one();
    }
}

/// Serves one connection; each request carries the peer's address (`ConnectInfo`: the pages'
/// login throttle counts failures by address).
async fn connection(
    stream: TcpStream,
    peer: std::net::SocketAddr,
    router: Router,
    limits: Limits,
    mut stopping: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched { inner: stream, activity: Arc::clone(&activity), rewrite: Rewrite::No });
    let on_request = Arc::clone(&activity);
    let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
        let answering = on_request.begin();
        request.extensions_mut().insert(axum::extract::ConnectInfo(peer));
        let call = router.clone().call(request.map(Body::new));
        async move {
            let response = call.await;
            drop(answering);
            response
        }
    });
    // The deadlines are the watchdog's, below; hyper's own header timer is left off.
    let mut conn = hyper::server::conn::http1::Builder::new().header_read_timeout(None).serve_connection(io, service);
    let mut shutting_down = false;
    let ended = loop {
        // While a request is answered, the watchdog sleeps until it ends (or an hour, to look again).
        let deadline = activity.deadline(&limits).unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            result = &mut conn => break result,
            _ = stopping.changed(), if !shutting_down => {
                shutting_down = true;
                Pin::new(&mut conn).graceful_shutdown();
            }
            () = activity.changed.notified() => {}
            () = tokio::time::sleep_until(deadline) => {
                if activity.deadline(&limits).is_some_and(|d| d <= Instant::now()) {
                    tracing::debug!("closing a connection: the client was too slow");
                    return;
                }
            }
        }
    };
    match ended {
        Err(e) if e.is_parse_version_h2() => {
            let mut stream = conn.into_parts().io.into_inner().inner;
            let answer = envelope(
                "505 HTTP Version Not Supported",
                &serde_json::json!({"success": false, "message": "HTTP version not supported."}),
            );
            let sent = tokio::time::timeout(limits.header_timeout, async {
                stream.write_all(&answer).await?;
                stream.shutdown().await
            });
            if !matches!(sent.await, Ok(Ok(()))) {
                tracing::debug!("an HTTP/2 preface could not be answered");
            }
        }
        Err(e) => tracing::debug!(error = %e, "connection closed with an error"),
        Ok(()) => {}
    }
}

/// The socket, noting when the first byte of a request head is read while no request is answered,
/// and rewriting hyper's own answers to unparsable requests.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
    rewrite: Rewrite,
}

/// The JSON answer sent in place of hyper's: not begun, being written (bytes, how many sent), sent
/// (whatever hyper writes after it is dropped: it closes the connection).
enum Rewrite {
    No,
    Sending(Vec<u8>, usize),
    Sent,
}

/// The JSON error envelope for the status of an answer hyper wrote itself, on a head that
/// was never dispatched to the router (no body, no content type): a malformed request (400), a
/// request target over 64 KiB (414), headers over hyper's limits (431).
fn envelope_for(activity: &Activity, buf: &[u8]) -> Option<Vec<u8>> {
    let dispatched = activity.begun.load(Ordering::SeqCst) > 0 && activity.head_started.load(Ordering::SeqCst) == 0;
    if activity.in_flight() || dispatched {
        return None;
    }
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&buf[..end]).ok()?.to_ascii_lowercase();
    let status = head.strip_prefix("http/1.1 ")?.get(..3)?;
    if head.contains("\r\ncontent-type:") || !head.contains("\r\ncontent-length: 0") {
        return None;
    }
    let (status, body) = match status {
        "400" => (
            "400 Bad Request",
            serde_json::json!({"success": false, "message": "Invalid input parameters",
                "errors": {"request": ["The request line or a header is malformed."]}}),
        ),
        "414" => ("414 URI Too Long", serde_json::json!({"success": false, "message": "URI too long."})),
        "431" => (
            "431 Request Header Fields Too Large",
            serde_json::json!({"success": false, "message": "Request header fields too large."}),
        ),
        _ => return None,
    };
    Some(envelope(status, &body))
}

/// A whole answer (head and JSON body) that closes the connection.
fn envelope(status: &str, body: &serde_json::Value) -> Vec<u8> {
    let body = body.to_string();
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    [head.into_bytes(), body.into_bytes()].concat()
}

impl AsyncRead for Watched {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let activity = &self.activity;
        if buf.filled().len() > before && !activity.in_flight() && activity.head_started.load(Ordering::SeqCst) == 0 {
            activity.head_started.store(activity.now() + 1, Ordering::SeqCst);
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if matches!(this.rewrite, Rewrite::No)
            && let Some(envelope) = envelope_for(&this.activity, buf)
        {
            this.rewrite = Rewrite::Sending(envelope, 0);
        }
        match &mut this.rewrite {
            Rewrite::No => Pin::new(&mut this.inner).poll_write(cx, buf),
            Rewrite::Sending(bytes, sent) => {
                while *sent < bytes.len() {
                    match Pin::new(&mut this.inner).poll_write(cx, &bytes[*sent..]) {
                        Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                        Poll::Ready(Ok(n)) => *sent += n,
                        other => return other,
                    }
                }
                this.rewrite = Rewrite::Sent;
                Poll::Ready(Ok(buf.len()))
            }
            Rewrite::Sent => Poll::Ready(Ok(buf.len())),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    // Not vectored: hyper then hands every write to `poll_write`, where its answers are seen whole.
}
