//! A zone signed by BIND or Knot moves to Heron with its keys: `heron
//! keymgr ZONE import` takes the old signer's keys, Heron signs the
//! unsigned zone file with them, and the DNSKEY RRset keeps the old key
//! tags, so the DS at the parent stays valid with no rollover: `delv`,
//! given the old server's KSK as its trust anchor, calls Heron's positive,
//! NXDOMAIN and NODATA answers fully validated, and `dnssec-verify`
//! accepts Heron's AXFR. Bad key input is refused with a clear message
//! and leaves the key directory as it was.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use heron_testkit::{ServerKind, ServerProcess, SignedZone, free_port};

const ORIGIN: &str = "moved.test.";

const ZONE: &str = "$TTL 300\n\
@ IN SOA ns1 hostmaster 2026010101 3600 900 604800 300\n\
@ IN NS ns1\n\
ns1 IN A 192.0.2.1\n\
www IN A 192.0.2.10\n\
www IN AAAA 2001:db8::10\n\
mail IN MX 10 www\n\
txt IN TXT \"moved with its keys\"\n";

fn heron() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_heron"))
}

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"))
}

fn said(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// `heron keymgr -d KEYS ZONE import ARGS...`.
fn keymgr_import(keys: &Path, zone: &str, args: &[&str]) -> Output {
    let keys = keys.to_str().unwrap();
    let mut all = vec!["keymgr", "-d", keys, zone, "import"];
    all.extend_from_slice(args);
    run(heron().to_str().unwrap(), &all)
}

/// `heron keymgr import --from FROM DIR` into a new key directory,
/// which must succeed; the directory and what it printed.
fn import_keys(from: &str, dir: &Path) -> (tempfile::TempDir, String) {
    import_keys_with(from, dir, &[])
}

/// [`import_keys`] with more arguments to `import`.
fn import_keys_with(from: &str, dir: &Path, more: &[&str]) -> (tempfile::TempDir, String) {
    let keys = tempfile::tempdir().unwrap();
    let args = [&["--from", from, dir.to_str().unwrap()][..], more].concat();
    let out = keymgr_import(keys.path(), "moved.test", &args);
    let text = said(&out);
    assert!(out.status.success(), "{text}");
    (keys, text)
}

fn axfr(addr: SocketAddr) -> String {
    let port = addr.port().to_string();
    let server = format!("@{}", addr.ip());
    let out = run(
        "/usr/bin/kdig",
        &[
            &server,
            "-p",
            &port,
            ORIGIN,
            "AXFR",
            "+nocomments",
            "+nostats",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success() && text.contains("RRSIG"), "{text}");
    text
}

/// The key tags of the zone's DNSKEY RRset as `addr` serves it, sorted.
fn dnskey_tags(addr: SocketAddr) -> Vec<u16> {
    let port = addr.port().to_string();
    let server = format!("@{}", addr.ip());
    let out = run(
        "/usr/bin/dig",
        &[
            &server, "-p", &port, ORIGIN, "DNSKEY", "+multi", "+noall", "+answer",
        ],
    );
    let mut tags: Vec<u16> = said(&out)
        .split("key id = ")
        .skip(1)
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .collect();
    tags.sort();
    tags
}

/// Waits (bounded) until `addr` serves the zone signed.
fn wait_signed(addr: SocketAddr) -> bool {
    heron_testkit::eventually_within(std::time::Duration::from_secs(30), || {
        !dnskey_tags(addr).is_empty()
    })
}

/// Heron serving the unsigned zone file under `policy` with `keys`.
fn serve(policy: &str, keys: &Path, zone_file: &Path) -> ServerProcess {
    let (keys, file) = (keys.to_path_buf(), zone_file.to_path_buf());
    let policy = policy.to_string();
    ServerProcess::heron_with_config(&heron(), ORIGIN, move |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n\
             [[dnssec-policy]]\nname = \"moved\"\n{policy}\n\
             [[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\nallow-transfer = [\"127.0.0.1\"]\n\
             dnssec-policy = \"moved\"\nkey-directory = \"{}\"\n",
            file.display(),
            keys.display()
        )
    })
}

/// `dnssec-verify` accepts `axfr` (with `-z` for a CSK: it counts only
/// keys without the SEP flag as ZSKs).
fn dnssec_verify(axfr: &str, csk: bool) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("axfr.zone");
    std::fs::write(&path, axfr).unwrap();
    let mut args = vec!["-o", ORIGIN];
    if csk {
        args.push("-z");
    }
    args.push(path.to_str().unwrap());
    let out = run("/usr/bin/dnssec-verify", &args);
    assert!(out.status.success(), "dnssec-verify: {}", said(&out));
    assert!(said(&out).contains("Zone fully signed"), "{}", said(&out));
}

/// The move itself: Heron on the imported keys serves the old DNSKEY
/// tags, and the old trust anchor validates its answers.
fn heron_keeps_the_chain(old: &SignedZone, old_tags: &[u16], policy: &str, keys: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let unsigned = dir.path().join("moved.test.zone");
    std::fs::write(&unsigned, ZONE).unwrap();
    let heron = serve(policy, keys, &unsigned);
    assert_eq!(dnskey_tags(heron.addr()), old_tags, "the old DNSKEY RRset");
    let checks = [
        (format!("www.{ORIGIN}"), "A", None),
        (format!("txt.{ORIGIN}"), "TXT", None),
        (format!("nx.{ORIGIN}"), "A", Some(true)),
        (format!("www.{ORIGIN}"), "TXT", Some(false)),
    ];
    for (qname, qtype, negative) in checks {
        let v = old.delv(heron.addr(), &qname, qtype);
        let ok = match negative {
            None => v.is_validated_answer(),
            Some(nxdomain) => v.is_validated_negative(nxdomain),
        };
        assert!(ok, "{qname} {qtype}, the old trust anchor:\n{v}");
    }
    dnssec_verify(&axfr(heron.addr()), !policy.contains("ksk-zsk"));
    // The keys are kept: a restart signs with them again.
    drop(heron);
    let again = serve(policy, keys, &unsigned);
    assert_eq!(dnskey_tags(again.addr()), old_tags);
}

