//! The zone's compact storage: what a lookup, a walk over the nodes and the
//! records read back must give, whatever the layout.

use std::collections::BTreeSet;

use heron_proto::name::lowercase_wire;
use heron_proto::{Name, RType};
use heron_zone::{Severity, Zone, load_zone_str};

fn load(body: &str) -> Zone {
    let text =
        format!("$ORIGIN s.test.\n$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n{body}");
    load_zone_str(&text, "s.zone", &Name::parse("s.test").unwrap())
        .unwrap_or_else(|p| panic!("{p:?}"))
        .zone
}

fn lower(name: &str) -> Vec<u8> {
    let mut w = Name::parse(name).unwrap().as_wire().to_vec();
    lowercase_wire(&mut w);
    w
}

#[test]
fn lookups_ignore_case_and_owners_keep_it() {
    let z = load("Www.Mixed A 192.0.2.2\nplain A 192.0.2.3\n");
    let node = z
        .node(&lower("www.mixed.s.test"))
        .expect("found by its lower-case name");
    assert_eq!(node.owner().to_string(), "Www.Mixed.s.test.");
    assert_eq!(node.key(), &lower("www.mixed.s.test")[..]);
    let plain = z.node(&lower("plain.s.test")).unwrap();
    assert_eq!(
        plain.owner_wire(),
        plain.key(),
        "a lower-case owner is stored once"
    );
    assert!(z.node(&lower("absent.s.test")).is_none());
}

#[test]
fn empty_non_terminals_exist_and_hold_nothing() {
    let z = load("a.b.c A 192.0.2.9\n");
    for name in ["b.c.s.test", "c.s.test"] {
        let node = z
            .node(&lower(name))
            .unwrap_or_else(|| panic!("{name} exists"));
        assert!(node.is_empty());
    }
    assert!(!z.node(&lower("a.b.c.s.test")).unwrap().is_empty());
    // apex, ns, a.b.c, b.c, c
    assert_eq!(z.node_count(), 5);
}

#[test]
fn records_read_back_as_loaded_duplicates_dropped() {
    let z = load(
        "mx MX 10 mail\nmx MX 10 MAIL\nmx MX 20 mail.other.test.\nmail A 192.0.2.4\n\
         txt TXT \"a\" \"b\"\n",
    );
    let mx = z
        .node(&lower("mx.s.test"))
        .unwrap()
        .rrset(RType::MX)
        .unwrap();
    let rdatas: Vec<Vec<u8>> = mx.rdatas().map(|r| r.into_owned()).collect();
    let mail = Name::parse("mail.s.test").unwrap();
    let other = Name::parse("mail.other.test").unwrap();
    assert_eq!(
        rdatas,
        [
            [&[0, 10][..], mail.as_wire()].concat(),
            [&[0, 20][..], other.as_wire()].concat()
        ],
        "in zone-file order, names in full, the case duplicate gone"
    );
    assert_eq!(mx.ttl(), 60);
    assert_eq!(z.record_count(), 3 + 2 + 1 + 1);
}

#[test]
fn every_node_is_walked_once_apex_first() {
    let body: String = (0..3000)
        .map(|i| format!("h{i} A 10.0.{}.{}\n", i / 256, i % 256))
        .collect();
    let z = load(&body);
    let owners: Vec<String> = z.nodes().map(|n| n.owner().to_string()).collect();
    assert_eq!(owners[0], "s.test.");
    let unique: BTreeSet<&String> = owners.iter().collect();
    assert_eq!(unique.len(), owners.len(), "no node twice");
    assert_eq!(owners.len(), z.node_count());
    assert_eq!(owners.len(), 3000 + 2);
}

/// Large zones are packed on several threads into many shards: every name
/// must still be found, with its own data.
#[test]
fn a_large_zone_finds_every_name() {
    let n = 60_000;
    let body: String = (0..n)
        .map(|i| {
            format!(
                "n{i}.sub{} A 10.{}.{}.{}\n",
                i % 7,
                i >> 16,
                (i >> 8) & 255,
                i & 255
            )
        })
        .collect();
    let z = load(&body);
    for i in (0..n).step_by(997) {
        let node = z
            .node(&lower(&format!("n{i}.sub{}.s.test", i % 7)))
            .unwrap();
        let a = node.rrset(RType::A).unwrap().first_rdata().into_owned();
        assert_eq!(
            a,
            [10, (i >> 16) as u8, ((i >> 8) & 255) as u8, (i & 255) as u8]
        );
    }
    assert!(z.node(&lower("sub3.s.test")).unwrap().is_empty());
    assert_eq!(z.record_count(), n + 3);
    assert!(
        z.heap_bytes() < n * 80,
        "{} bytes for {n} records",
        z.heap_bytes()
    );
}

#[test]
fn signatures_alone_do_not_make_an_rrset() {
    let z = load("sig RRSIG A 8 3 60 20300101000000 20200101000000 1 s.test. AAAA\n");
    let node = z.node(&lower("sig.s.test")).unwrap();
    assert!(node.rrset(RType::A).is_none());
    assert!(node.is_empty());
    let sets: Vec<RType> = node.rrsets().map(|s| s.rtype).collect();
    assert_eq!(sets, [RType::A]);
    assert_eq!(node.rrsets().next().unwrap().sigs().count(), 1);
}

#[test]
fn an_rrset_past_64_kib_is_an_error() {
    // 300 TXT records of 250 octets: 75 KB of RDATA in one RRset.
    let body: String = (0..300)
        .map(|i| format!("big TXT \"{i:0>249}\"\n"))
        .collect();
    let text =
        format!("$ORIGIN s.test.\n$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n{body}");
    let Err(problems) = load_zone_str(&text, "s.zone", &Name::parse("s.test").unwrap()) else {
        panic!("loaded");
    };
    let p = problems
        .iter()
        .find(|p| p.message.contains("64 KiB"))
        .expect("reported");
    assert_eq!(p.severity, Severity::Error);
    assert_eq!(
        p.location.as_ref().unwrap().line,
        6,
        "where the RRset starts"
    );
}
