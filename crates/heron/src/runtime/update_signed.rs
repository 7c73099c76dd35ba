//! Dynamic updates to zones Heron signs (`dnssec-policy`).
//!
//! An update is applied to the signed version served, as to any zone;
//! the result is then signed again incrementally, once per batch
//! ([`crate::plan::signing::sign_change`]): only the changed RRsets, the
//! NSEC or NSEC3 records of the names changed and of their predecessors,
//! and the SOA get new signatures, and nothing walks the whole zone (a
//! change that needs a whole signing, such as keys that moved on, gets
//! [`crate::plan::signing::sign_loaded`], which keeps the signatures of
//! RRsets that did not change). The signed version is the one served, journaled and
//! sent by IXFR (its step carries the changed RRSIG, NSEC and NSEC3
//! records).
//!
//! Signing a zone file again gives it a serial of its own (past the one
//! served), so at a restart the journal's steps are not applied by serial
//! as for an unsigned zone: what they changed (the signer's records left
//! out) is carried over to the zone as signed from its file, and the
//! zone signed again, from the signed version kept before the restart
//! (`FILE.signed`, [`crate::runtime::signed_copies`]) when there is one.
//! What was carried is kept in `FILE.jnl.carried` (written and synced),
//! so no restart loses an answered update; the journal goes on from the
//! version kept (or starts over from the new version without one).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use heron_proto::{Name, RType};
use heron_xfr::journal::file::write_file;
use heron_xfr::journal::files::all_steps;
use heron_xfr::primary::ZonePolicy;
use heron_xfr::update::is_dnssec_type;
use heron_zone::diff::{DiffRecord, ZoneDiff, diff};
use heron_zone::{Catalog, Zone};

use crate::config::dnssec::Signing;
use crate::plan::signing::{sign_change, sign_loaded};

/// The zones Heron signs and how, as configured now (lower-cased
/// origins); replaced at each reload.
#[derive(Default)]
pub(crate) struct Signings(RwLock<HashMap<Name, Arc<Signing>>>);

impl Signings {
    pub(crate) fn set(&self, signed: Vec<(Name, Arc<Signing>)>) {
        let map = signed
            .into_iter()
            .map(|(origin, s)| (origin.to_lowercase(), s))
            .collect();
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = map;
    }

    /// The zones signed here, lower-cased.
    pub(crate) fn origins(&self) -> Vec<Name> {
        let map = self.0.read().unwrap_or_else(|e| e.into_inner());
        map.keys().cloned().collect()
    }

    pub(crate) fn get(&self, origin: &Name) -> Option<Arc<Signing>> {
        let map = self.0.read().unwrap_or_else(|e| e.into_inner());
        map.get(&origin.to_lowercase()).cloned()
    }
}

/// `updated` (the served version `served` with updates applied, its
/// signatures stale) signed again, only what changed signed anew
/// ([`sign_change`], or a whole signing that keeps the signatures of what
/// did not change when the change needs one); with the journal's step
/// from `served` to it.
/// `change` is `diff(served, updated)` when the caller has it (the
/// batch's net change); else it is worked out here.
pub(crate) fn sign_update(
    served: &Zone,
    updated: &Zone,
    change: Option<ZoneDiff>,
    signing: &Signing,
) -> Result<(Zone, ZoneDiff), String> {
    let change = change.unwrap_or_else(|| diff(served, updated));
    match sign_change(served, updated, &change, (signing, false)) {
        // The step served: the updates' change, then the signer's.
        Ok(Some((signed, signer_step))) => Ok((signed, change.then(signer_step))),
        Ok(None) => {
            let signed = sign_loaded(updated, Some(served), signing).map_err(|e| e.join("; "))?;
            let step = diff(served, &signed);
            Ok((signed, step))
        }
        Err(e) => Err(e.join("; ")),
    }
}

/// At a reload, the updated signed zone `old` stays served as it is (its
/// file is taken only between `heron ctl freeze` and `thaw`); signed
/// again if a signature is due for refresh before the next check, or
/// `keys_changed` (the file signed now has other keys). None when it
/// stays as it is.
pub(crate) fn refresh_kept(
    old: &Zone,
    signing: &Signing,
    keys_changed: bool,
) -> Option<Result<Zone, String>> {
    let now = heron_proto::time::unix_now();
    let within = crate::plan::signing::REFRESH_CHECK.as_secs() as u32;
    let refresh = signing.policy.signature_refresh;
    if !keys_changed && !heron_dnssec::sign::refresh_due(old, now, refresh, within) {
        return None;
    }
    Some(sign_loaded(old, Some(old), signing).map_err(|e| e.join("; ")))
}

/// The signed versions kept before a restart (`FILE.signed`), each
/// brought up to the version served last by the steps its zone's journal
/// holds after it: a copy is written paced, so after a crash it may be a
/// few batches of updates behind. A copy the journal does not lead on
/// from is left as it is (the journal then starts over).
pub(crate) fn bring_forward(
    copies: Vec<Arc<Zone>>,
    policies: &HashMap<Name, ZonePolicy>,
) -> Vec<Arc<Zone>> {
    copies
        .into_iter()
        .map(|copy| {
            let journal = policies.get(copy.origin()).and_then(|p| p.journal_path());
            match journal {
                Some(path) => bring_one_forward(copy, path),
                None => copy,
            }
        })
        .collect()
}

