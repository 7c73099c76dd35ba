//! ZONEMD (RFC 8976) on load: a zone whose ZONEMD `ldns-signzone` made is
//! served; a reload whose records no longer match its ZONEMD is refused
//! (the old version stays served), logged with the zone's name and
//! counted in `heron_zone_zonemd_failures_total{zone}`; a later correct
//! version is taken; likewise for a version a secondary transfers in;
//! a policy's `zonemd` key makes a signed ZONEMD that ldns verifies.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use heron_testkit::{Primary, ServerKind, ServerProcess, eventually_within, free_port, soa_serial};

const ORIGIN: &str = "md.test";

fn heron() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_heron"))
}

/// Writes the zone at `serial` with `www` at `address`, with SHA-384 and
/// SHA-512 ZONEMD records computed by ldns-signzone, to `path` (by a
/// rename, so that the server sees a new file).
fn write_zone_with_zonemd(dir: &Path, path: &Path, serial: u32, address: &str) {
    let plain = dir.join("plain.zone");
    let text = format!(
        "$ORIGIN {ORIGIN}.\n$TTL 300\n@ SOA ns h {serial} 3600 600 86400 300\n@ NS ns\n\
         ns A 127.0.0.1\nwww A {address}\nMixed.Case TXT \"kept once\"\nMixed.Case TXT \"kept once\"\n"
    );
    std::fs::write(&plain, text).unwrap();
    let out = Command::new("ldns-signzone")
        .args(["-Z", "-z", "1:1", "-z", "1:2", "-o", ORIGIN])
        .arg(&plain)
        .output()
        .expect("ldns-signzone (ldnsutils) is installed");
    assert!(out.status.success(), "{out:?}");
    std::fs::rename(dir.join("plain.zone.signed"), path).unwrap();
}

fn metrics_text(addr: SocketAddr) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let request = b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\n\r\n";
    stream.write_all(request).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

fn zonemd_failures(addr: SocketAddr) -> Option<String> {
    let text = metrics_text(addr);
    let sample = format!("heron_zone_zonemd_failures_total{{zone=\"{ORIGIN}.\"}} ");
    let line = text.lines().find(|l| l.starts_with(&sample))?;
    Some(line[sample.len()..].to_string())
}

#[test]
fn a_reload_whose_zonemd_does_not_match_is_refused_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let zone = dir.path().join("md.test.zone");
    write_zone_with_zonemd(dir.path(), &zone, 1, "192.0.2.1");
    let metrics_port = free_port();
    let metrics = SocketAddr::from(([127, 0, 0, 1], metrics_port));
    let server = ServerProcess::heron_with_config(&heron(), ORIGIN, |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\n\
             [metrics]\nlisten = \"127.0.0.1:{metrics_port}\"\n\
             [[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\n",
            zone.display()
        )
    });
    assert_eq!(
        soa_serial(server.addr(), ORIGIN),
        Some(1),
        "{}",
        server.log()
    );
    assert_eq!(zonemd_failures(metrics), None, "no failure yet");

    // Serial 2 with its correct ZONEMD, then one record changed after the
    // digest was made: the ZONEMD's serial matches, its digest does not.
    write_zone_with_zonemd(dir.path(), &zone, 2, "192.0.2.2");
    let tampered = std::fs::read_to_string(&zone)
        .unwrap()
        .replace("192.0.2.2", "192.0.2.66");
    std::fs::write(dir.path().join("next"), tampered).unwrap();
    std::fs::rename(dir.path().join("next"), &zone).unwrap();
    server.reload();
    assert!(
        server.wait_for_log("zone md.test. serial 2: ZONEMD verification failed"),
        "{}",
        server.log()
    );
    assert!(server.log().contains("previous version is still served"));
    assert_eq!(soa_serial(server.addr(), ORIGIN), Some(1));
    assert_eq!(zonemd_failures(metrics).as_deref(), Some("1"));

    write_zone_with_zonemd(dir.path(), &zone, 3, "192.0.2.3");
    server.reload();
    let took = eventually_within(Duration::from_secs(10), || {
        soa_serial(server.addr(), ORIGIN) == Some(3)
    });
    assert!(took, "{}", server.log());
    assert_eq!(zonemd_failures(metrics).as_deref(), Some("1"));
}

