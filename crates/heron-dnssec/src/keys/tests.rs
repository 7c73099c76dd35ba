use super::*;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ring::signature::{
    ECDSA_P256_SHA256_FIXED, ED25519, RSA_PKCS1_2048_8192_SHA256, RsaPublicKeyComponents,
    UnparsedPublicKey,
};

use crate::dnskey::key_tag;

fn b64(text: &str) -> Vec<u8> {
    STANDARD.decode(text).expect("base64")
}

fn wire(name: &str) -> Vec<u8> {
    heron_proto::Name::parse(name).unwrap().as_wire().to_vec()
}

/// RRSIG RDATA without its signature, then one record: what is signed.
fn signed_data(
    (covered, algorithm, labels, ttl): (u16, u8, u8, u32),
    (expiration, inception, tag): (u32, u32, u16),
    signer: &str,
    (owner, rdata): (&str, &[u8]),
) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&covered.to_be_bytes());
    out.extend_from_slice(&[algorithm, labels]);
    for n in [ttl, expiration, inception] {
        out.extend_from_slice(&n.to_be_bytes());
    }
    out.extend_from_slice(&tag.to_be_bytes());
    out.extend_from_slice(&wire(signer));
    out.extend_from_slice(&wire(owner));
    out.extend_from_slice(&covered.to_be_bytes());
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&ttl.to_be_bytes());
    out.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
    out.extend_from_slice(rdata);
    out
}

/// Verifies with ring's verifier, from the DNSKEY form of the public key.
fn verifies(algorithm: Algorithm, public: &[u8], message: &[u8], signature: &[u8]) -> bool {
    match algorithm {
        Algorithm::EcdsaP256Sha256 => {
            let point = [&[4u8][..], public].concat();
            UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point)
                .verify(message, signature)
                .is_ok()
        }
        Algorithm::Ed25519 => UnparsedPublicKey::new(&ED25519, public)
            .verify(message, signature)
            .is_ok(),
        Algorithm::RsaSha256 => {
            let e_len = public[0] as usize;
            let key = RsaPublicKeyComponents {
                e: &public[1..1 + e_len],
                n: &public[1 + e_len..],
            };
            key.verify(&RSA_PKCS1_2048_8192_SHA256, message, signature)
                .is_ok()
        }
    }
}

#[test]
fn generated_keys_sign_what_the_verifier_accepts() {
    for algorithm in [Algorithm::EcdsaP256Sha256, Algorithm::Ed25519] {
        let (key, pkcs8) = SigningKey::generate(algorithm).unwrap();
        let want_len = if algorithm == Algorithm::Ed25519 {
            32
        } else {
            64
        };
        assert_eq!(key.public_key().len(), want_len, "{algorithm}");
        let signature = key.sign(b"a message").unwrap();
        assert_eq!(signature.len(), key.signature_len());
        assert!(verifies(
            algorithm,
            key.public_key(),
            b"a message",
            &signature
        ));
        assert!(!verifies(
            algorithm,
            key.public_key(),
            b"another",
            &signature
        ));
        let again = SigningKey::from_pkcs8(algorithm, &pkcs8).unwrap();
        assert_eq!(again.public_key(), key.public_key(), "reloaded from PKCS#8");
    }
}

#[test]
fn two_generated_keys_differ() {
    let (a, _) = SigningKey::generate(Algorithm::Ed25519).unwrap();
    let (b, _) = SigningKey::generate(Algorithm::Ed25519).unwrap();
    assert_ne!(a.public_key(), b.public_key());
}

/// RFC 6605 6.1: the example key's DNSKEY and tag, and the example
/// signature verifies over the signed data built as Heron builds it.
#[test]
fn rfc6605_p256_example() {
    let public = b64(
        "GojIhhXUN/u4v54ZQqGSnyhWJwaubCvTmeexv7bR6edbkrSqQpF64cYbcB7wNcP+e+MAnLr+Wi9xMWyQLc8NAA==",
    );
    let scalar = b64("GU6SnQ/Ou+xC5RumuIUIuJZteXT2z0O/ok1s38Et6mQ=");
    let point = [&[4u8][..], &public].concat();
    let key = SigningKey::from_p256_scalar(&scalar, &point).unwrap();
    assert_eq!(key.public_key(), &public[..]);
    assert_eq!(key_tag(&key.dnskey_rdata(257)), 55648);
    let message = signed_data(
        (1, 13, 3, 3600),
        (1_284_026_679, 1_281_607_479, 55648),
        "example.net.",
        ("www.example.net.", &[192, 0, 2, 1]),
    );
    let signature = b64(
        "qx6wLYqmh+l9oCKTN6qIc+bw6ya+KJ8oMz0YP107epXAyGmt+3SNruPFKG7tZoLBLlUzGGus7ZwmwWep666VCw==",
    );
    assert!(verifies(key.algorithm(), &public, &message, &signature));
    let ours = key.sign(&message).unwrap();
    assert!(verifies(key.algorithm(), &public, &message, &ours));
}

