//! Load-time checks of a zone's contents: each problem is reported with the
//! file and line of the record concerned, errors stop the zone from loading
//! and warnings do not.

use heron_proto::Name;
use heron_zone::{Problem, Severity, load_zone_file, load_zone_str};

const HEAD: &str =
    "$ORIGIN example.test.\n$TTL 300\n@ SOA ns hostmaster 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n";

fn origin() -> Name {
    Name::parse("example.test").unwrap()
}

fn problems(body: &str) -> Result<Vec<Problem>, Vec<Problem>> {
    let text = format!("{HEAD}{body}");
    load_zone_str(&text, "checks.zone", &origin()).map(|l| l.warnings)
}

fn one(list: &[Problem], severity: Severity) -> &Problem {
    let matching: Vec<&Problem> = list.iter().filter(|p| p.severity == severity).collect();
    assert_eq!(matching.len(), 1, "{list:?}");
    matching[0]
}

fn line_of(p: &Problem) -> u32 {
    p.location.as_ref().expect("a location").line
}

#[test]
fn a_clean_zone_loads_without_problems() {
    let loaded = load_zone_str(HEAD, "checks.zone", &origin()).unwrap();
    assert!(loaded.warnings.is_empty());
    assert_eq!(loaded.zone.serial(), 1);
    assert_eq!(loaded.zone.record_count(), 3);
}

#[test]
fn missing_soa_is_an_error() {
    let text = "$ORIGIN example.test.\n$TTL 300\n@ NS ns\nns A 192.0.2.1\n";
    let errs = load_zone_str(text, "checks.zone", &origin()).err().unwrap();
    assert!(
        one(&errs, Severity::Error)
            .message
            .contains("no SOA record at the zone apex")
    );
}

#[test]
fn two_soa_records_are_an_error() {
    let errs = problems("@ SOA ns2 hostmaster 2 2 3 4 5\n").unwrap_err();
    let p = one(&errs, Severity::Error);
    assert!(p.message.contains("2 SOA records"), "{p}");
    assert_eq!(line_of(p), 3, "points at the first SOA");
}

#[test]
fn soa_below_the_apex_is_an_error() {
    let errs = problems("sub SOA ns hostmaster 1 2 3 4 5\n").unwrap_err();
    let p = one(&errs, Severity::Error);
    assert!(p.message.contains("not the zone apex"), "{p}");
    assert_eq!(line_of(p), 6);
}

#[test]
fn missing_apex_ns_is_an_error() {
    let text = "$ORIGIN example.test.\n$TTL 300\n@ SOA ns hostmaster 1 2 3 4 5\n";
    let errs = load_zone_str(text, "checks.zone", &origin()).err().unwrap();
    assert!(
        one(&errs, Severity::Error)
            .message
            .contains("no NS records at the zone apex")
    );
}

#[test]
fn cname_beside_other_data_is_an_error() {
    let errs = problems("www A 192.0.2.2\nwww CNAME ns\n").unwrap_err();
    let p = one(&errs, Severity::Error);
    assert!(p.message.contains("CNAME beside other data (A)"), "{p}");
    assert_eq!(line_of(p), 7);
    assert_eq!(
        p.to_string(),
        "checks.zone:7: error: www.example.test.: CNAME beside other data (A)"
    );
}

/// Names below a DNAME are never served: the zone loads (as BIND loads
/// it; UPDATE and IXFR may make such a zone) with a warning naming the
/// DNAME. Data at the DNAME's own name, and its siblings, are fine.
#[test]
fn names_below_a_dname_are_warned_about() {
    let loaded =
        problems("dn DNAME target.example.\ndn A 192.0.2.3\nx.y.dn A 192.0.2.4\n").unwrap();
    let p = one(&loaded, Severity::Warning);
    assert!(
        p.message
            .starts_with("dn.example.test.: DNAME with names below it"),
        "{p}"
    );
    // On the DNAME's line, not 0 (black-box finding).
    assert_eq!(line_of(p), HEAD.lines().count() as u32 + 1, "{p}");
    let fine = problems("dn DNAME target.example.\ndn A 192.0.2.3\nx.other A 192.0.2.4\n").unwrap();
    assert!(fine.is_empty(), "{fine:?}");
    // At the apex too (black-box finding DK-2): every other name is below.
    let text = "$ORIGIN example.test.\n$TTL 300\n@ SOA ns.other. h 1 2 3 4 5\n\
                @ NS ns.other.\n@ DNAME other.example.\nx A 192.0.2.9\n";
    let apex = load_zone_str(text, "checks.zone", &origin()).unwrap();
    let p = one(&apex.warnings, Severity::Warning);
    assert!(
        p.message
            .starts_with("example.test.: DNAME with names below it"),
        "{p}"
    );
}

