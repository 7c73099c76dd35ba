//! UPDATEs sent to a Heron secondary, forwarded to its primary (RFC 2136
//! 6) when its `allow-update-forwarding` allows the sender: the message
//! unchanged (the primary verifies the client's TSIG and decides), the
//! primary's answer relayed (the secondary's own with its rcode, unless
//! the client's TSIG went on); the change comes back to the secondary by
//! NOTIFY and IXFR (from a Heron primary and from a Knot primary).
//! Bounded: past the forwards that may wait at once, SERVFAIL at once; a
//! primary that does not answer, or answers garbage, another ID or more
//! than the client takes over UDP, SERVFAIL.

mod xfr_common;

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use heron_proto::RType;
use heron_testkit::{ServerKind, ServerProcess, free_port};
use xfr_common::{answer, eventually, heron, zone_serial};

const ZONE: &str = "fwd.test";
const SECRET: &str = "q0vXAPu5ZZ8NAb8+HTr5VxvpyvGhUTtX5xM0y4ZxZ4k=";
const OTHER_SECRET: &str = "Zm9yd2FyZGVkLWJ1dC1ub3QtYWxsb3dlZC1rZXkxMjM=";
/// As `update_forward::MAX_OUTSTANDING` in the server.
const MAX_OUTSTANDING: usize = 256;

fn keys() -> String {
    format!(
        "[[key]]\nname = \"ops\"\nsecret = \"{SECRET}\"\n\
         [[key]]\nname = \"other\"\nsecret = \"{OTHER_SECRET}\"\n"
    )
}

fn dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("heron-fwd-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn zone_text(origin: &str) -> String {
    format!(
        "$ORIGIN {origin}.\n$TTL 300\n@ SOA ns hostmaster 1 3600 600 86400 60\n@ NS ns\nns A 192.0.2.1\n"
    )
}

/// Runs `commands` with `program` (nsupdate or knsupdate) against
/// `server`, signed with `key`'s secret if given; the rcode.
fn send(program: &str, server: SocketAddr, key: Option<(&str, &str)>, commands: &str) -> String {
    let mut cmd = Command::new(program);
    cmd.args(["-t", "5"]);
    if let Some((name, secret)) = key {
        cmd.arg("-y").arg(format!("hmac-sha256:{name}:{secret}"));
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{program} runs: {e}"));
    let script = format!(
        "server {} {}\nzone {ZONE}\n{commands}\nsend\n",
        server.ip(),
        server.port()
    );
    use std::io::Write;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(script.as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    if out.status.success() {
        return "NOERROR".into();
    }
    let text = String::from_utf8_lossy(&[&out.stdout[..], &out.stderr[..]].concat()).into_owned();
    let codes = [
        "REFUSED", "SERVFAIL", "NOTAUTH", "NOTIMP", "NXRRSET", "NXDOMAIN",
    ];
    (codes.iter().find(|c| text.contains(**c))).map_or(format!("failed: {text}"), |c| c.to_string())
}

/// A Heron secondary of `ZONE` from `primary`, forwarding what
/// `forwarding` allows; `also` is a primary zone of its own (to wait for
/// when the zone never arrives).
fn secondary_config(port: u16, dir: &Path, primary: SocketAddr, forwarding: &str) -> String {
    secondary_config_with(port, dir, primary, forwarding, "")
}

/// [`secondary_config`] with more lines for the forwarded zone.
fn secondary_config_with(
    port: u16,
    dir: &Path,
    primary: SocketAddr,
    forwarding: &str,
    lines: &str,
) -> String {
    let local = dir.join("local.zone");
    std::fs::write(&local, zone_text("local.test")).unwrap();
    format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n{}\
         [[zone]]\norigin = \"local.test\"\nfile = \"{}\"\n\
         [[zone]]\norigin = \"{ZONE}\"\nfile = \"{}\"\nprimaries = [\"{primary} key ops\"]\n\
         allow-update-forwarding = [{forwarding}]\n{lines}",
        keys(),
        local.display(),
        dir.join("kept.zone").display()
    )
}

/// A Heron primary of `file`, `server` lines added to its `[server]`;
/// `update` is the zone's `allow-update` rule, closed by the caller with
/// `"]` and a line break (and more lines for the zone, if any).
fn heron_primary(file: &Path, server: &str, update: &str) -> ServerProcess {
    ServerProcess::heron_with_config(&heron(), ZONE, |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n{server}{}\
             [[zone]]\norigin = \"{ZONE}\"\nfile = \"{}\"\n\
             allow-transfer = [\"127.0.0.1 key ops\"]\nallow-update = [\"{update}",
            keys(),
            file.display()
        )
    })
}

