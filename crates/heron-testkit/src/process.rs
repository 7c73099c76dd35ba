//! Name servers as child processes, each with its own temporary directory.

use std::collections::HashSet;
use std::fmt;
use std::fs::{self, File};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use heron_proto::message::{Header, flags};
use heron_proto::{Name, RType};

use crate::client::{QueryOpts, build_query};

pub const NSD: &str = "/usr/sbin/nsd";
pub const KNOTD: &str = "/usr/sbin/knotd";
pub const KNOTC: &str = "/usr/sbin/knotc";
pub const NAMED: &str = "/usr/sbin/named";

/// Readiness probe: this many SOA queries, each waiting this long.
const READY_ATTEMPTS: u32 = 100;
const READY_WAIT: Duration = Duration::from_millis(50);
/// How long a server gets to exit after SIGTERM before SIGKILL.
const TERM_WAIT: Duration = Duration::from_secs(5);
/// Fresh ports to try when a server finds its port taken.
const PORT_RETRIES: u32 = 3;

/// Ports handed out by this process, so that parallel tests never get the
/// same one even before a server has bound it.
static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// A port on 127.0.0.1 that is free for both UDP and TCP right now (and not
/// handed out before by this process). Taken below the kernel's ephemeral
/// range where it can: a port from that range (what binding port 0 gives)
/// can go to any outbound connection (a transfer, a NOTIFY, another test's
/// client) between this choice and the server's bind, and the server then
/// finds it in use.
pub fn free_port() -> u16 {
    below_ephemeral_range()
        .into_iter()
        .flatten()
        .chain(std::iter::repeat_with(ephemeral_port).flatten().take(200))
        .find(|&port| free_for_udp_and_tcp(port) && hand_out(port))
        .expect("no port free for both UDP and TCP on 127.0.0.1")
}

/// Up to 200 ports spread over the 16,384 below the ephemeral range,
/// from a start that differs between test processes. None where that
/// range starts too low to leave room.
fn below_ephemeral_range() -> Option<impl Iterator<Item = u16>> {
    const SPAN: u32 = 16_384;
    const STRIDE: u32 = 7_919; // prime: the tries do not repeat
    let text = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let low: u32 = text.split_whitespace().next()?.parse().ok()?;
    let first = low.checked_sub(SPAN).filter(|&first| first >= 1024)?;
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .ok()?
        .subsec_nanos();
    let start = std::process::id().wrapping_mul(2_654_435_761) ^ nanos;
    Some((0..200u32).map(move |i| (first + start.wrapping_add(i * STRIDE) % SPAN) as u16))
}

/// A port the kernel picks for UDP.
fn ephemeral_port() -> Option<u16> {
    let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).ok()?;
    udp.local_addr().ok().map(|a| a.port())
}

fn free_for_udp_and_tcp(port: u16) -> bool {
    let local = (Ipv4Addr::LOCALHOST, port);
    UdpSocket::bind(local).is_ok() && TcpListener::bind(local).is_ok()
}

/// Records `port` as handed out; false if it was before.
fn hand_out(port: u16) -> bool {
    let mut guard = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    guard.get_or_insert_with(HashSet::new).insert(port)
}

/// Which program a [`ServerProcess`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerKind {
    Nsd,
    Knot,
    Bind,
    Heron,
}

impl fmt::Display for ServerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ServerKind::Nsd => "NSD",
            ServerKind::Knot => "Knot",
            ServerKind::Bind => "BIND",
            ServerKind::Heron => "Heron",
        })
    }
}

/// A temporary directory removed on drop (kept when `HERON_TESTKIT_KEEP`
/// is set, for post-mortems).
pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    pub(crate) fn new(tag: &str) -> TempDir {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "heron-tk-{tag}-{}-{n}-{nanos:x}",
            std::process::id()
        ));
        fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot create temp dir {}: {e}", dir.display()));
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("HERON_TESTKIT_KEEP").is_none() {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
}

use heron_sys::process::Signal;
const SIGTERM: Signal = Signal::TERM;
const SIGKILL: Signal = Signal::KILL;
const SIGHUP: Signal = Signal::HUP;

/// Live (not zombie) processes in process group `pgid`, from /proc.
/// Orphaned helpers become zombies of PID 1, which may reap them late;
/// zombies hold no sockets, so they do not count.
pub fn live_group_members(pgid: u32) -> Vec<u32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let want = pgid.to_string();
    let mut out = Vec::new();
    for entry in dir.flatten().take(1_000_000) {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // After the ")" that ends the command name: state ppid pgrp ...
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let mut f = rest.split_whitespace();
        let state = f.next();
        if f.nth(1) == Some(want.as_str()) && state != Some("Z") {
            out.push(pid);
        }
    }
    out
}

