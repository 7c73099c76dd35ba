//! The catalog's table from origin hash to zone.
//!
//! Open addressing with linear probing, at most half full, each slot the
//! origin's full hash and the zone beside it. A lookup in one of 100,000
//! zones reads the slot's cache line, then the zone: where a table with
//! separate control bytes takes one trip to memory more. And the slot a
//! name would be in is known from its hash alone, so a batch of queries
//! can ask for all their slots at once ([`ZoneTable::prefetch`]).
//!
//! The slots are split in shards by the hash's upper half, each shared
//! between the catalog versions that have it unchanged: a new version
//! copies the shards it changes, a few KiB, not the whole table (4 MiB
//! and an `Arc` touched per zone at 100,000 zones), so one zone added to
//! 100,000 costs what it costs among 100. A lookup reads the shard's
//! pointer first, from an array of a few KiB that stays in the cache.

use std::sync::Arc;

use crate::prefetch::prefetch;
use crate::zone::Zone;

/// Slots per zone stored, at least: half full keeps a probe for an origin
/// that is absent to about two slots.
const SLOTS_PER_ZONE: usize = 2;
/// Slots of an empty shard, so that a lookup never needs a special case.
const MIN_SLOTS: usize = 8;
/// Zones per shard, on average, above which the shards double: a change
/// copies about twice as many slots (8 KiB), and the array of shards
/// stays a 200th of the slots.
const ZONES_PER_SHARD: usize = 256;

#[derive(Clone, Default)]
struct Slot {
    hash: u64,
    /// None: an empty slot (it ends a probe).
    zone: Option<Arc<Zone>>,
}

/// A shard's slots, a power of two of them.
type Shard = Arc<[Slot]>;

/// Zones by the hash of their lower-cased origin; the caller supplies the
/// hash and compares origins. Cloning copies the shards' pointers.
#[derive(Clone)]
pub(crate) struct ZoneTable {
    /// A power of two of them; the hash's upper half picks one.
    shards: Box<[Shard]>,
    /// Zones in each shard.
    lens: Box<[u32]>,
    len: usize,
}

impl Default for ZoneTable {
    fn default() -> Self {
        ZoneTable::with_shards(1)
    }
}

fn empty_shard(slots: usize) -> Shard {
    vec![Slot::default(); slots].into()
}

/// Where a hash's probe starts in a shard of `slots` slots.
#[inline(always)]
fn home(hash: u64, slots: usize) -> usize {
    hash as usize & (slots - 1)
}

/// The slot of the zone with this hash whose origin `is_it` accepts:
/// the slots from the hash's own on, to the first empty one (a shard is
/// at most half full, so there is one).
#[inline]
fn find_in(shard: &[Slot], hash: u64, mut is_it: impl FnMut(&Zone) -> bool) -> Option<usize> {
    let mask = shard.len() - 1;
    let mut i = home(hash, shard.len());
    loop {
        let slot = &shard[i];
        let zone = slot.zone.as_deref()?;
        if slot.hash == hash && is_it(zone) {
            return Some(i);
        }
        i = (i + 1) & mask;
    }
}

/// Places a zone known to be absent in the first empty slot of its probe.
fn put(shard: &mut [Slot], hash: u64, zone: Arc<Zone>) {
    let mask = shard.len() - 1;
    let mut i = home(hash, shard.len());
    while shard[i].zone.is_some() {
        i = (i + 1) & mask;
    }
    shard[i] = Slot {
        hash,
        zone: Some(zone),
    };
}

/// A shard of `slots` slots holding the zones of `zones`.
fn shard_of<'s>(slots: usize, zones: impl Iterator<Item = &'s Slot>) -> Shard {
    let mut shard = vec![Slot::default(); slots];
    zones.for_each(|s| put(&mut shard, s.hash, s.zone.clone().expect("a zone")));
    shard.into()
}

/// Slots for a shard of `zones` zones.
fn slots_for(zones: usize) -> usize {
    (zones * SLOTS_PER_ZONE).next_power_of_two().max(MIN_SLOTS)
}

impl ZoneTable {
    fn with_shards(shards: usize) -> ZoneTable {
        ZoneTable {
            shards: vec![empty_shard(MIN_SLOTS); shards].into(),
            lens: vec![0; shards].into(),
            len: 0,
        }
    }

