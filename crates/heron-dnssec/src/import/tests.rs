//! Keys made by the real tools (`dnssec-keygen` from bind9-utils, `keymgr`
//! from knot) are imported with their tags, and sign what their public
//! keys verify.

use std::path::Path;
use std::process::Command;

use ring::rand::SystemRandom;
use ring::signature;

use super::*;
use crate::ds::{DigestType, ds_rdata, ds_text};

fn run(program: &str, args: &[&str], dir: &Path) -> String {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{program} (bind9-utils / knot packages): {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Signs with ring from the imported PKCS#8 and verifies with the imported
/// DNSKEY-form public key.
fn sign_and_verify(key: &ImportedKey) {
    let message = b"heron imports keys";
    let rng = SystemRandom::new();
    match key.algorithm {
        ECDSAP256SHA256 => {
            let pair = signature::EcdsaKeyPair::from_pkcs8(
                &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                &key.pkcs8,
                &rng,
            )
            .unwrap();
            let sig = pair.sign(&rng, message).unwrap();
            let mut point = vec![4];
            point.extend_from_slice(&key.public_key);
            signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point)
                .verify(message, sig.as_ref())
                .expect("the ECDSA signature verifies");
        }
        ED25519 => {
            let pair = signature::Ed25519KeyPair::from_pkcs8(&key.pkcs8).unwrap();
            let sig = pair.sign(message);
            signature::UnparsedPublicKey::new(&signature::ED25519, &key.public_key)
                .verify(message, sig.as_ref())
                .expect("the Ed25519 signature verifies");
        }
        RSASHA256 => {
            let pair = signature::RsaKeyPair::from_pkcs8(&key.pkcs8).unwrap();
            let mut sig = vec![0; pair.public().modulus_len()];
            pair.sign(&signature::RSA_PKCS1_SHA256, &rng, message, &mut sig)
                .unwrap();
            let e_len = usize::from(key.public_key[0]);
            let (e, n) = key.public_key[1..].split_at(e_len);
            signature::RsaPublicKeyComponents { n, e }
                .verify(&signature::RSA_PKCS1_2048_8192_SHA256, message, &sig)
                .expect("the RSA signature verifies");
        }
        other => panic!("algorithm {other}"),
    }
}

fn bind_keygen(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["-K", "."];
    all.extend_from_slice(args);
    all.push("example.com");
    run("dnssec-keygen", &all, dir).trim().to_string()
}

#[test]
fn bind_keys_import_with_their_tags_and_sign() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], u8, u16); 3] = [
        (&["-a", "ECDSAP256SHA256", "-f", "KSK"], 13, 257),
        (&["-a", "ED25519"], 15, 256),
        (&["-a", "RSASHA256", "-b", "2048"], 8, 256),
    ];
    for (args, algorithm, flags) in cases {
        let stem = bind_keygen(dir.path(), args);
        let (_, name_alg, name_tag) = bind::name_parts(&stem).unwrap();
        let imported = bind::read(&dir.path().join(format!("{stem}.key"))).unwrap();
        let key = &imported.key;
        assert_eq!((key.algorithm, key.flags), (algorithm, flags));
        assert_eq!(
            (key.algorithm, key.tag()),
            (name_alg, name_tag),
            "the tool's tag"
        );
        assert_eq!(imported.zone, "example.com.");
        assert!(key.times.created.is_some() && key.times.activate.is_some());
        sign_and_verify(key);
        // The DS Heron computes is the one BIND computes.
        let bind_ds = run(
            "dnssec-dsfromkey",
            &["-2", &format!("{stem}.key")],
            dir.path(),
        );
        let owner = heron_proto::Name::parse("example.com.").unwrap();
        let ours =
            ds_text(&ds_rdata(&owner, &key.dnskey_rdata(), DigestType::Sha256).unwrap()).unwrap();
        assert!(bind_ds.contains(&ours), "{bind_ds} vs {ours}");
    }
}

