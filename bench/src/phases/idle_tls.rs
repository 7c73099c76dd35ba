//! Memory per idle DNS-over-TLS connection (issue 40): each server's TLS
//! listener is sent connections that each finish a TLS handshake (rustls
//! client, the certificate not checked: the suite made it), ask one
//! question with the EDNS TCP keepalive option (RFC 7828), read the
//! answer and then stay open, silent. The server's RSS with them held,
//! less its RSS before, over the connections opened, is what an idle TLS
//! client costs it. Kernel socket memory is not in RSS: the machine's
//! kernel slab (/proc/meminfo `Slab:`: the socket structures) and TCP
//! buffer pages (/proc/net/sockstat `TCP: mem`), both ends of every
//! connection and anything else on the machine, are read beside it.
//!
//! Up to 100,000 connections: they come from many loopback addresses
//! ([`PER_SOURCE`] each, well inside the local port range of each
//! address), opened by [`OPENERS`] threads at once; the suite's own and
//! the servers' open-files limits are raised for them (`suite.rs`), and
//! every server is configured to hold them for longer than opening them
//! takes. The client keeps only the sockets (its TLS state is dropped,
//! which sends nothing) and checks after the reading that every
//! connection is still open (no end of stream). Each count adds to the
//! connections of the one before; all close with a reset at the end.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Ctx;
use super::idle_tcp::MemoryProbe;
use crate::interrupt::interrupted;
use crate::results::IdleTls;
use crate::servers::{Kind, Launch, Server, TlsFiles};
use crate::workloads::Workload;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme};

/// Connections held, in steps, by `--idle-tls-only` (and with --quick).
pub const COUNTS: [usize; 2] = [10_000, 100_000];
pub const QUICK_COUNTS: [usize; 1] = [1_000];
/// Connections from one source address: a fifth of the 28,232 ports of
/// Linux's default local port range, which each address has to itself.
pub const PER_SOURCE: usize = 5_000;
/// Threads opening connections at once (the client's handshakes overlap
/// the server's).
pub const OPENERS: usize = 4;
/// Seconds the servers keep an idle connection in this phase: far
/// longer than opening 100,000 takes.
pub const IDLE_TIMEOUT_S: u64 = 900;
/// The longest a handshake and its one answer may take.
const CONNECT_WAIT: Duration = Duration::from_secs(10);
/// The longest the opening of one step may take in all.
const STEP_LIMIT: Duration = Duration::from_secs(900);
/// Quiet time before memory is read, for the server to settle.
const SETTLE: Duration = Duration::from_millis(1000);

/// What the clients do: where to, what to ask, from how many addresses.
pub struct Clients {
    pub addr: SocketAddr,
    /// The question, unframed.
    pub query: Vec<u8>,
    pub per_source: usize,
    pub openers: usize,
}

/// Holds `counts` connections in turn (each step adds to the last) as
/// `clients` say; `memory` reads the server. One result per count.
pub fn measure(
    clients: &Clients,
    counts: &[usize],
    memory: &dyn MemoryProbe,
) -> Result<Vec<IdleTls>, String> {
    let config = Arc::new(client_config());
    let (rss_before_kib, _) = memory.memory();
    let (sockets_before, tcp_mem_before_pages) = sockstat_tcp();
    let slab_before_kib = slab_kib();
    let mut held: Vec<TcpStream> = Vec::new();
    let (mut asked, mut failed, mut first_error) = (0usize, 0usize, None);
    let mut out = Vec::new();
    for &count in counts {
        let started = Instant::now();
        let range = asked..count.max(asked);
        let opened = open_all(clients, &config, range.clone(), started + STEP_LIMIT)?;
        asked = range.end;
        held.extend(opened.streams);
        failed += opened.failed;
        first_error = first_error.or(opened.first_error);
        let open_s = started.elapsed().as_secs_f64();
        std::thread::sleep(SETTLE);
        let (rss_with_kib, _) = memory.memory();
        let (sockets_with, tcp_mem_with_pages) = sockstat_tcp();
        let slab_with_kib = slab_kib();
        let still_open = held.iter_mut().map(is_open).filter(|&open| open).count();
        out.push(IdleTls {
            server: String::new(),
            asked: count,
            opened: asked - failed,
            still_open,
            rss_before_kib,
            rss_with_kib,
            open_s,
            sources: asked.div_ceil(clients.per_source.max(1)),
            tcp_mem_before_pages,
            tcp_mem_with_pages,
            slab_before_kib,
            slab_with_kib,
            tcp_sockets_before: sockets_before,
            tcp_sockets_with: sockets_with,
            first_error: first_error.clone(),
            doctor: None,
        });
        if interrupted() {
            break;
        }
    }
    held.into_iter().for_each(close_with_reset);
    Ok(out)
}

