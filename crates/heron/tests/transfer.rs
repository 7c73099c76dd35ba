//! Heron as a primary, against real peers: `kdig` and `dig` transfer
//! zones from it with and without TSIG, and NSD, Knot and BIND run as its
//! secondaries: they AXFR the zone, then, after an edit and a SIGHUP,
//! hear a NOTIFY and fetch the change by IXFR; BIND does it over TLS too
//! (XoT, RFC 9103).

mod xfr_common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use heron_proto::message::Message;
use heron_proto::{Name, RType, Rcode};
use heron_testkit::{
    QueryOpts, Secondary, ServerKind, ServerProcess, XotTrust, build_query, free_port,
    try_query_udp,
};
use xfr_common::*;

/// Heron serving `file` with `zone_lines` added to its [[zone]] entry.
fn start_heron(file: &Path, zone_lines: &str) -> ServerProcess {
    start_heron_with(file, zone_lines, "")
}

/// [`start_heron`] with `sections` (e.g. `[tls]`) added to the file.
fn start_heron_with(file: &Path, zone_lines: &str, sections: &str) -> ServerProcess {
    let file = file.to_path_buf();
    let zone_lines = zone_lines.to_string();
    ServerProcess::heron_with_config(&heron(), ORIGIN, move |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n{sections}\n\
             [[key]]\nname = \"{KEY}\"\nalgorithm = \"hmac-sha256\"\nsecret = \"{SECRET}\"\n\
             [[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\n{zone_lines}\n",
            file.display()
        )
    })
}

/// How `kind` checks the certificate [`tls_section`] wrote: BIND cannot
/// check it here, NSD must.
fn xot_trust(kind: ServerKind, file: &Path) -> XotTrust {
    match kind {
        ServerKind::Nsd => XotTrust::Strict {
            ca: file.parent().unwrap().join("chain.pem"),
            name: "localhost".into(),
        },
        _ => XotTrust::Opportunistic,
    }
}

/// A `[tls]` section on a free port with a new self-signed certificate
/// written next to `file`; returns it and the TLS port.
fn tls_section(file: &Path) -> (String, u16) {
    let dir = file.parent().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (chain, key) = (dir.join("chain.pem"), dir.join("key.pem"));
    std::fs::write(&chain, cert.cert.pem()).unwrap();
    std::fs::write(&key, cert.signing_key.serialize_pem()).unwrap();
    let port = free_port();
    let section = format!(
        "[tls]\nlisten = [\"127.0.0.1:{port}\"]\ncertificate = \"{}\"\nkey = \"{}\"\n",
        chain.display(),
        key.display()
    );
    (section, port)
}

/// Runs kdig (bounded by its own timeout) and returns its output.
fn kdig(server: SocketAddr, args: &[&str]) -> Output {
    Command::new("kdig")
        .arg(format!("@{}", server.ip()))
        .arg("-p")
        .arg(server.port().to_string())
        .args(["+timeout=5", "+retry=0"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("kdig runs (install knot-dnsutils)")
}

/// Whether kdig printed `what` (its errors go to stderr).
fn said(out: &Output, what: &str) -> bool {
    let text = [&out.stdout[..], &out.stderr[..]].concat();
    String::from_utf8_lossy(&text).contains(what)
}

fn key_arg(secret: &str) -> String {
    format!("hmac-sha256:{KEY}:{secret}")
}

/// The records of a kdig transfer listing: (owner, type) of every line
/// that is a record, TSIG lines left out.
fn records(stdout: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4 && f[3] != "TSIG").then(|| format!("{} {}", f[0], f[3]))
        })
        .collect()
}

