//! `heron ctl`: the client side of the control socket. Each command waits
//! for the server to have done it, prints the result (a table, or the
//! server's JSON with `--json`), and exits with one of the [`exit`] codes:
//! 0 done, 1 tried and failed (with the reason), 2 a usage error (clap's,
//! or no socket to be found), 3 the server cannot be reached or does not
//! answer in time, 4 the server refused the request (an unknown zone,
//! say) without trying it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use serde_json::Value;

use crate::control::socket::{self as control, Request, Response};

#[derive(Args)]
pub struct CtlArgs {
    #[command(flatten)]
    pub target: ControlArgs,
    /// Print the server's response as one line of JSON (for scripts)
    /// instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
    /// Seconds to wait for the server's answer, connecting included (at
    /// least 1: 0 never waited, and failed every time; DE-5).
    #[arg(long, value_name = "SECONDS", default_value_t = 60, global = true,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: u64,
    #[command(subcommand)]
    pub command: CtlCommand,
}

#[derive(Subcommand)]
pub enum CtlCommand {
    /// Version, uptime, zones by role, listeners, workers, TLS and XDP.
    Status,
    /// Per zone: role, serial, and when its file was last loaded; for
    /// secondary zones also when it was last transferred, the next
    /// refresh and the expiry, the last error, and per primary whether
    /// it answered, its back-off, its last error and TSIG key.
    /// Exits 4 if a zone named is not configured (the others are shown).
    ZoneStatus {
        /// The zones to show (default: all).
        zones: Vec<String>,
    },
    /// Re-read changed zone files (and, with no zone named, the
    /// configuration's zone list), and wait until they are served.
    /// Exits 1 if a zone failed to load (its previous version keeps
    /// serving), 4 if a zone named has no file to read (unknown, or a
    /// secondary zone not signed here: nothing is reloaded then); a
    /// secondary zone signed here is signed again from the version last
    /// received ("signed again" in the answer). A zone not named that
    /// fails as it did at the last reload, its file unchanged, is said
    /// "still failing" and does not fail the command.
    Reload {
        /// The zones to re-read (default: all).
        zones: Vec<String>,
        /// Read the files even if they look unchanged.
        #[arg(long)]
        force: bool,
    },
    /// Read the configuration file again and apply it without a restart:
    /// zones (primary and secondary) added and removed, primaries and
    /// transfer settings changed; other zones are not touched. Prints
    /// what changed ("no change" if nothing did) and the settings that
    /// wait for a restart (listeners, workers, ...). Exits 1 if the file
    /// has errors (the running configuration stays) or a zone failed to
    /// load (not one still failing as before, its file unchanged).
    /// SIGHUP does the same, without the answer.
    Reconfigure,
    /// Transfer a secondary zone in full (AXFR) now, and wait until it is
    /// served. Exits 1 if no primary gave it (with each reason).
    Retransfer {
        /// The secondary zone.
        zone: String,
        /// End the back-off of each of its primaries first, for their
        /// other zones too (without it, a primary left alone after
        /// failing is asked all the same, as a NOTIFY from it would be).
        #[arg(long)]
        force: bool,
    },
    /// Ask a secondary zone's primaries for their serial now, and
    /// transfer the zone if theirs is newer; waits until done.
    Refresh {
        /// The secondary zone.
        zone: String,
        /// As for retransfer.
        #[arg(long)]
        force: bool,
    },
    /// Send NOTIFY for a zone to its secondaries (its `notify` targets)
    /// now, and wait for each to answer. Exits 1 if one did not
    /// acknowledge it.
    Notify {
        /// The zone.
        zone: String,
    },
    /// Stop taking dynamic updates for a zone and write it to its file as
    /// served, so that the file can be edited by hand; updates are
    /// answered REFUSED until `thaw`.
    Freeze {
        /// The zone (one with `allow-update`).
        zone: String,
    },
    /// Read a frozen zone's file again (edits kept, the serial moved on)
    /// and take updates again.
    Thaw {
        /// The frozen zone.
        zone: String,
    },
    /// Write zones whose files lack the dynamic updates they answered to
    /// their files now (as `rndc sync` and `knotc zone-flush` do): for a
    /// backup, or under `zonefile-sync = "never"`. Updates go on being
    /// taken. Exits 1 if a file could not be written, 4 if a zone named
    /// is not served.
    Flush {
        /// The zones to write (default: every zone whose file lacks
        /// updates).
        zones: Vec<String>,
    },
    /// The server's counters: requests refused by reason (bad TSIG,
    /// transfer or NOTIFY not allowed, ...) and TCP connections open.
    Stats {
        /// Set the counters back to zero (the values shown are those
        /// before).
        #[arg(long)]
        reset: bool,
    },
    /// End the dnstap file (if it was moved away, as logrotate does) and
    /// start a new one at its path, and wait until it is there: for
    /// logrotate's `postrotate`. A file still at its path is written on.
    /// Exits 4 if dnstap is off or writes to a socket.
    DnstapReopen,
    /// A signed zone's DNSSEC keys: tag, algorithm, role, the RFC 7583
    /// states of its DNSKEY, RRSIGs and DS, and its next event and when.
    Keys {
        /// The signed zone.
        zone: String,
    },
    /// Roll a key over now, before its lifetime ends: its successor is
    /// made and published at once (while a rollover of that role is under
    /// way, once that one is done), and the rollover goes on as the
    /// policy's timings say. KEY: the key's tag or id, or ksk, zsk or csk
    /// for the zone's key of that role (as `knotc zone-key-rollover` and
    /// `rndc dnssec -rollover` do).
    Roll {
        /// The signed zone.
        zone: String,
        /// The key: its tag or id, or ksk, zsk or csk.
        key: String,
    },
    /// Say that the parent now publishes the DS records the zone's
    /// CDS/CDNSKEY ask for (or no longer publishes those withdrawn), for
    /// parents the server cannot query (`parent-servers`): the waiting
    /// rollover step moves on. Exits 1 if the zone waits for no parent.
    DsSeen {
        /// The signed zone.
        zone: String,
    },
    /// Shut the server down cleanly, and wait until its process is gone.
    /// Exits 1 if it is still there when the timeout runs out.
    Stop,
}

