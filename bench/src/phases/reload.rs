//! Reloading the large zone under a steady query load: each reload changes
//! one record, and every answer is checked against the zone it must come
//! from. What an operator needs to know: does a reload lose or garble a
//! query, does any client see the old data again once the new data has
//! been served, how long until the change is answered, and how much
//! memory the reload takes on top of the zone.

use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::trial::settle;
use super::{Ctx, RT_PRIORITY};
use crate::blast::{self, Answer, BlastOpts, QuerySet};
use crate::prng::Rng;
use crate::results::ReloadUnderLoad;
use crate::servers::{Kind, Launch, Sched, Server};
use crate::stats::Spread;
use crate::sys;
use crate::workloads::Workload;
use crate::zones;
use crate::zones::host_label;
use heron_proto::message::Message;
use heron_proto::{Name, RType};

/// What to reload and how hard to load the server meanwhile.
pub struct Plan<'a> {
    /// The zone file the server serves (the large workload's layout).
    pub zone: &'a Path,
    pub origin: &'a str,
    pub seed: u64,
    /// A records in the zone, named by `host_label(seed, i)`.
    pub hosts: usize,
    pub target: SocketAddr,
    pub pid: u32,
    pub reference_qps: f64,
    pub reloads: usize,
    /// Time between reloads (the first comes after one such gap).
    pub every: Duration,
}

/// What an answer must say.
#[derive(Clone, Copy)]
enum Expect {
    Address([u8; 4]),
    /// The record the reloads change: one of `Checker::versions`.
    Changed,
}

/// The address of host `i` in the generated large zone.
fn host_address(i: u64) -> [u8; 4] {
    [10, (i >> 16) as u8, (i >> 8) as u8, i as u8]
}

/// The changed record's address after reload `r` (0-based).
fn changed_address(r: usize) -> [u8; 4] {
    [198, 51, 100, 1 + r as u8]
}

/// Checks answers as they arrive.
struct Checker {
    expect: Vec<Expect>,
    /// The changed record's address per version: as loaded, then after
    /// each reload.
    versions: Vec<[u8; 4]>,
    /// The newest version answered so far, and when each was first seen.
    newest: usize,
    first_seen_ns: Vec<Option<u64>>,
    /// `newest`, for the thread that times the reloads.
    newest_shared: Arc<AtomicUsize>,
    wrong: u64,
    wrong_examples: Vec<String>,
    stale: u64,
}

impl Checker {
    fn see(&mut self, a: Answer) {
        let address = match the_address(a.message) {
            Ok(address) => address,
            Err(why) => return self.wrong(why),
        };
        match self.expect[a.query] {
            Expect::Address(want) if want != address => {
                self.wrong(format!("{address:?} where {want:?} is served"))
            }
            Expect::Address(_) => {}
            Expect::Changed => match self.versions.iter().position(|v| *v == address) {
                None => self.wrong(format!("{address:?} for the changed name")),
                Some(v) if v > self.newest => {
                    self.newest = v;
                    self.newest_shared.store(v, Ordering::Relaxed);
                    self.first_seen_ns[v] = Some(a.received_ns);
                }
                Some(v) if v < self.newest => {
                    let newest_seen = self.first_seen_ns[self.newest].unwrap_or(u64::MAX);
                    if a.sent_ns > newest_seen {
                        self.stale += 1;
                    }
                }
                Some(_) => {}
            },
        }
    }

    fn wrong(&mut self, why: String) {
        self.wrong += 1;
        if self.wrong_examples.len() < 5 {
            self.wrong_examples.push(why);
        }
    }
}

/// The one A record a NOERROR answer must carry.
fn the_address(message: &[u8]) -> Result<[u8; 4], String> {
    let m = Message::parse(message).map_err(|e| format!("unparsable answer: {e}"))?;
    if m.rcode().0 != 0 {
        return Err(format!("RCODE {}", m.rcode().0));
    }
    match &m.answers[..] {
        [r] if r.rtype == RType::A && r.rdata.len() == 4 => Ok(r.rdata[..].try_into().unwrap()),
        other => Err(format!("{} answer records", other.len())),
    }
}

