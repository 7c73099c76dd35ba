//! Memory per idle TCP connection: each DNS server is sent thousands of
//! TCP connections that each ask one question and then stay open, silent.
//! The server's memory is read before and with them held, so the growth
//! per connection is what an operator pays for clients that hold
//! connections open (RFC 7766 lets them). Kernel socket memory is not in
//! a process's RSS and is the same for every server, so it is left out.
//!
//! Every connection is checked twice: answered when opened, and answered
//! again after the memory was read (so a server that quietly dropped
//! connections is not credited with the memory it saved), and the server
//! must still answer a new TCP client and UDP at the full count. The
//! connections close with SO_LINGER 0 (a reset), leaving no TIME_WAIT to
//! fill the port range for what runs next.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::Ctx;
use crate::interrupt::interrupted;
use crate::results::{IdlePoint, IdleTcp};
use crate::servers::{Kind, Launch};
use crate::workloads::Workload;
use heron_proto::message::{Header, flags};
use heron_proto::{Name, RType};
use heron_testkit::{QueryOpts, build_query, try_query_tcp, try_query_udp};

/// Connections held, in steps, for the full suite and for `--quick`.
pub const COUNTS: [usize; 2] = [1_000, 10_000];
pub const QUICK_COUNTS: [usize; 2] = [100, 1_000];
/// Opened at once before their answers are read: well inside every
/// server's listen backlog, so no SYN waits for a retransmission.
const OPEN_BATCH: usize = 100;
/// How long one connection may take to be accepted and answered.
const ANSWER_WAIT: Duration = Duration::from_secs(5);
/// Quiet time before memory is read, for the servers to finish settling
/// the last connections.
const SETTLE: Duration = Duration::from_millis(500);

/// The memory of a server's processes: (RSS, PSS) in KiB.
pub trait MemoryProbe {
    fn memory(&self) -> (u64, u64);
}

impl MemoryProbe for crate::servers::Server {
    fn memory(&self) -> (u64, u64) {
        let (rss, pss, _) = self.memory_kib();
        (rss, pss)
    }
}

/// Holds `counts` connections in turn (each step adds to the last) to
/// `addr`, asking for the SOA of `origin`; `memory` reads the server.
pub fn measure(
    addr: SocketAddr,
    origin: &str,
    counts: &[usize],
    memory: &dyn MemoryProbe,
) -> Result<IdleTcp, String> {
    let name = Name::parse(origin).map_err(|e| format!("bad origin {origin}: {e}"))?;
    let query = |id: u16| {
        build_query(
            &name,
            RType::SOA,
            &QueryOpts {
                id,
                ..QueryOpts::default()
            },
        )
    };
    let (base_rss_kib, base_pss_kib) = memory.memory();
    let mut result = IdleTcp {
        base_rss_kib,
        base_pss_kib,
        ..IdleTcp::default()
    };
    let mut conns: Vec<TcpStream> = Vec::with_capacity(counts.iter().copied().max().unwrap_or(0));
    let mut failed_opens = 0usize;
    for &count in counts {
        let started = Instant::now();
        while conns.len() + failed_opens < count {
            let want = OPEN_BATCH.min(count - conns.len() - failed_opens);
            let (opened, failed) = open_batch(addr, want, &query)?;
            failed_opens += failed;
            conns.extend(opened);
        }
        let open_s = started.elapsed().as_secs_f64();
        std::thread::sleep(SETTLE);
        let (rss_kib, pss_kib) = memory.memory();
        let held = ask_again(&mut conns, &query);
        let new_tcp_answered = answered(try_query_tcp(addr, &query(1)).ok(), 1);
        let udp_answered = answered(try_query_udp(addr, &query(2)).ok(), 2);
        let opened = count - failed_opens;
        result.points.push(IdlePoint {
            connections: count,
            opened,
            held,
            rss_kib,
            pss_kib,
            bytes_per_connection: per_connection(base_pss_kib, pss_kib, opened),
            new_tcp_answered,
            udp_answered,
            open_s,
        });
    }
    for c in conns.drain(..) {
        close_with_reset(c);
    }
    Ok(result)
}

/// Opens `n` connections, sends each a query, and keeps those answered;
/// returns them and how many failed.
fn open_batch(
    addr: SocketAddr,
    n: usize,
    query: &dyn Fn(u16) -> Vec<u8>,
) -> Result<(Vec<TcpStream>, usize), String> {
    let mut sent = Vec::with_capacity(n);
    let mut failed = 0;
    for i in 0..n {
        let id = 0x1000 + i as u16;
        match TcpStream::connect_timeout(&addr, ANSWER_WAIT).and_then(|mut s| {
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(ANSWER_WAIT))?;
            s.write_all(&framed(&query(id)))?;
            Ok(s)
        }) {
            Ok(s) => sent.push((s, id)),
            // Our own descriptor limit is a fault of the setup, not of
            // the server: say so rather than count it against the server.
            Err(e) if heron_sys::process::is_open_files_limit(&e) => {
                return Err(format!("out of file descriptors after {i} in a batch: {e}"));
            }
            Err(_) => failed += 1,
        }
    }
    let mut kept = Vec::with_capacity(sent.len());
    for (mut s, id) in sent {
        if answered(read_framed(&mut s).ok(), id) {
            kept.push(s);
        } else {
            failed += 1;
            close_with_reset(s);
        }
    }
    Ok((kept, failed))
}

