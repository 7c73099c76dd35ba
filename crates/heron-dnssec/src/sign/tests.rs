use super::*;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use heron_proto::Name;
use heron_zone::load_zone_str;

use crate::keys::Algorithm;
use heron_zone::diff::{ZoneDiff, diff};

const ZONE: &str = "\
$ORIGIN example.
$TTL 3600
@ IN SOA ns1 hostmaster 1 7200 900 1209600 300
@ IN NS ns1
@ IN MX 10 MAIL.Example.
ns1 IN A 192.0.2.1
www IN A 192.0.2.2
www IN AAAA 2001:db8::2
a.b.c IN TXT \"deep\"
*.wild IN A 192.0.2.3
sub IN NS ns.sub
ns.sub IN A 192.0.2.4
secure IN NS ns.secure
secure IN DS 12345 13 2 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
ns.secure IN A 192.0.2.5
";

fn zone(text: &str, origin: &str) -> Zone {
    load_zone_str(text, "t", &Name::parse(origin).unwrap())
        .unwrap()
        .zone
}

fn csk(algorithm: Algorithm) -> Vec<ZoneKey> {
    let (key, _) = SigningKey::generate(algorithm).unwrap();
    vec![ZoneKey::new(key, KeyRole::Csk)]
}

fn config(denial: Denial) -> SignConfig {
    SignConfig {
        denial,
        dnskey_ttl: 3600,
        validity: 14 * 86400,
        jitter: 5 * 86400,
        inception_offset: 3600,
        refresh: 5 * 86400,
        serial: None,
    }
}

fn nsec3(opt_out: bool) -> Denial {
    Denial::Nsec3 {
        iterations: 0,
        salt: Vec::new(),
        opt_out,
    }
}

const NOW: u64 = 1_760_000_000;

fn signed(denial: Denial) -> Zone {
    let z = zone(ZONE, "example.");
    sign_zone(&z, &csk(Algorithm::EcdsaP256Sha256), &config(denial), NOW)
        .unwrap()
        .zone
}

fn wire(name: &str) -> Vec<u8> {
    Name::parse(name).unwrap().as_wire().to_ascii_lowercase()
}

fn types_signed(z: &Zone, name: &str) -> Vec<RType> {
    let node = z.node(&wire(name)).unwrap();
    node.rrsets()
        .filter(|s| s.has_sigs())
        .map(|s| s.rtype)
        .collect()
}

/// The RFC 8080 6.1 example: Ed25519 is deterministic, so the RRSIG Heron
/// makes over the example MX RRset must be the RFC's, byte for byte.
#[test]
fn the_rfc8080_example_signature_comes_out_exactly() {
    let text = "example.com. 3600 IN SOA ns hm 1 2 3 4 5\n\
                example.com. 3600 IN NS ns.example.com.\n\
                example.com. 3600 IN MX 10 mail.example.com.\n";
    let z = zone(text, "example.com.");
    let seed = STANDARD
        .decode("ODIyNjAzODQ2MjgwODAxMjI2NDUxOTAyMDQxNDIyNjI=")
        .unwrap();
    let keys = vec![ZoneKey::new(
        SigningKey::from_ed25519_seed(&seed).unwrap(),
        KeyRole::Csk,
    )];
    assert_eq!(keys[0].tag, 3613);
    let mut c = config(Denial::Nsec);
    (c.validity, c.jitter, c.inception_offset) = (1_440_021_600 - 1_438_207_200, 0, 0);
    let s = sign_zone(&z, &keys, &c, 1_438_207_200).unwrap().zone;
    let mx = s.apex().rrset(RType::MX).unwrap();
    let sig = mx.sigs().next().unwrap();
    let want = STANDARD
        .decode("oL9krJun7xfBOIWcGHi7mag5/hdZrKWw15jPGrHpjQeRAvTdszaPD+QLs3fx8A4M3e23mRZ9VrbpMngwcrqNAg==")
        .unwrap();
    assert_eq!(&sig[sig.len() - 64..], &want[..]);
    // Type covered MX, algorithm 15, 2 labels, TTL, times, tag.
    assert_eq!(&sig[..4], &[0, 15, 15, 2]);
    assert_eq!(u16::from_be_bytes([sig[16], sig[17]]), 3613);
}

#[test]
fn delegations_sign_only_ds_and_glue_is_unsigned() {
    let z = signed(Denial::Nsec);
    assert_eq!(types_signed(&z, "sub.example."), [RType::NSEC]);
    assert_eq!(
        types_signed(&z, "secure.example."),
        [RType::DS, RType::NSEC]
    );
    assert!(types_signed(&z, "ns.sub.example.").is_empty(), "glue");
    assert!(types_signed(&z, "ns.secure.example.").is_empty(), "glue");
    let apex = types_signed(&z, "example.");
    for t in [RType::SOA, RType::NS, RType::MX, RType::DNSKEY, RType::NSEC] {
        assert!(apex.contains(&t), "{t} at the apex: {apex:?}");
    }
    assert!(types_signed(&z, "www.example.").contains(&RType::AAAA));
}

