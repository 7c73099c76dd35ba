//! What differs between the old server's response and Heron's to one
//! probe, by kind. Before comparing, differences that RFCs leave to the
//! server are set aside as *tolerated* (each counted by name, and counted
//! as differences with `--strict`):
//!
//! * `optional-additional`: addresses of MX and SRV targets in the
//!   additional section (RFC 1035 3.3.9, RFC 2782: NSD with
//!   `minimal-responses` leaves them out, Knot and Heron add them), of the
//!   targets of an NS RRset asked for (RFC 1035 3.3.11: BIND leaves them
//!   out when the client offers 512 octets), and the SRV RRset a NAPTR's
//!   replacement names with its addresses (RFC 3403 4.2: BIND adds it).
//! * `authority-ns`: the zone's NS RRset in the authority section of a
//!   positive answer, and its addresses (optional, RFC 1034 4.3.2; NSD adds
//!   it unless `minimal-responses`, Knot and Heron do not).
//! * `additional-rrsigs`: RRSIGs over addresses in the additional section
//!   (RFC 4035 3.1.1 "if space permits"; Heron adds them, as Knot and
//!   BIND do, but leaves an address and its RRSIGs out together when
//!   they do not fit, and adds no address a target has only through a
//!   wildcard).
//! * `truncated-body`: the records of a response both sides truncated
//!   (RFC 2181 9: the client retries over TCP and ignores them).
//! * `wildcard-nsec-proof`: a QTYPE NSEC answer synthesized from a
//!   wildcard, where Heron (as NSD and BIND) adds the NSEC proving no
//!   closer match (RFC 4035 3.1.3.3, a MUST) and the old server (Knot)
//!   does not. Only the proof on Heron's side is set aside, never a
//!   missing one.
//! * `delegation-nsec`: QTYPE NSEC at a delegation point, which the old
//!   server (BIND) answers with the parent's NSEC RRset, and Heron (as NSD
//!   and Knot) with a referral: RFC 4035 3.1.4.1 makes an exception to the
//!   referral for DS only, and the NSEC there is parent-side data, so both
//!   are answers an RFC allows.
//! * `nsec3-parameters`: NSEC3 and NSEC3PARAM records of chains made with
//!   other parameters (salt, iterations): a zone moved with its keys is
//!   signed again under Heron's policy (RFC 9276: no salt), and proves the
//!   same with other owner hashes (`signed.rs`).
//! * `nsec3param-ttl`: the NSEC3PARAM RRset alike but for its TTL (BIND
//!   and Heron serve 0, Knot the zone's); only secondaries read it.
//! * `bind-signing-state`: BIND's private signing-state records (TYPE65534)
//!   at the apex of a zone BIND signs, and that type's bit in the apex's
//!   NSEC or NSEC3 bitmap, on one side only.

use std::collections::BTreeMap;
use std::fmt;

use heron_proto::message::{Record, flags};
use heron_proto::{Name, RType};

use super::normalize::{Response, SECTION_NAMES, record_key};
use super::signed;

/// Which server a probe's failure is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    Old,
    Heron,
}

/// A kind of difference (or of tolerated difference).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DiffKind {
    NoAnswer(Side),
    Malformed(Side),
    Rcode,
    AaFlag,
    TcFlag,
    OtherFlags,
    Edns,
    Question,
    /// An RRset of section `n` only the old server gave.
    Missing(usize),
    /// An RRset of section `n` only Heron gave.
    Extra(usize),
    /// An RRset both gave, with other records.
    Differs(usize),
    /// An RRset both gave, alike but for TTLs.
    Ttl(usize),
    /// Set aside as allowed (see the module's list).
    Tolerated(Tolerance),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tolerance {
    OptionalAdditional,
    AuthorityNs,
    AdditionalRrsigs,
    TruncatedBody,
    WildcardNsecProof,
    DelegationNsec,
    Nsec3Parameters,
    Nsec3paramTtl,
    BindSigningState,
}

impl DiffKind {
    pub fn is_tolerated(self) -> bool {
        matches!(self, DiffKind::Tolerated(_))
    }

    /// A short stable name, for the report and scripts.
    pub fn name(self) -> String {
        let side = |s: Side| if s == Side::Old { "old" } else { "heron" };
        match self {
            DiffKind::NoAnswer(s) => format!("no-answer-{}", side(s)),
            DiffKind::Malformed(s) => format!("malformed-{}", side(s)),
            DiffKind::Rcode => "rcode".into(),
            DiffKind::AaFlag => "aa-flag".into(),
            DiffKind::TcFlag => "tc-flag".into(),
            DiffKind::OtherFlags => "flags".into(),
            DiffKind::Edns => "edns".into(),
            DiffKind::Question => "question".into(),
            DiffKind::Missing(s) => format!("{}-missing", SECTION_NAMES[s]),
            DiffKind::Extra(s) => format!("{}-extra", SECTION_NAMES[s]),
            DiffKind::Differs(s) => format!("{}-differs", SECTION_NAMES[s]),
            DiffKind::Ttl(s) => format!("{}-ttl", SECTION_NAMES[s]),
            DiffKind::Tolerated(t) => match t {
                Tolerance::OptionalAdditional => "optional-additional",
                Tolerance::AuthorityNs => "authority-ns",
                Tolerance::AdditionalRrsigs => "additional-rrsigs",
                Tolerance::TruncatedBody => "truncated-body",
                Tolerance::WildcardNsecProof => "wildcard-nsec-proof",
                Tolerance::DelegationNsec => "delegation-nsec",
                Tolerance::Nsec3Parameters => "nsec3-parameters",
                Tolerance::Nsec3paramTtl => "nsec3param-ttl",
                Tolerance::BindSigningState => "bind-signing-state",
            }
            .into(),
        }
    }

