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
    seal(frame(0x0800, &ip))
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
    seal(frame(0x86dd, &ip))
}

use heron_testkit::frames::checksum;

/// `f` with its IPv4 header and UDP checksums set (over the whole rest of
/// the frame, as the builders above lay it out), or its UDP checksum
/// (IPv6). The UDP checksum is never 0, "none".
fn seal(mut f: Vec<u8>) -> Vec<u8> {
    let v6 = f[12..14] == [0x86, 0xdd];
    let (udp_at, addresses) = if v6 { (54, 22..54) } else { (34, 26..34) };
    if !v6 {
        f[24..26].fill(0);
        let c = checksum(&[&f[14..34]]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
    }
    f[udp_at + 6..udp_at + 8].fill(0);
    let udp_len = (f.len() - udp_at) as u16;
    let pseudo = [&[0, 17][..], &udp_len.to_be_bytes()].concat();
    let c = match checksum(&[&f[addresses], &pseudo, &f[udp_at..]]) {
        0 => 0xffff,
        c => c,
    };
    f[udp_at + 6..udp_at + 8].copy_from_slice(&c.to_be_bytes());
    f
}

/// The server's addresses, as `HostAddresses` has them in service.
fn host() -> HostAddresses {
    HostAddresses::new(
        [
            "198.51.100.1",
            "198.51.100.255",
            "2001:db8:5::1",
            "127.0.0.1",
        ]
        .map(|a| a.parse().unwrap()),
    )
}

fn read(frame: &[u8]) -> Option<Datagram> {
    parse(frame, &host()).ok()
}

#[test]
fn queries_are_found_over_ipv4_and_ipv6() {
    let f = query4(b"hello");
    let d = read(&f).unwrap();
    assert_eq!(d.peer, "198.51.100.2:49153".parse().unwrap());
    assert_eq!(&f[d.payload], b"hello");
    let f = query6(b"hi6");
    let d = read(&f).unwrap();
    assert_eq!(d.peer, "[2001:db8:5::2]:49153".parse().unwrap());
    assert_eq!(&f[d.payload], b"hi6");
}

/// `base` with `bytes` at `at`, checksums set again after (so that only
/// the change made is wrong).
fn changed(base: &[u8], at: usize, bytes: &[u8]) -> Vec<u8> {
    let mut f = base.to_vec();
    f[at..at + bytes.len()].copy_from_slice(bytes);
    seal(f)
}

/// `base` with `bytes` at `at` and nothing else changed.
fn damaged(base: &[u8], at: usize, bytes: &[u8]) -> Vec<u8> {
    let mut f = base.to_vec();
    f[at..at + bytes.len()].copy_from_slice(bytes);
    f
}

fn v4(text: &str) -> [u8; 4] {
    text.parse::<Ipv4Addr>().unwrap().octets()
}

fn v6(text: &str) -> [u8; 16] {
    text.parse::<Ipv6Addr>().unwrap().octets()
}

/// Frames the kernel would not answer: from no host that can take a
/// reply, or not intact. Each is refused, and what is just inside each
/// limit is still read.
#[test]
fn martian_sources_port_zero_and_bad_checksums_are_refused() {
    let (good4, good6) = (query4(b"abc"), query6(b"abc"));
    let mut refused: Vec<(&str, Vec<u8>)> = Vec::new();
    let mut read_anyway: Vec<(&str, Vec<u8>)> = Vec::new();
    for (what, source) in [
        ("0.0.0.0", "0.0.0.0"),
        ("this network, 0/8", "0.255.255.255"),
        ("loopback", "127.0.0.1"),
        ("loopback, 127/8", "127.255.0.1"),
        ("multicast", "224.0.0.1"),
        ("multicast, top", "239.255.255.255"),
        ("limited broadcast", "255.255.255.255"),
        ("our own address", "198.51.100.1"),
        ("our network's broadcast", "198.51.100.255"),
    ] {
        refused.push((what, changed(&good4, 26, &v4(source))));
    }
    for (what, source) in [
        ("past 0/8", "1.0.0.0"),
        ("below loopback", "126.255.255.255"),
        ("past loopback", "128.0.0.0"),
        ("below multicast", "223.255.255.255"),
        ("class E (the kernel takes it)", "240.0.0.1"),
        ("below limited broadcast", "255.255.255.254"),
        ("next to ours", "198.51.100.254"),
    ] {
        read_anyway.push((what, changed(&good4, 26, &v4(source))));
    }
    for (what, source) in [
        ("unspecified", "::"),
        ("loopback", "::1"),
        ("multicast", "ff02::1"),
        ("multicast, global", "ff0e::1"),
        ("IPv4-mapped", "::ffff:198.51.100.2"),
        ("our own address", "2001:db8:5::1"),
    ] {
        refused.push((what, changed(&good6, 22, &v6(source))));
    }
    for (what, source) in [
        ("link-local", "fe80::2"),
        ("IPv4-compatible (deprecated)", "::198.51.100.2"),
        ("below multicast", "feff::1"),
    ] {
        read_anyway.push((what, changed(&good6, 22, &v6(source))));
    }
    for (what, base, udp) in [("IPv4", &good4, 34), ("IPv6", &good6, 54)] {
        refused.push((what, changed(base, udp, &[0, 0])));
        read_anyway.push((what, changed(base, udp, &[0, 1])));
        let sum = be16(base, udp + 6) as u16;
        let wrong = sum.wrapping_add(1).to_be_bytes();
        refused.push(("bad UDP checksum", damaged(base, udp + 6, &wrong)));
        refused.push(("payload changed", damaged(base, udp + 8, b"x")));
    }
    refused.push(("IPv6 without a UDP checksum", damaged(&good6, 60, &[0, 0])));
    let bad_ip = (be16(&good4, 24) as u16 ^ 0x0100).to_be_bytes();
    refused.push(("bad IPv4 header checksum", damaged(&good4, 24, &bad_ip)));
    refused.push(("IPv4 TTL changed", damaged(&good4, 22, &[1])));
    let mut no_checksum = damaged(&good4, 40, &[0, 0]);
    read_anyway.push(("IPv4 without a UDP checksum", no_checksum.clone()));
    no_checksum[44] ^= 0xff;
    read_anyway.push(("... whatever its payload", no_checksum));
    for group in [[0x01, 0, 0x5e, 0, 0, 1], [0xff; 6], [0x03, 0, 0, 0, 0, 2]] {
        refused.push(("group source MAC", damaged(&good4, 6, &group)));
    }
    read_anyway.push(("locally administered MAC", damaged(&good4, 6, &[0x06; 6])));
    for (what, f) in &refused {
        assert_eq!(read(f), None, "{what}");
    }
    for (what, f) in &read_anyway {
        assert!(read(f).is_some(), "{what}");
    }
}

/// How Linux leaves a UDP checksum for offload (`udp4_hwcsum`): the
/// pseudo-header's sum, not complemented. Frames from a veth peer come so.
#[test]
fn a_checksum_left_to_offload_by_a_sender_on_this_host_is_taken() {
    for (base, udp, addresses) in [(query4(b"abc"), 34, 26..34), (query6(b"abc"), 54, 22..54)] {
        let length = ((base.len() - udp) as u16).to_be_bytes();
        let partial = !checksum(&[&base[addresses], &[0, 17], &length]);
        let offloaded = damaged(&base, udp + 6, &partial.to_be_bytes());
        assert!(read(&offloaded).is_some(), "{partial:04x}");
        for wrong in [partial.wrapping_add(1), partial.wrapping_sub(1), !partial] {
            let f = damaged(&base, udp + 6, &wrong.to_be_bytes());
            assert_eq!(read(&f), None, "{wrong:04x}");
        }
    }
}

#[test]
fn the_host_addresses_are_the_ones_given() {
    // Without them, our own address is a source like another.
    let own = changed(&query4(b"q"), 26, &v4("198.51.100.1"));
    assert_eq!(parse(&own, &host()), Err(Dropped::MartianSource));
    assert!(parse(&own, &HostAddresses::default()).is_ok());
}

/// Each frame dropped says why, for the counters (black-box finding BJ-1:
/// none was counted anywhere); queries from the ports of services that
/// answer anything are dropped like those from port 0 (BJ-4: one forged
/// query started an endless loop with a chargen service).
#[test]
fn a_dropped_frame_says_why() {
    let good4 = query4(b"q");
    let from_port = |port: u16| changed(&good4, 34, &port.to_be_bytes());
    for port in [0, 7, 11, 13, 17, 19, 37] {
        assert_eq!(parse(&from_port(port), &host()), Err(Dropped::SourcePort));
    }
    for port in [53, 123, 1024] {
        assert!(parse(&from_port(port), &host()).is_ok(), "{port}");
    }
    let martian = changed(&good4, 26, &v4("127.0.0.1"));
    assert_eq!(parse(&martian, &host()), Err(Dropped::MartianSource));
    let sum = be16(&good4, 40) as u16;
    let bad = damaged(&good4, 40, &sum.wrapping_add(1).to_be_bytes());
    assert_eq!(parse(&bad, &host()), Err(Dropped::Checksum));
    assert_eq!(parse(&good4[..41], &host()), Err(Dropped::Malformed));
}

#[test]
fn padding_after_the_datagram_is_not_payload() {
    // Ethernet pads short frames to 60 bytes: the IP and UDP lengths say
    // where the message ends.
    let mut f = query4(b"q");
    f.resize(60, 0);
    let d = read(&f).unwrap();
    assert_eq!(&f[d.payload], b"q");
}

#[test]
fn malformed_and_foreign_frames_are_refused() {
    let good4 = query4(b"abc");
    let good6 = query6(b"abc");
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    // Checksums set again: each frame is wrong only in what it says.
    let mut with = |what, base: &Vec<u8>, at: usize, bytes: &[u8]| {
        cases.push((what, changed(base, at, bytes)));
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
        assert_eq!(read(&f), None, "{what}");
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
    assert_eq!(checksum(&[&header]), 0xb861, "heron-testkit's");
}

#[test]
fn replies_go_back_with_right_lengths_and_checksums() {
    // The query's ECN (CE) and DSCP bits, and an IPv6 flow label, set:
    // the replies carry none of them.
    let marked4 = seal(changed(&query4(b"question"), 14 + 1, &[0xb7]));
    let marked6 = changed(&query6(b"question"), 14, &[0x6b, 0x7a, 0xbc, 0xde]);
    for (query, v6) in [(marked4, false), (marked6, true)] {
        let d = read(&query).unwrap();
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
            assert_eq!(
                &ip[0..4],
                &[0x60, 0, 0, 0],
                "no traffic class or flow label"
            );
            sum(&ip[8..40], 17 + (8 + answer.len()) as u32)
        } else {
            assert_eq!(&ip[12..16], &[198, 51, 100, 1]);
            assert_eq!(&ip[16..20], &[198, 51, 100, 2]);
            assert_eq!(be16(ip, 2), 28 + answer.len());
            assert!(verifies(&ip[..20], 0), "IPv4 header checksum");
            assert_eq!(ip[1], 0, "no DSCP or ECN");
            sum(&ip[12..20], 17 + (8 + answer.len()) as u32)
        };
        assert!(verifies(udp, pseudo), "UDP checksum");
        // From our address: read back as a host without it would.
        let back = parse(f, &HostAddresses::default()).unwrap();
        assert_eq!(back.payload, d.payload.start..len);
    }
}

#[test]
fn a_reply_that_does_not_fit_the_frame_is_refused() {
    let query = query4(b"q");
    let d = read(&query).unwrap();
    let room = 100;
    let mut f = query.clone();
    f.resize(room, 0);
    let fits = vec![7u8; room - d.payload.start];
    assert_eq!(write_reply(&mut f, &d, &fits), Some(room));
    let mut f = query.clone();
    f.resize(room, 0);
    assert_eq!(write_reply(&mut f, &d, &[7u8; 1 + 100 - 42]), None);
}
