//! `blast`: a batched UDP DNS load generator (`sendmmsg`/`recvmmsg`).
//!
//! One thread drives several connected sockets. At a fixed offered rate it
//! is open-loop (queries go out on schedule whatever comes back); with
//! rate 0 it sends as fast as a window of outstanding queries allows. Each
//! query's send time is kept in a slot indexed by (socket, DNS ID), so a
//! response gives its latency with no search. A query unanswered after
//! `timeout`, or still unanswered when the run ends, is lost.
//! The batched system calls are `heron_sys::udp`'s; the sockets are
//! connected, so the datagrams go without a peer address.

use std::collections::VecDeque;
use std::fs;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

use heron_proto::{Name, RType};
use heron_sys::udp::{Receiver, Sender, Wait};
use serde::{Deserialize, Serialize};

use crate::stats::Histogram;

/// The wire-format queries of a query file, back to back.
pub struct QuerySet {
    bytes: Vec<u8>,
    offsets: Vec<(u32, u16)>,
}

impl QuerySet {
    /// Reads a dnsperf query file ("NAME TYPE" per line; `#` comments).
    pub fn load(path: &Path) -> Result<QuerySet, String> {
        let text = fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        let mut set = QuerySet {
            bytes: Vec::with_capacity(text.len() + text.lines().count() * 20),
            offsets: Vec::new(),
        };
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut f = line.split_whitespace();
            let (Some(name), Some(qtype)) = (f.next(), f.next()) else {
                return Err(format!("{}:{}: expected NAME TYPE", path.display(), n + 1));
            };
            let name = Name::parse(name)
                .map_err(|e| format!("{}:{}: bad name {name}: {e}", path.display(), n + 1))?;
            let qtype = RType::from_mnemonic(qtype.as_bytes())
                .ok_or_else(|| format!("{}:{}: unknown type {qtype}", path.display(), n + 1))?;
            set.push(&name, qtype);
        }
        if set.offsets.is_empty() {
            return Err(format!("{}: no queries", path.display()));
        }
        Ok(set)
    }

    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// Queries for these questions, in this order.
    pub fn of_questions(questions: &[(Name, RType)]) -> QuerySet {
        let mut set = QuerySet {
            bytes: Vec::new(),
            offsets: Vec::new(),
        };
        for (name, qtype) in questions {
            set.push(name, *qtype);
        }
        set
    }

    fn push(&mut self, name: &Name, qtype: RType) {
        let start = self.bytes.len();
        // ID 0 (set per send), no flags, one question.
        self.bytes
            .extend_from_slice(&[0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
        self.bytes.extend_from_slice(name.as_wire());
        self.bytes.extend_from_slice(&qtype.0.to_be_bytes());
        self.bytes.extend_from_slice(&1u16.to_be_bytes());
        self.offsets
            .push((start as u32, (self.bytes.len() - start) as u16));
    }

    pub(crate) fn get(&self, i: usize) -> &[u8] {
        let (start, len) = self.offsets[i];
        &self.bytes[start as usize..start as usize + len as usize]
    }
}

#[derive(Clone, Debug)]
pub struct BlastOpts {
    pub target: SocketAddr,
    /// Offered queries per second; 0 = as fast as `window` allows.
    pub rate: f64,
    /// Most queries outstanding at once (used when `rate` is 0).
    pub window: usize,
    pub duration: Duration,
    /// After sending stops, wait this long at most for the last answers.
    pub drain: Duration,
    /// A query unanswered this long is lost.
    pub timeout: Duration,
    pub sockets: usize,
    pub batch: usize,
}

impl Default for BlastOpts {
    fn default() -> Self {
        BlastOpts {
            target: "127.0.0.1:53".parse().unwrap(),
            rate: 0.0,
            window: 2_000,
            duration: Duration::from_secs(2),
            drain: Duration::from_millis(500),
            timeout: Duration::from_secs(1),
            sockets: 4,
            batch: 32,
        }
    }
}

/// What one run measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct BlastResult {
    pub target_rate: f64,
    pub sent: u64,
    pub answered: u64,
    pub lost: u64,
    /// Responses that matched no outstanding query (late or duplicated).
    pub unmatched: u64,
    pub send_errors: u64,
    /// Length of the sending phase, seconds.
    pub duration_s: f64,
    pub offered_qps: f64,
    pub answered_qps: f64,
    pub loss_pct: f64,
    pub lat_avg_us: f64,
    pub lat_p50_us: f64,
    pub lat_p99_us: f64,
    pub lat_p999_us: f64,
    pub lat_max_us: f64,
    pub noerror: u64,
    pub nxdomain: u64,
    pub other_rcode: u64,
    /// Datagrams the kernel dropped at the generator's own sockets.
    pub client_drops: u64,
    /// Datagrams dropped at sockets bound to the target's port (the
    /// server's receive queues), during this run.
    pub server_drops: u64,
    /// Over TCP: seconds of the sending phase during which queries were
    /// due and the server held every slot (no connection had one free).
    #[serde(default)]
    pub slots_taken_s: f64,
    /// Answers received before sending stopped (those of the drain left
    /// out): with many queries outstanding, the drain's answers would
    /// raise the rate by up to that many over the sending phase.
    #[serde(default)]
    pub answered_sending: u64,
    /// The stretch of the sending phase `answered_sending` covers, when
    /// shorter than all of it (0: all of it).
    #[serde(default)]
    pub answered_sending_s: f64,
}