    /// What it means, for the report's heading.
    pub fn meaning(self) -> &'static str {
        match self {
            DiffKind::NoAnswer(Side::Old) => "the old server did not answer (after every retry)",
            DiffKind::NoAnswer(Side::Heron) => "Heron did not answer (after every retry)",
            DiffKind::Malformed(_) => "a response that does not parse",
            DiffKind::Rcode => "another response code",
            DiffKind::AaFlag => "the AA (authoritative) flag differs",
            DiffKind::TcFlag => "the TC (truncated) flag differs",
            DiffKind::OtherFlags => "other header flags differ",
            DiffKind::Edns => "EDNS differs (OPT present, version or DO bit)",
            DiffKind::Question => "the question section differs",
            DiffKind::Missing(_) => "an RRset the old server gives and Heron does not",
            DiffKind::Extra(_) => "an RRset Heron gives and the old server does not",
            DiffKind::Differs(_) => "an RRset both give, with other records",
            DiffKind::Ttl(_) => "an RRset both give alike but for its TTL",
            DiffKind::Tolerated(Tolerance::OptionalAdditional) => {
                "addresses of MX/SRV/NS targets, a NAPTR's SRV, in the additional section (optional)"
            }
            DiffKind::Tolerated(Tolerance::AuthorityNs) => {
                "the zone's NS RRset in the authority section of an answer (optional)"
            }
            DiffKind::Tolerated(Tolerance::AdditionalRrsigs) => {
                "RRSIGs over additional addresses (optional: left out for space, or a target's address only a wildcard makes)"
            }
            DiffKind::Tolerated(Tolerance::TruncatedBody) => {
                "records of a response both truncated (the client retries over TCP)"
            }
            DiffKind::Tolerated(Tolerance::WildcardNsecProof) => {
                "Heron proves no closer match for a QTYPE NSEC wildcard answer (RFC 4035 3.1.3.3)"
            }
            DiffKind::Tolerated(Tolerance::DelegationNsec) => {
                "QTYPE NSEC at a delegation: the old server answers, Heron refers"
            }
            DiffKind::Tolerated(Tolerance::Nsec3Parameters) => {
                "NSEC3 records of chains made with other parameters (salt, iterations)"
            }
            DiffKind::Tolerated(Tolerance::Nsec3paramTtl) => {
                "the NSEC3PARAM RRset alike but for its TTL (only secondaries read it)"
            }
            DiffKind::Tolerated(Tolerance::BindSigningState) => {
                "BIND's private signing-state records (TYPE65534) and their bit in the apex's NSEC/NSEC3"
            }
        }
    }
}

impl fmt::Display for DiffKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// One difference found: its kind and what, in a line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub kind: DiffKind,
    pub detail: String,
}

/// What one side gave for a probe.
#[derive(Clone, Debug)]
pub enum Got {
    Answer(Vec<u8>),
    /// No answer after every try.
    NoAnswer,
}

/// Every difference between the two responses; tolerated ones too (as
/// [`DiffKind::Tolerated`]) unless `strict`, where they are not set aside.
pub fn classify(old: &Got, heron: &Got, ignore_ttl: bool, strict: bool) -> Vec<Finding> {
    let mut found = Vec::new();
    let old = parse_side(old, Side::Old, ignore_ttl, &mut found);
    let heron = parse_side(heron, Side::Heron, ignore_ttl, &mut found);
    if let (Some(mut old), Some(mut heron)) = (old, heron) {
        if !strict {
            tolerate(&mut old, &mut heron, &mut found);
        }
        compare(&old, &heron, &mut found);
    }
    found
}

fn parse_side(
    got: &Got,
    side: Side,
    ignore_ttl: bool,
    found: &mut Vec<Finding>,
) -> Option<Response> {
    let bytes = match got {
        Got::Answer(bytes) => bytes,
        Got::NoAnswer => {
            found.push(Finding {
                kind: DiffKind::NoAnswer(side),
                detail: "no response".into(),
            });
            return None;
        }
    };
    match Response::parse(bytes, ignore_ttl) {
        Ok(r) => Some(r),
        Err(why) => {
            found.push(Finding {
                kind: DiffKind::Malformed(side),
                detail: why,
            });
            None
        }
    }
}

fn compare(old: &Response, heron: &Response, found: &mut Vec<Finding>) {
    let mut push = |kind, detail: String| found.push(Finding { kind, detail });
    if old.rcode != heron.rcode {
        push(
            DiffKind::Rcode,
            format!("{} vs {}", rcode_name(old.rcode), rcode_name(heron.rcode)),
        );
    }
    for (bit, kind) in [(flags::AA, DiffKind::AaFlag), (flags::TC, DiffKind::TcFlag)] {
        if old.has(bit) != heron.has(bit) {
            push(
                kind,
                format!(
                    "old {} vs heron {}",
                    on_off(old.has(bit)),
                    on_off(heron.has(bit))
                ),
            );
        }
    }
    let rest = !(flags::AA | flags::TC);
    if old.flags & rest != heron.flags & rest {
        push(
            DiffKind::OtherFlags,
            format!("{:#06x} vs {:#06x}", old.flags & rest, heron.flags & rest),
        );
    }
    if old.edns != heron.edns {
        push(
            DiffKind::Edns,
            format!("{} vs {}", edns_text(old.edns), edns_text(heron.edns)),
        );
    }
    if old.question != heron.question {
        push(DiffKind::Question, "the question echoed differs".into());
    }
    // Another rcode or a truncation explains the records: no more noise.
    if old.rcode != heron.rcode || old.has(flags::TC) != heron.has(flags::TC) {
        return;
    }
    for section in 0..3 {
        compare_section(
            section,
            &old.sections[section],
            &heron.sections[section],
            found,
        );
    }
}

