//! Heron transports and the query processor between them and the zones.
//!
//! * [`processor`]: one I/O-free path from a query's bytes to a response,
//!   a transfer stream or nothing, plus events; its layers (parse, ACL,
//!   TSIG, answer / transfer / NOTIFY, sign, size) are listed there.
//! * [`service`]: the processor with what acts on its events (NOTIFY to
//!   the secondary side, refusal counters) and the transfer limit: what
//!   every transport is handed.
//! * [`udp`]: one OS thread per worker, each with its own `SO_REUSEPORT`
//!   socket, so workers share nothing; a batch is answered by the engine
//!   and only its deferred messages go through the processor's layers.
//! * [`tcp`]: RFC 7766 on the async runtime: length-prefixed messages,
//!   many and pipelined queries per connection, a bound on answers queued
//!   per connection, idle timeout and a deadline for each message, limits
//!   in total and per client network; transfers pulled from the processor one
//!   message at a time.
//! * [`tls`]: DNS over TLS (RFC 7858) and XFR over TLS (RFC 9103): the
//!   TCP connections of [`tcp`] under TLS.
//! * [`dnstap`]: the query log's output: a bounded queue and a thread
//!   writing Frame Streams to a file or a reader's socket.
//! * [`rrl`]: response rate limiting, a pure per-worker table (no I/O, no
//!   clock) for the query processor's RRL layer.
//!
//! All read the current [`Catalog`] snapshot from a [`SharedCatalog`];
//! a reload swaps in a new snapshot without stopping any.

pub mod datagram;
pub mod dnstap;
pub mod http;
pub mod ports;
pub mod processor;
pub mod rrl;
pub mod service;
pub mod stats;
pub mod tcp;
pub mod tls;
pub mod udp;
pub mod update;
pub mod xdp;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use heron_zone::{AnswerConfig, Catalog};

/// The catalog all transports answer from; swapped whole on reload.
pub type SharedCatalog = Arc<ArcSwap<Catalog>>;

/// TCP limits (RFC 7766 6.2: servers must bound resources per client).
#[derive(Clone, Debug)]
pub struct TcpLimits {
    /// Close a connection that begins no message for this long after the
    /// last one (or after it opened).
    pub idle_timeout: Duration,
    /// Close a connection whose message is not complete this long after
    /// its first byte, however often bytes come (slowloris).
    pub message_timeout: Duration,
    pub max_connections: usize,
    pub max_connections_per_client: usize,
    /// Addresses are counted as one client per network of these lengths.
    pub ipv4_client_prefix: u8,
    pub ipv6_client_prefix: u8,
    /// Serve TCP and TLS on Heron's own event loops, one per worker
    /// (`tcp::event_loop`), instead of on the async runtime.
    pub event_loop: bool,
}

impl Default for TcpLimits {
    fn default() -> Self {
        TcpLimits {
            idle_timeout: Duration::from_secs(10),
            message_timeout: Duration::from_secs(5),
            max_connections: 10_000,
            max_connections_per_client: 100,
            ipv4_client_prefix: 32,
            ipv6_client_prefix: 56,
            event_loop: true,
        }
    }
}

/// Everything a running server needs.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub listen: Vec<SocketAddr>,
    pub workers: usize,
    /// CPUs to pin UDP workers to, round robin; empty leaves it to the OS.
    pub cpu_affinity: Vec<usize>,
    /// Longest a UDP worker waits for datagrams to gather under steady
    /// load (`udp::coalesce`); zero: never.
    pub udp_coalesce: Duration,
    /// Whether a UDP worker sends runs of equal-sized replies to one
    /// client as one segmented message (UDP GSO, `udp::batch`).
    pub udp_segmentation: bool,
    pub tcp: TcpLimits,
    pub answer: AnswerConfig,
    /// DNS over TLS, if configured.
    pub tls: Option<TlsListen>,
    /// The AF_XDP fast path for UDP, if configured.
    pub xdp: Option<xdp::XdpConfig>,
    /// Response rate limiting on UDP (`[rrl]`); None: off.
    pub rrl: Option<rrl::RrlSettings>,
}

/// Where DNS over TLS is served and with which certificate.
#[derive(Clone, Debug)]
pub struct TlsListen {
    pub listen: Vec<SocketAddr>,
    pub settings: Arc<rustls::ServerConfig>,
    /// Where `settings` takes its certificate from: a reload puts a
    /// renewed one there.
    pub certificate: Arc<tls::CertificateSlot>,
    /// The certificate and key files, which a reload reads again.
    pub files: Vec<std::path::PathBuf>,
    /// Why the certificate read before was kept instead of the files'
    /// (they could not be looked at), for the reload's answer.
    pub kept: Option<String>,
}
