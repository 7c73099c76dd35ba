//! The timers of every secondary zone, as a state machine without I/O.
//!
//! [`Timers`] is told what happened and when ([`Event`], with `now`), and
//! answers with what to do ([`Action`]) and when to wake it next
//! ([`Timers::next_wakeup`]). It never reads a clock, touches the network
//! or the disk, nor draws a random number: the jitter comes from a source
//! it is given. The tokio driver ([`crate::secondary::refresh`]) does the
//! I/O and feeds the results back as events; tests drive it with a fake
//! clock.
//!
//! The rules (RFC 1034 4.3.5, RFC 1996):
//!
//! * A kept copy younger than its expire interval is served at start; its
//!   age (the kept file's modification time, the date of its last
//!   successful check) counts against the refresh and expire intervals, so
//!   the timers survive a restart.
//! * A check asks the primaries in order for their SOA serial; a newer one
//!   is transferred (IXFR from the served serial; AXFR when nothing is
//!   served). The first primary that answers ends the check. The check
//!   that answers a NOTIFY from one of the primaries asks that one first,
//!   then the others in order, as BIND and Knot do: the primary that
//!   announced a change has it, where the first may not yet.
//! * After a successful check the next one is a refresh interval on, and
//!   the zone expires an expire interval on. Before a transfer, the kept
//!   file is dated one refresh interval back, so that a restart before it
//!   completes checks again at once; or further back, to the last
//!   successful check, so that a restart never moves the expiry on.
//! * A failed check is retried after a wait that doubles up to the SOA
//!   retry interval, with jitter, and not before its primaries, if they are
//!   all left alone after failing, may be tried again
//!   ([`crate::secondary::backoff`]).
//! * Past the expire interval with no successful check the zone stops
//!   answering (SERVFAIL); a later successful check serves it again.
//! * A NOTIFY starts a check at once, but a zone has at most one check in
//!   flight, and checks started by NOTIFY are at least
//!   [`NOTIFY_CHECK_INTERVAL`] apart: NOTIFYs arriving during a check, or
//!   too soon after the last one, make one more check when it is allowed.
//!   A NOTIFY that announces a serial newer than the one served, while
//!   the zone's checks succeed, is a change to fetch, not part of a
//!   storm: its check starts at once (or as soon as the one in flight
//!   ends), whatever the interval says; unless the last announcement
//!   proved false, then until a check finds a newer serial again.
//!   A NOTIFY does not end a primary's back-off, nor a zone's.
//!
//! Every zone's next wake-up sits in one queue ordered by (when, zone),
//! a binary heap indexed by zone, as in Knot's `zone/events/`, instead
//! of a task per zone.

pub mod backoff;
pub mod notify_out;
mod queue;
mod stamp;
#[cfg(test)]
mod tests;

use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use hashbrown::HashMap;
use heron_zone::Zone;

use crate::growth::reserve_by_eighths;
use crate::serial;
use backoff::retry_delay;
use queue::Queue;
use stamp::{Epoch, Stamp};

/// Bounds on the SOA timers, whatever the primary's SOA says.
#[derive(Clone, Copy, Debug)]
pub struct TimerBounds {
    pub min_refresh: Duration,
    pub max_refresh: Duration,
    pub min_retry: Duration,
    pub max_retry: Duration,
    pub min_expire: Duration,
    pub max_expire: Duration,
}

impl Default for TimerBounds {
    fn default() -> Self {
        TimerBounds {
            min_refresh: Duration::from_secs(30),
            max_refresh: Duration::from_secs(86_400),
            min_retry: Duration::from_secs(5),
            max_retry: Duration::from_secs(3_600),
            // An SOA expire of minutes would turn a short outage of the
            // primary into SERVFAIL; one of years serves data long stale.
            min_expire: Duration::from_secs(3_600),
            max_expire: Duration::from_secs(31_536_000),
        }
    }
}

/// The shortest time between two checks of one zone started by NOTIFY.
pub const NOTIFY_CHECK_INTERVAL: Duration = Duration::from_secs(2);

/// A zone, numbered by whoever adds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ZoneId(pub u32);

/// One check of one zone. Results carry it back, so that the result of a
/// check the machine no longer waits for (its zone removed, or removed and
/// added again) is ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckId(u64);

