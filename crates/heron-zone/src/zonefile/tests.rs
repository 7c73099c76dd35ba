//! Reader tests with a stand-in RDATA parser, so that they exercise names,
//! TTLs, classes and directives independently of `heron_proto::rdata`.

use std::path::{Path, PathBuf};

use heron_proto::text::{TextError, Token};
use heron_proto::{Class, Name, RType};

use super::*;

/// Stand-in RDATA parser: the fields as written, separated by blanks, quoted
/// ones in quotes; an error when there are none.
fn echo(_: RType, tokens: &[Token], _: Option<&Name>, out: &mut Vec<u8>) -> Result<(), TextError> {
    if tokens.is_empty() {
        return Err(TextError::new("missing field: data"));
    }
    for (i, t) in tokens.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        if t.quoted {
            out.push(b'"');
        }
        out.extend_from_slice(t.raw);
        if t.quoted {
            out.push(b'"');
        }
    }
    Ok(())
}

fn opts() -> ReadOptions {
    ReadOptions::new(n("example.com"))
}

fn n(s: &str) -> Name {
    Name::parse(s).unwrap()
}

fn read_with(text: &str, opts: &ReadOptions) -> (Vec<Record>, Vec<ZoneFileError>) {
    let mut recs = Vec::new();
    let errs = read_str_with(
        text.as_bytes(),
        Path::new("t.zone"),
        Path::new("."),
        opts,
        &mut |r| recs.push(r.clone()),
        echo,
    );
    (recs, errs)
}

fn read(text: &str) -> (Vec<Record>, Vec<ZoneFileError>) {
    read_with(text, &opts())
}

/// Records as (owner, ttl, type, rdata text), asserting no errors.
fn ok(text: &str) -> Vec<(String, u32, String, String)> {
    let (recs, errs) = read(text);
    assert!(errs.is_empty(), "{errs:?}");
    recs.iter()
        .map(|r| {
            assert_eq!(r.class, Class::IN);
            (
                r.owner.to_string(),
                r.ttl,
                r.rtype.to_string(),
                String::from_utf8_lossy(&r.rdata).into_owned(),
            )
        })
        .collect()
}

/// The errors as "line: message".
fn errs(text: &str) -> Vec<String> {
    let (_, errs) = read(text);
    errs.iter()
        .map(|e| {
            assert_eq!(&*e.location.file, Path::new("t.zone"));
            format!("{}: {}", e.location.line, e.message)
        })
        .collect()
}

fn r(owner: &str, ttl: u32, t: &str, rd: &str) -> (String, u32, String, String) {
    (owner.into(), ttl, t.into(), rd.into())
}

#[test]
fn owners_at_relative_absolute_and_omitted() {
    let got = ok("$TTL 300\n\
         @ A 1\n\
         www A 2\n\
         \tA 3\n\
         host.example.org. A 4\n  \
         TXT \"x y\"\n\
         a.b A 5\n");
    assert_eq!(
        got,
        [
            r("example.com.", 300, "A", "1"),
            r("www.example.com.", 300, "A", "2"),
            r("www.example.com.", 300, "A", "3"),
            r("host.example.org.", 300, "A", "4"),
            r("host.example.org.", 300, "TXT", "\"x y\""),
            r("a.b.example.com.", 300, "A", "5"),
        ]
    );
}

#[test]
fn ttl_and_class_in_either_order() {
    let got = ok("a 60 IN A 1\nb IN 1h A 2\nc in A 3\nd 2d A 4\ne CLASS1 5 A 5\n");
    assert_eq!(
        got,
        [
            r("a.example.com.", 60, "A", "1"),
            r("b.example.com.", 3600, "A", "2"),
            r("c.example.com.", 3600, "A", "3"),
            r("d.example.com.", 172800, "A", "4"),
            r("e.example.com.", 5, "A", "5"),
        ]
    );
}

