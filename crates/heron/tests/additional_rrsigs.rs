//! RRSIGs over the addresses in the additional section (RFC 4035 3.1.1),
//! against Knot and NSD, and for a zone Heron signs itself.
//!
//! * `pre_signed_additional_matches_knot`: one zone signed here with
//!   `dnssec-signzone`, served by Heron, Knot and NSD; the additional
//!   sections of MX, NS, SRV and referral answers, with DO and without,
//!   must be Knot's (NSD, with `minimal-responses: yes`, adds MX/SRV/NS
//!   addresses only to referrals: there it must agree too). An MX RRset
//!   whose addresses cannot all fit in 1232 octets shows how each server
//!   drops what does not fit; Heron keeps each address RRset with its
//!   RRSIGs and never sets TC.
//! * `heron_signed_additional_carries_the_zones_signatures`: Heron signs
//!   the zone (`dnssec-policy`); the RRSIGs in the additional section of
//!   an MX answer are the zone's own (as AXFR shows them) and `delv`
//!   validates the answer and the address.
//!
//! What the peers do (Knot 3.2.6, NSD 4.6.1, on this zone, DO set, 1232):
//!
//! * MX or SRV target in the zone: Knot adds its A and AAAA, then their
//!   RRSIGs at the end of the section. NSD adds nothing with
//!   `minimal-responses: yes`; with `no`, each RRset followed by its RRSIG
//!   (and the addresses of the apex NS it puts in the authority section).
//!   Heron: Knot's records, each RRset followed by its RRSIGs as NSD.
//! * NS at the apex, name servers in the zone: both add their addresses
//!   with RRSIGs (NSD even with `minimal-responses: yes`). Heron too.
//! * Referral: the glue below the cut unsigned in both; a name server
//!   named in the parent's own data comes with its RRSIGs in both. Heron
//!   too.
//! * Near the limit (`big MX`: 12 targets, 24 signed address RRsets, about
//!   3 KB): Knot writes all 24 addresses, then only the RRSIGs that still
//!   fit (4), leaving 20 addresses unsigned; NSD (`minimal-responses: no`)
//!   writes RRset and RRSIG together until one does not fit. Neither sets
//!   TC. Heron follows NSD here: an address RRset and its RRSIGs go in
//!   together or not at all (a validator given an address without its
//!   signature must ask for it anyway), and never TC for them.

use std::path::{Path, PathBuf};
use std::process::Command;

use heron_proto::{Class, Name, Opcode, RType};
use heron_testkit::{
    EdnsOpts, Normalized, QueryOpts, ServerProcess, SignedZone, build_query, normalize,
    try_query_udp,
};

const ORIGIN: &str = "addl.test.";

/// NS and MX targets in the zone (signed addresses), out of it (none),
/// a delegation with glue (unsigned) and an in-zone name server, and
/// `big`: 12 mail servers with an A and an AAAA each, more than 1232
/// octets with their RRSIGs.
fn zone_text() -> String {
    let mut text = String::from(
        "$ORIGIN addl.test.\n$TTL 3600\n\
         @ SOA ns1 hostmaster 1 7200 3600 1209600 300\n\
         @ NS ns1\n@ NS ns2\n\
         @ MX 10 mail\n@ MX 20 mx.elsewhere.net.\n\
         ns1 A 192.0.2.53\nns1 AAAA 2001:db8::53\nns2 A 192.0.2.54\n\
         mail A 192.0.2.25\nmail AAAA 2001:db8::25\n\
         _sip._udp SRV 0 5 5060 mail\n\
         sub NS ns.sub\nsub NS ns1\nns.sub A 192.0.2.99\nns.sub AAAA 2001:db8::99\n",
    );
    for i in 1..=12 {
        text.push_str(&format!(
            "big MX {i} m{i}.big\nm{i}.big A 192.0.2.{}\nm{i}.big AAAA 2001:db8::1:{i}\n",
            100 + i
        ));
    }
    text
}

fn heron() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_heron"))
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{cmd:?}: {text}");
    text
}

