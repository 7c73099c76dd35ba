//! The cost matrix's section: one table per transport of Heron's server
//! CPU per answered query against the best peer's, per cell, and every
//! server's figures beside it.

use super::figures::spread;
use super::template::{fill, lines};
use crate::results::{CostCell, CostMatrix, CostServer, CostTrial, Results};
use crate::stats::Spread;

/// Heron's target in every cell: at most this times the best peer.
pub const TARGET_VS_PEER: f64 = 0.8;

const HERON: &str = "Heron";
const PACED: &str = "Heron, paced";

/// The section, or nothing when the run had no matrix.
pub fn section(r: &Results) -> String {
    let Some(m) = &r.cost_matrix else {
        return String::new();
    };
    let mut tables: Vec<String> = ["udp", "tcp", "dot"]
        .into_iter()
        .filter(|t| m.cells.iter().any(|c| c.transport == *t))
        .map(|t| transport_table(m, t))
        .collect();
    if !m.idle_tls.is_empty() {
        tables.push(idle_tls_table(m));
    }
    if m.cells.iter().any(|c| c.transport == "xdp") {
        tables.push(xdp_table(m));
    }
    let max_rates = m
        .max_rates
        .iter()
        .map(|(w, workers, rate)| match rate {
            0.0 => format!("{w} ({workers} worker(s)): none"),
            _ => format!("{w} ({workers} worker(s)): {rate:.0} q/s"),
        })
        .collect::<Vec<_>>()
        .join("; ");
    let errors = m.errors.iter().map(|e| format!("* error: {e}"));
    fill(
        "cost_matrix",
        &[
            ("trials", m.trials.to_string()),
            ("trial_s", format!("{}", m.trial_s)),
            ("idle_busy_pct", format!("{:.0}", m.idle_busy_share * 100.0)),
            ("target", format!("{TARGET_VS_PEER}")),
            ("max_rates", max_rates),
            ("tables", tables.concat()),
            ("detail", detail(m)),
            ("errors", lines(errors)),
        ],
    )
}

fn transport_table(m: &CostMatrix, transport: &str) -> String {
    let cells: Vec<&CostCell> = m
        .cells
        .iter()
        .filter(|c| c.transport == transport)
        .collect();
    let rows = cells.iter().map(|c| {
        let vs_peer = per_round(c, |round| {
            Some(us(c, HERON, round)? / best_peer_us(c, round)?.1)
        });
        // The default has every tuning knob off; this shows what turning
        // pacing on would do (above 1: pacing is cheaper).
        let vs_paced = per_round(c, |round| Some(us(c, HERON, round)? / us(c, PACED, round)?));
        let vs_floor = per_round(c, |round| {
            let floor = c.servers.iter().find(|s| is_floor(&s.name))?;
            Some(us(c, HERON, round)? / us(c, &floor.name, round)?)
        });
        let best = best_peer_name(c);
        let met = match vs_peer.n {
            0 => "–",
            _ if vs_peer.median <= TARGET_VS_PEER => "yes",
            _ => "no",
        };
        format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            shape(c),
            clients(c),
            c.generator,
            rate(c),
            ratio(&vs_peer),
            best,
            ratio(&vs_floor),
            if transport == "udp" {
                ratio(&vs_paced)
            } else {
                "–".into()
            },
            met
        )
    });
    let title = match transport {
        "dot" => "DNS over TLS (Knot 3.2 serves none: no Knot column)".to_string(),
        t => t.to_uppercase(),
    };
    fill(
        "cost_matrix_table",
        &[("transport", title), ("rows", lines(rows))],
    )
}

/// Heron's targets over XDP: at most this times Knot over XDP, and this
/// times Heron on sockets over the same pair.
pub const XDP_TARGET_VS_KNOT: f64 = 0.8;
pub const XDP_TARGET_VS_SOCKETS: f64 = 0.5;

/// The XDP table: Heron-XDP against Knot-XDP and against Heron-sockets,
/// per round as the other tables.
fn xdp_table(m: &CostMatrix) -> String {
    let rows = m.cells.iter().filter(|c| c.transport == "xdp").map(|c| {
        let ratio_to = |other: &str| {
            per_round(c, |round| {
                Some(us(c, "Heron-XDP", round)? / us(c, other, round)?)
            })
        };
        let (knot, sockets) = (ratio_to("Knot-XDP"), ratio_to("Heron-sockets"));
        let met = match (knot.n, sockets.n) {
            (0, _) | (_, 0) => "–",
            _ if knot.median <= XDP_TARGET_VS_KNOT && sockets.median <= XDP_TARGET_VS_SOCKETS => {
                "yes"
            }
            _ => "no",
        };
        format!(
            "| {} | {} | {} | {} | {met} |",
            c.workers,
            rate(c),
            ratio(&knot),
            ratio(&sockets)
        )
    });
    fill(
        "cost_matrix_xdp_table",
        &[
            ("vs_knot", format!("{XDP_TARGET_VS_KNOT}")),
            ("vs_sockets", format!("{XDP_TARGET_VS_SOCKETS}")),
            ("rows", lines(rows)),
        ],
    )
}

