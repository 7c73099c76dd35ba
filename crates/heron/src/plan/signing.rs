//! Zones Heron signs: their keys in the key directory (made when there
//! are none), and the signing of a zone as loaded from its file.

use std::borrow::Borrow;
use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::Path;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use heron_dnssec::sign::sign_zone_after;
use heron_proto::{Name, RType};
use heron_xfr::update::is_dnssec_type;
use heron_zone::Zone;
use heron_zone::diff::{DiffRecord, ZoneDiff};

use crate::config::dnssec::Signing;
use crate::plan::key_state;

/// How often the server looks for signed zones with signatures due for
/// refresh (each is re-signed then, keeping the signatures not due).
pub const REFRESH_CHECK: std::time::Duration =
    std::time::Duration::from_secs(heron_dnssec::policy::SIGNATURE_LOOK as u64);

/// Of the `signed` zones (`ZoneFiles::signed_zones`), those (lower-cased)
/// with a signature due for refresh before the next check.
pub fn zones_due(
    catalog: &heron_zone::Catalog,
    signed: Vec<(Name, std::sync::Arc<Signing>)>,
) -> std::collections::HashSet<Name> {
    let now = heron_proto::time::unix_now();
    let within = REFRESH_CHECK.as_secs() as u32;
    (signed.into_iter())
        .filter(|(origin, signing)| {
            catalog.get(origin).is_some_and(|zone| {
                heron_dnssec::sign::refresh_due(zone, now, signing.policy.signature_refresh, within)
            })
        })
        .map(|(origin, _)| origin.to_lowercase())
        .collect()
}

/// Signs `zone`, loaded from its file, under `signing`: the zone's keys
/// move on through their rollovers first (`key_state::step_over`: the state
/// file in the key directory, keys generated as the step needs), and the
/// zone is signed with the step's DNSKEY RRset, signers and CDS/CDNSKEY.
/// `previous` is the version served now: its signatures over RRsets that
/// did not change are kept (unless due for refresh), and a new signing of
/// the same serial takes the next one, so that secondaries see the change.
pub fn sign_loaded<Z: Borrow<Zone>>(
    zone: Z,
    previous: Option<&Zone>,
    signing: &Signing,
) -> Result<Zone, Vec<String>> {
    let started = Instant::now();
    let origin = zone.borrow().origin().clone();
    let origin = &origin;
    let now = heron_proto::time::unix_now();
    let policy = &signing.policy;
    let max_ttl = key_state::zone_max_ttl(zone.borrow());
    max_ttls().insert(origin.to_lowercase(), max_ttl);
    let mut step = key_state::step_over(
        origin,
        policy,
        &signing.key_directory,
        max_ttl,
        now,
        previous,
    )
    .map_err(|e| vec![format!("zone '{origin}': keys: {e}")])?;
    let signed = sign_step(zone, previous, signing, &step, now);
    if signed.is_err() {
        key_state::undo(&mut step);
    }
    let signed = signed?;
    signed_under().insert(origin.to_lowercase(), signing.clone());
    if policy.insecure && step.keys.is_empty() {
        // A zone that never had a key did not go insecure: it never was
        // signed (black-box finding CA-7).
        let was_signed = previous.is_some_and(|p| p.apex().rrset(RType::DNSKEY).is_some());
        tracing::info!(
            zone = %origin,
            policy = %policy.name,
            serial = signed.zone.serial(),
            "{}",
            match was_signed {
                true => "zone served unsigned: it went insecure, every DNSSEC key is retired",
                false => "zone served unsigned: its policy is insecure and it has no DNSSEC key",
            }
        );
        return Ok(signed.zone);
    }
    tracing::info!(
        zone = %origin,
        policy = %policy.name,
        signatures = signed.signatures,
        kept = signed.reused,
        serial = signed.zone.serial(),
        keys = step.keys.len(),
        cds = step.cds.len(),
        ms = started.elapsed().as_millis() as u64,
        "zone signed"
    );
    Ok(signed.zone)
}

/// The largest TTL of each signed zone (lower-cased origin) as its last
/// whole signing found it, raised by the changes signed since: what the
/// key rollovers time themselves by, without a walk of the zone at each
/// update (a TTL lowered since only makes a rollover wait longer).
fn max_ttls() -> std::sync::MutexGuard<'static, HashMap<Name, u32>> {
    static MAX_TTLS: OnceLock<Mutex<HashMap<Name, u32>>> = OnceLock::new();
    let map = MAX_TTLS.get_or_init(Default::default);
    map.lock().unwrap_or_else(|e| e.into_inner())
}

/// The settings each signed zone (lower-cased origin) was last signed
/// whole under: a change signed by itself only extends a version signed
/// under the same policy (a new salt, NSEC to NSEC3, a ZONEMD asked for
/// take a whole signing).
fn signed_under() -> std::sync::MutexGuard<'static, HashMap<Name, Signing>> {
    static SIGNED_UNDER: OnceLock<Mutex<HashMap<Name, Signing>>> = OnceLock::new();
    let map = SIGNED_UNDER.get_or_init(Default::default);
    map.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the zone was signed here (whole, under some policy) since the
