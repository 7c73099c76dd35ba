//! The zone transfer benchmarks: how long a secondary of many zones takes
//! to cold-start (and whether it runs out of ports doing it), how quickly
//! a change on a primary is answered by its secondary, how long a consumer
//! of a catalog zone listing many zones takes to cold-start (and then to
//! serve a member added to the catalog), how fast a large
//! zone moves between pairs of servers, and what TSIG costs.
//!
//! Everything runs in a network namespace of the suite's own, with a
//! loopback interface carrying 127.0.0.1 and 127.0.0.2: the primary
//! listens on 127.0.0.1 and the secondary on 127.0.0.2 (BIND listens only
//! on addresses of an interface, hence the second address), each with one
//! worker of each kind, pinned: primary on CPU 0, secondary on CPU 1. The
//! namespace has the kernel's default network settings (the report prints
//! the ephemeral port range and TIME_WAIT reuse), and no one else's
//! connections, so the counts of connections and TIME_WAIT sockets are
//! the servers' alone.

pub mod peers;
pub mod probe;
mod report;
mod tsig_work;

use std::fmt::Write as _;
use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use heron_proto::message::Message;
use heron_proto::{Name, RType};
use heron_testkit::{QueryOpts, build_query, free_port};
use serde::{Deserialize, Serialize};

use crate::servers::{Binaries, Kind, available};
use crate::stats::Spread;
use crate::{sys, zones};
use peers::{NsdReload, Peer, Role, TsigKey};

#[derive(Args, Clone, Debug)]
pub struct XfrArgs {
    /// The heron binary (release build).
    #[arg(long)]
    pub heron: PathBuf,
    /// Where zones and server folders go.
    #[arg(long, default_value = "target/bench-data/xfr")]
    pub data: PathBuf,
    /// Where transfers.md and transfers.json go.
    #[arg(long, default_value = "docs/benchmarks")]
    pub out: PathBuf,
    /// Secondaries to measure (Heron, NSD, Knot, BIND).
    #[arg(long, value_delimiter = ',', default_value = "heron,nsd,knot,bind")]
    pub servers: Vec<String>,
    /// Zone counts for the cold start.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000,30000,100000")]
    pub sizes: Vec<usize>,
    /// Longest wait for one cold start, seconds.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
    /// Changes per server for the propagation delay.
    #[arg(long, default_value_t = 30)]
    pub changes: usize,
    /// Records of the large zone.
    #[arg(long, default_value_t = 2_000_000)]
    pub records: usize,
    /// Runs of each cold start and large-zone transfer.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Parts to run: cold-start, catalog, propagation, axfr (TSIG included); the
    /// others keep their results from the last transfers.json.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "cold-start,catalog,propagation,axfr"
    )]
    pub parts: Vec<String>,
}

/// The primary's address.
const PRIMARY: [u8; 4] = [127, 0, 0, 1];
/// The secondary's address, added to the namespace's loopback interface.
const SECONDARY: [u8; 4] = [127, 0, 0, 2];
const SEED: u64 = 0x5eed_0f7a;

/// One secondary's cold start with a number of zones.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ColdStart {
    pub server: Kind,
    /// NSD's reload throttle in this run (the others ignore it).
    #[serde(default)]
    pub nsd_reload: NsdReload,
    pub zones: usize,
    /// Seconds from the secondary's start until every zone answered
    /// (the median of the runs).
    pub all_answered_s: Option<f64>,
    /// Every finished run.
    #[serde(default)]
    pub seconds: Spread,
    pub answered: usize,
    /// The probe's resolution: the longest, over the runs, from the last
    /// refused query to the answer that completed the set, seconds.
    #[serde(default)]
    pub probe_gap_s: f64,
    /// Log lines saying a connect failed for want of a local address.
    pub connect_failures: usize,
    /// TCP connections opened in the namespace meanwhile (ActiveOpens).
    pub connections_opened: u64,
    /// Sockets in TIME_WAIT with the primary's port once all answered.
    pub time_wait: usize,
    pub rss_mib: f64,
    /// The anonymous part of `rss_mib` (RssAnon), read at the same moment:
    /// without the binary's and libraries' file pages. 0 in results from
    /// before it was measured.
    #[serde(default)]
    pub anon_mib: f64,
    /// Catalog cold start only: members then added to the catalog one at
    /// a time; for each, ms from the NOTIFY for the catalog's new version
    /// to the new member answering on the consumer (None: not in 10 s).
    #[serde(default)]
    pub one_member_ms: Vec<Option<f64>>,
}