/// The NSEC chain in canonical order, glue and empty non-terminals left
/// out, each bitmap what the name holds.
#[test]
fn the_nsec_chain_links_every_authoritative_name() {
    let z = signed(Denial::Nsec);
    let mut at = wire("example.");
    let mut walked = Vec::new();
    for _ in 0..20 {
        let node = z.node(&at).unwrap();
        walked.push(node.owner().to_string());
        let nsec = node.rrset(RType::NSEC).unwrap();
        assert_eq!(nsec.ttl(), 300, "RFC 9077: min(SOA TTL, MINIMUM)");
        let rdata = nsec.first_rdata();
        let mut end = 0;
        while rdata[end] != 0 {
            end += 1 + rdata[end] as usize;
        }
        let next = Name::from_wire(&rdata[..=end]).unwrap();
        at = next.as_wire().to_vec();
        if at == wire("example.") {
            break;
        }
    }
    assert_eq!(
        walked,
        [
            "example.",
            "a.b.c.example.",
            "ns1.example.",
            "secure.example.",
            "sub.example.",
            "*.wild.example.",
            "www.example."
        ]
    );
    let cut = z.node(&wire("sub.example.")).unwrap();
    let rdata = cut.rrset(RType::NSEC).unwrap().first_rdata();
    let bitmap = &rdata[wire("*.wild.example.").len()..];
    let mut want = Vec::new();
    heron_proto::rdata::encode_type_bitmap(&[2, 46, 47], &mut want);
    assert_eq!(bitmap, &want[..], "NS RRSIG NSEC, no A for the glue");
}

#[test]
fn wildcard_signatures_do_not_count_the_star() {
    let z = signed(Denial::Nsec);
    let node = z.node(&wire("*.wild.example.")).unwrap();
    let sig = node.rrset(RType::A).unwrap().sigs().next().unwrap();
    assert_eq!(sig[3], 2, "wild.example: 2 labels");
    let www = z.node(&wire("www.example.")).unwrap();
    assert_eq!(www.rrset(RType::A).unwrap().sigs().next().unwrap()[3], 2);
}

fn nsec3_count(z: &Zone) -> usize {
    z.nodes()
        .filter(|n| n.rrset(RType::NSEC3).is_some())
        .count()
}

#[test]
fn nsec3_covers_empty_non_terminals_and_opt_out_skips_insecure_delegations() {
    let full = signed(nsec3(false));
    // apex, ns1, www, a.b.c and its ENTs b.c and c, *.wild and ENT wild,
    // sub, secure: 10.
    assert_eq!(nsec3_count(&full), 10);
    let hash = nsec3_hash(&wire("c.example."), &[], 0);
    let mut owner = vec![32];
    owner.extend_from_slice(&base32hex(&hash));
    owner.extend_from_slice(&wire("example."));
    let ent = full
        .node(&owner)
        .expect("the NSEC3 of an empty non-terminal");
    let rdata = ent.rrset(RType::NSEC3).unwrap().first_rdata();
    assert_eq!(rdata.len(), 5 + 1 + 20, "an empty bitmap");
    assert!(ent.rrset(RType::NSEC3).unwrap().has_sigs());
    let param = full.apex().rrset(RType::NSEC3PARAM).unwrap();
    assert_eq!(&param.first_rdata()[..], &[1, 0, 0, 0, 0]);
    assert_eq!(full.signed_chain_len(), Some(10));

    let opt_out = signed(nsec3(true));
    assert_eq!(nsec3_count(&opt_out), 9, "sub (no DS) left out");
    let any = opt_out.nodes().find_map(|n| n.rrset(RType::NSEC3)).unwrap();
    assert_eq!(any.first_rdata()[1], 1, "opt-out flag");
}

#[test]
fn nsec3_hashes_match_rfc5155_appendix_a() {
    let salt = [0xAA, 0xBB, 0xCC, 0xDD];
    for (name, hash) in [
        ("example.", "0p9mhaveqvm6t7vbl5lop2u3t2rp3tom"),
        ("a.example.", "35mthgpgcu1qg68fab165klnsnk3dpvl"),
        ("*.w.example.", "r53bq7cc2uvmubfu5ocmm6pers9tk9en"),
    ] {
        let got = base32hex(&nsec3_hash(&wire(name), &salt, 12));
        assert_eq!(std::str::from_utf8(&got).unwrap(), hash, "{name}");
    }
}

#[test]
fn ksk_signs_dnskey_and_zsk_the_rest() {
    let z = zone(ZONE, "example.");
    let (ksk, _) = SigningKey::generate(Algorithm::Ed25519).unwrap();
    let (zsk, _) = SigningKey::generate(Algorithm::Ed25519).unwrap();
    let keys = vec![
        ZoneKey::new(ksk, KeyRole::Ksk),
        ZoneKey::new(zsk, KeyRole::Zsk),
    ];
    let (ksk_tag, zsk_tag) = (keys[0].tag, keys[1].tag);
    let s = sign_zone(&z, &keys, &config(Denial::Nsec), NOW)
        .unwrap()
        .zone;
    let tags = |rtype: RType| -> Vec<u16> {
        let set = s.apex().rrset(rtype).unwrap();
        set.sigs()
            .map(|r| u16::from_be_bytes([r[16], r[17]]))
            .collect()
    };
    assert_eq!(tags(RType::DNSKEY), [ksk_tag]);
    assert_eq!(tags(RType::SOA), [zsk_tag]);
    assert_eq!(s.apex().rrset(RType::DNSKEY).unwrap().rdata_count(), 2);
    let only_zsk = vec![ZoneKey::new(
        SigningKey::generate(Algorithm::Ed25519).unwrap().0,
        KeyRole::Zsk,
    )];
    assert!(sign_zone(&z, &only_zsk, &config(Denial::Nsec), NOW).is_err());
}

