//! Secondary zones in the server: one task keeps every zone fresh (the
//! timers of `heron_xfr::timers`, driven by `heron_xfr::secondary::refresh`),
//! NOTIFYs are routed to it, and what it receives is applied to the
//! served catalog. A reload adds, removes and re-points secondary zones
//! while it runs ([`Running::reconfigure`]).

use std::borrow::Borrow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use heron_proto::Name;
use heron_server::SharedCatalog;
use heron_server::processor::{ExpiryDeadlines, NotifyReceived, SharedOrigins};
use heron_xfr::journal::file as journal_file;
use heron_xfr::primary::Primary;
use heron_xfr::secondary::client::Connections;
use heron_xfr::secondary::keeper::Keeper;
use heron_xfr::secondary::refresh::{
    self, Command, Context, Publisher, SecondaryZone, TimerBounds,
};
use heron_xfr::secondary::store::which_exist;
use heron_zone::diff::ZoneDiff;
use heron_zone::{Catalog, Zone};
use tokio::sync::mpsc;

use crate::config::ZoneSpec;
use crate::reload::load_parallel;
use crate::serve::Transfers;

/// The secondary zones of the configuration, and what starts them.
pub struct Secondaries {
    pub zones: Vec<SecondaryZone>,
    /// SOA checks and transfers, over pooled connections.
    pub connections: Connections,
    /// NOTIFYs the query processor accepted for them.
    pub notifies: mpsc::UnboundedReceiver<NotifyReceived>,
    pub bounds: TimerBounds,
    /// What [`load_kept`] read, in the order of `zones`.
    pub kept: Vec<Option<Zone>>,
    /// `[secondary] keep-removed`.
    pub keep_removed: bool,
    /// When each zone expires, for the processor's EDNS EXPIRE.
    pub expiry: Arc<ExpiryDeadlines>,
}

/// Reads the kept copies of `zones` (those that have one) on every core,
/// as zone files are at start; one that fails is reported and the zone is
/// transferred anew.
pub fn load_kept<Z: Borrow<SecondaryZone>>(zones: &[Z]) -> Vec<Option<Zone>> {
    let zones: Vec<&SecondaryZone> = zones.iter().map(Borrow::borrow).collect();
    let started = Instant::now();
    let exists = which_exist(&zones.iter().map(|z| z.file.as_path()).collect::<Vec<_>>());
    let specs: Vec<ZoneSpec> = zones
        .iter()
        .zip(&exists)
        .filter(|(_, exists)| **exists)
        .map(|(z, _)| ZoneSpec {
            origin: z.origin.clone(),
            file: z.file.clone(),
        })
        .collect();
    let mut loaded = load_parallel(
        &specs.iter().collect::<Vec<_>>(),
        &heron_zone::Catalog::new(),
    )
    .into_iter();
    let kept: Vec<Option<Zone>> = zones
        .iter()
        .zip(exists)
        .map(|(z, exists)| {
            if !exists {
                return None;
            }
            let zone = match loaded.next()? {
                Ok((zone, _)) => Some(zone),
                Err(problems) => {
                    problems.iter().for_each(|p| tracing::error!("{p}"));
                    None
                }
            };
            if zone.is_none() {
                tracing::error!("zone {}: kept copy unusable; transferring anew", z.origin);
            }
            zone
        })
        .collect();
    if !specs.is_empty() {
        tracing::info!(
            "{} kept copies of secondary zones read in {} ms",
            kept.iter().flatten().count(),
            started.elapsed().as_millis()
        );
    }
    kept
}
/// Longest pause between two catalog rebuilds (see `apply_changes`).
const MAX_REBUILD_PAUSE: Duration = Duration::from_millis(50);

