//! Asking a secondary, over UDP, whether its zones are there yet.

use std::collections::HashMap;
use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use heron_proto::message::Message;
use heron_proto::{Name, RType, Rcode, rdata};
use heron_testkit::{QueryOpts, build_query};

/// Queries per second while a cold start is watched and the zones asked
/// about are still refused: the secondary is busy transferring them, and
/// this many queries take a few percent of one core from it.
pub const WATCH_RATE: u32 = 20_000;
/// Queries per second while the zones asked about answer: they are there,
/// and the rest must be checked quickly to see when the last one came.
pub const CATCH_UP_RATE: u32 = 200_000;
/// The probe sends once per tick and reads answers in between.
const TICK: Duration = Duration::from_millis(1);
/// Ticks over which the share of zones answering is counted.
const WINDOW: usize = 20;

/// When every zone answered.
#[derive(Debug)]
pub struct Arrival {
    /// Zones that answered (with their SOA) before the deadline.
    pub answered: usize,
    /// Seconds from `since` to the last zone's first answer, if all did.
    pub all_after_s: Option<f64>,
    /// Seconds from `since` to the sending of the latest query that a zone
    /// still refused (or failed): every zone answered between this and
    /// `all_after_s`, so the difference bounds the probe's delay.
    pub last_refused_s: f64,
}

/// Sends SOA queries for the zones that have not answered yet, round
/// robin, until each has answered NOERROR with its SOA or `deadline`
/// passes, or `alive` says the server is gone. Queries go out in bursts
/// once a millisecond, each zone at most once per burst, and answers are
/// read in between. The rate follows the share of answers that are SOAs
/// over the last 20 ms: `low` queries a second while zones are refused
/// (the server is still transferring them and is not to be slowed down),
/// up to `high` while they answer (the server has them, and the sooner the
/// rest are asked about, the sooner the last one is seen).
pub fn until_all_answer(
    server: SocketAddr,
    origins: &[String],
    since: Instant,
    deadline: Instant,
    (low, high): (u32, u32),
    alive: &mut dyn FnMut() -> bool,
) -> Arrival {
    let sock = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).expect("a UDP socket");
    sock.set_nonblocking(true).expect("a non-blocking socket");
    let names: Vec<Name> = origins
        .iter()
        .map(|o| Name::parse(o).expect("origin"))
        .collect();
    let index: HashMap<Vec<u8>, usize> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.to_lowercase().as_wire().to_vec(), i))
        .collect();
    // The query ID indexes the zone and time of each query sent, so that
    // a refusal is dated by its own query.
    let mut sent: Vec<(usize, Instant)> = vec![(usize::MAX, since); 1 << 16];
    let mut next_id: u16 = 0;
    let mut pending: Vec<usize> = (0..names.len()).collect();
    let mut answered = vec![false; names.len()];
    let (mut last, mut last_refused) = (since, since);
    let mut cursor = 0;
    let mut buf = vec![0u8; 4096];
    // (answered with the SOA, refused) per tick, the last WINDOW ticks.
    let mut window = [(0u32, 0u32); WINDOW];
    let mut tick = 0;
    let mut budget = 0.0;
    let mut sent_at = Instant::now();
    while !pending.is_empty() && Instant::now() < deadline && alive() {
        let (yes, no) = window.iter().fold((0, 0), |(y, n), (a, b)| (y + a, n + b));
        let share = if yes + no == 0 {
            0.0
        } else {
            yes as f64 / (yes + no) as f64
        };
        let rate = low as f64 + share * (high as f64 - low as f64);
        let now = Instant::now();
        budget = (budget + rate * now.duration_since(sent_at).as_secs_f64())
            .min(rate * 5.0 * TICK.as_secs_f64());
        sent_at = now;
        let burst = (budget as usize).min(pending.len());
        budget -= burst as f64;
        for _ in 0..burst {
            cursor %= pending.len();
            let i = pending[cursor];
            let opts = QueryOpts {
                id: next_id,
                ..QueryOpts::default()
            };
            sent[next_id as usize] = (i, Instant::now());
            let _ = sock.send_to(&build_query(&names[i], RType::SOA, &opts), server);
            next_id = next_id.wrapping_add(1);
            cursor += 1;
        }
        std::thread::sleep(TICK.saturating_sub(sent_at.elapsed()));
        tick = (tick + 1) % WINDOW;
        window[tick] = (0, 0);
        loop {
            let n = match sock.recv_from(&mut buf) {
                Ok((n, _)) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => break, // nothing more to read for now
            };
            match answer(&buf[..n], &index) {
                Some((i, true)) => {
                    window[tick].0 += 1;
                    if !answered[i] {
                        answered[i] = true;
                        last = Instant::now();
                    }
                }
                Some((i, false)) => {
                    window[tick].1 += 1;
                    let (zone, at) = sent[u16::from_be_bytes([buf[0], buf[1]]) as usize];
                    if zone == i && !answered[i] {
                        last_refused = last_refused.max(at);
                    }
                }
                None => {}
            }
        }
        pending.retain(|&i| !answered[i]);
    }
    let count = answered.iter().filter(|a| **a).count();
    Arrival {
        answered: count,
        all_after_s: (count == names.len()).then(|| last.duration_since(since).as_secs_f64()),
        last_refused_s: last_refused.saturating_duration_since(since).as_secs_f64(),
    }
}

/// The zone `response` is about, and whether it is a NOERROR answer with
/// the zone's SOA.
fn answer(response: &[u8], index: &HashMap<Vec<u8>, usize>) -> Option<(usize, bool)> {
    let m = Message::parse(response).ok()?;
    let q = m.questions.first()?;
    let i = *index.get(q.name.to_lowercase().as_wire())?;
    let served = m.rcode() == Rcode::NOERROR && m.answers.iter().any(|r| r.rtype == RType::SOA);
    Some((i, served))
}

/// The serial `server` answers for `origin`, if any.
pub fn serial(server: SocketAddr, origin: &Name, sock: &UdpSocket) -> Option<u32> {
    let q = build_query(origin, RType::SOA, &QueryOpts::default());
    sock.send_to(&q, server).ok()?;
    let mut buf = [0u8; 1500];
    let (n, _) = sock.recv_from(&mut buf).ok()?;
    let m = Message::parse(&buf[..n]).ok()?;
    let soa = m.answers.iter().find(|r| r.rtype == RType::SOA)?;
    rdata::soa_serial(&soa.rdata)
}

/// Polls `server` every 200 µs until it answers serial `want` for
/// `origin`; returns when it did, or None at `deadline`.
pub fn until_serial(
    server: SocketAddr,
    origin: &Name,
    want: u32,
    deadline: Instant,
) -> Option<Instant> {
    let sock = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).ok()?;
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .ok()?;
    while Instant::now() < deadline {
        if serial(server, origin, &sock) == Some(want) {
            return Some(Instant::now());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    None
}
