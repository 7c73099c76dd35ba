//! Sending a batch of probes to a server and collecting its answers: over
//! UDP, many queries in flight on a few sockets (a bounded window each),
//! every query retried a bounded number of times with a growing timeout;
//! over TCP, pipelined on a few connections at once. An answer counts only
//! from the server's address, with the query's ID and its question.
//!
//! Or, for Heron in this process ([`InProcess`]), each query handed to the
//! query processor the server itself answers with.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use heron_proto::message::{HEADER_LEN, Header, flags};
use heron_server::processor::{Outcome, Processor, Request, Transport};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

use super::classify::Got;
use super::probes::Probe;

/// How hard to try.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Queries in flight per UDP socket.
    pub window: usize,
    /// UDP sockets (and TCP connections) used at once.
    pub sockets: usize,
    /// The first try's timeout; each retry waits twice as long.
    pub timeout: Duration,
    /// Tries per query, the first included.
    pub tries: u32,
}

/// Queries pipelined on one TCP connection.
const TCP_BATCH: usize = 50;

/// A server over the network.
pub struct Remote {
    pub addr: SocketAddr,
    pub limits: Limits,
}

impl Remote {
    /// What the server answered to each of `probes`, in their order.
    pub async fn ask(&self, probes: &[Probe]) -> std::io::Result<Vec<Got>> {
        let mut got = vec![Got::NoAnswer; probes.len()];
        let (tcp, udp): (Vec<usize>, Vec<usize>) =
            (0..probes.len()).partition(|&i| probes[i].variant.is_tcp());
        let per_socket = udp.len().div_ceil(self.limits.sockets.max(1)).max(1);
        let mut tasks = tokio::task::JoinSet::new();
        for part in udp.chunks(per_socket) {
            let queries: Vec<(usize, Vec<u8>)> =
                part.iter().map(|&i| (i, probes[i].query(0))).collect();
            let (addr, limits) = (self.addr, self.limits);
            tasks.spawn(async move { udp_exchange(addr, limits, queries).await });
        }
        for part in tcp.chunks(TCP_BATCH) {
            let queries: Vec<(usize, Vec<u8>)> =
                part.iter().map(|&i| (i, probes[i].query(0))).collect();
            let (addr, limits) = (self.addr, self.limits);
            tasks.spawn(async move { tcp_exchange(addr, limits, queries).await });
        }
        while let Some(done) = tasks.join_next().await {
            let answers = done.map_err(std::io::Error::other)??;
            for (i, answer) in answers {
                got[i] = Got::Answer(answer);
            }
        }
        Ok(got)
    }
}

/// Where a query is in its tries.
struct Pending {
    query: Vec<u8>,
    tries: u32,
    answered: bool,
}

/// Whether `answer` answers `query`: the ID, QR, and the question as sent.
fn answers(query: &[u8], answer: &[u8]) -> bool {
    let (Some(q), Some(a)) = (Header::read(query), Header::read(answer)) else {
        return false;
    };
    let question = &query[HEADER_LEN..];
    let qlen = question.len() - if q.arcount > 0 { 11 } else { 0 };
    a.id == q.id
        && a.has(flags::QR)
        && (a.qdcount == 0 || answer.get(HEADER_LEN..HEADER_LEN + qlen) == Some(&question[..qlen]))
}