/// start.
pub fn signed_here_before(origin: &Name) -> bool {
    signed_under().contains_key(&origin.to_lowercase())
}

/// Whether the zone's version served was signed whole under `signing`.
pub fn last_signed_under(origin: &Name, signing: &Signing) -> bool {
    signed_under().get(&origin.to_lowercase()) == Some(signing)
}

/// Whether the keys' step now (their state moved on as a signing moves
/// it) publishes, signs or announces to the parent other than `served`
/// shows: its DNSKEY RRset, the keys whose signatures cover its SOA and
/// its DNSKEY RRset, its CDS and CDNSKEY. A version kept served (a signed
/// zone that takes updates, at a reload) is signed again when they do, so
/// that a rollover's step or `heron keymgr` change reaches it.
pub fn keys_moved(served: &Zone, signing: &Signing) -> Result<bool, Vec<String>> {
    let origin = served.origin();
    let policy = &signing.policy;
    let max_ttl = max_ttls().get(&origin.to_lowercase()).copied();
    let max_ttl = max_ttl.unwrap_or_else(|| key_state::zone_max_ttl(served));
    let now = heron_proto::time::unix_now();
    let step = key_state::step_over(
        origin,
        policy,
        &signing.key_directory,
        max_ttl,
        now,
        Some(served),
    )
    .map_err(|e| vec![format!("zone '{origin}': keys: {e}")])?;
    let apex = served.apex();
    let sorted = |mut v: Vec<Vec<u8>>| {
        v.sort();
        v
    };
    let published = (step.keys.iter().filter(|k| k.published)).map(|k| k.dnskey.clone());
    let held = apex
        .rrset(RType::DNSKEY)
        .map(|set| set.rdatas().map(|r| r.to_vec()).collect());
    if sorted(published.collect()) != sorted(held.unwrap_or_default()) {
        return Ok(true);
    }
    let signers = |rtype: RType| -> Vec<u16> {
        let sigs = apex
            .rrset(rtype)
            .map(|set| set.sigs().map(|r| r.to_vec()).collect::<Vec<_>>());
        let mut tags: Vec<u16> = (sigs.unwrap_or_default().iter())
            .filter_map(|rdata| Some(u16::from_be_bytes(rdata.get(16..18)?.try_into().ok()?)))
            .collect();
        tags.sort();
        tags.dedup();
        tags
    };
    let tags = |pick: fn(&heron_dnssec::sign::ZoneKey) -> bool| {
        let mut tags: Vec<u16> = step
            .keys
            .iter()
            .filter(|k| pick(k))
            .map(|k| k.tag)
            .collect();
        tags.sort();
        tags.dedup();
        tags
    };
    let moved = signers(RType::SOA) != tags(|k| k.signs_zone)
        || signers(RType::DNSKEY) != tags(|k| k.signs_keys)
        || key_state::with_cds(served, &step, policy.cds_ttl)
            .map_err(|e| vec![format!("zone '{origin}': {e}")])?
            .is_some();
    Ok(moved)
}

/// `updated`, the signed zone `served` with `change` applied
/// (`diff(served, updated)`: a batch of dynamic updates), signed again
/// incrementally ([`heron_dnssec::sign::sign_change`]): only the RRsets
/// changed, the NSEC or NSEC3 records around the names changed and the
/// SOA get new signatures, and nothing walks the whole zone. With the
/// signer's own change, from `updated` to the version signed. None when
/// the change needs a whole signing ([`sign_loaded`]): keys moved on,
/// a delegation added or removed, a policy with ZONEMD (its digest
/// covers the whole zone; an incremental ZONEMD would be called here),
/// settings changed since the last whole signing.
/// `logged`: say the signing in a line here (an update batch says it
/// once its journal is written instead: a batch refused for its journal
/// logged a signing never served, a line each; regression hunt BS-2).
pub fn sign_change(
    served: &Zone,
    updated: &Zone,
    change: &ZoneDiff,
    (signing, logged): (&Signing, bool),
) -> Result<Option<(Zone, ZoneDiff)>, Vec<String>> {
    let started = Instant::now();
    let origin = updated.origin();
    let policy = &signing.policy;
    // A ZONEMD added by an update under a policy that makes none: the
    // whole signing drops it (`without_zonemd`), it is not signed.
    let zonemd_added = (change.added.iter()).any(|r| r.rtype == heron_proto::RType::ZONEMD);
    // A zone served unsigned (gone insecure, every key retired): the
    // whole signing serves it so (black-box finding: its updates found
    // no key to sign with and were answered SERVFAIL).
    let unsigned = served.apex().rrset(RType::DNSKEY).is_none();
    if policy.zonemd.is_some() || zonemd_added || unsigned || !last_signed_under(origin, signing) {
        return Ok(None);
    }
    let now = heron_proto::time::unix_now();
    let added_ttl = change.added.iter().map(|r| r.ttl).max().unwrap_or(0);
    let max_ttl = {
        let mut cached = max_ttls();
        let known = cached.get(&origin.to_lowercase()).copied();
        let ttl = known.unwrap_or_else(|| key_state::zone_max_ttl(updated));
        let ttl = ttl.max(added_ttl);
        cached.insert(origin.to_lowercase(), ttl);
        ttl
    };
    let fail = |e: String| vec![format!("zone '{origin}': {e}")];
    let mut step = key_state::step_over(
        origin,
        policy,
        &signing.key_directory,
        max_ttl,
        now,
        Some(served),
    )
    .map_err(|e| fail(format!("keys: {e}")))?;
    if key_state::with_cds(updated, &step, policy.cds_ttl)
        .map_err(fail)?
        .is_some()
    {
        return Ok(None);
    }
    let mut config = policy.sign_config();
    config.serial = next_serial(updated.serial(), Some(served.serial()));
    let signed = heron_dnssec::sign::sign_change(served, updated, change, &step.keys, &config, now);
    let (signed, signer_step) = match signed {
        Ok(Some(signed)) => signed,
        Ok(None) => return Ok(None),
        Err(e) => {
            key_state::undo(&mut step);
            return Err(fail(format!("cannot sign: {e}")));
        }
    };
    write_served_serial(&signing.key_directory, origin, signed.zone.serial()).map_err(fail)?;
    // One line a signing, as the whole signing logs its "zone signed" (a
    // reload or a transfer signed by its change).
    if logged {
        tracing::info!(
            zone = %origin,
            signatures = signed.signatures,
            serial = signed.zone.serial(),
            us = started.elapsed().as_micros() as u64,
            "change signed"
        );
    }
    Ok(Some((signed.zone, signer_step)))
}

