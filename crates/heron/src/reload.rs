//! Reloading zone files: only those that changed are read again, and a new
//! catalog is swapped in whole. A file with errors is reported and its zone
//! keeps serving the version loaded before.

use std::path::Path;
use std::time::{Instant, SystemTime};

use heron_zone::{Catalog, load_zone_file};

use crate::config::ZoneSpec;

/// What a zone file looked like when it was last loaded.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Stamp {
    modified: SystemTime,
    len: u64,
    inode: u64,
}

impl Stamp {
    fn of(path: &Path) -> Option<Stamp> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        Some(Stamp {
            modified: meta.modified().ok()?,
            len: meta.len(),
            inode: meta.ino(),
        })
    }
}

struct Entry {
    spec: ZoneSpec,
    /// None until a load of the file succeeds.
    loaded: Option<Stamp>,
}

/// The configured zone files and the state each was loaded in.
pub struct ZoneFiles {
    entries: Vec<Entry>,
}

/// What one load or reload did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub loaded: usize,
    pub unchanged: usize,
    pub failed: usize,
}

impl ZoneFiles {
    pub fn new(specs: &[ZoneSpec]) -> ZoneFiles {
        ZoneFiles {
            entries: specs
                .iter()
                .map(|spec| Entry {
                    spec: spec.clone(),
                    loaded: None,
                })
                .collect(),
        }
    }

    /// A catalog like `current` with every zone whose file changed since it
    /// was loaded (or never loaded) read again. A zone that fails keeps its
    /// version from `current`, if it has one; its problems are logged.
    pub fn load_changed(&mut self, current: &Catalog) -> (Catalog, Outcome) {
        let mut next = current.clone();
        let mut outcome = Outcome::default();
        for entry in &mut self.entries {
            let stamp = Stamp::of(&entry.spec.file);
            if stamp.is_some() && stamp == entry.loaded {
                outcome.unchanged += 1;
                continue;
            }
            if load_one(&entry.spec, &mut next) {
                entry.loaded = stamp;
                outcome.loaded += 1;
            } else {
                outcome.failed += 1;
            }
        }
        (next, outcome)
    }
}

/// Loads one zone into `catalog`; false (with the problems logged) if it
/// has errors.
fn load_one(spec: &ZoneSpec, catalog: &mut Catalog) -> bool {
    let started = Instant::now();
    match load_zone_file(&spec.file, &spec.origin) {
        Ok(loaded) => {
            loaded.warnings.iter().for_each(|w| tracing::warn!("{w}"));
            tracing::info!(
                "zone {} loaded from {} in {} ms: serial {}, {} records",
                spec.origin,
                spec.file.display(),
                started.elapsed().as_millis(),
                loaded.zone.serial(),
                loaded.zone.record_count()
            );
            catalog.insert(loaded.zone);
            true
        }
        Err(problems) => {
            problems.iter().for_each(|p| tracing::error!("{p}"));
            if catalog.get(&spec.origin).is_some() {
                tracing::error!(
                    "zone {} not reloaded; the previous version is still served",
                    spec.origin
                );
            } else {
                tracing::error!("zone {} not loaded; it will not be served", spec.origin);
            }
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_proto::Name;

    fn zone_text(serial: u32, extra: &str) -> String {
        format!("$TTL 60\n@ SOA ns h {serial} 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n{extra}")
    }

    #[test]
    fn only_changed_files_are_read_and_errors_keep_the_old_version() {
        let dir = std::env::temp_dir().join(format!("heron-reload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a.zone"), dir.join("b.zone"));
        std::fs::write(&a, zone_text(1, "")).unwrap();
        std::fs::write(&b, zone_text(1, "")).unwrap();
        let spec = |o: &str, f: &Path| ZoneSpec {
            origin: Name::parse(o).unwrap(),
            file: f.to_path_buf(),
        };
        let mut files = ZoneFiles::new(&[spec("a.test", &a), spec("b.test", &b)]);
        let (cat, out) = files.load_changed(&Catalog::new());
        assert_eq!((out.loaded, out.unchanged, out.failed), (2, 0, 0));

        let (cat, out) = files.load_changed(&cat);
        assert_eq!((out.loaded, out.unchanged), (0, 2), "nothing changed");

        std::fs::write(&a, zone_text(2, "www A 192.0.2.2\n")).unwrap();
        let (cat, out) = files.load_changed(&cat);
        assert_eq!((out.loaded, out.unchanged), (1, 1));
        let serial = |c: &Catalog, o: &str| c.get(&Name::parse(o).unwrap()).unwrap().serial();
        assert_eq!(serial(&cat, "a.test"), 2);

        std::fs::write(&a, zone_text(3, "www A 192.0.2.300\n")).unwrap();
        let (cat, out) = files.load_changed(&cat);
        assert_eq!(out.failed, 1);
        assert_eq!(serial(&cat, "a.test"), 2, "the previous version stays");
        // Still broken: tried again (and reported again) on the next reload.
        let (_, out) = files.load_changed(&cat);
        assert_eq!(out.failed, 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
