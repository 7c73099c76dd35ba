//! LOC (RFC 1876): location with size and precision.

use super::fields::Fields;
use super::wire::Wire;
use crate::text::{TextError, Token};

/// The equator and prime meridian, and the reference altitude.
const CENTER: i64 = 1 << 31;
const ALT_ZERO_CM: i64 = 10_000_000;
const MS_PER_DEGREE: i64 = 3_600_000;

/// `d1 [m1 [s1]] N|S d2 [m2 [s2]] E|W alt[m] [siz[m] [hp[m] [vp[m]]]]`.
pub fn parse(f: &mut Fields, out: &mut Vec<u8>) -> Result<(), TextError> {
    let lat = coordinate(f, "latitude", [b'N', b'S'], 90)?;
    let lon = coordinate(f, "longitude", [b'E', b'W'], 180)?;
    let alt_tok = f.next("altitude")?;
    let alt = meters(alt_tok.raw, true)
        .filter(|cm| (-ALT_ZERO_CM..=u32::MAX as i64 - ALT_ZERO_CM).contains(cm))
        .ok_or_else(|| {
            bad(
                alt_tok,
                "altitude",
                "expected meters from -100000.00 to 42849672.95",
            )
        })?;
    let mut precision = [100, 1_000_000, 1_000]; // 1m, 10000m, 10m
    let names = ["size", "horizontal precision", "vertical precision"];
    for (slot, what) in precision.iter_mut().zip(names) {
        let Some(tok) = f.peek() else { break };
        f.next(what)?;
        *slot = meters(tok.raw, false)
            .filter(|&cm| cm <= 9_000_000_000)
            .ok_or_else(|| bad(tok, what, "expected meters from 0 to 90000000.00"))?;
    }
    out.push(0);
    out.extend(precision.map(encode_precision));
    out.extend_from_slice(&(lat as u32).to_be_bytes());
    out.extend_from_slice(&(lon as u32).to_be_bytes());
    out.extend_from_slice(&((alt + ALT_ZERO_CM) as u32).to_be_bytes());
    Ok(())
}

fn bad(tok: &Token, what: &str, hint: &str) -> TextError {
    TextError::new(format!("bad LOC {what} '{}': {hint}", tok.lossy()))
}

/// Degrees, optional minutes and seconds, then the hemisphere letter.
/// Returns the wire value (2^31 plus or minus thousandths of seconds).
fn coordinate(f: &mut Fields, what: &str, hemis: [u8; 2], max_deg: i64) -> Result<i64, TextError> {
    let deg = f.number(&format!("{what} degrees"), max_deg as u64)? as i64;
    let mut ms = deg * MS_PER_DEGREE;
    let hemi_of = |t: &Token| match t.raw {
        [c] => hemis.iter().position(|h| h.eq_ignore_ascii_case(c)),
        _ => None,
    };
    let expected = format!("{} or {}", hemis[0] as char, hemis[1] as char);
    let bad_hemi = |t: &Token| {
        bad(
            t,
            &format!("{what} hemisphere"),
            &format!("expected {expected}"),
        )
    };
    let is_number = |t: &Token| t.raw.first().is_some_and(u8::is_ascii_digit);
    let mut tok = f.next(&format!("{what} hemisphere ({expected})"))?;
    if hemi_of(tok).is_none() && is_number(tok) {
        let min = decimal_fraction(tok.raw, 0).filter(|&m| m < 60);
        ms += min.ok_or_else(|| bad(tok, &format!("{what} minutes"), "expected 0-59"))? * 60_000;
        tok = f.next(&format!("{what} hemisphere ({expected})"))?;
    }
    if hemi_of(tok).is_none() && is_number(tok) {
        let sec = decimal_fraction(tok.raw, 3).filter(|&s| s < 60_000);
        let hint = "expected 0-59.999";
        ms += sec.ok_or_else(|| bad(tok, &format!("{what} seconds"), hint))?;
        tok = f.next(&format!("{what} hemisphere ({expected})"))?;
    }
    let hemi = hemi_of(tok).ok_or_else(|| bad_hemi(tok))?;
    if ms > max_deg * MS_PER_DEGREE {
        return Err(TextError::new(format!(
            "LOC {what} is beyond {max_deg} degrees"
        )));
    }
    Ok(if hemi == 0 { CENTER + ms } else { CENTER - ms })
}

/// `123`, `123.4` or `123.45`, optionally followed by `m`, in centimeters.
fn meters(raw: &[u8], signed: bool) -> Option<i64> {
    let raw = raw
        .strip_suffix(b"m")
        .or_else(|| raw.strip_suffix(b"M"))
        .unwrap_or(raw);
    match raw.strip_prefix(b"-") {
        Some(rest) if signed => decimal_fraction(rest, 2).map(|v| -v),
        _ => decimal_fraction(raw, 2),
    }
}