fn send_signal(pid: i32, sig: Signal) {
    // The PIDs are those of children we spawned and have not yet reaped;
    // a negative one names the process group a child leads.
    let _ = if pid < 0 {
        heron_sys::process::signal_group(pid.unsigned_abs(), sig)
    } else {
        heron_sys::process::signal_process(pid as u32, sig)
    };
}

/// A name server child process. Dropping it stops the server (SIGTERM, then
/// SIGKILL to its process group after a bounded wait) and removes its
/// temporary directory.
pub struct ServerProcess {
    kind: ServerKind,
    child: Option<Child>,
    addr: SocketAddr,
    log_path: PathBuf,
    dir: TempDir,
}

/// Origin and zone file of one zone to serve.
type Zone = (String, PathBuf);

fn own_zones<O: AsRef<str>, P: AsRef<Path>>(zones: &[(O, P)]) -> Vec<Zone> {
    assert!(!zones.is_empty(), "a server needs at least one zone");
    zones
        .iter()
        .map(|(o, p)| {
            let mut origin = o.as_ref().to_string();
            if !origin.ends_with('.') {
                origin.push('.');
            }
            let path = p.as_ref();
            let path = path
                .canonicalize()
                .unwrap_or_else(|e| panic!("zone file {}: {e}", path.display()));
            (origin, path)
        })
        .collect()
}

pub(crate) fn require_binary(path: &str) {
    if !Path::new(path).exists() {
        panic!("{path} is missing: {}", crate::INSTALL_HINT);
    }
}

impl ServerProcess {
    /// NSD 4 in the foreground (`nsd -d`), one server process.
    pub fn nsd<O: AsRef<str>, P: AsRef<Path>>(zones: &[(O, P)]) -> ServerProcess {
        require_binary(NSD);
        let zones = own_zones(zones);
        Self::start_with_retries(ServerKind::Nsd, &zones, |dir, port| {
            let d = dir.display();
            let mut conf = format!(
                "server:\n\
                 \x20   ip-address: 127.0.0.1@{port}\n\
                 \x20   server-count: 1\n\
                 \x20   username: \"\"\n\
                 \x20   chroot: \"\"\n\
                 \x20   database: \"\"\n\
                 \x20   zonelistfile: \"{d}/zone.list\"\n\
                 \x20   xfrdfile: \"{d}/xfrd.state\"\n\
                 \x20   pidfile: \"{d}/nsd.pid\"\n\
                 \x20   zonesdir: \"{d}\"\n\
                 \x20   verbosity: 1\n\
                 \x20   hide-version: no\n\
                 \x20   minimal-responses: yes\n\
                 \x20   rrl-ratelimit: 0\n\
                 \x20   rrl-whitelist-ratelimit: 0\n\
                 remote-control:\n\
                 \x20   control-enable: no\n"
            );
            for (origin, file) in &zones {
                conf.push_str(&format!(
                    "zone:\n    name: \"{origin}\"\n    zonefile: \"{}\"\n",
                    file.display()
                ));
            }
            let path = dir.join("nsd.conf");
            write(&path, &conf);
            let mut cmd = Command::new(NSD);
            cmd.arg("-d").arg("-c").arg(&path);
            cmd
        })
    }

    /// Knot DNS 3 (foreground is its default), one worker of each kind,
    /// semantic checks off so that intentional edge cases load.
    pub fn knot<O: AsRef<str>, P: AsRef<Path>>(zones: &[(O, P)]) -> ServerProcess {
        require_binary(KNOTD);
        let zones = own_zones(zones);
        Self::start_with_retries(ServerKind::Knot, &zones, |dir, port| {
            let d = dir.display();
            let mut conf = format!(
                "server:\n\
                 \x20   rundir: \"{d}\"\n\
                 \x20   listen: 127.0.0.1@{port}\n\
                 \x20   background-workers: 1\n\
                 \x20   udp-workers: 1\n\
                 \x20   tcp-workers: 1\n\
                 log:\n\
                 \x20 - target: stderr\n\
                 \x20   any: info\n\
                 database:\n\
                 \x20   storage: \"{d}\"\n\
                 \x20   journal-db-max-size: 16M\n\
                 \x20   kasp-db-max-size: 16M\n\
                 \x20   timer-db-max-size: 16M\n\
                 \x20   catalog-db-max-size: 16M\n\
                 template:\n\
                 \x20 - id: default\n\
                 \x20   storage: \"{d}\"\n\
                 \x20   zonefile-sync: -1\n\
                 \x20   zonefile-load: whole\n\
                 \x20   journal-content: none\n\
                 \x20   semantic-checks: off\n\
                 zone:\n"
            );
            for (origin, file) in &zones {
                conf.push_str(&format!(
                    "  - domain: \"{origin}\"\n    file: \"{}\"\n",
                    file.display()
                ));
            }
            let path = dir.join("knot.conf");
            write(&path, &conf);
            let mut cmd = Command::new(KNOTD);
            cmd.arg("-c").arg(&path);
            cmd
        })
    }

