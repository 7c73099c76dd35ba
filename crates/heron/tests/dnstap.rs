//! dnstap end to end (issue 26): the `heron` binary logs queries and
//! responses to a file that BIND's `dnstap-read` reads back, or to a
//! Frame Streams reader's socket that this test plays (handshake, a
//! reader that goes away and comes back, one that never reads), with
//! sampling. Queries are answered whatever happens to the log.

use std::io::Read;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use heron_proto::{Name, RType};
use heron_server::dnstap::frame;
use heron_testkit::{QueryOpts, ServerProcess, build_query, query_tcp, try_query_udp};
use serde_json::Value;

const DNSTAP_READ: &str = "/usr/bin/dnstap-read";

fn heron() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_heron"))
}

/// A server for zone `tap.test` (one UDP worker) with `dnstap` as its
/// `[dnstap]` section and a control socket.
fn server(dir: &Path, dnstap: &str) -> ServerProcess {
    let zone = dir.join("tap.test.zone");
    std::fs::write(
        &zone,
        "$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n* A 192.0.2.2\n",
    )
    .unwrap();
    let (zone, control) = (zone.display().to_string(), dir.join("ctl.sock"));
    let dnstap = dnstap.to_string();
    ServerProcess::heron_with_config(&heron(), "tap.test", move |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\ncontrol = \"{}\"\n\
             [[zone]]\norigin = \"tap.test\"\nfile = \"{zone}\"\n[dnstap]\n{dnstap}\n",
            control.display()
        )
    })
}

fn query(name: &str) -> Vec<u8> {
    let qname = Name::parse(name).unwrap();
    build_query(
        &qname,
        RType::A,
        &QueryOpts {
            id: 7,
            ..QueryOpts::default()
        },
    )
}

/// Asks over UDP and checks an answer came back.
fn ask_udp(server: &ServerProcess, name: &str) {
    let response = try_query_udp(server.addr(), &query(name)).unwrap();
    assert_eq!(response[3] & 0xf, 0, "NOERROR for {name}");
}

fn stats(dir: &Path) -> Value {
    let out = Command::new(heron())
        .args(["ctl", "--socket"])
        .arg(dir.join("ctl.sock"))
        .args(["stats", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let response: Value = serde_json::from_slice(&out.stdout).unwrap();
    response["data"]["dnstap"].clone()
}

fn dnstap_read(args: &[&str], file: &Path) -> String {
    let out = Command::new(DNSTAP_READ)
        .args(args)
        .arg(file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn a_file_holds_every_query_and_response_over_udp_and_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("queries.dnstap");
    let mut server = server(
        dir.path(),
        &format!("file = \"{}\"\nidentity = \"ns-test\"", file.display()),
    );
    for i in 0..20 {
        ask_udp(&server, &format!("udp{i}.tap.test"));
        let response = query_tcp(server.addr(), &query(&format!("tcp{i}.tap.test")));
        assert_eq!(response[3] & 0xf, 0);
    }
    assert!(
        server.terminate().is_some_and(|s| s.success()),
        "clean exit"
    );

    let text = dnstap_read(&[], &file);
    for i in 0..20 {
        for (name, protocol) in [(format!("udp{i}"), "UDP"), (format!("tcp{i}"), "TCP")] {
            let qname = format!(" {name}.tap.test/IN/A");
            let lines = |kind: &str| {
                (text.lines())
                    .filter(|l| l.contains(kind) && l.contains(&qname) && l.contains(protocol))
                    .count()
            };
            assert_eq!(lines(" AQ 127.0.0.1:"), 1, "{name} query in\n{text}");
            assert_eq!(lines(" AR 127.0.0.1:"), 1, "{name} response in\n{text}");
        }
    }
    let yaml = dnstap_read(&["-y"], &file);
    assert!(yaml.contains("identity: ns-test"), "{yaml}");
    assert_eq!(
        yaml.matches("type: AUTH_QUERY").count(),
        text.matches(" AQ ").count()
    );
    assert!(
        yaml.contains("- 'udp7.tap.test. 60 IN A 192.0.2.2'"),
        "{yaml}"
    );
    // Issue 44: the zone that answers, and our address, on every
    // transport (TCP had none).
    let messages: Vec<&str> = yaml.split("\n---").collect();
    assert!(messages.len() >= 80, "{yaml}");
    for message in &messages {
        assert!(message.contains("query_zone: tap.test."), "{message}");
        assert!(
            message.contains("response_address: \"127.0.0.1\""),
            "{message}"
        );
        // dnstap-read shows a response's own time, to the second (the
        // unit tests check it is the response's, after the query's).
        let own_time = match message.contains("type: AUTH_RESPONSE") {
            true => "response_time: !!timestamp",
            false => "query_time: !!timestamp",
        };
        assert!(message.contains(own_time), "{message}");
    }
}

/// Black-box finding: an UPDATE over UDP was not logged at all, over TCP
/// without its response. Each is logged with its answer now, over both.
#[test]
fn updates_are_logged_with_their_answers_over_udp_and_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("updates.dnstap");
    let zone = dir.path().join("upd.test.zone");
    std::fs::write(
        &zone,
        "$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n",
    )
    .unwrap();
    let (zone, dnstap) = (zone.display().to_string(), file.display().to_string());
    let mut server = ServerProcess::heron_with_config(&heron(), "upd.test", move |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n\
             [[zone]]\norigin = \"upd.test\"\nfile = \"{zone}\"\n\
             allow-update = [\"127.0.0.1 zonesub ANY\"]\n[dnstap]\nfile = \"{dnstap}\"\n"
        )
    });
    for (name, tcp) in [("udp", false), ("tcp", true)] {
        let mut nsupdate = Command::new("/usr/bin/nsupdate");
        if tcp {
            nsupdate.arg("-v");
        }
        let mut child = nsupdate
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let commands = format!(
            "server 127.0.0.1 {}\nzone upd.test\nupdate add {name}.upd.test 60 A 192.0.2.9\nsend\n",
            server.addr().port()
        );
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(commands.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success(), "{name}: {}", server.log());
    }
    assert!(server.terminate().is_some_and(|s| s.success()));
    let yaml = dnstap_read(&["-y"], &file);
    for (kind, protocol) in [
        ("AUTH_QUERY", "UDP"),
        ("AUTH_RESPONSE", "UDP"),
        ("AUTH_QUERY", "TCP"),
        ("AUTH_RESPONSE", "TCP"),
    ] {
        let found = (yaml.split("\n---")).any(|m| {
            m.contains(&format!("type: {kind}"))
                && m.contains(&format!("socket_protocol: {protocol}"))
                && m.contains("opcode: UPDATE")
                && m.contains("query_zone: upd.test.")
                && m.contains("response_address: \"127.0.0.1\"")
        });
        assert!(found, "{kind} over {protocol}:\n{yaml}");
    }
}

