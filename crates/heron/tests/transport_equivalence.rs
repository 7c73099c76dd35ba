//! One query path for every transport: the same queries (plain, DO,
//! NXDOMAIN, TSIG-signed, with a cookie, NSID, EXPIRE, refused by
//! `allow-query`, malformed, a NOTIFY we do not take, one too large for
//! UDP) sent over UDP, TCP and TLS to one server get byte-identical
//! answers, but for what the transport itself changes: TC over UDP for
//! the large one, and what a clock changes (the server cookie's time and
//! hash, TSIG's Time Signed and MAC, each checked on its own).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use heron_proto::message::{HEADER_LEN, Message, flags};
use heron_proto::tsig::{self, Algorithm, Key, ResponseVerifier};
use heron_proto::{Name, Opcode, RType, Rcode};
use heron_testkit::{EdnsOpts, QueryOpts, ServerProcess, build_query, free_port};
use heron_xfr::secondary::tls::{TlsClients, XotTrust};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ORIGIN: &str = "edge.test";
const KEY_NAME: &str = "equal.key";
const SECRET: &str = "q0vXAPu5ZZ8NAb8+HTr5VxvpyvGhUTtX5xM0y4ZxZ4k=";
const CLIENT_COOKIE: [u8; 8] = *b"\x11\x22\x33\x44\x55\x66\x77\x88";

/// A folder removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn zone_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/differential")
        .join(name)
}

/// Heron with every query layer on: a TSIG key, cookies with a fixed
/// secret, an NSID, and a zone nobody may query; and its TLS address.
fn heron(dir: &Path) -> (ServerProcess, SocketAddr) {
    let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    let cert = rcgen::generate_simple_self_signed(names).unwrap();
    let (chain, key) = (dir.join("chain.pem"), dir.join("key.pem"));
    std::fs::write(&chain, cert.cert.pem()).unwrap();
    std::fs::write(&key, cert.signing_key.serialize_pem()).unwrap();
    let closed = dir.join("closed.test.zone");
    std::fs::write(
        &closed,
        "$ORIGIN closed.test.\n$TTL 300\n@ SOA ns hostmaster 1 7200 3600 1209600 300\n\
         @ NS ns\nns A 192.0.2.1\n",
    )
    .unwrap();
    let tls_port = free_port();
    let server =
        ServerProcess::heron_with_config(Path::new(env!("CARGO_BIN_EXE_heron")), ORIGIN, |port| {
            format!(
                "[server]\nlisten = [\"127.0.0.1:{port}\"]\nnsid = \"equal-1\"\n\
                 [tls]\nlisten = [\"127.0.0.1:{tls_port}\"]\n\
                 certificate = \"{}\"\nkey = \"{}\"\n\
                 [cookies]\nsecret = \"000102030405060708090a0b0c0d0e0f\"\n\
                 [[key]]\nname = \"{KEY_NAME}\"\nsecret = \"{SECRET}\"\n\
                 [[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\n\
                 [[zone]]\norigin = \"closed.test\"\nfile = \"{}\"\nallow-query = []\n",
                chain.display(),
                key.display(),
                zone_file("edge.test.zone").display(),
                closed.display(),
            )
        });
    (server, SocketAddr::from(([127, 0, 0, 1], tls_port)))
}

/// A query with EDNS options (code, data) in its OPT record.
fn with_options(qname: &str, qtype: RType, id: u16, options: &[(u16, &[u8])]) -> Vec<u8> {
    let edns = EdnsOpts::default();
    let opts = QueryOpts {
        id,
        edns: Some(edns),
        ..Default::default()
    };
    let mut q = build_query(&Name::parse(qname).unwrap(), qtype, &opts);
    let rdata: Vec<u8> = options
        .iter()
        .flat_map(|(code, data)| {
            let mut o = code.to_be_bytes().to_vec();
            o.extend_from_slice(&(data.len() as u16).to_be_bytes());
            o.extend_from_slice(data);
            o
        })
        .collect();
    let len = q.len();
    q[len - 2..].copy_from_slice(&(rdata.len() as u16).to_be_bytes());
    q.extend_from_slice(&rdata);
    q
}

