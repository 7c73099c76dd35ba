//! The rollover driver: one task that wakes at the earliest time any
//! signed zone's keys move (`plan::rollover::outlook` over each zone's
//! state file), signs those zones again (a forced reload of them: the
//! signing moves the keys, `plan::key_state::step_over`), asks the parent's
//! name servers for the DS RRset while a step waits for it, and keeps
//! what `heron ctl zone-status`, `heron ctl keys` and the metric
//! `heron_dnssec_ds_waiting` show.
//!
//! Parent checks are bounded: one query per server per zone at a time,
//! a timeout, and a back-off that doubles from [`PARENT_CHECK_FIRST`] to
//! [`PARENT_CHECK_MOST`] while the parent has not changed.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use heron_dnssec::policy::Policy;
use heron_dnssec::rollover::{Event, ParentWait, UnixTime};
use heron_proto::Name;
use heron_server::SharedCatalog;
use tokio::sync::Notify;

use crate::config::dnssec::Signing;
use crate::plan::rollover::{Outlook, current_policy, ds_in_answer, ds_query, keys_at_parent};
use crate::plan::{key_state, zone_files::ZoneFiles};
use crate::runtime::{Selection, Transfers, reload};

/// The first wait between two checks of the parent, and the longest.
pub const PARENT_CHECK_FIRST: Duration = Duration::from_secs(2);
pub const PARENT_CHECK_MOST: Duration = Duration::from_secs(3600);
/// How long a parent server has to answer a DS query.
pub const PARENT_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest the driver sleeps with nothing scheduled (it also wakes
/// after each reload and each `heron ctl ds-seen`).
const IDLE: Duration = Duration::from_secs(3600);
/// The longest the driver goes without reading again the state file of
/// a zone waiting for its parent ([`wake_at`]).
const WAITING_LOOK: Duration = Duration::from_secs(60);
/// The shortest time between two rounds: a zone that stays due (its
/// signing failed) is tried again no faster.
const LEAST_ROUND: Duration = Duration::from_secs(1);

/// What the driver last found of one zone.
#[derive(Clone, Debug, Default)]
pub(crate) struct ZoneRollover {
    /// What the operator must do while a step waits for the parent.
    pub(crate) waiting: Option<String>,
    /// When the keys move next by time alone.
    pub(crate) next: Option<UnixTime>,
    /// The last check of the parent servers: when, and what went wrong.
    pub(crate) parent_checked: Option<UnixTime>,
    pub(crate) parent_error: Option<String>,
    /// Why the zone's key state could not be read.
    pub(crate) error: Option<String>,
}

/// Every signed zone's rollover status, lower-cased origin as text.
pub(crate) fn statuses() -> &'static Mutex<HashMap<String, ZoneRollover>> {
    static STATUSES: OnceLock<Mutex<HashMap<String, ZoneRollover>>> = OnceLock::new();
    STATUSES.get_or_init(Default::default)
}

fn waker() -> &'static Notify {
    static WAKE: OnceLock<Notify> = OnceLock::new();
    WAKE.get_or_init(Notify::new)
}

/// Has the driver look at the zones it marked now (after a reload, or
/// an event).
pub(crate) fn wake() {
    waker().notify_one();
}

/// Zones whose key state files may have changed since the driver read
/// them: it reads only these, and those with an event due, again.
#[derive(Default)]
struct Dirty {
    all: bool,
    zones: HashSet<Name>,
}

fn dirty() -> &'static Mutex<Dirty> {
    static DIRTY: OnceLock<Mutex<Dirty>> = OnceLock::new();
    DIRTY.get_or_init(Default::default)
}

/// A reload of `zones` (lower-cased; None: every zone) is under way: the
/// driver reads their state files again once woken.
pub(crate) fn reloaded(zones: Option<&HashSet<Name>>) {
    let mut marked = dirty().lock().unwrap_or_else(|e| e.into_inner());
    match zones {
        None => marked.all = true,
        Some(zones) => marked.zones.extend(zones.iter().cloned()),
    }
}

/// The zones marked since the last call: None for all of them.
fn take_dirty() -> Option<HashSet<Name>> {
    let mut marked = dirty().lock().unwrap_or_else(|e| e.into_inner());
    let taken = std::mem::take(&mut *marked);
    (!taken.all).then_some(taken.zones)
}

/// One zone as a round sees it.
struct Surveyed {
    origin: Name,
    signing: Arc<Signing>,
    outlook: Option<Outlook>,
    error: Option<String>,
}

