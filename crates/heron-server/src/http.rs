//! The smallest HTTP/1.0 server Prometheus needs: `GET /metrics`, one
//! request per connection, then close. Anyone who can reach the port can
//! talk to it, so everything is bounded: the request head
//! ([`MAX_REQUEST`]), the time to send it ([`REQUEST_TIMEOUT`]) and to
//! take the answer ([`WRITE_TIMEOUT`]), and the connections served at
//! once ([`MAX_CONNECTIONS`], of which [`MAX_PER_CLIENT`] from one
//! client; more from it are closed at accept, and a new client, when all
//! are taken, takes the place of the busiest client's oldest). An
//! optional allow-list closes the rest at accept. Bodies, keep-alive and
//! chunked encoding are not spoken.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::tcp::{AcceptFailures, next_connection};
use heron_proto::prefix::Prefix;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::AbortHandle;
use tokio::time::timeout;

/// Longest request head (request line and headers) read.
pub const MAX_REQUEST: usize = 8192;
/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 16;
/// Connections served at once from one client (an IPv4 address, an IPv6
/// /64), until each is answered: one slow or hostile host cannot hold
/// every slot, and several lose theirs to a new client ([`Slots`]).
pub const MAX_PER_CLIENT: usize = 4;
/// Longest time from connecting to the end of the request head.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest time to write the answer.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// After answering, what is still read (and dropped) of a client's
/// input before closing, at most.
const LINGER: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 64 * 1024;

/// What a request asks for, when it can be answered.
#[derive(Debug, PartialEq, Eq)]
pub struct Wanted {
    /// HEAD: the headers without the body.
    pub head_only: bool,
    pub format: Format,
}

/// The exposition format of a scrape, from its `Accept` header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0, for a client that names it (Prometheus does).
    OpenMetrics,
    /// Prometheus's text format 0.0.4, for every other client (curl,
    /// `promtool check metrics`, older scrapers).
    Text,
}

impl Format {
    /// OpenMetrics when an `Accept` header names
    /// `application/openmetrics-text` with a weight above 0 (`q`, in any
    /// case as all of HTTP's parameter names).
    fn from_accept(values: &[&str]) -> Format {
        let wants_open_metrics = values.iter().flat_map(|v| v.split(',')).any(|range| {
            let mut params = range.split(';').map(str::trim);
            let media = params.next().unwrap_or_default();
            let refused = params.any(|p| {
                p.split_once('=').is_some_and(|(name, q)| {
                    name.eq_ignore_ascii_case("q") && q.parse::<f32>().is_ok_and(|q| q <= 0.0)
                })
            });
            media.eq_ignore_ascii_case("application/openmetrics-text") && !refused
        });
        match wants_open_metrics {
            true => Format::OpenMetrics,
            false => Format::Text,
        }
    }
}

/// An answer other than the metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    BadRequest,
    NotFound,
    MethodNotAllowed,
    RequestTimeout,
    HeaderTooLarge,
    VersionNotSupported,
}

impl Status {
    fn line(self) -> &'static str {
        match self {
            Status::BadRequest => "400 Bad Request",
            Status::NotFound => "404 Not Found",
            Status::MethodNotAllowed => "405 Method Not Allowed",
            Status::RequestTimeout => "408 Request Timeout",
            Status::HeaderTooLarge => "431 Request Header Fields Too Large",
            Status::VersionNotSupported => "505 HTTP Version Not Supported",
        }
    }
}

/// Where the request head ends (past its blank line), if it has.
fn head_end(bytes: &[u8]) -> Option<usize> {
    let crlf = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| at + 4);
    let lf = bytes.windows(2).position(|w| w == b"\n\n").map(|at| at + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Reads a request head: what it asks for, or what to answer instead.
pub fn parse_request(head: &[u8]) -> Result<Wanted, Status> {
    let text = std::str::from_utf8(head).map_err(|_| Status::BadRequest)?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let request_line = lines.next().ok_or(Status::BadRequest)?;
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Status::BadRequest);
    };
    if !version.starts_with("HTTP/") {
        return Err(Status::BadRequest);
    }
    if !matches!(version, "HTTP/1.0" | "HTTP/1.1") {
        return Err(Status::VersionNotSupported);
    }
    let mut accept = Vec::new();
    for header in lines.take_while(|l| !l.is_empty()) {
        let (name, value) = header.split_once(':').unwrap_or(("", ""));
        let valid = !name.is_empty() && !name.contains([' ', '\t']);
        if !valid || header.chars().any(|c| c.is_control() && c != '\t') {
            return Err(Status::BadRequest);
        }
        if name.eq_ignore_ascii_case("accept") {
            accept.push(value);
        }
    }
    if !target.starts_with('/') || target.chars().any(|c| c.is_control()) {
        return Err(Status::BadRequest);
    }
    let path = target.split_once('?').map_or(target, |(p, _)| p);
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) => {
            return Err(Status::BadRequest);
        }
        _ => return Err(Status::MethodNotAllowed),
    };
    if path != "/metrics" {
        return Err(Status::NotFound);
    }
    Ok(Wanted {
        head_only,
        format: Format::from_accept(&accept),
    })
}