/// One copy brought forward by the journal at `path` (see [`bring_forward`]).
fn bring_one_forward(copy: Arc<Zone>, path: &Path) -> Arc<Zone> {
    let origin = copy.origin();
    let steps = match heron_xfr::journal::files::steps_after(path, origin, copy.serial()) {
        Ok(steps) if !steps.is_empty() => steps,
        _ => return copy,
    };
    match copy.apply_steps(&steps) {
        Ok(newest) => {
            tracing::info!(
                "zone {origin}: the signed copy (serial {}) brought to serial {} by {} journal steps",
                copy.serial(),
                newest.serial(),
                steps.len()
            );
            Arc::new(newest)
        }
        Err((at, problems)) => {
            let first = problems.first().map_or("", |p| p.message.as_str());
            tracing::info!(
                "zone {origin}: the journal's step {at} after the signed copy's serial {} does not apply ({first}); the copy is used as it is",
                copy.serial()
            );
            copy
        }
    }
}

/// Where what a restart carried over is kept, beside the journal.
pub(crate) fn carried_path(journal: &Path) -> PathBuf {
    use crate::config::shared_files::{CARRIED, beside};
    beside(journal, CARRIED)
}

/// A record as an update changes it: owner lower-cased, type, RDATA
/// (lower-cased for the types whose RDATA holds names, which compare
/// without case).
type RecordKey = (Vec<u8>, RType, Vec<u8>);

fn key_of(record: &DiffRecord) -> RecordKey {
    let rtype = record.rtype;
    let names = rtype.rdata_names_compressible() || rtype == RType::SRV || rtype == RType::DNAME;
    let rdata = match names {
        true => record.rdata.to_ascii_lowercase(),
        false => record.rdata.clone(),
    };
    (record.owner.to_lowercase().as_wire().to_vec(), rtype, rdata)
}

/// What `steps` did to each record, in order: Some(record) when its last
/// step added it, None when its last step deleted it. The SOA and the
/// signer's records are left out (the signer makes those again).
fn net_changes(steps: &[ZoneDiff]) -> BTreeMap<RecordKey, Option<DiffRecord>> {
    let mut net = BTreeMap::new();
    let carried = |r: &&DiffRecord| r.rtype != RType::SOA && !is_dnssec_type(r.rtype);
    for step in steps {
        for record in step.deleted.iter().filter(carried) {
            net.insert(key_of(record), None);
        }
        for record in step.added.iter().filter(carried) {
            net.insert(key_of(record), Some(record.clone()));
        }
    }
    net
}

/// The record of `zone` that `key` names, if the zone holds it.
fn held(zone: &Zone, key: &RecordKey) -> Option<DiffRecord> {
    let node = zone.node(&key.0)?;
    let set = node.rrset(key.1)?;
    let owner = node.owner();
    set.rdatas()
        .find(|r| {
            let probe = DiffRecord {
                owner: owner.clone(),
                rtype: key.1,
                ttl: 0,
                rdata: r.to_vec(),
            };
            key_of(&probe).2 == key.2
        })
        .map(|r| DiffRecord {
            owner: owner.clone(),
            rtype: key.1,
            ttl: set.ttl(),
            rdata: r.into_owned(),
        })
}

/// The RRSIG records over `owner`'s RRset of `rtype` in `zone`.
fn signatures_over(zone: &Zone, owner: &Name, rtype: RType) -> Vec<DiffRecord> {
    let Some(node) = zone.node(owner.as_wire()) else {
        return Vec::new();
    };
    let Some(set) = node.rrset(rtype) else {
        return Vec::new();
    };
    (set.sigs())
        .map(|sig| DiffRecord {
            owner: node.owner(),
            rtype: RType::RRSIG,
            ttl: set.sig_ttl(),
            rdata: sig.into_owned(),
        })
        .collect()
}

/// `zone` with what `steps` changed applied where it differs: a record
/// the steps added last is there (with their TTL), one they deleted last
/// is not; the rest of the zone as it is. The serial stays.
fn carry(zone: &Zone, steps: &[ZoneDiff]) -> Result<Option<Zone>, String> {
    let (mut deleted, mut added) = (Vec::new(), Vec::new());
    for (key, wanted) in net_changes(steps) {
        match (held(zone, &key), wanted) {
            (Some(have), Some(want)) if have.ttl != want.ttl => {
                deleted.push(have);
                added.push(want);
            }
            (Some(have), None) => deleted.push(have),
            (None, Some(want)) => added.push(want),
            _ => {}
        }
    }
    let old_soa = diff(zone, zone).old_soa;
    // An SOA an update changed (its TTL, names or timers) is carried at
    // the file's serial: the signer moves the serial on (black-box
    // finding DI-1: a restart put back the file's SOA).
    let new_soa = soa_updated(steps)
        .map(|soa| with_serial(soa.clone(), zone.serial()))
        .filter(|soa| *soa != old_soa);
    if deleted.is_empty() && added.is_empty() && new_soa.is_none() {
        return Ok(None);
    }
    // The signatures over the RRsets changed go too (the signer makes
    // them anew): a name left without data must not keep any.
    let mut touched: Vec<(Name, RType)> = (deleted.iter().chain(&added))
        .chain(new_soa.as_ref())
        .map(|r| (r.owner.to_lowercase(), r.rtype))
        .collect();
    touched.sort();
    touched.dedup();
    for (owner, rtype) in touched {
        deleted.extend(signatures_over(zone, &owner, rtype));
    }
    let step = ZoneDiff {
        new_soa: new_soa.unwrap_or_else(|| old_soa.clone()),
        old_soa,
        deleted,
        added,
    };
    zone.apply(&step).map(Some).map_err(|problems| {
        let first = problems.first().map_or("", |p| p.message.as_str());
        format!("they do not apply to the zone file ({first})")
    })
}

