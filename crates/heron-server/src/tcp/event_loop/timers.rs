//! Connection deadlines of one event loop, I/O-free (the clock is passed
//! in). A connection's deadline moves on with every message, so it is
//! not put in the heap each time: an entry is pushed only when the
//! deadline comes earlier than the one armed, and an entry that fires
//! before the deadline (it moved on since) is armed again at it. A busy
//! connection costs about one heap push per idle timeout.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

/// A connection as the timers know it: its slot and the generation of
/// the slot (a slot reused by a later connection has a new one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Key {
    pub(super) slot: usize,
    pub(super) generation: u32,
}

/// The timer state a connection keeps.
#[derive(Default, Debug)]
pub(super) struct Deadline {
    /// When the connection is to be closed, if nothing happens; None: no
    /// deadline of the loop's (a transfer's task bounds its own waits).
    pub(super) at: Option<Instant>,
    /// The earliest entry of this connection in the heap.
    armed: Option<Instant>,
}

#[derive(Default)]
pub(super) struct Timers {
    heap: BinaryHeap<Reverse<(Instant, Key)>>,
}

impl Timers {
    /// Makes sure the heap fires at or before `deadline.at`.
    pub(super) fn arm(&mut self, key: Key, deadline: &mut Deadline) {
        let Some(at) = deadline.at else { return };
        if deadline.armed.is_none_or(|armed| at < armed) {
            self.heap.push(Reverse((at, key)));
            deadline.armed = Some(at);
        }
    }

    /// When the loop must wake next, if any entry is waiting.
    pub(super) fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((at, _))| *at)
    }

    /// The next entry due at `now`, taken from the heap; the caller
    /// looks its connection up and hands it to [`Timers::fire`].
    pub(super) fn pop_due(&mut self, now: Instant) -> Option<(Instant, Key)> {
        match self.heap.peek() {
            Some(&Reverse((at, key))) if at <= now => {
                self.heap.pop();
                Some((at, key))
            }
            _ => None,
        }
    }

    /// Whether the entry `at` means the connection's deadline has passed
    /// (close it). A stale entry (an earlier one was pushed since) says
    /// no; one that fired before the deadline moved on is armed again.
    pub(super) fn fire(
        &mut self,
        at: Instant,
        key: Key,
        deadline: &mut Deadline,
        now: Instant,
    ) -> bool {
        if deadline.armed != Some(at) {
            return false;
        }
        deadline.armed = None;
        match deadline.at {
            Some(d) if d <= now => true,
            _ => {
                self.arm(key, deadline);
                false
            }
        }
    }

    /// Hands back what a peak of connections left the heap holding.
    pub(super) fn shrink(&mut self) {
        let (len, capacity) = (self.heap.len(), self.heap.capacity());
        if capacity > 1024 && len < capacity / 4 {
            self.heap.shrink_to(len * 2);
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const K: Key = Key {
        slot: 3,
        generation: 1,
    };

    fn due(timers: &mut Timers, deadline: &mut Deadline, now: Instant) -> bool {
        let mut closed = false;
        while let Some((at, key)) = timers.pop_due(now) {
            closed |= timers.fire(at, key, deadline, now);
        }
        closed
    }

    #[test]
    fn a_deadline_moved_later_costs_no_push_and_fires_at_its_end() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let (mut timers, mut d) = (Timers::default(), Deadline::default());
        d.at = Some(t0 + 10 * s);
        timers.arm(K, &mut d);
        for i in 1..100 {
            d.at = Some(t0 + 10 * s + i * Duration::from_millis(10));
            timers.arm(K, &mut d);
        }
        assert_eq!(timers.len(), 1, "later deadlines push nothing");
        assert!(
            !due(&mut timers, &mut d, t0 + 10 * s),
            "moved on: armed again"
        );
        assert_eq!(timers.next(), d.at);
        let end = d.at.unwrap();
        assert!(due(&mut timers, &mut d, end), "at the deadline");
    }

    #[test]
    fn an_earlier_deadline_fires_first_and_the_stale_entry_is_ignored() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let (mut timers, mut d) = (Timers::default(), Deadline::default());
        d.at = Some(t0 + 10 * s);
        timers.arm(K, &mut d);
        d.at = Some(t0 + 5 * s);
        timers.arm(K, &mut d);
        assert_eq!(timers.next(), Some(t0 + 5 * s));
        assert!(due(&mut timers, &mut d, t0 + 5 * s));
        // The connection went on (its deadline moved): the old entry at
        // 10 s is stale and closes nothing.
        d.at = Some(t0 + 20 * s);
        assert!(!due(&mut timers, &mut d, t0 + 10 * s));
        assert_eq!(timers.len(), 0, "nothing armed after a fired entry");
    }

    #[test]
    fn no_deadline_arms_nothing() {
        let (mut timers, mut d) = (Timers::default(), Deadline::default());
        timers.arm(K, &mut d);
        assert_eq!(timers.next(), None);
    }
}
