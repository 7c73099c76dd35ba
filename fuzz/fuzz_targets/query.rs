//! Any bytes as a query, over UDP and TCP, against a zone with every kind of
//! name: the engine must answer or drop, never panic, and every response must
//! parse and stay within the transport's size limit.
#![no_main]

use std::sync::OnceLock;

use heron_proto::Name;
use heron_proto::message::Message;
use heron_zone::{AnswerConfig, Answered, Catalog, Transport, answer, load_zone_str};
use libfuzzer_sys::fuzz_target;

const ZONE: &str = include_str!("../../crates/heron/tests/data/differential/edge.test.zone");

fn catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let origin = Name::parse("edge.test").unwrap();
        let loaded = load_zone_str(ZONE, "edge.test.zone", &origin).expect("fuzz zone loads");
        let mut catalog = Catalog::new();
        catalog.insert(loaded.zone);
        catalog
    })
}

fuzz_target!(|data: &[u8]| {
    let config = AnswerConfig {
        version: Some("fuzz".into()),
        ..AnswerConfig::default()
    };
    let mut out = Vec::new();
    for transport in [Transport::Udp, Transport::Tcp] {
        if answer(catalog(), &config, data, transport, &mut out) == Answered::Response {
            let limit = if transport == Transport::Udp {
                1232
            } else {
                65535
            };
            assert!(out.len() <= limit);
            Message::parse(&out).expect("our response parses");
        }
    }
});
