//! DNS cookies (RFC 7873) with interoperable server cookies (RFC 9018).
//!
//! A server cookie is 16 octets: version 1, three reserved octets, a
//! 32-bit timestamp and a SipHash-2-4 MAC over the client cookie, those
//! eight octets and the client's address, keyed with a 16-octet secret.
//! Servers that share the secret (an anycast fleet, or BIND and Knot
//! configured alike) accept each other's cookies.
//!
//! Nothing here reads a clock: `now` is seconds since the Unix epoch,
//! modulo 2^32, compared with serial-number arithmetic (RFC 1982) so the
//! wrap in 2106 is harmless.

use std::hash::Hasher;
use std::net::IpAddr;

use siphasher::sip::SipHasher24;

use crate::edns::{CLIENT_COOKIE_LEN, CookieOption};

/// The key of the server cookie MAC.
pub type Secret = [u8; 16];

/// Length of the server cookies made here (RFC 9018 4).
pub const SERVER_COOKIE_LEN: usize = 16;
/// The only version RFC 9018 defines.
const VERSION: u8 = 1;
/// A cookie is valid up to an hour after it was made (RFC 9018 4.3) ...
pub const LIFETIME: u32 = 3600;
/// ... and up to five minutes before, for peers whose clocks run ahead.
pub const CLOCK_SKEW: u32 = 300;
/// A valid cookie older than this is replaced by a fresh one (RFC 9018 4.3).
pub const RENEW_AFTER: u32 = 1800;

/// The server cookie for `client` at `client_ip`, made at `now`.
pub fn server_cookie(
    secret: &Secret,
    client: &[u8; CLIENT_COOKIE_LEN],
    client_ip: IpAddr,
    now: u32,
) -> [u8; SERVER_COOKIE_LEN] {
    let mut cookie = [0; SERVER_COOKIE_LEN];
    cookie[0] = VERSION;
    cookie[4..8].copy_from_slice(&now.to_be_bytes());
    let head: [u8; 8] = cookie[..8].try_into().expect("eight octets");
    cookie[8..].copy_from_slice(&mac(secret, client, &head, client_ip));
    cookie
}

/// SipHash-2-4 over client cookie | version | reserved | timestamp |
/// client address (4 or 16 octets), little-endian as RFC 9018's reference
/// code writes it.
fn mac(
    secret: &Secret,
    client: &[u8; CLIENT_COOKIE_LEN],
    head: &[u8; 8],
    client_ip: IpAddr,
) -> [u8; 8] {
    let mut hasher = SipHasher24::new_with_key(secret);
    hasher.write(client);
    hasher.write(head);
    // A dual-stack socket shows IPv4 clients as ::ffff:a.b.c.d; a peer
    // with an IPv4 socket hashes the four octets, and so do we.
    match client_ip.to_canonical() {
        IpAddr::V4(v4) => hasher.write(&v4.octets()),
        IpAddr::V6(v6) => hasher.write(&v6.octets()),
    }
    hasher.finish().to_le_bytes()
}

/// What a server cookie sent back by a client is worth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerCookie {
    /// Made by us (or a peer sharing a secret) for this client, in date.
    /// `renew`: older than [`RENEW_AFTER`] or made with the previous
    /// secret, so the response carries a fresh one.
    Valid { renew: bool },
    /// Not ours, not for this client or address, expired, or from the
    /// future: the client is treated as having sent only its client cookie.
    Invalid,
}

/// The secrets server cookies are made and checked with: the current one,
/// and the one before it, accepted until the end of a grace period after
/// a rotation so that cookies handed out just before stay valid.
#[derive(Clone, Debug)]
pub struct CookieSecrets {
    current: Secret,
    previous: Option<(Secret, u32)>,
}

impl CookieSecrets {
    pub fn new(current: Secret) -> CookieSecrets {
        CookieSecrets {
            current,
            previous: None,
        }
    }

    /// From the configuration; `random` is the secret to use if none is
    /// configured (the caller draws it at start). A configured previous
    /// secret is accepted for `rotation_grace` seconds from `now`.
    pub fn from_settings(settings: &CookieSettings, random: Secret, now: u32) -> CookieSecrets {
        let mut secrets = CookieSecrets::new(settings.secret.unwrap_or(random));
        if let Some(previous) = settings.previous_secret {
            secrets.previous = Some((previous, now.wrapping_add(settings.rotation_grace)));
        }
        secrets
    }

