//! `heron-bench run`: the whole suite.
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
//! 3. results.json, README.md and the charts.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use clap::Args;
use serde::{Deserialize, Serialize};

use crate::blast::{self, BlastOpts, BlastResult, QuerySet};
use crate::dnsperf::{self, DnsperfOpts, DnsperfResult};
use crate::idle_tcp::{self, IdleTcp};
use crate::paired::{self, Paired, Side};
use crate::report;
use crate::servers::{self, Binaries, Kind, Launch, Sched, Server};
use crate::stats::{Spread, search_rate};
use crate::sys::{self, Cgroup};
use crate::workloads::{self, Sizes, Workload};
use crate::zones;

static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether SIGINT or SIGTERM arrived: measurements stop and the servers
/// are stopped on the way out.
pub fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Pairs of trials in a full run's paired comparison, and seconds per trial.
const PAIRS: usize = 60;
const PAIR_TRIAL_S: f64 = 0.15;

/// Loss allowed for a rate to count as answered.
pub const MAX_LOSS_PCT: f64 = 0.1;
/// Priority of servers and generator under real-time scheduling.
const RT_PRIORITY: i32 = 20;

#[derive(Args, Clone, Debug)]
pub struct RunArgs {
    /// Smoke test: three workloads, short runs (about 2-3 minutes).
    #[arg(long)]
    pub quick: bool,
    /// The Heron binary (release build).
    #[arg(long, default_value = "target/release/heron")]
    pub heron: PathBuf,
    /// Where README.md, results.json and the charts go.
    #[arg(long, default_value = "docs/benchmarks")]
    pub out: PathBuf,
    /// Scratch folder for zones, query files and server state.
    #[arg(long, default_value = "target/bench-data")]
    pub data: PathBuf,
    /// Workers (threads or processes) of every server.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// CPU quota of every server for the capacity figure, in cores.
    #[arg(long, default_value_t = 0.4)]
    pub quota: f64,
    /// Quota period, microseconds.
    #[arg(long, default_value_t = 10_000)]
    pub period_us: u64,
    /// CPUs of the servers (taskset list).
    #[arg(long, default_value = "0")]
    pub server_cpus: String,
    /// CPU of the load generator.
    #[arg(long, default_value_t = 1)]
    pub generator_cpu: usize,
    /// Servers (comma separated): heron, reflector, nsd, knot, bind.
    #[arg(long, value_delimiter = ',')]
    pub servers: Vec<String>,
    /// Workloads (comma separated): root, mix40, small, negative, big,
    /// zones10k, many, tcp.
    #[arg(long, value_delimiter = ',')]
    pub workloads: Vec<String>,
    /// Repeats of each measurement (at least 3).
    #[arg(long)]
    pub repeats: Option<usize>,
    /// Pairs of trials in each paired comparison (at least 5).
    #[arg(long)]
    pub pairs: Option<usize>,
    /// Scheduling: rt (SCHED_RR, quota as cgroup v1 real-time bandwidth;
    /// falls back to a CFS quota at nice -20 where unavailable), nice
    /// (CFS quota, nice -20), normal (CFS quota).
    #[arg(long, default_value = "rt")]
    pub sched: String,
    /// Fixed offered rate for the latency figures, queries per second.
    #[arg(long, default_value_t = 20_000.0)]
    pub latency_rate: f64,
    /// Queries outstanding in the closed-loop capacity runs.
    #[arg(long, default_value_t = 200)]
    pub window: usize,
    /// Profile Heron and the reflector with callgrind (default: in full
    /// mode only).
    #[arg(long)]
    pub profile: Option<bool>,
    /// Only (re)run the callgrind profiles, adding them to the existing
    /// results.json in --out, and regenerate the report.
    #[arg(long)]
    pub profile_only: bool,
    /// Only run the paired comparisons of the chosen servers and
    /// workloads and print them; writes nothing to --out (for checking a
    /// change against the tight ratio targets in a few minutes).
    #[arg(long)]
    pub paired_only: bool,
    /// With --paired-only: a second Heron build to compare --heron with,
    /// in paired trials on each chosen workload (an A/B of two builds).
    #[arg(long, requires = "paired_only")]
    pub baseline: Option<PathBuf>,
    /// TCP clients (connections) of the TCP workload.
    #[arg(long, default_value_t = 1000)]
    pub tcp_clients: usize,
}

/// Lengths of the measurements.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Timing {
    pub repeats: usize,
    pub trial_s: f64,
    pub probe_s: f64,
    pub step_s: f64,
    pub search_steps: usize,
    pub latency_s: f64,
    pub sweep_s: f64,
    pub tcp_s: f64,
    /// Pairs of trials in a paired comparison, and the length of each
    /// trial: short trials, many pairs, so that the host's drift within a
    /// pair is small and the median of many ratios is steady.
    #[serde(default)]
    pub pairs: usize,
    #[serde(default)]
    pub pair_trial_s: f64,
}

impl Timing {
    fn new(quick: bool, repeats: Option<usize>, pairs: Option<usize>) -> Timing {
        if quick {
            Timing {
                repeats: repeats.unwrap_or(3).max(3),
                trial_s: 0.3,
                probe_s: 0.3,
                step_s: 0.25,
                search_steps: 1,
                latency_s: 0.25,
                sweep_s: 0.2,
                tcp_s: 1.0,
                pairs: pairs.unwrap_or(5).max(5),
                pair_trial_s: 0.3,
            }
        } else {
            Timing {
                repeats: repeats.unwrap_or(3).max(3),
                trial_s: 2.0,
                probe_s: 1.5,
                step_s: 1.0,
                search_steps: 4,
                latency_s: 1.5,
                sweep_s: 1.0,
                tcp_s: 3.0,
                pairs: pairs.unwrap_or(PAIRS).max(5),
                pair_trial_s: PAIR_TRIAL_S,
            }
        }
    }
}

/// One measured load.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Trial {
    pub generator: String,
    /// Offered rate asked for (0: closed loop).
    pub target_rate: f64,
    pub window: usize,
    pub offered_qps: f64,
    pub answered_qps: f64,
    pub answered: u64,
    pub loss_pct: f64,
    /// Server CPU seconds (cgroup counter) during the load.
    pub cpu_s: f64,
    /// The same from /proc/PID/stat, as a cross-check.
    pub proc_cpu_s: f64,
    pub wall_s: f64,
    /// Answered queries per server CPU-second.
    pub per_cpu_s: f64,
    /// Server CPU seconds per wall second.
    pub cpu_share: f64,
    pub lat_avg_us: f64,
    pub lat_p99_us: Option<f64>,
    pub server_drops: u64,
    pub client_drops: u64,
    pub nxdomain_pct: f64,
}

