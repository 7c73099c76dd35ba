//! Dynamic updates to a zone Heron signs (`dnssec-policy`): after each
//! `nsupdate` change (add, delete an RRset, delete a name, delete one
//! record) the zone as transferred out passes `dnssec-verify` and
//! `ldns-verify-zone`, `delv` (the zone's KSK its trust anchor) validates
//! the changed name, an NXDOMAIN beside it and the apex, and the change
//! made few new signatures (the incremental signer kept the others); an
//! IXFR carries the new RRSIG and NSEC/NSEC3 records; clients cannot
//! change DNSSEC records; the updates survive restarts.

mod xfr_common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use heron_testkit::{ServerProcess, SignedZone};
use xfr_common::{
    config_without, eventually, file_serial, heron, kdig, restarted, serial_in, signatures,
    signed_axfr, zone_serial,
};

const ZONE: &str = "sup.test";
const SECRET: &str = "q0vXAPu5ZZ8NAb8+HTr5VxvpyvGhUTtX5xM0y4ZxZ4k=";

fn zone_text() -> String {
    let mut text = format!(
        "$ORIGIN {ZONE}.\n$TTL 300\n@ SOA ns hostmaster 1 3600 600 86400 60\n@ NS ns\n\
         ns A 192.0.2.1\nwww A 192.0.2.10\nwww A 192.0.2.11\nwww TXT \"web\"\n\
         old A 192.0.2.20\nold TXT \"old\"\nmail MX 10 www\n"
    );
    // Enough names that keeping signatures shows.
    for i in 0..40 {
        text.push_str(&format!("h{i:02} A 192.0.2.{}\n", 100 + i));
    }
    text
}

fn start(dir: &Path, policy: &str) -> ServerProcess {
    start_with(dir, policy, "")
}

/// [`start`], with a control socket at `dir/control.sock` and `zone_extra`
/// in the zone's section.
fn start_with(dir: &Path, policy: &str, zone_extra: &str) -> ServerProcess {
    let file = dir.join("sup.zone");
    if !file.exists() {
        std::fs::write(&file, zone_text()).unwrap();
    }
    let keys = dir.join("keys");
    let socket = dir.join("control.sock");
    let policy = policy.to_string();
    let zone_extra = zone_extra.to_string();
    ServerProcess::heron_with_config(&heron(), ZONE, move |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\ncontrol = \"{}\"\n\
             [[key]]\nname = \"ops\"\nsecret = \"{SECRET}\"\n\
             [[dnssec-policy]]\nname = \"p\"\n{policy}\n\
             [[zone]]\norigin = \"{ZONE}\"\nfile = \"{}\"\nallow-transfer = [\"127.0.0.1\"]\n\
             allow-update = [\"key ops zonesub ANY\"]\n\
             dnssec-policy = \"p\"\nkey-directory = \"{}\"\n{zone_extra}\n",
            socket.display(),
            file.display(),
            keys.display()
        )
    })
}

/// Sends `commands` with nsupdate, signed with the key `ops`; the rcode.
fn nsupdate(server: SocketAddr, commands: &str) -> String {
    let out = heron_testkit::tools::nsupdate(server, ("ops", SECRET), ZONE, commands);
    if out.status.success() {
        return "NOERROR".into();
    }
    let text = String::from_utf8_lossy(&[&out.stdout[..], &out.stderr[..]].concat()).into_owned();
    let codes = ["REFUSED", "SERVFAIL", "NOTAUTH", "FORMERR", "NXRRSET"];
    (codes.iter().find(|c| text.contains(**c))).map_or(format!("failed: {text}"), |c| c.to_string())
}

fn axfr(server: SocketAddr) -> String {
    signed_axfr(server, ZONE)
}

fn verify_with_tools(zone: &SignedZone, csk: bool) {
    zone.verify_with_tools(csk);
}

