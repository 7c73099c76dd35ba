//! Heron as a bump-in-the-wire signer: a hidden Knot (or BIND) primary serves an
//! unsigned zone, Heron transfers it as a secondary with a
//! `dnssec-policy` and serves it signed, and a Knot secondary of Heron
//! transfers the signed zone. Checked at each step: the zone Heron sends
//! by AXFR passes `dnssec-verify` and `ldns-verify-zone`, `delv` (the
//! zone's KSK its trust anchor) validates an answer, an NXDOMAIN and the
//! apex; a change on the primary (one record added, NOTIFY) comes by
//! IXFR, is signed with few new signatures (the others kept), and goes
//! out by a small IXFR to the downstream Knot. The signed serial moves
//! on its own (a restart signs again with a serial past the one served)
//! while refreshes compare the primary's serial: no loop, no stall.
//! `heron ctl reload ZONE`, a changed policy and the rollover driver's
//! steps sign again from the version received, never transferring it.

mod xfr_common;

use std::net::SocketAddr;
use std::path::Path;

use heron_testkit::{Primary, Secondary, ServerKind, ServerProcess, SignedZone, free_port};
use std::time::Duration;
use xfr_common::{
    eventually, eventually_within, heron, kdig, scrape, signatures, signed_axfr, zone_serial,
};

const ZONE: &str = "bitw.test";

fn zone_text(serial: u32, extra: &str) -> String {
    let mut text = format!(
        "$ORIGIN {ZONE}.\n$TTL 300\n@ SOA ns hostmaster {serial} 3600 600 86400 60\n@ NS ns\n\
         ns A 192.0.2.1\nwww A 192.0.2.10\nwww TXT \"web\"\nmail MX 10 www\n{extra}"
    );
    // Enough names that keeping signatures shows.
    for i in 0..40 {
        text.push_str(&format!("h{i:02} A 192.0.2.{}\n", 100 + i));
    }
    text
}

/// Heron on `port`, a secondary of `primary` signing with `policy`,
/// NOTIFYing 127.0.0.1:`downstream`; kept copy and keys in `dir`.
fn heron_config(
    port: u16,
    primary: SocketAddr,
    downstream: u16,
    dir: &Path,
    policy: &str,
) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n\
         [[dnssec-policy]]\nname = \"p\"\n{policy}\n\
         [[zone]]\norigin = \"{ZONE}\"\nfile = \"{}\"\nprimaries = [\"{primary}\"]\n\
         allow-transfer = [\"127.0.0.1\"]\nnotify = [\"127.0.0.1:{downstream}\"]\n\
         dnssec-policy = \"p\"\nkey-directory = \"{}\"\n",
        dir.join("kept").join("bitw.zone").display(),
        dir.join("keys").display()
    )
}

fn axfr(server: SocketAddr) -> String {
    signed_axfr(server, ZONE)
}

/// The records of a transfer (kdig prints one a line; comments left out).
fn records(text: &str) -> usize {
    let record = |l: &&str| !l.trim().is_empty() && !l.starts_with(';');
    text.lines().filter(record).count()
}

/// The zone Heron transfers out passes both verifiers; delv validates
/// `name` (A), an NXDOMAIN and the apex.
fn check_valid(server: SocketAddr, text: &str, name: &str, csk: bool) {
    let zone = SignedZone::from_text(ZONE, text);
    zone.verify_with_tools(csk);
    let answer = zone.delv(server, &format!("{name}.{ZONE}."), "A");
    assert!(answer.is_validated_answer(), "{name}:\n{answer}");
    let nx = zone.delv(server, &format!("nx-{name}.{ZONE}."), "A");
    assert!(nx.is_validated_negative(true), "nx-{name}:\n{nx}");
    let apex = zone.delv(server, &format!("{ZONE}."), "SOA");
    assert!(apex.is_validated_answer(), "apex:\n{apex}");
}

/// Knot serving `file` unsigned, NOTIFYing Heron on `heron_port`.
fn knot_primary(file: &Path, heron_port: u16) -> ServerProcess {
    primary_of(ServerKind::Knot, file, heron_port)
}