#[test]
fn bind_timing_metadata_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "-a",
        "ED25519",
        "-P",
        "20300101000000",
        "-A",
        "20300102000000",
        "-I",
        "20310101000000",
        "-D",
        "20320101000000",
    ];
    let stem = bind_keygen(dir.path(), &args);
    let key = bind::read(&dir.path().join(stem)).unwrap().key;
    assert_eq!(key.times.publish, Some(1_893_456_000));
    assert_eq!(key.times.activate, Some(1_893_542_400));
    assert_eq!(key.times.inactive, Some(1_924_992_000));
    assert_eq!(key.times.delete, Some(1_956_528_000));
    // Not yet published in 2026: it starts hidden; in 2030 it is in place.
    let id = "k".to_string();
    let early = key.to_rollover_key(id.clone(), key.role(false), 1_800_000_000);
    assert_eq!(early.dnskey.state, crate::rollover::State::Hidden);
    let late = key.to_rollover_key(id.clone(), key.role(false), 1_900_000_000);
    assert!(late.is_active());
    // Its lifetime counts from the old signer's Activate, not from the
    // import: a ZSK is rolled when that signer would have rolled it.
    assert_eq!(late.active, Some(1_893_542_400));
    // Past its Inactive time the old signer had retired it: it stays so,
    // its signatures leaving caches from then, its DNSKEY published
    // until they are gone (at most until Delete), then gone.
    let retired = key.to_rollover_key(id.clone(), key.role(false), 1_930_000_000);
    assert_eq!(retired.goal, crate::rollover::Goal::Hidden);
    assert_eq!(retired.dnskey.state, crate::rollover::State::Omnipresent);
    assert_eq!(
        retired.zone_rrsig,
        crate::rollover::Record {
            state: crate::rollover::State::Unretentive,
            since: 1_924_992_000
        }
    );
    assert_eq!(retired.retired, Some(1_924_992_000));
    // A successor in place, the old ZSK retired a second ago (Knot swaps
    // the signatures when it retires a ZSK): its DNSKEY stays until its
    // signatures can have left every cache, not a moment less.
    let policy = crate::policy::Policy::default().rollover_policy(60);
    let gone =
        1_924_992_000 + policy.propagation_delay + policy.max_zone_ttl + policy.retire_safety;
    let now = 1_924_992_001;
    let mut successor = key.to_rollover_key("s".into(), Role::Zsk, 1_900_000_000);
    (successor.tag, successor.created) = (key.tag().wrapping_add(1), now);
    let keys = vec![key.to_rollover_key(id.clone(), Role::Zsk, now), successor];
    let mut machine = crate::rollover::Rollover::new(policy, keys);
    let plan = machine.advance(now);
    assert!(plan.dnskey.iter().any(|k| k.tag == key.tag()), "{plan:?}");
    assert!(
        !plan.zone_signers.iter().any(|k| k.tag == key.tag()),
        "{plan:?}"
    );
    let plan = machine.advance(gone);
    assert!(!plan.dnskey.iter().any(|k| k.tag == key.tag()), "{plan:?}");
    let deleted = key.to_rollover_key(id, key.role(false), 1_960_000_000);
    assert!(deleted.is_gone());
}

