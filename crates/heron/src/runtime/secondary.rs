//! Secondary zones in the server: one task keeps every zone fresh (the
//! timers of `heron_xfr::timers`, driven by `heron_xfr::secondary::refresh`),
//! NOTIFYs are routed to it, and what it receives is applied to the
//! served catalog. A reload adds, removes and re-points secondary zones
//! while it runs ([`Running::reconfigure`]).

use std::borrow::Borrow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use heron_proto::Name;
use heron_server::SharedCatalog;
use heron_server::processor::log_limit::{LOG_INTERVAL, LogLimiter};
use heron_server::processor::{NotifyReceived, SharedOrigins};
use heron_xfr::journal::file as journal_file;
use heron_xfr::origin_index::OriginIndex;
use heron_xfr::primary::{Primary, ZonePolicy};
use heron_xfr::secondary::client::Connections;
use heron_xfr::secondary::keeper::Keeper;
use heron_xfr::secondary::kept_file::KeptFile;
use heron_xfr::secondary::refresh::{
    self, Command, Context, OwnOrigin, Publisher, SecondaryZone, TimerBounds,
};
use heron_xfr::secondary::store::which_exist;
use heron_xfr::secondary::tls::TlsClients;
use heron_zone::catalog::ShardedSet;
use heron_zone::diff::ZoneDiff;
use heron_zone::{Catalog, Zone};
use tokio::sync::mpsc;

use crate::config::{CatalogConfig, ZoneSpec};
use crate::plan::consumer::{Consumers, Step, ceded_copy, consumed_copy, read_ceded, write_ceded};
use crate::plan::zone_files::SecondaryChanges;
use crate::plan::zone_files::load_parallel;
use crate::runtime::Transfers;
use crate::runtime::held_members;
use crate::runtime::signed_secondary::{SignedSecondaries, signed_copy};

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
    /// The catalogs consumed; their members are among `zones`.
    pub consumers: Consumers,
}

/// Reads the kept copies of `zones` (those that have one) on every core,
/// as zone files are at start; one that fails is reported and the zone is
/// transferred anew.
pub fn load_kept<Z: Borrow<SecondaryZone>>(zones: &[Z]) -> Vec<Option<Zone>> {
    load_copies(
        zones,
        ("kept copies", "kept copy unusable; transferring anew"),
    )
}

/// Whether the file at `path` is one Heron wrote and sealed (its second
/// line is the seal's mark), not a zone file of the operator's.
fn is_sealed(path: &std::path::Path) -> bool {
    heron_xfr::secondary::seal::is_sealed_file(path)
}

/// [`load_kept`], saying what it read (`what`) and of a copy that fails
/// that it is `unusable`.
fn load_copies<Z: Borrow<SecondaryZone>>(
    zones: &[Z],
    (what, unusable): (&str, &str),
) -> Vec<Option<Zone>> {
    let zones: Vec<&SecondaryZone> = zones.iter().map(Borrow::borrow).collect();
    let started = Instant::now();
    let paths: Vec<_> = zones.iter().map(|z| z.kept_path()).collect();
    let exists = which_exist(&paths.iter().map(|p| &**p).collect::<Vec<_>>());
    let specs: Vec<ZoneSpec> = zones
        .iter()
        .zip(paths.iter().zip(&exists))
        .filter(|(_, (_, exists))| **exists)
        .map(|(z, (path, _))| ZoneSpec {
            origin: z.origin.clone(),
            file: path.to_path_buf(),
            signing: None,
            kept: true,
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
                Ok((zone, _)) => zone,
                Err(problems) => {
                    problems.iter().for_each(|p| tracing::error!("{p}"));
                    None
                }
            };
            if zone.is_none() {
                tracing::error!("zone {}: {unusable}", z.origin);
            }
            zone
        })
        .collect();
    if !specs.is_empty() {
        tracing::info!(
            "{} {what} of secondary zones read in {} ms",
            kept.iter().flatten().count(),
            started.elapsed().as_millis()
        );
    }
    kept
}
/// The signed versions kept (`FILE.signed`) of the secondary zones
/// `signed` here, read as [`load_kept`] reads kept copies.
pub fn load_signed_kept(
    zones: &[SecondaryZone],
    signed: &[(Name, Arc<crate::config::dnssec::Signing>)],
) -> Vec<Zone> {
    let signed: HashSet<Name> = signed.iter().map(|(o, _)| o.to_lowercase()).collect();
    let copies: Vec<SecondaryZone> = (zones.iter())
        .filter(|z| signed.contains(&z.origin.to_lowercase()))
        .map(|z| SecondaryZone {
            file: KeptFile::at(signed_copy(&z.kept_path())),
            ..z.clone()
        })
        .collect();
    // The unsigned copy kept is signed again: no transfer (black-box
    // finding AV-7: "transferring anew" sent the operator to look for
    // one that never came).
    let unusable =
        "signed copy unusable; signed again from the unsigned copy kept, past the serial served";
    load_copies(&copies, ("signed copies", unusable))
        .into_iter()
        .flatten()
        .collect()
}

/// The member zones of the consumed catalogs' kept copies, added to
/// `zones` with their own kept copies (read as [`load_kept`] reads them):
/// what catalogs made members survives a restart. Returns their
/// policies.
pub fn members_at_start(
    consumers: &mut Consumers,
    zones: &mut Vec<SecondaryZone>,
    kept: &mut Vec<Option<Zone>>,
    served: &Catalog,
) -> Vec<(Name, Arc<ZonePolicy>)> {
    // The version consumed last, else the one received last.
    let catalogs: Vec<SecondaryZone> = (zones.iter())
        .filter(|z| consumers.is_catalog(&z.origin.to_lowercase()))
        .map(|z| SecondaryZone {
            file: KeptFile::at(consumed_copy(&z.kept_path())),
            ..z.clone()
        })
        .collect();
    let consumed = load_kept(&catalogs);
    for catalog in zones.iter() {
        if consumers.is_catalog(&catalog.origin.to_lowercase()) {
            let ceded = read_ceded(&ceded_copy(&catalog.kept_path()));
            consumers.restore_ceded(&catalog.origin, ceded);
        }
    }
    let mut kept_of: HashMap<Name, &Zone> = (zones.iter().zip(kept.iter()))
        .filter_map(|(z, k)| Some((z.origin.to_lowercase(), k.as_ref()?)))
        .collect();
    for (catalog, copy) in catalogs.iter().zip(&consumed) {
        if let Some(copy) = copy {
            kept_of.insert(catalog.origin.to_lowercase(), copy);
        }
    }
    let configured: HashSet<Name> = zones.iter().map(|z| z.origin.to_lowercase()).collect();
    let by_hand =
        |zone: &Name| configured.contains(&zone.to_lowercase()) || served.get(zone).is_some();
    let mut members = consumers.start(|catalog| kept_of.get(catalog).copied(), by_hand);
    // Ceded before the stop to a catalog no longer configured.
    let orphans = consumers.adopt_orphans(by_hand).into_iter();
    members.extend(orphans.filter_map(|step| match step {
        Step::Add(member, policy) => Some((member, policy)),
        _ => None,
    }));
    // What that changed of the catalogs' ceded lists, kept now: a later
    // restart gives each zone to the same catalog.
    for (catalog, ceded) in consumers.changed_ceded() {
        let Some(zone) = zones.iter().find(|z| z.origin.to_lowercase() == catalog) else {
            continue;
        };
        let file = ceded_copy(&zone.kept_path());
        if let Err(e) = crate::plan::consumer::write_ceded(&file, &ceded) {
            tracing::warn!("cannot keep {}: {e}", file.display());
        }
    }
    // At a start too (regression hunt BS-3: only a catalog's new version
    // held them, a restart served them unsigned).
    let held = held_for_their_ds(members.iter().map(|(m, _)| m));
    members.retain(|(m, _)| !held.contains(&m.origin.to_lowercase()));
    let (members, policies): (Vec<SecondaryZone>, Vec<Arc<ZonePolicy>>) =
        members.into_iter().unzip();
    if !members.is_empty() {
        tracing::info!(
            "{} member zones of catalogs, from their kept copies",
            members.len()
        );
    }
    take_up_left_copies(consumers, zones, &members);
    let origins = members.iter().map(|z| z.origin.clone());
    let policies = origins.zip(policies).collect();
    kept.extend(load_kept(&members));
    zones.extend(members);
    policies
}

