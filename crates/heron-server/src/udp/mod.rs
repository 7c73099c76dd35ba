//! UDP: one thread and one `SO_REUSEPORT` socket per worker, moving
//! datagrams in batches ([`batch`]) and answering from per-worker buffers,
//! so the steady state makes no heap allocation and takes no lock.

pub mod batch;
pub mod coalesce;
pub mod limit;
pub mod pacing_choice;

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use heron_zone::lookahead::MAX_BATCH;
use heron_zone::{BatchAnswerer, Catalog};
use socket2::{Domain, Protocol, Socket, Type};

use crate::datagram::{Datagrams, Layers, Pending};
use crate::ports::never_a_client;
use crate::processor::Event;
use crate::service::Service;
use crate::stats::{Cells, Dropped, Via};
use crate::{ServerConfig, SharedCatalog};
use limit::Limiter;

/// How often a blocked worker wakes to notice shutdown.
const SHUTDOWN_POLL: Duration = Duration::from_millis(200);
/// Each query's slot in a worker's receive batch: real queries are far
/// smaller, and dense slots keep the batch in few cache lines.
const QUERY_SLOT: usize = 4096;
/// Largest query read over UDP: any datagram (as NSD and Knot read them;
/// EDNS padding can make a query long), the part past its slot spilt
/// into an area of its own that shorter queries never touch.
const MAX_QUERY: usize = 65_535;
/// Receive buffer asked of the kernel for each UDP socket (it caps the
/// request at `net.core.rmem_max`). The default, about 200 KiB, holds only
/// a few hundred queries: a worker that stalls for a few milliseconds (a
/// reload taking the core, a page fault) would drop the rest.
pub const RECEIVE_BUFFER: usize = 4 << 20;

/// Binds a UDP socket that other workers may bind too (`SO_REUSEPORT`).
pub fn bind_reuseport(addr: SocketAddr) -> io::Result<UdpSocket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.bind(&addr.into())?;
    if addr.ip().is_unspecified() {
        // Replies leave from the address each query came to, not the
        // route's choice among the host's (a client drops those).
        heron_sys::udp::receive_destinations(&socket, addr.is_ipv6())?;
    }
    // Best effort: a smaller buffer still works.
    let _ = socket.set_recv_buffer_size(RECEIVE_BUFFER);
    socket.set_read_timeout(Some(SHUTDOWN_POLL))?;
    Ok(socket.into())
}

/// Says so when the kernel granted less receive buffer than asked: a
/// burst of queries larger than the buffer is dropped.
fn warn_if_small_buffer(socket: &UdpSocket, addr: SocketAddr) {
    // The kernel reports twice what it grants, for its bookkeeping.
    let granted = socket2::SockRef::from(socket)
        .recv_buffer_size()
        .map_or(0, |b| b / 2);
    if granted < RECEIVE_BUFFER {
        tracing::warn!(
            "UDP {addr}: receive buffer {} KiB of the {} KiB asked; raise net.core.rmem_max \
             to {RECEIVE_BUFFER} so that bursts are queued rather than dropped",
            granted / 1024,
            RECEIVE_BUFFER / 1024
        );
    }
}