/// The migration as an operator runs it: `heron import` of the old
/// server's configuration (which must pass check-config and list the
/// keymgr command), that command run, and Heron started on the written
/// file (its key directory made absolute) serving the old DNSKEY tags
/// with answers the old trust anchor validates.
fn migrate(from: &str, conf: &Path, port: u16, old: &SignedZone, old_tags: &[u16]) {
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("heron.toml");
    let heron_bin = heron();
    let heron_bin = heron_bin.to_str().unwrap();
    let args = [
        "import",
        "--from",
        from,
        conf.to_str().unwrap(),
        "-o",
        toml.to_str().unwrap(),
    ];
    let out = run(heron_bin, &args);
    let listing = said(&out);
    assert!(out.status.success(), "{listing}");
    let check = run(heron_bin, &["check-config", toml.to_str().unwrap()]);
    assert!(check.status.success(), "{}", said(&check));
    let command = listing
        .split('`')
        .find(|part| part.starts_with("heron keymgr -d keys moved.test import"))
        .unwrap_or_else(|| panic!("no keymgr command in the listing:\n{listing}"));
    let keys = dir.path().join("keys");
    let words: Vec<&str> = command.split_whitespace().skip(1).collect();
    let imported = Command::new(heron_bin)
        .args(&words)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(imported.status.success(), "{command}: {}", said(&imported));
    let text = std::fs::read_to_string(&toml).unwrap();
    assert!(
        text.contains("[[dnssec-policy]]") || text.contains("dnssec-policy = \"default\""),
        "{text}"
    );
    let config = text.replace(
        "\ndnssec-policy = ",
        &format!("\nkey-directory = \"{}\"\ndnssec-policy = ", keys.display()),
    );
    let heron = ServerProcess::heron_on_port(&heron(), port, ORIGIN, &config)
        .unwrap_or_else(|log| panic!("Heron on the imported configuration: {log}\n{config}"));
    assert_eq!(dnskey_tags(heron.addr()), old_tags, "{config}");
    let v = old.delv(heron.addr(), &format!("www.{ORIGIN}"), "A");
    assert!(v.is_validated_answer(), "{v}");
    let v = old.delv(heron.addr(), &format!("nx.{ORIGIN}"), "A");
    assert!(v.is_validated_negative(true), "{v}");
}

fn named_conf(dir: &Path, port: u16) -> String {
    let d = dir.display();
    std::fs::create_dir_all(dir.join("keys")).unwrap();
    std::fs::write(dir.join("moved.test.zone"), ZONE).unwrap();
    format!(
        "options {{\n  directory \"{d}\";\n  listen-on port {port} {{ 127.0.0.1; }};\n  \
         listen-on-v6 {{ none; }};\n  pid-file \"{d}/named.pid\";\n  recursion no;\n  \
         allow-transfer {{ 127.0.0.1; }};\n}};\n\
         zone \"moved.test\" {{\n  type primary;\n  file \"{d}/moved.test.zone\";\n  \
         dnssec-policy default;\n  inline-signing yes;\n  key-directory \"{d}/keys\";\n}};\n"
    )
}

#[test]
fn a_zone_signed_by_bind_with_dnssec_policy_moves_with_its_keys() {
    let port = free_port();
    let mut named = ServerProcess::peer_with_config(ServerKind::Bind, port, ORIGIN, |dir| {
        named_conf(dir, port)
    })
    .expect("named starts");
    assert!(wait_signed(named.addr()), "named signs the zone");
    let old_tags = dnskey_tags(named.addr());
    let old = SignedZone::from_text(ORIGIN, &axfr(named.addr()));
    let bind_keys = named.dir().join("keys");
    named.terminate();
    let state_files = std::fs::read_dir(&bind_keys)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".state"))
        .count();
    assert!(state_files > 0, "dnssec-policy writes .state files");

    let keys = tempfile::tempdir().unwrap();
    let out = keymgr_import(
        keys.path(),
        "moved.test",
        &["--from", "bind", bind_keys.to_str().unwrap()],
    );
    let text = said(&out);
    assert!(out.status.success(), "{text}");
    let tag = old_tags[0].to_string();
    assert!(
        text.contains(&format!("csk {tag} (algorithm 13)")),
        "{text}"
    );
    assert!(text.contains("keys = \"csk\""), "{text}");
    assert!(
        !text.contains("PrivateKey") && !text.contains("private-key"),
        "{text}"
    );
    // BIND's default policy is Heron's: ECDSA P-256, one CSK, NSEC.
    heron_keeps_the_chain(&old, &old_tags, "", keys.path());
    migrate(
        "bind",
        &named.dir().join("named.conf"),
        port,
        &old,
        &old_tags,
    );
}

fn knot_conf(dir: &Path, port: u16) -> String {
    let policy = "nsec3: on\n    nsec3-iterations: 0\n    nsec3-salt-length: 0\n";
    knot_signing_conf(dir, port, ZONE, policy)
}

/// knotd signing `zone` under an ECDSA P-256 policy with `policy` lines
/// more (its control socket `knot.sock` in its folder, for knotc).
fn knot_signing_conf(dir: &Path, port: u16, zone: &str, policy: &str) -> String {
    let d = dir.display();
    std::fs::write(dir.join("moved.test.zone"), zone).unwrap();
    format!(
        "server:\n  rundir: \"{d}\"\n  listen: 127.0.0.1@{port}\n  background-workers: 1\n  \
         udp-workers: 1\n  tcp-workers: 1\nlog:\n  - target: stderr\n    any: info\n\
         database:\n  storage: \"{d}\"\n  kasp-db: \"{d}/kasp\"\n\
         acl:\n  - id: xfr\n    address: 127.0.0.1\n    action: transfer\n\
         policy:\n  - id: moved\n    algorithm: ecdsap256sha256\n    {policy}\
         zone:\n  - domain: moved.test\n    file: \"{d}/moved.test.zone\"\n    \
         zonefile-sync: -1\n    zonefile-load: difference\n    journal-content: all\n    \
         dnssec-signing: on\n    dnssec-policy: moved\n    acl: xfr\n"
    )
}

