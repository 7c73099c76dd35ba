//! The SOA serial an update gives the zone (`serial` in the zone's
//! settings), as Knot's `serial-policy`: always later than the current
//! one in RFC 1982 arithmetic, so secondaries take every change.

use std::fmt;
use std::str::FromStr;

use crate::serial::is_newer;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SerialPolicy {
    /// One more than before.
    #[default]
    Increment,
    /// The Unix time of the update, or one more than before if that is
    /// not later.
    UnixTime,
    /// `YYYYMMDDnn` of the update's day (UTC), or one more than before
    /// if that is not later.
    DateSerial,
}

impl SerialPolicy {
    /// The serial after `current`, at `now` (Unix seconds).
    pub fn next(self, current: u32, now: u64) -> u32 {
        let bumped = current.wrapping_add(1);
        let wanted = match self {
            SerialPolicy::Increment => return bumped,
            SerialPolicy::UnixTime => now as u32,
            SerialPolicy::DateSerial => date_serial(now),
        };
        if is_newer(wanted, current) {
            wanted
        } else {
            bumped
        }
    }
}

/// `YYYYMMDD00` for the UTC day of `now`.
fn date_serial(now: u64) -> u32 {
    let (y, m, d) = heron_proto::rdata::civil_from_days((now / 86_400) as i64);
    let value = (y as u64) * 1_000_000 + (m as u64) * 10_000 + (d as u64) * 100;
    value.min(u32::MAX as u64) as u32
}

impl FromStr for SerialPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<SerialPolicy, String> {
        match s {
            "increment" => Ok(SerialPolicy::Increment),
            "unixtime" => Ok(SerialPolicy::UnixTime),
            "dateserial" => Ok(SerialPolicy::DateSerial),
            other => Err(format!(
                "serial = \"{other}\": expected \"increment\", \"unixtime\" or \"dateserial\""
            )),
        }
    }
}

impl fmt::Display for SerialPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SerialPolicy::Increment => "increment",
            SerialPolicy::UnixTime => "unixtime",
            SerialPolicy::DateSerial => "dateserial",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 2026-11-25 12:00:00 UTC.
    const NOW: u64 = 1_795_608_000;

    #[test]
    fn increment_adds_one_and_wraps() {
        assert_eq!(SerialPolicy::Increment.next(7, NOW), 8);
        assert_eq!(SerialPolicy::Increment.next(u32::MAX, NOW), 0);
    }

    #[test]
    fn unixtime_takes_the_clock_unless_behind() {
        assert_eq!(SerialPolicy::UnixTime.next(5, NOW), NOW as u32);
        let ahead = NOW as u32 + 10;
        assert_eq!(SerialPolicy::UnixTime.next(ahead, NOW), ahead + 1);
    }

    #[test]
    fn dateserial_starts_the_day_then_counts() {
        assert_eq!(date_serial(NOW), 2026112500);
        assert_eq!(SerialPolicy::DateSerial.next(2026112401, NOW), 2026112500);
        assert_eq!(SerialPolicy::DateSerial.next(2026112500, NOW), 2026112501);
        assert_eq!(SerialPolicy::DateSerial.next(7, NOW), 2026112500);
    }

    #[test]
    fn names_read_back() {
        for p in [
            SerialPolicy::Increment,
            SerialPolicy::UnixTime,
            SerialPolicy::DateSerial,
        ] {
            assert_eq!(p.to_string().parse::<SerialPolicy>(), Ok(p));
        }
        assert!("date".parse::<SerialPolicy>().is_err());
    }
}
