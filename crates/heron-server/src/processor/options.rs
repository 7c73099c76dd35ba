//! Layer 5b: EDNS options a query asked for, appended to the OPT record
//! that ends its response, before `sign`: NSID (RFC 5001) when the
//! server has an identifier (on every answer, transfers and answers to
//! question-less queries too), EXPIRE (RFC 7314) on an SOA answer or the
//! first message of a transfer from a zone we serve, the TCP idle
//! timeout (RFC 7828) over TCP and TLS. A query that asked for none pays
//! one test of the flags the parser set.

use heron_proto::RType;
use heron_proto::edns::{OPT_LEN, OPTION_HEADER_LEN, OptionWriter, code, opt_record};
use heron_proto::message::{HEADER_LEN, Query, flags};
use heron_zone::Catalog;

use super::{Deferred, Processor, Request, Transport};

/// Whether `q` asked for an option this layer may add.
#[inline]
pub(super) fn asked(q: &Query) -> bool {
    q.edns.is_some_and(|e| {
        let o = e.options;
        o.nsid || o.expire || o.padding || o.tcp_keepalive
    })
}

/// Block size padded responses are brought to (RFC 8467 4.1).
pub(super) const RESPONSE_PADDING_BLOCK: usize = 468;

/// Pads the response in `out` (which ends with its OPT record, a COOKIE
/// in it already) to a multiple of [`RESPONSE_PADDING_BLOCK`] octets,
/// `reserve` (TSIG) included, when the query was padded and came over TLS
/// (RFC 7830 4: a responder MUST pad then; over TCP and UDP padding hides
/// nothing, and a UDP answer must stay small).
pub(super) fn pad(req: &Request, q: &Query, reserve: usize, out: &mut Vec<u8>) {
    if req.transport != Transport::Tls || !q.edns.is_some_and(|e| e.options.padding) {
        return;
    }
    if let Some(mut w) = OptionWriter::ending(out, u16::MAX as usize) {
        let _ = w.pad_to(RESPONSE_PADDING_BLOCK, reserve);
    }
}

/// Appends what `q` asked for to `out`, which must end with the OPT
/// record the engine writes (a cookie may be in it already); keeps `reserve` octets of the client's size
/// free (for TSIG). Over UDP, an NSID that does not fit beside the
/// answer truncates it (TC, the question and the OPT record with the
/// NSID), as NSD, Knot and BIND answer: the client retries over TCP and
/// gets both (black-box finding: the NSID was left out, and the client
/// could not tell "no NSID" from "it did not fit"). Another option that
/// does not fit is left out.
pub(super) fn append(
    p: &Processor,
    catalog: &Catalog,
    req: &Request,
    q: &Query,
    reserve: usize,
    out: &mut Vec<u8>,
) {
    let Some(edns) = q.edns else { return };
    let seconds = (edns.options.expire)
        .then(|| expire(p, catalog, req.now, q))
        .flatten();
    append_with(p, req, q, reserve, seconds, out);
}

/// What `q` asked for but EXPIRE (NSID, the TCP idle timeout), for an
/// answer that is no zone's: to a query without a question (a server
/// cookie, FORMERR) or a cookie check's error (BADCOOKIE, FORMERR), which
/// carry them as every other answer does.
pub(super) fn append_to_error(p: &Processor, req: &Request, q: &Query, out: &mut Vec<u8>) {
    append_with(p, req, q, 0, None, out);
}

/// [`append_to_error`] for a deferred request's answer (a refused or
/// failed transfer, a NOTIFY's), with room kept for its TSIG: NSID as
/// NSD, Knot and BIND give it there, and edns-tcp-keepalive as BIND
/// (black-box finding AU-4: those answers had neither).
pub(super) fn append_to_deferred(p: &Processor, d: &Deferred, out: &mut Vec<u8>) {
    append_with(p, d.req, d.q, d.tsig_room(), None, out);
}

fn append_with(
    p: &Processor,
    req: &Request,
    q: &Query,
    reserve: usize,
    expire_seconds: Option<u32>,
    out: &mut Vec<u8>,
) {
    let Some(edns) = q.edns else { return };
    let limit = match req.transport {
        Transport::Udp => super::size::limit(&p.config, q),
        Transport::Tcp | Transport::Tls => u16::MAX as usize,
    };
    // Optional additional data (RFC 2181 9) is dropped to make room for
    // the NSID, as BIND and Knot do (regression hunt AX-7: TC for an
    // answer that fit; black-box finding BI-4: TC for a referral whose
    // additional addresses were none of them glue).
    // Read (a parse of the answer) only when the NSID may not fit.
    let needed = OPTION_HEADER_LEN + p.nsid.as_ref().map_or(0, |id| id.len());
    let asks_nsid = edns.options.nsid && p.nsid.is_some() && req.transport == Transport::Udp;
    let tight = out.len() + OPT_LEN + needed > limit.saturating_sub(reserve);
    let required = match asks_nsid && tight {
        true => required_additional(out),
        false => None,
    };
    let Some(mut w) = OptionWriter::ending(out, limit.saturating_sub(reserve)) else {
        return;
    };
    let mut truncated = false;
    if edns.options.nsid
        && let Some(id) = &p.nsid
        && w.nsid(id).is_err()
        && req.transport == Transport::Udp
    {
        if !required.is_some_and(|at_least| w.drop_additional_for(needed, at_least)) {
            w.keep_only_question(HEADER_LEN + q.question.len());
            truncated = true;
        }
        let _ = w.nsid(id);
    }
    if let Some(seconds) = expire_seconds {
        let _ = w.expire(seconds);
    }
    if edns.options.tcp_keepalive && req.transport != Transport::Udp {
        let _ = w.tcp_keepalive(p.tcp_keepalive);
    }
    if truncated {
        out[2] |= (flags::TC >> 8) as u8;
    }
}