#[test]
fn axfr_and_ixfr_with_tsig_to_kdig_and_dig() {
    let file = temp_zone("kdig", &zone_text(1, ""));
    let server = start_heron(
        &file,
        &format!("allow-transfer = [\"127.0.0.1 key {KEY}\"]"),
    );
    let addr = server.addr();

    let out = kdig(addr, &["-y", &key_arg(SECRET), ORIGIN, "AXFR"]);
    let got = records(&out.stdout);
    assert_eq!(
        got.len(),
        RECORDS + 1,
        "every record, SOA twice: {}",
        server.log()
    );
    assert_eq!(got.first().unwrap(), "xfr.test. SOA");
    assert_eq!(got.last().unwrap(), "xfr.test. SOA");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !said(&out, ";; ERROR") && !said(&out, ";; WARNING"),
        "{text}"
    );
    assert!(
        server.log().contains("AXFR of xfr.test. serial 1"),
        "{}",
        server.log()
    );
    let messages: usize = text
        .lines()
        .find_map(|l| l.strip_prefix(";; Received "))
        .and_then(|l| l.split('(').nth(1)?.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    assert!(
        messages > 1,
        "a {RECORDS}-record zone spans messages: {text}"
    );

    // dig verifies every message's TSIG too.
    let dig = Command::new("dig")
        .arg(format!("@{}", addr.ip()))
        .args(["-p", &addr.port().to_string(), "+tries=1", "+time=5"])
        .args(["-y", &key_arg(SECRET), ORIGIN, "AXFR"])
        .output()
        .expect("dig runs (install bind9-dnsutils)");
    let dig_text = String::from_utf8_lossy(&dig.stdout);
    let want = format!("XFR size: {} records", RECORDS + 1);
    assert!(dig_text.contains(&want), "{dig_text}");

    // An edit and a reload: IXFR from serial 1 carries just the change.
    std::fs::write(
        &file,
        zone_text(2, "new A 192.0.2.99\n").replace("h7 A 10.0.0.7", "h7 A 10.9.9.9"),
    )
    .unwrap();
    server.reload();
    assert!(eventually(|| soa_serial(addr) == Some(2)));
    let out = kdig(addr, &["-y", &key_arg(SECRET), ORIGIN, "IXFR=1"]);
    let got = records(&out.stdout);
    assert_eq!(
        got,
        [
            "xfr.test. SOA",
            "xfr.test. SOA",
            "h7.xfr.test. A",
            "xfr.test. SOA",
            "h7.xfr.test. A",
            "new.xfr.test. A",
            "xfr.test. SOA"
        ],
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Up to date: the SOA alone.
    let got = records(&kdig(addr, &["-y", &key_arg(SECRET), ORIGIN, "IXFR=2"]).stdout);
    assert_eq!(got, ["xfr.test. SOA"]);
    // A serial the journal never saw: the whole zone.
    let got = records(&kdig(addr, &["-y", &key_arg(SECRET), ORIGIN, "IXFR=0"]).stdout);
    assert_eq!(got.len(), RECORDS + 2);
    std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
}

#[test]
fn transfers_without_the_right_key_or_address_are_refused_and_logged() {
    let file = temp_zone("acl", &zone_text(1, ""));
    let server = start_heron(
        &file,
        &format!("allow-transfer = [\"127.0.0.2 key {KEY}\", \"127.0.0.3\"]"),
    );
    let addr = server.addr();
    let refused = |out: &Output| records(&out.stdout).is_empty() && said(out, "REFUSED");
    let wrong_secret = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    // Unsigned, from an address whose rule wants the key.
    assert!(refused(&kdig(addr, &["-b", "127.0.0.2", ORIGIN, "AXFR"])));
    // Signed, from an address no rule covers.
    assert!(refused(&kdig(
        addr,
        &["-b", "127.0.0.1", "-y", &key_arg(SECRET), ORIGIN, "AXFR"]
    )));
    // A wrong secret: BADSIG, whatever the address.
    let out = kdig(
        addr,
        &[
            "-b",
            "127.0.0.2",
            "-y",
            &key_arg(wrong_secret),
            ORIGIN,
            "AXFR",
        ],
    );
    assert!(records(&out.stdout).is_empty());
    assert!(said(&out, "BADSIG"));
    // The right key from the right address, and an open address.
    let ok = kdig(
        addr,
        &["-b", "127.0.0.2", "-y", &key_arg(SECRET), ORIGIN, "AXFR"],
    );
    assert_eq!(records(&ok.stdout).len(), RECORDS + 1);
    let open = kdig(addr, &["-b", "127.0.0.3", ORIGIN, "AXFR"]);
    assert_eq!(records(&open.stdout).len(), RECORDS + 1);
    // A zone we do not serve.
    let out = kdig(addr, &["-b", "127.0.0.3", "other.test", "AXFR"]);
    assert!(said(&out, "NOTAUTH"));

    let log = server.log();
    assert!(log.contains("from 127.0.0.2"), "{log}");
    assert!(log.contains("not signed with an allowed TSIG key"), "{log}");
    assert!(log.contains("address not allowed"), "{log}");
    assert!(log.contains("BADSIG"), "{log}");
    std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
}

#[test]
fn signed_queries_get_signed_answers() {
    let file = temp_zone("signed", &zone_text(1, ""));
    let server = start_heron(&file, "");
    let addr = server.addr();
    // kdig checks the answer's TSIG and warns when it fails or is missing.
    let out = kdig(addr, &["-y", &key_arg(SECRET), "mail.xfr.test", "A"]);
    assert_eq!(records(&out.stdout), ["mail.xfr.test. A"]);
    assert!(
        said(&out, "xfr-key.") && said(&out, "TSIG"),
        "answer is signed"
    );
    assert!(
        !said(&out, "WARNING"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let tcp = kdig(
        addr,
        &["+tcp", "-y", &key_arg(SECRET), "mail.xfr.test", "A"],
    );
    assert!(!said(&tcp, "WARNING") && records(&tcp.stdout).len() == 1);
    // A wrong secret: no data, BADSIG.
    let wrong = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    let out = kdig(addr, &["-y", &key_arg(wrong), "mail.xfr.test", "A"]);
    assert!(records(&out.stdout).is_empty() && said(&out, "BADSIG"));
    std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
}

#[test]
fn ixfr_over_udp_is_answered_with_the_soa() {
    let file = temp_zone("udp", &zone_text(5, ""));
    let server = start_heron(&file, "allow-transfer = [\"127.0.0.1\"]");
    let out = kdig(server.addr(), &["+notcp", ORIGIN, "IXFR=4"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(records(&out.stdout), ["xfr.test. SOA"], "{text}");
    // AXFR has no UDP form.
    let q = build_query(
        &Name::parse(ORIGIN).unwrap(),
        RType::AXFR,
        &QueryOpts::default(),
    );
    let m = Message::parse(&try_query_udp(server.addr(), &q).unwrap()).unwrap();
    assert_eq!(m.rcode(), Rcode::REFUSED);
    std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
}

/// Heron primary, `kind` secondary, TSIG on transfers and NOTIFY; with
/// `tls`, the transfers go over TLS.
fn primary_to_secondary(kind: ServerKind, tls: bool) {
    let tag = format!(
        "{}{}",
        kind.to_string().to_lowercase(),
        if tls { "-xot" } else { "" }
    );
    let file = temp_zone(&tag, &zone_text(1, ""));
    let secondary_port = free_port();
    let (sections, tls_port) = if tls {
        tls_section(&file)
    } else {
        (String::new(), 0)
    };
    let server = start_heron_with(
        &file,
        &format!(
            "allow-transfer = [\"127.0.0.1 key {KEY}\"]\n\
             notify = [\"127.0.0.1:{secondary_port} key {KEY}\"]"
        ),
        &sections,
    );
    // Over TLS the secondary knows only the TLS port.
    let primary = if tls {
        SocketAddr::new(server.addr().ip(), tls_port)
    } else {
        server.addr()
    };
    let spec = Secondary {
        origin: format!("{ORIGIN}."),
        primary,
        key: Some(tsig_spec()),
        tls: tls.then(|| xot_trust(kind, &file)),
    };
    let secondary = spec.start(kind, secondary_port);
    let sec = secondary.addr();
    assert_eq!(soa_serial(sec), Some(1));
    for (name, qtype) in [
        ("h5999.xfr.test", RType::A),
        ("xfr.test", RType::MX),
        ("txt.xfr.test", RType::TXT),
    ] {
        assert_eq!(
            answer(sec, name, qtype),
            answer(server.addr(), name, qtype),
            "{name}"
        );
    }

    // Change a record, add one, delete one; SIGHUP: NOTIFY, then IXFR.
    let edited = zone_text(2, "new A 192.0.2.99\n")
        .replace("h7 A 10.0.0.7", "h7 A 10.9.9.9")
        .replace("txt TXT \"hello world\"\n", "");
    std::fs::write(&file, edited).unwrap();
    server.reload();
    assert!(
        eventually(|| soa_serial(sec) == Some(2)),
        "{kind} never got serial 2.\nHeron: {}\n{kind}: {}",
        server.log(),
        secondary.log()
    );
    assert_eq!(
        answer(sec, "h7.xfr.test", RType::A),
        ["h7.xfr.test. 300 IN A 10.9.9.9"]
    );
    assert_eq!(answer(sec, "new.xfr.test", RType::A).len(), 1);
    assert!(answer(sec, "txt.xfr.test", RType::TXT).is_empty());
    let log = server.log();
    assert!(
        log.contains("IXFR of xfr.test. serial 2"),
        "{kind} used IXFR: {log}"
    );
    assert!(!log.contains("TSIG check failed"), "{log}");
    // The secondary acknowledged our signed NOTIFYs with valid signatures.
    assert!(
        !log.contains("failed TSIG") && !log.contains(" answered "),
        "{log}"
    );
    if tls {
        // Only the TLS port was given to the secondary; say so in its words.
        let peer = secondary.log();
        let from = match kind {
            ServerKind::Nsd => format!("from 127.0.0.1@{tls_port} TSIG verified with key {KEY} of"),
            _ => format!("from 127.0.0.1#{tls_port}: Transfer status: success"),
        };
        let transfers = peer.matches(&from).count();
        assert_eq!(transfers, 2, "AXFR and IXFR over TLS: {peer}");
    }
    std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
}

#[test]
fn nsd_is_a_secondary_of_heron() {
    primary_to_secondary(ServerKind::Nsd, false);
}

#[test]
fn knot_is_a_secondary_of_heron() {
    primary_to_secondary(ServerKind::Knot, false);
}

#[test]
fn bind_is_a_secondary_of_heron() {
    primary_to_secondary(ServerKind::Bind, false);
}

#[test]
fn nsd_is_a_secondary_of_heron_over_tls() {
    primary_to_secondary(ServerKind::Nsd, true);
}

#[test]
fn bind_is_a_secondary_of_heron_over_tls() {
    primary_to_secondary(ServerKind::Bind, true);
}
