//! Writing kept copies of secondary zones to disk, many at a time.
//!
//! One thread takes every write waiting and commits them together: each
//! zone to its `.tmp` file, one `syncfs` for the lot, then the renames and
//! one sync of each folder ([`disk::install`]). After a crash every kept file is either its
//! old or its new version, as with [`store::write_zone_file`], but a cold
//! start of 100,000 zones costs a handful of syncs instead of 200,000
//! (measured here: 50 µs a zone instead of 260 µs, and no pool of hundreds
//! of threads blocked in fsync).
//!
//! The file's modification time is the refresh loop's record of the last
//! successful check; changes to it go through the same queue so they land
//! after the write they follow.
//!
//! [`store::write_zone_file`]: super::store::write_zone_file

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant, SystemTime};

use heron_zone::Zone;

use super::store::write_zone;
use super::zone::SecondaryZone;
use crate::disk::{self, tmp_path};
use crate::unix_seconds::UnixSeconds;

/// One entry of the queue: 24 octets. During a cold start every zone
/// waits here with its first version, and the writer (at housekeeping
/// priority) gets to most of them after the zones answer: a secondary of
/// 100,000 zones then holds 100,000 entries. A zone's file stays its
/// settings (shared with the driver, nothing allocated) while queued;
/// the thread makes the path when it gets to it.
enum Op {
    /// Writes a secondary zone's version, dated if a date is given.
    Write(Arc<SecondaryZone>, Arc<Zone>, Option<UnixSeconds>),
    /// Sets the modification time of a secondary zone's file.
    Date(Arc<SecondaryZone>, UnixSeconds),
    /// Writes a zone to a file of no zone's own (rare: boxed).
    WriteAt(Box<(PathBuf, Arc<Zone>)>),
    /// The same, paced: see [`Keeper::write_at_paced`].
    WriteAtPaced(Box<(PathBuf, Arc<Zone>)>),
    /// Removes the file (its zone is gone).
    Delete(Box<Path>),
    /// Answered once everything queued before is on disk (rare: boxed).
    Flush(Box<Sender<()>>),
    /// Drops the writes of the file queued before, and its retries: the
    /// file is no longer a copy of ours (its zone became a primary).
    Forget(Box<Path>),
}

/// Hands kept copies to the writer thread. Cloning shares the thread.
#[derive(Clone)]
pub struct Keeper {
    ops: Sender<Op>,
}

impl Keeper {
    /// Starts the writer thread; it ends when every `Keeper` is dropped.
    pub fn start() -> io::Result<Keeper> {
        Keeper::start_with(|| {})
    }

    /// Starts the writer thread, which first runs `prepare` (the server
    /// lowers its priority there: during a cold start, creating 100,000
    /// files costs more CPU than receiving the zones, and the zones are
    /// served before they are kept).
    pub fn start_with(prepare: impl FnOnce() + Send + 'static) -> io::Result<Keeper> {
        Keeper::start_batching(MAX_BATCH, prepare)
    }

    fn start_batching(
        max_batch: usize,
        prepare: impl FnOnce() + Send + 'static,
    ) -> io::Result<Keeper> {
        let (ops, queue) = channel();
        std::thread::Builder::new()
            .name("kept-copies".into())
            .spawn(move || {
                prepare();
                run(queue, max_batch)
            })?;
        Ok(Keeper { ops })
    }

    /// Writes `version` of `zone` to its kept file (soon, atomically),
    /// the file dated `at` if given: one entry in the queue where a write
    /// and a date would take two.
    pub fn write(&self, zone: &Arc<SecondaryZone>, version: Arc<Zone>, at: Option<SystemTime>) {
        let date = at.and_then(UnixSeconds::of);
        let _ = self.ops.send(Op::Write(zone.clone(), version, date));
    }

    /// Writes `version` to `path` (soon, atomically): a file of no zone's
    /// own (a catalog's consumed version, say).
    pub fn write_at(&self, path: PathBuf, version: Arc<Zone>) {
        let _ = self.ops.send(Op::WriteAt(Box::new((path, version))));
    }

    /// Writes `version` to `path` as [`Keeper::write_at`] does, but a
    /// file written before waits until [`PACE`] times as long as its last
    /// write took has passed (at least [`MIN_PACE`]): a zone changed many
    /// times a second (dynamic updates to a signed zone) has its copy
    /// written a few times a minute, not one whole-zone write after the
    /// other. Only the newest version waits; [`Keeper::flush`] writes it
    /// at once. For copies whose lag a restart makes good (a signed
    /// zone's, whose changes its journal holds).
    pub fn write_at_paced(&self, path: PathBuf, version: Arc<Zone>) {
        let _ = self.ops.send(Op::WriteAtPaced(Box::new((path, version))));
    }

