//! The `heron` binary's bounds on TCP and TLS clients (issue 24): what a
//! key-only transfer rule does to the per-client limit, answers queued per
//! connection, the deadline for a complete message.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use heron_proto::{Name, RType};
use heron_testkit::{QueryOpts, ServerProcess, build_query};

fn heron() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_heron"))
}

fn edge_zone() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/differential/edge.test.zone")
}

fn framed(name: &str, qtype: RType, id: u16) -> Vec<u8> {
    let opts = QueryOpts {
        id,
        ..QueryOpts::default()
    };
    let q = build_query(&Name::parse(name).unwrap(), qtype, &opts);
    let mut out = (q.len() as u16).to_be_bytes().to_vec();
    out.extend_from_slice(&q);
    out
}

/// Whether the server answers a query on this open connection.
fn answers_on(conn: &mut TcpStream) -> bool {
    conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    if conn.write_all(&framed("edge.test", RType::SOA, 7)).is_err() {
        return false;
    }
    let mut len = [0u8; 2];
    if conn.read_exact(&mut len).is_err() {
        return false;
    }
    let mut body = vec![0u8; u16::from_be_bytes(len) as usize];
    conn.read_exact(&mut body).is_ok()
}

/// A connection the server admits, retrying for a few seconds while slots
/// of closed connections (e.g. the readiness probe's) are being freed.
fn admitted_connection(addr: SocketAddr) -> Option<TcpStream> {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let mut conn = TcpStream::connect(addr).unwrap();
        if answers_on(&mut conn) {
            return Some(conn);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// `allow-transfer = ["0.0.0.0/0 key K"]` lets anyone with the key
/// transfer, but says nothing about who an unsigned client is: it must not
/// lift the per-client limit for every address.
#[test]
fn a_key_only_transfer_rule_keeps_the_per_client_limit() {
    let zone = edge_zone();
    let server = ServerProcess::heron_with_config(&heron(), "edge.test", |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\n\
             [tcp]\nidle-timeout = 30\nmax-connections-per-client = 3\n\
             [[key]]\nname = \"k\"\nsecret = \"q0vXAPu5ZZ8NAb8+HTr5VxvpyvGhUTtX5xM0y4ZxZ4k=\"\n\
             [[zone]]\norigin = \"edge.test\"\nfile = \"{}\"\n\
             allow-transfer = [\"0.0.0.0/0 key k\"]\n",
            zone.display()
        )
    });
    let open: Vec<TcpStream> = (0..3)
        .map(|_| admitted_connection(server.addr()).expect("at the limit"))
        .collect();
    for _ in 0..3 {
        let mut past = TcpStream::connect(server.addr()).unwrap();
        assert!(!answers_on(&mut past), "past the limit: closed");
    }
    assert_eq!(open.len(), 3);
}

/// Resident memory of a process, in KiB (from /proc/PID/status).
fn rss_kib(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A zone whose TXT RRset at big.wide.test makes a response of about 60 KB.
fn wide_zone(dir: &Path) -> PathBuf {
    let mut text = String::from(
        "$ORIGIN wide.test.\n$TTL 300\n\
         @ SOA ns hostmaster 1 3600 600 86400 300\n@ NS ns\nns A 192.0.2.1\n",
    );
    for i in 0..220 {
        text.push_str(&format!("big TXT \"{i:03}{}\"\n", "x".repeat(252)));
    }
    let path = dir.join("wide.test.zone");
    std::fs::write(&path, text).unwrap();
    path
}

/// 8 KB of framed queries for the wide TXT RRset.
fn wide_queries() -> Vec<u8> {
    let mut out = Vec::new();
    let mut id = 0;
    while out.len() < 8 * 1024 {
        out.extend_from_slice(&framed("big.wide.test", RType::TXT, id));
        id += 1;
    }
    out
}

/// Heron serving wide.test over TCP, and over TLS if given a certificate
/// and key; idle timeout 30 s, so nothing is closed while memory is read.
fn wide_server(dir: &Path, tls: Option<(SocketAddr, &Path, &Path)>) -> ServerProcess {
    let zone = wide_zone(dir);
    let tls = tls.map_or(String::new(), |(addr, chain, key)| {
        format!(
            "[tls]\nlisten = [\"{addr}\"]\ncertificate = \"{}\"\nkey = \"{}\"\n",
            chain.display(),
            key.display()
        )
    });
    ServerProcess::heron_with_config(&heron(), "wide.test", |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\n{tls}\
             [tcp]\nidle-timeout = 30\nmax-connections-per-client = 1000\n\
             [[zone]]\norigin = \"wide.test\"\nfile = \"{}\"\n",
            zone.display()
        )
    })
}

/// The server's highest RSS over a few seconds, in KiB.
fn peak_rss_kib(pid: u32) -> usize {
    let mut peak = 0;
    for _ in 0..30 {
        peak = peak.max(rss_kib(pid));
        std::thread::sleep(Duration::from_millis(100));
    }
    peak
}

/// Reads one framed response; its answer count.
fn answer_count(conn: &mut impl Read) -> usize {
    let mut len = [0u8; 2];
    conn.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; u16::from_be_bytes(len) as usize];
    conn.read_exact(&mut body).unwrap();
    u16::from_be_bytes([body[6], body[7]]) as usize
}

