//! What an operator runs Heron with: the systemd unit and its readiness
//! notifications, JSON logs, man pages and shell completions.

use std::fs;
use std::net::SocketAddr;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use heron_proto::message::Message;
use heron_proto::{Name, RType, Rcode};
use heron_testkit::{FakePrimary, QueryOpts, build_query, free_port, try_query_tcp, try_query_udp};

fn heron() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_heron"))
}

fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

fn edge_zone() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/differential/edge.test.zone")
}

/// A fresh directory under the system's temporary one, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let dir =
            std::env::temp_dir().join(format!("heron-ops-{tag}-{}-{nanos:x}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// `heron serve` on a free port with `NOTIFY_SOCKET` set to a socket of
/// ours, its stderr in a file; killed on drop if still running.
struct Served {
    child: Child,
    addr: SocketAddr,
    notifications: UnixDatagram,
    stderr: PathBuf,
    _dir: TempDir,
}

impl Served {
    /// Starts with the edge.test zone, `config` (its text, if any) and
    /// `HERON_LOG` as given (unset if None).
    fn start(config: Option<&str>, heron_log: Option<&str>) -> Served {
        Served::start_in(TempDir::new("serve"), &edge_zone(), config, heron_log)
    }

    /// [`Served::start`] in `dir`, with the edge.test zone read from `zone`.
    fn start_in(
        dir: TempDir,
        zone: &Path,
        config: Option<&str>,
        heron_log: Option<&str>,
    ) -> Served {
        Served::start_with(dir, zone, config, heron_log, false)
    }

    /// [`Served::start`] as systemd starts it with `StandardError=journal`:
    /// `JOURNAL_STREAM` names the file stderr is (by device and inode).
    fn start_as_if_journald(config: Option<&str>) -> Served {
        Served::start_with(TempDir::new("journal"), &edge_zone(), config, None, true)
    }

    fn start_with(
        dir: TempDir,
        zone: &Path,
        config: Option<&str>,
        heron_log: Option<&str>,
        journal: bool,
    ) -> Served {
        let socket = dir.0.join("notify.sock");
        let notifications = UnixDatagram::bind(&socket).unwrap();
        notifications
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let stderr = dir.0.join("stderr");
        let stderr_file = fs::File::create(&stderr).unwrap();
        let mut command = Command::new(heron());
        command.env_remove("JOURNAL_STREAM");
        if journal {
            use std::os::unix::fs::MetadataExt;
            let meta = stderr_file.metadata().unwrap();
            command.env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()));
        }
        command
            .arg("serve")
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--zone")
            .arg(format!("edge.test={}", zone.display()))
            .env("NOTIFY_SOCKET", &socket)
            .env_remove("HERON_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr_file);
        if let Some(text) = config {
            let path = dir.0.join("heron.toml");
            fs::write(&path, text).unwrap();
            command.arg("--config").arg(path);
        }
        if let Some(filter) = heron_log {
            command.env("HERON_LOG", filter);
        }
        Served {
            child: command.spawn().unwrap(),
            addr,
            notifications,
            stderr,
            _dir: dir,
        }
    }

    /// The notifications received up to and including the next READY=1,
    /// one datagram per entry.
    fn until_ready(&self) -> Vec<String> {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while !seen
            .last()
            .is_some_and(|m: &String| m.lines().any(|l| l == "READY=1"))
        {
            let n = self
                .notifications
                .recv(&mut buf)
                .unwrap_or_else(|e| panic!("no READY=1 ({e}); got {seen:?}; log: {}", self.log()));
            seen.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
        seen
    }

    fn signal(&self, name: &str) {
        let sent = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(sent.success(), "kill -{name}");
    }

    fn stop(mut self) -> (ExitStatus, String) {
        self.signal("TERM");
        let status = self.child.wait().unwrap();
        (status, self.log())
    }

    fn log(&self) -> String {
        fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn assert_edge_test_answers(addr: SocketAddr) {
    let query = build_query(
        &Name::parse("edge.test").unwrap(),
        RType::SOA,
        &QueryOpts::default(),
    );
    for answer in [try_query_udp(addr, &query), try_query_tcp(addr, &query)] {
        let m = Message::parse(&answer.expect("an answer")).unwrap();
        assert_eq!((m.rcode(), m.answers.len()), (Rcode::NOERROR, 1));
    }
}

#[test]
fn ready_once_the_zone_answers_and_reloading_around_a_reload() {
    let mut server = Served::start(None, None);
    server.until_ready();
    // No waiting, no retry loop: READY=1 promises the zone answers now.
    assert_edge_test_answers(server.addr);

    server.signal("HUP");
    let reload = server.until_ready();
    assert!(
        reload[0].lines().any(|l| l == "RELOADING=1"),
        "a reload starts with RELOADING=1: {reload:?}"
    );
    assert!(
        reload[0].lines().any(|l| l.starts_with("MONOTONIC_USEC=")),
        "{reload:?}"
    );
    assert_edge_test_answers(server.addr);
    server.signal("TERM");
    let mut buf = [0u8; 4096];
    let n = server
        .notifications
        .recv(&mut buf)
        .expect("a notification at stop");
    let stopping = String::from_utf8_lossy(&buf[..n]);
    assert!(stopping.lines().any(|l| l == "STOPPING=1"), "{stopping}");
    let status = server.child.wait().unwrap();
    assert!(status.success(), "{status}: {}", server.log());
}

#[test]
fn a_load_says_it_is_under_way_before_ready() {
    // Zone files must be regular files (a FIFO could hang a load), so the
    // load is not held open: the first STATUS line goes out when the load
    // starts, whatever its length, and READY=1 comes after it.
    let server = Served::start(None, None);
    let messages = server.until_ready();
    let first_status = messages
        .iter()
        .position(|m| m.starts_with("STATUS=loading: "));
    let ready = messages.iter().position(|m| m.contains("READY=1"));
    assert!(
        matches!((first_status, ready), (Some(s), Some(r)) if s < r),
        "a STATUS=loading line before READY=1: {messages:?}"
    );
    assert!(
        messages[first_status.unwrap()].contains(" of 1 zones"),
        "{messages:?}"
    );
    assert_edge_test_answers(server.addr);
}

/// Every stderr line of a server logging JSON, parsed.
fn json_lines(log: &str) -> Vec<serde_json::Value> {
    log.lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect()
}

fn has_message(lines: &[serde_json::Value], prefix: &str) -> bool {
    lines
        .iter()
        .any(|l| l["message"].as_str().is_some_and(|m| m.starts_with(prefix)))
}

const JSON_WARN_BUT_RELOAD_INFO: &str = "[log]\nformat = \"json\"\nlevel = \"warn\"\n\
     targets = { \"heron::reload\" = \"info\" }\n";

#[test]
fn json_logs_carry_the_zone_as_a_key_at_the_levels_configured() {
    let server = Served::start(Some(JSON_WARN_BUT_RELOAD_INFO), None);
    server.until_ready();
    let (status, log) = server.stop();
    assert!(status.success(), "{status}: {log}");
    let lines = json_lines(&log);
    let loaded = lines
        .iter()
        .find(|l| l["message"] == "zone loaded")
        .unwrap_or_else(|| panic!("no zone-loaded event: {log}"));
    assert_eq!(
        loaded["zone"].as_str().map(|z| z.trim_end_matches('.')),
        Some("edge.test")
    );
    assert_eq!(loaded["level"], "INFO");
    assert!(loaded["serial"].is_u64(), "{loaded}");
    // heron::serve stays at the file's level, warn.
    assert!(!has_message(&lines, "answering on"), "{log}");
}

#[test]
fn a_zone_transferred_in_is_logged_with_its_zone_and_primary_as_keys() {
    let primary = FakePrimary::start(&["xfr.test"], 7);
    let dir = TempDir::new("xfr");
    let config = format!(
        "[log]\nformat = \"json\"\n\
         [[zone]]\norigin = \"xfr.test\"\nfile = \"{}\"\nprimaries = [\"{}\"]\n",
        dir.0.join("xfr.test.zone").display(),
        primary.addr()
    );
    let server = Served::start_in(dir, &edge_zone(), Some(&config), None);
    server.until_ready();
    // A line being written as the log is read does not parse yet: skipped.
    let transferred = |log: &str| {
        let mut parsed = log
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok());
        parsed.find(|l: &serde_json::Value| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("zone transferred in"))
        })
    };
    let mut event = None;
    for _ in 0..200 {
        event = transferred(&server.log());
        if event.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let event = event.unwrap_or_else(|| panic!("no transfer logged: {}", server.log()));
    assert_eq!(event["zone"], "xfr.test.", "{event}");
    assert_eq!(event["peer"], primary.addr().to_string(), "{event}");
    assert_eq!(event["serial"], 7, "{event}");
}

#[test]
fn heron_log_takes_precedence_over_the_files_levels() {
    let server = Served::start(Some(JSON_WARN_BUT_RELOAD_INFO), Some("info"));
    server.until_ready();
    let (status, log) = server.stop();
    assert!(status.success(), "{status}: {log}");
    let lines = json_lines(&log);
    assert!(has_message(&lines, "answering on"), "{log}");
}

/// Black-box finding AL-11: `HERON_LOG=heron_xfr=debug` (targets and no
/// level for the rest) turned every other target off, errors included.
/// The rest keeps the configured level (info here).
#[test]
fn heron_log_of_targets_only_keeps_the_level_for_the_rest() {
    let server = Served::start(None, Some("heron_xfr=debug"));
    server.until_ready();
    let (status, log) = server.stop();
    assert!(status.success(), "{status}: {log}");
    assert!(log.contains("answering on"), "{log}");
}

/// `heron check-config PATH`: whether it passed, and all it said.
fn check_config(path: &std::path::Path) -> (bool, String) {
    let out = Command::new(heron())
        .arg("check-config")
        .arg(path)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr) + String::from_utf8_lossy(&out.stdout);
    (out.status.success(), said.into_owned())
}

#[test]
fn check_config_rejects_a_log_level_it_does_not_know() {
    let dir = TempDir::new("check");
    let path = dir.0.join("heron.toml");
    fs::write(&path, "[log]\nlevel = \"chatty\"\n").unwrap();
    let (ok, said) = check_config(&path);
    assert!(!ok, "{said}");
    assert!(said.contains("chatty"), "{said}");
}

/// Black-box finding: a folder where the control socket goes passed
/// check-config, and heron serve then refused to start. Both say so now;
/// a stale socket file there is fine (serve replaces it).
#[test]
fn check_config_says_what_blocks_the_control_socket() {
    let dir = TempDir::new("check-control");
    let path = dir.0.join("heron.toml");
    fs::write(&path, "[server]\ncontrol = \"ctl\"\n").unwrap();
    fs::create_dir(dir.0.join("ctl")).unwrap();
    let check = || check_config(&path);
    let (ok, said) = check();
    assert!(!ok && said.contains("not a socket"), "{said}");
    fs::remove_dir(dir.0.join("ctl")).unwrap();
    let stale = std::os::unix::net::UnixListener::bind(dir.0.join("ctl")).unwrap();
    drop(stale);
    let (ok, said) = check();
    assert!(ok && said.contains("OK, 0 zones\n"), "{said}");
    // Secondary zones are counted too (they said "0 zones").
    let secondary =
        "[[zone]]\norigin = \"s.test\"\nfile = \"s.zone\"\nprimaries = [\"127.0.0.1:53\"]\n";
    fs::write(&path, secondary).unwrap();
    let (ok, said) = check();
    assert!(
        ok && said.contains("OK, 0 zones and 1 secondary zones"),
        "{said}"
    );
}

/// Black-box finding: with any configuration error, check-config said
/// nothing of the zone files; one run says every problem now.
#[test]
fn check_config_checks_zone_files_beside_configuration_errors() {
    let dir = TempDir::new("check-both");
    let path = dir.0.join("heron.toml");
    fs::write(
        dir.0.join("b.zone"),
        "$ORIGIN b.test.\n@ 60 SOA ns h 1 2 3 4 5\n@ 60 NS ns\nns 60 A 1.2.3\n",
    )
    .unwrap();
    let text = "[rrl]\nslip = 50\n[[zone]]\norigin = \"b.test\"\nfile = \"b.zone\"\n\
                [[zone]]\norigin = \"s.test\"\nfile = \"s.zone\"\nprimaries = [\"127.0.0.1:53\"]\n";
    fs::write(&path, text).unwrap();
    let (ok, said) = check_config(&path);
    assert!(!ok, "{said}");
    assert!(said.contains("slip"), "{said}");
    assert!(said.contains("bad IPv4 address '1.2.3'"), "{said}");
    assert!(
        !said.contains("s.test"),
        "a secondary's file is its kept copy: {said}"
    );
}

/// Black-box findings AM-7 and AM-8: two zones whose files collide once
/// Heron writes them (a zone taking updates written back over the other
/// one's file; two signed zones' one `FILE.signed`; a kept copy named as
/// a signed zone's signed copy) passed check-config, and one zone's file
/// was lost at the next restart. check-config refuses them, naming the
/// path and both zones; zones that only read one file still pass.
#[test]
fn check_config_refuses_zones_that_would_write_one_file() {
    let dir = TempDir::new("check-shared");
    let path = dir.0.join("heron.toml");
    // Relative names only: any zone may read it.
    let parked = "@ 60 SOA ns h 1 2 3 4 5\n@ 60 NS ns\nns 60 A 192.0.2.1\n";
    fs::write(dir.0.join("z.zone"), parked).unwrap();
    let zone = |origin: &str, file: &str, more: &str| {
        format!("[[zone]]\norigin = \"{origin}\"\nfile = \"{file}\"\n{more}\n")
    };
    let update = "allow-update = [\"127.0.0.1 zonesub ANY\"]\nzonefile-sync = 1";
    let signed = "dnssec-policy = \"default\"";
    let cases = [
        (
            zone("s.test", "z.zone", "") + &zone("t.test", "z.zone", update),
            "z.zone is used by zone s.test. (zone file) and zone t.test. (zone file (written back after updates))",
        ),
        (
            zone("s.test", "z.zone", signed) + &zone("t.test", "z.zone", signed),
            "z.zone.signed is used by zone s.test. (signed copy (written by every signing)) and zone t.test. (signed copy",
        ),
        (
            zone("s.test", "z.zone", signed)
                + &zone("k.test", "z.zone.signed", "primaries = [\"127.0.0.1:53\"]"),
            "z.zone.signed is used by zone",
        ),
    ];
    for (text, want) in cases {
        fs::write(&path, &text).unwrap();
        let (ok, said) = check_config(&path);
        assert!(!ok, "{text}: {said}");
        assert!(
            said.contains(want) && said.contains("give each its own file"),
            "{text}: {said}"
        );
    }
    // Parked domains: zones that only read one file.
    fs::write(
        &path,
        zone("s.test", "z.zone", "") + &zone("t.test", "z.zone", signed),
    )
    .unwrap();
    let (ok, said) = check_config(&path);
    assert!(ok, "{said}");
}

/// Black-box findings: values check-config passed though the server
/// could not work with them. Each is refused now, with what is wrong.
#[test]
fn check_config_refuses_settings_that_cannot_work() {
    let dir = TempDir::new("check-bounds");
    let path = dir.0.join("heron.toml");
    let cases = [
        // AM-1: every RRSIG expiration wrapped past 2^32 s.
        (
            "[[dnssec-policy]]\nname = \"p\"\nsignature-validity = \"3650w\"\n",
            "signature-validity must be at most 3660d",
        ),
        // AL-2: every TCP and TLS connection was closed on accept.
        (
            "[tcp]\nmax-connections = 0\n",
            "[tcp] max-connections must be at least 1",
        ),
        (
            "[tcp]\nmax-connections-per-client = 0\n",
            "[tcp] max-connections-per-client must be at least 1",
        ),
        // AL-4: serve bound the address twice.
        (
            "[tls]\nlisten = [\"127.0.0.1:8530\", \"127.0.0.1:8530\"]\ncertificate = \"c.pem\"\nkey = \"k.pem\"\n",
            "[tls] listen names 127.0.0.1:8530 twice",
        ),
        // AL-5: a key read as two directives (heron=trace and x=error).
        (
            "[log]\ntargets = { \"heron=trace,x\" = \"error\" }\n",
            "log target \"heron=trace,x\": expected a crate or module path",
        ),
        // AL-12: port 0 gave each socket another random port.
        (
            "[server]\nlisten = [\"127.0.0.1:0\"]\n",
            "[server] listen 127.0.0.1:0: the port must be 1 to 65535",
        ),
        (
            "[tls]\nlisten = [\"[::1]:0\"]\ncertificate = \"c.pem\"\nkey = \"k.pem\"\n",
            "[tls] listen [::1]:0: the port must be 1 to 65535",
        ),
        (
            "[metrics]\nlisten = \"127.0.0.1:0\"\n",
            "[metrics] listen 127.0.0.1:0: the port must be 1 to 65535",
        ),
    ];
    for (text, want) in cases {
        fs::write(&path, text).unwrap();
        let (ok, said) = check_config(&path);
        assert!(!ok && said.contains(want), "{text}: {said}");
    }
}

/// How `child` exited, or None if it was still running after 20 s
/// (killed then).
fn exited_within_20s(child: &mut Child) -> Option<ExitStatus> {
    let mut status = None;
    heron_testkit::eventually_within(Duration::from_secs(20), || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    status
}

/// `heron check-config PATH` given 20 s: whether it passed and all it
/// said, or None if it was still running (killed).
fn check_config_within(path: &Path) -> Option<(bool, String)> {
    let out = path.with_extension("out");
    let mut child = Command::new(heron())
        .arg("check-config")
        .arg(path)
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out).unwrap())
        .stderr(Stdio::from(fs::File::create(&out).unwrap()))
        .spawn()
        .unwrap();
    let status = exited_within_20s(&mut child);
    Some((status?.success(), fs::read_to_string(&out).unwrap()))
}