fn on_off(set: bool) -> &'static str {
    if set { "set" } else { "clear" }
}

fn edns_text(edns: Option<(u8, bool)>) -> String {
    match edns {
        None => "no OPT".into(),
        Some((v, d)) => format!("OPT version {v}{}", if d { " DO" } else { "" }),
    }
}

pub fn rcode_name(rcode: u16) -> String {
    const KNOWN: [&str; 11] = [
        "NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED", "YXDOMAIN", "YXRRSET",
        "NXRRSET", "NOTAUTH", "NOTZONE",
    ];
    KNOWN
        .get(rcode as usize)
        .map_or_else(|| format!("RCODE{rcode}"), |s| s.to_string())
}

/// An RRset's identity: owner, type, and for RRSIG the type covered.
type SetKey = (Name, u16, u16);

fn set_key(r: &Record) -> SetKey {
    let covered = if r.rtype == RType::RRSIG && r.rdata.len() >= 2 {
        u16::from_be_bytes([r.rdata[0], r.rdata[1]])
    } else {
        0
    };
    (r.name.clone(), r.rtype.0, covered)
}

fn rrsets(records: &[Record]) -> BTreeMap<SetKey, Vec<&Record>> {
    let mut sets: BTreeMap<SetKey, Vec<&Record>> = BTreeMap::new();
    for r in records {
        sets.entry(set_key(r)).or_default().push(r);
    }
    sets
}

fn set_name(key: &SetKey) -> String {
    match key.1 {
        46 => format!("{} RRSIG({})", key.0, RType(key.2)),
        t => format!("{} {}", key.0, RType(t)),
    }
}

fn compare_section(section: usize, old: &[Record], heron: &[Record], found: &mut Vec<Finding>) {
    let (old_sets, heron_sets) = (rrsets(old), rrsets(heron));
    for (key, records) in &old_sets {
        let Some(theirs) = heron_sets.get(key) else {
            let detail = format!("{} ({} records)", set_name(key), records.len());
            found.push(Finding {
                kind: DiffKind::Missing(section),
                detail,
            });
            continue;
        };
        if same_records(records, theirs, true) {
            continue;
        }
        let kind = if same_records(records, theirs, false) {
            DiffKind::Ttl(section)
        } else {
            DiffKind::Differs(section)
        };
        let detail = format!(
            "{}: {} vs {}",
            set_name(key),
            records_text(records),
            records_text(theirs)
        );
        found.push(Finding { kind, detail });
    }
    for (key, records) in &heron_sets {
        if !old_sets.contains_key(key) {
            let detail = format!("{} ({} records)", set_name(key), records.len());
            found.push(Finding {
                kind: DiffKind::Extra(section),
                detail,
            });
        }
    }
}

fn same_records(a: &[&Record], b: &[&Record], with_ttl: bool) -> bool {
    let strip = |r: &&Record| {
        let (n, t, c, ttl, d) = record_key(r);
        (n.to_vec(), t, c, if with_ttl { ttl } else { 0 }, d.to_vec())
    };
    a.len() == b.len() && a.iter().map(strip).eq(b.iter().map(strip))
}

fn records_text(records: &[&Record]) -> String {
    let text: Vec<String> = records.iter().map(|r| record_text(r)).collect();
    let joined = text.join("; ");
    if joined.chars().count() > 300 {
        format!("{}…", joined.chars().take(300).collect::<String>())
    } else {
        joined
    }
}

/// A record as a report shows it: an RRSIG by what it is compared by
/// (its dates and signature were set aside when it was read), so that
/// none reads as if a server had sent dates of 1970.
pub(super) fn record_text(r: &Record) -> String {
    let d = &r.rdata;
    if r.rtype != RType::RRSIG || d.len() < 19 {
        return r.to_string();
    }
    let signer = Name::from_wire(&d[18..d.len() - 1]).map_or("?".into(), |n| n.to_string());
    format!(
        "{} {} {} RRSIG {} alg {} labels {} original TTL {} key {} signer {} (dates and signature not compared)",
        r.name,
        r.ttl,
        r.class,
        RType(u16::from_be_bytes([d[0], d[1]])),
        d[2],
        d[3],
        u32::from_be_bytes([d[4], d[5], d[6], d[7]]),
        u16::from_be_bytes([d[16], d[17]]),
        signer
    )
}