/// What the changed name must now answer.
#[derive(Clone, Copy, Debug)]
enum Now {
    Answer(&'static str),
    NoData(&'static str),
    NxDomain,
}

/// One change and what it leaves at the name it changes ("" the apex).
struct Step {
    commands: &'static str,
    name: &'static str,
    now: Now,
    /// RRsets the change touches (N: at most 3N+10 new signatures).
    rrsets: usize,
}

const STEPS: [Step; 8] = [
    // A name in the middle of the chain (between mail and ns).
    Step {
        commands: "update add new.sup.test 300 A 192.0.2.50",
        name: "new",
        now: Now::Answer("A"),
        rrsets: 1,
    },
    Step {
        commands: "update delete www.sup.test A",
        name: "www",
        now: Now::NoData("A"),
        rrsets: 1,
    },
    Step {
        commands: "update delete old.sup.test",
        name: "old",
        now: Now::NxDomain,
        rrsets: 2,
    },
    // The last RRset of a name: its NSEC goes, its predecessor's is
    // re-pointed.
    Step {
        commands: "update delete h07.sup.test A 192.0.2.107",
        name: "h07",
        now: Now::NxDomain,
        rrsets: 1,
    },
    // The apex: its types change, the SOA is signed once.
    Step {
        commands: "update add sup.test 300 TXT \"apex\"",
        name: "",
        now: Now::Answer("TXT"),
        rrsets: 1,
    },
    // A name two empty non-terminals deep (NSEC3 gives them records).
    Step {
        commands: "update add a.b.deep.sup.test 300 A 192.0.2.60",
        name: "a.b.deep",
        now: Now::Answer("A"),
        rrsets: 1,
    },
    // Several changes in one update, next to each other in the chain.
    Step {
        commands: "update add h07a.sup.test 300 A 192.0.2.71\n\
                   update add h07b.sup.test 300 A 192.0.2.72\n\
                   update delete h08.sup.test A\n\
                   update add h09.sup.test 300 TXT \"nine\"\n\
                   update add h10.sup.test 60 A 192.0.2.110",
        name: "h07b",
        now: Now::Answer("A"),
        rrsets: 5,
    },
    // The deep name goes, and its empty non-terminals with it.
    Step {
        commands: "update delete a.b.deep.sup.test",
        name: "b.deep",
        now: Now::NxDomain,
        rrsets: 1,
    },
];

/// Checks the zone served at `server` after `step`: the tools accept it,
/// delv validates the changed name, an NXDOMAIN beside it and the apex.
fn check_valid(server: SocketAddr, text: &str, step: &Step, csk: bool) {
    let zone = SignedZone::from_text(ZONE, text);
    verify_with_tools(&zone, csk);
    let qname = match step.name {
        "" => format!("{ZONE}."),
        name => format!("{name}.{ZONE}."),
    };
    let v = match step.now {
        Now::Answer(t) => (zone.delv(server, &qname, t), true),
        Now::NoData(t) => {
            let v = zone.delv(server, &qname, t);
            let ok = v.is_validated_negative(false);
            (v, ok)
        }
        Now::NxDomain => {
            let v = zone.delv(server, &qname, "A");
            let ok = v.is_validated_negative(true);
            (v, ok)
        }
    };
    let ok = match step.now {
        Now::Answer(_) => v.0.is_validated_answer(),
        _ => v.1,
    };
    assert!(ok, "{qname} {:?}:\n{}", step.now, v.0);
    let beside = match step.name {
        "" => format!("apex-nx.{ZONE}."),
        name => format!("{}-nx.{ZONE}.", name.replace('.', "-")),
    };
    let nx = zone.delv(server, &beside, "A");
    assert!(nx.is_validated_negative(true), "{beside}:\n{nx}");
    let apex = zone.delv(server, &format!("{ZONE}."), "SOA");
    assert!(apex.is_validated_answer(), "apex:\n{apex}");
}

fn updates_stay_valid(policy: &str, csk: bool, chain_type: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(dir.path(), policy);
    let addr = server.addr();
    let mut before = axfr(addr);
    let signed_whole = server.log().matches("zone signed").count();
    for step in &STEPS {
        let serial = zone_serial(addr, ZONE).unwrap();
        assert_eq!(nsupdate(addr, step.commands), "NOERROR", "{}", server.log());
        // Answered once served: the new serial is there at once.
        assert_eq!(
            zone_serial(addr, ZONE),
            Some(serial + 1),
            "{}",
            step.commands
        );
        let after = axfr(addr);
        let new: Vec<_> = signatures(&after)
            .difference(&signatures(&before))
            .cloned()
            .collect();
        assert!(
            new.len() <= 3 * step.rrsets + 10,
            "{} new signatures: {new:#?}",
            new.len()
        );
        assert!(!new.is_empty(), "the change is signed");
        // The SOA signed once: one signature of it per key that signs
        // the zone, the old ones gone.
        let soa_sigs = (after.lines())
            .filter(|l| l.split_whitespace().nth(4) == Some("SOA"))
            .filter(|l| l.split_whitespace().nth(3) == Some("RRSIG"))
            .count();
        assert_eq!(soa_sigs, 1, "{}: {after}", step.commands);
        check_valid(addr, &after, step, csk);
        // The IXFR from the serial before carries the new signatures and
        // the chain's records that changed.
        let out = kdig(addr, &[ZONE, &format!("IXFR={serial}"), "+nocomments"]);
        let ixfr = String::from_utf8_lossy(&out.stdout);
        assert!(ixfr.contains("RRSIG"), "{ixfr}");
        assert!(!ixfr.contains("DNSKEY\t"), "no key changed: {ixfr}");
        if step.name == "new" || step.name == "old" {
            assert!(ixfr.contains(chain_type), "{ixfr}");
        }
        before = after;
    }
    // Each change was signed by itself, the zone not signed whole again.
    assert_eq!(
        server.log().matches("zone signed").count(),
        signed_whole,
        "{}",
        server.log()
    );
    // Read again by force (as a rollover's step reads it), the file not
    // touched since it was loaded, updates taken since: no edit
    // (black-box finding: a false ERROR and a failed reload until the
    // next write-back).
    let (ok, said) = ctl(dir.path(), &["reload", "--force", ZONE]);
    assert!(ok, "{said}\n{}", server.log());
    // The server's own write of the file, updates after it, a reload:
    // no edit of the operator's, no failure (regression hunt finding).
    let (ok, said) = ctl(dir.path(), &["flush", ZONE]);
    assert!(ok, "{said}");
    let add = "update add after-flush.sup.test 300 TXT \"x\"";
    assert_eq!(nsupdate(addr, add), "NOERROR");
    let (ok, said) = ctl(dir.path(), &["reload", ZONE]);
    assert!(ok, "{said}\n{}", server.log());
    // The same text written again (touch, a deploy tool), an update not
    // yet written back: no edit (regression hunt: a failed reload and an
    // unedited FILE.rejected).
    let file = dir.path().join("sup.zone");
    let text = std::fs::read(&file).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&file, &text).unwrap();
    let (ok, said) = ctl(dir.path(), &["reload", ZONE]);
    assert!(ok, "{said}\n{}", server.log());
    assert!(!dir.path().join("sup.zone.rejected").exists());
    // A reload of its edited file keeps the updated zone (the file is
    // read only between freeze and thaw) and says the file differs.
    let zone_row = || {
        let (_, status) = ctl(dir.path(), &["zone-status", ZONE]);
        status
            .lines()
            .find(|l| l.starts_with(ZONE))
            .map(str::to_string)
    };
    let loaded_before = zone_row();
    // LOADED is shown to the second: a reload after this one shows.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let edited = std::fs::read_to_string(&file).unwrap() + "edited A 192.0.2.99\n";
    std::fs::write(&file, edited).unwrap();
    // Named, the reload says it did not take the file (black-box
    // finding: it said ok, exit 0), and the zone's status keeps why.
    let (ok, said) = ctl(dir.path(), &["reload", ZONE]);
    assert!(!ok && said.contains("heron ctl freeze"), "{said}");
    // The edit is kept aside: the next write-back replaces the file.
    let rejected = std::fs::read_to_string(dir.path().join("sup.zone.rejected")).unwrap();
    assert!(rejected.contains("edited A 192.0.2.99"), "{rejected}");
    let (_, status) = ctl(dir.path(), &["zone-status", ZONE]);
    assert!(status.contains("the zone file differs"), "{status}");
    // Nothing was loaded: LOADED stays (black-box finding: it moved).
    assert_eq!(zone_row(), loaded_before, "{status}");
    let kept = axfr(addr);
    assert!(kept.contains("new.sup.test.") && !kept.contains("old.sup.test."));
    assert!(!kept.contains("edited.sup.test."), "the file is not taken");
    check_valid(addr, &kept, &STEPS[0], csk);
    // Clients may not change what the signer keeps.
    for commands in [
        "update delete sup.test RRSIG",
        "update delete sup.test DNSKEY",
        "update add sup.test 300 NSEC3PARAM 1 0 0 -",
        "update delete new.sup.test NSEC",
        "update add sup.test 300 CDS 0 0 0 00",
    ] {
        assert_eq!(nsupdate(addr, commands), "REFUSED", "{commands}");
    }
    // Restarts: the updates stay, the zone stays valid, the serial
    // moves on (twice: the second start reads what the first carried).
    let serial = zone_serial(addr, ZONE).unwrap();
    for round in 0..2 {
        server.terminate();
        server = start(dir.path(), policy);
        let addr = server.addr();
        let now = zone_serial(addr, ZONE).unwrap();
        assert!(now > serial, "round {round}: {now} after {serial}");
        let text = axfr(addr);
        assert!(text.contains("new.sup.test."), "round {round}: {text}");
        assert!(!text.contains("old.sup.test."), "round {round}");
        assert!(!text.contains("192.0.2.107"), "round {round}");
        check_valid(addr, &text, &STEPS[0], csk);
        // And updates go on after the restart.
        let add = format!("update add r{round}.sup.test 300 TXT \"after\"");
        assert_eq!(nsupdate(addr, &add), "NOERROR", "{}", server.log());
        assert!(eventually(
            || axfr(addr).contains(&format!("r{round}.sup.test."))
        ));
    }
}

#[test]
fn updates_to_an_nsec_csk_zone_stay_valid() {
    updates_stay_valid("", true, "NSEC\t");
}

#[test]
fn updates_to_an_nsec3_ksk_zsk_zone_stay_valid() {
    updates_stay_valid("keys = \"ksk-zsk\"\ndenial = \"nsec3\"", false, "NSEC3\t");
}

/// `kill -9` between and during updates of a signed zone: every update
/// answered NOERROR is served (and validates) after each restart, which
/// carries the journal over to the zone signed from its file.
#[test]
fn signed_updates_answered_survive_kill_9() {
    const ROUNDS: u32 = 6;
    let dir = tempfile::tempdir().unwrap();
    let policy = "denial = \"nsec3\"";
    let mut acknowledged: Vec<String> = Vec::new();
    let mut next = 0;
    for round in 0..ROUNDS {
        let mut server = start(dir.path(), policy);
        let addr = server.addr();
        let text = axfr(addr);
        for name in &acknowledged {
            assert!(
                text.contains(name.as_str()),
                "round {round}: {name} lost\n{}",
                server.log()
            );
        }
        let zone = SignedZone::from_text(ZONE, &text);
        verify_with_tools(&zone, true);
        for _ in 0..3 {
            let name = format!("k{next}.{ZONE}.");
            if nsupdate(addr, &format!("update add {name} 60 TXT \"k\"")) == "NOERROR" {
                acknowledged.push(name);
            }
            next += 1;
        }
        let name = format!("k{next}.{ZONE}.");
        let command = format!("update add {name} 60 TXT \"k\"");
        let in_flight = std::thread::spawn(move || nsupdate(addr, &command));
        std::thread::sleep(std::time::Duration::from_millis(u64::from(round) * 7 % 30));
        server.kill();
        if in_flight.join().unwrap() == "NOERROR" {
            acknowledged.push(name);
        }
        next += 1;
    }
    let server = start(dir.path(), policy);
    let text = axfr(server.addr());
    for name in &acknowledged {
        assert!(
            text.contains(name.as_str()),
            "{name} lost\n{}",
            server.log()
        );
    }
    assert!(acknowledged.len() as u32 >= ROUNDS * 3, "{acknowledged:?}");
    verify_with_tools(&SignedZone::from_text(ZONE, &text), true);
}

/// Updates a restart carried over to a signed zone (its file lacking
/// them) are written back to the file at `zonefile-sync`, as an unsigned
/// zone's replayed updates are; before, only the next update did it.
#[test]
fn updates_carried_over_a_restart_are_written_back() {
    let dir = tempfile::tempdir().unwrap();
    let policy = "denial = \"nsec3\"";
    let mut server = start_with(dir.path(), policy, "zonefile-sync = 3600");
    let added = nsupdate(
        server.addr(),
        "update add carried.sup.test 300 A 192.0.2.77",
    );
    assert_eq!(added, "NOERROR", "{}", server.log());
    server.kill();
    let file = dir.path().join("sup.zone");
    assert!(
        !std::fs::read_to_string(&file)
            .unwrap()
            .contains("carried.sup.test.")
    );
    let restarted = start_with(dir.path(), policy, "zonefile-sync = 1");
    let written = || {
        std::fs::read_to_string(&file)
            .unwrap()
            .contains("carried.sup.test.")
    };
    assert!(eventually(written), "{}", restarted.log());
    assert!(!has_signer_records(
        &std::fs::read_to_string(&file).unwrap()
    ));
}

/// `ldns-verify-zone -ZZ` of a zone as transferred: signed, and its
/// ZONEMD present and matching the zone.
fn zonemd_verifies(dir: &Path, text: &str, what: &str) {
    let path = dir.join("zonemd-axfr.zone");
    std::fs::write(&path, text).unwrap();
    let out = Command::new("/usr/bin/ldns-verify-zone")
        .arg("-ZZ")
        .arg(&path)
        .output()
        .expect("ldns-verify-zone runs");
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && said.contains("Zone is verified and complete"),
        "{what}: ldns-verify-zone -ZZ: {said}\n{text}"
    );
}

