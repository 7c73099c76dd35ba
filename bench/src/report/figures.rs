//! Lookups into the results and the number formats the report uses.

use crate::results::{Phase, Results, RunResult, Spread};

/// The DNS servers Heron is compared with.
pub const PEERS: [&str; 3] = ["NSD", "Knot", "BIND"];
/// Every server, in the order of the tables' columns (template.md's
/// table headers list them in this order).
pub const SERVERS: [&str; 5] = ["reflector", "Heron", "NSD", "Knot", "BIND"];

/// The run of `server` on `workload`, if it ended without an error.
pub fn run<'a>(r: &'a Results, server: &str, workload: &str) -> Option<&'a RunResult> {
    r.runs
        .iter()
        .find(|x| x.server == server && x.workload == workload && x.error.is_none())
}

/// The capacity figures of `server` on `workload`.
pub fn capped<'a>(r: &'a Results, server: &str, workload: &str) -> Option<&'a Phase> {
    run(r, server, workload).and_then(|x| x.capped.as_ref())
}

/// The one of `peers` with the highest capacity on `workload`.
pub fn best_peer<'a>(r: &'a Results, workload: &str, peers: &[&'a str]) -> Option<(&'a str, f64)> {
    peers
        .iter()
        .filter_map(|p| capped(r, p, workload).map(|c| (*p, c.per_cpu_s.median)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// 10000 as "10,000".
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A rate in thousands: "12k", "1.5k", "800".
pub fn k(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 1000.0 {
        format!("{:.1}k", v / 1000.0)
    } else {
        format!("{v:.0}")
    }
}

/// Median (min–max).
pub fn spread(s: &Spread) -> String {
    format!("{} ({}–{})", k(s.median), k(s.min), k(s.max))
}

/// The workloads of the run, in report order, with their titles.
pub fn workloads(r: &Results) -> Vec<(String, String)> {
    r.meta.workload_titles.clone()
}

/// A server's startup time: the median of its starts, with their range
/// when there was more than one.
pub fn startup_cell(x: &RunResult) -> String {
    match x.startup {
        Some(s) if s.n > 1 => format!("{:.2} ({:.2}–{:.2})", s.median, s.min, s.max),
        _ => format!("{:.2}", x.startup_s),
    }
}

/// "error" where the run of `server` on `workload` failed, else "–".
pub fn error_cell(r: &Results, server: &str, workload: &str) -> String {
    match r
        .runs
        .iter()
        .find(|x| x.server == server && x.workload == workload)
    {
        Some(x) if x.error.is_some() => "error".into(),
        _ => "–".into(),
    }
}
