//! Issue 25's query ACLs, blackhole, NSID and EDNS EXPIRE, end to end:
//! the `heron` binary queried with dig, kdig and raw sockets from
//! several loopback addresses (127.0.0.1 is the test harness's own, so it
//! is always allowed).

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use heron_proto::message::Message;
use heron_proto::{Name, RType, Rcode};
use heron_testkit::{
    DigTool, EdnsOpts, QueryOpts, ServerProcess, build_query, kdig_expire, query_tcp, run_dig_with,
    try_query_udp_from,
};

fn heron() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_heron"))
}

fn edge_zone() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/differential/edge.test.zone")
}

/// A small zone `open.test` written next to the configuration.
fn open_zone(dir: &Path) -> PathBuf {
    let path = dir.join("open.test.zone");
    std::fs::write(
        &path,
        "$ORIGIN open.test.\n$TTL 300\n\
         @ IN SOA ns1 host 1 7200 3600 86400 300\n@ IN NS ns1\nns1 IN A 192.0.2.1\n",
    )
    .unwrap();
    path
}

/// Allowed: 127.0.0.1 and 127.0.0.3 server-wide; open.test: 127.0.0.1,
/// 127.0.0.2, and 127.0.0.5 signed with `nokey`. Blackholed: 127.0.0.4.
fn acl_server() -> ServerProcess {
    acl_server_and_socket().0
}

/// [`acl_server`] and its control socket.
fn acl_server_and_socket() -> (ServerProcess, PathBuf) {
    // A folder per server: the tests run at once, and one rewriting the
    // zone file while another server read it left that one without
    // open.test (REFUSED where NOERROR was due).
    static SERVERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = SERVERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("heron-shield-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let open = open_zone(&dir);
    let socket = dir.join("control.sock");
    let server = ServerProcess::heron_with_config(&heron(), "edge.test", |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\n\
             allow-query = [\"127.0.0.1\", \"127.0.0.3\"]\n\
             blackhole = [\"127.0.0.4\"]\n\
             nsid = \"heron-ns1\"\n\
             control = \"{}\"\n\
             [[zone]]\norigin = \"edge.test\"\nfile = \"{}\"\n\
             [[zone]]\norigin = \"open.test\"\nfile = \"{}\"\n\
             allow-transfer = [\"127.0.0.1\"]\n\
             allow-query = [\"127.0.0.5/32 key nokey\", \"127.0.0.1\", \"127.0.0.2\"]\n\
             [[key]]\nname = \"nokey\"\nalgorithm = \"hmac-sha256\"\nsecret = \"c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0\"\n",
            socket.display(),
            edge_zone().display(),
            open.display()
        )
    });
    (server, socket)
}

/// `heron ctl stats --json` on `socket`: the server's refusals.
fn refusals(socket: &Path) -> serde_json::Value {
    let out = std::process::Command::new(heron())
        .args(["ctl", "--control"])
        .arg(socket)
        .args(["stats", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let response: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    response["data"]["refused"].clone()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn edns_query(name: &str) -> Vec<u8> {
    let opts = QueryOpts {
        id: 99,
        edns: Some(EdnsOpts::default()),
        ..QueryOpts::default()
    };
    build_query(&Name::parse(name).unwrap(), RType::SOA, &opts)
}

/// The rcode of a UDP query for `name` SOA from `from`, or None if no
/// answer came.
fn udp_rcode(server: SocketAddr, from: &str, name: &str) -> Option<Rcode> {
    let response = try_query_udp_from(ip(from), server, &edns_query(name)).ok()?;
    Some(Message::parse(&response).unwrap().rcode())
}

/// A TCP query from `from`: the response, or None if the server closed.
fn tcp_response(server: SocketAddr, from: &str, name: &str) -> Option<Vec<u8>> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::new(ip(from), 0).into()).unwrap();
    socket.connect(&server.into()).unwrap();
    let mut conn: TcpStream = socket.into();
    conn.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let q = edns_query(name);
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    conn.write_all(&framed).ok()?;
    let mut len = [0u8; 2];
    conn.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; u16::from_be_bytes(len) as usize];
    conn.read_exact(&mut body).ok()?;
    Some(body)
}