#[test]
fn ttl_defaults() {
    // Without $TTL: the last explicit TTL (RFC 1035).
    let got = ok("a 10 A 1\nb A 2\nc 20 A 3\nd A 4\n");
    assert_eq!(
        got.iter().map(|r| r.1).collect::<Vec<_>>(),
        [10, 10, 20, 20]
    );
    // With $TTL: $TTL wins over the last explicit one.
    let got = ok("$TTL 1h\na 10 A 1\nb A 2\n$ttl 2H\nc A 3\n");
    assert_eq!(
        got.iter().map(|r| r.1).collect::<Vec<_>>(),
        [10, 3600, 7200]
    );
    // The default from the options acts as a $TTL.
    let mut o = opts();
    o.default_ttl = Some(99);
    let (recs, errs) = read_with("a A 1\n", &o);
    assert!(errs.is_empty());
    assert_eq!(recs[0].ttl, 99);
    // Neither.
    assert_eq!(errs_of("a A 1\n"), ["1: no TTL given and no $TTL"]);
}

fn errs_of(text: &str) -> Vec<String> {
    errs(text)
}

#[test]
fn origin_directive() {
    let got = ok("$TTL 1\n\
         $ORIGIN sub\n\
         a A 1\n\
         $ORIGIN other.net.\n\
         @ A 2\n\
         b A 3\n\
         $ORIGIN .\n\
         c A 4\n");
    assert_eq!(
        got,
        [
            r("a.sub.example.com.", 1, "A", "1"),
            r("other.net.", 1, "A", "2"),
            r("b.other.net.", 1, "A", "3"),
            r("c.", 1, "A", "4"),
        ]
    );
}

/// An owner written again as the same text is the same name, unless a
/// $ORIGIN between the two lines makes the text name another; a blank
/// owner still takes the last one.
#[test]
fn an_owner_written_again_follows_the_origin() {
    let got = ok("$TTL 1\n\
         www A 1\n\
         www A 2\n\
         $ORIGIN sub\n\
         www A 3\n\
         \x20 A 4\n\
         www A 5\n\
         @ A 6\n\
         $ORIGIN example.com.\n\
         @ A 7\n");
    assert_eq!(
        got,
        [
            r("www.example.com.", 1, "A", "1"),
            r("www.example.com.", 1, "A", "2"),
            r("www.sub.example.com.", 1, "A", "3"),
            r("www.sub.example.com.", 1, "A", "4"),
            r("www.sub.example.com.", 1, "A", "5"),
            r("sub.example.com.", 1, "A", "6"),
            r("example.com.", 1, "A", "7"),
        ]
    );
}

#[test]
fn type_and_class_mnemonics() {
    let (recs, errs) = read("$TTL 1\na TYPE65280 \\# 0\nb CLASS1 type1 x\nc MX 10 mx\n");
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(recs[0].rtype, RType(65280));
    assert_eq!(recs[0].rdata, b"\\# 0");
    assert_eq!(recs[1].rtype, RType::A);
    assert_eq!(recs[2].rtype, RType::MX);
    assert_eq!(recs[2].location.line, 4);
    assert_eq!(recs[2].location.to_string(), "t.zone:4");
}

#[test]
fn multi_line_entries_and_comments() {
    let got = ok("$TTL 1\n\
         @ SOA ns host ( ; comment ( \" \n\
           1 ; serial\n\
           2 3 4 5 )\n\
         \x20 TXT \"a;b(c\" ; real comment\n");
    assert_eq!(
        got,
        [
            r("example.com.", 1, "SOA", "ns host 1 2 3 4 5"),
            r("example.com.", 1, "TXT", "\"a;b(c\""),
        ]
    );
    let (recs, _) = read("$TTL 1\n\n@ SOA ns host (\n 1 2 3 4 5 )\nwww A 1\n");
    assert_eq!(recs[0].location.line, 3);
    assert_eq!(recs[1].location.line, 5);
}

