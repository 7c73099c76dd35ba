//! Whether the signatures of a zone signed elsewhere are valid now. A
//! pre-signed zone file whose signatures have expired (or are not valid
//! yet) is bogus at every validator, and loaded and compared it looked
//! like any other: `heron check-zone` said OK, `heron serve` said nothing
//! (black-box finding DB-7). Dates compare in serial-number arithmetic
//! (RFC 4034 3.1.5).

use heron_proto::RType;
use heron_zone::Zone;

/// The validity of a zone's RRSIG records at one time.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SignatureDates {
    pub signatures: usize,
    /// Past their expiration.
    pub expired: usize,
    /// Before their inception.
    pub not_yet: usize,
    /// The earliest expiration among the expired, or the earliest
    /// inception among those not valid yet when none expired.
    pub example: Option<u32>,
}

/// Offsets in RRSIG RDATA (RFC 4034 3.1): expiration, then inception.
const EXPIRATION: usize = 8;
const INCEPTION: usize = 12;

/// The dates of `zone`'s signatures at `now` (seconds since 1970); None
/// for a zone whose SOA is not signed (an unsigned zone: nothing read).
pub fn signature_dates(zone: &Zone, now: u64) -> Option<SignatureDates> {
    // RRSIG times are seconds since 1970 modulo 2^32.
    let now = now as u32;
    let apex = zone.node(zone.origin().as_wire())?;
    apex.rrset(RType::SOA)?.sigs().next()?;
    let mut dates = SignatureDates::default();
    let (mut earliest_expired, mut earliest_inception) = (None::<u32>, None::<u32>);
    for node in zone.nodes() {
        for rrset in node.rrsets() {
            for sig in rrset.sigs() {
                let (Some(expiration), Some(inception)) =
                    (time_at(&sig, EXPIRATION), time_at(&sig, INCEPTION))
                else {
                    continue;
                };
                dates.signatures += 1;
                if before(expiration, now) {
                    dates.expired += 1;
                    earliest_expired =
                        Some(earliest_expired.map_or(expiration, |e| earlier(e, expiration)));
                } else if before(now, inception) {
                    dates.not_yet += 1;
                    earliest_inception =
                        Some(earliest_inception.map_or(inception, |e| earlier(e, inception)));
                }
            }
        }
    }
    dates.example = earliest_expired.or(earliest_inception);
    Some(dates)
}

/// A line for a zone some of whose signatures are not valid at `now`.
pub fn warning(zone: &Zone, now: u64) -> Option<String> {
    let dates = signature_dates(zone, now)?;
    let when = |t: u32| {
        let mut text = String::new();
        heron_proto::rdata::format_sig_time(t, &mut text);
        text
    };
    let example = dates.example.map(when).unwrap_or_default();
    let (what, count) = match (dates.expired, dates.not_yet) {
        (0, 0) => return None,
        (0, n) => (format!("are not valid yet (the first from {example})"), n),
        (n, _) => (format!("have expired (the first at {example})"), n),
    };
    Some(format!(
        "zone {}: {count} of its {} signatures {what}: validators find what they sign bogus; \
         sign the zone again",
        zone.origin(),
        dates.signatures
    ))
}

fn time_at(rdata: &[u8], at: usize) -> Option<u32> {
    let bytes = rdata.get(at..at + 4)?;
    Some(u32::from_be_bytes(bytes.try_into().ok()?))
}

/// Whether `a` is before `b` in serial-number arithmetic.
fn before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

fn earlier(a: u32, b: u32) -> u32 {
    if before(b, a) { b } else { a }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_proto::Name;

    fn zone(sigs: &[(&str, &str)]) -> Zone {
        let mut text = String::from(
            "$ORIGIN v.test.\n$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n",
        );
        for (i, (inception, expiration)) in sigs.iter().enumerate() {
            let covered = ["SOA", "NS", "A"][i % 3];
            let owner = if covered == "A" { "ns" } else { "@" };
            text += &format!(
                "{owner} RRSIG {covered} 13 2 60 {expiration} {inception} 12345 v.test. AAAA\n"
            );
        }
        let origin = Name::parse("v.test").unwrap();
        heron_zone::load_zone_str(&text, "v.test.zone", &origin)
            .unwrap()
            .zone
    }

    const NOW: u64 = 1_767_225_600; // 2026-01-01

    #[test]
    fn an_unsigned_zone_is_not_looked_at() {
        assert_eq!(signature_dates(&zone(&[]), NOW), None);
        assert_eq!(warning(&zone(&[]), NOW), None);
    }

    #[test]
    fn signatures_valid_now_say_nothing() {
        let valid = ("20251201000000", "20260201000000");
        let z = zone(&[valid, valid, valid]);
        let dates = signature_dates(&z, NOW).unwrap();
        assert_eq!((dates.signatures, dates.expired, dates.not_yet), (3, 0, 0));
        assert_eq!(warning(&z, NOW), None);
    }

    #[test]
    fn expired_and_early_signatures_are_counted_and_said() {
        let z = zone(&[
            ("20200101000000", "20200201000000"),
            ("20190101000000", "20190301000000"),
            ("20270101000000", "20270201000000"),
        ]);
        let dates = signature_dates(&z, NOW).unwrap();
        assert_eq!((dates.signatures, dates.expired, dates.not_yet), (3, 2, 1));
        let said = warning(&z, NOW).unwrap();
        assert!(
            said.contains("2 of its 3 signatures have expired (the first at 20190301000000)"),
            "{said}"
        );
        let z = zone(&[
            ("20251201000000", "20260201000000"),
            ("20270101000000", "20270201000000"),
        ]);
        let said = warning(&z, NOW).unwrap();
        assert!(
            said.contains(
                "1 of its 2 signatures are not valid yet (the first from 20270101000000)"
            ),
            "{said}"
        );
    }

    /// Past 2106 the dates wrap: compared as serial numbers, a signature
    /// valid across the wrap is valid.
    #[test]
    fn dates_compare_across_the_wrap() {
        assert!(before(u32::MAX - 10, 5));
        assert!(!before(5, u32::MAX - 10));
        assert_eq!(earlier(u32::MAX - 10, 5), u32::MAX - 10);
    }
}