fn plain(qname: &str, qtype: RType, id: u16, edns: Option<EdnsOpts>) -> Vec<u8> {
    let opts = QueryOpts {
        id,
        edns,
        ..Default::default()
    };
    build_query(&Name::parse(qname).unwrap(), qtype, &opts)
}

/// The queries every transport gets, each with a label for messages.
fn queries() -> Vec<(&'static str, Vec<u8>)> {
    let do_bit = EdnsOpts {
        do_bit: true,
        ..EdnsOpts::default()
    };
    let notify = QueryOpts {
        id: 9,
        opcode: Opcode::NOTIFY,
        ..Default::default()
    };
    let mut malformed = plain("www.edge.test", RType::A, 10, None);
    malformed[5] = 2; // QDCOUNT 2, one question
    vec![
        ("plain", plain("www.edge.test", RType::A, 1, None)),
        (
            "edns do",
            plain("www.edge.test", RType::AAAA, 2, Some(do_bit)),
        ),
        ("nxdomain", plain("nothere.edge.test", RType::A, 3, None)),
        ("nodata", plain("www.edge.test", RType::MX, 4, None)),
        (
            "cookie",
            with_options("edge.test", RType::SOA, 5, &[(10, &CLIENT_COOKIE)]),
        ),
        ("nsid", with_options("edge.test", RType::NS, 6, &[(3, &[])])),
        (
            "expire",
            with_options("edge.test", RType::SOA, 7, &[(9, &[])]),
        ),
        (
            "refused by acl",
            plain("ns.closed.test", RType::A, 8, Some(EdnsOpts::default())),
        ),
        (
            "notify not secondary",
            build_query(&Name::parse(ORIGIN).unwrap(), RType::SOA, &notify),
        ),
        ("malformed", malformed),
    ]
}

fn key() -> Key {
    Key::from_base64(KEY_NAME, Algorithm::HmacSha256, SECRET).unwrap()
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A signed query for `transport`: each is signed at its own time, as a
/// copy of one signed request is refused (replay); not before now, as a
/// request signed before the server started is refused as well.
fn signed(transport: u64) -> (Vec<u8>, Vec<u8>) {
    let mut q = plain("mail.edge.test", RType::A, 11, Some(EdnsOpts::default()));
    let mac = tsig::sign_request(&mut q, &key(), unix_now() + transport, 300);
    (q, mac)
}

/// `response` with its TSIG record checked against the request's MAC
/// and cut off (ARCOUNT lowered), so that the rest can be compared.
fn unsigned(mut response: Vec<u8>, request_mac: Vec<u8>) -> Vec<u8> {
    let record = tsig::find(&response)
        .unwrap()
        .expect("the answer is signed");
    let mut verifier = ResponseVerifier::new(&key(), request_mac);
    verifier
        .verify(&response, unix_now())
        .expect("the answer's TSIG verifies");
    response.truncate(record.start);
    let arcount = u16::from_be_bytes([response[10], response[11]]) - 1;
    response[10..12].copy_from_slice(&arcount.to_be_bytes());
    response
}

/// The server cookie's time and hash zeroed (its version and reserved
/// octets kept): they follow the clock.
fn without_cookie_clock(mut response: Vec<u8>) -> Vec<u8> {
    let at = response
        .windows(CLIENT_COOKIE.len())
        .position(|w| w == CLIENT_COOKIE)
        .expect("the client cookie is echoed");
    let server = at + CLIENT_COOKIE.len();
    assert_eq!(
        response.len(),
        server + 16,
        "a 16-octet server cookie ends the answer"
    );
    response[server + 4..].fill(0);
    response
}

fn tls_exchange(tls: SocketAddr, chain: &Path, queries: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let tcp = tokio::net::TcpStream::connect(tls).await.unwrap();
        let clients = TlsClients::new(Some(&std::fs::read(chain).unwrap())).unwrap();
        let trust = XotTrust::Strict {
            name: "localhost".into(),
        };
        let mut stream = clients.connect(tcp, tls.ip(), &trust).await.unwrap();
        let mut answers = Vec::new();
        for q in queries {
            let mut framed = (q.len() as u16).to_be_bytes().to_vec();
            framed.extend_from_slice(q);
            stream.write_all(&framed).await.unwrap();
            let read = async {
                let mut len = [0u8; 2];
                stream.read_exact(&mut len).await.unwrap();
                let mut msg = vec![0u8; u16::from_be_bytes(len) as usize];
                stream.read_exact(&mut msg).await.unwrap();
                msg
            };
            let answer = tokio::time::timeout(Duration::from_secs(5), read)
                .await
                .expect("an answer over TLS");
            answers.push(answer);
        }
        answers
    })
}