/// For each consumed catalog among `zones`: its members' copies in a
/// folder it no longer uses, taken up or deleted
/// ([`super::member_dirs`]), before the copies are read.
fn take_up_left_copies(consumers: &Consumers, zones: &[SecondaryZone], members: &[SecondaryZone]) {
    for catalog in zones
        .iter()
        .filter(|z| consumers.is_catalog(&z.origin.to_lowercase()))
    {
        let origin = catalog.origin.to_lowercase();
        let its: Vec<&SecondaryZone> = (members.iter())
            .filter(|m| {
                m.catalog
                    .as_ref()
                    .is_some_and(|c| c.to_lowercase() == origin)
            })
            .collect();
        let dirs = consumers.member_dirs(&origin);
        super::member_dirs::take_up_left_copies(&catalog.kept_path(), &dirs, &its);
    }
}

/// Longest pause between two catalog rebuilds (see [`RebuildPacer`]).
const MAX_REBUILD_PAUSE: Duration = Duration::from_millis(50);
/// Rebuild credit a quiet spell earns, at most: enough for the few
/// rebuilds an isolated change makes (a catalog's IXFR, then the member
/// it adds) at 100,000 zones, so that none of them waits.
const REBUILD_CREDIT: Duration = Duration::from_millis(200);
/// A rebuild costs this many times its duration in credit.
const REBUILD_COST: f64 = 5.0;
/// Records received since memory was last settled for it to be settled
/// again once the changes pause.
const SETTLE_AFTER_RECORDS: usize = 10_000;

/// Starts the task that keeps every secondary zone fresh, and routes
/// accepted NOTIFYs to it.
/// Until a zone is received (or its kept copy loaded) it answers SERVFAIL,
/// as when it expires.
/// Puts what a reload changes them through ([`Running`]) in
/// `transfers`; `origins` is the set of secondary zones the query
/// processor takes NOTIFYs for. Returns the zones' keeper and the refresh
/// task's commands (also the control socket's way to it).
/// Told once every kept copy given at the start is served (or found
/// expired): the server waits for it before it answers.
pub type Started = tokio::sync::oneshot::Receiver<()>;

pub fn start(
    secondaries: Secondaries,
    origins: SharedOrigins,
    catalog: &SharedCatalog,
    transfers: &Arc<Transfers>,
) -> Option<(Keeper, mpsc::UnboundedSender<Command>, Started)> {
    let Secondaries {
        zones,
        connections,
        notifies,
        bounds,
        kept,
        keep_removed,
        consumers,
    } = secondaries;
    let keeper = start_keeper()?;
    let catalogs = consumed_catalogs(&zones, &consumers);
    let mut unavailable = (*catalog.load_full()).clone();
    zones.iter().for_each(|z| unavailable.expire(&z.origin));
    catalog.store(Arc::new(unavailable));
    let kept_fresh: ShardedSet<Name> = zones.iter().map(|z| z.origin.to_lowercase()).collect();
    origins.store(Arc::new(kept_fresh.clone()));
    let (changes, received) = mpsc::unbounded_channel();
    let (started_tx, started) = tokio::sync::oneshot::channel();
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
            started: std::sync::Mutex::new(Some(started_tx)),
        }),
        keeper: keeper.clone(),
        bounds: refresh::SharedBounds::new(bounds),
    });
    // One copy of each zone's settings, shared with the refresh task.
    let zones: Vec<Arc<SecondaryZone>> = zones.into_iter().map(Arc::new).collect();
    let mut by_origin = OriginIndex::default();
    by_origin.reserve(&OwnOrigin, zones.len());
    for zone in &zones {
        by_origin.insert(&OwnOrigin, zone.clone());
    }
    let zones = zones
        .into_iter()
        .zip(kept.into_iter().map(|k| k.map(Arc::new)));
    let (commands, received) = mpsc::unbounded_channel();
    // In place before the refresh task serves a kept catalog zone.
    *transfers.secondaries.lock().unwrap() = Some(Running {
        commands: commands.clone(),
        zones: by_origin,
        kept_fresh,
        origins,
        keeper: keeper.clone(),
        keep_removed,
        ctx: ctx.clone(),
        consumers,
        member_log: LogLimiter::with_lines(LOG_INTERVAL, MEMBER_LINES),
        signed: transfers.signed_secondaries.clone(),
        zone_stats: transfers.zone_stats.clone(),
    });
    tokio::spawn(refresh::run(zones.collect(), ctx, received));
    for origin in catalogs {
        let _ = commands.send(Command::CheckSoon(origin));
    }
    forward_notifies(notifies, commands.clone());
    Some((keeper, commands, started))
}

/// Hands the NOTIFYs the query processor took to the refresh task, with
/// the address each came from.
fn forward_notifies(
    mut notifies: mpsc::UnboundedReceiver<NotifyReceived>,
    commands: mpsc::UnboundedSender<Command>,
) {
    tokio::spawn(async move {
        while let Some(received) = notifies.recv().await {
            let _ = commands.send(Command::Notify {
                origin: received.origin,
                serial: received.serial,
                from: Some(received.from.ip()),
            });
        }
    });
}

/// The secondary zones that are consumed catalogs. They are checked at
/// once at the start: members added or removed while the server was down
/// waited for the catalog's refresh, up to an hour (black-box finding;
/// Knot checks at start).
fn consumed_catalogs(zones: &[SecondaryZone], consumers: &Consumers) -> Vec<Name> {
    (zones.iter())
        .filter(|z| consumers.is_catalog(&z.origin.to_lowercase()))
        .map(|z| z.origin.clone())
        .collect()
}

/// The thread that writes kept copies. They are written when the workers
/// leave the CPU idle (at nice 19 a long write would still hold a
/// worker's core for a time slice). The price: on cores kept busy, the
/// date a check leaves on its file lands late, and a crash then may wait
/// out one refresh interval before that zone is checked again.
fn start_keeper() -> Option<Keeper> {
    match Keeper::start_with(|| {
        crate::background::lower_this_thread();
    }) {
        Ok(k) => Some(k),
        Err(e) => {
            tracing::error!(
                "cannot start the thread that keeps zone copies: {e}; no secondary zone is served"
            );
            None
        }
    }
}

/// The secondary zones being kept fresh, and how to change them.
pub struct Running {
    commands: mpsc::UnboundedSender<Command>,
    /// By origin.
    zones: OriginIndex<Arc<SecondaryZone>>,
    /// The keys of `zones`, as `origins` is given them: a version
    /// published shares all but the shards changed since with the one
    /// before.
    kept_fresh: ShardedSet<Name>,
    /// What the query processor takes NOTIFYs for, and what the refresh
    /// task's versions are still served for.
    origins: SharedOrigins,
    pub keeper: Keeper,
    keep_removed: bool,
    /// The refresh task's settings and connections, which a reload's
    /// `[secondary]` changes.
    ctx: Arc<Context>,
    /// The catalogs consumed, and which owns each member.
    consumers: Consumers,
    /// Lines about catalog members added, removed, re-pointed or reset:
    /// a catalog's producer may change 100,000 at once.
    member_log: LogLimiter<{ ZoneChange::KINDS }>,
    /// The secondary zones signed here: they start from their unsigned
    /// version, not the (signed) one served.
    signed: Arc<SignedSecondaries>,
    /// The zones' transfer counts: a zone stopped leaves the metrics.
    zone_stats: Arc<heron_xfr::stats::ZoneStats>,
}