/// `kind` serving `file` unsigned, NOTIFYing Heron on `heron_port`.
fn primary_of(kind: ServerKind, file: &Path, heron_port: u16) -> ServerProcess {
    let primary = Primary {
        origin: format!("{ZONE}."),
        file: file.to_path_buf(),
        secondary: SocketAddr::from(([127, 0, 0, 1], heron_port)),
        key: None,
        tls: None,
    };
    primary.start(kind)
}

/// A Knot primary serving `zone_text(1, "")` from `primary.zone` in a
/// fresh folder, NOTIFYing Heron on the port returned (with one for a
/// downstream secondary).
fn knot_primary_in_a_folder() -> (
    tempfile::TempDir,
    std::path::PathBuf,
    u16,
    u16,
    ServerProcess,
) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("primary.zone");
    std::fs::write(&file, zone_text(1, "")).unwrap();
    let (heron_port, down_port) = (free_port(), free_port());
    let primary = knot_primary(&file, heron_port);
    (dir, file, heron_port, down_port, primary)
}

/// The primary's zone file made `text` and reloaded; returns once Heron
/// serves `name`.
fn changed_on_the_primary(
    file: &Path,
    primary: &ServerProcess,
    heron: &ServerProcess,
    text: String,
    name: &str,
) {
    std::fs::write(file, text).unwrap();
    primary.reload();
    assert!(
        eventually(|| axfr(heron.addr()).contains(&format!("{name}.{ZONE}."))),
        "{}",
        heron.log()
    );
}

fn start_heron(port: u16, config: &str) -> ServerProcess {
    ServerProcess::heron_on_port(&heron(), port, ZONE, config)
        .unwrap_or_else(|log| panic!("Heron did not serve {ZONE}: {log}"))
}

/// [`start_heron`], once it serves the zone signed.
fn start_signing(port: u16, config: &str) -> ServerProcess {
    let heron = start_heron(port, config);
    let addr = heron.addr();
    assert!(eventually(|| kdig(addr, &[ZONE, "DNSKEY", "+short"])
        .stdout
        .len()
        > 10));
    heron
}

/// The serial in the kept (unsigned) copy's first line.
fn kept_serial(dir: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(dir.join("kept").join("bitw.zone")).ok()?;
    text.lines().next()?.rsplit(' ').next()?.parse().ok()
}

