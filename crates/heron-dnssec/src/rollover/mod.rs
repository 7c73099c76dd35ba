//! The keys of a zone through their RFC 7583 timelines, as one state
//! machine without I/O.
//!
//! [`Rollover`] holds the policy and every key of one zone. Each key has a
//! goal (to be in place, or gone) and three records, each in one of the
//! four states of RFC 7583 / draft-ietf-dnsop-dnssec-key-timing, as BIND's
//! kasp and Knot keep them: its DNSKEY (and the RRSIG it makes over the
//! DNSKEY RRset, which travel together), its RRSIGs over the zone's other
//! RRsets, and its DS at the parent. [`Rollover::advance`] is given `now`,
//! moves every record as far as the rules allow, and answers with a
//! [`Plan`]: what to publish, which keys sign what, what CDS/CDNSKEY to
//! publish, what keys to generate, what the parent must do, and when to ask
//! again. It never reads a clock, a file or the network: the caller
//! generates keys, checks the parent and feeds back [`Event`]s.
//!
//! The rules (in `rules.rs`) make one machine cover every rollover:
//!
//! * ZSK: pre-publication (RFC 6781 4.1.1.1): the new DNSKEY first, then
//!   the signatures swap, then the old DNSKEY goes.
//! * KSK: double-signature (the new DNSKEY, then the DS swapped at the
//!   parent through CDS/CDNSKEY) or double-DS (RFC 6781 4.1.2: the new DS
//!   first, then the DNSKEY swapped), by policy.
//! * CSK: both at once, on one key.
//! * Algorithm (RFC 6781 4.1.4, RFC 6840 5.11): new-algorithm signatures
//!   first, then its DNSKEYs, then the DS; the old algorithm leaves in the
//!   reverse order, so that every algorithm in the DNSKEY RRset signs every
//!   RRset that any cache may combine with it.
//! * Going insecure (RFC 8078): the DS leaves first (CDS/CDNSKEY delete),
//!   then the keys.
//!
//! A record moves from hidden to rumoured, or from omnipresent to
//! unretentive, when the rules say the chain of trust survives it; from
//! rumoured to omnipresent, or unretentive to hidden, once every cache has
//! seen the change (propagation delay plus the record's TTL; for the DS,
//! from when the parent was seen to publish or withdraw it). A key whose
//! lifetime is over, or which no longer matches the policy (algorithm,
//! CSK or split), gets a successor; the old key's goal becomes "gone" only
//! when newer keys take over all it does, and a role starts no rollover
//! while the previous one of its keys still has records in caches.

mod plan;
mod rules;
pub mod state_file;
mod status;
pub mod waits;

#[cfg(test)]
mod chain_check;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

pub use plan::{KeyRef, KeyRequest, ParentWait, Plan};
pub use status::{KeyStatus, NextEvent};

/// Seconds since the UNIX epoch: the machine's clock, passed in, and what
/// the state file keeps.
pub type UnixTime = u64;

/// What a key signs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Signs the DNSKEY, CDS and CDNSKEY RRsets; its DS is at the parent.
    Ksk,
    /// Signs every other RRset.
    Zsk,
    /// Both.
    Csk,
}

impl Role {
    /// Whether the key signs the DNSKEY RRset and has a DS (SEP flag).
    pub fn signs_keys(self) -> bool {
        self != Role::Zsk
    }

    /// Whether the key signs the zone's other RRsets.
    pub fn signs_zone(self) -> bool {
        self != Role::Ksk
    }
}

/// Where a record is on its way into or out of every cache (RFC 7583).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Not published, and in no cache.
    Hidden,
    /// Published; some caches may not have it yet.
    Rumoured,
    /// Published, and every cache that holds the RRset holds it.
    Omnipresent,
    /// Withdrawn; some caches may still hold it.
    Unretentive,
}

/// One record of a key and since when it is in its state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub state: State,
    pub since: UnixTime,
}

impl Record {
    fn hidden(at: UnixTime) -> Record {
        Record {
            state: State::Hidden,
            since: at,
        }
    }

