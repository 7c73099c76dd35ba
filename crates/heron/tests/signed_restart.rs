//! A primary zone Heron signs survives a restart without being signed
//! afresh: its signed version is kept in `FILE.signed`, the restart signs
//! the zone file again taking it as the version before, so only the
//! SOA's signature is new, the serial moves one on and the journal goes
//! on from it (an IXFR from the serial served before the restart is
//! incremental). Updates answered before the restart stay; a zone file
//! edited while down has its changes signed and the rest kept; a broken
//! `FILE.signed` or one of another zone is not used (the zone is signed
//! afresh and verifies).

mod xfr_common;

use std::path::Path;

use heron_testkit::{ServerProcess, SignedZone};
use xfr_common::{heron, kdig, signatures, signed_axfr, zone_serial};

const ZONE: &str = "rst.test";
const SECRET: &str = "q0vXAPu5ZZ8NAb8+HTr5VxvpyvGhUTtX5xM0y4ZxZ4k=";

fn zone_text() -> String {
    let mut text = format!(
        "$ORIGIN {ZONE}.\n$TTL 300\n@ SOA ns hostmaster 1 3600 600 86400 60\n@ NS ns\n\
         ns A 192.0.2.1\nwww A 192.0.2.10\n"
    );
    for i in 0..40 {
        text.push_str(&format!("h{i:02} A 192.0.2.{}\n", 100 + i));
    }
    text
}

fn start(dir: &Path) -> ServerProcess {
    let file = dir.join("rst.zone");
    if !file.exists() {
        std::fs::write(&file, zone_text()).unwrap();
    }
    let keys = dir.join("keys");
    ServerProcess::heron_with_config(&heron(), ZONE, move |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n\
             [[key]]\nname = \"ops\"\nsecret = \"{SECRET}\"\n\
             [[dnssec-policy]]\nname = \"p\"\ndenial = \"nsec3\"\n\
             [[zone]]\norigin = \"{ZONE}\"\nfile = \"{}\"\nallow-transfer = [\"127.0.0.1\"]\n\
             allow-update = [\"key ops zonesub ANY\"]\n\
             dnssec-policy = \"p\"\nkey-directory = \"{}\"\n",
            file.display(),
            keys.display()
        )
    })
}

fn nsupdate(server: std::net::SocketAddr, commands: &str) -> bool {
    let out = heron_testkit::tools::nsupdate(server, ("ops", SECRET), ZONE, commands);
    out.status.success()
}

/// New RRSIGs (but the SOA's) in `after` that `before` did not have.
fn new_signatures(before: &str, after: &str) -> usize {
    signatures(after).difference(&signatures(before)).count()
}