/// A zone signed with `zonemd` keeps a ZONEMD that matches it after
/// every dynamic update (each version's ZONEMD made anew, for its serial,
/// and carried in the IXFR), and after a restart that carries the
/// updates over to the zone signed from its file.
#[test]
fn updates_to_a_zonemd_zone_keep_a_zonemd_that_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let policy = "denial = \"nsec3\"\nzonemd = \"sha384\"";
    let mut server = start(dir.path(), policy);
    let addr = server.addr();
    zonemd_verifies(dir.path(), &axfr(addr), "as loaded");
    for step in &STEPS {
        let serial = zone_serial(addr, ZONE).unwrap();
        assert_eq!(nsupdate(addr, step.commands), "NOERROR", "{}", server.log());
        let after = axfr(addr);
        zonemd_verifies(dir.path(), &after, step.commands);
        check_valid(addr, &after, step, true);
        let zonemd = after.lines().find(|l| l.contains("\tZONEMD\t")).unwrap();
        assert!(
            zonemd.contains(&format!("ZONEMD\t{} 1 1 ", serial + 1)),
            "{zonemd}"
        );
        let out = kdig(addr, &[ZONE, &format!("IXFR={serial}"), "+nocomments"]);
        let ixfr = String::from_utf8_lossy(&out.stdout);
        assert!(
            ixfr.contains("\tZONEMD\t") && ixfr.contains("RRSIG\tZONEMD "),
            "{ixfr}"
        );
    }
    server.terminate();
    let server = start(dir.path(), policy);
    let text = axfr(server.addr());
    assert!(text.contains("new.sup.test."), "{text}");
    zonemd_verifies(dir.path(), &text, "after a restart");
}

/// Runs `heron ctl ARGS` on the server started in `dir`: success, output.
fn ctl(dir: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(heron())
        .arg("ctl")
        .arg("--socket")
        .arg(dir.join("control.sock"))
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&[&out.stdout[..], &out.stderr[..]].concat()).into_owned();
    (out.status.success(), text)
}

/// What the server signs is not in the zone's file: true if `text` has
/// a record of a type the signer makes.
fn has_signer_records(text: &str) -> bool {
    let types = [
        "RRSIG",
        "NSEC",
        "NSEC3",
        "NSEC3PARAM",
        "DNSKEY",
        "CDS",
        "CDNSKEY",
        "ZONEMD",
    ];
    text.lines()
        .any(|l| (l.split_whitespace().nth(3)).is_some_and(|t| types.contains(&t)))
}

/// The zone file of a zone Heron signs stays the zone's own data: the
/// updated zone is written back (`zonefile-sync`) and frozen (`heron ctl
/// freeze`) without signatures, keys, the chain or the ZONEMD; the file
/// edited by hand during the freeze is taken at `thaw` and signed, its
/// ZONEMD made anew; updates go on after.
#[test]
fn the_file_of_a_signed_zone_is_written_unsigned_and_an_edit_is_signed_at_thaw() {
    let dir = tempfile::tempdir().unwrap();
    let policy = "denial = \"nsec3\"\nzonemd = \"sha384\"";
    let server = start_with(dir.path(), policy, "zonefile-sync = 0");
    let addr = server.addr();
    let file = dir.path().join("sup.zone");
    assert_eq!(
        nsupdate(addr, STEPS[0].commands),
        "NOERROR",
        "{}",
        server.log()
    );
    let written_back = || std::fs::read_to_string(&file).unwrap();
    assert!(
        eventually(|| written_back().contains("new.sup.test.")),
        "{}",
        server.log()
    );
    assert!(!has_signer_records(&written_back()), "{}", written_back());
    // Frozen: written as served, unsigned; edited by hand.
    let (ok, said) = ctl(dir.path(), &["freeze", ZONE]);
    assert!(ok, "{said}\n{}", server.log());
    let frozen = std::fs::read_to_string(&file).unwrap();
    assert!(
        frozen.contains("new.sup.test.") && !has_signer_records(&frozen),
        "{frozen}"
    );
    std::fs::write(
        &file,
        format!("{frozen}byhand.sup.test. 300 IN A 192.0.2.90\n"),
    )
    .unwrap();
    let (ok, said) = ctl(dir.path(), &["thaw", ZONE]);
    assert!(ok, "{said}\n{}", server.log());
    let text = axfr(addr);
    assert!(
        text.contains("byhand.sup.test.") && text.contains("new.sup.test."),
        "{}",
        server.log()
    );
    // The edit left the serial: the next one is written to the file
    // before it is served (black-box finding AM-5: the file kept the
    // old one).
    let served = zone_serial(addr, ZONE);
    assert_ne!(file_serial(&file), serial_in(&frozen));
    assert_eq!(file_serial(&file), served, "{}", server.log());
    assert!(!has_signer_records(&written_back()), "{}", written_back());
    zonemd_verifies(dir.path(), &text, "after the thaw");
    let byhand = Step {
        commands: "",
        name: "byhand",
        now: Now::Answer("A"),
        rrsets: 1,
    };
    check_valid(addr, &text, &byhand, true);
    assert_eq!(
        nsupdate(addr, "update add later.sup.test 300 A 192.0.2.91"),
        "NOERROR"
    );
    let after = axfr(addr);
    assert!(after.contains("later.sup.test."), "{}", server.log());
    zonemd_verifies(dir.path(), &after, "an update after the thaw");
}

/// A reload of a signed zone that takes updates keeps the version served
/// and signs nothing for its file (whose edit is reported, not taken):
/// no signing thrown away, no serial logged that is never served. A
/// policy changed by a reload reaches the version served, its updates
/// with it (key steps: `rollover.rs`, a zone taking updates).
#[test]
fn a_reload_keeps_the_updated_zone_and_brings_it_a_policy_change() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), "");
    let addr = server.addr();
    assert_eq!(
        nsupdate(addr, STEPS[0].commands),
        "NOERROR",
        "{}",
        server.log()
    );
    let serial = zone_serial(addr, ZONE).unwrap();
    let signings =
        |log: &str| log.matches("zone signed").count() + log.matches("change signed").count();
    let reloads = |log: &str| log.matches("reload done").count();
    let before = signings(&server.log());
    let file = dir.path().join("sup.zone");
    let edited = std::fs::read_to_string(&file).unwrap() + "edited A 192.0.2.99\n";
    std::fs::write(&file, edited).unwrap();
    server.reload();
    assert!(
        eventually(|| reloads(&server.log()) == 1),
        "{}",
        server.log()
    );
    assert!(
        server.log().contains("heron ctl freeze"),
        "{}",
        server.log()
    );
    assert_eq!(zone_serial(addr, ZONE), Some(serial));
    assert_eq!(signings(&server.log()), before, "{}", server.log());

    let toml = server.dir().join("heron.toml");
    let nsec3 = std::fs::read_to_string(&toml)
        .unwrap()
        .replace("name = \"p\"\n", "name = \"p\"\ndenial = \"nsec3\"\n");
    std::fs::write(&toml, nsec3).unwrap();
    server.reload();
    assert!(
        eventually(|| axfr(addr).contains("NSEC3PARAM")),
        "{}",
        server.log()
    );
    let text = axfr(addr);
    assert!(text.contains("new.sup.test.") && !text.contains("edited.sup.test."));
    assert!(zone_serial(addr, ZONE).unwrap() > serial);
    check_valid(addr, &text, &STEPS[0], true);
}

/// A signed zone taking updates whose `dnssec-policy` is taken away while
/// its file lacks updates: the updates stay, served unsigned at the next
/// serial (regression hunt: the file was served and the updates lost,
/// the journal's signed steps not taken by the unsigned file).
#[test]
fn updates_not_written_back_outlive_the_policy() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_with(dir.path(), "", "zonefile-sync = 600");
    let addr = server.addr();
    assert_eq!(
        nsupdate(addr, "update add pending.sup.test 300 TXT \"kept\""),
        "NOERROR"
    );
    let signed_serial = zone_serial(addr, ZONE).unwrap();
    take_the_policy_away(&server);
    let (ok, said) = ctl(dir.path(), &["reconfigure"]);
    assert!(ok, "{said}\n{}", server.log());
    let kept = kdig(addr, &["pending.sup.test", "TXT", "+short"]);
    assert!(
        String::from_utf8_lossy(&kept.stdout).contains("kept"),
        "{}",
        server.log()
    );
    let axfr = String::from_utf8_lossy(&kdig(addr, &[ZONE, "AXFR"]).stdout).into_owned();
    assert!(!axfr.contains("RRSIG"), "{axfr}");
    let serial = zone_serial(addr, ZONE).unwrap();
    assert!(serial > signed_serial, "{serial} after {signed_serial}");
    let said = format!(
        "written back to {} (serial {serial})",
        dir.path().join("sup.zone").display()
    );
    assert!(server.log().contains(&said), "{said}\n{}", server.log());
}

/// Takes the zone out of the server's configuration (another zone,
/// other.test, left in) and reconfigures; the zone's section.
fn take_out(server: &ServerProcess, dir: &Path) -> String {
    let config = server.dir().join("heron.toml");
    let full = std::fs::read_to_string(&config).unwrap();
    let other = dir.join("other.zone");
    std::fs::write(&other, zone_text().replace(ZONE, "other.test")).unwrap();
    let zone_at = full.find("[[zone]]").unwrap();
    let without = format!(
        "{}[[zone]]\norigin = \"other.test\"\nfile = \"{}\"\n",
        &full[..zone_at],
        other.display()
    );
    std::fs::write(&config, without).unwrap();
    let (ok, said) = ctl(dir, &["reconfigure"]);
    assert!(ok, "{said}\n{}", server.log());
    full[zone_at..].to_string()
}

