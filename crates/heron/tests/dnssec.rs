//! Pre-signed zones: every answer Heron gives from `edge.test.zone`,
//! signed with NSEC, NSEC3 and NSEC3 opt-out (the checked-in fixtures of
//! `scripts/sign-test-zones.sh`, valid until 2040), must validate
//! with `delv` (bind9-dnsutils) given the zone's key as trust anchor:
//! positive answers fully validated, NXDOMAIN and NODATA with a validated
//! proof of denial. Which records those proofs hold is compared with NSD
//! and Knot in `differential.rs`. Signatures over a type their name lacks
//! (a pre-signed zone edited by hand) answer QTYPE RRSIG as NSD answers.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;

use heron_proto::message::Message;
use heron_proto::{Name, RType, Rcode};
use heron_testkit::{Chain, QueryOpts, ServerProcess, SignedZone, build_query, try_query_udp};

const ORIGIN: &str = "edge.test.";

/// How delv must judge an answer.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    /// Data, validated.
    Answer,
    /// Data from a wildcard: validated, except in an opt-out zone, where
    /// the NSEC3 covering the next closer name has the opt-out flag and
    /// delv calls the answer insecure (`; unsigned answer`), as it does
    /// with NSD and Knot serving the same file: there Heron's verdicts
    /// must equal NSD's.
    WildcardAnswer,
    NxDomain,
    NoData,
    /// A validated CNAME or DNAME to a name that does not exist, whose
    /// NXDOMAIN proof delv then also checks.
    ChainToNxDomain,
}

/// Names relative to the origin ("@" for the apex), the type, and what
/// the answer must be.
const QUERIES: &[(&str, &str, Expect)] = &[
    ("@", "SOA", Expect::Answer),
    ("@", "DNSKEY", Expect::Answer),
    ("@", "PTR", Expect::NoData),
    ("www", "A", Expect::Answer),
    ("www", "MX", Expect::NoData),
    ("nx", "A", Expect::NxDomain),
    ("a.b.c.d.nx", "TXT", Expect::NxDomain),
    // First and last names in canonical order, and around them.
    ("_sip._tcp", "SRV", Expect::Answer),
    ("_sip._tcp", "A", Expect::NoData),
    ("_a", "A", Expect::NxDomain),
    ("www", "AAAA", Expect::Answer),
    ("zzzz", "A", Expect::NxDomain),
    ("~", "A", Expect::NxDomain),
    // Empty non-terminals.
    ("ent", "A", Expect::NoData),
    ("c.ent", "A", Expect::NoData),
    ("b.c.ent", "MX", Expect::NoData),
    ("nx.c.ent", "A", Expect::NxDomain),
    ("_tcp", "A", Expect::NoData),
    // Wildcards: an answer, NODATA, and names below one.
    ("anything.wild", "A", Expect::WildcardAnswer),
    ("anything.wild", "TXT", Expect::WildcardAnswer),
    ("anything.wild", "MX", Expect::NoData),
    ("a.b.wild", "A", Expect::WildcardAnswer),
    ("specific.wild", "A", Expect::Answer),
    ("specific.wild", "TXT", Expect::NoData),
    ("nx.specific.wild", "A", Expect::NxDomain),
    ("nx.sub.wild", "A", Expect::NxDomain),
    ("sub.wild", "A", Expect::NoData),
    ("*.wild", "A", Expect::Answer),
    ("nx.*.wild", "A", Expect::NxDomain),
    ("x.mxonly", "MX", Expect::WildcardAnswer),
    ("x.mxonly", "A", Expect::NoData),
    ("x.cnamewild", "A", Expect::WildcardAnswer),
    // CNAMEs to a name that does not exist, and through a wildcard.
    ("dangling", "A", Expect::ChainToNxDomain),
    ("wcname", "A", Expect::WildcardAnswer),
    ("chain1", "A", Expect::Answer),
    // DS at delegations with and without DS; DNAME targets.
    ("sub", "DS", Expect::NoData),
    ("noglue", "DS", Expect::NoData),
    ("secure", "DS", Expect::Answer),
    ("x.dname", "A", Expect::Answer),
    ("nx.dname", "A", Expect::ChainToNxDomain),
];

fn zone_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/differential/edge.test.zone")
}

fn absolute(name: &str) -> String {
    match name {
        "@" => ORIGIN.to_string(),
        _ => format!("{name}.{ORIGIN}"),
    }
}

