//! Overload (issue 24): each DNS server, under a CPU quota, is
//! offered [`FACTOR`] times its own measured capacity for a while, over
//! UDP and then over TCP with many connections. Recorded: the rate it
//! answers during the overload, the queries lost in the windows of
//! moderate load right after it (how fast it recovers), its memory
//! before, at the peak of and after the overload, and that it is still
//! running and answering at the end.
//!
//! The quota is what lets one generator core offer three times a
//! server's capacity (`--quota`; for TCP `--overload-tcp-quota` may set
//! another, the same for every server); the generator's own CPU and the rate it achieved are
//! recorded to show it kept up, and over TCP, where a client can send only
//! what the server reads, the share of the time the server held every
//! query slot. Both transports use `blast` (over TCP: `blast_tcp`, whose
//! figures leave out opening the connections). Every load is bounded in
//! time.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use super::Ctx;
use super::capacity;
use super::cost_matrix::{PACED, PACED_CONFIG};
use super::trial::{blast_opts, loss_free_rate_with, settle};
use crate::blast::{BlastOpts, BlastResult, QuerySet};
use crate::blast_tcp::{TcpBlastOpts, TcpClients, TcpLoad};
use crate::interrupt::interrupted;
use crate::results::{Overload, OverloadRun, OverloadServer};
use crate::servers::{Kind, Launch, Server};
use crate::sys;
use crate::workloads::Workload;
use heron_proto::{Name, RType};
use heron_testkit::{QueryOpts, build_query, try_query_udp};

/// Offered load as a multiple of the server's capacity.
pub const FACTOR: f64 = 3.0;
/// Load in the recovery windows, as a share of capacity.
const RECOVERY_SHARE: f64 = 0.5;
/// Recovery windows after each overload, and their length.
const RECOVERY_WINDOWS: usize = 5;
const WINDOW_S: f64 = 1.0;
/// Connections of the TCP recovery windows (a fresh, modest client).
const RECOVERY_TCP_CONNECTIONS: usize = 100;
/// Queries outstanding at most on each connection, when the TCP capacity
/// is measured and during the overload: the same, for a server reads
/// and answers a connection's pipelined queries together and its cost
/// per query falls with their number (Heron under a 10% quota: 66,593
/// q/s with 10 outstanding on each of 10,000 connections, 173,287 with
/// 30), so a capacity taken with fewer would not be the capacity of the
/// overload's connections. Over TCP the overload differs from the
/// capacity run in being paced at three times its rate: a client can
/// send only what the server reads, so every slot stays taken and the
/// rest of the schedule waits.
const CAPACITY_IN_FLIGHT: usize = 30;
const OVERLOAD_IN_FLIGHT: usize = 30;
/// TCP: the longest wait for the last answers, and for the connections
/// to open.
const TCP_DRAIN: Duration = Duration::from_secs(2);
/// The longest wait for the last answers of the TCP capacity, whose
/// connections carry the overload next: a server left with queries of
/// the capacity run would spend the overload's first seconds on answers
/// nobody counts (at 10,000 answers a second, the 100,000 outstanding
/// over 10,000 connections take 10 s).
const TCP_CAPACITY_DRAIN: Duration = Duration::from_secs(30);
const TCP_CONNECT_TIMEOUT: Duration = Duration::from_secs(60);
/// The UDP capacity's bisection (the highest loss-free rate): its range
/// as multiples of the closed-loop figure, and its steps after the two
/// ends. 0.8–2× in 6 steps ends within 2% (0.5–4× in 5 steps ended
/// within 11%, so a capacity read up to 11% low).
const CAPACITY_RANGE: (f64, f64) = (0.8, 2.0);
const CAPACITY_STEPS: usize = 6;
/// In the bisection's probes, a query unanswered this long after it was
/// sent is lost. With the usual 300 ms, a probe passed at a rate the
/// server cannot keep up with as long as the excess fitted in its socket
/// buffer and was answered late: Heron's 4 MiB buffer holds about 10,000
/// queries, which over a 1 s probe let its capacity read 10% high (40%
/// over the quick run's 0.25 s). 50 ms is well above the quota's
/// throttled stretches (6 ms in each 10 ms at 40%), and the probes last
/// as long as the closed loop, so a buffer adds at most 50 ms of queries
/// over the probe's length (2% at 3 s).
const CAPACITY_TIMEOUT: Duration = Duration::from_millis(50);
/// How often memory is read during the overload.
const RSS_EVERY: Duration = Duration::from_millis(250);