#[test]
fn one_query_in_n_is_logged_with_its_response() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sampled.dnstap");
    let mut server = server(
        dir.path(),
        &format!("file = \"{}\"\nsample = 10", file.display()),
    );
    for i in 0..200 {
        ask_udp(&server, &format!("s{i}.tap.test"));
    }
    assert!(server.terminate().is_some_and(|s| s.success()));
    let text = dnstap_read(&[], &file);
    // One worker counts every query down: of 200 in a row, one in 10,
    // whatever the start-up queries before them left of the count.
    let ours = |kind: &str| {
        (text.lines())
            .filter(|l| l.contains(kind) && l.contains(".tap.test/IN/A") && l.contains(" s"))
            .count()
    };
    assert_eq!(ours(" AQ "), 20, "{text}");
    assert_eq!(ours(" AR "), 20, "{text}");
}

/// A connection from the server, the reader's half of the handshake made.
fn accept_writer(listener: &UnixListener) -> UnixStream {
    let (mut stream, _) = listener.accept().unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    frame::accept(&mut stream).unwrap();
    stream
}

/// Reads data frames (no control frame may come) until one holds `name`
/// in wire form.
fn read_until_name(stream: &mut UnixStream, name: &str) {
    let name = Name::parse(name).unwrap();
    let wire = name.as_wire();
    loop {
        let mut len = [0u8; 4];
        stream.read_exact(&mut len).unwrap();
        let len = u32::from_be_bytes(len) as usize;
        assert!(len > 0, "a control frame in the middle of the data");
        let mut payload = vec![0u8; len];
        stream.read_exact(&mut payload).unwrap();
        if payload.windows(wire.len()).any(|w| w == wire) {
            return;
        }
    }
}

fn bind_reader(path: &Path) -> UnixListener {
    let _ = std::fs::remove_file(path);
    UnixListener::bind(path).unwrap()
}