#[test]
fn allow_query_refuses_with_prohibited_and_blackhole_gets_nothing() {
    let (server, socket) = acl_server_and_socket();
    let addr = server.addr();
    // Allowed, refused, and over TCP the same.
    assert_eq!(
        udp_rcode(addr, "127.0.0.3", "edge.test"),
        Some(Rcode::NOERROR)
    );
    assert_eq!(
        udp_rcode(addr, "127.0.0.2", "edge.test"),
        Some(Rcode::REFUSED)
    );
    let refused = tcp_response(addr, "127.0.0.2", "edge.test").expect("a TCP refusal");
    assert_eq!(Message::parse(&refused).unwrap().rcode(), Rcode::REFUSED);
    // A zone's own list takes the server's place; its keyed rule for
    // 127.0.0.5 is not met unsigned.
    assert_eq!(
        udp_rcode(addr, "127.0.0.2", "open.test"),
        Some(Rcode::NOERROR)
    );
    assert_eq!(
        udp_rcode(addr, "127.0.0.3", "open.test"),
        Some(Rcode::REFUSED)
    );
    assert_eq!(
        udp_rcode(addr, "127.0.0.5", "open.test"),
        Some(Rcode::REFUSED)
    );
    // A name in no zone falls to the server-wide list.
    assert_eq!(
        udp_rcode(addr, "127.0.0.2", "elsewhere.example"),
        Some(Rcode::REFUSED)
    );
    // Blackholed: no answer on either transport; each datagram and
    // each connection counted.
    assert_eq!(udp_rcode(addr, "127.0.0.4", "open.test"), None);
    assert!(tcp_response(addr, "127.0.0.4", "open.test").is_none());
    // Each datagram: the client sent its query UDP_TRIES times.
    let sent = heron_testkit::client::UDP_TRIES;
    assert_eq!(refusals(&socket)["blackhole"], sent);
    // dig and kdig both see Extended DNS Error 18.
    let dig = run_dig_with(DigTool::Dig, addr, "edge.test", "SOA", &["-b", "127.0.0.2"]);
    let out = dig.expect_success();
    assert!(
        out.contains("status: REFUSED") && out.contains("EDE: 18 (Prohibited)"),
        "{dig}"
    );
    // kdig sends EDNS only when told.
    let kdig = run_dig_with(
        DigTool::Kdig,
        addr,
        "edge.test",
        "SOA",
        &["-b", "127.0.0.2", "+edns"],
    );
    let out = kdig.expect_success();
    assert!(
        out.contains("status: REFUSED") && out.contains("EDE: 18"),
        "{kdig}"
    );
    // The server still answers those allowed.
    assert_eq!(
        udp_rcode(addr, "127.0.0.1", "edge.test"),
        Some(Rcode::NOERROR)
    );
}

#[test]
fn nsid_is_returned_to_dig_and_kdig_over_udp_and_tcp() {
    let server = acl_server();
    for tcp in [false, true] {
        let mut extra = vec!["+nsid"];
        if tcp {
            extra.push("+tcp");
        }
        let dig = run_dig_with(DigTool::Dig, server.addr(), "edge.test", "SOA", &extra);
        assert!(dig.expect_success().contains("(\"heron-ns1\")"), "{dig}");
        let kdig = run_dig_with(DigTool::Kdig, server.addr(), "edge.test", "SOA", &extra);
        assert!(kdig.expect_success().contains("\"heron-ns1\""), "{kdig}");
    }
    // Not asked, not given.
    let dig = run_dig_with(DigTool::Dig, server.addr(), "edge.test", "SOA", &[]);
    assert!(!dig.expect_success().contains("NSID"), "{dig}");
}

