//! Test helpers for Heron: reference name servers (NSD, Knot, BIND) and
//! Heron itself as child processes, a primary in the test's own process
//! that misbehaves on cue, a minimal DNS client, response
//! normalisation for differential comparison, dig/kdig runners, and
//! checked-in signed zones with `delv` to validate answers from them.
//!
//! Dev-only; depends on std, `heron-proto`, `heron-sys` and `socket2`.

pub mod catalog;
pub mod client;
pub mod fake_primary;
pub mod frames;
pub mod netns;
pub mod normalize;
mod peer_conf;
pub mod primary;
pub mod process;
pub mod relay;
pub mod secondary;
pub mod signer;
pub mod tools;

pub use catalog::CatalogConsumer;
pub use client::{
    EdnsOpts, QueryOpts, answers_on, build_query, query_tcp, query_tcp_pipelined, query_udp,
    soa_serial, try_query_tcp, try_query_tcp_pipelined, try_query_udp, try_query_udp_from,
};
pub use fake_primary::{FakePrimary, IxfrAnswer};
pub use normalize::{Normalized, diff, normalize};
pub use primary::{Primary, TlsServe, knot_primary_of};
pub use process::{ServerKind, ServerProcess, free_port, live_group_members};
pub use relay::Relay;
pub use secondary::{Secondary, TsigSpec, XotTrust};
pub use signer::{Chain, SignedZone, Validation};
pub use tools::{
    DigOutput, DigTool, ToolQuery, check_dig_output, check_with_dig_and_kdig, heron_reconfigure,
    kdig_expire, run_dig, run_dig_with,
};

/// What to tell someone whose machine lacks a peer server or tool.
pub const INSTALL_HINT: &str = "install the reference servers and tools with the README's test \
     command (Debian: apt-get install nsd knot knot-dnsutils bind9 bind9-dnsutils)";

/// A Unix stream socket at `path`, bound and listening, that never
/// accepts, and whose backlog (0) one connection of its own already
/// takes: a blocking connect to it waits for ever. A deaf peer, held
/// until both are dropped.
pub fn deaf_unix_listener(
    path: &std::path::Path,
) -> (socket2::Socket, std::os::unix::net::UnixStream) {
    use socket2::{Domain, SockAddr, Socket, Type};
    let listener = Socket::new(Domain::UNIX, Type::STREAM, None).expect("a Unix socket");
    let address = SockAddr::unix(path).expect("a Unix socket path");
    listener.bind(&address).expect("bind the deaf listener");
    listener.listen(0).expect("listen");
    let filler = std::os::unix::net::UnixStream::connect(path).expect("the backlog's one place");
    (listener, filler)
}

/// Whether `ok` comes true within `limit`, asked every 20 ms: how a test
/// waits, bounded, for a server to get somewhere.
pub fn eventually_within(limit: std::time::Duration, mut ok: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if ok() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    false
}
