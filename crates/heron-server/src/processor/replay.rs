//! Signed requests already answered, so that a copy replayed within the
//! fudge window is refused (issue 24 item 8: the same signed AXFR was
//! answered twice). RFC 8945 5.2.3 has a server remember, per key, the
//! latest Time Signed and answer BADTIME to an earlier one; that refuses
//! honest requests that arrive out of order (two secondaries sharing a
//! key, a UDP retry) and lets a copy of the latest through. Here each
//! request is remembered by its key, MAC and Time Signed instead, and a
//! copy gets the BADTIME 5.2.3 asks for.
//!
//! Memory is bounded whatever the senders do: a fixed number of entries,
//! the oldest evicted first. An entry is kept no longer than its request's
//! Time Signed plus fudge, after which the time check refuses the copy
//! anyway. Only requests whose MAC verified get here, so filling the
//! cache takes a key's secret.

use std::collections::{HashSet, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::sync::Mutex;

use heron_proto::tsig::Verified;

/// Entries kept by default: at 24 bytes each plus the set, about 3 MB.
pub const DEFAULT_CAPACITY: usize = 1 << 16;

/// A request as remembered: 128 bits of keyed hash over key name, MAC
/// and Time Signed (the keys are random per process, so a sender cannot
/// aim a collision at another's request).
type Fingerprint = u128;

pub struct ReplayCache {
    inner: Mutex<Entries>,
    hashers: [RandomState; 2],
    capacity: usize,
}

struct Entries {
    seen: HashSet<Fingerprint>,
    /// In arrival order: (fingerprint, the second after which the time
    /// check refuses the request).
    order: VecDeque<(Fingerprint, u64)>,
}

impl ReplayCache {
    /// A cache of at most `capacity` requests (at least one).
    pub fn new(capacity: usize) -> ReplayCache {
        let capacity = capacity.max(1);
        ReplayCache {
            inner: Mutex::new(Entries {
                seen: HashSet::with_capacity(capacity),
                order: VecDeque::with_capacity(capacity),
            }),
            hashers: [RandomState::new(), RandomState::new()],
            capacity,
        }
    }

    /// Remembers the verified request; false if it was seen already (a
    /// replay). `now`: the request's clock, in seconds.
    pub fn first_use(&self, v: &Verified, now: u64) -> bool {
        let fp = self.fingerprint(v);
        let expires = v.time_signed.saturating_add(u64::from(v.fudge));
        // A panic elsewhere while holding the lock leaves the entries
        // consistent: each step below completes or does not start.
        let mut e = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        while e.order.front().is_some_and(|&(_, until)| until < now) {
            e.evict_oldest();
        }
        if e.seen.contains(&fp) {
            return false;
        }
        if e.order.len() == self.capacity {
            e.evict_oldest();
        }
        e.seen.insert(fp);
        e.order.push_back((fp, expires));
        true
    }

    /// Requests remembered now.
    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .order
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn fingerprint(&self, v: &Verified) -> Fingerprint {
        let request = (v.key.name.as_wire(), &v.mac, v.time_signed);
        let [a, b] = self.hashers.each_ref().map(|h| h.hash_one(request));
        (u128::from(a) << 64) | u128::from(b)
    }
}

impl Entries {
    fn evict_oldest(&mut self) {
        if let Some((fp, _)) = self.order.pop_front() {
            self.seen.remove(&fp);
        }
    }
}

#[cfg(test)]
mod tests {
    use heron_proto::Name;
    use heron_proto::tsig::{Algorithm, Key};

    use super::*;

    const NOW: u64 = 1_700_000_000;

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
        let cache = ReplayCache::new(DEFAULT_CAPACITY);
        assert!(cache.first_use(&request("k", 1, NOW), NOW));
        assert!(!cache.first_use(&request("k", 1, NOW), NOW + 1), "replay");
        assert!(
            cache.first_use(&request("k", 2, NOW), NOW + 1),
            "another MAC"
        );
        assert!(
            cache.first_use(&request("other", 1, NOW), NOW + 1),
            "another key"
        );
        assert!(
            cache.first_use(&request("k", 1, NOW + 1), NOW + 1),
            "another time"
        );
        assert_eq!(cache.len(), 4);
    }

    #[test]
    fn at_capacity_the_oldest_goes_and_memory_stays_bounded() {
        let capacity = 1000;
        let cache = ReplayCache::new(capacity);
        for mac in 0..capacity as u32 {
            assert!(cache.first_use(&request("k", mac, NOW), NOW));
        }
        assert_eq!(cache.len(), capacity);
        // At capacity: every one still refused.
        assert!(!cache.first_use(&request("k", 0, NOW), NOW));
        assert!(!cache.first_use(&request("k", 999, NOW), NOW));
        // Past it: the newest in, the oldest out, the size the same.
        assert!(cache.first_use(&request("k", 5000, NOW), NOW));
        assert_eq!(cache.len(), capacity);
        assert!(!cache.first_use(&request("k", 1, NOW), NOW), "still kept");
        assert!(cache.first_use(&request("k", 0, NOW), NOW), "evicted");
        // A flood ten times the size leaves it the size.
        for mac in 10_000..20_000 {
            cache.first_use(&request("k", mac, NOW), NOW);
        }
        assert_eq!(cache.len(), capacity);
        let e = cache.inner.lock().unwrap();
        assert!(e.seen.capacity() < 4 * capacity, "{}", e.seen.capacity());
    }

    #[test]
    fn entries_past_their_fudge_are_dropped() {
        let cache = ReplayCache::new(DEFAULT_CAPACITY);
        for mac in 0..10 {
            cache.first_use(&request("k", mac, NOW), NOW);
        }
        assert_eq!(cache.len(), 10);
        // 300 s of fudge: still kept at the last second of it.
        cache.first_use(&request("k", 100, NOW + 300), NOW + 300);
        assert_eq!(cache.len(), 11);
        cache.first_use(&request("k", 101, NOW + 301), NOW + 301);
        assert_eq!(cache.len(), 2);
    }
}
