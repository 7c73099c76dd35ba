//! What TSIG costs a transfer, measured in-process: the time to sign and
//! to verify every message of the large zone's AXFR with Heron's code, on
//! the secondary's CPU. Whole transfers on these machines spread by ±20%
//! from run to run, several times TSIG's share, so the end-to-end ratio
//! alone cannot tell +3% from +8%; this part of it can be read.

use std::time::Instant;

use heron_proto::tsig::{self, Algorithm, Key, ResponseSigner, ResponseVerifier};
use heron_proto::{Name, RType};
use heron_testkit::{QueryOpts, build_query};
use serde::{Deserialize, Serialize};

use super::peers::TsigKey;
use crate::stats::Spread;

/// Milliseconds to sign (as a primary does) and to verify (as a secondary
/// does) one whole AXFR, median and spread of the repeats.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TsigWork {
    pub sign_ms: Spread,
    pub verify_ms: Spread,
}

/// Repeats of the in-process measurement.
const REPEATS: usize = 7;

/// Measures on a thread pinned to `cpu`, with `messages` the unsigned
/// messages of a transfer of `origin`.
pub fn measure(
    messages: &[Vec<u8>],
    origin: &str,
    key: &TsigKey,
    cpu: usize,
) -> Result<TsigWork, String> {
    let key = Key::from_base64(&key.name, Algorithm::HmacSha256, &key.secret)
        .map_err(|e| format!("TSIG key: {e}"))?;
    let origin = Name::parse(origin).map_err(|e| e.to_string())?;
    std::thread::scope(|s| {
        s.spawn(|| {
            heron_sys::cpu::pin_current_thread(&[cpu])
                .map_err(|e| format!("pinning to CPU {cpu}: {e}"))?;
            let (mut sign, mut verify) = (Vec::new(), Vec::new());
            for _ in 0..REPEATS {
                let (s, v) = sign_and_verify(messages, &origin, &key)?;
                sign.push(s);
                verify.push(v);
            }
            Ok(TsigWork {
                sign_ms: Spread::of(&sign),
                verify_ms: Spread::of(&verify),
            })
        })
        .join()
        .map_err(|_| "the TSIG measurement panicked".to_string())?
    })
}

/// One signed stream: milliseconds to sign every message, then to verify
/// them all in order.
fn sign_and_verify(messages: &[Vec<u8>], origin: &Name, key: &Key) -> Result<(f64, f64), String> {
    let now = unix_now();
    let mut request = build_query(origin, RType::AXFR, &QueryOpts::default());
    let request_mac = tsig::sign_request(&mut request, key, now, tsig::DEFAULT_FUDGE);
    let verified = tsig::verify_request(&request, key, now)
        .map_err(|e| format!("own request: {e}"))?
        .ok_or("own request unsigned")?;
    // Copies made before the clock starts, with room for the TSIG RR.
    let mut signed: Vec<Vec<u8>> = messages
        .iter()
        .map(|m| {
            let mut v = Vec::with_capacity(m.len() + key.rr_len());
            v.extend_from_slice(m);
            v
        })
        .collect();
    let started = Instant::now();
    let mut signer = ResponseSigner::new(&verified);
    for msg in &mut signed {
        signer.sign(msg, now);
    }
    let sign_ms = started.elapsed().as_secs_f64() * 1e3;
    let started = Instant::now();
    let mut verifier = ResponseVerifier::new(key, request_mac);
    for msg in &signed {
        verifier
            .verify(msg, now)
            .map_err(|e| format!("verifying our own signature: {e}"))?;
    }
    verifier.finish().map_err(|e| e.to_string())?;
    let verify_ms = started.elapsed().as_secs_f64() * 1e3;
    Ok((sign_ms, verify_ms))
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
