//! NOTIFY out (RFC 1996): tell secondaries a zone has a new serial, so
//! they fetch it now instead of at their next refresh.
//!
//! Each target gets a NOTIFY over UDP, signed if a key is configured, and
//! is retried with doubling timeouts until it answers; a target that never
//! answers is logged and left to its refresh timer. The rules (retries, a
//! newer serial superseding, the limit on NOTIFYs outstanding) are the
//! I/O-free [`NotifyOut`]; this is its driver: one task for every zone
//! and target, with one UDP socket per address family, that sends what
//! the machine says, matches answers to what was sent, checks their TSIG,
//! and wakes the machine when a timeout is due.

use crate::keys::SharedKeys;
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use heron_proto::message::{Header, flags, random_id};
use heron_proto::time::unix_now;
use heron_proto::tsig::{self, Key, KeyRing, ResponseVerifier, TsigError};
use heron_proto::writer::Writer;
use heron_proto::{Class, Name, Opcode, RType, Rcode};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::NotifyTarget;
use crate::stats::ZoneStats;
pub use crate::timers::notify_out::Outcome;
use crate::timers::notify_out::{NotifyAction, NotifyOut, PendingId, Soa, TRIES};

/// Wait for the first answer; doubled after every unanswered try.
const FIRST_TIMEOUT: Duration = Duration::from_millis(1000);
/// NOTIFYs sent and not answered yet, at most (a reload of many zones).
pub const OUTSTANDING: usize = 64;

/// Hands NOTIFYs to the driver task. Cloning shares the task, which ends
/// when every `Notifier` is dropped and nothing is pending.
#[derive(Clone)]
pub struct Notifier {
    commands: mpsc::UnboundedSender<Command>,
}

/// What each target said, by address.
pub type Outcomes = Vec<(SocketAddr, Outcome)>;

enum Command {
    Notify {
        origin: Name,
        soa: Soa,
        targets: Vec<NotifyTarget>,
        done: Option<oneshot::Sender<Outcomes>>,
    },
    ZoneRemoved(Name),
}

impl Notifier {
    /// Starts the driver on the current tokio runtime; each NOTIFY that
    /// ends is counted in `stats`.
    /// Its keys are `keys`, which the server replaces when a reload reads
    /// new ones.
    pub fn start(keys: Arc<SharedKeys>, stats: Arc<ZoneStats>) -> Notifier {
        Notifier::spawn(keys, FIRST_TIMEOUT, stats)
    }

    /// With a first timeout of `first_timeout` (tests shorten it).
    pub fn start_with(keys: Arc<Vec<Key>>, first_timeout: Duration) -> Notifier {
        Notifier::spawn(SharedKeys::new(keys), first_timeout, Arc::default())
    }

    fn spawn(keys: Arc<SharedKeys>, first_timeout: Duration, stats: Arc<ZoneStats>) -> Notifier {
        let (commands, receiver) = mpsc::unbounded_channel();
        let machine = NotifyOut::new(OUTSTANDING, first_timeout, Box::new(random_id));
        let (replies, received) = mpsc::channel(QUEUED_REPLIES);
        tokio::spawn(Driver::new(machine, keys, stats, replies).run(receiver, received));
        Notifier { commands }
    }

    /// Notifies every target of `origin`'s new `soa` (TTL, RDATA) in the
    /// background.
    pub fn notify_all(&self, origin: &Name, soa: (u32, Vec<u8>), targets: &[NotifyTarget]) {
        let _ = self.commands.send(Command::Notify {
            origin: origin.clone(),
            soa: Arc::new(soa),
            targets: targets.to_vec(),
            done: None,
        });
    }

    /// Notifies every target and waits until each has answered or been
    /// given up: how each went, in the targets' order.
    pub async fn notify_and_wait(
        &self,
        origin: &Name,
        soa: (u32, Vec<u8>),
        targets: &[NotifyTarget],
    ) -> Outcomes {
        let (done, outcomes) = oneshot::channel();
        let _ = self.commands.send(Command::Notify {
            origin: origin.clone(),
            soa: Arc::new(soa),
            targets: targets.to_vec(),
            done: Some(done),
        });
        outcomes.await.unwrap_or_default()
    }

    /// `origin` is served no more: what is pending for it ends.
    pub fn zone_removed(&self, origin: &Name) {
        let _ = self.commands.send(Command::ZoneRemoved(origin.clone()));
    }
}

