//! Heron as a catalog zone producer (RFC 9432) for Knot 3.2 and BIND
//! 9.18 as consumers: Heron generates `catalog.invalid` from the zones
//! naming it, and after each change to its configuration and a reload
//! (a member added, one removed, one's group changed, one's unique ID
//! reset) the consumer serves exactly the members listed, refuses the
//! others, and transfers a reset member afresh. Transfers and NOTIFYs of
//! the catalog and its members are signed with TSIG. Heron consumes its
//! own catalogs too (`[[catalog]]`).

mod xfr_common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use heron_proto::message::Header;
use heron_proto::{Name, RType};
use heron_testkit::{
    CatalogConsumer, QueryOpts, ServerKind, ServerProcess, build_query, free_port, try_query_udp,
};
use xfr_common::{KEY, SECRET, eventually_within, heron, tsig_spec, zone_serial};

const CATALOG: &str = "catalog.invalid.";
/// Every zone the steps use; each is served by Heron throughout.
const ZONES: [&str; 4] = ["one.test", "two.test", "three.test", "four.test"];
/// How long a consumer gets to follow a step.
const STEP_DEADLINE: Duration = Duration::from_secs(30);
const REFUSED: u16 = 5;

/// One member of the catalog, as the configuration makes it.
#[derive(Clone)]
struct Member {
    zone: &'static str,
    group: Option<&'static str>,
    generation: u32,
}

fn member(zone: &'static str) -> Member {
    Member {
        zone,
        group: None,
        generation: 0,
    }
}

/// Heron's configuration: every zone of [`ZONES`] served, `members`
/// listed in the catalog.
fn config(port: u16, consumer_port: u16, zones: &Path, members: &[Member]) -> String {
    let acl = format!("allow-transfer = [\"127.0.0.1 key {KEY}\"]\n");
    let mut text = format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n\
         [[key]]\nname = \"{KEY}\"\nsecret = \"{SECRET}\"\n\
         [[zone]]\norigin = \"{CATALOG}\"\nfile = \"catalog.zone\"\ncatalog = \"generate\"\n{acl}\
         notify = [\"127.0.0.1:{consumer_port} key {KEY}\"]\n"
    );
    for zone in ZONES {
        let file = zones.join(format!("{zone}.zone"));
        text.push_str(&format!(
            "[[zone]]\norigin = \"{zone}\"\nfile = \"{}\"\n{acl}",
            file.display()
        ));
        if let Some(m) = members.iter().find(|m| m.zone == zone) {
            text.push_str(&format!("catalog-member = \"{CATALOG}\"\n"));
            if let Some(group) = m.group {
                text.push_str(&format!("catalog-group = \"{group}\"\n"));
            }
            if m.generation != 0 {
                text.push_str(&format!("catalog-id-generation = {}\n", m.generation));
            }
        }
    }
    text
}

fn write_zones(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for zone in ZONES {
        let text = format!(
            "$ORIGIN {zone}.\n$TTL 300\n@ SOA ns hostmaster 7 3600 600 86400 60\n\
             @ NS ns\nns A 192.0.2.1\nwww A 192.0.2.2\n"
        );
        std::fs::write(dir.join(format!("{zone}.zone")), text).unwrap();
    }
}

fn rcode(addr: SocketAddr, zone: &str) -> Option<u16> {
    let query = build_query(
        &Name::parse(zone).unwrap(),
        RType::SOA,
        &QueryOpts::default(),
    );
    let answer = try_query_udp(addr, &query).ok()?;
    Some(Header::read(&answer)?.rcode())
}

/// What a consumer does not yet match of a step: it must have Heron's
/// catalog serial, answer the SOA of every member and refuse every zone
/// that is not one. Empty when it matches.
fn mismatch(consumer: &Consumer, primary: SocketAddr, members: &[Member]) -> Vec<String> {
    let mut wrong = Vec::new();
    let have = consumer.catalog.catalog_serial(&consumer.server);
    let want = zone_serial(primary, CATALOG);
    let consumer = consumer.server.addr();
    if have != want {
        wrong.push(format!("catalog serial {have:?}, Heron has {want:?}"));
    }
    for zone in ZONES {
        let listed = members.iter().any(|m| m.zone == zone);
        match (listed, zone_serial(consumer, zone), rcode(consumer, zone)) {
            (true, Some(7), _) | (false, None, Some(REFUSED)) => {}
            (true, serial, code) => wrong.push(format!("{zone}: SOA {serial:?}, rcode {code:?}")),
            (false, _, code) => wrong.push(format!("{zone}: rcode {code:?}, not REFUSED")),
        }
    }
    wrong
}

