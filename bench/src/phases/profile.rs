//! Instructions per query with `valgrind --tool=callgrind` (this machine's
//! `perf` has no hardware counters): the server runs under callgrind, its
//! counters are zeroed once it is ready, a fixed open-loop load runs, and
//! the counters are dumped. Counts are of user-space instructions only;
//! the kernel's share of a query (the system calls) is not in them.

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::Ctx;
use crate::blast::{self, BlastOpts, QuerySet};
use crate::results::{Profile, Results};
use crate::servers::{Binaries, Kind, Launch, Sched, Server};
use crate::workloads::Workload;

pub const VALGRIND: &str = "/usr/bin/valgrind";

fn control(arg: &str, pid: u32) -> Result<(), String> {
    let out = Command::new("callgrind_control")
        .arg(arg)
        .arg(pid.to_string())
        .output()
        .map_err(|e| format!("callgrind_control: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "callgrind_control {arg} {pid}: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Profiles `kind` on workload `w`: `window` queries outstanding for
/// `seconds`.
#[allow(clippy::too_many_arguments)]
pub fn profile(
    bins: &Binaries,
    kind: Kind,
    w: &Workload,
    set: &QuerySet,
    work: &Path,
    cpus: &str,
    window: usize,
    seconds: f64,
) -> Result<Profile, String> {
    let dir = work.join(format!("callgrind-{}-{}", kind.name().to_lowercase(), w.id));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let out = dir.join("callgrind.out");
    let launch = Launch {
        workers: 1,
        cpus: cpus.to_string(),
        ready_timeout: Duration::from_secs(900),
        sched: Sched::Normal,
        wrapper: vec![
            VALGRIND.into(),
            "--tool=callgrind".into(),
            format!("--callgrind-out-file={}", out.display()),
        ],
        tcp_clients_max: crate::servers::TCP_CLIENTS_MAX,
        idle_timeout_s: crate::servers::IDLE_TIMEOUT_S,
        pair: None,
        tls: None,
        heron_server: String::new(),
    };
    let server = Server::start(kind, bins, &w.zones, &w.ready, &launch, None, &dir)?;
    // Let loading finish, then count from zero.
    std::thread::sleep(Duration::from_millis(500));
    control("-z", server.pid)?;
    // Closed loop, so the server's batches fill as they do at capacity.
    let r = blast::blast(
        set,
        &BlastOpts {
            target: server.addr,
            rate: 0.0,
            window,
            duration: Duration::from_secs_f64(seconds),
            drain: Duration::from_secs(2),
            timeout: Duration::from_secs(2),
            ..BlastOpts::default()
        },
    )
    .map_err(|e| format!("blast: {e}"))?;
    control("-d", server.pid)?;
    drop(server);
    let dump = fs::read_dir(&dir)
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("callgrind.out."))
        })
        .filter(|p| fs::metadata(p).is_ok_and(|m| m.len() > 0))
        .max()
        .ok_or("callgrind wrote no dump")?;
    let text = Command::new("callgrind_annotate")
        .args(["--threshold=100", "--inclusive=no"])
        .arg(&dump)
        .output()
        .map_err(|e| format!("callgrind_annotate: {e}"))?;
    let text = String::from_utf8_lossy(&text.stdout);
    let (total, top) = parse_annotate(&text);
    Ok(Profile {
        server: kind.name().into(),
        workload: w.id.clone(),
        answered: r.answered,
        instructions: total,
        instructions_per_query: total as f64 / r.answered.max(1) as f64,
        top,
    })
}

fn number(s: &str) -> Option<u64> {
    s.replace(',', "").parse().ok()
}

/// Where the file ends and the function begins in "file:function": the
/// first ':' that is not part of a "::".
fn split_file_function(s: &str) -> &str {
    let b = s.as_bytes();
    for i in 0..b.len() {
        if b[i] == b':' && b.get(i + 1) != Some(&b':') && (i == 0 || b[i - 1] != b':') {
            return &s[i + 1..];
        }
    }
    s
}

/// The program total and the functions by self cost (inlined pieces that
/// callgrind_annotate lists per source file are added up), percent of the
/// total, most first.
pub fn parse_annotate(text: &str) -> (u64, Vec<(String, f64)>) {
    let mut total = 0;
    let mut by_fn: HashMap<String, u64> = HashMap::new();
    // The per-function table follows the "file:function" header and ends
    // at the first blank line; the auto-annotated sources after it repeat
    // costs per line and are skipped.
    let mut in_table = false;
    let mut seen_row = false;
    for line in text.lines() {
        let line = line.trim();
        if line.ends_with("file:function") {
            in_table = true;
            continue;
        }
        if line.is_empty() && seen_row {
            in_table = false;
        }
        let Some((count, rest)) = line.split_once(' ') else {
            continue;
        };
        let Some(n) = number(count) else {
            continue;
        };
        let rest = rest.trim_start();
        let rest = rest
            .strip_prefix('(')
            .and_then(|r| r.split_once(')'))
            .map_or(rest, |(_, r)| r.trim());
        if rest == "PROGRAM TOTALS" {
            total = n;
            continue;
        }
        if !in_table {
            continue;
        }
        seen_row = true;
        // Frames already open when the counters were zeroed (thread start,
        // clone) show the whole total as their own: not a hot spot.
        if total > 0 && n as f64 >= 0.995 * total as f64 {
            continue;
        }
        let func = split_file_function(rest);
        let func = func.rsplit_once(" [").map_or(func, |(f, _)| f).trim();
        if !func.is_empty() {
            *by_fn.entry(func.to_string()).or_default() += n;
        }
    }
    let mut top: Vec<(String, f64)> = by_fn
        .into_iter()
        .map(|(f, n)| (f, n as f64 * 100.0 / total.max(1) as f64))
        .collect();
    top.sort_by(|a, b| b.1.total_cmp(&a.1));
    top.truncate(12);
    (total, top)
}