/// Sets aside, from both responses, what the module's list allows to
/// differ; a [`DiffKind::Tolerated`] finding for each that did.
fn tolerate(old: &mut Response, heron: &mut Response, found: &mut Vec<Finding>) {
    let mut set_aside = |t: Tolerance, detail: String| {
        found.push(Finding {
            kind: DiffKind::Tolerated(t),
            detail,
        })
    };
    if old.has(flags::TC) && heron.has(flags::TC) {
        if old.sections != heron.sections {
            set_aside(
                Tolerance::TruncatedBody,
                "records of truncated responses".into(),
            );
        }
        old.sections = Default::default();
        heron.sections = Default::default();
        return;
    }
    let is_address_sig = |r: &Record| {
        r.rtype == RType::RRSIG
            && r.rdata.len() >= 2
            && matches!(u16::from_be_bytes([r.rdata[0], r.rdata[1]]), 1 | 28)
    };
    if drop_differing(old, heron, 2, |_, r| is_address_sig(r)) {
        set_aside(
            Tolerance::AdditionalRrsigs,
            "RRSIG over A/AAAA in the additional section".into(),
        );
    }
    optional_additional(old, heron, &mut set_aside);
    authority_ns(old, heron, &mut set_aside);
    wildcard_nsec_proof(old, heron, &mut set_aside);
    delegation_nsec(old, heron, &mut set_aside);
    if signed::bind_signing_state(old, heron) {
        let what = "BIND's private signing-state records (TYPE65534) and their type bit";
        set_aside(Tolerance::BindSigningState, what.into());
    }
    if signed::nsec3_parameters(old, heron) {
        let what = "NSEC3 records of chains made with other parameters (salt, iterations)";
        set_aside(Tolerance::Nsec3Parameters, what.into());
    }
    if signed::nsec3param_ttl(old, heron) {
        let what = "the TTL of the NSEC3PARAM RRset";
        set_aside(Tolerance::Nsec3paramTtl, what.into());
    }
}

/// Addresses of the MX, SRV and NS targets in the answer section, and
/// the SRV RRsets NAPTR replacements name (with their targets'
/// addresses), where the two sides' additional sections differ in them.
fn optional_additional(
    old: &mut Response,
    heron: &mut Response,
    set_aside: &mut impl FnMut(Tolerance, String),
) {
    let kinds = [RType::MX, RType::SRV, RType::NS];
    let mut targets = targets_in(old, 0, &kinds);
    targets.extend(targets_in(heron, 0, &kinds));
    let mut replacements = naptr_replacements(old);
    replacements.extend(naptr_replacements(heron));
    for r in [&*old, &*heron] {
        for srv in r.sections[2].iter().filter(|s| s.rtype == RType::SRV) {
            if replacements.contains(&srv.name) {
                targets.extend(
                    Name::read_uncompressed(&srv.rdata, 6)
                        .ok()
                        .map(|(n, _)| n.to_lowercase()),
                );
            }
        }
    }
    let is_srv = |r: &Record| {
        r.rtype == RType::SRV || (r.rtype == RType::RRSIG && r.rdata.get(..2) == Some(&[0, 33]))
    };
    if drop_differing(old, heron, 2, |_, r| {
        (is_address(r) && targets.contains(&r.name))
            || (is_srv(r) && replacements.contains(&r.name))
    }) {
        set_aside(
            Tolerance::OptionalAdditional,
            "addresses of MX/SRV/NS targets, a NAPTR's SRV".into(),
        );
    }
}

/// The replacement names of the NAPTR records in the answer section.
fn naptr_replacements(r: &Response) -> Vec<Name> {
    let replacement = |rdata: &[u8]| {
        let mut at = 4;
        for _ in 0..3 {
            at += 1 + *rdata.get(at)? as usize;
        }
        Name::read_uncompressed(rdata, at)
            .ok()
            .map(|(n, _)| n.to_lowercase())
    };
    r.sections[0]
        .iter()
        .filter(|rec| rec.rtype == RType::NAPTR)
        .filter_map(|rec| replacement(&rec.rdata))
        .collect()
}

/// The name and type asked, from the question echoed.
fn question_of(r: &Response) -> Option<(Name, RType)> {
    let (name, end) = Name::read_uncompressed(&r.question, 0).ok()?;
    let t = r.question.get(end..end + 2)?;
    Some((name.to_lowercase(), RType(u16::from_be_bytes([t[0], t[1]]))))
}

fn covers(r: &Record, rtype: RType) -> bool {
    r.rtype == RType::RRSIG && r.rdata.get(..2) == Some(&rtype.0.to_be_bytes()[..])
}

/// A QTYPE NSEC answer expanded from a wildcard (an RRSIG(NSEC) with
/// fewer labels than its owner) that both give alike, where only Heron
/// adds the NSEC RRsets proving no closer match to the authority section.
fn wildcard_nsec_proof(
    old: &mut Response,
    heron: &mut Response,
    set_aside: &mut impl FnMut(Tolerance, String),
) {
    let is_nsec = |r: &Record| r.rtype == RType::NSEC || covers(r, RType::NSEC);
    let expanded = |r: &Record| {
        covers(r, RType::NSEC)
            && r.rdata
                .get(3)
                .is_some_and(|&labels| (labels as usize) < r.name.label_count())
    };
    let applies = question_of(old).is_some_and(|(_, t)| t == RType::NSEC)
        && old.rcode == 0
        && heron.rcode == 0
        && old.sections[0] == heron.sections[0]
        && old.sections[0].iter().any(expanded)
        && !old.sections[1].iter().any(is_nsec)
        && heron.sections[1].iter().any(is_nsec);
    if applies {
        heron.sections[1].retain(|r| !is_nsec(r));
        set_aside(
            Tolerance::WildcardNsecProof,
            "the no-closer-match NSEC of a wildcard NSEC answer".into(),
        );
    }
}

