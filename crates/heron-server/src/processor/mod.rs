//! The query processor: one I/O-free path from a query's bytes to what
//! goes back, shared by every transport (UDP, TCP, TLS, AF_XDP).
//! It opens no socket, reads no clock (the caller says when it is: `now`),
//! spawns nothing and sends on no channel: it returns an [`Outcome`] and
//! appends [`Event`]s for the transport's driver to hand on.
//!
//! # Layers, in order
//!
//! 1. [`parse`]: the query is read once, into a reused [`Query`]; a
//!    malformed one is answered FORMERR, a response or runt is dropped. A
//!    plain query (no TSIG, not NOTIFY, not AXFR/IXFR) goes straight to
//!    the answer engine from here: that is the fast path, one call into
//!    `heron_zone`. The others are *deferred* and take the layers below.
//!    The datagram batch paths (UDP and XDP) parse a whole batch in the
//!    engine's [`BatchAnswerer`](heron_zone::BatchAnswerer); the plain
//!    queries of every transport then take [`Processor::plain_layers`],
//!    the one list of their layers (screen, cookies, answer, options), and
//!    the deferred ones [`Processor::process_parsed`].
//! 2. [`acl`]: who may do what: transfers (`allow-transfer`), NOTIFY
//!    (`allow-notify`, and only for zones we are secondary for) and
//!    UPDATE (some `allow-update` rule is for the sender). Decided on
//!    the address and the key the TSIG record names; the verdict is
//!    applied after `tsig` has verified that key, so a bad signature gets
//!    its TSIG error whatever the address (RFC 8945 5.2) and a refusal of
//!    a signed request is signed. Query ACLs (`allow-query`) are checked
//!    here for deferred queries; plain ones, and the `blackhole` that
//!    drops a query unanswered, are checked by [`Processor::screen`]
//!    ahead of the engine. Both only when a [`QueryPolicy`] is configured:
//!    without one the fast path pays a single branch.
//! 3. [`tsig`]: the signature is verified at the position `parse` found
//!    (the message is not walked again); a failure is NOTAUTH with the
//!    TSIG error, and so is a copy of a request answered already
//!    ([`replay`]: BADTIME). The verified key is carried to `sign`.
//! 4. [`cookies`], then response rate limiting: after TSIG (a signed
//!    request is not rate limited as an anonymous one). The cookie layer
//!    decides before any answer is built (FORMERR, BADCOOKIE) and appends
//!    the COOKIE option to the answer after (before `sign`); a plain query
//!    with a COOKIE option takes it on the fast path too, one branch for
//!    those without. Rate limiting needs the response and is for
//!    datagrams alone: it is the UDP and XDP workers' layer
//!    ([`crate::udp::limit`], applied by [`crate::datagram`]), one table
//!    per worker, applied to the engine's answers and errors after they are
//!    written (a client with a valid server cookie is exempt).
//! 5. [`answer`] (a signed plain query, through the engine, with room
//!    kept for the TSIG record), [`transfer`] (AXFR/IXFR: a [`Transfer`]
//!    stream, or over UDP the SOA alone), [`notify`] (a NOTIFY event) or
//!    [`update`] (an UPDATE handed out as [`Outcome::Update`], for the
//!    server's update task to apply and answer, signed, later).
//!    The full message is walked once more only for an SOA serial: an
//!    IXFR's (authority section) or a NOTIFY's (answer section).
//!    Then [`options`]: NSID and EDNS EXPIRE when the query asked.
//! 6. [`sign`]: the response, or each message of a stream, is signed
//!    when the request was.
//! 7. [`size`]: a UDP response that does not fit the client's size is
//!    cut to its question with TC set (and signed again).
//!
//! Every response without an answer is written by one function,
//! [`heron_proto::writer::header_response`], with the one
//! [`response_flags`](heron_proto::message::response_flags) the engine
//! uses too: QR; opcode, RD and CD copied; AA only for an authoritative
//! answer from a zone we serve.

mod acl;
mod answer;
pub mod cookies;
pub mod log_limit;
mod notify;
mod options;
mod parse;
pub mod replay;
mod resent;
mod sign;
mod size;
pub mod tap;
pub mod transfer;
mod tsig;
pub mod update;

#[cfg(test)]
mod tests;

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use heron_proto::edns::{OptionWriter, opt_record};
use heron_proto::message::Query;
use heron_proto::tsig::{Key, Verified};
use heron_proto::writer::header_response;
use heron_proto::{Name, Rcode};
use heron_xfr::acl::Denied;
use heron_xfr::keys::SharedKeys;
use heron_xfr::primary::Primary;
use heron_zone::catalog::ShardedSet;
use heron_zone::{AnswerConfig, Answered, Catalog, Summary, is_deferred};

use crate::SharedCatalog;
use acl::Admission;
pub use acl::{QueryPolicy, SharedQueryPolicy};
use cookies::{Cookies, Step};
use log_limit::{LOG_INTERVAL, LogLimiter};
use replay::ReplayCache;
use tap::Tap;
pub use transfer::{Messages, Transfer};
pub use update::UpdateRequest;

/// How a query arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Udp,
    Tcp,
    /// DNS over TLS (RFC 7858) or XFR over TLS (RFC 9103): TCP's rules.
    Tls,
}

