//! Heron as a secondary, against real primaries: NSD, Knot, BIND and
//! Heron itself serve a zone that Heron transfers with TSIG (AXFR first;
//! from NSD, BIND and Heron over TLS too),
//! then, after an edit and a reload on the primary, hears its NOTIFY and
//! fetches the change by IXFR. Restarted without its primary, Heron serves
//! the copy it kept; killed in the middle of a transfer, it comes back with
//! the last good version and finishes the transfer; restarted, it still
//! serves IXFR of the steps it received to its own secondaries. NOTIFYs
//! from outside the ACL or with a wrong key are refused, and an expired
//! zone answers SERVFAIL until its primary is back. From BIND sending one
//! record per message, every transfer is read to its end.
//!
//! Against a primary in the test's own process, which misbehaves on cue
//! and counts what it sees: AXFR when an IXFR is refused or broken, an
//! IXFR adding records the zone holds already taken and logged, timers
//! resumed from the kept copy after a restart, many zones over a few
//! connections, the concurrency bound, NOTIFY refused by address, and a
//! failing primary left alone between tries.

mod xfr_common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use heron_proto::message::{Header, Message};
use heron_proto::time::unix_now;
use heron_proto::tsig::{self, Algorithm, Key};
use heron_proto::{Name, RType, Rcode};
use heron_testkit::{
    DigTool, FakePrimary, IxfrAnswer, Primary, QueryOpts, ServerKind, ServerProcess, TlsServe,
    build_query, eventually_within, free_port, kdig_expire, run_dig_with, try_query_udp,
    try_query_udp_from,
};
use heron_xfr::primary::notify::notify_message;
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
    start_serving(port, ORIGIN, config)
}

