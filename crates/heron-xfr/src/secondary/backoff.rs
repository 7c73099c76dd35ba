//! Waiting after failures, per zone and per primary.
//!
//! A zone whose check failed tries again after [`FIRST_RETRY`], then
//! twice as long after each further failure, up to its SOA retry interval,
//! plus up to a fifth more at random so that zones that failed together
//! spread out. A success starts the count again.
//!
//! A primary that cannot be reached (no connection, or no answer in time)
//! is left alone for a while, its window growing the same way up to
//! [`PRIMARY_MAX_BACKOFF`]: checks of its zones fail at once, with no
//! connection attempted, until the window ends. So when a primary of
//! 100,000 zones goes down, at most the exchanges already under way in
//! each window reach it, not every zone's retry; and its zones wait for it
//! together. An answer from it ends the window. A NOTIFY from its address
//! does not (NOTIFYs are cheap to send, even spoofed), but the check the
//! NOTIFY asks for is let through as a probe (`client::PROBE`), at most
//! one a [`PROBE_EVERY`] per primary: a primary
//! that restarted and NOTIFYs is asked at once, as Knot and BIND ask it,
//! instead of at the end of a window of up to a minute (black-box
//! finding), and spoofed NOTIFYs reach a primary that is down once a
//! second at most, whatever the number of its zones.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::time::Instant;

use crate::timers::backoff::{FIRST_RETRY, PRIMARY_MAX_BACKOFF, exponential, jitter};

/// Fewest time between two probes a primary's NOTIFYs let through.
pub const PROBE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The primaries that failed lately, and until when each is left alone.
#[derive(Default)]
pub struct PrimaryHealth {
    down: Mutex<HashMap<SocketAddr, Down>>,
    /// When each primary last answered (one entry per primary address):
    /// an exchange that failed but began before that failed on its own
    /// (one zone's SOA query unanswered), not for want of the primary,
    /// which opens no window ([`PrimaryHealth::failed_since`]).
    answered_at: Mutex<HashMap<SocketAddr, Instant>>,
}

struct Down {
    /// Windows in a row that ended in another failure.
    failures: u32,
    until: Instant,
    /// Why it failed last: the checks it turns away say so.
    cause: Arc<str>,
    /// When a NOTIFY from it last let a check through (a probe).
    last_probe: Option<Instant>,
}

/// Why a primary is not tried now: until when, and how it last failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeftAlone {
    pub until: Instant,
    pub cause: Arc<str>,
}

