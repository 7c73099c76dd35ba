use heron_zone::load_zone_str;

use super::*;

fn n(text: &str) -> Name {
    Name::parse(text).unwrap()
}

const CATALOG: &str = "cat.test";

/// A catalog zone `cat.test` with `body` after its SOA and NS, and
/// `version` as its version TXT (none if empty).
fn catalog_with_version(version: &str, body: &str) -> Result<Members, Vec<Problem>> {
    let text = format!(
        "$ORIGIN cat.test.\n$TTL 0\n@ SOA invalid. invalid. 1 3600 600 86400 0\n\
         @ NS invalid.\n{version}\n{body}"
    );
    let zone = load_zone_str(&text, "cat", &n(CATALOG)).unwrap().zone;
    parse_zone(&zone)
}

fn catalog(body: &str) -> Result<Members, Vec<Problem>> {
    catalog_with_version("version TXT \"2\"", body)
}

fn zones(members: &Members) -> Vec<String> {
    members.values().map(|m| m.zone.to_string()).collect()
}

#[test]
fn members_come_from_ptrs_below_zones_with_their_ids() {
    let members = catalog(
        "a1.zones PTR Example.COM.\nb2.zones PTR example.net.\n\
         nothing.else A 192.0.2.1\n",
    )
    .unwrap();
    assert_eq!(zones(&members), ["Example.COM.", "example.net."]);
    let com = &members[&n("example.com")];
    assert_eq!((&*com.id, com.group(), com.coo()), (&b"a1"[..], None, None));
}

#[test]
fn an_empty_catalog_has_no_members() {
    assert!(catalog("").unwrap().is_empty());
}

#[test]
fn group_and_coo_properties_belong_to_their_member() {
    let members = catalog(
        "a1.zones PTR one.test.\ngroup.a1.zones TXT \"gold\"\n\
         coo.a1.zones PTR other-cat.test.\nb2.zones PTR two.test.\n",
    )
    .unwrap();
    let one = &members[&n("one.test")];
    assert_eq!(one.group(), Some("gold"));
    assert_eq!(one.coo(), Some(&n("other-cat.test")));
    let two = &members[&n("two.test")];
    assert_eq!((two.group(), two.coo()), (None, None));
}

#[test]
fn unknown_properties_and_ext_records_are_ignored() {
    let members = catalog(
        "a1.zones PTR one.test.\nserial.a1.zones TXT \"7\"\n\
         x.ext.a1.zones TXT \"custom\"\next TXT \"catalog-wide\"\nzones TXT \"odd\"\n",
    )
    .unwrap();
    assert_eq!(zones(&members), ["one.test."]);
}

#[test]
fn a_catalog_without_version_2_is_rejected() {
    let owner = n("version.cat.test");
    for (version, found) in [
        ("", None),
        ("version TXT \"1\"", Some("1".to_string())),
        ("version TXT \"2\" \"2\"", None),
        ("version TXT \"2\"\nversion TXT \"1\"", None),
        ("version A 192.0.2.2", None),
    ] {
        let problems = catalog_with_version(version, "a1.zones PTR one.test.\n").unwrap_err();
        let want = Problem::Version {
            owner: owner.clone(),
            found,
        };
        assert_eq!(problems, [want], "{version}");
    }
    let message = catalog_with_version("version TXT \"1\"", "").unwrap_err()[0].to_string();
    assert_eq!(
        message,
        "version.cat.test. TXT \"1\": only version \"2\" is understood"
    );
}

#[test]
fn a_zone_listed_twice_rejects_the_catalog_naming_both_records() {
    let problems =
        catalog("a1.zones PTR one.test.\nb2.zones PTR ONE.test.\nc3.zones PTR two.test.\n")
            .unwrap_err();
    assert_eq!(
        problems,
        [Problem::Duplicate {
            zone: n("ONE.test"),
            owners: [n("a1.zones.cat.test"), n("b2.zones.cat.test")],
        }]
    );
    assert_eq!(
        problems[0].to_string(),
        "b2.zones.cat.test. PTR ONE.test.: the zone is already a member as a1.zones.cat.test."
    );
}

