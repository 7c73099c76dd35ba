//! Zone-file reader: syntax features with exact records, and a corpus of
//! broken zone files with the exact location and message of each error.
//!
//! Tests named `rdata_*` need `heron_proto::rdata::parse_text` for A, NS,
//! SOA, TXT and MX; the others do not parse any RDATA.

use std::path::{Path, PathBuf};

use heron_proto::{Class, Name, RType};
use heron_zone::zonefile::{ReadOptions, Record, ZoneFileError, ZoneFileText, read_file, read_str};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/zonefile")
}

fn opts() -> ReadOptions {
    ReadOptions::new(Name::parse("example.com").unwrap())
}

fn read(text: &str) -> (Vec<Record>, Vec<ZoneFileError>) {
    let mut recs = Vec::new();
    let errs = read_str(
        text,
        Path::new("example.zone"),
        &data_dir(),
        &opts(),
        &mut |r| recs.push(r.clone()),
    );
    (recs, errs)
}

fn read_path(path: &Path) -> (Vec<Record>, Vec<ZoneFileError>) {
    let mut recs = Vec::new();
    let errs = read_file(path, &opts(), &mut |r| recs.push(r.clone()));
    (recs, errs)
}

/// Reads text that must have no errors.
fn ok(text: &str) -> Vec<Record> {
    let (recs, errs) = read(text);
    assert!(errs.is_empty(), "unexpected errors: {errs:#?}");
    recs
}

fn wire(name: &str) -> Vec<u8> {
    Name::parse(name).unwrap().as_wire().to_vec()
}

fn mx(pref: u16, exchange: &str) -> Vec<u8> {
    let mut v = pref.to_be_bytes().to_vec();
    v.extend(wire(exchange));
    v
}

/// (owner, ttl, type) of each record, checking that the class is IN.
fn summary(recs: &[Record]) -> Vec<(String, u32, RType)> {
    recs.iter()
        .map(|r| {
            assert_eq!(r.class, Class::IN);
            (r.owner.to_string(), r.ttl, r.rtype)
        })
        .collect()
}

fn s(owner: &str, ttl: u32, t: RType) -> (String, u32, RType) {
    (owner.to_string(), ttl, t)
}

// ---------------------------------------------------------------------------
// Syntax features (need the RDATA parser).