/// Puts `zone_section` back in place of other.test in the configuration
/// the server runs with now, and reconfigures.
fn put_back(server: &ServerProcess, dir: &Path, zone_section: &str) -> (bool, String) {
    let config = server.dir().join("heron.toml");
    let current = std::fs::read_to_string(&config).unwrap();
    let head = &current[..current.find("[[zone]]").unwrap()];
    std::fs::write(&config, format!("{head}{zone_section}")).unwrap();
    ctl(dir, &["reconfigure"])
}

/// A signed zone frozen, a record its updates added deleted from the file
/// by hand, and the server killed: the start takes the file as edited,
/// without carrying the journal's updates onto it again (regression hunt
/// AR-9: the deletion was undone).
#[test]
fn a_restart_during_a_freeze_keeps_a_signed_zones_deletions() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start_with(dir.path(), "", "");
    let addr = server.addr();
    let answer = |addr, name: &str| {
        let out = kdig(addr, &[name, "A", "+short"]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(
        nsupdate(addr, "update add gone.sup.test 300 A 192.0.2.91"),
        "NOERROR"
    );
    assert_eq!(answer(addr, "gone.sup.test"), "192.0.2.91");
    let (ok, said) = ctl(dir.path(), &["freeze", ZONE]);
    assert!(ok, "{said}\n{}", server.log());
    let file = dir.path().join("sup.zone");
    let frozen = std::fs::read_to_string(&file).unwrap();
    assert!(frozen.contains("gone.sup.test."), "{frozen}");
    let edited: String = (frozen.lines())
        .filter(|l| !l.starts_with("gone.sup.test."))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&file, edited).unwrap();
    server.kill();
    let server = start_with(dir.path(), "", "");
    let addr = server.addr();
    assert_eq!(answer(addr, "gone.sup.test"), "", "{}", server.log());
    // Served with a serial of the signer's: the file gets it, as at a
    // thaw (regression hunt AR-3: it kept the frozen one).
    let served = zone_serial(addr, ZONE);
    assert!(served > Some(1), "{}", server.log());
    assert_eq!(file_serial(&file), served, "{}", server.log());
}

/// A freeze's mark left beside the file after the thaw (brought back by
/// a restore, here) does not make a start take the zone as frozen: the
/// updates answered since the thaw, in the journal, are served again
/// (black-box finding AS-12: they were lost). A mark the thaw cannot
/// remove keeps the zone frozen, said, rather than taking updates a
/// start would then lose.
#[test]
fn a_mark_left_after_the_thaw_loses_no_update() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start_with(dir.path(), "", "");
    let addr = server.addr();
    let answer = |addr, name: &str| {
        let out = kdig(addr, &[name, "TXT", "+short"]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(
        nsupdate(addr, "update add one.sup.test 300 TXT \"one\""),
        "NOERROR"
    );
    let (ok, said) = ctl(dir.path(), &["freeze", ZONE]);
    assert!(ok, "{said}\n{}", server.log());
    let mark = dir.path().join("sup.zone.frozen");
    let kept = std::fs::read(&mark).unwrap();
    // A mark that cannot be removed (immutable: the tests run as root on
    // a file system that has the attribute, as CI does): the thaw takes
    // nothing, not even the file's edit (regression hunt AW-2).
    let serial = zone_serial(addr, ZONE);
    let file = dir.path().join("sup.zone");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, format!("{text}edit.sup.test. 300 IN TXT \"edit\"\n")).unwrap();
    let chattr = |flag: &str| {
        let status = Command::new("chattr").arg(flag).arg(&mark).status();
        assert!(status.is_ok_and(|s| s.success()), "chattr {flag}");
    };
    chattr("+i");
    let (ok, said) = ctl(dir.path(), &["thaw", ZONE]);
    chattr("-i");
    assert!(
        !ok && said.contains("stays frozen") && said.contains("cannot remove"),
        "{said}"
    );
    assert_eq!(zone_serial(addr, ZONE), serial, "the edit is not taken");
    assert_eq!(answer(addr, "edit.sup.test"), "");
    let refused = nsupdate(addr, "update add no.sup.test 300 TXT \"no\"");
    assert_eq!(refused, "REFUSED", "still frozen");
    let (ok, said) = ctl(dir.path(), &["thaw", ZONE]);
    assert!(ok, "{said}\n{}", server.log());
    assert_eq!(
        nsupdate(addr, "update add acked.sup.test 300 TXT \"acked\""),
        "NOERROR"
    );
    server.kill();
    std::fs::write(&mark, kept).unwrap(); // restored from a backup
    let server = start_with(dir.path(), "", "");
    let addr = server.addr();
    assert_eq!(
        answer(addr, "acked.sup.test"),
        "\"acked\"",
        "{}",
        server.log()
    );
    assert_eq!(answer(addr, "one.sup.test"), "\"one\"", "{}", server.log());
    assert!(!mark.exists(), "the old mark removed");
}

/// A signed zone frozen, a record its updates added deleted from the file
/// by hand, then taken out of the configuration and put back, with and
/// without a restart in between: the record stays deleted, in what is
/// served and in the file (black-box findings AS-2 and AS-9: the journal
/// was carried over the edit again, and written over the file).
#[test]
fn a_frozen_signed_zone_taken_out_and_put_back_keeps_its_deletions() {
    for restart in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let mut server = start_with(dir.path(), "", "");
        let addr = server.addr();
        for name in ["gone", "kept"] {
            let add = format!("update add {name}.sup.test 300 TXT \"{name}\"");
            assert_eq!(nsupdate(addr, &add), "NOERROR");
        }
        let (ok, said) = ctl(dir.path(), &["freeze", ZONE]);
        assert!(ok, "{said}\n{}", server.log());
        let file = dir.path().join("sup.zone");
        let frozen = std::fs::read_to_string(&file).unwrap();
        let edited: String = (frozen.lines())
            .filter(|l| !l.starts_with("gone.sup.test."))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(&file, edited).unwrap();
        let zone_section = take_out(&server, dir.path());
        if restart {
            server = restarted(server, "other.test");
        }
        let (ok, said) = put_back(&server, dir.path(), &zone_section);
        assert!(ok, "{said}\n{}", server.log());
        let addr = server.addr();
        let txt = |name: &str| {
            let out = kdig(addr, &[name, "TXT", "+short"]);
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        assert_eq!(
            txt("gone.sup.test"),
            "",
            "restart {restart}\n{}",
            server.log()
        );
        assert_eq!(
            txt("kept.sup.test"),
            "\"kept\"",
            "restart {restart}\n{}",
            server.log()
        );
        let on_disk = std::fs::read_to_string(&file).unwrap();
        assert!(
            !on_disk.contains("gone.sup.test."),
            "restart {restart}: {on_disk}"
        );
    }
}

/// A signed zone frozen, its file edited into one that does not load,
/// and the server killed: the start serves the signed version kept, and
/// the zone stays frozen (updates refused), so that no write-back
/// replaces the edit; fixed, the thaw takes it (black-box finding AS-3:
/// the freeze was dropped and the next write-back wrote over the edit).
#[test]
fn a_frozen_signed_zone_whose_edit_does_not_load_stays_frozen_at_a_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start_with(dir.path(), "", "");
    let addr = server.addr();
    assert_eq!(
        nsupdate(addr, "update add a4.sup.test 300 TXT \"a4\""),
        "NOERROR"
    );
    let (ok, said) = ctl(dir.path(), &["freeze", ZONE]);
    assert!(ok, "{said}\n{}", server.log());
    let file = dir.path().join("sup.zone");
    let typo = format!(
        "{}new.sup.test. 300 IN A 192.0.2.999\n",
        std::fs::read_to_string(&file).unwrap()
    );
    std::fs::write(&file, &typo).unwrap();
    server.kill();
    let server = start_with(dir.path(), "", "");
    let addr = server.addr();
    let got = nsupdate(addr, "update add a6.sup.test 300 TXT \"a6\"");
    assert_eq!(got, "REFUSED", "{}", server.log());
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        typo,
        "the edit stays"
    );
    std::fs::write(&file, typo.replace("192.0.2.999", "192.0.2.99")).unwrap();
    let (ok, said) = ctl(dir.path(), &["thaw", ZONE]);
    assert!(ok, "{said}\n{}", server.log());
    let out = kdig(addr, &["new.sup.test", "A", "+short"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "192.0.2.99");
    assert_eq!(
        nsupdate(addr, "update add a6.sup.test 300 TXT \"a6\""),
        "NOERROR"
    );
}