    /// Which shard holds `hash`: its upper half, so that the slot within
    /// the shard (its lower bits) is independent of it.
    #[inline(always)]
    fn shard_index(&self, hash: u64) -> usize {
        (hash >> 32) as usize & (self.shards.len() - 1)
    }

    #[inline(always)]
    fn shard(&self, hash: u64) -> &[Slot] {
        &self.shards[self.shard_index(hash)]
    }

    #[inline]
    pub(crate) fn find(&self, hash: u64, is_it: impl FnMut(&Zone) -> bool) -> Option<&Arc<Zone>> {
        let shard = self.shard(hash);
        let i = find_in(shard, hash, is_it)?;
        shard[i].zone.as_ref()
    }

    /// The first zone with this hash, its origin not compared: the zone a
    /// lookup for `hash` will most likely read.
    pub(crate) fn likely(&self, hash: u64) -> Option<&Zone> {
        self.find(hash, |_| true).map(|z| &**z)
    }

    /// Starts loading the slot where a lookup for `hash` begins.
    pub(crate) fn prefetch(&self, hash: u64) {
        let shard = self.shard(hash);
        prefetch(&shard[home(hash, shard.len())..]);
    }

    /// The slots of shard `s`, to change: copied first if another
    /// version of the table shares them.
    fn shard_mut(&mut self, s: usize) -> &mut [Slot] {
        Arc::make_mut(&mut self.shards[s])
    }

    /// Adds a zone, or replaces the one `is_it` accepts; returns the one
    /// replaced.
    pub(crate) fn insert(
        &mut self,
        hash: u64,
        zone: Arc<Zone>,
        is_it: impl FnMut(&Zone) -> bool,
    ) -> Option<Arc<Zone>> {
        let s = self.shard_index(hash);
        if let Some(i) = find_in(&self.shards[s], hash, is_it) {
            return self.shard_mut(s)[i].zone.replace(zone);
        }
        if self.len + 1 > self.shards.len() * ZONES_PER_SHARD {
            self.reshard(self.shards.len() * 2);
        }
        let s = self.shard_index(hash);
        let len = self.lens[s] as usize + 1;
        if len * SLOTS_PER_ZONE > self.shards[s].len() {
            let slots = self.shards[s].len() * 2;
            self.shards[s] = shard_of(slots, self.shards[s].iter().filter(|s| s.zone.is_some()));
        }
        put(self.shard_mut(s), hash, zone);
        self.lens[s] = len as u32;
        self.len += 1;
        None
    }

    /// Spreads the zones over `shards` shards (a power of two): the one
    /// change that copies every slot, made each time the zones double.
    fn reshard(&mut self, shards: usize) {
        let mut of_shard: Vec<Vec<&Slot>> = vec![Vec::new(); shards];
        let slots = self.shards.iter().flat_map(|s| s.iter());
        for slot in slots.filter(|s| s.zone.is_some()) {
            of_shard[(slot.hash >> 32) as usize & (shards - 1)].push(slot);
        }
        let lens = of_shard.iter().map(|z| z.len() as u32).collect();
        let new = (of_shard.iter())
            .map(|zones| shard_of(slots_for(zones.len()), zones.iter().copied()))
            .collect();
        self.shards = new;
        self.lens = lens;
    }