    /// Makes `new` the current secret; the one it replaces is still
    /// accepted for `grace` seconds.
    pub fn rotate(&mut self, new: Secret, now: u32, grace: u32) {
        self.previous = Some((self.current, now.wrapping_add(grace)));
        self.current = new;
    }

    /// A fresh server cookie, made with the current secret.
    pub fn make(
        &self,
        client: &[u8; CLIENT_COOKIE_LEN],
        client_ip: IpAddr,
        now: u32,
    ) -> [u8; SERVER_COOKIE_LEN] {
        server_cookie(&self.current, client, client_ip, now)
    }

    /// Checks the server cookie a client sent back with `client`.
    pub fn verify(
        &self,
        client: &[u8; CLIENT_COOKIE_LEN],
        server: &[u8],
        client_ip: IpAddr,
        now: u32,
    ) -> ServerCookie {
        let Ok(server) = <&[u8; SERVER_COOKIE_LEN]>::try_from(server) else {
            return ServerCookie::Invalid;
        };
        let (head, got) = server.split_at(8);
        let head: &[u8; 8] = head.try_into().expect("eight octets");
        let made = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
        let age = now.wrapping_sub(made) as i32;
        if head[0] != VERSION || age > LIFETIME as i32 || age < -(CLOCK_SKEW as i32) {
            return ServerCookie::Invalid;
        }
        // The reserved octets are hashed as sent (RFC 9018 A.3).
        let matches = |secret: &Secret| same(&mac(secret, client, head, client_ip), got);
        if matches(&self.current) {
            return ServerCookie::Valid {
                renew: age > RENEW_AFTER as i32,
            };
        }
        match self.previous {
            Some((previous, until)) if (until.wrapping_sub(now) as i32) >= 0 => {
                if matches(&previous) {
                    ServerCookie::Valid { renew: true }
                } else {
                    ServerCookie::Invalid
                }
            }
            _ => ServerCookie::Invalid,
        }
    }

    /// [`decide`] for a query's COOKIE option, with the server cookie the
    /// response carries (when it carries one).
    pub fn evaluate(
        &self,
        option: &CookieOption,
        client_ip: IpAddr,
        now: u32,
        require: bool,
        udp: bool,
    ) -> CookieOutcome {
        let (presented, cookie) = match option {
            CookieOption::Absent => (Presented::Nothing, None),
            CookieOption::Malformed => (Presented::Malformed, None),
            CookieOption::Present(c) => match c.server() {
                None => (Presented::ClientOnly, Some(c)),
                Some(s) => {
                    let check = self.verify(c.client(), s, client_ip, now);
                    (Presented::Server(check), Some(c))
                }
            },
        };
        let verdict = decide(presented, require, udp);
        let server_cookie = cookie.and_then(|c| match verdict {
            Verdict::Answer {
                cookie: ResponseCookie::Echo,
                ..
            } => c.server()?.try_into().ok(),
            Verdict::Answer { .. } | Verdict::BadCookie => {
                Some(self.make(c.client(), client_ip, now))
            }
            Verdict::Ignore | Verdict::FormErr => None,
        });
        CookieOutcome {
            verdict,
            server_cookie,
        }
    }
}

/// Octet strings equal, compared in time independent of where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// What a query brought, for [`decide`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presented {
    /// No OPT record, or no COOKIE option in it.
    Nothing,
    /// A COOKIE option of a length no cookie has.
    Malformed,
    /// A client cookie alone (a client that has not learned ours yet).
    ClientOnly,
    /// A client cookie and a server cookie, checked.
    Server(ServerCookie),
}

/// What to do with a query, cookie-wise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Answer as a server without cookies would: no COOKIE in the response
    /// (RFC 7873 5.2.1).
    Ignore,
    /// Answer, with a COOKIE option holding the client cookie and
    /// `cookie`. `rrl_exempt`: the client proved it receives at its address
    /// (a valid server cookie), so rate limiting need not apply.
    Answer {
        cookie: ResponseCookie,
        rrl_exempt: bool,
    },
    /// RCODE BADCOOKIE (23) and no answer, with a fresh server cookie for
    /// the client to retry with (RFC 7873 5.2.3, 5.2.4).
    BadCookie,
    /// RCODE FORMERR (RFC 7873 5.2.2).
    FormErr,
}

/// The server cookie an answer carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponseCookie {
    /// A new one, made now.
    Fresh,
    /// The valid one the client sent, still young (RFC 9018 4.3).
    Echo,
}

