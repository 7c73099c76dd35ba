//! The running server's state, owned in one place ([`Transfers`]: the
//! primary side, the TSIG keys, the query log's writer, the secondary
//! zones' runtime), and the reload procedure that applies a new plan to
//! it. Below the control socket and the metrics endpoint, which read and
//! drive it; above `plan`, whose decisions it carries out.

pub(crate) mod freeze_mark;
pub(crate) mod held_members;
pub(crate) mod member_dirs;
pub mod query_log;
pub mod rollover;
pub mod secondary;
pub(crate) mod signed_copies;
pub(crate) mod signed_secondary;
pub mod update;
pub(crate) mod update_forward;
pub(crate) mod update_seen;
pub(crate) mod update_signed;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use heron_proto::Name;
use heron_server::SharedCatalog;
use heron_server::dnstap;
use heron_xfr::keys::SharedKeys;
use heron_xfr::primary::notify::Notifier;
use heron_xfr::primary::{Primary, ZonePolicy};
use heron_xfr::stats::ZoneStats;
use heron_zone::{Catalog, Zone};

use heron_xfr::secondary::refresh::SecondaryZone;
use heron_xfr::secondary::tls::TlsClients;

use crate::config::{CatalogConfig, GeneratedCatalog};
use crate::plan::catalog_producer;
use crate::plan::zone_files::{self, Outcome, Reconfigured, ZoneFiles};
use crate::{background, memory, notify};

/// The primary side's state.
pub(crate) struct Transfers {
    pub(crate) primary: Arc<Primary>,
    pub(crate) notifier: Notifier,
    /// The TSIG keys every side signs and verifies with, replaced by a
    /// reload that reads new ones.
    pub(crate) keys: Arc<SharedKeys>,
    /// The query log's writer, for a whole reload to reopen its file
    /// (after a rotation).
    pub(crate) query_log: Arc<query_log::QueryLog>,
    /// Transfers and NOTIFYs per zone, both ways.
    pub(crate) zone_stats: Arc<ZoneStats>,
    /// Held while a new catalog is built and stored, so a reload and a
    /// transfer finishing at once do not drop each other's change.
    pub(crate) catalog_writer: Mutex<()>,
    /// The secondary zones' refresh task, once started.
    pub(crate) secondaries: Mutex<Option<secondary::Running>>,
    /// Zones whose updates `heron ctl freeze` stopped.
    pub(crate) frozen: update::Frozen,
    /// The zones Heron signs, for updates to be signed.
    pub(crate) signings: update_signed::Signings,
    /// The secondary zones Heron signs, and their last versions.
    pub(crate) signed_secondaries: Arc<signed_secondary::SignedSecondaries>,
    /// The signed versions of the primary zones Heron signs, kept for a
    /// restart to carry on from.
    pub(crate) signed_copies: signed_copies::SignedCopies,
    /// Zones whose served version holds updates their file does not.
    pub(crate) unwritten: update::Unwritten,
    /// Where the TLS listeners take their certificate from: a reload
    /// puts a renewed one there.
    pub(crate) tls_certificate: Option<Arc<heron_server::tls::CertificateSlot>>,
    /// The query ACLs and blackhole the query processor screens with: a
    /// reload replaces them before it serves the zones it adds.
    pub(crate) query_policy: Arc<heron_server::processor::SharedQueryPolicy>,
    /// The TCP connection limiter, once the listeners are up: a reload
    /// gives it the secondaries exempt from the per-client limit.
    pub(crate) connections: std::sync::OnceLock<Arc<heron_server::tcp::ConnectionLimiter>>,
}

impl Transfers {
    /// The query log's writer, if `[dnstap]` is on.
    pub(crate) fn query_log(&self) -> Option<Arc<dnstap::Writer>> {
        self.query_log.writer()
    }

    /// Journals the zones that changed from `old` to `new`; returns those
    /// whose secondaries should hear of a new serial (new zones too).
    pub(crate) fn journal_changes(&self, old: &Catalog, new: &Catalog) -> Vec<Arc<Zone>> {
        let changed = new.zones().filter(|zone| match old.get(zone.origin()) {
            Some(before) if Arc::ptr_eq(before, zone) => false,
            Some(before) => self.primary.zone_changed(before, zone),
            None => true,
        });
        changed.cloned().collect()
    }