/// An operator waiting for every target of one NOTIFY.
struct Waiter {
    targets: Vec<(PendingId, SocketAddr, Option<Outcome>)>,
    done: oneshot::Sender<Outcomes>,
}

struct Driver {
    machine: NotifyOut,
    keys: Arc<SharedKeys>,
    /// Where each NOTIFY that ends is counted.
    stats: Arc<ZoneStats>,
    /// One socket per local address NOTIFYs go out from (its family's
    /// wildcard, or a configured source) and target, bound and connected
    /// at its first use: connected, it hears the ICMP port unreachable
    /// that says nothing listens there, so a NOTIFY to a closed port ends
    /// at once instead of after every retry. Targets come from the
    /// configuration: a few sockets.
    sockets: HashMap<(IpAddr, SocketAddr), Arc<UdpSocket>>,
    /// The tasks reading those sockets hand every datagram here.
    replies: mpsc::Sender<Arrival>,
    readers: Vec<JoinHandle<()>>,
    /// The key and request MAC of each signed NOTIFY's last message.
    signed: HashMap<PendingId, (Key, Vec<u8>)>,
    /// The last answer to a signed NOTIFY that was not taken for want of
    /// a valid TSIG (its rcode, why): an unsigned answer may be forged,
    /// so it does not end the NOTIFY, but once the tries are spent the
    /// outcome says the target did answer (black-box finding AP-6: `heron
    /// ctl notify` said "no answer" of an NSD that answered NXDOMAIN
    /// unsigned). One entry per NOTIFY under way.
    unverified: HashMap<PendingId, (Rcode, String)>,
    waiters: Vec<Waiter>,
    actions: Vec<NotifyAction>,
    /// Warnings about NOTIFYs that did not end well, bounded per target.
    outcome_lines: OutcomeLines,
}

impl Driver {
    fn new(
        machine: NotifyOut,
        keys: Arc<SharedKeys>,
        stats: Arc<ZoneStats>,
        replies: mpsc::Sender<Arrival>,
    ) -> Driver {
        Driver {
            machine,
            keys,
            stats,
            sockets: HashMap::new(),
            replies,
            readers: Vec::new(),
            signed: HashMap::new(),
            unverified: HashMap::new(),
            waiters: Vec::new(),
            actions: Vec::new(),
            outcome_lines: OutcomeLines::default(),
        }
    }

    async fn run(
        mut self,
        mut commands: mpsc::UnboundedReceiver<Command>,
        mut replies: mpsc::Receiver<Arrival>,
    ) {
        let mut open = true;
        while open || self.machine.pending() > 0 {
            let wakeup = self.machine.next_wakeup();
            tokio::select! {
                _ = sleep_until(wakeup) => {
                    self.machine.wake(Instant::now(), &mut self.actions);
                }
                command = commands.recv(), if open => match command {
                    Some(command) => self.command(command),
                    None => open = false,
                },
                Some(arrival) = replies.recv() => match arrival {
                    Arrival::Reply(reply, from) => self.received(&reply, from),
                    Arrival::Unreachable(target) => self.unreachable(target),
                },
            }
            self.perform().await;
        }
        self.readers.iter().for_each(JoinHandle::abort);
    }

    fn command(&mut self, command: Command) {
        let now = Instant::now();
        match command {
            Command::Notify {
                origin,
                soa,
                mut targets,
                done,
            } => {
                // A target listed twice (same address and key) is told
                // once: the second superseded the first, whose waiter
                // then never heard (regression hunt: ctl notify hung).
                let mut seen = std::collections::HashSet::new();
                targets.retain(|t| seen.insert((t.addr, t.key.clone())));
                let ids = self
                    .machine
                    .notify(now, &origin, &soa, &targets, &mut self.actions);
                if let Some(done) = done {
                    let targets = ids
                        .into_iter()
                        .zip(&targets)
                        .map(|(id, t)| (id, t.addr, None))
                        .collect();
                    self.waiters.push(Waiter { targets, done });
                }
            }
            Command::ZoneRemoved(origin) => {
                self.machine.zone_removed(now, &origin, &mut self.actions)
            }
        }
    }

