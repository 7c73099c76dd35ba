//! Signs a zone file with a new key and writes the signed zone as text:
//! `sign_zone ORIGIN IN OUT [13|15] [nsec|nsec3|optout]`. For checking
//! the signer with other tools (`dnssec-verify`, `ldns-verify-zone`) and
//! timing it (`docs/benchmarks/signing.md`); the server signs through the
//! same `sign_zone`.

use std::io::Write;
use std::time::Instant;

use heron_dnssec::keys::{Algorithm, KeyRole, SigningKey};
use heron_dnssec::sign::{Denial, SignConfig, ZoneKey, sign_zone};
use heron_proto::Name;
use heron_proto::rdata::format_text;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: sign_zone ORIGIN IN OUT [13|15] [nsec|nsec3|optout]");
        std::process::exit(2);
    }
    let origin = Name::parse(&args[1]).expect("an origin");
    let algorithm = args
        .get(4)
        .and_then(|a| a.parse().ok())
        .and_then(Algorithm::from_number)
        .unwrap_or(Algorithm::EcdsaP256Sha256);
    let denial = match args.get(5).map(String::as_str) {
        Some("nsec3") | Some("optout") => Denial::Nsec3 {
            iterations: 0,
            salt: Vec::new(),
            opt_out: args[5] == "optout",
        },
        _ => Denial::Nsec,
    };
    let started = Instant::now();
    let loaded = heron_zone::load_zone_file(std::path::Path::new(&args[2]), &origin)
        .unwrap_or_else(|p| panic!("{p:?}"));
    let loaded_at = started.elapsed();
    let (key, _) = SigningKey::generate(algorithm).expect("a key");
    let keys = vec![ZoneKey::new(key, KeyRole::Csk)];
    let config = SignConfig {
        denial,
        dnskey_ttl: 3600,
        validity: 14 * 86400,
        jitter: 5 * 86400,
        inception_offset: 3600,
        refresh: 5 * 86400,
        serial: None,
    };
    let now = heron_proto::time::unix_now();
    let signed = sign_zone(&loaded.zone, &keys, &config, now).expect("signed");
    let signed_at = started.elapsed();
    let mut out = std::io::BufWriter::new(std::fs::File::create(&args[3]).expect("OUT"));
    let mut line = String::new();
    for node in signed.zone.nodes_in_canonical_order() {
        let owner = node.owner().to_string();
        for rrset in node.rrsets() {
            let sets = [(rrset.rtype, rrset.ttl(), rrset.rdatas().collect::<Vec<_>>())];
            let sigs = (
                heron_proto::RType::RRSIG,
                rrset.sig_ttl(),
                rrset.sigs().collect(),
            );
            for (rtype, ttl, rdatas) in sets.into_iter().chain([sigs]) {
                for rdata in rdatas {
                    line.clear();
                    format_text(rtype, &rdata, &mut line);
                    writeln!(out, "{owner} {ttl} IN {rtype} {line}").expect("write");
                }
            }
        }
    }
    out.flush().expect("write");
    eprintln!(
        "load {:.3}s sign+build {:.3}s signatures {} records {}",
        loaded_at.as_secs_f64(),
        (signed_at - loaded_at).as_secs_f64(),
        signed.signatures,
        signed.zone.record_count()
    );
}