/// Sends `queries` (whose IDs this sets) on one socket; returns the
/// answers received, by their index.
async fn udp_exchange(
    server: SocketAddr,
    limits: Limits,
    queries: Vec<(usize, Vec<u8>)>,
) -> std::io::Result<Vec<(usize, Vec<u8>)>> {
    let local: SocketAddr = match server {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = UdpSocket::bind(local).await?;
    let mut out = Vec::with_capacity(queries.len());
    // IDs are slots; batches of at most 65,536 queries each.
    for batch in queries.chunks(1 << 16) {
        udp_batch(&socket, server, limits, batch, &mut out).await?;
    }
    Ok(out)
}

async fn udp_batch(
    socket: &UdpSocket,
    server: SocketAddr,
    limits: Limits,
    batch: &[(usize, Vec<u8>)],
    out: &mut Vec<(usize, Vec<u8>)>,
) -> std::io::Result<()> {
    let mut pending: Vec<Pending> = batch
        .iter()
        .enumerate()
        .map(|(slot, (_, q))| {
            let mut query = q.clone();
            query[..2].copy_from_slice(&(slot as u16).to_be_bytes());
            Pending {
                query,
                tries: 0,
                answered: false,
            }
        })
        .collect();
    let mut deadlines: BinaryHeap<Reverse<(Instant, usize)>> = BinaryHeap::new();
    let (mut next, mut in_flight, mut left) = (0, 0, batch.len());
    let mut window = Window::new(limits.window);
    let mut buf = vec![0u8; 65_535];
    while left > 0 {
        while in_flight < window.size() && next < pending.len() {
            send_try(
                socket,
                server,
                limits,
                &mut pending[next],
                next,
                &mut deadlines,
            )
            .await?;
            (next, in_flight) = (next + 1, in_flight + 1);
        }
        let wait = deadlines.peek().map_or(limits.timeout, |Reverse((at, _))| {
            at.saturating_duration_since(Instant::now())
        });
        if let Ok(received) = tokio::time::timeout(wait, socket.recv_from(&mut buf)).await {
            let (len, from) = received?;
            let answer = &buf[..len];
            let slot = Header::read(answer).map_or(usize::MAX, |h| h.id as usize);
            if let Some(p) = pending.get_mut(slot)
                && from == server
                && !p.answered
                && p.tries > 0
                && answers(&p.query, answer)
            {
                p.answered = true;
                window.answered();
                out.push((batch[slot].0, answer.to_vec()));
                (in_flight, left) = (in_flight - 1, left - 1);
            }
        }
        let now = Instant::now();
        while let Some(&Reverse((at, slot))) = deadlines.peek() {
            if at > now {
                break;
            }
            deadlines.pop();
            let p = &mut pending[slot];
            if p.answered {
                continue;
            }
            window.lost();
            if p.tries >= limits.tries {
                (in_flight, left) = (in_flight - 1, left - 1);
                p.answered = true; // given up: stays NoAnswer
                continue;
            }
            send_try(socket, server, limits, p, slot, &mut deadlines).await?;
        }
    }
    Ok(())
}

/// Queries in flight on a socket: halved at each loss (a server, or its
/// socket buffer, that cannot keep up drops queries), grown by one a
/// window's worth of answers, up to `--window` (TCP's AIMD).
struct Window {
    size: f64,
    max: f64,
}

impl Window {
    const MIN: f64 = 4.0;

    fn new(max: usize) -> Window {
        let max = (max as f64).max(1.0);
        Window { size: max, max }
    }

    fn size(&self) -> usize {
        self.size as usize
    }

    fn answered(&mut self) {
        self.size = (self.size + 1.0 / self.size).min(self.max);
    }

    fn lost(&mut self) {
        self.size = (self.size / 2.0).max(Self::MIN.min(self.max));
    }
}

async fn send_try(
    socket: &UdpSocket,
    server: SocketAddr,
    limits: Limits,
    p: &mut Pending,
    slot: usize,
    deadlines: &mut BinaryHeap<Reverse<(Instant, usize)>>,
) -> std::io::Result<()> {
    let wait = limits.timeout * 2u32.saturating_pow(p.tries.min(8));
    p.tries += 1;
    // A full socket buffer is a loss, which the retry covers.
    if let Err(e) = socket.send_to(&p.query, server).await
        && e.kind() != std::io::ErrorKind::WouldBlock
        && e.raw_os_error() != Some(105)
    {
        return Err(e);
    }
    deadlines.push(Reverse((Instant::now() + wait, slot)));
    Ok(())
}

/// The answers to `queries` pipelined on a connection; those missing are
/// asked again on a new one, up to `limits.tries` connections.
async fn tcp_exchange(
    server: SocketAddr,
    limits: Limits,
    queries: Vec<(usize, Vec<u8>)>,
) -> std::io::Result<Vec<(usize, Vec<u8>)>> {
    let mut out = Vec::new();
    let mut todo: Vec<(usize, Vec<u8>)> = queries
        .into_iter()
        .enumerate()
        .map(|(slot, (i, mut q))| {
            q[..2].copy_from_slice(&(slot as u16).to_be_bytes());
            (i, q)
        })
        .collect();
    for attempt in 0..limits.tries.max(1) {
        let wait = limits.timeout * 2u32.saturating_pow(attempt.min(8)) * 4;
        let got = tokio::time::timeout(wait, tcp_once(server, &todo)).await;
        let received = match got {
            Ok(Ok(received)) => received,
            Ok(Err(_)) | Err(_) => Vec::new(),
        };
        let mut answered = vec![false; todo.len()];
        for answer in received {
            let found = todo.iter().position(|(_, q)| answers(q, &answer));
            if let Some(at) = found.filter(|&at| !answered[at]) {
                answered[at] = true;
                out.push((todo[at].0, answer));
            }
        }
        let mut flags = answered.into_iter();
        todo.retain(|_| !flags.next().unwrap_or(false));
        if todo.is_empty() {
            break;
        }
    }
    Ok(out)
}

/// One connection: every query written, then every answer read (until
/// as many came as were asked, or the server closes).
async fn tcp_once(server: SocketAddr, todo: &[(usize, Vec<u8>)]) -> std::io::Result<Vec<Vec<u8>>> {
    let mut stream = TcpStream::connect(server).await?;
    stream.set_nodelay(true)?;
    let mut framed = Vec::new();
    for (_, q) in todo {
        framed.extend_from_slice(&(q.len() as u16).to_be_bytes());
        framed.extend_from_slice(q);
    }
    stream.write_all(&framed).await?;
    let mut answers = Vec::with_capacity(todo.len());
    while answers.len() < todo.len() {
        let len = match stream.read_u16().await {
            Ok(len) => len as usize,
            Err(_) => break,
        };
        let mut answer = vec![0u8; len];
        stream.read_exact(&mut answer).await?;
        answers.push(answer);
    }
    Ok(answers)
}

/// Heron in this process: the query processor `heron serve` answers with,
/// over the loaded zones.
pub struct InProcess {
    pub processor: Arc<Processor>,
}

impl InProcess {
    /// What Heron answers to each of `probes`, in their order.
    pub fn ask(&self, probes: &[Probe]) -> Vec<Got> {
        let peer: SocketAddr = (Ipv4Addr::LOCALHOST, 53_000).into();
        let now = heron_server::service::unix_now();
        let mut events = Vec::new();
        probes
            .iter()
            .enumerate()
            .map(|(i, probe)| {
                let query = probe.query(i as u16);
                let request = Request {
                    bytes: &query,
                    peer,
                    transport: if probe.variant.is_tcp() {
                        Transport::Tcp
                    } else {
                        Transport::Udp
                    },
                    now,
                    local: None,
                    received: Instant::now(),
                };
                let mut out = Vec::with_capacity(512);
                let outcome = self.processor.process(&request, &mut out, &mut events);
                events.clear();
                match outcome {
                    Outcome::Response => Got::Answer(out),
                    Outcome::Nothing | Outcome::Transfer(_) | Outcome::Update(_) => Got::NoAnswer,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_halves_at_a_loss_and_grows_back_to_its_limit() {
        let mut w = Window::new(64);
        assert_eq!(w.size(), 64);
        w.lost();
        assert_eq!(w.size(), 32);
        (0..10).for_each(|_| w.lost());
        assert_eq!(w.size(), 4);
        (0..10_000).for_each(|_| w.answered());
        assert_eq!(w.size(), 64);
        let mut one = Window::new(1);
        one.lost();
        assert_eq!(one.size(), 1);
    }

    #[test]
    fn an_answer_must_echo_id_and_question() {
        let probe = Probe {
            qname: heron_proto::Name::parse("a.test").unwrap(),
            qtype: heron_proto::RType::A,
            variant: super::super::probes::Variant::Udp1232,
            kind: super::super::probes::Kind::Existing,
        };
        let query = probe.query(5);
        let mut answer = query[..query.len() - 11].to_vec();
        answer[2] |= 0x80;
        answer[11] = 0; // no OPT
        assert!(answers(&query, &answer));
        let mut other_id = answer.clone();
        other_id[1] = 6;
        assert!(!answers(&query, &other_id));
        let mut other_name = answer.clone();
        other_name[13] = b'b';
        assert!(!answers(&query, &other_name));
        let mut not_response = answer.clone();
        not_response[2] &= 0x7F;
        assert!(!answers(&query, &not_response));
        assert!(!answers(&query, &answer[..5]));
    }
}
