//! `heron import` end to end: NSD, Knot and BIND configurations written
//! as Debian ships them and as the interop tests write them (a primary
//! zone with TSIG-keyed transfers and NOTIFY, a signed zone, a secondary
//! pulling from a primary with TSIG) are imported; the result passes
//! `heron check-config`; the original server runs on the original and
//! Heron on the result, on the same address one after the other, and
//! every name and type of the test zones (plus NXDOMAIN, NODATA,
//! wildcard, delegation and DO probes, over UDP and TCP) gets the same
//! answer from both. A deliberately awkward configuration per server has
//! every untranslatable setting listed with its line.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use heron_proto::{Name, RType};
use heron_testkit::{
    EdnsOpts, Normalized, QueryOpts, ServerKind, ServerProcess, build_query, diff,
    eventually_within, free_port, normalize, soa_serial, try_query_tcp, try_query_udp,
    try_query_udp_from,
};

const SECRET: &str = "aW1wb3J0LXRlc3Qtc2VjcmV0LWltcG9ydC10ZXN0IQ==";
const KEY: &str = "xfr.import.test";

fn heron() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_heron"))
}

const EXAMPLE: &str = "$ORIGIN example.test.\n$TTL 3600\n\
@ SOA ns1 hostmaster 2026112501 7200 3600 1209600 300\n\
@ NS ns1\n@ NS ns2.outside.example.\n@ A 192.0.2.10\n@ AAAA 2001:db8::10\n@ MX 10 mail\n\
@ TXT \"v=spf1 -all\"\nns1 A 192.0.2.1\nmail A 192.0.2.25\nwww CNAME @\n\
*.wild A 192.0.2.100\n_sip._tcp SRV 10 60 5060 mail\n\
sub NS ns.sub\nns.sub A 192.0.2.53\n";

const MEMBER: &str = "$ORIGIN member.test.\n$TTL 600\n\
@ SOA ns1 hostmaster 3 7200 3600 1209600 300\n@ NS ns1\nns1 A 192.0.2.1\nwww A 192.0.2.80\n";

const SECONDARY: &str = "$ORIGIN sec.test.\n$TTL 600\n\
@ SOA ns1 hostmaster 7 7200 3600 1209600 300\n@ NS ns1\nns1 A 192.0.2.1\nhost A 192.0.2.7\n";

/// Names and types to ask: every record, and the probes around them.
fn probes() -> Vec<(&'static str, RType, bool)> {
    let mut out = Vec::new();
    for (name, types) in [
        (
            "example.test",
            &[
                RType::SOA,
                RType::NS,
                RType::A,
                RType::AAAA,
                RType::MX,
                RType::TXT,
            ][..],
        ),
        ("ns1.example.test", &[RType::A, RType::AAAA][..]),
        ("mail.example.test", &[RType::A][..]),
        ("www.example.test", &[RType::CNAME, RType::A][..]),
        ("any.wild.example.test", &[RType::A, RType::TXT][..]),
        ("_sip._tcp.example.test", &[RType::SRV][..]),
        ("sub.example.test", &[RType::NS, RType::A][..]),
        ("deep.sub.example.test", &[RType::A][..]),
        ("missing.example.test", &[RType::A][..]),
        ("sec.test", &[RType::SOA, RType::NS][..]),
        ("host.sec.test", &[RType::A, RType::TXT][..]),
        ("nothing.sec.test", &[RType::A][..]),
        ("member.test", &[RType::SOA, RType::NS][..]),
        ("www.member.test", &[RType::A][..]),
        ("edge.test", &[RType::SOA, RType::DNSKEY, RType::NS][..]),
        ("www.edge.test", &[RType::A][..]),
        ("zz-none.edge.test", &[RType::A][..]),
    ] {
        for &t in types {
            out.push((name, t, false));
            out.push((name, t, true));
        }
    }
    out
}

/// Each probe's answer, over UDP (without and with DO) and over TCP.
fn answers(addr: SocketAddr) -> Vec<(String, Normalized)> {
    let mut out = Vec::new();
    for (i, (name, rtype, dnssec)) in probes().into_iter().enumerate() {
        let opts = QueryOpts {
            id: 0x4000 + i as u16,
            edns: Some(EdnsOpts {
                udp_size: 4096,
                do_bit: dnssec,
                version: 0,
            }),
            ..QueryOpts::default()
        };
        let query = build_query(&Name::parse(name).unwrap(), rtype, &opts);
        let udp = try_query_udp(addr, &query).unwrap_or_else(|e| panic!("{name} {rtype}: {e}"));
        let tcp = try_query_tcp(addr, &query).unwrap_or_else(|e| panic!("{name} {rtype} TCP: {e}"));
        let label = format!("{name} {rtype}{}", if dnssec { " +dnssec" } else { "" });
        out.push((format!("{label} udp"), normalize(&udp).unwrap()));
        out.push((format!("{label} tcp"), normalize(&tcp).unwrap()));
    }
    out
}

/// Every difference between the old server's answers and Heron's, less
/// two that the differential tests accept
/// (tests/data/differential/ACCEPTED.md): "mx-srv-additional", the
/// addresses of MX and SRV targets in the additional section, which NSD
/// leaves out and Knot and Heron add; and the RRSIGs over additional
/// addresses (which Heron adds since issue 38, `tests/additional_rrsigs.rs`
/// and the signed differential tests compare them; this test is about the
/// imported configuration and keeps them out, as it always has).
fn differences(old: &[(String, Normalized)], new: &[(String, Normalized)]) -> Vec<String> {
    old.iter()
        .zip(new)
        .flat_map(|((label, a), (_, b))| {
            let (mut a, mut b) = (a.clone(), b.clone());
            for n in [&mut a, &mut b] {
                drop_mx_srv_additional(n);
            }
            diff(&a, &b)
                .into_iter()
                .map(move |d| format!("{label}: {d}"))
        })
        .collect()
}

fn drop_mx_srv_additional(n: &mut Normalized) {
    let targets: Vec<String> = n
        .targets
        .iter()
        .filter(|t| t.starts_with("answer MX ") || t.starts_with("answer SRV "))
        .filter_map(|t| t.rsplit(' ').next().map(str::to_string))
        .collect();
    n.additional.retain(|r| {
        !targets
            .iter()
            .any(|t| r.split(' ').next() == Some(t.as_str()))
    });
    n.additional
        .retain(|r| !r.contains(" IN RRSIG A ") && !r.contains(" IN RRSIG AAAA "));
}

