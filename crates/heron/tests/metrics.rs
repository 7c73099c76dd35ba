//! The Prometheus endpoint of a running server: counters move by exactly
//! the queries sent per transport and RCODE, they agree with `heron ctl
//! stats`, the kernel's drop counters are there, bad HTTP gets a 4xx and
//! the endpoint keeps answering, and every metric the Grafana dashboard
//! in docs/ uses is exported.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use heron_proto::{Name, RType};
use heron_testkit::{
    DigTool, QueryOpts, ServerProcess, build_query, free_port, query_tcp_pipelined, query_udp,
    run_dig_with,
};

const ORIGIN: &str = "edge.test";

fn heron() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_heron"))
}

/// A running Heron with UDP, TCP, TLS, a control socket and metrics.
struct Fixture {
    server: ServerProcess,
    tls: SocketAddr,
    metrics: SocketAddr,
    _certs: tempfile::TempDir,
}

/// A scrape as Prometheus 2 sends it: OpenMetrics first.
const PROMETHEUS_SCRAPE: &[u8] = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\
    Accept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,\
    text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n\r\n";

impl Fixture {
    fn start() -> Fixture {
        let certs = tempfile::tempdir().unwrap();
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let (chain, key) = (certs.path().join("chain.pem"), certs.path().join("key.pem"));
        std::fs::write(&chain, cert.cert.pem()).unwrap();
        std::fs::write(&key, cert.signing_key.serialize_pem()).unwrap();
        let zone =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/differential/edge.test.zone");
        let (tls_port, metrics_port) = (free_port(), free_port());
        let server = ServerProcess::heron_with_config(&heron(), ORIGIN, |port| {
            format!(
                "[server]\nlisten = [\"127.0.0.1:{port}\"]\ncontrol = \"heron.sock\"\n\
                 [tls]\nlisten = [\"127.0.0.1:{tls_port}\"]\n\
                 certificate = \"{}\"\nkey = \"{}\"\n\
                 [metrics]\nlisten = \"127.0.0.1:{metrics_port}\"\n\
                 [[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\n",
                chain.display(),
                key.display(),
                zone.display()
            )
        });
        Fixture {
            server,
            tls: SocketAddr::from(([127, 0, 0, 1], tls_port)),
            metrics: SocketAddr::from(([127, 0, 0, 1], metrics_port)),
            _certs: certs,
        }
    }

    /// The samples of a scrape, by name and labels as written.
    fn scrape(&self) -> HashMap<String, f64> {
        let answer = http(self.metrics, PROMETHEUS_SCRAPE);
        let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
        assert!(head.starts_with("HTTP/1.0 200 OK"), "{head}");
        assert!(
            head.contains("Content-Type: application/openmetrics-text"),
            "{head}"
        );
        assert!(body.ends_with("# EOF\n"), "{body}");
        samples(body)
    }

