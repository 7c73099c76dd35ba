use super::*;
use crate::message::{Message, flags};

const NOW: u64 = 1_700_000_000;
const ID: u16 = 0xBEEF;

fn n(s: &str) -> Name {
    Name::parse(s).unwrap()
}

fn key(algorithm: Algorithm) -> Key {
    Key::new(
        n("Test.Key"),
        algorithm,
        b"a shared secret, 32 octets long!".to_vec(),
    )
}

/// `example.com. SOA IN`, RD, ID 0xBEEF.
fn query() -> Vec<u8> {
    let mut m = vec![0xBE, 0xEF, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    m.extend_from_slice(b"\x07example\x03com\x00\x00\x06\x00\x01");
    m
}

/// The query echoed as a response: QR and AA set, `answers` A records.
fn response_to(query: &[u8], answers: u8) -> Vec<u8> {
    let tsig = find(query).unwrap().map_or(query.len(), |t| t.start);
    let mut m = query[..tsig].to_vec();
    m[2] |= 0x84;
    m[10..12].copy_from_slice(&[0, 0]);
    m[7] = answers;
    for i in 0..answers {
        m.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1, 0, 0, 0x0E, 0x10, 0, 4, 192, 0, 2, i]);
    }
    m
}

fn signed_query(key: &Key) -> (Vec<u8>, Vec<u8>) {
    let mut m = query();
    let mac = sign_request(&mut m, key, NOW, DEFAULT_FUDGE);
    (m, mac)
}

fn verify_err<K: KeyRing + ?Sized>(msg: &[u8], keys: &K, now: u64) -> TsigFailure {
    verify_request(msg, keys, now).expect_err("request must fail verification")
}

/// Rewrites the MAC of the TSIG RR at the end of `msg` (RDLENGTH and MAC
/// size follow).
fn replace_mac(msg: &[u8], mac: &[u8]) -> Vec<u8> {
    let t = find(msg).unwrap().unwrap();
    let mut out = msg[..t.start].to_vec();
    let arcount = u16::from_be_bytes([out[10], out[11]]) - 1;
    out[10..12].copy_from_slice(&arcount.to_be_bytes());
    append_tsig(&mut out, &t.variables(), mac, t.original_id);
    out
}

#[test]
fn algorithm_names() {
    for alg in Algorithm::ALL {
        assert_eq!(Algorithm::from_name(&alg.name()), Some(alg));
        assert_eq!(Algorithm::from_text(alg.text()), Some(alg));
        assert_eq!(
            Algorithm::from_text(&format!("{}.", alg.text().to_uppercase())),
            Some(alg)
        );
        let upper = Name::parse(&alg.name().to_string().to_uppercase()).unwrap();
        assert_eq!(Algorithm::from_name(&upper), Some(alg));
    }
    assert_eq!(
        Algorithm::HmacMd5.name().to_string(),
        "hmac-md5.sig-alg.reg.int."
    );
    assert_eq!(
        Algorithm::from_text("HMAC-MD5.SIG-ALG.REG.INT."),
        Some(Algorithm::HmacMd5)
    );
    assert_eq!(Algorithm::from_name(&n("hmac-md5")), None);
    assert_eq!(Algorithm::from_name(&n("gss-tsig")), None);
    assert_eq!(Algorithm::from_text("hmac-sha256-128"), None);
    let lens: Vec<_> = Algorithm::ALL
        .iter()
        .map(|a| (a.mac_len(), a.min_mac_len()))
        .collect();
    assert_eq!(
        lens,
        [(16, 10), (20, 10), (28, 14), (32, 16), (48, 24), (64, 32)]
    );
}

#[test]
fn keys_from_base64_and_their_debug_output() {
    let k = Key::from_base64("TestKey.", Algorithm::HmacSha256, "c2VjcmV0IGJ5dGVz").unwrap();
    assert_eq!(k.name.as_wire(), b"\x07testkey\x00");
    assert_eq!(k.secret, b"secret bytes");
    // Unpadded and wrapped text reads the same.
    let k2 = Key::from_base64("testkey", Algorithm::HmacSha256, "c2Vj cmV0\nIGJ5dGVz").unwrap();
    assert_eq!(k2.secret, k.secret);
    let k3 = Key::from_base64("testkey", Algorithm::HmacSha1, "YQ").unwrap();
    assert_eq!(k3.secret, b"a");
    assert_eq!(
        Key::from_base64("k", Algorithm::HmacSha1, "not base64!").unwrap_err(),
        KeyError::Base64
    );
    assert_eq!(
        Key::from_base64("k", Algorithm::HmacSha1, "").unwrap_err(),
        KeyError::EmptySecret
    );
    assert!(matches!(
        Key::from_base64("a..b", Algorithm::HmacSha1, "YQ=="),
        Err(KeyError::Name(_))
    ));
    let debug = format!("{k:?}");
    assert!(
        debug.contains("testkey") && debug.contains("HmacSha256"),
        "{debug}"
    );
    assert!(
        !debug.contains("secret bytes") && !debug.contains("115"),
        "{debug}"
    );
}

