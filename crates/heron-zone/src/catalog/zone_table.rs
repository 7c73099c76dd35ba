//! The catalog's table from origin hash to zone.
//!
//! Open addressing with linear probing, at most half full, each slot the
//! origin's full hash and the zone beside it. A lookup in one of 100,000
//! zones reads the slot's cache line, then the zone: where a table with
//! separate control bytes takes one trip to memory more. And the slot a
//! name would be in is known from its hash alone, so a batch of queries
//! can ask for all their slots at once ([`ZoneTable::prefetch`]).

use std::sync::Arc;

use crate::prefetch::prefetch;
use crate::zone::Zone;

/// Slots per zone stored, at least: half full keeps a probe for an origin
/// that is absent to about two slots.
const SLOTS_PER_ZONE: usize = 2;
/// Slots of an empty table, so that a lookup never needs a special case.
const MIN_SLOTS: usize = 8;

#[derive(Clone, Default)]
struct Slot {
    hash: u64,
    /// None: an empty slot (it ends a probe).
    zone: Option<Arc<Zone>>,
}

/// Zones by the hash of their lower-cased origin; the caller supplies the
/// hash and compares origins.
#[derive(Clone)]
pub(crate) struct ZoneTable {
    slots: Box<[Slot]>,
    len: usize,
}

impl Default for ZoneTable {
    fn default() -> Self {
        ZoneTable::with_slots(MIN_SLOTS)
    }
}

