//! The catalog: every zone served, found by the longest matching origin.

use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::{DefaultHashBuilder, HashSet, HashTable};

use heron_proto::Name;
use heron_proto::name::NameBuf;

use crate::zone::Zone;

/// An immutable set of zones. A new version is built and swapped in whole,
/// so readers never see a half-updated catalog.
/// Cloning copies the table, not the zones (shared), so a secondary of
/// 100,000 zones can publish each transfer cheaply.
#[derive(Clone, Default)]
pub struct Catalog {
    /// By lower-cased origin, which each zone holds: a lookup compares
    /// against the zone it needs next anyway, not a separate key.
    zones: HashTable<Arc<Zone>>,
    hasher: DefaultHashBuilder,
    /// Wire length of the longest origin: no lookup for a longer suffix.
    longest_origin: usize,
    /// Bit n is set when some origin has (or had: bits stay when zones
    /// expire, which only costs a lookup) n labels: a suffix with a count
    /// no origin has is not looked up. With 100,000 zones one level
    /// below a TLD, a query for `www.example.com` makes one lookup, not
    /// two, and each costs a trip to memory.
    label_counts: u128,
    /// Origins (lower-cased wire) of secondary zones that expired: they
    /// answer SERVFAIL, not REFUSED (RFC 1034 4.3.5). Consulted only when
    /// no zone matched, so it costs the query path nothing.
    expired: HashSet<Arc<[u8]>>,
}

/// Where a query name's answers come from.
#[derive(Clone, Copy, Debug)]
pub enum Served<'c> {
    Zone(&'c Zone),
    /// In a secondary zone that expired: SERVFAIL.
    Expired,
    /// In no zone of ours: REFUSED.
    NotServed,
}

impl Catalog {
    pub fn new() -> Catalog {
        Catalog::default()
    }

    /// Adds or replaces a zone.
    pub fn insert(&mut self, zone: Zone) {
        self.insert_shared(Arc::new(zone));
    }

    /// Adds or replaces a zone already shared (a transfer's new version).
    pub fn insert_shared(&mut self, zone: Arc<Zone>) {
        let key = zone.origin().as_wire();
        self.longest_origin = self.longest_origin.max(key.len());
        self.label_counts |= 1u128.checked_shl(label_count(key)).unwrap_or(0);
        self.expired.remove(key);
        let hash = self.hasher.hash_one(key);
        let hasher = &self.hasher;
        match self.zones.entry(
            hash,
            |z| z.origin().as_wire() == key,
            |z| hasher.hash_one(z.origin().as_wire()),
        ) {
            hashbrown::hash_table::Entry::Occupied(mut e) => *e.get_mut() = zone,
            hashbrown::hash_table::Entry::Vacant(e) => {
                e.insert(zone);
            }
        }
    }

    /// Stops serving a zone's data; names in it get SERVFAIL.
    pub fn expire(&mut self, origin: &Name) {
        let key: Arc<[u8]> = origin.to_lowercase().as_wire().into();
        let hash = self.hasher.hash_one(&*key);
        if let Ok(e) = self
            .zones
            .find_entry(hash, |z| z.origin().as_wire() == &*key)
        {
            e.remove();
        }
        self.expired.insert(key);
    }

    /// Whether `lower_qname` is in a zone that expired.
    pub fn is_expired(&self, lower_qname: &[u8]) -> bool {
        !self.expired.is_empty() && suffixes(lower_qname).any(|s| self.expired.contains(s))
    }

    pub fn get(&self, origin: &Name) -> Option<&Arc<Zone>> {
        if self.zones.is_empty() {
            return None;
        }
        let mut lower = NameBuf::new();
        lower.set(origin.as_wire());
        lower.make_lowercase();
        self.lookup(lower.as_wire())
    }

    fn lookup(&self, lower: &[u8]) -> Option<&Arc<Zone>> {
        let hash = self.hasher.hash_one(lower);
        self.zones.find(hash, |z| z.origin().as_wire() == lower)
    }

    /// The zone with the longest origin that `lower_qname` (lower-cased wire
    /// form) is at or below. One hash lookup per label that some origin
    /// could match, no allocation.
    pub fn find(&self, lower_qname: &[u8]) -> Option<&Zone> {
        if self.zones.is_empty() {
            return None;
        }
        let mut labels = label_count(lower_qname);
        for suffix in suffixes(lower_qname) {
            let candidate = suffix.len() <= self.longest_origin
                && self.label_counts.checked_shr(labels).unwrap_or(0) & 1 == 1;
            if candidate && let Some(zone) = self.lookup(suffix) {
                return Some(&**zone);
            }
            labels = labels.saturating_sub(1);
        }
        None
    }

