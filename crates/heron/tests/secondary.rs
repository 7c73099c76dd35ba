//! Heron as a secondary, against real primaries: NSD, Knot, BIND and
//! Heron itself serve a zone that Heron transfers with TSIG (AXFR first;
//! from NSD, BIND and Heron over TLS too),
//! then, after an edit and a reload on the primary, hears its NOTIFY and
//! fetches the change by IXFR. Restarted without its primary, Heron serves
//! the copy it kept; killed in the middle of a transfer, it comes back with
//! the last good version and finishes the transfer; restarted, it still
//! serves IXFR of the steps it received to its own secondaries. NOTIFYs
//! from outside the ACL or with a wrong key are refused, and an expired
//! zone answers SERVFAIL until its primary is back.

mod xfr_common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use heron_proto::message::{Header, Message};
use heron_proto::tsig::{self, Algorithm, Key};
use heron_proto::{Name, RType, Rcode};
use heron_testkit::{
    Primary, QueryOpts, ServerKind, ServerProcess, TlsServe, build_query, free_port, try_query_udp,
};
use heron_xfr::primary::notify::{notify_message, unix_now};
use xfr_common::*;

/// The `[[key]]` block every configuration here shares.
fn key_block(secret: &str) -> String {
    format!("[[key]]\nname = \"{KEY}\"\nalgorithm = \"hmac-sha256\"\nsecret = \"{secret}\"\n")
}

