//! NOTIFY out (RFC 1996): tell secondaries a zone has a new serial, so
//! they fetch it now instead of at their next refresh.
//!
//! Each target gets a NOTIFY over UDP, signed if a key is configured, and
//! is retried with doubling timeouts until it answers; a target that never
//! answers is logged and left to its refresh timer.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use heron_proto::message::{Header, flags};
use heron_proto::tsig::{self, Key, KeyRing, ResponseVerifier};
use heron_proto::writer::Writer;
use heron_proto::{Class, Name, Opcode, RType, Rcode};
use tokio::net::UdpSocket;
use tokio::sync::Semaphore;

use super::NotifyTarget;

/// Wait for the first answer; doubled after every unanswered try.
const FIRST_TIMEOUT: Duration = Duration::from_millis(1000);
/// Tries per target before giving up.
const TRIES: u32 = 5;
/// NOTIFY exchanges in flight at once (a reload of many zones).
const CONCURRENCY: usize = 64;

/// Sends NOTIFY messages with bounded concurrency.
#[derive(Clone)]
pub struct Notifier {
    keys: Arc<Vec<Key>>,
    slots: Arc<Semaphore>,
    first_timeout: Duration,
    /// Where each exchange is counted.
    stats: Arc<crate::stats::ZoneStats>,
}

/// How one NOTIFY exchange ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The target answered with this response code.
    Answered(Rcode),
    /// No valid answer after every try.
    NoAnswer,
    /// The configured key does not exist or the socket failed.
    Failed(String),
}

impl Notifier {
    pub fn new(keys: Arc<Vec<Key>>) -> Notifier {
        Notifier {
            keys,
            slots: Arc::new(Semaphore::new(CONCURRENCY)),
            first_timeout: FIRST_TIMEOUT,
            stats: Arc::default(),
        }
    }

    /// Counts each exchange in `stats`.
    pub fn with_stats(mut self, stats: Arc<crate::stats::ZoneStats>) -> Notifier {
        self.stats = stats;
        self
    }

    /// Shorter timeouts, for tests.
    pub fn with_first_timeout(mut self, timeout: Duration) -> Notifier {
        self.first_timeout = timeout;
        self
    }

    /// Notifies every target of `origin`'s new `soa` in the background.
    pub fn notify_all(&self, origin: &Name, soa: (u32, Vec<u8>), targets: &[NotifyTarget]) {
        let soa = Arc::new(soa);
        for target in targets {
            let (me, origin, soa, target) =
                (self.clone(), origin.clone(), soa.clone(), target.clone());
            tokio::spawn(async move {
                let outcome = me.notify(&origin, &soa, &target).await;
                log_outcome(&origin, &target, &outcome);
            });
        }
    }

    /// One NOTIFY exchange with retries; `soa` is (TTL, RDATA).
    pub async fn notify(
        &self,
        origin: &Name,
        soa: &(u32, Vec<u8>),
        target: &NotifyTarget,
    ) -> Outcome {
        let Ok(_slot) = self.slots.acquire().await else {
            return Outcome::Failed("shutting down".into());
        };
        let key = match &target.key {
            Some(name) => match self.keys.key(name) {
                Some(k) => Some(k.clone()),
                None => return Outcome::Failed(format!("no TSIG key named {name}")),
            },
            None => None,
        };
        let outcome =
            match exchange(origin, soa, target.addr, key.as_ref(), self.first_timeout).await {
                Ok(outcome) => outcome,
                Err(e) => Outcome::Failed(e.to_string()),
            };
        let acknowledged = outcome == Outcome::Answered(Rcode::NOERROR);
        self.stats.notify_out(origin, acknowledged);
        outcome
    }
}

fn log_outcome(origin: &Name, target: &NotifyTarget, outcome: &Outcome) {
    let addr = target.addr;
    match outcome {
        Outcome::Answered(Rcode::NOERROR) => {
            tracing::debug!("NOTIFY for {origin} to {addr} acknowledged")
        }
        Outcome::Answered(rcode) => {
            tracing::warn!("NOTIFY for {origin} to {addr} answered {rcode}")
        }
        Outcome::NoAnswer => tracing::warn!(
            "NOTIFY for {origin} to {addr}: no answer after {TRIES} tries; it will refresh on its own timer"
        ),
        Outcome::Failed(why) => tracing::warn!("NOTIFY for {origin} to {addr} failed: {why}"),
    }
}

