//! Network address prefixes (`192.0.2.0/24`, `2001:db8::/32`, a single
//! address): what access lists, rate limiting and connection limits
//! group clients by.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// An address prefix such as `192.0.2.0/24`, `2001:db8::/32` or a single
/// address (`127.0.0.1`, meaning /32 or /128).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix {
    addr: IpAddr,
    len: u8,
}

impl Prefix {
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, canonical(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                leading_equal(&net.octets(), &ip.octets(), self.len)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                leading_equal(&net.octets(), &ip.octets(), self.len)
            }
            _ => false,
        }
    }

    /// Whether the prefix is of IPv4 addresses.
    pub fn is_ipv4(&self) -> bool {
        self.addr.is_ipv4()
    }

    /// The prefix length: 32 or 128 for one address.
    pub fn bits(&self) -> u8 {
        self.len
    }
}

/// An IPv4-mapped IPv6 address (from a dual-stack socket) as IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Whether the first `bits` bits of `a` and `b` agree.
fn leading_equal(a: &[u8], b: &[u8], bits: u8) -> bool {
    let whole = bits as usize / 8;
    if a[..whole] != b[..whole] {
        return false;
    }
    let rest = bits % 8;
    rest == 0 || {
        let mask = 0xFFu8 << (8 - rest);
        a[whole] & mask == b[whole] & mask
    }
}

impl FromStr for Prefix {
    type Err = String;

    fn from_str(s: &str) -> Result<Prefix, String> {
        let (addr, len) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| format!("`{s}` is not an IP address or prefix"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            None => max,
            Some(l) => l
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|&l| l <= max)
                .ok_or_else(|| format!("`{s}`: prefix length must be 0 to {max}"))?,
        };
        Ok(mapped_as_ipv4(Prefix { addr, len }))
    }
}

/// A prefix of IPv4-mapped addresses (`::ffff:192.0.2.0/120`) as the IPv4
/// prefix it covers: clients are matched as IPv4 ([`canonical`]), so as
/// written it would match none of them.
fn mapped_as_ipv4(p: Prefix) -> Prefix {
    match p.addr {
        IpAddr::V6(v6) if p.len >= 96 => match v6.to_ipv4_mapped() {
            Some(v4) => Prefix {
                addr: IpAddr::V4(v4),
                len: p.len - 96,
            },
            None => p,
        },
        _ => p,
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn prefixes_match_by_leading_bits() {
        let p: Prefix = "192.0.2.128/25".parse().unwrap();
        assert!(p.contains(ip("192.0.2.200")));
        assert!(!p.contains(ip("192.0.2.127")));
        let p: Prefix = "2001:db8::/32".parse().unwrap();
        assert!(p.contains(ip("2001:db8:ffff::1")));
        assert!(!p.contains(ip("2001:db9::1")));
        assert!(!p.contains(ip("192.0.2.1")), "families never match");
        let all: Prefix = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("203.0.113.9")));
    }

    #[test]
    fn a_bare_address_is_a_host_prefix() {
        let p: Prefix = "127.0.0.2".parse().unwrap();
        assert!(p.contains(ip("127.0.0.2")));
        assert!(!p.contains(ip("127.0.0.3")));
        assert_eq!(p.to_string(), "127.0.0.2/32");
    }

    #[test]
    fn mapped_ipv4_clients_match_ipv4_prefixes() {
        let p: Prefix = "127.0.0.0/8".parse().unwrap();
        assert!(p.contains(ip("::ffff:127.0.0.5")));
    }

    /// An operator who writes an IPv4 address in its mapped form means
    /// that IPv4 address (as clients on a dual-stack socket are seen).
    #[test]
    fn mapped_ipv4_prefixes_match_their_ipv4_clients() {
        let host: Prefix = "::ffff:127.0.0.1".parse().unwrap();
        assert!(host.contains(ip("127.0.0.1")));
        assert!(host.contains(ip("::ffff:127.0.0.1")));
        assert!(!host.contains(ip("127.0.0.2")));
        assert_eq!(host.to_string(), "127.0.0.1/32");
        let net: Prefix = "::ffff:192.0.2.0/120".parse().unwrap();
        assert!(net.contains(ip("192.0.2.77")));
        assert!(!net.contains(ip("192.0.3.1")));
        let all: Prefix = "::ffff:0:0/96".parse().unwrap();
        assert!(all.contains(ip("203.0.113.9")));
        assert!(!all.contains(ip("2001:db8::1")));
        let v6: Prefix = "::/0".parse().unwrap();
        assert!(v6.contains(ip("2001:db8::1")));
    }

    #[test]
    fn malformed_prefixes_are_rejected() {
        for bad in [
            "",
            "10.0.0.0/33",
            "::/129",
            "10.0.0/8",
            "10.0.0.0/x",
            "host",
        ] {
            assert!(bad.parse::<Prefix>().is_err(), "{bad}");
        }
        assert!("10.0.0.0/32".parse::<Prefix>().is_ok(), "at the limit");
        assert!("::/128".parse::<Prefix>().is_ok(), "at the limit");
    }
}
