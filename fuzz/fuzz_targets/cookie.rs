//! A query's OPT RDATA and the server cookie checks on it.
//!
//! Input: 4 octets of `now`, 1 octet of switches (bit 0: require cookies,
//! bit 1: over UDP, bit 2: IPv6 client, bit 3: replace the first COOKIE
//! option's server cookie with one we made, so the valid paths are
//! reached), 2 octets of how many seconds before `now` that cookie was
//! made (signed), then the OPT RDATA.
//!
//! Checks: the option reader rejects or accepts, never panics; a cookie it
//! reads writes back (OptionWriter) and reads again the same; the verdict
//! follows the option (FORMERR exactly for a malformed one, nothing for
//! none); every server cookie handed out verifies at `now` for the same
//! client, and one we made in date verifies.
#![no_main]

use std::net::IpAddr;

use heron_proto::cookie::{CookieSecrets, LIFETIME, CLOCK_SKEW, ServerCookie, Verdict};
use heron_proto::edns::{self, CookieOption, OptionWriter};
use libfuzzer_sys::fuzz_target;

const SECRET: [u8; 16] = *b"fuzz secret 16 o";
const PREVIOUS: [u8; 16] = *b"old secret 16 oc";

fuzz_target!(|data: &[u8]| {
    let Some((head, rdata)) = data.split_first_chunk::<7>() else {
        return;
    };
    let now = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
    let switches = head[4];
    let (require, udp, v6, forge) = (
        switches & 1 != 0,
        switches & 2 != 0,
        switches & 4 != 0,
        switches & 8 != 0,
    );
    let age = i16::from_be_bytes([head[5], head[6]]) as i32;
    let client_ip: IpAddr = if v6 {
        "2001:db8::53".parse().unwrap()
    } else {
        "192.0.2.53".parse().unwrap()
    };
    let mut secrets = CookieSecrets::new(PREVIOUS);
    secrets.rotate(SECRET, now.wrapping_sub(10), 3600);

    let mut rdata = rdata.to_vec();
    let made_at = now.wrapping_sub(age as u32);
    if forge {
        forge_server_cookie(&mut rdata, &secrets, client_ip, made_at);
    }
    let Ok(opt) = edns::parse_opt(1232, 0, &rdata) else {
        return;
    };
    let option = opt.options.cookie;
    if let CookieOption::Present(cookie) = option {
        round_trip(&cookie);
        if let Some(server) = cookie.server() {
            let check = secrets.verify(cookie.client(), server, client_ip, now);
            let in_date = age <= LIFETIME as i32 && age >= -(CLOCK_SKEW as i32);
            if forge && server.len() == 16 && in_date {
                assert!(matches!(check, ServerCookie::Valid { .. }), "{age}");
            }
            if !in_date && forge {
                assert_eq!(check, ServerCookie::Invalid);
            }
        }
    }
    let outcome = secrets.evaluate(&option, client_ip, now, require, udp);
    match (option, outcome.verdict) {
        (CookieOption::Absent, Verdict::Ignore) | (CookieOption::Malformed, Verdict::FormErr) => {
            assert_eq!(outcome.server_cookie, None)
        }
        (CookieOption::Present(cookie), Verdict::Answer { .. } | Verdict::BadCookie) => {
            let handed = outcome.server_cookie.expect("a cookie for the response");
            let check = secrets.verify(cookie.client(), &handed, client_ip, now);
            assert!(matches!(check, ServerCookie::Valid { .. }));
            if let Verdict::BadCookie = outcome.verdict {
                assert!(require && udp);
            }
        }
        (option, verdict) => panic!("{option:?} got {verdict:?}"),
    }
});

/// Puts a server cookie made at `made_at` into the first COOKIE option
/// that has room for one (a client cookie and 16 octets).
fn forge_server_cookie(rdata: &mut [u8], secrets: &CookieSecrets, ip: IpAddr, made_at: u32) {
    let mut i = 0;
    while i + 4 <= rdata.len() {
        let code = u16::from_be_bytes([rdata[i], rdata[i + 1]]);
        let len = u16::from_be_bytes([rdata[i + 2], rdata[i + 3]]) as usize;
        let data = i + 4..(i + 4 + len).min(rdata.len());
        if code == edns::code::COOKIE {
            if len == 24 && data.len() == 24 {
                let client: [u8; 8] = rdata[data.start..data.start + 8].try_into().unwrap();
                let made = secrets.make(&client, ip, made_at);
                rdata[data.start + 8..data.end].copy_from_slice(&made);
            }
            return;
        }
        i = data.end;
    }
}

/// A cookie written into a response's OPT and read back is the same.
fn round_trip(cookie: &edns::Cookie) {
    let mut msg = edns::opt_record(1232, 0, false).to_vec();
    let mut writer = OptionWriter::after_bare_opt(&mut msg, 512).unwrap();
    match cookie.server() {
        Some(server) => writer.cookie(cookie.client(), server).unwrap(),
        None => writer.option(edns::code::COOKIE, &[cookie.client()]).unwrap(),
    }
    let again = edns::parse_opt(1232, 0, &msg[edns::OPT_LEN..]).unwrap();
    assert_eq!(again.options.cookie, CookieOption::Present(*cookie));
}