/// `signed`, a version signed here, moved on by `change`, a change of its
/// records that leaves the signer's own out, to `change.new_soa`: the
/// change applied, then signed incrementally ([`sign_change`]), so the
/// cost follows the change. None when that cannot be done (`signed` has
/// no keys or its policy goes insecure, the change does not apply,
/// touches what a whole signing must redo, or comes with a key step that
/// changes what the apex publishes): the caller signs whole.
pub fn sign_by_change(
    signed: &Zone,
    change: ZoneDiff,
    signing: &Signing,
) -> Option<Result<Zone, Vec<String>>> {
    // A zone going insecure, or served unsigned once it has, is the whole
    // signing's: it alone serves a zone with no key left unsigned.
    let has_keys = signed.apex().rrset(heron_proto::RType::DNSKEY).is_some();
    if signing.policy.insecure || !has_keys {
        return None;
    }
    let step = ZoneDiff {
        old_soa: apex_soa(signed)?,
        ..change
    };
    let updated = signed.apply(&step).ok()?;
    let change = heron_zone::diff::diff(signed, &updated);
    let signed = sign_change(signed, &updated, &change, (signing, true)).transpose()?;
    Some(signed.map(|(zone, _)| zone))
}

/// The change from `signed`, the version served of a zone signed here, to
/// `loaded`, its file read again (unsigned), without the records the
/// signer made, which the file lacks; for [`sign_by_change`]. None when
/// the file has records of the signer's types of its own, or a signature
/// of `signed` is due for refresh (which only a whole signing does).
pub fn change_from_signed(signed: &Zone, loaded: &Zone, signing: &Signing) -> Option<ZoneDiff> {
    let now = heron_proto::time::unix_now();
    let within = REFRESH_CHECK.as_secs() as u32;
    let refresh = signing.policy.signature_refresh;
    if heron_dnssec::sign::refresh_due(signed, now, refresh, within) {
        return None;
    }
    // The signer's records of the version served are left out as the
    // zones are walked: a zone of 100,000 names has 300,000 of them.
    let change = heron_zone::diff::diff_leaving_out(signed, loaded, &is_dnssec_type);
    if change.added.iter().any(|r| is_dnssec_type(r.rtype)) {
        return None;
    }
    Some(change)
}

/// The SOA record of `zone`'s apex, as a diff frames it.
fn apex_soa(zone: &Zone) -> Option<DiffRecord> {
    let soa = zone.apex().rrset(heron_proto::RType::SOA)?;
    Some(DiffRecord {
        owner: zone.origin().clone(),
        rtype: heron_proto::RType::SOA,
        ttl: soa.ttl(),
        rdata: soa.rdatas().next()?.to_vec(),
    })
}

/// The zone to sign: the one given, or a version of it made here (its
/// CDS and CDNSKEY, or without a ZONEMD the policy makes none of).
enum ToSign<Z> {
    Given(Z),
    Made(Zone),
}

impl<Z: Borrow<Zone>> Borrow<Zone> for ToSign<Z> {
    fn borrow(&self) -> &Zone {
        match self {
            ToSign::Given(zone) => zone.borrow(),
            ToSign::Made(zone) => zone,
        }
    }
}

impl<Z: Borrow<Zone>> ToSign<Z> {
    /// `made` from this zone if there is one (this one then dropped).
    fn or_made(self, made: Option<Zone>) -> ToSign<Z> {
        made.map_or(self, ToSign::Made)
    }