/// The longest wait between failed checks of a zone that serves nothing
/// yet (its first transfer): a NOTIFY from the primary asks at once.
pub const FIRST_TRANSFER_MAX_WAIT: Duration = Duration::from_secs(120);

/// A zone's refresh, retry and expire intervals, within the bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SoaTimers {
    pub refresh: Duration,
    pub retry: Duration,
    pub expire: Duration,
}

impl SoaTimers {
    /// The intervals of `zone`'s SOA, held within `bounds`.
    pub fn of(zone: &Zone, bounds: TimerBounds) -> SoaTimers {
        let rdata = zone.soa().first_rdata();
        let field = |i: usize| {
            let at = rdata.len() - 20 + 4 * i;
            Duration::from_secs(u32::from_be_bytes(rdata[at..at + 4].try_into().unwrap()) as u64)
        };
        let refresh = field(1).clamp(bounds.min_refresh, bounds.max_refresh);
        let retry = field(2).clamp(bounds.min_retry, bounds.max_retry);
        // Never before one refresh and one retry have had their chance.
        let expire = field(3)
            .clamp(bounds.min_expire, bounds.max_expire)
            .max(refresh + retry);
        SoaTimers {
            refresh,
            retry,
            expire,
        }
    }
}

/// A version of a zone: its serial and its timers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Version {
    pub serial: u32,
    pub timers: SoaTimers,
}

impl Version {
    pub fn of(zone: &Zone, bounds: TimerBounds) -> Version {
        Version {
            serial: zone.serial(),
            timers: SoaTimers::of(zone, bounds),
        }
    }
}

/// Why an exchange with a primary failed, as far as the timers care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Not tried: the primary failed lately and is left alone until then.
    LeftAlone { until: Instant },
    /// Tried, and failed.
    Failed,
}

/// How a transfer ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transfer {
    /// The zone now serves this version (published and kept by the
    /// driver before it says so).
    Received(Version),
    /// The primary has nothing newer.
    UpToDate,
}

/// What happened.
#[derive(Clone, Copy, Debug)]
pub enum Event {
    /// A zone to keep fresh, from `primaries` primaries; `kept` is the copy
    /// on disk, if any, with the time since its last successful check.
    Added {
        zone: ZoneId,
        primaries: usize,
        kept: Option<(Version, Duration)>,
    },
    /// A zone no longer kept fresh; what is in flight for it is ignored.
    Removed(ZoneId),
    /// The wake-up time came.
    TimerFired,
    /// A NOTIFY for the zone, with the serial it carried; from primary
    /// number `primary` (in the zone's order), if from one of them.
    Notify {
        zone: ZoneId,
        serial: Option<u32>,
        primary: Option<usize>,
    },
    /// An operator asks for a check now (`heron ctl refresh`), or, with
    /// `full`, a full transfer now (`heron ctl retransfer`): it starts at
    /// once, or right after the check in flight, whatever the NOTIFY rate
    /// limit says.
    CheckNow { zone: ZoneId, full: bool },
    /// The answer to [`Action::CheckSoa`].
    SoaChecked {
        zone: ZoneId,
        check: CheckId,
        result: Result<u32, Failure>,
        /// The EDNS EXPIRE the answer carried (RFC 7314), in seconds.
        primary_expire: Option<u32>,
    },
    /// The end of [`Action::Transfer`].
    Transferred {
        zone: ZoneId,
        check: CheckId,
        result: Result<Transfer, Failure>,
        /// The EDNS EXPIRE the transfer's first message carried.
        primary_expire: Option<u32>,
    },
}

/// What to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Serve the kept copy read at start.
    ServeKept(ZoneId),
    /// Do not serve the kept copy: it is past its expire time.
    DropKept(ZoneId),
    /// Ask primary number `primary` (in the zone's order) for its serial.
    CheckSoa {
        zone: ZoneId,
        check: CheckId,
        primary: usize,
    },
    /// Transfer the zone from primary number `primary`: IXFR from the
    /// served serial, if there is one, else AXFR.
    Transfer {
        zone: ZoneId,
        check: CheckId,
        primary: usize,
        ixfr_from: Option<u32>,
    },
    /// Stop serving the zone (SERVFAIL): no successful check for its
    /// expire interval.
    Expire(ZoneId),
    /// Date the kept copy `ago` back: to its last successful check (its
    /// expiry counts from there), or, once a newer serial is seen, also at
    /// least a refresh interval back.
    DateKept { zone: ZoneId, ago: Duration },
}