/// At startup, before the journal files are read back: for each signed
/// zone that takes updates, what its journal (and what an earlier start
/// carried) changed is applied to the zone as signed from its file, and
/// the zone signed again; what was carried is written to
/// `FILE.jnl.carried` and synced. A journal whose changes do not apply is
/// set aside (`FILE.jnl.unapplied`) with an error, and the file served.
/// The zone is signed again from the version kept before the restart
/// (`signed_before`, `FILE.signed`) if there is one: the RRsets the
/// updates made keep their signatures, and the serial moves one past
/// that version's, not two. Returns the zones served with updates their
/// file lacks, to be written back.
pub(crate) fn carry_journals(
    catalog: &mut Catalog,
    policies: &HashMap<Name, ZonePolicy>,
    (signed, frozen): (&[(Name, Arc<Signing>)], &[Name]),
    signed_before: &[Arc<Zone>],
) -> Vec<Name> {
    let mut unwritten = Vec::new();
    for (origin, signing) in signed {
        if frozen.contains(&origin.to_lowercase()) {
            // The freeze wrote the zone as served and took no update
            // after: its file holds the journal's updates, and carrying
            // them again undid the edit's deletions (regression hunt).
            tracing::info!(
                "zone {origin}: frozen when the server stopped: its file holds its journal's updates, taken as it is"
            );
            continue;
        }
        // One holding updates (`allow-update` gone under "never") too.
        let policy = policies
            .get(origin)
            .filter(|p| p.takes_updates() || p.holds_updates);
        let (Some(path), Some(zone)) = (
            policy.and_then(|p| p.journal_path()),
            catalog.get(origin).cloned(),
        ) else {
            continue;
        };
        let before = signed_before.iter().find(|z| z.origin() == origin);
        if before.is_some_and(|before| Arc::ptr_eq(before, &zone)) {
            // Its file did not load: the kept version is served, brought
            // forward by the journal already (`bring_forward`).
            continue;
        }
        let held = policy.is_some_and(|p| !p.takes_updates());
        match carry_one((&zone, before.map(|z| &**z)), path, signing) {
            Ok(Some(next)) => {
                if held {
                    say_held(origin, path, next.serial());
                }
                catalog.insert(next);
                unwritten.push(origin.clone());
            }
            // Its file holds them all: nothing is held any more.
            Ok(None) if held => unmark_held(path),
            Ok(None) => {}
            // Not the updates' fault (a full disk, a signing that failed):
            // the version kept before the restart holds them, and is
            // served; the journal stays for the next start.
            Err(Carry::Failed(why)) if before.is_some() => {
                let before = before.expect("a kept version").clone();
                tracing::error!(
                    "zone {origin}: the updates in {} cannot be carried over to the zone file now: {why}; the version kept before the restart (serial {}) is served, the journal kept for the next start",
                    path.display(),
                    before.serial()
                );
                catalog.insert_shared(before);
                unwritten.push(origin.clone());
            }
            Err(Carry::Unapplied(why) | Carry::Failed(why)) => {
                let kept = set_aside(path);
                tracing::error!(
                    "zone {origin}: the updates in {} cannot be carried over to the zone file: {why}; the zone file is served, the journal kept as {kept}",
                    path.display()
                );
            }
        }
    }
    unwritten
}

/// Beside a journal that holds updates its zone's file lacks, of a zone
/// that no longer takes them: what tells a start that the journal of a
/// zone keeping a history of its own (`allow-transfer`), or signed here,
/// holds updates, not file versions or signings (regression hunt: a file
/// rolled back was taken for a file lacking updates, and the newer
/// history served).
pub(crate) fn held_marker(journal: &Path) -> PathBuf {
    let mut name = journal.as_os_str().to_owned();
    name.push(".held");
    PathBuf::from(name)
}

/// The marker of `journal` gone: its updates are in the file.
pub(crate) fn unmark_held(journal: &Path) {
    let _ = std::fs::remove_file(held_marker(journal));
}

/// At a start (or a reload serving it again), a zone that takes no
/// updates whose journal at `path` holds updates its file lacks, served
/// now at `serial`: an error says so, and how to put them in the file.
pub(crate) fn say_held(origin: &Name, path: &Path, serial: u32) {
    tracing::error!(
        "zone {origin}: it takes no updates, but its file lacks the updates its journal {} holds (answered before allow-update went, under zonefile-sync = \"never\"): they are served (serial {serial}), and the journal kept, until they are in the file (heron ctl flush {origin})",
        path.display()
    );
}

/// After a reload: a signed zone served again that was not before (put
/// back in the configuration, or its file loaded at last), `zone` as
/// signed from its file, takes up its journal as a start does
/// ([`carry_journals`]): what it (and what a start carried) changed is
/// carried over and signed, kept in `FILE.jnl.carried`, before the first
/// update starts the journal over (black-box finding: its updates were
/// lost so). None when there is nothing to carry, or it failed (said).
pub(crate) fn carry_added(zone: &Zone, journal: &Path, signing: &Signing) -> Option<Zone> {
    let origin = zone.origin();
    match carry_one((zone, None), journal, signing) {
        Ok(carried) => carried,
        Err(Carry::Unapplied(why) | Carry::Failed(why)) => {
            let kept = set_aside(journal);
            tracing::error!(
                "zone {origin}: the updates in {} cannot be carried over to the zone file: {why}; the zone file is served, the journal kept as {kept}",
                journal.display()
            );
            None
        }
    }
}