impl Transport {
    /// What the answer engine needs to know: the size limit.
    fn engine(self) -> heron_zone::Transport {
        match self {
            Transport::Udp => heron_zone::Transport::Udp,
            Transport::Tcp | Transport::Tls => heron_zone::Transport::Tcp,
        }
    }
}

/// One query as a transport received it.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    pub bytes: &'a [u8],
    pub peer: SocketAddr,
    pub transport: Transport,
    /// Seconds since the Unix epoch (TSIG's clock).
    pub now: u64,
    /// The address it came to, when the transport knows it (dnstap).
    pub local: Option<SocketAddr>,
    /// When it was read, for the query time dnstap logs.
    pub received: std::time::Instant,
}

/// What to send back.
#[derive(Debug)]
pub enum Outcome {
    /// One response, in the caller's buffer.
    Response,
    /// Nothing.
    Nothing,
    /// A zone transfer: pull its messages one at a time
    /// ([`Transfer::messages`]) and write each as it comes.
    Transfer(Box<Transfer>),
    /// A dynamic update, for the update task to apply and answer
    /// ([`UpdateRequest::response`]); nothing is written yet.
    Update(Box<UpdateRequest>),
}

/// What happened that someone outside the processor acts on or counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A NOTIFY accepted for a zone we are secondary for.
    Notify(NotifyReceived),
    /// A request refused, and why.
    Refused(Refusal),
}

/// A NOTIFY that passed its checks: the zone and who sent it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotifyReceived {
    pub origin: Name,
    pub from: SocketAddr,
    /// The serial in the NOTIFY's answer section, if it had one.
    pub serial: Option<u32>,
}

/// Why a request got a refusal or an error rather than its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The TSIG did not verify (NOTAUTH with the TSIG error).
    Tsig,
    /// A signed request seen already (NOTAUTH, BADTIME, signed).
    TsigReplay,
    AxfrOverUdp,
    /// A transfer of a zone we do not serve (NOTAUTH).
    ZoneNotServed,
    TransferDenied(Denied),
    /// An IXFR request without the client's SOA (FORMERR).
    IxfrWithoutSoa,
    /// A NOTIFY for a zone we are not secondary for (NOTAUTH).
    NotSecondary,
    NotifyDenied(Denied),
    /// A query `allow-query` does not allow (REFUSED with Extended DNS
    /// Error 18, Prohibited).
    QueryDenied(Denied),
    /// An UPDATE for a zone we do not serve (NOTAUTH).
    UpdateNotServed,
    /// An UPDATE from a sender no `allow-update` rule is for (REFUSED).
    UpdateDenied,
    /// An UPDATE whose zone section's type is not SOA (FORMERR, RFC 2136
    /// 3.1.1), whatever the zone.
    UpdateZoneNotSoa,
    /// A datagram from a `blackhole` address: dropped, never answered
    /// (TCP counts those at accept, as connections refused).
    Blackholed,
    /// An admitted UPDATE the update queue had no room for (SERVFAIL).
    UpdateQueueFull,
    /// A signed UPDATE sent again by its sender: not answered (the
    /// first one's answer is on its way, or was lost).
    UpdateResent,
    /// A transfer of a secondary zone that expired (SERVFAIL, as its
    /// queries get and as Knot answers; NOTAUTH sent the downstream
    /// secondary's operator to its keys and ACLs: black-box finding
    /// AV-4).
    ZoneExpired,
    /// An UPDATE of a zone configured here whose file did not load, or
    /// that expired (SERVFAIL, as its queries get and as BIND and Knot
    /// answer; NOTAUTH told the client it had the wrong server: black-box
    /// finding BA-5).
    UpdateZoneNotLoaded,
}

/// Whether a cookie check may answer `q`: not a request of an EDNS
/// version we do not speak (RFC 6891 6.1.3: BADVERS, whose options are
/// not ours to judge) nor of an opcode we do not implement (NOTIMP), as
/// BIND answers them under `require-server-cookie`.
#[inline]
fn cookies_apply(q: &Query) -> bool {
    use heron_proto::Opcode;
    let opcode = q.header.opcode();
    q.edns.is_some_and(|e| e.version == 0)
        && (opcode == Opcode::QUERY || opcode == Opcode::NOTIFY || opcode == Opcode::UPDATE)
}

/// Whether `q` asked for an EDNS option [`Processor::add_options`] may
/// add: a path that answers through the engine itself calls that only then.
#[inline]
pub fn asks_options(q: &Query) -> bool {
    options::asked(q)
}

/// What [`Processor::screen`] decided about a query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Screened {
    /// On to the engine.
    Pass,
    /// From a blackholed address: no answer at all.
    Drop,
    /// Refused: the response is written.
    Refused,
}

/// What [`Processor::plain_layers`] made of a query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plain {
    /// From a blackholed address (or one that is neither IPv4 nor
    /// IPv6, with an ACL configured): no answer, no log.
    Blackholed,
    /// Refused by the query ACL: the refusal is written, to send.
    Refused,
    /// For the deferred layers ([`Processor::process_parsed`]).
    Deferred,
    /// The engine's (or the cookie layer's) response is written; `send`
    /// is false when it chose to drop the query. `summary` is what rate
    /// limiting keys it by; `rrl_exempt` when a valid server cookie
    /// came with it.
    Answered {
        send: bool,
        summary: Summary,
        rrl_exempt: bool,
    },
}

