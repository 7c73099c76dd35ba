//! Signed requests already answered, so that a copy replayed within the
//! fudge window does not hand a zone to whoever captured the request
//! (issue 24 item 8: the same signed AXFR was answered twice). RFC 8945
//! 5.2.3 has a server remember, per key, the latest Time Signed and
//! answer BADTIME to an earlier one; that refuses honest requests that
//! arrive out of order (two secondaries sharing a key) and lets a copy of
//! the latest through. Knot (`libknot/tsig-op.c`) and BIND
//! (`lib/dns/tsig.c`) keep no replay state at all: they check the time
//! window only.
//!
//! Here each request is remembered by its key, MAC and Time Signed, and
//! by the address it came from. The MAC counts by its first octets only,
//! as many as the shortest truncation accepted (RFC 8945 5.2.2.1): a copy
//! with its MAC cut shorter is the same request. A transfer request
//! (AXFR, IXFR) is answered once: a secondary signs every attempt afresh,
//! and a copy is the one request that gives its sender a zone. So is an
//! UPDATE: a copy applied again would undo the changes made since (a
//! client whose answer was lost gets BADTIME for its resend, and asks
//! anew). Any other copy from the address that sent the original is a
//! retransmission (dig and kdig resend the same signed bytes when a UDP
//! answer is lost) and is answered again: its answer goes where the
//! first one went. A copy from another address gets the BADTIME that
//! 5.2.3 asks for.
//!
//! Memory is bounded whatever the senders do: a fixed number of entries
//! in all. An entry is kept no longer than its request's Time Signed plus
//! fudge (at most 300 s), after which the time check refuses the copy
//! anyway. Only requests whose MAC verified get here, so filling the cache
//! takes a key's secret; entries are kept per key, and when the cache is
//! full the oldest entry of the key holding the most goes. So the holder
//! of one key (a transfer key, say) cannot flush another key's requests
//! (a captured UPDATE) out by signing many of its own: it only ever
//! evicts its own, which it could as well sign anew.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::net::IpAddr;
use std::sync::Mutex;

use heron_proto::tsig::{Algorithm, TsigFailure, Verified};

/// Entries kept by default: at 24 bytes each plus the map, about 5 MB.
pub const DEFAULT_CAPACITY: usize = 1 << 16;

/// A request as remembered: 128 bits of keyed hash over key name, the
/// MAC's first octets and Time Signed (the keys are random per process, so a sender cannot
/// aim a collision at another's request).
pub type Fingerprint = u128;

pub struct ReplayCache {
    inner: Mutex<Entries>,
    hashers: [RandomState; 2],
    capacity: usize,
    /// Unix seconds when it began remembering: a request signed before
    /// then may have been answered by an earlier run of the server, whose
    /// memory is gone, so it is refused as a copy (black-box finding
    /// BA-6: a captured UPDATE replayed after a restart was applied
    /// again, a captured AXFR answered again).
    started: u64,
}

/// What a signed request is, seen against those answered before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Not seen before (now remembered).
    First,
    /// A copy from the address that sent it first, of a request that is
    /// not answered once: answered again.
    Retransmission,
    /// A copy from the address that sent it first, of a request answered
    /// once (an UPDATE resent over UDP while its answer is on its way).
    Resent,
    /// A copy to refuse.
    Replay,
}

#[derive(Default)]
struct Entries {
    /// By key name (wire form): the requests signed with that key.
    by_key: HashMap<Box<[u8]>, KeyEntries>,
    /// Entries of every key.
    total: usize,
}

#[derive(Default)]
struct KeyEntries {
    /// Each request remembered, with the address that sent it first.
    seen: HashMap<Fingerprint, IpAddr>,
    /// In arrival order: (fingerprint, the second after which the time
    /// check refuses the request).
    order: VecDeque<(Fingerprint, u64)>,
}

