//! Asking a secondary, over UDP, whether its zones are there yet.

use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use heron_proto::message::Message;
use heron_proto::{Name, Opcode, RType, Rcode, rdata};
use heron_testkit::{QueryOpts, build_query};

/// Queries per second while a cold start is watched and the zones asked
/// about are still refused: the secondary is busy transferring them, and
/// answering this many takes a few percent of its CPU.
pub const WATCH_RATE: u32 = 10_000;
/// Queries per second while the zones asked about answer: they are there,
/// and the rest must be checked quickly to see when the last one came.
pub const CATCH_UP_RATE: u32 = 200_000;
/// The probe sends once per tick and reads answers in between.
const TICK: Duration = Duration::from_millis(1);
/// A zone is not asked again sooner than this after its last query: the
/// answer is most likely on its way.
const RECENT: Duration = Duration::from_millis(3);
/// A DNS header's length.
const HEADER: usize = 12;
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
/// once a millisecond, each zone at most once in 3 ms, and answers are
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
    sock.connect(server).expect("a connected UDP socket");
    sock.set_nonblocking(true).expect("a non-blocking socket");
    // Each zone's query, built once; only the ID changes from one to the
    // next, and answers are checked against it without being parsed: the
    // probe has to keep up with a secondary that answers 100,000 zones.
    let queries: Vec<Vec<u8>> = origins
        .iter()
        .map(|o| {
            let name = Name::parse(o).expect("origin");
            build_query(&name, RType::SOA, &QueryOpts::default())
        })
        .collect();
    // The query ID indexes the zone and time of each query sent, so that
    // an answer is matched to its zone and a refusal dated by its query.
    let mut sent: Vec<(usize, Instant)> = vec![(usize::MAX, since); 1 << 16];
    let mut next_id: u16 = 0;
    let mut pending: Vec<usize> = (0..queries.len()).collect();
    let mut answered = vec![false; queries.len()];
    let mut asked: Vec<Option<Instant>> = vec![None; queries.len()];
    let (mut last, mut last_refused) = (since, since);
    let mut cursor = 0;
    let mut buf = vec![0u8; 4096];
    let mut out = [0u8; 512];
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
        let mut sent_now = 0;
        // Once round the pending zones at most, skipping those whose last
        // query may still be answered.
        for _ in 0..pending.len() {
            if sent_now == burst {
                break;
            }
            cursor %= pending.len();
            let i = pending[cursor];
            cursor += 1;
            if asked[i].is_some_and(|t| now.duration_since(t) < RECENT) {
                continue;
            }
            asked[i] = Some(now);
            sent_now += 1;
            let q = &queries[i];
            out[..q.len()].copy_from_slice(q);
            out[..2].copy_from_slice(&next_id.to_be_bytes());
            sent[next_id as usize] = (i, Instant::now());
            let _ = sock.send(&out[..q.len()]);
            next_id = next_id.wrapping_add(1);
        }
        budget -= sent_now as f64;
        std::thread::sleep(TICK.saturating_sub(sent_at.elapsed()));
        tick = (tick + 1) % WINDOW;
        window[tick] = (0, 0);
        loop {
            let n = match sock.recv(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => break, // nothing more to read for now
            };
            let Some(&(i, at)) = buf
                .get(..2)
                .map(|id| &sent[u16::from_be_bytes([id[0], id[1]]) as usize])
            else {
                continue;
            };
            match queries.get(i).and_then(|q| served(&buf[..n], q)) {
                Some(true) => {
                    window[tick].0 += 1;
                    if !answered[i] {
                        answered[i] = true;
                        last = Instant::now();
                    }
                }
                Some(false) => {
                    window[tick].1 += 1;
                    if !answered[i] {
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
        all_after_s: (count == queries.len()).then(|| last.duration_since(since).as_secs_f64()),
        last_refused_s: last_refused.saturating_duration_since(since).as_secs_f64(),
    }
}

/// Whether `response` answers `query` (the same question; IDs are reused)
/// with NOERROR and the SOA first in the answer section; None if it is
/// not an answer to it.
fn served(response: &[u8], query: &[u8]) -> Option<bool> {
    let question = &query[HEADER..]; // the whole rest: no EDNS
    let asked = response.get(HEADER..HEADER + question.len())?;
    if response[2] & 0x80 == 0 || !asked.eq_ignore_ascii_case(question) {
        return None;
    }
    let (rcode, ancount) = (
        response[3] & 0x0F,
        u16::from_be_bytes([response[6], response[7]]),
    );
    if u16::from(rcode) != Rcode::NOERROR.0 || ancount == 0 {
        return Some(false);
    }
    // The first answer's owner: a compression pointer, or labels.
    let mut at = HEADER + question.len();
    loop {
        let len = *response.get(at)? as usize;
        if len & 0xC0 == 0xC0 {
            at += 2;
            break;
        }
        at += 1 + len;
        if len == 0 {
            break;
        }
    }
    let rtype = response.get(at..at + 2)?;
    Some(u16::from_be_bytes([rtype[0], rtype[1]]) == RType::SOA.0)
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

/// Sends `server` a NOTIFY for `zone` announcing `serial` (RFC 1996: AA
/// set, the SOA in the answer section), from 127.0.0.1, as a primary
/// there would; returns when it was sent. The answer is not awaited.
pub fn notify(server: SocketAddr, zone: &Name, serial: u32) -> Result<Instant, String> {
    let message = notify_message(zone, serial);
    let sock = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|e| e.to_string())?;
    let sent = Instant::now();
    sock.send_to(&message, server)
        .map_err(|e| format!("NOTIFY to {server}: {e}"))?;
    Ok(sent)
}

fn notify_message(zone: &Name, serial: u32) -> Vec<u8> {
    let opts = QueryOpts {
        opcode: Opcode::NOTIFY,
        ..QueryOpts::default()
    };
    let mut m = build_query(zone, RType::SOA, &opts);
    m[2] |= 0x04; // AA
    m[7] = 1; // one answer: the SOA
    m.extend_from_slice(&[0xC0, 0x0C]); // the question's name
    m.extend_from_slice(&RType::SOA.0.to_be_bytes());
    m.extend_from_slice(&[0, 1, 0, 0, 0, 0]); // IN, TTL 0
    m.extend_from_slice(&22u16.to_be_bytes());
    m.extend_from_slice(&[0, 0]); // MNAME and RNAME: the root
    for field in [serial, 3600, 600, 86_400, 0] {
        m.extend_from_slice(&field.to_be_bytes());
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `query` answered with `rcode` and, if given, one record of `rtype`
    /// whose owner is a pointer to the question.
    fn answer_to(query: &[u8], rcode: u8, rtype: Option<RType>) -> Vec<u8> {
        let mut r = query.to_vec();
        r[2] |= 0x80;
        r[3] = (r[3] & 0xF0) | rcode;
        if let Some(t) = rtype {
            r[7] = 1;
            r.extend_from_slice(&[0xC0, 0x0C]);
            r.extend_from_slice(&t.0.to_be_bytes());
            r.extend_from_slice(&[0, 1, 0, 0, 0, 60, 0, 0]);
        }
        r
    }

    #[test]
    fn a_notify_announces_the_serial_in_its_soa() {
        let zone = Name::parse("catalog.bench.").unwrap();
        let m = Message::parse(&notify_message(&zone, 7)).unwrap();
        assert_eq!(m.header.opcode(), Opcode::NOTIFY);
        assert!(m.header.flags & 0x0400 != 0, "AA");
        let soa = m.answers.iter().find(|r| r.rtype == RType::SOA).unwrap();
        assert_eq!(rdata::soa_serial(&soa.rdata), Some(7));
    }

    #[test]
    fn served_checks_question_rcode_and_type() {
        let name = Name::parse("Example.test.").unwrap();
        let q = build_query(&name, RType::SOA, &QueryOpts::default());
        assert_eq!(served(&answer_to(&q, 0, Some(RType::SOA)), &q), Some(true));
        assert_eq!(served(&answer_to(&q, 5, None), &q), Some(false));
        assert_eq!(served(&answer_to(&q, 0, None), &q), Some(false));
        assert_eq!(served(&answer_to(&q, 0, Some(RType::NS)), &q), Some(false));
        // Another zone's answer under a reused ID, a query, a short one.
        let other = build_query(
            &Name::parse("other.test.").unwrap(),
            RType::SOA,
            &QueryOpts::default(),
        );
        assert_eq!(served(&answer_to(&other, 0, Some(RType::SOA)), &q), None);
        assert_eq!(served(&q, &q), None);
        assert_eq!(served(&q[..5], &q), None);
        // Case may differ.
        let lower = build_query(&name.to_lowercase(), RType::SOA, &QueryOpts::default());
        assert_eq!(
            served(&answer_to(&lower, 0, Some(RType::SOA)), &q),
            Some(true)
        );
    }
}
