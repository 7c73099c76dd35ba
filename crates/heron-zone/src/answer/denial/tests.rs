//! The chain index (`zone::chain`) and the proofs built from it, on the
//! checked-in fixtures of `scripts/sign-test-zones.sh` (proofs.test signed
//! with NSEC, NSEC3 and NSEC3 opt-out) and on zones written here.

use std::cmp::Ordering;

use heron_proto::name::canonical_cmp;
use heron_proto::{Name, RType};

use super::{Denial, prove};
use crate::zone::chain::ChainKind;
use crate::zone::diff::diff;
use crate::zone::nsec3::{LABEL_LEN, Nsec3Params, base32hex_lower};
use crate::zone::{Loaded, Node, Zone, load_zone_str};

const ORIGIN: &str = "proofs.test.";
const NSEC: &str = include_str!("../../../tests/data/signed/proofs.test.nsec.zone");
const NSEC3: &str = include_str!("../../../tests/data/signed/proofs.test.nsec3.zone");
const OPT_OUT: &str = include_str!("../../../tests/data/signed/proofs.test.optout.zone");

fn load(text: &str) -> Loaded {
    load_zone_str(text, "fixture", &Name::parse(ORIGIN).unwrap())
        .unwrap_or_else(|p| panic!("{p:?}"))
}

fn zone(text: &str) -> Zone {
    load(text).zone
}

/// Lower-cased wire form of a name relative to the origin ("@": the apex).
fn wire(name: &str) -> Vec<u8> {
    let full = match name {
        "@" => ORIGIN.to_string(),
        _ => format!("{name}.{ORIGIN}"),
    };
    Name::parse(&full)
        .unwrap()
        .to_lowercase()
        .as_wire()
        .to_vec()
}

fn owner(node: &Node) -> String {
    node.owner().to_string()
}

fn links(zone: &Zone) -> Vec<Node<'_>> {
    zone.denial_chain().expect("a signed zone").nodes(zone)
}

