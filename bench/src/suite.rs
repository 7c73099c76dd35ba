//! `heron-bench run`: the whole suite, phase after phase ([`crate::phases`]).
//!
//! 1. Environment: the generator's ceiling against the reflector
//!    (uncapped), `blast` and `dnsperf` each, and the two cross-checked at
//!    a rate both reach.
//! 2. For every workload and server (same worker count, server pinned to
//!    one CPU set, generator on another):
//!    * capacity: the server's CPU quota set (40% of a core by default);
//!      a closed-loop load (a window of outstanding queries smaller than a
//!      socket buffer) keeps it saturated with no loss; answered queries
//!      per server CPU-second;
//!    * uncapped: the highest offered rate answered with at most 0.1% loss
//!      (a bisection over open-loop rates);
//!    * latency at a fixed moderate rate, uncapped;
//!    * startup time, CPU time, memory.
//! 3. Paired comparisons, idle TCP connections, a change to the large
//!    zone, a reload under load, callgrind profiles.
//! 4. results.json after every step; the caller writes the report from
//!    the results returned.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::args::RunArgs;
use crate::blast::QuerySet;
use crate::client_shape::ClientShape;
use crate::dnsperf;
use crate::host::{heron_build, loadavg, now_secs, read_first_line, utc};
use crate::interrupt::{self, interrupted};
use crate::phases::{self, Ctx, RT_PRIORITY};
use crate::results::{CostMatrix, Meta, Results, Timing};
use crate::servers::{self, Binaries, Kind, Launch, Sched};
use crate::sys::{self, Cgroup, CgroupFlavor};
use crate::workloads::{self, Sizes, Workload};
use crate::zones;

/// Runs the suite as `args` say. Returns the results to report, or None
/// where nothing is to be reported (`--paired-only`).
pub fn run(args: &RunArgs) -> Result<Option<Results>, String> {
    let started = Instant::now();
    let (mut ctx, wl, kinds, mut results) = prepare(args)?;
    let json_path = args.out.join("results.json");
    if args.profile_only {
        return profile_only(&mut ctx, &wl, &json_path).map(Some);
    }
    if args.paired_only {
        phases::paired::run(&mut ctx, &wl, &kinds);
        return Ok(None);
    }
    if args.reload_only {
        let w = wl.iter().find(|w| w.id == "big").ok_or("no big workload")?;
        let r = phases::reload::run(&mut ctx, w, args.reload_reference);
        println!(
            "{}",
            serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?
        );
        return Ok(None);
    }
    if args.matrix_only {
        let mut partial = results.clone();
        let mut save_cell = |m: &CostMatrix| {
            partial.cost_matrix = Some(m.clone());
            let _ = save(&partial, &json_path);
        };
        let m = phases::cost_matrix::run(&mut ctx, &wl, &kinds, &matrix_plan(args), &mut save_cell);
        results.cost_matrix = Some(m);
        results.meta.loadavg_end = loadavg();
        results.meta.duration_s = started.elapsed().as_secs_f64();
        save(&results, &json_path)?;
        return Ok(Some(results));
    }
    if args.idle_tls_only {
        let w = wl
            .iter()
            .find(|w| w.id == "root")
            .ok_or("no root workload")?;
        let rows = phases::idle_tls::run(&mut ctx, w, &kinds, &args.idle_tls_counts());
        let json = serde_json::json!({
            "meta": results.meta,
            "loadavg_end": loadavg(),
            "duration_s": started.elapsed().as_secs_f64(),
            "idle_tls": rows,
        });
        let path = args.out.join("dot-idle.json");
        let text = serde_json::to_string_pretty(&json).map_err(|e| e.to_string())?;
        fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        println!("idle TLS results in {}", path.display());
        return Ok(None);
    }
    if args.overload_only {
        let w = wl
            .iter()
            .find(|w| w.id == "root")
            .ok_or("no root workload")?;
        let plan = phases::overload::Plan::new(args.quick, &args.overload_transports);
        results.overload = Some(phases::overload::run(&mut ctx, w, &kinds, &plan));
        results.meta.loadavg_end = loadavg();
        results.meta.duration_s = started.elapsed().as_secs_f64();
        save(&results, &json_path)?;
        return Ok(Some(results));
    }
    let save = |r: &Results| save(r, &json_path);
    run_phases(&mut ctx, &wl, &kinds, &mut results, &save)?;
    results.meta.loadavg_end = loadavg();
    results.meta.duration_s = started.elapsed().as_secs_f64();
    save(&results)?;
    println!(
        "done in {:.0} s: {} and the charts in {}",
        results.meta.duration_s,
        args.out.join("README.md").display(),
        args.out.display()
    );
    Ok(Some(results))
}

