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

/// Counts per zone, by lower-cased origin.
#[derive(Debug, Default)]
pub struct ZoneStats {
    zones: Mutex<HashMap<Name, ZoneCounts>>,
}

impl ZoneStats {
    fn with(&self, origin: &Name, f: impl FnOnce(&mut ZoneCounts)) {
        let mut zones = self.zones.lock().unwrap_or_else(|e| e.into_inner());
        match zones.get_mut(origin) {
            Some(counts) => f(counts),
            None => f(zones.entry(origin.to_lowercase()).or_default()),
        }
    }

    /// A transfer of `origin` that ended after `took`, done or failed.
    pub fn transfer(&self, origin: &Name, way: Direction, took: Duration, ok: bool) {
        self.with(origin, |c| {
            let (count, failed, seconds) = match way {
                Direction::Out => (
                    &mut c.transfers_out,
                    &mut c.transfers_out_failed,
                    &mut c.transfer_out_seconds,
                ),
                Direction::In => (
                    &mut c.transfers_in,
                    &mut c.transfers_in_failed,
                    &mut c.transfer_in_seconds,
                ),
            };
            *count += 1;
            *failed += u64::from(!ok);
            *seconds += took.as_secs_f64();
        });
    }

    /// A NOTIFY for `origin` received and accepted.
    pub fn notify_in(&self, origin: &Name) {
        self.with(origin, |c| c.notifies_in += 1);
    }

    /// A NOTIFY for `origin` sent to a secondary, `acknowledged` or not.
    pub fn notify_out(&self, origin: &Name, acknowledged: bool) {
        self.with(origin, |c| {
            c.notifies_out += 1;
            c.notifies_out_failed += u64::from(!acknowledged);
        });
    }

    /// Every zone's counts, sorted by origin.
    pub fn snapshot(&self) -> Vec<(Name, ZoneCounts)> {
        let zones = self.zones.lock().unwrap_or_else(|e| e.into_inner());
        let mut all: Vec<_> = zones.iter().map(|(n, c)| (n.clone(), c.clone())).collect();
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
}