    /// Removes the zone `is_it` accepts. The slots after it in its run
    /// move back where their probes still reach them (no tombstones, so
    /// probes stay as short as the table's fill allows).
    pub(crate) fn remove(
        &mut self,
        hash: u64,
        is_it: impl FnMut(&Zone) -> bool,
    ) -> Option<Arc<Zone>> {
        let s = self.shard_index(hash);
        let mut hole = find_in(&self.shards[s], hash, is_it)?;
        self.lens[s] -= 1;
        self.len -= 1;
        let shard = self.shard_mut(s);
        let removed = shard[hole].zone.take();
        let mask = shard.len() - 1;
        let mut i = (hole + 1) & mask;
        while shard[i].zone.is_some() {
            // A slot may fill the hole if its home is not strictly between
            // the hole and it (cyclically): its probe passes the hole.
            let home = home(shard[i].hash, shard.len());
            let distance_to_home = i.wrapping_sub(home) & mask;
            let distance_to_hole = i.wrapping_sub(hole) & mask;
            if distance_to_home >= distance_to_hole {
                shard[hole] = std::mem::take(&mut shard[i]);
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
        let slots = self.shards.iter().flat_map(|s| s.iter());
        slots.filter_map(|s| s.zone.as_ref())
    }

    /// Where the slots lie: (address, length in bytes) of each shard's,
    /// and of the array of shards.
    pub(crate) fn for_each_block(&self, mut visit: impl FnMut(usize, usize)) {
        visit(
            self.shards.as_ptr() as usize,
            std::mem::size_of_val(&*self.shards),
        );
        for shard in &self.shards {
            visit(shard.as_ptr() as usize, std::mem::size_of_val(&**shard));
        }
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

    impl ZoneTable {
        fn slots(&self) -> usize {
            self.shards.iter().map(|s| s.len()).sum()
        }

        fn is_at_most_half_full(&self) -> bool {
            let lens = self.lens.iter().map(|&l| l as usize);
            let counted = self
                .shards
                .iter()
                .map(|s| s.iter().filter(|s| s.zone.is_some()).count());
            lens.clone().sum::<usize>() == self.len
                && lens.clone().eq(counted)
                && (self.shards.iter().zip(lens)).all(|(s, l)| l * SLOTS_PER_ZONE <= s.len())
        }

        /// Shards of `self` that `other` does not share.
        fn shards_apart(&self, other: &ZoneTable) -> usize {
            let pairs = self.shards.iter().zip(&other.shards[..]);
            pairs.filter(|(a, b)| !Arc::ptr_eq(a, b)).count()
        }
    }

    /// Hashes spread as an origin's hash is, over both halves.
    fn spread(i: u64) -> u64 {
        i.wrapping_mul(0x9E37_79B9_7F4A_7C15)
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
        let hashes: Vec<u64> = (0..5_000).map(spread).collect();
        let (table, names) = table_of(&hashes);
        assert_eq!(table.len(), 5_000);
        assert!(table.shards.len() >= 16, "sharded once the zones are many");
        assert!(table.is_at_most_half_full());
        assert!(table.slots() >= 10_000, "at most half full");
        assert_all_found(&table, &hashes, &names);
        assert!(table.find(12345, |_| true).is_none());
        assert_eq!(table.iter().count(), 5_000);
    }

    #[test]
    fn a_change_to_a_copy_copies_one_shard_and_leaves_the_original_alone() {
        let hashes: Vec<u64> = (0..20_000).map(spread).collect();
        let (table, names) = table_of(&hashes);
        assert!(table.shards.len() >= 64, "{} shards", table.shards.len());
        assert!(table.is_at_most_half_full());
        let before = table.clone();
        assert_eq!(before.shards_apart(&table), 0, "a copy shares every shard");

        let mut added = table.clone();
        added.insert(spread(20_000), zone("new."), named("new."));
        assert_eq!(added.shards_apart(&table), 1);
        assert_eq!((added.len(), table.len()), (20_001, 20_000));
        assert!(table.find(spread(20_000), named("new.")).is_none());

        let mut removed = table.clone();
        assert!(removed.remove(hashes[7], named(&names[7])).is_some());
        assert_eq!(removed.shards_apart(&table), 1);
        assert!(table.find(hashes[7], named(&names[7])).is_some());

        let mut replaced = table.clone();
        replaced.insert(hashes[9], zone(&names[9]), named(&names[9]));
        assert_eq!(replaced.shards_apart(&table), 1);
        assert_all_found(&table, &hashes, &names);
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
            assert_eq!(table.slots(), 16);
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
                // Four shards from the start, so that changes to copies
                // that share them are checked too.
                let mut table = ZoneTable::with_shards(4);
                let mut model: HashMap<u8, u64> = HashMap::new();
                for (insert, id, hash) in ops {
                    let name = format!("z{id}.");
                    let (copy, copied) = (table.clone(), model.clone());
                    if insert {
                        // A zone keeps the hash of its origin.
                        let hash = *model.entry(id).or_insert(spread(hash));
                        table.insert(hash, zone(&name), named(&name));
                    } else if let Some(hash) = model.remove(&id) {
                        prop_assert!(table.remove(hash, named(&name)).is_some());
                    }
                    prop_assert_eq!(table.len(), model.len());
                    prop_assert!(table.is_at_most_half_full());
                    // The copy taken before the change did not see it.
                    prop_assert_eq!(copy.len(), copied.len());
                    for (id, hash) in &copied {
                        let name = format!("z{id}.");
                        prop_assert!(copy.find(*hash, named(&name)).is_some());
                    }
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