#[test]
fn rdata_owners_at_relative_absolute_and_omitted() {
    let recs = ok("$TTL 3600\n\
         @ NS ns1\n\
         www A 192.0.2.1\n\
         \x20 A 192.0.2.2\n\
         \tMX 10 mail\n\
         mail.example.com. A 192.0.2.3\n\
         other.example.net. A 192.0.2.4\n\
         a.b A 192.0.2.5\n");
    assert_eq!(
        summary(&recs),
        [
            s("example.com.", 3600, RType::NS),
            s("www.example.com.", 3600, RType::A),
            s("www.example.com.", 3600, RType::A),
            s("www.example.com.", 3600, RType::MX),
            s("mail.example.com.", 3600, RType::A),
            s("other.example.net.", 3600, RType::A),
            s("a.b.example.com.", 3600, RType::A),
        ]
    );
    assert_eq!(recs[0].rdata, wire("ns1.example.com"));
    assert_eq!(recs[1].rdata, [192, 0, 2, 1]);
    assert_eq!(recs[2].rdata, [192, 0, 2, 2]);
    assert_eq!(recs[3].rdata, mx(10, "mail.example.com"));
    let lines: Vec<u32> = recs.iter().map(|r| r.location.line).collect();
    assert_eq!(lines, [2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(recs[0].location.to_string(), "example.zone:2");
}

#[test]
fn rdata_ttl_rules_and_units() {
    // No $TTL: the last explicit TTL applies (RFC 1035 5.1).
    let recs = ok("a 300 A 192.0.2.1\n\
         b A 192.0.2.2\n\
         c 1h30m A 192.0.2.3\n\
         d A 192.0.2.4\n\
         $TTL 2w\n\
         e A 192.0.2.5\n\
         f 1D A 192.0.2.6\n\
         g A 192.0.2.7\n\
         $TTL 0\n\
         h A 192.0.2.8\n");
    let ttls: Vec<u32> = recs.iter().map(|r| r.ttl).collect();
    assert_eq!(ttls, [300, 300, 5400, 5400, 1_209_600, 86400, 1_209_600, 0]);
}

#[test]
fn rdata_ttl_and_class_in_either_order() {
    let recs = ok("a 60 IN A 192.0.2.1\n\
         b IN 60 A 192.0.2.2\n\
         c in 1m A 192.0.2.3\n\
         d CLASS1 60 A 192.0.2.4\n\
         e 60 A 192.0.2.5\n\
         f IN A 192.0.2.6\n");
    assert_eq!(
        summary(&recs),
        [
            s("a.example.com.", 60, RType::A),
            s("b.example.com.", 60, RType::A),
            s("c.example.com.", 60, RType::A),
            s("d.example.com.", 60, RType::A),
            s("e.example.com.", 60, RType::A),
            s("f.example.com.", 60, RType::A),
        ]
    );
}

#[test]
fn rdata_origin_directive() {
    let recs = ok("$TTL 1\n\
         $ORIGIN sub\n\
         a A 192.0.2.1\n\
         @ MX 5 mx\n\
         $ORIGIN example.net.\n\
         b A 192.0.2.2\n\
         $ORIGIN .\n\
         c. A 192.0.2.3\n");
    assert_eq!(
        summary(&recs),
        [
            s("a.sub.example.com.", 1, RType::A),
            s("sub.example.com.", 1, RType::MX),
            s("b.example.net.", 1, RType::A),
            s("c.", 1, RType::A),
        ]
    );
    // Names in RDATA are relative to the current origin too.
    assert_eq!(recs[1].rdata, mx(5, "mx.sub.example.com"));
}

#[test]
fn rdata_soa_in_parentheses_over_lines() {
    let recs = ok("$TTL 3600\n\
         @ IN SOA ns1 hostmaster ( ; comment with ( and \"\n\
         \x20   2024010101 ; serial\n\
         \x20   7200       ; refresh\n\
         \x20   3600 1209600\n\
         \x20   300 )\n\
         www A 192.0.2.1\n");
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0].rtype, RType::SOA);
    assert_eq!(recs[0].location.line, 2);
    assert_eq!(recs[1].location.line, 7);
    let mut rd = wire("ns1.example.com");
    rd.extend(wire("hostmaster.example.com"));
    for v in [2024010101u32, 7200, 3600, 1209600, 300] {
        rd.extend(v.to_be_bytes());
    }
    assert_eq!(recs[0].rdata, rd);
}