impl PrimaryHealth {
    /// Whether `addr` may be tried now; if not, until when and why.
    pub fn admit(&self, addr: SocketAddr, now: Instant) -> Result<(), LeftAlone> {
        match self.down.lock().unwrap().get(&addr) {
            Some(down) if now < down.until => Err(LeftAlone {
                until: down.until,
                cause: down.cause.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// A NOTIFY came from `addr`'s address: whether the check it asks for
    /// goes to it as a probe although it is left alone (none when it is
    /// not, nor when a probe went less than [`PROBE_EVERY`] ago).
    pub fn notified(&self, addr: SocketAddr, now: Instant) -> bool {
        let mut down = self.down.lock().unwrap();
        match down.get_mut(&addr) {
            Some(down)
                if now < down.until && down.last_probe.is_none_or(|at| now >= at + PROBE_EVERY) =>
            {
                down.last_probe = Some(now);
                true
            }
            _ => false,
        }
    }

    /// `addr` could not be reached (`cause`: how): it is left alone until
    /// the returned instant. Failures of exchanges that were already under
    /// way when its window opened do not lengthen it again.
    pub fn failed(&self, addr: SocketAddr, now: Instant, cause: &str) -> Instant {
        let mut down = self.down.lock().unwrap();
        let state = down.entry(addr).or_insert_with(|| Down {
            failures: 0,
            until: now,
            cause: cause.into(),
            last_probe: None,
        });
        if *state.cause != *cause {
            state.cause = cause.into();
        }
        if now >= state.until {
            state.failures += 1;
            let wait = exponential(state.failures, FIRST_RETRY, PRIMARY_MAX_BACKOFF);
            state.until = now + jitter(wait);
        }
        state.until
    }

    /// Whether `addr` failed and has not answered since: down for every
    /// zone, whichever last tried it.
    pub fn is_down(&self, addr: SocketAddr) -> bool {
        self.down.lock().unwrap().contains_key(&addr)
    }

    /// `addr` answered: its zones may try it at once.
    pub fn answered(&self, addr: SocketAddr) {
        self.answered_at
            .lock()
            .unwrap()
            .insert(addr, Instant::now());
        let mut down = self.down.lock().unwrap();
        if !down.is_empty() {
            down.remove(&addr);
        }
    }

    /// An exchange with `addr` that `began` then failed (`cause`): as
    /// [`PrimaryHealth::failed`], unless the primary answered another
    /// exchange since it began. Then it is up and only this exchange
    /// failed: its other zones are not turned away (black-box finding
    /// DC-4: a zone whose SOA queries a primary ignored had that primary's
    /// healthy zones fail unchecked, over and over). None then.
    pub fn failed_since(
        &self,
        addr: SocketAddr,
        began: Instant,
        now: Instant,
        cause: &str,
    ) -> Option<Instant> {
        let answered = self.answered_at.lock().unwrap().get(&addr).copied();
        if answered.is_some_and(|at| at >= began) {
            return None;
        }
        Some(self.failed(addr, now, cause))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    /// A failure of an exchange begun before the primary last answered is
    /// that exchange's: the primary stays up. One begun after is the
    /// primary's.
    #[test]
    fn a_failure_begun_before_an_answer_leaves_the_primary_up() {
        let (health, a) = (PrimaryHealth::default(), addr("192.0.2.1:53"));
        let began = Instant::now() - secs(1);
        health.answered(a);
        let now = Instant::now() + secs(4);
        assert_eq!(health.failed_since(a, began, now, "timed out"), None);
        assert!(health.admit(a, now).is_ok() && !health.is_down(a));
        let later = Instant::now() + secs(1);
        assert!(health.failed_since(a, later, now, "timed out").is_some());
        assert!(health.admit(a, now).is_err(), "no answer since it began");
    }

    #[test]
    fn a_notify_grants_one_probe_a_second() {
        let health = PrimaryHealth::default();
        let (a, b) = (addr("192.0.2.1:53"), addr("192.0.2.2:53"));
        let t0 = Instant::now();
        health.failed(a, t0, "timed out");
        health.failed(a, t0 + secs(2), "timed out");
        let now = t0 + secs(3);
        assert!(health.notified(a, now), "a probe");
        assert!(!health.notified(b, now), "not left alone: no probe needed");
        assert!(
            health.admit(a, now).is_err(),
            "others are still turned away"
        );
        assert!(!health.notified(a, now + secs(1) / 2), "one a second");
        assert!(health.notified(a, now + PROBE_EVERY));
    }

    #[test]
    fn a_failed_primary_is_left_alone_for_growing_windows() {
        let health = PrimaryHealth::default();
        let (a, b) = (addr("192.0.2.1:53"), addr("192.0.2.2:53"));
        let t0 = Instant::now();
        assert_eq!(health.admit(a, t0), Ok(()));
        let until = health.failed(a, t0, "refused");
        assert!(until >= t0 + secs(1) && until <= t0 + secs(1) * 6 / 5);
        let left = LeftAlone {
            until,
            cause: "refused".into(),
        };
        assert_eq!(health.admit(a, t0), Err(left));
        assert_eq!(
            health.admit(b, t0),
            Ok(()),
            "other primaries are not affected"
        );
        // Exchanges under way when it failed fail too: same window.
        assert_eq!(health.failed(a, t0 + secs(1) / 2, "refused"), until);
        // The window over, it is tried again; failing again doubles it.
        assert_eq!(health.admit(a, until), Ok(()));
        let second = health.failed(a, until, "refused");
        assert!(second >= until + secs(2) && second <= until + secs(2) * 6 / 5);
        // Windows stop growing at the cap.
        let mut now = second;
        for _ in 0..20 {
            now = health.failed(a, now, "refused");
        }
        let last = health.failed(a, now, "refused");
        assert!(last - now <= PRIMARY_MAX_BACKOFF * 6 / 5);
        assert!(last - now >= PRIMARY_MAX_BACKOFF);
    }

    /// Issue 44: a zone turned away while its primary is left alone said
    /// only "left alone", hiding why; the window keeps the last cause.
    #[test]
    fn a_window_says_how_the_primary_last_failed() {
        let health = PrimaryHealth::default();
        let a = addr("192.0.2.1:53");
        let now = Instant::now();
        health.failed(a, now, "Connection refused (os error 111)");
        let left = health.admit(a, now).unwrap_err();
        assert_eq!(&*left.cause, "Connection refused (os error 111)");
        health.failed(a, now, "timed out");
        assert_eq!(&*health.admit(a, now).unwrap_err().cause, "timed out");
    }

    #[test]
    fn an_answer_ends_the_window() {
        let health = PrimaryHealth::default();
        let (a, b) = (addr("192.0.2.1:53"), addr("192.0.2.1:5300"));
        let now = Instant::now();
        health.failed(a, now, "refused");
        health.failed(b, now, "refused");
        health.answered(a);
        assert_eq!(health.admit(a, now), Ok(()));
        assert!(health.admit(b, now).is_err(), "only the one that answered");
        // And the count starts again: the next window is the first one.
        let until = health.failed(a, now, "refused");
        assert!(until <= now + secs(1) * 6 / 5);
    }
}
