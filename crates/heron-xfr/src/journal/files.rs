//! The journals of zones kept in files, so that their IXFR history
//! survives a restart (format: [`crate::journal::file`]).
//!
//! Every step a journal records is appended to its file by one writer
//! thread, which takes all the changes waiting and makes them durable
//! together, one `syncfs` per folder ([`crate::disk::install`]): no
//! transfer or query waits for a disk, and a secondary of 100,000 zones
//! that all change at once pays a few syncs, not 100,000. A step lost in
//! a crash is safe: at startup a journal is kept only if it ends at the
//! serial served.
//!
//! At startup each zone's file is read back and checked against the zone
//! served ([`restore`]); one that does not fit is logged and removed, and
//! that zone's history starts over.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Duration;

use crate::journal::file::{self, FileChange, FileSize, StartOver};
use crate::journal::{Journal, serial_of};
use crate::update::is_dnssec_type;
use heron_proto::Name;
use heron_proto::rdata::rdata_equal;
use heron_zone::Zone;
use heron_zone::diff::DiffRecord;
use heron_zone::diff::ZoneDiff;

use crate::disk::{self, tmp_path};

/// A zone's journal and, when it is kept in a file, that file's size.
#[derive(Debug)]
pub(crate) struct History {
    pub(crate) journal: Journal,
    file: Option<FileSize>,
    /// The serial of the zone file while the steps after it are in the
    /// journal file alone (dynamic updates not yet written back): the
    /// file is not compacted past them, whatever the journal in memory
    /// still keeps.
    pinned: Option<u32>,
    /// Where the batch under way began: the file's entries, whether the
    /// file was replaced since (see [`History::take_back`]).
    batch: Option<(u64, bool)>,
    /// Failed writes of the file known so far: one more means a step may
    /// be missing from it, and it is written again whole.
    failures_seen: u64,
    /// The file was written again whole, from a journal that lacked steps
    /// the zone file lacks too: the zone should be written back.
    short: bool,
    /// Serials served with two contents (the zone changed, its serial
    /// did not; or the serial went back and passes them again): a
    /// secondary holding one may hold either, so no IXFR starts there.
    /// Kept beside the journal file too ([`REUSED_MARK`]), for a restart.
    pub(crate) no_chain: NoChain,
}

/// The serials served with two contents, the last [`NO_CHAIN_KEPT`]
/// times it happened: a serial that goes back twice must not forget the
/// first range (regression hunt AW-1: a secondary still at the first
/// 505 took the step of the third).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NoChain(Vec<Reused>);

/// Ranges of [`NoChain`] kept, the oldest dropped first.
pub const NO_CHAIN_KEPT: usize = 16;

impl NoChain {
    pub fn covers(&self, serial: u32) -> bool {
        self.0.iter().any(|r| r.covers(serial))
    }

    fn add(&mut self, reused: Reused) {
        self.0.retain(|r| *r != reused);
        self.0.push(reused);
        let over = self.0.len().saturating_sub(NO_CHAIN_KEPT);
        self.0.drain(..over);
    }

    pub fn ranges(&self) -> &[Reused] {
        &self.0
    }
}

/// The serials after `after` up to `upto` (RFC 1982 order): served with
/// other content before, so no IXFR starts from them. One serial whose
/// content changed in place is `upto` alone (`after` the one before it);
/// a serial that went back from `upto` to `after` covers all those it
/// went back over (black-box finding AV-6: a secondary at the old 505
/// took the step from the new 505).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reused {
    pub after: u32,
    pub upto: u32,
}

impl Reused {
    /// `serial` alone.
    pub fn only(serial: u32) -> Reused {
        Reused {
            after: serial.wrapping_sub(1),
            upto: serial,
        }
    }

    pub fn covers(&self, serial: u32) -> bool {
        use crate::serial::is_newer;
        serial == self.upto || (is_newer(serial, self.after) && is_newer(self.upto, serial))
    }
}

impl History {
    pub(crate) fn new(max_bytes: usize, in_file: bool) -> History {
        History {
            journal: Journal::new(max_bytes),
            file: in_file.then(FileSize::default),
            pinned: None,
            batch: None,
            failures_seen: 0,
            short: false,
            no_chain: NoChain::default(),
        }
    }

    /// The writes of the file that have failed so far (`failures`): if
    /// one failed since, the next step rewrites the file whole, so that
    /// no step it missed leaves a hole that a restart would refuse.
    pub(crate) fn failures_now(&mut self, failures: u64) {
        if failures != self.failures_seen {
            self.failures_seen = failures;
            if let Some(size) = self.file.as_mut() {
                size.rewrite_next();
            }
        }
    }

    /// Takes up the mark beside the journal file `journal`, if it has
    /// one ([`REUSED_MARK`]): a history that starts without its file
    /// (none was left) still starts no IXFR from that serial.
    pub(crate) fn marked_from(mut self, journal: Option<&Path>) -> History {
        self.no_chain = journal.map(reused_serials).unwrap_or_default();
        self
    }

    /// Adds the ranges the mark beside `journal` holds now.
    pub(crate) fn take_marks(&mut self, journal: Option<&Path>) {
        let marked = journal.map(reused_serials).unwrap_or_default();
        marked.ranges().iter().for_each(|r| self.no_chain.add(*r));
    }

    /// Records a step; returns what its file must do.
    pub(crate) fn record(&mut self, step: ZoneDiff) -> Option<FileChange> {
        // A step from a serial served with two contents is not kept while
        // the zone file holds it: in the file it would give IXFR from that
        // serial again after a restart (regression hunt). One the zone
        // file lacks (a dynamic update's) is kept, for the restart.
        let from = super::serial_of(&step.old_soa);
        if self.pinned.is_none() && self.no_chain.covers(from) {
            return None;
        }
        let step = Arc::new(step);
        let continued = self.journal.record(step.clone());
        let holds_pinned = self
            .pinned
            .is_none_or(|serial| self.journal.holds_steps_from(serial));
        let size = self.file.as_mut()?;
        let change = size.recorded(&self.journal, &step, continued, holds_pinned);
        // A hole the file cannot be rewritten around until the zone file
        // holds the steps only the journal file has: written back soon.
        if size.rewrite_due() || (matches!(change, FileChange::Replace(_)) && !holds_pinned) {
            self.short = true;
        }
        if let (Some((_, replaced)), FileChange::Replace(_)) = (&mut self.batch, &change) {
            *replaced = true;
        }
        Some(change)
    }

    /// From now on kept in a file too, if it was not: the file is written
    /// with the steps kept so far.
    pub(crate) fn keep_in_file(&mut self) -> Option<FileChange> {
        if self.file.is_some() {
            return None;
        }
        let mut size = FileSize::default();
        let change = size.replace(&self.journal);
        self.file = Some(size);
        Some(change)
    }

    /// Forgets every step; returns what its file must do. A serial
    /// served with two contents stays so: a secondary at it still holds
    /// either (and a serial that went back may pass it again with a third).
    pub(crate) fn clear(&mut self) -> Option<FileChange> {
        self.journal.clear();
        Some(self.file.as_mut()?.cleared())
    }

    /// [`History::clear`] for a zone whose content changed under the
    /// serials `reused`: no IXFR starts from them afterwards either.
    pub(crate) fn serial_reused(&mut self, reused: Reused) -> Option<FileChange> {
        let change = self.clear();
        self.no_chain.add(reused);
        change
    }

    /// The zone file holds serial `serial` and the journal the steps after
    /// it (None: the zone file holds what is served).
    pub(crate) fn pin(&mut self, serial: Option<u32>) {
        self.pinned = serial;
        self.short = false;
    }

    /// The whole file again from the journal, if a rewrite is due and
    /// the journal holds every step the file must keep.
    pub(crate) fn heal(&mut self) -> Option<FileChange> {
        let holds_pinned = (self.pinned).is_none_or(|s| self.journal.holds_steps_from(s));
        let size = self.file.as_mut()?;
        (size.rewrite_due() && holds_pinned && !self.journal.is_empty()).then(|| {
            size.rewrite_done();
            size.replace(&self.journal)
        })
    }

    /// The zone file's serial the history is pinned at, if it is.
    pub(crate) fn pinned(&self) -> Option<u32> {
        self.pinned
    }

    /// Whether the file has grown past its bound because it may not be
    /// compacted yet, or was rewritten without steps the zone file lacks:
    /// the zone should be written back soon.
    pub(crate) fn wants_write_back(&self) -> bool {
        self.pinned.is_some()
            && (self.short || self.file.is_some_and(|f| f.needs_compaction(&self.journal)))
    }

    /// A batch of steps begins (see [`History::take_back`]).
    pub(crate) fn begin_batch(&mut self) {
        self.batch = self.file.map(|f| (f.entries(), false));
    }

    /// The batch's `steps` newest steps never reached the disk and were
    /// never served: they leave the journal, and the file goes back to
    /// what it held before the batch (cut back; or, if the batch replaced
    /// it, written again from the journal, which then held every step
    /// the file must keep). The steps answered before stay.
    pub(crate) fn take_back(&mut self, steps: usize, failures: u64) -> Option<FileChange> {
        self.failures_seen = failures;
        self.journal.forget_newest(steps);
        let batch = self.batch.take();
        let size = self.file.as_mut()?;
        Some(match batch {
            Some((entries, false)) => {
                // Another step may have failed to reach the file in the
                // same writer batch (a reload's): rewritten at the next.
                size.rewrite_next();
                size.truncated(entries)
            }
            _ => size.replace(&self.journal),
        })
    }
}

