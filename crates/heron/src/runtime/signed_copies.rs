//! The signed versions of the zones Heron signs, kept on disk
//! (`FILE.signed`, beside the zone file for a primary zone, beside the
//! kept copy for a secondary zone), so that a restart signs the zone
//! again keeping every signature not due (only the SOA's is new when
//! nothing changed) and the journal of the signed versions carries on
//! from the serial served before (an IXFR from it stays incremental).
//!
//! A copy is written after each signing served (a load, a reload, a
//! batch of updates), by the keeper thread: a temporary file, synced,
//! then renamed. Writes are paced ([`Keeper::write_at_paced`]): a zone
//! signed again many times a second (updates) has its copy written a
//! few times a minute, the newest version each time, and at shutdown.
//! A copy older than the version served (a crash before its turn) is
//! brought to that version by the journal's steps after it at the
//! restart ([`crate::runtime::update_signed::bring_forward`]). One that
//! does not load, whose seal does not hold (`heron_xfr::secondary::seal`:
//! cut short, a bit flipped on the disk) or that is of another zone is not
//! used: the zone is signed afresh, as if there were none. A copy is
//! only ever the previous version of a signing: its signatures are
//! taken over only where the RRset is the same and the key is still a
//! signer, and nothing in it is served as it is.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, RwLock};

use heron_proto::Name;
use heron_xfr::secondary::keeper::Keeper;
use heron_zone::Zone;

use crate::config::ZoneSpec;
use crate::plan::zone_files::load_parallel;

/// Where the signed version of the zone whose file (or kept copy) is
/// `file` is kept.
pub(crate) fn signed_copy(file: &Path) -> PathBuf {
    use crate::config::shared_files::{SIGNED_COPY, beside};
    beside(file, SIGNED_COPY)
}

/// Reads the signed copies of `zones` (origin, zone file) that exist,
/// on every core, as zone files are read; one that does not load is
/// logged and left out (its zone is signed afresh).
pub(crate) fn load(zones: &[(Name, PathBuf)]) -> Vec<Zone> {
    let specs: Vec<ZoneSpec> = (zones.iter())
        .map(|(origin, file)| ZoneSpec {
            origin: origin.clone(),
            file: signed_copy(file),
            signing: None,
            kept: true,
        })
        .filter(|spec| spec.file.exists())
        .collect();
    if specs.is_empty() {
        // No load at all: the loader's progress would tell systemd of
        // one ("loading: 0 of 0 zones") before the zone files'.
        return Vec::new();
    }
    let loaded = load_parallel(&specs.iter().collect::<Vec<_>>(), &Default::default());
    (specs.iter().zip(loaded))
        .filter_map(|(spec, loaded)| match loaded {
            Ok((zone, _)) => zone,
            Err(problems) => {
                // BIND's inline-signing copy (raw form reads as garbage).
                let why = match heron_xfr::secondary::keeper::holds_another_file(&spec.file) {
                    true => "not a copy Heron wrote: another server's, such as BIND's inline-signing copy; left as it is",
                    false => problems.first().map_or("", |p| p.as_str()),
                };
                tracing::warn!(
                    zone = %spec.origin,
                    "signed copy {} not used ({why}): the zone is signed afresh",
                    spec.file.display(),
                );
                None
            }
        })
        .collect()
}

/// At a start, each signed zone served as kept before the restart (its
/// file did not load: `FILE.signed` brought forward by the journal) whose
/// serial is older than the one last served (`ZONE.heron-serial`: the
/// journal was lost or cut short after the copy) is signed again, past
/// that serial: secondaries holding it would take nothing older, nor
/// another version at it (black-box finding AK-1). The step from the
/// kept version is journalled as any start's (`serve::carry_on`).
pub(crate) fn past_the_served_serial(
    catalog: &mut heron_zone::Catalog,
    signed: &[(Name, Arc<crate::config::dnssec::Signing>)],
    signed_before: &[Arc<Zone>],
) {
    use crate::plan::signing::{served_before_start, sign_loaded};
    for (origin, signing) in signed {
        let Some(before) = signed_before.iter().find(|z| z.origin() == origin) else {
            continue;
        };
        let served_as_kept = catalog.get(origin).is_some_and(|z| Arc::ptr_eq(z, before));
        let Some(last) = served_before_start(signing, origin).filter(|_| served_as_kept) else {
            continue;
        };
        if !heron_xfr::serial::is_newer(last, before.serial()) {
            continue;
        }
        match sign_loaded(&**before, Some(before), signing) {
            Ok(zone) => {
                tracing::warn!(
                    "zone {origin}: its signed copy, brought forward by its journal, is at serial {} but serial {last} was served (the journal was lost or cut short): signed again with serial {}",
                    before.serial(),
                    zone.serial()
                );
                catalog.insert(zone);
            }
            Err(e) => tracing::error!(
                "zone {origin}: its signed copy is at serial {} but serial {last} was served, and it cannot be signed again: {}; served as it is",
                before.serial(),
                e.join("; ")
            ),
        }
    }
}

/// The signed copies of the primary zones Heron signs: where each goes,
/// and the thread that writes them (started at the first write).
#[derive(Default)]
pub(crate) struct SignedCopies {
    /// Lower-cased origin to its zone file.
    files: RwLock<HashMap<Name, PathBuf>>,
    keeper: OnceLock<Option<Keeper>>,
}

impl SignedCopies {
    /// The zones signed now, with their files (`ZoneFiles::signed_copies`).
    pub(crate) fn set(&self, files: Vec<(Name, PathBuf)>) {
        let map = (files.into_iter())
            .map(|(origin, file)| (origin.to_lowercase(), signed_copy(&file)))
            .collect();
        *self.files.write().unwrap_or_else(|e| e.into_inner()) = map;
    }

    /// Keeps those of `zones` that are signed here (atomically, paced).
    pub(crate) fn keep(&self, zones: &[Arc<Zone>]) {
        let files = self.files.read().unwrap_or_else(|e| e.into_inner());
        for zone in zones {
            let Some(path) = files.get(&zone.origin().to_lowercase()) else {
                continue;
            };
            if let Some(keeper) = self.keeper() {
                keeper.write_at_paced(path.clone(), zone.clone());
            }
        }
    }

    fn keeper(&self) -> Option<&Keeper> {
        let started = self.keeper.get_or_init(|| {
            let lower = || {
                crate::background::lower_this_thread();
            };
            Keeper::start_with(lower)
                .map_err(|e| {
                    tracing::error!(
                        "cannot start the thread that keeps signed zones: {e}; a restart signs them afresh"
                    )
                })
                .ok()
        });
        started.as_ref()
    }

    /// Waits, up to `wait`, until every copy queued is on disk.
    pub(crate) fn flush(&self, wait: std::time::Duration) -> bool {
        self.keeper
            .get()
            .and_then(Option::as_ref)
            .is_none_or(|k| k.flush(wait))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signed_copy_is_beside_the_file() {
        let path = signed_copy(Path::new("/var/lib/heron/s.test.zone"));
        assert_eq!(path, Path::new("/var/lib/heron/s.test.zone.signed"));
    }
}
