//! The primary side: who may transfer each zone, the journal of recent
//! changes each transfer can be served from, and NOTIFY out.
//!
//! * [`transfer`]: the messages of an AXFR or IXFR, packed with no I/O.
//! * [`notify`]: telling secondaries about a new serial (RFC 1996).

pub mod notify;
pub mod transfer;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use heron_proto::Name;
use heron_zone::Zone;
use heron_zone::diff::{ZoneDiff, diff};

use crate::acl::{Acl, Prefix};
use crate::journal;
use crate::journal::files::{self as journal_files, History, JournalWriter, Reused};
use crate::serial;
use crate::update::UpdateSettings;

pub use crate::timers::notify_out::NotifyTarget;

/// The transfer settings of one zone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ZonePolicy {
    /// Who may AXFR/IXFR the zone (nobody by default).
    pub allow_transfer: Acl,
    /// Who may send NOTIFY for the zone (its primaries, when secondary).
    pub allow_notify: Acl,
    /// Secondaries told about every new serial.
    pub notify: Vec<NotifyTarget>,
    /// Where the zone's journal is kept across restarts (None: in memory
    /// only). Used only if someone may transfer or update the zone.
    pub journal_file: Option<PathBuf>,
    /// Who may change the zone by dynamic update, and how its serial
    /// moves on (nobody by default).
    pub update: UpdateSettings,
    /// The zone takes no updates now, but its journal holds updates its
    /// file lacks (answered before `allow-update` went, under
    /// `zonefile-sync = "never"`): the journal stays its journal, kept
    /// and replayed at a start, until the zone is written to its file.
    pub holds_updates: bool,
}

impl ZonePolicy {
    /// Whether the zone keeps a history of its versions: someone may
    /// transfer it (by IXFR) or update it (the journal is what keeps the
    /// updates across restarts), or its journal holds updates.
    pub fn keeps_history(&self) -> bool {
        !self.allow_transfer.is_empty() || self.takes_updates() || self.holds_updates
    }

    /// Whether someone may update the zone.
    pub fn takes_updates(&self) -> bool {
        !self.update.policy.is_empty()
    }

    /// The file the zone's journal is kept in, if any: there is a journal
    /// only if someone may transfer or update the zone.
    pub fn journal_path(&self) -> Option<&Path> {
        if !self.keeps_history() {
            return None;
        }
        self.journal_file.as_deref()
    }
}

/// How to answer one transfer request for a zone we serve.
#[derive(Debug)]
pub enum TransferPlan {
    /// The whole zone.
    Axfr,
    /// The steps from the client's serial to ours.
    Ixfr(Vec<Arc<ZoneDiff>>),
    /// The client has our serial (or a newer one): our SOA alone.
    UpToDate,
}

/// Zone policies by lower-cased origin, shared by whoever reads them.
type Policies = Arc<HashMap<Name, Arc<ZonePolicy>>>;

/// Policies a zone may share with others, looked for among the last few
/// distinct ones: the zones of a `[[zone-group]]` have one policy between
/// them (100,000 copies of it cost 11 MB), and zones with policies of
/// their own (a journal file each) cost a few comparisons.
const SHARED_POLICIES_SOUGHT: usize = 16;

fn by_lowercase_origin(policies: HashMap<Name, ZonePolicy>) -> Policies {
    let mut distinct: Vec<Arc<ZonePolicy>> = Vec::new();
    let mut shared = |p: ZonePolicy| -> Arc<ZonePolicy> {
        if let Some(same) = distinct.iter().rev().find(|d| ***d == p) {
            return same.clone();
        }
        if distinct.len() == SHARED_POLICIES_SOUGHT {
            distinct.remove(0);
        }
        distinct.push(Arc::new(p));
        distinct.last().expect("pushed").clone()
    };
    let mut by_origin = HashMap::with_capacity(policies.len());
    for (origin, p) in policies {
        by_origin.insert(origin.to_lowercase(), shared(p));
    }
    Arc::new(by_origin)
}

/// The widest IPv4 prefix of an `allow-transfer` rule whose addresses
/// are taken for secondaries (exempt from the per-client connection
/// limit): a /24, the smallest network routed on the Internet.
pub const SECONDARIES_IPV4_BITS: u8 = 24;
/// The same for IPv6: a /48, one site.
pub const SECONDARIES_IPV6_BITS: u8 = 48;

/// Whether a keyless `allow-transfer` prefix names secondaries (one site's
/// network at most) rather than everyone in a wide network.
pub fn names_secondaries(prefix: &Prefix) -> bool {
    let widest = match prefix.is_ipv4() {
        true => SECONDARIES_IPV4_BITS,
        false => SECONDARIES_IPV6_BITS,
    };
    prefix.bits() >= widest
}

/// Transfer policies and journals of every zone this server is primary for.
pub struct Primary {
    /// By lower-cased origin; replaced whole when the configuration is
    /// read again ([`Primary::set_policies`]).
    policies: RwLock<Policies>,
    /// The policies of catalog member zones, by lower-cased origin: set
    /// one zone at a time as catalogs change, and left alone when the
    /// configuration is read again.
    member_policies: RwLock<HashMap<Name, Arc<ZonePolicy>>>,
    /// The policy of a zone that has none configured: refuse everything.
    closed: Arc<ZonePolicy>,
    journals: Mutex<HashMap<Name, History>>,
    journal_max_bytes: usize,
    /// Writes the journal files, once they are opened: at the start, or
    /// at the first reload that gives a zone a journal file.
    files: OnceLock<JournalWriter>,
}

impl Primary {
    pub fn new(policies: HashMap<Name, ZonePolicy>, journal_max_bytes: usize) -> Primary {
        Primary {
            policies: RwLock::new(by_lowercase_origin(policies)),
            member_policies: RwLock::default(),
            closed: Arc::default(),
            journals: Mutex::new(HashMap::new()),
            journal_max_bytes,
            files: OnceLock::new(),
        }
    }