#[test]
fn generated_secrets_are_base64_of_mac_len_octets() {
    let random: Vec<u8> = (0..100).collect();
    for alg in Algorithm::ALL {
        let text = Key::generate_secret_base64(alg, &random);
        let k = Key::from_base64("k", alg, &text).unwrap();
        assert_eq!(k.secret, &random[..alg.mac_len()]);
    }
}

#[test]
fn key_ring_lookup_ignores_case() {
    let ring = vec![
        key(Algorithm::HmacSha1),
        Key::new(n("other"), Algorithm::HmacMd5, vec![1]),
    ];
    assert_eq!(
        ring.key(&n("TEST.key")).unwrap().algorithm,
        Algorithm::HmacSha1
    );
    assert_eq!(
        ring.as_slice().key(&n("OTHER")).unwrap().algorithm,
        Algorithm::HmacMd5
    );
    assert!(ring.key(&n("missing")).is_none());
}

#[test]
fn round_trip_for_every_algorithm() {
    for alg in Algorithm::ALL {
        let k = key(alg);
        let ring = vec![Key::new(n("decoy"), alg, b"other".to_vec()), k.clone()];
        let (q, request_mac) = signed_query(&k);
        assert_eq!(request_mac.len(), alg.mac_len());
        assert_eq!(q.len(), query().len() + k.rr_len(), "{alg}");
        let t = find(&q).unwrap().unwrap();
        assert_eq!(
            (t.key_name.clone(), t.algorithm.clone()),
            (n("test.key"), alg.name())
        );
        assert_eq!(
            (t.time_signed, t.fudge, t.original_id, t.error),
            (NOW, 300, ID, 0)
        );
        assert!(t.other.is_empty());
        // The signed query still parses as a message.
        let parsed = Message::parse(&q).unwrap();
        assert_eq!(parsed.additional.len(), 1);
        assert_eq!(parsed.additional[0].rtype, RType::TSIG);

        let v = verify_request(&q, &ring, NOW + 10).unwrap().unwrap();
        assert_eq!(v.key.name, k.name);
        assert_eq!(v.mac, request_mac);
        assert_eq!(v.time_signed, NOW);

        let mut resp = response_to(&q, 2);
        let mut signer = ResponseSigner::new(&v);
        signer.sign(&mut resp, NOW + 11);
        assert_eq!(Header::read(&resp).unwrap().arcount, 1);
        let mut client = ResponseVerifier::new(&k, request_mac.clone());
        assert_eq!(client.verify(&resp, NOW + 12), Ok(()), "{alg}");
        assert_eq!(client.finish(), Ok(()));

        // The response is bound to the request: another request MAC fails.
        let mut other = ResponseVerifier::new(&k, vec![0; request_mac.len()]);
        assert_eq!(other.verify(&resp, NOW + 12), Err(TsigError::BadSig));
    }
}

#[test]
fn unsigned_request_is_none() {
    assert!(
        verify_request(&query(), &[key(Algorithm::HmacSha256)][..], NOW)
            .unwrap()
            .is_none()
    );
    assert!(find(&query()).unwrap().is_none());
}

#[test]
fn tampered_request_is_badsig() {
    let k = key(Algorithm::HmacSha256);
    let ring = [k.clone()];
    let (q, _) = signed_query(&k);
    let t = find(&q).unwrap().unwrap();
    // Every octet of the signed part but the ID (replaced by Original ID
    // for the digest) is covered.
    for i in 2..t.start {
        let mut bad = q.clone();
        bad[i] ^= 0x01;
        let Err(failure) = verify_request(&bad, &ring, NOW) else {
            panic!("octet {i} changed and the request still verifies");
        };
        assert!(
            matches!(failure.error, TsigError::BadSig | TsigError::FormErr),
            "octet {i}: {failure}"
        );
    }
    // A flipped MAC octet, a different time signed, another fudge.
    let mac_at = q.len() - 6 - 32;
    let mut bad = q.clone();
    bad[mac_at + 5] ^= 0x80;
    assert_eq!(verify_err(&bad, &ring, NOW).error, TsigError::BadSig);
    let time_at = t.start + k.name.wire_len() + RR_FIXED_LEN + k.algorithm.wire().len();
    let mut bad = q.clone();
    bad[time_at + 5] ^= 0x01;
    assert_eq!(verify_err(&bad, &ring, NOW).error, TsigError::BadSig);
    let mut bad = q.clone();
    bad[time_at + 7] ^= 0x01;
    assert_eq!(verify_err(&bad, &ring, NOW).error, TsigError::BadSig);
    // Another secret under the same name.
    let wrong = [Key::new(
        n("test.key"),
        Algorithm::HmacSha256,
        b"guess".to_vec(),
    )];
    let failure = verify_err(&q, &wrong, NOW);
    assert_eq!(failure.error, TsigError::BadSig);
    assert_eq!(failure.key_name, Some(n("test.key")));
    assert_eq!(failure.request_mac, None);
}