#[test]
fn a_member_node_with_two_ptrs_rejects_the_catalog() {
    let problems = catalog("a1.zones PTR one.test.\na1.zones PTR two.test.\n").unwrap_err();
    assert_eq!(
        problems,
        [Problem::MemberPtr {
            owner: n("a1.zones.cat.test"),
            count: 2
        }]
    );
}

#[test]
fn a_catalog_listing_itself_is_rejected() {
    let problems = catalog("a1.zones PTR cat.test.\n").unwrap_err();
    assert_eq!(
        problems,
        [Problem::ItselfAMember {
            owner: n("a1.zones.cat.test")
        }]
    );
}

#[test]
fn malformed_properties_reject_the_catalog() {
    for (body, owner) in [
        ("group.a1.zones TXT \"a\" \"b\"", "group.a1.zones.cat.test"),
        (
            "group.a1.zones TXT \"a\"\ngroup.a1.zones TXT \"b\"",
            "group.a1.zones.cat.test",
        ),
        (
            "coo.a1.zones PTR x.test.\ncoo.a1.zones PTR y.test.",
            "coo.a1.zones.cat.test",
        ),
        // Handed to the catalog that lists it: ceded to nobody, so after
        // a restart the zone was refused for good.
        ("coo.a1.zones PTR CAT.test.", "coo.a1.zones.cat.test"),
    ] {
        let problems = catalog(&format!("a1.zones PTR one.test.\n{body}\n")).unwrap_err();
        assert_eq!(problems.len(), 1, "{body}");
        assert!(
            matches!(&problems[0], Problem::Property { owner: o, .. } if *o == n(owner)),
            "{body}: {problems:?}"
        );
    }
}

#[test]
fn raw_records_that_are_not_names_or_strings_are_problems_not_panics() {
    let catalog = n(CATALOG);
    let version = n("version.cat.test");
    let member = n("a1.zones.cat.test");
    let group = n("group.a1.zones.cat.test");
    let coo = n("coo.a1.zones.cat.test");
    let cases: [(&[Record], &str); 4] = [
        (&[(&version, RType::TXT, b"\x05two")], "short string"),
        (
            &[
                (&version, RType::TXT, b"\x012"),
                (&member, RType::PTR, b"\x09bad"),
            ],
            "bad PTR",
        ),
        (
            &[
                (&version, RType::TXT, b"\x012"),
                (&member, RType::PTR, b"\x03one\x04test\x00"),
                (&group, RType::TXT, b""),
            ],
            "empty TXT",
        ),
        (
            &[
                (&version, RType::TXT, b"\x012"),
                (&member, RType::PTR, b"\x03one\x04test\x00"),
                (&coo, RType::PTR, b"\xff"),
            ],
            "bad coo",
        ),
    ];
    for (records, case) in cases {
        assert!(parse(&catalog, records.iter().copied()).is_err(), "{case}");
    }
}

fn member(zone: &str, id: &str, group: Option<&str>) -> Member {
    Member::new(n(zone), id.as_bytes().into(), group.map(Box::from), None)
}

fn members(list: &[Member]) -> Members {
    list.iter()
        .map(|m| (m.zone.to_lowercase(), m.clone()))
        .collect()
}

#[test]
fn members_configured_by_hand_kept_over_a_file_in_use_or_without_a_template_are_problems() {
    let list = members(&[
        member("hand.test", "a", None),
        member("gold.test", "b", Some("gold")),
        member("lead.test", "c", Some("lead")),
        member("plain.test", "d", None),
        member("victim.test", "e", None),
    ]);
    let in_use = |m: &Member| (m.zone == n("victim.test")).then(|| "/m/victim.test.zone".into());
    let problems = check(
        &n(CATALOG),
        list.values(),
        |zone| zone.eq(&n("hand.test")),
        in_use,
        |group| matches!(group, None | Some("gold")),
    );
    assert_eq!(
        problems,
        [
            Problem::ConfiguredByHand {
                zone: n("hand.test"),
                owner: n("a.zones.cat.test")
            },
            Problem::NoTemplate {
                zone: n("lead.test"),
                owner: n("c.zones.cat.test"),
                group: Some("lead".into())
            },
            Problem::FileInUse {
                zone: n("victim.test"),
                owner: n("e.zones.cat.test"),
                file: "/m/victim.test.zone".into()
            },
        ]
    );
    assert_eq!(
        problems[2].to_string(),
        "e.zones.cat.test. PTR victim.test.: its kept file /m/victim.test.zone is used by \
         the configuration for something else"
    );
    assert_eq!(
        problems[1].to_string(),
        "c.zones.cat.test. PTR lead.test.: no member template for group \"lead\""
    );
}