/// BIND refuses a zone with a DS at its apex and NSD hides it; such a
/// DS is the parent's, pasted into the child: warned about, and still
/// loaded (as Knot loads it).
#[test]
fn a_ds_at_the_apex_is_warned_about() {
    let loaded = problems(
        "@ DS 12345 13 2 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n",
    )
    .unwrap();
    let p = one(&loaded, Severity::Warning);
    assert!(
        p.message
            .starts_with("example.test.: DS at the zone's apex"),
        "{p}"
    );
    let below = problems("sub NS ns.other.example.\nsub DS 12345 13 2 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n")
        .unwrap();
    assert!(
        below.is_empty(),
        "a DS at a delegation is where it belongs: {below:?}"
    );
}

#[test]
fn two_cnames_at_one_name_are_an_error() {
    let errs = problems("www CNAME ns\nwww CNAME mail\n").unwrap_err();
    assert!(
        one(&errs, Severity::Error)
            .message
            .contains("more than one CNAME")
    );
}

#[test]
fn out_of_zone_data_is_reported_and_ignored() {
    let warnings = problems("www.example.org. A 192.0.2.9\n").unwrap();
    let p = one(&warnings, Severity::Warning);
    assert!(p.message.contains("outside the zone"), "{p}");
    assert_eq!(line_of(p), 6);
}

#[test]
fn missing_glue_is_reported() {
    let warnings = problems("sub NS ns.sub\nsub NS ns.elsewhere.org.\n").unwrap();
    let p = one(&warnings, Severity::Warning);
    assert!(
        p.message
            .contains("sub.example.test. to ns.sub.example.test. has no glue"),
        "{p}"
    );
    assert_eq!(line_of(p), 6);
    // With glue there is nothing to say.
    assert!(
        problems("sub NS ns.sub\nns.sub A 192.0.2.7\n")
            .unwrap()
            .is_empty()
    );
}

/// What BIND calls illegal and kzonecheck refuses is loaded with a
/// warning naming the line (black-box finding AT-2): a delegation to a
/// name server in the zone without an address, NS and MX targets that are
/// CNAMEs (RFC 2181 10.3), NS owned by a wildcard.
#[test]
fn lame_delegations_alias_targets_and_wildcard_ns_are_warned_about() {
    let cases = [
        (
            "sub NS nowhere\n",
            "sub.example.test. to nowhere.example.test.: the name server is in the zone but has no address",
            6,
        ),
        (
            "sub NS alias\nalias CNAME ns\n",
            "sub.example.test. NS alias.example.test.: the target is a CNAME",
            6,
        ),
        (
            "@ MX 10 mx\nmx CNAME ns\n",
            "example.test. MX mx.example.test.: the target is a CNAME",
            6,
        ),
        (
            "*.w NS ns\n",
            "*.w.example.test. NS: a wildcard owns NS records",
            6,
        ),
    ];
    for (body, said, line) in cases {
        let warnings = problems(body).unwrap();
        let p = one(&warnings, Severity::Warning);
        assert!(p.message.contains(said), "{body}: {p}");
        assert_eq!(line_of(p), line, "{body}");
    }
    // Targets with addresses, or outside the zone: nothing to say. Nor
    // for one a wildcard covers, or one below another delegation
    // (regression hunt AX-2).
    let fine = "sub NS ns\nsub2 NS ns.elsewhere.org.\n@ MX 10 ns\n@ MX 20 mx.elsewhere.org.\n\
                sub3 NS ns.w\n*.w A 192.0.2.5\nsub4 NS ns.other\nother NS ns1.elsewhere.org.\n";
    assert!(problems(fine).unwrap().is_empty(), "{:?}", problems(fine));
}

