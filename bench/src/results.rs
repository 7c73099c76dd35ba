//! The results schema: what `heron-bench run` writes to results.json and
//! `heron-bench report` reads. The only thing the measurement phases and
//! the report share; neither imports the other.

use serde::{Deserialize, Serialize};

pub use crate::stats::Spread;
pub use crate::workloads::Sizes;

/// Loss allowed for a rate to count as answered.
pub const MAX_LOSS_PCT: f64 = 0.1;

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
    pub zone_change: Option<ZoneChange>,
    /// Heron reloading the large zone under load, answers checked.
    #[serde(default)]
    pub reload: Option<ReloadUnderLoad>,
    /// Comparisons measured in alternating trials (`paired`).
    #[serde(default)]
    pub paired: Vec<Paired>,
    /// Memory per idle TCP connection, each DNS server.
    #[serde(default)]
    pub idle_tcp: Vec<IdleTcp>,
    /// CPU per answered query at fixed rates, every server.
    #[serde(default)]
    pub cost_matrix: Option<CostMatrix>,
    /// Each DNS server offered a multiple of its capacity (issue 24).
    #[serde(default)]
    pub overload: Option<Overload>,
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

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ZoneChange {
    /// Records in the zone changed.
    pub zone_records: usize,
    /// Records deleted plus records added (the SOA aside).
    pub changed_records: usize,
    /// Time to apply the change, milliseconds, one value per repeat.
    pub apply_ms: Spread,
    /// Heap bytes of the new version not shared with the old one.
    pub extra_bytes: usize,
    /// Heap bytes of the zone's nodes.
    pub zone_bytes: usize,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ReloadUnderLoad {
    pub zone_records: usize,
    pub reloads: usize,
    /// The server's highest loss-free rate in this run, and the rate
    /// offered during the reloads (about half of it).
    pub reference_qps: f64,
    pub offered_qps: f64,
    pub sent: u64,
    pub answered: u64,
    pub lost: u64,
    /// Answers with a wrong RCODE or data, and the first few of them.
    pub wrong: u64,
    pub wrong_examples: Vec<String>,
    /// Answers with the changed record's previous value to queries sent
    /// after its new value had been answered: a mix of versions.
    pub stale: u64,
    /// SIGHUP to the first answer carrying the change, per reload.
    pub reload_ms: Spread,
    /// How long the swap of the new version took, as Heron logs it
    /// ("swapped in N us"), per reload.
    #[serde(default)]
    pub swap_us: Spread,
    pub lat_p99_us: f64,
    pub lat_max_us: f64,
    /// Resident memory before the reloads, and the peak during them.
    pub steady_rss_kib: u64,
    pub peak_rss_kib: u64,
}

/// One server's idle-connection figures.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct IdleTcp {
    pub server: String,
    /// Memory with the zone loaded and no connection open.
    pub base_rss_kib: u64,
    pub base_pss_kib: u64,
    pub points: Vec<IdlePoint>,
    pub error: Option<String>,
}

/// The server holding `connections` idle connections.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct IdlePoint {
    pub connections: usize,
    /// Answered when opened.
    pub opened: usize,
    /// Answered again after the memory was read.
    pub held: usize,
    pub rss_kib: u64,
    pub pss_kib: u64,
    /// Growth of PSS over the base, per connection opened.
    pub bytes_per_connection: f64,
    /// A new TCP client answered with these connections held.
    pub new_tcp_answered: bool,
    pub udp_answered: bool,
    /// Seconds to open and get the first answer on the connections added
    /// for this step.
    pub open_s: f64,
}

/// CPU per answered query at fixed offered rates, uncapped
/// (`phases::cost_matrix`): one cell per transport, workload, generator,
/// rate and connection shape, every server measured in each.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CostMatrix {
    pub trials: usize,
    pub trial_s: f64,
    /// The highest rate every server answered with at most
    /// [`MAX_LOSS_PCT`] loss, per workload and worker count, from a short
    /// ramp of `blast` rates: (workload, workers, rate).
    pub max_rates: Vec<(String, usize, f64)>,
    /// Machine busy share (all CPUs) with no load, at the start: what
    /// other processes on a shared machine were using.
    pub idle_busy_share: f64,
    pub cells: Vec<CostCell>,
    pub errors: Vec<String>,
    /// Memory per idle DNS-over-TLS connection, per server.
    #[serde(default)]
    pub idle_tls: Vec<IdleTls>,
}

