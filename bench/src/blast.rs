//! `blast`: a batched UDP DNS load generator (`sendmmsg`/`recvmmsg`).
//!
//! One thread drives several connected sockets. At a fixed offered rate it
//! is open-loop (queries go out on schedule whatever comes back); with
//! rate 0 it sends as fast as a window of outstanding queries allows. Each
//! query's send time is kept in a slot indexed by (socket, DNS ID), so a
//! response gives its latency with no search. A query unanswered after
//! `timeout`, or still unanswered when the run ends, is lost.
//! The batched system calls are `heron_sys::udp`'s; the sockets are
//! connected, so the datagrams go without a peer address.

use std::collections::VecDeque;
use std::fs;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

use heron_proto::{Name, RType};
use heron_sys::udp::{Receiver, Sender, Wait};
use serde::{Deserialize, Serialize};

use crate::stats::Histogram;

/// The wire-format queries of a query file, back to back.
pub struct QuerySet {
    bytes: Vec<u8>,
    offsets: Vec<(u32, u16)>,
}

impl QuerySet {
    /// Reads a dnsperf query file ("NAME TYPE" per line; `#` comments),
    /// a line may end in `DO`: that query has EDNS with the DO bit.
    pub fn load(path: &Path) -> Result<QuerySet, String> {
        let text = fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        let mut set = QuerySet {
            bytes: Vec::with_capacity(text.len() + text.lines().count() * 20),
            offsets: Vec::new(),
        };
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut f = line.split_whitespace();
            let (Some(name), Some(qtype)) = (f.next(), f.next()) else {
                return Err(format!("{}:{}: expected NAME TYPE", path.display(), n + 1));
            };
            let name = Name::parse(name)
                .map_err(|e| format!("{}:{}: bad name {name}: {e}", path.display(), n + 1))?;
            let qtype = RType::from_mnemonic(qtype.as_bytes())
                .ok_or_else(|| format!("{}:{}: unknown type {qtype}", path.display(), n + 1))?;
            match f.next() {
                None => set.push(&name, qtype, false),
                Some("DO") => set.push(&name, qtype, true),
                Some(other) => {
                    return Err(format!(
                        "{}:{}: unknown flag {other}",
                        path.display(),
                        n + 1
                    ));
                }
            }
        }
        if set.offsets.is_empty() {
            return Err(format!("{}: no queries", path.display()));
        }
        Ok(set)
    }

    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// Queries for these questions, in this order.
    pub fn of_questions(questions: &[(Name, RType)]) -> QuerySet {
        let mut set = QuerySet {
            bytes: Vec::new(),
            offsets: Vec::new(),
        };
        for (name, qtype) in questions {
            set.push(name, *qtype, false);
        }
        set
    }

    /// One query; with `dnssec_ok` it has an OPT record (1,232 octets,
    /// the DO bit), as a validating resolver sends.
    fn push(&mut self, name: &Name, qtype: RType, dnssec_ok: bool) {
        let start = self.bytes.len();
        // ID 0 (set per send), no flags, one question, an OPT or none.
        self.bytes
            .extend_from_slice(&[0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, dnssec_ok as u8]);
        self.bytes.extend_from_slice(name.as_wire());
        self.bytes.extend_from_slice(&qtype.0.to_be_bytes());
        self.bytes.extend_from_slice(&1u16.to_be_bytes());
        if dnssec_ok {
            // Root name, OPT, payload size, extended RCODE and version 0,
            // DO, no options.
            self.bytes
                .extend_from_slice(&[0, 0, 41, 0x04, 0xD0, 0, 0, 0x80, 0, 0, 0]);
        }
        self.offsets
            .push((start as u32, (self.bytes.len() - start) as u16));
    }

    pub(crate) fn get(&self, i: usize) -> &[u8] {
        let (start, len) = self.offsets[i];
        &self.bytes[start as usize..start as usize + len as usize]
    }
}

