//! Keys of a zone signed by BIND or Knot, read into one form, so that the
//! zone moves to Heron with its keys and no rollover.
//!
//! * BIND: `K<zone>+<alg>+<tag>.key` and `.private` (private-key format
//!   v1.2/v1.3), with the timing metadata Created, Publish, Activate,
//!   Inactive and Delete ([`bind`]); with dnssec-policy, the `.state` file
//!   that holds the key's roles and RFC 7583 states ([`bind_state`]).
//! * Knot: the PKCS#8 PEM files of the KASP database's `keys/` folder, with
//!   the metadata `keymgr ZONE list -j` prints ([`knot`]).
//!
//! Every imported key is checked: its private key loads in ring and its
//! public key is the one the private key makes, so a key that would sign
//! what no one can verify is refused here rather than at the first
//! signature.

pub mod bind;
pub mod bind_state;
mod der;
pub mod knot;
#[cfg(test)]
mod tests;

use ring::signature::{self, KeyPair};

use crate::dnskey::{self, FLAG_SEP};
use crate::rollover::{self, Goal, Record, Role, State, UnixTime};

/// The algorithms Heron imports.
pub const RSASHA256: u8 = 8;
pub const ECDSAP256SHA256: u8 = 13;
pub const ED25519: u8 = 15;

/// The lifetime events another signer recorded for a key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyTimes {
    pub created: Option<UnixTime>,
    pub publish: Option<UnixTime>,
    pub activate: Option<UnixTime>,
    /// Knot's `ready`: a KSK or CSK published and signing (the DNSKEY
    /// RRset; a CSK the zone too), its DS not yet confirmed at the
    /// parent (Knot makes it active once it is).
    pub ready: Option<UnixTime>,
    pub inactive: Option<UnixTime>,
    pub delete: Option<UnixTime>,
}

/// A key read from another signer's files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportedKey {
    pub algorithm: u8,
    pub flags: u16,
    /// The public key as DNSKEY RDATA carries it.
    pub public_key: Vec<u8>,
    /// The private key as PKCS#8 DER, as ring loads it.
    pub pkcs8: Vec<u8>,
    pub times: KeyTimes,
}

/// Why a key could not be imported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportError(pub String);

impl std::fmt::Display for ImportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ImportError {}

pub(crate) fn error<T>(why: impl Into<String>) -> Result<T, ImportError> {
    Err(ImportError(why.into()))
}

impl ImportedKey {
    /// The key's DNSKEY RDATA.
    pub fn dnskey_rdata(&self) -> Vec<u8> {
        dnskey::rdata(self.flags, self.algorithm, &self.public_key)
    }

    pub fn tag(&self) -> u16 {
        dnskey::key_tag(&self.dnskey_rdata())
    }

    /// A key with the SEP flag is a KSK unless the caller knows it signs
    /// the zone too (a CSK).
    pub fn role(&self, signs_zone: bool) -> Role {
        match (self.flags & FLAG_SEP != 0, signs_zone) {
            (false, _) => Role::Zsk,
            (true, false) => Role::Ksk,
            (true, true) => Role::Csk,
        }
    }

    /// The key as the rollover machine keeps it. A key the other signer
    /// published and activated before `now` (and did not retire) is taken
    /// as in place: DNSKEY, signatures and DS everywhere, which is what a
    /// zone that validates before the move has. A KSK or CSK Knot holds
    /// `ready` is published and signing, its DS rumoured (the parent not
    /// yet known to have it); the others start hidden.
    pub fn to_rollover_key(&self, id: String, role: Role, now: UnixTime) -> rollover::Key {
        let created = self.times.created.unwrap_or(now).min(now);
        let mut key = rollover::Key::new(id, self.tag(), self.algorithm, role, created);
        let reached = |at: Option<UnixTime>| at.is_some_and(|at| at <= now);
        let in_place = reached(self.times.publish)
            && reached(self.times.activate)
            && !reached(self.times.inactive);
        if in_place {
            let in_role = [true, role.signs_zone(), role.signs_keys()];
            let records = [&mut key.dnskey, &mut key.zone_rrsig, &mut key.ds];
            for (record, _) in records.into_iter().zip(in_role).filter(|(_, has)| *has) {
                record.state = State::Omnipresent;
                record.since = now;
            }
            key.published = self.times.publish;
            // Its lifetime counts from when the old signer made it active,
            // so that rollovers keep that signer's pace.
            key.active = Some(self.times.activate.unwrap_or(now).min(now));
        } else if role.signs_keys()
            && reached(self.times.publish)
            && reached(self.times.ready)
            && !reached(self.times.inactive)
        {
            // Knot's `ready`: published and signing, waiting for the DS.
            // Heron goes on waiting for it, publishing its CDS/CDNSKEY.
            let at = |state| Record { state, since: now };
            key.dnskey = at(State::Omnipresent);
            if role.signs_zone() {
                key.zone_rrsig = at(State::Omnipresent);
            }
            key.ds = at(State::Rumoured);
            key.published = self.times.publish;
        } else if reached(self.times.inactive) {
            // The old signer retired it: it stays retired. Until its
            // delete time its DNSKEY is still published (caches may hold
            // signatures it made until it retired, which Knot swaps all
            // at once then): the DNSKEY goes once they are gone.
            key.goal = Goal::Hidden;
            key.retired = self.times.inactive;
            if reached(self.times.publish) && !reached(self.times.delete) {
                let inactive = self.times.inactive.unwrap_or(now);
                key.dnskey = Record {
                    state: State::Omnipresent,
                    since: self.times.publish.unwrap_or(now),
                };
                if role.signs_zone() {
                    key.zone_rrsig = Record {
                        state: State::Unretentive,
                        since: inactive,
                    };
                }
                key.published = self.times.publish;
            } else {
                key.removed = Some(now);
            }
        }
        key
    }