/// A server with the NSID `heron-ns1` serving `nsid.test`, whose `t`
/// holds five TXT records (about 600 octets), transfers allowed.
fn nsid_server(dir: &Path) -> ServerProcess {
    let zone = dir.join("nsid.test.zone");
    let mut text = String::from(
        "$ORIGIN nsid.test.\n$TTL 300\n\
         @ SOA ns1 host 1 7200 3600 86400 300\n@ NS ns1\nns1 A 192.0.2.1\n",
    );
    for i in 0..5 {
        text += &format!("t TXT \"{i}{}\"\n", "x".repeat(99));
    }
    for i in 0..10 {
        text += &format!("t MX {i} mail{i}\nmail{i} A 192.0.2.{i}\nmail{i} AAAA 2001:db8::{i}\n");
    }
    std::fs::write(&zone, text).unwrap();
    ServerProcess::heron_with_config(&heron(), "nsid.test", |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\nnsid = \"heron-ns1\"\n\
             [[zone]]\norigin = \"nsid.test\"\nfile = \"{}\"\n\
             allow-transfer = [\"127.0.0.1\"]\n",
            zone.display()
        )
    })
}

/// `dig` over UDP (no retry over TCP): whether TC was set, the answer
/// count, whether the NSID came, and the message size.
fn udp_dig(server: &ServerProcess, qtype: &str, extra: &[&str]) -> (bool, usize, bool, usize) {
    let mut args = vec!["+ignore", "+notcp"];
    args.extend_from_slice(extra);
    let dig = run_dig_with(DigTool::Dig, server.addr(), "t.nsid.test", qtype, &args);
    let out = dig.expect_success();
    let flags = out
        .lines()
        .find(|l| l.starts_with(";; flags:"))
        .unwrap_or("");
    let count = |field: &str| -> usize {
        let at = flags.find(field).map_or(flags.len(), |at| at + field.len());
        let digits: String = flags[at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().unwrap_or(0)
    };
    let size = out
        .lines()
        .find_map(|l| l.strip_prefix(";; MSG SIZE  rcvd: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("{dig}"));
    let bits = flags.trim_start_matches(";; flags:").split(';').next();
    let tc = bits.unwrap_or("").split_whitespace().any(|f| f == "tc");
    (tc, count("ANSWER: "), out.contains("(\"heron-ns1\")"), size)
}

/// An answer whose additional records take the room the NSID needs
/// gives up additional records for it (optional in an authoritative
/// answer, RFC 2181 9), not its answer, as BIND and Knot do (regression
/// hunt AX-7: truncated to nothing, TC).
#[test]
fn an_nsid_takes_the_room_of_additional_records_not_of_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let server = nsid_server(dir.path());
    let (tc, answers, _, whole) = udp_dig(&server, "MX", &["+bufsize=1232", "+nocookie"]);
    assert_eq!((tc, answers), (false, 10));
    let short = format!("+bufsize={}", whole + 4);
    let (tc, answers, nsid, size) = udp_dig(&server, "MX", &["+nsid", "+nocookie", &short]);
    assert_eq!((tc, answers, nsid), (false, 10, true), "{short}: {size}");
}

/// Over UDP an answer that fits the client's size, but not with the
/// NSID it asked for, is truncated with the NSID in its OPT record, as
/// NSD, Knot and BIND answer: the client retries over TCP and gets both
/// (black-box finding: the NSID was left out silently). A UDP IXFR's SOA
/// answer carries the NSID at any size it fits, 512 too (it was left
/// out below about 600 octets, by a worst-case guess of the answer).
#[test]
fn an_nsid_that_does_not_fit_over_udp_truncates_the_answer_and_rides_a_small_ixfr() {
    let dir = tempfile::tempdir().unwrap();
    let server = nsid_server(dir.path());
    let (tc, answers, nsid, plain) = udp_dig(&server, "TXT", &["+bufsize=1232"]);
    assert_eq!((tc, answers, nsid), (false, 5, false), "{plain} octets");
    // The NSID option takes 4 + 9 octets.
    let just_short = format!("+bufsize={}", plain + 12);
    let (tc, answers, nsid, _) = udp_dig(&server, "TXT", &["+nsid", &just_short]);
    assert_eq!((tc, answers, nsid), (true, 0, true), "{just_short}");
    let fits = format!("+bufsize={}", plain + 13);
    let (tc, answers, nsid, size) = udp_dig(&server, "TXT", &["+nsid", &fits]);
    assert_eq!((tc, answers, nsid, size), (false, 5, true, plain + 13));
    // IXFR over UDP (RFC 1995 2: our SOA), EDNS 512 with an NSID option.
    let mut ixfr = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1];
    ixfr.extend_from_slice(b"\x04nsid\x04test\x00\x00\xfb\x00\x01");
    // The client's SOA, serial 1, in the authority section.
    ixfr.extend_from_slice(&[0xc0, 12, 0, 6, 0, 1, 0, 0, 0, 0, 0, 22, 0, 0]);
    ixfr.extend_from_slice(&[0, 0, 0, 1].repeat(5));
    ixfr.extend_from_slice(&[0, 0, 41, 2, 0, 0, 0, 0, 0, 0, 4, 0, 3, 0, 0]);
    let local = IpAddr::from([127, 0, 0, 1]);
    let reply = try_query_udp_from(local, server.addr(), &ixfr).unwrap();
    let m = Message::parse(&reply).unwrap();
    assert_eq!((m.rcode(), m.answers.len()), (Rcode::NOERROR, 1));
    assert_eq!(m.answers[0].rtype, RType::SOA);
    assert!(reply.len() <= 512, "{}", reply.len());
    assert!(reply.windows(9).any(|w| w == b"heron-ns1"), "{reply:?}");
}

#[test]
fn a_primary_tells_expire_the_soa_expire_on_soa_answers() {
    let server = acl_server();
    let addr = server.addr();
    let soa = run_dig_with(DigTool::Kdig, addr, "open.test", "SOA", &["+expire"]);
    assert_eq!(kdig_expire(soa.expect_success()), Some(86400), "{soa}");
    let other = run_dig_with(DigTool::Kdig, addr, "open.test", "NS", &["+expire"]);
    assert_eq!(kdig_expire(other.expect_success()), None, "{other}");
    let unasked = run_dig_with(DigTool::Kdig, addr, "open.test", "SOA", &[]);
    assert_eq!(kdig_expire(unasked.expect_success()), None, "{unasked}");
}

#[test]
fn a_primary_tells_expire_in_the_first_message_of_a_transfer_asked_for_it() {
    let server = acl_server();
    let axfr = |options: &[u8]| {
        let opts = QueryOpts {
            id: 7,
            edns: Some(EdnsOpts::default()),
            ..QueryOpts::default()
        };
        let mut q = build_query(&Name::parse("open.test").unwrap(), RType::AXFR, &opts);
        // The OPT record ends the query: options go after its RDLENGTH.
        let rdlength = q.len() - 2;
        q[rdlength..].copy_from_slice(&(options.len() as u16).to_be_bytes());
        q.extend_from_slice(options);
        let first = query_tcp(server.addr(), &q);
        let m = Message::parse(&first).unwrap();
        assert_eq!(
            (m.rcode(), m.answers[0].rtype),
            (Rcode::NOERROR, RType::SOA)
        );
        m.edns.and_then(|e| e.options.expire_seconds)
    };
    assert_eq!(axfr(&[0, 9, 0, 0]), Some(86400), "asked: the SOA's expire");
    assert_eq!(axfr(&[]), None, "not asked");
}

/// A port below 1024 free on 127.0.0.1 for both UDP and TCP.
fn free_low_port() -> Option<u16> {
    (900..1000).chain([53]).find(|&port| {
        std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok()
            && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
    })
}

/// The four ids of a `Uid:` or `Gid:` line of /proc/PID/status.
fn status_field<'a>(status: &'a str, field: &str) -> Vec<&'a str> {
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    line[field.len()..].split_whitespace().collect()
}