impl ZoneTable {
    fn with_slots(slots: usize) -> ZoneTable {
        ZoneTable {
            slots: vec![Slot::default(); slots].into(),
            len: 0,
        }
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    fn home(&self, hash: u64) -> usize {
        hash as usize & self.mask()
    }

    /// The slot of the zone with this hash whose origin `is_it` accepts:
    /// the slots from the hash's own on, to the first empty one (the
    /// table is at most half full, so there is one).
    #[inline]
    fn find_slot(&self, hash: u64, mut is_it: impl FnMut(&Zone) -> bool) -> Option<usize> {
        let mask = self.mask();
        let mut i = self.home(hash);
        loop {
            let slot = &self.slots[i];
            let zone = slot.zone.as_deref()?;
            if slot.hash == hash && is_it(zone) {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    #[inline]
    pub(crate) fn find(&self, hash: u64, is_it: impl FnMut(&Zone) -> bool) -> Option<&Arc<Zone>> {
        let i = self.find_slot(hash, is_it)?;
        self.slots[i].zone.as_ref()
    }

    /// The first zone with this hash, its origin not compared: the zone a
    /// lookup for `hash` will most likely read.
    pub(crate) fn likely(&self, hash: u64) -> Option<&Zone> {
        self.find(hash, |_| true).map(|z| &**z)
    }

    /// Starts loading the slot where a lookup for `hash` begins.
    pub(crate) fn prefetch(&self, hash: u64) {
        prefetch(&self.slots[self.home(hash)..]);
    }

    /// Adds a zone, or replaces the one `is_it` accepts; returns the one
    /// replaced.
    pub(crate) fn insert(
        &mut self,
        hash: u64,
        zone: Arc<Zone>,
        is_it: impl FnMut(&Zone) -> bool,
    ) -> Option<Arc<Zone>> {
        if let Some(i) = self.find_slot(hash, is_it) {
            return self.slots[i].zone.replace(zone);
        }
        if (self.len + 1) * SLOTS_PER_ZONE > self.slots.len() {
            self.grow();
        }
        self.put(hash, zone);
        self.len += 1;
        None
    }

    /// Places a zone known to be absent in the first empty slot of its probe.
    fn put(&mut self, hash: u64, zone: Arc<Zone>) {
        let (mut i, mask) = (self.home(hash), self.mask());
        while self.slots[i].zone.is_some() {
            i = (i + 1) & mask;
        }
        self.slots[i] = Slot {
            hash,
            zone: Some(zone),
        };
    }

    fn grow(&mut self) {
        let bigger = ZoneTable::with_slots(self.slots.len() * 2);
        let old = std::mem::replace(self, bigger);
        for slot in old.slots.into_vec() {
            if let Some(zone) = slot.zone {
                self.put(slot.hash, zone);
                self.len += 1;
            }
        }
    }

    /// Removes the zone `is_it` accepts. The slots after it in its run
    /// move back where their probes still reach them (no tombstones, so
    /// probes stay as short as the table's fill allows).
    pub(crate) fn remove(
        &mut self,
        hash: u64,
        is_it: impl FnMut(&Zone) -> bool,
    ) -> Option<Arc<Zone>> {
        let mut hole = self.find_slot(hash, is_it)?;
        let removed = self.slots[hole].zone.take();
        self.len -= 1;
        let mask = self.mask();
        let mut i = (hole + 1) & mask;
        while self.slots[i].zone.is_some() {
            // A slot may fill the hole if its home is not strictly between
            // the hole and it (cyclically): its probe passes the hole.
            let home = self.home(self.slots[i].hash);
            let distance_to_home = i.wrapping_sub(home) & mask;
            let distance_to_hole = i.wrapping_sub(hole) & mask;
            if distance_to_home >= distance_to_hole {
                self.slots[hole] = std::mem::take(&mut self.slots[i]);
                hole = i;
            }
            i = (i + 1) & mask;
        }
        removed
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<Zone>> {
        self.slots.iter().filter_map(|s| s.zone.as_ref())
    }

    /// Where the slots lie: (address, length in bytes).
    pub(crate) fn block(&self) -> (usize, usize) {
        (
            self.slots.as_ptr() as usize,
            std::mem::size_of_val(&*self.slots),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load_zone_str;
    use heron_proto::Name;

    fn zone(origin: &str) -> Arc<Zone> {
        let text = "$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\n";
        let origin = Name::parse(origin).unwrap();
        Arc::new(load_zone_str(text, "z", &origin).unwrap().zone)
    }

    fn named(name: &str) -> impl Fn(&Zone) -> bool + '_ {
        move |z| z.origin().to_string() == name
    }

    /// Zones z0. .. zN-1. under the given hashes.
    fn table_of(hashes: &[u64]) -> (ZoneTable, Vec<String>) {
        let mut table = ZoneTable::default();
        let names: Vec<String> = (0..hashes.len()).map(|i| format!("z{i}.")).collect();
        for (name, &h) in names.iter().zip(hashes) {
            assert!(table.insert(h, zone(name), named(name)).is_none());
        }
        (table, names)
    }

    fn assert_all_found(table: &ZoneTable, hashes: &[u64], names: &[String]) {
        for (name, &h) in names.iter().zip(hashes) {
            let found = table.find(h, named(name));
            assert_eq!(
                found.map(|z| z.origin().to_string()).as_deref(),
                Some(&**name)
            );
        }
    }

    #[test]
    fn finds_every_zone_through_growth_and_nothing_else() {
        let hashes: Vec<u64> = (0..500u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .collect();
        let (table, names) = table_of(&hashes);
        assert_eq!(table.len(), 500);
        assert!(table.slots.len() >= 1000, "at most half full");
        assert_all_found(&table, &hashes, &names);
        assert!(table.find(12345, |_| true).is_none());
        assert_eq!(table.iter().count(), 500);
    }

    #[test]
    fn a_zone_with_the_same_origin_replaces_the_old_one() {
        let (mut table, _) = table_of(&[7]);
        let newer = zone("z0.");
        let old = table.insert(7, newer.clone(), named("z0.")).unwrap();
        assert!(!Arc::ptr_eq(&old, &newer));
        assert_eq!(table.len(), 1);
        assert!(Arc::ptr_eq(table.find(7, named("z0.")).unwrap(), &newer));
    }

    #[test]
    fn equal_hashes_are_told_apart_by_the_origin() {
        let (table, names) = table_of(&[3, 3, 3]);
        assert_all_found(&table, &[3, 3, 3], &names);
        assert!(table.find(3, named("other.")).is_none());
        assert_eq!(
            table.likely(3).map(|z| z.origin().to_string()).as_deref(),
            Some("z0.")
        );
    }

    #[test]
    fn removing_keeps_every_other_zone_reachable() {
        // Runs that wrap past the last slot, with homes before and after
        // the removed ones: every case of the backward shift.
        let hashes = [14, 15, 15, 14, 0, 1, 15];
        for gone in 0..hashes.len() {
            let (mut table, names) = table_of(&hashes);
            assert_eq!(table.slots.len(), 16);
            let name = &names[gone];
            assert!(table.remove(hashes[gone], named(name)).is_some());
            assert!(table.remove(hashes[gone], named(name)).is_none());
            assert_eq!(table.len(), hashes.len() - 1);
            let kept_hashes = [&hashes[..gone], &hashes[gone + 1..]].concat();
            let kept_names = [&names[..gone], &names[gone + 1..]].concat();
            assert_all_found(&table, &kept_hashes, &kept_names);
        }
    }

    #[test]
    fn an_empty_table_finds_nothing() {
        let mut table = ZoneTable::default();
        assert!(table.find(0, |_| true).is_none());
        assert!(table.likely(0).is_none());
        assert!(table.remove(0, |_| true).is_none());
        table.prefetch(u64::MAX);
        assert_eq!(table.len(), 0);
    }

    /// Any sequence of inserts and removes, with hashes that collide
    /// often, leaves the table holding exactly what a map would.
    mod model {
        use super::*;
        use proptest::prelude::*;
        use std::collections::HashMap;

        proptest! {
            #[test]
            fn the_table_holds_what_a_map_holds(
                ops in prop::collection::vec((any::<bool>(), 0u8..40, 0u64..24), 1..200)
            ) {
                let mut table = ZoneTable::default();
                let mut model: HashMap<u8, u64> = HashMap::new();
                for (insert, id, hash) in ops {
                    let name = format!("z{id}.");
                    if insert {
                        // A zone keeps the hash of its origin.
                        let hash = *model.entry(id).or_insert(hash);
                        table.insert(hash, zone(&name), named(&name));
                    } else if let Some(hash) = model.remove(&id) {
                        prop_assert!(table.remove(hash, named(&name)).is_some());
                    }
                    prop_assert_eq!(table.len(), model.len());
                    prop_assert!(table.len() * SLOTS_PER_ZONE <= table.slots.len());
                }
                for (id, hash) in &model {
                    let name = format!("z{id}.");
                    prop_assert!(table.find(*hash, named(&name)).is_some());
                }
                prop_assert_eq!(table.iter().count(), model.len());
            }
        }
    }
}
