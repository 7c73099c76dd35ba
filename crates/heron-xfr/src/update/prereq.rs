//! The prerequisites checked against the zone as served (RFC 2136 3.2):
//! in order, the first that fails decides the answer; the records of
//! value-dependent prerequisites are gathered per RRset and compared as
//! whole sets after the others (3.2.5).

use std::borrow::Cow;

use heron_proto::{Name, RType, Rcode};
use heron_zone::Zone;

use super::message::{Prerequisite, Rejected, reject};
use super::rdata_equal;

/// Ok when every prerequisite holds; else its answer code (NXDOMAIN,
/// YXDOMAIN, NXRRSET, YXRRSET) and the prerequisite that failed.
pub fn check(zone: &Zone, prerequisites: &[Prerequisite]) -> Result<(), Rejected> {
    let mut wanted: Vec<(&Name, RType, Vec<&[u8]>)> = Vec::new();
    for p in prerequisites {
        match p {
            Prerequisite::RrsetExists(owner, rtype) => {
                if !has_rrset(zone, owner, *rtype) {
                    return Err(reject(Rcode::NXRRSET, format!("{owner} {rtype} missing")));
                }
            }
            Prerequisite::RrsetAbsent(owner, rtype) => {
                if has_rrset(zone, owner, *rtype) {
                    return Err(reject(Rcode::YXRRSET, format!("{owner} {rtype} exists")));
                }
            }
            Prerequisite::NameInUse(owner) => {
                if !in_use(zone, owner) {
                    return Err(reject(Rcode::NXDOMAIN, format!("{owner} not in use")));
                }
            }
            Prerequisite::NameNotInUse(owner) => {
                if in_use(zone, owner) {
                    return Err(reject(Rcode::YXDOMAIN, format!("{owner} in use")));
                }
            }
            Prerequisite::RrsetEquals(owner, rtype, rdata) => {
                let at = wanted
                    .iter()
                    .position(|(o, t, _)| *o == owner && t == rtype);
                match at {
                    Some(at) => wanted[at].2.push(rdata),
                    None => wanted.push((owner, *rtype, vec![rdata])),
                }
            }
        }
    }
    for (owner, rtype, records) in wanted {
        if !rrset_equals(zone, owner, rtype, &records) {
            let why = format!("{owner} {rtype} is not the RRset the prerequisite gives");
            return Err(reject(Rcode::NXRRSET, why));
        }
    }
    Ok(())
}

/// The records of `owner`'s RRset of `rtype` in `zone` (empty if none).
pub(crate) fn rrset_records<'z>(zone: &'z Zone, owner: &Name, rtype: RType) -> Vec<Cow<'z, [u8]>> {
    let key = owner.to_lowercase();
    zone.node(key.as_wire())
        .and_then(|node| node.rrset(rtype))
        .map_or_else(Vec::new, |set| set.rdatas().collect())
}

fn has_rrset(zone: &Zone, owner: &Name, rtype: RType) -> bool {
    !rrset_records(zone, owner, rtype).is_empty()
}

/// Whether `owner` owns any record (an empty non-terminal does not, nor
/// a name of a signed zone left with only the signer's records, as an
/// update's deletion leaves it until the zone is signed again).
fn in_use(zone: &Zone, owner: &Name) -> bool {
    let key = owner.to_lowercase();
    zone.node(key.as_wire())
        .is_some_and(|n| n.data().any(|s| !super::is_dnssec_type(s.rtype)))
}

/// Whether the RRset holds exactly `records` (duplicates in the request
/// count once, as an RRset holds each record once).
fn rrset_equals(zone: &Zone, owner: &Name, rtype: RType, records: &[&[u8]]) -> bool {
    let held = rrset_records(zone, owner, rtype);
    let all_held = records
        .iter()
        .all(|r| held.iter().any(|h| rdata_equal(rtype, h, r)));
    let all_asked = held
        .iter()
        .all(|h| records.iter().any(|r| rdata_equal(rtype, h, r)));
    !held.is_empty() && all_held && all_asked
}