impl Running {
    /// A reload's `[secondary]` (and the TLS trust from its `tls-ca`):
    /// timer bounds from each zone's next check, connection settings and
    /// transfer limits from each exchange that starts from now on.
    pub fn set_settings(&mut self, section: &crate::config::SecondarySection, tls: TlsClients) {
        let _ = self.commands.send(Command::SetBounds(section.bounds()));
        self.ctx
            .conns
            .reconfigure(heron_xfr::secondary::client::Reconfigured {
                concurrency: section.concurrency,
                io_timeout: Duration::from_secs(section.timeout),
                limits: section.transfer_limits(),
                tls,
            });
        self.keep_removed = section.keep_removed;
    }
}

/// What happened to a secondary zone, for its line.
#[derive(Clone, Copy)]
enum ZoneChange {
    Added,
    Removed,
    Repointed,
    Reset,
}

impl ZoneChange {
    const KINDS: usize = 4;

    fn line(self) -> &'static str {
        match self {
            ZoneChange::Added => "secondary zone added",
            ZoneChange::Removed => "secondary zone removed: no longer transferred",
            ZoneChange::Repointed => "secondary zone re-pointed",
            ZoneChange::Reset => {
                "member zone reset (its unique ID changed, or a coo or its owner dropping it gave it to another catalog): dropped and transferred afresh"
            }
        }
    }
}

/// Catalog members whose change gets a line of its own per
/// [`LOG_INTERVAL`] seconds; the rest are at debug, counted in the next
/// line, and the catalog's own line counts each version's changes.
pub const MEMBER_LINES: u64 = 5;

impl Running {
    /// The catalog zones consumed.
    pub fn consumed_catalogs(&self) -> impl Iterator<Item = Name> {
        self.consumers.names().into_iter()
    }

    /// The consumed catalogs whose newest version was rejected, and why.
    pub fn catalog_rejections(&self) -> Vec<(Name, String)> {
        (self.consumers.names().into_iter())
            .filter_map(|c| Some((c.clone(), self.consumers.rejection(&c)?.to_string())))
            .collect()
    }

    /// Keeps `signed`, the signed version of a secondary zone signed
    /// here, beside its kept copy, for a restart to carry on from; not
    /// when it is `before` again.
    pub(crate) fn keep_signed(&self, signed: &Arc<Zone>, before: Option<&Arc<Zone>>) {
        if before.is_some_and(|b| Arc::ptr_eq(b, signed))
            || self.signed.signing(signed.origin()).is_none()
        {
            return;
        }
        if let Some(zone) = self.zones.get(&OwnOrigin, signed.origin()) {
            self.keeper
                .write_at(signed_copy(&zone.kept_path()), signed.clone());
        }
    }

    /// Whether `origin` (lower-cased) is one of the secondary zones.
    /// Whether a consumed catalog lists `origin` (lower-cased).
    pub fn catalogs_list(&self, origin: &Name) -> bool {
        self.consumers.lists(origin)
    }

    /// The consumed catalogs (lower-cased).
    pub fn catalogs(&self) -> Vec<Name> {
        self.consumers.names()
    }

    pub fn runs(&self, origin: &Name) -> bool {
        self.zones.get(&OwnOrigin, origin).is_some()
    }

    /// The primaries of the secondary zone `origin` (where its forwarded
    /// UPDATEs go).
    pub fn primaries_of(&self, origin: &Name) -> Option<heron_xfr::secondary::zone::Primaries> {
        (self.zones.get(&OwnOrigin, origin)).map(|z| z.primaries.clone())
    }

    /// Makes `wanted` the secondary zones, in the catalog `next` about to
    /// be served: new ones start (from their kept copy, or the version
    /// served now, if any), those no longer wanted stop and are no longer
    /// served (unless `from_files` now loads them), their kept copy and
    /// journal deleted unless `[secondary] keep-removed`; those whose
    /// primaries or file changed start again from the version served.
    /// `catalogs` are the catalogs to consume now: the members of one no
    /// longer configured go as removed zones do, one added is consumed
    /// from the version of its zone served now (if any) or its next one,
    /// and the members of one whose templates changed follow them.
    /// Other zones are not touched.
    pub fn reconfigure(
        &mut self,
        wanted: Vec<SecondaryZone>,
        catalogs: Vec<CatalogConfig>,
        next: &mut Catalog,
        primary: &Primary,
        from_files: impl Fn(&Name) -> bool,
    ) -> SecondaryChanges {
        let reconsumed = self.consumers.reconfigure(catalogs);
        let mut changes = SecondaryChanges {
            catalogs_added: reconsumed.added,
            catalogs_removed: reconsumed.removed,
            catalogs_changed: reconsumed.changed,
            ..SecondaryChanges::default()
        };
        changes.repointed = self.repointed_members(&reconsumed.steps);
        self.note_member_dirs();
        let (mut added, mut to_delete) =
            self.take_steps(reconsumed.steps, next, primary, &from_files);
        let mut wanted: HashMap<Name, SecondaryZone> = wanted
            .into_iter()
            .map(|z| (z.origin.to_lowercase(), z))
            .collect();
        // Catalog members come and go with their catalog, not here, unless
        // a zone file now configures them by hand: the hand wins, as it
        // does for a member made a secondary by hand below.
        let gone: Vec<Arc<SecondaryZone>> = (self.zones.iter())
            .filter(|zone| match &zone.catalog {
                None => !wanted.contains_key(&zone.origin.to_lowercase()),
                Some(_) => from_files(&zone.origin.to_lowercase()),
            })
            .cloned()
            .collect();
        for zone in gone {
            self.leave_catalog(&zone, "loaded from a file", primary);
            changes.removed.push(zone.origin.clone());
            to_delete.extend(self.stop_gone(&zone, next, primary, &from_files));
        }
        for (origin, zone) in wanted.drain() {
            match self.zones.get(&OwnOrigin, &origin) {
                Some(running) if same_zone(running, &zone) => continue,
                Some(running) => {
                    let running = running.clone();
                    self.leave_catalog(&running, "configured by hand", primary);
                    changes.repointed.push(zone.origin.clone());
                    // Another file: the copy is written there from the
                    // version served, and none is left behind (a restart
                    // before the next transfer found nothing at the new
                    // path and answered SERVFAIL).
                    let moved = Some(running.kept_path().into_owned())
                        .filter(|old| !same_file(old, &zone.kept_path()));
                    let rewrite = moved.is_some();
                    to_delete.extend(moved);
                    self.repoint(zone, next, rewrite);
                }
                None => {
                    changes.added.push(zone.origin.clone());
                    added.push(zone);
                }
            }
        }
        self.delete_files(&to_delete);
        self.start_zones(added, next, &to_delete);
        // Members whose catalog, or whose zone configured by hand, went.
        self.adopt_orphans(next, primary);
        // A catalog added whose zone is served already (it was a
        // secondary zone before): its members now.
        for catalog in &changes.catalogs_added {
            if let Some(zone) = next.get(catalog).cloned() {
                self.consume(&zone, None, next, primary);
            }
        }
        self.publish_origins();
        changes
    }

