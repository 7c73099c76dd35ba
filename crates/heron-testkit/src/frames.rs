//! Ethernet frames of UDP over IPv4 or IPv6, written byte by byte with
//! their checksums, to send from a raw socket (tests of the XDP path send
//! frames no IP stack would), and the UDP read back from frames seen.

use std::net::IpAddr;

/// Where a frame's fields are, for tests that damage them.
pub const IPV4_CHECKSUM: usize = 14 + 10;
pub const IPV4_UDP: usize = 14 + 20;
pub const IPV6_UDP: usize = 14 + 40;

/// One UDP datagram in an Ethernet frame.
#[derive(Clone, Debug)]
pub struct UdpFrame {
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    /// Both of one IP version.
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    pub payload: Vec<u8>,
}

impl UdpFrame {
    /// The frame, checksums right (the UDP one never 0).
    pub fn build(&self) -> Vec<u8> {
        let udp_len = (8 + self.payload.len()) as u16;
        let mut f = self.dst_mac.to_vec();
        f.extend_from_slice(&self.src_mac);
        let addresses = match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                f.extend_from_slice(&[0x08, 0x00]);
                let total = (20 + udp_len).to_be_bytes();
                // Version 4, 20 bytes; ID 1; don't fragment; TTL 64; UDP.
                f.extend_from_slice(&[0x45, 0, total[0], total[1], 0, 1, 0x40, 0, 64, 17, 0, 0]);
                f.extend_from_slice(&s.octets());
                f.extend_from_slice(&d.octets());
                let c = checksum(&[&f[14..34]]);
                f[IPV4_CHECKSUM..IPV4_CHECKSUM + 2].copy_from_slice(&c.to_be_bytes());
                [&s.octets()[..], &d.octets()[..]].concat()
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
                f.extend_from_slice(&udp_len.to_be_bytes());
                f.extend_from_slice(&[17, 64]);
                f.extend_from_slice(&s.octets());
                f.extend_from_slice(&d.octets());
                [&s.octets()[..], &d.octets()[..]].concat()
            }
            _ => panic!("{} and {} are not of one IP version", self.src, self.dst),
        };
        let udp_at = f.len();
        f.extend_from_slice(&self.src_port.to_be_bytes());
        f.extend_from_slice(&self.dst_port.to_be_bytes());
        f.extend_from_slice(&udp_len.to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(&self.payload);
        let pseudo = [&[0, 17][..], &udp_len.to_be_bytes()].concat();
        let c = match checksum(&[&addresses, &pseudo, &f[udp_at..]]) {
            0 => 0xffff,
            c => c,
        };
        f[udp_at + 6..udp_at + 8].copy_from_slice(&c.to_be_bytes());
        f
    }
}

/// The Internet checksum (RFC 1071) of `parts` in a row (each of even
/// length but the last).
pub fn checksum(parts: &[&[u8]]) -> u16 {
    let mut total: u64 = 0;
    for part in parts {
        for (i, byte) in part.iter().enumerate() {
            total += u64::from(*byte) << if i % 2 == 0 { 8 } else { 0 };
        }
    }
    while total > 0xffff {
        total = (total & 0xffff) + (total >> 16);
    }
    !(total as u16)
}

/// The UDP in an Ethernet frame (IPv4 without options, or IPv6 with UDP
/// next): (source port, destination port, payload).
pub fn udp_of(frame: &[u8]) -> Option<(u16, u16, &[u8])> {
    let be16 = |at: usize| u16::from_be_bytes([frame[at], frame[at + 1]]);
    if frame.len() < 14 {
        return None;
    }
    let at = match be16(12) {
        0x0800 if frame.len() >= IPV4_UDP + 8 && frame[14] == 0x45 && frame[23] == 17 => IPV4_UDP,
        0x86dd if frame.len() >= IPV6_UDP + 8 && frame[20] == 17 => IPV6_UDP,
        _ => return None,
    };
    Some((be16(at), be16(at + 2), &frame[at + 8..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_ipv4_header_sums_as_rfc_1071_says() {
        let header = [
            0x45, 0, 0, 0x73, 0, 0, 0x40, 0, 0x40, 0x11, 0, 0, 0xc0, 0xa8, 0, 1, 0xc0, 0xa8, 0,
            0xc7,
        ];
        assert_eq!(checksum(&[&header]), 0xb861);
    }

    #[test]
    fn built_frames_read_back_and_their_checksums_verify() {
        for (src, dst) in [("192.0.2.2", "192.0.2.1"), ("2001:db8::2", "2001:db8::1")] {
            let frame = UdpFrame {
                dst_mac: [2, 0, 0, 0, 0, 1],
                src_mac: [2, 0, 0, 0, 0, 2],
                src: src.parse().unwrap(),
                dst: dst.parse().unwrap(),
                src_port: 40000,
                dst_port: 53,
                payload: b"odd".to_vec(),
            }
            .build();
            assert_eq!(udp_of(&frame), Some((40000, 53, &b"odd"[..])));
            let v6 = src.contains(':');
            let udp_at = if v6 { IPV6_UDP } else { IPV4_UDP };
            let addresses = if v6 { 22..54 } else { 26..34 };
            let pseudo = [0, 17, 0, 11];
            assert_eq!(checksum(&[&frame[addresses], &pseudo, &frame[udp_at..]]), 0);
            if !v6 {
                assert_eq!(checksum(&[&frame[14..34]]), 0);
            }
        }
    }
}
