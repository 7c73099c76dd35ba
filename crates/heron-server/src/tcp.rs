//! DNS over TCP (RFC 7766).
//!
//! Each connection reads whatever the client has sent, answers the
//! complete queries in it, and writes the responses in one write, so a
//! client that pipelines gets its answers without waiting for each other.
//! At most [`QUEUED_ANSWERS_CAP`] bytes of answers are built before they
//! are written: the queries past the cap wait, unread ones in the socket,
//! until the client has taken what is queued, so a client that sends and
//! never reads holds little memory. Between reads a connection keeps only
//! what it has not answered (an incomplete message, or whole ones the cap
//! held back: at most a message and a read), and its task is kept small (transfers and TLS live elsewhere), so an
//! idle connection costs about 1.4 KB besides its socket (`heron-bench`,
//! docs/benchmarks: "Idle TCP connections").
//!
//! A connection is closed when no message begins within the idle timeout,
//! or when a message begun is not complete within the message timeout:
//! bytes that trickle in do not keep it open. Once a peak of connections
//! has passed, the heap they freed is handed back to the kernel
//! ([`release_memory_after_peaks`]): the allocator would keep it.
//!
//! A listener given TLS settings serves DNS over TLS (RFC 7858) and zone
//! transfers over TLS (RFC 9103) the same way, after the handshake.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockRef, Socket, Type};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, Interest, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::{Sleep, timeout};

use heron_xfr::acl::Prefix;

use crate::TcpLimits;
use crate::processor::{Event, Outcome, Request, Transfer, Transport};
use crate::service::{Service, unix_now};
use crate::stats::{Limit, Via, qtype_of};
use crate::tls::TlsAcceptor;

/// Bytes read per system call, into the thread's [`READ_BUFFER`].
const READ_CHUNK: usize = 8192;
/// Reads a TLS connection takes before it writes what they answered.
const READS_PER_ROUND: usize = 8;
/// Bytes of answers a connection builds before it writes them; the next
/// query is answered only after they are written. One response may take
/// it past the cap, by at most a message.
pub const QUEUED_ANSWERS_CAP: usize = 64 * 1024;
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

/// Counts open connections in total and per client, a client being an
/// address cut to its configured prefix (`ipv4-client-prefix`,
/// `ipv6-client-prefix`: one host with a /64 is one client).
pub struct ConnectionLimiter {
    limits: TcpLimits,
    /// Addresses the per-client limit does not apply to: the secondaries
    /// of some zone (NSD's opens up to 128 transfer connections at once).
    unlimited: Vec<Prefix>,
    open: Mutex<Open>,
}

/// The counts behind a [`ConnectionLimiter`].
#[derive(Default)]
struct Open {
    total: usize,
    per_client: HashMap<IpAddr, usize>,
    /// The most open at once since memory was last released.
    peak: usize,
    released_at: Option<Instant>,
}

/// Connections at a peak worth releasing memory after: thousands of slow
/// clients each left up to 64 KiB of freed buffers in the allocator,
/// which glibc keeps resident (560 MB after 10,000 closed, issue 24).
pub const RELEASE_AFTER_PEAK: usize = 512;
/// Memory is released once the open connections fall to this share of
/// the peak (a quarter)...
const RELEASE_BELOW_PEAK_DIVISOR: usize = 4;
/// ...and at most this often: a trim walks the whole heap under the
/// allocator's locks.
pub const RELEASE_AT_MOST_EVERY: Duration = Duration::from_secs(5);
/// How often the count is looked at for a release.
const RELEASE_CHECK_EVERY: Duration = Duration::from_secs(1);

/// An admitted connection; dropping it frees its slot.
pub struct Slot {
    limiter: Arc<ConnectionLimiter>,
    /// The client's network, as counted.
    client: IpAddr,
}

impl ConnectionLimiter {
    pub fn new(limits: TcpLimits, unlimited: Vec<Prefix>) -> Arc<ConnectionLimiter> {
        Arc::new(ConnectionLimiter {
            limits,
            unlimited,
            open: Mutex::new(Open::default()),
        })
    }