/// A source of jitter: a number spread evenly over `u16`.
pub type Jitter = Box<dyn FnMut() -> u16 + Send>;

/// The timers of every secondary zone.
pub struct Timers {
    zones: Vec<Option<ZoneState>>,
    /// The checks in flight, by zone: few but during a cold start, and
    /// 24 octets that every zone's state would carry otherwise.
    checks: HashMap<ZoneId, Check>,
    /// The primary a NOTIFY came from, by zone, when not the first: the
    /// zone's next check asks it first. Rare, and kept out of the zones'
    /// state, which fits 48 octets.
    notified_by: HashMap<ZoneId, u16>,
    /// The SOA retry (seconds) of the version a zone served when it
    /// expired: its failed checks go on at that pace, not at a first
    /// transfer's (black-box finding AV-3: a primary back after the
    /// expiry was asked again only about 2 minutes later, SERVFAIL
    /// meanwhile; Knot asked within its retry). Rare, kept apart too.
    expired_retry: HashMap<ZoneId, u32>,
    queue: Queue,
    /// What the zones' times are counted from.
    epoch: Epoch,
    /// The retry cap of a zone that serves nothing yet.
    min_retry: Duration,
    jitter: Jitter,
    next_check_id: u64,
}

/// One zone's timers: kept small, there may be 100,000 of them. Its
/// check in flight, if any, is in [`Timers::checks`]; its wake-up in the
/// queue.
#[derive(Debug)]
struct ZoneState {
    primaries: u16,
    serving: Option<Served>,
    next_check: Stamp,
    /// Set while serving.
    expire_at: Option<Stamp>,
    /// Checks failed in a row (u16: the state fits 48 octets).
    failures: u16,
    /// A NOTIFY came that no check has answered yet.
    /// `Some(true)` if one of them announced a serial newer than the one
    /// served then.
    notified: Option<bool>,
    /// The time of the last check a NOTIFY started (or will start).
    notify_check_at: Option<Stamp>,
    /// An operator asked for a check (a full transfer if true) that
    /// starts when the one in flight ends.
    forced: Option<bool>,
    /// A NOTIFY announced a newer serial that no check has looked for.
    news_pending: bool,
    /// The last check looked for a newer serial a NOTIFY announced and
    /// the primary did not have it: announcements are not believed (not
    /// checked at once) until a check finds a newer serial again, so a
    /// flood of NOTIFYs with ever higher serials is checked at the pace
    /// of a storm.
    news_denied: bool,
}

/// The version served, as [`Version`] in whole seconds (the SOA's fields
/// and the bounds are whole seconds): 16 octets instead of 56, and an
/// `Option` of it too (an expire interval is at least a second).
#[derive(Clone, Copy, Debug)]
struct Served {
    serial: u32,
    refresh: u32,
    retry: u32,
    expire: NonZeroU32,
}

impl Served {
    fn of(version: Version) -> Served {
        let secs = |d: Duration| u32::try_from(d.as_secs()).unwrap_or(u32::MAX);
        let SoaTimers {
            refresh,
            retry,
            expire,
        } = version.timers;
        Served {
            serial: version.serial,
            refresh: secs(refresh),
            retry: secs(retry),
            expire: NonZeroU32::new(secs(expire)).unwrap_or(NonZeroU32::MIN),
        }
    }

    fn timers(self) -> SoaTimers {
        let secs = |s: u32| Duration::from_secs(u64::from(s));
        SoaTimers {
            refresh: secs(self.refresh),
            retry: secs(self.retry),
            expire: secs(self.expire.get()),
        }
    }
}

/// A check in flight.
#[derive(Clone, Copy, Debug)]
struct Check {
    id: CheckId,
    /// How many primaries were asked before the one asked now.
    step: u16,
    /// The primary asked first (the one a NOTIFY came from, or the
    /// first); the others follow in order.
    first: u16,
    /// The soonest a primary left alone may be tried, if all are.
    primaries_back: Option<Stamp>,
    all_left_alone: bool,
    /// Transfer the whole zone, without asking for the serial first.
    full: bool,
}