/// Checks the machine and the servers, sets up scheduling, the cgroup
/// and the workloads: the context of every phase, the workloads, the
/// servers and the results with their `meta` filled in.
fn prepare(args: &RunArgs) -> Result<(Ctx, Vec<Workload>, Vec<Kind>, Results), String> {
    interrupt::watch_termination()?;
    if !heron_sys::process::is_root() {
        return Err("the suite needs root: it sets cgroup CPU quotas and scheduling".into());
    }
    raise_open_files_limit(args.most_connections())?;
    let flavor = sys::detect_cgroup().ok_or(
        "no cgroup CPU controller found (neither v1 `cpu` nor v2 with `cpu` in cgroup.controllers)",
    )?;
    let ids = workload_ids(args);
    let kinds = server_kinds(args)?;
    let bins = Binaries {
        heron: args.heron.clone(),
        bench: std::env::current_exe().map_err(|e| e.to_string())?,
    };
    check_installed(&kinds, &bins)?;
    let (sched, realtime) = match args.sched.as_str() {
        "rt" if sys::rt_group_available(&flavor) => (Sched::Realtime(RT_PRIORITY), true),
        "rt" | "nice" => (Sched::Nice(-20), false),
        _ => (Sched::Normal, false),
    };
    heron_sys::cpu::pin_current_thread(&[args.generator_cpu])
        .map_err(|e| format!("cannot pin to CPU {}: {e}", args.generator_cpu))?;
    if let Sched::Nice(n) = sched {
        let _ = heron_sys::sched::set_current_thread_nice(n);
    }
    fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    let work = args.data.join("run");
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let log = fs::File::create(args.data.join("run.log")).map_err(|e| e.to_string())?;
    let sizes = sizes(args.quick);
    let wl = generate_workloads(args, &ids, &sizes)?;
    let launch = Launch {
        workers: args.workers,
        cpus: args.server_cpus.clone(),
        ready_timeout: Duration::from_secs(900),
        wrapper: Vec::new(),
        sched,
        tcp_clients_max: servers::TCP_CLIENTS_MAX,
        idle_timeout_s: servers::IDLE_TIMEOUT_S,
        heron_server: String::new(),
        pair: None,
        tls: None,
    };
    let cg_name = format!("heron-bench-{}", std::process::id());
    let cg = Cgroup::create(&flavor, &cg_name, args.period_us, realtime)
        .map_err(|e| format!("cannot create cgroup {cg_name}: {e}"))?;
    let mut timing = Timing::new(args.quick, args.repeats, args.pairs);
    timing.repeats = timing.repeats.max(3);
    let ctx = Ctx {
        cg,
        args: args.clone(),
        timing: timing.clone(),
        bins: bins.clone(),
        launch,
        realtime,
        work,
        gen_cpu: args.generator_cpu.to_string(),
        log,
    };
    let mut results = Results {
        meta: meta(args, &kinds, &bins, &flavor, realtime, sched, &sizes, &ids),
        ..Results::default()
    };
    results.meta.timing = Some(timing);
    Ok((ctx, wl, kinds, results))
}

