//! TCP and TLS served by event loops of Heron's own, one per worker
//! thread: each has its own epoll set (mio) and its own listening socket
//! per address (`SO_REUSEPORT`, so the kernel shares the accepts out),
//! and answers on the thread that read the query: read what a socket
//! holds, answer every whole message in it through the processor,
//! write the answers in one write. No task is woken and no other thread
//! is involved per query (the async runtime's cross-thread wake-up and
//! switch-in per readiness was the gap to NSD, docs/benchmarks/tcp.md).
//!
//! TLS is rustls's `ServerConnection` driven from the same loop, with the
//! listener's rustls settings (session resumption as they say). Limits
//! and timeouts are those of the runtime's connections: the shared
//! [`ConnectionLimiter`], the idle and message timeouts, a write that
//! takes longer than the idle timeout, [`QUEUED_ANSWERS_CAP`], the accept
//! back-off; the framing is the same code ([`take_input`]).
//!
//! Zone transfers and UPDATE answers stay on the runtime: the connection
//! hands them to a task ([`pipe`]) that makes them as the runtime's
//! connections do and writes them into a pipe the loop empties into the
//! socket; the connection reads nothing more until they are sent.

mod conn;
mod pipe;
mod shed;
mod timers;

use conn::*;
use pipe::*;
use shed::ShedBoard;
use timers::*;

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use mio::net::{TcpListener as MioListener, TcpStream};
use mio::{Events, Interest, Poll as MioPoll, Token};
use rustls::ServerConnection;

use super::limits::ACCEPT_BACKOFF;
use super::*;

/// What the loops serve: plain DNS over TCP, or DNS over TLS.
pub struct Listen {
    pub addr: SocketAddr,
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

/// The running loops; [`Loops::stop`] ends them.
pub struct Loops {
    pub threads: Vec<std::thread::JoinHandle<()>>,
    wakers: Vec<Arc<mio::Waker>>,
    stop: Arc<AtomicBool>,
    /// Each loop's returns from epoll_wait (one counter per loop, so the
    /// loops share no cache line; a loop that spun would show here).
    wakes: Vec<Arc<AtomicU64>>,
    /// The addresses bound (a port 0 asked becomes the one given).
    pub bound: Vec<SocketAddr>,
}

impl Loops {
    /// Tells every loop to close its connections and end.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        for waker in &self.wakers {
            let _ = waker.wake();
        }
    }

    /// How many times the loops have come back from waiting for events,
    /// all loops together: about once per query at low load, none while
    /// idle.
    pub fn wakes(&self) -> u64 {
        self.wakes.iter().map(|w| w.load(Ordering::Relaxed)).sum()
    }
}

/// Starts `workers` loops, each listening on every address of `listen`.
/// Called on the runtime, which transfers and UPDATE answers are handed to.
pub fn start(
    listen: &[Listen],
    workers: usize,
    service: Arc<Service>,
    limiter: Arc<ConnectionLimiter>,
) -> io::Result<Loops> {
    let runtime = tokio::runtime::Handle::current();
    let stop = Arc::new(AtomicBool::new(false));
    let sockets = bind_all(listen, workers.max(1))?;
    let bound = sockets[0]
        .iter()
        .map(|l| l.local_addr())
        .collect::<io::Result<_>>()?;
    let board = ShedBoard::new(sockets.len());
    let mut workers = Vec::new();
    for (i, listeners) in sockets.into_iter().enumerate() {
        let listeners = listeners
            .into_iter()
            .zip(listen)
            .map(|(l, spec)| (l, spec.tls.clone()));
        let limits = (limiter.clone(), board.clone(), i);
        workers.push(Worker::new(
            listeners.collect(),
            &service,
            limits,
            runtime.clone(),
        )?);
    }
    let wakers: Vec<_> = workers.iter().map(|w| w.cx.waker.clone()).collect();
    board.set_wakers(wakers.clone());
    let (mut threads, mut wakes) = (Vec::new(), Vec::new());
    for (i, worker) in workers.into_iter().enumerate() {
        let woken = Arc::new(AtomicU64::new(0));
        wakes.push(woken.clone());
        let stop = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("heron-tcp-{i}"))
            .spawn(move || worker.run(&stop, &woken))?;
        threads.push(thread);
    }
    tracing::info!(
        "TCP and TLS on {} event loop(s) of their own",
        threads.len()
    );
    Ok(Loops {
        threads,
        wakers,
        stop,
        wakes,
        bound,
    })
}

