//! EDNS(0): the OPT pseudo-record (RFC 6891).

/// What a query's OPT record says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edns {
    /// Requestor's UDP payload size; values below 512 count as 512.
    pub udp_size: u16,
    /// Upper eight bits of the extended response code.
    pub ext_rcode: u8,
    pub version: u8,
    /// DNSSEC OK (RFC 3225).
    pub do_bit: bool,
}

/// Smallest UDP payload every EDNS requestor must accept (RFC 6891 6.2.5).
pub const MIN_UDP_SIZE: u16 = 512;

/// Reads OPT's CLASS, TTL and RDATA. Options are checked for structure and
/// otherwise ignored (none are supported yet, and unknown ones must be).
pub fn parse_opt(class: u16, ttl: u32, rdata: &[u8]) -> Result<Edns, &'static str> {
    let mut i = 0;
    while i < rdata.len() {
        if i + 4 > rdata.len() {
            return Err("option header runs past RDATA");
        }
        let len = u16::from_be_bytes([rdata[i + 2], rdata[i + 3]]) as usize;
        i += 4 + len;
        if i > rdata.len() {
            return Err("option runs past RDATA");
        }
    }
    Ok(Edns {
        udp_size: class.max(MIN_UDP_SIZE),
        ext_rcode: (ttl >> 24) as u8,
        version: (ttl >> 16) as u8,
        do_bit: ttl & 0x8000 != 0,
    })
}

/// An OPT record with no options: our payload size, the upper bits of
/// `rcode`, version 0 and the DO bit as given.
pub fn opt_record(udp_size: u16, rcode: u16, do_bit: bool) -> [u8; OPT_LEN] {
    let ttl = (((rcode >> 4) as u32) << 24) | if do_bit { 0x8000 } else { 0 };
    let mut out = [0u8; OPT_LEN]; // root owner first
    out[1..3].copy_from_slice(&41u16.to_be_bytes());
    out[3..5].copy_from_slice(&udp_size.to_be_bytes());
    out[5..9].copy_from_slice(&ttl.to_be_bytes());
    out
}

/// Wire length of the OPT record [`opt_record`] makes.
pub const OPT_LEN: usize = 11;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opt_fields() {
        let e = parse_opt(4096, 0x0001_8000, &[]).unwrap();
        assert_eq!((e.udp_size, e.version, e.do_bit), (4096, 1, true));
        assert_eq!(parse_opt(100, 0, &[]).unwrap().udp_size, 512);
        assert!(parse_opt(1232, 0, &[0, 10, 0]).is_err());
        assert!(parse_opt(1232, 0, &[0, 10, 0, 9, 1]).is_err());
        assert!(parse_opt(1232, 0, &[0, 10, 0, 1, 1]).is_ok());
        let out = opt_record(1232, 16, true);
        assert_eq!(out, [0, 0, 41, 4, 0xD0, 1, 0, 0x80, 0, 0, 0]);
    }
}
