//! Where a signed zone's keys are, noted beside its file (`FILE.key-directory`,
//! for a secondary beside its kept copy) when they are in a
//! `key-directory` of its own. A start that finds the zone's
//! `dnssec-policy` gone (removed while the server was stopped) has no
//! configuration left that names that directory; the note is how it still
//! finds the zone's key state and refuses to serve the zone unsigned
//! while a DS of it may be at the parent (`key_state::unsigned_with_ds_at_start`).

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use heron_proto::Name;
use heron_xfr::secondary::store::which_exist;
use heron_xfr::secondary::zone::SecondaryZone;

use crate::config::Settings;

/// The note beside `file`.
pub fn note_path(file: &Path) -> PathBuf {
    use crate::config::shared_files::{KEY_NOTE, beside};
    beside(file, KEY_NOTE)
}

/// The key directory a zone gets without a `key-directory`: `keys`
/// beside the configuration file.
pub fn default_key_directory(config: &Path) -> PathBuf {
    config.parent().unwrap_or(Path::new(".")).join("keys")
}

/// The zones of `settings` Heron signs, each with its file (zone file or
/// kept copy) and key directory.
fn signed_zones(settings: &Settings) -> Vec<(PathBuf, &Path)> {
    signed_zones_by_origin(settings)
        .into_iter()
        .map(|(_, file, keys)| (file, keys))
        .collect()
}

fn signed_zones_by_origin(settings: &Settings) -> Vec<(&Name, PathBuf, &Path)> {
    let kept: HashMap<Name, &SecondaryZone> = (settings.secondaries.iter())
        .map(|z| (z.origin.to_lowercase(), z))
        .collect();
    let primaries = (settings.zones.iter()).filter_map(|z| {
        let keys = &*z.signing.as_ref()?.key_directory;
        Some((&z.origin, z.file.clone(), keys))
    });
    let secondaries = settings
        .signed_secondaries
        .iter()
        .filter_map(|(origin, s)| {
            let zone = kept.get(&origin.to_lowercase())?;
            Some((origin, zone.kept_path().into_owned(), &*s.key_directory))
        });
    primaries.chain(secondaries).collect()
}

/// Each zone Heron signs whose keys were last in another directory than
/// its `key-directory` now: (origin, where they were, where they are
/// looked for). Where they were is what the note beside its file says,
/// or without a note the default directory. Read before the notes are
/// written again.
pub fn previous_key_directories<'s>(
    settings: &'s Settings,
    config: &Path,
) -> Vec<(&'s Name, PathBuf, &'s Path)> {
    let default = default_key_directory(config);
    let zones = signed_zones_by_origin(settings);
    let notes: Vec<PathBuf> = zones.iter().map(|(_, file, _)| note_path(file)).collect();
    let exist = which_exist(&notes.iter().map(|p| &**p).collect::<Vec<_>>());
    let noted = |note: &Path| {
        let text = fs::read_to_string(note).ok()?;
        text.lines()
            .next()
            .filter(|l| !l.is_empty())
            .map(PathBuf::from)
    };
    (zones.into_iter().zip(&notes).zip(exist))
        .filter_map(|(((origin, _, keys), note), exists)| {
            let was = exists
                .then(|| noted(note))
                .flatten()
                .unwrap_or_else(|| default.clone());
            (!same_directory(&was, keys)).then_some((origin, was, keys))
        })
        .collect()
}

/// Notes where the keys of each zone signed in `settings` are, if not in
/// the default directory, and takes back a note that no longer holds
/// (the zone's keys moved to the default one). Only notes that exist are
/// read or removed (their folders listed once: most zones keep their keys
/// in the default directory and have none); a note is written only when
/// it changed, and one that cannot be written is a warning.
pub fn note_key_directories(settings: &Settings, config: &Path) {
    let default = default_key_directory(config);
    let zones = signed_zones(settings);
    let notes: Vec<PathBuf> = zones.iter().map(|(file, _)| note_path(file)).collect();
    let exist = which_exist(&notes.iter().map(|p| &**p).collect::<Vec<_>>());
    for (((file, keys), note), exists) in zones.iter().zip(&notes).zip(exist) {
        if same_directory(keys, &default) {
            if exists {
                let _ = fs::remove_file(note);
            }
            continue;
        }
        let text = format!("{}\n", absolute(keys).display());
        if exists && fs::read_to_string(note).is_ok_and(|t| t == text) {
            continue;
        }
        if let Err(e) = fs::write(note, text) {
            tracing::warn!(
                "cannot note where the keys of {} are in {}: {e}; a start with its \
                 dnssec-policy removed will not find them",
                file.display(),
                note.display()
            );
        }
    }
}

/// Of `unsigned` (zones served unsigned, each with its file), those with
/// a note, each with the key directory it names. The notes' folders are
/// listed once, not asked about zone by zone.
pub fn noted(unsigned: Vec<(&Name, PathBuf)>) -> Vec<(&Name, PathBuf)> {
    let notes: Vec<PathBuf> = unsigned.iter().map(|(_, f)| note_path(f)).collect();
    let exist = which_exist(&notes.iter().map(|p| &**p).collect::<Vec<_>>());
    (unsigned.into_iter().zip(notes).zip(exist))
        .filter(|(_, exists)| *exists)
        .filter_map(|(((origin, _), note), _)| {
            let text = fs::read_to_string(&note).ok()?;
            let dir = text.lines().next().filter(|l| !l.is_empty())?;
            Some((origin, PathBuf::from(dir)))
        })
        .collect()
}

fn absolute(dir: &Path) -> PathBuf {
    std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())
}

/// Whether two paths name one directory (`./keys` and `keys` alike).
pub fn same_directory(a: &Path, b: &Path) -> bool {
    absolute(a) == absolute(b)
}

/// The file each zone of `settings` that Heron does not sign is read
/// from: a primary's zone file, a secondary's kept copy.
pub fn unsigned_zones(settings: &Settings) -> Vec<(&Name, PathBuf)> {
    let signed: std::collections::HashSet<&Name> = (settings.signed_secondaries.iter())
        .map(|(origin, _)| origin)
        .collect();
    let files = (settings.zones.iter())
        .filter(|z| z.signing.is_none())
        .map(|z| (&z.origin, z.file.clone()));
    let secondaries = (settings.secondaries.iter())
        .filter(|s| !signed.contains(&s.origin))
        .map(|s| (&s.origin, s.kept_path().into_owned()));
    files.chain(secondaries).collect()
}
