//! Secondary zones in the server: one task keeps every zone fresh (the
//! timers of `heron_xfr::timers`, driven by `heron_xfr::secondary::refresh`),
//! NOTIFYs are routed to it, and what it receives is applied to the
//! served catalog.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use heron_proto::Name;
use heron_server::SharedCatalog;
use heron_server::processor::{ExpiryDeadlines, NotifyReceived};
use heron_xfr::secondary::client::Connections;
use heron_xfr::secondary::keeper::Keeper;
use heron_xfr::secondary::refresh::{
    self, Command, Context, Publisher, SecondaryZone, TimerBounds,
};
use heron_xfr::secondary::store::which_exist;
use heron_zone::Zone;
use heron_zone::diff::ZoneDiff;
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
    /// When each zone expires, for the processor's EDNS EXPIRE.
    pub expiry: Arc<ExpiryDeadlines>,
}

/// Reads the kept copies of `zones` (those that have one) on every core,
/// as zone files are at start; one that fails is reported and the zone is
/// transferred anew.
pub fn load_kept(zones: &[SecondaryZone]) -> Vec<Option<Zone>> {
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
/// Returns the writer of kept copies, to flush at shutdown, and the
/// refresh task's command channel.
pub fn start(
    secondaries: Secondaries,
    catalog: &SharedCatalog,
    transfers: &Arc<Transfers>,
) -> Option<(Keeper, mpsc::UnboundedSender<Command>)> {
    let Secondaries {
        zones,
        connections,
        mut notifies,
        bounds,
        kept,
        expiry,
    } = secondaries;
    if zones.is_empty() {
        return None;
    }
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
    let (changes, received) = mpsc::unbounded_channel();
    let runtime = tokio::runtime::Handle::current();
    let (catalog, xfr) = (catalog.clone(), transfers.clone());
    std::thread::Builder::new()
        .name("catalog-updates".into())
        .spawn(move || {
            let _in_runtime = runtime.enter();
            apply_changes(received, &catalog, &xfr)
        })
        .expect("a thread can be started");
    let ctx = Arc::new(Context {
        conns: connections,
        publisher: Arc::new(CatalogPublisher { changes, expiry }),
        keeper: keeper.clone(),
        bounds,
    });
    let zones = zones
        .into_iter()
        .zip(kept.into_iter().map(|k| k.map(Arc::new)));
    let (commands, received) = mpsc::unbounded_channel();
    tokio::spawn(refresh::run(zones.collect(), ctx, received));
    let control = commands.clone();
    tokio::spawn(async move {
        while let Some(NotifyReceived { origin, serial, .. }) = notifies.recv().await {
            let _ = commands.send(Command::Notify { origin, serial });
        }
    });
    Some((keeper, control))
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
) {
    while let Some(first) = changes.blocking_recv() {
        let started = Instant::now();
        let mut batch = vec![first];
        while let Ok(more) = changes.try_recv() {
            batch.push(more);
        }
        let changed = apply(batch, catalog, xfr);
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
/// own secondaries should hear of a new serial.
fn apply(batch: Vec<Change>, catalog: &SharedCatalog, xfr: &Transfers) -> Vec<Arc<Zone>> {
    let _writing = xfr.catalog_writer.lock().unwrap();
    let mut next = (*catalog.load_full()).clone();
    let mut changed = Vec::new();
    for change in batch {
        match change {
            Change::Publish(zone, steps) => {
                // The journal lets our own secondaries IXFR from us in turn.
                let notify = match (next.get(zone.origin()), steps) {
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
