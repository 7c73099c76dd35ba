//! A primary in the test's own process, for what a real server cannot be
//! made to do on cue: minimal zones (SOA, NS and an address) served over
//! TCP to SOA queries, AXFR and IXFR; IXFR answered as the test chooses;
//! transfers sent one record per message (BIND's `transfer-format
//! one-answer`); a primary that hangs up on every connection; transfers
//! held for a while; whole-zone answers padded with as many records as
//! the test asks (a primary that streams without end); and counts of what
//! it saw (connections, transfers at once, each request) and sent. No
//! TSIG.

use std::collections::HashMap;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use heron_proto::message::{Query, flags, parse_query};
use heron_proto::writer::Writer;
use heron_proto::{Class, Name, RType, Rcode};

use crate::client::{framed, read_framed};

/// How the primary answers an IXFR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IxfrAnswer {
    /// With the whole zone in AXFR form (RFC 1995 4 allows it).
    Axfr,
    /// REFUSED.
    Refused,
    /// A message cut short in its first record.
    Broken,
    /// One step from the asker's serial to ours that deletes the address
    /// record and adds it back (the zone's content does not change).
    Step,
    /// One step from the asker's serial to ours that adds the NS and the
    /// address records, which the asker holds already.
    ReAdd,
    /// No answer: the connection is held open, silent, until the asker
    /// closes it (at most 30 s).
    Silent,
}

/// One request the primary read.
#[derive(Clone, Debug)]
pub struct Seen {
    pub at: SystemTime,
    pub qtype: RType,
    /// Lower case.
    pub zone: Name,
    /// Who asked.
    pub from: Option<SocketAddr>,
}

/// The primary; stops listening when dropped.
pub struct FakePrimary {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

struct Shared {
    /// Serial of each zone, by lower-case origin.
    serials: Mutex<HashMap<Name, u32>>,
    /// SOA refresh, retry, expire.
    timers: Mutex<[u32; 3]>,
    /// The address of every zone's name server.
    address: Mutex<[u8; 4]>,
    ixfr: Mutex<IxfrAnswer>,
    /// The serial SOA queries are told, if not the zone's (a primary
    /// whose SOA and transfers disagree).
    soa_serial: Mutex<Option<u32>>,
    one_answer: AtomicBool,
    hold: Mutex<Duration>,
    hang_up: AtomicBool,
    /// Records added to every whole-zone answer, and those sent so far.
    padding: AtomicUsize,
    padding_sent: AtomicUsize,
    stopped: AtomicBool,
    connections: AtomicUsize,
    transfers_now: AtomicUsize,
    most_transfers: AtomicUsize,
    seen: Mutex<Vec<Seen>>,
}

impl FakePrimary {
    /// Serves `origins`, each at `serial`, on a free port of 127.0.0.1;
    /// SOA timers 3600 600 86400.
    pub fn start(origins: &[&str], serial: u32) -> FakePrimary {
        FakePrimary::start_on(Ipv4Addr::LOCALHOST, origins, serial)
    }