fn signs_behind_a_hidden_primary(kind: ServerKind, policy: &str, csk: bool) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("primary.zone");
    std::fs::write(&file, zone_text(1, "")).unwrap();
    let (heron_port, down_port) = (free_port(), free_port());
    let primary = primary_of(kind, &file, heron_port);
    let config = heron_config(heron_port, primary.addr(), down_port, dir.path(), policy);
    let mut heron = start_heron(heron_port, &config);
    let addr = heron.addr();
    assert!(eventually(|| kdig(addr, &[ZONE, "DNSKEY", "+short"])
        .stdout
        .len()
        > 10));
    let before = axfr(addr);
    check_valid(addr, &before, "www", csk);
    let signed_1 = zone_serial(addr, ZONE).unwrap();
    // A Knot secondary of Heron gets the signed zone.
    let downstream = Secondary {
        origin: format!("{ZONE}."),
        primary: addr,
        key: None,
        tls: None,
    }
    .start(ServerKind::Knot, down_port);
    assert!(eventually(
        || zone_serial(downstream.addr(), ZONE) == Some(signed_1)
    ));

    // One record added on the primary: NOTIFY, IXFR, signed again.
    std::fs::write(&file, zone_text(2, "new A 192.0.2.50\n")).unwrap();
    primary.reload();
    assert!(
        eventually(|| axfr(addr).contains("new.bitw.test.")),
        "{}",
        heron.log()
    );
    let after = axfr(addr);
    let signed_2 = zone_serial(addr, ZONE).unwrap();
    assert!(signed_2 > signed_1);
    let log = heron.log();
    assert!(log.contains("IXFR from"), "the change came by IXFR: {log}");
    let signed_lines = log.lines().filter(|l| l.contains("zone signed"));
    signed_lines.for_each(|l| eprintln!("{}", &l[l.find("zone signed").unwrap_or(0)..]));
    let new: Vec<_> = signatures(&after)
        .difference(&signatures(&before))
        .cloned()
        .collect();
    // One RRset changed (N = 1): at most 3N + 10 new signatures.
    assert!(
        !new.is_empty() && new.len() <= 3 + 10,
        "{} new: {new:#?}",
        new.len()
    );
    check_valid(addr, &after, "new", csk);
    // The IXFR out is the signed diff, proportional to the change.
    let out = kdig(
        addr,
        &[ZONE, &format!("IXFR={signed_1}"), "+nocomments", "+nostats"],
    );
    let ixfr = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        ixfr.contains("new.bitw.test.") && ixfr.contains("RRSIG"),
        "{ixfr}"
    );
    assert!(records(&ixfr) <= 30, "{} records: {ixfr}", records(&ixfr));
    eprintln!(
        "one record added: {} new signatures, IXFR out {} records, AXFR {} records",
        new.len(),
        records(&ixfr),
        records(&after)
    );
    assert!(
        records(&after) > 100,
        "the zone is larger: {}",
        records(&after)
    );
    assert!(eventually(
        || zone_serial(downstream.addr(), ZONE) == Some(signed_2)
    ));
    assert!(downstream.wait_for_log("IXFR"), "{}", downstream.log());

    // A restart signs the kept unsigned copy again: a serial past the
    // one served, the unchanged signatures kept.
    heron.terminate();
    let heron = start_heron(heron_port, &config);
    assert!(eventually(
        || zone_serial(addr, ZONE).is_some_and(|s| s > signed_2)
    ));
    let restarted = axfr(addr);
    let signed_3 = zone_serial(addr, ZONE).unwrap();
    assert_eq!(
        kept_serial(dir.path()),
        Some(2),
        "the primary's serial is kept"
    );
    let new = signatures(&restarted)
        .difference(&signatures(&after))
        .count();
    assert!(new <= 2, "{new} new signatures after a restart");
    eprintln!("restart: {new} new signatures (SOA's left out)");
    // The journal of signed versions carried on: an IXFR across it.
    let out = kdig(
        addr,
        &[ZONE, &format!("IXFR={signed_2}"), "+nocomments", "+nostats"],
    );
    let ixfr = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(records(&ixfr) <= 10, "{} records: {ixfr}", records(&ixfr));
    check_valid(addr, &restarted, "new", csk);
    assert!(eventually(
        || zone_serial(downstream.addr(), ZONE) == Some(signed_3)
    ));

    // The signed serial (3) is past the primary's (2): the next change
    // (primary serial 3) is still fetched, and signed past 3.
    let newer = "new A 192.0.2.50\nnewer A 192.0.2.51\n";
    changed_on_the_primary(&file, &primary, &heron, zone_text(3, newer), "newer");
    let signed_4 = zone_serial(addr, ZONE).unwrap();
    assert!(signed_4 > signed_3, "{signed_4} after {signed_3}");
    check_valid(addr, &axfr(addr), "newer", csk);
    assert!(eventually(
        || zone_serial(downstream.addr(), ZONE) == Some(signed_4)
    ));
    assert!(eventually(|| kept_serial(dir.path()) == Some(3)));
}

#[test]
fn a_knot_primary_unsigned_heron_signs_nsec_csk() {
    signs_behind_a_hidden_primary(ServerKind::Knot, "", true);
}

#[test]
fn a_bind_primary_unsigned_heron_signs_nsec_csk() {
    signs_behind_a_hidden_primary(ServerKind::Bind, "", true);
}

#[test]
fn a_knot_primary_unsigned_heron_signs_nsec3_ksk_zsk() {
    let policy = "keys = \"ksk-zsk\"\ndenial = \"nsec3\"";
    signs_behind_a_hidden_primary(ServerKind::Knot, policy, false);
}

/// Transfers Heron's log says it took from its primary.
fn transfers_in(log: &str) -> usize {
    log.matches("XFR from").count()
}

