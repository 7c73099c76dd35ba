//! The query processor's rate-limiting layer (RRL, [`crate::rrl`]) for
//! one UDP worker: its own table, so no state is shared per query. A
//! response the engine wrote is classified from its header, its first
//! authority record and what the engine said of it ([`Summary`]: the
//! wildcard it was synthesized from, an extended rcode), which costs no
//! walk of the message, then sent, dropped or slipped (cut to header and
//! question, TC set). Errors are never slipped, as in BIND: a truncated
//! error tells the client nothing, and one whose rcode is extended
//! (BADCOOKIE, BADVERS) would lose its upper bits with its OPT record.
//!
//! What a response that is not limited costs is kept small
//! (`bench/shield-cost.sh`): the batch is dated once, by its receive
//! ([`Limiter::start_batch`]); the peer's address is read without its
//! port; a positive answer is told from the header's rcode and answer
//! count alone; the key is hashed once. A batch locates every response's
//! bucket first ([`Limiter::locate`], which starts loading its cache
//! line) and debits them after ([`Limiter::settle`]), so that a table
//! larger than the caches makes the batch wait for memory once rather
//! than once per response; everything a limited response needs is out
//! of line.

use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use heron_proto::message::{HEADER_LEN, Query, flags};
use heron_zone::Summary;

use crate::processor::cookies::random_bytes;
use crate::processor::log_limit::{LOG_INTERVAL, LogLimiter};
use crate::rrl::{Action, Charge, Class, Key, Response, Rrl, RrlCounters, RrlSettings, Verdict};

/// The dropped and slipped responses of all workers, for the metrics and
/// the log at exit; each worker adds what changed once per batch, and
/// only when it limited something.
#[derive(Debug, Default)]
pub struct RrlTotals {
    pub dropped: AtomicU64,
    pub slipped: AtomicU64,
    /// Would have been limited, in log-only mode.
    pub log_only: AtomicU64,
}

impl RrlTotals {
    pub fn snapshot(&self) -> RrlCounters {
        RrlCounters {
            dropped: self.dropped.load(Ordering::Relaxed),
            slipped: self.slipped.load(Ordering::Relaxed),
            log_only: self.log_only.load(Ordering::Relaxed),
        }
    }
}

/// One worker's limiter.
pub struct Limiter {
    rrl: Rrl,
    /// When the limiter was made: its times count from here.
    start: Instant,
    /// Milliseconds from `start` to the batch being answered.
    now_ms: u64,
    /// The counters last added to the totals.
    reported: RrlCounters,
}

impl Limiter {
    /// One of `workers` limiters for `rrl` (None: RRL is off), each with
    /// its share of the rates ([`RrlSettings::divided_among`]) and its
    /// own hash key.
    pub fn for_worker(rrl: Option<&RrlSettings>, workers: usize) -> io::Result<Option<Limiter>> {
        let Some(settings) = rrl else {
            return Ok(None);
        };
        let key = u64::from_ne_bytes(random_bytes());
        let rrl = Rrl::new(&settings.divided_among(workers), key)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(Some(Limiter::new(rrl)))
    }

    pub fn new(rrl: Rrl) -> Limiter {
        Limiter {
            rrl,
            start: Instant::now(),
            now_ms: 0,
            reported: RrlCounters::default(),
        }
    }

    /// Dates the batch about to be answered by when it was received, so
    /// that no clock is read here (a time before the limiter's start
    /// counts as its start).
    #[inline]
    pub fn start_batch(&mut self, received_at: Instant) {
        let since = received_at.saturating_duration_since(self.start);
        self.now_ms = since.as_secs() * 1000 + u64::from(since.subsec_millis());
    }