    /// Stops a zone no longer a secondary here; its kept copy to delete,
    /// if any. One still configured, from a file (a secondary made a
    /// primary, its copy often that file) keeps its files (black-box
    /// finding), and no write of its old role lands on them.
    fn stop_gone(
        &mut self,
        zone: &SecondaryZone,
        next: &mut Catalog,
        primary: &Primary,
        from_files: &impl Fn(&Name) -> bool,
    ) -> Option<std::path::PathBuf> {
        let origin = zone.origin.to_lowercase();
        let promoted = from_files(&origin);
        let file = self.stop(&origin, next, primary, from_files)?;
        if promoted {
            self.keeper.forget(&file);
        }
        Some(file).filter(|_| !self.keep_removed && !promoted)
    }

    /// Reads again the version served of each consumed catalog that has
    /// not been taken (one rejected for listing a zone configured by hand
    /// then): after a reload let go of such a zone, the catalog need not
    /// wait for its next serial. A version taken already costs nothing.
    pub fn reconsume(&mut self, next: &mut Catalog, primary: &Primary) {
        for catalog in self.consumers.names() {
            if let Some(zone) = next.get(&catalog).cloned() {
                self.consume(&zone, None, next, primary);
            }
        }
        self.adopt_orphans(next, primary);
        self.add_held_again(next, primary);
    }

    /// The members held back for their DS ([`hold_for_their_ds`]) whose
    /// state file no longer says so (moved away): started, each in its
    /// catalog, at a reload rather than a restart.
    fn add_held_again(&mut self, next: &mut Catalog, primary: &Primary) {
        let held = held_members::held_members();
        let origins: Vec<&Name> = held.iter().map(|(origin, _)| origin).collect();
        let still: HashSet<Name> = (crate::plan::key_state::members_held_for_their_ds(&origins))
            .into_iter()
            .map(|(origin, _)| origin.clone())
            .collect();
        let steps: Vec<Step> = (origins.into_iter())
            .filter(|origin| !still.contains(*origin))
            .filter_map(|origin| self.consumers.add_again(origin))
            .collect();
        if steps.is_empty() {
            return;
        }
        let (added, mut to_delete) = self.take_steps(steps, next, primary, &|_| false);
        for member in &added {
            tracing::info!(
                zone = %member.origin,
                "catalog member served now: no key state file holds it back for its DS"
            );
        }
        // Transferred afresh, as a member a new version adds.
        to_delete.extend(added.iter().map(|z| z.kept_path().into_owned()));
        self.delete_files(&to_delete);
        self.start_zones(added, next, &to_delete);
        self.publish_origins();
    }

    /// Members whose catalog, or whose zone configured by hand, went
    /// ([`Consumers::adopt_orphans`]): started, each in its catalog.
    fn adopt_orphans(&mut self, next: &mut Catalog, primary: &Primary) {
        let zones = &self.zones;
        let configured = |z: &Name| zones.get(&OwnOrigin, z).is_some() || next.get(z).is_some();
        let orphans = self.consumers.adopt_orphans(configured);
        if orphans.is_empty() {
            return;
        }
        let (adopted, to_delete) = self.take_steps(orphans, next, primary, &|_| false);
        self.write_ceded();
        self.delete_files(&to_delete);
        // Transferred afresh: a file at a member's path is not taken as
        // its copy (it may be a hand zone's, just let go), nor deleted.
        let fresh: Vec<std::path::PathBuf> = (adopted.iter())
            .map(|z| z.kept_path().into_owned())
            .chain(to_delete)
            .collect();
        self.start_zones(adopted, next, &fresh);
        self.publish_origins();
    }

    /// A catalog member configured by hand now (`how`) no longer follows
    /// its catalog: the hand configuration wins.
    fn leave_catalog(&mut self, member: &SecondaryZone, how: &str, primary: &Primary) {
        let Some(catalog) = &member.catalog else {
            return;
        };
        tracing::warn!(
            zone = %member.origin,
            "zone {} is {how} now: it no longer follows catalog {catalog}",
            member.origin
        );
        self.consumers.disown(&member.origin.to_lowercase());
        primary.set_member_policy(&member.origin, None);
    }

    /// Takes a version of a catalog zone that was just received (or
    /// re-served), if it is a consumed catalog: its member zones are
    /// added, removed, re-pointed and reset in `next` and in the refresh
    /// task, each on its own.
    pub fn consume(
        &mut self,
        zone: &Arc<Zone>,
        diffs: Option<&[ZoneDiff]>,
        next: &mut Catalog,
        primary: &Primary,
    ) {
        if !self.is_catalog(zone.origin()) {
            return;
        }
        let zones = &self.zones;
        let configured = |z: &Name| zones.get(&OwnOrigin, z).is_some() || next.get(z).is_some();
        let had_a_version = self.consumers.has_consumed(&zone.origin().to_lowercase());
        let Some(steps) = self.consumers.consume(zone, diffs, configured) else {
            return;
        };
        if let Some(catalog) = self.zones.get(&OwnOrigin, zone.origin()) {
            self.keeper
                .write_at(consumed_copy(&catalog.kept_path()), zone.clone());
        }
        self.write_ceded();
        if steps.is_empty() {
            return;
        }
        let (added, mut to_delete) = self.take_steps(steps, next, primary, &|_| false);
        // A member a later version adds starts afresh (SERVFAIL until its
        // first transfer): a copy at its path is one a crash left behind
        // after its removal, not to be served (black-box finding: it was,
        // until the member's refresh). The first version taken (no copy
        // of the catalog kept) takes up the members' copies.
        if had_a_version {
            to_delete.extend(added.iter().map(|z| z.kept_path().into_owned()));
        }
        // Before the added zones look for their kept copies: a reset
        // zone's must be gone.
        self.delete_files(&to_delete);
        self.start_zones(added, next, &to_delete);
        self.publish_origins();
    }

    /// Keeps, for each catalog whose ceded zones changed, the list beside
    /// its kept copy: small (the zones two catalogs list), so written now.
    fn write_ceded(&mut self) {
        for (catalog, zones) in self.consumers.changed_ceded() {
            let Some(file) = self
                .zones
                .get(&OwnOrigin, &catalog)
                .map(|z| ceded_copy(&z.kept_path()))
            else {
                continue;
            };
            if let Err(e) = write_ceded(&file, &zones) {
                tracing::warn!("cannot keep {}: {e}", file.display());
            }
        }
    }

    /// Carries out what catalogs ask of their members, but for starting
    /// the zones to add and deleting the files of those removed or reset:
    /// returns both. `from_files` says which zones a reload loaded from
    /// files (a member forgotten for one keeps it served).
    /// Notes the members' folders of every consumed catalog, with those
    /// noted before: a start after a crash in a move finds the copies
    /// left behind ([`super::member_dirs`]).
    fn note_member_dirs(&self) {
        for origin in self.consumers.names() {
            if let Some(zone) = self.zones.get(&OwnOrigin, &origin) {
                let dirs = self.consumers.member_dirs(&origin);
                super::member_dirs::note(&zone.kept_path(), &dirs, true);
            }
        }
    }

    /// The members `steps` re-point, counted as the log says them
    /// (black-box finding BF-2: "0 re-pointed").
    fn repointed_members(&self, steps: &[Step]) -> Vec<Name> {
        (steps.iter())
            .filter_map(|step| match step {
                Step::Repoint(member, _) => Some(member),
                _ => None,
            })
            .filter(|m| !(self.zones.get(&OwnOrigin, &m.origin)).is_some_and(|r| same_zone(r, m)))
            .map(|m| m.origin.clone())
            .collect()
    }

