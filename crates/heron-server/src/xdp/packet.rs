//! Ethernet, IPv4, IPv6 and UDP headers for the AF_XDP path: reading a
//! query's, and turning them around in place for the reply.
//!
//! Only what the XDP program lets through is accepted: Ethernet II,
//! IPv4 without options and not fragmented, or IPv6 with UDP as the next
//! header (the program also saw that the frame is to the interface's MAC
//! and one of its addresses). Of that, what the kernel would drop is
//! dropped too, since the reply would go where the kernel's never does:
//! a group (multicast) source MAC; a martian source (IPv4: 0.0.0.0/8,
//! 127.0.0.0/8, multicast, 255.255.255.255; IPv6: ::, ::1, multicast,
//! IPv4-mapped; and the host's own and broadcast addresses,
//! [`HostAddresses`]); a source port no client sends from
//! (`ports::never_a_client`); a bad IPv4 header checksum; a bad
//! UDP checksum (zero, "none", is allowed over IPv4 only; one left to
//! offload by a sender on this host is taken, see `udp`). Anything else,
//! or lengths that do not add up, is dropped too; each drop's reason is
//! counted ([`Dropped`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

pub use crate::stats::Dropped;
use std::ops::Range;

const ETH: usize = 14;
const IP4: usize = 20;
const IP6: usize = 40;
const UDP: usize = 8;
/// Hop limit of replies, as Linux's default.
const TTL: u8 = 64;

/// Addresses never a query's source, beside the fixed martians: the
/// host's own (on any interface) and its IPv4 networks' broadcast
/// addresses, as the kernel's source check has them. A few: looked up
/// by a scan.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostAddresses {
    addresses: Vec<IpAddr>,
}

impl HostAddresses {
    pub fn new(addresses: impl IntoIterator<Item = IpAddr>) -> HostAddresses {
        let mut addresses: Vec<IpAddr> = addresses.into_iter().collect();
        addresses.sort();
        addresses.dedup();
        HostAddresses { addresses }
    }

    fn has(&self, ip: IpAddr) -> bool {
        self.addresses.contains(&ip)
    }
}

/// Whether `ip` is never a query's source, whatever the host: see
/// [`martian_v4`] and [`martian_v6`].
pub fn martian(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => martian_v4(v4),
        IpAddr::V6(v6) => martian_v6(v6),
    }
}

/// An IPv4 source the kernel drops as martian (`ip_route_input_slow`):
/// "this network" 0/8, loopback 127/8, multicast, limited broadcast.
fn martian_v4(src: Ipv4Addr) -> bool {
    let first = src.octets()[0];
    first == 0 || src.is_loopback() || src.is_multicast() || src.is_broadcast()
}

/// An IPv6 source the kernel drops (`ipv6_rcv`: multicast, loopback,
/// IPv4-mapped) or would answer only on loopback (unspecified).
fn martian_v6(src: Ipv6Addr) -> bool {
    src.is_multicast()
        || src.is_loopback()
        || src.is_unspecified()
        || src.to_ipv4_mapped().is_some()
}

/// A UDP datagram found in a frame.
#[derive(Clone, Debug, PartialEq)]
pub struct Datagram {
    /// Who sent it (and gets the reply).
    pub peer: SocketAddr,
    /// Where the DNS message is in the frame.
    pub payload: Range<usize>,
}

impl Datagram {
    fn header_len(&self) -> usize {
        self.payload.start
    }
    fn is_ipv6(&self) -> bool {
        self.peer.is_ipv6()
    }
}

fn be16(b: &[u8], at: usize) -> usize {
    u16::from_be_bytes([b[at], b[at + 1]]) as usize
}

/// The UDP datagram in an Ethernet frame, if it is one we answer, or why
/// not; `host` are addresses no query comes from.
pub fn parse(frame: &[u8], host: &HostAddresses) -> Result<Datagram, Dropped> {
    // A group source MAC is no station: a reply would go to many.
    if frame.len() < ETH + IP4 + UDP {
        return Err(Dropped::Malformed);
    }
    if frame[6] & 1 != 0 {
        return Err(Dropped::MartianSource);
    }
    match be16(frame, 12) {
        0x0800 => parse_ipv4(frame, host),
        0x86dd => parse_ipv6(frame, host),
        _ => Err(Dropped::Malformed),
    }
}

fn parse_ipv4(frame: &[u8], host: &HostAddresses) -> Result<Datagram, Dropped> {
    let ip = &frame[ETH..];
    let fragment = be16(ip, 6) & 0x3fff != 0;
    let total = be16(ip, 2);
    if ip[0] != 0x45 || ip[9] != 17 || fragment || total < IP4 + UDP || total > ip.len() {
        return Err(Dropped::Malformed);
    }
    if !checks_out(&ip[..IP4], 0) {
        return Err(Dropped::Checksum);
    }
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    if martian_v4(src) || host.has(IpAddr::V4(src)) {
        return Err(Dropped::MartianSource);
    }
    let pseudo = ETH + 12..ETH + 20;
    udp(frame, ETH + IP4, total - IP4, IpAddr::V4(src), pseudo)
}

fn parse_ipv6(frame: &[u8], host: &HostAddresses) -> Result<Datagram, Dropped> {
    if frame.len() < ETH + IP6 + UDP {
        return Err(Dropped::Malformed);
    }
    let ip = &frame[ETH..];
    let length = be16(ip, 4);
    if ip[0] >> 4 != 6 || ip[6] != 17 || length < UDP || length > ip.len() - IP6 {
        return Err(Dropped::Malformed);
    }
    let src = Ipv6Addr::from(<[u8; 16]>::try_from(&ip[8..24]).unwrap());
    if martian_v6(src) || host.has(IpAddr::V6(src)) {
        return Err(Dropped::MartianSource);
    }
    // No checksum is not allowed over IPv6 (RFC 8200 8.1).
    if be16(frame, ETH + IP6 + 6) == 0 {
        return Err(Dropped::Checksum);
    }
    let pseudo = ETH + 8..ETH + 40;
    udp(frame, ETH + IP6, length, IpAddr::V6(src), pseudo)
}