    /// An answer: the end of the NOTIFY it is for, if it is one and its
    /// TSIG, if signed, verifies.
    fn received(&mut self, reply: &[u8], from: SocketAddr) {
        let Some(header) = Header::read(reply) else {
            return;
        };
        if !header.has(flags::QR) || header.opcode() != Opcode::NOTIFY {
            return;
        }
        let Some(pending) = self.machine.answer_for(from, header.id) else {
            return;
        };
        if let Some((key, mac)) = self.signed.get(&pending) {
            let mut verifier = ResponseVerifier::new(key, mac.clone());
            if let Err(e) = verifier
                .verify(reply, unix_now())
                .and_then(|_| verifier.finish())
            {
                return self.failed_tsig(pending, reply, from, e);
            }
        }
        let rcode = Rcode(header.rcode());
        self.machine
            .answered(Instant::now(), pending, rcode, &mut self.actions);
    }

    /// An answer to a signed NOTIFY whose TSIG does not verify. One that
    /// carries the target's own TSIG error (it does not know our key, or
    /// the MAC or time did not hold there) ends the NOTIFY, with that
    /// error: sending again cannot help, and the operator must mend the
    /// key (Knot and BIND stop too). Any other is not an answer.
    fn failed_tsig(&mut self, pending: PendingId, reply: &[u8], from: SocketAddr, e: TsigError) {
        let origin = self.machine.origin_of(pending).map(Name::to_string);
        let origin = origin.unwrap_or_default();
        match tsig::find(reply) {
            Ok(Some(t)) if t.error != 0 => {
                let rcode = Rcode(Header::read(reply).map_or(0, |h| h.rcode()));
                let why = format!("answered {rcode}: {e}");
                self.machine
                    .failed(Instant::now(), pending, why, &mut self.actions);
            }
            _ => {
                let rcode = Rcode(Header::read(reply).map_or(0, |h| h.rcode()));
                tracing::debug!(
                    "NOTIFY for {origin}: answer {rcode} from {from} not taken: its TSIG failed: {e}"
                );
                self.unverified.insert(pending, (rcode, e.to_string()));
            }
        }
    }

    /// Nothing listens at `target` (an ICMP port unreachable): its
    /// NOTIFYs end now, failed.
    fn unreachable(&mut self, target: SocketAddr) {
        for pending in self.machine.pending_to(target) {
            let why = UNREACHABLE.to_string();
            self.machine
                .failed(Instant::now(), pending, why, &mut self.actions);
        }
    }

    /// Does what the machine said, until it says nothing more.
    async fn perform(&mut self) {
        while !self.actions.is_empty() {
            for action in std::mem::take(&mut self.actions) {
                match action {
                    NotifyAction::Send {
                        pending,
                        origin,
                        soa,
                        target,
                        id,
                    } => {
                        if let Err(why) = self.send(pending, &origin, &soa, &target, id).await {
                            self.machine
                                .failed(Instant::now(), pending, why, &mut self.actions);
                        }
                    }
                    NotifyAction::Finished {
                        pending,
                        origin,
                        target,
                        outcome,
                    } => self.finished(pending, &origin, target, outcome),
                }
            }
        }
    }