/// The same under `zonefile-sync = "never"`, where the file may not be
/// written: the zone stays signed, with its updates, until `heron ctl
/// flush` writes them; the next reload then serves it unsigned with them,
/// past the signed serial the flush wrote, and so does a restart
/// (regression hunt: the file was served, the updates lost).
#[test]
fn a_policy_taken_away_waits_for_the_file_under_never() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_with(dir.path(), "", "zonefile-sync = \"never\"");
    let addr = server.addr();
    assert_eq!(
        nsupdate(addr, "update add pending.sup.test 300 TXT \"kept\""),
        "NOERROR"
    );
    take_the_policy_away(&server);
    let _ = ctl(dir.path(), &["reconfigure"]);
    let pending = || {
        let out = kdig(addr, &["pending.sup.test", "TXT", "+short"]);
        String::from_utf8_lossy(&out.stdout).contains("kept")
    };
    let axfr = || String::from_utf8_lossy(&kdig(addr, &[ZONE, "AXFR"]).stdout).into_owned();
    assert!(pending(), "{}", server.log());
    assert!(axfr().contains("RRSIG"), "still signed: {}", server.log());
    // The advice is one that applies: a reload of the zone alone reads
    // no configuration (black-box finding).
    let advice = format!(
        "it stays signed until they are in it (heron ctl flush {ZONE}., then heron ctl reconfigure)"
    );
    assert!(server.log().contains(&advice), "{}", server.log());
    let (ok, said) = ctl(dir.path(), &["flush", ZONE]);
    assert!(ok, "{said}");
    let signed_serial = zone_serial(addr, ZONE).unwrap();
    let (ok, said) = ctl(dir.path(), &["reconfigure"]);
    assert!(ok, "{said}\n{}", server.log());
    assert!(eventually(|| !axfr().contains("RRSIG")), "{}", server.log());
    assert!(pending(), "{}", server.log());
    // The file flushed holds the signed serial: served unsigned, the zone
    // goes past it, or its secondaries keep the signed version
    // (black-box finding: the same serial was served).
    let serial = zone_serial(addr, ZONE).unwrap();
    assert!(serial > signed_serial, "{serial} after {signed_serial}");
    // And so does a restart, which reads the file flushed again.
    drop(server);
    let restarted = start_unsigned(dir.path(), "zonefile-sync = \"never\"");
    let addr = restarted.addr();
    let out = kdig(addr, &["pending.sup.test", "TXT", "+short"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("kept"));
    let again = zone_serial(addr, ZONE).unwrap();
    assert!(
        again >= serial,
        "{again} after {serial}\n{}",
        restarted.log()
    );
}

/// Writes `server`'s configuration without the zone's `dnssec-policy`
/// (and its key directory).
fn take_the_policy_away(server: &ServerProcess) {
    let config = server.dir().join("heron.toml");
    let signed = std::fs::read_to_string(&config).unwrap();
    let unsigned: String = (signed.lines())
        .filter(|l| !l.starts_with("dnssec-policy") && !l.starts_with("key-directory"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&config, unsigned).unwrap();
}

/// [`start_with`] with the zone's `dnssec-policy` taken away: the same
/// server restarted on `dir` once its policy was removed.
fn start_unsigned(dir: &Path, zone_extra: &str) -> ServerProcess {
    let socket = dir.join("control.sock");
    let file = dir.join("sup.zone");
    let zone_extra = zone_extra.to_string();
    ServerProcess::heron_with_config(&heron(), ZONE, move |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\ncontrol = \"{}\"\n\
             [[key]]\nname = \"ops\"\nsecret = \"{SECRET}\"\n\
             [[zone]]\norigin = \"{ZONE}\"\nfile = \"{}\"\nallow-transfer = [\"127.0.0.1\"]\n\
             allow-update = [\"key ops zonesub ANY\"]\n{zone_extra}\n",
            socket.display(),
            file.display()
        )
    })
}

/// A zone kept signed after its policy was taken away under `"never"`
/// keeps its updates at a restart: its journal's signed steps are
/// carried over to the file's zone without the signer's records, served
/// unsigned past the last signed serial, and the next restart still has
/// them (black-box finding: the journal was set aside, the updates lost).
#[test]
fn a_zone_kept_signed_without_its_policy_keeps_its_updates_at_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let never = "zonefile-sync = \"never\"";
    let mut server = start_with(dir.path(), "", never);
    let addr = server.addr();
    assert_eq!(
        nsupdate(addr, "update add a1.sup.test 300 TXT \"kept1\""),
        "NOERROR"
    );
    take_the_policy_away(&server);
    let _ = ctl(dir.path(), &["reconfigure"]);
    assert_eq!(
        nsupdate(addr, "update add a2.sup.test 300 TXT \"kept2\""),
        "NOERROR"
    );
    let signed_serial = zone_serial(addr, ZONE).unwrap();
    server.kill();
    let has = |addr: SocketAddr, name: &str, text: &str| {
        let out = kdig(addr, &[name, "TXT", "+short"]);
        String::from_utf8_lossy(&out.stdout).contains(text)
    };
    let mut restarted = start_unsigned(dir.path(), never);
    let addr = restarted.addr();
    assert!(has(addr, "a1.sup.test", "kept1"), "{}", restarted.log());
    assert!(has(addr, "a2.sup.test", "kept2"), "{}", restarted.log());
    let axfr = String::from_utf8_lossy(&kdig(addr, &[ZONE, "AXFR"]).stdout).into_owned();
    assert!(!axfr.contains("RRSIG"), "{axfr}");
    let serial = zone_serial(addr, ZONE).unwrap();
    assert!(serial > signed_serial, "{serial} after {signed_serial}");
    assert_eq!(
        nsupdate(addr, "update add a3.sup.test 300 TXT \"kept3\""),
        "NOERROR"
    );
    restarted.kill();
    let again = start_unsigned(dir.path(), never);
    let addr = again.addr();
    for (name, text) in [("a1", "kept1"), ("a2", "kept2"), ("a3", "kept3")] {
        let name = format!("{name}.{ZONE}");
        assert!(has(addr, &name, text), "{name}: {}", again.log());
    }
    assert!(zone_serial(addr, ZONE).unwrap() > serial, "{}", again.log());
}

/// Under `"never"`, a signed zone that loses both its policy and
/// `allow-update` while its file lacks updates keeps them: it stays
/// signed, its update settings as before, until `heron ctl flush` puts
/// them in its file; the next reconfigure serves that file unsigned
/// (black-box finding: the file was read at once, the updates lost).
#[test]
fn a_zone_losing_its_policy_and_allow_update_under_never_keeps_its_updates() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_with(dir.path(), "", "zonefile-sync = \"never\"");
    let addr = server.addr();
    assert_eq!(
        nsupdate(addr, "update add pending.sup.test 300 TXT \"kept\""),
        "NOERROR"
    );
    take_the_policy_away(&server);
    let config = server.dir().join("heron.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    let text: String = (text.lines())
        .filter(|l| !l.starts_with("allow-update") && !l.starts_with("zonefile-sync"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&config, text).unwrap();
    let _ = ctl(dir.path(), &["reconfigure"]);
    let pending = || {
        let out = kdig(addr, &["pending.sup.test", "TXT", "+short"]);
        String::from_utf8_lossy(&out.stdout).contains("kept")
    };
    let axfr = || String::from_utf8_lossy(&kdig(addr, &[ZONE, "AXFR"]).stdout).into_owned();
    assert!(pending(), "{}", server.log());
    assert!(axfr().contains("RRSIG"), "still signed: {}", server.log());
    let (ok, said) = ctl(dir.path(), &["flush", ZONE]);
    assert!(ok, "{said}");
    let (ok, said) = ctl(dir.path(), &["reconfigure"]);
    assert!(ok, "{said}\n{}", server.log());
    assert!(eventually(|| !axfr().contains("RRSIG")), "{}", server.log());
    assert!(pending(), "{}", server.log());
}

/// A server of the zone under `"never"` with no setting of its own but
/// its policy and updates (`allow-transfer` taken away by a reconfigure),
/// its control socket in `dir`.
fn start_alone(dir: &Path) -> ServerProcess {
    let server = start_with(dir, "", "zonefile-sync = \"never\"");
    let (ok, said) = reconfigure_without(&server, dir, &["allow-transfer"]);
    assert!(ok, "{said}");
    server
}

/// `heron ctl reconfigure` of `server` (its control socket in `dir`) once
/// its configuration has lost the lines that start with one of `gone`.
fn reconfigure_without(server: &ServerProcess, dir: &Path, gone: &[&str]) -> (bool, String) {
    config_without(&server.dir().join("heron.toml"), gone);
    ctl(dir, &["reconfigure"])
}

/// The same for a zone that keeps no other setting of its own (no
/// `allow-transfer`): it had no policy entry left, was taken for a zone
/// no longer configured, and served unsigned without the update
/// (regression hunt).
#[test]
fn a_zone_of_no_other_setting_losing_its_policy_and_allow_update_under_never_keeps_its_updates() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_alone(dir.path());
    let addr = server.addr();
    let without = |gone: &[&str]| reconfigure_without(&server, dir.path(), gone);
    assert_eq!(
        nsupdate(addr, "update add pending.sup.test 300 TXT \"kept\""),
        "NOERROR"
    );
    let (ok, said) = without(&[
        "allow-update",
        "zonefile-sync",
        "dnssec-policy = ",
        "key-directory",
    ]);
    // Not applied whole: said (black-box finding: a bare "ok").
    assert!(
        !ok && said.contains("it stays signed, taking updates as before,"),
        "{said}"
    );
    let pending = || {
        let out = kdig(addr, &["pending.sup.test", "TXT", "+short"]);
        String::from_utf8_lossy(&out.stdout).contains("kept")
    };
    let signed = || !kdig(addr, &[ZONE, "DNSKEY", "+short"]).stdout.is_empty();
    assert!(pending(), "{}", server.log());
    assert!(signed(), "still signed: {}", server.log());
    assert!(
        !server.log().contains("no longer configured"),
        "{}",
        server.log()
    );
    let (ok, said) = ctl(dir.path(), &["flush", ZONE]);
    assert!(ok, "{said}");
    let (ok, said) = ctl(dir.path(), &["reconfigure"]);
    assert!(ok, "{said}\n{}", server.log());
    assert!(eventually(|| !signed()), "{}", server.log());
    assert!(kept(addr), "{}", server.log());
}