/// Signs `zone_text()` in `dir` with fresh ECDSA P-256 keys (a KSK and a
/// ZSK) and NSEC, as `scripts/sign-test-zones.sh` signs the fixtures.
fn sign(dir: &Path) -> PathBuf {
    let source = dir.join("addl.test.zone");
    std::fs::write(&source, zone_text()).unwrap();
    for ksk in [false, true] {
        let mut keygen = Command::new("/usr/bin/dnssec-keygen");
        keygen
            .current_dir(dir)
            .args(["-q", "-a", "ECDSAP256SHA256"]);
        if ksk {
            keygen.args(["-f", "KSK"]);
        }
        run(keygen.args(["-n", "ZONE", ORIGIN]));
    }
    let signed = dir.join("addl.test.signed");
    run(Command::new("/usr/bin/dnssec-signzone")
        .current_dir(dir)
        .args(["-q", "-S", "-K", ".", "-O", "full", "-o", ORIGIN, "-f"])
        .arg(&signed)
        .arg(&source));
    signed
}

fn ask(server: &ServerProcess, name: &str, qtype: RType, do_bit: bool) -> Normalized {
    let opts = QueryOpts {
        id: 0x4242,
        rd: false,
        edns: Some(EdnsOpts {
            udp_size: 1232,
            do_bit,
            version: 0,
        }),
        opcode: Opcode::QUERY,
        qclass: Class::IN,
    };
    let qname = Name::parse(name).unwrap();
    let query = build_query(&qname, qtype, &opts);
    let response = try_query_udp(server.addr(), &query)
        .unwrap_or_else(|e| panic!("{name} {qtype} from {:?}: {e}", server.kind()));
    normalize(&response).unwrap()
}

/// The queries whose additional sections are compared.
const CASES: &[(&str, RType)] = &[
    ("addl.test.", RType::MX),
    ("addl.test.", RType::NS),
    ("_sip._udp.addl.test.", RType::SRV),
    ("www.sub.addl.test.", RType::A),
    ("sub.addl.test.", RType::NS),
];

fn rtype_of(record: &str) -> &str {
    record.split(' ').nth(3).unwrap_or("")
}

/// The RRSIGs in `n`'s additional section, as `owner covered`.
fn signed_in_additional(n: &Normalized) -> Vec<String> {
    let sigs = n.additional.iter().filter(|r| rtype_of(r) == "RRSIG");
    sigs.map(|r| {
        let f: Vec<&str> = r.split(' ').collect();
        format!("{} {}", f[0], f[4])
    })
    .collect()
}