#[test]
fn crlf_and_missing_final_newline() {
    let got = ok("$TTL 1\r\na A 1\r\n\r\n  A 2\r\nb A 3");
    assert_eq!(
        got,
        [
            r("a.example.com.", 1, "A", "1"),
            r("a.example.com.", 1, "A", "2"),
            r("b.example.com.", 1, "A", "3"),
        ]
    );
}

#[test]
fn record_errors() {
    let e = errs_of(
        "$TTL 1\n\
         a AAA 1\n\
         b 1x A 1\n\
         c CH A 1\n\
         d 60 IN\n\
         e\n\
         f ANY 1\n\
         g IN AXFR x\n\
         h 99999999999 A 1\n\
         i A\n",
    );
    assert_eq!(
        e,
        [
            "2: unknown record type 'AAA'",
            "3: bad TTL '1x': unknown unit 'x' (expected w, d, h, m or s)",
            "4: class 'CH' does not match the zone's class 'IN'",
            "5: missing record type after 'IN'",
            "6: missing record type after owner 'e'",
            "7: class 'ANY' does not match the zone's class 'IN'",
            "8: record type 'AXFR' is a query or meta type and cannot be in a zone file",
            "9: bad TTL '99999999999': larger than 4294967295 (2^32-1)",
            "10: A: missing field: data",
        ]
    );
}

#[test]
fn owner_errors() {
    let long = "a".repeat(64);
    let e = errs_of(&format!("$TTL 1\n  A 1\n{long} A 1\n  A 2\na..b A 1\n"));
    // The continuation of a bad owner is skipped without a second error.
    assert_eq!(e.len(), 3, "{e:?}");
    assert!(e[0].starts_with("2: no owner name"), "{e:?}");
    assert_eq!(
        e[1],
        format!("3: bad owner name '{long}': label longer than 63 octets")
    );
    assert_eq!(e[2], "5: bad owner name 'a..b': empty label in name");
}

#[test]
fn directive_errors() {
    let e = errs_of(
        "$FOO bar\n\
         $TTL\n\
         $TTL 1y\n\
         $TTL 1 2\n\
         $ORIGIN\n\
         $ORIGIN a..b\n\
         $ORIGIN a b\n\
         \x20$TTL 5\n\
         $INCLUDE\n",
    );
    assert_eq!(
        e,
        [
            "1: unknown directive '$FOO' (expected $ORIGIN, $TTL, $INCLUDE or $GENERATE)",
            "2: $TTL: missing TTL",
            "3: $TTL: bad TTL '1y': unknown unit 'y' (expected w, d, h, m or s)",
            "4: $TTL: unexpected '2' after the TTL",
            "5: $ORIGIN: missing domain name",
            "6: $ORIGIN: bad name 'a..b': empty label in name",
            "7: $ORIGIN: unexpected 'b' after the name",
            "8: directive '$TTL' must start at the beginning of the line",
            "9: $INCLUDE: missing file name",
        ]
    );
}

#[test]
fn syntax_errors_are_reported_and_reading_continues() {
    let (recs, errs) = read(
        "$TTL 1\n\
         a A 1 )\n\
         b TXT \"open\n\
         c A 3\n\
         d TXT ( x\n\
         ( y ) )\n\
         e A 5\n\
         f TXT (\n\
         g A 7\n",
    );
    let e: Vec<_> = errs.iter().map(|e| e.location.line).collect();
    assert_eq!(e, [2, 3, 6, 8], "{errs:?}");
    assert!(errs[0].message.contains("')' without a matching '('"));
    assert!(
        errs[1]
            .message
            .contains("unterminated quoted string \"open")
    );
    assert!(errs[2].message.contains("nested"));
    assert!(errs[3].message.contains("unbalanced"));
    let owners: Vec<_> = recs.iter().map(|r| r.owner.to_string()).collect();
    assert_eq!(owners, ["c.example.com.", "e.example.com."]);
}

#[test]
fn bad_escape_in_owner() {
    let e = errs_of("$TTL 1\na\\300b A 1\n  A 2\n");
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("2: bad escape '\\300' in 'a\\300b'"),
        "{e:?}"
    );
}

