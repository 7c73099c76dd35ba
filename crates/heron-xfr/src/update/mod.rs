//! Dynamic update (RFC 2136) without I/O: an UPDATE message read and
//! checked ([`message`]), its prerequisites tested against the zone as
//! served ([`prereq`]), its changes checked against the zone's
//! `allow-update` rules ([`rules`], RFC 3007) and applied with the RFC's
//! rules (`edit`), giving the zone's next version and the diff its
//! journal keeps. The SOA serial moves on by the zone's policy
//! ([`serial`]). The caller (the server's update task) verifies TSIG,
//! serialises the updates of a zone, makes the diff durable and swaps
//! the zone.

mod edit;
pub mod message;
mod pending;
pub mod prereq;
pub mod rules;
pub mod serial;
mod view;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::Duration;

use heron_proto::{Name, RType, Rcode};
use heron_zone::Zone;
use heron_zone::diff::ZoneDiff;

pub use edit::{Ignored, is_dnssec_type};
pub use message::{Change, Prerequisite, Rejected, UpdateMessage, parse};
pub use pending::{Finished, Pending};
pub use rules::{Requester, UpdatePolicy, UpdateRule};
pub use serial::SerialPolicy;

use message::reject;
use view::View;

/// A zone's settings for updates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UpdateSettings {
    pub policy: UpdatePolicy,
    pub serial: SerialPolicy,
    /// Where the updated zone is written back, and how long after its
    /// first change since the last write (None: never).
    pub write_back: Option<(PathBuf, Duration)>,
    /// A secondary zone's `allow-update-forwarding`: whose UPDATEs are
    /// forwarded to its primary unchanged (RFC 2136 6), the answer
    /// relayed (empty: nobody's; they get NOTIMP as before).
    pub forwarding: crate::acl::Acl,
    /// `update-forwarding-key`: the key a forwarded UPDATE is signed
    /// with for the primary instead of the client's (whose TSIG was
    /// verified here), the primary's answer verified with it and signed
    /// again with the client's key. None: forwarded as received.
    pub forwarding_key: Option<heron_proto::Name>,
}

/// What an accepted update did.
pub enum Applied {
    /// The zone's next version and the diff to it.
    Changed(Box<Zone>, ZoneDiff),
    /// The prerequisites held but the changes changed nothing (adds of
    /// records present, deletes of records absent): NOERROR, no new
    /// version (RFC 2136 3.4.2.7 leaves the serial alone).
    Unchanged,
}

/// Runs one update against `zone`: the zone section (NOTAUTH if it is not
/// this zone), the prerequisites, the permissions of `who`, the changes.
/// `now` (Unix seconds) is for the serial policy.
pub fn process(
    zone: &Zone,
    update: &UpdateMessage,
    settings: &UpdateSettings,
    who: Requester,
    now: u64,
) -> Result<Applied, Rejected> {
    process_noting(zone, update, settings, who, now).map(|(applied, _)| applied)
}

/// [`process`], with the changes the RFC's rules ignored.
pub fn process_noting(
    zone: &Zone,
    update: &UpdateMessage,
    settings: &UpdateSettings,
    who: Requester,
    now: u64,
) -> Result<(Applied, Vec<Ignored>), Rejected> {
    let edited = edit_of(zone, update, settings, who, now)?;
    let Some((diff, _)) = edited.step else {
        return Ok((Applied::Unchanged, edited.ignored));
    };
    match zone.apply(&diff) {
        Ok(next) => match what_secondaries_refuse(&next, &diff) {
            Some(why) => Err(reject(
                Rcode::REFUSED,
                format!("the zone would break: {why}"),
            )),
            None => Ok((Applied::Changed(Box::new(next), diff), edited.ignored)),
        },
        Err(problems) => {
            let first = problems.first().map_or("", |p| p.message.as_str());
            Err(reject(
                Rcode::REFUSED,
                format!("the zone would break: {first}"),
            ))
        }
    }
}

