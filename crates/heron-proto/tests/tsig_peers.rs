//! TSIG against real peers: kdig (Knot) and dig (BIND) sign a query to a
//! socket this test holds; the query must verify with the right secret and
//! fail with BADSIG under another; the test answers with a response signed
//! by `ResponseSigner` and checks that the peer accepted it, and that the
//! same response with one MAC octet flipped is refused (so the peer really
//! checks). Zone transfers over TCP do the same for a signed message
//! stream, with and without unsigned messages in the middle.
//!
//! Needs `kdig` (knot-dnsutils) and `dig` (bind9-dnsutils), which
//! `scripts/test-all.sh` installs.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use heron_proto::edns;
use heron_proto::message::{HEADER_LEN, Header, flags};
use heron_proto::name::skip_compressed;
use heron_proto::tsig::{
    Algorithm, Key, ResponseSigner, TsigError, Verified, error_response_tsig, find, verify_request,
};

const KEY_NAME: &str = "testkey.";
/// 32 octets, base64: "heron tsig interop test secret!!"
const SECRET: &str = "aGVyb24gdHNpZyBpbnRlcm9wIHRlc3Qgc2VjcmV0ISE=";
/// Another secret, for the negative checks.
const WRONG_SECRET: &str = "d3Jvbmcgc2VjcmV0IGZvciB0aGUgc2FtZSBrZXkhIQ==";
/// A bound on every wait: socket reads and the tools' own runs.
const DEADLINE: Duration = Duration::from_secs(15);

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tool {
    Kdig,
    Dig,
}

impl Tool {
    fn path(self) -> &'static str {
        match self {
            Tool::Kdig => "/usr/bin/kdig",
            Tool::Dig => "/usr/bin/dig",
        }
    }

    /// Arguments for one query to 127.0.0.1:`port`: a single try with a
    /// short timeout, the TSIG key given with `-y`.
    fn args(self, port: u16, alg: Algorithm, qtype: &str, tcp: bool) -> Vec<String> {
        let mut args = vec![
            "@127.0.0.1".to_string(),
            "-p".to_string(),
            port.to_string(),
            "-y".to_string(),
            format!("{}:{KEY_NAME}:{SECRET}", alg.text()),
        ];
        match self {
            Tool::Kdig => args.extend(["+retry=0".into(), "+timeout=2".into()]),
            Tool::Dig => args.extend(["+tries=1".into(), "+time=2".into()]),
        }
        if tcp {
            args.push("+tcp".into());
        }
        args.extend(["example.com".into(), qtype.into()]);
        args
    }
}

/// What a tool printed, and how it ended.
struct Output {
    command: String,
    /// `None`: killed at the deadline.
    status: Option<i32>,
    stdout: String,
    stderr: String,
}

impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "$ {}\n(exit {:?})\n--- stdout\n{}--- stderr\n{}",
            self.command, self.status, self.stdout, self.stderr
        )
    }
}

fn spawn(tool: Tool, args: &[String]) -> Child {
    Command::new(tool.path())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {}: {e} (install knot-dnsutils and bind9-dnsutils)",
                tool.path()
            )
        })
}

