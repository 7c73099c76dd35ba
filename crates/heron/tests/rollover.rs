//! Key rollovers run by the server, end to end, in real time: a policy
//! whose lifetimes and TTLs are seconds, a parent zone (served and signed
//! by the same Heron) holding the child's DS, and the child served while
//! its keys roll. At every step seen, `delv` (the parent's key the only
//! trust anchor) calls positive, NXDOMAIN, NODATA and wildcard answers
//! of the child fully validated, and `dnssec-verify` and
//! `ldns-verify-zone` accept the child as transferred out by AXFR.
//! A Knot and a BIND secondary of the child, told of each version by
//! NOTIFY, take every step by IXFR and serve it: `delv` pointed at each
//! validates its copy too.
//!
//! No timing is asserted: each test polls, within a deadline, for the
//! states it waits for.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use heron_testkit::{Secondary, ServerKind, ServerProcess, SignedZone};
use serde_json::Value;

const PARENT: &str = "parent.test.";
const CHILD: &str = "child.parent.test.";

fn heron() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_heron"))
}

fn parent_text(serial: u32, ds: &[String]) -> String {
    let mut text = format!(
        "$TTL 2\n@ SOA ns hostmaster {serial} 60 60 600 2\n@ NS ns\nns A 127.0.0.1\n\
         child NS ns.child\nns.child A 127.0.0.1\n"
    );
    for rdata in ds {
        text.push_str(&format!("child DS {rdata}\n"));
    }
    text
}

const CHILD_TEXT: &str = "$TTL 2\n@ SOA ns hostmaster 1 60 60 600 2\n@ NS ns\n\
    ns A 127.0.0.1\nwww A 192.0.2.1\n*.wild TXT \"wild\"\nsub.deep A 192.0.2.2\n";

/// The rollover timing every test uses: seconds, so that a whole roll
/// takes a few of them.
const FAST: &str = "propagation-delay = \"1s\"\ndnskey-ttl = \"2s\"\ncds-ttl = \"2s\"\n\
    parent-ds-ttl = \"2s\"\nparent-propagation-delay = \"1s\"\nretire-safety = \"1s\"\n";

struct Setup {
    /// Serves the parent zone, signed (one CSK that never rolls).
    parent: ServerProcess,
    /// Serves the child, whose keys roll.
    server: ServerProcess,
    /// What `delv` asks: each query sent to the server of its zone.
    router: Router,
    dir: tempfile::TempDir,
    parent_serial: u32,
    /// Set once the parent holds the child's DS: the child validates.
    secure: bool,
    /// The parent's DS RRset follows the child's CDS (as a parent that
    /// reads CDS would), checked at each poll.
    follow_cds: bool,
    parent_ds: Vec<String>,
    /// The child server's metrics endpoint.
    metrics: SocketAddr,
    /// The child has one CSK (dnssec-verify is told with `-z`).
    csk: bool,
    /// The child's `[[dnssec-policy]]` lines.
    child_config: String,
    /// The child's serial at the last validation: the next one asks for
    /// an IXFR from it.
    last_serial: std::cell::Cell<Option<u32>>,
    /// How many of those IXFRs were answered incrementally.
    incremental: std::cell::Cell<usize>,
    /// The child server's port, kept over a restart (the secondaries'
    /// primary).
    port: u16,
    /// Knot and BIND, secondaries of the child.
    secondaries: Vec<Peer>,
    /// A hidden primary serving the child unsigned, when the child is
    /// signed as its secondary (bump in the wire).
    hidden: Option<ServerProcess>,
    /// The version of the last validation may have reached a secondary
    /// whole: Heron answers the IXFR from the one before with the whole
    /// zone, or had no history (first version, or after a restart).
    whole_ok: std::cell::Cell<bool>,
}

/// A secondary of the child and a router for `delv` to it.
struct Peer {
    server: ServerProcess,
    router: Router,
    /// The serials it was seen to take by an incremental IXFR.
    by_ixfr: std::sync::Mutex<BTreeSet<u32>>,
}

/// Marks where a child's policy lines end and its zone's lines begin.
const ZONE_LINES: &str = "# the zone's lines\n";

/// Heron serving the child on `port` from `base` under the policy
/// `lines` (then, after [`ZONE_LINES`], lines of the zone's own), telling the secondaries on `notify` of each version; and its
/// metrics endpoint. With `hidden`, the child is that primary's
/// secondary, transferred unsigned and signed here.
fn start_child(
    base: &std::path::Path,
    lines: &str,
    port: u16,
    notify: &[u16],
    hidden: Option<SocketAddr>,
) -> (ServerProcess, SocketAddr) {
    let b = base.display();
    let metrics: SocketAddr = format!("127.0.0.1:{}", heron_testkit::free_port())
        .parse()
        .unwrap();
    let notify: Vec<String> = (notify.iter())
        .map(|p| format!("\"127.0.0.1:{p}\""))
        .collect();
    // What follows ZONE_LINES in `lines` belongs to the zone's section.
    let (lines, zone_lines) = lines.split_once(ZONE_LINES).unwrap_or((lines, ""));
    let source = match hidden {
        None => format!("file = \"{b}/child.zone\"\n"),
        Some(primary) => format!("file = \"{b}/kept/child.zone\"\nprimaries = [\"{primary}\"]\n"),
    };
    let config = format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\ncontrol = \"control.sock\"\n\
         [metrics]\nlisten = \"{metrics}\"\n\
         [[dnssec-policy]]\nname = \"child\"\n{lines}\n\
         [[zone]]\norigin = \"{CHILD}\"\n{source}\
         allow-transfer = [\"127.0.0.1\"]\nnotify = [{}]\n\
         dnssec-policy = \"child\"\nkey-directory = \"{b}/child-keys\"\n{zone_lines}",
        notify.join(", ")
    );
    let server = ServerProcess::heron_on_port(&heron(), port, CHILD, &config)
        .unwrap_or_else(|log| panic!("the child's server: {log}"));
    (server, metrics)
}

/// Heron serving the child unsigned from `base`'s `child.zone`, telling
/// the signer on `signer_port` of each version.
fn start_hidden_primary(base: &std::path::Path, signer_port: u16) -> ServerProcess {
    let b = base.display().to_string();
    ServerProcess::heron_with_config(&heron(), CHILD, move |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\ncontrol = \"control.sock\"\n\
             [[zone]]\norigin = \"{CHILD}\"\nfile = \"{b}/child.zone\"\n\
             allow-transfer = [\"127.0.0.1\"]\nnotify = [\"127.0.0.1:{signer_port}\"]\n"
        )
    })
}

/// A Knot and a BIND secondary of the child at `primary`, on `ports`
/// (which the child notifies), each with a router for `delv`.
fn start_secondaries(parent: SocketAddr, primary: SocketAddr, ports: &[u16]) -> Vec<Peer> {
    let spec = Secondary {
        origin: CHILD.to_string(),
        primary,
        key: None,
        tls: None,
    };
    [ServerKind::Knot, ServerKind::Bind]
        .into_iter()
        .zip(ports)
        .map(|(kind, &port)| {
            let server = spec.start(kind, port);
            let router = Router::start(parent, server.addr());
            Peer {
                server,
                router,
                by_ixfr: Default::default(),
            }
        })
        .collect()
}