    fn get(&self) -> &Zone {
        self.borrow()
    }
}

/// The zone signed as `step` says, and its serial kept. A zone given by
/// value is dropped during the signing, before the signed zone is packed.
fn sign_step<Z: Borrow<Zone>>(
    zone: Z,
    previous: Option<&Zone>,
    signing: &Signing,
    step: &key_state::Step,
    now: u64,
) -> Result<heron_dnssec::sign::Signed, Vec<String>> {
    let origin = zone.borrow().origin().clone();
    let policy = &signing.policy;
    let failed = |e: String| vec![format!("zone '{origin}': {e}")];
    // The version served signed again (a key step, a refresh) holds the
    // DNSKEYs of keys the step just took out: no other signer's
    // (regression hunt BC-1: every step that removed a key warned).
    let served_again = previous.is_some_and(|p| std::ptr::eq(p, zone.borrow()));
    let foreign = foreign_dnskeys(zone.borrow(), &step.keys);
    if foreign > 0 && !served_again {
        tracing::warn!(
            zone = %origin,
            foreign,
            "the zone as read has DNSKEY records of keys Heron does not hold: its DNSKEY, \
             RRSIG and NSEC records are replaced by Heron's; if the parent's DS names those \
             keys, import them first (heron keymgr import)"
        );
    }
    let with_cds = key_state::with_cds(zone.borrow(), step, policy.cds_ttl).map_err(failed)?;
    let zone = ToSign::Given(zone).or_made(with_cds);
    let without = (policy.zonemd.is_none())
        .then(|| without_zonemd(zone.get()))
        .transpose()
        .map_err(failed)?
        .flatten();
    let zone = zone.or_made(without);
    let mut config = policy.sign_config();
    // Signatures are looked at once an hour: those that would come due
    // before the next look are made anew now, or a `signature-refresh`
    // under an hour let them expire before the next signing (black-box
    // finding: RRSIGs expired while served).
    let check = REFRESH_CHECK.as_secs() as u32;
    config.refresh = config.refresh.saturating_add(check);
    config.serial = serial_of_signing(zone.get(), previous, signing);
    // A zone gone insecure has no key left: it is served unsigned.
    let unsigned = policy.insecure && step.keys.is_empty();
    let signed = match (policy.zonemd, unsigned) {
        (Some(alg), true) => {
            heron_dnssec::zonemd::unsigned_with_zonemd(zone.get(), config.serial, alg)
        }
        (None, true) => heron_dnssec::sign::unsigned_zone(zone.get(), config.serial),
        (Some(alg), false) => heron_dnssec::zonemd::sign_with_zonemd(
            zone.get(),
            previous,
            &step.keys,
            &config,
            now,
            alg,
        ),
        (None, false) => sign_zone_after(zone, previous, &step.keys, &config, now),
    }
    .map_err(|e| failed(format!("cannot sign: {e}")))?;
    write_served_serial(&signing.key_directory, &origin, signed.zone.serial()).map_err(failed)?;
    Ok(signed)
}

/// The serial a whole signing of `zone` gives it (None: its own), the
/// version served before being `previous`.
fn serial_of_signing(zone: &Zone, previous: Option<&Zone>, signing: &Signing) -> Option<u32> {
    let origin = zone.origin();
    // After a restart the version served last is gone; its serial is kept.
    // A zone served unsigned meanwhile (its policy taken away, the file's
    // older serial served) goes on from the newer of the two: from the
    // unsigned one it went below what secondaries held (black-box
    // finding: they kept the old version).
    // The version served before may have been lost, or be older than the
    // last served (a journal lost or cut short): the serial kept then is
    // passed all the same (black-box finding: 301 served, 203 after a
    // restart without the journal).
    let served = match previous {
        Some(signed) if signed.apex().rrset(RType::DNSKEY).is_some() => newer_serial(
            Some(signed.serial()),
            served_serial_at_start(&signing.key_directory, origin),
        ),
        unsigned => newer_serial(
            unsigned.map(Zone::serial),
            read_served_serial(&signing.key_directory, origin),
        ),
    };
    match unedited_since_signed().contains(&origin.to_lowercase()) {
        // Its file is the one a signing served `served` from (or one
        // before): its serial is no news, whatever serial arithmetic
        // says of it (black-box finding BE-1: updates took the serial
        // 2^31 past the file's, and a restart served the file's again).
        true => served.map(|s| s.wrapping_add(1)),
        false => next_serial(zone.serial(), served),
    }
}

/// The apex DNSKEY records of `zone` that are none of `keys`: a zone file
/// signed by another signer, whose records signing replaces.
fn foreign_dnskeys(zone: &Zone, keys: &[heron_dnssec::sign::ZoneKey]) -> usize {
    let Some(set) = zone.apex().rrset(RType::DNSKEY) else {
        return 0;
    };
    let ours = |rdata: &[u8]| keys.iter().any(|k| k.dnskey == rdata);
    set.rdatas().filter(|r| !ours(r)).count()
}

