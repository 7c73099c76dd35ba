//! Signatures a new signing can take over from the version signed
//! before: those over an RRset that did not change, by a key still in
//! use, not yet due for refresh. What changed (and the NSEC or NSEC3
//! records around it) is all that is signed again.

use std::borrow::Cow;

use heron_proto::RType;
use heron_zone::Zone;

use super::rrsig::{seconds_until, write_canonical_rrset};

/// The previous version, and when its signatures are due.
#[derive(Clone, Copy)]
pub(super) struct Previous<'a> {
    pub(super) zone: &'a Zone,
    /// Unix seconds now.
    pub(super) now: u64,
    /// A signature expiring within this many seconds is made anew.
    pub(super) refresh: u32,
}

impl<'a> Previous<'a> {
    /// The old RRSIGs over `(owner, rtype)` if that RRset was, in
    /// canonical form, exactly `canonical` (owner, class and TTL
    /// included), and only those not yet due.
    pub(super) fn signatures(
        &self,
        lower_owner: &[u8],
        (rtype, class): (RType, u16),
        canonical: &[u8],
    ) -> Vec<Cow<'a, [u8]>> {
        let Some(old) = self.zone.node(lower_owner).and_then(|n| n.rrset(rtype)) else {
            return Vec::new();
        };
        if !old.has_sigs() {
            return Vec::new();
        }
        let mut before = Vec::with_capacity(canonical.len());
        write_canonical_rrset(
            &mut before,
            lower_owner,
            (rtype, class, old.ttl()),
            old.rdatas(),
        );
        if before != canonical {
            return Vec::new();
        }
        old.sigs().filter(|s| self.still_good(s)).collect()
    }

    fn still_good(&self, rrsig: &[u8]) -> bool {
        let Some(times) = rrsig.get(8..16) else {
            return false;
        };
        let expiration = u32::from_be_bytes(times[..4].try_into().unwrap());
        let inception = u32::from_be_bytes(times[4..].try_into().unwrap());
        seconds_until(expiration, self.now) > i64::from(self.refresh)
            && seconds_until(inception, self.now) <= 0
    }
}

/// Whether an old RRSIG is by the key of `algorithm` and `tag`.
pub(super) fn made_by(rrsig: &[u8], algorithm: u8, tag: u16) -> bool {
    rrsig.len() > 18 && rrsig[2] == algorithm && rrsig[16..18] == tag.to_be_bytes()
}

/// Whether a signature of `zone` expires within `refresh` seconds of
/// `within` seconds from `now`: time to sign the zone again (a signing
/// keeps every other signature).
pub fn refresh_due(zone: &Zone, now: u64, refresh: u32, within: u32) -> bool {
    let limit = i64::from(refresh) + i64::from(within);
    zone.nodes().any(|node| {
        node.rrsets().any(|set| {
            set.sigs().any(|sig| {
                let expiration = sig
                    .get(8..12)
                    .map(|t| u32::from_be_bytes(t.try_into().unwrap()));
                expiration.is_some_and(|e| seconds_until(e, now) <= limit)
            })
        })
    })
}
