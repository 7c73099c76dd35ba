//! Differences of signed zones that RFCs leave to the signer, which
//! `classify.rs` sets aside as tolerated: a zone moved with its keys is
//! signed again by Heron, so its denial chain may be made with other
//! NSEC3 parameters, its NSEC3PARAM served with another TTL, and BIND's
//! private signing-state records are not carried over (black-box finding
//! BT-8: such a zone could never compare clean).

use heron_proto::RType;
use heron_proto::message::Record;

use super::normalize::Response;

/// BIND's private type for its signing state (`sig-signing-type`, 65534
/// unless set otherwise), held at the apex of a zone BIND signs.
const BIND_SIGNING_STATE: u16 = 65534;

/// The hash algorithm, and iterations and salt, of an NSEC3 or NSEC3PARAM
/// RDATA (both start so: algorithm, flags, iterations, salt).
fn nsec3_parameters_of(rdata: &[u8]) -> Option<(u8, &[u8])> {
    let salt_len = *rdata.get(4)? as usize;
    let end = 5 + salt_len;
    let iterations_and_salt = rdata.get(2..end)?;
    Some((rdata[0], iterations_and_salt))
}

/// Every NSEC3 parameter set a response's NSEC3 and NSEC3PARAM records use.
fn parameters_used(r: &Response) -> Vec<(u8, Vec<u8>)> {
    let mut used: Vec<(u8, Vec<u8>)> = (r.sections.iter().flatten())
        .filter(|rec| matches!(rec.rtype, RType::NSEC3 | RType::NSEC3PARAM))
        .filter_map(|rec| nsec3_parameters_of(&rec.rdata))
        .map(|(alg, params)| (alg, params.to_vec()))
        .collect();
    used.sort();
    used.dedup();
    used
}

fn covers(r: &Record, rtype: RType) -> bool {
    r.rtype == RType::RRSIG && r.rdata.get(..2) == Some(&rtype.0.to_be_bytes()[..])
}

/// NSEC3 chains made with other parameters (salt, iterations): their
/// NSEC3 records prove the same with other owner hashes (RFC 5155; RFC
/// 9276 asks for no salt and no extra iterations, which Heron's policy
/// translated from Knot's may have changed), and the NSEC3PARAM says so.
/// Both sides' NSEC3 and NSEC3PARAM records and their RRSIGs are left out;
/// true if they were.
pub(super) fn nsec3_parameters(old: &mut Response, heron: &mut Response) -> bool {
    let (theirs, ours) = (parameters_used(old), parameters_used(heron));
    if theirs.is_empty() || ours.is_empty() || theirs == ours {
        return false;
    }
    let chain = |r: &Record| {
        matches!(r.rtype, RType::NSEC3 | RType::NSEC3PARAM)
            || covers(r, RType::NSEC3)
            || covers(r, RType::NSEC3PARAM)
    };
    for r in [&mut *old, &mut *heron] {
        for section in r.sections.iter_mut() {
            section.retain(|rec| !chain(rec));
        }
    }
    true
}

/// The NSEC3PARAM RRset answered alike but for its TTL (BIND and Heron
/// serve it with TTL 0, Knot with the zone's): it only tells secondaries
/// how the chain is made, and no resolver caches it. The RRSIG's original
/// TTL follows the RRset's. Heron's is made the old server's; true if
/// they differed.
pub(super) fn nsec3param_ttl(old: &Response, heron: &mut Response) -> bool {
    let of = |r: &Response| -> Vec<(Vec<u8>, u32)> {
        (r.sections[0].iter())
            .filter(|rec| rec.rtype == RType::NSEC3PARAM)
            .map(|rec| (rec.rdata.clone(), rec.ttl))
            .collect()
    };
    let (theirs, ours) = (of(old), of(heron));
    let rdatas = |set: &[(Vec<u8>, u32)]| set.iter().map(|(d, _)| d.clone()).collect::<Vec<_>>();
    if theirs.is_empty() || theirs == ours || rdatas(&theirs) != rdatas(&ours) {
        return false;
    }
    let ttl = theirs[0].1;
    for rec in heron.sections[0].iter_mut() {
        if rec.rtype == RType::NSEC3PARAM {
            rec.ttl = ttl;
        } else if covers(rec, RType::NSEC3PARAM) && rec.rdata.len() >= 8 {
            rec.ttl = ttl;
            rec.rdata[4..8].copy_from_slice(&ttl.to_be_bytes());
        }
    }
    true
}