enum Message {
    /// A change; `true`: a take-back ([`JournalWriter::take_back`]).
    Change(PathBuf, Name, FileChange, bool),
    /// The zone is no longer served: a change of its file still waiting
    /// to be tried again goes (it would land in a file a new zone of that
    /// name may use).
    Forget(Name),
    /// Answered once everything sent before was tried: what is left
    /// waiting to be tried again.
    Flush(Sender<Flushed>),
}

/// What a flush left waiting to be tried again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flushed {
    /// Nothing: every file is written.
    All,
    /// Only take-backs ([`JournalWriter::take_back`]): every step of an
    /// update answered NOERROR is in its file, but a file may still hold
    /// steps of updates answered SERVFAIL (black-box finding BS-5: a
    /// shutdown said changes might be missing).
    TakeBacksOnly,
    /// Steps served, or an answer not come within the wait.
    Unwritten,
}

/// Hands changes to the thread that writes the journal files.
pub(crate) struct JournalWriter {
    messages: Sender<Message>,
    failures: Arc<Failures>,
}

/// Files not written, since the start: in all, and by zone; and why
/// each zone's is not written now (until it is written again).
#[derive(Default)]
struct Failures {
    total: AtomicU64,
    by_zone: std::sync::Mutex<HashMap<Name, u64>>,
    failing: std::sync::Mutex<HashMap<Name, String>>,
}

impl Failures {
    fn count(&self, origins: &[&Name]) {
        let mut by_zone = self.by_zone.lock().unwrap_or_else(|e| e.into_inner());
        for origin in origins {
            *by_zone.entry(origin.to_lowercase()).or_default() += 1;
        }
        drop(by_zone);
        (self.total).fetch_add(origins.len() as u64, Ordering::Release);
    }

    fn failing(&self) -> std::sync::MutexGuard<'_, HashMap<Name, String>> {
        self.failing.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl JournalWriter {
    /// Starts the writer thread; it ends when the writer is dropped.
    pub(crate) fn start() -> io::Result<JournalWriter> {
        let (messages, queue) = channel();
        let failures = Arc::new(Failures::default());
        let counted = failures.clone();
        std::thread::Builder::new()
            .name("journal-files".into())
            .spawn(move || run(queue, &counted))?;
        Ok(JournalWriter { messages, failures })
    }

    /// Files not written since the start.
    pub(crate) fn failures(&self) -> u64 {
        self.failures.total.load(Ordering::Acquire)
    }

    /// Times the journal file of `origin` was not written since the
    /// start: a caller that must know its change is on disk compares this
    /// before and after a flush (another zone's failure is not its own).
    pub(crate) fn failures_of(&self, origin: &Name) -> u64 {
        let by_zone = (self.failures.by_zone.lock()).unwrap_or_else(|e| e.into_inner());
        by_zone.get(&origin.to_lowercase()).copied().unwrap_or(0)
    }

    /// Why the journal file of `origin` is not written now (its write
    /// failed and waits to be tried again), if it is not.
    pub(crate) fn failing_of(&self, origin: &Name) -> Option<String> {
        self.failures.failing().get(&origin.to_lowercase()).cloned()
    }

    pub(crate) fn change(&self, path: &Path, origin: &Name, change: FileChange) {
        let message = Message::Change(path.to_path_buf(), origin.clone(), change, false);
        let _ = self.messages.send(message);
    }

    /// A change that takes back the steps of a batch whose write failed
    /// ([`History::take_back`]): written, it shows nothing of whether the
    /// next step can be, so the zone stays said to fail until one is.
    pub(crate) fn take_back(&self, path: &Path, origin: &Name, change: FileChange) {
        let message = Message::Change(path.to_path_buf(), origin.clone(), change, true);
        let _ = self.messages.send(message);
    }

    /// `origin` is no longer served: see [`Message::Forget`].
    pub(crate) fn forget(&self, origin: &Name) {
        let _ = self.messages.send(Message::Forget(origin.clone()));
    }

    /// Waits, up to `wait`, until everything sent so far was written or
    /// failed (a failure is counted: [`JournalWriter::failures_of`]).
    pub(crate) fn flush(&self, wait: Duration) -> bool {
        self.flush_telling(wait).is_some()
    }

    /// [`JournalWriter::flush`], and what waits to be tried again: what a
    /// shutdown must know.
    pub(crate) fn flush_all(&self, wait: Duration) -> Flushed {
        self.flush_telling(wait).unwrap_or(Flushed::Unwritten)
    }

    fn flush_telling(&self, wait: Duration) -> Option<Flushed> {
        let (done, flushed) = channel();
        let _ = self.messages.send(Message::Flush(done));
        flushed.recv_timeout(wait).ok()
    }
}

/// What a batch does to one file: replaced by some steps (none: removed),
/// or not; then these steps appended. A write that fails is kept and
/// tried again, before anything sent after it ([`RETRY_AFTER`]): a step
/// a reload or a transfer served is never left out of the file while the
/// ones after it go in, a hole that a restart would refuse.
struct Pending {
    origin: Name,
    /// Cut back first to this many octets of entries.
    truncate: Option<u64>,
    replace: Option<Vec<Arc<ZoneDiff>>>,
    /// The steps, each with the octets of entries before it.
    appends: Vec<(Arc<ZoneDiff>, u64)>,
    /// Holds a change sent since the last try (its failure is counted:
    /// the update that sent it must not be answered NOERROR).
    fresh: bool,
    /// Failed tries so far.
    tries: u32,
    /// Whether its last change takes back a failed batch's steps.
    taking_back: bool,
    /// Failed tries while taking back.
    take_backs_failed: u32,
}

impl Pending {
    fn new(origin: Name) -> Pending {
        Pending {
            origin,
            truncate: None,
            replace: None,
            appends: Vec::new(),
            fresh: false,
            tries: 0,
            taking_back: false,
            take_backs_failed: 0,
        }
    }

    fn add(&mut self, change: FileChange, taking_back: bool) {
        self.fresh = true;
        self.taking_back = taking_back;
        match change {
            FileChange::Append { step, at } => self.appends.push((step, at)),
            FileChange::Replace(steps) => {
                self.replace = Some(steps);
                self.appends.clear();
            }
            // The steps at and after the cut were never served (a batch of
            // updates whose sync failed): those still waiting go too.
            FileChange::Truncate(entries) => {
                self.appends.retain(|(_, at)| *at < entries);
                if self.replace.is_none() && self.appends.is_empty() {
                    self.truncate = Some(entries);
                }
            }
        }
    }

