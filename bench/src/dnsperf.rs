//! Running `dnsperf` (pinned with taskset) and reading its summary.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub const DNSPERF: &str = "/usr/bin/dnsperf";

#[derive(Clone, Debug)]
pub struct DnsperfOpts {
    pub target: SocketAddr,
    pub tcp: bool,
    pub clients: usize,
    pub outstanding: usize,
    /// Queries per second limit; 0 = none.
    pub rate: f64,
    pub seconds: f64,
    pub cpus: Option<String>,
    /// Run it SCHED_RR at this priority.
    pub realtime: Option<i32>,
    /// Run it inside this network namespace (`ip netns exec`).
    pub netns: Option<String>,
    /// The address to send from (`-a`); None: the system's choice.
    pub local: Option<IpAddr>,
    /// DNS over TLS (`-m dot`; `tcp` is then ignored).
    pub dot: bool,
    /// Queries on a connection before it is closed and a new one opened
    /// (`-O num-queries-per-conn=N`); 0: no limit.
    pub queries_per_conn: usize,
    /// Print the answered rate every this many seconds (`-S`); 0: never.
    pub interval_s: u32,
}

impl Default for DnsperfOpts {
    fn default() -> Self {
        DnsperfOpts {
            target: SocketAddr::from(([127, 0, 0, 1], 53)),
            tcp: false,
            clients: 1,
            outstanding: 100,
            rate: 0.0,
            seconds: 1.0,
            cpus: None,
            realtime: None,
            netns: None,
            local: None,
            dot: false,
            queries_per_conn: 0,
            interval_s: 0,
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DnsperfResult {
    pub sent: u64,
    pub completed: u64,
    pub lost: u64,
    pub qps: f64,
    pub run_s: f64,
    pub lat_avg_us: f64,
    pub lat_stddev_us: f64,
    pub lat_max_us: f64,
    pub rcodes: String,
    pub command: String,
    /// dnsperf's own CPU seconds (user + system, from the shell's `times`).
    #[serde(default)]
    pub cpu_s: f64,
}

impl DnsperfResult {
    pub fn loss_pct(&self) -> f64 {
        if self.sent == 0 {
            100.0
        } else {
            self.lost as f64 * 100.0 / self.sent as f64
        }
    }
}

pub fn command(opts: &DnsperfOpts, queries: &Path) -> Vec<String> {
    let mut c = Vec::new();
    if let Some(ns) = &opts.netns {
        c.extend(["ip", "netns", "exec", ns].map(String::from));
    }
    if let Some(p) = opts.realtime {
        c.extend(["chrt".to_string(), "-r".to_string(), p.to_string()]);
    }
    if let Some(cpus) = &opts.cpus {
        c.extend(["taskset".to_string(), "-c".to_string(), cpus.clone()]);
    }
    c.push(DNSPERF.to_string());
    c.extend([
        "-m".to_string(),
        match (opts.dot, opts.tcp) {
            (true, _) => "dot",
            (false, true) => "tcp",
            (false, false) => "udp",
        }
        .to_string(),
        "-s".into(),
        opts.target.ip().to_string(),
        "-p".into(),
        opts.target.port().to_string(),
        "-d".into(),
        queries.display().to_string(),
        "-c".into(),
        opts.clients.to_string(),
        "-q".into(),
        opts.outstanding.to_string(),
        "-T".into(),
        "1".into(),
        "-t".into(),
        "2".into(),
        "-l".into(),
        format!("{}", opts.seconds),
    ]);
    if opts.rate > 0.0 {
        c.extend(["-Q".to_string(), format!("{}", opts.rate.round() as u64)]);
    }
    if let Some(local) = opts.local {
        c.extend(["-a".to_string(), local.to_string()]);
    }
    if opts.interval_s > 0 {
        c.extend(["-S".to_string(), opts.interval_s.to_string()]);
    }
    if opts.queries_per_conn > 0 {
        c.extend([
            "-O".to_string(),
            format!("num-queries-per-conn={}", opts.queries_per_conn),
        ]);
    }
    c
}

/// Runs one dnsperf per source address at once, each with its share of
/// the clients, the outstanding queries and the rate (so the clients are
/// spread over the addresses), and adds up what they report: the sum of
/// their counts and CPU, the longest run time, latencies weighted by
/// answers.
pub fn run_spread(
    opts: &DnsperfOpts,
    queries: &Path,
    sources: &[IpAddr],
) -> Result<DnsperfResult, String> {
    let share = share(opts, sources.len());
    let each: Vec<DnsperfOpts> = sources
        .iter()
        .map(|&local| DnsperfOpts {
            local: Some(local),
            ..share.clone()
        })
        .collect();
    let results: Vec<Result<DnsperfResult, String>> = std::thread::scope(|scope| {
        let runs: Vec<_> = each
            .iter()
            .map(|o| scope.spawn(move || run(o, queries)))
            .collect();
        runs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("dnsperf thread panicked".into()))
            })
            .collect()
    });
    let results = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok(sum(&results))
}

