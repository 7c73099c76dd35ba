//! The reference servers start, answer over UDP and TCP, and are gone
//! (with every process they forked) once dropped.

use std::path::PathBuf;

use heron_proto::{Name, RType};
use heron_testkit::{
    QueryOpts, ServerProcess, build_query, live_group_members, normalize, query_tcp, query_udp,
};

const ZONE: &str = "$ORIGIN tk.test.\n$TTL 300\n\
@ SOA ns.tk.test. admin.tk.test. 1 3600 600 86400 60\n\
@ NS ns\nns A 192.0.2.1\nwww A 192.0.2.80\n";

/// A zone file in the temp dir, removed on drop.
struct ZoneFile(PathBuf);

impl Drop for ZoneFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn zone_file(tag: &str) -> ZoneFile {
    let path = std::env::temp_dir().join(format!("heron-tk-{tag}-{}.zone", std::process::id()));
    std::fs::write(&path, ZONE).unwrap();
    ZoneFile(path)
}

fn exercise(server: ServerProcess) {
    let www = Name::parse("WWW.tk.test").unwrap();
    let opts = QueryOpts {
        id: 77,
        ..QueryOpts::default()
    };
    let q = build_query(&www, RType::A, &opts);
    for resp in [query_udp(server.addr(), &q), query_tcp(server.addr(), &q)] {
        let n = normalize(&resp).unwrap();
        assert_eq!(n.rcode, "NOERROR", "{}", server.log());
        assert_eq!(n.question, "WWW.tk.test. IN A");
        assert_eq!(n.answer.len(), 1, "{n}");
    }
    assert!(!server.log().is_empty());
    let pid = server.pid().unwrap();
    let dir = server.dir().to_path_buf();
    assert!(!live_group_members(pid).is_empty());
    drop(server);
    assert!(
        live_group_members(pid).is_empty(),
        "processes left in group {pid}"
    );
    assert!(!dir.exists(), "temp dir {} left behind", dir.display());
}

#[test]
fn nsd_starts_answers_and_stops() {
    let zone = zone_file("nsd");
    exercise(ServerProcess::nsd(&[("tk.test", &zone.0)]));
}

#[test]
fn knot_starts_answers_and_stops() {
    let zone = zone_file("knot");
    exercise(ServerProcess::knot(&[("tk.test.", &zone.0)]));
}

#[test]
fn bind_starts_answers_and_stops() {
    let zone = zone_file("bind");
    exercise(ServerProcess::bind(&[("tk.test.", &zone.0)]));
}

#[test]
fn pipelined_tcp_matches_responses_to_queries() {
    let zone = zone_file("pipe");
    let server = ServerProcess::nsd(&[("tk.test.", &zone.0)]);
    let names = ["www.tk.test", "ns.tk.test", "nx.tk.test", "tk.test"];
    let queries: Vec<Vec<u8>> = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let opts = QueryOpts {
                id: 1000 + i as u16,
                ..QueryOpts::default()
            };
            build_query(&Name::parse(n).unwrap(), RType::A, &opts)
        })
        .collect();
    let responses = heron_testkit::query_tcp_pipelined(server.addr(), &queries);
    for (name, resp) in names.iter().zip(&responses) {
        let n = normalize(resp).unwrap();
        assert_eq!(n.question, format!("{name}. IN A"));
    }
    assert_eq!(normalize(&responses[2]).unwrap().rcode, "NXDOMAIN");
    drop(server);
}

#[test]
fn missing_zone_file_panics_with_its_path() {
    let err = std::panic::catch_unwind(|| {
        ServerProcess::nsd(&[("tk.test.", "/nonexistent/tk.zone")]);
    })
    .unwrap_err();
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("/nonexistent/tk.zone"), "{msg}");
}
