//! The receive side against the primary side's own messages, and the
//! zone file a received zone is kept in.

use std::sync::Arc;

use heron_proto::message::HEADER_LEN;
use heron_proto::{Class, Name, RType, Rcode};
use heron_zone::diff::{ZoneDiff, diff};
use heron_zone::{Zone, load_zone_file, load_zone_str};
use proptest::prelude::*;

use super::receive::{Exceeded, Outcome, Receiver, Request, TransferLimits, XfrError};
use super::store::write_zone_file;
use crate::primary::transfer::{
    MAX_MESSAGE, Packer, XfrRecord, axfr_records, ixfr_records, soa_record,
};

const HEAD: &str = "$ORIGIN x.test.\n$TTL 300\n";

/// Many types: quotes and escapes, a wildcard, a delegation with glue,
/// signatures, an RFC 3597 unknown type, a name with capitals.
const RICH: &str = r#"
@ NS ns1
@ NS ns2.other.test.
@ MX 10 mail
@ CAA 0 issue "ca.example.net; account=1"
@ TXT "v=spf1 -all"
ns1 A 192.0.2.1
ns1 AAAA 2001:db8::1
mail A 192.0.2.2
www A 192.0.2.3
www A 192.0.2.33
www 600 AAAA 2001:db8::3
www RRSIG A 8 3 300 20300101000000 20200101000000 12345 x.test. AAAA
www RRSIG AAAA 8 3 600 20300101000000 20200101000000 12345 x.test. BBBB
txt TXT "hello world" "with \"quotes\"" "back\\slash" "semi;colon" "\255\000bin"
txt TXT ""
_sip._tcp SRV 10 20 5060 sip
sip A 192.0.2.4
*.wild A 192.0.2.5
*.wild TXT "wildcard"
sub NS ns.sub
sub NS ns.elsewhere.test.
sub DS 12345 8 2 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
ns.sub A 192.0.2.6
ns.sub AAAA 2001:db8::6
unk TYPE65280 \# 4 deadbeef
empty TYPE65281 \# 0
Caps.Upper A 192.0.2.7
alias CNAME www
sp\032ace A 192.0.2.8
"#;

fn origin() -> Name {
    Name::parse("x.test").unwrap()
}

fn zone(serial: u32, body: &str) -> Zone {
    let text = format!("{HEAD}@ SOA ns1 hostmaster {serial} 3600 900 604800 300\n{body}");
    load_zone_str(&text, "x.zone", &origin())
        .unwrap_or_else(|p| panic!("{p:?}"))
        .zone
}

/// A zone with only the apex NS and its address besides `body`.
fn small(serial: u32, body: &str) -> Zone {
    zone(serial, &format!("@ NS ns1\nns1 A 192.0.2.1\n{body}"))
}

fn rich(serial: u32) -> Zone {
    zone(serial, RICH)
}

fn hosts(n: usize) -> String {
    (0..n)
        .map(|i| format!("host{i} A 192.0.{}.{}\n", i / 256, i % 256))
        .collect()
}

fn question(qtype: RType) -> Vec<u8> {
    let mut q = origin().as_wire().to_vec();
    q.extend_from_slice(&qtype.0.to_be_bytes());
    q.extend_from_slice(&Class::IN.0.to_be_bytes());
    q
}

/// The messages the primary sends, at most `size` octets each.
fn pack<'r>(
    records: impl Iterator<Item = XfrRecord<'r>>,
    qtype: RType,
    class: Class,
    size: usize,
) -> Vec<Vec<u8>> {
    let mut packer = Packer::new(9, &question(qtype), class, MAX_MESSAGE - size);
    let mut records = records.peekable();
    let mut messages = Vec::new();
    loop {
        let mut out = Vec::new();
        if !packer.next_message(&mut records, &mut out).unwrap() {
            return messages;
        }
        messages.push(out);
    }
}

fn axfr_messages(z: &Zone, size: usize) -> Vec<Vec<u8>> {
    pack(axfr_records(z), RType::AXFR, Class::IN, size)
}

fn ixfr_messages(chain: &[Arc<ZoneDiff>], newest: &Zone, size: usize) -> Vec<Vec<u8>> {
    pack(
        ixfr_records(chain, soa_record(newest)),
        RType::IXFR,
        Class::IN,
        size,
    )
}

fn ixfr(have: &Zone) -> Request {
    Request::Ixfr {
        have: Arc::new(clone_zone(have)),
    }
}

