//! Cost of one answer, by kind of answer. Negative answers should cost no
//! more than positive ones, and nothing here may allocate.
//!
//!     cargo bench -p heron-zone --bench answer

use criterion::{Criterion, criterion_group, criterion_main};
use heron_proto::Name;
use heron_zone::{AnswerConfig, Catalog, Transport, answer, load_zone_str};

const ZONE: &str = include_str!("bench.test.zone");

fn query(name: &str, qtype: u16, edns: bool) -> Vec<u8> {
    let mut m = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, edns as u8];
    m.extend_from_slice(Name::parse(name).unwrap().as_wire());
    m.extend_from_slice(&qtype.to_be_bytes());
    m.extend_from_slice(&[0, 1]);
    if edns {
        m.extend_from_slice(&[0, 0, 41, 4, 0xD0, 0, 0, 0, 0, 0, 0]);
    }
    m
}

fn bench_answers(c: &mut Criterion) {
    let origin = Name::parse("bench.test").unwrap();
    let mut catalog = Catalog::new();
    catalog.insert(load_zone_str(ZONE, "bench.zone", &origin).unwrap().zone);
    let config = AnswerConfig::default();
    let cases = [
        ("positive A", query("www.bench.test", 1, true)),
        ("NXDOMAIN", query("nothere.bench.test", 1, true)),
        ("NODATA", query("www.bench.test", 28, true)),
        ("apex MX + additional", query("bench.test", 15, true)),
        ("wildcard", query("x.wild.bench.test", 1, true)),
        ("CNAME chain", query("alias.bench.test", 1, true)),
        ("referral", query("a.sub.bench.test", 1, true)),
        ("REFUSED", query("www.example.org", 1, true)),
    ];
    let mut out = Vec::with_capacity(4096);
    let mut group = c.benchmark_group("answer");
    for (name, q) in &cases {
        group.bench_function(*name, |b| {
            b.iter(|| answer(&catalog, &config, q, Transport::Udp, &mut out))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_answers);
criterion_main!(benches);
