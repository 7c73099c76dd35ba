//! The servers under test as child processes: configuration with a given
//! worker count, started pinned with `taskset` inside a cgroup (so a CPU
//! quota and CPU accounting apply to every process and thread they make),
//! readiness by query, CPU time and memory, and a bounded stop.

use std::fmt::Write as _;
use std::fs::{self, File};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use heron_proto::message::{Header, flags};
use heron_proto::{Name, RType};
use heron_testkit::{QueryOpts, build_query, free_port};
use serde::{Deserialize, Serialize};

use crate::sys::{self, Cgroup};

/// SOA queries in flight at once while sweeping every zone of a workload.
const SWEEP_WINDOW: usize = 256;

pub const NSD: &str = "/usr/sbin/nsd";
pub const KNOTD: &str = "/usr/sbin/knotd";
pub const NAMED: &str = "/usr/sbin/named";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
pub enum Kind {
    Heron,
    Reflector,
    Nsd,
    Knot,
    Bind,
    /// The TCP path's floor: bench/tcp-cost/floor.c, an epoll echo that
    /// sets QR (no DNS work); built with `cc` when started.
    TcpFloor,
    /// The TLS path's floor: `heron-bench tls-floor`, a rustls echo.
    TlsFloor,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::Reflector,
        Kind::Heron,
        Kind::Nsd,
        Kind::Knot,
        Kind::Bind,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Heron => "Heron",
            Kind::Reflector => "reflector",
            Kind::Nsd => "NSD",
            Kind::Knot => "Knot",
            Kind::Bind => "BIND",
            Kind::TcpFloor => "TCP floor",
            Kind::TlsFloor => "TLS floor",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s))
    }

    /// Whether it is a DNS server (the reflector and floors only echo).
    pub fn is_dns(self) -> bool {
        !matches!(self, Kind::Reflector | Kind::TcpFloor | Kind::TlsFloor)
    }

    /// Whether it only answers over TCP (or TLS): ready when it accepts.
    fn stream_only(self) -> bool {
        matches!(self, Kind::TcpFloor | Kind::TlsFloor)
    }

    /// Whether it serves DNS over TLS (Knot 3.2 does not).
    pub fn serves_dot(self) -> bool {
        matches!(self, Kind::Heron | Kind::Nsd | Kind::Bind | Kind::TlsFloor)
    }
}

/// The programs to run.
#[derive(Clone, Debug)]
pub struct Binaries {
    pub heron: PathBuf,
    /// This program, for `heron-bench reflector`.
    pub bench: PathBuf,
}

/// How to start a server.
#[derive(Clone, Debug)]
pub struct Launch {
    pub workers: usize,
    /// `taskset -c` list for the server, e.g. "0".
    pub cpus: String,
    /// Longest wait for the zones to load and the first answer.
    pub ready_timeout: Duration,
    /// How the server is scheduled.
    pub sched: Sched,
    /// A program the server runs under, e.g. valgrind with its options.
    pub wrapper: Vec<String>,
    /// TCP connections each server is configured to hold at once.
    pub tcp_clients_max: usize,
    /// Seconds a TCP or TLS connection may stay idle (Heron's `[tcp]
    /// idle-timeout`, NSD's `tcp-timeout`, Knot's `tcp-idle-timeout`;
    /// BIND's timeouts stop at 120 s, its keepalive one at 6,553 s).
    pub idle_timeout_s: u64,
    /// Extra lines of Heron's `[server]` section (a tuning knob turned
    /// off, for the cost matrix), or whole sections after it (`[rrl]`, for
    /// a paired A/B); empty for the defaults.
    pub heron_server: String,
    /// An address on a veth pair to answer on besides loopback, and
    /// whether UDP to it goes through AF_XDP (Heron and Knot only).
    pub pair: Option<PairListen>,
    /// A DNS-over-TLS listener on 127.0.0.1 (its own port) with this
    /// certificate, for the servers that serve DoT.
    pub tls: Option<TlsFiles>,
}

/// A PEM certificate and its key, for the servers' TLS listeners.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TlsFiles {
    /// A self-signed ECDSA P-256 certificate for 127.0.0.1, made with
    /// `openssl` in `dir` (kept if already there).
    pub fn self_signed(dir: &Path) -> Result<TlsFiles, String> {
        let files = TlsFiles {
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
        };
        if files.cert.exists() && files.key.exists() {
            return Ok(files);
        }
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let out = Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
            .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "30"])
            .args(["-subj", "/CN=localhost", "-addext"])
            .args(["subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout"])
            .arg(&files.key)
            .arg("-out")
            .arg(&files.cert)
            .output()
            .map_err(|e| format!("cannot run openssl: {e}"))?;
        match out.status.success() {
            true => Ok(files),
            false => Err(format!(
                "openssl req failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )),
        }
    }
}