impl Plain {
    /// What the engine (or the cookie layer) `answered`, as a layer's end.
    #[inline(always)]
    fn answered((answered, summary): (Answered, Summary), rrl_exempt: bool) -> Plain {
        let send = match answered {
            Answered::Response => true,
            Answered::Drop => false,
            Answered::Deferred => return Plain::Deferred,
        };
        Plain::Answered {
            send,
            summary,
            rrl_exempt,
        }
    }
}

impl Refusal {
    /// How many kinds there are, for counters indexed by [`Refusal::kind`].
    pub const KINDS: usize = 17;

    /// A name for each kind, in the order of [`Refusal::kind`].
    pub const KIND_NAMES: [&'static str; Refusal::KINDS] = [
        "tsig",
        "axfr-over-udp",
        "zone-not-served",
        "transfer-denied",
        "ixfr-without-soa",
        "not-secondary",
        "notify-denied",
        "query-denied",
        "tsig-replay",
        "update-not-served",
        "update-denied",
        "update-zone-not-soa",
        "blackhole",
        "update-queue-full",
        "update-resent",
        "zone-expired",
        "update-zone-not-loaded",
    ];

    /// A number below [`Refusal::KINDS`], one per variant (the reason a
    /// list denied is not told apart).
    pub fn kind(self) -> usize {
        match self {
            Refusal::Tsig => 0,
            Refusal::AxfrOverUdp => 1,
            Refusal::ZoneNotServed => 2,
            Refusal::TransferDenied(_) => 3,
            Refusal::IxfrWithoutSoa => 4,
            Refusal::NotSecondary => 5,
            Refusal::NotifyDenied(_) => 6,
            Refusal::QueryDenied(_) => 7,
            Refusal::TsigReplay => 8,
            Refusal::UpdateNotServed => 9,
            Refusal::UpdateDenied => 10,
            Refusal::UpdateZoneNotSoa => 11,
            Refusal::Blackholed => 12,
            Refusal::UpdateQueueFull => 13,
            Refusal::UpdateResent => 14,
            Refusal::ZoneExpired => 15,
            Refusal::UpdateZoneNotLoaded => 16,
        }
    }

    /// Reasons the log tells apart: the kinds, and a list's two ways to
    /// deny (address, key) apart, each of which an operator acts on.
    const LOG_REASONS: usize = Refusal::KINDS + 2;

    fn log_reason(self) -> usize {
        match self {
            Refusal::TransferDenied(Denied::Key) => Refusal::KINDS,
            Refusal::NotifyDenied(Denied::Key) => Refusal::KINDS + 1,
            _ => self.kind(),
        }
    }

    fn rcode(self) -> Rcode {
        match self {
            Refusal::Tsig
            | Refusal::TsigReplay
            | Refusal::ZoneNotServed
            | Refusal::UpdateNotServed
            | Refusal::NotSecondary => Rcode::NOTAUTH,
            Refusal::IxfrWithoutSoa | Refusal::UpdateZoneNotSoa => Rcode::FORMERR,
            // As NSD and Knot: AXFR needs a stream (RFC 5936 4.2).
            Refusal::AxfrOverUdp => Rcode::NOTIMP,
            Refusal::TransferDenied(_)
            | Refusal::NotifyDenied(_)
            | Refusal::QueryDenied(_)
            | Refusal::UpdateDenied => Rcode::REFUSED,
            // Never sent: a blackholed request gets no response.
            Refusal::Blackholed => Rcode::REFUSED,
            Refusal::UpdateQueueFull | Refusal::ZoneExpired | Refusal::UpdateZoneNotLoaded => {
                Rcode::SERVFAIL
            }
            // Never sent: a resent UPDATE gets no response of its own.
            Refusal::UpdateResent => Rcode::REFUSED,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Tsig => f.write_str("TSIG check failed"),
            Refusal::TsigReplay => f.write_str("signed request replayed"),
            Refusal::AxfrOverUdp => f.write_str("AXFR over UDP"),
            Refusal::ZoneNotServed => f.write_str("transfer of a zone not served"),
            Refusal::TransferDenied(why) => write!(f, "transfer ({why})"),
            Refusal::IxfrWithoutSoa => f.write_str("IXFR without an SOA"),
            Refusal::NotSecondary => f.write_str("NOTIFY for a zone we are not secondary for"),
            Refusal::NotifyDenied(why) => write!(f, "NOTIFY ({why})"),
            Refusal::QueryDenied(why) => write!(f, "query ({why})"),
            Refusal::UpdateNotServed => f.write_str("UPDATE of a zone not served"),
            Refusal::UpdateDenied => f.write_str("UPDATE (no allow-update rule for the sender)"),
            Refusal::UpdateZoneNotSoa => {
                f.write_str("UPDATE whose zone section is not of type SOA")
            }
            Refusal::Blackholed => f.write_str("request from a blackholed address"),
            Refusal::UpdateQueueFull => f.write_str("UPDATE with the update queue full"),
            Refusal::UpdateResent => f.write_str("UPDATE sent again"),
            Refusal::ZoneExpired => f.write_str("transfer of a zone that expired"),
            Refusal::UpdateZoneNotLoaded => {
                f.write_str("UPDATE of a zone whose file did not load, or that expired")
            }
        }
    }
}

