//! DS, CDS and CDNSKEY RDATA for a zone's keys (RFC 4034 5, RFC 4509,
//! RFC 6605, RFC 7344), and the delete forms of RFC 8078.

use heron_proto::name::Name;
use ring::digest;

use crate::dnskey::key_tag;

/// The DS digest types Heron makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DigestType {
    /// SHA-256, the one every parent accepts (RFC 4509).
    Sha256,
    /// SHA-384 (RFC 6605).
    Sha384,
}

impl DigestType {
    /// The digest type number of the DS record.
    pub fn number(self) -> u8 {
        match self {
            DigestType::Sha256 => 2,
            DigestType::Sha384 => 4,
        }
    }

    /// The digest type of a number, if Heron makes it.
    pub fn from_number(number: u8) -> Option<DigestType> {
        match number {
            2 => Some(DigestType::Sha256),
            4 => Some(DigestType::Sha384),
            _ => None,
        }
    }

    fn algorithm(self) -> &'static digest::Algorithm {
        match self {
            DigestType::Sha256 => &digest::SHA256,
            DigestType::Sha384 => &digest::SHA384,
        }
    }
}

/// The digest of a DNSKEY: hash(canonical owner name | DNSKEY RDATA)
/// (RFC 4034 5.1.4).
pub fn digest(owner: &Name, dnskey_rdata: &[u8], digest_type: DigestType) -> Vec<u8> {
    let mut context = digest::Context::new(digest_type.algorithm());
    context.update(owner.to_lowercase().as_wire());
    context.update(dnskey_rdata);
    context.finish().as_ref().to_vec()
}

/// DS RDATA (also CDS RDATA, RFC 7344 3.1): key tag, algorithm, digest
/// type, digest. `None` when the RDATA is too short to be a DNSKEY.
pub fn ds_rdata(owner: &Name, dnskey_rdata: &[u8], digest_type: DigestType) -> Option<Vec<u8>> {
    let algorithm = *dnskey_rdata.get(3)?;
    let mut out = Vec::with_capacity(52);
    out.extend_from_slice(&key_tag(dnskey_rdata).to_be_bytes());
    out.push(algorithm);
    out.push(digest_type.number());
    out.extend_from_slice(&digest(owner, dnskey_rdata, digest_type));
    Some(out)
}

/// CDNSKEY RDATA is the DNSKEY's own (RFC 7344 3.2).
pub fn cdnskey_rdata(dnskey_rdata: &[u8]) -> Vec<u8> {
    dnskey_rdata.to_vec()
}

/// CDS RDATA asking the parent to remove every DS: `0 0 0 00` (RFC 8078 4).
pub const CDS_DELETE: [u8; 5] = [0, 0, 0, 0, 0];

/// CDNSKEY RDATA asking the parent to remove every DS: `0 3 0 AA==` (RFC 8078 4).
pub const CDNSKEY_DELETE: [u8; 5] = [0, 0, 3, 0, 0];

/// The keys (by tag and algorithm) whose DS every parent server answered
/// with: `answers` holds each server's DS RDATA for `owner`, `dnskeys` the
/// zone's DNSKEY RDATA. A DS counts only if its digest is the key's (a tag
/// alone may collide); no answer at all sees nothing.
pub fn seen_at_every_server(
    owner: &Name,
    dnskeys: &[Vec<u8>],
    answers: &[Vec<Vec<u8>>],
) -> Vec<(u16, u8)> {
    let matches = |ds: &[u8], dnskey: &[u8]| {
        let digest_type = ds.get(3).copied().and_then(DigestType::from_number);
        digest_type.is_some_and(|t| ds_rdata(owner, dnskey, t).as_deref() == Some(ds))
    };
    if answers.is_empty() {
        return Vec::new();
    }
    dnskeys
        .iter()
        .filter(|dnskey| dnskey.len() > 4)
        .filter(|dnskey| {
            answers
                .iter()
                .all(|server| server.iter().any(|ds| matches(ds, dnskey)))
        })
        .map(|dnskey| (key_tag(dnskey), dnskey[3]))
        .collect()
}

