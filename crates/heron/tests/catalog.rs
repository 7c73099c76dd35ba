//! Heron as a catalog zone consumer (RFC 9432), against real producers:
//! Knot and a Heron primary each serve a catalog zone written as a file
//! (so the test sets unique IDs and groups exactly) and its member zones,
//! and NOTIFY Heron of every change. Starting with three members, a
//! member is added, one removed, one moved to another group (whose
//! template lets 127.0.0.1 transfer it) and one reset (a new unique ID);
//! after each step Heron serves exactly the member zones listed (SOA over
//! UDP) and refuses the others. A bad version of the catalog changes
//! nothing, and so does a reload of the configuration. Restarted without its primary, Heron serves the members of
//! the catalog copy it kept, and `heron ctl zone-status` names each
//! member's catalog.

mod xfr_common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use heron_proto::message::Message;
use heron_proto::{Name, RType, Rcode};
use heron_testkit::{
    QueryOpts, ServerKind, ServerProcess, build_query, free_port, knot_primary_of, try_query_tcp,
    try_query_udp,
};
use xfr_common::*;

const CATALOG: &str = "cat.test";
/// Every zone the producer serves besides the catalog.
const ZONES: [&str; 4] = ["a.test", "b.test", "c.test", "d.test"];

/// A member: unique ID, zone, group.
type Listed<'a> = (&'a str, &'a str, Option<&'a str>);

fn catalog_text(serial: u32, members: &[Listed]) -> String {
    let mut text = format!(
        "$ORIGIN {CATALOG}.\n$TTL 0\n@ SOA invalid. invalid. {serial} 3600 600 86400 0\n\
         @ NS invalid.\nversion TXT \"2\"\n"
    );
    for (id, zone, group) in members {
        text.push_str(&format!("{id}.zones PTR {zone}.\n"));
        if let Some(group) = group {
            text.push_str(&format!("group.{id}.zones TXT \"{group}\"\n"));
        }
    }
    text
}

fn member_text(zone: &str) -> String {
    format!(
        "$ORIGIN {zone}.\n$TTL 300\n@ SOA ns hostmaster 1 3600 600 86400 60\n\
         @ NS ns\nns A 192.0.2.1\nwww A 192.0.2.80\n"
    )
}

fn work_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("heron-cat-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn key_block() -> String {
    format!("[[key]]\nname = \"{KEY}\"\nalgorithm = \"hmac-sha256\"\nsecret = \"{SECRET}\"\n")
}

/// The consumer: the catalog from `primary`; members of group "blue" may
/// be transferred by 127.0.0.1, others by nobody.
fn consumer_config(port: u16, primary: SocketAddr, dir: &Path) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\ncontrol = \"{}\"\n{}\
         [[catalog]]\nzone = \"{CATALOG}\"\nfile = \"{}\"\nprimaries = [\"{primary} key {KEY}\"]\n\
         members-dir = \"{}\"\n\
         [catalog.group.blue]\nallow-transfer = [\"127.0.0.1\"]\n",
        dir.join("ctl.sock").display(),
        key_block(),
        dir.join("kept").join("cat.test.zone").display(),
        dir.join("kept").join("members").display(),
    )
}

/// A Heron primary of the catalog and every zone, notifying `consumer`.
fn heron_primary_config(port: u16, files: &[(String, PathBuf)], consumer: SocketAddr) -> String {
    let mut config = format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n{}",
        key_block()
    );
    for (origin, file) in files {
        config.push_str(&format!(
            "[[zone]]\norigin = \"{origin}\"\nfile = \"{}\"\n\
             allow-transfer = [\"127.0.0.1 key {KEY}\"]\nnotify = [\"{consumer} key {KEY}\"]\n",
            file.display()
        ));
    }
    config
}

fn rcode(addr: SocketAddr, zone: &str, qtype: RType) -> Option<Rcode> {
    let q = build_query(&Name::parse(zone).unwrap(), qtype, &QueryOpts::default());
    let reply = match qtype {
        RType::AXFR => try_query_tcp(addr, &q),
        _ => try_query_udp(addr, &q),
    };
    Some(Message::parse(&reply.ok()?).ok()?.rcode())
}

/// Whether `addr` serves the SOA of exactly the zones in `wanted` and
/// refuses the other zones.
fn serves_exactly(addr: SocketAddr, wanted: &[&str]) -> bool {
    ZONES.iter().all(|zone| match wanted.contains(zone) {
        true => zone_serial(addr, zone) == Some(1),
        false => rcode(addr, zone, RType::SOA) == Some(Rcode::REFUSED),
    })
}

fn assert_serves_exactly(consumer: &ServerProcess, wanted: &[&str], step: &str) {
    assert!(
        eventually(|| serves_exactly(consumer.addr(), wanted)),
        "{step}: Heron should serve exactly {wanted:?}\n{}",
        consumer.log()
    );
}

/// How many times the log says `zone` came by AXFR.
fn axfrs(log: &str, zone: &str) -> usize {
    log.lines()
        .filter(|l| l.contains(&format!("zone={zone}")) && l.contains("AXFR from"))
        .count()
}