/// Reads each zone's state file and looks ahead (file reads: off the runtime).
fn survey(signed: Vec<(Name, Arc<Signing>)>, now: UnixTime) -> Vec<Surveyed> {
    signed
        .into_iter()
        .map(|(origin, signing)| {
            let zone = key_state::zone_text(&origin);
            let (outlook, error) = match key_state::read_state(&signing.key_directory, &zone) {
                Ok(Some(state)) => {
                    let policy = current_policy(&signing.policy, &state, now);
                    let seen = crate::plan::rollover::outlook(&state, policy, now);
                    (Some(seen), None)
                }
                Ok(None) => (None, None),
                Err(e) => (None, Some(e)),
            };
            Surveyed {
                origin,
                signing,
                outlook,
                error,
            }
        })
        .collect()
}

/// What the driver last read of each signed zone.
#[derive(Default)]
struct Known {
    zones: HashMap<Name, Surveyed>,
}

impl Known {
    /// Of the signed zones (every other one is forgotten), those to read
    /// again: new ones, ones whose signing changed (a reloaded policy),
    /// the `dirty` (None: all), and those with an event due or a wait
    /// for the parent.
    fn stale(
        &mut self,
        signed: Vec<(Name, Arc<Signing>)>,
        dirty: Option<HashSet<Name>>,
        now: UnixTime,
    ) -> Vec<(Name, Arc<Signing>)> {
        let listed: HashSet<Name> = signed.iter().map(|(o, _)| o.to_lowercase()).collect();
        self.zones.retain(|origin, _| listed.contains(origin));
        signed
            .into_iter()
            .filter(|(origin, signing)| {
                let Some(seen) = self.zones.get(&origin.to_lowercase()) else {
                    return true;
                };
                let due = seen.outlook.as_ref().is_none_or(|o| {
                    o.due_now || o.parent.is_some() || o.next.is_some_and(|at| at <= now)
                });
                due || !Arc::ptr_eq(&seen.signing, signing)
                    || dirty
                        .as_ref()
                        .is_none_or(|d| d.contains(&origin.to_lowercase()))
            })
            .collect()
    }

    /// Takes what was read; every zone known, in no particular order.
    fn update(&mut self, fresh: Vec<Surveyed>) -> Vec<&Surveyed> {
        for zone in fresh {
            self.zones.insert(zone.origin.to_lowercase(), zone);
        }
        self.zones.values().collect()
    }
}

/// Per zone: when the parent is asked next, and the wait after that.
#[derive(Default)]
struct ParentSchedule {
    next: HashMap<Name, (UnixTime, Duration, String)>,
}

impl ParentSchedule {
    /// Whether `zone`, waiting as `message` says, is to be checked at `now`.
    fn due(&mut self, zone: &Name, message: &str, now: UnixTime) -> bool {
        match self.next.get(zone) {
            Some((at, _, said)) if said == message => *at <= now,
            _ => {
                // A new wait starts with a quick check.
                self.next
                    .insert(zone.clone(), (now, PARENT_CHECK_FIRST, message.to_string()));
                true
            }
        }
    }

    fn checked(&mut self, zone: &Name, now: UnixTime) {
        if let Some((at, wait, _)) = self.next.get_mut(zone) {
            *at = now + wait.as_secs();
            *wait = (*wait * 2).min(PARENT_CHECK_MOST);
        }
    }

    fn earliest(&self) -> Option<UnixTime> {
        self.next.values().map(|(at, _, _)| *at).min()
    }
}