    /// BIND 9 in the foreground (`named -g -n 1`), authoritative only.
    pub fn bind<O: AsRef<str>, P: AsRef<Path>>(zones: &[(O, P)]) -> ServerProcess {
        require_binary(NAMED);
        let zones = own_zones(zones);
        Self::start_with_retries(ServerKind::Bind, &zones, |dir, port| {
            let d = dir.display();
            let mut conf = format!(
                "options {{\n\
                 \x20   directory \"{d}\";\n\
                 \x20   pid-file \"{d}/named.pid\";\n\
                 \x20   session-keyfile \"{d}/session.key\";\n\
                 \x20   listen-on port {port} {{ 127.0.0.1; }};\n\
                 \x20   listen-on-v6 {{ none; }};\n\
                 \x20   recursion no;\n\
                 \x20   dnssec-validation no;\n\
                 \x20   notify no;\n\
                 \x20   minimal-responses no-auth;\n\
                 }};\n\
                 controls {{ }};\n"
            );
            for (origin, file) in &zones {
                conf.push_str(&format!(
                    "zone \"{origin}\" {{\n    type primary;\n    file \"{}\";\n    \
                     check-names ignore;\n}};\n",
                    file.display()
                ));
            }
            let path = dir.join("named.conf");
            write(&path, &conf);
            let mut cmd = Command::new(NAMED);
            cmd.arg("-g").arg("-n").arg("1").arg("-c").arg(&path);
            cmd
        })
    }

    /// Heron: `BINARY serve --listen 127.0.0.1:PORT --zone ORIGIN=FILE ...`.
    pub fn heron<O: AsRef<str>, P: AsRef<Path>>(binary: &Path, zones: &[(O, P)]) -> ServerProcess {
        if !binary.exists() {
            panic!("Heron binary {} does not exist", binary.display());
        }
        let zones = own_zones(zones);
        Self::start_with_retries(ServerKind::Heron, &zones, |_dir, port| {
            let mut cmd = Command::new(binary);
            cmd.arg("serve")
                .arg("--listen")
                .arg(format!("127.0.0.1:{port}"));
            for (origin, file) in &zones {
                cmd.arg("--zone")
                    .arg(format!("{origin}={}", file.display()));
            }
            cmd
        })
    }

    /// Heron with a configuration file: `make_config(port)` returns the TOML
    /// (it must listen on 127.0.0.1:port); `origin` is the zone to wait for.
    pub fn heron_with_config(
        binary: &Path,
        origin: &str,
        make_config: impl Fn(u16) -> String,
    ) -> ServerProcess {
        Self::heron_config_under(binary, origin, None, make_config)
    }

    /// [`ServerProcess::heron_with_config`] under an open-files limit of
    /// `open_files` (soft and hard: `ulimit -n`, the shell then replaced
    /// by the server).
    pub fn heron_with_open_files(
        binary: &Path,
        origin: &str,
        open_files: u64,
        make_config: impl Fn(u16) -> String,
    ) -> ServerProcess {
        Self::heron_config_under(binary, origin, Some(open_files), make_config)
    }

    fn heron_config_under(
        binary: &Path,
        origin: &str,
        open_files: Option<u64>,
        make_config: impl Fn(u16) -> String,
    ) -> ServerProcess {
        let zones = [(format!("{}.", origin.trim_end_matches('.')), PathBuf::new())];
        Self::start_with_retries(ServerKind::Heron, &zones, |dir, port| {
            let path = dir.join("heron.toml");
            write(&path, &make_config(port));
            let mut cmd = match open_files {
                None => Command::new(binary),
                Some(limit) => {
                    let mut shell = Command::new("sh");
                    let script = format!("ulimit -n {limit} && exec \"$0\" \"$@\"");
                    shell.arg("-c").arg(script).arg(binary);
                    shell
                }
            };
            cmd.arg("serve").arg("--config").arg(&path);
            cmd
        })
    }

