//! The AF_XDP transport: UDP queries taken from the network driver by
//! an XDP program (`heron_sys::xdp`), answered by the same engine as the
//! UDP workers, and sent back with headers written here ([`packet`]).
//!
//! One AF_XDP socket per RX queue of each interface; the sockets are
//! shared out over at most `workers` threads. Everything else that
//! reaches the interface (TCP, ARP, other ports, frames to other hosts
//! or to addresses that are not the interface's) goes to the kernel. A
//! thread (`xdp-addresses`) keeps the program's idea of the interface's
//! MAC and addresses, and the workers' of the host's, as they change.

pub mod packet;

use std::collections::BTreeMap;
use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
pub use heron_sys::xdp::Mode;
use heron_sys::xdp::local::{AddressWatch, HostAddress};
use heron_sys::xdp::{
    Attached, Destinations, FRAME_SIZE, Frame, Interface, ServedAddresses, XskSocket,
};
use heron_zone::lookahead::MAX_BATCH;
use heron_zone::{AnswerConfig, BatchAnswerer, Catalog};

use crate::datagram::{Datagrams, Layers, Pending};
use crate::processor::Event;
use crate::service::Service;
use crate::stats::{Cells, Via};
use crate::udp::limit::Limiter;
use crate::udp::{coalesce, pacing_choice};

use crate::{ServerConfig, SharedCatalog};

/// Packets taken from an RX ring at a time.
const BATCH: usize = 32;
const _: () = assert!(BATCH <= MAX_BATCH);
/// How long an idle worker waits before looking at `stop` again.
const SHUTDOWN_POLL_MS: i32 = 200;
/// Where the kernel puts a received packet in its frame
/// (`XDP_PACKET_HEADROOM`); the reply is written from the same place.
const HEADROOM: usize = 256;
/// Ethernet, IPv6 and UDP headers: the most a reply's headers take.
const MAX_HEADERS: usize = 14 + 40 + 8;

/// One `[xdp] listen` entry: UDP to `port` on `interface`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XdpListen {
    pub interface: String,
    pub port: u16,
}

impl std::str::FromStr for XdpListen {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let (interface, port) = text
            .rsplit_once('@')
            .ok_or_else(|| format!("{text:?}: expected INTERFACE@PORT, e.g. \"eth0@53\""))?;
        let port: u16 = port
            .parse()
            .ok()
            .filter(|&p| p != 0)
            .ok_or_else(|| format!("{text:?}: the port must be 1 to 65535"))?;
        if interface.is_empty() || interface.len() > 15 {
            return Err(format!("{text:?}: an interface name is 1 to 15 characters"));
        }
        Ok(XdpListen {
            interface: interface.to_string(),
            port,
        })
    }
}

/// What `[xdp]` asks for.
#[derive(Clone, Debug)]
pub struct XdpConfig {
    pub listen: Vec<XdpListen>,
    pub mode: Mode,
}

/// The XDP programs attached and the worker threads answering their
/// queues. Dropping it (after the workers stopped) detaches the programs.
pub struct XdpService {
    pub threads: Vec<JoinHandle<()>>,
    pub attached: Vec<Attached>,
    /// The interfaces XDP answers on no more: deleted while served (an
    /// interface made again under the name is another one, with nothing
    /// attached). For `heron ctl status`.
    pub lost: Arc<std::sync::Mutex<Vec<String>>>,
}