impl CtlCommand {
    fn request(&self) -> Request {
        match self {
            CtlCommand::Status => Request::new("status"),
            CtlCommand::ZoneStatus { zones } => Request {
                zones: zones.clone(),
                ..Request::new("zone-status")
            },
            CtlCommand::Reload { zones, force } => Request {
                zones: zones.clone(),
                force: *force,
                ..Request::new("reload")
            },
            CtlCommand::Reconfigure => Request::new("reconfigure"),
            CtlCommand::Retransfer { zone, force } => Request {
                force: *force,
                ..one_zone("retransfer", zone)
            },
            CtlCommand::Refresh { zone, force } => Request {
                force: *force,
                ..one_zone("refresh", zone)
            },
            CtlCommand::Notify { zone } => one_zone("notify", zone),
            CtlCommand::Freeze { zone } => one_zone("freeze", zone),
            CtlCommand::Thaw { zone } => one_zone("thaw", zone),
            CtlCommand::Flush { zones } => Request {
                zones: zones.clone(),
                ..Request::new("flush")
            },
            CtlCommand::Stats { reset } => Request {
                reset: *reset,
                ..Request::new("stats")
            },
            CtlCommand::DnstapReopen => Request::new("dnstap-reopen"),
            CtlCommand::Keys { zone } => one_zone("keys", zone),
            CtlCommand::Roll { zone, key } => Request {
                key: Some(key.clone()),
                ..one_zone("roll", zone)
            },
            CtlCommand::DsSeen { zone } => one_zone("ds-seen", zone),
            CtlCommand::Stop => Request::new("stop"),
        }
    }
}

/// Where a running server's control socket is: `--control`, else the
/// `[server] control` of `--config`, else `HERON_CONTROL`, else
/// [`DEFAULT_CONTROL`] (where the shipped unit puts it).
#[derive(Args)]
#[group(required = false, multiple = false)]
pub struct ControlArgs {
    /// The server's configuration file: its [server] control socket.
    #[arg(long, short)]
    pub(crate) config: Option<PathBuf>,
    /// The control socket itself (default: $HERON_CONTROL, else
    /// /run/heron/control.sock).
    #[arg(long, visible_alias = "socket", value_name = "PATH")]
    control: Option<PathBuf>,
}

