//! NSEC3 hashing (RFC 5155 5): the hashed owner name a name's NSEC3
//! record has, computed with the zone's NSEC3PARAM.

use heron_proto::name::MAX_NAME_LEN;
use sha1::{Digest, Sha1};

/// Octets of a SHA-1 digest, the only NSEC3 hash algorithm (RFC 5155 11).
pub(crate) const HASH_LEN: usize = 20;
/// Characters of a digest in base32hex: the label of a hashed owner.
pub(crate) const LABEL_LEN: usize = 32;
/// NSEC3 hash algorithm 1: SHA-1.
const SHA1: u8 = 1;

/// The parameters a zone's NSEC3 chain was hashed with (its NSEC3PARAM).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Nsec3Params {
    pub(crate) iterations: u16,
    pub(crate) salt: Box<[u8]>,
}

impl Nsec3Params {
    /// The parameters in NSEC3PARAM RDATA (algorithm, flags, iterations,
    /// salt length, salt), or None for an algorithm other than SHA-1 or
    /// malformed RDATA.
    pub(crate) fn from_nsec3param(rdata: &[u8]) -> Option<Nsec3Params> {
        let (&[algorithm, _flags, hi, lo, salt_len], rest) = rdata.split_first_chunk::<5>()?;
        let salt = rest.get(..salt_len as usize)?;
        (algorithm == SHA1 && rest.len() == salt.len()).then(|| Nsec3Params {
            iterations: u16::from_be_bytes([hi, lo]),
            salt: salt.into(),
        })
    }

    /// Whether NSEC3 RDATA was made with these parameters: the same
    /// algorithm, iterations and salt (RFC 5155 7.2: only the chain the
    /// NSEC3PARAM names is used).
    pub(crate) fn made(&self, nsec3_rdata: &[u8]) -> bool {
        let Some((&[algorithm, _flags, hi, lo, salt_len], rest)) =
            nsec3_rdata.split_first_chunk::<5>()
        else {
            return false;
        };
        algorithm == SHA1
            && u16::from_be_bytes([hi, lo]) == self.iterations
            && rest.get(..salt_len as usize) == Some(&self.salt[..])
    }

    /// The NSEC3 hash of a lower-cased wire name (RFC 5155 5).
    pub(crate) fn hash(&self, lower_wire: &[u8]) -> [u8; HASH_LEN] {
        let mut digest: [u8; HASH_LEN] = Sha1::new()
            .chain_update(lower_wire)
            .chain_update(&self.salt)
            .finalize()
            .into();
        for _ in 0..self.iterations {
            digest = Sha1::new()
                .chain_update(digest)
                .chain_update(&self.salt)
                .finalize()
                .into();
        }
        digest
    }

    /// The hashed owner name of `lower_wire` in the zone at `apex`: its
    /// hash in base32hex, lower-cased, as a label above the apex; None
    /// when that would pass 255 octets (no NSEC3 can have it).
    pub(crate) fn hashed_owner(&self, lower_wire: &[u8], apex: &[u8]) -> Option<HashedOwner> {
        HashedOwner::new(&self.hash(lower_wire), apex)
    }
}

/// A hashed owner name, in wire form, without allocating.
pub(crate) struct HashedOwner {
    buf: [u8; MAX_NAME_LEN],
    len: usize,
}

impl HashedOwner {
    pub(crate) fn new(digest: &[u8; HASH_LEN], apex: &[u8]) -> Option<HashedOwner> {
        let len = 1 + LABEL_LEN + apex.len();
        if len > MAX_NAME_LEN {
            return None;
        }
        let mut buf = [0u8; MAX_NAME_LEN];
        buf[0] = LABEL_LEN as u8;
        base32hex_lower(digest, &mut buf[1..1 + LABEL_LEN]);
        buf[1 + LABEL_LEN..len].copy_from_slice(apex);
        Some(HashedOwner { buf, len })
    }