/// A rollover step: a ZSK published but not signing yet, a key of a new
/// algorithm signing before it is published, CDS/CDNSKEY signed by the
/// KSK only (RFC 7344 4.1).
#[test]
fn a_rollover_step_publishes_and_signs_as_planned() {
    let cds = "@ IN CDS 1 13 2 0000000000000000000000000000000000000000000000000000000000000000\n";
    let z = zone(&format!("{ZONE}{cds}"), "example.");
    let key = |a| SigningKey::generate(a).unwrap().0;
    let keys = vec![
        ZoneKey::new(key(Algorithm::EcdsaP256Sha256), KeyRole::Ksk),
        ZoneKey::new(key(Algorithm::EcdsaP256Sha256), KeyRole::Zsk),
        ZoneKey::planned(key(Algorithm::EcdsaP256Sha256), KeyRole::Zsk, false, false),
        ZoneKey::unpublished(key(Algorithm::Ed25519), KeyRole::Zsk),
    ];
    let tag = |i: usize| keys[i].tag;
    let s = sign_zone(&z, &keys, &config(Denial::Nsec), NOW)
        .unwrap()
        .zone;
    let tags = |rtype: RType| -> Vec<u16> {
        let set = s.apex().rrset(rtype).unwrap();
        let mut tags: Vec<u16> = set
            .sigs()
            .map(|r| u16::from_be_bytes([r[16], r[17]]))
            .collect();
        tags.sort();
        tags
    };
    let mut zone_signers = vec![tag(1), tag(3)];
    zone_signers.sort();
    assert_eq!(
        tags(RType::SOA),
        zone_signers,
        "the waiting ZSK signs nothing"
    );
    assert_eq!(tags(RType::DNSKEY), [tag(0)]);
    assert_eq!(tags(RType::CDS), [tag(0)], "CDS by the KSK");
    let published: Vec<Vec<u8>> = (s.apex().rrset(RType::DNSKEY).unwrap().rdatas())
        .map(|r| r.to_vec())
        .collect();
    assert_eq!(
        published.len(),
        3,
        "the unpublished key is not in the RRset"
    );
    assert!(!published.contains(&keys[3].dnskey));
    let none_signs = vec![ZoneKey::planned(
        key(Algorithm::EcdsaP256Sha256),
        KeyRole::Csk,
        false,
        true,
    )];
    assert!(sign_zone(&z, &none_signs, &config(Denial::Nsec), NOW).is_err());
}

#[test]
fn signing_again_with_a_deterministic_algorithm_gives_the_same_zone() {
    let z = zone(ZONE, "example.");
    let keys = csk(Algorithm::Ed25519);
    let a = sign_zone(&z, &keys, &config(nsec3(false)), NOW).unwrap();
    let b = sign_zone(&a.zone, &keys, &config(nsec3(false)), NOW).unwrap();
    let dump = |z: &Zone| -> Vec<(Vec<u8>, RType, Vec<Vec<u8>>)> {
        let mut out: Vec<_> = z
            .nodes()
            .flat_map(|n| {
                n.rrsets().map(move |s| {
                    let sigs = s.sigs().map(|r| r.to_vec()).collect();
                    (n.key().to_vec(), s.rtype, sigs)
                })
            })
            .collect();
        out.sort();
        out
    };
    assert_eq!(a.signatures, b.signatures);
    assert_eq!(dump(&a.zone), dump(&b.zone), "re-signing a signed zone");
}

/// A zone of `names` A names, for the spread of its expirations.
fn names_zone(names: usize) -> Zone {
    let mut text = String::from("@ 300 IN SOA ns hm 1 2 3 4 5\n@ 300 IN NS ns\n");
    for i in 0..names {
        text.push_str(&format!("h{i} 300 IN A 192.0.2.1\n"));
    }
    zone(&text, "spread.")
}

/// The expirations of `zone`'s signatures counted by clock hour: (the
/// fullest hour, signatures).
fn fullest_hour(zone: &Zone) -> (usize, usize) {
    let mut per_hour = std::collections::HashMap::<u32, usize>::new();
    for node in zone.nodes() {
        for sig in node.rrsets().flat_map(|r| r.sigs().collect::<Vec<_>>()) {
            let expiration = u32::from_be_bytes(sig[8..12].try_into().unwrap());
            *per_hour.entry(expiration / 3600).or_default() += 1;
        }
    }
    let most = per_hour.values().max().copied().unwrap_or(0);
    (most, per_hour.values().sum())
}

/// Under the default spread, no hour of the window holds more than 1/100
/// of the zone's expirations (the target), and every expiration
/// lies within the window. A hash spread missed it at this size (the
/// fullest of 120 hours is above the mean by chance).
#[test]
fn expirations_spread_so_no_hour_holds_more_than_a_hundredth() {
    let z = names_zone(2_000);
    let c = config(Denial::Nsec);
    let s = sign_zone(&z, &csk(Algorithm::Ed25519), &c, NOW).unwrap();
    let latest = sig_time(NOW + u64::from(c.validity));
    for node in s.zone.nodes() {
        for sig in node.rrsets().flat_map(|r| r.sigs().collect::<Vec<_>>()) {
            let expiration = u32::from_be_bytes(sig[8..12].try_into().unwrap());
            assert!(expiration <= latest && latest - expiration < c.jitter);
        }
    }
    let (most, all) = fullest_hour(&s.zone);
    assert_eq!(all, s.signatures);
    assert!(most * 100 <= all, "{most} of {all} in one hour");
}

