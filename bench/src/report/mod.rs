//! README.md and the SVG charts, from the results alone (so `heron-bench
//! report` regenerates them from results.json). The page is
//! `template.md`'s prose with one function per section filling it in.

mod charts;
mod cost_matrix;
mod figures;
mod overload;
mod targets;
mod template;

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use figures::{
    PEERS, SERVERS, best_peer, capped, error_cell, k, run, spread, startup_cell, workloads,
};
use targets::{Bound, Target, targets};
use template::{fill, inline, lines};

use crate::results::{MAX_LOSS_PCT, Phase, Results};

pub fn regenerate(results: &Path, out: &Path) -> Result<(), String> {
    let text = fs::read_to_string(results).map_err(|e| format!("{}: {e}", results.display()))?;
    let r: Results =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", results.display()))?;
    write_all(&r, out)
}

pub fn write_all(r: &Results, out: &Path) -> Result<(), String> {
    fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    if r.runs.is_empty() && (r.cost_matrix.is_some() || r.overload.is_some()) {
        let name = match r.cost_matrix {
            Some(_) => "cost-matrix.md",
            None => "overload.md",
        };
        let page = out.join(name);
        return fs::write(&page, phase_page(r)).map_err(|e| format!("{}: {e}", page.display()));
    }
    charts::chart_capacity(r, &out.join("capacity.svg"))?;
    charts::chart_answered(r, &out.join("answered.svg"))?;
    let readme = out.join("README.md");
    fs::write(&readme, readme_text(r)).map_err(|e| format!("{}: {e}", readme.display()))
}

fn readme_text(r: &Results) -> String {
    let m = &r.meta;
    let versions = m
        .versions
        .iter()
        .map(|(name, v)| format!("| {name} | {v} |"));
    fill(
        "page",
        &[
            ("mode", m.mode.clone()),
            ("started", m.started.clone()),
            ("duration_s", format!("{:.0}", m.duration_s)),
            ("heron_build", m.heron_build.clone()),
            ("quick_note", quick_note(r)),
            ("command", m.command.clone()),
            ("cpus", m.cpus.to_string()),
            ("cpu_model", m.cpu_model.clone()),
            ("mem_gib", format!("{:.1}", m.mem_gib)),
            ("kernel", m.kernel.clone()),
            ("loadavg_start", m.loadavg_start.clone()),
            ("loadavg_end", m.loadavg_end.clone()),
            ("versions", lines(versions)),
            ("dnsperf_version", m.dnsperf_version.clone()),
            ("method", method(r)),
            ("environment", environment(r)),
            ("targets", targets_section(r)),
            ("capacity", capacity(r)),
            ("uncapped", uncapped(r)),
            ("latency", latency(r)),
            ("startup", startup(r)),
            ("memory_per_item", memory_per_item(r)),
            ("idle_tcp", idle_tcp(r)),
            ("zone_change", zone_change(r)),
            ("reload", reload(r)),
            ("cost_matrix", cost_matrix::section(r)),
            ("overload", overload::section(r)),
            ("errors", errors(r)),
            ("notes", notes(r)),
        ],
    )
}

/// The page of a `--matrix-only` or `--overload-only` run.
fn phase_page(r: &Results) -> String {
    let m = &r.meta;
    let versions = m.versions.iter().map(|(name, v)| format!("* {name}: {v}"));
    let (title, flag) = match r.cost_matrix {
        Some(_) => ("Cost matrix", "--matrix-only"),
        None => ("Overload", "--overload-only"),
    };
    fill(
        "phase_page",
        &[
            ("title", title.into()),
            ("flag", flag.into()),
            ("mode", m.mode.clone()),
            ("started", m.started.clone()),
            ("duration_s", format!("{:.0}", m.duration_s)),
            ("heron_build", m.heron_build.clone()),
            ("command", m.command.clone()),
            ("cpus", m.cpus.to_string()),
            ("cpu_model", m.cpu_model.clone()),
            ("kernel", m.kernel.clone()),
            ("loadavg_start", m.loadavg_start.clone()),
            ("loadavg_end", m.loadavg_end.clone()),
            ("versions", lines(versions)),
            ("matrix", cost_matrix::section(r)),
            ("overload", overload::section(r)),
        ],
    )
}

fn quick_note(r: &Results) -> String {
    match r.meta.mode.as_str() {
        "quick" => fill("quick_note", &[]),
        _ => String::new(),
    }
}