impl ReplayCache {
    /// A cache of at most `capacity` requests (at least one). Its room
    /// grows with the signed requests that come, not before: a server
    /// with no TSIG traffic holds none of its 5 MB.
    pub fn new(capacity: usize) -> ReplayCache {
        ReplayCache::since(capacity, heron_proto::time::unix_now())
    }

    /// [`ReplayCache::new`] that began remembering at `started` (Unix
    /// seconds; 0 takes every request as seen by it).
    pub fn since(capacity: usize, started: u64) -> ReplayCache {
        ReplayCache {
            inner: Mutex::new(Entries::default()),
            hashers: [RandomState::new(), RandomState::new()],
            capacity: capacity.max(1),
            started,
        }
    }

    /// Remembers the verified request from `from`, and says whether it
    /// was seen before and how. `once`: a request answered once whoever
    /// sends it again (a transfer, an UPDATE). `now`: the request's
    /// clock, in seconds.
    pub fn check(&self, v: &Verified, from: IpAddr, once: bool, now: u64) -> Seen {
        if v.time_signed < self.started {
            return Seen::Replay;
        }
        let fp = self.fingerprint(v);
        let expires = v.time_signed.saturating_add(u64::from(v.fudge));
        let key = v.key.name.as_wire();
        // A panic elsewhere while holding the lock leaves the entries
        // consistent: each step below completes or does not start.
        let mut e = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = e.by_key.get_mut(key) {
            let gone = k.expire(now);
            if let Some(&first) = k.seen.get(&fp) {
                e.total -= gone;
                return match (first == from, once) {
                    (true, false) => Seen::Retransmission,
                    (true, true) => Seen::Resent,
                    (false, _) => Seen::Replay,
                };
            }
            e.total -= gone;
        }
        if e.total >= self.capacity {
            e.make_room(now, self.capacity);
        }
        let k = e.by_key.entry(key.into()).or_default();
        k.seen.insert(fp, from);
        k.order.push_back((fp, expires));
        e.total += 1;
        Seen::First
    }

    /// Requests remembered now.
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).total
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What a verified request is remembered by.
    pub fn fingerprint(&self, v: &Verified) -> Fingerprint {
        self.fingerprint_parts(v.key.name.as_wire(), &v.mac, v.key.algorithm, v.time_signed)
    }

    /// [`ReplayCache::fingerprint`] of the request a copy refused by
    /// [`Seen::Resent`] or [`Seen::Replay`] was (its refusal keeps the
    /// key, algorithm, MAC and time); 0 for one that keeps less.
    pub fn fingerprint_of(&self, refused: &TsigFailure) -> Fingerprint {
        let algorithm = refused.algorithm.as_ref().and_then(Algorithm::from_name);
        match (&refused.key_name, algorithm, &refused.request_mac) {
            (Some(key), Some(algorithm), Some(mac)) => {
                self.fingerprint_parts(key.as_wire(), mac, algorithm, refused.time_signed)
            }
            _ => 0,
        }
    }

    fn fingerprint_parts(
        &self,
        key: &[u8],
        mac: &[u8],
        algorithm: Algorithm,
        time: u64,
    ) -> Fingerprint {
        // Every MAC accepted is at least this long.
        let kept = mac.len().min(algorithm.min_mac_len());
        let request = (key, &mac[..kept], time);
        let [a, b] = self.hashers.each_ref().map(|h| h.hash_one(request));
        (u128::from(a) << 64) | u128::from(b)
    }
}

impl Entries {
    /// Frees one place: first what the time check refuses anyway, then
    /// the oldest entry of the key with the most.
    fn make_room(&mut self, now: u64, capacity: usize) {
        let expired: usize = self.by_key.values_mut().map(|k| k.expire(now)).sum();
        self.total -= expired;
        if self.total >= capacity {
            let heaviest = self.by_key.values_mut().max_by_key(|k| k.order.len());
            if heaviest.is_some_and(|k| k.evict_oldest()) {
                self.total -= 1;
            }
        }
        self.by_key.retain(|_, k| !k.order.is_empty());
    }
}