#[test]
fn a_zone_signed_by_knot_moves_with_its_keys() {
    let port = free_port();
    let mut knotd =
        ServerProcess::peer_with_config(ServerKind::Knot, port, ORIGIN, |dir| knot_conf(dir, port))
            .expect("knotd starts");
    assert!(wait_signed(knotd.addr()), "knotd signs the zone");
    let old_tags = dnskey_tags(knotd.addr());
    assert_eq!(old_tags.len(), 2, "Knot's default: a KSK and a ZSK");
    let old = SignedZone::from_text(ORIGIN, &axfr(knotd.addr()));
    let kasp = knotd.dir().join("kasp");
    knotd.terminate();

    let (keys, text) = import_keys("knot", &kasp);
    assert!(text.contains("ksk ") && text.contains("zsk "), "{text}");
    assert!(text.contains("keys = \"ksk-zsk\""), "{text}");
    assert!(!text.contains("PRIVATE KEY"), "{text}");
    // Importing again adds nothing.
    let again = said(&keymgr_import(
        keys.path(),
        "moved.test",
        &["--from", "knot", kasp.to_str().unwrap()],
    ));
    assert_eq!(again.matches("already there").count(), 2, "{again}");
    heron_keeps_the_chain(
        &old,
        &old_tags,
        "keys = \"ksk-zsk\"\ndenial = \"nsec3\"",
        keys.path(),
    );
    migrate(
        "knot",
        &knotd.dir().join("knot.conf"),
        port,
        &old,
        &old_tags,
    );
}

/// `dnssec-keygen` in `dir` for `zone`; the key's file stem.
/// Knot keeping the keys' PEM files in a keystore of their own, outside
/// the KASP database: the command `heron import` lists names the folder
/// (`--keystore`), and run as listed it brings the keys.
#[test]
fn a_zone_signed_by_knot_from_a_keystore_of_its_own_moves_with_its_keys() {
    let port = free_port();
    let conf = |dir: &Path| {
        let pem = dir.join("pem");
        std::fs::create_dir_all(&pem).unwrap();
        let keystore = format!(
            "keystore:\n  - id: ks\n    backend: pem\n    config: \"{}\"\npolicy:\n",
            pem.display()
        );
        let policy = "keystore: ks\n";
        knot_signing_conf(dir, port, ZONE, policy).replacen("policy:\n", &keystore, 1)
    };
    let mut knotd = ServerProcess::peer_with_config(ServerKind::Knot, port, ORIGIN, conf)
        .expect("knotd starts");
    assert!(wait_signed(knotd.addr()), "knotd signs the zone");
    let old_tags = dnskey_tags(knotd.addr());
    let old = SignedZone::from_text(ORIGIN, &axfr(knotd.addr()));
    knotd.terminate();
    let pems = std::fs::read_dir(knotd.dir().join("pem")).unwrap().count();
    assert_eq!(pems, 2, "the keys are in the keystore");
    let conf = knotd.dir().join("knot.conf");
    migrate("knot", &conf, port, &old, &old_tags);
}