/// Where a server answers on a veth pair (the cost matrix's XDP table).
#[derive(Clone, Debug)]
pub struct PairListen {
    pub addr: Ipv4Addr,
    /// The pair's root-side interface.
    pub iface: String,
    /// UDP over AF_XDP on `iface` (`[xdp]` / Knot's `xdp:`), else sockets.
    pub xdp: bool,
}

/// TCP connections every server accepts at once in the throughput runs:
/// twice the 1,000 clients of the TCP workload.
pub const TCP_CLIENTS_MAX: usize = 2_000;
/// Seconds an idle TCP connection is kept by every server in the
/// throughput runs.
pub const IDLE_TIMEOUT_S: u64 = 30;

/// Scheduling of servers and the generator: real-time round robin keeps
/// other processes on a shared machine from preempting them; `Nice` runs
/// them at nice -20; `Normal` leaves them alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Sched {
    Realtime(i32),
    Nice(i32),
    Normal,
}

impl Sched {
    /// The command prefix that applies this scheduling to a program.
    pub fn prefix(self) -> Vec<String> {
        match self {
            Sched::Realtime(p) => vec!["chrt".into(), "-r".into(), p.to_string()],
            Sched::Nice(n) => vec!["nice".into(), "-n".into(), n.to_string()],
            Sched::Normal => Vec::new(),
        }
    }
}

pub struct Server {
    pub kind: Kind,
    pub addr: SocketAddr,
    /// Its DNS-over-TLS listener, when it was started with one.
    pub tls_addr: Option<SocketAddr>,
    pub pid: u32,
    /// Spawn to first complete answer, seconds.
    pub startup_s: f64,
    child: Option<Child>,
    log: PathBuf,
}

fn q(s: &Path) -> String {
    s.display().to_string()
}

/// Heron's configuration of `zones`, each with the extra `settings` lines:
/// one `[[zone-group]]` when every file name follows one pattern of its
/// origin (as an operator with many zones writes it, and as the NSD and
/// Knot configurations use a pattern or template), else a `[[zone]]` each.
pub fn heron_zones(zones: &[(String, PathBuf)], settings: &str) -> String {
    let mut c = String::new();
    if let Some(pattern) = file_pattern(zones) {
        let origins: Vec<String> = zones.iter().map(|(o, _)| format!("  \"{o}\",\n")).collect();
        let _ = write!(
            c,
            "\n[[zone-group]]\nfile = \"{pattern}\"\n{settings}origins = [\n{}]\n",
            origins.concat()
        );
        return c;
    }
    for (origin, file) in zones {
        let _ = write!(
            c,
            "\n[[zone]]\norigin = \"{origin}\"\nfile = \"{}\"\n{settings}",
            q(file)
        );
    }
    c
}

/// The `[[zone-group]]` file pattern all of `zones` follow, if there are
/// several and they do.
fn file_pattern(zones: &[(String, PathBuf)]) -> Option<String> {
    let stem = |origin: &str| match origin {
        "." => "root".to_string(),
        o => o.trim_end_matches('.').to_string(),
    };
    let [(origin, file), _, ..] = zones else {
        return None;
    };
    let file = q(file);
    let at = file.rfind(&stem(origin))?;
    let pattern = format!(
        "{}{{zone}}{}",
        &file[..at],
        &file[at + stem(origin).len()..]
    );
    zones
        .iter()
        .all(|(o, f)| pattern.replace("{zone}", &stem(o)) == q(f))
        .then_some(pattern)
}

/// For a server answering on `pair` too: the extra entry of its listen
/// list (`entry` of the address) and, with XDP, its XDP section
/// (`section` of the interface); empty without a pair.
fn pair_parts(
    pair: Option<&PairListen>,
    entry: impl Fn(Ipv4Addr) -> String,
    section: impl Fn(&str) -> String,
) -> (String, String) {
    match pair {
        Some(p) if p.xdp => (entry(p.addr), section(&p.iface)),
        Some(p) => (entry(p.addr), String::new()),
        None => (String::new(), String::new()),
    }
}

