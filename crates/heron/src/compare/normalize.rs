//! A response reduced to what two authoritative servers must agree on:
//! record order within a section, name compression, the case of names a
//! server compresses against the question, the UDP size a server
//! advertises and the order (and presence) of EDNS options are all gone.
//! TTLs are kept: an authoritative server does not count them down, so
//! they must match unless the user asks (`--ignore-ttl`).
//!
//! The reader takes any bytes: a malformed response is an error that
//! says what is wrong, never a panic.

use heron_proto::edns;
use heron_proto::message::{HEADER_LEN, Header, Record};
use heron_proto::{Class, Name, RType};

/// One response, normalised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// The full response code (OPT's extended bits included).
    pub rcode: u16,
    /// The header's flag bits (QR AA TC RD RA Z AD CD), opcode and rcode
    /// masked out.
    pub flags: u16,
    /// The question section as sent back (case included).
    pub question: Vec<u8>,
    /// Answer, authority and additional records (OPT left out), owner
    /// names lower-cased, sorted.
    pub sections: [Vec<Record>; 3],
    /// Of the OPT record: its version and DO bit, if there is one.
    pub edns: Option<(u8, bool)>,
}

pub const SECTION_NAMES: [&str; 3] = ["answer", "authority", "additional"];

/// The flag bits compared (opcode and rcode are read apart).
const FLAG_BITS: u16 = 0x87F0;

impl Response {
    /// Reads `msg`, with every TTL set to 0 if `ignore_ttl`.
    pub fn parse(msg: &[u8], ignore_ttl: bool) -> Result<Response, String> {
        let header = Header::read(msg).ok_or("shorter than a DNS header")?;
        let mut pos = HEADER_LEN;
        for _ in 0..header.qdcount {
            pos = read_name(msg, pos)?.1 + 4;
            if pos > msg.len() {
                return Err("ends inside the question".into());
            }
        }
        let question = msg[HEADER_LEN..pos].to_vec();
        let mut sections: [Vec<Record>; 3] = Default::default();
        let mut opt = None;
        let counts = [header.ancount, header.nscount, header.arcount];
        for (section, &count) in counts.iter().enumerate() {
            for _ in 0..count {
                let (record, next) = read_record(msg, pos)?;
                pos = next;
                if record.rtype != RType::OPT {
                    let ttl = if ignore_ttl { 0 } else { record.ttl };
                    let rdata = signed_by(record.rtype, record.rdata);
                    sections[section].push(Record {
                        ttl,
                        rdata,
                        ..record
                    });
                    continue;
                }
                if section != 2 || opt.is_some() || !record.name.is_root() {
                    return Err("an OPT record out of place, or more than one".into());
                }
                let e = edns::parse_opt(record.class.0, record.ttl, &record.rdata)
                    .map_err(|e| format!("bad OPT record: {e}"))?;
                opt = Some(e);
            }
        }
        if pos != msg.len() {
            return Err(format!("{} octets after the last record", msg.len() - pos));
        }
        for s in &mut sections {
            s.sort_by(|a, b| record_key(a).cmp(&record_key(b)));
        }
        let ext = opt.map_or(0, |e| e.ext_rcode as u16);
        Ok(Response {
            rcode: (ext << 4) | header.rcode(),
            flags: header.flags & FLAG_BITS,
            question,
            sections,
            edns: opt.map(|e| (e.version, e.do_bit)),
        })
    }

    pub fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }
}

/// An RRSIG's RDATA reduced to what two servers signing with the same
/// keys agree on: type covered, algorithm, labels, original TTL, key tag
/// and signer (lower-cased). Its validity dates and signature go: each
/// server signs on its own schedule, and ECDSA and Ed25519 signatures
/// differ at every signing. Other RDATA is kept as it is.
fn signed_by(rtype: RType, rdata: Vec<u8>) -> Vec<u8> {
    const DATES: std::ops::Range<usize> = 8..16;
    if rtype != RType::RRSIG || rdata.len() < 18 {
        return rdata;
    }
    let Ok((signer, _)) = Name::read(&rdata, 18) else {
        return rdata;
    };
    // The dates zeroed and a one-octet signature kept in their places,
    // so that a difference still reads as an RRSIG in the report.
    let mut kept = rdata[..DATES.start].to_vec();
    kept.extend_from_slice(&[0; DATES.end - DATES.start]);
    kept.extend_from_slice(&rdata[DATES.end..18]);
    kept.extend_from_slice(signer.to_lowercase().as_wire());
    kept.push(0);
    kept
}

