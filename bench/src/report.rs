//! README.md and the SVG charts, from the results alone (so `heron-bench
//! report` regenerates them from results.json).

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use plotters::prelude::*;

use crate::results::{MAX_LOSS_PCT, Paired, Phase, Results, RunResult, Spread};

const PEERS: [&str; 3] = ["NSD", "Knot", "BIND"];
const SERVERS: [&str; 5] = ["reflector", "Heron", "NSD", "Knot", "BIND"];

pub fn regenerate(results: &Path, out: &Path) -> Result<(), String> {
    let text = fs::read_to_string(results).map_err(|e| format!("{}: {e}", results.display()))?;
    let r: Results =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", results.display()))?;
    write_all(&r, out)
}

pub fn write_all(r: &Results, out: &Path) -> Result<(), String> {
    fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    chart_capacity(r, &out.join("capacity.svg"))?;
    chart_answered(r, &out.join("answered.svg"))?;
    let readme = out.join("README.md");
    fs::write(&readme, readme_text(r)).map_err(|e| format!("{}: {e}", readme.display()))
}

fn run<'a>(r: &'a Results, server: &str, workload: &str) -> Option<&'a RunResult> {
    r.runs
        .iter()
        .find(|x| x.server == server && x.workload == workload && x.error.is_none())
}

fn capped<'a>(r: &'a Results, server: &str, workload: &str) -> Option<&'a Phase> {
    run(r, server, workload).and_then(|x| x.capped.as_ref())
}

/// 10000 as "10,000".
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn k(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 1000.0 {
        format!("{:.1}k", v / 1000.0)
    } else {
        format!("{v:.0}")
    }
}

fn spread(s: &Spread) -> String {
    format!("{} ({}–{})", k(s.median), k(s.min), k(s.max))
}

fn workloads(r: &Results) -> Vec<(String, String)> {
    r.meta.workload_titles.clone()
}

/// What a record of the large zone and a zone of the many-zone workload
/// cost each server in resident memory: the workload's RSS less the same
/// server's with the small zone (its own baseline), over the records or
/// zones added.
fn memory_per_item(r: &Results) -> String {
    let Some(sizes) = &r.meta.sizes else {
        return String::new();
    };
    let mut s = String::from(
        "\nMemory per record and per zone: the RSS with the large zone (or the many zones) \
         less the same server's RSS with the small zone, over the records (or zones) added.\n\n\
         | server | bytes per record (large zone) | bytes per zone (many zones, 4 records each) |\n\
         | --- | --- | --- |\n",
    );
    let per = |sv: &str, id: &str, items: usize| {
        let (x, base) = (run(r, sv, id)?, run(r, sv, "small")?);
        let added = (x.rss_kib as f64 - base.rss_kib as f64) * 1024.0;
        (items > 0 && added > 0.0).then(|| format!("{:.0}", added / items as f64))
    };
    let added_records = sizes.big_records.saturating_sub(sizes.small_records);
    for sv in SERVERS.iter().filter(|&&sv| sv != "reflector") {
        let big = per(sv, "big", added_records);
        let many = per(sv, "many", sizes.many_zones);
        if big.is_some() || many.is_some() {
            let show = |v: Option<String>| v.unwrap_or_else(|| "–".into());
            let _ = writeln!(s, "| {sv} | {} | {} |", show(big), show(many));
        }
    }
    s
}