/// Writes the configuration and returns the command line (program, args).
fn command_line(
    kind: Kind,
    bins: &Binaries,
    dir: &Path,
    (port, tls_port): (u16, u16),
    zones: &[(String, PathBuf)],
    launch: &Launch,
) -> std::io::Result<Vec<String>> {
    let (workers, tcp_max) = (launch.workers, launch.tcp_clients_max);
    let idle = launch.idle_timeout_s;
    let d = q(dir);
    let tls = launch.tls.as_ref().filter(|_| kind.serves_dot());
    Ok(match kind {
        Kind::Reflector => vec![
            q(&bins.bench),
            "reflector".into(),
            "--listen".into(),
            format!("127.0.0.1:{port}"),
            "--workers".into(),
            workers.to_string(),
        ],
        Kind::Heron => {
            let (pair, xdp) = pair_parts(
                launch.pair.as_ref(),
                |addr| format!(", \"{addr}:{port}\""),
                |iface| format!("[xdp]\nlisten = [\"{iface}@{port}\"]\n"),
            );
            let mut c = format!(
                "[server]\nlisten = [\"127.0.0.1:{port}\"{pair}]\nworkers = {workers}\n{}\n\
                 [tcp]\nidle-timeout = {idle}\nmax-connections = {tcp_max}\n\
                 max-connections-per-client = {tcp_max}\n{xdp}",
                launch.heron_server
            );
            if let Some(t) = tls {
                let _ = write!(
                    c,
                    "\n[tls]\nlisten = [\"127.0.0.1:{tls_port}\"]\ncertificate = \"{}\"\nkey = \"{}\"\n",
                    q(&t.cert),
                    q(&t.key)
                );
            }
            c.push_str(&heron_zones(zones, ""));
            let path = dir.join("heron.toml");
            fs::write(&path, c)?;
            vec![q(&bins.heron), "serve".into(), "--config".into(), q(&path)]
        }
        Kind::Nsd => {
            let mut c = format!(
                "server:\n  ip-address: 127.0.0.1@{port}\n  server-count: {workers}\n\
                 \x20 reuseport: yes\n  tcp-count: {tcp_max}\n  tcp-query-count: 0\n  tcp-timeout: {idle}\n\
                 \x20 username: \"\"\n  chroot: \"\"\n  database: \"\"\n\
                 \x20 zonelistfile: \"{d}/zone.list\"\n  xfrdfile: \"{d}/xfrd.state\"\n\
                 \x20 pidfile: \"{d}/nsd.pid\"\n  zonesdir: \"{d}\"\n  verbosity: 0\n\
                 \x20 minimal-responses: yes\n  rrl-ratelimit: 0\n  rrl-whitelist-ratelimit: 0\n\
                 remote-control:\n  control-enable: no\n"
            );
            if let Some(t) = tls {
                // NSD serves TLS on the interfaces given with the tls-port.
                let server_end = c.find("remote-control:").unwrap_or(c.len());
                let lines = format!(
                    "  ip-address: 127.0.0.1@{tls_port}\n  tls-port: {tls_port}\n\
                     \x20 tls-service-key: \"{}\"\n  tls-service-pem: \"{}\"\n",
                    q(&t.key),
                    q(&t.cert)
                );
                c.insert_str(server_end, &lines);
            }
            for (origin, file) in zones {
                let _ = write!(
                    c,
                    "zone:\n  name: \"{origin}\"\n  zonefile: \"{}\"\n",
                    q(file)
                );
            }
            let path = dir.join("nsd.conf");
            fs::write(&path, c)?;
            vec![NSD.into(), "-d".into(), "-c".into(), q(&path)]
        }
        Kind::Knot => {
            let (pair, xdp) = pair_parts(
                launch.pair.as_ref(),
                |addr| format!(", {addr}@{port}"),
                |iface| format!("xdp:\n  listen: {iface}@{port}\n"),
            );
            let mut c = format!(
                "server:\n  rundir: \"{d}\"\n  listen: [ 127.0.0.1@{port}{pair} ]\n\
                 \x20 udp-workers: {workers}\n  tcp-workers: {workers}\n\
                 \x20 background-workers: {workers}\n  tcp-max-clients: {tcp_max}\n\
                 \x20 tcp-idle-timeout: {idle}s\n\
                 log:\n  - target: stderr\n    any: warning\n\
                 database:\n  storage: \"{d}\"\n  journal-db-max-size: 64M\n\
                 \x20 kasp-db-max-size: 16M\n  timer-db-max-size: 64M\n  catalog-db-max-size: 16M\n\
                 template:\n  - id: default\n    storage: \"{d}\"\n    zonefile-sync: -1\n\
                 \x20   zonefile-load: whole\n    journal-content: none\n    semantic-checks: off\n\
                 {xdp}zone:\n"
            );
            for (origin, file) in zones {
                let _ = write!(c, "  - domain: \"{origin}\"\n    file: \"{}\"\n", q(file));
            }
            let path = dir.join("knot.conf");
            fs::write(&path, c)?;
            vec![KNOTD.into(), "-c".into(), q(&path)]
        }
        Kind::Bind => {
            let (tls_block, tls_listen) = match tls {
                Some(t) => (
                    format!(
                        "tls bench-tls {{ key-file \"{}\"; cert-file \"{}\"; }};\n",
                        q(&t.key),
                        q(&t.cert)
                    ),
                    format!("  listen-on port {tls_port} tls bench-tls {{ 127.0.0.1; }};\n"),
                ),
                None => Default::default(),
            };
            let mut c = format!(
                "{tls_block}options {{\n{tls_listen}  directory \"{d}\";\n  pid-file \"{d}/named.pid\";\n\
                 \x20 session-keyfile \"{d}/session.key\";\n\
                 \x20 listen-on port {port} {{ 127.0.0.1; }};\n  listen-on-v6 {{ none; }};\n\
                 \x20 recursion no;\n  dnssec-validation no;\n  notify no;\n\
                 \x20 minimal-responses no-auth;\n  tcp-clients {tcp_max};\n  tcp-listen-queue 2048;\n\
                 {}  check-integrity no;\n  check-sibling no;\n}};\ncontrols {{ }};\n",
                bind_timeouts(idle)
            );
            for (origin, file) in zones {
                let _ = writeln!(
                    c,
                    "zone \"{origin}\" {{ type primary; file \"{}\"; check-names ignore; }};",
                    q(file)
                );
            }
            let path = dir.join("named.conf");
            fs::write(&path, c)?;
            vec![
                NAMED.into(),
                "-g".into(),
                "-n".into(),
                workers.to_string(),
                "-c".into(),
                q(&path),
            ]
        }
        Kind::TcpFloor => vec![
            build_tcp_floor(dir)?,
            port.to_string(),
            "-1".into(),
            workers.to_string(),
        ],
        Kind::TlsFloor => {
            let t = launch.tls.as_ref().ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "TLS floor without TLS")
            })?;
            vec![
                q(&bins.bench),
                "tls-floor".into(),
                "--listen".into(),
                format!("127.0.0.1:{port}"),
                "--cert".into(),
                q(&t.cert),
                "--key".into(),
                q(&t.key),
                "--workers".into(),
                workers.to_string(),
            ]
        }
    })
}

