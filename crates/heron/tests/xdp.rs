//! The AF_XDP path on a veth pair into a network namespace made here:
//! Heron answers `dig` and `kdig` inside the namespace over XDP as it
//! does over sockets, TCP to the same address still goes through the
//! kernel, and no XDP program is left behind. Needs root and a kernel
//! with AF_XDP; skipped with the reason otherwise.

use std::path::PathBuf;
use std::process::Command;

use heron_testkit::ServerProcess;
use heron_testkit::client::flood_udp;
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

/// Heron as [`xdp_config`] has it (generic mode) with `sections` added,
/// ready, on `net`.
fn start_over_xdp(net: &VethNamespace, sections: &str) -> ServerProcess {
    let server = ServerProcess::heron_with_config(&heron(), "edge.test", |p| {
        format!("{}{sections}", xdp_config(net, "generic", p))
    });
    assert!(server.wait_for_log("ready:"), "{}", server.log());
    assert!(net.has_xdp(), "attached");
    server
}

/// The COOKIE dig printed for a query with client cookie `client`
/// (hex), asked from `at` (the namespace or None: here).
fn cookie_answer(net: Option<&VethNamespace>, server: &str, port: u16, client: &str) -> String {
    let args = [
        &format!("@{server}"),
        "-p",
        &port.to_string(),
        "+tries=2",
        "+time=2",
        &format!("+cookie={client}"),
        "www.edge.test.",
        "A",
    ];
    let out = match net {
        Some(net) => net.run("dig", &args),
        None => Command::new("dig").args(args).output().unwrap(),
    };
    let out = stdout(out);
    let line = out.lines().find_map(|l| l.split("COOKIE: ").nth(1));
    let line = line.unwrap_or_else(|| panic!("no COOKIE in {out}"));
    line.split_whitespace().next().unwrap().to_lowercase()
}

#[test]
fn a_client_cookie_gets_a_server_cookie_over_xdp_as_over_sockets() {
    if skip_without_xdp() {
        return;
    }
    let net = VethNamespace::new("c").unwrap();
    let server = start_over_xdp(&net, "");
    let port = server.addr().port();
    let client = "0102030405060708";
    for (net, at) in [
        (None, "127.0.0.1"),
        (Some(&net), heron_testkit::netns::OUTSIDE_V4),
        (Some(&net), heron_testkit::netns::OUTSIDE_V6),
    ] {
        let cookie = cookie_answer(net, at, port, client);
        // The client's 8 octets, then a 16-octet RFC 9018 server cookie
        // (version 1, three reserved octets).
        assert_eq!(cookie.len(), 2 * (8 + 16), "@{at}: {cookie}");
        assert_eq!(&cookie[..16], client, "@{at}: {cookie}");
        assert_eq!(&cookie[16..24], "01000000", "@{at}: {cookie}");
    }
}

/// The (dropped, slipped) responses the server's exit log reports.
fn limited_at_exit(server: &mut ServerProcess) -> (usize, usize) {
    server.terminate();
    let log = server.log();
    let line = log
        .lines()
        .find_map(|l| l.split("response rate limiting: ").nth(1))
        .unwrap_or_else(|| panic!("no RRL counters in {log}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    // "D responses dropped, S slipped, ..."
    (words[0].parse().unwrap(), words[3].parse().unwrap())
}

#[test]
fn a_flood_over_xdp_is_rate_limited_as_over_sockets() {
    if skip_without_xdp() {
        return;
    }
    let net = VethNamespace::new("r").unwrap();
    let rrl = "[rrl]\nresponses-per-second = 50\nslip = 2\n";
    let mut server = start_over_xdp(&net, rrl);
    let to = net.server(false, server.addr().port());
    let from = std::net::Ipv4Addr::UNSPECIFIED.into();
    let flood = net.within(|| flood_udp(from, to, 2000));
    flood.assert_limited(50);
    let (answered, truncated) = (flood.answered, flood.truncated);
    let (dropped, slipped) = limited_at_exit(&mut server);
    assert!(
        dropped > 0 && slipped >= truncated,
        "{dropped} dropped, {slipped} slipped"
    );
    assert!(
        answered + dropped + slipped <= flood.sent,
        "{dropped} dropped, {slipped} slipped"
    );
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