#[test]
fn differing_ttls_in_an_rrset_use_the_first() {
    let text = format!("{HEAD}www 300 A 192.0.2.2\nwww 600 A 192.0.2.3\n");
    let loaded = load_zone_str(&text, "checks.zone", &origin()).unwrap();
    let p = one(&loaded.warnings, Severity::Warning);
    assert!(p.message.contains("TTL 600 differs"), "{p}");
    let www = loaded.zone.node(b"\x03www\x07example\x04test\x00").unwrap();
    assert_eq!(www.rrset(heron_proto::RType::A).unwrap().ttl(), 300);
    // A duplicate record of another TTL is said too (BIND and NSD warn).
    let text = format!("{HEAD}www 300 A 192.0.2.2\nwww 600 A 192.0.2.2\n");
    let loaded = load_zone_str(&text, "checks.zone", &origin()).unwrap();
    let p = one(&loaded.warnings, Severity::Warning);
    assert!(p.message.contains("TTL 600 differs"), "{p}");
    assert_eq!(line_of(p), 7);
}

#[test]
fn duplicate_records_collapse() {
    let text = format!("{HEAD}www A 192.0.2.2\nWWW A 192.0.2.2\n");
    let loaded = load_zone_str(&text, "checks.zone", &origin()).unwrap();
    assert_eq!(loaded.zone.record_count(), 4);
}

#[test]
fn syntax_and_content_errors_are_reported_together() {
    let errs = problems("www A 192.0.2.300\nx CNAME ns\nx TXT \"y\"\n").unwrap_err();
    let text: Vec<String> = errs.iter().map(|p| p.to_string()).collect();
    assert!(
        text.iter()
            .any(|t| t.contains("checks.zone:6:") && t.contains("192.0.2.300")),
        "{text:?}"
    );
    assert!(
        text.iter()
            .any(|t| t.contains("checks.zone:7:") && t.contains("CNAME beside")),
        "{text:?}"
    );
}

#[test]
fn a_missing_file_is_one_error_naming_the_file() {
    let errs = load_zone_file(std::path::Path::new("/nonexistent/z.zone"), &origin())
        .err()
        .unwrap();
    // Not followed by "no SOA" and "no NS": nothing was read to lack them.
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(
        errs[0].to_string(),
        "/nonexistent/z.zone: error: cannot read zone file: No such file or directory"
    );
}