#[test]
fn a_socket_reader_that_goes_away_and_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("reader.sock");
    let listener = bind_reader(&socket);
    let server = server(
        dir.path(),
        &format!("socket = \"{}\"\nqueue-messages = 20", socket.display()),
    );
    let mut stream = accept_writer(&listener);
    ask_udp(&server, "first.tap.test");
    read_until_name(&mut stream, "first.tap.test");

    // The reader goes: every query is still answered, the log drops.
    drop((stream, listener));
    std::fs::remove_file(&socket).unwrap();
    for i in 0..100 {
        ask_udp(&server, &format!("gone{i}.tap.test"));
    }
    let dropped = stats(dir.path())["dropped"].as_u64().unwrap();
    assert!(dropped >= 2 * (100 - 20), "dropped {dropped}");

    // Back: the writer connects again by itself and logs new queries.
    let listener = bind_reader(&socket);
    let mut stream = accept_writer(&listener);
    ask_udp(&server, "back.tap.test");
    read_until_name(&mut stream, "back.tap.test");
    assert!(stats(dir.path())["written"].as_u64().unwrap() >= 4);
}

#[test]
fn a_reader_that_never_reads_leaves_the_queue_bounded_and_queries_answered() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("stuck.sock");
    let listener = bind_reader(&socket);
    let server = server(
        dir.path(),
        &format!(
            "socket = \"{}\"\nqueue-messages = 50\nqueue-bytes = 65536",
            socket.display()
        ),
    );
    // Handshakes, then reads nothing more.
    let _stream = accept_writer(&listener);
    for i in 0..3000 {
        ask_udp(&server, &format!("stuck{i}.tap.test"));
    }
    let tap = stats(dir.path());
    assert!(tap["queued"].as_u64().unwrap() <= 50, "{tap}");
    assert!(tap["queued_bytes"].as_u64().unwrap() <= 65536, "{tap}");
    assert!(tap["dropped"].as_u64().unwrap() > 0, "{tap}");
}

/// Issue 44: logrotate renames the file and sends SIGHUP (`systemctl
/// reload`); the server ends the renamed file and goes on in a new one.
#[test]
fn a_reload_after_logrotate_moved_the_file_starts_a_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("queries.dnstap");
    let mut server = server(dir.path(), &format!("file = \"{}\"", file.display()));
    ask_udp(&server, "before.tap.test");
    let rotated = dir.path().join("queries.dnstap.1");
    // What is queued reaches the file within its drain interval.
    assert!(heron_testkit::eventually_within(
        Duration::from_secs(10),
        || { std::fs::read(&file).is_ok_and(|b| b.windows(6).any(|w| w == b"before")) }
    ));
    std::fs::rename(&file, &rotated).unwrap();
    server.reload();
    assert!(
        heron_testkit::eventually_within(Duration::from_secs(10), || file.exists()),
        "{}",
        server.log()
    );
    ask_udp(&server, "after.tap.test");
    assert!(server.terminate().is_some_and(|s| s.success()));
    let old = dnstap_read(&[], &rotated);
    let new = dnstap_read(&[], &file);
    assert!(
        old.contains("before.tap.test") && !old.contains("after.tap.test"),
        "{old}"
    );
    assert!(
        new.contains("after.tap.test") && !new.contains("before.tap.test"),
        "{new}"
    );
}

/// Issue 44: logrotate's `postrotate` runs `heron ctl dnstap-reopen`,
/// which returns once the new file is there; a restart then continues
/// that file (it was emptied at every start). `dnstap-read -y` reads the
/// moved file and both sessions of the new one.
#[test]
fn ctl_dnstap_reopen_and_a_restart_keep_every_query() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("queries.dnstap");
    let tap = format!("file = \"{}\"", file.display());
    let mut server = server(dir.path(), &tap);
    ask_udp(&server, "before.tap.test");
    assert!(heron_testkit::eventually_within(
        Duration::from_secs(10),
        || { std::fs::read(&file).is_ok_and(|b| b.windows(6).any(|w| w == b"before")) }
    ));
    let rotated = dir.path().join("queries.dnstap.1");
    std::fs::rename(&file, &rotated).unwrap();
    let out = Command::new(heron())
        .args(["ctl", "--socket"])
        .arg(dir.path().join("ctl.sock"))
        .arg("dnstap-reopen")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}{}", server.log());
    assert!(file.exists(), "there once ctl returns: {said}");
    ask_udp(&server, "after.tap.test");
    assert!(server.terminate().is_some_and(|s| s.success()));
    let mut server = self::server(dir.path(), &tap);
    ask_udp(&server, "restarted.tap.test");
    assert!(server.terminate().is_some_and(|s| s.success()));

    let old = dnstap_read(&["-y"], &rotated);
    assert!(old.contains("before.tap.test"), "{old}");
    assert!(!old.contains("after.tap.test"), "{old}");
    let new = dnstap_read(&["-y"], &file);
    for name in ["after.tap.test", "restarted.tap.test"] {
        assert_eq!(new.matches(&format!("'{name}. IN A'")).count(), 2, "{new}");
    }
    assert!(!new.contains("before.tap.test"), "{new}");
    assert!(new.contains("query_zone: tap.test."), "{new}");
}

