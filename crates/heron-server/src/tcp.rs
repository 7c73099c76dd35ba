//! DNS over TCP (RFC 7766).
//!
//! Each connection reads whatever the client has sent, answers every
//! complete query in it, and writes all the responses in one write, so a
//! client that pipelines gets its answers without waiting for each other.
//! Between reads a connection keeps only an incomplete message, if any,
//! and its task is kept small (transfers and TLS live elsewhere), so an
//! idle connection costs about 1.4 KB besides its socket (`heron-bench`,
//! docs/benchmarks: "Idle TCP connections").
//!
//! A listener given TLS settings serves DNS over TLS (RFC 7858) and zone
//! transfers over TLS (RFC 9103) the same way, after the handshake.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::timeout;

use heron_xfr::acl::Prefix;

use crate::TcpLimits;
use crate::processor::{Event, Outcome, Request, Transfer, Transport};
use crate::service::{Service, unix_now};
use crate::tls::TlsAcceptor;

/// Bytes read per system call (on the stack, not kept between reads).
const READ_CHUNK: usize = 8192;
/// Reads a TLS connection takes before it writes what they answered.
const READS_PER_ROUND: usize = 8;
/// Pending listen queue asked of the kernel (which cuts it to
/// `net.core.somaxconn`; `heron doctor` checks that).
pub const LISTEN_BACKLOG: i32 = 1024;

/// Binds a TCP listener (with `SO_REUSEADDR`, so restarts do not wait for
/// TIME_WAIT) for use on the current tokio runtime.
pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    TcpListener::from_std(socket.into())
}

/// Counts open connections in total and per client address.
pub struct ConnectionLimiter {
    limits: TcpLimits,
    /// Addresses the per-client limit does not apply to: the secondaries
    /// of some zone (NSD's opens up to 128 transfer connections at once).
    unlimited: Vec<Prefix>,
    open: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// An admitted connection; dropping it frees its slot.
pub struct Slot {
    limiter: Arc<ConnectionLimiter>,
    ip: IpAddr,
}

impl ConnectionLimiter {
    pub fn new(limits: TcpLimits, unlimited: Vec<Prefix>) -> Arc<ConnectionLimiter> {
        Arc::new(ConnectionLimiter {
            limits,
            unlimited,
            open: Mutex::new((0, HashMap::new())),
        })
    }

    /// A slot for a new connection from `ip`, or None if a limit is reached.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<Slot> {
        let mut open = self.open.lock().unwrap();
        if open.0 >= self.limits.max_connections {
            return None;
        }
        let per_client = open.1.entry(ip).or_insert(0);
        if *per_client >= self.limits.max_connections_per_client
            && !self.unlimited.iter().any(|p| p.contains(ip))
        {
            return None;
        }
        *per_client += 1;
        open.0 += 1;
        Some(Slot {
            limiter: self.clone(),
            ip,
        })
    }

    pub fn open_connections(&self) -> usize {
        self.open.lock().unwrap().0
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.limiter.open.lock().unwrap();
        open.0 -= 1;
        if let Some(n) = open.1.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.1.remove(&self.ip);
            }
        }
    }
}

/// Pause after a failed accept: the connection stays queued, so accepting
/// again at once would fail again at once.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// At most one warning about failing accepts this often: out of file
/// descriptors, a listener fails twenty times a second.
const ACCEPT_WARN_EVERY: Duration = Duration::from_secs(10);

/// Failed accepts, told in the log at most every [`ACCEPT_WARN_EVERY`].
#[derive(Default)]
struct AcceptFailures {
    last_warning: Option<Instant>,
    since_warning: u64,
}

impl AcceptFailures {
    fn failed(&mut self, e: &io::Error) {
        self.since_warning += 1;
        if self
            .last_warning
            .is_some_and(|at| at.elapsed() < ACCEPT_WARN_EVERY)
        {
            return;
        }
        let advice = if e.raw_os_error() == Some(libc::EMFILE)
            || e.raw_os_error() == Some(libc::ENFILE)
        {
            "; connections already open are still served and new ones wait;              raise the open-files limit (see `heron doctor`)"
        } else {
            ""
        };
        tracing::warn!(
            "TCP accept failed: {e} ({} time(s) since the last such warning){advice}",
            self.since_warning
        );
        self.last_warning = Some(Instant::now());
        self.since_warning = 0;
    }
}