/// Runs until the server stops: each round looks at every signed zone,
/// checks parents, signs the zones whose keys move, and sleeps until the
/// next time anything is due.
pub(crate) async fn drive(
    catalog: SharedCatalog,
    files: Arc<Mutex<ZoneFiles>>,
    transfers: Arc<Transfers>,
) {
    let mut parents = ParentSchedule::default();
    let mut retries = Retries::default();
    let mut known = Known::default();
    loop {
        let signed = files
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .signed_zones();
        if signed.is_empty() {
            statuses().lock().unwrap_or_else(|e| e.into_inner()).clear();
            waker().notified().await;
            continue;
        }
        let now = heron_proto::time::unix_now();
        let stale = known.stale(signed, take_dirty(), now);
        let fresh = crate::background::run("rollover-look", move || survey(stale, now)).await;
        let zones = known.update(fresh);
        let mut due: HashSet<Name> = HashSet::new();
        let mut wanted: HashSet<Name> = HashSet::new();
        let mut next: Option<UnixTime> = None;
        let mut parent_moved: HashSet<Name> = HashSet::new();
        for &zone in &zones {
            let Some(outlook) = &zone.outlook else {
                continue;
            };
            if outlook.due_now {
                wanted.insert(zone.origin.to_lowercase());
                match retries.held_until(&zone.origin, now) {
                    Some(until) => next = earliest(next, Some(until)),
                    None => {
                        due.insert(zone.origin.to_lowercase());
                    }
                }
            }
            next = earliest(next, outlook.next);
            if let Some(wait) = &outlook.parent
                && check_parent(&mut parents, zone, wait, now).await
            {
                due.insert(zone.origin.to_lowercase());
                parent_moved.insert(zone.origin.to_lowercase());
            }
        }
        record(&zones, &parent_moved);
        parents.next.retain(|origin, _| {
            zones.iter().any(|z| {
                z.origin == *origin && z.outlook.as_ref().is_some_and(|o| o.parent.is_some())
            })
        });
        retries.note(&wanted, &due, now);
        if !due.is_empty() {
            let selection = Selection {
                zones: Some(due),
                force: true,
                from_served: true,
            };
            reload(
                &catalog,
                &files,
                &transfers,
                "DNSSEC key rollover",
                selection,
            )
            .await;
            tokio::time::sleep(LEAST_ROUND).await;
            continue;
        }
        let waiting = zones
            .iter()
            .any(|z| z.outlook.as_ref().is_some_and(|o| o.parent.is_some()));
        sleep_until(wake_at(next, parents.earliest(), waiting, now)).await;
    }
}

/// Zones due again right after being signed: their signing did not move
/// their keys (it failed: the log says why). Each is tried again after a
/// wait that doubles, so a broken zone costs a line now and then, not a
/// signing a second.
#[derive(Default)]
struct Retries {
    last_due: HashSet<Name>,
    held: HashMap<Name, (UnixTime, Duration)>,
}

impl Retries {
    fn held_until(&self, zone: &Name, now: UnixTime) -> Option<UnixTime> {
        let zone = zone.to_lowercase();
        let (until, _) = self.held.get(&zone)?;
        (*until > now).then_some(*until)
    }

    /// `due` is signed now: a zone due in the round before too waits.
    /// A zone no longer `wanted` (its keys moved) starts afresh.
    fn note(&mut self, wanted: &HashSet<Name>, due: &HashSet<Name>, now: UnixTime) {
        self.held.retain(|zone, _| wanted.contains(zone));
        for zone in due.intersection(&self.last_due) {
            let entry = self.held.entry(zone.clone()).or_insert((now, LEAST_ROUND));
            entry.1 = (entry.1 * 2).min(PARENT_CHECK_MOST);
            entry.0 = now + entry.1.as_secs();
            tracing::warn!(
                zone = %zone,
                "DNSSEC keys did not move at the last signing; trying again in {} s",
                entry.1.as_secs()
            );
        }
        self.last_due = due.clone();
    }
}

/// When the driver looks again: the next key event, the next parent
/// check, and while a zone waits for its parent at least every
/// [`WAITING_LOOK`]: its state file is read again then, so that a `heron
/// keymgr ds-seen` run beside the server (which cannot wake it) is shown
/// by status and zone-status within that, not after the parent check's
/// back-off of up to an hour (black-box finding CA-5).
fn wake_at(
    next: Option<UnixTime>,
    parent_check: Option<UnixTime>,
    waiting: bool,
    now: UnixTime,
) -> Option<UnixTime> {
    let look = waiting.then(|| now + WAITING_LOOK.as_secs());
    earliest(earliest(next, parent_check), look)
}

fn earliest(a: Option<UnixTime>, b: Option<UnixTime>) -> Option<UnixTime> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Sleeps until `at` (Unix seconds; at least [`LEAST_ROUND`], at most
/// [`IDLE`]) or until woken.
async fn sleep_until(at: Option<UnixTime>) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let wait = at.map_or(IDLE, |at| Duration::from_secs(at).saturating_sub(now));
    let wait = wait.clamp(LEAST_ROUND, IDLE);
    tokio::select! {
        _ = tokio::time::sleep(wait) => {}
        _ = waker().notified() => {}
    }
}