/// Reads the request head within the limits: Ok(None) if the client
/// closed before sending one (nothing to answer).
async fn read_head(stream: &mut TcpStream) -> Result<Option<Vec<u8>>, Status> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let read = async {
        loop {
            let n = stream.read(&mut chunk).await.map_err(|_| None)?;
            if n == 0 {
                return Err(None);
            }
            head.extend_from_slice(&chunk[..n]);
            if let Some(end) = head_end(&head) {
                head.truncate(end);
                return Ok(());
            }
            if head.len() > MAX_REQUEST {
                return Err(Some(Status::HeaderTooLarge));
            }
        }
    };
    match timeout(REQUEST_TIMEOUT, read).await {
        Ok(Ok(())) if head.len() <= MAX_REQUEST => Ok(Some(head)),
        Ok(Ok(())) => Err(Status::HeaderTooLarge),
        Ok(Err(None)) => Ok(None),
        Ok(Err(Some(status))) => Err(status),
        Err(_) => Err(Status::RequestTimeout),
    }
}

/// The status line and headers of an answer whose body has `len`
/// octets.
fn response_head(status: &str, content_type: &str, len: usize) -> Vec<u8> {
    format!(
        "HTTP/1.0 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
    )
    .into_bytes()
}

/// The metrics as one scrape made them, shared by every connection that
/// sends them.
struct Body {
    bytes: Vec<u8>,
    content_type: &'static str,
    made: Instant,
}

/// How old a body may be and still be sent to a scrape that arrives
/// while another connection sends it.
const REUSE: Duration = Duration::from_secs(1);

/// Makes the metrics one scrape at a time, and sends a body still being
/// sent (and at most [`REUSE`] old) to the scrapes that arrive meanwhile:
/// clients that read slowly hold one body between them, not one each
/// (with per-zone series a body grows with the zones), and scrapes that
/// come together cost one build.
#[derive(Default)]
struct Bodies {
    /// The last body of each [`Format`].
    last: tokio::sync::Mutex<[Weak<Body>; 2]>,
}