/// QTYPE NSEC at a delegation point: the old server's authoritative
/// answer with the NSEC there, Heron's referral to the child.
fn delegation_nsec(
    old: &mut Response,
    heron: &mut Response,
    set_aside: &mut impl FnMut(Tolerance, String),
) {
    let Some((qname, RType::NSEC)) = question_of(old) else {
        return;
    };
    let answers_nsec = old.rcode == 0
        && old.has(flags::AA)
        && !old.sections[0].is_empty()
        && old.sections[0]
            .iter()
            .all(|r| r.name == qname && (r.rtype == RType::NSEC || covers(r, RType::NSEC)));
    let refers = heron.rcode == 0
        && !heron.has(flags::AA)
        && heron.sections[0].is_empty()
        && heron.sections[1]
            .iter()
            .any(|r| r.rtype == RType::NS && r.name == qname);
    if answers_nsec && refers {
        old.sections = Default::default();
        heron.sections = Default::default();
        heron.flags = old.flags;
        set_aside(
            Tolerance::DelegationNsec,
            "QTYPE NSEC at a delegation point".into(),
        );
    }
}

/// The NS RRset in the authority section of a positive answer, on one
/// side only, with the addresses of its targets.
fn authority_ns(
    old: &mut Response,
    heron: &mut Response,
    set_aside: &mut impl FnMut(Tolerance, String),
) {
    let positive = |r: &Response| r.rcode == 0 && !r.sections[0].is_empty();
    let has_ns = |r: &Response| r.sections[1].iter().any(|r| r.rtype == RType::NS);
    if !(positive(old) && positive(heron)) || has_ns(old) == has_ns(heron) {
        return;
    }
    let mut targets = targets_in(old, 1, &[RType::NS]);
    targets.extend(targets_in(heron, 1, &[RType::NS]));
    let covers_ns = |r: &Record| r.rtype == RType::RRSIG && r.rdata.get(..2) == Some(&[0, 2]);
    drop_differing(old, heron, 1, |_, r| r.rtype == RType::NS || covers_ns(r));
    drop_differing(old, heron, 2, |_, r| {
        is_address(r) && targets.contains(&r.name)
    });
    set_aside(
        Tolerance::AuthorityNs,
        "NS RRset in the authority section".into(),
    );
}

fn is_address(r: &Record) -> bool {
    matches!(r.rtype.0, 1 | 28)
        || (r.rtype == RType::RRSIG && matches!(r.rdata.get(..2), Some([0, 1] | [0, 28])))
}

/// The names that records of `types` in `section` point to.
fn targets_in(r: &Response, section: usize, types: &[RType]) -> Vec<Name> {
    r.sections[section]
        .iter()
        .filter(|rec| types.contains(&rec.rtype))
        .filter_map(|rec| {
            let at = match rec.rtype {
                RType::MX => 2,
                RType::SRV => 6,
                _ => 0,
            };
            Name::read_uncompressed(&rec.rdata, at)
                .ok()
                .map(|(n, _)| n.to_lowercase())
        })
        .collect()
}

