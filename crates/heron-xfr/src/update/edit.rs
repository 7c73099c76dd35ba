//! The update section applied (RFC 2136 3.4.2): each change in order to
//! a working copy of the RRsets it reaches, with the RFC's rules (the
//! apex SOA and NS kept, CNAME alone at its name, duplicates ignored),
//! then the difference from the zone as served, ready for
//! [`Zone::apply`] and the journal.

use std::collections::BTreeMap;

use heron_proto::{Name, RType, rdata};
use heron_zone::diff::{DiffRecord, ZoneDiff};

use super::message::Change;
use super::rdata_equal;
use super::serial::SerialPolicy;
use super::view::{NodeNow, Set, Sigs, View, record_changes};

/// A name the changes reach: its RRsets as served and as changed.
struct WorkNode {
    owner: Name,
    before: Vec<Set>,
    after: Vec<Set>,
    sigs: Vec<Sigs>,
}

impl WorkNode {
    fn set(&self, rtype: RType) -> Option<&Set> {
        self.after.iter().find(|s| s.rtype == rtype)
    }

    fn set_mut(&mut self, rtype: RType, ttl: u32) -> &mut Set {
        let at = match self.after.iter().position(|s| s.rtype == rtype) {
            Some(at) => at,
            None => {
                self.after.push(Set {
                    rtype,
                    ttl,
                    rdatas: Vec::new(),
                });
                self.after.len() - 1
            }
        };
        &mut self.after[at]
    }

    fn remove(&mut self, keep: impl Fn(RType) -> bool) {
        self.after.retain(|s| keep(s.rtype));
    }

    /// The RRSIG records over the RRsets the changes removed.
    fn signatures_of_removed_sets(&self) -> Vec<DiffRecord> {
        let removed = |s: &&Sigs| self.set(s.covered).is_none();
        (self.sigs.iter().filter(removed))
            .flat_map(|s| {
                s.rdatas.iter().map(|r| DiffRecord {
                    owner: self.owner.clone(),
                    rtype: RType::RRSIG,
                    ttl: s.ttl,
                    rdata: r.clone(),
                })
            })
            .collect()
    }

    /// The name as the changes leave it: the signatures over the RRsets
    /// they removed go with them.
    fn into_now(self) -> NodeNow {
        let kept = |s: &Sigs| self.after.iter().any(|a| a.rtype == s.covered);
        let sigs = self.sigs.iter().filter(|s| kept(s)).cloned().collect();
        NodeNow {
            owner: self.owner,
            sets: self.after,
            sigs,
        }
    }
}

/// The working copy of the names an update reaches.
pub(crate) struct Edit<'z> {
    zone: &'z dyn View,
    nodes: BTreeMap<Vec<u8>, WorkNode>,
    /// An SOA the client added with a later serial (RFC 2136 3.4.2.2).
    new_soa: Option<DiffRecord>,
    /// The changes seen so far.
    seen: usize,
    /// The changes the RFC's rules ignored, and why.
    ignored: Vec<Ignored>,
    /// The DS records added away from the apex, by place and owner: one
    /// left at a name with no NS is ignored once the update is applied.
    ds_added: Vec<(usize, Vec<u8>)>,
}

/// A change of an update's section that the RFC's rules ignore (RFC 2136
/// 3.4.2, and a DS away from a delegation): its place in the section and
/// why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ignored {
    pub at: usize,
    pub why: &'static str,
}

/// Why a deletion of the apex SOA or NS RRset is ignored (3.4.2.3).
const APEX_KEPT: &str = "the apex keeps its SOA and NS";

/// What an update's changes came to: the step they make, with the names
/// they reached as they leave them (None if nothing changed), and the
/// changes the rules ignored.
pub(crate) struct Edited {
    pub(crate) step: Option<(ZoneDiff, Vec<NodeNow>)>,
    pub(crate) ignored: Vec<Ignored>,
}

/// DNSSEC types the signer keeps: never changed by a client. ZONEMD
/// too: a digest of the whole zone, stale after any change a client
/// makes, made by the server under a `zonemd` policy.
pub fn is_dnssec_type(rtype: RType) -> bool {
    matches!(
        rtype,
        RType::RRSIG
            | RType::NSEC
            | RType::NSEC3
            | RType::NSEC3PARAM
            | RType::DNSKEY
            | RType::CDS
            | RType::CDNSKEY
            | RType::ZONEMD
    )
}