impl Check {
    /// The primary asked now: `first`, then the others in order.
    fn primary(self) -> usize {
        let (step, first) = (usize::from(self.step), usize::from(self.first));
        match step {
            0 => first,
            _ if step <= first => step - 1,
            _ => step,
        }
    }
}

/// What [`Timers::view`] shows of one zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimersView {
    /// The serial served, if any.
    pub serial: Option<u32>,
    /// When the next check starts; None while one is in flight.
    pub next_check: Option<Instant>,
    /// When the zone expires, if it serves.
    pub expire_at: Option<Instant>,
    /// Checks failed in a row.
    pub failures: u32,
}

impl Timers {
    /// `min_retry` caps the retries of a zone that has nothing to serve
    /// (its SOA, with its retry interval, unknown).
    pub fn new(min_retry: Duration, jitter: Jitter) -> Timers {
        Timers {
            zones: Vec::new(),
            checks: HashMap::new(),
            notified_by: HashMap::new(),
            expired_retry: HashMap::new(),
            queue: Queue::default(),
            epoch: Epoch::default(),
            min_retry,
            jitter,
            next_check_id: 0,
        }
    }

    /// A reload's new `min_retry`: from each zone's next retry on.
    pub fn set_min_retry(&mut self, min_retry: Duration) {
        self.min_retry = min_retry;
    }

    pub fn min_retry(&self) -> Duration {
        self.min_retry
    }

    /// A reload's new timer bounds made `version` of the version `zone`
    /// serves: its expiry moves by as much as its expire interval did,
    /// at once (black-box finding BF-8: raised while the primary was
    /// down, it changed nothing until a restart, which is when an
    /// operator raises it). The refresh and retry follow at the next
    /// check, as before.
    /// `at_least`: the time left the new bounds give at the least from
    /// the zone's last good check (a raised `min-expire` lifts an expiry
    /// that a primary's shorter EDNS EXPIRE set).
    pub fn rebound(
        &mut self,
        now: Instant,
        zone: ZoneId,
        version: Version,
        at_least: Option<Duration>,
    ) {
        let now = self.epoch.stamp(now);
        let Some(z) = self.zones.get_mut(zone.0 as usize).and_then(Option::as_mut) else {
            return;
        };
        let Some(served) = z.serving.filter(|s| s.serial == version.serial) else {
            return;
        };
        let (old, new) = (served.timers().expire, version.timers.expire);
        if let Some(at) = z.expire_at {
            let left = at.saturating_duration_since(now);
            let left = match new >= old {
                true => left + (new - old),
                false => left.saturating_sub(old - new),
            };
            let left = at_least.map_or(left, |floor| left.max(floor));
            z.expire_at = Some(now + left);
        }
        z.serving = Some(Served {
            expire: Served::of(version).expire,
            ..served
        });
        self.schedule(zone);
    }

    /// Makes room for `zones` more zones.
    pub fn reserve(&mut self, zones: usize) {
        self.zones.reserve_exact(zones);
        self.queue.reserve(zones);
    }

    /// What the timers of `zone` are, if it is kept fresh.
    pub fn view(&self, zone: ZoneId) -> Option<TimersView> {
        let z = self.state(zone)?;
        let instant = |s| self.epoch.instant(s);
        Some(TimersView {
            serial: z.serving.map(|v| v.serial),
            next_check: (!self.checks.contains_key(&zone)).then(|| instant(z.next_check)),
            expire_at: z.expire_at.map(instant),
            failures: u32::from(z.failures),
        })
    }

    /// When to fire [`Event::TimerFired`] next, if ever.
    pub fn next_wakeup(&self) -> Option<Instant> {
        self.queue.earliest().map(|s| self.epoch.instant(s))
    }