/// Everything a query is answered from; shared by all workers.
pub struct Processor {
    catalog: SharedCatalog,
    config: AnswerConfig,
    keys: Arc<SharedKeys>,
    primary: Arc<Primary>,
    /// Lower-cased origins of the zones we are secondary for: NOTIFY is
    /// accepted for these only. Shared, as a reload or a catalog zone
    /// changes them while queries are answered.
    secondaries: SharedOrigins,
    /// Signed requests answered already, to refuse their copies.
    replays: ReplayCache,
    /// Answers to signed UPDATEs, for their senders' copies.
    update_answers: Arc<resent::UpdateAnswers>,
    /// One warning per kind of refusal per [`LOG_INTERVAL`].
    log: LogLimiter<{ Refusal::LOG_REASONS }>,
    /// The first [`notify::LINES`] NOTIFYs accepted per [`LOG_INTERVAL`]
    /// get a line; the rest are counted in the next one.
    notify_log: LogLimiter<1>,
    /// Held only when something is configured (the fast path's branch);
    /// shared with the reload that replaces it.
    query_policy: Arc<SharedQueryPolicy>,
    /// This server's NSID (RFC 5001), if configured.
    nsid: Option<Box<[u8]>>,
    /// The TCP idle timeout in 100 ms units, as edns-tcp-keepalive
    /// tells it (RFC 7828).
    tcp_keepalive: u16,
    /// None when cookies are disabled.
    cookies: Option<Cookies>,
    /// The query log (dnstap); None, or a [`Tap`] that is off: off.
    tap: Option<Arc<Tap>>,
}

/// `idle` in the 100 ms units of edns-tcp-keepalive, at most its 16 bits
/// (6,553.5 s; the idle timeout may be a day).
fn keepalive_tenths(idle: std::time::Duration) -> u16 {
    (idle.as_millis() / 100).min(u16::MAX as u128) as u16
}

/// A set of lower-cased origins that is replaced whole while read; a new
/// version shares every shard it does not change with the one before
/// (one zone added to 100,000 copies one shard).
pub type SharedOrigins = Arc<arc_swap::ArcSwap<ShardedSet<Name>>>;

/// A deferred query on its way through the layers after `parse`.
struct Deferred<'a> {
    req: &'a Request<'a>,
    q: &'a Query,
    config: &'a AnswerConfig,
    /// Set by the `tsig` layer when the request was signed and verified.
    signed: Option<Verified>,
}

impl Deferred<'_> {
    /// The question section as sent, to echo.
    fn question(&self) -> &[u8] {
        &self.req.bytes[self.q.question.clone()]
    }

    /// Room a response leaves for the TSIG record `sign` appends.
    fn tsig_room(&self) -> usize {
        self.signed.as_ref().map_or(0, |v| v.key.rr_len())
    }

    /// The header and question with `rcode`; AA if `authoritative`; an
    /// OPT record if the query had one (RFC 6891 6.1.1: a responder MUST).
    fn header_response(&self, rcode: Rcode, authoritative: bool, out: &mut Vec<u8>) {
        header_response(out, &self.q.header, self.question(), rcode, authoritative);
        if let Some(edns) = self.q.edns {
            let payload = self.config.max_udp_payload;
            out.extend_from_slice(&opt_record(payload, rcode.0, edns.do_bit));
            let arcount = u16::from_be_bytes([out[10], out[11]]) + 1;
            out[10..12].copy_from_slice(&arcount.to_be_bytes());
        }
    }
}

impl Processor {
    /// Says (rate limited, as other refusals) that an admitted UPDATE
    /// found the update queue full and was answered SERVFAIL: a flood
    /// of updates must not fail others' unseen (black-box finding).
    pub fn log_update_queue_full(&self, origin: &Name, peer: SocketAddr) {
        let refusal = Refusal::UpdateQueueFull;
        let now = heron_proto::time::unix_now();
        if let Some(due) = self.log.admit(refusal.log_reason(), now) {
            tracing::warn!(
                zone = %origin,
                %peer,
                "{refusal} from {peer} for {origin}: answered SERVFAIL (at most {} updates \
                 wait at once){}",
                crate::update::QUEUE_LEN,
                due.tail()
            );
        }
    }

    /// A processor answering from `catalog` with `config`, transfers and
    /// NOTIFY policies from `primary`, TSIG keys `keys`, secondary for
    /// nothing (see [`Processor::with_secondaries`]).
    pub fn new(
        catalog: SharedCatalog,
        config: AnswerConfig,
        primary: Arc<Primary>,
        keys: Arc<Vec<Key>>,
    ) -> Processor {
        Processor {
            catalog,
            config,
            keys: SharedKeys::new(keys),
            primary,
            secondaries: SharedOrigins::default(),
            replays: ReplayCache::new(replay::DEFAULT_CAPACITY),
            update_answers: Arc::default(),
            log: LogLimiter::new(LOG_INTERVAL),
            notify_log: LogLimiter::with_lines(LOG_INTERVAL, notify::LINES),
            query_policy: Arc::default(),
            nsid: None,
            tcp_keepalive: keepalive_tenths(crate::TcpLimits::default().idle_timeout),
            cookies: None,
            tap: None,
        }
    }

    /// Signed requests count as possibly answered before (refused as
    /// copies) when signed before `started` (Unix seconds), not before
    /// the processor was made: for tests of requests signed at a fixed
    /// time (0: none is).
    pub fn with_replays_since(mut self, started: u64) -> Processor {
        self.replays = ReplayCache::since(replay::DEFAULT_CAPACITY, started);
        self
    }