/// Knot's `ready` KSK or CSK (published and signing, its DS not yet
/// confirmed; black-box finding AQ-2: imported as not yet published) is
/// published and signing, its DS rumoured: Heron publishes its CDS and
/// CDNSKEY and waits for the parent, making no other key.
#[test]
fn a_knot_key_ready_for_its_ds_is_published_and_waits_for_it() {
    use crate::rollover::{Rollover, State};
    let pem = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIP8jJM9mCUH/sdQiHtfd/4vNJTvLmuLCUTcIDou6U004\n-----END PRIVATE KEY-----\n";
    let (published, now) = (1_800_000_000, 1_900_000_000);
    let mut meta = knot::KnotKeyMeta {
        zone: "example.com.".into(),
        id: "abc".into(),
        ksk: true,
        zsk: false,
        tag: 0,
        algorithm: 15,
        created: 0,
        publish: published,
        ready: published,
        active: 0,
        retire: 0,
        remove: 0,
        public_only: false,
    };
    let error = knot::import(pem, &meta).unwrap_err().0;
    let tag = error.split("its tag is ").nth(1).unwrap();
    meta.tag = tag.split(',').next().unwrap().parse().unwrap();
    let key = knot::import(pem, &meta).unwrap();
    for role in [Role::Ksk, Role::Csk] {
        let entry = key.to_rollover_key("k".into(), role, now);
        assert_eq!(entry.dnskey.state, State::Omnipresent, "{role:?}");
        assert_eq!(entry.ds.state, State::Rumoured, "{role:?}");
        let signs = if role == Role::Csk {
            State::Omnipresent
        } else {
            State::Hidden
        };
        assert_eq!(entry.zone_rrsig.state, signs, "{role:?}");
        assert_eq!(entry.published, Some(published));
        let mut policy = crate::policy::Policy::default().rollover_policy(60);
        (policy.algorithm, policy.csk) = (15, true);
        let mut machine = Rollover::new(policy, vec![entry]);
        let plan = machine.advance(now);
        let tags =
            |keys: &[crate::rollover::KeyRef]| keys.iter().map(|k| k.tag).collect::<Vec<_>>();
        assert_eq!(tags(&plan.dnskey), [meta.tag], "{plan:?}");
        assert_eq!(tags(&plan.key_signers), [meta.tag], "{plan:?}");
        assert_eq!(tags(&plan.cds), [meta.tag], "{plan:?}");
        assert!(plan.parent.is_some(), "{plan:?}");
        if role == Role::Csk {
            assert_eq!(tags(&plan.zone_signers), [meta.tag], "{plan:?}");
            assert!(plan.generate.is_empty(), "{plan:?}");
        }
        // The parent's DS seen, the key is in place, as Knot's `active`.
        machine.handle(crate::rollover::Event::DsSeen, now).unwrap();
        let plan = machine.advance(now + 30 * 86_400);
        assert!(machine.keys()[0].is_active(), "{plan:?}");
    }
    // Once Knot made it active (the DS seen), it is in place as before.
    meta.active = published;
    let key = knot::import(pem, &meta).unwrap();
    assert!(key.to_rollover_key("k".into(), Role::Ksk, now).is_active());
}

/// A Knot CSK rollover caught with the new key `ready` and the old one
/// in place goes on: both DNSKEYs published and signing the DNSKEY
/// RRset, the CDS the new key's, no key made; once the parent has the
/// new DS the new key is in place and the old one retired.
#[test]
fn a_knot_rollover_caught_with_the_new_key_ready_goes_on() {
    use crate::rollover::{Event, Goal, Rollover};
    let key = |byte: u8, times: KeyTimes| ImportedKey {
        algorithm: 15,
        flags: 257,
        public_key: vec![byte; 32],
        pkcs8: Vec::new(),
        times,
    };
    let (then, now) = (1_800_000_000, 1_900_000_000);
    let old = key(
        1,
        KeyTimes {
            publish: Some(then),
            activate: Some(then),
            ..KeyTimes::default()
        },
    );
    let new = key(
        2,
        KeyTimes {
            publish: Some(now - 86_400),
            ready: Some(now - 3600),
            ..KeyTimes::default()
        },
    );
    let entries = vec![
        old.to_rollover_key("old".into(), Role::Csk, now),
        new.to_rollover_key("new".into(), Role::Csk, now),
    ];
    let mut policy = crate::policy::Policy::default().rollover_policy(60);
    (policy.algorithm, policy.csk) = (15, true);
    let mut machine = Rollover::new(policy, entries);
    let plan = machine.advance(now);
    let tags = |keys: &[crate::rollover::KeyRef]| keys.iter().map(|k| k.tag).collect::<Vec<_>>();
    assert_eq!(tags(&plan.dnskey), [old.tag(), new.tag()], "{plan:?}");
    assert_eq!(tags(&plan.key_signers), [old.tag(), new.tag()], "{plan:?}");
    // The new key's DS replaces the old one's at the parent; the old
    // DNSKEY, signing the DNSKEY RRset, stays until that is done.
    assert_eq!(tags(&plan.cds), [new.tag()], "{plan:?}");
    assert!(plan.generate.is_empty(), "{plan:?}");
    machine.handle(Event::DsSeen, now).unwrap();
    machine.advance(now + 30 * 86_400);
    let by_id = |m: &Rollover, id: &str| m.keys().iter().find(|k| k.id == id).unwrap().clone();
    assert!(by_id(&machine, "new").is_active());
    assert_eq!(by_id(&machine, "old").goal, Goal::Hidden);
}