/// Why a signed zone's journal was not carried over.
#[derive(Debug)]
enum Carry {
    /// Its steps do not apply to the zone file.
    Unapplied(String),
    /// Something else failed: reading, signing, writing.
    Failed(String),
}

fn carry_one(
    (zone, before): (&Zone, Option<&Zone>),
    journal: &Path,
    signing: &Signing,
) -> Result<Option<Zone>, Carry> {
    let origin = zone.origin();
    let carried_file = carried_path(journal);
    let mut steps = all_steps(&carried_file, origin).map_err(Carry::Failed)?;
    steps.extend(all_steps(journal, origin).map_err(Carry::Failed)?);
    if steps.is_empty() {
        return Ok(None);
    }
    let Some(carried) = carry(zone, &steps).map_err(Carry::Unapplied)? else {
        return Ok(None);
    };
    let previous = before.unwrap_or(zone);
    let signed =
        sign_loaded(&carried, Some(previous), signing).map_err(|e| Carry::Failed(e.join("; ")))?;
    let step = Arc::new(diff(zone, &signed));
    write_synced(&carried_file, origin, step)
        .map_err(|e| Carry::Failed(format!("cannot write {}: {e}", carried_file.display())))?;
    tracing::info!(
        "zone {origin}: the updates of {} steps from {} carried over to the zone file, serial {}",
        steps.len(),
        journal.display(),
        signed.serial()
    );
    Ok(Some(signed))
}

/// At a start, a zone no longer signed here whose journal holds the
/// signed steps it was served with (its `dnssec-policy` taken away while
/// its file lacked updates): what they changed (and what an earlier start
/// carried), the signer's records left out, carried over to the zone as
/// read from its file, at a serial past the journal's last, which its
/// secondaries may hold. The journal is written over (synced) with the
/// one step from the file to that version, so that the next start
/// replays it as any unsigned zone's. None when the journal holds no
/// signatures: it is no signed zone's.
pub(crate) fn carry_unsigned(
    zone: &Zone,
    journal: &Path,
    policy: &ZonePolicy,
) -> Option<Result<Zone, String>> {
    let origin = zone.origin();
    let carried_file = carried_path(journal);
    let mut steps = all_steps(&carried_file, origin).ok()?;
    steps.extend(all_steps(journal, origin).ok()?);
    let signed = |step: &ZoneDiff| {
        let mut records = step.added.iter().chain(&step.deleted);
        records.any(|r| r.rtype == RType::RRSIG)
    };
    if !steps.iter().any(signed) {
        return None;
    }
    Some(carry_unsigned_steps(zone, journal, &steps, policy))
}

/// [`carry_unsigned`] of the journal's `steps`.
fn carry_unsigned_steps(
    zone: &Zone,
    journal: &Path,
    steps: &[ZoneDiff],
    policy: &ZonePolicy,
) -> Result<Zone, String> {
    use heron_xfr::journal::serial_of;
    let origin = zone.origin();
    let carried = carry(zone, steps)?;
    let from = carried.as_ref().unwrap_or(zone);
    let last = steps
        .last()
        .map_or(zone.serial(), |s| serial_of(&s.new_soa));
    let newest = match heron_xfr::serial::is_newer(zone.serial(), last) {
        true => zone.serial(),
        false => last,
    };
    let mut step = diff(from, from);
    let serial = policy
        .update
        .serial
        .next(newest, heron_proto::time::unix_now());
    step.new_soa = soa_with_serial(from, serial);
    let next = (from.apply(&step)).map_err(|_| "the new serial cannot be set".to_string())?;
    write_synced(journal, origin, Arc::new(diff(zone, &next)))
        .map_err(|e| format!("cannot write {}: {e}", journal.display()))?;
    match std::fs::remove_file(carried_path(journal)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => tracing::warn!(
            "zone {origin}: cannot delete {}: {e}",
            carried_path(journal).display()
        ),
        _ => {}
    }
    tracing::warn!(
        "zone {origin}: no longer signed here: what the {} steps in {} (signed ones among them) changed is carried over to the zone file without the signer's records, served unsigned with serial {} (the journal's last was {last})",
        steps.len(),
        journal.display(),
        next.serial()
    );
    Ok(next)
}

/// The SOA the journal's last step ends at, when some step changed more
/// than its serial (an update of the SOA's TTL, names or timers); None
/// when only serials moved (the signer's and the updates' steps).
fn soa_updated(steps: &[ZoneDiff]) -> Option<&DiffRecord> {
    let unserialed = |soa: &DiffRecord| with_serial(soa.clone(), 0);
    let changed = |s: &ZoneDiff| unserialed(&s.old_soa) != unserialed(&s.new_soa);
    let last = steps.last()?;
    steps.iter().any(changed).then_some(&last.new_soa)
}

/// The zone's SOA record with `serial`.
pub(crate) fn soa_with_serial(zone: &Zone, serial: u32) -> heron_zone::diff::DiffRecord {
    with_serial(heron_zone::diff::diff(zone, zone).new_soa, serial)
}