/// One of `n` dnsperf processes that share `opts`' load: its share of the
/// clients, the outstanding queries and the rate.
fn share(opts: &DnsperfOpts, n: usize) -> DnsperfOpts {
    let n = n.max(1);
    DnsperfOpts {
        clients: opts.clients.div_ceil(n).max(1),
        outstanding: opts.outstanding.div_ceil(n).max(1),
        rate: opts.rate / n as f64,
        ..opts.clone()
    }
}

/// Several dnsperf runs at once as one.
fn sum(runs: &[DnsperfResult]) -> DnsperfResult {
    let mut r = DnsperfResult::default();
    let mut weighted = 0.0;
    for x in runs {
        r.sent += x.sent;
        r.completed += x.completed;
        r.lost += x.lost;
        r.qps += x.qps;
        r.run_s = r.run_s.max(x.run_s);
        r.cpu_s += x.cpu_s;
        weighted += x.lat_avg_us * x.completed as f64;
        r.lat_max_us = r.lat_max_us.max(x.lat_max_us);
        r.lat_stddev_us = r.lat_stddev_us.max(x.lat_stddev_us);
    }
    r.lat_avg_us = weighted / r.completed.max(1) as f64;
    r.rcodes = runs.first().map(|x| x.rcodes.clone()).unwrap_or_default();
    r.command = runs
        .iter()
        .map(|x| x.command.as_str())
        .collect::<Vec<_>>()
        .join(" & ");
    r
}

/// Runs dnsperf once, bounded: killed (by its PID) if it outlives its
/// own time limit by 20 seconds. It runs under a shell that then prints
/// its children's CPU times (`times`), dnsperf's own cost.
pub fn run(opts: &DnsperfOpts, queries: &Path) -> Result<DnsperfResult, String> {
    let line = command(opts, queries);
    let mut child = spawn(&line)?;
    let deadline = Instant::now() + Duration::from_secs_f64(opts.seconds + 20.0);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                break;
            }
        }
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    summary(&line, &text, &out.stderr)
}

/// dnsperf's command `line` under a shell that prints its CPU times.
fn spawn(line: &[String]) -> Result<std::process::Child, String> {
    Command::new("/bin/sh")
        .args(["-c", "\"$@\"; times", "sh"])
        .args(line)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run dnsperf: {e}"))
}

/// The result of the run of `line` that printed `text` (and `stderr`).
fn summary(line: &[String], text: &str, stderr: &[u8]) -> Result<DnsperfResult, String> {
    let mut r = parse(text).ok_or_else(|| {
        format!(
            "dnsperf gave no summary: {}\n{}\n{}",
            line.join(" "),
            tail(text, ERROR_TAIL),
            tail(&String::from_utf8_lossy(stderr), ERROR_TAIL)
        )
    })?;
    r.command = line.join(" ");
    r.cpu_s = children_cpu_seconds(text).unwrap_or(0.0);
    Ok(r)
}

/// How much of dnsperf's output an error keeps: a failed run with many
/// connections prints a line per query timed out, megabytes of them.
const ERROR_TAIL: usize = 2_000;

/// The last `most` octets of `text` (from a character boundary), marked
/// as cut when it is.
fn tail(text: &str, most: usize) -> String {
    if text.len() <= most {
        return text.to_string();
    }
    let mut from = text.len() - most;
    while !text.is_char_boundary(from) {
        from += 1;
    }
    format!("[{} octets before] {}", from, &text[from..])
}

/// One `-S` line: the answered rate over an interval, and what the
/// caller's `mark` returned as the line arrived (at the interval's end).
#[derive(Clone, Debug, PartialEq)]
pub struct Interval<T> {
    pub qps: f64,
    pub mark: T,
}

