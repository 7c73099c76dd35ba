//! The targets of the issues, evaluated from the results.

use super::figures::{PEERS, best_peer, capped, k, run, thousands};
use crate::results::{Paired, ReloadUnderLoad, Results, RunResult, ZoneChange};

/// One target of the issue, evaluated.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub what: String,
    pub ratio: Option<f64>,
    pub need: f64,
    pub bound: Bound,
    pub detail: String,
}

/// How `Target::need` bounds the ratio.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bound {
    AtLeast,
    AtMost,
    /// |1 - ratio| ≤ need.
    Within,
    /// At least `need` of a physical limit (the reflector): a ratio above
    /// 1 cannot be right, since the server does more work than the limit.
    /// It means the limit's trials ran on a slower machine than the
    /// server's, and the comparison is inconclusive.
    ShareOfLimit,
}

impl Target {
    pub fn pass(&self) -> Option<bool> {
        self.ratio
            .map(|x| match self.bound {
                Bound::AtLeast => x >= self.need,
                Bound::AtMost => x <= self.need,
                Bound::Within => (1.0 - x).abs() <= self.need,
                Bound::ShareOfLimit => x >= self.need,
            })
            .filter(|_| !self.inconclusive())
    }

    /// Measured, but by trials that cannot both be right.
    pub fn inconclusive(&self) -> bool {
        self.bound == Bound::ShareOfLimit && self.ratio.is_some_and(|x| x > 1.0)
    }
}

pub fn targets(r: &Results) -> Vec<Target> {
    let mut out = Vec::new();
    let heron = |w: &str| capped(r, "Heron", w).map(|c| c.per_cpu_s.median);
    for w in ["root", "mix40"] {
        if heron(w).is_none() {
            continue;
        }
        let h = heron(w).unwrap();
        let refl = capped(r, "reflector", w).map(|c| c.per_cpu_s.median);
        let separate = format!("Heron {} vs reflector {}", k(h), refl.map_or("–".into(), k));
        out.push(paired_or(
            r,
            Target {
                what: format!("{w}: Heron ≥ 0.9× reflector"),
                ratio: refl.map(|x| h / x),
                need: 0.9,
                bound: Bound::ShareOfLimit,
                detail: separate,
            },
            ("Heron", w),
            ("reflector", w),
        ));
        let best = best_peer(r, w, &["NSD", "Knot"]);
        out.push(paired_against_best(
            r,
            Target {
                what: format!("{w}: Heron ≥ 1.25× best of NSD, Knot"),
                ratio: best.map(|b| h / b.1),
                need: 1.25,
                bound: Bound::AtLeast,
                detail: best.map_or("no peer result".into(), |b| {
                    format!("Heron {} vs {} {}", k(h), b.0, k(b.1))
                }),
            },
            w,
            &["NSD", "Knot"],
        ));
    }
    if let Some(small) = heron("small") {
        let sizes = r.meta.sizes.clone().unwrap_or_default();
        let zones = |n: usize| format!("{} zones", thousands(n));
        for (w, label) in [
            ("big", "large zone".into()),
            ("zones10k", zones(sizes.some_zones)),
            ("many", zones(sizes.many_zones)),
        ] {
            if let Some(h) = heron(w) {
                let target = Target {
                    what: format!("{w}: Heron {label} within 5% of the small zone"),
                    ratio: Some(h / small),
                    need: 0.05,
                    bound: Bound::Within,
                    detail: format!("{} vs small zone {}", k(h), k(small)),
                };
                out.push(paired_or(r, target, ("Heron", w), ("Heron", "small")));
            }
        }
    }
    if let (Some(root), Some(h)) = (heron("root"), heron("signed")) {
        let target = Target {
            what: "signed: Heron on the signed root-like zone (DO on half the queries) ≥ 0.9× \
                   the same zone unsigned"
                .into(),
            ratio: Some(h / root),
            need: 0.9,
            bound: Bound::AtLeast,
            detail: format!("{} vs unsigned {}", k(h), k(root)),
        };
        out.push(paired_or(r, target, ("Heron", "signed"), ("Heron", "root")));
    }
    if let (Some(small), Some(h)) = (heron("small"), heron("negative")) {
        out.push(negative_target(r, small, h));
    }
    for w in ["big", "many"] {
        out.extend(load_targets(r, w));
    }
    if let Some(c) = &r.zone_change {
        out.extend(change_targets(c));
    }
    if let Some(x) = &r.reload {
        out.extend(reload_targets(x));
    }
    out.extend(idle_targets(r));
    if let Some(h) = heron("tcp") {
        let best = best_peer(r, "tcp", &PEERS);
        out.push(Target {
            what: "tcp: Heron ≥ 1.5× best peer (1,000 clients)".into(),
            ratio: best.map(|b| h / b.1),
            need: 1.5,
            bound: Bound::AtLeast,
            detail: best.map_or("no peer result".into(), |b| {
                format!("Heron {} vs {} {}", k(h), b.0, k(b.1))
            }),
        });
    }
    out
}

