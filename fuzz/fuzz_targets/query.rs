//! Any bytes as a query, over UDP and TCP, against a zone with every kind of
//! name: the engine must answer or drop, never panic, and every response must
//! parse and stay within the transport's size limit. Answered in a batch
//! (the UDP path, which loads memory ahead and hands the answer the hash
//! of its first lookup), beside well-formed queries, the response must be
//! byte for byte the one answered alone.
#![no_main]

use std::sync::OnceLock;

use heron_proto::Name;
use heron_proto::message::Message;
use heron_zone::{
    AnswerConfig, Answered, BatchAnswerer, Catalog, Transport, answer, load_zone_str,
};
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
    answers_alike_in_a_batch(&config, data);
});

/// `data` between two well-formed queries, answered as a batch, gets the
/// answers each gets alone.
fn answers_alike_in_a_batch(config: &AnswerConfig, data: &[u8]) {
    let mut known = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    known.extend_from_slice(b"\x03www\x04edge\x04test\x00\x00\x01\x00\x01");
    let batch = [&known[..], data, &known[..]];
    let mut answerer = BatchAnswerer::default();
    let mut slots = Default::default();
    let prepared = answerer.prepare(catalog(), batch, &mut slots);
    for (i, query) in batch.into_iter().enumerate() {
        let (mut batched, mut alone) = (Vec::new(), Vec::new());
        let (how, _) = prepared.answer(i, config, query, Transport::Udp, &mut batched);
        assert_eq!(how, answer(catalog(), config, query, Transport::Udp, &mut alone));
        if how == Answered::Response {
            assert_eq!(batched, alone, "query {i} answered otherwise in a batch");
        }
    }
}