impl ControlArgs {
    pub(crate) fn socket(&self) -> Result<PathBuf, String> {
        if let Some(path) = &self.control {
            return Ok(path.clone());
        }
        let Some(config) = &self.config else {
            return Ok(default_socket());
        };
        socket_of_config(config)
    }
}

/// The exit codes of `heron ctl` and `heron reload`, for scripts.
pub mod exit {
    pub const DONE: u8 = 0;
    pub const FAILED: u8 = 1;
    /// clap's own code for a command line it cannot read.
    pub const USAGE: u8 = 2;
    pub const UNREACHABLE: u8 = 3;
    pub const REFUSED: u8 = 4;
}

/// Where the shipped systemd unit has the server put its control socket.
pub const DEFAULT_CONTROL: &str = "/run/heron/control.sock";

/// The variable that names the control socket when neither `--control`
/// nor `--config` does.
const CONTROL_ENV: &str = "HERON_CONTROL";

/// `HERON_CONTROL`, else [`DEFAULT_CONTROL`].
pub fn default_socket() -> PathBuf {
    std::env::var_os(CONTROL_ENV)
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_CONTROL), PathBuf::from)
}

/// The control socket `config` names. Only `[server] control` is read,
/// so a file with an error elsewhere (being edited) still leads to the
/// running server; a file that is not TOML at all falls back to
/// [`default_socket`], said on stderr.
pub fn socket_of_config(config: &Path) -> Result<PathBuf, String> {
    let text = heron_sys::files::read_settings_text(config)?;
    let file = match text.parse::<toml::Table>() {
        Ok(file) => file,
        Err(e) => {
            // One typo anywhere (the edit being reloaded) must not lose
            // the server: its socket read off the `[server]` lines.
            let base = config.parent().unwrap_or(Path::new("."));
            let fallback = control_by_lines(&text)
                .map(|c| base.join(c))
                .unwrap_or_else(default_socket);
            // The parser's own words, on one line: what to fix.
            let why = e.message().lines().next().unwrap_or("").to_string();
            let line = e.span().map(|s| text[..s.start].lines().count().max(1));
            eprintln!(
                "{}{}: not readable as TOML ({why}); trying the control socket {} (give \
                 --control PATH to reach a server elsewhere)",
                config.display(),
                line.map_or(String::new(), |l| format!(":{l}")),
                fallback.display()
            );
            return Ok(fallback);
        }
    };
    let control = file
        .get("server")
        .and_then(|server| server.get("control"))
        .and_then(|control| control.as_str());
    let Some(control) = control else {
        // Where the server puts it then: under its unit, `control.sock`
        // in the runtime directory (the unit's ExecReload runs with the
        // same RUNTIME_DIRECTORY), else the default.
        return Ok(runtime_directory_socket().unwrap_or_else(default_socket));
    };
    let base = config.parent().unwrap_or(Path::new("."));
    Ok(base.join(control))
}

/// `[server] control = "PATH"` read line by line, for a file the TOML
/// parser refuses (black-box finding: a typo elsewhere in the file made
/// `heron reload --config` say the server could not be reached).
fn control_by_lines(text: &str) -> Option<String> {
    let mut in_server = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_server = line.split('#').next().map(str::trim) == Some("[server]");
            continue;
        }
        let Some(value) = line.strip_prefix("control") else {
            continue;
        };
        let value = value.trim_start().strip_prefix('=').map(str::trim);
        let quoted = value.and_then(|v| v.strip_prefix('"')?.split('"').next());
        if let (true, Some(path)) = (in_server, quoted) {
            return Some(path.to_string());
        }
    }
    None
}

/// `control.sock` in the first of systemd's `RUNTIME_DIRECTORY`, if set:
/// where `heron serve` puts its socket under a unit when the
/// configuration names none.
pub fn runtime_directory_socket() -> Option<PathBuf> {
    let dirs = std::env::var_os("RUNTIME_DIRECTORY")?;
    // Colon-separated when the unit names several.
    let first = dirs.to_str()?.split(':').next().filter(|d| !d.is_empty())?;
    Some(Path::new(first).join("control.sock"))
}

