//! `heron-bench run`'s arguments, and the lengths of the measurements
//! they choose.

use std::path::PathBuf;

use clap::Args;

use crate::results::Timing;

/// Pairs of trials in a full run's paired comparison, and seconds per trial.
const PAIRS: usize = 60;

const PAIR_TRIAL_S: f64 = 0.15;

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
    /// With --paired-only: a file of Heron configuration, whole sections
    /// such as `[rrl]` or `[cookies]`, added to the --heron side of each
    /// pair, the other side (the same build, or --baseline) running
    /// without it: an A/B of a setting, the ratio with / without.
    #[arg(long, requires = "paired_only")]
    pub with_config: Option<PathBuf>,
    /// Only run the cost matrix (CPU per answered query at fixed rates,
    /// every server) and write its report; with --quick, fewer cells.
    #[arg(long, conflicts_with_all = ["paired_only", "profile_only"])]
    pub matrix_only: bool,
    /// Worker counts of the cost matrix's UDP rows (default: 1 with
    /// --quick, else 1,2).
    #[arg(long, value_delimiter = ',')]
    pub matrix_workers: Vec<usize>,
    /// Further Heron builds as columns of the matrix's UDP rows, each
    /// NAME=PATH (e.g. the previous release, for an A/B of a change);
    /// repeat the flag for several.
    #[arg(long)]
    pub matrix_heron: Vec<String>,
    /// UDP client shapes of the cost matrix (comma separated: one-socket,
    /// four-sockets, many; default all three).
    #[arg(long, value_delimiter = ',')]
    pub matrix_shapes: Vec<String>,
    /// Tables of the cost matrix (comma separated: udp, tcp, dot, xdp;
    /// default all).
    #[arg(long, value_delimiter = ',')]
    pub matrix_tables: Vec<String>,
    /// Idle DNS-over-TLS connections held per server for memory per
    /// connection in the matrix (default 1,000 with --quick, else 10,000;
    /// 0: none).
    #[arg(long)]
    pub matrix_dot_idle: Option<usize>,
    /// Only hold idle DNS-over-TLS connections to Heron, NSD and BIND
    /// (each started on its own, configured for them) and read memory per
    /// connection; prints each and writes dot-idle.json to --out.
    #[arg(long, conflicts_with_all = ["paired_only", "profile_only", "matrix_only"])]
    pub idle_tls_only: bool,
    /// Idle TLS connections held in turn, each count adding to the one
    /// before (default 10,000,100,000; 1,000 with --quick).
    #[arg(long, value_delimiter = ',')]
    pub idle_tls_counts: Vec<usize>,
    /// Only run the overload phase (every DNS server offered three times
    /// its capacity under the quota, UDP and TCP) and write its report;
    /// with --quick, 5 s and 1,000 connections instead of 30 s and 10,000.
    #[arg(long, conflicts_with_all = ["paired_only", "profile_only", "matrix_only", "idle_tls_only"])]
    pub overload_only: bool,
    /// CPU quota of every server in the overload's TCP cells, in cores
    /// (default: --quota). A lower one leaves the generator more headroom;
    /// under 10%, BIND with 300,000 queries outstanding stopped answering.
    #[arg(long)]
    pub overload_tcp_quota: Option<f64>,
    /// The overload's transports (comma separated: udp, tcp; default both).
    #[arg(long, value_delimiter = ',')]
    pub overload_transports: Vec<String>,
    /// Overload: also run Heron with `udp-coalesce-us = 50` (pacing on;
    /// off by default), as its own rows (an A/B in the same run).
    #[arg(long)]
    pub overload_pacing_ab: bool,
    /// Only run the reload under load against Heron, loaded at half of
    /// --reload-reference queries per second, and print it.
    #[arg(long, conflicts_with_all = ["paired_only", "profile_only", "matrix_only", "overload_only"])]
    pub reload_only: bool,
    /// With --reload-only: Heron's loss-free rate on the large zone (the
    /// full run measures it).
    #[arg(long, default_value_t = 240_000.0)]
    pub reload_reference: f64,
    /// TCP clients (connections) of the TCP workload.
    #[arg(long, default_value_t = 1000)]
    pub tcp_clients: usize,
}

impl RunArgs {
    /// The same arguments with every path made absolute: servers run with
    /// their own working directories, where a relative path means nothing.
    /// The idle TLS counts of `--idle-tls-only`.
    pub fn idle_tls_counts(&self) -> Vec<usize> {
        use crate::phases::idle_tls::{COUNTS, QUICK_COUNTS};
        match (self.idle_tls_counts.is_empty(), self.quick) {
            (false, _) => self.idle_tls_counts.clone(),
            (true, true) => QUICK_COUNTS.to_vec(),
            (true, false) => COUNTS.to_vec(),
        }
    }

    /// The most connections one process of this run holds (idle TLS).
    pub fn most_connections(&self) -> usize {
        let idle = match self.idle_tls_only {
            true => self.idle_tls_counts(),
            false => self.matrix_dot_idle.into_iter().collect(),
        };
        idle.into_iter().max().unwrap_or(0)
    }

    pub fn with_absolute_paths(mut self) -> Result<RunArgs, String> {
        for path in [&mut self.heron, &mut self.out, &mut self.data] {
            *path = std::path::absolute(&*path).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        Ok(self)
    }
}

impl Timing {
    pub fn new(quick: bool, repeats: Option<usize>, pairs: Option<usize>) -> Timing {
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