/// Attaches the XDP program to each configured interface and starts the
/// workers; they stop when `stop` is set.
pub fn start(
    xdp: &XdpConfig,
    server: &ServerConfig,
    service: Arc<Service>,
    stop: Arc<AtomicBool>,
) -> io::Result<XdpService> {
    let mut ports: BTreeMap<&str, Vec<u16>> = BTreeMap::new();
    for l in &xdp.listen {
        ports.entry(&l.interface).or_default().push(l.port);
    }
    let mut started = XdpService {
        threads: Vec::new(),
        attached: Vec::new(),
        lost: Arc::default(),
    };
    // Open before the addresses are read, so that no change is missed.
    let watch = AddressWatch::open()?;
    let all = heron_sys::xdp::local::host_addresses()?;
    let host = Arc::new(ArcSwap::from_pointee(host_addresses(&all)));
    let mut destinations = Vec::new();
    for (name, ports) in ports {
        let interface = Interface::find(name)?;
        if interface.loopback {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                loopback_refused(name),
            ));
        }
        let served = served(server, &ports, &interface, &all);
        let attached = Attached::attach(&interface, &ports, xdp.mode, served)?;
        warn_of_mode(&interface, &attached);
        destinations.push(attached.destinations()?);
        let sockets = open_sockets(&interface, &attached, name, xdp.mode)?;
        tracing::info!(
            "XDP on {name} ({} mode, {} sockets) for UDP port(s) {ports:?} to {}: {} queue(s)",
            if attached.native { "native" } else { "generic" },
            if sockets.iter().all(|s| s.is_zero_copy()) {
                "zero-copy"
            } else {
                "copy-mode"
            },
            shown(destinations.last().expect("just pushed").addresses()),
            interface.rx_queues
        );
        let config = Arc::new(answer_config(service.processor.config(), interface.mtu));
        let threads = server.workers.min(sockets.len()).max(1);
        let mut shares: Vec<Vec<XskSocket>> = (0..threads).map(|_| Vec::new()).collect();
        for (i, socket) in sockets.into_iter().enumerate() {
            shares[i % threads].push(socket);
        }
        for (i, sockets) in shares.into_iter().enumerate() {
            let worker = Worker::new(&service, config.clone(), host.clone(), server, threads)?;
            let cpus = &server.cpu_affinity;
            let cpu = (!cpus.is_empty()).then(|| cpus[i % cpus.len()]);
            let stop = stop.clone();
            let thread = std::thread::Builder::new()
                .name(format!("xdp-{name}-{i}"))
                .spawn(move || {
                    if let Some(cpu) = cpu
                        && let Err(e) = heron_sys::cpu::pin_current_thread(&[cpu])
                    {
                        tracing::warn!("cannot pin XDP worker {i} to CPU {cpu}: {e}");
                    }
                    worker.run(sockets, &stop)
                })?;
            started.threads.push(thread);
        }
        started.attached.push(attached);
    }
    let lost = started.lost.clone();
    let thread = std::thread::Builder::new()
        .name("xdp-addresses".into())
        .spawn(move || watch_addresses(watch, destinations, &host, &lost, &stop))?;
    started.threads.push(thread);
    Ok(started)
}

/// The addresses XDP answers for on `ports`: those `[server] listen`
/// names on them (a wildcard: its whole family), so that every address
/// XDP answers has TCP for a truncated answer's retry, and the others are
/// left to the kernel. When it names none of the interface's addresses
/// (sockets on loopback alone, say), all of them, as before, with a
/// warning: TCP there is not served.
fn served(
    server: &ServerConfig,
    ports: &[u16],
    interface: &Interface,
    all: &[HostAddress],
) -> ServedAddresses {
    let listen = server.listen.iter().filter(|a| ports.contains(&a.port()));
    let named = ServedAddresses::of(listen.map(|a| a.ip()));
    let own = all.iter().filter(|a| a.interface == interface.name);
    if named.any_v4 || named.any_v6 || own.clone().any(|a| named.takes(a.ip)) {
        return named;
    }
    tracing::warn!(
        "XDP on {}: [server] listen names none of its addresses on port(s) {ports:?}, so XDP \
         answers them all, and TCP there (where a truncated answer sends clients) is not served",
        interface.name
    );
    ServedAddresses::all()
}

/// Why XDP is refused on loopback `name` (black-box finding BJ-7: it took
/// every UDP query over loopback from the socket and dropped it, each
/// source being one of the host's own).
pub fn loopback_refused(name: &str) -> String {
    format!(
        "XDP on {name}: a loopback interface, where what the host sends itself never crosses a \
         driver; serve it through [server] listen instead"
    )
}

/// Says why `auto` fell back to generic mode, and what generic mode on a
/// bridge or bond cannot see: a frame's VLAN tag, which the kernel took
/// aside before the program runs (black-box finding BJ-13: queries tagged
/// for VLANs the host does not have were answered, untagged).
fn warn_of_mode(interface: &Interface, attached: &Attached) {
    let name = &interface.name;
    if let Some(why) = &attached.native_refused {
        tracing::info!("XDP on {name}: native mode refused ({why}); generic mode instead");
    }
    if !attached.native && interface.upper {
        tracing::warn!(
            "XDP on {name} (generic mode): it is a bridge or bond, where the program cannot see \
             a frame's VLAN tag: queries tagged for any VLAN are answered, untagged. Attach XDP \
             to the interfaces under it in native mode, or keep tagged frames from this host"
        );
    }
}

