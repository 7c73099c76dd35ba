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
}

impl Catalog {
    pub fn new() -> Catalog {
        Catalog::default()
    }

    /// Adds or replaces a zone.
    pub fn insert(&mut self, zone: Zone) {
        let key: Box<[u8]> = zone.origin().to_lowercase().as_wire().into();
        self.longest_origin = self.longest_origin.max(key.len());
        self.zones.insert(key, Arc::new(zone));
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