    /// Heron with a configuration file on a port chosen beforehand (so
    /// that a primary started first can be told where to send NOTIFY);
    /// `origin` is the zone to wait for. On failure returns the log.
    pub fn heron_on_port(
        binary: &Path,
        port: u16,
        origin: &str,
        config: &str,
    ) -> Result<ServerProcess, String> {
        let dir = TempDir::new("heron");
        let path = dir.0.join("heron.toml");
        write(&path, config);
        let mut cmd = Command::new(binary);
        cmd.arg("serve").arg("--config").arg(&path);
        Self::start(ServerKind::Heron, dir, port, cmd, origin)
    }

    /// NSD, Knot or BIND on a configuration the test writes:
    /// `make_config(dir)` returns the text for a fresh folder `dir` (it
    /// must listen on 127.0.0.1:`port`), written there under the name the
    /// server reads (`nsd.conf`, `knot.conf`, `named.conf`); `origin` is
    /// the zone to wait for. On failure returns the log.
    pub fn peer_with_config(
        kind: ServerKind,
        port: u16,
        origin: &str,
        make_config: impl FnOnce(&Path) -> String,
    ) -> Result<ServerProcess, String> {
        require_binary(match kind {
            ServerKind::Nsd => NSD,
            ServerKind::Knot => KNOTD,
            ServerKind::Bind => NAMED,
            ServerKind::Heron => panic!("start Heron with heron_on_port"),
        });
        let dir = TempDir::new(&format!("{}-conf", kind.to_string().to_lowercase()));
        let conf = make_config(&dir.0);
        let cmd = crate::peer_conf::peer_command(kind, &dir.0, &conf);
        Self::start(kind, dir, port, cmd, origin)
    }

    /// Sends SIGHUP (reload) to the server.
    pub fn reload(&self) {
        if let Some(child) = &self.child {
            send_signal(child.id() as i32, SIGHUP);
        }
    }

