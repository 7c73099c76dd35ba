//! The messages of an outgoing zone transfer, with no I/O: AXFR (RFC 5936)
//! and IXFR (RFC 1995) as a stream of records, packed many to a message.
//!
//! The caller pulls one message at a time ([`Packer::next_message`]), signs
//! it if the request was signed, and writes it; the zone is walked lazily,
//! so a transfer of millions of records holds one message in memory.

use std::borrow::Cow;
use std::iter::Peekable;
use std::sync::Arc;

use heron_proto::encoded::Owner;
use heron_proto::message::{HEADER_LEN, flags};
use heron_proto::writer::Writer;
use heron_proto::{Class, RType};
use heron_zone::Zone;
use heron_zone::diff::{DiffRecord, ZoneDiff};
use heron_zone::zone::Node;

/// Largest transfer message; RFC 5936 allows up to 65535 octets.
pub const MAX_MESSAGE: usize = u16::MAX as usize;

/// One record of a transfer, borrowed from the zone or a diff.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XfrRecord<'a> {
    pub owner: &'a [u8],
    pub rtype: RType,
    pub ttl: u32,
    pub rdata: Cow<'a, [u8]>,
}

impl<'a> From<&'a DiffRecord> for XfrRecord<'a> {
    fn from(r: &'a DiffRecord) -> XfrRecord<'a> {
        XfrRecord {
            owner: r.owner.as_wire(),
            rtype: r.rtype,
            ttl: r.ttl,
            rdata: Cow::Borrowed(&r.rdata),
        }
    }
}

/// The apex SOA of a zone as a transfer record.
pub fn soa_record(zone: &Zone) -> XfrRecord<'_> {
    let soa = zone.soa();
    XfrRecord {
        owner: zone.origin().as_wire(),
        rtype: RType::SOA,
        ttl: soa.ttl(),
        rdata: soa.first_rdata(),
    }
}

/// Every record of an AXFR: the SOA, all other records (signatures as
/// RRSIG records), and the SOA again (RFC 5936 2.2). Transfers are sent by
/// [`AxfrWriter`]; this record-by-record form is the reference the tests
/// check it against and build received transfers from.
#[cfg(test)]
pub(crate) fn axfr_records(zone: &Zone) -> impl Iterator<Item = XfrRecord<'_>> {
    let soa = soa_record(zone);
    let apex = zone.apex().id();
    let body = zone.nodes().flat_map(move |node| {
        let at_apex = node.id() == apex;
        node.rrsets().flat_map(move |set| {
            let skip_soa = at_apex && set.rtype == RType::SOA;
            let data = set.rdatas().filter(move |_| !skip_soa);
            let data = data.map(move |rdata| XfrRecord {
                owner: node.owner_wire(),
                rtype: set.rtype,
                ttl: set.ttl(),
                rdata,
            });
            let sigs = set.sigs().map(move |rdata| XfrRecord {
                owner: node.owner_wire(),
                rtype: RType::RRSIG,
                ttl: set.sig_ttl(),
                rdata,
            });
            data.chain(sigs)
        })
    });
    std::iter::once(soa.clone())
        .chain(body)
        .chain(std::iter::once(soa))
}

/// The messages of an AXFR written straight from the zone's response-form
/// RRsets, owners in canonical order: a copy and a few pointer patches per RRset, no per-record
/// compression search. Every message repeats the question (RFC 5936
/// 2.2.1 allows it), so that owners and RDATA names can point at the apex
/// in it.
pub struct AxfrWriter<'z> {
    zone: &'z Zone,
    id: u16,
    question: Vec<u8>,
    reserve: usize,
    nodes: Peekable<Box<dyn Iterator<Item = Node<'z>> + Send + 'z>>,
    /// The next RRset of the current node to write, and whether its
    /// records (not only its signatures) are still to write.
    next_set: usize,
    records_pending: bool,
    stage: Stage,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    FirstSoa,
    Body,
    LastSoa,
    Done,
}

