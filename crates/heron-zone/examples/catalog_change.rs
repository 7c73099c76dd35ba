//! What one new version of the served catalog costs with N zones: a copy
//! of the version served, one zone added to it, the copy swapped in and
//! the version it replaces dropped, as a secondary does for each change
//! (a catalog member added, a zone transferred).
//!
//!     cargo build --release -p heron-zone --example catalog_change
//!     target/release/examples/catalog_change 100000 200
//!
//! Prints the median and the slowest of the changes, microseconds.

use std::sync::Arc;
use std::time::Instant;

use heron_proto::Name;
use heron_zone::{Catalog, Zone, load_zone_str};

fn zone(origin: &str) -> Zone {
    let text = "$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n";
    let origin = Name::parse(origin).unwrap();
    load_zone_str(text, "z", &origin).unwrap().zone
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let zones: usize = args.get(1).map_or(100_000, |n| n.parse().unwrap());
    let changes: usize = args.get(2).map_or(200, |n| n.parse().unwrap());
    let mut building = Catalog::new();
    (0..zones).for_each(|i| building.insert(zone(&format!("z{i}.example"))));
    let mut served = Arc::new(building);
    let new: Vec<Arc<Zone>> = (0..changes)
        .map(|i| Arc::new(zone(&format!("new{i}.example"))))
        .collect();
    let mut micros: Vec<f64> = Vec::with_capacity(changes);
    for zone in new {
        let started = Instant::now();
        let mut next = (*served).clone();
        next.insert_shared(zone);
        served = Arc::new(next);
        micros.push(started.elapsed().as_secs_f64() * 1e6);
    }
    micros.sort_by(f64::total_cmp);
    println!(
        "{zones} zones: one zone added: median {:.1} us, slowest {:.1} us ({} changes)",
        micros[micros.len() / 2],
        micros[micros.len() - 1],
        changes
    );
    assert_eq!(served.len(), zones + changes);
}