fn ctl(server: &ServerProcess, args: &[&str]) -> String {
    let out = std::process::Command::new(heron())
        .arg("ctl")
        .arg("--socket")
        .arg(server.dir().join("control.sock"))
        .args(args)
        .output()
        .expect("heron ctl runs");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `heron ctl reload ZONE` (the path of the signature refresh and the
/// rollover driver) and a policy changed by a reload sign again from
/// the version last received, without a transfer; a policy removed
/// serves that version unsigned.
#[test]
fn a_reload_signs_again_from_the_version_received() {
    let (dir, _, heron_port, down_port, primary) = knot_primary_in_a_folder();
    let config = |policy: &str| {
        let zone = heron_config(heron_port, primary.addr(), down_port, dir.path(), policy);
        zone.replace("workers = 1\n", "workers = 1\ncontrol = \"control.sock\"\n")
    };
    let heron = start_heron(heron_port, &config(""));
    let addr = heron.addr();
    assert!(eventually(|| kdig(addr, &[ZONE, "DNSKEY", "+short"])
        .stdout
        .len()
        > 10));
    let first = zone_serial(addr, ZONE).unwrap();
    let taken = transfers_in(&heron.log());
    assert_eq!(taken, 1, "{}", heron.log());

    let said = ctl(&heron, &["reload", ZONE]);
    // Said as done (black-box finding BE-2: "0 zones re-read" alone).
    assert!(
        said.contains("reloaded") && said.contains("1 secondary zones signed again"),
        "{said}"
    );
    let again = zone_serial(addr, ZONE).unwrap();
    assert!(again > first, "{again} after {first}");
    // A refresh says the primary's serial and the one served apart
    // (black-box finding AV-8: the primary's read as the one served).
    let said = ctl(&heron, &["refresh", ZONE]);
    let both = format!("checked: serial 1 from the primary, served signed as {again}");
    assert!(said.contains(&both), "{said}");
    check_valid(addr, &axfr(addr), "www", true);

    let toml = heron.dir().join("heron.toml");
    std::fs::write(&toml, config("denial = \"nsec3\"")).unwrap();
    heron.reload();
    assert!(
        eventually(|| axfr(addr).contains("NSEC3")),
        "{}",
        heron.log()
    );
    assert!(zone_serial(addr, ZONE).unwrap() > again);
    check_valid(addr, &axfr(addr), "www", true);

    let unsigned = config("").replace("dnssec-policy = \"p\"\nkey-directory", "#");
    std::fs::write(&toml, unsigned).unwrap();
    heron.reload();
    assert!(
        eventually(
            || !String::from_utf8_lossy(&kdig(addr, &[ZONE, "AXFR"]).stdout).contains("RRSIG")
        ),
        "{}",
        heron.log()
    );
    assert_eq!(zone_serial(addr, ZONE), Some(1), "the primary's version");
    assert_eq!(
        transfers_in(&heron.log()),
        taken,
        "no transfer: {}",
        heron.log()
    );
}

/// A version received that cannot be signed (its key file moved away):
/// the older version stays served, and zone-status (table and JSON) and
/// the metrics say so until a version is signed again (black-box
/// finding: only a log line did, zone-status showed no error).
#[test]
fn a_version_received_that_cannot_be_signed_is_the_zones_last_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("primary.zone");
    std::fs::write(&file, zone_text(1, "")).unwrap();
    let heron_port = free_port();
    let primary = knot_primary(&file, heron_port);
    let metrics = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let config = heron_config(heron_port, primary.addr(), free_port(), dir.path(), "")
        .replace("workers = 1\n", "workers = 1\ncontrol = \"control.sock\"\n")
        + &format!("[metrics]\nlisten = \"{metrics}\"\n");
    let heron = start_signing(heron_port, &config);
    let addr = heron.addr();
    let failed = "heron_zones_unhealthy{state=\"file_load_failed\"}";
    assert!(scrape(metrics).contains(&format!("{failed} 0")));
    // The key file moved away; the key state file stays.
    let keys = dir.path().join("keys");
    let key = std::fs::read_dir(&keys).unwrap().map(|e| e.unwrap().path());
    let key: Vec<_> = key
        .filter(|p| p.to_string_lossy().ends_with(".heron-key"))
        .collect();
    assert_eq!(key.len(), 1, "{key:?}");
    let away = dir.path().join("away.heron-key");
    std::fs::rename(&key[0], &away).unwrap();

    std::fs::write(&file, zone_text(2, "new A 192.0.2.50\n")).unwrap();
    primary.reload();
    let refused = heron.wait_for_log("cannot sign the version received");
    assert!(refused, "{}", heron.log());
    assert!(!axfr(addr).contains("new.bitw.test."), "the older version");
    let json = ctl(&heron, &["zone-status", ZONE, "--json"]);
    assert!(json.contains("\"signing_failed\":true"), "{json}");
    assert!(json.contains("cannot sign the version received"), "{json}");
    let table = ctl(&heron, &["zone-status", ZONE]);
    assert!(
        table.contains("the version received is not served"),
        "{table}"
    );
    assert!(scrape(metrics).contains(&format!("{failed} 1")));

    // The key back, the next version received is signed whole (the
    // change missed with it) and served: the error is gone.
    std::fs::rename(&away, &key[0]).unwrap();
    let third = "new A 192.0.2.50\nthird A 192.0.2.51\n";
    std::fs::write(&file, zone_text(3, third)).unwrap();
    primary.reload();
    assert!(eventually(|| axfr(addr).contains("third.bitw.test.")));
    let served = axfr(addr);
    assert!(served.contains("new.bitw.test."), "{served}");
    check_valid(addr, &served, "new", true);
    let json = ctl(&heron, &["zone-status", ZONE, "--json"]);
    assert!(!json.contains("signing_failed"), "{json}");
    assert!(scrape(metrics).contains(&format!("{failed} 0")));
}

/// The rollover driver moves a signed secondary zone's keys on: its
/// new KSK's DNSKEY reaching every cache publishes CDS and CDNSKEY for
/// the parent, a step signed again from the version received (no
/// transfer), the zone valid, the serial moved on.
#[test]
fn key_rollover_steps_sign_a_secondary_zone_again_without_a_transfer() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("primary.zone");
    // TTLs of seconds: the signatures are in every cache at once.
    let text = zone_text(1, "").replace("$TTL 300", "$TTL 2");
    std::fs::write(&file, text.replace("86400 60", "86400 2")).unwrap();
    let heron_port = free_port();
    let primary = knot_primary(&file, heron_port);
    let policy = "keys = \"ksk-zsk\"\npropagation-delay = \"1s\"\n\
                  dnskey-ttl = \"2s\"\ncds-ttl = \"2s\"\nmax-zone-ttl = \"2s\"";
    let config = heron_config(heron_port, primary.addr(), free_port(), dir.path(), policy);
    let heron = start_heron(heron_port, &config);
    let addr = heron.addr();
    let short = |qtype: &str| {
        let out = kdig(addr, &[ZONE, qtype, "+short"]);
        String::from_utf8_lossy(&out.stdout).lines().count()
    };
    assert!(eventually(|| short("DNSKEY") == 2), "{}", heron.log());
    let first = zone_serial(addr, ZONE).unwrap();
    assert_eq!(short("CDS"), 0, "not before the DNSKEY is in every cache");
    let published = eventually_within(Duration::from_secs(30), || short("CDS") > 0);
    assert!(published, "CDS published: {}", heron.log());
    assert!(short("CDNSKEY") > 0);
    assert!(zone_serial(addr, ZONE).unwrap() > first);
    check_valid(addr, &axfr(addr), "www", false);
    let log = heron.log();
    assert!(log.contains("DNSSEC key rollover: reloading"), "{log}");
    assert_eq!(transfers_in(&log), 1, "no transfer: {log}");
}

