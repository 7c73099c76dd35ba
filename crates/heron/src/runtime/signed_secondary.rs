//! Secondary zones Heron signs (`dnssec-policy` with `primaries`): a
//! "bump in the wire" signer behind a hidden primary, as Knot's
//! `dnssec-signing: on` on a secondary zone.
//!
//! The refresh task keeps the unsigned version it transfers (its serial
//! is the primary's, which its SOA checks and IXFR requests compare
//! against) and writes it as the zone's kept copy. Each version it
//! publishes is signed here, before it is served: by its change from the
//! version received before, applied to the version served and signed
//! incrementally as a dynamic update is ([`sign_change_received`]), so
//! an IXFR of one changed RRset costs a few new signatures and time in
//! proportion to the change; else (the first version, the primary's own
//! DNSSEC records changed) whole ([`crate::plan::signing::sign_loaded`]),
//! the version served as the previous one, whose signatures of RRsets
//! that did not change are kept.
//! The signed version takes a serial of its own (the primary's if ahead,
//! else one past the one served), and is what is served, journaled, sent
//! by AXFR and IXFR and NOTIFYed; it is also kept, in `FILE.signed`, so
//! that a restart signs the kept unsigned copy again keeping its
//! signatures, and the journal of the signed versions carries on.
//!
//! A reload that names the zone (the signature refresh, the rollover
//! driver) or changes its policy signs it again from the last unsigned
//! version received, never transferring it anew.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use heron_proto::{Name, RType};
use heron_xfr::update::is_dnssec_type;
use heron_zone::{Catalog, Zone};

use crate::config::dnssec::Signing;
use crate::plan::signing::{sign_by_change, sign_loaded};

/// The versions of one signed secondary zone.
#[derive(Default)]
struct Versions {
    /// The last version received from the primaries, unsigned.
    unsigned: Option<Arc<Zone>>,
    /// The last version signed from it (what is served, or what a
    /// restart found kept).
    signed: Option<Arc<Zone>>,
    /// Why `unsigned` could not be signed (`signed` is of an older
    /// version), until a version is signed again.
    failed: Option<String>,
}

/// `next`, received after `previous` (both unsigned), signed by the
/// change alone: the records that changed applied to `signed` (the
/// version signed from `previous`) with the primary's new SOA, and that
/// signed incrementally ([`crate::plan::signing::sign_by_change`]), as a
/// dynamic update is. The cost follows the change, not the zone. None
/// when the change touches the signer's own types (the primary's DNSSEC
/// records, which the whole signing drops; but its ZONEMD, left out
/// under a policy that makes none) or cannot be signed so: then the
/// whole signing, keeping the signatures of what did not change, does
/// it.
fn sign_change_received(
    previous: &Zone,
    next: &Zone,
    signed: &Zone,
    signing: &Signing,
) -> Option<Result<Zone, String>> {
    let mut change = heron_zone::diff::diff(previous, next);
    if signing.policy.zonemd.is_none() {
        // The primary's digest of its own zone, which changes with every
        // version: never served here (it cannot verify once signed), so
        // not a reason to sign the whole zone again.
        change.deleted.retain(|r| r.rtype != RType::ZONEMD);
        change.added.retain(|r| r.rtype != RType::ZONEMD);
    }
    let records = change.deleted.iter().chain(&change.added);
    if records.clone().any(|r| is_dnssec_type(r.rtype)) {
        return None;
    }
    let signed = sign_by_change(signed, change, signing)?;
    Some(signed.map_err(|e| e.join("; ")))
}

/// The secondary zones Heron signs, how, and their last versions; by
/// lower-cased origin.
#[derive(Default)]
pub(crate) struct SignedSecondaries {
    signings: Mutex<HashMap<Name, Arc<Signing>>>,
    versions: Mutex<HashMap<Name, Versions>>,
}

pub(crate) use crate::runtime::signed_copies::signed_copy;