#[test]
fn the_diff_says_added_removed_reset_and_regrouped() {
    let old = members(&[
        member("kept.test", "k", None),
        member("gone.test", "g", None),
        member("reset.test", "r1", None),
        member("moved.test", "m", Some("a")),
        member("handed.test", "h", None),
    ]);
    let handed = Member::new(
        n("handed.test"),
        b"h"[..].into(),
        None,
        Some(n("other.test")),
    );
    let mut new = members(&[
        member("kept.test", "k", None),
        member("new.test", "n", None),
        member("reset.test", "r2", None),
        member("moved.test", "m", Some("b")),
    ]);
    new.insert(n("handed.test"), handed.clone());
    assert_eq!(
        diff(&old, &new),
        [
            Change::Remove(member("gone.test", "g", None)),
            Change::Coo(handed),
            Change::Regroup(member("moved.test", "m", Some("b"))),
            Change::Add(member("new.test", "n", None)),
            Change::Reset(member("reset.test", "r2", None)),
        ]
    );
    assert!(diff(&new, &new).is_empty());
}

#[test]
fn a_catalog_name_too_long_for_its_version_record_is_rejected() {
    let label = "a".repeat(63);
    let long = n(&format!("{label}.{label}.{label}.{}", "b".repeat(61)));
    assert!(parse(&long, []).is_err());
}

/// The catalog zone `cat.test` at `serial` with `body`, version 2.
fn catalog_zone(serial: u32, body: &str) -> Zone {
    let text = format!(
        "$ORIGIN cat.test.\n$TTL 0\n@ SOA invalid. invalid. {serial} 3600 600 86400 0\n\
         @ NS invalid.\nversion TXT \"2\"\n{body}"
    );
    load_zone_str(&text, "cat", &n(CATALOG)).unwrap().zone
}

/// What an IXFR from `old` to `new` does to the members of `old`, read
/// incrementally; checked against parsing `new` whole.
fn incrementally(old: &Zone, new: &Zone) -> (Vec<Change>, MemberSet) {
    let steps = [heron_zone::diff::diff(old, new)];
    let ids = touched_ids(&n(CATALOG), &steps).expect("version untouched");
    let mut set = MemberSet::new(parse_zone(old).unwrap());
    let listed = parse_members(new, &ids).unwrap();
    assert!(set.clashes(&n(CATALOG), &ids, &listed).is_empty());
    let changes = set.update(&ids, listed);
    assert_eq!(set.members(), &parse_zone(new).unwrap());
    (changes, set)
}

#[test]
fn an_ixfr_touches_only_the_members_it_changes() {
    let many: String = (0..1000)
        .map(|i| format!("m{i}.zones PTR z{i}.test.\n"))
        .collect();
    let old = catalog_zone(1, &many);
    let new = catalog_zone(2, &format!("{many}new.zones PTR new.test.\n"));
    let steps = [heron_zone::diff::diff(&old, &new)];
    let ids = touched_ids(&n(CATALOG), &steps).unwrap();
    assert_eq!(ids, HashSet::from([b"new".to_vec()]));
    let (changes, _) = incrementally(&old, &new);
    assert_eq!(changes, [Change::Add(member("new.test", "new", None))]);
}

