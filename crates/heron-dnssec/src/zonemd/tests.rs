//! The example zones of RFC 8976 Appendix A with their published digests,
//! and ZONEMD RDATA that is malformed, unsupported or for another serial.

use heron_proto::RType;
use heron_proto::name::Name;
use heron_zone::{Zone, load_zone_str};

use super::*;

fn zone(text: &str, origin: &str) -> Zone {
    load_zone_str(text, "t", &Name::parse(origin).unwrap())
        .unwrap_or_else(|p| panic!("{p:?}"))
        .zone
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

const A1_SIMPLE: &str = "$ORIGIN example.
example.      86400  IN  SOA     ns1 admin 2018031900 1800 900 604800 86400
example.      86400  IN  NS      ns1
example.      86400  IN  NS      ns2
example.      86400  IN  ZONEMD  2018031900 1 1 (
    c68090d90a7aed716bc459f9340e3d7c1370d4d24b7e2fc3
    a1ddc0b9a87153b9a9713b3c9ae5cc27777f98b8e730044c )
ns1           3600   IN  A       203.0.113.63
ns2           3600   IN  AAAA    2001:db8::63
";
const A1_DIGEST: &str = "c68090d90a7aed716bc459f9340e3d7c1370d4d24b7e2fc3\
a1ddc0b9a87153b9a9713b3c9ae5cc27777f98b8e730044c";

// Appendix A.2 without its out-of-zone record (foo.test.), which the
// loader refuses and the digest excludes anyway.
const A2_COMPLEX: &str = "$ORIGIN example.
example.      86400  IN  SOA     ns1 admin 2018031900 1800 900 604800 86400
example.      86400  IN  NS      ns1
example.      86400  IN  NS      ns2
example.      86400  IN  ZONEMD  2018031900 1 1 (
    a3b69bad980a3504e1cffcb0fd6397f93848071c93151f55
    2ae2f6b1711d4bd2d8b39808226d7b9db71e34b72077f8fe )
ns1           3600   IN  A       203.0.113.63
NS2           3600   IN  AAAA    2001:db8::63
occluded.sub  7200   IN  TXT     \"I'm occluded but must be digested\"
sub           7200   IN  NS      ns1
duplicate     300    IN  TXT     \"I must be digested just once\"
duplicate     300    IN  TXT     \"I must be digested just once\"
UPPERCASE     3600   IN  TXT     \"canonicalize uppercase owner names\"
*             777    IN  PTR     dont-forget-about-wildcards
mail          3600   IN  MX      20 MAIL1
mail          3600   IN  MX      10 Mail2.Example.
sortme        3600   IN  AAAA    2001:db8::5:61
sortme        3600   IN  AAAA    2001:db8::3:62
sortme        3600   IN  AAAA    2001:db8::4:63
sortme        3600   IN  AAAA    2001:db8::1:65
sortme        3600   IN  AAAA    2001:db8::2:64
non-apex      900    IN  ZONEMD  2018031900 1 1 (
    616c6c6f776564206275742069676e6f7265642e20616c6c
    6f776564206275742069676e6f7265642e20616c6c6f7765 )
";
const A2_DIGEST: &str = "a3b69bad980a3504e1cffcb0fd6397f93848071c93151f55\
2ae2f6b1711d4bd2d8b39808226d7b9db71e34b72077f8fe";

const A3_MULTIPLE: &str = "$ORIGIN example.
example.      86400  IN  SOA     ns1 admin 2018031900 1800 900 604800 86400
example.      86400  IN  NS      ns1.example.
example.      86400  IN  NS      ns2.example.
example.      86400  IN  ZONEMD  2018031900 1 1 (
    62e6cf51b02e54b9b5f967d547ce43136792901f9f88e637
    493daaf401c92c279dd10f0edb1c56f8080211f8480ee306 )
example.      86400  IN  ZONEMD  2018031900 1 2 (
    08cfa1115c7b948c4163a901270395ea226a930cd2cbcf2f
    a9a5e6eb85f37c8a4e114d884e66f176eab121cb02db7d65
    2e0cc4827e7a3204f166b47e5613fd27 )
example.      86400  IN  ZONEMD  2018031900 1 240 (
    e2d523f654b9422a96c5a8f44607bbee )
example.      86400  IN  ZONEMD  2018031900 241 1 (
    e1846540e33a9e4189792d18d5d131f605fc283e )
ns1.example.  3600   IN  A       203.0.113.63
ns2.example.  86400  IN  TXT     \"This example has multiple digests\"
NS2.EXAMPLE.  3600   IN  AAAA    2001:db8::63
";
const A3_SHA384: &str = "62e6cf51b02e54b9b5f967d547ce43136792901f9f88e637\
493daaf401c92c279dd10f0edb1c56f8080211f8480ee306";
const A3_SHA512: &str = "08cfa1115c7b948c4163a901270395ea226a930cd2cbcf2f\
a9a5e6eb85f37c8a4e114d884e66f176eab121cb02db7d652e0cc4827e7a3204f166b47e5613fd27";

#[test]
fn appendix_a1_simple_zone_has_the_published_digest() {
    let z = zone(A1_SIMPLE, "example");
    assert_eq!(hex(&digest(&z, HashAlg::Sha384)), A1_DIGEST);
    assert_eq!(verify(&z), Verdict::Verified(HashAlg::Sha384));
}

#[test]
fn appendix_a2_complex_zone_has_the_published_digest() {
    let z = zone(A2_COMPLEX, "example");
    assert_eq!(hex(&digest(&z, HashAlg::Sha384)), A2_DIGEST);
    assert_eq!(verify(&z), Verdict::Verified(HashAlg::Sha384));
}

#[test]
fn appendix_a3_multiple_digests_both_algorithms_match() {
    let z = zone(A3_MULTIPLE, "example");
    assert_eq!(hex(&digest(&z, HashAlg::Sha384)), A3_SHA384);
    assert_eq!(hex(&digest(&z, HashAlg::Sha512)), A3_SHA512);
    assert!(verify(&z).accepts());
}

#[test]
fn a_changed_record_fails_verification() {
    let tampered = A1_SIMPLE.replace("203.0.113.63", "203.0.113.64");
    let verdict = verify(&zone(&tampered, "example"));
    assert!(matches!(verdict, Verdict::Failed(_)), "{verdict:?}");
    assert!(!verdict.accepts());
}

#[test]
fn a_zone_without_zonemd_is_absent_and_accepted() {
    let text = "$ORIGIN example.\n@ 60 SOA ns1 admin 1 2 3 4 5\n@ 60 NS ns1\nns1 60 A 192.0.2.1\n";
    let verdict = verify(&zone(text, "example"));
    assert_eq!(verdict, Verdict::Absent);
    assert!(verdict.accepts());
}

/// A.1 with its apex ZONEMD replaced by `rdata_text`.
fn a1_with(rdata_text: &str) -> Zone {
    let start = A1_SIMPLE.find("example.      86400  IN  ZONEMD").unwrap();
    let end = A1_SIMPLE.find("ns1           3600").unwrap();
    let mut text = A1_SIMPLE.to_string();
    text.replace_range(start..end, &format!("@ 86400 IN ZONEMD {rdata_text}\n"));
    zone(&text, "example")
}

#[test]
fn unknown_scheme_or_algorithm_is_not_a_failure() {
    let digest = "00".repeat(48);
    assert_eq!(
        verify(&a1_with(&format!("2018031900 9 1 {digest}"))),
        Verdict::Unverifiable
    );
    assert_eq!(
        verify(&a1_with(&format!("2018031900 1 99 {digest}"))),
        Verdict::Unverifiable
    );
}

#[test]
fn a_zonemd_for_another_serial_is_not_verifiable() {
    let wrong = format!("2018031901 1 1 {A1_DIGEST}");
    assert_eq!(verify(&a1_with(&wrong)), Verdict::Unverifiable);
}

#[test]
fn two_records_with_one_scheme_and_algorithm_fail() {
    let start = A1_SIMPLE.find("ns1           3600").unwrap();
    let mut text = A1_SIMPLE.to_string();
    let twin = format!("@ 86400 IN ZONEMD 2018031900 1 1 {}\n", "ab".repeat(48));
    text.insert_str(start, &twin);
    assert!(matches!(
        verify(&zone(&text, "example")),
        Verdict::Failed(_)
    ));
}

#[test]
fn malformed_rdata_is_refused_by_the_parser() {
    assert!(Zonemd::parse(&[]).is_err());
    assert!(Zonemd::parse(&[0, 0, 0, 1, 1]).is_err());
    // Six header octets and an 11-octet digest: one short of the minimum.
    let mut short = vec![0, 0, 0, 1, 1, 1];
    short.extend([7; MIN_DIGEST_LEN - 1]);
    assert!(Zonemd::parse(&short).is_err());
    short.push(7);
    let ok = Zonemd::parse(&short).unwrap();
    assert_eq!(
        (ok.serial, ok.scheme, ok.hash_alg, ok.digest.len()),
        (1, 1, 1, 12)
    );
    assert_eq!(ok.supported(), Some(HashAlg::Sha384));
}

#[test]
fn random_and_mutated_rdata_never_panics() {
    let base = rdata(7, HashAlg::Sha512, &[0x5a; 64]);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..20_000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut input = base.clone();
        input.truncate((seed % 80) as usize);
        if let Some(b) = input.get_mut((seed >> 8) as usize % 70) {
            *b = (seed >> 16) as u8;
        }
        if round % 2 == 0 {
            input = seed.to_le_bytes().repeat((seed >> 40) as usize % 4);
        }
        if let Ok(z) = Zonemd::parse(&input) {
            assert!(z.digest.len() >= MIN_DIGEST_LEN);
            let _ = z.supported();
        }
    }
}