/// RFC 7873 5.2's table. `require`: answer only clients that present a
/// valid server cookie, the others get BADCOOKIE with one to retry with.
/// It applies over UDP only, as BIND's `require-server-cookie` does: a TCP
/// client has already proved its address with the handshake.
pub fn decide(presented: Presented, require: bool, udp: bool) -> Verdict {
    let answer = |cookie, rrl_exempt| Verdict::Answer { cookie, rrl_exempt };
    match presented {
        Presented::Nothing => Verdict::Ignore,
        Presented::Malformed => Verdict::FormErr,
        Presented::Server(ServerCookie::Valid { renew: false }) => {
            answer(ResponseCookie::Echo, true)
        }
        Presented::Server(ServerCookie::Valid { renew: true }) => {
            answer(ResponseCookie::Fresh, true)
        }
        Presented::ClientOnly | Presented::Server(ServerCookie::Invalid) if require && udp => {
            Verdict::BadCookie
        }
        Presented::ClientOnly | Presented::Server(ServerCookie::Invalid) => {
            answer(ResponseCookie::Fresh, false)
        }
    }
}

/// [`CookieSecrets::evaluate`]'s result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CookieOutcome {
    pub verdict: Verdict,
    /// The server cookie for the response's COOKIE option (after the
    /// client cookie): for `Answer` and `BadCookie`, else None.
    pub server_cookie: Option<[u8; SERVER_COOKIE_LEN]>,
}

/// The `[cookies]` settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CookieSettings {
    /// Answer COOKIE options at all (on by default, as in BIND and Knot).
    /// Off, the option is ignored like any unknown one.
    pub enabled: bool,
    /// The server secret, 16 octets. Servers that share it accept each
    /// other's cookies; None: a random secret drawn at start.
    pub secret: Option<Secret>,
    /// The secret before `secret`, still accepted for `rotation_grace`
    /// after start or reload, so cookies handed out with it keep working.
    pub previous_secret: Option<Secret>,
    /// Seconds the previous secret stays accepted. The default covers a
    /// cookie's whole lifetime and the clock skew allowed.
    pub rotation_grace: u32,
    /// Over UDP, answer only clients with a valid server cookie; clients
    /// sending a client cookie alone or a bad one get BADCOOKIE. Clients
    /// sending no cookie are answered as always.
    pub require: bool,
}

