//! Response rate limiting (RRL), as BIND defines it and Knot's `mod-rrl`
//! follows: a reflector's answers to one network are limited per kind of
//! answer, so that spoofed floods can not aim the server at a victim.
//!
//! Each response is classified ([`Response`]) and debited from a token
//! bucket keyed by (client prefix, class, name): positive answers per
//! query name and type (an answer synthesized from a wildcard per
//! wildcard, NODATA per name alone), NXDOMAIN per zone, referrals per
//! delegation, errors per client prefix alone. A bucket earns `rate`
//! tokens a second, holds at most `rate`, and a response costs one; while
//! the balance is empty responses are dropped, every `slip`-th one sent
//! truncated instead (TC=1, so a real client behind the spoofed address
//! retries over TCP), errors never (as in BIND). The balance never goes
//! below zero, as in Knot's `mod-rrl`: a flood is answered at the rate
//! and the rest limited, and a client is answered again as soon as it
//! slows down. (BIND keeps a debt of up to `window × rate`, so a
//! sustained flood gets no real answers, only slips; the rate a flood is
//! answered at is what issue 25 asks for.) `window` is how often a
//! limited bucket is logged.
//!
//! The buckets are a fixed-size table indexed by a keyed hash: memory is
//! the same whatever the attack; keys that collide share a bucket (as in
//! BIND, where a collision makes one name's limit apply to another). No
//! clock is read: `now` comes in, in milliseconds.
//!
//! A response that is not limited costs one hash of the key (client
//! prefix, query type, name length and class in one word, then the name
//! sixteen octets per multiply: [`key_hash`]) and one read and write of
//! a 16-octet bucket, which never straddles two cache lines, all inlined
//! into the caller; nothing is allocated, an empty exempt list is not
//! walked, and what a limited response needs is out of line. Finding the
//! bucket ([`Rrl::locate`]) and debiting it ([`Rrl::debit`]) are apart,
//! so that a batch can start loading all its buckets before it waits on
//! the first: a table larger than the caches misses on most responses.
//!
//! One [`Rrl`] per UDP worker, without locks or shared atomics, as the
//! rest of the UDP path. Rates then apply per worker: the kernel spreads a
//! client's datagrams over the `SO_REUSEPORT` sockets by source address
//! *and port*, so a client that varies its port (resolvers do, spoofed
//! floods too) meets every worker's table. [`RrlSettings::divided_among`]
//! divides the rates by the workers to give about the configured rate in
//! total; a client that keeps one source port then gets only its share.
//! A shared table would be exact, at the cost of a lock or atomics on
//! every response of every worker.

use heron_proto::prefix::Prefix;
use std::net::IpAddr;

/// The `[rrl]` settings; BIND's names and defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RrlSettings {
    /// Positive answers (and NODATA, referrals) a second to one client
    /// prefix for one name; 0: not limited.
    pub responses_per_second: u32,
    /// NXDOMAIN answers a second to one prefix for one zone; None: as
    /// `responses_per_second`.
    pub nxdomains_per_second: Option<u32>,
    /// Error answers (other than NXDOMAIN) a second to one prefix; None:
    /// as `responses_per_second`.
    pub errors_per_second: Option<u32>,
    /// Seconds between two log lines about one limited bucket (1 to 3600).
    pub window: u32,
    /// Every `slip`-th limited response is sent truncated rather than
    /// dropped; 0: none, 1: all (0 to 10).
    pub slip: u32,
    /// Clients are grouped by prefixes of these lengths.
    pub ipv4_prefix_length: u8,
    pub ipv6_prefix_length: u8,
    /// Clients never limited.
    pub exempt: Vec<Prefix>,
    /// Count and log what would be limited, but send everything.
    pub log_only: bool,
    /// Buckets in the table (rounded up to a power of two), each 16
    /// octets: the default takes 1 MiB per worker.
    pub table_size: usize,
}

impl Default for RrlSettings {
    fn default() -> Self {
        RrlSettings {
            responses_per_second: 20,
            nxdomains_per_second: None,
            errors_per_second: None,
            window: 15,
            slip: 2,
            ipv4_prefix_length: 24,
            ipv6_prefix_length: 56,
            exempt: Vec::new(),
            log_only: false,
            table_size: 1 << 16,
        }
    }
}

/// The largest table accepted: 16 Mi buckets, 256 MiB.
pub const MAX_TABLE_SIZE: usize = 1 << 24;

impl RrlSettings {
    /// Whether the settings are in range; the message names the setting.
    pub fn validate(&self) -> Result<(), String> {
        let check = |ok: bool, what: &str| if ok { Ok(()) } else { Err(what.to_string()) };
        check(
            (1..=3600).contains(&self.window),
            "window must be 1 to 3600",
        )?;
        check(self.slip <= 10, "slip must be 0 to 10")?;
        check(
            self.ipv4_prefix_length <= 32,
            "ipv4-prefix-length must be 0 to 32",
        )?;
        check(
            self.ipv6_prefix_length <= 128,
            "ipv6-prefix-length must be 0 to 128",
        )?;
        let size_ok = (1..=MAX_TABLE_SIZE).contains(&self.table_size);
        check(size_ok, "table-size must be 1 to 16777216")
    }

    /// The settings for one of `workers` tables, each rate divided
    /// (rounded up, a limited rate stays at least 1) so that a client
    /// spread over all workers gets about the configured rate in total.
    pub fn divided_among(&self, workers: usize) -> RrlSettings {
        let workers = workers.max(1) as u32;
        let divide = |rate: u32| rate.div_ceil(workers);
        RrlSettings {
            responses_per_second: divide(self.responses_per_second),
            nxdomains_per_second: self.nxdomains_per_second.map(divide),
            errors_per_second: self.errors_per_second.map(divide),
            ..self.clone()
        }
    }
}