#[test]
fn rdata_round_trips_through_the_parser() {
    let d = [3u8; 48];
    let bytes = rdata(2018031900, HashAlg::Sha384, &d);
    let z = Zonemd::parse(&bytes).unwrap();
    assert_eq!(
        (z.serial, z.supported(), z.digest),
        (2018031900, Some(HashAlg::Sha384), &d[..])
    );
}

mod signing {
    use super::*;
    use crate::keys::{Algorithm, KeyRole, SigningKey};
    use crate::sign::{Denial, SignConfig, ZoneKey};

    const ZONE: &str = "$ORIGIN example.\n$TTL 3600\n@ SOA ns1 h 1 7200 900 1209600 300\n\
        @ NS ns1\nns1 A 192.0.2.1\nwww A 192.0.2.2\nsub NS ns.sub\nns.sub A 192.0.2.4\n";

    fn config(denial: Denial, serial: Option<u32>) -> SignConfig {
        SignConfig {
            denial,
            dnskey_ttl: 3600,
            validity: 14 * 86400,
            jitter: 5 * 86400,
            inception_offset: 3600,
            refresh: 5 * 86400,
            serial,
        }
    }

    /// A CSK, and NSEC3 as RFC 9276 has it.
    fn csk_and_nsec3() -> (Vec<ZoneKey>, Denial) {
        let (key, _) = SigningKey::generate(Algorithm::EcdsaP256Sha256).unwrap();
        let nsec3 = Denial::Nsec3 {
            iterations: 0,
            salt: Vec::new(),
            opt_out: false,
        };
        (vec![ZoneKey::new(key, KeyRole::Csk)], nsec3)
    }

