//! The measurement phases of `heron-bench run`, one module each; each
//! returns its part of the results ([`crate::results`]). The context and
//! the trials they share are here and in [`trial`].

pub mod capacity;
pub mod change;
pub mod cost_matrix;
pub mod env;
pub mod idle_tcp;
pub mod idle_tls;
pub mod overload;
pub mod paired;
pub mod profile;
pub mod reload;
pub mod startup;
pub mod sweep;
pub mod tcp;
pub mod trial;
pub mod udp;
pub mod uncapped;

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::args::RunArgs;
use crate::blast::{self, BlastOpts, BlastResult, QuerySet};
use crate::blast_tcp::{TcpBlastOpts, blast_tcp};
use crate::dnsperf::DnsperfOpts;
use crate::results::Timing;
use crate::servers::{Binaries, Kind, Launch, Server};
use crate::sys::{self, Cgroup};
use crate::workloads::Workload;

/// Priority of servers and generator under real-time scheduling.
pub(crate) const RT_PRIORITY: i32 = 20;

/// Everything a measurement needs.
pub(crate) struct Ctx {
    pub(crate) args: RunArgs,
    pub(crate) timing: Timing,
    pub(crate) bins: Binaries,
    pub(crate) launch: Launch,
    pub(crate) realtime: bool,
    pub(crate) work: PathBuf,
    pub(crate) gen_cpu: String,
    pub(crate) log: fs::File,
    /// The one cgroup every server runs in, one server at a time (sibling
    /// groups would have to share the real-time bandwidth). A paired
    /// comparison has two servers in it, loaded in turns.
    pub(crate) cg: Cgroup,
}

impl Ctx {
    pub(crate) fn say(&self, msg: &str) {
        println!("{msg}");
        let _ = writeln!(&self.log, "{msg}");
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
    pub(crate) fn start_with(
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
    pub(crate) fn blast(&self, set: &QuerySet, opts: &BlastOpts) -> Result<BlastResult, String> {
        self.as_generator(|| blast::blast(set, opts).map_err(|e| format!("blast: {e}")))
    }

    /// [`Ctx::blast`] over TCP.
    pub(crate) fn blast_tcp(
        &self,
        set: &QuerySet,
        opts: &TcpBlastOpts,
    ) -> Result<BlastResult, String> {
        self.as_generator(|| blast_tcp(set, opts).map_err(|e| format!("blast over TCP: {e}")))
    }

    /// Runs `load` real-time when the servers are.
    pub(crate) fn as_generator<T>(&self, load: impl FnOnce() -> T) -> T {
        if self.realtime {
            let _ = sys::set_self_realtime(Some(RT_PRIORITY));
        }
        let r = load();
        if self.realtime {
            let _ = sys::set_self_realtime(None);
        }
        r
    }

    pub(crate) fn dnsperf_opts(
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
            ..DnsperfOpts::default()
        }
    }
}
