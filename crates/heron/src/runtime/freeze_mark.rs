//! The mark `heron ctl freeze` leaves beside a zone's file (`FILE.frozen`,
//! removed by the thaw): the serial the freeze wrote and a digest of the
//! text it wrote. A restart does not keep the freeze (as BIND's and
//! Knot's are not kept): the start reads the mark to tell an edit made
//! during the freeze, which it takes as a thaw does, with the next serial
//! written to the file first when the edit left the serial as it was
//! (black-box finding AM-33: the edit was served under the old serial,
//! which secondaries hold without it).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use heron_proto::Name;
use heron_xfr::primary::ZonePolicy;
use heron_zone::Catalog;
use sha2::{Digest, Sha256};

use crate::config::shared_files::{FROZEN, beside};

/// The mark beside `file`.
fn mark_of(file: &Path) -> PathBuf {
    beside(file, FROZEN)
}

fn digest(text: &[u8]) -> String {
    Sha256::digest(text)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Marks `file` as written by a freeze at `serial`: its text as it is
/// now (synced, so that a crash keeps it with the file).
pub(crate) fn mark(file: &Path, serial: u32) -> std::io::Result<()> {
    use std::io::Write;
    let text = std::fs::read(file)?;
    let mark = mark_of(file);
    let mut out = std::fs::File::create(&mark)?;
    let said = format!(
        "; written by heron ctl freeze, removed by heron ctl thaw: the zone file's serial and digest as frozen\nserial {serial}\nsha256 {}\n",
        digest(&text)
    );
    out.write_all(said.as_bytes())?;
    out.sync_all()
}

/// Removes the mark beside `file`, if any.
pub(crate) fn unmark(file: &Path) {
    match std::fs::remove_file(mark_of(file)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => tracing::warn!(
            "cannot remove {}: {e}; the next start takes the zone file as edited during a freeze",
            mark_of(file).display()
        ),
        _ => {}
    }
}

/// The serial and digest a mark holds.
fn read_mark(mark: &Path) -> Option<(u32, String)> {
    let text = std::fs::read_to_string(mark).ok()?;
    let field = |key: &str| {
        (text.lines()).find_map(|l| l.strip_prefix(key)?.strip_prefix(' ').map(str::trim))
    };
    Some((field("serial")?.parse().ok()?, field("sha256")?.to_string()))
}

/// At a start: each zone that takes updates and was frozen when the
/// server stopped (its mark beside its file) is no longer frozen. Its
/// file edited with the serial left as the freeze wrote it (the journal's
/// last serial, which secondaries may hold) gets the next serial, written
/// to the file before it is served, as a thaw does. The mark is then
/// removed; kept when the serial cannot be written (said, and the edit
/// served under the old serial).
pub(crate) fn thaw_at_start(
    catalog: &mut Catalog,
    zones: &[crate::config::ZoneSpec],
    policies: &HashMap<Name, ZonePolicy>,
) {
    let takes_updates = |o: &Name| policies.get(o).is_some_and(|p| p.takes_updates());
    let candidates: Vec<&crate::config::ZoneSpec> = (zones.iter())
        .filter(|z| !z.kept && takes_updates(&z.origin))
        .collect();
    let marks: Vec<PathBuf> = candidates.iter().map(|z| mark_of(&z.file)).collect();
    let exist = heron_xfr::secondary::store::which_exist(
        &marks.iter().map(|p| p.as_path()).collect::<Vec<_>>(),
    );
    let marked = (candidates.into_iter().zip(marks).zip(exist)).filter(|(_, exists)| *exists);
    for ((spec, mark), _) in marked {
        let Some(zone) = catalog.get(&spec.origin).cloned() else {
            continue; // not loaded: the mark waits for a start that loads it
        };
        let origin = zone.origin();
        let edited = read_mark(&mark).is_none_or(|(serial, sha)| {
            let text = std::fs::read(&spec.file).unwrap_or_default();
            serial == zone.serial() && digest(&text) != sha
        });
        let signed = spec.signing.is_some();
        if !edited || signed {
            // A signed zone's start signs its file with a serial of its own.
            tracing::info!(
                "zone {origin} was frozen when the server stopped: the freeze is not kept, updates are taken"
            );
            unmark(&spec.file);
            continue;
        }
        let policy = &policies[&spec.origin];
        match super::update::bumped_into(&zone, &spec.file, policy) {
            Ok(bumped) => {
                tracing::warn!(
                    "zone {origin} was frozen when the server stopped, its file edited with its serial left at {}: the edit is served with serial {}, written to the file; the freeze is not kept, updates are taken",
                    zone.serial(),
                    bumped.serial()
                );
                catalog.insert(bumped);
                unmark(&spec.file);
            }
            Err(why) => tracing::error!(
                "zone {origin} was frozen when the server stopped, its file edited with its serial left at {}, but {why}: served with serial {}, which secondaries may hold without the edit; the freeze is not kept",
                zone.serial(),
                zone.serial()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_holds_the_serial_and_the_texts_digest() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("z.zone");
        std::fs::write(&file, "text").unwrap();
        mark(&file, 7).unwrap();
        let (serial, sha) = read_mark(&mark_of(&file)).unwrap();
        assert_eq!((serial, sha), (7, digest(b"text")));
        unmark(&file);
        assert!(!mark_of(&file).exists());
        unmark(&file); // gone already: nothing said
    }
}