/// Zones are not Clone; rebuild one through its own AXFR.
fn clone_zone(z: &Zone) -> Zone {
    match receive(Request::Axfr, &axfr_messages(z, MAX_MESSAGE)) {
        Ok(Outcome::Full(copy)) => copy,
        other => panic!("{other:?}"),
    }
}

/// Feeds every message, checking that only the last completes the
/// transfer, and finishes.
fn receive(request: Request, messages: &[Vec<u8>]) -> Result<Outcome, XfrError> {
    let mut r = Receiver::new(origin(), request).with_primary("192.0.2.53:53");
    for (i, m) in messages.iter().enumerate() {
        let done = r.feed(m)?;
        assert_eq!(
            done,
            i + 1 == messages.len(),
            "message {i} of {}",
            messages.len()
        );
    }
    r.finish()
}

/// Feeds every message, stopping at the first error, and finishes.
fn receive_loose(request: Request, messages: &[Vec<u8>]) -> Result<Outcome, XfrError> {
    let mut r = Receiver::new(origin(), request);
    for m in messages {
        r.feed(m)?;
    }
    r.finish()
}

fn assert_same(got: &Zone, want: &Zone) {
    let d = diff(got, want);
    assert!(d.is_empty(), "{d:?}");
    assert_eq!(got.record_count(), want.record_count());
}

fn malformed(result: Result<Outcome, XfrError>, says: &str) {
    match result {
        Err(XfrError::Malformed(msg)) => assert!(msg.contains(says), "{msg:?} lacks {says:?}"),
        other => panic!("expected Malformed({says:?}), got {other:?}"),
    }
}

