//! The query processor's rate-limiting layer (RRL, [`crate::rrl`]) for
//! one UDP worker: its own table, so no state is shared per query. A
//! response the engine wrote is classified from its header and first
//! authority record, which costs no walk of the message, then sent,
//! dropped or slipped (cut to header and question, TC set).

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use heron_sys::clock::monotonic_millis;

use heron_proto::message::{HEADER_LEN, Query, flags};

use crate::rrl::{Action, Response, Rrl, RrlCounters};

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
    /// The monotonic clock at creation, in milliseconds.
    start: u64,
    /// Milliseconds since `start`, read once per batch.
    now_ms: u64,
    /// The counters last added to the totals.
    reported: RrlCounters,
}

impl Limiter {
    pub fn new(rrl: Rrl) -> Limiter {
        Limiter {
            rrl,
            start: monotonic_millis(),
            now_ms: 0,
            reported: RrlCounters::default(),
        }
    }

    /// Reads the clock for the batch about to be answered.
    pub fn start_batch(&mut self) {
        self.now_ms = monotonic_millis().saturating_sub(self.start);
    }

    /// Whether to send `response` to `client`; a slipped one is cut here.
    /// `q` is the query when it parsed (`plain`), else only its header
    /// may be trusted.
    pub fn admit(
        &mut self,
        client: IpAddr,
        q: &Query,
        plain: bool,
        response: &mut Vec<u8>,
    ) -> bool {
        let Some(class) = classify(response, q, plain) else {
            return true;
        };
        let verdict = self.rrl.check(client, class, self.now_ms);
        if verdict.log {
            tracing::info!("rate limiting {class:?} responses to {client} and its prefix");
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

    /// Adds what this worker limited since the last call to `totals`.
    pub fn report(&mut self, totals: &RrlTotals) {
        let now = self.rrl.counters;
        if now != self.reported {
            let add = |total: &AtomicU64, new: u64, old: u64| {
                total.fetch_add(new - old, Ordering::Relaxed);
            };
            add(&totals.dropped, now.dropped, self.reported.dropped);
            add(&totals.slipped, now.slipped, self.reported.slipped);
            add(&totals.log_only, now.log_only, self.reported.log_only);
            self.reported = now;
        }
    }
}

const RCODE_NOERROR: u8 = 0;
const RCODE_NXDOMAIN: u8 = 3;

/// The kind of response, and the name its bucket is keyed by. NXDOMAIN
/// and referrals are keyed by the owner of the first authority record
/// (the zone's SOA, the delegation's NS), which the engine writes as a
/// pointer into the question name; any other form keys them by the class
/// alone. None: not a response (shorter than a header).
fn classify<'q>(response: &[u8], q: &'q Query, plain: bool) -> Option<Response<'q>> {
    let header = response.get(..HEADER_LEN)?;
    let rcode = header[3] & 0xF;
    if !plain || (rcode != RCODE_NOERROR && rcode != RCODE_NXDOMAIN) {
        return Some(Response::Error);
    }
    let count = |at: usize| u16::from_be_bytes([header[at], header[at + 1]]);
    let (answers, authority) = (count(6), count(8));
    let aa = u16::from_be_bytes([header[2], header[3]]) & flags::AA != 0;
    let qname = q.qname_lower.as_wire();
    let authority_owner = || {
        if answers != 0 || authority == 0 {
            return &[][..];
        }
        let at = HEADER_LEN + q.question.len();
        owner_in_question(response.get(at..at + 2), qname)
    };
    Some(match rcode {
        RCODE_NXDOMAIN => Response::NxDomain {
            zone: authority_owner(),
        },
        _ if !aa && answers == 0 && authority > 0 => Response::Referral {
            delegation: authority_owner(),
        },
        _ => Response::Positive {
            qname,
            qtype: q.qtype.0,
        },
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
/// it, with TC set and no records: the client retries over TCP.
fn slip(response: &mut Vec<u8>, question: usize) {
    response.truncate(HEADER_LEN + question);
    response[2] |= (flags::TC >> 8) as u8;
    if question == 0 {
        response[4..6].fill(0);
    }
    response[6..HEADER_LEN].fill(0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_proto::message::parse_query;
    use heron_proto::writer::{Section, Writer};
    use heron_proto::{Class, RType, Rcode};

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
            classify(&nx, &q, true),
            Some(Response::NxDomain {
                zone: b"\x07example\x00"
            })
        );
        let referral = response(&msg, &q, 0, false, 0, &[0xC0, 12 + 2]);
        assert_eq!(
            classify(&referral, &q, true),
            Some(Response::Referral {
                delegation: b"\x03www\x07example\x00"
            })
        );
        let root_nx = response(&msg, &q, 3, true, 0, &[0]);
        assert_eq!(
            classify(&root_nx, &q, true),
            Some(Response::NxDomain { zone: b"\x00" })
        );
        let positive = response(&msg, &q, 0, true, 1, &[0xC0, 12]);
        let want = Response::Positive {
            qname: NAME,
            qtype: RType::A.0,
        };
        assert_eq!(classify(&positive, &q, true), Some(want));
        let nodata = response(&msg, &q, 0, true, 0, &[0xC0, 12]);
        assert_eq!(classify(&nodata, &q, true), Some(want));
        let refused = response(&msg, &q, Rcode::REFUSED.0, false, 0, &[0]);
        assert_eq!(classify(&refused, &q, true), Some(Response::Error));
        // A query that did not parse: an error whatever the response says.
        assert_eq!(classify(&positive, &q, false), Some(Response::Error));
        assert_eq!(classify(&positive[..11], &q, true), None);
        let _ = Class::IN;
    }

    #[test]
    fn owners_not_pointing_into_the_question_key_by_class_alone() {
        let (msg, q) = query(NAME);
        for owner in [&[0xC0, 200][..], &[0xC0, 2], &[7, b'e'], &[0xC0, 12 + 40]] {
            let nx = response(&msg, &q, 3, true, 0, owner);
            assert_eq!(
                classify(&nx, &q, true),
                Some(Response::NxDomain { zone: b"" }),
                "{owner:?}"
            );
        }
        // A CNAME chain ending in NXDOMAIN: the authority is after the answers.
        let chained = response(&msg, &q, 3, true, 1, &[0xC0, 12 + 6]);
        assert_eq!(
            classify(&chained, &q, true),
            Some(Response::NxDomain { zone: b"" })
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
}
