//! The cost matrix (issue 23): server CPU per answered query at fixed
//! offered rates, uncapped, every server in every cell.
//!
//! Each server runs with the run's worker count (one by default, pinned
//! to the server CPU; the generator on its own CPU). All servers of a
//! workload run at once and are loaded in turns, the order rotated each
//! round, so a drift of the machine falls on all of them alike. A trial's
//! server CPU is the run time of every process and thread of the server
//! (/proc: what utime + stime split, in ns; the ticks beside it), the
//! whole machine's busy time (outside the CPUs' idle states, from cpuidle;
//! else /proc/stat) beside it so that
//! work moved into softirq or another thread is not hidden, and the
//! generator's own CPU time, to show it was not the bottleneck.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::Ctx;
use super::trial::{blast_opts, settle};
use crate::blast::QuerySet;
use crate::blast_tcp::TcpBlastOpts;
use crate::client_shape::ClientShape;
use crate::dnsperf::{self, DnsperfOpts};
use crate::interrupt::interrupted;
use crate::results::{CostCell, CostMatrix, CostServer, CostTrial, MAX_LOSS_PCT};
use crate::servers::{Kind, Launch, PairListen, Server, TlsFiles};
use crate::sys;
use crate::workloads::Workload;

/// Heron with UDP pacing on (off by default): what the knob costs or saves.
pub const PACED: &str = "Heron, paced";
/// The `[server]` line of Heron with its UDP pacing on.
pub const PACED_CONFIG: &str = "udp-coalesce-us = 50\n";

/// Offered rates of the ramp that finds the common loss-free maximum.
const RAMP: [f64; 11] = [
    40e3, 60e3, 80e3, 100e3, 120e3, 140e3, 160e3, 180e3, 200e3, 240e3, 280e3,
];

/// TCP connections each server accepts in the matrix (10,000 at most are
/// opened).
const TCP_MAX: usize = 11_000;
/// blast over TCP: the longest wait for the last answers, and for all
/// the connections to open.
const TCP_DRAIN: Duration = Duration::from_secs(2);
const TCP_CONNECT_TIMEOUT: Duration = Duration::from_secs(120);

/// What to measure.
#[derive(Clone, Debug)]
pub struct Plan {
    pub udp_workloads: Vec<String>,
    /// Fixed UDP rates; the common maximum is added per workload.
    pub udp_rates: Vec<f64>,
    /// (connections, queries in flight on each).
    pub tcp_shapes: Vec<(usize, usize)>,
    pub tcp_rates: Vec<f64>,
    pub trials: usize,
    pub trial_s: f64,
    pub ramp_s: f64,
    /// Worker counts; more than one worker uses every CPU, the generator
    /// unpinned.
    pub workers: Vec<usize>,
    pub generators: Vec<Generator>,
    /// Further Heron builds as UDP columns: (name, binary).
    pub extra_herons: Vec<(String, PathBuf)>,
    /// Offered rates of the XDP table (empty: no XDP table).
    pub xdp_rates: Vec<f64>,
    /// UDP client shapes, each a row of every UDP cell.
    pub shapes: Vec<ClientShape>,
    /// DNS over TLS (dnsperf `-m dot`): (connections, in flight) on open
    /// connections at each of `dot_rates`; empty: no DoT table.
    pub dot_shapes: Vec<(usize, usize)>,
    pub dot_rates: Vec<f64>,
    /// The cost of a connection: (queries per connection, offered rate),
    /// over [`DOT_CONN_COST_CONNECTIONS`] connections.
    pub dot_conn_costs: Vec<(usize, f64)>,
    /// Idle TLS connections held to read memory per connection (0: none).
    pub dot_idle: usize,
}

/// Connections of the DoT connection-cost cells.
pub const DOT_CONN_COST_CONNECTIONS: usize = 100;

/// Threads of our own DoT client, each with one connection at a time:
/// enough to keep 2,000 new connections a second going on loopback.
pub const OWN_TLS_CLIENTS: usize = 16;

/// Our own client's connection-cost cells, (queries per connection,
/// offered queries a second): 300 new connections a second, which every
/// server took in full on the suite's machine (NSD and BIND took about
/// 340 a second from these 16 clients: about 45 ms a connection), so
/// that they compare servers at one rate;
/// and 2,000, dnsperf's rate, which only Heron and the floor reached.
const OWN_TLS_CONN_COSTS: [(usize, f64); 4] = [(1, 300.0), (10, 3e3), (1, 2e3), (10, 20e3)];

/// New connections per second in the DoT connection-cost cells: 2,000
/// with a new connection every query or every 10 queries alike.
const DOT_CONN_COSTS: [(usize, f64); 2] = [(1, 2e3), (10, 20e3)];

