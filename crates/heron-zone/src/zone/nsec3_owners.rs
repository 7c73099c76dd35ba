//! NSEC3 zones only: the hash of each owner name, and of its wildcard
//! child `*.owner`, computed when the chain is built, so that a proof of
//! denial hashes at query time only names derived from the query name
//! (the next closer name), never a name the zone holds (a closest
//! encloser, a NODATA owner, a wildcard, an unsigned delegation).
//!
//! Kept per shard, beside the chain: the nodes' arena offsets in order
//! (4 bytes each) and two SHA-1 digests each (40 bytes). The hashed
//! owner nodes themselves (the NSEC3 records) get none. A change
//! (`Zone::apply`) hashes only the owners of the nodes it wrote: in
//! the shards it copied the other nodes' digests move with them, and
//! the other shards' digests are shared with the previous version. NSEC zones and unsigned zones have no such table.

use std::sync::Arc;

use super::node::Moves;
use super::nsec3::{HASH_LEN, Nsec3Params};
use super::wildcard::WildcardName;
use super::{Node, Zone, shard_of};

/// The digests of a name and of its wildcard child.
pub(crate) type OwnerDigests = [[u8; HASH_LEN]; 2];

/// Every shard's owner digests.
pub(crate) struct OwnerHashes {
    shards: Box<[Arc<ShardHashes>]>,
}

/// One shard's: by node, in arena order.
struct ShardHashes {
    offsets: Box<[u32]>,
    digests: Box<[OwnerDigests]>,
}

impl OwnerHashes {
    /// Every owner of `zone` hashed with `params`, but the links of the
    /// chain (`is_link`: the hashed owners).
    pub(super) fn of(
        zone: &Zone,
        is_link: &dyn Fn(&Node) -> bool,
        params: &Nsec3Params,
    ) -> OwnerHashes {
        let shards = (0..zone.shards.len())
            .map(|shard| Arc::new(ShardHashes::of(zone, is_link, params, shard)))
            .collect();
        OwnerHashes { shards }
    }

    /// The owner digests of `next`, a version `apply` made from the one
    /// these are of: those of the shards it shares kept; in a shard it
    /// rewrote (`moves`), those of the nodes it kept moved to their new
    /// offsets and the nodes it wrote hashed.
    pub(super) fn after_change(
        &self,
        next: &Zone,
        moves: &[Option<Moves>],
        is_link: &dyn Fn(&Node) -> bool,
        params: &Nsec3Params,
    ) -> OwnerHashes {
        let mut shards: Vec<Arc<ShardHashes>> = Vec::with_capacity(next.shards.len());
        for (shard, moved) in moves.iter().enumerate() {
            shards.push(match (self.shards.get(shard), moved) {
                (Some(same), None) => same.clone(),
                (Some(old), Some(moved)) => {
                    Arc::new(old.moved(moved, next, is_link, params, shard))
                }
                (None, _) => Arc::new(ShardHashes::of(next, is_link, params, shard)),
            });
        }
        OwnerHashes {
            shards: shards.into(),
        }
    }

    /// The digests of `node`'s owner and wildcard child, if they were
    /// computed (not for hashed owners, nor past 255 octets).
    pub(crate) fn get<'z>(&'z self, zone: &'z Zone, node: &Node) -> Option<&'z OwnerDigests> {
        let shard = match self.shards.len() {
            1 => 0,
            n => shard_of(zone.hash(node.key()), n),
        };
        let arena = zone.shards[shard].arena.as_ptr() as usize;
        let at = u32::try_from(node.id().checked_sub(arena)?).ok()?;
        let hashes = self.shards.get(shard)?;
        let i = hashes.offsets.binary_search(&at).ok()?;
        hashes.digests.get(i)
    }

    /// Heap bytes the digests take.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|s| std::mem::size_of_val(&*s.offsets) + std::mem::size_of_val(&*s.digests))
            .sum()
    }

    /// Nodes hashed, for tests.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.offsets.len()).sum()
    }
}

impl ShardHashes {
    fn of(
        zone: &Zone,
        is_link: &dyn Fn(&Node) -> bool,
        params: &Nsec3Params,
        shard: usize,
    ) -> ShardHashes {
        let mut hashes = ShardHashes {
            offsets: Box::new([]),
            digests: Box::new([]),
        };
        hashes.hash_from(zone, is_link, params, shard, 0);
        hashes
    }

    /// These digests for the shard's copy `moves` describes: the kept
    /// nodes' moved, the written nodes' hashed.
    fn moved(
        &self,
        moves: &Moves,
        zone: &Zone,
        is_link: &dyn Fn(&Node) -> bool,
        params: &Nsec3Params,
        shard: usize,
    ) -> ShardHashes {
        let kept = (self.offsets.iter().zip(self.digests.iter()))
            .filter_map(|(at, digests)| Some((moves.of(*at)?, *digests)));
        let (offsets, digests): (Vec<u32>, Vec<OwnerDigests>) = kept.unzip();
        let mut hashes = ShardHashes {
            offsets: offsets.into(),
            digests: digests.into(),
        };
        hashes.hash_from(zone, is_link, params, shard, moves.written_from);
        hashes
    }

    /// Hashes the owners of the shard's nodes from offset `start` on,
    /// after those held.
    fn hash_from(
        &mut self,
        zone: &Zone,
        is_link: &dyn Fn(&Node) -> bool,
        params: &Nsec3Params,
        shard: usize,
        start: usize,
    ) {
        let mut offsets = std::mem::take(&mut self.offsets).into_vec();
        let mut digests = std::mem::take(&mut self.digests).into_vec();
        for at in zone.shards[shard].offsets_from(start) {
            let node = zone.node_at((shard, at));
            if is_link(&node) {
                continue; // a hashed owner: nothing proves its absence
            }
            let Some(star) = WildcardName::below(node.key()) else {
                continue;
            };
            let Ok(at) = u32::try_from(at) else { continue };
            offsets.push(at);
            digests.push([params.hash(node.key()), params.hash(star.as_wire())]);
        }
        self.offsets = offsets.into();
        self.digests = digests.into();
    }
}
