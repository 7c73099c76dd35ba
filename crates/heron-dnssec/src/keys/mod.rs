//! Signing keys: generated or loaded as PKCS#8 through `ring`, their
//! public half in DNSKEY form, and signatures in the form RRSIG carries.
//!
//! ECDSA P-256 (algorithm 13, RFC 6605) and Ed25519 (15, RFC 8080) are
//! generated here; RSA/SHA-256 (8, RFC 5702) is only loaded (PKCS#8 or
//! PKCS#1 DER, e.g. converted from a BIND key): `ring` cannot generate RSA
//! keys, and new zones have no reason to use them.

mod file;

pub use file::{KeyFile, KeyRole, MAX_KEY_FILE, key_file_zone};

use std::fmt;

use ring::rand::SystemRandom;
use ring::rsa::PublicKeyComponents;
use ring::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair, RSA_PKCS1_SHA256,
    RsaKeyPair,
};

use crate::dnskey;

/// The DNSSEC algorithms Heron signs with (IANA numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    RsaSha256,
    EcdsaP256Sha256,
    Ed25519,
}

impl Algorithm {
    pub fn number(self) -> u8 {
        match self {
            Algorithm::RsaSha256 => 8,
            Algorithm::EcdsaP256Sha256 => 13,
            Algorithm::Ed25519 => 15,
        }
    }

    pub fn from_number(n: u8) -> Option<Algorithm> {
        match n {
            8 => Some(Algorithm::RsaSha256),
            13 => Some(Algorithm::EcdsaP256Sha256),
            15 => Some(Algorithm::Ed25519),
            _ => None,
        }
    }

    /// The name a policy writes (BIND's and Knot's spelling, any case).
    pub fn from_name(name: &str) -> Option<Algorithm> {
        match name.to_ascii_lowercase().as_str() {
            "rsasha256" | "8" => Some(Algorithm::RsaSha256),
            "ecdsap256sha256" | "ecdsa-p256-sha256" | "13" => Some(Algorithm::EcdsaP256Sha256),
            "ed25519" | "15" => Some(Algorithm::Ed25519),
            _ => None,
        }
    }

    /// Whether Heron can make keys of this algorithm itself.
    pub fn can_generate(self) -> bool {
        self != Algorithm::RsaSha256
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Algorithm::RsaSha256 => "RSASHA256",
            Algorithm::EcdsaP256Sha256 => "ECDSAP256SHA256",
            Algorithm::Ed25519 => "ED25519",
        })
    }
}

/// Why a key could not be made, read or used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyError(pub String);

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for KeyError {}

fn rejected(what: &str, e: impl fmt::Display) -> KeyError {
    KeyError(format!("{what}: {e}"))
}

enum Pair {
    Ecdsa(EcdsaKeyPair),
    Ed25519(Ed25519KeyPair),
    Rsa(RsaKeyPair),
}

/// A private key that signs, with its public key in DNSKEY form.
pub struct SigningKey {
    algorithm: Algorithm,
    pair: Pair,
    /// The DNSKEY public key field (RFC 6605 4, RFC 8080 3, RFC 3110 2).
    public: Vec<u8>,
    rng: SystemRandom,
}

impl SigningKey {
    /// A new key, and its PKCS#8 document (what a key file stores).
    pub fn generate(algorithm: Algorithm) -> Result<(SigningKey, Vec<u8>), KeyError> {
        let rng = SystemRandom::new();
        let pkcs8 = match algorithm {
            Algorithm::EcdsaP256Sha256 => {
                EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            }
            Algorithm::Ed25519 => Ed25519KeyPair::generate_pkcs8(&rng),
            Algorithm::RsaSha256 => {
                return Err(KeyError(
                    "Heron does not generate RSA keys; import one or use ECDSAP256SHA256".into(),
                ));
            }
        }
        .map_err(|e| rejected("cannot generate a key", e))?;
        let pkcs8 = pkcs8.as_ref().to_vec();
        Ok((SigningKey::from_pkcs8(algorithm, &pkcs8)?, pkcs8))
    }