/// One listening socket per worker per address, all on the same port
/// (the first one's, when port 0 was asked for).
fn bind_all(listen: &[Listen], workers: usize) -> io::Result<Vec<Vec<std::net::TcpListener>>> {
    let mut sockets: Vec<Vec<std::net::TcpListener>> = (0..workers).map(|_| Vec::new()).collect();
    for spec in listen {
        // The address in the error: a start that fails says which one.
        let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", spec.addr));
        let first = bind_shared(spec.addr).map_err(named)?;
        let addr = first.local_addr()?;
        sockets[0].push(first);
        for worker in sockets.iter_mut().skip(1) {
            worker.push(bind_shared(addr)?);
        }
    }
    Ok(sockets)
}

/// A listening socket other workers bind too (`SO_REUSEPORT`), with
/// `TCP_NODELAY` for the sockets it accepts.
pub fn bind_shared(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    // Copied to every accepted socket (see `nodelay_for_accepted`).
    let _ = socket.set_nodelay(true);
    Ok(socket.into())
}

/// What every connection of a loop reaches while it is driven.
struct LoopContext {
    shared: Arc<Shared>,
    runtime: tokio::runtime::Handle,
    /// Wakes this loop from another thread (pipes).
    waker: Arc<mio::Waker>,
    /// The time of this wake-up.
    now: Instant,
}

impl LoopContext {
    /// The idle and message timeouts.
    fn timeouts(&self) -> (Duration, Duration) {
        (self.shared.idle, self.shared.message_timeout)
    }

    /// Starts a task on the runtime that sends `transfers` (and UPDATE
    /// answers) into a pipe this loop writes out.
    fn hand_to_runtime(&self, transfers: Vec<Later>, peer: SocketAddr) -> Arc<Pipe> {
        let pipe = Pipe::new(self.waker.clone());
        let (task_pipe, shared) = (pipe.clone(), self.shared.clone());
        self.runtime.spawn(async move {
            let mut writer = PipeWriter(task_pipe.clone());
            let sent = send_transfers(&mut writer, transfers, peer, &shared).await;
            if let Err(e) = &sent {
                tracing::debug!("TCP connection from {peer}: transfer not sent: {e}");
            }
            task_pipe.finish(sent.is_ok());
        });
        pipe
    }
}

const WAKER: Token = Token(usize::MAX);
/// Connections accepted per listener before the others get a turn.
const ACCEPTS_PER_ROUND: usize = 64;
/// Clients tried, the largest first, for a connection to close at the
/// total limit: each try is a pass over the loop's connections.
const LARGEST_TRIED: usize = 4;

/// A listening socket of one loop.
struct Listener {
    socket: MioListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    failures: AcceptFailures,
    /// After a failed accept, none is tried before this.
    paused_until: Option<Instant>,
    /// Connections may be waiting (edge-triggered, as the connections).
    may_accept: bool,
}

/// A connection's place in the loop. The connection is boxed so that
/// the places a peak of connections left behind are small.
struct Entry {
    generation: u32,
    conn: Option<Box<Conn>>,
}

struct Worker {
    poll: MioPoll,
    listeners: Vec<Listener>,
    entries: Vec<Entry>,
    free: Vec<usize>,
    timers: Timers,
    /// Connections to drive again without an event (their turn ended
    /// with more to read).
    again: Vec<Key>,
    /// Connections with a pipe from the runtime, driven on a wake-up.
    piped: Vec<Key>,
    /// This loop's connections per client network, those the per-client
    /// limit counts (the limiter's key): kept as they open and close, so
    /// that the client holding the most is read off a table of clients at
    /// the total limit, not found by hashing every connection again. With
    /// 5,000 clients holding one each, that cost every connection refused
    /// at the limit 400 µs of the loop (black-box finding DD-1).
    held: HashMap<IpAddr, usize>,
    limiter: Arc<ConnectionLimiter>,
    /// Requests between the loops to make room at the total limit, and
    /// this loop's place among them.
    board: Arc<ShedBoard>,
    index: usize,
    cx: LoopContext,
}

