//! A signed zone's keys through their rollovers: the zone's state file in
//! the key directory, moved on by the I/O-free state machine
//! (`heron_dnssec::rollover`) at each signing, the keys it asks for
//! generated, and what the step publishes (DNSKEY RRset, which key signs
//! what, CDS/CDNSKEY) handed to the signer.
//!
//! Every read-change-write of a state file holds that file's lock
//! ([`file_lock`]), so the signing (on a load thread) and the rollover
//! driver (parent checks, `heron ctl ds-seen`) never drop each other's
//! change, while the zones of a load are signed in parallel. It also
//! holds the key directory shared ([`lock_directory`]), which `heron
//! keymgr` run beside the server holds alone: neither drops the other's
//! change either.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use heron_dnssec::dnskey::key_tag;
use heron_dnssec::ds::{CDNSKEY_DELETE, CDS_DELETE, DigestType, cdnskey_rdata, ds_rdata};
use heron_dnssec::keys::{KeyFile, KeyRole, MAX_KEY_FILE, SigningKey};
use heron_dnssec::policy::Policy;
use heron_dnssec::rollover::state_file::{ZoneKeys, file_name};
use heron_dnssec::rollover::waits::effective_policy;
use heron_dnssec::rollover::{
    Event, Goal, Key, KeyRequest, Plan, RecordKind, Role, Rollover, State, UnixTime,
};
use heron_dnssec::sign::ZoneKey;
use heron_proto::{Name, RType};
use heron_sys::files::LockKind;

/// The lock of one state file, made at its first use (one per signed
/// zone, kept while the process runs).
pub fn file_lock(path: &Path) -> Arc<Mutex<()>> {
    static LOCKS: OnceLock<Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>> = OnceLock::new();
    let mut all = (LOCKS.get_or_init(Default::default).lock()).unwrap_or_else(|e| e.into_inner());
    all.entry(path.to_path_buf()).or_default().clone()
}

/// How a key directory is held: shared by the server's threads, alone
/// by `heron keymgr`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Hold {
    Shared,
    Alone,
}

/// How long the server waits for a key directory that `heron keymgr`
/// holds: a keymgr stopped (^Z, SIGSTOP) while holding it must not stall
/// the signing, reloads and updates that wait behind it for ever.
const SHARED_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// An advisory lock (flock) on the key directory `dir`, held until the
/// returned file is dropped; it waits for a holder that excludes it (the
/// server, [`Hold::Shared`], for [`SHARED_WAIT`] at most, then fails).
/// None when there is no directory yet (nobody can be writing in it).
pub fn lock_directory(dir: &Path, hold: Hold) -> Result<Option<fs::File>, String> {
    let folder = match fs::File::open(dir) {
        Ok(folder) => folder,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    let locked = match hold {
        Hold::Shared => lock_within(&folder, LockKind::Shared, SHARED_WAIT),
        Hold::Alone => heron_sys::files::lock(&folder, LockKind::Exclusive).map(|()| true),
    };
    match locked {
        Ok(true) => Ok(Some(folder)),
        Ok(false) => Err(format!(
            "{} is held by another process (heron keymgr?) for over {} s; tried again later",
            dir.display(),
            SHARED_WAIT.as_secs()
        )),
        Err(e) => Err(format!("cannot lock {}: {e}", dir.display())),
    }
}

/// Takes the lock within `wait`; false if it is still held by then.
fn lock_within(
    folder: &fs::File,
    kind: LockKind,
    wait: std::time::Duration,
) -> std::io::Result<bool> {
    let deadline = std::time::Instant::now() + wait;
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        if heron_sys::files::try_lock(folder, kind)? {
            return Ok(true);
        }
        if std::time::Instant::now() >= deadline {
            return Ok(false);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(50));
    }
}

/// Suffix of Heron's key files in a key directory.
pub const KEY_SUFFIX: &str = ".heron-key";

/// What one signing of a zone uses: the keys of the DNSKEY RRset (each
/// told what it signs) and the CDS and CDNSKEY RDATA to publish.
pub struct Step {
    pub keys: Vec<ZoneKey>,
    pub cds: Vec<Vec<u8>>,
    pub cdnskey: Vec<Vec<u8>>,
    /// Set when the step changed the state file.
    pub undo: Option<Undo>,
}

/// The state file of `zone` in `dir`.
pub fn state_path(dir: &Path, zone: &str) -> PathBuf {
    dir.join(file_name(zone))
}

/// The zone's name as key files and state files spell it: lower case,
/// with the final dot.
pub fn zone_text(origin: &Name) -> String {
    origin.to_string().to_ascii_lowercase()
}

/// Moves the zone's keys on at `now` under `policy` (the zone's largest
/// TTL `zone_max_ttl`), generating what the step needs and writing the
/// state file; what the signing publishes. `served`: the version served
/// now, if any (no key is made over a signed one, [`keys_lost`]).
pub fn step_over(
    origin: &Name,
    policy: &Policy,
    dir: &Path,
    zone_max_ttl: u32,
    now: UnixTime,
    served: Option<&heron_zone::Zone>,
) -> Result<Step, String> {
    ensure_private_directory(dir)?;
    note_key_directory(dir);
    let zone = zone_text(origin);
    let path = state_path(dir, &zone);
    let lock = file_lock(&path);
    let _held = lock.lock().unwrap_or_else(|e| e.into_inner());
    let _shared = lock_directory(dir, Hold::Shared)?;
    let existed = path.exists();
    let state = load_or_adopt(&path, dir, &zone, policy, now)?;
    first_keys_fit(&state, policy, dir, &zone)?;
    keys_lost(&state, policy, (dir, &zone, existed), served)?;
    if !existed && !state.keys.is_empty() {
        tracing::info!(
            zone,
            keys = state.keys.len(),
            "DNSSEC keys taken into a new key state file"
        );
    }
    // A TTL or delay lowered still counts at its old value while what was
    // served under it can be cached.
    let configured = policy.rollover_policy(zone_max_ttl);
    let (rollover_policy, waits) =
        effective_policy(configured, state.waits, state.policy.as_ref(), now);
    let mut machine = Rollover::new(rollover_policy.clone(), state.keys.clone());
    // The keys this step makes: their files go again if the step fails,
    // so that no private key is left that no state file names.
    let mut made = Vec::new();
    let mut step = (machine.advance_generating(now, |request| {
        let key = generate(dir, &zone, request, now)?;
        made.push(key.id.clone());
        Ok(key)
    }))
    // Every key file the step needs is read before anything is written.
    .and_then(|plan| publish(origin, dir, machine.keys(), plan))
    .inspect_err(|_| remove_key_files(dir, &made))?;
    let purged = forget_purged(&mut machine, policy.purge_keys, now);
    let saved = ZoneKeys {
        policy: Some(rollover_policy),
        waits: Some(waits),
        ..ZoneKeys::new(&zone, machine.keys().to_vec())
    };
    // Unchanged (a reload of a settled zone), the file is not rewritten.
    if !existed || saved != state {
        (saved.save(&path).map_err(|e| e.to_string()))
            .inspect_err(|_| remove_key_files(dir, &made))?;
        log_changes(&zone, &state.keys, machine.keys());
        remove_purged(dir, &zone, &state.keys, &purged);
        step.undo = Some(Undo {
            path,
            // A key purged stays purged: its file is gone.
            before: ZoneKeys {
                keys: (state.keys.into_iter())
                    .filter(|k| !purged.contains(&k.id))
                    .collect(),
                ..state
            },
            written: saved,
            made,
        });
    }
    Ok(step)
}

/// [`step_over`] with no version served.
#[cfg(test)]
pub fn step(
    origin: &Name,
    policy: &Policy,
    dir: &Path,
    zone_max_ttl: u32,
    now: UnixTime,
) -> Result<Step, String> {
    step_over(origin, policy, dir, zone_max_ttl, now, None)
}

/// The retired keys no cache has held for `purge` seconds (0: never, as
/// BIND's `purge-keys`), forgotten by `machine`: their ids.
fn forget_purged(machine: &mut Rollover, purge: u32, now: UnixTime) -> Vec<String> {
    if purge == 0 {
        return Vec::new();
    }
    let due = |k: &&Key| {
        k.is_gone() && (k.removed).is_some_and(|at| now >= at.saturating_add(u64::from(purge)))
    };
    let ids: Vec<String> = machine
        .keys()
        .iter()
        .filter(due)
        .map(|k| k.id.clone())
        .collect();
    for id in &ids {
        // A key gone from every cache can always be forgotten.
        let _ = machine.handle(Event::Forget(id.clone()), now);
    }
    ids
}

/// Deletes the files of the keys `purged` (of the `before` state) once
/// the state file no longer names them.
fn remove_purged(dir: &Path, zone: &str, before: &[Key], purged: &[String]) {
    for key in before.iter().filter(|k| purged.contains(&k.id)) {
        let path = dir.join(format!("{}{KEY_SUFFIX}", key.id));
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(zone, "cannot remove {}: {e}", path.display()),
        }
        tracing::info!(
            zone,
            key = key.tag,
            role = ?key.role,
            "DNSSEC key {} purged: retired, and in no cache for the policy's purge-keys",
            key.tag
        );
    }
}

