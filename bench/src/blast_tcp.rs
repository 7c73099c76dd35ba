//! `blast` over TCP: one thread drives many connections (epoll through
//! `mio`), each with up to `in_flight` pipelined queries. At a fixed rate
//! it is open loop as far as TCP lets it be: queries go out on schedule
//! to the next connection with a free slot, and those due while every
//! slot is taken wait for one (the offered rate achieved shows it, and
//! the time every slot was taken says how long the server held them all);
//! with rate 0 every free slot is refilled at once. Queries due on one
//! connection in one turn go out in one write. A query unanswered when
//! the drain ends is lost. Every run is bounded by its duration and
//! drain; the connections can be opened once and loaded several times
//! ([`TcpClients`]).
//!
//! The cost per query does not grow with the connections: the
//! connections with a free slot wait in a queue, so no turn walks them
//! all, and while every slot is taken the generator sleeps in `epoll`
//! instead of spinning (its CPU time then shows how much of its core the
//! load needed).

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use crate::blast::{BlastResult, QuerySet};
use crate::stats::Histogram;

#[derive(Clone, Debug)]
pub struct TcpBlastOpts {
    pub target: SocketAddr,
    /// Offered queries per second; 0 = keep every slot full.
    pub rate: f64,
    pub connections: usize,
    /// Queries outstanding at most on each connection.
    pub in_flight: usize,
    pub duration: Duration,
    /// After sending stops, wait this long at most for the last answers.
    pub drain: Duration,
    /// Longest wait for all the connections to open.
    pub connect_timeout: Duration,
}

impl TcpBlastOpts {
    /// The load part of the options.
    pub fn load(&self) -> TcpLoad {
        TcpLoad {
            rate: self.rate,
            in_flight: self.in_flight,
            duration: self.duration,
            drain: self.drain,
            count_from: Duration::ZERO,
        }
    }
}

/// One load over connections already open.
#[derive(Clone, Copy, Debug)]
pub struct TcpLoad {
    /// Offered queries per second; 0 = keep every slot full.
    pub rate: f64,
    /// Queries outstanding at most on each connection.
    pub in_flight: usize,
    pub duration: Duration,
    /// After sending stops, wait this long at most for the last answers.
    pub drain: Duration,
    /// Answers received before this point of the sending phase are left
    /// out of `answered_sending` (the pipelines filling up).
    pub count_from: Duration,
}

/// Most queries outstanding on one connection (the low 12 bits of the
/// DNS ID are the slot, the high 4 tell the loads apart).
pub const MAX_IN_FLIGHT: usize = 1 << SLOT_BITS;
const SLOT_BITS: u32 = 12;
const SLOT_MASK: u16 = (1 << SLOT_BITS) - 1;
/// Connects under way at once while the connections open, at most: one
/// whose SYN waits for a retransmission does not hold up the others. It
/// starts at [`OPENING_FIRST`], grows by one while connects complete and
/// halves whenever the kernel drops a connection for a full listen queue
/// (`ListenOverflows`; Knot's queue overflowed 6,425 times while 64 at
/// once opened 7,612 of 10,000 connections in 60 s), so a server with a
/// short queue is connected to about one at a time.
pub const OPENING_AT_ONCE: usize = 64;
const OPENING_FIRST: usize = 8;
/// A connect not through after this long had its SYN dropped (a full
/// listen queue: Knot's holds 10) and waits for the kernel's
/// retransmission, 1 s and then longer each time; it is given up and
/// begun afresh instead.
const CONNECT_RETRY: Duration = Duration::from_millis(200);
/// The longest sleep in `epoll` while waiting (the end of the load is
/// checked this often).
const MAX_WAIT: Duration = Duration::from_millis(1);
/// Bytes read from a connection at a time.
const READ_CHUNK: usize = 16 * 1024;