    /// Sets the modification time of `zone`'s kept file, after any write
    /// queued before.
    pub fn date(&self, zone: &Arc<SecondaryZone>, at: SystemTime) {
        if let Some(at) = UnixSeconds::of(at) {
            let _ = self.ops.send(Op::Date(zone.clone(), at));
        }
    }

    /// Deletes `path` after every write to it queued before, so that none
    /// of them lands after the delete (a removed zone's copy written late
    /// would come back). Nobody waits for it.
    pub fn delete(&self, path: &Path) {
        let _ = self.ops.send(Op::Delete(path.into()));
    }

    /// Stops writing `path`: what was queued for it and not yet written,
    /// and the retries of a failed write, are dropped. For a secondary
    /// made a primary of its own copy: the file is the primary's now, and
    /// a retry landing later (a disk full at the promotion) wrote the
    /// secondary's older version over it (regression hunt).
    pub fn forget(&self, path: &Path) {
        let _ = self.ops.send(Op::Forget(path.into()));
    }

    /// Waits, up to `wait`, until everything queued so far is on disk (at
    /// shutdown). Returns whether it got there.
    pub fn flush(&self, wait: Duration) -> bool {
        let (done, flushed) = channel();
        let _ = self.ops.send(Op::Flush(Box::new(done)));
        flushed.recv_timeout(wait).is_ok()
    }
}

/// What a batch does to one file: the newest zone queued, then the last
/// date queued after it; or a delete queued after both.
#[derive(Default)]
struct Pending {
    zone: Option<Arc<Zone>>,
    date: Option<SystemTime>,
    delete: bool,
    /// A file of no zone's own (`FILE.signed`, a consumed catalog): one
    /// Heron did not write there is never written over or removed.
    derived: bool,
}

/// Whether `path` holds a file Heron did not write, which `p` would
/// write over: said once a path (a signed zone's copy is written again
/// and again; the writer is one thread).
fn is_another_file(path: &Path, p: &Pending) -> bool {
    thread_local! {
        static SAID: std::cell::RefCell<std::collections::HashSet<PathBuf>> = Default::default();
    }
    if !holds_another_file(path) {
        return false;
    }
    if SAID.with(|said| said.borrow_mut().insert(path.to_path_buf())) {
        let origin = p.zone.as_ref().map(|z| z.origin().to_string());
        tracing::error!(
            "zone {}: {} holds a file Heron did not write (BIND's inline-signing copy?): left as it is; move it away for Heron to keep its copy there",
            origin.as_deref().unwrap_or("-"),
            path.display()
        );
    }
    true
}

/// Whether the file at `path` is there and not one Heron wrote (its
/// copies start `; zone `): BIND's inline-signing `FILE.signed`, in raw
/// or text form, when a zone moves from BIND. One that cannot be read is
/// not taken for another's: writing it fails and says why.
pub fn holds_another_file(path: &Path) -> bool {
    disk::starts_otherwise(path, b"; zone ").unwrap_or(false)
}

/// The most entries one batch takes from the queue. A batch holds a path
/// and a table entry for each of its files, and what waits in the queue
/// neither: a cold start of 100,000 zones queues them all at once, and
/// one batch of them all held 15 MB at its end (heaptrack). 4,096 at a
/// time cost 25 syncs for 100,000 zones instead of a handful.
const MAX_BATCH: usize = 4096;

/// A paced file is written again only this many times as long as its
/// last write took after that write: the writer spends at most about a
/// tenth of its time on it.
pub const PACE: u32 = 9;
/// Nor sooner than this after its last write.
pub const MIN_PACE: Duration = Duration::from_secs(1);

/// The paced files: when each was last written and how long that took,
/// and the newest version of each that waits for its turn.
#[derive(Default)]
struct Paced {
    last: HashMap<PathBuf, (Instant, Duration)>,
    held: HashMap<PathBuf, Arc<Zone>>,
    /// Paced files in the batch being written.
    writing: Vec<PathBuf>,
}

impl Paced {
    fn due(&self, path: &Path) -> Instant {
        match self.last.get(path) {
            Some((at, took)) => *at + (*took * PACE).max(MIN_PACE),
            None => Instant::now(),
        }
    }

    /// How long until the first held file is due (None: none held).
    fn wait(&self) -> Option<Duration> {
        let first = self.held.keys().map(|p| self.due(p)).min()?;
        Some(first.saturating_duration_since(Instant::now()))
    }

    /// Whether `path` may be written now; else `version` waits.
    fn admit(&mut self, path: &Path, version: &Arc<Zone>) -> bool {
        if self.due(path) <= Instant::now() {
            self.held.remove(path);
            self.writing.push(path.to_path_buf());
            return true;
        }
        self.held.insert(path.to_path_buf(), version.clone());
        false
    }

