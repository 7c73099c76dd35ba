//! The answer engine, rule by rule (RFC 1034 4.3.2, 2308, 4592, 6672,
//! 6891, 8482), driven through `answer()` with real query bytes.

use heron_proto::message::{Message, flags};
use heron_proto::{Name, RType, Rcode};
use heron_zone::{AnswerConfig, Answered, Catalog, Transport, answer, load_zone_str};

const ZONE: &str = r#"
$ORIGIN example.test.
$TTL 3600
@           SOA   ns1 hostmaster 1 7200 3600 1209600 300
            NS    ns1
            NS    ns.elsewhere.net.
            MX    10 mail
            A     192.0.2.1
ns1         A     192.0.2.53
            AAAA  2001:db8::53
mail        A     192.0.2.25
www         CNAME @
a.b.c.ent   TXT   "deep"
*.wild      A     192.0.2.80
*.wild      TXT   "wild"
exact.wild  A     192.0.2.81
*.mxonly    MX    5 mail
*.cnw       CNAME www
chain1      CNAME chain2
chain2      CNAME chain3
chain3      A     192.0.2.3
loop1       CNAME loop2
loop2       CNAME loop1
dangling    CNAME nothere
away        CNAME www.elsewhere.net.
dn          DNAME example.net.
long        DNAME aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.
sub         NS    ns.sub
sub         NS    ns.elsewhere.net.
sub         DS    12345 13 2 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
ns.sub      A     192.0.2.99
srv         SRV   0 5 5060 mail
big         TXT   "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123"
big         TXT   "1123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123"
big         TXT   "2123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123"
"#;

fn catalog() -> Catalog {
    let origin = Name::parse("example.test").unwrap();
    let loaded = load_zone_str(ZONE, "test.zone", &origin).unwrap_or_else(|p| {
        panic!(
            "zone: {}",
            p.iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        )
    });
    let mut c = Catalog::new();
    c.insert(loaded.zone);
    c
}

struct Q {
    name: String,
    qtype: RType,
    qclass: u16,
    flags: u16,
    edns: Option<(u16, u8, bool)>,
    transport: Transport,
}

fn q(name: &str, qtype: RType) -> Q {
    Q {
        name: name.into(),
        qtype,
        qclass: 1,
        flags: flags::RD,
        edns: None,
        transport: Transport::Udp,
    }
}

impl Q {
    fn edns(mut self, size: u16, version: u8, do_bit: bool) -> Q {
        self.edns = Some((size, version, do_bit));
        self
    }
    fn tcp(mut self) -> Q {
        self.transport = Transport::Tcp;
        self
    }
    fn bytes(&self) -> Vec<u8> {
        let mut m = vec![0xAB, 0xCD];
        m.extend_from_slice(&self.flags.to_be_bytes());
        m.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, self.edns.is_some() as u8]);
        m.extend_from_slice(Name::parse(&self.name).unwrap().as_wire());
        m.extend_from_slice(&self.qtype.0.to_be_bytes());
        m.extend_from_slice(&self.qclass.to_be_bytes());
        if let Some((size, version, do_bit)) = self.edns {
            let ttl: u32 = ((version as u32) << 16) | if do_bit { 0x8000 } else { 0 };
            m.extend_from_slice(&[0, 0, 41]);
            m.extend_from_slice(&size.to_be_bytes());
            m.extend_from_slice(&ttl.to_be_bytes());
            m.extend_from_slice(&[0, 0]);
        }
        m
    }
}

fn ask_with(cat: &Catalog, cfg: &AnswerConfig, query: &Q) -> (Message, Vec<u8>) {
    let mut out = Vec::new();
    assert_eq!(
        answer(cat, cfg, &query.bytes(), query.transport, &mut out),
        Answered::Response
    );
    (Message::parse(&out).expect("response parses"), out)
}

fn ask(query: Q) -> Message {
    ask_with(&catalog(), &AnswerConfig::default(), &query).0
}

fn texts(records: &[heron_proto::message::Record]) -> Vec<String> {
    let mut v: Vec<String> = records
        .iter()
        .map(|r| r.to_string().to_lowercase())
        .collect();
    v.sort();
    v
}

fn aa(m: &Message) -> bool {
    m.header.has(flags::AA)
}

#[test]
fn positive_answer_is_authoritative_and_echoes_question_case() {
    let m = ask(q("Ns1.EXAMPLE.test", RType::A));
    assert_eq!(m.rcode(), Rcode::NOERROR);
    assert!(aa(&m));
    assert!(m.header.has(flags::RD), "RD copied");
    assert!(!m.header.has(flags::RA), "RA never set");
    assert_eq!(m.header.id, 0xABCD);
    assert_eq!(m.questions[0].name.to_string(), "Ns1.EXAMPLE.test.");
    assert_eq!(
        texts(&m.answers),
        ["ns1.example.test. 3600 in a 192.0.2.53"]
    );
    assert!(m.authority.is_empty());
}

#[test]
fn nxdomain_has_soa_with_negative_ttl() {
    let m = ask(q("nothing.example.test", RType::A));
    assert_eq!(m.rcode(), Rcode::NXDOMAIN);
    assert!(aa(&m));
    assert!(m.answers.is_empty());
    assert_eq!(m.authority.len(), 1);
    assert_eq!(m.authority[0].rtype, RType::SOA);
    // min(SOA TTL 3600, MINIMUM 300)
    assert_eq!(m.authority[0].ttl, 300);
}