    /// After a failed try: kept to be tried again, the file first cut
    /// back to where its first step begins (a torn or unsynced write of
    /// it goes before it is written again).
    fn failed(mut self) -> Pending {
        if let (None, Some((_, at))) = (&self.replace, self.appends.first()) {
            self.truncate = Some(self.truncate.map_or(*at, |t| t.min(*at)));
        }
        self.take_backs_failed += u32::from(self.taking_back);
        self.fresh = false;
        self.tries += 1;
        self
    }
}

/// How long a file whose write failed waits before it is tried again,
/// if nothing else is sent for it first.
const RETRY_AFTER: Duration = Duration::from_secs(1);

fn run(queue: Receiver<Message>, failures: &Failures) {
    let mut failed: HashMap<PathBuf, Pending> = HashMap::new();
    loop {
        let first = match failed.is_empty() {
            true => queue.recv().ok(),
            false => match queue.recv_timeout(RETRY_AFTER) {
                Ok(message) => Some(message),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => None,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
            },
        };
        if first.is_none() && failed.is_empty() {
            return;
        }
        let mut batch = std::mem::take(&mut failed);
        let mut flushes = Vec::new();
        for message in first.into_iter().chain(queue.try_iter()) {
            match message {
                Message::Change(path, origin, change, taking_back) => batch
                    .entry(path)
                    .or_insert_with(|| Pending::new(origin))
                    .add(change, taking_back),
                Message::Forget(origin) => {
                    batch.retain(|_, p| p.origin != origin);
                    failures.failing().remove(&origin.to_lowercase());
                }
                Message::Flush(done) => flushes.push(done),
            }
        }
        let said = |origin: &Name| failures.failing().contains_key(&origin.to_lowercase());
        let not_written: HashMap<PathBuf, String> = (commit(&batch, &said).into_iter())
            .map(|(path, why)| (path.clone(), why))
            .collect();
        let fresh = (not_written.keys()).filter_map(|path| batch.get(path).filter(|p| p.fresh));
        failures.count(&fresh.map(|p| &p.origin).collect::<Vec<_>>());
        for (path, pending) in batch {
            let mut failing = failures.failing();
            if let Some(why) = not_written.get(&path) {
                let why = format!("{}: {why}", path.display());
                failing.insert(pending.origin.to_lowercase(), why);
                drop(failing);
                failed.insert(path, pending.failed());
                continue;
            }
            // A take-back (the steps of a failed write cut back, or the
            // file written again without them) that worked at once says
            // nothing of the next step's write (a file-size limit takes
            // those, not growth): still failing, and not said written
            // (regression hunt BR-5: "written after 1 failed tries" after
            // each refused update, and zone-status silent). One that
            // failed before and works now: the disk is back.
            if pending.taking_back && pending.take_backs_failed == 0 {
                continue;
            }
            let was_failing = failing.remove(&pending.origin.to_lowercase()).is_some();
            drop(failing);
            if pending.tries > 0 || was_failing {
                tracing::info!(
                    "zone {}: journal file {} written after {} failed tries",
                    pending.origin,
                    path.display(),
                    pending.tries
                );
            }
        }
        let left = match failed.is_empty() {
            true => Flushed::All,
            // A take-back waiting: the steps after it were cut from it.
            false
                if failed
                    .values()
                    .all(|p| p.taking_back && p.appends.is_empty()) =>
            {
                Flushed::TakeBacksOnly
            }
            false => Flushed::Unwritten,
        };
        for done in flushes {
            let _ = done.send(left);
        }
    }
}

/// Failures logged one by one in a batch; the rest are counted (a
/// read-only folder of 100,000 zones would otherwise log 100,000 lines).
/// A file tried again is not logged again until it is written.
const FAILURES_LOGGED: usize = 10;

/// Writes every file of the batch, then makes them durable together;
/// returns the files that could not be written, and why.
/// A zone already failing (`said`) is not logged again: each refused
/// update would add a line.
fn commit<'b>(
    batch: &'b HashMap<PathBuf, Pending>,
    said: &dyn Fn(&Name) -> bool,
) -> Vec<(&'b PathBuf, String)> {
    let mut renamed: Vec<&Path> = Vec::new();
    let mut written: Vec<&Path> = Vec::new();
    let mut appended: Vec<&Path> = Vec::new();
    let mut failed = Vec::new();
    let mut logged = 0;
    for (path, pending) in batch {
        match write_one(path, pending) {
            Ok(Written::ToRename) => renamed.push(path),
            Ok(Written::InPlace) => written.push(path),
            Ok(Written::Appended) => appended.push(path),
            Err(e) => {
                failed.push((path, e.to_string()));
                if pending.tries > 0 || said(&pending.origin) {
                    continue;
                }
                logged += 1;
                if logged <= FAILURES_LOGGED {
                    tracing::error!(
                        "zone {}: journal file {} not written: {e}; tried again every {} s",
                        pending.origin,
                        path.display(),
                        RETRY_AFTER.as_secs()
                    );
                }
            }
        }
    }
    if logged > FAILURES_LOGGED {
        tracing::error!(
            "{} more journal files not written",
            logged - FAILURES_LOGGED
        );
    }
    let files = renamed.len() + written.len() + appended.len();
    if files == 0 {
        return failed;
    }
    match disk::install(&renamed, &written, &appended) {
        disk::Installed::NotSynced => {
            let unsynced = [renamed, written, appended].concat();
            let paths = batch.keys().filter(|p| unsynced.contains(&p.as_path()));
            failed.extend(paths.map(|p| (p, "not synced to the disk".to_string())));
        }
        disk::Installed::Synced(not_renamed) => {
            for (path, why) in not_renamed {
                let key = batch.keys().find(|p| p.as_path() == path);
                failed.extend(key.map(|p| (p, why)));
            }
        }
    }
    failed
}

enum Written {
    /// A new version in the `.tmp` file.
    ToRename,
    /// Created or removed: its folder changed.
    InPlace,
    /// Appended to, as it was: its folder did not change.
    Appended,
}

fn write_one(path: &Path, pending: &Pending) -> io::Result<Written> {
    let Pending {
        origin,
        truncate,
        replace,
        appends,
        ..
    } = pending;
    if file::holds_other_data(path)? {
        return Err(io::Error::other(file::OTHER_DATA));
    }
    let appends: Vec<Arc<ZoneDiff>> = appends.iter().map(|(step, _)| step.clone()).collect();
    if let (Some(entries), None) = (truncate, replace) {
        file::truncate(path, origin, *entries)?;
        if appends.is_empty() {
            // A file gone meanwhile had nothing to cut, and has nothing to
            // sync (as appended, its sync failed at every try, for good).
            return Ok(Written::InPlace);
        }
    }
    match replace {
        None => file::append(path, origin, &appends).map(|existed| match existed {
            true => Written::Appended,
            false => Written::InPlace,
        }),
        Some(steps) if steps.is_empty() && appends.is_empty() => {
            remove(path).map(|()| Written::InPlace)
        }
        Some(steps) => {
            let all: Vec<Arc<ZoneDiff>> = steps.iter().chain(&appends).cloned().collect();
            match file::create_file(path, origin, &all) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    write_to_rename(path, origin, &all)
                }
                created => created.map(|()| Written::InPlace),
            }
        }
    }
}

/// A new version of an existing file, in its `.tmp` file until renamed.
fn write_to_rename(path: &Path, origin: &Name, steps: &[Arc<ZoneDiff>]) -> io::Result<Written> {
    let tmp = tmp_path(path);
    file::write_file(&tmp, origin, steps)
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
        .map(|()| Written::ToRename)
}

fn remove(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The journal files that exist, of the zones that keep one.
#[derive(Debug, Default)]
pub struct Found(Vec<(Name, PathBuf)>);

impl Found {
    pub(crate) fn files(&self) -> impl Iterator<Item = (&Name, &Path)> {
        self.0.iter().map(|(origin, path)| (origin, path.as_path()))
    }

    /// The journal file at `path` of `origin`, found otherwise (a zone
    /// that takes no updates, whose journal holds updates), unless it is
    /// listed already.
    pub fn add(&mut self, origin: &Name, path: &Path) {
        if !self.0.iter().any(|(o, p)| o == origin && p == path) {
            self.0.push((origin.clone(), path.to_path_buf()));
        }
    }
}

/// Looks for the journal `files` of zones (origin, path): one listing of
/// each folder that holds many ([`disk::keep_existing`]), without touching
/// the zones, so it can run while they load.
pub fn find<'p>(files: impl IntoIterator<Item = (&'p Name, &'p Path)>) -> Found {
    let files: Vec<(&Name, &Path)> = files.into_iter().collect();
    let found = disk::keep_existing(files, |(_, path)| path);
    Found(
        found
            .into_iter()
            .map(|(o, p)| (o.clone(), p.to_path_buf()))
            .collect(),
    )
}

/// Every step of the journal file at `path` (of zone `origin`), in
/// order, whatever serial they start from (empty if the file is
/// absent): a signed zone's updates are carried over to its zone file
/// by what they changed, not by serial, since signing the file again
/// gives it a serial of its own.
pub fn all_steps(path: &Path, origin: &Name) -> Result<Vec<ZoneDiff>, String> {
    Ok(open_steps(path, origin)?.into_iter().flatten().collect())
}

/// A reader of the journal file at `path`, checked to be zone `origin`'s;
/// None when there is no file.
fn open_steps(
    path: &Path,
    origin: &Name,
) -> Result<Option<file::JournalReader<io::BufReader<std::fs::File>>>, String> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    let reader = match file::JournalReader::new(io::BufReader::new(file), len) {
        Ok(reader) => reader,
        // Cut short within its header: the server stopped while it created
        // the file (`file::create_file`, in place). Nothing in it was
        // answered (an update is answered after its journal is synced), so
        // it holds no steps; refusing it would lose the steps that other
        // files (a signed zone's `.carried`) still hold.
        Err(file::HeaderError::Short) => {
            tracing::warn!(
                "zone {origin}: journal file {}: shorter than its header (a crash while it was created?); it holds no steps",
                path.display()
            );
            return Ok(None);
        }
        Err(e) => return Err(e.to_string()),
    };
    if reader.origin() != origin {
        return Err(format!("it holds the journal of {}", reader.origin()));
    }
    Ok(Some(reader))
}

/// The steps of the journal file at `path` (of zone `origin`) before
/// those [`steps_after`] gives for `served`: the history that led to it
/// (all of it when it ends at `served`). Empty when `served` is neither
/// where a step starts nor where the history ends.
pub fn steps_before(path: &Path, origin: &Name, served: u32) -> Result<Vec<ZoneDiff>, String> {
    let mut steps = all_steps(path, origin)?;
    let ends_there = steps
        .last()
        .is_some_and(|s| serial_of(&s.new_soa) == served);
    if !ends_there {
        let start = (steps.iter()).rposition(|s| serial_of(&s.old_soa) == served);
        steps.truncate(start.unwrap_or(0));
    }
    Ok(steps)
}

/// The steps of the journal file at `path` (of zone `origin`) that lead
/// on from serial `served`, in order: what dynamic updates changed since
/// the zone file was written, to apply to the zone loaded from it. Empty
/// when the history ends at `served` (or the file is empty, or absent);
/// an error when the history does not reach `served` at all (the file
/// was written for another version of the zone).
pub fn steps_after(path: &Path, origin: &Name, served: u32) -> Result<Vec<ZoneDiff>, String> {
    let Some(reader) = open_steps(path, origin)? else {
        return Ok(Vec::new());
    };
    let mut steps: Vec<ZoneDiff> = Vec::new();
    let mut newest = None;
    for step in reader {
        let (from, to) = (serial_of(&step.old_soa), serial_of(&step.new_soa));
        if from == served {
            steps.clear(); // the history may pass `served` more than once
        }
        let follows = steps.last().is_some_and(|s| serial_of(&s.new_soa) == from);
        if from == served || follows {
            steps.push(step);
        }
        newest = Some(to);
    }
    match newest {
        // The history ends where the file is: nothing to apply, though
        // it may have passed this serial before.
        Some(n) if n == served => Ok(Vec::new()),
        Some(n) if n != served && steps.is_empty() => Err(format!(
            "it ends at serial {n} and has no step from serial {served}, the zone file's"
        )),
        _ => Ok(steps),
    }
}

