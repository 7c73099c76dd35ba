//! ZONEMD (RFC 8976): a digest over a whole zone, scheme SIMPLE (1) with
//! SHA-384 (1) or SHA-512 (2). I/O-free: the server decides what to do
//! with a verdict (refuse the version, count it, log it).
//!
//! The digest covers every record of the zone in canonical order (RFC
//! 8976 3.3: owner, type, RDATA; names lower-cased and RDATA canonical as
//! for signing; duplicates once) except the apex ZONEMD RRset and the
//! RRSIGs over it.

use std::borrow::Cow;

use heron_proto::RType;
use heron_proto::rdata::canonical_rdata;
use heron_zone::Zone;
use heron_zone::zone::Node;
use sha2::{Digest, Sha384, Sha512};

mod generate;
#[cfg(test)]
mod tests;

pub use generate::{sign_with_zonemd, unsigned_with_zonemd};

/// The only scheme RFC 8976 defines.
pub const SCHEME_SIMPLE: u8 = 1;
/// Digests shorter than this are malformed (RFC 8976 2.2.4).
pub const MIN_DIGEST_LEN: usize = 12;

/// A hash algorithm Heron digests with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HashAlg {
    Sha384 = 1,
    Sha512 = 2,
}

impl HashAlg {
    pub fn from_code(code: u8) -> Option<HashAlg> {
        match code {
            1 => Some(HashAlg::Sha384),
            2 => Some(HashAlg::Sha512),
            _ => None,
        }
    }

    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn digest_len(self) -> usize {
        match self {
            HashAlg::Sha384 => 48,
            HashAlg::Sha512 => 64,
        }
    }
}

/// One ZONEMD record's RDATA (RFC 8976 2.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Zonemd<'a> {
    pub serial: u32,
    pub scheme: u8,
    pub hash_alg: u8,
    pub digest: &'a [u8],
}

/// Why ZONEMD RDATA cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Malformed(pub String);

impl<'a> Zonemd<'a> {
    /// Reads RDATA: serial, scheme, hash algorithm, digest of at least
    /// [`MIN_DIGEST_LEN`] octets.
    pub fn parse(rdata: &'a [u8]) -> Result<Zonemd<'a>, Malformed> {
        let Some((&[s0, s1, s2, s3, scheme, hash_alg], digest)) = rdata.split_first_chunk::<6>()
        else {
            return Err(Malformed(format!("RDATA of {} octets", rdata.len())));
        };
        if digest.len() < MIN_DIGEST_LEN {
            return Err(Malformed(format!("digest of {} octets", digest.len())));
        }
        Ok(Zonemd {
            serial: u32::from_be_bytes([s0, s1, s2, s3]),
            scheme,
            hash_alg,
            digest,
        })
    }

    /// The algorithm, if Heron can check this record (scheme SIMPLE and a
    /// known hash algorithm).
    pub fn supported(&self) -> Option<HashAlg> {
        (self.scheme == SCHEME_SIMPLE)
            .then(|| HashAlg::from_code(self.hash_alg))
            .flatten()
    }
}

/// The outcome of checking a zone's apex ZONEMD RRset (RFC 8976 4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The apex has no ZONEMD.
    Absent,
    /// No record is both supported and for the SOA's serial: nothing to
    /// check, the zone is accepted.
    Unverifiable,
    /// A supported record's digest matches the zone.
    Verified(HashAlg),
    /// The zone must be refused: why.
    Failed(String),
}

impl Verdict {
    /// Whether the version may be served.
    pub fn accepts(&self) -> bool {
        !matches!(self, Verdict::Failed(_))
    }
}

