//! `heron-bench`: Heron's benchmark suite. See `docs/benchmarks/README.md`.

mod args;
mod blast;
mod blast_tcp;
mod client_shape;
mod dnsperf;
mod host;
mod interrupt;
mod phases;
mod prng;
mod queries;
mod reflector;
mod report;
mod results;
mod servers;
mod stats;
mod suite;
mod sys;
mod tls_conn;
mod tls_floor;
mod workloads;
mod xdp_reflector;
mod xfr;
mod zones;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "heron-bench",
    version,
    about = "Heron's benchmark suite: Heron against NSD, Knot, BIND and a UDP reflector"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Args, Clone)]
struct GenArgs {
    /// Folder to write into.
    #[arg(long, default_value = "bench-data")]
    out: PathBuf,
    #[arg(long, default_value_t = zones::DEFAULT_SEED)]
    seed: u64,
    /// Workloads (comma separated): root, mix40, small, negative, big,
    /// zones10k, many, tcp.
    #[arg(long, value_delimiter = ',', default_values_t = workloads::ALL.map(String::from))]
    workloads: Vec<String>,
    /// A records in the large zone.
    #[arg(long, default_value_t = zones::BIG_RECORDS)]
    big_records: usize,
    /// Zones in the many-zones workload.
    #[arg(long, default_value_t = zones::MANY_ZONES)]
    many_zones: usize,
    /// Queries per file (the large zone's file gets five times as many).
    #[arg(long, default_value_t = 200_000)]
    queries: usize,
}