    /// Query ACLs and blackhole; an empty policy is not kept.
    pub fn with_query_policy(self, policy: QueryPolicy) -> Processor {
        self.with_shared_query_policy(SharedQueryPolicy::new(policy))
    }

    /// Query ACLs and blackhole as `policy` holds them, which a reload
    /// replaces.
    pub fn with_shared_query_policy(mut self, policy: Arc<SharedQueryPolicy>) -> Processor {
        self.query_policy = policy;
        self
    }

    /// The NSID this server answers with (none if empty).
    pub fn with_nsid(mut self, nsid: Vec<u8>) -> Processor {
        self.nsid = (!nsid.is_empty()).then(|| nsid.into_boxed_slice());
        self
    }

    /// The idle timeout of TCP and TLS connections, which the answers
    /// to a query with edns-tcp-keepalive carry.
    pub fn with_tcp_idle_timeout(mut self, idle: std::time::Duration) -> Processor {
        self.tcp_keepalive = keepalive_tenths(idle);
        self
    }

    /// Whether [`Processor::screen`] has anything to do: the one branch
    /// a fast path takes when no query ACL or blackhole is configured.
    #[inline]
    pub fn screens(&self) -> bool {
        self.query_policy.held()
    }

    /// Whether a connection or datagram from `ip` is to be ignored.
    pub fn blackholes(&self, ip: std::net::IpAddr) -> bool {
        self.screens() && (self.query_policy.load().as_ref()).is_some_and(|p| p.blackholes(ip))
    }

    /// The `acl` layer for a query the engine would answer, from a path
    /// that parsed it already: `q` is None when it did not parse (only
    /// the blackhole applies then). Deferred queries are checked later,
    /// with their key; they pass here unless blackholed.
    pub fn screen(
        &self,
        catalog: &Catalog,
        req: &Request,
        q: Option<&Query>,
        out: &mut Vec<u8>,
        events: &mut Vec<Event>,
    ) -> Screened {
        let policy = self.query_policy.load();
        let Some(policy) = &*policy else {
            return Screened::Pass;
        };
        if policy.blackholes(req.peer.ip()) {
            events.push(Event::Refused(Refusal::Blackholed));
            return Screened::Drop;
        }
        let Some(q) = q.filter(|q| !is_deferred(q)) else {
            return Screened::Pass;
        };
        match policy.check_query(catalog, req.peer.ip(), None, q) {
            Ok(()) => Screened::Pass,
            Err(why) => {
                let d = Deferred {
                    req,
                    q,
                    config: &self.config,
                    signed: None,
                };
                self.refuse(&d, Refusal::QueryDenied(why), out, events);
                Screened::Refused
            }
        }
    }

    /// Answers DNS cookies with `cookies` (None: the option is ignored).
    pub fn with_cookies(mut self, cookies: Option<Cookies>) -> Processor {
        self.cookies = cookies;
        self
    }

    /// The cookie layer for a plain query `q` from `req`, if cookies are on
    /// and the query has a COOKIE option; else [`Step::Ignore`].
    #[inline(always)]
    fn cookie_step(&self, req: &Request, q: &Query, out: &mut Vec<u8>) -> Step {
        match &self.cookies {
            Some(cookies) if cookies::has_cookie(q) && cookies_apply(q) => {
                let question = &req.bytes[q.question.clone()];
                let udp = req.transport == Transport::Udp;
                cookies.check(q, question, req.peer.ip(), req.now, udp, out)
            }
            _ => Step::Ignore,
        }
    }

    /// Logs sampled exchanges to `tap` (dnstap).
    pub fn with_tap(mut self, tap: Option<Tap>) -> Processor {
        self.tap = tap.map(Arc::new);
        self
    }

    /// Logs sampled exchanges to `tap`, which its owner may turn on, change
    /// or turn off while this runs ([`Tap::set`]; a reload's `[dnstap]`).
    pub fn with_shared_tap(mut self, tap: Arc<Tap>) -> Processor {
        self.tap = Some(tap);
        self
    }

    /// The query-log layer, if on: a path that answers without
    /// [`Processor::process`] (the UDP and XDP batches) tests this once
    /// per batch and, per exchange, [`Tap::sample`] before
    /// [`Tap::record`].
    #[inline]
    pub fn tap(&self) -> Option<&Tap> {
        self.tap.as_deref().filter(|tap| tap.is_on())
    }

    /// The zones we are secondary for, whose NOTIFYs are accepted.
    pub fn with_secondaries(mut self, origins: impl IntoIterator<Item = Name>) -> Processor {
        let origins = origins.into_iter().map(|o| o.to_lowercase()).collect();
        self.secondaries = Arc::new(arc_swap::ArcSwap::from_pointee(origins));
        self
    }

    /// The zones we are secondary for, as their owner changes them (each
    /// origin lower-cased).
    pub fn with_shared_secondaries(mut self, origins: SharedOrigins) -> Processor {
        self.secondaries = origins;
        self
    }

    pub fn catalog(&self) -> &SharedCatalog {
        &self.catalog
    }

    /// Verifies and signs with `keys`, which the server replaces when a
    /// reload reads new ones (shared with the transfers' side).
    pub fn with_keys(mut self, keys: Arc<SharedKeys>) -> Processor {
        self.keys = keys;
        self
    }

