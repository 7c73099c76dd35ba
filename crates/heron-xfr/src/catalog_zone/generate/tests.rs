use heron_proto::RType;
use heron_zone::diff::diff as zone_diff;

use super::*;
use heron_zone::load_zone_str;

fn n(text: &str) -> Name {
    Name::parse(text).unwrap()
}

fn want(zone: &str, group: Option<&str>) -> Wanted {
    Wanted {
        zone: n(zone),
        group: group.map(str::to_string),
        generation: 0,
    }
}

const NOW: u32 = 1_800_000_000;

fn catalog() -> Name {
    n("catalog.invalid")
}

/// A new version of the catalog listing `wanted` after `current`.
fn new_version(wanted: &[Wanted], current: Option<&Zone>) -> Zone {
    match generate(&catalog(), wanted, current, NOW) {
        Generated::New { zone, .. } => zone,
        Generated::Unchanged => panic!("expected a new version"),
    }
}

#[test]
fn a_generated_catalog_reads_back_as_its_members() {
    let wanted = [want("a.test", None), want("B.test", Some("gold"))];
    let zone = new_version(&wanted, None);
    let members = parse_zone(&zone).expect("RFC 9432 valid");
    let listed: Vec<(String, Option<&str>)> = members
        .values()
        .map(|m| (m.zone.to_string(), m.group()))
        .collect();
    assert_eq!(
        listed,
        [("a.test.".into(), None), ("B.test.".into(), Some("gold"))]
    );
    assert_eq!(zone.serial(), NOW, "a first version is dated");
    let version = n("version.catalog.invalid");
    let node = zone.node(version.as_wire()).expect("version node");
    assert!(node.data().any(|rrset| rrset.rtype == RType::TXT));
}

#[test]
fn unique_ids_depend_on_the_name_alone_not_its_case_or_the_order() {
    let one = members(&[want("a.test", None), want("b.test", None)]);
    let other = members(&[want("B.TEST", Some("x")), want("a.test", None)]);
    let id = |m: &Members, z: &str| m[&n(z)].id.clone();
    assert_eq!(id(&one, "a.test"), id(&other, "a.test"));
    assert_eq!(id(&one, "b.test"), id(&other, "b.test"));
    assert_ne!(id(&one, "a.test"), id(&one, "b.test"));
    assert_eq!(id(&one, "a.test").len(), 16, "64 bits in hex");
    // Fixed across releases: a consumer must see the same IDs after an
    // upgrade (SHA-256 of the lower-cased wire name, first 8 octets, as
    // Python's hashlib.sha256(b'\x07example\x03com\x00') gives).
    assert_eq!(unique_id(&n("example.com"), 0, 0), b"902e9c464fa43fca");
}

#[test]
fn a_new_generation_is_a_new_unique_id() {
    let before = members(&[want("a.test", None)]);
    let mut reset = want("a.test", None);
    reset.generation = 1;
    let after = members(&[reset]);
    assert_ne!(before[&n("a.test")].id, after[&n("a.test")].id);
    assert_eq!(
        super::super::diff(&before, &after),
        [super::super::Change::Reset(after[&n("a.test")].clone())],
        "a consumer sees a reset"
    );
}

#[test]
fn a_zone_listed_twice_is_one_member() {
    let members = members(&[want("a.test", Some("x")), want("A.test", None)]);
    assert_eq!(members.len(), 1);
}

#[test]
fn the_same_members_keep_the_version_served() {
    let wanted = [want("a.test", None), want("b.test", Some("g"))];
    let zone = new_version(&wanted, None);
    let reordered = [want("b.test", Some("g")), want("a.test", None)];
    assert!(matches!(
        generate(&catalog(), &reordered, Some(&zone), NOW + 5),
        Generated::Unchanged
    ));
}