#[test]
fn rdata_quoted_strings_and_escapes() {
    let recs = ok(r#"$TTL 1
t1 TXT "hello world; not a comment ( either" ; a comment
t2 TXT "say \"hi\"" plain
t3 TXT "\065\066" a\ b
t4 TXT ""
"#);
    let mut t1 = vec![35u8];
    t1.extend_from_slice(b"hello world; not a comment ( either");
    assert_eq!(recs[0].rdata, t1);
    assert_eq!(recs[1].rdata, b"\x08say \"hi\"\x05plain");
    assert_eq!(recs[2].rdata, b"\x02AB\x03a b");
    assert_eq!(recs[3].rdata, b"\x00");
}

#[test]
fn rdata_crlf_and_no_final_newline() {
    let recs = ok("$TTL 1\r\nwww A 192.0.2.1\r\n\r\n  TXT \"x\"\r\nlast A 192.0.2.2");
    assert_eq!(
        summary(&recs),
        [
            s("www.example.com.", 1, RType::A),
            s("www.example.com.", 1, RType::TXT),
            s("last.example.com.", 1, RType::A),
        ]
    );
    assert_eq!(recs[1].rdata, b"\x01x");
    assert_eq!(recs[2].rdata, [192, 0, 2, 2]);
    assert_eq!(recs[2].location.line, 5);
}

#[test]
fn rdata_generic_types_and_rfc3597() {
    let recs = ok("$TTL 1\n\
         a TYPE1 192.0.2.1\n\
         b A \\# 4 C0000202\n\
         c TYPE65280 \\# 2 abcd\n\
         d CLASS1 TYPE16 \\# 2 0178\n");
    assert_eq!(recs[0].rtype, RType::A);
    assert_eq!(recs[0].rdata, [192, 0, 2, 1]);
    assert_eq!(recs[1].rdata, [192, 0, 2, 2]);
    assert_eq!(recs[2].rtype, RType(65280));
    assert_eq!(recs[2].rdata, [0xab, 0xcd]);
    assert_eq!(recs[3].rtype, RType::TXT);
    assert_eq!(recs[3].rdata, b"\x01x");
}

#[test]
fn rdata_generate() {
    let recs = ok("$TTL 300\n\
         $GENERATE 1-3 host-$ A 192.0.2.$\n\
         $GENERATE 0-20/10 ${100,4,d} 60 IN A 10.0.0.${0,0,d}\n\
         $GENERATE 10-11 m${0,2,x} MX \"$ mx\\$\"\n\
         $GENERATE 1024-1025 ${0,3,n}.ip6 IN TXT ${0,0,X}\n");
    assert_eq!(
        summary(&recs),
        [
            s("host-1.example.com.", 300, RType::A),
            s("host-2.example.com.", 300, RType::A),
            s("host-3.example.com.", 300, RType::A),
            s("0100.example.com.", 60, RType::A),
            s("0110.example.com.", 60, RType::A),
            s("0120.example.com.", 60, RType::A),
            s("m0a.example.com.", 300, RType::MX),
            s("m0b.example.com.", 300, RType::MX),
            s("0.0.4.ip6.example.com.", 300, RType::TXT),
            s("1.0.4.ip6.example.com.", 300, RType::TXT),
        ]
    );
    assert_eq!(recs[2].rdata, [192, 0, 2, 3]);
    assert_eq!(recs[5].rdata, [10, 0, 0, 20]);
    let mx_name = Name::from_text(b"mx\\$", Some(&Name::parse("example.com").unwrap())).unwrap();
    let mut mx10 = 10u16.to_be_bytes().to_vec();
    mx10.extend_from_slice(mx_name.as_wire());
    assert_eq!(recs[6].rdata, mx10);
    assert_eq!(recs[9].rdata, b"\x03401");
    assert!(
        recs.iter()
            .skip(6)
            .all(|r| r.location.line == 4 || r.location.line == 5)
    );
}

#[test]
fn rdata_include_scopes_origin_and_owner() {
    let (recs, errs) = read_path(&data_dir().join("include/main.zone"));
    assert!(errs.is_empty(), "{errs:#?}");
    let got: Vec<(String, u32, String, u32)> = recs
        .iter()
        .map(|r| {
            let file = r.location.file.file_name().unwrap().to_string_lossy();
            (
                r.owner.to_string(),
                r.ttl,
                file.into_owned(),
                r.location.line,
            )
        })
        .collect();
    let e = |o: &str, t, f: &str, l| (o.to_string(), t, f.to_string(), l);
    assert_eq!(
        got,
        [
            e("example.com.", 3600, "main.zone", 3),
            e("www.example.com.", 3600, "main.zone", 4),
            e("one.sub.example.com.", 3600, "sub.zone", 2),
            e("sub.example.com.", 3600, "sub.zone", 4),
            e("deep.sub.example.com.", 60, "deeper.zone", 2),
            e("inner.sub.example.com.", 3600, "sub.zone", 7),
            e("www.example.com.", 60, "main.zone", 7),
            e("after.example.com.", 60, "main.zone", 8),
            e("plain.example.com.", 60, "plain.zone", 1),
            e("after2.example.com.", 60, "main.zone", 10),
        ]
    );
    assert_eq!(recs[0].rdata, [192, 0, 2, 1]);
}

#[test]
fn rdata_include_from_read_str_is_relative_to_base_dir() {
    let (recs, errs) = read("$TTL 5\n$INCLUDE include/plain.zone other\nx A 192.0.2.9\n");
    assert!(errs.is_empty(), "{errs:#?}");
    assert_eq!(
        summary(&recs),
        [
            s("plain.other.example.com.", 5, RType::A),
            s("x.example.com.", 5, RType::A),
        ]
    );
    assert!(recs[0].location.file.ends_with("include/plain.zone"));
}

#[test]
fn rdata_errors_are_prefixed_with_the_type() {
    let (recs, errs) = read("$TTL 1\n\nmail MX 10\nok A 192.0.2.1\n");
    assert_eq!(recs.len(), 1);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_eq!(errs[0].location.line, 3);
    assert!(errs[0].message.starts_with("MX: "), "{}", errs[0]);
}

#[test]
fn rdata_reading_continues_after_errors() {
    let (recs, errs) = read(
        "$TTL 1\n\
         a A 192.0.2.1\n\
         b AAA 2001:db8::1\n\
         c A 192.0.2.3\n\
         d 1x A 192.0.2.4\n\
         e TXT \"open\n\
         f A 192.0.2.6\n",
    );
    let lines: Vec<u32> = errs.iter().map(|e| e.location.line).collect();
    assert_eq!(lines, [3, 5, 6], "{errs:#?}");
    let owners: Vec<String> = recs.iter().map(|r| r.owner.to_string()).collect();
    assert_eq!(
        owners,
        ["a.example.com.", "c.example.com.", "f.example.com."]
    );
}

// ---------------------------------------------------------------------------
// Errors (no RDATA parsing involved).

#[test]
fn reports_every_error_in_one_pass() {
    let (recs, errs) = read(
        "$TTL 1\n\
         a AAA x\n\
         b 1x A x\n\
         \n\
         c CH A x\n\
         $FOO\n\
         d TXT ( x\n\
         \x20 ( y ) )\n\
         e TYPE99999 x\n\
         $ORIGIN a..b\n",
    );
    assert!(recs.is_empty());
    let got: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        got,
        [
            "example.zone:2: unknown record type 'AAA'",
            "example.zone:3: bad TTL '1x': unknown unit 'x' (expected w, d, h, m or s)",
            "example.zone:5: class 'CH' does not match the zone's class 'IN'",
            "example.zone:6: unknown directive '$FOO' (expected $ORIGIN, $TTL, $INCLUDE or $GENERATE)",
            "example.zone:8: nested parentheses: '(' inside the '(' opened on line 7",
            "example.zone:9: unknown record type 'TYPE99999'",
            "example.zone:10: $ORIGIN: bad name 'a..b': empty label in name",
        ]
    );
}

