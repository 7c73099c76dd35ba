//! Per-zone counters of transfers and NOTIFYs, for the Prometheus
//! endpoint. Transfers and NOTIFYs are rare next to queries, so one lock
//! guards a primary's; a secondary zone's sit in the refresh driver's
//! entry of the zone ([`Inbound`]), which knows the zone already.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use heron_proto::Name;

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
    /// Dynamic updates answered, by rcode (NOERROR to NOTZONE, 0 to 10).
    pub updates: [u64; UPDATE_RCODES],
}

/// The rcodes an update is answered with, NOERROR (0) to NOTZONE (10).
pub const UPDATE_RCODES: usize = 11;

/// What primary zones count (transfers and NOTIFYs out), by lower-cased
/// origin. A secondary zone's counts are not here: a table by origin cost
/// 43 octets a zone, 4 MB for a secondary of 100,000 zones.
#[derive(Debug, Default)]
pub struct ZoneStats {
    outbound: Mutex<HashMap<Name, Outbound>>,
}

/// A zone's counts as a secondary: 16 octets, where u64s and an f64 took
/// 32. The counts wrap after 2^32, as a Prometheus counter that restarts;
/// the time stops at 49 days.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Inbound {
    transfers: u32,
    failed: u32,
    millis: u32,
    notifies: u32,
}

impl Inbound {
    /// A transfer in that ended after `took`, done or failed.
    pub fn transfer(&mut self, took: Duration, ok: bool) {
        self.transfers = self.transfers.wrapping_add(1);
        self.failed = self.failed.wrapping_add(u32::from(!ok));
        let millis = u32::try_from(took.as_millis()).unwrap_or(u32::MAX);
        self.millis = self.millis.saturating_add(millis);
    }

    /// A NOTIFY received and accepted.
    pub fn notify(&mut self) {
        self.notifies = self.notifies.wrapping_add(1);
    }

    /// Sets the inbound half of `counts`.
    pub fn fill(&self, counts: &mut ZoneCounts) {
        counts.transfers_in = self.transfers.into();
        counts.transfers_in_failed = self.failed.into();
        counts.transfer_in_seconds = f64::from(self.millis) / 1000.0;
        counts.notifies_in = self.notifies.into();
    }
}

/// A zone's counts as a primary.
#[derive(Clone, Copy, Debug, Default)]
struct Outbound {
    transfers: u64,
    failed: u64,
    seconds: f64,
    notifies: u64,
    notifies_failed: u64,
    updates: [u64; UPDATE_RCODES],
}

impl ZoneStats {
    /// The counts of `origin`, made if they are not there.
    fn with(&self, origin: &Name, f: impl FnOnce(&mut Outbound)) {
        let mut table = self.outbound.lock().unwrap_or_else(|e| e.into_inner());
        match table.get_mut(origin) {
            Some(counts) => f(counts),
            None => f(table.entry(origin.to_lowercase()).or_default()),
        }
    }

    /// A transfer of `origin` to a secondary that ended after `took`,
    /// done or failed.
    pub fn transfer_out(&self, origin: &Name, took: Duration, ok: bool) {
        self.with(origin, |c| {
            c.transfers += 1;
            c.failed += u64::from(!ok);
            c.seconds += took.as_secs_f64();
        });
    }

    /// A NOTIFY for `origin` sent to a secondary, `acknowledged` or not.
    pub fn notify_out(&self, origin: &Name, acknowledged: bool) {
        self.with(origin, |c| {
            c.notifies += 1;
            c.notifies_failed += u64::from(!acknowledged);
        });
    }

    /// A dynamic update of `origin` answered with `rcode` (one past
    /// NOTZONE is not counted).
    pub fn update(&self, origin: &Name, rcode: u16) {
        self.with(origin, |c| {
            if let Some(n) = c.updates.get_mut(rcode as usize) {
                *n += 1;
            }
        });
    }

    /// Drops `origin`'s counts: the zone is no longer configured, and its
    /// series leave the metrics (a zone configured again counts afresh).
    pub fn forget(&self, origin: &Name) {
        let mut table = self.outbound.lock().unwrap_or_else(|e| e.into_inner());
        table.remove(&origin.to_lowercase());
    }

