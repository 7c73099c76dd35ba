//! The server's list of its secondary zones, by origin.

use std::hash::BuildHasher;
use std::sync::Arc;

use heron_proto::Name;
use heron_xfr::secondary::refresh::SecondaryZone;

/// The secondary zones by origin (compared ignoring case). An entry is
/// the zone's settings alone, found through the origin they hold: 8
/// octets a zone, where a map keyed by a copy of the name took 24
/// (100,000 zones: 2 MB less).
#[derive(Default)]
pub struct SecondaryZones {
    hasher: hashbrown::DefaultHashBuilder,
    zones: hashbrown::HashTable<Arc<SecondaryZone>>,
}

impl SecondaryZones {
    pub fn get(&self, origin: &Name) -> Option<&Arc<SecondaryZone>> {
        let hash = self.hasher.hash_one(origin);
        self.zones.find(hash, |z| z.origin == *origin)
    }

    pub fn contains_key(&self, origin: &Name) -> bool {
        self.get(origin).is_some()
    }

    /// Lists `zone`; returns the zone it replaces at the same origin.
    pub fn insert(&mut self, zone: Arc<SecondaryZone>) -> Option<Arc<SecondaryZone>> {
        let hash = self.hasher.hash_one(&zone.origin);
        let rehash = |z: &Arc<SecondaryZone>| self.hasher.hash_one(&z.origin);
        match self.zones.entry(hash, |z| z.origin == zone.origin, rehash) {
            hashbrown::hash_table::Entry::Occupied(mut old) => {
                Some(std::mem::replace(old.get_mut(), zone))
            }
            hashbrown::hash_table::Entry::Vacant(room) => {
                room.insert(zone);
                None
            }
        }
    }

    pub fn remove(&mut self, origin: &Name) -> Option<Arc<SecondaryZone>> {
        let hash = self.hasher.hash_one(origin);
        let found = self.zones.find_entry(hash, |z| z.origin == *origin);
        found.ok().map(|entry| entry.remove().0)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<SecondaryZone>> {
        self.zones.iter()
    }
}

impl FromIterator<Arc<SecondaryZone>> for SecondaryZones {
    fn from_iter<I: IntoIterator<Item = Arc<SecondaryZone>>>(zones: I) -> Self {
        let mut list = SecondaryZones::default();
        for zone in zones {
            list.insert(zone);
        }
        list
    }
}

#[cfg(test)]
mod tests {
    use heron_xfr::secondary::kept_file::KeptFile;

    use super::*;

    fn zone(origin: &str, file: &str) -> Arc<SecondaryZone> {
        Arc::new(SecondaryZone {
            origin: Name::parse(origin).unwrap(),
            primaries: Arc::new(Vec::new()),
            file: KeptFile::at(file),
            catalog: None,
        })
    }

    #[test]
    fn zones_are_found_by_origin_in_any_case_and_replaced_by_origin() {
        let mut list: SecondaryZones = (0..1000)
            .map(|i| zone(&format!("Z{i}.test"), "a"))
            .collect();
        let n = |s: &str| Name::parse(s).unwrap();
        assert!(list.contains_key(&n("z0.test")));
        assert!(list.contains_key(&n("z999.TEST")));
        assert!(!list.contains_key(&n("z1000.test")));
        let old = list.insert(zone("z5.TEST", "b")).expect("replaced");
        assert_eq!(old.kept_path(), std::path::Path::new("a"));
        assert_eq!(
            list.get(&n("z5.test")).unwrap().kept_path(),
            std::path::Path::new("b")
        );
        assert_eq!(list.iter().count(), 1000);
        assert!(list.remove(&n("Z5.test")).is_some());
        assert!(list.remove(&n("z5.test")).is_none());
        assert!(!list.contains_key(&n("z5.test")));
        assert_eq!(list.iter().count(), 999);
    }
}
