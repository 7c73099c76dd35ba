//! Paired comparisons: two servers' capacity measured in alternating
//! trials, both running at once under the same CPU quota.
//!
//! On these noisy machines the speed of the host drifts by 20% or more
//! over the minutes between two servers' separate runs, which is larger
//! than the differences some targets ask about (Heron against the
//! reflector; Heron on the large zone against the small one). Taken in
//! pairs, one trial of each a few seconds apart, a drift moves both sides
//! alike, and the ratio of each pair is a measurement of its own: the
//! median of the ratios, with their spread, is what the report uses.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::blast::QuerySet;
use crate::servers::Kind;
use crate::stats::Spread;
use crate::suite::{Ctx, Phase, capacity_trial, settle};
use crate::workloads::Workload;

/// A server on a workload: one side of a comparison.
pub struct Side<'a> {
    pub kind: Kind,
    pub workload: &'a Workload,
    pub queries: &'a QuerySet,
    /// Another Heron build than the suite's (`--baseline`).
    pub heron: Option<&'a Path>,
}

impl Side<'_> {
    /// The server's name in reports: "Heron baseline" for another build.
    pub fn name(&self) -> String {
        match self.heron {
            Some(_) => format!("{} baseline", self.kind.name()),
            None => self.kind.name().to_string(),
        }
    }
}

/// The result of a paired comparison.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Paired {
    /// (server, workload) of the side measured...
    pub subject: (String, String),
    /// ...and of the side it is compared with.
    pub reference: (String, String),
    /// Subject / reference answered per CPU-second, one per pair.
    pub ratio: Spread,
    pub subject_phase: Phase,
    pub reference_phase: Phase,
    pub note: String,
}

impl Paired {
    pub fn is(&self, subject: (&str, &str), reference: (&str, &str)) -> bool {
        (self.subject.0.as_str(), self.subject.1.as_str()) == subject
            && (self.reference.0.as_str(), self.reference.1.as_str()) == reference
    }
}

/// Starts both servers, caps the group's CPU, and alternates capacity
/// trials between them, subject first in even pairs and reference first
/// in odd ones (so a steady drift favours neither).
pub fn compare(ctx: &Ctx, subject: Side, reference: Side) -> Result<Paired, String> {
    let sides = [subject, reference];
    let servers = [
        ctx.start_build(sides[0].kind, sides[0].workload, sides[0].heron)?,
        ctx.start_build(sides[1].kind, sides[1].workload, sides[1].heron)?,
    ];
    // Both servers sit in the one group; the idle one of a trial uses
    // next to nothing of it.
    let cg = &ctx.cg;
    cg.set_quota(Some(ctx.args.quota))
        .map_err(|e| format!("cgroup quota: {e}"))?;
    settle();
    let mut windows = [ctx.args.window; 2];
    let mut trials = [Vec::new(), Vec::new()];
    let mut notes = Vec::new();
    for pair in 0..ctx.timing.pairs {
        let order = if pair % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let (server, queries) = (&servers[i], sides[i].queries);
            let seconds = ctx.timing.pair_trial_s;
            let t = capacity_trial(
                ctx,
                server,
                cg,
                queries,
                seconds,
                &mut windows[i],
                &mut notes,
            )?;
            trials[i].push(t);
            // Short: a closed-loop trial ends with nothing outstanding.
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    cg.set_quota(None)
        .map_err(|e| format!("cgroup quota: {e}"))?;
    let ratios: Vec<f64> = trials[0]
        .iter()
        .zip(&trials[1])
        .map(|(s, r)| s.per_cpu_s / r.per_cpu_s)
        .collect();
    let [subject_trials, reference_trials] = trials;
    let name = |s: &Side| (s.name(), s.workload.id.clone());
    Ok(Paired {
        subject: name(&sides[0]),
        reference: name(&sides[1]),
        ratio: Spread::of(&ratios),
        subject_phase: Phase::from_trials(subject_trials),
        reference_phase: Phase::from_trials(reference_trials),
        note: notes.join("; "),
    })
}