/// The text without the records of `rtype` owned by `owner` (a fixture is
/// one record a line).
fn without(text: &str, owner: &str, rtype: &str) -> String {
    text.lines()
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            !(f.len() > 3 && f[0].eq_ignore_ascii_case(owner) && f[3] == rtype)
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

fn chain_warnings(loaded: &Loaded) -> Vec<String> {
    let warnings = loaded.warnings.iter().map(|p| p.message.clone());
    warnings
        .filter(|m| m.contains("chain") || m.contains("DNSKEY"))
        .collect()
}

// ---------------------------------------------------------------------------
// NSEC

#[test]
fn the_nsec_chain_is_in_canonical_order_and_each_link_names_the_next() {
    let loaded = load(NSEC);
    assert_eq!(chain_warnings(&loaded), Vec::<String>::new());
    let z = &loaded.zone;
    let owners: Vec<String> = links(z).iter().map(owner).collect();
    let expected = [
        "@",
        "0first",
        "*.cnamewild",
        "dangling",
        "x.y.ent",
        "insecure",
        "mail",
        "ns1",
        "child.optent",
        "secure",
        "tonx",
        "*.wild",
        "exact.wild",
        "www",
        "zzz",
    ];
    let expected: Vec<String> = expected
        .iter()
        .map(|n| Name::from_wire(&wire(n)).unwrap().to_string())
        .collect();
    assert_eq!(owners, expected);
    assert_eq!(z.signed_chain_len(), Some(15));
    for pair in links(z).windows(2) {
        assert_eq!(canonical_cmp(pair[0].key(), pair[1].key()), Ordering::Less);
    }
}

#[test]
fn nsec_lookup_matches_covers_and_wraps_around_the_end() {
    let z = zone(NSEC);
    let chain = z.denial_chain().unwrap();
    let all = links(&z);
    // Each owner matches itself; strictly before it is the previous
    // link, and before the first (the apex) the chain wraps to the last.
    for (at, link) in all.iter().enumerate() {
        let found = chain.at_or_before(&z, link.key()).unwrap();
        assert_eq!(found.id(), link.id(), "{}", owner(link));
        let prev = &all[(at + all.len() - 1) % all.len()];
        let found = chain.before(&z, link.key()).unwrap();
        assert_eq!(owner(&found), owner(prev), "before {}", owner(link));
    }
    // Names between owners are covered by the one before them.
    for (name, covering) in [
        ("nx", "ns1"),
        ("a", "0first"),
        ("ent", "dangling"),
        ("y.ent", "dangling"),
        ("a.x.y.ent", "x.y.ent"),
        ("foo.wild", "exact.wild"),
        ("a.wild", "*.wild"),
        ("optent", "ns1"),
        ("*", "@"),
        ("0", "@"),
        // Past the last owner: zzz, whose NSEC wraps to the apex.
        ("zzzz", "zzz"),
        ("a.zzz", "zzz"),
        ("~", "zzz"),
    ] {
        let found = chain.at_or_before(&z, &wire(name)).unwrap();
        assert_eq!(found.key(), &wire(covering)[..], "{name}");
    }
}

fn proof_owners(z: &Zone, name: &str, denial: Denial) -> Vec<String> {
    let chain = z.denial_chain().unwrap();
    let proof = prove(z, chain, &wire(name), denial);
    let mut owners: Vec<String> = proof.records().map(|(n, _)| owner(&n)).collect();
    owners.sort();
    owners
}

fn names(list: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = list
        .iter()
        .map(|n| Name::from_wire(&wire(n)).unwrap().to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn nsec_proofs_are_the_records_rfc_4035_names() {
    let z = zone(NSEC);
    let node = |n: &str| z.node(&wire(n)).unwrap();
    // NXDOMAIN: the NSEC covering the name and the one covering the
    // wildcard at its closest encloser (*.proofs.test: the apex's NSEC).
    let nx = Denial::NxDomain {
        encloser: node("@"),
    };
    assert_eq!(proof_owners(&z, "nx", nx), names(&["ns1", "@"]));
    // Below a name: its own NSEC covers the name and the wildcard.
    let nx = Denial::NxDomain {
        encloser: node("exact.wild"),
    };
    assert_eq!(
        proof_owners(&z, "a.b.exact.wild", nx),
        names(&["exact.wild"])
    );
    // Below an empty non-terminal.
    let nx = Denial::NxDomain {
        encloser: node("y.ent"),
    };
    assert_eq!(proof_owners(&z, "a.y.ent", nx), names(&["dangling"]));
    // NODATA at a name with an NSEC, and at an empty non-terminal (the
    // NSEC covering it, whose next name is below it).
    let nodata = |n: &str| Denial::NoData { node: node(n) };
    assert_eq!(proof_owners(&z, "www", nodata("www")), names(&["www"]));
    assert_eq!(
        proof_owners(&z, "y.ent", nodata("y.ent")),
        names(&["dangling"])
    );
    // DS at an unsigned delegation and a referral to it: the cut's NSEC.
    let insecure = Denial::InsecureReferral {
        cut: node("insecure"),
    };
    assert_eq!(proof_owners(&z, "insecure", insecure), names(&["insecure"]));
    // A wildcard answer: the NSEC covering the name; wildcard NODATA: and
    // the wildcard's own NSEC.
    let source = node("*.wild");
    let wildcard = Denial::Wildcard { source };
    assert_eq!(
        proof_owners(&z, "foo.wild", wildcard),
        names(&["exact.wild"])
    );
    let wild_nodata = Denial::WildcardNoData { source };
    assert_eq!(
        proof_owners(&z, "foo.wild", wild_nodata),
        names(&["exact.wild", "*.wild"])
    );
}

// ---------------------------------------------------------------------------
// NSEC3

fn params(z: &Zone) -> Nsec3Params {
    match z.denial_chain().unwrap().kind() {
        ChainKind::Nsec3(p) => p.clone(),
        ChainKind::Nsec => panic!("an NSEC3 zone"),
    }
}

/// The hashed-owner label of a name (lower-case base32hex).
fn hash_label(p: &Nsec3Params, name: &str) -> String {
    let mut label = [0u8; LABEL_LEN];
    base32hex_lower(&p.hash(&wire(name)), &mut label);
    String::from_utf8(label.to_vec()).unwrap()
}

fn first_label(node: &Node) -> String {
    let key = node.key();
    String::from_utf8(key[1..1 + key[0] as usize].to_vec()).unwrap()
}

/// An NSEC3's next hashed owner, as a label, and its opt-out flag.
fn nsec3_next(node: &Node) -> (String, bool) {
    let rd = node.rrset(RType::NSEC3).unwrap().first_rdata();
    let salt = rd[4] as usize;
    let hash: [u8; 20] = rd[6 + salt..26 + salt].try_into().unwrap();
    let mut label = [0u8; LABEL_LEN];
    base32hex_lower(&hash, &mut label);
    (String::from_utf8(label.to_vec()).unwrap(), rd[1] & 1 == 1)
}

/// Whether the NSEC3 at `node` covers the hash `h` (RFC 5155 1.3: its
/// owner hash sorts before h, its next hashed owner after, or the chain
/// wraps between them).
fn covers(node: &Node, h: &str) -> bool {
    let (own, (next, _)) = (first_label(node), nsec3_next(node));
    match own < next {
        true => own.as_str() < h && h < next.as_str(),
        false => own.as_str() < h || h < next.as_str(),
    }
}

#[test]
fn the_nsec3_chain_is_in_hash_order_and_hashes_every_name() {
    let loaded = load(NSEC3);
    assert_eq!(chain_warnings(&loaded), Vec::<String>::new());
    let z = &loaded.zone;
    let p = params(z);
    assert_eq!(
        (p.iterations, &p.salt[..]),
        (5, &[0xAA, 0xBB, 0xCC, 0xDD][..])
    );
    let all = links(z);
    let labels: Vec<String> = all.iter().map(first_label).collect();
    let mut sorted = labels.clone();
    sorted.sort();
    assert_eq!(labels, sorted, "hash order is canonical order");
    for (at, link) in all.iter().enumerate() {
        let next = &all[(at + 1) % all.len()];
        assert_eq!(nsec3_next(link).0, first_label(next));
    }
    // Every name, empty non-terminals too, has an NSEC3 (no opt-out); names
    // below a delegation have none.
    for name in [
        "@", "www", "ent", "y.ent", "x.y.ent", "*.wild", "wild", "insecure", "optent",
    ] {
        assert!(labels.contains(&hash_label(&p, name)), "{name}");
    }
    assert!(!labels.contains(&hash_label(&p, "ns.insecure")));
}

#[test]
fn nsec3_lookup_covers_by_hash_and_wraps_at_both_ends() {
    let z = zone(NSEC3);
    let chain = z.denial_chain().unwrap();
    let p = params(&z);
    let all = links(&z);
    let last = all.last().unwrap().id();
    let apex = Name::parse(ORIGIN).unwrap();
    let owner_of = |label: &str| {
        let mut w = vec![label.len() as u8];
        w.extend_from_slice(label.as_bytes());
        w.extend_from_slice(apex.as_wire());
        w
    };
    // Hashes below the first owner and above the last: the last NSEC3,
    // whose next hashed owner is the first, covers both.
    for h in ["0".repeat(32), "v".repeat(32)] {
        let found = chain.before(&z, &owner_of(&h)).unwrap();
        assert_eq!(found.id(), last, "{h}");
        assert!(covers(&found, &h));
    }
    for name in ["nx", "a.b.c", "zzzz", "*", "*.www", "foo.wild", "x.ent"] {
        let h = hash_label(&p, name);
        let found = chain.before(&z, &owner_of(&h)).unwrap();
        assert!(
            covers(&found, &h),
            "{name}: {h} not covered by {}",
            owner(&found)
        );
    }
    // A hash that is an owner: `before` gives the previous link.
    let h = hash_label(&p, "www");
    let found = chain.at_or_before(&z, &owner_of(&h)).unwrap();
    assert_eq!(first_label(&found), h);
    assert!(chain.before(&z, &owner_of(&h)).unwrap().id() != found.id());
}

#[test]
fn the_apex_proofs_found_at_load_are_those_hashing_finds() {
    for text in [NSEC3, OPT_OUT] {
        let z = zone(text);
        let chain = z.denial_chain().unwrap();
        let p = params(&z);
        let apex = z.origin().as_wire();
        let own = p.hashed_owner(apex, apex).unwrap();
        let matched = chain.apex_match(&z).expect("the apex has an NSEC3");
        assert_eq!(matched.key(), own.as_wire());
        let star = p.hashed_owner(&wire("*"), apex).unwrap();
        let cover = chain.apex_wildcard_cover(&z).unwrap();
        assert_eq!(cover.id(), chain.before(&z, star.as_wire()).unwrap().id());
        assert!(covers(&cover, &hash_label(&p, "*")));
    }
    // And again after a change (a new chain version).
    let z = zone(NSEC3);
    let text = NSEC3.replace(
        "SOA\tns1.proofs.test. hostmaster.proofs.test. 1 ",
        "SOA\tns1.proofs.test. hostmaster.proofs.test. 2 ",
    );
    assert_ne!(text, NSEC3);
    let next = z.apply(&diff(&z, &zone(&text))).unwrap();
    let chain = next.denial_chain().unwrap();
    let p = params(&next);
    let apex = next.origin().as_wire();
    let own = p.hashed_owner(apex, apex).unwrap();
    assert_eq!(chain.apex_match(&next).unwrap().key(), own.as_wire());
}

#[test]
fn nsec3_proofs_are_the_records_rfc_5155_names() {
    let z = zone(NSEC3);
    let p = params(&z);
    let node = |n: &str| z.node(&wire(n)).unwrap();
    let proof = |name: &str, denial| {
        let chain = z.denial_chain().unwrap();
        prove(&z, chain, &wire(name), denial)
            .records()
            .map(|(n, _)| n)
            .collect::<Vec<_>>()
    };
    let matches =
        |nodes: &[Node], name: &str| nodes.iter().any(|n| first_label(n) == hash_label(&p, name));
    let covered = |nodes: &[Node], name: &str| {
        let h = hash_label(&p, name);
        nodes.iter().any(|n| covers(n, &h))
    };
    // 7.2.2 NXDOMAIN: closest encloser (the apex) matched, next closer
    // (nx) covered, wildcard at the closest encloser covered.
    let nx = proof(
        "a.b.nx",
        Denial::NxDomain {
            encloser: node("@"),
        },
    );
    assert!(nx.len() <= 3);
    assert!(matches(&nx, "@") && covered(&nx, "nx") && covered(&nx, "*"));
    // Below an empty non-terminal: the closest encloser is y.ent.
    let nx = proof(
        "a.b.y.ent",
        Denial::NxDomain {
            encloser: node("y.ent"),
        },
    );
    assert!(matches(&nx, "y.ent") && covered(&nx, "b.y.ent") && covered(&nx, "*.y.ent"));
    // 7.2.3 NODATA, at an empty non-terminal too: the matching NSEC3.
    for name in ["www", "ent", "y.ent"] {
        let nodata = proof(name, Denial::NoData { node: node(name) });
        assert_eq!(nodata.len(), 1);
        assert!(matches(&nodata, name), "{name}");
    }
    // 7.2.6 wildcard answer: the next closer name covered.
    let source = node("*.wild");
    let answer = proof("a.b.wild", Denial::Wildcard { source });
    assert_eq!(answer.len(), 1);
    assert!(covered(&answer, "b.wild"));
    // 7.2.5 wildcard NODATA: closest encloser proof and the wildcard's.
    let nodata = proof("foo.wild", Denial::WildcardNoData { source });
    assert!(matches(&nodata, "wild") && covered(&nodata, "foo.wild"));
    assert!(matches(&nodata, "*.wild"));
    // 7.2.7 referral to an unsigned child: its matching NSEC3.
    let insecure = proof(
        "insecure",
        Denial::InsecureReferral {
            cut: node("insecure"),
        },
    );
    assert!(matches(&insecure, "insecure"));
}

#[test]
fn opt_out_proves_an_unsigned_delegation_by_its_closest_provable_encloser() {
    let z = zone(OPT_OUT);
    let p = params(&z);
    let chain = z.denial_chain().unwrap();
    let labels: Vec<String> = links(&z).iter().map(first_label).collect();
    // Opt-out leaves the unsigned delegations (and the empty non-terminal
    // above one) without an NSEC3.
    for name in ["insecure", "child.optent", "optent"] {
        assert!(!labels.contains(&hash_label(&p, name)), "{name}");
    }
    for name in ["child.optent", "insecure"] {
        let cut = z.node(&wire(name)).unwrap();
        let nodes: Vec<Node> = prove(&z, chain, &wire(name), Denial::InsecureReferral { cut })
            .records()
            .map(|(n, _)| n)
            .collect();
        // 7.2.4 and 7.2.7: the closest provable encloser (the apex)
        // matched, and the next closer name covered by an opt-out NSEC3.
        let top = name.rsplit('.').next().unwrap();
        let h = hash_label(&p, top);
        assert!(nodes.iter().any(|n| first_label(n) == hash_label(&p, "@")));
        let cover = nodes
            .iter()
            .find(|n| covers(n, &h))
            .expect("next closer covered");
        assert!(
            nsec3_next(cover).1,
            "{name}: the covering NSEC3 has opt-out set"
        );
    }
}

// ---------------------------------------------------------------------------
// Malformed chains: the zone loads, with a warning that says what to do.

#[test]
fn nsec3_without_nsec3param_is_served_without_proofs_and_says_so() {
    let text = without(NSEC3, ORIGIN, "NSEC3PARAM");
    let loaded = load(&text);
    assert_eq!(loaded.zone.signed_chain_len(), None);
    let warnings = chain_warnings(&loaded);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("neither an NSEC record nor an NSEC3PARAM record at the apex"),
        "{warnings:?}"
    );
    assert!(warnings[0].contains("add the NSEC3PARAM"), "{warnings:?}");
}

#[test]
fn an_nsec3param_heron_cannot_hash_with_says_so() {
    let text = NSEC3.replace("NSEC3PARAM\t1 0 5 AABBCCDD", "NSEC3PARAM\t2 0 5 AABBCCDD");
    assert_ne!(
        text, NSEC3,
        "the fixture's NSEC3PARAM is where the test expects"
    );
    let loaded = load(&text);
    assert_eq!(loaded.zone.signed_chain_len(), None);
    let warnings = chain_warnings(&loaded);
    assert!(warnings[0].contains("other than SHA-1"), "{warnings:?}");
}

#[test]
fn a_gap_in_the_nsec_chain_is_named_and_proofs_still_come() {
    let loaded = load(&without(NSEC, "www.proofs.test.", "NSEC"));
    assert_eq!(
        chain_warnings(&loaded),
        vec![
            "NSEC chain broken at exact.wild.proofs.test.: its next name is \
             www.proofs.test., but the next NSEC in the zone is zzz.proofs.test.; proofs \
             of denial near it will not validate (sign the zone again)"
                .to_string()
        ]
    );
    // www lost its NSEC: its NODATA proof is the record before it.
    let z = &loaded.zone;
    let www = z.node(&wire("www")).unwrap();
    assert_eq!(
        proof_owners(z, "www", Denial::NoData { node: www }),
        names(&["exact.wild"])
    );
}

#[test]
fn a_gap_in_the_nsec3_chain_is_named() {
    let z = zone(NSEC3);
    let p = params(&z);
    let gone = format!("{}.{ORIGIN}", hash_label(&p, "www").to_uppercase());
    let loaded = load(&without(NSEC3, &gone, "NSEC3"));
    let warnings = chain_warnings(&loaded);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("NSEC3 chain broken at "),
        "{warnings:?}"
    );
    assert!(
        warnings[0].contains(&format!("its next name is {}", hash_label(&p, "www"))),
        "{warnings:?}"
    );
    // The NODATA proof for www falls back to the closest encloser proof.
    let z = &loaded.zone;
    let www = z.node(&wire("www")).unwrap();
    let chain = z.denial_chain().unwrap();
    let proof = prove(z, chain, &wire("www"), Denial::NoData { node: www });
    assert!(proof.records().count() >= 1);
}

// ---------------------------------------------------------------------------
// New versions (IXFR, reload): the chain of an applied change is the chain
// of the same zone loaded whole.

/// A zone of `names` (each with an A and an NSEC record; the NSEC's next
/// name does not matter to the index) large enough for several shards.
fn nsec_zone_text(names: &[String]) -> String {
    let mut text = format!(
        "$ORIGIN {ORIGIN}\n@ 300 SOA ns1 h 1 7200 3600 1209600 300\n@ 300 NS ns1\n\
         @ 300 NSEC ns1 SOA NS NSEC\nns1 300 A 192.0.2.1\nns1 300 NSEC @ A NSEC\n"
    );
    for n in names {
        text.push_str(&format!("{n} 300 A 192.0.2.2\n{n} 300 NSEC @ A NSEC\n"));
    }
    text
}

/// 3000 names, enough for several shards, and an edit of them: every
/// 97th removed, 40 added under an empty non-terminal.
fn names_and_edited() -> (Vec<String>, Vec<String>) {
    let names: Vec<String> = (0..3000)
        .map(|i| format!("n{}x{i}", i * 7919 % 1000))
        .collect();
    let mut edited: Vec<String> = names
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 97 != 0)
        .map(|(_, n)| n.clone())
        .collect();
    edited.extend((0..40).map(|i| format!("added{i}.deep")));
    (names, edited)
}