fn method(r: &Results) -> String {
    let m = &r.meta;
    let t = m.timing.clone().unwrap_or_default();
    let sizes = m.sizes.as_ref().map_or(String::new(), |sz| {
        fill(
            "workload_sizes",
            &[
                ("queries", sz.queries.to_string()),
                ("big_queries", sz.big_queries.to_string()),
            ],
        )
    });
    let list = workloads(r)
        .into_iter()
        .map(|(id, title)| format!("* `{id}`: {title}"));
    fill(
        "method",
        &[
            ("workers", m.workers.to_string()),
            ("server_cpus", m.server_cpus.clone()),
            ("generator_cpu", m.generator_cpu.to_string()),
            ("sched", m.sched.clone()),
            ("quota_pct", format!("{:.0}", m.quota * 100.0)),
            ("cgroup", m.cgroup.clone()),
            ("period_us", m.period_us.to_string()),
            ("window", m.window.to_string()),
            ("trial_s", t.trial_s.to_string()),
            ("max_loss_pct", MAX_LOSS_PCT.to_string()),
            ("probes", (t.search_steps + 2).to_string()),
            ("step_s", t.step_s.to_string()),
            ("repeats", t.repeats.to_string()),
            ("latency_rate", format!("{:.0}", m.latency_rate)),
            ("tcp_clients", m.tcp_clients.to_string()),
            ("tcp_s", t.tcp_s.to_string()),
            ("workload_sizes", sizes),
            ("workload_list", lines(list)),
        ],
    )
}

/// The generators' ceilings against the uncapped reflector.
fn environment(r: &Results) -> String {
    let (m, e) = (&r.meta, &r.env);
    let row = |g: &str, mode: String, p: &Phase| {
        format!(
            "| {g} | {mode} | {} | {:.3} | {:.2} |",
            spread(&p.answered_qps),
            p.loss_pct.median,
            p.cpu_share.median
        )
    };
    let cross = format!("cross-check at {} q/s", k(e.cross_rate));
    let rows = [
        row(
            "blast",
            format!("closed loop, {} outstanding", m.window),
            &e.blast_closed,
        ),
        format!(
            "| blast | open loop, highest rate with ≤{MAX_LOSS_PCT}% loss | {} | | |",
            e.blast_open_max.map_or("none".into(), k)
        ),
        row(
            "dnsperf",
            format!("as fast as it goes, -c 4 -q {}", m.window),
            &e.dnsperf_max,
        ),
        row("blast", cross.clone(), &e.cross_blast),
        row("dnsperf", cross, &e.cross_dnsperf),
    ];
    fill(
        "environment",
        &[
            ("rows", lines(rows)),
            ("blast_per_cpu", k(e.cross_blast.per_cpu_s.median)),
            ("dnsperf_per_cpu", k(e.cross_dnsperf.per_cpu_s.median)),
            ("verdict", lines([&e.verdict])),
        ],
    )
}

/// The targets table, what limits the ones missed, and the paired
/// comparisons the targets use.
fn targets_section(r: &Results) -> String {
    let ts = targets(r);
    let rows = ts.iter().map(|t| {
        let need = match t.bound {
            Bound::AtLeast | Bound::ShareOfLimit => format!("≥ {:.2}", t.need),
            Bound::AtMost => format!("≤ {:.2}", t.need),
            Bound::Within => format!("within {:.0}%", t.need * 100.0),
        };
        let result = match t.pass() {
            Some(true) => "PASS",
            Some(false) => "**FAIL**",
            None if t.inconclusive() => "**INCONCLUSIVE**",
            None => "not measured",
        };
        format!(
            "| {} | {} | {need} | {result} | {} |",
            t.what,
            t.ratio.map_or("–".into(), |x| format!("{x:.3}")),
            t.detail
        )
    });
    fill(
        "targets",
        &[
            ("rows", lines(rows)),
            ("limits", limits(r, &ts)),
            ("paired", paired(r)),
        ],
    )
}

/// Why the targets missed were missed, and the profiles; empty when
/// every target passed and there is no profile.
fn limits(r: &Results, ts: &[Target]) -> String {
    let doubtful = ts.iter().filter(|t| t.inconclusive()).map(|t| {
        let ratio = format!("{:.2}", t.ratio.unwrap_or(0.0));
        fill(
            "limit_inconclusive",
            &[("what", t.what.clone()), ("ratio", ratio)],
        )
    });
    let failed = ts.iter().filter(|t| t.pass() == Some(false)).map(|t| {
        let ratio = format!("{:.3}", t.ratio.unwrap_or(0.0));
        let why = why_missed(r, t);
        fill(
            "limit_failed",
            &[("what", t.what.clone()), ("ratio", ratio), ("why", why)],
        )
    });
    let failed: String = doubtful.chain(failed).collect();
    if failed.is_empty() && r.profiles.is_empty() {
        return String::new();
    }
    fill("limits", &[("failed", failed), ("profile", profile(r))])
}