/// Members added, one at a time, after a catalog consumer's cold start.
const MEMBERS_ADDED: usize = 5;

/// Reload on the primary → new serial answered by the secondary.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Propagation {
    pub server: Kind,
    pub delays_ms: Vec<f64>,
    pub median_ms: f64,
    pub p90_ms: f64,
    /// Changes the secondary never showed within 10 s.
    pub missed: usize,
}

/// The large zone from one primary to one secondary.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LargeTransfer {
    pub primary: Kind,
    pub secondary: Kind,
    pub tsig: bool,
    /// Secondary start → zone answered, seconds.
    pub seconds: Spread,
    pub mb_per_s: f64,
    pub secondary_rss_mib: f64,
    /// CPU seconds of the primary and the secondary together per run,
    /// from the secondary's start until it answers the zone.
    #[serde(default)]
    pub cpu_seconds: Spread,
}

/// What TSIG costs Heron → Heron, from signed and unsigned runs that
/// alternate: each ratio is a signed run over the unsigned run next to it,
/// so that drift in the machine's speed cancels out.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TsigOverhead {
    /// Signed time / unsigned time, per pair of runs.
    pub time_ratio: Spread,
    /// Signed CPU seconds / unsigned CPU seconds (both servers), per pair.
    pub cpu_ratio: Spread,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Results {
    pub machine: Vec<String>,
    pub cold_start: Vec<ColdStart>,
    pub propagation: Vec<Propagation>,
    pub large: Vec<LargeTransfer>,
    /// Bytes of the large zone's AXFR (every message, length prefixes
    /// included).
    pub large_axfr_bytes: u64,
    pub records: usize,
    /// The cold start's time limit per run, seconds.
    #[serde(default)]
    pub cold_start_limit_s: u64,
    #[serde(default)]
    pub tsig_overhead: Option<TsigOverhead>,
    #[serde(default)]
    pub tsig_work: Option<tsig_work::TsigWork>,
    /// When and at which commit each part was measured.
    #[serde(default)]
    pub cold_start_at: Option<String>,
    /// Cold starts of a consumer of one catalog zone listing N zones.
    #[serde(default)]
    pub catalog_cold_start: Vec<ColdStart>,
    #[serde(default)]
    pub catalog_cold_start_at: Option<String>,
    #[serde(default)]
    pub propagation_at: Option<String>,
    #[serde(default)]
    pub large_at: Option<String>,
}

pub fn run(args: &XfrArgs) -> Result<(), String> {
    sys::private_loopback(&[SECONDARY.into()])
        .map_err(|e| format!("cannot make a network namespace (run as root): {e}"))?;
    // The servers, started from this session, and the probe (this thread).
    let _priority = sys::raise_session_priority(peers::NICE);
    // The probe beside the primary: the secondary's CPU is the one measured.
    heron_sys::cpu::pin_current_thread(&[0]).map_err(|e| format!("cannot pin to CPU 0: {e}"))?;
    // The servers run in their own folders.
    let heron =
        fs::canonicalize(&args.heron).map_err(|e| format!("{}: {e}", args.heron.display()))?;
    let absolute = |p: &Path| std::path::absolute(p).map_err(|e| format!("{}: {e}", p.display()));
    let args = &XfrArgs {
        heron,
        data: absolute(&args.data)?,
        out: absolute(&args.out)?,
        ..args.clone()
    };
    let bins = Binaries {
        heron: args.heron.clone(),
        bench: std::env::current_exe().map_err(|e| e.to_string())?,
    };
    let kinds: Vec<Kind> = args
        .servers
        .iter()
        .map(|s| {
            Kind::parse(s)
                .filter(|k| k.is_dns())
                .ok_or(format!("unknown server {s}"))
        })
        .collect::<Result<_, _>>()?;
    let kinds: Vec<Kind> = kinds.into_iter().filter(|k| available(*k, &bins)).collect();
    fs::create_dir_all(&args.data).map_err(|e| e.to_string())?;
    // Parts not run this time keep their last results.
    let mut results: Results = fs::read_to_string(args.out.join("transfers.json"))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    results.machine = report::machine(&bins);
    let wants = |part: &str| args.parts.iter().any(|p| p == part);
    if wants("cold-start") {
        results.cold_start_at = Some(measured_at(args));
        results.cold_start = cold_starts(args, &kinds, false)?;
        results.cold_start_limit_s = args.timeout;
    }
    if wants("catalog") {
        results.catalog_cold_start_at = Some(measured_at(args));
        results.catalog_cold_start = cold_starts(args, &kinds, true)?;
        results.cold_start_limit_s = args.timeout;
    }
    if wants("propagation") {
        results.propagation_at = Some(measured_at(args));
        results.propagation = propagations(args, &kinds)?;
    }
    if wants("axfr") {
        results.large_at = Some(measured_at(args));
        results.records = args.records;
        results.large.clear();
        results.large_axfr_bytes = 0;
        results.tsig_overhead = None;
        results.tsig_work = None;
        large_transfers(args, &kinds, &mut results)?;
    }
    report::write(&results, &args.out, args)
}

