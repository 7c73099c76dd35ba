//! The datagram transports' side of the one query path: the UDP workers
//! ([`crate::udp`]) and the AF_XDP workers ([`crate::xdp`]) run one batch
//! loop, [`Layers::answer_batch`], over their own buffers (the
//! [`Datagrams`] trait). Each datagram takes the processor's layers in
//! the order [`Processor::plain_layers`](crate::processor::Processor::plain_layers)
//! defines for every transport (screen → cookies → the engine's answer
//! → NSID/EXPIRE), or the processor's deferred layers (TSIG, NOTIFY,
//! IXFR); then what only datagrams have: response rate limiting, whose
//! buckets for a whole batch are located before any is debited; then
//! dnstap. A transport only moves the bytes and says where they came
//! from.
//!
//! The plain query's path is the UDP fast path: it decodes no peer
//! address (RRL reads the address alone) and pays one branch per layer
//! that is off.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;

use heron_proto::{Opcode, RType, Rcode};

use heron_proto::message::Query;
use heron_zone::Transport::Udp;
use heron_zone::lookahead::PreparedBatch;
use heron_zone::{AnswerConfig, Catalog, Summary};

use crate::processor::tap::Tap;
use crate::processor::{self, Event, Outcome, Plain, Request};
use crate::rrl::Charge;
use crate::service::{Service, unix_now};
use crate::udp::limit::Limiter;
use crate::update::Reply;

/// Where a datagram came from, decoded only when a layer asks.
pub trait PeerAddress {
    /// The address and port; None for one that is neither IPv4 nor IPv6.
    fn address(&self) -> Option<SocketAddr>;
    /// The address alone, which may cost less than [`Self::address`].
    fn ip(&self) -> Option<IpAddr>;
    /// The address it was sent to, when the socket says it (bound to a
    /// wildcard): what a later answer leaves from.
    fn destination(&self) -> heron_sys::udp::Destination {
        heron_sys::udp::Destination::Unknown
    }
}

impl PeerAddress for SocketAddr {
    #[inline]
    fn address(&self) -> Option<SocketAddr> {
        Some(*self)
    }
    #[inline]
    fn ip(&self) -> Option<IpAddr> {
        Some(SocketAddr::ip(self))
    }
}

impl PeerAddress for heron_sys::udp::Peer<'_> {
    fn address(&self) -> Option<SocketAddr> {
        self.to_std()
    }
    #[inline]
    fn ip(&self) -> Option<IpAddr> {
        heron_sys::udp::Peer::ip(self)
    }
    fn destination(&self) -> heron_sys::udp::Destination {
        heron_sys::udp::Peer::destination(self)
    }
}

/// A received batch as the one batch loop ([`Layers::answer_batch`])
/// sees it: the UDP worker's `recvmmsg` buffers or the XDP worker's
/// frames.
pub trait Datagrams {
    type Peer<'p>: PeerAddress
    where
        Self: 'p;
    /// How many datagrams the batch holds.
    fn count(&self) -> usize;
    /// The `i`th datagram's query, sender and response buffer; None for
    /// one that holds no query for us (an XDP frame the parser passed).
    fn datagram(&mut self, i: usize) -> Option<(&[u8], Self::Peer<'_>, &mut Vec<u8>)>;
    /// Marks the `i`th response to be sent.
    fn reply(&mut self, i: usize);
}

/// A datagram between [`Layers::respond`] and [`Layers::finish`].
#[derive(Clone, Copy, Debug)]
pub struct Pending {
    /// Whether the response is to be sent, as far as the layers before
    /// RRL are concerned.
    send: bool,
    /// Whether RRL applies: a response to send, to a client without a
    /// valid server cookie.
    limitable: bool,
    /// Its RRL bucket, once located; None: not rate limited.
    charge: Option<Charge>,
    /// What the engine said of its answer beyond the header, which RRL
    /// keys it by (default for a response the cookie layer wrote).
    summary: Summary,
    /// Whether the query-log layer has seen it (a deferred query that
    /// RRL does not limit).
    tapped: bool,
}

impl Pending {
    const DONE_DROP: Pending = Pending::done(false);

