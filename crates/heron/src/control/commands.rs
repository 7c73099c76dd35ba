//! What the control socket's commands do in a running server: each one
//! is done (or has failed) before its response is sent.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use heron_proto::Name;
use heron_server::SharedCatalog;
use heron_server::processor::{Refusal, SharedOrigins};
use heron_server::service::Service;
use heron_server::stats::{
    CLOSE_REASONS, CONNECTION_LIMITS, DROP_REASONS, QTYPE_OTHER, RCODES, TRANSPORTS, qtype_label,
};
use heron_server::tcp::ConnectionLimiter;
use serde_json::{Value, json};

use heron_xfr::primary::notify::Outcome as NotifyOutcome;
use heron_xfr::secondary::refresh::{CheckFailed, CheckResult, Command, ZoneReport};
use tokio::sync::{mpsc, oneshot};

use crate::control::socket::{Request, Response};
use crate::plan::zone_files::ZoneFiles;
use crate::runtime::held_members::{Held, held_member, held_members};
use crate::runtime::{Selection, Transfers, reload};

/// The commands this server answers, for the error that names them.
/// Zones a reload's serial warnings name one by one; the rest are counted.
const WARNINGS_SAID: usize = 10;

const KNOWN: &str = "status, zone-status, reload, reconfigure, retransfer, refresh, notify, stats, dnstap-reopen, freeze, thaw, flush, keys, roll, ds-seen, stop";

/// The kept copies of secondary zones that cannot be written now (a full
/// or read-only disk; tried again every second), of `zones` (every zone's
/// when none is named), as `flush` errors.
fn failing_kept_copies(zones: &[Name]) -> Vec<String> {
    use heron_xfr::secondary::keeper::{failing_copies, failing_copy_of};
    match zones.is_empty() {
        true => (failing_copies().into_iter())
            .map(|(path, why)| format!("kept copy {} not written: {why}", path.display()))
            .collect(),
        false => (zones.iter())
            .filter_map(|z| {
                Some(format!(
                    "{z}: kept copy not written: {}",
                    failing_copy_of(z)?
                ))
            })
            .collect(),
    }
}

/// What `flush` did with one zone.
enum Flushed {
    NotServed,
    /// Its file holds every update it answered: nothing written.
    HoldsAll,
    Written {
        file: std::path::PathBuf,
        serial: u32,
    },
    Failed(String),
}

/// What the commands see of the running server.
pub(crate) struct Controller {
    pub(crate) catalog: SharedCatalog,
    pub(crate) files: Arc<Mutex<ZoneFiles>>,
    pub(crate) transfers: Arc<Transfers>,
    /// The secondary zones, lower-cased; a reload changes them.
    pub(crate) secondaries: SharedOrigins,
    pub(crate) listeners: Vec<SocketAddr>,
    pub(crate) tls_listeners: Vec<SocketAddr>,
    /// `[xdp] listen` entries attached, as INTERFACE@PORT.
    pub(crate) xdp_listeners: Vec<String>,
    /// Interfaces XDP answers on no more (deleted while served).
    pub(crate) xdp_lost: Arc<std::sync::Mutex<Vec<String>>>,
    pub(crate) workers: usize,
    /// Woken by `stop`: the server shuts down as on SIGTERM.
    pub(crate) stop: Arc<tokio::sync::Notify>,
    /// The secondary zones' refresh task, if there are secondary zones.
    pub(crate) refresh: Option<mpsc::UnboundedSender<Command>>,
    /// Where the refusal counters are.
    pub(crate) service: Arc<Service>,
    pub(crate) connections: Arc<ConnectionLimiter>,
}

impl Controller {
    pub(crate) async fn handle(&self, request: Request) -> Response {
        let zones = match parse_zones(&request.zones) {
            Ok(zones) => zones,
            Err(e) => return Response::refused(e),
        };
        match request.command.as_str() {
            "status" => self.status(),
            "zone-status" => self.zone_status(&zones).await,
            "reload" => self.reload(zones, request.force).await,
            "reconfigure" => self.reconfigure().await,
            "retransfer" | "refresh" => match zones.as_slice() {
                [zone] => {
                    let full = request.command == "retransfer";
                    self.check_now(zone, full, request.force).await
                }
                _ => Response::refused(format!("{} takes one zone", request.command)),
            },
            "notify" => match zones.as_slice() {
                [zone] => self.notify(zone).await,
                _ => Response::refused("notify takes one zone"),
            },
            "freeze" | "thaw" => match zones.as_slice() {
                [zone] if request.command == "freeze" => self.freeze(zone).await,
                [zone] => self.thaw(zone).await,
                _ => Response::refused(format!("{} takes one zone", request.command)),
            },
            "flush" => self.flush(zones).await,
            "keys" | "ds-seen" => match zones.as_slice() {
                [zone] if request.command == "keys" => self.keys(zone).await,
                [zone] => self.ds_seen(zone).await,
                _ => Response::refused(format!("{} takes one zone", request.command)),
            },
            "roll" => match (zones.as_slice(), request.key) {
                ([zone], Some(key)) => self.roll(zone, key).await,
                _ => Response::refused("roll takes one zone and a key (id, tag, ksk, zsk or csk)"),
            },
            "stats" => self.stats(request.reset),
            "dnstap-reopen" => self.dnstap_reopen().await,
            "stop" => {
                tracing::info!("control socket: stop asked");
                self.stop.notify_one();
                let pid = std::process::id();
                Response::ok(format!("stopping (pid {pid})"), json!({ "pid": pid }))
            }
            other => Response::refused(format!("unknown command '{other}'; known: {KNOWN}")),
        }
    }