/// Which Heron, when, and how busy the machine was as a part started.
fn measured_at(args: &XfrArgs) -> String {
    format!(
        "{}; started {}, load average {}",
        crate::host::heron_build(&args.heron),
        crate::host::utc(crate::host::now_secs()),
        crate::host::loadavg()
    )
}

fn ip(octets: [u8; 4], port: u16) -> SocketAddr {
    SocketAddr::from((octets, port))
}

/// `count` minimal zones (SOA and NS) in `dir`, written once.
fn minimal_zones(dir: &Path, count: usize) -> Result<Vec<(String, PathBuf)>, String> {
    fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    (0..count)
        .map(|i| {
            let origin = zones::many_zone_origin(SEED, i);
            let path = dir.join(format!("{origin}zone"));
            if !path.exists() {
                let text = format!(
                    "{origin} 3600 IN SOA ns1.hosting.test. hostmaster.hosting.test. 1 7200 3600 1209600 3600\n\
                     {origin} 3600 IN NS ns1.hosting.test.\n"
                );
                fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
            }
            Ok((origin, path))
        })
        .collect()
}

/// Starts a `kind` primary of `zones` and waits until every one answers.
fn start_primary(
    kind: Kind,
    args: &XfrArgs,
    zones: &[(String, PathBuf)],
    notify: Option<SocketAddr>,
    key: Option<&TsigKey>,
    tag: &str,
) -> Result<Peer, String> {
    let addr = ip(PRIMARY, free_port());
    let dir = args
        .data
        .join(format!("primary-{}-{tag}", kind.name().to_lowercase()));
    let mut peer = Peer::start(
        kind,
        Role::Primary { notify },
        addr,
        zones,
        key,
        &dir,
        &args.heron,
    )?;
    let origins: Vec<String> = zones.iter().map(|(o, _)| o.clone()).collect();
    let deadline = Instant::now() + Duration::from_secs(600);
    let started = peer.started;
    let up = probe::until_all_answer(
        addr,
        &origins,
        started,
        deadline,
        (probe::CATCH_UP_RATE, probe::CATCH_UP_RATE),
        &mut || peer.is_running(),
    );
    if up.all_after_s.is_some() {
        return Ok(peer);
    }
    Err(format!(
        "{} primary never served its zones:\n{}",
        kind.name(),
        tail(&peer.log())
    ))
}

fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// Cold starts of every setup at each size; with `catalog`, of consumers
/// (Heron, Knot) given one catalog zone that lists the zones, instead of
/// secondaries given every zone.
fn cold_starts(args: &XfrArgs, kinds: &[Kind], catalog: bool) -> Result<Vec<ColdStart>, String> {
    let largest = args.sizes.iter().copied().max().unwrap_or(0);
    let all = minimal_zones(&args.data.join("minimal"), largest + MEMBERS_ADDED)?;
    let mut out = Vec::new();
    for &size in &args.sizes {
        let zones = &all[..size];
        // Served by the primary, listed by the catalog only later.
        let extras = match catalog {
            true => &all[size..size + MEMBERS_ADDED],
            false => &all[..0],
        };
        let origins: Vec<String> = zones.iter().map(|(o, _)| o.clone()).collect();
        let (listing, setups) = match catalog {
            false => (None, setups(kinds)),
            true => {
                let consumers = kinds
                    .iter()
                    .filter(|k| matches!(k, Kind::Heron | Kind::Knot));
                let setups = consumers.map(|&k| (k, NsdReload::Throttled)).collect();
                (Some(catalog_zone(&args.data, zones)?), setups)
            }
        };
        for (kind, reload) in setups {
            let mut runs = Vec::new();
            // Repeated, but not past a run that did not finish.
            while runs.len() < args.repeats
                && runs
                    .last()
                    .is_none_or(|r: &ColdStart| r.all_answered_s.is_some())
            {
                let given = Given {
                    zones,
                    origins: &origins,
                    catalog: listing.as_ref(),
                    extras,
                };
                let run = cold_start_once(args, kind, reload, given)?;
                eprintln!("cold start: {run:?}");
                runs.push(run);
            }
            out.push(median_run(runs));
        }
    }
    Ok(out)
}

/// The secondaries of the cold start: each server, NSD with both of its
/// reload throttles.
fn setups(kinds: &[Kind]) -> Vec<(Kind, NsdReload)> {
    let mut out = Vec::new();
    for &kind in kinds {
        out.push((kind, NsdReload::Throttled));
        if kind == Kind::Nsd {
            out.push((kind, NsdReload::AtOnce));
        }
    }
    out
}

/// The catalog zone [`peers::CATALOG`] listing `zones`, written in `dir`.
fn catalog_zone(dir: &Path, zones: &[(String, PathBuf)]) -> Result<(String, PathBuf), String> {
    let path = dir.join(format!("{}-{}.zone", peers::CATALOG, zones.len()));
    write_catalog(&path, 1, zones)?;
    Ok((peers::CATALOG.to_string(), path))
}

/// Writes the catalog zone [`peers::CATALOG`] at `serial`, listing
/// `zones` (the nth with unique ID `m<n>`), to `path`.
fn write_catalog(path: &Path, serial: u32, zones: &[(String, PathBuf)]) -> Result<(), String> {
    let mut text = format!(
        "$ORIGIN {}\n$TTL 0\n@ SOA invalid. invalid. {serial} 3600 600 86400 0\n@ NS invalid.\n\
         version TXT \"2\"\n",
        peers::CATALOG
    );
    for (i, (origin, _)) in zones.iter().enumerate() {
        let _ = writeln!(text, "m{i}.zones PTR {origin}");
    }
    fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// What a cold start's secondary is given.
#[derive(Clone, Copy)]
struct Given<'a> {
    zones: &'a [(String, PathBuf)],
    origins: &'a [String],
    /// The catalog zone listing `zones`, for a consumer.
    catalog: Option<&'a (String, PathBuf)>,
    /// Zones the primary serves besides, to add to the catalog one at a
    /// time once the consumer has every member.
    extras: &'a [(String, PathBuf)],
}