    /// Refuses a key whose private half does not load in ring or does not
    /// make its public half.
    fn check_pair(&self) -> Result<(), ImportError> {
        let derived = public_key_of(self.algorithm, &self.pkcs8)?;
        if derived != self.public_key {
            return error("the private key does not match the public key");
        }
        Ok(())
    }
}

/// The DNSKEY-form public key of a PKCS#8 private key, which ring must load.
pub fn public_key_of(algorithm: u8, pkcs8: &[u8]) -> Result<Vec<u8>, ImportError> {
    let refused = |e: ring::error::KeyRejected| {
        match e.to_string().as_str() {
        // ring checks the public key a PKCS#8 carries against the private one.
        "InconsistentComponents" => {
            ImportError("the private key does not match the public key".into())
        }
        "TooSmall" => ImportError(
            "the private key is refused: too small (Heron signs with RSA keys of 2,048 bits or more; \
             roll this key to one of 2,048 bits at the old signer first: a ZSK rollover leaves the \
             parent's DS as it is)"
                .into(),
        ),
        "TooLarge" => ImportError(
            "the private key is refused: too large (RSA keys of at most 8,192 bits)".into(),
        ),
        "InvalidEncoding" | "InvalidComponent" => {
            ImportError(format!("the private key is refused: not a valid key ({e})"))
        }
        _ => ImportError(format!("the private key is refused: {e}")),
    }
    };
    match algorithm {
        ECDSAP256SHA256 => {
            let rng = ring::rand::SystemRandom::new();
            let pair = signature::EcdsaKeyPair::from_pkcs8(
                &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                pkcs8,
                &rng,
            )
            .map_err(refused)?;
            // Uncompressed point 04 | x | y; DNSKEY carries x | y (RFC 6605 4).
            Ok(pair.public_key().as_ref()[1..].to_vec())
        }
        ED25519 => {
            let pair = signature::Ed25519KeyPair::from_pkcs8(pkcs8).map_err(refused)?;
            Ok(pair.public_key().as_ref().to_vec())
        }
        RSASHA256 => {
            let pair = signature::RsaKeyPair::from_pkcs8(pkcs8).map_err(refused)?;
            rsa_signs(&pair)?;
            rsa_dnskey_form(pair.public_key().as_ref())
        }
        other => error(format!(
            "algorithm {other} is not one Heron signs with (8, 13, 15)"
        )),
    }
}

/// Refuses an RSA key that loads but cannot sign: ring checks each
/// signature it makes, and one CRT number damaged (a character of a
/// `.private` file's `Exponent1`) passes the load and fails every
/// signature, which would stop the zone's signing after the import.
fn rsa_signs(pair: &signature::RsaKeyPair) -> Result<(), ImportError> {
    let rng = ring::rand::SystemRandom::new();
    let mut probe = vec![0; pair.public().modulus_len()];
    pair.sign(&signature::RSA_PKCS1_SHA256, &rng, b"probe", &mut probe)
        .map_err(|_| {
            ImportError(
                "the private key is refused: its numbers do not agree (it cannot sign)".into(),
            )
        })
}

/// RFC 3110 2: exponent length (one octet, or zero and two), exponent,
/// modulus; from an RSAPublicKey DER.
fn rsa_dnskey_form(der: &[u8]) -> Result<Vec<u8>, ImportError> {
    let bad = || ImportError("malformed RSA public key".into());
    let mut outer = der::Reader::new(der);
    let mut numbers = der::Reader::new(outer.expect(der::SEQUENCE).ok_or_else(bad)?);
    let strip = |n: &[u8]| {
        n.iter()
            .skip_while(|&&b| b == 0)
            .copied()
            .collect::<Vec<u8>>()
    };
    let modulus = strip(numbers.expect(der::INTEGER).ok_or_else(bad)?);
    let exponent = strip(numbers.expect(der::INTEGER).ok_or_else(bad)?);
    Ok(rsa_public_key(&exponent, &modulus))
}

/// The RFC 3110 form of an RSA public key.
pub(crate) fn rsa_public_key(exponent: &[u8], modulus: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(3 + exponent.len() + modulus.len());
    match u8::try_from(exponent.len()) {
        Ok(len) => out.push(len),
        Err(_) => {
            out.push(0);
            out.extend_from_slice(&(exponent.len() as u16).to_be_bytes());
        }
    }
    out.extend_from_slice(exponent);
    out.extend_from_slice(modulus);
    out
}

/// A time `YYYYMMDDHHMMSS` (UTC), as BIND's key files write it.
pub fn parse_bind_time(text: &str) -> Option<UnixTime> {
    if text.len() != 14 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let field = |range: std::ops::Range<usize>| text[range].parse::<u64>().ok();
    let (year, month, day) = (field(0..4)?, field(4..6)?, field(6..8)?);
    let (hour, minute, second) = (field(8..10)?, field(10..12)?, field(12..14)?);
    let valid = (1970..=9999).contains(&year)
        && (1..=12).contains(&month)
        && (1..=31).contains(&day)
        && hour < 24
        && minute < 60
        && second < 61;
    valid.then(|| days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar
/// (Howard Hinnant's algorithm), for years from 1970.
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year / 400;
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}
