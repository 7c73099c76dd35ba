//! Heron's own key file: a few `name: value` lines, the private key as
//! base64 PKCS#8. The server writes one per key in the key directory
//! (owner-only); reading and writing the text is here, I/O-free.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use super::{Algorithm, KeyError, SigningKey};
use crate::dnskey::{FLAG_SEP, FLAG_ZONE, key_tag};

/// What a key signs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyRole {
    /// Signs the DNSKEY RRset only; its DS is at the parent.
    Ksk,
    /// Signs every other RRset.
    Zsk,
    /// Both (a combined signing key).
    Csk,
}

impl KeyRole {
    pub fn name(self) -> &'static str {
        match self {
            KeyRole::Ksk => "ksk",
            KeyRole::Zsk => "zsk",
            KeyRole::Csk => "csk",
        }
    }

    fn from_name(name: &str) -> Option<KeyRole> {
        match name {
            "ksk" => Some(KeyRole::Ksk),
            "zsk" => Some(KeyRole::Zsk),
            "csk" => Some(KeyRole::Csk),
            _ => None,
        }
    }

    /// DNSKEY flags: SEP on keys whose DS the parent holds.
    pub fn flags(self) -> u16 {
        match self {
            KeyRole::Zsk => FLAG_ZONE,
            KeyRole::Ksk | KeyRole::Csk => FLAG_ZONE | FLAG_SEP,
        }
    }

    pub fn signs_dnskey(self) -> bool {
        self != KeyRole::Zsk
    }

    pub fn signs_zone(self) -> bool {
        self != KeyRole::Ksk
    }
}

/// The zone's part of its key files' names (`K{this}+013+12345.csk.heron-key`):
/// its name without the final dot (`.` for the root), escaped and
/// shortened as [`crate::file_names`] says.
pub fn key_file_zone(zone: &str) -> String {
    let zone = zone.trim_end_matches('.');
    if zone.is_empty() {
        return ".".to_string();
    }
    crate::file_names::zone_in_file_name(zone, "K", "+013+12345.csk.heron-key".len())
}

/// One key as its file holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyFile {
    /// The zone, in presentation form with the final dot.
    pub zone: String,
    pub role: KeyRole,
    pub algorithm: Algorithm,
    /// Unix seconds.
    pub created: u64,
    pub pkcs8: Vec<u8>,
}

/// Longest key file read: far more than any key's base64.
pub const MAX_KEY_FILE: usize = 16 * 1024;

impl KeyFile {
    /// A new key for `zone`.
    pub fn generate(
        zone: &str,
        role: KeyRole,
        algorithm: Algorithm,
        now: u64,
    ) -> Result<(KeyFile, SigningKey), KeyError> {
        let (key, pkcs8) = SigningKey::generate(algorithm)?;
        let file = KeyFile {
            zone: zone.to_string(),
            role,
            algorithm,
            created: now,
            pkcs8,
        };
        Ok((file, key))
    }

    /// The key the file holds.
    pub fn signing_key(&self) -> Result<SigningKey, KeyError> {
        SigningKey::from_pkcs8(self.algorithm, &self.pkcs8)
    }

    /// The file's name in the key directory: zone, algorithm, key tag.
    pub fn file_name(&self, key: &SigningKey) -> String {
        let tag = key_tag(&key.dnskey_rdata(self.role.flags()));
        format!(
            "K{}+{:03}+{tag:05}.{}.heron-key",
            key_file_zone(&self.zone),
            self.algorithm.number(),
            self.role.name()
        )
    }

    pub fn to_text(&self) -> String {
        format!(
            "; Heron DNSSEC key. Keep it secret.\nzone: {}\nrole: {}\nalgorithm: {}\ncreated: {}\nprivate-key-pkcs8: {}\n",
            self.zone,
            self.role.name(),
            self.algorithm.number(),
            self.created,
            STANDARD.encode(&self.pkcs8)
        )
    }

    pub fn from_text(text: &str) -> Result<KeyFile, KeyError> {
        if text.len() > MAX_KEY_FILE {
            return Err(KeyError(format!("longer than {MAX_KEY_FILE} octets")));
        }
        let field = |name: &str| -> Result<&str, KeyError> {
            text.lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.trim() == name)
                .map(|(_, v)| v.trim())
                .ok_or_else(|| KeyError(format!("no '{name}:' line")))
        };
        let role = field("role")?;
        let algorithm = field("algorithm")?;
        let file = KeyFile {
            zone: field("zone")?.to_string(),
            role: KeyRole::from_name(role).ok_or_else(|| KeyError(format!("bad role '{role}'")))?,
            algorithm: algorithm
                .parse()
                .ok()
                .and_then(Algorithm::from_number)
                .ok_or_else(|| KeyError(format!("bad algorithm '{algorithm}'")))?,
            created: field("created")?
                .parse()
                .map_err(|_| KeyError("bad 'created:' time".into()))?,
            pkcs8: STANDARD
                .decode(field("private-key-pkcs8")?)
                .map_err(|_| KeyError("private key is not base64".into()))?,
        };
        Ok(file)
    }
}
