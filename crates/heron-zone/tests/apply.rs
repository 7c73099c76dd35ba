//! Applying a change to a zone (`Zone::apply`): the result must answer
//! exactly as the same zone loaded whole, share what the change did not
//! touch, and refuse changes that break the zone.

mod common;

use common::*;
use heron_proto::{Name, RType};
use heron_zone::Zone;
use heron_zone::diff::{DiffRecord, ZoneDiff, diff};

#[test]
fn applying_the_diff_answers_like_the_zone_loaded_whole() {
    let names = universe();
    let questions = questions(&names);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut checked = 0;
    for round in 0..60 {
        let (before_lines, after_lines) = random_lines_and_edit(&mut rng, &names);
        let before = load(1, &before_lines).unwrap();
        // Keep the edit only if it loads.
        let Ok(after) = load(2, &after_lines) else {
            continue;
        };
        let change = diff(&before, &after);
        let applied = before
            .apply(&change)
            .unwrap_or_else(|p| panic!("round {round}: {p:?}\n{change:?}"));
        let context = format!("round {round}\nbefore: {before_lines:?}\nafter: {after_lines:?}");
        assert_same_zone(applied, after, &questions, &context);
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

/// A zone grown by changes from a few records (one shard) is built again
/// with more shards as it grows (20,000 records: 64 shards): a later
/// one-name change copies two of them, not all of it (black-box finding: a zone grown by UPDATE
/// to 240,000 records copied all of them at each update).
#[test]
fn a_zone_grown_by_changes_is_resharded_as_it_grows() {
    let mut grown = zone(1, &["www A 192.0.2.1"]);
    let mut lines = vec!["www A 192.0.2.1".to_string()];
    for step in 0..40 {
        let added: Vec<DiffRecord> = (0..500)
            .map(|i| {
                let n = step * 500 + i;
                lines.push(format!("g{n} A 10.0.{}.{}", n >> 8, n & 255));
                record(
                    &format!("g{n}.p.test"),
                    RType::A,
                    &[10, 0, (n >> 8) as u8, n as u8],
                )
            })
            .collect();
        grown = grown.apply(&change(&grown, Vec::new(), added)).unwrap();
    }
    let one = vec![record("last.p.test", RType::A, &[10, 9, 9, 9])];
    let next = grown.apply(&change(&grown, Vec::new(), one)).unwrap();
    let copied = next.unshared_bytes(&grown);
    assert!(
        copied * 8 < next.heap_bytes(),
        "{copied} of {} bytes copied for one name",
        next.heap_bytes()
    );
    lines.push("last A 10.9.9.9".into());
    let loaded = load(next.serial(), &lines).unwrap();
    assert!(
        diff(&next, &loaded).is_empty(),
        "{:?}",
        diff(&next, &loaded)
    );
    assert!(next.node(&lower("g19999.p.test")).is_some());
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

/// Records added that the zone holds already change nothing and are
/// counted, so that the secondary can say its primary sent them; one
/// added twice counts once more.
#[test]
fn records_added_that_are_there_already_are_counted() {
    let z = zone(1, &["www A 192.0.2.2"]);
    let held = record("www.p.test", RType::A, &[192, 0, 2, 2]);
    let fresh = record("www.p.test", RType::A, &[192, 0, 2, 3]);
    let step = change(&z, vec![], vec![held, fresh.clone(), fresh]);
    let (next, already_present) = z.apply_counting(&step).unwrap();
    assert_eq!(already_present, 2);
    assert_eq!(next.record_count(), z.record_count() + 1);
    assert_eq!(next.serial(), 2);
    let (_, none) = z.apply_counting(&change(&z, vec![], vec![])).unwrap();
    assert_eq!(none, 0);
}

#[test]
fn a_dname_added_at_the_apex_takes_effect_and_goes_with_its_removal() {
    let before = zone(1, &["www A 192.0.2.1"]);
    let dname = record(
        ORIGIN,
        RType::DNAME,
        Name::parse("example.net").unwrap().as_wire(),
    );
    // Below an apex DNAME the zone's own name server could not be
    // reached: refused, as BIND, NSD and Knot refuse it.
    let refused = before.apply(&change(&before, vec![], vec![dname.clone()]));
    assert!(format!("{:?}", refused.err()).contains("below the apex DNAME"));
    // With its name server elsewhere the DNAME takes effect.
    let ns = |target: &str| record(ORIGIN, RType::NS, Name::parse(target).unwrap().as_wire());
    let moved = vec![ns("ns.example.org"), dname.clone()];
    let with = (before.apply(&change(&before, vec![ns("ns.p.test")], moved))).unwrap();
    assert!(with.apex_has_dname());
    assert!(!before.apex_has_dname());
    let without = with.apply(&change(&with, vec![dname], vec![])).unwrap();
    assert!(!without.apex_has_dname());
}

#[test]
fn a_wildcard_added_to_a_zone_without_one_answers_at_once() {
    // A zone with no wildcard skips the wildcard lookup for names that do
    // not exist; a change that adds one must turn that lookup back on.
    let z = zone(1, &["a A 192.0.2.1"]);
    assert!(!z.may_have_wildcards());
    let before = zone(1, &["a A 192.0.2.1"]);
    assert!(ask(before, "nx.p.test", RType::A).starts_with("rcode 3"));
    let added = z
        .apply(&change(
            &z,
            vec![],
            vec![record("*.p.test", RType::A, &[192, 0, 2, 8])],
        ))
        .unwrap();
    assert!(added.may_have_wildcards());
    let answer = ask(added, "nx.p.test", RType::A);
    assert!(answer.starts_with("rcode 0"), "{answer}");
    assert!(answer.contains("192.0.2.8"), "{answer}");
}

/// Steps made one after the other (each from the zone the one before
/// left) and applied together answer as the last zone loaded whole, as
/// applying them one by one does.
#[test]
fn steps_applied_together_answer_like_the_last_zone_loaded_whole() {
    let names = universe();
    let questions = questions(&names);
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut checked = 0;
    for round in 0..60 {
        let count = 4 + rng.below(20);
        let mut lines = random_lines(&mut rng, &names, count);
        let Ok(first) = load(1, &lines) else {
            continue;
        };
        let mut zones = vec![first];
        for serial in 2..2 + rng.below(6) as u32 {
            let mut next_lines = lines.clone();
            edit(&mut rng, &names, &mut next_lines);
            if let Ok(next) = load(serial, &next_lines) {
                zones.push(next);
                lines = next_lines;
            }
        }
        if zones.len() < 2 {
            continue;
        }
        let steps: Vec<ZoneDiff> = zones.windows(2).map(|w| diff(&w[0], &w[1])).collect();
        let applied = zones[0]
            .apply_steps(&steps)
            .unwrap_or_else(|p| panic!("round {round}: {p:?}\n{steps:?}"));
        let last = zones.pop().unwrap();
        assert_same_zone(
            applied,
            last,
            &questions,
            &format!("round {round}: {lines:?}"),
        );
        checked += 1;
    }
    assert!(checked > 30, "only {checked} rounds had valid edits");
}

/// A step that breaks the zone is named by its index even when a later
/// step would mend it: each step's zone must be sound, as each would be
/// served and journaled.
#[test]
fn a_step_that_breaks_the_zone_is_named_even_if_a_later_one_mends_it() {
    let z = zone(1, &["www A 192.0.2.2", "d DNAME x.test."]);
    let target = Name::parse("y.test").unwrap();
    let second_dname = record("d.p.test", RType::DNAME, target.as_wire());
    let s1 = change(
        &z,
        vec![],
        vec![record("a.p.test", RType::A, &[192, 0, 2, 3])],
    );
    let s1_zone = z.apply(&s1).unwrap();
    let s2 = change(&s1_zone, vec![], vec![second_dname.clone()]);
    // Applied alone, s2 breaks; so s3 (which takes it out again) must
    // not hide it.
    let mut s3 = change(&s1_zone, vec![second_dname], vec![]);
    s3.old_soa = s2.new_soa.clone();
    let mut later_soa = s2.new_soa.rdata.clone();
    let at = later_soa.len() - 20;
    later_soa[at..at + 4].copy_from_slice(&4u32.to_be_bytes());
    s3.new_soa.rdata = later_soa;
    let (at, problems) = z.apply_steps(&[s1.clone(), s2, s3]).unwrap_err();
    assert_eq!(at, 1, "{problems:?}");
    assert!(
        problems[0].message.contains("more than one DNAME"),
        "{problems:?}"
    );
    // A step that does not start where the one before ended is named too.
    let (at, problems) = z.apply_steps(&[s1.clone(), s1]).unwrap_err();
    assert_eq!(at, 1);
    assert!(
        problems[0].message.contains("starts from serial 1"),
        "{problems:?}"
    );
}

/// The 64 KiB bound holds for each step's zone: an RRset (and the
/// additional section of the MX that points at it) grown too large in
/// one step is named though a later step takes the records away.
#[test]
fn a_step_that_grows_an_rrset_too_far_is_named() {
    // 1,000 AAAA records at one name: about 28 KiB, in its own node and
    // in the MX's additional section.
    let mut lines: Vec<String> = (0..1000)
        .map(|i| format!("mail AAAA 2001:db8::{:x}", i))
        .collect();
    lines.push("@ MX 10 mail".to_string());
    let z = load(1, &lines).unwrap();
    let more: Vec<DiffRecord> = (1000..2400)
        .map(|i: u32| {
            let mut rdata = vec![0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0];
            rdata.extend_from_slice(&i.to_be_bytes());
            record("mail.p.test", RType::AAAA, &rdata)
        })
        .collect();
    let grow = change(&z, vec![], more.clone());
    assert!(z.apply(&grow).is_err(), "the grown set alone is too large");
    let mut shrink = change(&z, more, vec![]);
    shrink.old_soa = grow.new_soa.clone();
    let mut later = grow.new_soa.rdata.clone();
    let at = later.len() - 20;
    later[at..at + 4].copy_from_slice(&3u32.to_be_bytes());
    shrink.new_soa.rdata = later;
    let (at, _) = z.apply_steps(&[grow, shrink]).unwrap_err();
    assert_eq!(at, 0);
}
