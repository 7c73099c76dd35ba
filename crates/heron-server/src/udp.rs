//! UDP: one thread and one `SO_REUSEPORT` socket per worker.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use heron_zone::{AnswerConfig, Transport, answer};
use socket2::{Domain, Protocol, Socket, Type};

use crate::SharedCatalog;

/// How often a blocked worker wakes to notice shutdown.
const SHUTDOWN_POLL: Duration = Duration::from_millis(200);
/// Largest datagram we accept.
const MAX_DATAGRAM: usize = 65_535;

/// Binds a UDP socket that other workers may bind too (`SO_REUSEPORT`).
pub fn bind_reuseport(addr: SocketAddr) -> io::Result<UdpSocket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.bind(&addr.into())?;
    socket.set_read_timeout(Some(SHUTDOWN_POLL))?;
    Ok(socket.into())
}

/// Starts `workers` threads answering on `addr`; they stop when `stop` is set.
pub fn spawn_workers(
    addr: SocketAddr,
    workers: usize,
    catalog: SharedCatalog,
    config: Arc<AnswerConfig>,
    stop: Arc<AtomicBool>,
) -> io::Result<Vec<JoinHandle<()>>> {
    let mut handles = Vec::with_capacity(workers);
    for i in 0..workers {
        let socket = bind_reuseport(addr)?;
        let (catalog, config, stop) = (catalog.clone(), config.clone(), stop.clone());
        let handle = std::thread::Builder::new()
            .name(format!("udp-{addr}-{i}"))
            .spawn(move || serve(socket, &catalog, &config, &stop))?;
        handles.push(handle);
    }
    Ok(handles)
}

fn serve(socket: UdpSocket, catalog: &SharedCatalog, config: &AnswerConfig, stop: &AtomicBool) {
    run_loop(&socket, stop, |query, response| {
        let snapshot = catalog.load();
        answer(&snapshot, config, query, Transport::Udp, response)
    });
}

/// The receive → handle → send loop of one worker, until `stop` is set.
/// `handle` writes the response for a datagram into its buffer and says
/// whether to send it. Heron answers DNS here; the benchmark's reflector
/// runs the same loop with an echo, which measures the path's own cost.
pub fn run_loop(
    socket: &UdpSocket,
    stop: &AtomicBool,
    mut handle: impl FnMut(&[u8], &mut Vec<u8>) -> bool,
) {
    let mut query = vec![0u8; MAX_DATAGRAM];
    let mut response = Vec::with_capacity(MAX_DATAGRAM);
    while !stop.load(Ordering::Relaxed) {
        let (len, peer) = match socket.recv_from(&mut query) {
            Ok(got) => got,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                continue;
            }
            Err(e) => {
                tracing::warn!("UDP receive failed: {e}");
                continue;
            }
        };
        if handle(&query[..len], &mut response)
            && let Err(e) = socket.send_to(&response, peer)
        {
            tracing::debug!("UDP send to {peer} failed: {e}");
        }
    }
}
