//! Zones Heron signs itself (`dnssec-policy`): the zone as transferred
//! out by AXFR (kdig) must pass BIND's `dnssec-verify` and ldns's
//! `ldns-verify-zone`, and `delv`, given the zone's KSK as its trust
//! anchor, must call positive, NXDOMAIN, NODATA and wildcard answers
//! fully validated: NSEC and NSEC3, algorithms 13 and 15, a CSK and a
//! KSK/ZSK pair. The keys are made at first start, owner-only, and kept.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use heron_testkit::{ServerProcess, SignedZone};

const ORIGIN: &str = "edge.test.";

fn heron() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_heron"))
}

/// A copy of the differential suite's edge.test zone, in a folder of this
/// process's own: Heron writes beside a zone file it signs (the signed
/// copy, the note of where its keys are), never in the source tree.
fn zone_file() -> PathBuf {
    static COPY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    COPY.get_or_init(|| {
        let source =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/differential/edge.test.zone");
        let dir = std::env::temp_dir().join(format!("heron-signing-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let copy = dir.join("edge.test.zone");
        std::fs::copy(source, &copy).unwrap();
        copy
    })
    .clone()
}

/// Heron serving edge.test. under `policy` (the lines of a
/// `[[dnssec-policy]]` named "p"; empty: the built-in `default`), from a
/// copy of the zone file beside `key_directory`: the signed copy kept for
/// a restart (`FILE.signed`) is the test's own.
fn serve_signed(policy: &str, key_directory: &Path) -> ServerProcess {
    let file = key_directory.with_file_name("edge.test.zone");
    if !file.exists() {
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::copy(zone_file(), &file).unwrap();
    }
    serve_signed_file(policy, key_directory, &file)
}

fn serve_signed_file(policy: &str, key_directory: &Path, file: &Path) -> ServerProcess {
    let (section, name) = match policy {
        "" => (String::new(), "default"),
        lines => (format!("[[dnssec-policy]]\nname = \"p\"\n{lines}\n"), "p"),
    };
    let (file, keys) = (file.to_path_buf(), key_directory.to_path_buf());
    ServerProcess::heron_with_config(&heron(), ORIGIN, move |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n{section}\n\
             [[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\nallow-transfer = [\"127.0.0.1\"]\n\
             dnssec-policy = \"{name}\"\nkey-directory = \"{}\"\n",
            file.display(),
            keys.display()
        )
    })
}

fn axfr(server: &ServerProcess) -> String {
    let addr = server.addr();
    let out = Command::new("/usr/bin/kdig")
        .arg(format!("@{}", addr.ip()))
        .args(["-p", &addr.port().to_string(), ORIGIN, "AXFR"])
        .args(["+nocomments", "+nostats"])
        .output()
        .expect("kdig runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success() && text.contains("RRSIG"), "{text}");
    text
}

/// `dnssec-verify` (with `-z` for a CSK: it counts only keys without
/// the SEP flag as ZSKs) and `ldns-verify-zone` accept the zone.
fn verify_with_tools(zone: &SignedZone, csk: bool) {
    let path = zone.path.to_str().unwrap();
    let mut bind = Command::new("/usr/bin/dnssec-verify");
    if csk {
        bind.arg("-z");
    }
    let out = bind
        .args(["-o", ORIGIN, path])
        .output()
        .expect("dnssec-verify runs");
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "dnssec-verify: {said}");
    assert!(said.contains("Zone fully signed"), "{said}");
    let out = Command::new("/usr/bin/ldns-verify-zone")
        .arg(path)
        .output()
        .expect("ldns-verify-zone runs");
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "ldns-verify-zone: {said}");
    assert!(said.contains("Zone is verified and complete"), "{said}");
}

#[derive(Clone, Copy, Debug)]
enum Expect {
    Answer,
    NxDomain,
    NoData,
    ChainToNxDomain,
}

const QUERIES: &[(&str, &str, Expect)] = &[
    ("@", "SOA", Expect::Answer),
    ("@", "DNSKEY", Expect::Answer),
    ("@", "PTR", Expect::NoData),
    ("www", "A", Expect::Answer),
    ("MiXeD", "A", Expect::Answer),
    ("www", "MX", Expect::NoData),
    ("nx", "A", Expect::NxDomain),
    ("a.b.c.d.nx", "TXT", Expect::NxDomain),
    ("~", "A", Expect::NxDomain),
    ("c.ent", "A", Expect::NoData),
    ("nx.c.ent", "A", Expect::NxDomain),
    ("anything.wild", "A", Expect::Answer),
    ("a.b.wild", "TXT", Expect::Answer),
    ("anything.wild", "MX", Expect::NoData),
    ("x.cnamewild", "A", Expect::Answer),
    ("nx.specific.wild", "A", Expect::NxDomain),
    ("secure", "DS", Expect::Answer),
    ("sub", "DS", Expect::NoData),
    ("dangling", "A", Expect::ChainToNxDomain),
    ("x.dname", "A", Expect::Answer),
];

fn delv_validates_everything(zone: &SignedZone, server: &ServerProcess) {
    let mut failures = Vec::new();
    for &(name, qtype, expect) in QUERIES {
        let qname = match name {
            "@" => ORIGIN.to_string(),
            _ => format!("{name}.{ORIGIN}"),
        };
        let v = zone.delv(server.addr(), &qname, qtype);
        let ok = match expect {
            Expect::Answer => v.is_validated_answer(),
            Expect::NxDomain => v.is_validated_negative(true),
            Expect::NoData => v.is_validated_negative(false),
            Expect::ChainToNxDomain => v.is_validated_chain_to_nxdomain(),
        };
        if !ok {
            failures.push(format!("{name} {qtype}: expected {expect:?}\n{v}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn signed_and_validated(policy: &str, csk: bool, delv: bool) -> (tempfile::TempDir, String) {
    let keys = tempfile::tempdir().unwrap();
    let key_directory = keys.path().join("keys");
    let server = serve_signed(policy, &key_directory);
    let text = axfr(&server);
    let zone = SignedZone::from_text(ORIGIN, &text);
    verify_with_tools(&zone, csk);
    if delv {
        delv_validates_everything(&zone, &server);
    }
    (keys, text)
}

#[test]
fn default_policy_ecdsa_csk_nsec_validates() {
    let (keys, text) = signed_and_validated("", true, true);
    assert!(text.contains("\tNSEC\t") && !text.contains("NSEC3PARAM"));
    let dir = keys.path().join("keys");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700, "the key directory is owner-only");
    let files: Vec<_> = (std::fs::read_dir(&dir).unwrap().flatten())
        .filter(|f| f.file_name().to_string_lossy().ends_with(".heron-key"))
        .collect();
    assert_eq!(files.len(), 1, "one CSK");
    assert_eq!(mode(&files[0].path()), 0o600);
    assert!(files[0].file_name().to_string_lossy().contains("+013+"));
}

/// The target for the default policy: no hour holds more than
/// 1/100 of a zone's signatures (their expirations, as an AXFR shows them,
/// counted by clock hour), so that no hour re-signs more than that.
#[test]
fn under_the_default_policy_no_hour_holds_a_hundredth_of_the_signatures() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("edge.test.zone");
    let mut text =
        String::from("@ 300 IN SOA ns hm 1 2 3 4 5\n@ 300 IN NS ns\nns 300 IN A 192.0.2.1\n");
    for i in 0..1_500 {
        text.push_str(&format!("h{i} 300 IN A 192.0.2.{}\n", i % 250 + 1));
    }
    std::fs::write(&file, text).unwrap();
    let server = serve_signed_file("", &dir.path().join("keys"), &file);
    let mut per_hour = std::collections::HashMap::<String, usize>::new();
    for record in axfr(&server).lines() {
        let fields: Vec<&str> = record.split_whitespace().collect();
        if fields.get(3) == Some(&"RRSIG") {
            *per_hour.entry(fields[8][..10].to_string()).or_default() += 1;
        }
    }
    let all: usize = per_hour.values().sum();
    let most = per_hour.values().max().copied().unwrap();
    assert!(all > 3_000, "{all} signatures");
    assert!(
        most * 100 <= all,
        "{most} of {all} signatures expire in one hour"
    );
}

#[test]
fn ed25519_ksk_zsk_nsec3_validates() {
    let policy = "algorithm = \"ed25519\"\nkeys = \"ksk-zsk\"\ndenial = \"nsec3\"";
    let (_keys, text) = signed_and_validated(policy, false, true);
    assert!(text.contains("NSEC3PARAM\t1 0 0 -"), "RFC 9276 defaults");
}

#[test]
fn ecdsa_nsec3_with_opt_out_passes_the_zone_checkers() {
    let policy = "denial = \"nsec3\"\nnsec3-opt-out = true";
    let (_keys, text) = signed_and_validated(policy, true, false);
    assert!(text.contains("NSEC3\t1 1 0 -"), "opt-out flag set");
}

/// A restart keeps the keys: the DNSKEY RRset, and so the parent's DS,
/// stay the same; the serial goes on from the one served.
#[test]
fn keys_are_kept_across_restarts() {
    let keys = tempfile::tempdir().unwrap();
    let dir = keys.path().join("keys");
    let dnskeys = |text: &str| -> Vec<String> {
        let mut lines: Vec<String> = (text.lines())
            .filter(|l| l.contains("\tDNSKEY\t"))
            .map(str::to_string)
            .collect();
        lines.sort();
        lines
    };
    let first = axfr(&serve_signed("", &dir));
    let second = axfr(&serve_signed("", &dir));
    assert_eq!(dnskeys(&first).len(), 1);
    assert_eq!(dnskeys(&first), dnskeys(&second));
    // The second start signs again: a serial past the one served before,
    // or secondaries would keep the first signatures until they expire.
    assert!(first.contains("2024010101 7200"), "{first}");
    assert!(second.contains("2024010102 7200"), "{second}");
}

/// What `heron check-config` says of `config`, which it must refuse.
fn check_config_refuses(config: &Path) -> String {
    let out = Command::new(heron())
        .arg("check-config")
        .arg(config)
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{said}");
    said
}

#[test]
fn check_config_refuses_bad_policies() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("heron.toml");
    std::fs::write(
        &config,
        format!(
            "[[dnssec-policy]]\nname = \"p\"\nalgorithm = \"rsasha1\"\nsignature-refresh = \"30d\"\n\
             [[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\ndnssec-policy = \"p\"\n\
             [[zone]]\norigin = \"other.test.\"\nfile = \"{}\"\ndnssec-policy = \"missing\"\n\
             [[zone]]\norigin = \"third.test.\"\nfile = \"{}\"\ndnssec-policy = \"default\"\n",
            zone_file().display(),
            zone_file().display(),
            zone_file().display()
        ),
    )
    .unwrap();
    let said = check_config_refuses(&config);
    for needle in [
        "algorithm 'rsasha1'",
        "signature-refresh must be",
        "dnssec-policy 'missing' is not defined",
    ] {
        assert!(said.contains(needle), "{needle}: {said}");
    }
    // The broken policy's errors say it all: no "not defined" for the
    // zone naming it, nor for one naming a built-in policy.
    for needle in ["'p' is not defined", "'default' is not defined"] {
        assert!(!said.contains(needle), "{needle}: {said}");
    }
}

/// check-config refuses what a start would refuse in a zone's key
/// directory (black-box finding: it said OK, and serve did not sign the
/// zone): two CSK files and no state file, and a key directory that is a
/// file.
/// A KSK made ahead (`keymgr generate --role ksk`) for a zone whose
/// policy signs with a CSK alone is refused by check-config and by the
/// start, saying what to do; the same key under a KSK+ZSK policy signs
/// (black-box finding CA-2: the zone never loaded, "no KSK or CSK").
#[test]
fn a_first_key_of_a_role_the_policy_lacks_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    let out = Command::new(heron())
        .args(["keymgr", "-d"])
        .arg(&keys)
        .args([ORIGIN, "generate", "--role", "ksk"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let file = dir.path().join("edge.test.zone");
    std::fs::copy(zone_file(), &file).unwrap();
    let config = |policy: &str| {
        let path = dir.path().join("heron.toml");
        let text = format!(
            "[server]\nlisten = [\"127.0.0.1:1\"]\n[[dnssec-policy]]\nname = \"p\"\n{policy}\n\
             [[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\ndnssec-policy = \"p\"\n\
             key-directory = \"{}\"\n",
            file.display(),
            keys.display()
        );
        std::fs::write(&path, text).unwrap();
        path
    };
    let said = check_config_refuses(&config(""));
    assert!(
        said.contains("is a KSK") && said.contains("generate --role csk"),
        "{said}"
    );
    let out = Command::new(heron())
        .arg("check-config")
        .arg(config("keys = \"ksk-zsk\""))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // A key made ahead of another algorithm than the policy's: the
    // signing found no KSK of the policy's (black-box finding DH-1).
    let said = check_config_refuses(&config("keys = \"ksk-zsk\"\nalgorithm = \"ed25519\""));
    assert!(
        said.contains("is of algorithm ecdsap256sha256") && said.contains("--algorithm ed25519"),
        "{said}"
    );
}

#[test]
fn check_config_refuses_key_directories_serve_would_refuse() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    for other in ["a", "b"] {
        let made = dir.path().join(other);
        let out = Command::new(heron())
            .args(["keymgr", "-d"])
            .arg(&made)
            .args([ORIGIN, "generate", "--role", "csk"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        std::fs::create_dir_all(&keys).unwrap();
        for file in std::fs::read_dir(&made).unwrap().flatten() {
            if file.file_name().to_string_lossy().ends_with(".heron-key") {
                std::fs::copy(file.path(), keys.join(file.file_name())).unwrap();
            }
        }
    }
    let not_a_folder = dir.path().join("plain-file");
    std::fs::write(&not_a_folder, "x").unwrap();
    let other = dir.path().join("other.zone");
    std::fs::write(
        &other,
        "$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n",
    )
    .unwrap();
    // A link to a folder that is not there (a volume not mounted): serve
    // cannot make its keys there (black-box finding AS-6).
    let dangling = dir.path().join("dangling");
    std::os::unix::fs::symlink(dir.path().join("not-mounted/keys"), &dangling).unwrap();
    let third = dir.path().join("third.zone");
    std::fs::copy(&other, &third).unwrap();
    let config = dir.path().join("heron.toml");
    std::fs::write(
        &config,
        format!(
            "[[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\ndnssec-policy = \"default\"\n\
             key-directory = \"{}\"\n\
             [[zone]]\norigin = \"other.test.\"\nfile = \"{}\"\ndnssec-policy = \"default\"\n\
             key-directory = \"{}\"\n\
             [[zone]]\norigin = \"third.test.\"\nfile = \"{}\"\ndnssec-policy = \"default\"\n\
             key-directory = \"{}\"\n",
            zone_file().display(),
            keys.display(),
            other.display(),
            not_a_folder.display(),
            third.display(),
            dangling.display()
        ),
    )
    .unwrap();
    let said = check_config_refuses(&config);
    assert!(said.contains("2 keys that sign as a KSK or CSK"), "{said}");
    assert!(said.contains("is not a directory"), "{said}");
    assert!(said.contains("which does not exist"), "{said}");
}

/// check-config by a user who may not read a zone's key directory (the
/// server's, 0700) says it was not checked, and passes (regression hunt:
/// it failed with Permission denied where it said OK before).
#[test]
fn check_config_by_a_user_who_cannot_read_the_keys_passes_with_a_warning() {
    use std::os::unix::fs::PermissionsExt;
    if !heron_sys::process::is_root() {
        eprintln!("SKIPPED: becoming another user needs root; run the tests as root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let keys = dir.path().join("keys");
    std::fs::create_dir(&keys).unwrap();
    std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o700)).unwrap();
    let zone = dir.path().join("s.zone");
    std::fs::write(
        &zone,
        "$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n",
    )
    .unwrap();
    let config = dir.path().join("heron.toml");
    let text = format!(
        "[[zone]]\norigin = \"s.test.\"\nfile = \"{}\"\ndnssec-policy = \"default\"\n\
         key-directory = \"{}\"\n",
        zone.display(),
        keys.display()
    );
    std::fs::write(&config, text).unwrap();
    for file in [&zone, &config] {
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let out = Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(heron())
        .arg("check-config")
        .arg(&config)
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("not checked: this user may not read it"),
        "{said}"
    );
}

/// A reload of an edited file signs the change, not the zone: one RRset
/// added makes at most 3 + 10 new signatures, the serial moves on, and
/// the zone still passes both checkers.
#[test]
fn a_reload_signs_only_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("edge.test.zone");
    std::fs::copy(zone_file(), &file).unwrap();
    let server = serve_signed_file("denial = \"nsec3\"", &dir.path().join("keys"), &file);
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("added 3600 IN A 192.0.2.77\n");
    std::fs::write(&file, text).unwrap();
    server.reload();
    assert!(server.wait_for_log("serial=2024010102"), "{}", server.log());
    let log = server.log();
    let line = (log.lines())
        .find(|l| {
            let signed = l.contains("zone signed") || l.contains("change signed");
            signed && l.contains("serial=2024010102")
        })
        .unwrap();
    let field = |name: &str| -> usize {
        let at = line.find(&format!("{name}=")).unwrap() + name.len() + 1;
        line[at..].split(' ').next().unwrap().parse().unwrap()
    };
    assert!(field("signatures") <= 3 + 10, "{line}");
    // Signed whole, the other signatures are kept; signed by its change
    // ("change signed"), they are not touched at all.
    assert!(
        line.contains("change signed") || field("kept") > 100,
        "{line}"
    );
    // The line is logged before the new version is swapped in.
    let mut text = axfr(&server);
    for _ in 0..100 {
        if text.contains("added.edge.test.") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        text = axfr(&server);
    }
    assert!(text.contains("added.edge.test."), "{text}");
    verify_with_tools(&SignedZone::from_text(ORIGIN, &text), true);
}

/// Black-box finding: names and RRsets deleted from the file of a zone
/// signed here kept their RRSIGs after a reload signed the change (only a
/// whole signing dropped them): a name gone from an NSEC zone stayed in
/// the zone with a broken chain (bogus), from an NSEC3 zone as an empty
/// non-terminal (a validated NODATA for a name that does not exist).
#[test]
fn a_reload_that_deletes_records_drops_their_signatures() {
    for policy in ["", "denial = \"nsec3\""] {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("edge.test.zone");
        std::fs::copy(zone_file(), &file).unwrap();
        let server = serve_signed_file(policy, &dir.path().join("keys"), &file);
        let before = axfr(&server);
        let text = std::fs::read_to_string(&file).unwrap();
        let gone = ["txt ", "*.mxonly ", "www             AAAA", "a.b.c.ent "];
        let kept: Vec<&str> = (text.lines())
            .filter(|l| !gone.iter().any(|g| l.starts_with(g)))
            .collect();
        let edited = kept.join("\n").replace("2024010101", "2024010102") + "\n";
        assert_eq!(text.lines().count() - kept.len(), gone.len(), "{policy}");
        std::fs::write(&file, edited).unwrap();
        server.reload();
        assert!(server.wait_for_log("change signed"), "{}", server.log());
        let holds = |zone: &str, name: &str| zone.lines().any(|l| l.starts_with(name));
        let mut after = axfr(&server);
        for _ in 0..100 {
            if !holds(&after, "txt.edge.test.") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            after = axfr(&server);
        }
        assert!(holds(&before, "txt.edge.test.") && holds(&before, "a.b.c.ent.edge.test."));
        for name in [
            "txt.edge.test.",
            "*.mxonly.edge.test.",
            "a.b.c.ent.edge.test.",
        ] {
            assert!(!holds(&after, name), "{policy}: {name} left\n{after}");
        }
        let www_aaaa = after
            .lines()
            .any(|l| l.starts_with("www.edge.test.") && l.contains("RRSIG\tAAAA"));
        assert!(!www_aaaa, "{policy}: the RRSIG over www AAAA left\n{after}");
        verify_with_tools(&SignedZone::from_text(ORIGIN, &after), true);
    }
}

/// A policy edited in the configuration takes effect at the reload, not
/// at the zone's next signing for some other reason: a new NSEC3 salt
/// makes a new chain, and the zone still passes both checkers.
#[test]
fn a_policy_changed_in_the_configuration_is_applied_by_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    let policy = "denial = \"nsec3\"\nnsec3-salt = \"01\"";
    let server = serve_signed(policy, &dir.path().join("keys"));
    let salt = || {
        let text = axfr(&server);
        let param = text
            .lines()
            .find(|l| l.contains("NSEC3PARAM"))
            .map(str::to_string);
        param.and_then(|l| l.split_whitespace().last().map(str::to_string))
    };
    assert_eq!(salt().as_deref(), Some("01"));
    let config = server.dir().join("heron.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("nsec3-salt = \"01\"", "nsec3-salt = \"02\""),
    )
    .unwrap();
    server.reload();
    let mut now = salt();
    for _ in 0..100 {
        if now.as_deref() == Some("02") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        now = salt();
    }
    assert_eq!(now.as_deref(), Some("02"), "{}", server.log());
    let text = axfr(&server);
    assert!(!text.contains(" NSEC3 1 0 0 01 "), "the old chain is gone");
    verify_with_tools(&SignedZone::from_text(ORIGIN, &text), true);
}

/// A policy taken away and put back: each version goes on from the
/// newest serial served before, so that secondaries take it. Taken away,
/// the file (its serial below the signed version's) is served unsigned at
/// the serial after the signed one's (black-box finding: the file's
/// serial was served, and secondaries kept the signed zone); put back,
/// the signed zone goes on from the newest served, kept beside the keys
/// (black-box finding: it went on from the file's, below what they held).
#[test]
fn a_policy_taken_away_and_put_back_serves_above_every_serial_served() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve_signed("", &dir.path().join("keys"));
    let serial = || {
        let addr = server.addr();
        let out = Command::new("kdig")
            .args([&format!("@{}", addr.ip()), "-p", &addr.port().to_string()])
            .args([ORIGIN, "SOA", "+short"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.split_whitespace()
            .nth(2)
            .and_then(|s| s.parse::<u32>().ok())
            .unwrap_or(0)
    };
    let eventually = |ok: &dyn Fn() -> bool| {
        (0..200).any(|_| {
            ok() || {
                std::thread::sleep(Duration::from_millis(50));
                false
            }
        })
    };
    let file = dir.path().join("edge.test.zone");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, format!("{text}added A 192.0.2.77\n")).unwrap();
    server.reload();
    let first = 2024010101;
    assert!(eventually(&|| serial() == first + 1), "{}", server.log());
    let config = server.dir().join("heron.toml");
    let signed = std::fs::read_to_string(&config).unwrap();
    let unsigned: String = (signed.lines())
        .filter(|l| !l.starts_with("dnssec-policy") && !l.starts_with("key-directory"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&config, unsigned).unwrap();
    server.reload();
    assert!(eventually(&|| serial() == first + 2), "{}", server.log());
    let addr = server.addr();
    let keys = Command::new("kdig")
        .args([&format!("@{}", addr.ip()), "-p", &addr.port().to_string()])
        .args([ORIGIN, "DNSKEY", "+short"])
        .output()
        .unwrap();
    assert!(keys.status.success() && keys.stdout.is_empty(), "unsigned");
    std::fs::write(&config, signed).unwrap();
    server.reload();
    assert!(
        eventually(&|| serial() == first + 3),
        "{} {}",
        serial(),
        server.log()
    );
}

/// A policy taken away, then the server restarted and the file edited:
/// the serial served never goes back below what secondaries hold. A
/// restart serves the same serial for the same file (black-box finding:
/// it served the file's own, older one), and an edit whose serial is still
/// below gets the next one, on every later reload too.
#[test]
fn a_zone_unsigned_keeps_its_serial_past_the_signed_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve_signed("", &dir.path().join("keys"));
    let first = 2024010101;
    assert!(
        eventually(|| soa_serial(&server) == first),
        "{}",
        server.log()
    );
    let config = server.dir().join("heron.toml");
    let unsigned: String = (std::fs::read_to_string(&config).unwrap().lines())
        .filter(|l| !l.starts_with("dnssec-policy") && !l.starts_with("key-directory"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&config, &unsigned).unwrap();
    server.reload();
    assert!(
        eventually(|| soa_serial(&server) == first + 1),
        "{}",
        server.log()
    );
    drop(server);
    let restart = || {
        let text = unsigned.clone();
        ServerProcess::heron_with_config(&heron(), ORIGIN, move |port| {
            let listen = text.lines().find(|l| l.starts_with("listen")).unwrap();
            text.replace(listen, &format!("listen = [\"127.0.0.1:{port}\"]"))
        })
    };
    let server = restart();
    assert_eq!(soa_serial(&server), first + 1, "{}", server.log());
    let file = dir.path().join("edge.test.zone");
    let text = std::fs::read_to_string(&file).unwrap();
    let edited = text.replacen(&first.to_string(), &(first + 1).to_string(), 1);
    std::fs::write(&file, format!("{edited}added A 192.0.2.77\n")).unwrap();
    server.reload();
    assert!(
        eventually(|| soa_serial(&server) == first + 2),
        "{}",
        server.log()
    );
    drop(server);
    let server = restart();
    assert_eq!(soa_serial(&server), first + 2, "{}", server.log());
    let added = short_answer(&server, &format!("added.{ORIGIN}"), "A");
    assert_eq!(added.trim(), "192.0.2.77");
}

fn soa_serial(server: &ServerProcess) -> u32 {
    (short_answer(server, ORIGIN, "SOA")
        .split_whitespace()
        .nth(2))
    .and_then(|s| s.parse::<u32>().ok())
    .unwrap_or(0)
}

/// `kdig +short` of `name` and `rtype` from `server`.
fn short_answer(server: &ServerProcess, name: &str, rtype: &str) -> String {
    let addr = server.addr();
    let out = Command::new("kdig")
        .args([&format!("@{}", addr.ip()), "-p", &addr.port().to_string()])
        .args([name, rtype, "+short"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A zone whose keys are in a `key-directory` of its own, its DS asked
/// of the parent (CDS published), then its `dnssec-policy` removed while
/// the server is stopped: `check-config` and a start refuse it (served
/// unsigned it would be bogus), found through the note Heron keeps beside
/// the zone file, though no configuration names that directory any more.
#[test]
fn a_policy_removed_while_stopped_is_refused_with_keys_in_a_directory_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("own.zone");
    let zone = format!(
        "$ORIGIN {ORIGIN}\n$TTL 1\n@ SOA ns hostmaster 1 3600 600 86400 1\n@ NS ns\nns A 192.0.2.1\n"
    );
    std::fs::write(&file, zone).unwrap();
    let keys = dir.path().join("elsewhere");
    let fast = "propagation-delay = \"1s\"\ndnskey-ttl = \"1s\"\nretire-safety = \"1s\"";
    let server = serve_signed_file(fast, &keys, &file);
    let note = std::fs::read_to_string(dir.path().join("own.zone.key-directory")).unwrap();
    assert_eq!(note.trim_end(), keys.display().to_string());
    let cds_published = heron_testkit::eventually_within(Duration::from_secs(30), || {
        let out = Command::new("/usr/bin/kdig")
            .arg(format!("@{}", server.addr().ip()))
            .args([
                "-p",
                &server.addr().port().to_string(),
                ORIGIN,
                "CDS",
                "+short",
            ])
            .output()
            .unwrap();
        !String::from_utf8_lossy(&out.stdout).trim().is_empty()
    });
    assert!(cds_published, "{}", server.log());
    let config = std::fs::read_to_string(server.dir().join("heron.toml")).unwrap();
    drop(server);

    let unsigned: String = (config.lines())
        .filter(|l| !l.starts_with("dnssec-policy =") && !l.starts_with("key-directory ="))
        .map(|l| format!("{l}\n"))
        .collect();
    let config = dir.path().join("heron.toml");
    std::fs::write(&config, unsigned).unwrap();
    let check = Command::new(heron())
        .arg("check-config")
        .arg(&config)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stderr).into_owned()
        + &String::from_utf8_lossy(&check.stdout);
    assert!(!check.status.success(), "{said}");
    assert!(
        said.contains("dnssec-policy removed while the parent may still hold its DS"),
        "{said}"
    );
    assert!(said.contains(&keys.display().to_string()), "{said}");
    let mut start = Command::new(heron())
        .args(["serve", "--config"])
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let refused = heron_testkit::eventually_within(Duration::from_secs(20), || {
        start
            .try_wait()
            .unwrap()
            .is_some_and(|status| !status.success())
    });
    if !refused {
        let _ = start.kill();
        let _ = start.wait();
    }
    assert!(refused, "the start must be refused");
}

/// A zone signed in `dir` under a policy of seconds, once its CDS is
/// published (its DS asked of the parent): the server, its configuration
/// file and that file's text.
fn signed_with_cds_published(dir: &Path) -> (ServerProcess, PathBuf, String) {
    let file = dir.join("signed.zone");
    let zone = format!(
        "$ORIGIN {ORIGIN}\n$TTL 1\n@ SOA ns hostmaster 1 3600 600 86400 1\n@ NS ns\nns A 192.0.2.1\n"
    );
    std::fs::write(&file, zone).unwrap();
    let keys = dir.join("keys");
    let fast = "propagation-delay = \"1s\"\ndnskey-ttl = \"1s\"\nretire-safety = \"1s\"";
    let server = serve_signed_file(fast, &keys, &file);
    let cds = || short_answer(&server, ORIGIN, "CDS");
    let cds_published =
        heron_testkit::eventually_within(Duration::from_secs(30), || !cds().trim().is_empty());
    assert!(cds_published, "{}", server.log());
    let config_path = server.dir().join("heron.toml");
    let signed = std::fs::read_to_string(&config_path).unwrap();
    (server, config_path, signed)
}

/// `server` reloaded with `config` less its zone: no longer served.
fn zone_taken_out(server: &ServerProcess, path: &Path, config: &str) {
    let zone_at = config.find("[[zone]]").unwrap();
    std::fs::write(path, &config[..zone_at]).unwrap();
    server.reload();
    assert!(
        eventually(|| short_answer(server, ORIGIN, "SOA").trim().is_empty()),
        "{}",
        server.log()
    );
}

/// `config` without its zone's `dnssec-policy` and `key-directory`, each
/// other line as `line` makes it.
fn without_policy(config: &str, line: impl Fn(&str) -> String) -> String {
    (config.lines())
        .filter(|l| !l.starts_with("dnssec-policy =") && !l.starts_with("key-directory ="))
        .map(line)
        .collect()
}

/// `server` reloaded with `config` refuses it: the zone's DS may be at
/// the parent.
fn reload_is_refused_for_its_ds(server: &ServerProcess, path: &Path, config: String) {
    std::fs::write(path, config).unwrap();
    server.reload();
    assert!(
        server.wait_for_log("dnssec-policy removed while the parent may still hold its DS"),
        "{}",
        server.log()
    );
}

/// A signed zone whose DS was asked of the parent, taken out by one
/// reload and put back without its policy by the next: the second reload
/// is refused as a start with that configuration is, and the zone is not
/// served unsigned (black-box finding AM-32: it was, bogus to
/// validators holding the DS).
#[test]
fn a_signed_zone_put_back_unsigned_by_a_later_reload_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (server, config_path, signed) = signed_with_cds_published(dir.path());
    zone_taken_out(&server, &config_path, &signed);
    let unsigned = without_policy(&signed, |l| format!("{l}\n"));
    reload_is_refused_for_its_ds(&server, &config_path, unsigned);
    assert!(
        short_answer(&server, ORIGIN, "SOA").trim().is_empty(),
        "not served"
    );
}

/// A signed zone whose DS was asked of the parent, made a plain
/// secondary by a reload (its copy kept at another path, so no note
/// beside the file tells of its keys): the reload is refused and the zone
/// stays served signed (black-box finding BQ-9: it was served unsigned,
/// bogus to validators holding the DS). Taken out altogether, it is no
/// longer served: that is the operator's to do.
#[test]
fn a_signed_zone_made_a_plain_secondary_elsewhere_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (server, config_path, signed) = signed_with_cds_published(dir.path());
    let kept = dir.path().join("copy.zone");
    let primary = SocketAddr::from(([127, 0, 0, 1], heron_testkit::free_port()));
    let secondary = without_policy(&signed, |l| match l.starts_with("file =") {
        true => format!(
            "file = \"{}\"\nprimaries = [\"{primary}\"]\n",
            kept.display()
        ),
        false => format!("{l}\n"),
    });
    reload_is_refused_for_its_ds(&server, &config_path, secondary);
    assert!(
        !short_answer(&server, ORIGIN, "DNSKEY").trim().is_empty(),
        "still signed"
    );
    zone_taken_out(&server, &config_path, &signed);
}

/// The same made a generated catalog (no policy, served unsigned): refused
/// (regression hunt BR-7).
#[test]
fn a_signed_zone_made_a_generated_catalog_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (server, config_path, signed) = signed_with_cds_published(dir.path());
    let catalog = without_policy(&signed, |l| match l.starts_with("file =") {
        true => format!("{l}\ncatalog = \"generate\"\n"),
        false => format!("{l}\n"),
    });
    reload_is_refused_for_its_ds(&server, &config_path, catalog);
    assert!(
        !short_answer(&server, ORIGIN, "DNSKEY").trim().is_empty(),
        "still signed"
    );
}

/// `dig +dnssec +norec` for `name`/`qtype`: the answer's status and its
/// authority section's records, one per line.
fn dig_authority(server: &ServerProcess, name: &str, qtype: &str) -> (String, Vec<String>) {
    let addr = server.addr();
    let out = Command::new("dig")
        .arg(format!("@{}", addr.ip()))
        .args(["-p", &addr.port().to_string(), name, qtype])
        .args(["+dnssec", "+norec", "+noall", "+comments", "+authority"])
        .output()
        .expect("dig runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let status = (text.split("status: ").nth(1))
        .and_then(|rest| rest.split(',').next())
        .unwrap_or("none")
        .to_string();
    let records = (text.lines())
        .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    (status, records)
}

/// Chains through wildcard CNAMEs, with DO: a NSEC or NSEC3 record that
/// two steps of the chain prove is written once (RFC 2181 5; before, the
/// wildcard CNAME's proof was written again after the last step's). A
/// query for an NSEC3 owner name is answered as a name that does not
/// exist (RFC 5155 7.2.8; before, NOERROR with the NSEC3 as the answer,
/// which BIND's validator calls a format error).
#[test]
fn proofs_are_written_once_and_nsec3_owners_do_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("edge.test.zone");
    let text = std::fs::read_to_string(zone_file()).unwrap();
    // *.wcn's NSEC (to wcname) covers wcna too; foo.w2 is synthesized.
    // A name below www's NSEC3 owner (its hash with no salt and 0
    // iterations, the policy's): that owner is then an empty
    // non-terminal too, and the name below it exists.
    let extra = "*.wcn CNAME wcna\n*.c2 CNAME foo.w2\n*.w2 A 192.0.2.99\n\
                 x.dvtds4h2mocqs2sb1lbma6gs0v5mcp4r A 192.0.2.77\n";
    std::fs::write(&file, format!("{text}{extra}")).unwrap();
    for policy in ["", "denial = \"nsec3\""] {
        let keys = dir.path().join(format!("keys{}", policy.len()));
        let server = serve_signed_file(policy, &keys, &file);
        for (name, status) in [
            ("x.wcn.edge.test.", "NXDOMAIN"),
            ("d.c2.edge.test.", "NOERROR"),
            ("x.cnamewild.edge.test.", "NOERROR"),
        ] {
            let (got, records) = dig_authority(&server, name, "A");
            assert_eq!(got, status, "{policy} {name}");
            let mut unique = records.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(
                unique.len(),
                records.len(),
                "{policy} {name}:\n{records:#?}"
            );
        }
        let below_a_hash = "x.dvtds4h2mocqs2sb1lbma6gs0v5mcp4r.edge.test.";
        assert_eq!(dig_authority(&server, below_a_hash, "A").0, "NOERROR");
        let Some(owner) = (axfr(&server).lines())
            .filter(|l| !l.to_lowercase().starts_with("dvtds4h2"))
            .find(|l| l.contains("\tNSEC3\t"))
            .and_then(|l| l.split_whitespace().next())
            .map(str::to_string)
        else {
            continue; // NSEC
        };
        for qtype in ["NSEC3", "A", "ANY"] {
            let (got, _) = dig_authority(&server, &owner, qtype);
            assert_eq!(got, "NXDOMAIN", "{owner} {qtype}");
            let below = format!("x.{owner}");
            assert_eq!(dig_authority(&server, &below, qtype).0, "NXDOMAIN");
        }
    }
}

/// Whether `ok` holds within 10 s.
fn eventually(ok: impl Fn() -> bool) -> bool {
    (0..200).any(|_| {
        ok() || {
            std::thread::sleep(Duration::from_millis(50));
            false
        }
    })
}

/// A signed zone whose file has an `$INCLUDE` is read again at every
/// reload; read again unchanged, the version served stays, under its
/// serial (black-box finding AY-4: every reload made a new serial, a
/// NOTIFY and an IXFR for every secondary). A change in the included
/// file is a new version.
#[test]
fn a_signed_zone_read_again_unchanged_keeps_its_serial() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("edge.test.zone");
    let include = dir.path().join("inc.txt");
    let mut text = std::fs::read_to_string(zone_file()).unwrap();
    text.push_str(&format!("$INCLUDE {}\n", include.display()));
    std::fs::write(&file, text).unwrap();
    std::fs::write(&include, "inc 3600 IN A 192.0.2.55\n").unwrap();
    let server = serve_signed_file("", &dir.path().join("keys"), &file);
    let first = soa_serial(&server);
    let reloads = |server: &ServerProcess| server.log().matches("zones re-read").count();
    let reload = |server: &ServerProcess| {
        let before = reloads(server);
        server.reload();
        assert!(eventually(|| reloads(server) > before), "{}", server.log());
    };
    for _ in 0..2 {
        reload(&server);
        assert_eq!(soa_serial(&server), first, "{}", server.log());
    }
    std::fs::write(&include, "inc 3600 IN A 192.0.2.56\n").unwrap();
    reload(&server);
    assert!(soa_serial(&server) != first, "{}", server.log());
    let inc = short_answer(&server, &format!("inc.{ORIGIN}"), "A");
    assert_eq!(inc.trim(), "192.0.2.56");
}