/// Runs `read` on a thread and gives its result, failing the test (not
/// hanging it) when it takes more than ten seconds: a read that blocks on
/// a FIFO would otherwise hang the whole run.
fn within_seconds<T: Send + 'static>(read: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(read());
    });
    result
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the read returned instead of hanging")
}

/// A temporary folder with a FIFO (no writer) named `zone.fifo`.
fn folder_with_fifo() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("zone.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    (dir, fifo)
}

/// Errors of reading the zone file at `path` with at most `max` octets
/// per load, on a thread with a time limit.
fn errors_reading(path: &Path, max: u64) -> Vec<String> {
    let path = path.to_path_buf();
    within_seconds(move || {
        let mut opts = opts();
        opts.max_size = max;
        let errs = read_file(&path, &opts, &mut |_| {});
        errs.iter().map(ToString::to_string).collect()
    })
}

const SMALL_ZONE: &str = "$TTL 60\n@ SOA ns h 1 2 3 4 5\n";

#[test]
fn a_zone_file_that_is_not_a_regular_file_is_refused_without_waiting() {
    let (dir, fifo) = folder_with_fifo();
    for (path, kind) in [
        (fifo.as_path(), "is a FIFO (named pipe), not a regular file"),
        (
            Path::new("/dev/zero"),
            "is a character device, not a regular file",
        ),
        (dir.path(), "is a directory, not a regular file"),
    ] {
        let errors = errors_reading(path, u64::MAX);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with(&format!(
                "{}: cannot read zone file: {}",
                path.display(),
                path.display()
            )),
            "{errors:?}"
        );
        assert!(errors[0].contains(kind), "{errors:?}");
        let held = ZoneFileText::read(path).err().expect("refused");
        assert!(held.message.contains(kind), "{}", held.message);
    }
}

