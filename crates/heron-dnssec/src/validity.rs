//! Whether the signatures of a zone signed elsewhere are valid now. A
//! pre-signed zone file whose signatures have expired (or are not valid
//! yet) is bogus at every validator, and loaded and compared it looked
//! like any other: `heron check-zone` said OK, `heron serve` said nothing
//! (black-box finding DB-7). Dates compare in serial-number arithmetic
//! (RFC 4034 3.1.5).

use heron_proto::RType;
use heron_zone::Zone;

use crate::sign::seconds_until;

/// The validity of a zone's RRSIG records at one time.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SignatureDates {
    pub signatures: usize,
    /// Past their expiration.
    pub expired: usize,
    /// Before their inception.
    pub not_yet: usize,
    /// The earliest expiration among the expired.
    pub first_expired: Option<u32>,
    /// The earliest inception among those not valid yet.
    pub first_inception: Option<u32>,
}

/// The dates of `zone`'s signatures at `now` (seconds since 1970); None
/// for a zone whose SOA is not signed (an unsigned zone: nothing read).
/// Compared as the signer compares them when it keeps a signature
/// ([`seconds_until`]).
pub fn signature_dates(zone: &Zone, now: u64) -> Option<SignatureDates> {
    let apex = zone.node(zone.origin().as_wire())?;
    apex.rrset(RType::SOA)?.sigs().next()?;
    let mut dates = SignatureDates::default();
    // The earliest of each kind, as seconds from now and the time itself.
    let (mut expired, mut early) = (None::<(i64, u32)>, None::<(i64, u32)>);
    let earliest = |first: &mut Option<(i64, u32)>, time: u32| {
        let from_now = seconds_until(time, now);
        if first.is_none_or(|(seen, _)| from_now < seen) {
            *first = Some((from_now, time));
        }
    };
    for node in zone.nodes() {
        for sig in node.rrsets().flat_map(|rrset| rrset.sigs()) {
            let Some(times) = sig.get(8..16) else {
                continue; // RDATA: ... expiration, inception (RFC 4034 3.1)
            };
            let expiration = u32::from_be_bytes(times[..4].try_into().expect("4 octets"));
            let inception = u32::from_be_bytes(times[4..].try_into().expect("4 octets"));
            dates.signatures += 1;
            if seconds_until(expiration, now) < 0 {
                dates.expired += 1;
                earliest(&mut expired, expiration);
            } else if seconds_until(inception, now) > 0 {
                dates.not_yet += 1;
                earliest(&mut early, inception);
            }
        }
    }
    dates.first_expired = expired.map(|(_, time)| time);
    dates.first_inception = early.map(|(_, time)| time);
    Some(dates)
}

/// A line for a zone some of whose signatures are not valid at `now`.
pub fn warning(zone: &Zone, now: u64) -> Option<String> {
    let dates = signature_dates(zone, now)?;
    let when = |t: Option<u32>| {
        let mut text = String::new();
        heron_proto::rdata::format_sig_time(t.unwrap_or_default(), &mut text);
        text
    };
    let expired = (dates.expired > 0).then(|| {
        let first = when(dates.first_expired);
        format!("{} have expired (the first at {first})", dates.expired)
    });
    // Said too when some expired: a file mixing both was re-signed badly
    // (black-box finding DG-7: only the expired were said).
    let early = (dates.not_yet > 0).then(|| {
        let first = when(dates.first_inception);
        format!(
            "{} are not valid yet (the first from {first})",
            dates.not_yet
        )
    });
    let what: Vec<String> = expired.into_iter().chain(early).collect();
    if what.is_empty() {
        return None;
    }
    Some(format!(
        "zone {}: of its {} signatures, {}: validators find what they sign bogus; sign the \
         zone again",
        zone.origin(),
        dates.signatures,
        what.join(" and ")
    ))
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
        let both = "of its 3 signatures, 2 have expired (the first at 20190301000000) and 1 are \
                    not valid yet (the first from 20270101000000)";
        assert!(said.contains(both), "{said}");
        let z = zone(&[
            ("20251201000000", "20260201000000"),
            ("20270101000000", "20270201000000"),
        ]);
        let said = warning(&z, NOW).unwrap();
        let early = "of its 2 signatures, 1 are not valid yet (the first from 20270101000000)";
        assert!(said.contains(early), "{said}");
    }
}