/// A zone signed under a policy of seconds (KSK and ZSK) with a control
/// socket: the server, its zone file and its key directory.
fn fast_signed(dir: &Path) -> (ServerProcess, PathBuf, PathBuf) {
    let file = dir.join("fast.zone");
    let zone = format!(
        "$ORIGIN {ORIGIN}\n$TTL 2\n@ SOA ns hostmaster 1 60 60 600 2\n@ NS ns\n\
         ns A 192.0.2.1\nwww A 192.0.2.10\n"
    );
    std::fs::write(&file, zone).unwrap();
    let (f, keys) = (file.clone(), dir.join("keys"));
    let k = keys.clone();
    let server = ServerProcess::heron_with_config(&heron(), ORIGIN, move |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\ncontrol = \"control.sock\"\n\
             [[dnssec-policy]]\nname = \"p\"\nkeys = \"ksk-zsk\"\npropagation-delay = \"1s\"\n\
             dnskey-ttl = \"2s\"\ncds-ttl = \"2s\"\nretire-safety = \"1s\"\n\n\
             [[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\nallow-transfer = [\"127.0.0.1\"]\n\
             dnssec-policy = \"p\"\nkey-directory = \"{}\"\n",
            f.display(),
            k.display()
        )
    });
    (server, file, keys)
}