/// What kind of response is about to be sent, and what it is about.
/// Names are in lower-cased wire form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Response<'a> {
    /// An answer or NODATA, keyed by the name it is about (the query
    /// name, or for one synthesized from a wildcard the wildcard's
    /// closest encloser, as BIND keys it) and the type (0 for NODATA).
    Positive { name: &'a [u8], qtype: u16 },
    /// NXDOMAIN, keyed by the zone: random names under one zone share a
    /// bucket.
    NxDomain { zone: &'a [u8] },
    /// A referral, keyed by the delegation point.
    Referral { delegation: &'a [u8] },
    /// Any other error (REFUSED, FORMERR, SERVFAIL, ...), keyed by the
    /// client prefix alone.
    Error,
}

impl std::fmt::Display for Response<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = |wire: &[u8]| {
            heron_proto::Name::from_wire(wire).map_or_else(|_| "?".into(), |n| n.to_string())
        };
        match *self {
            Response::Positive { name: n, qtype: 0 } => write!(f, "NODATA answers for {}", name(n)),
            Response::Positive { name: n, qtype } => {
                let rtype = heron_proto::RType(qtype);
                write!(f, "answers for {} {rtype}", name(n))
            }
            Response::NxDomain { zone } => write!(f, "NXDOMAIN answers in {}", name(zone)),
            Response::Referral { delegation } => write!(f, "referrals to {}", name(delegation)),
            Response::Error => write!(f, "error answers"),
        }
    }
}

/// The class of a response, each with its own rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Class {
    Positive = 0,
    NxDomain = 1,
    Referral = 2,
    Error = 3,
}

/// A [`Response`] as the table keys it: flat (the class, the query type
/// of a positive answer or 0, the name), so that building it and hashing
/// it take no branch on the kind of response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key<'a> {
    pub class: Class,
    pub qtype: u16,
    pub name: &'a [u8],
}

impl<'a> From<Response<'a>> for Key<'a> {
    fn from(response: Response<'a>) -> Key<'a> {
        let (class, qtype, name) = match response {
            Response::Positive { name, qtype } => (Class::Positive, qtype, name),
            Response::NxDomain { zone } => (Class::NxDomain, 0, zone),
            Response::Referral { delegation } => (Class::Referral, 0, delegation),
            Response::Error => (Class::Error, 0, &[][..]),
        };
        Key { class, qtype, name }
    }
}

impl<'a> From<Key<'a>> for Response<'a> {
    fn from(key: Key<'a>) -> Response<'a> {
        match key.class {
            Class::Positive => Response::Positive {
                name: key.name,
                qtype: key.qtype,
            },
            Class::NxDomain => Response::NxDomain { zone: key.name },
            Class::Referral => Response::Referral {
                delegation: key.name,
            },
            Class::Error => Response::Error,
        }
    }
}

/// A response's bucket, found by [`Rrl::locate`] and debited by
/// [`Rrl::debit`]: eight octets, so that a batch keeps one per response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Charge {
    index: u32,
    class: Class,
    /// [`Bucket::owner`] of the key.
    owner: u8,
}

/// What to do with the response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Send,
    Drop,
    /// Send an empty, truncated response (TC=1) instead.
    Slip,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub action: Action,
    /// Log that this client is limited: true at most once per bucket per
    /// window, so the log can not be flooded either.
    pub log: bool,
}

impl Verdict {
    const SEND: Verdict = Verdict {
        action: Action::Send,
        log: false,
    };
}

/// What the table did, for the metrics; summed over workers by the caller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RrlCounters {
    pub dropped: u64,
    pub slipped: u64,
    /// Responses that would have been dropped or slipped, in log-only mode.
    pub log_only: u64,
}

/// One token bucket: 16 octets, four to a cache line.
#[derive(Clone, Copy, Debug)]
#[repr(align(16))]
struct Bucket {
    /// When the bucket was last credited, in milliseconds.
    stamp: u64,
    /// Thousandths of a token: 0 to `rate × 1000` (at most [`CAP`]). A
    /// bucket never used holds [`FULL`].
    balance: u32,
    /// Limited responses since the last one slipped or sent (below 10).
    slip_count: u8,
    /// Eight bits of the hash of the key the bucket counts for (beside
    /// those of its index): a key that lands on a bucket another holds
    /// takes it over, fresh, rather than share its rate (which would
    /// limit two clients each under it). 1 in 256 colliding keys share.
    owner: u8,
    /// The second (plus one, modulo 65,535) a log line was last asked
    /// for; 0: never.
    logged_at: u16,
}

/// The balance of a bucket never used: capped to the rate at first use.
const FULL: u32 = u32::MAX;
/// The most a bucket holds: a rate above 4,294,967 a second is not
/// limited any further than that many tokens.
const CAP: u64 = FULL as u64 - 1;
/// One token, in the units of [`Bucket::balance`].
const TOKEN: u64 = 1000;

const EMPTY: Bucket = Bucket {
    balance: FULL,
    stamp: 0,
    slip_count: 0,
    owner: 0,
    logged_at: 0,
};

/// One class's limit, with the most a bucket holds worked out once.
#[derive(Clone, Copy, Debug)]
struct Limit {
    /// Tokens a second; 0: not limited.
    rate: u64,
    /// `rate` tokens in thousandths, at most [`CAP`].
    cap: u64,
}