impl Worker {
    /// `limits`: the server's limiter, the loops' board and this loop's
    /// place on it.
    fn new(
        listeners: Vec<(std::net::TcpListener, Option<Arc<rustls::ServerConfig>>)>,
        service: &Arc<Service>,
        (limiter, board, index): (Arc<ConnectionLimiter>, Arc<ShedBoard>, usize),
        runtime: tokio::runtime::Handle,
    ) -> io::Result<Worker> {
        let poll = MioPoll::new()?;
        let waker = Arc::new(mio::Waker::new(poll.registry(), WAKER)?);
        let mut ours = Vec::new();
        for (i, (socket, tls)) in listeners.into_iter().enumerate() {
            let mut socket = MioListener::from_std(socket);
            poll.registry()
                .register(&mut socket, Token(i), Interest::READABLE)?;
            ours.push(Listener {
                socket,
                tls,
                failures: AcceptFailures::default(),
                paused_until: None,
                may_accept: true,
            });
        }
        let shared = Arc::new(Shared {
            service: service.clone(),
            idle: limiter.limits.idle_timeout,
            message_timeout: limiter.limits.message_timeout,
            nodelay_inherited: true,
        });
        Ok(Worker {
            poll,
            listeners: ours,
            entries: Vec::new(),
            free: Vec::new(),
            timers: Timers::default(),
            again: Vec::new(),
            piped: Vec::new(),
            held: HashMap::new(),
            limiter,
            board,
            index,
            cx: LoopContext {
                shared,
                runtime,
                waker,
                now: Instant::now(),
            },
        })
    }

    fn run(mut self, stop: &AtomicBool, wakes: &AtomicU64) {
        // Tasks and the processor may look for the runtime.
        let runtime = self.cx.runtime.clone();
        let _entered = runtime.enter();
        let mut events = Events::with_capacity(1024);
        while !stop.load(Ordering::Relaxed) {
            let wait = self.wait_for();
            if let Err(e) = self.poll.poll(&mut events, wait)
                && e.kind() != io::ErrorKind::Interrupted
            {
                tracing::error!("TCP event loop: {e}");
                break;
            }
            wakes.fetch_add(1, Ordering::Relaxed);
            self.cx.now = Instant::now();
            self.handle(&events);
            self.accept_all();
            self.drive_again();
            self.expire();
        }
        self.close_all();
    }

    /// How long the loop may sleep: until the next deadline or the end
    /// of an accept pause; not at all when connections are left to drive.
    fn wait_for(&self) -> Option<Duration> {
        let accepting = self.listeners.iter().filter(|l| l.may_accept);
        if !self.again.is_empty() || accepting.clone().any(|l| l.paused_until.is_none()) {
            return Some(Duration::ZERO);
        }
        let paused = accepting.filter_map(|l| l.paused_until);
        let next = paused.chain(self.timers.next()).min()?;
        // Rounded up: a wake a little early would find nothing due.
        Some(next.saturating_duration_since(Instant::now()) + Duration::from_millis(1))
    }

    fn handle(&mut self, events: &Events) {
        for event in events {
            match event.token() {
                WAKER => {
                    self.drive_piped();
                    self.answer_shed_requests();
                }
                Token(i) if i < self.listeners.len() => self.listeners[i].may_accept = true,
                Token(t) => {
                    let Some(key) = self.key_of(t - self.listeners.len()) else {
                        continue;
                    };
                    if let Some(conn) = self.conn(key) {
                        conn.read_closed |= event.is_read_closed() || event.is_error();
                        conn.may_read |= event.is_readable() || conn.read_closed;
                    }
                    self.drive(key);
                }
            }
        }
    }

    fn key_of(&self, slot: usize) -> Option<Key> {
        let entry = self.entries.get(slot)?;
        entry.conn.as_ref()?;
        Some(Key {
            slot,
            generation: entry.generation,
        })
    }

    fn conn(&mut self, key: Key) -> Option<&mut Conn> {
        let entry = self.entries.get_mut(key.slot)?;
        if entry.generation != key.generation {
            return None;
        }
        entry.conn.as_deref_mut()
    }

    /// Drives one connection and files it by what it waits for.
    fn drive(&mut self, key: Key) {
        let cx = &self.cx;
        let Some(entry) = self.entries.get_mut(key.slot) else {
            return;
        };
        let Some(conn) = entry
            .conn
            .as_mut()
            .filter(|_| entry.generation == key.generation)
        else {
            return;
        };
        let had_pipe = conn.later.is_some();
        let stats = &cx.shared.service.stats;
        match conn.drive(cx) {
            Ok(Next::Wait) => {}
            Ok(Next::Again) => self.again.push(key),
            Ok(Next::Close) => {
                stats.with_thread_cells(|c| c.closed(Closed::Client));
                return self.close(key, Ok(()));
            }
            Err(e) => {
                let why = conn.failed(&e);
                stats.with_thread_cells(|c| c.closed(why));
                return self.close(key, Err(e));
            }
        }
        if !had_pipe && conn.later.is_some() {
            self.piped.push(key);
        }
        self.timers.arm(key, &mut conn.deadline);
    }

    fn drive_again(&mut self) {
        for key in std::mem::take(&mut self.again) {
            self.drive(key);
        }
    }

