//! UPDATEs for a secondary zone, forwarded to its primary (RFC 2136 6).
//! The query processor decided (`allow-update-forwarding`, TSIG checked);
//! this moves the message over TCP to the zone's primaries in order, and
//! the first answer back to the client. By default the message goes as
//! the client sent it (its TSIG too, which the primary verifies) and the
//! answer comes back unchanged (signed by the primary with the client's
//! key). With `update-forwarding-key` the client's TSIG is taken off and
//! the message signed with that key; the primary's answer must verify
//! with it (else SERVFAIL, counted by zone, logged once a zone), and is
//! signed again with the client's key. An answer that is no DNS message
//! to the request, or one past the client's UDP limit, is not relayed.
//! Bounded: at most
//! [`MAX_OUTSTANDING`] forwards wait at once, shared between primaries
//! as [`Waiting::admits`] says (more are answered SERVFAIL at once), each
//! for
//! [`FORWARD_TIMEOUT`] at most (then SERVFAIL). Connections to a
//! primary are kept for the next forward ([`IDLE_PER_PRIMARY`] at most):
//! a flood of forwards left one TIME_WAIT each on the path to the primary
//! (black-box finding BH-1). The lines of forwards answered are limited as
//! those of NOTIFYs: an address rule over UDP is anyone's to send from.

use heron_server::processor::log_limit::{LOG_INTERVAL, LogLimiter};
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use heron_proto::time::unix_now;
use heron_proto::tsig::{self, DEFAULT_FUDGE, Key, ResponseVerifier, TsigError};
use heron_proto::{Name, Rcode};
use heron_server::processor::UpdateRequest;
use heron_server::update::Update;
use heron_xfr::secondary::client::Upstream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::Semaphore;

use crate::runtime::Transfers;

/// Forwards waiting for a primary's answer at most.
pub(crate) const MAX_OUTSTANDING: usize = 256;
/// How long a forward waits for its answer, every primary tried.
pub(crate) const FORWARD_TIMEOUT: Duration = Duration::from_secs(5);
/// Forwards one primary (the first a zone asks) is sure of while any
/// slot is free: a primary that hangs held every slot, and forwarding
/// failed for every other zone (black-box finding).
pub(crate) const PRIMARY_SURE: usize = 16;
/// Forwards one primary takes while more than this many slots are free;
/// past it a primary takes slots only while fewer than half are taken.
/// So one primary alone (the usual hidden primary) has half the pool,
/// not a quarter (regression hunt: a slow but working primary got
/// SERVFAILs at the 17th forward), and however many primaries hang, a
/// working one still has its sure share until six hang at once.
pub(crate) const PRIMARY_SHARE: usize = MAX_OUTSTANDING / 4;

/// Connections to one primary kept for the next forward, and open at
/// once, at most. Forwards take turns on them, each waiting for its
/// answer: 8 were too few for a primary half a second away (black-box
/// finding BM-4: a burst of 100 waited past its deadline); the primary
/// closes those it finds idle.
pub(crate) const IDLE_PER_PRIMARY: usize = 32;

/// The forwards in flight.
pub(crate) struct Forwarder {
    slots: Arc<Semaphore>,
    waiting: Arc<Mutex<Waiting>>,
    kept: Arc<KeptConnections>,
    /// Whether the task pruning `kept` runs.
    pruning: std::sync::atomic::AtomicBool,
}

/// Connections whose forward was answered, by primary and source address,
/// for the next forward to reuse.
#[derive(Default)]
struct KeptConnections {
    by_route: Mutex<HashMap<Route, Vec<TcpStream>>>,
    /// Turns to use a connection, [`IDLE_PER_PRIMARY`] a route: a burst
    /// waits for the kept connections rather than opening one a forward
    /// (black-box finding BK-11: 3,000 forwards left 570 TIME_WAITs).
    turns: Mutex<HashMap<Route, Arc<Semaphore>>>,
}