    /// The held files now due (all of them with `all`), out of the hold.
    fn take_due(&mut self, all: bool) -> Vec<(PathBuf, Arc<Zone>)> {
        let now = Instant::now();
        let due: Vec<PathBuf> = (self.held.keys())
            .filter(|p| all || self.due(p) <= now)
            .cloned()
            .collect();
        self.writing.extend(due.iter().cloned());
        (due.into_iter())
            .filter_map(|p| self.held.remove(&p).map(|z| (p, z)))
            .collect()
    }

    /// The batch is on disk: its paced files' next turns are set by how
    /// long it took.
    fn written(&mut self, took: Duration) {
        let now = Instant::now();
        for path in std::mem::take(&mut self.writing) {
            self.last.insert(path, (now, took));
        }
    }

    /// A write or delete queued for `path` since: any version held is
    /// older, and a deleted file's record goes.
    fn superseded(&mut self, path: &Path, deleted: bool) {
        self.held.remove(path);
        if deleted {
            self.last.remove(path);
            self.writing.retain(|p| p != path);
        }
    }
}

/// How long after a failed write of a kept copy it is tried again.
pub const RETRY_WRITE: Duration = Duration::from_secs(1);

/// Commits between two reminders that copies still fail (a minute of
/// retries when nothing else is written).
const REMINDER_ROUNDS: u32 = 60;

/// A write that failed: the file, what was to be written, and why.
type Failure = ((PathBuf, Pending), String);

/// The copies whose last write failed, with why: what `heron ctl flush`
/// and the shutdown say (they said all was written while a full disk
/// kept a copy from landing; regression hunt). The server runs one
/// keeper.
static FAILING: std::sync::LazyLock<std::sync::Mutex<HashMap<PathBuf, FailingCopy>>> =
    std::sync::LazyLock::new(Default::default);

/// A copy whose last write failed: its zone (lower-cased), if it has one
/// of its own, and why.
#[derive(Clone)]
struct FailingCopy {
    zone: Option<heron_proto::Name>,
    why: String,
}

/// Why a kept copy of `origin` cannot be written now, if one cannot.
pub fn failing_copy_of(origin: &heron_proto::Name) -> Option<String> {
    let origin = origin.to_lowercase();
    let failing = FAILING.lock().unwrap_or_else(|e| e.into_inner());
    let mut of_zone = failing
        .values()
        .filter(|f| f.zone.as_ref() == Some(&origin));
    of_zone.next().map(|f| f.why.clone())
}

/// The kept copies that cannot be written now, and why, by path.
pub fn failing_copies() -> Vec<(PathBuf, String)> {
    let failing = FAILING.lock().unwrap_or_else(|e| e.into_inner());
    let mut all: Vec<(PathBuf, String)> = (failing.iter())
        .map(|(path, f)| (path.clone(), f.why.clone()))
        .collect();
    all.sort();
    all
}

/// Copies whose write failed (a full or read-only disk), tried again
/// every [`RETRY_WRITE`] until written or replaced by a newer write or a
/// delete: a copy never written left the zone's older one for the next
/// start to serve (black-box finding).
#[derive(Default)]
struct Failed {
    copies: HashMap<PathBuf, (Pending, u32)>,
    retry_at: Option<Instant>,
    /// Commits in a row with some copy failing, for the reminder.
    rounds: u32,
}

impl Failed {
    /// Ends the retries of `path`.
    fn forget(&mut self, path: &Path) {
        if self.copies.remove(path).is_some() {
            let mut failing = FAILING.lock().unwrap_or_else(|e| e.into_inner());
            failing.remove(path);
            tracing::info!("{}: no longer a kept copy: not written", path.display());
        }
    }

    /// How long until the failed copies are tried again.
    fn wait(&self) -> Option<Duration> {
        (self.retry_at).map(|at| at.saturating_duration_since(Instant::now()))
    }

    /// Puts the failed copies in `batch` when their turn has come (or the
    /// keeper is closing), unless the batch writes or deletes their file
    /// anew.
    fn retry_into(&mut self, batch: &mut HashMap<PathBuf, Pending>, closing: bool) {
        let due = closing || self.retry_at.is_some_and(|at| at <= Instant::now());
        if !due {
            return;
        }
        for (path, (pending, _)) in self.copies.iter_mut() {
            match batch.get_mut(path) {
                None => {
                    batch.insert(path.clone(), std::mem::take(pending));
                }
                // Only dated since (a refresh check): written, with that date.
                Some(queued) if queued.zone.is_none() && !queued.delete => {
                    queued.zone = pending.zone.take();
                    queued.derived = pending.derived;
                }
                Some(_) => {}
            }
        }
        self.retry_at = None;
    }

