//! Query counters for `heron ctl stats` and the Prometheus endpoint.
//!
//! Each worker (a UDP or XDP thread; a runtime thread for TCP and TLS)
//! writes its own [`Cells`], which no other thread writes: a count is a
//! relaxed load and store of the worker's own cache lines, never a
//! shared atomic read-modify-write. [`Stats::totals`] sums every
//! worker's cells when asked. Resetting (`ctl stats --reset`) moves a
//! baseline instead of zeroing cells, so no count is lost to a race with
//! the writer and the exported counters never go backwards.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// The transports a query can come over, as labelled.
pub const TRANSPORTS: [&str; 4] = ["udp", "tcp", "tls", "xdp"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    Udp = 0,
    Tcp = 1,
    Tls = 2,
    Xdp = 3,
}

/// The query types counted by name; every other one (and a query whose
/// question cannot be read) is counted as `OTHER`.
pub const QTYPES: [(u16, &str); 23] = [
    (1, "A"),
    (2, "NS"),
    (5, "CNAME"),
    (6, "SOA"),
    (12, "PTR"),
    (15, "MX"),
    (16, "TXT"),
    (28, "AAAA"),
    (33, "SRV"),
    (35, "NAPTR"),
    (43, "DS"),
    (46, "RRSIG"),
    (47, "NSEC"),
    (48, "DNSKEY"),
    (50, "NSEC3"),
    (51, "NSEC3PARAM"),
    (52, "TLSA"),
    (64, "SVCB"),
    (65, "HTTPS"),
    (251, "IXFR"),
    (252, "AXFR"),
    (255, "ANY"),
    (257, "CAA"),
];
/// Index of the `OTHER` bucket, after the named types.
pub const QTYPE_OTHER: usize = QTYPES.len();
const QTYPE_BUCKETS: usize = QTYPES.len() + 1;

/// The label of query-type bucket `i`.
pub fn qtype_label(i: usize) -> &'static str {
    QTYPES.get(i).map_or("OTHER", |(_, name)| name)
}

/// The bucket of `qtype`: a table lookup, no search.
pub fn qtype_bucket(qtype: u16) -> usize {
    const TABLE: [u8; 258] = {
        let mut table = [QTYPE_OTHER as u8; 258];
        let mut i = 0;
        while i < QTYPES.len() {
            table[QTYPES[i].0 as usize] = i as u8;
            i += 1;
        }
        table
    };
    TABLE
        .get(qtype as usize)
        .map_or(QTYPE_OTHER, |&b| b as usize)
}

/// The RCODE names as labelled: the header's four bits, then the
/// extended RCODEs of an OPT record a server sends (RFC 6891, 7873).
pub const RCODES: [&str; 24] = [
    "NOERROR",
    "FORMERR",
    "SERVFAIL",
    "NXDOMAIN",
    "NOTIMP",
    "REFUSED",
    "YXDOMAIN",
    "YXRRSET",
    "NXRRSET",
    "NOTAUTH",
    "NOTZONE",
    "DSOTYPENI",
    "RCODE12",
    "RCODE13",
    "RCODE14",
    "RCODE15",
    "BADVERS",
    "BADKEY",
    "BADTIME",
    "BADMODE",
    "BADNAME",
    "BADALG",
    "BADTRUNC",
    "BADCOOKIE",
];

/// The response's RCODE as [`RCODES`] indexes it. Its OPT record is read
/// only for a response that could carry an extended RCODE (BADVERS,
/// BADCOOKIE: header RCODE 0 or 7, no answer and no authority, an
/// additional record), so an answer costs a few header reads.
fn rcode_index(message: &[u8]) -> usize {
    let low = usize::from(message[3] & 0xF);
    let count = |at: usize| u16::from_be_bytes([message[at], message[at + 1]]);
    if !matches!(low, 0 | 7) || count(6) != 0 || count(8) != 0 || count(10) == 0 {
        return low;
    }
    let index = opt_extended_rcode(message).map_or(low, |high| usize::from(high) << 4 | low);
    if index < RCODES.len() { index } else { low }
}

/// The extended RCODE byte of an OPT record that is the first additional
/// record after one question.
fn opt_extended_rcode(message: &[u8]) -> Option<u8> {
    if u16::from_be_bytes([message[4], message[5]]) != 1 {
        return None;
    }
    let (after_name, _) = heron_proto::name::skip_compressed(message, 12).ok()?;
    let owner = after_name + 4; // the question's type and class
    // OPT's owner is the root: one zero octet, then TYPE 41, CLASS, TTL.
    let record = message.get(owner..owner + 5)?;
    (record[0] == 0 && record[1..3] == 41u16.to_be_bytes()).then_some(())?;
    message.get(owner + 5).copied()
}

