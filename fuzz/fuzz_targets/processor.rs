//! The whole query processor (`heron_server::processor`): one octet picks
//! the transport and the peer, the rest is the query. The catalog holds
//! edge.test as a primary zone (`allow-transfer`: 127.0.0.2 signed with
//! `xfr.fuzz.`, 127.0.0.3 unsigned) and sec.test as a secondary zone
//! (`allow-notify`: 127.0.0.4), so signed, unsigned, NOTIFY, AXFR and IXFR
//! inputs reach every layer. Never panics; every response parses, carries
//! the query's ID and fits the transport; a transfer is pulled to its end,
//! every message parsing, within 65535 octets, SOA first and last, and
//! signed (verified as a stream) when the request verified. A request
//! that verified is sent again and must be refused as a replay.
#![no_main]

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use heron_proto::message::{Header, Message, flags, parse_query};
use heron_proto::tsig::{self, Algorithm, Key, ResponseVerifier, TsigError};
use heron_proto::cookie::CookieSettings;
use heron_proto::{Name, RType, Rcode};
use heron_server::processor::cookies::Cookies;
use heron_server::processor::{Outcome, Processor, Request, Transport};
use heron_xfr::acl::{Acl, Rule};
use heron_xfr::primary::{Primary, ZonePolicy};
use heron_zone::{AnswerConfig, Catalog, load_zone_str};
use libfuzzer_sys::fuzz_target;

const ZONE: &str = include_str!("../../crates/heron/tests/data/differential/edge.test.zone");
const SECONDARY: &str = "$ORIGIN sec.test.\n$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.2\n";
/// The clock the target runs at (as the tsig target's and its seeds').
const NOW: u64 = 1_700_000_000;
/// The peers the first octet chooses from (bits 2 to 4).
const PEERS: [&str; 8] = [
    "127.0.0.2", "127.0.0.3", "127.0.0.4", "192.0.2.9", "::1", "127.0.0.2", "127.0.0.3", "127.0.0.4",
];
/// The largest UDP response the processor's settings allow.
const MAX_UDP: usize = 1232;

fn n(s: &str) -> Name {
    Name::parse(s).unwrap()
}

fn keys() -> Arc<Vec<Key>> {
    Arc::new(vec![Key::new(n("xfr.fuzz"), Algorithm::HmacSha256, b"fuzz secret".to_vec())])
}

