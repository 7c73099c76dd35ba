//! Layer 5, for dynamic update (RFC 2136): an UPDATE for a zone that
//! takes updates, admitted by `acl` (some `allow-update` rule is for the
//! sender) and verified by `tsig`, leaves the processor as an
//! [`UpdateRequest`]: the transport hands it to the server's update task,
//! which serialises the zone's updates, makes each durable and answers
//! with [`UpdateRequest::response`] (signed as the request was).

use std::net::SocketAddr;
use std::time::Instant;

use heron_proto::edns::{OptionWriter, opt_record};
use heron_proto::message::Header;
use heron_proto::tsig::{ResponseSigner, Verified};
use heron_proto::writer::header_response;
use heron_proto::{Name, Rcode};

use std::sync::Arc;

use super::cookies::Pending;
use super::replay::Fingerprint;
use super::resent::UpdateAnswers;
use super::tap::{Exchanged, Tap};
use super::{Deferred, Outcome, Transport};

/// An admitted UPDATE on its way to the update task.
#[derive(Debug)]
pub struct UpdateRequest {
    /// The zone, lower-cased, as the zone section names it.
    pub origin: Name,
    /// The whole message as received.
    pub message: Vec<u8>,
    pub peer: SocketAddr,
    pub transport: Transport,
    pub received: Instant,
    /// For a secondary zone's primary (`allow-update-forwarding`): sent
    /// on as it is, its answer relayed.
    pub forward: bool,
    /// The key whose signature verified, if signed.
    signed: Option<Verified>,
    /// Where the request's TSIG record starts in `message`, if signed.
    tsig_at: Option<usize>,
    header: Header,
    /// The zone section as sent, echoed in the response.
    zone_section: Vec<u8>,
    /// The OPT record's payload size, when the request had one.
    edns_payload: Option<u16>,
    /// The largest answer the client takes over UDP: its EDNS size (512
    /// without one), at most the server's. A forwarded answer larger is
    /// not sent.
    pub udp_limit: usize,
    /// The query log, when on: the request and its answer are logged
    /// when the answer is sent ([`UpdateRequest::log_answer`]).
    tap: Option<Arc<Tap>>,
    /// Where a signed request's answer is kept for its sender's copies.
    keep: Option<KeepAnswer>,
    /// The address it came to, when the transport knows it (dnstap).
    local: Option<SocketAddr>,
    /// The EDNS options its answer carries, as every other answer does
    /// (black-box finding BA-7: the update task's answers had none).
    options: AnswerOptions,
}

/// What the OPT record of an UPDATE's answer holds besides its size: the
/// server cookie, the NSID and the TCP idle timeout asked for, and
/// whether it is padded (over TLS).
#[derive(Clone, Debug, Default)]
pub(super) struct AnswerOptions {
    pub cookie: Option<Pending>,
    pub nsid: Option<Vec<u8>>,
    pub keepalive: Option<u16>,
    pub pad: bool,
}

impl UpdateRequest {
    /// The server cookie its answer carries.
    pub(super) fn set_cookie(&mut self, cookie: Pending) {
        self.options.cookie = Some(cookie);
    }

    /// The key whose signature verified, if the request was signed.
    pub fn key(&self) -> Option<&Name> {
        self.signed.as_ref().map(|v| &v.key.name)
    }

    /// What a signed request is known by across restarts: a digest of
    /// its key, MAC (its first octets, as the replay cache counts it) and
    /// Time Signed, and the second after which the time check refuses a
    /// copy anyway. None if unsigned.
    pub fn signature_digest(&self) -> Option<([u8; 16], u64)> {
        let v = self.signed.as_ref()?;
        let kept = v.mac.len().min(v.key.algorithm.min_mac_len());
        let mut hash = ring::digest::Context::new(&ring::digest::SHA256);
        hash.update(v.key.name.as_wire());
        hash.update(&v.mac[..kept]);
        hash.update(&v.time_signed.to_be_bytes());
        let mut digest = [0u8; 16];
        digest.copy_from_slice(&hash.finish().as_ref()[..16]);
        Some((digest, v.time_signed.saturating_add(u64::from(v.fudge))))
    }

    /// The request's Time Signed, if signed.
    pub fn time_signed(&self) -> Option<u64> {
        self.signed.as_ref().map(|v| v.time_signed)
    }

    /// The message as it was before the client signed it (its TSIG
    /// record off), for a relay to sign with a key of its own.
    pub fn unsigned_message(&self) -> Vec<u8> {
        let end = self.tsig_at.unwrap_or(self.message.len());
        let mut out = self.message[..end].to_vec();
        if self.tsig_at.is_some() {
            let arcount = u16::from_be_bytes([out[10], out[11]]).saturating_sub(1);
            out[10..12].copy_from_slice(&arcount.to_be_bytes());
        }
        out
    }

    /// Signs `answer`, a complete unsigned response to this request made
    /// elsewhere (a primary's, relayed), as the request was signed: with
    /// the client's key (RFC 8945 5.3); unsigned if the request was.
    pub fn sign_answer(&self, answer: &mut Vec<u8>, now: u64) {
        if let Some(verified) = &self.signed {
            ResponseSigner::new(verified).sign(answer, now);
        }
    }