#[test]
fn badsig_answer_is_unsigned_and_the_client_sees_badsig() {
    let k = key(Algorithm::HmacSha256);
    let (mut q, request_mac) = signed_query(&k);
    q[13] ^= 0x20; // "example" -> "Example": the MAC covers case
    let failure = verify_err(&q, &k, NOW);
    assert_eq!(failure.error, TsigError::BadSig);
    assert_eq!(failure.error.response_rcode(), Rcode::NOTAUTH);
    let mut resp = response_to(&q, 0);
    error_response_tsig(&mut resp, &failure, &k, NOW + 1);
    let t = find(&resp).unwrap().unwrap();
    assert_eq!((t.error, t.mac.len(), t.time_signed), (16, 0, NOW));
    assert_eq!(
        (t.key_name, t.algorithm),
        (n("test.key"), Algorithm::HmacSha256.name())
    );
    let mut client = ResponseVerifier::new(&k, request_mac);
    assert_eq!(client.verify(&resp, NOW + 1), Err(TsigError::BadSig));
    assert_eq!(client.finish(), Err(TsigError::BadSig));
}

#[test]
fn unknown_key_or_algorithm_is_badkey() {
    let k = key(Algorithm::HmacSha256);
    let (q, request_mac) = signed_query(&k);
    let empty: [Key; 0] = [];
    let cases = [
        vec![Key::new(
            n("other.key"),
            Algorithm::HmacSha256,
            k.secret.clone(),
        )],
        // Right name and secret, other algorithm.
        vec![Key::new(
            n("test.key"),
            Algorithm::HmacSha512,
            k.secret.clone(),
        )],
        empty.to_vec(),
    ];
    for ring in &cases {
        let failure = verify_err(&q, ring, NOW);
        assert_eq!(failure.error, TsigError::BadKey);
        assert_eq!(failure.algorithm, Some(Algorithm::HmacSha256.name()));
        let mut resp = response_to(&q, 0);
        error_response_tsig(&mut resp, &failure, ring, NOW + 7);
        let t = find(&resp).unwrap().unwrap();
        assert_eq!((t.error, t.mac.len(), t.other.len()), (17, 0, 0));
        assert_eq!((t.time_signed, t.fudge), (NOW, DEFAULT_FUDGE));
        assert_eq!(t.key_name, n("test.key"));
        let mut client = ResponseVerifier::new(&k, request_mac.clone());
        assert_eq!(client.verify(&resp, NOW), Err(TsigError::BadKey));
    }
    // An algorithm this module does not know.
    let mut q = query();
    let gss = n("gss-tsig");
    let vars = Variables {
        key_name: &k.name,
        algorithm: &gss,
        time_signed: NOW,
        fudge: 300,
        error: 0,
        other: &[],
    };
    append_tsig(&mut q, &vars, &[7; 32], ID);
    let failure = verify_err(&q, &[k], NOW);
    assert_eq!(failure.error, TsigError::BadKey);
    assert_eq!(failure.algorithm, Some(gss));
}

#[test]
fn time_outside_fudge_is_badtime_with_a_signed_answer() {
    let k = key(Algorithm::HmacSha1);
    let ring = vec![k.clone()];
    let (q, request_mac) = signed_query(&k);
    assert!(verify_request(&q, &ring, NOW + 300).is_ok());
    assert!(verify_request(&q, &ring, NOW - 300).is_ok());
    for server_now in [NOW + 301, NOW - 301, 0, 1 << 48] {
        let failure = verify_err(&q, &ring, server_now);
        assert_eq!(failure.error, TsigError::BadTime);
        assert_eq!(failure.request_mac.as_deref(), Some(&request_mac[..]));
        assert_eq!(failure.time_signed, NOW);
    }
    let server_now = NOW + 1000;
    let failure = verify_err(&q, &ring, server_now);
    let mut resp = response_to(&q, 0);
    error_response_tsig(&mut resp, &failure, &ring, server_now);
    let t = find(&resp).unwrap().unwrap();
    assert_eq!(t.error, 18);
    assert_eq!(t.mac.len(), Algorithm::HmacSha1.mac_len());
    assert_eq!(t.time_signed, NOW, "Time Signed repeats the request's");
    assert_eq!(
        t.other,
        u48_bytes(server_now),
        "Other Data holds the server's time"
    );
    // The client checks the signature, then reports BADTIME.
    let mut client = ResponseVerifier::new(&k, request_mac.clone());
    assert_eq!(client.verify(&resp, NOW + 1), Err(TsigError::BadTime));
    // A forged BADTIME answer (other time) fails the MAC.
    let mut forged = resp.clone();
    let last = forged.len() - 1;
    forged[last] ^= 1;
    let mut client = ResponseVerifier::new(&k, request_mac);
    assert_eq!(client.verify(&forged, NOW + 1), Err(TsigError::BadSig));
    // No key to sign with any more: the answer goes out unsigned.
    let mut resp = response_to(&q, 0);
    error_response_tsig(&mut resp, &failure, &[] as &[Key], server_now);
    assert!(find(&resp).unwrap().unwrap().mac.is_empty());
}

/// A signer's own fudge counts up to 300 s, not past it: with 65,535 a
/// copy captured 18 hours ago would still verify.
#[test]
fn a_fudge_past_300_seconds_is_held_to_300() {
    let k = key(Algorithm::HmacSha256);
    let ring = vec![k.clone()];
    for (fudge, window) in [(65_535, 300), (1_200, 300), (300, 300), (60, 60)] {
        let mut q = query();
        sign_request(&mut q, &k, NOW, fudge);
        let verified = verify_request(&q, &ring, NOW + window).expect("within");
        let verified = verified.expect("signed");
        assert_eq!(verified.fudge, window as u16, "what the replay cache keeps");
        for late in [NOW + window + 1, NOW - window - 1] {
            assert_eq!(verify_err(&q, &ring, late).error, TsigError::BadTime);
        }
    }
}

