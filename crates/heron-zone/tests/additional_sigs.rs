//! RRSIGs over the addresses in the additional section (RFC 4035 3.1.1):
//! with DO set, an authoritative A or AAAA RRset an NS, MX or SRV answer
//! brings along carries its RRSIGs; glue below a delegation carries none
//! (it is not signed); without DO nothing changes. What does not fit is
//! left out, an address RRset and its RRSIGs together, without TC.
//!
//! The zone is signed by hand with made-up signatures: the engine copies
//! them and checks nothing, so their bytes do not matter here (the
//! integration tests in `crates/heron` use real signers and validators).

use heron_proto::message::{Message, Record, flags};
use heron_proto::{Name, RType};
use heron_zone::{
    AnswerConfig, Answered, BatchAnswerer, Catalog, Transport, Zone, answer, load_zone_str,
};

/// An RRSIG over `covered` at `owner` (of `labels` labels) with a made-up
/// 256-octet signature, as RSA-2048 gives.
fn sig(owner: &str, covered: &str, labels: u8) -> String {
    let signature = "A".repeat(342) + "==";
    format!(
        "{owner} 3600 RRSIG {covered} 8 {labels} 3600 20300101000000 20200101000000 12345 example.test. {signature}"
    )
}

/// A signed zone (without a denial chain: none of these answers needs
/// one). `bare` has an unsigned A (a partially signed zone); `ns.sub` is
/// glue, and a signature over it (which no signer makes) is ignored.
fn zone_text() -> String {
    [
        "$ORIGIN example.test.",
        "$TTL 3600",
        "@ SOA ns1 hostmaster 1 7200 3600 1209600 300",
        &sig("@", "SOA", 2),
        "@ NS ns1",
        "@ NS ns.elsewhere.net.",
        &sig("@", "NS", 2),
        "@ MX 10 mail",
        "@ MX 20 bare",
        &sig("@", "MX", 2),
        "ns1 A 192.0.2.53",
        &sig("ns1", "A", 3),
        "ns1 AAAA 2001:db8::53",
        &sig("ns1", "AAAA", 3),
        "mail A 192.0.2.25",
        &sig("mail", "A", 3),
        "mail AAAA 2001:db8::25",
        &sig("mail", "AAAA", 3),
        "bare A 192.0.2.26",
        "srv SRV 0 5 5060 mail",
        &sig("srv", "SRV", 3),
        "sub NS ns.sub",
        "sub NS ns1",
        "sub DS 12345 13 2 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        &sig("sub", "DS", 3),
        "ns.sub A 192.0.2.99",
        &sig("ns.sub", "A", 4),
        "in.sub MX 10 ns.sub", // occluded, never answered
    ]
    .join("\n")
}

fn load(text: &str) -> Zone {
    let origin = Name::parse("example.test").unwrap();
    load_zone_str(text, "signed.zone", &origin)
        .unwrap_or_else(|p| panic!("{p:?}"))
        .zone
}

fn catalog() -> Catalog {
    let mut c = Catalog::new();
    c.insert(load(&zone_text()));
    c
}

/// A query for `name` `qtype` with EDNS (payload `size`) and DO as given.
fn query(name: &str, qtype: RType, size: u16, do_bit: bool) -> Vec<u8> {
    let mut m = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1];
    m.extend_from_slice(Name::parse(name).unwrap().as_wire());
    m.extend_from_slice(&qtype.0.to_be_bytes());
    m.extend_from_slice(&[0, 1, 0, 0, 41]);
    m.extend_from_slice(&size.to_be_bytes());
    m.extend_from_slice(&[0, 0, if do_bit { 0x80 } else { 0 }, 0, 0, 0]);
    m
}

fn ask_raw(cat: &Catalog, query: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let how = answer(
        cat,
        &AnswerConfig::default(),
        query,
        Transport::Udp,
        &mut out,
    );
    assert_eq!(how, Answered::Response);
    out
}

fn ask(cat: &Catalog, name: &str, qtype: RType, do_bit: bool) -> Message {
    Message::parse(&ask_raw(cat, &query(name, qtype, 1232, do_bit))).unwrap()
}

/// The additional section less the OPT record, as "owner type" (an RRSIG
/// with the type it covers), in order.
fn additional(m: &Message) -> Vec<String> {
    m.additional
        .iter()
        .filter(|r| r.rtype != RType::OPT)
        .map(describe)
        .collect()
}