/// One connection: send times per slot (the slot is the DNS ID's low
/// bits), its free slots, the bytes not yet written and the start of an
/// answer not yet whole.
struct Conn {
    stream: TcpStream,
    /// Send time (ns since the load's start, +1) per slot; 0 = free.
    sent_at: Vec<u64>,
    /// Slots free, taken from the end.
    free: Vec<u16>,
    /// In the queue of connections with a free slot.
    queued: bool,
    out: Vec<u8>,
    input: Vec<u8>,
    closed: bool,
}

impl Conn {
    fn new(stream: TcpStream) -> Conn {
        Conn {
            stream,
            sent_at: Vec::new(),
            free: Vec::new(),
            queued: false,
            out: Vec::new(),
            input: Vec::new(),
            closed: false,
        }
    }

    /// Every slot free for a load with `slots` of them. Bytes still to
    /// write or to read from the last load are kept: cutting them would
    /// break the framing; their answers match no slot of the new load.
    fn reset(&mut self, slots: usize) {
        self.sent_at.clear();
        self.sent_at.resize(slots, 0);
        self.free.clear();
        self.free.extend((0..slots as u16).rev());
        self.queued = false;
    }

    fn busy(&self) -> usize {
        self.sent_at.len() - self.free.len()
    }

    /// Writes what is pending until the socket takes no more.
    fn flush(&mut self) -> io::Result<()> {
        while !self.out.is_empty() {
            match self.stream.write(&self.out) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => drop(self.out.drain(..n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Marks it closed; the queries it still had outstanding (now lost).
    fn close(&mut self) -> u64 {
        self.closed = true;
        let lost = self.busy() as u64;
        self.sent_at.clear();
        self.free.clear();
        lost
    }
}

/// How the opening of the connections went.
#[derive(Clone, Debug, Default)]
pub struct Opened {
    pub seconds: f64,
    /// Connects that failed and were tried again.
    pub failed: u64,
    /// Connections the kernel dropped meanwhile because a listen queue
    /// was full (`ListenOverflows`, the whole machine's; None: unknown).
    pub listen_overflows: Option<u64>,
}

/// Connections to one server, opened once, for any number of loads.
pub struct TcpClients {
    pub opened: Opened,
    poll: Poll,
    events: Events,
    conns: Vec<Conn>,
    /// Connections with a free slot, each at most once.
    ready: VecDeque<usize>,
    /// Loads run so far (their DNS IDs differ from the last's).
    loads: u16,
    read_buf: Vec<u8>,
}

/// Runs one bounded load over TCP on connections of its own.
pub fn blast_tcp(queries: &QuerySet, opts: &TcpBlastOpts) -> io::Result<BlastResult> {
    let mut clients = TcpClients::open(opts.target, opts.connections, opts.connect_timeout)?;
    clients.run(queries, &opts.load())
}

impl TcpClients {
    /// Opens `connections` to `target`, [`OPENING_AT_ONCE`] under way
    /// at a time, within `timeout`; a connect that fails is tried again.
    pub fn open(
        target: SocketAddr,
        connections: usize,
        timeout: Duration,
    ) -> io::Result<TcpClients> {
        let poll = Poll::new()?;
        let (conns, opened) = open_all(&poll, target, connections, timeout)?;
        if conns.is_empty() {
            return Err(io::Error::other("no connections"));
        }
        Ok(TcpClients {
            opened,
            poll,
            events: Events::with_capacity(1024),
            conns,
            ready: VecDeque::new(),
            loads: 0,
            read_buf: vec![0; READ_CHUNK],
        })
    }

    /// Connections still open.
    pub fn open_count(&self) -> usize {
        self.conns.iter().filter(|c| !c.closed).count()
    }

    /// Runs one bounded load.
    pub fn run(&mut self, queries: &QuerySet, load: &TcpLoad) -> io::Result<BlastResult> {
        assert!(!queries.is_empty());
        let slots = load.in_flight.clamp(1, MAX_IN_FLIGHT);
        self.loads = self.loads.wrapping_add(1);
        let tag = (self.loads & 0xF) << SLOT_BITS;
        self.ready.clear();
        for (i, c) in self.conns.iter_mut().enumerate() {
            if !c.closed {
                c.reset(slots);
                c.queued = true;
                self.ready.push_back(i);
            }
        }
        let mut hist = Histogram::default();
        let mut r = BlastResult {
            target_rate: load.rate,
            ..BlastResult::default()
        };
        let start = Instant::now();
        let send_ns = load.duration.as_nanos() as u64;
        let end_ns = send_ns + load.drain.as_nanos() as u64;
        let count_ns = (load.count_from.as_nanos() as u64).min(send_ns);
        let mut qi = 0usize;
        let mut outstanding = 0u64;
        let mut touched: Vec<usize> = Vec::new();
        let mut held_ns = 0u64;
        // Bounded: the loop ends at `end_ns` at the latest.
        loop {
            let now = start.elapsed().as_nanos() as u64;
            let sending = now < send_ns;
            if !sending && (outstanding == 0 || now >= end_ns) {
                break;
            }
            let mut due = match (sending, load.rate > 0.0) {
                (false, _) => 0,
                (true, true) => ((now as f64 * load.rate / 1e9) as u64).saturating_sub(r.sent),
                (true, false) => u64::MAX,
            };
            while due > 0 {
                let Some(i) = self.ready.pop_front() else {
                    break;
                };
                let c = &mut self.conns[i];
                let Some(slot) = c.free.pop().filter(|_| !c.closed) else {
                    c.queued = false;
                    continue;
                };
                let q = queries.get(qi);
                qi = (qi + 1) % queries.len();
                c.out.extend_from_slice(&(q.len() as u16).to_be_bytes());
                let at = c.out.len();
                c.out.extend_from_slice(q);
                c.out[at..at + 2].copy_from_slice(&(tag | slot).to_be_bytes());
                c.sent_at[slot as usize] = now + 1;
                touched.push(i);
                r.sent += 1;
                outstanding += 1;
                due -= 1;
                // At a rate each query goes to the next connection; in a
                // closed loop each connection is filled in turn.
                match (c.free.is_empty(), load.rate > 0.0) {
                    (true, _) => c.queued = false,
                    (false, true) => self.ready.push_back(i),
                    (false, false) => self.ready.push_front(i),
                }
            }
            // Queries due and no slot free: the server holds them all.
            let held = due > 0 && self.ready.is_empty();
            touched.sort_unstable();
            touched.dedup();
            for &i in &touched {
                if self.conns[i].flush().is_err() {
                    outstanding -= self.conns[i].close();
                }
            }
            touched.clear();
            // Sleep only when nothing can be sent before an answer comes:
            // a paced load keeps its schedule to the microsecond.
            let wait = match (sending, held) {
                (true, false) => Duration::ZERO,
                (true, true) => MAX_WAIT.min(Duration::from_nanos(send_ns - now)),
                (false, _) => MAX_WAIT.min(Duration::from_nanos(end_ns.saturating_sub(now))),
            };
            self.poll.poll(&mut self.events, Some(wait))?;
            let t = start.elapsed().as_nanos() as u64 + 1;
            if held {
                held_ns += t.min(send_ns).saturating_sub(now);
            }
            for ev in self.events.iter() {
                let i = ev.token().0;
                let c = &mut self.conns[i];
                if c.closed {
                    continue;
                }
                if ev.is_writable() && c.flush().is_err() {
                    outstanding -= c.close();
                    continue;
                }
                if ev.is_readable() {
                    let answered = read_answers(c, &mut self.read_buf, tag, t, &mut hist, &mut r);
                    outstanding -= answered;
                    if (count_ns..=send_ns).contains(&t) {
                        r.answered_sending += answered;
                    }
                    if c.closed {
                        outstanding -= c.close();
                    } else if answered > 0 && !c.queued {
                        c.queued = true;
                        self.ready.push_back(i);
                    }
                }
            }
        }
        r.duration_s = send_ns as f64 / 1e9;
        r.lost = r.sent - r.answered;
        r.offered_qps = r.sent as f64 / r.duration_s.max(1e-9);
        r.answered_qps = r.answered as f64 / r.duration_s.max(1e-9);
        r.loss_pct = match r.sent {
            0 => 0.0,
            sent => r.lost as f64 * 100.0 / sent as f64,
        };
        r.slots_taken_s = held_ns as f64 / 1e9;
        r.answered_sending_s = (send_ns - count_ns) as f64 / 1e9;
        r.lat_avg_us = hist.mean() / 1e3;
        r.lat_p50_us = hist.percentile(50.0) as f64 / 1e3;
        r.lat_p99_us = hist.percentile(99.0) as f64 / 1e3;
        r.lat_p999_us = hist.percentile(99.9) as f64 / 1e3;
        r.lat_max_us = hist.max() as f64 / 1e3;
        Ok(r)
    }
}

/// Opens `n` connections to `target` within `timeout`, at most
/// [`OPENING_AT_ONCE`] under way at a time, each registered with `poll`
/// under its index. A failed connect is tried again; the error on
/// timeout says how far it got, what failed and how often the kernel's
/// listen queues overflowed meanwhile (a server accepting slower than
/// clients connect).
fn open_all(
    poll: &Poll,
    target: SocketAddr,
    n: usize,
    timeout: Duration,
) -> io::Result<(Vec<Conn>, Opened)> {
    let started = Instant::now();
    let deadline = started + timeout;
    let overflows_before = listen_overflows();
    let overflows = || match (overflows_before, listen_overflows()) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    let mut opener = Poll::new()?;
    let mut events = Events::with_capacity(OPENING_AT_ONCE);
    let mut opening: Vec<Option<(TcpStream, Instant)>> =
        (0..OPENING_AT_ONCE).map(|_| None).collect();
    let mut conns = Vec::with_capacity(n);
    let (mut failed, mut last_error) = (0u64, None::<io::Error>);
    let (mut at_once, mut overflows_seen) = (OPENING_FIRST, overflows_before);
    while conns.len() < n {
        let now_seen = listen_overflows();
        if now_seen > overflows_seen {
            at_once = (at_once / 2).max(1);
            overflows_seen = now_seen;
        }
        let under_way = opening.iter().filter(|o| o.is_some()).count();
        let mut to_start = (n - conns.len() - under_way).min(at_once.saturating_sub(under_way));
        for (k, o) in opening.iter_mut().enumerate() {
            if to_start == 0 {
                break;
            }
            if o.is_some() {
                continue;
            }
            to_start -= 1;
            match start_connect(&opener, target, k) {
                Ok(stream) => *o = Some((stream, Instant::now())),
                Err(e) => (failed, last_error) = (failed + 1, Some(e)),
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let overflows = overflows().map_or("unknown".into(), |n| n.to_string());
            let last = last_error.map_or("none".into(), |e| e.to_string());
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "{} of {n} connections opened in time; {failed} connect attempts failed \
                     (last: {last}); listen queue overflows meanwhile: {overflows}",
                    conns.len()
                ),
            ));
        }
        opener.poll(&mut events, Some(left.min(Duration::from_millis(100))))?;
        for ev in events.iter() {
            let k = ev.token().0;
            let Some((mut stream, began)) = opening[k].take() else {
                continue;
            };
            match connected(&stream) {
                Ok(true) => {
                    opener.registry().deregister(&mut stream)?;
                    stream.set_nodelay(true)?;
                    let token = Token(conns.len());
                    poll.registry().register(
                        &mut stream,
                        token,
                        Interest::READABLE | Interest::WRITABLE,
                    )?;
                    conns.push(Conn::new(stream));
                    at_once = (at_once + 1).min(OPENING_AT_ONCE);
                }
                Ok(false) => opening[k] = Some((stream, began)),
                Err(e) => {
                    let _ = opener.registry().deregister(&mut stream);
                    (failed, last_error) = (failed + 1, Some(e));
                }
            }
        }
        for o in opening.iter_mut() {
            if o.as_ref()
                .is_some_and(|(_, began)| began.elapsed() >= CONNECT_RETRY)
                && let Some((mut stream, _)) = o.take()
            {
                let _ = opener.registry().deregister(&mut stream);
                let e = io::Error::new(io::ErrorKind::TimedOut, "connect not through in 200 ms");
                (failed, last_error) = (failed + 1, Some(e));
            }
        }
    }
    let opened = Opened {
        seconds: started.elapsed().as_secs_f64(),
        failed,
        listen_overflows: overflows(),
    };
    Ok((conns, opened))
}

fn start_connect(opener: &Poll, target: SocketAddr, k: usize) -> io::Result<TcpStream> {
    let mut stream = TcpStream::connect(target)?;
    opener
        .registry()
        .register(&mut stream, Token(k), Interest::WRITABLE)?;
    Ok(stream)
}

/// Whether a connect under way has finished (false: not yet), or why it
/// failed.
fn connected(stream: &TcpStream) -> io::Result<bool> {
    if let Some(e) = stream.take_error()? {
        return Err(e);
    }
    match stream.peer_addr() {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
        Err(e) => Err(e),
    }
}

/// The kernel's count of connections dropped because a listen queue was
/// full (`TcpExt: ListenOverflows` in /proc/net/netstat), if readable.
pub fn listen_overflows() -> Option<u64> {
    netstat_field(
        &std::fs::read_to_string("/proc/net/netstat").ok()?,
        "TcpExt",
        "ListenOverflows",
    )
}

/// A field of /proc/net/netstat's text: each section is a line of names
/// and a line of values, both starting with `SECTION:`.
fn netstat_field(text: &str, section: &str, field: &str) -> Option<u64> {
    let prefix = format!("{section}:");
    let mut lines = text.lines().filter(|l| l.starts_with(&prefix));
    let (names, values) = (lines.next()?, lines.next()?);
    let at = names.split_whitespace().position(|n| n == field)?;
    values.split_whitespace().nth(at)?.parse().ok()
}

/// Reads what `c` has (until the socket is empty) and counts the whole
/// answers of this load (DNS ID tag `tag`) in it; returns how many
/// matched an outstanding query. Sets `closed` at end of stream or on an
/// error.
fn read_answers(
    c: &mut Conn,
    buf: &mut [u8],
    tag: u16,
    t: u64,
    hist: &mut Histogram,
    r: &mut BlastResult,
) -> u64 {
    loop {
        match c.stream.read(buf) {
            Ok(0) => {
                c.closed = true;
                break;
            }
            Ok(n) => c.input.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => {
                c.closed = true;
                break;
            }
        }
    }
    let mut answered = 0;
    let mut at = 0;
    while c.input.len() - at >= 2 {
        let len = u16::from_be_bytes([c.input[at], c.input[at + 1]]) as usize;
        if c.input.len() - at - 2 < len {
            break;
        }
        let msg = &c.input[at + 2..at + 2 + len];
        at += 2 + len;
        if len < 12 || msg[2] & 0x80 == 0 {
            r.unmatched += 1;
            continue;
        }
        let id = u16::from_be_bytes([msg[0], msg[1]]);
        let slot = id & SLOT_MASK;
        let Some(sent) = c
            .sent_at
            .get_mut(slot as usize)
            .filter(|s| **s != 0 && id & !SLOT_MASK == tag)
        else {
            r.unmatched += 1;
            continue;
        };
        hist.record(t - *sent);
        *sent = 0;
        c.free.push(slot);
        answered += 1;
        r.answered += 1;
        match msg[3] & 0x0F {
            0 => r.noerror += 1,
            3 => r.nxdomain += 1,
            _ => r.other_rcode += 1,
        }
    }
    c.input.drain(..at);
    answered
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A TCP server running `serve` on a thread per connection.
    fn server(serve: fn(std::net::TcpStream)) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in listener.incoming() {
                let Ok(s) = s else { return };
                std::thread::spawn(move || serve(s));
            }
        });
        addr
    }

    /// A TCP echo that sets QR on every framed message, each connection
    /// ending when its client closes.
    fn echo() -> SocketAddr {
        server(|mut s| {
            let mut len = [0u8; 2];
            while s.read_exact(&mut len).is_ok() {
                let mut msg = vec![0u8; u16::from_be_bytes(len) as usize];
                if s.read_exact(&mut msg).is_err() {
                    return;
                }
                msg[2] |= 0x80;
                if s.write_all(&len).and_then(|()| s.write_all(&msg)).is_err() {
                    return;
                }
            }
        })
    }

    fn set() -> QuerySet {
        let names = ["a.example.", "b.example."].map(|n| heron_proto::Name::parse(n).unwrap());
        QuerySet::of_questions(&names.map(|n| (n, heron_proto::RType::A)))
    }

    fn opts(target: SocketAddr, rate: f64) -> TcpBlastOpts {
        TcpBlastOpts {
            target,
            rate,
            connections: 8,
            in_flight: 4,
            duration: Duration::from_millis(300),
            drain: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(5),
        }
    }

    #[test]
    fn paced_queries_are_all_answered_by_an_echo() {
        let r = blast_tcp(&set(), &opts(echo(), 2_000.0)).unwrap();
        // Paced at 2,000/s for 0.3 s: never more than the schedule allows.
        assert!(r.sent > 0 && r.sent <= 700, "{r:?}");
        assert_eq!(r.answered, r.sent, "{r:?}");
        assert_eq!((r.lost, r.unmatched), (0, 0));
        assert_eq!(r.noerror, r.answered);
    }

    #[test]
    fn a_closed_loop_gets_every_query_answered() {
        let r = blast_tcp(&set(), &opts(echo(), 0.0)).unwrap();
        assert!(r.sent >= 32, "{r:?}");
        assert_eq!(r.answered, r.sent, "{r:?}");
        assert!(
            r.answered_sending > 0 && r.answered_sending <= r.answered,
            "{r:?}"
        );
        // Counting from the middle of the sending phase: fewer answers,
        // over half the time.
        let mut clients = TcpClients::open(echo(), 8, Duration::from_secs(5)).unwrap();
        let load = TcpLoad {
            count_from: Duration::from_millis(150),
            ..opts(echo(), 0.0).load()
        };
        let half = clients.run(&set(), &load).unwrap();
        assert!(half.answered_sending < half.answered, "{half:?}");
        assert_eq!(half.answered_sending_s, 0.15);
    }

    #[test]
    fn connections_beyond_those_opened_at_once_all_open_and_carry_two_loads() {
        let n = OPENING_AT_ONCE * 3 + 5;
        let mut clients = TcpClients::open(echo(), n, Duration::from_secs(20)).unwrap();
        assert_eq!(clients.open_count(), n);
        let load = TcpLoad {
            rate: 0.0,
            in_flight: 2,
            duration: Duration::from_millis(200),
            drain: Duration::from_secs(2),
            count_from: Duration::ZERO,
        };
        for _ in 0..2 {
            let r = clients.run(&set(), &load).unwrap();
            assert!(r.sent >= 2 * n as u64, "{r:?}");
            assert_eq!((r.answered, r.lost, r.unmatched), (r.sent, 0, 0), "{r:?}");
        }
    }

    /// A server that accepts and reads but never answers.
    fn silent() -> SocketAddr {
        server(|mut s| {
            let mut buf = [0u8; 512];
            while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
        })
    }

    #[test]
    fn a_server_holding_every_slot_gets_no_more_and_the_time_is_counted() {
        let mut o = opts(silent(), 100_000.0);
        o.drain = Duration::from_millis(100);
        let r = blast_tcp(&set(), &o).unwrap();
        // Every slot of every connection taken once, then nothing more.
        assert_eq!(r.sent, (o.connections * o.in_flight) as u64, "{r:?}");
        assert_eq!((r.answered, r.lost), (0, r.sent));
        assert!(
            r.slots_taken_s > 0.0 && r.slots_taken_s <= r.duration_s,
            "{r:?}"
        );
        // An echo answering at once leaves a slot free nearly always.
        let r = blast_tcp(&set(), &opts(echo(), 2_000.0)).unwrap();
        assert!(r.slots_taken_s < r.duration_s / 2.0, "{r:?}");
    }

    #[test]
    fn answers_of_an_earlier_load_do_not_count_for_the_next() {
        // Answers only after a delay, so those of the first load come
        // during the second.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let Ok((mut s, _)) = listener.accept() else {
                return;
            };
            let mut len = [0u8; 2];
            while s.read_exact(&mut len).is_ok() {
                let mut msg = vec![0u8; u16::from_be_bytes(len) as usize];
                if s.read_exact(&mut msg).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(150));
                msg[2] |= 0x80;
                if s.write_all(&len).and_then(|()| s.write_all(&msg)).is_err() {
                    return;
                }
            }
        });
        let mut clients = TcpClients::open(addr, 1, Duration::from_secs(5)).unwrap();
        let load = TcpLoad {
            rate: 0.0,
            in_flight: 1,
            duration: Duration::from_millis(10),
            drain: Duration::ZERO,
            count_from: Duration::ZERO,
        };
        let first = clients.run(&set(), &load).unwrap();
        assert_eq!((first.sent, first.answered), (1, 0));
        let second = TcpLoad {
            drain: Duration::from_millis(500),
            ..load
        };
        let r = clients.run(&set(), &second).unwrap();
        // The first load's answer came back first and matched nothing.
        assert_eq!((r.sent, r.answered, r.unmatched), (1, 1, 1), "{r:?}");
        // The answer came in the drain: not in the rate while sending.
        assert_eq!(r.answered_sending, 0);
        assert_eq!(r.answered_qps_sending(), 0.0);
    }

    #[test]
    fn listen_overflows_are_read_from_netstat_text() {
        let text = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\n\
                    TcpExt: 3 6818 6820\n\
                    IpExt: InNoRoutes\n\
                    IpExt: 0\n";
        assert_eq!(netstat_field(text, "TcpExt", "ListenOverflows"), Some(6818));
        assert_eq!(netstat_field(text, "IpExt", "InNoRoutes"), Some(0));
        assert_eq!(netstat_field(text, "TcpExt", "Nothing"), None);
        assert_eq!(netstat_field("", "TcpExt", "ListenOverflows"), None);
        assert!(listen_overflows().is_some(), "readable on Linux");
    }

    #[test]
    fn a_server_that_never_accepts_ends_in_a_timeout_that_says_how_far_it_got() {
        // A listener nobody accepts on, with a tiny backlog: the first
        // connections complete in the kernel, the rest wait for a
        // retransmission that does not make it in time.
        let socket =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        socket
            .bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        socket.listen(1).unwrap();
        let addr = socket.local_addr().unwrap().as_socket().unwrap();
        let e = TcpClients::open(addr, 50, Duration::from_millis(500))
            .err()
            .unwrap();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        let text = e.to_string();
        assert!(text.contains(" of 50 connections opened in time"), "{text}");
        assert!(text.contains("listen queue overflows meanwhile"), "{text}");
    }

    #[test]
    fn a_server_that_hangs_up_loses_what_was_outstanding() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            // Accept each connection and close it at once.
            for s in listener.incoming().take(8) {
                drop(s);
            }
        });
        let r = blast_tcp(&set(), &opts(addr, 0.0)).unwrap();
        assert_eq!(r.answered, 0);
        assert_eq!(r.lost, r.sent);
    }
}
