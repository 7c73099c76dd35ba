//! DNSKEY RDATA and the key tag that names a key in RRSIG and DS records.

/// The zone-key flag (RFC 4034 2.1.1): set on every key that signs a zone.
pub const FLAG_ZONE: u16 = 0x0100;
/// The secure-entry-point flag (RFC 4034 2.1.1): set on KSKs and CSKs.
pub const FLAG_SEP: u16 = 0x0001;
/// The only protocol value DNSKEY allows (RFC 4034 2.1.2).
pub const PROTOCOL: u8 = 3;

/// DNSKEY RDATA in wire form: flags, protocol, algorithm, public key.
pub fn rdata(flags: u16, algorithm: u8, public_key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + public_key.len());
    out.extend_from_slice(&flags.to_be_bytes());
    out.push(PROTOCOL);
    out.push(algorithm);
    out.extend_from_slice(public_key);
    out
}

/// The key tag of a DNSKEY's RDATA (RFC 4034 Appendix B; algorithm 1 is
/// not supported by Heron, so its special case is not needed).
pub fn key_tag(rdata: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for (index, byte) in rdata.iter().enumerate() {
        sum += if index % 2 == 0 {
            u32::from(*byte) << 8
        } else {
            u32::from(*byte)
        };
    }
    sum += sum >> 16;
    (sum & 0xffff) as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    /// The example DNSKEY of RFC 4034 5.4, whose DS gives key tag 60485.
    #[test]
    fn key_tag_of_the_rfc_example() {
        let public = base64::engine::general_purpose::STANDARD
            .decode(
                "AQOeiiR0GOMYkDshWoSKz9XzfwJr1AYtsmx3TGkJaNXVbfi/2pHm822aJ5iI9BMzNXxeYCmZ\
                 DRD99WYwYqUSdjMmmAphXdvxegXd/M5+X7OrzKBaMbCVdFLUUh6DhweJBjEVv5f2wwjM9Xzc\
                 nOf+EPbtG9DMBmADjFDc2w/rljwvFw==",
            )
            .expect("the RFC's key is base64");
        let rdata = rdata(256, 5, &public);
        assert_eq!(key_tag(&rdata), 60485);
    }

    #[test]
    fn flags_and_protocol_lead_the_rdata() {
        let rdata = rdata(FLAG_ZONE | FLAG_SEP, 13, &[1, 2, 3]);
        assert_eq!(rdata, [0x01, 0x01, 3, 13, 1, 2, 3]);
    }
}