#[test]
fn escaped_owner_characters() {
    let (recs, errs) = read("$TTL 1\na\\.b\\032c A 1\n\\$x A 2\n");
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(recs[0].owner.labels().next().unwrap(), b"a.b c");
    assert_eq!(recs[1].owner.labels().next().unwrap(), b"$x");
}

#[test]
fn generate_basic() {
    let got = ok("$TTL 60\n$GENERATE 1-3 host-$ A 10.0.0.$\n");
    assert_eq!(
        got,
        [
            r("host-1.example.com.", 60, "A", "10.0.0.1"),
            r("host-2.example.com.", 60, "A", "10.0.0.2"),
            r("host-3.example.com.", 60, "A", "10.0.0.3"),
        ]
    );
}

#[test]
fn generate_ttl_class_step_and_modifiers() {
    let got = ok(
        "$GENERATE 0-10/5 ${100,4} IN 30 CNAME \"dyn-${0,2,x} extra\"\n\
         $GENERATE 1-1 x 1h CNAME y\n\
         after A 1\n",
    );
    assert_eq!(
        got,
        [
            r("0100.example.com.", 30, "CNAME", "dyn-00 extra"),
            r("0105.example.com.", 30, "CNAME", "dyn-05 extra"),
            r("0110.example.com.", 30, "CNAME", "dyn-0a extra"),
            r("x.example.com.", 3600, "CNAME", "y"),
            // The explicit TTL of $GENERATE is the last TTL for what follows.
            r("after.example.com.", 3600, "A", "1"),
        ]
    );
    let got = ok("$TTL 1\n$GENERATE 1024-1025 ${0,3,n}.ip6.arpa. PTR h$\n");
    assert_eq!(got[0].0, "0.0.4.ip6.arpa.");
    assert_eq!(got[1].0, "1.0.4.ip6.arpa.");
    assert_eq!(got[1].3, "h1025");
}

#[test]
fn generate_errors() {
    let mut o = opts();
    o.max_generate = 10;
    let (recs, errs) = read_with(
        "$TTL 1\n\
         $GENERATE 5-1 h$ A 1.2.3.$\n\
         $GENERATE 1-11 h$ A 1.2.3.$\n\
         $GENERATE 1-5 h$ A 1.2.3.$\n\
         $GENERATE 1-2 h$ BOGUS x\n\
         $GENERATE 1-2 h${1 A x\n\
         $GENERATE 1-2 h$ MX 10 mx$\n\
         $GENERATE 1-2 h$ CH A x\n\
         $GENERATE 1-2 h$ A\n\
         $GENERATE 1-2 ${0,70}$ A x\n\
         $GENERATE 1-2 h$ A \"\"\n",
        &o,
    );
    let e: Vec<_> = errs
        .iter()
        .map(|e| format!("{}: {}", e.location.line, e.message))
        .collect();
    assert_eq!(
        e,
        [
            "2: $GENERATE: bad range '5-1': stop is less than start",
            "3: $GENERATE: range '1-11' makes 11 records, more than the limit of 10",
            "5: $GENERATE: unknown record type 'BOGUS'",
            "6: $GENERATE: bad lhs 'h${1': '${1' has no closing '}'",
            "7: $GENERATE: unexpected 'mx$' after the rhs '10' (the rhs is one field: quote it if it contains blanks)",
            "8: $GENERATE: class 'CH' does not match the zone's class 'IN'",
            "9: $GENERATE: too few fields; expected '$GENERATE start-stop[/step] lhs [ttl] [class] type rhs'",
            &format!(
                "10: $GENERATE: for 1: bad owner name '{}...': label longer than 63 octets",
                "0".repeat(64)
            ),
            "11: $GENERATE: for 1: A: missing field: data",
        ]
    );
    assert_eq!(recs.len(), 5);
}