/// A key directory found holding no key of a zone served signed (its
/// state file listing none, or emptied) makes no new key: signing alone,
/// it would leave the parent's DS without its key. The reload fails and
/// says so, and the version served keeps its DNSKEYs (black-box finding
/// CA-1: a new key was swapped in at once, without a word).
#[test]
fn keys_lost_from_the_key_directory_are_not_replaced_by_new_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _file, keys) = fast_signed(dir.path());
    let dnskeys = |text: &str| -> Vec<String> {
        let mut lines: Vec<String> = (text.lines())
            .filter(|l| l.contains("\tDNSKEY\t"))
            .map(|l| l.split('\t').next_back().unwrap_or_default().to_string())
            .collect();
        lines.sort();
        lines
    };
    let before = dnskeys(&axfr(&server));
    assert_eq!(before.len(), 2, "KSK and ZSK");
    let state = keys.join(format!("{}keys.json", ORIGIN.to_ascii_lowercase()));
    let text = std::fs::read_to_string(&state).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["keys"] = serde_json::json!([]);
    std::fs::write(&state, json.to_string()).unwrap();
    let out = ctl(&server, &["reload", ORIGIN, "--force"]);
    let said = String::from_utf8_lossy(&[&out.stdout[..], &out.stderr[..]].concat()).into_owned();
    assert!(!out.status.success(), "{said}\n{}", server.log());
    assert!(
        server.log().contains("holds no key of the zone"),
        "{}",
        server.log()
    );
    assert_eq!(dnskeys(&axfr(&server)), before, "{}", server.log());
    let made = std::fs::read_dir(&keys).unwrap().count();
    assert_eq!(
        made,
        1 + 2 + 1,
        "the state file, the two keys and the lock: no new key"
    );
    // Emptied while stopped: the start serves the version kept signed.
    drop(server);
    std::fs::rename(&keys, dir.path().join("keys.away")).unwrap();
    std::fs::create_dir(&keys).unwrap();
    let (restarted, _, _) = fast_signed(dir.path());
    assert_eq!(dnskeys(&axfr(&restarted)), before, "{}", restarted.log());
    assert!(
        restarted.log().contains("holds no key of the zone"),
        "{}",
        restarted.log()
    );
}

