//! The query-log layer (dnstap): which exchanges are logged and what is
//! copied of them, for every transport. It decides and copies; a
//! [`TapSink`] (the dnstap writer, `crate::dnstap`) takes the copy
//! without blocking, and may drop it.
//!
//! Off, it costs a path one test of an `Option`. On, one query in
//! `every` is taken on each thread (a countdown in a thread-local: no
//! shared write, no clock); only a query taken reads the clock and
//! copies its bytes, and its response is taken with it. A query taken is
//! dated when it was read (the transport says when), its response when it
//! is taken, and the zone that answers it is looked up in the catalog the
//! answer came from: dnstap's `query_time`, `response_time` and
//! `query_zone`.

use std::cell::Cell;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwapOption;
use std::time::{Duration, Instant, SystemTime};

use heron_proto::Name;
use heron_proto::message::parse_query;
use heron_zone::catalog::Catalog;

use super::Transport;

/// Where sampled exchanges go. `offer` must not block.
pub trait TapSink: Send + Sync {
    fn offer(&self, exchange: Exchange);
    /// What became of the exchanges offered so far.
    fn totals(&self) -> TapTotals;
}

/// A sink's counters, in messages (a query and its response are two).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TapTotals {
    pub written: u64,
    /// Dropped: the queue full, or the reader gone.
    pub dropped: u64,
    /// Waiting in the queue now, and their bytes.
    pub queued: u64,
    pub queued_bytes: u64,
}

/// A copy of a sampled query and its response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exchange {
    pub transport: Transport,
    pub peer: SocketAddr,
    /// Our address, when the transport knows it.
    pub local: Option<SocketAddr>,
    /// Since the Unix epoch, when the query was read.
    pub query_time: Duration,
    /// Since the Unix epoch, when the tap saw the response (or the query,
    /// if none was sent).
    pub time: Duration,
    /// The zone that answers the query (its apex, in wire form), if one
    /// does.
    pub zone: Option<Box<[u8]>>,
    /// The query's bytes (empty unless queries are logged).
    pub query: Box<[u8]>,
    /// The response's bytes, if there was one and responses are logged.
    pub response: Option<Box<[u8]>>,
}

impl Exchange {
    /// The dnstap messages this makes.
    pub fn messages(&self) -> u64 {
        u64::from(!self.query.is_empty()) + u64::from(self.response.is_some())
    }

    /// The bytes it holds, for the queue's bound.
    pub fn size(&self) -> usize {
        self.query.len() + self.response.as_ref().map_or(0, |r| r.len())
    }
}

/// Where and when a sampled exchange was seen, and the catalog that
/// answered it.
pub struct Seen<'a> {
    pub transport: Transport,
    pub peer: SocketAddr,
    /// Our address, when the transport knows it.
    pub local: Option<SocketAddr>,
    /// When the query was read.
    pub received: Instant,
    pub catalog: &'a Catalog,
}

/// Who asked what, when, over which transport: [`Seen`] without the
/// catalog, for an exchange whose zone is known (an UPDATE's).
#[derive(Clone, Copy, Debug)]
pub struct Exchanged {
    pub transport: Transport,
    pub peer: SocketAddr,
    pub local: Option<SocketAddr>,
    pub received: Instant,
}

/// The apex (wire form) of the zone in `catalog` that answers `query`.
fn zone_of(catalog: &Catalog, query: &[u8]) -> Option<Box<[u8]>> {
    let q = parse_query(query).ok()?;
    let zone = catalog.find(q.qname_lower.as_wire())?;
    Some(zone.origin().as_wire().into())
}

/// The layer's settings and its sink. A reload may turn it on, change
/// it or turn it off while workers use it ([`Tap::set`]): off, a query
/// costs one relaxed load.
pub struct Tap {
    on: AtomicBool,
    /// Take one query in this many (1: all).
    every: AtomicU32,
    queries: AtomicBool,
    responses: AtomicBool,
    sink: ArcSwapOption<Sink>,
    /// What the sinks replaced or turned off had written and dropped when
    /// they left, so that the totals only grow across reloads. (What an
    /// old writer still flushes after that is not counted.)
    retired: Mutex<(u64, u64)>,
}