/// Checks the zone against its apex ZONEMD records: success if any
/// supported record for the SOA's serial matches; failure if there are
/// such records and none matches, or two share scheme and algorithm (RFC
/// 8976 2.4), or one is malformed.
pub fn verify(zone: &Zone) -> Verdict {
    let Some(set) = zone.apex().rrset(RType::ZONEMD) else {
        return Verdict::Absent;
    };
    let rdatas: Vec<Cow<'_, [u8]>> = set.rdatas().collect();
    let mut records = Vec::with_capacity(rdatas.len());
    for rdata in &rdatas {
        match Zonemd::parse(rdata) {
            Ok(r) => records.push(r),
            Err(Malformed(why)) => return Verdict::Failed(format!("malformed ZONEMD: {why}")),
        }
    }
    for (i, r) in records.iter().enumerate() {
        let twin = records[..i]
            .iter()
            .any(|o| (o.scheme, o.hash_alg) == (r.scheme, r.hash_alg));
        if twin {
            return Verdict::Failed(format!(
                "two ZONEMD records with scheme {} and hash algorithm {}",
                r.scheme, r.hash_alg
            ));
        }
    }
    check_digests(zone, &records)
}

fn check_digests(zone: &Zone, records: &[Zonemd<'_>]) -> Verdict {
    let serial = zone.serial();
    let mut failure = None;
    for r in records.iter().filter(|r| r.serial == serial) {
        let Some(alg) = r.supported() else { continue };
        if digest(zone, alg) == r.digest {
            return Verdict::Verified(alg);
        }
        failure = Some(format!(
            "ZONEMD digest (scheme 1, hash algorithm {}) does not match serial {serial}",
            alg.code()
        ));
    }
    failure.map_or(Verdict::Unverifiable, Verdict::Failed)
}

/// The SIMPLE-scheme digest of the zone with `alg`.
pub fn digest(zone: &Zone, alg: HashAlg) -> Vec<u8> {
    match alg {
        HashAlg::Sha384 => digest_with::<Sha384>(zone),
        HashAlg::Sha512 => digest_with::<Sha512>(zone),
    }
}

fn digest_with<H: Digest>(zone: &Zone) -> Vec<u8> {
    let mut hasher = H::new();
    let class = zone.class().0.to_be_bytes();
    let mut wire = Vec::new();
    for (i, node) in zone.nodes_in_canonical_order().enumerate() {
        wire.clear();
        write_node(&mut wire, node, i == 0, class);
        hasher.update(&wire);
    }
    hasher.finalize().to_vec()
}

/// One record to digest: type, TTL, canonical RDATA.
type Record<'a> = (u16, u32, Cow<'a, [u8]>);

/// The node's records in canonical wire form, sorted by type then RDATA,
/// each once; at the apex without the ZONEMD RRset and its signatures.
fn write_node(out: &mut Vec<u8>, node: Node<'_>, apex: bool, class: [u8; 2]) {
    let mut records: Vec<Record<'_>> = Vec::new();
    for set in node.rrsets() {
        if apex && set.rtype == RType::ZONEMD {
            continue;
        }
        if set.has_records() {
            let ttl = set.ttl();
            records.extend(
                set.rdatas()
                    .map(|r| (set.rtype.0, ttl, canonical(set.rtype, r))),
            );
        }
        if set.has_sigs() {
            let ttl = set.sig_ttl();
            records.extend(
                set.sigs()
                    .map(|r| (RType::RRSIG.0, ttl, canonical(RType::RRSIG, r))),
            );
        }
    }
    records.sort_unstable_by(|a, b| (a.0, &a.2).cmp(&(b.0, &b.2)));
    records.dedup_by(|a, b| (a.0, &a.2) == (b.0, &b.2));
    let owner = node.key();
    for (rtype, ttl, rdata) in &records {
        out.extend_from_slice(owner);
        out.extend_from_slice(&rtype.to_be_bytes());
        out.extend_from_slice(&class);
        out.extend_from_slice(&ttl.to_be_bytes());
        out.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        out.extend_from_slice(rdata);
    }
}

fn canonical(rtype: RType, rdata: Cow<'_, [u8]>) -> Cow<'_, [u8]> {
    match canonical_rdata(rtype, &rdata) {
        Cow::Borrowed(_) => rdata,
        Cow::Owned(lower) => Cow::Owned(lower),
    }
}

/// ZONEMD RDATA for `digest` of the zone at `serial`.
pub fn rdata(serial: u32, alg: HashAlg, digest: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(6 + digest.len());
    out.extend_from_slice(&serial.to_be_bytes());
    out.push(SCHEME_SIMPLE);
    out.push(alg.code());
    out.extend_from_slice(digest);
    out
}