    /// From now on keeps the journals of zones with a journal file in
    /// those files. `found` are the files that exist ([`journal_files::find`],
    /// which may run while the zones load); each is read back for its zone
    /// as `served` finds it at startup, with whether that is a
    /// secondary's kept copy. The file of a zone not served now is left as
    /// it is until the zone records a step.
    pub fn open_journal_files<'z>(
        &mut self,
        found: journal_files::Found,
        served: impl Fn(&Name) -> Option<(&'z Zone, bool)>,
    ) {
        if !self.start_journal_writer() {
            return;
        }
        let started = Instant::now();
        let zones: Vec<journal_files::Served> = found
            .files()
            .filter_map(|(origin, journal)| {
                let (zone, refetchable) = served(origin)?;
                Some(journal_files::Served {
                    zone,
                    journal,
                    refetchable,
                })
            })
            .collect();
        let (histories, found) = journal_files::restore(&zones, self.journal_max_bytes);
        if found.files > 0 {
            tracing::info!(
                "{} journal files read in {} ms: {} taken up, {} not (each said above)",
                found.files,
                started.elapsed().as_millis(),
                found.kept,
                found.started_over
            );
        }
        *self.journals.get_mut().unwrap() = histories;
    }

    /// Starts the thread that writes journal files if some zone's policy
    /// has one and it is not running yet; whether it runs.
    fn start_journal_writer(&self) -> bool {
        if self.files.get().is_some() {
            return true;
        }
        let configured = self.policies().values().any(|p| p.journal_path().is_some());
        let members = || {
            let members = self.member_policies.read().unwrap();
            members.values().any(|p| p.journal_path().is_some())
        };
        if !configured && !members() {
            return false;
        }
        match JournalWriter::start() {
            Ok(writer) => self.files.get_or_init(|| writer),
            Err(e) => {
                tracing::error!(
                    "cannot start the thread that writes journal files: {e}; journals stay in memory"
                );
                return false;
            }
        };
        true
    }

    /// Reads back the journal file of `zone` (served now, a zone that was
    /// not served before: configured again, or its file loaded at last),
    /// as a start does; a file that does not end at its serial goes, as
    /// at a start. Nothing when journals are not kept in files.
    pub fn restore_journal(&self, zone: &Zone) {
        self.restore_journal_of(zone, false);
    }

    /// [`Primary::restore_journal`] for a secondary's kept copy (a
    /// catalog member's at start): its primary holds every version the
    /// journal may hold past it, so a file that does not fit is only a
    /// cache that goes, never one set aside.
    pub fn restore_kept_journal(&self, zone: &Zone) {
        self.restore_journal_of(zone, true);
    }

    fn restore_journal_of(&self, zone: &Zone, refetchable: bool) {
        let policy = self.policy(zone.origin());
        let (Some(_), Some(path)) = (self.files.get(), policy.journal_path()) else {
            return;
        };
        if !path.exists() {
            return;
        }
        let served = journal_files::Served {
            zone,
            journal: path,
            refetchable,
        };
        let (mut histories, _) = journal_files::restore(&[served], self.journal_max_bytes);
        let origin = zone.origin().to_lowercase();
        if let Some(history) = histories.remove(&origin) {
            let mut journals = self.journals.lock().unwrap();
            // Pinned already if its updates were replayed: kept.
            let pinned = journals.remove(&origin).and_then(|h| h.pinned());
            let mut history = history;
            history.pin(pinned);
            journals.insert(origin, history);
        }
    }

    /// Writes again whole each journal file a failed write left short of
    /// a step, where the journal in memory holds every step it must keep
    /// (at shutdown: otherwise no later step would heal it).
    pub fn heal_journal_files(&self) {
        let Some(writer) = self.files.get() else {
            return;
        };
        let mut journals = self.journals.lock().unwrap();
        for (origin, history) in journals.iter_mut() {
            history.failures_now(writer.failures_of(origin));
            let policy = self.policy(origin);
            if let (Some(path), Some(change)) = (policy.journal_path(), history.heal()) {
                writer.change(path, origin, change);
            }
        }
    }

    /// Waits, up to `wait`, until every journal change so far is on disk
    /// (at shutdown). Returns whether it got there.
    pub fn flush_journal_files(&self, wait: Duration) -> bool {
        self.files.get().is_none_or(|w| w.flush(wait))
    }

    /// [`Primary::flush_journal_files`], at shutdown: false too when a
    /// file whose write failed is still not written.
    pub fn flush_all_journal_files(&self, wait: Duration) -> journal_files::Flushed {
        (self.files.get()).map_or(journal_files::Flushed::All, |w| w.flush_all(wait))
    }

    pub fn policy(&self, origin: &Name) -> Arc<ZonePolicy> {
        // Names hash and compare ignoring case: no lower-cased copy.
        let policies = self.policies();
        if let Some(policy) = policies.get(origin) {
            return policy.clone();
        }
        let members = self.member_policies.read().unwrap();
        members.get(origin).unwrap_or(&self.closed).clone()
    }

    /// Sets (or with None, drops) the policy of a catalog member zone
    /// (the members of one template share one).
    pub fn set_member_policy(&self, origin: &Name, policy: Option<Arc<ZonePolicy>>) {
        let journal = policy.as_ref().is_some_and(|p| p.journal_path().is_some());
        let mut members = self.member_policies.write().unwrap();
        match policy {
            Some(policy) => members.insert(origin.to_lowercase(), policy),
            None => members.remove(&origin.to_lowercase()),
        };
        drop(members);
        // A member's journal file is written as a configured zone's is,
        // though no configured zone keeps one.
        if journal {
            self.start_journal_writer();
        }
    }

    /// Every zone's policy as configured now.
    pub fn policies(&self) -> Arc<HashMap<Name, Arc<ZonePolicy>>> {
        self.policies.read().unwrap().clone()
    }

