//! What the zone publishes and the caller does, read off the keys' states.

use super::rules::{hidden_at, omnipresent_at};
use super::{Goal, Key, Policy, RecordKind, Role, State, UnixTime};

/// A key as the plan names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRef {
    pub id: String,
    pub tag: u16,
    pub algorithm: u8,
}

impl KeyRef {
    fn of(key: &Key) -> KeyRef {
        KeyRef {
            id: key.id.clone(),
            tag: key.tag,
            algorithm: key.algorithm,
        }
    }
}

/// A key the caller should generate and report with `Event::KeyAdded`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyRequest {
    pub role: Role,
    pub algorithm: u8,
}

/// The zone waits for the parent to change its DS RRset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParentWait {
    /// Keys whose DS the parent should add (their CDS/CDNSKEY are published).
    pub add: Vec<KeyRef>,
    /// Keys whose DS the parent should remove.
    pub remove: Vec<KeyRef>,
    /// What the operator must do, in a sentence.
    pub message: String,
}

/// What the zone publishes now and what the caller must do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Keys in the DNSKEY RRset.
    pub dnskey: Vec<KeyRef>,
    /// Keys that sign the DNSKEY, CDS and CDNSKEY RRsets.
    pub key_signers: Vec<KeyRef>,
    /// Keys that sign every other RRset.
    pub zone_signers: Vec<KeyRef>,
    /// Keys published as CDS and CDNSKEY (RFC 7344).
    pub cds: Vec<KeyRef>,
    /// Publish the delete form of CDS and CDNSKEY (RFC 8078 4).
    pub cds_delete: bool,
    /// Keys to generate now.
    pub generate: Vec<KeyRequest>,
    /// Set while a step waits for the parent.
    pub parent: Option<ParentWait>,
    /// Retired keys no cache holds any more: their files may be deleted.
    pub removable: Vec<String>,
    /// When to call `advance` again at the latest (an event may come sooner).
    pub next_check: Option<UnixTime>,
}

pub(super) fn plan(policy: &Policy, keys: &[Key], now: UnixTime) -> Plan {
    let refs = |keep: &dyn Fn(&Key) -> bool| -> Vec<KeyRef> {
        keys.iter().filter(|k| keep(k)).map(KeyRef::of).collect()
    };
    let dnskey = refs(&|k| k.dnskey.is_published());
    let key_signers = refs(&|k| k.role.signs_keys() && k.dnskey.is_published());
    let zone_signers = refs(&|k| k.role.signs_zone() && k.zone_rrsig.is_published());
    let cds = refs(&|k| k.role.signs_keys() && k.ds.is_published());
    let cds_delete =
        policy.insecure && cds.is_empty() && keys.iter().any(|k| k.ds.state == State::Unretentive);
    Plan {
        dnskey,
        key_signers,
        zone_signers,
        cds,
        cds_delete,
        generate: requests(policy, keys, now),
        parent: parent_wait(keys, cds_delete, policy.algorithm),
        removable: keys
            .iter()
            .filter(|k| k.is_gone())
            .map(|k| k.id.clone())
            .collect(),
        next_check: next_check(policy, keys, now),
    }
}

/// What a key does, as the two functions a rollover hands on.
fn covers(key: &Key, signs: fn(Role) -> bool) -> bool {
    signs(key.role)
}

/// A rollover of the function is under way: a key doing it is not yet in
/// place, or a retired one may still be in caches.
fn rolling(keys: &[Key], signs: fn(Role) -> bool) -> bool {
    keys.iter().any(|k| {
        covers(k, signs)
            && match k.goal {
                Goal::Omnipresent => !k.is_active(),
                Goal::Hidden => !k.is_gone(),
            }
    })
}

fn due(policy: &Policy, key: &Key, now: UnixTime) -> bool {
    let lifetime = policy.lifetime(key.role);
    let expired = lifetime != 0
        && key
            .active
            .is_some_and(|at| now >= at.saturating_add(lifetime));
    key.roll_requested || expired
}

