//! Every TCP figure of one server on the TCP workload (dnsperf).

use super::trial::{dnsperf_phase, settle};
use super::{Ctx, capacity, startup};
use crate::results::RunResult;
use crate::servers::Kind;
use crate::workloads::Workload;

pub(crate) fn run(ctx: &mut Ctx, kind: Kind, w: &Workload) -> RunResult {
    startup::with_server(ctx, kind, w, true, |ctx, server, rr| {
        let quota = ctx.args.quota;
        let cg = &ctx.cg;
        cg.set_quota(Some(quota))
            .map_err(|e| format!("cgroup quota: {e}"))?;
        settle();
        let o = ctx.dnsperf_opts(server.addr, true, 0.0, ctx.timing.tcp_s);
        let mut capped =
            dnsperf_phase(ctx, Some((server, cg)), &o, &w.queries, ctx.timing.repeats)?;
        capped.saturated = capped.cpu_share.median >= 0.85 * quota;
        capped.generator_bound = !capped.saturated;
        if !capped.saturated {
            capped.note = format!(
                "server used {:.0}% of its {:.0}% quota: not saturated",
                capped.cpu_share.median * 100.0,
                quota * 100.0
            );
        }
        capacity::print(quota, &capped);
        rr.capped = Some(capped);
        cg.set_quota(None)
            .map_err(|e| format!("cgroup quota: {e}"))?;
        settle();
        let mut unc = dnsperf_phase(ctx, Some((server, cg)), &o, &w.queries, ctx.timing.repeats)?;
        unc.rate = unc.answered_qps.median;
        unc.saturated = unc.cpu_share.median >= 0.9;
        unc.generator_bound = !unc.saturated;
        if unc.generator_bound {
            unc.note = "dnsperf's ceiling: the server had CPU to spare".into();
        }
        println!(
            "    uncapped: {:.0} q/s (loss {:.3}%, CPU share {:.2})",
            unc.answered_qps.median, unc.loss_pct.median, unc.cpu_share.median
        );
        rr.uncapped = Some(unc);
        let lo = ctx.dnsperf_opts(server.addr, true, ctx.args.latency_rate, ctx.timing.tcp_s);
        let lat = dnsperf_phase(ctx, Some((server, cg)), &lo, &w.queries, ctx.timing.repeats)?;
        println!(
            "    latency at {:.0} q/s: avg {:.1} us",
            lat.rate, lat.lat_avg_us.median
        );
        rr.latency = Some(lat);
        Ok(())
    })
}
