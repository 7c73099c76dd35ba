//! The NSEC chain (RFC 4034 4, RFC 4035 2.3) and the NSEC3 chain (RFC
//! 5155 7.1) of a zone's planned names.

use heron_proto::RType;
use heron_proto::rdata::encode_type_bitmap;
use sha1::{Digest, Sha1};

use super::plan::{Entry, Kind};
use super::{OwnedRRset, SignError};

/// How a signed zone proves that names and types do not exist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Denial {
    Nsec,
    /// RFC 9276: 0 iterations and no salt unless the policy says else.
    Nsec3 {
        iterations: u16,
        salt: Vec<u8>,
        opt_out: bool,
    },
}

/// NSEC3 hash algorithm 1, SHA-1 (RFC 5155 11).
const SHA1_ALGORITHM: u8 = 1;
const OPT_OUT_FLAG: u8 = 1;

/// The bitmap of a name's NSEC or NSEC3: its own types and those the
/// signer adds there.
pub(super) fn bitmap(entry: &Entry, denial: &Denial) -> Vec<u8> {
    let mut types = entry.data_types();
    let nsec = *denial == Denial::Nsec;
    let signed = match entry.kind {
        Kind::Apex => {
            types.push(RType::DNSKEY.0);
            if !nsec {
                types.push(RType::NSEC3PARAM.0);
            }
            true
        }
        Kind::Data => true,
        // An NSEC is signed at its owner; an NSEC3 is not, so at an
        // insecure delegation nothing there is.
        Kind::Cut { secure } => nsec || secure,
        Kind::EmptyNonTerminal => false,
    };
    if signed {
        types.push(RType::RRSIG.0);
    }
    if nsec {
        types.push(RType::NSEC.0);
    }
    types.sort_unstable();
    types.dedup();
    let mut out = Vec::new();
    encode_type_bitmap(&types, &mut out);
    out
}

/// The NSEC of the name at `at` in the plan (none for an empty
/// non-terminal): it names the next name with data, the last the apex.
pub fn nsec_at(entries: &[Entry], at: usize, ttl: u32) -> Option<OwnedRRset> {
    let named = |e: &&Entry| e.kind != Kind::EmptyNonTerminal;
    let entry = Some(&entries[at]).filter(named)?;
    let next = (entries[at + 1..].iter().find(named))
        .or_else(|| entries.iter().find(named))
        .expect("the apex is named");
    let mut rdata = next.node.key().to_vec();
    rdata.extend_from_slice(&bitmap(entry, &Denial::Nsec));
    Some(OwnedRRset {
        owner: entry.node.owner_wire().to_vec(),
        rtype: RType::NSEC,
        ttl,
        rdatas: vec![rdata],
    })
}

/// The NSEC3 hash of a lower-cased wire name (RFC 5155 5).
pub fn nsec3_hash(lower_wire: &[u8], salt: &[u8], iterations: u16) -> [u8; 20] {
    let mut digest: [u8; 20] = Sha1::new()
        .chain_update(lower_wire)
        .chain_update(salt)
        .finalize()
        .into();
    for _ in 0..iterations {
        digest = Sha1::new()
            .chain_update(digest)
            .chain_update(salt)
            .finalize()
            .into();
    }
    digest
}

/// Base32hex (RFC 4648 7) of a digest, lower-case, no padding.
pub fn base32hex(digest: &[u8; 20]) -> [u8; 32] {
    const ALPHABET: &[u8; 32] = b"0123456789abcdefghijklmnopqrstuv";
    let mut out = [0u8; 32];
    for (group, chunk) in digest.chunks(5).enumerate() {
        let bits = chunk.iter().fold(0u64, |acc, &b| acc << 8 | u64::from(b));
        for k in 0..8 {
            out[group * 8 + k] = ALPHABET[(bits >> (35 - 5 * k) & 0x1F) as usize];
        }
    }
    out
}

/// The NSEC3PARAM RDATA of the chain (flags 0: opt-out is per NSEC3).
pub fn nsec3param_rdata(salt: &[u8], iterations: u16) -> Vec<u8> {
    let mut out = vec![SHA1_ALGORITHM, 0];
    out.extend_from_slice(&iterations.to_be_bytes());
    out.push(salt.len() as u8);
    out.extend_from_slice(salt);
    out
}

/// One NSEC3 per authoritative name and empty non-terminal (insecure
/// delegations left out under opt-out), in hash order, each naming the
/// next hash.
pub fn nsec3_chain(
    entries: &[Entry],
    apex: &[u8],
    ttl: u32,
    (iterations, salt, opt_out): (u16, &[u8], bool),
) -> Result<Vec<OwnedRRset>, SignError> {
    let denial = Denial::Nsec3 {
        iterations,
        salt: salt.to_vec(),
        opt_out,
    };
    let mut hashed: Vec<([u8; 20], Vec<u8>)> = entries
        .iter()
        .filter(|e| !(opt_out && e.kind == (Kind::Cut { secure: false })))
        .map(|e| {
            let hash = nsec3_hash(e.node.key(), salt, iterations);
            (hash, bitmap(e, &denial))
        })
        .collect();
    hashed.sort_unstable_by_key(|h| h.0);
    if hashed.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(SignError(
            "two names have the same NSEC3 hash: change the salt".into(),
        ));
    }
    if 1 + 32 + apex.len() > 255 {
        return Err(SignError("the zone's name is too long for NSEC3".into()));
    }
    let flags = if opt_out { OPT_OUT_FLAG } else { 0 };
    let mut out = Vec::with_capacity(hashed.len());
    for (i, (hash, types)) in hashed.iter().enumerate() {
        let next = &hashed[(i + 1) % hashed.len()].0;
        let mut rdata = vec![SHA1_ALGORITHM, flags];
        rdata.extend_from_slice(&iterations.to_be_bytes());
        rdata.push(salt.len() as u8);
        rdata.extend_from_slice(salt);
        rdata.push(20);
        rdata.extend_from_slice(next);
        rdata.extend_from_slice(types);
        let mut owner = vec![32];
        owner.extend_from_slice(&base32hex(hash));
        owner.extend_from_slice(apex);
        out.push(OwnedRRset {
            owner,
            rtype: RType::NSEC3,
            ttl,
            rdatas: vec![rdata],
        });
    }
    Ok(out)
}