impl<'z> AxfrWriter<'z> {
    /// `question` is the request's question section, the zone's name.
    /// Zones are class IN, which the response-form RRsets are encoded for.
    pub fn new(zone: &'z Zone, id: u16, question: &[u8], reserve: usize) -> AxfrWriter<'z> {
        let nodes: Box<dyn Iterator<Item = Node<'z>> + Send + 'z> =
            Box::new(zone.nodes_in_canonical_order());
        AxfrWriter {
            zone,
            id,
            question: question.to_vec(),
            reserve,
            nodes: nodes.peekable(),
            next_set: 0,
            records_pending: true,
            stage: Stage::FirstSoa,
        }
    }

    /// Writes the next message into `out`. Ok(false), writing nothing,
    /// when the transfer is complete.
    pub fn next_message(&mut self, out: &mut Vec<u8>) -> Result<bool, RecordTooLarge> {
        if self.stage == Stage::Done {
            return Ok(false);
        }
        let mut w = Writer::new(out, MAX_MESSAGE - self.reserve);
        w.question_raw(&self.question);
        let apex = HEADER_LEN as u16;
        if self.stage == Stage::FirstSoa {
            self.soa(&mut w)?;
            self.stage = Stage::Body;
        }
        if self.stage == Stage::Body && self.body(&mut w, apex)? {
            self.stage = Stage::LastSoa;
        }
        if self.stage == Stage::LastSoa && self.soa(&mut w).is_ok() {
            self.stage = Stage::Done;
        }
        if w.count(heron_proto::writer::Section::Answer) == 0 {
            return Err(RecordTooLarge);
        }
        w.finish(self.id, flags::QR | flags::AA, 1);
        Ok(true)
    }

    fn soa(&self, w: &mut Writer) -> Result<(), RecordTooLarge> {
        let apex = HEADER_LEN as u16;
        self.zone
            .soa()
            .encoded()
            .write(w, Owner::At(apex), apex)
            .map(|_| ())
            .map_err(|_| RecordTooLarge)
    }

    /// Writes RRsets until the message is full; true when the zone is done.
    fn body(&mut self, w: &mut Writer, apex: u16) -> Result<bool, RecordTooLarge> {
        let apex_len = self.zone.origin().wire_len();
        let apex_id = self.zone.apex().id();
        while let Some(&node) = self.nodes.peek() {
            let at_apex = node.id() == apex_id;
            // Labels down to the apex, then pointers once written here.
            let mut owner = Owner::BelowApex(node.owner_wire(), apex_len);
            for set in node.rrsets().skip(self.next_set) {
                let skip_records = at_apex && set.rtype == RType::SOA;
                if self.records_pending && set.has_records() && !skip_records {
                    match set.encoded().write(w, owner, apex) {
                        Ok(written) => owner = written.next_owner(owner),
                        Err(_) => return Ok(false),
                    }
                }
                self.records_pending = false;
                if set.has_sigs() {
                    match set.encoded_sigs().write(w, owner, apex) {
                        Ok(written) => owner = written.next_owner(owner),
                        Err(_) => return Ok(false),
                    }
                }
                self.next_set += 1;
                self.records_pending = true;
            }
            self.nodes.next();
            self.next_set = 0;
        }
        Ok(true)
    }
}

/// The records of an incremental transfer (RFC 1995 4): the newest SOA,
/// then for each step the old SOA, the deletions, the new SOA and the
/// additions, and the newest SOA again.
pub fn ixfr_records<'a>(
    chain: &'a [Arc<ZoneDiff>],
    newest: XfrRecord<'a>,
) -> impl Iterator<Item = XfrRecord<'a>> {
    let steps = chain.iter().flat_map(|d| {
        let deleted = d.deleted.iter().map(XfrRecord::from);
        let added = d.added.iter().map(XfrRecord::from);
        std::iter::once(XfrRecord::from(&d.old_soa))
            .chain(deleted)
            .chain(std::iter::once(XfrRecord::from(&d.new_soa)))
            .chain(added)
    });
    std::iter::once(newest.clone())
        .chain(steps)
        .chain(std::iter::once(newest))
}

/// A record larger than a transfer message can hold.
#[derive(Debug, PartialEq, Eq)]
pub struct RecordTooLarge;

/// Packs transfer records into response messages to one request.
pub struct Packer {
    id: u16,
    /// The request's question, echoed in the first message only
    /// (RFC 5936 2.2.1 allows leaving it out of the rest).
    question: Vec<u8>,
    class: Class,
    /// Room left free at the end of each message (for a TSIG record).
    reserve: usize,
    first: bool,
}

impl Packer {
    pub fn new(id: u16, question: &[u8], class: Class, reserve: usize) -> Packer {
        Packer {
            id,
            question: question.to_vec(),
            class,
            reserve,
            first: true,
        }
    }