/// The queries: random hosts, every eighth one the changed host.
fn queries(plan: &Plan, changed: u64) -> Result<(QuerySet, Vec<Expect>), String> {
    let mut rng = Rng::new(plan.seed ^ 0x5E10AD);
    let name = |i: u64| Name::parse(&format!("{}.{}", host_label(plan.seed, i), plan.origin));
    let mut questions = Vec::new();
    let mut expect = Vec::new();
    for n in 0..65_536 {
        let i = match n % 8 {
            0 => changed,
            _ => rng.below(plan.hosts as u64),
        };
        questions.push((name(i).map_err(|e| e.to_string())?, RType::A));
        expect.push(match i == changed {
            true => Expect::Changed,
            false => Expect::Address(host_address(i)),
        });
    }
    Ok((QuerySet::of_questions(&questions), expect))
}

/// The zone text after reload `r`: the serial up by `r + 1` and the
/// changed host's address replaced.
fn edited(text: &str, changed_label: &str, r: usize) -> Result<String, String> {
    let mut out = String::with_capacity(text.len() + 16);
    let (mut soa, mut host) = (false, false);
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields[..] {
            ["@", "IN", "SOA", mname, rname, serial, ref rest @ ..] if !soa => {
                let serial: u32 = serial.parse().map_err(|_| "SOA serial".to_string())?;
                let next = serial.wrapping_add(1 + r as u32);
                out.push_str(&format!(
                    "@ IN SOA {mname} {rname} {next} {}",
                    rest.join(" ")
                ));
                soa = true;
            }
            [label, "IN", "A", _] if label == changed_label => {
                let [a, b, c, d] = changed_address(r);
                out.push_str(&format!("{label} IN A {a}.{b}.{c}.{d}"));
                host = true;
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    match (soa, host) {
        (true, true) => Ok(out),
        _ => Err(format!("no SOA or no {changed_label} in the zone")),
    }
}

fn rss_kib(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Loads the server at half its reference rate, reloads the zone
/// `plan.reloads` times with one record changed, and checks every answer.
/// The zone file is edited in place (by rename); the server must reload
/// it on SIGHUP.
pub fn measure(plan: &Plan) -> Result<ReloadUnderLoad, String> {
    let changed = plan.hosts as u64 / 2;
    let label = host_label(plan.seed, changed);
    let text =
        std::fs::read_to_string(plan.zone).map_err(|e| format!("{}: {e}", plan.zone.display()))?;
    let versions: Vec<PathBuf> = (0..plan.reloads)
        .map(|r| {
            let path = plan.zone.with_extension(format!("reload-{r}"));
            let text = edited(&text, &label, r)?;
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok(path)
        })
        .collect::<Result<_, String>>()?;
    drop(text);
    let (set, expect) = queries(plan, changed)?;
    let newest_shared = Arc::new(AtomicUsize::new(0));
    let mut checker = Checker {
        expect,
        versions: std::iter::once(host_address(changed))
            .chain((0..plan.reloads).map(changed_address))
            .collect(),
        newest: 0,
        first_seen_ns: vec![None; plan.reloads + 1],
        newest_shared: newest_shared.clone(),
        wrong: 0,
        wrong_examples: Vec::new(),
        stale: 0,
    };
    let steady_rss_kib = rss_kib(plan.pid, "VmRSS:");
    // Resets the peak (VmHWM) to the current size.
    let _ = std::fs::write(format!("/proc/{}/clear_refs", plan.pid), "5");
    let rate = plan.reference_qps / 2.0;
    let opts = BlastOpts {
        target: plan.target,
        rate,
        window: usize::MAX,
        // Room for reloads that wait for the one before (see
        // `reload_on_schedule`).
        duration: plan.every * (plan.reloads as u32 + 1) + MAX_WAIT,
        drain: Duration::from_millis(500),
        timeout: Duration::from_secs(1),
        ..BlastOpts::default()
    };
    let start = Instant::now();
    let (result, sighups) = std::thread::scope(|scope| {
        let trigger = scope.spawn(|| reload_on_schedule(plan, &versions, start, &newest_shared));
        let result = blast::blast_checked(&set, &opts, start, &mut |a| checker.see(a));
        (result, trigger.join().expect("the reload thread"))
    });
    let r = result.map_err(|e| format!("blast: {e}"))?;
    let sighups = sighups?;
    let reload_ms: Vec<f64> = sighups
        .iter()
        .zip(&checker.first_seen_ns[1..])
        .map(|(&hup, seen)| seen.map_or(f64::NAN, |s| s.saturating_sub(hup) as f64 / 1e6))
        .collect();
    if reload_ms.iter().any(|ms| ms.is_nan()) {
        checker.wrong("a reload's change was never answered".into());
    }
    Ok(ReloadUnderLoad {
        zone_records: plan.hosts + 3,
        reloads: plan.reloads,
        reference_qps: plan.reference_qps,
        offered_qps: r.offered_qps,
        sent: r.sent,
        answered: r.answered,
        lost: r.lost,
        wrong: checker.wrong,
        wrong_examples: checker.wrong_examples,
        stale: checker.stale,
        // NaN (a change never answered) is left out.
        reload_ms: Spread::of(&reload_ms),
        swap_us: Spread::default(),
        lat_p99_us: r.lat_p99_us,
        lat_max_us: r.lat_max_us,
        steady_rss_kib,
        peak_rss_kib: rss_kib(plan.pid, "VmHWM:"),
    })
}

/// The swap times (µs) of every reload in a Heron log: "swapped in N us".
pub fn swap_times_us(log: &str) -> Vec<f64> {
    log.lines()
        .filter_map(|line| line.split("swapped in ").nth(1)?.split(" us").next())
        .filter_map(|n| n.parse().ok())
        .collect()
}

/// Longest a reload waits for the one before it to be answered, and the
/// time the load runs on for that.
const MAX_WAIT: Duration = Duration::from_secs(30);

/// Puts each edited version in place and sends SIGHUP, one per
/// `plan.every`, each once the previous change is answered (a reload on
/// the idle-priority thread may take longer than `plan.every` under load;
/// the reloads then wait for each other, at most `MAX_WAIT` in all);
/// returns when each SIGHUP went, ns since `start`.
fn reload_on_schedule(
    plan: &Plan,
    versions: &[PathBuf],
    start: Instant,
    newest_answered: &AtomicUsize,
) -> Result<Vec<u64>, String> {
    let mut sent = Vec::new();
    let give_up = start + plan.every * (versions.len() as u32) + MAX_WAIT;
    for (r, version) in versions.iter().enumerate() {
        let due = plan.every * (r as u32 + 1);
        std::thread::sleep(due.saturating_sub(start.elapsed()));
        // Version r answered means the change of reload r - 1 is served.
        while newest_answered.load(Ordering::Relaxed) < r && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(10));
        }
        std::fs::rename(version, plan.zone).map_err(|e| format!("{}: {e}", version.display()))?;
        sent.push(start.elapsed().as_nanos() as u64);
        // The server this suite started, by its PID.
        let _ = heron_sys::process::signal_process(plan.pid, heron_sys::process::Signal::HUP);
    }
    Ok(sent)
}

/// Heron serving a private copy of the large zone, reloaded a few times
/// with one record changed while queries run at half the loss-free rate
/// it reached in this run (`reference`).
fn under_load(ctx: &Ctx, w: &Workload, reference: f64) -> Result<ReloadUnderLoad, String> {
    let (origin, file) = &w.zones[0];
    let dir = ctx.work.join("reload");
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let copy = dir.join(file.file_name().unwrap_or_default());
    fs::copy(file, &copy).map_err(|e| format!("{}: {e}", copy.display()))?;
    let served = vec![(origin.clone(), copy.clone())];
    // Normal scheduling, as operators run it: under a real-time policy the
    // reload could not yield to the query worker.
    let launch = Launch {
        sched: Sched::Normal,
        ..ctx.launch.clone()
    };
    ctx.cg
        .set_quota(None)
        .map_err(|e| format!("cgroup quota: {e}"))?;
    let server = Server::start(
        Kind::Heron,
        &ctx.bins,
        &served,
        &w.ready,
        &launch,
        Some(&ctx.cg),
        &ctx.work,
    )?;
    settle();
    let plan = Plan {
        zone: &copy,
        origin,
        seed: zones::DEFAULT_SEED,
        hosts: w.main_records,
        target: server.addr,
        pid: server.pid,
        reference_qps: reference,
        reloads: if ctx.args.quick { 2 } else { 3 },
        every: Duration::from_secs(12),
    };
    if ctx.realtime {
        let _ = sys::set_self_realtime(Some(RT_PRIORITY));
    }
    let mut result = measure(&plan);
    if ctx.realtime {
        let _ = sys::set_self_realtime(None);
    }
    if let Ok(r) = &mut result {
        let swaps = swap_times_us(&server.log_text());
        r.swap_us = Spread::of(&swaps);
    }
    drop(server);
    let _ = fs::remove_dir_all(&dir);
    result
}

/// Heron reloading the large zone of `w` under load, at half of
/// `reference`, its loss-free rate there in this run.
pub(crate) fn run(ctx: &mut Ctx, w: &Workload, reference: f64) -> Option<ReloadUnderLoad> {
    ctx.say("reload under load: Heron, the large zone, one record changed per reload");
    match under_load(ctx, w, reference) {
        Ok(r) => {
            ctx.say(&format!(
                "  {} reloads at {:.0} q/s: {} sent, {} lost, {} wrong, {} stale; \
                 change answered {:.0} ms after SIGHUP (median); RSS {} MiB, peak {} MiB",
                r.reloads,
                r.offered_qps,
                r.sent,
                r.lost,
                r.wrong,
                r.stale,
                r.reload_ms.median,
                r.steady_rss_kib / 1024,
                r.peak_rss_kib / 1024
            ));
            Some(r)
        }
        Err(e) => {
            ctx.say(&format!("  reload under load: ERROR {e}"));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_changes_the_serial_and_one_address() {
        let text = "$ORIGIN big.test.\n$TTL 3600\n@ IN SOA ns1 hostmaster 41 7200 3600 1209600 3600\n\
                    @ IN NS ns1\nns1 IN A 192.0.2.53\nabc IN A 10.0.0.0\nxyz IN A 10.0.0.1\n";
        let out = edited(text, "xyz", 1).unwrap();
        assert!(out.contains("@ IN SOA ns1 hostmaster 43 7200 3600 1209600 3600\n"));
        assert!(out.contains("xyz IN A 198.51.100.2\n"));
        assert!(out.contains("abc IN A 10.0.0.0\n"));
        assert!(edited(text, "nope", 0).is_err());
    }

    fn answer(query: usize, sent_ns: u64, address: [u8; 4]) -> (usize, u64, Vec<u8>) {
        let mut m = vec![0, 0, 0x84, 0, 0, 1, 0, 1, 0, 0, 0, 0];
        m.extend_from_slice(b"\x01h\x00\x00\x01\x00\x01");
        m.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]);
        m.extend_from_slice(&address);
        (query, sent_ns, m)
    }

    #[test]
    fn the_checker_counts_wrong_and_stale_answers() {
        let mut c = Checker {
            expect: vec![Expect::Address([10, 0, 0, 1]), Expect::Changed],
            versions: vec![[10, 0, 0, 2], [198, 51, 100, 1]],
            newest: 0,
            first_seen_ns: vec![None; 2],
            newest_shared: Arc::new(AtomicUsize::new(0)),
            wrong: 0,
            wrong_examples: Vec::new(),
            stale: 0,
        };
        let mut feed = |(query, sent_ns, m): (usize, u64, Vec<u8>), received_ns| {
            c.see(Answer {
                query,
                sent_ns,
                received_ns,
                message: &m,
            })
        };
        feed(answer(0, 1, [10, 0, 0, 1]), 2);
        feed(answer(1, 3, [10, 0, 0, 2]), 4);
        feed(answer(1, 5, [198, 51, 100, 1]), 6);
        // Sent before the new version was first answered: may be old.
        feed(answer(1, 5, [10, 0, 0, 2]), 7);
        // Sent after: must not be.
        feed(answer(1, 8, [10, 0, 0, 2]), 9);
        feed(answer(0, 10, [10, 0, 0, 9]), 11);
        assert_eq!((c.stale, c.wrong), (1, 1));
        assert_eq!(c.first_seen_ns, [None, Some(6)]);
    }

    #[test]
    fn swap_times_come_from_the_reload_lines() {
        let log = "x INFO reload done in 3810 ms, swapped in 12 us: 1 zones re-read\n\
                   x INFO answering\nx INFO reload done in 2 ms, swapped in 7 us: 0 zones\n";
        assert_eq!(swap_times_us(log), vec![12.0, 7.0]);
    }
}