/// Small changes one after the other (as updates make them): the nodes
/// the change did not touch keep their place in the chain as their
/// shards are copied; after each, the chain is the one a full load of
/// the same text builds.
#[test]
fn a_chain_moved_on_by_small_changes_is_the_one_a_full_load_builds() {
    let (mut names, _) = names_and_edited();
    let mut zone_now = zone(&nsec_zone_text(&names));
    let owners = |z: &Zone| links(z).iter().map(owner).collect::<Vec<_>>();
    for serial in 2..12 {
        match serial % 3 {
            0 => names.remove(serial * 131 % names.len()),
            _ => {
                names.push(format!("new{serial}"));
                String::new()
            }
        };
        let text = nsec_zone_text(&names).replace("SOA ns1 h 1 ", &format!("SOA ns1 h {serial} "));
        let loaded = zone(&text);
        zone_now = zone_now.apply(&diff(&zone_now, &loaded)).unwrap();
        assert_eq!(owners(&zone_now), owners(&loaded), "serial {serial}");
    }
}

#[test]
fn an_applied_change_keeps_the_chain_a_full_load_builds() {
    let (names, edited) = names_and_edited();
    let before = zone(&nsec_zone_text(&names));
    // A name that only gains an NSEC, and the apex's serial changes.
    let text = nsec_zone_text(&edited).replace("SOA ns1 h 1 ", "SOA ns1 h 2 ");
    let after = zone(&text);
    let applied = before.apply(&diff(&before, &after)).unwrap();
    let owners = |z: &Zone| links(z).iter().map(owner).collect::<Vec<_>>();
    assert_eq!(owners(&applied), owners(&after));
    assert_eq!(applied.signed_chain_len(), Some(edited.len() + 2));
    // An unsigned version drops the chain; signing it again brings it back.
    let unsigned_text = text
        .lines()
        .filter(|l| !l.contains("NSEC"))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("SOA ns1 h 2 ", "SOA ns1 h 3 ");
    let unsigned = zone(&unsigned_text);
    let stripped = after.apply(&diff(&after, &unsigned)).unwrap();
    assert_eq!(stripped.signed_chain_len(), None);
}