    /// A key from a PKCS#8 document (DER).
    pub fn from_pkcs8(algorithm: Algorithm, der: &[u8]) -> Result<SigningKey, KeyError> {
        let rng = SystemRandom::new();
        let pair = match algorithm {
            Algorithm::EcdsaP256Sha256 => {
                EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der, &rng)
                    .map(Pair::Ecdsa)
            }
            Algorithm::Ed25519 => {
                Ed25519KeyPair::from_pkcs8_maybe_unchecked(der).map(Pair::Ed25519)
            }
            Algorithm::RsaSha256 => RsaKeyPair::from_pkcs8(der).map(Pair::Rsa),
        }
        .map_err(|e| rejected(&format!("not a PKCS#8 {algorithm} key"), e))?;
        Ok(SigningKey::with_pair(algorithm, pair, rng))
    }

    /// An RSA key from PKCS#1 `RSAPrivateKey` DER.
    pub fn from_rsa_der(der: &[u8]) -> Result<SigningKey, KeyError> {
        let pair = RsaKeyPair::from_der(der).map_err(|e| rejected("not an RSA key", e))?;
        Ok(SigningKey::with_pair(
            Algorithm::RsaSha256,
            Pair::Rsa(pair),
            SystemRandom::new(),
        ))
    }

    /// An ECDSA P-256 key from its private scalar and uncompressed public
    /// point (`04 || x || y`), as BIND's and Knot's key files hold them.
    pub fn from_p256_scalar(scalar: &[u8], public_point: &[u8]) -> Result<SigningKey, KeyError> {
        let rng = SystemRandom::new();
        EcdsaKeyPair::from_private_key_and_public_key(
            &ECDSA_P256_SHA256_FIXED_SIGNING,
            scalar,
            public_point,
            &rng,
        )
        .map(|pair| SigningKey::with_pair(Algorithm::EcdsaP256Sha256, Pair::Ecdsa(pair), rng))
        .map_err(|e| rejected("not a P-256 key pair", e))
    }

    /// An Ed25519 key from its 32-octet seed (BIND's `PrivateKey:`).
    pub fn from_ed25519_seed(seed: &[u8]) -> Result<SigningKey, KeyError> {
        Ed25519KeyPair::from_seed_unchecked(seed)
            .map(|pair| {
                SigningKey::with_pair(Algorithm::Ed25519, Pair::Ed25519(pair), SystemRandom::new())
            })
            .map_err(|e| rejected("not an Ed25519 seed", e))
    }

    fn with_pair(algorithm: Algorithm, pair: Pair, rng: SystemRandom) -> SigningKey {
        let public = match &pair {
            // Uncompressed point: drop the leading 04 (RFC 6605 4).
            Pair::Ecdsa(p) => p.public_key().as_ref()[1..].to_vec(),
            Pair::Ed25519(p) => p.public_key().as_ref().to_vec(),
            Pair::Rsa(p) => rfc3110(&PublicKeyComponents::<Vec<u8>>::from(p.public())),
        };
        SigningKey {
            algorithm,
            pair,
            public,
            rng,
        }
    }

    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The public key field of the key's DNSKEY record.
    pub fn public_key(&self) -> &[u8] {
        &self.public
    }

    /// The key's DNSKEY RDATA with `flags`.
    pub fn dnskey_rdata(&self, flags: u16) -> Vec<u8> {
        dnskey::rdata(flags, self.algorithm.number(), &self.public)
    }

    /// Signs `message` (RRSIG RDATA without signature, then the RRset in
    /// canonical form), giving the signature field of the RRSIG.
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, KeyError> {
        match &self.pair {
            Pair::Ecdsa(p) => p
                .sign(&self.rng, message)
                .map(|s| s.as_ref().to_vec())
                .map_err(|e| rejected("ECDSA signing failed", e)),
            Pair::Ed25519(p) => Ok(p.sign(message).as_ref().to_vec()),
            Pair::Rsa(p) => {
                let mut out = vec![0; p.public().modulus_len()];
                p.sign(&RSA_PKCS1_SHA256, &self.rng, message, &mut out)
                    .map_err(|e| rejected("RSA signing failed", e))?;
                Ok(out)
            }
        }
    }

    /// Octets of one signature.
    pub fn signature_len(&self) -> usize {
        match &self.pair {
            Pair::Ecdsa(_) | Pair::Ed25519(_) => 64,
            Pair::Rsa(p) => p.public().modulus_len(),
        }
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("algorithm", &self.algorithm)
            .field("public", &self.public.len())
            .finish_non_exhaustive()
    }
}

/// An RSA public key in DNSKEY form (RFC 3110 2): exponent length (one
/// octet, or zero and two), exponent, modulus; no leading zero octets.
fn rfc3110(components: &PublicKeyComponents<Vec<u8>>) -> Vec<u8> {
    let strip = |v: &[u8]| -> Vec<u8> {
        let first = v.iter().position(|&b| b != 0).unwrap_or(v.len());
        v[first..].to_vec()
    };
    let (e, n) = (strip(&components.e), strip(&components.n));
    let mut out = Vec::with_capacity(3 + e.len() + n.len());
    match u8::try_from(e.len()) {
        Ok(len) => out.push(len),
        Err(_) => {
            out.push(0);
            out.extend_from_slice(&(e.len() as u16).to_be_bytes());
        }
    }
    out.extend_from_slice(&e);
    out.extend_from_slice(&n);
    out
}

#[cfg(test)]
mod tests;