    /// A scrape once every answer sent has its latency recorded: the UDP
    /// path records a batch's latency after the send, so a client can
    /// see its answer a moment before the count moves.
    fn settled_scrape(&self) -> HashMap<String, f64> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let samples = self.scrape();
            let count = |k: &str| samples.get(k).copied().unwrap_or(0.0);
            let settled = count("heron_answer_latency_seconds_count")
                == count("heron_response_size_bytes_count");
            if settled || std::time::Instant::now() > deadline {
                return samples;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    fn ctl_stats(&self) -> serde_json::Value {
        let out = Command::new(heron())
            .args(["ctl", "--socket"])
            .arg(self.server.dir().join("heron.sock"))
            .args(["stats", "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let response: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        response["data"].clone()
    }
}

/// One HTTP exchange: what the server wrote before closing.
fn http(to: SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(to).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let _ = stream.write_all(request);
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

fn samples(body: &str) -> HashMap<String, f64> {
    (body.lines())
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (key, value) = l.rsplit_once(' ').expect("name and value");
            (key.to_string(), value.parse().expect("a number"))
        })
        .collect()
}

/// How much `key` moved from `before` to `after` (absent: zero).
fn moved(before: &HashMap<String, f64>, after: &HashMap<String, f64>, key: &str) -> f64 {
    let get = |m: &HashMap<String, f64>| m.get(key).copied().unwrap_or(0.0);
    get(after) - get(before)
}

fn query(name: &str, qtype: RType) -> Vec<u8> {
    build_query(&Name::parse(name).unwrap(), qtype, &QueryOpts::default())
}

fn rcode(response: &[u8]) -> u8 {
    response[3] & 0xF
}

#[test]
fn counters_move_by_exactly_the_queries_sent() {
    let f = Fixture::start();
    let addr = f.server.addr();
    let soa = query(ORIGIN, RType::SOA);
    // The readiness check's bare TCP connection is accepted whenever the
    // server gets to it; a query answered on a later one means it has.
    heron_testkit::query_tcp(addr, &soa);
    let before = f.settled_scrape();
    let ctl_before = f.ctl_stats();

    let missing = query(&format!("no-such-name.{ORIGIN}"), RType::A);
    let elsewhere = query("example.org", RType::A);
    for _ in 0..5 {
        assert_eq!(rcode(&query_udp(addr, &soa)), 0);
    }
    for _ in 0..3 {
        assert_eq!(rcode(&query_udp(addr, &missing)), 3);
    }
    for _ in 0..2 {
        assert_eq!(rcode(&query_udp(addr, &elsewhere)), 5);
    }
    let four: Vec<Vec<u8>> = (0..4u16)
        .map(|id| {
            let mut q = soa.clone();
            q[..2].copy_from_slice(&(id + 100).to_be_bytes());
            q
        })
        .collect();
    let pipelined = query_tcp_pipelined(addr, &four);
    assert!(pipelined.iter().all(|r| rcode(r) == 0));
    for _ in 0..2 {
        let out = run_dig_with(DigTool::Kdig, f.tls, ORIGIN, "SOA", &["+tls"]);
        let out = out.expect_success().to_string();
        assert!(out.contains("NOERROR"), "{out}");
    }

    let after = f.settled_scrape();
    let moved = |key: &str| moved(&before, &after, key);
    let queries = |transport: &str, qtype: &str| {
        moved(&format!(
            "heron_queries_total{{transport=\"{transport}\",qtype=\"{qtype}\"}}"
        ))
    };
    assert_eq!(queries("udp", "SOA"), 5.0);
    assert_eq!(queries("udp", "A"), 5.0);
    assert_eq!(queries("tcp", "SOA"), 4.0);
    assert_eq!(queries("tls", "SOA"), 2.0);
    assert_eq!(queries("xdp", "SOA"), 0.0);
    let responses = |rcode: &str| moved(&format!("heron_responses_total{{rcode=\"{rcode}\"}}"));
    assert_eq!(responses("NOERROR"), 11.0);
    assert_eq!(responses("NXDOMAIN"), 3.0);
    assert_eq!(responses("REFUSED"), 2.0);
    assert_eq!(moved("heron_response_size_bytes_count"), 16.0);
    assert_eq!(moved("heron_answer_latency_seconds_count"), 16.0);
    assert!(moved("heron_response_size_bytes_sum") > 16.0 * 12.0);
    let accepted = |t: &str| {
        moved(&format!(
            "heron_tcp_connections_accepted_total{{transport=\"{t}\"}}"
        ))
    };
    assert_eq!(accepted("tcp"), 1.0);
    assert_eq!(accepted("tls"), 2.0);

    // What `heron ctl stats` says comes from the same counters.
    let ctl_after = f.ctl_stats();
    let ctl_moved = |section: &str, key: &str| {
        let get = |v: &serde_json::Value| v[section][key].as_u64().unwrap_or(0);
        get(&ctl_after) - get(&ctl_before)
    };
    assert_eq!(ctl_moved("queries", "udp"), 10);
    assert_eq!(ctl_moved("queries", "tcp"), 4);
    assert_eq!(ctl_moved("queries", "tls"), 2);
    assert_eq!(ctl_moved("responses", "REFUSED"), 2);
    assert_eq!(moved("heron_responses_truncated_total"), 0.0);

    // An answer too large for a client without EDNS goes out truncated:
    // counted, in the metrics and ctl stats (black-box finding: TC was
    // counted nowhere, where NSD and BIND count it).
    let big = query(&format!("bigtxt.{ORIGIN}"), RType::TXT);
    let answer = query_udp(addr, &big);
    assert_ne!(answer[2] & 0x02, 0, "TC");
    let later = f.settled_scrape();
    assert_eq!(
        crate::moved(&after, &later, "heron_responses_truncated_total"),
        1.0
    );
    let truncated = f.ctl_stats()["responses_truncated"].as_u64().unwrap();
    let before_truncated = ctl_before["responses_truncated"].as_u64().unwrap();
    assert_eq!(truncated - before_truncated, 1);

    // The kernel's drop counters and the process's memory are there.
    for name in [
        "heron_kernel_udp_receive_buffer_errors_total{ip=\"4\"}",
        "heron_kernel_udp_in_errors_total{ip=\"4\"}",
        "heron_kernel_tcp_listen_overflows_total{ip=\"any\"}",
        "heron_kernel_tcp_listen_drops_total{ip=\"any\"}",
        "heron_kernel_tcp_syncookies_sent_total{ip=\"any\"}",
    ] {
        assert!(after.contains_key(name), "{name} missing");
    }
    // The names every Prometheus client library exports.
    assert!(after["process_resident_memory_bytes"] > 1e6);
    assert!(after["process_virtual_memory_bytes"] >= after["process_resident_memory_bytes"]);
    assert!(after["process_cpu_seconds_total"] >= 0.0);
    assert!(after["process_start_time_seconds"] > 1.7e9);
    assert!(after["process_open_fds"] >= 3.0);
    assert!(after["process_max_fds"] >= after["process_open_fds"]);
    let version = format!(
        "heron_build_info{{version=\"{}\"}}",
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(after[&version], 1.0);
    // The zone as served.
    let serial = after[&format!("heron_zone_serial{{zone=\"{ORIGIN}.\"}}")];
    assert!(serial > 0.0);
    assert!(after[&format!("heron_zone_loaded_timestamp_seconds{{zone=\"{ORIGIN}.\"}}")] > 1e9);
}

#[test]
fn bad_requests_get_a_4xx_and_the_endpoint_goes_on() {
    let f = Fixture::start();
    let cases: [(&[u8], &str); 6] = [
        (b"GET /metrics\r\n\r\n", "400"),
        (
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
            "400",
        ),
        (b"POST /metrics HTTP/1.1\r\n\r\n", "405"),
        (b"GET /admin HTTP/1.1\r\n\r\n", "404"),
        (b"GET /metrics HTTP/3\r\n\r\n", "505"),
        (&[b'A'; 20_000], "431"),
    ];
    for (request, status) in cases {
        let answer = http(f.metrics, request);
        assert!(
            answer.starts_with(&format!("HTTP/1.0 {status} ")),
            "{:?}: {answer}",
            String::from_utf8_lossy(&request[..request.len().min(40)])
        );
    }
    // A client that connects and says nothing, one that goes away
    // mid-request: closed, and the next scrape is answered.
    drop(TcpStream::connect(f.metrics).unwrap());
    let mut half = TcpStream::connect(f.metrics).unwrap();
    half.write_all(b"GET /met").unwrap();
    drop(half);
    assert!(f.scrape().contains_key("process_start_time_seconds"));
}

/// Every metric name in docs/grafana-heron.json, without the suffixes
/// Prometheus adds to histograms.
fn dashboard_metrics() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/grafana-heron.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut exprs = Vec::new();
    collect_exprs(&dashboard, &mut exprs);
    assert!(exprs.len() >= 8, "the dashboard has panels: {exprs:?}");
    let mut names: Vec<String> = exprs
        .iter()
        .flat_map(|e| metric_names(e))
        .map(|n| {
            let base = ["_bucket", "_count", "_sum"]
                .iter()
                .find_map(|s| n.strip_suffix(s));
            base.unwrap_or(&n).to_string()
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

fn collect_exprs(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v.as_str()) {
                    ("expr", Some(expr)) => out.push(expr.to_string()),
                    _ => collect_exprs(v, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_exprs(v, out)),
        _ => {}
    }
}

/// The words of `expr` that begin `heron_` or `process_`.
fn metric_names(expr: &str) -> Vec<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("heron_") || w.starts_with("process_"))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_dashboard_uses_only_exported_metrics() {
    let f = Fixture::start();
    // One query of each transport the fixture has, so that every
    // labelled family has a sample.
    query_udp(f.server.addr(), &query(ORIGIN, RType::SOA));
    let answer = http(f.metrics, b"GET /metrics HTTP/1.0\r\n\r\n");
    let exported: Vec<&str> = (answer.lines())
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    let names = dashboard_metrics();
    for name in &names {
        // Counters are declared without `_total` and sampled with it,
        // info metrics likewise without `_info`.
        let declared = [name.strip_suffix("_total"), name.strip_suffix("_info")];
        assert!(
            exported.contains(&name.as_str())
                || declared.iter().flatten().any(|d| exported.contains(d)),
            "the dashboard uses {name}, which the server does not export ({exported:?})"
        );
    }
}

/// The metrics of a secondary zone: its transfers in and the NOTIFYs
/// that made them, as the refresh side counts them.
#[test]
fn a_secondary_zones_transfers_and_notifies_in_are_counted() {
    use heron_xfr::primary::notify::notify_message;
    let primary = heron_testkit::FakePrimary::start(&["xfr.test"], 7);
    let edge = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/differential/edge.test.zone");
    let metrics = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let server = ServerProcess::heron_with_config(&heron(), ORIGIN, |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\n\
             [metrics]\nlisten = \"{metrics}\"\n\
             [[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\n\
             [[zone]]\norigin = \"xfr.test\"\nfile = \"xfr.test.zone\"\nprimaries = [\"{}\"]\n",
            edge.display(),
            primary.addr()
        )
    });
    let scrape = || {
        let answer = http(metrics, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        samples(answer.split_once("\r\n\r\n").expect("a body").1)
    };
    let serial_key = "heron_zone_serial{zone=\"xfr.test.\"}";
    let until_serial = |serial: f64| {
        for _ in 0..600 {
            let now = scrape();
            if now.get(serial_key) == Some(&serial) {
                return now;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("serial {serial} never served: {}", server.log());
    };
    let first = until_serial(7.0);
    let count = |at: &HashMap<String, f64>, name: &str| {
        at.get(&format!("{name}{{zone=\"xfr.test.\",direction=\"in\"}}"))
            .copied()
    };
    assert_eq!(count(&first, "heron_zone_transfers_total"), Some(1.0));
    assert_eq!(count(&first, "heron_zone_notifies_total"), Some(0.0));

    primary.set_serial(8);
    let origin = Name::parse("xfr.test").unwrap();
    let soa = b"\x02ns\x00\x01h\x00\x00\x00\x00\x08\x00\x00\x0e\x10\x00\x00\x02\x58\x00\x01\x51\x80\x00\x00\x00\x3c";
    let notify = notify_message(&origin, &(300, soa.to_vec()), 0x4242);
    assert_eq!(rcode(&query_udp(server.addr(), &notify)), 0);
    let second = until_serial(8.0);
    assert_eq!(count(&second, "heron_zone_transfers_total"), Some(2.0));
    assert_eq!(
        count(&second, "heron_zone_transfer_failures_total"),
        Some(0.0)
    );
    assert_eq!(count(&second, "heron_zone_notifies_total"), Some(1.0));
    // The primary zone beside it counts nothing in.
    let edge_in = format!("heron_zone_transfers_total{{zone=\"{ORIGIN}.\",direction=\"in\"}}");
    assert_eq!(second.get(&edge_in), Some(&0.0));
}

/// A Heron with only the metrics endpoint, `[metrics]` given `extra`.
fn metrics_only(extra: &str) -> (ServerProcess, SocketAddr) {
    let edge = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/differential/edge.test.zone");
    let metrics = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let server = ServerProcess::heron_with_config(&heron(), ORIGIN, |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\n\
             [metrics]\nlisten = \"{metrics}\"\n{extra}\n\
             [[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\n",
            edge.display(),
        )
    });
    (server, metrics)
}

/// A connection to `to` from 127.0.0.`last`, reads bounded by a second.
fn connect_from(last: u8, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    socket.bind(&SocketAddr::from(([127, 0, 0, last], 0)).into())?;
    socket.connect_timeout(&to.into(), Duration::from_secs(5))?;
    let stream: TcpStream = socket.into();
    stream.set_read_timeout(Some(Duration::from_secs(1)))?;
    Ok(stream)
}

/// What a scrape from 127.0.0.`last` gets.
fn scrape_from(last: u8, to: SocketAddr) -> String {
    let mut stream = connect_from(last, to).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let _ = stream.write_all(b"GET /metrics HTTP/1.0\r\n\r\n");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

/// Whether the server closed `stream` (nothing more to read, or reset).
fn closed_by_server(stream: &mut TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 64];
    let closed = match stream.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false, // a 408: closed next
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    stream.set_nonblocking(false).unwrap();
    closed
}

/// From 127.0.0.`last` until `stop`: one more connection open than a
/// client's share, half silent, half sending a request a byte at a
/// time; each one closed is opened again. Returns the connections made.
fn hold_slots(last: u8, to: SocketAddr, stop: &std::sync::atomic::AtomicBool) -> usize {
    const SHARE_AND_ONE: usize = 5;
    let mut open: Vec<TcpStream> = Vec::new();
    let mut made = 0;
    // Bounded: the test ends it within a minute, and at most 10,000
    // connections are made in any case.
    while !stop.load(std::sync::atomic::Ordering::Relaxed) && made < 10_000 {
        open.retain_mut(|s| !closed_by_server(s));
        while open.len() < SHARE_AND_ONE {
            let Ok(stream) = connect_from(last, to) else {
                break;
            };
            made += 1;
            open.push(stream);
        }
        for slow in open.iter_mut().step_by(2) {
            let _ = slow.write_all(b"G");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    made
}

/// Issue 42: 16 slots, 4 per client, so 4 addresses kept the scraper out
/// (2 of 33 scrapes answered). Five addresses now hold what they can,
/// re-opening what is closed, and every scrape from a sixth is answered.
#[test]
fn a_scrape_is_answered_while_five_addresses_hold_every_slot() {
    let (server, metrics) = metrics_only("");
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let holders: Vec<_> = (2..=6)
            .map(|last| {
                let stop = &stop;
                s.spawn(move || hold_slots(last, metrics, stop))
            })
            .collect();
        // Every slot taken before the scrapes begin.
        std::thread::sleep(Duration::from_millis(500));
        let mut answered = 0;
        const SCRAPES: usize = 33;
        for _ in 0..SCRAPES {
            if scrape_from(1, metrics).starts_with("HTTP/1.0 200 OK") {
                answered += 1;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let made: usize = holders.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(answered, SCRAPES, "{made} held connections made");
        // The holders were kept busy: each made more than its share.
        assert!(made > 5 * 5, "{made}");
    });
    assert!(server.log().contains("metrics on http://"));
}

/// `[metrics] allow`: only those addresses are answered; the others are
/// closed at accept.
#[test]
fn only_the_allowed_addresses_are_answered() {
    let (_server, metrics) = metrics_only("allow = [\"127.0.0.2\", \"10.0.0.0/8\"]");
    let scrape_from = |last: u8| scrape_from(last, metrics);
    let allowed = scrape_from(2);
    assert!(allowed.starts_with("HTTP/1.0 200 OK"), "{allowed}");
    assert_eq!(scrape_from(1), "", "127.0.0.1 is not in the list");
    assert_eq!(scrape_from(3), "", "nor 127.0.0.3");
}

/// A malformed `[metrics] allow` entry stops the server's start and
/// `check-config`, with the file and the line.
#[test]
fn a_malformed_allow_entry_is_reported_with_its_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("heron.toml");
    for (entry, why) in [
        ("10.0.0.0/33", "prefix length must be 0 to 32"),
        ("scraper.example", "not an IP address or prefix"),
    ] {
        let text = format!(
            "[metrics]\nlisten = \"127.0.0.1:{}\"\nallow = [\"127.0.0.1\",\n  \"{entry}\"]\n",
            free_port()
        );
        std::fs::write(&config, text).unwrap();
        for command in ["check-config", "serve"] {
            let mut run = Command::new(heron());
            match command {
                "serve" => run.args(["serve", "--config"]),
                _ => run.arg(command),
            };
            let out = run.arg(&config).output().unwrap();
            let said = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{command} {entry}: {said}");
            // The line the list begins on, as TOML reports it.
            let path = config.display().to_string();
            assert!(
                said.contains(&path) && said.contains("line 3") && said.contains(why),
                "{command} {entry}: {said}"
            );
        }
    }
}

/// Issue 44: `promtool check metrics` (what CI pipelines run on a scrape)
/// failed on every counter, since OpenMetrics was served to clients that
/// did not ask for it. A client that names no format gets Prometheus's
/// text format, which promtool accepts without a complaint.
#[test]
fn a_plain_scrape_passes_promtool_check_metrics() {
    let f = Fixture::start();
    query_udp(f.server.addr(), &query(ORIGIN, RType::SOA));
    let answer = http(f.metrics, b"GET /metrics HTTP/1.0\r\n\r\n");
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
    assert!(
        head.contains("Content-Type: text/plain; version=0.0.4"),
        "{head}"
    );
    assert!(!body.contains("# EOF"), "{body}");
    assert!(
        body.lines()
            .any(|l| l == "# TYPE heron_queries_total counter"),
        "{body}"
    );
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus) is installed");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = promtool.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool: {said}\n{body}");
    assert_eq!(said.trim(), "", "promtool has complaints:\n{body}");
}

/// Issue 44: a secondary's freshness could not be alerted on. Its last
/// good check, expiry, failures in a row and whether it is served are
/// series of their own, present from the start, from a kept copy too.
#[test]
fn a_secondary_zones_health_is_exported_from_the_start_kept_copy_included() {
    let primary = heron_testkit::FakePrimary::start(&["xfr.test"], 7);
    let dir = tempfile::tempdir().unwrap();
    let edge = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/differential/edge.test.zone");
    let (port, metrics) = (free_port(), SocketAddr::from(([127, 0, 0, 1], free_port())));
    // A primary whose file never loads (black-box finding: it had no
    // series at all, so the alert on heron_zone_served could not fire).
    let broken = dir.path().join("broken.test.zone");
    std::fs::write(
        &broken,
        "@ 60 SOA ns1 h 1 2 3 4 5\n@ 60 NS ns1\nns1 60 A 1.2.3\n",
    )
    .unwrap();
    let config = format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\"]\n[metrics]\nlisten = \"{metrics}\"\n\
         [[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\n\
         [[zone]]\norigin = \"broken.test\"\nfile = \"{}\"\n\
         [[zone]]\norigin = \"xfr.test\"\nfile = \"{}\"\nprimaries = [\"{}\"]\n",
        edge.display(),
        broken.display(),
        dir.path().join("xfr.test.zone").display(),
        primary.addr()
    );
    let scrape = || {
        let answer = http(metrics, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        samples(answer.split_once("\r\n\r\n").expect("a body").1)
    };
    let of = |at: &HashMap<String, f64>, name: &str| {
        at.get(&format!("{name}{{zone=\"xfr.test.\"}}")).copied()
    };
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    };
    let started = now();
    let mut server = ServerProcess::heron_on_port(&heron(), port, "xfr.test", &config).unwrap();
    let mut first = scrape();
    for _ in 0..200 {
        if of(&first, "heron_zone_secondary_last_check_timestamp_seconds").is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        first = scrape();
    }
    let checked =
        of(&first, "heron_zone_secondary_last_check_timestamp_seconds").expect("a last check");
    assert!(
        checked >= started.floor() - 1.0 && checked <= now() + 1.0,
        "{checked} vs {started}"
    );
    assert!(of(&first, "heron_zone_secondary_expiry_timestamp_seconds").unwrap() > now());
    assert_eq!(of(&first, "heron_zone_secondary_check_failures"), Some(0.0));
    assert_eq!(of(&first, "heron_zone_secondary_primary_serial"), Some(7.0));
    assert_eq!(
        of(&first, "heron_zone_secondary_transferred_serial"),
        Some(7.0)
    );
    assert_eq!(of(&first, "heron_zone_served"), Some(1.0));
    let edge_served = format!("heron_zone_served{{zone=\"{ORIGIN}.\"}}");
    assert_eq!(first.get(&edge_served), Some(&1.0), "primaries too");
    let broken_served = "heron_zone_served{zone=\"broken.test.\"}";
    assert_eq!(
        first.get(broken_served),
        Some(&0.0),
        "a file that never loaded"
    );
    let failed = |zone: &str| {
        first
            .get(&format!("heron_zone_file_load_failed{{zone=\"{zone}\"}}"))
            .copied()
    };
    assert_eq!(failed("broken.test."), Some(1.0), "its load failed");
    assert_eq!(failed(&format!("{ORIGIN}.")), Some(0.0));
    assert_eq!(
        failed("xfr.test."),
        None,
        "a secondary zone has no file to load"
    );
    assert_eq!(
        first.get(&format!(
            "heron_zone_secondary_check_failures{{zone=\"{ORIGIN}.\"}}"
        )),
        None,
        "no secondary series for a primary zone"
    );