    /// Sends one NOTIFY message.
    async fn send(
        &mut self,
        pending: PendingId,
        origin: &Name,
        soa: &Soa,
        target: &NotifyTarget,
        id: u16,
    ) -> Result<(), String> {
        let key = match &target.key {
            Some(name) => match self.keys.load().key(name) {
                Some(k) => Some(k.clone()),
                None => return Err(format!("no TSIG key named {name}")),
            },
            None => None,
        };
        let mut msg = notify_message(origin, soa, id);
        match key {
            Some(key) => {
                let mac = tsig::sign_request(&mut msg, &key, unix_now(), tsig::DEFAULT_FUDGE);
                self.signed.insert(pending, (key, mac));
            }
            None => {
                self.signed.remove(&pending);
            }
        }
        let socket = self.socket_for(target)?;
        match socket.send_to(&msg, target.addr).await {
            Ok(_) => Ok(()),
            // The ICMP of an earlier NOTIFY, told on this send: said as
            // when it is read (`unreachable`), not in other words.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Err(UNREACHABLE.into()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// The socket for `target`: from its source address, or its family's
    /// wildcard; bound at its first use, with a task that reads it.
    fn socket_for(&mut self, target: &NotifyTarget) -> Result<Arc<UdpSocket>, String> {
        let any: IpAddr = match target.addr {
            SocketAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
            SocketAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
        };
        let local = target.source.unwrap_or(any);
        if let Some(socket) = self.sockets.get(&(local, target.addr)) {
            return Ok(socket.clone());
        }
        let socket = bind_udp(SocketAddr::new(local, 0), target.addr)
            .map_err(|e| format!("cannot bind source address {local}: {e}"))?;
        let socket = Arc::new(socket);
        let replies = self.replies.clone();
        self.readers.push(tokio::spawn(read_replies(
            socket.clone(),
            target.addr,
            replies,
        )));
        self.sockets.insert((local, target.addr), socket.clone());
        Ok(socket)
    }

    fn finished(
        &mut self,
        pending: PendingId,
        origin: &Name,
        target: SocketAddr,
        outcome: Outcome,
    ) {
        self.signed.remove(&pending);
        let outcome = match (self.unverified.remove(&pending), outcome) {
            (Some((rcode, why)), Outcome::NoAnswer) => Outcome::Failed(format!(
                "no answer with a valid TSIG; answered {rcode} without one ({why}), not taken"
            )),
            (_, outcome) => outcome,
        };
        if self.outcome_lines.admit(target, &outcome, Instant::now()) {
            log_outcome(origin, target, &outcome, self.outcome_lines.untold(target));
        }
        if outcome != Outcome::ZoneRemoved {
            let acknowledged = outcome == Outcome::Answered(Rcode::NOERROR);
            self.stats.notify_out(origin, acknowledged);
        }
        for waiter in &mut self.waiters {
            if let Some(entry) = waiter
                .targets
                .iter_mut()
                .find(|(id, _, got)| *id == pending && got.is_none())
            {
                entry.2 = Some(outcome.clone());
            }
        }
        let (complete, waiting): (Vec<Waiter>, Vec<Waiter>) = std::mem::take(&mut self.waiters)
            .into_iter()
            .partition(|w| w.targets.iter().all(|(_, _, got)| got.is_some()));
        self.waiters = waiting;
        for waiter in complete {
            let outcomes = waiter
                .targets
                .into_iter()
                .map(|(_, addr, got)| (addr, got.expect("complete")))
                .collect();
            let _ = waiter.done.send(outcomes);
        }
    }
}

/// Why a NOTIFY to a closed port failed.
const UNREACHABLE: &str = "port unreachable: nothing listens for NOTIFY there";

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// A socket bound at `local`, connected to `target`.
fn bind_udp(local: SocketAddr, target: SocketAddr) -> io::Result<UdpSocket> {
    let socket = std::net::UdpSocket::bind(local)?;
    socket.connect(target)?;
    socket.set_nonblocking(true)?;
    UdpSocket::from_std(socket)
}

/// What a socket's reader hands the driver.
enum Arrival {
    Reply(Vec<u8>, SocketAddr),
    /// An ICMP port unreachable from the target the socket is connected to.
    Unreachable(SocketAddr),
}

/// The largest NOTIFY answer read: a header, the question and a TSIG.
const MAX_REPLY: usize = 4096;

/// Datagrams read but not yet taken by the driver, at most.
const QUEUED_REPLIES: usize = 256;

/// Hands every datagram on `socket` (connected to `target`) to the
/// driver, and the port unreachable the kernel reports for an earlier
/// send; other errors are skipped.
async fn read_replies(socket: Arc<UdpSocket>, target: SocketAddr, replies: mpsc::Sender<Arrival>) {
    let mut buf = vec![0u8; MAX_REPLY];
    loop {
        let arrival = match socket.recv_from(&mut buf).await {
            Ok((n, from)) => Arrival::Reply(buf[..n].to_vec(), from),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Arrival::Unreachable(target),
            Err(_) => continue,
        };
        // A full queue drops the datagram (a flood to this port cannot
        // grow memory); a NOTIFY whose answer is lost is sent again.
        if let Err(mpsc::error::TrySendError::Closed(_)) = replies.try_send(arrival) {
            return;
        }
    }
}

/// Warnings about NOTIFYs that did not end well are the first
/// [`OUTCOME_LINES`] per target in each [`OUTCOME_WINDOW`]; the rest are
/// counted, and the next line told says how many: adding 1,000 members
/// to a catalog gave 1,000 lines "answered NOTAUTH" per secondary that
/// had not read the catalog yet (black-box finding).
#[derive(Default)]
struct OutcomeLines(HashMap<SocketAddr, (Instant, u32, u64)>);

const OUTCOME_LINES: u32 = 5;
const OUTCOME_WINDOW: Duration = Duration::from_secs(10);

impl OutcomeLines {
    /// Whether `outcome` to `target` gets its line now.
    fn admit(&mut self, target: SocketAddr, outcome: &Outcome, now: Instant) -> bool {
        if matches!(
            outcome,
            Outcome::Answered(Rcode::NOERROR) | Outcome::ZoneRemoved
        ) {
            return true; // debug lines only
        }
        let (opened, written, _) = self.0.entry(target).or_insert((now, 0, 0));
        if now.duration_since(*opened) >= OUTCOME_WINDOW {
            (*opened, *written) = (now, 0);
        }
        *written += 1;
        let told = *written <= OUTCOME_LINES;
        if !told {
            self.0.get_mut(&target).expect("just set").2 += 1;
        }
        told
    }

    /// The warnings about `target` not told since its last line told, now
    /// told with it (and forgotten).
    fn untold(&mut self, target: SocketAddr) -> u64 {
        self.0
            .get_mut(&target)
            .map_or(0, |(_, _, untold)| std::mem::take(untold))
    }
}

fn log_outcome(origin: &Name, addr: SocketAddr, outcome: &Outcome, untold: u64) {
    let more = match untold {
        0 => String::new(),
        n => format!(" ({n} more such lines about {addr} left out before this one)"),
    };
    // The zone and the peer as fields, as every zone event's line
    // (black-box finding BB-3: a JSON filter on `.zone` missed these).
    match outcome {
        Outcome::Answered(Rcode::NOERROR) => {
            tracing::debug!(zone = %origin, peer = %addr, "NOTIFY for {origin} to {addr} acknowledged")
        }
        Outcome::Answered(rcode) => {
            tracing::warn!(
                zone = %origin,
                peer = %addr,
                "NOTIFY for {origin} to {addr} answered {rcode}{more}"
            )
        }
        Outcome::NoAnswer => tracing::warn!(
            zone = %origin,
            peer = %addr,
            "NOTIFY for {origin} to {addr}: no valid answer after {TRIES} tries; it will refresh on its own timer{more}"
        ),
        Outcome::Failed(why) => {
            tracing::warn!(
                zone = %origin,
                peer = %addr,
                "NOTIFY for {origin} to {addr} failed: {why}{more}"
            )
        }
        Outcome::ZoneRemoved => tracing::debug!(
            zone = %origin,
            peer = %addr,
            "NOTIFY for {origin} to {addr} dropped: the zone was removed"
        ),
    }
}

/// A NOTIFY for `origin` carrying its SOA (RFC 1996 3.7 allows the
/// answer section to hint the new serial).
pub fn notify_message(origin: &Name, soa: &(u32, Vec<u8>), id: u16) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out, 65535);
    w.question(origin.as_wire(), RType::SOA, Class::IN);
    let _ = w.record(origin.as_wire(), RType::SOA, Class::IN, soa.0, &soa.1);
    w.finish(id, ((Opcode::NOTIFY.0 as u16) << 11) | flags::AA, 1);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_proto::message::Message;