/// Lengths and sizes of the phase.
#[derive(Clone, Debug)]
pub struct Plan {
    pub seconds: f64,
    pub tcp_connections: usize,
    /// Length of the capacity measurement (each of UDP and TCP).
    pub capacity_s: f64,
    /// TCP: the first seconds of the capacity run and of the overload,
    /// whose answers are not counted: 300,000 queries outstanding take a
    /// while to come back from a slow server (Knot answered none in the
    /// first 3 s on a busy machine).
    pub tcp_warmup_s: f64,
    /// The transports measured.
    pub udp: bool,
    pub tcp: bool,
}

impl Plan {
    /// The plan of a full or a quick run over `transports` ("udp",
    /// "tcp"; none: both).
    pub fn new(quick: bool, transports: &[String]) -> Plan {
        let has =
            |t: &str| transports.is_empty() || transports.iter().any(|x| x.eq_ignore_ascii_case(t));
        let (seconds, tcp_connections, capacity_s, tcp_warmup_s) = match quick {
            true => (5.0, 1_000, 1.0, 1.0),
            false => (30.0, 10_000, 3.0, 5.0),
        };
        Plan {
            seconds,
            tcp_connections,
            capacity_s,
            tcp_warmup_s,
            udp: has("udp"),
            tcp: has("tcp"),
        }
    }
}

/// Every DNS server of `kinds` in turn on the root-like workload `w`.
pub(crate) fn run(ctx: &mut Ctx, w: &Workload, kinds: &[Kind], plan: &Plan) -> Overload {
    ctx.say(&format!(
        "overload: {FACTOR}× each server's capacity for {} s, UDP and TCP ({} connections)",
        plan.seconds, plan.tcp_connections
    ));
    let mut out = Overload {
        factor: FACTOR,
        seconds: plan.seconds,
        window_s: WINDOW_S,
        recovery_share: RECOVERY_SHARE,
        servers: Vec::new(),
    };
    let set = match QuerySet::load(&w.queries) {
        Ok(set) => set,
        Err(e) => {
            ctx.say(&format!("  overload: ERROR {e}"));
            return out;
        }
    };
    for (kind, name, heron_server) in variants(kinds, ctx.args.overload_pacing_ab) {
        let result = one_server(ctx, w, (kind, name, heron_server), &set, plan);
        say_server(ctx, &result);
        out.servers.push(result);
        if interrupted() {
            break;
        }
    }
    out
}

/// The servers measured: each DNS server of `kinds` as (kind, name,
/// extra lines of Heron's `[server]`), and with `pacing_ab` Heron once
/// more with its UDP pacing on (an A/B in the same run).
fn variants(kinds: &[Kind], pacing_ab: bool) -> Vec<(Kind, &'static str, &'static str)> {
    let mut out = Vec::new();
    for &kind in kinds.iter().filter(|k| k.is_dns()) {
        out.push((kind, kind.name(), ""));
        if kind == Kind::Heron && pacing_ab {
            out.push((kind, PACED, PACED_CONFIG));
        }
    }
    out
}

fn one_server(
    ctx: &Ctx,
    w: &Workload,
    (kind, name, heron_server): (Kind, &str, &str),
    set: &QuerySet,
    plan: &Plan,
) -> OverloadServer {
    let mut result = OverloadServer {
        server: name.into(),
        ..OverloadServer::default()
    };
    let launch = Launch {
        tcp_clients_max: plan.tcp_connections + plan.tcp_connections / 10,
        heron_server: heron_server.into(),
        ..ctx.launch.clone()
    };
    let mut server = match ctx.start_with(kind, w, None, &launch) {
        Ok(s) => s,
        Err(e) => {
            result.errors.push(e);
            return result;
        }
    };
    if let Err(e) = ctx.cg.set_quota(Some(ctx.args.quota)) {
        result.errors.push(format!("cgroup quota: {e}"));
        return result;
    }
    if plan.udp {
        match udp(ctx, &server, set, plan) {
            Ok(r) => result.udp = Some(r),
            Err(e) => result.errors.push(format!("UDP: {e}")),
        }
        settle();
    }
    if plan.tcp && !interrupted() {
        match tcp(ctx, &server, set, plan) {
            Ok(r) => result.tcp = Some(r),
            Err(e) => result.errors.push(format!("TCP: {e}")),
        }
    }
    let _ = ctx.cg.set_quota(None);
    result.alive = !server.has_exited();
    result.answers_at_end = result.alive && answers(&server, w);
    if !result.alive {
        result
            .errors
            .push(format!("the server exited: {}", server.log_tail()));
    }
    result
}

