//! `blast` over TCP: one thread drives many connections (epoll through
//! `mio`), each with up to `in_flight` pipelined queries. At a fixed rate
//! it is open loop as far as TCP lets it be: queries go out on schedule
//! to the next connection with a free slot, and those due while every
//! slot is taken are not sent (the offered rate achieved shows it); with
//! rate 0 every free slot is refilled at once. Queries due on one
//! connection in one turn go out in one write. A query unanswered when
//! the drain ends is lost. Every run is bounded by its duration and
//! drain.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use crate::blast::{BlastResult, QuerySet};
use crate::stats::Histogram;

#[derive(Clone, Debug)]
pub struct TcpBlastOpts {
    pub target: SocketAddr,
    /// Offered queries per second; 0 = keep every slot full.
    pub rate: f64,
    pub connections: usize,
    /// Queries outstanding at most on each connection.
    pub in_flight: usize,
    pub duration: Duration,
    /// After sending stops, wait this long at most for the last answers.
    pub drain: Duration,
    /// Longest wait for all the connections to open.
    pub connect_timeout: Duration,
}

/// One connection: send times per slot (the slot is the DNS ID), the
/// bytes not yet written and the start of an answer not yet whole.
struct Conn {
    stream: TcpStream,
    /// Send time (ns since start, +1) per slot; 0 = free.
    sent_at: Vec<u64>,
    busy: usize,
    out: Vec<u8>,
    input: Vec<u8>,
    closed: bool,
}

impl Conn {
    fn free_slot(&self) -> Option<usize> {
        if self.closed || self.busy == self.sent_at.len() {
            return None;
        }
        self.sent_at.iter().position(|&t| t == 0)
    }

