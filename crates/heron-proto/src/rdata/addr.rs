//! Addresses: IPv4, IPv6, EUI-48/64 (RFC 7043) and ILNP 64-bit values
//! (RFC 6742).

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::text::{TextError, Token, push_decimal};

pub fn parse_ipv4(tok: &Token) -> Result<[u8; 4], TextError> {
    std::str::from_utf8(tok.raw)
        .ok()
        .and_then(|s| s.parse::<Ipv4Addr>().ok())
        .map(|a| a.octets())
        .ok_or_else(|| TextError::new(format!("bad IPv4 address '{}'", tok.lossy())))
}

pub fn parse_ipv6(tok: &Token) -> Result<[u8; 16], TextError> {
    std::str::from_utf8(tok.raw)
        .ok()
        .and_then(|s| s.parse::<Ipv6Addr>().ok())
        .map(|a| a.octets())
        .ok_or_else(|| TextError::new(format!("bad IPv6 address '{}'", tok.lossy())))
}

/// Dotted quad. Written by hand, as the IPv6 form: through `fmt` an
/// address took a third of a zone's text.
pub fn format_ipv4(b: &[u8], out: &mut String) {
    for (i, &octet) in b[..4].iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        push_decimal(out, octet.into());
    }
}

/// RFC 5952 canonical text: lower case, the longest run of two or more zero
/// groups compressed (the first of equal runs), IPv4-mapped addresses as
/// `::ffff:a.b.c.d`; what the standard library writes.
pub fn format_ipv6(b: &[u8], out: &mut String) {
    let octets: [u8; 16] = b.try_into().expect("16 octets");
    let groups: [u16; 8] = std::array::from_fn(|i| u16::from_be_bytes([b[2 * i], b[2 * i + 1]]));
    if groups[..6] == [0, 0, 0, 0, 0, 0xffff] {
        out.push_str("::ffff:");
        return format_ipv4(&octets[12..], out);
    }
    let (zeros_at, zeros) = longest_zero_run(&groups);
    let mut i = 0;
    while i < 8 {
        if zeros >= 2 && i == zeros_at {
            out.push_str("::");
            i += zeros;
            continue;
        }
        if i > 0 && !(zeros >= 2 && i == zeros_at + zeros) {
            out.push(':');
        }
        push_hex(out, groups[i]);
        i += 1;
    }
}

/// Where the longest run of zero groups starts, and its length (the
/// first of equal runs).
fn longest_zero_run(groups: &[u16; 8]) -> (usize, usize) {
    let (mut best, mut run_at, mut run) = ((0, 0), 0, 0);
    for (i, &g) in groups.iter().enumerate() {
        if g != 0 {
            run = 0;
            continue;
        }
        if run == 0 {
            run_at = i;
        }
        run += 1;
        if run > best.1 {
            best = (run_at, run);
        }
    }
    best
}

/// A group in lower-case hex without leading zeros.
fn push_hex(out: &mut String, group: u16) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let shifts = [12, 8, 4, 0];
    let first = shifts.iter().position(|&s| group >> s != 0).unwrap_or(3);
    for &s in &shifts[first..] {
        out.push(char::from(DIGITS[usize::from(group >> s & 0xf)]));
    }
}

/// `xx-xx-...` with exactly `N` groups of two hex digits.
pub fn parse_eui<const N: usize>(tok: &Token) -> Result<[u8; N], TextError> {
    let bad = || {
        TextError::new(format!(
            "bad EUI-{} address '{}': expected {N} groups of two hex digits separated by '-'",
            N * 8,
            tok.lossy()
        ))
    };
    let mut out = [0u8; N];
    let mut groups = tok.raw.split(|&b| b == b'-');
    for slot in out.iter_mut() {
        let g = groups.next().ok_or_else(bad)?;
        if g.len() != 2 {
            return Err(bad());
        }
        *slot = super::encoding::hex_decode(g).ok_or_else(bad)?[0];
    }
    if groups.next().is_some() {
        return Err(bad());
    }
    Ok(out)
}

pub fn format_eui(b: &[u8], out: &mut String) {
    let groups: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    out.push_str(&groups.join("-"));
}

/// Four groups of one to four hex digits separated by `:`.
pub fn parse_ilnp64(tok: &Token) -> Result<[u8; 8], TextError> {
    let bad = || {
        TextError::new(format!(
            "bad 64-bit locator or node ID '{}': expected four groups of hex digits like 0014:4fff:ff20:ee64",
            tok.lossy()
        ))
    };
    let mut out = [0u8; 8];
    let mut groups = tok.raw.split(|&b| b == b':');
    for pair in out.chunks_mut(2) {
        let g = groups.next().ok_or_else(bad)?;
        let s = std::str::from_utf8(g).map_err(|_| bad())?;
        if g.is_empty() || g.len() > 4 || !g.iter().all(u8::is_ascii_hexdigit) {
            return Err(bad());
        }
        let v = u16::from_str_radix(s, 16).map_err(|_| bad())?;
        pair.copy_from_slice(&v.to_be_bytes());
    }
    if groups.next().is_some() {
        return Err(bad());
    }
    Ok(out)
}