    /// Reopens the dnstap file (after logrotate moved it) and answers once
    /// the new one is there.
    async fn dnstap_reopen(&self) -> Response {
        let Some(writer) = self.transfers.query_log() else {
            return Response::refused("dnstap is off ([dnstap] is not configured)");
        };
        if !writer.writes_a_file() {
            return Response::refused("dnstap writes to a socket: there is no file to reopen");
        }
        let done = tokio::task::spawn_blocking(move || {
            writer.reopen_and_wait(std::time::Duration::from_secs(5))
        })
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
        match done {
            Ok(()) => Response::ok("dnstap file reopened", json!({})),
            Err(why) => Response::error(why),
        }
    }

    fn status(&self) -> Response {
        let catalog = self.catalog.load();
        let secondaries = self.secondaries.load_full();
        let secondary = secondaries.len();
        let served_secondaries = (secondaries.iter())
            .filter(|o| catalog.get(o).is_some())
            .count();
        // Served or not: a failed load leaves an older version or none.
        let file_failed = {
            let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
            files
                .origins()
                .filter(|o| files.last_error(o).is_some())
                .count()
        };
        let data = json!({
            "version": env!("CARGO_PKG_VERSION"),
            "pid": std::process::id(),
            "uptime_seconds": crate::process_start::started().elapsed().as_secs(),
            "zones": {
                "primary": catalog.len() - served_secondaries,
                "primary_file_failed": file_failed,
                "secondary": secondary,
                "secondary_served": served_secondaries,
                "secondary_held_for_ds": held_members().len(),
            },
            "listeners": self.listeners.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            "workers": self.workers,
            "tls": {
                "enabled": !self.tls_listeners.is_empty(),
                "listeners": self.tls_listeners.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            },
            "xdp": {
                "enabled": !self.xdp_listeners.is_empty(),
                "listeners": self.xdp_listeners,
                "lost": *self.xdp_lost.lock().unwrap_or_else(|e| e.into_inner()),
            },
        });
        Response::ok("running", data)
    }