/// The server's hourly looks at a signed zone (a signing that keeps what
/// is not due within the refresh period and the hour to the next look),
/// through two rounds of refresh: no look makes more than 1/100 of the
/// zone's signatures.
#[test]
fn refreshes_keep_no_hour_above_a_hundredth() {
    let z = names_zone(1_000);
    let keys = csk(Algorithm::Ed25519);
    let mut c = config(Denial::Nsec);
    let mut served = sign_zone(&z, &keys, &c, NOW).unwrap();
    c.refresh += 3600;
    let first_due = NOW + u64::from(c.validity - c.jitter - c.refresh);
    let mut looks_that_signed = 0;
    for hour in 0..(2 * u64::from(c.jitter) / 3600) {
        let now = first_due - 3600 + hour * 3600;
        if !refresh_due(&served.zone, now, c.refresh, 0) {
            continue;
        }
        let again = sign_zone_after(&z, Some(&served.zone), &keys, &c, now).unwrap();
        let all = again.signatures + again.reused;
        assert!(
            again.signatures * 100 <= all,
            "{} of {all} at {now}",
            again.signatures
        );
        looks_that_signed += 1;
        served = again;
    }
    assert!(looks_that_signed > 200, "{looks_that_signed} looks signed");
}

#[test]
fn signature_times_use_serial_arithmetic() {
    assert_eq!(sig_time(u64::from(u32::MAX) + 11), 10);
    assert_eq!(seconds_until(10, u64::from(u32::MAX) - 9), 20);
    assert_eq!(seconds_until(5, 20), -15);
    assert_eq!(labels_field(&wire(".")), 0);
    assert_eq!(labels_field(&wire("*.")), 0);
    assert_eq!(labels_field(&wire("a.*.b.example.")), 4);
}

#[test]
fn the_rdata_of_listed_types_is_signed_lower_cased() {
    let mut out = Vec::new();
    let mx = [
        &[0u8, 10][..],
        Name::parse("MAIL.Example.").unwrap().as_wire(),
    ]
    .concat();
    let rdatas = [Cow::Borrowed(&mx[..]), Cow::Borrowed(&mx[..])];
    write_canonical_rrset(
        &mut out,
        &wire("example."),
        (RType::MX, 1, 60),
        rdatas.into_iter(),
    );
    let want_rdata = [&[0u8, 10][..], &wire("mail.example.")].concat();
    assert!(out.ends_with(&want_rdata));
    assert_eq!(out.len(), 9 + 10 + want_rdata.len(), "duplicates once");
}

fn many_names(changes: &str, removed: &[usize]) -> String {
    let mut text =
        String::from("@ 300 IN SOA ns hm 1 2 3 4 5\n@ 300 IN NS ns\nns 300 IN A 192.0.2.1\n");
    for i in (0..1000).filter(|i| !removed.contains(i)) {
        let last = if i % 100 == 0 && changes.contains("edit") {
            99
        } else {
            1
        };
        text.push_str(&format!("h{i} 300 IN A 192.0.2.{last}\n"));
        if i % 3 == 0 {
            text.push_str(&format!("h{i} 300 IN TXT \"t{i}\"\n"));
        }
    }
    text.push_str(changes.trim_start_matches("edit"));
    text
}

/// A re-signing of a changed version makes new signatures only for what
/// changed and the chain around it: at most 3N + 10 for N RRsets, and the
/// zone is as fully signed as a signing from scratch.
fn resigns_only_the_change(denial: Denial) {
    let keys = csk(Algorithm::Ed25519);
    let c = config(denial);
    let before = zone(&many_names("", &[]), "inc.");
    let first = sign_zone(&before, &keys, &c, NOW).unwrap();
    // 10 RRsets edited (h0, h100, ... h900), 3 names added, 2 removed
    // (h7, and h9 with its TXT: 3 RRsets): N = 16.
    let added = "new1 300 IN A 192.0.2.5\nnew2 300 IN A 192.0.2.6\nzz 300 IN AAAA ::1\n";
    let after = zone(&many_names(&format!("edit{added}"), &[7, 9]), "inc.");
    let mut c2 = c.clone();
    c2.serial = Some(2);
    let second = sign_zone_after(&after, Some(&first.zone), &keys, &c2, NOW + 60).unwrap();
    let n = 16;
    assert!(
        second.signatures <= 3 * n + 10,
        "{} new signatures for {n} RRsets",
        second.signatures
    );
    let scratch = sign_zone(&after, &keys, &c2, NOW + 60).unwrap();
    assert_eq!(second.signatures + second.reused, scratch.signatures);
    assert!(second.reused > 1000);
    // Nothing changed: only what the new serial changes.
    let third = sign_zone_after(&after, Some(&second.zone), &keys, &c2, NOW + 120).unwrap();
    assert_eq!(third.signatures, 0);
}

#[test]
fn an_nsec_re_signing_signs_only_the_change() {
    resigns_only_the_change(Denial::Nsec);
}

#[test]
fn an_nsec3_re_signing_signs_only_the_change() {
    resigns_only_the_change(nsec3(false));
}

/// Signatures due for refresh are made anew even where nothing changed;
/// those of a key no longer used are not kept.
#[test]
fn due_and_foreign_signatures_are_made_anew() {
    let keys = csk(Algorithm::Ed25519);
    let c = config(Denial::Nsec);
    let z = zone(ZONE, "example.");
    let first = sign_zone(&z, &keys, &c, NOW).unwrap();
    let late = NOW + u64::from(c.validity - c.refresh) + 1;
    let again = sign_zone_after(&z, Some(&first.zone), &keys, &c, late).unwrap();
    assert_eq!(again.reused, 0, "every signature was due");
    let other = csk(Algorithm::Ed25519);
    let rekeyed = sign_zone_after(&z, Some(&first.zone), &other, &c, NOW).unwrap();
    assert_eq!(rekeyed.reused, 0);
    // Expirations lie between validity less jitter and validity.
    let first_due = NOW + u64::from(c.validity - c.jitter - c.refresh);
    assert!(!refresh_due(&first.zone, first_due - 7200, c.refresh, 3600));
    assert!(refresh_due(&first.zone, late, c.refresh, 0));
}

