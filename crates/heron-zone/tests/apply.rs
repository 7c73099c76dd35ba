//! Applying a change to a zone (`Zone::apply`): the result must answer
//! exactly as the same zone loaded whole, share what the change did not
//! touch, and refuse changes that break the zone.

use heron_proto::message::{Message, Record};
use heron_proto::name::lowercase_wire;
use heron_proto::{Name, RType};
use heron_zone::diff::{DiffRecord, ZoneDiff, diff};
use heron_zone::{AnswerConfig, Answered, Catalog, Transport, Zone, answer, load_zone_str};

const ORIGIN: &str = "p.test";

fn load(serial: u32, lines: &[String]) -> Result<Zone, String> {
    let text = format!(
        "$ORIGIN p.test.\n$TTL 300\n@ SOA ns hostmaster {serial} 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n{}\n",
        lines.join("\n")
    );
    load_zone_str(&text, "p.zone", &Name::parse(ORIGIN).unwrap())
        .map(|l| l.zone)
        .map_err(|p| format!("{p:?}"))
}

fn zone(serial: u32, lines: &[&str]) -> Zone {
    let lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    load(serial, &lines).unwrap()
}

fn lower(name: &str) -> Vec<u8> {
    let mut w = Name::parse(name).unwrap().as_wire().to_vec();
    lowercase_wire(&mut w);
    w
}

/// A response's header and sections, each section's records sorted (an
/// RRset's order is not something a client may rely on).
fn ask(zone: Zone, name: &str, qtype: RType) -> String {
    let mut cat = Catalog::new();
    cat.insert(zone);
    ask_in(&cat, name, qtype)
}