    /// Kills the server at once (SIGKILL, no chance to clean up), as a
    /// crash or a power cut would, and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            send_signal(-(child.id() as i32), SIGKILL);
            let _ = child.wait();
        }
    }

    /// Sends SIGTERM and waits (bounded) for the process to exit; returns
    /// its exit status, or None if it had to be killed.
    pub fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        self.terminate_within(TERM_WAIT)
    }

    /// Sends SIGTERM and waits up to `limit` for the process to exit;
    /// returns its exit status, or None if it was still there (it is
    /// then killed).
    pub fn terminate_within(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let child = self.child.as_mut()?;
        send_signal(child.id() as i32, SIGTERM);
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stop();
        None
    }

    fn start_with_retries(
        kind: ServerKind,
        zones: &[Zone],
        mut command: impl FnMut(&Path, u16) -> Command,
    ) -> ServerProcess {
        let mut last_log = String::new();
        for _ in 0..PORT_RETRIES {
            let dir = TempDir::new(&kind.to_string().to_lowercase());
            let port = free_port();
            let cmd = command(&dir.0, port);
            match Self::start(kind, dir, port, cmd, &zones[0].0) {
                Ok(server) => return server,
                Err(log) if port_taken(&log) => last_log = log,
                Err(log) => panic!("{kind} failed to start; its log:\n{log}"),
            }
        }
        panic!("{kind} found its port taken {PORT_RETRIES} times; last log:\n{last_log}");
    }

    /// Spawns `cmd` and waits for an SOA answer for `origin`. On failure
    /// returns the log (the process stopped and reaped).
    pub(crate) fn start(
        kind: ServerKind,
        dir: TempDir,
        port: u16,
        mut cmd: Command,
        origin: &str,
    ) -> Result<ServerProcess, String> {
        let log_path = dir.0.join("server.log");
        let log = File::create(&log_path)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", log_path.display()));
        let log2 = log.try_clone().expect("clone log file handle");
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log2))
            .current_dir(&dir.0)
            // Its own process group, so that helpers it forks (NSD's server
            // and xfrd processes) can be stopped with it.
            .process_group(0);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {kind} ({cmd:?}): {e}"));
        let mut server = ServerProcess {
            kind,
            child: Some(child),
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            log_path,
            dir,
        };
        match server.wait_ready(origin) {
            Ok(()) => Ok(server),
            Err(why) => {
                server.stop();
                Err(format!("{why}\n{}", server.log()))
            }
        }
    }

    fn wait_ready(&mut self, origin: &str) -> Result<(), String> {
        let qname = Name::parse(origin).map_err(|e| format!("bad origin {origin}: {e}"))?;
        let sock = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|e| e.to_string())?;
        sock.set_read_timeout(Some(READY_WAIT))
            .map_err(|e| e.to_string())?;
        let mut buf = vec![0u8; 65535];
        for attempt in 0..READY_ATTEMPTS {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(format!("{} exited early ({status})", self.kind));
            }
            let id = 0x5000 + attempt as u16;
            let query = build_query(
                &qname,
                RType::SOA,
                &QueryOpts {
                    id,
                    ..QueryOpts::default()
                },
            );
            let started = Instant::now();
            if sock.send_to(&query, self.addr).is_ok() {
                while started.elapsed() < READY_WAIT {
                    let Ok((n, from)) = sock.recv_from(&mut buf) else {
                        break;
                    };
                    let Some(h) = Header::read(&buf[..n]) else {
                        continue;
                    };
                    if from == self.addr && h.id == id && h.has(flags::QR) {
                        if h.rcode() == 0 && h.ancount > 0 && self.tcp_ready() {
                            return Ok(());
                        }
                        break;
                    }
                }
            }
            let left = READY_WAIT.saturating_sub(started.elapsed());
            std::thread::sleep(left);
        }
        Err(format!(
            "{} gave no SOA answer for {origin} on {} within {} attempts of {:?}",
            self.kind, self.addr, READY_ATTEMPTS, READY_WAIT
        ))
    }

    fn tcp_ready(&self) -> bool {
        TcpStream::connect_timeout(&self.addr, Duration::from_secs(1)).is_ok()
    }

    /// Stops the server (idempotent): SIGTERM, a bounded wait, then SIGKILL
    /// to the process group.
    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = child.id() as i32;
        if let Ok(None) = child.try_wait() {
            send_signal(pid, SIGTERM);
            let deadline = Instant::now() + TERM_WAIT;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        if let Ok(None) = child.try_wait() {
            send_signal(-pid, SIGKILL);
            let _ = child.wait();
        }
        // The leader is gone; helpers it forked (NSD's server and xfrd
        // processes) may still be winding down: kill what is left of the
        // group and wait, bounded, until it is empty.
        for _ in 0..100 {
            if live_group_members(pid as u32).is_empty() {
                break;
            }
            send_signal(-pid, SIGKILL);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn kind(&self) -> ServerKind {
        self.kind
    }

    /// Where the server listens (UDP and TCP).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Everything the server wrote to stdout and stderr so far.
    /// Waits up to 10 s for `needle` in the server's log; true if seen.
    pub fn wait_for_log(&self, needle: &str) -> bool {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if self.log().contains(needle) {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        false
    }

    pub fn log(&self) -> String {
        fs::read(&self.log_path)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_else(|e| format!("(no log at {}: {e})", self.log_path.display()))
    }

    /// The server's temporary directory (configuration, log, state).
    pub fn dir(&self) -> &Path {
        &self.dir.0
    }

    /// The child's PID (also its process group), while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

impl fmt::Debug for ServerProcess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerProcess")
            .field("kind", &self.kind)
            .field("addr", &self.addr)
            .field("dir", &self.dir.0)
            .finish()
    }
}

fn port_taken(log: &str) -> bool {
    let l = log.to_ascii_lowercase();
    l.contains("address already in use") || l.contains("address in use")
}

pub(crate) fn write(path: &Path, text: &str) {
    fs::write(path, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ports handed out are distinct, free for both protocols, and below
    /// the ephemeral range (where outbound connections take theirs).
    #[test]
    fn free_ports_are_distinct_and_below_the_ephemeral_range() {
        let low: Option<u16> = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|t| t.split_whitespace().next()?.parse().ok());
        let ports: Vec<u16> = (0..300).map(|_| free_port()).collect();
        let distinct: HashSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len());
        if let Some(low) = low.filter(|&low| low >= 1024 + 16_384) {
            assert!(
                ports.iter().all(|&p| p < low && p >= low - 16_384),
                "{ports:?}"
            );
        }
        for &port in &ports[..10] {
            assert!(free_for_udp_and_tcp(port));
        }
    }
}