    /// A slot for a new connection from `ip`, or None if a limit is reached.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<Slot> {
        self.admit_or_why(ip).ok()
    }

    /// A slot for a new connection from `ip`, or the limit reached.
    pub fn admit_or_why(self: &Arc<Self>, ip: IpAddr) -> Result<Slot, Limit> {
        let client = self.client(ip);
        let mut open = self.open.lock().unwrap();
        if open.total >= self.limits.max_connections {
            return Err(Limit::Total);
        }
        let per_client = open.per_client.entry(client).or_insert(0);
        if *per_client >= self.limits.max_connections_per_client
            && !self.unlimited.iter().any(|p| p.contains(ip))
        {
            return Err(Limit::PerClient);
        }
        *per_client += 1;
        open.total += 1;
        open.peak = open.peak.max(open.total);
        Ok(Slot {
            limiter: self.clone(),
            client,
        })
    }

    /// Who `ip` counts as for the per-client limit: its network of the
    /// configured prefix length (one host may well hold a whole IPv6 /64).
    fn client(&self, ip: IpAddr) -> IpAddr {
        match ip {
            IpAddr::V4(a) => {
                let mask = u32::MAX.checked_shl(32 - self.limits.ipv4_client_prefix.min(32) as u32);
                IpAddr::V4(Ipv4Addr::from_bits(a.to_bits() & mask.unwrap_or(0)))
            }
            IpAddr::V6(a) => {
                let mask =
                    u128::MAX.checked_shl(128 - self.limits.ipv6_client_prefix.min(128) as u32);
                IpAddr::V6(Ipv6Addr::from_bits(a.to_bits() & mask.unwrap_or(0)))
            }
        }
    }

    pub fn open_connections(&self) -> usize {
        self.open.lock().unwrap().total
    }

    /// Whether freed memory should go back to the kernel `now`: after a
    /// peak of at least [`RELEASE_AFTER_PEAK`] connections the count has
    /// fallen to a quarter of it, and no release was made in the last
    /// [`RELEASE_AT_MOST_EVERY`]. A yes starts the next peak from here.
    pub fn release_due(&self, now: Instant) -> bool {
        let mut open = self.open.lock().unwrap();
        let due = open.peak >= RELEASE_AFTER_PEAK
            && open.total <= open.peak / RELEASE_BELOW_PEAK_DIVISOR
            && open
                .released_at
                .is_none_or(|at| now.saturating_duration_since(at) >= RELEASE_AT_MOST_EVERY);
        if due {
            open.peak = open.total;
            open.released_at = Some(now);
        }
        due
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.limiter.open.lock().unwrap();
        open.total -= 1;
        if let Some(n) = open.per_client.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                open.per_client.remove(&self.client);
            }
        }
    }
}