/// The SOA record `soa` with `serial`.
fn with_serial(mut soa: DiffRecord, serial: u32) -> DiffRecord {
    let rdata = &mut soa.rdata;
    let names = heron_proto::name::skip_compressed(rdata, 0)
        .and_then(|(end, _)| heron_proto::name::skip_compressed(rdata, end));
    if let Ok((at, _)) = names
        && let Some(field) = rdata.get_mut(at..at + 4)
    {
        field.copy_from_slice(&serial.to_be_bytes());
    }
    soa
}

/// Moves a journal whose updates were not applied out of the way (the
/// history starts over) without losing it: `FILE.jnl.unapplied`, for
/// the operator to recover the updates from. Returns where it went.
pub(crate) fn set_aside(path: &std::path::Path) -> String {
    use heron_xfr::journal::file::{OTHER_DATA, holds_other_data};
    // Another server's journal is not Heron's to move.
    if holds_other_data(path).unwrap_or(true) {
        return format!("{} ({OTHER_DATA})", path.display());
    }
    let kept = heron_xfr::disk::unused_name(path, ".unapplied");
    match std::fs::rename(path, &kept) {
        Ok(()) => {
            // No journal left to hold: a mark of a hold would make a freeze
            // refuse, naming a flush with nothing to flush (regression
            // hunt AR-10).
            unmark_held(path);
            kept.display().to_string()
        }
        Err(e) => format!("{} (it could not be moved: {e})", path.display()),
    }
}

/// Writes the one-step journal at `path` (a temporary file synced, then
/// renamed over the old, the directory synced).
fn write_synced(path: &Path, origin: &Name, step: Arc<ZoneDiff>) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    write_file(&tmp, origin, &[step])?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, path)?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    std::fs::File::open(dir.unwrap_or(Path::new(".")))?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZONE: &str = "@ 300 IN SOA ns hm 7 2 3 4 5\n@ 300 IN NS ns\nns 300 IN A 192.0.2.1\nold 300 IN TXT \"x\"\n";

    fn origin() -> Name {
        Name::parse("c.test").unwrap()
    }

    fn load(text: &str) -> Zone {
        heron_zone::load_zone_str(text, "t", &origin())
            .unwrap()
            .zone
    }

    fn record(owner: &str, rtype: RType, ttl: u32, rdata: &[u8]) -> DiffRecord {
        DiffRecord {
            owner: Name::parse(owner).unwrap(),
            rtype,
            ttl,
            rdata: rdata.to_vec(),
        }
    }

    fn step(zone: &Zone, deleted: Vec<DiffRecord>, added: Vec<DiffRecord>) -> ZoneDiff {
        let soa = diff(zone, zone).old_soa;
        ZoneDiff {
            old_soa: soa.clone(),
            new_soa: soa,
            deleted,
            added,
        }
    }

    #[test]
    fn the_last_step_that_touched_a_record_decides() {
        let zone = load(ZONE);
        let a = |ip: [u8; 4]| record("h.c.test", RType::A, 60, &ip);
        let txt = record("old.c.test", RType::TXT, 300, b"\x01x");
        let sig = record("h.c.test", RType::RRSIG, 60, b"sig");
        let steps = [
            step(&zone, vec![], vec![a([1, 1, 1, 1]), a([2, 2, 2, 2]), sig]),
            step(&zone, vec![a([1, 1, 1, 1]), txt], vec![]),
        ];
        let carried = carry(&zone, &steps).unwrap().expect("a change");
        let h = carried.node(Name::parse("h.c.test").unwrap().as_wire());
        let ips: Vec<Vec<u8>> = h
            .unwrap()
            .rrset(RType::A)
            .unwrap()
            .rdatas()
            .map(|r| r.to_vec())
            .collect();
        assert_eq!(ips, vec![vec![2, 2, 2, 2]]);
        let old = carried.node(Name::parse("old.c.test").unwrap().as_wire());
        assert!(old.is_none_or(|n| n.rrset(RType::TXT).is_none()), "deleted");
        assert_eq!(carried.serial(), zone.serial(), "the serial stays");
        assert!(
            h.unwrap().rrset(RType::RRSIG).is_none(),
            "signer records not carried"
        );
    }

    #[test]
    fn changes_the_file_has_already_change_nothing() {
        let zone = load(ZONE);
        let txt = record("OLD.c.test", RType::TXT, 300, b"\x01x");
        let steps = [step(&zone, vec![], vec![txt])];
        assert!(carry(&zone, &steps).unwrap().is_none());
        // A TTL that differs is carried.
        let txt = record("old.c.test", RType::TXT, 9, b"\x01x");
        let carried = carry(&zone, &[step(&zone, vec![], vec![txt])])
            .unwrap()
            .unwrap();
        let node = carried
            .node(Name::parse("old.c.test").unwrap().as_wire())
            .unwrap();
        assert_eq!(node.rrset(RType::TXT).unwrap().ttl(), 9);
    }

    #[test]
    fn changes_that_break_the_zone_are_an_error() {
        let zone = load(ZONE);
        // A CNAME beside the TXT the file has.
        let cname = record("old.c.test", RType::CNAME, 300, b"\x02ns\x01c\x04test\x00");
        let err = carry(&zone, &[step(&zone, vec![], vec![cname])]).unwrap_err();
        assert!(err.contains("do not apply"), "{err}");
    }
}

#[cfg(test)]
mod signing_tests {
    use super::*;
    use heron_dnssec::policy::{KeySet, Policy};
    use heron_dnssec::sign::Denial;
    use heron_xfr::update::{Applied, Change, Requester, UpdatePolicy, UpdateRule, UpdateSettings};