/// Starts the task that keeps every secondary zone fresh, and routes
/// accepted NOTIFYs to it.
/// Until a zone is received (or its kept copy loaded) it answers SERVFAIL,
/// as when it expires.
/// Returns what a reload changes them through; `origins` is the set of
/// secondary zones the query processor takes NOTIFYs for.
/// Its `commands` are also the control socket's way to the refresh task.
pub fn start(
    secondaries: Secondaries,
    origins: SharedOrigins,
    catalog: &SharedCatalog,
    transfers: &Arc<Transfers>,
) -> Option<Running> {
    let Secondaries {
        zones,
        connections,
        mut notifies,
        bounds,
        kept,
        keep_removed,
        expiry,
    } = secondaries;
    // Kept copies are written when the workers leave the CPU idle (at
    // nice 19 a long write would still hold a worker's core for a time
    // slice). The price: on cores kept busy, the date a check leaves on
    // its file lands late, and a crash then may wait out one refresh
    // interval before that zone is checked again.
    let keeper = match Keeper::start_with(|| {
        crate::background::lower_this_thread();
    }) {
        Ok(k) => k,
        Err(e) => {
            tracing::error!(
                "cannot start the thread that keeps zone copies: {e}; no secondary zone is served"
            );
            return None;
        }
    };
    let mut unavailable = (*catalog.load_full()).clone();
    zones.iter().for_each(|z| unavailable.expire(&z.origin));
    catalog.store(Arc::new(unavailable));
    origins.store(Arc::new(
        zones.iter().map(|z| z.origin.to_lowercase()).collect(),
    ));
    let (changes, received) = mpsc::unbounded_channel();
    let runtime = tokio::runtime::Handle::current();
    let (catalog, xfr, served) = (catalog.clone(), transfers.clone(), origins.clone());
    std::thread::Builder::new()
        .name("catalog-updates".into())
        .spawn(move || {
            let _in_runtime = runtime.enter();
            apply_changes(received, &catalog, &xfr, &served)
        })
        .expect("a thread can be started");
    let ctx = Arc::new(Context {
        conns: connections,
        publisher: Arc::new(CatalogPublisher {
            changes,
            expiry: expiry.clone(),
        }),
        keeper: keeper.clone(),
        bounds,
    });
    // One copy of each zone's settings, shared with the refresh task.
    let zones: Vec<Arc<SecondaryZone>> = zones.into_iter().map(Arc::new).collect();
    let by_origin = zones
        .iter()
        .map(|z| (z.origin.to_lowercase(), z.clone()))
        .collect();
    let zones = zones
        .into_iter()
        .zip(kept.into_iter().map(|k| k.map(Arc::new)));
    let (commands, received) = mpsc::unbounded_channel();
    tokio::spawn(refresh::run(zones.collect(), ctx, received));
    let notify_commands = commands.clone();
    tokio::spawn(async move {
        while let Some(NotifyReceived { origin, serial, .. }) = notifies.recv().await {
            let _ = notify_commands.send(Command::Notify { origin, serial });
        }
    });
    Some(Running {
        commands,
        zones: by_origin,
        origins,
        keeper,
        keep_removed,
        expiry,
    })
}

/// The secondary zones being kept fresh, and how to change them.
pub struct Running {
    commands: mpsc::UnboundedSender<Command>,
    /// By lower-cased origin.
    zones: HashMap<Name, Arc<SecondaryZone>>,
    /// What the query processor takes NOTIFYs for, and what the refresh
    /// task's versions are still served for.
    origins: SharedOrigins,
    pub keeper: Keeper,
    keep_removed: bool,
    /// Forgotten for a removed zone, for EDNS EXPIRE.
    expiry: Arc<ExpiryDeadlines>,
}

/// What [`Running::reconfigure`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SecondaryChanges {
    pub added: usize,
    pub removed: usize,
    /// Given other primaries or another file.
    pub repointed: usize,
}

impl Running {
    /// The refresh task's command channel (the control socket's `Report`
    /// and `CheckNow` go through it).
    pub fn commands(&self) -> mpsc::UnboundedSender<Command> {
        self.commands.clone()
    }

    /// Makes `wanted` the secondary zones, in the catalog `next` about to
    /// be served: new ones start (from their kept copy, or the version
    /// served now, if any), those no longer wanted stop and are no longer
    /// served (unless `from_files` now loads them), their kept copy and
    /// journal deleted unless `[secondary] keep-removed`; those whose
    /// primaries or file changed start again from the version served.
    /// Other zones are not touched.
    pub fn reconfigure(
        &mut self,
        wanted: Vec<SecondaryZone>,
        next: &mut Catalog,
        primary: &Primary,
        from_files: impl Fn(&Name) -> bool,
    ) -> SecondaryChanges {
        let mut changes = SecondaryChanges::default();
        let mut wanted: HashMap<Name, SecondaryZone> = wanted
            .into_iter()
            .map(|z| (z.origin.to_lowercase(), z))
            .collect();
        let gone: Vec<Name> = self
            .zones
            .keys()
            .filter(|origin| !wanted.contains_key(*origin))
            .cloned()
            .collect();
        let mut to_delete = Vec::new();
        for origin in gone {
            let zone = self.zones.remove(&origin).expect("listed above");
            let _ = self.commands.send(Command::Remove(zone.origin.clone()));
            self.expiry.remove(&origin);
            if !from_files(&origin) {
                next.remove(&origin);
                primary.forget(&origin);
            }
            tracing::info!(zone = %zone.origin, "secondary zone removed: no longer transferred");
            if !self.keep_removed {
                to_delete.push(zone.file.clone());
            }
            changes.removed += 1;
        }
        let mut added = Vec::new();
        for (origin, zone) in wanted.drain() {
            let zone = Arc::new(zone);
            match self.zones.get(&origin) {
                Some(running) if format!("{running:?}") == format!("{zone:?}") => continue,
                Some(_) => {
                    let _ = self.commands.send(Command::Remove(zone.origin.clone()));
                    tracing::info!(zone = %zone.origin, "secondary zone re-pointed");
                    let serving = next.get(&origin).cloned();
                    let _ = self.commands.send(Command::Add(zone.clone(), serving));
                    // The new primaries are asked at once, not at the next refresh.
                    let check = Command::Notify {
                        origin: zone.origin.clone(),
                        serial: None,
                    };
                    let _ = self.commands.send(check);
                    changes.repointed += 1;
                }
                None => added.push(zone.clone()),
            }
            self.zones.insert(origin, zone);
        }
        let kept = load_kept(&added);
        for (zone, kept) in added.into_iter().zip(kept) {
            let start = kept
                .map(Arc::new)
                .or_else(|| next.get(&zone.origin).cloned());
            if start.is_none() {
                next.expire(&zone.origin);
            }
            tracing::info!(zone = %zone.origin, "secondary zone added");
            let _ = self.commands.send(Command::Add(zone, start));
            changes.added += 1;
        }
        self.origins
            .store(Arc::new(self.zones.keys().cloned().collect::<HashSet<_>>()));
        if !to_delete.is_empty() {
            // A copy being written now would otherwise land after the delete.
            self.keeper.flush(Duration::from_secs(5));
            to_delete.iter().for_each(|file| delete_kept(file));
        }
        changes
    }
}