/// Hands the heap that closed connections freed back to the kernel once
/// a peak of connections has passed ([`ConnectionLimiter::release_due`]),
/// until `shutdown` turns true. The trim runs off the runtime's threads.
pub async fn release_memory_after_peaks(
    limiter: Arc<ConnectionLimiter>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut ticks = tokio::time::interval(RELEASE_CHECK_EVERY);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = shutdown.changed() => return,
        }
        if limiter.release_due(Instant::now()) {
            let started = Instant::now();
            let _ = tokio::task::spawn_blocking(heron_sys::memory::release_free_heap).await;
            tracing::debug!(
                "TCP connections fell after a peak: freed heap returned in {} ms",
                started.elapsed().as_millis()
            );
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
pub struct AcceptFailures {
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

/// The next connection on `listener`, or None once `shutdown` turns
/// true. A failed accept (out of file descriptors and the like) is told
/// to `failures` and retried after a pause rather than at once:
/// connections already open keep working, and new ones wait in the
/// backlog until descriptors free.
pub async fn next_connection(
    listener: &TcpListener,
    shutdown: &mut watch::Receiver<bool>,
    failures: &mut AcceptFailures,
) -> Option<(TcpStream, SocketAddr)> {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => return None,
        };
        match accepted {
            Ok(got) => return Some(got),
            Err(e) => {
                failures.failed(&e);
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
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
        message_timeout: limiter.limits.message_timeout,
        nodelay_inherited: nodelay_for_accepted(&listener),
    });
    while let Some((stream, peer)) = next_connection(&listener, &mut shutdown, &mut failures).await
    {
        let stats = &shared.service.stats;
        if shared.service.processor.blackholes(peer.ip()) {
            stats.with_thread_cells(|c| c.refused(Limit::Blackhole));
            continue; // `blackhole`: closed unanswered
        }
        let slot = match limiter.admit_or_why(peer.ip()) {
            Ok(slot) => slot,
            Err(limit) => {
                stats.with_thread_cells(|c| c.refused(limit));
                tracing::debug!("TCP connection from {peer} refused: connection limit");
                continue; // dropping the stream closes it
            }
        };
        let via = if tls.is_some() { Via::Tls } else { Via::Tcp };
        stats.with_thread_cells(|c| c.accepted(via));
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
    /// Longest wait for a message to begin.
    idle: Duration,
    /// Longest time from a message's first byte to its last.
    message_timeout: Duration,
    /// Whether accepted sockets come with `TCP_NODELAY` from the listener.
    nodelay_inherited: bool,
}

/// Sets `TCP_NODELAY` on `listener`, which Linux copies to every socket
/// it accepts: one system call per listener instead of one per
/// connection. False when it could not be set; each connection then sets
/// its own.
fn nodelay_for_accepted(listener: &TcpListener) -> bool {
    SockRef::from(listener).set_nodelay(true).is_ok()
}

/// Gives `stream` `TCP_NODELAY` unless it has it from the listener, so
/// that no answer waits for the client's acknowledgement of the last.
fn set_nodelay(stream: &TcpStream, shared: &Shared) -> io::Result<()> {
    if shared.nodelay_inherited {
        return Ok(());
    }
    stream.set_nodelay(true)
}

async fn connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) -> io::Result<()> {
    set_nodelay(&stream, &shared)?;
    // Only what is not answered is kept between reads: an idle connection
    // holds no buffers at all.
    let mut partial = Unanswered::default();
    let from = (peer, Transport::Tcp, stream.local_addr().ok());
    let stop = shutdown.changed();
    let timer = tokio::time::sleep(shared.idle);
    tokio::pin!(stop, timer);
    loop {
        // What the cap held back is answered before anything more is read.
        while partial.holds_whole_message() {
            let mut replies = Replies::new();
            take_input(&[], &mut partial, &mut replies, from, &shared)?;
            respond_plain(&mut stream, replies, peer, &shared).await?;
        }
        let deadline = partial.deadline_or_idle(shared.idle);
        if !wait_readable(&stream, deadline, timer.as_mut(), stop.as_mut()).await? {
            return Ok(()); // idle, a message not completed in time, or shutdown
        }
        let mut replies = Replies::new();
        let read = with_read_buffer(|chunk| {
            let n = read_available(&stream, chunk)?;
            if let Some(n @ 1..) = n {
                take_input(&chunk[..n], &mut partial, &mut replies, from, &shared)?;
            }
            Ok::<_, io::Error>(n)
        })?;
        match read {
            None => continue, // readiness was stale
            Some(0) => return Ok(()),
            Some(_) => respond_plain(&mut stream, replies, peer, &shared).await?,
        }
    }
}

/// [`respond`] for a plain connection: the answers are written at once
/// when the socket takes them, as it nearly always does, so that only a
/// client that does not read makes the task wait (in a boxed future: the
/// wait's state would otherwise size every connection's task).
async fn respond_plain(
    stream: &mut TcpStream,
    replies: Replies,
    peer: SocketAddr,
    shared: &Shared,
) -> io::Result<()> {
    let Replies { framed, transfers } = replies;
    let written = write_now(stream, &framed)?;
    if written < framed.len() {
        Box::pin(write_all(stream, &framed[written..], shared.idle)).await?;
    }
    give_back(framed);
    if !transfers.is_empty() {
        Box::pin(send_transfers(stream, transfers, peer, shared)).await?;
    }
    Ok(())
}

/// Writes what the socket takes of `bytes` without waiting; returns how
/// much that was.
fn write_now(stream: &TcpStream, bytes: &[u8]) -> io::Result<usize> {
    let mut written = 0;
    while written < bytes.len() {
        match stream.try_write(&bytes[written..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(written)
}

/// Waits until `stream` may be read: true then, false once `deadline`
/// has passed or `stop` has completed. `timer` stays armed from one call
/// to the next and is moved only when it would fire after the deadline;
/// when it fires before it (the deadline moved on since), it is armed
/// again. So a busy connection re-arms its timer about once per idle
/// timeout, not once per read, and `stop` is registered once.
async fn wait_readable(
    stream: &TcpStream,
    deadline: Instant,
    mut timer: Pin<&mut Sleep>,
    mut stop: Pin<&mut impl Future>,
) -> io::Result<bool> {
    let deadline = tokio::time::Instant::from_std(deadline);
    if deadline < timer.deadline() {
        timer.as_mut().reset(deadline);
    }
    loop {
        tokio::select! {
            biased;
            ready = std::future::poll_fn(|cx| stream.poll_read_ready(cx)) => {
                ready?;
                return Ok(true);
            }
            _ = stop.as_mut() => return Ok(false),
            () = timer.as_mut() => {
                if tokio::time::Instant::now() >= deadline {
                    return Ok(false);
                }
                timer.as_mut().reset(deadline);
            }
        }
    }
}

thread_local! {
    /// Where reads land, one per runtime thread, reused by every
    /// connection: a chunk on the stack was zeroed, 8 KiB written, on
    /// every read (more than half of a lone query's user-space
    /// instructions, docs/benchmarks/tcp.md).
    static READ_BUFFER: RefCell<Box<[u8; READ_CHUNK]>> =
        RefCell::new(Box::new([0; READ_CHUNK]));
}

/// Runs `f` with this thread's read buffer. `f` cannot await, so the
/// buffer is never held across a task switch nor saved in a task.
fn with_read_buffer<T>(f: impl FnOnce(&mut [u8]) -> T) -> T {
    READ_BUFFER.with_borrow_mut(|chunk| f(&mut chunk[..]))
}

/// Reads what `stream` holds into `chunk`; None when it holds nothing
/// (the readiness was stale). A read that leaves room in `chunk` took all
/// the kernel had, so the readiness is cleared then, and the next wait
/// goes to epoll rather than to one more read that would only return
/// WouldBlock: bytes arriving after this read raise a new edge-triggered
/// event, and tokio clears only the readiness this read was made on.
fn read_available(stream: &TcpStream, chunk: &mut [u8]) -> io::Result<Option<usize>> {
    use std::io::Read;
    let mut drained = 0;
    let read = stream.try_io(Interest::READABLE, || {
        let socket = SockRef::from(stream);
        let n = (&*socket).read(chunk)?;
        if n == 0 || n == chunk.len() {
            return Ok(n);
        }
        drained = n;
        Err(io::ErrorKind::WouldBlock.into())
    });
    match read {
        Ok(n) => Ok(Some(n)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok((drained > 0).then_some(drained)),
        Err(e) => Err(e),
    }
}

/// A connection with TLS under the same framing. Between reads it holds
/// no buffer of ours, only rustls's state: it waits for the socket to be
/// readable, then takes all the plaintext TLS has at once into the
/// thread's read buffer (reads polled once, never awaited), so nothing is left in
/// TLS's buffers while it waits again.
async fn tls_connection(
    tls: TlsAcceptor,
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) -> io::Result<()> {
    set_nodelay(&stream, &shared)?;
    let local = stream.local_addr().ok();
    let mut stream = timeout(shared.idle, tls.accept(stream))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))??;
    let mut partial = Unanswered::default();
    let (mut ended, mut drained) = (false, true);
    let stop = shutdown.changed();
    let timer = tokio::time::sleep(shared.idle);
    tokio::pin!(stop, timer);
    while !ended {
        let mut replies = Replies::new();
        let from = (peer, Transport::Tls, local);
        if partial.holds_whole_message() {
            // What the cap held back is answered before anything more is
            // read (the rest waits in TLS's bounded buffers or the socket).
            take_input(&[], &mut partial, &mut replies, from, &shared)?;
            drained = false;
        } else {
            // A client that keeps sending is answered every few reads, or
            // sooner once the answers reach the cap.
            with_read_buffer(|chunk| {
                for _ in 0..READS_PER_ROUND {
                    drained = false;
                    match read_now(&mut stream, chunk) {
                        Poll::Ready(Ok(0)) => ended = true,
                        Poll::Ready(Ok(n)) => {
                            take_input(&chunk[..n], &mut partial, &mut replies, from, &shared)?;
                            if partial.holds_whole_message() || !replies.transfers.is_empty() {
                                break;
                            }
                            continue;
                        }
                        Poll::Ready(Err(e)) => return Err(e),
                        Poll::Pending => drained = true,
                    }
                    break;
                }
                Ok(())
            })?;
        }
        respond(&mut stream, replies, peer, &shared).await?;
        if ended {
            break;
        }
        if !drained {
            // Plaintext may still wait in TLS: read again before waiting.
            continue;
        }
        let deadline = partial.deadline_or_idle(shared.idle);
        if !wait_readable(stream.get_ref().0, deadline, timer.as_mut(), stop.as_mut()).await? {
            break; // idle, a message not completed in time, or shutdown
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

/// Answers what a read brought after what was kept from before, up to
/// the cap on queued answers; keeps what it did not answer.
fn take_input(
    data: &[u8],
    partial: &mut Unanswered,
    replies: &mut Replies,
    from: From,
    shared: &Shared,
) -> io::Result<()> {
    let service = &*shared.service;
    let kept = &mut partial.bytes;
    let consumed = if kept.is_empty() {
        answer_and_keep_rest(data, kept, replies, from, service)?
    } else {
        kept.extend_from_slice(data);
        let input = std::mem::take(kept);
        answer_and_keep_rest(&input, kept, replies, from, service)?
    };
    partial.restart_deadline(consumed > 0, shared.message_timeout);
    Ok(())
}

/// What answering some input asks to write: framed responses, then the
/// transfers they asked for.
struct Replies {
    framed: Vec<u8>,
    transfers: Vec<Transfer>,
}

thread_local! {
    /// A buffer for framed responses that the last connection on this
    /// thread wrote and gave back: the next one builds in it instead of
    /// growing a new one from nothing on every read.
    static SPARE_FRAMED: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

impl Replies {
    fn new() -> Replies {
        Replies {
            framed: SPARE_FRAMED.take(),
            transfers: Vec::new(),
        }
    }
}

/// Keeps `framed`, once written, for the next [`Replies`] on this thread.
/// It holds at most [`QUEUED_ANSWERS_CAP`] and a message.
fn give_back(mut framed: Vec<u8>) {
    framed.clear();
    SPARE_FRAMED.set(framed);
}

/// What a connection has read and not answered: the start of a message,
/// or whole messages the cap on queued answers held back.
#[derive(Default)]
struct Unanswered {
    bytes: Vec<u8>,
    /// When the first message in `bytes` must be complete.
    deadline: Option<Instant>,
}

impl Unanswered {
    /// Whether it begins with a whole length-prefixed message.
    fn holds_whole_message(&self) -> bool {
        let bytes = &self.bytes;
        bytes.len() >= 2 && bytes.len() - 2 >= u16::from_be_bytes([bytes[0], bytes[1]]) as usize
    }

    /// Until when to wait for more data: the idle timeout from now between
    /// messages, the message's deadline within one. A byte now and then
    /// does not keep a connection open.
    fn deadline_or_idle(&self, idle: Duration) -> Instant {
        self.deadline.unwrap_or_else(|| Instant::now() + idle)
    }

    /// After input was taken: a message begun since a message was
    /// `answered` gets a new deadline; one still incomplete keeps its own.
    fn restart_deadline(&mut self, answered: bool, message_timeout: Duration) {
        if self.bytes.is_empty() {
            self.deadline = None;
        } else if answered || self.deadline.is_none() {
            self.deadline = Some(Instant::now() + message_timeout);
        }
    }
}

/// Writes the responses of one read, then the transfers they asked for
/// (the idle timeout bounds each write, not the whole transfer).
async fn respond<S: AsyncWrite + Unpin>(
    stream: &mut S,
    replies: Replies,
    peer: SocketAddr,
    shared: &Shared,
) -> io::Result<()> {
    let Replies { framed, transfers } = replies;
    if !framed.is_empty() {
        write_all(stream, &framed, shared.idle).await?;
    }
    give_back(framed);
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
    let sent = async {
        while messages
            .next(&mut out, unix_now())
            .map_err(|_| io::Error::other("a record does not fit in a message"))?
        {
            framed.clear();
            framed.extend_from_slice(&(out.len() as u16).to_be_bytes());
            framed.extend_from_slice(&out);
            write_all(stream, &framed, shared.idle).await?;
        }
        Ok::<_, io::Error>(())
    }
    .await;
    (shared.service.zones).transfer_out(zone.origin(), started.elapsed(), sent.is_ok());
    sent?;
    let (sent, records) = messages.made();
    tracing::info!(
        zone = %zone.origin(),
        %peer,
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

/// Where a connection's messages come from: the client, the transport,
/// and our own address (for dnstap).
type From = (SocketAddr, Transport, Option<SocketAddr>);

/// Answers the whole messages in `input` up to the cap, appending the
/// framed responses to `replies`; what is left is copied to `rest`.
/// Returns the bytes answered.
fn answer_and_keep_rest(
    input: &[u8],
    rest: &mut Vec<u8>,
    replies: &mut Replies,
    from: From,
    service: &Service,
) -> io::Result<usize> {
    let consumed = RESPONSE.with_borrow_mut(|response| {
        let mut out = Output {
            response,
            framed: &mut replies.framed,
            transfers: &mut replies.transfers,
        };
        answer_complete_messages(input, from, service, &mut out)
    })?;
    rest.extend_from_slice(&input[consumed..]);
    Ok(consumed)
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

/// Answers the whole length-prefixed messages at the front of `input`,
/// appending framed responses to `out`, until the framed responses reach
/// [`QUEUED_ANSWERS_CAP`] or a transfer is asked for (it is sent before
/// the queries after it are answered); returns the bytes consumed.
fn answer_complete_messages(
    input: &[u8],
    (peer, transport, local): From,
    service: &Service,
    out: &mut Output,
) -> io::Result<usize> {
    let mut at = 0;
    let now = unix_now();
    let received_at = Instant::now();
    let mut answered = 0;
    let via = match transport {
        Transport::Tls => Via::Tls,
        _ => Via::Tcp,
    };
    let mut events: Vec<Event> = Vec::new();
    let stats = &service.stats;
    while input.len() - at >= 2 && out.framed.len() < QUEUED_ANSWERS_CAP && out.transfers.is_empty()
    {
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
            local,
            received: received_at,
        };
        stats.with_thread_cells(|c| c.query(via, qtype_of(req.bytes)));
        match service.processor.process(&req, out.response, &mut events) {
            Outcome::Response => {
                stats.with_thread_cells(|c| c.response(out.response));
                answered += 1;
                let len = out.response.len() as u16;
                out.framed.extend_from_slice(&len.to_be_bytes());
                out.framed.extend_from_slice(out.response);
            }
            Outcome::Nothing => {}
            Outcome::Transfer(transfer) => out.transfers.push(*transfer),
        }
        at += 2 + len;
    }
    if answered > 0 {
        stats.with_thread_cells(|c| c.answered(received_at.elapsed(), answered));
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
            message_timeout: Duration::from_secs(1),
            nodelay_inherited: true,
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
    fn ipv6_clients_are_counted_per_prefix() {
        let limits = TcpLimits {
            max_connections_per_client: 2,
            ..TcpLimits::default()
        };
        assert_eq!(limits.ipv6_client_prefix, 56);
        let limiter = ConnectionLimiter::new(limits, Vec::new());
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let _a = limiter.admit(ip("2001:db8:0:1::1")).unwrap();
        let _b = limiter.admit(ip("2001:db8:0:ff:abcd::9")).unwrap();
        assert!(
            limiter.admit(ip("2001:db8:0:42::7")).is_none(),
            "one /56 shares one count"
        );
        assert!(
            limiter.admit(ip("2001:db8:0:100::1")).is_some(),
            "the next /56 has its own"
        );
        // IPv4 is counted per address unless configured otherwise.
        let _c = limiter.admit(ip("192.0.2.1")).unwrap();
        let _d = limiter.admit(ip("192.0.2.1")).unwrap();
        assert!(limiter.admit(ip("192.0.2.1")).is_none());
        assert!(limiter.admit(ip("192.0.2.2")).is_some());
    }

    #[test]
    fn client_prefixes_are_configurable() {
        let limits = TcpLimits {
            max_connections_per_client: 1,
            ipv4_client_prefix: 24,
            ipv6_client_prefix: 128,
            ..TcpLimits::default()
        };
        let limiter = ConnectionLimiter::new(limits, Vec::new());
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let _a = limiter.admit(ip("192.0.2.1")).unwrap();
        assert!(limiter.admit(ip("192.0.2.200")).is_none(), "one /24");
        assert!(limiter.admit(ip("192.0.3.1")).is_some());
        let _b = limiter.admit(ip("2001:db8::1")).unwrap();
        assert!(limiter.admit(ip("2001:db8::2")).is_some(), "per /128");
        let everyone = TcpLimits {
            max_connections_per_client: 1,
            ipv4_client_prefix: 0,
            ..TcpLimits::default()
        };
        let limiter = ConnectionLimiter::new(everyone, Vec::new());
        let _c = limiter.admit(ip("10.0.0.1")).unwrap();
        assert!(limiter.admit(ip("203.0.113.9")).is_none(), "/0: one client");
    }

    #[test]
    fn memory_is_released_once_after_a_peak_has_passed() {
        let limiter = ConnectionLimiter::new(
            TcpLimits {
                max_connections_per_client: usize::MAX,
                ..TcpLimits::default()
            },
            Vec::new(),
        );
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let t0 = Instant::now();
        let mut slots: Vec<Slot> = (0..RELEASE_AFTER_PEAK - 1)
            .map(|_| limiter.admit(ip).unwrap())
            .collect();
        slots.truncate(0);
        assert!(!limiter.release_due(t0), "below a peak worth a release");
        slots = (0..RELEASE_AFTER_PEAK * 4)
            .map(|_| limiter.admit(ip).unwrap())
            .collect();
        slots.truncate(RELEASE_AFTER_PEAK + 1);
        assert!(
            !limiter.release_due(t0),
            "still above a quarter of the peak"
        );
        slots.truncate(RELEASE_AFTER_PEAK);
        assert!(limiter.release_due(t0), "at a quarter of the peak");
        assert!(!limiter.release_due(t0), "once per peak");
        // Another peak soon after: released only once the interval passed.
        slots.extend((0..RELEASE_AFTER_PEAK * 3).map(|_| limiter.admit(ip).unwrap()));
        slots.clear();
        assert!(!limiter.release_due(t0 + RELEASE_AT_MOST_EVERY / 2));
        assert!(limiter.release_due(t0 + RELEASE_AT_MOST_EVERY));
        assert_eq!(limiter.open_connections(), 0);
    }

    #[test]
    fn a_message_deadline_is_kept_while_the_message_grows() {
        let timeout = Duration::from_secs(5);
        let mut partial = Unanswered::default();
        let idle = Duration::from_secs(10);
        let before = Instant::now();
        assert!(
            partial.deadline_or_idle(idle) >= before + idle,
            "between messages: the idle timeout from now"
        );
        partial.bytes = vec![0, 40, 1];
        partial.restart_deadline(false, timeout);
        let first = partial.deadline.expect("a message has begun");
        partial.bytes.push(2);
        partial.restart_deadline(false, timeout);
        assert_eq!(partial.deadline, Some(first), "more bytes do not extend it");
        assert_eq!(partial.deadline_or_idle(idle), first);
        partial.restart_deadline(true, timeout);
        assert!(
            partial.deadline >= Some(first),
            "a new message, a new deadline"
        );
        partial.bytes.clear();
        partial.restart_deadline(true, timeout);
        assert_eq!(partial.deadline, None, "between messages: idle timeout");
    }

    /// Both ends of a loopback connection: the client's (blocking) and
    /// the server's.
    async fn connected_pair() -> (std::net::TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (client, server)
    }

    /// Whether tokio still takes `stream` for readable (a read would be
    /// tried without waiting for epoll).
    fn marked_readable(stream: &TcpStream) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        stream.poll_read_ready(&mut cx).is_ready()
    }

    async fn readable_within_5_s(stream: &TcpStream) {
        let ready = timeout(Duration::from_secs(5), stream.readable()).await;
        ready.expect("woken for the bytes sent").unwrap();
    }

    #[tokio::test]
    async fn a_read_that_empties_the_socket_waits_for_epoll_and_misses_nothing() {
        use std::io::Write;
        let (mut client, server) = connected_pair().await;
        let mut chunk = [0u8; READ_CHUNK];
        client.write_all(&[7; 100]).unwrap();
        readable_within_5_s(&server).await;
        assert_eq!(read_available(&server, &mut chunk).unwrap(), Some(100));
        assert!(
            !marked_readable(&server),
            "no read that could only return WouldBlock"
        );
        client.write_all(&[8; 30]).unwrap();
        readable_within_5_s(&server).await;
        assert_eq!(read_available(&server, &mut chunk).unwrap(), Some(30));
        drop(client);
        readable_within_5_s(&server).await;
        assert_eq!(read_available(&server, &mut chunk).unwrap(), Some(0));
    }

    #[tokio::test]
    async fn a_read_that_fills_the_chunk_reads_again_before_waiting() {
        use std::io::Write;
        let (mut client, server) = connected_pair().await;
        let mut chunk = [0u8; 32];
        client.write_all(&[1; 48]).unwrap();
        readable_within_5_s(&server).await;
        assert_eq!(read_available(&server, &mut chunk).unwrap(), Some(32));
        assert!(marked_readable(&server), "more may be queued");
        assert_eq!(read_available(&server, &mut chunk).unwrap(), Some(16));
        // Exactly a chunk: the read after it finds nothing and clears.
        client.write_all(&[2; 32]).unwrap();
        readable_within_5_s(&server).await;
        assert_eq!(read_available(&server, &mut chunk).unwrap(), Some(32));
        assert_eq!(read_available(&server, &mut chunk).unwrap(), None);
        assert!(!marked_readable(&server));
    }

    /// Answers are never held back by Nagle's algorithm: sockets accepted
    /// from a listener given `TCP_NODELAY` have it without a call of
    /// their own.
    #[tokio::test]
    async fn accepted_sockets_have_nodelay_from_their_listener() {
        let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        assert!(nodelay_for_accepted(&listener));
        let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (stream, _) = listener.accept().await.unwrap();
        assert!(stream.nodelay().unwrap());
    }

    /// Every read on a thread lands in one buffer, whatever the
    /// connection (none is zeroed or allocated per read), and a short
    /// read after a longer one shows only what it read.
    #[tokio::test]
    async fn reads_share_the_threads_buffer_and_see_only_their_bytes() {
        use std::io::Write;
        let (mut a, server_a) = connected_pair().await;
        let (mut b, server_b) = connected_pair().await;
        a.write_all(&[1; 300]).unwrap();
        b.write_all(&[2; 10]).unwrap();
        readable_within_5_s(&server_a).await;
        readable_within_5_s(&server_b).await;
        let read = |stream: &TcpStream| {
            with_read_buffer(|chunk| {
                let n = read_available(stream, chunk).unwrap().unwrap();
                (chunk.as_ptr(), chunk[..n].to_vec())
            })
        };
        let (first, long) = read(&server_a);
        let (second, short) = read(&server_b);
        assert_eq!((long, short), (vec![1; 300], vec![2; 10]));
        assert_eq!(first, second, "one buffer for both connections");
    }

    #[tokio::test]
    async fn a_wait_ends_at_its_deadline_wherever_the_timer_was() {
        let (_client, server) = connected_pair().await;
        let stop = std::future::pending::<()>();
        let timer = tokio::time::sleep(Duration::from_secs(3600));
        tokio::pin!(stop, timer);
        // A new socket may be taken for readable before a read says not.
        assert_eq!(read_available(&server, &mut [0u8; 8]).unwrap(), None);
        // Armed later than the deadline: moved to it.
        let deadline = Instant::now() + Duration::from_millis(50);
        let ready = wait_readable(&server, deadline, timer.as_mut(), stop.as_mut()).await;
        assert!(!ready.unwrap(), "nothing came: timed out");
        assert!(Instant::now() >= deadline);
        // Armed earlier than the deadline (it moved on since): the timer
        // fires first and is armed again, the wait goes on to the deadline.
        timer
            .as_mut()
            .reset(tokio::time::Instant::now() + Duration::from_millis(20));
        let deadline = Instant::now() + Duration::from_millis(150);
        let ready = wait_readable(&server, deadline, timer.as_mut(), stop.as_mut()).await;
        assert!(!ready.unwrap());
        assert!(Instant::now() >= deadline, "not ended when the timer fired");
    }

    #[tokio::test]
    async fn a_wait_ends_when_bytes_come_or_on_shutdown() {
        use std::io::Write;
        let (mut client, server) = connected_pair().await;
        let (stop_tx, mut stop_rx) = watch::channel(false);
        let stop = stop_rx.changed();
        let timer = tokio::time::sleep(Duration::from_secs(3600));
        tokio::pin!(stop, timer);
        let far = Instant::now() + Duration::from_secs(3600);
        client.write_all(&[0, 1]).unwrap();
        let ready = wait_readable(&server, far, timer.as_mut(), stop.as_mut()).await;
        assert!(ready.unwrap(), "readable");
        let mut chunk = [0u8; 8];
        assert_eq!(read_available(&server, &mut chunk).unwrap(), Some(2));
        stop_tx.send(true).unwrap();
        let ready = wait_readable(&server, far, timer.as_mut(), stop.as_mut()).await;
        assert!(!ready.unwrap(), "shut down");
    }

    #[test]
    fn the_answers_buffer_is_reused_empty_once_written() {
        let mut written = Vec::with_capacity(4096);
        written.extend_from_slice(&[0, 3, 1, 2, 3]);
        give_back(written);
        let replies = Replies::new();
        assert!(replies.framed.is_empty(), "nothing of the last answers");
        assert!(replies.framed.capacity() >= 4096, "no new allocation");
        assert_eq!(
            Replies::new().framed.capacity(),
            0,
            "one connection at a time holds it"
        );
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