/// The records of an IXFR from `serial` (kdig prints one a line).
fn ixfr_records(addr: std::net::SocketAddr, serial: u32) -> Vec<String> {
    let out = kdig(
        addr,
        &[ZONE, &format!("IXFR={serial}"), "+nocomments", "+nostats"],
    );
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (text.lines())
        .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

fn verify(text: &str) {
    SignedZone::from_text(ZONE, text).verify_with_tools(true);
}

#[test]
fn a_restart_keeps_the_signatures_the_updates_and_the_ixfr_history() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(dir.path());
    let addr = server.addr();
    let first = zone_serial(addr, ZONE).unwrap();
    assert!(nsupdate(addr, "update add upd.rst.test 300 TXT \"kept\""));
    let serial = zone_serial(addr, ZONE).unwrap();
    assert_eq!(serial, first + 1);
    let before = signed_axfr(addr, ZONE);
    server.terminate();
    assert!(dir.path().join("rst.zone.signed").exists());

    // Restarted: the serial one on, no signature new but the SOA's.
    let mut server = start(dir.path());
    let addr = server.addr();
    assert_eq!(
        zone_serial(addr, ZONE),
        Some(serial + 1),
        "{}",
        server.log()
    );
    let after = signed_axfr(addr, ZONE);
    assert!(after.contains("upd.rst.test."), "the update stays");
    assert_eq!(new_signatures(&before, &after), 0, "{}", server.log());
    verify(&after);
    // The journal went on: IXFRs from before the restart are incremental.
    let step = ixfr_records(addr, serial);
    assert!(step.len() < 10, "one step, the SOA's: {step:#?}");
    assert!(!step.is_empty() && step[0].contains("SOA"), "{step:#?}");
    let two = ixfr_records(addr, first);
    assert!(two.len() < 30, "two steps: {two:#?}");
    assert!(two.iter().any(|l| l.contains("upd.rst.test.")), "{two:#?}");

    // The zone file edited while down: its change signed, the rest kept.
    let serial = serial + 1;
    server.terminate();
    let file = dir.path().join("rst.zone");
    let edited = std::fs::read_to_string(&file).unwrap() + "edited A 192.0.2.99\n";
    std::fs::write(&file, edited).unwrap();
    let mut server = start(dir.path());
    let addr = server.addr();
    assert_eq!(
        zone_serial(addr, ZONE),
        Some(serial + 1),
        "{}",
        server.log()
    );
    let edited = signed_axfr(addr, ZONE);
    assert!(edited.contains("edited.rst.test.") && edited.contains("upd.rst.test."));
    let new = new_signatures(&after, &edited);
    assert!((1..=4).contains(&new), "{new} new signatures");
    verify(&edited);
    assert!(ixfr_records(addr, serial).len() < 20);
    server.terminate();

    // A FILE.signed with one signature garbled (as a disk might) is not
    // used: its seal no longer holds, and the zone is signed afresh
    // rather than that signature served.
    let copy = dir.path().join("rst.zone.signed");
    let text = std::fs::read_to_string(&copy).unwrap();
    std::fs::write(&copy, garble_a_signature(&text)).unwrap();
    let mut server = start(dir.path());
    assert!(server.wait_for_log("does not hold"), "{}", server.log());
    let fresh = signed_axfr(server.addr(), ZONE);
    assert!(new_signatures(&edited, &fresh) > 40, "signed afresh");
    verify(&fresh);
    server.terminate();

    // A truncated FILE.signed is not used: the zone is signed afresh.
    let text = std::fs::read_to_string(&copy).unwrap();
    let cut = text[..text.len() / 2].trim_end_matches(|c: char| c.is_ascii_alphanumeric());
    std::fs::write(&copy, format!("{cut}\n")).unwrap();
    let mut server = start(dir.path());
    let addr = server.addr();
    assert!(server.wait_for_log("signed copy"), "{}", server.log());
    let fresh = signed_axfr(addr, ZONE);
    assert!(fresh.contains("upd.rst.test."), "the update stays");
    assert!(new_signatures(&edited, &fresh) > 40, "signed afresh");
    verify(&fresh);
    server.terminate();

    // One of another zone neither (unsealed, as an older Heron wrote it).
    let other = unsealed(&text).replace("rst.test.", "other.test.");
    std::fs::write(&copy, other).unwrap();
    let server = start(dir.path());
    assert!(server.wait_for_log("signed copy"), "{}", server.log());
    let again = signed_axfr(server.addr(), ZONE);
    assert!(new_signatures(&fresh, &again) > 40, "signed afresh");
    verify(&again);
}

/// A zone signed at its first start and never changed is kept too: the
/// first restart keeps every signature and answers an IXFR from the
/// serial served before it incrementally.
#[test]
fn a_zone_only_loaded_is_kept_for_the_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(dir.path());
    let addr = server.addr();
    let serial = zone_serial(addr, ZONE).unwrap();
    let before = signed_axfr(addr, ZONE);
    server.terminate();
    assert!(
        dir.path().join("rst.zone.signed").exists(),
        "{}",
        server.log()
    );

    let server = start(dir.path());
    let addr = server.addr();
    assert_eq!(
        zone_serial(addr, ZONE),
        Some(serial + 1),
        "{}",
        server.log()
    );
    let after = signed_axfr(addr, ZONE);
    assert_eq!(new_signatures(&before, &after), 0, "{}", server.log());
    verify(&after);
    let step = ixfr_records(addr, serial);
    assert!(step.len() < 10, "one step, the SOA's: {step:#?}");
}

/// `text` with one character of the `www` A record's signature changed,
/// still valid base64: the file loads, the signature is wrong.
fn garble_a_signature(text: &str) -> String {
    let line = (text.lines())
        .find(|l| l.starts_with("www.rst.test.") && l.contains("RRSIG A "))
        .expect("www's signature");
    let at = line.len() - 10;
    let swapped = if &line[at..at + 1] == "A" { "B" } else { "A" };
    let garbled = format!("{}{swapped}{}", &line[..at], &line[at + 1..]);
    text.replace(line, &garbled)
}

/// `text` as written before copies were sealed: no mark, no seal line.
fn unsealed(text: &str) -> String {
    let mut lines: Vec<&str> = text.lines().collect();
    assert!(lines.pop().unwrap().starts_with("; sha256 "));
    assert!(lines.remove(1).starts_with("; sealed"));
    lines.join("\n") + "\n"
}