#[test]
fn an_update_sent_to_a_secondary_is_made_by_its_primary_and_comes_back() {
    let dir = dir("relay");
    let file = dir.join("fwd.zone");
    std::fs::write(&file, zone_text(ZONE)).unwrap();
    let secondary_port = free_port();
    let notify = format!("notify = [\"127.0.0.1:{secondary_port} key ops\"]\n");
    let primary = heron_primary(&file, "", &format!("key ops zonesub ANY\"]\n{notify}"));
    let config = secondary_config(
        secondary_port,
        &dir,
        primary.addr(),
        "\"127.0.0.1 key ops\", \"127.0.0.1 key other\"",
    );
    let secondary = ServerProcess::heron_on_port(&heron(), secondary_port, ZONE, &config)
        .unwrap_or_else(|log| panic!("the secondary starts: {log}"));
    let sec = secondary.addr();
    let ops = Some(("ops", SECRET));
    for (i, program) in ["nsupdate", "knsupdate"].iter().enumerate() {
        let name = format!("h{i}.{ZONE}");
        let add = format!("update add {name} 60 A 192.0.2.{}", 50 + i);
        assert_eq!(
            send(program, sec, ops, &add),
            "NOERROR",
            "{}",
            secondary.log()
        );
        // Made by the primary, then served by the secondary (IXFR).
        assert_eq!(answer(primary.addr(), &name, RType::A).len(), 1);
        let serial = Some(2 + i as u32);
        assert!(
            eventually(|| zone_serial(sec, ZONE) == serial),
            "{}",
            secondary.log()
        );
        assert_eq!(answer(sec, &name, RType::A).len(), 1);
    }
    // The primary's answer is relayed as it is: its rules refuse `other`.
    let other = Some(("other", OTHER_SECRET));
    let add = format!("update add x.{ZONE} 60 A 192.0.2.9");
    assert_eq!(send("nsupdate", sec, other, &add), "REFUSED");
    // And its prerequisites are the primary's.
    let prereq = format!("prereq yxdomain nothing.{ZONE}\n{add}");
    assert_eq!(send("nsupdate", sec, ops, &prereq), "NXDOMAIN");
    // Not on the secondary's list (unsigned): refused there.
    assert_eq!(send("nsupdate", sec, None, &add), "REFUSED");
    let log = secondary.log();
    assert!(log.contains("forwarded to"), "{log}");
    assert!(answer(primary.addr(), &format!("x.{ZONE}"), RType::A).is_empty());
}

/// An UPDATE adding `name` A, unsigned, with `id`.
fn update_message(id: u16, name: &str) -> Vec<u8> {
    let wire = |n: &str| heron_proto::Name::parse(n).unwrap().as_wire().to_vec();
    let mut m = id.to_be_bytes().to_vec();
    m.extend_from_slice(&[5 << 3, 0, 0, 1, 0, 0, 0, 1, 0, 0]);
    m.extend_from_slice(&wire(ZONE));
    m.extend_from_slice(&[0, 6, 0, 1]);
    m.extend_from_slice(&wire(name));
    m.extend_from_slice(&[0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1]);
    m
}

