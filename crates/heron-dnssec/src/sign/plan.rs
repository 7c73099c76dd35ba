//! Which names of a zone are signed and how: the zone's nodes in
//! canonical order, each classified, names below a delegation or a DNAME
//! (glue, occluded data) left out.

use heron_proto::RType;
use heron_proto::name::ends_with_name;
use heron_zone::Zone;
use heron_zone::zone::{Node, RRset};

/// Types a signed zone gets from the signer: any the unsigned zone has
/// are replaced, not kept.
pub const SIGNER_TYPES: [RType; 5] = [
    RType::DNSKEY,
    RType::RRSIG,
    RType::NSEC,
    RType::NSEC3,
    RType::NSEC3PARAM,
];

pub fn from_signer(rtype: RType) -> bool {
    SIGNER_TYPES.contains(&rtype)
}

/// What a name is to the signer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Apex,
    /// Authoritative data: every RRset signed.
    Data,
    /// A delegation: only DS signed; `secure` when it has DS.
    Cut {
        secure: bool,
    },
    /// No data, names below (NSEC3 gives it a record, NSEC does not).
    EmptyNonTerminal,
}

#[derive(Clone, Copy)]
pub struct Entry<'z> {
    pub node: Node<'z>,
    pub kind: Kind,
}

impl<'z> Entry<'z> {
    /// The RRsets this name has that the signer signs.
    pub fn signed_rrsets(&self) -> impl Iterator<Item = RRset<'z>> + use<'z> {
        let kind = self.kind;
        self.node.data().filter(move |s| match kind {
            Kind::Apex | Kind::Data => !from_signer(s.rtype),
            Kind::Cut { .. } => s.rtype == RType::DS,
            Kind::EmptyNonTerminal => false,
        })
    }

    /// The types of the name's own data for its NSEC or NSEC3 bitmap
    /// (what the signer adds is not among them).
    pub fn data_types(&self) -> Vec<u16> {
        let types = self
            .node
            .data()
            .map(|s| s.rtype)
            .filter(|t| !from_signer(*t));
        match self.kind {
            Kind::Cut { .. } => types
                .filter(|t| matches!(*t, RType::NS | RType::DS))
                .map(|t| t.0)
                .collect(),
            _ => types.map(|t| t.0).collect(),
        }
    }
}

/// The names the signer sees, in canonical order, apex first.
/// A node holding only what the signer replaces (an old NSEC3, say) is no
/// name of the zone's, unless names lie below it: then it is an empty
/// non-terminal, which needs an NSEC3 of its own (RFC 5155 7.1).
pub(super) fn signer_only(zone: &Zone, key: &[u8]) -> Option<Kind> {
    zone.has_children(key).then_some(Kind::EmptyNonTerminal)
}

pub fn plan(zone: &Zone) -> Vec<Entry<'_>> {
    plan_of(zone, zone.nodes_in_canonical_order())
}

/// [`plan`] of `zone`'s nodes given in canonical order.
pub(super) fn plan_of<'z>(zone: &'z Zone, nodes: impl Iterator<Item = Node<'z>>) -> Vec<Entry<'z>> {
    let mut entries = Vec::with_capacity(zone.node_count());
    // The last delegation or DNAME owner: its descendants, which follow
    // it in canonical order, are not authoritative.
    let mut occluding: Option<&[u8]> = None;
    for node in nodes {
        let key = node.key();
        if occluding.is_some_and(|top| key.len() > top.len() && ends_with_name(key, top)) {
            continue;
        }
        occluding = None;
        let is_apex = key == zone.origin().as_wire();
        let kind = if is_apex {
            Kind::Apex
        } else if node.is_cut() {
            Kind::Cut {
                secure: node.rrset(RType::DS).is_some(),
            }
        } else if node.is_empty() {
            Kind::EmptyNonTerminal
        } else if node.data().all(|s| from_signer(s.rtype)) {
            match signer_only(zone, key) {
                Some(kind) => kind,
                None => continue,
            }
        } else {
            Kind::Data
        };
        if node.is_cut() || node.has_dname() {
            occluding = Some(key);
        }
        entries.push(Entry { node, kind });
    }
    entries
}