/// The keys to generate: a role the policy wants and no key in use of the
/// policy's algorithm fills, or whose key is due, when neither of its
/// functions is in the middle of a rollover (none needed to start).
fn requests(policy: &Policy, keys: &[Key], now: UnixTime) -> Vec<KeyRequest> {
    if policy.insecure {
        return Vec::new();
    }
    let mut wanted = Vec::new();
    for &role in policy.roles() {
        let mut filling = keys.iter().filter(|k| {
            k.goal == Goal::Omnipresent && k.role == role && k.algorithm == policy.algorithm
        });
        let missing = filling.clone().next().is_none();
        if !missing && !filling.any(|k| due(policy, k, now)) {
            continue;
        }
        let functions = [Role::signs_keys as fn(Role) -> bool, Role::signs_zone];
        let busy = functions
            .iter()
            .any(|&signs| signs(role) && rolling(keys, signs));
        if !busy || (missing && keys.iter().all(|k| k.goal == Goal::Hidden)) {
            wanted.push(KeyRequest {
                role,
                algorithm: policy.algorithm,
            });
        }
    }
    wanted
}

/// `algorithm`: the policy's; a DS to add for a key of another one is
/// said to hold back the algorithm rollover (regression hunt BG-4: the
/// operator was asked for a DS of a key about to be rolled away, and
/// nothing said a rollover waited on it).
fn parent_wait(keys: &[Key], cds_delete: bool, algorithm: u8) -> Option<ParentWait> {
    let add: Vec<KeyRef> = keys
        .iter()
        .filter(|k| k.ds.state == State::Rumoured && k.ds_seen.is_none())
        .map(KeyRef::of)
        .collect();
    let remove: Vec<KeyRef> = keys
        .iter()
        .filter(|k| k.ds.state == State::Unretentive && k.ds_gone.is_none())
        .map(KeyRef::of)
        .collect();
    if add.is_empty() && remove.is_empty() {
        return None;
    }
    let names = |list: &[KeyRef]| {
        list.iter()
            .map(|k| format!("key {} (algorithm {})", k.tag, k.algorithm))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut asks = Vec::new();
    if !add.is_empty() {
        asks.push(format!(
            "add the DS of {} (as the zone's CDS/CDNSKEY records give it)",
            names(&add)
        ));
    }
    if !remove.is_empty() {
        let how = if cds_delete {
            " (the zone publishes a CDS delete record)"
        } else {
            ""
        };
        asks.push(format!("remove the DS of {}{how}", names(&remove)));
    }
    let rollover = match add.iter().any(|k| k.algorithm != algorithm) {
        true => format!(
            "; the policy's algorithm is now {algorithm}: the algorithm rollover to it starts once this DS is at the parent"
        ),
        false => String::new(),
    };
    let message = format!(
        "waiting for the parent: {}; once every parent server shows it, run `heron ctl ds-seen ZONE` unless parent checks see it{rollover}",
        asks.join(" and ")
    );
    Some(ParentWait {
        add,
        remove,
        message,
    })
}

/// The earliest time a record may move by time alone, or a key's
/// lifetime ends.
fn next_check(policy: &Policy, keys: &[Key], now: UnixTime) -> Option<UnixTime> {
    let mut times = Vec::new();
    for key in keys {
        for kind in RecordKind::ALL {
            if !key.has(kind) {
                continue;
            }
            let at = match (key.goal, key.record(kind).state) {
                (Goal::Omnipresent, State::Rumoured) => omnipresent_at(key, kind, policy),
                (_, State::Unretentive) => hidden_at(key, kind, policy),
                _ => None,
            };
            times.extend(at);
        }
        let lifetime = policy.lifetime(key.role);
        if key.goal == Goal::Omnipresent && lifetime != 0 {
            times.extend(key.active.map(|at| at.saturating_add(lifetime)));
        }
    }
    times.into_iter().filter(|&at| at > now).min()
}