    /// After a commit of the files `committed`: a retry or a newer write
    /// that landed ends the file's retries, one that failed (again) is
    /// kept with one try more.
    /// Said: each copy's first failure, then one line a minute while any
    /// still fail (a full disk under 2,000 zones must not log 2,000 lines
    /// a second), and each that lands after failing.
    /// `committed` says of each file whether it was deleted.
    fn after(&mut self, committed: &[(PathBuf, bool)], failed_now: Vec<Failure>) {
        let mut tried: HashMap<&PathBuf, (u32, bool)> = HashMap::new();
        let mut failing = FAILING.lock().unwrap_or_else(|e| e.into_inner());
        for (path, deleted) in committed {
            if let Some((_, tries)) = self.copies.remove(path) {
                tried.insert(path, (tries, *deleted));
                failing.remove(path);
            }
        }
        for ((path, pending), why) in failed_now {
            let zone = pending.zone.as_ref().map(|z| z.origin().to_lowercase());
            let copy = FailingCopy {
                zone,
                why: why.clone(),
            };
            failing.insert(path.clone(), copy);
            let tries = tried.remove(&path).map_or(0, |(tries, _)| tries) + 1;
            if tries == 1 {
                tracing::error!(
                    "{why}; cannot keep a copy, tried again every {} s",
                    RETRY_WRITE.as_secs()
                );
            }
            self.copies.insert(path, (pending, tries));
        }
        for (path, (tries, deleted)) in tried {
            match deleted {
                // Its zone went (or moved) while its copy failed: no
                // longer tried (regression hunt: said as written).
                true => tracing::info!(
                    "{}: no longer kept after {tries} failed tries: its zone no longer keeps a copy there",
                    path.display()
                ),
                false => tracing::info!("{}: written after {tries} failed tries", path.display()),
            }
        }
        self.rounds = match self.copies.is_empty() {
            true => 0,
            false => self.rounds + 1,
        };
        if self.rounds > 0 && self.rounds.is_multiple_of(REMINDER_ROUNDS) {
            let still = self.copies.len();
            tracing::warn!("{still} kept copies still cannot be written; tried again every second");
        }
        if !self.copies.is_empty() && self.retry_at.is_none() {
            self.retry_at = Some(Instant::now() + RETRY_WRITE);
        }
    }
}

