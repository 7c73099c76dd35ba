//! A shard's table from owner hash to node offset.
//!
//! Open addressing with linear probing, at most half full. Each slot is
//! one `u64`: the top half of the owner's hash as a tag, and the node's
//! offset in the arena plus one (0 marks an empty slot). A lookup reads
//! the slot's cache line and, for a tag that matches, the node: two trips
//! to memory where a table with separate control bytes takes three. And
//! the slot a name would be in is known from its hash alone, so a batch of
//! queries can ask for all their slots at once ([`NodeTable::prefetch`]).

use crate::prefetch::prefetch;

/// Slots per node stored, at least: half full keeps a probe for a name
/// that is absent (NXDOMAIN) to about two slots, one cache line.
const SLOTS_PER_NODE: usize = 2;

#[derive(Clone)]
pub(crate) struct NodeTable {
    slots: Box<[u64]>,
    len: usize,
}

/// The part of a hash a slot keeps. The low bits choose the slot and bits
/// from 32 up the shard, so within a table the tag still tells most
/// names apart.
fn tag(hash: u64) -> u64 {
    hash >> 32 << 32
}

impl NodeTable {
    /// An empty table with room for `nodes` entries.
    pub(crate) fn with_capacity(nodes: usize) -> NodeTable {
        let slots = (nodes * SLOTS_PER_NODE).max(2).next_power_of_two();
        NodeTable {
            slots: vec![0; slots].into(),
            len: 0,
        }
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// Adds a node that is not in the table. Panics when the table has
    /// no room left for it: callers size it for every node they add.
    pub(crate) fn insert_unique(&mut self, hash: u64, offset: u32) {
        let offset = u64::from(offset)
            .checked_add(1)
            .filter(|&o| o <= u64::from(u32::MAX))
            .expect("arena offsets fit 32 bits");
        let mask = self.mask();
        let mut slot = hash as usize & mask;
        while self.slots[slot] != 0 {
            slot = (slot + 1) & mask;
        }
        self.slots[slot] = tag(hash) | offset;
        self.len += 1;
        assert!(
            self.len * SLOTS_PER_NODE <= self.slots.len(),
            "node table sized for fewer nodes"
        );
    }

    /// The slot of the first node with this hash that `is_it` accepts:
    /// the slots from the hash's own on, to the first empty one. (A plain
    /// loop: this is every query's hot path, and an iterator chain here
    /// was not always inlined.)
    #[inline]
    pub(crate) fn find_slot(&self, hash: u64, mut is_it: impl FnMut(u32) -> bool) -> Option<usize> {
        let (tag, mask) = (tag(hash), self.mask());
        let mut slot = hash as usize & mask;
        // The table is at most half full: a probe ends at an empty slot.
        loop {
            let entry = self.slots[slot];
            if entry == 0 {
                return None;
            }
            if entry & !0xFFFF_FFFF == tag && is_it(offset_of(entry)) {
                return Some(slot);
            }
            slot = (slot + 1) & mask;
        }
    }

    /// The offset of the first node with this hash that `is_it` accepts.
    pub(crate) fn find(&self, hash: u64, is_it: impl FnMut(u32) -> bool) -> Option<u32> {
        let slot = self.find_slot(hash, is_it)?;
        Some(offset_of(self.slots[slot]))
    }

    /// The offset of the first node whose tag matches `hash`, without
    /// reading the arena: the node a lookup will most likely read.
    pub(crate) fn likely(&self, hash: u64) -> Option<u32> {
        self.find(hash, |_| true)
    }

    /// Starts loading the slot where a lookup for `hash` begins.
    pub(crate) fn prefetch(&self, hash: u64) {
        prefetch(std::slice::from_ref(
            &self.slots[hash as usize & self.mask()],
        ));
    }

    /// Number of slots; a slot number names a node while the table lives.
    pub(crate) fn slots(&self) -> usize {
        self.slots.len()
    }

    /// The offset of the node in `slot`, if one is there.
    pub(crate) fn get(&self, slot: usize) -> Option<u32> {
        let entry = self.slots[slot];
        (entry != 0).then(|| offset_of(entry))
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn allocation_size(&self) -> usize {
        std::mem::size_of_val(&*self.slots)
    }

    /// Where the slots lie: (address, length in bytes).
    pub(crate) fn block(&self) -> (usize, usize) {
        (self.slots.as_ptr() as usize, self.allocation_size())
    }
}

fn offset_of(entry: u64) -> u32 {
    (entry as u32).wrapping_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hashes that all start at slot 0 of a small table and share a tag.
    fn colliding(n: u64) -> Vec<u64> {
        (0..n).map(|i| (7 << 32) | (i << 20)).collect()
    }

    #[test]
    fn finds_every_node_inserted_and_nothing_else() {
        let mut table = NodeTable::with_capacity(1000);
        let hashes: Vec<u64> = (0..1000u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .collect();
        for (at, &h) in hashes.iter().enumerate() {
            table.insert_unique(h, at as u32 * 10);
        }
        assert_eq!(table.len(), 1000);
        for (at, &h) in hashes.iter().enumerate() {
            let want = at as u32 * 10;
            assert_eq!(table.find(h, |o| o == want), Some(want));
            assert_eq!(table.likely(h), Some(want));
            let slot = table.find_slot(h, |o| o == want).unwrap();
            assert_eq!(table.get(slot), Some(want));
        }
        assert_eq!(table.find(12345, |_| true), None);
    }

    #[test]
    fn colliding_hashes_are_told_apart_by_the_node() {
        let hashes = colliding(4);
        let mut table = NodeTable::with_capacity(4);
        for (at, &h) in hashes.iter().enumerate() {
            table.insert_unique(h, at as u32);
        }
        for at in 0..4u32 {
            assert_eq!(table.find(hashes[0], |o| o == at), Some(at));
        }
        assert_eq!(table.find(hashes[0], |o| o == 9), None);
    }

    #[test]
    fn a_probe_wraps_past_the_last_slot() {
        let mut table = NodeTable::with_capacity(2);
        let last = table.slots() as u64 - 1;
        table.insert_unique(last, 0);
        table.insert_unique(last, 1);
        assert_eq!(table.get(0), Some(1), "the second wrapped to slot 0");
        assert_eq!(table.find(last, |o| o == 1), Some(1));
    }

    #[test]
    fn offset_zero_and_the_largest_offset_are_stored() {
        let mut table = NodeTable::with_capacity(2);
        table.insert_unique(1, 0);
        table.insert_unique(2, u32::MAX - 1);
        assert_eq!(table.find(1, |_| true), Some(0));
        assert_eq!(table.find(2, |_| true), Some(u32::MAX - 1));
    }

    #[test]
    #[should_panic(expected = "32 bits")]
    fn an_offset_that_cannot_be_marked_is_refused() {
        NodeTable::with_capacity(1).insert_unique(1, u32::MAX);
    }

    #[test]
    #[should_panic(expected = "sized for fewer")]
    fn more_nodes_than_sized_for_is_refused() {
        let mut table = NodeTable::with_capacity(2);
        for h in colliding(3) {
            table.insert_unique(h, 0);
        }
    }

    #[test]
    fn an_empty_table_finds_nothing() {
        let table = NodeTable::with_capacity(0);
        assert_eq!(table.find(0, |_| true), None);
        assert_eq!(table.likely(0), None);
        assert_eq!(table.get(0), None);
        table.prefetch(0);
    }
}