impl Bodies {
    async fn get<F, Fut>(&self, metrics: &F, format: Format) -> Arc<Body>
    where
        F: Fn(Format) -> Fut,
        Fut: Future<Output = (String, &'static str)>,
    {
        let mut bodies = self.last.lock().await;
        let last = &mut bodies[format as usize];
        if let Some(body) = reusable(last, Instant::now()) {
            return body;
        }
        let (text, content_type) = metrics(format).await;
        let body = Arc::new(Body {
            bytes: text.into_bytes(),
            content_type,
            made: Instant::now(),
        });
        *last = Arc::downgrade(&body);
        body
    }
}

/// The body `last` names, if a connection still sends it and it is
/// recent enough at `now`.
fn reusable(last: &Weak<Body>, now: Instant) -> Option<Arc<Body>> {
    let body = last.upgrade()?;
    (now.saturating_duration_since(body.made) < REUSE).then_some(body)
}

/// What a connection sends: a head, and the metrics unless HEAD.
struct Answer {
    head: Vec<u8>,
    body: Option<Arc<Body>>,
}

/// One connection: a request read, an answer written, closed. The
/// client's share is given back once the answer is written: what is
/// left is the short drain before closing (the slot is held through it).
async fn serve_one<F, Fut>(
    mut stream: TcpStream,
    metrics: Arc<F>,
    bodies: Arc<Bodies>,
    slot: Arc<Slot>,
) -> io::Result<()>
where
    F: Fn(Format) -> Fut,
    Fut: Future<Output = (String, &'static str)>,
{
    let answer = match read_head(&mut stream).await {
        Ok(None) => return Ok(()),
        Ok(Some(head)) => match parse_request(&head) {
            Ok(wanted) => {
                let body = bodies.get(&*metrics, wanted.format).await;
                Answer {
                    head: response_head("200 OK", body.content_type, body.bytes.len()),
                    body: (!wanted.head_only).then_some(body),
                }
            }
            Err(status) => error_response(status),
        },
        Err(status) => error_response(status),
    };
    timeout(WRITE_TIMEOUT, async {
        stream.write_all(&answer.head).await?;
        if let Some(body) = &answer.body {
            stream.write_all(&body.bytes).await?;
        }
        stream.shutdown().await
    })
    .await
    .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "write timed out"))??;
    drop(answer);
    slot.answered();
    // Closing with unread input would reset the connection, and the
    // client could lose the answer: take what it still sends, a little.
    let mut rest = [0u8; 4096];
    let drain = async {
        let mut left = LINGER_BYTES;
        while left > 0 {
            match stream.read(&mut rest).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = timeout(LINGER, drain).await;
    Ok(())
}

fn error_response(status: Status) -> Answer {
    let text = format!("{}\n", status.line());
    let mut head = response_head(status.line(), "text/plain; charset=utf-8", text.len());
    head.extend_from_slice(text.as_bytes());
    Answer { head, body: None }
}

/// The connections being served, at most [`MAX_CONNECTIONS`], and how
/// many each client holds until answered, at most [`MAX_PER_CLIENT`].
/// Full, a connection from a client under its share takes the place of
/// one already held ([`Table::victim`]): a few hosts that connect and
/// stay silent cannot keep a scraper out, whose own connection is one
/// among many and answered within a round trip or two.
#[derive(Clone, Default)]
struct Slots(Arc<Mutex<Table>>);

#[derive(Default)]
struct Table {
    next_id: u64,
    connections: HashMap<u64, Held>,
    per_client: HashMap<IpAddr, usize>,
}

/// One connection held.
struct Held {
    client: IpAddr,
    since: Instant,
    /// Its answer written: it no longer counts against its client.
    answered: bool,
    /// Ends its task; set once the task is spawned.
    stop: Option<AbortHandle>,
}

/// A connection's place, given back when dropped.
struct Slot {
    slots: Slots,
    id: u64,
}

/// Why a connection gets no slot.
#[derive(Debug, PartialEq, Eq)]
struct PastShare;

impl Table {
    /// The connection to close for a new one when all are taken: one
    /// answered and draining if any, else the oldest of the client that
    /// holds the most.
    fn victim(&self) -> Option<u64> {
        let busiest = |c: &Held| self.per_client.get(&c.client).copied().unwrap_or(0);
        (self.connections.iter())
            .max_by_key(|(_, c)| (c.answered, busiest(c), std::cmp::Reverse(c.since)))
            .map(|(&id, _)| id)
    }

    fn remove(&mut self, id: u64) -> Option<Held> {
        let held = self.connections.remove(&id)?;
        if !held.answered {
            self.release_client(held.client);
        }
        Some(held)
    }

    fn release_client(&mut self, client: IpAddr) {
        if let Some(count) = self.per_client.get_mut(&client) {
            *count -= 1;
            if *count == 0 {
                self.per_client.remove(&client);
            }
        }
    }
}

impl Slots {
    /// A slot for a connection from `peer`, unless its client holds
    /// [`MAX_PER_CLIENT`] already; when every slot is taken, the
    /// [`Table::victim`]'s is closed and given to it.
    fn take(&self, peer: IpAddr, now: Instant) -> Result<Slot, PastShare> {
        let client = client_of(peer);
        let mut held = self.0.lock().unwrap();
        if held.per_client.get(&client).copied().unwrap_or(0) >= MAX_PER_CLIENT {
            return Err(PastShare);
        }
        if held.connections.len() >= MAX_CONNECTIONS {
            let victim = held.victim().and_then(|id| held.remove(id));
            if let Some(stop) = victim.and_then(|v| v.stop) {
                stop.abort();
            }
        }
        let id = held.next_id;
        held.next_id += 1;
        *held.per_client.entry(client).or_insert(0) += 1;
        let conn = Held {
            client,
            since: now,
            answered: false,
            stop: None,
        };
        held.connections.insert(id, conn);
        Ok(Slot {
            slots: self.clone(),
            id,
        })
    }
}

impl Slot {
    /// Its task, to end if the slot is wanted for another.
    fn stopped_by(&self, stop: AbortHandle) {
        let mut held = self.slots.0.lock().unwrap();
        if let Some(conn) = held.connections.get_mut(&self.id) {
            conn.stop = Some(stop);
        }
    }

    /// The answer is written: the client may open another.
    fn answered(&self) {
        let mut held = self.slots.0.lock().unwrap();
        let Some(conn) = held.connections.get_mut(&self.id) else {
            return;
        };
        if !std::mem::replace(&mut conn.answered, true) {
            let client = conn.client;
            held.release_client(client);
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.0.lock().unwrap().remove(self.id);
    }
}

/// The client an address belongs to: itself (IPv4), its /64 (IPv6).
fn client_of(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(_) => peer,
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(prefix.into())
        }
    }
}

/// Who may connect to the endpoint: anyone (None), or addresses inside
/// one of the prefixes; others are closed at accept.
pub type Allowed = Option<Vec<Prefix>>;

fn allows(allowed: &Allowed, peer: IpAddr) -> bool {
    allowed
        .as_ref()
        .is_none_or(|prefixes| prefixes.iter().any(|p| p.contains(peer)))
}

/// Serves `listener` to the clients `allowed` until `shutdown` turns
/// true; `metrics` makes the body and its content type for each scrape,
/// in the format asked for.
pub async fn serve<F, Fut>(
    listener: TcpListener,
    allowed: Allowed,
    metrics: F,
    mut shutdown: watch::Receiver<bool>,
) where
    F: Fn(Format) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = (String, &'static str)> + Send,
{
    let metrics = Arc::new(metrics);
    let bodies = Arc::new(Bodies::default());
    let slots = Slots::default();
    let mut failures = AcceptFailures::default();
    while let Some((stream, peer)) = next_connection(&listener, &mut shutdown, &mut failures).await
    {
        if !allows(&allowed, peer.ip()) {
            tracing::debug!("metrics: connection from {peer} closed: not in [metrics] allow");
            continue;
        }
        let Ok(slot) = slots.take(peer.ip(), Instant::now()) else {
            tracing::debug!(
                "metrics: connection from {peer} closed: {MAX_PER_CLIENT} open from it"
            );
            continue;
        };
        let (metrics, bodies, slot) = (metrics.clone(), bodies.clone(), Arc::new(slot));
        let task = tokio::spawn({
            let slot = slot.clone();
            async move {
                if let Err(e) = serve_one(stream, metrics, bodies, slot).await {
                    tracing::debug!("metrics: connection from {peer}: {e}");
                }
            }
        });
        slot.stopped_by(task.abort_handle());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scrape_is_understood() {
        let ok = Ok(Wanted {
            head_only: false,
            format: Format::Text,
        });
        assert_eq!(
            parse_request(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            ok
        );
        assert_eq!(parse_request(b"GET /metrics HTTP/1.0\r\n\r\n"), ok);
        assert_eq!(parse_request(b"GET /metrics?x=1 HTTP/1.0\n\n"), ok);
        assert_eq!(
            parse_request(b"HEAD /metrics HTTP/1.1\r\n\r\n"),
            Ok(Wanted {
                head_only: true,
                format: Format::Text
            })
        );
    }

    /// Prometheus asks for OpenMetrics first; curl and promtool name
    /// nothing, or the text format.
    #[test]
    fn the_format_follows_the_accept_header() {
        let format = |head: &str| parse_request(head.as_bytes()).map(|w| w.format);
        let prometheus = "GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text;version=1.0.0,\
            application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n\r\n";
        assert_eq!(format(prometheus), Ok(Format::OpenMetrics));
        assert_eq!(
            format("GET /metrics HTTP/1.1\r\naccept:  Application/OpenMetrics-Text\r\n\r\n"),
            Ok(Format::OpenMetrics)
        );
        for head in [
            "GET /metrics HTTP/1.1\r\n\r\n",
            "GET /metrics HTTP/1.1\r\nAccept: */*\r\n\r\n",
            "GET /metrics HTTP/1.1\r\nAccept: text/plain;version=0.0.4\r\n\r\n",
            "GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text;q=0, text/plain\r\n\r\n",
            "GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text-not\r\n\r\n",
            "GET /metrics HTTP/1.1\r\nX-Accept: application/openmetrics-text\r\n\r\n",
        ] {
            assert_eq!(format(head), Ok(Format::Text), "{head:?}");
        }
    }

    /// A weight of 0 refuses OpenMetrics however its name is written: the
    /// fuzz target http_request found `Q=0` taken for a wish.
    #[test]
    fn a_zero_weight_refuses_open_metrics_in_any_case() {
        let format = |head: &str| parse_request(head.as_bytes()).map(|w| w.format);
        for weight in ["q=0", "Q=0", "Q=0.000"] {
            let head = format!(
                "GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text;{weight}\r\n\r\n"
            );
            assert_eq!(format(&head), Ok(Format::Text), "{head:?}");
        }
        let wanted = "GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text;Q=0.5\r\n\r\n";
        assert_eq!(format(wanted), Ok(Format::OpenMetrics));
    }

    #[test]
    fn malformed_requests_get_their_4xx() {
        let cases: [(&[u8], Status); 14] = [
            (b"", Status::BadRequest),
            (b"\r\n\r\n", Status::BadRequest),
            (b"GET\r\n\r\n", Status::BadRequest),
            (b"GET /metrics\r\n\r\n", Status::BadRequest),
            (b"GET  /metrics HTTP/1.1\r\n\r\n", Status::BadRequest),
            (b"GET /metrics HTTP/1.1 extra\r\n\r\n", Status::BadRequest),
            (b"GET metrics HTTP/1.1\r\n\r\n", Status::BadRequest),
            (b"GET /metrics FTP/1.1\r\n\r\n", Status::BadRequest),
            (
                b"GET /metrics HTTP/2.0\r\n\r\n",
                Status::VersionNotSupported,
            ),
            (
                b"GET /metrics HTTP/1.1\r\nno colon\r\n\r\n",
                Status::BadRequest,
            ),
            (
                b"GET /metrics HTTP/1.1\r\nA\x01: b\r\n\r\n",
                Status::BadRequest,
            ),
            (b"GET /\xff HTTP/1.1\r\n\r\n", Status::BadRequest),
            (b"POST /metrics HTTP/1.1\r\n\r\n", Status::MethodNotAllowed),
            (b"GET /other HTTP/1.1\r\n\r\n", Status::NotFound),
        ];
        for (request, want) in cases {
            assert_eq!(
                parse_request(request),
                Err(want),
                "{:?}",
                String::from_utf8_lossy(request)
            );
        }
    }

    #[test]
    fn any_bytes_are_answered_without_a_panic() {
        // A cheap stand-in for a fuzzer: every short mutation of a request.
        let base = b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n";
        for at in 0..base.len() {
            for byte in [0u8, b' ', b'\n', b':', 0x7f, 0xc3, 0xff] {
                let mut bytes = base.to_vec();
                bytes[at] = byte;
                let _ = parse_request(&bytes);
                let _ = parse_request(&bytes[..at]);
            }
        }
    }

    #[test]
    fn the_head_ends_at_the_first_blank_line() {
        assert_eq!(head_end(b"GET / HTTP/1.0\r\n\r\nbody"), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.0\n\nbody"), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.0\r\n"), None);
    }

    async fn server() -> (std::net::SocketAddr, watch::Sender<bool>) {
        server_for(None).await
    }

    async fn server_for(allowed: Allowed) -> (std::net::SocketAddr, watch::Sender<bool>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, shutdown) = watch::channel(false);
        tokio::spawn(serve(
            listener,
            allowed,
            |_| async { ("up 1\n".to_string(), "text/plain") },
            shutdown,
        ));
        (addr, stop)
    }

    async fn exchange(addr: std::net::SocketAddr, request: &[u8]) -> String {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        // A request refused may be reset before it is all written.
        let _ = stream.write_all(request).await;
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        String::from_utf8_lossy(&answer).into_owned()
    }

    #[tokio::test]
    async fn requests_at_and_past_the_size_limit() {
        let (addr, _stop) = server().await;
        let request = |size: usize| {
            let mut r = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
            r.resize(size - 4, b'a');
            r.extend_from_slice(b"\r\n\r\n");
            r
        };
        let at_limit = exchange(addr, &request(MAX_REQUEST)).await;
        assert!(at_limit.starts_with("HTTP/1.0 200 OK\r\n"), "{at_limit}");
        assert!(at_limit.ends_with("\r\n\r\nup 1\n"), "{at_limit}");
        let past = exchange(addr, &request(MAX_REQUEST + 1)).await;
        assert!(past.starts_with("HTTP/1.0 431 "), "{past}");
        let endless = exchange(addr, &vec![b'a'; 3 * MAX_REQUEST]).await;
        assert!(endless.starts_with("HTTP/1.0 431 "), "{endless}");
        let bad = exchange(addr, b"BREW /metrics HTTP/1.1\r\n\r\n").await;
        assert!(bad.starts_with("HTTP/1.0 405 "), "{bad}");
        let head = exchange(addr, b"HEAD /metrics HTTP/1.0\r\n\r\n").await;
        assert!(
            head.ends_with("Content-Length: 5\r\nConnection: close\r\n\r\n"),
            "{head}"
        );
    }

    #[tokio::test]
    async fn a_slow_client_is_timed_out() {
        let (addr, _stop) = server().await;
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        // Answered at the deadline, REQUEST_TIMEOUT after connecting.
        stream.read_to_end(&mut answer).await.unwrap();
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.0 408 "), "{answer}");
    }

    /// A connection to `addr` from 127.0.0.`last`.
    async fn connect_from(addr: std::net::SocketAddr, last: u8) -> TcpStream {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(([127, 0, 0, last], 0).into()).unwrap();
        socket.connect(addr).await.unwrap()
    }

    /// Connections from 127.0.0.`last` that have begun a request and
    /// wait.
    async fn held_from(addr: std::net::SocketAddr, last: u8, count: usize) -> Vec<TcpStream> {
        let mut held = Vec::new();
        for _ in 0..count {
            let mut s = connect_from(addr, last).await;
            s.write_all(b"G").await.unwrap();
            held.push(s);
        }
        held
    }

    /// What a connection from 127.0.0.`last` gets for a scrape.
    async fn scrape_from(addr: std::net::SocketAddr, last: u8) -> String {
        let mut stream = connect_from(addr, last).await;
        let _ = stream.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").await;
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        String::from_utf8_lossy(&answer).into_owned()
    }

    /// Scrapes from 127.0.0.`last` until answered (a slot frees as the
    /// server sees a close), at most 100 tries.
    async fn answered_soon(addr: std::net::SocketAddr, last: u8) -> String {
        let mut answer = String::new();
        for _ in 0..100 {
            answer = scrape_from(addr, last).await;
            if !answer.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        answer
    }

    /// Whether the server closed `stream` (it reads the end, or a reset).
    async fn closed(stream: &mut TcpStream) -> bool {
        let mut byte = [0u8; 1];
        let read = timeout(Duration::from_secs(10), stream.read(&mut byte)).await;
        matches!(read, Ok(Ok(0) | Err(_)))
    }

    #[tokio::test]
    async fn a_new_client_past_the_limit_takes_the_busiest_clients_oldest() {
        let (addr, _stop) = server().await;
        let mut held = Vec::new();
        // Every slot taken, by clients at their share, then one more from
        // a client holding fewer (the listen queue is in order).
        for client in 0..MAX_CONNECTIONS / MAX_PER_CLIENT {
            held.extend(held_from(addr, 10 + client as u8, MAX_PER_CLIENT).await);
        }
        let mut fewer = held_from(addr, 30, 1).await;
        assert_eq!(held.len(), MAX_CONNECTIONS);
        // The one of 30 took the place of the oldest of the first client,
        // and the scraper that of the oldest of the next client still at
        // its share; the newer connections stay.
        let answer = scrape_from(addr, 100).await;
        assert!(answer.starts_with("HTTP/1.0 200 "), "{answer}");
        let taken = [0, MAX_PER_CLIENT];
        for (i, stream) in held.iter_mut().enumerate() {
            if taken.contains(&i) {
                assert!(closed(stream).await, "{i}: its place taken");
                continue;
            }
            stream
                .write_all(b"ET /metrics HTTP/1.0\r\n\r\n")
                .await
                .unwrap();
            let mut answer = Vec::new();
            let _ = stream.read_to_end(&mut answer).await;
            let answer = String::from_utf8_lossy(&answer);
            assert!(answer.starts_with("HTTP/1.0 200 "), "{i}: {answer}");
        }
        fewer[0]
            .write_all(b"ET /metrics HTTP/1.0\r\n\r\n")
            .await
            .unwrap();
        assert!(!closed(&mut fewer[0]).await, "kept: its client held one");
    }

    #[tokio::test]
    async fn only_the_allowed_may_connect() {
        let allowed = Some(vec![
            "127.0.0.2".parse().unwrap(),
            "10.0.0.0/8".parse().unwrap(),
        ]);
        let (addr, _stop) = server_for(allowed).await;
        let answer = scrape_from(addr, 2).await;
        assert!(answer.starts_with("HTTP/1.0 200 "), "{answer}");
        assert_eq!(scrape_from(addr, 3).await, "", "not allowed: closed");
        assert_eq!(scrape_from(addr, 1).await, "", "not allowed: closed");
    }

    #[test]
    fn the_victim_is_a_drained_connection_else_the_busiest_clients_oldest() {
        let (t0, a, b) = (
            Instant::now(),
            "192.0.2.1".parse().unwrap(),
            "192.0.2.2".parse().unwrap(),
        );
        let slots = Slots::default();
        let later = |s: u64| t0 + Duration::from_secs(s);
        let a1 = slots.take(a, later(1)).unwrap();
        let b1 = slots.take(b, later(0)).unwrap();
        let _a2 = slots.take(a, later(2)).unwrap();
        let victim = || slots.0.lock().unwrap().victim();
        // a holds two, b one (older): a's oldest.
        assert_eq!(victim(), Some(a1.id));
        // One answered and draining goes first, whoever it is.
        b1.answered();
        assert_eq!(victim(), Some(b1.id));
        // Each slot is given back once.
        drop((a1, b1));
        let held = slots.0.lock().unwrap();
        assert_eq!(held.connections.len(), 1);
        assert_eq!(held.per_client.get(&a), Some(&1));
        assert_eq!(held.per_client.get(&b), None);
    }

    #[tokio::test]
    async fn one_client_holds_at_most_its_share_of_the_connections() {
        let (addr, _stop) = server().await;
        let held = held_from(addr, 20, MAX_PER_CLIENT).await;
        assert_eq!(scrape_from(addr, 20).await, "", "past its share: closed");
        let other = scrape_from(addr, 21).await;
        assert!(other.starts_with("HTTP/1.0 200 "), "{other}");
        drop(held);
        let freed = answered_soon(addr, 20).await;
        assert!(freed.starts_with("HTTP/1.0 200 "), "{freed}");
    }

    #[test]
    fn an_ipv6_client_is_its_64() {
        let one: IpAddr = "2001:db8:5::1".parse().unwrap();
        let other: IpAddr = "2001:db8:5::ffff:2".parse().unwrap();
        let next: IpAddr = "2001:db8:5:1::1".parse().unwrap();
        assert_eq!(client_of(one), client_of(other));
        assert_ne!(client_of(one), client_of(next));
        let v4: IpAddr = "192.0.2.1".parse().unwrap();
        assert_eq!(client_of(v4), v4);
    }

    #[tokio::test]
    async fn scrapes_that_meet_share_one_body() {
        let bodies = Bodies::default();
        let built = std::sync::atomic::AtomicUsize::new(0);
        let metrics = |format| {
            built.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            async move { (format!("{format:?}\n").repeat(1000), "text/plain") }
        };
        let built = || built.load(std::sync::atomic::Ordering::Relaxed);
        // A slow reader still holds the first: the second scrape gets it.
        let first = bodies.get(&metrics, Format::Text).await;
        let second = bodies.get(&metrics, Format::Text).await;
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(built(), 1);
        // A scrape in the other format gets a body of its own.
        let other = bodies.get(&metrics, Format::OpenMetrics).await;
        assert!(other.bytes.starts_with(b"OpenMetrics\n"));
        assert!(first.bytes.starts_with(b"Text\n"));
        assert_eq!(built(), 2);
        // Once no connection sends it, the next scrape builds anew.
        drop((first, second));
        let third = bodies.get(&metrics, Format::Text).await;
        assert_eq!(built(), 3);
        // An old one is not sent again, even while sent.
        let last = Arc::downgrade(&third);
        assert!(reusable(&last, third.made + REUSE / 2).is_some());
        assert!(reusable(&last, third.made + REUSE).is_none());
    }
}