/// The zone of no other setting kept signed, taking updates, after its
/// policy and `allow-update` went under `"never"`, restarted on that
/// configuration before a flush: its journal's signed steps are carried
/// over to its file's zone, served unsigned with every update answered,
/// with an error saying how to write them to the file; the flush does
/// (black-box finding: the file alone was served, the journal ignored).
#[test]
fn a_zone_of_no_other_setting_kept_signed_under_never_keeps_its_updates_at_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_alone(dir.path());
    let addr = server.addr();
    let without = |gone: &[&str]| reconfigure_without(&server, dir.path(), gone);
    let add = |addr, name: &str| nsupdate(addr, &format!("update add {name} 300 TXT \"kept\""));
    assert_eq!(add(addr, "first.sup.test"), "NOERROR");
    let gone = [
        "allow-update",
        "zonefile-sync",
        "dnssec-policy = ",
        "key-directory",
    ];
    let (ok, said) = without(&gone);
    assert!(!ok, "{said}");
    assert_eq!(add(addr, "second.sup.test"), "NOERROR");
    let signed_serial = zone_serial(addr, ZONE).unwrap();
    let server = restarted(server, ZONE);
    let addr = server.addr();
    let kept = |addr, name: &str| {
        let out = kdig(addr, &[name, "TXT", "+short"]);
        String::from_utf8_lossy(&out.stdout).contains("kept")
    };
    for name in ["first.sup.test", "second.sup.test"] {
        assert!(kept(addr, name), "{name}: {}", server.log());
    }
    assert!(kdig(addr, &[ZONE, "DNSKEY", "+short"]).stdout.is_empty());
    let serial = zone_serial(addr, ZONE).unwrap();
    assert!(serial > signed_serial, "{serial} after {signed_serial}");
    let advice = format!("until they are in the file (heron ctl flush {ZONE}.)");
    assert!(server.log().contains(&advice), "{}", server.log());
    let (ok, said) = ctl(dir.path(), &["flush", ZONE]);
    assert!(ok, "{said}");
    let server = restarted(server, ZONE);
    let addr = server.addr();
    for name in ["first.sup.test", "second.sup.test"] {
        assert!(kept(addr, name), "{name}: {}", server.log());
    }
    assert!(!server.log().contains("ERROR"), "{}", server.log());
}

/// A signed zone under `"never"` taken out of the configuration and put
/// back by reconfigures takes up its journal, as a restart does: the
/// update answered before is served again, signed, and survives the next
/// update and a restart (black-box finding: the journal was started over
/// at the re-add, the update lost for good).
#[test]
fn a_signed_zone_put_back_takes_up_its_journal() {
    let dir = tempfile::tempdir().unwrap();
    let never = "zonefile-sync = \"never\"";
    let mut server = start_with(dir.path(), "", never);
    let addr = server.addr();
    assert_eq!(
        nsupdate(addr, "update add a1.sup.test 300 TXT \"kept1\""),
        "NOERROR"
    );
    let serial = zone_serial(addr, ZONE).unwrap();
    let zone_section = take_out(&server, dir.path());
    let (ok, said) = put_back(&server, dir.path(), &zone_section);
    assert!(ok, "{said}\n{}", server.log());
    let has = |addr: SocketAddr, name: &str, text: &str| {
        let out = kdig(addr, &[name, "TXT", "+short"]);
        String::from_utf8_lossy(&out.stdout).contains(text)
    };
    assert!(has(addr, "a1.sup.test", "kept1"), "{}", server.log());
    assert!(
        zone_serial(addr, ZONE).unwrap() > serial,
        "{}",
        server.log()
    );
    verify_with_tools(&SignedZone::from_text(ZONE, &axfr(addr)), true);
    assert_eq!(
        nsupdate(addr, "update add a2.sup.test 300 TXT \"kept2\""),
        "NOERROR"
    );
    server.kill();
    let restarted = start_with(dir.path(), "", never);
    let addr = restarted.addr();
    assert!(has(addr, "a1.sup.test", "kept1"), "{}", restarted.log());
    assert!(has(addr, "a2.sup.test", "kept2"), "{}", restarted.log());
}

/// A signed zone whose file is moved (copied, `file` pointed at the
/// copy, a reconfigure) while the file lacks updates takes its journal
/// along: after a restart the copy is served with the updates, signed
/// (black-box finding: served without them, at a newer serial, and no
/// line said so).
#[test]
fn a_signed_zone_whose_file_moves_keeps_its_updates() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start_with(dir.path(), "", "zonefile-sync = 600");
    let addr = server.addr();
    assert_eq!(
        nsupdate(addr, "update add a1.sup.test 300 TXT \"kept1\""),
        "NOERROR"
    );
    let (file, moved) = (dir.path().join("sup.zone"), dir.path().join("moved.zone"));
    std::fs::copy(&file, &moved).unwrap();
    let config = server.dir().join("heron.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    let text = text.replace(&file.display().to_string(), &moved.display().to_string());
    std::fs::write(&config, &text).unwrap();
    // The copy is no edit (black-box finding: refused as one).
    let (ok, said) = ctl(dir.path(), &["reconfigure"]);
    assert!(ok, "{said}\n{}", server.log());
    assert_eq!(
        nsupdate(addr, "update add a2.sup.test 300 TXT \"kept2\""),
        "NOERROR"
    );
    let serial = zone_serial(addr, ZONE).unwrap();
    server.kill();
    let listen = format!("127.0.0.1:{}", addr.port());
    let restarted = ServerProcess::heron_with_config(&heron(), ZONE, move |port| {
        text.replace(&listen, &format!("127.0.0.1:{port}"))
    });
    let addr = restarted.addr();
    let text = axfr(addr);
    for name in ["a1.sup.test.", "a2.sup.test."] {
        assert!(text.contains(name), "{name}\n{}", restarted.log());
    }
    assert!(zone_serial(addr, ZONE).unwrap() > serial);
    verify_with_tools(&SignedZone::from_text(ZONE, &text), true);
}