#[test]
fn forwards_past_the_bound_and_to_a_silent_primary_are_answered_servfail() {
    let dir = dir("silent");
    // A primary that takes connections and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let primary = silent.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for _ in 0..4 * MAX_OUTSTANDING {
            match silent.accept() {
                Ok((conn, _)) => held.push(conn),
                Err(_) => return,
            }
        }
    });
    let secondary = ServerProcess::heron_with_config(&heron(), "local.test", |port| {
        secondary_config(port, &dir, primary, "\"127.0.0.1\"")
    });
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client.connect(secondary.addr()).unwrap();
    // The bound of a primary alone (half of all), all waiting; then one
    // past it.
    let bound = MAX_OUTSTANDING / 2;
    for id in 0..=bound as u16 {
        let message = update_message(id, &format!("h{id}.{ZONE}"));
        client.send(&message).unwrap();
    }
    client
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut buf = [0u8; 512];
    let mut answers = Vec::new();
    for _ in 0..=bound {
        let n = client.recv(&mut buf).expect("every update is answered");
        assert!(n >= 12, "a DNS header");
        let id = u16::from_be_bytes([buf[0], buf[1]]);
        answers.push((id, buf[3] & 0x0f));
    }
    // The one past the bound first (at once), then the others, when the
    // wait for the primary ran out: all SERVFAIL.
    assert_eq!(answers[0].0, bound as u16, "{answers:?}");
    assert!(answers.iter().all(|(_, rcode)| *rcode == 2), "{answers:?}");
    let mut ids: Vec<u16> = answers.iter().map(|a| a.0).collect();
    ids.sort();
    assert_eq!(ids, (0..=bound as u16).collect::<Vec<_>>());
    let log = secondary.log();
    assert!(
        log.contains("forwarded updates for") && log.contains("are waiting already"),
        "{log}"
    );
    assert!(log.contains("no primary answered in time"), "{log}");
    // A line per update was a line for each of the updates: a few per reason
    // per 10 s now, the rest counted.
    let lines = log
        .lines()
        .filter(|l| l.contains("forwarding to its primary failed"))
        .count();
    assert!(lines <= 10, "{lines} lines:\n{log}");
}

/// The same through a Heron secondary of a Knot primary: Knot verifies
/// the client's TSIG on the forwarded message and makes the change.
#[test]
fn a_knot_primary_takes_an_update_forwarded_by_a_heron_secondary() {
    let dir = dir("knot");
    let file = dir.join("fwd.zone");
    std::fs::write(&file, zone_text(ZONE)).unwrap();
    let (primary_port, secondary_port) = (free_port(), free_port());
    let knot = knot_primary(&file, primary_port, secondary_port);
    let forwarding = "\"127.0.0.1 key ops\", \"127.0.0.1 key other\"";
    let config = secondary_config(secondary_port, &dir, knot.addr(), forwarding);
    let secondary = ServerProcess::heron_on_port(&heron(), secondary_port, ZONE, &config)
        .unwrap_or_else(|log| panic!("the secondary starts: {log}"));
    let sec = secondary.addr();
    let add = format!("update add k.{ZONE} 60 A 192.0.2.60");
    let ops = Some(("ops", SECRET));
    assert_eq!(
        send("nsupdate", sec, ops, &add),
        "NOERROR",
        "{}\n{}",
        secondary.log(),
        knot.log()
    );
    assert_eq!(answer(knot.addr(), &format!("k.{ZONE}"), RType::A).len(), 1);
    assert!(
        eventually(|| answer(sec, &format!("k.{ZONE}"), RType::A).len() == 1),
        "{}",
        secondary.log()
    );
    // Knot's answer to a key it does not know, relayed: NOTAUTH.
    let other = Some(("other", OTHER_SECRET));
    let add = format!("update add k2.{ZONE} 60 A 192.0.2.61");
    assert_eq!(
        send("nsupdate", sec, other, &add),
        "NOTAUTH",
        "{}",
        knot.log()
    );
    assert!(answer(knot.addr(), &format!("k2.{ZONE}"), RType::A).is_empty());
}