#[test]
fn client_rejects_a_response_outside_the_fudge() {
    let k = key(Algorithm::HmacSha256);
    let (q, request_mac) = signed_query(&k);
    let v = verify_request(&q, &k, NOW).unwrap().unwrap();
    let mut resp = response_to(&q, 1);
    ResponseSigner::new(&v).sign(&mut resp, NOW);
    let mut client = ResponseVerifier::new(&k, request_mac);
    assert_eq!(client.verify(&resp, NOW + 301), Err(TsigError::BadTime));
}

#[test]
fn truncated_macs_down_to_the_rfc_minimum() {
    for alg in Algorithm::ALL {
        let k = key(alg);
        let ring = [k.clone()];
        let (q, mac) = signed_query(&k);
        let min = alg.min_mac_len();
        let short = replace_mac(&q, &mac[..min]);
        let v = verify_request(&short, &ring, NOW).unwrap().unwrap();
        assert_eq!(v.mac, &mac[..min], "{alg}");
        // The response digest starts with the truncated request MAC.
        let mut resp = response_to(&q, 1);
        ResponseSigner::new(&v).sign(&mut resp, NOW);
        let mut client = ResponseVerifier::new(&k, mac[..min].to_vec());
        assert_eq!(client.verify(&resp, NOW), Ok(()), "{alg}");
        // A wrong truncated MAC is still BADSIG.
        let mut wrong = mac[..min].to_vec();
        wrong[min - 1] ^= 1;
        assert_eq!(
            verify_err(&replace_mac(&q, &wrong), &ring, NOW).error,
            TsigError::BadSig
        );
        // One octet below the minimum, an empty MAC, one above the full
        // length: FORMERR (RFC 8945 5.2.2.1 cases 3 and 1).
        for bad in [
            &mac[..min - 1],
            &[][..],
            &[mac.clone(), vec![0]].concat()[..],
        ] {
            let failure = verify_err(&replace_mac(&q, bad), &ring, NOW);
            assert_eq!(
                failure.error,
                TsigError::FormErr,
                "{alg}, MAC of {}",
                bad.len()
            );
            assert_eq!(failure.error.response_rcode(), Rcode::FORMERR);
        }
    }
}

#[test]
fn forwarder_changed_id_still_verifies() {
    let k = key(Algorithm::HmacSha512);
    let ring = [k.clone()];
    let (mut q, request_mac) = signed_query(&k);
    q[0..2].copy_from_slice(&0x1234u16.to_be_bytes());
    let v = verify_request(&q, &ring, NOW).unwrap().unwrap();
    // The response carries the forwarder's ID as its Original ID; the
    // forwarder puts the client's ID back before passing it on.
    let mut resp = response_to(&q, 1);
    ResponseSigner::new(&v).sign(&mut resp, NOW);
    assert_eq!(find(&resp).unwrap().unwrap().original_id, 0x1234);
    resp[0..2].copy_from_slice(&ID.to_be_bytes());
    let mut client = ResponseVerifier::new(&k, request_mac);
    assert_eq!(client.verify(&resp, NOW), Ok(()));
    // Original ID itself is covered.
    let t = find(&q).unwrap().unwrap();
    let mut bad = q.clone();
    let orig_at = q.len() - 6;
    bad[orig_at] ^= 1;
    assert_eq!(t.original_id, ID);
    assert_eq!(verify_err(&bad, &ring, NOW).error, TsigError::BadSig);
}

/// Five messages: signed, unsigned, unsigned, signed, signed.
fn stream(k: &Key) -> (Vec<Vec<u8>>, Vec<u8>) {
    let (q, request_mac) = signed_query(k);
    let v = verify_request(&q, k, NOW).unwrap().unwrap();
    let mut signer = ResponseSigner::new(&v);
    let mut out = Vec::new();
    for i in 0..5u8 {
        let mut m = response_to(&q, i + 1);
        if i == 1 || i == 2 {
            assert!(signer.pass_unsigned(&m));
        } else {
            signer.sign(&mut m, NOW + u64::from(i));
        }
        out.push(m);
    }
    (out, request_mac)
}

#[test]
fn stream_with_unsigned_middle_messages() {
    for alg in Algorithm::ALL {
        let k = key(alg);
        let (msgs, request_mac) = stream(&k);
        let mut client = ResponseVerifier::new(&k, request_mac.clone());
        for (i, m) in msgs.iter().enumerate() {
            assert_eq!(client.verify(m, NOW + 5), Ok(()), "{alg}, message {i}");
        }
        assert_eq!(client.finish(), Ok(()));
        // The unsigned messages are covered by the next signed one.
        let mut tampered = msgs.clone();
        let last = tampered[2].len() - 1;
        tampered[2][last] ^= 1;
        let mut client = ResponseVerifier::new(&k, request_mac.clone());
        assert_eq!(client.verify(&tampered[0], NOW), Ok(()));
        assert_eq!(client.verify(&tampered[1], NOW), Ok(()));
        assert_eq!(client.verify(&tampered[2], NOW), Ok(()));
        assert_eq!(client.verify(&tampered[3], NOW), Err(TsigError::BadSig));
        assert_eq!(client.verify(&tampered[4], NOW), Err(TsigError::BadSig));
        assert_eq!(client.finish(), Err(TsigError::BadSig));
        // Order matters.
        let mut client = ResponseVerifier::new(&k, request_mac);
        assert_eq!(client.verify(&msgs[0], NOW), Ok(()));
        assert_eq!(client.verify(&msgs[3], NOW), Err(TsigError::BadSig));
    }
}