    /// [`FakePrimary::start`] on `ip` (a loopback address other than
    /// 127.0.0.1: a second primary a NOTIFY can come from).
    pub fn start_on(ip: Ipv4Addr, origins: &[&str], serial: u32) -> FakePrimary {
        let serials = origins
            .iter()
            .map(|o| (Name::parse(o).expect("an origin").to_lowercase(), serial))
            .collect();
        let shared = Arc::new(Shared {
            serials: Mutex::new(serials),
            timers: Mutex::new([3600, 600, 86400]),
            address: Mutex::new([192, 0, 2, 1]),
            ixfr: Mutex::new(IxfrAnswer::Axfr),
            soa_serial: Mutex::new(None),
            one_answer: AtomicBool::new(false),
            hold: Mutex::new(Duration::ZERO),
            hang_up: AtomicBool::new(false),
            padding: AtomicUsize::new(0),
            padding_sent: AtomicUsize::new(0),
            stopped: AtomicBool::new(false),
            connections: AtomicUsize::new(0),
            transfers_now: AtomicUsize::new(0),
            most_transfers: AtomicUsize::new(0),
            seen: Mutex::new(Vec::new()),
        });
        let listener = TcpListener::bind((ip, 0)).expect("a free port");
        let addr = listener.local_addr().expect("bound");
        let accepting = shared.clone();
        std::thread::spawn(move || accept(listener, accepting));
        FakePrimary { addr, shared }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every zone's serial from now on.
    pub fn set_serial(&self, serial: u32) {
        self.shared
            .serials
            .lock()
            .unwrap()
            .values_mut()
            .for_each(|s| *s = serial);
    }

    /// The SOA refresh, retry and expire of every zone from now on.
    pub fn set_timers(&self, refresh: u32, retry: u32, expire: u32) {
        *self.shared.timers.lock().unwrap() = [refresh, retry, expire];
    }

    /// The address of every zone's name server from now on (192.0.2.1
    /// at first): the content changes, the serial need not.
    pub fn set_address(&self, address: [u8; 4]) {
        *self.shared.address.lock().unwrap() = address;
    }

    /// The serial SOA queries are told from now on (None: the zone's).
    pub fn set_soa_serial(&self, serial: Option<u32>) {
        *self.shared.soa_serial.lock().unwrap() = serial;
    }

    pub fn set_ixfr(&self, answer: IxfrAnswer) {
        *self.shared.ixfr.lock().unwrap() = answer;
    }

    /// Whether transfers (not padded) go one record per message, as from
    /// BIND with `transfer-format one-answer`.
    pub fn set_one_answer(&self, one: bool) {
        self.shared.one_answer.store(one, Ordering::SeqCst);
    }

    /// How long each transfer waits before it is answered.
    pub fn set_hold(&self, hold: Duration) {
        *self.shared.hold.lock().unwrap() = hold;
    }

    /// Whether every new connection is closed at once, unanswered.
    pub fn set_hang_up(&self, hang_up: bool) {
        self.shared.hang_up.store(hang_up, Ordering::SeqCst);
    }

    /// Every whole-zone answer (AXFR, IXFR in AXFR form) from now on
    /// carries `records` TXT records more, streamed in messages of a few
    /// hundred, made as they are sent.
    pub fn set_padding(&self, records: usize) {
        self.shared.padding.store(records, Ordering::SeqCst);
    }

    /// Padding records written to connections so far (a reader that
    /// stops leaves the rest unsent).
    pub fn padding_sent(&self) -> usize {
        self.shared.padding_sent.load(Ordering::SeqCst)
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// The most transfers (AXFR, IXFR) that were being answered at once.
    pub fn most_transfers_at_once(&self) -> usize {
        self.shared.most_transfers.load(Ordering::SeqCst)
    }

    /// Every request read so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }

    /// The requests of type `qtype` read so far.
    pub fn count(&self, qtype: RType) -> usize {
        self.seen().iter().filter(|s| s.qtype == qtype).count()
    }
}

impl Drop for FakePrimary {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        // Wakes the accepting thread so that it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

fn accept(listener: TcpListener, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stopped.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        shared.connections.fetch_add(1, Ordering::SeqCst);
        if shared.hang_up.load(Ordering::SeqCst) {
            continue; // dropped: closed
        }
        let serving = shared.clone();
        std::thread::spawn(move || serve(stream, serving));
    }
}

/// Holds `stream` open without a word until the other side closes it,
/// 30 s at most.
fn hold_silent(mut stream: TcpStream) {
    use std::io::Read;
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(30)));
    let mut buf = [0u8; 512];
    while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
}

/// Answers the requests on one connection, in order, until it closes.
fn serve(mut stream: TcpStream, shared: Arc<Shared>) {
    let from = stream.peer_addr().ok();
    while let Ok(msg) = read_framed(&mut stream) {
        let Ok(query) = parse_query(&msg) else { return };
        let zone = query.qname_lower.to_name();
        shared.seen.lock().unwrap().push(Seen {
            at: SystemTime::now(),
            qtype: query.qtype,
            zone: zone.clone(),
            from,
        });
        if query.qtype == RType::IXFR && *shared.ixfr.lock().unwrap() == IxfrAnswer::Silent {
            return hold_silent(stream);
        }
        let mut serial = shared.serials.lock().unwrap().get(&zone).copied();
        if query.qtype == RType::SOA && serial.is_some() {
            serial = shared.soa_serial.lock().unwrap().or(serial);
        }
        let timers = *shared.timers.lock().unwrap();
        let address = *shared.address.lock().unwrap();
        let answer = match (serial, query.qtype) {
            (None, _) => Answer::Rcode(Rcode::REFUSED),
            (Some(_), RType::SOA) => Answer::Records(Records::Soa),
            (Some(_), RType::AXFR) => Answer::Records(Records::Zone),
            (Some(_), RType::IXFR) => match *shared.ixfr.lock().unwrap() {
                IxfrAnswer::Axfr => Answer::Records(Records::Zone),
                IxfrAnswer::Refused => Answer::Rcode(Rcode::REFUSED),
                IxfrAnswer::Broken => Answer::Broken,
                IxfrAnswer::Silent => unreachable!("held above"),
                step @ (IxfrAnswer::Step | IxfrAnswer::ReAdd) => match asker_serial(&msg) {
                    Some(from) => Answer::Records(Records::Step {
                        from,
                        re_add: step == IxfrAnswer::ReAdd,
                    }),
                    None => Answer::Rcode(Rcode::FORMERR),
                },
            },
            (Some(_), _) => Answer::Rcode(Rcode::NOTIMP),
        };
        let padding = shared.padding.load(Ordering::SeqCst);
        let padded = padding > 0 && matches!(answer, Answer::Records(Records::Zone));
        let zone_data = ZoneData {
            serial: serial.unwrap_or(0),
            timers,
            address,
        };
        let response = respond(&msg, &query, &zone, zone_data, answer);
        let is_transfer = matches!(query.qtype, RType::AXFR | RType::IXFR);
        if is_transfer {
            shared.transfer_begins();
        }
        let sent = if padded {
            send_padded(&mut stream, &response, &zone, padding, &shared.padding_sent)
        } else if is_transfer && shared.one_answer.load(Ordering::SeqCst) {
            one_per_message(&response)
                .iter()
                .try_for_each(|m| framed(m).and_then(|f| stream.write_all(&f)))
        } else {
            framed(&response).and_then(|f| stream.write_all(&f))
        };
        if is_transfer {
            shared.transfers_now.fetch_sub(1, Ordering::SeqCst);
        }
        if sent.is_err() {
            return;
        }
    }
}

impl Shared {
    /// Counts a transfer in flight and holds it as the test asked.
    fn transfer_begins(&self) {
        let now = self.transfers_now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_transfers.fetch_max(now, Ordering::SeqCst);
        let hold = *self.hold.lock().unwrap();
        std::thread::sleep(hold);
    }
}

/// A whole-zone `response` (SOA, NS, A, SOA in one message) sent with
/// `padding` TXT records between its records and its final SOA: the
/// response without that SOA, then messages of padding, then a message
/// of the SOA, each with the response's header and question.
fn send_padded(
    stream: &mut TcpStream,
    response: &[u8],
    zone: &Name,
    padding: usize,
    sent: &AtomicUsize,
) -> std::io::Result<()> {
    const PER_MESSAGE: usize = 500;
    let parsed = heron_proto::message::Message::parse(response).expect("our own response");
    let id = parsed.header.id;
    let question = {
        let q = &parsed.questions[0];
        (q.name.clone(), q.qtype)
    };
    let message = |records: &mut dyn FnMut(&mut Writer)| {
        let mut out = Vec::new();
        let mut w = Writer::new(&mut out, u16::MAX as usize);
        w.question(question.0.as_wire(), question.1, Class::IN);
        records(&mut w);
        w.finish(id, flags::QR | flags::AA, 1);
        out
    };
    let (final_soa, body) = parsed.answers.split_last().expect("SOA, NS, A, SOA");
    let put = |w: &mut Writer, r: &heron_proto::message::Record| {
        let _ = w.record(r.name.as_wire(), r.rtype, Class::IN, r.ttl, &r.rdata);
    };
    let first = message(&mut |w| body.iter().for_each(|r| put(w, r)));
    stream.write_all(&framed(&first)?)?;
    let mut next = 0;
    while next < padding {
        let count = PER_MESSAGE.min(padding - next);
        let chunk = message(&mut |w| {
            for i in next..next + count {
                let owner = Name::parse(&format!("p{i}.{zone}")).expect("a name");
                let _ = w.record(owner.as_wire(), RType::TXT, Class::IN, 300, b"\x03pad");
            }
        });
        stream.write_all(&framed(&chunk)?)?;
        sent.fetch_add(count, Ordering::SeqCst);
        next += count;
    }
    let last = message(&mut |w| put(w, final_soa));
    stream.write_all(&framed(&last)?)
}

enum Answer {
    Rcode(Rcode),
    Records(Records),
    Broken,
}

enum Records {
    Soa,
    /// SOA, NS, A, SOA.
    Zone,
    /// One IXFR step from serial `from`: the newest SOA, the SOA of
    /// `from`, the address deleted (not with `re_add`), the newest SOA,
    /// the address added (with `re_add`, the NS too), the newest SOA.
    Step {
        from: u32,
        re_add: bool,
    },
}

/// The serial of the SOA in an IXFR request's authority section.
fn asker_serial(msg: &[u8]) -> Option<u32> {
    let parsed = heron_proto::message::Message::parse(msg).ok()?;
    let soa = parsed.authority.iter().find(|r| r.rtype == RType::SOA)?;
    heron_proto::rdata::soa_serial(&soa.rdata)
}

/// `response`'s answer records, each in a message of its own with the
/// response's header and question.
fn one_per_message(response: &[u8]) -> Vec<Vec<u8>> {
    let parsed = heron_proto::message::Message::parse(response).expect("our own response");
    let q = &parsed.questions[0];
    let rcode = parsed.header.rcode();
    if parsed.answers.is_empty() {
        return vec![response.to_vec()];
    }
    parsed
        .answers
        .iter()
        .map(|r| {
            let mut out = Vec::new();
            let mut w = Writer::new(&mut out, u16::MAX as usize);
            w.question(q.name.as_wire(), q.qtype, Class::IN);
            let _ = w.record(r.name.as_wire(), r.rtype, Class::IN, r.ttl, &r.rdata);
            w.finish(parsed.header.id, flags::QR | flags::AA | rcode, 1);
            out
        })
        .collect()
}

/// What a zone holds besides its name.
struct ZoneData {
    serial: u32,
    /// SOA refresh, retry, expire.
    timers: [u32; 3],
    address: [u8; 4],
}

fn respond(msg: &[u8], query: &Query, zone: &Name, data: ZoneData, answer: Answer) -> Vec<u8> {
    let ZoneData {
        serial,
        timers: [refresh, retry, expire],
        address,
    } = data;
    let ns = Name::parse(&format!("ns.{zone}")).expect("a name");
    let soa_of = |serial: u32| {
        let mut soa = ns.as_wire().to_vec();
        soa.extend_from_slice(
            Name::parse(&format!("hostmaster.{zone}"))
                .unwrap()
                .as_wire(),
        );
        for field in [serial, refresh, retry, expire, 60] {
            soa.extend_from_slice(&field.to_be_bytes());
        }
        soa
    };
    let soa = soa_of(serial);
    let apex = zone.as_wire();
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out, u16::MAX as usize);
    w.question_raw(&msg[query.question.clone()]);
    let mut rcode = Rcode::NOERROR;
    let put_soa = |w: &mut Writer, soa: &[u8]| {
        let _ = w.record(apex, RType::SOA, Class::IN, 300, soa);
    };
    let put_ns = |w: &mut Writer| {
        let _ = w.record(apex, RType::NS, Class::IN, 300, ns.as_wire());
    };
    let put_address = |w: &mut Writer| {
        let _ = w.record(ns.as_wire(), RType::A, Class::IN, 300, &address);
    };
    let broken = matches!(answer, Answer::Broken);
    match answer {
        Answer::Rcode(r) => rcode = r,
        Answer::Records(Records::Soa) => put_soa(&mut w, &soa),
        Answer::Records(Records::Zone) | Answer::Broken => {
            put_soa(&mut w, &soa);
            put_ns(&mut w);
            put_address(&mut w);
            put_soa(&mut w, &soa);
        }
        Answer::Records(Records::Step { from, re_add }) => {
            put_soa(&mut w, &soa);
            put_soa(&mut w, &soa_of(from));
            if !re_add {
                put_address(&mut w);
            }
            put_soa(&mut w, &soa);
            if re_add {
                put_ns(&mut w);
            }
            put_address(&mut w);
            put_soa(&mut w, &soa);
        }
    }
    w.finish(query.header.id, flags::QR | flags::AA | rcode.0, 1);
    if broken {
        // Four records announced, the first (its owner a 2-octet pointer
        // to the question) cut in its RDATA.
        out.truncate(query.question.end + 2 + 10 + 4);
    }
    out
}
