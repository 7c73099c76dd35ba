//! The answered-% chart's points: answered % against offered rate.

use super::Ctx;
use super::trial::{blast_opts, settle, udp_trial};
use crate::blast::QuerySet;
use crate::servers::Server;
use crate::sys::Cgroup;

pub(crate) fn run(
    ctx: &Ctx,
    server: &Server,
    cg: &Cgroup,
    set: &QuerySet,
    rates: &[f64],
) -> Result<Vec<(f64, f64, f64)>, String> {
    let mut pts = Vec::new();
    for &rate in rates {
        let t = udp_trial(
            ctx,
            server,
            cg,
            set,
            &blast_opts(server.addr, rate, 0, ctx.timing.sweep_s),
        )?;
        let answered_pct = if t.offered_qps > 0.0 {
            100.0 - t.loss_pct
        } else {
            0.0
        };
        pts.push((rate, t.offered_qps, answered_pct));
        settle();
    }
    Ok(pts)
}

/// Rates of the answered-% chart: fractions of the capped reflector's
/// capacity (so every server's knee shows), or fixed steps.
pub(crate) fn rates(reference: f64) -> Vec<f64> {
    [0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.5]
        .iter()
        .map(|f| (f * reference / 1000.0).round() * 1000.0)
        .collect()
}