/// Callgrind profiles of Heron and the reflector on the UDP target
/// workloads, and what they say about the per-query cost given the
/// capacity figures already in `results`.
pub(crate) fn run(ctx: &mut Ctx, wl: &[Workload], results: &Results) -> (Vec<Profile>, String) {
    ctx.say("profiles: callgrind, instructions per query");
    let profiled = ["root", "mix40", "small", "negative"];
    let mut profiles = Vec::new();
    for w in wl.iter().filter(|w| profiled.contains(&w.id.as_str())) {
        let Ok(set) = QuerySet::load(&w.queries) else {
            continue;
        };
        // The reflector's cost does not depend on the workload's zone.
        let kinds = match w.id.as_str() {
            "root" | "mix40" => &[Kind::Reflector, Kind::Heron][..],
            _ => &[Kind::Heron][..],
        };
        for &kind in kinds {
            let seconds = if ctx.args.quick { 1.0 } else { 4.0 };
            let cpus = &ctx.args.server_cpus;
            match profile(&ctx.bins, kind, w, &set, &ctx.work, cpus, 64, seconds) {
                Ok(p) => {
                    ctx.say(&format!(
                        "  {} on {}: {:.0} instructions per query over {} answers",
                        p.server, p.workload, p.instructions_per_query, p.answered
                    ));
                    profiles.push(p);
                }
                Err(e) => ctx.say(&format!(
                    "  {} on {}: profile failed: {e}",
                    kind.name(),
                    w.id
                )),
            }
        }
    }
    let summary = summary(&profiles, results, wl);
    (profiles, summary)
}

/// Per workload profiled, the DNS work's share of Heron's per-query cost
/// (Heron against the reflector), and negative against positive answers.
fn summary(profiles: &[Profile], results: &Results, wl: &[Workload]) -> String {
    let ipq = |s: &str, w: &str| {
        profiles
            .iter()
            .find(|p| p.server == s && p.workload == w)
            .map(|p| p.instructions_per_query)
    };
    let mut lines = Vec::new();
    for w in wl {
        let cap = |s: &str| {
            results
                .runs
                .iter()
                .find(|r| r.server == s && r.workload == w.id)
                .and_then(|r| r.capped.as_ref())
                .map(|c| c.per_cpu_s.median)
        };
        // The paired trials' figures where the run has them: measured
        // side by side, their difference is not the machine's drift.
        let paired = results
            .paired
            .iter()
            .find(|p| p.is(("Heron", &w.id), ("reflector", &w.id)))
            .map(|p| {
                (
                    p.subject_phase.per_cpu_s.median,
                    p.reference_phase.per_cpu_s.median,
                )
            });
        let caps = paired.or(cap("Heron").zip(cap("reflector")));
        if let (Some(h), Some(r), Some((ch, cr))) =
            (ipq("Heron", &w.id), ipq("reflector", &w.id), caps)
        {
            let (th, tr) = (1e6 / ch, 1e6 / cr);
            lines.push(format!(
                "* {}: a query costs Heron {th:.2} µs of CPU and the reflector {tr:.2} µs, so the DNS work adds {:.2} µs ({:.0}% of Heron's time); in user space Heron runs {h:.0} instructions per query against the reflector's {r:.0} (+{:.0}). The rest of both is the kernel's UDP path (recvmmsg/sendmmsg on loopback), which callgrind does not count: the same system calls for both, though Heron's responses are longer than the reflector's echo of the query, so the kernel copies more.",
                w.id,
                th - tr,
                (th - tr) / th * 100.0,
                h - r
            ));
        }
    }
    if let (Some(pos), Some(neg)) = (ipq("Heron", "small"), ipq("Heron", "negative")) {
        lines.push(format!(
            "* negative: Heron runs {neg:.0} instructions per negative answer (NXDOMAIN or \
             NODATA, with the SOA) against {pos:.0} per positive answer on the same zone."
        ));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_callgrind_annotate() {
        let text = "--------\nIr\n------\n6,492,406 (100.0%)  PROGRAM TOTALS\n\n-----\nIr  file:function\n-----\n\
                    6,492,406 (100.0%)  ./misc/clone.S:clone [/usr/lib/libc.so.6]\n\
                    1,117,276 (17.21%)  /rustc/x/library/alloc/src/vec/mod.rs:heron_server::udp::batch::Batch::receive\n\
                    998,152 (15.37%)  /rustc/x/library/core/src/slice/index.rs:heron_server::udp::batch::Batch::receive\n\
                    671,043 (10.34%)  snap/crates/heron-server/src/udp/batch.rs:heron_zone::answer::answer [/x/heron]\n\
                    100 ( 0.00%)  ???:memcpy [/usr/lib/libc.so.6]\n\n\
                    -- Auto-annotated source: x.rs\n\
                    5,000,000 (77.0%)  heron_zone::answer::answer (92,840x)\n";
        let (total, top) = super::parse_annotate(text);
        assert_eq!(total, 6_492_406);
        assert_eq!(top[0].0, "heron_server::udp::batch::Batch::receive");
        assert!((top[0].1 - (1_117_276.0 + 998_152.0) * 100.0 / 6_492_406.0).abs() < 1e-9);
        assert_eq!(top[1].0, "heron_zone::answer::answer");
        assert_eq!(top[2].0, "memcpy");
    }
}