/// Removes the key files of `ids`, made by a step that did not happen.
fn remove_key_files(dir: &Path, ids: &[String]) {
    for id in ids {
        let path = dir.join(format!("{id}{KEY_SUFFIX}"));
        match fs::remove_file(&path) {
            Ok(()) => tracing::info!(file = %path.display(), "DNSSEC key removed: its step failed"),
            Err(e) => tracing::warn!("cannot remove {}: {e}", path.display()),
        }
    }
}

/// What a step wrote, to take back if the signing it was for fails:
/// otherwise the keys' timeline would count from a version never served.
pub struct Undo {
    path: PathBuf,
    /// As read, or as taken up from the key files when there was no file
    /// (written back then too: keys the failed step made were never
    /// served, and must not be taken up as if they had been).
    before: ZoneKeys,
    written: ZoneKeys,
    /// The ids of the keys the step made (not in `before`).
    made: Vec<String>,
}

/// Puts the state file back as it was before `step`, unless it changed
/// since (an event was recorded meanwhile: that one is kept).
pub fn undo(step: &mut Step) {
    let Some(undo) = step.undo.take() else {
        return;
    };
    let lock = file_lock(&undo.path);
    let _held = lock.lock().unwrap_or_else(|e| e.into_inner());
    let dir = undo.path.parent().unwrap_or(Path::new("."));
    let Ok(_shared) = lock_directory(dir, Hold::Shared) else {
        return;
    };
    if ZoneKeys::load(&undo.path).ok().as_ref() != Some(&undo.written) {
        return;
    }
    match undo.before.save(&undo.path) {
        Ok(()) => remove_key_files(dir, &undo.made),
        Err(e) => tracing::warn!("cannot put back {}: {e}", undo.path.display()),
    }
}

/// Applies `event` to the zone's state file at `now` (the policy it
/// recorded stays); whether the file exists.
pub fn handle_event(dir: &Path, zone: &str, event: Event, now: UnixTime) -> Result<(), String> {
    let path = state_path(dir, zone);
    let lock = file_lock(&path);
    let _held = lock.lock().unwrap_or_else(|e| e.into_inner());
    let _shared = lock_directory(dir, Hold::Shared)?;
    let state = ZoneKeys::load(&path).map_err(|e| e.to_string())?;
    let Some(policy) = state.policy.clone() else {
        return Err(format!("{}: no policy recorded yet", path.display()));
    };
    let mut machine = Rollover::new(policy, state.keys.clone());
    machine.handle(event, now).map_err(|e| e.to_string())?;
    let changed = ZoneKeys {
        keys: machine.keys().to_vec(),
        ..state
    };
    changed.save(&path).map_err(|e| e.to_string())
}

/// The key `name` names: its id, or its tag (which must then be
/// unambiguous).
pub fn find_key<'a>(keys: &'a [Key], name: &str) -> Result<&'a Key, String> {
    if let Some(key) = keys.iter().find(|k| k.id == name) {
        return Ok(key);
    }
    let tag: Option<u16> = name.parse().ok();
    let mut by_tag = keys.iter().filter(|k| Some(k.tag) == tag);
    match (by_tag.next(), by_tag.next()) {
        (Some(key), None) => Ok(key),
        (Some(_), Some(_)) => Err(format!("several keys have tag {name}: name one by its id")),
        _ => Err(format!("no key {name}")),
    }
}

/// The ids of the keys a roll of `name` asks to replace: the key of that
/// id or tag, or every key of a role (`ksk`, `zsk`, `csk`) in use or
/// coming into use. A key already retiring has nothing left to roll.
pub fn keys_to_roll(keys: &[Key], name: &str) -> Result<Vec<String>, String> {
    let role = match name.to_ascii_lowercase().as_str() {
        "ksk" => Some(Role::Ksk),
        "zsk" => Some(Role::Zsk),
        "csk" => Some(Role::Csk),
        _ => None,
    };
    let Some(role) = role else {
        let key = find_key(keys, name)?;
        if key.goal == Goal::Hidden {
            // Every record of a key gone is hidden; one retiring still has
            // some out (black-box finding CA-7: "already retiring" of a
            // key removed long ago).
            let gone = [&key.dnskey, &key.zone_rrsig, &key.ds]
                .iter()
                .all(|r| r.state == State::Hidden);
            return Err(match gone {
                true => format!("key {name} is retired and removed: nothing left to roll"),
                false => format!("key {name} is already retiring"),
            });
        }
        return Ok(vec![key.id.clone()]);
    };
    let ids: Vec<String> = (keys.iter())
        .filter(|k| k.role == role && k.goal == Goal::Omnipresent)
        .map(|k| k.id.clone())
        .collect();
    if ids.is_empty() {
        return Err(format!("the zone has no {name} in use"));
    }
    Ok(ids)
}

/// Why `origin`, signed with its keys in `dir`, may not lose its
/// `dnssec-policy` now: its key state file says a DS of the zone may be
/// at the parent or in caches, and the zone served unsigned would be
/// bogus to every validator. None when no DS was ever published or the
/// last one has left every cache (the end of `dnssec-policy = "insecure"`).
pub fn unsigning_refused(origin: &Name, dir: &Path) -> Option<String> {
    let zone = zone_text(origin);
    let state = match read_state(dir, &zone) {
        Ok(state) => state?,
        Err(e) => {
            tracing::warn!(
                zone,
                "dnssec-policy removed; its key state is unreadable: {e}"
            );
            return None;
        }
    };
    may_have_ds(&state).then(|| {
        format!(
            "zone '{zone}': dnssec-policy removed while the parent may still hold its DS: \
             served unsigned, it would fail validation. Set dnssec-policy = \"insecure\" \
             and remove it once `heron ctl keys {zone}` shows every key removed \
             (docs/operations.md, \"Unsigning a zone\")"
        )
    })
}

/// Whether a DS of the zone may be at the parent or in caches: a key
/// that signs keys whose DS is not gone.
fn may_have_ds(state: &ZoneKeys) -> bool {
    (state.keys.iter())
        .any(|k| k.role.signs_keys() && (k.ds.state != State::Hidden || k.ds_offered))
}

/// Why the keys of `origin` may not move from `old` to `new` (another
/// `key-directory`): `old`'s state file says a DS of the zone may be at
/// the parent, and `new` holds no state of the zone, so the signer would
/// make new keys and sign with them at once, and every validator would
/// find the zone bogus. None when the directories are one, when `new`
/// already holds the zone's state (the keys were moved with it), or when
/// no DS of the old keys may be out.
pub fn key_move_refused(origin: &Name, old: &Path, new: &Path) -> Option<String> {
    let zone = zone_text(origin);
    let same = crate::plan::key_notes::same_directory(old, new);
    if same || state_path(new, &zone).exists() {
        return None;
    }
    let state = read_state(old, &zone).ok()??;
    may_have_ds(&state).then(|| {
        format!(
            "zone '{zone}': key-directory changed from {} to {}, which holds none of its \
             keys, while the parent may hold the DS of those in {}: signed with new keys \
             the zone would fail validation. Move the zone's key files and {} into {} \
             first, or keep the key-directory",
            old.display(),
            new.display(),
            old.display(),
            file_name(&zone),
            new.display()
        )
    })
}

/// [`key_move_refused`] at a start, for a `key-directory` changed while
/// the server was stopped: each zone Heron signs against where its keys
/// were (the note beside its file, or the default directory).
pub fn moved_keys_at_start(settings: &crate::config::Settings, config: &Path) -> Vec<String> {
    moved_keys_among(settings, config, &|_| true)
}

/// [`moved_keys_at_start`] for the zones `among` says.
pub fn moved_keys_among(
    settings: &crate::config::Settings,
    config: &Path,
    among: &dyn Fn(&Name) -> bool,
) -> Vec<String> {
    let moved = crate::plan::key_notes::previous_key_directories(settings, config);
    (moved.into_iter())
        .filter(|(origin, _, _)| among(origin))
        .filter_map(|(origin, old, new)| key_move_refused(origin, &old, new))
        .collect()
}

/// [`unsigning_refused`] at a start, for a `dnssec-policy` removed while
/// the server was stopped: the zones of `settings` that Heron does not
/// sign whose state file says a DS may be at the parent, found in the
/// default key directory (`keys` beside `config`) or, for keys in a
/// `key-directory` of its own, where the note beside the zone's file
/// says (`key_notes`).
pub fn unsigned_with_ds_at_start(settings: &crate::config::Settings, config: &Path) -> Vec<String> {
    unsigned_with_ds_among(settings, config, &|_| true)
}