fn describe(r: &Record) -> String {
    match r.rtype {
        RType::RRSIG => {
            let covered = RType(u16::from_be_bytes([r.rdata[0], r.rdata[1]]));
            format!("{} RRSIG {covered}", r.name)
        }
        t => format!("{} {t}", r.name),
    }
}

/// A name's A and AAAA, each followed by its RRSIG, as [`additional`]
/// lists them.
fn signed_pair(name: &str) -> Vec<String> {
    ["A", "RRSIG A", "AAAA", "RRSIG AAAA"]
        .iter()
        .map(|t| format!("{name}.example.test. {t}"))
        .collect()
}

#[test]
fn an_mx_target_in_the_zone_brings_its_rrsigs_with_do() {
    let cat = catalog();
    let m = ask(&cat, "example.test", RType::MX, true);
    assert_eq!(
        additional(&m),
        // Partially signed: bare's address comes without a signature.
        [signed_pair("mail"), vec!["bare.example.test. A".into()]].concat()
    );
    // The signature is the zone's, copied whole.
    let rrsig = m
        .additional
        .iter()
        .find(|r| r.rtype == RType::RRSIG)
        .unwrap();
    assert!(rrsig.to_string().contains("12345 example.test."), "{rrsig}");
    assert_eq!(rrsig.ttl, 3600);
    // Without DO: the addresses alone, as before.
    let m = ask(&cat, "example.test", RType::MX, false);
    assert_eq!(
        additional(&m),
        [
            "mail.example.test. A",
            "mail.example.test. AAAA",
            "bare.example.test. A"
        ]
    );
}

#[test]
fn apex_ns_and_srv_targets_bring_their_rrsigs_with_do() {
    let cat = catalog();
    let m = ask(&cat, "example.test", RType::NS, true);
    assert_eq!(additional(&m), signed_pair("ns1"));
    let m = ask(&cat, "srv.example.test", RType::SRV, true);
    assert_eq!(m.answers.len(), 2, "SRV and its RRSIG");
    assert_eq!(additional(&m), signed_pair("mail"));
}

#[test]
fn glue_below_a_delegation_gets_no_rrsig_but_an_in_zone_name_server_does() {
    let cat = catalog();
    for name in ["sub.example.test", "www.sub.example.test"] {
        let m = ask(&cat, name, RType::A, true);
        assert!(
            !m.header.has(flags::AA) && !m.header.has(flags::TC),
            "{name}"
        );
        // The glue (whose signature in the file is not believed) unsigned;
        // the other name server, authoritative data here, signed.
        assert_eq!(
            additional(&m),
            [vec!["ns.sub.example.test. A".into()], signed_pair("ns1")].concat(),
            "{name}"
        );
        let m = ask(&cat, name, RType::A, false);
        assert_eq!(
            additional(&m),
            [
                "ns.sub.example.test. A",
                "ns1.example.test. A",
                "ns1.example.test. AAAA"
            ]
        );
    }
}

/// Every EDNS payload from what all of it needs down to the least (512):
/// never TC, never an address RRset without its RRSIGs or RRSIGs without
/// their RRset, and at the exact size everything.
#[test]
fn near_the_udp_limit_an_address_and_its_rrsigs_go_together() {
    let cat = catalog();
    for (name, qtype) in [
        ("example.test", RType::MX),
        ("www.sub.example.test", RType::A),
    ] {
        let full = ask_raw(&cat, &query(name, qtype, 4096, true));
        let all = additional(&Message::parse(&full).unwrap());
        let mut sizes = std::collections::BTreeSet::new();
        for size in (512..=full.len() as u16).rev() {
            let raw = ask_raw(&cat, &query(name, qtype, size, true));
            assert!(
                raw.len() <= size as usize,
                "{name} at {size}: {}",
                raw.len()
            );
            let m = Message::parse(&raw).unwrap();
            assert!(!m.header.has(flags::TC), "{name} at {size}");
            let got = additional(&m);
            if size as usize == full.len() {
                assert_eq!(got, all);
            }
            for (k, r) in got.iter().enumerate() {
                let (owner, rtype) = r.split_once(' ').unwrap();
                if let Some(covered) = rtype.strip_prefix("RRSIG ") {
                    let want = format!("{owner} {covered}");
                    assert!(k > 0 && got[k - 1] == want, "{name} at {size}: {got:?}");
                } else {
                    let sig = format!("{owner} RRSIG {rtype}");
                    if all.contains(&sig) {
                        assert_eq!(got.get(k + 1), Some(&sig), "{name} at {size}: {got:?}");
                    }
                }
            }
            sizes.insert(got.len());
        }
        assert!(
            sizes.len() > 2,
            "{name}: the limit never fell between groups ({})",
            full.len()
        );
    }
}

