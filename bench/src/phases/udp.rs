//! Every UDP figure of one server on one workload.

use super::trial::{dnsperf_phase, settle};
use super::{Ctx, capacity, startup, sweep, uncapped};
use crate::blast::QuerySet;
use crate::results::{EnvCheck, RunResult, Sweep};
use crate::servers::Kind;
use crate::workloads::Workload;

pub(crate) fn run(
    ctx: &mut Ctx,
    kind: Kind,
    w: &Workload,
    set: &QuerySet,
    env: &EnvCheck,
    sweep_ref: Option<f64>,
    sweeps: &mut Vec<Sweep>,
) -> RunResult {
    startup::with_server(ctx, kind, w, false, |ctx, server, rr| {
        let quota = ctx.args.quota;
        let cg = &ctx.cg;
        cg.set_quota(Some(quota))
            .map_err(|e| format!("cgroup quota: {e}"))?;
        settle();
        let capped = capacity::run(ctx, server, cg, set)?;
        capacity::print(quota, &capped);
        rr.capped = Some(capped);
        if matches!(w.id.as_str(), "root" | "mix40") {
            let o = ctx.dnsperf_opts(server.addr, false, 0.0, ctx.timing.trial_s.max(0.5));
            let d = dnsperf_phase(ctx, Some((server, cg)), &o, &w.queries, 1)?;
            println!(
                "    capped, dnsperf: {:.0} answered/CPU-s, {:.0} q/s, loss {:.3}%",
                d.per_cpu_s.median, d.answered_qps.median, d.loss_pct.median
            );
            rr.dnsperf_capped = Some(d);
        }
        if let Some(reference) = sweep_ref {
            let pts = sweep::run(ctx, server, cg, set, &sweep::rates(reference))?;
            sweeps.push(Sweep {
                server: kind.name().into(),
                workload: w.id.clone(),
                capped: true,
                points: pts,
            });
        }
        cg.set_quota(None)
            .map_err(|e| format!("cgroup quota: {e}"))?;
        settle();
        let unc = uncapped::max_rate(ctx, server, cg, set, env.blast_open_max)?;
        println!(
            "    uncapped: {:.0} q/s with ≤0.1% loss (loss {:.3}%, CPU share {:.2}){}",
            unc.rate,
            unc.loss_pct.median,
            unc.cpu_share.median,
            if unc.generator_bound {
                " generator-bound"
            } else {
                ""
            }
        );
        rr.uncapped = Some(unc);
        let lat = uncapped::latency(ctx, server, cg, set)?;
        println!(
            "    latency at {:.0} q/s: avg {:.1} us, p99 {:.1} us",
            lat.rate, lat.lat_avg_us.median, lat.lat_p99_us.median
        );
        rr.latency = Some(lat);
        Ok(())
    })
}
