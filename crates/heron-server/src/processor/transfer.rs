//! Layer 5, for zone transfers: AXFR (RFC 5936) and IXFR (RFC 1995) as a
//! [`Transfer`] the transport pulls one message at a time, each signed
//! when the request was, so that a transfer of millions of records holds
//! one message in memory. Over UDP an IXFR gets our SOA alone (RFC 1995
//! 2), which tells a client that is behind to come back over TCP.

use std::iter::{Peekable, once};
use std::sync::Arc;

use heron_proto::RType;
use heron_proto::message::{Header, flags};
use heron_proto::tsig::ResponseSigner;
use heron_xfr::primary::transfer::{
    AxfrWriter, Packer, RecordTooLarge, XfrRecord, ixfr_records, soa_record,
};
use heron_xfr::primary::{Primary, TransferPlan};
use heron_zone::Zone;

use super::options::{TransferOpt, push_additional};
use super::parse::soa_serial_in;
use super::{Deferred, Outcome, Refusal, Transport};

/// Zones with more nodes than this take a while to order for an AXFR
/// (2,000,000 nodes: 0.17 s), which a transport may want to do off its
/// event loop ([`Transfer::is_large`]).
const LARGE_ZONE_NODES: usize = 100_000;

/// An allowed transfer, not begun: what its messages are made from.
pub struct Transfer {
    zone: Arc<Zone>,
    plan: TransferPlan,
    id: u16,
    question: Vec<u8>,
    /// Room each message leaves for its TSIG record.
    reserve: usize,
    signer: Option<ResponseSigner>,
    incremental: bool,
    /// The OPT record (with EXPIRE if asked) that ends the first
    /// message, if the request had EDNS.
    opt: Option<TransferOpt>,
    /// The request's RD bit, copied into every message (RFC 5936 2.2.1
    /// recommends it; NSD and Knot do).
    rd: bool,
}

impl std::fmt::Debug for Transfer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Transfer({} of {})", self.kind(), self.zone.origin())
    }
}

impl Transfer {
    pub fn zone(&self) -> &Arc<Zone> {
        &self.zone
    }

    /// What is sent, for the log.
    pub fn kind(&self) -> &'static str {
        match &self.plan {
            TransferPlan::Axfr if self.incremental => "IXFR (full zone)",
            TransferPlan::Axfr => "AXFR",
            TransferPlan::Ixfr(_) => "IXFR",
            TransferPlan::UpToDate => "IXFR (up to date)",
        }
    }

    /// Whether [`Transfer::messages`] takes a while: it orders the names
    /// of a large zone.
    pub fn is_large(&self) -> bool {
        matches!(self.plan, TransferPlan::Axfr) && self.zone.node_count() > LARGE_ZONE_NODES
    }

    /// The messages, to pull one at a time.
    pub fn messages(&mut self) -> Messages<'_> {
        let Transfer {
            zone,
            plan,
            id,
            question,
            reserve,
            signer,
            opt,
            rd,
            ..
        } = self;
        let source = match plan {
            TransferPlan::Axfr => Source::Axfr(AxfrWriter::new(zone, *id, question, *reserve)),
            TransferPlan::Ixfr(chain) => {
                let records = ixfr_records(chain, soa_record(zone));
                Source::packed(zone, *id, question, *reserve, Box::new(records))
            }
            TransferPlan::UpToDate => Source::packed(
                zone,
                *id,
                question,
                *reserve,
                Box::new(once(soa_record(zone))),
            ),
        };
        Messages {
            source,
            signer: signer.as_mut(),
            opt: opt.clone(),
            rd: *rd,
            messages: 0,
            records: 0,
        }
    }
}

/// The messages of a [`Transfer`], made as they are pulled.
pub struct Messages<'t> {
    source: Source<'t>,
    signer: Option<&'t mut ResponseSigner>,
    opt: Option<TransferOpt>,
    rd: bool,
    messages: usize,
    records: usize,
}