/// The UDP header at `at`, within `room` bytes the IP header allows;
/// `pseudo`: where the IP addresses of its pseudo-header are.
fn udp(
    frame: &[u8],
    at: usize,
    room: usize,
    src: IpAddr,
    pseudo: Range<usize>,
) -> Result<Datagram, Dropped> {
    let length = be16(frame, at + 4);
    if length < UDP || length > room {
        return Err(Dropped::Malformed);
    }
    let port = be16(frame, at) as u16;
    if crate::ports::never_a_client(port) {
        return Err(Dropped::SourcePort);
    }
    let field = be16(frame, at + 6) as u16;
    let pseudo = sum(&frame[pseudo], 17 + length as u32);
    // Zero: sent without one (IPv4; IPv6's was refused above). The
    // pseudo-header's sum alone: sent from this host (veth, tap) with the
    // checksum left to an offload that never ran; the kernel takes such
    // frames unchecked (CHECKSUM_PARTIAL), and AF_XDP does not say how a
    // frame came, so neither is checked. A corrupted frame from a wire
    // turns into that form as rarely as into any other that adds up.
    let unchecked = field == 0 || field == !fold(pseudo);
    if !unchecked && !checks_out(&frame[at..at + length], pseudo) {
        return Err(Dropped::Checksum);
    }
    Ok(Datagram {
        peer: SocketAddr::new(src, port),
        payload: at + UDP..at + length,
    })
}

/// Whether `bytes`, their checksum field included, add up (with the
/// pseudo-header's sum `pseudo`) as a correct checksum makes them.
fn checks_out(bytes: &[u8], pseudo: u32) -> bool {
    fold(sum(bytes, pseudo)) == 0
}

/// Turns the query's headers in `frame` around (addresses and ports
/// swapped, lengths and checksums for `payload`) and puts `payload`
/// after them. Returns the reply's length, or None if it does not fit.
pub fn write_reply(frame: &mut [u8], query: &Datagram, payload: &[u8]) -> Option<usize> {
    let at = query.header_len();
    let end = at + payload.len();
    if end > frame.len() || payload.len() + UDP > usize::from(u16::MAX) - IP4 {
        return None;
    }
    swap(frame, 0..6, 6..12);
    let udp_at = at - UDP;
    swap(frame, udp_at..udp_at + 2, udp_at + 2..udp_at + 4);
    let udp_len = (UDP + payload.len()) as u16;
    frame[udp_at + 4..udp_at + 6].copy_from_slice(&udp_len.to_be_bytes());
    frame[udp_at + 6..udp_at + 8].fill(0);
    frame[at..end].copy_from_slice(payload);
    let ip = ETH;
    // Not the query's ECN or DSCP bits, nor its flow label: a reply
    // that echoed CE would signal congestion falsely (RFC 3168), and one
    // that echoed DSCP would let a client pick the reply's class; the
    // kernel's replies, and Knot's, carry zero.
    let pseudo = if query.is_ipv6() {
        frame[ip..ip + 4].copy_from_slice(&[0x60, 0, 0, 0]);
        swap(frame, ip + 8..ip + 24, ip + 24..ip + 40);
        frame[ip + 4..ip + 6].copy_from_slice(&udp_len.to_be_bytes());
        frame[ip + 7] = TTL;
        sum(&frame[ip + 8..ip + 40], 17 + u32::from(udp_len))
    } else {
        swap(frame, ip + 12..ip + 16, ip + 16..ip + 20);
        frame[ip + 1] = 0;
        let total = (IP4 as u16 + udp_len).to_be_bytes();
        frame[ip + 2..ip + 4].copy_from_slice(&total);
        // Don't fragment, like the kernel's replies under the path MTU.
        frame[ip + 6..ip + 8].copy_from_slice(&[0x40, 0]);
        frame[ip + 8] = TTL;
        frame[ip + 10..ip + 12].fill(0);
        let checksum = fold(sum(&frame[ip..ip + IP4], 0));
        frame[ip + 10..ip + 12].copy_from_slice(&checksum.to_be_bytes());
        sum(&frame[ip + 12..ip + 20], 17 + u32::from(udp_len))
    };
    let checksum = match fold(sum(&frame[udp_at..end], pseudo)) {
        // Zero means "no checksum" in UDP over IPv4; all ones is the same
        // value in one's complement.
        0 => 0xffff,
        c => c,
    };
    frame[udp_at + 6..udp_at + 8].copy_from_slice(&checksum.to_be_bytes());
    Some(end)
}

fn swap(frame: &mut [u8], a: Range<usize>, b: Range<usize>) {
    let (first, second) = frame.split_at_mut(b.start);
    first[a].swap_with_slice(&mut second[..b.end - b.start]);
}

/// One's complement sum of `bytes` as 16-bit words, added to `initial`.
fn sum(bytes: &[u8], initial: u32) -> u32 {
    let mut total = u64::from(initial);
    let mut words = bytes.chunks_exact(2);
    for w in &mut words {
        total += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        total += u64::from(*last) << 8;
    }
    while total > 0xffff_ffff {
        total = (total & 0xffff_ffff) + (total >> 32);
    }
    total as u32
}

/// The checksum field for a sum: folded to 16 bits and complemented.
fn fold(mut total: u32) -> u16 {
    while total > 0xffff {
        total = (total & 0xffff) + (total >> 16);
    }
    !(total as u16)
}

#[cfg(test)]
mod tests;