/// One AF_XDP socket for each RX queue of `interface`, each registered
/// with the attached program.
fn open_sockets(
    interface: &Interface,
    attached: &Attached,
    name: &str,
    mode: Mode,
) -> io::Result<Vec<XskSocket>> {
    let mut sockets = Vec::new();
    for queue in 0..interface.rx_queues {
        let socket =
            XskSocket::bind(interface.index, queue, mode != Mode::Generic).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("AF_XDP socket on {name} queue {queue}: {e}"),
                )
            })?;
        attached.serve_queue(queue, &socket)?;
        sockets.push(socket);
    }
    Ok(sockets)
}

/// What the workers take as never a query's source: every address of the
/// host and its IPv4 networks' broadcast addresses.
fn host_addresses(all: &[HostAddress]) -> packet::HostAddresses {
    let broadcasts = all
        .iter()
        .flat_map(|a| a.broadcasts.iter().map(|&b| IpAddr::V4(b)));
    packet::HostAddresses::new(all.iter().map(|a| a.ip).chain(broadcasts))
}

/// Until `stop`: on each change the kernel reports, reads the host's
/// addresses again, for the workers' source check and each interface's
/// program (an address added to an interface is answered over XDP from
/// then on; one removed goes to the kernel).
fn watch_addresses(
    watch: AddressWatch,
    mut interfaces: Vec<Destinations>,
    host: &ArcSwap<packet::HostAddresses>,
    lost: &std::sync::Mutex<Vec<String>>,
    stop: &AtomicBool,
) {
    let poll = Duration::from_millis(SHUTDOWN_POLL_MS as u64);
    while !stop.load(Ordering::Relaxed) {
        match watch.wait(poll) {
            Ok(false) => {}
            Ok(true) => {
                if let Err(e) = refresh_addresses(&mut interfaces, host) {
                    tracing::warn!("XDP: cannot read the host's addresses again: {e}");
                }
                interfaces.retain(|d| still_there(d, lost));
            }
            Err(e) => {
                tracing::warn!("XDP: watching the host's addresses failed: {e}");
                std::thread::sleep(poll);
            }
        }
    }
}

/// Says when the interface's MTU moved below the one replies are sized
/// for (read at the start), and when it is back: larger replies are lost
/// meanwhile (black-box finding BJ-10: they vanished without a word).
fn said_mtu(destinations: &Destinations, before: u32) {
    let (name, (sized_for, now)) = (destinations.interface(), destinations.mtu());
    if now == before {
        return;
    }
    if now < sized_for {
        tracing::warn!(
            "XDP on {name}: its MTU is {now} now, below the {sized_for} replies are sized for: \
             longer replies are lost until the MTU is {sized_for} again or Heron restarts"
        );
    } else if before < sized_for {
        tracing::info!("XDP on {name}: its MTU is {now} again: replies fit");
    }
}

/// Says what the program of `destinations` now takes: at most a few
/// addresses by name, and how many past the program's room are left to
/// the kernel.
fn said_now_for(destinations: &Destinations, before: &str) {
    let name = destinations.interface();
    let renamed = renamed(before, name);
    let addresses = shown(destinations.addresses());
    tracing::info!("XDP on {name}: now for {addresses}{renamed}");
    if destinations.left_out() > 0 {
        tracing::warn!(
            "XDP on {name}: its program holds at most {} addresses: {} more of the interface's are \
             left to the kernel's sockets",
            heron_sys::xdp::MAX_ADDRESSES,
            destinations.left_out()
        );
    }
}

/// `addresses` as `{a, b, ...}`, the first 16 and how many more.
fn shown(addresses: &std::collections::BTreeSet<IpAddr>) -> String {
    const SHOWN: usize = 16;
    let first: Vec<String> = addresses
        .iter()
        .take(SHOWN)
        .map(|a| a.to_string())
        .collect();
    match addresses.len().saturating_sub(SHOWN) {
        0 => format!("{{{}}}", first.join(", ")),
        more => format!("{{{}, and {more} more}}", first.join(", ")),
    }
}