/// Accepts connections until `shutdown` turns true; with `tls`, each
/// begins with a TLS handshake.
pub async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    service: Arc<Service>,
    limiter: Arc<ConnectionLimiter>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut failures = AcceptFailures::default();
    let shared = Arc::new(Shared {
        service,
        idle: limiter.limits.idle_timeout,
    });
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => return,
        };
        let (stream, peer) = match accepted {
            Ok(got) => got,
            Err(e) => {
                // Out of file descriptors and the like: back off briefly
                // rather than spin; connections already open keep working,
                // and new ones wait in the backlog until descriptors free.
                failures.failed(&e);
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        if shared.service.processor.blackholes(peer.ip()) {
            continue; // `blackhole`: closed unanswered
        }
        let Some(slot) = limiter.admit(peer.ip()) else {
            tracing::debug!("TCP connection from {peer} refused: connection limit");
            continue; // dropping the stream closes it
        };
        let (shared, shutdown) = (shared.clone(), shutdown.clone());
        // Spawned apart, so a plain connection's task is not sized for the
        // TLS state it never has: the task is what an idle connection
        // costs. Each connection future is made inside its task's block,
        // not passed in, or the task would hold it twice (rustc #62958).
        match &tls {
            None => tokio::spawn(plain_task(stream, peer, shared, shutdown, slot)),
            Some(tls) => {
                let tls = tls.clone();
                tokio::spawn(async move {
                    let ended = tls_connection(tls, stream, peer, shared, shutdown).await;
                    log_end(peer, ended);
                    drop(slot);
                })
            }
        };
    }
}

/// The task of a plain DNS-over-TCP connection, which frees its slot at
/// the end.
async fn plain_task(
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
    slot: Slot,
) {
    log_end(peer, connection(stream, peer, shared, shutdown).await);
    drop(slot);
}

fn log_end(peer: SocketAddr, ended: io::Result<()>) {
    if let Err(e) = ended {
        tracing::debug!("TCP connection from {peer} ended: {e}");
    }
}

/// What every connection task shares.
struct Shared {
    service: Arc<Service>,
    idle: std::time::Duration,
}

async fn connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) -> io::Result<()> {
    stream.set_nodelay(true)?;
    // Only an incomplete message is kept between reads: an idle connection
    // holds no buffers at all.
    let mut partial: Vec<u8> = Vec::new();
    loop {
        let ready = tokio::select! {
            ready = timeout(shared.idle, stream.readable()) => ready,
            _ = shutdown.changed() => return Ok(()),
        };
        match ready {
            Err(_) => return Ok(()), // idle timeout
            Ok(result) => result?,
        }
        // The chunk is scoped to end before the next await, so it is never
        // part of the task's saved state.
        let mut transfers: Vec<Transfer> = Vec::new();
        let output = {
            let mut chunk = [0u8; READ_CHUNK];
            let n = match stream.try_read(&mut chunk) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            };
            let from = (peer, Transport::Tcp);
            take_input(&chunk[..n], &mut partial, &mut transfers, from, &shared)?
        };
        respond(&mut stream, &output, transfers, peer, &shared).await?;
    }
}

/// A connection with TLS under the same framing. Between reads it holds
/// no buffer of ours, only rustls's state: it waits for the socket to be
/// readable, then takes all the plaintext TLS has at once into a chunk on
/// the stack (reads polled once, never awaited), so nothing is left in
/// TLS's buffers while it waits again.
async fn tls_connection(
    tls: TlsAcceptor,
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut stream = timeout(shared.idle, tls.accept(stream))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))??;
    let mut partial: Vec<u8> = Vec::new();
    let (mut ended, mut drained) = (false, true);
    while !ended {
        let mut transfers: Vec<Transfer> = Vec::new();
        let mut output = Vec::new();
        {
            let mut chunk = [0u8; READ_CHUNK];
            // A client that keeps sending is answered every few reads, so
            // the answers waiting to be written stay bounded.
            for _ in 0..READS_PER_ROUND {
                drained = false;
                match read_now(&mut stream, &mut chunk) {
                    Poll::Ready(Ok(0)) => ended = true,
                    Poll::Ready(Ok(n)) => {
                        let from = (peer, Transport::Tls);
                        let answers =
                            take_input(&chunk[..n], &mut partial, &mut transfers, from, &shared)?;
                        output.extend_from_slice(&answers);
                        continue;
                    }
                    Poll::Ready(Err(e)) => return Err(e),
                    Poll::Pending => drained = true,
                }
                break;
            }
        }
        respond(&mut stream, &output, transfers, peer, &shared).await?;
        if ended {
            break;
        }
        if !drained {
            // Plaintext may still wait in TLS: read again before waiting.
            continue;
        }
        let ready = tokio::select! {
            ready = timeout(shared.idle, stream.get_ref().0.readable()) => ready,
            _ = shutdown.changed() => break,
        };
        match ready {
            Err(_) => break, // idle timeout
            Ok(result) => result?,
        }
    }
    // Our close_notify, best effort: the client may be gone.
    let _ = timeout(shared.idle, stream.shutdown()).await;
    Ok(())
}

