//! A zone's nodes in canonical order (RFC 4034 6.1). Nodes are stored by
//! hash; output that peers read is sorted, because they load sorted input
//! much faster: Knot took 3.8 s for a 2M-record AXFR from Knot (tree
//! order) and 10.3 s for the same zone from Heron in hash order.

use std::cmp::Ordering;
use std::sync::{Arc, Mutex, Weak};

use heron_proto::name::canonical_cmp;

use super::{Node, Zone};
use crate::prefetch::prefetch;

/// How many nodes ahead of the one returned to start loading: enough to
/// cover a miss while the caller writes a few nodes out.
const PREFETCH_AHEAD: usize = 16;

/// Where a node is, and a prefix of its name that orders it.
#[derive(Clone, Copy)]
pub(super) struct Position {
    pub(super) key: u64,
    pub(super) shard: u32,
    pub(super) at: u32,
}

/// The order of the zone at `address` a walk of it holds now, if any;
/// the orders no walk holds are let go.
fn shared_order(
    orders: &mut Vec<(usize, Weak<[Position]>)>,
    address: usize,
) -> Option<Arc<[Position]>> {
    orders.retain(|(_, order)| order.strong_count() > 0);
    (orders.iter()).find_map(|(at, order)| (*at == address).then(|| order.upgrade())?)
}

/// The nodes of a zone, apex first, the rest in canonical order. Holds 16
/// bytes per node while it lives.
pub struct CanonicalNodes<'z> {
    zone: &'z Zone,
    order: Arc<[Position]>,
    next: usize,
}

/// The canonical orders in use, by the address of their zone: iterations
/// of one zone at once (transfers to many secondaries) share one, instead
/// of holding 16 bytes a node each (black-box finding BN-2: 40 AXFRs of a
/// 200,000-name zone held 3.3 MB each). Weak: an order lives as long as
/// an iteration of it; while one does, its zone cannot move or go, so no
/// other zone is found at that address meanwhile.
static ORDERS: Mutex<Vec<(usize, Weak<[Position]>)>> = Mutex::new(Vec::new());

impl Zone {
    /// Every node in canonical order: a sort of the zone's positions,
    /// most comparisons settled by a prefix of the label below the apex.
    pub fn nodes_in_canonical_order(&self) -> CanonicalNodes<'_> {
        let address = self as *const Zone as usize;
        let lock = || ORDERS.lock().unwrap_or_else(|e| e.into_inner());
        // Its own statement: the guard goes before the match below.
        let found = shared_order(&mut lock(), address);
        let order = match found {
            Some(order) => order,
            None => {
                // Sorted without the lock: other zones' walks do not wait.
                let sorted: Arc<[Position]> = self.canonical_positions().into();
                let mut orders = lock();
                match shared_order(&mut orders, address) {
                    Some(theirs) => theirs,
                    None => {
                        orders.push((address, Arc::downgrade(&sorted)));
                        sorted
                    }
                }
            }
        };
        CanonicalNodes {
            zone: self,
            order,
            next: 0,
        }
    }

    /// The zone's positions, sorted.
    fn canonical_positions(&self) -> Vec<Position> {
        let mut order = Vec::with_capacity(self.node_count());
        for (shard, s) in self.shards.iter().enumerate() {
            order.extend(s.offsets().map(|at| self.position((shard, at))));
        }
        self.sort_canonically(&mut order);
        order
    }

    /// The position of the node at (shard, offset), with its order key.
    pub(super) fn position(&self, (shard, at): (usize, usize)) -> Position {
        Position {
            key: order_key(self.node_at((shard, at)).key(), self.origin.wire_len()),
            shard: shard as u32,
            at: at as u32,
        }
    }

    pub(super) fn node_of(&self, p: &Position) -> Node<'_> {
        self.node_at((p.shard as usize, p.at as usize))
    }

    /// Sorts positions by their nodes' names in canonical order.
    pub(super) fn sort_canonically(&self, order: &mut [Position]) {
        // The prefix alone settles most places (a sort by an integer key,
        // inlined); runs that share one are sorted again by name.
        order.sort_unstable_by_key(|p| p.key);
        for run in order.chunk_by_mut(|a, b| a.key == b.key) {
            if run.len() > 1 {
                run.sort_unstable_by(|a, b| self.cmp_positions(a, b));
            }
        }
    }

    /// Canonical order of two positions' names.
    pub(super) fn cmp_positions(&self, a: &Position, b: &Position) -> Ordering {
        a.key
            .cmp(&b.key)
            .then_with(|| canonical_cmp(self.node_of(a).key(), self.node_of(b).key()))
    }

    /// Canonical order of a position's name and a lower-cased wire name
    /// in the zone, whose order key is `key`.
    pub(super) fn cmp_position_name(&self, p: &Position, key: u64, name: &[u8]) -> Ordering {
        p.key
            .cmp(&key)
            .then_with(|| canonical_cmp(self.node_of(p).key(), name))
    }
}