/// Deletes a removed secondary zone's kept copy and journal.
fn delete_kept(file: &std::path::Path) {
    for path in [file.to_path_buf(), journal_file::path_for(file)] {
        match std::fs::remove_file(&path) {
            Ok(()) => tracing::info!(file = %path.display(), "deleted: its zone is removed"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!("cannot delete {}: {e}", path.display()),
        }
    }
}

/// A change to the catalog from the refresh task.
enum Change {
    Publish(Arc<Zone>, Option<Vec<ZoneDiff>>),
    Expire(Name),
}

/// Hands what the refresh task receives to `apply_changes`.
struct CatalogPublisher {
    changes: mpsc::UnboundedSender<Change>,
    expiry: Arc<ExpiryDeadlines>,
}

impl Publisher for CatalogPublisher {
    fn publish(&self, zone: Arc<Zone>, diffs: Option<Vec<ZoneDiff>>) {
        let _ = self.changes.send(Change::Publish(zone, diffs));
    }

    fn expire(&self, origin: &Name) {
        self.expiry.remove(origin);
        let _ = self.changes.send(Change::Expire(origin.clone()));
    }

    fn expires_at(&self, origin: &Name, deadline: SystemTime) {
        let since_epoch = deadline.duration_since(UNIX_EPOCH).unwrap_or_default();
        self.expiry.set(origin, since_epoch.as_secs());
    }
}

/// Applies changes to the served catalog, every change waiting at once in
/// one new version. Building a version copies the table of zones, which
/// costs in proportion to their number (a few ms at 100,000): after each
/// rebuild the thread pauses four times as long (at most
/// `MAX_REBUILD_PAUSE`), so rebuilds take at most a fifth of a core while a
/// cold start delivers thousands of zones, and a single change on a small
/// catalog is served within microseconds.
fn apply_changes(
    mut changes: mpsc::UnboundedReceiver<Change>,
    catalog: &SharedCatalog,
    xfr: &Transfers,
    served: &SharedOrigins,
) {
    while let Some(first) = changes.blocking_recv() {
        let started = Instant::now();
        let mut batch = vec![first];
        while let Ok(more) = changes.try_recv() {
            batch.push(more);
        }
        let changed = apply(batch, catalog, xfr, served);
        xfr.notify(&changed);
        if changes.is_empty() {
            // A burst (a cold start) is over: the transfers' buffers and
            // the catalog versions it replaced go back to the kernel, and
            // the zones it brought move to huge pages.
            crate::memory::settle(&catalog.load_full());
        }
        std::thread::sleep((started.elapsed() * 4).min(MAX_REBUILD_PAUSE));
    }
}

/// One new catalog version with `batch` applied; returns the zones whose
/// own secondaries should hear of a new serial. Changes to zones a reload
/// removed meanwhile are dropped.
fn apply(
    batch: Vec<Change>,
    catalog: &SharedCatalog,
    xfr: &Transfers,
    served: &SharedOrigins,
) -> Vec<Arc<Zone>> {
    let _writing = xfr.catalog_writer.lock().unwrap();
    let mut next = (*catalog.load_full()).clone();
    let mut changed = Vec::new();
    let served = served.load();
    for change in batch {
        let origin = match &change {
            Change::Publish(zone, _) => zone.origin(),
            Change::Expire(origin) => origin,
        };
        if !served.contains(origin) {
            continue;
        }
        match change {
            Change::Publish(zone, steps) => {
                // The journal lets our own secondaries IXFR from us in turn.
                let notify = match (next.get(zone.origin()), steps) {
                    // Served again as it is (a re-pointed zone).
                    (Some(before), _) if Arc::ptr_eq(before, &zone) => false,
                    (Some(before), Some(steps)) => xfr.primary.zone_received(before, &zone, steps),
                    (Some(before), None) => xfr.primary.zone_changed(before, &zone),
                    (None, _) => true,
                };
                next.insert_shared(zone.clone());
                if notify {
                    changed.push(zone);
                }
            }
            Change::Expire(origin) => next.expire(&origin),
        }
    }
    catalog.store(Arc::new(next));
    changed
}