#[test]
fn knot_keys_import_with_their_tags_and_sign() {
    let dir = tempfile::tempdir().unwrap();
    let kasp = dir.path();
    for args in [
        ["generate", "algorithm=13", "ksk=yes"],
        ["generate", "algorithm=15", "ksk=no"],
        ["generate", "algorithm=8", "size=2048"],
    ] {
        let mut all = vec!["-D", ".", "example.com."];
        all.extend_from_slice(&args);
        run("keymgr", &all, kasp);
    }
    let list = run("keymgr", &["-D", ".", "example.com.", "list", "-j"], kasp);
    let keys = knot::read_kasp(kasp, &list).unwrap();
    assert_eq!(keys.len(), 3);
    for (meta, key) in &keys {
        assert_eq!(key.tag(), meta.tag);
        assert_eq!(key.flags & crate::dnskey::FLAG_SEP != 0, meta.ksk);
        sign_and_verify(key);
        let dnskey = run(
            "keymgr",
            &["-D", ".", "example.com.", "dnskey", &meta.id],
            kasp,
        );
        let public = base64::engine::general_purpose::STANDARD.encode(&key.public_key);
        assert!(
            dnskey
                .split_whitespace()
                .collect::<String>()
                .contains(&public),
            "{dnskey}"
        );
    }
}

const KEY: &str = "example.com. IN DNSKEY 256 3 15 FYqXHEBrfUUePzYil24YeyQ4bCs4uIjEz6+ZeInusuc=\n";

fn private(body: &str) -> String {
    format!("Private-key-format: v1.3\nAlgorithm: 15 (ED25519)\n{body}")
}

fn bind_error(key: &str, private: &str) -> String {
    bind::parse(key, private).unwrap_err().0
}

use base64::Engine;

#[test]
fn malformed_bind_files_give_clear_errors() {
    let good_seed = "PrivateKey: 0wmP81IgLnY0PPY2tJKfjBlBpQxuclohs/R6rgoEY3c=\n";
    assert!(bind_error("", &private(good_seed)).contains("no DNSKEY"));
    assert!(bind_error("x DNSKEY 256 3", &private(good_seed)).contains("lacks"));
    assert!(bind_error("x DNSKEY 256 4 15 AA==", &private(good_seed)).contains("protocol"));
    assert!(bind_error("x DNSKEY 256 3 15 !!", &private(good_seed)).contains("base64"));
    assert!(bind_error(KEY, "Algorithm: 15\n").contains("Private-key-format"));
    assert!(bind_error(KEY, "Private-key-format: v2.0\n").contains("v2.0"));
    assert!(bind_error(KEY, &private("")).contains("no PrivateKey"));
    assert!(bind_error(KEY, &private("garbage\n")).contains("Name: value"));
    assert!(bind_error(KEY, &private("PrivateKey: AAAA\n")).contains("length"));
    let twice = format!("{good_seed}{good_seed}");
    assert!(bind_error(KEY, &private(&twice)).contains("twice"));
    let bad_time = format!("{good_seed}Created: 20261399000000\n");
    assert!(bind_error(KEY, &private(&bad_time)).contains("Created"));
    let other_seed = "PrivateKey: 1wmP81IgLnY0PPY2tJKfjBlBpQxuclohs/R6rgoEY3c=\n";
    assert!(bind_error(KEY, &private(other_seed)).contains("does not match the public key"));
    let alg13 = private(good_seed).replace("Algorithm: 15", "Algorithm: 13");
    assert!(bind_error(KEY, &alg13).contains("different algorithms"));
    // The untouched pair imports; the key is the one generated above.
    let key = bind::parse(KEY, &private(good_seed)).unwrap().key;
    assert_eq!(key.tag(), 27280);
}

/// An RSA key whose CRT numbers do not agree loads in ring and then fails
/// every signature; the import refuses it (found by the key_files fuzz
/// target: one character of `Exponent1` changed).
#[test]
fn an_rsa_key_that_cannot_sign_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let stem = bind_keygen(dir.path(), &["-a", "RSASHA256", "-b", "2048"]);
    let key_text = std::fs::read_to_string(dir.path().join(format!("{stem}.key"))).unwrap();
    let private = std::fs::read_to_string(dir.path().join(format!("{stem}.private"))).unwrap();
    assert!(bind::parse(&key_text, &private).is_ok());
    let line = private
        .lines()
        .find(|l| l.starts_with("Exponent1: "))
        .unwrap();
    // A character in the middle of the base64, changed to another.
    let mut damaged_line = line.as_bytes().to_vec();
    let at = line.len() / 2;
    damaged_line[at] = if damaged_line[at] == b'A' { b'B' } else { b'A' };
    let damaged = private.replace(line, std::str::from_utf8(&damaged_line).unwrap());
    let error = bind::parse(&key_text, &damaged).unwrap_err().0;
    assert!(error.contains("cannot sign"), "{error}");
}