impl KeyEntries {
    /// Drops the entries past their time; returns how many.
    fn expire(&mut self, now: u64) -> usize {
        let before = self.order.len();
        while self.order.front().is_some_and(|&(_, until)| until < now) {
            self.evict_oldest();
        }
        before - self.order.len()
    }

    fn evict_oldest(&mut self) -> bool {
        let Some((fp, _)) = self.order.pop_front() else {
            return false;
        };
        self.seen.remove(&fp);
        true
    }
}

#[cfg(test)]
mod tests {
    use heron_proto::Name;
    use heron_proto::tsig::{Algorithm, Key};

    use super::*;

    const NOW: u64 = 1_700_000_000;
    const SECONDARY: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));
    const ELSEWHERE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(203, 0, 113, 9));

    /// Whether a transfer request from the secondary is new.
    fn first(cache: &ReplayCache, v: &Verified, now: u64) -> bool {
        cache.check(v, SECONDARY, true, now) == Seen::First
    }

    fn request(key: &str, mac: u32, time_signed: u64) -> Verified {
        let name = Name::parse(key).unwrap();
        Verified {
            key: Key::new(name, Algorithm::HmacSha256, b"secret".to_vec()),
            mac: mac.to_be_bytes().repeat(8),
            time_signed,
            fudge: 300,
        }
    }

    #[test]
    fn a_request_is_answered_once_and_others_still_are() {
        let cache = ReplayCache::since(DEFAULT_CAPACITY, 0);
        assert!(first(&cache, &request("k", 1, NOW), NOW));
        assert!(!first(&cache, &request("k", 1, NOW), NOW + 1), "replay");
        assert!(first(&cache, &request("k", 2, NOW), NOW + 1), "another MAC");
        assert!(
            first(&cache, &request("other", 1, NOW), NOW + 1),
            "another key"
        );
        assert!(
            first(&cache, &request("k", 1, NOW + 1), NOW + 1),
            "another time"
        );
        assert_eq!(cache.len(), 4);
    }

    #[test]
    fn a_copy_of_a_query_from_its_sender_is_a_retransmission_and_from_elsewhere_a_replay() {
        let cache = ReplayCache::since(DEFAULT_CAPACITY, 0);
        let query = request("k", 1, NOW);
        assert_eq!(cache.check(&query, SECONDARY, false, NOW), Seen::First);
        for _ in 0..3 {
            let again = cache.check(&query, SECONDARY, false, NOW + 1);
            assert_eq!(again, Seen::Retransmission);
        }
        assert_eq!(cache.check(&query, ELSEWHERE, false, NOW), Seen::Replay);
        // A transfer request is answered once, even to its sender (whose
        // copy the caller refuses, or leaves unanswered for an UPDATE).
        let axfr = request("k", 2, NOW);
        assert_eq!(cache.check(&axfr, SECONDARY, true, NOW), Seen::First);
        assert_eq!(cache.check(&axfr, SECONDARY, true, NOW), Seen::Resent);
        assert_eq!(cache.check(&axfr, ELSEWHERE, true, NOW), Seen::Replay);
        assert_eq!(cache.len(), 2, "a copy is not remembered twice");
    }

    #[test]
    fn at_capacity_the_oldest_goes_and_memory_stays_bounded() {
        let capacity = 1000;
        let cache = ReplayCache::since(capacity, 0);
        for mac in 0..capacity as u32 {
            assert!(first(&cache, &request("k", mac, NOW), NOW));
        }
        assert_eq!(cache.len(), capacity);
        // At capacity: every one still refused.
        assert!(!first(&cache, &request("k", 0, NOW), NOW));
        assert!(!first(&cache, &request("k", 999, NOW), NOW));
        // Past it: the newest in, the oldest out, the size the same.
        assert!(first(&cache, &request("k", 5000, NOW), NOW));
        assert_eq!(cache.len(), capacity);
        assert!(!first(&cache, &request("k", 1, NOW), NOW), "still kept");
        assert!(first(&cache, &request("k", 0, NOW), NOW), "evicted");
        // A flood ten times the size leaves it the size.
        for mac in 10_000..20_000 {
            first(&cache, &request("k", mac, NOW), NOW);
        }
        assert_eq!(cache.len(), capacity);
        let e = cache.inner.lock().unwrap();
        let seen = e.by_key.values().map(|k| k.seen.capacity()).sum::<usize>();
        assert!(seen < 4 * capacity, "{seen}");
    }

    #[test]
    fn a_cache_no_signed_request_reached_holds_no_room() {
        let cache = ReplayCache::since(DEFAULT_CAPACITY, 0);
        let room = |c: &ReplayCache| {
            let e = c.inner.lock().unwrap();
            let keys = e.by_key.values();
            let seen = keys.clone().map(|k| k.seen.capacity()).sum::<usize>();
            (seen, keys.map(|k| k.order.capacity()).sum::<usize>())
        };
        assert_eq!(room(&cache), (0, 0));
        assert!(first(&cache, &request("k.", 1, 100), 100));
        let (seen, order) = room(&cache);
        assert!((1..1000).contains(&seen) && (1..1000).contains(&order));
    }

    #[test]
    fn entries_past_their_fudge_are_dropped() {
        let cache = ReplayCache::since(DEFAULT_CAPACITY, 0);
        for mac in 0..10 {
            first(&cache, &request("k", mac, NOW), NOW);
        }
        assert_eq!(cache.len(), 10);
        // 300 s of fudge: still kept at the last second of it.
        first(&cache, &request("k", 100, NOW + 300), NOW + 300);
        assert_eq!(cache.len(), 11);
        first(&cache, &request("k", 101, NOW + 301), NOW + 301);
        assert_eq!(cache.len(), 2);
    }

    /// The attack: a captured UPDATE signed with one key must stay
    /// refused while another key's holder floods the cache with signed
    /// queries of its own, past its size.
    #[test]
    fn one_key_cannot_flush_another_keys_requests() {
        let capacity = 1000;
        let cache = ReplayCache::since(capacity, 0);
        let update = request("update-key", 7, NOW);
        assert!(first(&cache, &update, NOW));
        for mac in 0..(3 * capacity as u32) {
            let query = request("transfer-key", mac, NOW);
            assert_eq!(cache.check(&query, ELSEWHERE, false, NOW), Seen::First);
        }
        assert_eq!(cache.len(), capacity);
        assert_eq!(cache.check(&update, ELSEWHERE, true, NOW + 1), Seen::Replay);
        // Past its time it goes when room is needed: the time check
        // refuses it then.
        let later = NOW + 301;
        for mac in 0..capacity as u32 {
            cache.check(
                &request("transfer-key", mac, later),
                ELSEWHERE,
                false,
                later,
            );
        }
        assert_eq!(cache.len(), capacity);
        let e = cache.inner.lock().unwrap();
        assert!(!e.by_key.contains_key(update.key.name.as_wire()));
    }

    /// A request signed before the cache began (before a restart) may
    /// have been answered by the run before: refused as a copy, whoever
    /// sends it (black-box finding BA-6); one signed since is not.
    #[test]
    fn a_request_signed_before_the_start_is_refused() {
        let cache = ReplayCache::since(DEFAULT_CAPACITY, NOW);
        let before = request("k", 1, NOW - 1);
        assert_eq!(cache.check(&before, SECONDARY, true, NOW), Seen::Replay);
        assert_eq!(cache.check(&before, SECONDARY, false, NOW), Seen::Replay);
        let since = request("k", 2, NOW);
        assert_eq!(cache.check(&since, SECONDARY, true, NOW), Seen::First);
    }
}