fn keygen(dir: &Path, zone: &str, args: &[&str]) -> String {
    let mut all = vec!["-K", dir.to_str().unwrap()];
    all.extend_from_slice(args);
    all.push(zone);
    let out = run("/usr/bin/dnssec-keygen", &all);
    assert!(out.status.success(), "{}", said(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_zone_signed_by_dnssec_signzone_with_rsa_moves_and_check_config_accepts_rsasha256() {
    let bind = tempfile::tempdir().unwrap();
    let b = bind.path();
    keygen(b, ORIGIN, &["-a", "RSASHA256", "-b", "2048", "-f", "KSK"]);
    keygen(b, ORIGIN, &["-a", "RSASHA256", "-b", "2048"]);
    let zone = b.join("moved.test.zone");
    std::fs::write(&zone, ZONE).unwrap();
    let out = run(
        "/usr/bin/dnssec-signzone",
        &[
            "-S",
            "-K",
            b.to_str().unwrap(),
            // Its dsset file goes with the keys, not into the crate.
            "-d",
            b.to_str().unwrap(),
            "-o",
            ORIGIN,
            "-f",
            b.join("signed").to_str().unwrap(),
            zone.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", said(&out));
    // The signed zone served as it is: its DNSKEY RRset gives the old KSK.
    let old_server = ServerProcess::heron(&heron(), &[(ORIGIN, b.join("signed"))]);
    let addr = old_server.addr();
    let (server, port) = (format!("@{}", addr.ip()), addr.port().to_string());
    let dnskeys = run(
        "/usr/bin/dig",
        &[&server, "-p", &port, ORIGIN, "DNSKEY", "+noall", "+answer"],
    );
    let old = SignedZone::from_text(ORIGIN, &said(&dnskeys));
    let old_tags = dnskey_tags(old_server.addr());
    drop(old_server);

    let keys = tempfile::tempdir().unwrap();
    let policy = "algorithm = \"rsasha256\"\nkeys = \"ksk-zsk\"";
    let config = keys.path().join("heron.toml");
    let write_config = || {
        std::fs::write(
            &config,
            format!(
                "[[dnssec-policy]]\nname = \"moved\"\n{policy}\n[[zone]]\norigin = \"{ORIGIN}\"\n\
                 file = \"{}\"\ndnssec-policy = \"moved\"\nkey-directory = \"{}\"\n",
                zone.display(),
                keys.path().join("k").display()
            ),
        )
        .unwrap()
    };
    write_config();
    let check = || {
        run(
            heron().to_str().unwrap(),
            &["check-config", config.to_str().unwrap()],
        )
    };
    let refused = check();
    assert!(!refused.status.success());
    assert!(
        said(&refused).contains("import --from bind"),
        "{}",
        said(&refused)
    );

    let out = keymgr_import(
        &keys.path().join("k"),
        "moved.test",
        &["--from", "bind", b.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        said(&out).contains("algorithm = \"rsasha256\""),
        "{}",
        said(&out)
    );
    let accepted = check();
    assert!(accepted.status.success(), "{}", said(&accepted));
    heron_keeps_the_chain(&old, &old_tags, policy, &keys.path().join("k"));
}

/// A KSK Knot holds `ready` (published and signing the DNSKEY RRset,
/// its DS not yet confirmed: black-box finding AQ-2, imported as not yet
/// published) is imported as published and waiting for its DS: Heron
/// serves it and its CDS, as Knot did. A key Knot holds public-only
/// (AQ-13, a bare "No such file" error) is refused by its tag.
#[test]
fn a_knot_ksk_waiting_for_its_ds_keeps_its_cds_and_a_public_only_key_is_named() {
    let kasp = tempfile::tempdir().unwrap();
    let keymgr = |args: &[&str]| {
        let mut all = vec!["-D", kasp.path().to_str().unwrap(), ORIGIN];
        all.extend_from_slice(args);
        let out = run("keymgr", &all);
        assert!(out.status.success(), "{}", said(&out));
        said(&out)
    };
    let ready = ["publish=-1d", "ready=-1d", "active=0"];
    keymgr(&[&["generate", "algorithm=13", "ksk=yes"][..], &ready].concat());
    keymgr(&[
        "generate",
        "algorithm=13",
        "ksk=no",
        "publish=-1d",
        "active=-1d",
    ]);
    let list = keymgr(&["list", "-e"]);
    let tag_of = |line: &str| -> u16 {
        let tag = line.split("tag=").nth(1).unwrap().split_whitespace().next();
        tag.unwrap().parse().unwrap()
    };
    let ksk = tag_of(list.lines().find(|l| l.contains("ksk=yes")).unwrap());
    let mut tags: Vec<u16> = list
        .lines()
        .filter(|l| l.contains("tag="))
        .map(tag_of)
        .collect();
    tags.sort();

    let (keys, text) = import_keys("knot", kasp.path());
    let line = text.lines().find(|l| l.starts_with(&format!("ksk {ksk} ")));
    let line = line.unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("published, signing the DNSKEY RRset, waiting for its DS"),
        "{text}"
    );
    let dir = tempfile::tempdir().unwrap();
    let unsigned = dir.path().join("moved.test.zone");
    std::fs::write(&unsigned, ZONE).unwrap();
    let heron = serve("keys = \"ksk-zsk\"", keys.path(), &unsigned);
    assert_eq!(
        dnskey_tags(heron.addr()),
        tags,
        "no key made, none left out"
    );
    let port = heron.addr().port().to_string();
    let cds = run(
        "/usr/bin/dig",
        &["@127.0.0.1", "-p", &port, ORIGIN, "CDS", "+short"],
    );
    let cds = said(&cds);
    assert!(
        cds.starts_with(&format!("{ksk} 13 ")),
        "the KSK's CDS:\n{cds}"
    );
    drop(heron);

    let bind = tempfile::tempdir().unwrap();
    let stem = keygen(bind.path(), ORIGIN, &["-a", "ECDSAP256SHA256"]);
    let public = bind.path().join(format!("{stem}.key"));
    keymgr(&["import-pub", public.to_str().unwrap()]);
    let other: u16 = stem.rsplit('+').next().unwrap().parse().unwrap();
    let keys = tempfile::tempdir().unwrap();
    let out = keymgr_import(
        keys.path(),
        "moved.test",
        &["--from", "knot", kasp.path().to_str().unwrap()],
    );
    let (text, left) = (said(&out), listing(keys.path()));
    assert!(!out.status.success(), "{text}");
    let named = format!("ZSK {other}, algorithm 13) is public-only");
    assert!(text.contains(&named), "{text}");
    assert!(left.is_empty(), "nothing written: {left:?}");
}

/// The files of `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

/// Runs a BIND import of `bind` that must fail saying `needle`, and
/// leave the key directory without any key.
fn refused(bind: &Path, needle: &str) {
    let keys = tempfile::tempdir().unwrap();
    let out = keymgr_import(
        keys.path(),
        "moved.test",
        &["--from", "bind", bind.to_str().unwrap()],
    );
    assert!(!out.status.success(), "{}", said(&out));
    assert!(
        said(&out).contains(needle),
        "want `{needle}`: {}",
        said(&out)
    );
    assert!(
        !listing(keys.path())
            .iter()
            .any(|n| n.ends_with(".heron-key") || n.ends_with(".json")),
        "{:?}",
        listing(keys.path())
    );
}

#[test]
fn bad_bind_keys_are_refused_with_a_clear_message_and_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Malformed: a .key file with no DNSKEY record.
    let good = keygen(d, ORIGIN, &["-a", "ECDSAP256SHA256", "-f", "KSK"]);
    std::fs::write(
        d.join("Kmoved.test.+013+00001.key"),
        "moved.test. IN A 192.0.2.1\n",
    )
    .unwrap();
    std::fs::copy(
        d.join(format!("{good}.private")),
        d.join("Kmoved.test.+013+00001.private"),
    )
    .unwrap();
    refused(d, "no DNSKEY record");
    std::fs::remove_file(d.join("Kmoved.test.+013+00001.key")).unwrap();
    std::fs::remove_file(d.join("Kmoved.test.+013+00001.private")).unwrap();

    // A public key with another key's private half.
    let other = keygen(d, ORIGIN, &["-a", "ECDSAP256SHA256"]);
    std::fs::copy(
        d.join(format!("{good}.private")),
        d.join(format!("{other}.private")),
    )
    .unwrap();
    refused(d, "does not match the public key");
    for ext in ["key", "private"] {
        std::fs::remove_file(d.join(format!("{other}.{ext}"))).unwrap();
    }

    // A key of another zone under this zone's file name.
    let foreign = keygen(d, "other.test.", &["-a", "ECDSAP256SHA256"]);
    let tag = foreign.rsplit('+').next().unwrap();
    for ext in ["key", "private"] {
        std::fs::rename(
            d.join(format!("{foreign}.{ext}")),
            d.join(format!("Kmoved.test.+013+{tag}.{ext}")),
        )
        .unwrap();
    }
    refused(d, "is of zone other.test., not moved.test.");
    for ext in ["key", "private"] {
        std::fs::remove_file(d.join(format!("Kmoved.test.+013+{tag}.{ext}"))).unwrap();
    }

    // An algorithm Heron does not sign with (ECDSA P-384).
    let p384 = keygen(d, ORIGIN, &["-a", "ECDSAP384SHA384"]);
    refused(d, "algorithm 14");
    for ext in ["key", "private"] {
        std::fs::remove_file(d.join(format!("{p384}.{ext}"))).unwrap();
    }

    // An RSA key smaller than ring signs with, refused in words.
    let small = keygen(d, ORIGIN, &["-a", "RSASHA256", "-b", "1024"]);
    refused(
        d,
        "too small (Heron signs with RSA keys of 2,048 bits or more",
    );
    for ext in ["key", "private"] {
        std::fs::remove_file(d.join(format!("{small}.{ext}"))).unwrap();
    }

    // Other zones' keys in the folder are left alone; the good key imports.
    keygen(d, "other.test.", &["-a", "ECDSAP256SHA256"]);
    let keys = tempfile::tempdir().unwrap();
    let out = keymgr_import(
        keys.path(),
        "moved.test",
        &["--from", "bind", d.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", said(&out));
    let written: Vec<String> = listing(keys.path())
        .into_iter()
        .filter(|n| n.ends_with(".heron-key"))
        .collect();
    assert_eq!(written.len(), 1, "{written:?}");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(keys.path().join(&written[0]))
            .unwrap()
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);

    // No key of the zone at all.
    let empty = tempfile::tempdir().unwrap();
    refused(
        empty.path(),
        "no key of moved.test. (no Kmoved.test.+ALG+TAG.key file)",
    );
}

#[test]
fn more_keys_than_the_limit_are_refused_before_any_is_read() {
    let dir = tempfile::tempdir().unwrap();
    for n in 0..=32 {
        for ext in ["key", "private"] {
            let name = format!("Kmoved.test.+013+{n:05}.{ext}");
            std::fs::write(dir.path().join(name), "x").unwrap();
        }
    }
    refused(dir.path(), "more than 32 keys of moved.test.");
    // At the limit the files are read (and these are refused as malformed).
    std::fs::remove_file(dir.path().join("Kmoved.test.+013+00032.key")).unwrap();
    std::fs::remove_file(dir.path().join("Kmoved.test.+013+00032.private")).unwrap();
    refused(dir.path(), "no DNSKEY record");
}

#[test]
fn a_knot_key_list_of_another_zone_or_a_missing_pem_is_refused() {
    let kasp = tempfile::tempdir().unwrap();
    std::fs::create_dir(kasp.path().join("keys")).unwrap();
    let list = kasp.path().join("list.json");
    let entry = |zone: &str| {
        format!(
            "[{{\"zone\": \"{zone}\", \"id\": \"5abb2a8a89fef8effea659f6b040afb667cefe8f\", \
             \"ksk\": true, \"zsk\": false, \"tag\": 34585, \"algorithm\": 13, \
             \"publish\": 1, \"active\": 1}}]"
        )
    };
    let knot = |keys: &Path| {
        let args = [
            "--from",
            "knot",
            kasp.path().to_str().unwrap(),
            "--knot-list",
            list.to_str().unwrap(),
        ];
        keymgr_import(keys, "moved.test", &args)
    };
    let keys = tempfile::tempdir().unwrap();
    std::fs::write(&list, entry("other.test.")).unwrap();
    let out = knot(keys.path());
    assert!(!out.status.success());
    assert!(
        said(&out).contains("is of zone other.test., not moved.test."),
        "{}",
        said(&out)
    );
    std::fs::write(&list, entry("moved.test.")).unwrap();
    let out = knot(keys.path());
    assert!(!out.status.success());
    assert!(
        said(&out).contains("5abb2a8a89fef8effea659f6b040afb667cefe8f.pem"),
        "{}",
        said(&out)
    );
    std::fs::write(&list, "{not json").unwrap();
    let out = knot(keys.path());
    assert!(
        said(&out).contains("not keymgr's JSON key list"),
        "{}",
        said(&out)
    );
    assert!(
        listing(keys.path()).is_empty(),
        "{:?}",
        listing(keys.path())
    );
}

#[test]
fn a_key_the_old_signer_retired_stays_retired_and_is_not_signed_with() {
    let bind = tempfile::tempdir().unwrap();
    let b = bind.path();
    let (past, later) = ("20200101000000", "20210101000000");
    let retired = keygen(
        b,
        ORIGIN,
        &[
            "-a",
            "13",
            "-f",
            "KSK",
            "-P",
            past,
            "-A",
            past,
            "-I",
            later,
            "-D",
            "20400101000000",
        ],
    );
    let active = keygen(
        b,
        ORIGIN,
        &["-a", "13", "-f", "KSK", "-P", past, "-A", later],
    );
    let tag = |stem: &str| stem.rsplit('+').next().unwrap().parse::<u16>().unwrap();
    let keys = tempfile::tempdir().unwrap();
    let out = keymgr_import(
        keys.path(),
        "moved.test",
        &["--from", "bind", b.to_str().unwrap()],
    );
    let text = said(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(&format!("csk {} (algorithm 13): retired", tag(&retired))),
        "{text}"
    );
    assert!(
        text.contains(&format!("csk {} (algorithm 13): active", tag(&active))),
        "{text}"
    );
    let list = run(
        heron().to_str().unwrap(),
        &[
            "keymgr",
            "-d",
            keys.path().to_str().unwrap(),
            "moved.test",
            "list",
        ],
    );
    assert!(
        said(&list).contains("retiring") || said(&list).contains("retired"),
        "{}",
        said(&list)
    );
    let dir = tempfile::tempdir().unwrap();
    let unsigned = dir.path().join("moved.test.zone");
    std::fs::write(&unsigned, ZONE).unwrap();
    let heron = serve("", keys.path(), &unsigned);
    assert_eq!(dnskey_tags(heron.addr()), [tag(&active)]);
}

/// The zone of the mid-rollover moves: TTLs of seconds, so that the
/// rollover Heron finishes takes seconds.
const FAST_ZONE: &str = "$TTL 2\n\
@ IN SOA ns1 hostmaster 1 60 60 600 2\n\
@ IN NS ns1\n\
ns1 IN A 192.0.2.1\n\
www IN A 192.0.2.10\n\
*.wild IN TXT \"wild\"\n";

/// An rndc key BIND's control channel takes (a fixed test secret).
const RNDC_KEY: &str = "key \"rndc-key\" { algorithm hmac-sha256; secret \"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTAxMjM=\"; };\n";

/// named signing the zone under a `dnssec-policy` of seconds, with a
/// control channel on `control` for `rndc`.
fn named_rolling_conf(dir: &Path, port: u16, control: u16) -> String {
    let d = dir.display();
    std::fs::create_dir_all(dir.join("keys")).unwrap();
    std::fs::write(dir.join("moved.test.zone"), FAST_ZONE).unwrap();
    std::fs::write(dir.join("rndc.key"), RNDC_KEY).unwrap();
    format!(
        "include \"{d}/rndc.key\";\n\
         controls {{ inet 127.0.0.1 port {control} allow {{ 127.0.0.1; }} keys {{ \"rndc-key\"; }}; }};\n\
         options {{\n  directory \"{d}\";\n  listen-on port {port} {{ 127.0.0.1; }};\n  \
         listen-on-v6 {{ none; }};\n  pid-file \"{d}/named.pid\";\n  recursion no;\n  \
         dnssec-validation no;\n  allow-transfer {{ 127.0.0.1; }};\n}};\n\
         dnssec-policy \"fast\" {{\n  keys {{ ksk lifetime unlimited algorithm ecdsap256sha256; \
         zsk lifetime unlimited algorithm ecdsap256sha256; }};\n  dnskey-ttl PT2S;\n  \
         publish-safety PT1S;\n  retire-safety PT1S;\n  zone-propagation-delay PT1S;\n  \
         max-zone-ttl PT2S;\n  parent-ds-ttl PT2S;\n  parent-propagation-delay PT1S;\n}};\n\
         zone \"moved.test\" {{\n  type primary;\n  file \"{d}/moved.test.zone\";\n  \
         dnssec-policy fast;\n  inline-signing yes;\n  key-directory \"{d}/keys\";\n}};\n"
    )
}

/// `rndc` on named's control channel.
fn rndc(named: &ServerProcess, control: u16, args: &[&str]) -> String {
    let key = named.dir().join("rndc.key");
    let port = control.to_string();
    let mut all = vec!["-k", key.to_str().unwrap(), "-s", "127.0.0.1", "-p", &port];
    all.extend_from_slice(args);
    let out = run("/usr/sbin/rndc", &all);
    assert!(out.status.success(), "rndc {args:?}: {}", said(&out));
    said(&out)
}

/// The `Name: value` fields of BIND's `.state` file of key `tag`.
fn bind_state(keys: &Path, tag: u16) -> String {
    let path = keys.join(format!("Kmoved.test.+013+{tag:05}.state"));
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The roles, goals and states of the keys in Heron's state file.
fn heron_keys(keys: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(keys.join("moved.test.keys.json")).unwrap_or_default();
    let state: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    state["keys"].as_array().cloned().unwrap_or_default()
}

/// Heron's answers validate from the old trust anchor, and its AXFR
/// passes dnssec-verify.
fn validates(old: &SignedZone, heron: &ServerProcess) -> Result<(), String> {
    let checks = [
        (ORIGIN.to_string(), "DNSKEY", None),
        (format!("www.{ORIGIN}"), "A", None),
        (format!("a.wild.{ORIGIN}"), "TXT", None),
        (format!("nx.{ORIGIN}"), "A", Some(true)),
    ];
    for (qname, qtype, negative) in checks {
        let v = old.delv(heron.addr(), &qname, qtype);
        let ok = match negative {
            None => v.is_validated_answer(),
            Some(nxdomain) => v.is_validated_negative(nxdomain),
        };
        if !ok {
            return Err(format!("{qname} {qtype}, the old trust anchor:\n{v}"));
        }
    }
    dnssec_verify(&axfr(heron.addr()), false);
    Ok(())
}

/// A zone BIND (dnssec-policy) is rolling the ZSK of, caught while the
/// signatures go over to the new key (both DNSKEYs published, BIND's old
/// ZSK retiring, its signatures withdrawn), moves to Heron: Heron goes
/// on with that rollover to its end (the old ZSK's DNSKEY gone, the new
/// one in place), every step validating from the old trust anchor, and
/// starts no rollover of its own (no key made).
#[test]
fn a_zone_bind_is_rolling_the_zsk_of_moves_and_heron_finishes_the_roll() {
    let (port, control) = (free_port(), free_port());
    let mut named = ServerProcess::peer_with_config(ServerKind::Bind, port, ORIGIN, |dir| {
        named_rolling_conf(dir, port, control)
    })
    .expect("named starts");
    let bind_keys = named.dir().join("keys");
    let limit = std::time::Duration::from_secs(30);
    let two = heron_testkit::eventually_within(limit, || dnskey_tags(named.addr()).len() == 2);
    assert!(two, "named signs the zone: {}", named.log());
    let tags = dnskey_tags(named.addr());
    let (ksk, zsk) = match bind_state(&bind_keys, tags[0]).contains("KSK: yes") {
        true => (tags[0], tags[1]),
        false => (tags[1], tags[0]),
    };
    rndc(
        &named,
        control,
        &[
            "dnssec",
            "-checkds",
            "-key",
            &ksk.to_string(),
            "published",
            "moved.test",
        ],
    );
    // The zone's first keys in place (BIND drops a DNSKEY no cache can
    // hold yet at once) before the ZSK rolls.
    let in_place = heron_testkit::eventually_within(limit, || {
        let (k, z) = (bind_state(&bind_keys, ksk), bind_state(&bind_keys, zsk));
        k.contains("DSState: omnipresent")
            && z.contains("DNSKEYState: omnipresent")
            && z.contains("ZRRSIGState: omnipresent")
    });
    assert!(in_place, "BIND's keys: {}", named.log());
    rndc(
        &named,
        control,
        &[
            "dnssec",
            "-rollover",
            "-key",
            &zsk.to_string(),
            "moved.test",
        ],
    );
    // BIND's new ZSK published everywhere, the old one's signatures on
    // their way out (a phase BIND keeps for days: until every signature
    // is made again by the new key).
    let mid_roll = heron_testkit::eventually_within(limit, || {
        let old = bind_state(&bind_keys, zsk);
        let new = dnskey_tags(named.addr())
            .into_iter()
            .filter(|t| ![ksk, zsk].contains(t))
            .map(|t| bind_state(&bind_keys, t))
            .next()
            .unwrap_or_default();
        old.contains("ZRRSIGState: unretentive")
            && old.contains("DNSKEYState: omnipresent")
            && new.contains("DNSKEYState: omnipresent")
            && new.contains("ZRRSIGState: rumoured")
    });
    assert!(mid_roll, "BIND's ZSK roll: {}", named.log());
    let old_tags = dnskey_tags(named.addr());
    assert_eq!(old_tags.len(), 3, "{old_tags:?}");
    let new_zsk = *old_tags.iter().find(|t| ![ksk, zsk].contains(t)).unwrap();
    let old = SignedZone::from_text(ORIGIN, &axfr(named.addr()));
    named.terminate();

    let (keys, text) = import_keys("bind", &bind_keys);
    assert!(
        text.contains(&format!("zsk {zsk} (algorithm 13): retired")),
        "{text}"
    );
    assert!(
        text.contains(&format!("zsk {new_zsk} (algorithm 13): not yet in place")),
        "{text}"
    );

    heron_finishes_the_zsk_roll(&old, keys.path(), ksk, zsk, new_zsk);
}

/// Heron, serving the zone on the keys imported into `keys` mid-way
/// through the roll of ZSK `zsk` to `new_zsk`, ends that roll: `zsk`
/// gone, `new_zsk` in place, no key made; every step seen validates
/// from the old trust anchor.
fn heron_finishes_the_zsk_roll(old: &SignedZone, keys: &Path, ksk: u16, zsk: u16, new_zsk: u16) {
    let dir = tempfile::tempdir().unwrap();
    let unsigned = dir.path().join("moved.test.zone");
    std::fs::write(&unsigned, FAST_ZONE).unwrap();
    let policy = "keys = \"ksk-zsk\"\nzsk-lifetime = \"1d\"\npropagation-delay = \"1s\"\n\
                  dnskey-ttl = \"2s\"\ncds-ttl = \"2s\"\nparent-ds-ttl = \"2s\"\n\
                  parent-propagation-delay = \"1s\"\nretire-safety = \"1s\"";
    let heron = serve(policy, keys, &unsigned);
    let mut phases: Vec<String> = Vec::new();
    let done = heron_testkit::eventually_within(std::time::Duration::from_secs(60), || {
        let keys = heron_keys(keys);
        let phase = format!("{keys:?}");
        if phases.last() != Some(&phase) {
            phases.push(phase);
            if let Err(why) = validates(old, &heron) {
                panic!("{why}\nkeys: {keys:#?}\n{}", heron.log());
            }
        }
        let of = |tag: u16| {
            keys.iter()
                .find(|k| k["tag"] == tag)
                .cloned()
                .unwrap_or_default()
        };
        of(zsk)["removed"].is_u64() && of(new_zsk)["active"].is_u64()
    });
    assert!(done, "{:#?}\n{}", heron_keys(keys), heron.log());
    validates(old, &heron).unwrap();
    assert_eq!(dnskey_tags(heron.addr()), {
        let mut t = vec![ksk, new_zsk];
        t.sort();
        t
    });
    assert_eq!(heron_keys(keys).len(), 3, "no key made");
    assert!(
        !heron.log().contains("DNSSEC key generated"),
        "{}",
        heron.log()
    );
}

/// knotd signing the zone under a policy of seconds.
fn knot_rolling_conf(dir: &Path, port: u16) -> String {
    let policy = "dnskey-ttl: 2\n    zone-max-ttl: 2\n    propagation-delay: 1\n    \
                  ksk-lifetime: 0\n    zsk-lifetime: 0\n";
    knot_signing_conf(dir, port, FAST_ZONE, policy)
}

/// `knotc` on knotd's control socket.
fn knotc(knotd: &ServerProcess, args: &[&str]) {
    let socket = knotd.dir().join("knot.sock");
    let mut all = vec!["-s", socket.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = run("/usr/sbin/knotc", &all);
    assert!(out.status.success(), "knotc {args:?}: {}", said(&out));
}

/// The same for a zone Knot is rolling the ZSK of (`knotc
/// zone-key-rollover`), caught with the new ZSK published and not yet
/// signing: Knot's key list has only times, the older ZSK retires as the
/// newer takes over.
#[test]
fn a_zone_knot_is_rolling_the_zsk_of_moves_and_heron_finishes_the_roll() {
    let port = free_port();
    let mut knotd = ServerProcess::peer_with_config(ServerKind::Knot, port, ORIGIN, |dir| {
        knot_rolling_conf(dir, port)
    })
    .expect("knotd starts");
    let limit = std::time::Duration::from_secs(30);
    let two = heron_testkit::eventually_within(limit, || dnskey_tags(knotd.addr()).len() == 2);
    assert!(two, "knotd signs the zone: {}", knotd.log());
    // The DS is at the parent: the KSK becomes active.
    knotc(&knotd, &["zone-ksk-submitted", "moved.test"]);
    let active =
        heron_testkit::eventually_within(limit, || knotd.log().contains("KSK, public, active"));
    assert!(active, "{}", knotd.log());
    let before = dnskey_tags(knotd.addr());
    knotc(&knotd, &["zone-key-rollover", "moved.test", "zsk"]);
    let three = heron_testkit::eventually_within(limit, || dnskey_tags(knotd.addr()).len() == 3);
    assert!(three, "Knot's ZSK roll: {}", knotd.log());
    let old_tags = dnskey_tags(knotd.addr());
    let old = SignedZone::from_text(ORIGIN, &axfr(knotd.addr()));
    let kasp = knotd.dir().join("kasp");
    knotd.terminate();
    let new_zsk = *old_tags.iter().find(|t| !before.contains(t)).unwrap();

    // Knot's key files do not say the DNSKEY TTL (the policy above: 2 s):
    // given, else rollovers wait a day for the RRset Knot served.
    let (keys, text) = import_keys_with("knot", &kasp, &["--dnskey-ttl", "2"]);
    assert!(
        text.contains("served its DNSKEY RRset with TTL 2"),
        "{text}"
    );
    assert!(text.contains("keys = \"ksk-zsk\""), "{text}");
    let list = run(
        "/usr/sbin/keymgr",
        &["-j", "-D", kasp.to_str().unwrap(), "moved.test", "list"],
    );
    let list: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let tag_of = |ksk: bool| -> u16 {
        let keys = list.as_array().unwrap().iter();
        let mut of_role = keys.filter(|k| k["ksk"] == ksk && k["tag"] != new_zsk);
        of_role.next().unwrap()["tag"].as_u64().unwrap() as u16
    };
    let (ksk, zsk) = (tag_of(true), tag_of(false));
    heron_finishes_the_zsk_roll(&old, keys.path(), ksk, zsk, new_zsk);
}

/// Run as root in a key directory the server's user owns, keymgr leaves
/// every file it makes or replaces to that user: a root-owned 0600 state
/// file stopped the running server from signing the zone (black-box
/// finding AY-3).
#[test]
fn keymgr_as_root_leaves_the_files_to_the_key_directorys_owner() {
    use std::os::unix::fs::MetadataExt;
    if std::fs::metadata("/proc/self").unwrap().uid() != 0 {
        eprintln!("skipped: not run as root");
        return;
    }
    let keys = tempfile::tempdir().unwrap();
    let nobody = 65534;
    std::os::unix::fs::chown(keys.path(), Some(nobody), Some(nobody)).unwrap();
    let dir = keys.path().to_str().unwrap();
    for args in [
        &["keymgr", "-d", dir, "owned.test", "generate"][..],
        &["keymgr", "-d", dir, "owned.test", "roll", "csk"][..],
    ] {
        let out = run(heron().to_str().unwrap(), args);
        assert!(out.status.success(), "{}", said(&out));
        for entry in std::fs::read_dir(keys.path()).unwrap() {
            let meta = entry.unwrap().metadata().unwrap();
            assert_eq!((meta.uid(), meta.gid()), (nobody, nobody), "{args:?}");
        }
    }
}

/// The zone file at the serial `addr` serves, as an operator raises it
/// before Heron takes over (docs/migrating.md: the old signer serves a
/// serial of its own), in `dir`.
fn at_served_serial(addr: SocketAddr, dir: &Path) -> PathBuf {
    let port = addr.port().to_string();
    let server = format!("@{}", addr.ip());
    let out = run(
        "/usr/bin/dig",
        &[&server, "-p", &port, ORIGIN, "SOA", "+short"],
    );
    let serial = said(&out).split_whitespace().nth(2).unwrap().to_string();
    let file = dir.join("moved.test.zone");
    std::fs::write(&file, ZONE.replace("2026010101", &serial)).unwrap();
    file
}

/// `heron compare` of the running old signer and Heron serving `file`:
/// its exit code and report.
fn compare_signed(old: SocketAddr, heron_addr: SocketAddr, file: &Path) -> (Option<i32>, String) {
    let zone = format!("{ORIGIN}={}", file.display());
    let out = run(
        heron().to_str().unwrap(),
        &[
            "compare",
            "--against",
            &old.to_string(),
            "--server",
            &heron_addr.to_string(),
            "--zone",
            &zone,
        ],
    );
    (out.status.code(), said(&out))
}

/// A zone BIND signs (dnssec-policy, NSEC) moved to Heron with its keys
/// compares clean against BIND while both serve it: BIND's private
/// signing-state record (TYPE65534) at the apex, and its bit in the apex's
/// NSEC, are named as tolerated, not differences (black-box finding BT-8:
/// such a zone could never compare clean).
#[test]
fn a_zone_moved_from_bind_with_its_keys_compares_clean() {
    let port = free_port();
    let named = ServerProcess::peer_with_config(ServerKind::Bind, port, ORIGIN, |dir| {
        named_conf(dir, port)
    })
    .expect("named starts");
    assert!(wait_signed(named.addr()), "named signs the zone");
    let old_tags = dnskey_tags(named.addr());
    let keys = tempfile::tempdir().unwrap();
    let bind_keys = named.dir().join("keys");
    let out = keymgr_import(
        keys.path(),
        "moved.test",
        &["--from", "bind", bind_keys.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", said(&out));
    let dir = tempfile::tempdir().unwrap();
    let unsigned = at_served_serial(named.addr(), dir.path());
    let heron_server = serve("", keys.path(), &unsigned);
    assert_eq!(dnskey_tags(heron_server.addr()), old_tags);
    let (code, report) = compare_signed(named.addr(), heron_server.addr(), &unsigned);
    assert_eq!(code, Some(0), "{report}");
    assert!(report.contains(", 0 with differences"), "{report}");
    assert!(report.contains("bind-signing-state"), "{report}");
}

/// A zone Knot signs with NSEC3 and Knot's default 8-octet salt, moved to
/// Heron with its keys under a policy without salt (what `heron import`
/// writes, RFC 9276): the denial proofs hash other owners, which compare
/// names as tolerated (`nsec3-parameters`), and the rest compares clean
/// (BT-8).
#[test]
fn a_zone_moved_from_knot_with_a_salted_nsec3_chain_compares_clean() {
    let port = free_port();
    let salted = "nsec3: on\n    nsec3-iterations: 0\n    nsec3-salt-length: 8\n";
    let knotd = ServerProcess::peer_with_config(ServerKind::Knot, port, ORIGIN, |dir| {
        knot_signing_conf(dir, port, ZONE, salted)
    })
    .expect("knotd starts");
    assert!(wait_signed(knotd.addr()), "knotd signs the zone");
    let old_tags = dnskey_tags(knotd.addr());
    let (keys, text) = import_keys("knot", &knotd.dir().join("kasp"));
    assert!(text.contains("keys = \"ksk-zsk\""), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let unsigned = at_served_serial(knotd.addr(), dir.path());
    // Knot's DNSKEY TTL is the SOA's (heron import says so), its CDS TTL
    // 0 (heron import writes it).
    let policy = "keys = \"ksk-zsk\"\ndenial = \"nsec3\"\ndnskey-ttl = \"300\"\ncds-ttl = \"0\"";
    let heron_server = serve(policy, keys.path(), &unsigned);
    assert_eq!(dnskey_tags(heron_server.addr()), old_tags);
    let (code, report) = compare_signed(knotd.addr(), heron_server.addr(), &unsigned);
    assert_eq!(code, Some(0), "{report}");
    assert!(report.contains(", 0 with differences"), "{report}");
    assert!(report.contains("nsec3-parameters"), "{report}");
}