/// Black-box finding AL-15: `/dev/zero` or a FIFO given as the
/// configuration file, a TLS certificate, key or CA was read without end
/// (or waited for a writer), and `[dnstap] file = "/dev/zero"` passed.
/// Each is refused now with what it is, before a byte is read.
#[test]
fn check_config_refuses_files_that_are_not_regular_files() {
    let dir = TempDir::new("check-regular");
    let fifo = dir.0.join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    fs::write(dir.0.join("k.pem"), "").unwrap();
    let (zero, fifo) = (
        "a character device, not a regular file",
        "a FIFO (named pipe), not a regular file",
    );
    let (said, _) = check_config_within(Path::new("/dev/zero"))
        .map(|(ok, said)| (said, ok))
        .expect("ends");
    assert!(said.contains(&format!("/dev/zero is {zero}")), "{said}");
    let path = dir.0.join("heron.toml");
    let tls = "[tls]\nlisten = [\"127.0.0.1:8530\"]\n";
    let cases = [
        (
            format!("{tls}certificate = \"/dev/zero\"\nkey = \"k.pem\"\n"),
            zero,
        ),
        (
            format!("{tls}certificate = \"k.pem\"\nkey = \"fifo\"\n"),
            fifo,
        ),
        ("[secondary]\ntls-ca = \"/dev/zero\"\n".to_string(), zero),
        ("[dnstap]\nfile = \"/dev/zero\"\n".to_string(), zero),
        ("[dnstap]\nfile = \"fifo\"\n".to_string(), fifo),
    ];
    for (text, want) in cases {
        fs::write(&path, &text).unwrap();
        let (ok, said) =
            check_config_within(&path).unwrap_or_else(|| panic!("{text}: still running"));
        assert!(!ok && said.contains(want), "{text}: {said}");
    }
}