#[test]
fn stream_must_start_and_end_signed() {
    let k = key(Algorithm::HmacSha256);
    let (msgs, request_mac) = stream(&k);
    let mut client = ResponseVerifier::new(&k, request_mac.clone());
    for m in &msgs[..3] {
        assert_eq!(client.verify(m, NOW), Ok(()));
    }
    assert_eq!(client.finish(), Err(TsigError::Unsigned));
    // Nothing verified yet.
    let client = ResponseVerifier::new(&k, request_mac.clone());
    assert_eq!(client.finish(), Err(TsigError::Unsigned));
    // An unsigned first message.
    let mut client = ResponseVerifier::new(&k, request_mac);
    assert_eq!(client.verify(&msgs[1], NOW), Err(TsigError::Unsigned));
    // The signer will not leave the first message unsigned.
    let (q, _) = signed_query(&k);
    let v = verify_request(&q, &k, NOW).unwrap().unwrap();
    assert!(!ResponseSigner::new(&v).pass_unsigned(&response_to(&q, 1)));
}

#[test]
fn at_most_99_unsigned_messages_in_a_row() {
    let k = key(Algorithm::HmacMd5);
    let (q, request_mac) = signed_query(&k);
    let v = verify_request(&q, &k, NOW).unwrap().unwrap();
    let mut signer = ResponseSigner::new(&v);
    let mut client = ResponseVerifier::new(&k, request_mac);
    let mut first = response_to(&q, 1);
    signer.sign(&mut first, NOW);
    assert_eq!(client.verify(&first, NOW), Ok(()));
    let m = response_to(&q, 2);
    for _ in 0..MAX_UNSIGNED_RUN {
        assert!(signer.pass_unsigned(&m));
        assert_eq!(client.verify(&m, NOW), Ok(()));
    }
    assert!(!signer.pass_unsigned(&m), "the 100th must be signed");
    let mut last = m.clone();
    signer.sign(&mut last, NOW);
    assert_eq!(client.verify(&last, NOW), Ok(()));
    assert_eq!(client.finish(), Ok(()));
    // The client counts too.
    for _ in 0..MAX_UNSIGNED_RUN {
        assert_eq!(client.verify(&m, NOW), Ok(()));
    }
    assert_eq!(client.verify(&m, NOW), Err(TsigError::Unsigned));
}

#[test]
fn client_rejects_another_key_in_the_response() {
    let k = key(Algorithm::HmacSha256);
    let other = Key::new(n("other"), Algorithm::HmacSha256, k.secret.clone());
    let (q, request_mac) = signed_query(&k);
    let v = verify_request(&q, &k, NOW).unwrap().unwrap();
    let v_other = Verified { key: other, ..v };
    let mut resp = response_to(&q, 1);
    ResponseSigner::new(&v_other).sign(&mut resp, NOW);
    let mut client = ResponseVerifier::new(&k, request_mac);
    assert_eq!(client.verify(&resp, NOW), Err(TsigError::BadKey));
}

/// A signed query with its TSIG RR split out: (message part, RR).
fn split_signed() -> (Vec<u8>, Vec<u8>) {
    let (q, _) = signed_query(&key(Algorithm::HmacSha256));
    let start = find(&q).unwrap().unwrap().start;
    (q[..start].to_vec(), q[start..].to_vec())
}

fn set_counts(m: &mut [u8], an: u16, ar: u16) {
    m[6..8].copy_from_slice(&an.to_be_bytes());
    m[10..12].copy_from_slice(&ar.to_be_bytes());
}

const A_RECORD: &[u8] = &[0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1];

fn assert_formerr(msg: &[u8], what: &str) {
    assert_eq!(find(msg), Err(TsigError::FormErr), "{what}");
    let failure = verify_err(msg, &[key(Algorithm::HmacSha256)], NOW);
    assert_eq!(failure, TsigFailure::formerr(), "{what}");
    let mut resp = query();
    error_response_tsig(&mut resp, &failure, &[key(Algorithm::HmacSha256)][..], NOW);
    assert_eq!(resp, query(), "{what}: a FORMERR answer carries no TSIG");
}