/// [`run`] with `-S` set: `mark` is called as each interval line comes
/// (dnsperf flushes each), so the caller can read the server's counters
/// at the end of each interval. Bounded as [`run`].
pub fn run_marked<T>(
    opts: &DnsperfOpts,
    queries: &Path,
    mut mark: impl FnMut() -> T,
) -> Result<(DnsperfResult, Vec<Interval<T>>), String> {
    use std::io::BufRead;
    use std::sync::mpsc;
    let opts = DnsperfOpts {
        interval_s: opts.interval_s.max(1),
        ..opts.clone()
    };
    let line = command(&opts, queries);
    let mut child = spawn(&line)?;
    let stdout = child.stdout.take().ok_or("dnsperf without stdout")?;
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for l in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs_f64(opts.seconds + 20.0);
    let (mut text, mut intervals) = (String::new(), Vec::new());
    loop {
        let wait = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(wait) {
            Ok(l) => {
                if let Some(qps) = interval_qps(&l) {
                    intervals.push(Interval { qps, mark: mark() });
                }
                text.push_str(&l);
                text.push('\n');
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                break;
            }
        }
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let _ = reader.join();
    Ok((summary(&line, &text, &out.stderr)?, intervals))
}

/// The most queries one dnsperf keeps outstanding (`-q`): its query IDs
/// are 16 bits, so it refuses more.
pub const MAX_OUTSTANDING: usize = 65_536;

/// [`run_marked`] over as many dnsperf processes as `opts.outstanding`
/// needs (each keeps at most [`MAX_OUTSTANDING`]), started together, each
/// with its share of the clients, the outstanding queries and the rate.
/// The i-th interval's rate is the sum of every process's i-th (they
/// start within milliseconds of each other), marked when the first
/// process printed it; the counts add up as [`run_spread`]'s do.
pub fn run_marked_split<T>(
    opts: &DnsperfOpts,
    queries: &Path,
    mark: impl FnMut() -> T,
) -> Result<(DnsperfResult, Vec<Interval<T>>), String> {
    let n = opts.outstanding.div_ceil(MAX_OUTSTANDING).max(1);
    if n == 1 {
        return run_marked(opts, queries, mark);
    }
    let share = share(opts, n);
    let (first, others) = std::thread::scope(|scope| {
        let others: Vec<_> = (1..n)
            .map(|_| scope.spawn(|| run_marked(&share, queries, || ())))
            .collect();
        let first = run_marked(&share, queries, mark);
        let others: Vec<_> = (others.into_iter())
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("dnsperf thread panicked".into()))
            })
            .collect();
        (first, others)
    });
    let (first, mut intervals) = first?;
    let others = others.into_iter().collect::<Result<Vec<_>, _>>()?;
    let shortest = others.iter().map(|(_, i)| i.len()).min().unwrap_or(0);
    intervals.truncate(shortest);
    for (_, theirs) in &others {
        for (mine, their) in intervals.iter_mut().zip(theirs) {
            mine.qps += their.qps;
        }
    }
    let runs: Vec<DnsperfResult> = std::iter::once(first)
        .chain(others.into_iter().map(|(r, _)| r))
        .collect();
    Ok((sum(&runs), intervals))
}

/// The rate of a `-S` line, "1795638359.621667: 1979.876883".
fn interval_qps(line: &str) -> Option<f64> {
    let (at, qps) = line.split_once(": ")?;
    let number = |t: &str| {
        let digits = !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.');
        digits.then(|| t.parse::<f64>().ok()).flatten()
    };
    number(at)?;
    number(qps.trim())
}

/// The children's user + system seconds from the shell's `times`: its
/// second line, "XmY.YYYs XmY.YYYs".
fn children_cpu_seconds(text: &str) -> Option<f64> {
    let seconds = |t: &str| -> Option<f64> {
        let (m, s) = t.strip_suffix('s')?.split_once('m')?;
        Some(m.parse::<f64>().ok()? * 60.0 + s.parse::<f64>().ok()?)
    };
    let times: Vec<&str> = text
        .lines()
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() == 2 && f.iter().all(|t| seconds(t).is_some())
        })
        .collect();
    let children = times.get(1)?;
    children.split_whitespace().map(seconds).sum()
}

fn first_number(s: &str) -> Option<f64> {
    s.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find(|t| !t.is_empty())
        .and_then(|t| t.parse().ok())
}