    /// Notifies `zone`'s secondaries now and waits for each to answer
    /// (or not, after the retries): each target with how it went.
    pub(crate) async fn notify_now(&self, zone: &Zone) -> heron_xfr::primary::notify::Outcomes {
        let policy = self.primary.policy(zone.origin());
        if policy.notify.is_empty() {
            return Vec::new();
        }
        let soa = zone.soa();
        let soa = (soa.ttl(), soa.first_rdata().to_vec());
        let mut outcomes = self
            .notifier
            .notify_and_wait(zone.origin(), soa, &policy.notify)
            .await;
        outcomes.sort_by_key(|(addr, _)| *addr);
        outcomes
    }

    pub(crate) fn notify(&self, zones: &[Arc<Zone>]) {
        for zone in zones {
            let policy = self.primary.policy(zone.origin());
            let targets = &policy.notify;
            if !targets.is_empty() {
                let soa = zone.soa();
                self.notifier.notify_all(
                    zone.origin(),
                    (soa.ttl(), soa.first_rdata().to_vec()),
                    targets,
                );
            }
        }
    }
}

/// How long after a reload the heap is given back once more: the old
/// versions' last holders (queries and transfers in flight, the NOTIFYs
/// of the changed zones) let go after the swap's own give-back, and an
/// allocator arena no thread uses then never returns its pages (black-box
/// finding: 75 MB before a reload of 50,000 zones, 123 MB after, until
/// the next reload).
const RELEASE_AFTER_RELOAD: Duration = Duration::from_secs(2);

fn release_later() {
    tokio::spawn(async {
        tokio::time::sleep(RELEASE_AFTER_RELOAD).await;
        crate::background::run("release-memory", memory::release_free_memory).await;
    });
}

/// Reads the configuration file again (if the server has one) for its
/// zones and their transfer settings, re-reads changed and new zone files
/// on a background thread (below the query workers' priority), and swaps
/// the new catalog in; queries in flight finish on the old one. Returns
/// what it did and how long it took.
pub(crate) async fn reload(
    catalog: &SharedCatalog,
    files: &Arc<std::sync::Mutex<ZoneFiles>>,
    transfers: &Arc<Transfers>,
    asked_by: &str,
    selection: Selection,
) -> (Outcome, Duration) {
    match &selection.zones {
        None => tracing::info!("{asked_by}: reloading the configuration and changed zone files"),
        Some(zones) => tracing::info!("{asked_by}: reloading {} zone(s)", zones.len()),
    }
    notify::reloading();
    let whole = selection.zones.is_none();
    if let (true, Some(writer)) = (whole, transfers.query_log()) {
        // A whole reload is what logrotate's postrotate asks for.
        writer.reopen();
    }
    // The rollover driver looks again at what this reload signed.
    rollover::reloaded(selection.zones.as_ref());
    let (catalog, files, xfr) = (catalog.clone(), files.clone(), transfers.clone());
    let started = Instant::now();
    // The reload's thread is in the runtime, so that what it changes may
    // start tasks (a lower `[secondary] concurrency` did, and panicked).
    let runtime = tokio::runtime::Handle::current();
    let work = background::run("reload", move || {
        let _in_runtime = runtime.enter();
        rebuild(&catalog, &files, &xfr, selection)
    });
    let (outcome, changed, swap) = work.await;
    transfers.unwritten.reload_done();
    transfers.notify(&changed);
    drop(changed);
    release_later();
    let took = started.elapsed();
    let changes = match whole && !outcome.config_failed {
        true => format!(" ({})", outcome.configuration_changes()),
        false => String::new(),
    };
    tracing::info!(
        "reload done in {} ms, swapped in {} us: {}{changes}",
        took.as_millis(),
        swap.as_micros(),
        outcome.summary()
    );
    notify::ready();
    // Signings moved keys on, a policy may have changed: new next events.
    rollover::wake();
    (outcome, took)
}

/// Zones added, primary and secondary zones whose transfer settings
/// changed, the parts that wait for a restart, the sections applied
/// whole, and the primary zones whose `dnssec-policy` changed.
type Listed = (
    Vec<Name>,
    Vec<Name>,
    Vec<Name>,
    Vec<&'static str>,
    Vec<&'static str>,
    Vec<Name>,
    Vec<Name>,
);

/// `[secondary]` and the TLS trust it names, for the refresh task.
type SecondarySettings = (crate::config::SecondarySection, TlsClients);

