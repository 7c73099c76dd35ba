//! Any bytes as an Ethernet frame on the AF_XDP path: the header reader
//! never panics, and a frame it accepts turns into a reply that it
//! accepts again, from the server to the same peer, with the payload
//! given.
//!
//! Input: two octets of payload length (big-endian, cut to what fits),
//! then the frame.
#![no_main]

use heron_server::xdp::packet::{parse, write_reply};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((len, frame)) = data.split_first_chunk::<2>() else {
        return;
    };
    let Some(query) = parse(frame) else {
        return;
    };
    assert!(query.payload.end <= frame.len());
    let mut reply = frame.to_vec();
    reply.resize(2048, 0);
    let payload = vec![0xa5; usize::from(u16::from_be_bytes(*len)) % 2048];
    let Some(n) = write_reply(&mut reply, &query, &payload) else {
        assert!(query.payload.start + payload.len() > reply.len());
        return;
    };
    let back = parse(&reply[..n]).expect("a reply reads back");
    assert_eq!(back.payload.len(), payload.len());
    assert_eq!(&reply[back.payload], &payload[..]);
    assert_eq!(back.peer.ip().is_ipv6(), query.peer.ip().is_ipv6());
});