    /// Replaces every zone's policy (the configuration was read again):
    /// transfers, NOTIFYs and journal steps from now on follow `policies`.
    /// A journal already kept in memory stays, and goes to the zone's
    /// journal file, if it now has one, with its next step; the thread
    /// that writes journal files starts if it was not running.
    pub fn set_policies(&self, policies: HashMap<Name, ZonePolicy>) {
        *self.policies.write().unwrap() = by_lowercase_origin(policies);
        self.start_journal_writer();
    }

    /// Replaces one configured zone's policy (a zone found holding
    /// updates when it is served again, say), the others left as they are.
    pub fn set_policy(&self, origin: &Name, policy: ZonePolicy) {
        let mut policies = self.policies.write().unwrap();
        let mut next = (**policies).clone();
        next.insert(origin.to_lowercase(), Arc::new(policy));
        *policies = Arc::new(next);
        drop(policies);
        self.start_journal_writer();
    }

    /// Drops the in-memory journal of a zone no longer served, so that a
    /// zone configured again later starts its history afresh.
    pub fn forget(&self, origin: &Name) {
        self.journals.lock().unwrap().remove(&origin.to_lowercase());
        if let Some(writer) = self.files.get() {
            writer.forget(origin);
        }
    }

    /// Records a new version of a zone: its diff goes to the journal when
    /// the serial moved forward and someone may transfer the zone (no
    /// journal is kept for zones nobody can IXFR). Returns whether
    /// secondaries should be notified (the serial moved forward).
    pub fn zone_changed(&self, old: &Zone, new: &Zone) -> bool {
        if !self.serial_moved_on(old, new) {
            return false;
        }
        if !self.policy(new.origin()).keeps_history() {
            tracing::info!(
                zone = %new.origin(),
                "zone {}: serial {} -> {}",
                new.origin(),
                old.serial(),
                new.serial()
            );
            return true;
        }
        // The diff walks the zone: computed before taking the lock that
        // transfers in progress need.
        let step = diff(old, new);
        tracing::info!(
            zone = %new.origin(),
            "zone {}: serial {} -> {}, {} records deleted, {} added",
            new.origin(),
            old.serial(),
            new.serial(),
            step.deleted.len(),
            step.added.len()
        );
        self.record(new.origin(), [step]);
        true
    }

    /// Records the steps dynamic updates made, in order (the first from
    /// the version served). [`Primary::flush_journal_files`] then makes
    /// them durable; [`Primary::journal_failures`] says whether a write
    /// failed meanwhile.
    pub fn zone_updated(&self, origin: &Name, steps: Vec<ZoneDiff>) {
        self.record(origin, steps);
    }

    /// Forgets a zone's history (its journal file too).
    pub fn restart_history(&self, origin: &Name) {
        // With what the mark beside the journal file says now: a reload
        // that takes a frozen edit lowering the serial writes it there
        // (regression hunt AW-4).
        let policy = self.policy(origin);
        let path = self
            .files
            .get()
            .and(policy.journal_path())
            .map(Path::to_path_buf);
        self.update_history(origin, |h| {
            h.take_marks(path.as_deref());
            h.clear()
        });
    }

    /// A batch of steps of `origin` begins: [`Primary::take_back`] can
    /// undo it.
    pub fn begin_batch(&self, origin: &Name) {
        self.update_history(origin, |history| {
            history.begin_batch();
            None
        });
    }

    /// The `steps` newest steps of `origin` (its batch's) did not reach
    /// the disk and were never served: they leave the journal and its file,
    /// which keeps the steps answered before.
    pub fn take_back(&self, origin: &Name, steps: usize) {
        // The failure is the batch's, which the file is cut back for: the
        // next step need not rewrite it whole.
        let failures = self.journal_failures_of(origin);
        let take_back = |history: &mut History| history.take_back(steps, failures);
        self.update_history_sending(origin, take_back, JournalWriter::take_back);
    }

    /// The zone file of `origin` holds serial `serial`, and the journal
    /// the steps after it that it lacks (None: the file holds what is
    /// served): the journal file keeps them until then.
    pub fn pin_history(&self, origin: &Name, serial: Option<u32>) {
        self.update_history(origin, |history| {
            history.pin(serial);
            None
        });
    }

    /// Whether the zone should be written back to its file now: its
    /// journal file passed its bound and may not drop the steps the zone
    /// file lacks.
    pub fn wants_write_back(&self, origin: &Name) -> bool {
        let journals = self.journals.lock().unwrap();
        (journals.get(&origin.to_lowercase())).is_some_and(History::wants_write_back)
    }

    /// Journal file writes that have failed since the start (0 without
    /// journal files).
    pub fn journal_failures(&self) -> u64 {
        self.files.get().map_or(0, |w| w.failures())
    }

    /// Writes of the journal file of `origin` that have failed since the
    /// start.
    pub fn journal_failures_of(&self, origin: &Name) -> u64 {
        self.files.get().map_or(0, |w| w.failures_of(origin))
    }

    /// Why the journal file of `origin` is not written now (a full or
    /// read-only disk; tried again every second), if it is not.
    pub fn journal_error_of(&self, origin: &Name) -> Option<String> {
        self.files.get().and_then(|w| w.failing_of(origin))
    }

    /// Whether journal changes go to files (else they stay in memory).
    pub fn has_journal_files(&self) -> bool {
        self.files.get().is_some()
    }

    /// Records a new version received by IXFR, whose steps are known
    /// already. Returns whether secondaries should be notified.
    pub fn zone_received(&self, old: &Zone, new: &Zone, steps: Vec<ZoneDiff>) -> bool {
        if !self.serial_moved_on(old, new) {
            return false;
        }
        if self.policy(new.origin()).keeps_history() {
            self.record(new.origin(), steps);
        }
        true
    }

