//! The prerequisites checked against the zone as served (RFC 2136 3.2):
//! in order, the first that fails decides the answer; the records of
//! value-dependent prerequisites are gathered per RRset and compared as
//! whole sets after the others (3.2.5).

use std::collections::HashMap;

use heron_proto::rdata::canonical_rdata;
use heron_proto::{Name, RType, Rcode};

use super::message::{Prerequisite, Rejected, reject};
use super::view::View;

/// Ok when every prerequisite holds; else its answer code (NXDOMAIN,
/// YXDOMAIN, NXRRSET, YXRRSET) and the prerequisite that failed. Each
/// costs the same whatever the size of the RRset it names, and the
/// value-dependent ones are compared sorted: a client allowed to update
/// cannot make one message hold the zone's updates for seconds.
pub(crate) fn check(zone: &dyn View, prerequisites: &[Prerequisite]) -> Result<(), Rejected> {
    let mut wanted: Vec<(&Name, RType, Vec<&[u8]>)> = Vec::new();
    let mut wanted_at: HashMap<(Name, RType), usize> = HashMap::new();
    for p in prerequisites {
        match p {
            Prerequisite::RrsetExists(owner, rtype) => {
                if !zone.has_rrset(owner.to_lowercase().as_wire(), *rtype) {
                    return Err(reject(Rcode::NXRRSET, format!("{owner} {rtype} missing")));
                }
            }
            Prerequisite::RrsetAbsent(owner, rtype) => {
                if zone.has_rrset(owner.to_lowercase().as_wire(), *rtype) {
                    return Err(reject(Rcode::YXRRSET, format!("{owner} {rtype} exists")));
                }
            }
            Prerequisite::NameInUse(owner) => {
                if !zone.has_data(owner.to_lowercase().as_wire()) {
                    return Err(reject(Rcode::NXDOMAIN, format!("{owner} not in use")));
                }
            }
            Prerequisite::NameNotInUse(owner) => {
                if zone.has_data(owner.to_lowercase().as_wire()) {
                    return Err(reject(Rcode::YXDOMAIN, format!("{owner} in use")));
                }
            }
            Prerequisite::RrsetEquals(owner, rtype, rdata) => {
                let next = wanted.len();
                let at = *wanted_at
                    .entry((owner.to_lowercase(), *rtype))
                    .or_insert(next);
                match wanted.get_mut(at) {
                    Some(set) => set.2.push(rdata),
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

/// Whether the RRset holds exactly `records` (duplicates in the request
/// count once, as an RRset holds each record once): compared as sorted
/// sets of canonical RDATA, which is what [`super::rdata_equal`] compares.
fn rrset_equals(zone: &dyn View, owner: &Name, rtype: RType, records: &[&[u8]]) -> bool {
    let held = zone.rrset_records(owner, rtype);
    if held.is_empty() {
        return false;
    }
    let canonical_set = |rdatas: &mut dyn Iterator<Item = &[u8]>| {
        let mut set: Vec<Vec<u8>> = rdatas
            .map(|r| canonical_rdata(rtype, r).into_owned())
            .collect();
        set.sort_unstable();
        set.dedup();
        set
    };
    canonical_set(&mut held.iter().map(Vec::as_slice))
        == canonical_set(&mut records.iter().copied())
}
