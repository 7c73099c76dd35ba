//! A relay in front of a real server that rewrites its responses: a
//! server that answers like the one behind it but for one planted fault
//! (an AA bit cleared, say), for tests of tools that must notice it.
//! UDP and TCP, on 127.0.0.1; it stops when dropped.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::client::{framed, read_framed};
use crate::{try_query_tcp, try_query_udp};

/// What is done to each response before it is sent on.
pub type Rewrite = fn(&mut Vec<u8>);

pub struct Relay {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// How often the loops look at the stop flag.
const POLL: Duration = Duration::from_millis(50);

/// A UDP socket on a free port and a TCP listener on the same port: the
/// port the kernel picks for UDP may be taken for TCP by another test,
/// so a few ports are tried.
fn bind_pair() -> (UdpSocket, TcpListener) {
    for _ in 0..20 {
        let udp = UdpSocket::bind("127.0.0.1:0").expect("bind the relay's UDP socket");
        let addr = udp.local_addr().expect("its address");
        if let Ok(tcp) = TcpListener::bind(addr) {
            return (udp, tcp);
        }
    }
    panic!("no port free for both UDP and TCP in 20 tries");
}

impl Relay {
    /// Relays to `upstream`, each response passed through `rewrite`.
    pub fn start(upstream: SocketAddr, rewrite: Rewrite) -> Relay {
        let (udp, tcp) = bind_pair();
        let addr = udp.local_addr().expect("its address");
        udp.set_read_timeout(Some(POLL)).expect("a read timeout");
        tcp.set_nonblocking(true).expect("a non-blocking listener");
        let stop = Arc::new(AtomicBool::new(false));
        let (s1, s2) = (stop.clone(), stop.clone());
        let threads = vec![
            std::thread::spawn(move || relay_udp(udp, upstream, rewrite, &s1)),
            std::thread::spawn(move || relay_tcp(tcp, upstream, rewrite, &s2)),
        ];
        Relay {
            addr,
            stop,
            threads,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn relay_udp(socket: UdpSocket, upstream: SocketAddr, rewrite: Rewrite, stop: &AtomicBool) {
    let mut buf = vec![0u8; 65_535];
    while !stop.load(Ordering::Relaxed) {
        let Ok((len, from)) = socket.recv_from(&mut buf) else {
            continue;
        };
        if let Ok(mut response) = try_query_udp(upstream, &buf[..len]) {
            rewrite(&mut response);
            let _ = socket.send_to(&response, from);
        }
    }
}

fn relay_tcp(listener: TcpListener, upstream: SocketAddr, rewrite: Rewrite, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let Ok((mut conn, _)) = listener.accept() else {
            std::thread::sleep(POLL / 5);
            continue;
        };
        // One connection at a time: enough for a test's few.
        let _ = conn.set_nonblocking(false);
        let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
        while let Ok(query) = read_framed(&mut conn) {
            let Ok(mut response) = try_query_tcp(upstream, &query) else {
                break;
            };
            rewrite(&mut response);
            let Ok(out) = framed(&response) else { break };
            if conn.write_all(&out).is_err() {
                break;
            }
        }
    }
}