    /// Whether `new` has a later serial than `old`; if not, the zone's
    /// history is restarted (a serial that went back breaks every chain),
    /// unless `new` is the same version again (`heron ctl retransfer`, a
    /// reload of an unchanged file), which every chain still leads to.
    fn serial_moved_on(&self, old: &Zone, new: &Zone) -> bool {
        if serial::is_newer(new.serial(), old.serial()) {
            return true;
        }
        if new.serial() == old.serial() {
            // Walks both zones, but only when the serial stood still.
            if diff(old, new).is_empty() {
                return false;
            }
            tracing::warn!(
                "zone {}: content changed but serial {} did not; secondaries will not see the change until the serial moves on (then those at serial {} get the whole zone)",
                new.origin(),
                new.serial(),
                new.serial()
            );
            // A secondary at this serial may hold either content: a step
            // from it would not lead from what it holds (black-box
            // finding: the fleet stayed apart after the serial moved on).
            self.reused(new.origin(), Reused::only(new.serial()));
            return false;
        }
        tracing::warn!(
            "zone {}: serial went back from {} to {}: secondaries keep the newer serial and will not see this version; IXFR history starts over",
            new.origin(),
            old.serial(),
            new.serial()
        );
        // The serials it went back over come again with other content: a
        // secondary at one holds the old (black-box finding AV-6).
        let went_back = Reused {
            after: new.serial(),
            upto: old.serial(),
        };
        self.reused(new.origin(), went_back);
        false
    }

    /// The history of `origin` restarted, no IXFR from the serials
    /// `reused` from now on, and the mark kept for a restart.
    fn reused(&self, origin: &Name, reused: Reused) {
        self.update_history(origin, |h| h.serial_reused(reused));
        let kept = (self.journals.lock().unwrap().get(&origin.to_lowercase()))
            .map(|h| h.no_chain.clone())
            .unwrap_or_default();
        self.keep_reused_mark(origin, &kept, reused.upto);
    }

    /// Writes beside the journal file of `origin`, if it keeps one, that
    /// `serial` was served with two contents ([`journal_files::REUSED_MARK`]):
    /// the journal file, removed, cannot tell a restart (black-box
    /// finding AS-4: after one, the next serial's step was served to
    /// secondaries holding the first content).
    fn keep_reused_mark(&self, origin: &Name, kept: &journal_files::NoChain, serial: u32) {
        let policy = self.policy(origin);
        let (Some(_), Some(journal)) = (self.files.get(), policy.journal_path()) else {
            return;
        };
        if let Err(e) = journal_files::mark_reused(journal, kept) {
            tracing::error!(
                "zone {origin}: cannot write {}: {e}; a restart before serial {serial} moves on forgets that it was served with two contents, and secondaries at it may then take an IXFR that does not lead from what they hold",
                journal_files::reused_mark_of(journal).display()
            );
        }
    }

    fn record(&self, origin: &Name, steps: impl IntoIterator<Item = ZoneDiff>) {
        let failures = self.journal_failures_of(origin);
        self.update_history(origin, |history| {
            history.failures_now(failures);
            steps
                .into_iter()
                .filter_map(|s| history.record(s))
                .collect::<Vec<_>>()
        });
    }

    /// Changes a zone's history; what its file must do (if it has one)
    /// goes to the writer in the same order, under the same lock.
    fn update_history<C: IntoIterator<Item = journal::file::FileChange>>(
        &self,
        origin: &Name,
        update: impl FnOnce(&mut History) -> C,
    ) {
        self.update_history_sending(origin, update, JournalWriter::change);
    }

    /// [`Primary::update_history`], the changes handed to the writer by
    /// `send` (a take-back is marked as one).
    fn update_history_sending<C: IntoIterator<Item = journal::file::FileChange>>(
        &self,
        origin: &Name,
        update: impl FnOnce(&mut History) -> C,
        send: fn(&JournalWriter, &Path, &Name, journal::file::FileChange),
    ) {
        let policy = self.policy(origin);
        let path = self.files.get().and(policy.journal_path());
        let mut journals = self.journals.lock().unwrap();
        let history = journals.entry(origin.to_lowercase()).or_insert_with(|| {
            History::new(self.journal_max_bytes, path.is_some()).marked_from(path)
        });
        // A history kept in memory until a reload gave it a file: the
        // file gets every step kept so far, then the new ones.
        let first = path.and_then(|_| history.keep_in_file());
        let changes = update(history);
        if let (Some(writer), Some(path)) = (self.files.get(), path) {
            if let Some(first) = first {
                writer.change(path, origin, first);
            }
            changes
                .into_iter()
                .for_each(|c| send(writer, path, origin, c));
        }
    }

    /// Every address prefix some zone's `allow-transfer` allows without a
    /// TSIG key (each once): the secondaries known by address, which may
    /// open many connections at once. A rule that wants a key is left out:
    /// an unsigned client inside its prefix is not known to be a secondary,
    /// and `0.0.0.0/0 key K` would otherwise lift the per-client limit for
    /// everyone. A prefix wider than a site's network
    /// ([`names_secondaries`]) is left out too: `0.0.0.0/0` (open AXFR)
    /// names everyone, not secondaries, and would let one client take
    /// every connection.
    pub fn transfer_clients(&self) -> Vec<Prefix> {
        let mut all: Vec<Prefix> = Vec::new();
        for prefix in self
            .policies()
            .values()
            .flat_map(|p| p.allow_transfer.keyless_prefixes())
            .filter(names_secondaries)
        {
            if !all.contains(&prefix) {
                all.push(prefix);
            }
        }
        all
    }