/// `heron ctl ARGS` against `server`'s control socket.
fn ctl(server: &ServerProcess, args: &[&str]) -> std::process::Output {
    Command::new(heron())
        .args(["ctl", "--control"])
        .arg(server.dir().join("control.sock"))
        .args(args)
        .output()
        .unwrap()
}

/// A key step (here a ZSK rolled by hand) signs the version served again;
/// the zone file, edited since and not reloaded, is not read: its new
/// record is not served, and its typo does not stop the step (black-box
/// finding AY-7: an edit went live at the step, and a typo stopped every
/// refresh until the signatures expired).
#[test]
fn a_key_step_signs_the_version_served_not_an_edit_not_reloaded() {
    let dir = tempfile::tempdir().unwrap();
    let (server, file, _) = fast_signed(dir.path());
    let dnskeys = |s: &ServerProcess| short_answer(s, ORIGIN, "DNSKEY").lines().count();
    assert_eq!(dnskeys(&server), 2, "{}", server.log());
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("unreloaded A 192.0.2.200\nbroken A 999.1.1.1\n");
    std::fs::write(&file, text).unwrap();
    let out = ctl(&server, &["roll", ORIGIN, "zsk"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let published =
        heron_testkit::eventually_within(Duration::from_secs(30), || dnskeys(&server) == 3);
    assert!(published, "the successor published: {}", server.log());
    let unreloaded = short_answer(&server, &format!("unreloaded.{ORIGIN}"), "A");
    assert_eq!(unreloaded.trim(), "", "the edit waits for a reload");
    verify_with_tools(&SignedZone::from_text(ORIGIN, &axfr(&server)), false);
    // The old ZSK leaves: no warning of another signer's keys (BC-1).
    let left = heron_testkit::eventually_within(Duration::from_secs(60), || dnskeys(&server) == 2);
    assert!(left, "the old ZSK removed: {}", server.log());
    assert!(
        !server.log().contains("Heron does not hold"),
        "{}",
        server.log()
    );
}

/// A roll whose step fails (a key file that holds another key) is said
/// to have failed, with the reason, not to have published a successor
/// (regression hunt BC-3: "made and published now", exit 0).
#[test]
fn a_roll_whose_step_fails_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _, keys) = fast_signed(dir.path());
    let zsk = std::fs::read_dir(&keys)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".zsk.heron-key"))
        .expect("a ZSK file");
    let other = dir.path().join("other");
    let made = Command::new(heron())
        .args(["keymgr", "-d"])
        .arg(&other)
        .args([ORIGIN, "generate"])
        .output()
        .unwrap();
    assert!(made.status.success());
    let csk = std::fs::read_dir(&other)
        .unwrap()
        .map(|e| e.unwrap().path());
    let csk = csk
        .into_iter()
        .find(|p| p.to_string_lossy().ends_with(".heron-key"))
        .unwrap();
    let text = std::fs::read_to_string(csk)
        .unwrap()
        .replace("role: csk", "role: zsk");
    std::fs::write(&zsk, text).unwrap();
    let out = ctl(&server, &["roll", ORIGIN, "zsk"]);
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("the step that starts it failed"), "{said}");
    assert!(said.contains("the key state file names"), "{said}");
}

