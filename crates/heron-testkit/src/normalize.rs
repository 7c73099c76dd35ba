//! Responses reduced to what two servers must agree on.
//!
//! The reader here is independent of `heron_proto::message::Message::parse`
//! on purpose: it decompresses the names in the RDATA of the RFC 1035 types
//! itself (so that two servers' different compression choices compare
//! equal) and only borrows `Name`, `Record`'s `Display` and the OPT reader
//! from `heron-proto`. Record text therefore follows whatever
//! `heron_proto::rdata::format_text` prints (RFC 3597 `\#` or presentation
//! form); both sides of a comparison go through the same printer.

use std::collections::HashMap;
use std::fmt;

use heron_proto::edns;
use heron_proto::message::{HEADER_LEN, Header, Record, flags};
use heron_proto::{Class, Name, RType};

/// One response, normalised. Each section holds its records as
/// `owner ttl class type rdata` with owner names lower-cased, sorted, so
/// comparison ignores record order and the case servers echo back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Normalized {
    /// Full response code (OPT's extended bits included), e.g. `NXDOMAIN`.
    pub rcode: String,
    /// e.g. `QUERY`, `NOTIFY`, `OPCODE9`.
    pub opcode: String,
    /// Header flags in a fixed order: `qr aa tc rd ra z ad cd`.
    pub flags: String,
    /// `qname qclass qtype` per question, qname case exactly as received;
    /// several questions are joined by `; `.
    pub question: String,
    pub answer: Vec<String>,
    pub authority: Vec<String>,
    /// Without OPT.
    pub additional: Vec<String>,
    /// `version N` plus ` do` when the DO bit is set; not the UDP size or
    /// options.
    pub edns: Option<String>,
    /// Not compared by [`diff`]; for filters: the lower-cased names that NS,
    /// MX and SRV records in the answer and authority sections point to, as
    /// `section TYPE name` (e.g. `answer MX mail.example.`).
    pub targets: Vec<String>,
}

impl Normalized {
    /// The records of section `name` (`answer`, `authority`, `additional`).
    pub fn section(&self, name: &str) -> &[String] {
        match name {
            "answer" => &self.answer,
            "authority" => &self.authority,
            "additional" => &self.additional,
            _ => &[],
        }
    }

    /// Whether `flag` (as spelt in [`Normalized::flags`]) is set.
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.split(' ').any(|f| f == flag)
    }

    /// Whether an NS, MX or SRV record in `section` points to `name`
    /// (lower-cased, absolute).
    pub fn has_target(&self, section: &str, types: &[&str], name: &str) -> bool {
        self.targets.iter().any(|t| {
            let mut f = t.split(' ');
            f.next() == Some(section)
                && f.next().is_some_and(|ty| types.contains(&ty))
                && f.next() == Some(name)
        })
    }

    /// Record types (as text) present in a section.
    pub fn types_in(&self, section: &str) -> Vec<String> {
        self.section(section)
            .iter()
            .filter_map(|r| r.split(' ').nth(3).map(str::to_string))
            .collect()
    }
}

impl fmt::Display for Normalized {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} flags [{}] edns [{}]\n  question: {}",
            self.opcode,
            self.rcode,
            self.flags,
            self.edns.as_deref().unwrap_or("none"),
            self.question
        )?;
        for (name, records) in [
            ("answer", &self.answer),
            ("authority", &self.authority),
            ("additional", &self.additional),
        ] {
            if records.is_empty() {
                continue;
            }
            write!(f, "\n  {name}:")?;
            for r in records {
                write!(f, "\n    {}", shorten(r))?;
            }
        }
        Ok(())
    }
}

/// Long records (big TXT sets) cut in the middle for reports.
fn shorten(s: &str) -> String {
    const MAX: usize = 160;
    if s.len() <= MAX {
        return s.to_string();
    }
    let head: String = s.chars().take(MAX - 40).collect();
    let tail: String = s
        .chars()
        .rev()
        .take(30)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("{head} …[{} chars]… {tail}", s.chars().count())
}

pub fn rcode_name(rcode: u16) -> String {
    let known = [
        "NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED", "YXDOMAIN", "YXRRSET",
        "NXRRSET", "NOTAUTH", "NOTZONE",
    ];
    match rcode {
        0..=10 => known[rcode as usize].to_string(),
        16 => "BADVERS".to_string(),
        n => format!("RCODE{n}"),
    }
}

pub fn opcode_name(opcode: u8) -> String {
    match opcode {
        0 => "QUERY".to_string(),
        1 => "IQUERY".to_string(),
        2 => "STATUS".to_string(),
        4 => "NOTIFY".to_string(),
        5 => "UPDATE".to_string(),
        n => format!("OPCODE{n}"),
    }
}

