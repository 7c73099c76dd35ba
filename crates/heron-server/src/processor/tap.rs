//! The query-log layer (dnstap): which exchanges are logged and what is
//! copied of them, for every transport. It decides and copies; a
//! [`TapSink`] (the dnstap writer, `crate::dnstap`) takes the copy
//! without blocking, and may drop it.
//!
//! Off, it costs a path one test of an `Option`. On, one query in
//! `every` is taken on each thread (a countdown in a thread-local: no
//! shared write, no clock); only a query taken reads the clock and
//! copies its bytes, and its response is taken with it.

use std::cell::Cell;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

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
    /// Since the Unix epoch, when the tap saw it.
    pub time: Duration,
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

/// The layer's settings and its sink.
pub struct Tap {
    /// Take one query in this many (1: all).
    every: u32,
    queries: bool,
    responses: bool,
    sink: Arc<dyn TapSink>,
}

thread_local! {
    /// Queries this thread lets pass before it takes one.
    static COUNTDOWN: Cell<u32> = const { Cell::new(0) };
}

impl Tap {
    /// Logs one query in `every` (0 is taken as 1), its query message if
    /// `queries`, its response if `responses`.
    pub fn new(every: u32, queries: bool, responses: bool, sink: Arc<dyn TapSink>) -> Tap {
        Tap {
            every: every.max(1),
            queries,
            responses,
            sink,
        }
    }

    /// Whether to log the exchange at hand: counts it down; true for one
    /// in `every` on each thread (its first, then every `every`th).
    #[inline]
    pub fn sample(&self) -> bool {
        COUNTDOWN.with(|left| match left.get() {
            0 => {
                left.set(self.every - 1);
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
    pub fn record(
        &self,
        (transport, peer, local): (Transport, SocketAddr, Option<SocketAddr>),
        query: &[u8],
        response: Option<&[u8]>,
    ) {
        let query: Box<[u8]> = if self.queries {
            query.into()
        } else {
            Box::default()
        };
        let response = response.filter(|_| self.responses).map(Box::from);
        if query.is_empty() && response.is_none() {
            return;
        }
        let time = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        self.sink.offer(Exchange {
            transport,
            peer,
            local,
            time,
            query,
            response,
        });
    }

    pub fn totals(&self) -> TapTotals {
        self.sink.totals()
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

    #[test]
    fn only_the_messages_asked_for_are_copied() {
        let keep = Arc::new(Keep::default());
        let at = (Transport::Tcp, "127.0.0.1:1".parse().unwrap(), None);
        Tap::new(1, false, true, keep.clone()).record(at, b"q", Some(b"r"));
        Tap::new(1, true, false, keep.clone()).record(at, b"q", Some(b"r"));
        // Responses only, and none sent: nothing to log.
        Tap::new(1, false, true, keep.clone()).record(at, b"q", None);
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
}
