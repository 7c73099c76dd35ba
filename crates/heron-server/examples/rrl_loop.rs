//! Response rate limiting's cost on responses it does not limit, for an
//! instruction count under callgrind:
//!
//! ```sh
//! cargo build --release -p heron-server --example rrl_loop
//! valgrind --tool=callgrind target/release/examples/rrl_loop 100000
//! valgrind --tool=callgrind target/release/examples/rrl_loop 200000
//! ```
//!
//! The difference of the two totals over 100,000 is the instructions of
//! one check (setup and exit cancel out).
//!
//! Measured 2026-11-23 at e7d138b (+ this example): 19,385,093 and
//! 38,285,093 instructions, so 189 per iteration, of which 22 are this
//! loop's own (`main` in `callgrind_annotate`) and about 50 foldhash over
//! the 17-octet name: about 167 per check. A name hash handed over by the
//! answer engine (it hashes the query name for its lookup) would save most
//! of the 50.

use std::hint::black_box;
use std::net::IpAddr;

use heron_server::rrl::{Action, Response, Rrl, RrlSettings};

fn main() {
    let checks: u64 = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    let mut rrl = Rrl::new(&RrlSettings::default(), 1).expect("default settings");
    // 1000 clients in 1000 /24s, each well under 20 a second, one name.
    let clients: Vec<IpAddr> = (0..1000u32)
        .map(|i| IpAddr::from((0x0A00_0000 | (i << 8)).to_be_bytes()))
        .collect();
    let response = Response::Positive {
        name: b"\x03www\x07example\x03com\x00",
        qtype: 1,
    };
    let mut sent = 0u64;
    for i in 0..checks {
        let client = clients[(i % 1000) as usize];
        let now_ms = i / 10; // 10,000 checks a second: 10 a second each
        let verdict = rrl.check(black_box(client), black_box(response), now_ms);
        sent += (verdict.action == Action::Send) as u64;
    }
    assert_eq!(sent, checks, "none limited");
    println!("{checks} checks, all sent");
}