/// A consumer and the catalog it was configured with.
struct Consumer {
    server: ServerProcess,
    catalog: CatalogConsumer,
}

struct Step<'a> {
    consumer: &'a Consumer,
    heron: &'a ServerProcess,
    zones: PathBuf,
    consumer_port: u16,
}

impl Step<'_> {
    /// Writes Heron's configuration with `members`, reloads it, and waits
    /// until the consumer matches; panics naming the `step` and what is
    /// still wrong otherwise.
    fn apply(&self, step: &str, members: &[Member]) {
        let port = self.heron.addr().port();
        let text = config(port, self.consumer_port, &self.zones, members);
        std::fs::write(self.heron.dir().join("heron.toml"), text).unwrap();
        let before = zone_serial(self.heron.addr(), CATALOG);
        self.heron.reload();
        let moved = eventually_within(STEP_DEADLINE, || {
            zone_serial(self.heron.addr(), CATALOG) != before
        });
        assert!(
            moved,
            "{step}: Heron's catalog serial did not move\n{}",
            self.heron.log()
        );
        self.converge(step, members);
    }

    fn converge(&self, step: &str, members: &[Member]) {
        let (consumer, primary) = (self.consumer, self.heron.addr());
        let matched = eventually_within(STEP_DEADLINE, || {
            mismatch(consumer, primary, members).is_empty()
        });
        assert!(
            matched,
            "{step}: {:?}\nconsumer log:\n{}",
            mismatch(consumer, primary, members),
            self.consumer.server.log()
        );
    }
}

/// How many transfers of `zone` the consumer's log says finished.
fn transfers_of(kind: ServerKind, log: &str, zone: &str) -> usize {
    let finished = |line: &&str| match kind {
        ServerKind::Knot => {
            line.contains(&format!("[{zone}.] AXFR, incoming")) && line.contains("finished")
        }
        ServerKind::Heron => line.contains(&format!("zone={zone}.")) && line.contains("AXFR from"),
        _ => {
            line.contains(&format!("transfer of '{zone}/IN'"))
                && line.contains("Transfer completed")
        }
    };
    log.lines().filter(finished).count()
}

fn catalog_steps(kind: ServerKind) {
    let work = std::env::temp_dir().join(format!(
        "heron-catalog-producer-{kind}-{}",
        std::process::id()
    ));
    let zones = work.join("zones");
    write_zones(&zones);
    let (port, consumer_port) = (free_port(), free_port());
    let mut members = vec![member("one.test"), member("two.test"), member("three.test")];
    let text = config(port, consumer_port, &zones, &members);
    let heron = ServerProcess::heron_on_port(&heron(), port, CATALOG, &text)
        .unwrap_or_else(|log| panic!("Heron did not start: {log}"));
    let catalog = CatalogConsumer {
        catalog: CATALOG.into(),
        primary: heron.addr(),
        key: Some(tsig_spec()),
        groups: vec!["gold".into()],
    };
    let server = match kind {
        ServerKind::Heron => {
            let config = heron_consumer_config(consumer_port, heron.addr());
            ServerProcess::heron_on_port(&xfr_common::heron(), consumer_port, "one.test.", &config)
                .unwrap_or_else(|log| panic!("the Heron consumer did not start: {log}"))
        }
        _ => catalog.start(kind, consumer_port, "one.test."),
    };
    let consumer = Consumer { server, catalog };
    let step = Step {
        consumer: &consumer,
        heron: &heron,
        zones,
        consumer_port,
    };
    step.converge("start with three members", &members);

    members.push(member("four.test"));
    step.apply("add four.test", &members);

    members.retain(|m| m.zone != "two.test");
    step.apply("remove two.test", &members);

    members[0].group = Some("gold");
    step.apply("one.test into group gold", &members);

    let before = transfers_of(kind, &consumer.server.log(), "three.test");
    members
        .iter_mut()
        .find(|m| m.zone == "three.test")
        .unwrap()
        .generation = 1;
    step.apply("reset three.test's unique ID", &members);
    let transferred_again = eventually_within(STEP_DEADLINE, || {
        transfers_of(kind, &consumer.server.log(), "three.test") > before
    });
    assert!(
        transferred_again,
        "three.test was not transferred afresh after its reset ({before} transfers before)\n{}",
        consumer.server.log()
    );
    step.converge("after the reset", &members);
    drop(consumer);
    drop(heron);
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn knot_consumes_a_catalog_heron_generates() {
    catalog_steps(ServerKind::Knot);
}

#[test]
fn heron_consumes_a_catalog_heron_generates() {
    catalog_steps(ServerKind::Heron);
}

/// A Heron consumer of [`CATALOG`] from `primary`, with a template for
/// group "gold".
fn heron_consumer_config(port: u16, primary: SocketAddr) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n\
         [[key]]\nname = \"{KEY}\"\nsecret = \"{SECRET}\"\n\
         [[catalog]]\nzone = \"{CATALOG}\"\nfile = \"kept/catalog.zone\"\n\
         primaries = [\"{primary} key {KEY}\"]\nmembers-dir = \"kept/members\"\n\
         [catalog.group.gold]\n"
    )
}