    /// The bucket `response` to `client` is debited from, its cache line
    /// asked for now ([`Rrl::locate`]): a batch locates every response's
    /// bucket before it settles the first ([`Limiter::settle`]). `q` is
    /// the query when it parsed (`plain`), else only its header may be
    /// trusted; `summary`, what the engine said of its answer. None: not
    /// a response, or one that is never limited.
    #[inline]
    pub fn locate(
        &self,
        client: IpAddr,
        q: &Query,
        plain: bool,
        summary: Summary,
        response: &[u8],
    ) -> Option<Charge> {
        let key = classify(response, q, plain, summary)?;
        self.rrl.locate(client, key)
    }

    /// Whether to send the located `response`; a slipped one is cut here.
    /// `client` is decoded again, and the response classified again, only
    /// for a limited response's log line.
    #[inline]
    pub fn settle(
        &mut self,
        charge: Charge,
        client: impl FnOnce() -> Option<IpAddr>,
        (q, plain, summary): (&Query, bool, Summary),
        response: &mut Vec<u8>,
    ) -> bool {
        let verdict = self.rrl.debit(charge, self.now_ms);
        if verdict.action == Action::Send && !verdict.log {
            return true;
        }
        limited(&self.rrl, verdict, client(), (q, plain, summary), response)
    }

    /// Adds what this worker limited since the last call to `totals`.
    #[inline]
    pub fn report(&mut self, totals: &RrlTotals) {
        if self.rrl.take_changed() {
            self.add_to(totals);
        }
    }

    fn add_to(&mut self, totals: &RrlTotals) {
        let now = self.rrl.counters;
        let add = |total: &AtomicU64, new: u64, old: u64| {
            total.fetch_add(new - old, Ordering::Relaxed);
        };
        add(&totals.dropped, now.dropped, self.reported.dropped);
        add(&totals.slipped, now.slipped, self.reported.slipped);
        add(&totals.log_only, now.log_only, self.reported.log_only);
        self.reported = now;
    }
}

/// The "rate limiting" lines of every worker: each client prefix is told
/// once per window, but spoofed sources can make any number of prefixes
/// limited at once. The first 5 per 10 s are written, the rest counted in
/// the next.
static LIMITED_LOG: std::sync::LazyLock<LogLimiter<1>> =
    std::sync::LazyLock::new(|| LogLimiter::with_lines(LOG_INTERVAL, 5));

/// [`Limiter::settle`] for a response that is limited, or whose limiting
/// is to be logged.
#[cold]
#[inline(never)]
fn limited(
    rrl: &Rrl,
    verdict: Verdict,
    client: Option<IpAddr>,
    (q, plain, summary): (&Query, bool, Summary),
    response: &mut Vec<u8>,
) -> bool {
    if verdict.log
        && let (Some(key), Some(client)) = (classify(response, q, plain, summary), client)
        && let Some(due) = LIMITED_LOG.admit(0, heron_proto::time::unix_now())
    {
        let said = rrl.describe(client, Response::from(key));
        tracing::info!("{said}{}", due.tail());
    }
    match verdict.action {
        Action::Send => true,
        Action::Drop => false,
        Action::Slip => {
            let question = if plain { q.question.len() } else { 0 };
            slip(response, question);
            true
        }
    }
}

const RCODE_NOERROR: u8 = 0;
const RCODE_NXDOMAIN: u8 = 3;