/// Zones whose names do not make plain file names are signed all the
/// same, their key files, state file and serial file in the key directory
/// itself: a 240-character origin (black-box finding DJ-2: its key file
/// name passed NAME_MAX and the zone was never served) and one with a `/`
/// in a label (DH-3: the key file went into a sub-folder, or nowhere).
#[test]
fn zones_with_long_or_slashed_names_are_signed_with_their_files_in_the_key_directory() {
    let long = format!("{0}.{0}.{0}.{1}.test.", "a".repeat(63), "d".repeat(42));
    for origin in [long.as_str(), "a\\/b.test."] {
        let dir = tempfile::tempdir().unwrap();
        let (file, keys) = (dir.path().join("z.zone"), dir.path().join("keys"));
        let text =
            "$TTL 300\n@ SOA ns hm 1 3600 600 86400 60\n@ NS ns\nns A 192.0.2.1\nwww A 192.0.2.2\n";
        std::fs::write(&file, format!("$ORIGIN {origin}\n{text}")).unwrap();
        let (f, k, o) = (file.clone(), keys.clone(), origin.to_string());
        let server = ServerProcess::heron_with_config(&heron(), origin, move |port| {
            format!(
                "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n\
                 [[zone]]\norigin = '{o}'\nfile = \"{}\"\ndnssec-policy = \"default\"\n\
                 key-directory = \"{}\"\n",
                f.display(),
                k.display()
            )
        });
        let out = Command::new("kdig")
            .args(["@127.0.0.1", "-p", &server.addr().port().to_string()])
            .args(["+dnssec", "+short", "SOA", origin])
            .output()
            .unwrap();
        let answer = String::from_utf8_lossy(&out.stdout);
        assert!(
            answer.contains("SOA"),
            "{origin}: {answer}\n{}",
            server.log()
        );
        let names: Vec<String> = std::fs::read_dir(&keys)
            .unwrap()
            .map(|e| e.unwrap())
            .inspect(|e| assert!(e.file_type().unwrap().is_file(), "{:?}", e.path()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            names.iter().any(|n| n.ends_with(".csk.heron-key")),
            "{names:?}"
        );
        assert!(names.iter().any(|n| n.ends_with(".keys.json")), "{names:?}");
        assert!(names.iter().all(|n| n.len() <= 251), "{names:?}");
    }
}

/// A zone file Heron signs that holds a DNSKEY of its own (a zone moved
/// from another signer) and no NSEC or NSEC3PARAM: no warning tells the
/// operator to add the chain the signer makes itself (black-box finding
/// DH-5), in check-config or at the start.
#[test]
fn a_zone_signed_here_is_not_warned_of_a_missing_chain() {
    let dir = tempfile::tempdir().unwrap();
    let (file, keys) = (dir.path().join("w.zone"), dir.path().join("keys"));
    let dnskey = "@ DNSKEY 257 3 13 K8R8JhlBUolrX0m0QdIAwp60umFcuNNuVVuzRbDcoBCa74pGzwfgj9IYAdYGgidUEPjoYtPek5slxUq8Sjj3lg==";
    let text = format!(
        "$ORIGIN w.test.\n$TTL 300\n@ SOA ns hm 1 3600 600 86400 60\n@ NS ns\n{dnskey}\nns A 192.0.2.1\n"
    );
    std::fs::write(&file, text).unwrap();
    let config = |port: u16| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n\
             [[zone]]\norigin = \"w.test\"\nfile = \"{}\"\ndnssec-policy = \"default\"\n\
             key-directory = \"{}\"\n",
            file.display(),
            keys.display()
        )
    };
    let path = dir.path().join("heron.toml");
    std::fs::write(&path, config(1)).unwrap();
    let out = Command::new(heron())
        .arg("check-config")
        .arg(&path)
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(!said.contains("neither an NSEC"), "{said}");
    let server = ServerProcess::heron_with_config(&heron(), "w.test.", config);
    assert!(
        !server.log().contains("neither an NSEC"),
        "{}",
        server.log()
    );
}