/// Heron holding thousands of idle TCP connections: every one still
/// answered at the most the suite opens, and memory per connection flat
/// (the same at the most as at the fewest, within 25%).
pub fn idle_targets(r: &Results) -> Vec<Target> {
    let Some(heron) = r.idle_tcp.iter().find(|x| x.server == "Heron") else {
        return Vec::new();
    };
    let (Some(fewest), Some(most)) = (heron.points.first(), heron.points.last()) else {
        return Vec::new();
    };
    let peers: Vec<String> = r
        .idle_tcp
        .iter()
        .filter(|x| x.server != "Heron")
        .filter_map(|x| {
            let p = x.points.last()?;
            Some(format!(
                "{} {} held, {:.0} B each",
                x.server, p.held, p.bytes_per_connection
            ))
        })
        .collect();
    let all_answered = most.new_tcp_answered && most.udp_answered;
    vec![
        Target {
            what: format!(
                "tcp idle: Heron holds {} idle connections",
                most.connections
            ),
            ratio: Some(most.held as f64 / most.connections as f64),
            need: 1.0,
            bound: Bound::AtLeast,
            detail: format!(
                "{} of {} answered again; new TCP client and UDP {}; peers: {}",
                most.held,
                most.connections,
                if all_answered {
                    "answered"
                } else {
                    "NOT answered"
                },
                peers.join(", ")
            ),
        },
        Target {
            what: format!(
                "tcp idle: Heron memory per connection flat ({} vs {})",
                most.connections, fewest.connections
            ),
            ratio: (fewest.bytes_per_connection > 0.0)
                .then(|| most.bytes_per_connection / fewest.bytes_per_connection),
            need: 0.25,
            bound: Bound::Within,
            detail: format!(
                "{:.0} vs {:.0} bytes per connection",
                most.bytes_per_connection, fewest.bytes_per_connection
            ),
        },
    ]
}

/// Negative answers (NXDOMAIN, NODATA) cost no more than positive ones:
/// Heron's capacity on the small zone's negative answers against its
/// positive ones, within the noise of the suite (5%). The peers' own
/// ratios, from their separate runs, go in the detail.
fn negative_target(r: &Results, small: f64, negative: f64) -> Target {
    let peers: Vec<String> = PEERS
        .iter()
        .filter_map(|p| {
            let pos = capped(r, p, "small")?.per_cpu_s.median;
            let neg = capped(r, p, "negative")?.per_cpu_s.median;
            Some(format!("{p} {:.2}", neg / pos))
        })
        .collect();
    let target = Target {
        what: "negative: Heron NXDOMAIN/NODATA ≥ 0.95× positive answers (small zone)".into(),
        ratio: Some(negative / small),
        need: 0.95,
        bound: Bound::AtLeast,
        detail: format!(
            "{} vs small zone {}; the peers' own ratios (separate runs): {}",
            k(negative),
            k(small),
            if peers.is_empty() {
                "–".into()
            } else {
                peers.join(", ")
            }
        ),
    };
    paired_or(r, target, ("Heron", "negative"), ("Heron", "small"))
}

/// `target` measured by paired trials (`crate::phases::paired`) when the run has
/// them: their median ratio replaces the ratio of separate runs, which
/// stays in the figures.
fn paired_or(
    r: &Results,
    target: Target,
    subject: (&str, &str),
    reference: (&str, &str),
) -> Target {
    let Some(p) = r.paired.iter().find(|p| p.is(subject, reference)) else {
        return target;
    };
    Target {
        ratio: Some(p.ratio.median),
        detail: format!(
            "paired trials: median of {} pairs, {:.2}..{:.2}; separate runs: {}",
            p.ratio.n, p.ratio.min, p.ratio.max, target.detail
        ),
        ..target
    }
}

