//! Answers one query many times: a fixed workload for
//! `valgrind --tool=callgrind`, whose instruction counts per query are
//! stable even on a noisy machine.
//!
//!     cargo build --release -p heron-zone --example answer_loop
//!     valgrind --tool=callgrind target/release/examples/answer_loop www.bench.test 1 100000
//!     # another zone: ... QNAME QTYPE COUNT ZONE-FILE ORIGIN
//!     # with the DO bit (a signed zone's proofs): ... ZONE-FILE ORIGIN do

use heron_proto::Name;
use heron_zone::{AnswerConfig, Answered, Catalog, Transport, answer, load_zone_str};

const ZONE: &str = include_str!("../benches/bench.test.zone");

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let qname = args.get(1).map_or("www.bench.test", |s| s.as_str());
    let qtype: u16 = args.get(2).map_or(1, |s| s.parse().unwrap());
    let count: usize = args.get(3).map_or(100_000, |s| s.parse().unwrap());
    let (text, origin) = match (args.get(4), args.get(5)) {
        (Some(file), Some(origin)) => (std::fs::read_to_string(file).unwrap(), origin.as_str()),
        _ => (ZONE.to_string(), "bench.test"),
    };
    let origin = Name::parse(origin).unwrap();
    let mut catalog = Catalog::new();
    catalog.insert(load_zone_str(&text, "zone", &origin).unwrap().zone);
    let mut q = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1];
    q.extend_from_slice(Name::parse(qname).unwrap().as_wire());
    q.extend_from_slice(&qtype.to_be_bytes());
    let dnssec_ok = if args.get(6).is_some_and(|a| a == "do") {
        0x80
    } else {
        0
    };
    q.extend_from_slice(&[0, 1, 0, 0, 41, 4, 0xD0, 0, 0, dnssec_ok, 0, 0, 0]);
    let config = AnswerConfig::default();
    let mut out = Vec::with_capacity(4096);
    let mut answered = 0;
    for _ in 0..count {
        answered += (answer(&catalog, &config, &q, Transport::Udp, &mut out) == Answered::Response)
            as usize;
    }
    println!("{answered} answers of {} octets", out.len());
}