    /// Handles `event`, which happened at `now`; what to do goes to `out`.
    pub fn handle(&mut self, now: Instant, event: Event, out: &mut Vec<Action>) {
        let now = self.epoch.stamp(now);
        match event {
            Event::Added {
                zone,
                primaries,
                kept,
            } => self.add(now, zone, primaries, kept, out),
            Event::Removed(zone) => {
                if let Some(slot) = self.zones.get_mut(zone.0 as usize) {
                    *slot = None;
                }
                self.end_check(zone);
                self.notified_by.remove(&zone);
                self.expired_retry.remove(&zone);
                self.queue.move_to(zone, None);
            }
            Event::TimerFired => {
                while let Some(zone) = self.queue.pop_due(now) {
                    self.wake(now, zone, out);
                }
            }
            Event::Notify {
                zone,
                serial,
                primary,
            } => {
                self.note_notifier(zone, primary);
                self.notified(now, zone, serial, out)
            }
            Event::CheckNow { zone, full } => self.check_now(now, zone, full, out),
            Event::SoaChecked {
                zone,
                check,
                result,
                primary_expire,
            } if self.waits_for(zone, check) => match result {
                Ok(serial) => {
                    let expire = PrimaryExpire::at_least(primary_expire);
                    self.serial_seen(now, zone, serial, expire, out)
                }
                Err(failure) => self.primary_failed(now, zone, failure, out),
            },
            Event::Transferred {
                zone,
                check,
                result,
                primary_expire,
            } if self.waits_for(zone, check) => match result {
                Ok(Transfer::Received(version)) => {
                    self.state_mut(zone).serving = Some(Served::of(version));
                    self.expired_retry.remove(&zone);
                    let expire =
                        primary_expire.map_or(PrimaryExpire::Absent, PrimaryExpire::Follow);
                    self.succeeded(now, zone, expire, out)
                }
                Ok(Transfer::UpToDate) => {
                    let expire = PrimaryExpire::at_least(primary_expire);
                    self.succeeded(now, zone, expire, out)
                }
                Err(failure) => self.primary_failed(now, zone, failure, out),
            },
            // The result of a check no longer awaited.
            Event::SoaChecked { .. } | Event::Transferred { .. } => {}
        }
    }

    fn state(&self, zone: ZoneId) -> Option<&ZoneState> {
        self.zones.get(zone.0 as usize)?.as_ref()
    }

    /// The state of a zone known to exist.
    fn state_mut(&mut self, zone: ZoneId) -> &mut ZoneState {
        self.zones[zone.0 as usize]
            .as_mut()
            .expect("the zone exists")
    }

    /// How long until `zone` expires, while it is served (EDNS EXPIRE,
    /// RFC 7314, counts it down).
    pub fn expires_in(&self, zone: ZoneId, now: Instant) -> Option<Duration> {
        let at = self.state(zone)?.expire_at?;
        Some(at.saturating_duration_since(self.epoch.stamp(now)))
    }

    /// Whether `check` of `zone` is the one in flight, its result awaited.
    pub fn waits_for(&self, zone: ZoneId, check: CheckId) -> bool {
        self.checks.get(&zone).is_some_and(|c| c.id == check)
    }

    /// Takes `zone`'s check in flight out of the table, which shrinks
    /// once it is mostly empty: a cold start puts every zone in it.
    fn end_check(&mut self, zone: ZoneId) -> Option<Check> {
        let check = self.checks.remove(&zone)?;
        let (len, capacity) = (self.checks.len(), self.checks.capacity());
        if capacity > 64 && len * 4 < capacity {
            self.checks.shrink_to(len * 2);
        }
        Some(check)
    }

    fn add(
        &mut self,
        now: Stamp,
        zone: ZoneId,
        primaries: usize,
        kept: Option<(Version, Duration)>,
        out: &mut Vec<Action>,
    ) {
        let mut state = ZoneState {
            primaries: primaries.min(u16::MAX as usize) as u16,
            serving: None,
            next_check: now,
            expire_at: None,
            failures: 0,
            notified: None,
            notify_check_at: None,
            forced: None,
            news_pending: false,
            news_denied: false,
        };
        match kept {
            Some((version, age)) if age < version.timers.expire => {
                out.push(Action::ServeKept(zone));
                state.serving = Some(Served::of(version));
                state.next_check = now + version.timers.refresh.saturating_sub(age);
                state.expire_at = Some(now + (version.timers.expire - age));
            }
            Some(_) => out.push(Action::DropKept(zone)),
            None => {}
        }
        let at = zone.0 as usize;
        if self.zones.len() <= at {
            reserve_by_eighths(&mut self.zones, at + 1);
            self.zones.resize_with(at + 1, || None);
        }
        // A zone added again: what was in flight for it is not awaited.
        self.zones[at] = Some(state);
        self.end_check(zone);
        self.notified_by.remove(&zone);
        self.expired_retry.remove(&zone);
        // A kept copy that expired while the server was down: retried at
        // its SOA retry, as one that expired while it ran (regression
        // hunt AX-9: it backed off as a first transfer).
        if let Some((version, age)) = kept
            && age >= version.timers.expire
        {
            let retry = Served::of(version).retry;
            self.expired_retry.insert(zone, retry);
        }
        self.schedule(zone);
    }

