//! Any records as dynamic updates (RFC 2136) of edge.test: the reader and
//! the editor refuse or apply, never panic; a batch of updates run
//! together (`Pending`, as the server's update task runs a queue's worth)
//! answers each update as running them one at a time against each new
//! version does, and ends at the same zone; the batch's net change takes
//! the zone there too; each step moves the serial on; and the zone they
//! leave is written back as a zone file that loads to the same zone.
//!
//! Input: one octet of settings (bits 0-1: updates in the batch, less one;
//! bits 2-3: the permissions; bits 4-5: the serial policy; bit 6: the
//! requester signs with the key `k.edge.test.`), then each update: two
//! octets of length, then its prerequisite and update counts (one octet
//! each) and its records in wire form. The target writes the header and
//! the zone section (`edge.test. SOA IN`).
#![no_main]

use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, LazyLock};

use heron_proto::{Name, Opcode};
use heron_xfr::secondary::store::write_zone;
use heron_xfr::update::{
    Applied, Pending, Requester, SerialPolicy, UpdatePolicy, UpdateRule, UpdateSettings, parse,
    process,
};
use heron_zone::{Zone, diff::diff, load_zone_str};
use libfuzzer_sys::fuzz_target;

const EDGE: &str = include_str!("../../crates/heron/tests/data/differential/edge.test.zone");
/// Unix seconds the serial policies read: 2023-11-14.
const NOW: u64 = 1_700_000_000;

static ORIGIN: LazyLock<Name> = LazyLock::new(|| Name::parse("edge.test").unwrap());
static KEY: LazyLock<Name> = LazyLock::new(|| Name::parse("k.edge.test").unwrap());
static ZONE: LazyLock<Arc<Zone>> = LazyLock::new(|| {
    Arc::new(load_zone_str(EDGE, "edge.test.zone", &ORIGIN).unwrap().zone)
});

/// Rule sets the first octet picks from: anyone anything, the key below
/// a few names and types, the key's own names, a wildcard's names.
const POLICIES: [&[&str]; 4] = [
    &["0.0.0.0/0 zonesub ANY"],
    &["key k.edge.test subdomain www.edge.test A AAAA TXT", "key k.edge.test name edge.test MX"],
    &["key k.edge.test selfsub ANY", "127.0.0.0/8 key k.edge.test name mail.edge.test ANY"],
    &["0.0.0.0/0 wildcard *.wild.edge.test A TXT CNAME"],
];

fn settings(choice: u8) -> UpdateSettings {
    let rules = POLICIES[usize::from(choice & 3)]
        .iter()
        .map(|r| UpdateRule::parse(r, &ORIGIN).unwrap())
        .collect();
    UpdateSettings {
        policy: UpdatePolicy::new(rules),
        serial: match (choice >> 2) & 3 {
            0 | 3 => SerialPolicy::Increment,
            1 => SerialPolicy::UnixTime,
            _ => SerialPolicy::DateSerial,
        },
        ..UpdateSettings::default()
    }
}

/// The UPDATE message of one input piece.
fn message(piece: &[u8]) -> Option<Vec<u8>> {
    let (&prereqs, rest) = piece.split_first()?;
    let (&updates, records) = rest.split_first()?;
    let mut out = vec![0x12, 0x34, Opcode::UPDATE.0 << 3, 0, 0, 1, 0, prereqs, 0, updates, 0, 0];
    out.extend_from_slice(ORIGIN.as_wire());
    out.extend_from_slice(&[0, 6, 0, 1]);
    out.extend_from_slice(records);
    Some(out)
}

fuzz_target!(|data: &[u8]| {
    let Some((&switches, mut rest)) = data.split_first() else {
        return;
    };
    let settings = settings(switches >> 2);
    let who = Requester {
        ip: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)),
        key: (switches & 0x40 != 0).then_some(&*KEY),
    };
    let mut messages = Vec::new();
    for _ in 0..=(switches & 3) {
        if rest.len() < 2 {
            break;
        }
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
        let end = (2 + len).min(rest.len());
        if let Some(msg) = message(&rest[2..end]) {
            messages.push(msg);
        }
        rest = &rest[end..];
    }
    let updates: Vec<_> = messages.iter().filter_map(|m| parse(m).ok()).collect();

    // One at a time, a version each (the server's way when a batch breaks).
    let mut zone = ZONE.clone();
    let mut one_by_one = Vec::new();
    let mut refused_as_breaking = false;
    for update in &updates {
        match process(&zone, update, &settings, who, NOW) {
            Ok(Applied::Changed(next, step)) => {
                assert!(
                    heron_xfr::serial::is_newer(next.serial(), zone.serial()),
                    "an update's serial {} after {}",
                    next.serial(),
                    zone.serial()
                );
                let d = diff(&zone.apply(&step).unwrap(), &next);
                assert!(d.is_empty(), "the step does not lead to the version: {d:?}");
                zone = Arc::new(*next);
                one_by_one.push(Ok(true));
            }
            Ok(Applied::Unchanged) => one_by_one.push(Ok(false)),
            Err(e) => {
                refused_as_breaking |= e.why.starts_with("the zone would break");
                one_by_one.push(Err(e.rcode));
            }
        }
    }

    // Together, as a queue's worth.
    let mut pending = Pending::new(ZONE.clone());
    let together: Vec<_> = (updates.iter())
        .map(|u| pending.process(u, &settings, who, NOW).map_err(|e| e.rcode))
        .collect();
    match pending.finish() {
        Ok(finished) => {
            assert!(!refused_as_breaking, "a batch took an update that breaks the zone");
            assert_eq!(together, one_by_one, "a batch answers otherwise");
            let d = diff(&finished.zone, &zone);
            assert!(d.is_empty(), "a batch leaves another zone: {d:?}");
            let net = ZONE.apply(&finished.net).expect("the net change applies");
            let d = diff(&net, &zone);
            assert!(d.is_empty(), "the net change leaves another zone: {d:?}");
        }
        // The server runs such a batch again one update at a time.
        Err(_) => return,
    }

    let mut text = Vec::new();
    write_zone(&zone, &mut text).unwrap();
    let text = String::from_utf8(text).expect("a written zone is UTF-8");
    let back = load_zone_str(&text, "written.zone", &ORIGIN)
        .unwrap_or_else(|p| panic!("the updated zone does not load: {p:?}\n{text}"));
    let d = diff(&zone, &back.zone);
    assert!(d.is_empty(), "the updated zone loads differently: {d:?}\n{text}");
});