    /// Each zone asked (all when none), or an error naming those unknown.
    async fn zone_status(&self, asked: &[Name]) -> Response {
        let reports = self.secondary_reports().await;
        let report_of: HashMap<&Name, &ZoneReport> =
            reports.iter().map(|r| (&r.origin, r)).collect();
        // A catalog transferred well but rejected by the consumer says so.
        let rejections: HashMap<Name, String> = (self.transfers.secondaries.lock())
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|running| running.catalog_rejections().into_iter().collect())
            .unwrap_or_default();
        let catalog = self.catalog.load();
        let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let mut origins: Vec<Name> = match asked.is_empty() {
            true => self.every_zone(&catalog, &files),
            false => asked.to_vec(),
        };
        origins.sort_by_cached_key(|o| o.to_lowercase().to_string());
        // A zone asked twice is one row (black-box finding DE-10).
        origins.dedup_by(|a, b| a.to_lowercase() == b.to_lowercase());
        let mut rows = Vec::new();
        let mut unknown = Vec::new();
        let secondaries = self.secondaries.load_full();
        for origin in origins {
            let zone = catalog.get(&origin);
            let loaded = files.loaded_at(&origin);
            let secondary = secondaries.contains(&origin);
            let generated = files.generates(&origin);
            if zone.is_none() && loaded.is_none() && !secondary && !generated {
                match held_member(&origin) {
                    Some(held) => rows.push(held_row(&origin, &held)),
                    None => unknown.push(format!("unknown zone {origin}: not configured")),
                }
                continue;
            }
            let mut row = json!({
                "zone": origin.to_string(),
                "role": match (secondary, generated) {
                    (true, _) => "secondary",
                    (false, true) => "generated catalog",
                    (false, false) => "primary",
                },
                "serial": zone.map(|z| z.serial()),
                "served": zone.is_some(),
                "loaded_at": loaded.flatten().map(unix_seconds),
            });
            if let Some(why) = files.last_error(&origin) {
                row["last_error"] = json!(why);
            }
            self.update_state_fields(&mut row, &origin);
            crate::runtime::rollover::zone_status_fields(&mut row, &origin);
            if let Some(report) = report_of.get(&origin) {
                secondary_fields(&mut row, report);
                consumed_catalog_fields(&mut row, &origin, &rejections);
            }
            // A version received that could not be signed: the one served
            // is older (black-box finding: zone-status said nothing).
            if let Some(why) = self.transfers.signed_secondaries.failure(&origin) {
                row["last_error"] = json!(format!("cannot sign the version received: {why}"));
                row["signing_failed"] = json!(true);
            }
            rows.push(row);
        }
        if !unknown.is_empty() {
            // The zones that are known are shown all the same.
            return Response {
                errors: unknown,
                data: Value::Array(rows),
                ..Response::refused("some zones are not known")
            };
        }
        Response::ok(format!("{} zones", rows.len()), Value::Array(rows))
    }

    /// Every zone zone-status knows of (lower-cased): served, secondary,
    /// from a file that never loaded, or a catalog member held back.
    fn every_zone(&self, catalog: &heron_zone::Catalog, files: &ZoneFiles) -> Vec<Name> {
        let served = catalog.zones().map(|z| z.origin().to_lowercase());
        let mut all: HashSet<Name> = served.collect();
        all.extend(self.secondaries.load_full().iter().cloned());
        // A zone whose file never loaded is not served, but is there.
        all.extend(files.origins().map(Name::to_lowercase));
        all.extend(held_members().into_iter().map(|(origin, _)| origin));
        all.into_iter().collect()
    }

    /// A zone's journal file or zone file that cannot be written now (a
    /// full or read-only disk), as `kept_copy_error` is a secondary's
    /// kept copy: its updates are answered SERVFAIL meanwhile; and a
    /// freeze, forgotten after a hand edit, that refuses every update
    /// (black-box findings: zone-status said nothing of either).
    fn update_state_fields(&self, row: &mut Value, origin: &Name) {
        if self.transfers.frozen.contains(&origin.to_lowercase()) {
            row["frozen"] = json!(true);
        }
        if let Some(why) = self.transfers.primary.journal_error_of(origin) {
            row["journal_error"] = json!(why);
        }
        if let Some(why) = self.transfers.unwritten.write_error(origin) {
            row["write_back_error"] = json!(why);
        }
        if let Some(why) = crate::runtime::update::signing_error_of(origin) {
            row["update_signing_error"] = json!(why);
        }
        // A signed primary's kept signed copy (`FILE.signed`), as a
        // secondary's kept copy is said (regression hunt BR-15: the
        // metric counted it, zone-status said nothing).
        if let Some(why) = heron_xfr::secondary::keeper::failing_copy_of(origin) {
            row["kept_copy_error"] = json!(why);
        }
        if let Some(why) = crate::plan::catalog_producer::write_error_of(origin) {
            row["write_back_error"] = json!(why);
        }
    }

    /// What the refresh task says of every secondary zone (none if there
    /// is no such task, or it is gone).
    pub(crate) async fn secondary_reports(&self) -> Vec<ZoneReport> {
        let Some(refresh) = &self.refresh else {
            return Vec::new();
        };
        let (reply, reports) = oneshot::channel();
        if refresh.send(Command::Report(reply)).is_err() {
            return Vec::new();
        }
        reports.await.unwrap_or_default()
    }

    /// `refresh` (an SOA check, and a transfer if newer) or, with `full`,
    /// `retransfer` (AXFR) of `zone`, waiting until it is done.
    async fn check_now(&self, zone: &Name, full: bool, force: bool) -> Response {
        let (Some(refresh), true) = (&self.refresh, self.secondaries.load_full().contains(zone))
        else {
            return Response::refused(match self.catalog.load().get(zone) {
                Some(_) => format!("{zone} is not a secondary zone: this server is its primary"),
                None => self.not_served(zone, "nothing to check"),
            });
        };
        let (done, result) = oneshot::channel();
        let command = Command::CheckNow {
            origin: zone.clone(),
            full,
            force,
            done,
        };
        if refresh.send(command).is_err() {
            return Response::error("the refresh task has stopped");
        }
        let what = if full { "transferred" } else { "checked" };
        let result: CheckResult = result.await.unwrap_or_else(|_| {
            let why = format!("{zone} was removed meanwhile");
            Err(CheckFailed::because(why))
        });
        // A zone signed here serves serials of its own: both are said
        // (black-box finding AV-8: the primary's read as the one served).
        let signed_here = (self.files.lock().unwrap_or_else(|e| e.into_inner()))
            .signed_secondaries()
            .iter()
            .any(|(o, _)| o.to_lowercase() == *zone);
        let served = (self.catalog.load().get(zone).map(|z| z.serial())).filter(|_| signed_here);
        match result {
            Ok(serial) => Response::ok(
                match (serial, served) {
                    (Some(s), Some(ours)) if s != ours => format!(
                        "{zone} {what}: serial {s} from the primary, served signed as {ours}"
                    ),
                    _ => format!(
                        "{zone} {what}: serial {}",
                        serial.map_or("none".into(), |s| s.to_string())
                    ),
                },
                json!({ "zone": zone.to_string(), "serial": serial, "served_serial": served }),
            ),
            Err(failed) => {
                let said = match failed.newer {
                    // The primary answered: checked, not brought in.
                    Some(serial) if !full => {
                        format!("{zone}: checked, but serial {serial} not transferred")
                    }
                    _ => format!("{zone}: not {what}"),
                };
                Response {
                    errors: vec![failed.why],
                    ..Response::error(said)
                }
            }
        }
    }

    /// Why a zone holding updates (`allow-update` removed under
    /// `zonefile-sync = "never"`) cannot be frozen, and its way out.
    fn why_a_held_zone_is_not_frozen(
        &self,
        zone: &Name,
        policy: &heron_xfr::primary::ZonePolicy,
    ) -> String {
        if !self.transfers.unwritten.contains(&zone.to_lowercase()) {
            // Its journal set aside at the start (it did not lead on from
            // the file): the file does not hold them (black-box finding
            // AS-8: it was said to).
            if let Some(journal) = policy.journal_path().filter(|j| !j.exists()) {
                return format!(
                    "{zone} takes no updates; the updates its journal held could not be applied to its file at the start and were set aside beside {} (.unapplied)",
                    journal.display()
                );
            }
            // Flushed: the file holds them (regression hunt AR-10: the
            // flush was asked for again).
            return format!(
                "{zone} takes no updates: its file holds the updates it answered now; after heron ctl reconfigure its file is read again as edited"
            );
        }
        // Its way out is the flush (regression hunt AO-7).
        format!(
            "{zone} takes no updates: it holds updates its file lacks (allow-update removed under zonefile-sync = \"never\"); heron ctl flush {zone} writes them to its file, and after heron ctl reconfigure its file is read again as edited"
        )
    }

    /// Stops `zone`'s updates (refused until thawed) and writes it to its
    /// file as served now, for editing by hand.
    async fn freeze(&self, zone: &Name) -> Response {
        let policy = self.transfers.primary.policy(zone);
        let file = self
            .files
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .file_of(zone);
        let (Some(file), true) = (file, self.catalog.load().get(zone).is_some()) else {
            // Served, no file of its own (black-box finding: a secondary
            // was called "not a zone of this server").
            if self.secondaries.load().contains(&zone.to_lowercase()) {
                return Response::refused(format!(
                    "{zone} is a secondary zone: it takes no updates here, its primary's are transferred in"
                ));
            }
            if self.generates(zone) {
                return Response::refused(format!(
                    "{zone} is a catalog generated here: it takes no updates, the configuration makes it"
                ));
            }
            return Response::refused(self.not_served(zone, "nothing to freeze"));
        };
        if policy.holds_updates {
            return Response::refused(self.why_a_held_zone_is_not_frozen(zone, &policy));
        }
        if !policy.takes_updates() {
            return Response::refused(format!("{zone} takes no updates"));
        }
        if let Some(other) = crate::runtime::freeze_mark::foreign(&file) {
            let other = other.display();
            let why =
                format!("{zone} not frozen: {other} is not Heron's freeze mark; move it away");
            return Response::refused(why);
        }
        let served = match self.freeze_point(zone).await {
            Ok(served) => served,
            Err(why) => return Response::refused(why),
        };
        let serial = served.serial();
        let signed_here = self.transfers.signings.get(zone).is_some();
        let version = served.clone();
        let written = crate::runtime::update::write_now(served, file.clone(), signed_here).await;
        // Marked, so that a restart before the thaw tells an edit.
        let marked = file.clone();
        // Each error names the file it is about (regression hunt: the
        // mark's was said to be the zone file's).
        let written = match written {
            Ok(()) => tokio::task::spawn_blocking(move || {
                let mark = crate::runtime::freeze_mark::mark_of(&marked);
                (crate::runtime::freeze_mark::mark(&marked, serial))
                    .map_err(|e| format!("{}: {e}", mark.display()))
            })
            .await
            .unwrap_or_else(|_| Err("the writer failed".into())),
            Err(e) => Err(format!("{}: {e}", file.display())),
        };
        if written.is_ok() {
            let primary = &self.transfers.primary;
            (self.transfers.unwritten).written(&self.catalog, &version, primary);
        }
        if let Err(e) = written {
            self.transfers.frozen.thaw(&zone.to_lowercase());
            let why = format!("{zone} not frozen: cannot write {e}");
            return Response::error(why);
        }
        let shown = file.display();
        tracing::info!(zone = %zone, "zone {zone} frozen: updates refused, written to {shown}");
        Response::ok(
            format!(
                "{zone} frozen at serial {serial}: updates are refused; edit {shown} and run heron ctl thaw {zone}"
            ),
            json!({ "zone": zone.to_string(), "serial": serial, "file": shown.to_string() }),
        )
    }

    /// Freezes `zone` between update batches (they hold the catalog's
    /// writer lock from admission to the version served): a batch under
    /// way when the freeze came is served first, and written with it
    /// (black-box finding: an update answered as the freeze came was left
    /// out of the file, and the thaw took it away). The version served
    /// then, or why not.
    async fn freeze_point(&self, zone: &Name) -> Result<Arc<heron_zone::Zone>, String> {
        let (transfers, catalog, zone) =
            (self.transfers.clone(), self.catalog.clone(), zone.clone());
        let point = tokio::task::spawn_blocking(move || {
            let _writing = (transfers.catalog_writer.lock()).unwrap_or_else(|e| e.into_inner());
            if !transfers.frozen.freeze(&zone) {
                return Err(format!("{zone} is frozen already"));
            }
            catalog.load().get(&zone).cloned().ok_or_else(|| {
                transfers.frozen.thaw(&zone.to_lowercase());
                format!("{zone} is not served any more")
            })
        });
        point
            .await
            .unwrap_or_else(|_| Err("the freeze failed".into()))
    }

    /// Writes `zones` (none named: every zone whose file lacks updates)
    /// to their files as served now; updates go on being taken.
    async fn flush(&self, zones: Vec<Name>) -> Response {
        let catalog = self.catalog.load();
        if let Some(zone) = zones.iter().find(|z| catalog.get(z).is_none()) {
            // Nothing written when one named is wrong.
            return Response::refused(self.not_served(zone, "nothing written"));
        }
        // Kept copies that cannot be written: every one, or those of the
        // zones named (not another zone's; regression hunt).
        let failing = failing_kept_copies(&zones);
        let targets = match zones.is_empty() {
            true => self.transfers.unwritten.origins(),
            false => zones,
        };
        let (mut lines, mut errors, mut rows) = (Vec::new(), failing, Vec::new());
        for zone in &targets {
            match self.flush_one(zone).await {
                // Served, with no zone file of its own: a secondary's
                // copy is written at each transfer (black-box finding:
                // it was called "not a zone of this server").
                Flushed::NotServed if self.secondaries.load().contains(&zone.to_lowercase()) => {
                    lines.push(format!(
                        "{zone}: a secondary zone, its kept copy is written at each transfer"
                    ))
                }
                Flushed::NotServed if self.generates(zone) => lines.push(format!(
                    "{zone}: a catalog generated here, written at each change"
                )),
                Flushed::NotServed => {
                    return Response::refused(self.not_served(zone, "nothing written"));
                }
                Flushed::Failed(why) => errors.push(why),
                Flushed::Written { file, serial } => {
                    lines.push(format!(
                        "{zone} written to {} (serial {serial})",
                        file.display()
                    ));
                    rows.push(json!({ "zone": zone.to_string(), "file": file.display().to_string(), "serial": serial }));
                }
                Flushed::HoldsAll => lines.push(format!("{zone}: its file holds what is served")),
            }
        }
        let message = match (lines.is_empty(), errors.is_empty()) {
            (true, true) => "no zone's file lacks updates: nothing to write".to_string(),
            (true, false) => "not written".to_string(),
            (false, _) => lines.join("; "),
        };
        let data = json!({ "written": rows });
        match errors.is_empty() {
            true => Response::ok(message, data),
            false => Response {
                errors,
                data,
                ..Response::error(message)
            },
        }
    }

    /// Whether `zone` is a catalog generated here.
    fn generates(&self, zone: &Name) -> bool {
        let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        files.generates(&zone.to_lowercase())
    }

    /// Writes `zone` to its file if the file lacks updates it answered,
    /// or is gone (removed while the zone was frozen, say: black-box
    /// finding, it was said to hold what is served).
    async fn flush_one(&self, zone: &Name) -> Flushed {
        let (file, sharing) = {
            let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
            (files.file_of(zone), files.sharing_the_file_of(zone))
        };
        let (Some(file), Some(served)) = (file, self.catalog.load().get(zone).cloned()) else {
            return Flushed::NotServed;
        };

        let gone = matches!(std::fs::symlink_metadata(&file), Err(e) if e.kind() == std::io::ErrorKind::NotFound);
        if !gone && !self.transfers.unwritten.contains(zone) {
            return Flushed::HoldsAll;
        }
        // Another zone reads that file: written with this zone's records,
        // it would lose the other at its next load (regression hunt: a
        // zone holding updates, told to flush, did so).
        if let Some(other) = sharing.first() {
            return Flushed::Failed(format!(
                "{zone}: not written: zone {other} is read from {} too, which this zone's records would replace; give {zone} a file of its own",
                file.display()
            ));
        }
        let signed_here = self.transfers.signings.get(zone).is_some();
        let serial = served.serial();
        let version = served.clone();
        match crate::runtime::update::write_now(served, file.clone(), signed_here).await {
            Ok(()) => {
                let primary = &self.transfers.primary;
                (self.transfers.unwritten).written(&self.catalog, &version, primary);
                let journal = (primary.policy(zone).journal_file.clone())
                    .unwrap_or_else(|| heron_xfr::journal::file::path_for(&file));
                crate::runtime::update::unmark_held(&journal);
                tracing::info!(zone = %zone, "zone {zone} flushed: written to {} (serial {serial})", file.display());
                Flushed::Written { file, serial }
            }
            Err(e) => Flushed::Failed(format!("{zone}: cannot write {}: {e}", file.display())),
        }
    }

    /// Reads `zone`'s file again (its edits merged, the serial moved on)
    /// and takes updates again.
    async fn thaw(&self, zone: &Name) -> Response {
        if !self.transfers.frozen.contains(&zone.to_lowercase()) {
            return Response::refused(format!("{zone} is not frozen"));
        }
        use crate::runtime::freeze_mark;
        let file = (self.files.lock().unwrap_or_else(|e| e.into_inner())).file_of(zone);
        // The mark moved aside first: one that cannot be is said before
        // the edit is taken, the zone left as frozen (regression hunt
        // AW-2: the edit was taken, the mark left at the old serial).
        if let Err(why) = file.as_deref().map_or(Ok(()), freeze_mark::set_aside) {
            return Response::error(format!(
                "{zone} stays frozen, its edit not taken: {why}; make it removable and thaw again"
            ));
        }
        let reloaded = self.reload(vec![zone.clone()], true).await;
        if let Some(file) = &file {
            freeze_mark::end_thaw(file, reloaded.ok);
        }
        // An edit that did not load (or whose next serial could not be
        // written) stays in the file: taking updates again would have the
        // next write-back replace it with the zone served (BIND keeps such
        // a zone frozen too).
        if !reloaded.ok {
            return Response {
                message: format!(
                    "{zone} stays frozen: its edited file was not taken, and updates would have it written over; fix what the errors say and thaw again; {}",
                    reloaded.message
                ),
                ..reloaded
            };
        }
        // The mark goes before updates are taken: one left behind them
        // would have a start take the zone as frozen then (black-box
        // finding AS-12); the reload may have renewed it (at the serial
        // now served, so a zone left frozen by it stays consistent).
        let unmarked = file.map_or(Ok(()), |f| freeze_mark::try_unmark(&f));
        if let Err(why) = unmarked {
            return Response::error(format!(
                "{zone} stays frozen: {why}; remove it and thaw again"
            ));
        }
        self.transfers.frozen.thaw(&zone.to_lowercase());
        tracing::info!(zone = %zone, "zone {zone} thawed: updates taken again");
        Response {
            message: format!(
                "{zone} thawed: updates are taken again; {}",
                reloaded.message
            ),
            ..reloaded
        }
    }

    /// Sends NOTIFY for `zone` to its secondaries and waits for each.
    async fn notify(&self, zone: &Name) -> Response {
        let Some(served) = self.catalog.load().get(zone).cloned() else {
            return Response::refused(self.not_served(zone, "nothing to NOTIFY"));
        };
        let outcomes = self.transfers.notify_now(&served).await;
        if outcomes.is_empty() {
            return Response::refused(format!("{zone} has no notify targets configured"));
        }
        let mut errors = Vec::new();
        let rows: Vec<Value> = outcomes
            .iter()
            .map(|(addr, outcome)| {
                let (acknowledged, text) = match outcome {
                    NotifyOutcome::Answered(rcode) if rcode.0 == 0 => (true, "NOERROR".into()),
                    NotifyOutcome::Answered(rcode) => (false, format!("answered {rcode}")),
                    NotifyOutcome::NoAnswer => (false, "no answer".into()),
                    NotifyOutcome::Failed(why) => (false, why.clone()),
                    NotifyOutcome::ZoneRemoved => (false, "zone removed".into()),
                };
                if !acknowledged {
                    errors.push(format!("{addr}: {text}"));
                }
                json!({ "target": addr.to_string(), "acknowledged": acknowledged, "result": text })
            })
            .collect();
        let sent = format!(
            "NOTIFY for {zone} serial {}: {} of {} acknowledged",
            served.serial(),
            rows.len() - errors.len(),
            rows.len()
        );
        Response {
            ok: errors.is_empty(),
            errors,
            ..Response::ok(sent, Value::Array(rows))
        }
    }

    /// The counters there are, since the last reset; with `reset`, start
    /// again from zero (the Prometheus endpoint's counters go on).
    fn stats(&self, reset: bool) -> Response {
        let counts = self.service.refusal_counts(reset);
        let refusals = named(Refusal::KIND_NAMES.iter().zip(counts), true);
        let totals = self.service.stats.since_reset(reset);
        let queries = named(
            TRANSPORTS
                .iter()
                .zip(totals.queries.map(|row| row.iter().sum())),
            true,
        );
        let by_type = (0..=QTYPE_OTHER).map(|q| {
            let n: u64 = totals.queries.iter().map(|row| row[q]).sum();
            (qtype_label(q), n)
        });
        let by_type = named(by_type, false);
        let responses = named(RCODES.iter().zip(totals.responses), false);
        let accepted = named(TRANSPORTS.iter().zip(totals.accepted).skip(1).take(2), true);
        let refused = named(
            CONNECTION_LIMITS.iter().zip(totals.refused_connections),
            true,
        );
        let mut data = json!({
            "refused": refusals,
            "queries": queries,
            "queries_by_type": by_type,
            "responses": responses,
            "responses_truncated": totals.truncated,
            "tcp_connections_open": self.connections.open_connections(),
            "tcp_connections_accepted": accepted,
            "tcp_connections_refused": refused,
            "tcp_idle_connections_shed": totals.shed,
            "tcp_busy_connections_shed": totals.shed_busy,
            "tcp_connections_closed": named(CLOSE_REASONS.iter().zip(totals.closed), true),
            "udp_datagrams_dropped": named(DROP_REASONS.iter().zip(totals.dropped), true),
            "reset": reset,
        });
        // Totals since the start: `--reset` leaves them.
        if let Some(tap) = self.service.processor.tap() {
            let t = tap.totals();
            data["dnstap"] = json!({
                "written": t.written,
                "dropped": t.dropped,
                "queued": t.queued,
                "queued_bytes": t.queued_bytes,
            });
        }
        let message = if reset {
            "counters read and reset"
        } else {
            "counters"
        };
        Response::ok(message, data)
    }

    async fn reload(&self, zones: Vec<Name>, force: bool) -> Response {
        let selection = if zones.is_empty() {
            Selection {
                zones: None,
                force,
                from_served: false,
            }
        } else {
            if let Err(errors) = self.reloadable(&zones) {
                // Refused without trying, as for any unknown zone (exit 4).
                return Response {
                    errors,
                    ..Response::refused("nothing reloaded")
                };
            }
            Selection {
                zones: Some(zones.into_iter().collect()),
                force,
                from_served: false,
            }
        };
        let asked_by = "control socket";
        let (outcome, took) = reload(
            &self.catalog,
            &self.files,
            &self.transfers,
            asked_by,
            selection,
        )
        .await;
        let mut summary = format!("reloaded in {} ms: {}", took.as_millis(), outcome.summary());
        // What a whole reload applied besides zones (a renewed TLS
        // certificate, keys, levels): a deploy hook runs `heron reload`.
        if !outcome.applied.is_empty() {
            summary.push_str(&format!("; applied: {}", outcome.applied.join(", ")));
        }
        if !outcome.needs_restart.is_empty() {
            let parts = outcome.needs_restart.join(", ");
            summary.push_str(&format!("; needs restart: {parts}"));
        }
        say_warnings(&mut summary, &outcome.warnings);
        let data = json!({
            "loaded": outcome.loaded,
            "unchanged": outcome.unchanged,
            "failed": outcome.failed,
            "still_failing": outcome.still_failing,
            "signed_again": outcome.signed_again,
            "removed": outcome.removed.len(),
            "warnings": outcome.warnings,
            "milliseconds": took.as_millis() as u64,
        });
        Response {
            ok: outcome.is_ok(),
            errors: outcome.errors,
            ..Response::ok(summary, data)
        }
    }

    /// Reads the configuration file again and applies it (a whole
    /// reload, as SIGHUP), then says what changed: zones added, removed
    /// and changed by name, and the parts that wait for a restart.
    async fn reconfigure(&self) -> Response {
        if !self
            .files
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .has_config()
        {
            return Response::error(
                "the server was started without a configuration file: nothing to read again",
            );
        }
        let (outcome, took) = reload(
            &self.catalog,
            &self.files,
            &self.transfers,
            "control socket (reconfigure)",
            Selection::default(),
        )
        .await;
        if outcome.config_failed {
            let message = outcome.summary();
            return Response {
                errors: outcome.errors,
                ..Response::error(message)
            };
        }
        let names = |zones: &[Name]| {
            let mut names: Vec<String> = zones.iter().map(Name::to_string).collect();
            names.sort();
            names
        };
        let secondaries = &outcome.secondaries;
        let mut secondaries_changed = names(&secondaries.repointed);
        secondaries_changed.extend(names(&outcome.changed_secondaries));
        secondaries_changed.sort();
        secondaries_changed.dedup();
        let data = json!({
            "added": { "primary": names(&outcome.added), "secondary": names(&secondaries.added) },
            "removed": {
                "primary": names(&[&outcome.removed[..], &outcome.made_secondary].concat()),
                "secondary": names(&secondaries.removed),
            },
            "changed": { "primary": names(&outcome.changed), "secondary": secondaries_changed },
            "dnssec_policy_changed": names(&outcome.resigned),
            "zone_files_read": outcome.loaded,
            "failed": outcome.failed,
            "still_failing": outcome.still_failing,
            "needs_restart": outcome.needs_restart,
            "warnings": outcome.warnings,
            "milliseconds": took.as_millis() as u64,
        });
        let mut said = outcome.configuration_changes();
        say_warnings(&mut said, &outcome.warnings);
        Response {
            ok: outcome.is_ok(),
            errors: outcome.errors.clone(),
            ..Response::ok(said, data)
        }
    }

    /// Why `zone` is not served: not configured, or configured and not
    /// served now (a secondary expired or never transferred, a file that
    /// never loaded; black-box finding AV-2: an expired zone was said to
    /// be no zone of this server).
    fn not_served(&self, zone: &Name, so: &str) -> String {
        let configured = self.secondaries.load_full().contains(zone)
            || (self.files.lock().unwrap_or_else(|e| e.into_inner()))
                .file_of(zone)
                .is_some();
        match configured {
            true => format!(
                "{zone} is not served now (expired, or never loaded or transferred; see heron ctl zone-status {zone}): {so}"
            ),
            false => format!("{zone} is not a zone of this server"),
        }
    }

    /// Every zone named has a file to read: not unknown, not a secondary.
    fn reloadable(&self, zones: &[Name]) -> Result<(), Vec<String>> {
        let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let secondaries = self.secondaries.load_full();
        // A secondary zone signed here is signed again from the version
        // last received.
        let signed_here = |origin: &Name| {
            (files.signed_secondaries().iter()).any(|(o, _)| o.to_lowercase() == *origin)
        };
        let errors: Vec<String> = zones
            .iter()
            .filter_map(|origin| {
                if signed_here(origin) {
                    None
                } else if secondaries.contains(origin) {
                    Some(format!(
                        "{origin} is a secondary zone: it has no file to reload"
                    ))
                } else if files.generates(origin) {
                    Some(format!(
                        "{origin} is a generated catalog: a reload of the configuration updates it"
                    ))
                } else if files.loaded_at(origin).is_none() {
                    Some(format!("unknown zone {origin}: not configured"))
                } else {
                    None
                }
            })
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

/// A reload's warnings, a `warning:` line each after `summary` (the
/// first [`WARNINGS_SAID`]; the rest counted).
fn say_warnings(summary: &mut String, warnings: &[String]) {
    for warning in warnings.iter().take(WARNINGS_SAID) {
        summary.push_str(&format!("\nwarning: {warning}"));
    }
    if warnings.len() > WARNINGS_SAID {
        let more = warnings.len() - WARNINGS_SAID;
        summary.push_str(&format!("\nwarning: {more} more (in the log and --json)"));
    }
}

/// A JSON object of counters by name; zeros left out unless `all`.
fn named(
    counts: impl IntoIterator<Item = (impl ToString, u64)>,
    all: bool,
) -> serde_json::Map<String, Value> {
    (counts.into_iter())
        .filter(|(_, n)| all || *n > 0)
        .map(|(name, n)| (name.to_string(), json!(n)))
        .collect()
}

/// The zone names of a request, lower-cased, or what is wrong with one.
fn parse_zones(names: &[String]) -> Result<Vec<Name>, String> {
    names
        .iter()
        .map(|n| {
            Name::parse(n)
                .map(|name| name.to_lowercase())
                .map_err(|e| format!("zone name '{n}': {e}"))
        })
        .collect()
}

/// A consumed catalog's newest version rejected, and the members it lists
/// that are held back for their DS, in its zone-status row.
fn consumed_catalog_fields(row: &mut Value, origin: &Name, rejections: &HashMap<Name, String>) {
    if let Some(why) = rejections.get(origin) {
        row["last_error"] = json!(why);
        row["catalog_rejected"] = json!(true);
    }
    let held: Vec<String> = (held_members().into_iter())
        .filter(|(_, held)| (held.catalog.as_ref()).is_some_and(|c| c.to_lowercase() == *origin))
        .map(|(member, _)| member.to_string())
        .collect();
    if !held.is_empty() {
        row["members_held_for_ds"] = json!(held);
    }
}

/// The `zone-status` row of a catalog member held back for its DS: known,
/// listed, not served, and why (black-box finding BS-9: "not configured").
fn held_row(origin: &Name, held: &Held) -> Value {
    json!({
        "zone": origin.to_string(),
        "role": "secondary",
        "catalog": held.catalog.as_ref().map(Name::to_string),
        "serial": null,
        "served": false,
        "loaded_at": null,
        "held_for_ds": true,
        "last_error": held.said(),
    })
}

/// The refresh task's view of a secondary zone, added to its row.
fn secondary_fields(row: &mut Value, report: &ZoneReport) {
    let primaries: Vec<Value> = (report.primaries.iter())
        .map(|p| {
            json!({
                "address": p.addr.to_string(),
                "tsig_key": p.key.as_ref().map(Name::to_string),
                "source": p.source.map(|s| s.to_string()),
                "reachable": p.reachable,
                "backoff_until": p.backoff_until.map(unix_seconds),
                "last_error": p.last_error,
            })
        })
        .collect();
    let fields = json!({
        "catalog": report.catalog.as_ref().map(Name::to_string),
        "transferred_at": report.transferred_at.map(unix_seconds),
        "checked_at": report.checked_at.map(unix_seconds),
        "primary_serial": report.primary_serial,
        "next_refresh": report.next_check.map(unix_seconds),
        // Under way now: a transfer that takes a while is no primary down
        // (black-box finding BB-2: nothing said it was running).
        "checking": report.checking,
        "expire_at": report.expire_at.map(unix_seconds),
        "failures": report.failures,
        "last_error": report.last_error,
        // A kept copy the disk refuses: a restart would serve the older
        // copy (regression hunt: zone-status said nothing).
        "kept_copy_error": heron_xfr::secondary::keeper::failing_copy_of(&report.origin),
        "primaries": primaries,
    });
    if let (Value::Object(row), Value::Object(fields)) = (row, fields) {
        row.extend(fields);
    }
}

fn unix_seconds(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
