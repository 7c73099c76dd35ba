//! Any text as the key files Heron reads: BIND's `.key` and `.private`
//! pair, BIND's `.state` file, Knot's `keymgr -j` list with a PKCS#8 PEM
//! key, and Heron's own key file. Each reader refuses or accepts, never
//! panics; a key accepted signs, and its signature verifies with the
//! public key the DNSKEY record would carry; Heron's key file written back
//! reads the same.
//!
//! Input: one octet (the reader, its value mod 4: BIND pair, BIND state,
//! Knot, Heron), then the text; where a reader takes two texts, a NUL
//! separates them (`.key` then `.private`; the JSON list then the PEM).
#![no_main]

use heron_dnssec::import::{ECDSAP256SHA256, ED25519, ImportedKey, RSASHA256};
use heron_dnssec::import::{bind, bind_state, knot};
use heron_dnssec::keys::{Algorithm, KeyFile, SigningKey};
use libfuzzer_sys::fuzz_target;
use ring::signature::{self, UnparsedPublicKey};

const MESSAGE: &[u8] = b"a zone's RRset, as a signature covers it";

fuzz_target!(|data: &[u8]| {
    let Some((&reader, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let (first, second) = text.split_once('\0').unwrap_or((text, ""));
    match reader % 4 {
        0 => {
            if let Ok(bind) = bind::parse(first, second) {
                signs_as_published(&bind.key);
            }
        }
        1 => {
            let _ = bind_state::parse(text);
        }
        2 => {
            for meta in knot::parse_list(first).unwrap_or_default() {
                if let Ok(key) = knot::import(second, &meta) {
                    signs_as_published(&key);
                }
            }
        }
        _ => {
            let Ok(file) = KeyFile::from_text(text) else {
                return;
            };
            let again = KeyFile::from_text(&file.to_text()).expect("a written key file reads");
            assert_eq!(again, file, "a key file reads back otherwise");
            if let Ok(key) = file.signing_key() {
                let public = key.public_key().to_vec();
                verify(file.algorithm.number(), &public, &key.sign(MESSAGE).unwrap());
            }
        }
    }
});

/// An imported key loads as a signing key and what it signs verifies with
/// its DNSKEY's public key.
fn signs_as_published(key: &ImportedKey) {
    let algorithm = Algorithm::from_number(key.algorithm).expect("an algorithm Heron signs with");
    let signer = SigningKey::from_pkcs8(algorithm, &key.pkcs8).expect("an imported key loads");
    assert_eq!(signer.public_key(), &key.public_key[..], "another public key");
    verify(key.algorithm, &key.public_key, &signer.sign(MESSAGE).unwrap());
}

/// `signature` over [`MESSAGE`] verifies with `public` (DNSKEY form).
fn verify(algorithm: u8, public: &[u8], signature: &[u8]) {
    let verified = match algorithm {
        ECDSAP256SHA256 => {
            let point = [&[4u8][..], public].concat();
            UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point)
                .verify(MESSAGE, signature)
        }
        ED25519 => UnparsedPublicKey::new(&signature::ED25519, public).verify(MESSAGE, signature),
        RSASHA256 => {
            let (e_len, rest) = match public.split_first() {
                Some((0, rest)) => (usize::from(u16::from_be_bytes([rest[0], rest[1]])), &rest[2..]),
                Some((&n, rest)) => (usize::from(n), rest),
                None => panic!("an empty RSA public key"),
            };
            let (e, n) = rest.split_at(e_len);
            signature::RsaPublicKeyComponents { n, e }.verify(
                &signature::RSA_PKCS1_2048_8192_SHA256,
                MESSAGE,
                signature,
            )
        }
        other => panic!("a key of algorithm {other} was accepted"),
    };
    verified.expect("the signature verifies with the published key");
}