/// Waits for `child` until the deadline, then kills it (by its PID, via
/// `Child::kill`), and collects its output.
fn finish(mut child: Child, command: String) -> Output {
    let deadline = Instant::now() + DEADLINE;
    let mut status = None;
    while Instant::now() < deadline {
        if let Ok(Some(s)) = child.try_wait() {
            status = Some(s.code().unwrap_or(-1));
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let mut stdout = String::new();
    let mut stderr = String::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = out.read_to_string(&mut stdout);
    }
    if let Some(mut err) = child.stderr.take() {
        let _ = err.read_to_string(&mut stderr);
    }
    Output {
        command,
        status,
        stdout,
        stderr,
    }
}

fn key(alg: Algorithm, secret: &str) -> Key {
    Key::from_base64(KEY_NAME, alg, secret).unwrap()
}

/// Checks a peer's signed query: it verifies with the right key, and fails
/// with BADSIG under a wrong secret of the same name and algorithm.
fn check_query(query: &[u8], alg: Algorithm) -> Verified {
    let t = find(query).unwrap().expect("the peer signed its query");
    assert_eq!(t.key_name.to_string(), KEY_NAME);
    assert_eq!(Algorithm::from_name(&t.algorithm), Some(alg));
    assert_eq!(t.mac.len(), alg.mac_len());
    let wrong = [key(alg, WRONG_SECRET)];
    let failure = verify_request(query, &wrong, now()).unwrap_err();
    assert_eq!(failure.error, TsigError::BadSig, "wrong secret");
    verify_request(query, &key(alg, SECRET), now())
        .unwrap_or_else(|f| panic!("{alg} query from the peer does not verify: {f}"))
        .expect("signed")
}

/// The end of the question section of `query`.
fn question_end(query: &[u8]) -> usize {
    let (end, _) = skip_compressed(query, HEADER_LEN).unwrap();
    end + 4
}

/// A response to `query`: its question, `answers` (whole RRs), an OPT
/// record if the query had one, QR and AA set. Unsigned.
fn response(query: &[u8], answers: &[Vec<u8>]) -> Vec<u8> {
    let q = Header::read(query).unwrap();
    let has_opt = q.arcount > 1;
    let header = Header {
        id: q.id,
        flags: (q.flags & flags::RD) | flags::QR | flags::AA,
        qdcount: 1,
        ancount: answers.len() as u16,
        nscount: 0,
        arcount: u16::from(has_opt),
    };
    let mut m = vec![0; HEADER_LEN];
    header.write(&mut m);
    m.extend_from_slice(&query[HEADER_LEN..question_end(query)]);
    for rr in answers {
        m.extend_from_slice(rr);
    }
    if has_opt {
        m.extend_from_slice(&edns::opt_record(1232, 0, false));
    }
    m
}

fn wire_name(text: &str) -> Vec<u8> {
    heron_proto::Name::parse(text).unwrap().as_wire().to_vec()
}

fn rr(owner: &str, rtype: u16, rdata: &[u8]) -> Vec<u8> {
    let mut out = wire_name(owner);
    out.extend_from_slice(&rtype.to_be_bytes());
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&3600u32.to_be_bytes());
    out.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
    out.extend_from_slice(rdata);
    out
}

fn soa() -> Vec<u8> {
    let mut rdata = wire_name("ns.example.com.");
    rdata.extend(wire_name("hostmaster.example.com."));
    for v in [2024010101u32, 3600, 900, 604800, 300] {
        rdata.extend_from_slice(&v.to_be_bytes());
    }
    rr("example.com.", 6, &rdata)
}

fn a_record(i: u8) -> Vec<u8> {
    rr(&format!("host{i}.example.com."), 1, &[192, 0, 2, i])
}

/// Flips one octet of the MAC of the TSIG RR at the end of `msg`.
fn corrupt_mac(msg: &mut [u8]) {
    // Original ID, Error and Other Len (empty) follow the MAC.
    let at = msg.len() - 7;
    msg[at] ^= 0x01;
}

/// How the test answers a UDP query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reply {
    /// The SOA, signed by `ResponseSigner`.
    Signed,
    /// The same with one MAC octet flipped.
    Corrupt,
    /// NOTAUTH with the TSIG `error_response_tsig` builds for this error.
    Error(TsigError),
    /// The signed BADTIME answer with one MAC octet flipped.
    BadTimeCorrupt,
}