/// Removes the records `pick` chooses from `section` of both responses;
/// true if the two sides' picked records differed.
fn drop_differing(
    old: &mut Response,
    heron: &mut Response,
    section: usize,
    pick: impl Fn(usize, &Record) -> bool,
) -> bool {
    let picked = |r: &Response| -> Vec<Record> {
        r.sections[section]
            .iter()
            .filter(|rec| pick(section, rec))
            .cloned()
            .collect()
    };
    let differ = picked(old) != picked(heron);
    if differ {
        old.sections[section].retain(|rec| !pick(section, rec));
        heron.sections[section].retain(|rec| !pick(section, rec));
    }
    differ
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_proto::message::{HEADER_LEN, Header};

    /// An RRSIG read for comparing is shown by what it is compared by.
    #[test]
    fn an_rrsig_is_shown_by_what_is_compared() {
        let mut rdata = vec![0, 1, 13, 3, 0, 0, 0, 60];
        rdata.extend([0; 8]);
        rdata.extend([0, 7]);
        rdata.extend_from_slice(Name::parse("n.test").unwrap().as_wire());
        rdata.push(0);
        let r = Record {
            name: Name::parse("www.n.test").unwrap(),
            rtype: RType::RRSIG,
            class: heron_proto::Class::IN,
            ttl: 60,
            rdata,
        };
        assert_eq!(
            record_text(&r),
            "www.n.test. 60 IN RRSIG A alg 13 labels 3 original TTL 60 key 7 signer n.test. (dates and signature not compared)"
        );
    }

    /// The examples of a report show an RRSIG as the summary does, not
    /// with the dates and signature set aside when it was read, which read
    /// as sent by a server (black-box finding DB-9: "19700101000000 ...
    /// AA==").
    #[test]
    fn an_example_shows_an_rrsig_by_what_is_compared() {
        let mut rdata = vec![0, 1, 13, 3, 0, 0, 0, 60];
        rdata.extend(0x6000_0000u32.to_be_bytes());
        rdata.extend(0x5F00_0000u32.to_be_bytes());
        rdata.extend([0, 7]);
        rdata.extend_from_slice(Name::parse("n.test").unwrap().as_wire());
        rdata.extend([1, 2, 3, 4]);
        let got = msg().with(0, "www.n.test", RType::RRSIG, rdata).got();
        let said = crate::compare::report::describe(&got);
        assert!(
            said.contains("key 7 signer n.test. (dates and signature not compared)"),
            "{said}"
        );
        assert!(!said.contains("1970"), "{said}");
    }

    struct Msg {
        flags: u16,
        rcode: u16,
        sections: [Vec<(&'static str, RType, Vec<u8>)>; 3],
        ttl: u32,
        qtype: RType,
    }

    fn msg() -> Msg {
        Msg {
            flags: flags::QR | flags::AA,
            rcode: 0,
            sections: Default::default(),
            ttl: 300,
            qtype: RType::A,
        }
    }

    fn wire(name: &str) -> Vec<u8> {
        Name::parse(name).unwrap().as_wire().to_vec()
    }

    impl Msg {
        fn with(
            mut self,
            section: usize,
            owner: &'static str,
            rtype: RType,
            rdata: Vec<u8>,
        ) -> Msg {
            self.sections[section].push((owner, rtype, rdata));
            self
        }

        fn bytes(&self) -> Vec<u8> {
            let mut m = vec![0u8; HEADER_LEN];
            Header {
                id: 1,
                flags: self.flags | self.rcode,
                qdcount: 1,
                ancount: self.sections[0].len() as u16,
                nscount: self.sections[1].len() as u16,
                arcount: self.sections[2].len() as u16,
            }
            .write(&mut m);
            m.extend_from_slice(&wire("q.c.test"));
            m.extend_from_slice(&self.qtype.0.to_be_bytes());
            m.extend_from_slice(&[0, 1]);
            for (owner, rtype, rdata) in self.sections.iter().flatten() {
                m.extend_from_slice(&wire(owner));
                m.extend_from_slice(&rtype.0.to_be_bytes());
                m.extend_from_slice(&[0, 1]);
                m.extend_from_slice(&self.ttl.to_be_bytes());
                m.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
                m.extend_from_slice(rdata);
            }
            m
        }

        fn got(&self) -> Got {
            Got::Answer(self.bytes())
        }
    }

    fn kinds(old: &Msg, heron: &Msg, strict: bool) -> Vec<String> {
        classify(&old.got(), &heron.got(), false, strict)
            .iter()
            .map(|f| f.kind.name())
            .collect()
    }

    fn a(last: u8) -> Vec<u8> {
        vec![192, 0, 2, last]
    }

    #[test]
    fn alike_responses_have_no_differences() {
        let m = msg()
            .with(0, "q.c.test", RType::A, a(1))
            .with(0, "q.c.test", RType::A, a(2));
        let reordered =
            msg()
                .with(0, "q.c.test", RType::A, a(2))
                .with(0, "q.c.test", RType::A, a(1));
        assert!(kinds(&m, &reordered, true).is_empty());
    }

    #[test]
    fn each_kind_is_told_apart() {
        let base = msg().with(0, "q.c.test", RType::A, a(1));
        let changed = msg().with(0, "q.c.test", RType::A, a(9));
        assert_eq!(kinds(&base, &changed, false), ["answer-differs"]);
        let nx = Msg { rcode: 3, ..msg() };
        assert_eq!(kinds(&base, &nx, false), ["rcode"]);
        let not_aa = Msg {
            flags: flags::QR,
            ..msg().with(0, "q.c.test", RType::A, a(1))
        };
        assert_eq!(kinds(&base, &not_aa, false), ["aa-flag"]);
        let longer = Msg {
            ttl: 301,
            ..msg().with(0, "q.c.test", RType::A, a(1))
        };
        assert_eq!(kinds(&base, &longer, false), ["answer-ttl"]);
        assert!(classify(&base.got(), &longer.got(), true, false).is_empty());
        let glue = msg()
            .with(1, "d.c.test", RType::NS, wire("ns.d.c.test"))
            .with(2, "ns.d.c.test", RType::A, a(3));
        let no_glue = msg().with(1, "d.c.test", RType::NS, wire("ns.d.c.test"));
        assert_eq!(kinds(&no_glue, &glue, false), ["additional-extra"]);
        assert_eq!(kinds(&glue, &no_glue, false), ["additional-missing"]);
        let tc = Msg {
            flags: flags::QR | flags::AA | flags::TC,
            ..msg()
        };
        assert_eq!(kinds(&base, &tc, false), ["tc-flag"]);
        assert_eq!(kinds(&base, &base, false).len(), 0);
        let none = classify(&Got::NoAnswer, &base.got(), false, false);
        assert_eq!(none[0].kind, DiffKind::NoAnswer(Side::Old));
        let bad = classify(&base.got(), &Got::Answer(vec![1, 2, 3]), false, false);
        assert_eq!(bad[0].kind, DiffKind::Malformed(Side::Heron));
    }

    #[test]
    fn optional_records_are_tolerated_unless_strict() {
        let mx = |m: Msg| {
            m.with(
                0,
                "q.c.test",
                RType::MX,
                [vec![0, 10], wire("mail.c.test")].concat(),
            )
        };
        let bare = mx(msg());
        let with_address = mx(msg()).with(2, "mail.c.test", RType::A, a(5));
        assert_eq!(kinds(&bare, &with_address, false), ["optional-additional"]);
        assert_eq!(kinds(&bare, &with_address, true), ["additional-extra"]);
        let with_ns = bare_answer()
            .with(1, "c.test", RType::NS, wire("ns.c.test"))
            .with(2, "ns.c.test", RType::A, a(6));
        assert_eq!(kinds(&with_ns, &bare_answer(), false), ["authority-ns"]);
        assert_eq!(
            kinds(&with_ns, &bare_answer(), true),
            ["authority-missing", "additional-missing"]
        );
        // Glue of a referral is not optional.
        let referral = msg()
            .with(1, "d.c.test", RType::NS, wire("ns.d.c.test"))
            .with(2, "ns.d.c.test", RType::A, a(3));
        let referral_no_glue = msg().with(1, "d.c.test", RType::NS, wire("ns.d.c.test"));
        assert_eq!(
            kinds(&referral, &referral_no_glue, false),
            ["additional-missing"]
        );
    }

    fn bare_answer() -> Msg {
        msg().with(0, "q.c.test", RType::A, a(1))
    }

    #[test]
    fn truncated_bodies_are_not_compared() {
        let tc = |m: Msg| Msg {
            flags: flags::QR | flags::AA | flags::TC,
            ..m
        };
        let a1 = tc(bare_answer());
        assert_eq!(kinds(&a1, &tc(msg()), false), ["truncated-body"]);
    }

    /// RRSIG RDATA covering `covered`, with `labels` in its labels field.
    fn rrsig(covered: RType, labels: u8) -> Vec<u8> {
        let mut d = covered.0.to_be_bytes().to_vec();
        d.extend_from_slice(&[13, labels, 0, 0, 1, 44]);
        d.extend_from_slice(&[0; 10]);
        d.extend_from_slice(&wire("c.test"));
        d.extend_from_slice(&[7; 64]);
        d
    }

    fn nsec(next: &str) -> Vec<u8> {
        [wire(next), vec![0, 1, 0x40]].concat()
    }

    fn asking(qtype: RType, m: Msg) -> Msg {
        Msg { qtype, ..m }
    }

    #[test]
    fn a_wildcard_nsec_answer_may_have_its_proof_on_herons_side_only() {
        let answer = |m: Msg, labels| {
            m.with(0, "q.c.test", RType::NSEC, nsec("z.c.test")).with(
                0,
                "q.c.test",
                RType::RRSIG,
                rrsig(RType::NSEC, labels),
            )
        };
        let proof = |m: Msg| {
            m.with(1, "*.c.test", RType::NSEC, nsec("z.c.test")).with(
                1,
                "*.c.test",
                RType::RRSIG,
                rrsig(RType::NSEC, 2),
            )
        };
        let knot = asking(RType::NSEC, answer(msg(), 2));
        let heron = asking(RType::NSEC, proof(answer(msg(), 2)));
        assert_eq!(kinds(&knot, &heron, false), ["wildcard-nsec-proof"]);
        assert_eq!(
            kinds(&knot, &heron, true),
            ["authority-extra", "authority-extra"]
        );
        // A proof missing on Heron's side is a difference.
        assert_eq!(
            kinds(&heron, &knot, false),
            ["authority-missing", "authority-missing"]
        );
        // Not expanded from a wildcard (labels = the owner's): no tolerance.
        let exact = asking(RType::NSEC, answer(msg(), 3));
        let exact_proof = asking(RType::NSEC, proof(answer(msg(), 3)));
        assert_eq!(
            kinds(&exact, &exact_proof, false),
            ["authority-extra", "authority-extra"]
        );
        // Another type asked: no tolerance.
        let a = answer(msg(), 2);
        assert_eq!(kinds(&a, &proof(answer(msg(), 2)), false).len(), 2);
    }

    #[test]
    fn nsec_at_a_delegation_may_be_answered_or_referred() {
        let bind = asking(
            RType::NSEC,
            msg().with(0, "q.c.test", RType::NSEC, nsec("z.c.test")),
        );
        let referral = Msg {
            flags: flags::QR,
            ..asking(
                RType::NSEC,
                msg()
                    .with(1, "q.c.test", RType::NS, wire("ns.q.c.test"))
                    .with(2, "ns.q.c.test", RType::A, a(3)),
            )
        };
        assert_eq!(kinds(&bind, &referral, false), ["delegation-nsec"]);
        assert!(kinds(&bind, &referral, true).contains(&"aa-flag".to_string()));
        // Heron answering where the old server refers is a difference.
        assert!(kinds(&referral, &bind, false).contains(&"aa-flag".to_string()));
        // A referral for another name than the one asked: a difference.
        let elsewhere = Msg {
            flags: flags::QR,
            ..asking(
                RType::NSEC,
                msg().with(1, "d.c.test", RType::NS, wire("ns.d.c.test")),
            )
        };
        assert!(kinds(&bind, &elsewhere, false).contains(&"aa-flag".to_string()));
    }

    /// NSEC3 RDATA: SHA-1, 0 iterations, `salt`, a hash of `hash`
    /// octets, types A and `more`.
    fn nsec3(salt: &[u8], hash: u8, more: &[u16]) -> Vec<u8> {
        let mut d = vec![1, 0, 0, 0, salt.len() as u8];
        d.extend_from_slice(salt);
        d.push(20);
        d.extend([hash; 20]);
        let mut types = vec![1];
        types.extend_from_slice(more);
        heron_proto::rdata::encode_type_bitmap(&types, &mut d);
        d
    }

    fn nsec3param(salt: &[u8]) -> Vec<u8> {
        [vec![1, 0, 0, 0, salt.len() as u8], salt.to_vec()].concat()
    }

    fn soa() -> Vec<u8> {
        [wire("ns.c.test"), wire("h.c.test"), vec![0; 20]].concat()
    }

    /// A zone moved to Heron with its keys gets a chain of Heron's
    /// parameters (no salt): denial proofs of other owner hashes, and
    /// another NSEC3PARAM, are set aside; under one set of parameters a
    /// proof that differs is not (black-box finding BT-8).
    #[test]
    fn nsec3_chains_of_other_parameters_prove_alike() {
        let denial = |salt: &[u8], owner: &'static str, hash: u8| {
            Msg { rcode: 3, ..msg() }
                .with(1, "c.test", RType::SOA, soa())
                .with(1, "c.test", RType::RRSIG, rrsig(RType::SOA, 2))
                .with(1, owner, RType::NSEC3, nsec3(salt, hash, &[]))
                .with(1, owner, RType::RRSIG, rrsig(RType::NSEC3, 3))
        };
        let knot = denial(&[0xab, 0xcd], "k1.c.test", 1);
        let heron = denial(&[], "h1.c.test", 2);
        assert_eq!(kinds(&knot, &heron, false), ["nsec3-parameters"]);
        let strict = kinds(&knot, &heron, true);
        assert!(
            strict.contains(&"authority-missing".to_string()),
            "{strict:?}"
        );
        let other_proof = denial(&[0xab, 0xcd], "k2.c.test", 3);
        let found = kinds(&knot, &other_proof, false);
        assert!(
            found.contains(&"authority-missing".to_string()),
            "{found:?}"
        );
        assert!(
            !found.contains(&"nsec3-parameters".to_string()),
            "{found:?}"
        );
        let param = |salt: &[u8]| {
            asking(RType::NSEC3PARAM, msg())
                .with(0, "c.test", RType::NSEC3PARAM, nsec3param(salt))
                .with(0, "c.test", RType::RRSIG, rrsig(RType::NSEC3PARAM, 2))
        };
        assert_eq!(
            kinds(&param(&[0xab]), &param(&[]), false),
            ["nsec3-parameters"]
        );
    }

    /// The NSEC3PARAM served with TTL 0 (BIND, Heron) or the zone's
    /// (Knot), its RRSIG's original TTL alike, is set aside; another TTL
    /// of any other RRset is not.
    #[test]
    fn the_nsec3param_ttl_may_differ() {
        let param = |ttl: u32| {
            let mut sig = rrsig(RType::NSEC3PARAM, 2);
            sig[4..8].copy_from_slice(&ttl.to_be_bytes());
            Msg {
                ttl,
                ..asking(RType::NSEC3PARAM, msg())
                    .with(0, "c.test", RType::NSEC3PARAM, nsec3param(&[]))
                    .with(0, "c.test", RType::RRSIG, sig)
            }
        };
        assert_eq!(kinds(&param(300), &param(0), false), ["nsec3param-ttl"]);
        assert!(kinds(&param(300), &param(300), false).is_empty());
        let found = kinds(&param(300), &param(0), true);
        assert!(found.contains(&"answer-ttl".to_string()), "{found:?}");
        let a_ttl = |ttl| Msg {
            ttl,
            ..msg().with(0, "q.c.test", RType::A, a(1))
        };
        assert_eq!(kinds(&a_ttl(300), &a_ttl(0), false), ["answer-ttl"]);
    }

    /// BIND's TYPE65534 at the apex of a zone it signs: the record asked
    /// for, and its bit in the apex's NSEC3 bitmap of a NODATA proof, on
    /// BIND's side only, are set aside; on both sides alike nothing is
    /// said.
    #[test]
    fn bind_signing_state_records_are_set_aside() {
        let nodata = |more: &[u16]| {
            msg()
                .with(1, "c.test", RType::SOA, soa())
                .with(1, "x.c.test", RType::NSEC3, nsec3(&[], 1, more))
                .with(1, "x.c.test", RType::RRSIG, rrsig(RType::NSEC3, 3))
        };
        let bind = nodata(&[6, 65534]);
        assert_eq!(kinds(&bind, &nodata(&[6]), false), ["bind-signing-state"]);
        assert!(kinds(&bind, &bind, false).is_empty());
        let found = kinds(&bind, &nodata(&[6]), true);
        assert_eq!(found, ["authority-differs"]);
        let state = RType(65534);
        let asked = asking(state, msg()).with(0, "c.test", state, vec![13, 0, 1, 0, 0]);
        let none = asking(state, nodata(&[6]));
        assert_eq!(kinds(&asked, &none, false), ["bind-signing-state"]);
    }

    #[test]
    fn ns_targets_and_naptr_srv_in_the_additional_section_are_optional() {
        let ns = msg().with(0, "c.test", RType::NS, wire("ns.c.test"));
        let with_glue = msg().with(0, "c.test", RType::NS, wire("ns.c.test")).with(
            2,
            "ns.c.test",
            RType::A,
            a(1),
        );
        assert_eq!(kinds(&ns, &with_glue, false), ["optional-additional"]);
        let naptr_rdata = [
            vec![0, 100, 0, 10, 1, b'S', 7],
            b"SIP+D2U".to_vec(),
            vec![0],
            wire("_sip._udp.c.test"),
        ]
        .concat();
        let naptr = msg().with(0, "q.c.test", RType::NAPTR, naptr_rdata.clone());
        let srv = [vec![0, 10, 0, 60, 0x13, 0xc4], wire("sip.c.test")].concat();
        let bind = msg()
            .with(0, "q.c.test", RType::NAPTR, naptr_rdata)
            .with(2, "_sip._udp.c.test", RType::SRV, srv)
            .with(2, "sip.c.test", RType::A, a(2));
        assert_eq!(kinds(&bind, &naptr, false), ["optional-additional"]);
        assert_eq!(
            kinds(&bind, &naptr, true),
            ["additional-missing", "additional-missing"]
        );
    }
}