    fn take_steps(
        &mut self,
        steps: Vec<Step>,
        next: &mut Catalog,
        primary: &Primary,
        from_files: &dyn Fn(&Name) -> bool,
    ) -> (Vec<SecondaryZone>, Vec<std::path::PathBuf>) {
        let (mut added, mut to_delete) = (Vec::new(), Vec::new());
        for step in steps {
            match step {
                Step::Add(member, policy) => {
                    primary.set_member_policy(&member.origin, Some(policy));
                    added.push(member);
                }
                Step::Remove(origin) => {
                    held_members::release(&origin);
                    let file = self.stop(&origin.to_lowercase(), next, primary, |_| false);
                    if let Some(file) = file.filter(|_| !self.keep_removed) {
                        to_delete.push(file);
                    }
                    primary.set_member_policy(&origin, None);
                }
                Step::Repoint(member, policy) => {
                    primary.set_member_policy(&member.origin, Some(policy));
                    // Its template changed only in ACLs or NOTIFY targets:
                    // nothing to ask anew.
                    let running = self.zones.get(&OwnOrigin, &member.origin);
                    if !running.is_some_and(|running| same_zone(running, &member)) {
                        // Another template's folder: the copy moves there
                        // (written from the version served), none is left
                        // behind to come back stale.
                        let old = running.map(|r| r.kept_path().into_owned());
                        let moved = old.filter(|old| **old != *member.kept_path());
                        let rewrite = moved.is_some();
                        to_delete.extend(moved);
                        self.repoint(member, next, rewrite);
                    }
                }
                Step::Forget(origin) => {
                    held_members::release(&origin);
                    // Its kept file is now a configured zone's, maybe its
                    // own by hand: that zone, just loaded, stays served
                    // (regression hunt finding: REFUSED until a restart).
                    self.stop(&origin.to_lowercase(), next, primary, from_files);
                    primary.set_member_policy(&origin, None);
                }
                Step::Reset(member, policy) => {
                    self.log_change(&member, ZoneChange::Reset);
                    let origin = member.origin.to_lowercase();
                    to_delete.extend(self.stop(&origin, next, primary, |_| false));
                    primary.set_member_policy(&member.origin, Some(policy));
                    added.push(member);
                }
            }
        }
        hold_for_their_ds(&mut added, primary);
        (added, to_delete)
    }

    /// Whether `origin` is a catalog zone this server consumes.
    pub fn is_catalog(&self, origin: &Name) -> bool {
        self.consumers.is_catalog(&origin.to_lowercase())
    }

    /// Stops keeping `origin` (lower-cased) fresh and serving it (unless
    /// `from_files` loads it now); returns its kept file.
    fn stop(
        &mut self,
        origin: &Name,
        next: &mut Catalog,
        primary: &Primary,
        from_files: impl Fn(&Name) -> bool,
    ) -> Option<std::path::PathBuf> {
        let zone = self.zones.remove(&OwnOrigin, origin)?;
        self.kept_fresh.remove(origin);
        let _ = self.commands.send(Command::Remove(zone.origin.clone()));
        if !from_files(origin) {
            next.remove(origin);
            primary.forget(origin);
            self.zone_stats.forget(origin);
        }
        self.log_change(&zone, ZoneChange::Removed);
        Some(zone.kept_path().into_owned())
    }

    /// Gives a running zone other primaries or another file: it starts
    /// again from the version served (written to its kept file at once
    /// if `rewrite`: the file moved), and asks the primaries at once.
    fn repoint(&mut self, zone: SecondaryZone, next: &Catalog, rewrite: bool) {
        let zone = Arc::new(zone);
        let origin = zone.origin.to_lowercase();
        self.log_change(&zone, ZoneChange::Repointed);
        let serving = self.signed.start_from(&origin, next.get(&origin));
        if let (true, Some(version)) = (rewrite, &serving) {
            self.keeper.write(&zone, version.clone(), None);
        }
        let _ = self.commands.send(Command::Repoint(zone.clone(), serving));
        // The new primaries are asked at once, not at the next refresh.
        let _ = (self.commands).send(Command::CheckSoon(zone.origin.clone()));
        self.kept_fresh.insert(origin);
        self.zones.insert(&OwnOrigin, zone);
    }

    /// Starts new zones, from their kept copies (unless their file is
    /// among `deleted`: a reset zone's copy may not be gone yet); those
    /// without answer SERVFAIL until their first transfer, asked at once,
    /// unless a version is served already (a zone turned from primary
    /// into secondary serves its file's until then). That version was not
    /// received from these primaries: the first transfer replaces it
    /// whatever its serial, as a fresh start's would (black-box finding:
    /// it was taken for a kept copy, checked a refresh later, and a lower
    /// serial of the primary's never replaced it).
    fn start_zones(
        &mut self,
        added: Vec<SecondaryZone>,
        next: &mut Catalog,
        deleted: &[std::path::PathBuf],
    ) {
        // A copy deleted, or not to be taken, is not read at all (black-box
        // finding DC-3: read and logged as loaded, it looked served).
        let fresh = |zone: &SecondaryZone| deleted.iter().any(|d| **d == *zone.kept_path());
        let to_read: Vec<&SecondaryZone> = added.iter().filter(|z| !fresh(z)).collect();
        let mut read = load_kept(&to_read).into_iter();
        let kept: Vec<Option<Zone>> = (added.iter())
            .map(|z| {
                if fresh(z) {
                    None
                } else {
                    read.next().flatten()
                }
            })
            .collect();
        for (zone, kept) in added.into_iter().zip(kept) {
            let path = zone.kept_path();
            // A zone served already (turned from primary) whose file holds
            // no seal of Heron's has its own zone file there, no copy
            // received from these primaries (black-box finding BL-3: it
            // was taken for one, and no transfer was asked).
            let served = next.get(&zone.origin).is_some();
            let kept = kept.filter(|_| !served || is_sealed(&path));
            let zone = Arc::new(zone);
            let start = kept
                .map(Arc::new)
                .or_else(|| self.signed.start_from(&zone.origin, None));
            // A zone signed here starts from its unsigned version, if it
            // received one: the signed one it may have served stays until
            // its transfer.
            if start.is_none() && next.get(&zone.origin).is_none() {
                next.expire(&zone.origin);
            }
            self.log_change(&zone, ZoneChange::Added);
            let origin = zone.origin.to_lowercase();
            self.kept_fresh.insert(origin);
            self.zones.insert(&OwnOrigin, zone.clone());
            let _ = self.commands.send(Command::Add(zone, start));
        }
    }

    /// Says what happened to `zone`: always for a zone of the
    /// configuration, within [`MEMBER_LINES`] of its kind per interval for
    /// a catalog's member (else at debug).
    fn log_change(&self, zone: &SecondaryZone, change: ZoneChange) {
        let what = change.line();
        let Some(catalog) = &zone.catalog else {
            tracing::info!(zone = %zone.origin, "{what}");
            return;
        };
        let now = heron_proto::time::unix_now();
        match self.member_log.admit(change as usize, now) {
            Some(due) => tracing::info!(
                zone = %zone.origin,
                %catalog,
                "{what}{}",
                due.tail()
            ),
            None => tracing::debug!(zone = %zone.origin, %catalog, "{what}"),
        }
    }

    /// The processor takes NOTIFYs for the zones kept fresh now.
    fn publish_origins(&self) {
        self.origins.store(Arc::new(self.kept_fresh.clone()));
    }