fn validates(chain: Chain) {
    let signed = SignedZone::fixture(ORIGIN, &zone_file(), chain);
    let heron_bin = PathBuf::from(env!("CARGO_BIN_EXE_heron"));
    let heron = ServerProcess::heron(&heron_bin, &[(ORIGIN, &signed.path)]);
    let opt_out = matches!(chain, Chain::Nsec3 { opt_out: true, .. });
    let nsd = opt_out.then(|| ServerProcess::nsd(&[(ORIGIN, &signed.path)]));
    let mut failures = Vec::new();
    for &(name, qtype, expect) in QUERIES {
        let v = signed.delv(heron.addr(), &absolute(name), qtype);
        let ok = match expect {
            Expect::Answer => v.is_validated_answer(),
            Expect::WildcardAnswer => match &nsd {
                None => v.is_validated_answer(),
                Some(nsd) => {
                    let reference = signed.delv(nsd.addr(), &absolute(name), qtype);
                    v.verdicts() == reference.verdicts() && v.is_answer()
                }
            },
            Expect::NxDomain => v.is_validated_negative(true),
            Expect::NoData => v.is_validated_negative(false),
            Expect::ChainToNxDomain => v.is_validated_chain_to_nxdomain(),
        };
        if !ok {
            failures.push(format!("{name} {qtype}: expected {expect:?}\n{v}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{chain}: {} of {} answers did not validate:\n{}",
        failures.len(),
        QUERIES.len(),
        failures.join("\n")
    );
}

#[test]
fn nsec_answers_validate() {
    validates(Chain::ALL[0]);
}

#[test]
fn nsec3_answers_validate() {
    validates(Chain::ALL[1]);
}

#[test]
fn nsec3_opt_out_answers_validate() {
    validates(Chain::ALL[2]);
}

/// A pre-signed zone edited by hand: RRsets removed, their RRSIGs left
/// (at the apex, beside an A at `a`, alone at `b`).
const ORPHAN_SIGS: &str = "$ORIGIN orphan.test.\n$TTL 3600\n\
    @ SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ NS ns1\nns1 A 192.0.2.1\n\
    @ RRSIG MX 8 2 3600 20300101000000 20200101000000 12345 orphan.test. AwEAAbcd\n\
    a A 192.0.2.2\n\
    a RRSIG A 8 3 3600 20300101000000 20200101000000 12345 orphan.test. AwEAAbcd\n\
    a RRSIG TXT 8 3 3600 20300101000000 20200101000000 12345 orphan.test. AwEAAbcd\n\
    b RRSIG TXT 8 3 3600 20300101000000 20200101000000 12345 orphan.test. AwEAAbcd\n";

/// The rcode and the answer's records (type and RDATA, sorted) of a
/// QTYPE RRSIG query for `name`.
fn rrsig_answer(server: SocketAddr, name: &str) -> (Rcode, Vec<(RType, Vec<u8>)>) {
    let query = build_query(
        &Name::parse(name).unwrap(),
        RType::RRSIG,
        &QueryOpts::default(),
    );
    let reply = Message::parse(&try_query_udp(server, &query).unwrap()).unwrap();
    let rcode = reply.rcode();
    let mut answers: Vec<_> = reply
        .answers
        .into_iter()
        .map(|r| (r.rtype, r.rdata))
        .collect();
    answers.sort();
    (rcode, answers)
}

/// RRSIGs over a type their name lacks are answered to QTYPE RRSIG with
/// the others at the name, as NSD (and Knot and BIND) answer them and
/// as AXFR serves them (black-box finding: NODATA); `check-zone` warns
/// of each, with its line.
#[test]
fn signatures_over_a_type_the_name_lacks_answer_rrsig_queries_as_nsd() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("orphan.test.zone");
    std::fs::write(&file, ORPHAN_SIGS).unwrap();
    let zones = [("orphan.test.", &file)];
    let heron_bin = PathBuf::from(env!("CARGO_BIN_EXE_heron"));
    let heron = ServerProcess::heron(&heron_bin, &zones);
    let nsd = ServerProcess::nsd(&zones);
    for (name, sigs) in [
        ("b.orphan.test.", 1),
        ("orphan.test.", 1),
        ("a.orphan.test.", 2),
    ] {
        let (rcode, answers) = rrsig_answer(heron.addr(), name);
        assert_eq!((rcode, answers.len()), (Rcode::NOERROR, sigs), "{name}");
        assert_eq!((rcode, answers), rrsig_answer(nsd.addr(), name), "{name}");
    }
    let out = Command::new(&heron_bin)
        .arg("check-zone")
        .arg(&file)
        .arg("orphan.test")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    for (line, owner) in [
        (6, "orphan.test."),
        (9, "a.orphan.test."),
        (10, "b.orphan.test."),
    ] {
        let said = format!("orphan.test.zone:{line}: warning: {owner}: RRSIG over ");
        assert!(text.contains(&said), "{said}: {text}");
    }
}

/// A zone signed elsewhere whose signatures have expired loads (it is
/// served as it is, as NSD and Knot serve it), but `check-zone` and the
/// server say so: every validator finds it bogus (black-box finding DB-7:
/// check-zone said OK, the server nothing, and compare, which leaves
/// signature dates out, found no difference).
#[test]
fn expired_signatures_are_said_by_check_zone_and_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("old.test.zone");
    let sig = |covered: &str| {
        format!("RRSIG {covered} 13 2 60 20200201000000 20200101000000 1 old.test. AAAA")
    };
    let text = format!(
        "$ORIGIN old.test.\n$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ {}\n@ NS ns\n@ {}\nns A 192.0.2.1\n",
        sig("SOA"),
        sig("NS")
    );
    std::fs::write(&file, text).unwrap();
    let heron_bin = PathBuf::from(env!("CARGO_BIN_EXE_heron"));
    let out = Command::new(&heron_bin)
        .args(["check-zone", file.to_str().unwrap(), "old.test"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "a warning: {said}");
    let expected = "of its 2 signatures, 2 have expired (the first at 20200201000000)";
    assert!(said.contains(expected), "{said}");
    let heron = ServerProcess::heron(&heron_bin, &[("old.test.", &file)]);
    assert!(heron.log().contains(expected), "{}", heron.log());
    // A zone Heron signs is signed anew: check-config does not warn of
    // the file's old signatures (black-box finding DG-3).
    let config = dir.path().join("heron.toml");
    let keys = dir.path().join("keys");
    std::fs::write(
        &config,
        format!(
            "[[zone]]\norigin = \"old.test\"\nfile = \"{}\"\ndnssec-policy = \"default\"\n\
             key-directory = \"{}\"\n",
            file.display(),
            keys.display()
        ),
    )
    .unwrap();
    let out = Command::new(&heron_bin)
        .args(["check-config", config.to_str().unwrap()])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{said}");
    assert!(!said.contains("have expired"), "{said}");
}