/// What records sort and compare by.
pub fn record_key(r: &Record) -> (&[u8], u16, u16, u32, &[u8]) {
    (r.name.as_wire(), r.rtype.0, r.class.0, r.ttl, &r.rdata)
}

fn read_name(msg: &[u8], pos: usize) -> Result<(Name, usize), String> {
    Name::read(msg, pos).map_err(|e| format!("bad name at offset {pos}: {e}"))
}

fn read_u16(msg: &[u8], pos: usize) -> Result<u16, String> {
    msg.get(pos..pos + 2)
        .map(|b| u16::from_be_bytes([b[0], b[1]]))
        .ok_or_else(|| format!("ends inside a field at offset {pos}"))
}

/// One record at `pos`, its names decompressed; and where the next starts.
fn read_record(msg: &[u8], pos: usize) -> Result<(Record, usize), String> {
    let (name, next) = read_name(msg, pos)?;
    let rtype = RType(read_u16(msg, next)?);
    let class = Class(read_u16(msg, next + 2)?);
    let ttl = ((read_u16(msg, next + 4)? as u32) << 16) | read_u16(msg, next + 6)? as u32;
    let start = next + 10;
    let end = start + read_u16(msg, next + 8)? as usize;
    if end > msg.len() {
        return Err(format!("{name} {rtype}: RDATA runs past the message"));
    }
    let record = Record {
        name: name.to_lowercase(),
        rtype,
        class,
        ttl,
        rdata: heron_proto::rdata::rdata_uncompressed(rtype, msg, start, end)?,
    };
    Ok((record, end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_proto::message::flags;

    /// A response to `www.n.test A` with the records written by `records`.
    fn response(id: u16, records: &[(&str, u16, u32, &[u8])], opt: Option<u32>) -> Vec<u8> {
        let mut m = vec![0u8; HEADER_LEN];
        let header = Header {
            id,
            flags: flags::QR | flags::AA,
            qdcount: 1,
            ancount: records.len() as u16,
            nscount: 0,
            arcount: opt.is_some() as u16,
        };
        header.write(&mut m);
        m.extend_from_slice(Name::parse("www.n.test").unwrap().as_wire());
        m.extend_from_slice(&[0, 1, 0, 1]);
        for (owner, rtype, ttl, rdata) in records {
            m.extend_from_slice(Name::parse(owner).unwrap().as_wire());
            m.extend_from_slice(&rtype.to_be_bytes());
            m.extend_from_slice(&[0, 1]);
            m.extend_from_slice(&ttl.to_be_bytes());
            m.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
            m.extend_from_slice(rdata);
        }
        if let Some(ttl) = opt {
            m.extend_from_slice(&[0, 0, 41, 0x10, 0]);
            m.extend_from_slice(&ttl.to_be_bytes());
            m.extend_from_slice(&[0, 0]);
        }
        m
    }

    /// Two servers signing with the same key agree on an RRSIG's type
    /// covered, algorithm, labels, original TTL, key tag and signer; its
    /// dates and signature differ at each signing and are not compared.
    /// Another key tag, or another signer, is a difference.
    #[test]
    fn rrsigs_of_the_same_key_match_whatever_their_dates_and_signature() {
        let rrsig = |dates: u8, tag: u8, signer: &str, sig: u8| {
            let mut r = vec![0, 1, 13, 3, 0, 0, 0, 60];
            r.extend([dates; 8]);
            r.extend([0, tag]);
            r.extend_from_slice(Name::parse(signer).unwrap().as_wire());
            r.extend([sig; 64]);
            r
        };
        let parsed = |rdata: Vec<u8>| {
            let msg = response(1, &[("www.n.test", 46, 60, &rdata)], None);
            Response::parse(&msg, false).unwrap()
        };
        let here = parsed(rrsig(1, 7, "n.test", 1));
        assert_eq!(here, parsed(rrsig(2, 7, "N.test", 2)));
        assert_ne!(here, parsed(rrsig(1, 8, "n.test", 1)), "another key");
        assert_ne!(here, parsed(rrsig(1, 7, "m.test", 1)), "another signer");
        let shown = here.sections[0][0].to_string();
        assert!(
            shown.contains(" RRSIG A 13 3 60 ") && shown.contains(" 7 n.test. "),
            "{shown}"
        );
    }

    #[test]
    fn order_case_and_compression_do_not_matter() {
        let a = response(
            1,
            &[
                ("WWW.n.test", 1, 60, &[1, 2, 3, 4]),
                ("www.n.test", 1, 60, &[5, 6, 7, 8]),
            ],
            None,
        );
        let b = response(
            2,
            &[
                ("www.n.test", 1, 60, &[5, 6, 7, 8]),
                ("www.N.test", 1, 60, &[1, 2, 3, 4]),
            ],
            None,
        );
        assert_eq!(Response::parse(&a, false), Response::parse(&b, false));
        // A CNAME whose target is compressed against the question (offset
        // 12) equals one written out, in another case.
        let mut target = Name::parse("WWW.n.test").unwrap().as_wire().to_vec();
        let c = response(3, &[("x.n.test", 5, 60, &[0xC0, 12])], None);
        let d = response(3, &[("x.n.test", 5, 60, &target)], None);
        assert_eq!(Response::parse(&c, false), Response::parse(&d, false));
        target[1] = b'v';
        let e = response(3, &[("x.n.test", 5, 60, &target)], None);
        assert_ne!(Response::parse(&c, false), Response::parse(&e, false));
    }

    #[test]
    fn ttls_count_unless_ignored() {
        let a = response(1, &[("www.n.test", 1, 60, &[1, 2, 3, 4])], None);
        let b = response(1, &[("www.n.test", 1, 61, &[1, 2, 3, 4])], None);
        assert_ne!(Response::parse(&a, false), Response::parse(&b, false));
        assert_eq!(Response::parse(&a, true), Response::parse(&b, true));
    }

    #[test]
    fn edns_keeps_version_and_do_not_size() {
        let a = Response::parse(&response(1, &[], Some(0x8000)), false).unwrap();
        assert_eq!(a.edns, Some((0, true)));
        assert!(a.has(flags::AA));
        let mut other_size = response(1, &[], Some(0x8000));
        let at = other_size.len() - 8;
        other_size[at] = 0x04; // payload 0x0400
        assert_eq!(Response::parse(&other_size, false).unwrap(), a);
    }

    #[test]
    fn malformed_responses_are_errors() {
        let good = response(1, &[("www.n.test", 1, 60, &[1, 2, 3, 4])], Some(0));
        for cut in 0..good.len() {
            assert!(
                Response::parse(&good[..cut], false).is_err(),
                "cut at {cut}"
            );
        }
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(Response::parse(&trailing, false).is_err());
        let loop_ptr = response(1, &[("x.n.test", 5, 60, &[0xC0, 0x30])], None);
        assert!(Response::parse(&loop_ptr, false).is_err());
    }

    #[test]
    fn random_and_mutated_bytes_never_panic() {
        let good = response(
            9,
            &[
                ("www.n.test", 15, 60, &[0, 10, 0xC0, 12]),
                (
                    "www.n.test",
                    6,
                    60,
                    &[
                        0xC0, 12, 0xC0, 12, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0,
                        0, 5,
                    ],
                ),
            ],
            Some(0),
        );
        let mut random = super::super::probes::Random::new(42);
        for round in 0..20_000 {
            let mut msg = if round % 2 == 0 {
                good.clone()
            } else {
                Vec::new()
            };
            if msg.is_empty() {
                let len = (random.next() % 200) as usize;
                msg.extend((0..len).map(|_| random.next() as u8));
            }
            for _ in 0..(random.next() % 4) {
                let at = (random.next() as usize) % msg.len().max(1);
                if let Some(b) = msg.get_mut(at) {
                    *b = random.next() as u8;
                }
            }
            let _ = Response::parse(&msg, round % 3 == 0);
        }
    }
}