/// `zone` without its apex ZONEMD RRset, for a policy that makes none
/// (None: it has none). A ZONEMD not made by the signer cannot verify
/// once the zone is signed (its digest covers the RRSIGs and the
/// serial): one a hidden primary sent, or one in a zone file, is dropped,
/// not signed and served as if valid.
fn without_zonemd(zone: &Zone) -> Result<Option<Zone>, String> {
    use heron_proto::RType;
    use heron_zone::diff::DiffRecord;
    let Some(set) = zone.apex().rrset(RType::ZONEMD) else {
        return Ok(None);
    };
    let origin = zone.origin().clone();
    tracing::warn!(zone = %origin, "its ZONEMD is dropped: the policy makes none, and one not made here cannot verify once signed");
    let record = |rtype, ttl, rdata: Vec<u8>| DiffRecord {
        owner: origin.clone(),
        rtype,
        ttl,
        rdata,
    };
    let soa = zone.apex().rrset(RType::SOA).ok_or("no SOA")?;
    let soa = record(RType::SOA, soa.ttl(), soa.first_rdata().into_owned());
    let mut deleted: Vec<DiffRecord> = (set.rdatas())
        .map(|rdata| record(RType::ZONEMD, set.ttl(), rdata.to_vec()))
        .collect();
    deleted.sort();
    let diff = ZoneDiff {
        old_soa: soa.clone(),
        new_soa: soa,
        deleted,
        added: Vec::new(),
    };
    zone.apply(&diff).map(Some).map_err(|problems| {
        let text: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        format!("cannot drop its ZONEMD: {}", text.join("; "))
    })
}

/// Where the serial last served of a signed zone is kept, so that a
/// restart never serves a lower one (secondaries would keep their copy,
/// and its signatures would expire there).
fn served_serial_path(dir: &Path, origin: &Name) -> std::path::PathBuf {
    let zone = origin.to_string().to_ascii_lowercase();
    let zone = zone.trim_end_matches('.');
    let suffix = ".heron-serial";
    let zone = match zone.is_empty() {
        true => "root".to_string(),
        false => heron_dnssec::file_names::zone_in_file_name(zone, "", suffix.len()),
    };
    dir.join(zone + suffix)
}

/// The signed zones (lower-cased origins) whose file, about to be
/// signed, was last written before the zone's last signing: its serial
/// is not the operator's new one ([`note_unedited_file`]).
fn unedited_since_signed() -> std::sync::MutexGuard<'static, HashSet<Name>> {
    static UNEDITED: OnceLock<Mutex<HashSet<Name>>> = OnceLock::new();
    let set = UNEDITED.get_or_init(Default::default);
    set.lock().unwrap_or_else(|e| e.into_inner())
}

/// Before the file of `origin`, read at `file_serial`, is signed under
/// `signing`: notes whether that is the serial the file had when it was
/// last read or written for a signing (kept beside the serial served,
/// [`note_file_serial`]): then it is no news, and the signing goes one
/// past the serial served rather than taking the file's by serial
/// arithmetic, which a serial moved 2^31 or more by updates turns around
/// (black-box findings BE-1, and BG-1: by the file's modification time,
/// a `touch` or a restore brought the old serial back).
pub fn note_unedited_file(origin: &Name, file_serial: u32, signing: &Signing) {
    let kept = read_served(&signing.key_directory, origin).and_then(|k| k.read);
    let mut set = unedited_since_signed();
    match kept == Some(file_serial) {
        true => set.insert(origin.to_lowercase()),
        false => set.remove(&origin.to_lowercase()),
    };
}

/// Keeps `file_serial` as the serial of `origin`'s zone file, read for a
/// signing or written by this server (a write-back of updates), beside
/// the serial served (a `read N` line), if the zone is signed here.
pub fn note_file_serial(origin: &Name, file_serial: u32) {
    let Some(signing) = signed_under().get(&origin.to_lowercase()).cloned() else {
        return;
    };
    let dir = &signing.key_directory;
    let Some(kept) = read_served(dir, origin) else {
        return; // nothing served signed yet: the file's serial is new
    };
    let file = kept.file.map(|f| format!("file {f}\n")).unwrap_or_default();
    let text = format!("{}\n{file}read {file_serial}\n", kept.served);
    if let Err(e) = write_serial_text(dir, origin, &text) {
        tracing::warn!(zone = %origin, "{e}; a restart may take the file's serial for new");
    }
}

/// After the signing [`note_unedited_file`] was for (which may not have
/// needed it): no later signing of another version takes the note.
pub fn forget_unedited_file(origin: &Name) {
    unedited_since_signed().remove(&origin.to_lowercase());
}

fn read_served_serial(dir: &Path, origin: &Name) -> Option<u32> {
    read_served(dir, origin).map(|kept| kept.served)
}

/// The serial last served of `origin`, signed under `signing`, as kept
/// before this start ([`served_serial_at_start`]).
pub fn served_before_start(signing: &Signing, origin: &Name) -> Option<u32> {
    served_serial_at_start(&signing.key_directory, origin)
}

