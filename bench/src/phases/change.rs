//! Applying a small change to a large zone (`Zone::apply`): how long it
//! takes and how much memory the new version adds, measured in-process on
//! the large workload's zone.

use std::path::Path;
use std::time::Instant;

use super::Ctx;
use crate::results::ZoneChange;
use crate::stats::Spread;
use crate::workloads::Workload;
use heron_proto::{Name, RType};
use heron_zone::diff::{DiffRecord, ZoneDiff};
use heron_zone::{Zone, load_zone_file};

/// Loads `file` and applies a change of `records` records (half of them
/// deleting existing A records, half adding new names) `repeats` times,
/// each time to the loaded version.
pub fn measure(
    file: &Path,
    origin: &str,
    records: usize,
    repeats: usize,
) -> Result<ZoneChange, String> {
    let origin = Name::parse(origin).map_err(|e| format!("{origin}: {e}"))?;
    let zone = load_zone_file(file, &origin)
        .map_err(|p| format!("{}: {} problems, first {}", file.display(), p.len(), p[0]))?
        .zone;
    let change = small_change(&zone, records)?;
    let mut times = Vec::with_capacity(repeats);
    let mut extra_bytes = 0;
    for _ in 0..repeats {
        let started = Instant::now();
        let next = zone
            .apply(&change)
            .map_err(|p| format!("the change does not apply: {}", p[0]))?;
        times.push(started.elapsed().as_secs_f64() * 1000.0);
        extra_bytes = next.unshared_bytes(&zone);
    }
    Ok(ZoneChange {
        zone_records: zone.record_count(),
        changed_records: change.deleted.len() + change.added.len(),
        apply_ms: Spread::of(&times),
        extra_bytes,
        zone_bytes: zone.heap_bytes(),
    })
}

/// Deletes the A records of `records / 2` names and adds as many new
/// names with one A record each; the serial goes up by one.
fn small_change(zone: &Zone, records: usize) -> Result<ZoneDiff, String> {
    let record = |owner: Name, rtype, ttl, rdata: Vec<u8>| DiffRecord {
        owner,
        rtype,
        ttl,
        rdata,
    };
    let deleted: Vec<DiffRecord> = zone
        .nodes()
        .filter_map(|n| n.rrset(RType::A).map(|set| (n.owner(), set)))
        .filter(|(_, set)| set.rdata_count() == 1)
        .take(records / 2)
        .map(|(owner, set)| record(owner, RType::A, set.ttl(), set.first_rdata().to_vec()))
        .collect();
    if deleted.len() < records / 2 {
        return Err(format!(
            "the zone has fewer than {} single A records",
            records / 2
        ));
    }
    let added = (0..records - deleted.len())
        .map(|i| {
            let owner = Name::parse(&format!("added-{i}.{}", zone.origin()));
            owner.map(|o| record(o, RType::A, 3600, vec![192, 0, 2, i as u8]))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let soa = zone.soa();
    let old = soa.first_rdata().to_vec();
    let mut new = old.clone();
    let serial_at = new.len() - 20;
    new[serial_at..serial_at + 4].copy_from_slice(&zone.serial().wrapping_add(1).to_be_bytes());
    let origin = zone.origin().clone();
    Ok(ZoneDiff {
        old_soa: record(origin.clone(), RType::SOA, soa.ttl(), old),
        new_soa: record(origin, RType::SOA, soa.ttl(), new),
        deleted,
        added,
    })
}

/// A 10-record change applied to the large zone of `w`.
pub(crate) fn run(ctx: &mut Ctx, w: &Workload) -> Option<ZoneChange> {
    let (origin, file) = &w.zones[0];
    ctx.say("zone change: applying 10 records to the large zone");
    match measure(file, origin, 10, ctx.timing.repeats.max(5)) {
        Ok(c) => {
            ctx.say(&format!(
                "  {:.2} ms (median), {} bytes not shared with the previous version",
                c.apply_ms.median, c.extra_bytes
            ));
            Some(c)
        }
        Err(e) => {
            ctx.say(&format!("  zone change: ERROR {e}"));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_to_a_generated_zone_is_measured() {
        let dir = std::env::temp_dir().join(format!("heron-bench-change-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let g = crate::zones::write_a_zone(&dir, "change.test.", 1, 5_000).unwrap();
        let m = measure(&g.zones[0].1, "change.test.", 10, 3).unwrap();
        assert_eq!(m.changed_records, 10);
        assert_eq!(m.zone_records, g.records);
        assert!(m.extra_bytes > 0 && m.extra_bytes < m.zone_bytes);
        assert!(m.apply_ms.min > 0.0);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