/// RFC 8080 6.1: the example seed gives the example DNSKEY and tag, and
/// Ed25519 being deterministic, the example signature exactly.
#[test]
fn rfc8080_ed25519_example() {
    let key = SigningKey::from_ed25519_seed(&b64("ODIyNjAzODQ2MjgwODAxMjI2NDUxOTAyMDQxNDIyNjI="))
        .unwrap();
    assert_eq!(
        key.public_key(),
        &b64("l02Woi0iS8Aa25FQkUd9RMzZHJpBoRQwAQEX1SxZJA4=")[..]
    );
    assert_eq!(key_tag(&key.dnskey_rdata(257)), 3613);
    let mx = [&[0u8, 10][..], &wire("mail.example.com.")].concat();
    let message = signed_data(
        (15, 15, 2, 3600),
        (1_440_021_600, 1_438_207_200, 3613),
        "example.com.",
        ("example.com.", &mx),
    );
    let signature = key.sign(&message).unwrap();
    assert_eq!(
        STANDARD.encode(&signature),
        "oL9krJun7xfBOIWcGHi7mag5/hdZrKWw15jPGrHpjQeRAvTdszaPD+QLs3fx8A4M3e23mRZ9VrbpMngwcrqNAg=="
    );
}

#[test]
fn rsa_sha256_signs_from_pkcs8_with_an_rfc3110_public_key() {
    let der = b64(include_str!("test-rsa2048.pk8.b64").trim());
    let key = SigningKey::from_pkcs8(Algorithm::RsaSha256, &der).unwrap();
    let public = key.public_key();
    // Exponent 65537 in three octets, then a 2048-bit modulus.
    assert_eq!(&public[..4], &[3, 1, 0, 1]);
    assert_eq!(public.len(), 4 + 256);
    let signature = key.sign(b"rrset").unwrap();
    assert_eq!(signature.len(), 256);
    assert!(verifies(Algorithm::RsaSha256, public, b"rrset", &signature));
    let pkcs1 = b64(include_str!("test-rsa2048.pkcs1.b64").trim());
    let same = SigningKey::from_rsa_der(&pkcs1).unwrap();
    assert_eq!(same.public_key(), public, "PKCS#1 DER of the same key");
    assert!(SigningKey::generate(Algorithm::RsaSha256).is_err());
}

#[test]
fn a_key_of_another_algorithm_or_garbage_is_refused() {
    let (_, pkcs8) = SigningKey::generate(Algorithm::Ed25519).unwrap();
    assert!(SigningKey::from_pkcs8(Algorithm::EcdsaP256Sha256, &pkcs8).is_err());
    assert!(SigningKey::from_pkcs8(Algorithm::RsaSha256, &pkcs8).is_err());
    assert!(SigningKey::from_pkcs8(Algorithm::Ed25519, b"not DER").is_err());
    assert!(SigningKey::from_rsa_der(&[]).is_err());
    assert!(SigningKey::from_ed25519_seed(&[1; 31]).is_err());
}

#[test]
fn rfc3110_long_exponents_take_three_length_octets() {
    let components = PublicKeyComponents {
        n: vec![0, 0xC0, 1],
        e: vec![7; 300],
    };
    let out = rfc3110(&components);
    assert_eq!(&out[..3], &[0, 1, 44]);
    assert_eq!(
        out.len(),
        3 + 300 + 2,
        "leading zero of the modulus dropped"
    );
}

#[test]
fn algorithm_names_and_numbers() {
    for algorithm in [
        Algorithm::RsaSha256,
        Algorithm::EcdsaP256Sha256,
        Algorithm::Ed25519,
    ] {
        assert_eq!(Algorithm::from_number(algorithm.number()), Some(algorithm));
        assert_eq!(
            Algorithm::from_name(&algorithm.to_string()),
            Some(algorithm)
        );
    }
    assert_eq!(Algorithm::from_number(5), None);
    assert_eq!(Algorithm::from_name("rsasha1"), None);
}

#[test]
fn key_files_round_trip() {
    let (file, key) = KeyFile::generate(
        "example.",
        KeyRole::Csk,
        Algorithm::EcdsaP256Sha256,
        1_700_000_000,
    )
    .unwrap();
    let back = KeyFile::from_text(&file.to_text()).unwrap();
    assert_eq!(back, file);
    assert_eq!(back.signing_key().unwrap().public_key(), key.public_key());
    let name = file.file_name(&key);
    assert!(
        name.starts_with("Kexample+013+") && name.ends_with(".csk.heron-key"),
        "{name}"
    );
}

#[test]
fn malformed_key_files_are_refused() {
    let (file, _) = KeyFile::generate("example.", KeyRole::Zsk, Algorithm::Ed25519, 1).unwrap();
    let good = file.to_text();
    let cases = [
        good.replace("role: zsk", "role: kzk"),
        good.replace("algorithm: 15", "algorithm: 5"),
        good.replace("created: 1", "created: soon"),
        good.replace("private-key-pkcs8: ", "private-key-pkcs8: !!"),
        good.replace("zone: example.\n", ""),
        "x".repeat(MAX_KEY_FILE + 1),
        String::new(),
    ];
    for text in &cases {
        assert!(KeyFile::from_text(text).is_err(), "{text}");
    }
    // Cut anywhere, or bytes changed: never a panic.
    for cut in 0..good.len() {
        let _ = KeyFile::from_text(&good[..cut]).map(|f| f.signing_key());
    }
    let mut seed = 0x9E37_79B9u32;
    for _ in 0..500 {
        let mut bytes = good.clone().into_bytes();
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        let at = seed as usize % bytes.len();
        bytes[at] = (seed >> 8) as u8 & 0x7F;
        if let Ok(text) = String::from_utf8(bytes) {
            let _ = KeyFile::from_text(&text).map(|f| f.signing_key());
        }
    }
}