impl BlastResult {
    /// Answers per second received while sending.
    pub fn answered_qps_sending(&self) -> f64 {
        let span = match self.answered_sending_s > 0.0 {
            true => self.answered_sending_s,
            false => self.duration_s,
        };
        self.answered_sending as f64 / span.max(1e-9)
    }
}

const SLOTS: usize = 65_536;
const SEND_BUF: usize = 512;
const RECV_BUF: usize = 4_096;

struct Sock {
    socket: UdpSocket,
    /// Send time (ns since start, +1) per DNS ID; 0 = free.
    slots: Vec<u64>,
    /// The query (index in the set) sent with each DNS ID.
    sent_query: Vec<u32>,
    next_id: u16,
    port: u16,
}

fn open_socket(target: SocketAddr) -> io::Result<Sock> {
    let local: SocketAddr = if target.is_ipv6() {
        "[::1]:0".parse().unwrap()
    } else {
        "127.0.0.1:0".parse().unwrap()
    };
    let socket = UdpSocket::bind(local)?;
    socket.connect(target)?;
    socket.set_nonblocking(true)?;
    let _ = heron_sys::socket::grow_receive_buffer(&socket, 32 << 20);
    let _ = heron_sys::socket::grow_send_buffer(&socket, 8 << 20);
    let port = socket.local_addr()?.port();
    Ok(Sock {
        socket,
        slots: vec![0; SLOTS],
        sent_query: vec![0; SLOTS],
        next_id: 0,
        port,
    })
}

/// Sum of the kernel's per-socket drop counters for UDP sockets bound to
/// any of `ports` on a loopback address (from /proc/net/udp and udp6).
pub fn socket_drops(ports: &[u16]) -> u64 {
    let mut total = 0;
    for file in ["/proc/net/udp", "/proc/net/udp6"] {
        let Ok(text) = fs::read_to_string(file) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 13 {
                continue;
            }
            let port = f[1]
                .rsplit_once(':')
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            if port.is_some_and(|p| ports.contains(&p)) {
                total += f[12].parse::<u64>().unwrap_or(0);
            }
        }
    }
    total
}

/// Runs one bounded load: sends for `opts.duration`, then drains.
pub fn blast(queries: &QuerySet, opts: &BlastOpts) -> io::Result<BlastResult> {
    blast_checked(queries, opts, Instant::now(), &mut |_| {})
}

/// One answer as `blast_checked` hands it over.
pub struct Answer<'a> {
    /// Index of the query in its set.
    pub query: usize,
    /// When the query was sent and the answer came, ns since `start`.
    pub sent_ns: u64,
    pub received_ns: u64,
    pub message: &'a [u8],
}