#[test]
fn bind_consumes_a_catalog_heron_generates() {
    catalog_steps(ServerKind::Bind);
}

/// Heron's configuration for the tests of Heron alone: the catalog kept
/// in `work`, where a restart finds it again; `extra` after it.
fn alone_config(port: u16, work: &Path, members: &[Member], extra: &str) -> String {
    let text = config(port, free_port(), &work.join("zones"), members);
    let kept = work.join("catalog.zone");
    let text = text.replace(
        "file = \"catalog.zone\"",
        &format!("file = \"{}\"", kept.display()),
    );
    format!("{text}{extra}")
}

#[test]
fn the_catalog_keeps_its_serial_across_restarts_and_idle_reloads_and_goes_when_unconfigured() {
    let work = std::env::temp_dir().join(format!("heron-catalog-alone-{}", std::process::id()));
    write_zones(&work.join("zones"));
    let members = [member("one.test"), member("two.test")];
    let port = free_port();
    let text = alone_config(port, &work, &members, "");
    let binary = heron();
    let mut heron = ServerProcess::heron_on_port(&binary, port, CATALOG, &text)
        .unwrap_or_else(|log| panic!("Heron did not start: {log}"));
    let first = zone_serial(heron.addr(), CATALOG).expect("the catalog is served");

    // A reload that changes no member: the same version.
    heron.reload();
    assert!(heron.wait_for_log("reload done"));
    assert_eq!(zone_serial(heron.addr(), CATALOG), Some(first));

    // A restart: the kept version, same serial.
    heron.terminate();
    let heron = ServerProcess::heron_on_port(&binary, port, CATALOG, &text)
        .unwrap_or_else(|log| panic!("Heron did not restart: {log}"));
    assert_eq!(zone_serial(heron.addr(), CATALOG), Some(first));

    // A member leaves: a new version, and the reload says so.
    let fewer = alone_config(port, &work, &members[..1], "");
    std::fs::write(heron.dir().join("heron.toml"), &fewer).unwrap();
    heron.reload();
    let said = format!("generated catalogs changed: {CATALOG}");
    assert!(heron.wait_for_log(&said), "{}", heron.log());
    std::fs::write(heron.dir().join("heron.toml"), &text).unwrap();
    heron.reload();
    let back = eventually_within(STEP_DEADLINE, || heron.log().matches(&said).count() == 2);
    assert!(back, "{}", heron.log());

    // No longer configured as a catalog: no longer served.
    let catalog_block = format!("origin = \"{CATALOG}\"");
    let without: Vec<&str> = (text.split("[[zone]]\n"))
        .filter(|block| !block.starts_with(&catalog_block))
        .collect();
    let without = without
        .join("[[zone]]\n")
        .replace(&format!("catalog-member = \"{CATALOG}\"\n"), "");
    std::fs::write(heron.dir().join("heron.toml"), without).unwrap();
    heron.reload();
    let gone = eventually_within(STEP_DEADLINE, || {
        rcode(heron.addr(), CATALOG) == Some(REFUSED)
    });
    assert!(gone, "the catalog is still served\n{}", heron.log());
    // Configured again: a zone added, not a catalog changed (black-box
    // finding DJ-5).
    std::fs::write(heron.dir().join("heron.toml"), &text).unwrap();
    heron.reload();
    let added = format!("primary zones added: {CATALOG}");
    assert!(heron.wait_for_log(&added), "{}", heron.log());
    assert_eq!(heron.log().matches(&said).count(), 2, "{}", heron.log());
    drop(heron);
    let _ = std::fs::remove_dir_all(&work);
}

/// `heron check-config` of `text`, written in `dir`: whether it passed,
/// and what it said.
fn check_config(dir: &Path, text: &str) -> (bool, String) {
    let file = dir.join("check.toml");
    std::fs::write(&file, text).unwrap();
    let out = std::process::Command::new(heron())
        .arg("check-config")
        .arg(&file)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    (out.status.success(), said.into_owned())
}