fn one_zone(command: &str, zone: &str) -> Request {
    Request {
        zones: vec![zone.into()],
        ..Request::new(command)
    }
}

pub fn run(args: CtlArgs) -> ExitCode {
    let path = match args.target.socket() {
        Ok(path) => path,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(exit::USAGE);
        }
    };
    let wait = Duration::from_secs(args.timeout);
    let started = Instant::now();
    let response = match control::ask(&path, &args.command.request(), wait) {
        Ok(response) => response,
        Err(why) => {
            let said = why.explain(&path, wait);
            eprintln!("{said}");
            // A script reading the JSON gets a document too (black-box
            // finding: stdout was empty).
            if args.json {
                let response = Response::error(said);
                outln!("{}", serde_json::to_string(&response).expect("serializes"));
            }
            return ExitCode::from(exit::UNREACHABLE);
        }
    };
    let mut ok = response.ok;
    let mut response = response;
    if ok && matches!(args.command, CtlCommand::Stop) {
        let left = wait.saturating_sub(started.elapsed());
        if let Err(e) = wait_until_gone(&response.data, &path, left) {
            response = Response::error(e);
            ok = false;
        } else {
            response.message = "stopped".into();
        }
    }
    if args.json {
        outln!("{}", serde_json::to_string(&response).expect("serializes"));
    } else {
        print_human(&args.command, &response);
    }
    ExitCode::from(match (ok, response.refused) {
        (true, _) => exit::DONE,
        (false, true) => exit::REFUSED,
        (false, false) => exit::FAILED,
    })
}