/// Whether the server answers an SOA query for the workload's first zone.
fn answers(server: &Server, w: &Workload) -> bool {
    let origin = w.ready.first().map_or(".", String::as_str);
    let Ok(name) = Name::parse(origin) else {
        return false;
    };
    let query = build_query(&name, RType::SOA, &QueryOpts::default());
    (0..3).any(|_| try_query_udp(server.addr, &query).is_ok())
}

/// Reads the server's RSS every [`RSS_EVERY`] while `during` runs; its
/// result and the highest RSS seen (KiB).
fn with_peak_rss<T>(server: &Server, during: impl FnOnce() -> T) -> (T, u64) {
    let (done, peak) = (AtomicBool::new(false), AtomicU64::new(rss(server)));
    let result = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(rss(server), Ordering::Relaxed);
                std::thread::sleep(RSS_EVERY);
            }
        });
        let result = during();
        done.store(true, Ordering::Relaxed);
        result
    });
    (result, peak.load(Ordering::Relaxed).max(rss(server)))
}

fn rss(server: &Server) -> u64 {
    server.memory_kib().0
}

/// Capacity (closed loop under the quota), then the overload, then the
/// recovery windows, over UDP.
fn udp(ctx: &Ctx, server: &Server, set: &QuerySet, plan: &Plan) -> Result<OverloadRun, String> {
    let mut window = ctx.args.window;
    let mut notes = Vec::new();
    let closed = capacity::trial(
        ctx,
        server,
        &ctx.cg,
        set,
        plan.capacity_s,
        &mut window,
        &mut notes,
    )?;
    settle();
    // A closed loop under a quota waits out each throttled period, so it
    // may understate what the server answers; the highest loss-free
    // open-loop rate may not, but one disturbed probe cuts it short: the
    // higher of the two.
    let (lo, hi) = CAPACITY_RANGE;
    let mut range = (closed.answered_qps * lo, closed.answered_qps * hi);
    let probe = |rate: f64| capacity_probe(server, rate, plan);
    let mut probes = Vec::new();
    let mut loss_free = None;
    // A disturbed closed loop can put the top of the range below the
    // capacity: while the top passes, the range moves up (twice at most).
    for _ in 0..3 {
        let (best, more) =
            loss_free_rate_with(ctx, server, &ctx.cg, set, range, CAPACITY_STEPS, &probe)?;
        probes.extend(more);
        loss_free = best.or(loss_free);
        if best != Some(range.1) {
            break;
        }
        range = (range.1, range.1 * hi / lo);
    }
    let capacity_qps = loss_free.unwrap_or(0.0).max(closed.answered_qps);
    settle();
    let rss_before_kib = rss(server);
    let target = capacity_qps * FACTOR;
    let (s0, g0) = (server.cpu_seconds(Some(&ctx.cg)), sys::thread_cpu_seconds());
    let (overload, rss_peak_kib) = with_peak_rss(server, || {
        ctx.blast(set, &blast_opts(server.addr, target, 0, plan.seconds))
    });
    let overload = overload?;
    let wall = overload.duration_s.max(1e-9);
    let (server_cpu, generator_cpu) = (
        server.cpu_seconds(Some(&ctx.cg)) - s0,
        sys::thread_cpu_seconds() - g0,
    );
    ctx.say(&format!(
        "  answered per server CPU-second: {:.0} in the closed loop ({:.0}% of a core), {:.0} \
         during the overload ({:.0}% of a core)",
        closed.per_cpu_s,
        closed.cpu_share * 100.0,
        overload.answered as f64 / server_cpu.max(1e-9),
        server_cpu / wall * 100.0
    ));
    // At once: what the server still has queued is part of recovering.
    let mut recovery = Vec::with_capacity(RECOVERY_WINDOWS);
    for _ in 0..RECOVERY_WINDOWS {
        let r = ctx.blast(
            set,
            &blast_opts(server.addr, capacity_qps * RECOVERY_SHARE, 0, WINDOW_S),
        )?;
        recovery.push((r.sent, r.lost));
    }
    Ok(OverloadRun {
        connections: 0,
        capacity_qps,
        target_qps: target,
        offered_qps: overload.offered_qps,
        answered_qps: overload.answered_qps_sending(),
        generator_cpu_share: generator_cpu / wall,
        server_cpu_share: server_cpu / wall,
        recovery,
        rss_before_kib,
        rss_peak_kib,
        rss_after_kib: rss(server),
        quota: ctx.args.quota,
        capacity_closed_qps: closed.answered_qps,
        capacity_open_qps: loss_free.unwrap_or(0.0),
        capacity_probes: probes,
        client_drops: overload.client_drops,
        server_drops: overload.server_drops,
        ..OverloadRun::default()
    })
}