/// The DS records of the parent's `answers` whose key tag and algorithm
/// name one of `dnskeys` but whose digest is of none (a digest mistyped
/// at the registrar): the key's DS is there in name only, and a
/// validator finds the zone bogus if it is the only one. Each once.
pub fn mismatched(owner: &Name, dnskeys: &[Vec<u8>], answers: &[Vec<Vec<u8>>]) -> Vec<Vec<u8>> {
    let names_key = |ds: &[u8], dnskey: &[u8]| {
        ds.len() > 4
            && dnskey.len() > 4
            && u16::from_be_bytes([ds[0], ds[1]]) == key_tag(dnskey)
            && ds[2] == dnskey[3]
    };
    let digest_of = |ds: &[u8], dnskey: &[u8]| {
        let digest_type = ds.get(3).copied().and_then(DigestType::from_number);
        digest_type.is_none_or(|t| ds_rdata(owner, dnskey, t).as_deref() == Some(ds))
    };
    let mut found: Vec<Vec<u8>> = Vec::new();
    for ds in answers.iter().flatten() {
        let named = dnskeys.iter().any(|k| names_key(ds, k));
        let matching = dnskeys.iter().any(|k| names_key(ds, k) && digest_of(ds, k));
        if named && !matching && !found.contains(ds) {
            found.push(ds.clone());
        }
    }
    found
}

