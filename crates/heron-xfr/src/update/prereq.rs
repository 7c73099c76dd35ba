//! The prerequisites checked against the zone as served (RFC 2136 3.2):
//! in order, the first that fails decides the answer; the records of
//! value-dependent prerequisites are gathered per RRset and compared as
//! whole sets after the others (3.2.5).

use heron_proto::{Name, RType, Rcode};

use super::message::{Prerequisite, Rejected, reject};
use super::rdata_equal;
use super::view::View;

/// Ok when every prerequisite holds; else its answer code (NXDOMAIN,
/// YXDOMAIN, NXRRSET, YXRRSET) and the prerequisite that failed.
pub(crate) fn check(zone: &dyn View, prerequisites: &[Prerequisite]) -> Result<(), Rejected> {
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

fn has_rrset(zone: &dyn View, owner: &Name, rtype: RType) -> bool {
    !zone.rrset_records(owner, rtype).is_empty()
}

/// Whether `owner` owns any record (an empty non-terminal does not, nor
/// a name of a signed zone left with only the signer's records, as an
/// update's deletion leaves it until the zone is signed again).
fn in_use(zone: &dyn View, owner: &Name) -> bool {
    let key = owner.to_lowercase();
    zone.node_now(key.as_wire())
        .is_some_and(|n| n.sets.iter().any(|s| !super::is_dnssec_type(s.rtype)))
}

/// Whether the RRset holds exactly `records` (duplicates in the request
/// count once, as an RRset holds each record once).
fn rrset_equals(zone: &dyn View, owner: &Name, rtype: RType, records: &[&[u8]]) -> bool {
    let held = zone.rrset_records(owner, rtype);
    let all_held = records
        .iter()
        .all(|r| held.iter().any(|h| rdata_equal(rtype, h, r)));
    let all_asked = held
        .iter()
        .all(|h| records.iter().any(|r| rdata_equal(rtype, h, r)));
    !held.is_empty() && all_held && all_asked
}