    /// Deletes removed zones' files now, and again on the keeper's
    /// thread after any copy queued before (which would otherwise land
    /// after the delete). Waiting here for the keeper instead held the
    /// catalog's update lock for as long as it was busy (up to 5 s).
    /// The first [`MEMBER_LINES`] deletions get a line each, the rest one
    /// line (a catalog may drop 100,000 members at once).
    fn delete_files(&self, files: &[std::path::PathBuf]) {
        let told = MEMBER_LINES as usize;
        for (i, file) in files.iter().enumerate() {
            delete_kept(file, i < told);
            self.keeper.delete(file);
            self.keeper.delete(&consumed_copy(file));
            self.keeper.delete(&signed_copy(file));
        }
        if files.len() > told {
            let more = files.len() - told;
            tracing::info!("kept copies of {more} more removed zones deleted");
        }
    }
}

/// Whether `running` is kept fresh as `wanted` asks: same primaries,
/// file and catalog.
/// Leaves out of `added` the catalog members (served unsigned) that a
/// key state file of this run says may have a DS at the parent: a zone
/// signed here and taken out, then listed by a catalog, would be bogus to
/// every validator (regression hunt BR-2). Said; served at the next
/// reconfiguration or start once the state file is moved away.
fn hold_for_their_ds(added: &mut Vec<SecondaryZone>, primary: &Primary) {
    let held = held_for_their_ds(added.iter());
    if held.is_empty() {
        return;
    }
    added.retain(|z| !held.contains(&z.origin.to_lowercase()));
    held.iter()
        .for_each(|origin| primary.set_member_policy(origin, None));
}

/// The catalog members of `zones` held for their DS ([`hold_for_their_ds`]),
/// lower-cased, each said and kept for zone-status ([`held_members`]);
/// the others are no longer held.
fn held_for_their_ds<'z>(zones: impl Iterator<Item = &'z SecondaryZone>) -> HashSet<Name> {
    let members: Vec<&SecondaryZone> = zones.filter(|z| z.catalog.is_some()).collect();
    let origins: Vec<&Name> = members.iter().map(|z| &z.origin).collect();
    let held: HashSet<Name> = (crate::plan::key_state::members_held_for_their_ds(&origins))
        .into_iter()
        .map(|(origin, why)| {
            tracing::error!(
                zone = %origin,
                "catalog member not served: {why} (then heron ctl reconfigure)"
            );
            let catalog = members.iter().find(|z| z.origin == *origin);
            held_members::hold(origin, catalog.and_then(|z| z.catalog.as_ref()), &why);
            origin.to_lowercase()
        })
        .collect();
    (members.iter())
        .filter(|z| !held.contains(&z.origin.to_lowercase()))
        .for_each(|z| held_members::release(&z.origin));
    held
}

/// Whether two paths name one file: the same file if both exist, else
/// the same absolute path (`./a` and `a` alike). A copy "moved" to where
/// it already is must not be deleted after it is written.
fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if let (Ok(a), Ok(b)) = (std::fs::metadata(a), std::fs::metadata(b)) {
        return (a.dev(), a.ino()) == (b.dev(), b.ino());
    }
    let absolute = |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    absolute(a) == absolute(b)
}

fn same_zone(running: &SecondaryZone, wanted: &SecondaryZone) -> bool {
    format!("{running:?}") == format!("{wanted:?}")
}

/// Deletes a removed secondary zone's kept copy and journal (and, for a
/// catalog zone, the copy of the version consumed and its ceded zones;
/// for a zone signed here, its signed copy); says so at info if `told`,
/// else at debug.
fn delete_kept(file: &std::path::Path, told: bool) {
    // Only a copy Heron wrote (sealed) is its to delete: a `file` that
    // named the operator's own file (a typo) is left (black-box finding
    // BQ-11: removing such a zone deleted it).
    let written = is_sealed(file);
    if !written && file.exists() {
        // Nor the files beside it, which are that file's (BIND's journal
        // and inline-signing copy; regression hunt BR-3).
        tracing::info!(file = %file.display(), "kept: not a copy Heron wrote (no seal), so neither it nor the files beside it are deleted with its zone");
        return;
    }
    let own = Some(file.to_path_buf()).filter(|_| written);
    let paths = own.into_iter().chain([
        journal_file::path_for(file),
        consumed_copy(file),
        ceded_copy(file),
        signed_copy(file),
        crate::config::shared_files::beside(file, super::member_dirs::MEMBER_DIRS),
    ]);
    let signed = signed_copy(file);
    for path in paths {
        let path = path.as_path();
        // A signed copy Heron wrote is sealed; another is not its own.
        if path == signed && path.exists() && !is_sealed(path) {
            continue;
        }
        match std::fs::remove_file(path) {
            Ok(()) if told => {
                tracing::info!(file = %path.display(), "deleted: no longer a kept copy (its zone removed, or kept at another path)")
            }
            Ok(()) => {
                tracing::debug!(file = %path.display(), "deleted: no longer a kept copy (its zone removed, or kept at another path)")
            }
            // No such file can be there: none to delete (black-box
            // findings: warnings for a `.consumed` a member never has,
            // under a name too long, or past a file that is no folder).
            Err(e) if cannot_exist(&e) => {}
            Err(e) => tracing::warn!("cannot delete {}: {e}", path.display()),
        }
    }
}

/// Whether `e`, from removing a file, says no file is at its path.
fn cannot_exist(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{InvalidFilename, NotADirectory, NotFound};
    matches!(e.kind(), NotFound | NotADirectory | InvalidFilename)
}

/// A change to the catalog from the refresh task.
enum Change {
    Publish(Arc<Zone>, Option<Vec<ZoneDiff>>),
    Expire(Name),
    /// Every kept copy given at the start was handed over before this:
    /// told once they are served.
    Started(tokio::sync::oneshot::Sender<()>),
    /// Called once what was handed over before it is served.
    Served(Box<dyn FnOnce() + Send>),
}

impl Change {
    /// Records it brings: a whole zone's, or an IXFR's steps'.
    fn records(&self) -> usize {
        match self {
            Change::Publish(zone, None) => zone.record_count(),
            Change::Publish(_, Some(diffs)) => {
                let steps = diffs.iter().map(|d| d.deleted.len() + d.added.len());
                steps.sum()
            }
            Change::Expire(_) | Change::Started(_) | Change::Served(_) => 0,
        }
    }
}

/// Hands what the refresh task receives to `apply_changes`.
struct CatalogPublisher {
    changes: mpsc::UnboundedSender<Change>,
    /// Told once the kept copies given at the start are served.
    started: std::sync::Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
}

impl Publisher for CatalogPublisher {
    fn publish(&self, zone: Arc<Zone>, diffs: Option<Vec<ZoneDiff>>) {
        let _ = self.changes.send(Change::Publish(zone, diffs));
    }

    fn expire(&self, origin: &Name) {
        let _ = self.changes.send(Change::Expire(origin.clone()));
    }

    fn accepts(&self, zone: &Zone) -> Result<(), String> {
        crate::plan::zonemd::check(zone)
    }

    fn served(&self, done: Box<dyn FnOnce() + Send>) {
        let _ = self.changes.send(Change::Served(done));
    }

    fn started(&self) {
        let told = self
            .started
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(told) = told {
            let _ = self.changes.send(Change::Started(told));
        }
    }
}

