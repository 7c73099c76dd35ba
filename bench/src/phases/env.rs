//! The environment check: the load generators' ceilings against the
//! uncapped reflector.

use super::Ctx;
use super::trial::{blast_opts, dnsperf_phase, loss_free_rate, repeated_udp};
use crate::blast::QuerySet;
use crate::results::EnvCheck;
use crate::servers::Kind;
use crate::workloads::Workload;

pub(crate) fn run(ctx: &mut Ctx, w: &Workload, set: &QuerySet) -> Result<EnvCheck, String> {
    let mut env = EnvCheck::default();
    let server = ctx.start(Kind::Reflector, w)?;
    let cg = &ctx.cg;
    env.blast_closed = repeated_udp(
        ctx,
        &server,
        cg,
        set,
        &blast_opts(server.addr, 0.0, ctx.args.window, ctx.timing.trial_s),
    )?;
    let sat = env.blast_closed.answered_qps.median;
    let (best, probes) = loss_free_rate(
        ctx,
        &server,
        cg,
        set,
        (0.6 * sat, 1.3 * sat),
        ctx.timing.search_steps + 1,
    )?;
    env.blast_open_max = best;
    env.blast_probes = probes;
    let o = ctx.dnsperf_opts(server.addr, false, 0.0, ctx.timing.trial_s.max(0.5));
    env.dnsperf_max = dnsperf_phase(ctx, Some((&server, cg)), &o, &w.queries, ctx.timing.repeats)?;
    let common = env.dnsperf_max.answered_qps.median.min(best.unwrap_or(sat));
    env.cross_rate = ((common * 0.5) / 1000.0).round().max(1.0) * 1000.0;
    env.cross_blast = repeated_udp(
        ctx,
        &server,
        cg,
        set,
        &blast_opts(server.addr, env.cross_rate, 0, ctx.timing.trial_s),
    )?;
    let o = ctx.dnsperf_opts(
        server.addr,
        false,
        env.cross_rate,
        ctx.timing.trial_s.max(0.5),
    );
    env.cross_dnsperf =
        dnsperf_phase(ctx, Some((&server, cg)), &o, &w.queries, ctx.timing.repeats)?;
    let refl_share = env.blast_closed.cpu_share.median;
    let blast_ceiling = env.blast_closed.answered_qps.median;
    let dp = env.dnsperf_max.answered_qps.median;
    let mut v = vec![format!(
        "blast reached {:.0} q/s closed-loop (open-loop ≤0.1% loss: {}) with the reflector at {:.0}% of a core; dnsperf reached {:.0} q/s ({:.2}× blast).",
        blast_ceiling,
        best.map_or("none".into(), |b| format!("{b:.0} q/s")),
        refl_share * 100.0,
        dp,
        dp / blast_ceiling.max(1.0)
    )];
    if refl_share < 0.9 {
        v.push(
            "The uncapped reflector was not saturated: the generator is the ceiling of uncapped figures, which are reported as generator-bound when they reach it; capacity is therefore measured with the server's CPU capped."
                .into(),
        );
    }
    if dp < 0.9 * blast_ceiling {
        v.push("dnsperf is slower than blast here, so blast drives the UDP figures.".into());
    }
    env.verdict = v.join(" ");
    println!("  {}", env.verdict);
    Ok(env)
}