/// One probe of the UDP capacity's bisection: open loop at `rate`, as
/// long as the closed-loop measurement, a query lost after
/// [`CAPACITY_TIMEOUT`].
fn capacity_probe(server: &Server, rate: f64, plan: &Plan) -> BlastOpts {
    BlastOpts {
        timeout: CAPACITY_TIMEOUT,
        ..blast_opts(server.addr, rate, 0, plan.capacity_s)
    }
}

/// A load over the TCP connections: at `rate` (0: closed loop) with up
/// to `in_flight` queries outstanding on each.
fn tcp_load(in_flight: usize, rate: f64, seconds: f64, drain: Duration, warmup: f64) -> TcpLoad {
    TcpLoad {
        rate,
        in_flight,
        duration: Duration::from_secs_f64(seconds),
        drain,
        count_from: Duration::from_secs_f64(warmup),
    }
}

/// `load` over `clients` as the generator, with the generator's CPU
/// over it as a share of its core (the drain included).
fn run_tcp(
    ctx: &Ctx,
    clients: &mut TcpClients,
    set: &QuerySet,
    load: &TcpLoad,
) -> Result<(BlastResult, f64), String> {
    let (g0, t0) = (sys::thread_cpu_seconds(), std::time::Instant::now());
    let r = ctx.as_generator(|| clients.run(set, load));
    let r = r.map_err(|e| format!("blast over TCP: {e}"))?;
    let share = (sys::thread_cpu_seconds() - g0) / t0.elapsed().as_secs_f64().max(1e-9);
    Ok((r, share))
}

/// The same over TCP, under `--overload-tcp-quota` (default: the same
/// quota as UDP; the generator sleeps while the server holds every slot,
/// and its CPU shows its headroom). The connections are opened uncapped (how fast a server accepts
/// thousands of them under a small quota is not what this measures), then
/// carry the capacity, closed loop with [`CAPACITY_IN_FLIGHT`] queries
/// outstanding on each, and the overload with up to [`OVERLOAD_IN_FLIGHT`];
/// recovery is measured from a fresh client.
fn tcp(ctx: &Ctx, server: &Server, set: &QuerySet, plan: &Plan) -> Result<OverloadRun, String> {
    let conns = plan.tcp_connections;
    let quota = ctx.args.overload_tcp_quota.unwrap_or(ctx.args.quota);
    ctx.cg
        .set_quota(None)
        .map_err(|e| format!("cgroup quota: {e}"))?;
    let opened = ctx.as_generator(|| TcpClients::open(server.addr, conns, TCP_CONNECT_TIMEOUT));
    let mut clients = opened.map_err(|e| format!("opening {conns} connections: {e}"))?;
    let o = &clients.opened;
    ctx.say(&format!(
        "  {conns} connections opened in {:.1} s ({} connects tried again; listen queue overflows \
         meanwhile: {:?})",
        o.seconds, o.failed, o.listen_overflows
    ));
    ctx.cg
        .set_quota(Some(quota))
        .map_err(|e| format!("cgroup quota: {e}"))?;
    settle();
    let warmup = plan.tcp_warmup_s;
    let seconds = warmup + plan.capacity_s;
    let load = tcp_load(CAPACITY_IN_FLIGHT, 0.0, seconds, TCP_CAPACITY_DRAIN, warmup);
    let (cap, cap_generator_cpu) = run_tcp(ctx, &mut clients, set, &load)?;
    // Over the sending phase only: the drain's answers (up to one per
    // slot, 100,000 with 10,000 connections) would add a tenth to a 3 s
    // run at 300,000 q/s.
    let capacity_qps = cap.answered_qps_sending();
    if capacity_qps <= 0.0 {
        return Err(format!(
            "no answers in the capacity run after its first {warmup} s ({} in all)",
            cap.answered
        ));
    }
    ctx.say(&format!(
        "  capacity over TCP: {capacity_qps:.0} q/s while sending ({:.0} with the drain); every \
         slot taken {:.0}% of the time; generator CPU {:.0}%",
        cap.answered_qps,
        cap.slots_taken_s / cap.duration_s.max(1e-9) * 100.0,
        cap_generator_cpu * 100.0
    ));
    settle();
    let rss_before_kib = rss(server);
    let target = capacity_qps * FACTOR;
    let s0 = server.cpu_seconds(Some(&ctx.cg));
    let load = tcp_load(OVERLOAD_IN_FLIGHT, target, plan.seconds, TCP_DRAIN, warmup);
    let (overload, rss_peak_kib) = with_peak_rss(server, || run_tcp(ctx, &mut clients, set, &load));
    let (overload, generator_cpu_share) = overload?;
    let wall = overload.duration_s.max(1e-9);
    let server_cpu = server.cpu_seconds(Some(&ctx.cg)) - s0;
    ctx.say(&format!(
        "  {} of {conns} connections still open after the overload",
        clients.open_count()
    ));
    drop(clients);
    let mut recovery = Vec::with_capacity(RECOVERY_WINDOWS);
    for _ in 0..RECOVERY_WINDOWS {
        let load = TcpBlastOpts {
            target: server.addr,
            rate: capacity_qps * RECOVERY_SHARE,
            connections: RECOVERY_TCP_CONNECTIONS,
            in_flight: 2,
            duration: Duration::from_secs_f64(WINDOW_S),
            drain: TCP_DRAIN,
            connect_timeout: TCP_CONNECT_TIMEOUT,
        };
        let r = ctx.blast_tcp(set, &load)?;
        recovery.push((r.sent, r.lost));
    }
    Ok(OverloadRun {
        connections: conns,
        capacity_qps,
        target_qps: target,
        offered_qps: overload.offered_qps,
        answered_qps: overload.answered_qps_sending(),
        generator_cpu_share,
        server_cpu_share: server_cpu / wall,
        recovery,
        rss_before_kib,
        rss_peak_kib,
        rss_after_kib: rss(server),
        quota,
        slots_taken_share: overload.slots_taken_s / wall,
        ..OverloadRun::default()
    })
}