impl SignedSecondaries {
    /// The zones signed as configured now; returns those whose signing
    /// was added, changed or removed (lower-cased). A zone no longer
    /// signed forgets its versions but the unsigned one, which a reload
    /// then serves ([`SignedSecondaries::resign`]).
    pub(crate) fn set(&self, signed: &[(Name, Arc<Signing>)]) -> HashSet<Name> {
        let now: HashMap<Name, Arc<Signing>> = (signed.iter())
            .map(|(origin, s)| (origin.to_lowercase(), s.clone()))
            .collect();
        let mut signings = self.signings.lock().unwrap_or_else(|e| e.into_inner());
        let changed: HashSet<Name> = (signings.keys().chain(now.keys()))
            .filter(|origin| signings.get(*origin) != now.get(*origin))
            .cloned()
            .collect();
        *signings = now;
        changed
    }

    /// Forgets the versions of `origins`, no longer secondary zones here:
    /// one made a primary is served from its file (signed by its own
    /// policy, if any), never from the version last received (black-box
    /// finding BQ-7: a signed secondary made a signed primary was served
    /// the primary's old transfer, unsigned, by [`Self::resign`]).
    pub(crate) fn forget(&self, origins: &[Name]) {
        let mut versions = self.versions.lock().unwrap_or_else(|e| e.into_inner());
        for origin in origins {
            versions.remove(&origin.to_lowercase());
        }
    }

    pub(crate) fn signing(&self, origin: &Name) -> Option<Arc<Signing>> {
        let signings = self.signings.lock().unwrap_or_else(|e| e.into_inner());
        signings.get(&origin.to_lowercase()).cloned()
    }

    /// Why the last version of `origin` received (or signed again at a
    /// reload) could not be signed: the version served is older (black-box
    /// finding: only the log said so). None once a version is signed.
    pub(crate) fn failure(&self, origin: &Name) -> Option<String> {
        let versions = self.versions.lock().unwrap_or_else(|e| e.into_inner());
        versions.get(&origin.to_lowercase())?.failed.clone()
    }

    /// Whether `origin` is signed here and has no signed version yet (its
    /// first signing makes every signature).
    pub(crate) fn signs_anew(&self, origin: &Name) -> bool {
        if self.signing(origin).is_none() {
            return false;
        }
        let versions = self.versions.lock().unwrap_or_else(|e| e.into_inner());
        (versions.get(&origin.to_lowercase())).is_none_or(|v| v.signed.is_none())
    }

    /// Takes the signed versions a restart found kept (`FILE.signed`):
    /// the first signing keeps their signatures and serial line.
    pub(crate) fn restore(&self, kept: impl IntoIterator<Item = Zone>) {
        let mut versions = self.versions.lock().unwrap_or_else(|e| e.into_inner());
        for zone in kept {
            let origin = zone.origin().to_lowercase();
            versions.entry(origin).or_default().signed = Some(Arc::new(zone));
        }
    }

    /// The version the refresh task starts `origin` from: for a zone
    /// signed here its last unsigned version (None: it transfers anew),
    /// else the one `served`.
    pub(crate) fn start_from(
        &self,
        origin: &Name,
        served: Option<&Arc<Zone>>,
    ) -> Option<Arc<Zone>> {
        if self.signing(origin).is_none() {
            return served.cloned();
        }
        let versions = self.versions.lock().unwrap_or_else(|e| e.into_inner());
        versions.get(&origin.to_lowercase())?.unsigned.clone()
    }