#[test]
fn started_as_root_on_a_low_port_it_drops_to_the_user() {
    if !heron_sys::process::is_root() {
        eprintln!("SKIPPED: dropping privileges needs root; run the tests as root");
        return;
    }
    let port = free_low_port().expect("a free port below 1024");
    let config = format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\"]\nuser = \"nobody\"\n\
         [[zone]]\norigin = \"edge.test\"\nfile = \"{}\"\n",
        edge_zone().display()
    );
    let server = ServerProcess::heron_on_port(&heron(), port, "edge.test", &config)
        .unwrap_or_else(|log| panic!("did not start:\n{log}"));
    let nobody = heron_sys::privileges::user("nobody").unwrap();
    let (uid, gid) = (nobody.uid.to_string(), nobody.gid.to_string());
    let pid = server.pid().unwrap();
    // The sockets answer from the moment they are bound; the privileges go
    // just after, before the server says it is ready (the test read a
    // thread between the two, its groups dropped and its uid not yet).
    let ready = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(20));
        server.log().contains("ready:")
    });
    assert!(ready, "{}", server.log());
    // Every thread (UDP workers, the runtime's), not only the main one.
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    for task in tasks {
        let status = std::fs::read_to_string(task.unwrap().path().join("status")).unwrap();
        assert_eq!(status_field(&status, "Uid:"), [uid.as_str(); 4], "{status}");
        assert_eq!(status_field(&status, "Gid:"), [gid.as_str(); 4], "{status}");
        assert_eq!(status_field(&status, "CapEff:"), ["0000000000000000"]);
        assert_eq!(status_field(&status, "CapPrm:"), ["0000000000000000"]);
    }
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    assert_eq!(
        udp_rcode(addr, "127.0.0.1", "edge.test"),
        Some(Rcode::NOERROR)
    );
    let over_tcp = tcp_response(addr, "127.0.0.1", "edge.test").expect("a TCP answer");
    assert_eq!(Message::parse(&over_tcp).unwrap().rcode(), Rcode::NOERROR);
}