    /// Whatever is due for `zone` at `now`.
    fn wake(&mut self, now: Stamp, zone: ZoneId, out: &mut Vec<Action>) {
        let Some(z) = self.zones.get_mut(zone.0 as usize).and_then(Option::as_mut) else {
            return;
        };
        if z.expire_at.is_some_and(|at| at <= now) {
            if let Some(served) = z.serving.take() {
                self.expired_retry.insert(zone, served.retry);
            }
            z.expire_at = None;
            out.push(Action::Expire(zone));
        }
        if z.next_check <= now && !self.checks.contains_key(&zone) {
            self.start_check(now, zone, out);
        }
        self.schedule(zone);
    }

    /// Remembers that a NOTIFY for `zone` came from primary number
    /// `primary`, for its next check to ask first (the latest NOTIFY's).
    fn note_notifier(&mut self, zone: ZoneId, primary: Option<usize>) {
        let Some(z) = self.state(zone) else {
            return;
        };
        match primary.and_then(|p| u16::try_from(p).ok()) {
            Some(p) if p > 0 && p < z.primaries => {
                self.notified_by.insert(zone, p);
            }
            Some(_) => {
                self.notified_by.remove(&zone);
            }
            None => {}
        }
    }

    fn notified(&mut self, now: Stamp, zone: ZoneId, serial: Option<u32>, out: &mut Vec<Action>) {
        let Some(z) = self.zones.get_mut(zone.0 as usize).and_then(Option::as_mut) else {
            return;
        };
        // Only while checks succeed: a failing primary is not asked
        // again at the pace of the NOTIFYs that name it.
        let serving = z.serving.filter(|_| z.failures == 0);
        let announced =
            serial.is_some_and(|s| serving.is_some_and(|v| serial::is_newer(s, v.serial)));
        z.news_pending |= announced;
        let news = announced && !z.news_denied;
        if self.checks.contains_key(&zone) {
            z.notified = Some(news || z.notified == Some(true));
            return;
        }
        self.notify_check(now, zone, news, out);
    }

    /// A check for a NOTIFY, at once if it announced `news` (a newer
    /// serial), else at most every [`NOTIFY_CHECK_INTERVAL`].
    fn notify_check(&mut self, now: Stamp, zone: ZoneId, news: bool, out: &mut Vec<Action>) {
        let z = self.state_mut(zone);
        let allowed = match z.notify_check_at {
            Some(last) if !news => (last + NOTIFY_CHECK_INTERVAL).max(now),
            _ => now,
        };
        if z.next_check <= allowed {
            // A check comes soon enough anyway.
            if z.next_check <= now {
                self.wake(now, zone, out);
            }
            return;
        }
        z.next_check = allowed;
        z.notify_check_at = Some(allowed);
        if allowed <= now {
            self.wake(now, zone, out);
        } else {
            self.schedule(zone);
        }
    }

    fn check_now(&mut self, now: Stamp, zone: ZoneId, full: bool, out: &mut Vec<Action>) {
        let Some(z) = self.zones.get_mut(zone.0 as usize).and_then(Option::as_mut) else {
            return;
        };
        if self.checks.contains_key(&zone) {
            z.forced = Some(full || z.forced.unwrap_or(false));
            return;
        }
        self.start_check_of(now, zone, full, out);
        self.schedule(zone);
    }

    fn start_check(&mut self, now: Stamp, zone: ZoneId, out: &mut Vec<Action>) {
        self.start_check_of(now, zone, false, out)
    }

