//! Configurations for Heron, NSD, Knot and BIND as primaries or
//! secondaries of many zones, each with one worker of each kind, started
//! pinned, at nice -20, and in their own process group.

use std::fmt::Write as _;
use std::fs::{self, File};
use std::io;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use crate::servers::{KNOTD, Kind, NAMED, NSD};
use crate::sys;

/// The servers' (and the probe's) nice value: other people's work on a
/// shared machine then hardly takes CPU time from them while measured.
pub const NICE: i32 = -20;

/// What a server does with its zones.
#[derive(Clone, Copy, Debug)]
pub enum Role {
    /// Serves zone files to 127.0.0.0/8, notifying `notify` of changes.
    Primary { notify: Option<SocketAddr> },
    /// Pulls every zone from `primary`.
    Secondary { primary: SocketAddr },
}

/// A TSIG key (Heron only: the TSIG overhead is measured Heron to Heron).
#[derive(Clone, Debug)]
pub struct TsigKey {
    pub name: String,
    pub secret: String,
}

/// One server process of a transfer benchmark.
pub struct Peer {
    pub addr: SocketAddr,
    pub dir: PathBuf,
    pub started: Instant,
    child: Option<Child>,
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
        let argv = write_config(kind, role, addr, zones, key, dir, heron)
            .map_err(|e| format!("{}: cannot write the configuration: {e}", dir.display()))?;
        let log = File::create(dir.join("server.log")).map_err(|e| e.to_string())?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let cpu = match role {
            Role::Primary { .. } => "0",
            Role::Secondary { .. } => "1",
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
            addr,
            dir: dir.to_path_buf(),
            started,
            child: Some(child),
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
        // SAFETY: kill(2) on the PID of our own unreaped child.
        unsafe { libc::kill(self.pid() as i32, libc::SIGHUP) };
    }

    /// Resident memory of the server's processes, KiB.
    pub fn rss_kib(&self) -> u64 {
        sys::group_memory_kib(self.pid()).0
    }

    /// SIGTERM, a bounded wait, then SIGKILL to the process group (only
    /// processes this suite started).
    pub fn stop(&mut self) {
        if let Some(child) = self.child.take() {
            sys::stop_group(child);
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn write_config(
    kind: Kind,
    role: Role,
    addr: SocketAddr,
    zones: &[(String, PathBuf)],
    key: Option<&TsigKey>,
    dir: &Path,
    heron: &Path,
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
            ("nsd.conf", nsd_config(role, addr, zones, &d), argv)
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
        Kind::Reflector => return Err(io::Error::other("the reflector serves no zones")),
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
        Role::Secondary { primary } => {
            let _ = writeln!(settings, "primaries = [\"{primary}{with_key}\"]");
            let _ = writeln!(settings, "allow-notify = [\"{NOTIFIERS}\"]");
            let kept = |o: &String| (o.clone(), PathBuf::from(kept(o)));
            zones.iter().map(|(o, _)| kept(o)).collect()
        }
    };
    c.push_str(&crate::servers::heron_zones(&files, &settings));
    c
}

fn nsd_config(role: Role, addr: SocketAddr, zones: &[(String, PathBuf)], d: &str) -> String {
    let mut c = format!(
        "server:\n  ip-address: {}@{}\n  server-count: 1\n  username: \"\"\n  chroot: \"\"\n  \
         database: \"\"\n  zonelistfile: \"{d}/zone.list\"\n  xfrdfile: \"{d}/xfrd.state\"\n  \
         xfrdir: \"{d}\"\n  pidfile: \"{d}/nsd.pid\"\n  zonesdir: \"{d}\"\n  verbosity: 1\n\
         remote-control:\n  control-enable: no\npattern:\n  name: \"all\"\n",
        addr.ip(),
        addr.port()
    );
    match role {
        Role::Primary { notify } => {
            c.push_str("  provide-xfr: 127.0.0.0/8 NOKEY\n");
            if let Some(to) = notify {
                let _ = writeln!(c, "  notify: {}@{} NOKEY", to.ip(), to.port());
            }
        }
        Role::Secondary { primary } => {
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
    let mut c = format!(
        "server:\n  rundir: \"{d}\"\n  listen: {}@{}\n  background-workers: 1\n  udp-workers: 1\n  \
         tcp-workers: 1\nlog:\n  - target: stderr\n    any: info\n\
         database:\n  storage: \"{d}\"\n  journal-db-max-size: 4G\n  timer-db-max-size: 1G\n  \
         kasp-db-max-size: 64M\n  catalog-db-max-size: 64M\n",
        addr.ip(),
        addr.port()
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
        Role::Secondary { primary } => {
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
    }
    c
}

fn bind_config(role: Role, addr: SocketAddr, zones: &[(String, PathBuf)], d: &str) -> String {
    let mut c = format!(
        "options {{\n  directory \"{d}\";\n  pid-file \"{d}/named.pid\";\n  \
         session-keyfile \"{d}/session.key\";\n  listen-on port {} {{ {}; }};\n  \
         listen-on-v6 {{ none; }};\n  recursion no;\n  dnssec-validation no;\n  notify explicit;\n}};\n\
         controls {{ }};\n",
        addr.port(),
        addr.ip()
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
            Role::Secondary { primary } => {
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