/// Connections opened by one step.
struct Opened {
    streams: Vec<TcpStream>,
    failed: usize,
    first_error: Option<String>,
}

/// Opens connections `range` (their numbers choose their source
/// addresses) from `clients.openers` threads, each taking every n-th.
fn open_all(
    clients: &Clients,
    config: &Arc<ClientConfig>,
    range: Range<usize>,
    deadline: Instant,
) -> Result<Opened, String> {
    let threads = clients.openers.max(1);
    let parts: Vec<Result<Opened, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let numbers = range.clone().skip(t).step_by(threads);
                s.spawn(move || open_some(clients, config, numbers, deadline))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("opener panicked".into())))
            .collect()
    });
    let mut all = Opened {
        streams: Vec::with_capacity(range.len()),
        failed: 0,
        first_error: None,
    };
    for part in parts {
        let part = part?;
        all.streams.extend(part.streams);
        all.failed += part.failed;
        all.first_error = all.first_error.or(part.first_error);
    }
    Ok(all)
}

/// Opens connections `numbers` one after another; those not tried by
/// `deadline` (or when interrupted) count as failed.
fn open_some(
    clients: &Clients,
    config: &Arc<ClientConfig>,
    numbers: impl Iterator<Item = usize>,
    deadline: Instant,
) -> Result<Opened, String> {
    let mut opened = Opened {
        streams: Vec::new(),
        failed: 0,
        first_error: None,
    };
    for i in numbers {
        if interrupted() || Instant::now() > deadline {
            opened.failed += 1;
            opened
                .first_error
                .get_or_insert_with(|| "out of time".into());
            continue;
        }
        let from = source(i, clients.per_source);
        match open(from, clients.addr, config, &clients.query) {
            Ok(stream) => opened.streams.push(stream),
            // Our own descriptor limit is a fault of the setup, not of
            // the server: say so rather than count it against the server.
            Err(e) if heron_sys::process::is_open_files_limit(&e) => {
                return Err(format!("out of file descriptors at connection {i}: {e}"));
            }
            Err(e) => {
                opened.failed += 1;
                opened.first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    Ok(opened)
}

/// The source address of connection `i`: 127.2.0.1 for the first
/// `per_source`, then 127.2.0.2, ... (all of 127.0.0.0/8 is the
/// loopback's on Linux, nothing to set up).
pub fn source(i: usize, per_source: usize) -> IpAddr {
    let k = i / per_source.max(1);
    let (hi, lo) = ((k / 250) % 256, k % 250);
    IpAddr::V4(Ipv4Addr::new(127, 2, hi as u8, 1 + lo as u8))
}

/// One connection from `from`: handshake, one question answered; the
/// socket alone is kept.
fn open(
    from: IpAddr,
    addr: SocketAddr,
    config: &Arc<ClientConfig>,
    query: &[u8],
) -> std::io::Result<TcpStream> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.bind(&SocketAddr::new(from, 0).into())?;
    socket.connect_timeout(&addr.into(), CONNECT_WAIT)?;
    let mut stream: TcpStream = socket.into();
    stream.set_read_timeout(Some(CONNECT_WAIT))?;
    stream.set_write_timeout(Some(CONNECT_WAIT))?;
    let name = ServerName::IpAddress(addr.ip().into());
    let mut tls = ClientConnection::new(config.clone(), name).map_err(std::io::Error::other)?;
    let mut framed = (query.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(query);
    let mut session = rustls::Stream::new(&mut tls, &mut stream);
    session.write_all(&framed)?;
    let mut len = [0u8; 2];
    session.read_exact(&mut len)?;
    let mut answer = vec![0u8; u16::from_be_bytes(len) as usize];
    session.read_exact(&mut answer)?;
    if answer.len() < 12 || answer[..2] != query[..2] || answer[2] & 0x80 == 0 {
        return Err(std::io::Error::other("not an answer to the question"));
    }
    drop(tls);
    stream.set_nonblocking(true)?;
    Ok(stream)
}

/// Open: no end of stream and no error; whatever the server sent since
/// (TLS records the client no longer reads) is read and dropped.
fn is_open(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    // Bounded: a server sends a few records at most to a silent client.
    for _ in 0..64 {
        match stream.read(&mut buf) {
            Ok(0) => return false,
            Ok(_) => continue,
            Err(e) => return e.kind() == std::io::ErrorKind::WouldBlock,
        }
    }
    true
}

/// Closes with a reset: no TIME_WAIT left behind on either side.
fn close_with_reset(s: TcpStream) {
    let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
}

/// The machine's TCP sockets allocated and TCP buffer memory in pages
/// (/proc/net/sockstat `TCP: ... alloc N mem M`).
pub fn sockstat_tcp() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/net/sockstat").unwrap_or_default();
    parse_sockstat_tcp(&text)
}

fn parse_sockstat_tcp(text: &str) -> (u64, u64) {
    let Some(line) = text.lines().find_map(|l| l.strip_prefix("TCP:")) else {
        return (0, 0);
    };
    let words: Vec<&str> = line.split_whitespace().collect();
    let field = |key: &str| {
        words
            .windows(2)
            .find(|w| w[0] == key)
            .and_then(|w| w[1].parse().ok())
            .unwrap_or(0)
    };
    (field("alloc"), field("mem"))
}

/// The machine's kernel slab memory, KiB (/proc/meminfo `Slab:`).
pub fn slab_kib() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    parse_slab_kib(&text)
}

fn parse_slab_kib(text: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix("Slab:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// `query` with the EDNS TCP keepalive option (RFC 7828, no timeout: a
/// client's ask) appended to its OPT record, which must be its last
/// record and empty; BIND keeps a connection that asked for its
/// `tcp-keepalive-timeout` instead of its `tcp-idle-timeout` (120 s at
/// most).
pub fn with_keepalive(mut query: Vec<u8>) -> Vec<u8> {
    const KEEPALIVE: u16 = 11;
    let n = query.len();
    if n < 12 + 11 || query[n - 2..] != [0, 0] {
        return query;
    }
    query[n - 2..].copy_from_slice(&4u16.to_be_bytes());
    query.extend_from_slice(&KEEPALIVE.to_be_bytes());
    query.extend_from_slice(&0u16.to_be_bytes());
    query
}

/// The SOA question of `w`'s first zone, with EDNS and TCP keepalive.
pub fn soa_query(w: &Workload) -> Result<Vec<u8>, String> {
    let origin = w.ready.first().map_or(".", String::as_str);
    let name = heron_proto::Name::parse(origin).map_err(|e| format!("bad origin {origin}: {e}"))?;
    let opts = heron_testkit::QueryOpts {
        id: 0x5151,
        edns: Some(heron_testkit::EdnsOpts::default()),
        ..heron_testkit::QueryOpts::default()
    };
    let query = heron_testkit::build_query(&name, heron_proto::RType::SOA, &opts);
    Ok(with_keepalive(query))
}

/// TCP connections `kind` is configured to accept for `most` idle TLS
/// connections: 10% more, and for NSD twice that, as NSD gives a
/// connection opened while more than half of its `tcp-count` is in use
/// a timeout of 200 ms instead of `tcp-timeout` (its server.c: "very
/// busy, give smaller timeout"); with the 10% alone it holds only half.
pub fn tcp_limit(kind: Kind, most: usize) -> usize {
    let limit = most + most / 10;
    match kind {
        Kind::Nsd => 2 * limit,
        _ => limit,
    }
}

/// Each DoT server (Heron, NSD, BIND) started on its own, configured for
/// the most of `counts`, holding `counts` idle TLS connections in turn.
pub(crate) fn run(ctx: &mut Ctx, w: &Workload, kinds: &[Kind], counts: &[usize]) -> Vec<IdleTls> {
    let most = counts.iter().copied().max().unwrap_or(0);
    ctx.say(&format!(
        "idle TLS connections: memory with {} held",
        counts
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(" and ")
    ));
    let mut all = Vec::new();
    let prepared =
        TlsFiles::self_signed(&ctx.work.join("tls")).and_then(|t| Ok((t, soa_query(w)?)));
    let (tls, query) = match prepared {
        Ok(p) => p,
        Err(e) => {
            ctx.say(&format!("  idle TLS: ERROR {e}"));
            return all;
        }
    };
    for &kind in kinds.iter().filter(|k| k.is_dns() && k.serves_dot()) {
        let launch = Launch {
            tcp_clients_max: tcp_limit(kind, most),
            idle_timeout_s: IDLE_TIMEOUT_S,
            tls: Some(tls.clone()),
            ..ctx.launch.clone()
        };
        let rows = ctx
            .start_with(kind, w, None, &launch)
            .and_then(|server| one_server(ctx, &server, &query, counts));
        match rows {
            Ok(rows) => all.extend(rows),
            Err(e) => {
                ctx.say(&format!("  {}: ERROR {e}", kind.name()));
                all.push(IdleTls {
                    server: kind.name().into(),
                    first_error: Some(e),
                    ..IdleTls::default()
                });
            }
        }
        if interrupted() {
            break;
        }
    }
    all
}

/// `counts` connections held by `server` (Heron's configuration checked
/// with `heron doctor` first), said as they are read.
fn one_server(
    ctx: &Ctx,
    server: &Server,
    query: &[u8],
    counts: &[usize],
) -> Result<Vec<IdleTls>, String> {
    let doctor = (server.kind == Kind::Heron).then(|| doctor(ctx, server));
    let clients = Clients {
        addr: server.tls_addr.ok_or("no TLS listener")?,
        query: query.to_vec(),
        per_source: PER_SOURCE,
        openers: OPENERS,
    };
    let mut rows = measure(&clients, counts, server)?;
    for r in &mut rows {
        r.server = server.kind.name().into();
        r.doctor = doctor.clone();
        ctx.say(&say(r));
    }
    Ok(rows)
}

/// One result as a line of the log.
pub fn say(r: &IdleTls) -> String {
    format!(
        "  {}: {} asked, {} opened in {:.1} s from {} addresses, {} still open; \
         RSS {} -> {} KiB, {:.0} bytes each; kernel slab {} -> {} KiB ({:.0} bytes per \
         connection, both ends), TCP buffers {} -> {} pages, TCP sockets {} -> {}{}",
        r.server,
        r.asked,
        r.opened,
        r.open_s,
        r.sources,
        r.still_open,
        r.rss_before_kib,
        r.rss_with_kib,
        r.bytes_per_connection(),
        r.slab_before_kib,
        r.slab_with_kib,
        r.slab_bytes_per_connection(),
        r.tcp_mem_before_pages,
        r.tcp_mem_with_pages,
        r.tcp_sockets_before,
        r.tcp_sockets_with,
        r.first_error
            .as_ref()
            .map_or(String::new(), |e| format!("; first failure: {e}"))
    )
}

/// `heron doctor` on the configuration `server` runs with, from this
/// process (whose open-files limit the server inherited): "clean", or
/// what it printed.
fn doctor(ctx: &Ctx, server: &Server) -> String {
    let config = server.dir().join("heron.toml");
    let out = std::process::Command::new(&ctx.bins.heron)
        .arg("doctor")
        .arg("--config")
        .arg(&config)
        .output();
    match out {
        Ok(o) if o.status.success() => "clean".into(),
        Ok(o) => format!(
            "exit {}: {}",
            o.status,
            String::from_utf8_lossy(&o.stdout).trim()
        ),
        Err(e) => format!("cannot run heron doctor: {e}"),
    }
}

/// A client that accepts the suite's self-signed certificates.
pub(crate) fn client_config() -> ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth()
}

/// Accepts the suite's own self-signed certificate (signatures are still
/// checked, so the handshake does its full work).
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    struct Fixed;
    impl MemoryProbe for Fixed {
        fn memory(&self) -> (u64, u64) {
            (1000, 1000)
        }
    }

    fn floor() -> SocketAddr {
        let dir = std::env::temp_dir().join(format!("heron-bench-idle-tls-{}", std::process::id()));
        let tls = TlsFiles::self_signed(&dir).expect("openssl makes a certificate");
        crate::tls_floor::spawn_for_test(&tls.cert, &tls.key)
    }

    /// An SOA question with EDNS (the floor echoes it with QR set).
    fn query() -> Vec<u8> {
        let opts = heron_testkit::QueryOpts {
            id: 0x5151,
            edns: Some(heron_testkit::EdnsOpts::default()),
            ..heron_testkit::QueryOpts::default()
        };
        let name = heron_proto::Name::parse("example.").unwrap();
        with_keepalive(heron_testkit::build_query(
            &name,
            heron_proto::RType::SOA,
            &opts,
        ))
    }

    #[test]
    fn every_connection_is_opened_from_many_addresses_and_held() {
        let clients = Clients {
            addr: floor(),
            query: query(),
            per_source: 4,
            openers: 3,
        };
        let rows = measure(&clients, &[5, 12], &Fixed).unwrap();
        let got: Vec<_> = rows
            .iter()
            .map(|r| (r.asked, r.opened, r.still_open, r.sources))
            .collect();
        assert_eq!(got, [(5, 5, 5, 2), (12, 12, 12, 3)]);
        assert!(rows.iter().all(|r| r.first_error.is_none()));
        assert_eq!(rows[1].rss_before_kib, 1000);
    }

    #[test]
    fn a_server_that_hangs_up_is_not_credited_with_connections() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in listener.incoming().take(3) {
                drop(s);
            }
        });
        let clients = Clients {
            addr,
            query: query(),
            per_source: 2,
            openers: 2,
        };
        let rows = measure(&clients, &[3], &Fixed).unwrap();
        assert_eq!(
            (rows[0].asked, rows[0].opened, rows[0].still_open),
            (3, 0, 0)
        );
        assert!(rows[0].first_error.is_some());
    }

    #[test]
    fn sources_change_every_per_source_connections_and_stay_on_loopback() {
        assert_eq!(source(0, 5_000), IpAddr::V4(Ipv4Addr::new(127, 2, 0, 1)));
        assert_eq!(source(4_999, 5_000), source(0, 5_000));
        assert_eq!(
            source(5_000, 5_000),
            IpAddr::V4(Ipv4Addr::new(127, 2, 0, 2))
        );
        // 100,000 connections: 20 addresses; far more still distinct.
        let used: BTreeSet<_> = (0..100_000).map(|i| source(i, PER_SOURCE)).collect();
        assert_eq!(used.len(), 20);
        let many: BTreeSet<_> = (0..1_000).map(|k| source(k, 1)).collect();
        assert_eq!(many.len(), 1_000);
        assert!(many.iter().all(|a| a.is_loopback()));
        assert!(!many.contains(&IpAddr::V4(Ipv4Addr::LOCALHOST)));
    }

    #[test]
    fn keepalive_goes_into_the_opt_record_and_nowhere_else() {
        let q = query();
        let n = q.len();
        // OPT RDLENGTH 4, then option 11 of length 0.
        assert_eq!(q[n - 6..], [0, 4, 0, 11, 0, 0]);
        assert_eq!(q[10..12], [0, 1], "ARCOUNT unchanged");
        let name = heron_proto::Name::parse("example.").unwrap();
        let plain = heron_testkit::build_query(
            &name,
            heron_proto::RType::SOA,
            &heron_testkit::QueryOpts::default(),
        );
        assert_eq!(with_keepalive(plain.clone()), plain, "no OPT: unchanged");
        assert_eq!(with_keepalive(vec![0; 5]), vec![0; 5], "too short");
    }

    #[test]
    fn slab_line_is_read() {
        let text = "MemTotal: 100 kB\nSlab:             123456 kB\nSReclaimable: 5 kB\n";
        assert_eq!(parse_slab_kib(text), 123_456);
        assert_eq!(parse_slab_kib("MemTotal: 100 kB\n"), 0);
    }

    #[test]
    fn sockstat_tcp_line_is_read() {
        let text =
            "sockets: used 25\nTCP: inuse 1 orphan 0 tw 2 alloc 7 mem 42\nUDP: inuse 0 mem 3\n";
        assert_eq!(parse_sockstat_tcp(text), (7, 42));
        assert_eq!(parse_sockstat_tcp("UDP: inuse 0 mem 3\n"), (0, 0));
        assert_eq!(parse_sockstat_tcp("TCP: inuse x alloc\n"), (0, 0));
    }

    #[test]
    fn nsd_is_given_twice_the_connections_of_the_others() {
        assert_eq!(tcp_limit(Kind::Heron, 100_000), 110_000);
        assert_eq!(tcp_limit(Kind::Bind, 100_000), 110_000);
        assert_eq!(tcp_limit(Kind::Nsd, 100_000), 220_000);
    }
}