    /// The answer with `rcode`: header, zone section, OPT if the request
    /// had one (with the options asked for), TSIG if it was signed (RFC
    /// 8945 5.3).
    /// Over UDP, an answer larger than the client takes (long zone and
    /// key names) is cut to its header, OPT and TSIG, with TC, as BIND
    /// cuts it: the client learns its update's fate over TCP, where a
    /// copy of a signed request gets this answer again (black-box finding
    /// BA-4: 560 octets were sent to a client without EDNS).
    pub fn response(&self, rcode: Rcode, now: u64) -> Vec<u8> {
        let whole = self.response_with(rcode, now, false);
        match self.transport == Transport::Udp && whole.len() > self.udp_limit {
            true => self.response_with(rcode, now, true),
            false => whole,
        }
    }

    /// `cut`: no zone section, no options, TC set.
    fn response_with(&self, rcode: Rcode, now: u64, cut: bool) -> Vec<u8> {
        let mut out = Vec::with_capacity(128);
        let zone = if cut { &[][..] } else { &self.zone_section[..] };
        header_response(&mut out, &self.header, zone, rcode, false);
        if cut {
            let flags = u16::from_be_bytes([out[2], out[3]]) | heron_proto::message::flags::TC;
            out[2..4].copy_from_slice(&flags.to_be_bytes());
        }
        if let Some(payload) = self.edns_payload {
            out.extend_from_slice(&opt_record(payload, rcode.0, false));
            let arcount = u16::from_be_bytes([out[10], out[11]]) + 1;
            out[10..12].copy_from_slice(&arcount.to_be_bytes());
            if !cut {
                self.append_options(&mut out);
            }
        }
        self.sign_answer(&mut out, now);
        out
    }

    /// The options of [`AnswerOptions`], appended to the OPT record that
    /// ends `out`.
    fn append_options(&self, out: &mut Vec<u8>) {
        let o = &self.options;
        if let Some(cookie) = &o.cookie {
            cookie.append(out);
        }
        if let Some(mut w) = OptionWriter::ending(out, u16::MAX as usize) {
            if let Some(id) = &o.nsid {
                let _ = w.nsid(id);
            }
            if let Some(seconds) = o.keepalive {
                let _ = w.tcp_keepalive(seconds);
            }
        }
        if o.pad {
            let reserve = self.signed.as_ref().map_or(0, |v| v.key.rr_len());
            if let Some(mut w) = OptionWriter::ending(out, u16::MAX as usize) {
                let _ = w.pad_to(super::options::RESPONSE_PADDING_BLOCK, reserve);
            }
        }
    }
}

/// Where and how long a signed UPDATE's answer is kept ([`super::resent`]).
#[derive(Clone)]
pub(super) struct KeepAnswer {
    pub answers: Arc<UpdateAnswers>,
    pub request: Fingerprint,
    pub until: u64,
}

impl std::fmt::Debug for KeepAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeepAnswer")
    }
}

impl UpdateRequest {
    /// Keeps `answer` for the sender's copies of a signed request.
    pub fn keep_answer(&self, answer: &[u8]) {
        if let Some(k) = &self.keep {
            let from = self.peer.ip().to_canonical();
            k.answers.keep(k.request, from, answer, k.until);
        }
    }

    /// Logs the request with `answer` to the query log, if it is on and
    /// samples this exchange: as the transport logs a query it answers.
    pub fn log_answer(&self, answer: &[u8]) {
        let Some(tap) = self.tap.as_deref().filter(|t| t.is_on()) else {
            return;
        };
        let exchange = Exchanged {
            transport: self.transport,
            peer: self.peer,
            local: self.local,
            received: self.received,
        };
        tap.record_update(exchange, &self.origin, &self.message, answer);
    }
}

/// The request, for the transport to hand to the update task (which
/// forwards it to the zone's primary if `forward`); `tap` logs it once
/// answered.
pub(super) fn hand_off(
    d: &Deferred,
    origin: Name,
    forward: bool,
    (tap, keep): (Option<Arc<Tap>>, Option<KeepAnswer>),
    options: AnswerOptions,
) -> Outcome {
    Outcome::Update(Box::new(UpdateRequest {
        origin,
        message: d.req.bytes.to_vec(),
        peer: d.req.peer,
        transport: d.req.transport,
        received: d.req.received,
        forward,
        signed: d.signed.clone(),
        tsig_at: d.q.tsig.as_ref().map(|r| r.start),
        header: d.q.header,
        zone_section: d.question().to_vec(),
        edns_payload: d.q.edns.map(|_| d.config.max_udp_payload),
        udp_limit: (d.q.edns.as_ref())
            .map_or(512, |e| {
                e.udp_size.clamp(512, d.config.max_udp_payload.max(512))
            })
            .into(),
        tap,
        keep,
        local: d.req.local,
        options,
    }))
}
