//! What the zone tests share: a small zone at `ORIGIN`, random valid
//! zones over a few names, and answers rendered for comparison.
#![allow(dead_code)]

use heron_proto::message::{Message, Record};
use heron_proto::name::lowercase_wire;
use heron_proto::{Name, RType};
use heron_zone::diff::diff;
use heron_zone::{AnswerConfig, Answered, Catalog, Transport, Zone, answer, load_zone_str};

pub const ORIGIN: &str = "p.test";

/// The text of a zone at `ORIGIN` with an SOA, NS and its address, and
/// `lines`.
pub fn zone_text(serial: u32, lines: &[String]) -> String {
    format!(
        "$ORIGIN p.test.\n$TTL 300\n@ SOA ns hostmaster {serial} 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n{}\n",
        lines.join("\n")
    )
}

pub fn load(serial: u32, lines: &[String]) -> Result<Zone, String> {
    let text = zone_text(serial, lines);
    load_zone_str(&text, "p.zone", &Name::parse(ORIGIN).unwrap())
        .map(|l| l.zone)
        .map_err(|p| format!("{p:?}"))
}

pub fn zone(serial: u32, lines: &[&str]) -> Zone {
    let lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    load(serial, &lines).unwrap()
}

pub fn lower(name: &str) -> Vec<u8> {
    let mut w = Name::parse(name).unwrap().as_wire().to_vec();
    lowercase_wire(&mut w);
    w
}

/// A response's header and sections, each section's records sorted (an
/// RRset's order is not something a client may rely on).
pub fn ask(zone: Zone, name: &str, qtype: RType) -> String {
    let mut cat = Catalog::new();
    cat.insert(zone);
    ask_in(&cat, name, qtype)
}

pub fn ask_in(cat: &Catalog, name: &str, qtype: RType) -> String {
    let mut query = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1];
    query.extend_from_slice(Name::parse(name).unwrap().as_wire());
    query.extend_from_slice(&qtype.0.to_be_bytes());
    query.extend_from_slice(&[0, 1, 0, 0, 41, 16, 0, 0, 0, 0, 0, 0, 0]);
    let mut out = Vec::new();
    let cfg = AnswerConfig::default();
    assert_eq!(
        answer(cat, &cfg, &query, Transport::Udp, &mut out),
        Answered::Response
    );
    let m = Message::parse(&out).expect("a response parses");
    let section = |records: &[Record]| {
        let mut lines: Vec<String> = records.iter().map(|r| r.to_string()).collect();
        lines.sort();
        lines.join("; ")
    };
    format!(
        "rcode {} aa {} | {} | {} | {}",
        m.header.rcode(),
        m.header.has(heron_proto::message::flags::AA),
        section(&m.answers),
        section(&m.authority),
        section(&m.additional)
    )
}

/// A small deterministic generator (xorshift), so failures reproduce.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Names the random zones use: up to three labels of a, b, c under the
/// origin, and a wildcard.
pub fn universe() -> Vec<String> {
    let mut names = vec!["*.b".to_string()];
    for x in ["a", "b", "c"] {
        names.push(x.into());
        for y in ["a", "b", "c"] {
            names.push(format!("{y}.{x}"));
            for z in ["a", "b", "c"] {
                names.push(format!("{z}.{y}.{x}"));
            }
        }
    }
    names
}

pub fn random_line(rng: &mut Rng, names: &[String]) -> String {
    let owner = &names[rng.below(names.len())];
    let target = &names[rng.below(names.len())];
    let n = rng.below(4) + 1;
    match rng.below(9) {
        0 | 1 => format!("{owner} A 192.0.2.{n}"),
        2 => format!("{owner} AAAA 2001:db8::{n}"),
        3 => format!("{owner} TXT \"t{n}\""),
        4 => format!("{owner} MX {n} {target}"),
        5 if owner.matches('.').count() < 2 && !owner.starts_with('*') => {
            format!("{owner} NS {target}")
        }
        6 => format!("{owner} 600 A 192.0.2.{n}"),
        7 => format!("{owner} CNAME {target}"),
        _ => format!("{owner} SRV 0 {n} 53 {target}"),
    }
}

/// A random valid zone (CNAMEs that collide with other data are dropped).
pub fn random_lines(rng: &mut Rng, names: &[String], count: usize) -> Vec<String> {
    let mut lines = Vec::new();
    while lines.len() < count {
        let line = random_line(rng, names);
        let mut candidate = lines.clone();
        candidate.push(line);
        if load(1, &candidate).is_ok() {
            lines = candidate;
        }
    }
    lines
}

pub fn questions(names: &[String]) -> Vec<(String, RType)> {
    let mut out = Vec::new();
    let mut all: Vec<String> = names.iter().map(|n| format!("{n}.{ORIGIN}")).collect();
    all.extend(["x.b.p.test", "d.a.b.c.p.test", "p.test", "ns.p.test"].map(String::from));
    for name in all {
        for t in [
            RType::A,
            RType::AAAA,
            RType::TXT,
            RType::MX,
            RType::NS,
            RType::CNAME,
            RType::SRV,
            RType::SOA,
        ] {
            out.push((name.clone(), t));
        }
    }
    out
}

/// The lines of a random zone of 4 to 23 records, and a copy with one to
/// six lines edited (see [`edit`]).
pub fn random_lines_and_edit(rng: &mut Rng, names: &[String]) -> (Vec<String>, Vec<String>) {
    let count = 4 + rng.below(20);
    let before = random_lines(rng, names, count);
    let mut after = before.clone();
    for _ in 0..1 + rng.below(6) {
        edit(rng, names, &mut after);
    }
    (before, after)
}

/// An edit of one line: dropped, added, duplicated, or its TTL changed.
pub fn edit(rng: &mut Rng, names: &[String], lines: &mut Vec<String>) {
    let pick = |rng: &mut Rng, lines: &Vec<String>| rng.below(lines.len().max(1));
    match rng.below(5) {
        0 | 1 if !lines.is_empty() => {
            lines.remove(pick(rng, lines));
        }
        2 if !lines.is_empty() => {
            let line = lines[pick(rng, lines)].clone();
            lines.push(line);
        }
        3 if !lines.is_empty() => {
            // A TTL of its own: the whole RRset's if it is the only record,
            // a mixed-TTL RRset (settled by file order) otherwise.
            let at = pick(rng, lines);
            let (owner, rest) = lines[at].split_once(' ').unwrap();
            let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit() || c == ' ');
            lines[at] = format!("{owner} {} {rest}", 60 * (1 + rng.below(3)));
        }
        _ => lines.push(random_line(rng, names)),
    }
}

/// Asserts that two zones hold the same records and names and answer
/// every one of `questions` alike.
pub fn assert_same_zone(a: Zone, b: Zone, questions: &[(String, RType)], context: &str) {
    assert!(diff(&a, &b).is_empty(), "{context}\n{:?}", diff(&a, &b));
    assert_eq!(a.node_count(), b.node_count(), "{context}");
    assert_eq!(a.record_count(), b.record_count(), "{context}");
    let mut first = Catalog::new();
    first.insert(a);
    let mut second = Catalog::new();
    second.insert(b);
    for (name, t) in questions {
        assert_eq!(
            ask_in(&first, name, *t),
            ask_in(&second, name, *t),
            "{context}\n{name} {t}"
        );
    }
}