/// The limit holds for a file's `$GENERATE` lines together, and for the
/// text they make (black-box finding: 500 lines of 65,536 records, an
/// 18 KB file, took the server's memory).
#[test]
fn generate_limits_hold_for_a_whole_file() {
    let mut o = opts();
    o.max_generate = 10;
    let text = "$TTL 1\n$GENERATE 1-6 a$ A 1.2.3.$\n$GENERATE 1-4 b$ A 1.2.3.$\n\
                $GENERATE 1-1 c$ A 1.2.3.$\n";
    let (recs, errs) = read_with(text, &o);
    assert_eq!(recs.len(), 10);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].message.contains("the 10 made before it"),
        "{}",
        errs[0].message
    );
    assert_eq!(errs[0].location.line, 4);
    // 2,000 records of 200 KB of RDATA text each: stopped at 256 MiB.
    let rhs = "x".repeat(200_000);
    let text = format!("$TTL 1\n$GENERATE 1-2000 t$ TXT {rhs}\n");
    let (recs, errs) = read_with(&text, &opts());
    assert!(
        errs.iter().any(|e| e.message.contains("MiB of text")),
        "{errs:?}"
    );
    assert!(recs.len() < 2000, "{}", recs.len());
}

#[test]
fn generate_needs_a_ttl() {
    assert_eq!(
        errs_of("$GENERATE 1-2 h$ A x\n"),
        ["1: $GENERATE: no TTL given and no $TTL"]
    );
}

fn data(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/zonefile")
        .join(p)
}

fn read_path(path: &Path, opts: &ReadOptions) -> (Vec<Record>, Vec<ZoneFileError>) {
    let mut recs = Vec::new();
    let errs = match ZoneFileText::read(path) {
        Ok(file) => read_file_with(&file.text, path, opts, &mut |r| recs.push(r.clone()), echo),
        Err(e) => vec![e],
    };
    (recs, errs)
}

#[test]
fn include_scopes_origin_and_owner() {
    let (recs, errs) = read_path(&data("include/main.zone"), &opts());
    assert!(errs.is_empty(), "{errs:?}");
    let got: Vec<_> = recs
        .iter()
        .map(|r| {
            (
                r.owner.to_string(),
                r.ttl,
                r.location
                    .file
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned(),
                r.location.line,
            )
        })
        .collect();
    let s = |o: &str, t, f: &str, l| (o.to_string(), t, f.to_string(), l);
    assert_eq!(
        got,
        [
            s("example.com.", 3600, "main.zone", 3),
            s("www.example.com.", 3600, "main.zone", 4),
            s("one.sub.example.com.", 3600, "sub.zone", 2),
            s("sub.example.com.", 3600, "sub.zone", 4),
            s("deep.sub.example.com.", 60, "deeper.zone", 2),
            s("inner.sub.example.com.", 3600, "sub.zone", 7),
            // Back in main.zone: origin and owner are main.zone's again;
            // $TTL set in an included file carries over, as in BIND.
            s("www.example.com.", 60, "main.zone", 7),
            s("after.example.com.", 60, "main.zone", 8),
            s("plain.example.com.", 60, "plain.zone", 1),
            s("after2.example.com.", 60, "main.zone", 10),
        ]
    );
}

#[test]
fn include_depth_limit() {
    let mut o = opts();
    o.max_include_depth = 1;
    let (_, errs) = read_path(&data("include/main.zone"), &o);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].location.file.ends_with("include/sub.zone"));
    assert_eq!(errs[0].location.line, 5);
    assert_eq!(
        errs[0].message,
        "$INCLUDE 'deeper.zone': includes nested more than 1 deep"
    );
}