/// Whether a kept connection is still open: nothing to read. An EOF, or
/// bytes nobody asked for, is not.
fn still_open(stream: &TcpStream) -> bool {
    matches!(stream.try_read(&mut [0u8; 1]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// How often kept connections are looked at for ones their primary closed.
const PRUNE_EVERY: Duration = Duration::from_secs(30);

/// A primary and the source address connections to it are made from.
type Route = (SocketAddr, Option<IpAddr>);

impl KeptConnections {
    /// A kept connection to `primary` the primary has not closed.
    fn take(&self, primary: &Upstream) -> Option<TcpStream> {
        let mut by_route = self.by_route.lock().unwrap_or_else(|e| e.into_inner());
        let kept = by_route.get_mut(&(primary.addr, primary.source))?;
        while let Some(stream) = kept.pop() {
            if still_open(&stream) {
                return Some(stream);
            }
        }
        None
    }

    /// Closes the kept connections their primaries have closed, so that
    /// none waits in CLOSE-WAIT for a forward that may never come
    /// (black-box finding BK-8).
    fn prune(&self) {
        let mut by_route = self.by_route.lock().unwrap_or_else(|e| e.into_inner());
        by_route
            .values_mut()
            .for_each(|kept| kept.retain(still_open));
        by_route.retain(|_, kept| !kept.is_empty());
    }

    /// A turn to use a connection to `primary`, waited for.
    async fn turn(&self, primary: &Upstream) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let turns = (self.turns.lock().unwrap_or_else(|e| e.into_inner()))
            .entry((primary.addr, primary.source))
            .or_insert_with(|| Arc::new(Semaphore::new(IDLE_PER_PRIMARY)))
            .clone();
        turns.acquire_owned().await.ok()
    }

    /// Keeps `stream` unless [`IDLE_PER_PRIMARY`] are kept already.
    fn give_back(&self, primary: &Upstream, stream: TcpStream) {
        let mut by_route = self.by_route.lock().unwrap_or_else(|e| e.into_inner());
        let kept = by_route.entry((primary.addr, primary.source)).or_default();
        if kept.len() < IDLE_PER_PRIMARY {
            kept.push(stream);
        }
    }
}

/// Forwards waiting, by the first primary asked.
#[derive(Default)]
struct Waiting {
    by_primary: std::collections::HashMap<SocketAddr, usize>,
    total: usize,
}

impl Waiting {
    /// Whether one more forward to a primary with `count` waiting may wait.
    fn admits(&self, count: usize) -> bool {
        let free = MAX_OUTSTANDING - self.total;
        (count < PRIMARY_SURE && free > 0)
            || (count < PRIMARY_SHARE && free > PRIMARY_SHARE)
            || self.total < MAX_OUTSTANDING / 2
    }
}

impl Default for Forwarder {
    fn default() -> Self {
        Forwarder {
            slots: Arc::new(Semaphore::new(MAX_OUTSTANDING)),
            waiting: Arc::default(),
            kept: Arc::default(),
            pruning: Default::default(),
        }
    }
}

/// A primary's share of the forwards waiting, given back when dropped.
struct PrimaryShare {
    waiting: Arc<Mutex<Waiting>>,
    primary: SocketAddr,
}

impl PrimaryShare {
    /// One more forward to `primary`, if [`Waiting::admits`] it.
    fn take(forwarder: &Forwarder, primary: SocketAddr) -> Option<PrimaryShare> {
        let mut waiting = (forwarder.waiting.lock()).unwrap_or_else(|e| e.into_inner());
        let count = waiting.by_primary.get(&primary).copied().unwrap_or(0);
        if !waiting.admits(count) {
            return None;
        }
        *waiting.by_primary.entry(primary).or_default() += 1;
        waiting.total += 1;
        Some(PrimaryShare {
            waiting: forwarder.waiting.clone(),
            primary,
        })
    }
}

impl Drop for PrimaryShare {
    fn drop(&mut self) {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        waiting.total -= 1;
        if let Some(count) = waiting.by_primary.get_mut(&self.primary) {
            *count -= 1;
            if *count == 0 {
                waiting.by_primary.remove(&self.primary);
            }
        }
    }
}

impl Forwarder {
    /// Sends `update` on to its zone's primaries; answers it when one
    /// answers, or SERVFAIL (no slot free, no primary, no answer in time).
    pub(crate) fn forward(&self, update: Update, xfr: &Arc<Transfers>) {
        let origin = update.request.origin.clone();
        let running = xfr.secondaries.lock().unwrap_or_else(|e| e.into_inner());
        let primaries = running.as_ref().and_then(|r| r.primaries_of(&origin));
        drop(running);
        let targets: Vec<Upstream> = (primaries.iter().flat_map(|p| p.iter()))
            .filter(|p| p.tls.is_none())
            .cloned()
            .collect();
        if targets.is_empty() {
            let why = "it has no primary reached over plain TCP";
            return give_up(update, xfr, why);
        }
        let signing = match forwarding_key(&origin, xfr) {
            Ok(key) => key,
            Err(why) => return give_up(update, xfr, &why),
        };
        let first = targets[0].addr;
        let Some(share) = PrimaryShare::take(self, first) else {
            let why = format!("forwarded updates for {first} are waiting already, past its share");
            return give_up_as(update, xfr, ALL_SLOTS_TAKEN, &why);
        };
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            let why = format!("{MAX_OUTSTANDING} forwarded updates are waiting already");
            return give_up_as(update, xfr, ALL_SLOTS_TAKEN, &why);
        };
        if !self
            .pruning
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            let kept = Arc::downgrade(&self.kept);
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(PRUNE_EVERY).await;
                    let Some(kept) = kept.upgrade() else { return };
                    kept.prune();
                }
            });
        }
        let (xfr, kept) = (xfr.clone(), self.kept.clone());
        tokio::spawn(async move {
            let _slot = (slot, share);
            let resigned = signing.map(|key| resign(&update.request, key));
            let message = resigned
                .as_ref()
                .map_or(&update.request.message, |r| &r.message);
            let sent =
                tokio::time::timeout(FORWARD_TIMEOUT, ask_primaries(&targets, message, &kept));
            match (sent.await, resigned) {
                (Ok(Some((answer, primary))), None) => relay(update, answer, primary, &xfr),
                (Ok(Some((answer, primary))), Some(r)) => {
                    relay_resigned(update, answer, primary, r, &xfr)
                }
                (Ok(None), _) => give_up(update, &xfr, "no primary answered"),
                (Err(_), _) => {
                    // Perhaps sent, and made by the primary: said so.
                    let why = "no primary answered in time; it may have been made";
                    give_up(update, &xfr, why)
                }
            }
        });
    }
}