impl std::fmt::Debug for Tap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tap")
            .field("on", &self.is_on())
            .finish_non_exhaustive()
    }
}

/// What a [`Tap`] is set to: one query in `every`, its query message if
/// `queries`, its response if `responses`, handed to `sink`.
pub struct TapSettings {
    pub every: u32,
    pub queries: bool,
    pub responses: bool,
    pub sink: Arc<dyn TapSink>,
}

/// A sink, sized for [`ArcSwapOption`].
struct Sink(Arc<dyn TapSink>);

thread_local! {
    /// Queries this thread lets pass before it takes one.
    static COUNTDOWN: Cell<u32> = const { Cell::new(0) };
}

impl Tap {
    /// Logs one query in `every` (0 is taken as 1), its query message if
    /// `queries`, its response if `responses`.
    pub fn new(every: u32, queries: bool, responses: bool, sink: Arc<dyn TapSink>) -> Tap {
        let tap = Tap::off();
        tap.set(Some(TapSettings {
            every,
            queries,
            responses,
            sink,
        }));
        tap
    }

    /// A layer that logs nothing until [`Tap::set`] turns it on.
    pub fn off() -> Tap {
        Tap {
            on: AtomicBool::new(false),
            every: AtomicU32::new(1),
            queries: AtomicBool::new(false),
            responses: AtomicBool::new(false),
            sink: ArcSwapOption::empty(),
            retired: Mutex::new((0, 0)),
        }
    }

    /// Turns the layer on with `settings`, or off with None. Exchanges
    /// under way may still reach the sink before.
    pub fn set(&self, settings: Option<TapSettings>) {
        let Some(settings) = settings else {
            self.on.store(false, Ordering::Relaxed);
            self.retire(self.sink.swap(None), None);
            return;
        };
        self.every.store(settings.every.max(1), Ordering::Relaxed);
        self.queries.store(settings.queries, Ordering::Relaxed);
        self.responses.store(settings.responses, Ordering::Relaxed);
        let next = settings.sink.clone();
        let old = self.sink.swap(Some(Arc::new(Sink(settings.sink))));
        self.retire(old, Some(&next));
        self.on.store(true, Ordering::Release);
    }

    /// Keeps the counts of a sink that leaves (not when `next` is the same
    /// sink, with new settings: its counts go on in it).
    fn retire(&self, old: Option<Arc<Sink>>, next: Option<&Arc<dyn TapSink>>) {
        let Some(old) = old else { return };
        let same =
            |next: &Arc<dyn TapSink>| std::ptr::addr_eq(Arc::as_ptr(next), Arc::as_ptr(&old.0));
        if next.is_some_and(same) {
            return;
        }
        let t = old.0.totals();
        let mut retired = self.retired.lock().unwrap_or_else(|p| p.into_inner());
        retired.0 += t.written;
        retired.1 += t.dropped;
    }

    /// Whether the layer logs anything.
    #[inline]
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Whether to log the exchange at hand: counts it down; true for one
    /// in `every` on each thread (its first, then every `every`th).
    /// Always false while off.
    #[inline]
    pub fn sample(&self) -> bool {
        if !self.is_on() {
            return false;
        }
        COUNTDOWN.with(|left| match left.get() {
            0 => {
                left.set(self.every.load(Ordering::Relaxed).max(1) - 1);
                true
            }
            n => {
                left.set(n - 1);
                false
            }
        })
    }

    /// Hands a copy of a sampled exchange to the sink: `response` is None
    /// when nothing was sent back (dropped, or a transfer's stream).
    pub fn record(&self, seen: Seen<'_>, query: &[u8], response: Option<&[u8]>) {
        let exchange = Exchanged {
            transport: seen.transport,
            peer: seen.peer,
            local: seen.local,
            received: seen.received,
        };
        self.offer(exchange, || zone_of(seen.catalog, query), query, response);
    }