/// BIND's private signing-state records (type 65534) at the apex of a
/// zone BIND signs, and that type in the apex's NSEC or NSEC3 type
/// bitmap, where one side has them and the other not: they record BIND's
/// own signing progress, which no other signer keeps. Left out of both;
/// true if they were.
pub(super) fn bind_signing_state(old: &mut Response, heron: &mut Response) -> bool {
    // Asked for the type itself: the old server answers it, Heron has
    // no such data.
    let only_state = |r: &Response| {
        !r.sections[0].is_empty()
            && (r.sections[0].iter()).all(|rec| {
                rec.rtype.0 == BIND_SIGNING_STATE || covers(rec, RType(BIND_SIGNING_STATE))
            })
    };
    let asked = asked_type(old) == Some(BIND_SIGNING_STATE);
    if asked && old.rcode == heron.rcode && only_state(old) && heron.sections[0].is_empty() {
        old.sections = Default::default();
        heron.sections = Default::default();
        return true;
    }
    let mut cleaned = [old.clone(), heron.clone()];
    let mut changed = [false, false];
    for (r, changed) in cleaned.iter_mut().zip(changed.iter_mut()) {
        for section in r.sections.iter_mut() {
            let before = section.len();
            section.retain(|rec| {
                rec.rtype.0 != BIND_SIGNING_STATE && !covers(rec, RType(BIND_SIGNING_STATE))
            });
            *changed |= section.len() != before;
            for rec in section.iter_mut() {
                *changed |= without_type_in_bitmap(rec, BIND_SIGNING_STATE);
            }
        }
    }
    // Only where the sides differ in them: a zone whose file holds such
    // records serves them on both.
    if changed[0] == changed[1] {
        return false;
    }
    let [cleaned_old, cleaned_heron] = cleaned;
    (*old, *heron) = (cleaned_old, cleaned_heron);
    true
}

/// The type asked, from the question echoed (its name, type and class).
fn asked_type(r: &Response) -> Option<u16> {
    let at = r.question.len().checked_sub(4)?;
    Some(u16::from_be_bytes([r.question[at], r.question[at + 1]]))
}

/// Clears `rtype` from the type bitmap of an NSEC or NSEC3 record; true if
/// it was there. A bitmap that does not parse is left as it is.
fn without_type_in_bitmap(rec: &mut Record, rtype: u16) -> bool {
    let Some(at) = bitmap_start(rec) else {
        return false;
    };
    let Some(types) = bitmap_types(&rec.rdata[at..]) else {
        return false;
    };
    if !types.contains(&rtype) {
        return false;
    }
    let kept: Vec<u16> = types.into_iter().filter(|&t| t != rtype).collect();
    rec.rdata.truncate(at);
    heron_proto::rdata::encode_type_bitmap(&kept, &mut rec.rdata);
    true
}

/// Where an NSEC or NSEC3 RDATA's type bitmap starts.
fn bitmap_start(rec: &Record) -> Option<usize> {
    let d = &rec.rdata;
    match rec.rtype {
        RType::NSEC => {
            // The next owner name, uncompressed.
            let mut at = 0;
            loop {
                let len = *d.get(at)? as usize;
                at += 1 + len;
                if len == 0 {
                    return Some(at);
                }
            }
        }
        RType::NSEC3 => {
            let salt_end = 5 + *d.get(4)? as usize;
            let end = salt_end + 1 + *d.get(salt_end)? as usize;
            (end <= d.len()).then_some(end)
        }
        _ => None,
    }
}