/// `dnstap-reopen` with the log going to a socket is refused (exit 4).
#[test]
fn ctl_dnstap_reopen_without_a_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("reader.sock");
    let mut server = server(dir.path(), &format!("socket = \"{}\"", socket.display()));
    ask_udp(&server, "up.tap.test");
    let out = Command::new(heron())
        .args(["ctl", "--socket"])
        .arg(dir.path().join("ctl.sock"))
        .arg("dnstap-reopen")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("no file to reopen"), "{said}");
    server.terminate();
}

/// `heron ctl` with `args` on the server's socket: exit code and what it
/// printed.
fn ctl(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(heron())
        .args(["ctl", "--socket"])
        .arg(dir.join("ctl.sock"))
        .args(args)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    (out.status.code(), said.into_owned())
}

/// Issue 44: `[dnstap]` needed a restart. `ctl reconfigure` now turns
/// the log on, moves it to another file and turns it off, each applied at
/// once; each file is whole (`dnstap-read` reads it) and holds the queries
/// asked while it was the log.
#[test]
fn reconfigure_turns_dnstap_on_moves_it_and_turns_it_off() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("one.dnstap"), dir.path().join("two.dnstap"));
    let mut server = server(dir.path(), &format!("file = \"{}\"", first.display()));
    let config = server.dir().join("heron.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    let (without, _) = text.split_once("[dnstap]").unwrap();
    let without = without.to_string();
    let with = |file: &Path| format!("{without}[dnstap]\nfile = \"{}\"\n", file.display());
    let reconfigure = |text: String| {
        std::fs::write(&config, text).unwrap();
        let (code, said) = ctl(dir.path(), &["reconfigure"]);
        assert_eq!(code, Some(0), "{said}");
        assert!(said.contains("applied: [dnstap]"), "{said}");
        assert!(!said.contains("needs restart"), "{said}");
    };
    reconfigure(without.clone());
    ask_udp(&server, "off.tap.test");
    reconfigure(with(&second));
    ask_udp(&server, "second.tap.test");
    reconfigure(with(&first));
    ask_udp(&server, "first.tap.test");
    let (_, said) = ctl(dir.path(), &["reconfigure"]);
    assert!(said.contains("no change"), "{said}");
    reconfigure(without);
    ask_udp(&server, "off-again.tap.test");
    assert!(server.terminate().is_some_and(|s| s.success()));
    // The first file was never written before: only the query asked while
    // it was the log again. The second holds its own.
    let first = dnstap_read(&["-y"], &first);
    let second = dnstap_read(&["-y"], &second);
    assert!(first.contains("first.tap.test"), "{first}");
    assert!(second.contains("second.tap.test"), "{second}");
    for (text, not) in [(&first, "second.tap"), (&second, "first.tap")] {
        assert!(!text.contains(not), "{text}");
        assert!(!text.contains("off.tap.test"), "{text}");
        assert!(!text.contains("off-again"), "{text}");
    }
}

/// A `[dnstap] file` a reload cannot open (here: a file that is not
/// dnstap) fails the reload with the reason, not said to be applied, and
/// the log goes on where it was.
#[test]
fn a_dnstap_file_a_reload_cannot_open_leaves_the_log_where_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("queries.dnstap");
    let foreign = dir.path().join("notes.txt");
    std::fs::write(&foreign, "not dnstap").unwrap();
    let mut server = server(dir.path(), &format!("file = \"{}\"", file.display()));
    let config = server.dir().join("heron.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace(&file.display().to_string(), &foreign.display().to_string()),
    )
    .unwrap();
    let (code, said) = ctl(dir.path(), &["reconfigure"]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("[dnstap] not applied"), "{said}");
    // Black-box finding AJ-6: it also said `applied: [dnstap]`.
    assert_eq!(said.matches("[dnstap]").count(), 1, "{said}");
    assert!(said.contains("the rest of the configuration was"), "{said}");
    assert!(said.contains("not a dnstap file"), "{said}");
    ask_udp(&server, "still.tap.test");
    assert!(server.terminate().is_some_and(|s| s.success()));
    assert!(dnstap_read(&[], &file).contains("still.tap.test"));
    assert_eq!(std::fs::read_to_string(&foreign).unwrap(), "not dnstap");
}