    /// An UPDATE and the answer the update task sent for it, sampled now
    /// (the request was not logged when it came: its answer comes later).
    pub fn record_update(&self, exchange: Exchanged, zone: &Name, query: &[u8], response: &[u8]) {
        if self.sample() {
            let zone = || Some(zone.as_wire().into());
            self.offer(exchange, zone, query, Some(response));
        }
    }

    fn offer(
        &self,
        seen: Exchanged,
        zone: impl FnOnce() -> Option<Box<[u8]>>,
        query: &[u8],
        response: Option<&[u8]>,
    ) {
        let Some(sink) = self.sink.load_full() else {
            return;
        };
        let queries = self.queries.load(Ordering::Relaxed);
        let responses = self.responses.load(Ordering::Relaxed);
        let response = response.filter(|_| responses).map(Box::from);
        if !queries && response.is_none() {
            return;
        }
        let zone = zone();
        let query: Box<[u8]> = if queries {
            query.into()
        } else {
            Box::default()
        };
        let time = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let waited = seen.received.elapsed();
        sink.0.offer(Exchange {
            transport: seen.transport,
            peer: seen.peer,
            local: seen.local,
            query_time: time.saturating_sub(waited),
            time,
            zone,
            query,
            response,
        });
    }

    /// The counters since the start, over every sink it had; what is
    /// queued is the sink's now (zero while off).
    pub fn totals(&self) -> TapTotals {
        let now =
            (self.sink.load().as_ref()).map_or_else(TapTotals::default, |sink| sink.0.totals());
        let (written, dropped) = *self.retired.lock().unwrap_or_else(|p| p.into_inner());
        TapTotals {
            written: now.written + written,
            dropped: now.dropped + dropped,
            ..now
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A sink that keeps what it is offered.
    #[derive(Default)]
    pub(crate) struct Keep(pub Mutex<Vec<Exchange>>);

    impl TapSink for Keep {
        fn offer(&self, exchange: Exchange) {
            self.0.lock().unwrap().push(exchange);
        }
        fn totals(&self) -> TapTotals {
            TapTotals::default()
        }
    }

    /// A reload turns the layer on, changes it and turns it off: off,
    /// nothing is sampled and nothing reaches a sink.
    #[test]
    fn set_turns_the_layer_on_changes_it_and_turns_it_off() {
        let tap = Tap::off();
        assert!(!tap.is_on());
        assert_eq!((0..100).filter(|_| tap.sample()).count(), 0);
        let settings = |every, sink: &Arc<Keep>| TapSettings {
            every,
            queries: true,
            responses: false,
            sink: sink.clone(),
        };
        let (first, second) = (Arc::new(Keep::default()), Arc::new(Keep::default()));
        tap.set(Some(settings(1, &first)));
        assert!(tap.is_on());
        assert_eq!((0..100).filter(|_| tap.sample()).count(), 100);
        tap.set(Some(settings(4, &second)));
        assert_eq!((0..100).filter(|_| tap.sample()).count(), 25);
        tap.set(None);
        assert!(!tap.is_on());
        assert_eq!((0..100).filter(|_| tap.sample()).count(), 0);
        assert_eq!(tap.totals(), TapTotals::default());
    }

    /// A sink that says it wrote `.0` and dropped `.1`.
    struct Counted(u64, u64);

    impl TapSink for Counted {
        fn offer(&self, _: Exchange) {}
        fn totals(&self) -> TapTotals {
            TapTotals {
                written: self.0,
                dropped: self.1,
                queued: 1,
                queued_bytes: 10,
            }
        }
    }

    /// Black-box finding: heron_dnstap_messages_total fell to 0 when a
    /// reload started a new writer. The counts of sinks that left are
    /// kept; a sink set again with new settings is not counted twice.
    #[test]
    fn totals_only_grow_across_sinks() {
        let settings = |sink: &Arc<Counted>| TapSettings {
            every: 1,
            queries: true,
            responses: true,
            sink: sink.clone(),
        };
        let (first, second) = (Arc::new(Counted(5, 1)), Arc::new(Counted(2, 0)));
        let tap = Tap::new(1, true, true, first.clone());
        assert_eq!((tap.totals().written, tap.totals().dropped), (5, 1));
        tap.set(Some(settings(&second)));
        assert_eq!((tap.totals().written, tap.totals().dropped), (7, 1));
        tap.set(Some(TapSettings {
            every: 4,
            ..settings(&second)
        }));
        assert_eq!(tap.totals().written, 7, "the same sink, new settings");
        assert_eq!(tap.totals().queued, 1, "queued is the sink's now");
        tap.set(None);
        let off = tap.totals();
        assert_eq!((off.written, off.dropped, off.queued), (7, 1, 0));
    }

    #[test]
    fn one_in_every_is_taken_on_each_thread() {
        let tap = Tap::new(10, true, true, Arc::new(Keep::default()));
        let taken = |tap: &Tap| (0..1000).filter(|_| tap.sample()).count();
        assert_eq!(taken(&tap), 100);
        std::thread::scope(|s| {
            let other = s.spawn(|| taken(&tap));
            assert_eq!(other.join().unwrap(), 100);
        });
        let all = Tap::new(0, true, true, Arc::new(Keep::default()));
        assert_eq!(taken(&all), 1000);
    }

    fn seen(catalog: &Catalog) -> Seen<'_> {
        Seen {
            transport: Transport::Tcp,
            peer: "127.0.0.1:1".parse().unwrap(),
            local: None,
            received: Instant::now(),
            catalog,
        }
    }

    #[test]
    fn only_the_messages_asked_for_are_copied() {
        let keep = Arc::new(Keep::default());
        let catalog = Catalog::new();
        let at = || seen(&catalog);
        Tap::new(1, false, true, keep.clone()).record(at(), b"q", Some(b"r"));
        Tap::new(1, true, false, keep.clone()).record(at(), b"q", Some(b"r"));
        // Responses only, and none sent: nothing to log.
        Tap::new(1, false, true, keep.clone()).record(at(), b"q", None);
        let got = keep.0.lock().unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(
            (&*got[0].query, got[0].response.as_deref()),
            (&b""[..], Some(&b"r"[..]))
        );
        assert_eq!(
            (&*got[1].query, got[1].response.as_deref()),
            (&b"q"[..], None)
        );
        assert_eq!(got[0].messages() + got[1].messages(), 2);
    }

    /// dnstap's query_time is when the query was read, its response's
    /// time later; query_zone the zone that answers it, none for a name
    /// no zone holds or a query that does not parse.
    #[test]
    fn a_query_is_dated_when_read_and_names_its_zone() {
        let keep = Arc::new(Keep::default());
        let zone = heron_zone::load_zone_str(
            "$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n",
            "t",
            &heron_proto::Name::parse("example").unwrap(),
        )
        .unwrap()
        .zone;
        let mut catalog = Catalog::new();
        catalog.insert(zone);
        let tap = Tap::new(1, true, true, keep.clone());
        let query = |name: &str| {
            let mut q = vec![0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
            for label in name.split('.') {
                q.push(label.len() as u8);
                q.extend_from_slice(label.as_bytes());
            }
            q.extend_from_slice(&[0, 0, 1, 0, 1]);
            q
        };
        let read = Seen {
            received: Instant::now() - Duration::from_millis(3),
            ..seen(&catalog)
        };
        tap.record(read, &query("www.Example"), Some(b"r"));
        tap.record(seen(&catalog), &query("www.other"), Some(b"r"));
        tap.record(seen(&catalog), b"\x12\x34", Some(b"r"));
        let got = keep.0.lock().unwrap();
        assert_eq!(got[0].zone.as_deref(), Some(&b"\x07example\x00"[..]));
        let waited = got[0].time - got[0].query_time;
        assert!(waited >= Duration::from_millis(3), "{waited:?}");
        assert_eq!(got[1].zone, None);
        assert_eq!(got[2].zone, None);
    }
}
