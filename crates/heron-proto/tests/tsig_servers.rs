//! The client side of TSIG against real servers: Knot DNS (`knotd`) and
//! BIND (`named`) serve a zone with a TSIG key on a loopback port; queries
//! signed by `sign_request` must get answers that `ResponseVerifier`
//! accepts, for one SOA answer over UDP and for a zone transfer of several
//! messages over TCP; the servers' error answers (BADKEY, BADSIG, BADTIME)
//! must come back as those errors; and a tampered message must fail.
//!
//! Needs `knotd` (knot) and `named` (bind9), which `scripts/test-all.sh`
//! installs. Each server runs in its own temporary folder and is killed by
//! its PID when the test ends.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use heron_proto::message::{HEADER_LEN, Message};
use heron_proto::tsig::{Algorithm, Key, ResponseVerifier, TsigError, find, sign_request};
use heron_proto::{Name, RType};
use heron_testkit::process::free_port;

const SECRET: &str = "aGVyb24gdHNpZyBpbnRlcm9wIHRlc3Qgc2VjcmV0ISE=";
const WRONG_SECRET: &str = "d3Jvbmcgc2VjcmV0IGZvciB0aGUgc2FtZSBrZXkhIQ==";
const DEADLINE: Duration = Duration::from_secs(15);
/// TXT records in the zone: enough for a transfer of several messages.
const TXT_RECORDS: usize = 1500;

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn key(secret: &str) -> Key {
    Key::from_base64("testkey.", Algorithm::HmacSha256, secret).unwrap()
}

#[derive(Clone, Copy, Debug)]
enum Server {
    Knot,
    Bind,
}