/// One read of whatever TLS can give now, without waiting: Pending when
/// the socket has nothing more (its readiness is then cleared, so the
/// next `readable()` waits for new data).
fn read_now<S: AsyncRead + Unpin>(stream: &mut S, buf: &mut [u8]) -> Poll<io::Result<usize>> {
    let mut cx = Context::from_waker(Waker::noop());
    let mut read = ReadBuf::new(buf);
    match Pin::new(stream).poll_read(&mut cx, &mut read) {
        Poll::Ready(Ok(())) => Poll::Ready(Ok(read.filled().len())),
        Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
        Poll::Pending => Poll::Pending,
    }
}

/// Answers what a read brought after any incomplete message kept from
/// before; keeps the new incomplete message, if any.
fn take_input(
    data: &[u8],
    partial: &mut Vec<u8>,
    transfers: &mut Vec<Transfer>,
    from: (SocketAddr, Transport),
    shared: &Shared,
) -> io::Result<Vec<u8>> {
    let service = &*shared.service;
    if partial.is_empty() {
        return answer_and_keep_rest(data, partial, transfers, from, service);
    }
    partial.extend_from_slice(data);
    let input = std::mem::take(partial);
    answer_and_keep_rest(&input, partial, transfers, from, service)
}

/// Writes the responses of one read, then the transfers they asked for
/// (the idle timeout bounds each write, not the whole transfer).
async fn respond<S: AsyncWrite + Unpin>(
    stream: &mut S,
    output: &[u8],
    transfers: Vec<Transfer>,
    peer: SocketAddr,
    shared: &Shared,
) -> io::Result<()> {
    if !output.is_empty() {
        write_all(stream, output, shared.idle).await?;
    }
    if !transfers.is_empty() {
        // Boxed: transfers are rare, and inline their state would size
        // every connection's task for them.
        Box::pin(send_transfers(stream, transfers, peer, shared)).await?;
    }
    // TLS may hold the end of what was written until flushed.
    timeout(shared.idle, stream.flush())
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "write timed out"))?
}

/// Writes `bytes` within `limit`, so that a client that stops reading
/// cannot hold its task forever.
async fn write_all<S: AsyncWrite + Unpin>(
    stream: &mut S,
    bytes: &[u8],
    limit: Duration,
) -> io::Result<()> {
    timeout(limit, stream.write_all(bytes))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "write timed out"))?
}

async fn send_transfers<S: AsyncWrite + Unpin>(
    stream: &mut S,
    transfers: Vec<Transfer>,
    peer: SocketAddr,
    shared: &Shared,
) -> io::Result<()> {
    for transfer in transfers {
        send_transfer(stream, transfer, peer, shared).await?;
    }
    Ok(())
}

/// Pulls the messages of a transfer one at a time and writes each as it
/// is made, so the transfer holds one message in memory; logs it.
async fn send_transfer<S: AsyncWrite + Unpin>(
    stream: &mut S,
    mut transfer: Transfer,
    peer: SocketAddr,
    shared: &Shared,
) -> io::Result<()> {
    let _turn = shared.service.transfer_slot().await;
    let started = Instant::now();
    let (zone, kind) = (transfer.zone().clone(), transfer.kind());
    let mut messages = if transfer.is_large() {
        off_the_runtime(|| transfer.messages())
    } else {
        transfer.messages()
    };
    let mut out = Vec::with_capacity(u16::MAX as usize);
    let mut framed = Vec::with_capacity(u16::MAX as usize + 2);
    while messages
        .next(&mut out, unix_now())
        .map_err(|_| io::Error::other("a record does not fit in a message"))?
    {
        framed.clear();
        framed.extend_from_slice(&(out.len() as u16).to_be_bytes());
        framed.extend_from_slice(&out);
        write_all(stream, &framed, shared.idle).await?;
    }
    let (sent, records) = messages.made();
    tracing::info!(
        "{kind} of {} serial {} to {peer}: {records} records in {sent} messages, {} ms",
        zone.origin(),
        zone.serial(),
        started.elapsed().as_millis()
    );
    Ok(())
}

