//! The AF_XDP path on a veth pair into a network namespace made here:
//! Heron answers `dig` and `kdig` inside the namespace over XDP as it
//! does over sockets, TCP to the same address still goes through the
//! kernel, and no XDP program is left behind. Needs root and a kernel
//! with AF_XDP; skipped with the reason otherwise.

use std::path::PathBuf;
use std::process::Command;

use heron_testkit::ServerProcess;
use heron_testkit::netns::{VethNamespace, skip_without_xdp};

fn heron() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_heron"))
}

fn zone_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/differential/edge.test.zone")
}

/// Heron answering edge.test. on loopback (sockets), on the pair's
/// addresses (sockets: TCP) and over XDP on the pair's UDP.
pub fn xdp_config(net: &VethNamespace, mode: &str, port: u16) -> String {
    let (v4, v6) = (net.server(false, port), net.server(true, port));
    format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\", \"{v4}\", \"{v6}\"]\nworkers = 1\n\
         [xdp]\nlisten = [\"{}@{port}\"]\nmode = \"{mode}\"\n\
         [[zone]]\norigin = \"edge.test.\"\nfile = \"{}\"\n",
        net.outside,
        zone_file().display()
    )
}

fn stdout(out: std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What `tool` prints for `args` (answers only), from the namespace.
fn ask_inside(net: &VethNamespace, tool: &str, server: &str, port: u16, args: &[&str]) -> String {
    let mut all = vec![format!("@{server}"), "-p".into(), port.to_string()];
    all.extend(["+tries=2", "+time=2", "+noall", "+answer", "+authority"].map(String::from));
    all.extend(args.iter().map(|a| a.to_string()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    stdout(net.run(tool, &all))
}

fn ask_loopback(tool: &str, port: u16, args: &[&str]) -> String {
    let out = Command::new(tool)
        .args(["@127.0.0.1", "-p", &port.to_string()])
        .args(["+tries=2", "+time=2", "+noall", "+answer", "+authority"])
        .args(args)
        .output()
        .unwrap();
    stdout(out)
}

#[test]
fn dig_and_kdig_get_over_xdp_what_sockets_answer_and_tcp_still_works() {
    if skip_without_xdp() {
        return;
    }
    for mode in ["native", "generic"] {
        let net = VethNamespace::new(&mode[..1]).unwrap();
        let mut server =
            ServerProcess::heron_with_config(&heron(), "edge.test", |p| xdp_config(&net, mode, p));
        let port = server.addr().port();
        // Loopback answers before XDP is attached: wait for "ready".
        assert!(server.wait_for_log("ready:"), "{}", server.log());
        assert!(net.has_xdp(), "{mode}: attached");
        let log = server.log();
        assert!(
            log.contains(&format!("XDP on {} ({mode} mode", net.outside)),
            "{log}"
        );
        for tool in ["dig", "kdig"] {
            for question in [
                &["www.edge.test.", "A"][..],
                &["nx.edge.test.", "AAAA"],
                &["edge.test.", "MX"],
            ] {
                let want = ask_loopback(tool, port, question);
                assert!(!want.is_empty(), "{tool} {question:?} over loopback");
                for server_ip in [
                    heron_testkit::netns::OUTSIDE_V4,
                    heron_testkit::netns::OUTSIDE_V6,
                ] {
                    let got = ask_inside(&net, tool, server_ip, port, question);
                    assert_eq!(got, want, "{mode}: {tool} @{server_ip} {question:?}");
                    let mut tcp = question.to_vec();
                    tcp.push("+tcp");
                    let got = ask_inside(&net, tool, server_ip, port, &tcp);
                    assert_eq!(got, want, "{mode}: {tool} +tcp @{server_ip} {question:?}");
                }
            }
        }
        server.terminate();
        assert!(!net.has_xdp(), "{mode}: the program went with the server");
    }
}

#[test]
fn a_missing_interface_is_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("heron-xdp-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("heron.toml");
    let port = heron_testkit::free_port();
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\n[xdp]\nlisten = [\"nosuchif0@{port}\"]\n\
             [[zone]]\norigin = \"edge.test.\"\nfile = \"{}\"\n",
            zone_file().display()
        ),
    )
    .unwrap();
    let out = Command::new(heron())
        .args(["serve", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no network interface named \"nosuchif0\""),
        "{err}"
    );
}