/// Upper bounds (bytes) of the response size histogram's buckets; the
/// last bucket is everything larger.
pub const SIZE_BOUNDS: [u64; 9] = [64, 128, 256, 512, 1024, 1232, 1500, 4096, 16384];
/// Upper bounds (microseconds) of the answer latency histogram's buckets.
pub const LATENCY_BOUNDS_US: [u64; 10] = [
    10, 50, 100, 250, 500, 1_000, 5_000, 25_000, 100_000, 1_000_000,
];

/// How a TLS handshake went: a new session, or one resumed (a ticket).
pub const HANDSHAKE_KINDS: [&str; 2] = ["full", "resumed"];

/// Why the server closed a TCP or TLS connection it had taken in (on
/// its event loops): the client closed it, a timeout, a failed TLS
/// handshake or TLS error, another error (a reset, a malformed message).
pub const CLOSE_REASONS: [&str; 8] = [
    "client",
    "idle_timeout",
    "message_timeout",
    "handshake_timeout",
    "write_timeout",
    "tls_error",
    "error",
    "blackhole",
];

/// Why a UDP datagram was dropped before it was read as a query: its
/// source port is none a client sends from (0, or a service that answers
/// any datagram, [`crate::ports::never_a_client`]); on the XDP path, also
/// what the kernel would have dropped (a martian source, a bad checksum,
/// lengths that do not add up).
pub const DROP_REASONS: [&str; 4] = ["source_port", "martian_source", "checksum", "malformed"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dropped {
    SourcePort = 0,
    MartianSource = 1,
    Checksum = 2,
    Malformed = 3,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closed {
    Client = 0,
    IdleTimeout = 1,
    MessageTimeout = 2,
    HandshakeTimeout = 3,
    WriteTimeout = 4,
    TlsError = 5,
    Error = 6,
    /// A reload blackholed the client's address (regression hunt BD-2:
    /// counted as an error).
    Blackhole = 7,
}

/// Why a TCP or TLS connection was closed at accept.
pub const CONNECTION_LIMITS: [&str; 3] = ["total", "per_client", "blackhole"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    Total = 0,
    PerClient = 1,
    Blackhole = 2,
}

/// A counter written by one thread only: a load and a store, which on
/// the usual machines are plain moves, and readable by any thread.
#[derive(Debug, Default)]
struct Cell(AtomicU64);

impl Cell {
    fn add(&self, n: u64) {
        let was = self.0.load(Ordering::Relaxed);
        self.0.store(was.wrapping_add(n), Ordering::Relaxed);
    }

    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A histogram's cells: a count per bucket (not cumulative), the sum.
#[derive(Debug)]
struct HistogramCells<const B: usize> {
    buckets: [Cell; B],
    sum: Cell,
}

impl<const B: usize> Default for HistogramCells<B> {
    fn default() -> Self {
        HistogramCells {
            buckets: std::array::from_fn(|_| Cell::default()),
            sum: Cell::default(),
        }
    }
}

impl<const B: usize> HistogramCells<B> {
    /// `n` observations of `value`, in the bucket of the first bound
    /// not below it.
    fn observe(&self, bounds: &[u64], value: u64, n: u64) {
        let bucket = bounds.iter().position(|&b| value <= b).unwrap_or(B - 1);
        self.buckets[bucket].add(n);
        self.sum.add(value.wrapping_mul(n));
    }

    fn read(&self) -> Histogram<B> {
        Histogram {
            buckets: std::array::from_fn(|i| self.buckets[i].get()),
            sum: self.sum.get(),
        }
    }
}

const SIZE_BUCKETS: usize = SIZE_BOUNDS.len() + 1;
const LATENCY_BUCKETS: usize = LATENCY_BOUNDS_US.len() + 1;

/// One worker's counters; only its worker writes them.
#[derive(Debug)]
#[repr(align(128))]
pub struct Cells {
    queries: [[Cell; QTYPE_BUCKETS]; TRANSPORTS.len()],
    responses: [Cell; RCODES.len()],
    truncated: Cell,
    response_bytes: HistogramCells<SIZE_BUCKETS>,
    latency_us: HistogramCells<LATENCY_BUCKETS>,
    accepted: [Cell; TRANSPORTS.len()],
    refused_connections: [Cell; CONNECTION_LIMITS.len()],
    shed: Cell,
    shed_busy: Cell,
    closed: [Cell; CLOSE_REASONS.len()],
    handshakes: [Cell; HANDSHAKE_KINDS.len()],
    dropped: [Cell; DROP_REASONS.len()],
}

impl Default for Cells {
    fn default() -> Self {
        Cells {
            queries: std::array::from_fn(|_| std::array::from_fn(|_| Cell::default())),
            responses: std::array::from_fn(|_| Cell::default()),
            truncated: Cell::default(),
            response_bytes: HistogramCells::default(),
            latency_us: HistogramCells::default(),
            accepted: std::array::from_fn(|_| Cell::default()),
            refused_connections: std::array::from_fn(|_| Cell::default()),
            shed: Cell::default(),
            shed_busy: Cell::default(),
            closed: std::array::from_fn(|_| Cell::default()),
            handshakes: std::array::from_fn(|_| Cell::default()),
            dropped: std::array::from_fn(|_| Cell::default()),
        }
    }
}

impl Cells {
    /// A query of type `qtype` (None: its question could not be read).
    pub fn query(&self, via: Via, qtype: Option<u16>) {
        let bucket = qtype.map_or(QTYPE_OTHER, qtype_bucket);
        self.queries[via as usize][bucket].add(1);
    }

    /// A response about to be sent: its RCODE (from the header) and size.
    /// Anything shorter than a header is not a response and not counted.
    pub fn response(&self, message: &[u8]) {
        if message.len() >= 12 {
            self.responses[rcode_index(message)].add(1);
            if message[2] & 0x02 != 0 {
                self.truncated.add(1); // TC: the client asks again over TCP
            }
            let size = message.len() as u64;
            self.response_bytes.observe(&SIZE_BOUNDS, size, 1);
        }
    }

    /// `queries` answered `took` after they were received (one
    /// observation each; measured once for the batch).
    pub fn answered(&self, took: Duration, queries: usize) {
        // Not `as_micros`: its u128 arithmetic costs more than the rest.
        let us = took.as_secs().saturating_mul(1_000_000) + u64::from(took.subsec_micros());
        self.latency_us
            .observe(&LATENCY_BOUNDS_US, us, queries as u64);
    }

    /// A TCP (or TLS) connection accepted.
    pub fn accepted(&self, via: Via) {
        self.accepted[via as usize].add(1);
    }

    /// A TLS handshake completed, a session resumed or not.
    pub fn handshake(&self, resumed: bool) {
        self.handshakes[usize::from(resumed)].add(1);
    }

    /// A connection closed at accept because of `limit`.
    pub fn refused(&self, limit: Limit) {
        self.refused_connections[limit as usize].add(1);
    }

    /// An idle connection closed to make room for a new one.
    pub fn shed(&self) {
        self.shed.add(1);
    }

    /// A busy connection (a message begun) of the client holding the most
    /// closed to make room for a client holding fewer: counted apart from
    /// the idle ones, so that cutting a busy client is told from taking an
    /// idle slot (black-box finding DF-1).
    pub fn shed_busy(&self) {
        self.shed_busy.add(1);
    }

    /// A connection taken in ended, for `why`.
    pub fn closed(&self, why: Closed) {
        self.closed[why as usize].add(1);
    }

    /// A datagram dropped unread, for `why`.
    pub fn dropped(&self, why: Dropped) {
        self.dropped[why as usize].add(1);
    }

    fn add_to(&self, totals: &mut Totals) {
        for (t, row) in self.queries.iter().enumerate() {
            for (q, cell) in row.iter().enumerate() {
                totals.queries[t][q] += cell.get();
            }
        }
        let add = |into: &mut [u64], from: &[Cell]| {
            into.iter_mut().zip(from).for_each(|(i, c)| *i += c.get());
        };
        add(&mut totals.responses, &self.responses);
        totals.truncated += self.truncated.get();
        add(&mut totals.accepted, &self.accepted);
        add(&mut totals.refused_connections, &self.refused_connections);
        totals.shed += self.shed.get();
        totals.shed_busy += self.shed_busy.get();
        add(&mut totals.closed, &self.closed);
        add(&mut totals.handshakes, &self.handshakes);
        add(&mut totals.dropped, &self.dropped);
        totals.response_bytes.add(&self.response_bytes.read());
        totals.latency_us.add(&self.latency_us.read());
    }
}

/// A histogram's totals: counts per bucket (not cumulative) and the sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Histogram<const B: usize> {
    pub buckets: [u64; B],
    pub sum: u64,
}

impl<const B: usize> Default for Histogram<B> {
    fn default() -> Self {
        Histogram {
            buckets: [0; B],
            sum: 0,
        }
    }
}

impl<const B: usize> Histogram<B> {
    fn add(&mut self, other: &Histogram<B>) {
        self.buckets
            .iter_mut()
            .zip(other.buckets)
            .for_each(|(a, b)| *a += b);
        self.sum += other.sum;
    }

    fn minus(&self, base: &Histogram<B>) -> Histogram<B> {
        Histogram {
            buckets: std::array::from_fn(|i| self.buckets[i].wrapping_sub(base.buckets[i])),
            sum: self.sum.wrapping_sub(base.sum),
        }
    }

    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// (upper bound, observations in that bucket alone) per bucket, the
    /// last bound infinite; bounds are divided by `per_unit` (1e6:
    /// microseconds to seconds). Not cumulative: the OpenMetrics encoder
    /// (`encode_histogram`) adds the buckets up itself.
    pub fn buckets_by_bound(&self, bounds: &[u64], per_unit: f64) -> Vec<(f64, u64)> {
        (0..B)
            .map(|i| {
                let bound = bounds
                    .get(i)
                    .map_or(f64::INFINITY, |&b| b as f64 / per_unit);
                (bound, self.buckets[i])
            })
            .collect()
    }
}

/// Every worker's counters summed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Totals {
    /// By transport ([`TRANSPORTS`]) and query type bucket ([`qtype_label`]).
    pub queries: [[u64; QTYPE_BUCKETS]; TRANSPORTS.len()],
    /// By RCODE ([`RCODES`]).
    pub responses: [u64; RCODES.len()],
    /// Responses sent with the TC bit.
    pub truncated: u64,
    /// Response sizes in bytes ([`SIZE_BOUNDS`]).
    pub response_bytes: Histogram<SIZE_BUCKETS>,
    /// From receive to send, microseconds ([`LATENCY_BOUNDS_US`]).
    pub latency_us: Histogram<LATENCY_BUCKETS>,
    /// TCP and TLS connections accepted, by transport.
    pub accepted: [u64; TRANSPORTS.len()],
    /// Connections closed at accept, by [`CONNECTION_LIMITS`].
    pub refused_connections: [u64; CONNECTION_LIMITS.len()],
    /// Idle connections closed at the total limit to make room for new ones.
    pub shed: u64,
    /// Busy connections closed at the total limit for a client holding fewer.
    pub shed_busy: u64,
    /// Connections taken in that ended, by [`CLOSE_REASONS`].
    pub closed: [u64; CLOSE_REASONS.len()],
    /// TLS handshakes completed, by [`HANDSHAKE_KINDS`].
    pub handshakes: [u64; HANDSHAKE_KINDS.len()],
    /// UDP datagrams dropped unread, by [`DROP_REASONS`].
    pub dropped: [u64; DROP_REASONS.len()],
}

impl Default for Totals {
    fn default() -> Self {
        Totals {
            queries: [[0; QTYPE_BUCKETS]; TRANSPORTS.len()],
            responses: [0; RCODES.len()],
            truncated: 0,
            response_bytes: Histogram::default(),
            latency_us: Histogram::default(),
            accepted: [0; TRANSPORTS.len()],
            refused_connections: [0; CONNECTION_LIMITS.len()],
            shed: 0,
            shed_busy: 0,
            closed: [0; CLOSE_REASONS.len()],
            handshakes: [0; HANDSHAKE_KINDS.len()],
            dropped: [0; DROP_REASONS.len()],
        }
    }
}

impl Totals {
    /// What was counted since `base`.
    pub fn minus(&self, base: &Totals) -> Totals {
        let sub = |a: &[u64], b: &[u64], out: &mut [u64]| {
            for i in 0..out.len() {
                out[i] = a[i].wrapping_sub(b[i]);
            }
        };
        let mut out = Totals::default();
        for t in 0..TRANSPORTS.len() {
            sub(&self.queries[t], &base.queries[t], &mut out.queries[t]);
        }
        sub(&self.responses, &base.responses, &mut out.responses);
        out.truncated = self.truncated.wrapping_sub(base.truncated);
        sub(&self.accepted, &base.accepted, &mut out.accepted);
        sub(
            &self.refused_connections,
            &base.refused_connections,
            &mut out.refused_connections,
        );
        out.shed = self.shed.wrapping_sub(base.shed);
        out.shed_busy = self.shed_busy.wrapping_sub(base.shed_busy);
        sub(&self.closed, &base.closed, &mut out.closed);
        sub(&self.handshakes, &base.handshakes, &mut out.handshakes);
        sub(&self.dropped, &base.dropped, &mut out.dropped);
        out.response_bytes = self.response_bytes.minus(&base.response_bytes);
        out.latency_us = self.latency_us.minus(&base.latency_us);
        out
    }

    /// Queries over `via`, all types.
    pub fn queries_via(&self, via: Via) -> u64 {
        self.queries[via as usize].iter().sum()
    }
}

/// Every worker's cells, and the baseline `ctl stats --reset` set.
#[derive(Debug, Default)]
pub struct Stats {
    workers: Mutex<Vec<Arc<Cells>>>,
    baseline: Mutex<Totals>,
}

impl Stats {
    /// New cells for a worker thread, counted from now on.
    pub fn worker(&self) -> Arc<Cells> {
        let cells = Arc::new(Cells::default());
        self.workers.lock().unwrap().push(cells.clone());
        cells
    }

    /// The calling thread's cells in `self`, made on its first call: for
    /// tasks, which run on whichever runtime thread is free.
    pub fn with_thread_cells<T>(self: &Arc<Self>, f: impl FnOnce(&Cells) -> T) -> T {
        thread_local! {
            /// The thread's cells per [`Stats`] (one, but for tests). The
            /// weak reference keeps a freed Stats' address from being
            /// taken by another while its entry is here.
            static MINE: RefCell<Vec<(Weak<Stats>, Arc<Cells>)>> = const { RefCell::new(Vec::new()) };
        }
        MINE.with_borrow_mut(|mine| {
            if let Some((_, cells)) = mine.iter().find(|(s, _)| std::ptr::eq(s.as_ptr(), &**self)) {
                return f(cells);
            }
            mine.retain(|(s, _)| s.strong_count() > 0);
            let cells = self.worker();
            let result = f(&cells);
            mine.push((Arc::downgrade(self), cells));
            result
        })
    }

    /// Every worker's counters summed, since the start.
    pub fn totals(&self) -> Totals {
        let mut totals = Totals::default();
        for cells in self.workers.lock().unwrap().iter() {
            cells.add_to(&mut totals);
        }
        totals
    }

    /// The counters since the last reset; with `reset`, start again from
    /// here (what Prometheus reads, [`Stats::totals`], does not change).
    pub fn since_reset(&self, reset: bool) -> Totals {
        let totals = self.totals();
        let mut baseline = self.baseline.lock().unwrap();
        let since = totals.minus(&baseline);
        if reset {
            *baseline = totals;
        }
        since
    }
}

/// The QTYPE of a message's question, read from its bytes (for queries
/// not parsed by the engine's fast path); None if it has no question or
/// the name is malformed or compressed.
pub fn qtype_of(message: &[u8]) -> Option<u16> {
    let qdcount = u16::from_be_bytes([*message.get(4)?, *message.get(5)?]);
    if qdcount == 0 {
        return None;
    }
    let mut at = 12;
    loop {
        let len = usize::from(*message.get(at)?);
        if len == 0 {
            break;
        }
        if len > 63 {
            return None;
        }
        at += 1 + len;
    }
    Some(u16::from_be_bytes([
        *message.get(at + 1)?,
        *message.get(at + 2)?,
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_types_have_their_own_bucket_or_other() {
        assert_eq!(qtype_label(qtype_bucket(1)), "A");
        assert_eq!(qtype_label(qtype_bucket(28)), "AAAA");
        assert_eq!(qtype_label(qtype_bucket(257)), "CAA");
        assert_eq!(qtype_label(qtype_bucket(252)), "AXFR");
        for other in [0, 3, 99, 256, 258, 65535] {
            assert_eq!(qtype_bucket(other), QTYPE_OTHER, "type {other}");
        }
    }

    #[test]
    fn workers_are_summed_and_reset_moves_a_baseline() {
        let stats = Arc::new(Stats::default());
        let (a, b) = (stats.worker(), stats.worker());
        a.query(Via::Udp, Some(1));
        b.query(Via::Udp, Some(1));
        b.query(Via::Tls, None);
        let mut response = vec![0u8; 100];
        response[3] = 3; // NXDOMAIN
        a.response(&response);
        a.response(&[0; 11]); // not a response
        // BADVERS and BADCOOKIE: 0 and 7 in the header, 1 in the OPT's
        // extended RCODE (black-box finding: counted as NOERROR and
        // YXRRSET). A NODATA answer (0, with authority) stays NOERROR.
        let opt = |low: u8, ns: u8| {
            let mut m = vec![0x12, 0x34, 0x81, low, 0, 1, 0, 0, 0, ns, 0, 1];
            m.extend_from_slice(b"\x01a\x00\x00\x01\x00\x01"); // a. A IN
            m.extend_from_slice(&[0, 0, 41, 4, 208, 1, 0, 0, 0, 0, 0]);
            m
        };
        b.response(&opt(0, 0));
        b.response(&opt(7, 0));
        b.response(&opt(0, 1)[..]);
        let totals = stats.totals();
        assert_eq!(totals.queries[Via::Udp as usize][qtype_bucket(1)], 2);
        assert_eq!(totals.queries[Via::Tls as usize][QTYPE_OTHER], 1);
        assert_eq!(totals.responses[3], 1);
        let named = |name: &str| totals.responses[RCODES.iter().position(|r| *r == name).unwrap()];
        assert_eq!((named("BADVERS"), named("BADCOOKIE")), (1, 1));
        assert_eq!((named("NOERROR"), named("YXRRSET")), (1, 0));
        assert_eq!(totals.responses.iter().sum::<u64>(), 4);
        assert_eq!(totals.response_bytes.count(), 4);

        assert_eq!(stats.since_reset(true).queries_via(Via::Udp), 2);
        a.query(Via::Udp, Some(28));
        assert_eq!(stats.since_reset(false).queries_via(Via::Udp), 1);
        assert_eq!(
            stats.totals().queries_via(Via::Udp),
            3,
            "exported counters go on"
        );
    }

    #[test]
    fn a_batch_is_observed_once_per_query() {
        let stats = Stats::default();
        let cells = stats.worker();
        cells.answered(Duration::from_micros(70), 32);
        cells.answered(Duration::from_secs(5), 1);
        let latency = stats.totals().latency_us;
        assert_eq!(latency.count(), 33);
        assert_eq!(latency.sum, 70 * 32 + 5_000_000);
        let buckets = latency.buckets_by_bound(&LATENCY_BOUNDS_US, 1e6);
        assert_eq!(buckets[1], (50e-6, 0));
        assert_eq!(buckets[2], (100e-6, 32));
        assert_eq!(buckets.last(), Some(&(f64::INFINITY, 1)));
        assert_eq!(buckets.iter().map(|(_, n)| n).sum::<u64>(), 33);
    }

    #[test]
    fn thread_cells_are_one_per_thread() {
        let stats = Arc::new(Stats::default());
        stats.with_thread_cells(|c| c.accepted(Via::Tcp));
        stats.with_thread_cells(|c| c.accepted(Via::Tls));
        let other = stats.clone();
        std::thread::spawn(move || {
            other.with_thread_cells(|c| c.refused(Limit::PerClient));
            other.with_thread_cells(|c| c.handshake(true));
        })
        .join()
        .unwrap();
        stats.with_thread_cells(|c| c.handshake(false));
        stats.with_thread_cells(|c| c.handshake(true));
        assert_eq!(stats.workers.lock().unwrap().len(), 2);
        let totals = stats.totals();
        assert_eq!(totals.accepted, [0, 1, 1, 0]);
        assert_eq!(totals.refused_connections, [0, 1, 0]);
        assert_eq!(totals.handshakes, [1, 2]);
        assert_eq!(totals.minus(&totals).handshakes, [0, 0]);
    }

    #[test]
    fn qtype_is_read_from_plain_and_malformed_messages() {
        let mut query = vec![0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        query.extend_from_slice(b"\x03www\x07example\x00\x00\x1c\x00\x01");
        assert_eq!(qtype_of(&query), Some(28));
        assert_eq!(qtype_of(&query[..query.len() - 3]), None, "cut short");
        assert_eq!(qtype_of(&query[..5]), None);
        let mut compressed = query[..12].to_vec();
        compressed.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1]);
        assert_eq!(qtype_of(&compressed), None);
        let mut no_question = query.clone();
        no_question[5] = 0;
        assert_eq!(qtype_of(&no_question), None);
    }
}