    /// Starts a check; with `full`, by transferring the whole zone.
    fn start_check_of(&mut self, now: Stamp, zone: ZoneId, full: bool, out: &mut Vec<Action>) {
        let id = CheckId(self.next_check_id);
        self.next_check_id += 1;
        let check = Check {
            id,
            step: 0,
            first: self.notified_by.remove(&zone).unwrap_or(0),
            primaries_back: None,
            all_left_alone: true,
            full,
        };
        self.checks.insert(zone, check);
        let z = self.state_mut(zone);
        z.notified = None;
        if z.primaries == 0 {
            // Nobody to ask: a failed check, retried as any other.
            return self.check_failed(now, zone, out);
        }
        out.push(ask(zone, z, check));
    }

    /// A primary answered with `serial` (and `expire`, which counts only
    /// if we are up to date: a transfer brings its own).
    fn serial_seen(
        &mut self,
        now: Stamp,
        zone: ZoneId,
        serial: u32,
        expire: PrimaryExpire,
        out: &mut Vec<Action>,
    ) {
        let check = self.checks[&zone];
        let z = self.state_mut(zone);
        let looked_for_news = std::mem::take(&mut z.news_pending);
        let newer = z
            .serving
            .is_none_or(|have| serial::is_newer(serial, have.serial));
        z.news_denied = match newer {
            true => false,
            false => looked_for_news || z.news_denied,
        };
        match z.serving {
            Some(have) if !serial::is_newer(serial, have.serial) => {
                self.succeeded(now, zone, expire, out)
            }
            serving => {
                if let Some(have) = serving {
                    // Should we stop before this transfer completes, a
                    // restart must not wait out the refresh interval; nor
                    // count the expire interval from later than the last
                    // successful check (restarts of a secondary whose
                    // transfers fail pushed its expiry on each time).
                    let timers = have.timers();
                    let left = z.expire_at.map(|at| at.saturating_duration_since(now));
                    let refreshed_ago = timers.expire.saturating_sub(left.unwrap_or_default());
                    out.push(Action::DateKept {
                        zone,
                        ago: timers.refresh.max(refreshed_ago),
                    });
                }
                out.push(Action::Transfer {
                    zone,
                    check: check.id,
                    primary: check.primary(),
                    ixfr_from: serving.map(|v| v.serial),
                });
            }
        }
    }

    /// The primary asked failed: the next one is asked, or the check
    /// failed.
    fn primary_failed(
        &mut self,
        now: Stamp,
        zone: ZoneId,
        failure: Failure,
        out: &mut Vec<Action>,
    ) {
        let left_alone_until = match failure {
            Failure::LeftAlone { until } => Some(self.epoch.stamp(until)),
            Failure::Failed => None,
        };
        let check = self.checks.get_mut(&zone).expect("a check is in flight");
        let z = self.zones[zone.0 as usize]
            .as_ref()
            .expect("the zone exists");
        match left_alone_until {
            Some(until) => {
                check.primaries_back = Some(check.primaries_back.map_or(until, |t| t.min(until)));
            }
            None => check.all_left_alone = false,
        }
        check.step += 1;
        if check.step < z.primaries {
            out.push(ask(zone, z, *check));
        } else {
            self.check_failed(now, zone, out);
        }
    }

    fn check_failed(&mut self, now: Stamp, zone: ZoneId, out: &mut Vec<Action>) {
        let jitter = (self.jitter)();
        let min_retry = self.min_retry;
        let check = self.end_check(zone).expect("a check is in flight");
        let z = self.state_mut(zone);
        z.failures = z.failures.saturating_add(1);
        // A zone serving nothing has no SOA retry: the wait doubles up to
        // FIRST_TRANSFER_MAX_WAIT (a catalog's members listed before their
        // primary has them were asked every 5 s, a connection each).
        let expired = (self.expired_retry.get(&zone))
            .map(|&retry| Duration::from_secs(retry.into()).max(min_retry));
        let z = self.state_mut(zone);
        let cap = (z.serving.map(|v| v.timers().retry).or(expired))
            .unwrap_or(min_retry.max(FIRST_TRANSFER_MAX_WAIT));
        let back = check
            .primaries_back
            .filter(|_| check.all_left_alone)
            .map(|t| t.saturating_duration_since(now));
        z.next_check = now + retry_delay(u32::from(z.failures), back, cap, jitter);
        self.check_ended(now, zone, out);
    }