/// A non-negative decimal with at most `frac` fraction digits, scaled by
/// 10^frac.
fn decimal_fraction(raw: &[u8], frac: usize) -> Option<i64> {
    let (int, fraction) = match raw.iter().position(|&b| b == b'.') {
        Some(dot) => (&raw[..dot], Some(&raw[dot + 1..])),
        None => (raw, None),
    };
    let digits_ok = |s: &[u8]| !s.is_empty() && s.iter().all(u8::is_ascii_digit);
    if !digits_ok(int) || int.len() > 10 {
        return None;
    }
    let mut v: i64 = std::str::from_utf8(int).ok()?.parse().ok()?;
    let fraction = fraction.unwrap_or(b"");
    if fraction.len() > frac || (!fraction.is_empty() && !digits_ok(fraction)) {
        return None;
    }
    // A trailing dot ("23.", "10.m") is read as BIND and Knot read it.
    for k in 0..frac {
        v = v * 10 + fraction.get(k).map_or(0, |d| (d - b'0') as i64);
    }
    Some(v)
}

/// Mantissa and power of ten of a size in centimeters (RFC 1876 section
/// 2); precision beyond the first digit is dropped, as RFC 1876's own code
/// does.
fn encode_precision(cm: i64) -> u8 {
    let mut exp = 0;
    while exp < 9 && cm >= 10i64.pow(exp + 1) {
        exp += 1;
    }
    let man = (cm / 10i64.pow(exp)).min(9) as u8;
    man << 4 | exp as u8
}

/// Checks the 16 octets of version-0 LOC RDATA.
pub fn read<'a>(w: &mut Wire<'a>) -> Result<&'a [u8], TextError> {
    let start = w.pos;
    if w.u8("LOC version")? != 0 {
        return Err(TextError::new("LOC version other than 0"));
    }
    for what in ["size", "horizontal precision", "vertical precision"] {
        let b = w.u8(what)?;
        if b != 0 && (b >> 4 == 0 || b >> 4 > 9 || b & 0xF > 9) {
            return Err(TextError::new(format!("bad LOC {what} octet {b:#04x}")));
        }
    }
    for (what, max) in [("latitude", 90), ("longitude", 180)] {
        let v = w.u32(what)? as i64;
        if (v - CENTER).abs() > max * MS_PER_DEGREE {
            return Err(TextError::new(format!("LOC {what} beyond {max} degrees")));
        }
    }
    w.u32("altitude")?;
    Ok(w.since(start))
}

/// BIND's style: `52 22 23.000 N 4 53 32.000 E -2.00m 0.00m 10000m 10m`.
pub fn format(b: &[u8], out: &mut String) {
    let word = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]) as i64;
    push_coordinate(word(4), ['N', 'S'], out);
    out.push(' ');
    push_coordinate(word(8), ['E', 'W'], out);
    let alt = word(12) - ALT_ZERO_CM;
    let sign = if alt < 0 { "-" } else { "" };
    out.push_str(&format!(
        " {sign}{}.{:02}m",
        alt.abs() / 100,
        alt.abs() % 100
    ));
    for &p in &b[1..4] {
        out.push(' ');
        push_precision(p, out);
    }
}

fn push_coordinate(v: i64, hemis: [char; 2], out: &mut String) {
    let ms = (v - CENTER).abs();
    let hemi = if v >= CENTER { hemis[0] } else { hemis[1] };
    out.push_str(&format!(
        "{} {} {}.{:03} {hemi}",
        ms / MS_PER_DEGREE,
        ms / 60_000 % 60,
        ms / 1000 % 60,
        ms % 1000
    ));
}

fn push_precision(p: u8, out: &mut String) {
    let (man, exp) = ((p >> 4) as u64, (p & 0xF) as u32);
    if exp > 1 {
        out.push_str(&format!("{}m", man * 10u64.pow(exp - 2)));
    } else {
        out.push_str(&format!("0.{:02}m", man * 10u64.pow(exp)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precision_encoding() {
        assert_eq!(encode_precision(0), 0x00);
        assert_eq!(encode_precision(100), 0x12);
        assert_eq!(encode_precision(1_000_000), 0x16);
        assert_eq!(encode_precision(1_000), 0x13);
        assert_eq!(encode_precision(150), 0x12);
        assert_eq!(encode_precision(50), 0x51);
        assert_eq!(encode_precision(9_000_000_000), 0x99);
        let text = |p| {
            let mut s = String::new();
            push_precision(p, &mut s);
            s
        };
        assert_eq!(text(0x00), "0.00m");
        assert_eq!(text(0x51), "0.50m");
        assert_eq!(text(0x12), "1m");
        assert_eq!(text(0x99), "90000000m");
    }

    #[test]
    fn decimals() {
        assert_eq!(decimal_fraction(b"23.5", 3), Some(23_500));
        assert_eq!(decimal_fraction(b"07", 3), Some(7_000));
        assert_eq!(decimal_fraction(b"1.2345", 3), None);
        assert_eq!(decimal_fraction(b"1.", 3), Some(1_000), "as BIND and Knot");
        assert_eq!(decimal_fraction(b".5", 3), None);
        assert_eq!(meters(b"-2.5m", true), Some(-250));
        assert_eq!(meters(b"-2.5m", false), None);
    }
}