/// Reads the host's addresses again for the workers and each interface's
/// program. An interface that fails is said and the others go on; one
/// deleted is marked lost (its name emptied) for [`still_there`].
fn refresh_addresses(
    interfaces: &mut [Destinations],
    host: &ArcSwap<packet::HostAddresses>,
) -> io::Result<()> {
    let all = heron_sys::xdp::local::host_addresses()?;
    host.store(Arc::new(host_addresses(&all)));
    for destinations in interfaces {
        let before = destinations.interface().to_string();
        let mtu_before = destinations.mtu().1;
        let refreshed = destinations.refresh(&all);
        said_mtu(destinations, mtu_before);
        match refreshed {
            Ok(true) => said_now_for(destinations, &before),
            Ok(false) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                tracing::error!(
                    "XDP on {before}: the interface was deleted: XDP answers on it no more; an \
                     interface made again under that name is not attached until heron restarts \
                     (UDP on it goes to the kernel's sockets, if [server] listen has them)"
                );
                destinations.mark_lost();
            }
            Err(e) => tracing::warn!("XDP on {before}: cannot read its addresses again: {e}"),
        }
    }
    Ok(())
}

/// ", renamed from OLD" when the interface's name changed.
fn renamed(before: &str, now: &str) -> String {
    match before == now {
        true => String::new(),
        false => format!(", renamed from {before}"),
    }
}

/// Whether `destinations` is still watched; a lost one goes to `lost`.
fn still_there(destinations: &Destinations, lost: &std::sync::Mutex<Vec<String>>) -> bool {
    let Some(name) = destinations.lost_name() else {
        return true;
    };
    lost.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(name.to_string());
    false
}

/// The answer settings over XDP: UDP responses no larger than a frame
/// and the interface's MTU hold (we cannot fragment); longer answers are
/// truncated (TC) as over sockets.
fn answer_config(answer: &AnswerConfig, mtu: u32) -> AnswerConfig {
    let frame_room = FRAME_SIZE as usize - HEADROOM - MAX_HEADERS;
    let mtu_room = (mtu as usize).saturating_sub(40 + 8);
    let most = frame_room.min(mtu_room).min(usize::from(u16::MAX)) as u16;
    AnswerConfig {
        max_udp_payload: answer.max_udp_payload.min(most),
        ..answer.clone()
    }
}

/// Says at exit what the kernel dropped on a socket's way, if anything:
/// a full RX ring or an empty fill ring means the worker fell behind.
fn report_losses(socket: &XskSocket) {
    match socket.statistics() {
        Ok(s)
            if s.rx_dropped + s.rx_ring_full + s.rx_fill_ring_empty_descs + s.tx_invalid_descs
                > 0 =>
        {
            tracing::info!(
                "XDP socket: {} packets dropped (RX ring full {}, fill ring empty {}), {} bad TX descriptors",
                s.rx_dropped,
                s.rx_ring_full,
                s.rx_fill_ring_empty_descs,
                s.tx_invalid_descs
            )
        }
        Ok(_) => {}
        Err(e) => tracing::debug!("no XDP socket statistics: {e}"),
    }
}

/// Pauses between batches under steady load so that queries gather, as
/// the UDP workers do (`udp::coalesce`, at most `udp-coalesce-us`), kept
/// only while that measures cheaper (`udp::pacing_choice`).
struct Pacing {
    coalescer: coalesce::Coalescer,
    choice: pacing_choice::PacingChoice,
    cpu_clock: pacing_choice::ThreadCpuClock,
    off: bool,
}

impl Pacing {
    /// Open on the worker's thread (its CPU clock is the thread's).
    fn new(max_delay: Duration) -> Pacing {
        if !max_delay.is_zero() && !coalesce::tighten_timer_slack() {
            tracing::debug!("XDP worker keeps the default timer slack");
        }
        let mut cpu_clock = pacing_choice::ThreadCpuClock::open();
        Pacing {
            coalescer: coalesce::Coalescer::new(Instant::now(), max_delay),
            choice: pacing_choice::PacingChoice::new(Instant::now(), &mut cpu_clock),
            cpu_clock,
            off: max_delay.is_zero(),
        }
    }

    /// After `received` queries taken at `at`: pauses (sending the
    /// queued replies) when pacing is on and the last batch was small.
    fn after_batch(
        &mut self,
        sockets: &[XskSocket],
        at: Instant,
        received: usize,
    ) -> io::Result<()> {
        if self.off {
            return Ok(());
        }
        self.coalescer.received(at, received);
        let busy = self.coalescer.busy();
        self.choice
            .received(at, received, busy, &mut self.cpu_clock);
        match self.coalescer.wait(Instant::now()) {
            Some(pause) if self.choice.pacing() => heron_sys::xdp::pause(sockets, pause),
            _ => Ok(()),
        }
    }
}