/// [`unsigned_with_ds_at_start`] for the zones `among` says.
pub fn unsigned_with_ds_among(
    settings: &crate::config::Settings,
    config: &Path,
    among: &dyn Fn(&Name) -> bool,
) -> Vec<String> {
    use crate::plan::key_notes;
    let mut unsigned = key_notes::unsigned_zones(settings);
    unsigned.retain(|(origin, _)| among(origin));
    let default = key_notes::default_key_directory(config);
    note_key_directory(&default);
    let configured = settings.zones.iter().filter_map(|z| z.signing.as_ref());
    configured.for_each(|s| note_key_directory(&s.key_directory));
    let mut refused = unsigned_with_ds(unsigned.iter().map(|(origin, _)| *origin), &default);
    // Each directory the notes name is listed once, for all its zones.
    let mut by_directory: HashMap<PathBuf, Vec<&Name>> = HashMap::new();
    for (origin, dir) in key_notes::noted(unsigned) {
        by_directory.entry(dir).or_default().push(origin);
    }
    for (dir, origins) in &by_directory {
        refused.extend(unsigned_with_ds(origins.iter().copied(), dir));
    }
    refused
}

/// Of `origins`, those whose state file in `dir` refuses their unsigning,
/// each with why.
fn unsigned_with_ds<'a>(origins: impl Iterator<Item = &'a Name>, dir: &Path) -> Vec<String> {
    with_ds_in(origins, dir)
        .into_iter()
        .map(|(_, why)| why)
        .collect()
}

/// Of `origins`, those whose state file in `dir` says a DS may be at the
/// parent, each with why. The directory is listed once: most of 100,000
/// unsigned zones have no state file, and are not looked up one by one.
fn with_ds_in<'a>(origins: impl Iterator<Item = &'a Name>, dir: &Path) -> Vec<(&'a Name, String)> {
    let Ok(listing) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let state_files: HashSet<String> = listing
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .collect();
    origins
        .filter(|origin| state_files.contains(&file_name(&zone_text(origin))))
        .filter_map(|origin| {
            let why = unsigning_refused(origin, dir)?;
            let path = state_path(dir, &zone_text(origin));
            let said = format!(
                "{why}; if the parent holds no DS of it, move {} away",
                path.display()
            );
            Some((origin, said))
        })
        .collect()
}

/// The key directories this server signed from or looked in this run
/// (each `key-directory`, and the default beside the configuration): where
/// a zone signed here before, since taken out, has its state file.
static KNOWN_KEY_DIRECTORIES: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

fn note_key_directory(dir: &Path) {
    let mut known = KNOWN_KEY_DIRECTORIES
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if !known.contains(dir) {
        known.insert(dir.to_path_buf());
    }
}

/// Of `origins` (catalog members, served unsigned), those whose state
/// file in a key directory of this run says a DS may be at the parent:
/// each with why. A signed zone taken out, then listed by a consumed
/// catalog, would be served bogus (regression hunt BR-2).
pub fn members_held_for_their_ds<'a>(origins: &[&'a Name]) -> Vec<(&'a Name, String)> {
    let known: Vec<PathBuf> = {
        let known = KNOWN_KEY_DIRECTORIES
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        known.iter().cloned().collect()
    };
    let mut held: Vec<(&Name, String)> = Vec::new();
    for dir in &known {
        let left = origins
            .iter()
            .copied()
            .filter(|o| held.iter().all(|(h, _)| h != o));
        held.extend(with_ds_in(left, dir));
    }
    held
}

/// Refuses a step that would start from no keys (a state file listing
/// none, or neither a state file nor key files: a key directory emptied,
/// unmounted or restored badly) while `served` is signed, its DNSKEYs
/// perhaps named by the parent's DS. New keys signing alone would leave
/// that DS without its key, the zone bogus at every validator at once
/// (black-box finding CA-1: done without a word). A policy going
/// insecure makes no key.
fn keys_lost(
    state: &ZoneKeys,
    policy: &Policy,
    (dir, zone, existed): (&Path, &str, bool),
    served: Option<&heron_zone::Zone>,
) -> Result<(), String> {
    let dnskeys = served.and_then(|z| z.apex().rrset(RType::DNSKEY));
    let Some(dnskeys) = dnskeys.filter(|_| state.keys.is_empty() && !policy.insecure) else {
        return Ok(());
    };
    let tags: Vec<String> = (dnskeys.rdatas())
        .map(|rdata| key_tag(&rdata).to_string())
        .collect();
    Err(format!(
        "the key directory {} holds no key of the zone ({}), but the version served is signed \
         with DNSKEY {}: new keys now would leave the parent's DS without its key, the zone bogus \
         at validators; restore the key directory from a backup, or to start over with new keys \
         anyway (bogus until the parent's DS names them) run heron keymgr -d {} {zone} generate",
        dir.display(),
        match existed {
            true => "its state file lists none",
            false => "no state file and no key files",
        },
        tags.join(", "),
        dir.display()
    ))
}

/// A zone never signed whose keys were made ahead (`heron keymgr
/// generate`) as a KSK or ZSK while its policy signs with a CSK alone:
/// refused, saying what to do, rather than a first signing that finds no
/// key to sign the DNSKEY RRset and never loads the zone (black-box
/// finding CA-2). A policy of a KSK and a ZSK takes a CSK made ahead: its
/// rollover splits it once its DS is in.
fn first_keys_fit(state: &ZoneKeys, policy: &Policy, dir: &Path, zone: &str) -> Result<(), String> {
    let split_role = |k: &&Key| k.goal == Goal::Omnipresent && k.role != Role::Csk;
    let never_signed = state.policy.is_none();
    first_keys_algorithm_fits(state, policy, dir, zone)?;
    let csk_policy = policy.keys == heron_dnssec::policy::KeySet::Csk && !policy.insecure;
    let Some(key) = state
        .keys
        .iter()
        .find(split_role)
        .filter(|_| never_signed && csk_policy)
    else {
        return Ok(());
    };
    let role = if key.role == Role::Ksk { "KSK" } else { "ZSK" };
    Err(format!(
        "the zone's first key {} is a {role} (made ahead by heron keymgr generate), but policy \
         '{}' signs with a CSK alone: delete it (heron keymgr -d {} {zone} delete {}) and make \
         a CSK (generate --role csk), or give the zone a policy with keys = \"ksk-zsk\"",
        key.tag,
        policy.name,
        dir.display(),
        key.tag
    ))
}

/// A zone never signed whose key made ahead (`heron keymgr generate`,
/// never published) is of another algorithm than its policy's: refused,
/// saying what to do. A first signing made the policy's other keys
/// beside it and found no key to sign the DNSKEY RRset (KSK and ZSK), or
/// served it and planned an algorithm rollover at once, the DS just given
/// to the parent soon out of use (CSK; black-box finding DH-1). Keys
/// imported from a signer in use are published, and roll as usual.
fn first_keys_algorithm_fits(
    state: &ZoneKeys,
    policy: &Policy,
    dir: &Path,
    zone: &str,
) -> Result<(), String> {
    let wanted = policy.algorithm.number();
    let made_ahead = |k: &&Key| k.goal == Goal::Omnipresent && k.published.is_none();
    let other = |k: &&Key| made_ahead(k) && k.algorithm != wanted;
    let never_signed = state.policy.is_none() && !policy.insecure;
    let Some(key) = state.keys.iter().find(other).filter(|_| never_signed) else {
        return Ok(());
    };
    let theirs = heron_dnssec::keys::Algorithm::from_number(key.algorithm)
        .map_or(key.algorithm.to_string(), |a| {
            a.to_string().to_ascii_lowercase()
        });
    Err(format!(
        "the zone's first key {} is of algorithm {theirs} (made ahead by heron keymgr generate),          but policy '{}' signs with {}: delete it (heron keymgr -d {} {zone} delete {}) and make          it again with --algorithm {}, or give the policy algorithm = \"{theirs}\"",
        key.tag,
        policy.name,
        policy.algorithm.to_string().to_ascii_lowercase(),
        dir.display(),
        key.tag,
        policy.algorithm.to_string().to_ascii_lowercase(),
    ))
}

/// The zone's state file as recorded, if there is one.
pub fn read_state(dir: &Path, zone: &str) -> Result<Option<ZoneKeys>, String> {
    let path = state_path(dir, zone);
    if !path.exists() {
        return Ok(None);
    }
    let lock = file_lock(&path);
    let _held = lock.lock().unwrap_or_else(|e| e.into_inner());
    let state = ZoneKeys::load(&path).map_err(|e| e.to_string())?;
    of_zone(state, zone, &path).map(Some)
}

/// `state` if it is `zone`'s: a state file of another zone (copied or
/// moved by hand) would sign the zone with that zone's keys (black-box
/// finding).
fn of_zone(state: ZoneKeys, zone: &str, path: &Path) -> Result<ZoneKeys, String> {
    let plain = |name: &str| name.trim_end_matches('.').to_ascii_lowercase();
    match plain(&state.zone) == plain(zone) {
        true => Ok(state),
        false => Err(format!(
            "{}: the key state file of zone {}, not of {zone}: put this zone's back, or move it \
             away for its key files to be taken up",
            path.display(),
            state.zone
        )),
    }
}