/// Asks the zone's parent servers for its DS RRset when due; whether the
/// answers moved the keys (the zone is then signed again).
async fn check_parent(
    parents: &mut ParentSchedule,
    zone: &Surveyed,
    wait: &ParentWait,
    now: UnixTime,
) -> bool {
    let servers = zone.signing.policy.parent_servers.clone();
    if servers.is_empty() || !parents.due(&zone.origin, &wait.message, now) {
        return false;
    }
    parents.checked(&zone.origin, now);
    let answers = ask_parents(&zone.origin, &servers).await;
    let key = key_state::zone_text(&zone.origin);
    let status_error = answers.as_ref().err().cloned();
    {
        let mut all = statuses().lock().unwrap_or_else(|e| e.into_inner());
        let status = all.entry(key.clone()).or_default();
        status.parent_checked = Some(now);
        // One line when the error changes, not one per check.
        if let Some(e) = &status_error
            && status.parent_error.as_ref() != Some(e)
        {
            tracing::warn!(zone = %zone.origin, "DNSSEC parent check: {e}");
        }
        status.parent_error = status_error;
    }
    let Ok(answers) = answers else {
        return false;
    };
    let (dir, origin) = (zone.signing.key_directory.clone(), zone.origin.clone());
    let removing: Vec<(u16, u8)> = wait.remove.iter().map(|k| (k.tag, k.algorithm)).collect();
    let applied = crate::background::run("rollover-parent", move || {
        apply_parent(&dir, &origin, &removing, &answers, now)
    })
    .await;
    match applied {
        Ok(moved) => moved,
        Err(e) => {
            tracing::warn!(zone = %zone.origin, "DNSSEC parent check: {e}");
            false
        }
    }
}

/// Warns of DS records at the parent that name one of the zone's keys
/// with a digest of none (a digest mistyped at the registrar: the zone is
/// bogus where that is the key's only DS), once while they stay the same
/// (black-box finding AY-5: the check said nothing, only "add the DS").
fn say_mismatched_ds(origin: &Name, dnskeys: &[Vec<u8>], answers: &[Vec<Vec<u8>>]) {
    static SAID: OnceLock<Mutex<HashMap<Name, Vec<Vec<u8>>>>> = OnceLock::new();
    let found = heron_dnssec::ds::mismatched(origin, dnskeys, answers);
    let mut said = SAID
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let before = said.get(origin).cloned().unwrap_or_default();
    if found == before {
        return;
    }
    let text: Vec<String> = found
        .iter()
        .filter_map(|ds| heron_dnssec::ds::ds_text(ds))
        .collect();
    if !found.is_empty() {
        tracing::warn!(
            zone = %origin,
            "DNSSEC parent check: the parent publishes DS {} for a key of the zone with a digest \
             that is not that key's: validators find the zone bogus while it is the key's only DS; \
             correct it at the parent (the zone's CDS records give the right one)",
            text.join(", ")
        );
    }
    match found.is_empty() {
        true => said.remove(origin),
        false => said.insert(origin.clone(), found),
    };
}

/// Feeds the parent's DS RRsets to the zone's state file; whether a key's
/// wait for the parent ended.
fn apply_parent(
    dir: &std::path::Path,
    origin: &Name,
    removing: &[(u16, u8)],
    answers: &[Vec<Vec<u8>>],
    now: UnixTime,
) -> Result<bool, String> {
    let zone = key_state::zone_text(origin);
    let Some(state) = key_state::read_state(dir, &zone)? else {
        return Ok(false);
    };
    let mut dnskeys = Vec::new();
    for key in state.keys.iter().filter(|k| k.role.signs_keys()) {
        let (file, signing) = key_state::read_key_of(dir, &zone, key)?;
        dnskeys.push(signing.dnskey_rdata(file.role.flags()));
    }
    say_mismatched_ds(origin, &dnskeys, answers);
    let present = keys_at_parent(origin, &dnskeys, removing, answers);
    key_state::handle_event(dir, &zone, Event::ParentDs(present), now)?;
    let after = key_state::read_state(dir, &zone)?.map(|s| s.keys);
    let moved = after.is_some_and(|keys| {
        keys.iter()
            .zip(&state.keys)
            .any(|(a, b)| (a.ds_seen, a.ds_gone) != (b.ds_seen, b.ds_gone))
    });
    if moved {
        tracing::info!(zone = %origin, "DNSSEC: every parent server shows the DS change");
    }
    Ok(moved)
}