#[test]
fn malformed_tsig_records_are_formerr() {
    let (body, rr) = split_signed();
    let k = key(Algorithm::HmacSha256);
    let rdlen_at = k.name.wire_len() + 8;

    // RDATA cut short: RDLENGTH as sent, message ends early.
    let whole = [body.clone(), rr.clone()].concat();
    for cut in 1..rr.len() {
        assert_formerr(&whole[..whole.len() - cut], &format!("cut {cut}"));
    }
    // RDLENGTH one less (the last octet becomes trailing data) and one
    // more with an extra octet (RDATA longer than its fields).
    let mut short = rr.clone();
    short[rdlen_at + 1] -= 1;
    assert_formerr(&[body.clone(), short].concat(), "RDLENGTH short");
    let mut long = rr.clone();
    long[rdlen_at + 1] += 1;
    long.push(0);
    assert_formerr(&[body.clone(), long].concat(), "RDLENGTH long");
    // Other Len past the RDATA.
    let mut other = rr.clone();
    let other_len_at = rr.len() - 2;
    other[other_len_at + 1] = 1;
    assert_formerr(&[body.clone(), other].concat(), "Other Len past RDATA");
    // Class IN instead of ANY.
    let mut class = rr.clone();
    class[k.name.wire_len() + 3] = 1;
    assert_formerr(&[body.clone(), class].concat(), "class IN");
    // A compressed algorithm name.
    let mut m = body.clone();
    let alg_at = m.len() + rdlen_at + 2;
    m.extend_from_slice(&rr);
    let alg_len = Algorithm::HmacSha256.wire().len();
    let mut compressed = m[..alg_at].to_vec();
    compressed.extend_from_slice(&[0xC0, 12]);
    compressed.extend_from_slice(&m[alg_at + alg_len..]);
    let rd = u16::from_be_bytes([m[alg_at - 2], m[alg_at - 1]]) - alg_len as u16 + 2;
    compressed[alg_at - 2..alg_at].copy_from_slice(&rd.to_be_bytes());
    assert_formerr(&compressed, "compressed algorithm name");
    // TSIG not last: an A record after it.
    let mut m = [body.clone(), rr.clone(), A_RECORD.to_vec()].concat();
    set_counts(&mut m, 0, 2);
    assert_formerr(&m, "TSIG not last");
    // Two TSIG RRs.
    let mut m = [body.clone(), rr.clone(), rr.clone()].concat();
    set_counts(&mut m, 0, 2);
    assert_formerr(&m, "two TSIGs");
    // TSIG as the last record of the answer section.
    let mut m = [body.clone(), rr.clone()].concat();
    set_counts(&mut m, 1, 0);
    assert_formerr(&m, "TSIG in the answer section");
    // Counts that promise more than there is, trailing data, short header.
    let mut m = [body.clone(), rr.clone()].concat();
    set_counts(&mut m, 0, 2);
    assert_formerr(&m, "ARCOUNT too high");
    assert_formerr(
        &[body.clone(), rr.clone(), vec![0]].concat(),
        "trailing octet",
    );
    assert_formerr(&body[..11], "short header");
}

#[test]
fn malformed_owner_names_before_the_tsig_are_formerr() {
    let (body, rr) = split_signed();
    let with_record = |record: &[u8]| {
        let mut m = [body.clone(), record.to_vec(), rr.clone()].concat();
        set_counts(&mut m, 1, 1);
        m
    };
    // The A record as it should be, then with a reserved label type
    // (0x40), a label longer than the message and a pointer cut in half.
    assert!(find(&with_record(A_RECORD)).unwrap().is_some());
    let mut reserved = A_RECORD.to_vec();
    reserved[0] = 0x40;
    assert_formerr(&with_record(&reserved), "reserved label type");
    let mut m = body.clone();
    m.push(63);
    set_counts(&mut m, 1, 0);
    assert_formerr(&m, "label past the end");
    let mut m = body.clone();
    m.push(0xC0);
    set_counts(&mut m, 1, 0);
    assert_formerr(&m, "half a pointer");
}

#[test]
fn tsig_after_other_additional_records_is_fine() {
    // OPT then TSIG, as dig and kdig send them.
    let k = key(Algorithm::HmacSha256);
    let mut q = query();
    q[11] = 1;
    q.extend_from_slice(&[0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0, 0, 0]);
    sign_request(&mut q, &k, NOW, DEFAULT_FUDGE);
    assert_eq!(Header::read(&q).unwrap().arcount, 2);
    assert!(verify_request(&q, &[k], NOW).unwrap().is_some());
    assert!(crate::message::parse_query(&q).unwrap().tsig.is_some());
}

#[test]
fn error_codes() {
    let codes: Vec<_> = [
        TsigError::FormErr,
        TsigError::BadSig,
        TsigError::BadKey,
        TsigError::BadTime,
        TsigError::BadTrunc,
        TsigError::Unsigned,
    ]
    .iter()
    .map(|e| (e.rcode(), e.response_rcode().0))
    .collect();
    assert_eq!(codes, [(1, 1), (16, 9), (17, 9), (18, 9), (22, 9), (0, 9)]);
    assert_eq!(TsigError::from_field(22), TsigError::BadTrunc);
    assert_eq!(TsigError::from_field(19), TsigError::FormErr);
    assert!(TsigError::BadSig.to_string().contains("BADSIG"));
}

