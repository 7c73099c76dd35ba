//! What an update reads of its zone: the apex SOA and the RRsets of the
//! names it reaches, owned. A zone as served is one view; a batch's
//! [`Pending`](super::pending::Pending) changes (the zone with the
//! batch's earlier updates applied, no version made yet) is another.

use heron_proto::{Class, Name, RType};
use heron_zone::Zone;
use heron_zone::diff::DiffRecord;

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