/// After a reload's removals: a consumed catalog that left out a member
/// configured by hand reads its version again (the hand may have let go),
/// and the generated catalogs are made anew (into `next`, a zone that
/// became a catalog replaced), said in `outcome`: one not served before
/// (in `current`) is a zone added, not a catalog changed (black-box
/// finding DJ-5), as its removal is a zone removed.
fn catalogs_after_removals(
    catalogs: Option<&[GeneratedCatalog]>,
    xfr: &Transfers,
    next: &mut Catalog,
    (outcome, current): (&mut Outcome, &Catalog),
) {
    let Some(catalogs) = catalogs else {
        return;
    };
    if let Some(running) = xfr.secondaries.lock().unwrap().as_mut() {
        running.reconsume(next, &xfr.primary);
    }
    let generated = catalog_producer::update_at_reload(catalogs, next);
    let (added, changed): (Vec<Name>, Vec<Name>) = generated
        .into_iter()
        .partition(|z| current.get(z).is_none());
    for zone in added {
        if !outcome.added.contains(&zone) {
            outcome.added.push(zone);
        }
    }
    outcome.generated = changed;
}

/// What the configuration read again changed, in the reload's outcome.
fn listed_in(outcome: &mut Outcome, listed: Listed) {
    (
        outcome.added,
        outcome.changed,
        outcome.changed_secondaries,
        outcome.needs_restart,
        outcome.applied,
        outcome.resigned,
        outcome.made_secondary,
    ) = listed;
    outcome.resigned_files = outcome.resigned.len();
}

/// What a reload's configuration brings besides its zone files.
#[derive(Default)]
struct Reconfiguration {
    removed: Vec<Name>,
    secondaries: Option<(Vec<SecondaryZone>, Vec<CatalogConfig>, SecondarySettings)>,
    catalogs: Option<Vec<GeneratedCatalog>>,
    listed: Listed,
    /// Why `[dnstap]` could not be applied, if it could not.
    dnstap_failed: Option<String>,
    /// The zones whose new settings wait for their updates to be in their
    /// file (`zonefile-sync = "never"`): what each keeps meanwhile.
    held: Vec<String>,
    /// What the reload's answer warns of besides serials.
    warnings: Vec<String>,
}

/// The reload's work, off the runtime: the configuration read again (for
/// a whole reload), the zone files, the secondary zones and catalogs, the
/// journal; then the new catalog swapped in. Returns the outcome, the
/// zones to NOTIFY and how long the swap took.
fn rebuild(
    catalog: &SharedCatalog,
    shared_files: &Mutex<ZoneFiles>,
    xfr: &Transfers,
    selection: Selection,
) -> (Outcome, Vec<Arc<Zone>>, Duration) {
    // Poisoned by a reload that panicked: the next one still runs.
    let _writing = (xfr.catalog_writer.lock()).unwrap_or_else(|e| e.into_inner());
    let current = catalog.load_full();
    let mut files = shared_files.lock().unwrap_or_else(|e| e.into_inner());
    // Named zones are re-read alone; the configuration waits for a
    // whole reload.
    let reread = match selection.zones {
        None => files.reread_config(&|origin: &Name| catalogs_list(xfr, &current, origin)),
        Some(_) => Ok(None),
    };
    let config = match reread {
        Ok(Some(new)) => reconfigure(catalog, xfr, new, &mut files),
        Ok(None) => Reconfiguration::default(),
        Err(errors) => return (Outcome::config_errors(errors), Vec::new(), Duration::ZERO),
    };
    let held = update::held_signed(&current, xfr);
    let loaded_before = update::loaded_at(xfr, &files);
    let (mut next, mut outcome) = files.load_selected(&current, selection.pick(), &held);
    listed_in(&mut outcome, config.listed);
    let resigned = xfr.signed_secondaries.set(files.signed_secondaries());
    if let (Some((wanted, consumed, (section, xot))), Some(running)) =
        (config.secondaries, xfr.secondaries.lock().unwrap().as_mut())
    {
        // Before the zones: those added start with the new settings.
        running.set_settings(&section, xot);
        let configured = |o: &Name| files.configures(o);
        let changes = running.reconfigure(wanted, consumed, &mut next, &xfr.primary, configured);
        xfr.signed_secondaries.forget(&changes.removed);
        outcome.secondaries = changes;
        let resigned_now = secondaries_resigned(&resigned, running, &outcome);
        outcome.resigned.extend(resigned_now);
    }
    let frozen = signing_and_frozen(xfr, &files);
    let marked = maybe_marked(&current, &next, xfr, &files);
    drop(files);
    let signed = (xfr.signed_secondaries).resign(&mut next, selection.zones.as_ref(), &resigned);
    outcome.signed_again = signed.len();
    if let Some(running) = xfr.secondaries.lock().unwrap().as_ref() {
        signed
            .iter()
            .for_each(|zone| running.keep_signed(zone, None));
    }
    let not_taken = update::keep_updates(&current, &mut next, xfr, &held, &frozen);
    let held_again = update::replay_added(&current, &mut next, xfr, shared_files);
    update::files_not_taken(not_taken, &loaded_before, shared_files, &mut outcome);
    remove_zones(xfr, &mut next, &config.removed);
    outcome.removed = config.removed;
    // A zone served again holding updates is said, as a held zone is.
    let held = [config.held, held_again].concat();
    not_applied(&mut outcome, (config.dnstap_failed, config.warnings), held);
    let catalogs = config.catalogs.as_deref();
    catalogs_after_removals(catalogs, xfr, &mut next, (&mut outcome, &current));
    take_frozen_edits(&mut next, marked, xfr);
    update::forget_signing_failures(&current, &next, xfr);
    (outcome.warnings).extend(zone_files::serials_left_behind(&current, &next));
    // Journal first, then swap: an IXFR for the new serial must find
    // its step; then notify, once the new version is served.
    let changed = xfr.journal_changes(&current, &next);
    xfr.signed_copies.keep(&changed);
    // The only moment queries could notice: the new catalog goes in
    // with one atomic store, and queries in flight keep the old one.
    let swapping = Instant::now();
    catalog.store(Arc::new(next));
    let swap = swapping.elapsed();
    drop(current);
    memory::settle(&catalog.load_full());
    (outcome, changed, swap)
}