fn flags_text(h: &Header) -> String {
    let names = [
        (flags::QR, "qr"),
        (flags::AA, "aa"),
        (flags::TC, "tc"),
        (flags::RD, "rd"),
        (flags::RA, "ra"),
        (flags::Z, "z"),
        (flags::AD, "ad"),
        (flags::CD, "cd"),
    ];
    let set: Vec<&str> = names
        .iter()
        .filter(|(bit, _)| h.has(*bit))
        .map(|(_, n)| *n)
        .collect();
    set.join(" ")
}

fn read_u16(msg: &[u8], pos: usize) -> Result<u16, String> {
    msg.get(pos..pos + 2)
        .map(|b| u16::from_be_bytes([b[0], b[1]]))
        .ok_or_else(|| format!("message ends inside a field at offset {pos}"))
}

fn read_name(msg: &[u8], pos: usize) -> Result<(Name, usize), String> {
    Name::read(msg, pos).map_err(|e| format!("bad name at offset {pos}: {e}"))
}

/// The lower-cased target of an NS, MX or SRV record.
fn additional_target(rtype: RType, msg: &[u8], start: usize, end: usize) -> Option<String> {
    let at = match rtype {
        RType::NS => start,
        RType::MX => start + 2,
        RType::SRV => start + 6,
        _ => return None,
    };
    if at >= end {
        return None;
    }
    let (name, next) = Name::read(msg, at).ok()?;
    (next <= end).then(|| name.to_lowercase().to_string())
}

/// Reduces a response to a [`Normalized`]; errors describe malformed
/// messages.
pub fn normalize(response: &[u8]) -> Result<Normalized, String> {
    let header = Header::read(response).ok_or("response shorter than a header")?;
    let mut pos = HEADER_LEN;
    let mut questions = Vec::new();
    for _ in 0..header.qdcount {
        let (name, end) = read_name(response, pos)?;
        let qtype = RType(read_u16(response, end)?);
        let qclass = Class(read_u16(response, end + 2)?);
        questions.push(format!("{name} {qclass} {qtype}"));
        pos = end + 4;
    }
    let mut sections: [Vec<String>; 3] = Default::default();
    let mut opt = None;
    let mut targets = Vec::new();
    let counts = [header.ancount, header.nscount, header.arcount];
    for (section, &count) in counts.iter().enumerate() {
        for _ in 0..count {
            let (name, next) = read_name(response, pos)?;
            let rtype = RType(read_u16(response, next)?);
            let class = read_u16(response, next + 2)?;
            let ttl_hi = read_u16(response, next + 4)? as u32;
            let ttl = (ttl_hi << 16) | read_u16(response, next + 6)? as u32;
            let rdlen = read_u16(response, next + 8)? as usize;
            let start = next + 10;
            let end = start + rdlen;
            if end > response.len() {
                return Err(format!("{name} {rtype}: RDATA runs past the message"));
            }
            pos = end;
            if rtype == RType::OPT {
                if section != 2 {
                    return Err("OPT outside the additional section".into());
                }
                if opt.is_some() {
                    return Err("more than one OPT".into());
                }
                if !name.is_root() {
                    return Err(format!("OPT owner {name} is not the root"));
                }
                let e = edns::parse_opt(class, ttl, &response[start..end])
                    .map_err(|e| format!("bad OPT: {e}"))?;
                opt = Some(e);
                continue;
            }
            let record = Record {
                name: name.to_lowercase(),
                rtype,
                class: Class(class),
                ttl,
                rdata: heron_proto::rdata::rdata_uncompressed(rtype, response, start, end)?,
            };
            if section < 2
                && let Some(target) = additional_target(rtype, response, start, end)
            {
                let section = ["answer", "authority"][section];
                targets.push(format!("{section} {rtype} {target}"));
            }
            sections[section].push(record.to_string());
        }
    }
    if pos != response.len() {
        return Err(format!(
            "{} octets after the last record",
            response.len() - pos
        ));
    }
    for s in &mut sections {
        s.sort();
    }
    let [answer, authority, additional] = sections;
    let ext = opt.map_or(0, |e| e.ext_rcode as u16);
    Ok(Normalized {
        rcode: rcode_name((ext << 4) | header.rcode()),
        opcode: opcode_name(header.opcode().0),
        flags: flags_text(&header),
        question: questions.join("; "),
        answer,
        authority,
        additional,
        edns: opt.map(|e| format!("version {}{}", e.version, if e.do_bit { " do" } else { "" })),
        targets,
    })
}