/// Starts `server.workers` threads answering on `addr`; they stop when
/// `stop` is set. Worker `i` is pinned to `cpu_affinity[i % len]` when
/// that list is not empty.
pub fn spawn_workers(
    addr: SocketAddr,
    server: &ServerConfig,
    service: Arc<Service>,
    stop: Arc<AtomicBool>,
) -> io::Result<Vec<JoinHandle<()>>> {
    let (cpus, coalesce) = (&server.cpu_affinity, server.udp_coalesce);
    let segment = server.udp_segmentation;
    let mut handles = Vec::with_capacity(server.workers);
    for i in 0..server.workers {
        let limiter = Limiter::for_worker(server.rrl.as_ref(), server.workers)?;
        let socket = bind_reuseport(addr)?;
        if i == 0 {
            warn_if_small_buffer(&socket, addr);
        }
        // The same socket, for the update task to answer UPDATEs from.
        let reply_socket = Arc::new(socket.try_clone()?);
        let (service, stop) = (service.clone(), stop.clone());
        let cpu = (!cpus.is_empty()).then(|| cpus[i % cpus.len()]);
        let handle = std::thread::Builder::new()
            .name(format!("udp-{addr}-{i}"))
            .spawn(move || {
                if let Some(cpu) = cpu
                    && let Err(e) = heron_sys::cpu::pin_current_thread(&[cpu])
                {
                    tracing::warn!("cannot pin UDP worker {i} to CPU {cpu}: {e}");
                }
                let worker = Worker {
                    local: (!addr.ip().is_unspecified()).then_some(addr),
                    catalog: arc_swap::Cache::new(service.processor.catalog().clone()),
                    cells: service.stats.worker(),
                    service,
                    answerer: BatchAnswerer::default(),
                    events: Vec::new(),
                    pending: Vec::with_capacity(MAX_BATCH),
                    limiter,
                    reply_socket,
                };
                run_loop(&socket, &stop, coalesce, segment, worker)
            })?;
        handles.push(handle);
    }
    Ok(handles)
}

/// One Heron UDP worker's state.
struct Worker {
    /// The address queries came to, unless it is the unspecified one.
    local: Option<SocketAddr>,
    /// Checks for a new catalog with one atomic load per batch.
    catalog: arc_swap::Cache<SharedCatalog, Arc<Catalog>>,
    service: Arc<Service>,
    answerer: BatchAnswerer,
    /// The processor's events, handed on at once; kept to reuse.
    events: Vec<Event>,
    /// The batch's datagrams between the layers before RRL and the rest
    /// ([`Layers::respond`], [`Layers::finish`]); kept to reuse.
    pending: Vec<Pending>,
    /// Response rate limiting; None: off.
    limiter: Option<Limiter>,
    /// This worker's counters.
    cells: Arc<Cells>,
    /// Its socket, shared with the update task (which answers UPDATEs).
    reply_socket: Arc<UdpSocket>,
}

// A batch is answered with its memory loads overlapped
// (`heron_zone::lookahead`), so it must fit the answerer (and the bits of
// `Received::unanswered`).
const _: () = assert!(batch::DEFAULT_BATCH <= MAX_BATCH && MAX_BATCH <= 64);

impl Handler for Worker {
    fn handle_batch(&mut self, batch: &mut batch::Batch, received: usize) {
        let catalog = self.catalog.load();
        let service = &self.service;
        let at = (self.local, batch.received_at());
        let layers = Layers::new(service, catalog, service.processor.config(), at)
            .with_reply_socket(&self.reply_socket);
        let mut slots = Default::default();
        let queries = (0..received).map(|i| batch.query(i));
        let prepared = self.answerer.prepare(catalog, queries, &mut slots);
        // Read once here: the layers ask for a datagram up to twice.
        let mut unanswered = 0u64;
        for i in 0..received {
            if let Some(why) = never_answered(&batch.datagram(i).1) {
                self.cells.dropped(why);
                unanswered |= 1 << i;
                continue;
            }
            let qtype = prepared.parsed(i).map(|q| q.qtype.0);
            self.cells.query(Via::Udp, qtype);
        }
        let limiter = self.limiter.as_mut();
        let (pending, events) = (&mut self.pending, &mut self.events);
        let mut datagrams = Received {
            batch,
            received,
            unanswered,
        };
        layers.answer_batch(&prepared, &mut datagrams, limiter, pending, events);
        batch.replies().for_each(|r| self.cells.response(r));
    }

    fn sent(&mut self, received_at: Instant, replies: usize) {
        if replies > 0 {
            self.cells.answered(received_at.elapsed(), replies);
        }
    }