#[test]
fn an_include_of_what_is_not_a_regular_file_is_refused_without_waiting() {
    let (dir, fifo) = folder_with_fifo();
    for (target, kind) in [
        (fifo.display().to_string(), "a FIFO"),
        ("/dev/zero".to_string(), "a character device"),
        (dir.path().display().to_string(), "a directory"),
    ] {
        let top = dir.path().join("top.zone");
        std::fs::write(&top, format!("{SMALL_ZONE}$INCLUDE {target}\n")).unwrap();
        let errors = errors_reading(&top, u64::MAX);
        assert_eq!(errors.len(), 1, "{errors:?}");
        let want = format!("top.zone:3: $INCLUDE '{target}': {target} is {kind}");
        assert!(errors[0].contains(&want), "{errors:?}");
    }
}

#[test]
fn a_load_reads_up_to_its_size_limit_includes_together() {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().join("top.zone");
    let included = dir.path().join("more.zone");
    let head = format!("{SMALL_ZONE}$INCLUDE more.zone\n");
    let more = "www A 192.0.2.1\n";
    std::fs::write(&top, &head).unwrap();
    std::fs::write(&included, more).unwrap();
    let total = (head.len() + more.len()) as u64;
    assert_eq!(
        errors_reading(&top, total),
        Vec::<String>::new(),
        "at the limit"
    );
    let past = errors_reading(&top, total - 1);
    assert_eq!(past.len(), 1, "{past:?}");
    assert!(
        past[0].contains("$INCLUDE 'more.zone': 16 octets; with the 48 read before, more than max-zone-file-size (63)"),
        "{past:?}"
    );
    // The top file alone, at and past the limit.
    std::fs::write(&top, SMALL_ZONE).unwrap();
    let size = SMALL_ZONE.len() as u64;
    assert_eq!(errors_reading(&top, size), Vec::<String>::new());
    let past = errors_reading(&top, size - 1);
    assert_eq!(
        past,
        [format!(
            "{}: zone file of {size} octets, more than max-zone-file-size ({}) allows",
            top.display(),
            size - 1
        )]
    );
}

#[test]
fn missing_file_is_one_error_at_line_zero() {
    let path = data_dir().join("does-not-exist.zone");
    let (recs, errs) = read_path(&path);
    assert!(recs.is_empty());
    assert_eq!(errs.len(), 1);
    assert_eq!(&*errs[0].location.file, path.as_path());
    assert_eq!(errs[0].location.line, 0);
    assert_eq!(
        errs[0].to_string(),
        format!(
            "{}: cannot read zone file: No such file or directory",
            path.display()
        )
    );
}