#[derive(Clone, Debug)]
pub struct BlastOpts {
    pub target: SocketAddr,
    /// Offered queries per second; 0 = as fast as `window` allows.
    pub rate: f64,
    /// Most queries outstanding at once (used when `rate` is 0).
    pub window: usize,
    pub duration: Duration,
    /// After sending stops, wait this long at most for the last answers.
    pub drain: Duration,
    /// A query unanswered this long is lost.
    pub timeout: Duration,
    pub sockets: usize,
    pub batch: usize,
    /// Source addresses the sockets are bound to in turn (empty: the
    /// loopback address of the target's family).
    pub sources: Vec<IpAddr>,
    /// Each query on the next socket (many resolvers) rather than a batch
    /// on one socket.
    pub spread: bool,
}

impl Default for BlastOpts {
    fn default() -> Self {
        BlastOpts {
            target: "127.0.0.1:53".parse().unwrap(),
            rate: 0.0,
            window: 2_000,
            duration: Duration::from_secs(2),
            drain: Duration::from_millis(500),
            timeout: Duration::from_secs(1),
            sockets: 4,
            batch: 32,
            sources: Vec::new(),
            spread: false,
        }
    }
}

/// What one run measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct BlastResult {
    pub target_rate: f64,
    pub sent: u64,
    pub answered: u64,
    pub lost: u64,
    /// Responses that matched no outstanding query (late or duplicated).
    pub unmatched: u64,
    pub send_errors: u64,
    /// Length of the sending phase, seconds.
    pub duration_s: f64,
    pub offered_qps: f64,
    pub answered_qps: f64,
    pub loss_pct: f64,
    pub lat_avg_us: f64,
    pub lat_p50_us: f64,
    pub lat_p99_us: f64,
    pub lat_p999_us: f64,
    pub lat_max_us: f64,
    pub noerror: u64,
    pub nxdomain: u64,
    pub other_rcode: u64,
    /// Datagrams the kernel dropped at the generator's own sockets.
    pub client_drops: u64,
    /// Datagrams dropped at sockets bound to the target's port (the
    /// server's receive queues), during this run.
    pub server_drops: u64,
    /// Over TCP: seconds of the sending phase during which queries were
    /// due and the server held every slot (no connection had one free).
    #[serde(default)]
    pub slots_taken_s: f64,
    /// Answers received before sending stopped (those of the drain left
    /// out): with many queries outstanding, the drain's answers would
    /// raise the rate by up to that many over the sending phase.
    #[serde(default)]
    pub answered_sending: u64,
    /// The stretch of the sending phase `answered_sending` covers, when
    /// shorter than all of it (0: all of it).
    #[serde(default)]
    pub answered_sending_s: f64,
    /// Seconds of the loop's turns that sent or received something (the
    /// rest of the run it spun with nothing to do: time to spare).
    #[serde(default)]
    pub busy_s: f64,
}

impl BlastResult {
    /// Answers per second received while sending.
    pub fn answered_qps_sending(&self) -> f64 {
        let span = match self.answered_sending_s > 0.0 {
            true => self.answered_sending_s,
            false => self.duration_s,
        };
        self.answered_sending as f64 / span.max(1e-9)
    }
}

const SLOTS: usize = 65_536;
const SEND_BUF: usize = 512;
const RECV_BUF: usize = 4_096;

struct Sock {
    socket: UdpSocket,
    /// Send time (ns since start, +1) per DNS ID; 0 = free.
    slots: Vec<u64>,
    /// The query (index in the set) sent with each DNS ID.
    sent_query: Vec<u32>,
    next_id: u16,
    port: u16,
}

fn open_socket(target: SocketAddr, source: Option<&IpAddr>) -> io::Result<Sock> {
    let local: SocketAddr = match source {
        Some(ip) => SocketAddr::new(*ip, 0),
        None if target.is_ipv6() => "[::1]:0".parse().unwrap(),
        None => "127.0.0.1:0".parse().unwrap(),
    };
    let socket = UdpSocket::bind(local)?;
    socket.connect(target)?;
    socket.set_nonblocking(true)?;
    let _ = heron_sys::socket::grow_receive_buffer(&socket, 32 << 20);
    let _ = heron_sys::socket::grow_send_buffer(&socket, 8 << 20);
    let port = socket.local_addr()?.port();
    Ok(Sock {
        socket,
        slots: vec![0; SLOTS],
        sent_query: vec![0; SLOTS],
        next_id: 0,
        port,
    })
}