impl Default for CookieSettings {
    fn default() -> Self {
        CookieSettings {
            enabled: true,
            secret: None,
            previous_secret: None,
            rotation_grace: LIFETIME + CLOCK_SKEW,
            require: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edns::Cookie;

    fn hex<const N: usize>(s: &str) -> [u8; N] {
        let bytes: Vec<u8> = (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect();
        bytes.try_into().unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// The COOKIE option data a test vector shows, split.
    fn option(s: &str) -> ([u8; 8], [u8; 16]) {
        let all: [u8; 24] = hex(s);
        (all[..8].try_into().unwrap(), all[8..].try_into().unwrap())
    }

    const SECRET: &str = "e5e973e5a6b2a43f48e7dc849e37bfcf";

    #[test]
    fn rfc9018_a1_learning_a_new_server_cookie() {
        let secrets = CookieSecrets::new(hex(SECRET));
        let (client, want) = option("2464c4abcf10c957010000005cf79f111f8130c3eee29480");
        assert_eq!(
            secrets.make(&client, ip("198.51.100.100"), 1559731985),
            want
        );
    }

    #[test]
    fn rfc9018_a2_the_same_client_renewing_it() {
        let secrets = CookieSecrets::new(hex(SECRET));
        let (client, sent) = option("2464c4abcf10c957010000005cf79f111f8130c3eee29480");
        let at = 1559734385; // 40 minutes later: valid, due for renewal
        let client_ip = ip("198.51.100.100");
        assert_eq!(
            secrets.verify(&client, &sent, client_ip, at),
            ServerCookie::Valid { renew: true }
        );
        let (_, want) = option("2464c4abcf10c957010000005cf7a871d4a564a1442aca77");
        assert_eq!(secrets.make(&client, client_ip, at), want);
    }

    #[test]
    fn rfc9018_a3_another_client_with_reserved_octets_set() {
        let secrets = CookieSecrets::new(hex(SECRET));
        let (client, sent) = option("fc93fc62807ddb8601abcdef5cf78f71a314227b6679ebf5");
        let client_ip = ip("203.0.113.203");
        // Made at 1559727985; checked when it was 10 minutes old.
        assert_eq!(
            secrets.verify(&client, &sent, client_ip, 1559727985 + 600),
            ServerCookie::Valid { renew: false }
        );
        let (_, want) = option("fc93fc62807ddb86010000005cf7a9acf73a7810aca2381e");
        assert_eq!(secrets.make(&client, client_ip, 1559734700), want);
    }

    #[test]
    fn rfc9018_a4_ipv6_with_a_rolled_over_secret() {
        let old = hex("dd3bdf9344b678b185a6f5cb60fca715");
        let new = hex("445536bcd2513298075a5d379663c962");
        let client_ip = ip("2001:db8:220:1:59de:d0f4:8769:82b8");
        let (client, sent) = option("22681ab97d52c298010000005cf7c57926556bd0934c72f8");
        let at = 1559741961;
        let mut secrets = CookieSecrets::new(old);
        assert_eq!(
            secrets.verify(&client, &sent, client_ip, at),
            ServerCookie::Valid { renew: false }
        );
        secrets.rotate(new, at - 60, 3600);
        assert_eq!(
            secrets.verify(&client, &sent, client_ip, at),
            ServerCookie::Valid { renew: true },
            "the old secret is still accepted, and the cookie renewed"
        );
        let (_, want) = option("22681ab97d52c298010000005cf7c609a6bb79d16625507a");
        assert_eq!(secrets.make(&client, client_ip, at), want);
        assert_eq!(
            CookieSecrets::new(new).verify(&client, &sent, client_ip, at),
            ServerCookie::Invalid
        );
    }

    #[test]
    fn the_previous_secret_is_accepted_until_the_grace_period_ends() {
        let client = [1; 8];
        let client_ip = ip("192.0.2.1");
        let mut secrets = CookieSecrets::new([1; 16]);
        let cookie = secrets.make(&client, client_ip, 1000);
        secrets.rotate([2; 16], 1000, 600);
        let at = |now| secrets.verify(&client, &cookie, client_ip, now);
        assert_eq!(at(1600), ServerCookie::Valid { renew: true }, "at the end");
        assert_eq!(at(1601), ServerCookie::Invalid, "past the end");
        // A second rotation forgets the first secret at once.
        secrets.rotate([3; 16], 1100, 600);
        assert_eq!(
            secrets.verify(&client, &cookie, client_ip, 1100),
            ServerCookie::Invalid
        );
    }

    #[test]
    fn configured_secrets_are_used_and_the_previous_one_for_its_grace() {
        let settings = CookieSettings {
            secret: Some([7; 16]),
            previous_secret: Some([6; 16]),
            rotation_grace: 100,
            ..CookieSettings::default()
        };
        let secrets = CookieSecrets::from_settings(&settings, [9; 16], 5000);
        let client_ip = ip("192.0.2.1");
        let old = server_cookie(&[6; 16], &[1; 8], client_ip, 5000);
        let valid = |now| secrets.verify(&[1; 8], &old, client_ip, now);
        assert_eq!(valid(5100), ServerCookie::Valid { renew: true });
        assert_eq!(valid(5101), ServerCookie::Invalid);
        let made = secrets.make(&[1; 8], client_ip, 5000);
        assert_eq!(made, server_cookie(&[7; 16], &[1; 8], client_ip, 5000));
        let unset = CookieSecrets::from_settings(&CookieSettings::default(), [9; 16], 5000);
        assert_eq!(
            unset.make(&[1; 8], client_ip, 5000),
            server_cookie(&[9; 16], &[1; 8], client_ip, 5000),
            "the random secret when none is configured"
        );
    }

    #[test]
    fn a_cookie_is_valid_from_five_minutes_ahead_to_an_hour_old() {
        let secrets = CookieSecrets::new([5; 16]);
        let client_ip = ip("192.0.2.1");
        let made = 1_000_000;
        let cookie = secrets.make(&[1; 8], client_ip, made);
        let at = |now| secrets.verify(&[1; 8], &cookie, client_ip, now);
        assert_eq!(at(made - 301), ServerCookie::Invalid);
        assert_eq!(at(made - 300), ServerCookie::Valid { renew: false });
        assert_eq!(at(made + 1800), ServerCookie::Valid { renew: false });
        assert_eq!(at(made + 1801), ServerCookie::Valid { renew: true });
        assert_eq!(at(made + 3600), ServerCookie::Valid { renew: true });
        assert_eq!(at(made + 3601), ServerCookie::Invalid);
        // Serial arithmetic: a cookie made just before 2^32 wraps is fine.
        let cookie = secrets.make(&[1; 8], client_ip, u32::MAX - 10);
        let valid = secrets.verify(&[1; 8], &cookie, client_ip, 20);
        assert_eq!(valid, ServerCookie::Valid { renew: false });
    }

    #[test]
    fn a_cookie_is_bound_to_its_client_address_and_cookie_and_format() {
        let secrets = CookieSecrets::new([5; 16]);
        let client_ip = ip("192.0.2.1");
        let cookie = secrets.make(&[1; 8], client_ip, 100);
        let check = |client: [u8; 8], server: &[u8], from: &str| {
            secrets.verify(&client, server, ip(from), 100)
        };
        assert_eq!(
            check([1; 8], &cookie, "::ffff:192.0.2.1"),
            ServerCookie::Valid { renew: false },
            "IPv4 through a dual-stack socket"
        );
        assert_eq!(check([1; 8], &cookie, "192.0.2.2"), ServerCookie::Invalid);
        assert_eq!(check([2; 8], &cookie, "192.0.2.1"), ServerCookie::Invalid);
        for i in 0..SERVER_COOKIE_LEN {
            let mut bad = cookie;
            bad[i] ^= 0x10;
            assert_eq!(check([1; 8], &bad, "192.0.2.1"), ServerCookie::Invalid);
        }
        assert_eq!(
            check([1; 8], &cookie[..15], "192.0.2.1"),
            ServerCookie::Invalid
        );
        let longer = [&cookie[..], &[0]].concat();
        assert_eq!(check([1; 8], &longer, "192.0.2.1"), ServerCookie::Invalid);
    }

    #[test]
    fn rfc7873_decision_table() {
        use Presented::*;
        use ResponseCookie::*;
        let valid = Server(ServerCookie::Valid { renew: false });
        let renew = Server(ServerCookie::Valid { renew: true });
        let invalid = Server(ServerCookie::Invalid);
        let answer = |cookie, rrl_exempt| Verdict::Answer { cookie, rrl_exempt };
        for (presented, require, udp, want) in [
            (Nothing, false, true, Verdict::Ignore),
            (Nothing, true, true, Verdict::Ignore),
            (Malformed, false, true, Verdict::FormErr),
            (Malformed, true, false, Verdict::FormErr),
            (ClientOnly, false, true, answer(Fresh, false)),
            (ClientOnly, true, true, Verdict::BadCookie),
            (ClientOnly, true, false, answer(Fresh, false)),
            (invalid, false, true, answer(Fresh, false)),
            (invalid, true, true, Verdict::BadCookie),
            (invalid, true, false, answer(Fresh, false)),
            (valid, false, true, answer(Echo, true)),
            (valid, true, true, answer(Echo, true)),
            (renew, true, true, answer(Fresh, true)),
            (renew, false, false, answer(Fresh, true)),
        ] {
            let got = decide(presented, require, udp);
            assert_eq!(got, want, "{presented:?} require {require} udp {udp}");
        }
    }

    #[test]
    fn evaluate_hands_out_the_cookie_the_response_needs() {
        let secrets = CookieSecrets::new([5; 16]);
        let client_ip = ip("192.0.2.1");
        let fresh = secrets.make(&[1; 8], client_ip, 5000);
        let option = |data: &[u8]| CookieOption::Present(Cookie::from_option(data).unwrap());
        let eval = |o: &CookieOption, require| secrets.evaluate(o, client_ip, 5000, require, true);

        let client_only = eval(&option(&[1; 8]), false);
        assert_eq!(client_only.server_cookie, Some(fresh));
        let bad = eval(&option(&[[1; 8], [0; 8]].concat()), true);
        assert_eq!(bad.verdict, Verdict::BadCookie);
        assert_eq!(bad.server_cookie, Some(fresh));

        let young = secrets.make(&[1; 8], client_ip, 4000);
        let echoed = eval(&option(&[&[1; 8], &young[..]].concat()), true);
        assert_eq!(echoed.server_cookie, Some(young));
        let old = secrets.make(&[1; 8], client_ip, 2000);
        let renewed = eval(&option(&[&[1; 8], &old[..]].concat()), true);
        assert_eq!(renewed.server_cookie, Some(fresh));
        assert!(matches!(
            renewed.verdict,
            Verdict::Answer {
                rrl_exempt: true,
                ..
            }
        ));

        for nothing in [CookieOption::Absent, CookieOption::Malformed] {
            assert_eq!(eval(&nothing, true).server_cookie, None);
        }
    }
}