/// A Heron secondary of `ORIGIN` on `port`, pulling from `primary`,
/// keeping the zone in `kept`.
fn secondary_config(port: u16, primary: SocketAddr, kept: &Path, extra: &str) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n{}{extra}\n\
         [[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\nprimaries = [\"{primary} key {KEY}\"]\n",
        key_block(SECRET),
        kept.display()
    )
}

/// A Heron primary of `ORIGIN` from `file` on `port`, notifying
/// 127.0.0.1:`notify_port`.
fn primary_config(port: u16, file: &Path, notify_port: u16) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n{}\
         [[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\n\
         allow-transfer = [\"127.0.0.1 key {KEY}\"]\nnotify = [\"127.0.0.1:{notify_port} key {KEY}\"]\n",
        key_block(SECRET),
        file.display()
    )
}

fn start(port: u16, config: &str) -> ServerProcess {
    ServerProcess::heron_on_port(&heron(), port, ORIGIN, config)
        .unwrap_or_else(|log| panic!("Heron did not serve {ORIGIN}: {log}"))
}

/// The serial in a kept zone file's first line (`; zone ORIGIN serial N`).
fn kept_serial(kept: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(kept).ok()?;
    text.lines().next()?.rsplit(' ').next()?.parse().ok()
}

fn rcode(addr: SocketAddr, name: &str) -> Option<Rcode> {
    let q = build_query(&Name::parse(name).unwrap(), RType::A, &QueryOpts::default());
    Some(Message::parse(&try_query_udp(addr, &q).ok()?).ok()?.rcode())
}

/// The edit each primary gets: one record changed, one added, one deleted.
fn edited_zone() -> String {
    zone_text(2, "new A 192.0.2.99\n")
        .replace("h7 A 10.0.0.7", "h7 A 10.9.9.9")
        .replace("txt TXT \"hello world\"\n", "")
}

/// Names whose answers must match the primary's.
const SAMPLES: [(&str, RType); 5] = [
    ("h5999.xfr.test", RType::A),
    ("h7.xfr.test", RType::A),
    ("xfr.test", RType::MX),
    ("txt.xfr.test", RType::TXT),
    ("new.xfr.test", RType::A),
];

fn assert_same_answers(primary: SocketAddr, secondary: SocketAddr) {
    for (name, qtype) in SAMPLES {
        assert_eq!(
            answer(secondary, name, qtype),
            answer(primary, name, qtype),
            "{name} {qtype}"
        );
    }
}

fn work_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("heron-sec-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `kind` as primary, Heron as secondary: AXFR, NOTIFY + IXFR, restart.
/// With `tls`, Heron knows only the primary's TLS port and checks its
/// certificate.
fn peer_primary(kind: ServerKind, tls: bool) {
    let dir = work_dir(&format!(
        "{}{}",
        kind.to_string().to_lowercase(),
        if tls { "-xot" } else { "" }
    ));
    let zone_file = dir.join("primary.zone");
    std::fs::write(&zone_file, zone_text(1, "")).unwrap();
    let heron_port = free_port();
    let tls = tls.then(|| {
        let (chain, key) = write_certificate(&dir);
        TlsServe {
            port: free_port(),
            chain,
            key,
        }
    });
    let spec = Primary {
        origin: format!("{ORIGIN}."),
        file: zone_file.clone(),
        secondary: SocketAddr::from(([127, 0, 0, 1], heron_port)),
        key: Some(tsig_spec()),
        tls: tls.clone(),
    };
    let primary = spec.start(kind);
    let kept = dir.join("kept").join("xfr.zone");
    let (config, from) = match &tls {
        None => (
            secondary_config(heron_port, primary.addr(), &kept, ""),
            primary.addr(),
        ),
        Some(t) => (
            xot_secondary_config(heron_port, t.port, &kept, "tls localhost", &t.chain),
            SocketAddr::new(primary.addr().ip(), t.port),
        ),
    };
    let mut heron = start(heron_port, &config);
    let sec = heron.addr();
    assert_eq!(soa_serial(sec), Some(1));
    assert_same_answers(primary.addr(), sec);
    assert!(heron.log().contains("AXFR from"), "{}", heron.log());
    assert!(
        eventually(|| kept_serial(&kept) == Some(1)),
        "kept copy written"
    );

    std::fs::write(&zone_file, edited_zone()).unwrap();
    primary.reload();
    assert!(
        eventually(|| soa_serial(sec) == Some(2)),
        "Heron never got serial 2 from {kind}.\nHeron: {}\n{kind}: {}",
        heron.log(),
        primary.log()
    );
    assert_same_answers(primary.addr(), sec);
    assert_eq!(
        answer(sec, "h7.xfr.test", RType::A),
        ["h7.xfr.test. 300 IN A 10.9.9.9"]
    );
    let log = heron.log();
    assert!(log.contains("NOTIFY for xfr.test."), "{log}");
    assert!(
        log.contains(&format!("AXFR from {from}"))
            && log.contains(&format!("IXFR from {from} to serial 2")),
        "{log}"
    );
    assert!(
        !log.contains("refresh from") && !log.contains("trying AXFR"),
        "{log}"
    );
    assert!(
        eventually(|| kept_serial(&kept) == Some(2)),
        "kept copy updated"
    );

    // Without its primary, a restarted Heron serves what it kept.
    drop(primary);
    heron.terminate();
    let heron = start(heron_port, &config);
    assert_eq!(soa_serial(heron.addr()), Some(2));
    assert_eq!(
        answer(heron.addr(), "h7.xfr.test", RType::A),
        ["h7.xfr.test. 300 IN A 10.9.9.9"]
    );
    assert!(
        heron.log().contains("serving kept serial 2"),
        "{}",
        heron.log()
    );
    drop(heron);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn heron_is_a_secondary_of_nsd() {
    peer_primary(ServerKind::Nsd, false);
}

#[test]
fn heron_is_a_secondary_of_knot() {
    peer_primary(ServerKind::Knot, false);
}

#[test]
fn heron_is_a_secondary_of_bind() {
    peer_primary(ServerKind::Bind, false);
}

#[test]
fn heron_is_a_secondary_of_nsd_over_tls() {
    peer_primary(ServerKind::Nsd, true);
}

#[test]
fn heron_is_a_secondary_of_bind_over_tls() {
    peer_primary(ServerKind::Bind, true);
}

/// A Heron primary of the test zone at serial 1, with a port set aside for
/// its secondary.
struct HeronPrimary {
    dir: PathBuf,
    zone_file: PathBuf,
    primary: ServerProcess,
    secondary_port: u16,
}

impl HeronPrimary {
    fn start(tag: &str) -> HeronPrimary {
        let dir = work_dir(tag);
        let zone_file = dir.join("primary.zone");
        std::fs::write(&zone_file, zone_text(1, "")).unwrap();
        let (primary_port, secondary_port) = (free_port(), free_port());
        let config = primary_config(primary_port, &zone_file, secondary_port);
        HeronPrimary {
            primary: start(primary_port, &config),
            dir,
            zone_file,
            secondary_port,
        }
    }
}

/// Heron → Heron → kdig: a secondary that others may transfer from
/// journals the IXFR steps it receives, and restarted, still serves them
/// by IXFR to its own secondaries.
#[test]
fn a_restarted_secondary_still_serves_ixfr_of_what_it_received() {
    let HeronPrimary {
        dir,
        zone_file,
        primary,
        secondary_port,
    } = HeronPrimary::start("journal");
    let kept = dir.join("xfr.kept");
    let config = secondary_config(secondary_port, primary.addr(), &kept, "")
        + "allow-transfer = [\"127.0.0.1\"]\n";
    let mut heron = start(secondary_port, &config);
    assert!(eventually(|| kept_serial(&kept) == Some(1)));
    for (serial, text) in [
        (2, edited_zone()),
        (
            3,
            edited_zone().replace(" 2 3600 ", " 3 3600 ") + "newer A 192.0.2.98\n",
        ),
    ] {
        std::fs::write(&zone_file, text).unwrap();
        primary.reload();
        assert!(
            eventually(|| kept_serial(&kept) == Some(serial)),
            "serial {serial}: {}",
            heron.log()
        );
    }
    let log = heron.log();
    assert!(
        log.contains("IXFR from") && log.contains("to serial 3"),
        "{log}"
    );
    assert!(heron.terminate().is_some_and(|s| s.success()));

    let heron = start(secondary_port, &config);
    assert!(
        heron.log().contains("serving kept serial 3"),
        "{}",
        heron.log()
    );
    let out = kdig(heron.addr(), &[ORIGIN, "IXFR=1"]);
    assert_eq!(
        soa_serials(&out.stdout),
        [3, 1, 2, 2, 3, 3],
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        heron.log()
    );
    assert_eq!(
        records(&out.stdout),
        [
            "xfr.test. SOA",
            "xfr.test. SOA",
            "h7.xfr.test. A",
            "txt.xfr.test. TXT",
            "xfr.test. SOA",
            "h7.xfr.test. A",
            "new.xfr.test. A",
            "xfr.test. SOA",
            "xfr.test. SOA",
            "newer.xfr.test. A",
            "xfr.test. SOA"
        ]
    );
    assert!(
        heron.log().contains("IXFR of xfr.test. serial 3"),
        "{}",
        heron.log()
    );
    drop((heron, primary));
    std::fs::remove_dir_all(dir).unwrap();
}

/// Heron → Heron, the secondary killed (SIGKILL) while a large change is
/// on its way: restarted, it serves the last version it completed, then
/// finishes the transfer.
#[test]
fn a_secondary_killed_mid_transfer_serves_its_last_good_copy_and_resumes() {
    let HeronPrimary {
        dir,
        zone_file,
        primary,
        secondary_port,
    } = HeronPrimary::start("killed");
    let kept = dir.join("xfr.kept");
    let config = secondary_config(secondary_port, primary.addr(), &kept, "");
    let mut heron = start(secondary_port, &config);
    assert!(eventually(|| kept_serial(&kept) == Some(1)));

    // 200,000 more records: a transfer that takes a while.
    let big: String = (0..200_000)
        .map(|i| format!("big{i} A 10.1.{}.{}\n", i >> 8 & 255, i & 255))
        .collect();
    std::fs::write(&zone_file, zone_text(2, &big)).unwrap();
    primary.reload();
    assert!(
        eventually(|| heron.log().contains("(serial 2)")),
        "NOTIFY for serial 2 never came: {}",
        heron.log()
    );
    // Seeing serial 2, it dates its last check one refresh interval back
    // before it transfers; killed before that, a restart would rightly
    // wait out the refresh interval.
    let dated_back = || {
        let modified = std::fs::metadata(&kept).and_then(|m| m.modified());
        modified.is_ok_and(|t| t.elapsed().unwrap_or_default() > Duration::from_secs(60))
    };
    assert!(eventually(dated_back), "{}", heron.log());
    heron.kill();
    assert_eq!(
        kept_serial(&kept),
        Some(1),
        "killed before the transfer completed"
    );
    let unfinished = heron.log();
    assert!(!unfinished.contains("to serial 2"), "{unfinished}");

    let heron = start(secondary_port, &config);
    let first = soa_serial(heron.addr());
    assert!(first == Some(1) || first == Some(2), "{first:?}");
    assert!(
        eventually(|| soa_serial(heron.addr()) == Some(2)),
        "never resumed: {}",
        heron.log()
    );
    assert_eq!(
        answer(heron.addr(), "big199999.xfr.test", RType::A).len(),
        1
    );
    assert!(eventually(|| kept_serial(&kept) == Some(2)));
    drop((heron, primary));
    std::fs::remove_dir_all(dir).unwrap();
}

/// A new self-signed certificate for "localhost" in `dir`: (chain, key).
fn write_certificate(dir: &Path) -> (PathBuf, PathBuf) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (chain, key) = (dir.join("chain.pem"), dir.join("key.pem"));
    std::fs::write(&chain, cert.cert.pem()).unwrap();
    std::fs::write(&key, cert.signing_key.serialize_pem()).unwrap();
    (chain, key)
}

/// A Heron secondary on `port` pulling over TLS from 127.0.0.1:`tls_port`
/// (`tls` and what follows it in the primaries entry), trusting `ca`.
fn xot_secondary_config(port: u16, tls_port: u16, kept: &Path, tls: &str, ca: &Path) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n{}\
         [secondary]\ntls-ca = \"{}\"\n\
         [[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\n\
         primaries = [\"127.0.0.1:{tls_port} key {KEY} {tls}\"]\n",
        key_block(SECRET),
        ca.display(),
        kept.display()
    )
}

/// Heron → Heron over TLS (XoT): a secondary that checks the primary's
/// certificate and one that does not both take the zone by AXFR and the
/// change by IXFR from the TLS port; one that expects another name in
/// the certificate takes nothing and says why.
#[test]
fn heron_is_a_secondary_of_heron_over_tls() {
    let dir = work_dir("xot");
    let zone_file = dir.join("primary.zone");
    std::fs::write(&zone_file, zone_text(1, "")).unwrap();
    let (chain, key) = write_certificate(&dir);
    let [primary_port, tls_port, strict_port, open_port] = [(); 4].map(|_| free_port());
    let tls = format!(
        "[tls]\nlisten = [\"127.0.0.1:{tls_port}\"]\ncertificate = \"{}\"\nkey = \"{}\"\n",
        chain.display(),
        key.display()
    );
    let config = format!(
        "[server]\nlisten = [\"127.0.0.1:{primary_port}\"]\nworkers = 1\n{}{tls}\
         [[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\n\
         allow-transfer = [\"127.0.0.1 key {KEY}\"]\n\
         notify = [\"127.0.0.1:{strict_port} key {KEY}\", \"127.0.0.1:{open_port} key {KEY}\"]\n",
        key_block(SECRET),
        zone_file.display()
    );
    let primary = start(primary_port, &config);
    let strict_kept = dir.join("strict.kept");
    let open_kept = dir.join("open.kept");
    let strict = start(
        strict_port,
        &xot_secondary_config(strict_port, tls_port, &strict_kept, "tls localhost", &chain),
    );
    let open = start(
        open_port,
        &xot_secondary_config(open_port, tls_port, &open_kept, "tls", &chain),
    );
    let from = format!("from 127.0.0.1:{tls_port}");
    for secondary in [&strict, &open] {
        assert_eq!(soa_serial(secondary.addr()), Some(1));
        assert_same_answers(primary.addr(), secondary.addr());
        assert!(
            secondary.log().contains(&format!("AXFR {from}")),
            "{}",
            secondary.log()
        );
    }

    std::fs::write(&zone_file, edited_zone()).unwrap();
    primary.reload();
    for secondary in [&strict, &open] {
        let sec = secondary.addr();
        assert!(
            eventually(|| soa_serial(sec) == Some(2)),
            "no serial 2 over TLS: {}\nprimary: {}",
            secondary.log(),
            primary.log()
        );
        assert_same_answers(primary.addr(), sec);
        let log = secondary.log();
        assert!(log.contains(&format!("IXFR {from} to serial 2")), "{log}");
    }

    // A certificate for "localhost" is not one for "ns1.example".
    let wrong_port = free_port();
    let wrong_kept = dir.join("wrong.kept");
    let wrong = xot_secondary_config(wrong_port, tls_port, &wrong_kept, "tls ns1.example", &chain);
    let log = run_until_logged(&wrong, &dir.join("wrong.toml"), "refresh from");
    assert!(log.contains("certificate not valid for name"), "{log}");
    assert!(!wrong_kept.exists(), "nothing kept: {log}");
    drop((strict, open, primary));
    std::fs::remove_dir_all(dir).unwrap();
}

/// Runs `heron serve` with `config` (written to `path`) until its log
/// shows `what` or 20 s pass; returns the log.
fn run_until_logged(config: &str, path: &Path, what: &str) -> String {
    std::fs::write(path, config).unwrap();
    let log_path = path.with_extension("log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = std::process::Command::new(heron())
        .args(["serve", "--config"])
        .arg(path)
        .stderr(log)
        .spawn()
        .unwrap();
    let read = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !read().contains(what) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    read()
}

/// Sends a NOTIFY for `ORIGIN` (signed with `secret` if given) and returns
/// the answer's RCODE.
fn notify(to: SocketAddr, secret: Option<&str>) -> Rcode {
    let origin = Name::parse(ORIGIN).unwrap();
    let soa = b"\x02ns\x00\x01h\x00\x00\x00\x00\x09\x00\x00\x0e\x10\x00\x00\x02\x58\x00\x01\x51\x80\x00\x00\x00\x3c";
    let mut msg = notify_message(&origin, &(300, soa.to_vec()), 0x4242);
    if let Some(secret) = secret {
        let key = Key::from_base64(KEY, Algorithm::HmacSha256, secret).unwrap();
        tsig::sign_request(&mut msg, &key, unix_now(), tsig::DEFAULT_FUDGE);
    }
    let reply = try_query_udp(to, &msg).expect("NOTIFY answered");
    assert_eq!(Header::read(&reply).unwrap().id, 0x4242);
    Message::parse(&reply).unwrap().rcode()
}

/// NOTIFY is taken only from the primaries, with their key; a secondary
/// that cannot authenticate to its primary serves nothing (SERVFAIL).
#[test]
fn notifies_and_transfers_without_the_right_key_are_refused() {
    let HeronPrimary {
        dir,
        zone_file: _,
        primary,
        secondary_port,
    } = HeronPrimary::start("refused");
    let heron = start(
        secondary_port,
        &secondary_config(secondary_port, primary.addr(), &dir.join("k"), ""),
    );
    let sec = heron.addr();
    assert_eq!(notify(sec, Some(SECRET)), Rcode::NOERROR);
    assert_eq!(
        notify(sec, None),
        Rcode::REFUSED,
        "the primaries' rule wants the key"
    );
    assert_eq!(
        notify(sec, Some("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")),
        Rcode::NOTAUTH
    );
    let log = heron.log();
    assert!(
        log.contains("NOTIFY for xfr.test. from 127.0.0.1") && log.contains("refused"),
        "{log}"
    );

    // A secondary whose key does not match the primary's.
    let wrong_port = free_port();
    let wrong = secondary_config(wrong_port, primary.addr(), &dir.join("w"), "")
        .replace(SECRET, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=");
    std::fs::write(dir.join("wrong.toml"), &wrong).unwrap();
    let wrong = ServerProcess::heron_on_port(&xfr_common::heron(), wrong_port, ORIGIN, &wrong);
    let log = wrong.expect_err("no zone without the right key");
    assert!(
        log.contains("refresh from") && log.contains("BADSIG"),
        "{log}"
    );
    assert!(primary.log().contains("BADSIG"), "{}", primary.log());
    assert!(!dir.join("w").exists(), "nothing kept");
    drop((heron, primary));
    std::fs::remove_dir_all(dir).unwrap();
}

/// With the primary gone past the SOA expire time the zone answers
/// SERVFAIL (RFC 1034 4.3.5); when the primary is back, the zone is too.
#[test]
fn an_expired_zone_answers_servfail_until_its_primary_returns() {
    let dir = work_dir("expire");
    let zone_file = dir.join("primary.zone");
    // refresh 1 s, retry 1 s, expire 3 s.
    let text = zone_text(1, "").replace("1 3600 600 86400 60", "1 1 1 3 60");
    std::fs::write(&zone_file, text).unwrap();
    let (primary_port, secondary_port) = (free_port(), free_port());
    let primary_conf = primary_config(primary_port, &zone_file, secondary_port);
    let mut primary = start(primary_port, &primary_conf);
    let bounds = "[secondary]\nmin-refresh = 1\nmin-retry = 1\n";
    let config = secondary_config(secondary_port, primary.addr(), &dir.join("k"), bounds);
    let heron = start(secondary_port, &config);
    let sec = heron.addr();
    assert_eq!(rcode(sec, "h1.xfr.test"), Some(Rcode::NOERROR));
    primary.terminate();
    assert!(
        eventually(|| rcode(sec, "h1.xfr.test") == Some(Rcode::SERVFAIL)),
        "never expired: {}",
        heron.log()
    );
    assert!(heron.log().contains("expired"), "{}", heron.log());
    assert_eq!(
        rcode(sec, "other.test"),
        Some(Rcode::REFUSED),
        "not our zone"
    );
    let primary = start(primary_port, &primary_conf);
    assert!(
        eventually(|| rcode(sec, "h1.xfr.test") == Some(Rcode::NOERROR)),
        "never came back: {}",
        heron.log()
    );
    drop((heron, primary));
    std::fs::remove_dir_all(dir).unwrap();
}