/// Sum of the kernel's per-socket drop counters for UDP sockets bound to
/// any of `ports` on a loopback address (from /proc/net/udp and udp6).
pub fn socket_drops(ports: &[u16]) -> u64 {
    let mut total = 0;
    for file in ["/proc/net/udp", "/proc/net/udp6"] {
        let Ok(text) = fs::read_to_string(file) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 13 {
                continue;
            }
            let port = f[1]
                .rsplit_once(':')
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            if port.is_some_and(|p| ports.contains(&p)) {
                total += f[12].parse::<u64>().unwrap_or(0);
            }
        }
    }
    total
}

/// Runs one bounded load: sends for `opts.duration`, then drains.
pub fn blast(queries: &QuerySet, opts: &BlastOpts) -> io::Result<BlastResult> {
    blast_checked(queries, opts, Instant::now(), &mut |_| {})
}

/// One answer as `blast_checked` hands it over.
pub struct Answer<'a> {
    /// Index of the query in its set.
    pub query: usize,
    /// When the query was sent and the answer came, ns since `start`.
    pub sent_ns: u64,
    pub received_ns: u64,
    pub message: &'a [u8],
}

/// Up to this many sockets are each tried for answers on every turn of
/// the loop; more are watched with epoll (the `many` client shape's
/// thousand sockets would cost a thousand system calls a turn).
const POLL_EVERY_SOCKET_UP_TO: usize = 16;

/// Receive batches read from one socket in one turn before the others'.
const BATCHES_PER_TURN: usize = 8;

/// A run's state: the sockets, what is outstanding, what was counted.
struct Run<'q> {
    queries: &'q QuerySet,
    socks: Vec<Sock>,
    batch: usize,
    start: Instant,
    send_buf: Vec<u8>,
    send_lens: Vec<usize>,
    sender: Sender,
    received: Receiver,
    /// (socket, DNS ID, send time) in the order sent, for expiry.
    pending: VecDeque<(u32, u16, u64)>,
    hist: Histogram,
    r: BlastResult,
    /// Next query of the set.
    qi: usize,
    outstanding: u64,
    sending: bool,
}

