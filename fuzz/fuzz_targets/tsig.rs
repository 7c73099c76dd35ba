//! Any bytes as a signed message: finding and verifying its TSIG must
//! reject or accept, never panic. What passes is checked further: a request
//! that verifies gets a signed answer the client side accepts; an unsigned,
//! well-formed message signed here verifies; an error answer carries a TSIG
//! that reads back with the right error, and a signed one (BADTIME)
//! verifies on the client side.
#![no_main]

use std::sync::OnceLock;

use heron_proto::Name;
use heron_proto::tsig::{
    Algorithm, Key, ResponseSigner, ResponseVerifier, TsigError, error_response_tsig, find,
    sign_request, verify_request,
};
use libfuzzer_sys::fuzz_target;

/// The clock of every run; `gen_seeds.py` signs seeds at this time (and
/// some outside the fudge, for BADTIME).
const NOW: u64 = 1_700_000_000;

/// One key per algorithm, named `<algorithm>.fuzz.`, secret `fuzz secret`
/// (as in `gen_seeds.py`).
fn keys() -> &'static [Key] {
    static KEYS: OnceLock<Vec<Key>> = OnceLock::new();
    KEYS.get_or_init(|| {
        Algorithm::ALL
            .iter()
            .map(|&alg| {
                let name = Name::parse(&format!("{}.fuzz.", alg.text())).unwrap();
                Key::new(name, alg, b"fuzz secret".to_vec())
            })
            .collect()
    })
}

/// A bare answer header for `msg`'s ID: QR set, no records.
fn answer_header(msg: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; 12];
    out[..2].copy_from_slice(msg.get(..2).unwrap_or(&[0, 0]));
    out[2] = 0x80;
    out
}

fuzz_target!(|data: &[u8]| {
    let keys = keys();
    let found = find(data);
    match verify_request(data, keys, NOW) {
        Ok(Some(verified)) => {
            let mut resp = answer_header(data);
            ResponseSigner::new(&verified).sign(&mut resp, NOW);
            let mut client = ResponseVerifier::new(&verified.key, verified.mac.clone());
            assert_eq!(client.verify(&resp, NOW), Ok(()));
            assert_eq!(client.finish(), Ok(()));
        }
        Ok(None) => {
            assert!(matches!(found, Ok(None)));
            let key = &keys[usize::from(data.get(2).copied().unwrap_or(0)) % keys.len()];
            let mut signed = data.to_vec();
            let mac = sign_request(&mut signed, key, NOW, 300);
            let verified = verify_request(&signed, keys, NOW)
                .expect("a message signed here verifies")
                .expect("and is signed");
            assert_eq!(verified.mac, mac);
        }
        Err(failure) => {
            if found.is_err() {
                assert_eq!(failure.error, TsigError::FormErr);
            }
            let mut resp = answer_header(data);
            error_response_tsig(&mut resp, &failure, keys, NOW);
            if failure.error == TsigError::FormErr {
                assert_eq!(resp.len(), 12, "a FORMERR answer carries no TSIG");
                return;
            }
            let tsig = find(&resp).expect("our TSIG parses").expect("and is there");
            assert_eq!(tsig.error, failure.error.rcode());
            if let (TsigError::BadTime, Some(mac)) = (failure.error, &failure.request_mac) {
                let key = keys
                    .iter()
                    .find(|k| Some(&k.name) == failure.key_name.as_ref())
                    .expect("BADTIME comes only from a known key");
                let mut client = ResponseVerifier::new(key, mac.clone());
                assert_eq!(client.verify(&resp, NOW), Err(TsigError::BadTime));
            }
        }
    }
});