impl Setup {
    /// A parent server and a child server under `child_policy` (lines of
    /// a `[[dnssec-policy]]`), which asks the parent server for the DS
    /// RRset unless `ask_parent` is false.
    fn start(child_policy: &str, ask_parent: bool) -> Setup {
        Setup::start_signing(child_policy, ask_parent, false)
    }

    /// [`Setup::start`], the child signed as the secondary of a hidden
    /// primary (Heron, unsigned) that serves `child.zone`.
    fn start_behind_primary(child_policy: &str) -> Setup {
        Setup::start_signing(child_policy, true, true)
    }

    fn start_signing(child_policy: &str, ask_parent: bool, behind_primary: bool) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("parent.zone"), parent_text(1, &[])).unwrap();
        std::fs::write(dir.path().join("child.zone"), CHILD_TEXT).unwrap();
        let base = dir.path().to_path_buf();
        let b = base.display().to_string();
        let parent = ServerProcess::heron_with_config(&heron(), PARENT, move |port| {
            format!(
                "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\ncontrol = \"control.sock\"\n\
                 [[zone]]\norigin = \"{PARENT}\"\nfile = \"{b}/parent.zone\"\n\
                 allow-transfer = [\"127.0.0.1\"]\n\
                 dnssec-policy = \"default\"\nkey-directory = \"{b}/parent-keys\"\n"
            )
        });
        let parents = match ask_parent {
            true => format!("parent-servers = [\"{}\"]\n", parent.addr()),
            false => String::new(),
        };
        let (child_policy, zone_lines) = child_policy
            .split_once(ZONE_LINES)
            .unwrap_or((child_policy, ""));
        let child_config = format!("{FAST}{child_policy}\n{parents}{ZONE_LINES}{zone_lines}");
        let port = heron_testkit::free_port();
        let peer_ports = [heron_testkit::free_port(), heron_testkit::free_port()];
        let hidden = behind_primary.then(|| start_hidden_primary(&base, port));
        let hidden_addr = hidden.as_ref().map(ServerProcess::addr);
        let (server, metrics) = start_child(&base, &child_config, port, &peer_ports, hidden_addr);
        let router = Router::start(parent.addr(), server.addr());
        let secondaries = start_secondaries(parent.addr(), server.addr(), &peer_ports);
        Setup {
            parent,
            server,
            router,
            dir,
            parent_serial: 1,
            secure: false,
            follow_cds: false,
            parent_ds: Vec::new(),
            metrics,
            csk: child_policy.contains("keys = \"csk\""),
            child_config,
            last_serial: std::cell::Cell::new(None),
            incremental: std::cell::Cell::new(0),
            port,
            secondaries,
            hidden,
            whole_ok: std::cell::Cell::new(false),
        }
    }

    /// Stops the child's server and starts it again on the same files.
    fn restart_child(&mut self) {
        self.server.terminate();
        let ports: Vec<u16> = (self.secondaries.iter())
            .map(|p| p.server.addr().port())
            .collect();
        let hidden = self.hidden.as_ref().map(ServerProcess::addr);
        let (server, metrics) = start_child(
            self.dir.path(),
            &self.child_config,
            self.port,
            &ports,
            hidden,
        );
        self.router = Router::start(self.parent.addr(), server.addr());
        // The history of versions goes on (the signed version kept in
        // FILE.signed, the journal from it): the next IXFR from the
        // serial before the restart is checked as any other.
        (self.server, self.metrics) = (server, metrics);
    }

    fn state(&self) -> Value {
        let path = self
            .dir
            .path()
            .join("child-keys/child.parent.test.keys.json");
        let text = std::fs::read_to_string(path).unwrap_or_default();
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    fn keys(&self) -> Vec<Value> {
        self.state()["keys"].as_array().cloned().unwrap_or_default()
    }

    /// The records of a key's three states, e.g. `zsk:omnipresent/omnipresent/-`.
    fn phase(&self) -> BTreeSet<String> {
        let state = |k: &Value, f: &str| k[f]["state"].as_str().unwrap_or("-").to_string();
        (self.keys().iter())
            .map(|k| {
                format!(
                    "{}:{}:{}/{}/{}",
                    k["tag"],
                    k["role"].as_str().unwrap_or("?"),
                    state(k, "dnskey"),
                    state(k, "zone_rrsig"),
                    state(k, "ds")
                )
            })
            .collect()
    }

    fn kdig(&self, args: &[&str]) -> String {
        self.kdig_at(&self.server, args)
    }

    fn kdig_at(&self, server: &ServerProcess, args: &[&str]) -> String {
        let addr = server.addr();
        let out = Command::new("/usr/bin/kdig")
            .arg(format!("@{}", addr.ip()))
            .args(["-p", &addr.port().to_string()])
            .args(args)
            .args(["+nocomments", "+nostats", "+noquestion"])
            .output()
            .expect("kdig runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn axfr(&self, server: &ServerProcess, zone: &str) -> String {
        let text = self.kdig_at(server, &[zone, "AXFR"]);
        assert!(text.contains("RRSIG"), "{text}");
        text
    }

    /// The child's CDS RDATA as served, in presentation form.
    fn cds(&self) -> Vec<String> {
        let text = self.kdig(&[CHILD, "CDS", "+short"]);
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with(';'))
            .map(str::to_string)
            .collect()
    }

    /// The parent's DS RRset becomes `ds`: the file rewritten, its serial
    /// moved on, the server told to reload.
    fn set_parent_ds(&mut self, ds: &[String]) {
        self.parent_ds = ds.to_vec();
        self.parent_serial += 1;
        let text = parent_text(self.parent_serial, ds);
        std::fs::write(self.dir.path().join("parent.zone"), text).unwrap();
        let (ok, said) = self.ctl(&self.parent, &["reload", PARENT]);
        assert!(ok, "{said}");
    }

    fn ctl(&self, server: &ServerProcess, args: &[&str]) -> (bool, String) {
        let out = Command::new(heron())
            .arg("ctl")
            .arg("--control")
            .arg(server.dir().join("control.sock"))
            .args(args)
            .output()
            .expect("heron ctl runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    }

    /// Polls `reached` (every 100 ms) until true or `limit`; validates
    /// the child at each new phase seen on the way.
    fn run_until(
        &mut self,
        limit: Duration,
        phases: &mut Vec<BTreeSet<String>>,
        reached: impl Fn(&Setup) -> bool,
    ) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self.follow_cds && self.secure {
                let mut cds = self.cds();
                cds.sort();
                if !cds.is_empty() && cds != self.parent_ds {
                    self.set_parent_ds(&cds);
                }
            }
            let phase = self.phase();
            if phases.last() != Some(&phase) && !phase.is_empty() {
                phases.push(phase);
                if self.secure {
                    self.validate();
                }
            }
            if reached(self) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    /// The child's answers validate from the parent's key, and its AXFR
    /// passes both zone checkers; each secondary, told by NOTIFY, comes
    /// to serve the version (or a later one) within a bounded wait, got
    /// by IXFR, and its answers validate too.
    fn validate(&self) {
        let parent = SignedZone::from_text(PARENT, &self.axfr(&self.parent, PARENT));
        let text = self.axfr(&self.server, CHILD);
        self.check_ixfr(&text);
        let (serial, whole_ok) = (soa_serial_of(&text), self.whole_ok.get());
        // The secondaries are waited for and asked while Heron is.
        let (failures, peers) = std::thread::scope(|scope| {
            let parent = &parent;
            let checks: Vec<_> = (self.secondaries.iter())
                .map(|peer| scope.spawn(move || peer.check(parent, serial, whole_ok)))
                .collect();
            let failures = failures(parent, self.router.addr, QUERIES);
            verify_with_tools(&SignedZone::from_text(CHILD, &text), self.csk);
            let peers: Vec<String> = (checks.into_iter())
                .filter_map(|c| c.join().unwrap().err())
                .collect();
            (failures, peers)
        });
        assert!(
            failures.is_empty(),
            "keys {:?}:\n{}\n{}",
            self.phase(),
            failures.join("\n"),
            self.server.log()
        );
        assert!(
            peers.is_empty(),
            "keys {:?}:\n{}\nHeron's log:\n{}",
            self.phase(),
            peers.join("\n"),
            self.server.log()
        );
    }
}

impl Setup {
    /// Each secondary took at least `least` of the versions checked by
    /// an incremental IXFR.
    fn assert_secondaries_took_ixfr(&self, least: usize) {
        for peer in &self.secondaries {
            let got = peer.by_ixfr.lock().unwrap().clone();
            assert!(
                got.len() >= least,
                "{} took {got:?} by IXFR:\n{}",
                peer.server.kind(),
                peer.server.log()
            );
        }
    }
}

/// What `delv` through `addr` (from the parent's key) did not call
/// validated as `queries` expect.
fn failures(parent: &SignedZone, addr: SocketAddr, queries: &[Query]) -> Vec<String> {
    let mut failures = Vec::new();
    for (name, qtype, expect) in queries {
        let qname = match *name {
            "@" => CHILD.to_string(),
            _ => format!("{name}.{CHILD}"),
        };
        let v = parent.delv(addr, &qname, qtype);
        let ok = match expect {
            Expect::Answer => v.is_validated_answer(),
            Expect::NxDomain => v.is_validated_negative(true),
            Expect::NoData => v.is_validated_negative(false),
        };
        if !ok {
            failures.push(format!("{name} {qtype}: expected {expect:?}\n{v}"));
        }
    }
    failures
}

/// Whether `serial` is `since` or later (RFC 1982).
fn is_at_least(serial: u32, since: u32) -> bool {
    serial.wrapping_sub(since) < 1 << 31
}

/// The serial of the first SOA record of a zone's text (kdig's form).
fn soa_serial_of(text: &str) -> u32 {
    let soa = (text.lines())
        .find(|l| !l.starts_with(';') && l.contains("\tSOA\t"))
        .unwrap_or_else(|| panic!("no SOA: {text}"));
    serial(soa)
}

impl Peer {
    /// The secondary serves `serial` or later, got by an incremental IXFR
    /// (or whole where `whole_ok`), and its answers validate; what went
    /// wrong, with its log.
    fn check(&self, parent: &SignedZone, serial: u32, whole_ok: bool) -> Result<(), String> {
        let kind = self.server.kind();
        let reached = heron_testkit::eventually_within(Duration::from_secs(30), || {
            heron_testkit::soa_serial(self.server.addr(), CHILD)
                .is_some_and(|s| is_at_least(s, serial))
        });
        if !reached {
            return Err(format!(
                "the {kind} secondary never served serial {serial}: {}",
                self.server.log()
            ));
        }
        let served = heron_testkit::soa_serial(self.server.addr(), CHILD).unwrap_or(serial);
        // A version newer than the one checked came from a step the test
        // did not ask Heron for itself: it may be answered whole.
        let whole_ok = whole_ok || served != serial;
        let mut how = None;
        heron_testkit::eventually_within(Duration::from_secs(10), || {
            how = self.got_by_ixfr(served);
            how.is_some()
        });
        if how == Some(true) {
            self.by_ixfr.lock().unwrap().insert(served);
        } else if !(whole_ok && how == Some(false)) {
            return Err(format!(
                "the {kind} secondary got serial {served} {}:\n{}",
                match how {
                    Some(false) => "as a whole zone, not by an incremental IXFR",
                    _ => "in a way its log does not show",
                },
                self.server.log()
            ));
        }
        let failures = failures(parent, self.router.addr, SECONDARY_QUERIES);
        if !failures.is_empty() {
            return Err(format!(
                "{kind} secondary:\n{}\n{kind}'s log:\n{}",
                failures.join("\n"),
                self.server.log()
            ));
        }
        Ok(())
    }

    /// How the secondary got the version of `serial`: by an incremental
    /// IXFR (true) or whole (false), None while it does not say. Knot
    /// logs each transfer's kind (an IXFR answered with the whole zone is
    /// "receiving AXFR-style IXFR", then an AXFR); BIND keeps the IXFR
    /// steps it applied in its journal, and an AXFR leaves none there.
    fn got_by_ixfr(&self, serial: u32) -> Option<bool> {
        let log = self.server.log();
        match self.server.kind() {
            ServerKind::Knot => {
                let mut whole = true;
                for line in log.lines() {
                    if line.contains("AXFR, incoming") || line.contains("AXFR-style") {
                        whole = true;
                    } else if line.contains("IXFR, incoming") && line.contains("started") {
                        whole = false;
                    } else if line.contains("zone updated")
                        && line.contains(&format!("-> {serial},"))
                    {
                        return Some(!whole);
                    }
                }
                None
            }
            _ => {
                let journal = self.server.dir().join("secondary.db.jnl");
                let out = Command::new("/usr/bin/named-journalprint")
                    .arg(&journal)
                    .output()
                    .expect("named-journalprint runs");
                let steps = String::from_utf8_lossy(&out.stdout);
                let added = (steps.lines())
                    .filter(|l| l.starts_with("add ") && l.contains("\tSOA\t"))
                    .any(|l| soa_serial_of(l.trim_start_matches("add ")) == serial);
                let transferred = log.contains(&format!("transferred serial {serial}\n"));
                match (added, transferred) {
                    (true, _) => Some(true),
                    (false, true) => Some(false),
                    _ => None,
                }
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Expect {
    Answer,
    NxDomain,
    NoData,
}

type Query = (&'static str, &'static str, Expect);

const QUERIES: &[Query] = &[
    ("@", "SOA", Expect::Answer),
    ("@", "DNSKEY", Expect::Answer),
    ("www", "A", Expect::Answer),
    ("www", "MX", Expect::NoData),
    ("nx", "A", Expect::NxDomain),
    ("deep", "A", Expect::NoData),
    ("any.wild", "TXT", Expect::Answer),
    ("any.wild", "A", Expect::NoData),
];

/// Asked of each secondary at each step: its copy's keys, a positive
/// answer, a wildcard's and an NXDOMAIN.
const SECONDARY_QUERIES: &[Query] = &[
    ("@", "DNSKEY", Expect::Answer),
    ("www", "A", Expect::Answer),
    ("any.wild", "TXT", Expect::Answer),
    ("nx", "A", Expect::NxDomain),
];

impl Setup {
    /// Secondaries get each step by IXFR: one from the serial of the last
    /// validation is answered with the difference (old SOA, deletions,
    /// new SOA, additions), or, when that would be larger than the zone
    /// (every signature changed) or the history is gone (a restart
    /// without a journal file), with the whole zone as it is now.
    fn check_ixfr(&self, axfr: &str) {
        let zone = records(axfr);
        let now = serial(&zone[0]);
        match self.last_serial.get() {
            Some(last) if last == now => {}
            Some(last) => self.whole_ok.set(self.check_ixfr_from(last, now, &zone)),
            None => self.whole_ok.set(true),
        }
        self.last_serial.set(Some(now));
    }

    /// Checks Heron's answer to an IXFR from `last` (the zone now at
    /// `now`, whose records are `zone`); whether it was the whole zone.
    fn check_ixfr_from(&self, last: u32, now: u32, zone: &[String]) -> bool {
        let text = self.kdig(&[CHILD, &format!("IXFR={last}")]);
        let diff = records(&text);
        assert!(diff.len() > 2, "{text}");
        if serial(&diff[0]) != now {
            // A newer version came between the AXFR and the IXFR.
            true
        } else if diff[1].contains("\tSOA\t") {
            assert_eq!(serial(&diff[1]), last, "{text}");
            assert!(diff.len() < zone.len() * 2, "{text}");
            eprintln!(
                "IXFR {last} -> {now}: {} of {} records",
                diff.len(),
                zone.len()
            );
            self.incremental.set(self.incremental.get() + 1);
            false
        } else {
            let sorted = |mut list: Vec<String>| {
                list.sort();
                list.dedup();
                list
            };
            assert_eq!(sorted(diff), sorted(zone.to_vec()), "the whole zone");
            true
        }
    }
}

/// A zone's records in kdig's text, one a line.
fn records(text: &str) -> Vec<String> {
    (text.lines())
        .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// The serial of an SOA record in kdig's form.
fn serial(soa: &str) -> u32 {
    let fields: Vec<&str> = soa.split_whitespace().collect();
    fields[fields.iter().position(|f| *f == "SOA").unwrap() + 3]
        .parse()
        .unwrap()
}

/// `dnssec-verify` (`-z` for a CSK: it counts only keys without the SEP
/// flag as ZSKs) and `ldns-verify-zone` accept the zone.
fn verify_with_tools(zone: &SignedZone, csk: bool) {
    let path = zone.path.to_str().unwrap();
    let mut verify = Command::new("/usr/bin/dnssec-verify");
    if csk {
        verify.arg("-z");
    }
    let out = verify
        .args(["-o", CHILD, path])
        .output()
        .expect("dnssec-verify runs");
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "dnssec-verify: {said}");
    let out = Command::new("/usr/bin/ldns-verify-zone")
        .arg(path)
        .output()
        .expect("ldns-verify-zone runs");
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "ldns-verify-zone: {said}");
}

/// A key's DS waits for the parent to add or remove it, as the key state
/// file records (the status the server shows follows it a moment later).
fn waits_for_parent(setup: &Setup) -> bool {
    setup.keys().iter().any(|k| {
        let ds = k["ds"]["state"].as_str();
        (ds == Some("rumoured") && k["ds_seen"].is_null())
            || (ds == Some("unretentive") && k["ds_gone"].is_null())
    })
}

fn role_keys(setup: &Setup, role: &str) -> Vec<Value> {
    (setup.keys().into_iter())
        .filter(|k| k["role"] == role)
        .collect()
}

fn is_active(key: &Value) -> bool {
    key["goal"] == "omnipresent" && key["active"].is_u64()
}

fn is_removed(key: &Value) -> bool {
    key["goal"] == "hidden" && key["removed"].is_u64()
}

/// The first of `keys` is gone and the second came into place (it may
/// have begun a roll of its own since, on a machine too busy for the
/// test to look in between).
fn rolled(keys: &[Value]) -> bool {
    keys.len() >= 2 && is_removed(&keys[0]) && keys[1]["active"].is_u64()
}

/// The first of `keys` is gone and the second is in place now.
fn took_over(keys: &[Value]) -> bool {
    keys.len() >= 2 && is_removed(&keys[0]) && is_active(&keys[1])
}

/// Waits for the child's first CDS and puts it at the parent as DS;
/// returns the DS set.
fn publish_first_ds(setup: &mut Setup, phases: &mut Vec<BTreeSet<String>>) -> Vec<String> {
    let mut cds = Vec::new();
    let found = setup.run_until(Duration::from_secs(20), phases, |s| !s.cds().is_empty());
    assert!(found, "no CDS: {:?}\n{}", setup.phase(), setup.server.log());
    cds.extend(setup.cds());
    setup.set_parent_ds(&cds);
    setup.secure = true;
    setup.validate();
    cds
}

/// The child signed under `policy` with its first DS at the parent, once
/// its KSK is in place; the phases seen on the way.
fn start_with_ksk_in_place(policy: &str) -> (Setup, Vec<BTreeSet<String>>) {
    let mut setup = Setup::start(policy, true);
    let mut phases = Vec::new();
    publish_first_ds(&mut setup, &mut phases);
    let ksk_active = setup.run_until(Duration::from_secs(20), &mut phases, |s| {
        role_keys(s, "ksk").iter().any(is_active)
    });
    assert!(ksk_active, "{:?}\n{}", setup.phase(), setup.server.log());
    (setup, phases)
}

/// A ZSK rolls by pre-publication, the parent's DS found by querying the
/// parent's server; every step validates.
#[test]
fn zsk_pre_publication_roll_validates_at_every_step() {
    let policy = "keys = \"ksk-zsk\"\nzsk-lifetime = \"14s\"\n";
    let (mut setup, mut phases) = start_with_ksk_in_place(policy);
    let rolled = setup.run_until(Duration::from_secs(45), &mut phases, |s| {
        rolled(&role_keys(s, "zsk"))
    });
    assert!(rolled, "{:?}\n{}", setup.phase(), setup.server.log());
    setup.validate();
    setup.assert_secondaries_took_ixfr(3);
    // The steps of a pre-publication: the new DNSKEY before its
    // signatures, the old signatures gone before the old DNSKEY.
    let seen: Vec<String> = phases.iter().map(|p| format!("{p:?}")).collect();
    assert!(phases.len() >= 4, "{seen:#?}");
    eprintln!("phases seen: {seen:#?}");
    let (ok, keys) = setup.ctl(&setup.server, &["keys", CHILD]);
    assert!(ok && keys.contains("zsk") && keys.contains("ksk"), "{keys}");
    // A ZSK's steps change a few RRsets each (but its signature swap):
    // they leave as IXFRs of the change.
    assert!(setup.incremental.get() >= 3, "{}", setup.incremental.get());
}

/// The same roll of a zone that takes dynamic updates: the version
/// served (an update in it, not in the file) is kept at each of the
/// rollover driver's reloads and signed again for each step, which
/// reaches it with the update; every step validates.
#[test]
fn zsk_roll_of_a_zone_taking_updates_validates_at_every_step() {
    const SECRET: &str = "q0vXAPu5ZZ8NAb8+HTr5VxvpyvGhUTtX5xM0y4ZxZ4k=";
    let policy = format!(
        "keys = \"ksk-zsk\"\nzsk-lifetime = \"14s\"\n{ZONE_LINES}\
         allow-update = [\"key ops zonesub ANY\"]\n[[key]]\nname = \"ops\"\nsecret = \"{SECRET}\"\n"
    );
    let mut setup = Setup::start(&policy, true);
    let child = setup.server.addr();
    let update = format!("update add upd.{CHILD} 2 TXT \"kept\"");
    let out = heron_testkit::tools::nsupdate(child, ("ops", SECRET), CHILD, &update);
    assert!(out.status.success(), "{out:?}\n{}", setup.server.log());
    let mut phases = Vec::new();
    publish_first_ds(&mut setup, &mut phases);
    let rolled = setup.run_until(Duration::from_secs(60), &mut phases, |s| {
        rolled(&role_keys(s, "zsk"))
    });
    assert!(rolled, "{:?}\n{}", setup.phase(), setup.server.log());
    setup.validate();
    assert!(phases.len() >= 4, "{phases:#?}");
    let text = setup.kdig_at(&setup.server, &[CHILD, "AXFR"]);
    assert!(text.contains(&format!("upd.{CHILD}")), "{text}");
}

/// A ZSK rolled by hand long before its lifetime ends (`heron ctl roll
/// ZONE zsk`, as `knotc zone-key-rollover` and `rndc dnssec -rollover`
/// do) starts at once with no reload and goes through every
/// pre-publication step; each validates. The KSK stays. A name that is
/// no key, or a role the zone has no key of, is refused.
#[test]
fn a_roll_asked_by_hand_starts_at_once_and_validates_at_every_step() {
    let (mut setup, mut phases) = start_with_ksk_in_place("keys = \"ksk-zsk\"\n");
    let settled = setup.run_until(Duration::from_secs(20), &mut phases, |s| {
        role_keys(s, "zsk").iter().any(is_active)
    });
    assert!(settled, "{:?}\n{}", setup.phase(), setup.server.log());
    let (ok, said) = setup.ctl(&setup.server, &["roll", CHILD, "csk"]);
    assert!(!ok && said.contains("no csk in use"), "{said}");
    let (ok, said) = setup.ctl(&setup.server, &["roll", CHILD, "65536"]);
    assert!(!ok && said.contains("no key 65536"), "{said}");
    let zsk = role_keys(&setup, "zsk")[0]["tag"].as_u64().unwrap();
    let (ok, said) = setup.ctl(&setup.server, &["roll", CHILD, "zsk"]);
    assert!(ok, "{said}");
    assert!(
        said.contains(&format!(
            "key {zsk} (zsk) rolls over: its successor is made and published now"
        )),
        "{said}"
    );
    let rolled = setup.run_until(Duration::from_secs(45), &mut phases, |s| {
        rolled(&role_keys(s, "zsk"))
    });
    assert!(rolled, "{:?}\n{}", setup.phase(), setup.server.log());
    setup.validate();
    assert!(phases.len() >= 4, "{phases:#?}");
    assert_eq!(role_keys(&setup, "ksk").len(), 1, "the KSK stays");
    assert!(setup.server.log().contains("heron ctl roll"));
}

/// A KSK made by hand while the server runs (`heron keymgr generate
/// --role ksk`, then `heron ctl reload`) is the one the zone rolls to:
/// the double-signature steps follow, the parent's DS becomes the one
/// `generate` printed, and every step validates.
#[test]
fn a_ksk_generated_by_hand_is_rolled_in_and_its_printed_ds_ends_at_the_parent() {
    let (mut setup, mut phases) = start_with_ksk_in_place("keys = \"ksk-zsk\"\n");
    let out = Command::new(heron())
        .args(["keymgr", "-d"])
        .arg(setup.dir.path().join("child-keys"))
        .args([CHILD, "generate", "--role", "ksk"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ds_line = said.lines().find(|l| l.contains(" IN DS ")).expect("a DS");
    let printed_ds = ds_line.split(" IN DS ").nth(1).unwrap().to_string();
    let (ok, reloaded) = setup.ctl(&setup.server, &["reload", CHILD]);
    assert!(ok, "{reloaded}");
    setup.follow_cds = true;
    let rolled = setup.run_until(Duration::from_secs(55), &mut phases, |s| {
        took_over(&role_keys(s, "ksk"))
    });
    assert!(rolled, "{:?}\n{}", setup.phase(), setup.server.log());
    setup.validate();
    let squeeze = |text: &str| text.split_whitespace().collect::<String>().to_uppercase();
    assert_eq!(setup.parent_ds.len(), 1, "{:?}", setup.parent_ds);
    assert_eq!(squeeze(&setup.parent_ds[0]), squeeze(&printed_ds));
}

/// A TCP front for `delv`, which asks one server: each query goes to the
/// server of its zone, the child's DS to the parent (the child's server
/// has only the child's side of the cut). A thread per connection; it
/// stops when dropped.
struct Router {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl Router {
    fn start(parent: SocketAddr, child: SocketAddr) -> Router {
        let (udp, listener) = bind_both();
        let addr = udp.local_addr().unwrap();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        udp.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 65_535];
            while !stopped.load(Ordering::Relaxed) {
                let Ok((len, from)) = udp.recv_from(&mut buf) else {
                    continue;
                };
                let query = &buf[..len];
                let Some(upstream) = upstream_of(query, parent, child) else {
                    continue;
                };
                if let Ok(response) = heron_testkit::try_query_udp(upstream, query) {
                    let _ = udp.send_to(&response, from);
                }
            }
        });
        let stopped = stop.clone();
        std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        std::thread::spawn(move || route(conn, parent, child));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Router { addr, stop }
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A UDP socket and a TCP listener on one port of 127.0.0.1 (a port
/// whose TCP side is taken, by a connection closing, say, is passed over).
fn bind_both() -> (UdpSocket, TcpListener) {
    for _ in 0..20 {
        let udp = UdpSocket::bind("127.0.0.1:0").expect("bind the router");
        if let Ok(tcp) = TcpListener::bind(udp.local_addr().unwrap()) {
            return (udp, tcp);
        }
    }
    panic!("no port free for both UDP and TCP in 20 tries");
}

/// The question's name (lower-cased, dotted) and type.
fn question(query: &[u8]) -> Option<(String, u16)> {
    let mut at = 12;
    let mut labels = Vec::new();
    loop {
        let len = *query.get(at)? as usize;
        at += 1;
        if len == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(query.get(at..at + len)?).to_ascii_lowercase());
        at += len;
    }
    let qtype = u16::from_be_bytes([*query.get(at)?, *query.get(at + 1)?]);
    Some((labels.join(".") + ".", qtype))
}

/// The server of the query's zone: the child's, but for its DS.
fn upstream_of(query: &[u8], parent: SocketAddr, child: SocketAddr) -> Option<SocketAddr> {
    let (name, qtype) = question(query)?;
    let in_child = name == CHILD || name.ends_with(&format!(".{CHILD}"));
    Some(match (in_child, name == CHILD && qtype == 43) {
        (true, false) => child,
        _ => parent,
    })
}

fn route(mut conn: TcpStream, parent: SocketAddr, child: SocketAddr) {
    conn.set_nonblocking(false).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // Bounded: a connection carries a few queries of one delv run.
    for _ in 0..100 {
        let mut len = [0u8; 2];
        if conn.read_exact(&mut len).is_err() {
            return;
        }
        let mut query = vec![0u8; u16::from_be_bytes(len) as usize];
        if conn.read_exact(&mut query).is_err() {
            return;
        }
        let Some(upstream) = upstream_of(&query, parent, child) else {
            return;
        };
        let Ok(response) = heron_testkit::try_query_tcp(upstream, &query) else {
            return;
        };
        let mut out = (response.len() as u16).to_be_bytes().to_vec();
        out.extend_from_slice(&response);
        if conn.write_all(&out).is_err() {
            return;
        }
    }
}

impl Setup {
    /// The child server's `heron_dnssec_ds_waiting` sample for the child.
    fn ds_waiting_metric(&self) -> Option<String> {
        let mut conn = TcpStream::connect(self.metrics).ok()?;
        conn.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .ok()?;
        let mut body = String::new();
        conn.read_to_string(&mut body).ok()?;
        let sample = format!("heron_dnssec_ds_waiting{{zone=\"{CHILD}\"}} ");
        body.lines()
            .find_map(|l| l.strip_prefix(sample.as_str()).map(str::to_string))
    }
}

/// A KSK rolls by double signature: the new DNSKEY, then the DS swapped
/// at the parent (the test's parent follows the CDS records, and the
/// child sees each change by asking the parent's server), then the old
/// DNSKEY goes. Every step validates from the parent's key.
#[test]
fn ksk_double_signature_roll_follows_the_parent() {
    let mut setup = Setup::start("keys = \"ksk-zsk\"\nksk-lifetime = \"14s\"\n", true);
    let mut phases = Vec::new();
    publish_first_ds(&mut setup, &mut phases);
    setup.follow_cds = true;
    let rolled = setup.run_until(Duration::from_secs(55), &mut phases, |s| {
        took_over(&role_keys(s, "ksk"))
    });
    assert!(rolled, "{:?}\n{}", setup.phase(), setup.server.log());
    setup.validate();
    setup.assert_secondaries_took_ixfr(2);
    let new_tag = role_keys(&setup, "ksk")[1]["tag"].as_u64().unwrap();
    assert_eq!(setup.parent_ds.len(), 1, "{:?}", setup.parent_ds);
    assert!(setup.parent_ds[0].starts_with(&format!("{new_tag} ")));
    let log = setup.server.log();
    assert!(
        log.contains("every parent server shows the DS change"),
        "{log}"
    );
}

/// A CSK rolls: the new key's DNSKEY and signatures, then the DS swapped
/// at the parent, then the old key goes; every step validates.
#[test]
fn csk_roll_validates_at_every_step() {
    let mut setup = Setup::start("keys = \"csk\"\nksk-lifetime = \"14s\"\n", true);
    let mut phases = Vec::new();
    publish_first_ds(&mut setup, &mut phases);
    setup.follow_cds = true;
    let rolled = setup.run_until(Duration::from_secs(55), &mut phases, |s| {
        took_over(&role_keys(s, "csk"))
    });
    assert!(rolled, "{:?}\n{}", setup.phase(), setup.server.log());
    setup.validate();
    setup.assert_secondaries_took_ixfr(1);
}

/// Without parent servers the wait for the parent is the operator's:
/// zone-status, the metric and `heron ctl keys` say so until the DS is
/// at the parent and `heron ctl ds-seen` says it; then the key takes its
/// place. A KSK rolled by double DS: the new DS first.
#[test]
fn ds_seen_ends_the_wait_and_double_ds_rolls() {
    let policy = "keys = \"ksk-zsk\"\nksk-lifetime = \"12s\"\nksk-method = \"double-ds\"\n";
    let mut setup = Setup::start(policy, false);
    let mut phases = Vec::new();
    let ds = publish_first_ds(&mut setup, &mut phases);
    assert!(!ds.is_empty());
    let (ok, status) = setup.ctl(&setup.server, &["zone-status", CHILD]);
    assert!(ok, "{status}");
    assert!(status.contains("waiting for the parent"), "{status}");
    assert!(status.contains("ds-seen"), "{status}");
    assert_eq!(setup.ds_waiting_metric().as_deref(), Some("1"));
    let (ok, keys) = setup.ctl(&setup.server, &["keys", CHILD]);
    assert!(
        ok && keys.contains("waits for the parent to add its DS"),
        "{keys}"
    );
    let (ok, said) = setup.ctl(&setup.server, &["ds-seen", CHILD]);
    assert!(ok, "{said}");
    let in_place = setup.run_until(Duration::from_secs(20), &mut phases, |s| {
        role_keys(s, "ksk").iter().any(is_active)
    });
    assert!(in_place, "{:?}\n{}", setup.phase(), setup.server.log());
    let settled = setup.run_until(Duration::from_secs(10), &mut phases, |s| {
        s.ds_waiting_metric().as_deref() == Some("0")
    });
    assert!(settled, "the metric goes back to 0");
    let (ok, said) = setup.ctl(&setup.server, &["ds-seen", CHILD]);
    assert!(!ok && said.contains("not waiting"), "{said}");
    // The roll: each time the zone waits for the parent, the parent is
    // given what the CDS asks, and ds-seen says so (twice: the new DS in,
    // then the old one out).
    let done = |s: &Setup| took_over(&role_keys(s, "ksk"));
    let mut told = 0;
    for _ in 0..10 {
        let next = setup.run_until(Duration::from_secs(40), &mut phases, |s| {
            done(s) || waits_for_parent(s)
        });
        assert!(next, "{:?}\n{}", setup.phase(), setup.server.log());
        if done(&setup) {
            break;
        }
        let mut cds = setup.cds();
        cds.sort();
        if cds != setup.parent_ds {
            setup.set_parent_ds(&cds);
        }
        let (ok, said) = setup.ctl(&setup.server, &["ds-seen", CHILD]);
        assert!(ok, "{said}");
        told += 1;
    }
    assert!(done(&setup), "{:?}\n{}", setup.phase(), setup.server.log());
    assert_eq!(told, 2, "the new DS added, the old one removed");
    setup.validate();
    setup.assert_secondaries_took_ixfr(2);
}

/// A policy changed by a reload takes effect by a rollover, never by
/// breaking the chain: ECDSA P-256 to Ed25519, signatures of the new
/// algorithm first, every algorithm of the DNSKEY RRset signing every
/// RRset meanwhile (RFC 6840 5.11), the DS swapped at the parent, the old
/// algorithm gone last; every step validates.
#[test]
fn a_new_algorithm_in_a_reload_rolls_the_keys() {
    let mut setup = Setup::start("keys = \"ksk-zsk\"\n", true);
    let mut phases = Vec::new();
    publish_first_ds(&mut setup, &mut phases);
    setup.follow_cds = true;
    let settled = setup.run_until(Duration::from_secs(20), &mut phases, |s| {
        s.keys().iter().all(is_active)
    });
    assert!(settled, "{:?}\n{}", setup.phase(), setup.server.log());
    let config = setup.server.dir().join("heron.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    let text = text.replace(
        "name = \"child\"\n",
        "name = \"child\"\nalgorithm = \"ed25519\"\n",
    );
    std::fs::write(&config, text).unwrap();
    let (ok, said) = setup.ctl(&setup.server, &["reconfigure"]);
    assert!(ok, "{said}");
    // The change is seen in `keys` at once: a key of the new algorithm
    // coming in, or the rollover to it said to wait (black-box finding
    // BP-2: nothing showed it was taken).
    let (ok, keys) = setup.ctl(&setup.server, &["keys", "--json", CHILD]);
    assert!(ok, "{keys}");
    let keys: Value = serde_json::from_str(&keys).unwrap();
    let pending = keys["message"]
        .as_str()
        .is_some_and(|m| m.contains("the policy's algorithm is 15"));
    let rows = keys["data"].as_array().cloned().unwrap_or_default();
    let coming = (rows.iter()).any(|k| k["algorithm"] == 15 && k["goal"] == "omnipresent");
    assert!(pending || coming, "{keys}");
    let of_algorithm = |s: &Setup, algorithm: u64| -> Vec<Value> {
        (s.keys().into_iter())
            .filter(|k| k["algorithm"] == algorithm)
            .collect()
    };
    let rolled = setup.run_until(Duration::from_secs(55), &mut phases, |s| {
        let new = of_algorithm(s, 15);
        let old = of_algorithm(s, 13);
        new.len() == 2 && new.iter().all(is_active) && old.iter().all(is_removed)
    });
    assert!(rolled, "{:?}\n{}", setup.phase(), setup.server.log());
    setup.validate();
    setup.assert_secondaries_took_ixfr(2);
    assert!(
        setup
            .parent_ds
            .iter()
            .all(|ds| ds.split(' ').nth(1) == Some("15"))
    );
    let seen: Vec<String> = phases.iter().map(|p| format!("{p:?}")).collect();
    eprintln!("phases seen: {seen:#?}");
    // Seen on the way: keys of both algorithms at once.
    let both = |p: &BTreeSet<String>| p.len() >= 4;
    assert!(phases.iter().any(both), "{seen:#?}");
}

/// A restart in the middle of a ZSK roll goes on from the state file:
/// the same keys, the serial past the one served, and the roll ends as
/// it would have, every step validating.
#[test]
fn a_restart_mid_roll_goes_on_where_it_was() {
    let mut setup = Setup::start("keys = \"ksk-zsk\"\nzsk-lifetime = \"14s\"\n", true);
    let mut phases = Vec::new();
    publish_first_ds(&mut setup, &mut phases);
    let rolling = setup.run_until(Duration::from_secs(40), &mut phases, |s| {
        role_keys(s, "zsk").len() == 2
    });
    assert!(rolling, "{:?}\n{}", setup.phase(), setup.server.log());
    let before = setup.keys();
    let serial = heron_testkit::soa_serial(setup.server.addr(), CHILD).unwrap();
    setup.restart_child();
    let after = heron_testkit::soa_serial(setup.server.addr(), CHILD).unwrap();
    assert!(after > serial, "{serial} then {after}");
    let ids =
        |keys: &[Value]| -> Vec<String> { keys.iter().map(|k| k["id"].to_string()).collect() };
    assert_eq!(ids(&setup.keys()), ids(&before), "no key made or lost");
    setup.validate();
    let rolled = setup.run_until(Duration::from_secs(40), &mut phases, |s| {
        rolled(&role_keys(s, "zsk"))
    });
    assert!(rolled, "{:?}\n{}", setup.phase(), setup.server.log());
    setup.validate();
    setup.assert_secondaries_took_ixfr(2);
}

/// A zone signed behind a hidden primary (bump in the wire) rolls its
/// ZSK as a zone signed from its file does, every step validating; a
/// change at the primary in the middle of the roll arrives by IXFR, is
/// signed with the keys of that step and goes on to the secondaries.
#[test]
fn a_zone_signed_behind_a_hidden_primary_rolls_its_zsk() {
    let mut setup = Setup::start_behind_primary("keys = \"ksk-zsk\"\nzsk-lifetime = \"14s\"\n");
    let mut phases = Vec::new();
    publish_first_ds(&mut setup, &mut phases);
    let rolling = setup.run_until(Duration::from_secs(40), &mut phases, |s| {
        role_keys(s, "zsk").len() == 2
    });
    assert!(rolling, "{:?}\n{}", setup.phase(), setup.server.log());
    setup.change_at_hidden_primary("late A 192.0.2.77\n");
    let arrived = setup.run_until(Duration::from_secs(20), &mut phases, |s| {
        s.kdig(&["late.child.parent.test.", "A", "+dnssec"])
            .contains("RRSIG")
    });
    assert!(arrived, "{}", setup.server.log());
    setup.validate();
    let rolled = setup.run_until(Duration::from_secs(45), &mut phases, |s| {
        rolled(&role_keys(s, "zsk"))
    });
    assert!(rolled, "{:?}\n{}", setup.phase(), setup.server.log());
    setup.validate();
    let late = setup.kdig(&["late.child.parent.test.", "A", "+dnssec"]);
    assert!(
        late.contains("192.0.2.77") && late.contains("RRSIG"),
        "{late}"
    );
    setup.assert_secondaries_took_ixfr(3);
    // The hidden primary's serial stays its own: the signer's moved on
    // with every step of the roll.
    let hidden = setup.hidden.as_ref().unwrap().addr();
    let primary_serial = heron_testkit::soa_serial(hidden, CHILD).unwrap();
    let signed_serial = heron_testkit::soa_serial(setup.server.addr(), CHILD).unwrap();
    assert_eq!(primary_serial, 2, "one change at the primary");
    assert!(signed_serial > primary_serial, "{signed_serial}");
}

impl Setup {
    /// The hidden primary's zone gets `lines` and the next serial, and
    /// is reloaded there (its NOTIFY brings it to the signer).
    fn change_at_hidden_primary(&self, lines: &str) {
        let hidden = self.hidden.as_ref().expect("a hidden primary");
        let serial = heron_testkit::soa_serial(hidden.addr(), CHILD).unwrap();
        let path = self.dir.path().join("child.zone");
        let text = std::fs::read_to_string(&path).unwrap();
        let next = text.replacen(
            &format!("hostmaster {serial} "),
            &format!("hostmaster {} ", serial + 1),
            1,
        ) + lines;
        std::fs::write(&path, next).unwrap();
        let (ok, said) = self.ctl(hidden, &["reload", CHILD]);
        assert!(ok, "{said}");
    }
}

impl Setup {
    /// Each of `QUERIES` asked through delv, the parent's key the only
    /// trust anchor: fully validated when `secure`; else insecure, not
    /// bogus (an unsigned answer of the kind expected: the parent proves
    /// the child has no DS).
    fn check_answers(&self, secure: bool) {
        let parent = SignedZone::from_text(PARENT, &self.axfr(&self.parent, PARENT));
        let mut failures = Vec::new();
        for (name, qtype, expect) in QUERIES {
            let qname = match *name {
                "@" => CHILD.to_string(),
                _ => format!("{name}.{CHILD}"),
            };
            let v = parent.delv(self.router.addr, &qname, qtype);
            let ok = match secure {
                true => is_validated(&v, *expect),
                false => is_insecure(&v, qtype, *expect),
            };
            if !ok {
                failures.push(format!(
                    "{name} {qtype}: expected {expect:?} (secure: {secure})\n{v}"
                ));
            }
        }
        assert!(
            failures.is_empty(),
            "keys {:?}:\n{}\n{}",
            self.phase(),
            failures.join("\n"),
            self.server.log()
        );
    }

    fn validate_insecure(&self) {
        self.check_answers(false);
    }

    /// The child's configuration file, edited by `edit`, read again.
    fn reconfigure_child(&self, edit: impl Fn(String) -> String) -> (bool, String) {
        let config = self.server.dir().join("heron.toml");
        let text = std::fs::read_to_string(&config).unwrap();
        std::fs::write(&config, edit(text)).unwrap();
        self.ctl(&self.server, &["reconfigure"])
    }
}

fn is_validated(v: &heron_testkit::Validation, expect: Expect) -> bool {
    match expect {
        Expect::Answer => v.is_validated_answer(),
        Expect::NxDomain => v.is_validated_negative(true),
        Expect::NoData => v.is_validated_negative(false),
    }
}

fn is_insecure(v: &heron_testkit::Validation, qtype: &str, expect: Expect) -> bool {
    let unsigned_negative = (v.output.lines()).any(|l| l == "; negative response, unsigned answer");
    let unsigned_answer = v.is_answer() && v.verdict() == Some("; unsigned answer");
    match expect {
        // The DNSKEY RRset leaves with the signatures.
        _ if qtype == "DNSKEY" => unsigned_answer || unsigned_negative,
        Expect::Answer => unsigned_answer,
        Expect::NxDomain => unsigned_negative && v.output.contains("-$NXDOMAIN"),
        Expect::NoData => unsigned_negative && v.output.contains("-$NXRRSET"),
    }
}

/// Every DNSSEC record type; none is left in a zone gone insecure.
const DNSSEC_TYPES: [&str; 7] = [
    "RRSIG",
    "DNSKEY",
    "NSEC",
    "NSEC3",
    "NSEC3PARAM",
    "CDS",
    "CDNSKEY",
];

fn dnssec_records(axfr: &str) -> Vec<String> {
    (axfr.lines())
        .filter(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            !l.starts_with(';') && fields.len() > 3 && DNSSEC_TYPES.contains(&fields[3])
        })
        .map(str::to_string)
        .collect()
}

/// A secure zone unsigned through `insecure = true`: first removing its
/// dnssec-policy outright is refused (the reload keeps the signed zone);
/// then the CDS and CDNSKEY delete records, the zone still signed and
/// validating while the parent holds the DS; the DS removed, the parent
/// check sees it gone, and once the DS TTL and the delays have passed
/// the zone is served without a DNSSEC record and the state file records
/// every key removed. delv at every step: fully validated while the DS
/// is at the parent, insecure after, never bogus. Once insecure, the
/// dnssec-policy may go.
#[test]
fn going_insecure_through_the_policy_never_fails_validation() {
    let mut setup = Setup::start("keys = \"ksk-zsk\"\n", true);
    let mut phases = Vec::new();
    publish_first_ds(&mut setup, &mut phases);
    let settled = setup.run_until(Duration::from_secs(30), &mut phases, |s| {
        s.keys().iter().all(is_active)
    });
    assert!(settled, "{:?}\n{}", setup.phase(), setup.server.log());
    let without_policy = |text: String| {
        (text.lines())
            .filter(|l| !l.starts_with("dnssec-policy =") && !l.starts_with("key-directory ="))
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    };
    let original = std::fs::read_to_string(setup.server.dir().join("heron.toml")).unwrap();
    let (ok, said) = setup.reconfigure_child(without_policy);
    assert!(
        !ok && said.contains("dnssec-policy = \"insecure\""),
        "{said}"
    );
    assert!(setup.server.log().contains("would fail validation"));
    setup.validate();
    // Nor may its keys be left behind by another key-directory: the
    // signer would make new ones and sign with them at once.
    let (ok, said) =
        setup.reconfigure_child(|_| original.replace("/child-keys\"", "/child-keys-elsewhere\""));
    assert!(!ok && said.contains("key-directory changed"), "{said}");
    setup.validate();
    let (ok, said) = setup.reconfigure_child(|_| {
        original.replace("name = \"child\"\n", "name = \"child\"\ninsecure = true\n")
    });
    assert!(ok, "{said}");
    let deleting = setup.run_until(Duration::from_secs(20), &mut phases, |s| {
        s.cds() == ["0 0 0 00"]
    });
    assert!(deleting, "{:?}\n{}", setup.phase(), setup.server.log());
    let cdnskey = setup.kdig(&[CHILD, "CDNSKEY", "+short"]);
    assert_eq!(cdnskey.trim(), "0 3 0 AA==", "{cdnskey}");
    setup.validate();
    // The keys wait for the parent.
    assert!(setup.run_until(Duration::from_secs(10), &mut phases, waits_for_parent));
    setup.set_parent_ds(&[]);
    setup.secure = false;
    setup.validate_insecure();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = setup.phase();
    let mut signed = true;
    while Instant::now() < deadline && !setup.keys().iter().all(is_removed) {
        let phase = setup.phase();
        if phase != seen {
            setup.validate_insecure();
            let axfr = setup.kdig(&[CHILD, "AXFR"]);
            let left = dnssec_records(&axfr);
            // Signed in full, or not at all: never signatures without keys.
            let has = |t: &str| left.iter().any(|l| l.contains(&format!("\t{t}\t")));
            assert_eq!(has("RRSIG"), has("DNSKEY"), "{axfr}");
            assert!(signed || left.is_empty(), "signed again: {axfr}");
            signed = !left.is_empty();
            phases.push(phase.clone());
            seen = phase;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        setup.keys().iter().all(is_removed),
        "{:?}\n{}",
        setup.phase(),
        setup.server.log()
    );
    assert_eq!(
        setup.keys().len(),
        2,
        "the state file keeps the keys' history"
    );
    setup.validate_insecure();
    let axfr = setup.kdig(&[CHILD, "AXFR"]);
    assert!(axfr.contains("\tSOA\t"), "{axfr}");
    assert_eq!(dnssec_records(&axfr), Vec::<String>::new(), "{axfr}");
    let (ok, keys) = setup.ctl(&setup.server, &["keys", CHILD]);
    assert!(ok, "{keys}");
    // Going insecure, no key in use is wanted: no rollover is said to wait.
    assert!(!keys.contains("the policy's algorithm"), "{keys}");
    eprintln!("phases seen: {phases:#?}\n{keys}");
    // Insecure now: the dnssec-policy may go.
    let (ok, said) = setup.reconfigure_child(without_policy);
    assert!(ok, "{said}");
    setup.validate_insecure();
}
