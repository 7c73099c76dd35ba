//! What the refresh driver logs of its zones' exchanges, bounded per
//! primary. When a primary of 100,000 zones is down (or a catalog lists
//! 100,000 members of one), every zone fails alike: a line each would be
//! 100,000 lines a minute that an outsider can cause. So in each window
//! of [`WINDOW`] per primary the first [`FIRST_LINES`] zones of each kind
//! (failed, working again, expired) get a line of their own, the rest
//! counted and told in one line when the window ends, with the checks
//! left alone meanwhile (not tried: the primary failed lately). Checks
//! are counted, not zones: a zone retries within a window. Each
//! zone's own state stays in `heron ctl zone-status`.

use std::collections::HashMap;
use std::fmt::Write;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// How long a window of lines about one primary lasts.
pub const WINDOW: Duration = Duration::from_secs(10);
/// Zones of each kind given a line of their own per primary per window.
pub const FIRST_LINES: u32 = 5;

/// What happened to one zone's exchange with a primary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Tried, and failed.
    Failed,
    /// Not tried: the primary is left alone after failing.
    LeftAlone,
    /// Answered after failing.
    Recovered,
    /// Past its expire time with no answer: the zone answers SERVFAIL
    /// (zones transferred together expire together).
    Expired,
}

/// One primary's window.
#[derive(Debug)]
struct Window {
    opened: Instant,
    /// Lines written, by [`Event::Failed`] and [`Event::Recovered`].
    failed_written: u32,
    recovered_written: u32,
    expired_written: u32,
    /// Events not given a line of their own.
    failed: u64,
    left_alone: u64,
    recovered: u64,
    expired: u64,
    /// The last failure counted, for the summary.
    last_failure: Option<String>,
}

impl Window {
    fn new(opened: Instant) -> Window {
        Window {
            opened,
            failed_written: 0,
            recovered_written: 0,
            expired_written: 0,
            failed: 0,
            left_alone: 0,
            recovered: 0,
            expired: 0,
            last_failure: None,
        }
    }

    fn counted_any(&self) -> bool {
        self.failed + self.left_alone + self.recovered + self.expired > 0
    }
}

/// The windows open, by primary.
#[derive(Debug, Default)]
pub struct PrimaryLog {
    windows: HashMap<SocketAddr, Window>,
}

/// A summary due: the line and how grave what it tells is.
#[derive(Debug, PartialEq, Eq)]
pub struct Summary {
    /// The primary the window was about (a field of its log line).
    pub primary: SocketAddr,
    pub line: String,
    pub level: Level,
}

/// The level of a summary: its gravest event's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// Zones work again.
    Info,
    /// Checks failed or were not tried.
    Warn,
    /// Zones expired.
    Error,
}

impl PrimaryLog {
    /// Notes `event` for a zone of `primary` at `now`: true if the zone
    /// gets a line of its own (the caller writes it). A window that ended
    /// is summarised first (returned).
    pub fn note(
        &mut self,
        primary: SocketAddr,
        event: Event,
        failure: Option<&str>,
        now: Instant,
    ) -> (bool, Option<Summary>) {
        let ended = match self.windows.get(&primary) {
            Some(w) if now.saturating_duration_since(w.opened) >= WINDOW => self
                .windows
                .remove(&primary)
                .and_then(|w| summary(primary, &w, now)),
            _ => None,
        };
        let window = (self.windows)
            .entry(primary)
            .or_insert_with(|| Window::new(now));
        let own_line = match event {
            Event::Failed => take_line(&mut window.failed_written),
            Event::Recovered => take_line(&mut window.recovered_written),
            Event::Expired => take_line(&mut window.expired_written),
            Event::LeftAlone => false,
        };
        if !own_line {
            match event {
                Event::Failed => window.failed += 1,
                Event::LeftAlone => window.left_alone += 1,
                Event::Recovered => window.recovered += 1,
                Event::Expired => window.expired += 1,
            }
            if let Some(failure) = failure.filter(|_| event == Event::Failed) {
                window.last_failure = Some(failure.to_string());
            }
        }
        (own_line, ended)
    }

    /// When the next window with something counted ends.
    pub fn next_summary(&self) -> Option<Instant> {
        (self.windows.values())
            .filter(|w| w.counted_any())
            .map(|w| w.opened + WINDOW)
            .min()
    }

    /// The summaries of the windows ended by `now`; those windows close.
    pub fn ended(&mut self, now: Instant) -> Vec<Summary> {
        let mut due = Vec::new();
        self.windows.retain(|&primary, w| {
            let open = now.saturating_duration_since(w.opened) < WINDOW;
            if !open {
                due.extend(summary(primary, w, now));
            }
            open
        });
        due
    }
}