pub fn format_ilnp64(b: &[u8], out: &mut String) {
    let groups: Vec<String> = b
        .chunks(2)
        .map(|p| format!("{:04x}", u16::from_be_bytes([p[0], p[1]])))
        .collect();
    out.push_str(&groups.join(":"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v6(s: &str) -> String {
        let b = parse_ipv6(&Token::plain(s.as_bytes())).unwrap();
        let mut out = String::new();
        format_ipv6(&b, &mut out);
        out
    }

    #[test]
    fn ipv6_rfc5952_forms() {
        assert_eq!(v6("2001:DB8:0:0:0:0:2:1"), "2001:db8::2:1");
        assert_eq!(v6("2001:db8:0:1:1:1:1:1"), "2001:db8:0:1:1:1:1:1");
        assert_eq!(v6("2001:0:0:1:0:0:0:1"), "2001:0:0:1::1");
        assert_eq!(v6("2001:db8:0:0:1:0:0:1"), "2001:db8::1:0:0:1");
        assert_eq!(v6("0:0:0:0:0:0:0:0"), "::");
        assert_eq!(v6("::1"), "::1");
        assert_eq!(v6("::ffff:1.2.3.4"), "::ffff:1.2.3.4");
        assert_eq!(v6("::FFFF:0102:0304"), "::ffff:1.2.3.4");
        assert_eq!(
            v6("2001:db8:122:344::192.0.2.33"),
            "2001:db8:122:344::c000:221"
        );
        for bad in [
            "1:2:3",
            "::1::2",
            "1.2.3.4",
            "fe80::1%eth0",
            "12345::",
            ":1:2:3:4:5:6:7",
        ] {
            assert!(parse_ipv6(&Token::plain(bad.as_bytes())).is_err(), "{bad}");
        }
    }

    /// The hand-written forms are the standard library's, on every shape
    /// of zero runs (each group 0, 1 or a wide value) and on mapped and
    /// compatible addresses.
    #[test]
    fn addresses_are_written_as_the_standard_library_writes_them() {
        let values = [0u16, 1, 0xabc, 0xffff];
        for n in 0..4usize.pow(8) {
            let groups: [u16; 8] = std::array::from_fn(|i| values[n / 4usize.pow(i as u32) % 4]);
            let addr = Ipv6Addr::from(groups);
            let mut out = String::new();
            format_ipv6(&addr.octets(), &mut out);
            assert_eq!(out, addr.to_string());
        }
        for v4 in [
            [0, 0, 0, 0],
            [1, 2, 3, 4],
            [255, 255, 255, 255],
            [192, 0, 2, 10],
        ] {
            let (mut a, mut mapped) = (String::new(), String::new());
            format_ipv4(&v4, &mut a);
            assert_eq!(a, Ipv4Addr::from(v4).to_string());
            let addr = Ipv4Addr::from(v4).to_ipv6_mapped();
            format_ipv6(&addr.octets(), &mut mapped);
            assert_eq!(mapped, addr.to_string());
            let compatible = Ipv4Addr::from(v4).to_ipv6_compatible();
            let mut out = String::new();
            format_ipv6(&compatible.octets(), &mut out);
            assert_eq!(out, compatible.to_string());
        }
    }

    #[test]
    fn ipv4_strict() {
        assert_eq!(
            parse_ipv4(&Token::plain(b"192.0.2.1")).unwrap(),
            [192, 0, 2, 1]
        );
        for bad in [
            "1.2.3",
            "1.2.3.4.5",
            "256.1.1.1",
            "01.2.3.4",
            "1.2.3.4 ",
            "",
        ] {
            let e = parse_ipv4(&Token::plain(bad.as_bytes())).unwrap_err();
            assert_eq!(e.0, format!("bad IPv4 address '{bad}'"));
        }
    }

    #[test]
    fn eui_and_ilnp() {
        let t = Token::plain(b"00-00-5E-00-53-2a");
        assert_eq!(parse_eui::<6>(&t).unwrap(), [0, 0, 0x5e, 0, 0x53, 0x2a]);
        assert!(parse_eui::<6>(&Token::plain(b"00-00-5e-00-53")).is_err());
        assert!(parse_eui::<6>(&Token::plain(b"00-00-5e-00-53-2a-01")).is_err());
        assert!(parse_eui::<8>(&Token::plain(b"0-00-5e-00-53-2a-01-02")).is_err());
        let t = Token::plain(b"14:4fff:FF20:ee64");
        let b = parse_ilnp64(&t).unwrap();
        let mut s = String::new();
        format_ilnp64(&b, &mut s);
        assert_eq!(s, "0014:4fff:ff20:ee64");
        assert!(parse_ilnp64(&Token::plain(b"1:2:3")).is_err());
        assert!(parse_ilnp64(&Token::plain(b"1:2:3:4:5")).is_err());
        assert!(parse_ilnp64(&Token::plain(b"1:2:3:12345")).is_err());
    }
}