/// Every phase in order, the results saved after each.
fn run_phases(
    ctx: &mut Ctx,
    wl: &[Workload],
    kinds: &[Kind],
    results: &mut Results,
    save: &dyn Fn(&Results) -> Result<(), String>,
) -> Result<(), String> {
    let env_w = wl
        .iter()
        .find(|w| w.id == "root" || w.id == "env")
        .cloned()
        .ok_or("no root workload")?;
    let env_set = QuerySet::load(&env_w.queries)?;
    ctx.say("environment check: generator ceilings against the reflector (uncapped)");
    results.env = phases::env::run(ctx, &env_w, &env_set)?;
    save(results)?;
    for w in wl.iter().filter(|w| w.id != "env") {
        measure_workload(ctx, w, kinds, results, save)?;
    }
    results.paired = phases::paired::run(ctx, wl, kinds);
    save(results)?;
    let mut matrix = results.clone();
    let mut save_matrix = |m: &CostMatrix| {
        matrix.cost_matrix = Some(m.clone());
        let _ = save(&matrix);
    };
    results.cost_matrix = Some(phases::cost_matrix::run(
        ctx,
        wl,
        kinds,
        &matrix_plan(&ctx.args.clone()),
        &mut save_matrix,
    ));
    save(results)?;
    if let Some(w) = wl.iter().find(|w| w.tcp) {
        results.idle_tcp = phases::idle_tcp::run(ctx, w, kinds);
        save(results)?;
    }
    if let Some(w) = wl.iter().find(|w| w.id == "root") {
        let plan = phases::overload::Plan::new(ctx.args.quick, &ctx.args.overload_transports);
        results.overload = Some(phases::overload::run(ctx, w, kinds, &plan));
        save(results)?;
    }
    if let Some(w) = wl.iter().find(|w| w.id == "big") {
        results.zone_change = phases::change::run(ctx, w);
        save(results)?;
    }
    let heron_big = results
        .runs
        .iter()
        .find(|x| x.server == "Heron" && x.workload == "big")
        .and_then(|x| x.uncapped.as_ref().map(|u| u.rate));
    if let (Some(w), Some(reference)) = (wl.iter().find(|w| w.id == "big"), heron_big) {
        results.reload = phases::reload::run(ctx, w, reference);
        save(results)?;
    }
    if ctx.args.profile.unwrap_or(!ctx.args.quick) && Path::new(phases::profile::VALGRIND).exists()
    {
        (results.profiles, results.profile_summary) = phases::profile::run(ctx, wl, results);
        save(results)?;
    }
    Ok(())
}

/// Every server on workload `w`, each result saved as it comes.
fn measure_workload(
    ctx: &mut Ctx,
    w: &Workload,
    kinds: &[Kind],
    results: &mut Results,
    save: &dyn Fn(&Results) -> Result<(), String>,
) -> Result<(), String> {
    ctx.say(&format!("workload {}: {}", w.id, w.title));
    let set = if w.tcp {
        None
    } else {
        Some(QuerySet::load(&w.queries)?)
    };
    let mut sweep_ref = None;
    for &kind in kinds {
        if w.tcp && kind == Kind::Reflector {
            continue;
        }
        let rr = match &set {
            Some(set) => {
                // The answered-% chart is of the root-like workload, at
                // fractions of the capped reflector's capacity.
                let sweep = (w.id == "root").then(|| {
                    sweep_ref
                        .unwrap_or(results.env.blast_closed.answered_qps.median * ctx.args.quota)
                });
                let rr =
                    phases::udp::run(ctx, kind, w, set, &results.env, sweep, &mut results.sweeps);
                if kind == Kind::Reflector
                    && let Some(c) = &rr.capped
                {
                    sweep_ref = Some(c.answered_qps.median);
                }
                rr
            }
            None => phases::tcp::run(ctx, kind, w),
        };
        if let Some(e) = &rr.error {
            ctx.say(&format!("  {} on {}: ERROR {e}", kind.name(), w.id));
        }
        results.runs.push(rr);
        save(results)?;
        if interrupted() {
            return Err("interrupted; partial results in results.json".into());
        }
    }
    Ok(())
}

/// `--profile-only`: the profiles run again into the existing results.
fn profile_only(ctx: &mut Ctx, wl: &[Workload], json_path: &Path) -> Result<Results, String> {
    let text =
        fs::read_to_string(json_path).map_err(|e| format!("{}: {e}", json_path.display()))?;
    let mut old: Results =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", json_path.display()))?;
    old.profiles.clear();
    (old.profiles, old.profile_summary) = phases::profile::run(ctx, wl, &old);
    save(&old, json_path)?;
    Ok(old)
}

fn save(r: &Results, json_path: &Path) -> Result<(), String> {
    let text = serde_json::to_string_pretty(r).map_err(|e| e.to_string())?;
    fs::write(json_path, text).map_err(|e| format!("{}: {e}", json_path.display()))
}

/// Open files the suite, its generators and its servers may hold: room
/// for 10,000 TCP connections on each side and every server's own files.
const OPEN_FILES: u64 = 65_536;
/// The fewest one process of a 10,000-connection phase can do with.
const OPEN_FILES_NEEDED: u64 = 12_000;

