//! The catalog: every zone served, found by the longest matching origin.

use hashbrown::HashMap;
use std::sync::Arc;

use heron_proto::Name;

use crate::zone::Zone;

/// An immutable set of zones. A new version is built and swapped in whole,
/// so readers never see a half-updated catalog.
/// Cloning copies the table, not the zones (they are shared).
#[derive(Clone, Default)]
pub struct Catalog {
    zones: HashMap<Box<[u8]>, Arc<Zone>>,
    /// Wire length of the longest origin: no lookup for a longer suffix.
    longest_origin: usize,
    /// Origins (lower-cased wire) of secondary zones that expired: they
    /// answer SERVFAIL, not REFUSED (RFC 1034 4.3.5). Consulted only when
    /// no zone matched, so it costs the query path nothing.
    expired: Vec<Box<[u8]>>,
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
        let key: Box<[u8]> = zone.origin().to_lowercase().as_wire().into();
        self.longest_origin = self.longest_origin.max(key.len());
        self.expired.retain(|e| *e != key);
        self.zones.insert(key, zone);
    }

    /// Stops serving a zone's data; names in it get SERVFAIL.
    pub fn expire(&mut self, origin: &Name) {
        let key: Box<[u8]> = origin.to_lowercase().as_wire().into();
        self.zones.remove(&key);
        if !self.expired.contains(&key) {
            self.expired.push(key);
        }
    }

    /// Whether `lower_qname` is in a zone that expired.
    pub fn is_expired(&self, lower_qname: &[u8]) -> bool {
        self.expired
            .iter()
            .any(|origin| Name::from_wire(lower_qname).is_ok_and(|n| {
                Name::from_wire(origin).is_ok_and(|o| n.is_subdomain_of(&o))
            }))
    }

    pub fn get(&self, origin: &Name) -> Option<&Arc<Zone>> {
        self.zones.get(origin.to_lowercase().as_wire())
    }

    /// The zone with the longest origin that `lower_qname` (lower-cased wire
    /// form) is at or below. One hash lookup per label, no allocation.
    pub fn find(&self, lower_qname: &[u8]) -> Option<&Zone> {
        if self.zones.is_empty() {
            return None;
        }
        let mut i = 0;
        loop {
            if lower_qname.len() - i <= self.longest_origin
                && let Some(zone) = self.zones.get(&lower_qname[i..])
            {
                return Some(zone);
            }
            let len = lower_qname[i] as usize;
            if len == 0 {
                return None;
            }
            i += 1 + len;
        }
    }

    pub fn len(&self) -> usize {
        self.zones.len()
    }

    pub fn is_empty(&self) -> bool {
        self.zones.is_empty()
    }

    pub fn zones(&self) -> impl Iterator<Item = &Arc<Zone>> {
        self.zones.values()
    }
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
}