impl<'z> Edit<'z> {
    pub(crate) fn new(zone: &'z dyn View) -> Edit<'z> {
        Edit {
            zone,
            nodes: BTreeMap::new(),
            new_soa: None,
            seen: 0,
            ignored: Vec::new(),
            ds_added: Vec::new(),
        }
    }

    fn node(&mut self, owner: &Name) -> &mut WorkNode {
        let key = owner.to_lowercase().as_wire().to_vec();
        let zone = self.zone;
        self.nodes
            .entry(key)
            .or_insert_with_key(|key| match zone.node_now(key) {
                Some(now) => WorkNode {
                    owner: now.owner,
                    before: now.sets.clone(),
                    after: now.sets,
                    sigs: now.sigs,
                },
                None => WorkNode {
                    owner: owner.clone(),
                    before: Vec::new(),
                    after: Vec::new(),
                    sigs: Vec::new(),
                },
            })
    }

    fn is_apex(&self, owner: &Name) -> bool {
        owner == self.zone.origin()
    }

    /// A DS stands only at a delegation (RFC 4035 2.4): one added at a
    /// name with no NS once the whole update is applied is ignored, as
    /// BIND ignores it, and a delegation whose NS the update deleted
    /// loses its DS with it. A validator takes a DS as a signed zone cut,
    /// so such a DS made the name and all below it bogus (black-box
    /// finding). Judged on the result, so an update adding a delegation's
    /// DS before its NS is taken.
    fn keep_ds_at_delegations(&mut self) {
        let origin = self.zone.origin().to_lowercase();
        let mut dropped = Vec::new();
        for (key, node) in self.nodes.iter_mut() {
            let had = |rtype| node.before.iter().any(|s| s.rtype == rtype);
            // Only what this update did: a DS it brought, or an NS it took.
            let touched = !had(RType::DS) || had(RType::NS);
            let apex = node.owner.to_lowercase() == origin;
            let orphan = node.set(RType::DS).is_some() && node.set(RType::NS).is_none();
            if orphan && touched && !apex {
                node.remove(|rtype| rtype != RType::DS);
                dropped.push(key.clone());
            }
        }
        let why = "a DS stands only at a delegation";
        let gone = (self.ds_added.iter()).filter(|(_, owner)| dropped.contains(owner));
        (self.ignored).extend(gone.map(|&(at, _)| Ignored { at, why }));
        self.ignored.sort_by_key(|i| i.at);
    }

    /// Applies the next change of the update section, noting it if the
    /// RFC's rules ignore it (for the update's log line: an operator
    /// reading it must not take an ignored change for one made).
    pub(crate) fn change(&mut self, change: &Change) {
        let at = self.seen;
        self.seen += 1;
        if let Some(why) = self.apply(change) {
            self.ignored.push(Ignored { at, why });
        } else if let Change::Add {
            owner,
            rtype: RType::DS,
            ..
        } = change
        {
            self.ds_added
                .push((at, owner.to_lowercase().as_wire().to_vec()));
        }
    }

    /// Applies one change; why it is ignored, if it is.
    fn apply(&mut self, change: &Change) -> Option<&'static str> {
        let apex = self.is_apex(change.owner());
        match change {
            Change::Add {
                owner,
                rtype,
                ttl,
                rdata,
            } => self.add(owner, *rtype, *ttl, rdata, apex),
            Change::DeleteRrset(owner, rtype) => {
                if apex && matches!(*rtype, RType::SOA | RType::NS) {
                    return Some(APEX_KEPT);
                }
                let rtype = *rtype;
                self.node(owner).remove(|t| t != rtype);
                None
            }
            Change::DeleteName(owner) => {
                let keep =
                    |t: RType| is_dnssec_type(t) || (apex && matches!(t, RType::SOA | RType::NS));
                self.node(owner).remove(keep);
                None
            }
            Change::DeleteRecord(owner, rtype, rdata) => {
                self.delete_record(owner, *rtype, rdata, apex)
            }
        }
    }