/// Heron with `config` on `port`, once it answers for `zone`.
fn start_serving(port: u16, zone: &str, config: &str) -> ServerProcess {
    ServerProcess::heron_on_port(&heron(), port, zone, config)
        .unwrap_or_else(|log| panic!("Heron did not serve {zone}: {log}"))
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
    // EDNS EXPIRE (RFC 7314) counts down from the SOA's expire, or from
    // what a primary that supports it (Knot) told.
    let left = expire_of(sec).expect("the secondary tells EXPIRE");
    assert!(0 < left && left <= 86_400, "{left}");
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
    // The IXFR line says what it carried besides the zone's size
    // (black-box finding BF-6: the size alone read as a whole zone sent).
    let ixfr = log
        .lines()
        .find(|l| l.contains(&format!("IXFR from {from} to serial 2")));
    assert!(
        ixfr.is_some_and(|l| l.contains("1 steps, ") && l.contains("records changed; zone of ")),
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

/// BIND with `transfer-format one-answer` sends one record per message
/// (issue 42, 2): the AXFR's first message is its SOA alone, and so is the
/// IXFR's, the newest SOA. Heron reads each transfer to its end: it
/// reaches every new serial by IXFR, and the pooled connection that
/// carried one IXFR carries the next.
#[test]
fn heron_is_a_secondary_of_bind_sending_one_record_per_message() {
    let dir = work_dir("bind-one-answer");
    let zone_file = dir.join("primary.zone");
    std::fs::write(&zone_file, zone_text(1, "")).unwrap();
    let heron_port = free_port();
    let spec = Primary {
        origin: format!("{ORIGIN}."),
        file: zone_file.clone(),
        secondary: SocketAddr::from(([127, 0, 0, 1], heron_port)),
        key: Some(tsig_spec()),
        tls: None,
    };
    let primary = spec.start_bind_one_answer();
    let from = primary.addr();
    let kept = dir.join("xfr.kept");
    let heron = start(heron_port, &secondary_config(heron_port, from, &kept, ""));
    let sec = heron.addr();
    assert_eq!(soa_serial(sec), Some(1));
    for serial in [2, 3] {
        let edit = format!("new{serial} A 192.0.2.{serial}\n");
        std::fs::write(&zone_file, zone_text(serial, &edit)).unwrap();
        primary.reload();
        assert!(
            eventually(|| soa_serial(sec) == Some(serial)),
            "Heron never got serial {serial} from BIND.\nHeron: {}\nBIND: {}",
            heron.log(),
            primary.log()
        );
        let name = format!("new{serial}.{ORIGIN}");
        assert_eq!(answer(sec, &name, RType::A), answer(from, &name, RType::A));
    }
    let log = heron.log();
    for (kind, serial) in [("AXFR", 1), ("IXFR", 2), ("IXFR", 3)] {
        let transferred = format!("{kind} from {from} to serial {serial}");
        assert!(log.contains(&transferred), "{transferred}: {log}");
    }
    assert!(
        !log.contains("trying AXFR") && !log.contains("wrong ID"),
        "{log}"
    );
    drop((heron, primary));
    std::fs::remove_dir_all(dir).unwrap();
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
    // Logged once the transfer is written, which kdig may see first.
    assert!(
        eventually(|| heron.log().contains("IXFR of xfr.test. serial 3")),
        "{}",
        heron.log()
    );
    drop((heron, primary));
    std::fs::remove_dir_all(dir).unwrap();
}

/// A secondary killed after it journalled a transfer but before its kept
/// copy was written comes back with a journal past that copy. The
/// primary holds those versions, so the journal is a cache: it starts
/// over quietly (nothing kept aside, no error) and the next change comes
/// by IXFR as usual.
#[test]
fn a_journal_past_a_secondarys_kept_copy_starts_over_quietly() {
    let HeronPrimary {
        dir,
        zone_file,
        primary,
        secondary_port,
    } = HeronPrimary::start("ahead");
    let kept = dir.join("xfr.kept");
    let config = secondary_config(secondary_port, primary.addr(), &kept, "")
        + "allow-transfer = [\"127.0.0.1\"]\n";
    let mut heron = start(secondary_port, &config);
    let change = |serial: u32, name: &str| {
        let text = zone_text(serial, &format!("{name} A 192.0.2.{serial}\n"));
        std::fs::write(&zone_file, text).unwrap();
        primary.reload();
    };
    assert!(eventually(|| kept_serial(&kept) == Some(1)));
    change(2, "two");
    assert!(eventually(|| kept_serial(&kept) == Some(2)));
    let copy_at_2 = std::fs::read(&kept).unwrap();
    change(3, "three");
    assert!(
        eventually(|| kept_serial(&kept) == Some(3)),
        "{}",
        heron.log()
    );
    assert!(heron.terminate().is_some_and(|s| s.success()));
    // What a kill between the journal write and the kept copy leaves.
    std::fs::write(&kept, copy_at_2).unwrap();

    let heron = start(secondary_port, &config);
    assert_eq!(soa_serial(heron.addr()), Some(2), "{}", heron.log());
    change(4, "four");
    assert!(
        eventually(|| soa_serial(heron.addr()) == Some(4)),
        "{}",
        heron.log()
    );
    let log = heron.log();
    assert!(
        !log.contains("ERROR") && !log.contains("unapplied"),
        "{log}"
    );
    let names = std::fs::read_dir(&dir).unwrap().flatten();
    let aside: Vec<_> = (names.map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.contains("unapplied"))
        .collect();
    assert!(aside.is_empty(), "{aside:?}");
    let out = kdig(heron.addr(), &[ORIGIN, "IXFR=2"]);
    assert_eq!(soa_serials(&out.stdout), [4, 2, 3, 3, 4, 4], "{log}");
    drop((heron, primary));
    std::fs::remove_dir_all(dir).unwrap();
}

/// A kept copy the disk garbled (one address changed, the file still a
/// zone file) is not served after a restart: its seal does not hold, so
/// the zone is transferred anew and answers as the primary does.
#[test]
fn a_garbled_kept_copy_is_not_served_but_transferred_anew() {
    let HeronPrimary {
        dir,
        primary,
        secondary_port,
        ..
    } = HeronPrimary::start("garbled");
    let kept = dir.join("xfr.kept");
    let config = secondary_config(secondary_port, primary.addr(), &kept, "");
    let mut heron = start(secondary_port, &config);
    assert!(eventually(|| kept_serial(&kept) == Some(1)));
    assert!(heron.terminate().is_some_and(|s| s.success()));
    let text = std::fs::read_to_string(&kept).unwrap();
    let garbled = text.replace(
        "h7.xfr.test. 300 IN A 10.0.0.7",
        "h7.xfr.test. 300 IN A 10.0.0.8",
    );
    assert_ne!(garbled, text, "{text}");
    std::fs::write(&kept, garbled).unwrap();

    let heron = start(secondary_port, &config);
    assert!(heron.log().contains("does not hold"), "{}", heron.log());
    assert!(eventually(|| answer(heron.addr(), "h7.xfr.test", RType::A)
        == answer(primary.addr(), "h7.xfr.test", RType::A)));
    assert_same_answers(primary.addr(), heron.addr());
    assert!(eventually(
        || std::fs::read_to_string(&kept).is_ok_and(|t| t == text)
    ));
    drop((heron, primary));
    std::fs::remove_dir_all(dir).unwrap();
}

/// Heron → Heron, the secondary killed (SIGKILL) while a large change is
/// on its way. Restarted while the primary is away, it serves the last
/// version it completed at once; when the primary is back (with no NOTIFY
/// to send), its own timers fetch the change: the kept copy was dated due
/// when the new serial was first seen.
#[test]
fn a_secondary_killed_mid_transfer_serves_its_last_good_copy_and_resumes() {
    let HeronPrimary {
        dir,
        zone_file,
        mut primary,
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
    // The primary's debug build reads 200,000 records first: seconds,
    // and many more on a loaded machine.
    assert!(
        eventually_within(Duration::from_secs(90), || heron
            .log()
            .contains("(serial 2)")),
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

    // The primary away: serial 1, the last good version, is served at once.
    let primary_port = primary.addr().port();
    primary.terminate();
    let heron = start(secondary_port, &config);
    assert_eq!(soa_serial(heron.addr()), Some(1), "{}", heron.log());
    assert!(
        heron.log().contains("serving kept serial 1"),
        "{}",
        heron.log()
    );
    assert_eq!(
        answer(heron.addr(), "h7.xfr.test", RType::A),
        ["h7.xfr.test. 300 IN A 10.0.0.7"]
    );

    // The primary back, telling nobody: serial 2 arrives after.
    let notify_line = format!("notify = [\"127.0.0.1:{secondary_port} key {KEY}\"]\n");
    let with_notify = primary_config(primary_port, &zone_file, secondary_port);
    let silent = with_notify.replace(&notify_line, "");
    assert_ne!(silent, with_notify, "the notify line is gone");
    let primary = start(primary_port, &silent);
    assert!(
        eventually_within(Duration::from_secs(90), || soa_serial(heron.addr())
            == Some(2)),
        "never resumed: {}",
        heron.log()
    );
    assert_eq!(
        answer(heron.addr(), "big199999.xfr.test", RType::A).len(),
        1
    );
    // The kept copy is written at idle priority: on a busy machine, later.
    assert!(eventually_within(Duration::from_secs(60), || kept_serial(
        &kept
    ) == Some(2)));
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

/// `[secondary] tls-ca` changed by a reload applies to the next
/// transfer: TLS connections checked against the old trust are not
/// reused (`heron ctl retransfer` succeeded on a pooled one for as long
/// as the pool kept it).
#[test]
fn a_tls_ca_changed_by_a_reload_applies_to_pooled_connections_too() {
    let dir = work_dir("xot-new-ca");
    let zone_file = dir.join("primary.zone");
    std::fs::write(&zone_file, zone_text(1, "")).unwrap();
    let (chain, key) = write_certificate(&dir);
    let other_dir = dir.join("other");
    std::fs::create_dir_all(&other_dir).unwrap();
    let (other_chain, _) = write_certificate(&other_dir);
    let [primary_port, tls_port, port] = [(); 3].map(|_| free_port());
    let config = format!(
        "[server]\nlisten = [\"127.0.0.1:{primary_port}\"]\nworkers = 1\n{}\
         [tls]\nlisten = [\"127.0.0.1:{tls_port}\"]\ncertificate = \"{}\"\nkey = \"{}\"\n\
         [[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\n\
         allow-transfer = [\"127.0.0.1 key {KEY}\"]\nnotify = [\"127.0.0.1:{port} key {KEY}\"]\n",
        key_block(SECRET),
        chain.display(),
        key.display(),
        zone_file.display()
    );
    let primary = start(primary_port, &config);
    let kept = dir.join("kept.zone");
    let socket = dir.join("control.sock");
    let secondary_config = xot_secondary_config(port, tls_port, &kept, "tls localhost", &chain)
        .replacen(
            "workers = 1\n",
            &format!("workers = 1\ncontrol = \"{}\"\n", socket.display()),
            1,
        );
    let secondary = start(port, &secondary_config);
    assert_eq!(soa_serial(secondary.addr()), Some(1));
    let distrusting = secondary_config.replace(
        &chain.display().to_string(),
        &other_chain.display().to_string(),
    );
    std::fs::write(secondary.dir().join("heron.toml"), distrusting).unwrap();
    secondary.reload();
    assert!(
        eventually(|| secondary.log().contains("reload done")),
        "{}",
        secondary.log()
    );
    // A retransfer goes straight to the transfer, on a pooled connection
    // if there is one.
    let retransfer = ctl_at(&socket, &["retransfer", ORIGIN]);
    let said = String::from_utf8_lossy(&retransfer.stdout);
    assert!(!retransfer.status.success(), "{said}\n{}", secondary.log());
    assert!(said.contains("invalid peer certificate"), "{said}");
    let transfers = secondary.log().matches("zone transferred in").count();
    assert_eq!(transfers, 1, "{}", secondary.log());
    drop((secondary, primary));
    std::fs::remove_dir_all(dir).unwrap();
}

/// Two zones from one TLS primary, one naming the wrong name for its
/// certificate: that zone takes nothing and says why, and the other keeps
/// refreshing from the same address (the certificate failure used to put
/// the primary's address in back-off, every zone on it refused).
#[test]
fn a_wrong_tls_name_for_one_zone_leaves_the_primary_up_for_the_others() {
    let dir = work_dir("xot-two");
    let zone_file = dir.join("primary.zone");
    std::fs::write(&zone_file, zone_text(1, "")).unwrap();
    let other_file = dir.join("other.zone");
    std::fs::write(
        &other_file,
        "@ 300 SOA ns h 1 3600 600 86400 60\n@ 300 NS ns\nns 300 A 192.0.2.1\n",
    )
    .unwrap();
    let (chain, key) = write_certificate(&dir);
    let [primary_port, tls_port, port] = [(); 3].map(|_| free_port());
    let config = format!(
        "[server]\nlisten = [\"127.0.0.1:{primary_port}\"]\nworkers = 1\n{}\
         [tls]\nlisten = [\"127.0.0.1:{tls_port}\"]\ncertificate = \"{}\"\nkey = \"{}\"\n\
         [[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\n\
         allow-transfer = [\"127.0.0.1 key {KEY}\"]\nnotify = [\"127.0.0.1:{port} key {KEY}\"]\n\
         [[zone]]\norigin = \"other.test\"\nfile = \"{}\"\nallow-transfer = [\"127.0.0.1 key {KEY}\"]\n",
        key_block(SECRET),
        chain.display(),
        key.display(),
        zone_file.display(),
        other_file.display()
    );
    let primary = start(primary_port, &config);
    let secondary_config = xot_secondary_config(
        port,
        tls_port,
        &dir.join("good.kept"),
        "tls localhost",
        &chain,
    ) + &format!(
        "[[zone]]\norigin = \"other.test\"\nfile = \"{}\"\n\
             primaries = [\"127.0.0.1:{tls_port} key {KEY} tls wrong.name\"]\n",
        dir.join("other.kept").display()
    );
    let socket = dir.join("ctl.sock");
    let secondary_config = secondary_config.replacen(
        "workers = 1\n",
        &format!("workers = 1\ncontrol = \"{}\"\n", socket.display()),
        1,
    );
    let secondary = start(port, &secondary_config);
    assert_eq!(soa_serial(secondary.addr()), Some(1));
    let refresh = |zone: &str| {
        let out = std::process::Command::new(heron())
            .args(["ctl", "--socket"])
            .arg(&socket)
            .args(["refresh", zone])
            .output()
            .unwrap();
        let said =
            String::from_utf8_lossy(&[&out.stdout[..], &out.stderr[..]].concat()).into_owned();
        (out.status.success(), said)
    };
    let (ok, said) = refresh("other.test");
    assert!(
        !ok && said.contains("certificate not valid for name"),
        "{said}"
    );
    // At once after that failure: the primary is not left alone.
    let (ok, said) = refresh(ORIGIN);
    assert!(ok, "{said}\n{}", secondary.log());
    std::fs::write(&zone_file, edited_zone()).unwrap();
    primary.reload();
    assert!(
        eventually(|| soa_serial(secondary.addr()) == Some(2)),
        "{}",
        secondary.log()
    );
    drop((secondary, primary));
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
    notify_from(LOCALHOST, to, ORIGIN, secret)
}

const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Sends a NOTIFY for `zone` from the address `from` (signed with `secret`
/// if given) and returns the answer's RCODE.
fn notify_from(from: IpAddr, to: SocketAddr, zone: &str, secret: Option<&str>) -> Rcode {
    let origin = Name::parse(zone).unwrap();
    let soa = b"\x02ns\x00\x01h\x00\x00\x00\x00\x09\x00\x00\x0e\x10\x00\x00\x02\x58\x00\x01\x51\x80\x00\x00\x00\x3c";
    let mut msg = notify_message(&origin, &(300, soa.to_vec()), 0x4242);
    if let Some(secret) = secret {
        let key = Key::from_base64(KEY, Algorithm::HmacSha256, secret).unwrap();
        tsig::sign_request(&mut msg, &key, unix_now(), tsig::DEFAULT_FUDGE);
    }
    let reply = try_query_udp_from(from, to, &msg).expect("NOTIFY answered");
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

    // A key the primary does not know: it answers NOTAUTH, unsigned, with
    // BADKEY in its TSIG record; the secondary says so (issue 44: it said
    // "message is not signed"), in its log and for each later check.
    let unknown_port = free_port();
    let unknown = secondary_config(unknown_port, primary.addr(), &dir.join("u"), "")
        .replace(KEY, "unknown.key.test");
    let unknown =
        ServerProcess::heron_on_port(&xfr_common::heron(), unknown_port, ORIGIN, &unknown);
    let log = unknown.expect_err("no zone with a key the primary does not know");
    assert!(
        log.contains("the primary answered NOTAUTH: unknown TSIG key or algorithm (BADKEY)"),
        "{log}"
    );
    assert!(!log.contains("not signed"), "{log}");
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
    let bounds = "[secondary]\nmin-refresh = 1\nmin-retry = 1\nmin-expire = 1\n";
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
    // The line may reach the log just after the first SERVFAIL.
    assert!(
        heron.wait_for_log("zone expired"),
        "no line: {}",
        heron.log()
    );
    let log = heron.log();
    let expired = log.lines().find(|l| l.contains("zone expired")).unwrap();
    assert!(
        expired.contains("zone=xfr.test.") && expired.contains(&format!("peer={}", primary.addr())),
        "one line with the zone and the primary: {log}"
    );
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

/// `kdig +expire` of the zone's SOA: the EDNS EXPIRE value.
fn expire_of(server: SocketAddr) -> Option<u32> {
    let kdig = run_dig_with(DigTool::Kdig, server, ORIGIN, "SOA", &["+expire"]);
    kdig_expire(kdig.expect_success())
}

#[test]
fn edns_expire_is_the_soa_expire_on_the_primary_and_counts_down_on_the_secondary() {
    let dir = work_dir("edns-expire");
    let zone_file = dir.join("primary.zone");
    std::fs::write(&zone_file, zone_text(1, "")).unwrap();
    let (primary_port, secondary_port) = (free_port(), free_port());
    let primary = start(
        primary_port,
        &primary_config(primary_port, &zone_file, secondary_port),
    );
    let config = secondary_config(secondary_port, primary.addr(), &dir.join("k"), "");
    let heron = start(secondary_port, &config);
    let soa_expire = 86400; // zone_text's SOA
    assert_eq!(expire_of(primary.addr()), Some(soa_expire));
    let first = expire_of(heron.addr()).expect("the secondary tells EXPIRE");
    std::thread::sleep(Duration::from_secs(2));
    let second = expire_of(heron.addr()).expect("the secondary tells EXPIRE");
    assert!(
        0 < second && second <= first && first <= soa_expire,
        "{first} then {second}"
    );
    drop((heron, primary));
    std::fs::remove_dir_all(dir).unwrap();
}

/// `[secondary] min-expire` bounds what a primary tells by EDNS EXPIRE
/// too: Heron, Knot and BIND primaries tell their SOA's expire, and a
/// zone whose SOA says seconds expired seconds into an outage whatever
/// the floor said.
#[test]
fn min_expire_bounds_the_expire_a_primary_tells() {
    let dir = work_dir("min-expire-edns");
    let zone_file = dir.join("primary.zone");
    // refresh 1 s, retry 1 s, expire 5 s.
    let text = zone_text(1, "").replace("1 3600 600 86400 60", "1 1 1 5 60");
    std::fs::write(&zone_file, text).unwrap();
    let (primary_port, secondary_port) = (free_port(), free_port());
    let primary = start(
        primary_port,
        &primary_config(primary_port, &zone_file, secondary_port),
    );
    assert_eq!(expire_of(primary.addr()), Some(5), "the primary tells it");
    let bounds = "[secondary]\nmin-refresh = 1\nmin-retry = 1\nmin-expire = 600\n";
    let config = secondary_config(secondary_port, primary.addr(), &dir.join("k"), bounds);
    let heron = start(secondary_port, &config);
    let left = expire_of(heron.addr()).expect("the secondary tells EXPIRE");
    assert!((590..=600).contains(&left), "{left}\n{}", heron.log());
    drop((heron, primary));
    std::fs::remove_dir_all(dir).unwrap();
}

/// RFC 7314: a secondary of a secondary expires with its primary's copy.
/// The second secondary transfers some seconds after the first: were it
/// to count the SOA's expire from its own transfer, it would outlive the
/// first by those seconds; told EXPIRE, it expires when the first does.
#[test]
fn a_secondary_of_a_secondary_expires_with_it() {
    let HeronPrimary {
        dir,
        primary,
        secondary_port,
        ..
    } = HeronPrimary::start("expire-chain");
    let config = secondary_config(secondary_port, primary.addr(), &dir.join("first.kept"), "")
        + &format!("allow-transfer = [\"127.0.0.1 key {KEY}\"]\n");
    let first = start(secondary_port, &config);
    std::thread::sleep(Duration::from_secs(4));
    let second_port = free_port();
    let config = secondary_config(second_port, first.addr(), &dir.join("second.kept"), "");
    let second = start(second_port, &config);
    let first_left = expire_of(first.addr()).expect("the first tells EXPIRE");
    let second_left = expire_of(second.addr()).expect("the second tells EXPIRE");
    // Whole seconds each, read one after the other: at most one apart.
    assert!(
        second_left <= first_left + 1 && first_left < 86_400,
        "first {first_left}, second {second_left}"
    );
    drop((second, first, primary));
    std::fs::remove_dir_all(dir).unwrap();
}

/// A fake primary of zones at serial 1, and a folder for a secondary of
/// them (removed when dropped).
struct FakeSetup {
    dir: PathBuf,
    zones: Vec<String>,
    primary: FakePrimary,
}

impl FakeSetup {
    fn new(tag: &str, zones: usize) -> FakeSetup {
        let zones: Vec<String> = (0..zones).map(|i| format!("z{i}.fake.test")).collect();
        let names: Vec<&str> = zones.iter().map(String::as_str).collect();
        FakeSetup {
            dir: work_dir(tag),
            primary: FakePrimary::start(&names, 1),
            zones,
        }
    }

    /// A Heron secondary of the zones on `port`, all from the primary (no
    /// key), with `settings` in its `[secondary]` table. It serves
    /// `ready.test` from a file of its own, so that it is ready before any
    /// transfer; its last table is the `[[zone-group]]` of the zones, so
    /// keys appended to the text go there.
    fn config(&self, port: u16, settings: &str) -> String {
        let ready = self.dir.join("ready.zone");
        let text = "$ORIGIN ready.test.\n$TTL 300\n@ SOA ns h 1 3600 600 86400 60\n@ NS ns\nns A 192.0.2.1\n";
        std::fs::write(&ready, text).unwrap();
        let origins: Vec<String> = self.zones.iter().map(|z| format!("\"{z}\"")).collect();
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n[secondary]\n{settings}\n\
             [[zone]]\norigin = \"ready.test\"\nfile = \"{}\"\n\
             [[zone-group]]\norigins = [{}]\nfile = \"{}/{{zone}}.kept\"\nprimaries = [\"{}\"]\n",
            ready.display(),
            origins.join(", "),
            self.dir.display(),
            self.primary.addr()
        )
    }

    /// A secondary on a free port with [`FakeSetup::config`] and `extra`
    /// appended.
    fn secondary(&self, settings: &str, extra: &str) -> ServerProcess {
        let port = free_port();
        let config = self.config(port, settings) + extra;
        start_serving(port, "ready.test", &config)
    }

    /// Whether `addr` answers `serial` for every zone.
    fn all_at(&self, addr: SocketAddr, serial: u32) -> bool {
        self.zones
            .iter()
            .all(|z| zone_serial(addr, z) == Some(serial))
    }
}

impl Drop for FakeSetup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A primary whose SOA says a newer serial but whose zone is older (its
/// IXFR refused, its AXFR older than the version served) does not roll
/// the zone back: the check fails and the zone is kept, as BIND keeps it
/// (black-box finding: the older zone was installed).
#[test]
fn an_older_zone_behind_a_newer_soa_is_not_taken() {
    let setup = FakeSetup::new("older-behind-soa", 1);
    let primary = &setup.primary;
    primary.set_serial(40);
    let heron = setup.secondary("", "");
    let sec = heron.addr();
    assert!(eventually(|| setup.all_at(sec, 40)), "{}", heron.log());
    primary.set_ixfr(IxfrAnswer::Refused);
    primary.set_serial(2);
    primary.set_soa_serial(Some(60));
    let zone = &setup.zones[0];
    assert_eq!(notify_from(LOCALHOST, sec, zone, None), Rcode::NOERROR);
    let refused = "its serial 2 is not newer than the 40 served";
    assert!(
        eventually(|| heron.log().contains(refused)),
        "{}",
        heron.log()
    );
    assert_eq!(zone_serial(sec, zone), Some(40), "{}", heron.log());
}

/// A NOTIFY from the second primary makes the check ask that primary
/// first, as BIND and Knot do: it has the serial it announced, where the
/// first has not yet (black-box finding: only the first was asked, "up to
/// date", and the zone stayed behind for ever).
#[test]
fn a_notify_from_the_second_primary_is_fetched_from_it() {
    let setup = FakeSetup::new("notify-second", 1);
    let zone = &setup.zones[0];
    let second_ip = Ipv4Addr::new(127, 0, 0, 2);
    let second = FakePrimary::start_on(second_ip, &[zone], 1);
    let port = free_port();
    let first = setup.primary.addr();
    let config = setup.config(port, "").replace(
        &format!("primaries = [\"{first}\"]"),
        &format!("primaries = [\"{first}\", \"{}\"]", second.addr()),
    );
    let heron = start_serving(port, "ready.test", &config);
    let sec = heron.addr();
    assert!(eventually(|| setup.all_at(sec, 1)), "{}", heron.log());
    second.set_serial(2);
    assert_eq!(
        notify_from(IpAddr::V4(second_ip), sec, zone, None),
        Rcode::NOERROR
    );
    assert!(eventually(|| setup.all_at(sec, 2)), "{}", heron.log());
    assert!(second.count(RType::SOA) >= 1, "{:?}", second.seen());
    assert!(
        heron
            .log()
            .contains(&format!("from {} to serial 2", second.addr())),
        "{}",
        heron.log()
    );
}

/// A primary whose IXFR answer is refused, or broken, makes the
/// secondary say so and fall back to AXFR, which brings the new serial.
#[test]
fn an_ixfr_refused_or_broken_falls_back_to_axfr_and_says_so() {
    for (ixfr, tag, why) in [
        (IxfrAnswer::Refused, "ixfr-refused", "REFUSED"),
        (IxfrAnswer::Broken, "ixfr-broken", ""),
    ] {
        let setup = FakeSetup::new(tag, 1);
        let primary = &setup.primary;
        primary.set_ixfr(ixfr);
        let heron = setup.secondary("", "");
        let sec = heron.addr();
        assert!(eventually(|| setup.all_at(sec, 1)), "{}", heron.log());

        primary.set_serial(2);
        let notified = notify_from(LOCALHOST, sec, &setup.zones[0], None);
        assert_eq!(notified, Rcode::NOERROR);
        assert!(
            eventually(|| setup.all_at(sec, 2)),
            "{ixfr:?}: {}",
            heron.log()
        );
        let log = heron.log();
        let from = primary.addr();
        let fell_back = format!("IXFR from {from} failed (");
        assert!(
            log.contains(&fell_back) && log.contains("trying AXFR") && log.contains(why),
            "{ixfr:?}: {log}"
        );
        assert!(
            log.contains(&format!("AXFR from {from} to serial 2")),
            "{log}"
        );
        let transfers: Vec<RType> = primary
            .seen()
            .iter()
            .map(|s| s.qtype)
            .filter(|&t| t != RType::SOA)
            .collect();
        let expected = [RType::AXFR, RType::IXFR, RType::AXFR];
        assert_eq!(transfers, expected, "{ixfr:?}");
    }
}

/// A primary whose serial went back (restored from a backup): the check
/// fails with the reason, the zone expires on time, then takes the
/// primary's version, as BIND, Knot and NSD do. It counted as a good
/// check and the zone stayed at a serial no primary had, forever.
#[test]
fn a_primary_whose_serial_went_back_lets_the_zone_expire_then_gives_its_version() {
    a_primary_not_newer_lets_the_zone_expire("serial-back", 10, "is older than ours, 20");
}

/// A primary whose serial is 2^31 from ours, which RFC 1982 leaves
/// neither newer nor older, fails the check the same way (black-box
/// finding DJ-3: it counted as a good check and the zone never expired).
#[test]
fn a_primary_serial_2_to_the_31_away_lets_the_zone_expire_too() {
    let apart = 20 + (1u32 << 31);
    let said = "is 2^31 from ours, 20: neither newer nor older";
    a_primary_not_newer_lets_the_zone_expire("serial-apart", apart, said);
}

/// The zone at serial 20; its primary then says `serial`: the check fails
/// saying `why`, the zone expires on time and then takes that version.
fn a_primary_not_newer_lets_the_zone_expire(tag: &str, serial: u32, why: &str) {
    let setup = FakeSetup::new(tag, 1);
    let primary = &setup.primary;
    primary.set_timers(1, 1, 6);
    primary.set_serial(20);
    let bounds = "min-refresh = 1\nmin-retry = 1\nmin-expire = 1\n";
    let port = free_port();
    let (config, socket) = with_control(&setup, port, bounds);
    let heron = start_serving(port, "ready.test", &config);
    let sec = heron.addr();
    assert!(eventually(|| setup.all_at(sec, 20)), "{}", heron.log());
    primary.set_serial(serial);
    let said = format!("{}: its serial {serial} {why}", primary.addr());
    assert!(heron.wait_for_log(&said), "{}", heron.log());
    // Shown as up, with the serial it said (black-box finding: "down",
    // and the metric kept ours).
    let row = zone_status(&socket, &setup.zones[0]);
    assert_eq!(row["primary_serial"], serial, "{row}");
    assert_eq!(row["primaries"][0]["reachable"], true, "{row}");
    let error = row["primaries"][0]["last_error"].as_str().unwrap_or("");
    assert!(error.contains(why), "{row}");
    let zone = &setup.zones[0];
    let expired_first = eventually_within(Duration::from_secs(20), || {
        rcode(sec, &format!("www.{zone}")) == Some(Rcode::SERVFAIL) || setup.all_at(sec, serial)
    });
    assert!(expired_first, "{}", heron.log());
    assert!(
        eventually_within(Duration::from_secs(20), || setup.all_at(sec, serial)),
        "{}",
        heron.log()
    );
    assert!(heron.log().contains("zone expired"), "{}", heron.log());
}

/// `heron ctl` with `args`, on the control socket `socket`.
fn ctl_at(socket: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(heron())
        .args(["ctl", "--socket"])
        .arg(socket)
        .args(args)
        .output()
        .unwrap()
}

/// An IXFR the primary never answers leaves the primary alone: no AXFR is
/// piled on it, also when the check was an operator's refresh, which
/// asks a primary left alone all the same (black-box finding AV-5: the
/// refresh was followed by an AXFR at once, though the docs say none);
/// `heron ctl retransfer` is the way to ask for the AXFR.
#[test]
fn an_ixfr_that_times_out_is_followed_by_no_axfr() {
    let setup = FakeSetup::new("ixfr-silent", 1);
    let primary = &setup.primary;
    let port = free_port();
    let socket = setup.dir.join("control.sock");
    let control = format!("workers = 1\ncontrol = \"{}\"\n", socket.display());
    let config = setup
        .config(port, "timeout = 2")
        .replacen("workers = 1\n", &control, 1);
    let server = start_serving(port, "ready.test", &config);
    let sec = server.addr();
    assert!(eventually(|| setup.all_at(sec, 1)), "{}", server.log());
    primary.set_ixfr(IxfrAnswer::Silent);
    primary.set_serial(2);
    let zone = &setup.zones[0];
    let out = ctl_at(&socket, &["refresh", zone]);
    assert!(!out.status.success(), "{out:?}");
    let transfers: Vec<RType> = (primary.seen().iter())
        .map(|s| s.qtype)
        .filter(|&t| t != RType::SOA)
        .collect();
    assert_eq!(transfers.first(), Some(&RType::AXFR), "{transfers:?}");
    assert!(
        !transfers[1..].contains(&RType::AXFR),
        "{transfers:?}\n{}",
        server.log()
    );
    assert!(transfers.contains(&RType::IXFR), "{transfers:?}");
    assert_eq!(zone_serial(sec, zone), Some(1));
}

/// An IXFR that adds records the zone holds already is taken (they change
/// nothing) and said once per transfer, with the zone, the primary, the
/// serial and how many (issue 42, 9c); an IXFR without them says nothing.
#[test]
fn an_ixfr_re_adding_records_is_taken_and_logged_once_per_transfer() {
    let setup = FakeSetup::new("ixfr-re-add", 1);
    let primary = &setup.primary;
    primary.set_ixfr(IxfrAnswer::ReAdd);
    let heron = setup.secondary("", "");
    let sec = heron.addr();
    assert!(eventually(|| setup.all_at(sec, 1)), "{}", heron.log());
    let zone = &setup.zones[0];
    let from = primary.addr();
    let said = "records the zone held already";
    for serial in [2, 3, 4] {
        if serial == 4 {
            primary.set_ixfr(IxfrAnswer::Step);
        }
        primary.set_serial(serial);
        assert_eq!(notify_from(LOCALHOST, sec, zone, None), Rcode::NOERROR);
        assert!(eventually(|| setup.all_at(sec, serial)), "{}", heron.log());
    }
    let log = heron.log();
    for serial in [2, 3] {
        let line = format!(
            "zone {zone}.: the IXFR from {from} to serial {serial} added 2 records the zone \
             held already"
        );
        assert_eq!(log.matches(&line).count(), 1, "{line}: {log}");
    }
    assert_eq!(
        log.matches(said).count(),
        2,
        "serial 4 adds nothing held: {log}"
    );
    assert!(!log.contains("trying AXFR"), "{log}");
    let transfers: Vec<RType> = (primary.seen().iter())
        .map(|s| s.qtype)
        .filter(|&t| t != RType::SOA)
        .collect();
    let expected = [RType::AXFR, RType::IXFR, RType::IXFR, RType::IXFR];
    assert_eq!(transfers, expected);
}

/// A secondary restarted with a kept copy checked most of a refresh
/// interval ago checks when that interval ends: neither at once nor a
/// whole interval after the restart, and transfers nothing.
#[test]
fn a_restarted_secondary_resumes_its_timers_from_the_kept_copy() {
    let setup = FakeSetup::new("resume", 1);
    let (zone, primary) = (&setup.zones[0], &setup.primary);
    let refresh = Duration::from_secs(3600);
    let port = free_port();
    let config = setup.config(port, "");
    let mut heron = start_serving(port, "ready.test", &config);
    let kept = setup.dir.join(format!("{zone}.kept"));
    assert!(eventually(|| kept.exists()), "{}", heron.log());
    heron.terminate();

    // Last checked 6 s short of a refresh interval ago.
    let checked = SystemTime::now() - refresh + Duration::from_secs(6);
    let file = std::fs::File::options().append(true).open(&kept).unwrap();
    file.set_modified(checked).unwrap();
    let due = checked + refresh;
    let before = primary.seen().len();
    let heron = start_serving(port, "ready.test", &config);
    assert_eq!(zone_serial(heron.addr(), zone), Some(1));
    assert!(
        heron.log().contains("serving kept serial 1"),
        "{}",
        heron.log()
    );
    assert!(
        eventually_within(Duration::from_secs(60), || primary.seen().len() > before),
        "no check after the restart: {}",
        heron.log()
    );
    let after: Vec<_> = primary.seen().split_off(before);
    assert_eq!(
        after[0].qtype,
        RType::SOA,
        "a check, not a transfer: {after:?}"
    );
    // The file's time has whole-second precision on some file systems.
    let checked_at = after[0].at + Duration::from_secs(1);
    assert!(
        checked_at >= due,
        "checked {:?} before it was due",
        due.duration_since(after[0].at).unwrap_or_default()
    );
    assert!(after.iter().all(|s| s.qtype == RType::SOA), "{after:?}");
}

/// `heron ctl zone-status ZONE --json` through `socket`: the zone's row.
fn zone_status(socket: &Path, zone: &str) -> serde_json::Value {
    let status = std::process::Command::new(xfr_common::heron())
        .args(["ctl", "--socket"])
        .arg(socket)
        .args(["zone-status", zone, "--json"])
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    status["data"][0].clone()
}

/// [`FakeSetup::config`] with a control socket in the setup's folder.
fn with_control(setup: &FakeSetup, port: u16, settings: &str) -> (String, PathBuf) {
    let socket = setup.dir.join("heron.sock");
    let control = format!("workers = 1\ncontrol = \"{}\"\n", socket.display());
    let config = setup
        .config(port, settings)
        .replacen("workers = 1\n", &control, 1);
    (config, socket)
}

/// A restarted secondary shows when its kept copy was transferred, not
/// the kept file's date: that date is moved back (to count the expiry
/// from the last good check, or a refresh interval back once a newer
/// serial is seen), and zone-status showed transfers that never happened
/// (black-box finding).
#[test]
fn a_restarted_secondary_shows_when_it_transferred_not_the_files_date() {
    let setup = FakeSetup::new("transferred-at", 1);
    let zone = &setup.zones[0];
    let port = free_port();
    let (config, socket) = with_control(&setup, port, "");
    let before = unix_now();
    let mut heron = start_serving(port, "ready.test", &config);
    let kept = setup.dir.join(format!("{zone}.kept"));
    assert!(eventually(|| kept.exists()), "{}", heron.log());
    heron.terminate();

    let dated = SystemTime::now() - Duration::from_secs(3000);
    let file = std::fs::File::options().append(true).open(&kept).unwrap();
    file.set_modified(dated).unwrap();
    let heron = start_serving(port, "ready.test", &config);
    assert_eq!(zone_serial(heron.addr(), zone), Some(1));
    let row = zone_status(&socket, zone);
    let transferred = row["transferred_at"].as_u64().expect("a time");
    assert!(transferred >= before, "{row} {}", heron.log());
}

/// A secondary whose primary answers a newer serial but fails every
/// transfer keeps its expiry across a restart: it counts from the last
/// good check, not from the kept file's date one refresh interval before
/// the last check, which moved it on at each restart and kept stale data
/// served for ever (black-box finding).
#[test]
fn a_restart_keeps_the_expiry_of_a_zone_whose_transfers_fail() {
    let setup = FakeSetup::new("restart-expiry", 1);
    let (primary, zone) = (&setup.primary, &setup.zones[0]);
    primary.set_timers(1, 1, 600);
    let port = free_port();
    let bounds = "min-refresh = 1\nmin-retry = 1\nmax-transfer-records = 50\n";
    let (config, socket) = with_control(&setup, port, bounds);
    let mut heron = start_serving(port, "ready.test", &config);
    assert!(
        eventually(|| setup.all_at(heron.addr(), 1)),
        "{}",
        heron.log()
    );
    let expiry = || zone_status(&socket, zone)["expire_at"].as_u64();
    let before = expiry().expect("an expiry");
    primary.set_padding(100);
    primary.set_serial(2);
    // Checks that see serial 2, each transfer failing (IXFR, then AXFR),
    // for several refresh intervals.
    let failed = |log: &str| log.matches("(max-transfer-records)").count();
    let failing = eventually(|| failed(&heron.log()) >= 12);
    assert!(failing, "{}", heron.log());
    // `refresh` says the zone was checked (black-box finding: "not
    // checked", although the primary answered its serial).
    let refresh = std::process::Command::new(xfr_common::heron())
        .args(["ctl", "--socket"])
        .arg(&socket)
        .args(["refresh", zone])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refresh.stdout);
    assert!(
        said.contains("checked, but serial 2 not transferred") && said.contains("records"),
        "{said}"
    );
    heron.terminate();
    let heron = start_serving(port, "ready.test", &config);
    assert_eq!(zone_serial(heron.addr(), zone), Some(1));
    // Files are dated to the second.
    let after = expiry().expect("an expiry");
    assert!(after <= before + 1, "{before} -> {after}: {}", heron.log());
}

/// 200 zones from one primary: transferred, then all changed and
/// announced, so checked and transferred again, over no more connections
/// than the concurrency bound plus the one for SOA checks.
#[test]
fn many_zones_from_one_primary_share_a_few_connections() {
    let setup = FakeSetup::new("reuse", 200);
    let primary = &setup.primary;
    let heron = setup.secondary("concurrency = 4", "");
    let sec = heron.addr();
    assert!(eventually(|| setup.all_at(sec, 1)), "{}", heron.log());

    primary.set_serial(2);
    for zone in &setup.zones {
        assert_eq!(notify_from(LOCALHOST, sec, zone, None), Rcode::NOERROR);
    }
    assert!(
        eventually_within(Duration::from_secs(60), || setup.all_at(sec, 2)),
        "{}",
        heron.log()
    );
    assert_eq!(primary.count(RType::AXFR), 200);
    assert_eq!(primary.count(RType::SOA), 200);
    assert_eq!(primary.count(RType::IXFR), 200);
    assert!(
        primary.connections() <= 4 + 1,
        "{} connections for 600 exchanges",
        primary.connections()
    );
}

/// `[secondary] concurrency`: however many zones want a transfer at
/// once, no more than that many are in flight.
#[test]
fn transfers_in_flight_never_exceed_the_concurrency_bound() {
    let setup = FakeSetup::new("concurrency", 20);
    let primary = &setup.primary;
    // Each transfer takes a while, so that the others pile up behind it.
    primary.set_hold(Duration::from_millis(300));
    let heron = setup.secondary("concurrency = 3", "");
    assert!(
        eventually_within(Duration::from_secs(60), || setup.all_at(heron.addr(), 1)),
        "{}",
        heron.log()
    );
    assert_eq!(primary.count(RType::AXFR), 20);
    let most = primary.most_transfers_at_once();
    assert!(most <= 3, "{most} transfers at once");
    assert!(
        most >= 2,
        "transfers did not overlap: the bound was not tested"
    );
}

/// `[secondary] concurrency` lowered by a reload: the reload applies it
/// and the next reload still works (black-box finding: the reload's
/// thread panicked, and every reload after it, until a restart).
#[test]
fn a_reload_lowering_the_concurrency_leaves_reloads_working() {
    let file = temp_zone("fewer-slots", &zone_text(1, ""));
    let port = free_port();
    let config = primary_config(port, &file, free_port());
    let heron = start(port, &config);
    let path = heron.dir().join("heron.toml");
    std::fs::write(&path, format!("{config}[secondary]\nconcurrency = 3\n")).unwrap();
    heron.reload();
    assert!(heron.wait_for_log("reload done"), "{}", heron.log());
    std::fs::write(&file, zone_text(2, "")).unwrap();
    heron.reload();
    assert!(
        eventually(|| soa_serial(heron.addr()) == Some(2)),
        "{}",
        heron.log()
    );
    assert!(!heron.log().contains("panicked"), "{}", heron.log());
}

/// NOTIFY is taken only from the addresses allowed: by default the
/// primaries', else those of `allow-notify`. Others are refused and logged.
#[test]
fn a_notify_from_an_address_outside_allow_notify_is_refused_and_logged() {
    let setup = FakeSetup::new("notify-acl", 1);
    let zone = &setup.zones[0];
    let stranger: IpAddr = "127.0.0.2".parse().unwrap();
    let friend: IpAddr = "127.0.0.3".parse().unwrap();
    let refused = |who: IpAddr| format!("NOTIFY (address not allowed) from {who}:");

    let heron = setup.secondary("", "");
    let sec = heron.addr();
    assert_eq!(notify_from(stranger, sec, zone, None), Rcode::REFUSED);
    assert_eq!(notify_from(LOCALHOST, sec, zone, None), Rcode::NOERROR);
    let log = heron.log();
    assert!(
        log.contains(&refused(stranger)) && log.contains("refused (REFUSED)"),
        "{log}"
    );
    drop(heron);

    // Listed in allow-notify: that address only, not even the primary's.
    let heron = setup.secondary("", &format!("allow-notify = [\"{friend}\"]\n"));
    let sec = heron.addr();
    assert_eq!(notify_from(friend, sec, zone, None), Rcode::NOERROR);
    assert_eq!(notify_from(stranger, sec, zone, None), Rcode::REFUSED);
    assert_eq!(notify_from(LOCALHOST, sec, zone, None), Rcode::REFUSED);
    // One line per reason per 10 s: the first refusal is told, the
    // second only counted (`serve.rs` tests the count).
    let log = heron.log();
    assert!(log.contains(&refused(stranger)), "{log}");
    assert!(!log.contains(&refused(LOCALHOST)), "{log}");
}

/// A primary of 200 zones that hangs up on every connection is left
/// alone between tries: its zones do not each open connections to it.
/// Once it answers again, every zone is served.
#[test]
fn a_primary_that_fails_is_not_hammered_by_its_zones() {
    let setup = FakeSetup::new("hammer", 200);
    let primary = &setup.primary;
    primary.set_hang_up(true);
    let heron = setup.secondary("concurrency = 4", "");
    assert!(eventually(|| primary.connections() > 0), "{}", heron.log());
    // Every zone wants its first transfer now and keeps retrying; each
    // retry on a connection of its own would be 200 at once.
    std::thread::sleep(Duration::from_secs(3));
    let tries = primary.connections();
    assert!(tries < 50, "{tries} connections from 200 zones in 3 s");
    assert!(
        heron.log().contains("refresh from"),
        "failures are logged: {}",
        heron.log()
    );

    primary.set_hang_up(false);
    assert!(
        eventually_within(Duration::from_secs(90), || setup.all_at(heron.addr(), 1)),
        "{}",
        heron.log()
    );
}

/// The peak resident memory of process `pid` (`VmHWM`), in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A primary that streams far more records than `max-transfer-records`
/// (a hostile one, or anyone in the path without TSIG): the secondary
/// stops reading at the limit, IXFR and AXFR alike, says which zone,
/// primary and limit, drops what it got, keeps serving the version it
/// had, and its memory stays bounded by the limit, not the stream.
#[test]
fn a_transfer_past_its_limit_is_dropped_and_the_old_version_kept() {
    let setup = FakeSetup::new("xfr-limit", 1);
    let (primary, zone) = (&setup.primary, &setup.zones[0]);
    let mut heron = setup.secondary("max-transfer-records = 10000", "");
    let sec = heron.addr();
    assert!(eventually(|| setup.all_at(sec, 1)), "{}", heron.log());
    let pid = heron.pid().expect("running");
    let before = peak_rss_kib(pid);

    // 3,000,000 records: about 90 MB on the wire, several hundred MB held.
    let streamed = 3_000_000;
    primary.set_padding(streamed);
    primary.set_serial(2);
    assert_eq!(notify_from(LOCALHOST, sec, zone, None), Rcode::NOERROR);
    let from = primary.addr();
    let stopped = format!(
        "zone {zone}.: refresh from {from} failed: AXFR: transfer stopped at more than 10000 records (max-transfer-records)"
    );
    assert!(
        eventually(|| heron.log().contains(&stopped)),
        "{} {:?} {}",
        heron.log(),
        primary.seen(),
        primary.padding_sent()
    );
    let log = heron.log();
    assert!(
        log.contains(&format!(
            "zone {zone}.: IXFR from {from} failed (transfer stopped at more than 10000 records"
        )),
        "the IXFR is bounded the same way: {log}"
    );
    assert_eq!(zone_serial(sec, zone), Some(1), "the old version is served");
    let sent = primary.padding_sent();
    assert!(
        sent < streamed / 3,
        "{sent} records sent: not read to the end"
    );
    let grown = peak_rss_kib(pid).saturating_sub(before);
    assert!(grown < 64 << 10, "peak RSS grew by {grown} KiB");
    assert!(heron.is_running());
}

/// A primary that answered is shown up when the transfer fails for a
/// reason of ours: past our `max-transfer-records`, or a key it does not
/// sign with. The last error says why. Shown `UP no`, "reachable": false,
/// it sent the operator looking for a network fault (black-box finding).
#[test]
fn a_primary_that_answered_is_up_when_the_transfer_fails_for_our_reasons() {
    let setup = FakeSetup::new("answered-limit", 1);
    setup.primary.set_padding(100);
    let port = free_port();
    let (config, socket) = with_control(&setup, port, "max-transfer-records = 50");
    let heron = start_serving(port, "ready.test", &config);
    let said = "more than 50 records (max-transfer-records)";
    assert!(heron.wait_for_log(said), "{}", heron.log());
    let row = zone_status(&socket, &setup.zones[0]);
    assert_eq!(row["primaries"][0]["reachable"], true, "{row}");
    let error = row["primaries"][0]["last_error"].as_str().unwrap_or("");
    assert!(error.contains(said), "{row}");
    drop(heron);

    // The fake primary knows no key: its answers come unsigned.
    let setup = FakeSetup::new("answered-key", 1);
    let port = free_port();
    let (config, socket) = with_control(&setup, port, "");
    let addr = setup.primary.addr();
    let config = config.replace(&format!("\"{addr}\"]"), &format!("\"{addr} key {KEY}\"]"));
    let config = config + &key_block(SECRET);
    let heron = start_serving(port, "ready.test", &config);
    assert!(heron.wait_for_log("TSIG"), "{}", heron.log());
    let row = zone_status(&socket, &setup.zones[0]);
    assert_eq!(row["primaries"][0]["reachable"], true, "{row}");
    let error = row["primaries"][0]["last_error"].as_str().unwrap_or("");
    assert!(error.contains("TSIG"), "{row}");
}

/// Secondary zones come and go with a reload: one added to the file is
/// transferred and answered, the others untouched; removed, it answers
/// REFUSED and its kept copy is deleted; re-pointed to another primary,
/// it follows that one.
#[test]
fn a_reload_adds_removes_and_repoints_secondary_zones() {
    let setup = FakeSetup::new("reload-secondaries", 2);
    let (first, second) = (&setup.zones[0], &setup.zones[1]);
    let port = free_port();
    let all = setup.config(port, "");
    // At start only the first zone is configured.
    let only_first = all.replace(&format!(", \"{second}\""), "");
    assert_ne!(only_first, all);
    let heron = start_serving(port, "ready.test", &only_first);
    let sec = heron.addr();
    let config = heron.dir().join("heron.toml");
    assert!(
        eventually(|| zone_serial(sec, first) == Some(1)),
        "{}",
        heron.log()
    );
    assert_eq!(rcode(sec, second), Some(Rcode::REFUSED));
    let first_name = Name::parse(first).unwrap();
    let transfers_of_first = || {
        let seen = setup.primary.seen();
        let of_first = seen.iter().filter(|s| s.zone == first_name);
        of_first.filter(|s| s.qtype == RType::AXFR).count()
    };
    let first_transfers = transfers_of_first();

    std::fs::write(&config, &all).unwrap();
    heron.reload();
    assert!(
        eventually(|| zone_serial(sec, second) == Some(1)),
        "{}",
        heron.log()
    );
    let kept = setup.dir.join(format!("{second}.kept"));
    assert!(
        eventually(|| kept_serial(&kept) == Some(1)),
        "kept copy written"
    );
    assert_eq!(
        transfers_of_first(),
        first_transfers,
        "other zones untouched"
    );

    std::fs::write(&config, &only_first).unwrap();
    heron.reload();
    assert!(
        eventually(|| rcode(sec, second) == Some(Rcode::REFUSED)),
        "{}",
        heron.log()
    );
    assert!(eventually(|| !kept.exists()), "kept copy deleted");
    assert_eq!(zone_serial(sec, first), Some(1), "still served");

    // Re-pointed: the first zone now comes from another primary, at serial 7.
    let other = FakePrimary::start(&[first.as_str()], 7);
    let repointed =
        only_first.replace(&setup.primary.addr().to_string(), &other.addr().to_string());
    std::fs::write(&config, &repointed).unwrap();
    heron.reload();
    assert!(
        eventually(|| zone_serial(sec, first) == Some(7)),
        "{}",
        heron.log()
    );

    // Given another file (black-box finding: nothing was written there
    // until the next serial, and a restart before it answered SERVFAIL):
    // the version served is written there at once, the old copy goes.
    let (old_copy, new_copy) = (
        setup.dir.join(format!("{first}.kept")),
        setup.dir.join(format!("{first}.moved")),
    );
    assert!(
        eventually(|| kept_serial(&old_copy) == Some(7)),
        "{}",
        heron.log()
    );
    let moved = repointed.replace("{zone}.kept", "{zone}.moved");
    assert_ne!(moved, repointed);
    std::fs::write(&config, &moved).unwrap();
    heron.reload();
    assert!(
        eventually(|| kept_serial(&new_copy) == Some(7)),
        "{}",
        heron.log()
    );
    assert!(
        eventually(|| !old_copy.exists()),
        "the old copy is not left behind"
    );
    assert_eq!(zone_serial(sec, first), Some(7), "still served");
}

/// With `keep-removed = true` a removed zone's kept copy stays on disk.
#[test]
fn keep_removed_keeps_the_copy_of_a_removed_secondary_zone() {
    let setup = FakeSetup::new("keep-removed", 1);
    let zone = &setup.zones[0];
    let heron = setup.secondary("keep-removed = true", "");
    let sec = heron.addr();
    let kept = setup.dir.join(format!("{zone}.kept"));
    assert!(
        eventually(|| kept_serial(&kept) == Some(1)),
        "{}",
        heron.log()
    );
    let config = heron.dir().join("heron.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    let without = &text[..text.find("[[zone-group]]").unwrap()];
    std::fs::write(&config, without).unwrap();
    heron.reload();
    assert!(
        eventually(|| rcode(sec, zone) == Some(Rcode::REFUSED)),
        "{}",
        heron.log()
    );
    assert_eq!(kept_serial(&kept), Some(1), "kept");
}

/// A secondary zone whose `file` names a file Heron never wrote (the
/// operator's own, by a typo; its primary silent, so nothing was written
/// over it yet), taken out again: the file is left where it is. Only a
/// copy Heron wrote and sealed is deleted with its zone (black-box
/// finding BQ-11: the operator's file was deleted).
#[test]
fn removing_a_secondary_leaves_a_file_heron_never_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready.zone");
    std::fs::write(&ready, zone_text(1, "").replace("xfr.test", "ready.test")).unwrap();
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "the operator's notes\n").unwrap();
    // Files beside it of another server's (BIND's journal and signed
    // copy): left too (regression hunt BR-3).
    let beside = ["notes.txt.jnl", "notes.txt.signed", "notes.txt.ceded"];
    for name in beside {
        std::fs::write(dir.path().join(name), "not Heron's\n").unwrap();
    }
    let silent = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let port = free_port();
    let ready_zone = format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n\
         [[zone]]\norigin = \"ready.test\"\nfile = \"{}\"\n",
        ready.display()
    );
    let with_typo = format!(
        "{ready_zone}[[zone]]\norigin = \"typo.test\"\nfile = \"{}\"\nprimaries = [\"{silent}\"]\n",
        notes.display()
    );
    let heron = start_serving(port, "ready.test", &with_typo);
    std::fs::write(heron.dir().join("heron.toml"), &ready_zone).unwrap();
    heron.reload();
    assert!(
        heron.wait_for_log("not a copy Heron wrote"),
        "{}",
        heron.log()
    );
    let text = std::fs::read_to_string(&notes).unwrap_or_else(|e| panic!("{e}: {}", heron.log()));
    assert_eq!(text, "the operator's notes\n");
    assert!(
        beside.iter().all(|name| dir.path().join(name).exists()),
        "{}",
        heron.log()
    );
}

/// A restarted secondary answers from its kept copies from its first
/// answer on: none of its zones is SERVFAIL while they are handed over
/// (black-box finding: 75% of queries at once with 100,000 zones).
#[test]
fn a_restarted_secondary_serves_every_kept_copy_from_its_first_answer() {
    let setup = FakeSetup::new("kept-at-once", 2000);
    let heron = setup.secondary("", "");
    let (addr, config) = (heron.addr(), heron.dir().join("heron.toml"));
    let config = std::fs::read_to_string(config).unwrap();
    let kept = |z: &String| kept_serial(&setup.dir.join(format!("{z}.kept"))) == Some(1);
    assert!(
        eventually(|| setup.zones.iter().all(kept)),
        "{}",
        heron.log()
    );
    drop(heron);
    let again = start_serving(addr.port(), "ready.test", &config);
    let servfail: Vec<&String> = (setup.zones.iter())
        .filter(|z| rcode(addr, z) != Some(Rcode::NOERROR))
        .collect();
    assert!(
        servfail.is_empty(),
        "{} not served: {:?}",
        servfail.len(),
        &servfail[..servfail.len().min(5)]
    );
    drop(again);
}

/// A secondary made a primary of its kept copy (the same `file`, no
/// `primaries`), as an operator promotes one whose primary is lost: the
/// file is kept, served, and served again after a restart (black-box
/// finding: the reload deleted it as a removed secondary's copy).
#[test]
fn a_secondary_promoted_to_primary_keeps_its_file() {
    let setup = FakeSetup::new("promote", 1);
    let zone = &setup.zones[0];
    let heron = setup.secondary("", "");
    let sec = heron.addr();
    let kept = setup.dir.join(format!("{zone}.kept"));
    assert!(
        eventually(|| kept_serial(&kept) == Some(1)),
        "{}",
        heron.log()
    );
    let config = heron.dir().join("heron.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    let group = &text[text.find("[[zone-group]]").unwrap()..];
    let promoted = format!(
        "{}[[zone]]\norigin = \"{zone}\"\nfile = \"{}\"\n",
        &text[..text.find("[[zone-group]]").unwrap()],
        kept.display()
    );
    assert!(group.contains("primaries"));
    std::fs::write(&config, &promoted).unwrap();
    heron.reload();
    assert!(
        eventually(|| heron.log().contains("reload done")),
        "{}",
        heron.log()
    );
    assert_eq!(
        kept_serial(&kept),
        Some(1),
        "the file is kept: {}",
        heron.log()
    );
    assert_eq!(zone_serial(sec, zone), Some(1), "served");
    drop(heron);
    let again = start_serving(sec.port(), "ready.test", &promoted);
    assert_eq!(zone_serial(again.addr(), zone), Some(1), "{}", again.log());
}

/// Source addresses (issue 27): a primary whose ACL allows only
/// 127.0.0.2 gives the zone to a secondary with `[xfr] source =
/// "127.0.0.2"` and refuses one without it; its NOTIFYs leave from
/// 127.0.0.3 (`via`), the only address the secondary takes them from.
#[test]
fn transfers_and_notifies_leave_from_their_source_addresses() {
    let dir = work_dir("source");
    let zone_file = dir.join("primary.zone");
    std::fs::write(&zone_file, zone_text(1, "")).unwrap();
    let (primary_port, secondary_port, plain_port) = (free_port(), free_port(), free_port());
    let primary_conf = primary_config(primary_port, &zone_file, secondary_port)
        .replace("127.0.0.1 key", "127.0.0.2 key")
        .replace(
            &format!("{secondary_port} key {KEY}"),
            &format!("{secondary_port} key {KEY} via 127.0.0.3"),
        );
    let primary = start(primary_port, &primary_conf);
    let notify_acl = format!("allow-notify = [\"127.0.0.3 key {KEY}\"]\n");
    let config = secondary_config(
        secondary_port,
        primary.addr(),
        &dir.join("k"),
        "[xfr]\nsource = \"127.0.0.2\"\n",
    ) + &notify_acl;
    let secondary = start(secondary_port, &config);
    let sec = secondary.addr();
    assert_eq!(
        zone_serial(sec, ORIGIN),
        Some(1),
        "transferred from 127.0.0.2"
    );

    // Without the source address: refused by the primary, nothing served.
    let plain = secondary_config(plain_port, primary.addr(), &dir.join("plain.kept"), "");
    let log = run_until_logged(&plain, &dir.join("plain.toml"), "refresh from");
    assert!(log.contains("REFUSED"), "{log}");
    assert!(!dir.join("plain.kept").exists(), "nothing kept: {log}");

    // The primary's NOTIFY comes from 127.0.0.3 and is taken.
    std::fs::write(&zone_file, zone_text(2, "")).unwrap();
    primary.reload();
    assert!(
        eventually(|| zone_serial(sec, ORIGIN) == Some(2)),
        "{}",
        secondary.log()
    );
    assert!(
        secondary
            .log()
            .contains("NOTIFY for xfr.test. from 127.0.0.3:"),
        "{}",
        secondary.log()
    );
    // Signed and from elsewhere: refused for the address.
    let elsewhere = notify_from(LOCALHOST, sec, ORIGIN, Some(SECRET));
    assert_eq!(elsewhere, Rcode::REFUSED, "only from 127.0.0.3");
    drop((secondary, primary));
    std::fs::remove_dir_all(dir).unwrap();
}

/// The same over IPv6: a primary (also on [::1]) that allows only ::1,
/// reached from the `[xfr] source` of that family.
#[test]
fn an_ipv6_primary_is_reached_from_the_ipv6_source_address() {
    let dir = work_dir("source6");
    let zone_file = dir.join("primary.zone");
    std::fs::write(&zone_file, zone_text(1, "")).unwrap();
    let (primary_port, secondary_port) = (free_port(), free_port());
    let primary_conf = primary_config(primary_port, &zone_file, secondary_port)
        .replace(
            &format!("listen = [\"127.0.0.1:{primary_port}\""),
            &format!("listen = [\"127.0.0.1:{primary_port}\", \"[::1]:{primary_port}\""),
        )
        .replace("127.0.0.1 key", "::1 key");
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        eprintln!("skipped: no IPv6 loopback");
        return;
    }
    let primary = start(primary_port, &primary_conf);
    let v6: SocketAddr = format!("[::1]:{primary_port}").parse().unwrap();
    let sources = "[xfr]\nsource = [\"127.0.0.2\", \"::1\"]\n";
    let config = secondary_config(secondary_port, v6, &dir.join("k"), sources);
    let secondary = start(secondary_port, &config);
    assert_eq!(
        zone_serial(secondary.addr(), ORIGIN),
        Some(1),
        "{}",
        primary.log()
    );
    drop((secondary, primary));
    std::fs::remove_dir_all(dir).unwrap();
}