/// What the results say about a target missed (with a leading space), or
/// nothing.
fn why_missed(r: &Results, t: &Target) -> String {
    let w = t.what.split(':').next().unwrap_or("");
    if t.what.contains("startup")
        && let Some(h) = run(r, "Heron", w)
    {
        let startup_s = format!("{:.2}", h.startup_s);
        inline("why_startup", &[("startup_s", startup_s)])
    } else if t.what.contains("reflector") && !r.profile_summary.is_empty() {
        inline("why_reflector", &[("workload", w.to_string())])
    } else if t.what.contains("within 5% of the small zone") {
        let ratio = |sv: &str| {
            let a = capped(r, sv, w)?.per_cpu_s.median;
            Some(a / capped(r, sv, "small")?.per_cpu_s.median)
        };
        let ratios: Vec<String> = SERVERS
            .iter()
            .filter_map(|sv| Some(format!("{sv} {:.2}", ratio(sv)?)))
            .collect();
        let best_peer = PEERS.iter().filter_map(|p| ratio(p)).fold(0.0, f64::max);
        let who = if ratio("Heron").is_some_and(|h| h >= best_peer) {
            "Heron keeps more of its small-zone rate than any peer"
        } else {
            "a peer keeps more of its small-zone rate than Heron"
        };
        inline(
            "why_zone_size",
            &[
                ("workload", w.to_string()),
                ("ratios", ratios.join(", ")),
                ("who", who.to_string()),
            ],
        )
    } else {
        String::new()
    }
}

/// The callgrind profiles and their summary.
fn profile(r: &Results) -> String {
    if r.profiles.is_empty() {
        return String::new();
    }
    let rows = r.profiles.iter().map(|p| {
        let top: Vec<String> = p
            .top
            .iter()
            .take(6)
            .map(|(f, pct)| format!("`{f}` {pct:.1}%"))
            .collect();
        format!(
            "| {} | {} | {} | {:.0} | {} |",
            p.server,
            p.workload,
            p.answered,
            p.instructions_per_query,
            top.join(", ")
        )
    });
    fill(
        "profile",
        &[
            ("rows", lines(rows)),
            ("summary", lines([&r.profile_summary])),
        ],
    )
}

/// The paired comparisons, which the targets use where present.
fn paired(r: &Results) -> String {
    if r.paired.is_empty() {
        return String::new();
    }
    let t = r.meta.timing.clone().unwrap_or_default();
    let trials = match t.pair_trial_s > 0.0 {
        true => format!(
            "{} pairs of closed-loop trials of {} s each",
            t.pairs, t.pair_trial_s
        ),
        false => "pairs of closed-loop trials".to_string(),
    };
    let rows = r.paired.iter().map(|p| {
        format!(
            "| {} {} | {} {} | {} | {:.3} | {:.3}..{:.3} | {} | {} |",
            p.subject.0,
            p.subject.1,
            p.reference.0,
            p.reference.1,
            p.ratio.n,
            p.ratio.median,
            p.ratio.min,
            p.ratio.max,
            spread(&p.subject_phase.per_cpu_s),
            spread(&p.reference_phase.per_cpu_s)
        )
    });
    fill("paired", &[("trials", trials), ("rows", lines(rows))])
}

/// One row per workload: its id, then a cell per server.
fn server_rows(r: &Results, cell: impl Fn(&str, &str) -> String) -> Vec<String> {
    workloads(r)
        .into_iter()
        .map(|(id, _)| {
            let mut line = format!("| {id} |");
            for sv in SERVERS {
                let _ = write!(line, " {} |", cell(sv, &id));
            }
            line
        })
        .collect()
}