    /// Every zone's outbound counts, sorted by origin.
    pub fn snapshot(&self) -> Vec<(Name, ZoneCounts)> {
        let table = self.outbound.lock().unwrap_or_else(|e| e.into_inner());
        let mut all: Vec<_> = (table.iter())
            .map(|(origin, c)| {
                let counts = ZoneCounts {
                    transfers_out: c.transfers,
                    transfers_out_failed: c.failed,
                    transfer_out_seconds: c.seconds,
                    notifies_out: c.notifies,
                    notifies_out_failed: c.notifies_failed,
                    updates: c.updates,
                    ..ZoneCounts::default()
                };
                (origin.clone(), counts)
            })
            .collect();
        all.sort_by_key(|(n, _)| n.to_string());
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forgotten_zone_has_no_counts() {
        let stats = ZoneStats::default();
        let a = Name::parse("A.test").unwrap();
        stats.transfer_out(&a, Duration::from_millis(5), true);
        stats.notify_out(&Name::parse("b.test").unwrap(), true);
        stats.forget(&Name::parse("a.TEST").unwrap());
        let left: Vec<String> = (stats.snapshot().into_iter())
            .map(|(origin, _)| origin.to_string())
            .collect();
        assert_eq!(left, ["b.test."]);
    }

    #[test]
    fn updates_are_counted_per_zone_and_rcode() {
        let stats = ZoneStats::default();
        let (a, b) = (
            Name::parse("a.test").unwrap(),
            Name::parse("B.test").unwrap(),
        );
        for rcode in [0, 0, 5, 8, 99] {
            stats.update(&a, rcode);
        }
        stats.update(&b, 10);
        let all = stats.snapshot();
        assert_eq!(all[0].1.updates, [2, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0]);
        assert_eq!(all[1].1.updates[10], 1);
    }

    #[test]
    fn counts_are_kept_per_zone_whatever_the_case() {
        let stats = ZoneStats::default();
        let upper = Name::parse("Example.COM.").unwrap();
        let lower = Name::parse("example.com.").unwrap();
        stats.transfer_out(&upper, Duration::from_millis(500), true);
        stats.transfer_out(&lower, Duration::from_millis(250), false);
        stats.notify_out(&lower, false);
        let all = stats.snapshot();
        assert_eq!(all.len(), 1);
        let (origin, c) = &all[0];
        assert_eq!(origin, &lower);
        assert_eq!((c.transfers_out, c.transfers_out_failed), (2, 1));
        assert_eq!(c.transfer_out_seconds, 0.75);
        assert_eq!((c.notifies_out, c.notifies_out_failed), (1, 1));
        assert_eq!((c.transfers_in, c.notifies_in), (0, 0));
    }

    #[test]
    fn a_secondary_zone_pays_16_octets_for_its_counts() {
        assert_eq!(size_of::<Inbound>(), 16);
    }

    #[test]
    fn inbound_counts_fill_the_inbound_half_only() {
        let mut inbound = Inbound::default();
        inbound.transfer(Duration::from_secs(2), true);
        inbound.transfer(Duration::from_millis(500), false);
        inbound.notify();
        let mut counts = ZoneCounts {
            notifies_out: 4,
            ..ZoneCounts::default()
        };
        inbound.fill(&mut counts);
        let expected = ZoneCounts {
            transfers_in: 2,
            transfers_in_failed: 1,
            transfer_in_seconds: 2.5,
            notifies_in: 1,
            notifies_out: 4,
            ..ZoneCounts::default()
        };
        assert_eq!(counts, expected);
    }

    #[test]
    fn inbound_time_stops_at_its_limit_and_counts_wrap() {
        let mut inbound = Inbound::default();
        let limit = Duration::from_millis(u32::MAX.into());
        inbound.transfer(limit - Duration::from_millis(1), true);
        inbound.transfer(Duration::from_millis(1), true);
        let seconds = |inbound: &Inbound| {
            let mut counts = ZoneCounts::default();
            inbound.fill(&mut counts);
            counts
        };
        let at_limit = seconds(&inbound).transfer_in_seconds;
        assert_eq!(at_limit, f64::from(u32::MAX) / 1000.0);
        inbound.transfer(Duration::from_secs(u64::MAX), false);
        let c = seconds(&inbound);
        assert_eq!(c.transfer_in_seconds, at_limit, "stopped, not wrapped");
        assert_eq!((c.transfers_in, c.transfers_in_failed), (3, 1));
        inbound.notifies = u32::MAX;
        inbound.notify();
        assert_eq!(seconds(&inbound).notifies_in, 0, "wrapped as a counter");
    }
}