/// Waits until the process `data.pid` is gone (the control socket cannot
/// say so: it closes before the last transfers are written to disk).
fn wait_until_gone(data: &Value, socket: &Path, wait: Duration) -> Result<(), String> {
    let Some(pid) = data.get("pid").and_then(Value::as_u64) else {
        return Err("the server did not say its process id".into());
    };
    let deadline = Instant::now() + wait;
    while is_running(pid) {
        if Instant::now() >= deadline {
            return Err(format!(
                "process {pid} (control socket {}) is still running after {} s",
                socket.display(),
                wait.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Whether process `pid` runs: any of its threads exists and has not
/// exited. The leader turns zombie (state `Z`) as soon as it exits, while
/// the other threads may still be ending (a thread at idle priority can
/// wait long for the CPU it needs to die); its parent sees it exit only
/// once they all have.
fn is_running(pid: u64) -> bool {
    let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    threads.flatten().any(|thread| {
        std::fs::read_to_string(thread.path().join("stat")).is_ok_and(|stat| {
            // The state follows the command name, which is in parentheses
            // and may itself hold any character.
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next());
            !matches!(state, None | Some('Z' | 'X'))
        })
    })
}

fn print_human(command: &CtlCommand, response: &Response) {
    let status = if response.ok { "ok" } else { "error" };
    if response.message.is_empty() {
        outln!("{status}");
    } else {
        outln!("{status}: {}", response.message);
    }
    response.errors.iter().for_each(|e| outln!("{e}"));
    if let CtlCommand::Notify { .. } = command {
        out!("{}", notify_table(&response.data));
    }
    // A zone-status of some unknown zones still shows the known ones.
    let partial = matches!(command, CtlCommand::ZoneStatus { .. }) && response.data.is_array();
    if !response.ok && !partial {
        return;
    }
    match command {
        CtlCommand::Status => out!("{}", status_table(&response.data)),
        CtlCommand::ZoneStatus { .. } => {
            out!("{}", zone_table(&response.data));
            out!("{}", error_lines(&response.data));
            out!("{}", secondary_table(&response.data));
            out!("{}", dnssec_lines(&response.data));
        }
        CtlCommand::Keys { .. } => out!("{}", keys_table(&response.data)),

        CtlCommand::Stats { .. } => out!("{}", stats_table(&response.data)),
        _ => {}
    }
}

fn status_table(data: &Value) -> String {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Array(items) if items.is_empty() => "-".into(),
        Value::Array(items) => items.iter().map(text_of).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    };
    let zones = &data["zones"];
    let state = |part: &Value| {
        let lost = match part["lost"].as_array() {
            Some(lost) if !lost.is_empty() => {
                format!("; LOST on {} (interface deleted)", text(&part["lost"]))
            }
            _ => String::new(),
        };
        if part["enabled"] == Value::Bool(true) {
            format!("on ({}){lost}", text(&part["listeners"]))
        } else {
            "off".into()
        }
    };
    let rows = [
        ("version", text(&data["version"])),
        ("pid", text(&data["pid"])),
        ("uptime", format!("{} s", text(&data["uptime_seconds"]))),
        ("primary zones", primary_zones(zones)),
        ("secondary zones", secondary_zones(zones)),
        ("listeners", text(&data["listeners"])),
        ("workers", text(&data["workers"])),
        ("tls", state(&data["tls"])),
        ("xdp", state(&data["xdp"])),
    ];
    rows.iter().map(|(k, v)| format!("{k:<16} {v}\n")).collect()
}

/// The secondary zones and those served, and the catalog members held
/// back for their DS, which `zone-status` explains.
fn secondary_zones(zones: &serde_json::Value) -> String {
    let (all, served) = (
        text_of(&zones["secondary"]),
        text_of(&zones["secondary_served"]),
    );
    match zones["secondary_held_for_ds"].as_u64() {
        Some(held) if held > 0 => format!(
            "{all} ({served} served); {held} catalog members held back for their DS (see zone-status)"
        ),
        _ => format!("{all} ({served} served)"),
    }
}

/// The primary zones served, and those whose file failed to load (an
/// older version served, or none), which `zone-status` explains.
fn primary_zones(zones: &serde_json::Value) -> String {
    let served = text_of(&zones["primary"]);
    match zones["primary_file_failed"].as_u64() {
        Some(failed) if failed > 0 => {
            format!("{served} served; {failed} whose file failed to load (see zone-status)")
        }
        _ => served,
    }
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

fn zone_table(data: &Value) -> String {
    let rows: Vec<[String; 4]> = data
        .as_array()
        .map(|zones| {
            zones
                .iter()
                .map(|z| {
                    [
                        text_of(&z["zone"]),
                        text_of(&z["role"]),
                        text_of(&z["serial"]),
                        z["loaded_at"].as_u64().map_or("-".into(), format_time),
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    table(&["ZONE", "ROLE", "SERIAL", "LOADED"], &rows)
}

/// Why a zone's last load or transfer failed, one line per zone: a zone
/// whose file never loaded shows no serial, and this says why.
fn error_lines(data: &Value) -> String {
    let zones = data.as_array().map(Vec::as_slice).unwrap_or_default();
    let failed = zones
        .iter()
        .filter_map(|z| Some((z, z["last_error"].as_str()?)));
    failed
        .map(|(z, why)| match z["failures"].as_u64() {
            // Transferred well, but its version is not taken: a state.
            _ if z["catalog_rejected"] == Value::Bool(true) => format!(
                "{}: catalog version not taken, members unchanged: {why}\n",
                text_of(&z["zone"])
            ),
            // Transferred well, but not signed: an older version served.
            _ if z["signing_failed"] == Value::Bool(true) => format!(
                "{}: the version received is not served: {why}\n",
                text_of(&z["zone"])
            ),
            // A secondary zone whose checks work again keeps its last
            // error for the record: said as past, not as its state.
            Some(0) => format!(
                "{}: checks work again; the last error was: {why}\n",
                text_of(&z["zone"])
            ),
            _ => format!("{}: last error: {why}\n", text_of(&z["zone"])),
        })
        .chain(zones.iter().flat_map(|z| {
            // A secondary takes no updates: what its journal holds is the
            // versions transferred (black-box finding BS-12).
            let journal = match z["role"].as_str() {
                Some("secondary") => {
                    "journal not written: the versions transferred and their IXFR history are \
                     held in memory only (tried again every second)"
                }
                _ => "journal not written, updates answered SERVFAIL (tried again every second)",
            };
            let said = [
                (
                    "kept_copy_error",
                    "kept copy not written (tried again every second)",
                ),
                ("journal_error", journal),
                (
                    "write_back_error",
                    "zone file not written back (tried again every minute)",
                ),
                (
                    "update_signing_error",
                    "updated zone not signed, its updates answered SERVFAIL",
                ),
            ];
            said.into_iter().filter_map(|(field, what)| {
                let why = z[field].as_str()?;
                Some(format!("{}: {what}: {why}\n", text_of(&z["zone"])))
            })
        }))
        .chain(
            zones
                .iter()
                .filter(|z| z["frozen"] == Value::Bool(true))
                .map(|z| {
                    let zone = text_of(&z["zone"]);
                    format!("{zone}: frozen, updates refused (heron ctl thaw {zone})\n")
                }),
        )
        .collect()
}

/// What a signed zone's rollover waits for, one line per zone waiting.
fn dnssec_lines(data: &Value) -> String {
    let zones = data.as_array().map(Vec::as_slice).unwrap_or_default();
    let mut out = String::new();
    for z in zones {
        if let Some(waiting) = z["dnssec_waiting"].as_str() {
            out += &format!("\n{}: DNSSEC rollover {waiting}\n", text_of(&z["zone"]));
            if let Some(e) = z["dnssec_parent_error"].as_str() {
                out += &format!("{}: last parent check: {e}\n", text_of(&z["zone"]));
            }
        }
    }
    out
}

fn keys_table(data: &Value) -> String {
    let rows: Vec<[String; 9]> = (data.as_array().map(Vec::as_slice).unwrap_or_default())
        .iter()
        .map(|k| {
            [
                text_of(&k["tag"]),
                text_of(&k["algorithm"]),
                text_of(&k["role"]),
                match k["roll_requested"] == Value::Bool(true) {
                    true => format!("{} (roll asked)", text_of(&k["goal"])),
                    false => text_of(&k["goal"]),
                },
                text_of(&k["dnskey"]),
                text_of(&k["rrsig"]),
                text_of(&k["ds"]),
                text_of(&k["next"]),
                time_of(&k["next_at"]),
            ]
        })
        .collect();
    let header = [
        "TAG", "ALG", "ROLE", "GOAL", "DNSKEY", "RRSIG", "DS", "NEXT", "AT",
    ];
    table(&header, &rows)
}

fn time_of(v: &Value) -> String {
    v.as_u64().map_or("-".into(), format_time)
}

/// The secondary zones' timers and primaries, if there are any.
fn secondary_table(data: &Value) -> String {
    let zones = data.as_array().map(Vec::as_slice).unwrap_or_default();
    let mut rows: Vec<[String; 9]> = Vec::new();
    for z in zones.iter().filter(|z| z["role"] == "secondary") {
        let primaries = z["primaries"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        for (i, p) in primaries.iter().enumerate() {
            let reachable = match p["reachable"].as_bool() {
                Some(true) => "yes",
                Some(false) => "no",
                None => "-",
            };
            let zone_cells = [
                text_of(&z["zone"]),
                text_of(&z["catalog"]),
                time_of(&z["transferred_at"]),
                match z["checking"].as_bool() {
                    Some(true) => "running now".into(),
                    _ => time_of(&z["next_refresh"]),
                },
                expires_of(z),
            ];
            let [zone, catalog, transferred, refresh, expire] = if i == 0 {
                zone_cells
            } else {
                Default::default()
            };
            rows.push([
                zone,
                catalog,
                transferred,
                refresh,
                expire,
                match p["source"].as_str() {
                    Some(source) => format!("{} via {source}", text_of(&p["address"])),
                    None => text_of(&p["address"]),
                },
                reachable.into(),
                text_of(&p["tsig_key"]),
                match p["backoff_until"].as_u64() {
                    Some(until) => format!("backoff until {}", format_time(until)),
                    None => text_of(&p["last_error"]),
                },
            ]);
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    let header = [
        "SECONDARY",
        "CATALOG",
        "TRANSFERRED",
        "NEXT REFRESH",
        "EXPIRES",
        "PRIMARY",
        "UP",
        "KEY",
        "LAST ERROR",
    ];
    format!("\n{}", table(&header, &rows))
}

/// A secondary zone's EXPIRES cell: when, or `expired` for one that was
/// transferred and is not answered from any more (black-box finding: it
/// showed `-`, as for a zone never transferred).
fn expires_of(z: &Value) -> String {
    let expired = z["served"] == Value::Bool(false) && !z["transferred_at"].is_null();
    match (z["expire_at"].is_null(), expired) {
        (true, true) => "expired".into(),
        _ => time_of(&z["expire_at"]),
    }
}

fn stats_table(data: &Value) -> String {
    let mut rows: Vec<[String; 2]> = Vec::new();
    let sections = [
        ("refused", "refused"),
        ("queries", "queries"),
        ("queries_by_type", "queries of type"),
        ("responses", "responses"),
        ("tcp_connections_accepted", "tcp connections accepted"),
        ("tcp_connections_refused", "tcp connections refused"),
        ("tcp_connections_closed", "tcp connections closed"),
        ("udp_datagrams_dropped", "udp datagrams dropped"),
    ];
    for (key, title) in sections {
        for (name, n) in data[key].as_object().into_iter().flatten() {
            rows.push([format!("{title} {name}"), text_of(n)]);
        }
    }
    // operations.md promises it; only the JSON had it (black-box finding).
    if !data["responses_truncated"].is_null() {
        let truncated = text_of(&data["responses_truncated"]);
        rows.push(["responses truncated".into(), truncated]);
    }
    rows.push([
        "tcp connections open".into(),
        text_of(&data["tcp_connections_open"]),
    ]);
    for kind in ["idle", "busy"] {
        let shed = &data[format!("tcp_{kind}_connections_shed")];
        if !shed.is_null() {
            rows.push([format!("tcp {kind} connections shed"), text_of(shed)]);
        }
    }
    if let Some(dnstap) = data["dnstap"].as_object() {
        for (counter, n) in dnstap {
            rows.push([format!("dnstap {counter}"), text_of(n)]);
        }
    }
    table(&["COUNTER", "VALUE"], &rows)
}

fn notify_table(data: &Value) -> String {
    let targets = data.as_array().map(Vec::as_slice).unwrap_or_default();
    if targets.is_empty() {
        return String::new();
    }
    let rows: Vec<[String; 2]> = (targets.iter())
        .map(|t| [text_of(&t["target"]), text_of(&t["result"])])
        .collect();
    table(&["TARGET", "RESULT"], &rows)
}

/// Columns padded to their widest cell.
fn table<const N: usize>(header: &[&str; N], rows: &[[String; N]]) -> String {
    let mut widths = header.map(str::len);
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = (cells.iter().zip(widths))
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out += &line(row.iter().map(String::as_str).collect());
    }
    out
}

/// Seconds since the epoch as UTC `YYYY-MM-DD HH:MM:SS`.
pub(crate) fn format_time(seconds: u64) -> String {
    let (days, rest) = (seconds / 86_400, seconds % 86_400);
    let (year, month, day) = heron_proto::rdata::civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_shown_in_utc() {
        assert_eq!(format_time(0), "1970-01-01 00:00:00Z");
        assert_eq!(format_time(951_782_400), "2000-02-29 00:00:00Z");
        assert_eq!(format_time(1_795_000_000), "2026-11-18 11:06:40Z");
    }

    /// Black-box finding: a zone whose file never loaded showed "-" and
    /// nothing else; why is said under the table now.
    #[test]
    fn zone_status_says_why_a_zone_failed() {
        let data = serde_json::json!([
            {"zone": "bad.test.", "role": "primary", "serial": null,
             "last_error": "bad.test.zone:3: bad IPv4 address"},
            {"zone": "good.test.", "role": "primary", "serial": 7},
        ]);
        let lines = error_lines(&data);
        assert_eq!(
            lines,
            "bad.test.: last error: bad.test.zone:3: bad IPv4 address\n"
        );
    }

    /// A kept copy the disk refuses is said as the zone's state, whether
    /// its checks work or not (regression hunt: said as past).
    #[test]
    fn a_kept_copy_not_written_is_said_as_now() {
        let data = serde_json::json!([
            {"zone": "full.test.", "role": "secondary", "failures": 0,
             "kept_copy_error": "/d/full.zone: No space left on device"},
        ]);
        assert_eq!(
            error_lines(&data),
            "full.test.: kept copy not written (tried again every second): /d/full.zone: No space left on device\n"
        );
    }

    /// Black-box finding: a secondary zone back to health still showed
    /// its last error as if it were its state.
    #[test]
    fn an_expired_zone_says_so() {
        let expired = serde_json::json!({"served": false, "transferred_at": 1_700_000_000u64,
            "expire_at": null});
        assert_eq!(expires_of(&expired), "expired");
        let never = serde_json::json!({"served": false, "transferred_at": null, "expire_at": null});
        assert_eq!(expires_of(&never), "-");
    }

    /// The table says what the JSON says of truncated responses (black-box
    /// finding: only the JSON had it, though operations.md names it).
    #[test]
    fn the_stats_table_counts_truncated_responses() {
        let data = serde_json::json!({"responses": {"NOERROR": 9}, "responses_truncated": 2,
            "tcp_connections_open": 0});
        let table = stats_table(&data);
        let row = table.lines().find(|l| l.starts_with("responses truncated"));
        assert_eq!(
            row.map(|r| r.split_whitespace().last()),
            Some(Some("2")),
            "{table}"
        );
    }

    #[test]
    fn a_recovered_secondary_zones_last_error_is_said_as_past() {
        let data = serde_json::json!([
            {"zone": "ok.test.", "role": "secondary", "failures": 0,
             "last_error": "192.0.2.1:53: refused"},
            {"zone": "down.test.", "role": "secondary", "failures": 3,
             "last_error": "192.0.2.1:53: refused"},
            {"zone": "cat.test.", "role": "secondary", "failures": 0,
             "catalog_rejected": true, "last_error": "serial 6 rejected: bad"},
        ]);
        assert_eq!(
            error_lines(&data),
            "ok.test.: checks work again; the last error was: 192.0.2.1:53: refused\n\
             down.test.: last error: 192.0.2.1:53: refused\n\
             cat.test.: catalog version not taken, members unchanged: serial 6 rejected: bad\n"
        );
    }

    /// A journal not written is said as refused updates for a primary,
    /// and as versions held in memory for a secondary, which takes no
    /// updates (black-box finding BS-12).
    #[test]
    fn a_journal_not_written_is_said_by_role() {
        let data = serde_json::json!([
            {"zone": "p.test.", "role": "primary", "journal_error": "p.jnl: No space left"},
            {"zone": "s.test.", "role": "secondary", "journal_error": "s.jnl: No space left"},
        ]);
        let lines = error_lines(&data);
        assert!(
            lines.contains("p.test.: journal not written, updates answered SERVFAIL"),
            "{lines}"
        );
        assert!(
            lines.contains("s.test.: journal not written: the versions transferred"),
            "{lines}"
        );
        assert!(
            !lines.contains("s.test.: journal not written, updates"),
            "{lines}"
        );
    }

    /// Black-box finding: a primary zone whose file failed to load was
    /// left out of the count on-call reads first.
    #[test]
    fn status_counts_primary_zones_whose_file_failed() {
        let zones = |failed: u64| {
            serde_json::json!({"zones": {"primary": 5, "primary_file_failed": failed,
                "secondary": 0, "secondary_served": 0}})
        };
        let table = status_table(&zones(1));
        assert!(
            table.contains("primary zones    5 served; 1 whose file failed to load"),
            "{table}"
        );
        assert!(status_table(&zones(0)).contains("primary zones    5\n"));
    }

    /// BP-2: a rollover asked for and not begun shows in the key table.
    #[test]
    fn a_key_whose_roll_is_asked_says_so() {
        let key = |asked: bool| {
            serde_json::json!([{"tag": 29842, "algorithm": 13, "role": "zsk", "goal": "omnipresent",
                    "dnskey": "rumoured", "rrsig": "rumoured", "ds": null,
                    "next": "DNSKEY omnipresent", "next_at": null, "roll_requested": asked}])
        };
        assert!(keys_table(&key(true)).contains("omnipresent (roll asked)"));
        assert!(!keys_table(&key(false)).contains("roll asked"));
    }

    #[test]
    fn tables_pad_columns_to_the_widest_cell() {
        let rows = [["a.test".to_string(), "7".to_string()]];
        assert_eq!(
            table(&["ZONE", "SERIAL"], &rows),
            "ZONE    SERIAL\na.test  7\n"
        );
    }
}