// Incremental signing (`sign_change`) against a whole signing.

fn name(text: &str) -> Name {
    Name::parse(text).unwrap()
}

/// What a change does, as an update's edit makes it.
enum Op {
    Add(&'static str, RType, Vec<u8>),
    /// An RRset deleted, with its signatures.
    DeleteSet(&'static str, RType),
    /// An RRset's records deleted, its signatures left: a change read
    /// from a zone file or an IXFR, which know nothing of the signer's.
    DeleteRecords(&'static str, RType),
}

impl Op {
    /// The same change, RRsets deleted with their signatures.
    fn with_signatures(&self) -> Op {
        match self {
            Op::Add(owner, rtype, rdata) => Op::Add(owner, *rtype, rdata.clone()),
            Op::DeleteSet(owner, rtype) | Op::DeleteRecords(owner, rtype) => {
                Op::DeleteSet(owner, *rtype)
            }
        }
    }
}

/// `zone` with `ops` applied and the serial moved on by one.
fn changed(zone: &Zone, ops: &[Op]) -> Zone {
    let (mut deleted, mut added) = (Vec::new(), Vec::new());
    for op in ops {
        match op {
            Op::Add(owner, rtype, rdata) => added.push(incremental::record(
                name(owner).as_wire(),
                *rtype,
                300,
                rdata.clone(),
            )),
            Op::DeleteSet(owner, rtype) | Op::DeleteRecords(owner, rtype) => {
                let node = zone.node(name(owner).as_wire()).expect("the name");
                let set = node.rrset(*rtype).expect("the RRset");
                for rdata in set.rdatas() {
                    deleted.push(incremental::record(
                        node.owner_wire(),
                        *rtype,
                        set.ttl(),
                        rdata.into(),
                    ));
                }
                let sigs_too = matches!(op, Op::DeleteSet(..));
                for sig in set.sigs().filter(|_| sigs_too) {
                    let sig = incremental::record(
                        node.owner_wire(),
                        RType::RRSIG,
                        set.sig_ttl(),
                        sig.into(),
                    );
                    deleted.push(sig);
                }
            }
        }
    }
    let apex = zone.apex().owner_wire();
    let soa = zone.soa().first_rdata().into_owned();
    let old_soa = incremental::record(apex, RType::SOA, zone.soa().ttl(), soa);
    let next = soa_with_serial(zone, zone.serial() + 1);
    let new_soa = incremental::record(apex, RType::SOA, next.ttl, next.rdatas[0].clone());
    let step = ZoneDiff {
        old_soa,
        new_soa,
        deleted,
        added,
    };
    zone.apply(&step).unwrap()
}

/// Owner, type, TTL, RDATA sorted, signature count.
type Shape = (Vec<u8>, RType, u32, Vec<Vec<u8>>, usize);

/// Every record but the signatures, and which RRsets are signed by
/// how many signatures: what a whole signing and an incremental one
/// must agree on.
fn shape(zone: &Zone) -> Vec<Shape> {
    let mut out = Vec::new();
    for node in zone.nodes() {
        for set in node.rrsets() {
            let mut rdatas: Vec<Vec<u8>> = set.rdatas().map(|r| r.into_owned()).collect();
            rdatas.sort();
            out.push((
                node.key().to_vec(),
                set.rtype,
                set.ttl(),
                rdatas,
                set.sigs().count(),
            ));
        }
    }
    out.sort();
    out
}

fn ds() -> Vec<u8> {
    let mut rdata = vec![0x30, 0x39, 13, 2];
    rdata.extend_from_slice(&[0xAB; 32]);
    rdata
}

/// The changes signed one after the other, each incrementally and as
/// a whole signing of the same version would: the same records, the
/// same RRsets signed.
fn agrees_with_whole_signing(denial: Denial) {
    let keys = csk(Algorithm::EcdsaP256Sha256);
    let config = config(denial);
    let unsigned = heron_zone::load_zone_str(ZONE, "t", &name("example."))
        .unwrap()
        .zone;
    let mut served = sign_zone(&unsigned, &keys, &config, NOW).unwrap().zone;
    let a = |last: u8| vec![192, 0, 2, last];
    let txt = |text: &str| [&[text.len() as u8], text.as_bytes()].concat();
    let batches: Vec<Vec<Op>> = vec![
        vec![Op::Add("new.example.", RType::A, a(9))],
        vec![Op::Add("x.y.z.example.", RType::TXT, txt("deep"))],
        vec![Op::DeleteSet("www.example.", RType::AAAA)],
        vec![Op::DeleteSet("a.b.c.example.", RType::TXT)],
        vec![Op::Add("sub.example.", RType::DS, ds())],
        vec![Op::DeleteSet("secure.example.", RType::DS)],
        vec![Op::Add("example.", RType::TXT, txt("apex"))],
        vec![Op::Add("more.sub.example.", RType::A, a(10))],
        vec![Op::DeleteSet("x.y.z.example.", RType::TXT)],
        vec![Op::Add("*.new2.example.", RType::A, a(11))],
        vec![
            Op::Add("n1.example.", RType::A, a(1)),
            Op::Add("n2.example.", RType::A, a(2)),
            Op::Add("zz.example.", RType::A, a(3)),
            Op::DeleteSet("new.example.", RType::A),
            Op::DeleteSet("ns1.example.", RType::A),
            Op::Add("www.example.", RType::TXT, txt("www")),
        ],
        vec![Op::DeleteSet("zz.example.", RType::A)],
        // As a reload or an IXFR deletes: records only.
        vec![Op::Add("gone.example.", RType::TXT, txt("bye"))],
        vec![Op::DeleteRecords("gone.example.", RType::TXT)],
        vec![Op::DeleteRecords("www.example.", RType::A)],
        vec![Op::DeleteRecords("sub.example.", RType::DS)],
        vec![Op::Add("*.w2.example.", RType::TXT, txt("w"))],
        vec![Op::DeleteRecords("*.w2.example.", RType::TXT)],
    ];
    for (i, ops) in batches.iter().enumerate() {
        let updated = changed(&served, ops);
        let change = diff(&served, &updated);
        let (signed, signer_step) = sign_change(&served, &updated, &change, &keys, &config, NOW)
            .unwrap()
            .unwrap_or_else(|| panic!("batch {i} signed incrementally"));
        // The signer's own step is what it changed (in another order).
        let (mut deleted, mut added) = (signer_step.deleted, signer_step.added);
        deleted.sort();
        added.sort();
        let want = diff(&updated, &signed.zone);
        assert_eq!((deleted, added), (want.deleted, want.added), "batch {i}");
        // The whole signing of the same records: what a file's or an
        // IXFR's change leaves of deleted RRsets (their signatures) is no
        // data of the zone.
        let records_only: Vec<Op> = ops.iter().map(Op::with_signatures).collect();
        let clean = changed(&served, &records_only);
        let whole = sign_zone_after(&clean, Some(&served), &keys, &config, NOW).unwrap();
        assert_eq!(shape(&signed.zone), shape(&whole.zone), "batch {i}");
        assert_eq!(signed.zone.serial(), served.serial() + 1);
        assert!(signed.zone.signed_chain_len() == whole.zone.signed_chain_len());
        served = signed.zone;
    }
    // A delegation added below the apex needs a whole signing.
    let ns = Name::parse("ns1.example.").unwrap().as_wire().to_vec();
    let updated = changed(&served, &[Op::Add("deleg.example.", RType::NS, ns)]);
    let change = diff(&served, &updated);
    let outcome = sign_change(&served, &updated, &change, &keys, &config, NOW).unwrap();
    assert!(outcome.is_none());
}

#[test]
fn an_nsec_change_signs_as_a_whole_signing_would() {
    agrees_with_whole_signing(Denial::Nsec);
}

#[test]
fn an_nsec3_change_signs_as_a_whole_signing_would() {
    agrees_with_whole_signing(Denial::Nsec3 {
        iterations: 0,
        salt: Vec::new(),
        opt_out: false,
    });
    agrees_with_whole_signing(Denial::Nsec3 {
        iterations: 2,
        salt: vec![0xAB, 0xCD],
        opt_out: true,
    });
}

/// Hostile batches, as a client's updates may make them: glue below a
/// cut, a name emptied with a child below it, a CNAME, the chain's last
/// name replaced, a delegation over data already there. Each is signed
/// incrementally as a whole signing would, or left to one (None).
fn hostile_batches_agree(denial: Denial) {
    let keys = csk(Algorithm::EcdsaP256Sha256);
    let config = config(denial);
    let unsigned = zone(ZONE, "example.");
    let mut served = sign_zone(&unsigned, &keys, &config, NOW).unwrap().zone;
    let a = |last: u8| vec![192, 0, 2, last];
    let target = name("www.example.").as_wire().to_vec();
    let batches: Vec<Vec<Op>> = vec![
        vec![Op::Add("ns2.sub.example.", RType::A, a(20))],
        vec![Op::Add("deep.ns.secure.example.", RType::A, a(21))],
        vec![Op::Add("x.www.example.", RType::A, a(22))],
        vec![
            Op::DeleteSet("www.example.", RType::A),
            Op::DeleteSet("www.example.", RType::AAAA),
        ],
        vec![Op::Add("alias.example.", RType::CNAME, target)],
        vec![Op::Add("zzz.example.", RType::A, a(23))],
        vec![
            Op::DeleteSet("zzz.example.", RType::A),
            Op::Add("zzzz.example.", RType::A, a(24)),
        ],
        vec![Op::Add("0.example.", RType::A, a(25))],
        vec![Op::DeleteSet("*.wild.example.", RType::A)],
        vec![Op::DeleteSet("x.www.example.", RType::A)],
        vec![Op::DeleteSet("ns.sub.example.", RType::A)],
        vec![Op::Add("b.c.example.", RType::DS, ds())],
    ];
    for (i, ops) in batches.iter().enumerate() {
        let updated = changed(&served, ops);
        let change = diff(&served, &updated);
        let whole = sign_zone_after(&updated, Some(&served), &keys, &config, NOW).unwrap();
        match sign_change(&served, &updated, &change, &keys, &config, NOW).unwrap() {
            Some((signed, _)) => {
                assert_eq!(shape(&signed.zone), shape(&whole.zone), "batch {i}");
                served = signed.zone;
            }
            None => served = whole.zone,
        }
    }
}

#[test]
fn hostile_changes_sign_as_a_whole_signing_would() {
    hostile_batches_agree(Denial::Nsec);
    hostile_batches_agree(nsec3(false));
    hostile_batches_agree(nsec3(true));
}

/// A name added below an NSEC3's hashed owner makes that owner an empty
/// non-terminal, which needs an NSEC3 of its own (RFC 5155 7.1), as a
/// whole signing gives it: an update of a client could add one.
#[test]
fn a_name_below_a_hashed_owner_gets_its_empty_non_terminal() {
    let keys = csk(Algorithm::EcdsaP256Sha256);
    let config = config(nsec3(false));
    let served = sign_zone(&zone(ZONE, "example."), &keys, &config, NOW)
        .unwrap()
        .zone;
    let hashed = (served.nodes())
        .find(|n| n.rrset(RType::NSEC3).is_some())
        .map(|n| n.owner().to_string())
        .expect("an NSEC3");
    let below: &'static str = Box::leak(format!("x.{hashed}").into_boxed_str());
    let updated = changed(&served, &[Op::Add(below, RType::A, vec![192, 0, 2, 9])]);
    let change = diff(&served, &updated);
    let whole = sign_zone_after(&updated, Some(&served), &keys, &config, NOW).unwrap();
    let (signed, _) = sign_change(&served, &updated, &change, &keys, &config, NOW)
        .unwrap()
        .expect("signed incrementally");
    assert_eq!(shape(&signed.zone), shape(&whole.zone));
    let links = |z: &Zone| z.signed_chain_len().expect("a chain");
    assert_eq!(
        links(&signed.zone),
        links(&served) + 2,
        "the new name and its parent"
    );
}

/// A small zone is cut into enough batches to keep every thread busy to
/// the end; a large one into batches of the full size.
#[test]
fn batches_shrink_for_small_zones_only() {
    let threads = heron_zone::cores();
    assert_eq!(entries_per_batch(0), MIN_ENTRIES_PER_BATCH);
    assert_eq!(entries_per_batch(5), MIN_ENTRIES_PER_BATCH);
    let root_like: usize = 3_000;
    let batches = root_like.div_ceil(entries_per_batch(root_like));
    assert!(
        batches >= threads.min(8) * BATCHES_PER_THREAD / 2,
        "{batches}"
    );
    assert_eq!(entries_per_batch(2_000_000), ENTRIES_PER_BATCH);
}

/// A zone of a few names is signed on the calling thread (starting one
/// cost more than its signatures); a larger one on every core.
#[test]
fn only_zones_worth_a_thread_start_one() {
    assert_eq!(signing_threads(0, 0), 1);
    assert_eq!(signing_threads(5, 2), 1);
    assert_eq!(signing_threads(MIN_ENTRIES_PER_THREAD, 4), 1);
    let cores = heron_zone::cores();
    assert_eq!(signing_threads(3_000, 32), cores.min(32));
    assert_eq!(signing_threads(3_000, 1), 1);
}

/// Every record of a zone: (owner, type, RDATAs, RRSIG RDATAs), sorted.
type Dump = Vec<(Vec<u8>, RType, Vec<Vec<u8>>, Vec<Vec<u8>>)>;

fn dump(z: &Zone) -> Dump {
    let mut out: Dump = (z.nodes())
        .flat_map(|n| {
            n.rrsets().map(move |s| {
                let rdatas = s.rdatas().map(|r| r.to_vec()).collect();
                let sigs = s.sigs().map(|r| r.to_vec()).collect();
                (n.key().to_vec(), s.rtype, rdatas, sigs)
            })
        })
        .collect();
    out.sort();
    out
}

/// With two threads, the other thread signs while this one fills the
/// builder, and its batches wait beside it: every one of them must reach
/// the signed zone. Ed25519 signs deterministically, so the zone must be
/// the one a single thread makes, signature for signature.
#[test]
fn batches_signed_while_the_builder_fills_all_reach_the_zone() {
    let z = zone(&many_names("", &[]), "example.");
    let keys = csk(Algorithm::Ed25519);
    let (cfg, source) = (config(Denial::Nsec), (None, &keys[..]));
    let one_thread: RunBatches = &|work, fill| work.sign_on(1, fill);
    let (alone, made, _) = sign_into_builder_by(&z, source, &cfg, NOW, one_thread).unwrap();
    let waits: RunBatches = &|work, fill| {
        work.sign_on(2, &mut |builder| {
            // Not a timing bound: the wait only ends a test that would
            // otherwise hang if the other thread never ran.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            while work.next.load(Ordering::Relaxed) < 4 && std::time::Instant::now() < deadline {
                std::thread::yield_now();
            }
            assert!(
                work.next.load(Ordering::Relaxed) >= 4,
                "the other thread signed"
            );
            fill(builder)
        })
    };
    let (beside, made_beside, _) = sign_into_builder_by(&z, source, &cfg, NOW, waits).unwrap();
    assert!(made > 1000, "{made}");
    assert_eq!(made_beside, made);
    let build = |b: ZoneBuilder| build(b, 0, 0).unwrap().zone;
    assert_eq!(dump(&build(beside)), dump(&build(alone)));
}

/// The lines of a built signed zone, sorted.
fn built_lines(z: &Zone) -> Vec<String> {
    let mut text = Vec::new();
    let mut lines = heron_zone::zone::LineWriter::new();
    for node in z.nodes_in_canonical_order() {
        lines.node(&mut text, &node, &|_| false);
    }
    let mut lines: Vec<String> = String::from_utf8(text)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    lines.sort();
    lines
}

/// With [`ZONE`]'s delegations (one secure), glue, empty non-terminals
/// and wildcard: names occluded by a DNAME, and DNSSEC records of the
/// zone's own for the signer to replace.
const TEXT_ZONE_MORE: &str = "\
@ IN DNSKEY 257 3 13 K8R8JhlBUolrX0m0QdIAwp60umFcuNNuVVuzRbDcoBCa74pGzwfgj9IYAdYGgidUEPjoYtPek5slxUq8Sjj3lg==
@ IN NSEC www.example. SOA NS RRSIG NSEC DNSKEY
moved IN DNAME elsewhere.example.
x.moved IN A 192.0.2.6
";

fn text_zone() -> Zone {
    zone(&format!("{ZONE}{TEXT_ZONE_MORE}"), "example.")
}

/// Signing to text writes the lines of the zone `sign_zone` builds, for
/// every kind of denial and with the SOA replaced (Ed25519 signs the
/// same bytes to the same signature, so the lines are equal).
#[test]
fn the_text_signed_is_the_zone_signed_line_for_line() {
    let z = text_zone();
    let keys = csk(Algorithm::Ed25519);
    for denial in [Denial::Nsec, nsec3(false), nsec3(true)] {
        for serial in [None, Some(8)] {
            let cfg = SignConfig {
                serial,
                ..config(denial.clone())
            };
            let built = sign_zone(&z, &keys, &cfg, NOW).unwrap();
            let mut out = Vec::new();
            let written = sign_zone_to_text(&z, &keys, &cfg, NOW, &mut out).unwrap();
            let mut lines: Vec<String> = String::from_utf8(out)
                .unwrap()
                .lines()
                .map(String::from)
                .collect();
            lines.sort();
            assert_eq!(
                lines,
                built_lines(&built.zone),
                "{denial:?} serial {serial:?}"
            );
            assert_eq!(written.records, built.zone.record_count());
            assert_eq!(written.signatures, built.signatures);
            assert!(
                lines.iter().all(|l| !l.contains("K8R8JhlBUolrX0m0")),
                "the zone's own DNSKEY replaced"
            );
        }
    }
}

/// A zone signed in many batches on two threads: every line is written
/// once, and every name's lines come in canonical order (the NSEC3 chain
/// after them), whichever thread signed it.
#[test]
fn a_zone_signed_to_text_in_many_batches_comes_out_whole_and_in_order() {
    let mut text =
        String::from("$ORIGIN big.\n$TTL 300\n@ SOA ns hm 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n");
    for i in 0..3000 {
        match i % 10 {
            9 => text.push_str(&format!("d{i} NS ns.d{i}\nns.d{i} A 198.51.100.1\n")),
            _ => text.push_str(&format!("h{i} A 192.0.2.2\nh{i} TXT \"t{i}\"\n")),
        }
    }
    let z = zone(&text, "big.");
    let keys = csk(Algorithm::Ed25519);
    for denial in [Denial::Nsec, nsec3(false)] {
        let cfg = config(denial.clone());
        let entries = plan(&z).len();
        let batches = entries.div_ceil(entries_per_batch(entries));
        assert!(batches > 8, "{batches} batches");
        let mut out = Vec::new();
        text::sign_to_text_with(|| Ok(&z), (&keys, &cfg, NOW), &mut out, 1).unwrap();
        let out = String::from_utf8(out).unwrap();
        let fields = |l: &str| l.split(' ').map(String::from).collect::<Vec<_>>();
        let is_chain = |f: &[String]| f[3] == "NSEC3" || (f[3] == "RRSIG" && f[4] == "NSEC3");
        let (names, chain): (Vec<Vec<String>>, Vec<Vec<String>>) =
            out.lines().map(fields).partition(|f| !is_chain(f));
        let chain_starts = out.lines().position(|l| is_chain(&fields(l)));
        assert_eq!(
            chain_starts.unwrap_or(names.len()),
            names.len(),
            "the chain comes last"
        );
        assert_eq!(chain.is_empty(), denial == Denial::Nsec);
        let owners: Vec<Name> = names.iter().map(|f| Name::parse(&f[0]).unwrap()).collect();
        let in_order = (owners.windows(2))
            .all(|w| heron_proto::name::canonical_cmp(w[0].as_wire(), w[1].as_wire()).is_le());
        assert!(in_order, "{denial:?}: names out of canonical order");
        let mut lines: Vec<&str> = out.lines().collect();
        lines.sort();
        let built = sign_zone(&z, &keys, &cfg, NOW).unwrap();
        assert_eq!(lines, built_lines(&built.zone), "{denial:?}");
    }
}

/// Signing a zone as it loads writes what signing it loaded writes; a
/// load that fails is the error, nothing written.
#[test]
fn a_zone_signed_as_it_loads_is_written_as_if_loaded_first() {
    let keys = csk(Algorithm::Ed25519);
    let cfg = config(Denial::Nsec);
    let mut before = Vec::new();
    sign_zone_to_text(&text_zone(), &keys, &cfg, NOW, &mut before).unwrap();
    let mut out = Vec::new();
    let written = load_and_sign_to_text(|| Ok(text_zone()), &keys, &cfg, NOW, &mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        String::from_utf8(before).unwrap()
    );
    assert_eq!(
        written.records,
        sign_zone(&text_zone(), &keys, &cfg, NOW)
            .unwrap()
            .zone
            .record_count()
    );
    let mut out = Vec::new();
    let failed = || Err(SignError("z.zone:3: bad TTL".into()));
    let e = load_and_sign_to_text(failed, &keys, &cfg, NOW, &mut out).unwrap_err();
    assert_eq!(e.0, "z.zone:3: bad TTL");
    assert!(out.is_empty());
}

/// A writer that fails: the signing stops with the error, no panic.
#[test]
fn a_signed_zone_that_cannot_be_written_is_an_error() {
    struct Full;
    impl std::io::Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("no room"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let z = text_zone();
    let keys = csk(Algorithm::EcdsaP256Sha256);
    let e = sign_zone_to_text(&z, &keys, &config(Denial::Nsec), NOW, &mut Full).unwrap_err();
    assert!(e.0.contains("no room"), "{}", e.0);
}
