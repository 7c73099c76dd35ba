//! Any bytes as the answer to a zone transfer: the receiver errors, never
//! panics; it says a transfer is complete exactly when `finish` has an
//! answer (a connection goes back to the pool only then); and a zone it
//! accepts is stored as a zone file that loads back to the same zone.
//!
//! Input: one octet (bit 0: IXFR from the zone below, else AXFR; bit 1:
//! under small limits, at most 1 + the octet's top six bits records and
//! 4 KiB), then messages, each preceded by its length in two octets as
//! over TCP. A transfer taken under limits holds no more records than
//! they allow.
#![no_main]

use std::sync::{Arc, LazyLock};

use heron_proto::Name;
use heron_xfr::secondary::receive::{Outcome, Receiver, Request, TransferLimits, XfrError};
use heron_xfr::secondary::store::write_zone;
use heron_zone::{Zone, diff::diff, load_zone_str};
use libfuzzer_sys::fuzz_target;

/// The version an IXFR starts from; the seeds (written by the ignored test
/// `write_fuzz_seeds` in crates/heron-xfr/src/secondary/tests.rs) change it.
pub const HAVE: &str = "$ORIGIN x.test.\n$TTL 300\n\
@ SOA ns1 hostmaster 1 3600 900 604800 300\n\
@ NS ns1\nns1 A 192.0.2.1\nwww A 192.0.2.3\nwww TXT \"a\"\n";

static ORIGIN: LazyLock<Name> = LazyLock::new(|| Name::parse("x.test").unwrap());
static ZONE: LazyLock<Arc<Zone>> = LazyLock::new(|| {
    Arc::new(load_zone_str(HAVE, "have.zone", &ORIGIN).unwrap().zone)
});

fuzz_target!(|data: &[u8]| {
    let Some((&mode, mut rest)) = data.split_first() else {
        return;
    };
    let request = match mode & 1 {
        1 => Request::Ixfr { have: ZONE.clone() },
        _ => Request::Axfr,
    };
    let limits = match mode & 2 {
        2 => TransferLimits {
            max_records: 1 + u64::from(mode >> 2),
            max_bytes: 4096,
            ..TransferLimits::default()
        },
        _ => TransferLimits::default(),
    };
    let mut r = Receiver::new(ORIGIN.clone(), request).with_limits(limits);
    let mut complete = false;
    while rest.len() >= 2 {
        let len = u16::from_be_bytes([rest[0], rest[1]]) as usize;
        let msg = &rest[2..(2 + len).min(rest.len())];
        rest = &rest[(2 + len).min(rest.len())..];
        match r.feed(msg) {
            Ok(false) => {}
            Ok(true) => {
                complete = true;
                break;
            }
            Err(_) => break,
        }
    }
    let finished = r.finish();
    match &finished {
        Err(XfrError::NotComplete) => assert!(!complete, "complete, yet finish says not"),
        Ok(_) => assert!(complete, "an outcome without the end of the transfer"),
        Err(_) => {}
    }
    let zone = match finished {
        Ok(Outcome::Full(zone)) => {
            assert!(zone.record_count() as u64 <= limits.max_records);
            zone
        }
        Ok(Outcome::Incremental { zone, .. }) => zone,
        _ => return,
    };
    let mut text = Vec::new();
    write_zone(&zone, &mut text).unwrap();
    let text = String::from_utf8(text).expect("a stored zone is UTF-8");
    let back = load_zone_str(&text, "stored.zone", &ORIGIN)
        .unwrap_or_else(|p| panic!("the stored zone does not load: {p:?}\n{text}"));
    let d = diff(&zone, &back.zone);
    assert!(d.is_empty(), "the stored zone loads differently: {d:?}\n{text}");
});