    /// How to answer a request for `zone`: `client_serial` is the serial
    /// in an IXFR request, None for AXFR.
    pub fn plan(&self, zone: &Zone, client_serial: Option<u32>) -> TransferPlan {
        let Some(client) = client_serial else {
            return TransferPlan::Axfr;
        };
        let ours = zone.serial();
        if client == ours || serial::is_newer(client, ours) {
            return TransferPlan::UpToDate;
        }
        let journals = self.journals.lock().unwrap();
        let chain = journals
            .get(&zone.origin().to_lowercase())
            .filter(|h| !h.no_chain.covers(client))
            .and_then(|h| h.journal.chain(client, ours));
        match chain {
            // An IXFR longer than the zone itself is better sent whole.
            Some(chain) if journal::chain_records(&chain) <= zone.record_count() => {
                TransferPlan::Ixfr(chain)
            }
            _ => TransferPlan::Axfr,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk;
    use heron_zone::load_zone_str;

    fn zone(serial: u32, body: &str) -> Zone {
        let text = format!(
            "$ORIGIN p.test.\n$TTL 60\n@ SOA ns h {serial} 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n{body}"
        );
        load_zone_str(&text, "p.zone", &Name::parse("p.test").unwrap())
            .unwrap()
            .zone
    }

    #[test]
    fn zones_with_equal_policies_share_one_and_others_keep_theirs() {
        let name = |i: usize| Name::parse(&format!("z{i}.test")).unwrap();
        let mut policies: HashMap<Name, ZonePolicy> =
            (0..1000).map(|i| (name(i), open_policy(None))).collect();
        let own = Path::new("own.journal");
        policies.insert(name(1000), open_policy(Some(own)));
        let primary = Primary::new(policies, journal::DEFAULT_MAX_BYTES);
        let first = primary.policy(&name(0));
        assert!((1..1000).all(|i| Arc::ptr_eq(&primary.policy(&name(i)), &first)));
        let different = primary.policy(&name(1000));
        assert_eq!(different.journal_file.as_deref(), Some(own));
        assert_eq!(*first, open_policy(None));
    }

    /// A primary that lets 127.0.0.0/8 transfer p.test.
    fn open_primary() -> Primary {
        primary_journaling_to(None)
    }

    /// A primary that lets 127.0.0.0/8 transfer p.test and keeps its
    /// journal in `file`.
    fn primary_journaling_to(file: Option<&Path>) -> Primary {
        let policies = HashMap::from([(Name::parse("p.test").unwrap(), open_policy(file))]);
        Primary::new(policies, journal::DEFAULT_MAX_BYTES)
    }

    /// Transfers allowed from 127.0.0.0/8; the journal kept in `file`.
    fn open_policy(file: Option<&Path>) -> ZonePolicy {
        ZonePolicy {
            allow_transfer: Acl::new(vec![crate::acl::Rule {
                prefix: "127.0.0.0/8".parse().unwrap(),
                key: None,
            }]),
            journal_file: file.map(Path::to_path_buf),
            ..ZonePolicy::default()
        }
    }

    /// The journal files that exist of the zones `p` keeps in files.
    fn find_journal_files(p: &Primary) -> journal_files::Found {
        journal_files::find(
            p.policies()
                .iter()
                .filter_map(|(origin, policy)| Some((origin, policy.journal_path()?))),
        )
    }

    /// A primary started with its journal in `file`, serving `zone`.
    fn restarted(file: &Path, zone: &Zone) -> Primary {
        let mut p = primary_journaling_to(Some(file));
        let found = find_journal_files(&p);
        p.open_journal_files(found, |origin| {
            (origin == zone.origin()).then_some((zone, false))
        });
        p
    }

    fn steps_planned(p: &Primary, zone: &Zone, from: u32) -> Option<usize> {
        match p.plan(zone, Some(from)) {
            TransferPlan::Ixfr(chain) => Some(chain.len()),
            _ => None,
        }
    }

    fn flushed(p: Primary) {
        assert!(p.flush_journal_files(Duration::from_secs(10)));
    }

    /// Versions 1 to `n` of p.test, and the journal file (in a new
    /// folder) of a primary that served 1, then 2 and 3, and stopped.
    fn journaled_1_to_3(n: u32) -> (tempfile::TempDir, PathBuf, Vec<Zone>) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.zone.jnl");
        let v: Vec<Zone> = (1..=n).map(|s| zone(s, &hosts(10 + s as usize))).collect();
        let p = restarted(&file, &v[0]);
        assert!(p.zone_changed(&v[0], &v[1]));
        assert!(p.zone_changed(&v[1], &v[2]));
        flushed(p);
        (dir, file, v)
    }

    #[test]
    fn the_journal_survives_a_restart_and_grows_on() {
        let (_dir, file, v) = journaled_1_to_3(4);

        let p = restarted(&file, &v[2]);
        assert_eq!(steps_planned(&p, &v[2], 1), Some(2));
        assert_eq!(steps_planned(&p, &v[2], 2), Some(1));
        assert!(p.zone_changed(&v[2], &v[3]));
        flushed(p);

        let p = restarted(&file, &v[3]);
        assert_eq!(steps_planned(&p, &v[3], 1), Some(3));
    }

    /// A reload gives a zone whose history was kept in memory a journal
    /// file: the writer starts, and the file gets the steps kept so far
    /// with the next one, so that a restart offers all of them.
    #[test]
    fn a_journal_file_given_by_a_reload_gets_the_history_kept_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.zone.jnl");
        let v: Vec<Zone> = (1..=3).map(|s| zone(s, &hosts(10 + s as usize))).collect();
        let mut p = open_primary();
        p.open_journal_files(find_journal_files(&p), |_| Some((&v[0], false)));
        assert!(!p.has_journal_files());
        assert!(p.zone_changed(&v[0], &v[1]));
        let origin = Name::parse("p.test").unwrap();
        p.set_policies(HashMap::from([(origin, open_policy(Some(&file)))]));
        assert!(p.has_journal_files());
        assert!(p.zone_changed(&v[1], &v[2]));
        flushed(p);
        let p = restarted(&file, &v[2]);
        assert_eq!(steps_planned(&p, &v[2], 1), Some(2));
    }

    #[test]
    fn a_journal_behind_the_served_zone_starts_over() {
        let (_dir, file, v) = journaled_1_to_3(5);

        // Serial 4 was written while the server was down.
        let p = restarted(&file, &v[3]);
        assert_eq!(steps_planned(&p, &v[3], 1), None);
        assert!(!file.exists(), "the old history is gone");
        assert!(p.zone_changed(&v[3], &v[4]));
        flushed(p);
        let p = restarted(&file, &v[4]);
        assert_eq!(steps_planned(&p, &v[4], 4), Some(1));
        assert_eq!(steps_planned(&p, &v[4], 1), None);
    }