/// What [`restore`] found.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Restored {
    pub(crate) files: usize,
    pub(crate) kept: usize,
    pub(crate) started_over: usize,
}

/// Files one thread reads back, at least, before another is started.
const FILES_PER_THREAD: usize = 256;

/// A zone served at a start, whose journal file is read back.
#[derive(Clone, Copy)]
pub(crate) struct Served<'a> {
    pub(crate) zone: &'a Zone,
    pub(crate) journal: &'a Path,
    /// A secondary's kept copy: its primary holds every version the
    /// journal may hold past it, so such a journal is only a cache.
    pub(crate) refetchable: bool,
}

/// Reads back the journal file of each zone in `zones` (served now, with
/// its journal file, which exists), on every core. A file that does not
/// end at the serial served, or cannot be read, is logged and removed
/// (kept aside when it may hold updates found nowhere else); a torn last
/// entry is cut off. Returns each zone's history restored.
pub(crate) fn restore(zones: &[Served], max_bytes: usize) -> (HashMap<Name, History>, Restored) {
    let threads = heron_zone::cores()
        .min(zones.len().div_ceil(FILES_PER_THREAD))
        .max(1);
    let share = zones.len().div_ceil(threads).max(1);
    let restored: Vec<(Name, Option<History>)> = std::thread::scope(|s| {
        let workers: Vec<_> = zones
            .chunks(share)
            .map(|part| {
                s.spawn(move || {
                    let each = |served: &Served| {
                        let history = restore_one(served, max_bytes);
                        (served.zone.origin().to_lowercase(), history)
                    };
                    part.iter().map(each).collect::<Vec<_>>()
                })
            })
            .collect();
        let done = workers.into_iter().map(|w| w.join().expect("no panic"));
        done.flatten().collect()
    });
    let mut summary = Restored {
        files: restored.len(),
        ..Restored::default()
    };
    let kept = restored
        .into_iter()
        .filter_map(|(origin, h)| Some((origin, h?)));
    let histories: HashMap<Name, History> = kept.collect();
    summary.kept = histories.len();
    summary.started_over = summary.files - summary.kept;
    (histories, summary)
}

fn restore_one(served: &Served, max_bytes: usize) -> Option<History> {
    let (zone, path) = (served.zone, served.journal);
    let origin = zone.origin();
    let read = file::restore(path, origin, zone.serial(), max_bytes);
    let restored = match read.and_then(|r| holds_last_change(zone, r)) {
        Ok(restored) => restored,
        // Set aside since it was found (its updates did not apply): said.
        Err(StartOver::Unreadable(file::HeaderError::Io(e)))
            if e.kind() == io::ErrorKind::NotFound =>
        {
            return None;
        }
        // A step missing inside the history (a write that failed), or a
        // history past the zone file's serial (updates the file lacks, of
        // a zone whose `allow-update` went while it was down): the steps
        // may be updates no restart can replay now; kept for recovery by
        // hand. A secondary's primary holds them: it transfers them again.
        Err(why) if may_hold_updates(&why, path) && !served.refetchable => {
            mark_went_back(origin, path, &why);
            keep_aside(origin, path, &why);
            return None;
        }
        // Another server's journal (a move from BIND), however short: not
        // Heron's to remove; its writes fail until it is moved, so updates
        // are refused rather than answered and lost.
        Err(_) if file::holds_other_data(path).unwrap_or(true) => {
            let (at, why) = (path.display(), file::OTHER_DATA);
            tracing::error!("zone {origin}: journal file {at} not used: {why}");
            return None;
        }
        Err(why) => {
            // A secondary's primary sends those versions again, the same
            // (regression hunt: its kept copy behind its journal lost
            // IXFR from the serials it took again).
            if !served.refetchable {
                mark_went_back(origin, path, &why);
            }
            start_over(origin, path, &why);
            return None;
        }
    };
    if let Some(damage) = &restored.damage {
        match is_torn_tail(path, damage) {
            true => tracing::warn!(
                "zone {origin}: journal file {}: {damage} (a crash while it was written?); cut off there",
                path.display()
            ),
            // Not what a crash leaves: what follows may be worth saving.
            false => {
                let copy = damaged_copy(path);
                tracing::error!(
                    "zone {origin}: journal file {}: {damage}, and entries follow it: the file is damaged; the steps before it are kept, the file is cut there, and its whole copy is {copy}",
                    path.display()
                );
            }
        }
        let cut = std::fs::File::options()
            .write(true)
            .open(path)
            .and_then(|f| f.set_len(restored.good_len));
        if let Err(e) = cut {
            tracing::warn!("zone {origin}: cannot cut {}: {e}", path.display());
        }
    }
    let journal = restored.journal;
    tracing::debug!(
        "zone {origin}: {} IXFR steps restored from {}",
        journal.len(),
        path.display()
    );
    // Not compacted here: until the zone's updates are pinned (after the
    // restore), the journal in memory may lack steps only the file holds.
    // The next step recorded compacts it when it may.
    let size = restored.size;
    Some(History {
        journal,
        file: Some(size),
        pinned: None,
        batch: None,
        failures_seen: 0,
        short: false,
        no_chain: reused_serials(path),
    })
}

/// Beside a zone's journal file (`FILE.jnl.reused`): the last serial the
/// zone was served with two contents under ([`History::serial_reused`]),
/// replaced by the next such serial. The journal file, removed when it
/// happened, cannot say so: without the mark a restart before the serial
/// moved on forgot it, and a secondary holding the first content took
/// the next serial's step, made from the second (black-box finding AS-4).
pub const REUSED_MARK: &str = ".reused";

/// The mark ([`REUSED_MARK`]) beside the journal file `journal`.
pub fn reused_mark_of(journal: &Path) -> PathBuf {
    let mut name = journal.as_os_str().to_owned();
    name.push(REUSED_MARK);
    PathBuf::from(name)
}

/// The serials the mark beside `journal` holds (none without one): a
/// `range AFTER UPTO` line each; a mark of one range written before
/// ranges were kept (`serial N`, and `after M`) is read too.
fn reused_serials(journal: &Path) -> NoChain {
    let Ok(text) = std::fs::read_to_string(reused_mark_of(journal)) else {
        return NoChain::default();
    };
    let mut kept = NoChain::default();
    for line in text.lines() {
        let mut words = line.strip_prefix("range ").unwrap_or("").split_whitespace();
        let mut next = || words.next()?.parse::<u32>().ok();
        if let (Some(after), Some(upto)) = (next(), next()) {
            kept.add(Reused { after, upto });
        }
    }
    let field =
        |key: &str| (text.lines()).find_map(|l| l.strip_prefix(key)?.trim().parse::<u32>().ok());
    if let Some(upto) = field("serial ") {
        kept.add(field("after ").map_or(Reused::only(upto), |after| Reused { after, upto }));
    }
    kept
}

/// Writes the mark beside `journal`: `serial` was served with two
/// contents. Synced, then renamed over the mark before, so that a crash
/// leaves one or the other.
pub(crate) fn mark_reused(journal: &Path, kept: &NoChain) -> io::Result<()> {
    use std::io::Write;
    let mark = reused_mark_of(journal);
    let tmp = tmp_path(&mark);
    let mut text = String::from(
        "; written by Heron: the zone was served with two contents under the serials of each range (after the first, up to the second), so no IXFR starts from them\n",
    );
    for Reused { after, upto } in kept.ranges() {
        text.push_str(&format!("range {after} {upto}\n"));
    }
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(text.as_bytes())?;
        f.sync_all()
    });
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, &mark)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    let _ = std::fs::File::open(disk::folder(&mark)).and_then(|d| d.sync_all());
    Ok(())
}

/// A history that ends past the serial served: the serial went back
/// across the restart (a zone file edited to a lower serial while frozen,
/// or while the server was down), and the serials it went back over were
/// served with other content: no IXFR starts from them, as for a serial
/// that goes back while running (regression hunt AW-4: a Knot secondary
/// took IXFR from one of them and diverged).
fn mark_went_back(origin: &Name, path: &Path, why: &StartOver) {
    if let StartOver::Mismatch { newest, served, .. } = *why {
        mark_serials_gone_back(origin, path, newest, served);
    }
}

/// Marks beside the journal file `path` that the serials after `served`
/// up to `newest` were served with other content, if `newest` is the
/// newer (the zone's serial went back from it to `served`): no IXFR
/// starts from them (see [`mark_went_back`]).
pub fn mark_serials_gone_back(origin: &Name, path: &Path, newest: u32, served: u32) {
    if !crate::serial::is_newer(newest, served) {
        return;
    }
    let mut kept = reused_serials(path);
    kept.add(Reused {
        after: served,
        upto: newest,
    });
    if let Err(e) = mark_reused(path, &kept) {
        tracing::error!(
            "zone {origin}: cannot write {}: {e}; secondaries at serials {served} to {newest} may take an IXFR that does not lead from what they hold",
            reused_mark_of(path).display()
        );
    }
}

/// Removes the journal file at `path`, not used for `why`: the zone's
/// IXFR history starts over.
fn start_over(origin: &Name, path: &Path, why: &StartOver) {
    let say = format!(
        "zone {origin}: journal file {} not used: {why}; its IXFR history starts over",
        path.display()
    );
    match why {
        StartOver::Mismatch { damage: None, .. } => tracing::info!("{say}"),
        StartOver::Unreadable(file::HeaderError::Short) => {
            tracing::warn!("{say} (a crash while it was created?)");
        }
        _ => tracing::warn!("{say}"),
    }
    if let Err(e) = remove(path) {
        tracing::warn!("zone {origin}: cannot remove {}: {e}", path.display());
    }
}