/// `check-config` counts the generated catalog among the zones, as `heron
/// ctl status` does (black-box finding: one fewer).
#[test]
fn check_config_counts_the_generated_catalog() {
    let dir = tempfile::tempdir().unwrap();
    write_zones(dir.path());
    let (_, said) = check_config(
        dir.path(),
        &config(5300, 5301, dir.path(), &[member(ZONES[0])]),
    );
    let zones = ZONES.len() + 1;
    assert!(said.contains(&format!("OK, {zones} zones")), "{said}");
}

/// A configuration with an error elsewhere still says nothing of the
/// generated catalog's file, which Heron writes (black-box finding BF-1:
/// "cannot read zone file" for it after any other error).
#[test]
fn check_config_with_an_error_does_not_read_the_generated_catalogs_file() {
    let dir = tempfile::tempdir().unwrap();
    write_zones(dir.path());
    let text = config(5300, 5301, dir.path(), &[member(ZONES[0])]);
    let broken = format!("{text}\n[[zone]]\norigin = \"x.test\"\nnot-a-key = 1\n");
    let (ok, said) = check_config(dir.path(), &broken);
    assert!(!ok && said.contains("not-a-key"), "{said}");
    assert!(!said.contains("cannot read zone file"), "{said}");
}

/// A configuration of Heron with a control socket, its zones written in
/// `dir`: its port, the socket and the text.
fn controlled(dir: &Path) -> (u16, PathBuf, String) {
    write_zones(dir);
    let socket = dir.join("ctl.sock");
    let port = free_port();
    let text = config(port, free_port(), dir, &[member(ZONES[0])]).replacen(
        "workers = 1\n",
        &format!("workers = 1\ncontrol = \"{}\"\n", socket.display()),
        1,
    );
    (port, socket, text)
}

/// `heron ctl ARGS`: whether it succeeded, and what it said.
fn ctl(socket: &Path, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(heron())
        .args(["ctl", "--socket"])
        .arg(socket)
        .args(args)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&[&out.stdout[..], &out.stderr[..]].concat()).into_owned();
    (out.status.success(), said)
}

/// `heron ctl flush` and `freeze` of the generated catalog say what it is
/// (black-box finding: "not a zone of this server").
#[test]
fn flush_and_freeze_know_the_generated_catalog() {
    let dir = tempfile::tempdir().unwrap();
    let (port, socket, text) = controlled(dir.path());
    let _heron = ServerProcess::heron_on_port(&heron(), port, CATALOG, &text)
        .unwrap_or_else(|log| panic!("Heron did not start: {log}"));
    let ctl = |args: &[&str]| ctl(&socket, args).1;
    let said = ctl(&["flush", CATALOG]);
    assert!(said.contains("a catalog generated here"), "{said}");
    let said = ctl(&["freeze", CATALOG]);
    assert!(said.contains("a catalog generated here"), "{said}");
}

/// `text` with `extra` added to the generated catalog's `[[zone]]`.
fn catalog_with(text: &str, extra: &str) -> String {
    let line = "catalog = \"generate\"\n";
    text.replacen(line, &format!("{line}{extra}"), 1)
}

/// A generated catalog takes no updates and is not signed: Heron rebuilds
/// it from the configuration, so an update would be acknowledged and then
/// dropped at the next reload, and a policy was ignored. check-config
/// refuses both, and so does a reload (black-box finding: both accepted).
#[test]
fn a_generated_catalog_refuses_allow_update_and_dnssec_policy() {
    let dir = tempfile::tempdir().unwrap();
    let (port, socket, text) = controlled(dir.path());
    let check = |text: &str| check_config(dir.path(), text);
    let update = catalog_with(&text, "allow-update = [\"127.0.0.1 zonesub ANY\"]\n");
    let signed = catalog_with(&text, "dnssec-policy = \"default\"\n");
    let (ok, said) = check(&update);
    assert!(
        !ok && said.contains("a generated catalog takes no updates"),
        "{said}"
    );
    let (ok, said) = check(&signed);
    assert!(
        !ok && said.contains("a generated catalog is not signed"),
        "{said}"
    );

    let heron = ServerProcess::heron_on_port(&heron(), port, CATALOG, &text)
        .unwrap_or_else(|log| panic!("Heron did not start: {log}"));
    let serial = zone_serial(heron.addr(), CATALOG).expect("the catalog is served");
    std::fs::write(heron.dir().join("heron.toml"), &update).unwrap();
    let (ok, said) = ctl(&socket, &["reconfigure"]);
    assert!(!ok, "{said}");
    assert!(
        said.contains("a generated catalog takes no updates"),
        "{said}"
    );
    assert_eq!(zone_serial(heron.addr(), CATALOG), Some(serial));
}