#[test]
fn axfr_of_a_rich_zone() {
    let src = rich(7);
    let messages = axfr_messages(&src, MAX_MESSAGE);
    assert_eq!(messages.len(), 1);
    match receive(Request::Axfr, &messages).unwrap() {
        Outcome::Full(z) => {
            assert_same(&z, &src);
            assert_eq!(z.serial(), 7);
            // Owner case travels with the records.
            assert!(
                z.nodes()
                    .any(|n| n.owner().to_string() == "Caps.Upper.x.test.")
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn axfr_spanning_many_messages() {
    let src = zone(3, &format!("{RICH}{}", hosts(3000)));
    let messages = axfr_messages(&src, 4096);
    assert!(messages.len() > 10, "{} messages", messages.len());
    match receive(Request::Axfr, &messages).unwrap() {
        Outcome::Full(z) => assert_same(&z, &src),
        other => panic!("{other:?}"),
    }
}

/// Three versions: records deleted, added, a TTL changed, an RRset
/// re-signed, a delegation removed, a name whose case changes.
fn versions() -> (Zone, Zone, Zone) {
    let v1 = rich(1);
    let body2 = RICH
        .replace("www A 192.0.2.33\n", "www A 192.0.2.34\n")
        .replace(
            "20200101000000 12345 x.test. AAAA",
            "20210101000000 12345 x.test. CCCC",
        )
        .replace("ns1 AAAA 2001:db8::1\n", "ns1 60 AAAA 2001:db8::1\n")
        + "new TXT \"added in 2\"\n";
    let v2 = zone(2, &body2);
    let body3 = body2
        .replace("sub NS ns.sub\nsub NS ns.elsewhere.test.\n", "")
        .replace(
            "sub DS 12345 8 2 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n",
            "",
        )
        .replace("ns.sub A 192.0.2.6\nns.sub AAAA 2001:db8::6\n", "")
        .replace("new TXT \"added in 2\"\n", "")
        + &hosts(40);
    let v3 = zone(3, &body3);
    (v1, v2, v3)
}

#[test]
fn ixfr_of_two_chained_steps() {
    let (v1, v2, v3) = versions();
    let chain = vec![Arc::new(diff(&v1, &v2)), Arc::new(diff(&v2, &v3))];
    assert!(!chain[0].deleted.is_empty() && !chain[1].deleted.is_empty());
    // Small messages, so that steps straddle message boundaries.
    let messages = ixfr_messages(&chain, &v3, 512);
    assert!(messages.len() > 3, "{} messages", messages.len());
    match receive(ixfr(&v1), &messages).unwrap() {
        Outcome::Incremental {
            zone,
            diffs,
            already_present,
        } => {
            assert_same(&zone, &v3);
            assert_eq!(already_present, 0);
            let want: Vec<ZoneDiff> = chain.iter().map(|d| (**d).clone()).collect();
            assert_eq!(
                diffs, want,
                "the journal gets the steps as the primary has them"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_ixfr_step_copies_only_what_it_touches() {
    let hosts: String = (0..20_000)
        .map(|i| format!("h{i} A 10.0.{}.{}\n", (i >> 8) & 255, i & 255))
        .collect();
    let body = format!("@ NS ns1\nns1 A 192.0.2.1\n{hosts}");
    let v1 = zone(1, &body);
    let v2 = zone(2, &body.replace("h7 A 10.0.0.7\n", "h7 A 192.0.2.7\n"));
    let have = Arc::new(clone_zone(&v1));
    let messages = ixfr_messages(&[Arc::new(diff(&v1, &v2))], &v2, MAX_MESSAGE);
    match receive(Request::Ixfr { have: have.clone() }, &messages).unwrap() {
        Outcome::Incremental { zone, .. } => {
            assert_same(&zone, &v2);
            // One name and the apex: two of the zone's 32 shards copied.
            let copied = zone.unshared_bytes(&have);
            assert!(copied * 8 < zone.heap_bytes(), "{copied} bytes copied");
        }
        other => panic!("{other:?}"),
    }
}

/// Feeds `messages` under `limits` until an error; how many messages were
/// taken and how the transfer ended.
fn receive_limited(
    request: Request,
    messages: &[Vec<u8>],
    limits: TransferLimits,
) -> (usize, Result<Outcome, XfrError>) {
    let mut r = Receiver::new(origin(), request).with_limits(limits);
    for (taken, m) in messages.iter().enumerate() {
        if let Err(e) = r.feed(m) {
            return (taken, Err(e));
        }
    }
    (messages.len(), r.finish())
}

fn limits(max_records: u64, max_bytes: u64) -> TransferLimits {
    TransferLimits {
        max_records,
        max_bytes,
        ..TransferLimits::default()
    }
}

#[test]
fn an_axfr_is_taken_at_its_limits_and_stopped_past_them() {
    let z = small(1, &hosts(300));
    let messages = axfr_messages(&z, 1024);
    // SOA, NS, A, the hosts, the final SOA.
    let records = 300 + 4;
    let bytes: u64 = messages.iter().map(|m| m.len() as u64).sum();
    let (_, at) = receive_limited(Request::Axfr, &messages, limits(records, bytes));
    assert!(matches!(at, Ok(Outcome::Full(_))), "{at:?}");
    for (past, exceeded) in [
        (limits(records - 1, bytes), Exceeded::Records(records - 1)),
        (limits(records, bytes - 1), Exceeded::Bytes(bytes - 1)),
    ] {
        let (_, result) = receive_limited(Request::Axfr, &messages, past);
        match result {
            Err(XfrError::Limit(e)) => assert_eq!(e, exceeded),
            other => panic!("{other:?}"),
        }
    }
}

/// An IXFR that adds far more than the limit stops at the message that
/// crosses it: what it holds is bounded by the limit, not by the stream.
#[test]
fn a_huge_ixfr_is_stopped_at_the_limit() {
    let v1 = small(1, "");
    let v2 = small(2, &hosts(20_000));
    let messages = ixfr_messages(&[Arc::new(diff(&v1, &v2))], &v2, 1024);
    assert!(messages.len() > 100, "{} messages", messages.len());
    let (taken, result) = receive_limited(ixfr(&v1), &messages, limits(1_000, u64::MAX));
    match result {
        Err(XfrError::Limit(Exceeded::Records(1_000))) => {}
        other => panic!("{other:?}"),
    }
    assert!(
        taken * 10 < messages.len(),
        "stopped after {taken} messages"
    );
    let error = XfrError::Limit(Exceeded::Records(1_000)).to_string();
    assert!(error.contains("max-transfer-records"), "{error}");
    // The whole chain counts: newest SOA, old SOA, new SOA, 20,000 added,
    // newest SOA.
    let all = 20_000 + 4;
    let (_, at) = receive_limited(ixfr(&v1), &messages, limits(all, u64::MAX));
    assert!(matches!(at, Ok(Outcome::Incremental { .. })), "{at:?}");
    let (_, past) = receive_limited(ixfr(&v1), &messages, limits(all - 1, u64::MAX));
    assert!(matches!(past, Err(XfrError::Limit(_))), "{past:?}");
}

#[test]
fn ixfr_answered_in_axfr_form() {
    let (v1, _, v3) = versions();
    let messages = pack(axfr_records(&v3), RType::IXFR, Class::IN, 1024);
    match receive(ixfr(&v1), &messages).unwrap() {
        Outcome::Full(z) => assert_same(&z, &v3),
        other => panic!("{other:?}"),
    }
}

/// The messages of a primary that sends one record per message (BIND's
/// `transfer-format one-answer`).
fn one_per_message<'r>(records: impl Iterator<Item = XfrRecord<'r>>, qtype: RType) -> Vec<Vec<u8>> {
    records
        .flat_map(|r| pack(std::iter::once(r), qtype, Class::IN, 512))
        .collect()
}

#[test]
fn a_single_soa_not_newer_than_ours_means_up_to_date() {
    let (v1, v2, _) = versions();
    for (ours, theirs) in [(&v1, &v1), (&v2, &v1)] {
        let messages = pack(
            std::iter::once(soa_record(theirs)),
            RType::IXFR,
            Class::IN,
            512,
        );
        assert!(matches!(
            receive(ixfr(ours), &messages),
            Ok(Outcome::UpToDate)
        ));
    }
    // An AXFR that is only an SOA is not complete.
    let messages = pack(
        std::iter::once(soa_record(&v2)),
        RType::AXFR,
        Class::IN,
        512,
    );
    let mut r = Receiver::new(origin(), Request::Axfr);
    assert!(!r.feed(&messages[0]).unwrap());
    assert!(matches!(r.finish(), Err(XfrError::NotComplete)));
}

/// A first message of the newest SOA alone, newer than ours, is the start
/// of a transfer, not the end: the rest follows in the next messages, and
/// stopping there leaves the transfer incomplete.
#[test]
fn a_first_message_of_a_newer_soa_alone_is_followed_by_the_rest() {
    let (v1, v2, v3) = versions();
    let chain = vec![Arc::new(diff(&v1, &v2)), Arc::new(diff(&v2, &v3))];
    let mut records = ixfr_records(&chain, soa_record(&v3));
    let newest = pack(records.by_ref().take(1), RType::IXFR, Class::IN, 512);
    let rest = pack(records, RType::IXFR, Class::IN, 4096);
    let messages = [newest.clone(), rest].concat();
    match receive(ixfr(&v1), &messages).unwrap() {
        Outcome::Incremental { zone, .. } => assert_same(&zone, &v3),
        other => panic!("{other:?}"),
    }
    let mut r = Receiver::new(origin(), ixfr(&v1));
    assert!(!r.feed(&newest[0]).unwrap(), "not complete after the SOA");
    assert!(matches!(r.finish(), Err(XfrError::NotComplete)));
}

/// BIND's `transfer-format one-answer`: every record in a message of its
/// own, for an IXFR of two steps, an IXFR answered in AXFR form (its
/// second message not an SOA) and an AXFR.
#[test]
fn transfers_of_one_record_per_message() {
    let (v1, v2, v3) = versions();
    let chain = vec![Arc::new(diff(&v1, &v2)), Arc::new(diff(&v2, &v3))];
    let messages = one_per_message(ixfr_records(&chain, soa_record(&v3)), RType::IXFR);
    assert!(messages.len() > 40, "{} messages", messages.len());
    match receive(ixfr(&v1), &messages).unwrap() {
        Outcome::Incremental { zone, diffs, .. } => {
            assert_same(&zone, &v3);
            assert_eq!(diffs.len(), 2);
        }
        other => panic!("{other:?}"),
    }
    let messages = one_per_message(axfr_records(&v3), RType::IXFR);
    match receive(ixfr(&v1), &messages).unwrap() {
        Outcome::Full(z) => assert_same(&z, &v3),
        other => panic!("{other:?}"),
    }
    let messages = one_per_message(axfr_records(&v3), RType::AXFR);
    match receive(Request::Axfr, &messages).unwrap() {
        Outcome::Full(z) => assert_same(&z, &v3),
        other => panic!("{other:?}"),
    }
}

/// Records an IXFR step adds that our version holds already change
/// nothing, and are counted for the log.
#[test]
fn an_ixfr_adding_records_we_hold_counts_them() {
    let (v1, v2, _) = versions();
    let mut step = diff(&v1, &v2);
    // In RICH, so in both versions.
    step.added.push(heron_zone::diff::DiffRecord {
        owner: Name::parse("mail.x.test").unwrap(),
        rtype: RType::A,
        ttl: 300,
        rdata: vec![192, 0, 2, 2],
    });
    let messages = ixfr_messages(&[Arc::new(step)], &v2, MAX_MESSAGE);
    match receive(ixfr(&v1), &messages).unwrap() {
        Outcome::Incremental {
            zone,
            already_present,
            ..
        } => {
            assert_same(&zone, &v2);
            assert_eq!(already_present, 1);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn missing_final_soa_is_not_complete() {
    let src = small(3, &hosts(500));
    let records: Vec<XfrRecord> = axfr_records(&src).collect();
    let messages = pack(
        records[..records.len() - 1].iter().cloned(),
        RType::AXFR,
        Class::IN,
        1024,
    );
    let mut r = Receiver::new(origin(), Request::Axfr);
    for m in &messages {
        assert!(!r.feed(m).unwrap());
    }
    assert!(matches!(r.finish(), Err(XfrError::NotComplete)));
    // Likewise an IXFR cut short.
    let (v1, v2, v3) = versions();
    let chain = vec![Arc::new(diff(&v1, &v2)), Arc::new(diff(&v2, &v3))];
    let messages = ixfr_messages(&chain, &v3, 512);
    let cut = &messages[..messages.len() - 1];
    assert!(matches!(
        receive_loose(ixfr(&v1), cut),
        Err(XfrError::NotComplete)
    ));
}

#[test]
fn ixfr_steps_must_chain_from_our_serial() {
    let (v1, v2, v3) = versions();
    let d12 = Arc::new(diff(&v1, &v2));
    let d23 = Arc::new(diff(&v2, &v3));
    // Starts from 2, we have 1.
    let messages = ixfr_messages(std::slice::from_ref(&d23), &v3, MAX_MESSAGE);
    malformed(
        receive_loose(ixfr(&v1), &messages),
        "starts from serial 2, but ours is 1",
    );
    // A gap: 1→2, then 1→3.
    let d13 = Arc::new(diff(&v1, &v3));
    let messages = ixfr_messages(&[d12.clone(), d13], &v3, MAX_MESSAGE);
    malformed(
        receive_loose(ixfr(&v1), &messages),
        "step from serial 1, but the previous step ended at 2",
    );
    // A final SOA other than the first.
    let messages = ixfr_messages(&[d12, d23], &v2, MAX_MESSAGE);
    assert!(receive_loose(ixfr(&v1), &messages).is_err());
}

#[test]
fn deleting_a_record_we_do_not_hold_fails() {
    let (v1, v2, _) = versions();
    let d12 = Arc::new(diff(&v1, &v2));
    // Our serial 1 lacks the record the step deletes.
    let ours = zone(1, &RICH.replace("www A 192.0.2.33\n", ""));
    let messages = ixfr_messages(&[d12], &v2, MAX_MESSAGE);
    match receive_loose(ixfr(&ours), &messages) {
        Err(e @ XfrError::Zone(_)) => assert!(
            e.to_string()
                .contains("deletes www.x.test. 300 A 192.0.2.33, which the zone does not hold"),
            "{e}"
        ),
        other => panic!("expected the step refused, got {other:?}"),
    }
}

/// A record of the transfer, owned.
struct Owned(Name, RType, u32, Vec<u8>);

impl Owned {
    fn new(owner: &str, rtype: RType, rdata: &[u8]) -> Owned {
        Owned(Name::parse(owner).unwrap(), rtype, 300, rdata.to_vec())
    }

    fn rec(&self) -> XfrRecord<'_> {
        XfrRecord {
            owner: self.0.as_wire(),
            rtype: self.1,
            ttl: self.2,
            rdata: std::borrow::Cow::Borrowed(&self.3),
        }
    }
}

/// Records outside the zone are left out, as BIND and Knot leave them
/// out, in an AXFR and in an IXFR step; a record not of class IN fails
/// the transfer.
#[test]
fn records_outside_the_zone_are_left_out_and_not_in_class_in_refused() {
    let src = small(3, "");
    let evil = Owned::new("evil.example", RType::A, &[192, 0, 2, 66]);
    let parent = Owned::new("test", RType::NS, Name::parse("ns.test").unwrap().as_wire());
    let mut records: Vec<XfrRecord> = axfr_records(&src).collect();
    records.insert(1, evil.rec());
    records.insert(2, parent.rec());
    let messages = pack(records.into_iter(), RType::AXFR, Class::IN, 512);
    match receive(Request::Axfr, &messages).unwrap() {
        Outcome::Full(zone) => assert_same(&zone, &src),
        other => panic!("{other:?}"),
    }
    let (v1, v2, _) = versions();
    let mut step = diff(&v1, &v2);
    step.added.push(heron_zone::diff::DiffRecord {
        owner: Name::parse("evil.example").unwrap(),
        rtype: RType::A,
        ttl: 300,
        rdata: vec![192, 0, 2, 66],
    });
    let messages = ixfr_messages(&[Arc::new(step)], &v2, MAX_MESSAGE);
    match receive(ixfr(&v1), &messages).unwrap() {
        Outcome::Incremental { zone, diffs, .. } => {
            assert_same(&zone, &v2);
            assert_eq!(
                diffs,
                vec![diff(&v1, &v2)],
                "the journal holds the zone's records"
            );
        }
        other => panic!("{other:?}"),
    }
    let messages = pack(axfr_records(&src), RType::AXFR, Class::CH, 512);
    malformed(
        receive_loose(Request::Axfr, &messages),
        "of class CH, not IN",
    );
    // The question names another zone.
    let mut messages = axfr_messages(&src, 512);
    let q = HEADER_LEN + 1;
    messages[0][q] = b'y';
    malformed(
        receive_loose(Request::Axfr, &messages),
        "does not match x.test. IN AXFR",
    );
}

#[test]
fn error_codes_and_truncation() {
    let src = small(3, "");
    let mut messages = axfr_messages(&src, 512);
    messages[0][3] |= 5; // REFUSED
    assert!(matches!(
        receive_loose(Request::Axfr, &messages),
        Err(XfrError::Rcode(Rcode::REFUSED))
    ));
    let mut r = Receiver::new(origin(), Request::Axfr);
    assert!(matches!(
        r.feed(&messages[0]),
        Err(XfrError::Rcode(Rcode::REFUSED))
    ));
    // The receiver stays failed.
    assert!(matches!(
        r.feed(&axfr_messages(&src, 512)[0]),
        Err(XfrError::Rcode(_))
    ));
    let mut messages = axfr_messages(&src, 512);
    messages[0][2] |= 0x02; // TC
    assert!(matches!(
        receive_loose(Request::Axfr, &messages),
        Err(XfrError::Truncated)
    ));
    let mut messages = axfr_messages(&src, 512);
    messages[0][2] &= !0x80; // QR clear
    malformed(receive_loose(Request::Axfr, &messages), "QR clear");
}

#[test]
fn nothing_may_follow_the_final_soa() {
    let src = small(3, "");
    let extra = Owned::new("late.x.test", RType::A, &[192, 0, 2, 99]);
    let records = axfr_records(&src).chain(std::iter::once(extra.rec()));
    let messages = pack(records, RType::AXFR, Class::IN, MAX_MESSAGE);
    malformed(
        receive_loose(Request::Axfr, &messages),
        "late.x.test. A after the final SOA",
    );
    // Nor another message.
    let mut messages = axfr_messages(&src, MAX_MESSAGE);
    messages.push(messages[0].clone());
    malformed(
        receive_loose(Request::Axfr, &messages),
        "a message after the end of the transfer",
    );
    // An SOA of another serial inside an AXFR.
    let other = small(4, "");
    let records = [soa_record(&src), soa_record(&other), soa_record(&src)];
    let messages = pack(records.into_iter(), RType::AXFR, Class::IN, MAX_MESSAGE);
    malformed(
        receive_loose(Request::Axfr, &messages),
        "an SOA with serial 4 inside an AXFR of serial 3",
    );
}

#[test]
fn ttls_with_the_top_bit_set_are_read_as_zero() {
    // Found by the xfr_receive fuzz target: the zone was received, but its
    // zone file did not load (TTL over 2^31-1).
    let src = small(3, "");
    let big = Owned(
        Name::parse("big.x.test").unwrap(),
        RType::A,
        0xF9FF_002C,
        vec![192, 0, 2, 7],
    );
    let records = [soa_record(&src), big.rec()]
        .into_iter()
        .chain(axfr_records(&src).skip(1));
    let messages = pack(records, RType::AXFR, Class::IN, MAX_MESSAGE);
    let Outcome::Full(got) = receive(Request::Axfr, &messages).unwrap() else {
        panic!("not a full zone");
    };
    let node = got
        .nodes()
        .find(|n| n.owner().to_string() == "big.x.test.")
        .unwrap();
    assert_eq!(node.rrset(RType::A).unwrap().ttl(), 0);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zone");
    write_zone_file(&got, &path).unwrap();
    assert_same(&load_zone_file(&path, &origin()).unwrap().zone, &got);
}

#[test]
fn the_first_record_must_be_the_soa() {
    let src = small(3, "");
    let records: Vec<XfrRecord> = axfr_records(&src).skip(1).collect();
    let messages = pack(records.into_iter(), RType::AXFR, Class::IN, MAX_MESSAGE);
    malformed(
        receive_loose(Request::Axfr, &messages),
        "not the SOA of x.test.",
    );
}

#[test]
fn a_zone_that_does_not_build_is_reported() {
    let src = small(3, "");
    // SOA, no NS, SOA.
    let a = Owned::new("a.x.test", RType::A, &[192, 0, 2, 1]);
    let records = [soa_record(&src), a.rec(), soa_record(&src)];
    let messages = pack(records.into_iter(), RType::AXFR, Class::IN, MAX_MESSAGE);
    match receive(Request::Axfr, &messages) {
        Err(XfrError::Zone(problems)) => {
            let text = XfrError::Zone(problems).to_string();
            assert!(text.contains("no NS records at the zone apex"), "{text}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn garbage_is_malformed() {
    for m in [
        &b""[..],
        &[0u8; 5],
        &[0xFF; 12],
        &[0x80; 40],
        b"not a dns message at all",
    ] {
        let mut r = Receiver::new(origin(), Request::Axfr);
        assert!(matches!(r.feed(m), Err(XfrError::Malformed(_))), "{m:?}");
        assert!(r.finish().is_err());
    }
}

/// Receives whatever `messages` are, never panicking.
fn survive(request: Request, messages: &[Vec<u8>]) {
    let mut r = Receiver::new(origin(), request);
    for m in messages {
        if r.feed(m).is_err() {
            break;
        }
    }
    let _ = r.finish();
}

#[test]
fn truncated_and_corrupted_real_messages_never_panic() {
    let (v1, v2, v3) = versions();
    let chain = vec![Arc::new(diff(&v1, &v2)), Arc::new(diff(&v2, &v3))];
    let streams = [
        (ixfr_messages(&chain, &v3, 700), true),
        (axfr_messages(&v3, 700), false),
    ];
    let request = |is_ixfr: bool| match is_ixfr {
        true => ixfr(&v1),
        false => Request::Axfr,
    };
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for (messages, is_ixfr) in &streams {
        // Every message cut at every length.
        for i in 0..messages.len() {
            for len in 0..messages[i].len() {
                let mut cut = messages[..i].to_vec();
                cut.push(messages[i][..len].to_vec());
                survive(request(*is_ixfr), &cut);
            }
        }
        // Random octets flipped.
        for _ in 0..300 {
            let mut corrupt = messages.clone();
            for _ in 0..1 + next() % 4 {
                let m = (next() as usize) % corrupt.len();
                let at = (next() as usize) % corrupt[m].len();
                corrupt[m][at] ^= 1 << (next() % 8);
            }
            survive(request(*is_ixfr), &corrupt);
        }
    }
}

proptest! {
    #[test]
    fn random_messages_never_panic(
        messages in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..4),
        as_ixfr in any::<bool>(),
    ) {
        let request = if as_ixfr { ixfr(&small(1, "")) } else { Request::Axfr };
        survive(request, &messages);
    }
}

#[test]
fn a_stored_zone_loads_back_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.test.zone");
    let src = rich(42);
    write_zone_file(&src, &path).unwrap();
    assert!(!dir.path().join("x.test.zone.tmp").exists());
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("; zone x.test. serial 42"));
    assert_eq!(lines.next(), Some(crate::secondary::seal::SEALED_MARK));
    assert_eq!(crate::secondary::seal::check(text.as_bytes()), Ok(()));
    assert_eq!(lines.next(), Some("$ORIGIN x.test."));
    assert!(
        lines.next().unwrap().starts_with("x.test. 300 IN SOA "),
        "{text}"
    );
    assert!(
        text.contains("unk.x.test. 300 IN TYPE65280 \\# 4 deadbeef"),
        "{text}"
    );
    let loaded = load_zone_file(&path, &origin()).unwrap_or_else(|p| panic!("{p:?}\n{text}"));
    assert_same(&loaded.zone, &src);
    // Written again over the old file.
    let (_, _, v3) = versions();
    write_zone_file(&v3, &path).unwrap();
    let loaded = load_zone_file(&path, &origin()).unwrap();
    assert_same(&loaded.zone, &v3);
}

/// A zone written back for an operator (after dynamic updates) carries
/// no seal: the first edit would leave its digest wrong.
#[test]
fn a_plain_zone_file_has_no_seal_and_loads_back_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.test.zone");
    let src = rich(42);
    super::store::write_plain_zone_file(&src, &path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("; zone x.test. serial 42"));
    assert_eq!(lines.next(), Some("$ORIGIN x.test."));
    assert!(
        !text.contains("sealed") && !text.contains("; sha256"),
        "{text}"
    );
    let loaded = load_zone_file(&path, &origin()).unwrap();
    assert_same(&loaded.zone, &src);
}

#[test]
fn a_received_zone_is_stored_and_loads_back() {
    let src = zone(5, &format!("{RICH}{}", hosts(200)));
    let Outcome::Full(got) = receive(Request::Axfr, &axfr_messages(&src, 2048)).unwrap() else {
        panic!("not a full zone");
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zone");
    write_zone_file(&got, &path).unwrap();
    let loaded = load_zone_file(&path, &origin()).unwrap();
    assert_same(&loaded.zone, &src);
}

#[test]
fn a_missing_folder_is_created_and_an_unwritable_path_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new/folder/zone");
    write_zone_file(&rich(1), &path).unwrap();
    assert!(load_zone_file(&path, &origin()).is_ok());
    let under_a_file = path.join("zone");
    assert!(write_zone_file(&rich(1), &under_a_file).is_err());
    assert!(!dir.path().join("new/folder/zone.tmp").exists());
}

/// Writes the seeds of the `xfr_receive` fuzz target (fuzz/seeds/):
/// `cargo test -p heron-xfr write_fuzz_seeds -- --ignored`. The IXFR seeds
/// start from the target's own zone, `HAVE` in fuzz_targets/xfr_receive.rs.
#[test]
#[ignore]
fn write_fuzz_seeds() {
    const HAVE: &str = "$ORIGIN x.test.\n$TTL 300\n\
        @ SOA ns1 hostmaster 1 3600 900 604800 300\n\
        @ NS ns1\nns1 A 192.0.2.1\nwww A 192.0.2.3\nwww TXT \"a\"\n";
    let load = |text: &str| load_zone_str(text, "seed.zone", &origin()).unwrap().zone;
    let v1 = load(HAVE);
    let v2 = HAVE
        .replace(" 1 3600", " 2 3600")
        .replace("www A 192.0.2.3", "www A 192.0.2.4");
    let v2 = load(&(v2 + "new TXT \"b\" \"c\\\"d\"\n"));
    let v3 = load(&format!(
        "{}{RICH}",
        HAVE.replace(" 1 3600", " 3 3600")
            .replace("@ NS ns1\nns1 A 192.0.2.1\n", "")
    ));
    let chain = vec![Arc::new(diff(&v1, &v2)), Arc::new(diff(&v2, &v3))];
    let seeds = [
        ("axfr", 0u8, axfr_messages(&v3, 512)),
        ("ixfr-two-steps", 1, ixfr_messages(&chain, &v3, 512)),
        ("ixfr-one-step", 1, ixfr_messages(&chain[..1], &v2, 512)),
        (
            "ixfr-as-axfr",
            1,
            pack(axfr_records(&v2), RType::IXFR, Class::IN, 512),
        ),
        (
            "ixfr-single-soa",
            1,
            pack(
                std::iter::once(soa_record(&v3)),
                RType::IXFR,
                Class::IN,
                512,
            ),
        ),
        (
            "ixfr-one-answer",
            1,
            one_per_message(ixfr_records(&chain, soa_record(&v3)), RType::IXFR),
        ),
        (
            "ixfr-as-axfr-one-answer",
            1,
            one_per_message(axfr_records(&v2), RType::IXFR),
        ),
        (
            "axfr-one-answer",
            0,
            one_per_message(axfr_records(&v2), RType::AXFR),
        ),
    ];
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/xfr_receive");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, mode, messages) in seeds {
        let mut data = vec![mode];
        for m in messages {
            data.extend_from_slice(&(m.len() as u16).to_be_bytes());
            data.extend_from_slice(&m);
        }
        std::fs::write(dir.join(name), data).unwrap();
    }
}