/// Each parent server's DS RRset for `zone`, asked at once (one query per
/// server); an error naming the first server that did not answer.
async fn ask_parents(zone: &Name, servers: &[SocketAddr]) -> Result<Vec<Vec<Vec<u8>>>, String> {
    let mut asked = tokio::task::JoinSet::new();
    for (index, &server) in servers.iter().enumerate() {
        let zone = zone.clone();
        asked.spawn(async move { (index, server, ask_one(&zone, server).await) });
    }
    let mut answers = vec![Vec::new(); servers.len()];
    let mut failed = None;
    while let Some(done) = asked.join_next().await {
        let Ok((index, server, answer)) = done else {
            continue;
        };
        match answer {
            Ok(ds) => answers[index] = ds,
            Err(e) => failed = failed.or(Some(format!("parent server {server}: {e}"))),
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(answers),
    }
}

async fn ask_one(zone: &Name, server: SocketAddr) -> Result<Vec<Vec<u8>>, String> {
    let local: SocketAddr = match server {
        SocketAddr::V4(_) => "0.0.0.0:0".parse().expect("an address"),
        SocketAddr::V6(_) => "[::]:0".parse().expect("an address"),
    };
    let socket = tokio::net::UdpSocket::bind(local)
        .await
        .map_err(|e| e.to_string())?;
    socket.connect(server).await.map_err(|e| e.to_string())?;
    let id = heron_proto::message::random_id();
    socket
        .send(&ds_query(zone, id))
        .await
        .map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 4096];
    let deadline = tokio::time::Instant::now() + PARENT_TIMEOUT;
    // Datagrams that are not the answer (late, spoofed) are skipped; the
    // deadline bounds the loop.
    loop {
        let received = tokio::time::timeout_at(deadline, socket.recv(&mut buf)).await;
        let len = match received {
            Err(_) => return Err(format!("no answer within {} s", PARENT_TIMEOUT.as_secs())),
            Ok(Err(e)) => return Err(e.to_string()),
            Ok(Ok(len)) => len,
        };
        match ds_in_answer(&buf[..len], zone, id) {
            Err(e) if e.contains("another query") => continue,
            other => return other,
        }
    }
}

/// Keeps each zone's status, logging a line when what it waits for changes.
/// A zone in `parent_moved` has just seen its parent's DS change: what it
/// was surveyed waiting for is over, and is neither kept nor said (the
/// next round, after its signing, says what it waits for then).
fn record(zones: &[&Surveyed], parent_moved: &HashSet<Name>) {
    let mut all = statuses().lock().unwrap_or_else(|e| e.into_inner());
    record_into(&mut all, zones, parent_moved);
}

fn record_into(
    all: &mut HashMap<String, ZoneRollover>,
    zones: &[&Surveyed],
    parent_moved: &HashSet<Name>,
) {
    let mut seen = HashSet::new();
    for &zone in zones {
        let key = key_state::zone_text(&zone.origin);
        seen.insert(key.clone());
        let status = all.entry(key.clone()).or_default();
        if let Some(e) = &zone.error
            && status.error.as_ref() != Some(e)
        {
            tracing::warn!(zone = %zone.origin, "DNSSEC keys: {e}");
        }
        status.error = zone.error.clone();
        status.next = zone.outlook.as_ref().and_then(|o| o.next);
        if parent_moved.contains(&zone.origin.to_lowercase()) {
            continue;
        }
        let waiting = zone.outlook.as_ref().and_then(|o| o.parent.as_ref());
        let message = waiting.map(|w| w.message.replace("ZONE", key.trim_end_matches('.')));
        if message != status.waiting {
            match &message {
                Some(m) => tracing::warn!(zone = %zone.origin, "DNSSEC rollover {m}"),
                None if status.waiting.is_some() => {
                    tracing::info!(zone = %zone.origin, "DNSSEC rollover: the parent step is done")
                }
                None => {}
            }
        }
        status.waiting = message;
    }
    all.retain(|zone, _| seen.contains(zone));
}