    /// Lets go of a catalog replaced since the last query: a worker that
    /// gets none (its socket's share of a reuseport group may be idle)
    /// would otherwise keep every zone of that version alive.
    fn idle(&mut self) {
        self.catalog.load();
    }
}

/// Why a datagram from `peer` is never answered: its port is none a
/// client sends from, or its address is the unspecified one (IPv6's `::`,
/// which the kernel delivers: a reply to it goes to this host itself,
/// to whatever local service the port names; black-box finding BJ-14).
#[inline(always)]
fn never_answered(peer: &heron_sys::udp::Peer) -> Option<Dropped> {
    if peer.port().is_some_and(never_a_client) {
        return Some(Dropped::SourcePort);
    }
    peer.ip()
        .is_some_and(|ip| ip.is_unspecified())
        .then_some(Dropped::MartianSource)
}

/// The first `received` datagrams of a batch, for the batch loop.
struct Received<'b> {
    batch: &'b mut batch::Batch,
    received: usize,
    /// Bit `i`: the `i`th datagram is never answered ([`never_answered`]).
    unanswered: u64,
}

impl Datagrams for Received<'_> {
    type Peer<'p>
        = heron_sys::udp::Peer<'p>
    where
        Self: 'p;

    #[inline(always)]
    fn count(&self) -> usize {
        self.received
    }

    #[inline(always)]
    fn datagram(&mut self, i: usize) -> Option<(&[u8], Self::Peer<'_>, &mut Vec<u8>)> {
        // No client sends from port 0: the source is forged, no reply can
        // reach it, and the kernel's refusal of one sent there must not be
        // taken for a path limit; nor from a service that answers anything
        // (a loop). As the XDP path's parse, dropped (counted above).
        if self.unanswered & (1 << i) != 0 {
            return None;
        }
        Some(self.batch.datagram(i))
    }

    #[inline(always)]
    fn reply(&mut self, i: usize) {
        self.batch.reply(i);
    }
}

/// Answers the datagrams of a batch for [`run_loop`]. A closure that
/// writes a response and says whether to send it is a handler too (the
/// benchmark's reflector is one).
pub trait Handler {
    /// Writes the responses for datagrams `0..received` of `batch` and
    /// marks those to send with [`batch::Batch::reply`].
    fn handle_batch(&mut self, batch: &mut batch::Batch, received: usize);

    /// The `replies` of a batch received at `received_at` are sent.
    fn sent(&mut self, _received_at: Instant, _replies: usize) {}

    /// No datagram came for a while ([`SHUTDOWN_POLL`]).
    fn idle(&mut self) {}
}

impl<F: FnMut(&[u8], &mut Vec<u8>) -> bool> Handler for F {
    fn handle_batch(&mut self, batch: &mut batch::Batch, received: usize) {
        for i in 0..received {
            let (query, response) = batch.slot(i);
            if self(query, response) {
                batch.reply(i);
            }
        }
    }
}

