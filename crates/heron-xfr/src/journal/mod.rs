//! The journal of a zone: the diffs between its recent versions, oldest
//! first, so an IXFR (RFC 1995) can send a secondary only what changed
//! since the serial it has.
//!
//! It is bounded in bytes: the oldest diffs go first. A diff that does not
//! continue from the newest serial (a zone file edited with a lower
//! serial, or a gap) starts the history over, because a chain with a hole
//! would send a secondary a wrong zone.
//!
//! [`file`] keeps the same history on disk, so it survives a restart;
//! [`files`] keeps the files of many zones, written by one thread.

pub mod file;
pub mod files;

use std::collections::VecDeque;
use std::sync::Arc;

use heron_proto::rdata;

use heron_zone::diff::{DiffRecord, ZoneDiff};

/// Default history kept per zone.
pub const DEFAULT_MAX_BYTES: usize = 16 << 20;

/// Recent diffs of one zone, each from one serial to the next.
#[derive(Debug)]
pub struct Journal {
    diffs: VecDeque<Arc<ZoneDiff>>,
    bytes: usize,
    max_bytes: usize,
}

impl Journal {
    pub fn new(max_bytes: usize) -> Journal {
        Journal {
            diffs: VecDeque::new(),
            bytes: 0,
            max_bytes,
        }
    }

    /// Appends the step to a new version. Drops the oldest steps beyond the
    /// size limit; a diff larger than the limit alone is not kept at all.
    /// Returns false if the step did not continue the history, which
    /// started over with it.
    pub fn record(&mut self, diff: impl Into<Arc<ZoneDiff>>) -> bool {
        let diff = diff.into();
        let continued = self.newest_serial() == Some(serial_of(&diff.old_soa));
        if !continued {
            self.clear();
        }
        let size = diff_size(&diff);
        self.diffs.push_back(diff);
        self.bytes += size;
        while self.bytes > self.max_bytes {
            let Some(old) = self.diffs.pop_front() else {
                break;
            };
            self.bytes -= diff_size(&old);
        }
        continued
    }

    /// The steps that lead from `serial` to `current`, in order, or None
    /// if the journal does not reach back that far or does not reach
    /// `current`. A serial the history passed more than once (serials go
    /// round, RFC 1982) leads on from its newest step: the client holds
    /// what came before. Steps past `current` are left out: an update's
    /// step is journaled just before its version is served, and an IXFR
    /// of the version served then is still a chain (black-box finding:
    /// such IXFRs were answered with the whole zone).
    pub fn chain(&self, serial: u32, current: u32) -> Option<Vec<Arc<ZoneDiff>>> {
        let start = self
            .diffs
            .iter()
            .rposition(|d| serial_of(&d.old_soa) == serial)?;
        let steps = self.diffs.range(start..);
        let to_current = steps
            .clone()
            .position(|d| serial_of(&d.new_soa) == current)?;
        Some(steps.take(to_current + 1).cloned().collect())
    }

    pub fn clear(&mut self) {
        self.diffs.clear();
        self.bytes = 0;
    }

    /// Forgets the newest `steps` steps (a version never served: its
    /// journal write failed).
    pub fn forget_newest(&mut self, steps: usize) {
        for _ in 0..steps {
            let Some(newest) = self.diffs.pop_back() else {
                break;
            };
            self.bytes -= diff_size(&newest);
        }
    }

    /// Whether the steps from `serial` on are all kept (or `serial` is
    /// the newest): a file rewritten from the journal loses none of them.
    /// An empty journal holds none (its steps were too large to keep).
    pub fn holds_steps_from(&self, serial: u32) -> bool {
        // Looked for from both ends at once: the serial asked is the
        // oldest step's (no write-back) or a recent one's (the zone file
        // written back), and a scan from one end made every update cost
        // the whole journal (black-box finding BN-1: 15 times the CPU).
        let from = |d: &Arc<ZoneDiff>| serial_of(&d.old_soa) == serial;
        let ends = self.diffs.iter().zip(self.diffs.iter().rev());
        self.newest_serial() == Some(serial)
            || ends
                .take(self.diffs.len().div_ceil(2))
                .any(|(a, b)| from(a) || from(b))
    }

    pub fn len(&self) -> usize {
        self.diffs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.diffs.is_empty()
    }

    /// Approximate bytes held (record data plus per-record overhead).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// The steps kept, oldest first.
    pub fn diffs(&self) -> impl ExactSizeIterator<Item = &Arc<ZoneDiff>> {
        self.diffs.iter()
    }

    /// The serial the history leads to, None when it is empty.
    pub fn newest_serial(&self) -> Option<u32> {
        self.diffs.back().map(|d| serial_of(&d.new_soa))
    }
}

/// The serial of an SOA diff record (0 if its RDATA is malformed, which
/// a zone that loaded cannot have).
pub fn serial_of(soa: &DiffRecord) -> u32 {
    rdata::soa_serial(&soa.rdata).unwrap_or(0)
}

/// What a diff costs in memory, roughly.
fn diff_size(diff: &ZoneDiff) -> usize {
    const PER_RECORD: usize = std::mem::size_of::<DiffRecord>();
    let records = diff.deleted.iter().chain(&diff.added);
    records
        .map(|r| PER_RECORD + r.owner.wire_len() + r.rdata.len())
        .sum::<usize>()
        + 2 * PER_RECORD
}

/// Records in a chain of diffs, to compare with the zone's size: an IXFR
/// longer than the zone is better sent as AXFR.
pub fn chain_records(chain: &[Arc<ZoneDiff>]) -> usize {
    chain
        .iter()
        .map(|d| d.deleted.len() + d.added.len() + 2)
        .sum()
}