impl Limit {
    fn new(rate: u32) -> Limit {
        Limit {
            rate: u64::from(rate),
            cap: (u64::from(rate) * TOKEN).min(CAP),
        }
    }
}

/// One worker's rate limiter.
pub struct Rrl {
    table: Box<[Bucket]>,
    mask: usize,
    /// Keys the hash: random per worker.
    seed: [u64; 2],
    /// Per class (positive, NXDOMAIN, referral, error).
    limits: [Limit; 4],
    window: u32,
    slip: u32,
    ipv4_mask: u32,
    ipv6_mask: u128,
    exempt: Vec<Prefix>,
    log_only: bool,
    pub counters: RrlCounters,
    /// Whether `counters` moved since [`Rrl::take_changed`] last said so:
    /// a batch that limited nothing reports nothing for one test.
    changed: bool,
}

impl Rrl {
    /// The log line of a limited response: what, to which prefix, and
    /// whether it is limited or would be (`log-only`).
    pub fn describe(&self, client: IpAddr, response: Response) -> String {
        let prefix = match client {
            IpAddr::V4(a) => {
                let net = std::net::Ipv4Addr::from(u32::from(a) & self.ipv4_mask);
                format!("{net}/{}", self.ipv4_mask.count_ones())
            }
            IpAddr::V6(a) => {
                let net = std::net::Ipv6Addr::from(u128::from(a) & self.ipv6_mask);
                format!("{net}/{}", self.ipv6_mask.count_ones())
            }
        };
        let verb = match self.log_only {
            true => "log-only, would be rate limiting",
            false => "rate limiting",
        };
        format!("{verb} {response} to {prefix} (client {client})")
    }

    /// A table for `settings`, its hash keyed with `seed` (random in
    /// production, so that nobody can aim collisions at a bucket).
    pub fn new(settings: &RrlSettings, seed: u64) -> Result<Rrl, String> {
        settings.validate()?;
        let size = settings.table_size.next_power_of_two();
        let positive = settings.responses_per_second;
        let v4 = settings.ipv4_prefix_length as u32;
        let v6 = settings.ipv6_prefix_length as u32;
        Ok(Rrl {
            table: vec![EMPTY; size].into_boxed_slice(),
            mask: size - 1,
            seed: [seed, seed.rotate_left(32) ^ SEED_SPREAD],
            limits: [
                positive,
                settings.nxdomains_per_second.unwrap_or(positive),
                positive,
                settings.errors_per_second.unwrap_or(positive),
            ]
            .map(Limit::new),
            window: settings.window,
            slip: settings.slip,
            ipv4_mask: u32::MAX.checked_shl(32 - v4).unwrap_or(0),
            ipv6_mask: u128::MAX.checked_shl(128 - v6).unwrap_or(0),
            exempt: settings.exempt.clone(),
            log_only: settings.log_only,
            counters: RrlCounters::default(),
            changed: false,
        })
    }

    /// Octets the table takes; fixed at creation.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.table)
    }

    /// Debits the bucket of `response` to `client` at `now_ms` and says
    /// whether to send it: [`Rrl::locate`] then [`Rrl::debit`]. Clients
    /// with a valid server cookie and TCP clients should not be checked
    /// at all.
    #[inline]
    pub fn check<'a>(&mut self, client: IpAddr, key: impl Into<Key<'a>>, now_ms: u64) -> Verdict {
        match self.locate(client, key) {
            Some(charge) => self.debit(charge, now_ms),
            None => Verdict::SEND,
        }
    }

    /// The bucket `response` to `client` is to be debited from, whose
    /// cache line is asked for now, so that a batch can locate all its
    /// responses' buckets before it debits the first ([`Rrl::debit`]):
    /// their loads overlap instead of being waited for one at a time.
    /// None: the response is not limited (its class has no rate, or the
    /// client is exempt).
    #[inline]
    pub fn locate<'a>(&self, client: IpAddr, key: impl Into<Key<'a>>) -> Option<Charge> {
        let Key { class, qtype, name } = key.into();
        if self.limits[class as usize].rate == 0 || self.is_exempt(client) {
            return None;
        }
        let hash = self.hash(client, class as u8, qtype, name);
        let index = hash as usize & self.mask;
        heron_sys::prefetch::prefetch(&self.table[index..]);
        Some(Charge {
            // The table has at most MAX_TABLE_SIZE buckets: fits.
            index: index as u32,
            class,
            // Bits the index never uses (the table is far below 2^56).
            owner: (hash >> 56) as u8,
        })
    }

    /// Debits the bucket of a located response at `now_ms` and says
    /// whether to send it. Every charge is debited on its own, so that
    /// several responses of one batch to one bucket each count.
    ///
    /// Inlined into the caller: a response that is not limited costs the
    /// class's limit and the bucket, and returns; what a limited one needs
    /// is out of line ([`Rrl::limited`]).
    #[inline]
    pub fn debit(&mut self, charge: Charge, now_ms: u64) -> Verdict {
        let index = charge.index as usize & self.mask;
        let limit = self.limits[charge.class as usize];
        let bucket = &mut self.table[index];
        if bucket.owner != charge.owner {
            *bucket = Bucket {
                owner: charge.owner,
                ..EMPTY
            };
        }
        if !debit(bucket, limit, now_ms) {
            return Verdict::SEND;
        }
        self.limited(index, charge.class, now_ms)
    }

    /// The verdict on a response of `class` whose bucket at `index` is
    /// empty. An error is never slipped, as in BIND: cut to its header it
    /// tells a client nothing it can retry for, and an extended rcode
    /// (BADCOOKIE) would lose its upper bits with the OPT record.
    #[cold]
    #[inline(never)]
    fn limited(&mut self, index: usize, class: Class, now_ms: u64) -> Verdict {
        self.changed = true;
        let bucket = &mut self.table[index];
        let log = log_due(bucket, self.window, now_ms);
        let may_slip = self.slip > 0 && class != Class::Error;
        let action = if self.log_only {
            self.counters.log_only += 1;
            Action::Send
        } else if may_slip && u32::from(bucket.slip_count) + 1 >= self.slip {
            bucket.slip_count = 0;
            self.counters.slipped += 1;
            Action::Slip
        } else {
            // Counted only towards a slip to come: never past `slip`.
            bucket.slip_count += u8::from(may_slip);
            self.counters.dropped += 1;
            Action::Drop
        };
        Verdict { action, log }
    }

    /// Whether `counters` changed since the last call.
    #[inline]
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// One test when no prefix is exempt.
    #[inline]
    fn is_exempt(&self, client: IpAddr) -> bool {
        !self.exempt.is_empty() && self.in_exempt(client)
    }

    /// Out of line, so that the walk's registers do not spill on the
    /// path of a server with no exempt prefixes.
    #[cold]
    #[inline(never)]
    fn in_exempt(&self, client: IpAddr) -> bool {
        self.exempt.iter().any(|p| p.contains(client))
    }

    /// The key's hash: the client's prefix, the query type (of a positive
    /// answer; else 0), the name's length and the class in one word,
    /// then the name.
    #[inline]
    fn hash(&self, client: IpAddr, class: u8, qtype: u16, name: &[u8]) -> u64 {
        // A name is at most 255 octets: its length fits the octet.
        let kind = u64::from(qtype) << 16 | (name.len() as u64 & 0xFF) << 8 | u64::from(class) << 1;
        let key = match client.to_canonical() {
            IpAddr::V4(v4) => u64::from(u32::from(v4) & self.ipv4_mask) << 32 | kind,
            IpAddr::V6(v6) => {
                let prefix = u128::from(v6) & self.ipv6_mask;
                fold(
                    prefix as u64 ^ self.seed[1],
                    (prefix >> 64) as u64 ^ SEED_SPREAD,
                ) ^ kind
                    | 1
            }
        };
        key_hash(self.seed, key, name)
    }
}

