//! Differential tests: the same queries against NSD, Knot, BIND and Heron
//! serving `tests/data/differential/edge.test.zone`, responses normalised
//! and compared. Accepted differences are listed, with reasons, in
//! `tests/data/differential/ACCEPTED.md`; each is an explicit filter below,
//! its `id` the heading there.
//!
//! * `nsd_vs_knot`: validates the harness, the zone and the accepted list.
//! * `nsd_vs_bind`: a third opinion on the same list (plus BIND's items).
//! * `heron_vs_references`: Heron against NSD (primary reference, asserted
//!   with `HERON_NSD`) and against Knot (secondary, asserted with
//!   `NSD_KNOT`).
//!
//! Every server's responses must also meet `expectations` (what RFCs pin
//! down and what the zone was built to exercise).
//!
//! Set `DIFF_VERBOSE=1` to print every accepted difference too, and
//! `DIFF_DUMP=FILE` to write every query with each server's response.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use heron_proto::{Class, Name, Opcode, RType};
use heron_testkit::{
    Chain, EdnsOpts, Normalized, QueryOpts, ServerProcess, SignedZone, build_query, diff,
    normalize, try_query_tcp, try_query_tcp_pipelined, try_query_udp,
};

const ORIGIN: &str = "edge.test.";
/// Queries per pipelined TCP connection.
const TCP_BATCH: usize = 25;

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/differential")
}

fn zone_file() -> PathBuf {
    data_dir().join("edge.test.zone")
}

fn zones() -> [(&'static str, PathBuf); 1] {
    [(ORIGIN, zone_file())]
}

// ---------------------------------------------------------------------------
// Queries

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transport {
    /// UDP without EDNS (512-octet limit).
    Udp,
    /// UDP, EDNS 1232, DO=0.
    UdpEdns,
    /// UDP, EDNS 1232, DO=1.
    UdpEdnsDo,
    /// TCP without EDNS, pipelined.
    Tcp,
}

const TRANSPORTS: [Transport; 4] = [
    Transport::Udp,
    Transport::UdpEdns,
    Transport::UdpEdnsDo,
    Transport::Tcp,
];

#[derive(Clone, Debug)]
struct Case {
    /// Why the query is there (`owner`, `nxdomain`, `outside`, `special`).
    kind: &'static str,
    qname: Name,
    qtype: RType,
    qclass: Class,
    opcode: Opcode,
    rd: bool,
    edns_version: u8,
    transport: Transport,
}

impl Case {
    fn new(kind: &'static str, qname: Name, qtype: RType, transport: Transport) -> Case {
        Case {
            kind,
            qname,
            qtype,
            qclass: Class::IN,
            opcode: Opcode::QUERY,
            rd: false,
            edns_version: 0,
            transport,
        }
    }

    fn query(&self, id: u16) -> Vec<u8> {
        let edns = |do_bit| {
            Some(EdnsOpts {
                udp_size: 1232,
                do_bit,
                version: self.edns_version,
            })
        };
        let opts = QueryOpts {
            id,
            rd: self.rd,
            edns: match self.transport {
                Transport::Udp | Transport::Tcp => None,
                Transport::UdpEdns => edns(false),
                Transport::UdpEdnsDo => edns(true),
            },
            opcode: self.opcode,
            qclass: self.qclass,
        };
        build_query(&self.qname, self.qtype, &opts)
    }

    fn describe(&self) -> String {
        let mut s = format!(
            "{} {} {} over {:?}",
            self.qname, self.qclass, self.qtype, self.transport
        );
        if self.opcode != Opcode::QUERY {
            write!(s, ", opcode {}", self.opcode.0).unwrap();
        }
        if self.edns_version != 0 {
            write!(s, ", EDNS version {}", self.edns_version).unwrap();
        }
        if self.rd {
            s.push_str(", RD");
        }
        write!(s, " [{}]", self.kind).unwrap();
        s
    }

    fn is_udp(&self) -> bool {
        self.transport != Transport::Tcp
    }
}

/// xorshift64*: a deterministic PRNG for the question names' case.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// The name with each ASCII letter's case flipped at random.
    fn random_case(&mut self, name: &Name) -> Name {
        let mut wire = name.as_wire().to_vec();
        let mut i = 0;
        while i < wire.len() && wire[i] != 0 {
            let len = wire[i] as usize;
            for b in &mut wire[i + 1..i + 1 + len] {
                if b.is_ascii_alphabetic() && self.next() & 1 == 1 {
                    *b ^= 0x20;
                }
            }
            i += 1 + len;
        }
        Name::from_wire(&wire).expect("same shape")
    }
}