    /// Whether and how a name (lower-cased wire) is served.
    pub fn served(&self, lower_qname: &[u8]) -> Served<'_> {
        match self.find(lower_qname) {
            Some(zone) => Served::Zone(zone),
            None if self.is_expired(lower_qname) => Served::Expired,
            None => Served::NotServed,
        }
    }

    pub fn len(&self) -> usize {
        self.zones.len()
    }

    pub fn is_empty(&self) -> bool {
        self.zones.is_empty()
    }

    pub fn zones(&self) -> impl Iterator<Item = &Arc<Zone>> {
        self.zones.iter()
    }
}

/// Labels of a wire name, the root label not counted (at most 127).
fn label_count(name: &[u8]) -> u32 {
    (suffixes(name).count() as u32).saturating_sub(1)
}

/// `name` (wire form), then each of its parent names down to the root.
fn suffixes(name: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut at = Some(0);
    std::iter::from_fn(move || {
        let i = at?;
        let len = *name.get(i)? as usize;
        at = (len != 0).then_some(i + 1 + len);
        Some(&name[i..])
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load_zone_str;

    fn zone(origin: &str) -> Zone {
        let text = "$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n";
        load_zone_str(text, "z", &Name::parse(origin).unwrap())
            .unwrap()
            .zone
    }

    fn lower(name: &str) -> Vec<u8> {
        Name::parse(name).unwrap().to_lowercase().as_wire().to_vec()
    }

    #[test]
    fn an_expired_zone_is_gone_but_remembered_until_it_returns() {
        let mut c = Catalog::new();
        c.insert(zone("a.test"));
        c.expire(&Name::parse("A.test").unwrap());
        assert!(c.find(&lower("www.a.test")).is_none());
        assert!(c.is_expired(&lower("www.a.test")));
        assert!(c.is_expired(&lower("a.test")));
        assert!(!c.is_expired(&lower("b.test")));
        c.insert_shared(Arc::new(zone("a.test")));
        assert!(c.find(&lower("www.a.test")).is_some());
        assert!(!c.is_expired(&lower("www.a.test")));
    }

    #[test]
    fn zones_at_every_depth_are_found_and_replaced_in_place() {
        let mut c = Catalog::new();
        for origin in [".", "test", "a.b.test", "d.c.b.a.example"] {
            c.insert(zone(origin));
        }
        c.insert(zone("A.B.test"));
        assert_eq!(c.len(), 4, "a second a.b.test replaces the first");
        let origin = |q: &str| c.find(&lower(q)).map(|z| z.origin().to_string());
        assert_eq!(origin("x.y.a.b.test").as_deref(), Some("a.b.test."));
        assert_eq!(origin("x.b.test").as_deref(), Some("test."));
        assert_eq!(
            origin("e.d.c.b.a.example").as_deref(),
            Some("d.c.b.a.example.")
        );
        assert_eq!(origin("c.b.a.example").as_deref(), Some("."));
        assert_eq!(origin(".").as_deref(), Some("."));
        assert!(c.get(&Name::parse("a.B.TEST").unwrap()).is_some());
        assert!(c.get(&Name::parse("b.test").unwrap()).is_none());
        assert_eq!(c.zones().count(), 4);
    }

    #[test]
    fn the_longest_matching_origin_wins() {
        let mut c = Catalog::new();
        c.insert(zone("test"));
        c.insert(zone("a.test"));
        let origin = |q: &str| c.find(&lower(q)).map(|z| z.origin().to_string());
        assert_eq!(origin("www.a.test").as_deref(), Some("a.test."));
        assert_eq!(origin("a.test").as_deref(), Some("a.test."));
        assert_eq!(origin("b.test").as_deref(), Some("test."));
        assert_eq!(origin("example"), None);
        assert_eq!(origin("."), None);
        let clone = c.clone();
        assert!(Arc::ptr_eq(
            clone.get(&Name::parse("a.test").unwrap()).unwrap(),
            c.get(&Name::parse("a.test").unwrap()).unwrap()
        ));
    }
}