/// Knot, primary of `ZONE` from `file`, knowing only the key `ops`: it
/// takes updates and gives transfers signed with it, and notifies the
/// secondary on `secondary_port`.
fn knot_primary(file: &Path, primary_port: u16, secondary_port: u16) -> ServerProcess {
    ServerProcess::peer_with_config(ServerKind::Knot, primary_port, ZONE, |d| {
        format!(
            "server:\n  rundir: \"{d}\"\n  listen: 127.0.0.1@{primary_port}\n\
             log:\n  - target: stderr\n    any: info\n\
             database:\n  storage: \"{d}\"\n\
             key:\n  - id: ops\n    algorithm: hmac-sha256\n    secret: {SECRET}\n\
             remote:\n  - id: secondary\n    address: 127.0.0.1@{secondary_port}\n    key: ops\n\
             acl:\n  - id: update\n    key: ops\n    action: update\n\
             \x20 - id: transfer\n    key: ops\n    action: transfer\n\
             template:\n  - id: default\n    storage: \"{d}\"\n\
             zone:\n  - domain: {ZONE}\n    file: \"{}\"\n    acl: [update, transfer]\n\
             \x20   notify: secondary\n    zonefile-sync: -1\n",
            file.display(),
            d = d.display()
        )
    })
    .unwrap_or_else(|log| panic!("knotd starts: {log}"))
}

/// `update-forwarding-key = "ops"` on a secondary whose clients sign with
/// `other`, a key its primary does not know: the secondary checks the
/// client's TSIG, signs the forwarded UPDATE with `ops`, and signs the
/// primary's answer again with `other` (nsupdate and knsupdate verify
/// it, or they fail).
fn resigned_forwards_reach(primary: &ServerProcess, secondary: &ServerProcess) {
    let sec = secondary.addr();
    let other = Some(("other", OTHER_SECRET));
    for (i, program) in ["nsupdate", "knsupdate"].iter().enumerate() {
        let name = format!("r{i}.{ZONE}");
        let add = format!("update add {name} 60 A 192.0.2.{}", 70 + i);
        assert_eq!(
            send(program, sec, other, &add),
            "NOERROR",
            "{program}\n{}\n{}",
            secondary.log(),
            primary.log()
        );
        assert_eq!(answer(primary.addr(), &name, RType::A).len(), 1);
        assert!(
            eventually(|| answer(sec, &name, RType::A).len() == 1),
            "{}",
            secondary.log()
        );
    }
    // The primary's refusal of a prerequisite, signed again for the client.
    let prereq = format!("prereq yxdomain nothing.{ZONE}\nupdate add x.{ZONE} 60 A 192.0.2.9");
    assert_eq!(send("nsupdate", sec, other, &prereq), "NXDOMAIN");
    // The client's key is what the secondary's list checks: `ops` signs
    // forwards, but its clients are not on the list.
    let ops = Some(("ops", SECRET));
    assert_eq!(send("nsupdate", sec, ops, &prereq), "REFUSED");
    assert!(answer(primary.addr(), &format!("x.{ZONE}"), RType::A).is_empty());
}

#[test]
fn a_heron_primary_takes_updates_re_signed_with_the_secondarys_key() {
    let dir = dir("resign");
    let file = dir.join("fwd.zone");
    std::fs::write(&file, zone_text(ZONE)).unwrap();
    let secondary_port = free_port();
    let primary = ServerProcess::heron_with_config(&heron(), ZONE, |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n\
             [[key]]\nname = \"ops\"\nsecret = \"{SECRET}\"\n\
             [[zone]]\norigin = \"{ZONE}\"\nfile = \"{}\"\n\
             allow-update = [\"key ops zonesub ANY\"]\n\
             allow-transfer = [\"127.0.0.1 key ops\"]\n\
             notify = [\"127.0.0.1:{secondary_port} key ops\"]\n",
            file.display()
        )
    });
    let config = secondary_config_with(
        secondary_port,
        &dir,
        primary.addr(),
        "\"127.0.0.1 key other\"",
        "update-forwarding-key = \"ops\"\n",
    );
    let secondary = ServerProcess::heron_on_port(&heron(), secondary_port, ZONE, &config)
        .unwrap_or_else(|log| panic!("the secondary starts: {log}"));
    resigned_forwards_reach(&primary, &secondary);
    // The primary saw the secondary's key, never the client's.
    let log = primary.log();
    assert!(log.contains("key ops"), "{log}");
    assert!(!log.contains("key other"), "{log}");
}