/// One load shape, every server measured in alternating trials.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CostCell {
    /// "udp" or "tcp".
    pub transport: String,
    pub workload: String,
    /// "blast" or "dnsperf".
    pub generator: String,
    pub rate: f64,
    /// TCP connections (0 for UDP) and queries in flight on each.
    pub connections: usize,
    pub in_flight: usize,
    pub workers: usize,
    /// Whether the rate is the common loss-free maximum.
    pub is_max: bool,
    /// UDP: the clients' shape ("one-socket", "four-sockets", "many";
    /// empty in results from before shapes, which were "four-sockets").
    #[serde(default)]
    pub shape: String,
    /// DoT: queries per connection before a new one (0: no limit).
    #[serde(default)]
    pub queries_per_conn: usize,
    /// DoT from our own client (`tls_conn`): sessions resumed with a
    /// ticket (true) or every handshake a new session (false); None:
    /// dnsperf, which decides itself.
    #[serde(default)]
    pub tls_resume: Option<bool>,
    pub servers: Vec<CostServer>,
}

/// One server's trials in a cell, in the order they ran.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CostServer {
    /// "Heron", "Heron, paced", "NSD", ...
    pub name: String,
    pub trials: Vec<CostTrial>,
}

/// One measured window.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CostTrial {
    /// Which round of the cell it ran in (alternating servers).
    pub round: usize,
    pub offered_qps: f64,
    pub answered_qps: f64,
    pub answered: u64,
    pub loss_pct: f64,
    pub wall_s: f64,
    /// CPU time of every thread and process of the server: the run time
    /// that utime + stime split (/proc/PID/task/TID/schedstat, in ns).
    pub server_cpu_s: f64,
    /// The same from utime + stime (/proc/PID/stat, clock ticks).
    #[serde(default)]
    pub server_ticks_cpu_s: f64,
    /// Busy time of every CPU over the window: the time outside their
    /// idle states (cpuidle), else /proc/stat's user, nice, system, irq
    /// and softirq (`sys::machine_busy_seconds`).
    pub machine_cpu_s: f64,
    /// The generator's own CPU time (its thread or process).
    pub generator_cpu_s: f64,
    /// blast: the time its loop spent in turns that sent or received
    /// (the rest it spun idle: time to spare).
    #[serde(default)]
    pub generator_busy_s: f64,
    /// Seconds the generator ran before the measured window (DoT on open
    /// connections: their handshakes), 0 where the window is the run.
    #[serde(default)]
    pub warmup_s: f64,
    /// DoT from our own client: connections made, and those resumed.
    #[serde(default)]
    pub tls_connections: u64,
    #[serde(default)]
    pub tls_resumed: u64,
}

impl CostTrial {
    /// Server CPU microseconds per answered query.
    pub fn server_us(&self) -> f64 {
        self.server_cpu_s * 1e6 / self.answered.max(1) as f64
    }

    /// Whole-machine CPU microseconds per answered query.
    pub fn machine_us(&self) -> f64 {
        self.machine_cpu_s * 1e6 / self.answered.max(1) as f64
    }
}

/// Each DNS server under its CPU quota, offered `factor` times its own
/// measured capacity for `seconds`, over UDP and over TCP
/// (`phases::overload`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Overload {
    pub factor: f64,
    pub seconds: f64,
    /// Length of each recovery window, seconds, and the rate offered in
    /// them as a share of capacity.
    pub window_s: f64,
    pub recovery_share: f64,
    pub servers: Vec<OverloadServer>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct OverloadServer {
    pub server: String,
    pub udp: Option<OverloadRun>,
    pub tcp: Option<OverloadRun>,
    /// The server process was still running at the end.
    pub alive: bool,
    /// And still answered a UDP query then.
    pub answers_at_end: bool,
    pub errors: Vec<String>,
}

