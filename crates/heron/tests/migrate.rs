//! The migration issue 41 promises, end to end, for NSD, Knot and BIND:
//! a configuration laid out as Debian ships it (main file plus included
//! ones) and holding what the interop tests write (primary zones, a
//! DNSSEC-signed fixture, a secondary zone pulled with TSIG, transfer
//! and notify ACLs, NOTIFY targets, a consumed catalog where the server
//! has them) runs the original server; `heron import` reads it;
//! `heron check-config` passes the result; Heron runs on it beside the
//! original; and `heron compare --against` the original finds no
//! difference on any of the zones. Each server runs once per signed
//! fixture (NSEC, NSEC3, NSEC3 opt-out). NSD and BIND also serve DNS
//! over TLS (Knot 3.2 has none), which is imported as Heron's `[tls]`
//! and must give the same answers.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use heron_testkit::{
    DigTool, ServerKind, ServerProcess, eventually_within, free_port, run_dig_with, soa_serial,
};

const SECRET: &str = "bWlncmF0ZS10ZXN0LXNlY3JldC1taWdyYXRlLXRlc3Qh";
const KEY: &str = "xfr.migrate.test";

/// Serial of sec.test and of member.test at the upstream primary.
const SEC_SERIAL: u32 = 7;
const MEMBER_SERIAL: u32 = 3;

const EXAMPLE: &str = "$ORIGIN example.test.\n$TTL 3600\n\
@ SOA ns1 hostmaster 2026112501 7200 3600 1209600 300\n\
@ NS ns1\n@ NS ns2.outside.example.\n@ A 192.0.2.10\n@ AAAA 2001:db8::10\n@ MX 10 mail\n\
@ TXT \"v=spf1 -all\"\nns1 A 192.0.2.1\nmail A 192.0.2.25\nwww CNAME @\n\
*.wild A 192.0.2.100\n_sip._tcp SRV 10 60 5060 mail\n\
sub NS ns.sub\nns.sub A 192.0.2.53\nempty.nonterminal TXT \"x\"\n";

const MEMBER: &str = "$ORIGIN member.test.\n$TTL 600\n\
@ SOA ns1 hostmaster 3 7200 3600 1209600 300\n@ NS ns1\nns1 A 192.0.2.1\nwww A 192.0.2.80\n";

const SECONDARY: &str = "$ORIGIN sec.test.\n$TTL 600\n\
@ SOA ns1 hostmaster 7 7200 3600 1209600 300\n@ NS ns1\nns1 A 192.0.2.1\nhost A 192.0.2.7\n\
*.any A 192.0.2.9\n";

fn heron() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_heron"))
}

fn signed(chain: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!(
        "tests/data/differential/signed/edge.test.{chain}.zone"
    ))
}

/// The zone files, and the primary both the old server and Heron pull
/// sec.test and the catalog cat.test (listing member.test) from, with
/// the test key.
struct Upstream {
    dir: tempfile::TempDir,
    primary: ServerProcess,
}

impl Upstream {
    fn new() -> Upstream {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [
            ("example.test.zone", EXAMPLE),
            ("sec.test.zone", SECONDARY),
            ("member.test.zone", MEMBER),
        ] {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        let file = |name: &str| dir.path().join(name).display().to_string();
        let (sec, cat, member) = (
            file("sec.test.zone"),
            file("cat.test.zone"),
            file("member.test.zone"),
        );
        let primary = ServerProcess::heron_with_config(&heron(), "sec.test", |port| {
            let allow = format!("allow-transfer = [\"127.0.0.1 key {KEY}\"]");
            format!(
                "[server]\nlisten = [\"127.0.0.1:{port}\"]\n\
                 [[key]]\nname = \"{KEY}\"\nsecret = \"{SECRET}\"\n\
                 [[zone]]\norigin = \"sec.test\"\nfile = \"{sec}\"\n{allow}\n\
                 [[zone]]\norigin = \"cat.test\"\nfile = \"{cat}\"\ncatalog = \"generate\"\n{allow}\n\
                 [[zone]]\norigin = \"member.test\"\nfile = \"{member}\"\n{allow}\n\
                 catalog-member = \"cat.test\"\n"
            )
        });
        Upstream { dir, primary }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn port(&self) -> u16 {
        self.primary.addr().port()
    }
}

/// What a configuration is written from: the old server's folder and
/// port, the upstream, the signed fixture, and a port nobody listens on
/// for NOTIFY to go to.
struct Setup<'a> {
    dir: &'a Path,
    port: u16,
    up: &'a Upstream,
    signed: &'a Path,
    notify_port: u16,
    tls: &'a Tls,
}

/// A self-signed certificate for 127.0.0.1 (PEM files in `dir`) and the
/// port the old server answers DNS over TLS on.
struct Tls {
    dir: tempfile::TempDir,
    port: u16,
}

impl Tls {
    fn new() -> Tls {
        let dir = tempfile::tempdir().unwrap();
        let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        let cert = rcgen::generate_simple_self_signed(names).unwrap();
        std::fs::write(dir.path().join("chain.pem"), cert.cert.pem()).unwrap();
        std::fs::write(dir.path().join("key.pem"), cert.signing_key.serialize_pem()).unwrap();
        Tls {
            dir,
            port: free_port(),
        }
    }