#[test]
fn a_knot_primary_takes_updates_re_signed_with_the_secondarys_key() {
    let dir = dir("resign-knot");
    let file = dir.join("fwd.zone");
    std::fs::write(&file, zone_text(ZONE)).unwrap();
    let (primary_port, secondary_port) = (free_port(), free_port());
    let knot = knot_primary(&file, primary_port, secondary_port);
    let config = secondary_config_with(
        secondary_port,
        &dir,
        knot.addr(),
        "\"127.0.0.1 key other\"",
        "update-forwarding-key = \"ops\"\n",
    );
    let secondary = ServerProcess::heron_on_port(&heron(), secondary_port, ZONE, &config)
        .unwrap_or_else(|log| panic!("the secondary starts: {log}"));
    resigned_forwards_reach(&knot, &secondary);
}

/// A primary that answers each UPDATE it is sent with the request echoed
/// as its response: first with the request's TSIG left on (a MAC that
/// cannot verify as an answer's), then with none.
fn badly_signing_primary() -> SocketAddr {
    use std::io::{Read, Write};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut answered = 0;
        for conn in listener.incoming().take(256) {
            let Ok(mut conn) = conn else { return };
            conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut len = [0u8; 2];
            if conn.read_exact(&mut len).is_err() {
                continue;
            }
            let mut m = vec![0u8; usize::from(u16::from_be_bytes(len))];
            if conn.read_exact(&mut m).is_err() || m.len() < 12 || (m[2] >> 3) & 0xf != 5 {
                continue; // not an UPDATE: the secondary's refresh
            }
            m[2] |= 0x80;
            if answered % 2 == 1 {
                heron_proto::tsig::strip(&mut m).unwrap();
            }
            answered += 1;
            let mut framed = (m.len() as u16).to_be_bytes().to_vec();
            framed.extend_from_slice(&m);
            let _ = conn.write_all(&framed);
        }
    });
    addr
}

fn forward_tsig_failures(metrics: SocketAddr) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(metrics).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let request = b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\n\r\n";
    stream.write_all(request).unwrap();
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text);
    let sample = format!("heron_update_forward_tsig_failures_total{{zone=\"{ZONE}.\"}} ");
    let line = text.lines().find(|l| l.starts_with(&sample))?;
    Some(line[sample.len()..].trim().to_string())
}

/// A primary's answer that fails the check with the forwarding key (a
/// wrong MAC, or unsigned) is not relayed: the client gets SERVFAIL
/// (signed with its key), each failure is counted, and the first alone
/// is logged.
#[test]
fn a_re_signed_forwards_answer_that_fails_its_tsig_check_is_servfail() {
    let dir = dir("resign-bad");
    let primary = badly_signing_primary();
    let metrics_port = free_port();
    let secondary = ServerProcess::heron_with_config(&heron(), "local.test", |port| {
        secondary_config_with(
            port,
            &dir,
            primary,
            "\"127.0.0.1 key other\"",
            "update-forwarding-key = \"ops\"\n",
        ) + &format!("[metrics]\nlisten = \"127.0.0.1:{metrics_port}\"\n")
    });
    let metrics = SocketAddr::from(([127, 0, 0, 1], metrics_port));
    assert_eq!(forward_tsig_failures(metrics), None, "none yet");
    let other = Some(("other", OTHER_SECRET));
    let add = format!("update add b.{ZONE} 60 A 192.0.2.9");
    for expected in ["1", "2"] {
        assert_eq!(
            send("nsupdate", secondary.addr(), other, &add),
            "SERVFAIL",
            "{}",
            secondary.log()
        );
        assert_eq!(forward_tsig_failures(metrics).as_deref(), Some(expected));
    }
    let log = secondary.log();
    assert_eq!(
        log.matches("failed the check with key ops").count(),
        1,
        "{log}"
    );
    assert!(log.contains("BADSIG"), "{log}");
}

