//! The `heron` binary's bound on the answers queued per TCP and TLS
//! connection (issue 24), measured as the server's resident memory.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use heron_proto::{Name, RType};
use heron_testkit::{QueryOpts, ServerProcess, build_query};

fn heron() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_heron"))
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

/// Asserts the server's RSS stays within [`GROWTH_BOUND_KIB`] of
/// `baseline` for a few seconds with `clients` that never read.
fn assert_growth_bounded(pid: u32, baseline: usize, clients: &str) {
    let peak = peak_rss_kib(pid);
    eprintln!("server RSS {baseline} KiB before, {peak} KiB at most after");
    assert!(
        peak < baseline + GROWTH_BOUND_KIB,
        "RSS {baseline} KiB before, {peak} KiB with {clients} that never read"
    );
}

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
    assert_growth_bounded(pid, baseline, "100 clients");
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
    assert_growth_bounded(pid, baseline, "20 TLS clients");
    let first = &mut conns[0];
    first
        .sock
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(answer_count(first), 220);
}