fn processor() -> &'static Processor {
    static PROCESSOR: OnceLock<Processor> = OnceLock::new();
    PROCESSOR.get_or_init(|| {
        let mut catalog = Catalog::new();
        for (text, origin) in [(ZONE, "edge.test"), (SECONDARY, "sec.test")] {
            let zone = load_zone_str(text, origin, &n(origin)).expect("fuzz zone loads");
            catalog.insert(zone.zone);
        }
        let rule = |prefix: &str, key: Option<&str>| Rule {
            prefix: prefix.parse().unwrap(),
            key: key.map(n),
        };
        let transfer = ZonePolicy {
            allow_transfer: Acl::new(vec![
                rule("127.0.0.2/32", Some("xfr.fuzz")),
                rule("127.0.0.3/32", None),
            ]),
            ..ZonePolicy::default()
        };
        let notify = ZonePolicy {
            allow_notify: Acl::new(vec![rule("127.0.0.4/32", None)]),
            ..ZonePolicy::default()
        };
        let policies = HashMap::from([(n("edge.test"), transfer), (n("sec.test"), notify)]);
        let primary = Arc::new(Primary::new(policies, 1 << 20));
        let catalog = Arc::new(ArcSwap::from_pointee(catalog));
        let config = AnswerConfig {
            max_udp_payload: MAX_UDP as u16,
            ..AnswerConfig::default()
        };
        // Cookies on, as by default: COOKIE options, and queries with no
        // question asking for a server cookie (RFC 7873 5.4), reach it.
        let cookies = Cookies::new(&CookieSettings::default(), [7; 16], NOW, MAX_UDP as u16);
        Processor::new(catalog, config, primary, keys())
            .with_secondaries([n("sec.test")])
            .with_cookies(cookies)
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    let transport = [Transport::Udp, Transport::Tcp, Transport::Tls, Transport::Udp]
        [usize::from(pick & 3)];
    let ip: IpAddr = PEERS[usize::from(pick >> 2) & 7].parse().unwrap();
    let req = Request {
        bytes,
        peer: SocketAddr::new(ip, 5300),
        transport,
        now: NOW,
        local: None,
        received: std::time::Instant::now(),
    };
    let (mut out, mut events) = (Vec::new(), Vec::new());
    match processor().process(&req, &mut out, &mut events) {
        // Only what is not a query: a runt or a response.
        Outcome::Nothing => assert!(Header::read(bytes).is_none_or(|h| h.has(flags::QR))),
        Outcome::Response => {
            check_message(bytes, &out);
            if transport == Transport::Udp {
                assert!(out.len() <= MAX_UDP, "{} octets over UDP", out.len());
            }
        }
        // A dynamic update, for the update task: its answer is well formed.
        Outcome::Update(request) => {
            check_message(bytes, &request.response(Rcode::REFUSED, NOW));
        }
        Outcome::Transfer(mut transfer) => {
            assert_ne!(transport, Transport::Udp, "no transfer over UDP");
            let verified = tsig::verify_request(bytes, &*keys(), NOW).ok().flatten();
            let mut verifier = verified.map(|v| ResponseVerifier::new(&v.key, v.mac));
            let mut messages = transfer.messages();
            let mut soas = (None, None);
            while messages.next(&mut out, NOW).expect("every record fits") {
                let m = check_message(bytes, &out);
                if let Some(verifier) = verifier.as_mut() {
                    verifier.verify(&out, NOW).expect("each message is signed");
                }
                soas.0 = soas.0.or_else(|| m.answers.first().cloned());
                soas.1 = m.answers.last().cloned().or(soas.1);
            }
            let (first, last) = (soas.0.expect("a record"), soas.1.expect("a record"));
            assert_eq!(first.rtype, RType::SOA);
            assert_eq!(first, last, "a transfer ends with the SOA it began with");
        }
    }
    check_replay(&req);
});

/// A signed request that verified, sent again (RFC 8945 5.2.3, `replay.rs`
/// since cde16e7): from an address no input sends from, it is a replay
/// (NOTAUTH with a signed BADTIME) whoever sent it first; from its own
/// address, a transfer request is still a replay, and any other request is
/// not refused as one (a retransmission, answered again) unless an earlier
/// input sent the same bytes from another address first.
fn check_replay(req: &Request) {
    let verified = tsig::verify_request(req.bytes, &*keys(), NOW).ok().flatten();
    let (Some(v), Ok(q)) = (verified, parse_query(req.bytes)) else {
        return;
    };
    let transfer = matches!(q.qtype, RType::AXFR | RType::IXFR);
    if transfer {
        assert_replayed(req, &v);
    }
    let elsewhere = Request {
        peer: SocketAddr::new("198.51.100.1".parse().unwrap(), 5300),
        ..*req
    };
    assert_replayed(&elsewhere, &v);
}

fn assert_replayed(req: &Request, v: &tsig::Verified) {
    let mut out = Vec::new();
    let outcome = processor().process(req, &mut out, &mut Vec::new());
    assert!(matches!(outcome, Outcome::Response), "a replay is refused: {outcome:?}");
    let m = check_message(req.bytes, &out);
    assert_eq!(m.rcode(), Rcode::NOTAUTH);
    let mut verifier = ResponseVerifier::new(&v.key, v.mac.clone());
    assert_eq!(verifier.verify(&out, NOW), Err(TsigError::BadTime));
}

/// A response to `query` parses, carries its ID and fits a TCP message.
fn check_message(query: &[u8], response: &[u8]) -> Message {
    assert!(response.len() <= usize::from(u16::MAX));
    let m = Message::parse(response).expect("our response parses");
    assert_eq!(m.header.id, u16::from_be_bytes([query[0], query[1]]));
    m
}