/// Asks every connection once more; keeps the ones answered and returns
/// how many were.
fn ask_again(conns: &mut Vec<TcpStream>, query: &dyn Fn(u16) -> Vec<u8>) -> usize {
    const ID: u16 = 0x7777;
    let mut live = vec![false; conns.len()];
    for (i, c) in conns.iter_mut().enumerate() {
        live[i] = c.write_all(&framed(&query(ID))).is_ok();
    }
    for (i, c) in conns.iter_mut().enumerate() {
        live[i] = live[i] && answered(read_framed(c).ok(), ID);
    }
    let mut i = 0;
    conns.retain(|_| {
        i += 1;
        live[i - 1]
    });
    conns.len()
}

fn framed(msg: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(msg.len() + 2);
    out.extend_from_slice(&(msg.len() as u16).to_be_bytes());
    out.extend_from_slice(msg);
    out
}

fn read_framed(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 2];
    s.read_exact(&mut len)?;
    let mut msg = vec![0u8; u16::from_be_bytes(len) as usize];
    s.read_exact(&mut msg)?;
    Ok(msg)
}

/// Whether `response` answers query `id` with NOERROR and an answer.
fn answered(response: Option<Vec<u8>>, id: u16) -> bool {
    response
        .as_deref()
        .and_then(Header::read)
        .is_some_and(|h| h.id == id && h.has(flags::QR) && h.rcode() == 0 && h.ancount > 0)
}

fn per_connection(base_kib: u64, kib: u64, connections: usize) -> f64 {
    if connections == 0 {
        return 0.0;
    }
    kib.saturating_sub(base_kib) as f64 * 1024.0 / connections as f64
}

/// Closes with a reset: no TIME_WAIT left behind on either side.
fn close_with_reset(s: TcpStream) {
    let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
}

/// Each DNS server holding idle TCP connections ([`crate::idle_tcp`]),
/// configured to accept a few more than the most it is sent.
pub(crate) fn run(ctx: &mut Ctx, w: &Workload, kinds: &[Kind]) -> Vec<IdleTcp> {
    let counts = if ctx.args.quick { QUICK_COUNTS } else { COUNTS };
    let most = counts.iter().copied().max().unwrap_or(0);
    ctx.say(&format!(
        "idle TCP connections: memory with {} held",
        counts.map(|c| c.to_string()).join(" and ")
    ));
    let launch = Launch {
        tcp_clients_max: most + most / 10,
        ..ctx.launch.clone()
    };
    let mut all = Vec::new();
    for &kind in kinds.iter().filter(|k| k.is_dns()) {
        let idle = ctx
            .start_with(kind, w, None, &launch)
            .and_then(|server| {
                let origin = w.ready.first().map_or(".", String::as_str);
                measure(server.addr, origin, &counts, &server)
            })
            .unwrap_or_else(|e| IdleTcp {
                error: Some(e),
                ..IdleTcp::default()
            });
        let idle = IdleTcp {
            server: kind.name().into(),
            ..idle
        };
        for p in &idle.points {
            ctx.say(&format!(
                "  {}: {} held of {} ({} opened), PSS {} -> {} KiB, {:.0} bytes each; \
                 new TCP answered {}, UDP answered {}",
                kind.name(),
                p.held,
                p.connections,
                p.opened,
                idle.base_pss_kib,
                p.pss_kib,
                p.bytes_per_connection,
                p.new_tcp_answered,
                p.udp_answered
            ));
        }
        if let Some(e) = &idle.error {
            ctx.say(&format!("  {}: ERROR {e}", kind.name()));
        }
        all.push(idle);
        if interrupted() {
            break;
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A TCP DNS stand-in that answers every query with the question and
    /// one empty answer count set, holding each connection in a thread.
    fn answering_server(max_answers_per_conn: usize) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in listener.incoming() {
                let Ok(mut s) = s else { return };
                std::thread::spawn(move || {
                    for _ in 0..max_answers_per_conn {
                        let Ok(mut q) = read_framed(&mut s) else {
                            return;
                        };
                        q[2] |= 0x80; // QR
                        q[7] = 1; // ANCOUNT = 1
                        if s.write_all(&framed(&q)).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    struct Fixed;
    impl MemoryProbe for Fixed {
        fn memory(&self) -> (u64, u64) {
            (1000, 1000)
        }
    }

    #[test]
    fn every_connection_is_counted_when_the_server_holds_them() {
        let addr = answering_server(usize::MAX);
        let r = measure(addr, "example.", &[5, 12], &Fixed).unwrap();
        let points = &r.points;
        assert_eq!(points.len(), 2);
        assert_eq!((points[0].opened, points[0].held), (5, 5));
        assert_eq!((points[1].opened, points[1].held), (12, 12));
        assert!(points[1].new_tcp_answered);
        // The stand-in has no UDP socket.
        assert!(!points[1].udp_answered);
        assert_eq!(r.base_pss_kib, 1000);
    }

    #[test]
    fn a_connection_the_server_stops_answering_is_not_held() {
        // Answers the first query on each connection, then hangs up.
        let addr = answering_server(1);
        let points = measure(addr, "example.", &[4], &Fixed).unwrap().points;
        assert_eq!((points[0].opened, points[0].held), (4, 0));
    }

    #[test]
    fn growth_per_connection_is_in_bytes() {
        assert_eq!(per_connection(1000, 2000, 1024), 1000.0);
        assert_eq!(per_connection(2000, 1000, 10), 0.0);
        assert_eq!(per_connection(1000, 2000, 0), 0.0);
    }
}
