//! Catalog zones Heron generates (RFC 9432): built from the configuration
//! at start and at each reload, written to their file, then served,
//! journaled and announced like any primary zone that changed.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use heron_proto::Name;
use heron_xfr::catalog_zone::generate::{Generated, generate};
use heron_xfr::primary::Primary;
use heron_zone::{Catalog, load_zone_file};

use crate::config::GeneratedCatalog;

/// The versions `catalogs` kept in their files before a restart, put in
/// `catalog`, so that journal files are read back against them and a
/// catalog that did not change keeps its serial.
pub fn insert_kept(catalogs: &[GeneratedCatalog], catalog: &mut Catalog) {
    for generated in catalogs.iter().filter(|c| c.file.exists()) {
        match load_zone_file(&generated.file, &generated.origin) {
            Ok(loaded) => catalog.insert(loaded.zone),
            Err(problems) => {
                let first = problems.first().map(ToString::to_string);
                tracing::warn!(
                    zone = %generated.origin,
                    "the kept catalog {} does not load ({}); the catalog starts over with a serial from the clock",
                    generated.file.display(),
                    first.unwrap_or_default()
                );
            }
        }
    }
}

/// [`update`] at start: the catalogs that changed while the server was
/// down are journaled from their kept version, so consumers that have it
/// get an IXFR.
pub fn update_at_start(
    catalogs: &[GeneratedCatalog],
    catalog: Catalog,
    primary: &Primary,
) -> Catalog {
    let mut next = catalog.clone();
    update(catalogs, &mut next);
    for generated in catalogs {
        if let (Some(old), Some(new)) =
            (catalog.get(&generated.origin), next.get(&generated.origin))
            && !std::sync::Arc::ptr_eq(old, new)
        {
            primary.zone_changed(old, new);
        }
    }
    next
}

/// Puts in `next` a new version of every catalog whose members are not
/// those `next` serves, and writes it to the catalog's file; which those
/// were. The caller journals and announces what changed, as for any zone.
pub fn update(catalogs: &[GeneratedCatalog], next: &mut Catalog) -> Vec<heron_proto::Name> {
    let now = unix_now();
    let mut changed = Vec::new();
    for generated in catalogs {
        let current = next.get(&generated.origin).map(|zone| &**zone);
        let Generated::New { zone, text } =
            generate(&generated.origin, &generated.members, current, now)
        else {
            continue;
        };
        tracing::info!(
            zone = %generated.origin,
            serial = zone.serial(),
            members = generated.members.len(),
            "catalog zone generated"
        );
        // Written before the lock is taken: zone-status and the metrics
        // read the failures while a slow disk syncs.
        let written = write_atomically(&generated.file, &text);
        let mut failures = WRITE_FAILURES.lock().unwrap_or_else(|e| e.into_inner());
        match written {
            Ok(()) => _ = failures.remove(&generated.origin.to_lowercase()),
            Err(e) => {
                tracing::error!(
                    zone = %generated.origin,
                    "cannot keep the catalog in {}: {e}; after a restart its serial comes from the clock (tried again every minute)",
                    generated.file.display()
                );
                let failed = Failed {
                    why: format!("{}: {e}", generated.file.display()),
                    file: generated.file.clone(),
                    text,
                };
                failures.insert(generated.origin.to_lowercase(), failed);
            }
        }
        next.insert(zone);
        changed.push(generated.origin.clone());
    }
    changed
}

/// [`update`] at a reload, which gives every catalog generated now: the
/// others have no file to write again.
pub fn update_at_reload(catalogs: &[GeneratedCatalog], next: &mut Catalog) -> Vec<Name> {
    let changed = update(catalogs, next);
    let mut failures = WRITE_FAILURES.lock().unwrap_or_else(|e| e.into_inner());
    drop_not_generated(&mut failures, catalogs);
    changed
}

/// A catalog no longer generated has no file to write.
fn drop_not_generated(failures: &mut HashMap<Name, Failed>, catalogs: &[GeneratedCatalog]) {
    let generated: Vec<Name> = catalogs.iter().map(|c| c.origin.to_lowercase()).collect();
    failures.retain(|origin, _| generated.contains(origin));
}