impl GenArgs {
    fn sizes(&self) -> workloads::Sizes {
        workloads::Sizes {
            big_records: self.big_records,
            many_zones: self.many_zones,
            // The first of the many zones: never more of them.
            some_zones: zones::SOME_ZONES.min(self.many_zones),
            queries: self.queries,
            big_queries: self.queries * 5,
            ..workloads::Sizes::default()
        }
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Write the zones: root-like (500 TLDs with glue), small and large A
    /// zones, 100,000 minimal zones, the edge zone of the 40% mix.
    GenZones(GenArgs),
    /// Write dnsperf query files (random order) for each workload.
    GenQueries(GenArgs),
    /// Batched UDP load (sendmmsg/recvmmsg): fixed rate or as fast as a
    /// window allows, for a bounded time; prints sent, answered, lost and
    /// latency percentiles.
    Blast {
        #[arg(long)]
        target: SocketAddr,
        /// dnsperf-format query file.
        #[arg(long)]
        queries: PathBuf,
        /// Offered queries per second; 0 = as fast as --window allows.
        #[arg(long, default_value_t = 0.0)]
        rate: f64,
        #[arg(long, default_value_t = 200)]
        window: usize,
        /// Seconds to send (at most 600).
        #[arg(long, default_value_t = 5.0)]
        duration: f64,
        #[arg(long, default_value_t = 4)]
        sockets: usize,
        #[arg(long, default_value_t = 32)]
        batch: usize,
        /// Pin this process to these CPUs (comma separated), e.g. 1.
        #[arg(long, value_delimiter = ',')]
        cpus: Vec<usize>,
        /// Also run dnsperf at the same rate and file, and print both.
        #[arg(long)]
        cross_check: bool,
        /// Over TCP instead, with this many connections (`blast_tcp`,
        /// as the cost matrix runs it; --sockets and --batch do not apply).
        #[arg(long)]
        tcp: Option<usize>,
        /// Queries outstanding at most on each TCP connection.
        #[arg(long, default_value_t = 1)]
        in_flight: usize,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Echo every datagram with QR set, through Heron's UDP worker loop.
    Reflector {
        #[arg(long, default_value = "127.0.0.1:5301")]
        listen: SocketAddr,
        #[arg(long, default_value_t = 1)]
        workers: usize,
    },
    /// Answer DNS over TLS with each query sent back with QR set (rustls,
    /// Heron's TLS settings, no DNS work): the floor of the TLS path.
    TlsFloor {
        #[arg(long)]
        listen: SocketAddr,
        /// PEM certificate chain and key.
        #[arg(long)]
        cert: PathBuf,
        #[arg(long)]
        key: PathBuf,
        #[arg(long, default_value_t = 1)]
        workers: usize,
    },
    /// New DNS-over-TLS connections at a fixed rate, each a handshake
    /// (resumed with a ticket, or with --no-resume a new session every
    /// time), some queries one after another, and a close; prints the
    /// connections made and resumed, answers and failures.
    TlsConnect {
        #[arg(long)]
        target: SocketAddr,
        /// dnsperf-format query file.
        #[arg(long)]
        queries: PathBuf,
        /// New connections a second.
        #[arg(long, default_value_t = 1000.0)]
        rate: f64,
        /// Seconds (at most 600).
        #[arg(long, default_value_t = 5.0)]
        duration: f64,
        #[arg(long, default_value_t = 1)]
        queries_per_conn: usize,
        /// Every handshake a new session.
        #[arg(long)]
        no_resume: bool,
        /// Client threads, one connection at a time each.
        #[arg(long, default_value_t = 8)]
        threads: usize,
    },
    /// Echo every UDP datagram to PORT on INTERFACE with QR set, through
    /// Heron's AF_XDP worker loop: the floor of the XDP path.
    XdpReflector {
        /// INTERFACE@PORT, as `[xdp] listen`.
        #[arg(long)]
        listen: heron_server::xdp::XdpListen,
    },
    /// The whole suite: environment check, every server on every
    /// workload, results.json, README.md and charts.
    Run(Box<args::RunArgs>),
    /// Zone transfers: secondary cold start with many zones, change
    /// propagation, a large zone between pairs of servers, TSIG overhead.
    Xfr(xfr::XfrArgs),
    /// Apply a small change (half deletions, half additions) to a zone
    /// in memory, as an IXFR or a reload would, and print the time and
    /// the memory the new version does not share with the old.
    ZoneChange {
        #[arg(long)]
        zone: PathBuf,
        #[arg(long)]
        origin: String,
        #[arg(long, default_value_t = 10)]
        records: usize,
        #[arg(long, default_value_t = 5)]
        repeats: usize,
    },
    /// Regenerate README.md and the charts from results.json.
    Report {
        #[arg(long, default_value = "docs/benchmarks/results.json")]
        results: PathBuf,
        #[arg(long, default_value = "docs/benchmarks")]
        out: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::ZoneChange {
            zone,
            origin,
            records,
            repeats,
        } => phases::change::measure(&zone, &origin, records, repeats).map(|c| {
            println!(
                "{} records changed in a zone of {}: {:.2} ms median ({:.2}–{:.2}, {} runs); \
                 {} bytes not shared with the previous version (zone: {} bytes)",
                c.changed_records,
                c.zone_records,
                c.apply_ms.median,
                c.apply_ms.min,
                c.apply_ms.max,
                c.apply_ms.n,
                c.extra_bytes,
                c.zone_bytes
            )
        }),
        Cmd::GenZones(a) => generate_files(&a, true, false),
        Cmd::GenQueries(a) => generate_files(&a, false, true),
        Cmd::Blast {
            target,
            queries,
            rate,
            duration,
            cpus,
            cross_check,
            tcp: Some(connections),
            in_flight,
            json,
            ..
        } => tcp_blast_cmd(
            &queries,
            blast_tcp::TcpBlastOpts {
                target,
                rate,
                connections,
                in_flight,
                duration: Duration::from_secs_f64(duration.clamp(0.01, 600.0)),
                drain: Duration::from_secs(2),
                connect_timeout: Duration::from_secs(30),
            },
            &cpus,
            cross_check,
            json,
        ),
        Cmd::Blast {
            target,
            queries,
            rate,
            window,
            duration,
            sockets,
            batch,
            cpus,
            cross_check,
            json,
            ..
        } => blast_cmd(
            target,
            &queries,
            blast::BlastOpts {
                target,
                rate,
                window,
                duration: Duration::from_secs_f64(duration.clamp(0.01, 600.0)),
                sockets,
                batch,
                ..blast::BlastOpts::default()
            },
            &cpus,
            cross_check,
            json,
        ),
        Cmd::Reflector { listen, workers } => {
            reflector::run(listen, workers).map_err(|e| format!("reflector on {listen}: {e}"))
        }
        Cmd::TlsFloor {
            listen,
            cert,
            key,
            workers,
        } => tls_floor::run(listen, &cert, &key, workers)
            .map_err(|e| format!("TLS floor on {listen}: {e}")),
        Cmd::TlsConnect {
            target,
            queries,
            rate,
            duration,
            queries_per_conn,
            no_resume,
            threads,
        } => {
            let opts = tls_conn::TlsConnOpts {
                target,
                rate,
                duration: Duration::from_secs_f64(duration.clamp(0.0, 600.0)),
                queries_per_conn,
                resume: !no_resume,
                threads,
            };
            blast::QuerySet::load(&queries)
                .and_then(|set| tls_conn::run(&set, &opts).map_err(|e| e.to_string()))
                .map(|r| {
                    println!(
                        "{} connections ({:.0}/s), {} resumed, {} answered, {} failed; client CPU {:.2} s",
                        r.connections,
                        r.offered_cps(),
                        r.resumed,
                        r.answered,
                        r.failed,
                        r.cpu_s
                    )
                })
        }
        Cmd::XdpReflector { listen } => xdp_reflector::run(&listen.interface, listen.port)
            .map_err(|e| format!("XDP reflector on {}@{}: {e}", listen.interface, listen.port)),
        Cmd::Run(args) => (*args)
            .with_absolute_paths()
            .and_then(|args| match suite::run(&args)? {
                Some(results) => report::write_all(&results, &args.out),
                None => Ok(()),
            }),
        Cmd::Report { results, out } => report::regenerate(&results, &out),
        Cmd::Xfr(args) => xfr::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("heron-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn generate_files(a: &GenArgs, zones: bool, queries: bool) -> Result<(), String> {
    let list = workloads::generate(&a.out, a.seed, &a.sizes(), &a.workloads, zones, queries)
        .map_err(|e| format!("{}: {e}", a.out.display()))?;
    for w in list {
        if zones {
            println!(
                "{}: {} zone(s), {} records ({} of the main kind), first {}",
                w.id,
                w.zones.len(),
                w.records,
                w.main_records,
                w.zones
                    .first()
                    .map_or(String::new(), |z| z.1.display().to_string())
            );
        } else {
            println!("{}: {}", w.id, w.queries.display());
        }
    }
    Ok(())
}

fn blast_cmd(
    target: SocketAddr,
    queries: &std::path::Path,
    opts: blast::BlastOpts,
    cpus: &[usize],
    cross_check: bool,
    json: bool,
) -> Result<(), String> {
    pin(cpus)?;
    let set = blast::QuerySet::load(queries)?;
    let r = blast::blast(&set, &opts).map_err(|e| format!("blast: {e}"))?;
    let load = (opts.rate, opts.duration.as_secs_f64());
    let clients = (opts.sockets, opts.window.max(100));
    let also = cross_check.then(|| dnsperf_alike(target, false, clients, &load, cpus));
    print_blast(&r, also, queries, json)
}

/// `blast` over TCP: what [`blast_cmd`] does, with `blast_tcp`.
fn tcp_blast_cmd(
    queries: &std::path::Path,
    opts: blast_tcp::TcpBlastOpts,
    cpus: &[usize],
    cross_check: bool,
    json: bool,
) -> Result<(), String> {
    pin(cpus)?;
    let set = blast::QuerySet::load(queries)?;
    let r = blast_tcp::blast_tcp(&set, &opts).map_err(|e| format!("blast over TCP: {e}"))?;
    let load = (opts.rate, opts.duration.as_secs_f64());
    let clients = (opts.connections, opts.connections * opts.in_flight);
    let also = cross_check.then(|| dnsperf_alike(opts.target, true, clients, &load, cpus));
    print_blast(&r, also, queries, json)
}

fn pin(cpus: &[usize]) -> Result<(), String> {
    if !cpus.is_empty() {
        heron_sys::cpu::pin_current_thread(cpus)
            .map_err(|e| format!("cannot pin to CPUs {cpus:?}: {e}"))?;
    }
    Ok(())
}

/// dnsperf options for the load `blast` just offered: clients and
/// queries outstanding, rate and seconds.
fn dnsperf_alike(
    target: SocketAddr,
    tcp: bool,
    (clients, outstanding): (usize, usize),
    &(rate, seconds): &(f64, f64),
    cpus: &[usize],
) -> dnsperf::DnsperfOpts {
    dnsperf::DnsperfOpts {
        target,
        tcp,
        clients,
        outstanding,
        rate,
        seconds,
        cpus: (!cpus.is_empty()).then(|| {
            cpus.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(",")
        }),
        ..dnsperf::DnsperfOpts::default()
    }
}

/// Runs dnsperf after `blast` when asked (`also`), then prints both.
fn print_blast(
    r: &blast::BlastResult,
    also: Option<dnsperf::DnsperfOpts>,
    queries: &std::path::Path,
    json: bool,
) -> Result<(), String> {
    let d = also.map(|o| dnsperf::run(&o, queries)).transpose()?;
    if json {
        println!("{}", serde_json::json!({ "blast": r, "dnsperf": d }));
        return Ok(());
    }
    println!(
        "blast:   sent {} answered {} lost {} ({:.3}%) offered {:.0} q/s answered {:.0} q/s \
         latency avg {:.1} us p50 {:.1} p99 {:.1} p99.9 {:.1} max {:.1}; NOERROR {} NXDOMAIN {} other {}; \
         drops client {} server {}",
        r.sent,
        r.answered,
        r.lost,
        r.loss_pct,
        r.offered_qps,
        r.answered_qps,
        r.lat_avg_us,
        r.lat_p50_us,
        r.lat_p99_us,
        r.lat_p999_us,
        r.lat_max_us,
        r.noerror,
        r.nxdomain,
        r.other_rcode,
        r.client_drops,
        r.server_drops
    );
    if let Some(d) = d {
        println!(
            "dnsperf: sent {} completed {} lost {} ({:.3}%) {:.0} q/s latency avg {:.1} us; {}",
            d.sent,
            d.completed,
            d.lost,
            d.loss_pct(),
            d.qps,
            d.lat_avg_us,
            d.rcodes
        );
        println!("         {}", d.command);
    }
    Ok(())
}