/// `heron serve ARGS` in `dir`, which should refuse to start: its exit
/// status and stderr (None if it was still running after 20 s: killed).
fn serve_refused(dir: &Path, args: &[String]) -> Option<(ExitStatus, String)> {
    let stderr = dir.join("serve.err");
    let mut child = Command::new(heron())
        .arg("serve")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let status = exited_within_20s(&mut child);
    Some((status?, fs::read_to_string(&stderr).unwrap()))
}

/// Black-box finding AL-6: `heron serve --zone` took a zone the
/// configuration file has, or one given twice, silently (the last one
/// won); a `--listen` address given twice was bound twice. Each is
/// refused now, naming the zone or address, as the same mistake in the
/// file is.
#[test]
fn serve_refuses_a_zone_or_address_given_twice() {
    let dir = TempDir::new("serve-twice");
    fs::write(
        dir.0.join("a.zone"),
        "@ 60 SOA ns h 1 2 3 4 5\n@ 60 NS ns\nns 60 A 192.0.2.1\n",
    )
    .unwrap();
    fs::copy(dir.0.join("a.zone"), dir.0.join("b.zone")).unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    fs::write(
        dir.0.join("heron.toml"),
        format!(
            "[server]\nlisten = [\"{listen}\"]\n[[zone]]\norigin = \"z.test\"\nfile = \"a.zone\"\n"
        ),
    )
    .unwrap();
    let args = |more: &[&str]| -> Vec<String> { more.iter().map(|s| s.to_string()).collect() };
    let cases = [
        (
            args(&[
                "--listen",
                &listen,
                "--zone",
                "z.test=a.zone",
                "--zone",
                "Z.test=b.zone",
            ]),
            "--zone Z.test.=b.zone: zone Z.test. is configured more than once".to_string(),
        ),
        (
            args(&["--config", "heron.toml", "--zone", "z.test=b.zone"]),
            "--zone z.test.=b.zone: zone z.test. is configured more than once".to_string(),
        ),
        (
            args(&[
                "--listen",
                &listen,
                "--listen",
                &listen,
                "--zone",
                "z.test=a.zone",
            ]),
            format!("--listen names {listen} twice"),
        ),
        // AL-12: each socket bound another random port.
        (
            args(&["--listen", "127.0.0.1:0", "--zone", "z.test=a.zone"]),
            "--listen 127.0.0.1:0: the port must be 1 to 65535".to_string(),
        ),
    ];
    for (args, want) in cases {
        let refused = serve_refused(&dir.0, &args);
        let Some((status, said)) = refused else {
            panic!("{args:?}: still serving after 20 s");
        };
        assert!(
            !status.success() && said.contains(&want),
            "{args:?}: {status}: {said}"
        );
    }
}

