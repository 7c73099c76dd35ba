//! Uncapped: the highest open-loop rate answered with at most
//! MAX_LOSS_PCT loss, and the latency at a fixed moderate rate.

use super::Ctx;
use super::trial::{blast_opts, loss_free_rate, repeated_udp, settle, udp_trial};
use crate::blast::QuerySet;
use crate::results::{MAX_LOSS_PCT, Phase};
use crate::servers::Server;
use crate::sys::Cgroup;

/// Highest open-loop rate with ≤0.1% loss: a closed-loop probe gives the
/// scale, a bisection the rate, then repeated trials at it.
pub(crate) fn max_rate(
    ctx: &Ctx,
    server: &Server,
    cg: &Cgroup,
    set: &QuerySet,
    ceiling: Option<f64>,
) -> Result<Phase, String> {
    let probe = udp_trial(
        ctx,
        server,
        cg,
        set,
        &blast_opts(server.addr, 0.0, ctx.args.window, ctx.timing.probe_s),
    )?;
    settle();
    let sat = probe.answered_qps.max(1000.0);
    let (best, probes) = loss_free_rate(
        ctx,
        server,
        cg,
        set,
        (0.6 * sat, 1.1 * sat),
        ctx.timing.search_steps,
    )?;
    let rate = best.unwrap_or(0.3 * sat);
    let mut p = repeated_udp(
        ctx,
        server,
        cg,
        set,
        &blast_opts(server.addr, rate, 0, ctx.timing.trial_s),
    )?;
    p.rate = rate;
    p.probes = probes;
    p.saturated = p.cpu_share.median >= 0.9;
    let gen_limit = ceiling.is_some_and(|c| rate >= 0.9 * c)
        || p.trials.iter().any(|t| t.offered_qps < 0.97 * rate);
    p.generator_bound = gen_limit && !p.saturated;
    let mut notes = Vec::new();
    if best.is_none() {
        notes.push(format!("no probed rate had ≤{MAX_LOSS_PCT}% loss"));
    }
    if p.generator_bound {
        notes.push("at the generator's ceiling: the server had CPU to spare".into());
    }
    p.note = notes.join("; ");
    Ok(p)
}

/// Latency at the fixed rate of `--latency-rate`, uncapped.
pub(crate) fn latency(
    ctx: &Ctx,
    server: &Server,
    cg: &Cgroup,
    set: &QuerySet,
) -> Result<Phase, String> {
    let mut p = repeated_udp(
        ctx,
        server,
        cg,
        set,
        &blast_opts(server.addr, ctx.args.latency_rate, 0, ctx.timing.latency_s),
    )?;
    p.rate = ctx.args.latency_rate;
    Ok(p)
}