/// `target` (Heron against the best of `peers` on `w`) measured by paired
/// trials when the run has them: the best peer is the one Heron leads by
/// the least, each lead the median of its pairs.
fn paired_against_best(r: &Results, target: Target, w: &str, peers: &[&str]) -> Target {
    let leads: Vec<(&str, &Paired)> = peers
        .iter()
        .filter_map(|&peer| {
            let p = r.paired.iter().find(|p| p.is(("Heron", w), (peer, w)))?;
            Some((peer, p))
        })
        .collect();
    let Some(least) = leads
        .iter()
        .map(|(_, p)| p.ratio.median)
        .min_by(f64::total_cmp)
    else {
        return target;
    };
    let each: Vec<String> = leads
        .iter()
        .map(|(peer, p)| {
            format!(
                "{peer} {:.2} ({} pairs, {:.2}..{:.2})",
                p.ratio.median, p.ratio.n, p.ratio.min, p.ratio.max
            )
        })
        .collect();
    Target {
        ratio: Some(least),
        detail: format!(
            "paired trials: {}; separate runs: {}",
            each.join(", "),
            target.detail
        ),
        ..target
    }
}

/// Issue 4's load targets for workload `w`: Heron's startup time and
/// resident memory at most half the best peer's (NSD, Knot, BIND).
fn load_targets(r: &Results, w: &str) -> Vec<Target> {
    let Some(h) = run(r, "Heron", w) else {
        return Vec::new();
    };
    let peers: Vec<&RunResult> = PEERS.iter().filter_map(|p| run(r, p, w)).collect();
    type Figure = fn(&RunResult) -> f64;
    let figures: [(&str, Figure, &str); 2] = [
        ("startup", |x| x.startup_s, "s"),
        ("resident memory", |x| x.rss_kib as f64 / 1024.0, "MiB"),
    ];
    figures
        .into_iter()
        .map(|(what, figure, unit)| {
            let best = peers
                .iter()
                .map(|p| (p.server.as_str(), figure(p)))
                .min_by(|a, b| a.1.total_cmp(&b.1));
            Target {
                what: format!("{w}: Heron {what} ≤ 0.5× best peer"),
                ratio: best.map(|b| figure(h) / b.1),
                need: 0.5,
                bound: Bound::AtMost,
                detail: best.map_or("no peer result".into(), |b| {
                    let starts = match (what, h.startup) {
                        ("startup", Some(s)) if s.n > 1 => {
                            format!(
                                ", medians of {} starts (Heron {:.2}–{:.2})",
                                s.n, s.min, s.max
                            )
                        }
                        _ => String::new(),
                    };
                    format!(
                        "Heron {:.2} {unit} vs {} {:.2} {unit}{starts}",
                        figure(h),
                        b.0,
                        b.1
                    )
                }),
            }
        })
        .collect()
}

/// Issue 4's targets for a 10-record change to the 2,000,000-record zone:
/// under 10 ms and under 1 MB of memory the new version does not share.
fn change_targets(c: &ZoneChange) -> Vec<Target> {
    let mib = c.extra_bytes as f64 / (1024.0 * 1024.0);
    vec![
        Target {
            what: format!(
                "{}-record change to the large zone: time (ms)",
                c.changed_records
            ),
            ratio: Some(c.apply_ms.median),
            need: 10.0,
            bound: Bound::AtMost,
            detail: format!(
                "{:.2} ms ({:.2}–{:.2}) on {} records",
                c.apply_ms.median, c.apply_ms.min, c.apply_ms.max, c.zone_records
            ),
        },
        Target {
            what: format!(
                "{}-record change to the large zone: extra memory (MiB)",
                c.changed_records
            ),
            ratio: Some(mib),
            need: 1.0,
            bound: Bound::AtMost,
            detail: format!(
                "{} bytes copied of the zone's {:.1} MiB",
                c.extra_bytes,
                c.zone_bytes as f64 / (1024.0 * 1024.0)
            ),
        },
    ]
}

/// Issue 4's reload targets: under load, no query lost or answered wrongly
/// (nor with data older than some answer already given), and memory below
/// twice the steady state.
fn reload_targets(x: &ReloadUnderLoad) -> Vec<Target> {
    let bad = x.lost + x.wrong + x.stale;
    vec![
        Target {
            what: "reload of the large zone under load: queries lost or wrong".into(),
            ratio: Some(bad as f64),
            need: 0.0,
            bound: Bound::AtMost,
            detail: format!(
                "{} reloads, {} queries at {:.0} q/s: {} lost, {} wrong, {} older than an answer already given",
                x.reloads, x.sent, x.offered_qps, x.lost, x.wrong, x.stale
            ),
        },
        Target {
            what: "reload of the large zone: peak memory ≤ 2× steady".into(),
            ratio: Some(x.peak_rss_kib as f64 / x.steady_rss_kib.max(1) as f64),
            need: 2.0,
            bound: Bound::AtMost,
            detail: format!(
                "peak {:.1} MiB, steady {:.1} MiB",
                x.peak_rss_kib as f64 / 1024.0,
                x.steady_rss_kib as f64 / 1024.0
            ),
        },
    ]
}
