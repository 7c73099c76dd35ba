//! Asking a secondary, over UDP, whether its zones are there yet.

use std::collections::HashMap;
use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use heron_proto::message::Message;
use heron_proto::{Name, RType, Rcode, rdata};
use heron_testkit::{QueryOpts, build_query};

/// Queries sent before the answers are read.
const BURST: usize = 2000;
/// How long answers are awaited after a burst.
const DRAIN: Duration = Duration::from_millis(5);

/// When every zone answered.
#[derive(Debug)]
pub struct Arrival {
    /// Zones that answered (with their SOA) before the deadline.
    pub answered: usize,
    /// Seconds from `since` to the last zone's first answer, if all did.
    pub all_after_s: Option<f64>,
}

/// Sends SOA queries for the zones that have not answered yet, round
/// robin, until each has answered NOERROR with its SOA or `deadline`
/// passes, or `alive` says the server is gone. The load is bounded: bursts
/// of 2,000 queries, each followed by up to 5 ms of reading.
pub fn until_all_answer(
    server: SocketAddr,
    origins: &[String],
    since: Instant,
    deadline: Instant,
    alive: &mut dyn FnMut() -> bool,
) -> Arrival {
    let sock = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).expect("a UDP socket");
    sock.set_read_timeout(Some(Duration::from_millis(1)))
        .unwrap();
    let names: Vec<Name> = origins
        .iter()
        .map(|o| Name::parse(o).expect("origin"))
        .collect();
    let index: HashMap<Vec<u8>, usize> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.to_lowercase().as_wire().to_vec(), i))
        .collect();
    let mut pending: Vec<usize> = (0..names.len()).collect();
    let mut answered = vec![false; names.len()];
    let mut last = since;
    let mut cursor = 0;
    let mut buf = vec![0u8; 4096];
    while !pending.is_empty() && Instant::now() < deadline && alive() {
        for _ in 0..BURST.min(pending.len()) {
            cursor %= pending.len();
            let i = pending[cursor];
            let q = build_query(
                &names[i],
                RType::SOA,
                &QueryOpts {
                    id: i as u16,
                    ..QueryOpts::default()
                },
            );
            let _ = sock.send_to(&q, server);
            cursor += 1;
        }
        let drain_until = Instant::now() + DRAIN;
        while Instant::now() < drain_until {
            match sock.recv_from(&mut buf) {
                Ok((n, _)) => {
                    if let Some(i) = answered_zone(&buf[..n], &index)
                        && !answered[i]
                    {
                        answered[i] = true;
                        last = Instant::now();
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(_) => break,
            }
        }
        pending.retain(|&i| !answered[i]);
    }
    let count = answered.iter().filter(|a| **a).count();
    Arrival {
        answered: count,
        all_after_s: (count == names.len()).then(|| last.duration_since(since).as_secs_f64()),
    }
}

/// The zone whose SOA `response` carries, if it is a NOERROR answer.
fn answered_zone(response: &[u8], index: &HashMap<Vec<u8>, usize>) -> Option<usize> {
    let m = Message::parse(response).ok()?;
    if m.rcode() != Rcode::NOERROR {
        return None;
    }
    let q = m.questions.first()?;
    let i = *index.get(q.name.to_lowercase().as_wire())?;
    m.answers.iter().any(|r| r.rtype == RType::SOA).then_some(i)
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