/// Applies changes to the served catalog, every change waiting at once in
/// one new version. Building a version copies the shards of the table of
/// zones that the changes touch (one for one change, every one for a
/// batch of thousands in a cold start): the rebuilds are paced ([`RebuildPacer`]) so that they take at most a
/// fifth of a core while a cold start delivers thousands of zones, while
/// a change after a quiet spell, and the few that follow it, are served
/// at once. Memory is settled on another thread after a burst of
/// records, so that it never holds up the next change.
fn apply_changes(
    mut changes: mpsc::UnboundedReceiver<Change>,
    catalog: &SharedCatalog,
    xfr: &Transfers,
    served: &SharedOrigins,
) {
    let settle = start_settler(catalog.clone());
    let mut pacer = RebuildPacer::new(Instant::now());
    let mut unsettled = 0;
    // Until the start is told, the changes of zones signed here with no
    // signed copy kept wait: their full signing held every zone's first
    // answer, 7.9 s for 100,000 records (regression hunt). They follow
    // at once. One with a signed copy keeps its signatures: it is waited
    // for, as the unsigned copies are.
    let mut held_for_start = Some(Vec::new());
    while let Some(first) = changes.blocking_recv() {
        let pause = pacer.pause_before_rebuild(Instant::now());
        if !pause.is_zero() {
            // Changes arriving meanwhile join this rebuild.
            std::thread::sleep(pause);
        }
        let started = Instant::now();
        let mut batch = vec![first];
        while let Ok(more) = changes.try_recv() {
            batch.push(more);
        }
        unsettled += batch.iter().map(Change::records).sum::<usize>();
        let (told, mut batch): (Vec<Change>, Vec<Change>) = batch
            .into_iter()
            .partition(|c| matches!(c, Change::Started(_) | Change::Served(_)));
        if let Some(held) = held_for_start.as_mut() {
            let signed: Vec<Change>;
            (signed, batch) = batch.into_iter().partition(|c| is_signed_anew(c, xfr));
            held.extend(signed);
        }
        let mut changed = apply(batch, catalog, xfr, served);
        pacer.rebuilt(started, Instant::now());
        for change in told {
            let Change::Started(told) = change else {
                if let Change::Served(done) = change {
                    done();
                }
                continue;
            };
            let _ = told.send(());
            let held = held_for_start.take().unwrap_or_default();
            if !held.is_empty() {
                changed.extend(apply(held, catalog, xfr, served));
            }
        }
        xfr.notify(&changed);
        if changes.is_empty() && unsettled >= SETTLE_AFTER_RECORDS {
            // A burst (a cold start, a large zone) is over: the transfers'
            // buffers and the catalog versions it replaced go back to the
            // kernel, and the zones it brought move to huge pages. Not
            // after a few records: settling 100,000 zones takes tens of
            // ms, and its trim holds the allocator's locks meanwhile.
            let _ = settle.try_send(());
            unsettled = 0;
        }
    }
}

/// Whether `change` is of a secondary zone signed here that has no
/// signed version yet.
fn is_signed_anew(change: &Change, xfr: &Transfers) -> bool {
    let origin = match change {
        Change::Publish(zone, _) => zone.origin(),
        Change::Expire(origin) => origin,
        Change::Started(_) | Change::Served(_) => return false,
    };
    xfr.signed_secondaries.signs_anew(origin)
}