/// Answered queries per CPU-second under the quota, the rates behind
/// them, and dnsperf's cross-check.
fn capacity(r: &Results) -> String {
    let per_cpu = server_rows(r, |sv, id| match capped(r, sv, id) {
        Some(p) => {
            let mut c = spread(&p.per_cpu_s);
            if p.loss_pct.median > MAX_LOSS_PCT {
                let _ = write!(c, " loss {:.2}%", p.loss_pct.median);
            }
            if p.cpu_share.median < 0.85 * r.meta.quota {
                c.push_str(" (not saturated)");
            }
            c
        }
        None => error_cell(r, sv, id),
    });
    let per_cpu = per_cpu
        .into_iter()
        .zip(workloads(r))
        .map(|(line, (id, _))| {
            let h = capped(r, "Heron", &id).map(|p| p.per_cpu_s.median);
            let refl = capped(r, "reflector", &id).map(|p| p.per_cpu_s.median);
            let best = best_peer(r, &id, &PEERS);
            format!(
                "{line} {} | {} |",
                h.zip(refl)
                    .map_or("–".into(), |(a, b)| format!("{:.2}", a / b)),
                h.zip(best)
                    .map_or("–".into(), |(a, b)| format!("{:.2} ({})", a / b.1, b.0))
            )
        });
    let rates = server_rows(r, |sv, id| {
        capped(r, sv, id).map_or("–".into(), |p| {
            format!(
                "{} q/s, {:.2} CPU, loss {:.3}%",
                k(p.answered_qps.median),
                p.cpu_share.median,
                p.loss_pct.median
            )
        })
    });
    fill(
        "capacity",
        &[
            ("quota_pct", format!("{:.0}", r.meta.quota * 100.0)),
            ("per_cpu_rows", lines(per_cpu)),
            ("rate_rows", lines(rates)),
            ("cross_check", cross_check(r)),
        ],
    )
}