/// BIND's idle timeouts (its units are 100 ms) for `idle_s` seconds:
/// the initial and idle ones stop at 120 s (1200), so the keepalive one
/// (up to 65535), which a client asking with the EDNS TCP keepalive
/// option (RFC 7828) gets, says the rest. Nothing for the default 30 s.
fn bind_timeouts(idle_s: u64) -> String {
    if idle_s == IDLE_TIMEOUT_S {
        return String::new();
    }
    let tenths = idle_s.saturating_mul(10);
    format!(
        "  tcp-initial-timeout {};\n  tcp-idle-timeout {};\n  tcp-keepalive-timeout {};\n",
        tenths.clamp(25, 1200),
        tenths.clamp(1, 1200),
        tenths.clamp(1, 65535)
    )
}

/// The TCP floor's source (bench/tcp-cost/floor.c), built into `dir`.
const TCP_FLOOR_C: &str = include_str!("../tcp-cost/floor.c");

fn build_tcp_floor(dir: &Path) -> std::io::Result<String> {
    let (src, bin) = (dir.join("floor.c"), dir.join("tcp-floor"));
    fs::write(&src, TCP_FLOOR_C)?;
    let out = Command::new("cc")
        .arg("-O2")
        .arg("-pthread")
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .output()?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr).to_string();
        return Err(std::io::Error::other(format!("cc floor.c: {why}")));
    }
    Ok(q(&bin))
}

/// A `/bin/sh` line that moves itself into the cgroup, then execs
/// `taskset -c CPUS PROGRAM ARGS...` (so the server keeps the shell's PID,
/// which is also its process group).
fn wrapped(
    cgroup: Option<&Cgroup>,
    sched: Sched,
    cpus: &str,
    wrapper: &[String],
    line: &[String],
) -> Command {
    let mut script = String::new();
    if let Some(cg) = cgroup {
        for f in cg.procs_files() {
            let _ = write!(script, "echo $$ > '{}' || exit 97; ", f.display());
        }
    }
    script.push_str("exec \"$@\"");
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(script)
        .arg("sh")
        .args(sched.prefix())
        .arg("taskset")
        .arg("-c")
        .arg(cpus)
        .args(wrapper)
        .args(line);
    cmd
}

/// Reads each of `zones`' files once, so that every server starts with
/// its zone files in the page cache. This VM's host pages out memory left
/// untouched for about a minute, page cache included (DAMON `pageout` on
/// physical memory: /sys/kernel/mm/damon/admin): without this the first
/// server to start on a workload read its files from disk and the servers
/// after it did not (Heron 4.0 s, then NSD 3.2 s on the warm files, for
/// 100,000 zones that Heron loads in 1.2 s from the cache).
fn warm_page_cache(zones: &[(String, PathBuf)]) {
    let files: std::collections::BTreeSet<&Path> =
        zones.iter().map(|(_, file)| file.as_path()).collect();
    for file in files {
        // A file that cannot be read fails the server's start, not this.
        let _ = fs::read(file);
    }
}

