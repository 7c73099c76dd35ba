//! The query processor's layers for one datagram of a batch, in the one
//! order both datagram transports (the UDP workers, [`crate::udp`], and
//! the AF_XDP workers, [`crate::xdp`]) apply them: screen (ACL,
//! blackhole) → cookies → the engine's answer, or the processor's
//! deferred layers (TSIG, NOTIFY, IXFR) → NSID/EXPIRE options → RRL →
//! dnstap. A transport only moves the bytes and says where they came
//! from; a layer added here applies to both.
//!
//! The plain query's path is the UDP fast path: it decodes no peer
//! address (RRL reads the address alone) and pays one branch per layer
//! that is off.

use std::net::{IpAddr, SocketAddr};

use heron_proto::message::Query;
use heron_zone::lookahead::PreparedBatch;
use heron_zone::{AnswerConfig, Answered, Catalog, Summary, Transport};

use crate::processor::cookies::{self, Step};
use crate::processor::tap::Tap;
use crate::processor::{self, Event, Outcome, Request, Screened};
use crate::rrl::Charge;
use crate::service::{Service, unix_now};
use crate::udp::limit::Limiter;

/// Where a datagram came from, decoded only when a layer asks.
pub trait PeerAddress {
    /// The address and port; None for one that is neither IPv4 nor IPv6.
    fn address(&self) -> Option<SocketAddr>;
    /// The address alone, which may cost less than [`Self::address`].
    fn ip(&self) -> Option<IpAddr>;
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
    /// Whether the query-log layer has seen it (a refused or deferred
    /// query, which RRL does not limit).
    tapped: bool,
}

impl Pending {
    const DONE_DROP: Pending = Pending::done(false);
    const DONE_SEND: Pending = Pending::done(true);

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
}

/// What a worker's batch is answered with; made once per batch.
pub struct Layers<'a> {
    service: &'a Service,
    catalog: &'a Catalog,
    /// The engine's settings for UDP (XDP caps the payload to a frame).
    config: &'a AnswerConfig,
    /// The address queries came to, when known (for dnstap).
    local: Option<SocketAddr>,
    /// Whether a query ACL or blackhole is configured.
    screens: bool,
    tap: Option<&'a Tap>,
    /// When the batch was received (dnstap's query time).
    received: std::time::Instant,
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
            screens: processor.screens(),
            tap: processor.tap(),
            received,
        }
    }

    /// The layers before RRL: writes the response to the `i`th datagram
    /// of `prepared`, `query` from `peer`, into `response`. With RRL on,
    /// [`Layers::locate`] then finds its bucket, and [`Layers::finish`]
    /// debits the batch's buckets once all are located.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn respond(
        &self,
        prepared: &PreparedBatch,
        i: usize,
        query: &[u8],
        peer: &impl PeerAddress,
        response: &mut Vec<u8>,
        events: &mut Vec<Event>,
    ) -> Pending {
        let processor = &self.service.processor;
        // The one branch a query pays when no query ACL is configured.
        if self.screens {
            let Some(address) = peer.address() else {
                return Pending::DONE_DROP;
            };
            let req = udp_request(query, address);
            let screened =
                processor.screen(self.catalog, &req, prepared.parsed(i), response, events);
            self.service.dispatch(events);
            match screened {
                Screened::Pass => {}
                Screened::Drop => return Pending::DONE_DROP,
                Screened::Refused => {
                    self.tap(query, || Some(address), response, true);
                    return Pending::DONE_SEND;
                }
            }
        }
        let q = prepared.query(i);
        let plain = prepared.is_plain_query(i);
        let has_cookie = plain && cookies::has_cookie(q);
        let asks_options = plain && processor::asks_options(q);
        // The address is decoded only for the layers that need it (rate
        // limiting reads it alone, in `locate`).
        let needs_peer = !plain || has_cookie || asks_options;
        let address = if needs_peer { peer.address() } else { None };
        // The cookie layer, for a plain query with a COOKIE option only.
        let step = match address {
            Some(address) if has_cookie => {
                processor.cookie_step(&udp_request(query, address), q, response)
            }
            _ => Step::Ignore,
        };
        let (answered, summary) = match step {
            Step::Answered => (Answered::Response, Summary::PLAIN),
            _ => prepared.answer(i, self.config, query, Transport::Udp, response),
        };
        let send = match answered {
            Answered::Response => true,
            Answered::Drop => false,
            Answered::Deferred => {
                let sent = self.deferred(q, query, address, response, events);
                return Pending::done(sent);
            }
        };
        if let Step::Answer(cookie) = step {
            cookie.append(response);
        }
        // NSID and EXPIRE go after the cookie, which needs an OPT with no
        // options yet.
        if let (true, Some(address)) = (send && asks_options && step != Step::Answered, address) {
            processor.add_options(self.catalog, &udp_request(query, address), q, response);
        }
        let exempt = matches!(step, Step::Answer(c) if c.rrl_exempt);
        Pending {
            send,
            limitable: send && !exempt,
            charge: None,
            summary,
            tapped: false,
        }
    }

    /// The first half of the RRL layer, for a datagram whose response
    /// [`Layers::respond`] wrote: locates its bucket and starts loading
    /// it ([`Limiter::locate`]), so that the batch's buckets load while
    /// the rest of the batch is answered; [`Layers::finish`] debits them.
    #[inline(always)]
    pub fn locate(
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
    pub fn settled(&self, pending: Pending) -> Option<bool> {
        let done = pending.charge.is_none() && (pending.tapped || self.tap.is_none());
        done.then_some(pending.send)
    }

    /// The layers from RRL on for a datagram [`Layers::respond`] left
    /// `pending`: debits its bucket (`limiter` is dated for the batch by
    /// the caller, [`Limiter::start_batch`]) and logs the exchange; says
    /// whether to send the response.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn finish(
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

    /// TSIG, NOTIFY, IXFR: the processor's other layers, which need the
    /// peer and the time. Not rate limited.
    #[inline(never)]
    fn deferred(
        &self,
        q: &Query,
        query: &[u8],
        address: Option<SocketAddr>,
        response: &mut Vec<u8>,
        events: &mut Vec<Event>,
    ) -> bool {
        let Some(address) = address else {
            return false;
        };
        let processor = &self.service.processor;
        let outcome = processor.process_parsed(&udp_request(query, address), q, response, events);
        self.service.dispatch(events);
        let sent = matches!(outcome, Outcome::Response);
        self.tap(query, || Some(address), response, sent);
        sent
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