// ---------------------------------------------------------------------------
// NSEC3 owner digests computed when the chain is built: the proofs are
// those that hashing every name at query time finds.

/// Every proof each node can take part in, for its own name and for names
/// below it, as text (the proving owners), in node order.
fn all_proofs(z: &Zone) -> Vec<String> {
    let chain = z.denial_chain().unwrap();
    let mut out = Vec::new();
    for node in z.nodes() {
        let key = node.key().to_vec();
        let mut cases = vec![
            (key.clone(), Denial::NoData { node }),
            (key.clone(), Denial::InsecureReferral { cut: node }),
        ];
        for prefix in [&b"\x02nx"[..], b"\x01a\x01b", b"\x01*"] {
            let name = [prefix, &key[..]].concat();
            cases.push((name.clone(), Denial::NxDomain { encloser: node }));
            cases.push((name.clone(), Denial::Wildcard { source: node }));
            cases.push((name, Denial::WildcardNoData { source: node }));
        }
        for (case, (name, denial)) in cases.into_iter().enumerate() {
            let proof = prove(z, chain, &name, denial);
            let owners: Vec<String> = proof.records().map(|(n, _)| owner(&n)).collect();
            let name = Name::from_wire(&name).unwrap();
            out.push(format!("{name} case {case}: {owners:?}"));
        }
    }
    out
}