/// The kind of response, and the name its bucket is keyed by, as BIND
/// keys them. An answer or NODATA is keyed by the name it is about: the
/// query name, or for one synthesized from a wildcard that wildcard (its
/// closest encloser, which [`Summary`] says), so that random names under
/// a wildcard are one bucket; an answer also by its type, NODATA not (its
/// answer section names none). NXDOMAIN and referrals are keyed by the
/// owner of the first authority record (the zone's SOA, the delegation's
/// NS), which the engine writes as a pointer into the question name; any
/// other form keys them by the class alone. None: not a response (shorter
/// than a header).
#[inline]
fn classify<'q>(response: &[u8], q: &'q Query, plain: bool, summary: Summary) -> Option<Key<'q>> {
    let header: &[u8; HEADER_LEN] = response.get(..HEADER_LEN)?.try_into().ok()?;
    // An extended rcode is never NOERROR or NXDOMAIN, whatever its low bits.
    let rcode = header[3] & 0xF | u8::from(summary.extended_rcode()) << 4;
    if !plain || (rcode != RCODE_NOERROR && rcode != RCODE_NXDOMAIN) {
        return Some(Key {
            class: Class::Error,
            qtype: 0,
            name: &[],
        });
    }
    let count = |at: usize| u16::from_be_bytes([header[at], header[at + 1]]);
    let (answers, authority) = (count(6), count(8));
    let aa = u16::from_be_bytes([header[2], header[3]]) & flags::AA != 0;
    let qname = q.qname_lower.as_wire();
    let class = match rcode {
        RCODE_NXDOMAIN => Class::NxDomain,
        _ if !aa && answers == 0 && authority > 0 => Class::Referral,
        _ => {
            return Some(Key {
                class: Class::Positive,
                qtype: if answers == 0 { 0 } else { q.qtype.0 },
                name: summary.about(qname),
            });
        }
    };
    let name = if answers != 0 || authority == 0 {
        &[][..]
    } else {
        let at = HEADER_LEN + q.question.len();
        owner_in_question(response.get(at..at + 2), qname)
    };
    Some(Key {
        class,
        qtype: 0,
        name,
    })
}

/// The name a record's owner points to, when it is a compression pointer
/// into the question name (which starts right after the header) or the
/// root; else empty.
fn owner_in_question<'q>(owner: Option<&[u8]>, qname: &'q [u8]) -> &'q [u8] {
    match owner {
        Some(&[0, _]) => &qname[qname.len() - 1..],
        Some(&[high, low]) if high & 0xC0 == 0xC0 => {
            let target = usize::from(high & 0x3F) << 8 | usize::from(low);
            target
                .checked_sub(HEADER_LEN)
                .and_then(|at| qname.get(at..))
                .unwrap_or(&[])
        }
        _ => &[],
    }
}

/// Cuts a response to its header and the first `question` octets after
/// it, with TC set and no records but its OPT record, if it had one (RFC
/// 6891 6.1.1: the client's EDNS, cookie and DO are answered as NSD and
/// Knot answer them): the client retries over TCP.
fn slip(response: &mut Vec<u8>, question: usize) {
    let opt = opt_record(response, HEADER_LEN + question).map(|at| response[at].to_vec());
    response.truncate(HEADER_LEN + question);
    response[2] |= (flags::TC >> 8) as u8;
    if question == 0 {
        response[4..6].fill(0);
    }
    response[6..HEADER_LEN].fill(0);
    if let Some(opt) = opt {
        response.extend_from_slice(&opt);
        response[11] = 1;
    }
}