#[test]
fn pre_signed_additional_matches_knot() {
    let dir = tempfile::tempdir().unwrap();
    let signed = sign(dir.path());
    let zones = [(ORIGIN, signed.as_path())];
    let heron = ServerProcess::heron(&heron(), &zones);
    let knot = ServerProcess::knot(&zones);
    let nsd = ServerProcess::nsd(&zones);
    let mut failures = Vec::new();
    for &(name, qtype) in CASES {
        for do_bit in [true, false] {
            let (h, k, n) = (
                ask(&heron, name, qtype, do_bit),
                ask(&knot, name, qtype, do_bit),
                ask(&nsd, name, qtype, do_bit),
            );
            let what = format!("{name} {qtype} do={do_bit}");
            eprintln!(
                "{what}\n  Heron {:?}\n  Knot  {:?}\n  NSD   {:?}",
                h.additional, k.additional, n.additional
            );
            if h.additional != k.additional {
                failures.push(format!(
                    "{what}: Heron {:?}\n  Knot {:?}",
                    h.additional, k.additional
                ));
            }
            let referral = !h.has_flag("aa");
            if referral && h.additional != n.additional {
                failures.push(format!(
                    "{what}: Heron {:?}\n  NSD {:?}",
                    h.additional, n.additional
                ));
            }
            if !do_bit && !signed_in_additional(&h).is_empty() {
                failures.push(format!("{what}: RRSIGs without DO"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    check_glue_and_signed_addresses(&heron);
    near_the_limit(&heron, &knot, &nsd);
}

/// With DO: the glue below `sub` unsigned, every in-zone address signed.
fn check_glue_and_signed_addresses(heron: &ServerProcess) {
    let referral = ask(heron, "www.sub.addl.test.", RType::A, true);
    assert_eq!(
        signed_in_additional(&referral),
        ["ns1.addl.test. A", "ns1.addl.test. AAAA"],
        "{referral:?}"
    );
    let mx = ask(heron, "addl.test.", RType::MX, true);
    assert_eq!(
        signed_in_additional(&mx),
        ["mail.addl.test. A", "mail.addl.test. AAAA"],
        "{mx:?}"
    );
}

/// `big MX`: what each server keeps of 12 signed address pairs in 1232
/// octets (printed), and Heron's rules: no TC, every address with its
/// RRSIG.
fn near_the_limit(heron: &ServerProcess, knot: &ServerProcess, nsd: &ServerProcess) {
    for (who, server) in [("Heron", heron), ("Knot", knot), ("NSD", nsd)] {
        let m = ask(server, "big.addl.test.", RType::MX, true);
        let addresses: Vec<&String> = m
            .additional
            .iter()
            .filter(|r| matches!(rtype_of(r), "A" | "AAAA"))
            .collect();
        eprintln!(
            "big MX, DO, 1232: {who}: flags {}, {} answer records, {} addresses, {} RRSIGs: {:?}",
            m.flags,
            m.answer.len(),
            addresses.len(),
            signed_in_additional(&m).len(),
            m.additional
        );
        if who != "Heron" {
            continue;
        }
        assert!(!m.has_flag("tc"), "{m:?}");
        assert!(!addresses.is_empty() && addresses.len() < 24, "{m:?}");
        let sigs = signed_in_additional(&m);
        for a in &addresses {
            let f: Vec<&str> = a.split(' ').collect();
            let want = format!("{} {}", f[0], f[3]);
            assert!(sigs.contains(&want), "{a} without its RRSIG: {m:?}");
        }
        assert_eq!(sigs.len(), addresses.len(), "{m:?}");
    }
}

/// Heron serving the unsigned zone under the built-in `default` policy.
fn serve_signed(keys: &Path, file: &Path) -> ServerProcess {
    let (file, keys) = (file.to_path_buf(), keys.to_path_buf());
    ServerProcess::heron_with_config(&heron(), ORIGIN, move |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n\
             [[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\nallow-transfer = [\"127.0.0.1\"]\n\
             dnssec-policy = \"default\"\nkey-directory = \"{}\"\n",
            file.display(),
            keys.display()
        )
    })
}

fn kdig(server: &ServerProcess, args: &[&str]) -> String {
    let addr = server.addr();
    run(Command::new("/usr/bin/kdig")
        .arg(format!("@{}", addr.ip()))
        .args(["-p", &addr.port().to_string()])
        .args(args))
}

/// The record lines of kdig's output (no comments), whitespace folded.
fn records(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

#[test]
fn heron_signed_additional_carries_the_zones_signatures() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    std::fs::create_dir(&keys).unwrap();
    let source = dir.path().join("addl.test.zone");
    std::fs::write(&source, zone_text()).unwrap();
    let server = serve_signed(&keys, &source);
    let axfr = kdig(&server, &[ORIGIN, "AXFR", "+nocomments", "+nostats"]);
    let zone = records(&axfr);
    let mail_sig = |t: &str| {
        let prefix = "mail.addl.test. 3600 IN RRSIG ";
        let in_zone: Vec<&String> = zone
            .iter()
            .filter(|r| r.starts_with(prefix) && r[prefix.len()..].starts_with(&format!("{t} ")))
            .collect();
        assert_eq!(in_zone.len(), 1, "{t}: {axfr}");
        in_zone[0].clone()
    };
    let answer = kdig(
        &server,
        &[
            ORIGIN,
            "MX",
            "+dnssec",
            "+nocomments",
            "+nostats",
            "+noquestion",
        ],
    );
    let got = records(&answer);
    for t in ["A", "AAAA"] {
        let sig = mail_sig(t);
        assert!(
            got.contains(&sig),
            "{sig} not in the additional section:\n{answer}"
        );
    }
    let without_do = kdig(&server, &[ORIGIN, "MX", "+nocomments", "+nostats"]);
    assert!(!without_do.contains("RRSIG"), "{without_do}");
    assert!(without_do.contains("mail.addl.test."), "{without_do}");
    let signed = SignedZone::from_text(ORIGIN, &axfr);
    for (qname, qtype) in [
        (ORIGIN, "MX"),
        ("mail.addl.test.", "A"),
        ("mail.addl.test.", "AAAA"),
    ] {
        let v = signed.delv(server.addr(), qname, qtype);
        assert!(v.is_validated_answer(), "{v}");
    }
}