    fn soa() -> (u32, Vec<u8>) {
        let mut rdata = b"\x02ns\x00\x01h\x00".to_vec();
        rdata.extend_from_slice(&[0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1]);
        (60, rdata)
    }

    /// A thousand NOTIFYs answered NOTAUTH by one target give five lines
    /// per window, the next one told counting those left out; another
    /// target has lines of its own, and acknowledgements are not counted.
    #[test]
    fn warnings_about_one_target_are_bounded_per_window() {
        let mut lines = OutcomeLines::default();
        let (a, b): (SocketAddr, SocketAddr) = (
            "192.0.2.1:53".parse().unwrap(),
            "192.0.2.2:53".parse().unwrap(),
        );
        let notauth = Outcome::Answered(Rcode::NOTAUTH);
        let start = Instant::now();
        let told = (0..1000)
            .filter(|_| lines.admit(a, &notauth, start))
            .count();
        assert_eq!(told, OUTCOME_LINES as usize);
        assert!(lines.admit(b, &notauth, start), "another target");
        assert!(lines.admit(a, &Outcome::Answered(Rcode::NOERROR), start));
        let later = start + OUTCOME_WINDOW;
        assert!(lines.admit(a, &notauth, later), "a new window");
        assert_eq!(lines.untold(a), 995, "told with the next line");
        assert_eq!(lines.untold(a), 0, "once");
    }

    #[test]
    fn the_message_is_an_authoritative_notify_with_the_soa() {
        let origin = Name::parse("n.test").unwrap();
        let m = Message::parse(&notify_message(&origin, &soa(), 42)).unwrap();
        assert_eq!(m.header.id, 42);
        assert_eq!(m.header.opcode(), Opcode::NOTIFY);
        assert!(m.header.has(flags::AA) && !m.header.has(flags::QR));
        assert_eq!(m.questions[0].qtype, RType::SOA);
        assert_eq!(m.answers[0].rdata, soa().1);
    }