/// The key the zone's `update-forwarding-key` names (None: the message
/// goes as the client signed it); an error if a reload dropped the key.
fn forwarding_key(origin: &Name, xfr: &Transfers) -> Result<Option<Key>, String> {
    let Some(name) = xfr.primary.policy(origin).update.forwarding_key.clone() else {
        return Ok(None);
    };
    let keys = xfr.keys.load();
    match keys.iter().find(|k| k.name == name) {
        Some(key) => Ok(Some(key.clone())),
        None => Err(format!("its update-forwarding-key {name} is not defined")),
    }
}

/// A forward signed with the zone's forwarding key.
struct Resigned {
    message: Vec<u8>,
    key: Key,
    /// The MAC the primary's answer is verified with.
    mac: Vec<u8>,
}

/// The client's message with its own TSIG off, signed with `key`.
fn resign(request: &UpdateRequest, key: Key) -> Resigned {
    let mut message = request.unsigned_message();
    let mac = tsig::sign_request(&mut message, &key, unix_now(), DEFAULT_FUDGE);
    Resigned { message, key, mac }
}

/// Forwarded answers whose TSIG did not verify with the zone's
/// forwarding key, by lower-cased origin as text (for the metrics).
pub(crate) fn tsig_failures() -> &'static Mutex<BTreeMap<String, u64>> {
    static FAILURES: OnceLock<Mutex<BTreeMap<String, u64>>> = OnceLock::new();
    FAILURES.get_or_init(Default::default)
}

/// The primary's answer to a re-signed forward: verified with the
/// forwarding key, its TSIG taken off and the answer signed again with
/// the client's key. One that does not verify is SERVFAIL.
fn relay_resigned(
    update: Update,
    mut answer: Vec<u8>,
    primary: SocketAddr,
    sent: Resigned,
    xfr: &Transfers,
) {
    let now = unix_now();
    let mut verifier = ResponseVerifier::new(&sent.key, sent.mac);
    let checked = (verifier.verify(&answer, now)).and_then(|()| tsig::strip(&mut answer).map(drop));
    if let Err(error) = checked {
        return bad_signature(update, xfr, primary, &sent.key.name, error);
    }
    relay(update, answer, primary, xfr);
}