#[test]
fn badtrunc_answer_is_signed() {
    // A caller with a stricter policy than the RFC's reports BADTRUNC; the
    // answer is signed like BADTIME's, without other data.
    let k = key(Algorithm::HmacSha256);
    let (q, request_mac) = signed_query(&k);
    let t = find(&q).unwrap().unwrap();
    let failure = TsigFailure {
        request_mac: Some(t.mac.clone()),
        ..TsigFailure::of(&t, TsigError::BadTrunc)
    };
    let mut resp = response_to(&q, 0);
    error_response_tsig(&mut resp, &failure, &k, NOW);
    let rt = find(&resp).unwrap().unwrap();
    assert_eq!((rt.error, rt.mac.len(), rt.other.len()), (22, 32, 0));
    let mut client = ResponseVerifier::new(&k, request_mac);
    assert_eq!(client.verify(&resp, NOW), Err(TsigError::BadTrunc));
}

#[test]
fn mixed_case_names_digest_in_lower_case() {
    // A peer that writes the key and algorithm names in upper case signs
    // over their lower-case forms (RFC 8945 4.3.3).
    let k = key(Algorithm::HmacSha256);
    let mut q = query();
    let key_upper = n("TEST.KEY");
    let alg_upper = n("HMAC-SHA256");
    let vars = Variables {
        key_name: &key_upper,
        algorithm: &alg_upper,
        time_signed: NOW,
        fudge: 300,
        error: 0,
        other: &[],
    };
    let mut hasher = Hasher::new(&k);
    hasher.update(&q);
    vars.digest(&mut hasher);
    let mac = hasher.finalize();
    append_tsig(&mut q, &vars, &mac, ID);
    let v = verify_request(&q, &k, NOW).unwrap().unwrap();
    assert_eq!(v.mac, mac);
    // The same as signing with the lower-case names.
    let (_, lower_mac) = signed_query(&k);
    assert_eq!(mac, lower_mac);
}

#[test]
fn short_buffers_are_left_alone() {
    let k = key(Algorithm::HmacSha256);
    let mut short = vec![0u8; 5];
    assert!(sign_request(&mut short, &k, NOW, 300).is_empty());
    assert_eq!(short.len(), 5);
    let (q, _) = signed_query(&k);
    let v = verify_request(&q, &k, NOW).unwrap().unwrap();
    ResponseSigner::new(&v).sign(&mut short, NOW);
    assert_eq!(short.len(), 5);
}

#[test]
fn signed_response_flags_survive() {
    let k = key(Algorithm::HmacSha224);
    let (q, request_mac) = signed_query(&k);
    let v = verify_request(&q, &k, NOW).unwrap().unwrap();
    let mut resp = response_to(&q, 3);
    ResponseSigner::new(&v).sign(&mut resp, NOW);
    let parsed = Message::parse(&resp).unwrap();
    assert!(parsed.header.has(flags::QR) && parsed.header.has(flags::AA));
    assert_eq!(parsed.answers.len(), 3);
    assert_eq!(
        ResponseVerifier::new(&k, request_mac).verify(&resp, NOW),
        Ok(())
    );
}

