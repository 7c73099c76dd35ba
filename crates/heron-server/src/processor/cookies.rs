//! Layer 4a: DNS cookies (RFC 7873; server cookies as RFC 9018 makes
//! them, so that servers sharing the secret accept each other's). The
//! decision is `heron_proto::cookie`'s; this layer applies it to a query
//! that has a COOKIE option. A query without one never gets here: the
//! caller tests [`has_cookie`], one branch.
//!
//! A query to answer is answered by the engine as any other (it keeps room
//! for the option) and the COOKIE option is appended to the response's OPT
//! record afterwards ([`Pending::append`]), before `sign`. A malformed
//! option gets FORMERR, a missing or wrong server cookie with `require`
//! (UDP only) gets BADCOOKIE with a fresh cookie, and neither is answered.

use std::net::IpAddr;

use heron_proto::Rcode;
use heron_proto::cookie::{
    CookieOutcome, CookieSecrets, CookieSettings, SERVER_COOKIE_LEN, Secret, Verdict,
};
use heron_proto::edns::{CLIENT_COOKIE_LEN, CookieOption, OptionWriter, opt_record};
use heron_proto::message::{Query, response_flags};
use heron_proto::writer::{Section, Writer};

/// RFC 7873 8: the extended RCODE for a missing or wrong server cookie.
pub const BADCOOKIE: Rcode = Rcode(23);

/// The cookie layer's state: the secrets and whether cookies are required.
#[derive(Clone, Debug)]
pub struct Cookies {
    secrets: CookieSecrets,
    require: bool,
    /// The UDP payload size our OPT records announce.
    udp_size: u16,
}

impl Cookies {
    /// From the `[cookies]` settings; `random` is the secret if none is
    /// configured, `now` (seconds since the epoch) starts the previous
    /// secret's grace period. None when cookies are disabled.
    pub fn new(
        settings: &CookieSettings,
        random: Secret,
        now: u64,
        udp_size: u16,
    ) -> Option<Cookies> {
        settings.enabled.then(|| Cookies {
            secrets: CookieSecrets::from_settings(settings, random, now as u32),
            require: settings.require,
            udp_size,
        })
    }
}

/// A secret drawn from the operating system's random source, for when
/// none is configured.
pub fn random_secret() -> Secret {
    random_bytes()
}

/// Octets from the operating system's random source (`getrandom(2)`).
pub fn random_bytes<const N: usize>() -> [u8; N] {
    use ring::rand::{SecureRandom, SystemRandom};
    let mut bytes = [0; N];
    SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system's random source works");
    bytes
}

/// Whether the query brought a COOKIE option (well formed or not).
#[inline(always)]
pub fn has_cookie(q: &Query) -> bool {
    q.edns
        .is_some_and(|e| !matches!(e.options.cookie, CookieOption::Absent))
}

/// What the layer made of a query with a COOKIE option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Answer it, then [`Pending::append`] the COOKIE option.
    Answer(Pending),
    /// The response (FORMERR or BADCOOKIE) is written: nothing else to do.
    Answered,
    /// Answer it as a server without cookies would.
    Ignore,
}

/// The COOKIE option a response is still to get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pending {
    client: [u8; CLIENT_COOKIE_LEN],
    server: [u8; SERVER_COOKIE_LEN],
    /// The client proved its address with a valid server cookie: it is
    /// not rate limited.
    pub rrl_exempt: bool,
}

impl Cookies {
    /// Decides on `q`'s COOKIE option from `client` at `now` (seconds since
    /// the epoch); a query that gets no answer has its response written to
    /// `out` from `question` (the question section as sent).
    pub fn check(
        &self,
        q: &Query,
        question: &[u8],
        client: IpAddr,
        now: u64,
        udp: bool,
        out: &mut Vec<u8>,
    ) -> Step {
        self.check_requiring(q, question, (client, now, udp), self.require, out)
    }

    /// [`Cookies::check`], cookies required or not as `require` says.
    fn check_requiring(
        &self,
        q: &Query,
        question: &[u8],
        (client, now, udp): (IpAddr, u64, bool),
        require: bool,
        out: &mut Vec<u8>,
    ) -> Step {
        let Some(edns) = q.edns else {
            return Step::Ignore;
        };
        let option = &edns.options.cookie;
        let outcome = self
            .secrets
            .evaluate(option, client, now as u32, require, udp);
        let pending = |rrl_exempt| match (option, outcome.server_cookie) {
            (CookieOption::Present(c), Some(server)) => Some(Pending {
                client: *c.client(),
                server,
                rrl_exempt,
            }),
            _ => None,
        };
        match outcome {
            CookieOutcome {
                verdict: Verdict::Answer { rrl_exempt, .. },
                ..
            } => pending(rrl_exempt).map_or(Step::Ignore, Step::Answer),
            CookieOutcome {
                verdict: Verdict::Ignore,
                ..
            } => Step::Ignore,
            CookieOutcome {
                verdict: Verdict::FormErr,
                ..
            } => {
                self.error(q, question, Rcode::FORMERR, out);
                Step::Answered
            }
            CookieOutcome {
                verdict: Verdict::BadCookie,
                ..
            } => {
                self.error(q, question, BADCOOKIE, out);
                if let Some(p) = pending(false) {
                    p.append(out);
                }
                Step::Answered
            }
        }
    }

    /// Answers `q`, a query with a COOKIE option and no question (RFC 7873
    /// 5.4): NOERROR with the COOKIE option and a server cookie, or what
    /// [`Cookies::check`] answers instead (FORMERR, BADCOOKIE). A client
    /// cookie alone asks for a server cookie: NOERROR even when cookies
    /// are required (5.4: it SHALL be).
    pub fn server_cookie_only(
        &self,
        q: &Query,
        client: IpAddr,
        now: u64,
        udp: bool,
        out: &mut Vec<u8>,
    ) {
        let option = q.edns.map(|e| e.options.cookie);
        let sent_server_cookie =
            matches!(option, Some(CookieOption::Present(c)) if c.server().is_some());
        let require = self.require && sent_server_cookie;
        match self.check_requiring(q, &[], (client, now, udp), require, out) {
            Step::Answer(pending) => {
                self.error(q, &[], Rcode::NOERROR, out);
                pending.append(out);
            }
            Step::Answered => {}
            Step::Ignore => self.error(q, &[], Rcode::FORMERR, out),
        }
    }

    /// The header, the question and an OPT record carrying `rcode`'s upper
    /// bits.
    fn error(&self, q: &Query, question: &[u8], rcode: Rcode, out: &mut Vec<u8>) {
        let do_bit = q.edns.is_some_and(|e| e.do_bit);
        let mut w = Writer::new(out, u16::MAX as usize);
        let qdcount = if question.is_empty() {
            0
        } else {
            w.question_raw(question);
            1
        };
        w.section(Section::Additional);
        w.raw_record(&opt_record(self.udp_size, rcode.0, do_bit))
            .expect("no limit");
        let flags = response_flags(q.header.flags) | (rcode.0 & 0xF);
        w.finish(q.header.id, flags, qdcount);
    }
}

impl Pending {
    /// Appends the COOKIE option to the OPT record that ends `out`, if it
    /// does (the engine kept room for it within the client's size). A
    /// response without an OPT (a refusal) goes without.
    pub fn append(&self, out: &mut Vec<u8>) {
        if let Some(mut w) = OptionWriter::ending(out, u16::MAX as usize) {
            // Full only past 65,535 octets, which no response with an OPT
            // record ending it reaches here.
            let _ = w.cookie(&self.client, &self.server);
        }
    }
}