/// A primary that answers forwarded UPDATEs with something else: 4 bytes
/// that begin as the answer would, then a whole answer with another ID,
/// then one of 4,000 bytes to a client over UDP without EDNS (512 at
/// most). None is relayed: each client is answered SERVFAIL by Heron.
#[test]
fn a_primarys_garbage_wrong_id_or_oversized_answer_is_not_relayed() {
    use std::io::{Read, Write};
    let dir = dir("garbage");
    let hostile = TcpListener::bind("127.0.0.1:0").unwrap();
    let primary = hostile.local_addr().unwrap();
    std::thread::spawn(move || {
        // By the update's ID: other connections (a refresh) get nothing.
        for _ in 0..16 {
            let Ok((mut conn, _)) = hostile.accept() else {
                return;
            };
            let mut len = [0u8; 2];
            let mut request = vec![0u8; 0];
            if conn.read_exact(&mut len).is_ok() {
                request.resize(usize::from(u16::from_be_bytes(len)), 0);
                let _ = conn.read_exact(&mut request);
            }
            if request.len() < 12 {
                continue;
            }
            let mut answer = request.clone();
            answer[2] |= 0x80;
            match u16::from_be_bytes([request[0], request[1]]) {
                100 => answer.truncate(4),
                101 => answer[1] ^= 1,
                102 => {
                    answer.resize(4000, 0);
                    answer[3] |= 3; // NXDOMAIN
                }
                _ => continue,
            }
            let mut framed = (answer.len() as u16).to_be_bytes().to_vec();
            framed.extend_from_slice(&answer);
            let _ = conn.write_all(&framed);
        }
    });
    let (secondary, client) = forwarding_secondary(&dir, primary);
    let mut buf = [0u8; 8192];
    // An unsigned request's answer is the secondary's own, with the
    // primary's rcode: one past the client's UDP size is no matter then.
    for (id, rcode) in (0..3u16).zip([2, 2, 3]) {
        let message = update_message(100 + id, &format!("g{id}.{ZONE}"));
        client.send(&message).unwrap();
        let n = client.recv(&mut buf).expect("the update is answered");
        assert!((12..=512).contains(&n), "{n} bytes");
        assert_eq!(u16::from_be_bytes([buf[0], buf[1]]), 100 + id);
        assert_eq!(buf[3] & 0x0f, rcode, "{id}");
    }
    let log = secondary.log();
    assert!(log.contains("no primary answered"), "{log}");
}

/// A Heron secondary of `primary` forwarding what 127.0.0.1 sends, and a
/// UDP client of it.
fn forwarding_secondary(dir: &Path, primary: SocketAddr) -> (ServerProcess, UdpSocket) {
    let secondary = ServerProcess::heron_with_config(&heron(), "local.test", |port| {
        secondary_config(port, dir, primary, "\"127.0.0.1\"")
    });
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client.connect(secondary.addr()).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    (secondary, client)
}

/// A primary answering NOERROR to every UPDATE on a connection, for as
/// long as the connection lasts; the count of connections that carried one.
fn counting_primary() -> (SocketAddr, Arc<AtomicUsize>) {
    primary_answering(false, Duration::ZERO)
}