    /// A datagram whose fate is settled before RRL.
    const fn done(send: bool) -> Pending {
        Pending {
            send,
            limitable: false,
            charge: None,
            summary: Summary::PLAIN,
            tapped: true,
        }
    }

    /// An error response the layers before RRL wrote, to send if RRL lets
    /// it: the refusal of a query the ACLs deny, NOTIMP to AXFR over UDP,
    /// the answer to a question-less query
    /// (black-box finding DM-2: neither was limited, and with an NSID a
    /// refusal was eight times the query).
    const fn limited_error(send: bool) -> Pending {
        Pending {
            send,
            limitable: send,
            charge: None,
            summary: Summary::PLAIN,
            tapped: false,
        }
    }
}

/// An AXFR with no TSIG: over UDP its refusal (NOTIMP) is an error RRL
/// limits, as it limits any; the other deferred requests (signed, NOTIFY,
/// UPDATE, IXFR) it does not.
fn is_unsigned_axfr(q: &Query) -> bool {
    q.qtype == RType::AXFR && q.tsig.is_none() && q.header.opcode() == Opcode::QUERY
}

/// What a worker's batch is answered with; made once per batch.
pub struct Layers<'a> {
    service: &'a Service,
    catalog: &'a Catalog,
    /// The engine's settings for UDP (XDP caps the payload to a frame).
    config: &'a AnswerConfig,
    /// The address queries came to, when known (for dnstap).
    local: Option<SocketAddr>,
    tap: Option<&'a Tap>,
    /// When the batch was received (dnstap's query time).
    received: std::time::Instant,
    /// The socket an UPDATE's answer is sent from, later, by the update
    /// task; None (XDP): UPDATE is answered NOTIMP at once.
    reply_socket: Option<&'a Arc<UdpSocket>>,
}