/// One cold start of a `kind` secondary of `zones`; with a catalog, of a
/// consumer of that catalog zone (served by a Knot primary), which lists
/// them, and then the members added one at a time.
fn cold_start_once(
    args: &XfrArgs,
    kind: Kind,
    reload: NsdReload,
    given: Given,
) -> Result<ColdStart, String> {
    let Given {
        zones,
        origins,
        catalog,
        extras,
    } = given;
    // Each run starts from the catalog listing `zones` alone.
    if let Some((_, file)) = catalog {
        write_catalog(file, 1, zones)?;
    }
    // A fresh primary port per run: TIME_WAIT sockets of one run do not
    // take ports from the next.
    let served: Vec<(String, PathBuf)> = (zones.iter().chain(extras).chain(catalog))
        .cloned()
        .collect();
    let producer = match catalog {
        Some(_) => Kind::Knot,
        None => Kind::Heron,
    };
    let primary = start_primary(producer, args, &served, None, None, "cold")?;
    let opened_before = active_opens();
    let addr = ip(SECONDARY, free_port());
    let dir = args.data.join(format!(
        "cold-{}{}-{}",
        kind.name().to_lowercase(),
        if catalog.is_some() { "-catalog" } else { "" },
        zones.len()
    ));
    let (role, given) = match catalog {
        None => (
            Role::Secondary {
                primary: primary.addr,
                reload,
            },
            zones,
        ),
        Some(catalog) => (
            Role::Consumer {
                primary: primary.addr,
            },
            std::slice::from_ref(catalog),
        ),
    };
    let mut secondary = Peer::start(kind, role, addr, given, None, &dir, &args.heron)?;
    let started = secondary.started;
    let deadline = started + Duration::from_secs(args.timeout);
    let arrival = probe::until_all_answer(
        addr,
        origins,
        started,
        deadline,
        (probe::WATCH_RATE, probe::CATCH_UP_RATE),
        &mut || secondary.is_running(),
    );
    let mut run = ColdStart {
        server: kind,
        nsd_reload: reload,
        zones: zones.len(),
        all_answered_s: arrival.all_after_s,
        seconds: Spread::of(&arrival.all_after_s.into_iter().collect::<Vec<_>>()),
        answered: arrival.answered,
        probe_gap_s: arrival
            .all_after_s
            .map_or(0.0, |all| all - arrival.last_refused_s),
        connect_failures: connect_failures(kind, &secondary.log()),
        connections_opened: active_opens().saturating_sub(opened_before),
        time_wait: time_wait_with(primary.addr),
        rss_mib: secondary.rss_kib() as f64 / 1024.0,
        anon_mib: secondary.anon_kib() as f64 / 1024.0,
        one_member_ms: Vec::new(),
    };
    if let (Some(catalog), Some(_)) = (catalog, arrival.all_after_s) {
        run.one_member_ms = members_added(&primary, addr, catalog, zones, extras)?;
    }
    Ok(run)
}

/// Adds `extras` to the primary's catalog, which lists `listed`, one at
/// a time, a little over a second apart. For each, once the primary
/// serves the new version, sends the consumer at `consumer` the NOTIFY
/// for it (as the primary would, from its address) and times until the
/// new member answers its SOA over UDP there. Returns the times, ms
/// (None: not within 10 s).
fn members_added(
    primary: &Peer,
    consumer: SocketAddr,
    (catalog, file): &(String, PathBuf),
    listed: &[(String, PathBuf)],
    extras: &[(String, PathBuf)],
) -> Result<Vec<Option<f64>>, String> {
    let origin = Name::parse(catalog).map_err(|e| e.to_string())?;
    let mut times = Vec::new();
    for (k, (member, _)) in extras.iter().enumerate() {
        // Whole seconds apart: some servers compare file times in seconds.
        std::thread::sleep(Duration::from_millis(1100));
        let serial = 2 + k as u32;
        let listing: Vec<(String, PathBuf)> = listed.iter().chain(&extras[..=k]).cloned().collect();
        write_catalog(file, serial, &listing)?;
        primary.reload_zone(catalog);
        let served = Instant::now() + Duration::from_secs(120);
        if probe::until_serial(primary.addr, &origin, serial, served).is_none() {
            return Err(format!(
                "the primary never served catalog serial {serial}:\n{}",
                tail(&primary.log())
            ));
        }
        let sent = probe::notify(consumer, &origin, serial)?;
        let member = Name::parse(member).map_err(|e| e.to_string())?;
        let answered = probe::until_serial(consumer, &member, 1, sent + Duration::from_secs(10));
        let ms = answered.map(|at| at.duration_since(sent).as_secs_f64() * 1e3);
        eprintln!("member added: {member} answered after {ms:?} ms");
        times.push(ms);
    }
    Ok(times)
}

/// The run with the median time (its counters stand for the lot), with
/// the spread of every finished run; a run that did not finish is
/// reported as it is.
fn median_run(mut runs: Vec<ColdStart>) -> ColdStart {
    let times: Vec<f64> = runs.iter().filter_map(|r| r.all_answered_s).collect();
    if times.len() < runs.len() {
        return runs.pop().expect("at least one run");
    }
    let spread = Spread::of(&times);
    let gap = runs.iter().map(|r| r.probe_gap_s).fold(0.0, f64::max);
    runs.sort_by(|a, b| {
        a.all_answered_s
            .unwrap()
            .total_cmp(&b.all_answered_s.unwrap())
    });
    let mut median = runs.swap_remove(runs.len() / 2);
    median.all_answered_s = Some(spread.median);
    median.seconds = spread;
    median.probe_gap_s = gap;
    median
}