impl<'z> Iterator for CanonicalNodes<'z> {
    type Item = Node<'z>;

    fn next(&mut self) -> Option<Node<'z>> {
        if let Some(ahead) = self.order.get(self.next + PREFETCH_AHEAD) {
            let arena = &self.zone.shards[ahead.shard as usize].arena[ahead.at as usize..];
            prefetch(arena);
            prefetch(arena.get(64..).unwrap_or_default());
        }
        let p = *self.order.get(self.next)?;
        self.next += 1;
        Some(self.zone.node_of(&p))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.order.len() - self.next;
        (left, Some(left))
    }
}

/// The first 8 octets of the label just below the apex (lower-cased wire
/// `key`, zero-padded; 0 for the apex): ordering by it agrees with
/// canonical order wherever two keys differ.
pub(super) fn order_key(key: &[u8], apex_len: usize) -> u64 {
    let relative = &key[..key.len() - apex_len];
    let mut at = 0;
    let mut last = None;
    while at < relative.len() {
        last = Some(at);
        at += 1 + relative[at] as usize;
    }
    let Some(label) = last else { return 0 };
    let label = &relative[label + 1..];
    let mut bytes = [0u8; 8];
    let n = label.len().min(8);
    bytes[..n].copy_from_slice(&label[..n]);
    // The apex (no label) sorts first; labels start at 1.
    u64::from_be_bytes(bytes).saturating_add(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load_zone_str;
    use heron_proto::Name;

    const NAMES: [&str; 12] = [
        "z.test.",
        "test.",
        "a.test.",
        "ab.test.",
        "abcdefghij.test.",
        "abcdefghi.test.",
        "b.a.test.",
        "\\000.test.",
        "a\\000.test.",
        "yljkjljk.a.test.",
        "zabc.test.",
        "ABCDEFGHIJK.test.",
    ];

    #[test]
    fn order_keys_agree_with_canonical_order() {
        let apex = Name::parse("test").unwrap();
        let mut wires: Vec<Vec<u8>> = NAMES
            .iter()
            .map(|n| Name::parse(n).unwrap().as_wire().to_ascii_lowercase())
            .collect();
        let mut by_key = wires.clone();
        by_key.sort_by(|a, b| {
            order_key(a, apex.wire_len())
                .cmp(&order_key(b, apex.wire_len()))
                .then_with(|| canonical_cmp(a, b))
        });
        wires.sort_by(|a, b| canonical_cmp(a, b));
        assert_eq!(by_key, wires);
    }

    /// Walks of one zone at once share one order (black-box finding BN-2:
    /// each AXFR held its own, 16 bytes a node); each walks it whole, and
    /// another zone gets its own.
    #[test]
    fn walks_of_one_zone_at_once_share_one_order() {
        let text = "@ 300 IN SOA ns hm 1 2 3 4 5\n@ 300 IN NS ns\nns 300 IN A 192.0.2.1\n";
        let origin = Name::parse("share.test").unwrap();
        let zone = load_zone_str(text, "s", &origin).unwrap().zone;
        let other = load_zone_str(text, "o", &Name::parse("other.test").unwrap())
            .unwrap()
            .zone;
        let (mut a, b) = (
            zone.nodes_in_canonical_order(),
            zone.nodes_in_canonical_order(),
        );
        assert!(Arc::ptr_eq(&a.order, &b.order));
        assert!(!Arc::ptr_eq(
            &a.order,
            &other.nodes_in_canonical_order().order
        ));
        a.next();
        assert_eq!((a.count(), b.count()), (1, 2));
    }

    #[test]
    fn a_zone_walks_in_canonical_order_with_every_node_once() {
        let mut text = String::from("@ 300 IN SOA ns hm 1 2 3 4 5\n@ 300 IN NS ns\n");
        for name in NAMES.iter().filter(|n| **n != "test.") {
            text.push_str(&format!("{name} 300 IN A 192.0.2.1\n"));
        }
        for i in 0..500 {
            text.push_str(&format!("host{i}.sub{} 300 IN A 192.0.2.2\n", i % 7));
        }
        let zone = load_zone_str(&text, "t", &Name::parse("test").unwrap())
            .unwrap()
            .zone;
        let walked: Vec<Vec<u8>> = zone
            .nodes_in_canonical_order()
            .map(|n| n.key().to_vec())
            .collect();
        let mut expected: Vec<Vec<u8>> = zone.nodes().map(|n| n.key().to_vec()).collect();
        expected.sort_by(|a, b| canonical_cmp(a, b));
        assert_eq!(walked.len(), zone.node_count());
        assert_eq!(walked, expected);
        assert_eq!(walked[0], zone.origin().as_wire());
    }
}