    // Restarted with its primary gone: served from the kept copy, and
    // every series there at once, the last check the kept copy's date.
    server.terminate().expect("stops");
    primary.set_hang_up(true);
    let server = ServerProcess::heron_on_port(&heron(), port, "xfr.test", &config).unwrap();
    let again = scrape();
    assert_eq!(
        of(&again, "heron_zone_served"),
        Some(1.0),
        "{}",
        server.log()
    );
    let kept = of(&again, "heron_zone_secondary_last_check_timestamp_seconds")
        .expect("from the kept copy");
    assert!((kept - checked).abs() <= 2.0, "{kept} vs {checked}");
    assert!(of(&again, "heron_zone_loaded_timestamp_seconds").is_some());
    assert!(of(&again, "heron_zone_secondary_expiry_timestamp_seconds").is_some());
    assert_eq!(
        of(&again, "heron_zone_secondary_primary_serial"),
        Some(7.0),
        "the kept copy's"
    );
    assert_eq!(
        of(&again, "heron_zone_secondary_transferred_serial"),
        Some(7.0),
        "the kept copy's"
    );
    // Its checks fail now (one asked for by a NOTIFY, as the primary
    // would send); the last good one stays where it was.
    let origin = Name::parse("xfr.test").unwrap();
    let soa = b"\x02ns\x00\x01h\x00\x00\x00\x00\x08\x00\x00\x0e\x10\x00\x00\x02\x58\x00\x01\x51\x80\x00\x00\x00\x3c";
    let notify = heron_xfr::primary::notify::notify_message(&origin, &(300, soa.to_vec()), 0x4343);
    assert_eq!(rcode(&query_udp(server.addr(), &notify)), 0);
    let mut failing = again;
    for _ in 0..300 {
        if of(&failing, "heron_zone_secondary_check_failures").is_some_and(|n| n >= 1.0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        failing = scrape();
    }
    assert!(
        of(&failing, "heron_zone_secondary_check_failures").unwrap() >= 1.0,
        "{}",
        server.log()
    );
    assert_eq!(
        of(
            &failing,
            "heron_zone_secondary_last_check_timestamp_seconds"
        ),
        Some(kept)
    );
}

/// `promtool` run from docs/ with `args`; its output when it fails.
fn promtool_in_docs(args: &[&str]) -> Result<(), String> {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let out = Command::new("promtool")
        .args(args)
        .current_dir(&docs)
        .output()
        .expect("promtool (Debian package prometheus) is installed");
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}

/// The alert rules docs/operations.md ships: valid, right against the
/// recorded series of docs/heron-alerts.test.yml, and naming only
/// metrics a server with a secondary zone exports.
#[test]
fn the_shipped_alert_rules_pass_promtool_and_use_exported_metrics() {
    promtool_in_docs(&["check", "rules", "heron-alerts.yml"]).unwrap();
    promtool_in_docs(&["test", "rules", "heron-alerts.test.yml"]).unwrap();
    let primary = heron_testkit::FakePrimary::start(&["xfr.test"], 7);
    let metrics = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let server = ServerProcess::heron_with_config(&heron(), "xfr.test", |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\n[metrics]\nlisten = \"{metrics}\"\n\
             [[zone]]\norigin = \"xfr.test\"\nfile = \"xfr.test.zone\"\nprimaries = [\"{}\"]\n",
            primary.addr()
        )
    });
    let answer = http(metrics, b"GET /metrics HTTP/1.0\r\n\r\n");
    let exported: Vec<&str> = (answer.lines())
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    let rules_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/heron-alerts.yml");
    let rules = std::fs::read_to_string(rules_path).unwrap();
    let exprs = rules.lines().filter(|l| !l.trim_start().starts_with('#'));
    let names: std::collections::BTreeSet<String> = exprs.flat_map(metric_names).collect();
    assert!(names.len() >= 5, "{names:?}");
    for name in &names {
        assert!(
            exported.contains(&name.as_str()),
            "the rules use {name}, which the server does not export: {}",
            server.log()
        );
    }
}