/// Connects that failed for want of a local port (EADDRNOTAVAIL, or
/// EADDRINUSE where the port is bound first), counted from the one line
/// each server logs per failed attempt (seen with a port range of a few
/// ports): Heron "refresh from … failed: AXFR: Cannot assign requested
/// address (os error 99)"; NSD "xfrd: connect … failed: Cannot assign
/// requested address"; Knot "refresh, remote …, failed (address is not
/// available)", followed by three more lines about the same failure; BIND
/// "failed to connect: address not available", followed by a "Transfer
/// status" line about it.
fn connect_failures(kind: Kind, log: &str) -> usize {
    let marks: &[&str] = match kind {
        Kind::Heron | Kind::Nsd => &["cannot assign requested address", "address already in use"],
        Kind::Knot => &[
            "failed (address is not available)",
            "failed (address already in use)",
        ],
        Kind::Bind => &[
            "failed to connect: address not available",
            "failed to connect: address in use",
        ],
        Kind::Reflector | Kind::TcpFloor | Kind::TlsFloor => &[],
    };
    log.lines()
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            marks.iter().any(|m| l.contains(m))
        })
        .count()
}

/// TCP connections opened so far in this thread's network namespace
/// (/proc/net/snmp).
fn active_opens() -> u64 {
    let text = fs::read_to_string("/proc/net/snmp").unwrap_or_default();
    let mut tcp = text.lines().filter(|l| l.starts_with("Tcp:"));
    let (Some(names), Some(values)) = (tcp.next(), tcp.next()) else {
        return 0;
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "ActiveOpens")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

/// Sockets in TIME_WAIT with `addr` on either end (`ss`).
fn time_wait_with(addr: SocketAddr) -> usize {
    let out = std::process::Command::new("ss")
        .args(["-Htan", "state", "time-wait"])
        .output();
    let Ok(out) = out else { return 0 };
    let want = addr.to_string();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.split_whitespace().any(|f| f == want))
        .count()
}

/// A small zone whose serial and one record change with each version.
fn propagation_zone(version: u32) -> String {
    format!(
        "$ORIGIN prop.test.\n$TTL 300\n@ SOA ns hostmaster {version} 3600 600 86400 60\n@ NS ns\n\
         ns A 192.0.2.1\nwww A 192.0.2.{}\nmail A 192.0.2.2\n",
        version % 250 + 3
    )
}

fn propagations(args: &XfrArgs, kinds: &[Kind]) -> Result<Vec<Propagation>, String> {
    let origin = Name::parse("prop.test.").unwrap();
    let mut out = Vec::new();
    for &kind in kinds {
        let dir = args
            .data
            .join(format!("prop-{}", kind.name().to_lowercase()));
        fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let file = dir.join("prop.test.zone");
        fs::write(&file, propagation_zone(1)).map_err(|e| e.to_string())?;
        let zones = vec![("prop.test.".to_string(), file.clone())];
        let sec_addr = ip(SECONDARY, free_port());
        let primary = start_primary(kind, args, &zones, Some(sec_addr), None, "prop")?;
        let role = Role::Secondary {
            primary: primary.addr,
            reload: NsdReload::default(),
        };
        let secondary = Peer::start(
            kind,
            role,
            sec_addr,
            &zones,
            None,
            &dir.join("secondary"),
            &args.heron,
        )?;
        if probe::until_serial(
            sec_addr,
            &origin,
            1,
            Instant::now() + Duration::from_secs(60),
        )
        .is_none()
        {
            return Err(format!(
                "{} secondary never got the zone:\n{}",
                kind.name(),
                tail(&secondary.log())
            ));
        }
        let mut delays = Vec::new();
        let mut missed = 0;
        for version in 2..2 + args.changes as u32 {
            // Whole seconds apart: some servers compare file times in seconds.
            std::thread::sleep(Duration::from_millis(1100));
            fs::write(&file, propagation_zone(version)).map_err(|e| e.to_string())?;
            let changed = Instant::now();
            primary.reload();
            match probe::until_serial(
                sec_addr,
                &origin,
                version,
                changed + Duration::from_secs(10),
            ) {
                Some(at) => delays.push(at.duration_since(changed).as_secs_f64() * 1000.0),
                None => missed += 1,
            }
        }
        let mut sorted = delays.clone();
        sorted.sort_by(f64::total_cmp);
        let run = Propagation {
            server: kind,
            median_ms: Spread::of(&sorted).median,
            p90_ms: sorted
                .get((sorted.len() * 9).div_ceil(10).saturating_sub(1))
                .copied()
                .unwrap_or(f64::NAN),
            delays_ms: delays,
            missed,
        };
        eprintln!(
            "propagation: {} median {:.1} ms p90 {:.1} ms missed {}",
            kind.name(),
            run.median_ms,
            run.p90_ms,
            run.missed
        );
        out.push(run);
    }
    Ok(out)
}

