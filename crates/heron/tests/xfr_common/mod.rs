//! What the transfer tests share: the test zone, the TSIG key, small
//! queries, and kdig for transfers.
#![allow(dead_code)] // each test file uses its own part

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use heron_proto::message::Message;
use heron_proto::{Name, RType};
use heron_testkit::{QueryOpts, TsigSpec, build_query, try_query_udp};

pub const ORIGIN: &str = "xfr.test";
/// A fixed test key (32 random bytes, base64).
pub const SECRET: &str = "q0vXAPu5ZZ8NAb8+HTr5VxvpyvGhUTtX5xM0y4ZxZ4k=";
pub const KEY: &str = "xfr-key";
/// Address records beyond the fixed ones: enough for several messages.
pub const HOSTS: usize = 6000;
/// Records in the zone at serial 1.
pub const RECORDS: usize = HOSTS + 11;

pub fn heron() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_heron"))
}

/// A zone big enough to need several transfer messages, with the
/// record types whose RDATA holds names.
pub fn zone_text(serial: u32, extra: &str) -> String {
    let mut z = format!(
        "$ORIGIN {ORIGIN}.\n$TTL 300\n@ SOA ns hostmaster {serial} 3600 600 86400 60\n\
         @ NS ns\n@ NS ns.other.example.\n@ MX 10 mail\nns A 192.0.2.1\nmail A 192.0.2.2\n\
         www CNAME mail\n_sip._udp SRV 0 5 5060 mail\ntxt TXT \"hello world\"\n\
         sub NS ns.sub\nns.sub A 192.0.2.3\n"
    );
    for i in 0..HOSTS {
        z.push_str(&format!(
            "h{i} A 10.{}.{}.{}\n",
            i >> 16,
            (i >> 8) & 255,
            i & 255
        ));
    }
    z.push_str(extra);
    z
}

pub fn temp_zone(tag: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("heron-xfr-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("xfr.zone");
    std::fs::write(&file, text).unwrap();
    file
}

pub fn eventually(ok: impl FnMut() -> bool) -> bool {
    eventually_within(Duration::from_secs(20), ok)
}

pub use heron_testkit::eventually_within;

pub fn soa_serial(addr: SocketAddr) -> Option<u32> {
    zone_serial(addr, ORIGIN)
}

/// The serial `addr` answers for `zone`, if it answers with an SOA.
pub fn zone_serial(addr: SocketAddr, zone: &str) -> Option<u32> {
    heron_testkit::soa_serial(addr, zone)
}

pub fn answer(addr: SocketAddr, name: &str, qtype: RType) -> Vec<String> {
    let q = build_query(&Name::parse(name).unwrap(), qtype, &QueryOpts::default());
    let m = Message::parse(&try_query_udp(addr, &q).expect("answer")).expect("parses");
    let mut out: Vec<String> = m.answers.iter().map(|r| r.to_string()).collect();
    out.sort();
    out
}

/// The test key as the peers' configurations spell it.
pub fn tsig_spec() -> TsigSpec {
    TsigSpec {
        algorithm: "hmac-sha256".into(),
        name: KEY.into(),
        secret_base64: SECRET.into(),
    }
}

/// Runs kdig (bounded by its own timeout) and returns its output.
pub fn kdig(server: SocketAddr, args: &[&str]) -> Output {
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

/// The AXFR of signed `zone` from `server`, as kdig prints it.
pub fn signed_axfr(server: SocketAddr, zone: &str) -> String {
    let out = kdig(server, &[zone, "AXFR", "+nocomments", "+nostats"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success() && text.contains("RRSIG"), "{text}");
    text
}

/// The RRSIG records of an AXFR but the SOA's, one line each, spacing
/// normalised.
pub fn signatures(axfr: &str) -> std::collections::HashSet<String> {
    (axfr.lines())
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.len() > 4 && w[3] == "RRSIG" && w[4] != "SOA")
        .map(|w| w.join(" "))
        .collect()
}

/// Whether kdig printed `what` (its errors go to stderr).
pub fn said(out: &Output, what: &str) -> bool {
    let text = [&out.stdout[..], &out.stderr[..]].concat();
    String::from_utf8_lossy(&text).contains(what)
}

/// The records of a kdig transfer listing: (owner, type) of every line
/// that is a record, TSIG lines left out.
pub fn records(stdout: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4 && f[3] != "TSIG").then(|| format!("{} {}", f[0], f[3]))
        })
        .collect()
}

/// The serials of the SOA records in a kdig transfer listing, in order:
/// an IXFR in incremental form is new, then old and next of each step,
/// then new again.
pub fn soa_serials(stdout: &[u8]) -> Vec<u32> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter(|l| !l.starts_with(';'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 7 && f[3] == "SOA").then(|| f[6].parse().ok())?
        })
        .collect()
}

/// Writes the configuration file `config` again without its lines that
/// start with one of `gone`.
pub fn config_without(config: &std::path::Path, gone: &[&str]) {
    let text = std::fs::read_to_string(config).unwrap();
    let text: String = (text.lines())
        .filter(|l| !gone.iter().any(|g| l.starts_with(g)))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(config, text).unwrap();
}

/// `server` (of zone `origin`) killed and started again on its
/// configuration file as it is now, on a fresh port (its control socket
/// where it was).
pub fn restarted(
    mut server: heron_testkit::ServerProcess,
    origin: &str,
) -> heron_testkit::ServerProcess {
    let text = std::fs::read_to_string(server.dir().join("heron.toml")).unwrap();
    let old = format!("127.0.0.1:{}", server.addr().port());
    server.kill();
    heron_testkit::ServerProcess::heron_with_config(&heron(), origin, move |port| {
        text.replace(&old, &format!("127.0.0.1:{port}"))
    })
}

/// The metrics endpoint's answer to `GET /metrics`.
pub fn scrape(metrics: SocketAddr) -> String {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(metrics).unwrap();
    conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut body = String::new();
    conn.read_to_string(&mut body).unwrap();
    body
}

/// The SOA serial written in the zone file at `file`.
pub fn file_serial(file: &std::path::Path) -> Option<u32> {
    serial_in(&std::fs::read_to_string(file).ok()?)
}

/// The SOA serial in zone file text (its first SOA line).
pub fn serial_in(text: &str) -> Option<u32> {
    let soa = text
        .lines()
        .find(|l| l.split_whitespace().any(|w| w == "SOA"))?;
    let fields: Vec<&str> = soa.split_whitespace().collect();
    let at = fields.iter().position(|w| *w == "SOA")?;
    fields.get(at + 3)?.parse().ok()
}