    const ZONE: &str = "@ 300 IN SOA ns hm 7 2 3 4 5\n@ 300 IN NS ns\nns 300 IN A 192.0.2.1\nwww 300 IN A 192.0.2.2\nold 300 IN TXT \"x\"\n";

    fn signing(dir: &Path, denial: Denial) -> Signing {
        Signing {
            policy: Arc::new(Policy {
                keys: KeySet::KskZsk,
                denial,
                ..Policy::default()
            }),
            key_directory: dir.join("keys"),
        }
    }

    /// `zone` with `change` applied as an update from a key allowed all.
    fn updated(zone: &Zone, change: Change) -> Zone {
        updated_by(zone, vec![change])
    }

    /// `zone` with `changes` applied as one update.
    fn updated_by(zone: &Zone, changes: Vec<Change>) -> Zone {
        match try_update(zone, changes) {
            Ok(Applied::Changed(next, _)) => *next,
            _ => panic!("the update applies"),
        }
    }

    /// What the update of `changes` to `zone` comes to, by a key that
    /// may change anything in the zone.
    fn try_update(
        zone: &Zone,
        changes: Vec<Change>,
    ) -> Result<Applied, heron_xfr::update::Rejected> {
        let origin = zone.origin().clone();
        let rule = UpdateRule::parse("key k zonesub ANY", &origin).unwrap();
        let settings = UpdateSettings {
            policy: UpdatePolicy::new(vec![rule]),
            ..UpdateSettings::default()
        };
        let message = heron_xfr::update::UpdateMessage {
            id: 1,
            zone: origin,
            class: zone.class(),
            prerequisites: vec![],
            changes,
        };
        let key = Name::parse("k").unwrap();
        let who = Requester {
            ip: "127.0.0.1".parse().unwrap(),
            key: Some(&key),
        };
        heron_xfr::update::process(zone, &message, &settings, who, 1)
    }

    fn nsec3_types_of(zone: &Zone, owner: &str) -> Vec<u8> {
        let hash = heron_dnssec::sign::nsec3_hash(Name::parse(owner).unwrap().as_wire(), &[], 0);
        let mut hashed = vec![32];
        hashed.extend_from_slice(&heron_dnssec::sign::base32hex(&hash));
        hashed.extend_from_slice(zone.origin().as_wire());
        let node = zone
            .node(&hashed.to_ascii_lowercase())
            .expect("the NSEC3 record");
        let rdata = node.rrset(RType::NSEC3).unwrap().first_rdata().into_owned();
        // Algorithm, flags, iterations, salt (none), hash: the bitmap after.
        rdata[1 + 1 + 2 + 1 + 1 + 20..].to_vec()
    }

    /// A zone signed in `dir`, its name, and the signed step of one update
    /// (kept.s.test A) to it.
    fn signed_with_one_update(dir: &Path) -> (Signing, Name, Zone, ZoneDiff) {
        let signing = signing(dir, Denial::Nsec);
        let origin = Name::parse("s.test").unwrap();
        let zone = heron_zone::load_zone_str(ZONE, "t", &origin).unwrap().zone;
        let served = sign_loaded(&zone, None, &signing).unwrap();
        let change = Change::Add {
            owner: Name::parse("kept.s.test").unwrap(),
            rtype: RType::A,
            ttl: 300,
            rdata: vec![192, 0, 2, 9],
        };
        let (_, step) = sign_update(&served, &updated(&served, change), None, &signing).unwrap();
        (signing, origin, served, step)
    }

    /// A journal file cut short in its header (`kill -9` while a new one
    /// was created; found by `tests/update_kills.rs`) holds nothing: the
    /// steps `.carried` holds are still carried over, not set aside.
    #[test]
    fn carried_steps_survive_a_journal_cut_short_in_its_header() {
        let dir = tempfile::tempdir().unwrap();
        let (signing, origin, served, step) = signed_with_one_update(dir.path());
        let journal = dir.path().join("s.zone.jnl");
        write_file(&carried_path(&journal), &origin, &[Arc::new(step)]).unwrap();
        let header = heron_xfr::journal::file::header(&origin);
        for len in [0, header.len() - 1] {
            std::fs::write(&journal, &header[..len]).unwrap();
            let carried = carry_one((&served, None), &journal, &signing).unwrap();
            let carried = carried.expect("the carried step applies");
            assert!(
                carried.node(b"\x04kept\x01s\x04test\x00").is_some(),
                "{len}"
            );
        }
    }

    /// A carry that cannot be written (a full disk) is a failure of its
    /// own, not "the updates do not apply": the start then serves the
    /// version kept before the restart instead of setting the journal
    /// aside.
    #[test]
    fn a_carry_that_cannot_be_written_is_not_taken_for_updates_that_do_not_apply() {
        let dir = tempfile::tempdir().unwrap();
        let (signing, origin, served, step) = signed_with_one_update(dir.path());
        let journal = dir.path().join("s.zone.jnl");
        write_file(&journal, &origin, &[Arc::new(step)]).unwrap();
        // `.carried` cannot be written: a folder stands where it goes.
        std::fs::create_dir(carried_path(&journal)).unwrap();
        let failed = carry_one((&served, None), &journal, &signing);
        assert!(matches!(failed, Err(Carry::Failed(_))), "{failed:?}");
    }

