//! Knot's keys: a PKCS#8 PEM file per key in the KASP database's `keys/`
//! folder, named by the key's id, and their metadata (role, algorithm,
//! tag, times) as `keymgr ZONE list -j` prints it (Knot keeps it in LMDB,
//! which Heron does not read).

use std::path::Path;

use base64::Engine;
use serde::Deserialize;

use super::{
    ECDSAP256SHA256, ED25519, ImportError, ImportedKey, KeyTimes, RSASHA256, der, error,
    public_key_of,
};
use crate::dnskey::{FLAG_SEP, FLAG_ZONE};

/// One key of `keymgr ZONE list -j`; times are UNIX seconds, 0 for unset.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct KnotKeyMeta {
    pub zone: String,
    pub id: String,
    pub ksk: bool,
    pub zsk: bool,
    pub tag: u16,
    pub algorithm: u8,
    #[serde(default)]
    pub created: u64,
    #[serde(default)]
    pub publish: u64,
    #[serde(default)]
    pub ready: u64,
    #[serde(default)]
    pub active: u64,
    #[serde(default)]
    pub retire: u64,
    #[serde(default)]
    pub remove: u64,
    /// Imported into Knot without its private key (`keymgr import-pub`).
    #[serde(default)]
    pub public_only: bool,
}

/// The keys `keymgr ZONE list -j` printed.
pub fn parse_list(json: &str) -> Result<Vec<KnotKeyMeta>, ImportError> {
    serde_json::from_str(json).map_err(|e| ImportError(format!("not keymgr's JSON key list: {e}")))
}

/// The DER inside a `PRIVATE KEY` PEM block.
pub fn pem_der(text: &str) -> Result<Vec<u8>, ImportError> {
    let begin = "-----BEGIN PRIVATE KEY-----";
    let end = "-----END PRIVATE KEY-----";
    let Some((_, rest)) = text.split_once(begin) else {
        return error("no `BEGIN PRIVATE KEY` line: not a PKCS#8 PEM file");
    };
    let Some((body, _)) = rest.split_once(end) else {
        return error("no `END PRIVATE KEY` line");
    };
    let body: String = body.split_whitespace().collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .map_err(|e| ImportError(format!("the PEM body is not base64: {e}")))
}

/// The algorithm a PKCS#8 key is of, and the PKCS#8 ring loads for it
/// (Ed25519 rewritten from Knot's v1 form to v2, which carries the public
/// key ring asks for).
fn ring_pkcs8(der_bytes: &[u8], rsa_algorithm: u8) -> Result<(u8, Vec<u8>), ImportError> {
    let Some((oid, parameter, private)) = der::read_pkcs8(der_bytes) else {
        return error("malformed PKCS#8 private key");
    };
    match (oid, parameter) {
        (der::OID_EC_PUBLIC_KEY, Some(der::OID_P256)) => {
            Ok((ECDSAP256SHA256, p256_pkcs8(private)?))
        }
        (der::OID_ED25519, _) => {
            let seed = der::Reader::new(private)
                .expect(der::OCTET_STRING)
                .filter(|seed| seed.len() == 32)
                .ok_or_else(|| ImportError("malformed Ed25519 private key".into()))?;
            let pair = ring::signature::Ed25519KeyPair::from_seed_unchecked(seed)
                .map_err(|e| ImportError(format!("the Ed25519 key is refused: {e}")))?;
            let public = ring::signature::KeyPair::public_key(&pair)
                .as_ref()
                .to_vec();
            Ok((ED25519, der::pkcs8_ed25519(seed, &public)))
        }
        (der::OID_RSA, _) if rsa_algorithm == RSASHA256 => Ok((RSASHA256, der_bytes.to_vec())),
        _ => error("a private key of an algorithm Heron does not import (8, 13, 15)"),
    }
}