/// The recorded state, or for a zone signed before it had one, its key
/// files (the newest of each role of the policy's algorithm) as keys
/// already published and signing: their DS goes to the parent next.
/// Under a policy going insecure, where a DS may be is unknown: the
/// DS of a KSK or CSK counts as at the parent, so that the zone stays
/// signed until the parent is seen without it.
fn load_or_adopt(
    path: &Path,
    dir: &Path,
    zone: &str,
    policy: &Policy,
    now: UnixTime,
) -> Result<ZoneKeys, String> {
    if path.exists() {
        let state = ZoneKeys::load(path).map_err(|e| e.to_string())?;
        return of_zone(state, zone, path);
    }
    let mut files = read_key_files(dir, zone)?;
    refuse_a_rollover_under_way(&files, path, dir)?;
    // Whatever their algorithm: the keys served, whose DS the parent may
    // hold; one of another algorithm than the policy's is rolled from
    // as a changed `algorithm` is (black-box finding AS-7: it was left
    // out, a key of the policy's made and served alone: bogus at once).
    files.sort_by_key(|(_, f)| std::cmp::Reverse(f.created));
    let mut keys: Vec<Key> = Vec::new();
    for (id, file) in files {
        let role = machine_role(file.role);
        let key = file.signing_key().map_err(|e| format!("{id}: {e}"))?;
        let tag = ZoneKey::new(key, file.role).tag;
        let mut adopted = Key::new(id, tag, file.algorithm.number(), role, file.created);
        let served = State::Omnipresent;
        adopted.dnskey.state = served;
        adopted.zone_rrsig.state = if role.signs_zone() {
            served
        } else {
            State::Hidden
        };
        if policy.insecure && role.signs_keys() {
            adopted.ds.state = served;
        }
        adopted.published = Some(now);
        keys.push(adopted);
    }
    keys.sort_by_key(|k| k.created);
    Ok(ZoneKeys::new(zone, keys))
}

/// What a signing of each zone of `settings` that Heron signs would
/// refuse in its key directory, for `heron check-config` (black-box
/// finding: it passed what serve then refused): a key directory that is
/// not a directory, a state file of another zone or unreadable, or key
/// files that cannot be taken up without one (two of one role). Read
/// only: a directory not made yet is made by the first signing, and one
/// the user running the check may not read is not looked at (it is the
/// server's; regression hunt: the check failed where it said OK before).
/// (errors, warnings).
pub fn keys_refused(settings: &crate::config::Settings) -> (Vec<String>, Vec<String>) {
    let now = heron_proto::time::unix_now();
    let signed = (settings.zones.iter()).filter_map(|z| Some((&z.origin, z.signing.as_ref()?)));
    let secondaries = (settings.signed_secondaries.iter()).map(|(origin, s)| (origin, s));
    let (mut errors, mut warnings) = (Vec::new(), Vec::new());
    for (origin, signing) in signed.chain(secondaries) {
        let dir = &signing.key_directory;
        let denied = |e: &std::io::Error| e.kind() == std::io::ErrorKind::PermissionDenied;
        let refused = match fs::metadata(dir) {
            // A link to nothing (a volume not mounted) is no folder the
            // first signing can make (black-box finding AS-6).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match fs::read_link(dir) {
                Ok(to) => Err(Some(format!(
                    "key directory {} is a link to {}, which does not exist",
                    dir.display(),
                    to.display()
                ))),
                Err(_) => continue,
            },
            Err(e) if denied(&e) => Err(None),
            Err(e) => Err(Some(format!("{}: {e}", dir.display()))),
            Ok(m) if !m.is_dir() => {
                let not = format!("key directory {} is not a directory", dir.display());
                Err(Some(not))
            }
            Ok(_) if fs::read_dir(dir).is_err_and(|e| denied(&e)) => Err(None),
            Ok(_) => {
                let zone = zone_text(origin);
                let path = state_path(dir, &zone);
                let looked =
                    load_or_adopt(&path, dir, &zone, &signing.policy, now).and_then(|state| {
                        first_keys_fit(&state, &signing.policy, dir, &zone)?;
                        check_key_files(dir, &zone, &state)
                    });
                // A state or key file only the server may read.
                looked
                    .map(|_| ())
                    .map_err(|e| (!e.contains("os error 13")).then_some(e))
            }
        };
        match refused {
            Ok(()) => {}
            Err(Some(e)) => errors.push(format!("zone {origin}: keys: {e}")),
            Err(None) => warnings.push(format!(
                "zone {origin}: key directory {} not checked: this user may not read it",
                dir.display()
            )),
        }
    }
    (errors, warnings)
}

/// Key files of one role twice, whatever their algorithms (an algorithm
/// rollover's keys too), and no state file: the file that said which are
/// in use is gone (a rollover was under way). The newest taken alone
/// dropped the key caches and the parent trust, and the zone went bogus
/// (black-box findings): refused, the version served stays.
fn refuse_a_rollover_under_way(
    files: &[(String, KeyFile)],
    path: &Path,
    dir: &Path,
) -> Result<(), String> {
    let signs_keys = |r: KeyRole| matches!(r, KeyRole::Ksk | KeyRole::Csk);
    let signs_zone = |r: KeyRole| matches!(r, KeyRole::Zsk | KeyRole::Csk);
    for (what, of) in [
        ("KSK or CSK", &signs_keys as &dyn Fn(KeyRole) -> bool),
        ("ZSK or CSK", &signs_zone),
    ] {
        let ids: Vec<&str> = (files.iter())
            .filter(|(_, f)| of(f.role))
            .map(|(id, _)| id.as_str())
            .collect();
        if ids.len() > 1 {
            return Err(format!(
                "the key state file {} is missing and the key directory holds {} keys that \
                 sign as a {what} ({}): which are in use cannot be told; put the state file \
                 back (from a backup), or move the keys not in use out of {}",
                path.display(),
                ids.len(),
                ids.join(", "),
                dir.display()
            ));
        }
    }
    Ok(())
}

fn machine_role(role: KeyRole) -> Role {
    match role {
        KeyRole::Ksk => Role::Ksk,
        KeyRole::Zsk => Role::Zsk,
        KeyRole::Csk => Role::Csk,
    }
}

fn file_role(role: Role) -> KeyRole {
    match role {
        Role::Ksk => KeyRole::Ksk,
        Role::Zsk => KeyRole::Zsk,
        Role::Csk => KeyRole::Csk,
    }
}

/// The DNSKEY RRset's keys as the plan says they sign, and the CDS and
/// CDNSKEY RDATA (SHA-256 DS) of the keys it sends to the parent.
fn publish(origin: &Name, dir: &Path, keys: &[Key], plan: Plan) -> Result<Step, String> {
    let mut zone_keys = Vec::with_capacity(plan.dnskey.len());
    let zone = zone_text(origin);
    let signing_key = |id: &str| -> Result<SigningKey, String> {
        match keys.iter().find(|k| k.id == id) {
            Some(key) => Ok(read_key_of(dir, &zone, key)?.1),
            None => read_key(dir, id)?
                .signing_key()
                .map_err(|e| format!("{id}: {e}")),
        }
    };
    for listed in &plan.dnskey {
        let key = keys.iter().find(|k| k.id == listed.id);
        let role = key.map_or(Role::Zsk, |k| k.role);
        let signing = signing_key(&listed.id)?;
        let signs_keys = plan.key_signers.iter().any(|k| k.id == listed.id);
        let signs_zone = plan.zone_signers.iter().any(|k| k.id == listed.id);
        let planned = ZoneKey::planned(signing, file_role(role), signs_keys, signs_zone);
        zone_keys.push(planned);
    }
    // A zone signer whose DNSKEY is withdrawn first (algorithm rollover)
    // still signs: its signatures leave after its key.
    for signer in &plan.zone_signers {
        if plan.dnskey.iter().any(|k| k.id == signer.id) {
            continue;
        }
        let key = keys.iter().find(|k| k.id == signer.id);
        let role = key.map_or(Role::Zsk, |k| k.role);
        let signing = signing_key(&signer.id)?;
        zone_keys.push(ZoneKey::unpublished(signing, file_role(role)));
    }
    let (mut cds, mut cdnskey) = (Vec::new(), Vec::new());
    for listed in &plan.cds {
        let role = keys.iter().find(|k| k.id == listed.id).map(|k| k.role);
        let role = file_role(role.unwrap_or(Role::Ksk));
        let signing = signing_key(&listed.id)?;
        let dnskey = signing.dnskey_rdata(role.flags());
        cds.extend(ds_rdata(origin, &dnskey, DigestType::Sha256));
        cdnskey.push(cdnskey_rdata(&dnskey));
    }
    if plan.cds_delete {
        cds = vec![CDS_DELETE.to_vec()];
        cdnskey = vec![CDNSKEY_DELETE.to_vec()];
    }
    Ok(Step {
        keys: zone_keys,
        cds,
        cdnskey,
        undo: None,
    })
}