#[test]
fn bind_file_names_must_match_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let seed = "PrivateKey: 0wmP81IgLnY0PPY2tJKfjBlBpQxuclohs/R6rgoEY3c=\n";
    for (stem, ok) in [
        ("Kexample.com.+015+27280", true),
        ("Kexample.com.+015+27281", false),
    ] {
        std::fs::write(dir.path().join(format!("{stem}.key")), KEY).unwrap();
        std::fs::write(dir.path().join(format!("{stem}.private")), private(seed)).unwrap();
        let result = bind::read(&dir.path().join(format!("{stem}.private")));
        assert_eq!(result.is_ok(), ok, "{result:?}");
    }
    assert!(
        bind::read(&dir.path().join("Kmissing"))
            .unwrap_err()
            .0
            .contains("Kmissing.key")
    );
    assert_eq!(
        bind::name_parts("Kexample.com.+013+00042"),
        Some(("example.com.", 13, 42))
    );
    assert_eq!(bind::name_parts("example.com.+013+42"), None);
    assert_eq!(bind::name_parts("Kexample.com.+x+42"), None);
}

#[test]
fn malformed_knot_input_gives_clear_errors() {
    let meta = |alg: u8, tag: u16| knot::KnotKeyMeta {
        zone: "example.com.".into(),
        id: "abc".into(),
        ksk: false,
        zsk: true,
        tag,
        algorithm: alg,
        created: 0,
        publish: 0,
        ready: 0,
        active: 0,
        retire: 0,
        remove: 0,
        public_only: false,
    };
    let pem = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIP8jJM9mCUH/sdQiHtfd/4vNJTvLmuLCUTcIDou6U004\n-----END PRIVATE KEY-----\n";
    let good = knot::import(pem, &meta(15, 0));
    assert!(
        good.as_ref().unwrap_err().0.contains("keymgr says 0"),
        "{good:?}"
    );
    let tag = knot::import(pem, &meta(15, 0)).unwrap_err().0;
    let real: u16 = tag
        .split("its tag is ")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(knot::import(pem, &meta(15, real)).is_ok());
    assert!(
        knot::import(pem, &meta(13, real))
            .unwrap_err()
            .0
            .contains("algorithm 15 key")
    );
    assert!(
        knot::import("", &meta(15, real))
            .unwrap_err()
            .0
            .contains("BEGIN")
    );
    let cut = &pem[..pem.len() - 26];
    assert!(
        knot::import(cut, &meta(15, real))
            .unwrap_err()
            .0
            .contains("END")
    );
    let bad = pem.replace("MC4C", "!!!!");
    assert!(
        knot::import(&bad, &meta(15, real))
            .unwrap_err()
            .0
            .contains("base64")
    );
    let short = pem.replace("MC4CAQAwBQYDK2VwBCIEIP8j", "MC4CAQAwBQYDK2VwBCIE");
    assert!(knot::import(&short, &meta(15, real)).is_err());
    assert!(
        knot::parse_list("[{}]")
            .unwrap_err()
            .0
            .contains("missing field")
    );
    assert!(knot::parse_list("nope").is_err());
    let dir = tempfile::tempdir().unwrap();
    let sneaky =
        r#"[{"zone":"x.","id":"../../etc/passwd","ksk":true,"zsk":false,"tag":1,"algorithm":13}]"#;
    assert!(
        knot::read_kasp(dir.path(), sneaky)
            .unwrap_err()
            .0
            .contains("not a key id")
    );
}