fn zone_status(socket: &Path) -> serde_json::Value {
    let out = Command::new(heron())
        .args(["ctl", "--socket"])
        .arg(socket)
        .args(["zone-status", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["data"].clone()
}

/// The catalog each zone-status row names, by zone.
fn catalogs_named(status: &serde_json::Value) -> Vec<(String, Option<String>)> {
    let rows = status.as_array().unwrap();
    let mut named: Vec<_> = rows
        .iter()
        .map(|row| {
            let zone = row["zone"].as_str().unwrap().to_string();
            (zone, row["catalog"].as_str().map(str::to_string))
        })
        .collect();
    named.sort();
    named
}

fn consume_from(kind: ServerKind) {
    let dir = work_dir(&kind.to_string().to_lowercase());
    let catalog_file = dir.join("cat.test.zone");
    let mut files = vec![(format!("{CATALOG}."), catalog_file.clone())];
    for zone in ZONES {
        let file = dir.join(format!("{zone}.zone"));
        std::fs::write(&file, member_text(zone)).unwrap();
        files.push((format!("{zone}."), file));
    }
    let mut members = vec![
        ("a", "a.test", None),
        ("b", "b.test", None),
        ("c", "c.test", None),
    ];
    std::fs::write(&catalog_file, catalog_text(1, &members)).unwrap();
    let consumer_port = free_port();
    let consumer_addr = SocketAddr::from(([127, 0, 0, 1], consumer_port));
    let mut primary = match kind {
        ServerKind::Knot => knot_primary_of(&files, consumer_addr, Some(&tsig_spec())),
        ServerKind::Heron => {
            let port = free_port();
            let config = heron_primary_config(port, &files, consumer_addr);
            ServerProcess::heron_on_port(&heron(), port, CATALOG, &config)
                .unwrap_or_else(|log| panic!("Heron primary did not start: {log}"))
        }
        other => panic!("no catalog producer test for {other}"),
    };
    let config = consumer_config(consumer_port, primary.addr(), &dir);
    let mut consumer = ServerProcess::heron_on_port(&heron(), consumer_port, CATALOG, &config)
        .unwrap_or_else(|log| panic!("Heron did not serve the catalog: {log}"));
    assert_serves_exactly(&consumer, &["a.test", "b.test", "c.test"], "start");
    // Not in group "blue": nobody may transfer it.
    assert_eq!(
        rcode(consumer.addr(), "a.test", RType::AXFR),
        Some(Rcode::REFUSED)
    );

    let mut serial = 1;
    let mut publish = |members: &[Listed], primary: &ServerProcess| {
        serial += 1;
        std::fs::write(&catalog_file, catalog_text(serial, members)).unwrap();
        primary.reload();
    };

    members.push(("d", "d.test", None));
    publish(&members, &primary);
    assert_serves_exactly(&consumer, &["a.test", "b.test", "c.test", "d.test"], "add");

    let b_kept = dir.join("kept").join("members").join("b.test.zone");
    assert!(eventually(|| b_kept.exists()), "b.test kept");
    members.retain(|(id, _, _)| *id != "b");
    publish(&members, &primary);
    assert_serves_exactly(&consumer, &["a.test", "c.test", "d.test"], "remove");
    assert!(
        eventually(|| !b_kept.exists()),
        "a removed member's kept copy is deleted"
    );

    members[0].2 = Some("blue");
    publish(&members, &primary);
    assert!(
        eventually(|| rcode(consumer.addr(), "a.test", RType::AXFR) == Some(Rcode::NOERROR)),
        "a.test in group blue may be transferred\n{}",
        consumer.log()
    );
    assert_serves_exactly(&consumer, &["a.test", "c.test", "d.test"], "regroup");
    // A reload of the configuration leaves the catalog's members alone.
    consumer.reload();
    assert!(eventually(|| consumer.log().contains("reload done")));
    assert_serves_exactly(&consumer, &["a.test", "c.test", "d.test"], "reload");

    let before = axfrs(&consumer.log(), "c.test");
    members[1].0 = "c2";
    publish(&members, &primary);
    assert!(
        eventually(|| axfrs(&consumer.log(), "c.test") > before),
        "c.test reset: transferred afresh\n{}",
        consumer.log()
    );
    assert_serves_exactly(&consumer, &["a.test", "c.test", "d.test"], "reset");
    assert!(consumer.log().contains("member zone reset"));

    // A version that lists a zone twice is rejected: nothing changes.
    let mut twice = members.clone();
    twice.push(("e", "d.test", None));
    publish(&twice, &primary);
    assert!(
        eventually(|| consumer.log().contains(
            "e.zones.cat.test. PTR d.test.: the zone is already a member as d.zones.cat.test."
        )),
        "{}",
        consumer.log()
    );
    assert_serves_exactly(&consumer, &["a.test", "c.test", "d.test"], "rejected");
    // The catalog's changes came as IXFRs, applied member by member.
    let log = consumer.log();
    let ixfrs = log
        .lines()
        .filter(|l| l.contains("zone=cat.test") && l.contains("IXFR from"));
    assert!(ixfrs.count() >= 5, "{log}");

    let status = zone_status(&dir.join("ctl.sock"));
    let catalog = Some(CATALOG.to_string() + ".");
    assert_eq!(
        catalogs_named(&status),
        [
            ("a.test.".into(), catalog.clone()),
            ("c.test.".into(), catalog.clone()),
            ("cat.test.".into(), None),
            ("d.test.".into(), catalog.clone()),
        ]
    );

    // Without its primary, Heron restarts with the members it consumed.
    primary.terminate();
    consumer.terminate();
    let consumer = ServerProcess::heron_on_port(&heron(), consumer_port, CATALOG, &config)
        .unwrap_or_else(|log| panic!("Heron did not restart: {log}"));
    assert_serves_exactly(&consumer, &["a.test", "c.test", "d.test"], "restart");
    assert_eq!(
        rcode(consumer.addr(), "a.test", RType::AXFR),
        Some(Rcode::NOERROR)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn knot_produces_heron_consumes() {
    consume_from(ServerKind::Knot);
}

#[test]
fn heron_produces_heron_consumes() {
    consume_from(ServerKind::Heron);
}
