//! Overload (issue 24): each DNS server, under the run's CPU quota, is
//! offered [`FACTOR`] times its own measured capacity for a while, over
//! UDP and then over TCP with many connections. Recorded: the rate it
//! answers during the overload, the queries lost in the windows of
//! moderate load right after it (how fast it recovers), its memory
//! before, at the peak of and after the overload, and that it is still
//! running and answering at the end.
//!
//! The quota is what lets one generator core offer three times a
//! server's capacity; the generator's own CPU and the rate it achieved
//! are recorded to show it kept up. Both transports use `blast` (over TCP:
//! `blast_tcp`, whose figures leave out opening the connections). Every
//! load is bounded in time.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use super::Ctx;
use super::capacity;
use super::trial::{blast_opts, loss_free_rate, settle};
use crate::blast::QuerySet;
use crate::blast_tcp::TcpBlastOpts;
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
/// Queries outstanding at most on each connection when the TCP capacity
/// is measured (enough to keep the server busy through throttled
/// periods), and during the overload (three times as many, for the
/// offered rate to outrun the server).
const CAPACITY_IN_FLIGHT: usize = 10;
const OVERLOAD_IN_FLIGHT: usize = 30;
/// TCP: the longest wait for the last answers, and for the connections
/// to open.
const TCP_DRAIN: Duration = Duration::from_secs(2);
const TCP_CONNECT_TIMEOUT: Duration = Duration::from_secs(60);
/// Bisection steps of the UDP capacity (the highest loss-free rate).
const CAPACITY_STEPS: usize = 5;
/// How often memory is read during the overload.
const RSS_EVERY: Duration = Duration::from_millis(250);

/// Lengths and sizes of the phase.
#[derive(Clone, Debug)]
pub struct Plan {
    pub seconds: f64,
    pub tcp_connections: usize,
    /// Length of the capacity measurement (each of UDP and TCP).
    pub capacity_s: f64,
}

impl Plan {
    pub fn new(quick: bool) -> Plan {
        match quick {
            true => Plan {
                seconds: 5.0,
                tcp_connections: 1_000,
                capacity_s: 1.0,
            },
            false => Plan {
                seconds: 30.0,
                tcp_connections: 10_000,
                capacity_s: 3.0,
            },
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
    for &kind in kinds.iter().filter(|k| k.is_dns()) {
        let result = one_server(ctx, w, kind, &set, plan);
        say_server(ctx, &result);
        out.servers.push(result);
        if interrupted() {
            break;
        }
    }
    out
}

fn one_server(ctx: &Ctx, w: &Workload, kind: Kind, set: &QuerySet, plan: &Plan) -> OverloadServer {
    let mut result = OverloadServer {
        server: kind.name().into(),
        ..OverloadServer::default()
    };
    let launch = Launch {
        tcp_clients_max: plan.tcp_connections + plan.tcp_connections / 10,
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
    match udp(ctx, &server, set, plan) {
        Ok(r) => result.udp = Some(r),
        Err(e) => result.errors.push(format!("UDP: {e}")),
    }
    settle();
    if !interrupted() {
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
    let range = (closed.answered_qps * 0.5, closed.answered_qps * 4.0);
    let (loss_free, _) = loss_free_rate(ctx, server, &ctx.cg, set, range, CAPACITY_STEPS)?;
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
        answered_qps: overload.answered_qps,
        generator_cpu_share: generator_cpu / wall,
        server_cpu_share: server_cpu / wall,
        recovery,
        rss_before_kib,
        rss_peak_kib,
        rss_after_kib: rss(server),
    })
}

/// `blast` over TCP to the server: `connections` connections with up to
/// `in_flight` queries outstanding on each, at `rate` (0: closed loop).
fn tcp_load(
    server: &Server,
    connections: usize,
    in_flight: usize,
    rate: f64,
    seconds: f64,
) -> TcpBlastOpts {
    TcpBlastOpts {
        target: server.addr,
        rate,
        connections,
        in_flight,
        duration: Duration::from_secs_f64(seconds),
        drain: TCP_DRAIN,
        connect_timeout: TCP_CONNECT_TIMEOUT,
    }
}

/// The same over TCP (`blast` over TCP, whose figures leave out opening
/// the connections): capacity over the overload's connections with
/// [`CAPACITY_IN_FLIGHT`] queries outstanding on each, closed loop; the overload over them with
/// up to [`OVERLOAD_IN_FLIGHT`] each; recovery from a fresh client.
fn tcp(ctx: &Ctx, server: &Server, set: &QuerySet, plan: &Plan) -> Result<OverloadRun, String> {
    let conns = plan.tcp_connections;
    let load = tcp_load(server, conns, CAPACITY_IN_FLIGHT, 0.0, plan.capacity_s);
    let cap = ctx.blast_tcp(set, &load)?;
    let capacity_qps = cap.answered_qps;
    settle();
    let rss_before_kib = rss(server);
    let target = capacity_qps * FACTOR;
    let (s0, g0) = (server.cpu_seconds(Some(&ctx.cg)), sys::thread_cpu_seconds());
    let load = tcp_load(server, conns, OVERLOAD_IN_FLIGHT, target, plan.seconds);
    let (overload, rss_peak_kib) = with_peak_rss(server, || ctx.blast_tcp(set, &load));
    let overload = overload?;
    let wall = overload.duration_s.max(1e-9);
    let (server_cpu, generator_cpu) = (
        server.cpu_seconds(Some(&ctx.cg)) - s0,
        sys::thread_cpu_seconds() - g0,
    );
    let mut recovery = Vec::with_capacity(RECOVERY_WINDOWS);
    for _ in 0..RECOVERY_WINDOWS {
        let rate = capacity_qps * RECOVERY_SHARE;
        let load = tcp_load(server, RECOVERY_TCP_CONNECTIONS, 2, rate, WINDOW_S);
        let r = ctx.blast_tcp(set, &load)?;
        recovery.push((r.sent, r.lost));
    }
    Ok(OverloadRun {
        connections: conns,
        capacity_qps,
        target_qps: target,
        offered_qps: overload.offered_qps,
        answered_qps: overload.answered_qps,
        generator_cpu_share: generator_cpu / wall,
        server_cpu_share: server_cpu / wall,
        recovery,
        rss_before_kib,
        rss_peak_kib,
        rss_after_kib: rss(server),
    })
}

fn say_server(ctx: &Ctx, s: &OverloadServer) {
    for (transport, run) in [("UDP", &s.udp), ("TCP", &s.tcp)] {
        let Some(r) = run else { continue };
        ctx.say(&format!(
            "  {} {transport}: capacity {:.0} q/s; offered {:.0} of {:.0} asked, answered {:.0} \
             ({:.0}% of capacity); generator CPU {:.0}%; lost after {} ({:?} windows to recover); \
             RSS {} / {} / {} KiB",
            s.server,
            r.capacity_qps,
            r.offered_qps,
            r.target_qps,
            r.answered_qps,
            r.answered_share() * 100.0,
            r.generator_cpu_share * 100.0,
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