#[test]
fn an_ixfr_removes_resets_regroups_and_hands_over_members() {
    let old = catalog_zone(
        1,
        "a.zones PTR a.test.\nb.zones PTR b.test.\nc.zones PTR c.test.\n\
         group.c.zones TXT \"x\"\nd.zones PTR d.test.\n",
    );
    let new = catalog_zone(
        2,
        "a.zones PTR a.test.\nb2.zones PTR b.test.\nc.zones PTR c.test.\n\
         group.c.zones TXT \"y\"\ncoo.a.zones PTR other.test.\n",
    );
    let (changes, set) = incrementally(&old, &new);
    assert_eq!(
        changes,
        [
            Change::Remove(member("d.test", "d", None)),
            Change::Coo(set.members()[&n("a.test")].clone()),
            Change::Reset(member("b.test", "b2", None)),
            Change::Regroup(member("c.test", "c", Some("y"))),
        ]
    );
    assert_eq!(set.members()[&n("a.test")].coo(), Some(&n("other.test")));
}

#[test]
fn an_ixfr_that_lists_a_member_twice_is_found_before_it_is_applied() {
    let old = catalog_zone(1, "a.zones PTR a.test.\n");
    let new = catalog_zone(2, "a.zones PTR a.test.\nb.zones PTR A.test.\n");
    let steps = [heron_zone::diff::diff(&old, &new)];
    let ids = touched_ids(&n(CATALOG), &steps).unwrap();
    let set = MemberSet::new(parse_zone(&old).unwrap());
    let listed = parse_members(&new, &ids).unwrap();
    assert_eq!(
        set.clashes(&n(CATALOG), &ids, &listed),
        [Problem::Duplicate {
            zone: n("A.test"),
            owners: [n("a.zones.cat.test"), n("b.zones.cat.test")],
        }]
    );
}

#[test]
fn an_ixfr_that_changes_the_version_needs_the_whole_catalog() {
    let old = catalog_zone(1, "a.zones PTR a.test.\n");
    let text = "$ORIGIN cat.test.\n$TTL 0\n@ SOA invalid. invalid. 2 3600 600 86400 0\n\
                @ NS invalid.\nversion TXT \"3\"\na.zones PTR a.test.\n";
    let new = load_zone_str(text, "cat", &n(CATALOG)).unwrap().zone;
    let steps = [heron_zone::diff::diff(&old, &new)];
    assert_eq!(touched_ids(&n(CATALOG), &steps), None);
    assert!(parse_zone(&new).is_err());
}

#[test]
fn an_ixfr_with_a_malformed_member_node_is_rejected() {
    let old = catalog_zone(1, "a.zones PTR a.test.\n");
    let new = catalog_zone(2, "a.zones PTR a.test.\na.zones PTR b.test.\n");
    let steps = [heron_zone::diff::diff(&old, &new)];
    let ids = touched_ids(&n(CATALOG), &steps).unwrap();
    assert_eq!(
        parse_members(&new, &ids).unwrap_err(),
        [Problem::MemberPtr {
            owner: n("a.zones.cat.test"),
            count: 2
        }]
    );
}

/// A catalog body of a few records drawn by `next` from a small alphabet
/// of ids, zones and groups, so that clashes and malformed nodes are
/// common.
fn random_body(next: &mut impl FnMut() -> usize) -> String {
    let ids = ["a", "b", "c", "d"];
    let zones = ["x.test.", "y.test.", "z.test."];
    let mut body = String::new();
    for _ in 0..next() % 7 {
        let id = ids[next() % ids.len()];
        let line = match next() % 4 {
            0 | 1 => format!("{id}.zones PTR {}\n", zones[next() % zones.len()]),
            2 => format!("group.{id}.zones TXT \"g{}\"\n", next() % 2),
            _ => format!("coo.{id}.zones PTR other{}.test.\n", next() % 2),
        };
        body.push_str(&line);
    }
    body
}