/// A zone whose policy has gone insecure (every key retired, served
/// unsigned) still takes updates, served unsigned as the docs say
/// (black-box finding: each was answered SERVFAIL, "no KSK or CSK").
#[test]
fn an_insecure_zone_takes_updates_unsigned() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), "insecure = true");
    let addr = server.addr();
    let unsigned_axfr = || {
        let out = kdig(addr, &[ZONE, "AXFR", "+nocomments", "+nostats"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(!unsigned_axfr().contains("RRSIG"), "served unsigned");
    let said = nsupdate(addr, &format!("update add new.{ZONE}. 300 A 192.0.2.99\n"));
    assert_eq!(said, "NOERROR", "{}", server.log());
    let text = unsigned_axfr();
    assert!(
        text.contains("192.0.2.99") && !text.contains("RRSIG"),
        "{text}"
    );
}

/// A signed zone served at serial S after updates, restarted with its
/// signed copy older than S (written paced, before the updates) and its
/// journal `damaged` (lost, as a restore of the file and keys alone
/// leaves it, or its last entry torn): it serves a serial past S, the
/// one kept in the key directory, not one past the copy's, which its
/// secondaries holding S would ignore (black-box finding AK-1: 301
/// served, then 203; or 301 again without the last update).
fn the_serial_goes_on_past_the_one_served(damage: impl FnOnce(&Path)) {
    let dir = tempfile::tempdir().unwrap();
    let policy = "denial = \"nsec3\"";
    let mut server = start_with(dir.path(), policy, "zonefile-sync = 3600");
    let copy = dir.path().join("sup.zone.signed");
    assert!(eventually(|| copy.exists()), "{}", server.log());
    let copy_at_start = std::fs::read(&copy).unwrap();
    for i in 0..3 {
        let added = nsupdate(
            server.addr(),
            &format!("update add u{i}.{ZONE} 300 A 192.0.2.7"),
        );
        assert_eq!(added, "NOERROR", "{}", server.log());
    }
    let served = zone_serial(server.addr(), ZONE).unwrap();
    server.kill();
    std::fs::write(&copy, copy_at_start).unwrap();
    damage(&dir.path().join("sup.zone.jnl"));
    let restarted = start_with(dir.path(), policy, "zonefile-sync = 3600");
    let serial = zone_serial(restarted.addr(), ZONE).unwrap();
    assert!(
        serial.wrapping_sub(served) as i32 > 0,
        "serial {serial} after {served}\n{}",
        restarted.log()
    );
    let text = axfr(restarted.addr());
    verify_with_tools(&SignedZone::from_text(ZONE, &text), true);
    let kept = std::fs::read_to_string(dir.path().join("keys/sup.test.heron-serial")).unwrap();
    // Its first line (a second says the file's serial last read).
    assert_eq!(
        kept.lines().next(),
        Some(serial.to_string().as_str()),
        "{kept}"
    );
}

#[test]
fn the_serial_goes_on_past_the_one_served_without_the_journal() {
    the_serial_goes_on_past_the_one_served(|journal| std::fs::remove_file(journal).unwrap());
}

/// The journal's last entry torn, as a crash while it was written leaves it.
fn tear(journal: &Path) {
    let len = std::fs::metadata(journal).unwrap().len();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(journal)
        .unwrap();
    file.set_len(len - 7).unwrap();
}

#[test]
fn the_serial_goes_on_past_the_one_served_with_the_journal_torn() {
    the_serial_goes_on_past_the_one_served(tear);
}

/// The zone file broken too: the signed copy brought forward by the
/// journal is served, signed again past the serial served.
#[test]
fn the_serial_goes_on_past_the_one_served_with_the_journal_torn_and_the_file_broken() {
    the_serial_goes_on_past_the_one_served(|journal| {
        tear(journal);
        let file = journal.with_extension("");
        let text = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, text + "broken A 192.0.2\n").unwrap();
    });
}

/// A kept serial that cannot be read is said, naming its file (black-box
/// finding AK-2: a garbage or empty one was passed over in silence).
#[test]
fn an_unreadable_kept_serial_is_said() {
    let dir = tempfile::tempdir().unwrap();
    let policy = "denial = \"nsec3\"";
    let mut server = start(dir.path(), policy);
    let kept = dir.path().join("keys/sup.test.heron-serial");
    assert!(eventually(|| kept.exists()), "{}", server.log());
    server.terminate();
    std::fs::write(&kept, "xyz\n").unwrap();
    let restarted = start(dir.path(), policy);
    assert!(
        restarted.wait_for_log("sup.test.heron-serial, cannot be read"),
        "{}",
        restarted.log()
    );
}

/// A zone Heron signs that loses `allow-update` (its policy kept) under
/// `"never"` while its file lacks updates: the reconfigure says the
/// journal is kept and replayed at a restart (not a bare "ok"), a reload
/// keeps them served, a restart before the flush serves them, signed,
/// with an error saying to flush, and after `heron ctl flush` a restart
/// serves them from the file, with no error (black-box finding: nothing
/// said, a restart served the file without them; regression hunt AO-9:
/// a restart before the flush dropped them without a word).
#[test]
fn a_signed_zone_losing_allow_update_under_never_keeps_its_updates_until_flushed() {
    let dir = tempfile::tempdir().unwrap();
    let (server, ok, said) = held_signed_zone(dir.path());
    let addr = server.addr();
    let advice = format!(
        "is kept (replayed at a restart), until they are in the file (heron ctl flush {ZONE}.)"
    );
    assert!(!ok && said.contains(&advice), "{said}");
    let (_, said) = ctl(dir.path(), &["reload", "--force", ZONE]);
    assert!(kept(addr), "{said}\n{}", server.log());
    let server = restarted(server, ZONE);
    assert!(kept(server.addr()), "{}", server.log());
    let advice = format!("until they are in the file (heron ctl flush {ZONE}.)");
    assert!(server.log().contains(&advice), "{}", server.log());
    let more = "update add more.sup.test 300 TXT \"no\"";
    assert_ne!(nsupdate(server.addr(), more), "NOERROR");
    verify_with_tools(&SignedZone::from_text(ZONE, &axfr(server.addr())), true);
    let (ok, said) = ctl(dir.path(), &["flush", ZONE]);
    assert!(ok, "{said}");
    let server = restarted(server, ZONE);
    assert!(kept(server.addr()), "{}", server.log());
    assert!(!server.log().contains("ERROR"), "{}", server.log());
}

/// A server of the signed zone under `"never"` that answered an update
/// (`pending`, [`kept`]) and then lost `allow-update` by a reconfigure
/// (its control socket in `dir`): whether that reconfigure succeeded, and
/// what it said.
fn held_signed_zone(dir: &Path) -> (ServerProcess, bool, String) {
    let server = start_with(dir, "", "zonefile-sync = \"never\"");
    let add = "update add pending.sup.test 300 TXT \"kept\"";
    assert_eq!(nsupdate(server.addr(), add), "NOERROR");
    let (ok, said) = reconfigure_without(&server, dir, &["allow-update", "zonefile-sync"]);
    (server, ok, said)
}

/// Whether `server` serves the update of [`held_signed_zone`].
fn kept(server: SocketAddr) -> bool {
    let out = kdig(server, &["pending.sup.test", "TXT", "+short"]);
    String::from_utf8_lossy(&out.stdout).contains("kept")
}

/// A signed zone holding updates (its `allow-update` removed under
/// `"never"`) whose `dnssec-policy` is then removed too: it stays
/// signed with the updates, taking none, through every reconfigure until
/// `heron ctl flush`, which writes them to its file; the next
/// reconfigure serves that file unsigned, the updates in it (regression
/// hunt AO-3: signed again from its file, the updates no longer served,
/// and the flush wrote the file without them).
#[test]
fn a_held_signed_zone_losing_its_policy_keeps_its_updates() {
    let dir = tempfile::tempdir().unwrap();
    let (server, ok, said) = held_signed_zone(dir.path());
    assert!(!ok, "{said}");
    let addr = server.addr();
    let signed = || !kdig(addr, &[ZONE, "DNSKEY", "+short"]).stdout.is_empty();
    for _ in 0..2 {
        let (ok, said) =
            reconfigure_without(&server, dir.path(), &["dnssec-policy = ", "key-directory"]);
        let advice =
            format!("until they are in it (heron ctl flush {ZONE}., then heron ctl reconfigure)");
        assert!(!ok && said.contains(&advice), "{said}");
        assert!(kept(addr), "{said}\n{}", server.log());
        assert!(signed(), "still signed: {}", server.log());
    }
    let more = "update add more.sup.test 300 TXT \"no\"";
    assert_ne!(nsupdate(addr, more), "NOERROR");
    let (ok, said) = ctl(dir.path(), &["flush", ZONE]);
    assert!(ok, "{said}");
    let file = std::fs::read_to_string(dir.path().join("sup.zone")).unwrap();
    assert!(file.contains("pending.sup.test."), "{file}");
    let (ok, said) = ctl(dir.path(), &["reconfigure"]);
    assert!(ok, "{said}\n{}", server.log());
    assert!(eventually(|| !signed()), "{}", server.log());
    assert!(kept(addr), "{}", server.log());
}

/// A signed zone holding updates (its `allow-update` removed under
/// `"never"`) whose file is edited: the reload that refuses the edit, and
/// `heron ctl freeze` (which refuses such a zone), name the way that
/// works, and it does: flush, reconfigure, edit again, reload serves the
/// edit with the update (regression hunt AO-7: the error said to freeze,
/// which refused "takes no updates").
#[test]
fn a_held_signed_zones_edit_is_refused_naming_a_way_that_works() {
    let dir = tempfile::tempdir().unwrap();
    let (server, ok, said) = held_signed_zone(dir.path());
    assert!(!ok, "{said}");
    let addr = server.addr();
    let file = dir.path().join("sup.zone");
    let edited = |text: &str| format!("{text}byhand.sup.test. 300 IN TXT \"edit\"\n");
    let text = zone_text().replace("hostmaster 1 ", "hostmaster 20 ");
    std::fs::write(&file, edited(&text)).unwrap();
    let flush = format!("heron ctl flush {ZONE}.");
    let (ok, said) = ctl(dir.path(), &["reload", ZONE]);
    assert!(!ok && said.contains(&flush), "{said}");
    let (ok, said) = ctl(dir.path(), &["freeze", ZONE]);
    assert!(!ok && said.contains(&flush), "{said}");
    let (ok, said) = ctl(dir.path(), &["flush", ZONE]);
    assert!(ok, "{said}");
    let (ok, said) = ctl(dir.path(), &["reconfigure"]);
    assert!(ok, "{said}\n{}", server.log());
    let flushed = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, edited(&flushed)).unwrap();
    let (ok, said) = ctl(dir.path(), &["reload", ZONE]);
    assert!(ok, "{said}\n{}", server.log());
    let out = kdig(addr, &["byhand.sup.test", "TXT", "+short"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("edit"));
    assert!(kept(addr), "{}", server.log());
}

/// A zone that takes updates, gone insecure as documented (served
/// unsigned past its signed serials, restarted so), then its policy
/// removed: its serial goes on past the one served, not back to its
/// file's (black-box finding BC-5: 3 -> 1, the secondaries stuck).
#[test]
fn a_dynamic_zone_gone_insecure_keeps_its_serial_when_its_policy_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), "");
    let addr = server.addr();
    let axfr = || String::from_utf8_lossy(&kdig(addr, &[ZONE, "AXFR"]).stdout).into_owned();
    assert!(eventually(|| axfr().contains("RRSIG")), "{}", server.log());
    let config = server.dir().join("heron.toml");
    let signed = std::fs::read_to_string(&config).unwrap();
    let insecure = signed.replace("name = \"p\"\n", "name = \"p\"\ninsecure = true\n");
    std::fs::write(&config, insecure).unwrap();
    let (ok, said) = ctl(dir.path(), &["reconfigure"]);
    assert!(ok, "{said}\n{}", server.log());
    assert!(eventually(|| !axfr().contains("RRSIG")), "{}", server.log());
    drop(server);
    let server = start(dir.path(), "insecure = true");
    let addr = server.addr();
    let served = zone_serial(addr, ZONE).unwrap();
    take_the_policy_away(&server);
    let (ok, said) = ctl(dir.path(), &["reconfigure"]);
    assert!(ok, "{said}\n{}", server.log());
    let serial = zone_serial(addr, ZONE).unwrap();
    assert!(
        serial.wrapping_sub(served) as i32 > 0,
        "serial {serial} after {served}\n{}",
        server.log()
    );
    assert!(!server.log().contains("went back"), "{}", server.log());
    // A restart keeps it.
    drop(server);
    let restarted = start_unsigned(dir.path(), "");
    let again = zone_serial(restarted.addr(), ZONE).unwrap();
    assert!(
        again.wrapping_sub(serial) as i32 >= 0,
        "{again} after {serial}\n{}",
        restarted.log()
    );
}