/// Checks that the digests of every owner that has them are its hash and
/// its wildcard child's, and that the proofs with them are those without.
fn digests_prove_as_hashing_does(mut z: Zone) -> usize {
    let p = params(&z);
    let chain = z.denial_chain().unwrap();
    let mut stored = 0;
    for node in z.nodes() {
        let Some(d) = chain.owner_digests(&z, &node) else {
            assert!(chain.kind().links(&node), "{} has no digests", owner(&node));
            continue;
        };
        let star = [&b"\x01*"[..], node.key()].concat();
        assert_eq!(d, &[p.hash(node.key()), p.hash(&star)], "{}", owner(&node));
        stored += 1;
    }
    assert_eq!(chain.owner_digest_count(), Some(stored));
    let with = all_proofs(&z);
    z.forget_nsec3_owner_digests();
    assert_eq!(z.denial_chain().unwrap().owner_digest_count(), None);
    let without = all_proofs(&z);
    assert_eq!(with.len(), without.len());
    for (a, b) in with.iter().zip(&without) {
        assert_eq!(a, b, "with digests vs hashing at query time");
    }
    stored
}

#[test]
fn nsec3_proofs_from_load_time_digests_are_those_hashing_finds() {
    for text in [NSEC3, OPT_OUT] {
        let z = zone(text);
        let names = z
            .nodes()
            .filter(|n| !z.denial_chain().unwrap().kind().links(n));
        let expected = names.count();
        assert!(expected > 20);
        // 16 bytes per link; 4 (arena offset) and 2 x 20 (digests) per owner.
        let links = z.signed_chain_len().unwrap();
        assert_eq!(z.chain_heap_bytes(), 16 * links + 44 * expected);
        assert_eq!(digests_prove_as_hashing_does(z), expected);
    }
}