/// `heron check-zone` and `heron check-config` refuse a zone whose ZONEMD
/// does not match, as `heron serve` does (they said OK, and the server
/// then refused to serve the zone), and pass one whose ZONEMD matches.
#[test]
fn the_check_commands_refuse_a_zonemd_that_does_not_match() {
    let dir = tempfile::tempdir().unwrap();
    let zone = dir.path().join("md.test.zone");
    write_zone_with_zonemd(dir.path(), &zone, 1, "192.0.2.1");
    let config = dir.path().join("heron.toml");
    let text = format!(
        "[[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\n",
        zone.display()
    );
    std::fs::write(&config, text).unwrap();
    let run = |args: &[&std::ffi::OsStr]| Command::new(heron()).args(args).output().unwrap();
    let check_zone = || run(&["check-zone".as_ref(), zone.as_os_str(), ORIGIN.as_ref()]);
    let check_config = || run(&["check-config".as_ref(), config.as_os_str()]);
    assert!(check_zone().status.success());
    assert!(check_config().status.success());
    let tampered = std::fs::read_to_string(&zone)
        .unwrap()
        .replace("192.0.2.1", "192.0.2.66");
    std::fs::write(&zone, tampered).unwrap();
    for out in [check_zone(), check_config()] {
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(!out.status.success(), "{said}");
        assert!(said.contains("ZONEMD verification failed"), "{said}");
    }
    // The error names the file, as every other check-zone error does.
    let said = String::from_utf8_lossy(&check_zone().stdout).into_owned();
    let named = format!("{}: error: ZONEMD verification failed", zone.display());
    assert!(said.contains(&named), "{said}");
}

/// The zone as `kdig` transfers it out by AXFR.
fn axfr_text(server: &ServerProcess, origin: &str) -> String {
    let addr = server.addr();
    let out = Command::new("/usr/bin/kdig")
        .arg(format!("@{}", addr.ip()))
        .args(["-p", &addr.port().to_string(), origin, "AXFR"])
        .args(["+nocomments", "+nostats"])
        .output()
        .expect("kdig runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success() && text.contains("RRSIG"), "{text}");
    text
}

#[test]
fn a_policy_with_zonemd_serves_a_signed_zonemd_that_ldns_verifies() {
    let origin = "edge.test.";
    let source =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/differential/edge.test.zone");
    let dir = tempfile::tempdir().unwrap();
    // Signed where Heron may write beside it (the note of where its keys
    // are), not in the source tree.
    let file = dir.path().join("edge.test.zone");
    std::fs::copy(source, &file).unwrap();
    let keys = dir.path().join("keys");
    for (hash, code) in [("sha384", " 1 1 "), ("sha512", " 1 2 ")] {
        let server = ServerProcess::heron_with_config(&heron(), origin, |port| {
            format!(
                "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n\
                 [[dnssec-policy]]\nname = \"p\"\ndenial = \"nsec3\"\nzonemd = \"{hash}\"\n\
                 [[zone]]\norigin = \"{origin}\"\nfile = \"{}\"\nallow-transfer = [\"127.0.0.1\"]\n\
                 dnssec-policy = \"p\"\nkey-directory = \"{}\"\n",
                file.display(),
                keys.display()
            )
        });
        let text = axfr_text(&server, origin);
        let zonemd = text.lines().find(|l| l.contains("\tZONEMD\t"));
        assert!(zonemd.is_some_and(|l| l.contains(code)), "{text}");
        assert!(
            text.contains("RRSIG\tZONEMD "),
            "the ZONEMD is signed: {text}"
        );
        let path = dir.path().join(format!("axfr-{hash}.zone"));
        std::fs::write(&path, &text).unwrap();
        // -ZZ: a valid ZONEMD must be there, and the zone signed.
        let out = Command::new("/usr/bin/ldns-verify-zone")
            .arg("-ZZ")
            .arg(&path)
            .output()
            .expect("ldns-verify-zone runs");
        let said = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "ldns-verify-zone -ZZ: {said}");
        assert!(said.contains("Zone is verified and complete"), "{said}");
    }
}