/// Truncated and flipped key files never panic.
#[test]
fn mutated_key_files_never_panic() {
    let seed =
        "PrivateKey: 0wmP81IgLnY0PPY2tJKfjBlBpQxuclohs/R6rgoEY3c=\nCreated: 20261125140914\n";
    let private_text = private(seed);
    let pem = "-----BEGIN PRIVATE KEY-----\nMIGTAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBHkwdwIBAQQgU4ddkeDsgy15I4WI\n1XHqWLcQ9sPzcbKSRVBiazPyyYagCgYIKoZIzj0DAQehRANCAASehGz3c9vplcF5\nCbIRE0iQuFdx71smZi1hk4sXGXWlfsjv+tktXqEiqZpDOcifTpI3h9uqEA72e2OU\n4sbdCv1Y\n-----END PRIVATE KEY-----\n";
    let der = knot::pem_der(pem).unwrap();
    let mut seed_state: u32 = 0x1234_5678;
    let mut random = move || {
        seed_state ^= seed_state << 13;
        seed_state ^= seed_state >> 17;
        seed_state ^= seed_state << 5;
        seed_state as usize
    };
    for round in 0..3000 {
        let mutate = |text: &[u8], r: usize, flip: bool| {
            let mut bytes = text.to_vec();
            if flip {
                let at = r % bytes.len();
                bytes[at] = (r >> 8) as u8;
            } else {
                bytes.truncate(r % bytes.len());
            }
            bytes
        };
        let flip = round % 2 == 0;
        let key = String::from_utf8_lossy(&mutate(KEY.as_bytes(), random(), flip)).into_owned();
        let private =
            String::from_utf8_lossy(&mutate(private_text.as_bytes(), random(), flip)).into_owned();
        let _ = bind::parse(&key, &private_text);
        let _ = bind::parse(KEY, &private);
        let der = mutate(&der, random(), flip);
        let _ = der::read_pkcs8(&der);
        let text = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            base64::engine::general_purpose::STANDARD.encode(&der)
        );
        let meta = knot::parse_list(
            r#"[{"zone":"x.","id":"a","ksk":true,"zsk":false,"tag":1,"algorithm":13}]"#,
        )
        .unwrap();
        let _ = knot::import(&text, &meta[0]);
    }
}

#[test]
fn bind_times_are_utc_seconds() {
    assert_eq!(parse_bind_time("19700101000000"), Some(0));
    assert_eq!(parse_bind_time("20000229235959"), Some(951_868_799));
    assert_eq!(parse_bind_time("20261125140914"), Some(1_795_615_754));
    for bad in [
        "",
        "2026112514091",
        "202611251409140",
        "20261325140914",
        "2026112514091x",
        "19691231235959",
    ] {
        assert_eq!(parse_bind_time(bad), None, "{bad}");
    }
}

#[test]
fn rsa_exponents_longer_than_255_octets_take_the_long_form() {
    let key = rsa_public_key(&[1; 300], &[2; 4]);
    assert_eq!(key[..3], [0, 1, 44]);
    assert_eq!(key.len(), 3 + 300 + 4);
    assert_eq!(rsa_public_key(&[1, 0, 1], &[9])[..], [3, 1, 0, 1, 9]);
}

#[test]
fn public_key_of_refuses_what_ring_refuses() {
    assert!(
        public_key_of(13, &[0x30, 0])
            .unwrap_err()
            .0
            .contains("refused")
    );
    assert!(public_key_of(5, &[]).unwrap_err().0.contains("algorithm 5"));
}

/// GnuTLS (under keymgr) writes a P-256 scalar whose top bit is set in 33
/// octets, a leading zero first; ring wants 32. A key so written (made by
/// keymgr, tag 16853) imports and signs.
#[test]
fn knot_p256_scalars_with_a_leading_zero_import() {
    let pem = "-----BEGIN PRIVATE KEY-----
MIGUAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBHoweAIBAQQhAJrY7mNPitZMrAky
re3EPemMRqANUZlQaCAxKTbGI3xooAoGCCqGSM49AwEHoUQDQgAExSuHR6SnNsdC
NwGRHr9Y0lGIWmtkoHYGmKPcxW3nHyEWz2X+jcW3sk9InrvXC+kacqmxqxXfYmPE
2LTh2yZvlg==
-----END PRIVATE KEY-----
";
    let list = r#"[{"zone":"example.com.","id":"29f563a7ceed101b65bdd8f9a148277423e3fd5f","ksk":false,"zsk":true,"tag":16853,"algorithm":13,"publish":1795616000,"active":1795616000}]"#;
    let meta = knot::parse_list(list).unwrap();
    let key = knot::import(pem, &meta[0]).unwrap();
    assert_eq!(key.tag(), 16853);
    assert_eq!(key.times.activate, Some(1_795_616_000));
    assert_eq!(key.times.inactive, None);
    sign_and_verify(&key);
}