/// The receive → handle → send loop of one worker, until `stop` is set.
/// `handler` writes the response for a datagram into its buffer and says
/// whether to send it. Heron answers DNS here; the benchmark's reflector
/// runs the same loop with an echo, which measures the path's own cost.
/// Under steady load it lets datagrams gather between receives, for at
/// most `coalesce` ([`coalesce`]; zero: never), while that measures
/// cheaper than not waiting ([`pacing_choice`]). With `segment`, runs of
/// equal-sized replies to one peer leave as one message (UDP GSO, see
/// [`batch`]) where the kernel supports it.
pub fn run_loop(
    socket: &UdpSocket,
    stop: &AtomicBool,
    coalesce: Duration,
    segment: bool,
    mut handler: impl Handler,
) {
    let mut batch = batch::Batch::with_spill(batch::DEFAULT_BATCH, QUERY_SLOT, MAX_QUERY);
    if socket.local_addr().is_ok_and(|a| a.ip().is_unspecified()) {
        batch.keep_destinations();
    }
    if segment && !batch.segment_replies(socket, true) {
        tracing::debug!("UDP worker sends one datagram per message: no UDP_SEGMENT here");
    }
    if !coalesce.is_zero() && !coalesce::tighten_timer_slack() {
        tracing::debug!("UDP worker keeps the default timer slack");
    }
    let mut pacing = coalesce::Coalescer::new(Instant::now(), coalesce);
    let mut cpu_clock = pacing_choice::ThreadCpuClock::open();
    let mut choice = pacing_choice::PacingChoice::new(Instant::now(), &mut cpu_clock);
    while !stop.load(Ordering::Relaxed) {
        if choice.pacing()
            && let Some(wait) = pacing.wait(Instant::now())
        {
            std::thread::sleep(wait);
        }
        let received = match batch.receive(socket) {
            Ok(n) => n,
            Err(e) if is_timeout(&e) => {
                handler.idle();
                continue;
            }
            Err(e) => {
                tracing::warn!("UDP receive failed: {e}");
                continue;
            }
        };
        let now = batch.received_at();
        pacing.received(now, received);
        if !coalesce.is_zero() {
            choice.received(now, received, pacing.busy(), &mut cpu_clock);
        }
        handler.handle_batch(&mut batch, received);
        match batch.send(socket) {
            Ok(sent) => handler.sent(now, sent),
            Err(e) => tracing::debug!("UDP send failed: {e}"),
        }
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

#[cfg(test)]
mod buffer_tests {
    use super::*;

    #[test]
    fn sockets_ask_for_a_large_receive_buffer() {
        let socket = bind_reuseport("127.0.0.1:0".parse().unwrap()).unwrap();
        let got = socket2::SockRef::from(&socket).recv_buffer_size().unwrap();
        // The kernel grants at most rmem_max (and reports twice what it
        // grants, for its bookkeeping).
        let cap = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(RECEIVE_BUFFER);
        assert!(got >= RECEIVE_BUFFER.min(cap), "receive buffer {got}");
    }
}

#[cfg(test)]
mod idle_tests {
    use std::collections::HashMap;

    use super::*;
    use crate::{ServerConfig, SharedCatalog, TcpLimits};

    /// Polls `done` every 10 ms for at most 10 s.
    fn eventually(done: impl Fn() -> bool) -> bool {
        (0..1000).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            done()
        })
    }

    /// A reload replaces the catalog; a worker that gets no query after
    /// it must not keep the old one (and all its zones) alive.
    #[test]
    fn a_worker_without_queries_lets_a_replaced_catalog_go() {
        let shared = SharedCatalog::default();
        let old = shared.load_full();
        let primary = heron_xfr::primary::Primary::new(HashMap::new(), 0);
        let processor = crate::processor::Processor::new(
            shared.clone(),
            Default::default(),
            Arc::new(primary),
            Arc::default(),
        );
        let service = Arc::new(Service::new(processor, None));
        let server = ServerConfig {
            listen: Vec::new(),
            workers: 1,
            cpu_affinity: Vec::new(),
            udp_coalesce: Duration::ZERO,
            udp_segmentation: false,
            tcp: TcpLimits::default(),
            answer: heron_zone::AnswerConfig::default(),
            tls: None,
            xdp: None,
            rrl: None,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let addr = "127.0.0.1:0".parse().unwrap();
        let workers = spawn_workers(addr, &server, service, stop.clone()).unwrap();
        // Held by the test, the shared slot and the worker.
        assert!(eventually(|| Arc::strong_count(&old) == 3));
        shared.store(Arc::new(Catalog::default()));
        let released = eventually(|| Arc::strong_count(&old) == 1);
        stop.store(true, Ordering::Relaxed);
        workers.into_iter().for_each(|w| w.join().unwrap());
        assert!(released, "the idle worker still holds the replaced catalog");
    }
}