/// Each broken file: the file the error is in (relative to `broken/`), its
/// line, and a phrase of the message. Each file has exactly one error.
const BROKEN: &[(&str, &str, u32, &str)] = &[
    (
        "unbalanced_paren.zone",
        "unbalanced_paren.zone",
        3,
        "unbalanced parentheses: this '(' has no matching ')'",
    ),
    (
        "close_paren.zone",
        "close_paren.zone",
        3,
        "')' without a matching '('",
    ),
    (
        "nested_paren.zone",
        "nested_paren.zone",
        4,
        "nested parentheses: '(' inside the '(' opened on line 2",
    ),
    (
        "bad_ttl.zone",
        "bad_ttl.zone",
        4,
        "bad TTL '1x': unknown unit 'x'",
    ),
    (
        "ttl_overflow.zone",
        "ttl_overflow.zone",
        2,
        "$TTL: bad TTL '4294967296': larger than 4294967295 (2^32-1)",
    ),
    (
        "unknown_type.zone",
        "unknown_type.zone",
        12,
        "unknown record type 'AAA'",
    ),
    (
        "unknown_directive.zone",
        "unknown_directive.zone",
        3,
        "unknown directive '$INCLUDEFILE'",
    ),
    (
        "include_missing.zone",
        "include_missing.zone",
        3,
        "missing.zone: No such file or directory, a path taken from the including file's folder",
    ),
    (
        "cycle_a.zone",
        "cycle_b.zone",
        3,
        "$INCLUDE 'cycle_a.zone': include cycle: ",
    ),
    (
        "cycle_b.zone",
        "cycle_a.zone",
        2,
        "$INCLUDE 'cycle_b.zone': include cycle: ",
    ),
    (
        "include_self.zone",
        "include_self.zone",
        2,
        "$INCLUDE 'include_self.zone': include cycle: ",
    ),
    (
        "generate_range.zone",
        "generate_range.zone",
        2,
        "$GENERATE: bad range '20-10': stop is less than start",
    ),
    (
        "generate_too_many.zone",
        "generate_too_many.zone",
        3,
        "$GENERATE: range '0-1100000' makes 1100001 records, more than the limit of 1048576",
    ),
    (
        "generate_bad_modifier.zone",
        "generate_bad_modifier.zone",
        2,
        "$GENERATE: bad lhs 'host-${0,2,q}': '${0,2,q}': bad base 'q'",
    ),
    (
        "bad_escape.zone",
        "bad_escape.zone",
        3,
        r"bad escape '\256' in 'bad\256name'",
    ),
    (
        "class_mismatch.zone",
        "class_mismatch.zone",
        3,
        "class 'CH' does not match the zone's class 'IN'",
    ),
    (
        "missing_owner.zone",
        "missing_owner.zone",
        1,
        "no owner name",
    ),
    (
        "label_too_long.zone",
        "label_too_long.zone",
        3,
        "label longer than 63 octets",
    ),
    (
        "name_too_long.zone",
        "name_too_long.zone",
        3,
        "name longer than 255 octets",
    ),
    (
        "unterminated_quote.zone",
        "unterminated_quote.zone",
        3,
        "unterminated quoted string \"no closing quote",
    ),
    (
        "no_type.zone",
        "no_type.zone",
        3,
        "missing record type after 'IN'",
    ),
    (
        "bad_origin.zone",
        "bad_origin.zone",
        2,
        "$ORIGIN: bad name 'a..example.': empty label in name",
    ),
    ("no_ttl.zone", "no_ttl.zone", 2, "no TTL given and no $TTL"),
    (
        "meta_type.zone",
        "meta_type.zone",
        3,
        "record type 'AXFR' is a query or meta type",
    ),
    (
        "indented_directive.zone",
        "indented_directive.zone",
        3,
        "directive '$ORIGIN' must start at the beginning of the line",
    ),
];

#[test]
fn broken_corpus() {
    let dir = data_dir().join("broken");
    let mut failures = Vec::new();
    for &(file, err_file, line, phrase) in BROKEN {
        let (recs, errs) = read_path(&dir.join(file));
        assert!(recs.is_empty(), "{file}: records from a broken file");
        let ok = errs.len() == 1
            && errs[0].location.file.file_name() == Some(err_file.as_ref())
            && errs[0].location.file.parent() == Some(dir.as_path())
            && errs[0].location.line == line
            && errs[0].message.contains(phrase);
        if !ok {
            failures.push(format!(
                "{file}: expected one error at {err_file}:{line} containing {phrase:?}, got {:#?}",
                errs.iter().map(|e| e.to_string()).collect::<Vec<_>>()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn broken_corpus_is_complete() {
    let mut files: Vec<String> = std::fs::read_dir(data_dir().join("broken"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let mut listed: Vec<String> = BROKEN.iter().map(|b| b.0.to_string()).collect();
    listed.sort();
    assert_eq!(files, listed);
    assert!(files.len() >= 15);
}

#[test]
fn include_cycle_names_the_chain() {
    let dir = data_dir().join("broken");
    let (_, errs) = read_path(&dir.join("cycle_a.zone"));
    let a = dir.join("cycle_a.zone");
    let b = dir.join("cycle_b.zone");
    assert_eq!(
        errs[0].message,
        format!(
            "$INCLUDE 'cycle_a.zone': include cycle: {} -> {} -> {}",
            a.display(),
            b.display(),
            a.display()
        )
    );
}

#[test]
fn error_display_format() {
    let (_, errs) = read("$TTL 1\nwww AAA x\n");
    assert_eq!(
        errs[0].to_string(),
        "example.zone:2: unknown record type 'AAA'"
    );
    assert_eq!(errs[0].location.to_string(), "example.zone:2");
}
