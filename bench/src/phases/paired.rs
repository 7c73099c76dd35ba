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

use super::trial::settle;
use super::{Ctx, capacity};
use crate::blast::QuerySet;
use crate::interrupt::interrupted;
use crate::results::{Paired, Phase};
use crate::servers::Kind;
use crate::stats::Spread;
use crate::workloads::Workload;

/// A server on a workload: one side of a comparison.
pub struct Side<'a> {
    pub kind: Kind,
    pub workload: &'a Workload,
    pub queries: &'a QuerySet,
    /// Another Heron build than the suite's (`--baseline`).
    pub heron: Option<&'a Path>,
    /// Configuration added to Heron's (`--with-config`): its file name and
    /// text.
    pub config: Option<(&'a str, &'a str)>,
}

impl Side<'_> {
    /// The server's name in reports: "Heron baseline" for another build,
    /// "Heron with rrl.toml" with added configuration.
    pub fn name(&self) -> String {
        match (self.heron, self.config) {
            (Some(_), _) => format!("{} baseline", self.kind.name()),
            (None, Some((file, _))) => format!("{} with {file}", self.kind.name()),
            (None, None) => self.kind.name().to_string(),
        }
    }

    /// Starts this side's server.
    fn start(&self, ctx: &Ctx) -> Result<crate::servers::Server, String> {
        let mut launch = ctx.launch.clone();
        if let Some((_, text)) = self.config {
            launch.heron_server = format!("{}\n{text}\n", launch.heron_server);
        }
        ctx.start_with(self.kind, self.workload, self.heron, &launch)
    }
}

/// Starts both servers, caps the group's CPU, and alternates capacity
/// trials between them, subject first in even pairs and reference first
/// in odd ones (so a steady drift favours neither).
fn compare(ctx: &Ctx, subject: Side, reference: Side) -> Result<Paired, String> {
    let sides = [subject, reference];
    let servers = [sides[0].start(ctx)?, sides[1].start(ctx)?];
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
            let t = capacity::trial(
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

/// The comparisons whose targets ask for a precision that separate runs
/// on a drifting machine cannot give, each measured in alternating trials
/// ([`paired`]): Heron against the reflector, NSD and Knot (root, mix40),
/// and Heron on the large zone and on many zones against Heron on the
/// small one.
pub(crate) fn run(ctx: &mut Ctx, wl: &[Workload], kinds: &[Kind]) -> Vec<Paired> {
    let mut done = Vec::new();
    let baseline = ctx.args.baseline.clone();
    let added = match added_config(ctx.args.with_config.as_deref()) {
        Ok(added) => added,
        Err(e) => {
            ctx.say(&format!("  --with-config: {e}"));
            return done;
        }
    };
    let config = added.as_ref().map(|(f, t)| (f.as_str(), t.as_str()));
    let pairs = match (&baseline, config) {
        (Some(_), _) | (_, Some(_)) => wl
            .iter()
            .map(|w| ((Kind::Heron, w), (Kind::Heron, w)))
            .collect(),
        (None, None) => paired_targets(wl, kinds),
    };
    for ((sk, sw), (rk, rw)) in pairs {
        let compared = QuerySet::load(&sw.queries).and_then(|sq| {
            let rq = QuerySet::load(&rw.queries)?;
            let subject = Side {
                kind: sk,
                workload: sw,
                queries: &sq,
                heron: None,
                config,
            };
            let reference = Side {
                kind: rk,
                workload: rw,
                queries: &rq,
                heron: baseline.as_deref(),
                config: None,
            };
            let label = format!(
                "{} {} / {} {}",
                subject.name(),
                sw.id,
                reference.name(),
                rw.id
            );
            ctx.say(&format!("paired trials: {label}"));
            compare(ctx, subject, reference).map(|p| (label, p))
        });
        match compared {
            Ok((label, p)) => {
                let each = p.subject_phase.trials.iter().zip(&p.reference_phase.trials);
                let each: Vec<String> = each
                    .map(|(s, r)| format!("{:.0}k/{:.0}k", s.per_cpu_s / 1e3, r.per_cpu_s / 1e3))
                    .collect();
                ctx.say(&format!(
                    "  {label}: {:.3} (median of {} pairs, {:.3}..{:.3}); per CPU-second: {}",
                    p.ratio.median,
                    p.ratio.n,
                    p.ratio.min,
                    p.ratio.max,
                    each.join(" ")
                ));
                done.push(p);
            }
            Err(e) => ctx.say(&format!("  {} {}: ERROR {e}", sk.name(), sw.id)),
        }
        if interrupted() {
            break;
        }
    }
    done
}

/// The file name and text of `--with-config`, if given.
fn added_config(path: Option<&Path>) -> Result<Option<(String, String)>, String> {
    let Some(path) = path else { return Ok(None) };
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    Ok(Some((name, text)))
}

/// The comparisons the targets ask for: Heron against the reflector,
/// NSD and Knot on the root-like and 40% mixes; Heron on the large zone,
/// on 10,000 and on 100,000 zones against Heron on the small zone; Heron
/// on the signed root-like zone against the same zone unsigned.
fn paired_targets<'w>(wl: &'w [Workload], kinds: &[Kind]) -> Vec<PairOf<'w>> {
    let find = |id: &str| wl.iter().find(|w| w.id == id);
    let has = |k: Kind| kinds.contains(&k);
    let mut pairs = Vec::new();
    for id in ["root", "mix40"] {
        for reference in [Kind::Reflector, Kind::Nsd, Kind::Knot] {
            if let Some(w) = find(id).filter(|_| has(Kind::Heron) && has(reference)) {
                pairs.push(((Kind::Heron, w), (reference, w)));
            }
        }
    }
    for id in ["negative", "big", "zones10k", "many"] {
        if let (Some(w), Some(small)) = (find(id), find("small"))
            && has(Kind::Heron)
        {
            pairs.push(((Kind::Heron, w), (Kind::Heron, small)));
        }
    }
    if let (Some(signed), Some(root)) = (find("signed"), find("root"))
        && has(Kind::Heron)
    {
        pairs.push(((Kind::Heron, signed), (Kind::Heron, root)));
    }
    pairs
}

/// (subject, reference) of a paired comparison: a server on a workload each.
type PairOf<'w> = ((Kind, &'w Workload), (Kind, &'w Workload));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_configuration_is_read_and_names_its_side() {
        let dir = std::env::temp_dir().join(format!("heron-bench-paired-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("rrl.toml");
        std::fs::write(&file, "[rrl]\nresponses-per-second = 1000\n").unwrap();
        let (name, text) = added_config(Some(&file)).unwrap().unwrap();
        assert_eq!(
            (name.as_str(), text.as_str()),
            ("rrl.toml", "[rrl]\nresponses-per-second = 1000\n")
        );
        assert_eq!(added_config(None), Ok(None));
        assert!(
            added_config(Some(&dir.join("missing.toml")))
                .unwrap_err()
                .contains("missing.toml")
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