    /// A signed copy written before the last batches of updates (paced,
    /// then a crash) is brought to the version served by the journal;
    /// a copy the journal does not lead on from is left as it is.
    #[test]
    fn a_copy_behind_its_journal_is_brought_forward() {
        let dir = tempfile::tempdir().unwrap();
        let signing = signing(dir.path(), Denial::Nsec);
        let origin = Name::parse("s.test").unwrap();
        let zone = heron_zone::load_zone_str(ZONE, "t", &origin).unwrap().zone;
        let copy = Arc::new(sign_loaded(&zone, None, &signing).unwrap());
        let mut served = copy.clone();
        let mut steps = Vec::new();
        for name in ["a.s.test", "b.s.test"] {
            let change = Change::Add {
                owner: Name::parse(name).unwrap(),
                rtype: RType::A,
                ttl: 300,
                rdata: vec![192, 0, 2, 9],
            };
            let next = updated(&served, change);
            let (signed, step) = sign_update(&served, &next, None, &signing).unwrap();
            served = Arc::new(signed);
            steps.push(Arc::new(step));
        }
        let journal = dir.path().join("s.zone.jnl");
        write_file(&journal, &origin, &steps).unwrap();
        let forward = bring_one_forward(copy.clone(), &journal);
        assert_eq!(forward.serial(), served.serial());
        assert!(diff(&forward, &served).is_empty());
        // A copy the journal holds no step from stays as it is.
        let other = Arc::new(sign_loaded(&zone, Some(&served), &signing).unwrap());
        let kept = bring_one_forward(other.clone(), &journal);
        assert!(Arc::ptr_eq(&kept, &other));
    }

    #[test]
    fn an_added_name_gets_its_types_in_its_nsec3() {
        let dir = tempfile::tempdir().unwrap();
        let denial = Denial::Nsec3 {
            iterations: 0,
            salt: vec![],
            opt_out: false,
        };
        let signing = signing(dir.path(), denial);
        let origin = Name::parse("s.test").unwrap();
        let mut text = ZONE.to_string();
        (0..40).for_each(|i| text.push_str(&format!("h{i:02} 300 IN A 192.0.2.{i}\n")));
        let zone = heron_zone::load_zone_str(&text, "t", &origin).unwrap().zone;
        let served = sign_loaded(&zone, None, &signing).unwrap();
        let change = Change::Add {
            owner: Name::parse("new.s.test").unwrap(),
            rtype: RType::A,
            ttl: 300,
            rdata: vec![192, 0, 2, 9],
        };
        let next = updated(&served, change);
        let (signed, step) = sign_update(&served, &next, None, &signing).unwrap();
        assert_eq!(
            nsec3_types_of(&signed, "new.s.test"),
            nsec3_types_of(&signed, "www.s.test")
        );
        assert!(step.added.iter().any(|r| r.rtype == RType::NSEC3));
        // The step served (the update's change, then the signer's) is the
        // diff of the two versions.
        assert_eq!(step, diff(&served, &signed));
        let given = Some(diff(&served, &next));
        let (again, step) = sign_update(&served, &next, given, &signing).unwrap();
        assert_eq!(step, diff(&served, &again));
        // A name deleted leaves no NSEC3 (an empty one would claim a name
        // that has nothing).
        let gone = updated(
            &signed,
            Change::DeleteName(Name::parse("old.s.test").unwrap()),
        );
        let (signed, _) = sign_update(&signed, &gone, None, &signing).unwrap();
        let hash =
            heron_dnssec::sign::nsec3_hash(Name::parse("old.s.test").unwrap().as_wire(), &[], 0);
        let mut hashed = vec![32];
        hashed.extend_from_slice(&heron_dnssec::sign::base32hex(&hash));
        hashed.extend_from_slice(signed.origin().as_wire());
        assert!(signed.node(&hashed.to_ascii_lowercase()).is_none());
        assert!(
            signed
                .node(Name::parse("old.s.test").unwrap().as_wire())
                .is_none()
        );
    }

    /// Under a `zonemd` policy every path that signs a changed zone again
    /// makes its ZONEMD anew: an update, and a refresh of the updated
    /// zone kept at a reload; each version's ZONEMD is of its serial and
    /// verifies, and the journal's step carries it.
    #[test]
    fn updates_and_refreshes_make_the_zonemd_anew() {
        use heron_dnssec::zonemd::{HashAlg, Verdict, verify};
        let dir = tempfile::tempdir().unwrap();
        let mut signing = signing(dir.path(), Denial::Nsec);
        Arc::make_mut(&mut signing.policy).zonemd = Some(HashAlg::Sha384);
        let origin = Name::parse("s.test").unwrap();
        let zone = heron_zone::load_zone_str(ZONE, "t", &origin).unwrap().zone;
        let served = sign_loaded(&zone, None, &signing).unwrap();
        assert_eq!(verify(&served), Verdict::Verified(HashAlg::Sha384));
        let change = Change::Add {
            owner: Name::parse("new.s.test").unwrap(),
            rtype: RType::A,
            ttl: 300,
            rdata: vec![192, 0, 2, 9],
        };
        let (signed, step) =
            sign_update(&served, &updated(&served, change), None, &signing).unwrap();
        assert!(signed.serial() > served.serial());
        assert_eq!(verify(&signed), Verdict::Verified(HashAlg::Sha384));
        assert!(step.added.iter().any(|r| r.rtype == RType::ZONEMD));
        assert!(step.deleted.iter().any(|r| r.rtype == RType::ZONEMD));
        let refreshed = refresh_kept(&signed, &signing, true).unwrap().unwrap();
        assert!(refreshed.serial() > signed.serial());
        assert_eq!(verify(&refreshed), Verdict::Verified(HashAlg::Sha384));
    }

