//! What both measurements share: a thread's CPU time, and A/B trials in
//! alternating order so that a drift of the machine favours neither side.

/// The calling thread's CPU time so far, in nanoseconds (schedstat).
pub fn thread_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Runs `measure(false)` and `measure(true)` (each returns a cost) in
/// alternating order `trials` times, prints each pair and then the median
/// and range of true / false under `label`.
pub fn alternate(trials: usize, label: &str, mut measure: impl FnMut(bool) -> f64) {
    let mut ratios = Vec::new();
    for t in 0..trials {
        let mut cost = [0f64; 2];
        let order = if t % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for side in order {
            cost[side as usize] = measure(side);
        }
        println!("trial {t}: {:.0} ns against {:.0} ns", cost[1], cost[0]);
        ratios.push(cost[1] / cost[0]);
    }
    ratios.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "{label}: median {:.3} (min {:.3}, max {:.3})",
        ratios[ratios.len() / 2],
        ratios[0],
        ratios[ratios.len() - 1]
    );
}