    /// The signed version of `unsigned`, just received, for a zone
    /// signed here (None for another zone): `served` (else the signed
    /// version kept) is the previous one, whose signatures are kept
    /// where nothing changed. The same unsigned version again (a
    /// re-pointed zone, a kept copy re-served) keeps the one served.
    /// Returns the signed version and the one it follows, if any.
    pub(crate) fn sign_received(
        &self,
        unsigned: &Arc<Zone>,
        served: Option<&Arc<Zone>>,
    ) -> Option<Result<SignedVersion, String>> {
        let signing = self.signing(unsigned.origin())?;
        let origin = unsigned.origin().to_lowercase();
        let mut versions = self.versions.lock().unwrap_or_else(|e| e.into_inner());
        let entry = versions.entry(origin).or_default();
        let again = (entry.unsigned.as_ref()).is_some_and(|u| Arc::ptr_eq(u, unsigned));
        if let (true, Some(served)) = (again, served) {
            let before = Some(served.clone());
            return Some(Ok((served.clone(), before)));
        }
        let previous = entry.unsigned.replace(unsigned.clone());
        if let Some(previous) = &previous {
            warn_of_a_serial_kept(previous, unsigned);
        }
        let before = served.cloned().or_else(|| entry.signed.clone());
        let signed = match (&previous, &before) {
            // After a version that was not signed, the one served is not
            // `previous`'s: its change alone would leave the one missed
            // out, so the whole version is signed.
            (Some(previous), Some(signed)) if entry.failed.is_none() => {
                sign_change_received(previous, unsigned, signed, &signing)
            }
            _ => None,
        };
        let signed = signed
            .unwrap_or_else(|| {
                sign_loaded(&**unsigned, before.as_deref(), &signing).map_err(|e| e.join("; "))
            })
            .map(Arc::new);
        entry.failed = signed.as_ref().err().cloned();
        Some(
            signed
                .inspect(|signed| entry.signed = Some(signed.clone()))
                .map(|s| (s, before)),
        )
    }

    /// At a reload: the signed secondaries in `selection` (all when
    /// None: those whose signing `changed`) are signed again from their
    /// last unsigned version, keeping the signatures of `next`'s version
    /// not due; one no longer signed is served unsigned. Zones `next`
    /// does not serve (removed, expired) are left out. The reload
    /// journals and NOTIFYs what changed. Returns the versions signed.
    pub(crate) fn resign(
        &self,
        next: &mut Catalog,
        selection: Option<&HashSet<Name>>,
        changed: &HashSet<Name>,
    ) -> Vec<Arc<Zone>> {
        let mut signed_now = Vec::new();
        let wanted = |origin: &Name| {
            changed.contains(origin) || selection.is_some_and(|s| s.contains(origin))
        };
        let mut versions = self.versions.lock().unwrap_or_else(|e| e.into_inner());
        // Newly signed: the version served is the one received.
        for origin in changed {
            let served = next.get(origin).filter(|z| z.signed_chain_len().is_none());
            if let (Some(served), false) = (served, versions.contains_key(origin)) {
                let entry = versions.entry(origin.clone()).or_default();
                entry.unsigned = Some(served.clone());
            }
        }
        for (origin, entry) in versions.iter_mut() {
            // A zone not served now (removed by this reload, expired) is
            // left alone.
            let served_now = next.get(origin).is_some();
            let unsigned = entry.unsigned.clone();
            let Some(unsigned) = unsigned.filter(|_| wanted(origin) && served_now) else {
                continue;
            };
            let Some(signing) = self.signing(origin) else {
                tracing::info!(zone = %origin, "no longer signed: the version received is served");
                entry.signed = None;
                next.insert_shared(unsigned);
                continue;
            };
            let served = next.get(origin).cloned().or_else(|| entry.signed.clone());
            match sign_loaded(&*unsigned, served.as_deref(), &signing) {
                Ok(signed) => {
                    let signed = Arc::new(signed);
                    entry.signed = Some(signed.clone());
                    entry.failed = None;
                    next.insert_shared(signed.clone());
                    signed_now.push(signed);
                }
                Err(e) => {
                    let why = e.join("; ");
                    tracing::error!(
                        zone = %origin,
                        "cannot sign again: {why}; the version served stays"
                    );
                    entry.failed = Some(why);
                }
            }
        }
        versions.retain(|origin, _| self.signing(origin).is_some());
        signed_now
    }
}

/// A signed version, and the version it follows (for the journal).
pub(crate) type SignedVersion = (Arc<Zone>, Option<Arc<Zone>>);