/// Spreads the second half of the seed from the first.
const SEED_SPREAD: u64 = 0x9E37_79B9_7F4A_7C15;

/// A 64 × 64-bit multiply to 128 bits, its halves folded by xor: every
/// bit of each factor reaches the low bits that index the table.
#[inline]
fn fold(a: u64, b: u64) -> u64 {
    let wide = u128::from(a) * u128::from(b);
    (wide as u64) ^ (wide >> 64) as u64
}

/// A keyed hash of `key` (which holds the name's length) and `name`:
/// sixteen octets of the name per multiply, read as two words (a shorter
/// rest as two overlapping reads that cover it, as wyhash does), so a
/// name of up to 16 octets costs one multiply and a typical query name
/// two. RRL needs spread, not resistance to chosen collisions: a sender
/// who could aim a key at another's bucket can spoof that key anyway.
#[inline]
fn key_hash(seed: [u64; 2], key: u64, name: &[u8]) -> u64 {
    let len = name.len();
    let word = |at: usize| u64::from_le_bytes(name[at..at + 8].try_into().expect("8 octets"));
    let half = |at: usize| u32::from_le_bytes(name[at..at + 4].try_into().expect("4 octets"));
    let mut state = key ^ seed[0];
    let (a, b) = match len {
        17.. => {
            let mut at = 0;
            while len - at > 16 {
                state = fold(word(at) ^ seed[1], word(at + 8) ^ state);
                at += 16;
            }
            (word(len - 16), word(len - 8))
        }
        8.. => (word(0), word(len - 8)),
        4.. => (u64::from(half(0)), u64::from(half(len - 4))),
        1.. => {
            let octet = |at: usize| u64::from(name[at]);
            (octet(0) << 16 | octet(len / 2) << 8 | octet(len - 1), 0)
        }
        0 => (0, 0),
    };
    fold(a ^ seed[1], b ^ state)
}

/// Credits `bucket` for the time since it was last used and debits one
/// response if it holds a token; says whether the response is limited
/// (it held none, and keeps what it earned towards the next one).
#[inline]
fn debit(bucket: &mut Bucket, limit: Limit, now_ms: u64) -> bool {
    // Past a full refill from empty, more time changes nothing; the bound
    // keeps the product below overflow. Time going back earns nothing.
    let elapsed = now_ms.saturating_sub(bucket.stamp).min(1000);
    bucket.stamp = bucket.stamp.max(now_ms);
    let credited = (u64::from(bucket.balance) + elapsed * limit.rate).min(limit.cap);
    let limited = credited < TOKEN;
    // At most CAP: fits.
    bucket.balance = if limited { credited } else { credited - TOKEN } as u32;
    limited
}

/// Whether a limited bucket should be logged now (then not again for a
/// window).
fn log_due(bucket: &mut Bucket, window: u32, now_ms: u64) -> bool {
    // 1 to 65,535: wraps every 18 hours, far past the longest window.
    let second = ((now_ms / 1000) % u64::from(u16::MAX)) as u16 + 1;
    let since = u32::from(second.wrapping_sub(bucket.logged_at));
    let due = bucket.logged_at == 0 || since >= window;
    if due {
        bucket.logged_at = second;
    }
    due
}

