//! A table of entries by zone origin that holds no copy of the origin:
//! each entry is found through the origin it leads to (a zone's settings
//! hold theirs; a zone id, its entry's). A map keyed by the name paid 16
//! octets more an entry, 100,000 zones 1.6 MB a table. Names hash and
//! compare ignoring case, as `Name` does.

use std::hash::BuildHasher;

use hashbrown::hash_table::Entry;
use heron_proto::Name;

/// Where an entry's origin is: in the entry itself, or in something the
/// entries point into (a zone id's entry in a list of zones).
pub trait OriginOf<T> {
    fn origin_of<'a>(&'a self, entry: &'a T) -> &'a Name;
}

/// Entries `T`, each under the origin that `cx` (an [`OriginOf`]) gives
/// it; that must not change while the entry is in the table.
pub struct OriginIndex<T> {
    hasher: hashbrown::DefaultHashBuilder,
    table: hashbrown::HashTable<T>,
}

impl<T> Default for OriginIndex<T> {
    fn default() -> Self {
        OriginIndex {
            hasher: Default::default(),
            table: hashbrown::HashTable::new(),
        }
    }
}

impl<T> OriginIndex<T> {
    pub fn reserve(&mut self, cx: &impl OriginOf<T>, additional: usize) {
        let hasher = &self.hasher;
        (self.table).reserve(additional, |t| hasher.hash_one(cx.origin_of(t)));
    }

    pub fn get(&self, cx: &impl OriginOf<T>, origin: &Name) -> Option<&T> {
        let hash = self.hasher.hash_one(origin);
        self.table.find(hash, |t| cx.origin_of(t) == origin)
    }

    /// Adds `entry` under its origin; returns the entry it replaces there.
    pub fn insert(&mut self, cx: &impl OriginOf<T>, entry: T) -> Option<T> {
        let hash = self.hasher.hash_one(cx.origin_of(&entry));
        let hasher = &self.hasher;
        let rehash = |t: &T| hasher.hash_one(cx.origin_of(t));
        let same = |t: &T| cx.origin_of(t) == cx.origin_of(&entry);
        match self.table.entry(hash, same, rehash) {
            Entry::Occupied(mut old) => Some(std::mem::replace(old.get_mut(), entry)),
            Entry::Vacant(room) => {
                room.insert(entry);
                None
            }
        }
    }

    pub fn remove(&mut self, cx: &impl OriginOf<T>, origin: &Name) -> Option<T> {
        let hash = self.hasher.hash_one(origin);
        let found = self.table.find_entry(hash, |t| cx.origin_of(t) == origin);
        found.ok().map(|entry| entry.remove().0)
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.table.iter()
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(text: &str) -> Name {
        Name::parse(text).unwrap()
    }

    /// Entries that hold their origin, and a number to tell them apart.
    struct Own;

    impl OriginOf<(Name, u32)> for Own {
        fn origin_of<'a>(&'a self, entry: &'a (Name, u32)) -> &'a Name {
            &entry.0
        }
    }

    #[test]
    fn entries_are_found_by_origin_in_any_case_through_growth_and_replaced_by_origin() {
        let mut index = OriginIndex::default();
        for i in 0..1000 {
            assert!(index.insert(&Own, (n(&format!("Z{i}.test")), i)).is_none());
        }
        let number =
            |index: &OriginIndex<_>, origin: &str| index.get(&Own, &n(origin)).map(|e| e.1);
        assert_eq!(number(&index, "z0.test"), Some(0));
        assert_eq!(number(&index, "z999.TEST"), Some(999));
        assert_eq!(number(&index, "z1000.test"), None);
        let old = index.insert(&Own, (n("z5.TEST"), 5000));
        assert_eq!(old.map(|e| e.1), Some(5));
        assert_eq!(number(&index, "z5.test"), Some(5000));
        assert_eq!(index.len(), 1000);
        assert_eq!(index.remove(&Own, &n("Z5.test")).map(|e| e.1), Some(5000));
        assert!(index.remove(&Own, &n("z5.test")).is_none());
        assert_eq!(index.len(), 999);
    }
}