fn ask_in(cat: &Catalog, name: &str, qtype: RType) -> String {
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
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Names the random zones use: up to three labels of a, b, c under the
/// origin, and a wildcard.
fn universe() -> Vec<String> {
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

fn random_line(rng: &mut Rng, names: &[String]) -> String {
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
fn random_lines(rng: &mut Rng, names: &[String], count: usize) -> Vec<String> {
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

fn questions(names: &[String]) -> Vec<(String, RType)> {
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

#[test]
fn applying_the_diff_answers_like_the_zone_loaded_whole() {
    let names = universe();
    let questions = questions(&names);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut checked = 0;
    for round in 0..60 {
        let count = 4 + rng.below(20);
        let before_lines = random_lines(&mut rng, &names, count);
        let before = load(1, &before_lines).unwrap();
        // Drop and add a few lines; keep the edit only if it loads.
        let mut after_lines = before_lines.clone();
        for _ in 0..1 + rng.below(6) {
            if !after_lines.is_empty() && rng.below(2) == 0 {
                after_lines.remove(rng.below(after_lines.len()));
            } else {
                after_lines.push(random_line(&mut rng, &names));
            }
        }
        let Ok(after) = load(2, &after_lines) else {
            continue;
        };
        let change = diff(&before, &after);
        let applied = before
            .apply(&change)
            .unwrap_or_else(|p| panic!("round {round}: {p:?}\n{change:?}"));
        assert!(diff(&applied, &after).is_empty(), "round {round}");
        assert_eq!(applied.node_count(), after.node_count(), "round {round}");
        assert_eq!(
            applied.record_count(),
            after.record_count(),
            "round {round}"
        );
        let mut a = Catalog::new();
        a.insert(applied);
        let mut b = Catalog::new();
        b.insert(after);
        for (name, t) in &questions {
            assert_eq!(
                ask_in(&a, name, *t),
                ask_in(&b, name, *t),
                "round {round}: {name} {t}\nbefore: {before_lines:?}\nafter: {after_lines:?}"
            );
        }
        checked += 1;
    }
    assert!(checked > 30, "only {checked} rounds had a valid edit");
}

fn record(owner: &str, rtype: RType, rdata: &[u8]) -> DiffRecord {
    DiffRecord {
        owner: Name::parse(owner).unwrap(),
        rtype,
        ttl: 300,
        rdata: rdata.to_vec(),
    }
}

fn change(from: &Zone, deleted: Vec<DiffRecord>, added: Vec<DiffRecord>) -> ZoneDiff {
    let soa = from.soa().first_rdata().to_vec();
    let mut new_soa = soa.clone();
    let serial_at = new_soa.len() - 20;
    new_soa[serial_at..serial_at + 4].copy_from_slice(&(from.serial() + 1).to_be_bytes());
    ZoneDiff {
        old_soa: record(ORIGIN, RType::SOA, &soa),
        new_soa: record(ORIGIN, RType::SOA, &new_soa),
        deleted,
        added,
    }
}

#[test]
fn empty_non_terminals_appear_and_vanish_with_their_last_descendant() {
    let z = zone(1, &["a.b.c A 192.0.2.9"]);
    let removed = z
        .apply(&change(
            &z,
            vec![record("a.b.c.p.test", RType::A, &[192, 0, 2, 9])],
            vec![],
        ))
        .unwrap();
    assert!(removed.node(&lower("b.c.p.test")).is_none());
    assert!(removed.node(&lower("c.p.test")).is_none());
    assert!(ask(removed, "c.p.test", RType::A).starts_with("rcode 3"));
    let z = zone(1, &[]);
    let added = z
        .apply(&change(
            &z,
            vec![],
            vec![record("x.y.z.p.test", RType::A, &[192, 0, 2, 7])],
        ))
        .unwrap();
    assert!(added.node(&lower("y.z.p.test")).unwrap().is_empty());
    assert_eq!(added.serial(), 2);
    assert!(ask(added, "z.p.test", RType::A).starts_with("rcode 0"));
}

#[test]
fn new_glue_reaches_the_referral() {
    let z = zone(1, &["sub NS ns.sub", "sub NS ns.elsewhere.test."]);
    let before = ask(zone(1, &["sub NS ns.sub"]), "www.sub.p.test", RType::A);
    assert!(!before.contains("192.0.2.53"));
    let with_glue = z
        .apply(&change(
            &z,
            vec![],
            vec![record("ns.sub.p.test", RType::A, &[192, 0, 2, 53])],
        ))
        .unwrap();
    let referral = ask(with_glue, "www.sub.p.test", RType::A);
    assert!(
        referral.contains("ns.sub.p.test. 300 IN A 192.0.2.53"),
        "{referral}"
    );
}

#[test]
fn a_small_change_copies_only_the_shards_it_touches() {
    let lines: Vec<String> = (0..20_000)
        .map(|i| format!("h{i} A 10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255))
        .collect();
    let big = load(1, &lines).unwrap();
    let deleted = (0..5)
        .map(|i| record(&format!("h{i}.p.test"), RType::A, &[10, 0, 0, i as u8]))
        .collect();
    let added = (0..5)
        .map(|i| record(&format!("new{i}.p.test"), RType::A, &[10, 9, 9, i as u8]))
        .collect();
    let next = big.apply(&change(&big, deleted, added)).unwrap();
    let copied = next.unshared_bytes(&big);
    assert!(copied > 0);
    // Ten names and the apex touch at most eleven of the zone's 32 shards
    // (20,000 records, about a thousand per shard rounded to a power of two).
    assert!(
        copied * 2 < next.heap_bytes(),
        "{copied} of {} bytes copied",
        next.heap_bytes()
    );
    assert_eq!(next.record_count(), big.record_count());
    assert!(next.node(&lower("h3.p.test")).is_none());
    assert!(next.node(&lower("new3.p.test")).is_some());
    assert!(next.node(&lower("h7.p.test")).is_some());
}

#[test]
fn changes_that_break_the_zone_are_refused() {
    let z = zone(1, &["www A 192.0.2.2"]);
    let absent = change(
        &z,
        vec![record("no.p.test", RType::A, &[1, 2, 3, 4])],
        vec![],
    );
    let problems = z.apply(&absent).unwrap_err();
    assert!(
        problems[0].message.contains("does not hold"),
        "{problems:?}"
    );
    let cname = change(
        &z,
        vec![],
        vec![record(
            "www.p.test",
            RType::CNAME,
            Name::parse("x.test").unwrap().as_wire(),
        )],
    );
    let problems = z.apply(&cname).unwrap_err();
    assert!(
        problems[0].message.contains("CNAME beside other data"),
        "{problems:?}"
    );
    let ns = z.apex().rrset(RType::NS).unwrap().first_rdata().to_vec();
    let no_ns = change(&z, vec![record(ORIGIN, RType::NS, &ns)], vec![]);
    let problems = z.apply(&no_ns).unwrap_err();
    assert!(
        problems[0].message.contains("no NS records"),
        "{problems:?}"
    );
    let mut stale = change(&z, vec![], vec![]);
    stale.old_soa = stale.new_soa.clone();
    let problems = z.apply(&stale).unwrap_err();
    assert!(
        problems[0].message.contains("starts from serial 2"),
        "{problems:?}"
    );
    // The zone itself is untouched.
    assert_eq!(z.serial(), 1);
    assert!(ask(z, "www.p.test", RType::A).contains("192.0.2.2"));
}