/// Reads dnsperf's "Statistics:" block.
pub fn parse(text: &str) -> Option<DnsperfResult> {
    let mut r = DnsperfResult::default();
    let mut seen = false;
    for line in text.lines() {
        let Some((key, value)) = line.trim().split_once(':') else {
            continue;
        };
        let v = value.trim();
        match key.trim() {
            "Queries sent" => r.sent = first_number(v)? as u64,
            "Queries completed" => {
                r.completed = first_number(v)? as u64;
                seen = true;
            }
            "Queries lost" => r.lost = first_number(v)? as u64,
            "Queries per second" => r.qps = first_number(v)?,
            "Run time (s)" => r.run_s = first_number(v)?,
            "Response codes" => r.rcodes = v.to_string(),
            "Average Latency (s)" => {
                r.lat_avg_us = first_number(v)? * 1e6;
                if let Some((_, m)) = v.split_once("max ") {
                    r.lat_max_us = first_number(m).unwrap_or(0.0) * 1e6;
                }
            }
            "Latency StdDev (s)" => r.lat_stddev_us = first_number(v)? * 1e6,
            _ => {}
        }
    }
    seen.then_some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder of the test's own, a TLS echo server (the TLS floor) on a
    /// self-signed certificate in it, and a one-query file for dnsperf.
    fn dot_echo(tag: &str) -> (std::path::PathBuf, SocketAddr, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("heron-bench-{tag}-{}", std::process::id()));
        let tls = crate::servers::TlsFiles::self_signed(&dir).unwrap();
        let target = crate::tls_floor::spawn_for_test(&tls.cert, &tls.key);
        let queries = dir.join("queries.txt");
        std::fs::write(&queries, "example. SOA\n").unwrap();
        (dir, target, queries)
    }

    #[test]
    fn marks_come_once_a_second_over_dot_in_order() {
        if !Path::new(DNSPERF).exists() {
            eprintln!("skipped: no {DNSPERF}");
            return;
        }
        let (dir, target, queries) = dot_echo("marked");
        let opts = DnsperfOpts {
            target,
            dot: true,
            clients: 4,
            outstanding: 4,
            rate: 200.0,
            seconds: 3.0,
            ..DnsperfOpts::default()
        };
        let mut n = 0;
        let (r, intervals) = run_marked(&opts, &queries, || {
            n += 1;
            n
        })
        .unwrap();
        assert!(r.command.contains("-S 1"), "{}", r.command);
        assert!(r.completed > 0);
        // Two whole seconds of three (the last is in the summary only).
        assert!(intervals.len() >= 2, "{intervals:?}");
        let marks: Vec<i32> = intervals.iter().map(|i| i.mark).collect();
        assert_eq!(marks, (1..=marks.len() as i32).collect::<Vec<_>>());
        let sum: f64 = intervals.iter().map(|i| i.qps).sum();
        assert!(sum <= r.completed as f64 + 1.0, "{sum} > {}", r.completed);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// More queries outstanding than one dnsperf keeps: two run, each
    /// with its half, and their seconds add up under the first's marks.
    #[test]
    fn a_split_run_adds_up_its_processes_intervals() {
        if !Path::new(DNSPERF).exists() {
            eprintln!("skipped: no {DNSPERF}");
            return;
        }
        let (dir, target, queries) = dot_echo("split");
        let opts = DnsperfOpts {
            target,
            dot: true,
            clients: 4,
            outstanding: MAX_OUTSTANDING + 4,
            rate: 400.0,
            seconds: 3.0,
            ..DnsperfOpts::default()
        };
        let mut n = 0;
        let (r, intervals) = run_marked_split(&opts, &queries, || {
            n += 1;
            n
        })
        .unwrap();
        let runs: Vec<&str> = r.command.split(" & ").collect();
        assert_eq!(runs.len(), 2, "{}", r.command);
        let half = format!("-q {}", (MAX_OUTSTANDING + 4) / 2);
        assert!(
            runs.iter()
                .all(|c| c.contains(&half) && c.contains("-Q 200")),
            "{}",
            r.command
        );
        assert!(intervals.len() >= 2, "{intervals:?}");
        let marks: Vec<i32> = intervals.iter().map(|i| i.mark).collect();
        assert_eq!(marks, (1..=marks.len() as i32).collect::<Vec<_>>());
        let sum: f64 = intervals.iter().map(|i| i.qps).sum();
        assert!(sum <= r.completed as f64 + 2.0, "{sum} > {}", r.completed);
        assert!(sum > 200.0, "both processes counted: {sum}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_tail_keeps_the_end_and_says_what_it_cut() {
        assert_eq!(tail("short", 10), "short");
        let long = "é".repeat(3000);
        let cut = tail(&long, 2_001);
        assert!(cut.starts_with("[4000 octets before] é"), "{}", &cut[..30]);
        assert!(cut.len() < 2_100);
    }

    #[test]
    fn interval_lines_are_told_from_the_rest() {
        assert_eq!(
            interval_qps("1795638359.621667: 1979.876883"),
            Some(1979.876883)
        );
        assert_eq!(interval_qps("1795638351.881702: 0.000001"), Some(0.000001));
        assert_eq!(interval_qps("  Queries sent:         5973"), None);
        assert_eq!(interval_qps("[Status] Started at: Wed Nov 25"), None);
        assert_eq!(interval_qps("1.2.3: 4"), None);
        assert_eq!(interval_qps(": 4"), None);
    }

    #[test]
    fn parses_summary() {
        let out = "Statistics:\n\n  Queries sent:         1000\n  Queries completed:    999 (99.90%)\n  \
                   Queries lost:         1 (0.10%)\n\n  Response codes:       NOERROR 999 (100.00%)\n  \
                   Average packet size:  request 33, response 49\n  Run time (s):         2.000104\n  \
                   Queries per second:   499.474\n\n  Average Latency (s):  0.000120 (min 0.000020, max 0.001940)\n  \
                   Latency StdDev (s):   0.000051\n";
        let r = parse(out).unwrap();
        assert_eq!((r.sent, r.completed, r.lost), (1000, 999, 1));
        assert!((r.qps - 499.474).abs() < 1e-9);
        assert!((r.lat_avg_us - 120.0).abs() < 1e-6);
        assert!((r.lat_max_us - 1940.0).abs() < 1e-6);
        assert!((r.loss_pct() - 0.1).abs() < 1e-9);
    }

    #[test]
    fn spread_runs_add_up_and_weigh_latency_by_answers() {
        let a = DnsperfResult {
            sent: 100,
            completed: 90,
            lost: 10,
            qps: 45.0,
            run_s: 2.0,
            lat_avg_us: 100.0,
            cpu_s: 0.5,
            ..DnsperfResult::default()
        };
        let b = DnsperfResult {
            sent: 10,
            completed: 10,
            qps: 5.0,
            run_s: 2.1,
            lat_avg_us: 200.0,
            cpu_s: 0.25,
            ..DnsperfResult::default()
        };
        let r = sum(&[a, b]);
        assert_eq!((r.sent, r.completed, r.lost), (110, 100, 10));
        assert!((r.qps - 50.0).abs() < 1e-9 && (r.run_s - 2.1).abs() < 1e-9);
        assert!((r.cpu_s - 0.75).abs() < 1e-9);
        assert!((r.lat_avg_us - 110.0).abs() < 1e-9);
    }

    #[test]
    fn the_command_carries_source_address_and_dot_options() {
        let o = DnsperfOpts {
            dot: true,
            tcp: true,
            local: Some("127.0.1.3".parse().unwrap()),
            queries_per_conn: 10,
            ..DnsperfOpts::default()
        };
        let c = command(&o, Path::new("q.txt")).join(" ");
        assert!(c.contains("-m dot"), "{c}");
        assert!(c.contains("-a 127.0.1.3"), "{c}");
        assert!(c.contains("-O num-queries-per-conn=10"), "{c}");
        let plain = command(&DnsperfOpts::default(), Path::new("q.txt")).join(" ");
        assert!(plain.contains("-m udp") && !plain.contains("-a ") && !plain.contains("-O"));
    }

    #[test]
    fn reads_the_childrens_cpu_from_times() {
        let out = "Statistics:\n  Queries completed: 1\n0m0.001s 0m0.002s\n1m2.500s 0m0.250s\n";
        assert_eq!(children_cpu_seconds(out), Some(62.75));
        assert_eq!(children_cpu_seconds("0m0.001s 0m0.002s\n"), None);
        assert_eq!(children_cpu_seconds("no times here\n"), None);
    }
}