/// The serial kept in `dir` for `origin` as the first signing of this
/// run read it: the one served before the start. Read once, so that the
/// signings of a start (the file, then its journal's updates carried
/// over) take one serial past it, not one each; later signings go on
/// from the version served, which is past it.
fn served_serial_at_start(dir: &Path, origin: &Name) -> Option<u32> {
    static AT_START: OnceLock<Mutex<HashMap<std::path::PathBuf, Option<u32>>>> = OnceLock::new();
    let map = AT_START.get_or_init(Default::default);
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    *(map.entry(served_serial_path(dir, origin))).or_insert_with(|| read_served_serial(dir, origin))
}

/// The serial last served, and for a zone served unsigned past it the
/// file serial it was served for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServedSerial {
    pub served: u32,
    pub file: Option<u32>,
    /// For a zone signed here: its file's serial when last read for a
    /// signing or written ([`note_file_serial`]).
    pub read: Option<u32>,
}

/// The kept serial: its first line, and a second `file N` line when the
/// zone was served unsigned (a signing writes the first line only).
fn read_served(dir: &Path, origin: &Name) -> Option<ServedSerial> {
    let path = served_serial_path(dir, origin);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => return unreadable_serial(origin, &path, &e.to_string()),
    };
    let mut lines = text.get(..text.len().min(64)).unwrap_or("").lines();
    let Some(served) = lines.next().and_then(|l| l.trim().parse().ok()) else {
        return unreadable_serial(origin, &path, "no serial on its first line");
    };
    let (mut file, mut read) = (None, None);
    for line in lines {
        let number = |prefix| {
            line.trim()
                .strip_prefix(prefix)
                .and_then(|n| n.trim().parse().ok())
        };
        file = file.or(number("file "));
        read = read.or(number("read "));
    }
    Some(ServedSerial { served, file, read })
}

/// A kept serial that cannot be read is said (black-box finding: a
/// garbage or empty one was passed over in silence), and not used: the
/// serial may then go back to the file's or the signed copy's.
/// Said once for each file and reason: it is read at each signing, and an
/// update signed each time said it again (regression hunt BR-6: a line
/// an update). The set holds the serial files of the zones signed here.
fn unreadable_serial(origin: &Name, path: &Path, why: &str) -> Option<ServedSerial> {
    static SAID: Mutex<Option<HashSet<(std::path::PathBuf, String)>>> = Mutex::new(None);
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if said
        .get_or_insert_default()
        .insert((path.to_path_buf(), why.to_string()))
    {
        tracing::warn!(
            zone = %origin,
            "the serial last served, kept in {}, cannot be read ({why}): not used, so the serial served may go back",
            path.display()
        );
    }
    None
}

/// Zones served unsigned that were signed here, and take no updates,
/// each with the directory its served serial is kept in (the key
/// directory it had): found at the start and at each reconfigure.
fn unsigned_served() -> std::sync::MutexGuard<'static, HashMap<Name, std::path::PathBuf>> {
    static UNSIGNED: OnceLock<Mutex<HashMap<Name, std::path::PathBuf>>> = OnceLock::new();
    let map = UNSIGNED.get_or_init(Default::default);
    map.lock().unwrap_or_else(|e| e.into_inner())
}

/// Finds, among the zones of `settings` served unsigned from a zone file
/// that take no updates (their journal carries their serial), those with
/// a serial kept from when they were signed here: in the default key
/// directory, or the one noted beside the file. Each directory is listed
/// once, not asked zone by zone.
pub fn find_unsigned_served(settings: &crate::config::Settings, config: &Path) {
    use crate::plan::key_notes;
    let takes_updates =
        |origin: &Name| (settings.policies.get(origin)).is_some_and(|p| p.takes_updates());
    let unsigned: Vec<(&Name, std::path::PathBuf)> = (settings.zones.iter())
        .filter(|z| z.signing.is_none() && !takes_updates(&z.origin))
        .map(|z| (&z.origin, z.file.clone()))
        .collect();
    let mut by_directory: HashMap<std::path::PathBuf, Vec<&Name>> = HashMap::new();
    let noted = key_notes::noted(unsigned.clone());
    let noted_origins: std::collections::HashSet<&Name> = noted.iter().map(|(o, _)| *o).collect();
    for (origin, dir) in noted {
        by_directory.entry(dir).or_default().push(origin);
    }
    let default = key_notes::default_key_directory(config);
    (by_directory.entry(default).or_default()).extend(
        unsigned
            .iter()
            .map(|(o, _)| *o)
            .filter(|o| !noted_origins.contains(o)),
    );
    let mut found = HashMap::new();
    for (dir, origins) in by_directory {
        let Ok(listing) = fs::read_dir(&dir) else {
            continue;
        };
        let names: std::collections::HashSet<std::ffi::OsString> =
            listing.filter_map(|e| Some(e.ok()?.file_name())).collect();
        for origin in origins {
            let path = served_serial_path(&dir, origin);
            if path.file_name().is_some_and(|n| names.contains(n)) {
                found.insert(origin.to_lowercase(), dir.clone());
            }
        }
    }
    *unsigned_served() = found;
}