/// Forged queries from source port 0 (a raw socket's) get no answer and
/// leave the UDP path as it was: replies sent there made the kernel refuse
/// a segmented send, which a worker took for a path limit and stopped
/// batching replies until restarted. Nor do queries from the ports of
/// services that answer any datagram (black-box finding BJ-4: one forged
/// query from a chargen service's port started a loop that never ended).
/// Each is counted as dropped, not as a query.
#[test]
fn forged_queries_from_port_0_and_reflecting_services_are_dropped() {
    if !heron_sys::process::is_root() {
        eprintln!("SKIPPED: forging a source port needs a raw socket (root)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("control.sock");
    let server = ServerProcess::heron_with_config(&heron(), "edge.test", |port| {
        reload_acl_config(port, &socket, dir.path(), "", "")
    });
    // A chargen service of our own: what it receives, Heron answered.
    let chargen = std::net::UdpSocket::bind("127.0.0.1:19").ok();
    let raw = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::RAW,
        Some(socket2::Protocol::UDP),
    )
    .unwrap();
    let query = build_query(
        &Name::parse("www.edge.test").unwrap(),
        RType::A,
        &QueryOpts::default(),
    );
    let to = SocketAddr::new(server.addr().ip(), 0);
    for source in [0u16, 7, 13, 17, 19, 37] {
        // A UDP header (checksum 0: none, allowed over IPv4).
        let mut datagram = source.to_be_bytes().to_vec();
        datagram.extend_from_slice(&server.addr().port().to_be_bytes());
        datagram.extend_from_slice(&((8 + query.len()) as u16).to_be_bytes());
        datagram.extend_from_slice(&[0, 0]);
        datagram.extend_from_slice(&query);
        for _ in 0..10 {
            raw.send_to(&datagram, &to.into()).unwrap();
        }
    }
    // Still answering, and nothing on the UDP path changed.
    let answered = udp_rcode(server.addr(), "127.0.0.1", "www.edge.test");
    assert_eq!(answered, Some(Rcode::NOERROR), "after the forged queries");
    if let Some(chargen) = chargen {
        chargen.set_nonblocking(true).unwrap();
        assert!(
            chargen.recv(&mut [0u8; 512]).is_err(),
            "answered to port 19"
        );
    }
    let stats = ctl_stats(&socket);
    let counter = |name: &str| {
        let line = stats.lines().find(|l| l.starts_with(name));
        line.and_then(|l| l[name.len()..].trim().parse::<u64>().ok())
    };
    assert_eq!(
        counter("udp datagrams dropped source_port"),
        Some(60),
        "{stats}"
    );
    // The forged queries were for A records: none was counted a query.
    assert_eq!(counter("queries of type A "), None, "{stats}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !server.log().contains("segmentation offload refused"),
        "{}",
        server.log()
    );
}

/// A query from IPv6's unspecified address `::` (which the kernel
/// delivers, where it drops IPv4's 0.0.0.0) is dropped unanswered: a
/// reply to it goes to this host itself, to whatever local service the
/// source port names (black-box finding BJ-14).
#[test]
fn a_query_from_the_unspecified_ipv6_address_is_dropped() {
    if !heron_sys::process::is_root() {
        eprintln!("SKIPPED: forging a source address needs a raw socket (root)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("control.sock");
    let server = ServerProcess::heron_with_config(&heron(), "edge.test", |port| {
        reload_acl_config(port, &socket, dir.path(), "", "").replace(
            "listen = [\"127.0.0.1:",
            &format!("listen = [\"[::1]:{port}\", \"127.0.0.1:"),
        )
    });
    // A local service on every address: what it receives, Heron answered.
    let local = std::net::UdpSocket::bind("[::]:0").unwrap();
    let local_port = local.local_addr().unwrap().port();
    let query = build_query(
        &Name::parse("www.edge.test").unwrap(),
        RType::A,
        &QueryOpts::default(),
    );
    let packet = ipv6_udp_from_unspecified(local_port, server.addr().port(), &query);
    let raw = socket2::Socket::new(
        socket2::Domain::IPV6,
        socket2::Type::RAW,
        Some(socket2::Protocol::from(255)),
    )
    .unwrap();
    let to: SocketAddr = "[::1]:0".parse().unwrap();
    for _ in 0..5 {
        raw.send_to(&packet, &to.into()).unwrap();
    }
    let answered = udp_rcode(server.addr(), "127.0.0.1", "www.edge.test");
    assert_eq!(answered, Some(Rcode::NOERROR), "after the forged queries");
    local.set_nonblocking(true).unwrap();
    assert!(
        local.recv(&mut [0u8; 512]).is_err(),
        "answered to [::]:{local_port}"
    );
    let stats = ctl_stats(&socket);
    let dropped = stats
        .lines()
        .find(|l| l.starts_with("udp datagrams dropped martian_source"));
    assert!(dropped.is_some_and(|l| l.ends_with(" 5")), "{stats}");
}

/// An IPv6 packet from `[::]:from` to `[::1]:to` carrying `payload` over
/// UDP, its checksum computed.
fn ipv6_udp_from_unspecified(from: u16, to: u16, payload: &[u8]) -> Vec<u8> {
    let length = (8 + payload.len()) as u16;
    let (source, destination) = ([0u8; 16], std::net::Ipv6Addr::LOCALHOST.octets());
    let mut udp = [
        from.to_be_bytes(),
        to.to_be_bytes(),
        length.to_be_bytes(),
        [0, 0],
    ]
    .concat();
    udp.extend_from_slice(payload);
    let mut pseudo = [&source[..], &destination[..]].concat();
    pseudo.extend_from_slice(&u32::from(length).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 17]);
    pseudo.extend_from_slice(&udp);
    let mut sum: u32 = pseudo
        .chunks(2)
        .map(|c| u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0)))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    udp[6..8].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    let mut packet = vec![0x60, 0, 0, 0];
    packet.extend_from_slice(&length.to_be_bytes());
    packet.extend_from_slice(&[17, 64]);
    packet.extend_from_slice(&source);
    packet.extend_from_slice(&destination);
    packet.extend_from_slice(&udp);
    packet
}