    /// A fake secondary that ignores the first `ignore` NOTIFYs and
    /// acknowledges the next; returns how many it saw.
    async fn secondary(socket: UdpSocket, ignore: usize) -> usize {
        let mut buf = [0u8; 512];
        let mut seen = 0;
        loop {
            let (n, from) = socket.recv_from(&mut buf).await.unwrap();
            seen += 1;
            if seen > ignore {
                let mut reply = buf[..n].to_vec();
                reply[2] |= 0x80;
                socket.send_to(&reply, from).await.unwrap();
                return seen;
            }
        }
    }

    fn target(addr: SocketAddr) -> NotifyTarget {
        NotifyTarget {
            addr,
            key: None,
            source: None,
        }
    }

    /// Anyone can send to a NOTIFY socket: what the driver has not taken
    /// yet is bounded, the rest dropped, and the reader goes on.
    #[tokio::test]
    async fn datagrams_past_the_reply_queue_are_dropped() {
        let socket = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let addr = socket.local_addr().unwrap();
        let (replies, mut queued) = mpsc::channel(4);
        let reader = tokio::spawn(read_replies(socket, addr, replies));
        let flood = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        for i in 0..10u8 {
            flood.send_to(&[i], addr).await.unwrap();
        }
        // Loopback delivers at once: while the test sleeps, the reader
        // (on this single-threaded runtime) reads all ten.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut got = Vec::new();
        while let Ok(Arrival::Reply(bytes, _)) = queued.try_recv() {
            got.push(bytes[0]);
        }
        assert_eq!(got, [0, 1, 2, 3], "the queue holds 4, the rest is dropped");
        flood.send_to(&[99], addr).await.unwrap();
        let Some(Arrival::Reply(bytes, _)) = queued.recv().await else {
            panic!("a reply");
        };
        assert_eq!(bytes, [99], "the reader goes on after dropping");
        reader.abort();
    }

    #[tokio::test]
    async fn a_notify_comes_from_its_source_address() {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let from_source = NotifyTarget {
            source: Some("127.0.0.3".parse().unwrap()),
            ..target(socket.local_addr().unwrap())
        };
        let notifier = Notifier::start_with(Arc::new(Vec::new()), Duration::from_millis(500));
        let origin = Name::parse("n.test").unwrap();
        let (me, o, t) = (notifier.clone(), origin.clone(), from_source.clone());
        let sending = tokio::spawn(async move { me.notify_and_wait(&o, soa(), &[t]).await });
        let mut buf = [0u8; 512];
        let (n, from) = socket.recv_from(&mut buf).await.unwrap();
        assert_eq!(from.ip().to_string(), "127.0.0.3");
        buf[2] |= 0x80;
        socket.send_to(&buf[..n], from).await.unwrap();
        let outcomes = sending.await.unwrap();
        assert_eq!(
            outcomes,
            [(from_source.addr, Outcome::Answered(Rcode::NOERROR))]
        );

        let not_ours = NotifyTarget {
            source: Some("192.0.2.77".parse().unwrap()),
            ..target(socket.local_addr().unwrap())
        };
        let outcomes = notifier.notify_and_wait(&origin, soa(), &[not_ours]).await;
        assert!(
            matches!(&outcomes[..], [(_, Outcome::Failed(why))] if why.contains("source address 192.0.2.77")),
            "{outcomes:?}"
        );
    }

    #[tokio::test]
    async fn unanswered_notifies_are_retried_until_acknowledged() {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let fake = tokio::spawn(secondary(socket, 2));
        let notifier = Notifier::start_with(Arc::new(Vec::new()), Duration::from_millis(50));
        let origin = Name::parse("n.test").unwrap();
        let outcomes = notifier
            .notify_and_wait(&origin, soa(), &[target(addr)])
            .await;
        assert_eq!(outcomes, [(addr, Outcome::Answered(Rcode::NOERROR))]);
        assert_eq!(fake.await.unwrap(), 3, "two ignored, the third answered");
    }