    pub(crate) fn as_wire(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// A digest in lower-case base32hex (RFC 4648 7), as hashed owner names
/// are stored (lower-cased keys).
pub(crate) fn base32hex_lower(digest: &[u8; HASH_LEN], out: &mut [u8]) {
    const ALPHABET: &[u8; 32] = b"0123456789abcdefghijklmnopqrstuv";
    // 20 octets are 160 bits: exactly 32 groups of 5, no padding.
    for (group, chunk) in digest.chunks(5).enumerate() {
        let bits = chunk.iter().fold(0u64, |acc, &b| acc << 8 | u64::from(b));
        for k in 0..8 {
            out[group * 8 + k] = ALPHABET[(bits >> (35 - 5 * k) & 0x1F) as usize];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_proto::Name;

    /// RFC 5155 Appendix A: salt aabbccdd, 12 iterations.
    fn rfc5155() -> Nsec3Params {
        Nsec3Params::from_nsec3param(&[1, 0, 0, 12, 4, 0xAA, 0xBB, 0xCC, 0xDD]).unwrap()
    }

    fn label(params: &Nsec3Params, name: &str) -> String {
        let apex = Name::parse("example.").unwrap();
        let owner = params
            .hashed_owner(Name::parse(name).unwrap().as_wire(), apex.as_wire())
            .unwrap();
        String::from_utf8(owner.as_wire()[1..1 + LABEL_LEN].to_vec()).unwrap()
    }

    #[test]
    fn hashes_match_rfc5155_appendix_a() {
        let p = rfc5155();
        for (name, hash) in [
            ("example.", "0p9mhaveqvm6t7vbl5lop2u3t2rp3tom"),
            ("a.example.", "35mthgpgcu1qg68fab165klnsnk3dpvl"),
            ("ai.example.", "gjeqe526plbf1g8mklp59enfd789njgi"),
            ("ns1.example.", "2t7b4g4vsa5smi47k61mv5bv1a22bojr"),
            ("ns2.example.", "q04jkcevqvmu85r014c7dkba38o0ji5r"),
            ("w.example.", "k8udemvp1j2f7eg6jebps17vp3n8i58h"),
            ("*.w.example.", "r53bq7cc2uvmubfu5ocmm6pers9tk9en"),
            ("x.w.example.", "b4um86eghhds6nea196smvmlo4ors995"),
            ("y.w.example.", "ji6neoaepv8b5o6k4ev33abha8ht9fgc"),
            ("x.y.w.example.", "2vptu5timamqttgl4luu9kg21e0aor3s"),
            ("xx.example.", "t644ebqk9bibcna874givr6joj62mlhv"),
        ] {
            assert_eq!(label(&p, name), hash, "{name}");
        }
    }

    #[test]
    fn parameters_are_read_and_matched() {
        let p = rfc5155();
        assert_eq!(
            (p.iterations, &p.salt[..]),
            (12, &[0xAA, 0xBB, 0xCC, 0xDD][..])
        );
        let nsec3 = [1, 1, 0, 12, 4, 0xAA, 0xBB, 0xCC, 0xDD, 20];
        assert!(p.made(&nsec3), "the opt-out flag does not matter");
        assert!(!p.made(&[1, 0, 0, 11, 4, 0xAA, 0xBB, 0xCC, 0xDD, 20]));
        assert!(!p.made(&[1, 0, 0, 12, 0, 20]));
        assert!(!p.made(&[1, 0]));
        let no_salt = Nsec3Params::from_nsec3param(&[1, 0, 0, 0, 0]).unwrap();
        assert_eq!((no_salt.iterations, no_salt.salt.len()), (0, 0));
        assert!(
            Nsec3Params::from_nsec3param(&[2, 0, 0, 0, 0]).is_none(),
            "not SHA-1"
        );
        assert!(
            Nsec3Params::from_nsec3param(&[1, 0, 0, 0, 3, 1]).is_none(),
            "salt cut short"
        );
        assert!(Nsec3Params::from_nsec3param(&[1, 0]).is_none());
    }

    #[test]
    fn a_hashed_owner_too_long_for_a_name_is_none() {
        let apex = [
            &[63u8][..],
            &[b'a'; 63],
            &[63],
            &[b'b'; 63],
            &[63],
            &[b'c'; 63],
            &[30],
            &[b'd'; 30],
            &[0],
        ]
        .concat();
        assert!(rfc5155().hashed_owner(&apex, &apex).is_none());
    }
}