/// `heron ctl stats` of the server at `socket`, as text.
fn ctl_stats(socket: &Path) -> String {
    let out = std::process::Command::new(heron())
        .args(["ctl", "--socket"])
        .arg(socket)
        .arg("stats")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The configuration of [`query_acls_apply_at_a_reload`]: open.test
/// (127.0.0.1 and 127.0.0.6 by its own list), edge.test (the server's
/// list), and `more` after them.
fn reload_acl_config(port: u16, socket: &Path, dir: &Path, server: &str, more: &str) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\"]\ncontrol = \"{}\"\n{server}\n\
         [[zone]]\norigin = \"edge.test\"\nfile = \"{}\"\n\
         [[zone]]\norigin = \"open.test\"\nfile = \"{}\"\n{more}",
        socket.display(),
        edge_zone().display(),
        open_zone(dir).display(),
    )
}

/// Black-box finding AJ-2: a zone a reload added with an `allow-query`
/// was answered to everyone until a restart (the reload said "needs
/// restart"), and so were a changed zone list and a new `[server]`
/// list. A reload now screens with them as a fresh start would.
#[test]
fn query_acls_apply_at_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("control.sock");
    let port = heron_testkit::process::free_port();
    let own_list = "allow-query = [\"127.0.0.1\", \"127.0.0.6\"]\n";
    let config = reload_acl_config(port, &socket, dir.path(), "", own_list);
    let server = ServerProcess::heron_on_port(&heron(), port, "open.test", &config).unwrap();
    let addr = server.addr();
    assert_eq!(
        udp_rcode(addr, "127.0.0.6", "open.test"),
        Some(Rcode::NOERROR)
    );
    assert_eq!(
        udp_rcode(addr, "127.0.0.2", "edge.test"),
        Some(Rcode::NOERROR)
    );
    let d = dir.path().join("d.test.zone");
    std::fs::write(
        &d,
        "$ORIGIN d.test.\n$TTL 300\n@ IN SOA ns1 host 1 7200 3600 86400 300\n@ IN NS ns1\n\
         ns1 IN A 192.0.2.1\nwww IN A 192.0.2.80\n",
    )
    .unwrap();
    // A server-wide list, open.test without its own, d.test added with one.
    let added = format!(
        "[[zone]]\norigin = \"d.test\"\nfile = \"{}\"\nallow-query = [\"127.0.0.5\"]\n",
        d.display()
    );
    let server_list = "allow-query = [\"127.0.0.1\", \"127.0.0.3\"]";
    let config = reload_acl_config(port, &socket, dir.path(), server_list, &added);
    std::fs::write(server.dir().join("heron.toml"), config).unwrap();
    let (ok, answer) = heron_testkit::heron_reconfigure(&heron(), &socket);
    assert!(ok, "{answer}");
    assert!(
        !answer.contains("needs restart")
            && answer.contains("zones' allow-query")
            && answer.contains("[server] allow-query, blackhole"),
        "the lists applied, nothing waits for a restart: {answer}"
    );
    // d.test only to 127.0.0.5, as its list says; dig sees EDE 18.
    assert_eq!(udp_rcode(addr, "127.0.0.5", "d.test"), Some(Rcode::NOERROR));
    let dig = run_dig_with(DigTool::Dig, addr, "www.d.test", "A", &["-b", "127.0.0.2"]);
    let out = dig.expect_success();
    assert!(
        out.contains("status: REFUSED") && out.contains("EDE: 18 (Prohibited)"),
        "{dig}"
    );
    // open.test falls to the server-wide list, which edge.test follows.
    assert_eq!(
        udp_rcode(addr, "127.0.0.6", "open.test"),
        Some(Rcode::REFUSED)
    );
    assert_eq!(
        udp_rcode(addr, "127.0.0.2", "edge.test"),
        Some(Rcode::REFUSED)
    );
    assert_eq!(
        udp_rcode(addr, "127.0.0.3", "open.test"),
        Some(Rcode::NOERROR)
    );
}
