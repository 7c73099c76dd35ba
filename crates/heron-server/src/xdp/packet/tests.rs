use super::*;

const CLIENT_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const SERVER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

fn frame(ethertype: u16, l3: &[u8]) -> Vec<u8> {
    let mut f = SERVER_MAC.to_vec();
    f.extend_from_slice(&CLIENT_MAC);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(l3);
    f
}

fn udp_header(payload: &[u8]) -> Vec<u8> {
    let mut u = vec![0xc0, 0x01, 0, 53];
    u.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0x12, 0x34]);
    u.extend_from_slice(payload);
    u
}

fn query4(payload: &[u8]) -> Vec<u8> {
    let udp = udp_header(payload);
    let mut ip = vec![0x45, 0, 0, 0, 0xab, 0xcd, 0x40, 0, 63, 17, 0, 0];
    ip[2..4].copy_from_slice(&((20 + udp.len()) as u16).to_be_bytes());
    ip.extend_from_slice(&[198, 51, 100, 2, 198, 51, 100, 1]);
    ip.extend_from_slice(&udp);
    frame(0x0800, &ip)
}

fn query6(payload: &[u8]) -> Vec<u8> {
    let udp = udp_header(payload);
    let mut ip = vec![0x60, 0, 0, 0];
    ip.extend_from_slice(&(udp.len() as u16).to_be_bytes());
    ip.extend_from_slice(&[17, 63]);
    let (client, server) = ("2001:db8:5::2", "2001:db8:5::1");
    ip.extend_from_slice(&client.parse::<Ipv6Addr>().unwrap().octets());
    ip.extend_from_slice(&server.parse::<Ipv6Addr>().unwrap().octets());
    ip.extend_from_slice(&udp);
    frame(0x86dd, &ip)
}

#[test]
fn queries_are_found_over_ipv4_and_ipv6() {
    let f = query4(b"hello");
    let d = parse(&f).unwrap();
    assert_eq!(d.peer, "198.51.100.2:49153".parse().unwrap());
    assert_eq!(&f[d.payload], b"hello");
    let f = query6(b"hi6");
    let d = parse(&f).unwrap();
    assert_eq!(d.peer, "[2001:db8:5::2]:49153".parse().unwrap());
    assert_eq!(&f[d.payload], b"hi6");
}

#[test]
fn padding_after_the_datagram_is_not_payload() {
    // Ethernet pads short frames to 60 bytes: the IP and UDP lengths say
    // where the message ends.
    let mut f = query4(b"q");
    f.resize(60, 0);
    let d = parse(&f).unwrap();
    assert_eq!(&f[d.payload], b"q");
}

#[test]
fn malformed_and_foreign_frames_are_refused() {
    let good4 = query4(b"abc");
    let good6 = query6(b"abc");
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    let mut with = |what, base: &Vec<u8>, at: usize, bytes: &[u8]| {
        let mut f = base.clone();
        f[at..at + bytes.len()].copy_from_slice(bytes);
        cases.push((what, f));
    };
    with("ARP", &good4, 12, &[0x08, 0x06]);
    with("IPv4 options", &good4, 14, &[0x46]);
    with("TCP", &good4, 23, &[6]);
    with("fragment", &good4, 20, &[0x20, 0]);
    with("IP length past the frame", &good4, 16, &[0, 200]);
    with("IP length below UDP's", &good4, 16, &[0, 27]);
    with("UDP length past IP's", &good4, 38, &[0, 12]);
    with("UDP length below 8", &good4, 38, &[0, 7]);
    with("IPv6 version", &good6, 14, &[0x40]);
    with("IPv6 extension header", &good6, 20, &[0]);
    with("IPv6 length past the frame", &good6, 18, &[0, 99]);
    with("IPv6 UDP length past IP's", &good6, 58, &[0, 99]);
    for cut in [0, 13, 41] {
        cases.push(("cut short", good4[..cut].to_vec()));
    }
    cases.push(("IPv6 cut short", good6[..61].to_vec()));
    for (what, f) in cases {
        assert_eq!(parse(&f), None, "{what}");
    }
}

/// A checksum over data that includes its own checksum sums to zero.
fn verifies(bytes: &[u8], pseudo: u32) -> bool {
    fold(sum(bytes, pseudo)) == 0
}

#[test]
fn the_ipv4_header_checksum_matches_a_known_value() {
    // RFC 1071-style example: 4500 0073 0000 4000 4011 ... → b861.
    let header = [
        0x45, 0, 0, 0x73, 0, 0, 0x40, 0, 0x40, 0x11, 0, 0, 0xc0, 0xa8, 0, 1, 0xc0, 0xa8, 0, 0xc7,
    ];
    assert_eq!(fold(sum(&header, 0)), 0xb861);
}

#[test]
fn replies_go_back_with_right_lengths_and_checksums() {
    for (query, v6) in [(query4(b"question"), false), (query6(b"question"), true)] {
        let d = parse(&query).unwrap();
        let mut f = query.clone();
        f.resize(2048, 0);
        let answer = b"a longer answer, odd length";
        let len = write_reply(&mut f, &d, answer).unwrap();
        let f = &f[..len];
        assert_eq!(&f[0..6], &CLIENT_MAC);
        assert_eq!(&f[6..12], &SERVER_MAC);
        let (ip, udp_at) = (&f[14..], d.payload.start - 8);
        let udp = &f[udp_at..];
        assert_eq!(&udp[0..2], &[0, 53], "from port 53");
        assert_eq!(&udp[2..4], &[0xc0, 0x01], "to the client's port");
        assert_eq!(be16(udp, 4), 8 + answer.len());
        assert_eq!(&f[d.payload.start..], answer);
        let pseudo = if v6 {
            assert_eq!(&ip[8..24], &query[14 + 24..14 + 40], "from the server");
            assert_eq!(&ip[24..40], &query[14 + 8..14 + 24], "to the client");
            assert_eq!(be16(ip, 4), 8 + answer.len());
            sum(&ip[8..40], 17 + (8 + answer.len()) as u32)
        } else {
            assert_eq!(&ip[12..16], &[198, 51, 100, 1]);
            assert_eq!(&ip[16..20], &[198, 51, 100, 2]);
            assert_eq!(be16(ip, 2), 28 + answer.len());
            assert!(verifies(&ip[..20], 0), "IPv4 header checksum");
            sum(&ip[12..20], 17 + (8 + answer.len()) as u32)
        };
        assert!(verifies(udp, pseudo), "UDP checksum");
        assert_eq!(parse(f).unwrap().payload, d.payload.start..len);
    }
}

#[test]
fn a_reply_that_does_not_fit_the_frame_is_refused() {
    let query = query4(b"q");
    let d = parse(&query).unwrap();
    let room = 100;
    let mut f = query.clone();
    f.resize(room, 0);
    let fits = vec![7u8; room - d.payload.start];
    assert_eq!(write_reply(&mut f, &d, &fits), Some(room));
    let mut f = query.clone();
    f.resize(room, 0);
    assert_eq!(write_reply(&mut f, &d, &[7u8; 1 + 100 - 42]), None);
}
