//! Per-zone counters of transfers and NOTIFYs, for `heron ctl stats` and
//! the Prometheus endpoint. Transfers and NOTIFYs are rare next to
//! queries, so one lock guards them all.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use heron_proto::Name;

/// Which way a transfer went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// To a secondary (AXFR or IXFR out).
    Out,
    /// From a primary (this server is the secondary).
    In,
}

/// One zone's counts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ZoneCounts {
    pub transfers_out: u64,
    pub transfers_out_failed: u64,
    /// Time spent sending transfers, finished or not.
    pub transfer_out_seconds: f64,
    pub transfers_in: u64,
    pub transfers_in_failed: u64,
    pub transfer_in_seconds: f64,
    /// NOTIFYs received and accepted for a secondary zone.
    pub notifies_in: u64,
    /// NOTIFY exchanges with secondaries, and those not acknowledged.
    pub notifies_out: u64,
    pub notifies_out_failed: u64,
}

/// Counts per zone, by lower-cased origin, in two tables: what a
/// secondary zone counts (transfers in, NOTIFYs in) and what a primary
/// zone counts (transfers and NOTIFYs out). A secondary of 100,000 zones
/// then pays for the first half only.
#[derive(Debug, Default)]
pub struct ZoneStats {
    zones: Mutex<Tables>,
}

#[derive(Debug, Default)]
struct Tables {
    inbound: HashMap<Name, Inbound>,
    outbound: HashMap<Name, Outbound>,
}

/// A zone's counts as a secondary: 16 octets, where u64s and an f64 took
/// 32 (100,000 zones: 2 MB less). The counts wrap after 2^32, as a
/// Prometheus counter that restarts; the time stops at 49 days.
#[derive(Clone, Copy, Debug, Default)]
struct Inbound {
    transfers: u32,
    failed: u32,
    millis: u32,
    notifies: u32,
}

/// A zone's counts as a primary.
#[derive(Clone, Copy, Debug, Default)]
struct Outbound {
    transfers: u64,
    failed: u64,
    seconds: f64,
    notifies: u64,
    notifies_failed: u64,
}

/// The entry of `origin` in `table`, made if it is not there.
fn entry<'t, T: Default>(table: &'t mut HashMap<Name, T>, origin: &Name) -> &'t mut T {
    if table.contains_key(origin) {
        return table.get_mut(origin).expect("there");
    }
    table.entry(origin.to_lowercase()).or_default()
}