/// Repeated trials of one measurement.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Phase {
    pub trials: Vec<Trial>,
    pub per_cpu_s: Spread,
    pub answered_qps: Spread,
    pub loss_pct: Spread,
    pub cpu_share: Spread,
    pub lat_avg_us: Spread,
    pub lat_p99_us: Spread,
    /// The rate the trials ran at (0: closed loop).
    pub rate: f64,
    /// Rate-search probes: (offered rate, loss %).
    pub probes: Vec<(f64, f64)>,
    /// The server used (nearly) all of its CPU allowance.
    pub saturated: bool,
    /// The figure is limited by the load generator, not the server.
    pub generator_bound: bool,
    pub note: String,
}

impl Phase {
    pub(crate) fn from_trials(trials: Vec<Trial>) -> Phase {
        let f = |g: fn(&Trial) -> f64| Spread::of(&trials.iter().map(g).collect::<Vec<_>>());
        Phase {
            per_cpu_s: f(|t| t.per_cpu_s),
            answered_qps: f(|t| t.answered_qps),
            loss_pct: f(|t| t.loss_pct),
            cpu_share: f(|t| t.cpu_share),
            lat_avg_us: f(|t| t.lat_avg_us),
            lat_p99_us: f(|t| t.lat_p99_us.unwrap_or(f64::NAN)),
            trials,
            ..Phase::default()
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RunResult {
    pub server: String,
    pub workload: String,
    pub tcp: bool,
    /// The median of `startup`'s starts (the one figure the targets use);
    /// the one start's time where `startup` is None (the reflector).
    pub startup_s: f64,
    /// Spawn to ready, over the first start and the extra ones after it.
    #[serde(default)]
    pub startup: Option<Spread>,
    pub rss_kib: u64,
    pub pss_kib: u64,
    pub hwm_kib: u64,
    pub capped: Option<Phase>,
    pub uncapped: Option<Phase>,
    pub latency: Option<Phase>,
    /// dnsperf driving the capped server, the cross-check of `capped`.
    pub dnsperf_capped: Option<Phase>,
    /// Server CPU seconds over its whole life, loading included.
    pub total_cpu_s: f64,
    pub error: Option<String>,
}

/// Answered-% against offered rate.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Sweep {
    pub server: String,
    pub workload: String,
    pub capped: bool,
    /// (offered rate asked for, offered rate achieved, answered %).
    pub points: Vec<(f64, f64, f64)>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct EnvCheck {
    /// blast, closed loop, against the uncapped reflector.
    pub blast_closed: Phase,
    /// Highest open-loop rate blast offers with ≤0.1% loss there.
    pub blast_open_max: Option<f64>,
    pub blast_probes: Vec<(f64, f64)>,
    /// dnsperf as fast as it goes against the uncapped reflector.
    pub dnsperf_max: Phase,
    /// Both at one rate both reach.
    pub cross_rate: f64,
    pub cross_blast: Phase,
    pub cross_dnsperf: Phase,
    pub verdict: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Meta {
    pub started: String,
    pub duration_s: f64,
    pub mode: String,
    pub cpu_model: String,
    pub cpus: usize,
    pub mem_gib: f64,
    pub kernel: String,
    pub versions: Vec<(String, String)>,
    pub heron_build: String,
    pub heron_binary: String,
    pub quota: f64,
    pub period_us: u64,
    pub cgroup: String,
    pub sched: String,
    pub workers: usize,
    pub server_cpus: String,
    pub generator_cpu: usize,
    pub window: usize,
    pub latency_rate: f64,
    pub tcp_clients: usize,
    pub sizes: Option<Sizes>,
    pub timing: Option<Timing>,
    pub workload_titles: Vec<(String, String)>,
    pub command: String,
    pub loadavg_start: String,
    pub loadavg_end: String,
    pub dnsperf_version: String,
}

/// Instructions per query from callgrind.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Profile {
    pub server: String,
    pub workload: String,
    pub answered: u64,
    pub instructions: u64,
    pub instructions_per_query: f64,
    /// (function, % of instructions), most first.
    pub top: Vec<(String, f64)>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Results {
    pub meta: Meta,
    pub env: EnvCheck,
    pub runs: Vec<RunResult>,
    pub sweeps: Vec<Sweep>,
    #[serde(default)]
    pub profiles: Vec<Profile>,
    #[serde(default)]
    pub profile_summary: String,
    /// A 10-record change applied to the large zone.
    #[serde(default)]
    pub zone_change: Option<crate::change::ZoneChange>,
    /// Heron reloading the large zone under load, answers checked.
    #[serde(default)]
    pub reload: Option<crate::reload::ReloadUnderLoad>,
    /// Comparisons measured in alternating trials (`paired`).
    #[serde(default)]
    pub paired: Vec<Paired>,
    /// Memory per idle TCP connection, each DNS server.
    #[serde(default)]
    pub idle_tcp: Vec<crate::idle_tcp::IdleTcp>,
}

/// Everything a measurement needs.
pub(crate) struct Ctx {
    pub(crate) args: RunArgs,
    pub(crate) timing: Timing,
    bins: Binaries,
    launch: Launch,
    realtime: bool,
    work: PathBuf,
    gen_cpu: String,
    log: fs::File,
    /// The one cgroup every server runs in, one server at a time (sibling
    /// groups would have to share the real-time bandwidth). A paired
    /// comparison has two servers in it, loaded in turns.
    pub(crate) cg: Cgroup,
}

impl Ctx {
    fn say(&mut self, msg: &str) {
        println!("{msg}");
        let _ = writeln!(self.log, "{msg}");
    }

    pub(crate) fn start(&self, kind: Kind, w: &Workload) -> Result<Server, String> {
        self.start_build(kind, w, None)
    }

    /// Starts `kind`, Heron from `heron` when given rather than --heron.
    pub(crate) fn start_build(
        &self,
        kind: Kind,
        w: &Workload,
        heron: Option<&Path>,
    ) -> Result<Server, String> {
        self.start_with(kind, w, heron, &self.launch)
    }

    /// Starts `kind` as `launch` says, uncapped.
    fn start_with(
        &self,
        kind: Kind,
        w: &Workload,
        heron: Option<&Path>,
        launch: &Launch,
    ) -> Result<Server, String> {
        self.cg
            .set_quota(None)
            .map_err(|e| format!("cgroup quota: {e}"))?;
        let bins = Binaries {
            heron: heron.map_or_else(|| self.bins.heron.clone(), Path::to_path_buf),
            bench: self.bins.bench.clone(),
        };
        Server::start(
            kind,
            &bins,
            &w.zones,
            &w.ready,
            launch,
            Some(&self.cg),
            &self.work,
        )
    }

    /// Runs blast on this thread (pinned to the generator CPU, real-time
    /// while it runs when servers are too).
    fn blast(&self, set: &QuerySet, opts: &BlastOpts) -> Result<BlastResult, String> {
        if self.realtime {
            let _ = sys::set_self_realtime(Some(RT_PRIORITY));
        }
        let r = blast::blast(set, opts).map_err(|e| format!("blast: {e}"));
        if self.realtime {
            let _ = sys::set_self_realtime(None);
        }
        r
    }

    fn dnsperf_opts(
        &self,
        target: std::net::SocketAddr,
        tcp: bool,
        rate: f64,
        seconds: f64,
    ) -> DnsperfOpts {
        DnsperfOpts {
            target,
            tcp,
            clients: if tcp { self.args.tcp_clients } else { 4 },
            outstanding: if tcp {
                self.args.tcp_clients * 2
            } else {
                self.args.window
            },
            rate,
            seconds,
            cpus: Some(self.gen_cpu.clone()),
            realtime: self.realtime.then_some(RT_PRIORITY),
        }
    }
}

fn blast_opts(target: std::net::SocketAddr, rate: f64, window: usize, seconds: f64) -> BlastOpts {
    BlastOpts {
        target,
        rate,
        window: if rate > 0.0 { usize::MAX } else { window },
        duration: Duration::from_secs_f64(seconds),
        drain: Duration::from_millis(300),
        timeout: Duration::from_millis(300),
        ..BlastOpts::default()
    }
}

/// One blast run with the server's CPU time measured around it.
fn udp_trial(
    ctx: &Ctx,
    server: &Server,
    cg: &Cgroup,
    set: &QuerySet,
    opts: &BlastOpts,
) -> Result<Trial, String> {
    if interrupted() {
        return Err("interrupted".into());
    }
    let c0 = server.cpu_seconds(Some(cg));
    let p0 = server.proc_cpu_seconds();
    let t0 = Instant::now();
    let r = ctx.blast(set, opts)?;
    let wall = t0.elapsed().as_secs_f64();
    let cpu = server.cpu_seconds(Some(cg)) - c0;
    let pcpu = server.proc_cpu_seconds() - p0;
    Ok(Trial {
        generator: "blast".into(),
        target_rate: opts.rate,
        window: if opts.rate > 0.0 { 0 } else { opts.window },
        offered_qps: r.offered_qps,
        answered_qps: r.answered_qps,
        answered: r.answered,
        loss_pct: r.loss_pct,
        cpu_s: cpu,
        proc_cpu_s: pcpu,
        wall_s: wall,
        per_cpu_s: r.answered as f64 / cpu.max(1e-9),
        cpu_share: cpu / wall.max(1e-9),
        lat_avg_us: r.lat_avg_us,
        lat_p99_us: Some(r.lat_p99_us),
        server_drops: r.server_drops,
        client_drops: r.client_drops,
        nxdomain_pct: r.nxdomain as f64 * 100.0 / (r.answered.max(1)) as f64,
    })
}

fn dnsperf_trial(
    ctx: &Ctx,
    server: Option<(&Server, &Cgroup)>,
    opts: &DnsperfOpts,
    queries: &Path,
) -> Result<(Trial, DnsperfResult), String> {
    if interrupted() {
        return Err("interrupted".into());
    }
    let c0 = server.map(|(s, cg)| (s.cpu_seconds(Some(cg)), s.proc_cpu_seconds()));
    let t0 = Instant::now();
    let r = dnsperf::run(opts, queries)?;
    let wall = t0.elapsed().as_secs_f64();
    let (cpu, pcpu) = match (server, c0) {
        (Some((s, cg)), Some((c, p))) => (s.cpu_seconds(Some(cg)) - c, s.proc_cpu_seconds() - p),
        _ => (0.0, 0.0),
    };
    let _ = ctx;
    Ok((
        Trial {
            generator: "dnsperf".into(),
            target_rate: opts.rate,
            window: opts.outstanding,
            offered_qps: r.sent as f64 / r.run_s.max(1e-9),
            answered_qps: r.qps,
            answered: r.completed,
            loss_pct: r.loss_pct(),
            cpu_s: cpu,
            proc_cpu_s: pcpu,
            wall_s: wall,
            per_cpu_s: if cpu > 0.0 {
                r.completed as f64 / cpu
            } else {
                0.0
            },
            cpu_share: cpu / wall.max(1e-9),
            lat_avg_us: r.lat_avg_us,
            lat_p99_us: None,
            server_drops: 0,
            client_drops: 0,
            nxdomain_pct: 0.0,
        },
        r,
    ))
}

pub(crate) fn settle() {
    std::thread::sleep(Duration::from_millis(100));
}

/// Capacity under the quota: closed-loop trials; a trial with more than
/// 0.1% loss is run again with half the window (bounded).
fn capacity_phase(
    ctx: &Ctx,
    server: &Server,
    cg: &Cgroup,
    set: &QuerySet,
) -> Result<Phase, String> {
    let mut trials = Vec::new();
    let mut window = ctx.args.window;
    let mut notes = Vec::new();
    for _ in 0..ctx.timing.repeats {
        trials.push(capacity_trial(
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
pub(crate) fn capacity_trial(
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

/// Highest open-loop rate with ≤0.1% loss: a closed-loop probe gives the
/// scale, a bisection the rate, then repeated trials at it.
/// Probes of a rate search: (offered q/s, loss %).
type Probes = Vec<(f64, f64)>;

/// Bisects open-loop offered rates in `range` for the highest one the
/// server answers with at most MAX_LOSS_PCT loss; returns it (if any) and
/// every probe as (offered q/s, loss %).
fn loss_free_rate(
    ctx: &Ctx,
    server: &Server,
    cg: &Cgroup,
    set: &QuerySet,
    range: (f64, f64),
    steps: usize,
) -> Result<(Option<f64>, Probes), String> {
    let mut probes = Vec::new();
    let mut err = None;
    let (best, _) = search_rate(range.0, range.1, steps, |rate| {
        match udp_trial(
            ctx,
            server,
            cg,
            set,
            &blast_opts(server.addr, rate, 0, ctx.timing.step_s),
        ) {
            Ok(t) => {
                probes.push((t.offered_qps, t.loss_pct));
                settle();
                t.loss_pct <= MAX_LOSS_PCT && t.offered_qps >= 0.97 * rate
            }
            Err(e) => {
                err = Some(e);
                false
            }
        }
    });
    match err {
        Some(e) => Err(e),
        None => Ok((best, probes)),
    }
}

fn max_rate_phase(
    ctx: &Ctx,
    server: &Server,
    cg: &Cgroup,
    set: &QuerySet,
    ceiling: Option<f64>,
) -> Result<Phase, String> {
    let probe = udp_trial(
        ctx,
        server,
        cg,
        set,
        &blast_opts(server.addr, 0.0, ctx.args.window, ctx.timing.probe_s),
    )?;
    settle();
    let sat = probe.answered_qps.max(1000.0);
    let (best, probes) = loss_free_rate(
        ctx,
        server,
        cg,
        set,
        (0.6 * sat, 1.1 * sat),
        ctx.timing.search_steps,
    )?;
    let rate = best.unwrap_or(0.3 * sat);
    let mut trials = Vec::new();
    for _ in 0..ctx.timing.repeats {
        trials.push(udp_trial(
            ctx,
            server,
            cg,
            set,
            &blast_opts(server.addr, rate, 0, ctx.timing.trial_s),
        )?);
        settle();
    }
    let mut p = Phase::from_trials(trials);
    p.rate = rate;
    p.probes = probes;
    p.saturated = p.cpu_share.median >= 0.9;
    let gen_limit = ceiling.is_some_and(|c| rate >= 0.9 * c)
        || p.trials.iter().any(|t| t.offered_qps < 0.97 * rate);
    p.generator_bound = gen_limit && !p.saturated;
    let mut notes = Vec::new();
    if best.is_none() {
        notes.push(format!("no probed rate had ≤{MAX_LOSS_PCT}% loss"));
    }
    if p.generator_bound {
        notes.push("at the generator's ceiling: the server had CPU to spare".into());
    }
    p.note = notes.join("; ");
    Ok(p)
}

fn latency_phase(ctx: &Ctx, server: &Server, cg: &Cgroup, set: &QuerySet) -> Result<Phase, String> {
    let mut trials = Vec::new();
    for _ in 0..ctx.timing.repeats {
        trials.push(udp_trial(
            ctx,
            server,
            cg,
            set,
            &blast_opts(server.addr, ctx.args.latency_rate, 0, ctx.timing.latency_s),
        )?);
        settle();
    }
    let mut p = Phase::from_trials(trials);
    p.rate = ctx.args.latency_rate;
    Ok(p)
}

fn sweep(
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

fn dnsperf_phase(
    ctx: &Ctx,
    server: Option<(&Server, &Cgroup)>,
    opts: &DnsperfOpts,
    queries: &Path,
    repeats: usize,
) -> Result<Phase, String> {
    let mut trials = Vec::new();
    for _ in 0..repeats {
        trials.push(dnsperf_trial(ctx, server, opts, queries)?.0);
        settle();
    }
    let mut p = Phase::from_trials(trials);
    p.rate = opts.rate;
    Ok(p)
}

/// Rates of the answered-% chart: fractions of the capped reflector's
/// capacity (so every server's knee shows), or fixed steps.
fn sweep_rates(reference: f64) -> Vec<f64> {
    [0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.5]
        .iter()
        .map(|f| (f * reference / 1000.0).round() * 1000.0)
        .collect()
}

/// Starts `kind` on `w`, runs `phases` with it under the server's cgroup,
/// and records startup, memory and CPU; an error from a phase is recorded
/// in the result, not raised.
fn with_server(
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

/// The one-line summary of a capacity phase.
fn print_capped(quota: f64, capped: &Phase) {
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

fn measure_udp(
    ctx: &mut Ctx,
    kind: Kind,
    w: &Workload,
    set: &QuerySet,
    env: &EnvCheck,
    sweep_ref: Option<f64>,
    sweeps: &mut Vec<Sweep>,
) -> RunResult {
    with_server(ctx, kind, w, false, |ctx, server, rr| {
        let quota = ctx.args.quota;
        let cg = &ctx.cg;
        cg.set_quota(Some(quota))
            .map_err(|e| format!("cgroup quota: {e}"))?;
        settle();
        let capped = capacity_phase(ctx, server, cg, set)?;
        print_capped(quota, &capped);
        rr.capped = Some(capped);
        if matches!(w.id.as_str(), "root" | "mix40") {
            let o = ctx.dnsperf_opts(server.addr, false, 0.0, ctx.timing.trial_s.max(0.5));
            let d = dnsperf_phase(ctx, Some((server, cg)), &o, &w.queries, 1)?;
            println!(
                "    capped, dnsperf: {:.0} answered/CPU-s, {:.0} q/s, loss {:.3}%",
                d.per_cpu_s.median, d.answered_qps.median, d.loss_pct.median
            );
            rr.dnsperf_capped = Some(d);
        }
        if let Some(reference) = sweep_ref {
            let pts = sweep(ctx, server, cg, set, &sweep_rates(reference))?;
            sweeps.push(Sweep {
                server: kind.name().into(),
                workload: w.id.clone(),
                capped: true,
                points: pts,
            });
        }
        cg.set_quota(None)
            .map_err(|e| format!("cgroup quota: {e}"))?;
        settle();
        let unc = max_rate_phase(ctx, server, cg, set, env.blast_open_max)?;
        println!(
            "    uncapped: {:.0} q/s with ≤0.1% loss (loss {:.3}%, CPU share {:.2}){}",
            unc.rate,
            unc.loss_pct.median,
            unc.cpu_share.median,
            if unc.generator_bound {
                " generator-bound"
            } else {
                ""
            }
        );
        rr.uncapped = Some(unc);
        let lat = latency_phase(ctx, server, cg, set)?;
        println!(
            "    latency at {:.0} q/s: avg {:.1} us, p99 {:.1} us",
            lat.rate, lat.lat_avg_us.median, lat.lat_p99_us.median
        );
        rr.latency = Some(lat);
        Ok(())
    })
}

fn measure_tcp(ctx: &mut Ctx, kind: Kind, w: &Workload) -> RunResult {
    with_server(ctx, kind, w, true, |ctx, server, rr| {
        let quota = ctx.args.quota;
        let cg = &ctx.cg;
        cg.set_quota(Some(quota))
            .map_err(|e| format!("cgroup quota: {e}"))?;
        settle();
        let o = ctx.dnsperf_opts(server.addr, true, 0.0, ctx.timing.tcp_s);
        let mut capped =
            dnsperf_phase(ctx, Some((server, cg)), &o, &w.queries, ctx.timing.repeats)?;
        capped.saturated = capped.cpu_share.median >= 0.85 * quota;
        capped.generator_bound = !capped.saturated;
        if !capped.saturated {
            capped.note = format!(
                "server used {:.0}% of its {:.0}% quota: not saturated",
                capped.cpu_share.median * 100.0,
                quota * 100.0
            );
        }
        print_capped(quota, &capped);
        rr.capped = Some(capped);
        cg.set_quota(None)
            .map_err(|e| format!("cgroup quota: {e}"))?;
        settle();
        let mut unc = dnsperf_phase(ctx, Some((server, cg)), &o, &w.queries, ctx.timing.repeats)?;
        unc.rate = unc.answered_qps.median;
        unc.saturated = unc.cpu_share.median >= 0.9;
        unc.generator_bound = !unc.saturated;
        if unc.generator_bound {
            unc.note = "dnsperf's ceiling: the server had CPU to spare".into();
        }
        println!(
            "    uncapped: {:.0} q/s (loss {:.3}%, CPU share {:.2})",
            unc.answered_qps.median, unc.loss_pct.median, unc.cpu_share.median
        );
        rr.uncapped = Some(unc);
        let lo = ctx.dnsperf_opts(server.addr, true, ctx.args.latency_rate, ctx.timing.tcp_s);
        let lat = dnsperf_phase(ctx, Some((server, cg)), &lo, &w.queries, ctx.timing.repeats)?;
        println!(
            "    latency at {:.0} q/s: avg {:.1} us",
            lat.rate, lat.lat_avg_us.median
        );
        rr.latency = Some(lat);
        Ok(())
    })
}

fn env_check(ctx: &mut Ctx, w: &Workload, set: &QuerySet) -> Result<EnvCheck, String> {
    let mut env = EnvCheck::default();
    let server = ctx.start(Kind::Reflector, w)?;
    let cg = &ctx.cg;
    let mut trials = Vec::new();
    for _ in 0..ctx.timing.repeats {
        trials.push(udp_trial(
            ctx,
            &server,
            cg,
            set,
            &blast_opts(server.addr, 0.0, ctx.args.window, ctx.timing.trial_s),
        )?);
        settle();
    }
    env.blast_closed = Phase::from_trials(trials);
    let sat = env.blast_closed.answered_qps.median;
    let (best, probes) = loss_free_rate(
        ctx,
        &server,
        cg,
        set,
        (0.6 * sat, 1.3 * sat),
        ctx.timing.search_steps + 1,
    )?;
    env.blast_open_max = best;
    env.blast_probes = probes;
    let o = ctx.dnsperf_opts(server.addr, false, 0.0, ctx.timing.trial_s.max(0.5));
    env.dnsperf_max = dnsperf_phase(ctx, Some((&server, cg)), &o, &w.queries, ctx.timing.repeats)?;
    let common = env.dnsperf_max.answered_qps.median.min(best.unwrap_or(sat));
    env.cross_rate = ((common * 0.5) / 1000.0).round().max(1.0) * 1000.0;
    let mut trials = Vec::new();
    for _ in 0..ctx.timing.repeats {
        trials.push(udp_trial(
            ctx,
            &server,
            cg,
            set,
            &blast_opts(server.addr, env.cross_rate, 0, ctx.timing.trial_s),
        )?);
        settle();
    }
    env.cross_blast = Phase::from_trials(trials);
    let o = ctx.dnsperf_opts(
        server.addr,
        false,
        env.cross_rate,
        ctx.timing.trial_s.max(0.5),
    );
    env.cross_dnsperf =
        dnsperf_phase(ctx, Some((&server, cg)), &o, &w.queries, ctx.timing.repeats)?;
    let refl_share = env.blast_closed.cpu_share.median;
    let blast_ceiling = env.blast_closed.answered_qps.median;
    let dp = env.dnsperf_max.answered_qps.median;
    let mut v = vec![format!(
        "blast reached {:.0} q/s closed-loop (open-loop ≤0.1% loss: {}) with the reflector at {:.0}% of a core; dnsperf reached {:.0} q/s ({:.2}× blast).",
        blast_ceiling,
        best.map_or("none".into(), |b| format!("{b:.0} q/s")),
        refl_share * 100.0,
        dp,
        dp / blast_ceiling.max(1.0)
    )];
    if refl_share < 0.9 {
        v.push(
            "The uncapped reflector was not saturated: the generator is the ceiling of uncapped figures, which are reported as generator-bound when they reach it; capacity is therefore measured with the server's CPU capped."
                .into(),
        );
    }
    if dp < 0.9 * blast_ceiling {
        v.push("dnsperf is slower than blast here, so blast drives the UDP figures.".into());
    }
    env.verdict = v.join(" ");
    println!("  {}", env.verdict);
    Ok(env)
}

fn read_first_line(path: &str, key: &str) -> String {
    fs::read_to_string(path)
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with(key))
                .map(|l| l.split_once(':').map_or(l, |x| x.1).trim().to_string())
        })
        .unwrap_or_default()
}

/// Which Heron was measured: the commit checked out (and whether it had
/// changes) and when the binary was built.
pub fn heron_build(heron: &Path) -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    let commit = git(&["rev-parse", "--short", "HEAD"]);
    let dirty = !git(&["status", "--porcelain", "--untracked-files=no"]).is_empty();
    let built = fs::metadata(heron)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(String::new(), |d| utc(d.as_secs()));
    format!(
        "commit {commit}{}, binary built {built}",
        if dirty {
            " with uncommitted changes"
        } else {
            ""
        }
    )
}

/// "YYYY-MM-DD HH:MM UTC" from Unix seconds.
pub fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let (h, m) = ((secs % 86_400) / 3600, (secs % 3600) / 60);
    let (y, mo, d) = heron_proto::rdata::civil_from_days(days);
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{m:02} UTC")
}

pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The 1, 5 and 15 minute load averages.
pub fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

impl RunArgs {
    /// The same arguments with every path made absolute: servers run with
    /// their own working directories, where a relative path means nothing.
    pub fn with_absolute_paths(mut self) -> Result<RunArgs, String> {
        for path in [&mut self.heron, &mut self.out, &mut self.data] {
            *path = std::path::absolute(&*path).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        Ok(self)
    }
}

pub fn run(args: &RunArgs) -> Result<(), String> {
    let started = Instant::now();
    heron_sys::process::set_on_termination(&INTERRUPTED).map_err(|e| e.to_string())?;
    if !heron_sys::process::is_root() {
        return Err("the suite needs root: it sets cgroup CPU quotas and scheduling".into());
    }
    let flavor = sys::detect_cgroup().ok_or(
        "no cgroup CPU controller found (neither v1 `cpu` nor v2 with `cpu` in cgroup.controllers)",
    )?;
    let mut timing = Timing::new(args.quick, args.repeats, args.pairs);
    let mut ids: Vec<String> = if args.workloads.is_empty() {
        if args.quick {
            vec!["root".into(), "mix40".into(), "tcp".into()]
        } else {
            workloads::ALL.iter().map(|s| s.to_string()).collect()
        }
    } else {
        args.workloads.clone()
    };
    ids.dedup();
    let kinds: Vec<Kind> = if args.servers.is_empty() {
        Kind::ALL.to_vec()
    } else {
        args.servers
            .iter()
            .map(|s| Kind::parse(s).ok_or(format!("unknown server {s}")))
            .collect::<Result<_, _>>()?
    };
    let bins = Binaries {
        heron: args.heron.clone(),
        bench: std::env::current_exe().map_err(|e| e.to_string())?,
    };
    for k in &kinds {
        if !servers::available(*k, &bins) {
            return Err(format!(
                "{} is not installed (bench/run.sh installs the Debian packages; build Heron with cargo build --release -p heron)",
                k.name()
            ));
        }
    }
    if !Path::new(dnsperf::DNSPERF).exists() {
        return Err("dnsperf is not installed (apt-get install dnsperf)".into());
    }
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
    let sizes = if args.quick {
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
    };
    println!(
        "generating workloads {} into {}",
        ids.join(", "),
        args.data.display()
    );
    let mut wl = workloads::generate(&args.data, zones::DEFAULT_SEED, &sizes, &ids, true, true)
        .map_err(|e| format!("generating workloads: {e}"))?;
    if !ids.iter().any(|i| i == "root") {
        // The environment check uses the root-like queries.
        wl.extend(
            workloads::generate(
                &args.data,
                zones::DEFAULT_SEED,
                &sizes,
                &["root".into()],
                true,
                true,
            )
            .map_err(|e| format!("generating workloads: {e}"))?
            .into_iter()
            .map(|mut w| {
                w.id = "env".into();
                w
            }),
        );
    }
    settle_files(&wl);
    let launch = Launch {
        workers: args.workers,
        cpus: args.server_cpus.clone(),
        ready_timeout: Duration::from_secs(900),
        wrapper: Vec::new(),
        sched,
        tcp_clients_max: servers::TCP_CLIENTS_MAX,
    };
    let cg_name = format!("heron-bench-{}", std::process::id());
    let cg = Cgroup::create(&flavor, &cg_name, args.period_us, realtime)
        .map_err(|e| format!("cannot create cgroup {cg_name}: {e}"))?;
    let mut ctx = Ctx {
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
    let mut results = Results::default();
    let m = &mut results.meta;
    m.started = utc(now_secs());
    m.mode = if args.quick { "quick" } else { "full" }.into();
    m.cpu_model = read_first_line("/proc/cpuinfo", "model name");
    // Not available_parallelism: this process is pinned to one CPU.
    m.cpus = heron_sys::cpu::online_cpus();
    m.mem_gib = read_first_line("/proc/meminfo", "MemTotal")
        .trim_end_matches(" kB")
        .trim()
        .parse::<f64>()
        .unwrap_or(0.0)
        / 1024.0
        / 1024.0;
    m.kernel = fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string();
    m.versions = kinds
        .iter()
        .map(|k| (k.name().to_string(), servers::version(*k, &bins)))
        .collect();
    m.dnsperf_version = std::process::Command::new(dnsperf::DNSPERF)
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
        .unwrap_or_default();
    m.heron_build = heron_build(&args.heron);
    m.heron_binary = args.heron.display().to_string();
    m.quota = args.quota;
    m.period_us = args.period_us;
    m.cgroup = match &flavor {
        sys::CgroupFlavor::V1 { .. } if realtime => {
            "v1, real-time bandwidth (cpu.rt_runtime_us / cpu.rt_period_us)".into()
        }
        sys::CgroupFlavor::V1 { .. } => {
            "v1, CFS quota (cpu.cfs_quota_us / cpu.cfs_period_us)".into()
        }
        sys::CgroupFlavor::V2 { .. } => "v2, CFS quota (cpu.max)".into(),
    };
    m.sched = match sched {
        Sched::Realtime(p) => format!("SCHED_RR priority {p} (servers and generator)"),
        Sched::Nice(n) => format!("nice {n} (servers and generator)"),
        Sched::Normal => "normal".into(),
    };
    m.workers = args.workers;
    m.server_cpus = args.server_cpus.clone();
    m.generator_cpu = args.generator_cpu;
    m.window = args.window;
    m.latency_rate = args.latency_rate;
    m.tcp_clients = args.tcp_clients;
    m.sizes = Some(sizes.clone());
    timing.repeats = timing.repeats.max(3);
    m.timing = Some(timing.clone());
    m.workload_titles = ids
        .iter()
        .map(|i| (i.clone(), workloads::title(i, &sizes)))
        .collect();
    m.command = std::env::args().collect::<Vec<_>>().join(" ");
    m.loadavg_start = loadavg();

    if args.profile_only {
        let json_path = args.out.join("results.json");
        let text =
            fs::read_to_string(&json_path).map_err(|e| format!("{}: {e}", json_path.display()))?;
        let mut old: Results =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", json_path.display()))?;
        old.profiles.clear();
        run_profiles(&mut ctx, &wl, &mut old);
        let text = serde_json::to_string_pretty(&old).map_err(|e| e.to_string())?;
        fs::write(&json_path, text).map_err(|e| format!("{}: {e}", json_path.display()))?;
        return report::write_all(&old, &args.out);
    }
    if args.paired_only {
        run_paired(&mut ctx, &wl, &kinds, &mut results);
        return Ok(());
    }
    let env_w = wl
        .iter()
        .find(|w| w.id == "root" || w.id == "env")
        .cloned()
        .ok_or("no root workload")?;
    let env_set = QuerySet::load(&env_w.queries)?;
    ctx.say("environment check: generator ceilings against the reflector (uncapped)");
    results.env = env_check(&mut ctx, &env_w, &env_set)?;
    let json_path = args.out.join("results.json");
    let save = |r: &Results| -> Result<(), String> {
        let text = serde_json::to_string_pretty(r).map_err(|e| e.to_string())?;
        fs::write(&json_path, text).map_err(|e| format!("{}: {e}", json_path.display()))
    };
    save(&results)?;
    for w in wl.iter().filter(|w| w.id != "env") {
        ctx.say(&format!("workload {}: {}", w.id, w.title));
        let set = if w.tcp {
            None
        } else {
            Some(QuerySet::load(&w.queries)?)
        };
        let mut sweep_ref = None;
        for &kind in &kinds {
            if w.tcp && kind == Kind::Reflector {
                continue;
            }
            let rr = match &set {
                Some(set) => {
                    let want_sweep = w.id == "root";
                    let rr = measure_udp(
                        &mut ctx,
                        kind,
                        w,
                        set,
                        &results.env,
                        if want_sweep {
                            sweep_ref.or(Some(
                                results.env.blast_closed.answered_qps.median * args.quota,
                            ))
                        } else {
                            None
                        },
                        &mut results.sweeps,
                    );
                    if kind == Kind::Reflector
                        && let Some(c) = &rr.capped
                    {
                        sweep_ref = Some(c.answered_qps.median);
                    }
                    rr
                }
                None => measure_tcp(&mut ctx, kind, w),
            };
            if let Some(e) = &rr.error {
                ctx.say(&format!("  {} on {}: ERROR {e}", kind.name(), w.id));
            }
            results.runs.push(rr);
            save(&results)?;
            if interrupted() {
                return Err("interrupted; partial results in results.json".into());
            }
        }
    }
    run_paired(&mut ctx, &wl, &kinds, &mut results);
    save(&results)?;
    if let Some(w) = wl.iter().find(|w| w.tcp) {
        results.idle_tcp = idle_connections(&mut ctx, w, &kinds);
        save(&results)?;
    }
    if let Some((origin, file)) = wl.iter().find(|w| w.id == "big").map(|w| &w.zones[0]) {
        ctx.say("zone change: applying 10 records to the large zone");
        match crate::change::measure(file, origin, 10, timing.repeats.max(5)) {
            Ok(c) => {
                ctx.say(&format!(
                    "  {:.2} ms (median), {} bytes not shared with the previous version",
                    c.apply_ms.median, c.extra_bytes
                ));
                results.zone_change = Some(c);
            }
            Err(e) => ctx.say(&format!("  zone change: ERROR {e}")),
        }
        save(&results)?;
    }
    let heron_big = results
        .runs
        .iter()
        .find(|x| x.server == "Heron" && x.workload == "big")
        .and_then(|x| x.uncapped.as_ref().map(|u| u.rate));
    if let (Some(w), Some(reference)) = (wl.iter().find(|w| w.id == "big"), heron_big) {
        ctx.say("reload under load: Heron, the large zone, one record changed per reload");
        match reload_under_load(&ctx, w, reference) {
            Ok(r) => {
                ctx.say(&format!(
                    "  {} reloads at {:.0} q/s: {} sent, {} lost, {} wrong, {} stale; \
                     change answered {:.0} ms after SIGHUP (median); RSS {} MiB, peak {} MiB",
                    r.reloads,
                    r.offered_qps,
                    r.sent,
                    r.lost,
                    r.wrong,
                    r.stale,
                    r.reload_ms.median,
                    r.steady_rss_kib / 1024,
                    r.peak_rss_kib / 1024
                ));
                results.reload = Some(r);
            }
            Err(e) => ctx.say(&format!("  reload under load: ERROR {e}")),
        }
        save(&results)?;
    }
    if args.profile.unwrap_or(!args.quick) && Path::new(crate::profile::VALGRIND).exists() {
        run_profiles(&mut ctx, &wl, &mut results);
        save(&results)?;
    }
    results.meta.loadavg_end = loadavg();
    results.meta.duration_s = started.elapsed().as_secs_f64();
    save(&results)?;
    report::write_all(&results, &args.out)?;
    println!(
        "done in {:.0} s: {} and the charts in {}",
        results.meta.duration_s,
        args.out.join("README.md").display(),
        args.out.display()
    );
    Ok(())
}

/// Each DNS server holding idle TCP connections ([`crate::idle_tcp`]),
/// configured to accept a few more than the most it is sent.
fn idle_connections(ctx: &mut Ctx, w: &Workload, kinds: &[Kind]) -> Vec<IdleTcp> {
    let counts = if ctx.args.quick {
        idle_tcp::QUICK_COUNTS
    } else {
        idle_tcp::COUNTS
    };
    let most = counts.iter().copied().max().unwrap_or(0);
    ctx.say(&format!(
        "idle TCP connections: memory with {} held",
        counts.map(|c| c.to_string()).join(" and ")
    ));
    let launch = Launch {
        tcp_clients_max: most + most / 10,
        ..ctx.launch.clone()
    };
    let mut all = Vec::new();
    for &kind in kinds.iter().filter(|k| k.is_dns()) {
        let idle = ctx
            .start_with(kind, w, None, &launch)
            .and_then(|server| {
                let origin = w.ready.first().map_or(".", String::as_str);
                idle_tcp::measure(server.addr, origin, &counts, &server)
            })
            .unwrap_or_else(|e| IdleTcp {
                error: Some(e),
                ..IdleTcp::default()
            });
        let idle = IdleTcp {
            server: kind.name().into(),
            ..idle
        };
        for p in &idle.points {
            ctx.say(&format!(
                "  {}: {} held of {} ({} opened), PSS {} -> {} KiB, {:.0} bytes each; \
                 new TCP answered {}, UDP answered {}",
                kind.name(),
                p.held,
                p.connections,
                p.opened,
                idle.base_pss_kib,
                p.pss_kib,
                p.bytes_per_connection,
                p.new_tcp_answered,
                p.udp_answered
            ));
        }
        if let Some(e) = &idle.error {
            ctx.say(&format!("  {}: ERROR {e}", kind.name()));
        }
        all.push(idle);
        if interrupted() {
            break;
        }
    }
    all
}

/// The comparisons whose targets ask for a precision that separate runs
/// on a drifting machine cannot give, each measured in alternating trials
/// ([`paired`]): Heron against the reflector, NSD and Knot (root, mix40),
/// and Heron on the large zone and on many zones against Heron on the
/// small one.
fn run_paired(ctx: &mut Ctx, wl: &[Workload], kinds: &[Kind], results: &mut Results) {
    let baseline = ctx.args.baseline.clone();
    let pairs = match &baseline {
        Some(_) => wl
            .iter()
            .map(|w| ((Kind::Heron, w), (Kind::Heron, w)))
            .collect(),
        None => paired_targets(wl, kinds),
    };
    for ((sk, sw), (rk, rw)) in pairs {
        let compared = QuerySet::load(&sw.queries).and_then(|sq| {
            let rq = QuerySet::load(&rw.queries)?;
            let subject = Side {
                kind: sk,
                workload: sw,
                queries: &sq,
                heron: None,
            };
            let reference = Side {
                kind: rk,
                workload: rw,
                queries: &rq,
                heron: baseline.as_deref(),
            };
            let label = format!(
                "{} {} / {} {}",
                subject.name(),
                sw.id,
                reference.name(),
                rw.id
            );
            ctx.say(&format!("paired trials: {label}"));
            paired::compare(ctx, subject, reference).map(|p| (label, p))
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
                results.paired.push(p);
            }
            Err(e) => ctx.say(&format!("  {} {}: ERROR {e}", sk.name(), sw.id)),
        }
        if interrupted() {
            return;
        }
    }
}

/// The comparisons the targets ask for: Heron against the reflector,
/// NSD and Knot on the root-like and 40% mixes; Heron on the large zone,
/// on 10,000 and on 100,000 zones against Heron on the small zone.
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
    pairs
}

/// (subject, reference) of a paired comparison: a server on a workload each.
type PairOf<'w> = ((Kind, &'w Workload), (Kind, &'w Workload));

/// Heron serving a private copy of the large zone, reloaded a few times
/// with one record changed while queries run at half the loss-free rate
/// it reached in this run (`reference`).
fn reload_under_load(
    ctx: &Ctx,
    w: &Workload,
    reference: f64,
) -> Result<crate::reload::ReloadUnderLoad, String> {
    let (origin, file) = &w.zones[0];
    let dir = ctx.work.join("reload");
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let copy = dir.join(file.file_name().unwrap_or_default());
    fs::copy(file, &copy).map_err(|e| format!("{}: {e}", copy.display()))?;
    let served = vec![(origin.clone(), copy.clone())];
    // Normal scheduling, as operators run it: under a real-time policy the
    // reload could not yield to the query worker.
    let launch = Launch {
        sched: Sched::Normal,
        ..ctx.launch.clone()
    };
    ctx.cg
        .set_quota(None)
        .map_err(|e| format!("cgroup quota: {e}"))?;
    let server = Server::start(
        Kind::Heron,
        &ctx.bins,
        &served,
        &w.ready,
        &launch,
        Some(&ctx.cg),
        &ctx.work,
    )?;
    settle();
    let plan = crate::reload::Plan {
        zone: &copy,
        origin,
        seed: zones::DEFAULT_SEED,
        hosts: w.main_records,
        target: server.addr,
        pid: server.pid,
        reference_qps: reference,
        reloads: if ctx.args.quick { 2 } else { 3 },
        every: Duration::from_secs(12),
    };
    if ctx.realtime {
        let _ = sys::set_self_realtime(Some(RT_PRIORITY));
    }
    let mut result = crate::reload::measure(&plan);
    if ctx.realtime {
        let _ = sys::set_self_realtime(None);
    }
    if let Ok(r) = &mut result {
        let swaps = crate::reload::swap_times_us(&server.log_text());
        r.swap_us = Spread::of(&swaps);
    }
    drop(server);
    let _ = fs::remove_dir_all(&dir);
    result
}

/// Callgrind profiles of Heron and the reflector on the UDP target
/// workloads, and what they say about the per-query cost.
fn run_profiles(ctx: &mut Ctx, wl: &[Workload], results: &mut Results) {
    ctx.say("profiles: callgrind, instructions per query");
    let mut lines = Vec::new();
    let profiled = ["root", "mix40", "small", "negative"];
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
            match crate::profile::profile(
                &ctx.bins,
                kind,
                w,
                &set,
                &ctx.work,
                &ctx.args.server_cpus,
                64,
                if ctx.args.quick { 1.0 } else { 4.0 },
            ) {
                Ok(p) => {
                    ctx.say(&format!(
                        "  {} on {}: {:.0} instructions per query over {} answers",
                        p.server, p.workload, p.instructions_per_query, p.answered
                    ));
                    results.profiles.push(p);
                }
                Err(e) => ctx.say(&format!(
                    "  {} on {}: profile failed: {e}",
                    kind.name(),
                    w.id
                )),
            }
        }
        let ipq = |s: &str| {
            results
                .profiles
                .iter()
                .find(|p| p.server == s && p.workload == w.id)
                .map(|p| p.instructions_per_query)
        };
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
        if let (Some(h), Some(r), Some((ch, cr))) = (ipq("Heron"), ipq("reflector"), caps) {
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
    let heron_ipq = |w: &str| {
        results
            .profiles
            .iter()
            .find(|p| p.server == "Heron" && p.workload == w)
            .map(|p| p.instructions_per_query)
    };
    if let (Some(pos), Some(neg)) = (heron_ipq("small"), heron_ipq("negative")) {
        lines.push(format!(
            "* negative: Heron runs {neg:.0} instructions per negative answer (NXDOMAIN or \
             NODATA, with the SOA) against {pos:.0} per positive answer on the same zone."
        ));
    }
    results.profile_summary = lines.join("\n");
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    #[test]
    fn default_paths_are_made_absolute() {
        // The defaults are relative; servers started in their own working
        // directories could not find configs written under them.
        let args = Cli::parse_from(["heron-bench"]).run;
        assert!(args.heron.is_relative());
        let args = args.with_absolute_paths().unwrap();
        for path in [&args.heron, &args.out, &args.data] {
            assert!(path.is_absolute(), "{}", path.display());
        }
        assert!(args.heron.ends_with("target/release/heron"));
    }
}
