//! Catalog zones (RFC 9432, version 2), producer side, without I/O: the
//! zones an operator made members in, the catalog zone's text out.
//!
//! A member's unique ID is a hash of its lower-cased name (and of its
//! `generation`, when an operator bumped it to reset the member), so it is
//! the same after every restart and reload without any state kept, as
//! Knot derives its IDs. The serial is the one thing carried over: from
//! the version served, or the copy written to disk before a restart.

use std::collections::HashSet;
use std::fmt::Write;

use heron_proto::{Name, RType};
use heron_zone::diff::{DiffRecord, ZoneDiff};
use heron_zone::{Zone, load_zone_str};
use sha2::{Digest, Sha256};

use super::{Change, Member, Members, member_owner, parse_zone};
use crate::serial;

/// A zone the configuration makes a member of a catalog.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Wanted {
    pub zone: Name,
    /// The `group` property, if any (one TXT string: 1 to 255 octets).
    pub group: Option<String>,
    /// Bumped by an operator to give the zone a new unique ID, which makes
    /// consumers drop their copy and transfer it afresh (RFC 9432 5.6).
    pub generation: u32,
}

/// The longest `group` property: one TXT character-string.
pub const MAX_GROUP_LEN: usize = 255;

/// Octets of hash in a unique ID (written as twice as many hex digits):
/// 64 bits, so that a collision among 100,000 members has odds of about
/// one in 10^9; one that happens is resolved by [`members`].
const ID_OCTETS: usize = 8;

/// The unique ID of `zone`'s member node: hex digits of a hash of its
/// lower-cased wire form, its `generation` and, past the first, the
/// `attempt` that found the ID free.
pub fn unique_id(zone: &Name, generation: u32, attempt: u32) -> Vec<u8> {
    let mut hash = Sha256::new();
    hash.update(zone.to_lowercase().as_wire());
    for extra in [generation, attempt] {
        if extra != 0 {
            hash.update(extra.to_be_bytes());
        }
    }
    let digest = hash.finalize();
    let mut id = String::with_capacity(ID_OCTETS * 2);
    for octet in &digest[..ID_OCTETS] {
        write!(id, "{octet:02x}").expect("writing to a String");
    }
    id.into_bytes()
}

/// The members of a catalog listing `wanted`, each with its unique ID.
/// A zone listed twice counts once (the first listing). Should two
/// zones' IDs collide, the zone later in name order tries the next
/// attempt, so the result does not depend on the order of `wanted`.
pub fn members(wanted: &[Wanted]) -> Members {
    let mut sorted: Vec<&Wanted> = wanted.iter().collect();
    sorted.sort_by_key(|w| w.zone.to_lowercase());
    let mut taken = HashSet::with_capacity(sorted.len());
    let mut members = Members::new();
    for want in sorted {
        let key = want.zone.to_lowercase();
        if members.contains_key(&key) {
            continue;
        }
        let id = (0..)
            .map(|attempt| unique_id(&want.zone, want.generation, attempt))
            .find(|id| taken.insert(id.clone()))
            .expect("some attempt finds a free ID");
        let group = want.group.as_deref().map(Box::from);
        let member = Member::new(want.zone.clone(), id.into(), group, None);
        members.insert(key, member);
    }
    members
}

/// The catalog zone as zone-file text: SOA and NS as Knot writes them
/// (`invalid.`, TTL 0: a catalog is not for resolvers), `version` "2",
/// then a PTR per member and its `group` TXT.
pub fn zone_text(catalog: &Name, serial: u32, members: &Members) -> String {
    let mut text = format!(
        "$ORIGIN {catalog}\n$TTL 0\n@ SOA invalid. invalid. {serial} 3600 600 2147483646 0\n\
         @ NS invalid.\nversion TXT \"2\"\n"
    );
    for member in members.values() {
        let owner = member_owner(catalog, &member.id);
        writeln!(text, "{owner} PTR {}", member.zone).expect("writing to a String");
        if let Some(group) = member.group() {
            let owner = owner.prepend(b"group").expect("room checked by the caller");
            writeln!(text, "{owner} TXT {}", quoted(group)).expect("writing to a String");
        }
    }
    text
}

/// `text` as one quoted character-string, `"` and `\` escaped and every
/// octet outside printable ASCII as `\DDD`.
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for &b in text.as_bytes() {
        match b {
            b'"' | b'\\' => {
                out.push('\\');
                out.push(b as char);
            }
            0x20..=0x7e => out.push(b as char),
            _ => write!(out, "\\{b:03}").expect("writing to a String"),
        }
    }
    out.push('"');
    out
}