/// A referral whose required glue does not fit is truncated (RFC 9471),
/// with DO as without.
#[test]
fn required_glue_that_does_not_fit_still_truncates_with_do() {
    let mut text = zone_text();
    // Long enough name servers that a 512-octet answer holds their NS
    // records but not all their glue: 8 names of ~60 octets each, the
    // glue's owners pointing into the NS records.
    for i in 0..8 {
        let ns = format!("ns{i}-{}.big", "x".repeat(50));
        text.push_str(&format!("\nbig NS {ns}\n{ns} A 192.0.2.{i}"));
    }
    let mut cat = Catalog::new();
    cat.insert(load(&text));
    for do_bit in [false, true] {
        let raw = ask_raw(&cat, &query("www.big.example.test", RType::A, 512, do_bit));
        let m = Message::parse(&raw).unwrap();
        assert!(m.header.has(flags::TC), "do {do_bit}: {} {m:?}", raw.len());
    }
}

/// A referral carries the glue of every name server inside the delegated
/// zone, however many (RFC 9471; black-box finding BI-1: only the first
/// 16 names' glue came, without TC), and is truncated when it does not
/// fit; optional addresses (an MX's targets) stay at 16 names.
#[test]
fn a_referral_carries_all_its_required_glue_or_truncates() {
    let mut text = zone_text();
    for i in 0..20 {
        text.push_str(&format!("\nwide NS n{i}.wide\nn{i}.wide A 192.0.2.{i}"));
        text.push_str(&format!("\nmany MX {i} m{i}\nm{i} A 198.51.100.{i}"));
    }
    let mut cat = Catalog::new();
    cat.insert(load(&text));
    let raw = ask_raw(&cat, &query("www.wide.example.test", RType::A, 4096, false));
    let m = Message::parse(&raw).unwrap();
    assert!(!m.header.has(flags::TC), "{} octets", raw.len());
    let glue = |m: &Message, t: RType| m.additional.iter().filter(|r| r.rtype == t).count();
    assert_eq!(glue(&m, RType::A), 20);
    // Past the client's size, truncated.
    assert!(raw.len() > 600);
    let raw = ask_raw(&cat, &query("www.wide.example.test", RType::A, 600, false));
    let m = Message::parse(&raw).unwrap();
    assert!(m.header.has(flags::TC), "{} octets", raw.len());
    let m = Message::parse(&ask_raw(
        &cat,
        &query("many.example.test", RType::MX, 4096, false),
    ));
    assert_eq!(glue(&m.unwrap(), RType::A), 16, "optional: 16 names");
}

/// `names` name servers of the delegation `cut` below it, `n{i}` and
/// `label` (then `.cut`), each with an A and an AAAA record: zone text.
fn delegation(cut: &str, names: usize, label: &str) -> String {
    let mut text = String::new();
    for i in 0..names {
        let ns = format!("n{i}{label}.{cut}");
        let v4 = i % 250;
        text.push_str(&format!(
            "\n{cut} NS {ns}\n{ns} A 192.0.2.{v4}\n{ns} AAAA 2001:db8::{i:x}"
        ));
    }
    text
}

/// The answer to `name` `qtype` over TCP (DO as given).
fn ask_tcp(cat: &Catalog, name: &str, qtype: RType, do_bit: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let q = query(name, qtype, 1232, do_bit);
    let how = answer(cat, &AnswerConfig::default(), &q, Transport::Tcp, &mut out);
    assert_eq!(how, Answered::Response);
    out
}

/// A delegation to thousands of name servers below its cut, each with an
/// A and an AAAA: more glue than one stored block holds. The zone loads,
/// its block holding what fits.
#[test]
fn a_delegation_with_more_glue_than_a_block_holds_still_loads() {
    let text = zone_text() + &delegation("huge", 2000, "");
    let origin = Name::parse("example.test").unwrap();
    let loaded = load_zone_str(&text, "huge.zone", &origin).unwrap_or_else(|p| panic!("{p:?}"));
    // What does not fit is said at load (black-box finding BK-2).
    let said = |w: &&heron_zone::Problem| w.message.contains("glue RRsets do not fit");
    assert!(
        loaded.warnings.iter().any(|w| said(&w)),
        "{:?}",
        loaded.warnings
    );
    let mut cat = Catalog::new();
    cat.insert(loaded.zone);
    let raw = ask_raw(&cat, &query("www.huge.example.test", RType::A, 1232, false));
    let m = Message::parse(&raw).unwrap();
    assert!(m.header.has(flags::TC), "{} octets", raw.len());
}