type Records<'t> = Peekable<Box<dyn Iterator<Item = XfrRecord<'t>> + Send + 't>>;

enum Source<'t> {
    /// Straight from the zone's encoded RRsets.
    Axfr(AxfrWriter<'t>),
    /// Records packed many to a message.
    Packed(Packer, Records<'t>),
}

impl<'t> Source<'t> {
    fn packed(
        zone: &Zone,
        id: u16,
        question: &[u8],
        reserve: usize,
        records: Box<dyn Iterator<Item = XfrRecord<'t>> + Send + 't>,
    ) -> Source<'t> {
        Source::Packed(
            Packer::new(id, question, zone.class(), reserve),
            records.peekable(),
        )
    }
}

impl Messages<'_> {
    /// Writes the next message into `out`, signed at `now` if the request
    /// was; Ok(false), writing nothing, once all are sent.
    pub fn next(&mut self, out: &mut Vec<u8>, now: u64) -> Result<bool, RecordTooLarge> {
        let more = match &mut self.source {
            Source::Axfr(writer) => writer.next_message(out)?,
            Source::Packed(packer, records) => packer.next_message(records, out)?,
        };
        if !more {
            return Ok(false);
        }
        self.records += Header::read(out).map_or(0, |h| usize::from(h.ancount));
        copy_rd(self.rd, out);
        if let Some(opt) = self.opt.take() {
            push_additional(out, opt.as_bytes());
        }
        if let Some(signer) = self.signer.as_mut() {
            signer.sign(out, now);
        }
        self.messages += 1;
        Ok(true)
    }

    /// Messages and records made so far.
    pub fn made(&self) -> (usize, usize) {
        (self.messages, self.records)
    }
}

/// A transfer `acl` allowed: a stream, or over UDP the SOA in `out`.
pub(super) fn start(
    primary: &Primary,
    d: &Deferred,
    zone: Arc<Zone>,
    opt: Option<TransferOpt>,
    out: &mut Vec<u8>,
) -> Result<Outcome, Refusal> {
    // Each message leaves room for the OPT record, as for TSIG's.
    let reserve = d.tsig_room() + opt.as_ref().map_or(0, |o| o.as_bytes().len());
    let incremental = d.q.qtype == RType::IXFR;
    let client_serial = if incremental {
        // RFC 1995 3: over UDP too, an IXFR without it is malformed.
        let serial = soa_serial_in(d.req.bytes, |m| &m.authority);
        Some(serial.ok_or(Refusal::IxfrWithoutSoa)?)
    } else {
        None
    };
    let rd = d.q.header.has(flags::RD);
    if d.req.transport == Transport::Udp {
        ixfr_over_udp(d, &zone, reserve, out);
        copy_rd(rd, out);
        if let Some(opt) = opt {
            push_additional(out, opt.as_bytes());
        }
        return Ok(Outcome::Response);
    }
    let plan = primary.plan(&zone, client_serial);
    Ok(Outcome::Transfer(Box::new(Transfer {
        zone,
        plan,
        id: d.q.header.id,
        question: d.question().to_vec(),
        reserve,
        signer: d.signed.as_ref().map(ResponseSigner::new),
        incremental,
        opt,
        rd,
    })))
}

/// Sets RD in the message `out` when the request had it.
fn copy_rd(rd: bool, out: &mut [u8]) {
    if let (true, Some(byte)) = (rd, out.get_mut(2)) {
        *byte |= (flags::RD >> 8) as u8;
    }
}

/// RFC 1995 2: over UDP the answer is our SOA alone.
fn ixfr_over_udp(d: &Deferred, zone: &Zone, reserve: usize, out: &mut Vec<u8>) {
    let mut packer = Packer::new(d.q.header.id, d.question(), zone.class(), reserve);
    let mut soa = once(soa_record(zone)).peekable();
    packer
        .next_message(&mut soa, out)
        .expect("an SOA fits in a message");
}