/// One log line per record of a key that moved, and per key added.
fn log_changes(zone: &str, before: &[Key], after: &[Key]) {
    let name = |s: State| format!("{s:?}").to_ascii_lowercase();
    for key in after {
        let Some(old) = before.iter().find(|k| k.id == key.id) else {
            continue;
        };
        for kind in RecordKind::ALL.into_iter().filter(|&k| key.has(k)) {
            let (from, to) = (old.record(kind).state, key.record(kind).state);
            if from != to {
                tracing::info!(
                    zone,
                    key = key.tag,
                    role = ?key.role,
                    record = ?kind,
                    "DNSSEC key {} {:?}: {} -> {}",
                    key.tag,
                    kind,
                    name(from),
                    name(to)
                );
            }
        }
    }
}

/// The key file of `id` (its file name less [`KEY_SUFFIX`]).
pub fn read_key(dir: &Path, id: &str) -> Result<KeyFile, String> {
    read_key_file(&dir.join(format!("{id}{KEY_SUFFIX}")))
}

/// The key file of `key`, checked to be that key: a file replaced by
/// another key of the zone (a wrong backup restored, two signers' files
/// mixed up) signed in silence with the other key, and the DNSKEY the
/// parent's DS names left the zone (black-box finding AY-1): refused
/// as a file that cannot be read is.
pub fn read_key_of(dir: &Path, zone: &str, key: &Key) -> Result<(KeyFile, SigningKey), String> {
    let file = read_key(dir, &key.id)?;
    let signing = file.signing_key().map_err(|e| format!("{}: {e}", key.id))?;
    let tag = key_tag(&signing.dnskey_rdata(file.role.flags()));
    let fits = file
        .zone
        .trim_end_matches('.')
        .eq_ignore_ascii_case(zone.trim_end_matches('.'))
        && file.algorithm.number() == key.algorithm
        && file.role == file_role(key.role)
        && tag == key.tag;
    if !fits {
        return Err(format!(
            "{}: holds a {} key {tag} (algorithm {}) of zone {}, not the {} key {} (algorithm \
             {}) the key state file names: put that key's file back",
            dir.join(format!("{}{KEY_SUFFIX}", key.id)).display(),
            file.role.name(),
            file.algorithm.number(),
            file.zone,
            file_role(key.role).name(),
            key.tag,
            key.algorithm
        ));
    }
    Ok((file, signing))
}

/// Every key the state names whose file is there, checked as
/// [`read_key_of`] does: what a signing would refuse.
fn check_key_files(dir: &Path, zone: &str, state: &ZoneKeys) -> Result<(), String> {
    for key in &state.keys {
        if dir.join(format!("{}{KEY_SUFFIX}", key.id)).exists() {
            read_key_of(dir, zone, key)?;
        }
    }
    Ok(())
}

/// The zone's key files, each with its id.
fn read_key_files(dir: &Path, zone: &str) -> Result<Vec<(String, KeyFile)>, String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(id) = name.strip_suffix(KEY_SUFFIX) else {
            continue;
        };
        let file = read_key_file(&entry.path())?;
        if file.zone.eq_ignore_ascii_case(zone) {
            out.push((id.to_string(), file));
        }
    }
    Ok(out)
}

fn read_key_file(path: &Path) -> Result<KeyFile, String> {
    let meta = fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.len() > MAX_KEY_FILE as u64 {
        return Err(format!("{}: not a key file (too long)", path.display()));
    }
    if meta.permissions().mode() & 0o077 != 0 && first_warning_for(path) {
        tracing::warn!(
            "key file {} holds a private key and can be read by others than its owner \
             (chmod 600 it)",
            path.display()
        );
    }
    let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    KeyFile::from_text(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Whether `path` was not warned about before in this process: a key
/// file is read at every signing of its zone, and said once is enough.
/// The set holds at most the key files the configuration leads to.
fn first_warning_for(path: &Path) -> bool {
    static WARNED: std::sync::Mutex<Option<HashSet<PathBuf>>> = std::sync::Mutex::new(None);
    let mut warned = WARNED.lock().unwrap_or_else(|p| p.into_inner());
    warned.get_or_insert_default().insert(path.to_path_buf())
}

/// Writes `text` to a new file at `path`, owner-only (0600), never over
/// another file, and whole or not at all: written and synced under a
/// temporary name first, then linked into place (a failed write, a full
/// disk or `ulimit -f`, left an empty key file that stopped the zone from
/// loading until removed by hand: regression hunt BR-12). `AlreadyExists`
/// when `path` is taken.
pub fn write_new_private(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = crate::config::shared_files::beside(path, crate::config::shared_files::TEMPORARY);
    let written = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut out| out.write_all(text.as_bytes()).and_then(|()| out.sync_all()))
        .and_then(|()| fs::hard_link(&tmp, path));
    let _ = fs::remove_file(&tmp);
    written
}

/// Tries to make a key whose file name (zone, algorithm, tag, role) is
/// not taken: two keys with one tag are possible, one file per name is not.
const GENERATE_TRIES: usize = 8;

/// A new key as the plan asks, written owner-only (0600) and never over
/// another file; the machine's record of it.
pub fn generate(dir: &Path, zone: &str, request: KeyRequest, now: UnixTime) -> Result<Key, String> {
    let algorithm = heron_dnssec::keys::Algorithm::from_number(request.algorithm)
        .ok_or_else(|| format!("algorithm {} cannot be generated", request.algorithm))?;
    let role = file_role(request.role);
    for _ in 0..GENERATE_TRIES {
        let (file, key) =
            KeyFile::generate(zone, role, algorithm, now).map_err(|e| e.to_string())?;
        let name = file.file_name(&key);
        let path = dir.join(&name);
        match write_new_private(&path, &file.to_text()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("cannot write {}: {e}", path.display())),
        }
        let tag = ZoneKey::new(key, role).tag;
        tracing::info!(
            zone,
            role = role.name(),
            algorithm = %algorithm,
            tag,
            file = %path.display(),
            "DNSSEC key generated"
        );
        let id = name.trim_end_matches(KEY_SUFFIX).to_string();
        return Ok(Key::new(id, tag, request.algorithm, request.role, now));
    }
    Err(format!(
        "no free key file name for a new {} of {zone} after {GENERATE_TRIES} keys",
        role.name()
    ))
}

/// The directory, made owner-only if new; a warning if others can read it.
pub fn ensure_private_directory(dir: &Path) -> Result<(), String> {
    if !dir.exists() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    }
    let meta = fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !meta.is_dir() {
        return Err(format!(
            "key directory {} is not a directory",
            dir.display()
        ));
    }
    // Said once a process, as for key files: the directory is looked at
    // at every signing (black-box finding: 95 lines in 30 minutes).
    if meta.permissions().mode() & 0o077 != 0 && first_warning_for(dir) {
        tracing::warn!(
            "key directory {} can be read by others than its owner (chmod 700 it)",
            dir.display()
        );
    }
    Ok(())
}

/// The zone with its CDS and CDNSKEY RRsets as the step says (the signer
/// owns them: any the zone file has are replaced); None when they are
/// already so.
pub fn with_cds(
    zone: &heron_zone::Zone,
    step: &Step,
    ttl: u32,
) -> Result<Option<heron_zone::Zone>, String> {
    use heron_zone::diff::{DiffRecord, ZoneDiff};
    let apex = zone.apex();
    let origin = zone.origin().clone();
    let mut deleted = Vec::new();
    let mut added = Vec::new();
    for (rtype, wanted) in [(RType::CDS, &step.cds), (RType::CDNSKEY, &step.cdnskey)] {
        let held = apex.rrset(rtype);
        let same = held.is_some_and(|set| {
            let mut have: Vec<Vec<u8>> = set.rdatas().map(|r| r.to_vec()).collect();
            let mut want = wanted.clone();
            have.sort();
            want.sort();
            have == want && set.ttl() == ttl
        });
        if same || (held.is_none() && wanted.is_empty()) {
            continue;
        }
        if let Some(set) = held {
            deleted.extend(set.rdatas().map(|rdata| DiffRecord {
                owner: origin.clone(),
                rtype,
                ttl: set.ttl(),
                rdata: rdata.to_vec(),
            }));
        }
        added.extend(wanted.iter().map(|rdata| DiffRecord {
            owner: origin.clone(),
            rtype,
            ttl,
            rdata: rdata.clone(),
        }));
    }
    if deleted.is_empty() && added.is_empty() {
        return Ok(None);
    }
    let soa = apex.rrset(RType::SOA).ok_or("no SOA")?;
    let soa = DiffRecord {
        owner: origin,
        rtype: RType::SOA,
        ttl: soa.ttl(),
        rdata: soa.first_rdata().into_owned(),
    };
    deleted.sort();
    added.sort();
    let diff = ZoneDiff {
        old_soa: soa.clone(),
        new_soa: soa,
        deleted,
        added,
    };
    zone.apply(&diff).map(Some).map_err(|problems| {
        let text: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        format!("cannot add CDS/CDNSKEY: {}", text.join("; "))
    })
}