/// A batch of frames as the batch loop sees it.
struct Frames<'a> {
    socket: &'a XskSocket,
    frames: &'a [Frame],
    /// Per frame: the datagram in it, if it holds one for us.
    found: &'a [Option<packet::Datagram>],
    responses: &'a mut [Vec<u8>],
    /// Per frame: whether its response is to be sent.
    reply: [bool; BATCH],
}

impl Datagrams for Frames<'_> {
    type Peer<'p>
        = std::net::SocketAddr
    where
        Self: 'p;

    #[inline(always)]
    fn count(&self) -> usize {
        self.frames.len()
    }

    #[inline(always)]
    fn datagram(&mut self, i: usize) -> Option<(&[u8], std::net::SocketAddr, &mut Vec<u8>)> {
        let datagram = self.found[i].as_ref()?;
        let query = &self.socket.packet(&self.frames[i])[datagram.payload.clone()];
        Some((query, datagram.peer, &mut self.responses[i]))
    }

    #[inline(always)]
    fn reply(&mut self, i: usize) {
        self.reply[i] = true;
    }
}

/// One XDP worker's state; every buffer is allocated once.
struct Worker {
    catalog: arc_swap::Cache<SharedCatalog, Arc<Catalog>>,
    /// The host's addresses: never a query's source.
    host: arc_swap::Cache<Arc<ArcSwap<packet::HostAddresses>>, Arc<packet::HostAddresses>>,
    /// The processor's, with UDP responses capped to what a frame holds.
    config: Arc<AnswerConfig>,
    /// This worker's counters.
    cells: Arc<Cells>,
    service: Arc<Service>,
    /// The longest pause for queries to gather (`udp-coalesce-us`; zero,
    /// the default: never).
    coalesce: Duration,
    answerer: BatchAnswerer,
    /// The processor's events, handed on at once; kept to reuse.
    events: Vec<Event>,
    /// Response rate limiting (its own table, as a UDP worker's); None: off.
    limiter: Option<Limiter>,
    /// The batch's datagrams between the layers before RRL and the rest;
    /// kept to reuse.
    pending: Vec<Pending>,
    responses: Vec<Vec<u8>>,
    frames: Vec<Frame>,
    /// Per frame of the batch: the datagram in it.
    found: Vec<Option<packet::Datagram>>,
}

impl Worker {
    /// A worker answering for `service`, one of `threads`.
    fn new(
        service: &Arc<Service>,
        config: Arc<AnswerConfig>,
        host: Arc<ArcSwap<packet::HostAddresses>>,
        server: &ServerConfig,
        threads: usize,
    ) -> io::Result<Self> {
        Ok(Worker {
            catalog: arc_swap::Cache::new(service.processor.catalog().clone()),
            host: arc_swap::Cache::new(host),
            config,
            cells: service.stats.worker(),
            service: service.clone(),
            coalesce: server.udp_coalesce,
            answerer: BatchAnswerer::default(),
            events: Vec::new(),
            limiter: Limiter::for_worker(server.rrl.as_ref(), threads)?,
            pending: Vec::with_capacity(BATCH),
            responses: (0..BATCH).map(|_| Vec::with_capacity(4096)).collect(),
            frames: Vec::with_capacity(BATCH),
            found: Vec::with_capacity(BATCH),
        })
    }

    /// Serves `sockets` until `stop`: takes a batch from each, answers
    /// it, and queues the replies. They are sent by the `poll()` that
    /// waits for the next queries (one system call per wake, where a
    /// `sendto()` after each batch made two), or at once when a full
    /// send budget is queued (`XskSocket::submit`).
    fn run(mut self, mut sockets: Vec<XskSocket>, stop: &AtomicBool) {
        let mut pacing = Pacing::new(self.coalesce);
        while !stop.load(Ordering::Relaxed) {
            let waited = match self.serve_once(&mut sockets) {
                None => {
                    // Idle: a catalog replaced since the last query goes.
                    self.catalog.load();
                    heron_sys::xdp::wait_any(&sockets, SHUTDOWN_POLL_MS).map(|_| ())
                }
                Some((at, received)) => pacing.after_batch(&sockets, at, received),
            };
            if let Err(e) = waited {
                tracing::warn!("XDP wait failed: {e}");
            }
        }
        for socket in &mut sockets {
            socket.flush();
            report_losses(socket);
        }
    }