/// SERVFAIL for an answer that failed its TSIG check: counted, and
/// logged the first time for each zone (later ones at debug level).
fn bad_signature(update: Update, xfr: &Transfers, primary: SocketAddr, key: &Name, e: TsigError) {
    let (zone, peer) = (&update.request.origin, update.request.peer);
    let first = {
        let mut failures = tsig_failures().lock().unwrap_or_else(|e| e.into_inner());
        let count = failures.entry(zone.to_lowercase().to_string()).or_default();
        *count += 1;
        *count == 1
    };
    let why = format!("{primary} answered, but its TSIG failed the check with key {key}: {e}");
    if first {
        tracing::warn!(%zone, %peer, "UPDATE of {zone} from {peer} forwarded: {why}: SERVFAIL (further failures for {zone} are counted in heron_update_forward_tsig_failures_total, not logged)");
    } else {
        tracing::debug!(%zone, %peer, "UPDATE of {zone} from {peer} forwarded: {why}: SERVFAIL");
    }
    xfr.zone_stats.update(zone, Rcode::SERVFAIL.0);
    update.answer_rcode(Rcode::SERVFAIL);
}

/// The first answer to `message` from `primaries`, in order, and who
/// gave it.
/// Each primary in turn; all but the last get an equal part of
/// [`FORWARD_TIMEOUT`], so that one that hangs leaves the next time to
/// answer (black-box finding: the first took it all; BIND goes on to the
/// second). The caller bounds the whole.
async fn ask_primaries(
    primaries: &[Upstream],
    message: &[u8],
    kept: &KeptConnections,
) -> Option<(Vec<u8>, SocketAddr)> {
    let each = FORWARD_TIMEOUT / u32::try_from(primaries.len()).unwrap_or(u32::MAX).max(1);
    for (i, primary) in primaries.iter().enumerate() {
        let last = i + 1 == primaries.len();
        let attempt = exchange(primary, message, kept);
        let answered = match last {
            true => attempt.await,
            false => (tokio::time::timeout(each, attempt).await)
                .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into())),
        };
        match answered {
            Ok(answer) if answers(&answer, message) => return Some((answer, primary.addr)),
            Ok(_) => tracing::debug!("forwarded UPDATE: {} answered something else", primary.addr),
            Err(e) => tracing::debug!("forwarded UPDATE: {}: {e}", primary.addr),
        }
    }
    None
}

/// One exchange over a kept connection, or a new one (from the primary's
/// configured source address, if any), kept afterwards. A kept one that
/// fails (the primary closed it as the message went) is given up for a
/// new one.
async fn exchange(
    primary: &Upstream,
    message: &[u8],
    kept: &KeptConnections,
) -> std::io::Result<Vec<u8>> {
    let _turn = kept.turn(primary).await;
    if let Some(mut stream) = kept.take(primary) {
        match exchange_on(&mut stream, message).await {
            Ok(answer) => return Ok(keep_if_answered(kept, primary, stream, answer, message)),
            Err(e) => tracing::debug!("forwarded UPDATE: a kept connection failed: {e}"),
        }
    }
    let mut stream = connect(primary).await?;
    let answer = exchange_on(&mut stream, message).await?;
    Ok(keep_if_answered(kept, primary, stream, answer, message))
}

/// `answer`, its connection kept if it answers `message` (after anything
/// else, what the primary sends next is not known to be in step).
fn keep_if_answered(
    kept: &KeptConnections,
    primary: &Upstream,
    stream: TcpStream,
    answer: Vec<u8>,
    message: &[u8],
) -> Vec<u8> {
    if answers(&answer, message) {
        kept.give_back(primary, stream);
    }
    answer
}

/// `message` and its answer on `stream`.
async fn exchange_on(stream: &mut TcpStream, message: &[u8]) -> std::io::Result<Vec<u8>> {
    let len = u16::try_from(message.len()).map_err(std::io::Error::other)?;
    let mut framed = Vec::with_capacity(2 + message.len());
    framed.extend_from_slice(&len.to_be_bytes());
    framed.extend_from_slice(message);
    stream.write_all(&framed).await?;
    // A message with another ID (a primary's stray copy of an earlier
    // answer) is passed over, a few at most (black-box finding BK-10: it
    // was taken for this forward's answer, and the forward failed).
    for _ in 0..STRAY_MESSAGES {
        let mut len = [0u8; 2];
        stream.read_exact(&mut len).await?;
        let mut answer = vec![0u8; usize::from(u16::from_be_bytes(len))];
        stream.read_exact(&mut answer).await?;
        if answer.get(..2) == message.get(..2) || answer.len() < 2 {
            return Ok(answer);
        }
    }
    Err(std::io::Error::other("no answer with the forward's ID"))
}