    #[test]
    fn a_torn_tail_is_cut_before_the_next_step() {
        let (_dir, file, v) = journaled_1_to_3(4);
        // A crash in the middle of writing a fourth version's step.
        let mut bytes = std::fs::read(&file).unwrap();
        bytes.extend_from_slice(&[0, 0, 1, 0, 0xde, 0xad]);
        std::fs::write(&file, bytes).unwrap();

        let p = restarted(&file, &v[2]);
        assert_eq!(steps_planned(&p, &v[2], 1), Some(2));
        assert!(p.zone_changed(&v[2], &v[3]));
        flushed(p);
        let p = restarted(&file, &v[3]);
        assert_eq!(
            steps_planned(&p, &v[3], 1),
            Some(3),
            "nothing lost behind the tear"
        );
    }

    #[test]
    fn a_history_that_starts_over_replaces_the_file() {
        let (_dir, file, v) = journaled_1_to_3(5);
        let p = restarted(&file, &v[2]);
        // Version 4 never reached the journal: 4 -> 5 starts a new history.
        assert!(p.zone_changed(&v[3], &v[4]));
        flushed(p);
        assert!(!disk::tmp_path(&file).exists());
        let p = restarted(&file, &v[4]);
        assert_eq!(steps_planned(&p, &v[4], 4), Some(1));
        assert_eq!(steps_planned(&p, &v[4], 1), None, "the old steps are gone");
    }