/// Moves the journal file at `path`, not used for `why`, to
/// `FILE.unapplied` (or the first such name free), with an error.
fn keep_aside(origin: &Name, path: &Path, why: &StartOver) {
    let kept = disk::unused_name(path, ".unapplied");
    let moved = std::fs::rename(path, &kept);
    tracing::error!(
        "zone {origin}: journal file {} not used: {why}; its IXFR history starts over, and the file is kept as {}{}",
        path.display(),
        kept.display(),
        moved
            .err()
            .map_or(String::new(), |e| format!(" (not moved: {e})"))
    );
}

/// Whether `damage` is what a crash during an append leaves: the file
/// ends inside the entry, or the damaged entry is the last one, or
/// nothing but zeros follows (a file system that extended the file
/// before the data reached it).
fn is_torn_tail(path: &Path, damage: &file::Damage) -> bool {
    if damage.what == file::DamageKind::Torn {
        return true;
    }
    let Ok(bytes) = std::fs::read(path) else {
        return true;
    };
    let rest = bytes.get(damage.offset as usize..).unwrap_or_default();
    if rest.iter().all(|&b| b == 0) {
        return true;
    }
    let declared = rest.get(..4).map_or(0, |l| {
        u32::from_be_bytes(l.try_into().expect("4 octets")) as usize
    });
    file::ENTRY_HEAD + declared >= rest.len()
}

/// Whether a journal not used may hold updates the zone file lacks: one
/// with a step missing inside it, one that goes on past the file's
/// serial, or one whose reading stopped at damage with entries after it
/// (black-box findings: the last two were removed when the damage came
/// before the file's serial, or the serials ran past 2^31).
fn may_hold_updates(why: &StartOver, path: &Path) -> bool {
    match why {
        StartOver::Gap { .. } | StartOver::NotInZone { .. } => true,
        StartOver::Mismatch {
            newest,
            served,
            damage,
            past_served,
        } => {
            *past_served
                || crate::serial::is_newer(*newest, *served)
                || damage.as_ref().is_some_and(|d| !is_torn_tail(path, d))
        }
        _ => false,
    }
}

/// `restored`, if the zone holds the last change of its history (a
/// history that only ends at the zone's serial may belong to another
/// version with that serial). The signer's records are left out: a zone
/// signed here carries its journal by content.
fn holds_last_change(zone: &Zone, restored: file::Restored) -> Result<file::Restored, StartOver> {
    let Some(last) = restored.journal.diffs().last() else {
        return Ok(restored);
    };
    match change_not_in(zone, last) {
        None => Ok(restored),
        Some(record) => Err(StartOver::NotInZone {
            served: zone.serial(),
            record,
        }),
    }
}

/// A record of `step` that `zone` does not agree with, said as text: one
/// it added that the zone lacks, or one it deleted that the zone holds
/// (the signer's records left out); None if the zone holds the change.
pub fn change_not_in(zone: &Zone, step: &ZoneDiff) -> Option<String> {
    let signers = |r: &&DiffRecord| !is_dnssec_type(r.rtype);
    // The added records by owner and type, so that a deleted record is
    // compared with those of its RRset only: a scan of every added record
    // per deleted one took 91 s at a start with a 200,000-change step.
    let mut by_rrset: std::collections::HashMap<(Vec<u8>, heron_proto::RType), Vec<&DiffRecord>> =
        std::collections::HashMap::new();
    for a in &step.added {
        let key = (a.owner.to_lowercase().as_wire().to_vec(), a.rtype);
        by_rrset.entry(key).or_default().push(a);
    }
    let added = |r: &DiffRecord| {
        let key = (r.owner.to_lowercase().as_wire().to_vec(), r.rtype);
        (by_rrset.get(&key)).is_some_and(|set| set.iter().any(|a| same_record(a, r)))
    };
    let missing = (step.added.iter().filter(signers)).find(|r| !in_zone(zone, r));
    let kept = (step.deleted.iter().filter(signers)).find(|r| in_zone(zone, r) && !added(r));
    let (record, how) = missing
        .map(|r| (r, "added"))
        .or(kept.map(|r| (r, "deleted")))?;
    let serial = serial_of(&step.new_soa);
    Some(format!(
        "{} {} {how} at serial {serial}",
        record.owner, record.rtype
    ))
}

fn same_record(a: &DiffRecord, b: &DiffRecord) -> bool {
    a.rtype == b.rtype && a.owner == b.owner && rdata_equal(a.rtype, &a.rdata, &b.rdata)
}

/// Whether `zone` holds `record`'s RDATA at its owner (whatever its TTL).
fn in_zone(zone: &Zone, record: &DiffRecord) -> bool {
    let owner = record.owner.to_lowercase();
    let Some(set) = zone
        .node(owner.as_wire())
        .and_then(|n| n.rrset(record.rtype))
    else {
        return false;
    };
    set.rdatas()
        .any(|rd| rdata_equal(record.rtype, &rd, &record.rdata))
}

