//! Reloading a zone file as a change to the version loaded before
//! (`reload_zone_str`): the result must answer exactly as the file loaded
//! whole, share what the edit did not touch, and reject a broken file
//! with its file and line.

mod common;

use common::*;
use heron_proto::Name;
use heron_zone::diff::diff;
use heron_zone::{Problem, Zone, load_zone_str, reload_zone_str};

fn reload(before: &Zone, serial: u32, lines: &[String]) -> Result<Zone, Vec<Problem>> {
    reload_zone_str(before, &zone_text(serial, lines), "p.zone").map(|l| l.zone)
}

#[test]
fn a_reloaded_file_answers_like_the_file_loaded_whole() {
    let names = universe();
    let questions = questions(&names);
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let (mut valid, mut broken) = (0, 0);
    for round in 0..80 {
        let (before_lines, after_lines) = random_lines_and_edit(&mut rng, &names);
        let before = load(1, &before_lines).unwrap();
        let whole = load(2, &after_lines);
        let reloaded = reload(&before, 2, &after_lines);
        let context = format!("round {round}\nbefore: {before_lines:?}\nafter: {after_lines:?}");
        match (reloaded, whole) {
            (Ok(reloaded), Ok(whole)) => {
                assert_eq!(reloaded.serial(), 2, "{context}");
                assert_same_zone(reloaded, whole, &questions, &context);
                valid += 1;
            }
            (Err(_), Err(_)) => broken += 1,
            (reloaded, whole) => panic!(
                "{context}\nreloaded: {:?}\nwhole: {whole:?}",
                reloaded.map_err(|p| format!("{p:?}"))
            ),
        }
    }
    assert!(valid > 40, "only {valid} rounds had a valid edit");
    assert!(broken > 0, "no round broke the zone: refusals go untested");
}

fn numbered_hosts(count: usize) -> Vec<String> {
    (0..count)
        .map(|i| format!("h{i} A 10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255))
        .collect()
}

#[test]
fn a_small_edit_of_a_large_zone_shares_what_it_did_not_touch() {
    let mut lines = numbered_hosts(20_000);
    let before = load(1, &lines).unwrap();
    lines[7] = "h7 A 192.0.2.77".into();
    lines.remove(100);
    lines.push("fresh.new A 192.0.2.78".into());
    let next = reload(&before, 2, &lines).unwrap();
    let copied = next.unshared_bytes(&before);
    // Four names (h7, h100, fresh.new and its new parent) and the apex
    // touch at most five of the 32 shards; a full load copies all 32.
    assert!(
        copied * 4 < next.heap_bytes(),
        "{copied} of {} bytes copied",
        next.heap_bytes()
    );
    let step = diff(&before, &next);
    let names = |list: &[heron_zone::diff::DiffRecord]| -> Vec<String> {
        let mut names: Vec<String> = list.iter().map(|r| r.owner.to_string()).collect();
        names.sort();
        names
    };
    assert_eq!(names(&step.deleted), ["h100.p.test.", "h7.p.test."]);
    assert_eq!(names(&step.added), ["fresh.new.p.test.", "h7.p.test."]);
    let whole = load(2, &lines).unwrap();
    assert!(diff(&next, &whole).is_empty());
    assert_eq!(next.node_count(), whole.node_count());
}

#[test]
fn a_large_edit_is_loaded_whole_with_the_same_result() {
    let lines = numbered_hosts(10_000);
    let before = load(1, &lines).unwrap();
    let renumbered: Vec<String> = lines
        .iter()
        .map(|l| l.replace(" A 10.", " A 11."))
        .collect();
    let next = reload(&before, 2, &renumbered).unwrap();
    assert_eq!(next.unshared_bytes(&before), next.heap_bytes());
    assert!(diff(&next, &load(2, &renumbered).unwrap()).is_empty());
}

#[test]
fn a_broken_file_is_rejected_with_its_file_and_line() {
    let before = load(1, &numbered_hosts(10)).unwrap();
    let mut syntax = numbered_hosts(10);
    syntax.push("bad A 192.0.2.300".into());
    let problems = reload(&before, 2, &syntax).unwrap_err();
    let lines: Vec<u32> = problems
        .iter()
        .filter_map(|p| p.location.as_ref().map(|l| l.line))
        .collect();
    assert_eq!(lines, [16], "{problems:?}");

    // A rule broken only by the records together: the full load finds it.
    let mut clash = numbered_hosts(10);
    clash.push("h3 CNAME elsewhere.test.".into());
    let problems = reload(&before, 2, &clash).unwrap_err();
    assert!(
        problems
            .iter()
            .any(|p| p.message.contains("CNAME") && p.location.is_some()),
        "{problems:?}"
    );
}

#[test]
fn a_file_without_its_soa_is_rejected() {
    let origin = Name::parse(ORIGIN).unwrap();
    let before = load(1, &numbered_hosts(3)).unwrap();
    let text = "$ORIGIN p.test.\n@ 300 NS ns\nns 300 A 192.0.2.1\n";
    assert!(load_zone_str(text, "p.zone", &origin).is_err());
    assert!(reload_zone_str(&before, text, "p.zone").is_err());
}

#[test]
fn records_outside_the_zone_are_ignored_with_a_warning() {
    let before = load(1, &numbered_hosts(3)).unwrap();
    let mut lines = numbered_hosts(3);
    lines.push("elsewhere.test. A 192.0.2.9".into());
    let loaded = reload_zone_str(&before, &zone_text(2, &lines), "p.zone").unwrap();
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.message.contains("outside the zone")),
        "{:?}",
        loaded.warnings
    );
    assert_eq!(loaded.zone.record_count(), before.record_count());
}