/// The pairs of the large-zone transfer: each server to itself, and Heron
/// with Knot both ways.
fn pairs(kinds: &[Kind]) -> Vec<(Kind, Kind)> {
    let mut p: Vec<(Kind, Kind)> = kinds.iter().map(|&k| (k, k)).collect();
    if kinds.contains(&Kind::Heron) && kinds.contains(&Kind::Knot) {
        p.push((Kind::Heron, Kind::Knot));
        p.push((Kind::Knot, Kind::Heron));
    }
    p
}

fn large_transfers(args: &XfrArgs, kinds: &[Kind], results: &mut Results) -> Result<(), String> {
    let origin = "large.test.";
    let dir = args.data.join("large");
    let file = dir.join(format!("{origin}zone"));
    if !file.exists() {
        fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        zones::write_a_zone(&dir, origin, SEED, args.records).map_err(|e| e.to_string())?;
    }
    let zones = vec![(origin.to_string(), file)];
    let key = TsigKey {
        name: "bench-key".into(),
        secret: "q0vXAPu5ZZ8NAb8+HTr5VxvpyvGhUTtX5xM0y4ZxZ4k=".into(),
    };
    let mut current: Option<(Kind, Peer)> = None;
    for (p, s) in pairs(kinds) {
        if !matches!(&current, Some((k, _)) if *k == p) {
            drop(current.take()); // stops the previous primary first
            // A Heron primary takes transfers signed or not.
            let key = (p == Kind::Heron).then_some(&key);
            current = Some((p, start_primary(p, args, &zones, None, key, "large")?));
        }
        let primary = &current.as_ref().unwrap().1;
        if results.large_axfr_bytes == 0 {
            let messages = fetch_axfr(primary.addr, origin)?;
            results.large_axfr_bytes = messages.iter().map(|m| 2 + m.len() as u64).sum();
            results.tsig_work = Some(tsig_work::measure(&messages, origin, &key, 1)?);
            eprintln!("TSIG work: {:?}", results.tsig_work);
        }
        // TSIG's cost: signed and unsigned runs alternate, same primary,
        // more of them than elsewhere: the cost is a few percent.
        let (variants, runs): (&[bool], usize) = if (p, s) == (Kind::Heron, Kind::Heron) {
            (&[false, true], args.repeats.max(TSIG_PAIRS))
        } else {
            (&[false], args.repeats)
        };
        let mut measured = vec![Vec::new(); variants.len()];
        let mut rss = 0.0;
        for run in 0..runs {
            // Which variant goes first alternates too.
            for v in (0..variants.len()).map(|i| (i + run) % variants.len()) {
                let tsig = variants[v];
                let key = tsig.then_some(&key);
                let tag = format!("large-{}-{}-{run}-{tsig}", p.name(), s.name());
                match one_transfer(args, primary, s, &zones, key, &tag) {
                    Ok(t) => {
                        rss = t.rss_mib;
                        measured[v].push(Some(t));
                    }
                    Err(e) => {
                        eprintln!("{} -> {}: {e}", p.name(), s.name());
                        measured[v].push(None);
                    }
                }
            }
        }
        if variants.len() == 2 {
            results.tsig_overhead = Some(tsig_overhead(&measured[0], &measured[1]));
        }
        for (v, &tsig) in variants.iter().enumerate() {
            let done: Vec<&Transfer> = measured[v].iter().flatten().collect();
            let spread = Spread::of(&done.iter().map(|t| t.seconds).collect::<Vec<_>>());
            let run = LargeTransfer {
                primary: p,
                secondary: s,
                tsig,
                mb_per_s: results.large_axfr_bytes as f64 / 1e6 / spread.median,
                seconds: spread,
                secondary_rss_mib: rss,
                cpu_seconds: Spread::of(&done.iter().map(|t| t.cpu_seconds).collect::<Vec<_>>()),
            };
            eprintln!("large: {run:?}");
            results.large.push(run);
        }
    }
    Ok(())
}