const SUBCOMMANDS: [&str; 9] = [
    "serve",
    "check-zone",
    "check-config",
    "reload",
    "doctor",
    "keygen",
    "keymgr",
    "man",
    "completions",
];

fn write_man_pages(dir: &Path) {
    let status = Command::new(heron()).arg("man").arg(dir).status().unwrap();
    assert!(status.success());
}

/// What `man -l` shows of a page, as a reader would see it.
fn rendered(page: &Path) -> String {
    let out = Command::new("man")
        .arg("-l")
        .arg(page)
        .env("MANWIDTH", "200")
        .env("MAN_KEEP_FORMATTING", "0")
        .output()
        .expect("man(1) runs (scripts/test-all.sh installs man-db)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Overstrike bold and underline, as grotty may send them.
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut plain = String::new();
    for c in text.chars() {
        if c == '\u{8}' {
            plain.pop();
        } else {
            plain.push(c);
        }
    }
    plain
}

#[test]
fn man_pages_render_for_heron_and_each_subcommand() {
    let dir = TempDir::new("man");
    write_man_pages(&dir.0);
    let top = rendered(&dir.0.join("heron.1"));
    assert!(top.contains("authoritative-only DNS server"), "{top}");
    for sub in SUBCOMMANDS {
        let page = dir.0.join(format!("heron-{sub}.1"));
        let roff = fs::read_to_string(&page).unwrap_or_else(|e| panic!("{sub}: {e}"));
        assert!(roff.starts_with(".ie") || roff.contains("\n.TH "), "{roff}");
        assert!(top.contains(sub), "heron(1) lists {sub}: {top}");
        assert!(rendered(&page).contains("SYNOPSIS"), "{sub}");
    }
    // What clap has no place for (issue 44): each page's exit codes,
    // files and, where they help, examples; ctl's codes are its own.
    for page in [
        "heron.1",
        "heron-serve.1",
        "heron-ctl-status.1",
        "heron-check-config.1",
    ] {
        let text = rendered(&dir.0.join(page));
        for section in ["EXIT STATUS", "FILES", "SEE ALSO"] {
            assert!(text.contains(section), "{page} has no {section}: {text}");
        }
    }
    let ctl = rendered(&dir.0.join("heron-ctl-status.1"));
    assert!(
        ctl.contains("refused without trying") && ctl.contains("EXAMPLES"),
        "{ctl}"
    );
    let config = rendered(&dir.0.join("heron.toml.5"));
    for part in [
        "[server]",
        "[[zone]]",
        "[[catalog]]",
        "[[dnssec-policy]]",
        "allow-update",
        "[dnstap]",
        "EXAMPLES",
    ] {
        assert!(
            config.contains(part),
            "heron.toml(5) names {part}: {config}"
        );
    }
    let serve = rendered(&dir.0.join("heron-serve.1"));
    for option in ["--config", "--listen", "--zone", "--workers", "--control"] {
        assert!(
            serve.contains(option),
            "heron-serve(1) documents {option}: {serve}"
        );
    }
}

/// Installed as operations.md says, into a `man1` folder: heron.toml.5
/// goes to `man5` beside it, where `man 5 heron.toml` finds it.
#[test]
fn man_into_a_man1_folder_puts_the_configuration_page_in_man5() {
    let dir = TempDir::new("man-sections");
    let status = (Command::new(heron()).arg("man").arg(dir.0.join("man1")))
        .status()
        .unwrap();
    assert!(status.success());
    assert!(dir.0.join("man1/heron.1").exists());
    assert!(dir.0.join("man5/heron.toml.5").exists());
    assert!(!dir.0.join("man1/heron.toml.5").exists());
    let out = Command::new("man")
        .arg("-M")
        .arg(&dir.0)
        .args(["5", "heron.toml"])
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "80")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn man_fails_on_a_directory_it_cannot_create() {
    let dir = TempDir::new("man-bad");
    let file = dir.0.join("a-file");
    fs::write(&file, "").unwrap();
    let out = Command::new(heron())
        .arg("man")
        .arg(file.join("man1"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("a-file"));
}

fn completions(shell: &str) -> String {
    let out = Command::new(heron())
        .args(["completions", shell])
        .output()
        .unwrap();
    assert!(out.status.success(), "{shell}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn bash_completion_sources_cleanly_and_completes_subcommands() {
    let dir = TempDir::new("bash");
    let script = dir.0.join("heron.bash");
    fs::write(&script, completions("bash")).unwrap();
    let syntax = Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(
        syntax.status.success(),
        "{}",
        String::from_utf8_lossy(&syntax.stderr)
    );
    // Sourced, then asked what follows `heron ser`.
    let complete = format!(
        "source {}; COMP_WORDS=(heron ser); COMP_CWORD=1; COMP_LINE='heron ser'; \
         COMP_POINT=9; _heron heron ser heron; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display()
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(complete)
        .output()
        .unwrap();
    let words = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        words.trim(),
        "serve",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn zsh_and_fish_completions_name_every_subcommand() {
    for shell in ["zsh", "fish"] {
        let script = completions(shell);
        for sub in SUBCOMMANDS {
            assert!(script.contains(sub), "{shell} completes {sub}");
        }
    }
    let bad = Command::new(heron())
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
}

/// `systemd-analyze verify` on docs/heron.service, with the binary paths
/// pointed at the one built (verify checks they are executable) and the
/// man pages it names on MANPATH (verify checks they exist).
#[test]
fn the_unit_file_passes_systemd_analyze_verify() {
    let dir = TempDir::new("unit");
    let unit = fs::read_to_string(repo_file("docs/heron.service")).unwrap();
    assert!(
        unit.contains("ExecStart=/usr/local/bin/heron serve"),
        "{unit}"
    );
    let said = verify_unit(&dir.0, &unit);
    assert!(
        !said.contains("heron.service"),
        "warnings about the unit: {said}"
    );
}

/// Runs `systemd-analyze verify` on the shipped unit in `dir`, with the
/// binary paths pointed at the one built and its man pages on MANPATH;
/// what it said. Fails on an error or on any line naming the unit.
fn verify_unit(dir: &std::path::Path, unit: &str) -> String {
    let unit = unit.replace("/usr/local/bin/heron", &heron().display().to_string());
    let path = dir.join("heron.service");
    fs::write(&path, unit).unwrap();
    write_man_pages(&dir.join("man/man1"));
    let out = match Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .env("MANPATH", dir.join("man"))
        .output()
    {
        Ok(out) => out,
        Err(e) => panic!("systemd-analyze: {e} (scripts/test-all.sh installs systemd)"),
    };
    let said = String::from_utf8_lossy(&out.stderr) + String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    said.into_owned()
}

/// Issue 44: `[xdp]` could not work under the unit (no capability but
/// CAP_NET_BIND_SERVICE, no `bpf` system call) and nothing said so. The
/// drop-in docs/heron-xdp.conf adds what it needs; systemd reads it with
/// the unit (from heron.service.d/, as under /etc/systemd/system) without
/// a word, and `bpf`, which it allows, is not in the unit's
/// @system-service.
#[test]
fn the_xdp_drop_in_passes_systemd_analyze_verify_with_the_unit() {
    let dir = TempDir::new("unit-xdp");
    let drop_in = fs::read_to_string(repo_file("docs/heron-xdp.conf")).unwrap();
    fs::create_dir_all(dir.0.join("heron.service.d")).unwrap();
    fs::write(dir.0.join("heron.service.d/xdp.conf"), &drop_in).unwrap();
    let unit = fs::read_to_string(repo_file("docs/heron.service")).unwrap();
    let said = verify_unit(&dir.0, &unit);
    assert!(!said.contains("heron"), "warnings: {said}");
    // systemd reads the drop-in: a key it does not know is named.
    fs::write(
        dir.0.join("heron.service.d/xdp.conf"),
        format!("{drop_in}NoSuchKey=1\n"),
    )
    .unwrap();
    let said = verify_unit(&dir.0, &unit);
    assert!(
        said.contains("xdp.conf") && said.contains("NoSuchKey"),
        "{said}"
    );
    for key in [
        "AmbientCapabilities=CAP_BPF CAP_NET_ADMIN CAP_NET_RAW",
        "SystemCallFilter=bpf",
        "LimitMEMLOCK=infinity",
    ] {
        assert!(drop_in.lines().any(|l| l == key), "{key}");
    }
    assert!(unit.contains("SystemCallFilter=@system-service"));
    let service = system_calls_of("@system-service");
    assert!(service.contains("mmap"), "{service:?}");
    assert!(!service.contains("bpf"), "{service:?}");
}

/// The system calls systemd's filter `group` allows, its groups expanded.
fn system_calls_of(group: &str) -> std::collections::BTreeSet<String> {
    let out = Command::new("systemd-analyze")
        .arg("syscall-filter")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut groups: std::collections::HashMap<String, Vec<String>> = Default::default();
    let mut current = String::new();
    for line in text.lines() {
        match line.trim() {
            "" => {}
            name if !line.starts_with(' ') => current = name.to_string(),
            entry if !entry.starts_with('#') => groups
                .entry(current.clone())
                .or_default()
                .push(entry.into()),
            _ => {}
        }
    }
    let mut calls = std::collections::BTreeSet::new();
    let (mut pending, mut seen) = (vec![group.to_string()], std::collections::HashSet::new());
    while let Some(next) = pending.pop() {
        if !seen.insert(next.clone()) {
            continue;
        }
        for entry in groups.get(&next).into_iter().flatten() {
            match entry.starts_with('@') {
                true => pending.push(entry.clone()),
                false => drop(calls.insert(entry.clone())),
            }
        }
    }
    assert!(!calls.is_empty(), "{group} from:\n{text}");
    calls
}

/// Issue 44: under journald every line was filed at the priority of the
/// stream (info), errors included. With stderr the journal's stream, each
/// line starts with its syslog priority; anywhere else, nothing changes.
#[test]
fn under_journald_each_line_carries_its_syslog_priority() {
    // A zone file that does not load: an error, and the rest at info.
    let dir = TempDir::new("journal-error");
    let broken = dir.0.join("broken.zone");
    fs::write(
        &broken,
        "$TTL 60\n@ SOA ns h 1 2 3 4 5\nbad A 192.0.2.300\n",
    )
    .unwrap();
    let config = format!(
        "[[zone]]\norigin = \"broken.test\"\nfile = \"{}\"\n",
        broken.display()
    );
    let server = Served::start_as_if_journald(Some(&config));
    server.until_ready();
    let (status, log) = server.stop();
    assert!(status.success(), "{status}: {log}");
    let lines: Vec<&str> = log.lines().collect();
    assert!(!lines.is_empty());
    for line in &lines {
        let known = ["<3>", "<4>", "<6>", "<7>"]
            .iter()
            .any(|p| line.starts_with(p));
        assert!(known, "no priority on {line:?}");
    }
    let said = |prefix: &str, text: &str| {
        lines
            .iter()
            .any(|l| l.starts_with(prefix) && l.contains(text))
    };
    assert!(said("<6>", "ready: serving"), "{log}");
    assert!(
        said("<3>", "broken.zone"),
        "the load error as an error: {log}"
    );
    assert!(!log.contains('\u{1b}'), "no colours for the journal: {log}");
    // Without the variable: no prefixes.
    let plain = Served::start(None, None);
    plain.until_ready();
    let (_, log) = plain.stop();
    assert!(log.lines().all(|l| !l.starts_with('<')), "{log}");
}

/// Issue 44: a `[log]` change was silently ignored by a reload. Levels
/// now apply at once; a format change is said to wait for a restart.
#[test]
fn a_reload_applies_the_log_levels_and_says_the_format_waits() {
    let quiet = "[log]\nlevel = \"warn\"\n";
    let mut server = Served::start(Some(quiet), None);
    server.until_ready();
    let config = server._dir.0.join("heron.toml");
    fs::write(&config, "[log]\nlevel = \"info\"\nformat = \"json\"\n").unwrap();
    server.signal("HUP");
    server.until_ready();
    // One more reload, to see what is logged at the new level.
    server.signal("HUP");
    server.until_ready();
    server.signal("TERM");
    let status = server.child.wait().unwrap();
    let log = server.log();
    assert!(status.success(), "{status}: {log}");
    let before_reload = log.lines().take_while(|l| !l.contains("log levels now"));
    assert!(
        before_reload.filter(|l| l.contains(" INFO ")).count() == 0,
        "warn until the reload: {log}"
    );
    assert!(log.contains("log levels now info"), "{log}");
    assert!(
        log.contains(
            "[log] format changed in the configuration: it takes effect at the next restart"
        ),
        "{log}"
    );
    let after = log.split("log levels now info").nth(1).unwrap();
    assert!(
        after.contains(" INFO ") && after.contains("reloading the configuration"),
        "info lines after the reload, still as text: {log}"
    );
}

/// Issue 44: in JSON, the failures carried `zone` and `peer` as null, so
/// `jq 'select(.zone == …)'` missed exactly them. A zone file that does
/// not load, a refresh that fails and a query signed with an unknown
/// TSIG key each log their zone and peer as keys.
#[test]
fn json_failure_lines_carry_their_zone_and_peer_as_keys() {
    let dir = TempDir::new("json-failures");
    let broken = dir.0.join("broken.zone");
    fs::write(
        &broken,
        "$TTL 60\n@ SOA ns h 1 2 3 4 5\nbad A 192.0.2.300\n",
    )
    .unwrap();
    // A primary that is not there: a closed port of ours.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = closed.local_addr().unwrap();
    drop(closed);
    let config = format!(
        "[log]\nformat = \"json\"\n\
         [[zone]]\norigin = \"broken.test\"\nfile = \"{}\"\n\
         [[zone]]\norigin = \"sec.test\"\nfile = \"{}\"\nprimaries = [\"{dead}\"]\n",
        broken.display(),
        dir.0.join("sec.test.zone").display()
    );
    let server = Served::start_in(dir, &edge_zone(), Some(&config), None);
    server.until_ready();
    let dig = Command::new("dig")
        .args([
            "+tries=1",
            "+time=2",
            "-p",
            &server.addr.port().to_string(),
            "-y",
        ])
        .arg("hmac-sha256:unknown.key:c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0")
        .args(["@127.0.0.1", "edge.test", "SOA"])
        .output()
        .expect("dig (bind9-dnsutils)");
    assert!(
        !dig.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&dig.stderr)
    );
    let find = |log: &str, part: &str| -> Option<serde_json::Value> {
        let mut lines = log
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok());
        lines.find(|l| l["message"].as_str().is_some_and(|m| m.contains(part)))
    };
    let refresh = "refresh from";
    let found = heron_testkit::eventually_within(Duration::from_secs(20), || {
        find(&server.log(), refresh).is_some()
    });
    let (status, log) = server.stop();
    assert!(found && status.success(), "{status}: {log}");
    let load = find(&log, "broken.zone:3").unwrap_or_else(|| panic!("no load error: {log}"));
    assert_eq!(load["zone"], "broken.test.", "{load}");
    assert_eq!(load["level"], "ERROR", "{load}");
    let failed = find(&log, refresh).unwrap();
    assert_eq!(failed["zone"], "sec.test.", "{failed}");
    assert_eq!(failed["peer"], dead.to_string(), "{failed}");
    let tsig = find(&log, "unknown.key").unwrap_or_else(|| panic!("no TSIG line: {log}"));
    assert_eq!(tsig["zone"], "edge.test.", "{tsig}");
    assert!(
        tsig["peer"]
            .as_str()
            .is_some_and(|p| p.starts_with("127.0.0.1:")),
        "{tsig}"
    );
}

/// Issue 44: `keygen` printed Heron's form only; the other end of a
/// transfer (Knot, BIND, NSD) needs the same key in its own syntax.
/// Each form is read by that server's own checker, and `--format all`
/// gives the same secret in every form.
#[test]
fn keygen_prints_the_key_as_each_peer_reads_it() {
    let dir = TempDir::new("keygen");
    let keygen = |format: &str| {
        let out = Command::new(heron())
            .args([
                "keygen",
                "xfr.example",
                "--algorithm",
                "hmac-sha384",
                "--format",
                format,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    // Each checker with the file where it wants it.
    type Checker = fn(&Path) -> Command;
    let checkers: [(&str, &str, Checker); 3] = [
        ("knot", "knot.conf", |f| {
            let mut c = Command::new("knotc");
            c.arg("-c").arg(f).arg("conf-check");
            c
        }),
        ("bind", "named.conf", |f| {
            let mut c = Command::new("named-checkconf");
            c.arg(f);
            c
        }),
        ("nsd", "nsd.conf", |f| {
            let mut c = Command::new("nsd-checkconf");
            c.arg(f);
            c
        }),
    ];
    for (format, file, checker) in checkers {
        let path = dir.0.join(file);
        fs::write(&path, keygen(format)).unwrap();
        let out = checker(&path).output().unwrap();
        assert!(
            out.status.success(),
            "{format}: {}{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            fs::read_to_string(&path).unwrap()
        );
    }
    let heron_conf = dir.0.join("heron.toml");
    fs::write(&heron_conf, keygen("heron")).unwrap();
    let out = Command::new(heron())
        .arg("check-config")
        .arg(&heron_conf)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let all = keygen("all");
    let secrets: Vec<&str> = all
        .lines()
        .filter_map(|l| {
            l.split_once("secret")?
                .1
                .split(['"', ' ', ':', '=', ';'])
                .find(|w| w.len() > 20)
        })
        .collect();
    assert_eq!(secrets.len(), 4, "{all}");
    assert!(secrets.iter().all(|s| *s == secrets[0]), "one key: {all}");
}

/// `targets = { "heron::reload" = "warn" }` leaves a reload's zone events
/// out, the `zone removed` lines too (black-box finding DF-2: logged under
/// another target, 1,000 lines for 1,000 zones taken out).
#[test]
fn a_reloads_zone_removed_lines_follow_the_reload_target() {
    let dir = TempDir::new("removed");
    let other = dir.0.join("other.test.zone");
    fs::write(
        &other,
        "@ 60 SOA ns h 1 2 3 4 5\n@ 60 NS ns\nns 60 A 192.0.2.1\n",
    )
    .unwrap();
    let quiet = "[log]\nformat = \"json\"\ntargets = { \"heron::reload\" = \"warn\" }\n";
    let with_other = format!(
        "{quiet}[[zone]]\norigin = \"other.test\"\nfile = \"{}\"\n",
        other.display()
    );
    let config = dir.0.join("heron.toml");
    let server = Served::start_in(dir, &edge_zone(), Some(&with_other), None);
    server.until_ready();
    let other_soa = || {
        let query = build_query(
            &Name::parse("other.test").unwrap(),
            RType::SOA,
            &QueryOpts::default(),
        );
        Message::parse(&try_query_udp(server.addr, &query).expect("an answer"))
            .unwrap()
            .rcode()
    };
    assert_eq!(other_soa(), Rcode::NOERROR);
    fs::write(&config, quiet).unwrap();
    server.signal("HUP");
    server.until_ready();
    assert_eq!(other_soa(), Rcode::REFUSED, "taken out: {}", server.log());
    let removed = |log: &str| {
        let lines = json_lines(log);
        has_message(&lines, "zone removed")
    };
    assert!(!removed(&server.log()), "{}", server.log());
    let (status, log) = server.stop();
    assert!(status.success(), "{status}: {log}");
    assert!(!log.contains("\"zone loaded\""), "{log}");
}