    /// A pipe has news: drives the connections that have one.
    fn drive_piped(&mut self) {
        for key in std::mem::take(&mut self.piped) {
            if self.conn(key).is_some_and(|c| c.later.is_some()) {
                self.drive(key);
                if self.conn(key).is_some_and(|c| c.later.is_some()) {
                    self.piped.push(key);
                }
            }
        }
    }

    fn close(&mut self, key: Key, ended: io::Result<()>) {
        let entry = &mut self.entries[key.slot];
        let Some(mut conn) = entry.conn.take() else {
            return;
        };
        entry.generation = entry.generation.wrapping_add(1);
        if let Some(client) = conn.counted_client()
            && let Some(held) = self.held.get_mut(&client)
        {
            *held -= 1;
            if *held == 0 {
                self.held.remove(&client);
            }
        }
        let _ = self.poll.registry().deregister(&mut conn.stream);
        log_end(conn.peer, ended);
        (*conn).close();
        self.free.push(key.slot);
    }

    /// Closes the connections whose deadline has passed.
    fn expire(&mut self) {
        let now = self.cx.now;
        while let Some((at, key)) = self.timers.pop_due(now) {
            let Some(entry) = self.entries.get_mut(key.slot) else {
                continue;
            };
            let Some(conn) = entry
                .conn
                .as_mut()
                .filter(|_| entry.generation == key.generation)
            else {
                continue;
            };
            if self.timers.fire(at, key, &mut conn.deadline, now) {
                if conn.still_taking(&self.cx) {
                    // A slow reader took some of its answers: more time.
                    self.timers.arm(key, &mut conn.deadline);
                    self.again.push(key);
                    continue;
                }
                // Idle, a message or a write not done in time.
                let why = conn.timed_out();
                let stats = &self.cx.shared.service.stats;
                stats.with_thread_cells(|c| c.closed(why));
                self.close(key, Ok(()));
            }
        }
        self.timers.shrink();
    }

    /// At the total limit, makes room for a new connection by closing the
    /// one of this loop idle the longest (between messages, nothing to
    /// write, no handshake under way), as NSD sheds idle connections and
    /// RFC 7766 6.2.3 suggests: connections kept open by a query now and
    /// then took every slot, and every new client was refused for as long
    /// as they liked (black-box finding AZ-1). False: none is idle here.
    fn shed_longest_idle(&mut self) -> bool {
        let idle = (self.entries.iter().enumerate())
            .filter_map(|(slot, e)| Some((slot, e.generation, e.conn.as_ref()?.idle_since()?)));
        let Some((slot, generation, _)) = idle.min_by_key(|&(.., since)| since) else {
            return false;
        };
        let stats = &self.cx.shared.service.stats;
        stats.with_thread_cells(|c| c.shed());
        self.close(Key { slot, generation }, Ok(()));
        true
    }

    /// Closes an idle connection for each newcomer another loop took in
    /// over the limit, or passes the request on (see `shed.rs`).
    fn answer_shed_requests(&mut self) {
        let board = self.board.clone();
        board.answer(self.index, || self.shed_longest_idle());
    }

    /// At the total limit with nothing to close on this loop: the newcomer
    /// `ip` taken in over the limit while the other loops are asked to
    /// close an idle connection (see `shed.rs`), if a loan is free.
    fn admit_lent(&mut self, ip: IpAddr) -> Result<Slot, Limit> {
        if !self.board.try_lend(self.index) {
            return Err(Limit::Total);
        }
        match self.limiter.admit_lent(ip, self.board.lend_limit()) {
            Ok(slot) => {
                self.board.ask_after(self.index);
                Ok(slot)
            }
            Err(limit) => {
                self.board.unlend();
                Err(limit)
            }
        }
    }

    /// At the total limit with no connection idle: closes the one open
    /// the longest of the client holding the most here (every connection
    /// it holds counts, from [`Worker::held`]), if the new client `ip`
    /// would still hold fewer (its fair share, the rule of the metrics
    /// endpoint). Clients that keep a message always begun are never idle,
    /// and took every slot for as long as they kept on (black-box finding
    /// CC-1). A transfer under way is never cut.
    fn shed_from_the_largest(&mut self, ip: IpAddr) -> bool {
        let own = (self.held.get(&self.limiter.client(ip)).copied()).unwrap_or(0);
        let mut passed: Vec<IpAddr> = Vec::new();
        // A client whose connections here are all transfers under way has
        // nothing to close: the next largest is tried (black-box finding
        // DG-1: the fair share stopped there), a few at most.
        for _ in 0..LARGEST_TRIED {
            let left = self.held.iter().filter(|(c, _)| !passed.contains(c));
            let Some((&largest, &most)) = left.max_by_key(|&(_, n)| *n) else {
                return false;
            };
            if own + 1 >= most {
                return false;
            }
            if let Some(key) = self.oldest_sheddable_of(largest) {
                let stats = &self.cx.shared.service.stats;
                stats.with_thread_cells(|c| c.shed_busy());
                self.close(key, Ok(()));
                return true;
            }
            passed.push(largest);
        }
        false
    }