/// A signed zone whose file fails to load at a restart (an edit made
/// while the server was down broke it) serves the signed version kept
/// before the restart, updates included, as a reload keeps the version
/// served, and says so; once the file is mended it loads again.
#[test]
fn a_zone_whose_file_breaks_while_down_serves_its_kept_version() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(dir.path());
    let addr = server.addr();
    assert!(nsupdate(addr, "update add upd.rst.test 300 A 192.0.2.77"));
    let serial = zone_serial(addr, ZONE).unwrap();
    let before = signed_axfr(addr, ZONE);
    server.terminate();

    let file = dir.path().join("rst.zone");
    let good = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, format!("{good}broken A 192.0.2.300\n")).unwrap();
    let mut server = start(dir.path());
    let addr = server.addr();
    assert!(
        server.wait_for_log("kept before the restart"),
        "{}",
        server.log()
    );
    assert_eq!(zone_serial(addr, ZONE), Some(serial), "{}", server.log());
    let kept = signed_axfr(addr, ZONE);
    assert!(kept.contains("upd.rst.test."), "the update stays");
    assert_eq!(new_signatures(&before, &kept), 0);
    verify(&kept);
    // Updates go on from it.
    assert!(nsupdate(addr, "update add upd2.rst.test 300 A 192.0.2.78"));
    assert_eq!(zone_serial(addr, ZONE), Some(serial + 1));
    server.terminate();

    // Mended: the restart signs the file, the updates carried over.
    std::fs::write(&file, &good).unwrap();
    let server = start(dir.path());
    let addr = server.addr();
    assert_eq!(
        zone_serial(addr, ZONE),
        Some(serial + 2),
        "{}",
        server.log()
    );
    let mended = signed_axfr(addr, ZONE);
    assert!(mended.contains("upd.rst.test.") && mended.contains("upd2.rst.test."));
    assert!(!server.log().contains("not loaded"), "{}", server.log());
    verify(&mended);
}

/// A zone file edited while the server was down with a serial past the
/// one served is served at that serial, whatever its modification time
/// says (regression hunt BG-3: an edit dated before the last signing, a
/// restored or copied file, had its serial replaced by one past the
/// served).
#[test]
fn an_edit_with_a_higher_serial_keeps_it_whatever_its_date() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    assert!(nsupdate(
        server.addr(),
        &format!("update add u.{ZONE} 300 A 192.0.2.5")
    ));
    let served = zone_serial(server.addr(), ZONE).unwrap();
    drop(server);
    let file = dir.path().join("rst.zone");
    let edited = zone_text()
        .replace("hostmaster 1 ", "hostmaster 1000 ")
        .replace("192.0.2.10", "192.0.2.11");
    std::fs::write(&file, edited).unwrap();
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(86_400);
    (std::fs::File::options().write(true).open(&file).unwrap())
        .set_modified(past)
        .unwrap();
    let restarted = start(dir.path());
    let serial = zone_serial(restarted.addr(), ZONE).unwrap();
    assert!(
        serial >= 1000 && served < 1000,
        "{serial} after {served}\n{}",
        restarted.log()
    );
}

/// The SOA fields of a signed zone's SOA (TTL and RDATA but the serial),
/// as `kdig +short` gives them.
fn soa_fields(addr: std::net::SocketAddr) -> String {
    let out = kdig(addr, &[ZONE, "SOA", "+noall", "+answer"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let fields: Vec<&str> = text.split_whitespace().collect();
    assert!(fields.len() >= 11, "{text}");
    // Owner TTL IN SOA mname rname serial refresh retry expire minimum.
    format!(
        "{} {} {} {}",
        fields[1],
        fields[4],
        fields[5],
        fields[7..11].join(" ")
    )
}

/// An update of the SOA itself (its TTL, names and timers, black-box
/// finding DI-1) survives a clean stop and a kill: the restart carries it
/// over to the zone file's SOA, not only the serial.
#[test]
fn an_updated_soa_survives_a_restart_and_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let addr = server.addr();
    let soa = format!("update add {ZONE} 120 SOA ns2.{ZONE}. admin.{ZONE}. 500 1800 300 43200 45");
    assert!(nsupdate(addr, &soa));
    let want = format!("120 ns2.{ZONE}. admin.{ZONE}. 1800 300 43200 45");
    assert_eq!(soa_fields(addr), want);
    drop(server);

    let mut server = start(dir.path());
    assert_eq!(soa_fields(server.addr()), want, "{}", server.log());
    verify(&signed_axfr(server.addr(), ZONE));
    server.kill();

    let server = start(dir.path());
    assert_eq!(soa_fields(server.addr()), want, "{}", server.log());
    let after = signed_axfr(server.addr(), ZONE);
    verify(&after);
    // The denial chain's TTLs follow the new minimum (RFC 9077).
    assert!(
        after
            .lines()
            .any(|l| l.contains("NSEC3") && l.split_whitespace().nth(1) == Some("45")),
        "{after}"
    );
}