impl Plan {
    pub fn new(quick: bool, workers: &[usize]) -> Plan {
        let workers = if workers.is_empty() {
            vec![1]
        } else {
            workers.to_vec()
        };
        let generators = vec![Generator::Blast, Generator::Dnsperf];
        if quick {
            Plan {
                udp_workloads: vec!["root".into(), "mix40".into(), "big".into()],
                udp_rates: vec![20e3, 80e3, 120e3],
                tcp_shapes: vec![(100, 1), (100, 10), (1_000, 1), (1_000, 10), (10_000, 1)],
                tcp_rates: vec![20e3],
                trials: 3,
                trial_s: 1.0,
                ramp_s: 0.3,
                workers,
                generators,
                extra_herons: Vec::new(),
                xdp_rates: vec![20e3, 50e3],
                shapes: ClientShape::ALL.to_vec(),
                dot_shapes: vec![(100, 1), (1_000, 1)],
                dot_rates: vec![20e3],
                dot_conn_costs: DOT_CONN_COSTS.to_vec(),
                dot_idle: if quick { 1_000 } else { 10_000 },
            }
        } else {
            Plan {
                udp_workloads: vec!["root".into(), "mix40".into(), "big".into()],
                udp_rates: vec![20e3, 80e3, 120e3],
                tcp_shapes: [100, 1_000, 10_000]
                    .into_iter()
                    .flat_map(|c| [(c, 1), (c, 10)])
                    .collect(),
                tcp_rates: vec![20e3, 80e3],
                trials: 3,
                trial_s: 2.0,
                ramp_s: 0.5,
                workers,
                generators,
                extra_herons: Vec::new(),
                xdp_rates: vec![20e3, 50e3, 80e3],
                shapes: ClientShape::ALL.to_vec(),
                dot_shapes: [100, 1_000, 10_000]
                    .into_iter()
                    .flat_map(|c| [(c, 1), (c, 10)])
                    .collect(),
                dot_rates: vec![20e3, 80e3],
                dot_conn_costs: DOT_CONN_COSTS.to_vec(),
                dot_idle: if quick { 1_000 } else { 10_000 },
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Generator {
    Blast,
    Dnsperf,
}

impl Generator {
    fn name(self) -> &'static str {
        match self {
            Generator::Blast => "blast",
            Generator::Dnsperf => "dnsperf",
        }
    }
}

/// A server column: which program, with which Heron settings.
struct Column {
    name: String,
    kind: Kind,
    heron_server: &'static str,
    /// Another Heron build than the run's.
    heron: Option<PathBuf>,
}

fn columns(kinds: &[Kind], udp: bool, extra_herons: &[(String, PathBuf)]) -> Vec<Column> {
    let column = |name: &str, kind, heron_server, heron: Option<&PathBuf>| Column {
        name: name.into(),
        kind,
        heron_server,
        heron: heron.cloned(),
    };
    let mut out = Vec::new();
    for &kind in kinds.iter().filter(|k| k.is_dns()) {
        out.push(column(kind.name(), kind, "", None));
        if kind == Kind::Heron && udp {
            out.push(column(PACED, kind, PACED_CONFIG, None));
            for (name, path) in extra_herons {
                out.push(column(name, kind, "", Some(path)));
            }
        }
    }
    out
}

/// One load: a generator at a rate, for one trial.
struct Load<'a> {
    generator: Generator,
    rate: f64,
    seconds: f64,
    set: &'a QuerySet,
    queries: &'a Path,
    /// (connections, in flight) for TCP.
    tcp: Option<(usize, usize)>,
    /// The UDP clients' shape.
    shape: ClientShape,
    /// DNS over TLS to the server's TLS listener, with this many queries
    /// per connection (0: no limit).
    dot: Option<usize>,
    /// DoT connections from our own client (`tls_conn`), sessions
    /// resumed or not; None: dnsperf's.
    tls_resume: Option<bool>,
    /// CPUs of dnsperf (None: unpinned).
    gen_cpus: Option<String>,
    /// The server's address on a veth pair and the namespace of its other
    /// end, where dnsperf then runs (the XDP table).
    via: Option<(IpAddr, String)>,
}

/// Runs the matrix as `plan` says; `save` is called after every cell.
pub(crate) fn run(
    ctx: &mut Ctx,
    wl: &[Workload],
    kinds: &[Kind],
    plan: &Plan,
    save: &mut dyn FnMut(&CostMatrix),
) -> CostMatrix {
    let mut m = CostMatrix {
        trials: plan.trials,
        trial_s: plan.trial_s,
        idle_busy_share: idle_busy_share(),
        ..CostMatrix::default()
    };
    ctx.say(&format!(
        "cost matrix: the machine was {:.0}% busy before any load (other processes)",
        m.idle_busy_share * 100.0
    ));
    for &workers in &plan.workers {
        let pinned = workers == 1;
        if !pinned {
            let all: Vec<usize> = (0..heron_sys::cpu::online_cpus()).collect();
            let _ = heron_sys::cpu::pin_current_thread(&all);
        }
        for id in &plan.udp_workloads {
            let Some(w) = wl.iter().find(|w| &w.id == id) else {
                continue;
            };
            if let Err(e) = udp_rows(ctx, w, kinds, plan, workers, &mut m, save) {
                ctx.say(&format!("  cost matrix {id}: ERROR {e}"));
                m.errors.push(format!("{id}, {workers} worker(s): {e}"));
            }
            if interrupted() {
                return m;
            }
        }
        if let Some(w) = wl.iter().find(|w| w.id == "root")
            && !plan.tcp_shapes.is_empty()
            && let Err(e) = tcp_rows(ctx, w, kinds, plan, workers, &mut m, save)
        {
            ctx.say(&format!("  cost matrix tcp: ERROR {e}"));
            m.errors.push(format!("tcp, {workers} worker(s): {e}"));
        }
        if interrupted() {
            return m;
        }
        if let Some(w) = wl.iter().find(|w| w.id == "root")
            && !plan.dot_shapes.is_empty()
            && let Err(e) = dot_rows(ctx, w, kinds, plan, workers, &mut m, save)
        {
            ctx.say(&format!("  cost matrix dot: ERROR {e}"));
            m.errors.push(format!("dot, {workers} worker(s): {e}"));
        }
        if interrupted() {
            return m;
        }
        if let Some(w) = wl.iter().find(|w| w.id == "root")
            && !plan.xdp_rates.is_empty()
            && let Err(e) = xdp_rows(ctx, w, kinds, plan, workers, &mut m, save)
        {
            ctx.say(&format!("  cost matrix xdp: ERROR {e}"));
            m.errors.push(format!("xdp, {workers} worker(s): {e}"));
        }
        if !pinned {
            let _ = heron_sys::cpu::pin_current_thread(&[ctx.args.generator_cpu]);
        }
        if interrupted() {
            return m;
        }
    }
    m
}

/// Starts every column on `w` with `workers` workers.
fn start_all(
    ctx: &Ctx,
    w: &Workload,
    cols: &[Column],
    workers: usize,
    tcp_max: usize,
) -> Result<Vec<Server>, String> {
    start_all_tls(ctx, w, cols, workers, tcp_max, None)
}

/// [`start_all`], each with a DoT listener when `tls` is given.
fn start_all_tls(
    ctx: &Ctx,
    w: &Workload,
    cols: &[Column],
    workers: usize,
    tcp_max: usize,
    tls: Option<&TlsFiles>,
) -> Result<Vec<Server>, String> {
    let cpus = if workers == 1 {
        ctx.args.server_cpus.clone()
    } else {
        format!("0-{}", heron_sys::cpu::online_cpus().saturating_sub(1))
    };
    cols.iter()
        .map(|c| {
            let launch = Launch {
                workers,
                cpus: cpus.clone(),
                tcp_clients_max: tcp_max,
                heron_server: c.heron_server.into(),
                tls: tls.cloned(),
                ..ctx.launch.clone()
            };
            ctx.start_with(c.kind, w, c.heron.as_deref(), &launch)
        })
        .collect()
}

fn gen_cpus(ctx: &Ctx, workers: usize) -> Option<String> {
    (workers == 1).then(|| ctx.gen_cpu.clone())
}

fn udp_rows(
    ctx: &mut Ctx,
    w: &Workload,
    kinds: &[Kind],
    plan: &Plan,
    workers: usize,
    m: &mut CostMatrix,
    save: &mut dyn FnMut(&CostMatrix),
) -> Result<(), String> {
    ctx.say(&format!(
        "cost matrix: UDP {}, {workers} worker(s): starting every server",
        w.id
    ));
    let set = QuerySet::load(&w.queries)?;
    let cols = columns(kinds, true, &plan.extra_herons);
    let servers = start_all(ctx, w, &cols, workers, ctx.launch.tcp_clients_max)?;
    settle();
    let max = common_max(ctx, &servers, &cols, &set, plan.ramp_s)?;
    m.max_rates
        .push((w.id.clone(), workers, max.unwrap_or(0.0)));
    let mut rates = plan.udp_rates.clone();
    if let Some(max) = max {
        ctx.say(&format!(
            "  highest rate every server answers: {max:.0} q/s"
        ));
        if !rates.iter().any(|r| (r - max).abs() < 1.0) {
            rates.push(max);
        }
    }
    let rates = &rates;
    let cells = plan.shapes.iter().flat_map(|&shape| {
        let generators = plan.generators.iter();
        generators.flat_map(move |&g| rates.iter().map(move |&r| (shape, g, r)))
    });
    for (shape, generator, rate) in cells {
        let load = Load {
            generator,
            rate,
            seconds: plan.trial_s,
            set: &set,
            queries: &w.queries,
            tcp: None,
            shape,
            dot: None,
            tls_resume: None,
            gen_cpus: gen_cpus(ctx, workers),
            via: None,
        };
        let cell = CostCell {
            transport: "udp".into(),
            workload: w.id.clone(),
            generator: generator.name().into(),
            rate,
            workers,
            is_max: max.is_some_and(|x| (x - rate).abs() < 1.0),
            shape: shape.name().into(),
            ..CostCell::default()
        };
        record_cell(ctx, (&servers, &cols), &load, plan.trials, cell, m, save)?;
    }
    Ok(())
}

fn tcp_rows(
    ctx: &mut Ctx,
    w: &Workload,
    kinds: &[Kind],
    plan: &Plan,
    workers: usize,
    m: &mut CostMatrix,
    save: &mut dyn FnMut(&CostMatrix),
) -> Result<(), String> {
    ctx.say(&format!(
        "cost matrix: TCP, {workers} worker(s): starting every server"
    ));
    let set = QuerySet::load(&w.queries)?;
    let mut cols = columns(kinds, false, &[]);
    cols.push(floor(Kind::TcpFloor));
    let servers = start_all(ctx, w, &cols, workers, TCP_MAX)?;
    settle();
    let shapes = plan.tcp_shapes.iter().flat_map(|&shape| {
        let rates = plan.tcp_rates.iter();
        rates.flat_map(move |&rate| plan.generators.iter().map(move |&g| (shape, rate, g)))
    });
    for ((connections, in_flight), rate, generator) in shapes {
        let load = Load {
            generator,
            rate,
            seconds: plan.trial_s.max(2.0),
            set: &set,
            queries: &w.queries,
            tcp: Some((connections, in_flight)),
            shape: ClientShape::FourSockets,
            dot: None,
            tls_resume: None,
            gen_cpus: gen_cpus(ctx, workers),
            via: None,
        };
        let cell = CostCell {
            transport: "tcp".into(),
            workload: w.id.clone(),
            generator: generator.name().into(),
            rate,
            connections,
            in_flight,
            workers,
            ..CostCell::default()
        };
        // One shape that fails (10,000 connections that do not all open
        // in time) leaves the others to be measured.
        if let Err(e) = record_cell(ctx, (&servers, &cols), &load, plan.trials, cell, m, save) {
            if interrupted() {
                return Err(e);
            }
            ctx.say(&format!(
                "  cost matrix tcp {connections} × {in_flight} {}: ERROR {e}",
                generator.name()
            ));
            m.errors.push(format!(
                "tcp {connections} conns × {in_flight}, {}, {workers} worker(s): {e}",
                generator.name()
            ));
        }
    }
    Ok(())
}

/// A floor's column: the path with no DNS work.
fn floor(kind: Kind) -> Column {
    Column {
        name: kind.name().into(),
        kind,
        heron_server: "",
        heron: None,
    }
}

/// DNS over TLS (dnsperf `-m dot`) to Heron, NSD and BIND (Knot 3.2 has
/// no DoT) and the TLS floor, each with a DoT listener on a self-signed
/// certificate made for the run: CPU per answered query on open
/// connections, and with a new connection every 1 or 10 queries.
fn dot_rows(
    ctx: &mut Ctx,
    w: &Workload,
    kinds: &[Kind],
    plan: &Plan,
    workers: usize,
    m: &mut CostMatrix,
    save: &mut dyn FnMut(&CostMatrix),
) -> Result<(), String> {
    ctx.say(&format!(
        "cost matrix: DNS over TLS, {workers} worker(s): starting every server"
    ));
    let tls = TlsFiles::self_signed(&ctx.work.join("tls"))?;
    let set = QuerySet::load(&w.queries)?;
    let dot_kinds: Vec<Kind> = kinds.iter().copied().filter(|k| k.serves_dot()).collect();
    let mut cols = columns(&dot_kinds, false, &[]);
    cols.push(floor(Kind::TlsFloor));
    let servers = start_all_tls(ctx, w, &cols, workers, TCP_MAX, Some(&tls))?;
    settle();
    let open = plan
        .dot_shapes
        .iter()
        .flat_map(|&shape| plan.dot_rates.iter().map(move |&rate| (shape, 0, rate)));
    let per_conn = plan
        .dot_conn_costs
        .iter()
        .map(|&(queries, rate)| ((DOT_CONN_COST_CONNECTIONS, 1), queries, rate));
    // The cost of a connection again from our own client, whose sessions
    // are resumed with a ticket or never, as the cell says.
    let own = (OWN_TLS_CONN_COSTS.iter())
        .flat_map(|&(queries, rate)| [false, true].map(|resume| (queries, rate, Some(resume))))
        .map(|(queries, rate, resume)| ((OWN_TLS_CLIENTS, 1), queries, rate, resume));
    let dnsperf = open
        .chain(per_conn)
        .map(|(shape, queries, rate)| (shape, queries, rate, None));
    for ((connections, in_flight), queries_per_conn, rate, tls_resume) in dnsperf.chain(own) {
        let generator = match tls_resume {
            Some(_) => Generator::Blast,
            None => Generator::Dnsperf,
        };
        let load = Load {
            generator,
            rate,
            seconds: plan.trial_s.max(2.0),
            set: &set,
            queries: &w.queries,
            tcp: Some((connections, in_flight)),
            shape: ClientShape::FourSockets,
            dot: Some(queries_per_conn),
            tls_resume,
            gen_cpus: gen_cpus(ctx, workers),
            via: None,
        };
        let cell = CostCell {
            transport: "dot".into(),
            workload: w.id.clone(),
            generator: generator.name().into(),
            rate,
            connections,
            in_flight,
            workers,
            queries_per_conn,
            tls_resume,
            ..CostCell::default()
        };
        if let Err(e) = record_cell(ctx, (&servers, &cols), &load, plan.trials, cell, m, save) {
            if interrupted() {
                return Err(e);
            }
            ctx.say(&format!(
                "  cost matrix dot {connections} × {in_flight}: ERROR {e}"
            ));
            m.errors.push(format!(
                "dot {connections} conns × {in_flight}, {queries_per_conn} per conn: {e}"
            ));
        }
    }
    if plan.dot_idle > 0 {
        // Each server on its own, configured to hold them.
        drop(servers);
        m.idle_tls = super::idle_tls::run(ctx, w, &dot_kinds, &[plan.dot_idle]);
        save(m);
    }
    Ok(())
}

/// Measures `cell` in every server, adds it to `m` and saves.
fn record_cell(
    ctx: &Ctx,
    (servers, cols): (&[Server], &[Column]),
    load: &Load,
    trials: usize,
    mut cell: CostCell,
    m: &mut CostMatrix,
    save: &mut dyn FnMut(&CostMatrix),
) -> Result<(), String> {
    cell.servers = measure_cell(ctx, servers, cols, load, trials)?;
    say_cell(ctx, &cell);
    m.cells.push(cell);
    save(m);
    match interrupted() {
        true => Err("interrupted".into()),
        false => Ok(()),
    }
}

/// `trials` rounds, every server once per round, the order rotated.
fn measure_cell(
    ctx: &Ctx,
    servers: &[Server],
    cols: &[Column],
    load: &Load,
    trials: usize,
) -> Result<Vec<CostServer>, String> {
    let mut out: Vec<CostServer> = cols
        .iter()
        .map(|c| CostServer {
            name: c.name.clone(),
            trials: Vec::new(),
        })
        .collect();
    for round in 0..trials {
        for k in 0..servers.len() {
            let i = (k + round) % servers.len();
            let mut t = trial(ctx, &servers[i], load)?;
            t.round = round;
            out[i].trials.push(t);
            settle();
        }
    }
    Ok(out)
}

/// One measured window of `load` against `server`.
fn trial(ctx: &Ctx, server: &Server, load: &Load) -> Result<CostTrial, String> {
    if interrupted() {
        return Err("interrupted".into());
    }
    if load.generator == Generator::Dnsperf && load.dot == Some(0) {
        return warm_dot_trial(ctx, server, load);
    }
    let (s0, m0) = (server_runtime(server), sys::machine_busy_seconds());
    let ticks0 = server.proc_cpu_seconds();
    let t0 = Instant::now();
    let mut t = match load.generator {
        Generator::Blast if load.tls_resume.is_some() => own_tls_trial(ctx, server, load)?,
        Generator::Blast => {
            let g0 = sys::thread_cpu_seconds();
            let r = match load.tcp {
                None => ctx.blast(load.set, &shaped_blast_opts(server, load))?,
                Some((connections, in_flight)) => ctx.blast_tcp(
                    load.set,
                    &TcpBlastOpts {
                        target: server.addr,
                        rate: load.rate,
                        connections,
                        in_flight,
                        duration: Duration::from_secs_f64(load.seconds),
                        drain: TCP_DRAIN,
                        connect_timeout: TCP_CONNECT_TIMEOUT,
                    },
                )?,
            };
            CostTrial {
                offered_qps: r.offered_qps,
                answered_qps: r.answered_qps,
                answered: r.answered,
                loss_pct: r.loss_pct,
                generator_cpu_s: sys::thread_cpu_seconds() - g0,
                generator_busy_s: r.busy_s,
                ..CostTrial::default()
            }
        }
        Generator::Dnsperf => {
            let opts = dnsperf_opts(ctx, server, load);
            // One dnsperf keeps at most 65,536 queries outstanding: more
            // (10,000 connections × 10) go to several from one address.
            let processes = opts.outstanding.div_ceil(dnsperf::MAX_OUTSTANDING);
            let r = match load.shape.sources().as_slice() {
                [_] if processes <= 1 => dnsperf::run(&opts, load.queries)?,
                &[one] => dnsperf::run_spread(&opts, load.queries, &vec![one; processes])?,
                sources => dnsperf::run_spread(&opts, load.queries, sources)?,
            };
            CostTrial {
                offered_qps: r.sent as f64 / r.run_s.max(1e-9),
                answered_qps: r.qps,
                answered: r.completed,
                loss_pct: r.loss_pct(),
                generator_cpu_s: r.cpu_s,
                ..CostTrial::default()
            }
        }
    };
    t.wall_s = t0.elapsed().as_secs_f64();
    t.server_cpu_s = server_runtime(server) - s0;
    t.server_ticks_cpu_s = server.proc_cpu_seconds() - ticks0;
    t.machine_cpu_s = sys::machine_busy_seconds() - m0;
    Ok(t)
}

/// A window of new DoT connections from our own client (`tls_conn`):
/// `load.rate` queries a second, `load.dot` on each connection.
fn own_tls_trial(ctx: &Ctx, server: &Server, load: &Load) -> Result<CostTrial, String> {
    let per_conn = load.dot.unwrap_or(1).max(1);
    let opts = crate::tls_conn::TlsConnOpts {
        target: server.tls_addr.ok_or("no TLS listener")?,
        rate: load.rate / per_conn as f64,
        duration: Duration::from_secs_f64(load.seconds),
        queries_per_conn: per_conn,
        resume: load.tls_resume.unwrap_or(true),
        threads: load.tcp.map_or(OWN_TLS_CLIENTS, |(clients, _)| clients),
    };
    let r = ctx.as_generator(|| crate::tls_conn::run(load.set, &opts));
    let r = r.map_err(|e| format!("DoT connections: {e}"))?;
    let asked = (r.connections + r.failed) * per_conn as u64;
    Ok(CostTrial {
        offered_qps: r.offered_cps() * per_conn as f64,
        answered_qps: r.answered as f64 / r.run_s.max(1e-9),
        answered: r.answered,
        loss_pct: 100.0 * asked.saturating_sub(r.answered) as f64 / asked.max(1) as f64,
        generator_cpu_s: r.cpu_s,
        tls_connections: r.connections,
        tls_resumed: r.resumed,
        ..CostTrial::default()
    })
}

/// The server's and the machine's counters at one moment.
struct Snapshot {
    server_s: f64,
    ticks_s: f64,
    machine_s: f64,
    at: Instant,
}

fn snapshot(server: &Server) -> Snapshot {
    Snapshot {
        server_s: server_runtime(server),
        ticks_s: server.proc_cpu_seconds(),
        machine_s: sys::machine_busy_seconds(),
        at: Instant::now(),
    }
}

/// The longest warm-up of a DoT cell on `connections` open connections:
/// time for every handshake (10,000 took a few seconds on a quiet
/// machine) before the window.
fn warmup_cap_s(connections: usize) -> f64 {
    (2.0 + connections as f64 / 1_000.0).ceil()
}

/// DoT on open connections (dnsperf `-m dot`, no limit of queries per
/// connection): dnsperf opens its connections when it starts, so it runs
/// for a warm-up and then the window, printing its answered rate every
/// second (`-S 1`) while the server's counters are read at the end of
/// each second. The window is the `seconds` seconds after the first one
/// answered at 95% of the rate (every handshake done by then, save a few)
/// or, failing that, the last `seconds`: handshakes are not measured as
/// queries. The cells with a limit of queries per connection measure
/// their handshakes on purpose and do not come here.
fn warm_dot_trial(ctx: &Ctx, server: &Server, load: &Load) -> Result<CostTrial, String> {
    let window = load.seconds.ceil().max(1.0) as usize;
    let connections = load.tcp.map_or(1, |(c, _)| c);
    let mut opts = dnsperf_opts(ctx, server, load);
    opts.seconds = warmup_cap_s(connections) + window as f64;
    opts.interval_s = 1;
    let start = snapshot(server);
    let (r, intervals) = dnsperf::run_marked_split(&opts, load.queries, || snapshot(server))?;
    let rates: Vec<f64> = intervals.iter().map(|i| i.qps).collect();
    let (a, b) = steady_window(&rates, load.rate, window).ok_or_else(|| {
        format!(
            "dnsperf printed {} one-second rates, fewer than a warm-up and {window}",
            rates.len()
        )
    })?;
    let (s0, s1) = (&intervals[a].mark, &intervals[b].mark);
    let wall_s = s1.at.duration_since(s0.at).as_secs_f64();
    let answered: f64 = rates[a + 1..=b].iter().sum();
    Ok(CostTrial {
        offered_qps: r.sent as f64 / r.run_s.max(1e-9),
        answered_qps: answered / wall_s.max(1e-9),
        answered: answered.round() as u64,
        loss_pct: r.loss_pct(),
        wall_s,
        server_cpu_s: s1.server_s - s0.server_s,
        server_ticks_cpu_s: s1.ticks_s - s0.ticks_s,
        machine_cpu_s: s1.machine_s - s0.machine_s,
        // dnsperf's CPU over its whole run, its window's share.
        generator_cpu_s: r.cpu_s * wall_s / r.run_s.max(1e-9),
        warmup_s: s0.at.duration_since(start.at).as_secs_f64(),
        ..CostTrial::default()
    })
}

/// The measured window among one-second `rates`: intervals a+1 ..= b
/// (their counters read at the ends of a and b), `window` long, a the
/// first at 95% of `rate` or else as late as the window fits.
fn steady_window(rates: &[f64], rate: f64, window: usize) -> Option<(usize, usize)> {
    let last_start = rates.len().checked_sub(window + 1)?;
    let steady = rates.iter().position(|&q| q >= 0.95 * rate);
    let a = steady.map_or(last_start, |s| s.min(last_start));
    Some((a, a + window))
}

fn server_runtime(server: &Server) -> f64 {
    sys::group_runtime_seconds(server.pid)
}

fn dnsperf_opts(ctx: &Ctx, server: &Server, load: &Load) -> DnsperfOpts {
    let mut o = ctx.dnsperf_opts(server.addr, load.tcp.is_some(), load.rate, load.seconds);
    if let Some((connections, in_flight)) = load.tcp {
        o.clients = connections;
        o.outstanding = connections * in_flight;
    }
    if let Some(queries_per_conn) = load.dot {
        o.dot = true;
        o.target = server.tls_addr.unwrap_or(server.addr);
        o.queries_per_conn = queries_per_conn;
    }
    o.cpus = load.gen_cpus.clone();
    if load.tcp.is_none() && load.via.is_none() {
        o.clients = load.shape.sockets();
        o.outstanding = o.outstanding.max(o.clients);
    }
    if let Some((ip, namespace)) = &load.via {
        o.target = SocketAddr::new(*ip, server.addr.port());
        o.netns = Some(namespace.clone());
    }
    o
}

/// blast as `load`'s client shape sends: its sockets, their source
/// addresses, and one query per socket in turn for many resolvers.
fn shaped_blast_opts(server: &Server, load: &Load) -> crate::blast::BlastOpts {
    let shape = load.shape;
    crate::blast::BlastOpts {
        sockets: shape.sockets(),
        sources: shape.sources(),
        spread: shape.spread(),
        ..blast_opts(server.addr, load.rate, 0, load.seconds)
    }
}

/// The highest ramp rate every server answers with at most MAX_LOSS_PCT
/// loss (each server's ramp stops at its first failure).
fn common_max(
    ctx: &Ctx,
    servers: &[Server],
    cols: &[Column],
    set: &QuerySet,
    seconds: f64,
) -> Result<Option<f64>, String> {
    let mut common: Option<f64> = None;
    for (server, col) in servers.iter().zip(cols) {
        let mut best = None;
        for rate in RAMP {
            let r = ctx.blast(set, &blast_opts(server.addr, rate, 0, seconds))?;
            settle();
            if r.loss_pct > MAX_LOSS_PCT || r.offered_qps < 0.97 * rate {
                break;
            }
            best = Some(rate);
        }
        ctx.say(&format!(
            "  {}: loss-free up to {}",
            col.name,
            best.map_or("none of the ramp".into(), |b| format!("{b:.0} q/s"))
        ));
        let Some(best) = best else { return Ok(None) };
        common = Some(common.map_or(best, |c: f64| c.min(best)));
    }
    Ok(common)
}

/// Share of the machine busy over half a second with no load of ours.
fn idle_busy_share() -> f64 {
    // Ticks: an idle CPU's idle period would count as busy until it ends.
    let (m0, t0) = (sys::machine_busy_ticks_seconds(), Instant::now());
    std::thread::sleep(std::time::Duration::from_millis(500));
    (sys::machine_busy_ticks_seconds() - m0)
        / t0.elapsed().as_secs_f64()
        / heron_sys::cpu::online_cpus() as f64
}

fn say_cell(ctx: &Ctx, cell: &CostCell) {
    let shape = match cell.transport.as_str() {
        "tcp" => format!("{} conns × {}", cell.connections, cell.in_flight),
        "dot" => format!(
            "{} conns × {}, {} per conn{}",
            cell.connections,
            cell.in_flight,
            cell.queries_per_conn,
            resumption(cell.tls_resume)
        ),
        _ => format!("{} {}", cell.workload, cell.shape),
    };
    let costs: Vec<String> = cell
        .servers
        .iter()
        .map(|s| {
            let us: Vec<f64> = s.trials.iter().map(CostTrial::server_us).collect();
            let (made, resumed) = (s.trials.iter()).fold((0, 0), |(m, r), t| {
                (m + t.tls_connections, r + t.tls_resumed)
            });
            let share = match made {
                0 => String::new(),
                _ => format!(" ({resumed} of {made} resumed)"),
            };
            format!(
                "{} {:.2}{share}",
                s.name,
                crate::stats::Spread::of(&us).median
            )
        })
        .collect();
    ctx.say(&format!(
        "  {} {shape} {} {:.0} q/s, µs/query: {}",
        cell.transport,
        cell.generator,
        cell.rate,
        costs.join(", ")
    ));
}

/// How a DoT cell's sessions go: ours resumed or not, dnsperf's its own.
pub(crate) fn resumption(resume: Option<bool>) -> &'static str {
    match resume {
        Some(true) => ", our client, sessions resumed",
        Some(false) => ", our client, no resumption",
        None => "",
    }
}

/// The XDP table's columns: name, server, and UDP over AF_XDP or sockets.
const XDP_COLUMNS: [(&str, Kind, bool); 4] = [
    ("Heron-XDP", Kind::Heron, true),
    ("Heron-sockets", Kind::Heron, false),
    ("Knot-XDP", Kind::Knot, true),
    ("Knot-sockets", Kind::Knot, false),
];

/// Heron and Knot with UDP over AF_XDP and over sockets on a veth pair
/// into a namespace made here (removed at the end), dnsperf inside it,
/// as bench/xdp.sh does. One program attaches to an interface at a
/// time, so each trial starts its server and stops it after.
fn xdp_rows(
    ctx: &mut Ctx,
    w: &Workload,
    kinds: &[Kind],
    plan: &Plan,
    workers: usize,
    m: &mut CostMatrix,
    save: &mut dyn FnMut(&CostMatrix),
) -> Result<(), String> {
    if let Some(why) = heron_sys::xdp::unavailable() {
        return Err(format!("no XDP here ({why})"));
    }
    ctx.say(&format!(
        "cost matrix: XDP on a veth pair, {workers} worker(s), dnsperf in the namespace"
    ));
    let net = heron_testkit::netns::VethNamespace::with_queues("mx", workers)?;
    let addr: std::net::Ipv4Addr = heron_testkit::netns::OUTSIDE_V4
        .parse()
        .map_err(|e| format!("{e}"))?;
    let cols: Vec<_> = XDP_COLUMNS
        .iter()
        .filter(|c| kinds.contains(&c.1))
        .collect();
    let set = QuerySet::load(&w.queries)?;
    for &rate in &plan.xdp_rates {
        let load = Load {
            generator: Generator::Dnsperf,
            rate,
            seconds: plan.trial_s.max(2.0),
            set: &set,
            queries: &w.queries,
            tcp: None,
            shape: ClientShape::FourSockets,
            dot: None,
            tls_resume: None,
            gen_cpus: gen_cpus(ctx, workers),
            via: Some((IpAddr::V4(addr), net.namespace.clone())),
        };
        let mut cell = CostCell {
            transport: "xdp".into(),
            workload: w.id.clone(),
            generator: "dnsperf".into(),
            rate,
            workers,
            ..CostCell::default()
        };
        cell.servers = cols
            .iter()
            .map(|c| CostServer {
                name: c.0.into(),
                trials: Vec::new(),
            })
            .collect();
        for round in 0..plan.trials {
            for k in 0..cols.len() {
                let i = (k + round) % cols.len();
                let (_, kind, xdp) = *cols[i];
                let pair = PairListen {
                    addr,
                    iface: net.outside.clone(),
                    xdp,
                };
                let mut t = xdp_trial(ctx, w, &net, kind, pair, workers, &load)?;
                t.round = round;
                cell.servers[i].trials.push(t);
            }
        }
        say_cell(ctx, &cell);
        m.cells.push(cell);
        save(m);
        if interrupted() {
            return Err("interrupted".into());
        }
    }
    Ok(())
}

/// Starts `kind` answering on the pair, waits until it answers there,
/// measures one trial, stops it and takes any XDP program it left.
fn xdp_trial(
    ctx: &Ctx,
    w: &Workload,
    net: &heron_testkit::netns::VethNamespace,
    kind: Kind,
    pair: PairListen,
    workers: usize,
    load: &Load,
) -> Result<CostTrial, String> {
    let launch = Launch {
        workers,
        cpus: match workers {
            1 => ctx.args.server_cpus.clone(),
            _ => format!("0-{}", heron_sys::cpu::online_cpus().saturating_sub(1)),
        },
        pair: Some(pair),
        ..ctx.launch.clone()
    };
    let mut server = ctx.start_with(kind, w, None, &launch)?;
    let answered = answers_on_pair(net, &server, w);
    let t = match answered {
        true => trial(ctx, &server, load),
        false => Err(format!(
            "{} did not answer on the pair: {}",
            kind.name(),
            server.log_tail()
        )),
    };
    server.stop();
    // Knot 3.2 leaves its program on the interface at exit (to reuse it
    // at the next start); the next server could not attach its own.
    for mode in ["xdp", "xdpgeneric"] {
        let _ = Command::new("ip")
            .args(["link", "set", "dev", &net.outside, mode, "off"])
            .output();
    }
    settle();
    t
}

/// Whether the server answers dig from the namespace on the pair (XDP is
/// attached after the loopback answers that made it ready); bounded.
fn answers_on_pair(
    net: &heron_testkit::netns::VethNamespace,
    server: &Server,
    w: &Workload,
) -> bool {
    let origin = w.ready.first().map_or(".", String::as_str);
    let at = format!("@{}", heron_testkit::netns::OUTSIDE_V4);
    let port = server.addr.port().to_string();
    (0..50).any(|_| {
        let out = net.run(
            "dig",
            &[
                &at, "-p", &port, "+short", "+tries=1", "+time=1", origin, "SOA",
            ],
        );
        let ok = !String::from_utf8_lossy(&out.stdout).trim().is_empty();
        if !ok {
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        ok
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_starts_after_the_first_second_at_the_rate() {
        // Handshakes in the first two seconds, then the rate.
        let rates = [
            0.0, 9_000.0, 19_500.0, 20_000.0, 20_000.0, 20_000.0, 20_000.0,
        ];
        assert_eq!(steady_window(&rates, 20_000.0, 2), Some((2, 4)));
        // At the rate from the first second: the window follows it.
        assert_eq!(steady_window(&[20e3; 5], 20e3, 2), Some((0, 2)));
    }

    #[test]
    fn a_server_below_the_rate_is_measured_over_the_last_seconds() {
        let rates = [0.0, 5_000.0, 6_000.0, 6_000.0, 6_000.0];
        assert_eq!(steady_window(&rates, 20_000.0, 2), Some((2, 4)));
        // Steady too late for a whole window: the last one that fits.
        let late = [0.0, 0.0, 0.0, 20e3, 20e3];
        assert_eq!(steady_window(&late, 20e3, 2), Some((2, 4)));
    }

    #[test]
    fn too_few_seconds_give_no_window() {
        assert_eq!(steady_window(&[20e3, 20e3], 20e3, 2), None);
        assert_eq!(steady_window(&[], 20e3, 1), None);
    }

    #[test]
    fn warm_up_grows_with_the_connections() {
        assert_eq!(warmup_cap_s(100), 3.0);
        assert_eq!(warmup_cap_s(10_000), 12.0);
    }
}