    #[test]
    fn a_signed_zone_gets_a_signed_zonemd_that_verifies() {
        let (keys, nsec3) = csk_and_nsec3();
        for (denial, alg) in [(Denial::Nsec, HashAlg::Sha384), (nsec3, HashAlg::Sha512)] {
            let z = zone(ZONE, "example");
            let cfg = config(denial, Some(5));
            let signed = sign_with_zonemd(&z, None, &keys, &cfg, 1_760_000_000, alg).unwrap();
            assert_eq!(signed.zone.serial(), 5);
            assert_eq!(verify(&signed.zone), Verdict::Verified(alg));
            let apex = signed.zone.apex();
            let set = apex.rrset(RType::ZONEMD).unwrap();
            assert_eq!(set.rdata_count(), 1);
            assert!(set.has_sigs(), "the ZONEMD RRset is signed");
        }
    }

    /// A signed zone gone insecure: every DNSSEC record dropped, the
    /// serial moved on, and a ZONEMD (when asked) made anew over what is
    /// left, unsigned, that verifies.
    #[test]
    fn a_zone_gone_insecure_loses_its_dnssec_records_and_keeps_a_zonemd() {
        let (keys, nsec3) = csk_and_nsec3();
        let z = zone(ZONE, "example");
        let cfg = config(nsec3, Some(5));
        let alg = HashAlg::Sha384;
        let signed = sign_with_zonemd(&z, None, &keys, &cfg, 1_760_000_000, alg).unwrap();
        let dnssec = [
            RType::RRSIG,
            RType::DNSKEY,
            RType::NSEC,
            RType::NSEC3,
            RType::NSEC3PARAM,
        ];
        let has_dnssec = |z: &Zone| {
            z.nodes()
                .any(|n| n.data().any(|s| dnssec.contains(&s.rtype) || s.has_sigs()))
        };
        assert!(has_dnssec(&signed.zone));
        let bare = crate::sign::unsigned_zone(&signed.zone, Some(6))
            .unwrap()
            .zone;
        assert!(!has_dnssec(&bare));
        assert_eq!(bare.serial(), 6);
        let kept = bare.apex().rrset(RType::ZONEMD).map(|s| s.rdata_count());
        assert_eq!(kept, Some(1), "the old ZONEMD is the caller's to replace");
        let with = super::super::unsigned_with_zonemd(&signed.zone, Some(6), alg).unwrap();
        assert!(!has_dnssec(&with.zone));
        assert_eq!(with.zone.serial(), 6);
        assert_eq!(verify(&with.zone), Verdict::Verified(alg));
    }
}