/// Memory per idle TLS connection, per server.
fn idle_tls_table(m: &CostMatrix) -> String {
    let rows = m.idle_tls.iter().map(|r| {
        format!(
            "| {} | {} | {} | {} | {} | {} | {:.0} | {:.0} | {:.1} |",
            r.server,
            r.asked,
            r.opened,
            r.still_open,
            r.rss_before_kib,
            r.rss_with_kib,
            r.bytes_per_connection(),
            r.slab_bytes_per_connection(),
            r.open_s
        )
    });
    format!(
        "### Idle DNS-over-TLS connections\n\nEach connection finished a TLS \
         handshake and had one question answered, then stayed open and silent; \
         server RSS before and with them held (KiB), the growth per connection \
         held (bytes). \"Still open\": not closed by the server when the memory \
         was read. Kernel slab: the machine's (both ends of each connection, \
         and whatever else ran), bytes per connection; took: seconds to open \
         them (dot-idle.md).\n\n| server | asked | opened | still open | RSS before | RSS with | \
         bytes per connection | kernel slab | took (s) |\n|---|---|---|---|---|---|---|---|---|\n{}\n\n",
        lines(rows)
    )
}

/// Every server's figures in every cell.
fn detail(m: &CostMatrix) -> String {
    let rows = m.cells.iter().flat_map(|c| {
        c.servers.iter().map(move |s| {
            let f = |g: fn(&CostTrial) -> f64| spread(&Spread::of(&figures(s, g)));
            let us = |g: fn(&CostTrial) -> f64| ratio(&Spread::of(&figures(s, g)));
            format!(
                "| {} | {} {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                c.transport,
                shape(c),
                c.generator,
                clients(c),
                rate(c),
                s.name,
                us(CostTrial::server_us),
                us(CostTrial::machine_us),
                f(|t| t.offered_qps),
                us(|t| t.loss_pct),
                f(|t| t.generator_cpu_s * 100.0 / t.wall_s.max(1e-9)),
                match c.generator.as_str() {
                    "blast" => f(|t| t.generator_busy_s * 100.0 / t.wall_s.max(1e-9)),
                    _ => "–".into(),
                },
            )
        })
    });
    fill("cost_matrix_detail", &[("rows", lines(rows))])
}

fn figures(s: &CostServer, g: fn(&CostTrial) -> f64) -> Vec<f64> {
    s.trials.iter().map(g).collect()
}

fn shape(c: &CostCell) -> String {
    match c.transport.as_str() {
        "xdp" => format!("{}, veth pair, {} worker(s)", c.workload, c.workers),
        _ if c.workers > 1 => format!("{}, {} workers", c.workload, c.workers),
        _ => c.workload.clone(),
    }
}

/// Who loads the cell: the UDP client shape, the connections.
fn clients(c: &CostCell) -> String {
    match c.transport.as_str() {
        "tcp" => format!("{} conns × {} in flight", c.connections, c.in_flight),
        "dot" if c.queries_per_conn > 0 => format!(
            "{} conns, a new one every {} queries{}",
            c.connections,
            c.queries_per_conn,
            crate::phases::cost_matrix::resumption(c.tls_resume)
        ),
        "dot" => format!("{} conns × {} in flight", c.connections, c.in_flight),
        "udp" if c.shape.is_empty() => "four-sockets".into(),
        "udp" => c.shape.clone(),
        _ => "–".into(),
    }
}

fn rate(c: &CostCell) -> String {
    match c.is_max {
        true => format!("{:.0} (max)", c.rate),
        false => format!("{:.0}", c.rate),
    }
}

fn ratio(s: &Spread) -> String {
    match s.n {
        0 => "–".into(),
        _ => format!("{:.2} ({:.2}–{:.2})", s.median, s.min, s.max),
    }
}

/// Server CPU µs per answered query of `name` in round `round`.
fn us(c: &CostCell, name: &str, round: usize) -> Option<f64> {
    let s = c.servers.iter().find(|s| s.name == name)?;
    let t = s.trials.iter().find(|t| t.round == round)?;
    (t.answered > 0).then(|| t.server_us())
}