/// How many of `response`'s additional records must stay, the first
/// ones: none for an authoritative answer's; for a referral's, up to its
/// last glue for a name server below the cut (RFC 9471); None when the
/// additional data is not known to be optional (anything else).
fn required_additional(response: &[u8]) -> Option<usize> {
    if response
        .get(2)
        .is_some_and(|b| b & (flags::AA >> 8) as u8 != 0)
    {
        return Some(0);
    }
    let message = heron_proto::message::Message::parse(response).ok()?;
    let cut = message.authority.iter().find(|r| r.rtype == RType::NS)?;
    let below = |r: &&heron_proto::message::Record| r.name.is_subdomain_of(&cut.name);
    let additional = message.additional.iter().filter(|r| r.rtype != RType::OPT);
    Some(
        additional
            .enumerate()
            .filter(|(_, r)| below(r))
            .last()
            .map_or(0, |(i, _)| i + 1),
    )
}

/// The OPT record that ends a transfer's first message (or the SOA a
/// UDP IXFR gets): the transfer's writer makes none of its own.
#[derive(Clone, Debug)]
pub struct TransferOpt {
    bytes: Vec<u8>,
}

impl TransferOpt {
    pub(super) fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// For a transfer request with EDNS, its response's OPT record (RFC 6891
/// 6.1.1), holding NSID (RFC 5001: as NSD, Knot and BIND give it) and
/// EXPIRE (RFC 7314 3) when asked for and known; None without EDNS.
/// Over UDP the SOA answer with it that does not fit the client's size
/// is truncated (`size::fit`), as any other: the NSID was left out by a
/// worst-case guess of the answer's size, from any client offering less
/// than about 600 octets (black-box finding).
pub(super) fn transfer_opt(p: &Processor, catalog: &Catalog, d: &Deferred) -> Option<TransferOpt> {
    let edns = d.q.edns?;
    let mut bytes = opt_record(p.config.max_udp_payload, 0, edns.do_bit).to_vec();
    let nsid = (p.nsid.as_deref()).filter(|_| edns.options.nsid);
    if let Some(id) = nsid {
        push_option(&mut bytes, code::NSID, id);
    }
    let seconds = (edns.options.expire)
        .then(|| expire(p, catalog, d.req.now, d.q))
        .flatten();
    if let Some(seconds) = seconds {
        push_option(&mut bytes, code::EXPIRE, &seconds.to_be_bytes());
    }
    // A secondary that keeps its transfer connection open (RFC 7766
    // 6.2.1, RFC 9103) is told how long it may (AU-4).
    if edns.options.tcp_keepalive && d.req.transport != Transport::Udp {
        push_option(
            &mut bytes,
            code::TCP_KEEPALIVE,
            &p.tcp_keepalive.to_be_bytes(),
        );
    }
    Some(TransferOpt { bytes })
}

/// Appends one option to the OPT record `opt`, raising its RDLENGTH.
fn push_option(opt: &mut Vec<u8>, option: u16, data: &[u8]) {
    opt.extend_from_slice(&option.to_be_bytes());
    opt.extend_from_slice(&(data.len() as u16).to_be_bytes());
    opt.extend_from_slice(data);
    let rdlength = (opt.len() - OPT_LEN) as u16;
    opt[OPT_LEN - 2..OPT_LEN].copy_from_slice(&rdlength.to_be_bytes());
}

/// Appends `record` to the additional section of the message in `out`
/// (which holds no OPT record yet, nor TSIG).
pub(super) fn push_additional(out: &mut Vec<u8>, record: &[u8]) {
    out.extend_from_slice(record);
    let arcount = u16::from_be_bytes([out[10], out[11]]) + 1;
    out[10..12].copy_from_slice(&arcount.to_be_bytes());
}

/// The EXPIRE value for a query at a zone's apex for its SOA or a
/// transfer: the SOA's expire as primary, the time left as secondary.
fn expire(p: &Processor, catalog: &Catalog, now: u64, q: &Query) -> Option<u32> {
    if !matches!(q.qtype, RType::SOA | RType::AXFR | RType::IXFR) {
        return None;
    }
    let origin = q.qname_lower.to_name();
    let zone = catalog.get(&origin).filter(|z| z.class() == q.qclass)?;
    if p.secondaries.load().contains(&origin) {
        zone.expire_left(now)
    } else {
        Some(zone.soa_expire())
    }
}
