//! dig and kdig against Heron serving the differential edge-case zone:
//! each query over UDP and TCP must exit 0, show the expected status and
//! print no warning, error or "malformed" line. The same check against NSD
//! validates the expectations themselves.

use std::path::PathBuf;

use heron_testkit::{ServerProcess, ToolQuery, check_with_dig_and_kdig};

const ORIGIN: &str = "edge.test.";

fn zones() -> [(&'static str, PathBuf); 1] {
    let zone =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/differential/edge.test.zone");
    [(ORIGIN, zone)]
}

/// (relative name, type, status, TC without EDNS, TC at EDNS 1232).
const QUERIES: &[(&str, &str, &str, bool, bool)] = &[
    ("@", "SOA", "NOERROR", false, false),
    ("@", "NS", "NOERROR", false, false),
    ("@", "MX", "NOERROR", false, false),
    ("www", "A", "NOERROR", false, false),
    ("www", "AAAA", "NOERROR", false, false),
    ("_sip._tcp", "SRV", "NOERROR", false, false),
    ("txt", "TXT", "NOERROR", false, false),
    ("medtxt", "TXT", "NOERROR", true, false),
    ("bigtxt", "TXT", "NOERROR", true, true),
    ("foo.wild", "A", "NOERROR", false, false),
    ("specific.wild", "TXT", "NOERROR", false, false),
    ("nx.sub.wild", "A", "NXDOMAIN", false, false),
    ("nx.mxonly", "MX", "NOERROR", false, false),
    ("nx.cnamewild", "A", "NOERROR", false, false),
    ("c.ent", "A", "NOERROR", false, false),
    ("nx.c.ent", "A", "NXDOMAIN", false, false),
    ("chain1", "A", "NOERROR", false, false),
    ("extcname", "A", "NOERROR", false, false),
    ("loop1", "A", "NOERROR", false, false),
    ("dangling", "A", "NXDOMAIN", false, false),
    ("dname", "DNAME", "NOERROR", false, false),
    ("x.dname", "A", "NOERROR", false, false),
    ("nx.dname", "A", "NXDOMAIN", false, false),
    ("sub", "A", "NOERROR", false, false),
    ("nx.sub", "A", "NOERROR", false, false),
    ("noglue", "NS", "NOERROR", false, false),
    ("secure", "DS", "NOERROR", false, false),
    ("unknown", "TYPE65280", "NOERROR", false, false),
    ("generic", "A", "NOERROR", false, false),
    ("MiXeD", "A", "NOERROR", false, false),
    (r"esc\.aped", "A", "NOERROR", false, false),
    (r"sp\032ace", "A", "NOERROR", false, false),
    ("caa", "CAA", "NOERROR", false, false),
    ("sshfp", "SSHFP", "NOERROR", false, false),
    ("_443._tcp.www", "TLSA", "NOERROR", false, false),
    ("svcb", "SVCB", "NOERROR", false, false),
    ("https", "HTTPS", "NOERROR", false, false),
    ("naptr", "NAPTR", "NOERROR", false, false),
    ("loc", "LOC", "NOERROR", false, false),
    ("hinfo", "HINFO", "NOERROR", false, false),
    ("rp", "RP", "NOERROR", false, false),
    ("nx", "A", "NXDOMAIN", false, false),
    ("www", "PTR", "NOERROR", false, false),
    ("example.com.", "A", "REFUSED", false, false),
];

fn absolute(name: &str) -> String {
    match name {
        "@" => ORIGIN.to_string(),
        n if n.ends_with('.') => n.to_string(),
        n => format!("{n}.{ORIGIN}"),
    }
}

fn check_all(server: &ServerProcess) {
    let names: Vec<String> = QUERIES.iter().map(|q| absolute(q.0)).collect();
    let mut failures = Vec::new();
    for (q, qname) in QUERIES.iter().zip(&names) {
        let query = ToolQuery {
            qname,
            qtype: q.1,
            status: q.2,
            tc_at_512: q.3,
            tc_at_1232: q.4,
        };
        failures.extend(check_with_dig_and_kdig(server.addr(), &query));
    }
    assert!(
        failures.is_empty(),
        "{} of {} dig/kdig runs against {} failed:\n\n{}",
        failures.len(),
        QUERIES.len() * 4,
        server.kind(),
        failures.join("\n\n")
    );
}

#[test]
fn dig_and_kdig_accept_heron() {
    let heron = ServerProcess::heron(&PathBuf::from(env!("CARGO_BIN_EXE_heron")), &zones());
    check_all(&heron);
}

/// The expectations above hold for NSD, the primary reference.
#[test]
fn dig_and_kdig_accept_nsd() {
    let nsd = ServerProcess::nsd(&zones());
    check_all(&nsd);
}