/// What a reload's configuration could not apply: `[dnstap]` (`dnstap`),
/// and the zones `held` by their updates (the answer says so, not a bare
/// "ok"); the reload fails. Its `warnings` (a TLS certificate kept) go
/// with the answer.
fn not_applied(
    outcome: &mut Outcome,
    (dnstap, warnings): (Option<String>, Vec<String>),
    held: Vec<String>,
) {
    (dnstap.into_iter().chain(held)).for_each(|e| outcome.settings_failed(Some(e)));
    outcome.warnings.extend(warnings);
}

/// Takes from the zone files which zones are signed here and which keep
/// signed copies; returns the files of the zones frozen now, which a
/// thaw may write.
fn signing_and_frozen(xfr: &Transfers, files: &ZoneFiles) -> HashMap<Name, PathBuf> {
    xfr.signings.set(files.signed_files());
    xfr.signed_copies.set(files.signed_copies());
    (xfr.frozen.origins().into_iter())
        .filter_map(|origin| Some((origin.clone(), files.file_of(&origin)?)))
        .collect()
}

/// The zones this reload loads anew whose file may carry a freeze's mark
/// (see [`update::take_frozen_edits`]): those not frozen, and those frozen
/// but not served before (taken out and put back during the freeze).
/// A frozen zone served before is the reload-during-a-freeze's own.
fn maybe_marked(
    current: &Catalog,
    next: &Catalog,
    xfr: &Transfers,
    files: &ZoneFiles,
) -> MaybeMarked {
    let (mut thawed, mut frozen) = (Vec::new(), Vec::new());
    for zone in next.zones() {
        let before = current.get(zone.origin());
        if before.is_some_and(|old| Arc::ptr_eq(old, zone)) {
            continue;
        }
        let origin = zone.origin().clone();
        let Some(file) = files.file_of(&origin) else {
            continue;
        };
        let signed = xfr.signings.get(&origin).is_some();
        let marked = (origin.clone(), file, signed);
        match (xfr.frozen.contains(&origin.to_lowercase()), before) {
            (false, _) => thawed.push(marked),
            (true, None) => frozen.push(marked),
            (true, Some(_)) => {}
        }
    }
    (thawed, frozen)
}

