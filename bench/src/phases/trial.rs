//! One measured load (a trial) and what the phases build from them.

use std::path::Path;
use std::time::{Duration, Instant};

use super::Ctx;
use crate::blast::{BlastOpts, QuerySet};
use crate::dnsperf::{self, DnsperfOpts, DnsperfResult};
use crate::interrupt::interrupted;
use crate::results::{MAX_LOSS_PCT, Phase, Trial};
use crate::servers::Server;
use crate::stats::search_rate;
use crate::sys::Cgroup;

pub(crate) fn blast_opts(
    target: std::net::SocketAddr,
    rate: f64,
    window: usize,
    seconds: f64,
) -> BlastOpts {
    BlastOpts {
        target,
        rate,
        window: if rate > 0.0 { usize::MAX } else { window },
        duration: Duration::from_secs_f64(seconds),
        drain: Duration::from_millis(300),
        timeout: Duration::from_millis(300),
        ..BlastOpts::default()
    }
}

/// One blast run with the server's CPU time measured around it.
pub(crate) fn udp_trial(
    ctx: &Ctx,
    server: &Server,
    cg: &Cgroup,
    set: &QuerySet,
    opts: &BlastOpts,
) -> Result<Trial, String> {
    if interrupted() {
        return Err("interrupted".into());
    }
    let c0 = server.cpu_seconds(Some(cg));
    let p0 = server.proc_cpu_seconds();
    let t0 = Instant::now();
    let r = ctx.blast(set, opts)?;
    let wall = t0.elapsed().as_secs_f64();
    let cpu = server.cpu_seconds(Some(cg)) - c0;
    let pcpu = server.proc_cpu_seconds() - p0;
    Ok(Trial {
        generator: "blast".into(),
        target_rate: opts.rate,
        window: if opts.rate > 0.0 { 0 } else { opts.window },
        offered_qps: r.offered_qps,
        answered_qps: r.answered_qps,
        answered: r.answered,
        loss_pct: r.loss_pct,
        cpu_s: cpu,
        proc_cpu_s: pcpu,
        wall_s: wall,
        per_cpu_s: r.answered as f64 / cpu.max(1e-9),
        cpu_share: cpu / wall.max(1e-9),
        lat_avg_us: r.lat_avg_us,
        lat_p99_us: Some(r.lat_p99_us),
        server_drops: r.server_drops,
        client_drops: r.client_drops,
        nxdomain_pct: r.nxdomain as f64 * 100.0 / (r.answered.max(1)) as f64,
    })
}

pub(crate) fn dnsperf_trial(
    ctx: &Ctx,
    server: Option<(&Server, &Cgroup)>,
    opts: &DnsperfOpts,
    queries: &Path,
) -> Result<(Trial, DnsperfResult), String> {
    if interrupted() {
        return Err("interrupted".into());
    }
    let c0 = server.map(|(s, cg)| (s.cpu_seconds(Some(cg)), s.proc_cpu_seconds()));
    let t0 = Instant::now();
    let r = dnsperf::run(opts, queries)?;
    let wall = t0.elapsed().as_secs_f64();
    let (cpu, pcpu) = match (server, c0) {
        (Some((s, cg)), Some((c, p))) => (s.cpu_seconds(Some(cg)) - c, s.proc_cpu_seconds() - p),
        _ => (0.0, 0.0),
    };
    let _ = ctx;
    Ok((
        Trial {
            generator: "dnsperf".into(),
            target_rate: opts.rate,
            window: opts.outstanding,
            offered_qps: r.sent as f64 / r.run_s.max(1e-9),
            answered_qps: r.qps,
            answered: r.completed,
            loss_pct: r.loss_pct(),
            cpu_s: cpu,
            proc_cpu_s: pcpu,
            wall_s: wall,
            per_cpu_s: if cpu > 0.0 {
                r.completed as f64 / cpu
            } else {
                0.0
            },
            cpu_share: cpu / wall.max(1e-9),
            lat_avg_us: r.lat_avg_us,
            lat_p99_us: None,
            server_drops: 0,
            client_drops: 0,
            nxdomain_pct: 0.0,
        },
        r,
    ))
}

/// `ctx.timing.repeats` blast trials of `opts`, a pause after each.
pub(crate) fn repeated_udp(
    ctx: &Ctx,
    server: &Server,
    cg: &Cgroup,
    set: &QuerySet,
    opts: &BlastOpts,
) -> Result<Phase, String> {
    let mut trials = Vec::new();
    for _ in 0..ctx.timing.repeats {
        trials.push(udp_trial(ctx, server, cg, set, opts)?);
        settle();
    }
    Ok(Phase::from_trials(trials))
}

pub(crate) fn settle() {
    std::thread::sleep(Duration::from_millis(100));
}

pub(crate) fn dnsperf_phase(
    ctx: &Ctx,
    server: Option<(&Server, &Cgroup)>,
    opts: &DnsperfOpts,
    queries: &Path,
    repeats: usize,
) -> Result<Phase, String> {
    let mut trials = Vec::new();
    for _ in 0..repeats {
        trials.push(dnsperf_trial(ctx, server, opts, queries)?.0);
        settle();
    }
    let mut p = Phase::from_trials(trials);
    p.rate = opts.rate;
    Ok(p)
}

/// Probes of a rate search: (offered q/s, loss %).
pub(crate) type Probes = Vec<(f64, f64)>;

/// Bisects open-loop offered rates in `range` for the highest one the
/// server answers with at most MAX_LOSS_PCT loss; returns it (if any) and
/// every probe as (offered q/s, loss %).
pub(crate) fn loss_free_rate(
    ctx: &Ctx,
    server: &Server,
    cg: &Cgroup,
    set: &QuerySet,
    range: (f64, f64),
    steps: usize,
) -> Result<(Option<f64>, Probes), String> {
    let probe = |rate: f64| blast_opts(server.addr, rate, 0, ctx.timing.step_s);
    loss_free_rate_with(ctx, server, cg, set, range, steps, &probe)
}

/// [`loss_free_rate`] with each probe at `rate` run as `probe(rate)`.
pub(crate) fn loss_free_rate_with(
    ctx: &Ctx,
    server: &Server,
    cg: &Cgroup,
    set: &QuerySet,
    range: (f64, f64),
    steps: usize,
    probe: &dyn Fn(f64) -> BlastOpts,
) -> Result<(Option<f64>, Probes), String> {
    let mut probes = Vec::new();
    let mut err = None;
    let (best, _) = search_rate(range.0, range.1, steps, |rate| {
        match udp_trial(ctx, server, cg, set, &probe(rate)) {
            Ok(t) => {
                probes.push((t.offered_qps, t.loss_pct));
                settle();
                t.loss_pct <= MAX_LOSS_PCT && t.offered_qps >= 0.97 * rate
            }
            Err(e) => {
                err = Some(e);
                false
            }
        }
    });
    match err {
        Some(e) => Err(e),
        None => Ok((best, probes)),
    }
}
