//! NOTIFY out driven through time by hand: a fake clock, fake answers.

use std::time::{Duration, Instant};

use super::*;

const FIRST: Duration = Duration::from_secs(1);

fn target(port: u16) -> NotifyTarget {
    NotifyTarget {
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        key: None,
        source: None,
    }
}

fn soa(serial: u32) -> Soa {
    let mut rdata = b"\x02ns\x00\x01h\x00".to_vec();
    rdata.extend_from_slice(&serial.to_be_bytes());
    rdata.extend_from_slice(&[0; 16]);
    Arc::new((60, rdata))
}

fn serial_of(soa: &Soa) -> u32 {
    let at = soa.1.len() - 20;
    u32::from_be_bytes(soa.1[at..at + 4].try_into().unwrap())
}

/// The machine, a clock that moves only when told, and message IDs
/// counting up from 1.
struct Clock {
    out: NotifyOut,
    start: Instant,
    now: Instant,
}

impl Clock {
    fn new(limit: usize) -> Clock {
        let mut next = 0u16;
        let ids = Box::new(move || {
            next = next.wrapping_add(1);
            next
        });
        let start = Instant::now();
        Clock {
            out: NotifyOut::new(limit, FIRST, ids),
            start,
            now: start,
        }
    }

    fn notify(&mut self, zone: &str, serial: u32, targets: &[NotifyTarget]) -> Vec<NotifyAction> {
        let mut out = Vec::new();
        let origin = Name::parse(zone).unwrap();
        self.out
            .notify(self.now, &origin, &soa(serial), targets, &mut out);
        out
    }

    /// Moves the clock to `at` after the start and wakes the machine.
    fn at(&mut self, at: Duration) -> Vec<NotifyAction> {
        self.now = self.start + at;
        let mut out = Vec::new();
        self.out.wake(self.now, &mut out);
        out
    }

    /// The target of `send` answers it with `rcode`.
    fn answer(&mut self, send: &NotifyAction, rcode: Rcode) -> Vec<NotifyAction> {
        let (addr, id) = sent(send);
        let mut out = Vec::new();
        if let Some(pending) = self.out.answer_for(addr, id) {
            self.out.answered(self.now, pending, rcode, &mut out);
        }
        out
    }

    fn since_start(&self, at: Instant) -> Duration {
        at - self.start
    }
}

/// The target and message ID of a send.
fn sent(action: &NotifyAction) -> (SocketAddr, u16) {
    match action {
        NotifyAction::Send { target, id, .. } => (target.addr, *id),
        other => panic!("not a send: {other:?}"),
    }
}

fn sends(actions: &[NotifyAction]) -> Vec<&NotifyAction> {
    actions
        .iter()
        .filter(|a| matches!(a, NotifyAction::Send { .. }))
        .collect()
}

fn outcomes(actions: &[NotifyAction]) -> Vec<(SocketAddr, Outcome)> {
    actions
        .iter()
        .filter_map(|a| match a {
            NotifyAction::Finished {
                target, outcome, ..
            } => Some((*target, outcome.clone())),
            NotifyAction::Send { .. } => None,
        })
        .collect()
}

#[test]
fn an_unanswered_notify_is_sent_again_with_doubling_timeouts_then_given_up() {
    let mut c = Clock::new(64);
    let first = c.notify("a.test", 7, &[target(1)]);
    assert_eq!(sends(&first).len(), 1);
    let mut sent_at = vec![Duration::ZERO];
    while let Some(at) = c.out.next_wakeup() {
        let when = c.since_start(at);
        let actions = c.at(when);
        if sends(&actions).is_empty() {
            assert_eq!(outcomes(&actions), [(target(1).addr, Outcome::NoAnswer)]);
            sent_at.push(when);
            break;
        }
        sent_at.push(when);
    }
    // Five sends, 1 s, 2 s, 4 s, 8 s apart, given up 16 s after the last.
    let secs = |s: u64| Duration::from_secs(s);
    assert_eq!(
        sent_at,
        [secs(0), secs(1), secs(3), secs(7), secs(15), secs(31)]
    );
    assert_eq!(TRIES, 5);
    assert_eq!(c.out.pending(), 0);
    assert_eq!(c.out.outstanding(), 0);
    assert_eq!(c.out.next_wakeup(), None);
}