#[test]
fn a_change_bumps_the_serial_and_diffs_as_an_ixfr_step() {
    let first = new_version(&[want("a.test", None), want("b.test", None)], None);
    let second = new_version(
        &[want("a.test", Some("gold")), want("c.test", None)],
        Some(&first),
    );
    assert_eq!(second.serial(), NOW + 1, "same second: one more");
    let step = zone_diff(&first, &second);
    let owners = |records: &[heron_zone::diff::DiffRecord]| -> Vec<(String, RType)> {
        records
            .iter()
            .map(|r| (r.owner.to_string(), r.rtype))
            .collect()
    };
    let id = |zone: &str| String::from_utf8(unique_id(&n(zone), 0, 0)).unwrap();
    assert_eq!(
        owners(&step.deleted),
        [(
            format!("{}.zones.catalog.invalid.", id("b.test")),
            RType::PTR
        )]
    );
    let mut added = owners(&step.added);
    added.sort();
    let mut expected = vec![
        (
            format!("{}.zones.catalog.invalid.", id("c.test")),
            RType::PTR,
        ),
        (
            format!("group.{}.zones.catalog.invalid.", id("a.test")),
            RType::TXT,
        ),
    ];
    expected.sort();
    assert_eq!(added, expected);
    // The step takes a consumer from the first version to the second.
    let applied = first.apply(&step).expect("the step applies");
    assert_eq!(parse_zone(&applied), parse_zone(&second));
}

#[test]
fn serials_move_forward_by_the_clock_or_by_one() {
    assert_eq!(next_serial(None, NOW), NOW);
    assert_eq!(next_serial(Some(NOW - 10), NOW), NOW);
    assert_eq!(next_serial(Some(NOW), NOW), NOW + 1);
    assert_eq!(next_serial(Some(NOW + 100), NOW), NOW + 101);
    assert_eq!(next_serial(Some(u32::MAX), 5), 5, "past the wrap");
    assert_eq!(next_serial(Some(u32::MAX), u32::MAX), 0);
}

#[test]
fn groups_are_quoted_whatever_they_hold() {
    let odd = "a \"b\" \\ c\u{e9};";
    let long = "g".repeat(MAX_GROUP_LEN);
    let zone = new_version(
        &[want("a.test", Some(odd)), want("b.test", Some(&long))],
        None,
    );
    let members = parse_zone(&zone).unwrap();
    assert_eq!(members[&n("a.test")].group(), Some(odd));
    assert_eq!(members[&n("b.test")].group(), Some(long.as_str()));
}

#[test]
fn a_catalog_name_needs_room_for_its_member_owners() {
    assert!(has_room(&catalog()));
    // 253 octets of text: no room for group.<id>.zones in front.
    let label = "a".repeat(61);
    let long = n(&format!("{label}.{label}.{label}.{label}"));
    assert!(!has_room(&long));
    // The longest that fits: 255 - 1 (root) - 6 (group) - 17 (id) - 6 (zones).
    let fits = 255 - 1 - 6 - 17 - 6;
    let text = |len: usize| {
        let mut labels = Vec::new();
        let mut left = len;
        while left > 0 {
            let take = left.min(64);
            labels.push("b".repeat(take - 1));
            left -= take;
        }
        n(&labels.join("."))
    };
    assert_eq!(text(fits).wire_len(), fits + 1);
    assert!(has_room(&text(fits)));
    assert!(!has_room(&text(fits + 2)));
}

/// The version a catalog with no history would get: built from its text.
fn built_whole(wanted: &[Wanted], serial: u32) -> Zone {
    let text = zone_text(&catalog(), serial, &members(wanted));
    load_zone_str(&text, "whole", &catalog()).unwrap().zone
}

/// What the steps below edit.
type Wants = Vec<Wanted>;

#[test]
fn a_new_version_is_the_served_one_changed_and_equals_one_built_whole() {
    // Enough members for many shards (a shard holds about 1,024 records).
    let mut wanted: Vec<Wanted> = (0..10_000)
        .map(|i| want(&format!("z{i}.test"), (i % 3 == 0).then_some("gold")))
        .collect();
    let mut zone = new_version(&wanted, None);
    let steps: [&dyn Fn(&mut Wants); 4] = [
        &|w| w.push(want("new.test", Some("blue"))),
        &|w| w.retain(|m| m.zone != n("z5.test")),
        &|w| {
            w[0].group = None;
            w[1].group = Some("gold".into());
            w[3].group = Some("red".into());
        },
        &|w| w[2].generation = 7,
    ];
    for step in steps {
        step(&mut wanted);
        let next = new_version(&wanted, Some(&zone));
        assert!(
            zone_diff(&next, &built_whole(&wanted, next.serial())).is_empty(),
            "the changed version holds what a whole build does"
        );
        assert!(
            next.unshared_bytes(&zone) * 2 < next.heap_bytes(),
            "most of the zone is shared with the version before (a few members touch a few shards)"
        );
        zone = next;
    }
}