#[test]
fn negative_soa_and_its_signatures_take_the_negative_ttl() {
    // The SOA and its RRSIGs are written from the apex with their TTLs
    // capped at MINIMUM: 3600 and 7200 become 300.
    let text = "$ORIGIN s.test.\n\
        @ 3600 SOA ns h 1 2 3 4 300\n\
        @ 7200 RRSIG SOA 8 2 3600 20300101000000 20200101000000 1 s.test. AAAA\n\
        @ 7200 RRSIG SOA 8 2 3600 20300101000000 20200101000000 2 s.test. AAAA\n\
        @ 3600 NS ns\n\
        ns 3600 A 192.0.2.1\n";
    let origin = Name::parse("s.test").unwrap();
    let loaded = load_zone_str(text, "s.zone", &origin).unwrap();
    let mut cat = Catalog::new();
    cat.insert(loaded.zone);
    let cfg = AnswerConfig::default();
    for (name, qtype) in [("nothing.s.test", RType::A), ("ns.s.test", RType::MX)] {
        let (m, _) = ask_with(&cat, &cfg, &q(name, qtype).edns(1232, 0, true));
        let ttls: Vec<(RType, u32)> = m.authority.iter().map(|r| (r.rtype, r.ttl)).collect();
        assert_eq!(
            ttls,
            [(RType::SOA, 300), (RType::RRSIG, 300), (RType::RRSIG, 300)],
            "{name}"
        );
        // The zone's own SOA keeps its TTL.
        let (m, _) = ask_with(&cat, &cfg, &q("s.test", RType::SOA));
        assert_eq!(m.answers[0].ttl, 3600);
    }
}

#[test]
fn negative_answers_find_an_soa_far_into_a_large_apex() {
    // 3,000 A and 1,000 NS records at the apex come before the SOA in the
    // apex node, more than 64 KiB: the zone cannot keep the SOA's offset
    // and looks it up instead.
    let mut text = String::from("$ORIGIN big.test.\n@ 3600 SOA ns h 1 2 3 4 300\n");
    for i in 0..3000 {
        text += &format!("@ 60 A 10.{}.{}.{}\n", i / 65536, i / 256 % 256, i % 256);
    }
    for i in 0..1000 {
        text += &format!("@ 60 NS ns{i}.elsewhere.test.\n");
    }
    let origin = Name::parse("big.test").unwrap();
    let loaded = load_zone_str(&text, "big.zone", &origin).unwrap();
    let mut cat = Catalog::new();
    cat.insert(loaded.zone);
    let cfg = AnswerConfig::default();
    let (m, _) = ask_with(&cat, &cfg, &q("nothing.big.test", RType::A).tcp());
    assert_eq!(m.rcode(), Rcode::NXDOMAIN);
    let ttls: Vec<(RType, u32)> = m.authority.iter().map(|r| (r.rtype, r.ttl)).collect();
    assert_eq!(ttls, [(RType::SOA, 300)]);
}

#[test]
fn nodata_and_empty_non_terminals() {
    for name in [
        "ns1.example.test",
        "c.ent.example.test",
        "b.c.ent.example.test",
    ] {
        let m = ask(q(name, RType::MX));
        assert_eq!(m.rcode(), Rcode::NOERROR, "{name}");
        assert!(m.answers.is_empty(), "{name}");
        assert_eq!(m.authority[0].rtype, RType::SOA, "{name}");
    }
    let m = ask(q("x.b.c.ent.example.test", RType::A));
    assert_eq!(m.rcode(), Rcode::NXDOMAIN);
}

