//! Record types, classes, opcodes and response codes.

use std::fmt;

macro_rules! rtypes {
    ($($name:ident = $val:expr),* $(,)?) => {
        #[allow(non_upper_case_globals)]
        impl RType {
            $(pub const $name: RType = RType($val);)*

            /// The mnemonic of a known type.
            pub fn mnemonic(self) -> Option<&'static str> {
                match self.0 {
                    $($val => Some(stringify!($name)),)*
                    _ => None,
                }
            }

            /// Looks up a mnemonic (case-insensitive), or `TYPEnnn`.
            pub fn from_mnemonic(s: &[u8]) -> Option<RType> {
                $(if s.eq_ignore_ascii_case(stringify!($name).as_bytes()) {
                    return Some(RType($val));
                })*
                parse_numbered(s, b"TYPE").map(RType)
            }
        }
    };
}

/// A record type (RFC 1035 3.2.2 and later registrations).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RType(pub u16);

rtypes! {
    A = 1, NS = 2, MD = 3, MF = 4, CNAME = 5, SOA = 6, MB = 7, MG = 8, MR = 9,
    NULL = 10, WKS = 11, PTR = 12, HINFO = 13, MINFO = 14, MX = 15, TXT = 16,
    RP = 17, AFSDB = 18, X25 = 19, ISDN = 20, RT = 21, NSAP = 22, SIG = 24,
    KEY = 25, PX = 26, AAAA = 28, LOC = 29, NXT = 30, SRV = 33, NAPTR = 35,
    KX = 36, CERT = 37, A6 = 38, DNAME = 39, OPT = 41, APL = 42, DS = 43,
    SSHFP = 44, IPSECKEY = 45, RRSIG = 46, NSEC = 47, DNSKEY = 48, DHCID = 49,
    NSEC3 = 50, NSEC3PARAM = 51, TLSA = 52, SMIMEA = 53, HIP = 55, CDS = 59,
    CDNSKEY = 60, OPENPGPKEY = 61, CSYNC = 62, ZONEMD = 63, SVCB = 64,
    HTTPS = 65, SPF = 99, NID = 104, L32 = 105, L64 = 106, LP = 107,
    EUI48 = 108, EUI64 = 109, TKEY = 249, TSIG = 250, IXFR = 251, AXFR = 252,
    MAILB = 253, MAILA = 254, ANY = 255, URI = 256, CAA = 257, AVC = 258,
    DOA = 259, AMTRELAY = 260, TA = 32768, DLV = 32769,
}

impl RType {
    /// Meta types and QTYPEs that never appear as stored data (RFC 6895 3.1).
    pub fn is_meta(self) -> bool {
        matches!(self.0, 41 | 128..=255)
    }

    /// Types whose RDATA names may be compressed on the wire (RFC 3597 4).
    pub fn rdata_names_compressible(self) -> bool {
        matches!(self.0, 2..=9 | 12 | 14 | 15)
    }

    /// Types whose RDATA names are decompressed when read from a message:
    /// those above, and those RFC 3597 4 says a receiver SHOULD decompress
    /// (RP, AFSDB, RT, SIG, PX, NXT, SRV, NAPTR: RFC 2052 mandated
    /// compression in SRV), with KX and DNAME as BIND and Knot read them
    /// (black-box finding BA-3: such a record failed an UPDATE and a whole
    /// zone transfer). Never compressed when written.
    pub fn rdata_names_decompressed_on_read(self) -> bool {
        self.rdata_names_compressible()
            || matches!(self.0, 17 | 18 | 21 | 24 | 26 | 30 | 33 | 35 | 36 | 39)
    }
}

impl fmt::Display for RType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.mnemonic() {
            Some(m) => f.write_str(m),
            None => write!(f, "TYPE{}", self.0),
        }
    }
}

impl fmt::Debug for RType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

fn parse_numbered(s: &[u8], prefix: &[u8]) -> Option<u16> {
    if s.len() <= prefix.len() || !s[..prefix.len()].eq_ignore_ascii_case(prefix) {
        return None;
    }
    let digits = &s[prefix.len()..];
    if digits.len() > 5 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// A record class.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Class(pub u16);

impl Class {
    pub const IN: Class = Class(1);
    pub const CH: Class = Class(3);
    pub const HS: Class = Class(4);
    pub const NONE: Class = Class(254);
    pub const ANY: Class = Class(255);

    pub fn from_mnemonic(s: &[u8]) -> Option<Class> {
        let known = [(b"IN", 1), (b"CH", 3), (b"CS", 2), (b"HS", 4)];
        for (m, v) in known {
            if s.eq_ignore_ascii_case(m) {
                return Some(Class(v));
            }
        }
        if s.eq_ignore_ascii_case(b"NONE") {
            return Some(Class::NONE);
        }
        if s.eq_ignore_ascii_case(b"ANY") {
            return Some(Class::ANY);
        }
        parse_numbered(s, b"CLASS").map(Class)
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            1 => f.write_str("IN"),
            2 => f.write_str("CS"),
            3 => f.write_str("CH"),
            4 => f.write_str("HS"),
            254 => f.write_str("NONE"),
            255 => f.write_str("ANY"),
            n => write!(f, "CLASS{n}"),
        }
    }
}