/// The largest TTL of the zone's records, but those the signer makes
/// (DNSKEY, RRSIG, NSEC, NSEC3, NSEC3PARAM, CDS, CDNSKEY: their TTLs
/// come from the policy, which times the rollovers by them apart). So
/// the zone as loaded and its signed copy kept for a restart give one
/// figure, and a restart does not move the keys' next events.
pub fn zone_max_ttl(zone: &heron_zone::Zone) -> u32 {
    let from_signer = |t: RType| {
        heron_dnssec::sign::SIGNER_TYPES.contains(&t) || matches!(t, RType::CDS | RType::CDNSKEY)
    };
    zone.nodes()
        .flat_map(|node| {
            let sets = node.data().filter(|set| !from_signer(set.rtype));
            sets.map(|set| set.ttl()).collect::<Vec<_>>()
        })
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_dnssec::policy::KeySet;

    const ZONE: &str = "@ 300 IN SOA ns hm 7 2 3 4 5\n@ 300 IN NS ns\nns 60 IN A 192.0.2.1\n\
                        @ 300 IN CDS 1 13 2 0000000000000000000000000000000000000000000000000000000000000000\n";

    fn origin() -> Name {
        Name::parse("k.test.").unwrap()
    }

    /// BR-12: a key file is written whole or not at all, owner-only, and
    /// never over another; a write that fails leaves no file (here the
    /// temporary name is taken by a folder, as a full disk fails a write).
    #[test]
    fn a_key_file_is_written_whole_or_not_at_all() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("Kk.test+013+00001.csk.heron-key");
        write_new_private(&path, "key one\n").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "key one\n");
        let mode = fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = write_new_private(&path, "key two\n").unwrap_err();
        assert_eq!(again.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read_to_string(&path).unwrap(), "key one\n");
        let other = dir.path().join("Kk.test+013+00002.csk.heron-key");
        fs::create_dir(crate::config::shared_files::beside(&other, ".tmp")).unwrap();
        assert!(write_new_private(&other, "key\n").is_err());
        assert!(!other.exists(), "no file left behind");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    fn split() -> Policy {
        Policy {
            keys: KeySet::KskZsk,
            ..Policy::default()
        }
    }

    #[test]
    fn a_first_step_makes_the_keys_and_a_settled_one_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut step = step(&origin(), &split(), dir.path(), 300, 1000).unwrap();
        assert_eq!(step.keys.len(), 2, "a KSK and a ZSK");
        assert!(step.keys.iter().any(|k| k.signs_keys && !k.signs_zone));
        assert!(step.keys.iter().any(|k| k.signs_zone && !k.signs_keys));
        assert!(
            step.cds.is_empty(),
            "no CDS before the DNSKEY is everywhere"
        );
        assert!(step.undo.is_some());
        let state = read_state(dir.path(), "k.test.").unwrap().unwrap();
        assert_eq!(state.keys.len(), 2);
        assert!(state.policy.is_some(), "the policy is recorded");
        let again = step_at(&dir, 1000);
        assert!(again.undo.is_none(), "nothing moved: nothing written");
        // Once the KSK's DNSKEY is in every cache, its DS is asked for.
        let later = step_at(&dir, 1000 + 300 + 3600);
        assert_eq!(later.cds.len(), 1);
        assert_eq!(later.cdnskey.len(), 1);
        undo(&mut step);
    }

    /// A key file replaced by another key of the zone and role is refused
    /// at the next signing and by the check, for the KSK and the ZSK: it
    /// was signed with in silence, the KSK the parent's DS names dropped
    /// (black-box finding AY-1).
    #[test]
    fn a_key_file_holding_another_key_is_refused() {
        for role in [Role::Ksk, Role::Zsk] {
            let dir = tempfile::tempdir().unwrap();
            step(&origin(), &split(), dir.path(), 300, 1000).unwrap();
            let state = read_state(dir.path(), "k.test.").unwrap().unwrap();
            let key = state.keys.iter().find(|k| k.role == role).unwrap();
            let path = dir.path().join(format!("{}{KEY_SUFFIX}", key.id));
            let algorithm = heron_dnssec::keys::Algorithm::EcdsaP256Sha256;
            let (other, _) = KeyFile::generate("k.test.", file_role(role), algorithm, 900).unwrap();
            let right = fs::read_to_string(&path).unwrap();
            fs::write(&path, other.to_text()).unwrap();
            let refused = step(&origin(), &split(), dir.path(), 300, 2000)
                .err()
                .expect("refused");
            let names = format!("not the {} key {}", file_role(role).name(), key.tag);
            assert!(refused.contains(&names), "{refused}");
            let checked = check_key_files(dir.path(), "k.test.", &state).unwrap_err();
            assert!(checked.contains(&names), "{checked}");
            fs::write(&path, right).unwrap();
            step(&origin(), &split(), dir.path(), 300, 2000).unwrap();
            check_key_files(dir.path(), "k.test.", &state).unwrap();
        }
    }

    /// A retired ZSK gone from every cache is kept `purge-keys` long, then
    /// its file and its entry go (black-box finding: every rollover left a
    /// private key behind for good); `purge-keys = 0` keeps it.
    #[test]
    fn a_retired_key_is_purged_after_purge_keys() {
        for purge in [0, 5000] {
            let dir = tempfile::tempdir().unwrap();
            let rolling = Policy {
                zsk_lifetime: 3000,
                purge_keys: purge,
                ..split()
            };
            let first_zsk = |d: &Path| {
                let state = read_state(d, "k.test.").unwrap().unwrap();
                state.keys.into_iter().find(|k| k.role == Role::Zsk)
            };
            step(&origin(), &rolling, dir.path(), 300, 1000).unwrap();
            let old = first_zsk(dir.path()).unwrap();
            let file = dir.path().join(format!("{}{KEY_SUFFIX}", old.id));
            let mut now = 1000;
            let removed = loop {
                now += 600;
                assert!(now < 1_000_000, "the first ZSK never left");
                step(&origin(), &rolling, dir.path(), 300, now).unwrap();
                let state = read_state(dir.path(), "k.test.").unwrap().unwrap();
                let key = state.keys.iter().find(|k| k.id == old.id).unwrap();
                if let Some(at) = key.removed {
                    break at;
                }
            };
            step(&origin(), &rolling, dir.path(), 300, removed + 4999).unwrap();
            assert!(file.exists(), "kept until purge-keys has passed");
            step(&origin(), &rolling, dir.path(), 300, removed + 5000).unwrap();
            let state = read_state(dir.path(), "k.test.").unwrap().unwrap();
            let listed = state.keys.iter().any(|k| k.id == old.id);
            assert_eq!(
                (listed, file.exists()),
                (purge == 0, purge == 0),
                "purge-keys {purge}"
            );
        }
    }

    /// A state file lost during a rollover (two ZSK files): which key is
    /// in use cannot be told, and the step is refused rather than taking
    /// the newest alone (black-box finding: the zone went bogus).
    #[test]
    fn a_state_file_lost_during_a_rollover_is_not_guessed() {
        let dir = tempfile::tempdir().unwrap();
        let rolling = Policy {
            zsk_lifetime: 100,
            ..split()
        };
        let zsks = || {
            let files = read_key_files(dir.path(), "k.test.").unwrap();
            files.iter().filter(|(_, f)| f.role == KeyRole::Zsk).count()
        };
        let mut now = 1000;
        while zsks() < 2 && now < 100_000 {
            step(&origin(), &rolling, dir.path(), 300, now).unwrap();
            now += 600;
        }
        assert_eq!(zsks(), 2, "a rollover under way");
        fs::remove_file(state_path(dir.path(), "k.test.")).unwrap();
        let Err(refused) = step(&origin(), &rolling, dir.path(), 300, now) else {
            panic!("a step with two ZSKs and no state file");
        };
        assert!(
            refused.contains("state file") && refused.contains("2 keys that sign as a ZSK"),
            "{refused}"
        );
    }

    /// The same during an algorithm rollover: the old algorithm's key,
    /// whose DS is at the parent, is not dropped for the new one's
    /// (regression hunt finding: only the policy's algorithm was counted).
    #[test]
    fn a_state_file_lost_during_an_algorithm_rollover_is_not_guessed() {
        let dir = tempfile::tempdir().unwrap();
        step(&origin(), &split(), dir.path(), 300, 1000).unwrap();
        // The new algorithm's KSK made (as an algorithm rollover makes it).
        let request = heron_dnssec::rollover::KeyRequest {
            role: Role::Ksk,
            algorithm: heron_dnssec::keys::Algorithm::Ed25519.number(),
        };
        generate(dir.path(), "k.test.", request, 2000).unwrap();
        let ed25519 = Policy {
            algorithm: heron_dnssec::keys::Algorithm::Ed25519,
            ..split()
        };
        fs::remove_file(state_path(dir.path(), "k.test.")).unwrap();
        let Err(refused) = step(&origin(), &ed25519, dir.path(), 300, 3000) else {
            panic!("the new algorithm's keys taken alone");
        };
        assert!(refused.contains("sign as a KSK or CSK"), "{refused}");
    }

    /// Key files of another algorithm than the policy's and no state
    /// file (a zone signed before, its policy's algorithm changed with
    /// the state file lost or never made): the keys are taken up as in
    /// use and the algorithm rolled, not dropped for a new key served
    /// alone (black-box finding AS-7: bogus at a parent holding the old
    /// key's DS).
    #[test]
    fn keys_of_another_algorithm_without_a_state_file_are_rolled_from() {
        let dir = tempfile::tempdir().unwrap();
        let served = step(&origin(), &split(), dir.path(), 300, 1000).unwrap();
        fs::remove_file(state_path(dir.path(), "k.test.")).unwrap();
        let ed25519 = Policy {
            algorithm: heron_dnssec::keys::Algorithm::Ed25519,
            ..split()
        };
        let next = step(&origin(), &ed25519, dir.path(), 300, 2000).unwrap();
        let tags = |s: &Step| s.keys.iter().map(|k| k.tag).collect::<Vec<_>>();
        for tag in tags(&served) {
            assert!(tags(&next).contains(&tag), "key {tag} still served");
        }
        assert!(
            next.keys.len() > served.keys.len(),
            "the new algorithm's keys made"
        );
    }

    #[test]
    fn a_state_file_of_another_zone_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        step_at(&dir, 1000);
        let path = state_path(dir.path(), "k.test.");
        let text = fs::read_to_string(&path).unwrap();
        fs::write(&path, text.replace("\"k.test.\"", "\"other.test.\"")).unwrap();
        let Err(refused) = step(&origin(), &split(), dir.path(), 300, 2000) else {
            panic!("another zone's state taken");
        };
        assert!(refused.contains("of zone other.test."), "{refused}");
    }

    /// Key files without a state file, taken up under `insecure`: the
    /// DS may be at the parent, so the zone stays signed, publishes the
    /// CDS delete and waits for the parent.
    #[test]
    fn keys_taken_up_going_insecure_wait_for_the_parent() {
        let dir = tempfile::tempdir().unwrap();
        step_at(&dir, 1000);
        fs::remove_file(state_path(dir.path(), "k.test.")).unwrap();
        let insecure = Policy {
            keys: KeySet::KskZsk,
            ..Policy::insecure()
        };
        let step = step(&origin(), &insecure, dir.path(), 300, 2000).unwrap();
        assert_eq!(step.keys.len(), 2, "still signed");
        assert_eq!(step.cds, vec![CDS_DELETE.to_vec()]);
        let state = read_state(dir.path(), "k.test.").unwrap().unwrap();
        let ksk = state.keys.iter().find(|k| k.role == Role::Ksk).unwrap();
        assert_eq!((ksk.ds.state, ksk.ds_gone), (State::Unretentive, None));
    }

    /// A policy removed with the server stopped: the zone's state file,
    /// in the default key directory beside the configuration, still has
    /// a DS that may be at the parent, and the start is refused; before
    /// any DS was asked for, or for zones without a state file, it is not.
    #[test]
    fn a_start_without_the_policy_is_refused_while_a_ds_may_be_at_the_parent() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("heron.toml");
        fs::write(dir.path().join("k.zone"), ZONE).unwrap();
        fs::write(dir.path().join("other.zone"), ZONE.replace("CDS", "TXT")).unwrap();
        let zones = "[[zone]]\norigin = \"k.test\"\nfile = \"k.zone\"\n\n\
                     [[zone]]\norigin = \"other.test\"\nfile = \"other.zone\"\n";
        fs::write(&config, zones).unwrap();
        let settings = crate::config::load(&config).unwrap();
        let keys = dir.path().join("keys");
        assert!(
            unsigned_with_ds_at_start(&settings, &config).is_empty(),
            "no key directory"
        );
        step(&origin(), &split(), &keys, 300, 1000).unwrap();
        assert!(
            unsigned_with_ds_at_start(&settings, &config).is_empty(),
            "keys made, no DS asked for yet"
        );
        let asked = step(&origin(), &split(), &keys, 300, 1000 + 300 + 3600).unwrap();
        assert_eq!(asked.cds.len(), 1, "the DS is asked for");
        let refused = unsigned_with_ds_at_start(&settings, &config);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(refused[0].contains("zone 'k.test.'"), "{}", refused[0]);
        assert!(
            refused[0].contains("dnssec-policy = \"insecure\""),
            "{}",
            refused[0]
        );
        assert!(refused[0].contains("move ") && refused[0].contains("k.test.keys.json away"));
        // Signed with the policy, as configured: nothing to refuse.
        let signed =
            "[[zone]]\norigin = \"k.test\"\nfile = \"k.zone\"\ndnssec-policy = \"default\"\n";
        fs::write(&config, signed).unwrap();
        let settings = crate::config::load(&config).unwrap();
        assert!(unsigned_with_ds_at_start(&settings, &config).is_empty());
    }

    /// The same with the keys in a `key-directory` of the zone's own: the
    /// note the signed start left beside the zone file leads the later
    /// start to them. Keys moved back to the default directory take the
    /// note back.
    #[test]
    fn a_start_without_the_policy_finds_keys_in_a_directory_of_their_own() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("heron.toml");
        let zone_file = dir.path().join("k.zone");
        fs::write(&zone_file, ZONE).unwrap();
        let zone = "[[zone]]\norigin = \"k.test\"\nfile = \"k.zone\"\n";
        let signed = format!("{zone}dnssec-policy = \"default\"\nkey-directory = \"own\"\n");
        fs::write(&config, &signed).unwrap();
        let settings = crate::config::load(&config).unwrap();
        crate::plan::key_notes::note_key_directories(&settings, &config);
        let note = dir.path().join("k.zone.key-directory");
        let own = dir.path().join("own");
        assert_eq!(
            fs::read_to_string(&note).unwrap(),
            format!("{}\n", own.display())
        );
        step(&origin(), &split(), &own, 300, 1000).unwrap();
        step(&origin(), &split(), &own, 300, 1000 + 300 + 3600).unwrap();

        fs::write(&config, zone).unwrap();
        let unsigned = crate::config::load(&config).unwrap();
        let refused = unsigned_with_ds_at_start(&unsigned, &config);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(refused[0].contains("zone 'k.test.'"), "{}", refused[0]);
        let state = own.join("k.test.keys.json");
        assert!(refused[0].contains(&format!("move {} away", state.display())));
        // A note naming a directory with no state file refuses nothing.
        fs::write(&note, format!("{}\n", dir.path().join("none").display())).unwrap();
        assert!(unsigned_with_ds_at_start(&unsigned, &config).is_empty());

        let back = format!("{zone}dnssec-policy = \"default\"\n");
        fs::write(&config, back).unwrap();
        let settings = crate::config::load(&config).unwrap();
        crate::plan::key_notes::note_key_directories(&settings, &config);
        assert!(!note.exists(), "keys in the default directory need no note");
    }

    /// The black-box finding: a signed zone given another, empty
    /// `key-directory` got new keys and was signed with them at once, its
    /// DS at the parent naming keys no longer served. Refused at a start
    /// (and so in check-config) while that DS may be out, in either
    /// direction; allowed once the keys are moved along, and before any
    /// DS was asked for.
    #[test]
    fn keys_are_not_left_behind_by_a_new_key_directory() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("heron.toml");
        fs::write(dir.path().join("k.zone"), ZONE).unwrap();
        let zone =
            "[[zone]]\norigin = \"k.test\"\nfile = \"k.zone\"\ndnssec-policy = \"default\"\n";
        let elsewhere = format!("{zone}key-directory = \"elsewhere\"\n");
        let (keys, other) = (dir.path().join("keys"), dir.path().join("elsewhere"));
        let start = |text: &str| {
            fs::write(&config, text).unwrap();
            let settings = crate::config::load(&config).unwrap();
            let refused = moved_keys_at_start(&settings, &config);
            crate::plan::key_notes::note_key_directories(&settings, &config);
            refused
        };
        assert!(start(zone).is_empty(), "no keys anywhere");
        step(&origin(), &split(), &keys, 300, 1000).unwrap();
        assert!(start(&elsewhere).is_empty(), "no DS asked for yet");
        fs::remove_dir_all(&other).ok();
        fs::remove_file(dir.path().join("k.zone.key-directory")).ok();
        step(&origin(), &split(), &keys, 300, 1000 + 300 + 3600).unwrap();
        let refused = start(&elsewhere);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(
            refused[0].contains("zone 'k.test.': key-directory changed"),
            "{}",
            refused[0]
        );
        assert!(refused[0].contains("k.test.keys.json"), "{}", refused[0]);
        // Moved along with their state: taken.
        fs::create_dir_all(&other).unwrap();
        for entry in fs::read_dir(&keys).unwrap() {
            let path = entry.unwrap().path();
            fs::rename(&path, other.join(path.file_name().unwrap())).unwrap();
        }
        assert!(start(&elsewhere).is_empty());
        // And back to the default directory, now empty: refused again.
        let back = start(zone);
        assert_eq!(back.len(), 1, "{back:?}");
        assert!(
            key_move_refused(&origin(), &other, &other).is_none(),
            "one directory"
        );
    }

    /// A key file others can read is said once, however often it is
    /// read (black-box finding: only the folder was checked).
    #[test]
    fn a_key_file_others_can_read_is_warned_about_once() {
        let dir = tempfile::tempdir().unwrap();
        step(&origin(), &split(), dir.path(), 300, 1000).unwrap();
        let (id, _) = read_key_files(dir.path(), "k.test.").unwrap().remove(0);
        let path = dir.path().join(format!("{id}{KEY_SUFFIX}"));
        assert!(first_warning_for(&path), "owner-only: not said yet");
        let other = dir.path().join("other.heron-key");
        fs::copy(&path, &other).unwrap();
        fs::set_permissions(&other, fs::Permissions::from_mode(0o644)).unwrap();
        read_key_file(&other).unwrap();
        assert!(!first_warning_for(&other), "said at the first read");
        read_key_file(&other).unwrap();
    }

    fn step_at(dir: &tempfile::TempDir, now: UnixTime) -> Step {
        step(&origin(), &split(), dir.path(), 300, now).unwrap()
    }

    /// `heron keymgr` holds the key directory alone while it edits a
    /// state file: the server's change waits for it, so neither is lost.
    #[test]
    fn a_state_change_waits_for_keymgr_holding_the_directory() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let dir = tempfile::tempdir().unwrap();
        step_at(&dir, 1000);
        let keymgr = lock_directory(dir.path(), Hold::Alone).unwrap().unwrap();
        let changed = Arc::new(AtomicBool::new(false));
        let server = {
            let (path, changed) = (dir.path().to_path_buf(), changed.clone());
            std::thread::spawn(move || {
                handle_event(&path, "k.test.", Event::DsSeen, 2000).unwrap();
                changed.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(!changed.load(Ordering::SeqCst), "waits while keymgr edits");
        drop(keymgr);
        server.join().unwrap();
        assert!(changed.load(Ordering::SeqCst));
        let shared = lock_directory(dir.path(), Hold::Shared).unwrap();
        assert!(shared.is_some(), "the server's threads share it");
        assert!(lock_directory(dir.path(), Hold::Shared).unwrap().is_some());
        let missing = dir.path().join("none");
        assert!(lock_directory(&missing, Hold::Alone).unwrap().is_none());
    }

    /// A keymgr stopped while it holds the key directory (^Z) makes the
    /// server's signing fail after a bounded wait, not hang: the reloads
    /// and updates queued behind a signing would hang with it.
    #[test]
    fn the_server_waits_for_a_stopped_keymgr_only_so_long() {
        let dir = tempfile::tempdir().unwrap();
        let keymgr = lock_directory(dir.path(), Hold::Alone).unwrap().unwrap();
        let folder = fs::File::open(dir.path()).unwrap();
        let wait = std::time::Duration::from_millis(100);
        assert!(!lock_within(&folder, LockKind::Shared, wait).unwrap());
        drop(keymgr);
        assert!(lock_within(&folder, LockKind::Shared, wait).unwrap());
    }

    /// The zone's largest TTL lowered from 300 to 30 mid-rollover: the
    /// keys' waits stay at 300 while records served under it may be
    /// cached (a validator holding them would otherwise go bogus).
    #[test]
    fn a_lowered_ttl_keeps_its_old_wait_while_caches_may_hold_it() {
        let dir = tempfile::tempdir().unwrap();
        step_at(&dir, 1000);
        let waited = |d: &tempfile::TempDir| {
            let state = read_state(d.path(), "k.test.").unwrap().unwrap();
            state.policy.unwrap().max_zone_ttl
        };
        step(&origin(), &split(), dir.path(), 30, 2000).unwrap();
        assert_eq!(waited(&dir), 300);
        step(&origin(), &split(), dir.path(), 30, 2000 + 300).unwrap();
        assert_eq!(waited(&dir), 300);
        // Long after (the parent's DS TTL and every delay passed too).
        step(&origin(), &split(), dir.path(), 30, 2000 + 10 * 86400).unwrap();
        assert_eq!(waited(&dir), 30);
    }

    /// A step that fails (the ZSK in use lost its file) leaves no key it
    /// made behind: no private key file that no state file names.
    #[test]
    fn a_failed_step_removes_the_keys_it_made() {
        let dir = tempfile::tempdir().unwrap();
        for settled in [1000, 100_000, 200_000, 300_000] {
            step_at(&dir, settled);
        }
        let key_files = || -> Vec<String> {
            let names = fs::read_dir(dir.path()).unwrap().flatten();
            (names.map(|e| e.file_name().to_string_lossy().into_owned()))
                .filter(|n| n.ends_with(KEY_SUFFIX))
                .collect()
        };
        let zsk = key_files().into_iter().find(|n| n.contains("zsk")).unwrap();
        fs::remove_file(dir.path().join(&zsk)).unwrap();
        let short = Policy {
            zsk_lifetime: 100,
            ..split()
        };
        for later in [1_000_000, 1_000_002] {
            let before = key_files().len();
            assert!(step(&origin(), &short, dir.path(), 300, later).is_err());
            assert_eq!(key_files().len(), before, "{:?}", key_files());
        }
    }

    #[test]
    fn undo_puts_the_state_back_unless_it_changed_since() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = step_at(&dir, 1000);
        undo(&mut first);
        let empty = read_state(dir.path(), "k.test.").unwrap().unwrap();
        assert!(empty.keys.is_empty(), "the keys it made are not taken up");
        step_at(&dir, 1000);
        let before = read_state(dir.path(), "k.test.").unwrap();
        let mut moved = step_at(&dir, 1000 + 300 + 3600);
        assert!(moved.undo.is_some());
        undo(&mut moved);
        assert_eq!(read_state(dir.path(), "k.test.").unwrap(), before);
        // An event recorded after the step is kept.
        let mut moved = step_at(&dir, 1000 + 300 + 3600);
        handle_event(dir.path(), "k.test.", Event::DsSeen, 5000).unwrap();
        let with_event = read_state(dir.path(), "k.test.").unwrap();
        undo(&mut moved);
        assert_eq!(read_state(dir.path(), "k.test.").unwrap(), with_event);
    }

    /// The signed copy a restart reads and the zone file give one figure.
    #[test]
    fn the_zones_largest_ttl_leaves_out_what_the_signer_makes() {
        let text = "@ 30 IN SOA ns hm 7 2 3 4 5\n@ 30 IN NS ns\nns 60 IN A 192.0.2.1\n\
                    @ 3600 IN DNSKEY 257 3 13 AAAA\n@ 7200 IN CDNSKEY 257 3 13 AAAA\n\
                    @ 86400 IN NSEC ns.k.test. SOA NS RRSIG NSEC DNSKEY\n";
        let zone = heron_zone::load_zone_str(text, "t", &origin())
            .unwrap()
            .zone;
        assert_eq!(zone_max_ttl(&zone), 60);
    }

    #[test]
    fn cds_records_replace_the_files_and_leave_when_not_asked() {
        let dir = tempfile::tempdir().unwrap();
        let zone = heron_zone::load_zone_str(ZONE, "t", &origin())
            .unwrap()
            .zone;
        assert_eq!(zone_max_ttl(&zone), 300);
        let settled = {
            step_at(&dir, 1000);
            step_at(&dir, 1000 + 300 + 3600)
        };
        let with = with_cds(&zone, &settled, 60).unwrap().unwrap();
        let cds = with.apex().rrset(RType::CDS).unwrap();
        assert_eq!(cds.ttl(), 60);
        assert_eq!(cds.rdatas().next().unwrap().to_vec(), settled.cds[0]);
        assert!(with.apex().rrset(RType::CDNSKEY).is_some());
        assert!(
            with_cds(&with, &settled, 60).unwrap().is_none(),
            "already so"
        );
        let none = Step {
            keys: Vec::new(),
            cds: Vec::new(),
            cdnskey: Vec::new(),
            undo: None,
        };
        let without = with_cds(&zone, &none, 60).unwrap().unwrap();
        assert!(
            without.apex().rrset(RType::CDS).is_none(),
            "the file's CDS is not kept"
        );
    }
}