/// The types of a type bitmap (RFC 4034 4.1.2), None if it does not parse.
fn bitmap_types(bitmap: &[u8]) -> Option<Vec<u16>> {
    let mut types = Vec::new();
    let mut at = 0;
    while at < bitmap.len() {
        let window = u16::from(*bitmap.get(at)?);
        let len = *bitmap.get(at + 1)? as usize;
        let bits = bitmap.get(at + 2..at + 2 + len)?;
        for (i, byte) in bits.iter().enumerate() {
            for bit in 0..8 {
                if byte & (0x80 >> bit) != 0 {
                    types.push(window << 8 | (i * 8 + bit) as u16);
                }
            }
        }
        at += 2 + len;
    }
    Some(types)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(rtype: RType, rdata: Vec<u8>) -> Record {
        Record {
            name: heron_proto::Name::parse("s.test").unwrap(),
            rtype,
            class: heron_proto::Class::IN,
            ttl: 300,
            rdata,
        }
    }

    fn bitmap(types: &[u16]) -> Vec<u8> {
        let mut out = Vec::new();
        heron_proto::rdata::encode_type_bitmap(types, &mut out);
        out
    }

    #[test]
    fn a_type_leaves_an_nsec_bitmap_and_the_rest_stays() {
        let mut rdata = heron_proto::Name::parse("a.s.test")
            .unwrap()
            .as_wire()
            .to_vec();
        rdata.extend(bitmap(&[2, 6, 46, 47, 48, 65534]));
        let mut nsec = record(RType::NSEC, rdata);
        assert!(without_type_in_bitmap(&mut nsec, 65534));
        let at = bitmap_start(&nsec).unwrap();
        assert_eq!(
            bitmap_types(&nsec.rdata[at..]),
            Some(vec![2, 6, 46, 47, 48])
        );
        assert!(!without_type_in_bitmap(&mut nsec, 65534));
    }

    #[test]
    fn a_type_leaves_an_nsec3_bitmap() {
        // SHA-1, opt-out clear, 0 iterations, salt AB CD, a 20-octet hash.
        let mut rdata = vec![1, 0, 0, 0, 2, 0xab, 0xcd, 20];
        rdata.extend([7; 20]);
        rdata.extend(bitmap(&[1, 65534]));
        let mut nsec3 = record(RType::NSEC3, rdata);
        assert!(without_type_in_bitmap(&mut nsec3, 65534));
        let at = bitmap_start(&nsec3).unwrap();
        assert_eq!(bitmap_types(&nsec3.rdata[at..]), Some(vec![1]));
        assert_eq!(
            nsec3_parameters_of(&nsec3.rdata),
            Some((1, &[0, 0, 2, 0xab, 0xcd][..]))
        );
    }

    /// Random and mutated NSEC, NSEC3 and NSEC3PARAM RDATA (the old
    /// server's, read as it came) never panic the readers, and a bitmap
    /// rewritten is one that reads back.
    #[test]
    fn random_and_mutated_rdata_never_panic() {
        let mut random = super::super::probes::Random::new(7);
        let mut good = vec![1, 0, 0, 0, 2, 0xab, 0xcd, 20];
        good.extend([7; 20]);
        good.extend(bitmap(&[1, 2, 6, 46, 65534]));
        for round in 0..20_000 {
            let mut rdata = match round % 2 {
                0 => good.clone(),
                _ => (0..random.next() % 64)
                    .map(|_| random.next() as u8)
                    .collect(),
            };
            for _ in 0..(random.next() % 4) {
                let at = (random.next() as usize) % rdata.len().max(1);
                if let Some(b) = rdata.get_mut(at) {
                    *b = random.next() as u8;
                }
            }
            let _ = nsec3_parameters_of(&rdata);
            let _ = bitmap_types(&rdata);
            for rtype in [RType::NSEC, RType::NSEC3, RType::NSEC3PARAM] {
                let mut rec = record(rtype, rdata.clone());
                if without_type_in_bitmap(&mut rec, 65534) {
                    let at = bitmap_start(&rec).expect("read before");
                    let types = bitmap_types(&rec.rdata[at..]).expect("reads back");
                    assert!(!types.contains(&65534));
                }
            }
        }
    }

    #[test]
    fn malformed_rdata_is_left_alone() {
        // The last: an NSEC3 hash longer than the RDATA (found by the
        // random test above: it panicked).
        for rdata in [
            vec![],
            vec![3, b'a'],
            vec![1, 0, 0, 0, 9, 1],
            vec![1, 0, 0, 0, 0, 200],
        ] {
            for rtype in [RType::NSEC, RType::NSEC3] {
                let mut rec = record(rtype, rdata.clone());
                assert!(!without_type_in_bitmap(&mut rec, 65534));
                assert_eq!(rec.rdata, rdata);
            }
        }
        assert_eq!(bitmap_types(&[0, 5, 1]), None);
        assert_eq!(nsec3_parameters_of(&[1, 0, 0, 0, 4, 1]), None);
    }
}
