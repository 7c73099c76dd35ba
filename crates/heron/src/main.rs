//! `heron`: the authoritative DNS server's command line.

#[macro_use]
mod stdout;
mod background;
mod check;
mod compare;
mod completions;
mod config;
mod control;
mod doctor;
mod import;
mod keygen;
mod keymgr;
mod logging;
mod man;
mod memory;
mod notify;
mod plan;
mod privileges;
mod process_start;
mod runtime;
mod serve;

/// jemalloc: see [`heron_sys::memory::ServerAllocator`].
#[global_allocator]
static ALLOCATOR: heron_sys::memory::ServerAllocator = heron_sys::memory::ServerAllocator;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use clap_complete::Shell;

use control::ctl;

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
    Serve(serve::ServeArgs),
    /// Check a zone file; print every problem and exit non-zero on errors.
    CheckZone {
        file: PathBuf,
        /// The zone's origin, e.g. example.com
        origin: String,
    },
    /// Check a configuration file and every zone it names.
    CheckConfig { file: PathBuf },
    /// Control a running server over its control socket: status, zone status,
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
        target: ctl::ControlArgs,
        /// Seconds to wait for the server's answer, connecting included
        /// (at least 1).
        #[arg(long, value_name = "SECONDS", default_value_t = 60,
              value_parser = clap::value_parser!(u64).range(1..))]
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
    /// A zone's DNSSEC keys in its state file: list them with their next
    /// event, ask a rollover, delete a retired key, record that the
    /// parent's DS matches the CDS records.
    Keymgr(keymgr::KeymgrArgs),
    /// Read an NSD, Knot or BIND configuration and write the same setup
    /// as heron.toml. Every setting it cannot translate is listed on
    /// stderr with its file and line and what to do about it; TSIG secrets
    /// go into the written file only (mode 0600), never to the terminal.
    /// Exits 0 when the file was written (settings listed as not
    /// translated are warnings), 1 on an error (nothing usable written).
    Import {
        /// Whose configuration FILE is: nsd (nsd.conf), knot (knot.conf)
        /// or bind (named.conf).
        #[arg(long, value_enum, value_name = "SERVER")]
        from: import::From,
        /// The configuration to read; its includes are followed.
        file: PathBuf,
        /// Where to write heron.toml.
        #[arg(long, short, default_value = "heron.toml")]
        output: PathBuf,
        /// Replace the output file if it exists (never one of the old
        /// server's: its configuration, includes or zone files).
        #[arg(long)]
        force: bool,
        /// Answer on these addresses instead of the old server's
        /// (repeatable): to run Heron beside it while comparing answers.
        #[arg(long, value_name = "ADDR:PORT")]
        listen: Vec<std::net::SocketAddr>,
        /// Answer DNS over TLS on these addresses instead of the old
        /// server's (repeatable), when it serves DoT.
        #[arg(long, value_name = "ADDR:PORT")]
        tls_listen: Vec<std::net::SocketAddr>,
    },
    /// Ask the server Heron replaces and Heron the same questions about
    /// the same zones (every owner and type, plus NXDOMAIN, NODATA,
    /// wildcard, delegation, DO, TCP and EDNS-size probes) and report every
    /// difference by kind; the owners and types only the old server's copy
    /// holds are found by its AXFR, where it allows one. Exits 0 if none, 1
    /// if some, 2 on an error.
    Compare(compare::CompareArgs),
    /// Write the manual pages (heron.1, and heron-serve.1 and so on for
    /// each subcommand) into DIR.
    Man {
        /// The directory to write into; created if missing.
        dir: PathBuf,
    },
    /// Print the shell completion script for SHELL to standard output.
    /// In bash and fish, `heron ctl` completes zone names from the running
    /// server (or the configuration file).
    Completions {
        /// bash, zsh, fish, elvish or powershell
        shell: Shell,
    },
    /// The zone names completions offer: the running server's, else the
    /// configuration file's (default /etc/heron/heron.toml), one a line.
    #[command(hide = true)]
    CompleteZones {
        #[command(flatten)]
        target: ctl::ControlArgs,
    },
}

fn main() -> ExitCode {
    process_start::started();
    let cli = Cli::parse();
    logging::init(&match &cli.command {
        Command::Serve(serve::ServeArgs {
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
        Command::Keymgr(args) => keymgr::run(args),
        Command::Doctor { config } => doctor::run(config.as_deref()),
        Command::Import {
            from,
            file,
            output,
            force,
            listen,
            tls_listen,
        } => import::run(&import::Options {
            from,
            file,
            output,
            force,
            listen,
            tls_listen,
        }),
        Command::Compare(args) => compare::run(args),
        Command::Man { dir } => write_man_pages(&dir),
        Command::Completions { shell } => completions::print(shell, Cli::command()),
        Command::CompleteZones { target } => completions::zones(&target),
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