#[cfg(test)]
mod tests {
    use super::*;

    const WWW: Response = Response::Positive {
        name: b"\x03www\x07example\x00",
        qtype: 1,
    };

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn rrl(settings: RrlSettings) -> Rrl {
        Rrl::new(&settings, 7).unwrap()
    }

    fn five_a_second() -> RrlSettings {
        RrlSettings {
            responses_per_second: 5,
            ..RrlSettings::default()
        }
    }

    /// How many of each action `n` queries of `response` from `client`,
    /// `gap_ms` apart from `start_ms`, got.
    fn flood(
        rrl: &mut Rrl,
        client: &str,
        response: Response,
        start_ms: u64,
        gap_ms: u64,
        n: u64,
    ) -> [u64; 3] {
        let mut seen = [0; 3];
        for i in 0..n {
            let action = rrl
                .check(ip(client), response, start_ms + i * gap_ms)
                .action;
            seen[action as usize] += 1;
        }
        seen
    }

    #[test]
    fn a_flood_from_one_prefix_is_limited_and_every_other_limited_answer_slips() {
        let mut rrl = rrl(five_a_second());
        let (mut sent, mut dropped, mut slipped) = (0, 0, 0);
        for i in 0..1000u64 {
            // 100 a second for 10 s, from hosts all over 192.0.2.0/24.
            let client = ip(&format!("192.0.2.{}", i % 250));
            match rrl.check(client, WWW, 1_000_000 + i * 10).action {
                Action::Send => sent += 1,
                Action::Drop => dropped += 1,
                Action::Slip => slipped += 1,
            }
        }
        // The bucket's five tokens, then five a second (Knot's behaviour):
        // 54 in 9.99 s. Of the 946 limited, half slip.
        assert_eq!((sent, dropped, slipped), (54, 473, 473));
        assert_eq!(
            rrl.counters,
            RrlCounters {
                dropped: 473,
                slipped: 473,
                log_only: 0
            }
        );
    }

    #[test]
    fn other_prefixes_and_other_names_are_unaffected_by_a_flood() {
        let mut rrl = rrl(five_a_second());
        let other_name = Response::Positive {
            name: b"\x04mail\x07example\x00",
            qtype: 1,
        };
        for i in 0..2000u64 {
            let now = i * 10;
            rrl.check(ip("192.0.2.1"), WWW, now);
            if i % 50 == 0 {
                // Twice a second each, well under the rate.
                let from_elsewhere = rrl.check(ip("192.0.3.1"), WWW, now).action;
                let other = rrl.check(ip("192.0.2.1"), other_name, now).action;
                let other_type = Response::Positive {
                    name: b"\x03www\x07example\x00",
                    qtype: 28,
                };
                let aaaa = rrl.check(ip("192.0.2.9"), other_type, now).action;
                assert_eq!(
                    (from_elsewhere, other, aaaa),
                    (Action::Send, Action::Send, Action::Send)
                );
            }
        }
        assert!(rrl.counters.dropped > 900);
    }

    /// In a table of one bucket every key collides: clients each under
    /// the rate are not limited for their sum (a key takes a bucket over
    /// from another), and a flood is still limited.
    #[test]
    fn keys_that_share_a_bucket_do_not_share_a_rate() {
        let mut rrl = rrl(RrlSettings {
            table_size: 1,
            ..five_a_second()
        });
        // 300 prefixes, each once a second: 300 a second on one bucket.
        let owner = |rrl: &Rrl, i: u64| {
            let client = ip(&format!("10.{}.{}.1", i / 256, i % 256));
            (client, rrl.locate(client, WWW).unwrap().owner)
        };
        let clients: Vec<(IpAddr, u8)> = (0..300).map(|i| owner(&rrl, i)).collect();
        let mut limited = 0;
        for second in 0..5u64 {
            for (i, (client, _)) in clients.iter().enumerate() {
                let now = second * 1000 + i as u64 * 3;
                limited += u32::from(rrl.check(*client, WWW, now).action != Action::Send);
            }
        }
        // Only neighbours that share an owner's eight bits share the rate.
        let shared = clients.windows(2).filter(|w| w[0].1 == w[1].1).count();
        assert!(
            limited as usize <= 5 * shared,
            "{limited} limited, {shared} shared"
        );
        let [_, dropped, slipped] = flood(&mut rrl, "192.0.2.1", WWW, 10_000, 10, 300);
        assert!(dropped + slipped > 200, "a flood is still limited");
    }

    #[test]
    fn a_client_at_the_rate_is_never_limited_and_one_above_it_is() {
        let mut at = rrl(five_a_second());
        assert_eq!(flood(&mut at, "192.0.2.1", WWW, 0, 200, 300), [300, 0, 0]);
        let mut above = rrl(five_a_second());
        let [sent, dropped, slipped] = flood(&mut above, "192.0.2.1", WWW, 0, 100, 300);
        assert!(
            dropped > 0 && slipped > 0 && sent < 300,
            "{sent} {dropped} {slipped}"
        );
    }

    #[test]
    fn exempt_prefixes_are_never_limited() {
        let mut rrl = rrl(RrlSettings {
            exempt: vec![
                "192.0.2.0/24".parse().unwrap(),
                "2001:db8::/32".parse().unwrap(),
            ],
            ..five_a_second()
        });
        assert_eq!(
            flood(&mut rrl, "192.0.2.200", WWW, 0, 1, 1000),
            [1000, 0, 0]
        );
        assert_eq!(
            flood(&mut rrl, "::ffff:192.0.2.3", WWW, 0, 1, 1000),
            [1000, 0, 0]
        );
        assert_eq!(
            flood(&mut rrl, "2001:db8:1::5", WWW, 0, 1, 1000),
            [1000, 0, 0]
        );
        assert_eq!(rrl.counters, RrlCounters::default());
        assert_ne!(flood(&mut rrl, "192.0.3.1", WWW, 0, 1, 1000)[0], 1000);
    }