async fn exchange(
    origin: &Name,
    soa: &(u32, Vec<u8>),
    addr: SocketAddr,
    key: Option<&Key>,
    first_timeout: Duration,
) -> std::io::Result<Outcome> {
    let local: SocketAddr = if addr.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = UdpSocket::bind(local).await?;
    let mut wait = first_timeout;
    let mut buf = vec![0u8; 65535];
    for _ in 0..TRIES {
        let id = random_id();
        let mut msg = notify_message(origin, soa, id);
        let request_mac =
            key.map(|k| tsig::sign_request(&mut msg, k, unix_now(), tsig::DEFAULT_FUDGE));
        socket.send_to(&msg, addr).await?;
        let deadline = tokio::time::Instant::now() + wait;
        while let Ok(got) = tokio::time::timeout_at(deadline, socket.recv_from(&mut buf)).await {
            let (n, from) = got?;
            let reply = &buf[..n];
            if from != addr || !is_reply_to(reply, id) {
                continue;
            }
            if let (Some(key), Some(mac)) = (key, &request_mac) {
                let mut verifier = ResponseVerifier::new(key, mac.clone());
                if let Err(e) = verifier
                    .verify(reply, unix_now())
                    .and_then(|_| verifier.finish())
                {
                    tracing::warn!("NOTIFY for {origin}: answer from {addr} failed TSIG: {e}");
                    continue;
                }
            }
            let header = Header::read(reply).expect("checked by is_reply_to");
            return Ok(Outcome::Answered(Rcode(header.rcode())));
        }
        wait *= 2;
    }
    Ok(Outcome::NoAnswer)
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

fn is_reply_to(reply: &[u8], id: u16) -> bool {
    Header::read(reply)
        .is_some_and(|h| h.id == id && h.has(flags::QR) && h.opcode() == Opcode::NOTIFY)
}

/// A message ID nobody off the path can guess: std's per-process random
/// hash keys, mixed with the clock.
pub fn random_id() -> u16 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    RandomState::new().hash_one(nanos) as u16
}

/// Seconds since the epoch, for TSIG.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
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

    #[tokio::test]
    async fn unanswered_notifies_are_retried_until_acknowledged() {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let fake = tokio::spawn(secondary(socket, 2));
        let notifier =
            Notifier::new(Arc::new(Vec::new())).with_first_timeout(Duration::from_millis(50));
        let target = NotifyTarget { addr, key: None };
        let origin = Name::parse("n.test").unwrap();
        let outcome = notifier.notify(&origin, &soa(), &target).await;
        assert_eq!(outcome, Outcome::Answered(Rcode::NOERROR));
        assert_eq!(fake.await.unwrap(), 3, "two ignored, the third answered");
    }

    #[tokio::test]
    async fn a_silent_target_is_given_up_after_every_try() {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let fake = tokio::spawn(secondary(socket, usize::MAX));
        let notifier =
            Notifier::new(Arc::new(Vec::new())).with_first_timeout(Duration::from_millis(10));
        let target = NotifyTarget { addr, key: None };
        let outcome = notifier
            .notify(&Name::parse("n.test").unwrap(), &soa(), &target)
            .await;
        assert_eq!(outcome, Outcome::NoAnswer);
        fake.abort();
    }

    #[tokio::test]
    async fn an_unknown_key_fails_without_sending() {
        let notifier = Notifier::new(Arc::new(Vec::new()));
        let target = NotifyTarget {
            addr: "127.0.0.1:9".parse().unwrap(),
            key: Some(Name::parse("missing.key").unwrap()),
        };
        let outcome = notifier
            .notify(&Name::parse("n.test").unwrap(), &soa(), &target)
            .await;
        assert!(matches!(outcome, Outcome::Failed(ref why) if why.contains("missing.key")));
    }
}