#[test]
fn reading_an_ixfr_member_by_member_agrees_with_reading_the_whole_catalog() {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 33) as usize
    };
    let mut compared = 0;
    for _ in 0..2000 {
        let old = catalog_zone(1, &random_body(&mut next));
        let Ok(before) = parse_zone(&old) else {
            continue;
        };
        let new = catalog_zone(2, &random_body(&mut next));
        let steps = [heron_zone::diff::diff(&old, &new)];
        let ids = touched_ids(&n(CATALOG), &steps).expect("version untouched");
        let mut set = MemberSet::new(before.clone());
        let incremental = parse_members(&new, &ids).and_then(|listed| {
            match set.clashes(&n(CATALOG), &ids, &listed).as_slice() {
                [] => Ok(set.update(&ids, listed)),
                problems => Err(problems.to_vec()),
            }
        });
        match (parse_zone(&new), incremental) {
            (Ok(whole), Ok(changes)) => {
                assert_eq!(set.members(), &whole);
                // The index by unique ID follows, with nothing left over.
                let every_id: HashSet<Vec<u8>> = whole.values().map(|m| m.id.to_vec()).collect();
                assert_eq!(set.listed_at(&every_id), whole);
                assert_eq!(set.by_id.len(), whole.len());
                assert_eq!(changes, diff(&before, &whole));
                compared += 1;
            }
            (Err(_), Err(_)) => {}
            (whole, incremental) => panic!("{whole:?} but {incremental:?}"),
        }
    }
    assert!(compared > 100, "{compared} agreeing pairs");
}

#[test]
fn a_catalog_is_taken_at_its_member_bound_and_rejected_past_it() {
    let zone = catalog_zone(
        1,
        "a.zones PTR a.test.\nb.zones PTR b.test.\nc.zones PTR c.test.\n",
    );
    assert_eq!(parse_zone_at_most(&zone, 3).unwrap().len(), 3);
    let problems = parse_zone_at_most(&zone, 2).unwrap_err();
    assert_eq!(
        problems,
        [Problem::TooManyMembers {
            owner: n("zones.cat.test"),
            max: 2
        }]
    );
    assert_eq!(
        problems[0].to_string(),
        "zones.cat.test.: more than 2 member nodes, the most max-members lets this server take"
    );
}

#[test]
fn an_ixfr_is_held_to_the_member_bound_counting_what_it_removes() {
    let old = catalog_zone(1, "a.zones PTR a.test.\nb.zones PTR b.test.\n");
    let set = MemberSet::new(parse_zone(&old).unwrap());
    let over = |body: &str, max: usize| {
        let new = catalog_zone(2, body);
        let steps = [heron_zone::diff::diff(&old, &new)];
        let ids = touched_ids(&n(CATALOG), &steps).unwrap();
        let listed = parse_members(&new, &ids).unwrap();
        set.over(&n(CATALOG), &ids, &listed, max)
    };
    let added = "a.zones PTR a.test.\nb.zones PTR b.test.\nc.zones PTR c.test.\n";
    assert_eq!(over(added, 3), None);
    assert_eq!(
        over(added, 2),
        Some(Problem::TooManyMembers {
            owner: n("zones.cat.test"),
            max: 2
        })
    );
    // One removed, one added: still two.
    assert_eq!(over("a.zones PTR a.test.\nc.zones PTR c.test.\n", 2), None);
    // One reset (a new id for the same zone): still two.
    assert_eq!(over("a2.zones PTR a.test.\nb.zones PTR b.test.\n", 2), None);
}

#[test]
fn strings_from_the_producer_reach_the_log_escaped() {
    let zone = catalog_with_version("version TXT \"1\\010forged line\"", "").unwrap_err();
    let problems = [
        zone[0].clone(),
        Problem::NoTemplate {
            zone: n("a.test"),
            owner: n("a.zones.cat.test"),
            group: Some("gold\n2026-11-23 ERROR forged \u{1b}[2J".into()),
        },
    ];
    for problem in problems {
        let text = problem.to_string();
        assert!(!text.contains('\n') && !text.contains('\u{1b}'), "{text:?}");
        assert!(text.contains("\\n"), "{text:?}");
    }
}

#[test]
fn a_member_fits_five_pointers() {
    // 100,000 of them in one tree: each octet is 100 KB.
    assert!(size_of::<Member>() <= 40);
}