#[test]
fn nothing_is_sent_again_before_its_timeout() {
    let mut c = Clock::new(64);
    c.notify("a.test", 7, &[target(1)]);
    assert!(c.at(Duration::from_millis(999)).is_empty());
    assert_eq!(sends(&c.at(FIRST)).len(), 1);
}

#[test]
fn an_answer_stops_the_retries() {
    let mut c = Clock::new(64);
    let first = c.notify("a.test", 7, &[target(1)]);
    let again = c.at(FIRST);
    // An answer to the first message no longer counts: each send has its ID.
    assert!(c.answer(&first[0], Rcode::NOERROR).is_empty());
    let done = c.answer(&again[0], Rcode::NOERROR);
    assert_eq!(
        outcomes(&done),
        [(target(1).addr, Outcome::Answered(Rcode::NOERROR))]
    );
    assert_eq!(c.out.next_wakeup(), None);
    assert!(c.at(Duration::from_secs(100)).is_empty());
}

#[test]
fn an_error_answer_ends_the_notify_too() {
    let mut c = Clock::new(64);
    let first = c.notify("a.test", 7, &[target(1)]);
    let done = c.answer(&first[0], Rcode::REFUSED);
    assert_eq!(
        outcomes(&done),
        [(target(1).addr, Outcome::Answered(Rcode::REFUSED))]
    );
    assert_eq!(c.out.pending(), 0);
}

#[test]
fn an_answer_from_another_address_is_not_an_acknowledgement() {
    let mut c = Clock::new(64);
    let first = c.notify("a.test", 7, &[target(1)]);
    let (_, id) = sent(&first[0]);
    assert_eq!(c.out.answer_for(target(2).addr, id), None);
    assert!(c.out.answer_for(target(1).addr, id).is_some());
}

#[test]
fn a_new_serial_supersedes_the_pending_retries() {
    let mut c = Clock::new(64);
    let first = c.notify("a.test", 7, &[target(1)]);
    c.at(FIRST);
    c.at(Duration::from_secs(3));
    // Three sends of serial 7 so far; serial 8 goes out at once, its own
    // count of tries starting over.
    c.now = c.start + Duration::from_secs(4);
    let newer = c.notify("a.test", 8, &[target(1)]);
    let [NotifyAction::Send { soa, .. }] = newer.as_slice() else {
        panic!("one send: {newer:?}");
    };
    assert_eq!(serial_of(soa), 8);
    assert_eq!(c.out.pending(), 1, "one NOTIFY per zone and target");
    assert!(c.answer(&first[0], Rcode::NOERROR).is_empty(), "old ID");
    assert_eq!(
        c.since_start(c.out.next_wakeup().unwrap()),
        Duration::from_secs(5),
        "the first timeout again"
    );
    let mut serials = Vec::new();
    while let Some(at) = c.out.next_wakeup() {
        let actions = c.at(c.since_start(at));
        for action in &actions {
            if let NotifyAction::Send { soa, .. } = action {
                serials.push(serial_of(soa));
            }
        }
    }
    assert_eq!(serials, [8, 8, 8, 8], "four more tries of serial 8 only");
}

#[test]
fn a_new_serial_for_a_notify_still_waiting_replaces_what_it_will_send() {
    let mut c = Clock::new(1);
    let busy = c.notify("a.test", 1, &[target(1)]);
    assert!(sends(&c.notify("b.test", 1, &[target(2)])).is_empty());
    assert!(sends(&c.notify("b.test", 2, &[target(2)])).is_empty());
    let next = c.answer(&busy[0], Rcode::NOERROR);
    let [_, NotifyAction::Send { soa, .. }] = next.as_slice() else {
        panic!("the first finished, then b.test sent: {next:?}");
    };
    assert_eq!(serial_of(soa), 2);
}