/// A server process; killed (by PID) and its folder removed on drop.
struct Running {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Running {
    /// Whatever the server logged, for failure reports.
    fn log(&mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut log = String::new();
        if let Some(mut err) = self.child.stderr.take() {
            let _ = err.read_to_string(&mut log);
        }
        log
    }
}

fn zone_text() -> String {
    let mut z = String::from(
        "$TTL 3600\n\
         @ IN SOA ns.example.com. hostmaster.example.com. 1 3600 900 604800 300\n\
         @ IN NS ns.example.com.\n\
         ns IN A 192.0.2.53\n",
    );
    for i in 0..TXT_RECORDS {
        let _ = writeln!(z, "t{i} IN TXT \"{}\"", "x".repeat(100));
    }
    z
}

fn knot_conf(dir: &str, port: u16) -> String {
    format!(
        "server:\n    rundir: \"{dir}\"\n    listen: 127.0.0.1@{port}\n    \
         background-workers: 1\n    udp-workers: 1\n    tcp-workers: 1\n\
         log:\n  - target: stderr\n    any: info\n\
         database:\n    storage: \"{dir}\"\n\
         key:\n  - id: testkey.\n    algorithm: hmac-sha256\n    secret: {SECRET}\n\
         acl:\n  - id: xfr\n    key: testkey.\n    action: transfer\n\
         template:\n  - id: default\n    storage: \"{dir}\"\n    zonefile-sync: -1\n    \
         journal-content: none\n\
         zone:\n  - domain: example.com.\n    file: \"{dir}/example.com.zone\"\n    acl: xfr\n"
    )
}

fn bind_conf(dir: &str, port: u16) -> String {
    format!(
        "options {{\n    directory \"{dir}\";\n    pid-file \"{dir}/named.pid\";\n    \
         session-keyfile \"{dir}/session.key\";\n    listen-on port {port} {{ 127.0.0.1; }};\n    \
         listen-on-v6 {{ none; }};\n    recursion no;\n    dnssec-validation no;\n    \
         notify no;\n}};\n\
         controls {{ }};\n\
         key \"testkey.\" {{ algorithm hmac-sha256; secret \"{SECRET}\"; }};\n\
         zone \"example.com\" {{ type primary; file \"{dir}/example.com.zone\"; \
         allow-transfer {{ key testkey.; }}; }};\n"
    )
}

fn start(server: Server) -> Running {
    let dir = std::env::temp_dir().join(format!(
        "heron-tsig-{server:?}-{}-{}",
        std::process::id(),
        now()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("example.com.zone"), zone_text()).unwrap();
    let d = dir.display().to_string();
    let port = free_port();
    let mut cmd = match server {
        Server::Knot => {
            std::fs::write(dir.join("knot.conf"), knot_conf(&d, port)).unwrap();
            let mut c = Command::new("/usr/sbin/knotd");
            c.arg("-c").arg(dir.join("knot.conf"));
            c
        }
        Server::Bind => {
            std::fs::write(dir.join("named.conf"), bind_conf(&d, port)).unwrap();
            let mut c = Command::new("/usr/sbin/named");
            c.args(["-g", "-n", "1", "-c"]).arg(dir.join("named.conf"));
            c
        }
    };
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {server:?}: {e} (install knot and bind9)"));
    let mut running = Running { child, dir, port };
    if !wait_ready(&running) {
        let log = running.log();
        panic!("{server:?} did not answer on port {}\n{log}", running.port);
    }
    running
}

/// Polls with an unsigned SOA query until the zone is served.
fn wait_ready(running: &Running) -> bool {
    let deadline = Instant::now() + DEADLINE;
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let q = query(0x0101, RType::SOA);
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        let _ = socket.send_to(&q, ("127.0.0.1", running.port));
        if let Ok(len) = socket.recv(&mut buf) {
            // NOERROR, an answer: the zone is loaded.
            if len > HEADER_LEN && buf[3] & 0x0F == 0 && buf[7] > 0 {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// `example.com. <qtype> IN`, no RD.
fn query(id: u16, qtype: RType) -> Vec<u8> {
    let mut m = id.to_be_bytes().to_vec();
    m.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    m.extend_from_slice(Name::parse("example.com.").unwrap().as_wire());
    m.extend_from_slice(&qtype.0.to_be_bytes());
    m.extend_from_slice(&1u16.to_be_bytes());
    m
}

/// One signed query over UDP; returns the request MAC and the answer.
fn udp_signed(running: &Running, key: &Key, time: u64) -> (Vec<u8>, Vec<u8>) {
    let mut q = query(0x4242, RType::SOA);
    let mac = sign_request(&mut q, key, time, 300);
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(DEADLINE)).unwrap();
    socket.send_to(&q, ("127.0.0.1", running.port)).unwrap();
    let mut buf = [0u8; 65535];
    let len = socket.recv(&mut buf).expect("an answer");
    (mac, buf[..len].to_vec())
}

/// A signed AXFR over TCP: every message up to the closing SOA.
fn axfr(running: &Running, key: &Key) -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut q = query(0x4343, RType::AXFR);
    let mac = sign_request(&mut q, key, now(), 300);
    let mut stream = TcpStream::connect(("127.0.0.1", running.port)).unwrap();
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    stream.write_all(&framed).unwrap();
    let mut messages = Vec::new();
    let mut soas = 0;
    while soas < 2 && messages.len() < 1000 {
        let mut len = [0u8; 2];
        stream.read_exact(&mut len).expect("a transfer message");
        let mut msg = vec![0; usize::from(u16::from_be_bytes(len))];
        stream.read_exact(&mut msg).unwrap();
        let parsed = Message::parse(&msg).expect("the server's message parses");
        soas += parsed
            .answers
            .iter()
            .filter(|r| r.rtype == RType::SOA)
            .count();
        if parsed.answers.is_empty() {
            // An error answer: nothing more will come.
            messages.push(msg);
            break;
        }
        messages.push(msg);
    }
    (mac, messages)
}

fn check_server(server: Server) {
    let mut running = start(server);
    let right = key(SECRET);
    let report =
        |running: &mut Running, what: &str| format!("{server:?}: {what}\n{}", running.log());

    // One answer over UDP.
    let (mac, answer) = udp_signed(&running, &right, now());
    let mut client = ResponseVerifier::new(&right, mac.clone());
    if client.verify(&answer, now()) != Ok(()) || client.finish() != Ok(()) {
        panic!(
            "{}",
            report(&mut running, "signed SOA answer does not verify")
        );
    }
    // Bound to our request: another request MAC, or a changed octet, fails.
    let mut other = ResponseVerifier::new(&right, vec![0; mac.len()]);
    assert_eq!(other.verify(&answer, now()), Err(TsigError::BadSig));
    let mut tampered = answer.clone();
    tampered[HEADER_LEN + 1] ^= 0x20; // case of the question name
    let mut client = ResponseVerifier::new(&right, mac);
    assert_eq!(client.verify(&tampered, now()), Err(TsigError::BadSig));

    // A transfer of several messages.
    let (mac, messages) = axfr(&running, &right);
    assert!(messages.len() > 1, "{server:?}: one message only");
    let mut client = ResponseVerifier::new(&right, mac.clone());
    for (i, msg) in messages.iter().enumerate() {
        if let Err(e) = client.verify(msg, now()) {
            panic!("{}", report(&mut running, &format!("message {i}: {e}")));
        }
    }
    assert_eq!(client.finish(), Ok(()), "{server:?}: stream ending");
    let signed = messages
        .iter()
        .filter(|m| find(m).ok().flatten().is_some())
        .count();
    eprintln!(
        "{server:?}: AXFR of {} messages, {signed} signed",
        messages.len()
    );
    // A changed octet in the middle message fails there or at the next
    // signed one; the stream never finishes well.
    let mut client = ResponseVerifier::new(&right, mac);
    let mid = messages.len() / 2;
    let mut results = Vec::new();
    for (i, msg) in messages.iter().enumerate() {
        let mut msg = msg.clone();
        if i == mid {
            let last_txt_octet = find(&msg).unwrap().map_or(msg.len(), |t| t.start) - 1;
            msg[last_txt_octet] ^= 0x01;
        }
        results.push(client.verify(&msg, now()));
    }
    assert!(
        results.contains(&Err(TsigError::BadSig)),
        "{server:?}: {results:?}"
    );
    assert_eq!(client.finish(), Err(TsigError::BadSig));

    // The server's error answers.
    let unknown = Key::from_base64("nokey.", Algorithm::HmacSha256, SECRET).unwrap();
    let cases = [
        (unknown, now(), TsigError::BadKey),
        (key(WRONG_SECRET), now(), TsigError::BadSig),
        (right.clone(), now() - 3600, TsigError::BadTime),
    ];
    for (k, time, expected) in cases {
        let (mac, answer) = udp_signed(&running, &k, time);
        let t = find(&answer).unwrap().expect("error answers carry a TSIG");
        assert_eq!(t.error, expected.rcode(), "{server:?}");
        assert_eq!(answer[3] & 0x0F, 9, "{server:?}: NOTAUTH");
        let mut client = ResponseVerifier::new(&k, mac);
        assert_eq!(client.verify(&answer, now()), Err(expected), "{server:?}");
        if expected == TsigError::BadTime {
            // Signed: our verifier checked the MAC before reporting.
            assert_eq!(t.mac.len(), 32);
            assert_eq!(t.time_signed, time);
            assert_eq!(t.other.len(), 6);
        }
    }
}

#[test]
fn knotd_answers_verify() {
    check_server(Server::Knot);
}

#[test]
fn named_answers_verify() {
    check_server(Server::Bind);
}
