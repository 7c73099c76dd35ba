//! What an update reads of its zone: the apex SOA and the RRsets of the
//! names it reaches, owned. A zone as served is one view; a batch's
//! [`Pending`](super::pending::Pending) changes (the zone with the
//! batch's earlier updates applied, no version made yet) is another.

use heron_proto::{Class, Name, RType};
use heron_zone::Zone;
use heron_zone::diff::DiffRecord;
use heron_zone::zone::RRset;

/// One RRset of a name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Set {
    pub(crate) rtype: RType,
    pub(crate) ttl: u32,
    pub(crate) rdatas: Vec<Vec<u8>>,
}

/// The RRSIGs over one RRset of a signed zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Sigs {
    pub(crate) covered: RType,
    pub(crate) ttl: u32,
    pub(crate) rdatas: Vec<Vec<u8>>,
}

/// A name's records: its RRsets and the signatures over them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NodeNow {
    pub(crate) owner: Name,
    pub(crate) sets: Vec<Set>,
    pub(crate) sigs: Vec<Sigs>,
}

impl NodeNow {
    /// Every record, RRSIGs included, the apex SOA left out (a diff
    /// carries it apart).
    pub(crate) fn records(&self) -> Vec<DiffRecord> {
        let record = |rtype, ttl, rdata: &Vec<u8>| DiffRecord {
            owner: self.owner.clone(),
            rtype,
            ttl,
            rdata: rdata.clone(),
        };
        let data = (self.sets.iter().filter(|s| s.rtype != RType::SOA))
            .flat_map(|s| s.rdatas.iter().map(move |r| record(s.rtype, s.ttl, r)));
        let sigs = (self.sigs.iter())
            .flat_map(|s| s.rdatas.iter().map(move |r| record(RType::RRSIG, s.ttl, r)));
        data.chain(sigs).collect()
    }
}

/// The zone as an update sees it.
pub(crate) trait View {
    fn origin(&self) -> &Name;
    fn class(&self) -> Class;
    /// The apex SOA record (lower-cased owner).
    fn soa_record(&self) -> DiffRecord;
    /// The records of a name (lower-cased wire form); None if the name
    /// is not in the zone.
    fn node_now(&self, key: &[u8]) -> Option<NodeNow>;

    fn serial(&self) -> u32 {
        heron_proto::rdata::soa_serial(&self.soa_record().rdata).unwrap_or(0)
    }

    /// Whether the name (lower-cased wire form) has an RRset of `rtype`;
    /// no record is copied, so a prerequisite costs the same whatever the
    /// RRset's size.
    fn has_rrset(&self, key: &[u8], rtype: RType) -> bool;

    /// Whether the name owns a record other than the signer's (an empty
    /// non-terminal does not, nor a name of a signed zone left with only
    /// the signer's records, as an update's deletion leaves it until the
    /// zone is signed again).
    fn has_data(&self, key: &[u8]) -> bool;

    /// The records of `owner`'s RRset of `rtype` (empty if none).
    fn rrset_records(&self, owner: &Name, rtype: RType) -> Vec<Vec<u8>> {
        let key = owner.to_lowercase();
        let node = self.node_now(key.as_wire());
        let set = node.and_then(|n| n.sets.into_iter().find(|s| s.rtype == rtype));
        set.map_or_else(Vec::new, |s| s.rdatas)
    }
}

impl View for Zone {
    fn origin(&self) -> &Name {
        Zone::origin(self)
    }

    fn class(&self) -> Class {
        Zone::class(self)
    }

    fn soa_record(&self) -> DiffRecord {
        let soa = self.soa();
        DiffRecord {
            owner: Zone::origin(self).to_lowercase(),
            rtype: RType::SOA,
            ttl: soa.ttl(),
            rdata: soa.first_rdata().into_owned(),
        }
    }

    fn serial(&self) -> u32 {
        Zone::serial(self)
    }

    fn has_rrset(&self, key: &[u8], rtype: RType) -> bool {
        self.node(key)
            .is_some_and(|n| n.data().any(|s| s.rtype == rtype))
    }

    fn has_data(&self, key: &[u8]) -> bool {
        let data = |s: RRset| !super::is_dnssec_type(s.rtype);
        self.node(key).is_some_and(|n| n.data().any(data))
    }

    fn node_now(&self, key: &[u8]) -> Option<NodeNow> {
        let node = self.node(key)?;
        let sigs = (node.data())
            .filter(|s| s.sigs().next().is_some())
            .map(|s| Sigs {
                covered: s.rtype,
                ttl: s.sig_ttl(),
                rdatas: s.sigs().map(|r| r.into_owned()).collect(),
            })
            .collect();
        let sets = (node.data())
            .map(|s| Set {
                rtype: s.rtype,
                ttl: s.ttl(),
                rdatas: s.rdatas().map(|r| r.into_owned()).collect(),
            })
            .collect();
        Some(NodeNow {
            owner: node.owner(),
            sets,
            sigs,
        })
    }
}

/// Adds to `deleted` the records of `before` not in `after` and to
/// `added` those of `after` not in `before`: sorted and merged, so that a
/// name of thousands of records costs no pairwise comparison.
pub(crate) fn record_changes(
    mut before: Vec<DiffRecord>,
    mut after: Vec<DiffRecord>,
    deleted: &mut Vec<DiffRecord>,
    added: &mut Vec<DiffRecord>,
) {
    before.sort_unstable();
    after.sort_unstable();
    let (mut old, mut new) = (before.into_iter().peekable(), after.into_iter().peekable());
    loop {
        match (old.peek(), new.peek()) {
            (Some(o), Some(n)) if o == n => {
                old.next();
                new.next();
            }
            (Some(o), Some(n)) if o < n => deleted.extend(old.next()),
            (Some(_), Some(_)) => added.extend(new.next()),
            (Some(_), None) => deleted.extend(old.next()),
            (None, Some(_)) => added.extend(new.next()),
            (None, None) => return,
        }
    }
}
