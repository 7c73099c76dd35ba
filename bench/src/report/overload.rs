//! The overload section: each DNS server offered a multiple of its
//! capacity, over UDP and TCP ([`crate::results::Overload`]).

use super::template::{fill, lines};
use crate::results::{MAX_LOSS_PCT, OverloadRun, OverloadServer, Results};

/// Targets (issue 24): the share of capacity answered during the
/// overload, and the most RSS may have grown once it is over.
pub const ANSWERED_SHARE: f64 = 0.9;
pub const RSS_GROWTH: f64 = 0.1;

/// The section, or nothing when the run had no overload phase.
pub fn section(r: &Results) -> String {
    let Some(o) = &r.overload else {
        return String::new();
    };
    let rows = o.servers.iter().flat_map(|s| {
        [("UDP", &s.udp), ("TCP", &s.tcp)]
            .into_iter()
            .filter_map(move |(t, run)| Some(row(s, t, run.as_ref()?)))
    });
    let ended = o.servers.iter().map(|s| {
        let state = match (s.alive, s.answers_at_end) {
            (true, true) => "running and answering",
            (true, false) => "**running, not answering**",
            (false, _) => "**exited**",
        };
        format!("{}: {state}", s.server)
    });
    let errors = o
        .servers
        .iter()
        .flat_map(|s| s.errors.iter().map(move |e| format!("* {}: {e}", s.server)));
    fill(
        "overload",
        &[
            ("factor", format!("{}", o.factor)),
            ("seconds", format!("{}", o.seconds)),
            ("quota_pct", format!("{:.0}", r.meta.quota * 100.0)),
            ("windows", lines_count(o.servers.first())),
            ("window_s", format!("{}", o.window_s)),
            ("recovery_pct", format!("{:.0}", o.recovery_share * 100.0)),
            ("max_loss_pct", format!("{MAX_LOSS_PCT}")),
            ("answered_pct", format!("{:.0}", ANSWERED_SHARE * 100.0)),
            ("growth_pct", format!("{:.0}", RSS_GROWTH * 100.0)),
            ("rows", lines(rows)),
            ("ended", ended.collect::<Vec<_>>().join("; ")),
            ("errors", lines(errors)),
        ],
    )
}

/// How many recovery windows the runs had.
fn lines_count(s: Option<&OverloadServer>) -> String {
    let n = s
        .and_then(|s| s.udp.as_ref().or(s.tcp.as_ref()))
        .map_or(0, |r| r.recovery.len());
    n.to_string()
}

fn row(s: &OverloadServer, transport: &str, r: &OverloadRun) -> String {
    let mib = |kib: u64| format!("{:.1}", kib as f64 / 1024.0);
    let clean = match r.windows_to_recover() {
        Some(n) => n.to_string(),
        None => "none".into(),
    };
    format!(
        "| {} | {transport} | {} | {:.0} | {} | {:.0} / {:.0} | {} | {:.0} | {:.0} ({:.0}%) | {:.0} | {} | {clean} | {} / {} / {} | {} |",
        s.server,
        r.connections,
        r.quota * 100.0,
        capacity(r),
        r.target_qps,
        r.offered_qps,
        slots_taken(r),
        r.generator_cpu_share * 100.0,
        r.answered_qps,
        r.answered_share() * 100.0,
        r.server_cpu_share * 100.0,
        r.lost_after(),
        mib(r.rss_before_kib),
        mib(r.rss_peak_kib),
        mib(r.rss_after_kib),
        if met(s, r) { "yes" } else { "no" }
    )
}

/// The capacity, and over UDP the two figures it is the higher of.
fn capacity(r: &OverloadRun) -> String {
    match r.connections {
        0 => format!(
            "{:.0} ({:.0} / {:.0})",
            r.capacity_qps, r.capacity_closed_qps, r.capacity_open_qps
        ),
        _ => format!("{:.0}", r.capacity_qps),
    }
}

/// Over TCP, the share of the overload the server held every slot.
fn slots_taken(r: &OverloadRun) -> String {
    match r.connections {
        0 => "".into(),
        _ => format!("{:.0}", r.slots_taken_share * 100.0),
    }
}

/// Whether a run meets every target: answered share, recovery in the
/// first window, memory back within [`RSS_GROWTH`], server still there.
pub fn met(s: &OverloadServer, r: &OverloadRun) -> bool {
    s.alive
        && r.answered_share() >= ANSWERED_SHARE
        && r.windows_to_recover() == Some(1)
        && r.rss_after_kib as f64 <= r.rss_before_kib as f64 * (1.0 + RSS_GROWTH)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(answered: f64, recovery: Vec<(u64, u64)>, rss_after: u64) -> OverloadRun {
        OverloadRun {
            capacity_qps: 100_000.0,
            answered_qps: answered,
            recovery,
            rss_before_kib: 10_000,
            rss_after_kib: rss_after,
            ..OverloadRun::default()
        }
    }

    #[test]
    fn each_target_can_fail_the_run() {
        let s = OverloadServer {
            alive: true,
            ..OverloadServer::default()
        };
        let clean = vec![(50_000, 0), (50_000, 0)];
        assert!(met(&s, &run(90_000.0, clean.clone(), 11_000)));
        assert!(!met(&s, &run(89_000.0, clean.clone(), 10_000)), "answered");
        assert!(!met(&s, &run(95_000.0, clean.clone(), 11_001)), "memory");
        let late = vec![(50_000, 51), (50_000, 0)];
        assert_eq!(run(95_000.0, late.clone(), 0).windows_to_recover(), Some(2));
        assert!(!met(&s, &run(95_000.0, late, 10_000)), "recovery");
        let gone = OverloadServer::default();
        assert!(!met(&gone, &run(95_000.0, clean, 10_000)), "exited");
    }

    #[test]
    fn a_row_shows_the_quota_and_what_each_transport_adds() {
        let s = OverloadServer {
            server: "Heron".into(),
            alive: true,
            ..OverloadServer::default()
        };
        let udp = OverloadRun {
            quota: 0.4,
            capacity_closed_qps: 95_000.0,
            capacity_open_qps: 100_000.0,
            ..run(95_000.0, vec![(50_000, 0)], 10_000)
        };
        let row_udp = row(&s, "UDP", &udp);
        assert!(
            row_udp.starts_with("| Heron | UDP | 0 | 40 | 100000 (95000 / 100000) |"),
            "{row_udp}"
        );
        let tcp = OverloadRun {
            connections: 10_000,
            quota: 0.1,
            slots_taken_share: 0.97,
            ..run(95_000.0, vec![(50_000, 0)], 10_000)
        };
        let row_tcp = row(&s, "TCP", &tcp);
        assert!(
            row_tcp.starts_with("| Heron | TCP | 10000 | 10 | 100000 | 0 / 0 | 97 |"),
            "{row_tcp}"
        );
        assert!(row_tcp.ends_with("| yes |"), "{row_tcp}");
    }

    #[test]
    fn lost_after_sums_every_window() {
        let r = run(0.0, vec![(100, 7), (100, 0), (0, 0)], 0);
        assert_eq!(r.lost_after(), 7);
        assert_eq!(run(0.0, vec![(0, 0)], 0).windows_to_recover(), None);
    }
}