#[test]
fn each_zone_and_target_has_its_own_notify() {
    let mut c = Clock::new(64);
    let a = c.notify("a.test", 1, &[target(1), target(2)]);
    let b = c.notify("b.test", 1, &[target(1)]);
    assert_eq!((sends(&a).len(), sends(&b).len()), (2, 1));
    assert_eq!(c.out.pending(), 3);
    // Names differ only in case: the same zone.
    assert!(sends(&c.notify("A.TEST", 2, &[target(1)])).len() == 1);
    assert_eq!(c.out.pending(), 3);
}

#[test]
fn a_zone_removed_mid_retry_stops_its_notifies_only() {
    let mut c = Clock::new(64);
    c.notify("a.test", 1, &[target(1), target(2)]);
    c.notify("b.test", 1, &[target(1)]);
    c.at(FIRST);
    let mut out = Vec::new();
    c.out
        .zone_removed(c.now, &Name::parse("a.test").unwrap(), &mut out);
    let mut gone = outcomes(&out);
    gone.sort_by_key(|(addr, _)| *addr);
    assert_eq!(
        gone,
        [
            (target(1).addr, Outcome::ZoneRemoved),
            (target(2).addr, Outcome::ZoneRemoved)
        ]
    );
    assert_eq!(c.out.pending(), 1);
    // b.test alone is sent again.
    let again = c.at(Duration::from_secs(3));
    let sent_for: Vec<_> = again
        .iter()
        .filter_map(|a| match a {
            NotifyAction::Send { origin, .. } => Some(origin.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(sent_for, ["b.test."]);
}

#[test]
fn a_zone_removed_while_its_notify_waits_is_never_sent() {
    let mut c = Clock::new(1);
    let busy = c.notify("a.test", 1, &[target(1)]);
    c.notify("b.test", 1, &[target(2)]);
    let mut out = Vec::new();
    c.out
        .zone_removed(c.now, &Name::parse("b.test").unwrap(), &mut out);
    assert_eq!(outcomes(&out), [(target(2).addr, Outcome::ZoneRemoved)]);
    let after = c.answer(&busy[0], Rcode::NOERROR);
    assert!(sends(&after).is_empty(), "{after:?}");
    assert_eq!(c.out.pending(), 0);
}

#[test]
fn a_failed_send_ends_the_notify_and_frees_its_place() {
    let mut c = Clock::new(1);
    let first = c.notify("a.test", 1, &[target(1)]);
    c.notify("b.test", 1, &[target(2)]);
    let NotifyAction::Send { pending, .. } = first[0] else {
        panic!()
    };
    let mut out = Vec::new();
    c.out.failed(c.now, pending, "no TSIG key".into(), &mut out);
    assert_eq!(outcomes(&out)[0].1, Outcome::Failed("no TSIG key".into()));
    assert_eq!(sends(&out).len(), 1, "b.test goes out in its place");
}

#[test]
fn outstanding_notifies_stop_at_the_limit() {
    const LIMIT: usize = 64;
    let targets: Vec<NotifyTarget> = (1..=LIMIT as u16).map(target).collect();
    // At the limit: every one goes out at once.
    let mut c = Clock::new(LIMIT);
    assert_eq!(sends(&c.notify("a.test", 1, &targets)).len(), LIMIT);
    assert_eq!(c.out.outstanding(), LIMIT);
    // Past it: the one more waits, through the others' retransmissions,
    // until one of them is over.
    let mut c = Clock::new(LIMIT);
    let mut more = targets.clone();
    more.push(target(1000));
    let first = c.notify("a.test", 1, &more);
    assert_eq!(sends(&first).len(), LIMIT);
    assert_eq!((c.out.outstanding(), c.out.pending()), (LIMIT, LIMIT + 1));
    let resent = c.at(FIRST);
    assert_eq!(sends(&resent).len(), LIMIT);
    assert!(resent.iter().all(|a| sent(a).0 != target(1000).addr));
    let done = c.answer(&resent[0], Rcode::NOERROR);
    let sent_now = sends(&done);
    assert_eq!(sent_now.len(), 1);
    assert_eq!(sent(sent_now[0]).0, target(1000).addr);
    assert_eq!(c.out.outstanding(), LIMIT);
}