    #[test]
    fn ipv6_clients_are_grouped_by_56_bits_and_mapped_ipv4_by_24() {
        let mut rrl = rrl(five_a_second());
        // Five answers to one /56 in all, whichever host asks.
        for (i, host) in [
            "2001:db8:0:ff00::1",
            "2001:db8:0:ff12::2",
            "2001:db8:0:ffff:1::3",
        ]
        .iter()
        .enumerate()
        {
            let want = if i == 0 { [5, 3, 2] } else { [0, 5, 5] };
            assert_eq!(flood(&mut rrl, host, WWW, 0, 0, 10), want, "{host}");
        }
        assert_eq!(
            flood(&mut rrl, "2001:db8:0:fe00::1", WWW, 0, 0, 5),
            [5, 0, 0]
        );
        // The IPv4 /24 is one bucket whether the socket maps it or not.
        assert_eq!(flood(&mut rrl, "198.51.100.1", WWW, 0, 0, 5), [5, 0, 0]);
        assert_eq!(
            flood(&mut rrl, "::ffff:198.51.100.2", WWW, 0, 0, 2),
            [0, 1, 1]
        );
    }

    #[test]
    fn a_sustained_flood_is_answered_at_the_rate_and_the_client_at_once_after_it() {
        // 100 a second for 20 s at 5 a second: the five first tokens, then
        // five a second; none of the flood is held against the client.
        for window in [1, 15, 60] {
            let mut rrl = rrl(RrlSettings {
                window,
                slip: 0,
                ..five_a_second()
            });
            let [sent, dropped, _] = flood(&mut rrl, "192.0.2.1", WWW, 0, 10, 2000);
            assert_eq!((sent, dropped), (5 + 5 * 20 - 1, 2000 - 104), "{window}");
            // One token (200 ms at 5 a second) after the flood stops.
            assert_eq!(flood(&mut rrl, "192.0.2.1", WWW, 20_200, 0, 1), [1, 0, 0]);
        }
    }

    #[test]
    fn slip_zero_never_truncates_and_one_always_does() {
        for (slip, want) in [(0, [9, 991, 0]), (1, [9, 0, 991]), (3, [9, 661, 330])] {
            let mut rrl = rrl(RrlSettings {
                slip,
                ..five_a_second()
            });
            assert_eq!(
                flood(&mut rrl, "192.0.2.1", WWW, 0, 1, 1000),
                want,
                "slip {slip}"
            );
        }
    }

    #[test]
    fn limited_errors_are_dropped_never_slipped() {
        for slip in [1, 2, 10] {
            let mut rrl = rrl(RrlSettings {
                slip,
                ..five_a_second()
            });
            let errors = flood(&mut rrl, "192.0.2.1", Response::Error, 0, 1, 100);
            assert_eq!(errors, [5, 95, 0], "slip {slip}");
            // Other answers to the client still slip.
            assert_ne!(flood(&mut rrl, "192.0.2.1", WWW, 0, 1, 100)[2], 0);
        }
    }

    #[test]
    fn a_bucket_dropped_past_65535_times_in_a_row_keeps_counting() {
        // Nothing counts towards a slip that can not come (an error, or
        // slip 0): the count would pass its 16 bits.
        for (slip, response) in [(2, Response::Error), (0, WWW)] {
            let mut rrl = rrl(RrlSettings {
                slip,
                ..five_a_second()
            });
            let seen = flood(&mut rrl, "192.0.2.1", response, 0, 0, 70_000);
            assert_eq!(seen, [5, 69_995, 0], "{response:?}");
        }
    }

    #[test]
    fn the_log_line_says_what_is_limited_to_which_prefix() {
        let rrl = Rrl::new(&RrlSettings::default(), 1).unwrap();
        let client: IpAddr = "127.0.120.7".parse().unwrap();
        let www = b"\x03www\x07example\x04test\x00";
        let said = |r: &Rrl, response| r.describe(client, response);
        assert_eq!(
            said(
                &rrl,
                Response::Positive {
                    name: www,
                    qtype: 1
                }
            ),
            "rate limiting answers for www.example.test. A to 127.0.120.0/24 (client 127.0.120.7)"
        );
        let nodata = Response::Positive {
            name: www,
            qtype: 0,
        };
        assert!(
            said(&rrl, nodata).starts_with("rate limiting NODATA answers for www.example.test. ")
        );
        let log_only = RrlSettings {
            log_only: true,
            ..RrlSettings::default()
        };
        let rrl = Rrl::new(&log_only, 1).unwrap();
        let v6: IpAddr = "2001:db8:1:2ff::1".parse().unwrap();
        assert_eq!(
            rrl.describe(v6, Response::NxDomain { zone: &www[4..] }),
            "log-only, would be rate limiting NXDOMAIN answers in example.test. to 2001:db8:1:200::/56 (client 2001:db8:1:2ff::1)"
        );
    }

    #[test]
    fn log_only_sends_everything_and_counts_what_it_would_limit() {
        let mut rrl = rrl(RrlSettings {
            log_only: true,
            ..five_a_second()
        });
        let mut logs = 0;
        for i in 0..1000 {
            let verdict = rrl.check(ip("192.0.2.1"), WWW, i);
            assert_eq!(verdict.action, Action::Send);
            logs += verdict.log as u32;
        }
        assert_eq!(logs, 1);
        assert_eq!(
            rrl.counters,
            RrlCounters {
                dropped: 0,
                slipped: 0,
                log_only: 991
            }
        );
    }