/// Made-up steps for the tests of the journal and of its file.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use heron_proto::{Name, RType};

    pub(crate) fn soa(serial: u32) -> DiffRecord {
        let mut rdata = vec![0, 0];
        rdata.extend_from_slice(&serial.to_be_bytes());
        rdata.extend_from_slice(&[0; 16]);
        DiffRecord {
            owner: Name::parse("z.test").unwrap(),
            rtype: RType::SOA,
            ttl: 60,
            rdata,
        }
    }

    pub(crate) fn step(from: u32, to: u32, added: usize) -> ZoneDiff {
        let a = DiffRecord {
            owner: Name::parse("www.z.test").unwrap(),
            rtype: RType::A,
            ttl: 60,
            rdata: vec![192, 0, 2, 1],
        };
        ZoneDiff {
            old_soa: soa(from),
            new_soa: soa(to),
            deleted: Vec::new(),
            added: vec![a; added],
        }
    }

    pub(crate) fn serials<'a>(
        chain: impl IntoIterator<Item = &'a Arc<ZoneDiff>>,
    ) -> Vec<(u32, u32)> {
        chain
            .into_iter()
            .map(|d| (serial_of(&d.old_soa), serial_of(&d.new_soa)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    #[test]
    fn serial_is_read_from_soa_rdata() {
        assert_eq!(serial_of(&soa(2026112101)), 2026112101);
    }

    /// The steps from a serial are found wherever it is in the journal:
    /// first, last, the newest serial, the middle; not one never a
    /// version, or one dropped (black-box finding BN-1 made the search
    /// start from both ends).
    #[test]
    fn steps_from_a_serial_are_found_at_either_end_and_between() {
        let mut j = Journal::new(DEFAULT_MAX_BYTES);
        for serial in 1..=1001 {
            j.record(step(serial, serial + 1, 1));
        }
        for held in [1, 2, 500, 501, 1000, 1001, 1002] {
            assert!(j.holds_steps_from(held), "{held}");
        }
        assert!(!j.holds_steps_from(0));
        assert!(!j.holds_steps_from(1003));
        let mut odd = Journal::new(DEFAULT_MAX_BYTES);
        odd.record(step(7, 9, 1));
        assert!(odd.holds_steps_from(7) && odd.holds_steps_from(9) && !odd.holds_steps_from(8));
        assert!(!Journal::new(DEFAULT_MAX_BYTES).holds_steps_from(7));
    }

    #[test]
    fn chain_from_any_kept_serial_to_the_current_one() {
        let mut j = Journal::new(DEFAULT_MAX_BYTES);
        j.record(step(1, 2, 1));
        j.record(step(2, 5, 1));
        j.record(step(5, 6, 1));
        assert_eq!(serials(&j.chain(1, 6).unwrap()), [(1, 2), (2, 5), (5, 6)]);
        assert_eq!(serials(&j.chain(5, 6).unwrap()), [(5, 6)]);
        assert!(j.chain(3, 6).is_none(), "3 was never a version");
        assert!(j.chain(0, 6).is_none(), "older than the history");
        assert!(
            j.chain(1, 7).is_none(),
            "the journal must reach the zone's serial"
        );
        // The version served is 5 while the step to 6 is journaled before
        // it is served: the chain stops at 5 (not the whole zone).
        assert_eq!(serials(&j.chain(1, 5).unwrap()), [(1, 2), (2, 5)]);
        assert!(j.chain(5, 5).is_none(), "nothing leads from 5 to 5");
    }

    /// Serials go round (RFC 1982): a serial the history passed twice
    /// leads on from its newest step, so a client at it gets only what it
    /// lacks, and the current serial is never an SOA in the middle.
    #[test]
    fn a_serial_passed_twice_leads_on_from_its_newest_step() {
        let mut j = Journal::new(DEFAULT_MAX_BYTES);
        for (from, to) in [
            (1, 2),
            (2, 2_147_483_649),
            (2_147_483_649, 0),
            (0, 1),
            (1, 2),
        ] {
            j.record(step(from, to, 1));
        }
        assert_eq!(j.len(), 5);
        assert_eq!(serials(&j.chain(1, 2).unwrap()), [(1, 2)]);
        assert_eq!(serials(&j.chain(0, 2).unwrap()), [(0, 1), (1, 2)]);
    }

    #[test]
    fn a_step_that_does_not_continue_the_history_starts_it_over() {
        let mut j = Journal::new(DEFAULT_MAX_BYTES);
        j.record(step(1, 2, 1));
        j.record(step(7, 8, 1));
        assert_eq!(j.len(), 1);
        assert!(j.chain(1, 8).is_none());
        assert_eq!(serials(&j.chain(7, 8).unwrap()), [(7, 8)]);
    }

    #[test]
    fn the_oldest_steps_go_when_the_limit_is_passed() {
        let one = diff_size(&step(1, 2, 10));
        let mut j = Journal::new(2 * one);
        j.record(step(1, 2, 10));
        j.record(step(2, 3, 10));
        assert_eq!(j.len(), 2, "exactly at the limit: both kept");
        j.record(step(3, 4, 10));
        assert_eq!(j.len(), 2);
        assert!(j.chain(1, 4).is_none());
        assert_eq!(serials(&j.chain(2, 4).unwrap()), [(2, 3), (3, 4)]);
        assert!(j.bytes() <= 2 * one);
    }

    #[test]
    fn a_step_larger_than_the_limit_is_not_kept() {
        let mut j = Journal::new(10);
        j.record(step(1, 2, 100));
        assert!(j.is_empty());
        assert_eq!(j.bytes(), 0);
    }

    #[test]
    fn chain_size_counts_records_and_soas() {
        let chain = vec![Arc::new(step(1, 2, 3)), Arc::new(step(2, 3, 0))];
        assert_eq!(chain_records(&chain), 3 + 2 + 2);
    }
}