/// Whether `catalog` leaves room for the longest owner a member gives it
/// (`group.<id>.zones.<catalog>`).
pub fn has_room(catalog: &Name) -> bool {
    let id = unique_id(catalog, 0, 0);
    let owner = catalog
        .prepend(b"zones")
        .and_then(|zones| zones.prepend(&id));
    owner.and_then(|owner| owner.prepend(b"group")).is_ok()
}

/// The serial of a new version after `previous`: the time (seconds since
/// 1970, mod 2^32) when that is later, as Knot's `unixtime` policy, so a
/// catalog whose kept copy was lost still starts past what consumers
/// have; otherwise one more.
pub fn next_serial(previous: Option<u32>, now: u32) -> u32 {
    match previous {
        Some(before) if !serial::is_newer(now, before) => before.wrapping_add(1),
        _ => now,
    }
}

/// What a catalog should be now, given the version served (or kept) and
/// the members wanted.
#[derive(Debug)]
pub enum Generated {
    /// The version given lists exactly these members: keep it.
    Unchanged,
    /// A new version: serve it, and keep `text` to read it back after a
    /// restart.
    New { zone: Zone, text: String },
}

/// The catalog `catalog` listing `wanted`, compared with `current` (the
/// version served or kept): unchanged if it lists the same members with
/// the same IDs and groups, else a new version with the next serial. A
/// new version is `current` with the members' records changed (its
/// unchanged parts shared, so a member added to 100,000 costs little
/// more than the member), or built whole when there is no readable one.
pub fn generate(catalog: &Name, wanted: &[Wanted], current: Option<&Zone>, now: u32) -> Generated {
    let members = members(wanted);
    let served = current.and_then(|zone| Some((zone, parse_zone(zone).ok()?)));
    if let Some((_, before)) = &served
        && *before == members
    {
        return Generated::Unchanged;
    }
    let serial = next_serial(current.map(Zone::serial), now);
    let text = zone_text(catalog, serial, &members);
    let changed = served.and_then(|(zone, before)| {
        let step = member_step(catalog, zone, serial, &before, &members);
        zone.apply(&step).ok()
    });
    let zone = changed.unwrap_or_else(|| {
        load_zone_str(&text, "generated catalog", catalog)
            .expect("a generated catalog is valid zone-file text")
            .zone
    });
    Generated::New { zone, text }
}

/// The IXFR step from `zone` (listing `before`) to the version with
/// `serial` listing `after`: each member's PTR and group TXT deleted or
/// added as [`super::diff`] says.
fn member_step(
    catalog: &Name,
    zone: &Zone,
    serial: u32,
    before: &Members,
    after: &Members,
) -> ZoneDiff {
    let records = |member: &Member| {
        let owner = member_owner(catalog, &member.id);
        let ptr = diff_record(&owner, RType::PTR, member.zone.as_wire().to_vec());
        let group = member.group().map(|group| {
            let mut rdata = vec![group.len() as u8];
            rdata.extend_from_slice(group.as_bytes());
            let owner = owner.prepend(b"group").expect("room checked by the caller");
            diff_record(&owner, RType::TXT, rdata)
        });
        (ptr, group)
    };
    let (mut deleted, mut added) = (Vec::new(), Vec::new());
    for change in super::diff(before, after) {
        let (gone, new) = match &change {
            Change::Add(member) => (None, Some(member)),
            Change::Remove(member) => (Some(member), None),
            Change::Reset(member) | Change::Regroup(member) => {
                (before.get(&member.zone.to_lowercase()), Some(member))
            }
            // A generated catalog writes no `coo` property.
            Change::Coo(_) => continue,
        };
        let regroup = matches!(change, Change::Regroup(_));
        if let Some(member) = gone {
            let (ptr, group) = records(member);
            deleted.extend((!regroup).then_some(ptr).into_iter().chain(group));
        }
        if let Some(member) = new {
            let (ptr, group) = records(member);
            added.extend((!regroup).then_some(ptr).into_iter().chain(group));
        }
    }
    let soa = zone.soa();
    let old_rdata = soa.first_rdata().into_owned();
    let mut new_rdata = old_rdata.clone();
    let at = new_rdata.len() - 20;
    new_rdata[at..at + 4].copy_from_slice(&serial.to_be_bytes());
    ZoneDiff {
        old_soa: diff_record(catalog, RType::SOA, old_rdata),
        new_soa: diff_record(catalog, RType::SOA, new_rdata),
        deleted,
        added,
    }
}

/// A record of the catalog, with the TTL it gives every record (0).
fn diff_record(owner: &Name, rtype: RType, rdata: Vec<u8>) -> DiffRecord {
    DiffRecord {
        owner: owner.clone(),
        rtype,
        ttl: 0,
        rdata,
    }
}

#[cfg(test)]
mod tests;
