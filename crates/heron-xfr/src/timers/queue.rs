//! Every zone's next wake-up in one ordered set, keyed by (when, zone).

use std::collections::BTreeSet;

use super::ZoneId;
use super::stamp::Stamp;

/// Wake-ups in time order, at most one per zone: moving a zone's wake-up
/// removes its entry and inserts the new one (the zone remembers when it
/// is queued), so no stale entry piles up however often it moves.
#[derive(Default)]
pub(super) struct Queue {
    set: BTreeSet<(Stamp, ZoneId)>,
}

impl Queue {
    /// Moves `zone` from `was` (its entry, if queued) to `at` (none: not
    /// queued).
    pub(super) fn move_to(&mut self, zone: ZoneId, was: Option<Stamp>, at: Option<Stamp>) {
        if was == at {
            return;
        }
        if let Some(was) = was {
            self.set.remove(&(was, zone));
        }
        if let Some(at) = at {
            self.set.insert((at, zone));
        }
    }

    pub(super) fn earliest(&self) -> Option<Stamp> {
        self.set.first().map(|(at, _)| *at)
    }

    /// The next zone due at `now`, if any, taken out of the queue.
    pub(super) fn pop_due(&mut self, now: Stamp) -> Option<ZoneId> {
        match self.set.first() {
            Some((at, _)) if *at <= now => self.set.pop_first().map(|(_, zone)| zone),
            _ => None,
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.set.len()
    }
}