    pub fn config(&self) -> &AnswerConfig {
        &self.config
    }

    /// Processes one query: the response goes to `out` (cleared first),
    /// events are appended to `events`.
    pub fn process(&self, req: &Request, out: &mut Vec<u8>, events: &mut Vec<Event>) -> Outcome {
        if self.blackholes(req.peer.ip()) {
            // Over TCP and TLS, only from a connection open before a
            // reload added the prefix (others are closed at accept): the
            // transport closes it (black-box finding AZ-3: it stayed
            // open, its queries dropped and counted nowhere).
            events.push(Event::Refused(Refusal::Blackholed));
            return Outcome::Nothing;
        }
        let outcome = self.respond(req, out, events);
        // An UPDATE is logged with its answer, by the update task.
        let later = matches!(outcome, Outcome::Update(_));
        if let Some(tap) = &self.tap
            && !later
            && tap.sample()
        {
            let response = matches!(outcome, Outcome::Response).then_some(&out[..]);
            let seen = tap::Seen {
                transport: req.transport,
                peer: req.peer,
                local: req.local,
                received: req.received,
                catalog: &self.catalog.load(),
            };
            tap.record(seen, req.bytes, response);
        }
        outcome
    }

    /// [`Processor::process`] but the blackhole and the query log.
    fn respond(&self, req: &Request, out: &mut Vec<u8>, events: &mut Vec<Event>) -> Outcome {
        parse::with_query(req.bytes, out, |q, out| {
            if is_deferred(q) {
                return self.process_parsed(req, q, out, events);
            }
            let catalog = self.catalog.load();
            let answer = |out: &mut Vec<u8>| {
                answer::plain(&catalog, &self.config, req, q, out);
                (Answered::Response, Summary::PLAIN)
            };
            let request = || Some(*req);
            match self.plain_layers(&catalog, Some(q), true, request, answer, out, events) {
                Plain::Answered { send: false, .. } | Plain::Blackholed => Outcome::Nothing,
                _ => Outcome::Response,
            }
        })
    }