/// Messages with another ID read past before a forward gives up.
const STRAY_MESSAGES: usize = 4;

async fn connect(primary: &Upstream) -> std::io::Result<TcpStream> {
    let Some(source) = primary.source else {
        return TcpStream::connect(primary.addr).await;
    };
    let socket = match primary.addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.bind(SocketAddr::new(source, 0))?;
    socket.connect(primary.addr).await
}

/// Whether `answer` is a response to `request`: a whole DNS header at
/// least (a shorter one is not a message to relay), the same ID, QR
/// set, the same opcode.
fn answers(answer: &[u8], request: &[u8]) -> bool {
    const HEADER: usize = 12;
    let (Some(a), Some(r)) = (answer.get(..HEADER), request.get(..4)) else {
        return false;
    };
    a[..2] == r[..2] && a[2] & 0x80 != 0 && (a[2] & 0x78) == (r[2] & 0x78)
}

/// The primary's answer, given to the client: as it is when the client
/// signed the request and it went on so (the primary's MAC is over it);
/// else as this server's own answer with the primary's rcode, carrying
/// the options the client asked of this server (its cookie, NSID,
/// keepalive over TCP, padding over TLS), signed with the client's key
/// if the request was (black-box finding BD-4: the primary's OPT was
/// relayed, its NSID and cookie, a keepalive over UDP, no padding).
fn relay(update: Update, answer: Vec<u8>, primary: SocketAddr, xfr: &Transfers) {
    let passed_through =
        update.request.key().is_some() && tsig::find(&answer).is_ok_and(|r| r.is_some());
    let rcode = Rcode(u16::from(answer[3] & 0x0f));
    let answer = match passed_through {
        true => answer,
        false => update.request.response(rcode, unix_now()),
    };
    let limit = update.request.udp_limit;
    if update.is_datagram() && answer.len() > limit {
        let why = format!(
            "{primary}'s answer of {} bytes is past the client's UDP limit of {limit}",
            answer.len()
        );
        return give_up(update, xfr, &why);
    }
    let (zone, peer) = (&update.request.origin, update.request.peer);
    let key = update.request.key().map_or("-".into(), |k| k.to_string());
    if let Some(due) = FORWARDED_LOG.admit(0, unix_now()) {
        let more = due.tail();
        tracing::info!(%zone, %peer, %key, "UPDATE of {zone} from {peer} key {key}: forwarded to {primary}, which answered {rcode}{more}");
    }
    xfr.zone_stats.update(zone, rcode.0);
    update.answer(answer);
}

/// Lines of forwarded UPDATEs answered, per [`LOG_INTERVAL`] (each also
/// counted by zone and rcode in the metrics): one a message, a flood over
/// UDP made as many lines (black-box finding BH-1).
static FORWARDED_LOG: std::sync::LazyLock<LogLimiter<1>> =
    std::sync::LazyLock::new(|| LogLimiter::with_lines(LOG_INTERVAL, FORWARDED_LINES));
const FORWARDED_LINES: u64 = 10;

/// Lines of forwarded UPDATEs given up, per [`LOG_INTERVAL`]: a client
/// that may forward sends as many as it likes (10,000 made as many lines
/// with the primary down); the rest are counted in the next line.
/// Two reasons: all slots taken, and the rest (no primary, no answer).
static GIVE_UP_LOG: std::sync::LazyLock<LogLimiter<2>> =
    std::sync::LazyLock::new(|| LogLimiter::with_lines(LOG_INTERVAL, GIVE_UP_LINES));
const GIVE_UP_LINES: u64 = 5;
/// The log reasons of [`GIVE_UP_LOG`].
const ALL_SLOTS_TAKEN: usize = 0;
const NOT_DELIVERED: usize = 1;

fn give_up(update: Update, xfr: &Transfers, why: &str) {
    give_up_as(update, xfr, NOT_DELIVERED, why)
}