#[test]
fn wildcards_synthesize_for_missing_names_only() {
    let m = ask(q("Foo.wild.example.test", RType::A));
    assert_eq!(m.rcode(), Rcode::NOERROR);
    assert_eq!(
        texts(&m.answers),
        ["foo.wild.example.test. 3600 in a 192.0.2.80"]
    );
    // Deeper names match too: the closest encloser is wild.example.test.
    let m = ask(q("a.b.wild.example.test", RType::TXT));
    assert_eq!(
        texts(&m.answers),
        [r#"a.b.wild.example.test. 3600 in txt "wild""#]
    );
    // An existing name is not covered by the wildcard.
    let m = ask(q("exact.wild.example.test", RType::TXT));
    assert!(m.answers.is_empty());
    assert_eq!(m.rcode(), Rcode::NOERROR);
    // Below an existing name the closest encloser is that name: no match.
    let m = ask(q("x.exact.wild.example.test", RType::A));
    assert_eq!(m.rcode(), Rcode::NXDOMAIN);
    // Wildcard with no data of the type: NODATA.
    let m = ask(q("x.mxonly.example.test", RType::A));
    assert_eq!((m.rcode(), m.answers.len()), (Rcode::NOERROR, 0));
    let m = ask(q("x.mxonly.example.test", RType::MX));
    assert_eq!(m.answers[0].name.to_string(), "x.mxonly.example.test.");
    // The MX target's address goes in the additional section.
    assert_eq!(
        texts(&m.additional),
        ["mail.example.test. 3600 in a 192.0.2.25"]
    );
    // The wildcard itself can be queried.
    let m = ask(q("*.wild.example.test", RType::A));
    assert_eq!(m.answers.len(), 1);
}

/// What the engine says of its answer to `query` beyond the header: the
/// name the answer is about, as text, and whether the rcode is extended.
fn summary(query: &Q) -> (String, bool) {
    let catalog = catalog();
    let bytes = query.bytes();
    let mut parsed = heron_proto::message::Query::new();
    let prepared = heron_zone::answer::prepare(&catalog, &bytes, &mut parsed);
    let config = AnswerConfig::default();
    let mut out = Vec::new();
    let (how, summary) = heron_zone::answer::answer_prepared(
        &config,
        &prepared,
        &parsed,
        &bytes,
        query.transport,
        &mut out,
    );
    assert_eq!(how, Answered::Response);
    let about = summary.about(parsed.qname_lower.as_wire());
    let text = Name::from_wire(about).unwrap().to_string();
    (text, summary.extended_rcode())
}

#[test]
fn the_summary_names_the_wildcard_a_query_name_was_answered_from() {
    let wild = "wild.example.test.";
    let cases = [
        (q("Foo.WILD.example.test", RType::A), wild),
        (q("a.b.wild.example.test", RType::TXT), wild),
        // NODATA from the wildcard: the wildcard too.
        (q("foo.wild.example.test", RType::AAAA), wild),
        // A wildcard CNAME, followed to www: the first step's wildcard.
        (q("x.cnw.example.test", RType::A), "cnw.example.test."),
        (
            q("x.mxonly.example.test", RType::MX),
            "mxonly.example.test.",
        ),
        // Names that exist, the wildcard itself, NXDOMAIN, a referral:
        // the query name, lower-cased.
        (
            q("Exact.wild.example.test", RType::A),
            "exact.wild.example.test.",
        ),
        (q("*.wild.example.test", RType::A), "*.wild.example.test."),
        (
            q("x.exact.wild.example.test", RType::A),
            "x.exact.wild.example.test.",
        ),
        (q("nope.example.test", RType::A), "nope.example.test."),
        (q("a.sub.example.test", RType::A), "a.sub.example.test."),
    ];
    for (query, want) in cases {
        assert_eq!(summary(&query), (want.to_string(), false), "{}", query.name);
    }
    // BADVERS (16) reads as NOERROR in the header: the summary says so.
    let badvers = q("foo.wild.example.test", RType::A).edns(1232, 1, false);
    assert_eq!(summary(&badvers), ("foo.wild.example.test.".into(), true));
    let version_0 = q("mail.example.test", RType::A).edns(1232, 0, false);
    assert_eq!(summary(&version_0), ("mail.example.test.".into(), false));
}

#[test]
fn cname_chains_are_followed_in_zone() {
    let m = ask(q("chain1.example.test", RType::A));
    assert_eq!(m.rcode(), Rcode::NOERROR);
    assert_eq!(
        texts(&m.answers),
        [
            "chain1.example.test. 3600 in cname chain2.example.test.",
            "chain2.example.test. 3600 in cname chain3.example.test.",
            "chain3.example.test. 3600 in a 192.0.2.3",
        ]
    );
    // Asking for the CNAME itself does not follow it.
    let m = ask(q("chain1.example.test", RType::CNAME));
    assert_eq!(m.answers.len(), 1);
    // A wildcard CNAME is synthesized and followed.
    let m = ask(q("x.cnw.example.test", RType::A));
    assert_eq!(
        texts(&m.answers),
        [
            "example.test. 3600 in a 192.0.2.1",
            "www.example.test. 3600 in cname example.test.",
            "x.cnw.example.test. 3600 in cname www.example.test.",
        ]
    );
}

#[test]
fn cname_loops_dangling_and_out_of_zone_targets() {
    let m = ask(q("loop1.example.test", RType::A));
    assert_eq!(m.rcode(), Rcode::NOERROR);
    assert_eq!(
        m.answers.len(),
        2,
        "each CNAME once: {:?}",
        texts(&m.answers)
    );
    // RFC 6604: the rcode speaks of the last name in the chain.
    let m = ask(q("dangling.example.test", RType::A));
    assert_eq!(m.rcode(), Rcode::NXDOMAIN);
    assert_eq!(m.answers.len(), 1);
    assert_eq!(m.authority[0].rtype, RType::SOA);
    let m = ask(q("away.example.test", RType::A));
    assert_eq!(m.rcode(), Rcode::NOERROR);
    assert_eq!(m.answers.len(), 1);
    assert!(m.authority.is_empty());
}

#[test]
fn dname_synthesizes_cname() {
    let m = ask(q("www.Dn.example.test", RType::A));
    assert_eq!(m.rcode(), Rcode::NOERROR);
    assert!(aa(&m));
    assert_eq!(
        texts(&m.answers),
        [
            "dn.example.test. 3600 in dname example.net.",
            "www.dn.example.test. 3600 in cname www.example.net.",
        ]
    );
    // Asking for the CNAME: the synthesized one answers; no chasing.
    let m = ask(q("www.dn.example.test", RType::CNAME));
    assert_eq!((m.rcode(), m.answers.len()), (Rcode::NOERROR, 2));
    // The DNAME owner itself is an ordinary name.
    let m = ask(q("dn.example.test", RType::A));
    assert_eq!((m.rcode(), m.answers.len()), (Rcode::NOERROR, 0));
    let m = ask(q("dn.example.test", RType::DNAME));
    assert_eq!(m.answers.len(), 1);
    // A substitution longer than 255 octets: YXDOMAIN.
    // 7 × 11 octets of prefix + 191 octets of target = 268.
    let prefix = "abcdefghij.".repeat(7);
    let m = ask(q(&format!("{prefix}long.example.test"), RType::A));
    assert_eq!(m.rcode(), Rcode(6));
    assert_eq!(m.answers.len(), 1, "the DNAME, and no CNAME");
    // 2 × 11 + 191 = 213 octets still fits.
    let m = ask(q("abcdefghij.abcdefghij.long.example.test", RType::A));
    assert_eq!((m.rcode(), m.answers.len()), (Rcode::NOERROR, 2));
}

#[test]
fn a_dname_at_the_apex_redirects_every_name_below_it() {
    let text = "$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns.other.\n@ DNAME example.net.\n\
                @ A 192.0.2.1\n";
    let origin = Name::parse("moved.test").unwrap();
    let mut cat = Catalog::new();
    cat.insert(load_zone_str(text, "moved.zone", &origin).unwrap().zone);
    let ask_moved = |name: &str| ask_with(&cat, &AnswerConfig::default(), &q(name, RType::A)).0;
    // Even a name with data of its own is redirected (RFC 6672 2.3); this
    // one has none, and the one below would not exist.
    for (name, target) in [
        ("www.moved.test", "www.example.net."),
        ("a.b.moved.test", "a.b.example.net."),
    ] {
        let m = ask_moved(name);
        assert_eq!(m.rcode(), Rcode::NOERROR, "{name}");
        let mut expected = vec![
            format!("{name}. 60 in cname {target}"),
            "moved.test. 60 in dname example.net.".to_string(),
        ];
        expected.sort();
        assert_eq!(texts(&m.answers), expected, "{name}");
    }
    // The apex itself answers from its own data.
    let m = ask_moved("moved.test");
    assert_eq!(texts(&m.answers), ["moved.test. 60 in a 192.0.2.1"]);
}

#[test]
fn referrals_at_and_below_delegations() {
    for name in [
        "sub.example.test",
        "www.sub.example.test",
        "ns.sub.example.test",
    ] {
        let m = ask(q(name, RType::A));
        assert_eq!(m.rcode(), Rcode::NOERROR, "{name}");
        assert!(!aa(&m), "{name}: referral is not authoritative");
        assert!(m.answers.is_empty(), "{name}");
        assert_eq!(
            texts(&m.authority),
            [
                "sub.example.test. 3600 in ns ns.elsewhere.net.",
                "sub.example.test. 3600 in ns ns.sub.example.test.",
            ],
            "{name}"
        );
        assert_eq!(
            texts(&m.additional),
            ["ns.sub.example.test. 3600 in a 192.0.2.99"]
        );
    }
    // NS at the cut is a referral too, not an answer.
    let m = ask(q("sub.example.test", RType::NS));
    assert!(!aa(&m) && m.answers.is_empty());
}

/// A referral's required glue (an in-domain name server's address, RFC
/// 9471) goes into the additional section before optional addresses (a
/// sibling name server's, in the zone but outside the cut): written in NS
/// order, the siblings' addresses filled 512 octets and the glue did not
/// fit, so a referral that fits was truncated (black-box finding DA-1).
#[test]
fn required_glue_goes_before_sibling_addresses() {
    let mut zone = String::from(
        "$ORIGIN r.test.\n$TTL 3600\n@ SOA ns hostmaster 1 7200 3600 1209600 300\n\
         @ NS ns\nns A 192.0.2.1\n",
    );
    for i in 0..6 {
        zone += &format!("ord NS s{i}.sibling\ns{i}.sibling A 192.0.2.{}\n", 10 + i);
        for j in 1..4 {
            zone += &format!("s{i}.sibling AAAA 2001:db8::{i}:{j}\n");
        }
    }
    zone += "ord NS zz.ord\nzz.ord A 192.0.2.99\n";
    let origin = Name::parse("r.test").unwrap();
    let loaded = load_zone_str(&zone, "r.test.zone", &origin).expect("zone loads");
    let mut cat = Catalog::new();
    cat.insert(loaded.zone);
    for query in [
        q("x.ord.r.test", RType::A),
        q("x.ord.r.test", RType::A).edns(512, 0, false),
    ] {
        let (m, raw) = ask_with(&cat, &AnswerConfig::default(), &query);
        assert!(!m.header.has(flags::TC), "fits: {} octets", raw.len());
        assert_eq!(m.authority.len(), 7);
        let glue = texts(&m.additional);
        assert!(
            glue.contains(&"zz.ord.r.test. 3600 in a 192.0.2.99".to_string()),
            "{glue:?}"
        );
        assert!(raw.len() <= 512);
    }
}

/// A wildcard CNAME whose target its own wildcard matches: the CNAME
/// synthesized for the target is written too, then the chain ends, as NSD
/// and Knot answer (black-box finding DA-3: Heron stopped a step earlier,
/// a difference `heron compare` reported that no operator could remove).
#[test]
fn a_wildcard_cname_into_its_own_wildcard_ends_at_the_name_met_again() {
    const ZONE: &str = "$ORIGIN w.test.\n$TTL 3600\n\
        @ SOA ns hostmaster 1 7200 3600 1209600 300\n@ NS ns\nns A 192.0.2.1\n\
        *.wcl CNAME x.wcl\n*.two CNAME a.two\n*.w4 CNAME *.w4\n";
    let origin = Name::parse("w.test").unwrap();
    let loaded = load_zone_str(ZONE, "w.test.zone", &origin).expect("zone loads");
    let mut cat = Catalog::new();
    cat.insert(loaded.zone);
    let ask = |name: &str| ask_with(&cat, &AnswerConfig::default(), &q(name, RType::A)).0;
    let m = ask("foo.wcl.w.test");
    assert_eq!(m.rcode(), Rcode::NOERROR);
    assert_eq!(
        texts(&m.answers),
        [
            "foo.wcl.w.test. 3600 in cname x.wcl.w.test.",
            "x.wcl.w.test. 3600 in cname x.wcl.w.test.",
        ]
    );
    // Asked for the target itself: one CNAME, to itself.
    let m = ask("a.two.w.test");
    assert_eq!(
        texts(&m.answers),
        ["a.two.w.test. 3600 in cname a.two.w.test."]
    );
    // A wildcard whose target is the wildcard's own name: the CNAME
    // synthesized, then the wildcard's own (black-box finding DG-6).
    let m = ask("a.w4.w.test");
    assert_eq!(
        texts(&m.answers),
        [
            "*.w4.w.test. 3600 in cname *.w4.w.test.",
            "a.w4.w.test. 3600 in cname *.w4.w.test.",
        ]
    );
}

#[test]
fn ds_is_answered_by_the_parent() {
    let m = ask(q("sub.example.test", RType::DS));
    assert!(aa(&m));
    assert_eq!(m.answers.len(), 1);
    assert_eq!(m.answers[0].rtype, RType::DS);
    // In an unsigned zone a referral carries no DS, even with DO.
    let m = ask(q("www.sub.example.test", RType::A).edns(1232, 0, true));
    assert!(m.authority.iter().all(|r| r.rtype == RType::NS));
    // Below the cut, DS is the child's business: a referral.
    let m = ask(q("x.sub.example.test", RType::DS));
    assert!(!aa(&m));
}

#[test]
fn apex_ns_gets_addresses_in_additional() {
    let m = ask(q("example.test", RType::NS));
    assert_eq!(m.answers.len(), 2);
    assert_eq!(
        texts(&m.additional),
        [
            "ns1.example.test. 3600 in a 192.0.2.53",
            "ns1.example.test. 3600 in aaaa 2001:db8::53",
        ]
    );
    let m = ask(q("srv.example.test", RType::SRV));
    assert_eq!(m.additional.len(), 1);
}

#[test]
fn names_outside_every_zone_are_refused() {
    let m = ask(q("example.org", RType::A));
    assert_eq!(m.rcode(), Rcode::REFUSED);
    assert!(!aa(&m));
    assert!(m.answers.is_empty() && m.authority.is_empty());
    assert_eq!(m.questions.len(), 1);
}

/// With EDNS the refusal says why: Extended DNS Error 20, Not
/// Authoritative (RFC 8914 4.21), as NSD and Knot answer; nothing else
/// carries it.
#[test]
fn a_refusal_for_a_name_outside_every_zone_says_not_authoritative() {
    const EDE_20: [u8; 6] = [0, 15, 0, 2, 0, 20];
    let (cat, cfg) = (catalog(), AnswerConfig::default());
    for query in [
        q("example.org", RType::A).edns(1232, 0, false),
        q("example.org", RType::A).edns(4096, 0, true).tcp(),
    ] {
        let (m, out) = ask_with(&cat, &cfg, &query);
        assert_eq!(m.rcode(), Rcode::REFUSED);
        assert!(out.ends_with(&EDE_20), "{out:?}");
        assert_eq!(m.edns.map(|e| e.do_bit), query.edns.map(|e| e.2));
    }
    let (m, out) = ask_with(&cat, &cfg, &q("example.org", RType::A));
    assert!(
        m.edns.is_none() && !out.ends_with(&EDE_20),
        "no EDNS, no OPT"
    );
    for other in [
        q("example.test", RType::A).edns(1232, 0, false),
        q("nx.example.test", RType::A).edns(1232, 0, false),
    ] {
        let (_, out) = ask_with(&cat, &cfg, &other);
        assert!(out.ends_with(&[0, 0]), "an OPT with no option: {out:?}");
    }
}

#[test]
fn opcodes_and_malformed_queries() {
    let mut query = q("example.test", RType::A);
    query.flags = 2 << 11; // STATUS
    let m = ask(query);
    assert_eq!(m.rcode(), Rcode::NOTIMP);
    let mut out = Vec::new();
    let cat = catalog();
    let cfg = AnswerConfig::default();
    // Truncated question: FORMERR with the ID.
    let bytes = q("example.test", RType::A).bytes();
    let truncated = &bytes[..bytes.len() - 2];
    let got = answer(&cat, &cfg, truncated, Transport::Udp, &mut out);
    assert_eq!(got, Answered::Response);
    let m = Message::parse(&out).unwrap();
    assert_eq!((m.header.id, m.rcode()), (0xABCD, Rcode::FORMERR));
    // Shorter than a header, or a response: no answer at all.
    let got = answer(&cat, &cfg, &bytes[..5], Transport::Udp, &mut out);
    assert_eq!(got, Answered::Drop);
    let mut response = bytes.clone();
    response[2] |= 0x80;
    let got = answer(&cat, &cfg, &response, Transport::Udp, &mut out);
    assert_eq!(got, Answered::Drop);
}

/// A meta type as QTYPE (OPT, TSIG, TKEY, MAILA, MAILB, the rest of 128
/// to 250) is answered as NSD and Knot answer it: from the zone, where
/// no RRset has it (NODATA, NXDOMAIN, a referral), never FORMERR.
#[test]
fn meta_qtypes_are_answered_from_the_zone() {
    let meta = [41, 128, 200, 249, 250, 253, 254].map(RType);
    for qtype in meta {
        let m = ask(q("mail.example.test", qtype));
        assert_eq!((m.rcode(), aa(&m)), (Rcode::NOERROR, true), "{qtype}");
        assert!(m.answers.is_empty(), "{qtype}");
        assert_eq!(m.authority[0].rtype, RType::SOA, "{qtype}");
        let m = ask(q("nowhere.example.test", qtype));
        assert_eq!(m.rcode(), Rcode::NXDOMAIN, "{qtype}");
        let m = ask(q("x.sub.example.test", qtype));
        assert!(!aa(&m) && m.authority.iter().all(|r| r.rtype == RType::NS));
    }
}

#[test]
fn transfers_and_notify_are_left_to_the_query_pipeline() {
    let cat = catalog();
    let cfg = AnswerConfig::default();
    let mut out = Vec::new();
    for qtype in [RType::AXFR, RType::IXFR] {
        let bytes = q("example.test", qtype).bytes();
        let got = answer(&cat, &cfg, &bytes, Transport::Tcp, &mut out);
        assert_eq!(got, Answered::Deferred, "{qtype}");
    }
    let mut notify = q("example.test", RType::SOA);
    notify.flags = 4 << 11;
    let got = answer(&cat, &cfg, &notify.bytes(), Transport::Udp, &mut out);
    assert_eq!(got, Answered::Deferred);
}

#[test]
fn question_name_compressed_into_the_header_gets_formerr() {
    // Found by fuzzing: `www` then a pointer to offset 2 (the query's flags,
    // zero: the root). Echoed verbatim, the pointer landed on the response's
    // own flags and the response did not parse.
    let cat = catalog();
    let cfg = AnswerConfig::default();
    let mut query = vec![0xAB, 0xCD, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    query.extend_from_slice(b"\x03www\xC0\x02\x00\x01\x00\x01");
    for transport in [Transport::Udp, Transport::Tcp] {
        let mut out = Vec::new();
        let got = answer(&cat, &cfg, &query, transport, &mut out);
        assert_eq!(got, Answered::Response);
        let m = Message::parse(&out).expect("response parses");
        assert_eq!((m.header.id, m.rcode()), (0xABCD, Rcode::FORMERR));
    }
}

#[test]
fn any_is_minimal_over_udp_and_full_over_tcp() {
    let m = ask(q("example.test", RType::ANY));
    assert_eq!(m.answers.len(), 1, "RFC 8482: one RRset over UDP");
    let m = ask(q("example.test", RType::ANY).tcp());
    let types: std::collections::BTreeSet<_> = m.answers.iter().map(|r| r.rtype.0).collect();
    assert_eq!(types.len(), 4, "SOA NS MX A over TCP");
    let m = ask(q("c.ent.example.test", RType::ANY));
    assert_eq!((m.rcode(), m.answers.len()), (Rcode::NOERROR, 0));
}

/// Over TCP, ANY at a name whose RRsets together pass 64 KiB is answered
/// with those that fit, not an empty answer with TC, which gives a TCP
/// asker nowhere to retry (black-box finding; NSD and Knot answer a
/// subset, as RFC 8482 allows).
#[test]
fn any_over_tcp_answers_the_rrsets_that_fit_in_one_message() {
    let origin = Name::parse("s.test").unwrap();
    let mut text = String::from("$ORIGIN s.test.\n$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\n");
    let string = "x".repeat(250);
    for i in 0..240 {
        text.push_str(&format!("big TXT \"{i:03}{string}\"\n"));
    }
    for i in 0..2000u32 {
        text.push_str(&format!("big AAAA 2001:db8::{:x}:{:x}\n", i >> 8, i & 0xff));
    }
    let mut cat = Catalog::new();
    cat.insert(load_zone_str(&text, "s.zone", &origin).unwrap().zone);
    let (m, out) = ask_with(
        &cat,
        &AnswerConfig::default(),
        &q("big.s.test", RType::ANY).tcp(),
    );
    assert!(!m.header.has(flags::TC), "{} octets", out.len());
    let types: std::collections::BTreeSet<RType> = m.answers.iter().map(|r| r.rtype).collect();
    assert_eq!(types.len(), 1, "{types:?}");
    let count = m.answers.len();
    assert!(count == 240 || count == 2000, "whole RRsets only: {count}");
}

/// Over UDP, the one RRset of an ANY answer is not the name's NSEC
/// where it holds another (a type numbered after NSEC's 47, say).
#[test]
fn any_over_udp_answers_data_before_the_nsec() {
    let origin = Name::parse("s.test").unwrap();
    let text = "$ORIGIN s.test.\n$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n\
                h TYPE65280 \\# 1 2a\nh NSEC ns.s.test. NSEC TYPE65280\n\
                only NSEC ns.s.test. NSEC\n";
    let mut cat = Catalog::new();
    cat.insert(load_zone_str(text, "s.zone", &origin).unwrap().zone);
    let (m, _) = ask_with(&cat, &AnswerConfig::default(), &q("h.s.test", RType::ANY));
    let types: Vec<u16> = m.answers.iter().map(|r| r.rtype.0).collect();
    assert_eq!(types, [65280]);
    let (m, _) = ask_with(
        &cat,
        &AnswerConfig::default(),
        &q("only.s.test", RType::ANY),
    );
    let types: Vec<RType> = m.answers.iter().map(|r| r.rtype).collect();
    assert_eq!(types, [RType::NSEC], "nothing else there");
}

#[test]
fn chaos_identity_answers_only_when_configured() {
    let mut query = q("version.bind", RType::TXT);
    query.qclass = 3;
    let cat = catalog();
    let (m, _) = ask_with(&cat, &AnswerConfig::default(), &query);
    assert_eq!(m.rcode(), Rcode::REFUSED);
    let cfg = AnswerConfig {
        version: Some("heron test".into()),
        ..AnswerConfig::default()
    };
    let (m, _) = ask_with(&cat, &cfg, &query);
    assert_eq!(m.rcode(), Rcode::NOERROR);
    assert_eq!(
        m.answers[0].to_string(),
        r#"version.bind. 0 CH TXT "heron test""#
    );
    // Another type: REFUSED, as NSD and Knot answer.
    query.qtype = RType::A;
    let (m, _) = ask_with(&cat, &cfg, &query);
    assert_eq!(
        (m.rcode(), m.header.has(flags::AA)),
        (Rcode::REFUSED, false)
    );
}

/// Black-box finding AL-1: `version = ""` was answered with a TXT of no
/// character-string (RDLENGTH 0), a malformed message dig rejects. An
/// empty text hides the name as no text does: REFUSED.
#[test]
fn chaos_names_with_an_empty_text_are_refused() {
    let cat = catalog();
    let cfg = AnswerConfig {
        version: Some(String::new()),
        identity: Some(String::new()),
        ..AnswerConfig::default()
    };
    for name in ["version.bind", "id.server", "hostname.bind"] {
        let mut query = q(name, RType::TXT);
        query.qclass = 3;
        let (m, _) = ask_with(&cat, &cfg, &query);
        assert_eq!(m.rcode(), Rcode::REFUSED, "{name}");
        assert!(m.answers.is_empty(), "{name}");
    }
}

#[test]
fn edns_is_echoed_and_negotiated() {
    let m = ask(q("example.test", RType::A).edns(4096, 0, true));
    let e = m.edns.expect("OPT echoed");
    assert!(e.do_bit, "DO echoed");
    assert_eq!(e.udp_size, 1232, "our maximum, not the client's");
    let m = ask(q("example.test", RType::A).edns(4096, 0, false));
    assert!(!m.edns.unwrap().do_bit);
    let m = ask(q("example.test", RType::A));
    assert!(m.edns.is_none(), "no OPT without OPT in the query");
    let m = ask(q("example.test", RType::A).edns(4096, 1, false));
    assert_eq!(m.rcode(), Rcode::BADVERS);
    assert!(m.answers.is_empty());
    assert_eq!(m.edns.unwrap().version, 0);
}

#[test]
fn udp_truncation_never_splits_an_rrset() {
    // ~780 octets of TXT: too big for 512, fits 1232, always fits TCP.
    let m = ask(q("big.example.test", RType::TXT));
    assert!(m.header.has(flags::TC));
    assert!(m.answers.is_empty(), "no partial RRset");
    assert_eq!(m.questions.len(), 1);
    let m = ask(q("big.example.test", RType::TXT).edns(1232, 0, false));
    assert!(!m.header.has(flags::TC));
    assert_eq!(m.answers.len(), 3);
    let m = ask(q("big.example.test", RType::TXT).edns(512, 0, false));
    assert!(m.header.has(flags::TC));
    assert!(m.edns.is_some(), "OPT kept in a truncated response");
    let m = ask(q("big.example.test", RType::TXT).tcp());
    assert!(!m.header.has(flags::TC));
    assert_eq!(m.answers.len(), 3);
}

#[test]
fn responses_never_exceed_the_udp_limit() {
    let cat = catalog();
    let cfg = AnswerConfig::default();
    for (size, limit) in [(None, 512), (Some(600), 600), (Some(65000), 1232)] {
        let mut query = q("big.example.test", RType::TXT);
        if let Some(s) = size {
            query = query.edns(s, 0, false);
        }
        let (_, raw) = ask_with(&cat, &cfg, &query);
        assert!(raw.len() <= limit, "{} > {limit}", raw.len());
    }
}

/// A CNAME's own NSEC (RFC 4035 2.5) asked for by type is the answer, not
/// the CNAME followed: what NSD and Knot give.
#[test]
fn nsec_asked_at_a_cname_is_answered_from_that_name() {
    const SIGNED: &str = include_str!("data/signed/proofs.test.nsec.zone");
    let origin = Name::parse("proofs.test").unwrap();
    let loaded = load_zone_str(SIGNED, "proofs.test.nsec.zone", &origin).expect("fixture loads");
    let mut cat = Catalog::new();
    cat.insert(loaded.zone);
    let cfg = AnswerConfig::default();
    let (m, _) = ask_with(&cat, &cfg, &q("dangling.proofs.test", RType::NSEC));
    assert_eq!(m.rcode(), Rcode::NOERROR);
    let types: Vec<RType> = m.answers.iter().map(|r| r.rtype).collect();
    assert_eq!(types, [RType::NSEC], "{:?}", texts(&m.answers));
    // Any other type still follows the CNAME (to a name that is not there).
    let (m, _) = ask_with(&cat, &cfg, &q("dangling.proofs.test", RType::A));
    assert_eq!(m.rcode(), Rcode::NXDOMAIN);
    assert_eq!(m.answers[0].rtype, RType::CNAME);
}

/// The NSEC of a NODATA answer, owned by the query name, is a pointer to
/// the question, as NSD and Knot write it; a covering NSEC owned by an
/// ancestor of the query name points into the question too.
#[test]
fn proof_owners_in_the_question_are_pointers_to_it() {
    const SIGNED: &str = include_str!("data/signed/proofs.test.nsec.zone");
    let origin = Name::parse("proofs.test").unwrap();
    let loaded = load_zone_str(SIGNED, "proofs.test.nsec.zone", &origin).expect("fixture loads");
    let mut cat = Catalog::new();
    cat.insert(loaded.zone);
    let cfg = AnswerConfig::default();
    // NODATA at www: the owner is the question, written as a pointer to 12.
    let query = q("WWW.proofs.test", RType::AAAA).edns(1232, 0, true);
    let (m, raw) = ask_with(&cat, &cfg, &query);
    assert_eq!(m.rcode(), Rcode::NOERROR);
    assert!(
        raw.windows(4).any(|w| w == [0xC0, 0x0C, 0x00, 0x2F]),
        "an NSEC owned by a pointer to the question"
    );
    let nsec = m.authority.iter().find(|r| r.rtype == RType::NSEC).unwrap();
    assert_eq!(
        nsec.name.to_string(),
        "WWW.proofs.test.",
        "the question's name, as sent"
    );
    // NXDOMAIN below www: www's NSEC covers the name; it points to "www"
    // in the question (offset 12 + the first label's 2 octets).
    let (m, raw) = ask_with(
        &cat,
        &cfg,
        &q("a.www.proofs.test", RType::A).edns(1232, 0, true),
    );
    assert_eq!(m.rcode(), Rcode::NXDOMAIN);
    assert!(
        raw.windows(4).any(|w| w == [0xC0, 14, 0x00, 0x2F]),
        "{:?}",
        texts(&m.authority)
    );
}

/// A zone with DNAMEs that chains pass more than once, and a CNAME.
fn chains_catalog() -> Catalog {
    let text = "$ORIGIN r.test.\n$TTL 300\n@ SOA ns1 h 1 7200 3600 1209600 300\n@ NS ns1\n\
                ns1 A 192.0.2.1\ncn CNAME ns1\nrdn DNAME rtgt.r.test.\n\
                a.rtgt CNAME b.rdn.r.test.\nb.rtgt A 192.0.2.77\n\
                c.rtgt CNAME d.rdn.r.test.\nself DNAME r.test.\n\
                la DNAME lb.r.test.\nlb DNAME la.r.test.\n";
    let origin = Name::parse("r.test").unwrap();
    let loaded = load_zone_str(text, "r.zone", &origin).unwrap();
    let mut c = Catalog::new();
    c.insert(loaded.zone);
    c
}

/// RFC 1034 4.3.2, RFC 6672: a chain goes on while its names differ,
/// through one DNAME as often as it leads there (NSD, Knot and BIND all
/// finish these); only a name met again ends it.
#[test]
fn a_chain_may_pass_one_dname_twice_and_ends_only_at_a_name_met_again() {
    let (cat, cfg) = (chains_catalog(), AnswerConfig::default());
    let ask = |name: &str| ask_with(&cat, &cfg, &q(name, RType::A).tcp()).0;
    // a.rdn -> a.rtgt CNAME b.rdn -> b.rtgt A; the DNAME once (RFC 2181
    // 5), two synthesized CNAMEs.
    let m = ask("a.rdn.r.test");
    assert_eq!(m.rcode(), Rcode::NOERROR);
    let dnames = m.answers.iter().filter(|r| r.rtype == RType::DNAME).count();
    assert_eq!((dnames, m.answers.len()), (1, 5), "{:?}", texts(&m.answers));
    assert!(
        texts(&m.answers).contains(&"b.rtgt.r.test. 300 in a 192.0.2.77".to_string()),
        "{:?}",
        texts(&m.answers)
    );
    // c.rdn -> c.rtgt CNAME d.rdn -> d.rtgt: no such name.
    for name in ["c.rdn.r.test", "x.self.self.r.test"] {
        let m = ask(name);
        assert_eq!(m.rcode(), Rcode::NXDOMAIN, "{name}");
        assert_eq!(m.authority.len(), 1, "{name}: the SOA");
    }
    // x.la -> x.lb -> x.la: a loop, ended where the name comes again.
    let m = ask("x.la.r.test");
    assert_eq!(m.rcode(), Rcode::NOERROR);
    assert_eq!(m.answers.len(), 4, "{:?}", texts(&m.answers));
}

/// NSEC and RRSIG may stand beside a CNAME (RFC 2181 10.1, RFC 4035
/// 2.5): asked for at a CNAME, they are answered there (NODATA here), not
/// by the CNAME, as Knot and BIND answer; a resolver takes a CNAME
/// answer for them as an error.
#[test]
fn nsec_and_rrsig_queries_at_a_cname_are_not_followed() {
    let (cat, cfg) = (chains_catalog(), AnswerConfig::default());
    for qtype in [RType::NSEC, RType::RRSIG] {
        let m = ask_with(&cat, &cfg, &q("cn.r.test", qtype)).0;
        assert_eq!(m.rcode(), Rcode::NOERROR, "{qtype}");
        assert!(m.answers.is_empty(), "{qtype}: {:?}", texts(&m.answers));
        assert_eq!(texts(&m.authority).len(), 1, "{qtype}: NODATA's SOA");
    }
    let m = ask_with(&cat, &cfg, &q("cn.r.test", RType::A)).0;
    assert_eq!(m.answers.len(), 2, "another type follows the CNAME");
}