    fn add(
        &mut self,
        owner: &Name,
        rtype: RType,
        ttl: u32,
        rdata: &[u8],
        apex: bool,
    ) -> Option<&'static str> {
        if rtype == RType::SOA {
            return self.add_soa(owner, ttl, rdata, apex);
        }
        if apex && rtype == RType::DS {
            // The parent's, not the zone's (RFC 4035 2.4), as BIND.
            return Some("a DS at the apex is the parent's");
        }
        let node = self.node(owner);
        let others = |n: &WorkNode| {
            n.after
                .iter()
                .any(|s| s.rtype != RType::CNAME && !is_dnssec_type(s.rtype))
        };
        if rtype == RType::CNAME {
            if others(node) {
                return Some("a CNAME does not join other data"); // 3.4.2.2
            }
            let set = node.set_mut(RType::CNAME, ttl);
            set.ttl = ttl;
            set.rdatas = vec![rdata.to_vec()];
            return None;
        }
        if node.set(RType::CNAME).is_some() && !is_dnssec_type(rtype) {
            return Some("a CNAME's name takes no other data");
        }
        let set = node.set_mut(rtype, ttl);
        if rtype == RType::DNAME {
            // One DNAME a name (RFC 6672 2.4): a new one replaces it, as a
            // CNAME does and as BIND does (black-box finding BA-2: the
            // whole update was refused).
            set.rdatas.clear();
        }
        // An RRset has one TTL (RFC 2181 5.2): the latest given.
        set.ttl = ttl;
        if !set.rdatas.iter().any(|r| rdata_equal(rtype, r, rdata)) {
            set.rdatas.push(rdata.to_vec());
        }
        None
    }

    /// An SOA replaces the apex's only if its serial is later (3.4.2.2).
    fn add_soa(
        &mut self,
        owner: &Name,
        ttl: u32,
        rdata: &[u8],
        apex: bool,
    ) -> Option<&'static str> {
        if !apex {
            return Some("an SOA stands only at the apex");
        }
        let current = self.new_soa.as_ref().map_or(self.zone.serial(), |soa| {
            rdata::soa_serial(&soa.rdata).unwrap_or(0)
        });
        match rdata::soa_serial(rdata) {
            Some(serial) if crate::serial::is_newer(serial, current) => {
                self.new_soa = Some(DiffRecord {
                    owner: owner.to_lowercase(),
                    rtype: RType::SOA,
                    ttl,
                    rdata: rdata.to_vec(),
                });
                None
            }
            _ => Some("its serial is not later than the zone's"),
        }
    }

    fn delete_record(
        &mut self,
        owner: &Name,
        rtype: RType,
        rdata: &[u8],
        apex: bool,
    ) -> Option<&'static str> {
        if rtype == RType::SOA {
            return Some(APEX_KEPT);
        }
        let node = self.node(owner);
        let set = node.after.iter_mut().find(|s| s.rtype == rtype)?;
        let at = set
            .rdatas
            .iter()
            .position(|r| rdata_equal(rtype, r, rdata))?;
        if apex && rtype == RType::NS && set.rdatas.len() == 1 {
            return Some("the apex keeps its last NS");
        }
        set.rdatas.remove(at);
        node.after.retain(|s| !s.rdatas.is_empty());
        None
    }

    /// The change as a diff from the zone served: records deleted and
    /// added, and the SOA with the serial `policy` gives (or the one the
    /// client sent); with the names it reached as it leaves them (None
    /// when the changes change nothing), and the changes ignored.
    pub(crate) fn finish(mut self, policy: SerialPolicy, now: u64) -> Edited {
        self.keep_ds_at_delegations();
        let ignored = std::mem::take(&mut self.ignored);
        Edited {
            step: self.step(policy, now),
            ignored,
        }
    }

    fn step(self, policy: SerialPolicy, now: u64) -> Option<(ZoneDiff, Vec<NodeNow>)> {
        let mut deleted = Vec::new();
        let mut added = Vec::new();
        for node in self.nodes.values() {
            let before = records(&node.owner, &node.before);
            let after = records(&node.owner, &node.after);
            record_changes(before, after, &mut deleted, &mut added);
            deleted.extend(node.signatures_of_removed_sets());
        }
        if deleted.is_empty() && added.is_empty() && self.new_soa.is_none() {
            return None;
        }
        let old_soa = self.zone.soa_record();
        let new_soa = self.new_soa.unwrap_or_else(|| {
            let mut soa = old_soa.clone();
            let serial = policy.next(self.zone.serial(), now);
            set_soa_serial(&mut soa.rdata, serial);
            soa
        });
        deleted.sort();
        added.sort();
        let diff = ZoneDiff {
            old_soa,
            new_soa,
            deleted,
            added,
        };
        let reached = self.nodes.into_values().map(WorkNode::into_now).collect();
        Some((diff, reached))
    }
}

/// The records of some RRsets, the apex SOA left out (a diff carries it
/// apart).
fn records(owner: &Name, sets: &[Set]) -> Vec<DiffRecord> {
    let sets = sets.iter().filter(|s| s.rtype != RType::SOA);
    sets.flat_map(|s| {
        s.rdatas.iter().map(|r| DiffRecord {
            owner: owner.clone(),
            rtype: s.rtype,
            ttl: s.ttl,
            rdata: r.clone(),
        })
    })
    .collect()
}

/// Writes `serial` into SOA RDATA (after its two names).
fn set_soa_serial(rdata: &mut [u8], serial: u32) {
    let name_end = |at: usize| heron_proto::name::skip_compressed(rdata, at).map(|(end, _)| end);
    let Ok(mname) = name_end(0) else { return };
    let Ok(rname) = name_end(mname) else { return };
    if let Some(field) = rdata.get_mut(rname..rname + 4) {
        field.copy_from_slice(&serial.to_be_bytes());
    }
}
