//! Capacity: answered queries per server CPU-second under the CPU quota.

use super::Ctx;
use super::trial::{blast_opts, settle, udp_trial};
use crate::blast::QuerySet;
use crate::results::{MAX_LOSS_PCT, Phase, Trial};
use crate::servers::Server;
use crate::sys::Cgroup;

/// Capacity under the quota: closed-loop trials; a trial with more than
/// 0.1% loss is run again with half the window (bounded).
pub(crate) fn run(
    ctx: &Ctx,
    server: &Server,
    cg: &Cgroup,
    set: &QuerySet,
) -> Result<Phase, String> {
    let mut trials = Vec::new();
    let mut window = ctx.args.window;
    let mut notes = Vec::new();
    for _ in 0..ctx.timing.repeats {
        trials.push(trial(
            ctx,
            server,
            cg,
            set,
            ctx.timing.trial_s,
            &mut window,
            &mut notes,
        )?);
        settle();
    }
    let mut p = Phase::from_trials(trials);
    p.saturated = p.cpu_share.median >= 0.85 * ctx.args.quota;
    p.generator_bound = !p.saturated;
    if !p.saturated {
        notes.push(format!(
            "server used {:.0}% of its {:.0}% quota: not saturated",
            p.cpu_share.median * 100.0,
            ctx.args.quota * 100.0
        ));
    }
    p.note = notes.join("; ");
    Ok(p)
}

/// One closed-loop capacity trial. One that loses more than 0.1% is run
/// again with half the window (at most three times), and the window stays
/// halved for the trials after it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn trial(
    ctx: &Ctx,
    server: &Server,
    cg: &Cgroup,
    set: &QuerySet,
    seconds: f64,
    window: &mut usize,
    notes: &mut Vec<String>,
) -> Result<Trial, String> {
    let opts = |window| blast_opts(server.addr, 0.0, window, seconds);
    let mut t = udp_trial(ctx, server, cg, set, &opts(*window))?;
    let mut retries = 0;
    while t.loss_pct > MAX_LOSS_PCT && *window > 25 && retries < 3 {
        notes.push(format!(
            "loss {:.3}% at window {window}; halved",
            t.loss_pct
        ));
        *window /= 2;
        retries += 1;
        settle();
        t = udp_trial(ctx, server, cg, set, &opts(*window))?;
    }
    Ok(t)
}

/// The one-line summary of a capacity phase.
pub(crate) fn print(quota: f64, capped: &Phase) {
    println!(
        "    capped {:.0}%: {:.0} answered/CPU-s ({:.0}..{:.0}), {:.0} q/s, loss {:.3}%, CPU share {:.2}",
        quota * 100.0,
        capped.per_cpu_s.median,
        capped.per_cpu_s.min,
        capped.per_cpu_s.max,
        capped.answered_qps.median,
        capped.loss_pct.median,
        capped.cpu_share.median
    );
}
