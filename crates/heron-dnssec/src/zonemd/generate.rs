//! Signing with a ZONEMD (RFC 8976 3): the apex ZONEMD RRset is digested
//! last, over the signed zone, and then signed itself.
//!
//! The digest excludes the apex ZONEMD and its RRSIGs, so the zone is
//! signed once with a placeholder ZONEMD (which puts ZONEMD in the apex
//! NSEC/NSEC3 type bitmap), digested, and signed again with the real
//! one: the second signing keeps every other signature (they are fresh)
//! and signs only the changed ZONEMD RRset.

use heron_proto::{Name, RType};
use heron_zone::Zone;
use heron_zone::diff::{DiffRecord, ZoneDiff};

use super::{HashAlg, Verdict, digest, rdata, verify};

use crate::sign::{SignConfig, SignError, Signed, ZoneKey, sign_zone_after};

/// Signs `zone` as [`sign_zone_after`] does, with an apex ZONEMD of `alg`
/// (replacing any the zone had) that verifies.
pub fn sign_with_zonemd(
    zone: &Zone,
    previous: Option<&Zone>,
    keys: &[ZoneKey],
    config: &SignConfig,
    now: u64,
    alg: HashAlg,
) -> Result<Signed, SignError> {
    let serial = config.serial.unwrap_or(zone.serial());
    let placeholder = vec![0; alg.digest_len()];
    let first = with_zonemd(zone, serial, &rdata(serial, alg, &placeholder))?;
    let once = sign_zone_after(&first, previous, keys, config, now)?;
    let real = rdata(serial, alg, &digest(&once.zone, alg));
    let second = with_zonemd(&first, serial, &real)?;
    // The SOA already has the serial: signed as it is, it keeps its RRSIG.
    let config = SignConfig {
        serial: None,
        ..config.clone()
    };
    let mut twice = sign_zone_after(&second, Some(&once.zone), keys, &config, now)?;
    match verify(&twice.zone) {
        Verdict::Verified(_) => {
            twice.signatures += once.signatures;
            Ok(twice)
        }
        other => Err(SignError(format!(
            "the ZONEMD made does not verify ({other:?})"
        ))),
    }
}

/// `zone` served unsigned ([`crate::sign::unsigned_zone`]) with an apex
/// ZONEMD of `alg` that verifies: a zone gone insecure keeps its ZONEMD.
pub fn unsigned_with_zonemd(
    zone: &Zone,
    serial: Option<u32>,
    alg: HashAlg,
) -> Result<Signed, SignError> {
    let serial = serial.unwrap_or(zone.serial());
    let placeholder = vec![0; alg.digest_len()];
    let bare = crate::sign::unsigned_zone(zone, None)?;
    let first = with_zonemd(&bare.zone, serial, &rdata(serial, alg, &placeholder))?;
    let real = rdata(serial, alg, &digest(&first, alg));
    let zone = with_zonemd(&first, serial, &real)?;
    match verify(&zone) {
        Verdict::Verified(_) => Ok(Signed { zone, ..bare }),
        other => Err(SignError(format!(
            "the ZONEMD made does not verify ({other:?})"
        ))),
    }
}

/// `zone` with its SOA serial set to `serial` and its apex ZONEMD RRset
/// replaced by one record of `rdata` (TTL of the SOA).
fn with_zonemd(zone: &Zone, serial: u32, rdata: &[u8]) -> Result<Zone, SignError> {
    let origin: Name = zone.origin().clone();
    let soa = zone.soa();
    let old_soa = DiffRecord {
        owner: origin.clone(),
        rtype: RType::SOA,
        ttl: soa.ttl(),
        rdata: soa.first_rdata().into_owned(),
    };
    let mut new_soa = old_soa.clone();
    let at = new_soa.rdata.len() - 20;
    new_soa.rdata[at..at + 4].copy_from_slice(&serial.to_be_bytes());
    let deleted = match zone.apex().rrset(RType::ZONEMD) {
        Some(set) => (set.rdatas())
            .map(|r| DiffRecord {
                owner: origin.clone(),
                rtype: RType::ZONEMD,
                ttl: set.ttl(),
                rdata: r.into_owned(),
            })
            .collect(),
        None => Vec::new(),
    };
    let added = vec![DiffRecord {
        owner: origin.clone(),
        rtype: RType::ZONEMD,
        ttl: soa.ttl(),
        rdata: rdata.to_vec(),
    }];
    let diff = ZoneDiff {
        old_soa,
        new_soa,
        deleted,
        added,
    };
    zone.apply(&diff).map_err(|problems| {
        let all: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        SignError(format!("cannot add the ZONEMD: {}", all.join("; ")))
    })
}