    /// Answers a batch from each socket that has one; returns when the
    /// first was taken and how many queries in all, or None if none.
    fn serve_once(&mut self, sockets: &mut [XskSocket]) -> Option<(Instant, usize)> {
        let (mut first, mut received) = (None, 0);
        for socket in sockets {
            socket.recycle();
            let n = socket.receive(&mut self.frames, BATCH);
            if n > 0 {
                let at = *first.get_or_insert_with(Instant::now);
                let replies = self.answer_batch(socket, at);
                if replies > 0 {
                    self.cells.answered(at.elapsed(), replies);
                }
                received += n;
            }
            socket.submit();
        }
        first.map(|at| (at, received))
    }

    /// Answers the frames in `self.frames`, taken at `received_at`, and
    /// queues the replies; returns how many.
    fn answer_batch(&mut self, socket: &mut XskSocket, received_at: Instant) -> usize {
        let catalog = self.catalog.load();
        let host = self.host.load();
        self.found.clear();
        for frame in &self.frames {
            let parsed = packet::parse(socket.packet(frame), host);
            if let Err(why) = parsed {
                self.cells.dropped(why);
            }
            self.found.push(parsed.ok());
        }
        let query = |i: usize| match &self.found[i] {
            Some(d) => &socket.packet(&self.frames[i])[d.payload.clone()],
            None => &[][..],
        };
        let mut slots = Default::default();
        let prepared =
            self.answerer
                .prepare(catalog, (0..self.frames.len()).map(query), &mut slots);
        for (i, found) in self.found.iter().enumerate() {
            if found.is_some() {
                let qtype = prepared.parsed(i).map(|q| q.qtype.0);
                self.cells.query(Via::Xdp, qtype);
            }
        }
        let layers = Layers::new(&self.service, catalog, &self.config, (None, received_at));
        let mut batch = Frames {
            socket,
            frames: &self.frames,
            found: &self.found,
            responses: &mut self.responses,
            reply: [false; BATCH],
        };
        let limiter = self.limiter.as_mut();
        let (pending, events) = (&mut self.pending, &mut self.events);
        layers.answer_batch(&prepared, &mut batch, limiter, pending, events);
        let reply = batch.reply;
        let mut replies = 0;
        for (i, frame) in self.frames.drain(..).enumerate() {
            let written = match &self.found[i] {
                Some(datagram) if reply[i] => {
                    packet::write_reply(socket.frame_mut(&frame), datagram, &self.responses[i])
                }
                _ => None,
            };
            match written {
                Some(len) => {
                    self.cells.response(&self.responses[i]);
                    replies += 1;
                    socket.transmit(frame, len);
                }
                None => socket.release(frame),
            }
        }
        replies
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The log names 16 addresses at most (black-box finding BJ-12: lines
    /// of 12 KB, one per change, with a thousand addresses).
    #[test]
    fn at_most_16_addresses_are_named() {
        let few: std::collections::BTreeSet<IpAddr> =
            ["192.0.2.1".parse().unwrap(), "2001:db8::1".parse().unwrap()].into();
        assert_eq!(shown(&few), "{192.0.2.1, 2001:db8::1}");
        let many = (0..40u8).map(|i| IpAddr::from([10, 0, 0, i])).collect();
        let said = shown(&many);
        assert!(said.starts_with("{10.0.0.0, 10.0.0.1,"), "{said}");
        assert!(said.ends_with("10.0.0.15, and 24 more}"), "{said}");
    }

    #[test]
    fn replies_fit_a_frame_and_the_mtu() {
        let asked = |max_udp_payload| AnswerConfig {
            max_udp_payload,
            ..AnswerConfig::default()
        };
        // The usual MTU leaves room for what is asked by default.
        assert_eq!(answer_config(&asked(1232), 1500).max_udp_payload, 1232);
        // MTU 1500 less IPv6 and UDP headers: 1452 fits, 1453 does not.
        assert_eq!(answer_config(&asked(1452), 1500).max_udp_payload, 1452);
        assert_eq!(answer_config(&asked(1453), 1500).max_udp_payload, 1452);
        // Past a frame (2048 less headroom and headers): cut to the frame.
        let frame = FRAME_SIZE as u16 - 256 - 62;
        assert_eq!(answer_config(&asked(4096), 9000).max_udp_payload, frame);
        assert_eq!(answer_config(&asked(frame), 9000).max_udp_payload, frame);
    }

    #[test]
    fn listen_entries_name_an_interface_and_a_port() {
        let l: XdpListen = "eth0@53".parse().unwrap();
        assert_eq!((l.interface.as_str(), l.port), ("eth0", 53));
        assert!("eth0@0".parse::<XdpListen>().is_err());
        assert!("eth0:53".parse::<XdpListen>().is_err());
    }
}
