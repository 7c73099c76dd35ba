//! Issue 25's shields end to end, against the real server on loopback:
//! DNS cookies with dig and kdig (and a raw client for what they can not
//! send), and response rate limiting under a flood from one address.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use heron_proto::{Name, RType};
use heron_testkit::client::{
    EdnsOpts, QueryOpts, build_query, flood_udp, flood_udp_each, flood_udp_with, try_query_udp,
};
use heron_testkit::{ServerProcess, query_udp};

const OLD_SECRET: &str = "000102030405060708090a0b0c0d0e0f";
const NEW_SECRET: &str = "f0e0d0c0b0a090807060504030201000";
const BADCOOKIE: &str = "BADCOOKIE";

fn heron() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_heron"))
}

fn zone() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/differential/edge.test.zone")
}

/// Heron serving edge.test with `sections` added to its configuration.
fn start(sections: &str) -> ServerProcess {
    let sections = sections.to_string();
    ServerProcess::heron_with_config(&heron(), "edge.test", move |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n{sections}\n\
             [[zone]]\norigin = \"edge.test\"\nfile = \"{}\"\n",
            zone().display()
        )
    })
}

fn required(secret: &str) -> String {
    format!("[cookies]\nrequire = true\nsecret = \"{secret}\"\n")
}

/// `tool` (dig or kdig) asking `server` for www.edge.test A with `args`.
fn ask(tool: &str, server: SocketAddr, args: &[&str]) -> String {
    let out = Command::new(tool)
        .arg(format!("@{}", server.ip()))
        .arg("-p")
        .arg(server.port().to_string())
        .args(if tool == "dig" {
            ["+tries=1", "+time=2"]
        } else {
            ["+retry=0", "+time=2"]
        })
        .args(["www.edge.test", "A"])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The statuses dig or kdig printed, in order.
fn statuses(output: &str) -> Vec<String> {
    output
        .lines()
        .filter_map(|l| l.split("status: ").nth(1))
        .map(|s| {
            s.trim_end_matches([',', ';'])
                .split([',', ';'])
                .next()
                .unwrap()
                .to_string()
        })
        .collect()
}

/// The last COOKIE the output shows, in hex (client then server).
fn cookie(output: &str) -> String {
    let line = output
        .lines()
        .rev()
        .find_map(|l| l.split("COOKIE: ").nth(1))
        .unwrap_or_else(|| panic!("no COOKIE in {output}"));
    line.split_whitespace().next().unwrap().to_lowercase()
}

/// A cookie Heron gave: 8 octets of the client's, then a 16-octet RFC
/// 9018 server cookie (version 1, three reserved octets).
fn assert_server_cookie(hex: &str) {
    assert_eq!(hex.len(), 2 * (8 + 16), "{hex}");
    assert_eq!(&hex[16..24], "01000000", "{hex}");
}

/// dig's cookie from `server` without retrying a BADCOOKIE.
fn fresh_cookie(server: SocketAddr) -> String {
    let out = ask("dig", server, &["+cookie", "+nobadcookie"]);
    cookie(&out)
}

#[test]
fn dig_and_kdig_get_a_server_cookie_that_is_accepted_back() {
    let server = start(&required(OLD_SECRET));
    // With cookies required, the first query (client cookie only) gets
    // BADCOOKIE and a server cookie; both tools retry with it, accepted.
    let dig = ask("dig", server.addr(), &["+cookie"]);
    assert!(dig.contains("BADCOOKIE, retrying"), "{dig}");
    assert_eq!(statuses(&dig), ["NOERROR"], "{dig}");
    assert!(dig.contains("(good)"), "{dig}");
    assert_server_cookie(&cookie(&dig));
    let kdig = ask("kdig", server.addr(), &["+cookie"]);
    assert_eq!(statuses(&kdig), [BADCOOKIE, "NOERROR"], "{kdig}");
    assert_server_cookie(&cookie(&kdig));
    // The cookie sent back in a second query is accepted at once.
    let again = ask(
        "dig",
        server.addr(),
        &[&format!("+cookie={}", cookie(&dig))],
    );
    assert_eq!(statuses(&again), ["NOERROR"], "{again}");
    assert!(!again.contains("BADCOOKIE"), "{again}");
    // Over TCP the handshake proved the address: answered whatever.
    let tcp = ask("dig", server.addr(), &["+cookie", "+tcp"]);
    assert_eq!(statuses(&tcp), ["NOERROR"], "{tcp}");
}

#[test]
fn a_wrong_server_cookie_gets_badcookie_when_required_and_an_answer_when_not() {
    let wrong = "0102030405060708010000006b044db20fec16627a01e3eb";
    let strict = start(&required(OLD_SECRET));
    let out = ask(
        "dig",
        strict.addr(),
        &[&format!("+cookie={wrong}"), "+nobadcookie"],
    );
    assert_eq!(statuses(&out), [BADCOOKIE], "{out}");
    // The BADCOOKIE carries a fresh cookie for the client to retry with.
    let fresh = cookie(&out);
    assert_server_cookie(&fresh);
    assert_eq!(&fresh[..16], &wrong[..16]);
    assert_ne!(fresh, wrong);
    // By default cookies are answered but not required.
    let lenient = start("");
    let out = ask(
        "dig",
        lenient.addr(),
        &[&format!("+cookie={wrong}"), "+nobadcookie"],
    );
    assert_eq!(statuses(&out), ["NOERROR"], "{out}");
    assert_server_cookie(&cookie(&out));
    // Turned off, the option is ignored: no COOKIE in the answer.
    let off = start("[cookies]\nenabled = false\n");
    let out = ask("dig", off.addr(), &["+cookie", "+nobadcookie"]);
    assert_eq!(statuses(&out), ["NOERROR"], "{out}");
    assert!(!out.contains("COOKIE:"), "{out}");
}

/// `dig +header-only` against `server` with `args`: a query with no
/// question (RFC 7873 5.4 when it carries a cookie).
fn ask_header_only(server: SocketAddr, args: &[&str]) -> String {
    let out = Command::new("dig")
        .arg(format!("@{}", server.ip()))
        .args(["-p", &server.port().to_string(), "+tries=1", "+time=2"])
        .arg("+header-only")
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A query with a client cookie and no question gets NOERROR and a server
/// cookie (RFC 7873 5.4; `dig +header-only +cookie`, how operators check a
/// server's cookies), over UDP and TCP, even when cookies are required;
/// the cookie is accepted back. Without a cookie, without EDNS or with
/// cookies off it is FORMERR, as before.
#[test]
fn a_query_without_a_question_gets_a_server_cookie() {
    let lenient = start("");
    for transport in ["+notcp", "+tcp"] {
        let out = ask_header_only(lenient.addr(), &["+cookie", transport]);
        assert_eq!(statuses(&out), ["NOERROR"], "{out}");
        assert!(out.contains("QUERY: 0, ANSWER: 0"), "{out}");
        assert_server_cookie(&cookie(&out));
    }
    let strict = start(&required(OLD_SECRET));
    let out = ask_header_only(strict.addr(), &["+cookie", "+nobadcookie"]);
    assert_eq!(statuses(&out), ["NOERROR"], "{out}");
    let given = cookie(&out);
    assert_server_cookie(&given);
    let back = ask(
        "dig",
        strict.addr(),
        &[&format!("+cookie={given}"), "+nobadcookie"],
    );
    assert_eq!(statuses(&back), ["NOERROR"], "{back}");
    // A wrong server cookie, cookies required: BADCOOKIE and a fresh one.
    let wrong = "0102030405060708010000006b044db20fec16627a01e3eb";
    let out = ask_header_only(
        strict.addr(),
        &[&format!("+cookie={wrong}"), "+nobadcookie"],
    );
    assert_eq!(statuses(&out), [BADCOOKIE], "{out}");
    assert_ne!(cookie(&out), wrong);
    for args in [&["+nocookie"][..], &["+noedns"]] {
        let out = ask_header_only(lenient.addr(), args);
        assert_eq!(statuses(&out), ["FORMERR"], "{args:?}: {out}");
    }
    let off = start("[cookies]\nenabled = false\n");
    let out = ask_header_only(off.addr(), &["+cookie", "+nobadcookie"]);
    assert_eq!(statuses(&out), ["FORMERR"], "{out}");
    assert_answers_www(&lenient);
}

/// The server answers a plain query still.
fn assert_answers_www(server: &ServerProcess) {
    let out = ask("dig", server.addr(), &[]);
    assert_eq!(statuses(&out), ["NOERROR"], "{out}");
}

#[test]
fn instances_sharing_a_secret_accept_each_others_cookies_and_rotation_the_old_one() {
    let first = start(&required(OLD_SECRET));
    let cookie = fresh_cookie(first.addr());
    assert_server_cookie(&cookie);
    let send = |server: &ServerProcess| {
        let out = ask(
            "dig",
            server.addr(),
            &[&format!("+cookie={cookie}"), "+nobadcookie"],
        );
        statuses(&out)
    };
    let second = start(&required(OLD_SECRET));
    assert_eq!(send(&second), ["NOERROR"]);
    // Rotated: the new secret, the old one still accepted.
    let rotated = start(&format!(
        "[cookies]\nrequire = true\nsecret = \"{NEW_SECRET}\"\nprevious-secret = \"{OLD_SECRET}\"\n"
    ));
    assert_eq!(send(&rotated), ["NOERROR"]);
    let other = start(&required(NEW_SECRET));
    assert_eq!(send(&other), [BADCOOKIE]);
    // The rotated server hands out cookies of the new secret.
    let renewed = fresh_cookie(rotated.addr());
    let out = ask(
        "dig",
        other.addr(),
        &[&format!("+cookie={renewed}"), "+nobadcookie"],
    );
    assert_eq!(statuses(&out), ["NOERROR"], "{out}");
}

/// A query for www.edge.test A with a COOKIE option of `cookie`.
fn query_with_cookie(cookie: &[u8]) -> Vec<u8> {
    let name: Name = "www.edge.test.".parse().unwrap();
    let opts = QueryOpts {
        id: 0x4242,
        edns: Some(EdnsOpts::default()),
        ..QueryOpts::default()
    };
    let mut query = build_query(&name, RType::A, &opts);
    // The OPT record ends the query and has no options yet.
    let rdlen_at = query.len() - 2;
    let rdlen = (4 + cookie.len()) as u16;
    query[rdlen_at..].copy_from_slice(&rdlen.to_be_bytes());
    query.extend_from_slice(&[0, 10]);
    query.extend_from_slice(&(cookie.len() as u16).to_be_bytes());
    query.extend_from_slice(cookie);
    query
}

#[test]
fn malformed_cookies_get_formerr_and_short_client_cookies_too() {
    let server = start("");
    for len in [0, 7, 9, 15, 41] {
        let response = query_udp(server.addr(), &query_with_cookie(&vec![7; len]));
        assert_eq!(response[3] & 0xF, 1, "FORMERR for a {len}-octet cookie");
        assert_eq!(&response[6..8], &[0, 0], "no answer");
    }
    for len in [8, 16, 40] {
        let response = query_udp(server.addr(), &query_with_cookie(&vec![7; len]));
        assert_eq!(response[3] & 0xF, 0, "NOERROR for a {len}-octet cookie");
        // The COOKIE option ends the response: our 8 octets, then 16.
        let tail = &response[response.len() - 28..];
        assert_eq!(&tail[..4], &[0, 10, 0, 24]);
        assert_eq!(&tail[4..12], &[7; 8]);
    }
}

#[test]
fn a_flood_from_one_address_is_answered_at_the_rate_and_half_the_rest_truncated() {
    // Clients one by one (/32), so that 127.0.0.3 is another client.
    let server = start("[rrl]\nresponses-per-second = 50\nslip = 2\nipv4-prefix-length = 32\n");
    let addr = server.addr();
    let bystander = std::thread::spawn(move || {
        let mut answered = 0;
        for _ in 0..20 {
            std::thread::sleep(Duration::from_millis(50));
            answered += usize::from(ask_once(addr, "127.0.0.3"));
        }
        answered
    });
    // At least 2 s (a millisecond's sleep every other query); longer on a
    // busy machine, when more is answered at the same rate.
    let flood = flood_udp("127.0.0.2".parse().unwrap(), addr, 4000);
    eprintln!("{flood:?}");
    flood.assert_limited(50);
    assert_eq!(bystander.join().unwrap(), 20, "the other client unaffected");
}

/// One query from `from`, answered (not truncated)?
fn ask_once(server: SocketAddr, from: &str) -> bool {
    let name: Name = "www.edge.test.".parse().unwrap();
    let query = build_query(&name, RType::A, &QueryOpts::default());
    let from: IpAddr = from.parse().unwrap();
    heron_testkit::client::try_query_udp_from(from, server, &query)
        .is_ok_and(|r| r[2] & 0x02 == 0 && u16::from_be_bytes([r[6], r[7]]) > 0)
}

#[test]
fn rate_limiting_is_off_by_default() {
    let server = start("");
    let flood = flood_udp("127.0.0.2".parse().unwrap(), server.addr(), 400);
    assert_eq!((flood.answered, flood.truncated), (400, 0));
    assert!(try_query_udp(server.addr(), &query_with_cookie(&[1; 8])).is_ok());
}

/// A zone with two wildcards whose answers are about ten times the size
/// of a query (460 octets to 46), and real names beside one of them.
fn wildcard_zone() -> String {
    let big = format!("\"{}\" \"{}\"", "w".repeat(200), "x".repeat(200));
    let real: String = (0..REAL_NAMES)
        .map(|i| format!("h{i}.w TXT \"real {i}\"\n"))
        .collect();
    format!(
        "$ORIGIN wild.test.\n$TTL 3600\n@ SOA ns hostmaster 1 3600 900 604800 300\n\
         @ NS ns\nns A 192.0.2.1\n*.w TXT {big}\n*.v TXT {big}\n{real}"
    )
}

const REAL_NAMES: usize = 10;

/// Heron serving [`wildcard_zone`] with `sections` added; the zone's file
/// is removed once it is loaded.
fn start_wildcards(sections: &str) -> ServerProcess {
    let dir = std::env::temp_dir().join(format!("heron-rrl-wild-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let zone = dir.join("wild.test.zone");
    std::fs::write(&zone, wildcard_zone()).unwrap();
    let sections = sections.to_string();
    let server = ServerProcess::heron_with_config(&heron(), "wild.test", move |port| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n{sections}\n\
             [[zone]]\norigin = \"wild.test\"\nfile = \"{}\"\n",
            zone.display()
        )
    });
    let _ = std::fs::remove_dir_all(&dir);
    server
}

/// A query for `name` and `rtype` with EDNS (room for a whole answer).
fn edns_query(name: &str, rtype: RType) -> Vec<u8> {
    let opts = QueryOpts {
        edns: Some(EdnsOpts::default()),
        ..QueryOpts::default()
    };
    build_query(&name.parse().unwrap(), rtype, &opts)
}

#[test]
fn random_names_under_a_wildcard_are_limited_as_one_name() {
    let rate = 10;
    // A table of a million buckets: the dozen keys below share one by
    // chance about once in ten thousand runs.
    let server = start_wildcards(&format!(
        "[rrl]\nresponses-per-second = {rate}\nslip = 2\nipv4-prefix-length = 32\n\
         table-size = 1048576\n"
    ));
    let addr = server.addr();
    let from = |host: &str| host.parse::<IpAddr>().unwrap();
    // 2,000 names nobody asked before, all synthesized from *.w: one
    // bucket, answered at the rate, half the rest truncated.
    let random = |i| edns_query(&format!("r{i}.w.wild.test."), RType::TXT);
    let flood = flood_udp_with(from("127.0.0.2"), addr, 2000, random);
    eprintln!("random names: {flood:?}");
    flood.assert_limited(rate);
    // So are the NODATA answers of a type the wildcard does not have.
    let mut not_limited = 0;
    let nodata = |i| edns_query(&format!("r{i}.w.wild.test."), RType::AAAA);
    let started = std::time::Instant::now();
    flood_udp_each(from("127.0.0.5"), addr, 2000, nodata, |r| {
        not_limited += usize::from(r[2] & 0x02 == 0);
    });
    let seconds = started.elapsed().as_secs() as usize + 1;
    assert!(
        (rate..=rate + rate * seconds).contains(&not_limited),
        "{not_limited} NODATA in < {seconds} s"
    );
    // Real names beside the wildcard each have their own bucket: ten
    // queries for each of ten, all answered whole.
    let real = |i| edns_query(&format!("h{}.w.wild.test.", i % REAL_NAMES), RType::TXT);
    let flood = flood_udp_with(from("127.0.0.3"), addr, rate * REAL_NAMES, real);
    assert_eq!(
        (flood.answered, flood.truncated),
        (flood.sent, 0),
        "{flood:?}"
    );
    // Two wildcards are two buckets: ten random names under each, all
    // answered whole.
    let both = |i| {
        let wildcard = if i % 2 == 0 { "w" } else { "v" };
        edns_query(&format!("s{i}.{wildcard}.wild.test."), RType::TXT)
    };
    let flood = flood_udp_with(from("127.0.0.4"), addr, 2 * rate, both);
    assert_eq!(
        (flood.answered, flood.truncated),
        (flood.sent, 0),
        "{flood:?}"
    );
}

#[test]
fn limited_errors_with_an_extended_rcode_are_dropped_never_slipped() {
    // Slip 1 would truncate every limited response; errors are dropped.
    let rate = 5;
    let server = start(&format!(
        "[rrl]\nresponses-per-second = {rate}\nerrors-per-second = {rate}\nslip = 1\n\
         ipv4-prefix-length = 32\n{}",
        required(OLD_SECRET)
    ));
    let badvers = {
        let opts = QueryOpts {
            edns: Some(EdnsOpts {
                version: 1,
                ..EdnsOpts::default()
            }),
            ..QueryOpts::default()
        };
        build_query(&"www.edge.test.".parse().unwrap(), RType::A, &opts)
    };
    // A client cookie alone, over UDP with cookies required: BADCOOKIE
    // (23); EDNS version 1: BADVERS (16). Both need the OPT record.
    let cases = [
        ("127.0.0.2", query_with_cookie(&[7; 8]), "BADCOOKIE", 23),
        ("127.0.0.3", badvers, "BADVERS", 16),
    ];
    for (from, query, what, rcode) in cases {
        assert_dropped_past(rate, &server, from, &query, (what, rcode));
    }
}

/// 400 copies of `query` from `from` are answered `rcode` at `rate` a
/// second (with a burst of one second), none truncated: the rest dropped.
fn assert_dropped_past(
    rate: usize,
    server: &ServerProcess,
    from: &str,
    query: &[u8],
    (what, rcode): (&str, u16),
) {
    let started = std::time::Instant::now();
    let mut received = 0;
    flood_udp_each(
        from.parse().unwrap(),
        server.addr(),
        400,
        |_| query.to_vec(),
        |r| {
            received += 1;
            let message = heron_proto::message::Message::parse(r)
                .unwrap_or_else(|e| panic!("{what}: {e:?} in {r:?}"));
            assert_eq!(message.rcode().0, rcode, "{what}, OPT kept: {r:?}");
            assert_eq!(r[2] & 0x02, 0, "{what} not truncated");
        },
    );
    let seconds = started.elapsed().as_secs() as usize + 1;
    assert!(
        (rate..=rate + rate * seconds).contains(&received),
        "{what}: {received} of 400 sent in < {seconds} s"
    );
}

/// A query with no question and a client cookie, as RFC 7873 5.4 has a
/// client ask for a server cookie.
fn question_less_query(cookie: &[u8; 8]) -> Vec<u8> {
    let mut query = vec![0x51, 0x51, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    // OPT: root owner, type 41, payload 1232, no extended flags.
    query.extend_from_slice(&[0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0, 0, 12, 0, 10, 0, 8]);
    query.extend_from_slice(cookie);
    query
}

/// A server cookie is answered to a question-less query from any source,
/// a spoofed one too, and the answer is larger than the query: a flood of
/// them is rate limited as errors are, by the client's prefix, and never
/// slipped. A plain query from another client is still answered.
#[test]
fn question_less_cookie_queries_are_rate_limited_as_errors() {
    let rate = 5;
    let server = start(&format!(
        "[rrl]\nresponses-per-second = 1000\nerrors-per-second = {rate}\nslip = 1\n\
         ipv4-prefix-length = 32\n"
    ));
    let query = question_less_query(&[9; 8]);
    let answer = query_udp(server.addr(), &query);
    assert_eq!(answer[3] & 0xF, 0, "a server cookie: {answer:?}");
    assert!(answer.len() > query.len(), "{answer:?}");
    assert_dropped_past(rate, &server, "127.0.0.5", &query, ("server cookie", 0));
    assert!(ask_once(server.addr(), "127.0.0.6"));
}

/// A refusal of a query the ACLs deny, and NOTIMP to an AXFR over UDP,
/// are errors as RRL limits them (black-box finding DM-2: both were sent
/// to every query of a flood, and with an NSID a refusal was eight times
/// the query). A client the ACLs let in is still answered.
#[test]
fn refusals_by_acl_and_axfr_over_udp_are_rate_limited_as_errors() {
    let rate = 5;
    let server = start(&format!(
        "allow-query = [\"127.0.0.1\", \"127.0.0.6\", \"127.0.0.8\"]\nnsid = \"{}\"\n\
         [rrl]\nresponses-per-second = 1000\nerrors-per-second = {rate}\nslip = 1\n\
         ipv4-prefix-length = 32\n",
        "n".repeat(200)
    ));
    let www = build_query(
        &"www.edge.test.".parse().unwrap(),
        RType::A,
        &QueryOpts::default(),
    );
    assert_dropped_past(rate, &server, "127.0.0.7", &www, ("REFUSED", 5));
    let axfr = build_query(
        &"edge.test.".parse().unwrap(),
        RType::AXFR,
        &QueryOpts::default(),
    );
    assert_dropped_past(rate, &server, "127.0.0.8", &axfr, ("NOTIMP", 4));
    assert!(ask_once(server.addr(), "127.0.0.6"));
}
