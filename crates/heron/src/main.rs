//! `heron`: the authoritative DNS server's command line.

mod background;
mod catalog_producer;
mod check;
mod commands;
mod config;
mod consumer;
mod control;
mod ctl;
mod doctor;
mod keygen;
mod logging;
mod man;
mod memory;
mod metrics;
mod notify;
mod privileges;
mod reload;
mod secondary;
mod serve;

/// jemalloc: see [`heron_sys::memory::ServerAllocator`].
#[global_allocator]
static ALLOCATOR: heron_sys::memory::ServerAllocator = heron_sys::memory::ServerAllocator;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::Instant;

use clap::{Args, CommandFactory, Parser, Subcommand};
use clap_complete::Shell;

#[derive(Parser)]
#[command(
    name = "heron",
    version,
    about = "Heron, an authoritative-only DNS server"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve zones in the foreground until SIGTERM or SIGINT. With neither
    /// --config nor --zone, serves the built-in example.com zone on
    /// 127.0.0.1:5300.
    Serve(ServeArgs),
    /// Check a zone file; print every problem and exit non-zero on errors.
    CheckZone {
        file: PathBuf,
        /// The zone's origin, e.g. example.com
        origin: String,
    },
    /// Check a configuration file and every zone it names.
    CheckConfig { file: PathBuf },
    /// Control a running server over its control socket: status, zones,
    /// reload, stop. Every command waits for the result and exits 0 if it
    /// was done, 1 if it was tried and failed (with the reason), 2 on a
    /// usage error, 3 if the server cannot be reached or does not answer
    /// within the timeout, 4 if the server refused the request without
    /// trying it (an unknown zone, say).
    Ctl(ctl::CtlArgs),
    /// Ask a running server to re-read its changed zone files, and print
    /// what it did (short for `heron ctl reload`). Exits 0 if every zone
    /// loaded, 1 if some failed (the old version keeps serving), 3 if the
    /// server cannot be reached or does not answer within the timeout.
    Reload {
        #[command(flatten)]
        target: ControlArgs,
        /// Seconds to wait for the server's answer, connecting included.
        #[arg(long, value_name = "SECONDS", default_value_t = 60)]
        timeout: u64,
    },
    /// Check the kernel settings that matter for DNS over TCP (listen
    /// backlog, SYN cookies, open files) and UDP bursts, against what the
    /// configuration (or the defaults) needs. Exits 1 if some need fixing.
    Doctor {
        /// The configuration to check for (its max-connections and
        /// secondary zones).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Print a new TSIG key as a [[key]] block for the configuration file.
    Keygen {
        /// The key's name, e.g. xfr.example.com
        name: String,
        /// hmac-sha256, hmac-sha384, hmac-sha512, hmac-sha224, hmac-sha1 or hmac-md5
        #[arg(long, short, default_value = "hmac-sha256")]
        algorithm: String,
        /// Whose configuration syntax to print it in: heron, knot, bind,
        /// nsd, or all of them (for both ends of a transfer).
        #[arg(long, value_enum, default_value = "heron")]
        format: keygen::KeyFormat,
    },
    /// Write the manual pages (heron.1, and heron-serve.1 and so on for
    /// each subcommand) into DIR.
    Man {
        /// The directory to write into; created if missing.
        dir: PathBuf,
    },
    /// Print the shell completion script for SHELL to standard output.
    Completions {
        /// bash, zsh, fish, elvish or powershell
        shell: Shell,
    },
}

#[derive(Args)]
pub struct ServeArgs {
    /// Configuration file (TOML).
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Address to answer on, UDP and TCP (repeatable). Overrides the file.
    #[arg(long, value_name = "ADDR:PORT")]
    listen: Vec<SocketAddr>,
    /// A zone to serve as ORIGIN=FILE (repeatable). Added to the file's zones.
    #[arg(long, value_name = "ORIGIN=FILE", value_parser = config::parse_zone_arg)]
    zone: Vec<config::ZoneSpec>,
    /// Worker threads (default: one per core). Overrides the file.
    #[arg(long)]
    workers: Option<usize>,
    /// Pin UDP workers to these CPUs, round robin (e.g. 0,1). Overrides the file.
    #[arg(long, value_delimiter = ',', value_name = "CPU,...")]
    cpu_affinity: Vec<usize>,
    /// The control socket `heron reload` talks to. Overrides the file.
    #[arg(long, value_name = "PATH")]
    control: Option<PathBuf>,
}

/// Where a running server's control socket is: `--control`, else the
/// `[server] control` of `--config`, else `HERON_CONTROL`, else
/// [`ctl::DEFAULT_CONTROL`] (where the shipped unit puts it).
#[derive(Args)]
#[group(required = false, multiple = false)]
pub struct ControlArgs {
    /// The server's configuration file: its [server] control socket.
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// The control socket itself (default: $HERON_CONTROL, else
    /// /run/heron/control.sock).
    #[arg(long, visible_alias = "socket", value_name = "PATH")]
    control: Option<PathBuf>,
}

impl ControlArgs {
    fn socket(&self) -> Result<PathBuf, String> {
        if let Some(path) = &self.control {
            return Ok(path.clone());
        }
        let Some(config) = &self.config else {
            return Ok(ctl::default_socket());
        };
        ctl::socket_of_config(config)
    }
}

/// When the process started (as near as `main` can tell), for the
/// start-to-ready time operators compare servers by.
fn started() -> Instant {
    static STARTED: OnceLock<Instant> = OnceLock::new();
    *STARTED.get_or_init(Instant::now)
}

fn main() -> ExitCode {
    started();
    let cli = Cli::parse();
    logging::init(&match &cli.command {
        Command::Serve(ServeArgs {
            config: Some(path), ..
        }) => logging::section_of(path),
        _ => logging::LogSection::default(),
    });
    match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::CheckZone { file, origin } => check::zone(&file, &origin),
        Command::CheckConfig { file } => check::config(&file),
        Command::Ctl(args) => ctl::run(args),
        Command::Reload { target, timeout } => ctl::run(ctl::CtlArgs {
            target,
            json: false,
            timeout,
            command: ctl::CtlCommand::Reload {
                zones: Vec::new(),
                force: false,
            },
        }),
        Command::Keygen {
            name,
            algorithm,
            format,
        } => keygen::run(&name, &algorithm, format),
        Command::Doctor { config } => doctor::run(config.as_deref()),
        Command::Man { dir } => write_man_pages(&dir),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "heron", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
    }
}

fn write_man_pages(dir: &std::path::Path) -> ExitCode {
    match man::write_pages(Cli::command(), dir) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}: {e}", dir.display());
            ExitCode::FAILURE
        }
    }
}