/// How long a readiness probe waits for its answer, and the pause before
/// the next: together the resolution of the startup figure.
const READY_PROBE_WAIT: Duration = Duration::from_millis(5);
const READY_PROBE_PAUSE: Duration = Duration::from_millis(2);

impl Server {
    /// Starts `kind` serving `zones`; waits until each of `ready` (zone
    /// origins) answers its SOA, or for the reflector any echo.
    pub fn start(
        kind: Kind,
        bins: &Binaries,
        zones: &[(String, PathBuf)],
        ready: &[String],
        launch: &Launch,
        cgroup: Option<&Cgroup>,
        work_dir: &Path,
    ) -> Result<Server, String> {
        let port = free_port();
        let dir = work_dir.join(format!("{}-{port}", kind.name().to_lowercase()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let with_tls = launch.tls.is_some() && kind.serves_dot() && kind != Kind::TlsFloor;
        let tls_port = if with_tls { free_port() } else { 0 };
        let line = command_line(kind, bins, &dir, (port, tls_port), zones, launch)
            .map_err(|e| format!("{}: cannot write configuration: {e}", dir.display()))?;
        let log = dir.join("server.log");
        let out = File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let mut cmd = wrapped(cgroup, launch.sched, &launch.cpus, &launch.wrapper, &line);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .current_dir(&dir)
            // Warnings, and the few lines of start and reload (how long
            // each took), which the reload workload reads.
            .env("HERON_LOG", "warn,heron::serve=info")
            .process_group(0);
        if kind.is_dns() {
            warm_page_cache(zones);
        }
        let started = Instant::now();
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", line.join(" ")))?;
        let mut server = Server {
            kind,
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            tls_addr: match (kind, with_tls) {
                (Kind::TlsFloor, _) => Some(SocketAddr::from((Ipv4Addr::LOCALHOST, port))),
                (_, true) => Some(SocketAddr::from((Ipv4Addr::LOCALHOST, tls_port))),
                _ => None,
            },
            pid: child.id(),
            startup_s: 0.0,
            child: Some(child),
            log,
        };
        let deadline = started + launch.ready_timeout;
        let accepting = match kind.stream_only() {
            true => server.wait_accepting(server.addr, deadline),
            false => server.wait_ready(ready, deadline),
        };
        let ready = accepting.and_then(|()| {
            let sample_ready = Instant::now();
            if kind.is_dns() && zones.len() > ready.len() {
                server.wait_every_zone(zones, sample_ready, deadline)
            } else {
                Ok(sample_ready)
            }
        });
        let ready = match (ready, server.tls_addr) {
            (Ok(at), Some(tls)) => server.wait_accepting(tls, deadline).map(|()| at),
            (r, _) => r,
        };
        match ready {
            Ok(ready_at) => {
                server.startup_s = ready_at.duration_since(started).as_secs_f64();
                Ok(server)
            }
            Err(e) => {
                let log = server.log_tail();
                server.stop();
                Err(format!("{} did not become ready: {e}\n{log}", kind.name()))
            }
        }
    }

    /// Waits until `addr` accepts a TCP connection (bounded by `deadline`).
    fn wait_accepting(&mut self, addr: SocketAddr, deadline: Instant) -> Result<(), String> {
        loop {
            if std::net::TcpStream::connect_timeout(&addr, READY_PROBE_WAIT).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline || crate::interrupt::interrupted() {
                return Err(format!("{addr} accepts no connection"));
            }
            if let Some(c) = self.child.as_mut()
                && let Ok(Some(status)) = c.try_wait()
            {
                return Err(format!("exited early ({status})"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn wait_ready(&mut self, ready: &[String], deadline: Instant) -> Result<(), String> {
        // Probed every few milliseconds, so startup is measured to that
        // (a server not yet listening drops the probe unanswered).
        let sock = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|e| e.to_string())?;
        sock.set_read_timeout(Some(READY_PROBE_WAIT))
            .map_err(|e| e.to_string())?;
        let origins: Vec<&str> = if ready.is_empty() {
            vec!["."]
        } else {
            ready.iter().map(String::as_str).collect()
        };
        let mut buf = vec![0u8; 65_535];
        let mut id: u16 = 0x4000;
        for origin in origins {
            let name = Name::parse(origin).map_err(|e| format!("bad origin {origin}: {e}"))?;
            // An answer to any probe for this origin counts, however late:
            // a server slower than the probe's wait is ready all the same.
            let first_probe = id.wrapping_add(1);
            // Bounded by the deadline.
            loop {
                if Instant::now() > deadline {
                    return Err(format!("no SOA answer for {origin} in time"));
                }
                if crate::interrupt::interrupted() {
                    return Err("interrupted".into());
                }
                if let Some(c) = self.child.as_mut()
                    && let Ok(Some(status)) = c.try_wait()
                {
                    return Err(format!("exited early ({status})"));
                }
                id = id.wrapping_add(1);
                let query = build_query(
                    &name,
                    RType::SOA,
                    &QueryOpts {
                        id,
                        ..QueryOpts::default()
                    },
                );
                let mut answered = false;
                if sock.send_to(&query, self.addr).is_ok() {
                    // Read answers until one to a probe of this origin,
                    // bounded by the socket's read timeout.
                    while let Ok((n, _)) = sock.recv_from(&mut buf) {
                        let Some(h) = Header::read(&buf[..n]) else {
                            continue;
                        };
                        let ours = h.id.wrapping_sub(first_probe) <= id.wrapping_sub(first_probe);
                        if ours && h.has(flags::QR) {
                            answered = !self.kind.is_dns() || (h.rcode() == 0 && h.ancount > 0);
                            break;
                        }
                    }
                }
                if answered {
                    break;
                }
                std::thread::sleep(READY_PROBE_PAUSE);
            }
        }
        Ok(())
    }

    /// Sweeps the SOA of every zone until each has answered once, for
    /// workloads of many zones: a server that loads zones in the background
    /// (Knot) answers the sampled ones long before the rest. Returns when
    /// the server was ready: `sample_ready` if the first sweep found every
    /// zone answering, else when the last zone first answered (late by at
    /// most one sweep, a fraction of a second for 100,000 zones).
    fn wait_every_zone(
        &mut self,
        zones: &[(String, PathBuf)],
        sample_ready: Instant,
        deadline: Instant,
    ) -> Result<Instant, String> {
        let names = zones
            .iter()
            .map(|(o, _)| Name::parse(o).map_err(|e| format!("bad origin {o}: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        let sock = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|e| e.to_string())?;
        sock.set_read_timeout(Some(Duration::from_millis(20)))
            .map_err(|e| e.to_string())?;
        let _ = heron_sys::socket::grow_receive_buffer(&sock, 8 << 20);
        let mut pending: Vec<usize> = (0..names.len()).collect();
        let mut first_sweep = true;
        let mut last_answer = sample_ready;
        let mut next_id: u16 = 0;
        while !pending.is_empty() {
            if Instant::now() > deadline {
                return Err(format!("{} zone(s) not answering in time", pending.len()));
            }
            if crate::interrupt::interrupted() {
                return Err("interrupted".into());
            }
            if let Some(c) = self.child.as_mut()
                && let Ok(Some(status)) = c.try_wait()
            {
                return Err(format!("exited early ({status})"));
            }
            let mut still = Vec::new();
            for window in pending.chunks(SWEEP_WINDOW) {
                let answered = self.probe_window(&sock, &names, window, next_id);
                next_id = next_id.wrapping_add(window.len() as u16);
                for (&zone, ok) in window.iter().zip(answered) {
                    if ok {
                        last_answer = Instant::now();
                    } else {
                        still.push(zone);
                    }
                }
            }
            if first_sweep && still.is_empty() {
                return Ok(sample_ready);
            }
            first_sweep = false;
            pending = still;
            if !pending.is_empty() {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(last_answer)
    }

    /// Sends an SOA query for each zone of `window` (IDs from `first_id`)
    /// and says which answered with data.
    fn probe_window(
        &self,
        sock: &UdpSocket,
        names: &[Name],
        window: &[usize],
        first_id: u16,
    ) -> Vec<bool> {
        let mut answered = vec![false; window.len()];
        let mut replied = vec![false; window.len()];
        for (k, &zone) in window.iter().enumerate() {
            let opts = QueryOpts {
                id: first_id.wrapping_add(k as u16),
                ..QueryOpts::default()
            };
            let _ = sock.send_to(&build_query(&names[zone], RType::SOA, &opts), self.addr);
        }
        let mut buf = vec![0u8; 65_535];
        let mut replies = 0;
        let until = Instant::now() + Duration::from_millis(300);
        while replies < window.len() && Instant::now() < until {
            let Ok((n, _)) = sock.recv_from(&mut buf) else {
                continue;
            };
            let Some(h) = Header::read(&buf[..n]) else {
                continue;
            };
            let k = h.id.wrapping_sub(first_id) as usize;
            if !h.has(flags::QR) || k >= window.len() || replied[k] {
                continue;
            }
            replied[k] = true;
            replies += 1;
            answered[k] = h.rcode() == 0 && h.ancount > 0;
        }
        answered
    }

    /// CPU seconds used so far by all the server's processes and threads:
    /// the cgroup's counter when there is one, else /proc of the group.
    pub fn cpu_seconds(&self, cgroup: Option<&Cgroup>) -> f64 {
        cgroup
            .and_then(Cgroup::usage_seconds)
            .unwrap_or_else(|| sys::group_cpu_seconds(self.pid))
    }

    /// CPU seconds from /proc/PID/stat (utime + stime of every process of
    /// the group), the cross-check of the cgroup counter.
    pub fn proc_cpu_seconds(&self) -> f64 {
        sys::group_cpu_seconds(self.pid)
    }

    /// (VmRSS, PSS, VmHWM) in KiB, summed over the server's processes.
    pub fn memory_kib(&self) -> (u64, u64, u64) {
        sys::group_memory_kib(self.pid)
    }

    /// Whether the server's process has ended (crashed, or exited).
    pub fn has_exited(&mut self) -> bool {
        self.child
            .as_mut()
            .is_none_or(|c| !matches!(c.try_wait(), Ok(None)))
    }

    /// Everything the server has logged so far.
    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The folder of the server's configuration, state and log.
    pub fn dir(&self) -> &Path {
        self.log.parent().unwrap_or(Path::new("."))
    }

    pub fn log_tail(&self) -> String {
        let text = self.log_text();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// SIGTERM to the server, a bounded wait, then SIGKILL to its process
    /// group (only processes this suite started).
    pub fn stop(&mut self) {
        if let Some(child) = self.child.take() {
            sys::stop_group(child);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The version line of each server program.
pub fn version(kind: Kind, bins: &Binaries) -> String {
    let (prog, arg) = match kind {
        Kind::Heron => (q(&bins.heron), "--version"),
        Kind::Reflector => (q(&bins.bench), "--version"),
        Kind::Nsd => (NSD.to_string(), "-v"),
        Kind::Knot => (KNOTD.to_string(), "-V"),
        Kind::Bind => (NAMED.to_string(), "-v"),
        Kind::TcpFloor => return "bench/tcp-cost/floor.c".into(),
        Kind::TlsFloor => (q(&bins.bench), "--version"),
    };
    Command::new(&prog)
        .arg(arg)
        .output()
        .map(|o| {
            let mut t = String::from_utf8_lossy(&o.stdout).to_string();
            t.push_str(&String::from_utf8_lossy(&o.stderr));
            t.lines().next().unwrap_or("").trim().to_string()
        })
        .unwrap_or_else(|e| format!("{prog}: {e}"))
}

/// Whether the program for `kind` is installed.
pub fn available(kind: Kind, bins: &Binaries) -> bool {
    match kind {
        Kind::Heron => bins.heron.exists(),
        Kind::Reflector => bins.bench.exists(),
        Kind::Nsd => Path::new(NSD).exists(),
        Kind::Knot => Path::new(KNOTD).exists(),
        Kind::Bind => Path::new(NAMED).exists(),
        Kind::TcpFloor => Path::new("/usr/bin/cc").exists(),
        Kind::TlsFloor => bins.bench.exists(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zones(list: &[(&str, &str)]) -> Vec<(String, PathBuf)> {
        list.iter()
            .map(|(o, f)| (o.to_string(), PathBuf::from(f)))
            .collect()
    }

    #[test]
    fn zones_named_by_one_pattern_become_one_group() {
        let z = zones(&[("a.test.", "/z/a.test.zone"), ("b.org.", "/z/b.org.zone")]);
        assert_eq!(file_pattern(&z).as_deref(), Some("/z/{zone}.zone"));
        let text = heron_zones(&z, "notify = [\"127.0.0.2\"]\n");
        assert_eq!(
            text,
            "\n[[zone-group]]\nfile = \"/z/{zone}.zone\"\nnotify = [\"127.0.0.2\"]\n\
             origins = [\n  \"a.test.\",\n  \"b.org.\",\n]\n"
        );
    }

    #[test]
    fn a_pair_address_is_listened_on_and_xdp_only_when_asked() {
        let dir = std::env::temp_dir().join(format!("heron-bench-pair-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let bins = Binaries {
            heron: "/x/heron".into(),
            bench: "/x/heron-bench".into(),
        };
        let launch = |xdp| Launch {
            workers: 1,
            cpus: "0".into(),
            ready_timeout: Duration::from_secs(1),
            sched: Sched::Normal,
            wrapper: Vec::new(),
            tcp_clients_max: 10,
            idle_timeout_s: IDLE_TIMEOUT_S,
            heron_server: String::new(),
            pair: Some(PairListen {
                addr: Ipv4Addr::new(198, 51, 100, 1),
                iface: "hx0".into(),
                xdp,
            }),
            tls: None,
        };
        let z = zones(&[("a.test.", "/z/a.test.zone")]);
        let read = |kind, xdp, file: &str| {
            command_line(kind, &bins, &dir, (5300, 0), &z, &launch(xdp)).unwrap();
            fs::read_to_string(dir.join(file)).unwrap()
        };
        let heron = read(Kind::Heron, true, "heron.toml");
        assert!(heron.contains("listen = [\"127.0.0.1:5300\", \"198.51.100.1:5300\"]"));
        assert!(
            heron.contains("[xdp]\nlisten = [\"hx0@5300\"]\n"),
            "{heron}"
        );
        assert!(!read(Kind::Heron, false, "heron.toml").contains("[xdp]"));
        let knot = read(Kind::Knot, true, "knot.conf");
        assert!(knot.contains("listen: [ 127.0.0.1@5300, 198.51.100.1@5300 ]"));
        assert!(knot.contains("xdp:\n  listen: hx0@5300\n"), "{knot}");
        assert!(!read(Kind::Knot, false, "knot.conf").contains("xdp:"));
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn dot_listeners_are_configured_for_heron_nsd_and_bind_but_not_knot() {
        let dir = std::env::temp_dir().join(format!("heron-bench-tls-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let bins = Binaries {
            heron: "/x/heron".into(),
            bench: "/x/heron-bench".into(),
        };
        let launch = Launch {
            workers: 1,
            cpus: "0".into(),
            ready_timeout: Duration::from_secs(1),
            sched: Sched::Normal,
            wrapper: Vec::new(),
            tcp_clients_max: 10,
            idle_timeout_s: IDLE_TIMEOUT_S,
            heron_server: String::new(),
            pair: None,
            tls: Some(TlsFiles {
                cert: "/t/cert.pem".into(),
                key: "/t/key.pem".into(),
            }),
        };
        let z = zones(&[("a.test.", "/z/a.test.zone")]);
        let read = |kind, file: &str| {
            command_line(kind, &bins, &dir, (5300, 8853), &z, &launch).unwrap();
            fs::read_to_string(dir.join(file)).unwrap()
        };
        let heron = read(Kind::Heron, "heron.toml");
        assert!(
            heron.contains("[tls]\nlisten = [\"127.0.0.1:8853\"]\ncertificate = \"/t/cert.pem\"\nkey = \"/t/key.pem\"\n"),
            "{heron}"
        );
        let nsd = read(Kind::Nsd, "nsd.conf");
        for line in [
            "ip-address: 127.0.0.1@5300",
            "ip-address: 127.0.0.1@8853",
            "tls-port: 8853",
            "tls-service-key: \"/t/key.pem\"",
            "tls-service-pem: \"/t/cert.pem\"",
        ] {
            assert!(nsd.contains(line), "{line} missing: {nsd}");
        }
        assert!(nsd.find("tls-port").unwrap() < nsd.find("remote-control").unwrap());
        let bind = read(Kind::Bind, "named.conf");
        assert!(bind.starts_with(
            "tls bench-tls { key-file \"/t/key.pem\"; cert-file \"/t/cert.pem\"; };\noptions {\n"
        ));
        assert!(bind.contains("listen-on port 8853 tls bench-tls { 127.0.0.1; };"));
        assert!(!read(Kind::Knot, "knot.conf").contains("pem"));
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn bind_gets_its_longest_timeouts_and_the_keepalive_one_for_long_idles() {
        assert_eq!(bind_timeouts(IDLE_TIMEOUT_S), "");
        assert_eq!(
            bind_timeouts(900),
            "  tcp-initial-timeout 1200;\n  tcp-idle-timeout 1200;\n  tcp-keepalive-timeout 9000;\n"
        );
        assert!(bind_timeouts(10_000).contains("tcp-keepalive-timeout 65535;"));
        assert!(bind_timeouts(1).contains("tcp-initial-timeout 25;"));
    }

    #[test]
    fn zones_without_a_shared_pattern_are_listed_one_by_one() {
        let z = zones(&[("a.test.", "/z/a.test.zone"), ("b.org.", "/y/b.org.zone")]);
        assert_eq!(file_pattern(&z), None);
        assert_eq!(file_pattern(&z[..1]), None, "one zone needs no group");
        let text = heron_zones(&z, "");
        assert_eq!(text.matches("[[zone]]").count(), 2);
        assert!(text.contains("origin = \"b.org.\"\nfile = \"/y/b.org.zone\"\n"));
    }
}
