//! Each key's state and next event, as `heron ctl keys ZONE` lists them.

use super::rules::{hidden_at, omnipresent_at};
use super::{Goal, Key, Policy, RecordKind, Role, State, UnixTime};

/// What happens next to a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NextEvent {
    /// A record reaches every cache, or leaves the last one, at `at`.
    Record {
        kind: RecordKind,
        to: State,
        at: UnixTime,
    },
    /// The parent must add or remove the key's DS (see `Plan::parent`).
    Parent { add: bool },
    /// The key's lifetime ends: a successor is generated.
    Rollover { at: UnixTime },
    /// The key waits for another key's step (its successor, or a
    /// predecessor's retirement).
    OtherKeys,
    /// Nothing is scheduled: the key is in place for good, or gone.
    None,
}

/// One key as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyStatus {
    pub id: String,
    pub tag: u16,
    pub algorithm: u8,
    pub role: Role,
    pub goal: Goal,
    pub dnskey: State,
    pub zone_rrsig: Option<State>,
    pub ds: Option<State>,
    pub next: NextEvent,
}

pub(super) fn status(policy: &Policy, keys: &[Key], now: UnixTime) -> Vec<KeyStatus> {
    keys.iter()
        .map(|key| {
            let state = |kind| key.has(kind).then(|| key.record(kind).state);
            KeyStatus {
                id: key.id.clone(),
                tag: key.tag,
                algorithm: key.algorithm,
                role: key.role,
                goal: key.goal,
                dnskey: key.dnskey.state,
                zone_rrsig: state(RecordKind::ZoneRrsig),
                ds: state(RecordKind::Ds),
                next: next_event(policy, key, now),
            }
        })
        .collect()
}

fn next_event(policy: &Policy, key: &Key, now: UnixTime) -> NextEvent {
    let mut timed: Option<NextEvent> = None;
    for kind in RecordKind::ALL.into_iter().filter(|&k| key.has(k)) {
        let (to, at) = match (key.goal, key.record(kind).state) {
            (Goal::Omnipresent, State::Rumoured) => {
                (State::Omnipresent, omnipresent_at(key, kind, policy))
            }
            (_, State::Unretentive) => (State::Hidden, hidden_at(key, kind, policy)),
            _ => continue,
        };
        match at {
            Some(at) if at > now => {
                let sooner = match &timed {
                    Some(NextEvent::Record { at: other, .. }) => at < *other,
                    _ => true,
                };
                if sooner {
                    timed = Some(NextEvent::Record { kind, to, at });
                }
            }
            Some(_) => {}
            None => {
                return NextEvent::Parent {
                    add: to == State::Omnipresent,
                };
            }
        }
    }
    if let Some(event) = timed {
        return event;
    }
    let lifetime = policy.lifetime(key.role);
    match key.goal {
        Goal::Omnipresent if key.is_active() => match key.active {
            Some(active) if lifetime != 0 && !policy.insecure => NextEvent::Rollover {
                at: active.saturating_add(lifetime),
            },
            _ => NextEvent::None,
        },
        Goal::Hidden if key.is_gone() => NextEvent::None,
        _ => NextEvent::OtherKeys,
    }
}

fn state_name(state: State) -> &'static str {
    match state {
        State::Hidden => "hidden",
        State::Rumoured => "rumoured",
        State::Omnipresent => "omnipresent",
        State::Unretentive => "unretentive",
    }
}

impl NextEvent {
    /// What happens next, without when (`at`, for a table that has a
    /// column for the time).
    pub fn what(&self) -> String {
        match self {
            NextEvent::Record { kind, to, .. } => {
                let what = match kind {
                    RecordKind::Dnskey => "DNSKEY",
                    RecordKind::ZoneRrsig => "RRSIGs",
                    RecordKind::Ds => "DS",
                };
                format!("{what} {}", state_name(*to))
            }
            NextEvent::Parent { add: true } => "waits for the parent to add its DS".into(),
            NextEvent::Parent { add: false } => "waits for the parent to remove its DS".into(),
            NextEvent::Rollover { .. } => "rollover".into(),
            NextEvent::OtherKeys => "waits for another key's step".into(),
            NextEvent::None => "-".into(),
        }
    }

    /// When it happens, if it is timed.
    pub fn at(&self) -> Option<UnixTime> {
        match self {
            NextEvent::Record { at, .. } | NextEvent::Rollover { at } => Some(*at),
            _ => None,
        }
    }
}

impl std::fmt::Display for NextEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.at() {
            Some(at) => write!(f, "{} at {at}", self.what()),
            None => f.write_str(&self.what()),
        }
    }
}

impl std::fmt::Display for KeyStatus {
    /// One line: tag, algorithm, role, goal, the three states, next event.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let role = match self.role {
            Role::Ksk => "ksk",
            Role::Zsk => "zsk",
            Role::Csk => "csk",
        };
        let goal = match self.goal {
            Goal::Omnipresent => "active",
            Goal::Hidden => "retiring",
        };
        let optional = |s: Option<State>| s.map_or("-", state_name);
        write!(
            f,
            "{:>5} {:>3} {role} {goal:<8} dnskey={} rrsig={} ds={} next: {}",
            self.tag,
            self.algorithm,
            state_name(self.dnskey),
            optional(self.zone_rrsig),
            optional(self.ds),
            self.next
        )
    }
}