    /// A client may not add a ZONEMD (REFUSED, as the signer's types);
    /// and a version that carries one anyway, under a policy that makes
    /// none, is not signed and served with it (it cannot verify in a zone
    /// signed here): the signing drops it, as a primary's.
    #[test]
    fn an_updates_zonemd_is_not_served_under_a_policy_without_one() {
        let dir = tempfile::tempdir().unwrap();
        let signing = signing(dir.path(), Denial::Nsec);
        let origin = Name::parse("s.test").unwrap();
        let zone = heron_zone::load_zone_str(ZONE, "t", &origin).unwrap().zone;
        let served = sign_loaded(&zone, None, &signing).unwrap();
        let mut rdata = vec![0, 0, 0, 1, 1, 1];
        rdata.extend_from_slice(&[0; 48]);
        let change = Change::Add {
            owner: origin.clone(),
            rtype: RType::ZONEMD,
            ttl: 300,
            rdata: rdata.clone(),
        };
        let refused = try_update(&served, vec![change]).err().map(|r| r.rcode);
        assert_eq!(
            refused,
            Some(heron_proto::Rcode::REFUSED),
            "a client's ZONEMD"
        );
        let soa = served.soa();
        let soa = DiffRecord {
            owner: origin.clone(),
            rtype: RType::SOA,
            ttl: soa.ttl(),
            rdata: soa.first_rdata().into_owned(),
        };
        let with_zonemd = served
            .apply(&ZoneDiff {
                old_soa: soa.clone(),
                new_soa: soa,
                deleted: vec![],
                added: vec![DiffRecord {
                    owner: origin.clone(),
                    rtype: RType::ZONEMD,
                    ttl: 300,
                    rdata,
                }],
            })
            .unwrap();
        let (signed, _) = sign_update(&served, &with_zonemd, None, &signing).unwrap();
        assert!(signed.serial() > served.serial());
        assert!(signed.apex().rrset(RType::ZONEMD).is_none());
    }

    /// CPU seconds this process has used (user and system, all threads).
    fn cpu_seconds() -> f64 {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let after_name: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .collect();
        // utime and stime, fields 14 and 15, in clock ticks (100 a second).
        let ticks = |i: usize| after_name[i].parse::<f64>().unwrap();
        (ticks(11) + ticks(12)) / 100.0
    }

    /// Signs `rounds` batches of `batch` added names each on `served`,
    /// incrementally and (fewer rounds) whole as before; prints the CPU
    /// and wall milliseconds per batch of each.
    fn measure(served: &Zone, signing: &Signing, batch: usize, rounds: [usize; 2], label: &str) {
        let origin = served.origin().clone();
        let mut current = Arc::new(sign_loaded(served, Some(served), signing).unwrap());
        for (way, rounds) in ["incremental", "whole"].into_iter().zip(rounds) {
            let (mut cpu, mut wall) = (0.0, std::time::Duration::ZERO);
            for round in 0..rounds {
                let changes = (0..batch)
                    .map(|i| Change::Add {
                        owner: Name::parse(&format!("u{round}-{i}-{way}.{origin}")).unwrap(),
                        rtype: RType::A,
                        ttl: 300,
                        rdata: vec![192, 0, 2, (i % 250) as u8],
                    })
                    .collect();
                let next = updated_by(&current, changes);
                let (cpu_at, wall_at) = (cpu_seconds(), std::time::Instant::now());
                let signed = match way {
                    "incremental" => sign_update(&current, &next, None, signing).unwrap().0,
                    _ => {
                        let signed = sign_loaded(&next, Some(&current), signing).unwrap();
                        let _step = diff(&current, &signed);
                        signed
                    }
                };
                (cpu, wall) = (cpu + cpu_seconds() - cpu_at, wall + wall_at.elapsed());
                current = Arc::new(signed);
            }
            let n = rounds as f64;
            println!(
                "{label} batch {batch:>2} {way:>11}: {:>9.3} ms CPU, {:>9.3} ms wall per batch ({rounds} batches)",
                cpu * 1000.0 / n,
                wall.as_secs_f64() * 1000.0 / n
            );
        }
    }

    /// The cost of signing a batch of updates, incrementally and whole,
    /// for zones of 10,000 and 100,000 names (a measurement, not a test).
    #[test]
    #[ignore = "cargo test --release -p heron --bin heron signed_batch_cost -- --ignored --nocapture"]
    fn signed_batch_cost() {
        let nsec3 = Denial::Nsec3 {
            iterations: 0,
            salt: vec![],
            opt_out: false,
        };
        for names in [10_000, 100_000] {
            let mut text = ZONE.to_string();
            (0..names).for_each(|i| {
                text.push_str(&format!(
                    "h{i} 300 IN A 198.51.{}.{}\n",
                    i / 250 % 256,
                    i % 250
                ))
            });
            let origin = Name::parse("bench.test").unwrap();
            let zone = heron_zone::load_zone_str(&text, "t", &origin).unwrap().zone;
            for (name, denial) in [("NSEC", Denial::Nsec), ("NSEC3", nsec3.clone())] {
                let dir = tempfile::tempdir().unwrap();
                let signing = signing(dir.path(), denial);
                let served = sign_loaded(&zone, None, &signing).unwrap();
                let whole = if names > 10_000 { 1 } else { 3 };
                for batch in [1, 64] {
                    let label = format!("{names} names {name:<5}");
                    measure(&served, &signing, batch, [200, whole], &label);
                }
            }
        }
    }
}