impl ZoneStats {
    fn with(&self, f: impl FnOnce(&mut Tables)) {
        f(&mut self.zones.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// A transfer of `origin` that ended after `took`, done or failed.
    pub fn transfer(&self, origin: &Name, way: Direction, took: Duration, ok: bool) {
        self.with(|t| match way {
            Direction::Out => {
                let c = entry(&mut t.outbound, origin);
                c.transfers += 1;
                c.failed += u64::from(!ok);
                c.seconds += took.as_secs_f64();
            }
            Direction::In => {
                let c = entry(&mut t.inbound, origin);
                c.transfers = c.transfers.wrapping_add(1);
                c.failed = c.failed.wrapping_add(u32::from(!ok));
                let millis = u32::try_from(took.as_millis()).unwrap_or(u32::MAX);
                c.millis = c.millis.saturating_add(millis);
            }
        });
    }

    /// A NOTIFY for `origin` received and accepted.
    pub fn notify_in(&self, origin: &Name) {
        self.with(|t| {
            let c = entry(&mut t.inbound, origin);
            c.notifies = c.notifies.wrapping_add(1);
        });
    }

    /// A NOTIFY for `origin` sent to a secondary, `acknowledged` or not.
    pub fn notify_out(&self, origin: &Name, acknowledged: bool) {
        self.with(|t| {
            let c = entry(&mut t.outbound, origin);
            c.notifies += 1;
            c.notifies_failed += u64::from(!acknowledged);
        });
    }

    /// Every zone's counts, sorted by origin.
    pub fn snapshot(&self) -> Vec<(Name, ZoneCounts)> {
        let tables = self.zones.lock().unwrap_or_else(|e| e.into_inner());
        let mut all: HashMap<&Name, ZoneCounts> = HashMap::new();
        for (origin, c) in &tables.inbound {
            let counts = all.entry(origin).or_default();
            counts.transfers_in = c.transfers.into();
            counts.transfers_in_failed = c.failed.into();
            counts.transfer_in_seconds = f64::from(c.millis) / 1000.0;
            counts.notifies_in = c.notifies.into();
        }
        for (origin, c) in &tables.outbound {
            let counts = all.entry(origin).or_default();
            counts.transfers_out = c.transfers;
            counts.transfers_out_failed = c.failed;
            counts.transfer_out_seconds = c.seconds;
            counts.notifies_out = c.notifies;
            counts.notifies_out_failed = c.notifies_failed;
        }
        let mut all: Vec<_> = all.into_iter().map(|(n, c)| (n.clone(), c)).collect();
        all.sort_by_key(|(n, _)| n.to_string());
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_kept_per_zone_whatever_the_case() {
        let stats = ZoneStats::default();
        let upper = Name::parse("Example.COM.").unwrap();
        let lower = Name::parse("example.com.").unwrap();
        stats.transfer(&upper, Direction::Out, Duration::from_millis(500), true);
        stats.transfer(&lower, Direction::Out, Duration::from_millis(250), false);
        stats.transfer(&lower, Direction::In, Duration::from_secs(1), true);
        stats.notify_in(&lower);
        stats.notify_out(&lower, false);
        let all = stats.snapshot();
        assert_eq!(all.len(), 1);
        let (origin, c) = &all[0];
        assert_eq!(origin, &lower);
        assert_eq!((c.transfers_out, c.transfers_out_failed), (2, 1));
        assert_eq!(c.transfer_out_seconds, 0.75);
        assert_eq!((c.transfers_in, c.transfers_in_failed), (1, 0));
        assert_eq!(
            (c.notifies_in, c.notifies_out, c.notifies_out_failed),
            (1, 1, 1)
        );
    }

    #[test]
    fn a_secondary_zone_pays_16_octets_for_its_counts() {
        assert_eq!(size_of::<Inbound>(), 16);
    }

    #[test]
    fn inbound_time_stops_at_its_limit_and_counts_wrap() {
        let stats = ZoneStats::default();
        let zone = Name::parse("in.test.").unwrap();
        let limit = Duration::from_millis(u32::MAX.into());
        stats.transfer(&zone, Direction::In, limit - Duration::from_millis(1), true);
        stats.transfer(&zone, Direction::In, Duration::from_millis(1), true);
        let at_limit = stats.snapshot()[0].1.transfer_in_seconds;
        assert_eq!(at_limit, f64::from(u32::MAX) / 1000.0);
        stats.transfer(&zone, Direction::In, Duration::from_secs(u64::MAX), false);
        let c = stats.snapshot()[0].1.clone();
        assert_eq!(c.transfer_in_seconds, at_limit, "stopped, not wrapped");
        assert_eq!((c.transfers_in, c.transfers_in_failed), (3, 1));
        stats.with(|t| t.inbound.get_mut(&zone).unwrap().notifies = u32::MAX);
        stats.notify_in(&zone);
        assert_eq!(stats.snapshot()[0].1.notifies_in, 0, "wrapped as a counter");
    }

    #[test]
    fn a_zone_counted_one_way_shows_zero_the_other_way() {
        let stats = ZoneStats::default();
        let secondary = Name::parse("in.test.").unwrap();
        let primary = Name::parse("out.test.").unwrap();
        stats.transfer(&secondary, Direction::In, Duration::from_secs(2), true);
        stats.notify_in(&secondary);
        stats.notify_out(&primary, true);
        let all = stats.snapshot();
        assert_eq!(all.len(), 2);
        let (origin, c) = &all[0];
        assert_eq!(origin, &secondary);
        let only_in = ZoneCounts {
            transfers_in: 1,
            transfer_in_seconds: 2.0,
            notifies_in: 1,
            ..ZoneCounts::default()
        };
        assert_eq!(c, &only_in);
        let (origin, c) = &all[1];
        assert_eq!(origin, &primary);
        let only_out = ZoneCounts {
            notifies_out: 1,
            ..ZoneCounts::default()
        };
        assert_eq!(c, &only_out);
    }
}