/// `heron ctl ds-seen ZONE`: the parent publishes what the zone's CDS
/// asks; the zone is signed again at once if that moves its keys.
pub(crate) fn ds_seen(dir: PathBuf, origin: &Name) -> Result<String, String> {
    let zone = key_state::zone_text(origin);
    let state = key_state::read_state(&dir, &zone)?
        .ok_or_else(|| format!("{zone} has no key state file yet"))?;
    let now = heron_proto::time::unix_now();
    let Some(policy) = state.policy.clone() else {
        return Err(format!("{zone}: no policy recorded yet"));
    };
    let waiting = crate::plan::rollover::outlook(&state, policy, now).parent;
    let Some(wait) = waiting else {
        return Err(format!("{zone} is not waiting for the parent"));
    };
    key_state::handle_event(&dir, &zone, Event::DsSeen, now)?;
    wake();
    let tags = |keys: &[heron_dnssec::rollover::KeyRef]| {
        keys.iter()
            .map(|k| k.tag.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut said = Vec::new();
    if !wait.add.is_empty() {
        said.push(format!(
            "the DS of key {} is at the parent",
            tags(&wait.add)
        ));
    }
    if !wait.remove.is_empty() {
        said.push(format!(
            "the DS of key {} is gone from the parent",
            tags(&wait.remove)
        ));
    }
    tracing::info!(zone = %origin, "DNSSEC: ds-seen: {}", said.join("; "));
    Ok(said.join("; "))
}

/// `heron ctl roll ZONE KEY`: the key named (id or tag), or every key of
/// a role (`ksk`, `zsk`, `csk`), rolls over: its successor is made and
/// published at once, or, while a rollover of that role is under way,
/// once that one is done. What the operator is told.
pub(crate) fn roll(dir: PathBuf, origin: &Name, name: &str) -> Result<String, String> {
    let zone = key_state::zone_text(origin);
    let state = key_state::read_state(&dir, &zone)?
        .ok_or_else(|| format!("{zone} has no key state file yet"))?;
    let Some(policy) = state.policy.clone() else {
        return Err(format!("{zone}: no policy recorded yet"));
    };
    if policy.insecure {
        return Err(format!(
            "{zone} is going insecure: its keys are retiring, none rolls"
        ));
    }
    let ids = key_state::keys_to_roll(&state.keys, name)?;
    let now = heron_proto::time::unix_now();
    for id in &ids {
        key_state::handle_event(&dir, &zone, Event::Roll(id.clone()), now)?;
    }
    reloaded(Some(&HashSet::from([origin.to_lowercase()])));
    wake();
    let rolled: Vec<String> = (state.keys.iter())
        .filter(|k| ids.contains(&k.id))
        .map(|k| format!("key {} ({:?})", k.tag, k.role).to_ascii_lowercase())
        .collect();
    let after = key_state::read_state(&dir, &zone)?.map_or(Vec::new(), |s| s.keys);
    let starts_now = !heron_dnssec::rollover::Rollover::new(policy, after)
        .advance(now)
        .generate
        .is_empty();
    let when = match starts_now {
        true => "its successor is made and published now",
        // A key still being introduced (its DNSKEY not yet everywhere)
        // holds it too (black-box finding BP-2: "under way" was said of
        // a first key's introduction).
        false => {
            "once the keys' step under way (a rollover, or a key's introduction) is done; `heron ctl keys` shows it asked"
        }
    };
    let said = format!("{} rolls over: {when}", rolled.join(", "));
    tracing::info!(zone = %origin, "DNSSEC: heron ctl roll: {said}");
    Ok(said)
}

/// The configured policy of a signed zone, for `heron ctl keys`.
pub(crate) fn policy_of(files: &ZoneFiles, origin: &Name) -> Option<(Arc<Policy>, PathBuf)> {
    files
        .signed_zones()
        .into_iter()
        .find(|(o, _)| o == origin)
        .map(|(_, s)| (s.policy.clone(), s.key_directory.clone()))
}

/// The DNSSEC fields of a signed zone's `zone-status` row.
pub(crate) fn zone_status_fields(row: &mut serde_json::Value, zone: &Name) {
    use serde_json::json;
    let all = statuses().lock().unwrap_or_else(|e| e.into_inner());
    let Some(status) = all.get(&key_state::zone_text(zone)) else {
        return;
    };
    row["dnssec_waiting"] = json!(status.waiting);
    row["dnssec_next_event"] = json!(status.next);
    row["dnssec_parent_checked"] = json!(status.parent_checked);
    row["dnssec_parent_error"] = json!(status.parent_error);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(text: &str) -> Name {
        Name::parse(text).unwrap()
    }

    fn surveyed(origin: &Name, signing: &Arc<Signing>, next: Option<UnixTime>) -> Surveyed {
        Surveyed {
            origin: origin.clone(),
            signing: signing.clone(),
            outlook: Some(Outlook {
                due_now: false,
                next,
                parent: None,
            }),
            error: None,
        }
    }

    /// Black-box finding: a parent check that saw the DS logged "every
    /// parent server shows the DS change", then the wait it had just
    /// ended ("waiting for the parent: add the DS") from the survey made
    /// before it. A zone whose parent check moved its keys keeps neither.
    #[test]
    fn a_wait_the_parent_check_just_ended_is_not_recorded() {
        let signing = Arc::new(Signing {
            policy: Arc::new(Policy::default()),
            key_directory: PathBuf::from("/k"),
        });
        let origin = name("parent-moved.test.");
        let mut zone = surveyed(&origin, &signing, Some(77));
        zone.outlook.as_mut().unwrap().parent = Some(heron_dnssec::rollover::ParentWait {
            add: Vec::new(),
            remove: Vec::new(),
            message: "waiting for the parent: add the DS".into(),
        });
        let mut all = HashMap::new();
        let status = |all: &HashMap<String, ZoneRollover>| {
            (all.get("parent-moved.test.")).map(|s| (s.waiting.clone(), s.next))
        };
        record_into(&mut all, &[&zone], &HashSet::from([origin.to_lowercase()]));
        assert_eq!(
            status(&all),
            Some((None, Some(77))),
            "the ended wait is not kept"
        );
        record_into(&mut all, &[&zone], &HashSet::new());
        let (waiting, _) = status(&all).unwrap();
        assert!(
            waiting.is_some_and(|w| w.contains("add the DS")),
            "kept when it holds"
        );
    }

    #[test]
    fn only_zones_that_may_have_moved_are_read_again() {
        let signing = Arc::new(Signing {
            policy: Arc::new(Policy::default()),
            key_directory: PathBuf::from("/k"),
        });
        let (a, b, c) = (name("a.test."), name("b.test."), name("c.test."));
        let all = || {
            vec![
                (a.clone(), signing.clone()),
                (b.clone(), signing.clone()),
                (c.clone(), signing.clone()),
            ]
        };
        let mut known = Known::default();
        assert_eq!(
            known.stale(all(), Some(HashSet::new()), 100).len(),
            3,
            "new"
        );
        known.update(vec![
            surveyed(&a, &signing, Some(200)),
            surveyed(&b, &signing, None),
            surveyed(&c, &signing, Some(150)),
        ]);
        let names = |list: Vec<(Name, Arc<Signing>)>| -> Vec<Name> {
            let mut names: Vec<Name> = list.into_iter().map(|(o, _)| o).collect();
            names.sort_by_key(|n| n.to_string());
            names
        };
        assert!(known.stale(all(), Some(HashSet::new()), 100).is_empty());
        let at_150 = names(known.stale(all(), Some(HashSet::new()), 150));
        assert_eq!(at_150, std::slice::from_ref(&c));
        let dirty = HashSet::from([b.clone()]);
        let marked = names(known.stale(all(), Some(dirty), 100));
        assert_eq!(marked, std::slice::from_ref(&b));
        assert_eq!(known.stale(all(), None, 100).len(), 3, "a whole reload");
        let other = Arc::new(Signing {
            policy: Arc::new(Policy::default()),
            key_directory: PathBuf::from("/k"),
        });
        let changed = vec![(a.clone(), other), (b.clone(), signing.clone())];
        assert_eq!(names(known.stale(changed, Some(HashSet::new()), 100)), [a]);
        assert_eq!(known.zones.len(), 2, "c is no longer signed: forgotten");
    }

    #[test]
    fn a_zone_due_round_after_round_waits_longer_each_time() {
        let zone = name("z.test.");
        let set = HashSet::from([zone.clone()]);
        let mut retries = Retries::default();
        retries.note(&set, &set, 100);
        assert_eq!(retries.held_until(&zone, 100), None, "once is normal");
        retries.note(&set, &set, 101);
        let first = retries.held_until(&zone, 101).unwrap();
        assert_eq!(first, 103);
        // Held: not signed, still wanted; due again once the wait is over.
        retries.note(&set, &HashSet::new(), 102);
        assert_eq!(retries.held_until(&zone, 102), Some(103));
        retries.note(&set, &set, 103);
        retries.note(&set, &set, 103);
        assert_eq!(retries.held_until(&zone, 103), Some(107), "4 s after 2 s");
        for _ in 0..40 {
            retries.note(&set, &set, 200);
        }
        let most = PARENT_CHECK_MOST.as_secs();
        assert_eq!(retries.held_until(&zone, 200), Some(200 + most), "capped");
        // Its keys moved: no longer wanted, no longer held.
        retries.note(&HashSet::new(), &HashSet::new(), 300);
        assert_eq!(retries.held_until(&zone, 300), None);
    }

    /// A parent server that never answers costs the timeout, no more.
    #[tokio::test]
    async fn a_silent_parent_server_times_out() {
        let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let started = std::time::Instant::now();
        let said = ask_one(&name("z.test."), silent.local_addr().unwrap())
            .await
            .unwrap_err();
        assert!(said.contains("no answer within 2 s"), "{said}");
        assert!(started.elapsed() < PARENT_TIMEOUT * 3);
        let answers = ask_parents(&name("z.test."), &[silent.local_addr().unwrap()]).await;
        assert!(answers.unwrap_err().contains("parent server 127.0.0.1:"));
    }

    /// A datagram that is not the answer (another id) is skipped, and
    /// the answer after it is read.
    #[tokio::test]
    async fn a_stray_datagram_is_skipped() {
        let server = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr().unwrap();
        let zone = name("z.test.");
        let mut ds = vec![0, 1, 13, 2];
        ds.extend_from_slice(&[9; 32]);
        let reply = ds.clone();
        let responder = std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            let (len, from) = server.recv_from(&mut buf).unwrap();
            let query = &buf[..len];
            let id = u16::from_be_bytes([query[0], query[1]]);
            // The question as asked, without the OPT record.
            let question = &query[12..len - 11];
            let answer = |id: u16, with: &[u8]| {
                let mut out = id.to_be_bytes().to_vec();
                out.extend_from_slice(&[0x84, 0, 0, 1, 0, 1, 0, 0, 0, 0]);
                out.extend_from_slice(question);
                out.extend_from_slice(&[0xC0, 12, 0, 43, 0, 1, 0, 0, 0, 60, 0, with.len() as u8]);
                out.extend_from_slice(with);
                out
            };
            server
                .send_to(&answer(id.wrapping_add(1), &[1, 1, 1, 1, 1]), from)
                .unwrap();
            server.send_to(&answer(id, &reply), from).unwrap();
        });
        let got = ask_one(&zone, addr).await.unwrap();
        responder.join().unwrap();
        assert_eq!(got, vec![ds]);
    }

    #[test]
    fn parent_checks_back_off_while_the_wait_is_the_same() {
        let zone = name("z.test.");
        let mut parents = ParentSchedule::default();
        assert!(
            parents.due(&zone, "add 1", 100),
            "a new wait is checked at once"
        );
        parents.checked(&zone, 100);
        assert!(!parents.due(&zone, "add 1", 101));
        assert!(parents.due(&zone, "add 1", 102));
        parents.checked(&zone, 102);
        assert!(!parents.due(&zone, "add 1", 105));
        assert!(parents.due(&zone, "add 1", 106), "4 s after 2 s");
        for at in 0..30 {
            parents.checked(&zone, 1000 + at);
        }
        let most = PARENT_CHECK_MOST.as_secs();
        assert_eq!(parents.earliest(), Some(1029 + most), "capped");
        assert!(
            parents.due(&zone, "remove 1", 1030),
            "another wait starts afresh"
        );
    }

    /// `heron ctl roll` of a zone going insecure is refused (its keys are
    /// all retiring) and the state file is left as it was.
    #[test]
    fn a_zone_waiting_for_its_parent_is_looked_at_every_minute() {
        let look = WAITING_LOOK.as_secs();
        assert_eq!(wake_at(None, None, false, 1000), None, "nothing scheduled");
        assert_eq!(wake_at(None, Some(5000), true, 1000), Some(1000 + look));
        assert_eq!(wake_at(Some(1010), Some(5000), true, 1000), Some(1010));
        assert_eq!(wake_at(None, Some(5000), false, 1000), Some(5000));
    }

    #[test]
    fn no_key_rolls_in_a_zone_going_insecure() {
        use heron_dnssec::rollover::state_file::ZoneKeys;
        use heron_dnssec::rollover::{Key, Role};
        let dir = tempfile::tempdir().unwrap();
        let zone = name("going.test.");
        let mut policy = Policy::default().rollover_policy(3600);
        let key = Key::new("k1".into(), 1, 13, Role::Csk, 1000);
        let path = key_state::state_path(dir.path(), "going.test.");
        let mut state = ZoneKeys::new("going.test.", vec![key]);
        state.policy = Some(policy.clone());
        state.save(&path).unwrap();
        let said = roll(dir.path().to_path_buf(), &zone, "csk").unwrap();
        assert!(said.contains("key 1 (csk) rolls over"), "{said}");
        policy.insecure = true;
        state.policy = Some(policy);
        state.save(&path).unwrap();
        let refused = roll(dir.path().to_path_buf(), &zone, "csk").unwrap_err();
        assert!(refused.contains("going insecure"), "{refused}");
        assert_eq!(ZoneKeys::load(&path).unwrap(), state);
    }
}