/// [`blast`], with every answer handed to `check`; times count from
/// `start`, which must not be later than the call.
pub fn blast_checked(
    queries: &QuerySet,
    opts: &BlastOpts,
    start: Instant,
    check: &mut dyn FnMut(Answer),
) -> io::Result<BlastResult> {
    assert!(!queries.is_empty());
    let nsock = opts.sockets.max(1);
    let batch = opts.batch.clamp(1, 1024);
    let mut socks = (0..nsock)
        .map(|_| open_socket(opts.target))
        .collect::<io::Result<Vec<_>>>()?;
    let my_ports: Vec<u16> = socks.iter().map(|s| s.port).collect();
    let server_drops_before = socket_drops(&[opts.target.port()]);

    let mut send_buf = vec![0u8; batch * SEND_BUF];
    let mut send_lens = vec![0usize; batch];
    let mut sender = Sender::with_capacity(batch);
    let mut received = Receiver::new(batch, RECV_BUF);
    let mut pending: VecDeque<(u32, u16, u64)> = VecDeque::new();
    let mut hist = Histogram::default();
    let mut r = BlastResult {
        target_rate: opts.rate,
        ..BlastResult::default()
    };
    let mut qi = 0usize;
    let mut rr = 0usize;
    let mut outstanding: u64 = 0;
    let timeout_ns = opts.timeout.as_nanos() as u64;
    let send_ns = start.elapsed().as_nanos() as u64 + opts.duration.as_nanos() as u64;
    let end_ns = send_ns + opts.drain.as_nanos() as u64;
    // Paced sending counts from here.
    let first_ns = start.elapsed().as_nanos() as u64;
    let mut send_end_ns = send_ns;
    let mut sending = true;
    // Bounded: the loop ends at `end_ns` at the latest.
    loop {
        let now = start.elapsed().as_nanos() as u64;
        if sending && now >= send_ns {
            sending = false;
            send_end_ns = now;
        }
        if !sending && (outstanding == 0 || now >= end_ns) {
            break;
        }
        let mut did = false;
        // Send.
        if sending {
            let want = if opts.rate > 0.0 {
                let due = ((now - first_ns) as f64 * opts.rate / 1e9) as u64;
                due.saturating_sub(r.sent)
            } else {
                (opts.window as u64).saturating_sub(outstanding)
            };
            let n = want.min(batch as u64) as usize;
            if n > 0 {
                let s = &mut socks[rr];
                let sidx = rr as u32;
                rr = (rr + 1) % nsock;
                let mut ids = [(0u16, 0u32); 1024];
                for (j, id_slot) in ids.iter_mut().enumerate().take(n) {
                    let q = queries.get(qi);
                    let query = qi as u32;
                    qi += 1;
                    if qi == queries.len() {
                        qi = 0;
                    }
                    let buf = &mut send_buf[j * SEND_BUF..j * SEND_BUF + q.len()];
                    buf.copy_from_slice(q);
                    let id = s.next_id;
                    s.next_id = s.next_id.wrapping_add(1);
                    buf[..2].copy_from_slice(&id.to_be_bytes());
                    *id_slot = (id, query);
                    send_lens[j] = q.len();
                }
                let messages = send_buf.chunks(SEND_BUF).zip(&send_lens);
                let rc = sender
                    .load(messages.take(n).map(|(buf, &len)| (&buf[..len], None)))
                    .send(&s.socket, 0, Wait::Never);
                if let Ok(rc) = rc {
                    let t = start.elapsed().as_nanos() as u64 + 1;
                    for &(id, query) in ids.iter().take(rc) {
                        let slot = &mut s.slots[id as usize];
                        if *slot != 0 {
                            // Reused before an answer came: that one is lost.
                            outstanding -= 1;
                        }
                        *slot = t;
                        s.sent_query[id as usize] = query;
                        pending.push_back((sidx, id, t));
                    }
                    r.sent += rc as u64;
                    outstanding += rc as u64;
                    // IDs of datagrams not sent are handed out again.
                    let unsent = (n - rc) as u16;
                    s.next_id = s.next_id.wrapping_sub(unsent);
                    qi = (qi + queries.len() - (n - rc) % queries.len()) % queries.len();
                    did = rc > 0;
                } else {
                    r.send_errors += 1;
                }
            }
        }
        // Receive whatever is queued on every socket.
        for s in socks.iter_mut() {
            for _ in 0..8 {
                let rc = match received.receive(&s.socket, Wait::Never) {
                    Ok(rc) if rc > 0 => rc,
                    _ => break,
                };
                let t = start.elapsed().as_nanos() as u64 + 1;
                for j in 0..rc {
                    let msg = received.datagram(j);
                    let len = msg.len();
                    if len < 12 || msg[2] & 0x80 == 0 {
                        r.unmatched += 1;
                        continue;
                    }
                    let id = u16::from_be_bytes([msg[0], msg[1]]);
                    let slot = &mut s.slots[id as usize];
                    if *slot == 0 {
                        r.unmatched += 1;
                        continue;
                    }
                    hist.record(t - *slot);
                    check(Answer {
                        query: s.sent_query[id as usize] as usize,
                        sent_ns: *slot - 1,
                        received_ns: t - 1,
                        message: msg,
                    });
                    *slot = 0;
                    outstanding -= 1;
                    r.answered += 1;
                    r.answered_sending += u64::from(sending);
                    match msg[3] & 0x0F {
                        0 => r.noerror += 1,
                        3 => r.nxdomain += 1,
                        _ => r.other_rcode += 1,
                    }
                }
                did = true;
                if rc < batch {
                    break;
                }
            }
        }
        // Expire queries older than the timeout.
        let now = start.elapsed().as_nanos() as u64;
        while let Some(&(si, id, t)) = pending.front() {
            if t + timeout_ns > now {
                break;
            }
            pending.pop_front();
            let slot = &mut socks[si as usize].slots[id as usize];
            if *slot == t {
                *slot = 0;
                outstanding -= 1;
            }
        }
        if !did {
            std::hint::spin_loop();
        }
    }
    r.duration_s = (send_end_ns - first_ns) as f64 / 1e9;
    r.lost = r.sent - r.answered;
    r.offered_qps = r.sent as f64 / r.duration_s.max(1e-9);
    r.answered_qps = r.answered as f64 / r.duration_s.max(1e-9);
    r.loss_pct = if r.sent == 0 {
        0.0
    } else {
        r.lost as f64 * 100.0 / r.sent as f64
    };
    r.lat_avg_us = hist.mean() / 1e3;
    r.lat_p50_us = hist.percentile(50.0) as f64 / 1e3;
    r.lat_p99_us = hist.percentile(99.0) as f64 / 1e3;
    r.lat_p999_us = hist.percentile(99.9) as f64 / 1e3;
    r.lat_max_us = hist.max() as f64 / 1e3;
    r.client_drops = socket_drops(&my_ports);
    r.server_drops = socket_drops(&[opts.target.port()]).saturating_sub(server_drops_before);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blast_against_an_echo_counts_everything() {
        // A tiny echo that sets QR, on a thread, bounded in time.
        let echo = UdpSocket::bind("127.0.0.1:0").unwrap();
        echo.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let target = echo.local_addr().unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop2 = stop.clone();
        let t = std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            let deadline = Instant::now() + Duration::from_secs(10);
            while !stop2.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < deadline {
                if let Ok((n, peer)) = echo.recv_from(&mut buf) {
                    buf[2] |= 0x80;
                    let _ = echo.send_to(&buf[..n], peer);
                }
            }
        });
        let dir = std::env::temp_dir().join(format!("heron-bench-blast-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join("q.txt");
        fs::write(&file, "a.example. A\nb.example. MX\n").unwrap();
        let set = QuerySet::load(&file).unwrap();
        assert_eq!(set.len(), 2);
        let r = blast(
            &set,
            &BlastOpts {
                target,
                rate: 2_000.0,
                duration: Duration::from_millis(300),
                ..BlastOpts::default()
            },
        )
        .unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        t.join().unwrap();
        // Paced at 2,000/s for 0.3 s: never more than the schedule allows;
        // fewer when the test machine is busy (the sender is a thread that
        // may wait for a core), but not a trickle.
        assert!(r.sent >= 200 && r.sent <= 700, "{r:?}");
        assert_eq!(r.answered + r.lost, r.sent);
        assert_eq!(r.noerror, r.answered);
        fs::remove_dir_all(dir).unwrap();
    }
}