/// Glue or additional addresses spelled out that do not all fit leave a
/// whole message: a referral whose required glue does not fit even over
/// TCP is truncated and parses; an MX answer past 16 KiB whose optional
/// addresses do not all fit parses, without TC (black-box finding BM-1:
/// records cut off half written made messages no tool could read).
#[test]
fn spelled_out_additional_records_that_do_not_fit_leave_a_whole_message() {
    let label = "x".repeat(50);
    let mut text = zone_text() + &delegation("far", 600, &label);
    for i in 0..400 {
        text.push_str(&format!(
            "\nmx MX {i} m{i}{label}\nm{i}{label} A 198.51.100.{}",
            i % 250
        ));
    }
    let mut cat = Catalog::new();
    cat.insert(load(&text));
    for do_bit in [false, true] {
        let out = ask_tcp(&cat, "www.far.example.test", RType::A, do_bit);
        let m = Message::parse(&out).unwrap_or_else(|e| panic!("{e:?}: {} octets", out.len()));
        assert!(m.header.has(flags::TC), "required glue did not fit: TC");
        let out = ask_tcp(&cat, "mx.example.test", RType::MX, do_bit);
        let m = Message::parse(&out).unwrap_or_else(|e| panic!("{e:?}: {} octets", out.len()));
        assert!(!m.header.has(flags::TC), "optional: no TC");
        assert_eq!(m.answers.len(), 400);
    }
}

/// A change that would push a delegation's glue past what its block
/// holds is refused, as one making an RRset too large (black-box finding
/// BM-2: an UPDATE did it without a word, and referrals lost that glue).
#[test]
fn a_change_pushing_glue_past_what_a_block_holds_is_refused() {
    let with = |names: usize, serial: u32| {
        let text = zone_text().replace("hostmaster 1", &format!("hostmaster {serial}"));
        load(&(text + &delegation("huge", names, "")))
    };
    let (before, after) = (with(800, 1), with(1100, 2));
    let refused = before
        .apply(&heron_zone::diff::diff(&before, &after))
        .unwrap_err();
    let said = |p: &heron_zone::Problem| p.message.contains("glue RRsets would not fit");
    assert!(refused.iter().any(said), "{refused:?}");
}

/// A referral whose NS records pass the 16 KiB a compression pointer
/// reaches still carries all its glue, the owners past there spelled out
/// (black-box finding BK-2: it went with no glue at all, and no TC);
/// every glue record's owner is one of the name servers.
#[test]
fn glue_past_where_pointers_reach_is_written_with_its_owner_spelled_out() {
    let text = zone_text() + &delegation("far", 300, &"x".repeat(50));
    let mut cat = Catalog::new();
    cat.insert(load(&text));
    for do_bit in [false, true] {
        let out = ask_tcp(&cat, "www.far.example.test", RType::A, do_bit);
        let m = Message::parse(&out).unwrap();
        assert!(!m.header.has(flags::TC), "{} octets", out.len());
        assert!(
            out.len() > 0x4000,
            "past where pointers reach: {}",
            out.len()
        );
        let servers: std::collections::BTreeSet<String> = m
            .authority
            .iter()
            .filter(|r| r.rtype == RType::NS)
            .map(|r| Name::from_wire(&r.rdata).unwrap().to_string())
            .collect();
        assert_eq!(servers.len(), 300);
        let glue: Vec<&Record> = m
            .additional
            .iter()
            .filter(|r| r.rtype != RType::OPT)
            .collect();
        assert_eq!(glue.len(), 600, "do {do_bit}");
        for r in glue {
            assert!(servers.contains(&r.name.to_string()), "{}", r.name);
        }
    }
}

/// The batch path answers DO queries byte for byte as `answer` alone.
#[test]
fn a_batch_answers_do_queries_as_each_alone() {
    let cat = catalog();
    let raw: Vec<Vec<u8>> = [
        ("example.test", RType::MX),
        ("example.test", RType::NS),
        ("srv.example.test", RType::SRV),
        ("www.sub.example.test", RType::A),
    ]
    .iter()
    .flat_map(|&(n, t)| {
        [
            query(n, t, 1232, true),
            query(n, t, 1232, false),
            query(n, t, 600, true),
        ]
    })
    .collect();
    let config = AnswerConfig::default();
    let (mut answerer, mut slots) = (BatchAnswerer::default(), Default::default());
    let batch = answerer.prepare(&cat, raw.iter().map(Vec::as_slice), &mut slots);
    for (i, q) in raw.iter().enumerate() {
        let mut batched = Vec::new();
        batch.answer(i, &config, q, Transport::Udp, &mut batched);
        assert_eq!(batched, ask_raw(&cat, q), "query {i}");
    }
}