    #[test]
    fn a_serial_that_goes_back_removes_the_journal_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.zone.jnl");
        let (v1, v2) = (zone(1, &hosts(10)), zone(2, &hosts(11)));
        let p = restarted(&file, &v1);
        assert!(p.zone_changed(&v1, &v2));
        assert!(p.flush_journal_files(Duration::from_secs(10)));
        assert!(file.exists());
        assert!(!p.zone_changed(&v2, &v1));
        flushed(p);
        assert!(!file.exists());
    }

    /// The same version again (a retransfer, a reload of an unchanged
    /// file) keeps the history; other content under the same serial
    /// restarts it. Neither is announced.
    #[test]
    fn the_same_version_again_keeps_the_history_and_other_content_clears_it() {
        let p = open_primary();
        let v: Vec<Zone> = (1..=2).map(|s| zone(s, &hosts(10 + s as usize))).collect();
        assert!(p.zone_changed(&v[0], &v[1]));
        let again = zone(2, &hosts(12));
        assert!(!p.zone_changed(&v[1], &again));
        assert_eq!(steps_planned(&p, &again, 1), Some(1));
        let other = zone(2, &hosts(13));
        assert!(!p.zone_changed(&again, &other));
        assert_eq!(steps_planned(&p, &other, 1), None);
    }

    /// Once a serial was served with two contents, the next serial's step
    /// does not lead from it: a secondary at that serial may hold the
    /// first, and gets the whole zone (black-box finding: the fleet
    /// stayed apart at the new serial). From the new serial on, IXFR.
    #[test]
    fn no_ixfr_starts_from_a_serial_served_with_two_contents() {
        let p = open_primary();
        let (first, edited) = (zone(2, &hosts(12)), zone(2, &hosts(13)));
        assert!(!p.zone_changed(&first, &edited));
        let bumped = zone(3, &hosts(13));
        assert!(p.zone_changed(&edited, &bumped));
        assert!(matches!(p.plan(&bumped, Some(2)), TransferPlan::Axfr));
        let next = zone(4, &hosts(14));
        assert!(p.zone_changed(&bumped, &next));
        assert_eq!(steps_planned(&p, &next, 3), Some(1));
        assert!(matches!(p.plan(&next, Some(2)), TransferPlan::Axfr));
    }

    /// A primary journaling p.test to a new file that served serial 2
    /// with two contents: its folder, the file, the primary, the second
    /// content (served now).
    fn served_twice_at_2() -> (tempfile::TempDir, PathBuf, Primary, Zone) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.zone.jnl");
        let (first, edited) = (zone(2, &hosts(12)), zone(2, &hosts(13)));
        let p = restarted(&file, &first);
        assert!(!p.zone_changed(&first, &edited));
        (dir, file, p, edited)
    }

    /// The same across a restart: the journal file keeps no step from such
    /// a serial either (regression hunt: read back, it gave IXFR again).
    #[test]
    fn no_ixfr_from_a_serial_served_with_two_contents_after_a_restart() {
        let (_dir, file, p, edited) = served_twice_at_2();
        let bumped = zone(3, &hosts(13));
        assert!(p.zone_changed(&edited, &bumped));
        let next = zone(4, &hosts(14));
        assert!(p.zone_changed(&bumped, &next));
        flushed(p);
        let p = restarted(&file, &next);
        assert!(matches!(p.plan(&next, Some(2)), TransferPlan::Axfr));
        assert_eq!(steps_planned(&p, &next, 3), Some(1));
    }

    /// The same with a restart before the serial moves on: the journal
    /// file went, and the mark beside it tells (black-box finding AS-4:
    /// the next serial's step was served from that serial). A serial that
    /// goes back keeps the mark: that serial may come again with a third.
    #[test]
    fn no_ixfr_from_a_serial_served_with_two_contents_restarted_before_the_next() {
        let (_dir, file, p, edited) = served_twice_at_2();
        flushed(p);
        let p = restarted(&file, &edited);
        let bumped = zone(3, &hosts(13));
        assert!(p.zone_changed(&edited, &bumped));
        assert!(matches!(p.plan(&bumped, Some(2)), TransferPlan::Axfr));
        // Back to 1, then 2 with a third content, and 3 again.
        let (back, third) = (zone(1, &hosts(11)), zone(2, &hosts(15)));
        assert!(!p.zone_changed(&bumped, &back));
        assert!(p.zone_changed(&back, &third));
        assert!(p.zone_changed(&third, &bumped));
        assert!(matches!(p.plan(&bumped, Some(2)), TransferPlan::Axfr));
        assert_eq!(steps_planned(&p, &bumped, 1), None);
    }

    /// A serial that went back (505 to 503, a primary restored from a
    /// backup) passes the serials it went back over again with other
    /// content: a secondary at one of them holds the old, so no IXFR
    /// starts from them, across a restart too; from a later serial it
    /// does (black-box finding AV-6: the new 505's step went to
    /// secondaries at the old 505).
    #[test]
    fn no_ixfr_from_the_serials_a_serial_went_back_over() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.zone.jnl");
        let old = zone(505, &hosts(15));
        let p = restarted(&file, &old);
        let back = zone(503, &hosts(13));
        assert!(!p.zone_changed(&old, &back));
        let again: Vec<Zone> = (504..=506)
            .map(|s| zone(s, &hosts(s as usize - 480)))
            .collect();
        assert!(p.zone_changed(&back, &again[0]));
        assert!(p.zone_changed(&again[0], &again[1]));
        assert!(p.zone_changed(&again[1], &again[2]));
        for from in [504, 505] {
            assert!(
                matches!(p.plan(&again[2], Some(from)), TransferPlan::Axfr),
                "{from}"
            );
        }
        flushed(p);
        let p = restarted(&file, &again[2]);
        assert!(matches!(p.plan(&again[2], Some(505)), TransferPlan::Axfr));
        let next = zone(507, &hosts(40));
        assert!(p.zone_changed(&again[2], &next));
        assert_eq!(steps_planned(&p, &next, 506), Some(1));
        assert!(matches!(p.plan(&next, Some(505)), TransferPlan::Axfr));
    }

    /// A serial that goes back twice (505 to 503, 504 to 502) keeps both
    /// ranges: a secondary still at the first 505 gets the whole zone
    /// after the serial passes 505 a third time, across a restart too
    /// (regression hunt AW-1: the second range replaced the first).
    #[test]
    fn a_serial_that_goes_back_twice_keeps_both_ranges() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.zone.jnl");
        let first = zone(505, &hosts(15));
        let p = restarted(&file, &first);
        let (back, on) = (zone(503, &hosts(13)), zone(504, &hosts(24)));
        assert!(!p.zone_changed(&first, &back));
        assert!(p.zone_changed(&back, &on));
        let again = zone(502, &hosts(32));
        assert!(!p.zone_changed(&on, &again));
        let up: Vec<Zone> = (503..=506)
            .map(|s| zone(s, &hosts(s as usize - 460)))
            .collect();
        assert!(p.zone_changed(&again, &up[0]));
        for pair in up.windows(2) {
            assert!(p.zone_changed(&pair[0], &pair[1]));
        }
        let last = &up[3];
        for from in [503, 504, 505] {
            assert!(
                matches!(p.plan(last, Some(from)), TransferPlan::Axfr),
                "{from}"
            );
        }
        flushed(p);
        let p = restarted(&file, last);
        assert!(matches!(p.plan(last, Some(505)), TransferPlan::Axfr));
    }

    /// A restart that finds the zone at a lower serial than its journal's
    /// last (a file edited down while frozen or while stopped): the
    /// serials it went back over get no IXFR, as when the serial goes
    /// back while running (regression hunt AW-4).
    #[test]
    fn a_serial_gone_back_across_a_restart_is_marked() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.zone.jnl");
        let v: Vec<Zone> = (503..=505)
            .map(|s| zone(s, &hosts(s as usize - 490)))
            .collect();
        let p = restarted(&file, &v[0]);
        assert!(p.zone_changed(&v[0], &v[1]));
        assert!(p.zone_changed(&v[1], &v[2]));
        flushed(p);
        let back = zone(503, &hosts(40));
        let p = restarted(&file, &back);
        let up: Vec<Zone> = (504..=506)
            .map(|s| zone(s, &hosts(s as usize - 460)))
            .collect();
        assert!(p.zone_changed(&back, &up[0]));
        assert!(p.zone_changed(&up[0], &up[1]));
        assert!(p.zone_changed(&up[1], &up[2]));
        for from in [504, 505] {
            assert!(
                matches!(p.plan(&up[2], Some(from)), TransferPlan::Axfr),
                "{from}"
            );
        }
    }

    #[test]
    fn steps_received_by_ixfr_are_kept_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.zone.jnl");
        let v: Vec<Zone> = (1..=3).map(|s| zone(s, &hosts(10 + s as usize))).collect();
        let p = restarted(&file, &v[0]);
        let steps = vec![diff(&v[0], &v[1]), diff(&v[1], &v[2])];
        assert!(p.zone_received(&v[0], &v[2], steps));
        flushed(p);
        let p = restarted(&file, &v[2]);
        assert_eq!(steps_planned(&p, &v[2], 1), Some(2));
    }

    #[test]
    fn no_journal_file_for_a_zone_nobody_may_transfer() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.zone.jnl");
        let closed = ZonePolicy {
            journal_file: Some(file.clone()),
            ..ZonePolicy::default()
        };
        let mut p = Primary::new(
            HashMap::from([(Name::parse("p.test").unwrap(), closed)]),
            journal::DEFAULT_MAX_BYTES,
        );
        let (v1, v2) = (zone(1, ""), zone(2, "a A 192.0.2.9\n"));
        p.open_journal_files(find_journal_files(&p), |_| Some((&v1, false)));
        assert!(p.files.get().is_none(), "no writer thread");
        assert!(p.zone_changed(&v1, &v2));
        flushed(p);
        assert!(!file.exists());
    }

    #[test]
    fn transfer_clients_are_every_keyless_allow_transfer_prefix_once() {
        let rule = |p: &str, key: Option<&str>| crate::acl::Rule {
            prefix: p.parse().unwrap(),
            key: key.map(|k| Name::parse(k).unwrap()),
        };
        let policy = |rules| ZonePolicy {
            allow_transfer: Acl::new(rules),
            ..ZonePolicy::default()
        };
        let policies = HashMap::from([
            (
                Name::parse("a.test").unwrap(),
                policy(vec![rule("192.0.2.0/24", None), rule("::1", Some("k"))]),
            ),
            (
                Name::parse("b.test").unwrap(),
                policy(vec![rule("192.0.2.0/24", Some("k"))]),
            ),
            (
                Name::parse("d.test").unwrap(),
                policy(vec![rule("0.0.0.0/0", Some("k")), rule("::/0", Some("k"))]),
            ),
            (Name::parse("c.test").unwrap(), ZonePolicy::default()),
        ]);
        let mut got: Vec<String> = Primary::new(policies, 1024)
            .transfer_clients()
            .iter()
            .map(|p| p.to_string())
            .collect();
        got.sort();
        assert_eq!(got, ["192.0.2.0/24"], "rules that want a key exempt nobody");
    }

    #[test]
    fn prefixes_wider_than_a_site_are_no_transfer_clients() {
        let rules = [
            "0.0.0.0/0",
            "10.0.0.0/8",
            "198.51.0.0/23",
            "::/0",
            "2001:db8::/47",
        ];
        let rules = (rules
            .iter()
            .chain(&["203.0.113.0/24", "2001:db8::/48", "::1"]))
        .map(|p| crate::acl::Rule {
            prefix: p.parse().unwrap(),
            key: None,
        })
        .collect();
        let policy = ZonePolicy {
            allow_transfer: Acl::new(rules),
            ..ZonePolicy::default()
        };
        let policies = HashMap::from([(Name::parse("a.test").unwrap(), policy)]);
        let got: Vec<String> = Primary::new(policies, 1024)
            .transfer_clients()
            .iter()
            .map(|p| p.to_string())
            .collect();
        assert_eq!(got, ["203.0.113.0/24", "2001:db8::/48", "::1/128"]);
    }

    #[test]
    fn no_journal_for_a_zone_nobody_may_transfer() {
        let p = Primary::new(HashMap::new(), journal::DEFAULT_MAX_BYTES);
        let (v1, v2) = (zone(1, ""), zone(2, "a A 192.0.2.9\n"));
        assert!(p.zone_changed(&v1, &v2), "secondaries are still notified");
        assert!(matches!(p.plan(&v2, Some(1)), TransferPlan::Axfr));
        assert!(p.journals.lock().unwrap().is_empty());
    }

    #[test]
    fn steps_received_by_ixfr_are_journaled_as_they_came() {
        let p = open_primary();
        let (v1, v2, v3) = (
            zone(1, &hosts(10)),
            zone(2, &hosts(11)),
            zone(3, &hosts(12)),
        );
        let steps = vec![diff(&v1, &v2), diff(&v2, &v3)];
        assert!(p.zone_received(&v1, &v3, steps));
        match p.plan(&v3, Some(1)) {
            TransferPlan::Ixfr(chain) => assert_eq!(chain.len(), 2),
            other => panic!("{other:?}"),
        }
        assert!(!p.zone_received(&v3, &v1, Vec::new()), "older serial");
        assert!(
            matches!(p.plan(&v3, Some(2)), TransferPlan::Axfr),
            "history restarted"
        );
    }

    fn hosts(n: usize) -> String {
        (0..n).map(|i| format!("h{i} A 192.0.2.{i}\n")).collect()
    }

    #[test]
    fn ixfr_from_a_journaled_serial_axfr_otherwise() {
        let p = open_primary();
        let (v1, v2, v3) = (
            zone(1, &hosts(10)),
            zone(2, &hosts(11)),
            zone(3, &hosts(12)),
        );
        assert!(p.zone_changed(&v1, &v2));
        assert!(p.zone_changed(&v2, &v3));
        match p.plan(&v3, Some(1)) {
            TransferPlan::Ixfr(chain) => assert_eq!(chain.len(), 2),
            other => panic!("{other:?}"),
        }
        assert!(matches!(p.plan(&v3, Some(0)), TransferPlan::Axfr));
        assert!(matches!(p.plan(&v3, None), TransferPlan::Axfr));
        assert!(matches!(p.plan(&v3, Some(3)), TransferPlan::UpToDate));
        assert!(matches!(p.plan(&v3, Some(4)), TransferPlan::UpToDate));
    }

    #[test]
    fn a_serial_that_goes_back_clears_the_history() {
        let p = open_primary();
        let (v5, v6) = (zone(5, "a A 192.0.2.9\n"), zone(6, "a A 192.0.2.8\n"));
        assert!(p.zone_changed(&v5, &v6));
        let v2 = zone(2, "");
        assert!(!p.zone_changed(&v6, &v2), "no notify for an older serial");
        assert!(matches!(p.plan(&v2, Some(5)), TransferPlan::UpToDate));
        assert!(matches!(p.plan(&v2, Some(1)), TransferPlan::Axfr));
    }

    #[test]
    fn an_ixfr_larger_than_the_zone_is_sent_as_axfr() {
        let p = open_primary();
        let (v1, v2) = (zone(1, &hosts(20)), zone(2, &hosts(1)));
        assert!(p.zone_changed(&v1, &v2));
        assert!(matches!(p.plan(&v2, Some(1)), TransferPlan::Axfr));
    }

    #[test]
    fn zones_without_a_policy_are_closed() {
        let open = ZonePolicy {
            allow_transfer: Acl::new(vec![crate::acl::Rule {
                prefix: "127.0.0.0/8".parse().unwrap(),
                key: None,
            }]),
            ..ZonePolicy::default()
        };
        let mut policies = HashMap::new();
        policies.insert(Name::parse("Open.test").unwrap(), open);
        let p = Primary::new(policies, 1024);
        let local = "127.0.0.1".parse().unwrap();
        let open = p.policy(&Name::parse("open.TEST").unwrap());
        assert!(open.allow_transfer.check(local, None).is_ok());
        let closed = p.policy(&Name::parse("other.test").unwrap());
        assert!(closed.allow_transfer.check(local, None).is_err());
    }
}