/// What named 9.18 wrote for the KSK of a zone it had just started to
/// sign under a KSK+ZSK dnssec-policy.
const NAMED_KSK_STATE: &str = "; This is the state of key 21047, for example.com.
Algorithm: 13
Length: 256
Lifetime: 0
KSK: yes
ZSK: no
Generated: 20261125143232 (Wed Nov 25 14:32:32 2026)
Published: 20261125143232 (Wed Nov 25 14:32:32 2026)
Active: 20261125143232 (Wed Nov 25 14:32:32 2026)
PublishCDS: 20261126153732 (Thu Nov 26 15:37:32 2026)
DNSKEYChange: 20261125143232 (Wed Nov 25 14:32:32 2026)
KRRSIGChange: 20261125143232 (Wed Nov 25 14:32:32 2026)
DSChange: 20261125143232 (Wed Nov 25 14:32:32 2026)
DNSKEYState: rumoured
KRRSIGState: rumoured
DSState: hidden
GoalState: omnipresent
";

#[test]
fn bind_state_files_give_roles_and_states() {
    use crate::rollover::{Goal, Record, Role, State};
    let state = bind_state::parse(NAMED_KSK_STATE).unwrap();
    let at = parse_bind_time("20261125143232").unwrap();
    assert_eq!(state.role, Role::Ksk);
    assert_eq!(state.goal, Some(Goal::Omnipresent));
    assert_eq!(
        state.dnskey,
        Some(Record {
            state: State::Rumoured,
            since: at
        })
    );
    assert_eq!(
        state.ds,
        Some(Record {
            state: State::Hidden,
            since: at
        })
    );
    assert_eq!(state.zone_rrsig, None);
    let csk = NAMED_KSK_STATE.replace("ZSK: no", "ZSK: yes");
    assert_eq!(bind_state::parse(&csk).unwrap().role, Role::Csk);
    // A retiring ZSK mid-rollover keeps its place.
    let retiring = NAMED_KSK_STATE
        .replace("KSK: yes", "KSK: no")
        .replace("ZSK: no", "ZSK: yes")
        .replace(
            "GoalState: omnipresent",
            "GoalState: hidden\nZRRSIGState: unretentive\nZRRSIGChange: 20261201000000",
        )
        .replace("DNSKEYState: rumoured", "DNSKEYState: omnipresent");
    let state = bind_state::parse(&retiring).unwrap();
    let key = bind::parse(
        KEY,
        &private("PrivateKey: 0wmP81IgLnY0PPY2tJKfjBlBpQxuclohs/R6rgoEY3c=\n"),
    )
    .unwrap()
    .key;
    let now = parse_bind_time("20261202000000").unwrap();
    let machine_key = state.to_rollover_key(&key, "k".into(), now);
    assert_eq!(machine_key.role, Role::Zsk);
    assert_eq!(machine_key.goal, Goal::Hidden);
    assert_eq!(machine_key.dnskey.state, State::Omnipresent);
    // BIND still serves some of its signatures (it replaces them as they
    // fall due): they leave caches only after Heron, taking the zone over
    // a day after BIND's change, has signed every RRset anew.
    assert_eq!(
        machine_key.zone_rrsig,
        Record {
            state: State::Unretentive,
            since: now
        }
    );
    assert_eq!(machine_key.ds.state, State::Hidden);
    // The new ZSK's signatures are rumoured from the move too; its DNSKEY,
    // which BIND published at once, from BIND's change.
    let new = retiring
        .replace("GoalState: hidden", "GoalState: omnipresent")
        .replace("ZRRSIGState: unretentive", "ZRRSIGState: rumoured");
    let machine_key = (bind_state::parse(&new).unwrap()).to_rollover_key(&key, "n".into(), now);
    assert_eq!(machine_key.zone_rrsig.state, State::Rumoured);
    assert_eq!(machine_key.zone_rrsig.since, now);
    assert_eq!(
        machine_key.dnskey.since,
        parse_bind_time("20261125143232").unwrap()
    );
    // Before the change (a clock behind BIND's), BIND's time stands.
    let early = parse_bind_time("20261130000000").unwrap();
    let machine_key = state.to_rollover_key(&key, "k".into(), early);
    let since = parse_bind_time("20261201000000").unwrap();
    assert_eq!(machine_key.zone_rrsig.since, since);
}

