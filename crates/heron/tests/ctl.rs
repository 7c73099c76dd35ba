//! `heron ctl` against a running server on loopback: every command waits
//! for the result, and a failing one exits non-zero with the reason.

use std::path::{Path, PathBuf};
use std::process::Command;

use heron_testkit::process::ServerProcess;
use serde_json::{Value, json};

fn heron() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_heron"))
}

/// `heron ctl --socket SOCKET ARGS`: (exit code, stdout, stderr).
fn ctl(socket: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(heron())
        .arg("ctl")
        .arg("--socket")
        .arg(socket)
        .args(args)
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// `heron ctl ARGS --json`, which must succeed: the response's data.
fn ctl_json(socket: &Path, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    let (code, out, err) = ctl(socket, &args);
    assert_eq!(code, Some(0), "{out}{err}");
    let response: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(response["ok"], Value::Bool(true), "{out}");
    response["data"].clone()
}

fn zone_text(serial: u32, extra: &str) -> String {
    format!("$TTL 60\n@ SOA ns h {serial} 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n{extra}")
}

/// A server with zones a.test and b.test from files, and a control socket.
struct Fixture {
    server: ServerProcess,
    dir: tempfile::TempDir,
    socket: PathBuf,
}

impl Fixture {
    fn start() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("heron.sock");
        for zone in ["a", "b"] {
            std::fs::write(dir.path().join(format!("{zone}.zone")), zone_text(1, "")).unwrap();
        }
        let (d, s) = (dir.path().to_path_buf(), socket.clone());
        let server = ServerProcess::heron_with_config(&heron(), "a.test", move |port| {
            format!(
                "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\ncontrol = \"{}\"\n\
                 [[zone]]\norigin = \"a.test\"\nfile = \"{}\"\n\
                 [[zone]]\norigin = \"b.test\"\nfile = \"{}\"\n",
                s.display(),
                d.join("a.zone").display(),
                d.join("b.zone").display()
            )
        });
        Fixture {
            server,
            dir,
            socket,
        }
    }

    fn write_zone(&self, zone: &str, text: &str) {
        // Renamed into place, and with another inode: a reload sees it.
        let tmp = self.dir.path().join("tmp.zone");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, self.dir.path().join(format!("{zone}.zone"))).unwrap();
    }

    fn serial(&self, zone: &str) -> Value {
        let data = ctl_json(&self.socket, &["zone-status", zone]);
        assert_eq!(data.as_array().unwrap().len(), 1, "{data}");
        assert_eq!(data[0]["zone"], Value::String(format!("{zone}.")), "{data}");
        data[0]["serial"].clone()
    }
}

/// A configuration `dir/heron.toml` for zone a.test on a free port, with
/// the control socket `dir/heron.sock`: their paths.
fn one_zone_config(dir: &Path) -> (PathBuf, PathBuf) {
    let (socket, config) = (dir.join("heron.sock"), dir.join("heron.toml"));
    let zone = dir.join("a.zone");
    std::fs::write(&zone, zone_text(1, "")).unwrap();
    let port = heron_testkit::process::free_port();
    let text = format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\ncontrol = \"{}\"\n\
         [[zone]]\norigin = \"a.test\"\nfile = \"{}\"\n",
        socket.display(),
        zone.display()
    );
    std::fs::write(&config, text).unwrap();
    (socket, config)
}

