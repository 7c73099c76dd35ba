//! Reloading zone files: only those that changed are read again, and a new
//! catalog is swapped in whole. A file with errors is reported and its zone
//! keeps serving the version loaded before.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use heron_zone::zonefile::ZoneFileText;
use heron_zone::{Catalog, Zone, load_zone_text, reload_zone_text};

use crate::config::ZoneSpec;

/// What a zone file looked like when it was last loaded.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Stamp {
    modified: SystemTime,
    len: u64,
    inode: u64,
}

impl Stamp {
    fn of(path: &Path) -> Option<Stamp> {
        Stamp::from_metadata(&std::fs::metadata(path).ok()?)
    }

    fn from_metadata(meta: &std::fs::Metadata) -> Option<Stamp> {
        use std::os::unix::fs::MetadataExt;
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
    /// What went wrong, as logged: file, line and problem, then what
    /// became of the zone.
    pub errors: Vec<String>,
}

impl Outcome {
    /// One line for a person: how many zones were read, kept and failed.
    pub fn summary(&self) -> String {
        format!(
            "{} zones re-read, {} unchanged, {} failed",
            self.loaded, self.unchanged, self.failed
        )
    }

    /// Logs an error and keeps it for whoever asked for the reload.
    fn error(&mut self, message: String) {
        tracing::error!("{message}");
        self.errors.push(message);
    }
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
    /// was loaded (or never loaded) read again, on every core. A zone that
    /// fails keeps its version from `current`, if it has one; its problems
    /// are logged.
    pub fn load_changed(&mut self, current: &Catalog) -> (Catalog, Outcome) {
        let mut outcome = Outcome::default();
        let mut todo = Vec::new();
        for (i, entry) in self.entries.iter().enumerate() {
            // A file never loaded is read without looking first: its stamp
            // comes from the open file.
            if entry.loaded.is_some() && Stamp::of(&entry.spec.file) == entry.loaded {
                outcome.unchanged += 1;
            } else {
                todo.push(i);
            }
        }
        let specs: Vec<&ZoneSpec> = todo.iter().map(|&i| &self.entries[i].spec).collect();
        let results = load_parallel(&specs, current);
        let mut next = current.clone();
        for (i, zone) in todo.into_iter().zip(results) {
            let spec = &self.entries[i].spec;
            match zone {
                Ok((zone, stamp)) => {
                    next.insert(zone);
                    self.entries[i].loaded = stamp;
                    outcome.loaded += 1;
                }
                Err(problems) => {
                    problems.into_iter().for_each(|p| outcome.error(p));
                    outcome.error(what_is_kept(spec, &next));
                    outcome.failed += 1;
                }
            }
        }
        (next, outcome)
    }
}

/// How often a long load says how far it got.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// A zone loaded from its file, and the file's stamp when it was opened
/// (None if the file system gave no modification time).
pub(crate) type FromFile = (Zone, Option<Stamp>);

/// A zone loaded from its file, or what is wrong with the file.
pub(crate) type Loaded = Result<FromFile, Vec<String>>;

/// Loads zones on every core; a zone with errors comes back as its
/// problems. A zone `previous` holds is read as a change to that version.
/// Results are in the order of `specs`.
pub(crate) fn load_parallel(specs: &[&ZoneSpec], previous: &Catalog) -> Vec<Loaded> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(specs.len().max(1));
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Loaded>>> = specs.iter().map(|_| Mutex::new(None)).collect();
    // Each loader holds a sender; when the last one is done the channel
    // disconnects and the progress reporter returns at once.
    let (working, finished) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let working = working.clone();
            let (next, done, slots) = (&next, &done, &slots);
            scope.spawn(move || {
                let _working = working;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(spec) = specs.get(i) else { break };
                    *slots[i].lock().unwrap() = Some(load_one(spec, previous.get(&spec.origin)));
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        drop(working);
        report_progress(&finished, &done, specs.len());
    });
    let loaded = slots.into_iter().map(|s| s.into_inner().unwrap());
    loaded.map(|l| l.expect("every zone was loaded")).collect()
}

/// Logs progress every few seconds until the loaders are done (`finished`
/// disconnects).
fn report_progress(finished: &std::sync::mpsc::Receiver<()>, done: &AtomicUsize, total: usize) {
    let started = Instant::now();
    while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
        finished.recv_timeout(PROGRESS_EVERY)
    {
        tracing::info!(
            "loading zones: {} of {} done after {} s",
            done.load(Ordering::Relaxed),
            total,
            started.elapsed().as_secs()
        );
    }
}

/// Loads one zone, as a change to `previous` if there is one; the
/// problems if it has errors (warnings are logged).
fn load_one(spec: &ZoneSpec, previous: Option<&Arc<Zone>>) -> Loaded {
    let started = Instant::now();
    let file = ZoneFileText::read(&spec.file)
        .map_err(|e| vec![format!("{}: error: {}", e.location, e.message)])?;
    let result = match previous {
        Some(old) => reload_zone_text(old, &file.text, &spec.file),
        None => load_zone_text(&file.text, &spec.file, &spec.origin),
    };
    let loaded =
        result.map_err(|problems| problems.iter().map(|p| p.to_string()).collect::<Vec<_>>())?;
    loaded.warnings.iter().for_each(|w| tracing::warn!("{w}"));
    let zone = loaded.zone;
    let new_bytes = previous.map_or(zone.heap_bytes(), |old| zone.unshared_bytes(old));
    tracing::debug!(
        "zone {} loaded from {} in {} ms: serial {}, {} records, {} KiB new of {} KiB",
        spec.origin,
        spec.file.display(),
        started.elapsed().as_millis(),
        zone.serial(),
        zone.record_count(),
        new_bytes / 1024,
        zone.heap_bytes() / 1024
    );
    Ok((zone, Stamp::from_metadata(&file.metadata)))
}

/// What becomes of a zone whose file failed to load.
fn what_is_kept(spec: &ZoneSpec, catalog: &Catalog) -> String {
    if catalog.get(&spec.origin).is_some() {
        format!(
            "zone {} not reloaded; the previous version is still served",
            spec.origin
        )
    } else {
        format!("zone {} not loaded; it will not be served", spec.origin)
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