    #[test]
    fn a_limited_bucket_asks_for_a_log_line_once_a_window() {
        let mut rrl = rrl(five_a_second()); // window 15 s
        let mut logged_at = Vec::new();
        for i in 0..6000u64 {
            let now = i * 10; // 60 s of flood
            if rrl.check(ip("192.0.2.1"), WWW, now).log {
                logged_at.push(now / 1000);
            }
        }
        assert_eq!(logged_at, [0, 15, 30, 45]);
    }

    #[test]
    fn nxdomain_referral_and_error_answers_have_their_own_rates_and_keys() {
        let mut rrl = rrl(RrlSettings {
            responses_per_second: 100,
            nxdomains_per_second: Some(2),
            errors_per_second: Some(0),
            slip: 0,
            ..RrlSettings::default()
        });
        let nx = Response::NxDomain {
            zone: b"\x07example\x00",
        };
        assert_eq!(flood(&mut rrl, "192.0.2.1", nx, 0, 0, 10), [2, 8, 0]);
        let other_zone = Response::NxDomain {
            zone: b"\x07example\x03org\x00",
        };
        assert_eq!(flood(&mut rrl, "192.0.2.1", other_zone, 0, 0, 2), [2, 0, 0]);
        assert_eq!(flood(&mut rrl, "192.0.2.1", WWW, 0, 0, 100), [100, 0, 0]);
        let referral = Response::Referral {
            delegation: b"\x03sub\x07example\x00",
        };
        assert_eq!(
            flood(&mut rrl, "192.0.2.1", referral, 0, 0, 101),
            [100, 1, 0]
        );
        // errors-per-second 0: errors are not limited.
        let errors = flood(&mut rrl, "192.0.2.1", Response::Error, 0, 0, 1000);
        assert_eq!(errors, [1000, 0, 0]);
    }

    #[test]
    fn errors_are_limited_per_client_prefix_whatever_the_name() {
        let mut rrl = rrl(RrlSettings {
            errors_per_second: Some(3),
            slip: 0,
            ..RrlSettings::default()
        });
        assert_eq!(
            flood(&mut rrl, "192.0.2.1", Response::Error, 0, 0, 5),
            [3, 2, 0]
        );
        assert_eq!(
            flood(&mut rrl, "192.0.2.77", Response::Error, 0, 0, 1),
            [0, 1, 0]
        );
        assert_eq!(
            flood(&mut rrl, "192.0.3.1", Response::Error, 0, 0, 1),
            [1, 0, 0]
        );
    }

    #[test]
    fn time_going_back_earns_nothing() {
        let mut rrl = rrl(five_a_second());
        assert_eq!(flood(&mut rrl, "192.0.2.1", WWW, 10_000, 0, 5), [5, 0, 0]);
        assert_eq!(flood(&mut rrl, "192.0.2.1", WWW, 0, 0, 2), [0, 1, 1]);
        // 200 ms after 10 s, not 10.2 s: one token.
        assert_eq!(flood(&mut rrl, "192.0.2.1", WWW, 10_200, 0, 2), [1, 1, 0]);
    }

    #[test]
    fn the_table_keeps_its_size_at_and_past_capacity() {
        assert_eq!(std::mem::size_of::<Bucket>(), 16);
        assert_eq!(std::mem::align_of::<Bucket>(), 16, "never across two lines");
        for (table_size, buckets) in [(1 << 16, 1 << 16), (1000, 1024), (1, 1)] {
            let mut rrl = rrl(RrlSettings {
                table_size,
                ..five_a_second()
            });
            let bytes = rrl.memory_bytes();
            assert_eq!(bytes, buckets * 16);
            // Four times as many clients as buckets, each flooding: every
            // one gets a verdict and the table does not grow.
            for i in 0..(4 * buckets as u32).max(100) {
                let client = IpAddr::from((i << 8).to_be_bytes());
                for t in 0..10 {
                    rrl.check(client, WWW, t);
                }
            }
            assert_eq!(rrl.memory_bytes(), bytes);
            assert!(rrl.counters.dropped + rrl.counters.slipped > 0);
        }
    }

    #[test]
    fn a_bucket_holds_a_second_of_the_rate_up_to_its_cap() {
        // At the largest rate whose second fits, and past it.
        for (rate, holds) in [
            (5, 5_000),
            (4_294_967, 4_294_967_000),
            (4_294_968, CAP),
            (u32::MAX, CAP),
        ] {
            let mut bucket = EMPTY;
            assert!(
                !debit(&mut bucket, Limit::new(rate), 0),
                "a fresh bucket sends"
            );
            assert_eq!(u64::from(bucket.balance), holds - TOKEN, "rate {rate}");
            // A second later, full again, whatever the rate: no overflow.
            assert!(!debit(&mut bucket, Limit::new(rate), 1000));
            assert_eq!(u64::from(bucket.balance), holds - TOKEN, "rate {rate}");
        }
    }