/// Every difference between `a` and `b`, one line each; records only in
/// `a` are marked `<`, only in `b` `>`.
pub fn diff(a: &Normalized, b: &Normalized) -> Vec<String> {
    let mut out = Vec::new();
    let fields = [
        ("rcode", &a.rcode, &b.rcode),
        ("opcode", &a.opcode, &b.opcode),
        ("flags", &a.flags, &b.flags),
        ("question", &a.question, &b.question),
    ];
    for (name, x, y) in fields {
        if x != y {
            out.push(format!("{name}: {x:?} vs {y:?}"));
        }
    }
    if a.edns != b.edns {
        out.push(format!("edns: {:?} vs {:?}", a.edns, b.edns));
    }
    for name in ["answer", "authority", "additional"] {
        let (only_a, only_b) = multiset_difference(a.section(name), b.section(name));
        out.extend(only_a.iter().map(|r| format!("{name} < {}", shorten(r))));
        out.extend(only_b.iter().map(|r| format!("{name} > {}", shorten(r))));
    }
    out
}

/// Elements of `a` not matched in `b` and of `b` not matched in `a`,
/// counting duplicates.
fn multiset_difference<'a>(a: &'a [String], b: &'a [String]) -> (Vec<&'a str>, Vec<&'a str>) {
    let mut counts: HashMap<&str, i64> = HashMap::new();
    for r in a {
        *counts.entry(r).or_default() += 1;
    }
    for r in b {
        *counts.entry(r).or_default() -= 1;
    }
    let mut only_a = Vec::new();
    let mut only_b = Vec::new();
    for r in a {
        let c = counts.get_mut(r.as_str()).expect("counted");
        if *c > 0 {
            *c -= 1;
            only_a.push(r.as_str());
        }
    }
    for r in b {
        let c = counts.get_mut(r.as_str()).expect("counted");
        if *c < 0 {
            *c += 1;
            only_b.push(r.as_str());
        }
    }
    (only_a, only_b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A response to `www.Example.com A` with compressed names in an NS
    /// record's RDATA, and OPT with DO.
    fn response(compress: bool) -> Vec<u8> {
        let mut m = vec![0x12, 0x34, 0x84, 0x03, 0, 1, 0, 0, 0, 1, 0, 1];
        m.extend_from_slice(b"\x03www\x07Example\x03com\x00\x00\x01\x00\x01");
        // Authority: Example.com NS ns.example.com, owner by pointer to 16.
        m.extend_from_slice(&[0xC0, 16, 0, 2, 0, 1, 0, 0, 0x0E, 0x10]);
        if compress {
            m.extend_from_slice(&[0, 5, 2, b'n', b's', 0xC0, 16]);
        } else {
            m.extend_from_slice(&[0, 16, 2, b'n', b's']);
            m.extend_from_slice(b"\x07Example\x03com\x00");
        }
        m.extend_from_slice(&[0, 0, 41, 0x04, 0xD0, 0, 0, 0x80, 0, 0, 0]);
        m
    }

    #[test]
    fn compression_and_case_do_not_matter() {
        let a = normalize(&response(true)).unwrap();
        let b = normalize(&response(false)).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.rcode, "NXDOMAIN");
        assert_eq!(a.flags, "qr aa");
        assert_eq!(a.question, "www.Example.com. IN A");
        assert_eq!(a.edns.as_deref(), Some("version 0 do"));
        assert!(a.authority[0].starts_with("example.com. 3600 IN NS "));
        assert!(diff(&a, &b).is_empty());
        assert_eq!(a.targets, ["authority NS ns.example.com."]);
        assert!(a.has_target("authority", &["NS"], "ns.example.com."));
        assert!(!a.has_target("answer", &["NS"], "ns.example.com."));
        assert_eq!(a.types_in("authority"), ["NS"]);
    }

    #[test]
    fn diff_lists_each_difference() {
        let a = normalize(&response(true)).unwrap();
        let mut b = a.clone();
        b.rcode = "NOERROR".into();
        b.authority.clear();
        b.additional.push("x. 1 IN A \\# 4 01020304".into());
        let d = diff(&a, &b);
        assert_eq!(d.len(), 3, "{d:?}");
        assert!(d[0].starts_with("rcode:"));
        assert!(d[1].starts_with("authority < example.com."));
        assert!(d[2].starts_with("additional > x."));
    }

    #[test]
    fn malformed_responses_are_errors() {
        let m = response(true);
        assert!(normalize(&m[..m.len() - 1]).is_err());
        let mut extra = m.clone();
        extra.push(0);
        assert!(normalize(&extra).is_err());
        assert!(normalize(&m[..5]).is_err());
    }
}