/// The most a test lets the server's RSS grow by, in KiB.
const GROWTH_BOUND_KIB: usize = 150 * 1024;

fn scratch_dir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("heron-{tag}-"))
        .tempdir()
        .unwrap()
}

/// Clients that pipeline queries for a 60 KB answer and never read: the
/// server builds a bounded amount of answers per connection, not all of
/// them (it was 15 MB per connection, 1.5 GB for these 100).
#[test]
fn pipelining_clients_that_never_read_hold_bounded_memory() {
    let dir = scratch_dir("pipeline");
    let server = wide_server(dir.path(), None);
    let pid = server.pid().unwrap();
    let baseline = rss_kib(pid);
    let queries = wide_queries();
    let mut conns: Vec<TcpStream> = (0..100)
        .map(|_| {
            let mut conn = TcpStream::connect(server.addr()).unwrap();
            conn.write_all(&queries).unwrap();
            conn
        })
        .collect();
    let peak = peak_rss_kib(pid);
    eprintln!("server RSS {baseline} KiB before, {peak} KiB at most after");
    assert!(
        peak < baseline + GROWTH_BOUND_KIB,
        "RSS {baseline} KiB before, {peak} KiB with 100 clients that never read"
    );
    // The queries were answered, as far as the client takes them.
    conns[0]
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(answer_count(&mut conns[0]), 220);
}

/// The same over TLS, with 20 connections (it was 2.4 GB).
#[test]
fn pipelining_tls_clients_that_never_read_hold_bounded_memory() {
    let dir = scratch_dir("pipeline-tls");
    let names = vec!["localhost".to_string()];
    let cert = rcgen::generate_simple_self_signed(names).unwrap();
    let (chain, key) = (dir.path().join("chain.pem"), dir.path().join("key.pem"));
    std::fs::write(&chain, cert.cert.pem()).unwrap();
    std::fs::write(&key, cert.signing_key.serialize_pem()).unwrap();
    let tls_addr = SocketAddr::from(([127, 0, 0, 1], heron_testkit::free_port()));
    let server = wide_server(dir.path(), Some((tls_addr, &chain, &key)));
    let pid = server.pid().unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.cert.der().clone()).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = std::sync::Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    );
    let baseline = rss_kib(pid);
    let queries = wide_queries();
    let mut conns: Vec<_> = (0..20)
        .map(|_| {
            let name = "localhost".try_into().unwrap();
            let tls = rustls::ClientConnection::new(config.clone(), name).unwrap();
            let tcp = TcpStream::connect(tls_addr).unwrap();
            let mut conn = rustls::StreamOwned::new(tls, tcp);
            conn.write_all(&queries).unwrap();
            conn.flush().unwrap();
            conn
        })
        .collect();
    let peak = peak_rss_kib(pid);
    eprintln!("server RSS {baseline} KiB before, {peak} KiB at most after");
    assert!(
        peak < baseline + GROWTH_BOUND_KIB,
        "RSS {baseline} KiB before, {peak} KiB with 20 TLS clients that never read"
    );
    let first = &mut conns[0];
    first
        .sock
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(answer_count(first), 220);
}

/// Whether the server has closed `conn` (end of stream or reset).
fn closed_by_server(conn: &mut TcpStream) -> bool {
    conn.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 64];
    let closed = match conn.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    conn.set_nonblocking(false).unwrap();
    closed
}

/// Slowloris: clients that send one byte a second and never complete a
/// message held their slots for as long as they kept sending. Now each
/// is closed once its message is overdue, and the slots serve others.
#[test]
fn clients_that_never_complete_a_message_are_closed() {
    let zone = edge_zone();
    let server = ServerProcess::heron_with_config(&heron(), "edge.test", |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\n\
             [tcp]\nidle-timeout = 60\nmessage-timeout = 2\nmax-connections-per-client = 3\n\
             [[zone]]\norigin = \"edge.test\"\nfile = \"{}\"\n",
            zone.display()
        )
    });
    // Admitted (answered once), then begin a message of 200 bytes.
    let mut slow: Vec<TcpStream> = (0..3)
        .map(|_| {
            let mut conn = admitted_connection(server.addr()).expect("within the limit");
            conn.write_all(&200u16.to_be_bytes()).unwrap();
            conn
        })
        .collect();
    let mut refused = TcpStream::connect(server.addr()).unwrap();
    assert!(
        !answers_on(&mut refused),
        "the slow clients hold every slot"
    );
    let give_up = Instant::now() + Duration::from_secs(30);
    while !slow.is_empty() && Instant::now() < give_up {
        std::thread::sleep(Duration::from_secs(1));
        // One more byte each; a write may fail once the server is gone.
        slow.retain_mut(|conn| {
            let _ = conn.write_all(&[0]);
            !closed_by_server(conn)
        });
    }
    assert!(slow.is_empty(), "{} slow clients still open", slow.len());
    assert!(
        admitted_connection(server.addr()).is_some(),
        "a new client is served once they are closed"
    );
}