/// Raises the open-files limit to [`OPEN_FILES`], or twice `connections`
/// and room for the rest where that is more (the hard limit too, where
/// the process may), else as far as the hard limit; dnsperf and the
/// servers inherit it. An error only below what is needed.
fn raise_open_files_limit(connections: usize) -> Result<(), String> {
    use heron_sys::process::{open_files_limit, set_open_files_limit};
    let want = OPEN_FILES.max(2 * connections as u64 + 16_384);
    let needed = OPEN_FILES_NEEDED.max(connections as u64 + 1_024);
    let (soft, hard) = open_files_limit();
    if soft.is_none_or(|s| s >= want)
        || set_open_files_limit(Some(want), hard.map(|h| h.max(want))).is_ok()
    {
        return Ok(());
    }
    // Without CAP_SYS_RESOURCE the hard limit is as far as it goes.
    let _ = set_open_files_limit(hard, hard);
    match hard {
        Some(h) if h < needed => Err(format!(
            "the open-files hard limit is {h} and this process may not raise it \
             (that takes CAP_SYS_RESOURCE): {connections} connections \
             held by one process need {needed} (ulimit -Hn)"
        )),
        _ => Ok(()),
    }
}

/// The cost matrix's cells for this run.
fn matrix_plan(args: &RunArgs) -> phases::cost_matrix::Plan {
    let workers = match (args.matrix_workers.is_empty(), args.quick) {
        (false, _) => args.matrix_workers.clone(),
        (true, true) => vec![1],
        (true, false) => vec![1, 2],
    };
    let mut plan = phases::cost_matrix::Plan::new(args.quick, &workers);
    plan.extra_herons = args
        .matrix_heron
        .iter()
        .filter_map(|x| x.split_once('='))
        .map(|(name, path)| {
            (
                name.to_string(),
                std::path::absolute(path).unwrap_or(path.into()),
            )
        })
        .collect();
    if !args.matrix_shapes.is_empty() {
        plan.shapes = args
            .matrix_shapes
            .iter()
            .filter_map(|s| ClientShape::parse(s))
            .collect();
    }
    if let Some(idle) = args.matrix_dot_idle {
        plan.dot_idle = idle;
    }
    if !args.matrix_tables.is_empty() {
        let wanted = |t: &str| args.matrix_tables.iter().any(|x| x == t);
        if !wanted("udp") {
            plan.udp_workloads.clear();
        }
        if !wanted("tcp") {
            plan.tcp_shapes.clear();
        }
        if !wanted("xdp") {
            plan.xdp_rates.clear();
        }
        if !wanted("dot") {
            plan.dot_shapes.clear();
        }
    }
    plan
}

/// The workloads asked for, or the mode's default ones.
fn workload_ids(args: &RunArgs) -> Vec<String> {
    let mut ids: Vec<String> = if args.workloads.is_empty() {
        if args.matrix_only {
            vec!["root".into(), "mix40".into(), "big".into()]
        } else if args.overload_only || args.idle_tls_only {
            vec!["root".into()]
        } else if args.reload_only {
            vec!["big".into()]
        } else if args.quick {
            vec!["root".into(), "mix40".into(), "tcp".into()]
        } else {
            workloads::ALL.iter().map(|s| s.to_string()).collect()
        }
    } else {
        args.workloads.clone()
    };
    ids.dedup();
    ids
}

fn server_kinds(args: &RunArgs) -> Result<Vec<Kind>, String> {
    if args.servers.is_empty() {
        return Ok(Kind::ALL.to_vec());
    }
    args.servers
        .iter()
        .map(|s| Kind::parse(s).ok_or(format!("unknown server {s}")))
        .collect()
}

fn check_installed(kinds: &[Kind], bins: &Binaries) -> Result<(), String> {
    for k in kinds {
        if !servers::available(*k, bins) {
            return Err(format!(
                "{} is not installed (bench/run.sh installs the Debian packages; build Heron with cargo build --release -p heron)",
                k.name()
            ));
        }
    }
    if !Path::new(dnsperf::DNSPERF).exists() {
        return Err("dnsperf is not installed (apt-get install dnsperf)".into());
    }
    Ok(())
}

fn sizes(quick: bool) -> Sizes {
    if quick {
        Sizes {
            queries: 50_000,
            big_queries: 100_000,
            big_records: 100_000,
            many_zones: 1_000,
            some_zones: 500,
            ..Sizes::default()
        }
    } else {
        Sizes::default()
    }
}