#[test]
fn nsec_and_unsigned_zones_keep_no_owner_digests() {
    let z = zone(NSEC);
    let chain = z.denial_chain().unwrap();
    assert_eq!(chain.owner_digest_count(), None);
    assert!(z.nodes().all(|n| chain.owner_digests(&z, &n).is_none()));
    let unsigned = zone(&nsec_zone_text(&[]).replace("NSEC", "TXT"));
    assert!(unsigned.denial_chain().is_none());
}

/// An NSEC3 zone of `names` (each with an A record, and its hashed owner
/// with an NSEC3 whose next hash does not matter to the index), large
/// enough for several shards.
fn nsec3_zone_text(names: &[String]) -> String {
    let p = Nsec3Params::from_nsec3param(&[1, 0, 0, 0, 0]).unwrap();
    let mut text = format!(
        "$ORIGIN {ORIGIN}\n@ 300 SOA ns1 h 1 7200 3600 1209600 300\n@ 300 NS ns1\n\
         @ 300 NSEC3PARAM 1 0 0 -\nns1 300 A 192.0.2.1\n"
    );
    let mut owners = vec!["@".to_string(), "ns1".to_string()];
    owners.extend(names.iter().cloned());
    for n in &owners {
        if n != "@" && n != "ns1" {
            text.push_str(&format!("{n} 300 A 192.0.2.2\n"));
        }
        let h = hash_label(&p, n);
        text.push_str(&format!("{h} 300 NSEC3 1 0 0 - {h} A\n"));
    }
    text
}

#[test]
fn an_applied_change_hashes_the_owners_a_full_load_hashes() {
    let (names, edited) = names_and_edited();
    let before = zone(&nsec3_zone_text(&names));
    let text = nsec3_zone_text(&edited).replace("SOA ns1 h 1 ", "SOA ns1 h 2 ");
    let after = zone(&text);
    let applied = before.apply(&diff(&before, &after)).unwrap();
    let count = |z: &Zone| z.denial_chain().unwrap().owner_digest_count();
    assert_eq!(count(&applied), count(&after));
    // The names, the apex, ns1 and the empty non-terminal "deep".
    assert_eq!(count(&applied), Some(edited.len() + 3));
    // The same proofs as the zone loaded whole (nodes lie in another order).
    let sorted = |z: &Zone| {
        let mut v = all_proofs(z);
        v.sort();
        v
    };
    let (a, b) = (sorted(&applied), sorted(&after));
    assert_eq!(a.len(), b.len());
    let differ = a.iter().zip(&b).filter(|(x, y)| x != y).count();
    assert_eq!(differ, 0, "proofs after apply vs a full load");
    assert_eq!(digests_prove_as_hashing_does(applied), edited.len() + 3);
}
