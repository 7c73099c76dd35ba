//! Any bytes as an Ethernet frame on the AF_XDP path: the header reader
//! never panics; what it accepts is what the kernel would take (a source
//! that can take a reply: not martian, not one of the host's addresses,
//! not port 0, not a group MAC; the IPv4 header checksum right; the UDP
//! checksum right, or none over IPv4, or left to offload); and it turns
//! into a reply that it accepts again, from the server to the same peer,
//! with the payload given, whenever the query's destination could be a
//! source.
//!
//! Input: two octets of payload length (big-endian, cut to what fits),
//! then the frame.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use heron_server::xdp::packet::{HostAddresses, martian, parse, write_reply};
// Summed apart from the reader: zero when data carry their right checksum.
use heron_testkit::frames::checksum;
use libfuzzer_sys::fuzz_target;

/// The host's addresses the target gives the reader.
fn host() -> HostAddresses {
    let ours: [IpAddr; 3] = [
        Ipv4Addr::new(198, 51, 100, 1).into(),
        Ipv4Addr::new(198, 51, 100, 255).into(),
        "2001:db8:5::1".parse::<Ipv6Addr>().unwrap().into(),
    ];
    HostAddresses::new(ours)
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Where the frame's IP addresses and UDP header are, and its
/// destination, for an accepted frame.
struct Layout {
    addresses: std::ops::Range<usize>,
    udp: usize,
    dst: IpAddr,
}

fn layout(frame: &[u8]) -> Layout {
    if be16(frame, 12) == 0x0800 {
        let dst: [u8; 4] = frame[30..34].try_into().unwrap();
        Layout {
            addresses: 26..34,
            udp: 34,
            dst: Ipv4Addr::from(dst).into(),
        }
    } else {
        let dst: [u8; 16] = frame[38..54].try_into().unwrap();
        Layout {
            addresses: 22..54,
            udp: 54,
            dst: Ipv6Addr::from(dst).into(),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((len, frame)) = data.split_first_chunk::<2>() else {
        return;
    };
    let host = host();
    let Some(query) = parse(frame, &host) else {
        return;
    };
    assert!(query.payload.end <= frame.len());
    let peer = query.peer.ip();
    assert!(!martian(peer) && query.peer.port() != 0, "{peer}");
    assert_eq!(parse(frame, &HostAddresses::new([peer])), None);
    assert_eq!(frame[6] & 1, 0, "a station's MAC");
    let at = layout(frame);
    if peer.is_ipv4() {
        assert_eq!(checksum(&[&frame[14..34]]), 0, "IPv4 header checksum");
    }
    let udp = &frame[at.udp..query.payload.end];
    let field = be16(udp, 6);
    let pseudo = [&[0, 17][..], &(udp.len() as u16).to_be_bytes()].concat();
    let sums = checksum(&[&frame[at.addresses.clone()], &pseudo, udp]) == 0;
    let offloaded = field == !checksum(&[&frame[at.addresses.clone()], &pseudo]);
    let none = field == 0 && peer.is_ipv4();
    assert!(sums || offloaded || none, "UDP checksum {field:04x}");

    let mut reply = frame.to_vec();
    reply.resize(2048, 0);
    let payload = vec![0xa5; usize::from(u16::from_be_bytes(*len)) % 2048];
    let Some(n) = write_reply(&mut reply, &query, &payload) else {
        assert!(query.payload.start + payload.len() > reply.len());
        return;
    };
    // The reply is from the query's destination: read back by a host
    // that does not have it, when it could be a source at all.
    let from_port = be16(frame, at.udp + 2);
    if martian(at.dst) || from_port == 0 || frame[0] & 1 != 0 {
        return;
    }
    let back = parse(&reply[..n], &HostAddresses::default()).expect("a reply reads back");
    assert_eq!(back.payload.len(), payload.len());
    assert_eq!(&reply[back.payload], &payload[..]);
    assert_eq!(back.peer, std::net::SocketAddr::new(at.dst, from_port));
});