    /// Writes the next message into `out` with as many records as fit.
    /// Returns Ok(false), writing nothing, when no records are left.
    pub fn next_message<'r>(
        &mut self,
        records: &mut Peekable<impl Iterator<Item = XfrRecord<'r>>>,
        out: &mut Vec<u8>,
    ) -> Result<bool, RecordTooLarge> {
        if records.peek().is_none() {
            return Ok(false);
        }
        let mut w = Writer::new(out, MAX_MESSAGE - self.reserve);
        w.preserve_case();
        let qdcount = if self.first {
            w.question_raw(&self.question);
            1
        } else {
            0
        };
        let mut written = 0;
        while let Some(r) = records.peek() {
            if w.record(r.owner, r.rtype, self.class, r.ttl, &r.rdata)
                .is_err()
            {
                break;
            }
            records.next();
            written += 1;
        }
        if written == 0 {
            return Err(RecordTooLarge);
        }
        self.first = false;
        w.finish(self.id, flags::QR | flags::AA, qdcount);
        debug_assert!(out.len() > HEADER_LEN);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_proto::Name;
    use heron_proto::message::Message;
    use heron_zone::{diff::diff, load_zone_str};

    fn zone(serial: u32, body: &str) -> Zone {
        let text = format!(
            "$ORIGIN x.test.\n$TTL 60\n@ SOA ns h {serial} 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n{body}"
        );
        load_zone_str(&text, "x.zone", &Name::parse("x.test").unwrap())
            .unwrap()
            .zone
    }

    fn question(qtype: RType) -> Vec<u8> {
        let mut q = Name::parse("x.test").unwrap().as_wire().to_vec();
        q.extend_from_slice(&qtype.0.to_be_bytes());
        q.extend_from_slice(&1u16.to_be_bytes());
        q
    }

    /// Packs `records` and parses every message back.
    fn pack<'r>(records: impl Iterator<Item = XfrRecord<'r>>, reserve: usize) -> Vec<Message> {
        let mut packer = Packer::new(7, &question(RType::AXFR), Class::IN, reserve);
        let mut records = records.peekable();
        let mut out = Vec::new();
        let mut messages = Vec::new();
        while packer.next_message(&mut records, &mut out).unwrap() {
            assert!(out.len() <= MAX_MESSAGE - reserve);
            messages.push(Message::parse(&out).expect("a transfer message parses"));
        }
        messages
    }

    fn texts(messages: &[Message]) -> Vec<String> {
        messages
            .iter()
            .flat_map(|m| m.answers.iter().map(|r| format!("{} {}", r.name, r.rtype)))
            .collect()
    }

    /// The AXFR of `z` written from its response-form RRsets, every
    /// message parsed back.
    fn axfr_messages(z: &Zone, reserve: usize) -> Vec<Message> {
        let mut axfr = AxfrWriter::new(z, 7, &question(RType::AXFR), reserve);
        let mut out = Vec::new();
        let mut messages = Vec::new();
        while axfr.next_message(&mut out).unwrap() {
            assert!(out.len() <= MAX_MESSAGE - reserve);
            messages.push(Message::parse(&out).expect("a transfer message parses"));
        }
        messages
    }

    /// Every record of a transfer, as text, RRSIGs included.
    fn full_texts(messages: &[Message]) -> Vec<String> {
        messages
            .iter()
            .flat_map(|m| m.answers.iter().map(|r| r.to_string()))
            .collect()
    }

    #[test]
    fn the_axfr_writer_sends_the_records_the_record_packer_does() {
        // Many owners, several RRsets and signatures per owner, names in
        // RDATA (compressed against the apex), case kept: several 64 KB
        // messages, so owners land past the 16 KiB that pointers reach.
        let body: String = (0..4000)
            .map(|i| {
                format!(
                    "Host{i} A 192.0.{}.{}\nhost{i} MX 10 mail{}\nhost{i} TXT \"{i:0>120}\"\n\
                     host{i} RRSIG A 8 3 60 20300101000000 20200101000000 1 x.test. AAAA\n",
                    i / 256,
                    i % 256,
                    i % 3
                )
            })
            .collect();
        let z = zone(9, &body);
        let fast = axfr_messages(&z, 100);
        assert!(fast.len() > 3, "{} messages", fast.len());
        for m in &fast {
            assert_eq!(m.header.id, 7);
            assert!(m.header.has(flags::QR) && m.header.has(flags::AA));
            assert_eq!(m.questions.len(), 1, "every message carries the question");
        }
        // Peers load sorted transfers faster (RFC 4034 6.1 order).
        let owners: Vec<&Name> = fast
            .iter()
            .flat_map(|m| &m.answers)
            .map(|r| &r.name)
            .collect();
        let body = &owners[1..owners.len() - 1];
        assert!(
            body.windows(2).all(|w| w[0] <= w[1]),
            "owners in canonical order"
        );
        let fast_texts = full_texts(&fast);
        assert!(fast_texts.first().unwrap().starts_with("x.test. 60 IN SOA"));
        assert_eq!(fast_texts.first(), fast_texts.last());
        let mut fast_sorted = fast_texts.clone();
        fast_sorted.sort();
        let mut slow = full_texts(&pack(axfr_records(&z), 100));
        slow.sort();
        assert_eq!(fast_sorted, slow);
        assert!(
            fast_texts
                .iter()
                .any(|t| t.starts_with("Host3999.x.test. 60 IN A"))
        );
    }

    /// Names in a transfer keep the case they have in the zone: a name is
    /// compressed only against one written in the same case (a consumer
    /// named a catalog member `aaa.TEST.` after `CAPS.TEST.` before it).
    #[test]
    fn packed_names_keep_their_case() {
        let wire = |text: &str| Name::parse(text).unwrap().as_wire().to_vec();
        let (owner, caps, lower) = (wire("a.zones.x.test"), wire("CAPS.TEST"), wire("aaa.test"));
        let ptr = |target: &[u8]| XfrRecord {
            owner: &owner,
            rtype: RType::PTR,
            ttl: 0,
            rdata: target.to_vec().into(),
        };
        let messages = pack([ptr(&caps), ptr(&lower)].into_iter(), 0);
        let targets: Vec<String> = (messages[0].answers.iter())
            .map(|r| {
                let mut text = String::new();
                heron_proto::rdata::format_text(r.rtype, &r.rdata, &mut text);
                text
            })
            .collect();
        assert_eq!(targets, ["CAPS.TEST.", "aaa.test."]);
    }

    #[test]
    fn axfr_is_soa_records_soa() {
        let z = zone(3, "www A 192.0.2.2\nwww TXT \"t\"\n");
        let messages = pack(axfr_records(&z), 0);
        assert_eq!(messages.len(), 1);
        let m = &messages[0];
        assert_eq!(m.header.id, 7);
        assert!(m.header.has(flags::QR) && m.header.has(flags::AA));
        assert_eq!(m.questions.len(), 1);
        let mut names = texts(&messages);
        assert_eq!(names.first().unwrap(), "x.test. SOA");
        assert_eq!(names.last().unwrap(), "x.test. SOA");
        names.sort();
        assert_eq!(
            names,
            [
                "ns.x.test. A",
                "www.x.test. A",
                "www.x.test. TXT",
                "x.test. NS",
                "x.test. SOA",
                "x.test. SOA"
            ]
        );
        assert_eq!(m.answers[0].rdata, z.soa().first_rdata().to_vec());
    }

    #[test]
    fn large_zones_span_messages_and_only_the_first_has_the_question() {
        let body: String = (0..5000)
            .map(|i| format!("host{i} A 192.0.{}.{}\n", i / 256, i % 256))
            .collect();
        let z = zone(1, &body);
        let messages = pack(axfr_records(&z), 200);
        assert!(messages.len() > 1, "{} messages", messages.len());
        assert_eq!(messages[0].questions.len(), 1);
        assert!(messages[1..].iter().all(|m| m.questions.is_empty()));
        let total: usize = messages.iter().map(|m| m.answers.len()).sum();
        assert_eq!(total, 5000 + 2 + 2, "every record once, SOA twice");
    }

    #[test]
    fn signatures_travel_as_rrsig_records() {
        let sig = "RRSIG A 8 3 60 20300101000000 20200101000000 1 x.test. AAAA";
        let z = zone(1, &format!("www A 192.0.2.2\nwww {sig}\n"));
        let names = texts(&pack(axfr_records(&z), 0));
        assert!(
            names.contains(&"www.x.test. RRSIG".to_string()),
            "{names:?}"
        );
    }

    #[test]
    fn ixfr_frames_each_step_between_soas() {
        let v1 = zone(1, "a A 192.0.2.10\n");
        let v2 = zone(2, "b A 192.0.2.11\n");
        let v3 = zone(3, "b A 192.0.2.11\nc A 192.0.2.12\n");
        let chain = vec![Arc::new(diff(&v1, &v2)), Arc::new(diff(&v2, &v3))];
        let messages = pack(ixfr_records(&chain, soa_record(&v3)), 0);
        let serials: Vec<String> = messages[0]
            .answers
            .iter()
            .map(|r| match r.rtype {
                RType::SOA => {
                    let at = r.rdata.len() - 20;
                    let serial = u32::from_be_bytes(r.rdata[at..at + 4].try_into().unwrap());
                    format!("SOA{serial}")
                }
                t => format!("{} {t}", r.name),
            })
            .collect();
        assert_eq!(
            serials,
            [
                "SOA3",
                "SOA1",
                "a.x.test. A",
                "SOA2",
                "b.x.test. A",
                "SOA2",
                "SOA3",
                "c.x.test. A",
                "SOA3"
            ]
        );
    }

    #[test]
    fn a_record_too_large_for_any_message_is_an_error() {
        let rdata = vec![0u8; 65000];
        let records = [XfrRecord {
            owner: b"\x01x\x04test\x00",
            rtype: RType::NULL,
            ttl: 0,
            rdata: Cow::Borrowed(&rdata),
        }];
        let mut packer = Packer::new(1, &question(RType::AXFR), Class::IN, 1000);
        let mut out = Vec::new();
        let got = packer.next_message(&mut records.into_iter().peekable(), &mut out);
        assert_eq!(got, Err(RecordTooLarge));
    }
}