    /// Published in the zone (or, for a DS, asked of the parent).
    pub fn is_published(self) -> bool {
        matches!(self.state, State::Rumoured | State::Omnipresent)
    }
}

/// Where a key is going.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Goal {
    /// Into every cache: the key is, or is becoming, in use.
    Omnipresent,
    /// Out of every cache: the key is retiring.
    Hidden,
}

/// The three records of a key, as the rules name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    /// The DNSKEY, with the RRSIG it makes over the DNSKEY RRset.
    Dnskey,
    /// Its RRSIGs over the zone's other RRsets.
    ZoneRrsig,
    /// Its DS at the parent (CDS/CDNSKEY in the zone).
    Ds,
}

/// A key of the zone and its timeline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Key {
    /// The caller's name for the key (its file's stem).
    pub id: String,
    pub tag: u16,
    pub algorithm: u8,
    pub role: Role,
    pub goal: Goal,
    pub created: UnixTime,
    /// When its DNSKEY was first published.
    pub published: Option<UnixTime>,
    /// When all its records were first omnipresent; its lifetime counts from here.
    pub active: Option<UnixTime>,
    /// When its goal became hidden.
    pub retired: Option<UnixTime>,
    /// When all its records were hidden again, after it retired.
    pub removed: Option<UnixTime>,
    /// An operator asked for its rollover before its lifetime is over.
    #[serde(default)]
    pub roll_requested: bool,
    pub dnskey: Record,
    pub zone_rrsig: Record,
    pub ds: Record,
    /// When the parent was seen publishing its DS, while rumoured.
    pub ds_seen: Option<UnixTime>,
    /// When the parent was seen without its DS, while unretentive.
    pub ds_gone: Option<UnixTime>,
    /// Its DS was given to the operator for the parent before the zone
    /// was signed with it (`heron keymgr generate`), or it comes from
    /// another signer: while its DS is hidden by its state, the parent
    /// may hold it all the same, so it is withdrawn (CDS delete, the
    /// parent seen without it) before the key leaves (black-box finding
    /// AY-6: a zone going insecure was served unsigned under its DS).
    #[serde(default)]
    pub ds_offered: bool,
}

impl Key {
    /// A key just generated or imported, nowhere yet.
    pub fn new(id: String, tag: u16, algorithm: u8, role: Role, now: UnixTime) -> Key {
        Key {
            id,
            tag,
            algorithm,
            role,
            goal: Goal::Omnipresent,
            created: now,
            published: None,
            active: None,
            retired: None,
            removed: None,
            roll_requested: false,
            dnskey: Record::hidden(now),
            zone_rrsig: Record::hidden(now),
            ds: Record::hidden(now),
            ds_seen: None,
            ds_gone: None,
            ds_offered: false,
        }
    }

    /// The record of one kind.
    pub fn record(&self, kind: RecordKind) -> Record {
        match kind {
            RecordKind::Dnskey => self.dnskey,
            RecordKind::ZoneRrsig => self.zone_rrsig,
            RecordKind::Ds => self.ds,
        }
    }

    fn record_mut(&mut self, kind: RecordKind) -> &mut Record {
        match kind {
            RecordKind::Dnskey => &mut self.dnskey,
            RecordKind::ZoneRrsig => &mut self.zone_rrsig,
            RecordKind::Ds => &mut self.ds,
        }
    }

    /// Whether a record of this kind belongs to the key's role.
    pub fn has(&self, kind: RecordKind) -> bool {
        match kind {
            RecordKind::Dnskey => true,
            RecordKind::ZoneRrsig => self.role.signs_zone(),
            RecordKind::Ds => self.role.signs_keys(),
        }
    }

    fn all_in(&self, state: State) -> bool {
        RecordKind::ALL
            .iter()
            .all(|&kind| !self.has(kind) || self.record(kind).state == state)
    }

    /// Whether the key is in place: every record of its role omnipresent.
    pub fn is_active(&self) -> bool {
        self.goal == Goal::Omnipresent && self.all_in(State::Omnipresent)
    }