/// The serial of the file of a zone signed here before that is served
/// unsigned at `served`, a serial kept past the signed versions'
/// ([`unsigned_serial_past_the_signed`]); None when it is served at its
/// file's own.
pub fn file_serial_of_served(origin: &Name, served: u32) -> Option<u32> {
    let dir = unsigned_served().get(&origin.to_lowercase()).cloned()?;
    let kept = read_served(&dir, origin)?;
    kept.file.filter(|_| kept.served == served)
}

/// For a zone signed here before and served unsigned now from a file
/// whose serial is not past the one last served: the serial to serve,
/// since secondaries take only a newer one (the same serial for the same
/// file serial, as after a restart; one past for a file changed since),
/// kept for the next start. None: serve the file's own.
pub fn unsigned_serial_past_the_signed(origin: &Name, file_serial: u32) -> Option<u32> {
    let dir = unsigned_served().get(&origin.to_lowercase()).cloned()?;
    let kept = read_served(&dir, origin)?;
    if heron_xfr::serial::is_newer(file_serial, kept.served) {
        return None;
    }
    if kept.file == Some(file_serial) {
        return (kept.served != file_serial).then_some(kept.served);
    }
    let serial = kept.served.wrapping_add(1);
    let path = served_serial_path(&dir, origin);
    let tmp = path.with_extension("heron-serial.tmp");
    let written = fs::write(&tmp, format!("{serial}\nfile {file_serial}\n"))
        .and_then(|()| fs::rename(&tmp, &path));
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        // Served all the same: this serial is past every one served.
        tracing::warn!(zone = %origin, "cannot keep the serial served in {}: {e}; a restart may serve an older one", path.display());
    }
    Some(serial)
}

/// Written to a temporary file and renamed: a crash leaves the old or the
/// new serial, never half of one.
/// The file's serial noted before ([`note_file_serial`]) is kept.
fn write_served_serial(dir: &Path, origin: &Name, serial: u32) -> Result<(), String> {
    let read = read_served(dir, origin).and_then(|k| k.read);
    let text = match read {
        Some(read) => format!("{serial}\nread {read}\n"),
        None => format!("{serial}\n"),
    };
    write_serial_text(dir, origin, &text)
}

