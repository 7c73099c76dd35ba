//! Secondary zones Heron signs (`dnssec-policy` with `primaries`): a
//! "bump in the wire" signer behind a hidden primary, as Knot's
//! `dnssec-signing: on` on a secondary zone.
//!
//! The refresh task keeps the unsigned version it transfers (its serial
//! is the primary's, which its SOA checks and IXFR requests compare
//! against) and writes it as the zone's kept copy. Each version it
//! publishes is signed here, before it is served, with the incremental
//! signer ([`crate::plan::signing::sign_loaded`]) and the version served
//! as the previous one: the signatures of RRsets that did not change are
//! kept, so an IXFR of one changed RRset costs a few new signatures.
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
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use heron_proto::Name;
use heron_zone::{Catalog, Zone};

use crate::config::dnssec::Signing;
use crate::plan::signing::sign_loaded;

/// The versions of one signed secondary zone.
#[derive(Default)]
struct Versions {
    /// The last version received from the primaries, unsigned.
    unsigned: Option<Arc<Zone>>,
    /// The last version signed from it (what is served, or what a
    /// restart found kept).
    signed: Option<Arc<Zone>>,
}

/// The secondary zones Heron signs, how, and their last versions; by
/// lower-cased origin.
#[derive(Default)]
pub(crate) struct SignedSecondaries {
    signings: Mutex<HashMap<Name, Arc<Signing>>>,
    versions: Mutex<HashMap<Name, Versions>>,
}

/// Where the signed version of a secondary zone kept in `kept` is kept.
pub(crate) fn signed_copy(kept: &Path) -> PathBuf {
    let mut path = kept.as_os_str().to_owned();
    path.push(".signed");
    PathBuf::from(path)
}

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

    pub(crate) fn signing(&self, origin: &Name) -> Option<Arc<Signing>> {
        let signings = self.signings.lock().unwrap_or_else(|e| e.into_inner());
        signings.get(&origin.to_lowercase()).cloned()
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
        entry.unsigned = Some(unsigned.clone());
        let before = served.cloned().or_else(|| entry.signed.clone());
        let signed = sign_loaded(unsigned, before.as_deref(), &signing).map(Arc::new);
        Some(match signed {
            Ok(signed) => {
                entry.signed = Some(signed.clone());
                Ok((signed, before))
            }
            Err(e) => Err(e.join("; ")),
        })
    }

    /// At a reload: the signed secondaries in `selection` (all when
    /// None: those whose signing `changed`) are signed again from their
    /// last unsigned version, keeping the signatures of `next`'s version
    /// not due; one no longer signed is served unsigned. The reload
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
            let Some(unsigned) = entry.unsigned.clone().filter(|_| wanted(origin)) else {
                continue;
            };
            let Some(signing) = self.signing(origin) else {
                tracing::info!(zone = %origin, "no longer signed: the version received is served");
                entry.signed = None;
                next.insert_shared(unsigned);
                continue;
            };
            let served = next.get(origin).cloned().or_else(|| entry.signed.clone());
            match sign_loaded(&unsigned, served.as_deref(), &signing) {
                Ok(signed) => {
                    let signed = Arc::new(signed);
                    entry.signed = Some(signed.clone());
                    next.insert_shared(signed.clone());
                    signed_now.push(signed);
                }
                Err(e) => tracing::error!(
                    zone = %origin,
                    "cannot sign again: {}; the version served stays",
                    e.join("; ")
                ),
            }
        }
        versions.retain(|origin, _| self.signing(origin).is_some());
        signed_now
    }
}

/// A signed version, and the version it follows (for the journal).
pub(crate) type SignedVersion = (Arc<Zone>, Option<Arc<Zone>>);