    /// Whether the key retired and no cache holds any of its records.
    pub fn is_gone(&self) -> bool {
        self.goal == Goal::Hidden && self.all_in(State::Hidden)
    }
}

impl RecordKind {
    /// In the order a pass looks at them.
    pub const ALL: [RecordKind; 3] = [RecordKind::ZoneRrsig, RecordKind::Dnskey, RecordKind::Ds];
}

/// How a KSK (not a CSK) is rolled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KskMethod {
    /// New DNSKEY first, then the DS is swapped: one change at the parent,
    /// and every CDS names a key of the DNSKEY RRset (RFC 7344 4.1).
    #[default]
    DoubleSignature,
    /// New DS first, then the DNSKEY swapped (RFC 6781 4.1.2): the DNSKEY
    /// RRset never holds two KSKs, but the parent changes twice and the
    /// CDS names a key not yet published.
    DoubleDs,
}

/// The timing policy of a zone's keys; durations in seconds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// The DNSSEC algorithm number of new keys.
    pub algorithm: u8,
    /// One combined key rather than a KSK and a ZSK.
    pub csk: bool,
    /// Lifetimes from when a key is in place; 0: unlimited.
    pub ksk_lifetime: u64,
    pub zsk_lifetime: u64,
    pub csk_lifetime: u64,
    pub ksk_method: KskMethod,
    /// From a change of the zone to every secondary serving it (including
    /// the time to sign the zone).
    pub propagation_delay: u64,
    pub dnskey_ttl: u64,
    /// The largest TTL of any signed RRset of the zone.
    pub max_zone_ttl: u64,
    pub signature_validity: u64,
    pub parent_ds_ttl: u64,
    /// From a change at the parent to every parent server serving it.
    pub parent_propagation_delay: u64,
    /// Added to every wait before a retired record counts as gone.
    pub retire_safety: u64,
    /// The zone is to go insecure: DS withdrawn (RFC 8078), then every key.
    pub insecure: bool,
}

impl Policy {
    /// The lifetime of keys of a role; 0: unlimited.
    pub fn lifetime(&self, role: Role) -> u64 {
        match role {
            Role::Ksk => self.ksk_lifetime,
            Role::Zsk => self.zsk_lifetime,
            Role::Csk => self.csk_lifetime,
        }
    }

    /// The roles of the keys the policy wants.
    pub fn roles(&self) -> &'static [Role] {
        if self.csk {
            &[Role::Csk]
        } else {
            &[Role::Ksk, Role::Zsk]
        }
    }

    /// Rejects a policy whose signatures could expire in caches, or whose
    /// keys would need their successor before the last rollover ended.
    pub fn validate(&self) -> Result<(), String> {
        let cached = after(
            self.propagation_delay,
            &[self.dnskey_ttl.max(self.max_zone_ttl)],
        );
        if self.signature_validity <= cached {
            return Err(format!(
                "signature validity ({}s) must exceed the propagation delay plus the largest TTL ({cached}s)",
                self.signature_validity
            ));
        }
        for &role in self.roles() {
            let lifetime = self.lifetime(role);
            let rollover = self.rollover_duration(role);
            if lifetime != 0 && lifetime < rollover {
                return Err(format!(
                    "{role:?} lifetime ({lifetime}s) is shorter than one rollover ({rollover}s)"
                ));
            }
        }
        Ok(())
    }

    /// How long a rollover of a role takes, the parent answering at once.
    pub fn rollover_duration(&self, role: Role) -> u64 {
        let dnskey = after(self.propagation_delay, &[self.dnskey_ttl]);
        let sigs = after(self.propagation_delay, &[self.max_zone_ttl]);
        let ds = after(self.parent_propagation_delay, &[self.parent_ds_ttl]);
        let safety = self.retire_safety;
        let middle = match role {
            Role::Zsk => sigs,
            Role::Ksk => ds,
            Role::Csk => sigs.max(ds),
        };
        after(dnskey, &[middle, safety, dnskey, safety])
    }
}