/// An AXFR of example.test from `addr` by kdig, signed with the test
/// key or not: its records (sorted, one line each) if the server sent
/// the zone, None if it refused.
fn axfr(addr: SocketAddr, signed: bool) -> Option<Vec<String>> {
    let mut cmd = Command::new("kdig");
    cmd.arg(format!("@{}", addr.ip()))
        .arg("-p")
        .arg(addr.port().to_string())
        .args([
            "example.test",
            "AXFR",
            "+noall",
            "+answer",
            "+time=5",
            "+retry=0",
        ]);
    if signed {
        cmd.arg("-y").arg(format!("hmac-sha256:{KEY}:{SECRET}"));
    }
    let out = cmd.output().expect("kdig (knot-dnsutils)");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut records: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
        .map(|l| {
            l.split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .to_ascii_lowercase()
        })
        .collect();
    records.sort();
    records.dedup();
    records
        .iter()
        .any(|r| r.contains(" soa "))
        .then_some(records)
}

/// Who may transfer example.test: with the key, and without it from
/// 127.0.0.1 (BIND's list lets that address in; NSD's and Knot's want
/// the key).
fn transfers(addr: SocketAddr) -> (Option<Vec<String>>, bool) {
    (axfr(addr, true), axfr(addr, false).is_some())
}

