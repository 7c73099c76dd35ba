//! BIND's `K<zone>+<alg>+<tag>.state` files (dnssec-policy, BIND 9.16 and
//! later): the key's roles and the same RFC 7583 states Heron keeps, so a
//! zone moves mid-rollover without losing its place.

use super::{ImportError, ImportedKey, error, parse_bind_time};
use crate::rollover::{self, Goal, Record, Role, State, UnixTime};

/// What a `.state` file says of a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindState {
    pub role: Role,
    pub goal: Option<Goal>,
    /// (state, since) of the DNSKEY, zone RRSIGs and DS, where recorded.
    pub dnskey: Option<Record>,
    pub zone_rrsig: Option<Record>,
    pub ds: Option<Record>,
    pub published: Option<UnixTime>,
    pub retired: Option<UnixTime>,
    pub removed: Option<UnixTime>,
    /// When BIND's parental agents check saw the DS published / withdrawn.
    pub ds_published: Option<UnixTime>,
    pub ds_removed: Option<UnixTime>,
}

fn state_of(word: &str) -> Option<State> {
    match word {
        "hidden" => Some(State::Hidden),
        "rumoured" => Some(State::Rumoured),
        "omnipresent" => Some(State::Omnipresent),
        "unretentive" => Some(State::Unretentive),
        _ => None,
    }
}

/// Parses a `.state` file's text.
pub fn parse(text: &str) -> Result<BindState, ImportError> {
    let mut fields: Vec<(&str, &str)> = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with(';') {
            continue;
        }
        let Some((name, value)) = line.split_once(':') else {
            return error(format!("`{line}` is not a `Name: value` line"));
        };
        if fields.iter().any(|(n, _)| *n == name) {
            return error(format!("{name} appears twice"));
        }
        fields.push((name, value.trim()));
    }
    let get = |name: &str| fields.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
    let time = |name: &str| -> Result<Option<UnixTime>, ImportError> {
        let Some(value) = get(name) else {
            return Ok(None);
        };
        // "20261125143232 (Wed Nov 25 14:32:32 2026)": the number counts.
        let digits = value.split_whitespace().next().unwrap_or("");
        match parse_bind_time(digits) {
            Some(at) => Ok(Some(at)),
            None => error(format!("{name} `{value}` is not a YYYYMMDDHHMMSS time")),
        }
    };
    let record = |state: &str, change: &str| -> Result<Option<Record>, ImportError> {
        let Some(word) = get(state) else {
            return Ok(None);
        };
        let Some(state_value) = state_of(word) else {
            return error(format!(
                "{state} `{word}` is not hidden, rumoured, omnipresent or unretentive"
            ));
        };
        let since = time(change)?.unwrap_or(0);
        Ok(Some(Record {
            state: state_value,
            since,
        }))
    };
    let yes = |name: &str| get(name) == Some("yes");
    let role = match (yes("KSK"), yes("ZSK")) {
        (true, true) => Role::Csk,
        (true, false) => Role::Ksk,
        (false, true) => Role::Zsk,
        (false, false) => return error("the state file gives the key neither KSK nor ZSK role"),
    };
    let goal = match get("GoalState") {
        None => None,
        Some("omnipresent") => Some(Goal::Omnipresent),
        Some("hidden") => Some(Goal::Hidden),
        Some(other) => {
            return error(format!(
                "GoalState `{other}` is neither omnipresent nor hidden"
            ));
        }
    };
    Ok(BindState {
        role,
        goal,
        dnskey: record("DNSKEYState", "DNSKEYChange")?,
        zone_rrsig: record("ZRRSIGState", "ZRRSIGChange")?,
        ds: record("DSState", "DSChange")?,
        published: time("Published")?,
        retired: time("Retired")?,
        removed: time("Removed")?,
        ds_published: time("DSPublish")?,
        ds_removed: time("DSRemoved")?,
    })
}

/// BIND swaps a ZSK's signatures gradually: while they are rumoured or
/// unretentive its zone still holds signatures of the old key, each
/// replaced only when it falls due for refresh (days later, which BIND
/// waits for). Heron signs every RRset anew when it takes the zone over:
/// the swap is complete from then, so the wait for caches counts from
/// the move, not from BIND's change.
fn zone_rrsig_at(record: Record, now: UnixTime) -> Record {
    match record.state {
        State::Rumoured | State::Unretentive => Record {
            state: record.state,
            since: record.since.max(now),
        },
        _ => record,
    }
}

impl BindState {
    /// The key as the rollover machine keeps it, from BIND's own states;
    /// a key BIND has no states for yet (made by `dnssec-keygen -k`) falls
    /// back to its timing metadata ([`ImportedKey::to_rollover_key`]).
    pub fn to_rollover_key(&self, key: &ImportedKey, id: String, now: UnixTime) -> rollover::Key {
        let mut out = key.to_rollover_key(id, self.role, now);
        let (Some(goal), Some(dnskey)) = (self.goal, self.dnskey) else {
            return out;
        };
        out.goal = goal;
        out.dnskey = dnskey;
        let hidden = Record {
            state: State::Hidden,
            since: out.created,
        };
        out.zone_rrsig = self.zone_rrsig.map_or(hidden, |r| zone_rrsig_at(r, now));
        out.ds = self.ds.unwrap_or(hidden);
        out.published = self.published.filter(|_| dnskey.state != State::Hidden);
        out.retired = self.retired.filter(|_| goal == Goal::Hidden);
        out.ds_seen = self
            .ds_published
            .filter(|_| out.ds.state == State::Rumoured);
        out.ds_gone = self
            .ds_removed
            .filter(|_| out.ds.state == State::Unretentive);
        // Its lifetime counts from when BIND made it active.
        let activated = key.times.activate.filter(|&at| at <= now).unwrap_or(now);
        out.active = out.is_active().then_some(activated);
        out.removed = out.is_gone().then(|| self.removed.unwrap_or(now));
        out
    }
}