impl fmt::Debug for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Response codes (RFC 1035 4.1.1, RFC 6891 6.1.3 for the extended ones).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Rcode(pub u16);

impl Rcode {
    pub const NOERROR: Rcode = Rcode(0);
    pub const FORMERR: Rcode = Rcode(1);
    pub const SERVFAIL: Rcode = Rcode(2);
    pub const NXDOMAIN: Rcode = Rcode(3);
    pub const NOTIMP: Rcode = Rcode(4);
    pub const REFUSED: Rcode = Rcode(5);
    /// Dynamic update (RFC 2136 2.2): a name that should not exist does.
    pub const YXDOMAIN: Rcode = Rcode(6);
    /// An RRset that should not exist does.
    pub const YXRRSET: Rcode = Rcode(7);
    /// An RRset that should exist does not.
    pub const NXRRSET: Rcode = Rcode(8);
    pub const NOTAUTH: Rcode = Rcode(9);
    /// A name in an update is outside the zone.
    pub const NOTZONE: Rcode = Rcode(10);
    /// Extended: needs OPT (RFC 6891).
    pub const BADVERS: Rcode = Rcode(16);
    /// TSIG error field values (RFC 8945 3): they travel in the TSIG RR,
    /// never in the header, whose RCODE is NOTAUTH. BADSIG shares 16 with
    /// BADVERS; the record they appear in tells them apart.
    pub const BADSIG: Rcode = Rcode(16);
    pub const BADKEY: Rcode = Rcode(17);
    pub const BADTIME: Rcode = Rcode(18);
    pub const BADTRUNC: Rcode = Rcode(22);
    /// Extended: a bad or missing server cookie (RFC 7873 8).
    pub const BADCOOKIE: Rcode = Rcode(23);
}

impl fmt::Display for Rcode {
    /// The mnemonic of a header RCODE (TSIG errors print as their number:
    /// BADSIG and BADVERS share 16).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.0 {
            0 => "NOERROR",
            1 => "FORMERR",
            2 => "SERVFAIL",
            3 => "NXDOMAIN",
            4 => "NOTIMP",
            5 => "REFUSED",
            6 => "YXDOMAIN",
            7 => "YXRRSET",
            8 => "NXRRSET",
            9 => "NOTAUTH",
            10 => "NOTZONE",
            23 => "BADCOOKIE",
            n => return write!(f, "RCODE{n}"),
        };
        f.write_str(name)
    }
}

/// Opcodes (RFC 1035 4.1.1, RFC 1996, RFC 2136).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Opcode(pub u8);

impl Opcode {
    pub const QUERY: Opcode = Opcode(0);
    pub const NOTIFY: Opcode = Opcode(4);
    pub const UPDATE: Opcode = Opcode(5);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mnemonics() {
        assert_eq!(RType::from_mnemonic(b"aaaa"), Some(RType::AAAA));
        assert_eq!(RType::from_mnemonic(b"TYPE65534"), Some(RType(65534)));
        assert_eq!(RType::from_mnemonic(b"TYPE65536"), None);
        assert_eq!(RType::from_mnemonic(b"TYPE"), None);
        assert_eq!(RType::from_mnemonic(b"BOGUS"), None);
        assert_eq!(RType(65280).to_string(), "TYPE65280");
        assert_eq!(RType::HTTPS.to_string(), "HTTPS");
        assert_eq!(Class::from_mnemonic(b"ch"), Some(Class::CH));
        assert_eq!(Class::from_mnemonic(b"CLASS7"), Some(Class(7)));
        assert!(RType::ANY.is_meta() && RType::OPT.is_meta() && !RType::A.is_meta());
    }
}

/// The record did not fit under the size limit; nothing of it was written.
/// (Here, with the other small types, so that the EDNS option writer and
/// the message writer share it without importing each other.)
#[derive(Debug, PartialEq, Eq)]
pub struct Full;