/// A restart whose signed secondary has no signed copy kept (removed, or
/// a policy new since) answers its other zones at once: the full signing
/// follows the start, it does not hold it (regression hunt: every zone
/// waited for it, 7.9 s for 100,000 records).
#[test]
fn a_secondary_signed_anew_at_a_restart_holds_no_other_zone() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("primary.zone");
    let names: String = (0..20_000)
        .map(|i| format!("n{i} A 198.51.100.{}\n", i % 250))
        .collect();
    std::fs::write(&file, zone_text(1, &names)).unwrap();
    let (heron_port, down_port) = (free_port(), free_port());
    let primary = knot_primary(&file, heron_port);
    let other = dir.path().join("other.zone");
    std::fs::write(
        &other,
        "$ORIGIN other.test.\n$TTL 60\n@ SOA ns h 1 60 60 600 60\n@ NS ns\nns A 192.0.2.1\n",
    )
    .unwrap();
    let config = heron_config(heron_port, primary.addr(), down_port, dir.path(), "")
        + &format!(
            "[[zone]]\norigin = \"other.test\"\nfile = \"{}\"\n",
            other.display()
        );
    let first = start_heron(heron_port, &config);
    let signed_copy = dir.path().join("kept").join("bitw.zone.signed");
    assert!(
        eventually(|| kept_serial(dir.path()) == Some(1) && signed_copy.exists()),
        "{}",
        first.log()
    );
    drop(first);
    std::fs::remove_file(&signed_copy).unwrap();
    let again = ServerProcess::heron_on_port(&heron(), heron_port, "other.test", &config)
        .unwrap_or_else(|log| panic!("Heron did not serve other.test: {log}"));
    assert!(
        eventually(|| again.log().contains("zone signed")),
        "{}",
        again.log()
    );
    let log = again.log();
    let (ready, signed) = (
        log.find("ready: serving").unwrap(),
        log.find("zone signed").unwrap(),
    );
    assert!(ready < signed, "the start waited for the signing:\n{log}");
}