/// The workloads `ids`, and the root-like one as `env` for the
/// environment check when it is not among them; zone files settled.
fn generate_workloads(
    args: &RunArgs,
    ids: &[String],
    sizes: &Sizes,
) -> Result<Vec<Workload>, String> {
    println!(
        "generating workloads {} into {}",
        ids.join(", "),
        args.data.display()
    );
    let generate = |ids: &[String]| {
        workloads::generate(&args.data, zones::DEFAULT_SEED, sizes, ids, true, true)
            .map_err(|e| format!("generating workloads: {e}"))
    };
    let mut wl = generate(ids)?;
    if !ids.iter().any(|i| i == "root") {
        wl.extend(generate(&["root".into()])?.into_iter().map(|mut w| {
            w.id = "env".into();
            w
        }));
    }
    settle_files(&wl);
    Ok(wl)
}

/// The machine, the software and the settings of this run.
#[allow(clippy::too_many_arguments)]
fn meta(
    args: &RunArgs,
    kinds: &[Kind],
    bins: &Binaries,
    flavor: &CgroupFlavor,
    realtime: bool,
    sched: Sched,
    sizes: &Sizes,
    ids: &[String],
) -> Meta {
    Meta {
        started: utc(now_secs()),
        mode: if args.quick { "quick" } else { "full" }.into(),
        cpu_model: read_first_line("/proc/cpuinfo", "model name"),
        // Not available_parallelism: this process is pinned to one CPU.
        cpus: heron_sys::cpu::online_cpus(),
        mem_gib: read_first_line("/proc/meminfo", "MemTotal")
            .trim_end_matches(" kB")
            .trim()
            .parse::<f64>()
            .unwrap_or(0.0)
            / 1024.0
            / 1024.0,
        kernel: fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_string(),
        versions: kinds
            .iter()
            .map(|k| (k.name().to_string(), servers::version(*k, bins)))
            .collect(),
        dnsperf_version: dnsperf_version(),
        heron_build: heron_build(&args.heron),
        heron_binary: args.heron.display().to_string(),
        quota: args.quota,
        period_us: args.period_us,
        cgroup: match flavor {
            CgroupFlavor::V1 { .. } if realtime => {
                "v1, real-time bandwidth (cpu.rt_runtime_us / cpu.rt_period_us)".into()
            }
            CgroupFlavor::V1 { .. } => {
                "v1, CFS quota (cpu.cfs_quota_us / cpu.cfs_period_us)".into()
            }
            CgroupFlavor::V2 { .. } => "v2, CFS quota (cpu.max)".into(),
        },
        sched: match sched {
            Sched::Realtime(p) => format!("SCHED_RR priority {p} (servers and generator)"),
            Sched::Nice(n) => format!("nice {n} (servers and generator)"),
            Sched::Normal => "normal".into(),
        },
        workers: args.workers,
        server_cpus: args.server_cpus.clone(),
        generator_cpu: args.generator_cpu,
        window: args.window,
        latency_rate: args.latency_rate,
        tcp_clients: args.tcp_clients,
        sizes: Some(sizes.clone()),
        workload_titles: ids
            .iter()
            .map(|i| (i.clone(), workloads::title(i, sizes)))
            .collect(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        loadavg_start: loadavg(),
        ..Meta::default()
    }
}

/// dnsperf's "Version" line.
fn dnsperf_version() -> String {
    Command::new(dnsperf::DNSPERF)
        .arg("-h")
        .output()
        .map(|o| {
            let t = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            t.lines()
                .find(|l| l.starts_with("Version"))
                .unwrap_or("")
                .to_string()
        })
        .unwrap_or_default()
}

/// Reads every zone file just generated once, then writes what that
/// changed back to disk, before any server starts. The suite rewrites its
/// zone files each run, and with `relatime` the first reader of a file
/// newer than its access time updates that time: without this the first
/// server to start on the 100,000-zone workload would pay for 100,000
/// inode updates that the servers after it did not. (The page cache is
/// warmed again right before each server starts: `servers::warm_page_cache`.)
fn settle_files(workloads: &[Workload]) {
    let started = Instant::now();
    let files: std::collections::BTreeSet<&Path> = workloads
        .iter()
        .flat_map(|w| w.zones.iter().map(|(_, file)| file.as_path()))
        .collect();
    for file in &files {
        // A file that cannot be read fails the servers' start, not this.
        let _ = fs::read(file);
    }
    match Command::new("sync").status() {
        Ok(s) if s.success() => println!(
            "{} zone files read once and synced in {:.1} s",
            files.len(),
            started.elapsed().as_secs_f64()
        ),
        other => println!("sync failed ({other:?}); startup figures may include disk writeback"),
    }
}