/// GnuTLS, under Knot, writes a P-256 scalar whose top bit is set in 33
/// octets (a leading zero first), where ring wants exactly 32: the key is
/// rebuilt from the scalar and the public point of its ECPrivateKey.
fn p256_pkcs8(ec_private_key: &[u8]) -> Result<Vec<u8>, ImportError> {
    let bad = || ImportError("malformed ECDSA private key".into());
    let mut outer = der::Reader::new(ec_private_key);
    let mut fields = der::Reader::new(outer.expect(der::SEQUENCE).ok_or_else(bad)?);
    fields.expect(der::INTEGER).ok_or_else(bad)?;
    let scalar = fields.expect(der::OCTET_STRING).ok_or_else(bad)?;
    let digits: Vec<u8> = scalar.iter().copied().skip_while(|&b| b == 0).collect();
    if digits.len() > 32 {
        return Err(bad());
    }
    let mut fixed = vec![0; 32 - digits.len()];
    fixed.extend_from_slice(&digits);
    let mut public = None;
    while let Some((tag, contents)) = fields.item() {
        if tag == 0xa1 {
            public = der::Reader::new(contents).expect(der::BIT_STRING);
        }
    }
    match public {
        Some([0, point @ ..]) => Ok(der::pkcs8_p256(&fixed, point)),
        _ => error("the ECDSA private key lacks its public key"),
    }
}

fn time(seconds: u64) -> Option<u64> {
    (seconds != 0).then_some(seconds)
}

/// A key from its PEM text and its metadata; the algorithm and tag must
/// be those the metadata gives.
pub fn import(pem_text: &str, meta: &KnotKeyMeta) -> Result<ImportedKey, ImportError> {
    let (algorithm, pkcs8) = ring_pkcs8(&pem_der(pem_text)?, meta.algorithm)?;
    if algorithm != meta.algorithm {
        return error(format!(
            "key {}: the PEM holds an algorithm {algorithm} key, keymgr says {}",
            meta.id, meta.algorithm
        ));
    }
    let flags = FLAG_ZONE | if meta.ksk { FLAG_SEP } else { 0 };
    let key = ImportedKey {
        algorithm,
        flags,
        public_key: public_key_of(algorithm, &pkcs8)?,
        pkcs8,
        times: KeyTimes {
            created: time(meta.created),
            publish: time(meta.publish),
            activate: time(meta.active),
            ready: time(meta.ready),
            inactive: time(meta.retire),
            delete: time(meta.remove),
        },
    };
    if key.tag() != meta.tag {
        return error(format!(
            "key {}: its tag is {}, keymgr says {}",
            meta.id,
            key.tag(),
            meta.tag
        ));
    }
    Ok(key)
}

/// Every key `list_json` names, read from `kasp_dir/keys/ID.pem`.
pub fn read_kasp(
    kasp_dir: &Path,
    list_json: &str,
) -> Result<Vec<(KnotKeyMeta, ImportedKey)>, ImportError> {
    let mut keys = Vec::new();
    for meta in parse_list(list_json)? {
        let key = read_key(kasp_dir, &meta)?;
        keys.push((meta, key));
    }
    Ok(keys)
}

/// The key `meta` names, read from `kasp_dir/keys/ID.pem`.
pub fn read_key(kasp_dir: &Path, meta: &KnotKeyMeta) -> Result<ImportedKey, ImportError> {
    read_key_in(&kasp_dir.join("keys"), meta)
}

/// The key `meta` names, read from `pem_dir/ID.pem`: a keystore's folder
/// (`keystore: backend: pem, config: DIR`), KASPDIR/keys by default.
pub fn read_key_in(pem_dir: &Path, meta: &KnotKeyMeta) -> Result<ImportedKey, ImportError> {
    if meta.id.contains(['/', '.']) || meta.id.is_empty() {
        return error(format!("`{}` is not a key id", meta.id));
    }
    let path = pem_dir.join(format!("{}.pem", meta.id));
    let failed = |e: std::io::Error| ImportError(format!("{}: {e}", path.display()));
    let size = std::fs::metadata(&path).map_err(failed)?.len();
    if size > super::bind::MAX_FILE_SIZE {
        return error(format!("{}: too large for a key file", path.display()));
    }
    let text = std::fs::read_to_string(&path).map_err(failed)?;
    import(&text, meta).map_err(|e| {
        ImportError(format!(
            "{} (algorithm {}): {e}",
            path.display(),
            meta.algorithm
        ))
    })
}