/// Something the machine is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The caller generated (or imported) a key, as asked in
    /// [`Plan::generate`] or on its own.
    KeyAdded(Key),
    /// A check of every parent server found exactly these DS records,
    /// named by (key tag, algorithm).
    ParentDs(Vec<(u16, u8)>),
    /// The operator says the parent now publishes what the CDS/CDNSKEY
    /// RRsets ask (`heron ctl ds-seen`).
    DsSeen,
    /// The operator asks a key's rollover now.
    Roll(String),
    /// The caller deleted a key that [`Plan::removable`] listed.
    Forget(String),
}

/// An event the machine cannot apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RolloverError {
    UnknownKey(String),
    DuplicateKey(String),
    /// A key may be forgotten only once it is gone from every cache.
    KeyInUse(String),
}

impl std::fmt::Display for RolloverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RolloverError::UnknownKey(id) => write!(f, "no key {id}"),
            RolloverError::DuplicateKey(id) => write!(f, "a key {id} exists already"),
            RolloverError::KeyInUse(id) => write!(f, "key {id} is still in use"),
        }
    }
}

impl std::error::Error for RolloverError {}

/// `start` plus every wait, saturating: a state file or policy with absurd
/// numbers makes a far-off time, never an overflow.
pub(super) fn after(start: UnixTime, waits: &[u64]) -> UnixTime {
    waits
        .iter()
        .fold(start, |at, wait| at.saturating_add(*wait))
}

/// The keys of one zone and its policy.
#[derive(Clone, Debug)]
pub struct Rollover {
    policy: Policy,
    keys: Vec<Key>,
}

/// More passes than records could ever need; the rules converge far sooner.
fn pass_limit(keys: usize) -> usize {
    keys * RecordKind::ALL.len() * 4 + 4
}