/// Runs `f` on this thread after handing its other tasks to another
/// runtime thread (a runtime with one thread, as in tests, just runs it).
fn off_the_runtime<T>(f: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Answers the whole messages in `input` and returns the framed responses;
/// an incomplete message at the end is copied to `rest`.
fn answer_and_keep_rest(
    input: &[u8],
    rest: &mut Vec<u8>,
    transfers: &mut Vec<Transfer>,
    from: (SocketAddr, Transport),
    service: &Service,
) -> io::Result<Vec<u8>> {
    let mut output = Vec::new();
    let consumed = RESPONSE.with_borrow_mut(|response| {
        let mut out = Output {
            response,
            framed: &mut output,
            transfers,
        };
        answer_complete_messages(input, from, service, &mut out)
    })?;
    rest.extend_from_slice(&input[consumed..]);
    Ok(output)
}

thread_local! {
    /// Where each response is built before it is framed into the output;
    /// one per runtime thread, reused by every connection.
    static RESPONSE: std::cell::RefCell<Vec<u8>> =
        std::cell::RefCell::new(Vec::with_capacity(u16::MAX as usize));
}

/// Where [`answer_complete_messages`] puts its results.
struct Output<'a> {
    /// Scratch space for one response.
    response: &'a mut Vec<u8>,
    /// Framed responses, ready to write.
    framed: &'a mut Vec<u8>,
    /// Transfers to send once the responses are written.
    transfers: &'a mut Vec<Transfer>,
}

/// Answers every whole length-prefixed message at the front of `input`,
/// appending framed responses to `out`; returns the bytes consumed.
fn answer_complete_messages(
    input: &[u8],
    (peer, transport): (SocketAddr, Transport),
    service: &Service,
    out: &mut Output,
) -> io::Result<usize> {
    let mut at = 0;
    let now = unix_now();
    let mut events: Vec<Event> = Vec::new();
    while input.len() - at >= 2 {
        let len = u16::from_be_bytes([input[at], input[at + 1]]) as usize;
        if len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "zero-length message",
            ));
        }
        if input.len() - at - 2 < len {
            break;
        }
        let req = Request {
            bytes: &input[at + 2..at + 2 + len],
            peer,
            transport,
            now,
        };
        match service.processor.process(&req, out.response, &mut events) {
            Outcome::Response => {
                let len = out.response.len() as u16;
                out.framed.extend_from_slice(&len.to_be_bytes());
                out.framed.extend_from_slice(out.response);
            }
            Outcome::Nothing => {}
            Outcome::Transfer(transfer) => out.transfers.push(*transfer),
        }
        at += 2 + len;
    }
    service.dispatch(&mut events);
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An idle connection costs its task, and the task is as large as
    /// its largest state: a transfer's or TLS's state inline would make
    /// every connection pay for it (it was 4,416 bytes before they were
    /// moved out).
    #[tokio::test]
    async fn a_plain_connection_task_stays_small() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (stream, peer) = listener.accept().await.unwrap();
        let primary = heron_xfr::primary::Primary::new(HashMap::new(), 0);
        let processor = crate::processor::Processor::new(
            crate::SharedCatalog::default(),
            Default::default(),
            Arc::new(primary),
            Arc::default(),
        );
        let shared = Arc::new(Shared {
            service: Arc::new(Service::new(processor, None)),
            idle: Duration::from_secs(1),
        });
        let (_tx, shutdown) = watch::channel(false);
        let limiter = ConnectionLimiter::new(TcpLimits::default(), Vec::new());
        let slot = limiter.admit(peer.ip()).unwrap();
        let task = plain_task(stream, peer, shared, shutdown, slot);
        let size = std::mem::size_of_val(&task);
        assert!(size <= 1024, "a plain connection's task is {size} bytes");
    }

    #[test]
    fn limiter_counts_total_and_per_client() {
        let limits = TcpLimits {
            max_connections: 3,
            max_connections_per_client: 2,
            ..TcpLimits::default()
        };
        let limiter = ConnectionLimiter::new(limits, Vec::new());
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        let a1 = limiter.admit(a).unwrap();
        let _a2 = limiter.admit(a).unwrap();
        assert!(limiter.admit(a).is_none(), "per-client limit");
        let _b1 = limiter.admit(b).unwrap();
        assert!(limiter.admit(b).is_none(), "total limit");
        drop(a1);
        assert_eq!(limiter.open_connections(), 2);
        assert!(limiter.admit(b).is_some(), "slot freed on drop");
    }

    #[test]
    fn secondaries_are_held_to_the_total_limit_only() {
        let limits = TcpLimits {
            max_connections: 4,
            max_connections_per_client: 1,
            ..TcpLimits::default()
        };
        let limiter = ConnectionLimiter::new(limits, vec!["192.0.2.0/24".parse().unwrap()]);
        let secondary: IpAddr = "192.0.2.7".parse().unwrap();
        let other: IpAddr = "198.51.100.1".parse().unwrap();
        let slots: Vec<Slot> = (0..3).filter_map(|_| limiter.admit(secondary)).collect();
        assert_eq!(slots.len(), 3, "past the per-client limit");
        let _o = limiter.admit(other).unwrap();
        assert!(
            limiter.admit(other).is_none(),
            "others keep the per-client limit"
        );
        assert!(
            limiter.admit(secondary).is_none(),
            "the total limit holds for all"
        );
    }
}