fn give_up_as(update: Update, xfr: &Transfers, reason: usize, why: &str) {
    let (zone, peer) = (&update.request.origin, update.request.peer);
    let key = update.request.key().map_or("-".into(), |k| k.to_string());
    if let Some(due) = GIVE_UP_LOG.admit(reason, heron_proto::time::unix_now()) {
        let more = due.tail();
        tracing::warn!(%zone, %peer, %key, "UPDATE of {zone} from {peer} key {key}: forwarding to its primary failed ({why}): SERVFAIL{more}");
    }
    xfr.zone_stats.update(zone, Rcode::SERVFAIL.0);
    update.answer_rcode(Rcode::SERVFAIL);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kept connection its primary closed is closed by the next prune,
    /// not held in CLOSE-WAIT until a forward comes (black-box finding
    /// BK-8); one still open is kept.
    #[tokio::test]
    async fn kept_connections_their_primary_closed_are_pruned() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let primary = Upstream {
            addr: listener.local_addr().unwrap(),
            key: None,
            tls: None,
            source: None,
        };
        let kept = KeptConnections::default();
        let (open, closed) = (
            connect(&primary).await.unwrap(),
            connect(&primary).await.unwrap(),
        );
        let (_open_end, _) = listener.accept().await.unwrap();
        let (closed_end, _) = listener.accept().await.unwrap();
        kept.give_back(&primary, open);
        kept.give_back(&primary, closed);
        drop(closed_end);
        let count = |k: &KeptConnections| {
            let by_route = k.by_route.lock().unwrap();
            by_route.values().map(Vec::len).sum::<usize>()
        };
        let pruned = async {
            loop {
                kept.prune();
                if count(&kept) < 2 {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), pruned)
            .await
            .expect("pruned");
        assert_eq!(count(&kept), 1, "the open one kept");
    }

    /// A primary alone takes half of all the forwards; past its share it
    /// takes no more once half are taken, and past its sure part none
    /// while only a share is free: however many primaries hang (five
    /// here), a working one still gets its sure part (regression hunt:
    /// three hung ones took every slot). A share given back is free
    /// again, and nothing is left over.
    #[test]
    fn hung_primaries_leave_a_working_one_its_sure_part() {
        let forwarder = Forwarder::default();
        let primary = |n: u8| SocketAddr::from(([192, 0, 2, n], 53));
        let take = |p: SocketAddr| PrimaryShare::take(&forwarder, p);
        let fill = |p: SocketAddr| std::iter::from_fn(|| take(p)).collect::<Vec<_>>();
        let mut held = fill(primary(1));
        assert_eq!(held.len(), MAX_OUTSTANDING / 2, "half the pool alone");
        let second = fill(primary(2));
        assert_eq!(
            second.len(),
            PRIMARY_SHARE,
            "its share while a share is free"
        );
        let others: Vec<Vec<PrimaryShare>> = (3..=5).map(|n| fill(primary(n))).collect();
        let sizes: Vec<usize> = others.iter().map(Vec::len).collect();
        assert_eq!(sizes, [PRIMARY_SURE; 3], "their sure part");
        let working = fill(primary(9));
        assert_eq!(
            working.len(),
            PRIMARY_SURE,
            "a working one still gets its own"
        );
        held.truncate(MAX_OUTSTANDING / 2 - 1);
        assert!(
            take(primary(1)).is_none(),
            "none past half while others wait"
        );
        drop((held, second, working));
        let waiting = forwarder.waiting.lock().unwrap();
        assert_eq!(
            waiting.by_primary.len(),
            3,
            "the fills dropped gave theirs back"
        );
    }

    #[test]
    fn an_answer_matches_its_request_by_id_qr_and_opcode() {
        let request = [0x12, 0x34, 5 << 3, 0, 0, 1];
        let header = |a: [u8; 4]| [&a[..], &[0; 8]].concat();
        assert!(answers(
            &header([0x12, 0x34, 0x80 | 5 << 3, 0x05]),
            &request
        ));
        assert!(
            !answers(&header([0x12, 0x35, 0x80 | 5 << 3, 0]), &request),
            "ID"
        );
        assert!(
            !answers(&header([0x12, 0x34, 5 << 3, 0]), &request),
            "not a response"
        );
        assert!(
            !answers(&header([0x12, 0x34, 0x80, 0]), &request),
            "a QUERY"
        );
        assert!(!answers(&[0x12, 0x34, 0x80], &request), "too short");
        assert!(!answers(&[], &request));
        // A primary's garbage that starts as the answer would: the ID,
        // QR and opcode, no whole header. Not relayed to the client.
        let garbage = [0x12, 0x34, 0x80 | 5 << 3, 0x05, 0, 0, 0, 0, 0, 0, 0];
        assert!(!answers(&garbage, &request), "11 bytes");
        let whole = [&garbage[..], &[0]].concat();
        assert!(answers(&whole, &request), "12 bytes: a header");
    }
}