/// Writes again each generated catalog's file whose last write failed
/// (the version served, kept with the failure), until it is written:
/// called every minute. A file written is said once (regression hunt
/// BR-19: it waited for the catalog's next version).
pub fn write_failed_again() {
    // Copied out, then written without the lock (a slow disk would hold
    // zone-status and the metrics); a version made meanwhile stands.
    let waiting: Vec<(Name, std::path::PathBuf, String)> = (WRITE_FAILURES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter())
    .map(|(origin, f)| (origin.clone(), f.file.clone(), f.text.clone()))
    .collect();
    for (origin, file, text) in waiting {
        let written = write_atomically(&file, &text);
        let mut failures = WRITE_FAILURES.lock().unwrap_or_else(|e| e.into_inner());
        let Some(failed) = failures.get_mut(&origin).filter(|f| f.text == text) else {
            continue;
        };
        match written {
            Ok(()) => {
                failures.remove(&origin);
                tracing::info!(zone = %origin, "catalog written to {} after a failed try", file.display());
            }
            Err(e) => failed.why = format!("{}: {e}", file.display()),
        }
    }
}

/// Whether some generated catalog's file waits to be written again.
pub fn writes_failed() -> bool {
    !(WRITE_FAILURES.lock().unwrap_or_else(|e| e.into_inner())).is_empty()
}

/// A generated catalog's file not written: why, and what to write.
struct Failed {
    why: String,
    file: std::path::PathBuf,
    text: String,
}

/// Why each generated catalog's file could not be written, until a
/// version of it is: `heron ctl zone-status` and the `write_failing`
/// count say so (regression hunt BR-19: one log line alone).
static WRITE_FAILURES: std::sync::LazyLock<std::sync::Mutex<HashMap<Name, Failed>>> =
    std::sync::LazyLock::new(Default::default);

/// Why the file of the generated catalog `origin` was not written, if
/// its last version's was not.
pub fn write_error_of(origin: &heron_proto::Name) -> Option<String> {
    let failures = WRITE_FAILURES.lock().unwrap_or_else(|e| e.into_inner());
    failures.get(&origin.to_lowercase()).map(|f| f.why.clone())
}

