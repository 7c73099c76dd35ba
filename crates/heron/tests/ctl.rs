//! `heron ctl` against a running server on loopback: every command waits
//! for the result, and a failing one exits non-zero with the reason.

use std::path::{Path, PathBuf};
use std::process::Command;

use heron_testkit::process::ServerProcess;
use serde_json::Value;

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

#[test]
fn failing_commands_exit_non_zero_with_the_reason() {
    let f = Fixture::start();
    let (code, out, _) = ctl(&f.socket, &["zone-status", "nope.test"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("unknown zone nope.test."), "{out}");
    let (code, out, _) = ctl(&f.socket, &["reload", "nope.test"]);
    assert_eq!(code, Some(1), "{out}");
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

#[test]
fn status_says_what_runs_and_stop_stops_the_server() {
    let mut f = Fixture::start();
    let status = ctl_json(&f.socket, &["status"]);
    assert_eq!(status["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(status["zones"]["primary"], 2, "{status}");
    assert_eq!(status["zones"]["secondary"], 0, "{status}");
    assert_eq!(status["workers"], 1, "{status}");
    assert_eq!(status["tls"]["enabled"], false, "{status}");
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
    assert_eq!(code, Some(2));
    assert!(err.contains("is heron serve running"), "{err}");
}