/// [`update::take_frozen_edits`] of the zones [`maybe_marked`] found: the
/// frozen ones stay frozen.
fn take_frozen_edits(next: &mut Catalog, (thawed, frozen): MaybeMarked, xfr: &Transfers) {
    let policy_of = |o: &Name| Some(xfr.primary.policy(o));
    let (_, signed_edits) = update::take_frozen_edits(next, thawed, &policy_of, false);
    update::write_served_serials(next, signed_edits);
    update::take_frozen_edits(next, frozen, &policy_of, true);
}

type MaybeMarked = (Vec<update::Marked>, Vec<update::Marked>);

/// Zones no longer configured: no longer served, their history, NOTIFY
/// targets and counts (their metrics series) forgotten.
fn remove_zones(xfr: &Transfers, next: &mut Catalog, removed: &[Name]) {
    for origin in removed {
        next.remove(origin);
        xfr.primary.forget(origin);
        xfr.zone_stats.forget(origin);
        xfr.notifier.zone_removed(origin);
        // A reload's zone event, filtered with the loads (DF-2).
        tracing::info!(
            target: "heron::reload",
            zone = %origin,
            "zone removed: no longer configured, no longer served"
        );
    }
}

/// Applies what a new configuration says to the running server at once
/// (log levels, keys, transfer policies) and returns the rest for the
/// reload to carry out.
fn reconfigure(
    catalog: &SharedCatalog,
    xfr: &Transfers,
    mut new: Reconfigured,
    files: &mut ZoneFiles,
) -> Reconfiguration {
    let signed_now: std::collections::HashSet<Name> = (files.signed_files().into_iter())
        .map(|(origin, _)| origin.to_lowercase())
        .collect();
    update::move_journals(xfr, &new.policies, |origin| files.file_of(origin));
    update_seen::move_notes(&xfr.primary.policies(), &new.policies);
    let secondaries: std::collections::HashSet<Name> = (new.secondaries.iter())
        .map(|z| z.origin.to_lowercase())
        .collect();
    let leaving = (&signed_now, &new.removed[..], &secondaries);
    let (still_signed, held, warned) =
        update::write_back_leaving(catalog, xfr, &mut new.policies, leaving);
    new.warnings.extend(warned);
    for origin in still_signed {
        if let Some(signing) = xfr.signings.get(&origin) {
            files.keep_signing(&origin, signing);
            new.resigned.retain(|o| *o != origin);
        }
    }
    new.left_for_restart.iter().for_each(|part| {
        tracing::warn!("{part} changed in the configuration: it takes effect at the next restart")
    });
    let (changed, changed_secondaries) = settings_changed(xfr, &new, files);
    let levels_changed = crate::logging::apply_levels(&new.log);
    // The keys first: the policies that follow may name new ones.
    let running = xfr.keys.load();
    let keys_changed = running.len() != new.keys.len()
        || !(running.iter()).all(|k| new.keys.iter().any(|n| n.same_as(k)));
    xfr.keys.replace(Arc::new(new.keys));
    // Before the new zones are served: their transfers and
    // NOTIFYs follow the settings they came with.
    xfr.primary.set_policies(new.policies);
    if let Some(limiter) = xfr.connections.get() {
        limiter.set_unlimited(xfr.primary.transfer_clients());
    }
    // So are their query ACLs: a zone added with a list is never open.
    let query_policy = std::mem::take(&mut new.query_policy);
    xfr.query_policy.replace(query_policy);
    let dnstap_failed = (xfr.query_log.apply(new.dnstap).err())
        .map(|e| format!("[dnstap] not applied (the rest of the configuration was): {e}"));
    let mut applied = new.applied;
    if dnstap_failed.is_some() {
        // Not said to be applied as well (black-box finding).
        applied.retain(|part| *part != "[dnstap]");
    }
    if keys_changed {
        applied.push("[[key]]");
    }
    if levels_changed {
        applied.push("[log] levels");
    }
    if let (Some(running), Some(read)) = (&xfr.tls_certificate, &new.tls_certificate)
        && running.take_from(read)
    {
        tracing::info!("TLS: the certificate read again is another one: new connections get it");
        applied.push("[tls] certificate");
    }
    Reconfiguration {
        dnstap_failed,
        held,
        warnings: new.warnings,
        removed: new.removed,
        secondaries: Some((new.secondaries, new.consumed, (new.secondary, new.xot))),
        catalogs: Some(new.catalogs),
        listed: (
            new.added,
            changed,
            changed_secondaries,
            new.left_for_restart,
            applied,
            new.resigned,
            new.made_secondary,
        ),
    }
}