/// One UDP exchange: the tool's signed SOA query and the test's reply.
fn udp_exchange(tool: Tool, alg: Algorithm, reply: Reply) -> Output {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(DEADLINE)).unwrap();
    let port = socket.local_addr().unwrap().port();
    let args = tool.args(port, alg, "SOA", false);
    let command = format!("{} {}", tool.path(), args.join(" "));
    let child = spawn(tool, &args);
    let mut buf = [0u8; 65535];
    let received = socket.recv_from(&mut buf);
    let (len, peer) = match received {
        Ok(r) => r,
        Err(e) => {
            let out = finish(child, command);
            panic!("no query from the peer: {e}\n{out}");
        }
    };
    let query = &buf[..len];
    let verified = check_query(query, alg);
    let resp = match reply {
        Reply::Signed | Reply::Corrupt => {
            let mut resp = response(query, &[soa()]);
            ResponseSigner::new(&verified).sign(&mut resp, now());
            if reply == Reply::Corrupt {
                corrupt_mac(&mut resp);
            }
            resp
        }
        Reply::Error(error) => error_reply(query, alg, error),
        Reply::BadTimeCorrupt => {
            let mut resp = error_reply(query, alg, TsigError::BadTime);
            // Other Len and the server's time (6) follow the Error field.
            let at = resp.len() - 6 - 2 - 2 - 2 - 1;
            resp[at] ^= 0x01;
            resp
        }
    };
    socket.send_to(&resp, peer).unwrap();
    finish(child, command)
}

/// A NOTAUTH answer to `query` with the TSIG of `error`, from a failure
/// made the way a server meets it: no such key (BADKEY), another secret
/// (BADSIG), a clock an hour ahead (BADTIME).
fn error_reply(query: &[u8], alg: Algorithm, error: TsigError) -> Vec<u8> {
    let right = key(alg, SECRET);
    let (ring, server_now): (Vec<Key>, u64) = match error {
        TsigError::BadKey => (vec![], now()),
        TsigError::BadSig => (vec![key(alg, WRONG_SECRET)], now()),
        TsigError::BadTime => (vec![right], now() + 3600),
        other => panic!("no reply for {other:?}"),
    };
    let failure = verify_request(query, &ring, server_now).unwrap_err();
    assert_eq!(failure.error, error);
    let mut resp = response(query, &[]);
    let rcode = failure.error.response_rcode().0;
    resp[3] = (resp[3] & 0xF0) | rcode as u8;
    error_response_tsig(&mut resp, &failure, &ring, server_now);
    resp
}

/// How one message of a zone transfer goes out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Signed,
    /// Signed, then one MAC octet flipped.
    SignedCorrupt,
    /// Unsigned, folded into the next signed message's digest.
    Unsigned,
    /// Unsigned, digested as built but sent with one octet changed.
    UnsignedTampered,
}