    /// The connection of `client` open the longest that may be closed to
    /// make room (not a transfer or UPDATE under way).
    fn oldest_sheddable_of(&self, client: IpAddr) -> Option<Key> {
        let sheddable = (self.entries.iter().enumerate()).filter_map(|(slot, e)| {
            let conn = e
                .conn
                .as_ref()
                .filter(|c| c.counted_client() == Some(client))?;
            Some((slot, e.generation, conn.sheddable_since()?))
        });
        let (slot, generation, _) = sheddable.min_by_key(|&(.., opened)| opened)?;
        Some(Key { slot, generation })
    }

    fn close_all(&mut self) {
        for slot in 0..self.entries.len() {
            let generation = self.entries[slot].generation;
            self.close(Key { slot, generation }, Ok(()));
        }
    }

    fn accept_all(&mut self) {
        for i in 0..self.listeners.len() {
            let listener = &mut self.listeners[i];
            if !listener.may_accept || listener.paused_until.is_some_and(|t| t > self.cx.now) {
                continue;
            }
            listener.paused_until = None;
            for _ in 0..ACCEPTS_PER_ROUND {
                match self.listeners[i].socket.accept() {
                    Ok((stream, peer)) => self.admit(i, stream, peer),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        self.listeners[i].may_accept = false;
                        break;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        // Out of descriptors and the like: the connection
                        // stays queued; try again after a pause.
                        let listener = &mut self.listeners[i];
                        listener.failures.failed(&e);
                        listener.paused_until = Some(self.cx.now + ACCEPT_BACKOFF);
                        break;
                    }
                }
            }
        }
    }

    /// Takes an accepted connection in, if the limits allow.
    fn admit(&mut self, listener: usize, mut stream: TcpStream, peer: SocketAddr) {
        let stats = &self.cx.shared.service.stats;
        if self.cx.shared.service.processor.blackholes(peer.ip()) {
            stats.with_thread_cells(|c| c.refused(Limit::Blackhole));
            return; // `blackhole`: closed unanswered
        }
        let admitted = match self.limiter.admit_or_why(peer.ip()) {
            Err(Limit::Total)
                if self.shed_longest_idle() || self.shed_from_the_largest(peer.ip()) =>
            {
                self.limiter.admit_or_why(peer.ip())
            }
            Err(Limit::Total) => self.admit_lent(peer.ip()),
            admitted => admitted,
        };
        let stats = &self.cx.shared.service.stats;
        let slot = match admitted {
            Ok(slot) => slot,
            Err(limit) => {
                stats.with_thread_cells(|c| c.refused(limit));
                super::limits::log_refused(peer, limit);
                return;
            }
        };
        let tls = match &self.listeners[listener].tls {
            None => None,
            Some(config) => match ServerConnection::new(config.clone()) {
                Ok(tls) => Some(Box::new(tls)),
                Err(e) => return tracing::warn!("TLS connection from {peer} refused: {e}"),
            },
        };
        let via = if tls.is_some() { Via::Tls } else { Via::Tcp };
        stats.with_thread_cells(|c| c.accepted(via));
        let slot_index = self.free.pop().unwrap_or_else(|| {
            self.entries.push(Entry {
                generation: 0,
                conn: None,
            });
            self.entries.len() - 1
        });
        let token = Token(self.listeners.len() + slot_index);
        let interest = Interest::READABLE | Interest::WRITABLE;
        if let Err(e) = self.poll.registry().register(&mut stream, token, interest) {
            self.free.push(slot_index);
            return tracing::warn!("TCP connection from {peer} dropped: {e}");
        }
        let entry = &mut self.entries[slot_index];
        entry.conn = Some(Box::new(Conn::new(
            stream,
            peer,
            tls,
            slot,
            (self.cx.now, self.cx.shared.idle),
        )));
        let key = Key {
            slot: slot_index,
            generation: entry.generation,
        };
        let conn = entry.conn.as_mut().expect("just put");
        if let Some(client) = conn.counted_client() {
            *self.held.entry(client).or_default() += 1;
        }
        conn.deadline.at = Some(self.cx.now + self.cx.shared.idle);
        self.timers.arm(key, &mut conn.deadline);
    }
}

#[cfg(test)]
mod tests;