/// Issue 44: `check-zone` said "no SOA" without naming the file, and
/// nothing of a name server inside the zone that has no address.
#[test]
fn zone_wide_problems_name_the_file_and_an_in_zone_name_server_needs_an_address() {
    let dir = std::env::temp_dir().join(format!("heron-zone-wide-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let origin = Name::parse("w.test").unwrap();
    let no_soa = dir.join("no-soa.zone");
    std::fs::write(&no_soa, "$TTL 60\n@ NS ns.other.\n").unwrap();
    let Err(problems) = load_zone_file(&no_soa, &origin) else {
        panic!("a zone without SOA loaded");
    };
    let text: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
    assert!(
        text.iter()
            .any(|p| p.starts_with(&format!("{}: error: no SOA", no_soa.display()))),
        "{text:?}"
    );
    let lame = dir.join("lame.zone");
    std::fs::write(
        &lame,
        "$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\n@ NS ns2\nns2 A 192.0.2.2\n@ NS ns.other.\n",
    )
    .unwrap();
    let Ok(loaded) = load_zone_file(&lame, &origin) else {
        panic!("a zone with a lame name server still loads");
    };
    let warnings: Vec<String> = loaded.warnings.iter().map(|p| p.to_string()).collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains(
            "warning: name server ns.w.test. of w.test. is in the zone but has no address"
        ),
        "{warnings:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An apex DNAME redirects every name below the apex, its name server's
/// too: BIND, NSD and Knot refuse such a zone, and so does Heron (it
/// loaded it, then redirected the server's address while handing it out
/// as additional data). A name server outside the zone is fine.
#[test]
fn an_apex_dname_with_a_name_server_below_it_is_an_error() {
    let errs = problems("@ DNAME example.net.\n").unwrap_err();
    let p = one(&errs, Severity::Error);
    assert!(p.message.contains("below the apex DNAME"), "{p}");
    let outside = "$ORIGIN example.test.\n$TTL 300\n@ SOA ns hostmaster 1 2 3 4 5\n\
                   @ NS ns.example.net.\n@ DNAME example.net.\n";
    assert!(load_zone_str(outside, "checks.zone", &origin()).is_ok());
}

/// A zone with thousands of the same warning reports the first 100 and
/// how many more: a primary's zone of delegations without glue must not
/// write a log line per record at each transfer and start.
#[test]
fn warnings_past_the_most_reported_are_counted_not_listed() {
    let body: String = (0..500).map(|i| format!("d{i} NS ns.d{i}\n")).collect();
    let warnings = problems(&body).unwrap();
    assert_eq!(
        warnings.len(),
        heron_zone::MAX_PROBLEMS + 1,
        "{:?}",
        &warnings[..2]
    );
    let last = warnings.last().unwrap();
    assert_eq!(last.message, "400 more warnings not shown");
}

/// Two RRSIGs that differ only in the case of the signer's name are one
/// record (RFC 4034 6.2), as NSD, Knot and BIND keep one (black-box
/// finding: both were kept and served).
#[test]
fn rrsigs_differing_in_the_signers_case_are_one() {
    let sig = "www RRSIG A 13 3 300 20300101000000 20200101000000 12345 example.test. \
               Zm9vYmFyZm9vYmFyZm9vYmFyZm9vYmFyZm9vYmFyZm9vYmFyZm9vYmFyZm9vYmFy\n";
    let upper = sig.replace("12345 example.test.", "12345 EXAMPLE.test.");
    let body = format!("www A 192.0.2.7\n{sig}{upper}");
    let text = format!("{HEAD}{body}");
    let zone = heron_zone::load_zone_str(&text, "checks.zone", &origin())
        .unwrap()
        .zone;
    let once = format!("{HEAD}www A 192.0.2.7\n{sig}");
    let single = heron_zone::load_zone_str(&once, "checks.zone", &origin())
        .unwrap()
        .zone;
    assert_eq!(zone.record_count(), single.record_count());
}

/// A record without a TTL and no `$TTL` takes the last TTL given (as
/// BIND); NSD and Knot take 3600, so it is said, once (black-box finding:
/// unsaid).
#[test]
fn the_last_ttl_standing_in_for_a_missing_ttl_is_said_once() {
    let text = "$ORIGIN example.test.\n@ 300 SOA ns h 1 2 3 4 5\n@ 300 NS ns\nns 120 A 192.0.2.1\n\
                www A 192.0.2.2\nmail A 192.0.2.3\n";
    let loaded = heron_zone::load_zone_str(text, "checks.zone", &origin()).unwrap();
    let said: Vec<String> = (loaded.warnings.iter())
        .filter(|w| w.message.contains("the last TTL given"))
        .map(ToString::to_string)
        .collect();
    assert_eq!(said.len(), 1, "{:?}", loaded.warnings);
    assert!(
        said[0].contains("checks.zone:5") && said[0].contains("120"),
        "{said:?}"
    );
}

/// Text an error quotes from the file is escaped and cut, whatever the
/// field: a path of `$INCLUDE` (escaped whole), bad hex and base64, a
/// TTL (black-box finding AT-5: control bytes reached the terminal raw,
/// and a field of a megabyte made an error line of a megabyte).
#[test]
fn quoted_text_in_errors_is_escaped_and_cut() {
    let huge = "Z".repeat(1 << 20);
    let cases = [
        "$INCLUDE \"\\027]0;owned\\007x.inc\"\n".to_string(),
        "t TLSA 3 1 1 \u{1b}[2J\n".to_string(),
        format!("t TLSA 3 1 1 {huge}\n"),
        format!("t DNSKEY 257 3 13 {huge}!\n"),
        "t 1h\u{1b} A 192.0.2.1\n".to_string(),
        format!("t TYPE65000 \\# 2 {huge}\n"),
        format!("t 1h{huge} A 192.0.2.1\n"),
    ];
    for body in cases {
        let shown = &body[..40.min(body.len())];
        let errors = problems(&body).expect_err(shown);
        for e in errors.iter().map(|p| p.to_string()) {
            assert!(!e.chars().any(|c| c.is_control()), "{e:?}");
            assert!(e.len() < 600, "{}", &e[..300]);
        }
    }
}