#[test]
fn a_transferred_version_whose_zonemd_does_not_match_is_refused_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("primary.zone");
    write_zone_with_zonemd(dir.path(), &file, 1, "192.0.2.1");
    let (heron_port, metrics_port) = (free_port(), free_port());
    let spec = Primary {
        origin: format!("{ORIGIN}."),
        file: file.clone(),
        secondary: SocketAddr::from(([127, 0, 0, 1], heron_port)),
        key: None,
        tls: None,
    };
    // Knot does not check ZONEMD unless told to: it serves what it is given.
    let primary = spec.start(ServerKind::Knot);
    let kept = dir.path().join("kept.zone");
    let socket = dir.path().join("control.sock");
    let config = format!(
        "[server]\nlisten = [\"127.0.0.1:{heron_port}\"]\nworkers = 1\ncontrol = \"{}\"\n\
         [metrics]\nlisten = \"127.0.0.1:{metrics_port}\"\n\
         [[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\nprimaries = [\"{}\"]\n",
        socket.display(),
        kept.display(),
        primary.addr()
    );
    let secondary = ServerProcess::heron_on_port(&heron(), heron_port, ORIGIN, &config)
        .unwrap_or_else(|log| panic!("{log}"));
    let metrics = SocketAddr::from(([127, 0, 0, 1], metrics_port));
    assert_eq!(soa_serial(secondary.addr(), ORIGIN), Some(1));

    write_zone_with_zonemd(dir.path(), &file, 2, "192.0.2.2");
    let tampered = std::fs::read_to_string(&file)
        .unwrap()
        .replace("192.0.2.2", "192.0.2.66");
    std::fs::write(&file, tampered).unwrap();
    primary.reload();
    assert!(
        secondary.wait_for_log("serial 2: ZONEMD verification failed"),
        "{}",
        secondary.log()
    );
    assert_eq!(soa_serial(secondary.addr(), ORIGIN), Some(1));
    let counted = eventually_within(Duration::from_secs(10), || {
        zonemd_failures(metrics).is_some_and(|n| n != "0")
    });
    assert!(counted, "{}", metrics_text(metrics));
    // A failed transfer, said as one (black-box finding: "transferred
    // in", no error in zone-status, "no primary to ask" from refresh).
    let log = secondary.log();
    assert!(!log.contains("to serial 2"), "not said transferred: {log}");
    let failed_in =
        format!("heron_zone_transfer_failures_total{{zone=\"{ORIGIN}.\",direction=\"in\"}} ");
    let text = metrics_text(metrics);
    let line = text.lines().find(|l| l.starts_with(&failed_in));
    assert!(line.is_some_and(|l| !l.ends_with(" 0")), "{text}");
    let ctl = |args: &[&str]| {
        let out = Command::new(heron())
            .args(["ctl", "--socket"])
            .arg(&socket)
            .args(args)
            .output()
            .unwrap();
        let said =
            String::from_utf8_lossy(&[&out.stdout[..], &out.stderr[..]].concat()).into_owned();
        (out.status.success(), said)
    };
    let (ok, said) = ctl(&["refresh", ORIGIN]);
    assert!(!ok && said.contains("ZONEMD verification failed"), "{said}");
    assert!(!said.contains("no primary to ask"), "{said}");
    let (_, status) = ctl(&["zone-status", ORIGIN, "--json"]);
    let errors = status.matches("ZONEMD verification failed").count();
    assert!(
        errors >= 2,
        "the zone's and the primary's last error: {status}"
    );

    write_zone_with_zonemd(dir.path(), &file, 3, "192.0.2.3");
    primary.reload();
    let took = eventually_within(Duration::from_secs(20), || {
        soa_serial(secondary.addr(), ORIGIN) == Some(3)
    });
    assert!(took, "{}", secondary.log());
}