/// Where the OPT record of `response` lies (its records start at
/// `records`), if it has one: the additional record of type 41 whose
/// owner is the root.
fn opt_record(response: &[u8], records: usize) -> Option<std::ops::Range<usize>> {
    let count = |at: usize| u16::from_be_bytes([response[at], response[at + 1]]) as usize;
    let (before, additional) = (count(6) + count(8), count(10));
    let mut at = records;
    for index in 0..before + additional {
        let (owner_end, _) = heron_proto::name::skip_compressed(response, at).ok()?;
        let fixed = response.get(owner_end..owner_end + 10)?;
        let rtype = u16::from_be_bytes([fixed[0], fixed[1]]);
        let end = owner_end + 10 + u16::from_be_bytes([fixed[8], fixed[9]]) as usize;
        if end > response.len() {
            return None;
        }
        if index >= before && rtype == 41 && response[at] == 0 {
            return Some(at..end);
        }
        at = end;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_proto::message::parse_query;
    use heron_proto::writer::{Section, Writer};
    use heron_proto::{Class, Name, RType, Rcode};
    use heron_zone::answer::{answer_prepared, prepare};
    use heron_zone::{AnswerConfig, Catalog, Transport, load_zone_str};
    use std::sync::OnceLock;
    use std::time::Duration;

    fn query(name: &[u8]) -> (Vec<u8>, Query) {
        let mut msg = vec![0x12, 0x34, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        msg.extend_from_slice(name);
        msg.extend_from_slice(&[0, 1, 0, 1]);
        let q = parse_query(&msg).unwrap();
        (msg, q)
    }

    /// A response to `query` with the given rcode, AA, answer count and
    /// one authority record whose owner is `owner` (raw).
    fn response(
        query: &[u8],
        q: &Query,
        rcode: u16,
        aa: bool,
        answers: u16,
        owner: &[u8],
    ) -> Vec<u8> {
        let mut out = Vec::new();
        let mut w = Writer::new(&mut out, 65535);
        w.question_raw(&query[q.question.clone()]);
        w.count_records(answers);
        w.section(Section::Authority);
        let mut record = owner.to_vec();
        record.extend_from_slice(&[0, 2, 0, 1, 0, 0, 0, 60, 0, 1, 0]);
        w.raw_record(&record).unwrap();
        let flags = 0x8000 | if aa { flags::AA } else { 0 } | rcode;
        w.finish(0x1234, flags, 1);
        out
    }

    const NAME: &[u8] = b"\x01x\x03www\x07example\x00";

    #[test]
    fn responses_are_classified_from_their_header_and_authority_owner() {
        let (msg, q) = query(NAME);
        // The zone's SOA owner points at "example" in the question.
        let nx = response(&msg, &q, 3, true, 0, &[0xC0, 12 + 6]);
        assert_eq!(
            classify(&nx, &q, true, Summary::PLAIN).map(Response::from),
            Some(Response::NxDomain {
                zone: b"\x07example\x00"
            })
        );
        let referral = response(&msg, &q, 0, false, 0, &[0xC0, 12 + 2]);
        assert_eq!(
            classify(&referral, &q, true, Summary::PLAIN).map(Response::from),
            Some(Response::Referral {
                delegation: b"\x03www\x07example\x00"
            })
        );
        let root_nx = response(&msg, &q, 3, true, 0, &[0]);
        assert_eq!(
            classify(&root_nx, &q, true, Summary::PLAIN).map(Response::from),
            Some(Response::NxDomain { zone: b"\x00" })
        );
        let positive = response(&msg, &q, 0, true, 1, &[0xC0, 12]);
        let want = Response::Positive {
            name: NAME,
            qtype: RType::A.0,
        };
        assert_eq!(
            classify(&positive, &q, true, Summary::PLAIN).map(Response::from),
            Some(want)
        );
        // NODATA: by the name alone, as BIND and Knot key it.
        let nodata = response(&msg, &q, 0, true, 0, &[0xC0, 12]);
        assert_eq!(
            classify(&nodata, &q, true, Summary::PLAIN).map(Response::from),
            Some(Response::Positive {
                name: NAME,
                qtype: 0
            })
        );
        let refused = response(&msg, &q, Rcode::REFUSED.0, false, 0, &[0]);
        assert_eq!(
            classify(&refused, &q, true, Summary::PLAIN).map(Response::from),
            Some(Response::Error)
        );
        // A query that did not parse: an error whatever the response says.
        assert_eq!(
            classify(&positive, &q, false, Summary::PLAIN).map(Response::from),
            Some(Response::Error)
        );
        assert_eq!(
            classify(&positive[..11], &q, true, Summary::PLAIN).map(Response::from),
            None
        );
        let _ = Class::IN;
    }

    #[test]
    fn owners_not_pointing_into_the_question_key_by_class_alone() {
        let (msg, q) = query(NAME);
        for owner in [&[0xC0, 200][..], &[0xC0, 2], &[7, b'e'], &[0xC0, 12 + 40]] {
            let nx = response(&msg, &q, 3, true, 0, owner);
            assert_eq!(
                classify(&nx, &q, true, Summary::PLAIN).map(Response::from),
                Some(Response::NxDomain { zone: b"" }),
                "{owner:?}"
            );
        }
        // A CNAME chain ending in NXDOMAIN: the authority is after the answers.
        let chained = response(&msg, &q, 3, true, 1, &[0xC0, 12 + 6]);
        assert_eq!(
            classify(&chained, &q, true, Summary::PLAIN).map(Response::from),
            Some(Response::NxDomain { zone: b"" })
        );
    }

    fn limiter(settings: crate::rrl::RrlSettings) -> Limiter {
        Limiter::new(Rrl::new(&settings, 7).unwrap())
    }

    impl Limiter {
        /// One response located and settled at once.
        fn admit(&mut self, client: IpAddr, q: &Query, plain: bool, out: &mut Vec<u8>) -> bool {
            self.admit_summarized(client, (q, plain, Summary::PLAIN), out)
        }

        fn admit_summarized(
            &mut self,
            client: IpAddr,
            (q, plain, summary): (&Query, bool, Summary),
            out: &mut Vec<u8>,
        ) -> bool {
            match self.locate(client, q, plain, summary, out) {
                Some(charge) => self.settle(charge, || Some(client), (q, plain, summary), out),
                None => true,
            }
        }
    }

    #[test]
    fn every_response_of_a_batch_to_one_bucket_is_counted() {
        // A batch of twelve answers to one client for one name, all
        // located before the first is settled, at five a second: five
        // sent whole, then drop and slip in turn, as if one at a time.
        let mut limiter = limiter(crate::rrl::RrlSettings {
            responses_per_second: 5,
            ..Default::default()
        });
        let (msg, q) = query(NAME);
        let answer = response(&msg, &q, 0, true, 1, &[0xC0, 12]);
        let client: IpAddr = "192.0.2.1".parse().unwrap();
        limiter.start_batch(limiter.start);
        let mut outs = vec![answer.clone(); 12];
        let charges: Vec<Charge> = outs
            .iter()
            .map(|out| {
                limiter
                    .locate(client, &q, true, Summary::PLAIN, out)
                    .unwrap()
            })
            .collect();
        assert!(charges.windows(2).all(|w| w[0] == w[1]), "one bucket");
        let sent: Vec<bool> = charges
            .into_iter()
            .zip(&mut outs)
            .map(|(charge, out)| {
                let query = (&q, true, Summary::PLAIN);
                limiter.settle(charge, || Some(client), query, out)
            })
            .collect();
        let want = [true; 5]
            .into_iter()
            .chain([false, true].repeat(4).into_iter().take(7));
        assert_eq!(sent, want.collect::<Vec<_>>());
        assert!(outs[..5].iter().all(|out| *out == answer), "sent whole");
        assert!(outs[6].len() < answer.len(), "slipped");
        let totals = RrlTotals::default();
        limiter.report(&totals);
        let counted = RrlCounters {
            dropped: 4,
            slipped: 3,
            log_only: 0,
        };
        assert_eq!(totals.snapshot(), counted);
    }

    #[test]
    fn a_batch_is_dated_by_its_receive_time_in_milliseconds() {
        let mut limiter = limiter(Default::default());
        let start = limiter.start;
        for (after, ms) in [(0, 0), (999_999, 0), (1_000_000, 1), (1_999_999_999, 1999)] {
            limiter.start_batch(start + Duration::from_nanos(after));
            assert_eq!(limiter.now_ms, ms, "{after} ns");
        }
        limiter.start_batch(start + Duration::from_secs(90_061));
        assert_eq!(limiter.now_ms, 90_061_000);
        // Received before the limiter was made: its start.
        if let Some(earlier) = start.checked_sub(Duration::from_millis(5)) {
            limiter.start_batch(earlier);
            assert_eq!(limiter.now_ms, 0);
        }
    }

    #[test]
    fn answers_at_the_rate_are_sent_whole_and_past_it_dropped_or_slipped() {
        let mut limiter = limiter(crate::rrl::RrlSettings {
            responses_per_second: 5,
            ..Default::default()
        });
        let totals = RrlTotals::default();
        let (msg, q) = query(NAME);
        let answer = response(&msg, &q, 0, true, 1, &[0xC0, 12]);
        let client: IpAddr = "192.0.2.1".parse().unwrap();
        let start = limiter.start;
        for second in 0..3u64 {
            limiter.start_batch(start + Duration::from_secs(second));
            // At the rate: five answers a second, each untouched.
            for _ in 0..5 {
                let mut out = answer.clone();
                assert!(limiter.admit(client, &q, true, &mut out));
                assert_eq!(out, answer);
            }
            limiter.report(&totals);
            assert_eq!(
                totals.snapshot(),
                RrlCounters {
                    dropped: second,
                    slipped: second,
                    log_only: 0
                }
            );
            // Past it: one dropped, then one slipped (slip 2), cut to its question.
            let mut out = answer.clone();
            assert!(!limiter.admit(client, &q, true, &mut out), "dropped");
            let mut out = answer.clone();
            assert!(limiter.admit(client, &q, true, &mut out), "slipped");
            assert_eq!(out.len(), HEADER_LEN + q.question.len());
            assert_eq!(out[2] & 0x02, 0x02, "TC");
            limiter.report(&totals);
            let limited = second + 1;
            assert_eq!(
                totals.snapshot(),
                RrlCounters {
                    dropped: limited,
                    slipped: limited,
                    log_only: 0
                }
            );
        }
        // Another client, and an error to the same one, are unaffected.
        let other: IpAddr = "2001:db8::1".parse().unwrap();
        assert!(limiter.admit(other, &q, true, &mut answer.clone()));
        let mut refused = response(&msg, &q, Rcode::REFUSED.0, false, 0, &[0]);
        assert!(limiter.admit(client, &q, true, &mut refused));
        // Nothing limited since: nothing added.
        limiter.report(&totals);
        assert_eq!(
            totals.snapshot(),
            RrlCounters {
                dropped: 3,
                slipped: 3,
                log_only: 0
            }
        );
    }

    #[test]
    fn a_slipped_response_keeps_header_and_question_with_tc() {
        let (msg, q) = query(NAME);
        let mut out = response(&msg, &q, 0, true, 0, &[0xC0, 12]);
        slip(&mut out, q.question.len());
        assert_eq!(out.len(), HEADER_LEN + q.question.len());
        assert_eq!(&out[HEADER_LEN..], &msg[q.question.clone()]);
        assert_eq!(out[2] & 0x02, 0x02, "TC");
        assert_eq!(out[2] & 0x04, 0x04, "AA kept");
        assert_eq!(&out[4..12], &[0, 1, 0, 0, 0, 0, 0, 0]);
        let mut formerr = vec![0x12, 0x34, 0x80, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        slip(&mut formerr, 0);
        assert_eq!(formerr, [0x12, 0x34, 0x82, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
    }

    /// A slipped response keeps its OPT record, the client's COOKIE and
    /// DO answered in it (RFC 6891 6.1.1), and nothing else.
    #[test]
    fn a_slipped_response_keeps_its_opt_record() {
        let (msg, q) = query(NAME);
        let mut out = Vec::new();
        let mut w = Writer::new(&mut out, 65535);
        w.question_raw(&msg[q.question.clone()]);
        w.section(Section::Answer);
        let mut answer = vec![0xC0, 12];
        answer.extend_from_slice(&[0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1]);
        w.raw_record(&answer).unwrap();
        w.section(Section::Additional);
        let glue = [0xC0, 14, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 2];
        w.raw_record(&glue).unwrap();
        // OPT: root owner, 1232 octets, DO, an 8-octet client cookie.
        let mut opt = vec![0, 0, 41, 0x04, 0xD0, 0, 0, 0x80, 0, 0, 12, 0, 10, 0, 8];
        opt.extend_from_slice(b"ABCDEFGH");
        w.raw_record(&opt).unwrap();
        w.finish(0x1234, 0x8000 | flags::AA, 1);
        slip(&mut out, q.question.len());
        assert_eq!(&out[4..12], &[0, 1, 0, 0, 0, 0, 0, 1]);
        assert_eq!(&out[HEADER_LEN + q.question.len()..], &opt[..]);
        assert_eq!(out[2] & 0x02, 0x02, "TC");
        // A response cut short or without OPT: header and question only.
        let (msg, q) = query(NAME);
        let mut plain = response(&msg, &q, 0, true, 0, &[0xC0, 12]);
        let whole = plain.len();
        plain[11] = 1; // an additional record the message does not hold
        slip(&mut plain, q.question.len());
        assert!(whole > plain.len());
        assert_eq!(plain.len(), HEADER_LEN + q.question.len());
    }

    /// example. with two wildcards, a real name beside one of them, and a
    /// DNAME.
    fn wildcards() -> &'static Catalog {
        static CATALOG: OnceLock<Catalog> = OnceLock::new();
        CATALOG.get_or_init(|| {
            let text = "$TTL 300\n@ SOA ns hostmaster 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n\
                        *.w TXT \"w\"\n*.v TXT \"v\"\nh.w TXT \"real\"\n\
                        alias DNAME example.net.\n";
            let origin = Name::parse("example.").unwrap();
            let mut catalog = Catalog::new();
            catalog.insert(load_zone_str(text, "t", &origin).unwrap().zone);
            catalog
        })
    }

    /// The engine's response to `name` `qtype` (with EDNS `version`, if
    /// any) in [`wildcards`], the query parsed and the engine's summary.
    fn engine(name: &str, qtype: RType, version: Option<u8>) -> (Vec<u8>, Query, Summary) {
        let mut msg = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        msg.extend_from_slice(Name::parse(name).unwrap().as_wire());
        msg.extend_from_slice(&qtype.0.to_be_bytes());
        msg.extend_from_slice(&[0, 1]);
        if let Some(version) = version {
            msg[11] = 1;
            msg.extend_from_slice(&[0, 0, 41, 4, 0xD0, 0, version, 0, 0, 0, 0]);
        }
        let mut q = Query::new();
        let prepared = prepare(wildcards(), &msg, &mut q);
        let mut out = Vec::new();
        let config = AnswerConfig::default();
        let (_, summary) = answer_prepared(&config, &prepared, &q, &msg, Transport::Udp, &mut out);
        (out, q, summary)
    }

    /// The class, type and name (as text) the engine's response to `name`
    /// `qtype` is keyed by.
    fn keyed(name: &str, qtype: RType, version: Option<u8>) -> (crate::rrl::Class, u16, String) {
        let (out, q, summary) = engine(name, qtype, version);
        let key = classify(&out, &q, true, summary).unwrap();
        let name = match key.name {
            [] => String::new(),
            wire => Name::from_wire(wire).unwrap().to_string(),
        };
        (key.class, key.qtype, name)
    }

    #[test]
    fn answers_from_a_wildcard_are_keyed_by_it_and_nodata_by_the_name_alone() {
        use crate::rrl::Class::{Error, NxDomain, Positive};
        let (txt, aaaa) = (RType::TXT, RType::AAAA);
        let cases = [
            ("r1.w.example.", txt, (Positive, txt.0, "w.example.")),
            ("R2.W.example.", txt, (Positive, txt.0, "w.example.")),
            ("a.b.w.example.", txt, (Positive, txt.0, "w.example.")),
            ("r1.v.example.", txt, (Positive, txt.0, "v.example.")),
            ("h.w.example.", txt, (Positive, txt.0, "h.w.example.")),
            // NODATA, from the wildcard or not: without the type.
            ("r1.w.example.", aaaa, (Positive, 0, "w.example.")),
            ("h.w.example.", aaaa, (Positive, 0, "h.w.example.")),
            // NXDOMAIN, beside a wildcard or not: the zone.
            ("x.h.w.example.", txt, (NxDomain, 0, "example.")),
            ("nope.example.", txt, (NxDomain, 0, "example.")),
        ];
        for (name, qtype, (class, keyed_type, key_name)) in cases {
            let want = (class, keyed_type, key_name.to_string());
            assert_eq!(keyed(name, qtype, None), want, "{name} {qtype:?}");
        }
        // BADVERS (16) reads NOERROR in its header: an error all the same.
        let badvers = keyed("r1.w.example.", txt, Some(1));
        assert_eq!(badvers, (Error, 0, String::new()));
    }

    #[test]
    fn random_names_under_one_wildcard_share_its_bucket() {
        let mut limiter = limiter(crate::rrl::RrlSettings {
            responses_per_second: 5,
            slip: 0,
            ..Default::default()
        });
        let client: IpAddr = "192.0.2.1".parse().unwrap();
        limiter.start_batch(limiter.start);
        let mut sent = |names: &mut dyn Iterator<Item = String>| {
            names
                .filter(|name| {
                    let (mut out, q, summary) = engine(name, RType::TXT, None);
                    limiter.admit_summarized(client, (&q, true, summary), &mut out)
                })
                .count()
        };
        // Fifty names under *.w: the five of one bucket.
        assert_eq!(sent(&mut (0..50).map(|i| format!("r{i}.w.example."))), 5);
        // Another wildcard, and a real name beside the first: their own.
        assert_eq!(sent(&mut (0..5).map(|i| format!("r{i}.v.example."))), 5);
        assert_eq!(sent(&mut (0..5).map(|_| "h.w.example.".to_string())), 5);
        // Names below a DNAME: one bucket, its owner's (a flood of random
        // names under it was never limited).
        let below = sent(&mut (0..50).map(|i| format!("r{i}.alias.example.")));
        assert_eq!(below, 5);
    }

    #[test]
    fn limited_errors_are_dropped_untouched_never_slipped() {
        let mut limiter = limiter(crate::rrl::RrlSettings {
            errors_per_second: Some(2),
            slip: 1,
            ..Default::default()
        });
        limiter.start_batch(limiter.start);
        let (badvers, badvers_q, badvers_summary) = engine("r.w.example.", RType::TXT, Some(1));
        // BADCOOKIE (23) as the cookie layer writes it: 7 in the header,
        // 1 in the OPT, and nothing said by the engine.
        let mut badcookie = badvers.clone();
        badcookie[3] = (badcookie[3] & 0xF0) | 7;
        let (refused, refused_q, _) = engine("elsewhere.", RType::A, None);
        assert_eq!(refused[3] & 0xF, Rcode::REFUSED.0 as u8);
        let cases = [
            (badvers, &badvers_q, badvers_summary),
            (badcookie, &badvers_q, Summary::PLAIN),
            (refused, &refused_q, Summary::PLAIN),
        ];
        for (i, (response, q, summary)) in cases.into_iter().enumerate() {
            let client = IpAddr::from([192, 0, i as u8, 1]); // a /24 each
            for n in 0..6 {
                let mut out = response.clone();
                let sent = limiter.admit_summarized(client, (q, true, summary), &mut out);
                assert_eq!(sent, n < 2, "case {i}, response {n}");
                assert_eq!(out, response, "case {i}: never cut");
            }
        }
        let totals = RrlTotals::default();
        limiter.report(&totals);
        assert_eq!(
            totals.snapshot(),
            RrlCounters {
                dropped: 12,
                slipped: 0,
                log_only: 0
            }
        );
    }
}