    /// The layers of a query the engine answers, in their one order for
    /// every transport: screen (query ACL, blackhole) → cookie check →
    /// the engine's answer → COOKIE option → NSID and EXPIRE (after the
    /// cookie, which needs an OPT with no options yet). Rate limiting and
    /// the query log come after, the datagram transports' and the
    /// caller's ([`crate::datagram`], [`Processor::process`]).
    ///
    /// `parsed` is the query if it parsed, `plain` whether it is the
    /// engine's to answer (parsed, not deferred): cookies and options
    /// apply to those alone. `answer` is the engine's call as the
    /// transport makes it (a whole batch prepared at once, or one
    /// query); `request` decodes the peer, called only when a layer
    /// needs it: the plain query with no cookie, no option and no ACL
    /// pays one branch per layer.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn plain_layers<'r>(
        &self,
        catalog: &Catalog,
        parsed: Option<&Query>,
        plain: bool,
        request: impl Fn() -> Option<Request<'r>>,
        answer: impl FnOnce(&mut Vec<u8>) -> (Answered, Summary),
        out: &mut Vec<u8>,
        events: &mut Vec<Event>,
    ) -> Plain {
        let q = parsed.filter(|_| plain);
        let has_cookie = q.is_some_and(cookies::has_cookie);
        let asks = q.is_some_and(asks_options);
        if !self.screens() && !has_cookie && !asks {
            // No layer but the engine's applies: no peer decoded, no step.
            return Plain::answered(answer(out), false);
        }
        let mut req = None;
        if self.screens() {
            req = request();
            let Some(r) = &req else {
                return Plain::Blackholed;
            };
            match self.screen(catalog, r, parsed, out, events) {
                Screened::Pass => {}
                Screened::Drop => return Plain::Blackholed,
                Screened::Refused => return Plain::Refused,
            }
        }
        if (has_cookie || asks) && req.is_none() {
            req = request();
        }
        let step = match (&req, q) {
            (Some(r), Some(q)) if has_cookie => self.cookie_step(r, q, out),
            _ => Step::Ignore,
        };
        let answered = match step {
            Step::Answered => (Answered::Response, Summary::PLAIN),
            _ => answer(out),
        };
        let rrl_exempt = matches!(step, Step::Answer(c) if c.rrl_exempt);
        let layers = Plain::answered(answered, rrl_exempt);
        if let Plain::Answered { send, .. } = layers {
            if let Step::Answer(cookie) = step {
                cookie.append(out);
            }
            if let (true, Some(r), Some(q)) = (send && asks, &req, q) {
                match step {
                    Step::Answered => options::append_to_error(self, r, q, out),
                    _ => options::append(self, catalog, r, q, 0, out),
                }
                options::pad(r, q, 0, out);
            }
        }
        layers
    }

    /// The layers after `parse` for a query the caller parsed already
    /// (into `q`, from `req.bytes`) and found deferred
    /// ([`heron_zone::is_deferred`]): the UDP batch path's entry.
    pub fn process_parsed(
        &self,
        req: &Request,
        q: &Query,
        out: &mut Vec<u8>,
        events: &mut Vec<Event>,
    ) -> Outcome {
        if !q.has_question() {
            return self.question_less(req, q, out);
        }
        let catalog = self.catalog.load();
        let admission = acl::admit(self, &catalog, req, q);
        let mut d = Deferred {
            req,
            q,
            config: &self.config,
            signed: None,
        };
        let keys = self.keys.load();
        match tsig::verify(&keys, &self.replays, &d) {
            Ok(signed) => d.signed = signed,
            Err((failure, Refusal::UpdateResent)) => {
                events.push(Event::Refused(Refusal::UpdateResent));
                let request = self.replays.fingerprint_of(&failure);
                let from = req.peer.ip().to_canonical();
                let Some(answer) = self.update_answers.answer(request, from, req.now) else {
                    tracing::debug!(peer = %req.peer, "a signed UPDATE sent again before its answer");
                    return Outcome::Nothing;
                };
                tracing::debug!(peer = %req.peer, "a signed UPDATE sent again: answered again");
                out.clear();
                out.extend_from_slice(&answer);
                return Outcome::Response;
            }
            Err((failure, refusal)) => {
                tsig::error_response(&keys, &d, &failure, out);
                if let Some(due) = self.log.admit(refusal.log_reason(), req.now) {
                    // The zone and the peer as fields too, for logs read
                    // as JSON; the failure displays as "error (key NAME)".
                    let (qname, peer) = (q.qname_lower.to_name(), req.peer);
                    let kind = request_kind(q);
                    let why = match refusal {
                        Refusal::TsigReplay => "answered once already (BADTIME)".to_string(),
                        _ => failure.to_string(),
                    };
                    tracing::warn!(
                        zone = %qname,
                        %peer,
                        "{refusal} for {kind} from {peer} for {qname}: {why}{}",
                        due.tail()
                    );
                }
                events.push(Event::Refused(refusal));
                return Outcome::Response;
            }
        }
        let step = self.cookie_step(req, q, out);
        let mut outcome = if step == Step::Answered {
            options::append_to_error(self, req, q, out);
            Outcome::Response
        } else {
            self.act(&catalog, &d, admission, out, events)
        };
        if let (Outcome::Update(request), Step::Answer(cookie)) = (&mut outcome, step) {
            request.set_cookie(cookie);
        }
        if let Outcome::Response = outcome {
            if let Step::Answer(cookie) = step {
                cookie.append(out);
            }
            options::pad(req, q, d.tsig_room(), out);
            sign::response(&d, out);
            size::fit(&self.config, &d, out);
            self.keep_refusal(&d, out);
        }
        outcome
    }

    /// A signed UPDATE answered here (NOTAUTH, NOTIMP, REFUSED, FORMERR,
    /// BADVERS: never handed to the update task): its answer is kept as
    /// the task's are, so its sender's copy gets it again (black-box
    /// finding DI-2: the copy, seen as resent, went unanswered).
    fn keep_refusal(&self, d: &Deferred, out: &[u8]) {
        if d.q.header.opcode() != heron_proto::Opcode::UPDATE {
            return;
        }
        if let Some(keep) = self.kept_answer(d) {
            let from = d.req.peer.ip().to_canonical();
            keep.answers.keep(keep.request, from, out, keep.until);
        }
    }

    /// A query without a question (RFC 7873 5.4): with cookies on, a
    /// QUERY with a COOKIE option gets its server cookie (NOERROR, or
    /// BADCOOKIE and FORMERR as a cookie check decides); anything else
    /// FORMERR, as before cookies. An EDNS version above 0 is BADVERS
    /// before all that (RFC 6891 6.1.3, as Knot and BIND; black-box
    /// finding AU-3: a cookie's NOERROR told the client version 1 was
    /// spoken).
    #[cold]
    fn question_less(&self, req: &Request, q: &Query, out: &mut Vec<u8>) -> Outcome {
        let asks_cookie = q.header.opcode() == heron_proto::Opcode::QUERY && q.tsig.is_none();
        let badvers = q.edns.is_some_and(|e| e.version > 0);
        match (&self.cookies, asks_cookie && !badvers) {
            (Some(cookies), true) if cookies::has_cookie(q) => {
                let udp = req.transport == Transport::Udp;
                cookies.server_cookie_only(q, req.peer.ip(), req.now, udp, out);
            }
            _ => {
                let rcode = match badvers {
                    true => Rcode::BADVERS,
                    false => q.header.unreadable_rcode(),
                };
                heron_proto::writer::header_response(out, &q.header, &[], rcode, false);
                if let Some(edns) = q.edns {
                    // RFC 6891 6.1.1; without it, clients retry without EDNS.
                    let opt = opt_record(self.config.max_udp_payload, rcode.0, edns.do_bit);
                    options::push_additional(out, &opt);
                }
            }
        }
        options::append_to_error(self, req, q, out);
        options::pad(req, q, 0, out);
        Outcome::Response
    }

    /// The EDNS options an UPDATE's answer is to carry (its cookie is
    /// added once the cookie layer's step is known).
    fn update_options(&self, d: &Deferred) -> update::AnswerOptions {
        let Some(edns) = d.q.edns else {
            return update::AnswerOptions::default();
        };
        let stream = d.req.transport != Transport::Udp;
        update::AnswerOptions {
            cookie: None,
            nsid: (self.nsid.as_deref())
                .filter(|_| edns.options.nsid)
                .map(<[u8]>::to_vec),
            keepalive: (edns.options.tcp_keepalive && stream).then_some(self.tcp_keepalive),
            pad: d.req.transport == Transport::Tls && edns.options.padding,
        }
    }

    /// The answer, transfer or NOTIFY layer, as `acl` admitted.
    /// Where a signed UPDATE's answer is kept for its sender's copies.
    fn kept_answer(&self, d: &Deferred) -> Option<update::KeepAnswer> {
        let v = d.signed.as_ref()?;
        Some(update::KeepAnswer {
            answers: self.update_answers.clone(),
            request: self.replays.fingerprint(v),
            until: v.time_signed.saturating_add(u64::from(v.fudge)),
        })
    }

    fn act(
        &self,
        catalog: &Catalog,
        d: &Deferred,
        admission: Admission,
        out: &mut Vec<u8>,
        events: &mut Vec<Event>,
    ) -> Outcome {
        if d.q.edns.is_some_and(|e| e.version > 0) {
            // RFC 6891 6.1.3, before any other answer: transfers, NOTIFY
            // and UPDATE too (the engine says it for queries).
            d.header_response(Rcode::BADVERS, false, out);
            return Outcome::Response;
        }
        let result = match admission {
            Admission::Query => {
                answer::signed(catalog, &self.config, d, out);
                if options::asked(d.q) {
                    options::append(self, catalog, d.req, d.q, d.tsig_room(), out);
                }
                return Outcome::Response;
            }
            Admission::Refuse(refusal) => Err(refusal),
            Admission::Transfer(zone) => {
                let opt = options::transfer_opt(self, catalog, d);
                transfer::start(&self.primary, d, zone, opt, out)
            }
            Admission::Notify(origin) => {
                notify::accept(d, origin, &self.notify_log, out, events);
                options::append_to_deferred(self, d, out);
                return Outcome::Response;
            }
            Admission::Update(origin) => {
                let kept = (self.tap.clone(), self.kept_answer(d));
                return update::hand_off(d, origin, false, kept, self.update_options(d));
            }
            Admission::Forward(origin) => {
                let kept = (self.tap.clone(), self.kept_answer(d));
                return update::hand_off(d, origin, true, kept, self.update_options(d));
            }
        };
        result.unwrap_or_else(|refusal| {
            self.refuse(d, refusal, out, events);
            Outcome::Response
        })
    }

    /// Says, once an interval has passed, how many refusals (and
    /// accepted NOTIFYs) of each reason a burst that stopped left out of
    /// the log: their count otherwise waited for the reason's next line,
    /// which may never come. For a task to call every few seconds.
    pub fn log_left_over(&self, now: u64) {
        for (reason, due) in self.log.left_over(now) {
            let what = match reason {
                r if r < Refusal::KINDS => Refusal::KIND_NAMES[r],
                r if r == Refusal::KINDS => "transfer-denied (key)",
                _ => "notify-denied (key)",
            };
            tracing::warn!(
                "{} more requests refused ({what}) in the last {} s, not logged one by one",
                due.suppressed,
                due.since
            );
        }
        for (_, due) in self.notify_log.left_over(now) {
            tracing::info!(
                "{} more NOTIFYs accepted in the last {} s, not logged one by one",
                due.suppressed,
                due.since
            );
        }
    }

    /// Writes the error response a refusal gets, logs and counts it.
    fn refuse(&self, d: &Deferred, refusal: Refusal, out: &mut Vec<u8>, events: &mut Vec<Event>) {
        let rcode = refusal.rcode();
        if let Refusal::QueryDenied(_) = refusal {
            // As common as queries can be: not worth a warning each.
            tracing::debug!("{refusal} from {} refused", d.req.peer);
        } else if let Some(due) = self.log.admit(refusal.log_reason(), d.req.now) {
            // The zone and the peer as fields too, for logs read as JSON.
            let qname = d.q.qname_lower.to_name();
            let peer = d.req.peer;
            tracing::warn!(
                zone = %qname,
                %peer,
                "{refusal} from {peer} for {qname} refused ({rcode}){}",
                due.tail()
            );
        }
        d.header_response(rcode, false, out);
        if let Refusal::QueryDenied(_) = refusal {
            prohibited(d, out);
        }
        options::append_to_deferred(self, d, out);
        events.push(Event::Refused(refusal));
    }
}

/// What the request is, for a log line: "a query", "an AXFR", ...
fn request_kind(q: &Query) -> &'static str {
    use heron_proto::{Opcode, RType};
    match (q.header.opcode(), q.qtype) {
        (Opcode::QUERY, RType::AXFR) => "an AXFR",
        (Opcode::QUERY, RType::IXFR) => "an IXFR",
        (Opcode::QUERY, _) => "a query",
        (Opcode::NOTIFY, _) => "a NOTIFY",
        (Opcode::UPDATE, _) => "an UPDATE",
        _ => "a request",
    }
}

/// Extended DNS Error 18 (Prohibited, RFC 8914 4.19) in the OPT record
/// `Deferred::header_response` ended a refusal with, for a query that
/// had EDNS.
fn prohibited(d: &Deferred, out: &mut Vec<u8>) {
    if d.q.edns.is_none() {
        return;
    }
    if let Some(mut w) = OptionWriter::after_bare_opt(out, u16::MAX as usize) {
        let _ = w.extended_error(heron_proto::edns::ede::PROHIBITED, "");
    }
}
