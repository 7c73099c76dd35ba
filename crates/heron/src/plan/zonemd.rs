//! ZONEMD verification (RFC 8976) of a version about to be served, from
//! its file or a transfer: a mismatch refuses the version and counts it
//! in `heron_zone_zonemd_failures_total{zone}`.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use heron_dnssec::zonemd::{Verdict, verify};
use heron_zone::Zone;

/// Versions refused for their ZONEMD, by lower-cased origin as text.
pub(crate) fn failures() -> &'static Mutex<BTreeMap<String, u64>> {
    static FAILURES: OnceLock<Mutex<BTreeMap<String, u64>>> = OnceLock::new();
    FAILURES.get_or_init(Default::default)
}

/// Ok if `zone` may be served: it has no ZONEMD, only ones Heron cannot
/// check, or one that matches. Otherwise counts the failure and says why.
pub(crate) fn check(zone: &Zone) -> Result<(), String> {
    let verdict = verify(zone);
    if let Verdict::Verified(alg) = &verdict {
        tracing::debug!(zone = %zone.origin(), "ZONEMD ({alg:?}) verified");
    }
    let Verdict::Failed(why) = verdict else {
        return Ok(());
    };
    let origin = zone.origin().to_lowercase().to_string();
    *failures()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(origin)
        .or_default() += 1;
    Err(format!(
        "zone {} serial {}: ZONEMD verification failed: {why}",
        zone.origin(),
        zone.serial()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_proto::Name;

    #[test]
    fn a_mismatch_is_refused_and_counted_and_no_zonemd_is_accepted() {
        let origin = Name::parse("zonemd-count.test").unwrap();
        let text = "@ 60 SOA ns h 7 2 3 4 5\n@ 60 NS ns\n\
                    @ 60 ZONEMD 7 1 1 000102030405060708090a0b0c0d0e0f\
                    101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f\n";
        let zone = heron_zone::load_zone_str(text, "t", &origin).unwrap().zone;
        let why = check(&zone).unwrap_err();
        assert!(why.contains("zonemd-count.test"), "{why}");
        let counted = failures().lock().unwrap()["zonemd-count.test."];
        assert_eq!(counted, 1);
        let plain = "@ 60 SOA ns h 7 2 3 4 5\n@ 60 NS ns\n";
        let zone = heron_zone::load_zone_str(plain, "t", &origin).unwrap().zone;
        assert_eq!(check(&zone), Ok(()));
    }
}