/// A primary that changed its zone under the same serial is said, as
/// for a zone served unsigned: this server signs it with a serial of its
/// own, but the primary's other secondaries miss the change (black-box
/// finding BE-4: said for an unsigned secondary only).
fn warn_of_a_serial_kept(previous: &Zone, received: &Zone) {
    if previous.serial() != received.serial()
        || heron_zone::diff::diff(previous, received).is_empty()
    {
        return;
    }
    tracing::warn!(
        zone = %received.origin(),
        "zone {}: its primary's content changed but serial {} did not: signed here with a serial of its own, but the primary's other secondaries will not see the change until its serial moves on",
        received.origin(),
        received.serial()
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_dnssec::policy::Policy;
    use heron_proto::RType;
    use heron_zone::diff::diff;

    fn n(text: &str) -> Name {
        Name::parse(text).unwrap()
    }

    fn version(serial: u32, extra: &str) -> Arc<Zone> {
        let mut text = format!("@ 300 IN SOA ns hm {serial} 2 3 4 5\n@ 300 IN NS ns\n{extra}");
        for i in 0..20 {
            text.push_str(&format!("h{i:02} 300 IN A 192.0.2.{i}\n"));
        }
        Arc::new(
            heron_zone::load_zone_str(&text, "t", &n("s.test"))
                .unwrap()
                .zone,
        )
    }

    /// New RRSIG records from `old` to `new`.
    fn new_signatures(old: &Zone, new: &Zone) -> usize {
        let step = diff(old, new);
        step.added
            .iter()
            .filter(|r| r.rtype == RType::RRSIG)
            .count()
    }

    #[test]
    fn versions_received_are_signed_keeping_what_did_not_change() {
        let dir = tempfile::tempdir().unwrap();
        let signing = Arc::new(Signing {
            policy: Arc::new(Policy::default()),
            key_directory: dir.path().to_path_buf(),
        });
        let signed = SignedSecondaries::default();
        let changed = signed.set(&[(n("S.test"), signing.clone())]);
        assert_eq!(changed, HashSet::from([n("s.test")]));
        assert!(signed.set(&[(n("s.test"), signing)]).is_empty(), "same");
        let v1 = version(1, "");
        let (s1, before) = signed.sign_received(&v1, None).unwrap().unwrap();
        assert!(before.is_none() && s1.signed_chain_len().is_some());
        assert_eq!(s1.serial(), 1, "the primary's serial, none served");
        let start = signed.start_from(&n("s.test"), Some(&s1)).unwrap();
        assert!(
            Arc::ptr_eq(&start, &v1),
            "the unsigned version, not the signed"
        );
        // The same version again (a re-pointed zone) is not signed again.
        let (same, _) = signed.sign_received(&v1, Some(&s1)).unwrap().unwrap();
        assert!(Arc::ptr_eq(&same, &s1));
        // One record added: its RRset's, its NSEC neighbours' and the
        // SOA's signatures are new, none of the others'.
        let v2 = version(2, "new 300 IN A 192.0.2.99\n");
        let (s2, before) = signed.sign_received(&v2, Some(&s1)).unwrap().unwrap();
        assert!(Arc::ptr_eq(&before.unwrap(), &s1));
        assert_eq!(s2.serial(), 2);
        let new = new_signatures(&s1, &s2);
        assert!((2..=4).contains(&new), "{new} new signatures");
        // A reload naming it signs again from v2: one past the serial.
        let mut next = Catalog::new();
        next.insert_shared(s2.clone());
        let only = HashSet::from([n("s.test")]);
        let resigned = signed.resign(&mut next, Some(&only), &HashSet::new());
        let s3 = next.get(&n("s.test")).unwrap().clone();
        assert!(Arc::ptr_eq(&resigned[0], &s3));
        assert_eq!(
            s3.serial(),
            3,
            "past the serial served, not the primary's 2"
        );
        assert_eq!(new_signatures(&s2, &s3), 1, "the SOA's alone");
        // A zone not signed here is served as received.
        let before = signed.start_from(&n("u.test"), Some(&s3)).unwrap();
        assert!(Arc::ptr_eq(&before, &s3));
        // Removed by the reload (gone from `next`): not served again.
        let mut removed = Catalog::new();
        assert!(signed.resign(&mut removed, Some(&only), &only).is_empty());
        assert!(removed.get(&n("s.test")).is_none());
        // Its policy gone, the version received is served unsigned.
        let changed = signed.set(&[]);
        assert!(signed.sign_received(&v2, Some(&s3)).is_none());
        signed.resign(&mut next, None, &changed);
        assert!(Arc::ptr_eq(next.get(&n("s.test")).unwrap(), &v2));
    }

    /// A hidden primary that sends DNSSEC records of its own (a zone
    /// signed elsewhere, a stale ZONEMD): none of them is served beside
    /// the signatures made here, not its DNSKEY, RRSIG, NSEC, NSEC3PARAM,
    /// CDS, nor its ZONEMD (which cannot verify once signed here).
    #[test]
    fn the_primarys_own_dnssec_records_are_not_served() {
        let dir = tempfile::tempdir().unwrap();
        let signing = Arc::new(Signing {
            policy: Arc::new(Policy::default()),
            key_directory: dir.path().to_path_buf(),
        });
        let signed = SignedSecondaries::default();
        signed.set(&[(n("s.test"), signing)]);
        let foreign = "@ 300 IN DNSKEY 257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ==
@ 300 IN CDS 12345 13 2 0000000000000000000000000000000000000000000000000000000000000000
@ 300 IN ZONEMD 1 1 1 000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000
@ 300 IN NSEC3PARAM 1 0 0 -
h00 300 IN RRSIG A 13 3 300 20300101000000 20200101000000 12345 s.test. aaaa
h00 300 IN NSEC zz.s.test. A RRSIG NSEC
";
        let v = version(1, foreign);
        let (s, _) = signed.sign_received(&v, None).unwrap().unwrap();
        let gone = diff(&v, &s).deleted;
        for rtype in [
            RType::DNSKEY,
            RType::CDS,
            RType::ZONEMD,
            RType::NSEC3PARAM,
            RType::RRSIG,
            RType::NSEC,
        ] {
            let n = gone.iter().filter(|r| r.rtype == rtype).count();
            assert_eq!(n, 1, "the primary's {rtype} is not served");
        }
        assert!(s.apex().rrset(RType::ZONEMD).is_none());
        assert!(s.apex().rrset(RType::DNSKEY).is_some(), "its own DNSKEY");
        // The version received keeps them: the primary's IXFR deleting
        // them must apply to it.
        assert!(v.apex().rrset(RType::ZONEMD).is_some());
    }

    /// A primary that publishes a ZONEMD changes it with every version:
    /// the version received is still signed by its change (a few new
    /// signatures, not the whole zone's), and no ZONEMD is served.
    #[test]
    fn a_primarys_zonemd_does_not_make_every_version_a_whole_signing() {
        let dir = tempfile::tempdir().unwrap();
        let signing = Arc::new(Signing {
            policy: Arc::new(Policy::default()),
            key_directory: dir.path().to_path_buf(),
        });
        let signed = SignedSecondaries::default();
        signed.set(&[(n("s.test"), signing.clone())]);
        let zonemd = |serial: u32, digest: &str| {
            format!("@ 300 IN ZONEMD {serial} 1 1 {}\n", digest.repeat(96))
        };
        let v1 = version(1, &zonemd(1, "0"));
        let (s1, _) = signed.sign_received(&v1, None).unwrap().unwrap();
        let v2 = version(2, &(zonemd(2, "1") + "new 300 IN A 192.0.2.99\n"));
        let by_change = sign_change_received(&v1, &v2, &s1, &signing);
        assert!(matches!(by_change, Some(Ok(_))), "signed by the change");
        let (s2, _) = signed.sign_received(&v2, Some(&s1)).unwrap().unwrap();
        let new = new_signatures(&s1, &s2);
        assert!((2..=4).contains(&new), "{new} new signatures");
        assert!(s2.apex().rrset(RType::ZONEMD).is_none());
        assert!(s2.node(b"\x03new\x01s\x04test\x00").is_some());
    }
}