/// One more line of a kind, if the window has one left.
fn take_line(written: &mut u32) -> bool {
    let left = *written < FIRST_LINES;
    *written += u32::from(left);
    left
}

/// The line that tells what `window` counted, if it counted anything.
fn summary(primary: SocketAddr, w: &Window, now: Instant) -> Option<Summary> {
    if !w.counted_any() {
        return None;
    }
    let secs = now.saturating_duration_since(w.opened).as_secs().max(1);
    let mut line = format!("refresh from {primary}, in the last {secs} s:");
    let mut parts = Vec::new();
    if w.failed > 0 {
        let mut part = format!(" {} more checks failed", w.failed);
        if let Some(last) = &w.last_failure {
            let _ = write!(part, " (last: {last})");
        }
        parts.push(part);
    }
    if w.left_alone > 0 {
        parts.push(format!(
            " {} checks not tried (it failed lately and is left alone)",
            w.left_alone
        ));
    }
    if w.recovered > 0 {
        parts.push(format!(" {} more zones work again", w.recovered));
    }
    if w.expired > 0 {
        parts.push(format!(
            " {} more zones expired (answering SERVFAIL)",
            w.expired
        ));
    }
    line.push_str(&parts.join(";"));
    line.push_str("; each zone's state: heron ctl zone-status");
    let level = match () {
        _ if w.expired > 0 => Level::Error,
        _ if w.failed + w.left_alone > 0 => Level::Warn,
        _ => Level::Info,
    };
    Some(Summary {
        primary,
        line,
        level,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn primary() -> SocketAddr {
        "192.0.2.1:53".parse().unwrap()
    }

    #[test]
    fn the_first_zones_of_a_window_get_a_line_the_rest_one_summary() {
        let mut log = PrimaryLog::default();
        let t0 = Instant::now();
        let mut own = 0;
        for i in 0..100_000u32 {
            let event = if i < 1_000 {
                Event::Failed
            } else {
                Event::LeftAlone
            };
            let at = t0 + Duration::from_micros(u64::from(i));
            let (line, ended) = log.note(primary(), event, Some("refused"), at);
            own += usize::from(line);
            assert_eq!(ended, None);
        }
        assert_eq!(own, FIRST_LINES as usize);
        assert_eq!(log.next_summary(), Some(t0 + WINDOW));
        assert!(log.ended(t0 + WINDOW - Duration::from_millis(1)).is_empty());
        let due = log.ended(t0 + WINDOW);
        let want = format!(
            "refresh from 192.0.2.1:53, in the last 10 s: {} more checks failed (last: refused); \
             99000 checks not tried (it failed lately and is left alone); \
             each zone's state: heron ctl zone-status",
            1_000 - FIRST_LINES
        );
        assert_eq!(
            due,
            [Summary {
                primary: primary(),
                line: want,
                level: Level::Warn
            }]
        );
        // The next window starts afresh.
        assert_eq!(log.next_summary(), None);
        let (line, _) = log.note(primary(), Event::Failed, None, t0 + WINDOW * 2);
        assert!(line);
    }

    #[test]
    fn a_window_ended_is_told_when_the_next_event_comes_first() {
        let mut log = PrimaryLog::default();
        let t0 = Instant::now();
        for _ in 0..=FIRST_LINES {
            log.note(primary(), Event::Recovered, None, t0);
        }
        let (line, ended) = log.note(primary(), Event::Recovered, None, t0 + WINDOW);
        assert!(line, "a new window");
        let ended = ended.expect("the summary of the one before");
        assert!(ended.line.contains(" 1 more zones work again"), "{ended:?}");
        assert_eq!(ended.level, Level::Info);
    }

    #[test]
    fn zones_expiring_together_are_counted_and_told_as_errors() {
        let mut log = PrimaryLog::default();
        let t0 = Instant::now();
        let own = (0..1_000)
            .filter(|_| log.note(primary(), Event::Expired, None, t0).0)
            .count();
        assert_eq!(own, FIRST_LINES as usize);
        let due = log.ended(t0 + WINDOW);
        assert_eq!(due[0].level, Level::Error);
        let more = format!(" {} more zones expired", 1_000 - FIRST_LINES);
        assert!(due[0].line.contains(&more), "{due:?}");
    }

    #[test]
    fn primaries_have_windows_of_their_own() {
        let mut log = PrimaryLog::default();
        let t0 = Instant::now();
        let other: SocketAddr = "192.0.2.2:53".parse().unwrap();
        for _ in 0..FIRST_LINES {
            assert!(log.note(primary(), Event::Failed, None, t0).0);
        }
        assert!(!log.note(primary(), Event::Failed, None, t0).0);
        assert!(log.note(other, Event::Failed, None, t0).0);
        // A window with nothing counted ends without a line.
        assert_eq!(log.ended(t0 + WINDOW).len(), 1);
    }
}
