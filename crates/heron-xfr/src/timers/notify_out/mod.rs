//! NOTIFY out (RFC 1996 3.6) as a state machine without I/O: every
//! pending NOTIFY of every zone, its retransmissions and its end.
//!
//! [`NotifyOut`] is told what happened and when (a new serial to announce,
//! an answer, a failure, a zone removed, the wake-up time come) and answers
//! with [`NotifyAction`]s: send this message, or this NOTIFY is over and
//! how. The tokio driver ([`crate::primary::notify`]) owns the socket,
//! signs, verifies and feeds the results back; tests drive it with a fake
//! clock.
//!
//! The rules:
//!
//! * One NOTIFY per (zone, target, key) is pending at a time. A new serial for
//!   a zone supersedes what is pending for it: the retries of the old
//!   serial stop, and the new one is sent (at once if the old one was
//!   already sent) with a fresh count of tries.
//! * An unanswered NOTIFY is sent again after a timeout that doubles after
//!   every try, up to [`TRIES`] sends; then it is given up (the secondary
//!   refreshes on its own timer).
//! * An answer to the last message sent ends it, whatever its code.
//! * At most `limit` NOTIFYs are outstanding (sent and not over); the rest
//!   wait their turn in the order they came, so a reload of 100,000 zones
//!   does not put 100,000 messages on the wire at once.
//!
//! Retransmissions sit in one ordered set of (when, pending), as the zone
//! timers' wake-ups do ([`super::Timers`]).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use heron_proto::{Name, Rcode};

#[cfg(test)]
mod tests;

/// A secondary to notify of new serials, with the TSIG key to sign with
/// and the local address to send from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotifyTarget {
    pub addr: SocketAddr,
    pub key: Option<Name>,
    /// None: the kernel's choice.
    pub source: Option<IpAddr>,
}

/// Sends per NOTIFY before it is given up.
pub const TRIES: u32 = 5;

/// The SOA a NOTIFY carries: (TTL, RDATA).
pub type Soa = Arc<(u32, Vec<u8>)>;

/// A pending NOTIFY, numbered by the machine while it is pending; the
/// number is reused once it is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PendingId(u32);

/// How one NOTIFY ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The target answered with this response code.
    Answered(Rcode),
    /// No valid answer after every try.
    NoAnswer,
    /// It could not be sent (no such key, the socket failed).
    Failed(String),
    /// Its zone is no longer served.
    ZoneRemoved,
}

/// What to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotifyAction {
    /// Send a NOTIFY for `origin` with `soa` to `target`, with message ID
    /// `id`; only an answer with that ID counts.
    Send {
        pending: PendingId,
        origin: Name,
        soa: Soa,
        target: NotifyTarget,
        id: u16,
    },
    /// The NOTIFY is over; `pending` may name another one from now on.
    Finished {
        pending: PendingId,
        origin: Name,
        target: SocketAddr,
        outcome: Outcome,
    },
}

/// A pending NOTIFY's place: lower-cased origin, address, key.
type TargetKey = (Name, SocketAddr, Option<Name>);

/// A source of message IDs: numbers spread evenly over `u16`.
pub type MessageIds = Box<dyn FnMut() -> u16 + Send>;

/// Every pending NOTIFY.
pub struct NotifyOut {
    slots: Vec<Option<Pending>>,
    free: Vec<PendingId>,
    /// By lower-cased origin, target address and key: one address may be
    /// told twice, with two keys (a secondary whose views are chosen by
    /// the key, as BIND's are).
    by_target: HashMap<TargetKey, PendingId>,
    /// The last message sent to each address, by its ID: answers are
    /// matched by (address, ID).
    by_message: HashMap<(SocketAddr, u16), PendingId>,
    /// Retransmissions and give-ups, in time order.
    wakeups: BTreeSet<(Instant, PendingId)>,
    /// Not sent yet: more than `limit` were outstanding.
    waiting: VecDeque<PendingId>,
    outstanding: usize,
    limit: usize,
    first_timeout: Duration,
    ids: MessageIds,
}

struct Pending {
    origin: Name,
    target: NotifyTarget,
    soa: Soa,
    /// Sends so far of this serial.
    tries: u32,
    /// Sent: the message's ID and when it times out.
    sent: Option<(u16, Instant)>,
}

