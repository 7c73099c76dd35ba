//! Time values: TTL-style periods (`1h30m`, `2w`) and RRSIG timestamps
//! (`YYYYMMDDHHmmSS`, RFC 4034 section 3.2).

/// A period: plain seconds, or numbers each followed by a unit
/// (w, d, h, m, s; either case), as BIND accepts for TTLs and SOA timers.
pub fn parse_period(raw: &[u8]) -> Option<u32> {
    if !raw.is_empty() && raw.iter().all(u8::is_ascii_digit) {
        return u32::try_from(super::fields::decimal(raw, u32::MAX as u64).ok()?).ok();
    }
    let mut total: u64 = 0;
    let mut rest = raw;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        let unit = *rest.get(digits)?;
        if digits == 0 || digits > 10 {
            return None;
        }
        let n: u64 = std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()?;
        let scale = match unit.to_ascii_lowercase() {
            b'w' => 604_800,
            b'd' => 86_400,
            b'h' => 3_600,
            b'm' => 60,
            b's' => 1,
            _ => return None,
        };
        total += n * scale;
        if total > u32::MAX as u64 {
            return None;
        }
        rest = &rest[digits + 1..];
    }
    Some(total as u32)
}

/// Days since 1970-01-01 of a civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date (year, month, day) of a day count since 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// An RRSIG time: `YYYYMMDDHHmmSS` (UTC, reduced modulo 2^32 as RFC 4034
/// 3.1.5 describes) or a plain number of seconds since 1970.
pub fn parse_sig_time(raw: &[u8]) -> Result<u32, String> {
    if raw.len() != 14 {
        return super::fields::decimal(raw, u32::MAX as u64)
            .map(|v| v as u32)
            .map_err(|_| "expected YYYYMMDDHHmmSS or seconds since 1970".to_string());
    }
    if !raw.iter().all(u8::is_ascii_digit) {
        return Err("expected YYYYMMDDHHmmSS or seconds since 1970".into());
    }
    let num = |a: usize, b: usize| -> i64 {
        raw[a..b]
            .iter()
            .fold(0, |acc, d| acc * 10 + (d - b'0') as i64)
    };
    let (y, mo, d) = (num(0, 4), num(4, 6), num(6, 8));
    let (h, mi, s) = (num(8, 10), num(10, 12), num(12, 14));
    if y < 1970 || !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) {
        return Err("no such date (years from 1970)".into());
    }
    if h > 23 || mi > 59 || s > 59 {
        return Err("no such time of day".into());
    }
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s;
    Ok(secs as u64 as u32)
}

/// Writes a time as `YYYYMMDDHHmmSS`, taking the value as seconds since 1970.
pub fn format_sig_time(t: u32, out: &mut String) {
    let t = t as i64;
    let (y, mo, d) = civil_from_days(t.div_euclid(86_400));
    let secs = t.rem_euclid(86_400);
    // Digit by digit: a `format!` here was a tenth of writing a signed
    // zone as text (callgrind), two times in every RRSIG.
    let mut digits = |value: i64, width: u32| {
        for place in (0..width).rev() {
            out.push(char::from(b'0' + (value / 10_i64.pow(place) % 10) as u8));
        }
    };
    digits(y, 4);
    digits(mo, 2);
    digits(d, 2);
    digits(secs / 3600, 2);
    digits(secs / 60 % 60, 2);
    digits(secs % 60, 2);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods() {
        assert_eq!(parse_period(b"3600"), Some(3600));
        assert_eq!(parse_period(b"1h30m"), Some(5400));
        assert_eq!(parse_period(b"2w"), Some(1_209_600));
        assert_eq!(
            parse_period(b"1W2D3H4M5S"),
            Some(604_800 + 2 * 86_400 + 3 * 3600 + 245)
        );
        assert_eq!(parse_period(b"4294967295"), Some(u32::MAX));
        assert_eq!(parse_period(b"4294967296"), None);
        assert_eq!(parse_period(b"7102w"), None);
        for bad in ["", "h", "1h30", "1x", "-1", "1.5h"] {
            assert_eq!(parse_period(bad.as_bytes()), None, "{bad}");
        }
    }

    fn fmt(t: u32) -> String {
        let mut s = String::new();
        format_sig_time(t, &mut s);
        s
    }

    #[test]
    fn sig_times() {
        // RFC 4034 3.3: 20030322173103 is 1048354263.
        assert_eq!(parse_sig_time(b"20030322173103"), Ok(1_048_354_263));
        assert_eq!(fmt(1_048_354_263), "20030322173103");
        assert_eq!(parse_sig_time(b"19700101000000"), Ok(0));
        assert_eq!(fmt(0), "19700101000000");
        assert_eq!(fmt(u32::MAX), "21060207062815");
        assert_eq!(parse_sig_time(b"21060207062815"), Ok(u32::MAX));
        assert_eq!(parse_sig_time(b"20240229120000"), Ok(1_709_208_000));
        assert_eq!(parse_sig_time(b"1048354263"), Ok(1_048_354_263));
        for bad in [
            "20230229120000",
            "20231301000000",
            "20230101246000",
            "19691231235959",
            "2023x101000000",
        ] {
            assert!(parse_sig_time(bad.as_bytes()).is_err(), "{bad}");
        }
    }
}