#[test]
fn every_transport_answers_every_layer_alike() {
    let dir = std::env::temp_dir().join(format!("heron-equal-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _dir = TempDir(dir.clone());
    let (server, tls) = heron(&dir);
    let addr = server.addr();

    let mut labels: Vec<&str> = Vec::new();
    let mut sent: Vec<Vec<u8>> = Vec::new();
    for (label, q) in queries() {
        labels.push(label);
        sent.push(q);
    }
    let udp: Vec<Vec<u8>> = sent
        .iter()
        .map(|q| heron_testkit::query_udp(addr, q))
        .collect();
    let tcp: Vec<Vec<u8>> = sent
        .iter()
        .map(|q| heron_testkit::query_tcp(addr, q))
        .collect();
    let over_tls = tls_exchange(tls, &dir.join("chain.pem"), &sent);
    for (i, label) in labels.iter().enumerate() {
        let (u, t, s) = (&udp[i], &tcp[i], &over_tls[i]);
        let normal = |r: &Vec<u8>| match *label {
            "cookie" => without_cookie_clock(r.clone()),
            _ => r.clone(),
        };
        assert_eq!(normal(u), normal(t), "{label}: UDP and TCP answers differ");
        assert_eq!(normal(t), normal(s), "{label}: TCP and TLS answers differ");
    }
    // The layers did run: the answers are not all alike.
    let rcode = |r: &Vec<u8>| {
        Message::parse(r)
            .map(|m| m.rcode())
            .unwrap_or(Rcode(r[3] as u16 & 0xF))
    };
    let at = |label: &str| labels.iter().position(|l| *l == label).unwrap();
    assert_eq!(rcode(&udp[at("nxdomain")]), Rcode::NXDOMAIN);
    assert_eq!(rcode(&udp[at("refused by acl")]), Rcode::REFUSED);
    assert_eq!(rcode(&udp[at("notify not secondary")]), Rcode::NOTAUTH);
    assert_eq!(rcode(&udp[at("malformed")]), Rcode::FORMERR);
    assert!(
        udp[at("nsid")].windows(7).any(|w| w == b"equal-1"),
        "the NSID option is in the answer"
    );

    // TSIG: each transport's signed query gets a signed answer that
    // verifies, and the same answer once the TSIG record is set aside.
    let (q0, mac0) = signed(0);
    let (q1, mac1) = signed(1);
    let (q2, mac2) = signed(2);
    let u = unsigned(heron_testkit::query_udp(addr, &q0), mac0);
    let t = unsigned(heron_testkit::query_tcp(addr, &q1), mac1);
    let over_tls = tls_exchange(tls, &dir.join("chain.pem"), &[q2]);
    let s = unsigned(over_tls.into_iter().next().unwrap(), mac2);
    assert_eq!(Message::parse(&u).unwrap().rcode(), Rcode::NOERROR);
    assert_eq!(u, t, "signed: UDP and TCP answers differ");
    assert_eq!(t, s, "signed: TCP and TLS answers differ");

    // Too large for a 512-octet UDP answer: TC over UDP, the whole
    // answer over TCP and TLS, alike.
    let small = EdnsOpts {
        udp_size: 512,
        ..EdnsOpts::default()
    };
    let big = plain("bigtxt.edge.test", RType::TXT, 12, Some(small));
    let u = heron_testkit::query_udp(addr, &big);
    let t = heron_testkit::query_tcp(addr, &big);
    let s = tls_exchange(tls, &dir.join("chain.pem"), &[big]).remove(0);
    let header = |r: &[u8]| u16::from_be_bytes([r[2], r[3]]);
    assert!(header(&u) & flags::TC != 0, "the UDP answer is truncated");
    assert!(u.len() <= 512 && u.len() > HEADER_LEN);
    assert!(header(&t) & flags::TC == 0 && t.len() > 512);
    assert_eq!(t, s, "large: TCP and TLS answers differ");
}
