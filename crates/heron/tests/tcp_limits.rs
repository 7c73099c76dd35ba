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