/// Started under the widest umask, the server's control socket is
/// owner-only in every look taken at its path from the moment it
/// appears until the server answers on it, and nothing is left beside it.
#[test]
fn the_control_socket_is_owner_only_from_the_moment_it_appears() {
    use std::os::unix::fs::MetadataExt;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let (socket, config) = one_zone_config(dir.path());
    let answered = Arc::new(AtomicBool::new(false));
    let (watched, done) = (socket.clone(), answered.clone());
    // Looks as often as it can until the server has answered.
    let watcher = std::thread::spawn(move || {
        let mut modes = std::collections::BTreeSet::new();
        while !done.load(Ordering::Relaxed) {
            if let Ok(meta) = std::fs::symlink_metadata(&watched) {
                modes.insert(meta.mode() & 0o7777);
            }
        }
        modes
    });
    let mut server = Command::new("sh")
        .args(["-c", "umask 000; exec \"$0\" serve --config \"$1\""])
        .arg(heron())
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let up = (0..600).any(|_| {
        let ok = ctl(&socket, &["status"]).0 == Some(0);
        if !ok {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        ok
    });
    answered.store(true, Ordering::Relaxed);
    let modes = watcher.join().unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(up, "the server answered on its control socket");
    assert_eq!(modes.into_iter().collect::<Vec<_>>(), [0o600]);
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    // Killed, the server leaves its socket; no staging folder.
    assert_eq!(names, ["a.zone", "heron.sock", "heron.toml"]);
}

#[test]
fn zone_status_shows_serials_and_reload_of_one_zone_changes_only_it() {
    let f = Fixture::start();
    let all = ctl_json(&f.socket, &["zone-status"]);
    let rows = all.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{all}");
    for row in rows {
        assert_eq!(row["role"], "primary", "{all}");
        assert_eq!(row["serial"], 1, "{all}");
        assert!(row["loaded_at"].as_u64().is_some(), "{all}");
    }

    f.write_zone("a", &zone_text(7, ""));
    f.write_zone("b", &zone_text(8, ""));
    let (code, out, err) = ctl(&f.socket, &["reload", "a.test"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("1 zones re-read"), "{out}");
    assert_eq!(f.serial("a.test"), 7, "done when ctl returns");
    assert_eq!(f.serial("b.test"), 1, "b was not asked for");

    let (code, out, _) = ctl(&f.socket, &["reload"]);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(f.serial("b.test"), 8);

    // The human-readable table has the same facts.
    let (code, out, _) = ctl(&f.socket, &["zone-status"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("ZONE") && out.contains("SERIAL"), "{out}");
    let a_row = out.lines().find(|l| l.starts_with("a.test.")).unwrap();
    assert!(a_row.contains("primary") && a_row.contains(" 7 "), "{out}");
}

#[test]
fn force_rereads_a_file_that_looks_unchanged() {
    let f = Fixture::start();
    let (code, out, _) = ctl(&f.socket, &["reload", "a.test"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("0 zones re-read, 1 unchanged"), "{out}");
    let (code, out, _) = ctl(&f.socket, &["reload", "a.test", "--force"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("1 zones re-read, 0 unchanged"), "{out}");
}

/// A reload that serves an edit under the same serial, or a serial gone
/// back, says so to the operator who ran it, who can still raise it
/// (black-box finding: a plain ok, the warning only in the server's log).
#[test]
fn a_reload_says_when_a_serial_was_left_behind() {
    let f = Fixture::start();
    f.write_zone("a", &zone_text(1, "edited A 192.0.2.9\n"));
    let (code, out, _) = ctl(&f.socket, &["reload", "a.test"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("warning: zone a.test.: content changed but serial 1 did not"),
        "{out}"
    );
    f.write_zone("a", &zone_text(5, ""));
    let (code, out, _) = ctl(&f.socket, &["reload", "a.test"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(!out.contains("warning"), "{out}");
    f.write_zone("a", &zone_text(3, ""));
    let (code, out, _) = ctl(&f.socket, &["reload", "a.test", "--json"]);
    assert_eq!(code, Some(0), "{out}");
    let response: Value = serde_json::from_str(&out).unwrap();
    let warnings = response["data"]["warnings"].to_string();
    assert!(warnings.contains("serial went back from 5 to 3"), "{out}");
    // reconfigure (and so SIGHUP) reads changed zone files too, and says
    // the same (black-box finding AS-10: it did not).
    f.write_zone("a", &zone_text(3, "again A 192.0.2.10\n"));
    let (code, out, _) = ctl(&f.socket, &["reconfigure"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("warning: zone a.test.: content changed but serial 3 did not"),
        "{out}"
    );
}

/// `notify` of a zone configured but not served now (its file never
/// loaded; a secondary expired) says so, not that the zone is none of
/// this server's (black-box finding AV-2).
#[test]
fn notify_of_a_zone_not_served_now_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("heron.sock");
    std::fs::write(dir.path().join("a.zone"), zone_text(1, "")).unwrap();
    std::fs::write(dir.path().join("c.zone"), "not a zone\n").unwrap();
    let (d, s) = (dir.path().to_path_buf(), socket.clone());
    let _server = ServerProcess::heron_with_config(&heron(), "a.test", move |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\ncontrol = \"{}\"\n\
             [[zone]]\norigin = \"a.test\"\nfile = \"{}\"\n\
             [[zone]]\norigin = \"c.test\"\nfile = \"{}\"\nnotify = [\"127.0.0.1:9\"]\n",
            s.display(),
            d.join("a.zone").display(),
            d.join("c.zone").display()
        )
    });
    for command in ["notify", "refresh", "freeze", "flush"] {
        let (code, out, err) = ctl(&socket, &[command, "c.test"]);
        assert_eq!(code, Some(4), "{command}: {out}{err}");
        assert!(
            out.contains("c.test. is not served now"),
            "{command}: {out}{err}"
        );
    }
    let (code, out, err) = ctl(&socket, &["notify", "nosuch.test"]);
    assert_eq!(code, Some(4), "{out}{err}");
    assert!(out.contains("is not a zone of this server"), "{out}{err}");
}

#[test]
fn failing_commands_exit_non_zero_with_the_reason() {
    let f = Fixture::start();
    let (code, out, _) = ctl(&f.socket, &["zone-status", "nope.test"]);
    assert_eq!(code, Some(4), "refused: {out}");
    assert!(out.contains("unknown zone nope.test."), "{out}");
    // The zones that are known are shown all the same.
    let (code, out, _) = ctl(&f.socket, &["zone-status", "a.test", "nope.test"]);
    assert_eq!(code, Some(4), "{out}");
    assert!(out.contains("unknown zone nope.test."), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("a.test.") && l.contains("primary")),
        "{out}"
    );
    let (code, out, _) = ctl(&f.socket, &["zone-status", "a.test", "nope.test", "--json"]);
    assert_eq!(code, Some(4), "{out}");
    let response: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(response["refused"], true, "{out}");
    assert_eq!(response["data"][0]["zone"], "a.test.", "{out}");
    // A zone asked twice, in any case, is one row (black-box finding DE-10).
    let (code, out, _) = ctl(&f.socket, &["zone-status", "a.test", "A.TEST.", "--json"]);
    assert_eq!(code, Some(0), "{out}");
    let response: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(response["data"].as_array().map(Vec::len), Some(1), "{out}");
    let (code, out, _) = ctl(&f.socket, &["retransfer", "nope.test"]);
    assert_eq!(code, Some(4), "{out}");
    assert!(
        out.contains("nope.test. is not a zone of this server"),
        "{out}"
    );
    let (code, out, _) = ctl(&f.socket, &["reload", "nope.test"]);
    assert_eq!(code, Some(4), "refused, as for any unknown zone: {out}");
    assert!(out.contains("unknown zone nope.test."), "{out}");

    f.write_zone("a", &zone_text(2, "bad A 192.0.2.300\n"));
    let (code, out, _) = ctl(&f.socket, &["reload", "a.test"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("a.zone:5:"), "the file and line: {out}");
    assert!(out.contains("previous version is still served"), "{out}");
    assert_eq!(f.serial("a.test"), 1);

    // The same failure for scripts: ok false, the reason in errors.
    let (code, out, _) = ctl(&f.socket, &["reload", "a.test", "--json"]);
    assert_eq!(code, Some(1), "{out}");
    let response: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(response["ok"], false);
    assert!(
        response["errors"].to_string().contains("a.zone:5:"),
        "{out}"
    );
}

/// A zone whose file stays broken, unchanged, fails the reload that
/// found it broken, and not every whole reload after it (the unit's
/// `systemctl reload` failed for as long as one zone stayed broken:
/// black-box finding BB-4); it is said still failing, the reload of that
/// zone by name still fails, and an edit of it is tried and judged again.
#[test]
fn a_zone_still_broken_fails_only_the_reload_that_found_it() {
    let f = Fixture::start();
    f.write_zone("b", &zone_text(2, "bad A 192.0.2.300\n"));
    let (code, out, _) = ctl(&f.socket, &["reload"]);
    assert_eq!(code, Some(1), "the reload that found it: {out}");
    for args in [&["reload"][..], &["reconfigure"]] {
        let (code, out, _) = ctl(&f.socket, args);
        assert_eq!(code, Some(0), "{args:?}: {out}");
        assert!(out.contains("b.zone:5:"), "still said: {out}");
    }
    let (code, out, _) = ctl(&f.socket, &["reload", "--json"]);
    assert_eq!(code, Some(0), "{out}");
    let response: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(response["data"]["still_failing"], 1, "{out}");
    assert!(
        response["message"].to_string().contains("1 still failing"),
        "{out}"
    );
    let (code, out, _) = ctl(&f.socket, &["reload", "b.test"]);
    assert_eq!(code, Some(1), "asked for by name: {out}");
    f.write_zone("b", &zone_text(3, "bad A 192.0.2.301\n"));
    let (code, out, _) = ctl(&f.socket, &["reload"]);
    assert_eq!(code, Some(1), "an edit that fails: {out}");
    f.write_zone("b", &zone_text(4, ""));
    let (code, out, _) = ctl(&f.socket, &["reload"]);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(f.serial("b.test"), 4);
}

#[test]
fn status_says_what_runs_and_stop_stops_the_server() {
    let mut f = Fixture::start();
    let status = ctl_json(&f.socket, &["status"]);
    assert_eq!(status["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(status["zones"]["primary"], 2, "{status}");
    assert_eq!(status["zones"]["secondary"], 0, "{status}");
    assert_eq!(status["workers"], 1, "{status}");
    assert_eq!(status["tls"]["enabled"], false, "{status}");
    assert_eq!(status["xdp"]["enabled"], false, "{status}");
    let listener = f.server.addr().to_string();
    assert_eq!(
        status["listeners"],
        serde_json::json!([listener]),
        "{status}"
    );
    assert_eq!(status["pid"], f.server.pid().unwrap(), "{status}");

    let (code, out, err) = ctl(&f.socket, &["stop"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(out, "ok: stopped\n");
    assert!(!f.server.is_running(), "gone when stop returns");
    assert!(!f.socket.exists(), "the socket goes with the server");
    let (code, _, err) = ctl(&f.socket, &["status"]);
    assert_eq!(code, Some(3), "unreachable");
    assert!(err.contains("is heron serve running"), "{err}");
    // With --json, a document on stdout too, for the script reading it.
    let (code, out, _) = ctl(&f.socket, &["status", "--json"]);
    assert_eq!(code, Some(3), "unreachable");
    let said: Value = serde_json::from_str(&out).expect("a JSON document");
    assert_eq!(said["ok"], Value::Bool(false), "{out}");
    assert!(
        said["message"]
            .as_str()
            .unwrap()
            .contains("is heron serve running"),
        "{out}"
    );
    let bad_usage = Command::new(heron())
        .args(["ctl", "--no-such-flag"])
        .output()
        .unwrap();
    assert_eq!(bad_usage.status.code(), Some(2), "a usage error");
}

/// Polls `heron ctl zone-status ZONE --json` (bounded) until `cond` holds
/// for the zone's row; returns that row.
fn row_when(socket: &Path, zone: &str, cond: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..200 {
        let row = ctl_json(socket, &["zone-status", zone])[0].clone();
        if cond(&row) {
            return row;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("{zone} never got there");
}

/// While a secondary zone's check (or its transfer) is under way,
/// zone-status says so, in JSON and in its table, rather than showing
/// nothing scheduled (black-box finding BB-2: a transfer of 19 s read as
/// a primary down). The primary here takes connections and says nothing.
#[test]
fn zone_status_says_a_check_is_under_way() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("heron.sock");
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let _udp = std::net::UdpSocket::bind(addr).unwrap();
    std::thread::spawn(move || {
        let held: Vec<_> = silent.incoming().take(8).collect();
        std::thread::sleep(std::time::Duration::from_secs(30));
        drop(held);
    });
    let port = heron_testkit::process::free_port();
    let one = [("slow.test", addr.to_string())];
    let config = secondary_config(dir.path(), &socket, port, &one);
    let _server = ServerProcess::heron_on_port(&heron(), port, "ready.test", &config).unwrap();
    let row = row_when(&socket, "slow.test", |r| r["checking"] == true);
    assert_eq!(row["next_refresh"], Value::Null, "{row}");
    let (code, out, _) = ctl(&socket, &["zone-status", "slow.test"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("running now"), "{out}");
}

/// A Heron that serves ready.test from a file and is secondary for the
/// `secondaries` (origin, primary address) on `port`.
fn secondary_config(
    dir: &Path,
    socket: &Path,
    port: u16,
    secondaries: &[(&str, String)],
) -> String {
    let ready = dir.join("ready.zone");
    std::fs::write(&ready, zone_text(1, "")).unwrap();
    let mut config = format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\ncontrol = \"{}\"\n\
         [[zone]]\norigin = \"ready.test\"\nfile = \"{}\"\n",
        socket.display(),
        ready.display()
    );
    for (origin, primary) in secondaries {
        config += &format!(
            "[[zone]]\norigin = \"{origin}\"\nfile = \"{}\"\nprimaries = [\"{primary}\"]\n",
            dir.join(format!("{origin}.kept")).display()
        );
    }
    config
}

#[test]
fn secondary_zones_show_their_timers_and_are_refreshed_and_retransferred_on_demand() {
    use heron_proto::RType;
    use heron_testkit::FakePrimary;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("heron.sock");
    let primary = FakePrimary::start(&["s.test"], 1);
    // Nothing listens there: its checks fail.
    let nobody = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = nobody.local_addr().unwrap().to_string();
    drop(nobody);
    let secondaries = [
        ("s.test", format!("{} via 127.0.0.2", primary.addr())),
        ("dead.test", dead.clone()),
    ];
    let port = heron_testkit::process::free_port();
    let config = secondary_config(dir.path(), &socket, port, &secondaries);
    let _server = ServerProcess::heron_on_port(&heron(), port, "ready.test", &config).unwrap();

    let row = row_when(&socket, "s.test", |r| r["serial"] == 1);
    assert_eq!(row["role"], "secondary", "{row}");
    for field in ["transferred_at", "next_refresh", "expire_at"] {
        assert!(row[field].as_u64().is_some(), "{field}: {row}");
    }
    assert!(
        row["expire_at"].as_u64() > row["next_refresh"].as_u64(),
        "{row}"
    );
    let up = &row["primaries"][0];
    assert_eq!(up["address"], primary.addr().to_string(), "{row}");
    assert_eq!(up["reachable"], true, "{row}");
    assert_eq!(up["tsig_key"], Value::Null, "{row}");
    assert_eq!(up["source"], "127.0.0.2", "{row}");
    let asked_from = primary
        .seen()
        .iter()
        .map(|s| s.from.unwrap().ip())
        .collect::<Vec<_>>();
    assert!(
        asked_from.iter().all(|ip| ip.to_string() == "127.0.0.2"),
        "{asked_from:?}"
    );

    let axfrs = primary.count(RType::AXFR);
    let (code, out, err) = ctl(&socket, &["retransfer", "s.test"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("s.test. transferred: serial 1"), "{out}");
    assert_eq!(
        primary.count(RType::AXFR),
        axfrs + 1,
        "one AXFR, done when ctl returns"
    );

    primary.set_serial(2);
    let (code, out, _) = ctl(&socket, &["refresh", "s.test"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("serial 2"), "{out}");
    assert_eq!(f_serial(&socket, "s.test"), 2);

    let dead_row = row_when(&socket, "dead.test", |r| r["failures"].as_u64() > Some(0));
    assert_eq!(dead_row["serial"], Value::Null, "{dead_row}");
    assert_eq!(dead_row["primaries"][0]["reachable"], false, "{dead_row}");
    assert!(
        dead_row["last_error"].as_str().unwrap().contains(&dead),
        "{dead_row}"
    );
    let (code, out, _) = ctl(&socket, &["retransfer", "dead.test"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("dead.test.: not transferred") && out.contains(&dead),
        "{out}"
    );

    let (code, out, _) = ctl(&socket, &["refresh", "ready.test"]);
    assert_eq!(code, Some(4), "refused, not tried: {out}");
    assert!(
        out.contains("ready.test. is not a secondary zone: this server is its primary"),
        "{out}"
    );

    // The table shows the secondary's primaries.
    let (_, out, _) = ctl(&socket, &["zone-status", "s.test"]);
    assert!(
        out.contains("PRIMARY") && out.contains(&format!("{} via 127.0.0.2", primary.addr())),
        "{out}"
    );
}

/// How many SOA records `dig` prints for an IXFR of `zone` from `from`
/// at `server`: four or more for an incremental answer, two for a whole
/// zone.
fn soas_in_ixfr(server: std::net::SocketAddr, zone: &str, from: u32) -> usize {
    use heron_testkit::{DigTool, run_dig_with};
    let out = run_dig_with(DigTool::Dig, server, zone, &format!("IXFR={from}"), &[]);
    (out.expect_success().lines())
        .filter(|l| !l.starts_with(';'))
        .filter(|l| l.split_whitespace().nth(3) == Some("SOA"))
        .count()
}

/// `heron ctl retransfer` of a secondary zone whose primary still has the
/// same version (issue 42, 9b) says nothing about a change and keeps the
/// IXFR history the zone received, so its own secondaries still get IXFR.
/// Other content under the same serial is warned of, and the history,
/// which no longer leads to what is served, goes.
#[test]
fn a_retransfer_of_the_same_version_keeps_the_ixfr_history_quietly() {
    use heron_testkit::{FakePrimary, IxfrAnswer};
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("heron.sock");
    let primary = FakePrimary::start(&["s.test"], 1);
    primary.set_ixfr(IxfrAnswer::Step);
    // Records enough that a step of four is sent as IXFR, not whole.
    primary.set_padding(10);
    let port = heron_testkit::process::free_port();
    let secondaries = [("s.test", primary.addr().to_string())];
    let config = secondary_config(dir.path(), &socket, port, &secondaries)
        + "allow-transfer = [\"127.0.0.1\"]\n";
    let server = ServerProcess::heron_on_port(&heron(), port, "ready.test", &config).unwrap();
    row_when(&socket, "s.test", |r| r["serial"] == 1);
    primary.set_serial(2);
    let (code, out, _) = ctl(&socket, &["refresh", "s.test"]);
    assert!(code == Some(0) && out.contains("serial 2"), "{out}");
    assert_eq!(soas_in_ixfr(server.addr(), "s.test", 1), 4, "one step");

    let (code, out, err) = ctl(&socket, &["retransfer", "s.test"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("s.test. transferred: serial 2"), "{out}");
    let changed = "content changed but serial 2 did not";
    assert!(!server.log().contains(changed), "{}", server.log());
    assert_eq!(soas_in_ixfr(server.addr(), "s.test", 1), 4, "history kept");

    primary.set_address([192, 0, 2, 77]);
    let (code, out, err) = ctl(&socket, &["retransfer", "s.test"]);
    assert_eq!(code, Some(0), "{out}{err}");
    // The log is read from the server's stderr as it comes.
    assert!(server.wait_for_log(changed), "{}", server.log());
    let log = server.log();
    assert_eq!(log.matches(changed).count(), 1, "{log}");
    assert_eq!(soas_in_ixfr(server.addr(), "s.test", 1), 2, "a whole zone");
}

fn f_serial(socket: &Path, zone: &str) -> Value {
    ctl_json(socket, &["zone-status", zone])[0]["serial"].clone()
}

#[test]
fn notify_waits_for_each_secondary_to_answer() {
    use heron_testkit::process::free_port;
    let dir = tempfile::tempdir().unwrap();
    let (primary_port, secondary_port) = (free_port(), free_port());
    let socket = dir.path().join("primary.sock");
    let file = dir.path().join("n.zone");
    std::fs::write(&file, zone_text(5, "")).unwrap();
    let primary_config = format!(
        "[server]\nlisten = [\"127.0.0.1:{primary_port}\"]\nworkers = 1\ncontrol = \"{}\"\n\
         [[zone]]\norigin = \"n.test\"\nfile = \"{}\"\nallow-transfer = [\"127.0.0.1\"]\n\
         notify = [\"127.0.0.1:{secondary_port}\"]\n\
         [[zone]]\norigin = \"quiet.test\"\nfile = \"{}\"\n",
        socket.display(),
        file.display(),
        file.display()
    );
    let _primary =
        ServerProcess::heron_on_port(&heron(), primary_port, "n.test", &primary_config).unwrap();
    let secondary_dir = tempfile::tempdir().unwrap();
    let secondary_socket = secondary_dir.path().join("secondary.sock");
    let secondaries = [("n.test", format!("127.0.0.1:{primary_port}"))];
    let config = secondary_config(
        secondary_dir.path(),
        &secondary_socket,
        secondary_port,
        &secondaries,
    );
    let _secondary =
        ServerProcess::heron_on_port(&heron(), secondary_port, "ready.test", &config).unwrap();
    row_when(&secondary_socket, "n.test", |r| r["serial"] == 5);

    let (code, out, err) = ctl(&socket, &["notify", "n.test"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("NOTIFY for n.test. serial 5: 1 of 1 acknowledged"),
        "{out}"
    );
    assert!(
        out.contains(&format!("127.0.0.1:{secondary_port}  NOERROR")),
        "{out}"
    );

    let (code, out, _) = ctl(&socket, &["notify", "quiet.test"]);
    assert_eq!(code, Some(4), "refused, nothing sent: {out}");
    assert!(out.contains("no notify targets"), "{out}");
}

#[test]
fn stats_counts_refusals_and_reset_sets_them_back_to_zero() {
    use heron_proto::{Name, RType};
    use heron_testkit::{QueryOpts, build_query};
    let f = Fixture::start();
    let refused = |data: &Value| data["refused"]["axfr-over-udp"].clone();
    assert_eq!(refused(&ctl_json(&f.socket, &["stats"])), 0);
    let query = build_query(
        &Name::parse("a.test").unwrap(),
        RType::AXFR,
        &QueryOpts::default(),
    );
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    for _ in 0..3 {
        udp.send_to(&query, f.server.addr()).unwrap();
        let mut answer = [0u8; 512];
        udp.recv_from(&mut answer).expect("an answer: the refusal");
    }
    assert_eq!(refused(&ctl_json(&f.socket, &["stats"])), 3);
    let before_reset = ctl_json(&f.socket, &["stats", "--reset"]);
    assert_eq!(refused(&before_reset), 3, "--reset shows the values before");
    assert_eq!(refused(&ctl_json(&f.socket, &["stats"])), 0);
    let (code, out, _) = ctl(&f.socket, &["stats"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("refused axfr-over-udp"), "{out}");
}

#[test]
fn a_secondary_zone_added_by_reload_is_shown_and_refreshed_on_demand() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("heron.sock");
    let primary = heron_testkit::FakePrimary::start(&["s.test", "t.test"], 1);
    let port = heron_testkit::process::free_port();
    let one = [("s.test", primary.addr().to_string())];
    let config = secondary_config(dir.path(), &socket, port, &one);
    let server = ServerProcess::heron_on_port(&heron(), port, "ready.test", &config).unwrap();
    row_when(&socket, "s.test", |r| r["serial"] == 1);
    // A secondary has nothing to flush, and is a zone of this server
    // (black-box finding: flush said it was not).
    let (code, out, _) = ctl(&socket, &["flush", "s.test"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("written at each transfer"), "{out}");
    // Nor is it frozen as an unknown zone (black-box finding).
    let (_, out, _) = ctl(&socket, &["freeze", "s.test"]);
    assert!(out.contains("is a secondary zone"), "{out}");
    let (_, out, _) = ctl(&socket, &["refresh", "t.test"]);
    assert!(
        out.contains("t.test. is not a zone of this server"),
        "{out}"
    );

    let two = [one[0].clone(), ("t.test", primary.addr().to_string())];
    let config = secondary_config(dir.path(), &socket, port, &two);
    std::fs::write(server.dir().join("heron.toml"), config).unwrap();
    let (code, out, err) = ctl(&socket, &["reload"]);
    assert_eq!(code, Some(0), "{out}{err}");

    let row = row_when(&socket, "t.test", |r| r["serial"] == 1);
    assert_eq!(row["role"], "secondary", "{row}");
    assert_eq!(ctl_json(&socket, &["status"])["zones"]["secondary"], 2);
    primary.set_serial(2);
    let (code, out, _) = ctl(&socket, &["refresh", "t.test"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("serial 2"), "{out}");
}

/// `[secondary] min-expire` raised by a reload moves a secondary zone's
/// expiry at once, as zone-status shows it, not at its next check (which
/// an outage of its primary never brings: black-box finding BF-8).
#[test]
fn a_reload_raising_min_expire_moves_the_expiry_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("heron.sock");
    let primary = heron_testkit::FakePrimary::start(&["s.test"], 1);
    let port = heron_testkit::process::free_port();
    let one = [("s.test", primary.addr().to_string())];
    let config = secondary_config(dir.path(), &socket, port, &one);
    let server = ServerProcess::heron_on_port(&heron(), port, "ready.test", &config).unwrap();
    let row = row_when(&socket, "s.test", |r| {
        r["serial"] == 1 && r["expire_at"].is_u64()
    });
    let before = row["expire_at"].as_u64().unwrap();
    let raised = format!("[secondary]\nmin-expire = 2000000\n{config}");
    std::fs::write(server.dir().join("heron.toml"), raised).unwrap();
    let (code, out, err) = ctl(&socket, &["reconfigure"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let row = row_when(&socket, "s.test", |r| {
        r["expire_at"].as_u64() != Some(before)
    });
    let after = row["expire_at"].as_u64().unwrap();
    assert!(after >= before + 1_000_000, "{before} -> {after}");
    // EDNS EXPIRE says the same (regression hunt BG-2: the old expiry).
    let out = Command::new("kdig")
        .args([
            "-p",
            &port.to_string(),
            "@127.0.0.1",
            "+expire",
            "s.test",
            "SOA",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let told: u64 = (text.split("EXPIRE: ").nth(1))
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(told >= 1_000_000, "{text}");
}

#[test]
fn a_generated_catalog_is_shown_as_one_and_is_not_reloaded_alone() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("heron.sock");
    std::fs::write(dir.path().join("a.zone"), zone_text(1, "")).unwrap();
    let (d, s) = (dir.path().to_path_buf(), socket.clone());
    let _server = ServerProcess::heron_with_config(&heron(), "catalog.invalid", move |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\ncontrol = \"{}\"\n\
             [[zone]]\norigin = \"catalog.invalid\"\nfile = \"{}\"\ncatalog = \"generate\"\n\
             [[zone]]\norigin = \"a.test\"\nfile = \"{}\"\ncatalog-member = \"catalog.invalid\"\n",
            s.display(),
            d.join("catalog.zone").display(),
            d.join("a.zone").display()
        )
    });
    let data = ctl_json(&socket, &["zone-status", "catalog.invalid"]);
    assert_eq!(data[0]["role"], "generated catalog", "{data}");
    assert!(data[0]["serial"].as_u64().is_some(), "{data}");
    let (code, out, err) = ctl(&socket, &["reload", "catalog.invalid"]);
    assert_ne!(code, Some(0), "{out}");
    assert!(
        out.contains(
            "catalog.invalid. is a generated catalog: a reload of the configuration updates it"
        ),
        "{out}{err}"
    );
}

/// The response code of an SOA query for `zone` over UDP.
fn soa_rcode(server: std::net::SocketAddr, zone: &str) -> u8 {
    use heron_testkit::{QueryOpts, build_query, query_udp};
    let name = heron_proto::Name::parse(zone).unwrap();
    let query = build_query(&name, heron_proto::RType::SOA, &QueryOpts::default());
    query_udp(server, &query)[3] & 0x0f
}

const NOERROR: u8 = 0;
const REFUSED: u8 = 5;

/// `secondary_config` with the primary zones `primaries` (from files in
/// `dir`) added.
fn config_with(
    dir: &Path,
    socket: &Path,
    port: u16,
    primaries: &[&str],
    secondaries: &[(&str, String)],
) -> String {
    let mut config = secondary_config(dir, socket, port, secondaries);
    for origin in primaries {
        let file = dir.join(format!("{origin}.zone"));
        std::fs::write(&file, zone_text(3, "")).unwrap();
        config += &format!(
            "[[zone]]\norigin = \"{origin}\"\nfile = \"{}\"\n",
            file.display()
        );
    }
    config
}

/// Black-box finding AJ-4: a zone turned from primary into secondary by
/// a reload (its kept copy at a path with no file yet) took the version
/// its file served for a kept copy: no transfer until a refresh later,
/// and a primary's serial below the file's never replaced it. It keeps
/// answering from its file until its first transfer, which is asked at
/// once and taken whatever its serial, as a fresh start's.
#[test]
fn a_primary_zone_turned_secondary_takes_its_primarys_zone_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("heron.sock");
    // The file says serial 3, the primary 1.
    let upstream = heron_testkit::FakePrimary::start(&["f.test"], 1);
    let port = heron_testkit::process::free_port();
    let both = ["f.test", "g.test"];
    let config = config_with(dir.path(), &socket, port, &both, &[]);
    let server = ServerProcess::heron_on_port(&heron(), port, "f.test", &config).unwrap();
    let addr = server.addr();
    assert_eq!(heron_testkit::client::soa_serial(addr, "f.test"), Some(3));
    // g.test's primary does not answer.
    let nobody = format!("127.0.0.1:{}", heron_testkit::process::free_port());
    let at = [("f.test", upstream.addr().to_string()), ("g.test", nobody)];
    let config = config_with(dir.path(), &socket, port, &[], &at);
    std::fs::write(server.dir().join("heron.toml"), &config).unwrap();
    let (code, out, err) = ctl(&socket, &["reconfigure"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("secondary zones added: f.test. g.test."),
        "{out}"
    );
    row_when(&socket, "f.test", |r| r["serial"] == 1);
    assert_eq!(heron_testkit::client::soa_serial(addr, "f.test"), Some(1));
    // Until its first transfer, a zone keeps answering from its file.
    assert_eq!(heron_testkit::client::soa_serial(addr, "g.test"), Some(3));
    let kept = dir.path().join("f.test.kept");
    let limit = std::time::Duration::from_secs(10);
    assert!(
        heron_testkit::eventually_within(limit, || kept.exists()),
        "the transfer is kept at the new file"
    );
}

/// The same, with the secondary's `file` the one the primary served
/// (black-box finding BL-3): the operator's zone file there is no copy
/// received from the primary, so it is not taken for one: the primary's
/// zone (serial 1, below the file's 3) is transferred at once and served.
#[test]
fn a_primary_zone_turned_secondary_at_the_same_file_takes_its_primarys_zone() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("heron.sock");
    let upstream = heron_testkit::FakePrimary::start(&["f.test"], 1);
    let port = heron_testkit::process::free_port();
    let config = config_with(dir.path(), &socket, port, &["f.test"], &[]);
    let server = ServerProcess::heron_on_port(&heron(), port, "f.test", &config).unwrap();
    let addr = server.addr();
    assert_eq!(heron_testkit::client::soa_serial(addr, "f.test"), Some(3));
    let file = dir.path().join("f.test.zone").display().to_string();
    let primaries = format!("file = \"{file}\"\nprimaries = [\"{}\"]\n", upstream.addr());
    let config = config.replace(&format!("file = \"{file}\"\n"), &primaries);
    std::fs::write(server.dir().join("heron.toml"), &config).unwrap();
    let (code, out, err) = ctl(&socket, &["reconfigure"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("secondary zones added: f.test."), "{out}");
    row_when(&socket, "f.test", |r| r["serial"] == 1);
    assert_eq!(heron_testkit::client::soa_serial(addr, "f.test"), Some(1));
}

#[test]
fn reconfigure_adds_and_removes_primary_and_secondary_zones_and_reports_it() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("heron.sock");
    let upstream = heron_testkit::FakePrimary::start(&["s.test", "t.test"], 1);
    let port = heron_testkit::process::free_port();
    let at = |origin| (origin, upstream.addr().to_string());
    let config = config_with(dir.path(), &socket, port, &["p.test"], &[at("s.test")]);
    let server = ServerProcess::heron_on_port(&heron(), port, "ready.test", &config).unwrap();
    let addr = server.addr();
    row_when(&socket, "s.test", |r| r["serial"] == 1);
    assert_eq!(soa_rcode(addr, "q.test"), REFUSED);

    // p.test and s.test go, q.test and t.test come.
    let config = config_with(dir.path(), &socket, port, &["q.test"], &[at("t.test")]);
    std::fs::write(server.dir().join("heron.toml"), &config).unwrap();
    let data = ctl_json(&socket, &["reconfigure"]);
    assert_eq!(
        data["added"],
        json!({"primary": ["q.test."], "secondary": ["t.test."]})
    );
    assert_eq!(
        data["removed"],
        json!({"primary": ["p.test."], "secondary": ["s.test."]})
    );
    let none = json!({"primary": [], "secondary": []});
    assert_eq!(data["changed"], none, "{data}");
    assert_eq!(data["needs_restart"], json!([]), "{data}");
    assert_eq!(
        soa_rcode(addr, "q.test"),
        NOERROR,
        "served when ctl returns"
    );
    assert_eq!(soa_rcode(addr, "p.test"), REFUSED);
    assert_eq!(soa_rcode(addr, "s.test"), REFUSED);
    assert_eq!(soa_rcode(addr, "ready.test"), NOERROR, "untouched");
    row_when(&socket, "t.test", |r| r["serial"] == 1);
    assert_eq!(soa_rcode(addr, "t.test"), NOERROR);

    let (code, out, err) = ctl(&socket, &["reconfigure"]);
    assert_eq!((code, out.as_str()), (Some(0), "ok: no change\n"), "{err}");

    // SIGHUP does the same, and logs what changed.
    std::fs::write(dir.path().join("r.test.zone"), zone_text(3, "")).unwrap();
    std::fs::write(
        server.dir().join("heron.toml"),
        config.replace("q.test", "r.test"),
    )
    .unwrap();
    server.reload();
    assert!(server.wait_for_log("(primary zones added: r.test.; primary zones removed: q.test.)"));
    assert_eq!(soa_rcode(addr, "r.test"), NOERROR);
    std::fs::write(server.dir().join("heron.toml"), &config).unwrap();
    server.reload();
    assert!(server.wait_for_log("(primary zones added: q.test.; primary zones removed: r.test.)"));
    assert_eq!(soa_rcode(addr, "q.test"), NOERROR);

    // Other transfer settings change the zone, and only it.
    let allow = "\"\nallow-transfer = [\"127.0.0.1\"]\n";
    let config = (config.replace("q.test.zone\"\n", &format!("q.test.zone{allow}")))
        .replace("t.test.kept\"\n", &format!("t.test.kept{allow}"));
    std::fs::write(server.dir().join("heron.toml"), &config).unwrap();
    let (code, out, _) = ctl(&socket, &["reconfigure"]);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        out,
        "ok: primary zones changed: q.test.; secondary zones changed: t.test.\n"
    );

    // A TSIG key added, then its secret changed: applied, and said
    // (black-box finding: "no change" while the new secret was in force).
    let key = "[[key]]\nname = \"k1\"\nalgorithm = \"hmac-sha256\"\n";
    let keyed = format!("{config}{key}secret = \"c2VjcmV0c2VjcmV0c2VjcmV0\"\n");
    for text in [keyed.clone(), keyed.replace("c2VjcmV0", "b3RoZXJz")] {
        std::fs::write(server.dir().join("heron.toml"), &text).unwrap();
        let (code, out, _) = ctl(&socket, &["reconfigure"]);
        assert_eq!((code, out.as_str()), (Some(0), "ok: applied: [[key]]\n"));
    }
    let (code, out, _) = ctl(&socket, &["reconfigure"]);
    assert_eq!((code, out.as_str()), (Some(0), "ok: no change\n"));
    std::fs::write(server.dir().join("heron.toml"), &config).unwrap();
    let (_, out, _) = ctl(&socket, &["reconfigure"]);
    assert_eq!(out, "ok: applied: [[key]]\n", "removed");
    // Log levels too (they were applied and said "no change").
    let quieter = format!("{config}[log]\nlevel = \"warn\"\n");
    std::fs::write(server.dir().join("heron.toml"), &quieter).unwrap();
    let (_, out, _) = ctl(&socket, &["reconfigure"]);
    assert_eq!(out, "ok: applied: [log] levels\n");
    std::fs::write(server.dir().join("heron.toml"), &config).unwrap();
    let (_, out, _) = ctl(&socket, &["reconfigure"]);
    assert_eq!(out, "ok: applied: [log] levels\n", "back");
    // What the configuration warns of is said in the answer too, as
    // check-config says it (regression hunt BR-17: the log alone).
    let empty_xdp = format!("{config}[xdp]\n");
    std::fs::write(server.dir().join("heron.toml"), &empty_xdp).unwrap();
    let (code, out, _) = ctl(&socket, &["reconfigure"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("warning: ") && out.contains("[xdp] has no listen entry"),
        "{out}"
    );
    // Said once: a standing warning is not repeated by every later
    // reload (regression hunt BS-8).
    let (code, out, _) = ctl(&socket, &["reconfigure"]);
    assert_eq!((code, out.as_str()), (Some(0), "ok: no change\n"));
    std::fs::write(server.dir().join("heron.toml"), &config).unwrap();

    // Listeners and workers wait for a restart, and say so.
    let more_workers = config.replace("workers = 1", "workers = 2");
    std::fs::write(server.dir().join("heron.toml"), &more_workers).unwrap();
    let (code, out, _) = ctl(&socket, &["reconfigure"]);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(out, "ok: no change; needs restart: [server] workers\n");
    // `heron reload` (a whole reload, as the unit's reload runs it) says so too.
    let (code, out, _) = ctl(&socket, &["reload"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("needs restart: [server] workers"), "{out}");

    // A file with errors changes nothing, and says where it is wrong.
    let broken = format!("{more_workers}[[zone]]\norigin = \"r.test\"\nnot-a-key = 1\n");
    std::fs::write(server.dir().join("heron.toml"), broken).unwrap();
    let (code, out, _) = ctl(&socket, &["reconfigure"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.starts_with("error: the configuration file has errors"),
        "{out}"
    );
    assert!(
        out.contains("heron.toml") && out.contains("not-a-key"),
        "{out}"
    );
    for zone in ["q.test", "t.test", "ready.test"] {
        assert_eq!(soa_rcode(addr, zone), NOERROR, "{zone} still served");
    }
}

/// A `dnssec-policy` added to or changed on a primary and a secondary
/// zone by a reconfigure is said by name (black-box findings AJ-10 and
/// AM-26: the secondary's said "no change" though it was signed at once,
/// the primary's "1 changed zone files re-read" though no file changed).
#[test]
fn reconfigure_names_the_zones_whose_dnssec_policy_changed() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("heron.sock");
    let upstream = heron_testkit::FakePrimary::start(&["s.test"], 1);
    let port = heron_testkit::process::free_port();
    let at = [("s.test", upstream.addr().to_string())];
    let config = config_with(dir.path(), &socket, port, &["p.test"], &at);
    let server = ServerProcess::heron_on_port(&heron(), port, "ready.test", &config).unwrap();
    row_when(&socket, "s.test", |r| r["serial"] == 1);
    let signed = |policy: &str| {
        let zones = config.replace(
            "[[zone]]\norigin = \"p.test\"",
            "[[zone]]\norigin = \"p.test\"\ndnssec-policy = \"p\"",
        );
        let zones = zones.replace(
            "[[zone]]\norigin = \"s.test\"",
            "[[zone]]\norigin = \"s.test\"\ndnssec-policy = \"p\"",
        );
        format!("[[dnssec-policy]]\nname = \"p\"\n{policy}\n{zones}")
    };
    for policy in ["denial = \"nsec\"", "denial = \"nsec3\""] {
        std::fs::write(server.dir().join("heron.toml"), signed(policy)).unwrap();
        let (code, out, err) = ctl(&socket, &["reconfigure"]);
        assert_eq!(
            (code, out.as_str()),
            (Some(0), "ok: dnssec-policy changed: p.test. s.test.\n"),
            "{policy}: {err}\n{}",
            server.log()
        );
        let data = ctl_json(&socket, &["reconfigure"]);
        assert_eq!(data["dnssec_policy_changed"], json!([]), "{data}");
    }
    std::fs::write(server.dir().join("heron.toml"), signed("")).unwrap();
    let data = ctl_json(&socket, &["reconfigure"]);
    assert_eq!(
        data["dnssec_policy_changed"],
        json!(["p.test.", "s.test."]),
        "{data}"
    );
}

/// The JSON log lines of `log` whose message contains `text`.
fn log_lines(log: &str, text: &str) -> Vec<Value> {
    (log.lines())
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["message"].as_str().is_some_and(|m| m.contains(text)))
        .collect()
}

/// Each zone event is one log line with the zone and the peer as fields
/// (issue 26, "Logs"): loaded (the file), transferred out and in,
/// refused transfer, NOTIFY received. Expiry: `tests/secondary.rs`.
#[test]
fn zone_events_are_logged_one_line_each_with_zone_and_peer() {
    use heron_testkit::process::free_port;
    use heron_testkit::{QueryOpts, build_query, query_tcp};
    let dir = tempfile::tempdir().unwrap();
    let (primary_port, secondary_port) = (free_port(), free_port());
    let file = dir.path().join("n.zone");
    std::fs::write(&file, zone_text(5, "")).unwrap();
    let json_logs = "[log]\nformat = \"json\"\n";
    let primary_config = format!(
        "{json_logs}[server]\nlisten = [\"127.0.0.1:{primary_port}\"]\nworkers = 1\n\
         [[zone]]\norigin = \"n.test\"\nfile = \"{}\"\nallow-transfer = [\"127.0.0.1\"]\n\
         notify = [\"127.0.0.1:{secondary_port}\"]\n\
         [[zone]]\norigin = \"closed.test\"\nfile = \"{}\"\n",
        file.display(),
        file.display()
    );
    let primary =
        ServerProcess::heron_on_port(&heron(), primary_port, "n.test", &primary_config).unwrap();
    let socket = dir.path().join("secondary.sock");
    let secondaries = [("n.test", format!("127.0.0.1:{primary_port}"))];
    let config = secondary_config(dir.path(), &socket, secondary_port, &secondaries);
    let secondary = ServerProcess::heron_on_port(
        &heron(),
        secondary_port,
        "ready.test",
        &(json_logs.to_owned() + &config),
    )
    .unwrap();
    row_when(&socket, "n.test", |r| r["serial"] == 5);
    let (code, out, _) = ctl(&socket, &["retransfer", "n.test"]);
    assert_eq!(code, Some(0), "{out}");
    let closed = heron_proto::Name::parse("closed.test").unwrap();
    let axfr = build_query(&closed, heron_proto::RType::AXFR, &QueryOpts::default());
    assert_eq!(query_tcp(primary.addr(), &axfr)[3] & 0x0f, REFUSED);
    // The primary NOTIFYs its secondary of a new serial.
    std::fs::write(&file, zone_text(6, "")).unwrap();
    primary.reload();
    row_when(&socket, "n.test", |r| r["serial"] == 6);

    let secondary_ip = "127.0.0.1";
    let events = [
        (&primary, "zone loaded", "n.test.", None),
        (&primary, "AXFR of n.test.", "n.test.", Some(secondary_ip)),
        (
            &primary,
            "for closed.test. refused",
            "closed.test.",
            Some(secondary_ip),
        ),
        (
            &secondary,
            "zone transferred in",
            "n.test.",
            Some(secondary_ip),
        ),
        (
            &secondary,
            "NOTIFY for n.test.",
            "n.test.",
            Some(secondary_ip),
        ),
    ];
    for (server, text, zone, peer) in events {
        let log = server.log();
        let lines = log_lines(&log, text);
        assert!(!lines.is_empty(), "no '{text}' in {log}");
        assert!(lines.iter().any(|l| l["zone"] == zone), "{text}: {log}");
        for line in lines {
            assert!(line["zone"].as_str().is_some(), "{line}");
            match peer {
                Some(ip) => assert!(line["peer"].as_str().unwrap().starts_with(ip), "{line}"),
                None => assert!(line["file"].as_str().unwrap().ends_with("n.zone"), "{line}"),
            }
        }
    }
}

/// Issue 42, 9a: a symbolic link planted where the server used to stage
/// its control socket (`.heron-PID` beside it, a name anyone could
/// predict in a folder others may write) neither stops the start nor is
/// followed. The shell plants it under its own process id, which `exec`
/// hands to the server.
#[test]
fn a_link_planted_at_the_old_staging_name_is_neither_followed_nor_in_the_way() {
    let dir = tempfile::tempdir().unwrap();
    let (socket, config) = one_zone_config(dir.path());
    let victim = dir.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
    let mut server = Command::new("sh")
        .arg("-c")
        .arg(r#"ln -s "$1" "$2/.heron-$$" && exec "$3" serve --config "$4""#)
        .args([Path::new("sh"), &victim, dir.path(), &heron(), &config])
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let planted = dir.path().join(format!(".heron-{}", server.id()));
    let answered = heron_testkit::eventually_within(std::time::Duration::from_secs(20), || {
        ctl(&socket, &["status", "--timeout", "1"]).0 == Some(0)
    });
    let stopped = answered && ctl(&socket, &["stop"]).0 == Some(0);
    if !stopped {
        let _ = server.kill();
    }
    let _ = server.wait();
    let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap();
    assert!(answered, "the server did not start: {log}");
    assert!(stopped, "{log}");
    assert_eq!(
        std::fs::read_link(&planted).unwrap(),
        victim,
        "left as it was"
    );
    assert_eq!(
        std::fs::read_dir(&victim).unwrap().count(),
        0,
        "not followed"
    );
}

/// Issue 44: `heron ctl -c FILE` read the whole configuration, so a file
/// being edited with a typo broke even `ctl status`. Only `[server]
/// control` is read now; a file that is not TOML at all falls back to
/// `HERON_CONTROL`.
#[test]
fn ctl_finds_the_socket_while_the_configuration_has_errors() {
    let f = Fixture::start();
    let config = f.dir.path().join("edited.toml");
    let socket = f.socket.display();
    std::fs::write(
        &config,
        format!("[server]\ncontrol = \"{socket}\"\nworkers = \"many\"\nunknown-key = 1\n"),
    )
    .unwrap();
    let status = |config: &Path, env: Option<&Path>| {
        let mut command = Command::new(heron());
        command.args(["ctl", "-c"]).arg(config).arg("status");
        command.env_remove("HERON_CONTROL");
        if let Some(path) = env {
            command.env("HERON_CONTROL", path);
        }
        command.output().unwrap()
    };
    let out = status(&config, None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Not TOML at all: the socket is taken from HERON_CONTROL, with a note.
    std::fs::write(&config, "[server\ncontrol = ").unwrap();
    let out = status(&config, Some(&f.socket));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("not readable as TOML"));
    // One typo in a file that names its socket: that socket, read off the
    // [server] lines (black-box finding: "cannot be reached").
    let typo = format!("[server]\ncontrol = \"{socket}\"\nworkers = 1\n[log]\nlevel = \n");
    std::fs::write(&config, typo).unwrap();
    let out = status(&config, Some(Path::new("/nonexistent/heron.sock")));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains(&format!("trying the control socket {socket}")),
        "{said}"
    );
}

/// With no `--control` or `--config`, `heron ctl` asks the socket
/// `HERON_CONTROL` names (else /run/heron/control.sock); a server under a
/// unit with `RuntimeDirectory=` and no `[server] control` binds
/// `control.sock` there.
#[test]
fn without_arguments_ctl_finds_the_server_in_its_runtime_directory() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = dir.path().join("run");
    std::fs::create_dir(&runtime).unwrap();
    std::fs::write(dir.path().join("a.zone"), zone_text(1, "")).unwrap();
    let zone = dir.path().join("a.zone");
    let port = heron_testkit::process::free_port();
    let mut server = Command::new(heron())
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--zone"])
        .arg(format!("a.test={}", zone.display()))
        .env("RUNTIME_DIRECTORY", &runtime)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let socket = runtime.join("control.sock");
    let status = || {
        Command::new(heron())
            .args(["ctl", "status"])
            .env("HERON_CONTROL", &socket)
            .output()
            .unwrap()
    };
    let answered = heron_testkit::eventually_within(std::time::Duration::from_secs(20), || {
        status().status.success()
    });
    let _ = server.kill();
    let _ = server.wait();
    assert!(answered, "no answer on {}", socket.display());
}

/// Issue 44: `ctl reconfigure` took a new `[[key]]` and an ACL naming it,
/// said the key needed a restart, and enforced the ACL with a key the
/// running server did not know. Keys now apply with the rest.
#[test]
fn reconfigure_applies_a_new_tsig_key_and_the_acl_that_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let (socket, config) = one_zone_config(dir.path());
    let text = std::fs::read_to_string(&config).unwrap();
    let port: u16 = text
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|p| p.parse().ok())
        .unwrap();
    let server = ServerProcess::heron_on_port(&heron(), port, "a.test", &text).unwrap();
    let secret = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0";
    let axfr = || {
        let out = Command::new("dig")
            .args(["+tries=1", "+time=3", "-p", &port.to_string(), "-y"])
            .arg(format!("hmac-sha256:new.key:{secret}"))
            .args(["@127.0.0.1", "a.test", "AXFR"])
            .output()
            .expect("dig (bind9-dnsutils)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(!axfr().contains("IN\tSOA"), "no transfer before");
    let with_key = text.replace(
        "[[zone]]",
        &format!("[[key]]\nname = \"new.key\"\nalgorithm = \"hmac-sha256\"\nsecret = \"{secret}\"\n[[zone]]"),
    ) + "allow-transfer = [\"127.0.0.1 key new.key\"]\n";
    std::fs::write(server.dir().join("heron.toml"), with_key).unwrap();
    let (code, out, err) = ctl(&socket, &["reconfigure"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        !out.contains("needs restart") && out.contains("applied: [[key]]"),
        "the key applied, nothing waits for a restart: {out}"
    );
    let transferred = axfr();
    assert_eq!(
        transferred.matches("\tSOA\t").count(),
        2,
        "{transferred}\n{}",
        server.log()
    );
    assert!(transferred.contains("TSIG"), "signed: {transferred}");
}

/// Issue 44: `retransfer` of a zone whose primary had failed was refused
/// for the rest of the primary's back-off window, however the operator
/// had just fixed it. `retransfer` asks it once all the same, as a NOTIFY
/// does (black-box finding: it was refused, unsent, with the stale error
/// for up to 60 s); `--force` ends the back-off of each primary first.
#[test]
fn retransfer_asks_a_primary_left_alone_after_failing() {
    use heron_testkit::FakePrimary;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("heron.sock");
    let primary = FakePrimary::start(&["s.test"], 1);
    let port = heron_testkit::process::free_port();
    let one = [("s.test", primary.addr().to_string())];
    let config = secondary_config(dir.path(), &socket, port, &one);
    let _server = ServerProcess::heron_on_port(&heron(), port, "ready.test", &config).unwrap();
    row_when(&socket, "s.test", |r| r["serial"] == 1);
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    };
    // The primary fails until its window is a few seconds long.
    let leave_alone = || {
        primary.set_hang_up(true);
        let mut left_alone = false;
        for _ in 0..100 {
            let _ = ctl(&socket, &["refresh", "s.test"]);
            let row = ctl_json(&socket, &["zone-status", "s.test"])[0].clone();
            let until = row["primaries"][0]["backoff_until"].as_u64().unwrap_or(0);
            if until >= now() + 3 {
                left_alone = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
        assert!(left_alone, "the primary is left alone for a while");
        primary.set_hang_up(false);
    };
    leave_alone();
    primary.set_serial(2);
    let (code, out, err) = ctl(&socket, &["retransfer", "s.test"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("s.test. transferred: serial 2"), "{out}");
    leave_alone();
    primary.set_serial(3);
    let (code, out, err) = ctl(&socket, &["retransfer", "s.test", "--force"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("s.test. transferred: serial 3"), "{out}");
}

/// `refresh` asks each primary of the zone, however many are left alone:
/// the first one down for good, the second back (the first alone was
/// asked, and the second refused unsent).
#[test]
fn refresh_asks_each_primary_left_alone_after_failing() {
    use heron_testkit::FakePrimary;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("heron.sock");
    let (gone, back) = (
        FakePrimary::start(&["s.test"], 1),
        FakePrimary::start(&["s.test"], 1),
    );
    let port = heron_testkit::process::free_port();
    let both = format!("{}\", \"{}", gone.addr(), back.addr());
    let config = secondary_config(dir.path(), &socket, port, &[("s.test", both)]);
    let _server = ServerProcess::heron_on_port(&heron(), port, "ready.test", &config).unwrap();
    row_when(&socket, "s.test", |r| r["serial"] == 1);
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    };
    gone.set_hang_up(true);
    back.set_hang_up(true);
    let mut left_alone = false;
    for _ in 0..100 {
        let _ = ctl(&socket, &["refresh", "s.test"]);
        let row = ctl_json(&socket, &["zone-status", "s.test"])[0].clone();
        let until = |i: usize| row["primaries"][i]["backoff_until"].as_u64().unwrap_or(0);
        if until(0) >= now() + 3 && until(1) >= now() + 3 {
            left_alone = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    assert!(left_alone, "both primaries are left alone for a while");
    back.set_hang_up(false);
    back.set_serial(2);
    let (code, out, err) = ctl(&socket, &["refresh", "s.test"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("serial 2"), "{out}");
}

/// Issue 44: `[secondary]` needed a restart ("needs restart:
/// [secondary]"). A reconfigure now applies it: a transfer limit lowered
/// stops the next transfer, and raised again lets it through.
#[test]
fn reconfigure_applies_secondary_settings_at_run_time() {
    use heron_testkit::FakePrimary;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("heron.sock");
    let primary = FakePrimary::start(&["s.test"], 1);
    let port = heron_testkit::process::free_port();
    let config = secondary_config(
        dir.path(),
        &socket,
        port,
        &[("s.test", primary.addr().to_string())],
    );
    let server = ServerProcess::heron_on_port(&heron(), port, "ready.test", &config).unwrap();
    row_when(&socket, "s.test", |r| r["serial"] == 1);
    let path = server.dir().join("heron.toml");
    std::fs::write(
        &path,
        format!("{config}[secondary]\nmax-transfer-records = 2\n"),
    )
    .unwrap();
    let (code, out, err) = ctl(&socket, &["reconfigure"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("applied: [secondary]"), "{out}");
    assert!(!out.contains("needs restart"), "{out}");
    let (code, out, _) = ctl(&socket, &["retransfer", "s.test"]);
    assert_eq!(code, Some(1), "the limit holds: {out}\n{}", server.log());
    assert!(out.contains("records"), "{out}");
    // Unchanged: nothing said; then back to the default.
    let (_, out, _) = ctl(&socket, &["reconfigure"]);
    assert!(out.contains("no change"), "{out}");
    std::fs::write(&path, &config).unwrap();
    let (code, out, _) = ctl(&socket, &["reconfigure"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("applied: [secondary]"), "{out}");
    let (code, out, _) = ctl(&socket, &["retransfer", "s.test"]);
    assert_eq!(code, Some(0), "{out}");
}

/// Words bash's completion offers for `words` (the last being completed),
/// with `heron completions bash` sourced and this heron on PATH.
fn bash_completes(script: &Path, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let n = words.len();
    let line = format!(
        "source '{}'; COMP_WORDS=({}); COMP_CWORD={}; _heron_with_zones heron '{}' '{}'; \
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        quoted.join(" "),
        n - 1,
        words[n - 1],
        words[n - 2]
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(line)
        .env("PATH", path_with_heron())
        .output()
        .unwrap();
    let words = String::from_utf8_lossy(&out.stdout);
    words
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

fn path_with_heron() -> String {
    let bin = heron().parent().unwrap().to_path_buf();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Issue 44: completions did not offer zone names. After `heron ctl` and
/// a zone command, bash and fish offer the running server's zones (asked
/// over the socket the line names), else the configuration file's; other
/// commands and options complete as before.
#[test]
fn completions_offer_zone_names_to_ctl() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("heron.sock");
    let nobody = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = nobody.local_addr().unwrap().to_string();
    drop(nobody);
    let port = heron_testkit::process::free_port();
    let config = secondary_config(dir.path(), &socket, port, &[("s.test", dead)]);
    let mut server = ServerProcess::heron_on_port(&heron(), port, "ready.test", &config).unwrap();
    let out = Command::new(heron())
        .args(["completions", "bash"])
        .output()
        .unwrap();
    let script = dir.path().join("heron.bash");
    std::fs::write(&script, &out.stdout).unwrap();
    let sock = socket.to_str().unwrap();
    let both = ["ready.test.", "s.test."];
    assert_eq!(
        bash_completes(&script, &["heron", "ctl", "--control", sock, "reload", ""]),
        both
    );
    assert_eq!(
        bash_completes(
            &script,
            &["heron", "ctl", "--control", sock, "retransfer", "s"]
        ),
        ["s.test."]
    );
    let status = bash_completes(&script, &["heron", "ctl", "--control", sock, "st"]);
    assert!(status.contains(&"status".to_string()), "{status:?}");
    assert!(status.contains(&"stats".to_string()), "{status:?}");
    let flags = bash_completes(&script, &["heron", "ctl", "reload", "--f"]);
    assert_eq!(flags, ["--force"]);
    // Freeze, thaw and flush take zones too; the hidden command that
    // lists them is not offered (black-box finding DE-11).
    let frozen = bash_completes(&script, &["heron", "ctl", "--control", sock, "freeze", ""]);
    assert_eq!(frozen, both);
    let commands = bash_completes(&script, &["heron", "comp"]);
    assert_eq!(commands, ["compare", "completions"]);

    let fish_script = dir.path().join("heron.fish");
    let out = Command::new(heron())
        .args(["completions", "fish"])
        .output()
        .unwrap();
    std::fs::write(&fish_script, &out.stdout).unwrap();
    let fish = |line: &str| -> Vec<String> {
        let out = Command::new("fish")
            .arg("-c")
            .arg(format!(
                "source '{}'; complete -C'{line}'",
                fish_script.display()
            ))
            .env("PATH", path_with_heron())
            .output()
            .expect("fish (scripts/test-all.sh installs it)");
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .map(|l| l.split('\t').next().unwrap().to_string())
            .collect()
    };
    assert_eq!(fish(&format!("heron ctl --control {sock} notify ")), both);
    assert_eq!(fish(&format!("heron ctl --control {sock} thaw ")), both);
    assert_eq!(fish("heron comp"), ["compare", "completions"]);

    // The server gone: the configuration's zones.
    server.terminate();
    let config_path = server.dir().join("heron.toml");
    let config_path = config_path.to_str().unwrap();
    assert_eq!(
        bash_completes(
            &script,
            &["heron", "ctl", "-c", config_path, "zone-status", ""]
        ),
        both
    );
    assert_eq!(fish(&format!("heron ctl -c {config_path} refresh ")), both);
}

/// Output piped into a reader that has gone (`| head -1`) ends the command
/// quietly: no panic, no backtrace, success, as `--help` does.
#[test]
fn output_to_a_closed_pipe_ends_the_command_quietly() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let done = std::process::Command::new(heron())
        .args(["completions", "bash"])
        .stdout(writer)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{:?}: {stderr}", done.status);
    assert!(stderr.is_empty(), "{stderr}");
}

/// A zone whose file does not load is listed by `zone-status` all the
/// same, not served, with the reason; one whose reload failed keeps its
/// version served and shows the reason too.
#[test]
fn zone_status_lists_a_zone_that_failed_to_load_with_why() {
    let f = Fixture::start();
    let config = f.server.dir().join("heron.toml");
    let broken = f.dir.path().join("c.zone");
    std::fs::write(&broken, zone_text(1, "bad A 192.0.2.300\n")).unwrap();
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "[[zone]]\norigin = \"c.test\"\nfile = \"{}\"\n",
        broken.display()
    ));
    std::fs::write(&config, text).unwrap();
    let _ = ctl(&f.socket, &["reconfigure"]);
    f.write_zone("a", &zone_text(2, "bad A 192.0.2.300\n"));
    let _ = ctl(&f.socket, &["reload", "a.test"]);
    let status = ctl_json(&f.socket, &["zone-status"]);
    let row = |zone: &str| {
        let rows = status.as_array().unwrap_or_else(|| panic!("{status}"));
        (rows.iter().find(|r| r["zone"] == zone)).cloned()
    };
    let c = row("c.test.").unwrap_or_else(|| panic!("c.test listed: {status}"));
    assert_eq!(c["served"], false, "{c}");
    assert!(c["last_error"].to_string().contains("c.zone:5:"), "{c}");
    let a = row("a.test.").unwrap();
    assert_eq!(
        (a["served"].clone(), a["serial"].clone()),
        (true.into(), 1.into())
    );
    assert!(a["last_error"].to_string().contains("a.zone:5:"), "{a}");
    let b = row("b.test.").unwrap();
    assert!(b.get("last_error").is_none_or(Value::is_null), "{b}");
}

/// Under the shipped unit (RuntimeDirectory=heron) with no `[server]
/// control`, the server's socket is `$RUNTIME_DIRECTORY/control.sock`;
/// `heron reload --config`, as the unit's ExecReload runs it (in the
/// same environment), finds it there. It exited 2 ("[server] control is
/// not set"), so `systemctl reload` failed (black-box finding).
#[test]
fn reload_with_a_configuration_naming_no_socket_finds_the_units_one() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = dir.path().join("run");
    std::fs::create_dir_all(&runtime).unwrap();
    let port = heron_testkit::process::free_port();
    let zone = dir.path().join("r.test.zone");
    std::fs::write(&zone, zone_text(1, "")).unwrap();
    let config = dir.path().join("heron.toml");
    let text = format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n\
         [[zone]]\norigin = \"r.test\"\nfile = \"{}\"\n",
        zone.display()
    );
    std::fs::write(&config, text).unwrap();
    let mut server = Command::new(heron())
        .args(["serve", "--config"])
        .arg(&config)
        .env("RUNTIME_DIRECTORY", &runtime)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let socket = runtime.join("control.sock");
    let up = (0..200).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        socket.exists()
    });
    let reload = Command::new(heron())
        .args(["reload", "--config"])
        .arg(&config)
        .env("RUNTIME_DIRECTORY", &runtime)
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(up, "no socket at {}", socket.display());
    assert!(reload.status.success(), "{reload:?}");
}

/// `heron ctl retransfer` answers once the version it brought is served:
/// a query right after it sees the new serial (black-box finding: with
/// 20,000 records it answered before, and queries got the old serial).
#[test]
fn retransfer_answers_once_the_new_version_is_served() {
    use heron_proto::{Name, RType};
    use heron_testkit::{FakePrimary, QueryOpts, build_query, query_udp};
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("heron.sock");
    let primary = FakePrimary::start(&["big.test"], 1);
    let port = heron_testkit::process::free_port();
    let secondaries = [("big.test", primary.addr().to_string())];
    let config = secondary_config(dir.path(), &socket, port, &secondaries);
    let server = ServerProcess::heron_on_port(&heron(), port, "ready.test", &config).unwrap();
    row_when(&socket, "big.test", |r| r["serial"] == 1);
    let query = build_query(
        &Name::parse("big.test").unwrap(),
        RType::SOA,
        &QueryOpts::default(),
    );
    for serial in 2..5u32 {
        primary.set_padding(60_000);
        primary.set_serial(serial);
        let (code, out, err) = ctl(&socket, &["retransfer", "big.test"]);
        assert_eq!(code, Some(0), "{out}{err}");
        let answer = query_udp(server.addr(), &query);
        let message = heron_proto::message::Message::parse(&answer).unwrap();
        let served = message.answers[0].rdata[message.answers[0].rdata.len() - 20..][..4].to_vec();
        assert_eq!(served, serial.to_be_bytes(), "{out}");
    }
}

/// `--timeout 0` never waited and failed every time as if the server were
/// down (black-box finding DE-5): it is a usage error (exit 2), for `heron
/// ctl` and `heron reload` alike.
#[test]
fn a_timeout_of_zero_is_a_usage_error() {
    let socket = "/nonexistent/heron.sock";
    let cases = [
        &["ctl", "--control", socket, "--timeout", "0", "status"][..],
        &["reload", "--control", socket, "--timeout", "0"],
    ];
    for args in cases {
        let heron = std::process::Command::new(env!("CARGO_BIN_EXE_heron"));
        let out = { heron }.args(args).output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {said}");
        assert!(said.contains("--timeout"), "{said}");
    }
}