/// A path's no-DNS-work floor (the TCP and TLS floors), not a peer.
fn is_floor(name: &str) -> bool {
    name.ends_with("floor")
}

/// The cheapest peer (not Heron, not a floor) in round `round`: (name, µs).
fn best_peer_us(c: &CostCell, round: usize) -> Option<(&str, f64)> {
    c.servers
        .iter()
        .filter(|s| !s.name.starts_with(HERON) && !is_floor(&s.name))
        .filter_map(|s| Some((s.name.as_str(), us(c, &s.name, round)?)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

/// The peer cheapest in most rounds.
fn best_peer_name(c: &CostCell) -> String {
    let mut names: Vec<&str> = (0..rounds(c))
        .filter_map(|r| best_peer_us(c, r).map(|b| b.0))
        .collect();
    names.sort_unstable();
    let mut best = ("–", 0);
    for n in &names {
        let count = names.iter().filter(|x| *x == n).count();
        if count > best.1 {
            best = (n, count);
        }
    }
    best.0.to_string()
}

fn rounds(c: &CostCell) -> usize {
    c.servers
        .iter()
        .flat_map(|s| s.trials.iter().map(|t| t.round + 1))
        .max()
        .unwrap_or(0)
}

/// The spread over rounds of a per-round figure.
fn per_round(c: &CostCell, f: impl Fn(usize) -> Option<f64>) -> Spread {
    let v: Vec<f64> = (0..rounds(c)).filter_map(f).collect();
    Spread::of(&v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(name: &str, us: &[f64]) -> CostServer {
        CostServer {
            name: name.into(),
            trials: us
                .iter()
                .enumerate()
                .map(|(round, us)| CostTrial {
                    round,
                    answered: 1_000_000,
                    server_cpu_s: *us,
                    wall_s: 1.0,
                    ..CostTrial::default()
                })
                .collect(),
        }
    }

    #[test]
    fn ratios_are_per_round_against_that_rounds_cheapest_peer() {
        let c = CostCell {
            transport: "udp".into(),
            servers: vec![
                server(HERON, &[4.0, 4.0, 6.0]),
                server(PACED, &[5.0, 4.0, 5.0]),
                server("NSD", &[5.0, 8.0, 6.0]),
                server("Knot", &[8.0, 5.0, 7.5]),
                server("TCP floor", &[1.0, 1.0, 1.0]),
            ],
            ..CostCell::default()
        };
        // The floor is no peer: it does no DNS work.
        let s = per_round(&c, |r| Some(us(&c, HERON, r)? / best_peer_us(&c, r)?.1));
        assert_eq!((s.n, s.min, s.median, s.max), (3, 0.8, 0.8, 1.0));
        assert_eq!(best_peer_name(&c), "NSD");
        let paced = per_round(&c, |r| Some(us(&c, HERON, r)? / us(&c, PACED, r)?));
        assert_eq!((paced.min, paced.median, paced.max), (0.8, 1.0, 1.2));
    }

    #[test]
    fn the_xdp_table_holds_heron_xdp_to_knot_xdp_and_to_its_sockets() {
        let c = CostCell {
            transport: "xdp".into(),
            rate: 50_000.0,
            workers: 1,
            servers: vec![
                server("Heron-XDP", &[2.0, 2.0, 2.0]),
                server("Heron-sockets", &[8.0, 4.0, 5.0]),
                server("Knot-XDP", &[2.5, 2.5, 2.0]),
                server("Knot-sockets", &[6.0, 6.0, 6.0]),
            ],
            ..CostCell::default()
        };
        let m = CostMatrix {
            cells: vec![c],
            ..CostMatrix::default()
        };
        let table = xdp_table(&m);
        // Medians: 0.80 of Knot-XDP (0.8, 0.8, 1.0), 0.40 of sockets.
        assert!(
            table.contains("| 1 | 50000 | 0.80 (0.80–1.00) | 0.40 (0.25–0.50) | yes |"),
            "{table}"
        );
    }

    #[test]
    fn a_cell_without_answers_has_no_ratio() {
        let mut heron = server(HERON, &[4.0]);
        heron.trials[0].answered = 0;
        let c = CostCell {
            servers: vec![heron, server("NSD", &[5.0])],
            ..CostCell::default()
        };
        let s = per_round(&c, |r| Some(us(&c, HERON, r)? / best_peer_us(&c, r)?.1));
        assert_eq!(s.n, 0);
    }
}
