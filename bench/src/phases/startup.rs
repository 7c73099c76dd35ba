//! A server's life in the suite: started, measured, stopped, with its
//! startup time (median of several starts), memory and CPU recorded.

use super::Ctx;
use crate::results::RunResult;
use crate::servers::{Kind, Server};
use crate::stats::Spread;
use crate::workloads::Workload;

/// Starts `kind` on `w`, runs `phases` with it under the server's cgroup,
/// and records startup, memory and CPU; an error from a phase is recorded
/// in the result, not raised.
pub(crate) fn with_server(
    ctx: &mut Ctx,
    kind: Kind,
    w: &Workload,
    tcp: bool,
    phases: impl FnOnce(&Ctx, &Server, &mut RunResult) -> Result<(), String>,
) -> RunResult {
    let mut rr = RunResult {
        server: kind.name().into(),
        workload: w.id.clone(),
        tcp,
        ..RunResult::default()
    };
    let cpu0 = ctx.cg.usage_seconds().unwrap_or(0.0);
    let server = match ctx.start(kind, w) {
        Ok(s) => s,
        Err(e) => {
            rr.error = Some(e);
            return rr;
        }
    };
    rr.startup_s = server.startup_s;
    ctx.say(&format!(
        "  {} ready in {:.1}s",
        kind.name(),
        server.startup_s
    ));
    if let Err(e) = phases(ctx, &server, &mut rr) {
        rr.error = Some(e);
    }
    let (rss, pss, hwm) = server.memory_kib();
    rr.rss_kib = rss;
    rr.pss_kib = pss;
    rr.hwm_kib = hwm;
    rr.total_cpu_s = server.cpu_seconds(Some(&ctx.cg)) - cpu0;
    drop(server);
    if kind.is_dns() {
        record_startups(ctx, kind, w, &mut rr);
    }
    rr
}

/// Starts `kind` on `w` again until `rr` holds `repeats` startup times
/// (the first start's included) and keeps their median: one start is one
/// sample of a figure that the machine's noise moves by tens of percent.
fn record_startups(ctx: &mut Ctx, kind: Kind, w: &Workload, rr: &mut RunResult) {
    let mut starts = vec![rr.startup_s];
    while starts.len() < ctx.timing.repeats {
        match ctx.start(kind, w) {
            Ok(server) => starts.push(server.startup_s),
            Err(e) => {
                ctx.say(&format!("  {} did not start again: {e}", kind.name()));
                break;
            }
        }
    }
    let spread = Spread::of(&starts);
    rr.startup_s = spread.median;
    rr.startup = Some(spread);
    ctx.say(&format!(
        "  {} startup over {} starts: {:.2}s ({:.2}..{:.2})",
        kind.name(),
        spread.n,
        spread.median,
        spread.min,
        spread.max
    ));
}