impl NotifyOut {
    /// At most `limit` NOTIFYs outstanding, the first retransmission
    /// `first_timeout` after the first send.
    pub fn new(limit: usize, first_timeout: Duration, ids: MessageIds) -> NotifyOut {
        assert!(limit > 0, "at least one NOTIFY may be outstanding");
        NotifyOut {
            slots: Vec::new(),
            free: Vec::new(),
            by_target: HashMap::new(),
            by_message: HashMap::new(),
            wakeups: BTreeSet::new(),
            waiting: VecDeque::new(),
            outstanding: 0,
            limit,
            first_timeout,
            ids,
        }
    }

    /// When to call [`NotifyOut::wake`] next, if ever.
    pub fn next_wakeup(&self) -> Option<Instant> {
        self.wakeups.first().map(|(at, _)| *at)
    }

    /// NOTIFYs pending: sent and waiting to be.
    pub fn pending(&self) -> usize {
        self.by_target.len()
    }

    /// NOTIFYs sent and not over.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// `origin` has a new serial, with `soa`: tell each of `targets`.
    /// Returns the pending NOTIFY of each target, in their order.
    pub fn notify(
        &mut self,
        now: Instant,
        origin: &Name,
        soa: &Soa,
        targets: &[NotifyTarget],
        out: &mut Vec<NotifyAction>,
    ) -> Vec<PendingId> {
        let lower = origin.to_lowercase();
        let mut ids = Vec::with_capacity(targets.len());
        for target in targets {
            let key = (lower.clone(), target.addr, target.key.clone());
            let id = match self.by_target.get(&key) {
                Some(&id) => {
                    self.supersede(now, id, soa, target, out);
                    id
                }
                None => {
                    let id = self.insert(Pending {
                        origin: origin.clone(),
                        target: target.clone(),
                        soa: soa.clone(),
                        tries: 0,
                        sent: None,
                    });
                    self.by_target.insert(key, id);
                    self.waiting.push_back(id);
                    id
                }
            };
            ids.push(id);
        }
        self.send_waiting(now, out);
        ids
    }

    /// The pending NOTIFY whose last message to `from` had ID `id`, if
    /// any: the one an answer from there is for.
    pub fn answer_for(&self, from: SocketAddr, id: u16) -> Option<PendingId> {
        self.by_message.get(&(from, id)).copied()
    }

    /// The target of `pending` answered its last message.
    pub fn answered(
        &mut self,
        now: Instant,
        pending: PendingId,
        rcode: Rcode,
        out: &mut Vec<NotifyAction>,
    ) {
        if self.is_sent(pending) {
            self.finish(pending, Outcome::Answered(rcode), out);
            self.send_waiting(now, out);
        }
    }

    /// `pending` could not be sent, for `why`.
    pub fn failed(
        &mut self,
        now: Instant,
        pending: PendingId,
        why: String,
        out: &mut Vec<NotifyAction>,
    ) {
        if self.slot(pending).is_some() {
            self.finish(pending, Outcome::Failed(why), out);
            self.send_waiting(now, out);
        }
    }

    /// The zone of a pending NOTIFY.
    pub fn origin_of(&self, pending: PendingId) -> Option<&Name> {
        self.slot(pending).map(|p| &p.origin)
    }

    /// The NOTIFYs waiting for an answer from `target`, of any zone.
    pub fn pending_to(&self, target: SocketAddr) -> Vec<PendingId> {
        (self.by_target.iter())
            .filter(|((_, to, _), _)| *to == target)
            .map(|(_, &id)| id)
            .collect()
    }

    /// `origin` is served no more: its NOTIFYs end.
    pub fn zone_removed(&mut self, now: Instant, origin: &Name, out: &mut Vec<NotifyAction>) {
        let lower = origin.to_lowercase();
        let gone: Vec<PendingId> = self
            .by_target
            .iter()
            .filter(|((zone, _, _), _)| *zone == lower)
            .map(|(_, &id)| id)
            .collect();
        for id in gone {
            self.finish(id, Outcome::ZoneRemoved, out);
        }
        self.send_waiting(now, out);
    }