/// An origin that leaves no room for NSEC3's hash label is refused by
/// check-config under an NSEC3 policy, as its signing would fail at every
/// load (black-box finding DH-2: check-config said OK, the zone was never
/// served); under NSEC it is fine.
#[test]
fn check_config_refuses_an_origin_too_long_for_nsec3() {
    let dir = tempfile::tempdir().unwrap();
    // 3 x 64 + 29 + 1 = 222 octets fit; one more label octet does not.
    for (last, nsec3_fits) in [(28, true), (29, false)] {
        let origin = format!("{0}.{0}.{0}.{1}", "a".repeat(63), "b".repeat(last));
        let file = dir.path().join("long.zone");
        std::fs::write(
            &file,
            format!(
                "$ORIGIN {origin}.\n@ 300 SOA ns hm 1 2 3 4 5\n@ 300 NS ns\nns 300 A 192.0.2.1\n"
            ),
        )
        .unwrap();
        for (denial, fits) in [("nsec3", nsec3_fits), ("nsec", true)] {
            let path = dir.path().join("heron.toml");
            let text = format!(
                "[server]\nlisten = [\"127.0.0.1:1\"]\n[[dnssec-policy]]\nname = \"p\"\ndenial = \"{denial}\"\n\
                 [[zone]]\norigin = \"{origin}\"\nfile = \"{}\"\ndnssec-policy = \"p\"\n\
                 key-directory = \"{}\"\n",
                file.display(),
                dir.path().join("keys").display()
            );
            std::fs::write(&path, text).unwrap();
            let out = Command::new(heron())
                .arg("check-config")
                .arg(&path)
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.success(), fits, "{denial} {last}: {said}");
            if !fits {
                assert!(said.contains("too long for NSEC3"), "{said}");
            }
        }
    }
}