/// A Prometheus server (Debian's `prometheus`) scraping `target` every
/// second, its data in `dir`; its HTTP address. Ended on drop.
struct Prometheus {
    child: std::process::Child,
    web: SocketAddr,
}

impl Prometheus {
    fn start(dir: &Path, target: SocketAddr) -> Prometheus {
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: heron\n    static_configs:\n      \
                 - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let web = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={web}"))
            .arg("--log.level=error")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("prometheus (Debian package prometheus) is installed");
        Prometheus { child, web }
    }

    /// The result of an instant query, once Prometheus answers (a JSON
    /// `data.result` array), or its error.
    fn query(&self, expr: &str) -> Result<Vec<serde_json::Value>, String> {
        let encoded: String = expr
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        let request = format!("GET /api/v1/query?query={encoded} HTTP/1.0\r\nHost: x\r\n\r\n");
        let Ok(mut stream) = TcpStream::connect(self.web) else {
            return Err("not listening yet".into());
        };
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let _ = stream.write_all(request.as_bytes());
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        let json: serde_json::Value =
            serde_json::from_str(body).map_err(|e| format!("{e}: {answer}"))?;
        match json["status"].as_str() {
            Some("success") => Ok(json["data"]["result"]
                .as_array()
                .cloned()
                .unwrap_or_default()),
            _ => Err(format!("{expr}: {json}")),
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The value of a vector sample.
fn value_of(sample: &serde_json::Value) -> f64 {
    sample["value"][1].as_str().unwrap().parse().unwrap()
}

/// Issue 44: the dashboard's latency and size panels were meaningless and
/// nothing evaluated its queries. A real Prometheus scrapes a server that
/// answers UDP and TCP queries, and every query of
/// docs/grafana-heron.json is evaluated by it: each one parses and runs,
/// the panels about queries, latency, size, connections, memory and zones
/// have series, and the quantiles are within the buckets' range, far
/// below the top bucket where the double-counted histograms put p99.
#[test]
fn the_dashboards_queries_evaluate_against_a_live_scrape() {
    let f = Fixture::start();
    let addr = f.server.addr();
    let dir = tempfile::tempdir().unwrap();
    let prometheus = Prometheus::start(dir.path(), f.metrics);
    let soa = query(ORIGIN, RType::SOA);
    let mut exprs = Vec::new();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/grafana-heron.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    collect_exprs(&dashboard, &mut exprs);
    let ready = |p: &Prometheus| {
        p.query("count_over_time(up[30s])")
            .is_ok_and(|r| r.first().is_some_and(|s| value_of(s) >= 8.0))
    };
    // Queries all along, so that every rate has something to see.
    for _ in 0..300 {
        for _ in 0..5 {
            query_udp(addr, &soa);
        }
        heron_testkit::query_tcp(addr, &soa);
        if ready(&prometheus) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(ready(&prometheus), "Prometheus never scraped 8 times");
    let mut results = HashMap::new();
    for expr in &exprs {
        let concrete = expr
            .replace("$__rate_interval", "10s")
            .replace("$instance", ".*");
        let result = prometheus
            .query(&concrete)
            .unwrap_or_else(|e| panic!("{e}"));
        results.insert(expr.as_str(), result);
    }
    let of = |needle: &str| -> Vec<&serde_json::Value> {
        let matching: Vec<_> = (results.iter())
            .filter(|(e, _)| e.contains(needle))
            .flat_map(|(_, r)| r.iter())
            .collect();
        assert!(!matching.is_empty(), "no series for {needle}: {results:#?}");
        matching
    };
    let by_transport = of("sum by (transport) (rate(heron_queries_total");
    for transport in ["udp", "tcp"] {
        let rate = (by_transport.iter())
            .find(|s| s["metric"]["transport"] == transport)
            .map(|s| value_of(s));
        assert!(
            rate.is_some_and(|r| r > 0.0),
            "{transport}: {by_transport:?}"
        );
    }
    let p50 = value_of(of("histogram_quantile(0.5, sum by (le) (rate(heron_answer_latency")[0]);
    assert!(p50 > 0.0 && p50 < 0.1, "p50 latency {p50} s");
    let p99 = value_of(of("histogram_quantile(0.99, sum by (le) (rate(heron_answer_latency")[0]);
    assert!(p99 > 0.0 && p99 < 0.5, "p99 latency {p99} s");
    for quantile in ["0.5", "0.99"] {
        let size = of(&format!(
            "histogram_quantile({quantile}, sum by (le) (rate(heron_response_size"
        ));
        let size = value_of(size[0]);
        // Every answer is the zone's SOA: one small bucket, not the top.
        assert!((32.0..=256.0).contains(&size), "p{quantile} size {size}");
    }
    for needle in [
        "responses_total",
        "heron_tcp_connections_open",
        "process_resident_memory_bytes",
        "process_start_time_seconds",
        "heron_zone_serial",
        "heron_zone_info",
    ] {
        of(needle);
    }
    let serial = of("heron_zone_serial");
    assert!(
        serial.iter().any(|s| s["metric"]["zone"] == "edge.test."),
        "{serial:?}"
    );
}

/// With `zone-metrics = false` (a server of very many zones) no zone has
/// series of its own, but the zones in each state an operator acts on
/// are counted, so that its alerts still fire (black-box finding: every
/// zone alert went silent).
#[test]
fn zones_in_trouble_are_counted_without_zone_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let (port, metrics) = (free_port(), SocketAddr::from(([127, 0, 0, 1], free_port())));
    let good = dir.path().join("good.test.zone");
    std::fs::write(
        &good,
        "@ 60 SOA ns1 h 1 2 3 4 5\n@ 60 NS ns1\nns1 60 A 192.0.2.1\n",
    )
    .unwrap();
    let broken = dir.path().join("broken.test.zone");
    std::fs::write(
        &broken,
        "@ 60 SOA ns1 h 1 2 3 4 5\n@ 60 NS ns1\nns1 60 A 1.2.3\n",
    )
    .unwrap();
    let config = format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\"]\n[metrics]\nlisten = \"{metrics}\"\nzone-metrics = false\n\
         [[zone]]\norigin = \"good.test\"\nfile = \"{}\"\n\
         [[zone]]\norigin = \"broken.test\"\nfile = \"{}\"\n",
        good.display(),
        broken.display()
    );
    let server = ServerProcess::heron_on_port(&heron(), port, "good.test", &config).unwrap();
    let scrape = || {
        let answer = http(metrics, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        answer.split_once("\r\n\r\n").expect("a body").1.to_string()
    };
    let state = |body: &str, s: &str| {
        let at = samples(body);
        at.get(&format!("heron_zones_unhealthy{{state=\"{s}\"}}"))
            .copied()
    };
    let body = scrape();
    assert!(
        !body.contains("heron_zone_served"),
        "no per-zone series:\n{body}"
    );
    // The file that never loaded is not served, and counted so alone
    // (black-box finding DE-6: counted twice, it alerted twice).
    assert_eq!(state(&body, "not_served"), Some(1.0), "{body}");
    assert_eq!(state(&body, "file_load_failed"), Some(0.0), "{body}");
    assert_eq!(state(&body, "checks_failing"), Some(0.0), "{body}");
    assert_eq!(state(&body, "catalog_rejected"), Some(0.0), "{body}");
    // A bad edit of the good zone: its older version stays served.
    std::fs::write(
        &good,
        "@ 60 SOA ns1 h 2 2 3 4 5\n@ 60 NS ns1\nns1 60 A 1.2\n",
    )
    .unwrap();
    server.reload();
    let failed = || state(&scrape(), "file_load_failed") == Some(1.0);
    assert!(
        heron_testkit::eventually_within(std::time::Duration::from_secs(20), failed),
        "{}",
        scrape()
    );
    assert_eq!(state(&scrape(), "not_served"), Some(1.0));
}

/// Black-box finding AJ-5: a zone removed by a reload after it was
/// transferred out stayed in the metrics, as a primary not served, and
/// counted in `heron_zones_unhealthy{state="not_served"}`: the shipped
/// alerts fired for a zone the operator removed. Once removed, its
/// series are gone, as on a fresh start.
#[test]
fn a_zone_removed_by_a_reload_leaves_the_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let (port, metrics) = (free_port(), SocketAddr::from(([127, 0, 0, 1], free_port())));
    let socket = dir.path().join("heron.sock");
    let zone = |origin: &str| {
        let path = dir.path().join(format!("{origin}.zone"));
        std::fs::write(
            &path,
            "@ 60 SOA ns1 h 1 2 3 4 5\n@ 60 NS ns1\nns1 60 A 192.0.2.1\n",
        )
        .unwrap();
        format!(
            "[[zone]]\norigin = \"{origin}\"\nfile = \"{}\"\nallow-transfer = [\"127.0.0.1\"]\n",
            path.display()
        )
    };
    let head = format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\"]\ncontrol = \"{}\"\n\
         [metrics]\nlisten = \"{metrics}\"\n{}",
        socket.display(),
        zone("a.test")
    );
    let config = format!("{head}{}", zone("j.test"));
    let server = ServerProcess::heron_on_port(&heron(), port, "j.test", &config).unwrap();
    let axfr = run_dig_with(DigTool::Dig, server.addr(), "j.test", "AXFR", &[]);
    assert_eq!(
        axfr.expect_success().matches("\tSOA\t").count(),
        2,
        "{axfr}"
    );
    let scrape = || {
        let answer = http(metrics, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        answer.split_once("\r\n\r\n").expect("a body").1.to_string()
    };
    let before = scrape();
    assert!(
        before.contains("heron_zone_info{zone=\"j.test.\",role=\"primary\"} 1"),
        "{before}"
    );
    std::fs::write(server.dir().join("heron.toml"), &head).unwrap();
    let (ok, answer) = heron_testkit::heron_reconfigure(&heron(), &socket);
    assert!(
        ok && answer.contains("primary zones removed: j.test."),
        "{answer}"
    );
    let after = scrape();
    assert!(!after.contains("zone=\"j.test.\""), "{after}");
    assert!(after.contains("zone=\"a.test.\""), "{after}");
    let at = samples(&after);
    assert_eq!(
        at.get("heron_zones_unhealthy{state=\"not_served\"}"),
        Some(&0.0),
        "{after}"
    );
}