    #[test]
    fn the_key_hash_tells_every_octet_and_length_apart() {
        let seed = [7, 9];
        let long = b"\x03www\x07example\x04test\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10";
        // As `Rrl::hash` builds it: the key word holds the name's length.
        let key = |k: u64, len: usize| k << 16 | (len as u64) << 8;
        // Every branch of the hash: 0, 1 to 3, 4 to 7, 8 to 16 octets,
        // one and two 16-octet steps before the last 16.
        for len in [
            0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 18, 24, 31, 32, 33, 34,
        ] {
            let name = &long[..len];
            let h = key_hash(seed, key(42, len), name);
            assert_eq!(h, key_hash(seed, key(42, len), name), "the same each time");
            assert_ne!(
                h,
                key_hash(seed, key(43, len), name),
                "another key, length {len}"
            );
            assert_ne!(h, key_hash([8, 9], key(42, len), name), "another seed");
            assert_ne!(h, key_hash([7, 10], key(42, len), name), "another seed");
            if len < long.len() {
                let longer = &long[..len + 1];
                assert_ne!(h, key_hash(seed, key(42, len + 1), longer), "length {len}");
            }
            for at in 0..len {
                let mut other = name.to_vec();
                other[at] ^= 0x20;
                let h_other = key_hash(seed, key(42, len), &other);
                assert_ne!(h, h_other, "octet {at} of {len}");
            }
        }
    }

    #[test]
    fn names_that_read_alike_but_differ_in_length_key_apart() {
        // The short reads of one to three octets see "\0" and "\0\0" alike;
        // the key's length tells them apart, for both families.
        let rrl = rrl(five_a_second());
        for client in [ip("192.0.2.1"), ip("2001:db8::1")] {
            let short = rrl.hash(client, 0, 1, b"\x00");
            assert_ne!(short, rrl.hash(client, 0, 1, b"\x00\x00"), "{client}");
            assert_ne!(short, rrl.hash(client, 1, 1, b"\x00"), "class, {client}");
            assert_ne!(short, rrl.hash(client, 0, 2, b"\x00"), "type, {client}");
        }
        let www = b"\x03www\x07example\x00";
        let v4 = rrl.hash(ip("192.0.2.1"), 0, 1, www);
        assert_eq!(v4, rrl.hash(ip("::ffff:192.0.2.1"), 0, 1, www), "mapped");
        assert_ne!(
            v4,
            rrl.hash(ip("::c000:201"), 0, 1, www),
            "IPv6, not mapped"
        );
    }

    #[test]
    fn keys_spread_over_the_table() {
        // 65,536 client prefixes asking one name, into 4,096 buckets: 16
        // each on average, none past 48.
        let rrl = rrl(RrlSettings {
            table_size: 4096,
            ..five_a_second()
        });
        let mut load = vec![0u32; 4096];
        for i in 0..65_536u32 {
            let client = IpAddr::from((i << 8).to_be_bytes());
            let index = rrl.hash(client, 0, 1, b"\x03www\x07example\x00") as usize & rrl.mask;
            load[index] += 1;
        }
        let max = *load.iter().max().unwrap();
        assert!(max <= 48, "{max}");
        assert_eq!(
            load.iter().filter(|&&n| n == 0).count(),
            0,
            "every bucket used"
        );
    }

    #[test]
    fn settings_out_of_range_are_refused() {
        let ok = RrlSettings::default();
        assert_eq!(ok.validate(), Ok(()));
        let edges = [
            RrlSettings {
                window: 1,
                slip: 10,
                ..ok.clone()
            },
            RrlSettings {
                window: 3600,
                ipv4_prefix_length: 32,
                ipv6_prefix_length: 128,
                ..ok.clone()
            },
            RrlSettings {
                table_size: MAX_TABLE_SIZE,
                ipv4_prefix_length: 0,
                ipv6_prefix_length: 0,
                ..ok.clone()
            },
        ];
        for s in edges {
            assert_eq!(s.validate(), Ok(()), "{s:?}");
        }
        let bad = [
            RrlSettings {
                window: 0,
                ..ok.clone()
            },
            RrlSettings {
                window: 3601,
                ..ok.clone()
            },
            RrlSettings {
                slip: 11,
                ..ok.clone()
            },
            RrlSettings {
                ipv4_prefix_length: 33,
                ..ok.clone()
            },
            RrlSettings {
                ipv6_prefix_length: 129,
                ..ok.clone()
            },
            RrlSettings {
                table_size: 0,
                ..ok.clone()
            },
            RrlSettings {
                table_size: MAX_TABLE_SIZE + 1,
                ..ok.clone()
            },
        ];
        for s in bad {
            assert!(s.validate().is_err(), "{s:?}");
            assert!(Rrl::new(&s, 0).is_err());
        }
    }

    #[test]
    fn a_zero_prefix_length_makes_all_clients_one() {
        let mut rrl = rrl(RrlSettings {
            ipv4_prefix_length: 0,
            slip: 0,
            ..five_a_second()
        });
        assert_eq!(flood(&mut rrl, "10.0.0.1", WWW, 0, 0, 5), [5, 0, 0]);
        assert_eq!(flood(&mut rrl, "203.0.113.9", WWW, 0, 0, 1), [0, 1, 0]);
    }

    #[test]
    fn rates_divided_among_workers_round_up() {
        let settings = RrlSettings {
            responses_per_second: 21,
            nxdomains_per_second: Some(1),
            errors_per_second: None,
            ..RrlSettings::default()
        };
        let each = settings.divided_among(4);
        assert_eq!(
            (
                each.responses_per_second,
                each.nxdomains_per_second,
                each.errors_per_second
            ),
            (6, Some(1), None)
        );
        let unlimited = RrlSettings {
            responses_per_second: 0,
            ..settings.clone()
        };
        assert_eq!(unlimited.divided_among(4).responses_per_second, 0);
        assert_eq!(settings.divided_among(0), settings);
    }
}