#[test]
fn a_key_dnssec_keygen_made_for_a_policy_imports_as_a_csk() {
    let dir = tempfile::tempdir().unwrap();
    let stem = run(
        "dnssec-keygen",
        &["-K", ".", "-k", "default", "example.com"],
        dir.path(),
    );
    let stem = stem.trim();
    let text = std::fs::read_to_string(dir.path().join(format!("{stem}.state"))).unwrap();
    let state = bind_state::parse(&text).unwrap();
    assert_eq!(state.role, crate::rollover::Role::Csk);
    assert_eq!(state.goal, None, "no states before named runs it");
    let key = bind::read(&dir.path().join(stem)).unwrap().key;
    let created = key.times.created.unwrap();
    let machine_key = state.to_rollover_key(&key, stem.to_string(), created + 60);
    assert!(machine_key.is_active(), "published and active: in place");
    assert_eq!(machine_key.tag, bind::name_parts(stem).unwrap().2);
}

#[test]
fn malformed_bind_state_files_give_clear_errors() {
    let error = |text: &str| bind_state::parse(text).unwrap_err().0;
    assert!(error("KSK: no\nZSK: no\n").contains("neither KSK nor ZSK"));
    assert!(error("KSK: yes\nKSK: yes\n").contains("twice"));
    assert!(error("KSK yes\n").contains("Name: value"));
    assert!(error("KSK: yes\nDNSKEYState: gone\n").contains("DNSKEYState `gone`"));
    assert!(error("KSK: yes\nGoalState: maybe\n").contains("GoalState"));
    assert!(error("KSK: yes\nPublished: 2026\n").contains("Published"));
    let bytes = NAMED_KSK_STATE.as_bytes();
    for cut in 0..bytes.len() {
        let _ = bind_state::parse(&String::from_utf8_lossy(&bytes[..cut]));
        let mut flipped = bytes.to_vec();
        flipped[cut] ^= 0x55;
        let _ = bind_state::parse(&String::from_utf8_lossy(&flipped));
    }
}

/// BIND writes a P-256 scalar without its leading zero octets (one key in
/// 256 has a 31-octet PrivateKey); written with one more zero octet, or
/// with fewer, the key is the same and imports and signs.
#[test]
fn bind_p256_scalars_of_other_lengths_import() {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let dir = tempfile::tempdir().unwrap();
    let stem = bind_keygen(dir.path(), &["-a", "ECDSAP256SHA256"]);
    let key_text = std::fs::read_to_string(dir.path().join(format!("{stem}.key"))).unwrap();
    let private_path = dir.path().join(format!("{stem}.private"));
    let private_text = std::fs::read_to_string(&private_path).unwrap();
    let line = (private_text.lines())
        .find(|l| l.starts_with("PrivateKey: "))
        .unwrap();
    let scalar = b64.decode(&line["PrivateKey: ".len()..]).unwrap();
    let original = bind::parse(&key_text, &private_text).unwrap().key;
    let mut longer = vec![0];
    longer.extend_from_slice(&scalar);
    let rewritten = private_text.replace(line, &format!("PrivateKey: {}", b64.encode(&longer)));
    let imported = bind::parse(&key_text, &rewritten).unwrap().key;
    assert_eq!(imported, original);
    sign_and_verify(&imported);
    assert_eq!(
        bind::left_padded(&[0, 0, 7], 32),
        [vec![0; 31], vec![7]].concat()
    );
    assert_eq!(bind::left_padded(&[5; 31], 32)[1..], [5; 31]);
    assert_eq!(
        bind::left_padded(&[5; 33], 32).len(),
        33,
        "too long is left to fail"
    );
}

/// A `.key` file's DNSKEY TTL (dnssec-policy writes the one it serves)
/// is read when written, and none otherwise.
#[test]
fn a_bind_key_files_ttl_is_read_when_written() {
    let seed = private("PrivateKey: 0wmP81IgLnY0PPY2tJKfjBlBpQxuclohs/R6rgoEY3c=\n");
    assert_eq!(bind::parse(KEY, &seed).unwrap().ttl, None);
    let with_ttl = KEY.replace("example.com. IN", "example.com. 120 IN");
    assert_eq!(bind::parse(&with_ttl, &seed).unwrap().ttl, Some(120));
    let class_first = KEY.replace("example.com. IN", "example.com. IN 300");
    assert_eq!(bind::parse(&class_first, &seed).unwrap().ttl, Some(300));
}