    /// The wake-up time came: NOTIFYs unanswered for their timeout are
    /// sent again, or given up after their last try.
    pub fn wake(&mut self, now: Instant, out: &mut Vec<NotifyAction>) {
        while let Some(&(at, id)) = self.wakeups.first() {
            if at > now {
                break;
            }
            self.wakeups.pop_first();
            if self.slot(id).is_some_and(|p| p.tries >= TRIES) {
                self.finish(id, Outcome::NoAnswer, out);
            } else {
                self.send(now, id, out);
            }
        }
        self.send_waiting(now, out);
    }

    fn insert(&mut self, pending: Pending) -> PendingId {
        match self.free.pop() {
            Some(id) => {
                self.slots[id.0 as usize] = Some(pending);
                id
            }
            None => {
                self.slots.push(Some(pending));
                PendingId(self.slots.len() as u32 - 1)
            }
        }
    }

    fn slot(&self, id: PendingId) -> Option<&Pending> {
        self.slots.get(id.0 as usize)?.as_ref()
    }

    fn slot_mut(&mut self, id: PendingId) -> &mut Pending {
        self.slots[id.0 as usize].as_mut().expect("pending")
    }

    fn is_sent(&self, id: PendingId) -> bool {
        self.slot(id).is_some_and(|p| p.sent.is_some())
    }

    /// A newer serial for a pending NOTIFY: sent at once if the older one
    /// was sent (it keeps its place among the outstanding), else it waits
    /// where the older one waited.
    fn supersede(
        &mut self,
        now: Instant,
        id: PendingId,
        soa: &Soa,
        target: &NotifyTarget,
        out: &mut Vec<NotifyAction>,
    ) {
        let pending = self.slot_mut(id);
        pending.soa = soa.clone();
        pending.target = target.clone();
        pending.tries = 0;
        if self.is_sent(id) {
            self.send(now, id, out);
        }
    }

    /// Sends what waits, while fewer than the limit are outstanding.
    fn send_waiting(&mut self, now: Instant, out: &mut Vec<NotifyAction>) {
        while self.outstanding < self.limit {
            let Some(id) = self.waiting.pop_front() else {
                return;
            };
            if self.slot(id).is_some_and(|p| p.sent.is_none()) {
                self.outstanding += 1;
                self.send(now, id, out);
            }
        }
    }

    /// Sends `id` (again), with a new message ID and the next timeout.
    fn send(&mut self, now: Instant, id: PendingId, out: &mut Vec<NotifyAction>) {
        self.forget_message(id);
        let addr = self.slot(id).expect("pending").target.addr;
        let message = self.fresh_message_id(addr);
        let first_timeout = self.first_timeout;
        let pending = self.slot_mut(id);
        let timeout = first_timeout * 2u32.pow(pending.tries.min(16));
        pending.tries += 1;
        let due = now + timeout;
        pending.sent = Some((message, due));
        out.push(NotifyAction::Send {
            pending: id,
            origin: pending.origin.clone(),
            soa: pending.soa.clone(),
            target: pending.target.clone(),
            id: message,
        });
        self.by_message.insert((addr, message), id);
        self.wakeups.insert((due, id));
    }

    /// A message ID no NOTIFY outstanding to `addr` has.
    fn fresh_message_id(&mut self, addr: SocketAddr) -> u16 {
        loop {
            let id = (self.ids)();
            if !self.by_message.contains_key(&(addr, id)) {
                return id;
            }
        }
    }

    /// Forgets the last message of `id`: an answer to it counts no more.
    fn forget_message(&mut self, id: PendingId) {
        let Some(pending) = self.slot(id) else {
            return;
        };
        if let Some((message, due)) = pending.sent {
            let addr = pending.target.addr;
            self.by_message.remove(&(addr, message));
            self.wakeups.remove(&(due, id));
        }
    }

    fn finish(&mut self, id: PendingId, outcome: Outcome, out: &mut Vec<NotifyAction>) {
        self.forget_message(id);
        let pending = self.slots[id.0 as usize].take().expect("pending");
        match pending.sent {
            Some(_) => self.outstanding -= 1,
            None => self.waiting.retain(|&w| w != id),
        }
        let lower = pending.origin.to_lowercase();
        let key = (lower, pending.target.addr, pending.target.key.clone());
        self.by_target.remove(&key);
        self.free.push(id);
        out.push(NotifyAction::Finished {
            pending: id,
            origin: pending.origin,
            target: pending.target.addr,
            outcome,
        });
    }
}