/// Heron holding thousands of idle TCP connections: every one still
/// answered at the most the suite opens, and memory per connection flat
/// (the same at the most as at the fewest, within 25%).
fn idle_targets(r: &Results) -> Vec<Target> {
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

/// The idle-connection table ([`crate::results::IdleTcp`]).
fn idle_tcp_text(r: &Results) -> String {
    if r.idle_tcp.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\n## Idle TCP connections\n\n\
         Each DNS server, configured to accept 10% more TCP connections than it is sent and \
         to close them after 30 s idle (longer than this takes), is sent connections from \
         127.0.0.1 that each ask the SOA once, 100 at a time, then stay silent. Half a second \
         after the last is answered its memory (PSS) is read; then every connection is asked \
         again (held: answered again; a server that closes idle connections early under load, \
         as RFC 7766 §6.2.3 lets it, holds fewer), and a new TCP client and a UDP query must \
         be answered. \
         Each step adds to the connections of the one before. Bytes per connection: the growth \
         of PSS over the server's own with none open, per connection opened. Kernel memory for \
         the sockets is not in a process's memory and is left out (the same for every \
         server). Connections close with a reset (SO_LINGER 0).\n\n\
         | server | connections | opened | held | PSS MiB, none open | PSS MiB, with them | bytes per connection | new TCP answered | UDP answered |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    let yes = |b: bool| if b { "yes" } else { "**no**" };
    for x in &r.idle_tcp {
        if let Some(e) = &x.error {
            let _ = writeln!(s, "| {} | error: {e} | | | | | | | |", x.server);
        }
        for p in &x.points {
            let _ = writeln!(
                s,
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
            );
        }
    }
    s
}

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

fn best_peer<'a>(r: &'a Results, workload: &str, peers: &[&'a str]) -> Option<(&'a str, f64)> {
    peers
        .iter()
        .filter_map(|p| capped(r, p, workload).map(|c| (*p, c.per_cpu_s.median)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
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

/// `target` measured by paired trials (`crate::paired`) when the run has
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

/// A server's startup time: the median of its starts, with their range
/// when there was more than one.
fn startup_cell(x: &RunResult) -> String {
    match x.startup {
        Some(s) if s.n > 1 => format!("{:.2} ({:.2}–{:.2})", s.median, s.min, s.max),
        _ => format!("{:.2}", x.startup_s),
    }
}

/// Issue 4's targets for a 10-record change to the 2,000,000-record zone:
/// under 10 ms and under 1 MB of memory the new version does not share.
fn change_targets(c: &crate::results::ZoneChange) -> Vec<Target> {
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
fn reload_targets(x: &crate::results::ReloadUnderLoad) -> Vec<Target> {
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

fn readme_text(r: &Results) -> String {
    let m = &r.meta;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Benchmarks\n\n\
         Heron against NSD, Knot DNS and BIND 9, and against a reflector that answers\n\
         every datagram through Heron's own UDP loop without doing any DNS work (the\n\
         physical limit of this kernel path). Generated by `heron-bench run`\n\
         ({} mode) on {}; took {:.0} s. Heron: {}.\n",
        m.mode, m.started, m.duration_s, m.heron_build
    );
    if m.mode == "quick" {
        let _ = writeln!(
            s,
            "**This is a quick (smoke-test) run: short trials and fewer workloads. Use the full run for figures.**\n"
        );
    }
    let _ = writeln!(
        s,
        "## How to run\n\n\
         ```sh\n\
         bench/run.sh            # full suite, about 30 minutes\n\
         bench/run.sh --quick    # smoke test, about 3 minutes\n\
         ```\n\n\
         `bench/run.sh` installs the Debian packages `dnsperf nsd knot bind9` when they are\n\
         missing, builds `heron` and `heron-bench` in release mode, and runs (as root):\n\n\
         ```sh\n\
         cargo build --release -p heron -p heron-bench\n\
         target/release/heron-bench run --heron target/release/heron --out docs/benchmarks [--quick]\n\
         ```\n\n\
         This run's command line: `{}`\n\n\
         Regenerate this page and the charts from `results.json`:\n\n\
         ```sh\n\
         target/release/heron-bench report --results docs/benchmarks/results.json --out docs/benchmarks\n\
         ```\n\n\
         The parts, each on its own: `heron-bench gen-zones --out DIR`, `heron-bench gen-queries --out DIR`\n\
         (dnsperf query files), `heron-bench reflector --listen 127.0.0.1:5301`, and\n\
         `heron-bench blast --target 127.0.0.1:5301 --queries DIR/queries/root.txt --rate 50000 --duration 5 --cpus 1 --cross-check`\n\
         (the batched generator, with dnsperf at the same rate for comparison).\n",
        m.command
    );

    let _ = writeln!(s, "## Machine\n");
    let _ = writeln!(
        s,
        "| | |\n| --- | --- |\n| CPU | {} × {} |\n| memory | {:.1} GiB |\n| kernel | Linux {} |\n| load average (1, 5, 15 min) at start / end | {} / {} |",
        m.cpus, m.cpu_model, m.mem_gib, m.kernel, m.loadavg_start, m.loadavg_end
    );
    for (name, v) in &m.versions {
        let _ = writeln!(s, "| {name} | {v} |");
    }
    let _ = writeln!(s, "| dnsperf | {} |\n", m.dnsperf_version);

    let t = m.timing.clone().unwrap_or_default();
    let _ = writeln!(
        s,
        "## Method\n\n\
         * Every server runs {} worker(s) (Heron `workers`, NSD `server-count`, Knot\n\
         \x20 `udp-workers`/`tcp-workers`/`background-workers`, BIND `-n`, reflector `--workers`),\n\
         \x20 pinned with `taskset -c {}`; the load generator runs on CPU {}. Scheduling: {}.\n\
         * Heron runs with its defaults, including `udp-coalesce-us = 50` (under load a UDP\n\
         \x20 worker lets queries gather for up to 50 µs); the reflector runs Heron's UDP loop\n\
         \x20 with the same setting.\n\
         * **Capacity**: each server's cgroup gets a CPU quota of {:.0}% of one core\n\
         \x20 (cgroup {}, period {} µs), the same for every server, so the generator always\n\
         \x20 out-runs it. `blast` keeps {} queries outstanding (closed loop, fewer than a\n\
         \x20 socket buffer holds, so nothing is dropped while the server is throttled) for\n\
         \x20 {} s; the figure is answered queries per server CPU-second, CPU from the cgroup's\n\
         \x20 counter (cross-checked with utime+stime of every process of the server in\n\
         \x20 `/proc/PID/stat`, recorded in results.json). A trial with more than {MAX_LOSS_PCT}%\n\
         \x20 loss is repeated with half the window. For the root-like and 40% mixes dnsperf\n\
         \x20 also drives the capped server once, as a cross-check.\n\
         * **Uncapped**: no quota; a bisection over open-loop offered rates ({} probes of {} s)\n\
         \x20 finds the highest rate with at most {MAX_LOSS_PCT}% loss, then {} trials of {} s at it.\n\
         * **Latency**: open loop at {:.0} queries/s, uncapped, average and 99th percentile.\n\
         * **TCP**: dnsperf with {} connections and up to 2 queries outstanding per\n\
         \x20 connection (pipelined), {} s per trial.\n\
         * Every figure is the median of {} trials, with min–max in parentheses.\n\
         * Memory: VmRSS and PSS summed over the server's processes (NSD forks), after the runs.\n\
         * The machine may be shared with other work (see the load average above). Real-time\n\
         \x20 scheduling keeps other processes from preempting the server and the generator,\n\
         \x20 but caches and the kernel are shared: capacity (per CPU-second) is the stable\n\
         \x20 figure; uncapped rates and tail latencies vary more between runs.\n",
        m.workers,
        m.server_cpus,
        m.generator_cpu,
        m.sched,
        m.quota * 100.0,
        m.cgroup,
        m.period_us,
        m.window,
        t.trial_s,
        t.search_steps + 2,
        t.step_s,
        t.repeats,
        t.trial_s,
        m.latency_rate,
        m.tcp_clients,
        t.tcp_s,
        t.repeats
    );
    if let Some(sz) = &m.sizes {
        let _ = writeln!(
            s,
            "Workloads ({} queries per file in random order, {} for the large zone; zones and queries from a fixed seed):\n",
            sz.queries, sz.big_queries
        );
    }
    for (id, title) in workloads(r) {
        let _ = writeln!(s, "* `{id}`: {title}");
    }
    let _ = writeln!(s);

    // Environment.
    let e = &r.env;
    let _ = writeln!(
        s,
        "## Environment check: the generator's ceiling\n\n\
         Against the uncapped reflector, root-like queries:\n\n\
         | generator | mode | answered q/s | loss % | reflector CPU share |\n| --- | --- | --- | --- | --- |"
    );
    let row = |s: &mut String, g: &str, mode: &str, p: &Phase| {
        let _ = writeln!(
            s,
            "| {g} | {mode} | {} | {:.3} | {:.2} |",
            spread(&p.answered_qps),
            p.loss_pct.median,
            p.cpu_share.median
        );
    };
    row(
        &mut s,
        "blast",
        &format!("closed loop, {} outstanding", m.window),
        &e.blast_closed,
    );
    let _ = writeln!(
        s,
        "| blast | open loop, highest rate with ≤{MAX_LOSS_PCT}% loss | {} | | |",
        e.blast_open_max.map_or("none".into(), k)
    );
    row(
        &mut s,
        "dnsperf",
        &format!("as fast as it goes, -c 4 -q {}", m.window),
        &e.dnsperf_max,
    );
    row(
        &mut s,
        "blast",
        &format!("cross-check at {} q/s", k(e.cross_rate)),
        &e.cross_blast,
    );
    row(
        &mut s,
        "dnsperf",
        &format!("cross-check at {} q/s", k(e.cross_rate)),
        &e.cross_dnsperf,
    );
    let _ = writeln!(
        s,
        "\nAt the common rate the reflector spent {} (blast) and {} (dnsperf) answered queries per CPU-second.\n\n{}\n",
        k(e.cross_blast.per_cpu_s.median),
        k(e.cross_dnsperf.per_cpu_s.median),
        e.verdict
    );

    // Targets.
    let _ = writeln!(
        s,
        "## Targets\n\n| target | measured | needed | result | figures |\n| --- | --- | --- | --- | --- |"
    );
    let ts = targets(r);
    for t in &ts {
        let need = match t.bound {
            Bound::AtLeast | Bound::ShareOfLimit => format!("≥ {:.2}", t.need),
            Bound::AtMost => format!("≤ {:.2}", t.need),
            Bound::Within => format!("within {:.0}%", t.need * 100.0),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} |",
            t.what,
            t.ratio.map_or("–".into(), |x| format!("{x:.3}")),
            need,
            match t.pass() {
                Some(true) => "PASS",
                Some(false) => "**FAIL**",
                None if t.inconclusive() => "**INCONCLUSIVE**",
                None => "not measured",
            },
            t.detail
        );
    }
    let _ = writeln!(s);
    if let Some(lim) = limits_text(r, &ts) {
        let _ = writeln!(s, "### What limits it\n\n{lim}\n");
    }

    if let Some(text) = paired_text(r) {
        let _ = writeln!(s, "{text}");
    }

    // Capacity tables.
    let _ = writeln!(
        s,
        "## Capacity: answered queries per server CPU-second, CPU capped at {:.0}%\n\n\
         ![capacity by server and workload](capacity.svg)\n",
        m.quota * 100.0
    );
    let _ = writeln!(
        s,
        "| workload | {} | Heron / reflector | Heron / best peer |\n| --- |{} --- | --- |",
        SERVERS.join(" | "),
        " --- |".repeat(SERVERS.len())
    );
    for (id, _) in workloads(r) {
        let mut line = format!("| {id} |");
        for sv in SERVERS {
            let cell = match capped(r, sv, &id) {
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
                None => error_cell(r, sv, &id),
            };
            let _ = write!(line, " {cell} |");
        }
        let h = capped(r, "Heron", &id).map(|p| p.per_cpu_s.median);
        let refl = capped(r, "reflector", &id).map(|p| p.per_cpu_s.median);
        let best = best_peer(r, &id, &PEERS);
        let _ = writeln!(
            line,
            " {} | {} |",
            h.zip(refl)
                .map_or("–".into(), |(a, b)| format!("{:.2}", a / b)),
            h.zip(best)
                .map_or("–".into(), |(a, b)| format!("{:.2} ({})", a / b.1, b.0))
        );
        s.push_str(&line);
    }
    let _ = writeln!(
        s,
        "\nAnswered queries per second under the quota, and the share of a core the server used:\n\n\
         | workload | {} |\n| --- |{}",
        SERVERS.join(" | "),
        " --- |".repeat(SERVERS.len())
    );
    for (id, _) in workloads(r) {
        let mut line = format!("| {id} |");
        for sv in SERVERS {
            let cell = capped(r, sv, &id).map_or("–".into(), |p| {
                format!(
                    "{} q/s, {:.2} CPU, loss {:.3}%",
                    k(p.answered_qps.median),
                    p.cpu_share.median,
                    p.loss_pct.median
                )
            });
            let _ = write!(line, " {cell} |");
        }
        let _ = writeln!(s, "{line}");
    }
    let dn: Vec<String> = r
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
    if !dn.is_empty() {
        let _ = writeln!(
            s,
            "\nCross-check of the capacity figure with dnsperf as the generator (one trial):\n\n\
             | workload | server | blast | dnsperf | dnsperf / blast |\n| --- | --- | --- | --- | --- |\n{}",
            dn.join("\n")
        );
    }

    // Uncapped.
    let _ = writeln!(
        s,
        "\n## Uncapped: highest rate answered with at most {MAX_LOSS_PCT}% loss\n\n\
         Queries per second (median of the trials at the rate found). *gen-bound*: the\n\
         generator's ceiling, not the server's; the server still had CPU to spare.\n\n\
         | workload | {} |\n| --- |{}",
        SERVERS.join(" | "),
        " --- |".repeat(SERVERS.len())
    );
    for (id, _) in workloads(r) {
        let mut line = format!("| {id} |");
        for sv in SERVERS {
            let cell =
                run(r, sv, &id)
                    .and_then(|x| x.uncapped.as_ref())
                    .map_or("–".into(), |p| {
                        let q = if p.rate > 0.0 {
                            p.rate
                        } else {
                            p.answered_qps.median
                        };
                        format!(
                            "{} (CPU {:.2}{}{})",
                            k(q),
                            p.cpu_share.median,
                            if p.loss_pct.median > MAX_LOSS_PCT {
                                format!(", loss {:.2}%", p.loss_pct.median)
                            } else {
                                String::new()
                            },
                            if p.generator_bound { ", gen-bound" } else { "" }
                        )
                    });
            let _ = write!(line, " {cell} |");
        }
        let _ = writeln!(s, "{line}");
    }
    let _ = writeln!(
        s,
        "\n![answered % against offered rate](answered.svg)\n\n\
         The chart: root-like workload, CPU capped, open-loop offered rates as fractions of the\n\
         capped reflector's capacity; answered % falls where a server's capacity ends.\n"
    );

    // Latency.
    let _ = writeln!(
        s,
        "## Latency at {} queries/s, uncapped\n\n\
         Average / 99th percentile in µs. TCP: dnsperf gives the average only, and with\n\
         1,000 connections and a rate limit its own pacing dominates (about 10 ms for every\n\
         server), so the TCP row compares servers only with each other.\n\n\
         | workload | {} |\n| --- |{}",
        k(m.latency_rate),
        SERVERS.join(" | "),
        " --- |".repeat(SERVERS.len())
    );
    for (id, _) in workloads(r) {
        let mut line = format!("| {id} |");
        for sv in SERVERS {
            let cell = run(r, sv, &id)
                .and_then(|x| x.latency.as_ref())
                .map_or("–".into(), |p| {
                    if p.lat_p99_us.n > 0 {
                        format!("{:.0} / {:.0}", p.lat_avg_us.median, p.lat_p99_us.median)
                    } else {
                        format!("{:.0}", p.lat_avg_us.median)
                    }
                });
            let _ = write!(line, " {cell} |");
        }
        let _ = writeln!(s, "{line}");
    }

    // Memory, startup, CPU.
    let _ = writeln!(
        s,
        "\n## Startup, memory and CPU time\n\n\
         Startup: spawn to the first answer from every checked zone (probed every few milliseconds), the median of several starts with min–max in parentheses, with the zone files read once just before each server starts (this VM pages out memory untouched for a minute, page cache included, so otherwise the first server on a workload would read from disk and the next ones from the cache). Memory after the runs:\n\
         RSS / PSS in MiB. CPU: server CPU-seconds over its whole life, loading included.\n\n\
         | workload | server | startup s | RSS MiB | PSS MiB | CPU s |\n| --- | --- | --- | --- | --- | --- |"
    );
    for (id, _) in workloads(r) {
        for sv in SERVERS {
            if let Some(x) = run(r, sv, &id) {
                let _ = writeln!(
                    s,
                    "| {id} | {sv} | {} | {:.1} | {:.1} | {:.1} |",
                    startup_cell(x),
                    x.rss_kib as f64 / 1024.0,
                    x.pss_kib as f64 / 1024.0,
                    x.total_cpu_s
                );
            }
        }
    }
    s += &memory_per_item(r);
    s += &idle_tcp_text(r);
    if let Some(c) = &r.zone_change {
        let _ = writeln!(
            s,
            "\n## Changing a large zone\n\n\
             `Zone::apply` on the large workload's zone ({} records), in the suite's own process: \
             {} records changed (the A records of {} names deleted, as many new names added) and \
             the SOA serial raised, applied {} times to the loaded version. Time: {:.2} ms median \
             ({:.2}–{:.2}). Memory: the new version shares every shard the change did not touch \
             with the old one; it holds {} bytes of its own, of the zone's {:.1} MiB of nodes.",
            c.zone_records,
            c.changed_records,
            c.changed_records / 2,
            c.apply_ms.n,
            c.apply_ms.median,
            c.apply_ms.min,
            c.apply_ms.max,
            c.extra_bytes,
            c.zone_bytes as f64 / (1024.0 * 1024.0)
        );
    }
    if let Some(x) = &r.reload {
        let _ = writeln!(
            s,
            "\n## Reloading a large zone under load\n\n\
             Heron serving a copy of the large zone ({} records), with normal scheduling, while \
             the generator sends {:.0} q/s (half of the {:.0} q/s it answered without loss in this \
             run) for random names of the zone, one query in eight for the one name each reload \
             changes. {} times the zone file is replaced (the serial raised, that name's address \
             changed) and Heron gets SIGHUP, on a fixed schedule or, if later, once the previous change is \
             answered (waits of 30 s at most in all; the load runs 30 s longer to leave room for \
             them). Every answer is checked: NOERROR with exactly the \
             address the zone holds, and for the changed name never the previous address once \
             the new one has been answered to an earlier query.\n\n\
             | queries | answered | lost | wrong | older than an answer already given | \
             SIGHUP to the change answered, ms (median, min–max) | swap of the new version, us \
             (median, max) | latency p99 / max, us | \
             RSS steady / peak, MiB |\n|---|---|---|---|---|---|---|---|---|\n\
             | {} | {} | {} | {} | {} | {:.0} ({:.0}–{:.0}) | {} | {:.0} / {:.0} | {:.1} / {:.1} |",
            x.zone_records,
            x.offered_qps,
            x.reference_qps,
            x.reloads,
            x.sent,
            x.answered,
            x.lost,
            x.wrong,
            x.stale,
            x.reload_ms.median,
            x.reload_ms.min,
            x.reload_ms.max,
            match x.swap_us.n {
                0 => "–".to_string(),
                _ => format!("{:.0} ({:.0})", x.swap_us.median, x.swap_us.max),
            },
            x.lat_p99_us,
            x.lat_max_us,
            x.steady_rss_kib as f64 / 1024.0,
            x.peak_rss_kib as f64 / 1024.0
        );
        if !x.wrong_examples.is_empty() {
            let _ = writeln!(
                s,
                "\nWrong answers, first few: {}",
                x.wrong_examples.join("; ")
            );
        }
    }
    let errors: Vec<String> = r
        .runs
        .iter()
        .filter_map(|x| {
            x.error.as_ref().map(|e| {
                format!(
                    "* {} on {}: {}",
                    x.server,
                    x.workload,
                    e.lines().next().unwrap_or("")
                )
            })
        })
        .collect();
    if !errors.is_empty() {
        let _ = writeln!(s, "\n## Errors\n\n{}", errors.join("\n"));
    }
    let notes: Vec<String> = r
        .runs
        .iter()
        .flat_map(|x| {
            [("capped", &x.capped), ("uncapped", &x.uncapped)]
                .into_iter()
                .filter_map(|(n, p)| {
                    let p = p.as_ref()?;
                    // Saturation is judged against today's threshold, so a
                    // regenerated report agrees with its own tables.
                    let note: Vec<&str> = p
                        .note
                        .split("; ")
                        .filter(|part| {
                            let stale = part.contains("not saturated")
                                && p.cpu_share.median >= 0.85 * r.meta.quota;
                            !part.is_empty() && !stale
                        })
                        .collect();
                    (!note.is_empty()).then(|| {
                        format!(
                            "* {} on {} ({n}): {}",
                            x.server,
                            x.workload,
                            note.join("; ")
                        )
                    })
                })
                .collect::<Vec<_>>()
        })
        .collect();
    if !notes.is_empty() {
        let _ = writeln!(s, "\n## Notes from the runs\n\n{}", notes.join("\n"));
    }
    let _ = writeln!(
        s,
        "\nRaw figures, every trial and probe: [results.json](results.json)."
    );
    s
}

fn error_cell(r: &Results, server: &str, workload: &str) -> String {
    match r
        .runs
        .iter()
        .find(|x| x.server == server && x.workload == workload)
    {
        Some(x) if x.error.is_some() => "error".into(),
        _ => "–".into(),
    }
}

/// The paired comparisons, which the targets above use where present.
fn paired_text(r: &Results) -> Option<String> {
    if r.paired.is_empty() {
        return None;
    }
    let t = r.meta.timing.clone().unwrap_or_default();
    let trials = match t.pair_trial_s > 0.0 {
        true => format!(
            "{} pairs of closed-loop trials of {} s each",
            t.pairs, t.pair_trial_s
        ),
        false => "pairs of closed-loop trials".to_string(),
    };
    let mut s = format!(
        "### Paired comparisons\n\n\
         Separate runs of two servers lie minutes apart, and this machine's speed drifts by \
         more than some targets' margins in that time. These comparisons start both sides at \
         once under the same quota and alternate their capacity trials (ABBA order): {trials}, \
         short so that the machine changes little within a pair, and many so that the median \
         is steady (run against itself in four runs of 60 pairs, Heron's median ratio was \
         1.00 to 1.03, while single pairs ranged over ±25%). Each pair of trials gives a \
         ratio, and the targets \
         above use the median ratio.\n\n\
         | subject | reference | pairs | ratio (median) | min..max | subject answered/CPU-s | reference answered/CPU-s |\n\
         | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for p in &r.paired {
        let _ = writeln!(
            s,
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
        );
    }
    Some(s)
}

fn limits_text(r: &Results, ts: &[Target]) -> Option<String> {
    let failed: Vec<&Target> = ts.iter().filter(|t| t.pass() == Some(false)).collect();
    let doubtful: Vec<&Target> = ts.iter().filter(|t| t.inconclusive()).collect();
    if failed.is_empty() && doubtful.is_empty() && r.profiles.is_empty() {
        return None;
    }
    let mut s = String::new();
    for t in &doubtful {
        let _ = writeln!(
            s,
            "* {}: measured {:.2}, above 1, which cannot be: the reflector does strictly less \
             work per query than Heron, so the trials were disturbed (in separate runs, the \
             machine was slower during the reflector's than during Heron's). This run does \
             not settle the target.",
            t.what,
            t.ratio.unwrap_or(0.0)
        );
    }
    for t in &failed {
        let _ = write!(s, "* {}: measured {:.3}.", t.what, t.ratio.unwrap_or(0.0));
        let w = t.what.split(':').next().unwrap_or("");
        if t.what.contains("startup")
            && let Some(h) = run(r, "Heron", w)
        {
            let _ = write!(
                s,
                " The servers run pinned to one CPU, so Heron's parallel loading has one core \
                 here; its {:.2} s go to reading and building the zones one after another.",
                h.startup_s
            );
        } else if t.what.contains("reflector") && !r.profile_summary.is_empty() {
            let _ = write!(
                s,
                " The reflector answers from the same UDP loop without any DNS work, so the \
                 gap is that work: parsing, lookup and the answer's copy in user space, and \
                 the kernel copying a response longer than the echoed query. The profile \
                 below measures both for {w}."
            );
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
            let _ = write!(
                s,
                " The same ratio ({w} / small zone) in the separate runs: {}; {who}. What is \
                 lost is the lookup's memory traffic (random names in a large table, or among \
                 many zones, miss the caches), which instruction counts do not show.",
                ratios.join(", ")
            );
        }
        let _ = writeln!(s);
    }
    if !r.profiles.is_empty() {
        let _ = writeln!(
            s,
            "\nProfile (`valgrind --tool=callgrind`, user-space instructions per answered query, the\n\
             server under a closed-loop load of 64 outstanding queries so its batches fill as at\n\
             capacity; `perf` has no hardware counters on this machine):\n\n\
             | server | workload | queries | instructions / query | top functions (share of instructions) |\n| --- | --- | --- | --- | --- |"
        );
        for p in &r.profiles {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.0} | {} |",
                p.server,
                p.workload,
                p.answered,
                p.instructions_per_query,
                p.top
                    .iter()
                    .take(6)
                    .map(|(f, pct)| format!("`{f}` {pct:.1}%"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let _ = writeln!(s, "\n{}", r.profile_summary);
    }
    Some(s)
}

fn palette(i: usize) -> RGBColor {
    [
        RGBColor(140, 140, 140),
        RGBColor(214, 96, 26),
        RGBColor(31, 119, 180),
        RGBColor(44, 160, 44),
        RGBColor(148, 103, 189),
    ][i % 5]
}

fn chart_capacity(r: &Results, path: &Path) -> Result<(), String> {
    let ws = workloads(r);
    let n = ws.len().max(1);
    let mut ymax: f64 = 1.0;
    for (id, _) in &ws {
        for sv in SERVERS {
            if let Some(p) = capped(r, sv, id) {
                ymax = ymax.max(p.per_cpu_s.max / 1000.0);
            }
        }
    }
    let root = SVGBackend::new(path, (960, 520)).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Answered queries per server CPU-second (k), CPU capped at {:.0}%",
                r.meta.quota * 100.0
            ),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(0f64..n as f64, 0f64..ymax * 1.15)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("k answered / CPU-s")
        .draw()
        .map_err(|e| err(&e))?;
    let width = 0.8 / SERVERS.len() as f64;
    for (j, sv) in SERVERS.iter().enumerate() {
        let color = palette(j);
        let mut bars = Vec::new();
        let mut whiskers = Vec::new();
        for (i, (id, _)) in ws.iter().enumerate() {
            if let Some(p) = capped(r, sv, id) {
                let x0 = i as f64 + 0.1 + j as f64 * width;
                bars.push(Rectangle::new(
                    [(x0, 0.0), (x0 + width * 0.9, p.per_cpu_s.median / 1000.0)],
                    color.filled(),
                ));
                let xc = x0 + width * 0.45;
                whiskers.push(PathElement::new(
                    vec![
                        (xc, p.per_cpu_s.min / 1000.0),
                        (xc, p.per_cpu_s.max / 1000.0),
                    ],
                    BLACK.stroke_width(1),
                ));
            }
        }
        chart
            .draw_series(bars)
            .map_err(|e| err(&e))?
            .label(*sv)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
        chart.draw_series(whiskers).map_err(|e| err(&e))?;
    }
    // Workload names under their groups of bars.
    for (i, (id, _)) in ws.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
        root.draw(&Text::new(
            id.clone(),
            (px - 4 * id.len() as i32, py + 8),
            ("sans-serif", 15),
        ))
        .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

fn chart_answered(r: &Results, path: &Path) -> Result<(), String> {
    let sweeps: Vec<_> = r.sweeps.iter().filter(|s| s.workload == "root").collect();
    let xmax = sweeps
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(1.0f64, f64::max)
        / 1000.0;
    let root = SVGBackend::new(path, (960, 520)).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Answered % against offered rate, root-like zone, CPU capped at {:.0}%",
                r.meta.quota * 100.0
            ),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d(0f64..xmax * 1.05, 0f64..105f64)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("offered k queries/s")
        .y_desc("answered %")
        .draw()
        .map_err(|e| err(&e))?;
    for (j, sv) in SERVERS.iter().enumerate() {
        let Some(sw) = sweeps.iter().find(|s| s.server == *sv) else {
            continue;
        };
        let color = palette(j);
        let pts: Vec<(f64, f64)> = sw.points.iter().map(|p| (p.0 / 1000.0, p.2)).collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(*sv)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Phase, RunResult};

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
        let text = limits_text(&r, std::slice::from_ref(&missed)).unwrap();
        assert!(text.contains("measured 0.893"), "{text}");
        assert!(
            text.contains("The profile below measures both for root."),
            "{text}"
        );
        // Without a profile there is nothing below to point to.
        r.profile_summary.clear();
        let text = limits_text(&r, &[missed]).unwrap();
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
        r.meta.sizes = Some(crate::workloads::Sizes {
            small_records: 1_000,
            big_records: 1_001_000,
            many_zones: 10_000,
            ..crate::workloads::Sizes::default()
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