/// Accepts one connection, bounded by the deadline.
fn accept(listener: &TcpListener) -> Option<TcpStream> {
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + DEADLINE;
    while Instant::now() < deadline {
        if let Ok((stream, _)) = listener.accept() {
            stream.set_nonblocking(false).unwrap();
            stream.set_read_timeout(Some(DEADLINE)).unwrap();
            stream.set_write_timeout(Some(DEADLINE)).unwrap();
            return Some(stream);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

fn read_tcp_message(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 2];
    stream.read_exact(&mut len)?;
    let mut msg = vec![0; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut msg)?;
    Ok(msg)
}

/// An AXFR of example.com over TCP: one message per step, the first
/// opening with the SOA, the last closing with it, an A record in each.
fn axfr_exchange(tool: Tool, alg: Algorithm, steps: &[Step]) -> Output {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let args = tool.args(port, alg, "AXFR", true);
    let command = format!("{} {}", tool.path(), args.join(" "));
    let child = spawn(tool, &args);
    let Some(mut stream) = accept(&listener) else {
        let out = finish(child, command);
        panic!("the peer did not connect\n{out}");
    };
    let query = match read_tcp_message(&mut stream) {
        Ok(q) => q,
        Err(e) => {
            let out = finish(child, command);
            panic!("no query from the peer: {e}\n{out}");
        }
    };
    let verified = check_query(&query, alg);
    let mut signer = ResponseSigner::new(&verified);
    for (i, &step) in steps.iter().enumerate() {
        let mut answers = vec![a_record(i as u8)];
        if i == 0 {
            answers.insert(0, soa());
        }
        if i + 1 == steps.len() {
            answers.push(soa());
        }
        let mut msg = response(&query, &answers);
        match step {
            Step::Signed | Step::SignedCorrupt => {
                signer.sign(&mut msg, now());
                if step == Step::SignedCorrupt {
                    corrupt_mac(&mut msg);
                }
            }
            Step::Unsigned | Step::UnsignedTampered => {
                assert!(signer.pass_unsigned(&msg), "step {i} must be signed");
                if step == Step::UnsignedTampered {
                    // The first answer's owner: "host1" becomes "iost1".
                    msg[question_end(&query) + 1] ^= 0x01;
                }
            }
        }
        let mut framed = (msg.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(&msg);
        if stream.write_all(&framed).is_err() {
            break; // the peer gave up early: its output says why
        }
    }
    drop(stream);
    finish(child, command)
}

/// What the tools print when a TSIG fails to verify (kdig 3.2, dig 9.18;
/// both still exit 0 for a UDP query).
const REFUSALS: [&str; 3] = [
    "failed to verify TSIG",                          // kdig
    "Couldn't verify signature: tsig verify failure", // dig, per message
    "Some TSIG could not be validated",               // dig, at the end
];

/// The peer printed the answer and no TSIG complaint.
fn assert_accepted(out: &Output) {
    assert_eq!(out.status, Some(0), "{out}");
    assert!(
        out.stdout
            .contains("SOA\tns.example.com. hostmaster.example.com. 2024010101"),
        "no SOA in the output\n{out}"
    );
    let all = format!("{}{}", out.stdout, out.stderr);
    for marker in REFUSALS
        .iter()
        .chain(&["BADSIG", "BADKEY", "BADTIME", "malformed"])
    {
        assert!(!all.contains(marker), "{marker:?} in the output\n{out}");
    }
}

/// The peer reported a TSIG verification failure.
fn assert_refused(out: &Output) {
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(
        REFUSALS.iter().any(|m| all.contains(m)),
        "the peer did not report the bad MAC\n{out}"
    );
}

/// The four algorithms the brief asks for, then the other two.
const ALGORITHMS: [Algorithm; 6] = [
    Algorithm::HmacSha256,
    Algorithm::HmacSha512,
    Algorithm::HmacSha1,
    Algorithm::HmacMd5,
    Algorithm::HmacSha224,
    Algorithm::HmacSha384,
];

fn udp_round_trips(tool: Tool) {
    for alg in ALGORITHMS {
        assert_accepted(&udp_exchange(tool, alg, Reply::Signed));
        assert_refused(&udp_exchange(tool, alg, Reply::Corrupt));
    }
}

#[test]
fn kdig_udp_query_and_signed_answer() {
    udp_round_trips(Tool::Kdig);
}

#[test]
fn dig_udp_query_and_signed_answer() {
    udp_round_trips(Tool::Dig);
}

/// dig (BIND) checks every signed message of a transfer and digests the
/// unsigned ones in between, so it judges the whole chain.
#[test]
fn dig_axfr_stream() {
    use Step::*;
    for alg in [
        Algorithm::HmacSha256,
        Algorithm::HmacMd5,
        Algorithm::HmacSha512,
    ] {
        for steps in [
            &[Signed, Signed, Signed][..],
            &[Signed, Unsigned, Unsigned, Signed, Signed],
        ] {
            let out = axfr_exchange(Tool::Dig, alg, steps);
            assert_accepted(&out);
            let size = format!("(messages {}, ", steps.len());
            assert!(out.stdout.contains(&size), "{size} expected\n{out}");
        }
        // A bad MAC on the last message, and an unsigned message changed
        // after it was digested: both caught.
        assert_refused(&axfr_exchange(
            Tool::Dig,
            alg,
            &[Signed, Signed, SignedCorrupt],
        ));
        assert_refused(&axfr_exchange(
            Tool::Dig,
            alg,
            &[Signed, UnsignedTampered, Signed],
        ));
    }
}

/// kdig 3.2 verifies only the first message of a transfer (a bad MAC on a
/// later one goes unreported), so it checks the first message's digest;
/// the chain is dig's to judge.
#[test]
fn kdig_axfr_stream() {
    use Step::*;
    for alg in [Algorithm::HmacSha256, Algorithm::HmacSha1] {
        for steps in [
            &[Signed, Signed, Signed][..],
            &[Signed, Unsigned, Unsigned, Signed, Signed],
        ] {
            let out = axfr_exchange(Tool::Kdig, alg, steps);
            assert_accepted(&out);
            let size = format!("({} messages, ", steps.len());
            assert!(out.stdout.contains(&size), "{size} expected\n{out}");
        }
        let out = axfr_exchange(Tool::Kdig, alg, &[SignedCorrupt, Signed, Signed]);
        assert_refused(&out);
        assert_ne!(out.status, Some(0), "{out}");
    }
}

/// What each peer prints for the error answers `error_response_tsig`
/// builds: the Error field in its TSIG section, and its verdict. A signed
/// BADTIME answer must pass the peer's MAC check (it then reports the
/// clock), and fail it once a MAC octet is flipped.
#[test]
fn error_answers_as_peers_read_them() {
    use TsigError::{BadKey, BadSig, BadTime};
    let cases: [(Tool, Reply, &str, &str); 8] = [
        (
            Tool::Kdig,
            Reply::Error(BadKey),
            "BADKEY 0",
            "(failed to verify TSIG)",
        ),
        (
            Tool::Kdig,
            Reply::Error(BadSig),
            "BADSIG 0",
            "(failed to verify TSIG)",
        ),
        (
            Tool::Kdig,
            Reply::Error(BadTime),
            "BADTIME 6",
            "(TSIG out of time window)",
        ),
        (
            Tool::Kdig,
            Reply::BadTimeCorrupt,
            "BADTIME 6",
            "(failed to verify TSIG)",
        ),
        (
            Tool::Dig,
            Reply::Error(BadKey),
            "BADKEY 0",
            "Couldn't verify signature: tsig indicates error",
        ),
        (
            Tool::Dig,
            Reply::Error(BadSig),
            "BADSIG 0",
            "Couldn't verify signature: tsig indicates error",
        ),
        (
            Tool::Dig,
            Reply::Error(BadTime),
            "BADTIME 6",
            "Couldn't verify signature: clocks are unsynchronized",
        ),
        (
            Tool::Dig,
            Reply::BadTimeCorrupt,
            "BADTIME 6",
            "Couldn't verify signature: tsig verify failure",
        ),
    ];
    for alg in [Algorithm::HmacSha256, Algorithm::HmacMd5] {
        for (tool, reply, field, verdict) in cases {
            let out = udp_exchange(tool, alg, reply);
            let all = format!("{}{}", out.stdout, out.stderr);
            let tsig_line = out
                .stdout
                .lines()
                .find(|l| l.starts_with("testkey.") && l.contains("TSIG"))
                .unwrap_or_else(|| panic!("no TSIG section\n{out}"));
            assert!(tsig_line.contains(field), "{field:?} expected\n{out}");
            assert!(all.contains(verdict), "{verdict:?} expected\n{out}");
            let status = match tool {
                Tool::Kdig => format!("status: {}", field.split(' ').next().unwrap_or("")),
                Tool::Dig => "status: NOTAUTH".to_string(),
            };
            assert!(out.stdout.contains(&status), "{status:?} expected\n{out}");
        }
    }
}
