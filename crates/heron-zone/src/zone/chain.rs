//! The NSEC or NSEC3 chain of a signed zone in canonical order: what finds
//! the record that covers a name the zone does not have. Nodes are stored
//! by hash, so this is the one ordered index a zone keeps, and only signed
//! zones have it: 16 bytes per NSEC or NSEC3 owner.
//!
//! A change (`Zone::apply`) rewrites the shards it touches, which moves
//! their nodes: the next version's chain keeps the links into the shards
//! it shares with the previous one as they are and sorts in only the
//! owners of the rewritten shards (a merge, no full sort).

use std::cmp::Ordering;

use heron_proto::RType;

use super::canonical::{Position, order_key};
use super::{Node, Zone};
use crate::denial::nsec3::Nsec3Params;

/// How a signed zone denies existence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ChainKind {
    /// NSEC records (RFC 4034 4).
    Nsec,
    /// NSEC3 records hashed with these parameters (RFC 5155).
    Nsec3(Nsec3Params),
}

impl ChainKind {
    /// How the zone whose apex is `apex` is signed: NSEC3 when it has an
    /// NSEC3PARAM we can hash with (flags 0, SHA-1; RFC 5155 4.1.2 has
    /// servers ignore others), else NSEC when the apex has one; None for
    /// an unsigned zone.
    fn of_apex(apex: &Node) -> Option<ChainKind> {
        let nsec3 = apex.rrset(RType::NSEC3PARAM).and_then(|set| {
            set.rdatas()
                .filter(|rd| rd.get(1) == Some(&0))
                .find_map(|rd| Nsec3Params::from_nsec3param(&rd))
        });
        match nsec3 {
            Some(params) => Some(ChainKind::Nsec3(params)),
            None => apex.rrset(RType::NSEC).map(|_| ChainKind::Nsec),
        }
    }

    /// The record type of the chain.
    pub(crate) fn rtype(&self) -> RType {
        match self {
            ChainKind::Nsec => RType::NSEC,
            ChainKind::Nsec3(_) => RType::NSEC3,
        }
    }

    /// Whether `node` is a link of the chain: it has the chain's record
    /// (for NSEC3, one made with the zone's parameters).
    pub(crate) fn links(&self, node: &Node) -> bool {
        let Some(set) = node.rrset(self.rtype()) else {
            return false;
        };
        match self {
            ChainKind::Nsec => true,
            ChainKind::Nsec3(params) => set.rdatas().any(|rd| params.made(&rd)),
        }
    }
}

/// A signed zone's chain: its kind and its owners in canonical order.
pub(crate) struct DenialChain {
    kind: ChainKind,
    links: Box<[Position]>,
}

impl DenialChain {
    /// The chain of `zone`, or None if the zone is not signed.
    pub(super) fn of(zone: &Zone) -> Option<DenialChain> {
        let kind = ChainKind::of_apex(&zone.apex())?;
        let mut links = Vec::new();
        for (shard, s) in zone.shards.iter().enumerate() {
            links.extend(kind.positions_in(zone, shard, s.offsets()));
        }
        zone.sort_canonically(&mut links);
        Some(DenialChain {
            kind,
            links: links.into(),
        })
    }

    /// The chain of `next`, a version `apply` made from `previous`: this
    /// chain's links into the shards they share, and the links of the
    /// other shards sorted and merged in. The whole chain is built again
    /// when the zone changed how it is signed.
    pub(super) fn after_change(&self, previous: &Zone, next: &Zone) -> Option<DenialChain> {
        let kind = ChainKind::of_apex(&next.apex())?;
        if kind != self.kind {
            return DenialChain::of(next);
        }
        let mut rewritten = vec![false; next.shards.len()];
        let mut fresh = Vec::new();
        for shard in next.unshared_shards(previous) {
            rewritten[shard] = true;
            let offsets = next.shards[shard].offsets();
            fresh.extend(kind.positions_in(next, shard, offsets));
        }
        next.sort_canonically(&mut fresh);
        let kept = self.links.iter().filter(|p| !rewritten[p.shard as usize]);
        let links = merge(kept.copied(), fresh, |a, b| next.cmp_positions(a, b));
        Some(DenialChain {
            kind,
            links: links.into(),
        })
    }

    pub(crate) fn kind(&self) -> &ChainKind {
        &self.kind
    }

    pub(crate) fn len(&self) -> usize {
        self.links.len()
    }

    /// Heap bytes the chain takes.
    pub(crate) fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.links)
    }

    /// The link whose owner is the last at or before `name` (lower-cased
    /// wire, in `zone`) in canonical order: the record that matches or
    /// covers it. Before the first owner (only when the apex has no
    /// record, or for NSEC3 hashes), the chain wraps to its last link.
    pub(crate) fn at_or_before<'z>(&self, zone: &'z Zone, name: &[u8]) -> Option<Node<'z>> {
        self.last_where(zone, name, |o| o != Ordering::Greater)
    }

    /// The link whose owner is the last strictly before `name`, wrapping
    /// likewise: the record that covers a name it does not match.
    pub(crate) fn before<'z>(&self, zone: &'z Zone, name: &[u8]) -> Option<Node<'z>> {
        self.last_where(zone, name, |o| o == Ordering::Less)
    }

    /// The last link whose comparison with `name` `keep` accepts.
    fn last_where<'z>(
        &self,
        zone: &'z Zone,
        name: &[u8],
        keep: impl Fn(Ordering) -> bool,
    ) -> Option<Node<'z>> {
        let key = order_key(name, zone.origin.wire_len());
        let end = self
            .links
            .partition_point(|p| keep(zone.cmp_position_name(p, key, name)));
        let at = match end {
            0 => self.links.len().checked_sub(1)?,
            _ => end - 1,
        };
        Some(zone.node_of(&self.links[at]))
    }

    /// The links in order, for tests.
    #[cfg(test)]
    pub(crate) fn nodes<'z>(&self, zone: &'z Zone) -> Vec<Node<'z>> {
        self.links.iter().map(|p| zone.node_of(p)).collect()
    }
}

impl ChainKind {
    /// The positions of the links among the nodes at `offsets` of a shard.
    fn positions_in<'z>(
        &'z self,
        zone: &'z Zone,
        shard: usize,
        offsets: impl Iterator<Item = usize> + 'z,
    ) -> impl Iterator<Item = Position> + 'z {
        offsets
            .filter(move |&at| self.links(&zone.node_at((shard, at))))
            .map(move |at| zone.position((shard, at)))
    }
}

/// Two sorted sequences as one.
fn merge<T: Copy>(
    a: impl Iterator<Item = T>,
    b: Vec<T>,
    cmp: impl Fn(&T, &T) -> Ordering,
) -> Vec<T> {
    let mut out = Vec::with_capacity(a.size_hint().0 + b.len());
    let mut b = b.into_iter().peekable();
    for x in a {
        while let Some(y) = b.next_if(|y| cmp(y, &x) == Ordering::Less) {
            out.push(y);
        }
        out.push(x);
    }
    out.extend(b);
    out
}