/// DS RDATA in presentation form, `TAG ALG TYPE HEX` (upper-case hex, as
/// BIND and Knot print it); `None` for RDATA shorter than a DS.
pub fn ds_text(ds: &[u8]) -> Option<String> {
    if ds.len() < 5 {
        return None;
    }
    let tag = u16::from_be_bytes([ds[0], ds[1]]);
    let hex: String = ds[4..].iter().map(|b| format!("{b:02X}")).collect();
    Some(format!("{tag} {} {} {hex}", ds[2], ds[3]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dnskey::rdata;
    use base64::Engine;

    fn b64(text: &str) -> Vec<u8> {
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .expect("base64")
    }

    fn name(text: &str) -> Name {
        Name::parse(text).expect("a name")
    }

    /// RFC 4509 2.3: the RSA/SHA-1 key of RFC 4034 5.4 with a SHA-256 DS.
    #[test]
    fn rfc4509_sha256_example() {
        let key = b64(
            "AQOeiiR0GOMYkDshWoSKz9XzfwJr1AYtsmx3TGkJaNXVbfi/2pHm822aJ5iI9BMzNXxeYCmZ\
             DRD99WYwYqUSdjMmmAphXdvxegXd/M5+X7OrzKBaMbCVdFLUUh6DhweJBjEVv5f2wwjM9Xzc\
             nOf+EPbtG9DMBmADjFDc2w/rljwvFw==",
        );
        let dnskey = rdata(256, 5, &key);
        let ds = ds_rdata(&name("dskey.example.com."), &dnskey, DigestType::Sha256).unwrap();
        assert_eq!(
            ds_text(&ds).unwrap(),
            "60485 5 2 D4B7D520E7BB5F0F67674A0CCEB1E3E0614B93C4F9E99B8383F6A1E4469DA50A"
        );
    }

    /// RFC 6605 6.1: an ECDSA P-256 KSK and its SHA-256 DS; the owner's
    /// case does not change the digest.
    #[test]
    fn rfc6605_p256_example() {
        let key = b64(
            "GojIhhXUN/u4v54ZQqGSnyhWJwaubCvTmeexv7bR6edbkrSqQpF64cYbcB7wNcP+e+MAnLr+Wi9xMWyQLc8NAA==",
        );
        let dnskey = rdata(257, 13, &key);
        for owner in ["example.net.", "Example.NET."] {
            let ds = ds_rdata(&name(owner), &dnskey, DigestType::Sha256).unwrap();
            assert_eq!(
                ds_text(&ds).unwrap(),
                "55648 13 2 B4C8C1FE2E7477127B27115656AD6256F424625BF5C1E2770CE6D6E37DF61D17"
            );
        }
    }

    /// RFC 6605 6.2: an ECDSA P-384 KSK and its SHA-384 DS.
    #[test]
    fn rfc6605_sha384_example() {
        let key = b64(
            "xKYaNhWdGOfJ+nPrL8/arkwf2EY3MDJ+SErKivBVSum1w/egsXvSADtNJhyem5RCOpgQ6K8X1DRSEkrbYQ+OB+v8\
             /uX45NBwY8rp65F6Glur8I/mlVNgF6W/qTI37m40",
        );
        let dnskey = rdata(257, 14, &key);
        let ds = ds_rdata(&name("example.net."), &dnskey, DigestType::Sha384).unwrap();
        assert_eq!(
            ds_text(&ds).unwrap(),
            "10771 14 4 72D7B62976CE06438E9C0BF319013CF801F09ECC84B8D7E9495F27E305C6A9B0563A9B5F4D288405C3008A946DF983D6"
        );
    }

    #[test]
    fn cds_and_cdnskey_and_their_delete_forms() {
        let dnskey = rdata(257, 13, &[7; 64]);
        assert_eq!(cdnskey_rdata(&dnskey), dnskey);
        assert_eq!(ds_text(&CDS_DELETE).unwrap(), "0 0 0 00");
        // flags 0, protocol 3, algorithm 0, key "AA==" (one zero octet).
        assert_eq!(CDNSKEY_DELETE[..4], rdata(0, 0, &[0])[..4]);
        assert_eq!(CDNSKEY_DELETE.to_vec(), rdata(0, 0, &[0]));
    }

    #[test]
    fn a_ds_is_seen_when_every_parent_server_has_it() {
        let owner = name("example.");
        let old = rdata(257, 13, &[1; 64]);
        let new = rdata(257, 13, &[2; 64]);
        let ds = |key: &[u8], t| ds_rdata(&owner, key, t).unwrap();
        let keys = vec![old.clone(), new.clone()];
        let tag = |key: &[u8]| (key_tag(key), 13);
        // One server still lags: only the old DS is seen everywhere.
        let answers = vec![
            vec![ds(&old, DigestType::Sha256), ds(&new, DigestType::Sha256)],
            vec![ds(&old, DigestType::Sha384)],
        ];
        assert_eq!(seen_at_every_server(&owner, &keys, &answers), [tag(&old)]);
        let answers = vec![
            vec![ds(&new, DigestType::Sha256)],
            vec![ds(&new, DigestType::Sha384)],
        ];
        assert_eq!(seen_at_every_server(&owner, &keys, &answers), [tag(&new)]);
        // A DS with the right tag but another digest is not the key's.
        let mut forged = ds(&new, DigestType::Sha256);
        *forged.last_mut().unwrap() ^= 1;
        assert!(seen_at_every_server(&owner, &keys, &[vec![forged]]).is_empty());
        assert!(seen_at_every_server(&owner, &keys, &[]).is_empty());
        assert!(seen_at_every_server(&owner, &[vec![1, 2]], &[vec![vec![]]]).is_empty());
    }

    #[test]
    fn short_rdata_is_refused_not_a_panic() {
        let owner = name("example.");
        for len in 0..4 {
            assert_eq!(ds_rdata(&owner, &vec![1; len], DigestType::Sha256), None);
        }
        assert!(ds_rdata(&owner, &[1; 4], DigestType::Sha256).is_some());
        for len in 0..5 {
            assert_eq!(ds_text(&vec![0; len]), None);
        }
        assert_eq!(DigestType::from_number(1), None);
        assert_eq!(DigestType::from_number(4), Some(DigestType::Sha384));
    }

    /// A DS whose tag and algorithm are a key's but whose digest is not
    /// (a registrar typo) is found; the right one, one of another key, and
    /// one of an unknown digest type (that cannot be checked) are not.
    #[test]
    fn a_ds_naming_a_key_with_another_digest_is_found() {
        let owner = Name::parse("m.test").unwrap();
        let (key, _) =
            crate::keys::SigningKey::generate(crate::keys::Algorithm::EcdsaP256Sha256).unwrap();
        let dnskey = key.dnskey_rdata(257);
        let right = ds_rdata(&owner, &dnskey, DigestType::Sha256).unwrap();
        let mut wrong = right.clone();
        *wrong.last_mut().unwrap() ^= 1;
        let mut other_key = right.clone();
        other_key[0] ^= 1;
        let mut unknown_type = right.clone();
        unknown_type[3] = 200;
        let answers = vec![
            vec![right.clone(), wrong.clone(), other_key, unknown_type],
            vec![wrong.clone()],
        ];
        assert_eq!(
            mismatched(&owner, std::slice::from_ref(&dnskey), &answers),
            [wrong]
        );
        assert!(mismatched(&owner, &[dnskey], &[vec![right]]).is_empty());
    }
}