/// A change that re-signs an address (new RRSIGs only) reaches the
/// additional sections that carry it: the zone changed in place answers
/// as the new version loaded whole.
#[test]
fn re_signing_an_address_updates_the_additional_sections_that_carry_it() {
    let before = load(&zone_text());
    let resigned = zone_text()
        .replace(
            &sig("mail", "A", 3),
            &sig("mail", "A", 3).replace("12345", "54321"),
        )
        .replace("@ SOA ns1 hostmaster 1", "@ SOA ns1 hostmaster 2");
    // An address signed that was not, and one no longer signed.
    let resigned = resigned
        .replace(
            "bare A 192.0.2.26",
            &format!("bare A 192.0.2.26\n{}", sig("bare", "A", 3)),
        )
        .replace(&format!("\n{}", sig("ns1", "AAAA", 3)), "");
    let after = load(&resigned);
    let change = heron_zone::diff::diff(&before, &after);
    let applied = before.apply(&change).unwrap_or_else(|p| panic!("{p:?}"));
    let (mut a, mut b) = (Catalog::new(), Catalog::new());
    a.insert(applied);
    b.insert(after);
    for (name, qtype) in [
        ("example.test", RType::MX),
        ("example.test", RType::NS),
        ("srv.example.test", RType::SRV),
        ("www.sub.example.test", RType::A),
    ] {
        let q = query(name, qtype, 1232, true);
        assert_eq!(ask_raw(&a, &q), ask_raw(&b, &q), "{name} {qtype}");
    }
    // Over TCP all of it fits (over UDP the last pair does not).
    let mut out = Vec::new();
    let q = query("example.test", RType::MX, 1232, true);
    answer(&a, &AnswerConfig::default(), &q, Transport::Tcp, &mut out);
    let m = Message::parse(&out).unwrap();
    assert!(additional(&m).contains(&"bare.example.test. RRSIG A".to_string()));
    let new_sig = m
        .additional
        .iter()
        .find(|r| r.rtype == RType::RRSIG)
        .unwrap();
    assert!(new_sig.to_string().contains("54321"), "{new_sig}");
    let m = ask(&a, "example.test", RType::NS, true);
    assert_eq!(
        additional(&m),
        [
            "ns1.example.test. A",
            "ns1.example.test. RRSIG A",
            "ns1.example.test. AAAA",
        ]
    );
}

/// A change that makes a name a delegation turns its addresses into glue:
/// the additional sections that carry them lose their RRSIGs (and get
/// them back when the delegation goes), as the new version loaded whole.
#[test]
fn a_new_delegation_makes_its_addresses_glue_in_the_sections_that_carry_them() {
    let before = load(&zone_text());
    let cut = zone_text().replace("@ SOA ns1 hostmaster 1", "@ SOA ns1 hostmaster 2")
        + "\nmail NS ns.elsewhere.net.";
    let after = load(&cut);
    let applied = before
        .apply(&heron_zone::diff::diff(&before, &after))
        .unwrap_or_else(|p| panic!("{p:?}"));
    let back = load(&zone_text().replace("@ SOA ns1 hostmaster 1", "@ SOA ns1 hostmaster 3"));
    let undone = applied
        .apply(&heron_zone::diff::diff(&applied, &back))
        .unwrap_or_else(|p| panic!("{p:?}"));
    // The SRV's node is not in the change (the apex's SOA is, and so its
    // MX is packed again anyway).
    let q = query("srv.example.test", RType::SRV, 1232, true);
    for (changed, whole, glue) in [(applied, after, true), (undone, back, false)] {
        let (mut a, mut b) = (Catalog::new(), Catalog::new());
        a.insert(changed);
        b.insert(whole);
        let raw = ask_raw(&a, &q);
        assert_eq!(raw, ask_raw(&b, &q), "glue {glue}");
        let signed = additional(&Message::parse(&raw).unwrap())
            .contains(&"mail.example.test. RRSIG A".to_string());
        assert_eq!(signed, !glue);
    }
}
