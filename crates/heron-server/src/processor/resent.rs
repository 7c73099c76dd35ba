//! The answers to signed UPDATEs, kept a short while so that the client's
//! own copy of one (nsupdate and knsupdate resend the same signed bytes
//! over UDP when the answer is lost) gets that answer again. The update is
//! not applied twice ([`super::replay`] sees the copy); without its
//! answer the client gave up although its change was made, where BIND and
//! Knot answered the resend (black-box finding). Only the address that
//! sent the request gets the answer, which is the one it was sent (its ID,
//! its TSIG over the request's MAC).
//!
//! Bounded: [`CAPACITY`] answers of at most [`MAX_ANSWER`] octets, the
//! oldest dropped first, each kept until its request's time window ends.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::Mutex;

/// Answers kept at most (at most 1 KiB each: 1 MiB in all).
pub const CAPACITY: usize = 1024;
/// The largest answer kept: an UPDATE's is its header, zone section, OPT
/// and TSIG, well below.
pub const MAX_ANSWER: usize = 1024;

/// A request's answer, by the request's fingerprint
/// ([`super::replay::ReplayCache::fingerprint`]).
struct Kept {
    request: u128,
    from: IpAddr,
    answer: Box<[u8]>,
    /// The second after which the request's copies get BADTIME anyway.
    until: u64,
}

#[derive(Default)]
pub struct UpdateAnswers {
    kept: Mutex<VecDeque<Kept>>,
}

impl UpdateAnswers {
    /// Keeps `answer` to the request `request` from `from` until `until`.
    pub fn keep(&self, request: u128, from: IpAddr, answer: &[u8], until: u64) {
        if answer.len() > MAX_ANSWER {
            return;
        }
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() >= CAPACITY {
            kept.pop_front();
        }
        kept.push_back(Kept {
            request,
            from,
            answer: answer.into(),
            until,
        });
    }

    /// The answer to request `request`, if it was answered, `from` sent
    /// it and its time has not run out at `now`.
    pub fn answer(&self, request: u128, from: IpAddr, now: u64) -> Option<Vec<u8>> {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        while kept.front().is_some_and(|k| k.until < now) {
            kept.pop_front();
        }
        (kept.iter().rev())
            .find(|k| k.request == request && k.from == from)
            .map(|k| k.answer.to_vec())
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.kept.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLIENT: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));
    const OTHER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(203, 0, 113, 9));

    #[test]
    fn an_answer_goes_again_to_its_sender_within_the_window() {
        let answers = UpdateAnswers::default();
        answers.keep(7, CLIENT, b"answer", 100);
        assert_eq!(
            answers.answer(7, CLIENT, 100).as_deref(),
            Some(&b"answer"[..])
        );
        assert_eq!(answers.answer(7, OTHER, 100), None, "another address");
        assert_eq!(answers.answer(8, CLIENT, 100), None, "another request");
        assert_eq!(answers.answer(7, CLIENT, 101), None, "past its window");
        assert!(answers.is_empty(), "dropped once past");
    }

    /// Whatever is asked to be kept, at most CAPACITY answers of at most
    /// MAX_ANSWER octets are: the oldest go first.
    #[test]
    fn the_answers_kept_are_bounded() {
        let answers = UpdateAnswers::default();
        answers.keep(1, CLIENT, &vec![0; MAX_ANSWER + 1], 100);
        assert!(answers.is_empty(), "too large");
        for request in 0..CAPACITY as u128 + 10 {
            answers.keep(request, CLIENT, &[1; MAX_ANSWER], 100);
        }
        assert_eq!(answers.len(), CAPACITY);
        assert_eq!(answers.answer(9, CLIENT, 100), None, "the oldest went");
        assert!(answers.answer(CAPACITY as u128 + 9, CLIENT, 100).is_some());
    }
}