proptest::proptest! {
    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(proptest::num::u8::ANY, 0..400)) {
        let ring = vec![key(Algorithm::HmacSha256), key(Algorithm::HmacMd5)];
        let _ = find(&data);
        if let Err(failure) = verify_request(&data, &ring, NOW) {
            let mut resp = query();
            error_response_tsig(&mut resp, &failure, &ring, NOW);
        }
        let mut client = ResponseVerifier::new(&ring[0], vec![1; 32]);
        let _ = client.verify(&data, NOW);
    }

    #[test]
    fn random_header_and_tail_never_panic(
        head in proptest::collection::vec(proptest::num::u8::ANY, 12),
        tail in proptest::collection::vec(proptest::num::u8::ANY, 0..120),
    ) {
        // A header claiming one question and up to a few records, then a
        // TSIG-shaped tail: reaches the RDATA reader far more often than
        // plain random bytes.
        let mut m = head;
        m[4..6].copy_from_slice(&[0, 1]);
        m[6] = 0; m[8] = 0; m[10] = 0;
        m[7] %= 2; m[9] %= 2; m[11] %= 3;
        m.extend_from_slice(b"\x00\x00\x06\x00\x01\x04test\x03key\x00\x00\xFA\x00\xFF\x00\x00\x00\x00");
        m.extend_from_slice(&tail);
        let ring = [key(Algorithm::HmacSha256)];
        let _ = find(&m);
        let _ = verify_request(&m, &ring[..], NOW);
    }

    #[test]
    fn changed_octets_never_verify(
        index in 2usize..1000,
        delta in 1u8..=255,
        alg in 0usize..6,
    ) {
        // Any change to the signed part (the ID aside) or to the MAC.
        let k = key(Algorithm::ALL[alg]);
        let (q, _) = signed_query(&k);
        let t = find(&q).unwrap().unwrap();
        let mac_end = q.len() - 6;
        let mac_start = mac_end - t.mac.len();
        let covered: Vec<usize> = (2..t.start).chain(mac_start..mac_end).collect();
        let at = covered[index % covered.len()];
        let mut bad = q.clone();
        bad[at] = bad[at].wrapping_add(delta);
        proptest::prop_assert!(verify_request(&bad, &[k][..], NOW).is_err());
    }
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Queries captured from real peers (`tests/tsig_peers.rs` sets up the
/// same exchange live) with key `testkey.`, secret
/// `aGVyb24gdHNpZyBpbnRlcm9wIHRlc3Qgc2VjcmV0ISE=`: `kdig -y hmac-sha256:...
/// example.com SOA` (Knot 3.2.6, no EDNS) and `dig -y hmac-md5:...
/// example.com SOA` (BIND 9.18.49, OPT with a cookie).
const PEER_QUERIES: [(Algorithm, &str); 2] = [
    (
        Algorithm::HmacSha256,
        "d42e01200001000000000001076578616d706c6503636f6d000006000107746573746b65790000fa00ff\
         00000000003d0b686d61632d7368613235360000006b01d662012c0020d030fdda14f5b94dfe3cef789d\
         3736b83d4cec6ccbee634336f884ca2ac6aa1bd42e00000000",
    ),
    (
        Algorithm::HmacMd5,
        "111e01200001000000000002076578616d706c6503636f6d000006000100002904d000000000000c000a\
         0008b62f7c2308aed2b607746573746b65790000fa00ff00000000003a08686d61632d6d643507736967\
         2d616c670372656703696e740000006b01d663012c0010d3b6100b4ef623d351e61386530280f3111e00\
         000000",
    ),
];

#[test]
fn known_answers_from_kdig_and_dig() {
    for (alg, hex) in PEER_QUERIES {
        let q = unhex(hex);
        let k = Key::from_base64(
            "testkey",
            alg,
            "aGVyb24gdHNpZyBpbnRlcm9wIHRlc3Qgc2VjcmV0ISE=",
        )
        .unwrap();
        let t = find(&q).unwrap().unwrap();
        assert_eq!(t.fudge, 300);
        let v = verify_request(&q, &k, t.time_signed + 1).unwrap().unwrap();
        assert_eq!(v.mac, t.mac);
        // Signing the same message at the same time gives the peer's bytes.
        let mut ours = q[..t.start].to_vec();
        ours[11] -= 1;
        let mac = sign_request(&mut ours, &k, t.time_signed, t.fudge);
        assert_eq!(mac, t.mac, "{alg}");
        assert_eq!(ours, q, "{alg}");
    }
}

/// The processor verifies at the position `parse_query` found: the same
/// verdict as walking the message again, for good, bad and misplaced
/// signatures.
#[test]
fn verify_at_the_parsed_position_agrees_with_verify_request() {
    let k = key(Algorithm::HmacSha256);
    let (good, _) = signed_query(&k);
    let tampered = replace_mac(&good, &[0x55; 32]);
    let late = signed_query(&k).0;
    for (msg, now) in [(&good, NOW), (&tampered, NOW), (&late, NOW + 1000)] {
        let at = crate::message::parse_query(msg)
            .unwrap()
            .tsig
            .map(|r| r.start);
        let walked = verify_request(msg, &k, now).map(|v| v.map(|v| v.mac));
        let parsed = verify_request_at(msg, at, &k, now).map(|v| v.map(|v| v.mac));
        assert_eq!(walked, parsed);
    }
    assert!(
        verify_request_at(&query(), None, &k, NOW)
            .unwrap()
            .is_none()
    );
    // A TSIG last in the authority section: FormErr, as `find` says.
    let mut misplaced = good.clone();
    misplaced[9] = 1; // NSCOUNT 1
    misplaced[11] = 0; // ARCOUNT 0
    let at = crate::message::parse_query(&misplaced)
        .unwrap()
        .tsig
        .map(|r| r.start);
    let failure = verify_request_at(&misplaced, at, &k, NOW).unwrap_err();
    assert_eq!(failure.error, TsigError::FormErr);
    assert_eq!(verify_err(&misplaced, &k, NOW).error, TsigError::FormErr);
}

/// A relay's re-signing: the TSIG taken off gives back the message as it
/// was before it was signed, which another key then signs and verifies.
#[test]
fn strip_takes_the_tsig_off_and_another_key_signs_again() {
    let (first, second) = (key(Algorithm::HmacSha256), {
        let mut k = key(Algorithm::HmacSha512);
        k.name = n("relay.key");
        k
    });
    let (mut m, _) = signed_query(&first);
    assert!(strip(&mut m).unwrap());
    assert_eq!(m, query());
    assert!(!strip(&mut m).unwrap(), "unsigned: left alone");
    assert_eq!(m, query());
    sign_request(&mut m, &second, NOW, DEFAULT_FUDGE);
    let ring = vec![second.clone()];
    let verified = verify_request(&m, &ring, NOW).unwrap().unwrap();
    assert_eq!(verified.key.name, n("relay.key"));
    // A response signed by the server strips the same way.
    let mut response = response_to(&m, 2);
    ResponseSigner::new(&verified).sign(&mut response, NOW);
    let signed_len = response.len();
    assert!(strip(&mut response).unwrap());
    assert!(response.len() < signed_len);
    assert_eq!(response, response_to(&m, 2));
}

#[test]
fn strip_of_a_malformed_message_is_formerr() {
    let (m, _) = signed_query(&key(Algorithm::HmacSha256));
    for cut in [5, 20, m.len() - 1] {
        let mut short = m[..cut].to_vec();
        assert_eq!(strip(&mut short), Err(TsigError::FormErr), "cut at {cut}");
        assert_eq!(short, m[..cut], "left as it was");
    }
    let mut extra = m.clone();
    extra.push(0);
    assert_eq!(strip(&mut extra), Err(TsigError::FormErr), "trailing octet");
}