fn run(queue: Receiver<Op>, max_batch: usize) {
    let mut paced = Paced::default();
    let mut failed = Failed::default();
    loop {
        let wait = match (paced.wait(), failed.wait()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let first = match wait {
            None => queue.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(wait) => queue.recv_timeout(wait),
        };
        let (first, closing) = match first {
            Ok(op) => (Some(op), false),
            Err(RecvTimeoutError::Timeout) => (None, false),
            Err(RecvTimeoutError::Disconnected) => (None, true),
        };
        let mut batch: HashMap<PathBuf, Pending> = HashMap::new();
        let mut flushes = Vec::new();
        let more = queue.try_iter().take(max_batch - 1);
        for op in first.into_iter().chain(more) {
            if let Op::Forget(path) = &op {
                batch.remove(&**path);
                failed.forget(path);
                continue;
            }
            take(op, &mut batch, &mut flushes, &mut paced);
        }
        let paced_now = paced.take_due(closing || !flushes.is_empty());
        for (path, version) in paced_now {
            batch.insert(path, derived(written(version, None)));
        }
        failed.retry_into(&mut batch, closing);
        // A file written or deleted anew ends its retries; a date alone does not.
        let committed: Vec<(PathBuf, bool)> = (batch.iter())
            .filter(|(_, p)| p.zone.is_some() || p.delete)
            .map(|(path, p)| (path.clone(), p.delete))
            .collect();
        let started = Instant::now();
        failed.after(&committed, commit(batch));
        paced.written(started.elapsed());
        for done in flushes {
            let _ = done.send(());
        }
        if closing {
            return;
        }
    }
}

fn derived(pending: Pending) -> Pending {
    Pending {
        derived: true,
        ..pending
    }
}

fn written(version: Arc<Zone>, date: Option<UnixSeconds>) -> Pending {
    Pending {
        zone: Some(version),
        date: date.map(UnixSeconds::time),
        ..Pending::default()
    }
}

/// One entry of the queue into the batch.
fn take(
    op: Op,
    batch: &mut HashMap<PathBuf, Pending>,
    flushes: &mut Vec<Sender<()>>,
    paced: &mut Paced,
) {
    match op {
        Op::Write(zone, version, date) => {
            batch.insert(zone.kept_path().into_owned(), written(version, date));
        }
        Op::WriteAt(path_and_version) => {
            let (path, version) = *path_and_version;
            paced.superseded(&path, false);
            batch.insert(path, derived(written(version, None)));
        }
        Op::WriteAtPaced(path_and_version) => {
            let (path, version) = *path_and_version;
            if paced.admit(&path, &version) {
                batch.insert(path, derived(written(version, None)));
            }
        }
        Op::Date(zone, at) => {
            let file = batch.entry(zone.kept_path().into_owned()).or_default();
            file.date = Some(at.time());
        }
        Op::Delete(path) => {
            paced.superseded(&path, true);
            let gone = Pending {
                delete: true,
                ..Pending::default()
            };
            batch.insert(path.into(), gone);
        }
        Op::Flush(done) => flushes.push(*done),
        Op::Forget(_) => {}
    }
}

/// "PATH: why" for a copy that could not be written: when its folder
/// could not be made, that error (a permission) rather than the write's
/// (which is only "No such file or directory").
fn why_not_kept(path: &Path, error: &io::Error, unmade: &HashMap<PathBuf, io::Error>) -> String {
    let shown = path.display();
    match path.parent().and_then(|d| Some((d, unmade.get(d)?))) {
        Some((dir, made)) => format!(
            "{shown}: the folder {} could not be created: {made}",
            dir.display()
        ),
        None => format!("{shown}: {error}"),
    }
}

/// Writes every zone of the batch, then applies the dates (those of a
/// zone written here travel with its file). Returns the writes that
/// failed, to try again.
fn commit(batch: HashMap<PathBuf, Pending>) -> Vec<Failure> {
    let folders: BTreeSet<&Path> = batch
        .iter()
        .filter(|(_, p)| p.zone.is_some())
        .filter_map(|(path, _)| path.parent().filter(|d| !d.as_os_str().is_empty()))
        .collect();
    // Said with the files that were to go there.
    let mut unmade: HashMap<PathBuf, io::Error> = HashMap::new();
    for dir in folders {
        if let Err(e) = std::fs::create_dir_all(dir) {
            unmade.insert(dir.to_path_buf(), e);
        }
    }
    let mut batch = batch;
    batch.retain(|path, p| !(p.derived && is_another_file(path, p)));
    let mut failed = Vec::new();
    let written: Vec<&Path> = batch
        .iter()
        .filter_map(|(path, p)| Some((path, p.zone.as_ref()?, p.date)))
        .filter(|(path, zone, date)| match write_tmp(zone, path, *date) {
            Ok(()) => true,
            Err(e) => {
                let why = why_not_kept(path, &e, &unmade);
                let _ = std::fs::remove_file(tmp_path(path));
                failed.push(((*path).clone(), format!("zone {}: {why}", zone.origin())));
                false
            }
        })
        .map(|(path, _, _)| &**path)
        .collect();
    if let disk::Installed::Synced(not_renamed) = disk::install(&written, &[], &[]) {
        // The file named: the rename's error names none (regression hunt
        // BS-6: "cannot replace it" of no file).
        let why = |path: &Path, e| match batch.get(path).and_then(|p| p.zone.as_ref()) {
            Some(zone) => format!("zone {}: {}: {e}", zone.origin(), path.display()),
            None => format!("{}: {e}", path.display()),
        };
        let not_kept = not_renamed
            .into_iter()
            .map(|(path, e)| (path.to_path_buf(), why(path, e)));
        failed.extend(not_kept);
    }
    let mut batch = batch;
    let failed: Vec<Failure> = (failed.into_iter())
        .filter_map(|(path, why)| Some((batch.remove_entry(&path)?, why)))
        .collect();
    for (path, p) in &batch {
        if let (None, Some(at)) = (&p.zone, p.date) {
            set_mtime(path, at);
        }
        if p.delete {
            // Only what Heron wrote (sealed): a kept copy's path may name
            // the operator's own file, by a typo, which it never wrote
            // over (black-box finding BQ-11: deleted with its zone).
            if !crate::secondary::seal::is_sealed_file(path) && path.exists() {
                tracing::info!(file = %path.display(), "not deleted: not a copy Heron wrote (no seal)");
                continue;
            }
            match std::fs::remove_file(path) {
                // None can be there (a name too long, a file for a
                // folder on the way): nothing to delete, nothing to say.
                Err(e)
                    if !matches!(
                        e.kind(),
                        io::ErrorKind::NotFound
                            | io::ErrorKind::NotADirectory
                            | io::ErrorKind::InvalidFilename
                    ) =>
                {
                    tracing::warn!("cannot delete {}: {e}", path.display())
                }
                _ => {}
            }
        }
    }
    failed
}

/// Writes `zone` to the temporary file beside `path`, dated `date` if
/// given (a rename keeps the date, and the making time a restart shows as
/// the transfer's: a failed write's temporary file is deleted, so each is
/// made anew).
fn write_tmp(zone: &Zone, path: &Path, date: Option<SystemTime>) -> io::Result<()> {
    let mut out = BufWriter::new(File::create(tmp_path(path))?);
    write_zone(zone, &mut out)?;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    if let Some(at) = date {
        file.set_modified(at)?;
    }
    Ok(())
}

fn set_mtime(file: &Path, at: SystemTime) {
    if let Ok(f) = File::options().append(true).open(file) {
        let _ = f.set_modified(at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secondary::kept_file::KeptFile;
    use heron_proto::Name;
    use heron_zone::{load_zone_file, load_zone_str};
    use std::time::{Duration, Instant};

    /// Files are dated to the second.
    fn whole_seconds(t: SystemTime) -> SystemTime {
        UnixSeconds::of(t).unwrap().time()
    }

    #[test]
    fn a_queued_entry_stays_small() {
        // During a cold start every zone waits in the queue, at its slot
        // size plus a word; 56 octets made 100,000 of them 6.4 MB, 40
        // made them 4.8.
        assert!(size_of::<Op>() <= 24);
    }

    fn zone(serial: u32) -> Arc<Zone> {
        let text = format!("$TTL 60\n@ SOA ns h {serial} 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n");
        Arc::new(
            load_zone_str(&text, "k", &Name::parse("k.test").unwrap())
                .unwrap()
                .zone,
        )
    }

    /// k.test, kept in `file`.
    fn kept_in(file: KeptFile) -> Arc<SecondaryZone> {
        Arc::new(SecondaryZone {
            origin: Name::parse("k.test").unwrap(),
            primaries: Arc::default(),
            file,
            catalog: None,
        })
    }

    fn kept(path: &Path) -> Arc<SecondaryZone> {
        kept_in(KeptFile::at(path))
    }

    fn wait_for(mut ok: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    fn serial_in(path: &Path) -> Option<u32> {
        Some(
            load_zone_file(path, &Name::parse("k.test").unwrap())
                .ok()?
                .zone
                .serial(),
        )
    }

    #[test]
    fn the_newest_version_is_kept_then_dated() {
        let dir = tempfile::tempdir().unwrap();
        let path: Arc<Path> = dir.path().join("sub/k.zone").into();
        let keeper = Keeper::start().unwrap();
        for serial in 1..=50 {
            keeper.write(&kept(&path), zone(serial), None);
        }
        let past = whole_seconds(SystemTime::now() - Duration::from_secs(3600));
        keeper.date(&kept(&path), past);
        assert!(keeper.flush(Duration::from_secs(10)));
        assert_eq!(serial_in(&path), Some(50));
        assert!(wait_for(|| std::fs::metadata(&path)
            .unwrap()
            .modified()
            .unwrap()
            == past));
        assert!(!tmp_path(&path).exists());
    }

    #[test]
    fn a_dated_write_lands_with_its_date() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.zone");
        let keeper = Keeper::start().unwrap();
        let past = whole_seconds(SystemTime::now() - Duration::from_secs(7200));
        keeper.write(&kept(&path), zone(9), Some(past));
        assert!(keeper.flush(Duration::from_secs(10)));
        assert_eq!(serial_in(&path), Some(9));
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
        assert_eq!(modified, past);
    }

    #[test]
    fn a_zone_kept_by_pattern_lands_in_its_own_file() {
        let dir = tempfile::tempdir().unwrap();
        let pattern = dir.path().join("kept/{zone}.zone");
        let file = KeptFile::pattern(pattern.to_str().unwrap().into());
        let keeper = Keeper::start().unwrap();
        keeper.write(&kept_in(file), zone(4), None);
        assert!(keeper.flush(Duration::from_secs(10)));
        assert_eq!(serial_in(&dir.path().join("kept/k.test.zone")), Some(4));
    }

    #[test]
    fn many_zones_at_once_all_land() {
        let dir = tempfile::tempdir().unwrap();
        let keeper = Keeper::start().unwrap();
        let paths: Vec<Arc<Path>> = (0..500)
            .map(|i| dir.path().join(format!("z{i}")).into())
            .collect();
        for p in &paths {
            keeper.write(&kept(p), zone(7), None);
        }
        assert!(wait_for(|| paths.iter().all(|p| serial_in(p) == Some(7))));
    }

    /// Batches of three entries: what lands is what was queued last for
    /// each file, in queue order across batches.
    #[test]
    fn small_batches_keep_the_queue_order() {
        let dir = tempfile::tempdir().unwrap();
        let keeper = Keeper::start_batching(3, || {}).unwrap();
        let past = whole_seconds(SystemTime::now() - Duration::from_secs(600));
        let paths: Vec<PathBuf> = (0..40).map(|i| dir.path().join(format!("z{i}"))).collect();
        for (i, path) in paths.iter().enumerate() {
            keeper.write(&kept(path), zone(1), None);
            keeper.write(&kept(path), zone(2), None);
            match i % 3 {
                0 => keeper.delete(path),
                1 => keeper.date(&kept(path), past),
                _ => {}
            }
        }
        assert!(keeper.flush(Duration::from_secs(30)));
        for (i, path) in paths.iter().enumerate() {
            match i % 3 {
                0 => assert!(!path.exists(), "{i}"),
                1 => {
                    assert_eq!(serial_in(path), Some(2), "{i}");
                    let modified = std::fs::metadata(path).unwrap().modified().unwrap();
                    assert_eq!(modified, past, "{i}");
                }
                _ => assert_eq!(serial_in(path), Some(2), "{i}"),
            }
        }
    }

    #[test]
    fn a_delete_lands_after_the_writes_queued_before_it_and_before_later_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path: Arc<Path> = dir.path().join("k.zone").into();
        let keeper = Keeper::start().unwrap();
        keeper.write(&kept(&path), zone(1), None);
        keeper.delete(&path);
        assert!(keeper.flush(Duration::from_secs(10)));
        assert!(!path.exists() && !tmp_path(&path).exists());
        keeper.write(&kept(&path), zone(2), None);
        assert!(keeper.flush(Duration::from_secs(10)));
        keeper.delete(&path);
        keeper.write(&kept(&path), zone(3), None);
        assert!(keeper.flush(Duration::from_secs(10)));
        assert_eq!(serial_in(&path), Some(3));
    }

    /// A copy whose folder could not be made says why the folder could
    /// not be (a permission), not only that the file has no folder.
    #[test]
    fn a_copy_whose_folder_could_not_be_made_says_why() {
        let path = Path::new("/etc/heron/secondary/k.zone");
        let missing = io::Error::from(io::ErrorKind::NotFound);
        let mut unmade = HashMap::new();
        let said = why_not_kept(path, &missing, &unmade);
        assert_eq!(said, format!("{}: {missing}", path.display()));
        let denied = io::Error::from_raw_os_error(13); // EACCES
        unmade.insert(PathBuf::from("/etc/heron/secondary"), denied);
        let said = why_not_kept(path, &missing, &unmade);
        assert_eq!(
            said,
            "/etc/heron/secondary/k.zone: the folder /etc/heron/secondary could not be \
             created: Permission denied (os error 13)"
        );
    }

    #[test]
    fn a_failed_write_leaves_the_old_copy_and_no_tmp() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "not a folder").unwrap();
        let keeper = Keeper::start().unwrap();
        let bad: Arc<Path> = blocker.join("k.zone").into();
        let good: Arc<Path> = dir.path().join("k.zone").into();
        keeper.write(&kept(&bad), zone(1), None);
        keeper.write(&kept(&good), zone(2), None);
        assert!(wait_for(|| serial_in(&good) == Some(2)));
        assert!(!bad.exists() && !tmp_path(&bad).exists());
    }

    /// A copy that could not be written (its folder unmade: a full or
    /// read-only disk alike) is tried again until it lands, once the
    /// cause is gone; a newer write of the file replaces the retry.
    #[test]
    fn a_failed_write_is_tried_again_until_it_lands() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("sub");
        std::fs::write(&blocker, "not a folder yet").unwrap();
        let keeper = Keeper::start().unwrap();
        let path: Arc<Path> = blocker.join("k.zone").into();
        keeper.write(&kept(&path), zone(7), None);
        assert!(keeper.flush(Duration::from_secs(10)));
        assert_eq!(serial_in(&path), None);
        // Said as failing (for ctl flush and the shutdown) until written.
        let failing = |p: &Path| failing_copies().iter().any(|(f, _)| f == p);
        assert!(failing(&path), "{:?}", failing_copies());
        let origin = heron_proto::Name::parse("k.test").unwrap();
        assert!(failing_copy_of(&origin).is_some(), "{:?}", failing_copies());
        // A refresh check's date for it meanwhile does not end the retries.
        keeper.date(&kept(&path), SystemTime::now());
        assert!(keeper.flush(Duration::from_secs(10)));
        std::fs::remove_file(&blocker).unwrap();
        assert!(
            wait_for(|| serial_in(&path) == Some(7)),
            "written once it could be"
        );
        assert!(wait_for(|| !failing(&path)), "{:?}", failing_copies());
        // Failing, then forgotten (its zone became a primary): never written.
        let promoted: Arc<Path> = dir.path().join("p/k.zone").into();
        std::fs::write(dir.path().join("p"), "").unwrap();
        keeper.write(&kept(&promoted), zone(3), None);
        assert!(keeper.flush(Duration::from_secs(10)));
        assert!(failing(&promoted));
        keeper.forget(&promoted);
        assert!(keeper.flush(Duration::from_secs(10)));
        assert!(!failing(&promoted), "{:?}", failing_copies());
        std::fs::remove_file(dir.path().join("p")).unwrap();
        std::fs::create_dir(dir.path().join("p")).unwrap();
        std::thread::sleep(RETRY_WRITE * 2);
        assert_eq!(
            serial_in(&promoted),
            None,
            "no retry after it was forgotten"
        );
        // Failing again, then replaced by a newer version: that one lands.
        let other: Arc<Path> = dir.path().join("b/k.zone").into();
        std::fs::write(dir.path().join("b"), "").unwrap();
        keeper.write(&kept(&other), zone(1), None);
        assert!(keeper.flush(Duration::from_secs(10)));
        keeper.write(&kept(&other), zone(2), None);
        std::fs::remove_file(dir.path().join("b")).unwrap();
        assert!(wait_for(|| serial_in(&other) == Some(2)));
        std::thread::sleep(RETRY_WRITE * 2);
        assert_eq!(serial_in(&other), Some(2), "no older retry over it");
    }

    #[test]
    fn a_paced_file_is_written_at_once_then_its_newest_version_later() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.zone.signed");
        let keeper = Keeper::start().unwrap();
        keeper.write_at_paced(path.clone(), zone(1));
        assert!(wait_for(|| serial_in(&path) == Some(1)));
        // Written again within its pace: only the newest lands, by itself.
        for serial in 2..=5 {
            keeper.write_at_paced(path.clone(), zone(serial));
        }
        assert!(wait_for(|| serial_in(&path) == Some(5)));
        assert!(!tmp_path(&path).exists());
    }

    /// BIND's inline-signing copy at a signed zone's `FILE.signed` (raw
    /// or text) is never written over; a copy Heron wrote, or none, is.
    #[test]
    fn another_servers_signed_copy_is_left_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let keeper = Keeper::start().unwrap();
        let raw = [0u8, 0, 0, 2, 0, 0, 0, 0, 9, 9];
        let text = b"; File written on Thu Nov 26 10:00:00 2026\n$ORIGIN .\n".to_vec();
        for (name, bind) in [("raw", raw.to_vec()), ("text", text)] {
            let path = dir.path().join(format!("{name}.zone.signed"));
            std::fs::write(&path, &bind).unwrap();
            keeper.write_at_paced(path.clone(), zone(1));
            keeper.write_at(path.clone(), zone(2));
            assert!(keeper.flush(Duration::from_secs(10)));
            assert_eq!(std::fs::read(&path).unwrap(), bind, "{name}");
            assert!(!tmp_path(&path).exists());
        }
        let ours = dir.path().join("ours.zone.signed");
        keeper.write_at(ours.clone(), zone(1));
        assert!(keeper.flush(Duration::from_secs(10)));
        keeper.write_at(ours.clone(), zone(2));
        assert!(keeper.flush(Duration::from_secs(10)));
        assert_eq!(serial_in(&ours), Some(2));
    }

    /// A paced file written (serial 1), and serial 2 queued after it
    /// (held, if its turn has not come).
    fn paced_twice() -> (tempfile::TempDir, PathBuf, Keeper) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.zone.signed");
        let keeper = Keeper::start().unwrap();
        keeper.write_at_paced(path.clone(), zone(1));
        assert!(keeper.flush(Duration::from_secs(10)));
        keeper.write_at_paced(path.clone(), zone(2));
        (dir, path, keeper)
    }

    #[test]
    fn a_flush_writes_a_held_version_at_once() {
        let (_dir, path, keeper) = paced_twice();
        assert!(keeper.flush(Duration::from_secs(10)));
        assert_eq!(serial_in(&path), Some(2));
    }

    #[test]
    fn a_delete_drops_a_held_version() {
        let (_dir, path, keeper) = paced_twice();
        keeper.delete(&path);
        assert!(keeper.flush(Duration::from_secs(10)));
        assert!(!path.exists());
        // Nothing held comes back after its pace.
        std::thread::sleep(MIN_PACE + Duration::from_millis(300));
        assert!(keeper.flush(Duration::from_secs(10)));
        assert!(!path.exists());
    }

    #[test]
    fn a_held_version_is_written_when_the_keeper_closes() {
        let (_dir, path, keeper) = paced_twice();
        drop(keeper);
        assert!(wait_for(|| serial_in(&path) == Some(2)));
    }
}