/// Settles the served catalog's memory ([`crate::memory::settle`]) on a
/// thread of its own at housekeeping priority whenever asked; asks made
/// while it works count as one.
fn start_settler(catalog: SharedCatalog) -> std::sync::mpsc::SyncSender<()> {
    let (ask, asked) = std::sync::mpsc::sync_channel(1);
    let spawned = std::thread::Builder::new()
        .name("settle-updates".into())
        .spawn(move || {
            if !crate::background::to_housekeeping_priority() {
                tracing::debug!("the settle thread keeps its CPU priority");
            }
            while asked.recv().is_ok() {
                crate::memory::settle(&catalog.load_full());
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("no thread to settle zone memory after transfers: {e}");
    }
    ask
}

/// Paces the rebuilds of the served catalog by credit: a rebuild costs
/// [`REBUILD_COST`] times its duration, and credit comes back with wall
/// time, up to [`REBUILD_CREDIT`]. Over a long burst, rebuilds then take
/// at most a fifth of the time (each is followed by a pause four times
/// as long, at most [`MAX_REBUILD_PAUSE`]); after a quiet spell, the
/// next few are not held back at all.
struct RebuildPacer {
    /// Seconds of credit; negative when owed.
    credit: f64,
    at: Instant,
}

impl RebuildPacer {
    fn new(now: Instant) -> RebuildPacer {
        RebuildPacer {
            credit: REBUILD_CREDIT.as_secs_f64(),
            at: now,
        }
    }

    fn earn(&mut self, now: Instant) {
        let earned = now.saturating_duration_since(self.at).as_secs_f64();
        self.credit = (self.credit + earned).min(REBUILD_CREDIT.as_secs_f64());
        self.at = now;
    }

    /// How long to wait, from `now`, before the next rebuild.
    fn pause_before_rebuild(&mut self, now: Instant) -> Duration {
        self.earn(now);
        Duration::from_secs_f64((-self.credit).max(0.0)).min(MAX_REBUILD_PAUSE)
    }

    /// A rebuild ran from `started` to `now`.
    fn rebuilt(&mut self, started: Instant, now: Instant) {
        self.earn(now);
        let took = now.saturating_duration_since(started).as_secs_f64();
        // Never owed more than one pause: a rebuild slowed by a busy
        // machine does not hold up the next ones for long.
        let floor = -MAX_REBUILD_PAUSE.as_secs_f64();
        self.credit = (self.credit - took * REBUILD_COST).max(floor);
    }
}

/// A version to serve, the one it follows, and the IXFR steps between.
type ToServe = (Arc<Zone>, Option<Arc<Zone>>, Option<Vec<ZoneDiff>>);

/// What to serve of `zone`, just received (`steps` from the version
/// `served`, if it came by IXFR): itself, or for a secondary zone signed
/// here its signed version (then without steps: the journal takes the
/// diff of the signed versions), the rollover driver told to look at its
/// keys again. With the version it follows. None if it cannot be signed
/// (the version served stays).
fn signed_here(
    xfr: &Transfers,
    zone: Arc<Zone>,
    served: Option<&Arc<Zone>>,
    steps: Option<Vec<ZoneDiff>>,
) -> Option<ToServe> {
    match xfr.signed_secondaries.sign_received(&zone, served) {
        None => Some((zone, served.cloned(), steps)),
        Some(Ok((signed, before))) => {
            // The signing may have made keys or moved them on: the
            // rollover driver looks at the zone again.
            let origin = std::collections::HashSet::from([signed.origin().to_lowercase()]);
            crate::runtime::rollover::reloaded(Some(&origin));
            crate::runtime::rollover::wake();
            Some((signed, before, None))
        }
        Some(Err(e)) => {
            tracing::error!(
                zone = %zone.origin(),
                serial = zone.serial(),
                "cannot sign the version received: {e}; the version served stays"
            );
            None
        }
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
    let mut secondaries = xfr.secondaries.lock().unwrap();
    let mut catalogs = Vec::new();
    for change in batch {
        let origin = match &change {
            Change::Publish(zone, _) => zone.origin(),
            Change::Expire(origin) => origin,
            Change::Started(_) | Change::Served(_) => continue,
        };
        if !served.contains(origin) {
            continue;
        }
        match change {
            Change::Publish(zone, steps) => {
                if secondaries
                    .as_ref()
                    .is_some_and(|s| s.is_catalog(zone.origin()))
                {
                    catalogs.push((zone.clone(), steps.clone()));
                }
                let served = next.get(zone.origin());
                let Some((zone, before, steps)) = signed_here(xfr, zone, served, steps) else {
                    continue;
                };
                if let Some(running) = secondaries.as_ref() {
                    running.keep_signed(&zone, before.as_ref());
                }
                // The journal lets our own secondaries IXFR from us in turn.
                let notify = match (before.as_ref(), steps) {
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
            Change::Started(_) | Change::Served(_) => {}
        }
    }
    if let Some(running) = secondaries.as_mut() {
        for (zone, steps) in catalogs {
            running.consume(&zone, steps.as_deref(), &mut next, &xfr.primary);
        }
    }
    drop(secondaries);
    catalog.store(Arc::new(next));
    changed
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    /// Paths at which no file can be are no failure to delete: a name too
    /// long, a file where a folder would be (black-box findings).
    #[test]
    fn paths_where_no_file_can_be_are_not_failures_to_delete() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.zone");
        std::fs::write(&file, "x").unwrap();
        let long = dir.path().join("x".repeat(300));
        for path in [file.join("below"), long, dir.path().join("absent")] {
            let e = std::fs::remove_file(&path).unwrap_err();
            assert!(super::cannot_exist(&e), "{}: {e}", path.display());
        }
        let busy = std::fs::remove_file(dir.path()).unwrap_err();
        assert!(!super::cannot_exist(&busy), "a folder is there: {busy}");
    }

    use super::*;

    fn n(text: &str) -> Name {
        Name::parse(text).unwrap()
    }

    fn version(origin: &str, serial: u32, body: &str) -> Arc<Zone> {
        let text = format!(
            "$ORIGIN {origin}.\n$TTL 0\n@ SOA invalid. invalid. {serial} 3600 600 86400 0\n\
             @ NS invalid.\n{body}"
        );
        Arc::new(
            heron_zone::load_zone_str(&text, "t", &n(origin))
                .unwrap()
                .zone,
        )
    }

    /// Consuming catalog cat.test, members kept in `dir`.
    fn running(dir: &std::path::Path, keeper: Keeper) -> Running {
        let template = crate::config::catalog::Template {
            primaries: Arc::new(vec![heron_xfr::secondary::client::Upstream {
                addr: "192.0.2.1:53".parse().unwrap(),
                key: None,
                tls: None,
                source: None,
            }]),
            policy: Default::default(),
            keep_journal: false,
            kept: KeptFile::pattern(format!("{}/{{zone}}.zone", dir.display())),
            dir: dir.to_path_buf(),
            in_use: Default::default(),
        };
        let config = CatalogConfig {
            zone: n("cat.test"),
            default: Some(template),
            groups: Default::default(),
            max_members: crate::config::catalog::DEFAULT_MAX_MEMBERS,
        };
        Running {
            commands: mpsc::unbounded_channel().0,
            zones: OriginIndex::default(),
            kept_fresh: Default::default(),
            origins: Default::default(),
            ctx: Arc::new(Context {
                conns: Connections::new(Arc::default(), 1, Duration::from_secs(1)),
                publisher: Arc::new(CatalogPublisher {
                    changes: mpsc::unbounded_channel().0,
                    started: Default::default(),
                }),
                keeper: keeper.clone(),
                bounds: refresh::SharedBounds::new(TimerBounds::default()),
            }),
            keeper,
            keep_removed: false,
            consumers: Consumers::new(vec![config]),
            member_log: LogLimiter::with_lines(LOG_INTERVAL, MEMBER_LINES),
            signed: Default::default(),
            zone_stats: Default::default(),
        }
    }

    /// A member removed while the keeper is busy (here: stuck until the
    /// test lets it go) is removed at once, the catalog change after it
    /// is applied too, and the copy of it that was queued never lands.
    /// A file written two ways is one file: the copy is not moved onto
    /// itself and then deleted.
    #[test]
    fn a_path_written_another_way_is_the_same_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("z.zone");
        let dotted = dir.path().join(".").join("z.zone");
        assert!(same_file(&file, &dotted), "neither exists yet");
        std::fs::write(&file, "").unwrap();
        let linked = dir.path().join("link.zone");
        std::os::unix::fs::symlink(&file, &linked).unwrap();
        assert!(same_file(&file, &linked) && same_file(&file, &dotted));
        assert!(!same_file(&file, &dir.path().join("other.zone")));
    }

    #[test]
    fn a_member_removed_while_its_copy_is_queued_does_not_wait_for_the_keeper() {
        let dir = tempfile::tempdir().unwrap();
        let keeper = Keeper::start().unwrap();
        // The keeper blocks opening a FIFO for writing until it is read.
        let stall = dir.path().join("stall.zone");
        let fifo = dir.path().join("stall.zone.tmp");
        assert!(
            Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        keeper.write_at(stall.clone(), version("stall.test", 1, ""));
        let mut running = running(dir.path(), keeper.clone());
        let (primary, mut next) = (Primary::new(HashMap::new(), 1 << 20), Catalog::new());
        let v1 = version("cat.test", 1, "version TXT \"2\"\na.zones PTR a.test.\n");
        running.consume(&v1, None, &mut next, &primary);
        // a.test was just transferred: its copy waits behind the stall.
        let a_zone = running.zones.get(&OwnOrigin, &n("a.test")).unwrap().clone();
        keeper.write(&a_zone, version("a.test", 5, ""), None);
        let v2 = version("cat.test", 2, "version TXT \"2\"\nb.zones PTR b.test.\n");
        running.consume(&v2, None, &mut next, &primary);
        let v3 = version(
            "cat.test",
            3,
            "version TXT \"2\"\nb.zones PTR b.test.\nc.zones PTR c.test.\n",
        );
        running.consume(&v3, None, &mut next, &primary);
        let mut members: Vec<String> = running.zones.iter().map(|z| z.origin.to_string()).collect();
        members.sort();
        assert_eq!(members, ["b.test.", "c.test."]);
        // Let the keeper go, and wait until it has done everything.
        let reader = std::thread::spawn(move || std::fs::read(fifo).unwrap().len());
        assert!(keeper.flush(Duration::from_secs(60)));
        assert!(reader.join().unwrap() > 0);
        assert!(
            !a_zone.kept_path().exists(),
            "the removed member's copy never lands"
        );
    }

    #[test]
    fn rebuilds_after_a_quiet_spell_wait_for_nothing_and_a_burst_takes_a_fifth() {
        let ms = Duration::from_millis;
        let mut now = Instant::now();
        let mut pacer = RebuildPacer::new(now);
        // One member added to a catalog of 100,000 zones: the catalog's
        // rebuild, then the member's, 5 ms each.
        for _ in 0..2 {
            assert_eq!(pacer.pause_before_rebuild(now), Duration::ZERO);
            pacer.rebuilt(now, now + ms(5));
            now += ms(5);
        }
        // A cold start: rebuilds back to back for 10 s take a fifth of it.
        let (started, mut busy) = (now, Duration::ZERO);
        while now < started + Duration::from_secs(10) {
            now += pacer.pause_before_rebuild(now);
            pacer.rebuilt(now, now + ms(5));
            (now, busy) = (now + ms(5), busy + ms(5));
        }
        let share = busy.as_secs_f64() / (now - started).as_secs_f64();
        assert!((0.19..0.22).contains(&share), "{share}");
        // A rebuild slowed down by a busy machine owes one pause at most...
        pacer.rebuilt(now, now + Duration::from_secs(1));
        now += Duration::from_secs(1);
        let pause = pacer.pause_before_rebuild(now);
        assert!(pause > ms(49) && pause <= MAX_REBUILD_PAUSE, "{pause:?}");
        // ...and a quiet spell brings the credit back.
        now += Duration::from_secs(1);
        assert_eq!(pacer.pause_before_rebuild(now), Duration::ZERO);
    }
}