    fn chain(&self) -> String {
        self.dir.path().join("chain.pem").display().to_string()
    }

    fn key(&self) -> String {
        self.dir.path().join("key.pem").display().to_string()
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// nsd.conf as Debian ships it (`include:` of nsd.conf.d/*.conf) with
/// the server's settings (DNS over TLS among them), and the zones in
/// nsd.conf.d/zones.conf. NSD 4.6 has no catalog zones; rate limiting is
/// off, as a server queried by a bulk test must have it.
fn nsd_conf(s: &Setup) -> String {
    let (d, up) = (s.dir.display(), s.up.dir.path().display());
    write(
        &s.dir.join("nsd.conf.d/zones.conf"),
        &format!(
            "key:\n\tname: \"{KEY}\"\n\talgorithm: hmac-sha256\n\tsecret: \"{SECRET}\"\n\n\
             pattern:\n\tname: \"to-secondaries\"\n\tprovide-xfr: 127.0.0.1 {KEY}\n\
             \tnotify: 127.0.0.1@{} {KEY}\n\n\
             pattern:\n\tname: \"from-upstream\"\n\trequest-xfr: 127.0.0.1@{} {KEY}\n\
             \tallow-notify: 127.0.0.1 {KEY}\n\n\
             zone:\n\tname: \"example.test\"\n\tzonefile: \"%s.zone\"\n\tinclude-pattern: \"to-secondaries\"\n\n\
             zone:\n\tname: \"edge.test\"\n\tzonefile: \"{}\"\n\tprovide-xfr: 127.0.0.1 {KEY}\n\n\
             zone:\n\tname: \"sec.test\"\n\tinclude-pattern: \"from-upstream\"\n",
            s.notify_port,
            s.up.port(),
            s.signed.display()
        ),
    );
    format!(
        "# nsd.conf: as Debian ships it, with what an authoritative server sets\n\
         server:\n\tlog-only-syslog: yes\n\tip-address: 127.0.0.1@{}\n\tserver-count: 1\n\
         \tusername: \"\"\n\tchroot: \"\"\n\tdatabase: \"\"\n\tzonelistfile: \"{d}/zone.list\"\n\
         \txfrdfile: \"{d}/xfrd.state\"\n\txfrdir: \"{d}\"\n\tpidfile: \"{d}/nsd.pid\"\n\
         \tzonesdir: \"{up}\"\n\thide-version: yes\n\trrl-ratelimit: 0\n\
         \tip-address: 127.0.0.1@{tls}\n\ttls-port: {tls}\n\
         \ttls-service-key: \"{}\"\n\ttls-service-pem: \"{}\"\n\n\
         remote-control:\n\tcontrol-enable: no\n\n\
         include: \"{d}/nsd.conf.d/*.conf\"\n",
        s.port,
        s.tls.key(),
        s.tls.chain(),
        tls = s.tls.port,
    )
}

/// knot.conf as Debian ships it (`automatic-acl: on`, a default
/// template naming the zone files `%s.zone`), with a key, remotes, ACLs
/// and a catalog consumed.
fn knot_conf(s: &Setup) -> String {
    let (d, up) = (s.dir.display(), s.up.dir.path().display());
    format!(
        "server:\n    rundir: \"{d}\"\n    automatic-acl: on\n    listen: 127.0.0.1@{}\n\
         \x20   background-workers: 1\n    udp-workers: 1\n    tcp-workers: 1\n\n\
         log:\n  - target: stderr\n    any: info\n\n\
         database:\n    storage: \"{d}\"\n    journal-db-max-size: 16M\n    kasp-db-max-size: 16M\n\
         \x20   timer-db-max-size: 16M\n    catalog-db-max-size: 16M\n\n\
         key:\n  - id: {KEY}\n    algorithm: hmac-sha256\n    secret: {SECRET}\n\n\
         remote:\n  - id: upstream\n    address: 127.0.0.1@{}\n    key: {KEY}\n\
         \x20 - id: secondary\n    address: 127.0.0.1@{}\n    key: {KEY}\n\n\
         acl:\n  - id: transfer\n    address: 127.0.0.1\n    key: {KEY}\n    action: transfer\n\n\
         template:\n  - id: default\n    storage: \"{up}\"\n    file: \"%s.zone\"\n\
         \x20   zonefile-sync: -1\n    journal-content: none\n\
         \x20 - id: member\n    master: upstream\n    storage: \"{d}\"\n    zonefile-sync: -1\n\n\
         zone:\n  - domain: example.test\n    notify: secondary\n\
         \x20 - domain: edge.test\n    file: \"{}\"\n    acl: transfer\n\
         \x20 - domain: sec.test\n    master: upstream\n    file: \"{d}/sec.test.zone\"\n\
         \x20 - domain: cat.test\n    master: upstream\n    storage: \"{d}\"\n\
         \x20   catalog-role: interpret\n    catalog-template: member\n",
        s.port,
        s.up.port(),
        s.notify_port,
        s.signed.display()
    )
}

/// named.conf as Debian ships it (including named.conf.options,
/// named.conf.local and the default zones), with the options an
/// authoritative server sets, DNS over TLS and a catalog zone consumed.
fn bind_conf(s: &Setup) -> String {
    let d = s.dir.display();
    let zones = bind_files(s);
    let local = s.dir.join("named.conf.local");
    let text = std::fs::read_to_string(&local).unwrap();
    write(&local, &(text + "\n" + &zones));
    format!(
        "// named.conf as Debian ships it\n\
         include \"{d}/named.conf.options\";\ninclude \"{d}/named.conf.local\";\n\
         include \"/etc/bind/named.conf.default-zones\";\n"
    )
}

/// [`bind_conf`] with every zone, Debian's default ones too, inside one
/// view that matches every client (keys, ACLs and primaries lists stay
/// outside: BIND wants them there).
fn bind_view_conf(s: &Setup) -> String {
    let d = s.dir.display();
    write(&s.dir.join("named.conf.zones"), &bind_files(s));
    format!(
        "// named.conf as Debian ships it, its zones in a view\n\
         include \"{d}/named.conf.options\";\ninclude \"{d}/named.conf.local\";\n\
         view \"everyone\" {{\n\tmatch-clients {{ any; }};\n\
         \tinclude \"{d}/named.conf.zones\";\n\
         \tinclude \"/etc/bind/named.conf.default-zones\";\n}};\n"
    )
}

/// Writes named.conf.options and named.conf.local (key, ACL, primaries
/// list) into the folder; returns the zone statements.
fn bind_files(s: &Setup) -> String {
    let (d, up) = (s.dir.display(), s.up.port());
    write(
        &s.dir.join("named.conf.options"),
        &format!(
            "options {{\n\tdirectory \"{d}\";\n\tpid-file \"{d}/named.pid\";\n\
             \tsession-keyfile \"{d}/session.key\";\n\tlisten-on port {} {{ 127.0.0.1; }};\n\
             \tlisten-on port {} tls local {{ 127.0.0.1; }};\n\
             \tlisten-on-v6 {{ none; }};\n\trecursion no;\n\tdnssec-validation no;\n\
             \tminimal-responses no-auth;\n\tversion none;\n\tnotify explicit;\n\
             \tallow-new-zones yes;\n\
             \tcatalog-zones {{ zone \"cat.test\" default-primaries port {up} {{ 127.0.0.1 key \"{KEY}\"; }}\n\
             \t\tzone-directory \"{d}\" in-memory no min-update-interval 0; }};\n}};\n\
             controls {{ }};\n\
             tls local {{ key-file \"{}\"; cert-file \"{}\"; }};\n",
            s.port,
            s.tls.port,
            s.tls.key(),
            s.tls.chain(),
        ),
    );
    write(
        &s.dir.join("named.conf.local"),
        &format!(
            "key \"{KEY}\" {{\n\talgorithm hmac-sha256;\n\tsecret \"{SECRET}\";\n}};\n\n\
             acl secondaries {{ 127.0.0.1; }};\n\
             primaries upstream port {up} {{ 127.0.0.1 key \"{KEY}\"; }};\n",
        ),
    );
    format!(
        "zone \"example.test\" {{\n\ttype primary;\n\tfile \"{}\";\n\
             \tallow-transfer {{ key \"{KEY}\"; secondaries; }};\n\
             \talso-notify {{ 127.0.0.1 port {} key \"{KEY}\"; }};\n}};\n\n\
             zone \"edge.test\" {{\n\ttype master;\n\tfile \"{}\";\n\tcheck-names ignore;\n\
             \tallow-transfer {{ key \"{KEY}\"; }};\n}};\n\n\
             zone \"sec.test\" {{\n\ttype secondary;\n\tprimaries {{ upstream; }};\n\
             \tfile \"sec.test.db\";\n\tallow-transfer {{ none; }};\n}};\n\n\
             zone \"cat.test\" {{\n\ttype secondary;\n\tprimaries {{ upstream; }};\n\
             \tfile \"cat.test.db\";\n\tallow-transfer {{ none; }};\n}};\n",
        s.up.file("example.test.zone").display(),
        s.notify_port,
        s.signed.display()
    )
}

fn run(args: &[&str]) -> Output {
    Command::new(heron())
        .args(args)
        .output()
        .expect("run heron")
}

fn text_of(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `heron import` of `conf` into `out` with Heron listening on
/// `listen` (and `tls_listen` for DNS over TLS), then `heron check-config` of it: what import printed.
fn import_and_check(
    from: &str,
    conf: &Path,
    out: &Path,
    listen: SocketAddr,
    tls_listen: Option<SocketAddr>,
) -> String {
    let mut args: Vec<String> = ["import", "--from", from, conf.to_str().unwrap(), "-o"]
        .map(String::from)
        .to_vec();
    args.extend([
        out.display().to_string(),
        "--listen".into(),
        listen.to_string(),
    ]);
    if let Some(tls) = tls_listen {
        args.extend(["--tls-listen".into(), tls.to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let imported = run(&args);
    let printed = text_of(&imported);
    assert!(imported.status.success(), "import failed:\n{printed}");
    assert!(
        !printed.contains(SECRET),
        "a secret on the terminal:\n{printed}"
    );
    let check = run(&["check-config", out.to_str().unwrap()]);
    assert!(
        check.status.success(),
        "check-config failed:\n{}\n{}",
        text_of(&check),
        std::fs::read_to_string(out).unwrap()
    );
    printed
}

/// Waits until `addr` serves sec.test and (where the server consumes
/// catalogs) the catalog's member, at the upstream's serials.
fn wait_for_secondaries(who: &str, addr: SocketAddr, catalog: bool, log: impl Fn() -> String) {
    let limit = Duration::from_secs(30);
    assert!(
        eventually_within(limit, || soa_serial(addr, "sec.test") == Some(SEC_SERIAL)),
        "{who} never transferred sec.test:\n{}",
        log()
    );
    assert!(
        !catalog
            || eventually_within(limit, || {
                soa_serial(addr, "member.test") == Some(MEMBER_SERIAL)
            }),
        "{who} never served the catalog's member:\n{}",
        log()
    );
}

/// One migration: the old server `kind` on its configuration with the
/// `chain` fixture as edge.test, imported, checked, Heron beside it, and
/// `heron compare` between the two.
fn migrate(kind: ServerKind, chain: &str) {
    let write_conf = match kind {
        ServerKind::Nsd => nsd_conf,
        ServerKind::Knot => knot_conf,
        _ => bind_conf,
    };
    migrate_from(kind, chain, write_conf);
}

/// [`migrate`] with the configuration `write_conf` writes; what import said.
fn migrate_from(kind: ServerKind, chain: &str, write_conf: fn(&Setup) -> String) -> String {
    let (from, conf_name) = match kind {
        ServerKind::Nsd => ("nsd", "nsd.conf"),
        ServerKind::Knot => ("knot", "knot.conf"),
        _ => ("bind", "named.conf"),
    };
    let catalog = kind != ServerKind::Nsd;
    let dot = kind != ServerKind::Knot;
    let tls = Tls::new();
    let up = Upstream::new();
    let signed = signed(chain);
    let port = free_port();
    let old = ServerProcess::peer_with_config(kind, port, "example.test", |dir| {
        write_conf(&Setup {
            dir,
            port,
            up: &up,
            signed: &signed,
            notify_port: free_port(),
            tls: &tls,
        })
    })
    .unwrap_or_else(|log| panic!("{kind} did not start:\n{log}"));
    wait_for_secondaries(&format!("{kind}"), old.addr(), catalog, || old.log());

    let out_dir = tempfile::tempdir().unwrap();
    let toml = out_dir.path().join("heron.toml");
    let heron_addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let heron_tls = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let tls_listen = dot.then_some(heron_tls);
    let conf = old.dir().join(conf_name);
    let notes = import_and_check(from, &conf, &toml, heron_addr, tls_listen);
    let text = std::fs::read_to_string(&toml).unwrap();
    let tls_section = format!("[tls]\nlisten = [\"{heron_tls}\"]\ncertificate = ");
    assert_eq!(text.contains(&tls_section), dot, "{text}");
    let heron = ServerProcess::heron_on_port(&heron(), heron_addr.port(), "example.test", &text)
        .unwrap_or_else(|log| panic!("Heron did not start on the imported file:\n{text}\n{log}"));
    wait_for_secondaries("Heron", heron_addr, catalog, || heron.log());

    let mut args = vec![
        "compare".to_string(),
        "--against".into(),
        old.addr().to_string(),
        "--server".into(),
        heron_addr.to_string(),
        "--config".into(),
        toml.display().to_string(),
        "--examples".into(),
        "3".into(),
    ];
    // Secondary zones have no file in heron.toml: compare them from the
    // upstream's.
    let mut secondaries = vec!["sec.test"];
    if catalog {
        secondaries.push("member.test");
    }
    for zone in &secondaries {
        args.push("--zone".into());
        args.push(format!(
            "{zone}={}",
            up.file(&format!("{zone}.zone")).display()
        ));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let compared = run(&args);
    let report = text_of(&compared);
    let context = format!("{kind} {chain}:\n{report}\nimport said:\n{notes}\nheron.toml:\n{text}");
    assert_eq!(compared.status.code(), Some(0), "{context}");
    assert!(
        report.contains(", 0 with differences (0 kinds), 0 unanswered"),
        "{context}"
    );
    // Every zone was compared: the primary ones heron.toml names (BIND's
    // four default zones too) and the secondaries.
    let zones = if kind == ServerKind::Bind { 6 } else { 2 } + secondaries.len();
    assert!(report.contains(&format!("{zones} zones (")), "{context}");
    // What --config leaves out and --zone does not give is said: the
    // catalog zone, a secondary too (sec.test is given).
    let left_out = "note: 1 secondary zones left out";
    assert_eq!(report.contains(left_out), catalog, "{context}");
    assert!(!report.contains("note: 2 secondary"), "{context}");
    let members = "note: the members of 1 catalogs consumed left out";
    assert_eq!(report.contains(members), catalog, "{context}");
    if dot {
        let old_tls = SocketAddr::from(([127, 0, 0, 1], tls.port));
        let (old_said, heron_said) = (over_tls(old_tls), over_tls(heron_tls));
        assert_eq!(old_said, heron_said, "DNS over TLS, {context}");
    }
    drop(up.primary);
    notes
}

/// Questions asked over DNS over TLS (kdig +tls): the answer records of
/// each, sorted, one line each.
fn over_tls(addr: SocketAddr) -> Vec<Vec<String>> {
    let questions = [
        ("example.test", "SOA"),
        ("www.example.test", "A"),
        ("any.wild.example.test", "A"),
        ("edge.test", "DNSKEY"),
        ("sec.test", "SOA"),
    ];
    questions
        .iter()
        .map(|(name, rtype)| {
            let extra = ["+tls", "+dnssec", "+noall", "+answer"];
            let out = run_dig_with(DigTool::Kdig, addr, name, rtype, &extra);
            let text = out.expect_success();
            let mut lines: Vec<String> = text
                .lines()
                .filter(|l| !l.trim().is_empty() && !l.starts_with(';'))
                .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
                .collect();
            assert!(
                !lines.is_empty(),
                "{name} {rtype} over TLS: no answer\n{out}"
            );
            lines.sort();
            lines
        })
        .collect()
}

#[test]
fn from_nsd_import_check_config_and_compare_find_no_difference() {
    for chain in ["nsec", "nsec3", "optout"] {
        migrate(ServerKind::Nsd, chain);
    }
}

#[test]
fn from_knot_import_check_config_and_compare_find_no_difference() {
    for chain in ["nsec", "nsec3", "optout"] {
        migrate(ServerKind::Knot, chain);
    }
}

#[test]
fn from_bind_import_check_config_and_compare_find_no_difference() {
    for chain in ["nsec", "nsec3", "optout"] {
        migrate(ServerKind::Bind, chain);
    }
}

#[test]
fn from_bind_with_one_view_for_every_client_compare_finds_no_difference() {
    let notes = migrate_from(ServerKind::Bind, "nsec", bind_view_conf);
    assert!(
        notes.contains(": not needed: view everyone { match-clients { any; }; }"),
        "{notes}"
    );
    assert!(!notes.contains("not translated: view"), "{notes}");
}