/// What the zone loader warns of and other servers refuse to load or
/// transfer, made by an update: names below a DNAME (never served, RFC
/// 6672 2.4; NSD and Knot refuse the zone, and Knot the update), NS and
/// DNAME at one name below the apex (Knot refuses the zone: regression
/// hunt BD-3) and NS records at a wildcard (BIND refuses the zone). Taken, a Knot or BIND
/// secondary stopped at the version before, with no word here
/// (black-box finding BA-1). Only what the change added is looked at,
/// in `next`, the version it leads to.
pub(crate) fn what_secondaries_refuse(next: &Zone, diff: &ZoneDiff) -> Option<String> {
    let origin = next.origin().as_wire();
    for added in &diff.added {
        let owner = added.owner.to_lowercase();
        let owner = owner.as_wire();
        if added.rtype == RType::NS && added.owner.is_wildcard() {
            let why = format!(
                "NS records at the wildcard {} (BIND refuses such a zone, and its secondaries stop)",
                added.owner
            );
            return Some(why);
        }
        // At the apex: a name of the zone's own, not an NSEC3 owner the
        // signer made (black-box finding BP-1: an apex DNAME was refused
        // in every NSEC3 zone).
        let below = match owner == origin {
            true => (next.nodes().skip(1)).any(|n| n.rrsets().any(|r| r.rtype != RType::NSEC3)),
            false => next.has_children(owner),
        };
        let node = next.node(owner);
        let both = |n: &heron_zone::zone::Node| {
            n.rrset(RType::NS).is_some() && n.rrset(RType::DNAME).is_some()
        };
        if owner != origin
            && matches!(added.rtype, RType::NS | RType::DNAME)
            && node.is_some_and(|n| both(&n))
        {
            return Some(format!(
                "NS and DNAME records at {} (a delegation cannot redirect; Knot refuses such a zone)",
                added.owner
            ));
        }
        if added.rtype == RType::DNAME && below {
            let why = format!(
                "a DNAME at {}, which has names below it (never served, RFC 6672 2.4; NSD and Knot refuse such a zone)",
                added.owner
            );
            return Some(why);
        }
        let above = heron_proto::name::suffixes(owner).skip(1);
        let mut above = above.take_while(|s| s.len() >= origin.len());
        if let Some(at) = above.find(|s| {
            next.node(s)
                .is_some_and(|n| n.rrset(RType::DNAME).is_some())
        }) {
            let dname = Name::from_wire(at).map_or_else(|_| "?".into(), |n| n.to_string());
            let why = format!(
                "{} is below the DNAME at {dname} (never served, RFC 6672 2.4; NSD and Knot refuse such a zone)",
                added.owner
            );
            return Some(why);
        }
    }
    None
}

/// The zone section, the prerequisites, the permissions and the changes
/// of one update read against `zone`: the step it makes, with the names
/// it reached as it leaves them (None if it changes nothing), and the
/// changes ignored.
fn edit_of(
    zone: &dyn View,
    update: &UpdateMessage,
    settings: &UpdateSettings,
    who: Requester,
    now: u64,
) -> Result<edit::Edited, Rejected> {
    if &update.zone != zone.origin() || update.class != zone.class() {
        let why = format!("{} {} is not this zone", update.zone, update.class);
        return Err(reject(Rcode::NOTAUTH, why));
    }
    prereq::check(zone, &update.prerequisites)?;
    check_permissions(zone, update, &settings.policy, who)?;
    let mut edit = edit::Edit::new(zone);
    update.changes.iter().for_each(|c| edit.change(c));
    Ok(edit.finish(settings.serial, now))
}

/// RFC 2136 3.3 and RFC 3007: every change must be allowed, and none may
/// touch the records the signer keeps. A deletion of a whole name needs
/// each type the name holds allowed; of a name that holds nothing, a rule
/// for the name (the "delete, then add" of DHCP servers and external-dns
/// on a new name, which BIND allows).
fn check_permissions(
    zone: &dyn View,
    update: &UpdateMessage,
    policy: &UpdatePolicy,
    who: Requester,
) -> Result<(), Rejected> {
    for change in &update.changes {
        let owner = change.owner();
        let rtype = change.rtype();
        if is_dnssec_type(rtype) {
            let why = format!("{owner} {rtype}: DNSSEC records are not updatable");
            return Err(reject(Rcode::REFUSED, why));
        }
        let types = match change {
            Change::DeleteName(_) => types_at(zone, owner),
            _ => vec![rtype],
        };
        let allowed = |t: &RType| match types.is_empty() {
            true => policy.allows_name(who, owner),
            false => policy.allows(who, owner, *t),
        };
        if types.is_empty() && !allowed(&RType::ANY) {
            let why = format!("{owner}: not allowed for {}", describe(who));
            return Err(reject(Rcode::REFUSED, why));
        }
        if let Some(denied) = types.iter().find(|t| !allowed(t)) {
            let why = format!("{owner} {denied}: not allowed for {}", describe(who));
            return Err(reject(Rcode::REFUSED, why));
        }
    }
    Ok(())
}

/// The types `owner` holds (the signer's left out).
fn types_at(zone: &dyn View, owner: &Name) -> Vec<RType> {
    let key = owner.to_lowercase();
    zone.node_now(key.as_wire())
        .map(|n| {
            (n.sets.iter())
                .map(|s| s.rtype)
                .filter(|t| !is_dnssec_type(*t))
                .collect()
        })
        .unwrap_or_default()
}

/// Who asked, for a refusal's reason.
pub fn describe(who: Requester) -> String {
    match who.key {
        Some(key) => format!("key {key} from {}", who.ip),
        None => format!("unsigned request from {}", who.ip),
    }
}

pub(crate) use heron_proto::rdata::rdata_equal;