/// A kill after a new signed version is served but before its signed
/// copy (`FILE.signed`) is written (here: the copy put back as it was
/// before): the restart signs past the serial last served, kept in the
/// key directory, never the same serial again with other signatures,
/// which secondaries holding the first would never transfer (black-box
/// finding AK-6: the restart went on from the copy's serial).
#[test]
fn a_restart_that_finds_an_older_signed_copy_signs_past_the_serial_served() {
    let (dir, file, heron_port, down_port, primary) = knot_primary_in_a_folder();
    let config = heron_config(heron_port, primary.addr(), down_port, dir.path(), "");
    let mut heron = start_heron(heron_port, &config);
    let addr = heron.addr();
    let signed_copy = dir.path().join("kept").join("bitw.zone.signed");
    assert!(
        eventually(|| kept_serial(dir.path()) == Some(1) && signed_copy.exists()),
        "{}",
        heron.log()
    );
    let signed_1 = zone_serial(addr, ZONE).unwrap();
    assert!(eventually(|| std::fs::read_to_string(&signed_copy)
        .is_ok_and(|t| t.contains(&format!(" {signed_1} ")))));
    let old_copy = std::fs::read(&signed_copy).unwrap();
    let text = zone_text(2, "new A 192.0.2.50\n");
    changed_on_the_primary(&file, &primary, &heron, text, "new");
    let signed_2 = zone_serial(addr, ZONE).unwrap();
    assert!(signed_2 > signed_1);
    let served_2 = axfr(addr);
    assert!(eventually(|| kept_serial(dir.path()) == Some(2)));
    heron.kill();
    std::fs::write(&signed_copy, &old_copy).unwrap();
    let heron = start_heron(heron_port, &config);
    assert!(
        eventually(|| axfr(addr).contains("new.bitw.test.")),
        "{}",
        heron.log()
    );
    let signed_3 = zone_serial(addr, ZONE).unwrap();
    assert!(
        signed_3 > signed_2,
        "serial {signed_3} after {signed_2} was served:\n{}",
        heron.log()
    );
    check_valid(addr, &axfr(addr), "new", true);
    assert_ne!(axfr(addr), served_2);
    // A copy cut short is said to be signed again from the unsigned copy
    // kept, not transferred (black-box finding AV-7).
    let mut heron = heron;
    heron.kill();
    let len = std::fs::metadata(&signed_copy).unwrap().len();
    std::fs::File::options()
        .write(true)
        .open(&signed_copy)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let heron = start_heron(heron_port, &config);
    assert!(
        eventually(|| zone_serial(addr, ZONE) > Some(signed_3)),
        "{}",
        heron.log()
    );
    let said = "signed copy unusable; signed again from the unsigned copy kept";
    assert!(heron.log().contains(said), "{}", heron.log());
    // And what was read is named apart (regression hunt AX-6).
    assert!(
        heron
            .log()
            .contains("0 signed copies of secondary zones read"),
        "{}",
        heron.log()
    );
    check_valid(addr, &axfr(addr), "new", true);
}