/// The zone files and a primary of sec.test for the secondaries.
struct Fixture {
    dir: tempfile::TempDir,
    primary: ServerProcess,
    signed: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("example.test.zone"), EXAMPLE).unwrap();
        let sec = dir.path().join("sec.test.zone");
        std::fs::write(&sec, SECONDARY).unwrap();
        let member = dir.path().join("member.test.zone");
        std::fs::write(&member, MEMBER).unwrap();
        let catalog = dir.path().join("cat.test.zone");
        let signed = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/differential/signed/edge.test.nsec.zone");
        let primary = ServerProcess::heron_with_config(&heron(), "sec.test", |port| {
            format!(
                "[server]\nlisten = [\"127.0.0.1:{port}\"]\n[[key]]\nname = \"{KEY}\"\nsecret = \"{SECRET}\"\n\
                 [[zone]]\norigin = \"sec.test\"\nfile = \"{}\"\nallow-transfer = [\"127.0.0.1 key {KEY}\"]\n\
                 [[zone]]\norigin = \"cat.test\"\nfile = \"{}\"\ncatalog = \"generate\"\nallow-transfer = [\"127.0.0.1 key {KEY}\"]\n\
                 [[zone]]\norigin = \"member.test\"\nfile = \"{}\"\nallow-transfer = [\"127.0.0.1 key {KEY}\"]\ncatalog-member = \"cat.test\"\n",
                sec.display(),
                catalog.display(),
                member.display()
            )
        });
        Fixture {
            dir,
            primary,
            signed,
        }
    }

    fn zone(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

/// Runs `heron ARGS`.
fn run(args: &[&str]) -> Output {
    Command::new(heron())
        .args(args)
        .output()
        .expect("run heron")
}

/// Imports `conf`, checks the result with check-config, and returns it.
fn import_and_check(from: &str, conf: &Path, out_dir: &Path) -> (PathBuf, String) {
    let out = out_dir.join("heron.toml");
    let result = run(&[
        "import",
        "--from",
        from,
        conf.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&result.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&result.stdout);
    assert!(result.status.success(), "import failed:\n{stderr}");
    assert!(
        !stderr.contains(SECRET) && !stdout.contains(SECRET),
        "a secret on the terminal:\n{stderr}"
    );
    let check = run(&["check-config", out.to_str().unwrap()]);
    assert!(
        check.status.success(),
        "check-config failed:\n{}{}\n{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr),
        std::fs::read_to_string(&out).unwrap()
    );
    (out, stderr)
}

/// The whole round: old server, import, Heron, same answers.
fn round(kind: ServerKind, from: &str, make_conf: impl FnOnce(&Path, u16, &Fixture) -> String) {
    let fixture = Fixture::new();
    let port = free_port();
    let conf_name = match kind {
        ServerKind::Nsd => "nsd.conf",
        ServerKind::Knot => "knot.conf",
        _ => "named.conf",
    };
    let old = ServerProcess::peer_with_config(kind, port, "example.test", |dir| {
        make_conf(dir, port, &fixture)
    })
    .unwrap_or_else(|log| panic!("{kind} did not start:\n{log}"));
    let addr = old.addr();
    assert!(
        eventually_within(Duration::from_secs(20), || soa_serial(addr, "sec.test")
            == Some(7)),
        "{kind} never transferred sec.test:\n{}",
        old.log()
    );
    let member_served =
        |addr| kind == ServerKind::Nsd || soa_serial(addr, "member.test") == Some(3);
    assert!(
        eventually_within(Duration::from_secs(30), || member_served(addr)),
        "{kind} never served the catalog's member:\n{}",
        old.log()
    );
    let before = answers(addr);
    let transfers_before = transfers(addr);
    assert!(
        transfers_before.0.is_some(),
        "{kind} refused the signed AXFR:\n{}",
        old.log()
    );
    let out_dir = tempfile::tempdir().unwrap();
    let (toml, notes) = import_and_check(from, &old.dir().join(conf_name), out_dir.path());
    // The interop configurations translate whole, but for BIND's catalog
    // options that Heron has no use for.
    let untranslated: Vec<&str> = notes
        .lines()
        .filter(|l| l.contains(": not translated: "))
        .collect();
    let expected = if kind == ServerKind::Bind { 1 } else { 0 };
    assert_eq!(untranslated.len(), expected, "{notes}");
    drop(old);
    let text = std::fs::read_to_string(&toml).unwrap();
    assert_eq!(
        text.contains("[[catalog]]\nzone = \"cat.test\""),
        kind != ServerKind::Nsd,
        "{text}"
    );
    let heron = ServerProcess::heron_on_port(&heron(), port, "example.test", &text)
        .unwrap_or_else(|log| panic!("Heron did not start on the imported file:\n{text}\n{log}"));
    assert!(
        eventually_within(Duration::from_secs(20), || soa_serial(addr, "sec.test")
            == Some(7)),
        "Heron never transferred sec.test:\n{}",
        heron.log()
    );
    assert!(
        eventually_within(Duration::from_secs(30), || member_served(addr)),
        "Heron never served the catalog's member:\n{}",
        heron.log()
    );
    let after = answers(addr);
    assert_eq!(
        transfers(addr),
        transfers_before,
        "who may transfer example.test, and what they get"
    );
    let found = differences(&before, &after);
    assert!(
        found.is_empty(),
        "{kind} and Heron differ:\n{}\nheron.toml:\n{text}",
        found.join("\n")
    );
    drop(fixture.primary);
}

#[test]
fn nsd_configuration_imports_and_answers_the_same() {
    round(ServerKind::Nsd, "nsd", |dir, port, f| {
        let d = dir.display();
        format!(
            "# as the interop tests write it\nserver:\n  ip-address: 127.0.0.1@{port}\n  server-count: 1\n  username: \"\"\n  chroot: \"\"\n\
             \x20 database: \"\"\n  zonelistfile: \"{d}/zone.list\"\n  xfrdfile: \"{d}/xfrd.state\"\n  xfrdir: \"{d}\"\n\
             \x20 pidfile: \"{d}/nsd.pid\"\n  zonesdir: \"{}\"\n  verbosity: 1\n  hide-version: yes\n  hide-identity: yes\n  rrl-ratelimit: 0\n  minimal-responses: yes\n\
             remote-control:\n  control-enable: no\n\
             key:\n  name: \"{KEY}\"\n  algorithm: hmac-sha256\n  secret: \"{SECRET}\"\n\
             pattern:\n  name: \"to-secondaries\"\n  provide-xfr: 127.0.0.1 {KEY}\n  notify: 127.0.0.1@{} {KEY}\n  store-ixfr: yes\n\
             zone:\n  name: \"example.test\"\n  zonefile: \"%s.zone\"\n  include-pattern: \"to-secondaries\"\n\
             zone:\n  name: \"edge.test\"\n  zonefile: \"{}\"\n\
             zone:\n  name: \"sec.test\"\n  request-xfr: 127.0.0.1@{} {KEY}\n  allow-notify: 127.0.0.1 {KEY}\n",
            f.dir.path().display(),
            free_port(),
            f.signed.display(),
            f.primary.addr().port(),
        )
    });
}

#[test]
fn knot_configuration_imports_and_answers_the_same() {
    round(ServerKind::Knot, "knot", |dir, port, f| {
        let d = dir.display();
        let p = f.primary.addr().port();
        format!(
            "server:\n    rundir: \"{d}\"\n    listen: 127.0.0.1@{port}\n    background-workers: 1\n    udp-workers: 1\n    tcp-workers: 1\n    version: \"\"\n    identity: \"\"\n    nsid: \"\"\n\
             log:\n  - target: stderr\n    any: info\n\
             database:\n    storage: \"{d}\"\n    journal-db-max-size: 16M\n    kasp-db-max-size: 16M\n    timer-db-max-size: 16M\n    catalog-db-max-size: 16M\n\
             key:\n  - id: {KEY}\n    algorithm: hmac-sha256\n    secret: {SECRET}\n\
             remote:\n  - id: primary\n    address: 127.0.0.1@{p}\n    key: {KEY}\n\
             \x20 - id: secondary\n    address: 127.0.0.1@{}\n    key: {KEY}\n\
             acl:\n  - id: transfer\n    address: 127.0.0.1\n    key: {KEY}\n    action: transfer\n\
             \x20 - id: notify\n    address: 127.0.0.1\n    key: {KEY}\n    action: notify\n\
             template:\n  - id: default\n    storage: \"{}\"\n    file: \"%s.zone\"\n    zonefile-sync: -1\n\
             \x20   journal-content: none\n    semantic-checks: off\n\
             \x20 - id: member\n    master: primary\n    acl: notify\n    storage: \"{d}\"\n    zonefile-sync: -1\n\
             zone:\n  - domain: example.test\n    notify: secondary\n    acl: transfer\n\
             \x20 - domain: cat.test\n    master: primary\n    acl: notify\n    storage: \"{d}\"\n    catalog-role: interpret\n    catalog-template: member\n\
             \x20 - domain: edge.test\n    file: \"{}\"\n\
             \x20 - domain: sec.test\n    master: primary\n    acl: notify\n    file: \"{d}/sec.test.zone\"\n",
            free_port(),
            f.dir.path().display(),
            f.signed.display(),
        )
    });
}

#[test]
fn bind_configuration_imports_and_answers_the_same() {
    round(ServerKind::Bind, "bind", |dir, port, f| {
        let d = dir.display();
        format!(
            "// as the interop tests write it\noptions {{\n  directory \"{d}\";\n  pid-file \"{d}/named.pid\";\n\
             \x20 session-keyfile \"{d}/session.key\";\n  listen-on port {port} {{ 127.0.0.1; }};\n  listen-on-v6 {{ none; }};\n\
             \x20 recursion no;\n  dnssec-validation no;\n  notify explicit;\n  minimal-responses no-auth;\n  version none;\n  hostname none;\n\
             \x20 allow-new-zones yes;\n  catalog-zones {{ zone \"cat.test\" default-primaries port {} {{ 127.0.0.1 key \"{KEY}\"; }} zone-directory \"{d}\" in-memory no min-update-interval 0; }};\n}};\n\
             controls {{ }};\n/* the transfer key */\nkey \"{KEY}\" {{ algorithm hmac-sha256; secret \"{SECRET}\"; }};\n\
             acl secondaries {{ 127.0.0.1; }};\n\
             primaries upstream port {} {{ 127.0.0.1 key \"{KEY}\"; }};\n\
             zone \"example.test\" {{\n  type primary;\n  file \"{}\";\n  allow-transfer {{ key \"{KEY}\"; secondaries; }};\n\
             \x20 also-notify {{ 127.0.0.1 port {} key \"{KEY}\"; }};\n}};\n\
             zone \"edge.test\" {{ type master; file \"{}\"; check-names ignore; allow-transfer {{ none; }}; }};\n\
             # a secondary\nzone \"sec.test\" {{ type secondary; primaries {{ upstream; }}; file \"sec.test.db\"; allow-transfer {{ none; }}; }};\n\
             zone \"cat.test\" {{ type secondary; primaries {{ upstream; }}; file \"cat.db\"; allow-transfer {{ none; }}; }};\n",
            f.primary.addr().port(),
            f.primary.addr().port(),
            f.zone("example.test.zone"),
            free_port(),
            f.signed.display(),
        )
    });
}

/// Imports `text` (written as `name` beside a zone file for a.test and
/// r.test) and asserts that each (line, words) is listed on stderr as
/// not translated, that the file is still written and passes
/// check-config, and that it is readable by its owner only when it
/// holds a key.
fn expect_listed(from: &str, name: &str, text: &str, listed: &[(u32, &str)]) {
    let dir = tempfile::tempdir().unwrap();
    for zone in ["a.test", "r.test"] {
        std::fs::write(
            dir.path().join(format!("{zone}.zone")),
            EXAMPLE.replace("example.test.", &format!("{zone}.")),
        )
        .unwrap();
    }
    let conf = dir.path().join(name);
    std::fs::write(
        &conf,
        text.replace("DIR", &dir.path().display().to_string()),
    )
    .unwrap();
    let (out, stderr) = import_and_check(from, &conf, dir.path());
    for (line, words) in listed {
        let prefix = format!("{}:{line}: not translated: ", conf.display());
        // A signed zone's policy is translated, its key import left to do.
        let to_do = format!("{}:{line}: to do: ", conf.display());
        assert!(
            stderr
                .lines()
                .any(|l| (l.starts_with(&prefix) || l.starts_with(&to_do)) && l.contains(words)),
            "{name}:{line} '{words}' is not listed:\n{stderr}"
        );
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
    let holds_key = std::fs::read_to_string(&out).unwrap().contains("[[key]]");
    assert_eq!(
        mode,
        if holds_key { 0o600 } else { 0o644 },
        "{}",
        out.display()
    );
}

#[test]
fn an_awkward_nsd_configuration_lists_every_untranslatable_setting() {
    let text = "server:\n  ip-address: 127.0.0.1@5399\n  tcp-count: 500\n  refuse-any: yes\n\
                \x20 rrl-whitelist-ratelimit: 100\n  outgoing-interface: 127.0.0.1\n\
                dnstap:\n  dnstap-enable: yes\nverify:\n  enable: yes\n\
                key:\n  name: k\n  secret: \"c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0\"\n\
                zone:\n  name: a.test\n  zonefile: DIR/a.test.zone\n  provide-xfr: 192.0.2.0/24 NOKEY\n\
                \x20 provide-xfr: 192.0.2.9 BLOCKED\n  provide-xfr: 10.0.0.1@5353 k\n  min-refresh-time: 60\n\
                \x20 notify-retry: 3\n  size-limit-xfr: 1000\nzone:\n  name: b.test\n\
                pattern:\n  name: p\n  max-refresh-time: 100\n  outgoing-interface: 127.0.0.2\n  rrl-whitelist: nxdomain\n\
                zone:\n  name: r.test\n  zonefile: DIR/r.test.zone\n  include-pattern: p\n";
    expect_listed(
        "nsd",
        "nsd.conf",
        text,
        &[
            (2, "minimal-responses"),
            (2, "hide-version"),
            (2, "hide-identity"),
            (2, "rrl-ratelimit: 200"),
            (3, "tcp-count"),
            (4, "refuse-any"),
            (5, "rrl-whitelist-ratelimit"),
            (6, "outgoing-interface"),
            (7, "dnstap"),
            (9, "verify"),
            (18, "BLOCKED"),
            (19, "10.0.0.1@5353"),
            (20, "min-refresh-time"),
            (21, "notify-retry"),
            (22, "size-limit-xfr"),
            (23, "b.test"),
            (27, "max-refresh-time"),
            (28, "outgoing-interface"),
            (29, "rrl-whitelist"),
        ],
    );
}

#[test]
fn an_awkward_bind_configuration_lists_every_untranslatable_setting() {
    let text = "options {\n  directory \"DIR\";\n  listen-on port 5399 { 127.0.0.1; 10.0.0.0/8; };\n\
                \x20 recursion yes;\n  forwarders { 192.0.2.1; };\n  allow-update { any; };\n  tcp-clients 50;\n\
                \x20 rate-limit { responses-per-second 5; referrals-per-second 5; };\n};\n\
                view \"inside\" { match-clients { 10.0.0.0/8; }; };\n\
                zone \"a.test\" { type primary; file \"a.test.zone\"; allow-transfer { !192.0.2.9; 192.0.2.0/24; }; update-policy local; dnssec-policy default; };\n\
                zone \"f.test\" { type forward; forwarders { 192.0.2.1; }; };\n\
                zone \"r.test\" { type primary; file \"r.test.zone\"; masterfile-format raw; };\n\
                statistics-channels { inet 127.0.0.1 port 8053; };\n\
                zone \"s.test\" { type secondary; file \"s\"; };\n\
                server 192.0.2.7 { transfer-format one-answer; request-ixfr no; };\n\
                view \"outside\" { match-clients { any; }; zone \"v.test\" { type primary; file \"a.test.zone\"; }; };\n";
    expect_listed(
        "bind",
        "named.conf",
        text,
        &[
            (1, "version"),
            (1, "hostname"),
            (1, "minimal-responses"),
            (1, "allow-transfer (not set"),
            (3, "10.0.0.0/8"),
            (4, "recursion yes"),
            (5, "forwarders"),
            (6, "allow-update"),
            (7, "tcp-clients"),
            (8, "referrals-per-second"),
            (10, "view"),
            (11, "!192.0.2.9"),
            (11, "update-policy"),
            (11, "dnssec-policy default"),
            (12, "type forward"),
            (13, "masterfile-format raw"),
            (14, "statistics-channels"),
            (15, "s.test"),
            (16, "server 192.0.2.7: transfer-format"),
            (16, "request-ixfr"),
            (17, "view outside"),
        ],
    );
}

#[test]
fn an_awkward_knot_configuration_lists_every_untranslatable_setting() {
    let text = "server:\n  listen: 127.0.0.1@5399\n  tcp-max-clients: 100\n  answer-rotation: on\n\
                remote:\n  - id: p\n    address: 192.0.2.1\n    via: 192.0.2.2\n\
                acl:\n  - id: upd\n    address: 192.0.2.0/24\n    action: update\n\
                policy:\n  - id: auto\n\
                mod-dnstap:\n  - id: tap\n    sink: /tmp/x\n\
                zone:\n  - domain: a.test\n    file: DIR/a.test.zone\n    acl: upd\n    dnssec-signing: on\n\
                \x20   serial-policy: unixtime\n    module: mod-dnstap/tap\n\
                \x20 - domain: r.test\n    file: DIR/r.test.zone\n    journal-content: all\n\
                mod-synthrecord:\n  - id: rev\n    type: reverse\nmod-geoip:\n  - id: geo\n";
    expect_listed(
        "knot",
        "knot.conf",
        text,
        &[
            (3, "tcp-max-clients"),
            (4, "answer-rotation"),
            (8, "via"),
            (15, "mod-dnstap"),
            (22, "dnssec-signing"),
            (23, "serial-policy"),
            (24, "mod-dnstap/tap"),
            (27, "journal-content all"),
            (28, "mod-synthrecord"),
            (
                28,
                "write the forward and reverse records into the zone file",
            ),
            (31, "mod-geoip"),
            (31, "a Heron of its own"),
        ],
    );
}

/// A Knot catalog with one template per group (black-box finding AQ-11)
/// becomes `[catalog.default]` and `[catalog.group.ID]`, each with its
/// own primaries and transfer ACL, which check-config takes; the group
/// whose template signs (AQ-3) is a step to do, listed first.
#[test]
fn knot_catalog_templates_become_groups_and_a_signing_one_a_step() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("knot.conf");
    let text = "server:\n  listen: 127.0.0.1@5399\n\
                remote:\n  - id: up\n    address: 192.0.2.1\n  - id: gp\n    address: 192.0.2.7\n\
                acl:\n  - id: x1\n    address: 127.0.0.1\n    action: transfer\n\
                \x20 - id: x2\n    address: 127.0.0.2\n    action: transfer\n\
                template:\n  - id: silver\n    master: up\n    acl: x1\n\
                \x20 - id: gold\n    master: gp\n    acl: x2\n    dnssec-signing: on\n\
                zone:\n  - domain: catalog.up\n    master: up\n    catalog-role: interpret\n\
                \x20   catalog-template: [silver, gold]\n";
    std::fs::write(&conf, text).unwrap();
    let (out, stderr) = import_and_check("knot", &conf, dir.path());
    let written = std::fs::read_to_string(&out).unwrap();
    assert!(
        written.contains(
            "[catalog.default]\nprimaries = [\"192.0.2.1\"]\nallow-transfer = [\"127.0.0.1\"]\n"
        ),
        "{written}"
    );
    assert!(
        written.contains(
            "[catalog.group.gold]\nprimaries = [\"192.0.2.7\"]\nallow-transfer = [\"127.0.0.2\"]\n"
        ),
        "{written}"
    );
    let first = stderr.lines().next().unwrap_or("");
    let step = format!(
        "{}:22: to do: catalog-template gold: dnssec-signing on: ",
        conf.display()
    );
    assert!(first.starts_with(&step), "{stderr}");
    assert!(stderr.contains("1 steps to do"), "{stderr}");
}

/// The configurations the Debian packages install, read where they
/// are: each imports, and the result passes check-config.
#[test]
fn the_configurations_debian_ships_import_and_pass_check_config() {
    for (from, path) in [
        ("nsd", "/etc/nsd/nsd.conf"),
        ("knot", "/etc/knot/knot.conf"),
        ("bind", "/etc/bind/named.conf"),
    ] {
        assert!(
            Path::new(path).exists(),
            "{path} is missing: {}",
            heron_testkit::INSTALL_HINT
        );
        let dir = tempfile::tempdir().unwrap();
        let (out, stderr) = import_and_check(from, Path::new(path), dir.path());
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(text.contains("[server]\nlisten = ["), "{path}:\n{text}");
        if from == "bind" {
            assert!(text.contains("origin = \"localhost\""), "{text}");
            assert!(
                stderr.contains("not needed: zone . { type hint; }"),
                "{stderr}"
            );
            assert!(stderr.contains("recursion"), "{stderr}");
        }
    }
}

/// A configuration Heron could not read whole is an error, with its
/// line, and nothing is written.
#[test]
fn a_broken_configuration_is_an_error_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("named.conf");
    std::fs::write(&conf, "options {\n  directory \"/tmp\";\n").unwrap();
    let out = dir.path().join("heron.toml");
    let result = run(&[
        "import",
        "--from",
        "bind",
        conf.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(result.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(stderr.contains("named.conf:2: error:"), "{stderr}");
    assert!(!out.exists());
    std::fs::write(&out, "# mine\n").unwrap();
    std::fs::write(&conf, "options { directory \"/tmp\"; };\n").unwrap();
    let again = run(&[
        "import",
        "--from",
        "bind",
        conf.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(
        again.status.code(),
        Some(1),
        "an existing file is replaced only with --force"
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "# mine\n");
}

/// A translation Heron cannot read (a TSIG key whose secret is not
/// base64) exits 1 with nothing written: no file left to need --force on
/// the next run, and a file --force would replace kept as it was
/// (black-box finding BT-11).
#[test]
fn a_translation_heron_cannot_read_leaves_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("named.conf");
    std::fs::write(
        &conf,
        "options { directory \"/tmp\"; };\n\
         key \"bad\" { algorithm hmac-sha256; secret \"not*base64!\"; };\n",
    )
    .unwrap();
    let out = dir.path().join("heron.toml");
    let import = |force: bool| {
        let mut args = vec!["import", "--from", "bind", conf.to_str().unwrap()];
        args.extend(["-o", out.to_str().unwrap()]);
        if force {
            args.push("--force");
        }
        run(&args)
    };
    let result = import(false);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert_eq!(result.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("nothing written"), "{stderr}");
    assert!(!out.exists(), "{stderr}");
    std::fs::write(&out, "# mine\n").unwrap();
    let result = import(true);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert_eq!(result.status.code(), Some(1), "{stderr}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "# mine\n");
}

/// A listing that cannot be written (stderr on a full disk, or a reader
/// that went away) stops the import with 1, not a panic's 101, and
/// nothing is written: heron.toml is not left without its listing seen.
#[test]
fn an_unwritable_stderr_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("named.conf");
    std::fs::write(&conf, "options { directory \"/tmp\"; };\n").unwrap();
    let out = dir.path().join("heron.toml");
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let result = Command::new(heron())
        .args(["import", "--from", "bind", conf.to_str().unwrap(), "-o"])
        .arg(&out)
        .stderr(full)
        .output()
        .unwrap();
    assert_eq!(result.status.code(), Some(1));
    assert!(!out.exists());
    let mut closed = Command::new(heron())
        .args(["import", "--from", "bind", conf.to_str().unwrap(), "-o"])
        .arg(&out)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(closed.stderr.take());
    assert_eq!(closed.wait().unwrap().code(), Some(1));
}

/// `--listen` writes other addresses than the old server's (to run
/// Heron beside it), and the manual page and completions know the
/// subcommand.
#[test]
fn listen_override_man_page_and_completions() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("knot.conf");
    std::fs::write(&conf, "server:\n  listen: 127.0.0.1@53\n").unwrap();
    let out = dir.path().join("heron.toml");
    let result = run(&[
        "import",
        "--from",
        "knot",
        conf.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--listen",
        "127.0.0.1:5399",
        "--listen",
        "[::1]:5399",
    ]);
    assert!(
        result.status.success(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(
        text.contains("listen = [\"127.0.0.1:5399\", \"[::1]:5399\"]"),
        "{text}"
    );
    let man = dir.path().join("man");
    assert!(run(&["man", man.to_str().unwrap()]).status.success());
    let shown = Command::new("man")
        .arg("-l")
        .arg(man.join("heron-import.1"))
        .env("MANWIDTH", "200")
        .output()
        .expect("man(1) runs (scripts/test-all.sh installs man-db)");
    let page: String = String::from_utf8_lossy(&shown.stdout).replace('\u{8}', "");
    for part in [
        "SYNOPSIS",
        "from",
        "EXIT STATUS",
        "warnings",
        "EXAMPLES",
        "listen",
        "SEE ALSO",
    ] {
        assert!(
            page.contains(part),
            "heron-import(1) has no {part}:\n{page}"
        );
    }
    for shell in ["bash", "zsh", "fish"] {
        let script = String::from_utf8_lossy(&run(&["completions", shell]).stdout).into_owned();
        assert!(
            script.contains("import") && script.contains("from"),
            "{shell} does not complete import"
        );
    }
}

/// `--tls-listen` replaces the DoT addresses of an old server that
/// serves DoT (migrate.rs runs Heron so beside NSD and BIND), and is an
/// error for one that serves none: there is no certificate to use.
#[test]
fn tls_listen_needs_an_old_server_with_dns_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("knot.conf");
    std::fs::write(&conf, "server:\n  listen: 127.0.0.1@53\n").unwrap();
    let out = dir.path().join("heron.toml");
    let args = ["import", "--from", "knot", conf.to_str().unwrap()];
    let result = run(&[
        &args[..],
        &[
            "-o",
            out.to_str().unwrap(),
            "--tls-listen",
            "127.0.0.1:8853",
        ],
    ]
    .concat());
    assert_eq!(result.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(stderr.contains("serves no DNS over TLS"), "{stderr}");
    assert!(!out.exists());
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (chain, key) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
    std::fs::write(&chain, cert.cert.pem()).unwrap();
    std::fs::write(&key, cert.signing_key.serialize_pem()).unwrap();
    let conf = dir.path().join("nsd.conf");
    std::fs::write(
        &conf,
        format!(
            "server:\n  ip-address: 192.0.2.53@53\n  ip-address: 192.0.2.53@853\n  tls-port: 853\n  \
             tls-service-key: {}\n  tls-service-pem: {}\n",
            key.display(),
            chain.display()
        ),
    )
    .unwrap();
    let args = [
        "import",
        "--from",
        "nsd",
        conf.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ];
    let result = run(&[
        &args[..],
        &[
            "--listen",
            "127.0.0.1:5300",
            "--tls-listen",
            "127.0.0.1:8853",
        ],
    ]
    .concat());
    assert!(
        result.status.success(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
    let text = std::fs::read_to_string(&out).unwrap();
    let tls = format!(
        "[tls]\nlisten = [\"127.0.0.1:8853\"]\ncertificate = \"{}\"",
        chain.display()
    );
    assert!(text.contains(&tls), "{text}");
    assert!(
        text.contains("the old server's was [\"192.0.2.53:853\"]"),
        "{text}"
    );
}

/// Heron run beside BIND on BIND's zone files (migrating.md's step 4)
/// never takes BIND's journal path (FILE.jnl): a zone file edited and
/// reloaded by Heron leaves no journal there, and BIND restarted on
/// its configuration (a rollback) still loads the zone. Black-box
/// finding AQ-1: Heron's journal there made BIND refuse the zone.
#[test]
fn heron_beside_bind_leaves_bind_journal_path_alone() {
    let dir = tempfile::tempdir().unwrap();
    let zone = dir.path().join("j.test.zone");
    let journal = dir.path().join("j.test.zone.jnl");
    let text = EXAMPLE.replace("example.test.", "j.test.");
    std::fs::write(&zone, &text).unwrap();
    let named_conf = |d: &Path, port: u16| {
        let d = d.display();
        format!(
            "options {{\n\tdirectory \"{d}\";\n\tpid-file \"{d}/named.pid\";\n\
             \tsession-keyfile \"{d}/session.key\";\n\tlisten-on port {port} {{ 127.0.0.1; }};\n\
             \tlisten-on-v6 {{ none; }};\n\trecursion no;\n\tallow-transfer {{ 127.0.0.1; }};\n}};\n\
             controls {{ }};\nzone \"j.test\" {{\n\ttype primary;\n\tfile \"{}\";\n}};\n",
            zone.display()
        )
    };
    let port = free_port();
    let mut bind =
        ServerProcess::peer_with_config(ServerKind::Bind, port, "j.test", |d| named_conf(d, port))
            .unwrap_or_else(|log| panic!("BIND did not start:\n{log}"));
    let out = dir.path().join("heron.toml");
    let listen = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let (conf, at) = (bind.dir().join("named.conf"), listen.to_string());
    let files = [conf.to_str().unwrap(), out.to_str().unwrap()];
    let imported = run(&[
        "import",
        "--from=bind",
        files[0],
        "-o",
        files[1],
        "--listen",
        &at,
    ]);
    let said = String::from_utf8_lossy(&imported.stderr).into_owned();
    assert!(imported.status.success(), "{said}");
    assert!(said.contains("to do: journal = false"), "{said}");
    let toml = std::fs::read_to_string(&out).unwrap();
    let mut heron = ServerProcess::heron_on_port(&heron(), listen.port(), "j.test", &toml)
        .unwrap_or_else(|log| panic!("Heron did not start:\n{toml}\n{log}"));
    std::fs::write(&zone, text.replace("2026112501", "2026112502")).unwrap();
    heron.reload();
    assert!(
        eventually_within(Duration::from_secs(10), || soa_serial(listen, "j.test")
            == Some(2026112502)),
        "Heron did not reload:\n{}",
        heron.log()
    );
    heron.terminate();
    assert!(
        !journal.exists(),
        "Heron wrote {}:\n{toml}",
        journal.display()
    );
    bind.terminate();
    let port = free_port();
    let again =
        ServerProcess::peer_with_config(ServerKind::Bind, port, "j.test", |d| named_conf(d, port))
            .unwrap_or_else(|log| panic!("BIND restarted did not load j.test:\n{log}"));
    assert_eq!(soa_serial(again.addr(), "j.test"), Some(2026112502));
}

/// Whether `server` answers an SOA query for `name` sent from `from`.
fn answered_from(server: SocketAddr, from: [u8; 4], name: &str) -> bool {
    let query = build_query(
        &Name::parse(name).unwrap(),
        RType::SOA,
        &QueryOpts::default(),
    );
    try_query_udp_from(from.into(), server, &query).is_ok()
}

/// BIND's `blackhole` with a negated element: Heron on the imported file
/// (on BIND's address, after it) answers and ignores the same clients
/// as BIND. Black-box finding AQ-7:
/// the list was cut at the negation, and Heron answered 127.0.0.9,
/// which BIND ignores.
#[test]
fn a_blackhole_with_a_negation_ignores_the_clients_bind_ignores() {
    let dir = tempfile::tempdir().unwrap();
    let zone = dir.path().join("b.test.zone");
    std::fs::write(&zone, EXAMPLE.replace("example.test.", "b.test.")).unwrap();
    let port = free_port();
    let bind = ServerProcess::peer_with_config(ServerKind::Bind, port, "b.test", |d| {
        let d = d.display();
        format!(
            "options {{\n\tdirectory \"{d}\";\n\tpid-file \"{d}/named.pid\";\n\
             \tsession-keyfile \"{d}/session.key\";\n\tlisten-on port {port} {{ 127.0.0.1; }};\n\
             \tlisten-on-v6 {{ none; }};\n\trecursion no;\n\
             \tblackhole {{ 10.0.0.0/8; !127.0.0.1; !127.0.0.5; 127.0.0.0/24; }};\n}};\n\
             controls {{ }};\nzone \"b.test\" {{\n\ttype primary;\n\tfile \"{}\";\n}};\n",
            zone.display()
        )
    })
    .unwrap_or_else(|log| panic!("BIND did not start:\n{log}"));
    let clients = [
        [127, 0, 0, 5],
        [127, 0, 0, 9],
        [127, 0, 0, 200],
        [127, 0, 1, 9],
    ];
    let bind_said: Vec<bool> = (clients.iter())
        .map(|&c| answered_from(bind.addr(), c, "b.test"))
        .collect();
    assert_eq!(bind_said, [true, false, false, true]);
    let (out, said) = import_and_check("bind", &bind.dir().join("named.conf"), dir.path());
    let toml = std::fs::read_to_string(&out).unwrap();
    drop(bind);
    let heron = ServerProcess::heron_on_port(&heron(), port, "b.test", &toml)
        .unwrap_or_else(|log| panic!("Heron did not start:\n{toml}\n{log}"));
    let heron_said: Vec<bool> = (clients.iter())
        .map(|&c| answered_from(heron.addr(), c, "b.test"))
        .collect();
    assert_eq!(heron_said, bind_said, "{toml}");
    assert!(!said.contains("blackhole"), "{said}");
}

/// `-o` naming a file the old configuration includes (NSD `include:`,
/// BIND `include`, Knot `include:`) or a hard link to one of its zone
/// files is refused, `--force` or not, and the file is left as it was;
/// so is a new file that an include pattern would read.
/// Black-box finding AQ-4: both were written over.
#[test]
fn included_files_and_hard_links_to_zone_files_are_never_written_over() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let zone = d.join("a.test.zone");
    let zone_text = EXAMPLE.replace("example.test.", "a.test.");
    std::fs::write(&zone, &zone_text).unwrap();
    let (z, at) = (zone.display(), d.display());
    let cases = [
        (
            "nsd",
            format!("include: \"{at}/nsd.inc\"\n"),
            "nsd.inc",
            format!("zone:\n  name: a.test\n  zonefile: {z}\n"),
        ),
        (
            "bind",
            format!("include \"{at}/named.inc\";\n"),
            "named.inc",
            format!("zone \"a.test\" {{ type primary; file \"{z}\"; }};\n"),
        ),
        (
            "knot",
            format!("include: {at}/knot.inc\n"),
            "knot.inc",
            format!("zone:\n  - domain: a.test\n    file: {z}\n"),
        ),
    ];
    for (from, main_text, inc, inc_text) in cases {
        let main = d.join(format!("{from}.conf"));
        std::fs::write(&main, &main_text).unwrap();
        std::fs::write(d.join(inc), &inc_text).unwrap();
        let link = d.join(format!("{from}-link.toml"));
        std::fs::hard_link(&zone, &link).unwrap();
        for output in [d.join(inc), link] {
            let files = [main.to_str().unwrap(), output.to_str().unwrap()];
            let result = run(&[
                "import", "--from", from, files[0], "-o", files[1], "--force",
            ]);
            let said = String::from_utf8_lossy(&result.stderr);
            assert_eq!(
                result.status.code(),
                Some(1),
                "{from} -o {}: {said}",
                files[1]
            );
            assert!(said.contains("which the old server reads"), "{said}");
        }
        assert_eq!(std::fs::read_to_string(d.join(inc)).unwrap(), inc_text);
        assert_eq!(std::fs::read_to_string(&zone).unwrap(), zone_text);
    }
    // Nor is a new file made where an include pattern would read it.
    let conf = d.join("glob.conf");
    std::fs::write(&conf, format!("include: \"{at}/conf.d/*.conf\"\n")).unwrap();
    std::fs::create_dir(d.join("conf.d")).unwrap();
    let out = d.join("conf.d/heron.conf");
    let files = [conf.to_str().unwrap(), out.to_str().unwrap()];
    let result = run(&["import", "--from", "nsd", files[0], "-o", files[1]]);
    let said = String::from_utf8_lossy(&result.stderr);
    assert_eq!(result.status.code(), Some(1), "{said}");
    assert!(said.contains("the old server would read it"), "{said}");
    assert!(!out.exists());
}

/// An RSASHA256 signing policy (Knot's with its default ZSK lifetime,
/// BIND's with a `zsk lifetime`) imports with exit 0: Heron makes no RSA
/// keys and rolls none, so the lifetimes are left out and listed; the
/// zone loads once its keys are imported, the step listed to do.
/// Black-box finding AQ-5: the import wrote a policy Heron refused, and
/// exited 1.
#[test]
fn an_rsa_signing_policy_imports_as_a_policy_heron_reads() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("r.test.zone"),
        EXAMPLE.replace("example.test.", "r.test."),
    )
    .unwrap();
    let z = d.join("r.test.zone").display().to_string();
    let cases = [
        (
            "knot",
            format!(
                "policy:\n  - id: rsa\n    algorithm: rsasha256\n\
                 zone:\n  - domain: r.test\n    file: {z}\n    dnssec-signing: on\n    dnssec-policy: rsa\n"
            ),
            "zsk-lifetime 30d",
        ),
        (
            "bind",
            format!(
                "dnssec-policy \"rsa\" {{ keys {{ ksk lifetime unlimited algorithm rsasha256 2048;\n\
                 \x20 zsk lifetime 30d algorithm rsasha256 1024; }}; }};\n\
                 zone \"r.test\" {{ type primary; file \"{z}\"; dnssec-policy rsa; inline-signing yes; }};\n"
            ),
            "zsk lifetime 30d",
        ),
    ];
    for (from, text, lifetime) in cases {
        let conf = d.join(format!("{from}.conf"));
        std::fs::write(&conf, text).unwrap();
        let out = d.join(format!("{from}.toml"));
        let files = [conf.to_str().unwrap(), out.to_str().unwrap()];
        let result = run(&["import", "--from", from, files[0], "-o", files[1]]);
        let said = String::from_utf8_lossy(&result.stderr);
        assert_eq!(result.status.code(), Some(0), "{from}: {said}");
        assert!(
            said.contains(&format!("{lifetime}: Heron makes no RSASHA256 keys")),
            "{said}"
        );
        assert!(
            said.contains("heron keymgr -d keys r.test import"),
            "{said}"
        );
        let toml = std::fs::read_to_string(&out).unwrap();
        assert!(toml.contains("algorithm = \"rsasha256\""), "{toml}");
        assert!(!toml.contains("lifetime"), "{toml}");
    }
}

/// `nsupdate` signed with `key` to `server` for zone u.test, running
/// `commands`: "NOERROR", or the response code it printed.
fn nsupdate(server: SocketAddr, key: &str, commands: &str) -> String {
    let out = heron_testkit::tools::nsupdate(server, (key, SECRET), "u.test", commands);
    if out.status.success() {
        return "NOERROR".into();
    }
    let text = String::from_utf8_lossy(&[&out.stdout[..], &out.stderr[..]].concat()).into_owned();
    let rcode = ["REFUSED", "NOTAUTH", "NOTIMP", "SERVFAIL"]
        .into_iter()
        .find(|r| text.contains(r));
    rcode.map_or(format!("failed: {text}"), str::to_string)
}

/// A Knot zone taking updates from a key for some types moves with its
/// rules: knotd and Heron on the imported file accept an A record from
/// the key and refuse an MX (Knot with NOTAUTH, Heron with REFUSED as
/// RFC 2136 3.3 says; black-box finding BT-4: the rules were to be
/// written by hand).
#[test]
fn knot_update_acls_move_to_heron_and_answer_alike() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let zone_text = EXAMPLE.replace("example.test.", "u.test.");
    let key = "upd.import.test";
    // The zone file outlives knotd's folder: Heron serves it next.
    let zone_file = dir.path().join("u.test.zone");
    std::fs::write(&zone_file, &zone_text).unwrap();
    let conf = |d: &Path| {
        format!(
            "server:\n  rundir: \"{0}\"\n  listen: 127.0.0.1@{port}\n\
             database:\n  storage: \"{0}\"\n\
             key:\n  - id: {key}\n    algorithm: hmac-sha256\n    secret: {SECRET}\n\
             acl:\n  - id: upd\n    key: {key}\n    action: update\n    update-type: [A, TXT]\n\
             zone:\n  - domain: u.test\n    file: \"{1}\"\n    acl: upd\n",
            d.display(),
            zone_file.display()
        )
    };
    let knotd = ServerProcess::peer_with_config(ServerKind::Knot, port, "u.test", |d| conf(d))
        .unwrap_or_else(|log| panic!("knotd did not start:\n{log}"));
    let add_a = "update add a1.u.test 300 A 192.0.2.51";
    let add_mx = "update add u.test 300 MX 10 a1.u.test";
    let knot_said = [
        nsupdate(knotd.addr(), key, add_a),
        nsupdate(knotd.addr(), key, add_mx),
    ];
    // Knot 3.2 refuses with NOTAUTH, Heron with REFUSED (RFC 2136 3.3).
    assert_eq!(knot_said, ["NOERROR", "NOTAUTH"], "{}", knotd.log());
    let knot_conf = knotd.dir().join("knot.conf");
    let conf_copy = dir.path().join("knot.conf");
    std::fs::copy(&knot_conf, &conf_copy).unwrap();
    drop(knotd);
    let (out, said) = import_and_check("knot", &conf_copy, dir.path());
    assert!(!said.contains("update-type"), "{said}");
    let toml = std::fs::read_to_string(&out).unwrap();
    assert!(
        toml.contains("allow-update = [\"key upd.import.test zonesub A TXT\"]"),
        "{toml}"
    );
    let heron = ServerProcess::heron_on_port(&heron(), port, "u.test", &toml)
        .unwrap_or_else(|log| panic!("Heron did not start:\n{toml}\n{log}"));
    let add_a2 = "update add a2.u.test 300 A 192.0.2.52";
    let heron_said = [
        nsupdate(heron.addr(), key, add_a2),
        nsupdate(heron.addr(), key, add_mx),
    ];
    assert_eq!(
        heron_said,
        ["NOERROR", "REFUSED"],
        "{toml}\n{}",
        heron.log()
    );
}