/// Signed/unsigned pairs of the TSIG measurement.
const TSIG_PAIRS: usize = 9;

/// Ratios of the signed runs to the unsigned runs, pair by pair (runs that
/// failed leave their pair out).
fn tsig_overhead(unsigned: &[Option<Transfer>], signed: &[Option<Transfer>]) -> TsigOverhead {
    let pairs = || {
        unsigned
            .iter()
            .zip(signed)
            .filter_map(|(u, s)| u.as_ref().zip(s.as_ref()))
    };
    let ratios =
        |f: fn(&Transfer) -> f64| -> Vec<f64> { pairs().map(|(u, s)| f(s) / f(u)).collect() };
    TsigOverhead {
        time_ratio: Spread::of(&ratios(|t| t.seconds)),
        cpu_ratio: Spread::of(&ratios(|t| t.cpu_seconds)),
    }
}

/// One large-zone transfer as measured.
#[derive(Clone)]
struct Transfer {
    /// Secondary start → zone answered.
    seconds: f64,
    /// Primary and secondary together over that time.
    cpu_seconds: f64,
    rss_mib: f64,
}

/// Starts a `kind` secondary of `primary` and measures until it answers
/// the zone.
fn one_transfer(
    args: &XfrArgs,
    primary: &Peer,
    kind: Kind,
    zones: &[(String, PathBuf)],
    key: Option<&TsigKey>,
    tag: &str,
) -> Result<Transfer, String> {
    let addr = ip(SECONDARY, free_port());
    let dir = args.data.join(tag.to_lowercase());
    let role = Role::Secondary {
        primary: primary.addr,
        reload: NsdReload::default(),
    };
    let primary_cpu = sys::group_cpu_seconds(primary.pid());
    let mut secondary = Peer::start(kind, role, addr, zones, key, &dir, &args.heron)?;
    let started = secondary.started;
    let deadline = started + Duration::from_secs(args.timeout);
    let origins = [zones[0].0.clone()];
    let arrival = probe::until_all_answer(
        addr,
        &origins,
        started,
        deadline,
        (probe::WATCH_RATE, probe::CATCH_UP_RATE),
        &mut || secondary.is_running(),
    );
    let rss_mib = secondary.rss_kib() as f64 / 1024.0;
    let cpu_seconds = sys::group_cpu_seconds(secondary.pid())
        + (sys::group_cpu_seconds(primary.pid()) - primary_cpu);
    secondary.stop();
    let outcome = match arrival.all_after_s {
        Some(seconds) => Ok(Transfer {
            seconds,
            cpu_seconds,
            rss_mib,
        }),
        None => Err(format!(
            "no transfer in {} s\n{}",
            args.timeout,
            tail(&secondary.log())
        )),
    };
    let _ = fs::remove_dir_all(&dir);
    outcome
}

/// The messages of an AXFR of `origin` from `server`, read by a minimal
/// client.
fn fetch_axfr(server: SocketAddr, origin: &str) -> Result<Vec<Vec<u8>>, String> {
    let mut stream = TcpStream::connect(server).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(|e| e.to_string())?;
    let q = build_query(
        &Name::parse(origin).unwrap(),
        RType::AXFR,
        &QueryOpts::default(),
    );
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    stream.write_all(&framed).map_err(|e| e.to_string())?;
    let (mut messages, mut soas) = (Vec::new(), 0);
    while soas < 2 {
        let mut len = [0u8; 2];
        stream
            .read_exact(&mut len)
            .map_err(|e| format!("AXFR: {e}"))?;
        let mut msg = vec![0u8; u16::from_be_bytes(len) as usize];
        stream
            .read_exact(&mut msg)
            .map_err(|e| format!("AXFR: {e}"))?;
        let m = Message::parse(&msg).map_err(|e| format!("AXFR: {e}"))?;
        soas += m.answers.iter().filter(|r| r.rtype == RType::SOA).count();
        if m.answers.is_empty() {
            return Err("AXFR refused or empty".into());
        }
        messages.push(msg);
    }
    Ok(messages)
}