/// One transport's overload.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct OverloadRun {
    /// TCP connections the generator used (0: UDP).
    pub connections: usize,
    /// Answered q/s under the quota with a load the server keeps up with.
    pub capacity_qps: f64,
    /// Offered rate asked for, and what the generator achieved.
    pub target_qps: f64,
    pub offered_qps: f64,
    pub answered_qps: f64,
    /// The generator's CPU over the overload as a share of one core, and
    /// the server's as a share of one core (its quota bounds it).
    pub generator_cpu_share: f64,
    pub server_cpu_share: f64,
    /// Right after the overload: one load per window at
    /// `recovery_share` of capacity, (sent, lost) each.
    pub recovery: Vec<(u64, u64)>,
    pub rss_before_kib: u64,
    pub rss_peak_kib: u64,
    pub rss_after_kib: u64,
    /// The server's CPU quota in this run, cores.
    #[serde(default)]
    pub quota: f64,
    /// UDP: the two capacity figures (the higher is `capacity_qps`):
    /// closed loop, and the highest open-loop rate answered with at most
    /// 0.1% lost; and the bisection's probes as (offered q/s, loss %).
    #[serde(default)]
    pub capacity_closed_qps: f64,
    #[serde(default)]
    pub capacity_open_qps: f64,
    #[serde(default)]
    pub capacity_probes: Vec<(f64, f64)>,
    /// TCP: share of the overload during which queries were due and the
    /// server held every slot of every connection (the generator was
    /// waiting for it, not the other way round).
    #[serde(default)]
    pub slots_taken_share: f64,
    /// UDP, during the overload: datagrams the kernel dropped at the
    /// generator's sockets (answers lost there, not at the server) and at
    /// the server's (queries beyond what it took in).
    #[serde(default)]
    pub client_drops: u64,
    #[serde(default)]
    pub server_drops: u64,
}

impl OverloadRun {
    /// Answered during the overload over capacity.
    pub fn answered_share(&self) -> f64 {
        self.answered_qps / self.capacity_qps.max(1e-9)
    }

    /// Queries lost after the overload stopped, in all recovery windows.
    pub fn lost_after(&self) -> u64 {
        self.recovery.iter().map(|w| w.1).sum()
    }

    /// Recovery windows until the first with at most [`MAX_LOSS_PCT`]
    /// loss (1: the first window was clean), or None if none was.
    pub fn windows_to_recover(&self) -> Option<usize> {
        self.recovery
            .iter()
            .position(|&(sent, lost)| sent > 0 && lost as f64 * 100.0 / sent as f64 <= MAX_LOSS_PCT)
            .map(|i| i + 1)
    }
}

/// Memory per idle DNS-over-TLS connection of one server at one count
/// (`phases::idle_tls`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct IdleTls {
    pub server: String,
    /// Connections asked for, and those that finished the handshake and
    /// had their question answered.
    pub asked: usize,
    pub opened: usize,
    /// Of `opened`, those still open after the memory was read.
    pub still_open: usize,
    pub rss_before_kib: u64,
    pub rss_with_kib: u64,
    /// Seconds the step took to open its connections.
    #[serde(default)]
    pub open_s: f64,
    /// Loopback source addresses the connections came from.
    #[serde(default)]
    pub sources: usize,
    /// The machine's TCP buffer memory (/proc/net/sockstat `TCP: mem`,
    /// pages: both ends of every connection, and anything else on the
    /// machine) before the first connection and with these held.
    #[serde(default)]
    pub tcp_mem_before_pages: u64,
    #[serde(default)]
    pub tcp_mem_with_pages: u64,
    /// The machine's kernel slab memory (/proc/meminfo `Slab:`, KiB: the
    /// socket structures of both ends, which `TCP: mem` leaves out, and
    /// whatever else the machine did) likewise.
    #[serde(default)]
    pub slab_before_kib: u64,
    #[serde(default)]
    pub slab_with_kib: u64,
    /// The machine's TCP sockets (`TCP: alloc`) likewise.
    #[serde(default)]
    pub tcp_sockets_before: u64,
    #[serde(default)]
    pub tcp_sockets_with: u64,
    /// Why the first connection that failed failed.
    #[serde(default)]
    pub first_error: Option<String>,
    /// `heron doctor` on Heron's configuration: "clean", or what it said.
    #[serde(default)]
    pub doctor: Option<String>,
}

impl IdleTls {
    /// Growth of the machine's kernel slab per connection held (both
    /// ends), bytes.
    pub fn slab_bytes_per_connection(&self) -> f64 {
        let grown = self.slab_with_kib.saturating_sub(self.slab_before_kib) as f64 * 1024.0;
        grown / self.opened.max(1) as f64
    }

    /// RSS growth per connection held, bytes.
    pub fn bytes_per_connection(&self) -> f64 {
        let grown = self.rss_with_kib.saturating_sub(self.rss_before_kib) as f64 * 1024.0;
        grown / self.opened.max(1) as f64
    }
}