    fn succeeded(
        &mut self,
        now: Stamp,
        zone: ZoneId,
        expire: PrimaryExpire,
        out: &mut Vec<Action>,
    ) {
        self.end_check(zone);
        let z = self.state_mut(zone);
        z.failures = 0;
        if let Some(served) = z.serving {
            let timers = served.timers();
            let full = timers.expire;
            let left = z.expire_at.map(|at| at.saturating_duration_since(now));
            let expires_in = expire.expires_in(full, left);
            z.next_check = now + check_in(timers.refresh, timers.retry, expires_in);
            z.expire_at = Some(now + expires_in);
            // Dated so that a restart counts the same expire time down
            // (it takes the SOA's expire less the copy's age).
            out.push(Action::DateKept {
                zone,
                ago: full - expires_in,
            });
        }
        self.check_ended(now, zone, out);
    }

    /// A check ended: NOTIFYs that came during it make one more.
    fn check_ended(&mut self, now: Stamp, zone: ZoneId, out: &mut Vec<Action>) {
        let z = self.state_mut(zone);
        if let Some(full) = z.forced.take() {
            z.notified = None;
            self.start_check_of(now, zone, full, out);
        } else if let Some(news) = z.notified.take() {
            let news = news && z.failures == 0 && !z.news_denied;
            self.notify_check(now, zone, news, out);
        }
        self.schedule(zone);
    }

    /// Puts `zone`'s next wake-up in the queue.
    fn schedule(&mut self, zone: ZoneId) {
        let Some(z) = self.zones.get(zone.0 as usize).and_then(Option::as_ref) else {
            return;
        };
        let check_at = (!self.checks.contains_key(&zone)).then_some(z.next_check);
        let wake = match (check_at, z.expire_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.queue.move_to(zone, wake);
    }
}

/// When to check next after a check that succeeded: a refresh interval
/// on, but a retry interval before the zone expires (`expires_in`) when
/// that comes first, so that the zone never expires waiting for a check
/// scheduled past its expiry; never sooner than a retry interval (or
/// the refresh, if shorter). A primary's EDNS EXPIRE shorter than the
/// refresh (the SOA's, or raised by `min-refresh`) made the zone expire,
/// SERVFAIL, until a check scheduled after it (black-box finding BF-9).
fn check_in(refresh: Duration, retry: Duration, expires_in: Duration) -> Duration {
    let soonest = retry.min(refresh);
    refresh.min(expires_in.saturating_sub(retry).max(soonest))
}

/// What a primary's EDNS EXPIRE (RFC 7314 4) makes of the expire timer
/// after a successful check; as Knot applies it (`consume_edns_expire`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PrimaryExpire {
    /// None came: the SOA's expire interval, counted from now.
    Absent,
    /// After a transfer: the zone is the primary's copy and expires with
    /// it, so that a chain of secondaries expires together.
    Follow(u32),
    /// The primary has nothing newer: its time left may extend ours,
    /// never shorten it.
    AtLeast(u32),
}

impl PrimaryExpire {
    fn at_least(seconds: Option<u32>) -> PrimaryExpire {
        seconds.map_or(PrimaryExpire::Absent, PrimaryExpire::AtLeast)
    }

    /// The time left until the zone expires, given the SOA's interval
    /// `full` and what was left before (`left`); never more than `full`.
    fn expires_in(self, full: Duration, left: Option<Duration>) -> Duration {
        let secs = |s: u32| Duration::from_secs(u64::from(s));
        let expires_in = match self {
            PrimaryExpire::Absent => full,
            PrimaryExpire::Follow(s) => secs(s),
            PrimaryExpire::AtLeast(s) => secs(s).max(left.unwrap_or_default()),
        };
        expires_in.min(full)
    }
}

/// The next step of `check`, with its primary: that primary's SOA
/// serial, or, with nothing served to compare with, the transfer itself.
fn ask(zone: ZoneId, z: &ZoneState, check: Check) -> Action {
    let primary = check.primary();
    let (full, check) = (check.full, check.id);
    match z.serving {
        Some(_) if !full => Action::CheckSoa {
            zone,
            check,
            primary,
        },
        _ => Action::Transfer {
            zone,
            check,
            primary,
            ixfr_from: None,
        },
    }
}