/// Writes `text` to a new file beside `path`, syncs it and renames it
/// over `path`: after a crash the file is the old or the new version.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let written = std::fs::File::create(&tmp)
        .and_then(|mut file| {
            file.write_all(text.as_bytes())
                .and_then(|()| file.sync_all())
        })
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        // Cut short (a full disk, a file-size limit): none left holding
        // the space (regression hunt BR-19).
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Seconds since 1970, as a serial counts them (mod 2^32).
fn unix_now() -> u32 {
    heron_proto::time::unix_now() as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_proto::Name;
    use heron_xfr::catalog_zone::generate::Wanted;
    use heron_xfr::catalog_zone::parse_zone;
    use heron_xfr::primary::ZonePolicy;
    use std::collections::HashMap;

    fn catalog_in(dir: &Path, members: &[&str]) -> GeneratedCatalog {
        GeneratedCatalog {
            origin: Name::parse("catalog.invalid").unwrap(),
            file: dir.join("catalog.zone"),
            members: members
                .iter()
                .map(|m| Wanted {
                    zone: Name::parse(m).unwrap(),
                    group: None,
                    generation: 0,
                })
                .collect(),
        }
    }

    fn serial(catalog: &Catalog) -> u32 {
        let origin = Name::parse("catalog.invalid").unwrap();
        catalog.get(&origin).unwrap().serial()
    }

    /// BR-19: a catalog file that cannot be written is said (zone-status,
    /// the write_failing count) until a version of it is; its temporary
    /// is not left behind.
    #[test]
    fn a_catalog_file_not_written_is_said_until_one_is() {
        let dir = tempfile::tempdir().unwrap();
        let blocked = dir.path().join("blocked");
        std::fs::write(&blocked, "a file where a folder should be").unwrap();
        let mut catalog = catalog_in(&blocked, &["a.test"]);
        // Its own origin: the other tests' catalogs are written fine.
        catalog.origin = Name::parse("blocked.invalid").unwrap();
        let mut next = Catalog::new();
        assert_eq!(update(std::slice::from_ref(&catalog), &mut next).len(), 1);
        let why = write_error_of(&catalog.origin).expect("said");
        assert!(why.contains("catalog.zone"), "{why}");
        catalog.file = dir.path().join("catalog.zone");
        catalog.members.push(Wanted {
            zone: Name::parse("b.test").unwrap(),
            group: None,
            generation: 0,
        });
        assert_eq!(update(std::slice::from_ref(&catalog), &mut next).len(), 1);
        assert_eq!(write_error_of(&catalog.origin), None);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "no temporary left: {names:?}");
        written_again();
    }

    /// BR-19 rest: a catalog file whose write failed is written again
    /// (every minute in the server) once it can be, with the version
    /// served, without waiting for the catalog's next version; a catalog
    /// no longer generated is not tried again.
    fn written_again() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("later");
        let mut catalog = catalog_in(&folder, &["a.test", "b.test"]);
        catalog.origin = Name::parse("retried.invalid").unwrap();
        let mut next = Catalog::new();
        update(std::slice::from_ref(&catalog), &mut next);
        assert!(write_error_of(&catalog.origin).is_some());
        write_failed_again();
        assert!(write_error_of(&catalog.origin).is_some(), "still no folder");
        std::fs::create_dir(&folder).unwrap();
        write_failed_again();
        assert_eq!(write_error_of(&catalog.origin), None);
        let text = std::fs::read_to_string(folder.join("catalog.zone")).unwrap();
        let served = next.get(&catalog.origin).unwrap().serial().to_string();
        assert!(text.contains(&served) && text.contains("b.test"), "{text}");
        // No longer generated: forgotten (on a map of its own: other
        // tests share the server's).
        let failed = || Failed {
            why: String::new(),
            file: folder.join("x"),
            text: String::new(),
        };
        let mut failures = HashMap::from([
            (catalog.origin.to_lowercase(), failed()),
            (Name::parse("gone.invalid").unwrap(), failed()),
        ]);
        drop_not_generated(&mut failures, std::slice::from_ref(&catalog));
        let kept: Vec<&Name> = failures.keys().collect();
        assert_eq!(kept, [&catalog.origin.to_lowercase()]);
    }

    #[test]
    fn a_restart_keeps_the_serial_unless_the_members_changed() {
        let dir = tempfile::tempdir().unwrap();
        let two = [catalog_in(dir.path(), &["a.test", "b.test"])];
        let policy = ZonePolicy {
            allow_transfer: heron_xfr::acl::Acl::new(vec![heron_xfr::acl::Rule {
                prefix: "127.0.0.1".parse().unwrap(),
                key: None,
            }]),
            ..ZonePolicy::default()
        };
        let policies = HashMap::from([(two[0].origin.clone(), policy)]);
        let primary = Primary::new(policies, 1 << 20);

        // First start: nothing kept.
        let mut start = Catalog::new();
        insert_kept(&two, &mut start);
        let first = update_at_start(&two, start, &primary);
        let first_serial = serial(&first);

        // Restart with the same members: the kept version, same serial.
        let mut start = Catalog::new();
        insert_kept(&two, &mut start);
        assert_eq!(serial(&start), first_serial);
        let again = update_at_start(&two, start, &primary);
        assert_eq!(serial(&again), first_serial);

        // Restart with a member more: a later serial, and the step from
        // the kept version in the journal.
        let three = [catalog_in(dir.path(), &["a.test", "b.test", "c.test"])];
        let mut start = Catalog::new();
        insert_kept(&three, &mut start);
        let changed = update_at_start(&three, start, &primary);
        let new_serial = serial(&changed);
        assert!(heron_xfr::serial::is_newer(new_serial, first_serial));
        let zone = changed.get(&three[0].origin).unwrap();
        assert_eq!(parse_zone(zone).unwrap().len(), 3);
        let plan = primary.plan(zone, Some(first_serial));
        assert!(
            matches!(plan, heron_xfr::primary::TransferPlan::Ixfr(_)),
            "{plan:?}"
        );
    }

    #[test]
    fn a_kept_file_that_does_not_load_starts_over() {
        let dir = tempfile::tempdir().unwrap();
        let generated = [catalog_in(dir.path(), &["a.test"])];
        std::fs::write(&generated[0].file, "not a zone\n").unwrap();
        let mut start = Catalog::new();
        insert_kept(&generated, &mut start);
        assert!(start.is_empty());
        let mut next = start.clone();
        update(&generated, &mut next);
        assert_eq!(
            parse_zone(next.get(&generated[0].origin).unwrap())
                .unwrap()
                .len(),
            1
        );
        let written = std::fs::read_to_string(&generated[0].file).unwrap();
        assert!(written.contains("PTR a.test."), "{written}");
    }
}