impl Run<'_> {
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Sends the next `n` queries of the set on socket `si` in one
    /// `sendmmsg`; returns how many went.
    fn send_on(&mut self, si: usize, n: usize) -> usize {
        let s = &mut self.socks[si];
        let mut ids = [(0u16, 0u32); 1024];
        for (j, id_slot) in ids.iter_mut().enumerate().take(n) {
            let q = self.queries.get(self.qi);
            let query = self.qi as u32;
            self.qi = (self.qi + 1) % self.queries.len();
            let buf = &mut self.send_buf[j * SEND_BUF..j * SEND_BUF + q.len()];
            buf.copy_from_slice(q);
            let id = s.next_id;
            s.next_id = s.next_id.wrapping_add(1);
            buf[..2].copy_from_slice(&id.to_be_bytes());
            *id_slot = (id, query);
            self.send_lens[j] = q.len();
        }
        let messages = self.send_buf.chunks(SEND_BUF).zip(&self.send_lens);
        let rc = self
            .sender
            .load(messages.take(n).map(|(buf, &len)| (&buf[..len], None)))
            .send(&s.socket, 0, Wait::Never);
        let Ok(rc) = rc else {
            self.r.send_errors += 1;
            s.next_id = s.next_id.wrapping_sub(n as u16);
            let len = self.queries.len();
            self.qi = (self.qi + len - n % len) % len;
            return 0;
        };
        let t = self.start.elapsed().as_nanos() as u64 + 1;
        for &(id, query) in ids.iter().take(rc) {
            let slot = &mut s.slots[id as usize];
            if *slot != 0 {
                // Reused before an answer came: that one is lost.
                self.outstanding -= 1;
            }
            *slot = t;
            s.sent_query[id as usize] = query;
            self.pending.push_back((si as u32, id, t));
        }
        self.r.sent += rc as u64;
        self.outstanding += rc as u64;
        // IDs of datagrams not sent are handed out again.
        let unsent = n - rc;
        s.next_id = s.next_id.wrapping_sub(unsent as u16);
        let len = self.queries.len();
        self.qi = (self.qi + len - unsent % len) % len;
        rc
    }

    /// Reads what is queued on socket `si`, up to [`BATCHES_PER_TURN`]
    /// batches: (anything read, queue left empty).
    fn receive_from(&mut self, si: usize, check: &mut dyn FnMut(Answer)) -> (bool, bool) {
        let mut did = false;
        for _ in 0..BATCHES_PER_TURN {
            let rc = match self.received.receive(&self.socks[si].socket, Wait::Never) {
                Ok(rc) if rc > 0 => rc,
                _ => return (did, true),
            };
            let t = self.start.elapsed().as_nanos() as u64 + 1;
            for j in 0..rc {
                self.take_answer(si, j, t, check);
            }
            did = true;
            if rc < self.batch {
                // recvmmsg stops short only when the queue ran dry.
                return (did, true);
            }
        }
        (did, false)
    }

    fn take_answer(&mut self, si: usize, j: usize, t: u64, check: &mut dyn FnMut(Answer)) {
        let s = &mut self.socks[si];
        let r = &mut self.r;
        let msg = self.received.datagram(j);
        if msg.len() < 12 || msg[2] & 0x80 == 0 {
            r.unmatched += 1;
            return;
        }
        let id = u16::from_be_bytes([msg[0], msg[1]]);
        let slot = &mut s.slots[id as usize];
        if *slot == 0 {
            r.unmatched += 1;
            return;
        }
        self.hist.record(t - *slot);
        check(Answer {
            query: s.sent_query[id as usize] as usize,
            sent_ns: *slot - 1,
            received_ns: t - 1,
            message: msg,
        });
        *slot = 0;
        self.outstanding -= 1;
        r.answered += 1;
        r.answered_sending += u64::from(self.sending);
        match msg[3] & 0x0F {
            0 => r.noerror += 1,
            3 => r.nxdomain += 1,
            _ => r.other_rcode += 1,
        }
    }

    /// Forgets queries older than the timeout (lost).
    fn expire(&mut self, timeout_ns: u64) {
        let now = self.now_ns();
        while let Some(&(si, id, t)) = self.pending.front() {
            if t + timeout_ns > now {
                break;
            }
            self.pending.pop_front();
            let slot = &mut self.socks[si as usize].slots[id as usize];
            if *slot == t {
                *slot = 0;
                self.outstanding -= 1;
            }
        }
    }
}

/// Which sockets to read on this turn: every one when few, else those
/// epoll reported (edge-triggered) and those left unread last turn.
struct ReadySockets {
    poll: Option<(mio::Poll, mio::Events)>,
    /// Sockets to read, and whether each is in the list.
    ready: Vec<usize>,
    listed: Vec<bool>,
}

impl ReadySockets {
    fn new(socks: &[Sock]) -> io::Result<ReadySockets> {
        use std::os::fd::AsRawFd;
        if socks.len() <= POLL_EVERY_SOCKET_UP_TO {
            return Ok(ReadySockets {
                poll: None,
                ready: (0..socks.len()).collect(),
                listed: Vec::new(),
            });
        }
        let poll = mio::Poll::new()?;
        for (i, s) in socks.iter().enumerate() {
            let fd = s.socket.as_raw_fd();
            poll.registry().register(
                &mut mio::unix::SourceFd(&fd),
                mio::Token(i),
                mio::Interest::READABLE,
            )?;
        }
        Ok(ReadySockets {
            poll: Some((poll, mio::Events::with_capacity(1024))),
            ready: Vec::new(),
            listed: vec![false; socks.len()],
        })
    }

    /// The sockets to read now (taken; hand back the undrained with
    /// [`ReadySockets::keep`]).
    fn take(&mut self) -> Vec<usize> {
        let Some((poll, events)) = &mut self.poll else {
            return self.ready.clone();
        };
        if poll.poll(events, Some(Duration::ZERO)).is_ok() {
            for e in events.iter() {
                let i = e.token().0;
                if !self.listed[i] {
                    self.listed[i] = true;
                    self.ready.push(i);
                }
            }
        }
        for &i in &self.ready {
            self.listed[i] = false;
        }
        std::mem::take(&mut self.ready)
    }

