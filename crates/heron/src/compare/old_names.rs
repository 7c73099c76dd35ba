//! What only the old server serves: its copy of a zone, by AXFR, against
//! Heron's. The probes come from Heron's zones, so a name only the old
//! server holds (a file edited there and not here, a record added by an
//! update) would never be asked; its owners and types are asked too when
//! the old server allows the transfer, and the report says when it does
//! not.

use std::collections::BTreeSet;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use heron_proto::message::{HEADER_LEN, Header, Message};
use heron_proto::tsig::{Key, ResponseVerifier};
use heron_proto::{Class, Name, RType, Rcode};
use heron_zone::Zone;

/// Records read from one transfer at most: a bound on what a server that
/// never ends its AXFR can make us hold.
const MAX_RECORDS: usize = 10_000_000;

/// How long a whole transfer may take.
const MAX_TIME: Duration = Duration::from_secs(300);

/// How long a transfer may go without a byte (at least; `--timeout`
/// times four when longer): a server that takes the connection and never
/// answers is given up at this, not at [`MAX_TIME`] (black-box finding
/// DB-2: compare hung silently for five minutes).
const SILENCE: Duration = Duration::from_secs(10);

/// Why a zone's transfer could not be had.
#[derive(Debug)]
pub struct Failed {
    pub why: String,
    /// The old server did not take or answer the connection at all: the
    /// other zones' transfers would only wait for it as long.
    pub silent: bool,
}

impl Failed {
    fn answered(why: impl Into<String>) -> Failed {
        let why = why.into();
        Failed { why, silent: false }
    }
}

/// The owners and types the old server's copy of `zone` holds that Heron's
/// lacks (RRSIG and NSEC3 left out: they are asked with the data they
/// cover, and nobody asks an NSEC3 owner); an error saying why when the
/// transfer cannot be had.
pub fn only_old(
    server: SocketAddr,
    zone: &Zone,
    (timeout, key): (Duration, Option<&Key>),
) -> Result<Vec<(Name, RType)>, Failed> {
    let bounds = (timeout, timeout.max(SILENCE), MAX_TIME);
    let held = transferred(server, (zone.origin(), key), bounds)?;
    let missing = held.into_iter().filter(|(owner, rtype)| {
        let lower = owner.to_lowercase();
        let node = zone.node(lower.as_wire());
        !node.is_some_and(|n| n.rrset(*rtype).is_some_and(|s| s.has_records()))
    });
    Ok(missing.collect())
}

/// The owners and types of `origin` as `server` transfers it: connected
/// within `timeout`, no gap of `silence`, `max_time` in all; the query signed with `key`, if given, and every
/// message of the answer checked against it.
fn transferred(
    server: SocketAddr,
    (origin, key): (&Name, Option<&Key>),
    (timeout, silence, max_time): (Duration, Duration, Duration),
) -> Result<BTreeSet<(Name, RType)>, Failed> {
    let silent = |e: std::io::Error| Failed {
        why: e.to_string(),
        silent: true,
    };
    let mut stream = TcpStream::connect_timeout(&server, timeout).map_err(silent)?;
    let (query, mut verifier) = signed_query(origin, key);
    stream.write_all(&query).map_err(silent)?;
    // The whole transfer by one deadline: a server trickling bytes does
    // not hold compare up a read timeout at a time.
    let deadline = Instant::now() + max_time;
    let (mut held, mut soas, mut records) = (BTreeSet::new(), 0, 0);
    while soas < 2 {
        if records > MAX_RECORDS {
            return Err(Failed::answered(
                "the transfer did not end within its bounds",
            ));
        }
        let (raw, message) = read_message(&mut stream, deadline, silence, records == 0)?;
        if let Some(verifier) = verifier.as_mut() {
            let now = heron_proto::time::unix_now();
            let verified = verifier.verify(&raw, now);
            verified.map_err(|e| Failed::answered(format!("the transfer's TSIG: {e:?}")))?;
        }
        let rcode = message.rcode();
        if rcode != Rcode::NOERROR {
            return Err(Failed::answered(format!(
                "the transfer was answered {rcode}"
            )));
        }
        if message.answers.is_empty() {
            return Err(Failed::answered("a transfer message without records"));
        }
        for record in message.answers {
            records += 1;
            soas += usize::from(record.rtype == RType::SOA);
            if !matches!(record.rtype, RType::RRSIG | RType::NSEC3) {
                held.insert((record.name, record.rtype));
            }
        }
    }
    Ok(held)
}

/// The AXFR query for `origin`, framed for TCP, signed with `key` if
/// given, and the verifier of its answer's messages.
fn signed_query(origin: &Name, key: Option<&Key>) -> (Vec<u8>, Option<ResponseVerifier>) {
    let mut message = axfr_message(origin);
    let verifier = key.map(|key| {
        let mac =
            heron_proto::tsig::sign_request(&mut message, key, heron_proto::time::unix_now(), 300);
        ResponseVerifier::new(key, mac)
    });
    let mut framed = (message.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&message);
    (framed, verifier)
}

/// An AXFR query message for `origin`.
fn axfr_message(origin: &Name) -> Vec<u8> {
    let header = Header {
        id: 0x4843,
        flags: 0,
        qdcount: 1,
        ancount: 0,
        nscount: 0,
        arcount: 0,
    };
    let mut message = vec![0u8; HEADER_LEN];
    header.write(&mut message);
    message.extend_from_slice(origin.as_wire());
    message.extend_from_slice(&RType::AXFR.0.to_be_bytes());
    message.extend_from_slice(&Class::IN.0.to_be_bytes());
    message
}