/// The secondary zones among `resigned` (whose signing a reload changed)
/// that ran before and run still: their `dnssec-policy` changed (those
/// added or removed are said so).
/// Whether a consumed catalog lists `origin` (lower-cased): among the
/// members it took, or in the version of it `served` (one rejected for a
/// member configured by hand, which is read again once the hand lets go:
/// regression hunt BR-1).
fn catalogs_list(xfr: &Transfers, served: &Catalog, origin: &Name) -> bool {
    let running = xfr.secondaries.lock().unwrap_or_else(|e| e.into_inner());
    let Some(running) = running.as_ref() else {
        return false;
    };
    let in_version = |catalog: &Name| {
        let members = served
            .get(catalog)
            .map(|z| heron_xfr::catalog_zone::parse_zone(z));
        members.is_some_and(|m| m.is_ok_and(|m| m.keys().any(|z| z.to_lowercase() == *origin)))
    };
    running.catalogs_list(origin) || running.catalogs().iter().any(in_version)
}

fn secondaries_resigned(
    resigned: &std::collections::HashSet<Name>,
    running: &secondary::Running,
    outcome: &Outcome,
) -> Vec<Name> {
    let changes = &outcome.secondaries;
    let mut names: Vec<Name> = (resigned.iter())
        .filter(|o| running.runs(o) && !changes.added.contains(o) && !changes.removed.contains(o))
        .cloned()
        .collect();
    names.sort_by_key(|o| o.to_string());
    names
}

/// The zones configured before and now, in the same role, whose
/// transfer settings differ: primary zones (those given another file
/// too) and secondary zones.
fn settings_changed(
    xfr: &Transfers,
    new: &Reconfigured,
    files: &ZoneFiles,
) -> (Vec<Name>, Vec<Name>) {
    let wanted: std::collections::HashSet<Name> = (new.secondaries.iter())
        .map(|z| z.origin.to_lowercase())
        .collect();
    let running = xfr.secondaries.lock().unwrap();
    let kept_secondary =
        |o: &Name| wanted.contains(o) && running.as_ref().is_some_and(|r| r.runs(o));
    let kept_primary = |o: &Name| files.configures(o) && !new.added.contains(o);
    let changed = policies_changed(&xfr.primary.policies(), &new.policies, |o| {
        kept_primary(o) || kept_secondary(o)
    });
    let (mut primaries, secondaries): (Vec<Name>, Vec<Name>) =
        changed.into_iter().partition(|o| files.configures(o));
    for origin in &new.refiled {
        if !primaries.contains(origin) {
            primaries.push(origin.clone());
        }
    }
    (primaries, secondaries)
}

/// The zones `still_configured` whose transfer settings (ACLs, NOTIFY
/// targets, journal) differ. A zone with the default settings has no
/// entry.
fn policies_changed(
    before: &HashMap<Name, Arc<ZonePolicy>>,
    now: &HashMap<Name, ZonePolicy>,
    still_configured: impl Fn(&Name) -> bool,
) -> Vec<Name> {
    let closed = ZonePolicy::default();
    let origins: std::collections::HashSet<Name> = (before.keys().chain(now.keys()))
        .map(Name::to_lowercase)
        .collect();
    let mut changed: Vec<Name> = (origins.into_iter())
        .filter(|origin| {
            let old = before.get(origin).map_or(&closed, |p| &**p);
            let new = now.get(origin).unwrap_or(&closed);
            old != new && still_configured(origin)
        })
        .collect();
    changed.sort_by_key(|o| o.to_string());
    changed
}

/// Which zones a reload reads.
#[derive(Default)]
pub(crate) struct Selection {
    /// Only these (lower-cased), and not the configuration; None for all.
    pub(crate) zones: Option<std::collections::HashSet<Name>>,
    /// Read the files even if they look unchanged.
    pub(crate) force: bool,
    /// Sign the signed zones served again from the version served, their
    /// files not read: a signature refresh or a key step, not an operator's
    /// reload.
    pub(crate) from_served: bool,
}

impl Selection {
    fn pick(&self) -> zone_files::Pick<'_> {
        zone_files::Pick {
            only: self.zones.as_ref(),
            force: self.force,
            from_served: self.from_served,
        }
    }
}