    /// Socket `i` still has answers queued (read again next turn).
    fn keep(&mut self, i: usize) {
        if self.poll.is_some() && !self.listed[i] {
            self.listed[i] = true;
            self.ready.push(i);
        }
    }
}

/// [`blast`], with every answer handed to `check`; times count from
/// `start`, which must not be later than the call.
pub fn blast_checked(
    queries: &QuerySet,
    opts: &BlastOpts,
    start: Instant,
    check: &mut dyn FnMut(Answer),
) -> io::Result<BlastResult> {
    assert!(!queries.is_empty());
    let nsock = opts.sockets.max(1);
    let batch = opts.batch.clamp(1, 1024);
    let socks = (0..nsock)
        .map(|i| open_socket(opts.target, opts.sources.get(i % opts.sources.len().max(1))))
        .collect::<io::Result<Vec<_>>>()?;
    let my_ports: Vec<u16> = socks.iter().map(|s| s.port).collect();
    let server_drops_before = socket_drops(&[opts.target.port()]);
    let mut ready = ReadySockets::new(&socks)?;
    let mut run = Run {
        queries,
        socks,
        batch,
        start,
        send_buf: vec![0u8; batch * SEND_BUF],
        send_lens: vec![0usize; batch],
        sender: Sender::with_capacity(batch),
        received: Receiver::new(batch, RECV_BUF),
        pending: VecDeque::new(),
        hist: Histogram::default(),
        r: BlastResult {
            target_rate: opts.rate,
            ..BlastResult::default()
        },
        qi: 0,
        outstanding: 0,
        sending: true,
    };
    let mut rr = 0usize;
    let timeout_ns = opts.timeout.as_nanos() as u64;
    let send_ns = run.now_ns() + opts.duration.as_nanos() as u64;
    let end_ns = send_ns + opts.drain.as_nanos() as u64;
    // Paced sending counts from here.
    let first_ns = run.now_ns();
    let mut send_end_ns = send_ns;
    let mut busy_ns = 0u64;
    // Bounded: the loop ends at `end_ns` at the latest.
    loop {
        let now = run.now_ns();
        if run.sending && now >= send_ns {
            run.sending = false;
            send_end_ns = now;
        }
        if !run.sending && (run.outstanding == 0 || now >= end_ns) {
            break;
        }
        let mut did = false;
        if run.sending {
            let want = if opts.rate > 0.0 {
                let due = ((now - first_ns) as f64 * opts.rate / 1e9) as u64;
                due.saturating_sub(run.r.sent)
            } else {
                (opts.window as u64).saturating_sub(run.outstanding)
            };
            let n = want.min(batch as u64) as usize;
            if opts.spread {
                // One query per socket in turn: no two in a row share a
                // source, as from many resolvers.
                for _ in 0..n {
                    did |= run.send_on(rr, 1) > 0;
                    rr = (rr + 1) % nsock;
                }
            } else if n > 0 {
                did = run.send_on(rr, n) > 0;
                rr = (rr + 1) % nsock;
            }
        }
        for si in ready.take() {
            let (read, drained) = run.receive_from(si, check);
            did |= read;
            if !drained {
                ready.keep(si);
            }
        }
        run.expire(timeout_ns);
        if did {
            busy_ns += run.now_ns() - now;
        } else {
            std::hint::spin_loop();
        }
    }
    let mut r = run.r;
    r.duration_s = (send_end_ns - first_ns) as f64 / 1e9;
    r.busy_s = busy_ns as f64 / 1e9;
    r.lost = r.sent - r.answered;
    r.offered_qps = r.sent as f64 / r.duration_s.max(1e-9);
    r.answered_qps = r.answered as f64 / r.duration_s.max(1e-9);
    r.loss_pct = if r.sent == 0 {
        0.0
    } else {
        r.lost as f64 * 100.0 / r.sent as f64
    };
    let hist = &run.hist;
    r.lat_avg_us = hist.mean() / 1e3;
    r.lat_p50_us = hist.percentile(50.0) as f64 / 1e3;
    r.lat_p99_us = hist.percentile(99.0) as f64 / 1e3;
    r.lat_p999_us = hist.percentile(99.9) as f64 / 1e3;
    r.lat_max_us = hist.max() as f64 / 1e3;
    r.client_drops = socket_drops(&my_ports);
    r.server_drops = socket_drops(&[opts.target.port()]).saturating_sub(server_drops_before);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `DO` line is a query with an OPT record whose DO bit is set, as
    /// the server's parser reads it; an unknown flag is an error.
    #[test]
    fn a_do_line_is_a_query_with_the_do_bit() {
        let dir = std::env::temp_dir().join(format!("heron-bench-do-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join("q.txt");
        fs::write(&file, "a.example. A\nb.example. A DO\n").unwrap();
        let set = QuerySet::load(&file).unwrap();
        let plain = heron_proto::message::parse_query(set.get(0)).unwrap();
        assert!(plain.edns.is_none());
        let signed = heron_proto::message::parse_query(set.get(1)).unwrap();
        let edns = signed.edns.expect("an OPT record");
        assert!(edns.do_bit);
        assert_eq!(edns.udp_size, 1232);
        fs::write(&file, "a.example. A XX\n").unwrap();
        let refused = QuerySet::load(&file).err().expect("refused");
        assert!(refused.contains("unknown flag XX"), "{refused}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn blast_against_an_echo_counts_everything() {
        // A tiny echo that sets QR, on a thread, bounded in time.
        let echo = UdpSocket::bind("127.0.0.1:0").unwrap();
        echo.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let target = echo.local_addr().unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop2 = stop.clone();
        let t = std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            let deadline = Instant::now() + Duration::from_secs(10);
            while !stop2.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < deadline {
                if let Ok((n, peer)) = echo.recv_from(&mut buf) {
                    buf[2] |= 0x80;
                    let _ = echo.send_to(&buf[..n], peer);
                }
            }
        });
        let dir = std::env::temp_dir().join(format!("heron-bench-blast-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join("q.txt");
        fs::write(&file, "a.example. A\nb.example. MX\n").unwrap();
        let set = QuerySet::load(&file).unwrap();
        assert_eq!(set.len(), 2);
        let r = blast(
            &set,
            &BlastOpts {
                target,
                rate: 2_000.0,
                duration: Duration::from_millis(300),
                ..BlastOpts::default()
            },
        )
        .unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        t.join().unwrap();
        // Paced at 2,000/s for 0.3 s: never more than the schedule allows;
        // fewer when the test machine is busy (the sender is a thread that
        // may wait for a core), but not a trickle.
        assert!(r.sent >= 200 && r.sent <= 700, "{r:?}");
        assert_eq!(r.answered + r.lost, r.sent);
        assert_eq!(r.noerror, r.answered);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn many_sockets_send_from_their_own_addresses_one_query_each_in_turn() {
        // An echo that records each query's source, on a thread, bounded.
        let echo = UdpSocket::bind("127.0.0.1:0").unwrap();
        echo.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let target = echo.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            let mut sources = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                match echo.recv_from(&mut buf) {
                    Ok((n, peer)) => {
                        buf[2] |= 0x80;
                        let _ = echo.send_to(&buf[..n], peer);
                        sources.push(peer);
                    }
                    Err(_) if !sources.is_empty() => break,
                    Err(_) => {}
                }
            }
            sources
        });
        let set = QuerySet::of_questions(&[(Name::parse("a.example.").unwrap(), RType::A)]);
        let addresses = crate::client_shape::many_sources(4);
        let r = blast(
            &set,
            &BlastOpts {
                target,
                rate: 2_000.0,
                duration: Duration::from_millis(300),
                sockets: 64,
                sources: addresses.clone(),
                spread: true,
                ..BlastOpts::default()
            },
        )
        .unwrap();
        let sources = t.join().unwrap();
        assert!(r.sent >= 200, "{r:?}");
        assert_eq!(r.answered + r.lost, r.sent);
        // Answers are read through epoll (64 sockets) and all counted.
        assert_eq!(r.answered as usize, sources.len(), "{r:?}");
        // Every address used; consecutive queries never from one socket.
        for a in &addresses {
            assert!(sources.iter().any(|s| s.ip() == *a), "{a} unused");
        }
        assert!(sources.windows(2).all(|w| w[0] != w[1]));
        let distinct: std::collections::BTreeSet<_> = sources.iter().collect();
        assert_eq!(distinct.len(), 64.min(sources.len()));
    }
}