/// [`counting_primary`], sending before each answer a stray copy of it
/// with another ID when `stray`, each answer `delay` after its UPDATE.
fn primary_answering(stray: bool, delay: Duration) -> (SocketAddr, Arc<AtomicUsize>) {
    use std::io::{Read, Write};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (addr, count) = (
        listener.local_addr().unwrap(),
        Arc::new(AtomicUsize::new(0)),
    );
    let counted = count.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(512) {
            let Ok(mut conn) = conn else { return };
            let counted = counted.clone();
            std::thread::spawn(move || {
                let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
                let mut carried = false;
                let mut len = [0u8; 2];
                while conn.read_exact(&mut len).is_ok() {
                    let mut m = vec![0u8; usize::from(u16::from_be_bytes(len))];
                    if conn.read_exact(&mut m).is_err() || m.len() < 12 {
                        return;
                    }
                    if (m[2] >> 3) & 0xf != 5 {
                        continue; // the secondary's SOA checks: not answered
                    }
                    if !carried {
                        carried = true;
                        counted.fetch_add(1, Ordering::SeqCst);
                    }
                    m[2] |= 0x80;
                    std::thread::sleep(delay);
                    let mut framed = Vec::new();
                    if stray {
                        let mut copy = m.clone();
                        copy[1] ^= 0x55;
                        framed.extend_from_slice(&(copy.len() as u16).to_be_bytes());
                        framed.extend_from_slice(&copy);
                    }
                    framed.extend_from_slice(&(m.len() as u16).to_be_bytes());
                    framed.extend_from_slice(&m);
                    if conn.write_all(&framed).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, count)
}

/// Forwards reuse their connections to the primary, and their log lines
/// are limited (black-box finding BH-1: a flood of UPDATEs over UDP made
/// one new TCP connection, so one TIME_WAIT, and one INFO line each); a
/// burst waits for the kept connections rather than opening more (BK-11).
#[test]
fn forwards_reuse_connections_to_the_primary_and_their_lines_are_limited() {
    const UPDATES: u16 = 100;
    const ONE_BY_ONE: u16 = 20;
    let dir = dir("reuse");
    let (primary, connections) = counting_primary();
    let (secondary, client) = forwarding_secondary(&dir, primary);
    let mut buf = [0u8; 1500];
    let mut answered = |id: u16| {
        let n = client.recv(&mut buf).expect("the update is answered");
        assert_eq!(buf[3] & 0x0f, 0, "NOERROR: {}", secondary.log());
        assert!(
            n >= 12 && u16::from_be_bytes([buf[0], buf[1]]) < UPDATES,
            "{id}"
        );
    };
    for id in 0..ONE_BY_ONE {
        client
            .send(&update_message(id, &format!("r{id}.{ZONE}")))
            .unwrap();
        answered(id);
    }
    assert_eq!(
        connections.load(Ordering::SeqCst),
        1,
        "one after another: one"
    );
    for id in ONE_BY_ONE..UPDATES {
        client
            .send(&update_message(id, &format!("r{id}.{ZONE}")))
            .unwrap();
    }
    (ONE_BY_ONE..UPDATES).for_each(&mut answered);
    let opened = connections.load(Ordering::SeqCst);
    assert!(opened <= 32, "{opened} connections for a burst");
    let log = secondary.log();
    let lines = log.lines().filter(|l| l.contains("forwarded to")).count();
    assert!((1..=10).contains(&lines), "{lines} lines: {log}");
}

/// A burst of 100 forwards to a primary that answers each half a second
/// later is all answered NOERROR within the forwards' 5 s (black-box
/// finding BM-4: with 8 connections at most, a fifth of them waited past
/// their deadline, SERVFAIL, though the primary made them).
#[test]
fn a_burst_to_a_slow_primary_is_answered_in_time() {
    let dir = dir("slow");
    let (primary, connections) = primary_answering(false, Duration::from_millis(500));
    let (secondary, client) = forwarding_secondary(&dir, primary);
    for id in 0..100u16 {
        client
            .send(&update_message(id, &format!("b{id}.{ZONE}")))
            .unwrap();
    }
    let mut buf = [0u8; 1500];
    for _ in 0..100 {
        client.recv(&mut buf).expect("each update is answered");
        assert_eq!(buf[3] & 0x0f, 0, "NOERROR: {}", secondary.log());
    }
    assert!(connections.load(Ordering::SeqCst) <= 32);
}

/// A primary's message with another ID than the forward's (a stray one)
/// is passed over, and the forward's own answer relayed (black-box
/// finding BK-10: the stray one was taken for the answer, SERVFAIL).
#[test]
fn a_primarys_stray_message_is_passed_over() {
    let dir = dir("stray");
    let (primary, _) = primary_answering(true, Duration::ZERO);
    let (secondary, client) = forwarding_secondary(&dir, primary);
    let mut buf = [0u8; 1500];
    for id in 0..5u16 {
        client
            .send(&update_message(id, &format!("s{id}.{ZONE}")))
            .unwrap();
        client.recv(&mut buf).expect("the update is answered");
        assert_eq!(u16::from_be_bytes([buf[0], buf[1]]), id);
        assert_eq!(buf[3] & 0x0f, 0, "NOERROR: {}", secondary.log());
    }
}

/// `update_message` with an OPT record asking for the NSID.
fn asking_nsid(mut message: Vec<u8>) -> Vec<u8> {
    message[11] = 1; // ARCOUNT
    message.extend_from_slice(&[0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 4, 0, 3, 0, 0]);
    message
}

/// An unsigned forwarded UPDATE's answer is the secondary's own, with
/// the primary's rcode: the NSID and options the client asked of the
/// secondary, not the primary's (black-box finding BD-4: the primary's
/// NSID and cookie came back, and a keepalive over UDP).
#[test]
fn a_forwarded_updates_answer_carries_the_secondarys_options() {
    let dir = dir("options");
    let file = dir.join("fwd.zone");
    std::fs::write(&file, zone_text(ZONE)).unwrap();
    let secondary_port = free_port();
    let primary = heron_primary(
        &file,
        "nsid = \"primary-ns\"\n",
        "127.0.0.1 zonesub ANY\"]\n",
    );
    let mut config = secondary_config(secondary_port, &dir, primary.addr(), "\"127.0.0.1\"");
    config = config.replace("workers = 1\n", "workers = 1\nnsid = \"second-ns\"\n");
    let secondary = ServerProcess::heron_on_port(&heron(), secondary_port, ZONE, &config)
        .unwrap_or_else(|log| panic!("the secondary starts: {log}"));
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client.connect(secondary.addr()).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    client
        .send(&asking_nsid(update_message(7, &format!("n.{ZONE}"))))
        .unwrap();
    let mut buf = [0u8; 1500];
    let n = client.recv(&mut buf).expect("the update is answered");
    let answer = &buf[..n];
    assert_eq!(answer[3] & 0x0f, 0, "NOERROR: {}", secondary.log());
    let has = |text: &[u8]| answer.windows(text.len()).any(|w| w == text);
    assert!(has(b"second-ns") && !has(b"primary-ns"), "{answer:?}");
    assert_eq!(
        answer.len(),
        12 + 4 + ZONE.len() + 2 + 11 + 4 + 9,
        "no keepalive over UDP"
    );
    assert_eq!(answer[n - 9 - 4], 0, "NSID option code 3 follows");
    assert_eq!(answer[n - 9 - 3], 3);
}

/// A secondary of two primaries, the first of which takes connections
/// and never answers: a forwarded UPDATE goes on to the second in time
/// (black-box finding: the first took the whole wait, SERVFAIL; BIND
/// goes on to the second).
#[test]
fn an_update_goes_on_to_the_second_primary_when_the_first_hangs() {
    let dir = dir("second");
    let file = dir.join("fwd.zone");
    std::fs::write(&file, zone_text(ZONE)).unwrap();
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let hung = silent.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        while let Ok((conn, _)) = silent.accept() {
            held.push(conn);
            if held.len() > 64 {
                return;
            }
        }
    });
    let primary = ServerProcess::heron_with_config(&heron(), ZONE, |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n{}\
             [[zone]]\norigin = \"{ZONE}\"\nfile = \"{}\"\n\
             allow-update = [\"key ops zonesub ANY\"]\n\
             allow-transfer = [\"127.0.0.1 key ops\"]\n",
            keys(),
            file.display()
        )
    });
    let config = secondary_config(0, &dir, hung, "\"127.0.0.1 key ops\"").replace(
        &format!("primaries = [\"{hung} key ops\"]"),
        &format!(
            "primaries = [\"{hung} key ops\", \"{} key ops\"]",
            primary.addr()
        ),
    );
    let secondary = ServerProcess::heron_with_config(&heron(), "local.test", |port| {
        config.replace("127.0.0.1:0\"]", &format!("127.0.0.1:{port}\"]"))
    });
    let add = format!("update add second.{ZONE} 60 A 192.0.2.77");
    let said = send("nsupdate", secondary.addr(), Some(("ops", SECRET)), &add);
    assert_eq!(said, "NOERROR", "{}", secondary.log());
    assert_eq!(
        answer(primary.addr(), &format!("second.{ZONE}"), RType::A).len(),
        1
    );
}