fn write_serial_text(dir: &Path, origin: &Name, text: &str) -> Result<(), String> {
    let path = served_serial_path(dir, origin);
    let tmp = path.with_extension("heron-serial.tmp");
    let written = fs::write(&tmp, text).and_then(|()| fs::rename(&tmp, &path));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written.map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The serial of a new signing: the file's, unless the version served
/// has it or a later one (serial arithmetic, RFC 1982), then one past.
/// The newer of two serials (RFC 1982), either of which may be unknown.
fn newer_serial(a: Option<u32>, b: Option<u32>) -> Option<u32> {
    match (a, b) {
        (Some(a), Some(b)) if b.wrapping_sub(a) as i32 > 0 => Some(b),
        (a, b) => a.or(b),
    }
}

fn next_serial(file: u32, served: Option<u32>) -> Option<u32> {
    let served = served?;
    let ahead = file.wrapping_sub(served) as i32 > 0;
    (!ahead).then(|| served.wrapping_add(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::key_state::KEY_SUFFIX;
    use heron_dnssec::policy::{KeySet, Policy};
    use std::os::unix::fs::PermissionsExt;
    use std::sync::Arc;

    const ZONE: &str = "@ 300 IN SOA ns hm 7 2 3 4 5\n@ 300 IN NS ns\nns 300 IN A 192.0.2.1\n";

    fn load() -> Zone {
        heron_zone::load_zone_str(ZONE, "t", &Name::parse("k.test").unwrap())
            .unwrap()
            .zone
    }

    /// A file signed by another signer is told apart from one holding
    /// Heron's own DNSKEYs (black-box finding: its records were dropped
    /// without a word).
    #[test]
    fn dnskeys_heron_does_not_hold_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        let signing = Signing {
            policy: Arc::new(Policy::default()),
            key_directory: dir.path().join("keys"),
        };
        let signed = sign_loaded(load(), None, &signing).unwrap();
        let step = key_state::step(
            &Name::parse("k.test").unwrap(),
            &signing.policy,
            &signing.key_directory,
            300,
            heron_proto::time::unix_now(),
        )
        .unwrap();
        assert_eq!(foreign_dnskeys(&load(), &step.keys), 0, "none at all");
        assert_eq!(foreign_dnskeys(&signed, &step.keys), 0, "Heron's own");
        assert_eq!(foreign_dnskeys(&signed, &[]), 1, "another signer's");
    }

    #[test]
    fn keys_are_made_once_owner_only_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("keys");
        let signing = Signing {
            policy: Arc::new(Policy {
                keys: KeySet::KskZsk,
                ..Policy::default()
            }),
            key_directory: keys.clone(),
        };
        let first = sign_loaded(load(), None, &signing).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&keys), 0o700);
        let files: Vec<_> = fs::read_dir(&keys).unwrap().flatten().collect();
        let files: Vec<_> = files
            .into_iter()
            .filter(|f| f.file_name().to_string_lossy().ends_with(KEY_SUFFIX))
            .collect();
        assert_eq!(files.len(), 2, "a KSK and a ZSK");
        for f in &files {
            assert_eq!(mode(&f.path()), 0o600);
        }
        let dnskeys = |z: &Zone| -> Vec<Vec<u8>> {
            let set = z.apex().rrset(heron_proto::RType::DNSKEY).unwrap();
            let mut all: Vec<Vec<u8>> = set.rdatas().map(|r| r.to_vec()).collect();
            all.sort();
            all
        };
        let second = sign_loaded(load(), Some(&first), &signing).unwrap();
        assert_eq!(dnskeys(&first), dnskeys(&second), "the same keys");
        assert_eq!(
            fs::read_dir(&keys).unwrap().count(),
            4,
            "two keys, one serial, one key state file"
        );
        assert_eq!(mode(&keys.join("k.test.keys.json")), 0o600);
        assert_eq!((first.serial(), second.serial()), (7, 8));
        // A restart (no version served) goes on from the serial kept.
        let third = sign_loaded(load(), None, &signing).unwrap();
        assert_eq!(third.serial(), 9);
        assert_eq!(
            fs::read_dir(&keys).unwrap().count(),
            4,
            "two keys, one serial, one key state file"
        );
    }

    /// A file read again with one name more is signed by that change:
    /// the name and its chain neighbours get signatures, everything else
    /// keeps its own, and the result is what a whole signing would serve.
    /// A file with a DNSKEY of its own is not taken by change.
    #[test]
    fn a_reloaded_file_is_signed_by_its_change() {
        let dir = tempfile::tempdir().unwrap();
        let signing = Signing {
            policy: Arc::new(Policy::default()),
            key_directory: dir.path().join("keys"),
        };
        // A zone of its own: the signings of the other tests, run at once,
        // share the per-zone state of "k.test" (a failure seen once).
        let origin = Name::parse("by-change.test").unwrap();
        let first = heron_zone::load_zone_str(ZONE, "t", &origin).unwrap().zone;
        let signed = sign_loaded(first, None, &signing).unwrap();
        let text = ZONE.replace("hm 7 ", "hm 8 ") + "www 300 IN A 192.0.2.80\n";
        let loaded = heron_zone::load_zone_str(&text, "t", &origin).unwrap().zone;
        let change = change_from_signed(&signed, &loaded, &signing).expect("taken by change");
        assert_eq!(
            change.deleted,
            [],
            "the signer's records are not the file's change"
        );
        assert_eq!(change.added.len(), 1);
        let next = sign_by_change(&signed, change, &signing).unwrap().unwrap();
        assert_eq!(next.serial(), 8);
        let www = Name::parse("www.by-change.test").unwrap();
        let node = next.node(www.to_lowercase().as_wire()).expect("www");
        assert!(
            node.rrset(heron_proto::RType::A)
                .is_some_and(|a| a.sigs().count() == 1)
        );
        assert!(node.rrset(heron_proto::RType::NSEC).is_some(), "chained");
        let new_sigs = heron_zone::diff::diff(&signed, &next)
            .added
            .iter()
            .filter(|r| r.rtype == heron_proto::RType::RRSIG)
            .count();
        assert!(
            new_sigs <= 3 + 10,
            "{new_sigs} new signatures for one RRset"
        );
        let key = format!("{}==", "A".repeat(86));
        let with_key = format!("{text}@ 300 IN DNSKEY 257 3 13 {key}\n");
        let loaded = heron_zone::load_zone_str(&with_key, "t", &origin).unwrap();
        assert!(change_from_signed(&signed, &loaded.zone, &signing).is_none());
        // A version served unsigned (gone insecure) is signed whole.
        let unsigned = load();
        let plain = heron_zone::load_zone_str(&text, "t", &origin).unwrap().zone;
        let change = heron_zone::diff::diff(&unsigned, &plain);
        assert!(sign_by_change(&unsigned, change, &signing).is_none());
    }

    #[test]
    fn a_new_signing_moves_the_serial_past_the_one_served() {
        assert_eq!(next_serial(7, None), None);
        assert_eq!(next_serial(8, Some(7)), None, "the file is ahead");
        assert_eq!(next_serial(7, Some(7)), Some(8));
        assert_eq!(next_serial(7, Some(9)), Some(10));
        assert_eq!(next_serial(u32::MAX, Some(u32::MAX)), Some(0));
        assert_eq!(next_serial(3, Some(u32::MAX - 2)), None, "wrapped ahead");
    }

    #[test]
    fn a_broken_key_file_stops_the_signing_with_its_name() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("Kk.test+013+00001.csk.heron-key"),
            "zone: x",
        )
        .unwrap();
        let signing = Signing {
            policy: Arc::new(Policy::default()),
            key_directory: dir.path().to_path_buf(),
        };
        let errors = sign_loaded(load(), None, &signing).unwrap_err();
        assert!(errors[0].contains("heron-key"), "{errors:?}");
    }
}
