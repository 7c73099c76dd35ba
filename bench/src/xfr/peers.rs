//! Configurations for Heron, NSD, Knot and BIND as primaries or
//! secondaries of many zones, each with one query worker of each kind,
//! started pinned, at nice -20, and in their own process group.
//!
//! Each configuration is what an operator would write for a fast cold
//! start of many small secondary zones, and no server gets a setting the
//! others are denied; every departure from a server's defaults is listed in
//! [`SETTINGS`] with its reason, and the report prints that list.

use std::fmt::Write as _;
use std::fs::{self, File};
use std::io;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::servers::{KNOTD, Kind, NAMED, NSD};

/// Knot's control client.
const KNOTC: &str = "/usr/sbin/knotc";
use crate::sys;

/// The servers' (and the probe's) nice value: other people's work on a
/// shared machine then hardly takes CPU time from them while measured.
pub const NICE: i32 = -20;

/// Transfers a secondary runs at once, where the server has a setting for
/// it: Heron's default.
const IN_FLIGHT: usize = 32;

/// Each server's settings that are not its defaults (or not what Debian
/// ships), and why: (server, setting, reason).
pub const SETTINGS: &[(&str, &str, &str)] = &[
    (
        "all",
        "one UDP and one TCP query worker; pinned to one CPU",
        "the same CPU for each; NSD `server-count: 1`, Knot `udp-workers`/`tcp-workers: 1`, \
         BIND `-n 1`, Heron `workers = 1`",
    ),
    (
        "NSD",
        "`xfrdir` on a tmpfs (`/dev/shm`)",
        "xfrd writes each transfer to a file there that the reload reads and deletes; on ext4 \
         creating and deleting tens of thousands of files made xfrd spend most of its time in \
         the inode allocator (10,000 zones took 11–15 s instead of about 2 s). The files are scratch, \
         removed when NSD exits; NSD's default is /tmp, a tmpfs on many systems",
    ),
    (
        "NSD",
        "`xfrd-reload-timeout: 0` (second row)",
        "the default, 1 s, lets at most one reload a second make transfers visible, which alone \
         takes a small cold start past a second; 0 reloads as soon as the last one is done, at \
         the cost of more reloads when there are many zones. Both are measured, and Heron is \
         compared with the faster",
    ),
    (
        "Knot",
        "`background-workers: 32`",
        "Knot runs one transfer per background worker (default: one per CPU, here 2); 32 is \
         Heron's transfers in flight",
    ),
    (
        "Knot",
        "`remote-pool-limit: 32`",
        "keeps outgoing TCP connections for reuse instead of one connection per zone (off by \
         default)",
    ),
    (
        "BIND",
        "`serial-query-rate 10000`",
        "BIND sends an SOA query before each transfer, at most 20 a second by default: 50 s for \
         1,000 zones. 100,000 was no faster (its rate limiter's timer then ticks every 100 µs)",
    ),
    (
        "BIND",
        "`transfers-in 32`, `transfers-per-ns 32`",
        "transfers at once (defaults 10 and 2 per primary): Heron's 32",
    ),
    (
        "BIND",
        "`notify-delay 0` (primary)",
        "NOTIFY at once after a change instead of at most one per zone per 5 s (change \
         propagation)",
    ),
];

/// What a server does with its zones.
#[derive(Clone, Copy, Debug)]
pub enum Role {
    /// Serves zone files to 127.0.0.0/8, notifying `notify` of changes.
    Primary { notify: Option<SocketAddr> },
    /// Pulls every zone from `primary`; `reload` matters to NSD only.
    Secondary {
        primary: SocketAddr,
        reload: NsdReload,
    },
    /// A consumer of the catalog zone [`CATALOG`] (the only zone it is
    /// given): its members come from there (Heron and Knot).
    Consumer { primary: SocketAddr },
}

/// The catalog zone of the catalog cold start.
pub const CATALOG: &str = "catalog.bench.";