/// The capacity figure with dnsperf as the generator, where measured.
fn cross_check(r: &Results) -> String {
    let rows: Vec<String> = r
        .runs
        .iter()
        .filter_map(|x| {
            let d = x.dnsperf_capped.as_ref()?;
            let b = x.capped.as_ref()?;
            Some(format!(
                "| {} | {} | {} | {} | {:.2} |",
                x.workload,
                x.server,
                k(b.per_cpu_s.median),
                k(d.per_cpu_s.median),
                d.per_cpu_s.median / b.per_cpu_s.median.max(1.0)
            ))
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    fill("cross_check", &[("rows", lines(rows))])
}

/// The highest rate answered with at most MAX_LOSS_PCT loss.
fn uncapped(r: &Results) -> String {
    let rows = server_rows(r, |sv, id| {
        let Some(p) = run(r, sv, id).and_then(|x| x.uncapped.as_ref()) else {
            return "–".into();
        };
        let q = if p.rate > 0.0 {
            p.rate
        } else {
            p.answered_qps.median
        };
        let loss = if p.loss_pct.median > MAX_LOSS_PCT {
            format!(", loss {:.2}%", p.loss_pct.median)
        } else {
            String::new()
        };
        let bound = if p.generator_bound { ", gen-bound" } else { "" };
        format!("{} (CPU {:.2}{loss}{bound})", k(q), p.cpu_share.median)
    });
    fill(
        "uncapped",
        &[
            ("max_loss_pct", MAX_LOSS_PCT.to_string()),
            ("rows", lines(rows)),
        ],
    )
}

fn latency(r: &Results) -> String {
    let rows = server_rows(r, |sv, id| {
        run(r, sv, id)
            .and_then(|x| x.latency.as_ref())
            .map_or("–".into(), |p| {
                if p.lat_p99_us.n > 0 {
                    format!("{:.0} / {:.0}", p.lat_avg_us.median, p.lat_p99_us.median)
                } else {
                    format!("{:.0}", p.lat_avg_us.median)
                }
            })
    });
    fill(
        "latency",
        &[("rate", k(r.meta.latency_rate)), ("rows", lines(rows))],
    )
}

/// Startup, memory and CPU time of every run.
fn startup(r: &Results) -> String {
    let mut rows = Vec::new();
    for (id, _) in workloads(r) {
        for sv in SERVERS {
            if let Some(x) = run(r, sv, &id) {
                rows.push(format!(
                    "| {id} | {sv} | {} | {:.1} | {:.1} | {:.1} |",
                    startup_cell(x),
                    x.rss_kib as f64 / 1024.0,
                    x.pss_kib as f64 / 1024.0,
                    x.total_cpu_s
                ));
            }
        }
    }
    fill("startup", &[("rows", lines(rows))])
}

/// What a record of the large zone and a zone of the many-zone workload
/// cost each server in resident memory: the workload's RSS less the same
/// server's with the small zone (its own baseline), over the records or
/// zones added.
fn memory_per_item(r: &Results) -> String {
    let Some(sizes) = &r.meta.sizes else {
        return String::new();
    };
    let per = |sv: &str, id: &str, items: usize| {
        let (x, base) = (run(r, sv, id)?, run(r, sv, "small")?);
        let added = (x.rss_kib as f64 - base.rss_kib as f64) * 1024.0;
        (items > 0 && added > 0.0).then(|| format!("{:.0}", added / items as f64))
    };
    let added_records = sizes.big_records.saturating_sub(sizes.small_records);
    let rows = SERVERS
        .iter()
        .filter(|&&sv| sv != "reflector")
        .filter_map(|sv| {
            let big = per(sv, "big", added_records);
            let many = per(sv, "many", sizes.many_zones);
            let show = |v: Option<String>| v.unwrap_or_else(|| "–".into());
            (big.is_some() || many.is_some())
                .then(|| format!("| {sv} | {} | {} |", show(big), show(many)))
        });
    fill("memory_per_item", &[("rows", lines(rows))])
}

/// The idle-connection table ([`crate::results::IdleTcp`]).
fn idle_tcp(r: &Results) -> String {
    if r.idle_tcp.is_empty() {
        return String::new();
    }
    let yes = |b: bool| if b { "yes" } else { "**no**" };
    let mut rows = Vec::new();
    for x in &r.idle_tcp {
        if let Some(e) = &x.error {
            rows.push(format!("| {} | error: {e} | | | | | | | |", x.server));
        }
        for p in &x.points {
            rows.push(format!(
                "| {} | {} | {} | {} | {:.1} | {:.1} | {:.0} | {} | {} |",
                x.server,
                p.connections,
                p.opened,
                p.held,
                x.base_pss_kib as f64 / 1024.0,
                p.pss_kib as f64 / 1024.0,
                p.bytes_per_connection,
                yes(p.new_tcp_answered),
                yes(p.udp_answered)
            ));
        }
    }
    fill("idle_tcp", &[("rows", lines(rows))])
}

/// A small change applied to the large zone.
fn zone_change(r: &Results) -> String {
    let Some(c) = &r.zone_change else {
        return String::new();
    };
    let ms = |v: f64| format!("{v:.2}");
    fill(
        "zone_change",
        &[
            ("zone_records", c.zone_records.to_string()),
            ("changed_records", c.changed_records.to_string()),
            ("deleted_names", (c.changed_records / 2).to_string()),
            ("repeats", c.apply_ms.n.to_string()),
            ("median_ms", ms(c.apply_ms.median)),
            ("min_ms", ms(c.apply_ms.min)),
            ("max_ms", ms(c.apply_ms.max)),
            ("extra_bytes", c.extra_bytes.to_string()),
            (
                "zone_mib",
                format!("{:.1}", c.zone_bytes as f64 / (1024.0 * 1024.0)),
            ),
        ],
    )
}

/// Heron reloading the large zone under load.
fn reload(r: &Results) -> String {
    let Some(x) = &r.reload else {
        return String::new();
    };
    let wrong = match x.wrong_examples.is_empty() {
        true => String::new(),
        false => fill(
            "wrong_examples",
            &[("examples", x.wrong_examples.join("; "))],
        ),
    };
    let mib = |kib: u64| format!("{:.1}", kib as f64 / 1024.0);
    let swap_us = match x.swap_us.n {
        0 => "–".to_string(),
        _ => format!("{:.0} ({:.0})", x.swap_us.median, x.swap_us.max),
    };
    let reload_ms = format!(
        "{:.0} ({:.0}–{:.0})",
        x.reload_ms.median, x.reload_ms.min, x.reload_ms.max
    );
    fill(
        "reload",
        &[
            ("zone_records", x.zone_records.to_string()),
            ("offered_qps", format!("{:.0}", x.offered_qps)),
            ("reference_qps", format!("{:.0}", x.reference_qps)),
            ("reloads", x.reloads.to_string()),
            ("sent", x.sent.to_string()),
            ("answered", x.answered.to_string()),
            ("lost", x.lost.to_string()),
            ("wrong", x.wrong.to_string()),
            ("stale", x.stale.to_string()),
            ("reload_ms", reload_ms),
            ("swap_us", swap_us),
            ("lat_p99_us", format!("{:.0}", x.lat_p99_us)),
            ("lat_max_us", format!("{:.0}", x.lat_max_us)),
            ("steady_mib", mib(x.steady_rss_kib)),
            ("peak_mib", mib(x.peak_rss_kib)),
            ("wrong_examples", wrong),
        ],
    )
}

/// The runs that failed, with the first line of their error.
fn errors(r: &Results) -> String {
    let list: Vec<String> = r
        .runs
        .iter()
        .filter_map(|x| {
            let e = x.error.as_ref()?;
            let first = e.lines().next().unwrap_or("");
            Some(format!("* {} on {}: {first}", x.server, x.workload))
        })
        .collect();
    match list.is_empty() {
        true => String::new(),
        false => fill("errors", &[("list", lines(list))]),
    }
}

/// The notes the phases left on their figures.
fn notes(r: &Results) -> String {
    let mut list = Vec::new();
    for x in &r.runs {
        for (n, p) in [("capped", &x.capped), ("uncapped", &x.uncapped)] {
            let Some(p) = p else { continue };
            // Saturation is judged against today's threshold, so a
            // regenerated report agrees with its own tables.
            let note: Vec<&str> = p
                .note
                .split("; ")
                .filter(|part| {
                    let stale =
                        part.contains("not saturated") && p.cpu_share.median >= 0.85 * r.meta.quota;
                    !part.is_empty() && !stale
                })
                .collect();
            if !note.is_empty() {
                list.push(format!(
                    "* {} on {} ({n}): {}",
                    x.server,
                    x.workload,
                    note.join("; ")
                ));
            }
        }
    }
    match list.is_empty() {
        true => String::new(),
        false => fill("notes", &[("list", lines(list))]),
    }
}

#[cfg(test)]
mod tests {
    use super::figures::thousands;
    use super::targets::idle_targets;
    use super::*;
    use crate::results::{Paired, Phase, RunResult, Spread};

    fn result(server: &str, workload: &str, per_cpu: f64) -> RunResult {
        RunResult {
            server: server.into(),
            workload: workload.into(),
            capped: Some(Phase {
                per_cpu_s: Spread::of(&[per_cpu * 0.98, per_cpu, per_cpu * 1.01]),
                saturated: true,
                ..Phase::default()
            }),
            ..RunResult::default()
        }
    }

    #[test]
    fn load_targets_compare_with_the_best_peer() {
        let mut r = Results::default();
        for (s, startup, rss_mib) in [("Heron", 1.0, 100), ("NSD", 2.5, 900), ("Knot", 3.0, 150)] {
            r.runs.push(RunResult {
                server: s.into(),
                workload: "many".into(),
                startup_s: startup,
                rss_kib: rss_mib * 1024,
                ..RunResult::default()
            });
        }
        let t = targets(&r);
        let by = |p: &str| t.iter().find(|x| x.what.starts_with(p)).unwrap().clone();
        let startup = by("many: Heron startup");
        assert!((startup.ratio.unwrap() - 0.4).abs() < 1e-9, "{startup:?}");
        assert_eq!(startup.pass(), Some(true));
        let memory = by("many: Heron resident memory");
        assert!((memory.ratio.unwrap() - 100.0 / 150.0).abs() < 1e-9);
        assert_eq!(memory.pass(), Some(false));
        assert!(memory.detail.contains("Knot"));
    }

    #[test]
    fn a_reflector_target_missed_points_to_the_profile() {
        let mut r = Results {
            profile_summary: "* root: a query costs Heron 3.88 µs".into(),
            ..Results::default()
        };
        let missed = Target {
            what: "root: Heron ≥ 0.9× reflector".into(),
            ratio: Some(0.893),
            need: 0.9,
            bound: Bound::AtLeast,
            detail: String::new(),
        };
        let text = limits(&r, std::slice::from_ref(&missed));
        assert!(text.contains("measured 0.893"), "{text}");
        assert!(
            text.contains("The profile below measures both for root."),
            "{text}"
        );
        // Without a profile there is nothing below to point to.
        r.profile_summary.clear();
        let text = limits(&r, &[missed]);
        assert!(!text.contains("profile below"), "{text}");
    }

    #[test]
    fn startup_is_the_median_of_the_starts_with_their_range() {
        let starts = Spread::of(&[1.6, 1.1, 1.2]);
        let mut r = Results::default();
        for (s, startup) in [("Heron", Some(starts)), ("NSD", None)] {
            r.runs.push(RunResult {
                server: s.into(),
                workload: "many".into(),
                startup_s: startup.map_or(3.0, |x| x.median),
                startup,
                ..RunResult::default()
            });
        }
        let t = targets(&r);
        let startup = t
            .iter()
            .find(|x| x.what == "many: Heron startup ≤ 0.5× best peer");
        let startup = startup.unwrap();
        assert!((startup.ratio.unwrap() - 0.4).abs() < 1e-9, "{startup:?}");
        assert!(
            startup
                .detail
                .contains("medians of 3 starts (Heron 1.10–1.60)")
        );
        assert_eq!(startup_cell(&r.runs[0]), "1.20 (1.10–1.60)");
        assert_eq!(startup_cell(&r.runs[1]), "3.00");
    }

    #[test]
    fn memory_per_record_and_zone_is_over_the_small_zone_baseline() {
        let mut r = Results::default();
        r.meta.sizes = Some(crate::results::Sizes {
            small_records: 1_000,
            big_records: 1_001_000,
            many_zones: 10_000,
            ..crate::results::Sizes::default()
        });
        for (s, w, rss_mib) in [
            ("Heron", "small", 10),
            ("Heron", "big", 110),
            ("Heron", "many", 30),
            ("NSD", "small", 20),
            ("NSD", "many", 220),
        ] {
            r.runs.push(RunResult {
                server: s.into(),
                workload: w.into(),
                rss_kib: rss_mib * 1024,
                ..RunResult::default()
            });
        }
        let table = memory_per_item(&r);
        // 100 MiB over a million records; 20 MiB over 10,000 zones.
        assert!(table.contains("| Heron | 105 | 2097 |"), "{table}");
        assert!(table.contains("| NSD | – | 20972 |"), "{table}");
        assert!(!table.contains("Knot"), "no runs, no row: {table}");
    }

    #[test]
    fn targets_are_ratios_of_medians() {
        let mut r = Results::default();
        for (s, w, v) in [
            ("reflector", "root", 500.0),
            ("Heron", "root", 460.0),
            ("NSD", "root", 380.0),
            ("Knot", "root", 300.0),
            ("Heron", "small", 400.0),
            ("Heron", "big", 390.0),
            ("Heron", "many", 300.0),
            ("Heron", "tcp", 100.0),
            ("BIND", "tcp", 80.0),
        ] {
            r.runs.push(result(s, w, v));
        }
        let t = targets(&r);
        let by = |p: &str| t.iter().find(|x| x.what.starts_with(p)).unwrap().clone();
        assert_eq!(by("root: Heron ≥ 0.9").pass(), Some(true));
        // Faster than the reflector: the run cannot settle it.
        let mut faster = r.clone();
        faster.runs.push(result("reflector", "mix40", 400.0));
        faster.runs.push(result("Heron", "mix40", 420.0));
        let ft = targets(&faster);
        let doubtful = ft
            .iter()
            .find(|x| x.what.starts_with("mix40: Heron ≥ 0.9"))
            .unwrap();
        assert!(doubtful.inconclusive());
        assert_eq!(doubtful.pass(), None);
        assert!(readme_text(&faster).contains("**INCONCLUSIVE**"));
        let peer = by("root: Heron ≥ 1.25");
        assert!((peer.ratio.unwrap() - 460.0 / 380.0).abs() < 1e-9);
        assert_eq!(peer.pass(), Some(false));
        assert_eq!(by("big").pass(), Some(true));
        assert_eq!(by("many").pass(), Some(false));
        assert_eq!(by("tcp").pass(), Some(false));
        // The report renders without panicking, charts included.
        r.meta.workload_titles = vec![("root".into(), "root".into()), ("tcp".into(), "tcp".into())];
        let text = readme_text(&r);
        assert!(text.contains("**FAIL**"));
        let dir = std::env::temp_dir().join(format!("heron-bench-report-{}", std::process::id()));
        write_all(&r, &dir).unwrap();
        assert!(
            fs::read_to_string(dir.join("capacity.svg"))
                .unwrap()
                .contains("<svg")
        );
        fs::remove_dir_all(dir).unwrap();
    }

    fn paired(subject: (&str, &str), reference: (&str, &str), ratios: &[f64]) -> Paired {
        let name = |(s, w): (&str, &str)| (s.to_string(), w.to_string());
        Paired {
            subject: name(subject),
            reference: name(reference),
            ratio: Spread::of(ratios),
            ..Paired::default()
        }
    }

    #[test]
    fn counts_are_grouped_by_thousands() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(10_000), "10,000");
        assert_eq!(thousands(2_000_000), "2,000,000");
    }

    #[test]
    fn idle_connections_must_all_be_held_at_flat_memory() {
        use crate::results::{IdlePoint, IdleTcp};
        let point = |connections, held, bytes_per_connection| IdlePoint {
            connections,
            opened: connections,
            held,
            bytes_per_connection,
            new_tcp_answered: true,
            udp_answered: true,
            ..IdlePoint::default()
        };
        let mut r = Results::default();
        assert!(idle_targets(&r).is_empty());
        r.idle_tcp.push(IdleTcp {
            server: "Heron".into(),
            points: vec![point(1_000, 1_000, 1400.0), point(10_000, 9_990, 1500.0)],
            ..IdleTcp::default()
        });
        r.idle_tcp.push(IdleTcp {
            server: "NSD".into(),
            points: vec![point(1_000, 551, 23_000.0)],
            ..IdleTcp::default()
        });
        let t = idle_targets(&r);
        assert_eq!(t[0].ratio, Some(0.999));
        assert_eq!(t[0].pass(), Some(false), "one connection dropped fails it");
        assert!(t[0].detail.contains("NSD 551 held"), "{}", t[0].detail);
        assert_eq!(t[1].pass(), Some(true), "1500 vs 1400 bytes is flat");
        r.idle_tcp[0].points[1] = point(10_000, 10_000, 2000.0);
        let t = idle_targets(&r);
        assert_eq!(t[0].pass(), Some(true));
        assert_eq!(
            t[1].pass(),
            Some(false),
            "growing per connection is not flat"
        );
        assert!(readme_text(&r).contains("| Heron | 10000 | 10000 | 10000 |"));
    }

    #[test]
    fn negative_answers_are_held_to_the_positive_ones() {
        let mut r = Results::default();
        for (s, w, v) in [
            ("Heron", "small", 400.0),
            ("Heron", "negative", 360.0),
            ("NSD", "small", 300.0),
            ("NSD", "negative", 240.0),
        ] {
            r.runs.push(result(s, w, v));
        }
        let negative = |r: &Results| {
            let t = targets(r);
            t.into_iter()
                .find(|x| x.what.starts_with("negative"))
                .unwrap()
        };
        let separate = negative(&r);
        assert_eq!(separate.ratio, Some(0.9));
        assert_eq!(separate.pass(), Some(false));
        assert!(separate.detail.contains("NSD 0.80"), "{}", separate.detail);
        r.paired.push(paired(
            ("Heron", "negative"),
            ("Heron", "small"),
            &[0.97, 1.0, 1.02],
        ));
        let measured = negative(&r);
        assert_eq!(measured.ratio, Some(1.0));
        assert_eq!(measured.pass(), Some(true));
    }

    #[test]
    fn paired_trials_settle_a_target_when_present() {
        let mut r = Results::default();
        for (s, w, v) in [
            ("reflector", "root", 400.0),
            ("Heron", "root", 420.0),
            ("Heron", "small", 400.0),
            ("Heron", "big", 330.0),
        ] {
            r.runs.push(result(s, w, v));
        }
        let by = |r: &Results, p: &str| {
            let t = targets(r);
            t.iter().find(|x| x.what.starts_with(p)).unwrap().clone()
        };
        assert!(by(&r, "root: Heron ≥ 0.9").inconclusive());
        assert_eq!(by(&r, "big").pass(), Some(false));
        r.paired.push(paired(
            ("Heron", "root"),
            ("reflector", "root"),
            &[0.91, 0.93, 0.95],
        ));
        r.paired.push(paired(
            ("Heron", "big"),
            ("Heron", "small"),
            &[0.96, 0.97, 0.99],
        ));
        let root = by(&r, "root: Heron ≥ 0.9");
        assert_eq!(root.ratio, Some(0.93));
        assert_eq!(root.pass(), Some(true));
        assert!(root.detail.contains("3 pairs"), "{}", root.detail);
        assert!(root.detail.contains("separate runs"), "{}", root.detail);
        assert_eq!(by(&r, "big").pass(), Some(true));
        // Against the peers: the lead over the closest one decides.
        r.runs.push(result("NSD", "root", 300.0));
        assert_eq!(by(&r, "root: Heron ≥ 1.25").ratio, Some(1.4));
        r.paired
            .push(paired(("Heron", "root"), ("NSD", "root"), &[1.3, 1.4, 1.5]));
        r.paired.push(paired(
            ("Heron", "root"),
            ("Knot", "root"),
            &[1.2, 1.24, 1.3],
        ));
        let peers = by(&r, "root: Heron ≥ 1.25");
        assert_eq!(peers.ratio, Some(1.24));
        assert_eq!(peers.pass(), Some(false));
        assert!(
            peers.detail.contains("NSD 1.40 (3 pairs"),
            "{}",
            peers.detail
        );
        assert!(peers.detail.contains("Knot 1.24"), "{}", peers.detail);
        assert!(
            peers.detail.contains("separate runs: Heron"),
            "{}",
            peers.detail
        );
        let text = readme_text(&r);
        assert!(text.contains("### Paired comparisons"));
        assert!(
            text.contains("| Heron big | Heron small | 3 | 0.970 |"),
            "{text}"
        );
    }
}