/// Copies the damaged file at `path` beside it (`.damaged`); what to
/// tell the operator of the copy.
fn damaged_copy(path: &Path) -> String {
    let copy = disk::unused_name(path, ".damaged");
    match std::fs::copy(path, &copy) {
        Ok(_) => copy.display().to_string(),
        Err(e) => format!("not made ({e})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_zone::diff::diff;
    use heron_zone::load_zone_str;

    fn step(from: u32, to: u32) -> Arc<ZoneDiff> {
        let zone = |serial: u32| {
            let text =
                format!("$TTL 60\n@ SOA ns h {serial} 2 3 4 5\n@ NS ns\nns A 192.0.2.{serial}\n");
            load_zone_str(&text, "w", &Name::parse("w.test").unwrap())
                .unwrap()
                .zone
        };
        Arc::new(diff(&zone(from), &zone(to)))
    }

    /// A step is held by a zone when its additions are there and its
    /// deletions gone, a deletion added back (a TTL changed) counting as
    /// there; checked per RRset, so a step of many changes is read in
    /// linear time (a 200,000-change step took 91 s at a start).
    #[test]
    fn a_zone_holds_a_step_whose_deletions_are_gone_or_added_back() {
        let text = |ttl: u32, last: usize| {
            let mut t = String::from("$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n");
            for i in 0..last {
                t.push_str(&format!("h{i} {ttl} A 10.0.{}.{}\n", i / 250, i % 250));
            }
            t
        };
        let origin = Name::parse("w.test").unwrap();
        let load = |t: &str| load_zone_str(t, "w", &origin).unwrap().zone;
        let (old, new) = (load(&text(60, 20_000)), load(&text(120, 10_000)));
        let step = diff(&old, &new);
        assert!(step.deleted.len() >= 20_000 && step.added.len() >= 10_000);
        assert_eq!(change_not_in(&new, &step), None);
        let said = change_not_in(&old, &step).expect("the old zone does not hold it");
        assert!(said.contains("at serial"), "{said}");
    }

    /// The serial a journal ends at, read from its last entry alone: a
    /// torn or damaged last entry is passed over; another zone's journal,
    /// or none, has none.
    #[test]
    fn a_journal_ends_at_its_last_good_entrys_serial() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.jnl");
        let origin = Name::parse("w.test").unwrap();
        assert_eq!(file::last_serial(&path, &origin), None, "no file");
        file::write_file(&path, &origin, &[]).unwrap();
        assert_eq!(file::last_serial(&path, &origin), None, "no entry");
        file::write_file(&path, &origin, &[step(1, 2), step(2, 3), step(3, 7)]).unwrap();
        assert_eq!(file::last_serial(&path, &origin), Some(7));
        let other = Name::parse("x.test").unwrap();
        assert_eq!(file::last_serial(&path, &other), None);
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(
            file::last_serial(&path, &origin),
            Some(3),
            "a damaged last entry"
        );
        bytes.truncate(last - 2);
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(
            file::last_serial(&path, &origin),
            Some(3),
            "a torn last entry"
        );
    }

    #[test]
    fn steps_after_a_serial_are_those_that_lead_on_from_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.jnl");
        let origin = Name::parse("w.test").unwrap();
        assert!(
            steps_after(&path, &origin, 1).unwrap().is_empty(),
            "no file"
        );
        let steps = vec![step(1, 2), step(2, 3), step(3, 4)];
        file::write_file(&path, &origin, &steps).unwrap();
        let serials = |from: u32| -> Vec<u32> {
            let after = steps_after(&path, &origin, from).unwrap();
            after.iter().map(|s| serial_of(&s.new_soa)).collect()
        };
        assert_eq!(serials(1), [2, 3, 4]);
        assert_eq!(serials(3), [4]);
        assert!(
            serials(4).is_empty(),
            "the history ends at the zone's serial"
        );
        let e = steps_after(&path, &origin, 9).unwrap_err();
        assert!(e.contains("no step from serial 9"), "{e}");
        let before = |from: u32| -> Vec<u32> {
            let before = steps_before(&path, &origin, from).unwrap();
            before.iter().map(|s| serial_of(&s.new_soa)).collect()
        };
        assert!(before(1).is_empty(), "nothing led to the first serial");
        assert_eq!(before(3), [2, 3]);
        assert_eq!(before(4), [2, 3, 4], "the whole history led to its end");
        assert!(before(9).is_empty(), "a serial the history never had");
        // Round again to the file's serial (RFC 1982): nothing to apply,
        // though serial 2 was passed before.
        let round = vec![step(1, 2), step(2, 3), step(3, 1), step(1, 2)];
        let again = dir.path().join("round.jnl");
        file::write_file(&again, &origin, &round).unwrap();
        assert!(steps_after(&again, &origin, 2).unwrap().is_empty());
        assert_eq!(steps_before(&again, &origin, 2).unwrap().len(), 4);
        let after: Vec<u32> = (steps_after(&again, &origin, 1).unwrap().iter())
            .map(|s| serial_of(&s.new_soa))
            .collect();
        assert_eq!(after, [2], "from the newest step at serial 1");
        let e = steps_after(&path, &Name::parse("x.test").unwrap(), 1).unwrap_err();
        assert!(e.contains("journal of w.test"), "{e}");
        // A torn last entry (a crash while it was written): the steps
        // before it.
        let len = std::fs::metadata(&path).unwrap().len();
        let f = std::fs::File::options().write(true).open(&path).unwrap();
        f.set_len(len - 3).unwrap();
        assert_eq!(serials(1), [2, 3]);
        // Not a journal at all.
        std::fs::write(&path, b"not a journal").unwrap();
        assert!(steps_after(&path, &origin, 1).is_err());
    }

    /// A file cut short within its header (`kill -9` between creating a
    /// new journal file and writing it; found by
    /// `tests/update_kills.rs`) holds no steps: not an error, which made
    /// a signed zone's carry-over drop the steps its `.carried` file held.
    #[test]
    fn a_file_cut_short_in_its_header_holds_no_steps() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.jnl");
        let origin = Name::parse("w.test").unwrap();
        let header = file::header(&origin);
        for len in [0, 1, 8, header.len() - 1] {
            std::fs::write(&path, &header[..len]).unwrap();
            assert_eq!(all_steps(&path, &origin).unwrap().len(), 0, "{len} octets");
            assert!(steps_after(&path, &origin, 1).unwrap().is_empty());
        }
        // The whole header: an empty journal, as before.
        std::fs::write(&path, &header).unwrap();
        assert!(all_steps(&path, &origin).unwrap().is_empty());
        // Garbage of a header's length is still no journal.
        std::fs::write(&path, vec![b'x'; header.len()]).unwrap();
        assert!(all_steps(&path, &origin).is_err());
    }

    #[test]
    fn a_file_that_cannot_be_written_does_not_stop_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let not_a_folder = dir.path().join("file");
        std::fs::write(&not_a_folder, "x").unwrap();
        let (bad, good) = (not_a_folder.join("w.jnl"), dir.path().join("w.jnl"));
        let origin = Name::parse("w.test").unwrap();
        let writer = JournalWriter::start().unwrap();
        for path in [&bad, &good] {
            writer.change(path, &origin, FileChange::Replace(vec![step(1, 2)]));
            writer.change(path, &origin, appended(step(2, 3), 0));
        }
        assert!(writer.flush(Duration::from_secs(10)));
        assert!(!bad.exists());
        let restored = file::restore(&good, &origin, 3, 1 << 20).unwrap();
        assert_eq!(restored.journal.len(), 2);
        // Removed; a removal that fails is logged, the others go on.
        writer.change(&good, &origin, FileChange::Replace(Vec::new()));
        writer.change(&bad, &origin, FileChange::Replace(Vec::new()));
        assert!(writer.flush(Duration::from_secs(10)));
        assert!(!good.exists());
    }

    /// `chattr +i` on a file until dropped (the tests run as root on a
    /// file system that has the attribute, as CI does).
    struct Immutable(PathBuf);

    impl Immutable {
        fn set(path: &Path) -> Immutable {
            let status = std::process::Command::new("chattr")
                .arg("+i")
                .arg(path)
                .status();
            assert!(
                status.is_ok_and(|s| s.success()),
                "chattr +i {}",
                path.display()
            );
            Immutable(path.to_path_buf())
        }
    }

    impl Drop for Immutable {
        fn drop(&mut self) {
            let _ = std::process::Command::new("chattr")
                .arg("-i")
                .arg(&self.0)
                .status();
        }
    }

    /// A new version that cannot replace the file (an immutable file) is
    /// a failed write: the updates in it are refused and taken back, not
    /// said written (black-box finding: answered, then lost at a crash).
    #[test]
    fn a_file_that_cannot_be_replaced_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.jnl");
        let origin = Name::parse("w.test").unwrap();
        let writer = JournalWriter::start().unwrap();
        writer.change(&path, &origin, FileChange::Replace(vec![step(1, 2)]));
        assert!(writer.flush(Duration::from_secs(10)));
        let _immutable = Immutable::set(&path);
        writer.change(
            &path,
            &origin,
            FileChange::Replace(vec![step(1, 2), step(2, 3)]),
        );
        assert!(writer.flush(Duration::from_secs(10)));
        assert_eq!(writer.failures_of(&origin), 1);
        let why = writer.failing_of(&origin).unwrap_or_default();
        assert!(why.contains("cannot replace it"), "{why}");
        assert_eq!(steps_in(&path, &origin), [(1, 2)]);
    }

    /// A failure is counted for the zone whose file it was, not for every
    /// zone of the batch: another zone's updates are not refused for it.
    #[test]
    fn failures_are_counted_by_zone() {
        let dir = tempfile::tempdir().unwrap();
        let not_a_folder = dir.path().join("file");
        std::fs::write(&not_a_folder, "x").unwrap();
        let (bad, good) = (not_a_folder.join("b.jnl"), dir.path().join("g.jnl"));
        let (b, g) = (
            Name::parse("B.test").unwrap(),
            Name::parse("g.test").unwrap(),
        );
        let writer = JournalWriter::start().unwrap();
        writer.change(&bad, &b, appended(step(1, 2), 0));
        writer.change(&good, &g, appended(step(1, 2), 0));
        assert!(writer.flush(Duration::from_secs(10)));
        assert_eq!(writer.failures_of(&Name::parse("b.test").unwrap()), 1);
        assert_eq!((writer.failures_of(&g), writer.failures()), (0, 1));
    }

    fn appended(step: Arc<ZoneDiff>, at: u64) -> FileChange {
        FileChange::Append { step, at }
    }

    /// The serials of the steps in the journal file at `path`.
    fn steps_in(path: &Path, origin: &Name) -> Vec<(u32, u32)> {
        let steps = all_steps(path, origin).unwrap();
        (steps.iter())
            .map(|d| (serial_of(&d.old_soa), serial_of(&d.new_soa)))
            .collect()
    }

    /// A journal file in a folder under `dir` not made yet (its writes
    /// fail until it is), its zone, and a writer.
    fn folder_not_there_yet(dir: &Path, name: &str) -> (PathBuf, PathBuf, Name, JournalWriter) {
        let folder = dir.join(name);
        let path = folder.join("w.jnl");
        let origin = Name::parse("w.test").unwrap();
        (folder, path, origin, JournalWriter::start().unwrap())
    }

    /// A shutdown is told apart: a take-back left waiting (the file may
    /// still hold steps of updates answered SERVFAIL) from steps served
    /// left unwritten (black-box finding BS-5).
    #[test]
    fn a_take_back_left_waiting_is_told_from_steps_unwritten() {
        let dir = tempfile::tempdir().unwrap();
        let (folder, path, origin, writer) = folder_not_there_yet(dir.path(), "gone");
        // The file written again without a refused batch's steps.
        let kept = FileChange::Replace(vec![step(1, 2)]);
        writer.take_back(&path, &origin, kept);
        let left = writer.flush_all(Duration::from_secs(10));
        assert_eq!(left, Flushed::TakeBacksOnly);
        let after_one = file::entry_len(&step(1, 2));
        writer.change(&path, &origin, appended(step(2, 3), after_one));
        assert_eq!(
            writer.flush_all(Duration::from_secs(10)),
            Flushed::Unwritten
        );
        // Both tried again (a flush tries what waits): the file whole.
        std::fs::create_dir(&folder).unwrap();
        assert_eq!(writer.flush_all(Duration::from_secs(10)), Flushed::All);
        assert_eq!(steps_in(&path, &origin), [(1, 2), (2, 3)]);
    }

    /// A step whose write failed (a served reload's, say) is written
    /// before the steps sent after it, and on its own once the disk takes
    /// it again: the file never has a hole that a restart refuses.
    #[test]
    fn a_failed_step_is_written_again_before_the_steps_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let (folder, path, origin, writer) = folder_not_there_yet(dir.path(), "later");
        let (one, two) = (step(1, 2), step(2, 3));
        let after_one = file::entry_len(&one);
        writer.change(&path, &origin, appended(one, 0));
        assert!(writer.flush(Duration::from_secs(10)));
        assert_eq!(writer.failures_of(&origin), 1, "no folder yet");
        assert_eq!(
            writer.flush_all(Duration::from_secs(10)),
            Flushed::Unwritten,
            "a shutdown is told"
        );
        std::fs::create_dir(&folder).unwrap();
        writer.change(&path, &origin, appended(two, after_one));
        assert_eq!(writer.flush_all(Duration::from_secs(10)), Flushed::All);
        assert_eq!(steps_in(&path, &origin), [(1, 2), (2, 3)]);
        assert_eq!(writer.failures_of(&origin), 1, "written at the retry");

        // With nothing sent after it, the step goes in on its own.
        let (later, path, _, _) = folder_not_there_yet(dir.path(), "later2");
        writer.change(&path, &origin, appended(step(1, 2), 0));
        assert!(writer.flush(Duration::from_secs(10)));
        std::fs::create_dir(&later).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !path.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(writer.flush(Duration::from_secs(10)));
        assert_eq!(steps_in(&path, &origin), [(1, 2)]);
    }

    /// A zone no longer served leaves no failed write behind to be tried
    /// again: it would land in a file a new zone of that name may use.
    #[test]
    fn a_zone_forgotten_has_its_failed_write_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let (folder, path, origin, writer) = folder_not_there_yet(dir.path(), "later");
        writer.change(&path, &origin, appended(step(1, 2), 0));
        assert!(writer.flush(Duration::from_secs(10)));
        writer.forget(&Name::parse("W.test").unwrap());
        std::fs::create_dir(&folder).unwrap();
        // Past the time of the next try.
        std::thread::sleep(RETRY_AFTER + Duration::from_millis(500));
        assert!(writer.flush(Duration::from_secs(10)));
        assert!(!path.exists());
    }

    /// A cut (a batch of updates whose sync failed) drops the steps at
    /// and after it that still wait, and keeps those before it.
    #[test]
    fn a_cut_drops_the_waiting_steps_after_it_and_keeps_those_before() {
        let dir = tempfile::tempdir().unwrap();
        let (folder, path, origin, writer) = folder_not_there_yet(dir.path(), "later");
        let (one, two) = (step(1, 2), step(2, 3));
        let after_one = file::entry_len(&one);
        writer.change(&path, &origin, appended(one, 0));
        writer.change(&path, &origin, appended(two, after_one));
        assert!(writer.flush(Duration::from_secs(10)));
        writer.change(&path, &origin, FileChange::Truncate(after_one));
        std::fs::create_dir(&folder).unwrap();
        writer.change(&path, &origin, appended(step(2, 4), after_one));
        assert!(writer.flush(Duration::from_secs(10)));
        assert_eq!(steps_in(&path, &origin), [(1, 2), (2, 4)]);
    }

    /// What a file with `history`'s changes applied holds, read back.
    fn apply(path: &Path, origin: &Name, change: Option<FileChange>) {
        let writer = JournalWriter::start().unwrap();
        writer.change(path, origin, change.expect("a file"));
        assert!(writer.flush(Duration::from_secs(10)));
    }

    /// A pinned history (the zone file lacks its steps) never compacts
    /// its file past them, however small the bound; once unpinned it
    /// does. Past its bound it asks for the zone to be written back.
    #[test]
    fn a_pinned_file_keeps_every_step_the_zone_file_lacks() {
        let dir = tempfile::tempdir().unwrap();
        let (path, origin) = (dir.path().join("p.jnl"), Name::parse("w.test").unwrap());
        let mut history = History::new(3 * file::entry_len(&step(1, 2)) as usize, true);
        history.pin(Some(1));
        for serial in 1..=20 {
            let change = history.record((*step(serial, serial + 1)).clone());
            apply(&path, &origin, change);
        }
        let kept = all_steps(&path, &origin).unwrap();
        assert_eq!(kept.len(), 20, "every step from serial 1");
        assert!(history.wants_write_back());
        history.pin(None);
        let change = history.record((*step(21, 22)).clone());
        assert!(matches!(change, Some(FileChange::Replace(_))), "{change:?}");
        assert!(!history.wants_write_back());
    }

    /// A damaged entry followed by good ones is not a crash's torn tail:
    /// the file is copied aside before it is cut (the entries after the
    /// damage could be recovered by hand); a torn tail is only cut.
    #[test]
    fn damage_before_good_entries_is_copied_aside_before_the_cut() {
        let dir = tempfile::tempdir().unwrap();
        let origin = Name::parse("w.test").unwrap();
        let zone = load_zone_str("$TTL 60\n@ SOA ns h 5 2 3 4 5\n@ NS ns\n", "w", &origin)
            .unwrap()
            .zone;
        let writer = JournalWriter::start().unwrap();
        let steps: Vec<Arc<ZoneDiff>> = (1..5).map(|n| step(n, n + 1)).collect();
        for (name, flip_from_end) in [("first.jnl", None), ("torn.jnl", Some(()))] {
            let path = dir.path().join(name);
            writer.change(&path, &origin, FileChange::Replace(steps.clone()));
            assert!(writer.flush(Duration::from_secs(10)));
            let mut bytes = std::fs::read(&path).unwrap();
            match flip_from_end {
                // The first entry's body, right after the header.
                None => {
                    let at = file::header(&origin).len() + file::ENTRY_HEAD + 3;
                    bytes[at] ^= 0xFF;
                }
                Some(()) => {
                    let last = bytes.len() - 3;
                    bytes[last] ^= 0xFF;
                }
            }
            std::fs::write(&path, &bytes).unwrap();
            restore_one(&own(&zone, &path), 1 << 20);
            let copy = dir.path().join(format!("{name}.damaged"));
            assert_eq!(copy.exists(), flip_from_end.is_none(), "{name}");
            if copy.exists() {
                assert_eq!(std::fs::read(&copy).unwrap(), bytes, "the whole file");
            }
        }
    }

    /// At a start, a journal past the zone file's serial (updates of a
    /// zone whose `allow-update` went while the server was down) is kept
    /// aside, not removed; one behind it (the file edited with a new
    /// serial) is removed, its history over. A secondary's journal past
    /// its kept copy is removed: its primary holds those steps.
    #[test]
    fn a_journal_past_the_zone_file_is_kept_aside() {
        let dir = tempfile::tempdir().unwrap();
        let origin = Name::parse("w.test").unwrap();
        let zone_at = |serial: u32| {
            let text = format!("$TTL 60\n@ SOA ns h {serial} 2 3 4 5\n@ NS ns\n");
            load_zone_str(&text, "w", &origin).unwrap().zone
        };
        let writer = JournalWriter::start().unwrap();
        let (ahead, behind) = (dir.path().join("ahead.jnl"), dir.path().join("behind.jnl"));
        let copy_ahead = dir.path().join("copy.jnl");
        for path in [&ahead, &behind, &copy_ahead] {
            writer.change(
                path,
                &origin,
                FileChange::Replace(vec![step(1, 2), step(2, 3)]),
            );
        }
        assert!(writer.flush(Duration::from_secs(10)));
        assert!(restore_one(&own(&zone_at(2), &ahead), 1 << 20).is_none());
        assert!(!ahead.exists());
        assert!(dir.path().join("ahead.jnl.unapplied").exists());
        assert!(restore_one(&own(&zone_at(7), &behind), 1 << 20).is_none());
        assert!(!behind.exists());
        assert!(!dir.path().join("behind.jnl.unapplied").exists());
        let at_2 = zone_at(2);
        let kept_copy = Served {
            refetchable: true,
            ..own(&at_2, &copy_ahead)
        };
        assert!(restore_one(&kept_copy, 1 << 20).is_none());
        assert!(!copy_ahead.exists());
        assert!(!dir.path().join("copy.jnl.unapplied").exists());
    }

    /// Black-box findings: a journal whose reading stopped at damage
    /// before the zone file's serial, with entries after it, and one whose
    /// steps go on past the file's serial for more than 2^31 (their end
    /// compares as older, RFC 1982), were removed with the updates they
    /// held. Both are kept aside.
    #[test]
    fn a_journal_with_steps_past_the_file_beyond_damage_or_a_serial_wrap_is_kept_aside() {
        let dir = tempfile::tempdir().unwrap();
        let origin = Name::parse("w.test").unwrap();
        let zone_at = |serial: u32| {
            let text = format!("$TTL 60\n@ SOA ns h {serial} 2 3 4 5\n@ NS ns\n");
            load_zone_str(&text, "w", &origin).unwrap().zone
        };
        let writer = JournalWriter::start().unwrap();
        let damaged = dir.path().join("damaged.jnl");
        let steps: Vec<Arc<ZoneDiff>> = (1..6).map(|n| step(n, n + 1)).collect();
        writer.change(&damaged, &origin, FileChange::Replace(steps));
        let wrapped = dir.path().join("wrapped.jnl");
        let at = |serial: u32, host: u32| {
            let text =
                format!("$TTL 60\n@ SOA ns h {serial} 2 3 4 5\n@ NS ns\nns A 192.0.2.{host}\n");
            load_zone_str(&text, "w", &origin).unwrap().zone
        };
        let far = 3u32 + (1 << 31) + 5;
        let jumps: Vec<Arc<ZoneDiff>> = [(2, 3, 2), (3, far, 3), (far, far.wrapping_add(9), 4)]
            .into_iter()
            .map(|(from, to, host)| Arc::new(diff(&at(from, host), &at(to, host + 1))))
            .collect();
        writer.change(&wrapped, &origin, FileChange::Replace(jumps));
        assert!(writer.flush(Duration::from_secs(10)));
        // The second entry (2 to 3) damaged; the file is at serial 3.
        let mut bytes = std::fs::read(&damaged).unwrap();
        let second = file::header(&origin).len() + file::entry_len(&step(1, 2)) as usize;
        bytes[second + file::ENTRY_HEAD + 3] ^= 0xFF;
        std::fs::write(&damaged, &bytes).unwrap();
        assert!(restore_one(&own(&zone_at(3), &damaged), 1 << 20).is_none());
        assert!(dir.path().join("damaged.jnl.unapplied").exists());
        assert!(restore_one(&own(&zone_at(2), &wrapped), 1 << 20).is_none());
        assert!(dir.path().join("wrapped.jnl.unapplied").exists());
    }

    /// A journal that ends at the zone's serial but whose last change the
    /// zone lacks (the file edited and given the journal's serial while
    /// the server was down, its updates left out) is not taken as the
    /// zone's history: kept aside, with its updates, for a primary; gone
    /// for a secondary's kept copy, whose primary holds them.
    #[test]
    fn a_journal_whose_last_change_the_zone_lacks_is_not_its_history() {
        let dir = tempfile::tempdir().unwrap();
        let origin = Name::parse("w.test").unwrap();
        let zone_at = |serial: u32, ns: u32| {
            let text =
                format!("$TTL 60\n@ SOA ns h {serial} 2 3 4 5\n@ NS ns\nns A 192.0.2.{ns}\n");
            load_zone_str(&text, "w", &origin).unwrap().zone
        };
        let writer = JournalWriter::start().unwrap();
        let paths: Vec<PathBuf> = ["same", "edited", "copy"]
            .iter()
            .map(|name| dir.path().join(format!("{name}.jnl")))
            .collect();
        for path in &paths {
            let steps = vec![step(1, 2), step(2, 3)];
            writer.change(path, &origin, FileChange::Replace(steps));
        }
        assert!(writer.flush(Duration::from_secs(10)));
        let kept = restore_one(&own(&zone_at(3, 3), &paths[0]), 1 << 20);
        assert_eq!(kept.map(|h| h.journal.len()), Some(2));
        let edited = zone_at(3, 9);
        assert!(restore_one(&own(&edited, &paths[1]), 1 << 20).is_none());
        assert!(dir.path().join("edited.jnl.unapplied").exists());
        let copy = Served {
            refetchable: true,
            ..own(&edited, &paths[2])
        };
        assert!(restore_one(&copy, 1 << 20).is_none());
        assert!(!paths[2].exists() && !dir.path().join("copy.jnl.unapplied").exists());
    }

    /// Another server's journal at the zone's journal path (BIND's
    /// `FILE.jnl`, a move in progress) is never removed, cut or written
    /// over: the start leaves it, and every write to it fails (so an
    /// update is refused, not answered and lost).
    #[test]
    fn another_servers_journal_is_left_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let origin = Name::parse("w.test").unwrap();
        let zone = load_zone_str("$TTL 60\n@ SOA ns h 2 2 3 4 5\n@ NS ns\n", "w", &origin)
            .unwrap()
            .zone;
        let path = dir.path().join("w.zone.jnl");
        for short in [&b"keepme\n"[..], b"HERONJNX"] {
            std::fs::write(&path, short).unwrap();
            assert!(restore_one(&own(&zone, &path), 1 << 20).is_none());
            assert_eq!(std::fs::read(&path).unwrap(), short, "a short one left");
        }
        let bind: Vec<u8> = b";BIND LOG V9.2\n".iter().copied().chain([0; 64]).collect();
        std::fs::write(&path, &bind).unwrap();
        assert!(file::holds_other_data(&path).unwrap());
        assert!(restore_one(&own(&zone, &path), 1 << 20).is_none());
        assert_eq!(std::fs::read(&path).unwrap(), bind, "left at the start");
        let writer = JournalWriter::start().unwrap();
        for change in [
            FileChange::Append {
                step: step(2, 3),
                at: 0,
            },
            FileChange::Replace(vec![step(2, 3)]),
            FileChange::Replace(Vec::new()),
            FileChange::Truncate(0),
        ] {
            writer.change(&path, &origin, change);
            assert!(writer.flush(Duration::from_secs(10)));
            assert_eq!(std::fs::read(&path).unwrap(), bind, "left by the writer");
        }
        assert!(writer.failures_of(&origin) > 0);
        writer.forget(&origin);
        let ours = dir.path().join("ours.jnl");
        for contents in [&b""[..], &file::MAGIC[..3]] {
            std::fs::write(&ours, contents).unwrap();
            assert!(!file::holds_other_data(&ours).unwrap());
        }
        assert!(!file::holds_other_data(&dir.path().join("none")).unwrap());
    }

    /// `zone`, served from its own file, with its journal at `journal`.
    fn own<'a>(zone: &'a Zone, journal: &'a Path) -> Served<'a> {
        Served {
            zone,
            journal,
            refetchable: false,
        }
    }

    /// A write of the file failed outside an update (a reload's step, a
    /// transfer's): the next step rewrites the file whole, so the step it
    /// missed leaves no hole that a restart would refuse.
    #[test]
    fn a_failed_write_makes_the_next_step_rewrite_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let (path, origin) = (dir.path().join("h.jnl"), Name::parse("w.test").unwrap());
        let mut history = History::new(1 << 20, true);
        apply(&path, &origin, history.record((*step(1, 2)).clone()));
        // The step 2 -> 3 never reached the file.
        let lost = history.record((*step(2, 3)).clone());
        assert!(matches!(lost, Some(FileChange::Append { .. })));
        history.failures_now(1);
        let next = history.record((*step(3, 4)).clone());
        assert!(
            matches!(&next, Some(FileChange::Replace(v)) if v.len() == 3),
            "{next:?}"
        );
        apply(&path, &origin, next);
        let restored = file::restore(&path, &origin, 4, 1 << 20).unwrap();
        assert_eq!(restored.journal.len(), 3, "the whole chain");
        // Once only: the step after appends again.
        history.failures_now(1);
        let after = history.record((*step(4, 5)).clone());
        assert!(matches!(after, Some(FileChange::Append { .. })));
    }

    /// A step too large for the journal in memory (a hand edit merged by
    /// a reload) emptied the journal, and the file was replaced by that
    /// emptiness: the updates the zone file lacked were gone. Pinned, the
    /// step is appended and the zone asked to be written back.
    #[test]
    fn a_step_too_large_keeps_the_steps_the_zone_file_lacks() {
        let dir = tempfile::tempdir().unwrap();
        let (path, origin) = (dir.path().join("l.jnl"), Name::parse("w.test").unwrap());
        let mut history = History::new(2 * file::entry_len(&step(1, 2)) as usize, true);
        history.pin(Some(1));
        for serial in 1..=2 {
            apply(
                &path,
                &origin,
                history.record((*step(serial, serial + 1)).clone()),
            );
        }
        let zone = |serial: u32, extra: usize| {
            let mut text = format!("$TTL 60\n@ SOA ns h {serial} 2 3 4 5\n@ NS ns\n");
            (0..extra).for_each(|i| text.push_str(&format!("h{i} A 192.0.2.1\n")));
            load_zone_str(&text, "w", &origin).unwrap().zone
        };
        let large = diff(&zone(3, 0), &zone(4, 500));
        let change = history.record(large);
        assert!(
            matches!(change, Some(FileChange::Append { .. })),
            "{change:?}"
        );
        apply(&path, &origin, change);
        assert_eq!(all_steps(&path, &origin).unwrap().len(), 3);
        assert!(history.wants_write_back());
        // The journal in memory now holds nothing to go on from: the next
        // step still goes on from the file, not over it.
        let next = history.record((*step(4, 5)).clone());
        assert!(matches!(next, Some(FileChange::Append { .. })), "{next:?}");
        apply(&path, &origin, next);
        assert_eq!(all_steps(&path, &origin).unwrap().len(), 4);
    }

    /// A write that failed with no step after it (a thaw's merge, then a
    /// stop) is healed at shutdown: the file written whole again, when
    /// the journal holds every step it must keep; not when it does not.
    #[test]
    fn a_failed_write_with_no_step_after_it_is_healed_at_shutdown() {
        let mut history = History::new(1 << 20, true);
        for serial in 1..=3 {
            history.record((*step(serial, serial + 1)).clone());
        }
        assert!(history.heal().is_none(), "nothing failed");
        history.failures_now(1);
        let healed = history.heal();
        assert!(
            matches!(&healed, Some(FileChange::Replace(v)) if v.len() == 3),
            "{healed:?}"
        );
        assert!(history.heal().is_none(), "once");
        // Pinned at a serial the journal no longer holds: left for the
        // zone's write-back.
        history.pin(Some(0));
        history.failures_now(2);
        assert!(history.heal().is_none());
    }

    /// A batch whose journal write failed is taken back: its steps leave
    /// the journal and the file, the steps answered before stay.
    #[test]
    fn a_batch_taken_back_leaves_the_steps_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let (path, origin) = (dir.path().join("t.jnl"), Name::parse("w.test").unwrap());
        let mut history = History::new(1 << 20, true);
        for serial in 1..=3 {
            apply(
                &path,
                &origin,
                history.record((*step(serial, serial + 1)).clone()),
            );
        }
        history.begin_batch();
        for serial in 4..=5 {
            apply(
                &path,
                &origin,
                history.record((*step(serial, serial + 1)).clone()),
            );
        }
        apply(&path, &origin, history.take_back(2, 0));
        assert_eq!(history.journal.newest_serial(), Some(4));
        let kept = all_steps(&path, &origin).unwrap();
        assert_eq!(kept.len(), 3, "the steps answered before");
        // The next step goes on from the version served.
        apply(&path, &origin, history.record((*step(4, 5)).clone()));
        let restored = file::restore(&path, &origin, 5, 1 << 20).unwrap();
        assert_eq!(restored.journal.len(), 4);
    }
}
