//! UDP: one thread and one `SO_REUSEPORT` socket per worker, moving
//! datagrams in batches ([`batch`]) and answering from per-worker buffers,
//! so the steady state makes no heap allocation and takes no lock.

pub mod affinity;
pub mod batch;

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
/// Largest query we read over UDP. Real queries are far smaller; a longer
/// one is cut here and then fails to parse (FORMERR).
const MAX_QUERY: usize = 4096;

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

/// Starts `workers` threads answering on `addr`; they stop when `stop` is
/// set. Worker `i` is pinned to `cpus[i % cpus.len()]` when `cpus` is not
/// empty.
pub fn spawn_workers(
    addr: SocketAddr,
    workers: usize,
    cpus: &[usize],
    catalog: SharedCatalog,
    config: Arc<AnswerConfig>,
    stop: Arc<AtomicBool>,
) -> io::Result<Vec<JoinHandle<()>>> {
    let mut handles = Vec::with_capacity(workers);
    for i in 0..workers {
        let socket = bind_reuseport(addr)?;
        let (catalog, config, stop) = (catalog.clone(), config.clone(), stop.clone());
        let cpu = (!cpus.is_empty()).then(|| cpus[i % cpus.len()]);
        let handle = std::thread::Builder::new()
            .name(format!("udp-{addr}-{i}"))
            .spawn(move || {
                if let Some(cpu) = cpu
                    && let Err(e) = affinity::pin_current_thread(cpu)
                {
                    tracing::warn!("cannot pin UDP worker {i} to CPU {cpu}: {e}");
                }
                serve(socket, catalog, &config, &stop)
            })?;
        handles.push(handle);
    }
    Ok(handles)
}

fn serve(socket: UdpSocket, catalog: SharedCatalog, config: &AnswerConfig, stop: &AtomicBool) {
    // The cache checks for a new catalog with one atomic load per query.
    let mut catalog = arc_swap::Cache::new(catalog);
    run_loop(&socket, stop, |query, response| {
        answer(catalog.load(), config, query, Transport::Udp, response)
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
    let mut batch = batch::Batch::new(batch::DEFAULT_BATCH, MAX_QUERY);
    while !stop.load(Ordering::Relaxed) {
        let received = match batch.receive(socket) {
            Ok(n) => n,
            Err(e) if is_timeout(&e) => continue,
            Err(e) => {
                tracing::warn!("UDP receive failed: {e}");
                continue;
            }
        };
        for i in 0..received {
            let (query, response) = batch.slot(i);
            if handle(query, response) {
                batch.reply(i);
            }
        }
        if let Err(e) = batch.send(socket) {
            tracing::debug!("UDP send failed: {e}");
        }
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}