    #[tokio::test]
    async fn a_silent_target_is_given_up_after_every_try() {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let counted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = counted.clone();
        let fake = tokio::spawn(async move {
            let mut buf = [0u8; 512];
            while socket.recv_from(&mut buf).await.is_ok() {
                count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
        let notifier = Notifier::start_with(Arc::new(Vec::new()), Duration::from_millis(5));
        let outcomes = notifier
            .notify_and_wait(&Name::parse("n.test").unwrap(), soa(), &[target(addr)])
            .await;
        assert_eq!(outcomes, [(addr, Outcome::NoAnswer)]);
        assert_eq!(
            counted.load(std::sync::atomic::Ordering::Relaxed),
            TRIES as usize
        );
        fake.abort();
    }

    #[tokio::test]
    async fn one_driver_notifies_many_targets_and_reports_each() {
        let mut fakes = Vec::new();
        let mut targets = Vec::new();
        for ignore in [0, 1, 0] {
            let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            targets.push(target(socket.local_addr().unwrap()));
            fakes.push(tokio::spawn(secondary(socket, ignore)));
        }
        let notifier = Notifier::start_with(Arc::new(Vec::new()), Duration::from_millis(50));
        let outcomes = notifier
            .notify_and_wait(&Name::parse("n.test").unwrap(), soa(), &targets)
            .await;
        let expected: Vec<_> = targets
            .iter()
            .map(|t| (t.addr, Outcome::Answered(Rcode::NOERROR)))
            .collect();
        assert_eq!(outcomes, expected);
        let mut seen = Vec::new();
        for fake in fakes {
            seen.push(fake.await.unwrap());
        }
        assert_eq!(seen, [1, 2, 1]);
    }

    /// Issue 44: a NOTIFY to a port nothing listens on waited out every
    /// retry (31 s); the ICMP port unreachable ends it at once.
    #[tokio::test]
    async fn a_notify_to_a_closed_port_fails_at_once() {
        let notifier = Notifier::start(SharedKeys::new(Arc::default()), Arc::default());
        let closed = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = closed.local_addr().unwrap();
        drop(closed);
        let outcomes = notifier
            .notify_and_wait(&Name::parse("n.test").unwrap(), soa(), &[target(addr)])
            .await;
        // Failed, not NoAnswer: ended by the port unreachable, not by
        // running out of retries.
        assert!(
            matches!(&outcomes[..], [(a, Outcome::Failed(why))] if *a == addr && why.contains("unreachable")),
            "{outcomes:?}"
        );
    }

    fn key(name: &str) -> Key {
        let name = Name::parse(name).unwrap();
        Key::new(name, tsig::Algorithm::HmacSha256, vec![7; 32])
    }

    /// A fake secondary knowing `keys`: answers each of `count` signed
    /// NOTIFYs as a server does, signed with the request's key or, for a
    /// key it does not know, NOTAUTH with the TSIG error unsigned; the
    /// keys of the NOTIFYs it saw.
    async fn keyed_secondary(socket: UdpSocket, keys: Vec<Key>, count: usize) -> Vec<String> {
        let mut buf = [0u8; 512];
        let mut seen = Vec::new();
        while seen.len() < count {
            let (n, from) = socket.recv_from(&mut buf).await.unwrap();
            let query = &buf[..n];
            let tsig_at = tsig::find(query).unwrap().expect("signed").start;
            let mut reply = query[..tsig_at].to_vec();
            reply[2] |= 0x80;
            reply[10..12].copy_from_slice(&[0, 0]);
            match tsig::verify_request(query, &keys, unix_now()) {
                Ok(Some(verified)) => {
                    seen.push(verified.key.name.to_string());
                    tsig::ResponseSigner::new(&verified).sign(&mut reply, unix_now());
                }
                Ok(None) => panic!("unsigned"),
                Err(failure) => {
                    seen.push(format!("refused: {}", failure.error));
                    reply[3] = (reply[3] & 0xF0) | Rcode::NOTAUTH.0 as u8;
                    tsig::error_response_tsig(&mut reply, &failure, &keys, unix_now());
                }
            }
            socket.send_to(&reply, from).await.unwrap();
        }
        seen
    }

    /// The same target listed twice is told once, and the wait for the
    /// answers ends (regression hunt: ctl notify hung until its timeout).
    #[tokio::test]
    async fn a_target_listed_twice_is_told_once() {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let fake = tokio::spawn(secondary(socket, 0));
        let notifier = Notifier::start_with(Arc::new(Vec::new()), Duration::from_millis(200));
        let outcomes = notifier
            .notify_and_wait(
                &Name::parse("n.test").unwrap(),
                soa(),
                &[target(addr), target(addr)],
            )
            .await;
        assert_eq!(outcomes, [(addr, Outcome::Answered(Rcode::NOERROR))]);
        assert_eq!(fake.await.unwrap(), 1);
    }

    /// The outcome of a NOTIFY signed with key `ours` to `addr`.
    async fn notify_signed_with_ours(
        addr: SocketAddr,
        first_timeout: Duration,
    ) -> Vec<(SocketAddr, Outcome)> {
        let keys = SharedKeys::new(Arc::new(vec![key("ours")]));
        let notifier = Notifier::spawn(keys, first_timeout, Arc::default());
        let signed = NotifyTarget {
            key: Some(Name::parse("ours").unwrap()),
            ..target(addr)
        };
        notifier
            .notify_and_wait(&Name::parse("n.test").unwrap(), soa(), &[signed])
            .await
    }

    /// A secondary that does not know our key answers NOTAUTH with
    /// BADKEY: the NOTIFY ends at once with that error, not after every
    /// retry as "no answer" (black-box finding; Knot and BIND stop too).
    #[tokio::test]
    async fn a_target_refusing_our_key_ends_the_notify_with_its_error() {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let fake = tokio::spawn(keyed_secondary(socket, vec![key("other")], 1));
        let outcomes = notify_signed_with_ours(addr, Duration::from_millis(200)).await;
        assert!(
            matches!(&outcomes[..], [(_, Outcome::Failed(why))] if why.contains("NOTAUTH") && why.contains("BADKEY")),
            "{outcomes:?}"
        );
        assert_eq!(fake.await.unwrap().len(), 1, "sent once");
    }

    /// A secondary that does not serve the zone answers our signed
    /// NOTIFY with NXDOMAIN, unsigned (NSD): the answer may be forged,
    /// so every try is sent, but the outcome says it answered and why it
    /// was not taken, not "no answer" (black-box finding AP-6).
    #[tokio::test]
    async fn an_unsigned_answer_to_a_signed_notify_is_said_when_the_tries_are_spent() {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let fake = tokio::spawn(async move {
            let mut buf = [0u8; 512];
            for _ in 0..TRIES {
                let (n, from) = socket.recv_from(&mut buf).await.unwrap();
                let tsig_at = tsig::find(&buf[..n]).unwrap().expect("signed").start;
                let mut reply = buf[..tsig_at].to_vec();
                reply[2] |= 0x80;
                reply[3] = (reply[3] & 0xF0) | Rcode::NXDOMAIN.0 as u8;
                reply[10..12].copy_from_slice(&[0, 0]);
                socket.send_to(&reply, from).await.unwrap();
            }
        });
        let outcomes = notify_signed_with_ours(addr, Duration::from_millis(5)).await;
        assert!(
            matches!(&outcomes[..], [(_, Outcome::Failed(why))]
                if why.contains("answered NXDOMAIN without") && why.contains("not signed")),
            "{outcomes:?}"
        );
        fake.await.unwrap(); // every try was sent
    }

    /// One address told with two keys (a secondary whose views are
    /// chosen by the key) gets both NOTIFYs, and each is reported
    /// (black-box finding: the second replaced the first).
    #[tokio::test]
    async fn one_address_with_two_keys_gets_two_notifies() {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let both = vec![key("one"), key("two")];
        let fake = tokio::spawn(keyed_secondary(socket, both.clone(), 2));
        let notifier = Notifier::spawn(
            SharedKeys::new(Arc::new(both)),
            FIRST_TIMEOUT,
            Arc::default(),
        );
        let with = |name: &str| NotifyTarget {
            key: Some(Name::parse(name).unwrap()),
            ..target(addr)
        };
        let outcomes = notifier
            .notify_and_wait(
                &Name::parse("n.test").unwrap(),
                soa(),
                &[with("one"), with("two")],
            )
            .await;
        let acknowledged = (addr, Outcome::Answered(Rcode::NOERROR));
        assert_eq!(outcomes, [acknowledged.clone(), acknowledged]);
        let mut seen = fake.await.unwrap();
        seen.sort();
        assert_eq!(seen, ["one.", "two."]);
    }

    #[tokio::test]
    async fn an_unknown_key_fails_without_sending() {
        let notifier = Notifier::start(SharedKeys::new(Arc::default()), Arc::default());
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let target = NotifyTarget {
            addr,
            key: Some(Name::parse("missing.key").unwrap()),
            source: None,
        };
        let outcomes = notifier
            .notify_and_wait(&Name::parse("n.test").unwrap(), soa(), &[target])
            .await;
        assert!(
            matches!(&outcomes[..], [(a, Outcome::Failed(why))] if *a == addr && why.contains("missing.key")),
            "{outcomes:?}"
        );
    }
}
