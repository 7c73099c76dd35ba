//! Answers a benchmark query file in process, without the network: the
//! DNS work alone, with the memory traffic of the real zones (which
//! `answer_loop` and callgrind do not show).
//!
//!     cargo build --release -p heron-zone --example answer_workload
//!     target/release/examples/answer_workload QUERIES ZONE-FILE-OR-DIR [ORIGIN] [ROUNDS]
//!
//! A directory loads every `NAME.zone` in it as zone NAME (the suite's
//! 100,000-zone workload); a file needs its ORIGIN. Prints nanoseconds
//! per query for each round, queries in the file's (random) order,
//! after the time loading took: answered one at a time, and in batches of
//! 32 with the UDP path's lookahead (`heron_zone::lookahead`). Then the
//! process's RSS and how much of it is in huge pages (none on a machine
//! without transparent huge pages). Instructions per query, either way:
//!
//!     valgrind --tool=callgrind --toggle-collect='*batched*' \
//!         target/release/examples/answer_workload QUERIES ZONE ORIGIN 1
//!
//! In a server the kernel's UDP path runs between two batches and pushes
//! the answer path's memory out of the caches. `EVICT_KB=N` models that:
//! N KiB are written between batches, outside the time and the counts
//! taken (the batches' time is then printed on its own). With callgrind's
//! cache model (L2 as its last level), the misses per query that the
//! lookahead and the zone layout are meant to keep down:
//!
//!     EVICT_KB=2048 ONLY_BATCHED=1 valgrind --tool=callgrind --cache-sim=yes \
//!         --D1=32768,8,64 --I1=32768,8,64 --LL=1048576,8,64 \
//!         --collect-atstart=no --toggle-collect='*BatchAnswerer*prepare*' \
//!         --toggle-collect='*answer_prepared*' \
//!         target/release/examples/answer_workload QUERIES ZONE ORIGIN 1

use std::path::Path;
use std::time::{Duration, Instant};

use heron_proto::{Name, RType};
use heron_zone::{
    AnswerConfig, Answered, BatchAnswerer, Catalog, Transport, answer, load_zone_file,
};

/// Queries per batch, as the UDP path receives them.
const BATCH: usize = 32;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (queries, zones) = (&args[1], Path::new(&args[2]));
    let mut catalog = Catalog::new();
    let loading = Instant::now();
    let rounds: usize = if zones.is_dir() {
        for entry in std::fs::read_dir(zones).unwrap() {
            let path = entry.unwrap().path();
            let stem = path.file_name().unwrap().to_str().unwrap();
            let origin = Name::parse(stem.trim_end_matches(".zone")).unwrap();
            catalog.insert(load_zone_file(&path, &origin).unwrap().zone);
        }
        args.get(3).map_or(5, |r| r.parse().unwrap())
    } else {
        let origin = Name::parse(&args[3]).unwrap();
        catalog.insert(load_zone_file(zones, &origin).unwrap().zone);
        args.get(4).map_or(5, |r| r.parse().unwrap())
    };
    println!("loaded in {} ms", loading.elapsed().as_millis());
    let wire = read_queries(queries);
    let config = AnswerConfig::default();
    let mut out = Vec::with_capacity(4096);
    let mut batch = Batch {
        answerer: BatchAnswerer::default(),
        // One response buffer per query, as the UDP path has.
        responses: (0..BATCH).map(|_| Vec::with_capacity(4096)).collect(),
        evict: vec![0; env_number("EVICT_KB") << 10],
    };
    let only_batched = env_number("ONLY_BATCHED") != 0;
    for _ in 0..rounds {
        let start = Instant::now();
        let answered = match only_batched {
            true => 0,
            false => one_at_a_time(&catalog, &config, &wire, &mut out),
        };
        let one = start.elapsed().as_nanos() as f64 / wire.len() as f64;
        let start = Instant::now();
        let answering = batched(&catalog, &config, &wire, &mut batch);
        let batched = start.elapsed().as_nanos() as f64 / wire.len() as f64;
        if !batch.evict.is_empty() {
            let ns = answering.as_nanos() as f64 / wire.len() as f64;
            println!("{ns:.0} ns/query answering in batches, the eviction left out");
        }
        println!(
            "{one:.0} ns/query one at a time, {batched:.0} in batches with lookahead \
             ({answered} of {} answered)",
            wire.len()
        );
    }
    let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
    for line in rollup
        .lines()
        .filter(|l| l.starts_with("Rss") || l.contains("Huge"))
    {
        println!("{line}");
    }
}

/// dnsperf's format: `NAME TYPE` per line.
/// Each query alone, as TCP answers them. Not inlined, so that a profiler
/// can count it apart (`valgrind --tool=callgrind
/// --toggle-collect='*one_at_a_time*'`).
#[inline(never)]
fn one_at_a_time(
    catalog: &Catalog,
    config: &AnswerConfig,
    wire: &[Vec<u8>],
    out: &mut Vec<u8>,
) -> usize {
    let mut answered = 0;
    for q in wire {
        let r = answer(catalog, config, q, Transport::Udp, out);
        answered += (r == Answered::Response) as usize;
    }
    answered
}

/// What answering in batches keeps from batch to batch.
struct Batch {
    answerer: BatchAnswerer,
    responses: Vec<Vec<u8>>,
    /// Written between batches (`EVICT_KB`).
    evict: Vec<u8>,
}

/// In batches, as the UDP path answers them (`--toggle-collect='*batched*'`).
/// Returns the time spent answering, without the evictions.
#[inline(never)]
fn batched(catalog: &Catalog, config: &AnswerConfig, wire: &[Vec<u8>], b: &mut Batch) -> Duration {
    let mut answering = Duration::ZERO;
    for batch in wire.chunks(BATCH) {
        evict(&mut b.evict);
        let start = Instant::now();
        let mut slots = Default::default();
        let prepared = b
            .answerer
            .prepare(catalog, batch.iter().map(Vec::as_slice), &mut slots);
        for (i, q) in batch.iter().enumerate() {
            prepared.answer(i, config, q, Transport::Udp, &mut b.responses[i]);
        }
        answering += start.elapsed();
    }
    answering
}

/// Writes a byte in every cache line of `lines`, pushing what was
/// cached before out, as the kernel's work between two batches does in
/// a server. Not inlined, so that callgrind can leave it out.
#[inline(never)]
fn evict(lines: &mut [u8]) {
    for line in lines.chunks_mut(64) {
        line[0] = line[0].wrapping_add(1);
    }
    std::hint::black_box(lines);
}

/// A number from the environment, 0 when unset.
fn env_number(name: &str) -> usize {
    std::env::var(name).map_or(0, |v| v.parse().expect("a number"))
}

fn read_queries(path: &str) -> Vec<Vec<u8>> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter_map(|line| line.split_once(' '))
        .map(|(name, rtype)| {
            let rtype = RType::from_mnemonic(rtype.as_bytes()).unwrap();
            let mut q = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1];
            q.extend_from_slice(Name::parse(name).unwrap().as_wire());
            q.extend_from_slice(&rtype.0.to_be_bytes());
            q.extend_from_slice(&[0, 1, 0, 0, 41, 4, 0xD0, 0, 0, 0, 0, 0, 0]);
            q
        })
        .collect()
}