impl Rollover {
    /// The machine for a zone whose keys (oldest first) are as recorded.
    pub fn new(policy: Policy, keys: Vec<Key>) -> Rollover {
        Rollover { policy, keys }
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The keys, oldest first.
    pub fn keys(&self) -> &[Key] {
        &self.keys
    }

    /// Every key's states and next event at `now` (`heron ctl keys`).
    pub fn status(&self, now: UnixTime) -> Vec<KeyStatus> {
        status::status(&self.policy, &self.keys, now)
    }

    /// A new policy; a new algorithm or key style takes effect by rollover.
    pub fn set_policy(&mut self, policy: Policy) {
        self.policy = policy;
    }

    /// Applies what happened at `now`.
    pub fn handle(&mut self, event: Event, now: UnixTime) -> Result<(), RolloverError> {
        match event {
            Event::KeyAdded(key) => {
                if self.keys.iter().any(|k| k.id == key.id) {
                    return Err(RolloverError::DuplicateKey(key.id));
                }
                self.keys.push(key);
            }
            Event::ParentDs(present) => self.parent_seen(now, |k| {
                present
                    .iter()
                    .any(|&(tag, alg)| tag == k.tag && alg == k.algorithm)
            }),
            Event::DsSeen => self.parent_seen(now, |k| k.ds.is_published()),
            Event::Roll(id) => self.key_mut(&id)?.roll_requested = true,
            Event::Forget(id) => {
                // A key never published (made ahead by `keymgr
                // generate`) is in no cache either: it may go (regression
                // hunt BC-2: generate said "delete it first", and delete
                // refused it as in use).
                let key = self.key_mut(&id)?;
                let never_out = key.published.is_none() && key.all_in(State::Hidden);
                if !key.is_gone() && !never_out {
                    return Err(RolloverError::KeyInUse(id));
                }
                self.keys.retain(|k| k.id != id);
            }
        }
        Ok(())
    }

    fn key_mut(&mut self, id: &str) -> Result<&mut Key, RolloverError> {
        self.keys
            .iter_mut()
            .find(|k| k.id == id)
            .ok_or_else(|| RolloverError::UnknownKey(id.to_string()))
    }

    /// Records that the parent publishes the DS of the keys `at_parent`
    /// says, and not of the others: it ends the waits of rumoured and
    /// unretentive DS records.
    fn parent_seen(&mut self, now: UnixTime, at_parent: impl Fn(&Key) -> bool) {
        for key in &mut self.keys {
            let present = at_parent(key);
            match key.ds.state {
                State::Rumoured if present && key.ds_seen.is_none() => key.ds_seen = Some(now),
                State::Unretentive if !present && key.ds_gone.is_none() => key.ds_gone = Some(now),
                _ => {}
            }
        }
    }

    /// Moves every key as far as the rules allow at `now` and says what
    /// the zone must publish.
    pub fn advance(&mut self, now: UnixTime) -> Plan {
        self.assign_goals(now);
        for _ in 0..pass_limit(self.keys.len()) {
            if !self.one_pass(now) {
                break;
            }
        }
        self.note_milestones(now);
        plan::plan(&self.policy, &self.keys, now)
    }

    /// [`Rollover::advance`], with the keys the plan asks for made by
    /// `generate` (which writes the key file and returns the key as
    /// [`Key::new`] makes it) and added at once, so that the plan returned
    /// asks for none; the first error of `generate` is returned.
    pub fn advance_generating<E>(
        &mut self,
        now: UnixTime,
        mut generate: impl FnMut(KeyRequest) -> Result<Key, E>,
    ) -> Result<Plan, E> {
        let mut plan = self.advance(now);
        // One round adds every role the policy has; a second is never
        // needed, the bound only keeps a faulty caller from looping.
        for _ in 0..4 {
            if plan.generate.is_empty() {
                break;
            }
            for request in std::mem::take(&mut plan.generate) {
                let key = generate(request)?;
                if !self.keys.iter().any(|k| k.id == key.id) {
                    self.keys.push(key);
                }
            }
            plan = self.advance(now);
        }
        Ok(plan)
    }

    /// A key retires when newer keys in use do all it does, or when the
    /// zone goes insecure.
    fn assign_goals(&mut self, now: UnixTime) {
        for index in 0..self.keys.len() {
            let key = &self.keys[index];
            if key.goal == Goal::Hidden {
                continue;
            }
            let newer = &self.keys[index + 1..];
            let covered = |signs: fn(Role) -> bool| {
                !signs(key.role)
                    || newer
                        .iter()
                        .any(|n| n.goal == Goal::Omnipresent && signs(n.role))
            };
            let replaced = covered(Role::signs_keys) && covered(Role::signs_zone);
            if replaced || self.policy.insecure {
                let key = &mut self.keys[index];
                key.goal = Goal::Hidden;
                key.retired = Some(now);
            }
        }
    }

    /// One look at every record; whether any moved.
    fn one_pass(&mut self, now: UnixTime) -> bool {
        let mut moved = false;
        for index in 0..self.keys.len() {
            for kind in RecordKind::ALL {
                if let Some(state) = rules::next_state(&self.keys, index, kind, &self.policy, now) {
                    let key = &mut self.keys[index];
                    *key.record_mut(kind) = Record { state, since: now };
                    match (kind, state) {
                        (RecordKind::Ds, State::Rumoured) => {
                            key.ds_seen = None;
                            key.ds_offered = false;
                        }
                        (RecordKind::Ds, State::Unretentive) => key.ds_gone = None,
                        (RecordKind::Ds, State::Hidden) => key.ds_offered = false,
                        _ => {}
                    }
                    moved = true;
                }
            }
        }
        moved
    }

    fn note_milestones(&mut self, now: UnixTime) {
        for key in &mut self.keys {
            if key.published.is_none() && key.dnskey.is_published() {
                key.published = Some(now);
            }
            if key.active.is_none() && key.is_active() {
                key.active = Some(now);
            }
            if key.removed.is_none() && key.is_gone() {
                key.removed = Some(now);
            }
        }
    }
}