fn name(text: &str) -> Name {
    let origin = Name::parse(ORIGIN).unwrap();
    Name::from_text(text.as_bytes(), Some(&origin)).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// Owner names and their types, read from the zone file's first column
/// (every record line there starts with its owner).
fn zone_owners() -> Vec<(String, Vec<RType>)> {
    let text = std::fs::read_to_string(zone_file()).expect("zone file");
    let mut owners: Vec<(String, Vec<RType>)> = Vec::new();
    let mut in_parens = false;
    for line in text.lines() {
        let starts_record =
            !in_parens && !line.is_empty() && !line.starts_with([' ', '\t', ';', '$']);
        if line.contains('(') {
            in_parens = true;
        }
        if line.contains(')') {
            in_parens = false;
        }
        if !starts_record {
            continue;
        }
        let mut fields = line.split_whitespace();
        let owner = fields.next().unwrap().to_string();
        let rtype = fields
            .map(|f| f.trim_matches('"'))
            .find_map(|f| {
                (f != "IN" && !f.chars().all(|c| c.is_ascii_digit()))
                    .then(|| RType::from_mnemonic(f.as_bytes()))
                    .flatten()
            })
            .unwrap_or_else(|| panic!("no type in zone line: {line}"));
        match owners.iter_mut().find(|(o, _)| *o == owner) {
            Some((_, types)) if !types.contains(&rtype) => types.push(rtype),
            Some(_) => {}
            None => owners.push((owner, vec![rtype])),
        }
    }
    owners
}

const OWNER_QTYPES: [RType; 13] = [
    RType::A,
    RType::AAAA,
    RType::MX,
    RType::TXT,
    RType::NS,
    RType::SOA,
    RType::CNAME,
    RType::DNAME,
    RType::DS,
    RType::SRV,
    RType::ANY,
    RType(65280),
    RType::PTR, // no PTR anywhere in the zone
];

const NX_QTYPES: [RType; 8] = [
    RType::A,
    RType::AAAA,
    RType::MX,
    RType::TXT,
    RType::NS,
    RType::DS,
    RType::CNAME,
    RType::ANY,
];

/// Empty non-terminals of the zone (names with data only below them).
const ENTS: [&str; 7] = [
    "ent", "c.ent", "b.c.ent", "sub.wild", "target", "_tcp.www", "_tcp",
];

/// Names that exist nowhere in the zone, at several depths and places.
const NONEXISTENT: [&str; 25] = [
    "nx",
    "nx.nx",
    "a.b.c.d.nx",
    "nx.www",
    "nx.mail",
    "nx.wild",
    "a.b.wild",
    "nx.specific.wild",
    "nx.*.wild",
    "nx.sub.wild",
    "nx.deep.sub.wild",
    "nx.mxonly",
    "nx.cnamewild",
    "nx.c.ent",
    "nx.b.c.ent",
    "nx.a.b.c.ent",
    "nx.sub",
    "a.b.ns.sub",
    "nx.noglue",
    "nx.secure",
    "nx.dname",
    "x.dname",
    "y.dname",
    "a.b.dnameout",
    "nx.chain1",
];

/// Names outside the zone: the server is not authoritative.
const OUTSIDE: [&str; 6] = [
    ".",
    "test.",
    "example.com.",
    "xedge.test.",
    "nx.xedge.test.",
    "edge.test.example.",
];

fn cases() -> Vec<Case> {
    let mut rng = Rng(0x4845_524F_4E21_0001);
    let mut out = Vec::new();
    let add = |out: &mut Vec<Case>, rng: &mut Rng, kind, qname: &Name, qtype| {
        for t in TRANSPORTS {
            out.push(Case::new(kind, rng.random_case(qname), qtype, t));
        }
    };
    for (owner, types) in zone_owners() {
        let qname = name(&owner);
        let mut qtypes = OWNER_QTYPES.to_vec();
        qtypes.extend(types.iter().filter(|t| !OWNER_QTYPES.contains(t)));
        for qtype in qtypes {
            add(&mut out, &mut rng, "owner", &qname, qtype);
        }
    }
    for ent in ENTS {
        for qtype in NX_QTYPES {
            add(&mut out, &mut rng, "ent", &name(ent), qtype);
        }
    }
    for nx in NONEXISTENT {
        for qtype in NX_QTYPES {
            add(&mut out, &mut rng, "nonexistent", &name(nx), qtype);
        }
    }
    for outside in OUTSIDE {
        for qtype in [RType::A, RType::NS, RType::SOA] {
            add(&mut out, &mut rng, "outside", &name(outside), qtype);
        }
    }
    // Special queries, UDP with and without EDNS and TCP.
    let apex = name("@");
    let www = name("www");
    let nx = name("nx");
    for t in TRANSPORTS {
        // RD is copied, RA never set.
        for q in [&apex, &www, &nx] {
            let mut c = Case::new("special", rng.random_case(q), RType::A, t);
            c.rd = true;
            out.push(c);
        }
        // Unknown opcodes: NOTIMP (RFC 1035 4.1.1).
        for opcode in [3, 15] {
            let mut c = Case::new("special", www.clone(), RType::A, t);
            c.opcode = Opcode(opcode);
            out.push(c);
        }
        // CHAOS class: implementation-specific; see ACCEPTED.md.
        let mut c = Case::new("chaos", Name::parse("version.bind").unwrap(), RType::TXT, t);
        c.qclass = Class::CH;
        out.push(c);
        // QCLASS ANY (RFC 1035 3.2.5): answered from the IN data.
        for (q, qtype) in [(&apex, RType::SOA), (&www, RType::A), (&nx, RType::A)] {
            let mut c = Case::new("class-any", rng.random_case(q), qtype, t);
            c.qclass = Class::ANY;
            out.push(c);
        }
        // Transfers, allowed to nobody: refused over TCP (with OPT when
        // the query had one, RFC 6891 6.1.1, and AA clear); AXFR over UDP
        // is not implemented by anyone.
        for qtype in [RType::AXFR, RType::IXFR] {
            out.push(Case::new("transfer", apex.clone(), qtype, t));
        }
        // Meta types as QTYPE (OPT, TSIG, TKEY, MAILB, MAILA, 200):
        // NSD and Knot look them up as any type (NODATA, NXDOMAIN, a
        // referral); BIND refuses them, see ACCEPTED.md.
        let meta = [41, 250, 249, 253, 254, 200].map(RType);
        for (q, qtype) in [&www, &nx, &apex, &name("sub"), &www, &nx]
            .into_iter()
            .zip(meta)
        {
            out.push(Case::new("meta-qtype", rng.random_case(q), qtype, t));
        }
        // QTYPE RRSIG: the signatures at the name (signed fixtures), NODATA
        // in the unsigned zone; at a CNAME, a wildcard, a delegation, an
        // empty non-terminal and no name at all.
        let at = [
            "",
            "www",
            "chain1",
            "nx.wild",
            "sub",
            "c.ent",
            "nx",
            "x.cnamewild",
        ];
        for q in at.map(|n| if n.is_empty() { apex.clone() } else { name(n) }) {
            out.push(Case::new(
                "rrsig-qtype",
                rng.random_case(&q),
                RType::RRSIG,
                t,
            ));
        }
        // EDNS version 1: BADVERS (RFC 6891 6.1.3).
        if matches!(t, Transport::UdpEdns | Transport::UdpEdnsDo) {
            for q in [&apex, &nx, &name("bigtxt")] {
                let mut c = Case::new("special", q.clone(), RType::SOA, t);
                c.edns_version = 1;
                out.push(c);
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Running queries

/// A server's normalised response, or why there is none.
type Outcome = Result<Normalized, String>;

fn run_cases(server: &ServerProcess, cases: &[Case]) -> Vec<Outcome> {
    let addr = server.addr();
    let mut out: Vec<Option<Outcome>> = vec![None; cases.len()];
    let mut tcp = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let id = i as u16;
        if case.is_udp() {
            out[i] = Some(
                try_query_udp(addr, &case.query(id))
                    .map_err(|e| format!("no response: {e}"))
                    .and_then(|r| normalize(&r).map_err(|e| format!("malformed: {e}"))),
            );
        } else {
            tcp.push(i);
        }
    }
    for batch in tcp.chunks(TCP_BATCH) {
        let queries: Vec<Vec<u8>> = batch.iter().map(|&i| cases[i].query(i as u16)).collect();
        match try_query_tcp_pipelined(addr, &queries) {
            Ok(responses) => {
                for (&i, r) in batch.iter().zip(responses) {
                    out[i] = Some(normalize(&r).map_err(|e| format!("malformed: {e}")));
                }
            }
            Err(e) => {
                // Pipelining failed: say so, then try one query per connection
                // so the other differences still show.
                eprintln!(
                    "{} ({}): pipelined TCP batch failed: {e}",
                    server.kind(),
                    addr
                );
                for (&i, q) in batch.iter().zip(&queries) {
                    out[i] = Some(
                        try_query_tcp(addr, q)
                            .map_err(|e| format!("no response: {e}"))
                            .and_then(|r| normalize(&r).map_err(|e| format!("malformed: {e}"))),
                    );
                }
            }
        }
    }
    out.into_iter()
        .map(|o| o.expect("every case run"))
        .collect()
}

// ---------------------------------------------------------------------------
// Accepted differences

/// An accepted difference: when it applies to a pair of responses, it
/// removes the accepted part from both.
type Filter = fn(&Case, &mut Normalized, &mut Normalized);

struct Accepted {
    /// The heading in ACCEPTED.md.
    id: &'static str,
    filter: Filter,
}

fn both(a: &mut Normalized, b: &mut Normalized, f: impl Fn(&mut Normalized)) {
    f(a);
    f(b);
}

fn owner_of(record: &str) -> &str {
    record.split(' ').next().unwrap_or("")
}

fn rtype_of(record: &str) -> &str {
    record.split(' ').nth(3).unwrap_or("")
}

/// The type an RRSIG record covers.
fn covered_of(record: &str) -> &str {
    record.split(' ').nth(4).unwrap_or("")
}

/// An A or AAAA record, or an RRSIG over one.
fn is_address(record: &str) -> bool {
    match rtype_of(record) {
        "A" | "AAAA" => true,
        "RRSIG" => matches!(covered_of(record), "A" | "AAAA"),
        _ => false,
    }
}

/// MX and SRV target addresses (and in a signed zone their RRSIGs) in the
/// additional section: dropped on both sides for the targets of MX/SRV
/// records in either side's answer.
fn mx_srv_additional(_: &Case, a: &mut Normalized, b: &mut Normalized) {
    let (ta, tb) = (a.clone(), b.clone());
    let is_target = |r: &String| {
        is_address(r)
            && [&ta, &tb]
                .iter()
                .any(|n| n.has_target("answer", &["MX", "SRV"], owner_of(r)))
    };
    both(a, b, |n| n.additional.retain(|r| !is_target(r)));
}

/// QTYPE ANY (RFC 8482): which RRsets a non-empty answer holds, and the
/// additional data for them, is each server's choice.
fn any_subset(case: &Case, a: &mut Normalized, b: &mut Normalized) {
    let applies = case.qtype == RType::ANY
        && [&*a, &*b]
            .iter()
            .all(|n| n.rcode == "NOERROR" && !n.answer.is_empty());
    if applies {
        both(a, b, |n| {
            n.answer.clear();
            n.additional.clear();
        });
    }
}

/// NOTIMP (unknown opcode): whether the question and OPT are echoed.
fn notimp_body(case: &Case, a: &mut Normalized, b: &mut Normalized) {
    let applies = case.opcode != Opcode::QUERY && a.rcode == "NOTIMP" && b.rcode == "NOTIMP";
    if applies {
        both(a, b, |n| {
            n.question.clear();
            n.edns = None;
        });
    }
}

/// BADVERS: whether the DO bit is echoed in the OPT of the error.
fn badvers_do(_: &Case, a: &mut Normalized, b: &mut Normalized) {
    let applies = a.rcode == "BADVERS" && b.rcode == "BADVERS";
    if applies {
        both(a, b, |n| {
            if let Some(e) = &mut n.edns {
                *e = e.trim_end_matches(" do").to_string();
            }
        });
    }
}

/// CHAOS class: server identification is implementation-specific (no RFC);
/// only opcode, question and QR are compared.
fn chaos(case: &Case, a: &mut Normalized, b: &mut Normalized) {
    let applies = case.qclass == Class::CH;
    if applies {
        both(a, b, |n| {
            let qr = n.has_flag("qr");
            n.rcode.clear();
            n.flags = if qr { "qr".into() } else { String::new() };
            n.answer.clear();
            n.authority.clear();
            n.additional.clear();
            n.edns = None;
        });
    }
}

/// Owners of the CNAME loop in the zone.
const LOOP_OWNERS: [&str; 2] = ["loop1.edge.test.", "loop2.edge.test."];

/// A CNAME loop: BIND answers SERVFAIL, NSD and Knot return the loop's
/// CNAMEs with NOERROR.
fn cname_loop_servfail(case: &Case, a: &mut Normalized, b: &mut Normalized) {
    let qname = case.qname.to_lowercase().to_string();
    let applies =
        LOOP_OWNERS.contains(&qname.as_str()) && [&*a, &*b].iter().any(|n| n.rcode == "SERVFAIL");
    if applies {
        both(a, b, flags_and_question_only);
    }
}

/// QTYPE RRSIG or NSEC at a CNAME that has none (`a` Heron, `b` NSD):
/// NSD follows the CNAME, Heron answers NODATA as Knot and BIND do (both
/// types may stand beside a CNAME, RFC 2181 10.1, RFC 4035 2.5). Only the
/// flags and the question are compared.
fn nsd_follows_cname_for_rrsig(case: &Case, a: &mut Normalized, b: &mut Normalized) {
    let asked = matches!(case.qtype, RType::RRSIG | RType::NSEC);
    let qname = case.qname.to_string().to_lowercase();
    let nsd_followed = (b.answer.first())
        .is_some_and(|r| r.to_lowercase().starts_with(&qname) && r.contains(" CNAME "));
    if asked && nsd_followed && a.answer.is_empty() && a.rcode == "NOERROR" {
        both(a, b, flags_and_question_only);
    }
}

/// Leaves the header flags and the question to compare.
fn flags_and_question_only(n: &mut Normalized) {
    n.rcode.clear();
    n.answer.clear();
    n.authority.clear();
    n.additional.clear();
}

/// A meta type as QTYPE (not ANY or a transfer): BIND answers FORMERR
/// (NOTIMP for MAILA and MAILB) with no records; NSD and Knot look it up
/// in the zone. Only the question is compared.
fn meta_qtype(case: &Case, a: &mut Normalized, b: &mut Normalized) {
    let meta = matches!(case.qtype.0, 41 | 128..=250 | 253 | 254);
    if meta {
        both(a, b, |n| {
            flags_and_question_only(n);
            n.flags.clear();
        });
    }
}

/// QTYPE RRSIG: Knot answers the signatures of one RRset (as RFC 8482
/// answers ANY, setting no TC); Knot, BIND and Heron follow no CNAME for
/// it. NSD (and Heron) answer every signature at the name (TC over UDP
/// when they do not fit); NSD follows a CNAME that has none. Only the
/// rcode and the question are compared.
fn rrsig_qtype(case: &Case, a: &mut Normalized, b: &mut Normalized) {
    if case.qtype == RType::RRSIG && a.rcode == b.rcode {
        both(a, b, |n| {
            n.flags = n.flags.replace(" tc", "");
            n.answer.clear();
            n.authority.clear();
            n.additional.clear();
        });
    }
}

/// Both set TC: what a truncated response still carries is not pinned
/// down (BIND keeps the records that fit, NSD and Knot none).
/// ANY over UDP for a name whose RRsets with their RRSIGs do not fit:
/// BIND sets TC, NSD and Knot answer one RRset (RFC 8482 4.2).
fn any_udp_truncated(case: &Case, a: &mut Normalized, b: &mut Normalized) {
    let applies =
        case.qtype == RType::ANY && case.is_udp() && (a.has_flag("tc") != b.has_flag("tc"));
    if applies {
        both(a, b, |n| {
            n.flags = n.flags.replace(" tc", "");
            n.answer.clear();
            n.authority.clear();
            n.additional.clear();
        });
    }
}

fn truncated_body(_: &Case, a: &mut Normalized, b: &mut Normalized) {
    let applies = a.has_flag("tc") && b.has_flag("tc");
    if applies {
        both(a, b, |n| {
            n.answer.clear();
            n.authority.clear();
            n.additional.clear();
        });
    }
}

/// NAPTR: BIND adds the SRV RRset the replacement field names (RFC 3403
/// 4.2 additional section processing); NSD and Knot add nothing.
fn naptr_additional(case: &Case, a: &mut Normalized, b: &mut Normalized) {
    let applies = case.qtype == RType::NAPTR;
    if applies {
        both(a, b, |n| {
            n.additional.retain(|r| {
                let t = if rtype_of(r) == "RRSIG" {
                    covered_of(r)
                } else {
                    rtype_of(r)
                };
                !matches!(t, "SRV" | "A" | "AAAA")
            })
        });
    }
}

/// Negative answers to QTYPE SOA: BIND gives the SOA in the authority
/// section TTL 0; NSD and Knot min(SOA TTL, MINIMUM) (RFC 2308 3).
fn soa_negative_ttl(case: &Case, a: &mut Normalized, b: &mut Normalized) {
    let negative = |n: &Normalized| !n.types_in("answer").iter().any(|t| t == "SOA");
    let applies = case.qtype == RType::SOA && negative(a) && negative(b);
    if applies {
        both(a, b, |n| {
            for r in &mut n.authority {
                if rtype_of(r) == "SOA" || covered_of(r) == "SOA" {
                    let mut f: Vec<&str> = r.split(' ').collect();
                    f[1] = "TTL";
                    *r = f.join(" ");
                }
            }
        });
    }
}

/// QTYPE ANY below a DNAME whose target does not exist: BIND stops at the
/// synthesized CNAME (NOERROR), NSD and Knot follow it (NXDOMAIN + SOA).
fn dname_any_target(case: &Case, a: &mut Normalized, b: &mut Normalized) {
    let has_dname = |n: &Normalized| n.types_in("answer").iter().any(|t| t == "DNAME");
    let applies = case.qtype == RType::ANY && has_dname(a) && has_dname(b);
    if applies {
        both(a, b, |n| {
            n.rcode.clear();
            // The SOA and, in a signed zone, the target's proof of
            // nonexistence (NSEC or NSEC3 and the RRSIGs).
            n.authority.clear();
        });
    }
}

/// NODATA for a wildcard's own name (`*.wild`, taken literally) in an
/// NSEC3 zone: NSD proves it like a wildcard NODATA (with the closest
/// encloser proof), Knot (and Heron) with the NSEC3 that matches the name,
/// which RFC 5155 7.2.3 asks for. The NSEC3 RRsets only one side has are
/// dropped from both.
fn nsec3_wildcard_owner_nodata(case: &Case, a: &mut Normalized, b: &mut Normalized) {
    let nodata = |n: &Normalized| n.rcode == "NOERROR" && n.answer.is_empty();
    let wildcard_owner = case.qname.as_wire().starts_with(b"\x01*");
    if !(wildcard_owner && nodata(a) && nodata(b)) {
        return;
    }
    let nsec3_owners = |n: &Normalized| -> Vec<String> {
        let records = n.authority.iter().filter(|r| rtype_of(r) == "NSEC3");
        records.map(|r| owner_of(r).to_string()).collect()
    };
    let (in_a, in_b) = (nsec3_owners(a), nsec3_owners(b));
    let one_sided = |r: &String| {
        let nsec3 = rtype_of(r) == "NSEC3" || covered_of(r) == "NSEC3";
        let owner = owner_of(r).to_string();
        nsec3 && in_a.contains(&owner) != in_b.contains(&owner)
    };
    both(a, b, |n| n.authority.retain(|r| !one_sided(r)));
}

/// QCLASS ANY: Knot answers authoritatively (AA, and the SOA of a
/// negative answer); NSD (and Heron) clear AA and give no SOA to cache a
/// negative answer by.
fn class_any_authority(case: &Case, a: &mut Normalized, b: &mut Normalized) {
    if case.qclass == Class::ANY {
        both(a, b, |n| {
            n.flags = n.flags.replace(" aa", "");
            n.authority
                .retain(|r| rtype_of(r) != "SOA" && covered_of(r) != "SOA");
        });
    }
}

/// A transfer the server allows nobody: Knot answers NOTAUTH, NSD (and
/// Heron) REFUSED.
fn transfer_refused_rcode(case: &Case, a: &mut Normalized, b: &mut Normalized) {
    let refused = |n: &Normalized| matches!(n.rcode.as_str(), "REFUSED" | "NOTAUTH");
    let transfer = matches!(case.qtype, RType::AXFR | RType::IXFR);
    if transfer && refused(a) && refused(b) {
        both(a, b, |n| n.rcode = "REFUSED".into());
    }
}

const CLASS_ANY_AUTHORITY: Accepted = Accepted {
    id: "class-any-authority",
    filter: class_any_authority,
};
const TRANSFER_REFUSED_RCODE: Accepted = Accepted {
    id: "transfer-refused-rcode",
    filter: transfer_refused_rcode,
};
const MX_SRV_ADDITIONAL: Accepted = Accepted {
    id: "mx-srv-additional",
    filter: mx_srv_additional,
};
const ANY_SUBSET: Accepted = Accepted {
    id: "any-subset",
    filter: any_subset,
};
const RRSIG_QTYPE: Accepted = Accepted {
    id: "rrsig-qtype",
    filter: rrsig_qtype,
};
const NOTIMP_BODY: Accepted = Accepted {
    id: "notimp-body",
    filter: notimp_body,
};
const BADVERS_DO: Accepted = Accepted {
    id: "badvers-do",
    filter: badvers_do,
};
const CHAOS: Accepted = Accepted {
    id: "chaos",
    filter: chaos,
};
const NSEC3_WILDCARD_OWNER_NODATA: Accepted = Accepted {
    id: "nsec3-wildcard-owner-nodata",
    filter: nsec3_wildcard_owner_nodata,
};

/// Every accepted difference between NSD and Knot (and so between Heron,
/// which follows NSD, and Knot).
const NSD_KNOT: &[Accepted] = &[
    CLASS_ANY_AUTHORITY,
    TRANSFER_REFUSED_RCODE,
    MX_SRV_ADDITIONAL,
    ANY_SUBSET,
    RRSIG_QTYPE,
    NOTIMP_BODY,
    BADVERS_DO,
    CHAOS,
    NSEC3_WILDCARD_OWNER_NODATA,
];

/// Accepted differences between NSD and BIND (a third opinion; Heron is not
/// compared with BIND).
const NSD_BIND: &[Accepted] = &[
    MX_SRV_ADDITIONAL,
    ANY_SUBSET,
    RRSIG_QTYPE,
    NOTIMP_BODY,
    BADVERS_DO,
    CHAOS,
    NSEC3_WILDCARD_OWNER_NODATA,
    Accepted {
        id: "bind-cname-loop-servfail",
        filter: cname_loop_servfail,
    },
    Accepted {
        id: "bind-truncated-body",
        filter: truncated_body,
    },
    Accepted {
        id: "bind-naptr-additional",
        filter: naptr_additional,
    },
    Accepted {
        id: "bind-soa-negative-ttl",
        filter: soa_negative_ttl,
    },
    Accepted {
        id: "bind-dname-any-target",
        filter: dname_any_target,
    },
    Accepted {
        id: "bind-any-udp-truncated",
        filter: any_udp_truncated,
    },
    Accepted {
        id: "bind-meta-qtype",
        filter: meta_qtype,
    },
];

/// Accepted differences between Heron and NSD: where Heron follows Knot.
const HERON_NSD: &[Accepted] = &[
    Accepted {
        id: "nsd-rrsig-cname",
        filter: nsd_follows_cname_for_rrsig,
    },
    MX_SRV_ADDITIONAL,
    ANY_SUBSET,
    NOTIMP_BODY,
    BADVERS_DO,
    CHAOS,
    NSEC3_WILDCARD_OWNER_NODATA,
];

/// Heron against Knot: the NSD/Knot list and Heron's own item.
const HERON_KNOT: &[Accepted] = &[
    CLASS_ANY_AUTHORITY,
    TRANSFER_REFUSED_RCODE,
    MX_SRV_ADDITIONAL,
    ANY_SUBSET,
    RRSIG_QTYPE,
    NOTIMP_BODY,
    BADVERS_DO,
    CHAOS,
    NSEC3_WILDCARD_OWNER_NODATA,
];

// ---------------------------------------------------------------------------
// Comparing

struct Comparison {
    unaccepted: Vec<String>,
    accepted: BTreeMap<&'static str, usize>,
    compared: usize,
}

fn compare(
    cases: &[Case],
    (a_name, a): (&str, &[Outcome]),
    (b_name, b): (&str, &[Outcome]),
    accepted: &[Accepted],
    verbose: bool,
) -> Comparison {
    let mut cmp = Comparison {
        unaccepted: Vec::new(),
        accepted: accepted.iter().map(|f| (f.id, 0)).collect(),
        compared: 0,
    };
    for ((case, ra), rb) in cases.iter().zip(a).zip(b) {
        cmp.compared += 1;
        let (na, nb) = match (ra, rb) {
            (Ok(na), Ok(nb)) => (na, nb),
            _ => {
                if ra != rb {
                    cmp.unaccepted
                        .push(report(case, a_name, ra, b_name, rb, &[]));
                }
                continue;
            }
        };
        if diff(na, nb).is_empty() {
            continue;
        }
        let (mut fa, mut fb) = (na.clone(), nb.clone());
        let mut used = Vec::new();
        for acc in accepted {
            let before = diff(&fa, &fb);
            (acc.filter)(case, &mut fa, &mut fb);
            if diff(&fa, &fb) != before {
                used.push(acc.id);
            }
        }
        let rest = diff(&fa, &fb);
        if rest.is_empty() {
            // Count only the filters that were needed.
            for id in &used {
                *cmp.accepted.get_mut(id).unwrap() += 1;
            }
            if verbose {
                eprintln!(
                    "accepted ({}): {}\n  {}",
                    used.join(", "),
                    case.describe(),
                    diff(na, nb).join("\n  ")
                );
            }
        } else {
            cmp.unaccepted
                .push(report(case, a_name, ra, b_name, rb, &rest));
        }
    }
    cmp
}

fn report(
    case: &Case,
    a_name: &str,
    a: &Outcome,
    b_name: &str,
    b: &Outcome,
    diffs: &[String],
) -> String {
    let show = |o: &Outcome| match o {
        Ok(n) => n.to_string(),
        Err(e) => e.clone(),
    };
    let mut s = format!("=== {}\n", case.describe());
    if !diffs.is_empty() {
        writeln!(s, "differences after filters (< {a_name}, > {b_name}):").unwrap();
        for d in diffs {
            writeln!(s, "  {d}").unwrap();
        }
    }
    writeln!(s, "{a_name}: {}", show(a)).unwrap();
    writeln!(s, "{b_name}: {}", show(b)).unwrap();
    s
}

fn summary(title: &str, cmp: &Comparison) -> String {
    let mut s = format!(
        "{title}: {} queries, {} unaccepted differences\n",
        cmp.compared,
        cmp.unaccepted.len()
    );
    for (id, n) in &cmp.accepted {
        writeln!(s, "  accepted {id}: {n} responses").unwrap();
    }
    s
}

/// With `DIFF_DUMP=FILE`, writes every case and each server's response.
fn dump(servers: &[(&str, &[Outcome])], cases: &[Case]) {
    let Some(path) = std::env::var_os("DIFF_DUMP") else {
        return;
    };
    let mut s = String::new();
    for (i, case) in cases.iter().enumerate() {
        writeln!(s, "=== {}", case.describe()).unwrap();
        for (name, outcomes) in servers {
            match &outcomes[i] {
                Ok(n) => writeln!(s, "{name}: {n}").unwrap(),
                Err(e) => writeln!(s, "{name}: {e}").unwrap(),
            }
        }
    }
    std::fs::write(&path, s).expect("write DIFF_DUMP");
}

fn verbose() -> bool {
    std::env::var_os("DIFF_VERBOSE").is_some()
}

/// Fails with the full report when there are unaccepted differences.
fn assert_clean(title: &str, cmp: &Comparison) {
    eprintln!("{}", summary(title, cmp));
    if !cmp.unaccepted.is_empty() {
        let mut s = summary(title, cmp);
        for d in &cmp.unaccepted {
            s.push_str(d);
        }
        panic!("{s}");
    }
}

// ---------------------------------------------------------------------------
// What every server must do whatever the others do

/// (relative name, type, rcode) for queries over every transport.
const PINNED_RCODES: &[(&str, RType, &str)] = &[
    ("nx", RType::A, "NXDOMAIN"),
    ("nx.sub.wild", RType::A, "NXDOMAIN"),
    ("nx.*.wild", RType::A, "NXDOMAIN"),
    ("dangling", RType::A, "NXDOMAIN"),
    ("nx.dname", RType::A, "NXDOMAIN"),
    ("c.ent", RType::A, "NOERROR"),
    ("nx.wild", RType::A, "NOERROR"),
    ("nx.mxonly", RType::A, "NOERROR"),
    ("nx.sub", RType::A, "NOERROR"),
];

/// Checks what RFCs pin down and what the zone was built to exercise, so
/// that a comparison cannot pass because both servers missed the point.
fn expectations(server: &str, cases: &[Case], outcomes: &[Outcome]) -> Vec<String> {
    let mut bad = Vec::new();
    let mut unanswered = Vec::new();
    let mut fail = |case: &Case, n: &Normalized, why: &str| {
        bad.push(format!("{server}: {}: {why}\n{n}", case.describe()));
    };
    for (case, outcome) in cases.iter().zip(outcomes) {
        let Ok(n) = outcome else {
            let err = outcome.as_ref().unwrap_err();
            unanswered.push(format!("{server}: {}: {err}", case.describe()));
            continue;
        };
        if !n.has_flag("qr") || n.has_flag("ra") || n.has_flag("rd") != case.rd {
            fail(case, n, "QR must be set, RA clear, RD copied");
        }
        let qname = case.qname.to_lowercase().to_string();
        let rel = qname.strip_suffix(ORIGIN).unwrap_or(&qname);
        let expected = if case.edns_version > 0 {
            Some("BADVERS")
        } else if case.opcode != Opcode::QUERY {
            Some("NOTIMP")
        } else if case.kind == "outside" {
            Some("REFUSED")
        } else if case.qclass != Class::IN {
            None
        } else {
            PINNED_RCODES
                .iter()
                .find(|(name, qtype, _)| {
                    *qtype == case.qtype && rel.strip_suffix('.') == Some(name)
                })
                .map(|p| p.2)
        };
        if let Some(rcode) = expected
            && n.rcode != rcode
        {
            fail(case, n, &format!("expected {rcode}"));
        }
        if n.rcode == "NOTIMP" {
            continue; // question and OPT optional: see notimp-body
        }
        let question = format!("{} {} {}", case.qname, case.qclass, case.qtype);
        if n.question != question {
            fail(case, n, "question not echoed exactly");
        }
        if n.edns.is_some() != matches!(case.transport, Transport::UdpEdns | Transport::UdpEdnsDo) {
            fail(case, n, "OPT in the response iff in the query");
        }
        if case.qtype == RType::TXT && case.qclass == Class::IN {
            let tc = match rel {
                "bigtxt." => Some(case.is_udp()),
                "medtxt." => Some(case.transport == Transport::Udp),
                _ => None,
            };
            if let Some(tc) = tc
                && n.has_flag("tc") != tc
            {
                fail(case, n, &format!("TC should be {tc}"));
            }
        }
    }
    bad.extend(unanswered);
    bad
}

fn assert_expectations(server: &str, cases: &[Case], outcomes: &[Outcome]) {
    let bad = expectations(server, cases, outcomes);
    assert!(
        bad.is_empty(),
        "{} responses break pinned expectations:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

// ---------------------------------------------------------------------------
// Tests

#[test]
fn nsd_vs_knot() {
    nsd_vs_knot_on(&zones(), "NSD vs Knot");
}

/// Starts NSD and Knot on `zones` and compares their answers.
fn nsd_vs_knot_on(zones: &[(&str, PathBuf)], title: &str) {
    let started = Instant::now();
    let cases = cases();
    let nsd = ServerProcess::nsd(zones);
    let knot = ServerProcess::knot(zones);
    let a = run_cases(&nsd, &cases);
    let b = run_cases(&knot, &cases);
    dump(&[("NSD", &a), ("Knot", &b)], &cases);
    assert_expectations("NSD", &cases, &a);
    assert_expectations("Knot", &cases, &b);
    let cmp = compare(&cases, ("NSD", &a), ("Knot", &b), NSD_KNOT, verbose());
    eprintln!("{} cases in {:?}", cases.len(), started.elapsed());
    assert_clean(title, &cmp);
}

#[test]
fn heron_vs_references() {
    heron_vs_references_on(&zones(), "");
}

/// Starts Heron, NSD and Knot on `zones` and compares Heron's answers
/// with each reference's.
fn heron_vs_references_on(zones: &[(&str, PathBuf)], variant: &str) {
    let heron_bin = PathBuf::from(env!("CARGO_BIN_EXE_heron"));
    let cases = cases();
    let heron = ServerProcess::heron(&heron_bin, zones);
    let nsd = ServerProcess::nsd(zones);
    let knot = ServerProcess::knot(zones);
    let h = run_cases(&heron, &cases);
    let n = run_cases(&nsd, &cases);
    let k = run_cases(&knot, &cases);
    dump(&[("Heron", &h), ("NSD", &n), ("Knot", &k)], &cases);
    let vs_nsd = compare(&cases, ("Heron", &h), ("NSD", &n), HERON_NSD, verbose());
    let vs_knot = compare(&cases, ("Heron", &h), ("Knot", &k), HERON_KNOT, verbose());
    eprintln!("{}", summary(&format!("Heron vs Knot{variant}"), &vs_knot));
    assert_expectations("Heron", &cases, &h);
    assert_clean(
        &format!("Heron vs NSD (primary reference){variant}"),
        &vs_nsd,
    );
    assert_clean(
        &format!("Heron vs Knot (secondary reference){variant}"),
        &vs_knot,
    );
}

// ---------------------------------------------------------------------------
// The same zone signed (NSEC, NSEC3, NSEC3 opt-out; the fixtures in
// tests/data/differential/signed, from scripts/sign-test-zones.sh): the
// proofs of denial (NSEC and NSEC3 records in the authority section) and
// the RRSIGs are compared too, for every query with DO set.

/// Runs `compare` on the zone signed with each kind of chain.
fn on_each_signed_zone(compare: impl Fn(&[(&str, PathBuf)], Chain)) {
    for chain in Chain::ALL {
        let signed = SignedZone::fixture(ORIGIN, &zone_file(), chain);
        compare(&[(ORIGIN, signed.path.clone())], chain);
    }
}

#[test]
fn nsd_vs_knot_signed() {
    on_each_signed_zone(|zones, chain| {
        nsd_vs_knot_on(zones, &format!("NSD vs Knot, signed with {chain}"))
    });
}

#[test]
fn nsd_vs_bind_signed() {
    on_each_signed_zone(|zones, chain| {
        nsd_vs_bind_on(zones, &format!("NSD vs BIND, signed with {chain}"))
    });
}

#[test]
fn heron_vs_references_signed() {
    on_each_signed_zone(|zones, chain| {
        heron_vs_references_on(zones, &format!(", signed with {chain}"))
    });
}

#[test]
fn nsd_vs_bind() {
    nsd_vs_bind_on(&zones(), "NSD vs BIND");
}

/// Cases not put to BIND: it answers QCLASS ANY for a nonexistent name
/// FORMERR, and a refused transfer breaks its pipelined TCP batch. Both
/// are compared between Heron, NSD and Knot.
const NOT_FOR_BIND: [&str; 2] = ["class-any", "transfer"];

/// Starts NSD and BIND on `zones` and compares their answers.
fn nsd_vs_bind_on(zones: &[(&str, PathBuf)], title: &str) {
    let mut cases = cases();
    cases.retain(|c| !NOT_FOR_BIND.contains(&c.kind));
    let nsd = ServerProcess::nsd(zones);
    let bind = ServerProcess::bind(zones);
    let a = run_cases(&nsd, &cases);
    let b = run_cases(&bind, &cases);
    assert_expectations("BIND", &cases, &b);
    let cmp = compare(&cases, ("NSD", &a), ("BIND", &b), NSD_BIND, verbose());
    assert_clean(title, &cmp);
}

// ---------------------------------------------------------------------------
// The same server over AF_XDP

/// Every UDP case, asked from a network namespace over a veth pair where
/// Heron answers with AF_XDP, gets the bytes Heron answers over sockets
/// on loopback (IPv4 and IPv6). Needs root and AF_XDP; skipped otherwise.
#[test]
fn heron_over_xdp_answers_as_over_sockets() {
    use heron_testkit::netns::{VethNamespace, skip_without_xdp};
    use heron_testkit::try_query_udp_from;
    if skip_without_xdp() {
        return;
    }
    let net = VethNamespace::new("d").unwrap();
    let zone = zone_file();
    let server = ServerProcess::heron_with_config(
        &PathBuf::from(env!("CARGO_BIN_EXE_heron")),
        "edge.test",
        |port| {
            format!(
                "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n\
                 [xdp]\nlisten = [\"{}@{port}\"]\n\
                 [[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\n",
                net.outside,
                zone.display()
            )
        },
    );
    // Loopback answers before XDP is attached: wait for "ready".
    assert!(server.wait_for_log("ready:"), "{}", server.log());
    let port = server.addr().port();
    let mut cases: Vec<(u16, Vec<u8>)> = cases()
        .iter()
        .enumerate()
        .filter(|(_, c)| c.is_udp())
        .map(|(i, c)| (i as u16, c.query(i as u16)))
        .collect();
    // A NOTIFY: deferred to the pipeline, over XDP as over sockets (no
    // zone here takes NOTIFY from either client).
    let notify = QueryOpts {
        id: u16::MAX,
        opcode: Opcode(4),
        ..Default::default()
    };
    cases.push((u16::MAX, build_query(&name("@"), RType::SOA, &notify)));
    let over_sockets: Vec<Vec<u8>> = cases
        .iter()
        .map(|(_, q)| try_query_udp(server.addr(), q).expect("answer over sockets"))
        .collect();
    for v6 in [false, true] {
        let to = net.server(v6, port);
        let from = if v6 {
            "::".parse().unwrap()
        } else {
            "0.0.0.0".parse().unwrap()
        };
        let over_xdp: Vec<Vec<u8>> = net.within(|| {
            cases
                .iter()
                .map(|(_, q)| try_query_udp_from(from, to, q).expect("answer over XDP"))
                .collect()
        });
        let differ: Vec<u16> = cases
            .iter()
            .zip(over_xdp.iter().zip(&over_sockets))
            .filter(|(_, (x, s))| x != s)
            .map(|((id, _), _)| *id)
            .collect();
        assert!(
            differ.is_empty(),
            "{to}: cases {differ:?} differ from sockets"
        );
        eprintln!(
            "{} UDP cases over XDP to {to}: same bytes as over sockets",
            cases.len()
        );
    }
}