    /// Writes what is pending until the socket takes no more.
    fn flush(&mut self) -> io::Result<()> {
        while !self.out.is_empty() {
            match self.stream.write(&self.out) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => drop(self.out.drain(..n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Opens the connections (a few hundred at a time before any is used).
fn open(opts: &TcpBlastOpts, poll: &Poll) -> io::Result<Vec<Conn>> {
    let deadline = Instant::now() + opts.connect_timeout;
    let slots = opts.in_flight.clamp(1, u16::MAX as usize);
    let mut conns = Vec::with_capacity(opts.connections);
    for i in 0..opts.connections {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("{i} of {} connections opened in time", opts.connections),
            ));
        }
        let std = std::net::TcpStream::connect_timeout(&opts.target, left)?;
        std.set_nodelay(true)?;
        std.set_nonblocking(true)?;
        let mut stream = TcpStream::from_std(std);
        poll.registry().register(
            &mut stream,
            Token(i),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        conns.push(Conn {
            stream,
            sent_at: vec![0; slots],
            busy: 0,
            out: Vec::new(),
            input: Vec::new(),
            closed: false,
        });
    }
    Ok(conns)
}

/// Runs one bounded load over TCP.
pub fn blast_tcp(queries: &QuerySet, opts: &TcpBlastOpts) -> io::Result<BlastResult> {
    assert!(!queries.is_empty());
    let mut poll = Poll::new()?;
    let mut conns = open(opts, &poll)?;
    if conns.is_empty() {
        return Err(io::Error::other("no connections"));
    }
    let mut events = Events::with_capacity(1024);
    let mut hist = Histogram::default();
    let mut r = BlastResult {
        target_rate: opts.rate,
        ..BlastResult::default()
    };
    let start = Instant::now();
    let send_ns = opts.duration.as_nanos() as u64;
    let end_ns = send_ns + opts.drain.as_nanos() as u64;
    let (mut qi, mut rr) = (0usize, 0usize);
    let mut outstanding = 0u64;
    let mut touched: Vec<usize> = Vec::new();
    // Bounded: the loop ends at `end_ns` at the latest.
    loop {
        let now = start.elapsed().as_nanos() as u64;
        let sending = now < send_ns;
        if !sending && (outstanding == 0 || now >= end_ns) {
            break;
        }
        if sending {
            let mut due = match opts.rate > 0.0 {
                true => ((now as f64 * opts.rate / 1e9) as u64).saturating_sub(r.sent),
                false => u64::MAX,
            };
            // One pass over the connections at most per turn: at a rate
            // each query goes to the next connection, in a closed loop each
            // connection is filled in turn.
            let mut tried = 0;
            while due > 0 && tried < conns.len() {
                let c = &mut conns[rr];
                let Some(slot) = c.free_slot() else {
                    tried += 1;
                    rr = (rr + 1) % conns.len();
                    continue;
                };
                let q = queries.get(qi);
                qi = (qi + 1) % queries.len();
                c.out.extend_from_slice(&(q.len() as u16).to_be_bytes());
                let at = c.out.len();
                c.out.extend_from_slice(q);
                c.out[at..at + 2].copy_from_slice(&(slot as u16).to_be_bytes());
                c.sent_at[slot] = now + 1;
                c.busy += 1;
                touched.push(rr);
                r.sent += 1;
                outstanding += 1;
                due -= 1;
                if opts.rate > 0.0 {
                    rr = (rr + 1) % conns.len();
                }
            }
            touched.sort_unstable();
            touched.dedup();
            for &i in &touched {
                if conns[i].flush().is_err() {
                    outstanding -= close(&mut conns[i]);
                }
            }
            touched.clear();
        }
        poll.poll(&mut events, Some(Duration::ZERO))?;
        let t = start.elapsed().as_nanos() as u64 + 1;
        for ev in events.iter() {
            let c = &mut conns[ev.token().0];
            if ev.is_writable() && c.flush().is_err() {
                outstanding -= close(c);
                continue;
            }
            if ev.is_readable() {
                let answered = read_answers(c, t, &mut hist, &mut r);
                outstanding -= answered;
                if c.closed {
                    outstanding -= close(c);
                }
            }
        }
    }
    r.duration_s = send_ns as f64 / 1e9;
    r.lost = r.sent - r.answered;
    r.offered_qps = r.sent as f64 / r.duration_s.max(1e-9);
    r.answered_qps = r.answered as f64 / r.duration_s.max(1e-9);
    r.loss_pct = match r.sent {
        0 => 0.0,
        sent => r.lost as f64 * 100.0 / sent as f64,
    };
    r.lat_avg_us = hist.mean() / 1e3;
    r.lat_p50_us = hist.percentile(50.0) as f64 / 1e3;
    r.lat_p99_us = hist.percentile(99.0) as f64 / 1e3;
    r.lat_p999_us = hist.percentile(99.9) as f64 / 1e3;
    r.lat_max_us = hist.max() as f64 / 1e3;
    Ok(r)
}

/// Marks `c` closed; the queries it still had outstanding (now lost).
fn close(c: &mut Conn) -> u64 {
    c.closed = true;
    let lost = c.busy as u64;
    c.sent_at.fill(0);
    c.busy = 0;
    lost
}

/// Reads what `c` has (until the socket is empty) and counts the whole
/// answers in it; returns how many matched an outstanding query. Sets
/// `closed` at end of stream or on an error.
fn read_answers(c: &mut Conn, t: u64, hist: &mut Histogram, r: &mut BlastResult) -> u64 {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match c.stream.read(&mut buf) {
            Ok(0) => {
                c.closed = true;
                break;
            }
            Ok(n) => c.input.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => {
                c.closed = true;
                break;
            }
        }
    }
    let mut answered = 0;
    let mut at = 0;
    while c.input.len() - at >= 2 {
        let len = u16::from_be_bytes([c.input[at], c.input[at + 1]]) as usize;
        if c.input.len() - at - 2 < len {
            break;
        }
        let msg = &c.input[at + 2..at + 2 + len];
        at += 2 + len;
        if len < 12 || msg[2] & 0x80 == 0 {
            r.unmatched += 1;
            continue;
        }
        let slot = u16::from_be_bytes([msg[0], msg[1]]) as usize;
        let Some(sent) = c.sent_at.get_mut(slot).filter(|s| **s != 0) else {
            r.unmatched += 1;
            continue;
        };
        hist.record(t - *sent);
        *sent = 0;
        c.busy -= 1;
        answered += 1;
        r.answered += 1;
        match msg[3] & 0x0F {
            0 => r.noerror += 1,
            3 => r.nxdomain += 1,
            _ => r.other_rcode += 1,
        }
    }
    c.input.drain(..at);
    answered
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A TCP echo that sets QR on every framed message, a thread per
    /// connection, each ending when its client closes.
    fn echo() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in listener.incoming() {
                let Ok(mut s) = s else { return };
                std::thread::spawn(move || {
                    let mut len = [0u8; 2];
                    while s.read_exact(&mut len).is_ok() {
                        let mut msg = vec![0u8; u16::from_be_bytes(len) as usize];
                        if s.read_exact(&mut msg).is_err() {
                            return;
                        }
                        msg[2] |= 0x80;
                        if s.write_all(&len).and_then(|()| s.write_all(&msg)).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    fn set() -> QuerySet {
        let names = ["a.example.", "b.example."].map(|n| heron_proto::Name::parse(n).unwrap());
        QuerySet::of_questions(&names.map(|n| (n, heron_proto::RType::A)))
    }

    fn opts(target: SocketAddr, rate: f64) -> TcpBlastOpts {
        TcpBlastOpts {
            target,
            rate,
            connections: 8,
            in_flight: 4,
            duration: Duration::from_millis(300),
            drain: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(5),
        }
    }

    #[test]
    fn paced_queries_are_all_answered_by_an_echo() {
        let r = blast_tcp(&set(), &opts(echo(), 2_000.0)).unwrap();
        // Paced at 2,000/s for 0.3 s: never more than the schedule allows.
        assert!(r.sent > 0 && r.sent <= 700, "{r:?}");
        assert_eq!(r.answered, r.sent, "{r:?}");
        assert_eq!((r.lost, r.unmatched), (0, 0));
        assert_eq!(r.noerror, r.answered);
    }

    #[test]
    fn a_closed_loop_gets_every_query_answered() {
        let r = blast_tcp(&set(), &opts(echo(), 0.0)).unwrap();
        assert!(r.sent >= 32, "{r:?}");
        assert_eq!(r.answered, r.sent, "{r:?}");
    }

    #[test]
    fn a_server_that_hangs_up_loses_what_was_outstanding() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            // Accept each connection and close it at once.
            for s in listener.incoming().take(8) {
                drop(s);
            }
        });
        let r = blast_tcp(&set(), &opts(addr, 0.0)).unwrap();
        assert_eq!(r.answered, 0);
        assert_eq!(r.lost, r.sent);
    }
}