/// NSD's reload throttle, the one setting the cold start measures both
/// ways: `xfrd-reload-timeout` (see [`SETTINGS`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum NsdReload {
    /// 1 s, NSD's default: at most one reload a second.
    #[default]
    Throttled,
    /// 0: each reload as soon as the last one is done.
    AtOnce,
}

/// A TSIG key (Heron only: the TSIG overhead is measured Heron to Heron).
#[derive(Clone, Debug)]
pub struct TsigKey {
    pub name: String,
    pub secret: String,
}

/// One server process of a transfer benchmark.
pub struct Peer {
    pub kind: Kind,
    pub addr: SocketAddr,
    pub dir: PathBuf,
    pub started: Instant,
    child: Option<Child>,
    /// A folder on a tmpfs for the server's scratch files, removed when it
    /// stops (NSD's `xfrdir`).
    scratch: Option<PathBuf>,
}

impl Peer {
    /// Writes the configuration into `dir` (emptied first) and starts the
    /// server, a primary on CPU 0 and a secondary on CPU 1. Readiness is
    /// the caller's business: a secondary has nothing to answer at first.
    pub fn start(
        kind: Kind,
        role: Role,
        addr: SocketAddr,
        zones: &[(String, PathBuf)],
        key: Option<&TsigKey>,
        dir: &Path,
        heron: &Path,
    ) -> Result<Peer, String> {
        let _ = fs::remove_dir_all(dir);
        fs::create_dir_all(dir.join("kept")).map_err(|e| format!("{}: {e}", dir.display()))?;
        let scratch = (kind == Kind::Nsd).then(|| scratch_dir(addr)).flatten();
        let argv = write_config(kind, role, addr, zones, key, dir, heron, scratch.as_deref())
            .map_err(|e| format!("{}: cannot write the configuration: {e}", dir.display()))?;
        let log = File::create(dir.join("server.log")).map_err(|e| e.to_string())?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let cpu = match role {
            Role::Primary { .. } => "0",
            Role::Secondary { .. } | Role::Consumer { .. } => "1",
        };
        let mut cmd = Command::new("nice");
        cmd.args(["-n", &NICE.to_string(), "taskset", "-c", cpu])
            .args(&argv)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .current_dir(dir)
            .env("HERON_LOG", "info")
            .process_group(0);
        let started = Instant::now();
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", argv.join(" ")))?;
        Ok(Peer {
            kind,
            addr,
            dir: dir.to_path_buf(),
            started,
            child: Some(child),
            scratch,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// Asks the server to re-read its zone files (SIGHUP for all four).
    pub fn reload(&self) {
        // Our own unreaped child, by its PID.
        let _ = heron_sys::process::signal_process(self.pid(), heron_sys::process::Signal::HUP);
    }

    /// Asks the server to re-read the file of `zone`: Knot through
    /// `knotc zone-reload` (a SIGHUP would re-read its configuration of
    /// every zone first), the others by [`Peer::reload`].
    pub fn reload_zone(&self, zone: &str) {
        if self.kind != Kind::Knot {
            return self.reload();
        }
        let socket = self.dir.join("knot.sock");
        let done = Command::new(KNOTC)
            .arg("-s")
            .arg(&socket)
            .args(["zone-reload", zone])
            .stdout(Stdio::null())
            .status();
        if !done.as_ref().is_ok_and(|status| status.success()) {
            eprintln!("knotc zone-reload {zone} failed ({done:?}); SIGHUP instead");
            self.reload();
        }
    }

    /// Resident memory of the server's processes, KiB.
    pub fn rss_kib(&self) -> u64 {
        sys::group_memory_kib(self.pid()).0
    }

    /// The anonymous part of [`Peer::rss_kib`] (`sys::group_anon_kib`).
    pub fn anon_kib(&self) -> u64 {
        sys::group_anon_kib(self.pid())
    }

    /// SIGTERM, a bounded wait, then SIGKILL to the process group (only
    /// processes this suite started).
    pub fn stop(&mut self) {
        if let Some(child) = self.child.take() {
            sys::stop_group(child);
        }
        if let Some(scratch) = self.scratch.take() {
            let _ = fs::remove_dir_all(scratch);
        }
    }
}

/// A new folder on /dev/shm (a tmpfs) for the server listening on `addr`,
/// if there is one.
fn scratch_dir(addr: SocketAddr) -> Option<PathBuf> {
    let dir = PathBuf::from(format!(
        "/dev/shm/heron-bench-{}-{}",
        std::process::id(),
        addr.port()
    ));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).ok().map(|()| dir)
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.stop();
    }
}

#[allow(clippy::too_many_arguments)]
fn write_config(
    kind: Kind,
    role: Role,
    addr: SocketAddr,
    zones: &[(String, PathBuf)],
    key: Option<&TsigKey>,
    dir: &Path,
    heron: &Path,
    scratch: Option<&Path>,
) -> io::Result<Vec<String>> {
    let d = dir.display().to_string();
    let conf = |name: &str| dir.join(name).display().to_string();
    let (file, text, argv) = match kind {
        Kind::Heron => {
            let path = conf("heron.toml");
            let argv = vec![
                heron.display().to_string(),
                "serve".into(),
                "--config".into(),
                path,
            ];
            ("heron.toml", heron_config(role, addr, zones, key), argv)
        }
        Kind::Nsd => {
            let argv = vec![NSD.into(), "-d".into(), "-c".into(), conf("nsd.conf")];
            let xfrdir = scratch.unwrap_or(dir).display().to_string();
            ("nsd.conf", nsd_config(role, addr, zones, &d, &xfrdir), argv)
        }
        Kind::Knot => {
            let argv = vec![KNOTD.into(), "-c".into(), conf("knot.conf")];
            ("knot.conf", knot_config(role, addr, zones, &d), argv)
        }
        Kind::Bind => {
            let argv = vec![
                NAMED.into(),
                "-g".into(),
                "-n".into(),
                "1".into(),
                "-c".into(),
                conf("named.conf"),
            ];
            ("named.conf", bind_config(role, addr, zones, &d), argv)
        }
        Kind::Reflector | Kind::TcpFloor | Kind::TlsFloor => {
            return Err(io::Error::other(
                "the reflector and the floors serve no zones",
            ));
        }
    };
    fs::write(dir.join(file), text)?;
    Ok(argv)
}

/// Who may NOTIFY a secondary: the primary, from whichever loopback
/// address the kernel gives its socket (to reach 127.0.0.2 an unbound
/// socket is given 127.0.0.2 itself).
const NOTIFIERS: &str = "127.0.0.0/8";

/// Where a secondary keeps zone `origin` (relative to its folder).
fn kept(origin: &str) -> String {
    format!("kept/{origin}zone")
}

fn heron_config(
    role: Role,
    addr: SocketAddr,
    zones: &[(String, PathBuf)],
    key: Option<&TsigKey>,
) -> String {
    let mut c = format!("[server]\nlisten = [\"{addr}\"]\nworkers = 1\n");
    let with_key = match key {
        Some(k) => {
            let _ = write!(
                c,
                "[[key]]\nname = \"{}\"\nsecret = \"{}\"\n",
                k.name, k.secret
            );
            format!(" key {}", k.name)
        }
        None => String::new(),
    };
    let mut settings = String::new();
    let files: Vec<(String, PathBuf)> = match role {
        Role::Primary { notify } => {
            let _ = writeln!(
                settings,
                "allow-transfer = [\"127.0.0.0/8\", \"127.0.0.0/8{with_key}\"]"
            );
            if let Some(to) = notify {
                let _ = writeln!(settings, "notify = [\"{to}{with_key}\"]");
            }
            zones.to_vec()
        }
        Role::Secondary { primary, .. } => {
            let _ = writeln!(settings, "primaries = [\"{primary}{with_key}\"]");
            let _ = writeln!(settings, "allow-notify = [\"{NOTIFIERS}\"]");
            let kept = |o: &String| (o.clone(), PathBuf::from(kept(o)));
            zones.iter().map(|(o, _)| kept(o)).collect()
        }
        Role::Consumer { primary } => {
            let _ = write!(
                c,
                "[[catalog]]\nzone = \"{CATALOG}\"\nfile = \"{}\"\n\
                 primaries = [\"{primary}{with_key}\"]\nmembers-dir = \"kept/members\"\n\
                 [catalog.default]\nallow-notify = [\"{NOTIFIERS}\"]\n",
                kept(CATALOG)
            );
            return c;
        }
    };
    c.push_str(&crate::servers::heron_zones(&files, &settings));
    c
}

fn nsd_config(
    role: Role,
    addr: SocketAddr,
    zones: &[(String, PathBuf)],
    d: &str,
    xfrdir: &str,
) -> String {
    let mut c = format!(
        "server:\n  ip-address: {}@{}\n  server-count: 1\n  username: \"\"\n  chroot: \"\"\n  \
         database: \"\"\n  zonelistfile: \"{d}/zone.list\"\n  xfrdfile: \"{d}/xfrd.state\"\n  \
         xfrdir: \"{xfrdir}\"\n  pidfile: \"{d}/nsd.pid\"\n  zonesdir: \"{d}\"\n",
        addr.ip(),
        addr.port(),
    );
    if let Role::Secondary { reload, .. } = role {
        let seconds = match reload {
            NsdReload::Throttled => 1,
            NsdReload::AtOnce => 0,
        };
        let _ = writeln!(c, "  xfrd-reload-timeout: {seconds}");
    }
    c.push_str("remote-control:\n  control-enable: no\npattern:\n  name: \"all\"\n");
    match role {
        Role::Primary { notify } => {
            c.push_str("  provide-xfr: 127.0.0.0/8 NOKEY\n");
            if let Some(to) = notify {
                let _ = writeln!(c, "  notify: {}@{} NOKEY", to.ip(), to.port());
            }
        }
        Role::Secondary { primary, .. } | Role::Consumer { primary } => {
            let _ = write!(
                c,
                "  zonefile: \"kept/%s.zone\"\n  request-xfr: {}@{} NOKEY\n  allow-notify: {NOTIFIERS} NOKEY\n",
                primary.ip(),
                primary.port(),
            );
        }
    }
    for (origin, file) in zones {
        let _ = write!(
            c,
            "zone:\n  name: \"{origin}\"\n  include-pattern: \"all\"\n"
        );
        if let Role::Primary { .. } = role {
            let _ = writeln!(c, "  zonefile: \"{}\"", file.display());
        }
    }
    c
}

fn knot_config(role: Role, addr: SocketAddr, zones: &[(String, PathBuf)], d: &str) -> String {
    // A secondary's transfers run one per background worker.
    let (workers, pool) = match role {
        Role::Primary { .. } => (1, 0),
        Role::Secondary { .. } | Role::Consumer { .. } => (IN_FLIGHT, IN_FLIGHT),
    };
    let mut c = format!(
        "server:\n  rundir: \"{d}\"\n  listen: {}@{}\n  background-workers: {workers}\n  \
         udp-workers: 1\n  tcp-workers: 1\n  remote-pool-limit: {pool}\n\
         log:\n  - target: stderr\n    any: info\n\
         database:\n  storage: \"{d}\"\n  journal-db-max-size: 4G\n  timer-db-max-size: 1G\n  \
         kasp-db-max-size: 64M\n  catalog-db-max-size: 64M\n",
        addr.ip(),
        addr.port(),
    );
    match role {
        Role::Primary { notify } => {
            let _ = write!(
                c,
                "acl:\n  - id: transfer\n    address: 127.0.0.0/8\n    action: transfer\n"
            );
            let notify_line = match notify {
                Some(to) => {
                    let _ = write!(
                        c,
                        "remote:\n  - id: secondary\n    address: {}@{}\n",
                        to.ip(),
                        to.port()
                    );
                    "    notify: secondary\n"
                }
                None => "",
            };
            let _ = write!(
                c,
                "template:\n  - id: default\n    acl: transfer\n{notify_line}    zonefile-sync: -1\n    \
                 zonefile-load: difference\n    journal-content: changes\n    \
                 semantic-checks: off\nzone:\n"
            );
            for (origin, file) in zones {
                let _ = write!(
                    c,
                    "  - domain: \"{origin}\"\n    file: \"{}\"\n",
                    file.display()
                );
            }
        }
        Role::Secondary { primary, .. } => {
            let _ = write!(
                c,
                "remote:\n  - id: primary\n    address: {}@{}\nacl:\n  - id: notify\n    address: {NOTIFIERS}\n    \
                 action: notify\ntemplate:\n  - id: default\n    storage: \"{d}/kept\"\n    \
                 master: primary\n    acl: notify\n    semantic-checks: off\nzone:\n",
                primary.ip(),
                primary.port(),
            );
            for (origin, _) in zones {
                let _ = writeln!(c, "  - domain: \"{origin}\"");
            }
        }
        Role::Consumer { primary } => {
            // Members follow the template the catalog names
            // (`catalog-template`).
            let _ = write!(
                c,
                "remote:\n  - id: primary\n    address: {}@{}\nacl:\n  - id: notify\n    address: {NOTIFIERS}\n    \
                 action: notify\ntemplate:\n  - id: default\n    storage: \"{d}/kept\"\n    \
                 master: primary\n    acl: notify\n    semantic-checks: off\n\
                 zone:\n  - domain: \"{CATALOG}\"\n    catalog-role: interpret\n    catalog-template: default\n",
                primary.ip(),
                primary.port(),
            );
        }
    }
    c
}

fn bind_config(role: Role, addr: SocketAddr, zones: &[(String, PathBuf)], d: &str) -> String {
    let tuning = match role {
        Role::Primary { .. } => "  notify-delay 0;\n".to_string(),
        Role::Secondary { .. } | Role::Consumer { .. } => format!(
            "  serial-query-rate 10000;\n  transfers-in {IN_FLIGHT};\n  \
             transfers-per-ns {IN_FLIGHT};\n"
        ),
    };
    let mut c = format!(
        "options {{\n  directory \"{d}\";\n  pid-file \"{d}/named.pid\";\n  \
         session-keyfile \"{d}/session.key\";\n  listen-on port {} {{ {}; }};\n  \
         listen-on-v6 {{ none; }};\n  recursion no;\n  dnssec-validation no;\n  notify explicit;\n\
         {tuning}}};\ncontrols {{ }};\n",
        addr.port(),
        addr.ip(),
    );
    for (origin, file) in zones {
        match role {
            Role::Primary { notify } => {
                let also = notify.map_or(String::new(), |to| {
                    format!("  also-notify {{ {} port {}; }};\n", to.ip(), to.port())
                });
                let _ = write!(
                    c,
                    "zone \"{origin}\" {{\n  type primary;\n  file \"{}\";\n  check-names ignore;\n  \
                     allow-transfer {{ 127.0.0.0/8; }};\n{also}}};\n",
                    file.display()
                );
            }
            Role::Secondary { primary, .. } | Role::Consumer { primary } => {
                let _ = write!(
                    c,
                    "zone \"{origin}\" {{\n  type secondary;\n  file \"{}\";\n  \
                     primaries port {} {{ {}; }};\n  allow-notify {{ {NOTIFIERS}; }};\n}};\n",
                    kept(origin),
                    primary.port(),
                    primary.ip(),
                );
            }
        }
    }
    c
}