/// A signed zone whose serial updates moved 2^31 and more past its
/// file's (the serial reset of RFC 1982: add less than 2^31, then set
/// the target) goes on past the serial served at a restart, not back to
/// its file's, which was served before with other content (black-box
/// finding BE-1: 4000000001, then 1 again).
#[test]
fn a_restart_goes_on_past_a_serial_moved_far_by_updates() {
    let dir = tempfile::tempdir().unwrap();
    let never = "zonefile-sync = \"never\"";
    let server = start_with(dir.path(), "", never);
    let addr = server.addr();
    for serial in [2_000_000_000u32, 4_000_000_000] {
        let soa = format!(
            "update add {ZONE} 300 SOA ns.{ZONE} hostmaster.{ZONE} {serial} 3600 600 86400 60"
        );
        assert_eq!(nsupdate(addr, &soa), "NOERROR", "{}", server.log());
    }
    let add = format!("update add after.{ZONE} 300 A 192.0.2.1");
    assert_eq!(nsupdate(addr, &add), "NOERROR");
    let served = zone_serial(addr, ZONE).unwrap();
    assert!(served > 4_000_000_000, "{served}");
    drop(server);
    let restarted = start_with(dir.path(), "", never);
    let serial = zone_serial(restarted.addr(), ZONE).unwrap();
    // Serial arithmetic calls the file's 1 newer than 4000000001 too.
    let step = serial.wrapping_sub(served);
    assert!(
        (1..100).contains(&step),
        "serial {serial} after {served}\n{}",
        restarted.log()
    );
    let out = kdig(restarted.addr(), &[&format!("after.{ZONE}"), "A", "+short"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("192.0.2.1"));
    // The file touched (a restore, a deploy of the same file): still no
    // news (regression hunt BG-1: by modification time it was).
    drop(restarted);
    let file = dir.path().join("sup.zone");
    let text = std::fs::read(&file).unwrap();
    std::fs::write(&file, text).unwrap();
    let again = start_with(dir.path(), "", never);
    let next = zone_serial(again.addr(), ZONE).unwrap();
    assert!(
        (1..100).contains(&next.wrapping_sub(serial)),
        "{next} after {serial}\n{}",
        again.log()
    );
}

/// [`start`] in `dir` under the default policy, once it has answered
/// one update.
fn started_and_updated(dir: &Path) -> (ServerProcess, SocketAddr) {
    let server = start(dir, "");
    let addr = server.addr();
    let first = "update add first.sup.test 60 A 192.0.2.1";
    assert_eq!(nsupdate(addr, first), "NOERROR", "{}", server.log());
    (server, addr)
}

/// An updated zone that cannot be signed (its served-serial file cannot
/// be written: here a folder stands in its way, as a full disk would)
/// answers its updates SERVFAIL with a limited number of log lines, and
/// `heron ctl zone-status` says why until a batch is signed again
/// (black-box finding BO2: a line per update, and zone-status silent).
#[test]
fn updates_that_cannot_be_signed_are_said_in_zone_status_and_limited_lines() {
    let dir = tempfile::tempdir().unwrap();
    let (server, addr) = started_and_updated(dir.path());
    let serial_file = dir.path().join("keys").join(format!("{ZONE}.heron-serial"));
    let _ = std::fs::remove_file(&serial_file);
    std::fs::create_dir(&serial_file).unwrap();
    for i in 0..14 {
        let add = format!("update add n{i}.sup.test 60 A 192.0.2.1");
        assert_eq!(nsupdate(addr, &add), "SERVFAIL", "update {i}");
    }
    let lines = server
        .log()
        .matches("the updated zone cannot be signed")
        .count();
    assert!(
        (1..=10).contains(&lines),
        "{lines} lines:\n{}",
        server.log()
    );
    let (ok, said) = ctl(dir.path(), &["zone-status", ZONE]);
    assert!(ok && said.contains("updated zone not signed"), "{said}");
    assert!(said.contains(".heron-serial"), "{said}");
    std::fs::remove_dir(&serial_file).unwrap();
    let last = "update add last.sup.test 60 A 192.0.2.1";
    assert_eq!(nsupdate(addr, last), "NOERROR");
    let (_, said) = ctl(dir.path(), &["zone-status", ZONE]);
    assert!(!said.contains("updated zone not signed"), "{said}");
    // No longer signed here: nothing of it is said (regression hunt
    // BR-6: a failure stayed after the policy went).
    std::fs::remove_file(&serial_file).unwrap();
    std::fs::create_dir(&serial_file).unwrap();
    let add = "update add again.sup.test 60 A 192.0.2.1";
    assert_eq!(nsupdate(addr, add), "SERVFAIL");
    let config = server.dir().join("heron.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    let unsigned: String = (text.lines())
        .filter(|l| !l.starts_with("dnssec-policy =") && !l.starts_with("key-directory ="))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&config, unsigned).unwrap();
    let (ok, said) = ctl(dir.path(), &["reconfigure"]);
    assert!(ok, "{said}");
    let (_, said) = ctl(dir.path(), &["zone-status", ZONE]);
    assert!(!said.contains("updated zone not signed"), "{said}");
}

/// In an NSEC3 zone whose only names are the apex and the NSEC3 owners
/// the signer made, a DNAME at the apex is taken (as under NSEC, and as
/// from the zone's file); one with a name of its own below stays refused
/// (black-box finding BP-1: the NSEC3 owners counted as names below).
#[test]
fn an_apex_dname_is_taken_in_an_nsec3_zone_with_no_names_below() {
    let dir = tempfile::tempdir().unwrap();
    let apex_only = format!(
        "$ORIGIN {ZONE}.\n$TTL 300\n@ SOA ns.example.net. h.example.net. 1 3600 600 86400 300\n\
         @ NS ns.example.net.\n"
    );
    std::fs::write(dir.path().join("sup.zone"), apex_only).unwrap();
    let server = start(dir.path(), "denial = \"nsec3\"");
    let addr = server.addr();
    let add = format!("update add {ZONE} 300 DNAME elsewhere.example.");
    assert_eq!(nsupdate(addr, &add), "NOERROR", "{}", server.log());
    assert!(axfr(addr).contains("DNAME"), "{}", server.log());
    let delete = format!("update delete {ZONE} DNAME");
    assert_eq!(nsupdate(addr, &delete), "NOERROR");
    assert_eq!(
        nsupdate(addr, "update add www.sup.test 60 A 192.0.2.1"),
        "NOERROR"
    );
    assert_eq!(nsupdate(addr, &add), "REFUSED", "a name below now");
}

/// Updates refused because their journal cannot be written (here a
/// folder in its place, as a full disk refuses it) are never served, nor
/// logged as signed: "change signed" is said of versions served only
/// (regression hunt BS-2: a line each, naming a serial never served).
#[test]
fn updates_refused_for_their_journal_are_not_said_signed() {
    let dir = tempfile::tempdir().unwrap();
    let (server, addr) = started_and_updated(dir.path());
    assert!(server.wait_for_log("change signed"), "{}", server.log());
    let said = || server.log().matches("change signed").count();
    let before = said();
    let journal = dir.path().join("sup.zone.jnl");
    let _ = std::fs::remove_file(&journal);
    std::fs::create_dir(&journal).unwrap();
    for i in 0..5 {
        let add = format!("update add n{i}.sup.test 60 A 192.0.2.1");
        assert_eq!(nsupdate(addr, &add), "SERVFAIL", "{}", server.log());
    }
    assert_eq!(said(), before, "{}", server.log());
}
