//! One RRSIG: the RRset in canonical form (RFC 4034 3.1.8.1, 6), the
//! RRSIG RDATA around the signature, and when it is valid.

use std::borrow::Cow;

use heron_proto::RType;
use heron_proto::rdata::canonical_rdata;

/// What every RRSIG of one signing shares.
#[derive(Clone, Copy, Debug)]
pub struct Validity {
    /// Unix seconds: signatures are valid from here (back-dated by the
    /// policy's inception offset, for validators whose clocks lag).
    pub inception: u64,
    /// Unix seconds: the latest expiration; each RRset's is this less its
    /// jitter.
    pub expiration: u64,
    /// Seconds over which expirations are spread (0: all alike).
    pub jitter: u32,
}

/// Where an RRset's expiration falls in the jitter window.
#[derive(Clone, Copy, Debug)]
pub enum Place {
    /// The RRset's rank among the `of` RRsets of a signing of the whole
    /// zone (in canonical order): the zone's signatures fall evenly over
    /// the window, every hour of it alike.
    Rank { at: u64, of: u64 },
    /// A hash of owner and type: for the few RRsets an update or a
    /// transfer signs on their own.
    Hash,
}

impl Validity {
    /// The expiration of the RRset `(owner, rtype)` at `place`: the latest
    /// time up to `expiration` that lies the place's share of `jitter`
    /// past a multiple of `jitter` (counted from 1970). An RRset re-signed
    /// when its signature is due comes back to the same time of the
    /// window, so the hours stay as evenly filled as the first signing
    /// left them. With the place a hash alone, the fullest of 120 hours
    /// held 1.2% of a 10,000-signature zone.
    pub fn expiration_of(&self, lower_owner: &[u8], rtype: RType, place: Place) -> u64 {
        if self.jitter == 0 {
            return self.expiration;
        }
        let jitter = u64::from(self.jitter);
        let phase = match place {
            Place::Rank { at, of } => {
                (u128::from(jitter) * u128::from(at) / u128::from(of.max(1))) as u64 % jitter
            }
            Place::Hash => fnv1a(lower_owner, rtype.0) % jitter,
        };
        let behind = (self.expiration % jitter + jitter - phase) % jitter;
        self.expiration.saturating_sub(behind)
    }
}

/// FNV-1a: fixed across releases and processes (std's hashers are
/// seeded), so that an RRset keeps its place in the jitter window.
fn fnv1a(owner: &[u8], rtype: u16) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in owner.iter().chain(&rtype.to_be_bytes()) {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    // FNV's low bits mix poorly for short inputs: fold the high half in.
    hash ^ (hash >> 29)
}

/// A time in an RRSIG: Unix seconds modulo 2^32, compared by serial
/// arithmetic (RFC 4034 3.1.5), so that signing goes on past 2106.
pub fn sig_time(unix: u64) -> u32 {
    unix as u32
}

/// Seconds from `now` until an RRSIG time (negative: passed), by serial
/// arithmetic: what a refresh compares with the policy's refresh period.
pub fn seconds_until(sig_time: u32, now: u64) -> i64 {
    i64::from(sig_time.wrapping_sub(now as u32) as i32)
}

/// The labels field (RFC 4034 3.1.3): the owner's labels, the root and a
/// leading `*` not counted.
pub fn labels_field(owner: &[u8]) -> u8 {
    let mut count = 0u8;
    let mut at = 0;
    while at < owner.len() && owner[at] != 0 {
        count += 1;
        at += 1 + owner[at] as usize;
    }
    if owner.starts_with(b"\x01*") {
        count -= 1;
    }
    count
}

/// The fields of an RRSIG before its signature.
pub struct SigHeader<'a> {
    pub covered: RType,
    pub algorithm: u8,
    pub labels: u8,
    pub original_ttl: u32,
    pub expiration: u32,
    pub inception: u32,
    pub key_tag: u16,
    /// Lower-cased wire form.
    pub signer: &'a [u8],
}

impl SigHeader<'_> {
    /// The RRSIG RDATA up to the signature, appended to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.covered.0.to_be_bytes());
        out.push(self.algorithm);
        out.push(self.labels);
        out.extend_from_slice(&self.original_ttl.to_be_bytes());
        out.extend_from_slice(&self.expiration.to_be_bytes());
        out.extend_from_slice(&self.inception.to_be_bytes());
        out.extend_from_slice(&self.key_tag.to_be_bytes());
        out.extend_from_slice(self.signer);
    }
}

/// The RRset part of what is signed (RFC 4034 3.1.8.1): each record with
/// the lower-cased owner, class, original TTL, and canonical RDATA, the
/// records sorted by RDATA, duplicates once.
pub fn write_canonical_rrset<'r>(
    out: &mut Vec<u8>,
    lower_owner: &[u8],
    (rtype, class, ttl): (RType, u16, u32),
    rdatas: impl Iterator<Item = Cow<'r, [u8]>>,
) {
    let mut canonical: Vec<Cow<'r, [u8]>> = rdatas
        .map(|r| match canonical_rdata(rtype, &r) {
            Cow::Borrowed(_) => r,
            Cow::Owned(lower) => Cow::Owned(lower),
        })
        .collect();
    canonical.sort_unstable();
    canonical.dedup();
    for rdata in &canonical {
        out.extend_from_slice(lower_owner);
        out.extend_from_slice(&rtype.0.to_be_bytes());
        out.extend_from_slice(&class.to_be_bytes());
        out.extend_from_slice(&ttl.to_be_bytes());
        out.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        out.extend_from_slice(rdata);
    }
}