/// A blank-led first line of an `$INCLUDE`d file reuses the owner
/// before the `$INCLUDE`, as BIND and NSD read it (RFC 1035 5.1); the
/// including file goes on with its own; 20 levels of `$INCLUDE` load
/// (BIND, NSD and Knot load 10).
#[test]
fn an_included_file_starts_with_the_owner_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().join("top.zone");
    let text = "$TTL 60\nwww A 192.0.2.1\n$INCLUDE l1.inc\n  TXT \"after\"\n";
    for level in 1..=20 {
        let next = match level {
            20 => String::new(),
            _ => format!("$INCLUDE l{}.inc\n", level + 1),
        };
        let body = format!("  TXT \"level {level}\"\nn{level} A 192.0.2.2\n{next}");
        std::fs::write(dir.path().join(format!("l{level}.inc")), body).unwrap();
    }
    std::fs::write(&top, text).unwrap();
    let (recs, errs) = read_path(&top, &opts());
    assert!(errs.is_empty(), "{errs:?}");
    let owner_of = |text: &str| {
        let rdata = format!("\"{text}\"").into_bytes(); // `echo` keeps the text
        let rec = recs.iter().find(|r| r.rdata == rdata);
        rec.map(|r| r.owner.to_string())
    };
    assert_eq!(recs.len(), 42);
    assert_eq!(owner_of("level 1").as_deref(), Some("www.example.com."));
    assert_eq!(owner_of("level 2").as_deref(), Some("n1.example.com."));
    assert_eq!(owner_of("after").as_deref(), Some("www.example.com."));
}

#[test]
fn missing_top_file() {
    let (_, errs) = read_path(&data("no-such.zone"), &opts());
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].location.line, 0);
    assert_eq!(
        errs[0].message,
        "cannot read zone file: No such file or directory"
    );
    assert!(
        errs[0]
            .to_string()
            .ends_with("no-such.zone: cannot read zone file: No such file or directory")
    );
}

/// A file that is not a zone file stops being read after `MAX_ERRORS`
/// errors: its memory, time and log lines stay bounded (BIND and Knot stop
/// at the first).
#[test]
fn reading_stops_after_the_most_errors() {
    let mut text = String::from("$TTL 1\n@ SOA ns h 1 2 3 4 5\n");
    text.push_str(&"x\n".repeat(10 * MAX_ERRORS));
    let e = errs_of(&text);
    assert_eq!(e.len(), MAX_ERRORS + 1, "{:?}", &e[..3]);
    assert!(
        e[MAX_ERRORS].contains("the rest of the file is not read"),
        "{e:?}"
    );
}

/// Type 0 is reserved: refused in a zone file, as BIND and NSD refuse it.
#[test]
fn type_zero_is_refused() {
    let e = errs_of("$TTL 1\nx TYPE0 \\# 0\n");
    assert_eq!(e, ["2: record type 'TYPE0' (0) is reserved"], "{e:?}");
}

/// A binary file (BIND's raw format begins with a NUL octet) is refused
/// as not text, naming the conversion, not read as records; only the first
/// 4 KiB are looked at (a NUL further on is the record's error); a text
/// file reads as before.
#[test]
fn a_binary_zone_file_is_said_to_be_not_text() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw.zone");
    let mut bytes = vec![0, 0, 0, 2, 0, 0, 0, 1];
    bytes.extend_from_slice(b"\x01r\x04test\x00\x00\x06");
    std::fs::write(&raw, &bytes).unwrap();
    let err = ZoneFileText::read(&raw).err().expect("refused");
    assert!(
        err.message.starts_with("not a text zone file"),
        "{}",
        err.message
    );
    assert!(err.message.contains("named-compilezone"), "{}", err.message);
    let late = dir.path().join("late.zone");
    let mut text = "; padding\n".repeat(500).into_bytes();
    text.extend_from_slice(b"x 300 A 192.0.2.\x001\n");
    std::fs::write(&late, &text).unwrap();
    assert!(ZoneFileText::read(&late).is_ok());
    let plain = dir.path().join("plain.zone");
    std::fs::write(&plain, "x 300 A 192.0.2.1\n").unwrap();
    let (recs, errs) = read_path(&plain, &opts());
    assert!(errs.is_empty() && recs.len() == 1, "{errs:?}");
}