impl<'a> Layers<'a> {
    pub fn new(
        service: &'a Service,
        catalog: &'a Catalog,
        config: &'a AnswerConfig,
        (local, received): (Option<SocketAddr>, std::time::Instant),
    ) -> Layers<'a> {
        let processor = &service.processor;
        Layers {
            service,
            catalog,
            config,
            local,
            tap: processor.tap(),
            received,
            reply_socket: None,
        }
    }

    /// UPDATEs are answered from `socket` once applied.
    pub fn with_reply_socket(mut self, socket: &'a Arc<UdpSocket>) -> Layers<'a> {
        self.reply_socket = Some(socket);
        self
    }

    /// Every layer for a whole batch, `prepared` from its queries, in one
    /// loop for UDP and XDP: marks the responses to send. With RRL on
    /// (`limiter`), every bucket is located before any is debited, so
    /// the batch's table loads overlap; `pending` is the caller's buffer
    /// for that, kept to reuse.
    #[inline(always)]
    pub fn answer_batch<D: Datagrams>(
        &self,
        prepared: &PreparedBatch,
        batch: &mut D,
        limiter: Option<&mut Limiter>,
        pending: &mut Vec<Pending>,
        events: &mut Vec<Event>,
    ) {
        let Some(limiter) = limiter else {
            // Without RRL nothing waits for the rest of the batch: one pass.
            for i in 0..batch.count() {
                let send = match batch.datagram(i) {
                    Some((query, peer, response)) => {
                        let p = self.respond(prepared, i, query, &peer, response, events);
                        self.finish(p, prepared, i, query, &peer, response, None)
                    }
                    None => false,
                };
                if send {
                    batch.reply(i);
                }
            }
            return;
        };
        limiter.start_batch(self.received);
        pending.clear();
        for i in 0..batch.count() {
            let p = match batch.datagram(i) {
                Some((query, peer, response)) => {
                    let mut p = self.respond(prepared, i, query, &peer, response, events);
                    Layers::locate(&mut p, prepared, i, &peer, response, limiter);
                    p
                }
                None => Pending::DONE_DROP,
            };
            pending.push(p);
        }
        for (i, &p) in pending.iter().enumerate() {
            let send = self.settled(p).unwrap_or_else(|| match batch.datagram(i) {
                Some((query, peer, response)) => {
                    let limiter = Some(&mut *limiter);
                    self.finish(p, prepared, i, query, &peer, response, limiter)
                }
                None => false,
            });
            if send {
                batch.reply(i);
            }
        }
        limiter.report(&self.service.rrl);
    }

    /// The layers before RRL: writes the response to the `i`th datagram
    /// of `prepared`, `query` from `peer`, into `response`. With RRL on,
    /// [`Layers::locate`] then finds its bucket, and [`Layers::finish`]
    /// debits the batch's buckets once all are located.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn respond(
        &self,
        prepared: &PreparedBatch,
        i: usize,
        query: &[u8],
        peer: &impl PeerAddress,
        response: &mut Vec<u8>,
        events: &mut Vec<Event>,
    ) -> Pending {
        let processor = &self.service.processor;
        let (parsed, plain) = (prepared.parsed(i), prepared.is_plain_query(i));
        let request = || peer.address().map(|address| udp_request(query, address));
        let answer = |out: &mut Vec<u8>| prepared.answer(i, self.config, query, Udp, out);
        let layers = processor.plain_layers(
            self.catalog,
            parsed,
            plain,
            request,
            answer,
            response,
            events,
        );
        if !events.is_empty() {
            self.service.dispatch(events);
        }
        match layers {
            Plain::Blackholed => Pending::DONE_DROP,
            Plain::Refused => Pending::limited_error(true),
            Plain::Deferred => {
                let q = prepared.query(i);
                if !q.has_question() {
                    return self.question_less(q, query, peer.address(), response);
                }
                let (address, to) = (peer.address(), peer.destination());
                let sent = self.deferred(q, query, (address, to), response, events);
                match (sent, is_unsigned_axfr(q)) {
                    (Some(sent), true) => Pending::limited_error(sent),
                    (Some(sent), false) => {
                        self.tap(query, || peer.address(), response, sent);
                        Pending::done(sent)
                    }
                    (None, _) => Pending::DONE_DROP,
                }
            }
            Plain::Answered {
                send,
                summary,
                rrl_exempt,
            } => Pending {
                send,
                limitable: send && !rrl_exempt,
                charge: None,
                summary,
                tapped: false,
            },
        }
    }

    /// The first half of the RRL layer, for a datagram whose response
    /// [`Layers::respond`] wrote: locates its bucket and starts loading
    /// it ([`Limiter::locate`]), so that the batch's buckets load while
    /// the rest of the batch is answered; [`Layers::finish`] debits them.
    #[inline(always)]
    fn locate(
        pending: &mut Pending,
        prepared: &PreparedBatch,
        i: usize,
        peer: &impl PeerAddress,
        response: &[u8],
        limiter: &Limiter,
    ) {
        if pending.limitable
            && let Some(client) = peer.ip()
        {
            let (q, plain) = (prepared.query(i), prepared.is_plain_query(i));
            pending.charge = limiter.locate(client, q, plain, pending.summary, response);
        }
    }

    /// Whether a datagram [`Layers::respond`] left `pending` is to be
    /// sent, when that is settled without [`Layers::finish`] (no RRL
    /// bucket to debit, no query log to write); None: it is not.
    #[inline(always)]
    fn settled(&self, pending: Pending) -> Option<bool> {
        let done = pending.charge.is_none() && (pending.tapped || self.tap.is_none());
        done.then_some(pending.send)
    }

    /// The layers from RRL on for a datagram [`Layers::respond`] left
    /// `pending`: debits its bucket (`limiter` is dated for the batch by
    /// the caller, [`Limiter::start_batch`]) and logs the exchange; says
    /// whether to send the response.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn finish(
        &self,
        pending: Pending,
        prepared: &PreparedBatch,
        i: usize,
        query: &[u8],
        peer: &impl PeerAddress,
        response: &mut Vec<u8>,
        limiter: Option<&mut Limiter>,
    ) -> bool {
        let mut send = pending.send;
        if let (Some(charge), Some(limiter)) = (pending.charge, limiter) {
            let (q, plain) = (prepared.query(i), prepared.is_plain_query(i));
            let asked = (q, plain, pending.summary);
            send = limiter.settle(charge, || peer.ip(), asked, response);
        }
        if !pending.tapped {
            self.tap(query, || peer.address(), response, send);
        }
        send
    }

    /// A query with no question (RFC 7873 5.4): the processor answers it
    /// with a server cookie (or FORMERR), which anyone can ask for from a
    /// spoofed source, so it is rate limited as an error is (by the
    /// client's prefix alone) and logged after RRL, as an answer is.
    #[cold]
    #[inline(never)]
    fn question_less(
        &self,
        q: &Query,
        query: &[u8],
        address: Option<SocketAddr>,
        response: &mut Vec<u8>,
    ) -> Pending {
        let Some(address) = address else {
            return Pending::DONE_DROP;
        };
        let processor = &self.service.processor;
        let request = udp_request(query, address);
        let outcome = processor.process_parsed(&request, q, response, &mut Vec::new());
        Pending::limited_error(matches!(outcome, Outcome::Response))
    }

    /// TSIG, NOTIFY, IXFR (not rate limited), AXFR: the processor's other
    /// layers, which need the peer and the time. Whether a response is to
    /// be sent, for the query log; None: handled, nothing to log here (an
    /// UPDATE the update task answers and logs, or no peer address).
    #[inline(never)]
    fn deferred(
        &self,
        q: &Query,
        query: &[u8],
        (address, to): (Option<SocketAddr>, heron_sys::udp::Destination),
        response: &mut Vec<u8>,
        events: &mut Vec<Event>,
    ) -> Option<bool> {
        let address = address?;
        let processor = &self.service.processor;
        // Our address and the batch's time: an UPDATE is logged to
        // dnstap by the update task, from the request.
        let request = Request {
            local: self.local,
            received: self.received,
            ..udp_request(query, address)
        };
        let outcome = processor.process_parsed(&request, q, response, events);
        self.service.dispatch(events);
        let outcome = match outcome {
            Outcome::Update(request) => match self.reply_socket {
                Some(socket) => {
                    let reply = Reply::Datagram(socket.clone(), to);
                    self.service.submit_update(request, reply);
                    return None;
                }
                None => {
                    *response = request.response(Rcode::NOTIMP, unix_now());
                    Outcome::Response
                }
            },
            other => other,
        };
        Some(matches!(outcome, Outcome::Response))
    }

    /// The query-log layer for an exchange whose response was `sent` or
    /// not; the peer is decoded only for a sampled one.
    #[inline(always)]
    fn tap(
        &self,
        query: &[u8],
        peer: impl FnOnce() -> Option<SocketAddr>,
        response: &[u8],
        sent: bool,
    ) {
        if let Some(tap) = self.tap
            && tap.sample()
            && let Some(peer) = peer()
        {
            let seen = processor::tap::Seen {
                transport: processor::Transport::Udp,
                peer,
                local: self.local,
                received: self.received,
                catalog: self.catalog,
            };
            tap.record(seen, query, sent.then_some(response));
        }
    }
}

/// A datagram as the processor takes it, dated now.
pub(crate) fn udp_request(bytes: &[u8], peer: SocketAddr) -> Request<'_> {
    Request {
        bytes,
        peer,
        transport: processor::Transport::Udp,
        now: unix_now(),
        local: None,
        received: std::time::Instant::now(),
    }
}