/// A hidden primary whose zone carries DNSSEC records of its own, with a
/// broken NSEC3 chain: Heron serves its own chain in their place, and a
/// restart does not warn of the primary's chain in the kept copy, which
/// is not served (black-box finding BE-3: "proofs of denial near it will
/// not validate" at every start).
#[test]
fn a_primarys_own_broken_chain_is_not_warned_of_at_a_restart() {
    let key =
        "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+Pw==";
    let extra = format!(
        "@ DNSKEY 257 3 13 {key}\n@ NSEC3PARAM 1 0 0 -\n\
         zz NSEC3 1 0 0 - 6o4v41ervfni7nv3nbip1300q0iho0vb A\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("primary.zone");
    std::fs::write(&file, zone_text(1, &extra)).unwrap();
    let (heron_port, down_port) = (free_port(), free_port());
    let primary = knot_primary(&file, heron_port);
    let config = heron_config(heron_port, primary.addr(), down_port, dir.path(), "");
    let mut heron = start_heron(heron_port, &config);
    let addr = heron.addr();
    assert!(
        eventually(|| kept_serial(dir.path()) == Some(1)),
        "{}",
        heron.log()
    );
    check_valid(addr, &axfr(addr), "www", true);
    heron.kill();
    let heron = start_heron(heron_port, &config);
    let log = heron.log();
    assert!(!log.contains("chain broken"), "{log}");
    check_valid(heron.addr(), &axfr(heron.addr()), "www", true);
}

/// A primary that changes its zone under the same serial: Heron signs
/// the new content with a serial of its own, and says, as for a zone
/// served unsigned, that the primary's serial did not move (black-box
/// finding BE-4: said only for an unsigned secondary).
#[test]
fn content_changed_under_the_primarys_serial_is_said() {
    // NSD takes an edit under the same serial as it is (Knot moves it).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("primary.zone");
    std::fs::write(&file, zone_text(1, "")).unwrap();
    let (heron_port, down_port) = (free_port(), free_port());
    let primary = primary_of(ServerKind::Nsd, &file, heron_port);
    let zone = heron_config(heron_port, primary.addr(), down_port, dir.path(), "");
    let config = zone.replace("workers = 1\n", "workers = 1\ncontrol = \"control.sock\"\n");
    let heron = start_heron(heron_port, &config);
    assert!(
        eventually(|| kept_serial(dir.path()) == Some(1)),
        "{}",
        heron.log()
    );
    std::fs::write(&file, zone_text(1, "samesrl A 192.0.2.77\n")).unwrap();
    primary.reload();
    let name = format!("samesrl.{ZONE}");
    let on_primary = || {
        !kdig(primary.addr(), &[&name, "A", "+short"])
            .stdout
            .is_empty()
    };
    assert!(eventually(on_primary), "the primary took the edit");
    ctl(&heron, &["retransfer", ZONE]);
    assert!(
        eventually(|| axfr(heron.addr()).contains(&name)),
        "{}",
        heron.log()
    );
    let said = "its primary's content changed but serial 1 did not";
    assert!(heron.log().contains(said), "{}", heron.log());
}

/// A signed secondary made a signed primary by a reload (its `primaries`
/// gone, a file of its own) is served from that file, signed with its
/// keys at a serial past the one served; never the version last received
/// from the old primary, unsigned (black-box finding BQ-7: the
/// secondary's teardown served that over the file's signed version, and
/// a validator with the DS failed the whole zone).
#[test]
fn a_signed_secondary_made_a_signed_primary_serves_its_file_signed() {
    let (dir, _, heron_port, down_port, primary) = knot_primary_in_a_folder();
    let config = heron_config(heron_port, primary.addr(), down_port, dir.path(), "");
    let heron = start_signing(heron_port, &config);
    let addr = heron.addr();
    let served = zone_serial(addr, ZONE).unwrap();
    let own = dir.path().join("own.zone");
    std::fs::write(&own, zone_text(1, "file A 192.0.2.99\n")).unwrap();
    let kept = dir.path().join("kept").join("bitw.zone");
    let primary_config = config
        .replace(&kept.display().to_string(), &own.display().to_string())
        .replace(&format!("primaries = [\"{}\"]\n", primary.addr()), "");
    assert!(!primary_config.contains("primaries"), "{primary_config}");
    std::fs::write(heron.dir().join("heron.toml"), primary_config).unwrap();
    heron.reload();
    assert!(
        eventually(|| axfr(addr).contains(&format!("file.{ZONE}."))),
        "{}",
        heron.log()
    );
    let text = axfr(addr);
    assert!(zone_serial(addr, ZONE).unwrap() > served, "{text}");
    check_valid(addr, &text, "file", true);
}
