//! Making room across event loops: at the total connection limit, a loop
//! with no idle connection of its own takes the newcomer in over the limit
//! and asks the next loop to close its connection idle the longest; one
//! with none passes the request on, until every loop was asked. Without
//! it, idle connections held on one loop refused every newcomer the
//! kernel gave another (`SO_REUSEPORT` spreads them by address and port,
//! which a client chooses: black-box finding DM-1).
//!
//! What is taken in over the limit is bounded: at most one connection per
//! loop at a time is waiting for its room, so the total never passes
//! `max-connections` by more than the number of loops, and a request no
//! loop could meet (none idle anywhere) is given up, its connection
//! counted until it closes as any other.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The requests between the loops of one server.
pub(super) struct ShedBoard {
    /// Per loop: its requests, each the number of loops still to ask
    /// after it (itself included).
    wanted: Vec<Mutex<Vec<usize>>>,
    /// Each loop's waker, set once every loop is made.
    wakers: OnceLock<Vec<Arc<mio::Waker>>>,
    /// Connections taken in over the limit whose room is still asked for.
    lent: AtomicUsize,
}

impl ShedBoard {
    pub(super) fn new(loops: usize) -> Arc<ShedBoard> {
        Arc::new(ShedBoard {
            wanted: (0..loops).map(|_| Mutex::default()).collect(),
            wakers: OnceLock::new(),
            lent: AtomicUsize::new(0),
        })
    }

    pub(super) fn set_wakers(&self, wakers: Vec<Arc<mio::Waker>>) {
        let _ = self.wakers.set(wakers);
    }

    /// How many connections may be over the total limit at once.
    pub(super) fn lend_limit(&self) -> usize {
        self.wanted.len()
    }

    /// Reserves room over the limit for one newcomer of loop `from`, or
    /// false: a single loop, or every loan still out.
    pub(super) fn try_lend(&self, from: usize) -> bool {
        if self.wanted.len() < 2 || from >= self.wanted.len() {
            return false;
        }
        let limit = self.lend_limit();
        (self.lent)
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |lent| {
                (lent < limit).then_some(lent + 1)
            })
            .is_ok()
    }

    /// The reservation of [`ShedBoard::try_lend`] not used (the newcomer
    /// was refused after all).
    pub(super) fn unlend(&self) {
        self.settled();
    }

    /// Asks the loop after `from` to close an idle connection for a
    /// newcomer `from` took in over the limit.
    pub(super) fn ask_after(&self, from: usize) {
        self.pass_on(from, self.wanted.len() - 1);
    }

    /// Hands a request with `left` loops still to ask to the loop after
    /// `from`, and wakes it.
    fn pass_on(&self, from: usize, left: usize) {
        let next = (from + 1) % self.wanted.len();
        let mut wanted = self.wanted[next].lock().unwrap_or_else(|e| e.into_inner());
        wanted.push(left);
        drop(wanted);
        if let Some(waker) = self.wakers.get().and_then(|w| w.get(next)) {
            let _ = waker.wake();
        }
    }

    /// Takes loop `at`'s requests and answers each: `close_idle` closes
    /// one of its idle connections, if it has one; else the request goes
    /// on to the next loop, or, every loop asked, is given up.
    pub(super) fn answer(&self, at: usize, mut close_idle: impl FnMut() -> bool) {
        let Some(slot) = self.wanted.get(at) else {
            return;
        };
        let requests = std::mem::take(&mut *slot.lock().unwrap_or_else(|e| e.into_inner()));
        for left in requests {
            if close_idle() || left <= 1 {
                self.settled();
            } else {
                self.pass_on(at, left - 1);
            }
        }
    }

    fn settled(&self) {
        let _ = (self.lent).fetch_update(Ordering::AcqRel, Ordering::Acquire, |lent| {
            Some(lent.saturating_sub(1))
        });
    }

    #[cfg(test)]
    pub(super) fn lent(&self) -> usize {
        self.lent.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request goes round the loops until one closes an idle
    /// connection; with none anywhere it is given up after each was
    /// asked once. Loans are bounded by the number of loops.
    #[test]
    fn requests_go_round_until_met_or_every_loop_was_asked() {
        let board = ShedBoard::new(3);
        assert!(board.try_lend(0));
        board.ask_after(0);
        // Loop 1 has none idle: on to loop 2, which has one.
        board.answer(1, || false);
        assert_eq!(board.lent(), 1);
        let mut closed = 0;
        board.answer(2, || {
            closed += 1;
            true
        });
        assert_eq!((closed, board.lent()), (1, 0));
        // None idle anywhere: the other loops, 2 then 0, asked once each
        // (1 found none itself), then given up.
        assert!(board.try_lend(1));
        board.ask_after(1);
        board.answer(2, || false);
        assert_eq!(board.lent(), 1);
        board.answer(0, || false);
        assert_eq!(board.lent(), 0);
        for at in 0..3 {
            board.answer(at, || panic!("nothing left to ask"));
        }
    }

    #[test]
    fn loans_are_bounded_and_a_single_loop_lends_none() {
        let board = ShedBoard::new(2);
        assert!(board.try_lend(0) && board.try_lend(1));
        assert!(!board.try_lend(0), "two loops, two loans at most");
        board.unlend();
        assert!(board.try_lend(0));
        assert!(!ShedBoard::new(1).try_lend(0));
        assert!(!board.try_lend(7), "no such loop");
    }
}
