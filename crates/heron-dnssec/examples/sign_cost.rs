//! The cost of one signature: `sign_cost [COUNT] [13|15|8] [THREADS]`
//! makes COUNT (default 100,000) signatures on each of THREADS (default 1)
//! threads at once, with one new key, each over a message like a signed A
//! RRset's (RRSIG header and the RRset in canonical form, 64 octets), so
//! that `/usr/bin/time` gives CPU seconds per signature for the bound
//! `signatures × cost ÷ cores` of `docs/benchmarks/signing.md`. With a
//! thread per core the cost is what each core pays while all sign, as
//! they do when a zone is signed (the cores of a machine share caches and
//! clocks: on the development machine a signature cost 3% more so).

use std::time::Instant;

use heron_dnssec::keys::{Algorithm, SigningKey};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let count: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let algorithm = args
        .get(2)
        .and_then(|a| a.parse().ok())
        .and_then(Algorithm::from_number)
        .unwrap_or(Algorithm::EcdsaP256Sha256);
    let threads: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(1).max(1);
    let (key, _) = SigningKey::generate(algorithm).expect("a key");
    let started = Instant::now();
    let octets: usize = std::thread::scope(|scope| {
        let signers: Vec<_> = (0..threads)
            .map(|_| scope.spawn(|| sign_many(&key, count)))
            .collect();
        signers.into_iter().map(|s| s.join().expect("signed")).sum()
    });
    let wall = started.elapsed().as_secs_f64();
    println!(
        "{count} signatures on each of {threads} threads ({octets} octets) in {wall:.3} s wall: \
         {:.2} µs each",
        wall * 1e6 / count as f64
    );
}

/// Makes `count` signatures; the octets of signature made.
fn sign_many(key: &SigningKey, count: usize) -> usize {
    let mut message = [0x5a_u8; 64];
    let mut octets = 0;
    for i in 0..count {
        // A different message each time, as each RRset is.
        message[..8].copy_from_slice(&(i as u64).to_be_bytes());
        octets += key.sign(&message).expect("signed").len();
    }
    octets
}