/// The next message, read before `deadline` with no gap longer than
/// `silence`; a server quiet that long before its `first` message is
/// `silent`.
fn read_message(
    stream: &mut TcpStream,
    deadline: Instant,
    silence: Duration,
    first: bool,
) -> Result<(Vec<u8>, Message), Failed> {
    let mut length = [0u8; 2];
    read_by(stream, &mut length, (deadline, silence)).map_err(|failed| Failed {
        silent: first && failed.silent,
        ..failed
    })?;
    let mut raw = vec![0u8; u16::from_be_bytes(length) as usize];
    let read = read_by(stream, &mut raw, (deadline, silence));
    read.map_err(|failed| Failed::answered(failed.why))?;
    let message = Message::parse(&raw)
        .map_err(|e| Failed::answered(format!("a transfer message that does not parse: {e:?}")))?;
    Ok((raw, message))
}

/// Fills `buf` from `stream` before `deadline`, however the bytes come,
/// each read within `silence` (else `silent`).
fn read_by(
    stream: &mut TcpStream,
    buf: &mut [u8],
    (deadline, silence): (Instant, Duration),
) -> Result<(), Failed> {
    let mut filled = 0;
    while filled < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Failed::answered(
                "the transfer did not end within its bounds",
            ));
        }
        let set = stream.set_read_timeout(Some(left.min(silence)));
        set.map_err(|e| Failed::answered(e.to_string()))?;
        match stream.read(&mut buf[filled..]) {
            Ok(0) => {
                return Err(Failed::answered(
                    "reading the transfer: the connection closed",
                ));
            }
            Ok(n) => filled += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if left <= silence {
                    return Err(Failed::answered(
                        "the transfer did not end within its bounds",
                    ));
                }
                let why = format!("no answer within {:.0} s", silence.as_secs_f64());
                return Err(Failed { why, silent: true });
            }
            Err(e) => return Err(Failed::answered(format!("reading the transfer: {e}"))),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn zone(body: &str) -> Zone {
        let text = format!(
            "$ORIGIN o.test.\n$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n{body}"
        );
        heron_zone::load_zone_str(&text, "o", &Name::parse("o.test").unwrap())
            .unwrap()
            .zone
    }

    /// A one-shot primary on loopback that answers the first AXFR with
    /// `zone`'s records, in one message, and the address it listens on.
    fn primary(zone: Zone) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut length = [0u8; 2];
            stream.read_exact(&mut length).unwrap();
            let mut query = vec![0u8; u16::from_be_bytes(length) as usize];
            stream.read_exact(&mut query).unwrap();
            let mut reply = Vec::new();
            let mut w = heron_proto::writer::Writer::new(&mut reply, u16::MAX as usize);
            w.question(zone.origin().as_wire(), RType::AXFR, Class::IN);
            let soa = zone.soa().first_rdata().into_owned();
            let apex = zone.origin().as_wire();
            w.record(apex, RType::SOA, Class::IN, 60, &soa).unwrap();
            for node in zone.nodes() {
                for set in node.data().filter(|s| s.rtype != RType::SOA) {
                    for rdata in set.rdatas() {
                        let owner = node.owner();
                        w.record(owner.as_wire(), set.rtype, Class::IN, 60, &rdata)
                            .unwrap();
                    }
                }
            }
            w.record(apex, RType::SOA, Class::IN, 60, &soa).unwrap();
            w.finish(0x4843, 0x8400, 1);
            stream
                .write_all(&(reply.len() as u16).to_be_bytes())
                .unwrap();
            stream.write_all(&reply).unwrap();
        });
        addr
    }

    #[test]
    fn names_only_the_old_server_holds_are_found() {
        let old = primary(zone("old A 192.0.2.2\nboth TXT \"x\"\nboth MX 10 ns\n"));
        let ours = zone("both TXT \"x\"\nours A 192.0.2.3\n");
        let mut found = only_old(old, &ours, (Duration::from_secs(5), None)).unwrap();
        found.sort();
        let said: Vec<String> = found.iter().map(|(n, t)| format!("{n} {t}")).collect();
        assert_eq!(said, ["both.o.test. MX", "old.o.test. A"]);
    }

    /// A server that trickles its transfer a byte at a time is given up
    /// at the transfer's deadline, not one read timeout after another.
    #[test]
    fn a_trickled_transfer_ends_at_its_deadline() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            // A message of 65,535 octets announced, then a byte at a time.
            let _ = stream.write_all(&[0xFF, 0xFF]);
            for _ in 0..100 {
                if stream.write_all(&[0]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let origin = Name::parse("o.test").unwrap();
        let started = Instant::now();
        let max = Duration::from_millis(400);
        let bounds = (Duration::from_secs(1), Duration::from_secs(1), max);
        let failed = transferred(addr, (&origin, None), bounds).unwrap_err();
        assert!(!failed.silent, "it answered: {failed:?}");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    }

    /// A server that takes the connection and never answers is given up
    /// after a silence, not at the transfer's deadline, and said silent
    /// (black-box finding DB-2: compare hung for five minutes, saying
    /// nothing).
    #[test]
    fn a_server_that_never_answers_is_given_up_after_a_silence() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let held = std::thread::spawn(move || listener.accept().map(|(stream, _)| stream));
        let origin = Name::parse("o.test").unwrap();
        let silence = Duration::from_millis(300);
        let bounds = (Duration::from_secs(1), silence, Duration::from_secs(300));
        let failed = transferred(addr, (&origin, None), bounds).unwrap_err();
        assert!(failed.silent, "{failed:?}");
        assert!(failed.why.contains("no answer within"), "{failed:?}");
        drop(held.join());
    }

    #[test]
    fn a_refused_or_absent_transfer_is_an_error() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        assert!(only_old(addr, &zone(""), (Duration::from_millis(500), None)).is_err());
    }
}