fn say_server(ctx: &Ctx, s: &OverloadServer) {
    for (transport, run) in [("UDP", &s.udp), ("TCP", &s.tcp)] {
        let Some(r) = run else { continue };
        ctx.say(&format!(
            "  {} {transport}: quota {:.0}%; capacity {:.0} q/s (closed loop {:.0}, open loop {:.0}; \
             probes {:?}); offered {:.0} of {:.0} asked, answered {:.0} ({:.0}% of capacity); \
             every slot taken {:.0}% of the time; generator CPU {:.0}%; server CPU {:.0}%; \
             drops at the generator {} / at the server {}; \
             lost after {} ({:?} windows to recover); RSS {} / {} / {} KiB",
            s.server,
            r.quota * 100.0,
            r.capacity_qps,
            r.capacity_closed_qps,
            r.capacity_open_qps,
            r.capacity_probes
                .iter()
                .map(|(q, l)| format!("{q:.0}:{l:.2}%"))
                .collect::<Vec<_>>(),
            r.offered_qps,
            r.target_qps,
            r.answered_qps,
            r.answered_share() * 100.0,
            r.slots_taken_share * 100.0,
            r.generator_cpu_share * 100.0,
            r.server_cpu_share * 100.0,
            r.client_drops,
            r.server_drops,
            r.lost_after(),
            r.windows_to_recover(),
            r.rss_before_kib,
            r.rss_peak_kib,
            r.rss_after_kib
        ));
    }
    ctx.say(&format!(
        "  {}: running at the end {}, answering {}",
        s.server, s.alive, s.answers_at_end
    ));
    for e in &s.errors {
        ctx.say(&format!("  {}: ERROR {e}", s.server));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transports_choose_the_cells() {
        let both = Plan::new(true, &[]);
        assert!(both.udp && both.tcp);
        let udp = Plan::new(false, &["UDP".into()]);
        assert!(udp.udp && !udp.tcp);
        assert_eq!((udp.seconds, udp.tcp_connections), (30.0, 10_000));
        let tcp = Plan::new(true, &["tcp".into()]);
        assert!(!tcp.udp && tcp.tcp);
    }

    #[test]
    fn the_pacing_ab_runs_heron_again_with_pacing_right_after_it() {
        let kinds = [Kind::Heron, Kind::Reflector, Kind::Nsd];
        let names = |ab| variants(&kinds, ab).iter().map(|v| v.1).collect::<Vec<_>>();
        assert_eq!(names(false), ["Heron", "NSD"]);
        assert_eq!(names(true), ["Heron", PACED, "NSD"]);
        assert_eq!(variants(&kinds, true)[1].2, "udp-coalesce-us = 50\n");
    }
}
