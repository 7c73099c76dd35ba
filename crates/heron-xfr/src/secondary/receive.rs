//! Reading an incoming zone transfer, with no I/O: the caller reads each
//! response message off the connection, checks its TSIG, and hands it to
//! [`Receiver::feed`] until that says the transfer is complete; then
//! [`Receiver::finish`] gives the new version of the zone.
//!
//! * AXFR (RFC 5936 2.2): the SOA, every record of the zone, the SOA again.
//! * IXFR (RFC 1995 4): the newest SOA, then for each step from our serial
//!   on the old SOA, the records deleted, the new SOA and the records
//!   added, and the newest SOA again. A server may answer an IXFR in AXFR
//!   form (told apart by the second record not being an SOA), or with one
//!   SOA whose serial is not newer than ours: we are up to date.
//!
//! Message boundaries mean nothing (RFC 5936 2.2): BIND's `transfer-format
//! one-answer` sends one record per message, so an IXFR's first message
//! may hold the newest SOA alone. A first SOA newer than ours is always
//! followed by the rest, and `feed` says the transfer is complete only at
//! its very end, so that a connection goes back to the pool with nothing
//! of the answer left unread.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use heron_proto::message::{Header, Message, ParseError, RecordRef, first_question, flags};
use heron_proto::name::ends_with_name;
use heron_proto::rdata;
use heron_proto::{Class, Name, Opcode, RType, Rcode};
use heron_zone::diff::{DiffRecord, ZoneDiff};
use heron_zone::zonefile::{Location, Record};
use heron_zone::{Problem, Zone, ZoneBuilder};

use crate::serial;

/// Why reading a message's answers stopped.
enum Fed {
    Parse(ParseError),
    Record(XfrError),
}

impl From<ParseError> for Fed {
    fn from(e: ParseError) -> Fed {
        Fed::Parse(e)
    }
}

/// What was asked of the primary.
#[derive(Clone, Debug)]
pub enum Request {
    Axfr,
    /// `have` is the version we serve; the request carried its serial.
    Ixfr {
        have: Arc<Zone>,
    },
}

/// The result of a complete transfer.
#[derive(Debug)]
pub enum Outcome {
    /// The IXFR answer was a single SOA not newer than our serial: the
    /// primary has nothing newer.
    UpToDate,
    /// A whole zone (AXFR, or an IXFR answered in AXFR form).
    Full(Zone),
    /// Our version with the steps of an IXFR applied; `diffs` are those
    /// steps, oldest first, in the form the journal keeps;
    /// `already_present` counts the records the steps added that the
    /// version they applied to held already (they change nothing).
    Incremental {
        zone: Zone,
        diffs: Vec<ZoneDiff>,
        already_present: usize,
    },
}

/// Why a transfer failed. After `Malformed` or `Zone` from an IXFR, the
/// caller falls back to AXFR.
#[derive(Clone, Debug)]
pub enum XfrError {
    /// The primary answered with an error code.
    Rcode(Rcode),
    /// TC set: the answer did not fit (UDP); ask again over TCP.
    Truncated,
    /// The messages break the protocol, or the steps do not fit our zone.
    Malformed(String),
    /// The stream ended before the final SOA.
    NotComplete,
    /// The received zone does not build (errors found by the zone checks).
    Zone(Vec<Problem>),
    /// The transfer went past one of its [`TransferLimits`]: what was
    /// received so far is discarded.
    Limit(Exceeded),
}

/// Bounds on one incoming transfer, so that a hostile or broken primary
/// (or anyone in the path of a transfer without TSIG) cannot make a
/// secondary hold without end what it streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TransferLimits {
    /// Records in the answer (every record of an IXFR counts, deleted
    /// ones and SOAs included).
    pub max_records: u64,
    /// Octets of the answer's messages.
    pub max_bytes: u64,
    /// How long the answer may take, from its first message (the caller
    /// keeps this one: the receiver reads no clock).
    pub max_time: std::time::Duration,
}

impl Default for TransferLimits {
    /// Well above the largest zones transferred whole in practice (large
    /// ccTLDs hold tens of millions of records, about 50 octets each on
    /// the wire), and a rate no real transfer is slower than (4 GiB in an
    /// hour is 1.2 MB/s).
    fn default() -> Self {
        TransferLimits {
            max_records: 50_000_000,
            max_bytes: 4 << 30,
            max_time: std::time::Duration::from_secs(3_600),
        }
    }
}

/// Which of the [`TransferLimits`] a transfer went past.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exceeded {
    Records(u64),
    Bytes(u64),
    Time(std::time::Duration),
}

impl fmt::Display for Exceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exceeded::Records(n) => write!(f, "more than {n} records (max-transfer-records)"),
            Exceeded::Bytes(n) => write!(f, "more than {n} octets (max-transfer-bytes)"),
            Exceeded::Time(t) => write!(f, "longer than {} s (transfer-timeout)", t.as_secs()),
        }
    }
}

impl fmt::Display for XfrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            XfrError::Rcode(rcode) => write!(f, "the primary answered {rcode}"),
            XfrError::Truncated => f.write_str("the answer is truncated (TC)"),
            XfrError::Malformed(msg) => write!(f, "malformed transfer: {msg}"),
            XfrError::NotComplete => f.write_str("the transfer ended before its final SOA"),
            XfrError::Limit(what) => write!(
                f,
                "transfer stopped at {what}; what came is discarded, the zone served is kept"
            ),
            XfrError::Zone(problems) => {
                f.write_str("the received zone is not valid")?;
                for p in problems {
                    write!(f, "; {p}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for XfrError {}

/// The largest TTL (RFC 2181 8).
const MAX_TTL: u32 = i32::MAX as u32;

fn malformed(msg: impl Into<String>) -> XfrError {
    XfrError::Malformed(msg.into())
}

/// One received record, owner case as sent; `line` is its number in the
/// stream (1-based), for the zone checks' messages.
#[derive(Clone, Debug)]
struct Rr {
    owner: Name,
    rtype: RType,
    ttl: u32,
    rdata: Vec<u8>,
    line: u32,
}

impl Rr {
    fn to_diff(&self) -> DiffRecord {
        DiffRecord {
            owner: self.owner.to_lowercase(),
            rtype: self.rtype,
            ttl: self.ttl,
            rdata: self.rdata.clone(),
        }
    }
}

/// One IXFR step as received.
struct Step {
    old_soa: Rr,
    new_soa: Option<Rr>,
    deleted: Vec<Rr>,
    added: Vec<Rr>,
}

enum State {
    /// Nothing received yet.
    Start,
    /// The first SOA of an IXFR answer: the next record tells its form.
    IxfrFirst {
        soa: Rr,
        newest: u32,
    },
    /// Reading the body of an AXFR (or an IXFR in AXFR form).
    Axfr {
        builder: ZoneBuilder,
        serial: u32,
    },
    /// Reading IXFR steps; the last one is in progress (adding records
    /// once its new SOA came). `current` is the serial the chain is at.
    Ixfr {
        newest: u32,
        current: u32,
        steps: Vec<Step>,
    },
    Done(Done),
    Failed(XfrError),
}

enum Done {
    UpToDate,
    Axfr(ZoneBuilder),
    Ixfr(Vec<Step>),
}

/// Reads the response messages of one AXFR or IXFR.
pub struct Receiver {
    /// Lower-cased.
    origin: Name,
    request: Request,
    /// The "file" of the received records' locations.
    source: Arc<Path>,
    messages: u32,
    records: u64,
    bytes: u64,
    limits: TransferLimits,
    state: State,
    /// The EDNS EXPIRE of the first message (RFC 7314), in seconds.
    primary_expire: Option<u32>,
    /// Records outside the zone, left out, and the first of them.
    outside: (u64, Option<String>),
}

impl Receiver {
    pub fn new(origin: Name, request: Request) -> Receiver {
        let origin = origin.to_lowercase();
        let kind = match request {
            Request::Axfr => "AXFR",
            Request::Ixfr { .. } => "IXFR",
        };
        let source = Arc::from(Path::new(&format!("{kind} of {origin}")));
        Receiver {
            origin,
            request,
            source,
            messages: 0,
            records: 0,
            bytes: 0,
            limits: TransferLimits::default(),
            state: State::Start,
            primary_expire: None,
            outside: (0, None),
        }
    }

    /// Names the primary in the locations of the zone checks' messages
    /// ("AXFR from 192.0.2.1:53:17" for the 17th record of the stream).
    pub fn with_primary(mut self, primary: impl fmt::Display) -> Receiver {
        let kind = match self.request {
            Request::Axfr => "AXFR",
            Request::Ixfr { .. } => "IXFR",
        };
        self.source = Arc::from(Path::new(&format!("{kind} from {primary}")));
        self
    }

    /// Bounds the records and octets taken (the time is the caller's).
    pub fn with_limits(mut self, limits: TransferLimits) -> Receiver {
        self.limits = limits;
        self
    }

    /// One response message, already TSIG-verified by the caller. Checks
    /// QR, the opcode, RCODE NOERROR (else [`XfrError::Rcode`]), TC, the
    /// question if present, and that every answer record is of class IN.
    /// Records outside the zone are left out (BIND and Knot do the same:
    /// some primaries send glue of other zones), said once by
    /// [`Receiver::finish`]. Returns Ok(true) when the transfer is complete:
    /// the caller stops reading and calls [`Receiver::finish`].
    ///
    /// After an error the receiver stays failed: later calls return it.
    pub fn feed(&mut self, msg: &[u8]) -> Result<bool, XfrError> {
        match &self.state {
            State::Failed(e) => return Err(e.clone()),
            State::Done(_) => {
                let e = malformed("a message after the end of the transfer");
                self.state = State::Failed(e.clone());
                return Err(e);
            }
            _ => {}
        }
        match self.feed_message(msg) {
            Ok(()) => Ok(matches!(self.state, State::Done(_))),
            Err(e) => {
                self.state = State::Failed(e.clone());
                Err(e)
            }
        }
    }

    fn feed_message(&mut self, msg: &[u8]) -> Result<(), XfrError> {
        let unreadable = |e: ParseError| malformed(format!("unreadable message: {e}"));
        let h = Header::read(msg).ok_or_else(|| unreadable(ParseError::ShortHeader))?;
        self.messages += 1;
        self.bytes += msg.len() as u64;
        if self.bytes > self.limits.max_bytes {
            return Err(XfrError::Limit(Exceeded::Bytes(self.limits.max_bytes)));
        }
        if !h.has(flags::QR) {
            return Err(malformed("not a response (QR clear)"));
        }
        if h.opcode() != Opcode::QUERY {
            return Err(malformed(format!("opcode {} in a response", h.opcode().0)));
        }
        if h.rcode() != Rcode::NOERROR.0 {
            return Err(XfrError::Rcode(Rcode(h.rcode())));
        }
        if h.has(flags::TC) {
            return Err(XfrError::Truncated);
        }
        if h.qdcount > 1 {
            return Err(malformed(format!("{} questions", h.qdcount)));
        }
        if let Some(q) = first_question(msg).map_err(unreadable)? {
            let qtype = match self.request {
                Request::Axfr => RType::AXFR,
                Request::Ixfr { .. } => RType::IXFR,
            };
            if q.name != self.origin || q.qtype != qtype || q.qclass != Class::IN {
                return Err(malformed(format!(
                    "question {} {} {} does not match {} IN {qtype}",
                    q.name, q.qclass, q.qtype, self.origin
                )));
            }
        }
        if h.ancount == 0 && self.messages == 1 {
            return Err(malformed("no records in the first message"));
        }
        let parsed =
            Message::parse_answers_with(msg, &mut |rec| self.record(rec).map_err(Fed::Record));
        let msg = match parsed {
            Ok(msg) => msg,
            Err(Fed::Record(e)) => return Err(e),
            Err(Fed::Parse(e)) => return Err(unreadable(e)),
        };
        if self.messages == 1 {
            self.primary_expire = msg.edns.and_then(|e| e.options.expire_seconds);
        }
        // An extended RCODE (in OPT) is only known once the message is read.
        let rcode = msg.rcode();
        if rcode != Rcode::NOERROR {
            return Err(XfrError::Rcode(rcode));
        }
        Ok(())
    }

    fn record(&mut self, rec: RecordRef) -> Result<(), XfrError> {
        if self.records >= self.limits.max_records {
            return Err(XfrError::Limit(Exceeded::Records(self.limits.max_records)));
        }
        self.records += 1;
        let line = u32::try_from(self.records).unwrap_or(u32::MAX);
        let name = || Name::from_wire(rec.name).expect("read as a name");
        if rec.class != Class::IN {
            return Err(malformed(format!(
                "record {line}: {} {} of class {}, not IN",
                name(),
                rec.rtype,
                rec.class
            )));
        }
        if !ends_with_name(rec.name, self.origin.as_wire()) {
            self.outside.0 += 1;
            let first = || format!("record {line}: {} {}", name(), rec.rtype);
            self.outside.1.get_or_insert_with(first);
            return Ok(());
        }
        if rec.rtype.is_meta() {
            return Err(malformed(format!(
                "record {line}: {} of meta type {}",
                name(),
                rec.rtype
            )));
        }
        // RFC 2181 8: a TTL with the top bit set is read as zero (a zone
        // file could not hold it).
        let ttl = if rec.ttl > MAX_TTL { 0 } else { rec.ttl };
        let is_soa =
            rec.rtype == RType::SOA && rec.name.eq_ignore_ascii_case(self.origin.as_wire());
        if let (State::Axfr { builder, .. }, false) = (&mut self.state, is_soa) {
            // The body of an AXFR: straight into the zone, nothing to keep.
            builder.add_wire(rec.name, (rec.rtype, ttl), rec.rdata, (&self.source, line));
            return Ok(());
        }
        let rr = Rr {
            owner: name(),
            rtype: rec.rtype,
            ttl,
            rdata: rec.rdata.to_vec(),
            line,
        };
        let soa_serial = if is_soa {
            let s = rdata::soa_serial(&rr.rdata)
                .ok_or_else(|| malformed(format!("record {line}: SOA without a serial")))?;
            Some(s)
        } else {
            None
        };
        let state = std::mem::replace(&mut self.state, State::Start);
        self.state = self.next_state(state, rr, soa_serial)?;
        Ok(())
    }

    /// The state after one record; `soa` is its serial when the record
    /// is the apex SOA.
    fn next_state(&self, state: State, rr: Rr, soa: Option<u32>) -> Result<State, XfrError> {
        let line = rr.line;
        Ok(match (state, soa) {
            (State::Start, None) => {
                return Err(malformed(format!(
                    "the transfer starts with {} {}, not the SOA of {}",
                    rr.owner, rr.rtype, self.origin
                )));
            }
            (State::Start, Some(serial)) => match &self.request {
                Request::Axfr => State::Axfr {
                    builder: self.builder_with(rr),
                    serial,
                },
                // Not newer than ours: up to date (RFC 1995 4), and the
                // answer must end here.
                Request::Ixfr { have } if !serial::is_newer(serial, have.serial()) => {
                    State::Done(Done::UpToDate)
                }
                // Newer: the steps (or the whole zone) follow, in this
                // message or the next ones.
                Request::Ixfr { .. } => State::IxfrFirst {
                    soa: rr,
                    newest: serial,
                },
            },
            // An IXFR answered in AXFR form (RFC 1995 4).
            (State::IxfrFirst { soa, newest }, None) => {
                let mut builder = self.builder_with(soa);
                builder.add(&self.zone_record(rr));
                State::Axfr {
                    builder,
                    serial: newest,
                }
            }
            (State::IxfrFirst { newest, .. }, Some(old)) => {
                let ours = self.have_serial();
                if old != ours {
                    return Err(malformed(format!(
                        "record {line}: the IXFR starts from serial {old}, but ours is {ours}"
                    )));
                }
                State::Ixfr {
                    newest,
                    current: old,
                    steps: vec![Step {
                        old_soa: rr,
                        new_soa: None,
                        deleted: Vec::new(),
                        added: Vec::new(),
                    }],
                }
            }
            (
                State::Axfr {
                    mut builder,
                    serial,
                },
                None,
            ) => {
                builder.add(&self.zone_record(rr));
                State::Axfr { builder, serial }
            }
            (State::Axfr { builder, serial }, Some(last)) => {
                if last != serial {
                    return Err(malformed(format!(
                        "record {line}: an SOA with serial {last} inside an AXFR of serial {serial}"
                    )));
                }
                State::Done(Done::Axfr(builder))
            }
            (
                State::Ixfr {
                    newest,
                    current,
                    mut steps,
                },
                soa,
            ) => {
                let step = steps.last_mut().expect("a step is always open");
                match (soa, &step.new_soa) {
                    (None, None) => step.deleted.push(rr),
                    (None, Some(_)) => step.added.push(rr),
                    (Some(new), None) => {
                        if !serial::is_newer(new, current) {
                            return Err(malformed(format!(
                                "record {line}: an IXFR step from serial {current} to {new}, \
                                 which is not newer"
                            )));
                        }
                        step.new_soa = Some(rr);
                        return Ok(State::Ixfr {
                            newest,
                            current: new,
                            steps,
                        });
                    }
                    (Some(s), Some(_)) if s == newest && current == newest => {
                        return Ok(State::Done(Done::Ixfr(steps)));
                    }
                    (Some(s), Some(_)) if s == current => steps.push(Step {
                        old_soa: rr,
                        new_soa: None,
                        deleted: Vec::new(),
                        added: Vec::new(),
                    }),
                    (Some(s), Some(_)) => {
                        return Err(malformed(format!(
                            "record {line}: an IXFR step from serial {s}, but the previous \
                             step ended at {current}"
                        )));
                    }
                }
                State::Ixfr {
                    newest,
                    current,
                    steps,
                }
            }
            (State::Done(_), _) => {
                return Err(malformed(format!(
                    "record {line}: {} {} after the final SOA",
                    rr.owner, rr.rtype
                )));
            }
            (State::Failed(e), _) => return Err(e),
        })
    }

    fn have_serial(&self) -> u32 {
        match &self.request {
            Request::Ixfr { have } => have.serial(),
            Request::Axfr => 0,
        }
    }

    fn zone_record(&self, rr: Rr) -> Record {
        Record {
            owner: rr.owner,
            class: Class::IN,
            rtype: rr.rtype,
            ttl: rr.ttl,
            rdata: rr.rdata,
            location: Location {
                file: self.source.clone(),
                line: rr.line,
            },
        }
    }

    fn builder_with(&self, soa: Rr) -> ZoneBuilder {
        let mut builder = ZoneBuilder::new(self.origin.clone(), Class::IN);
        builder.add(&self.zone_record(soa));
        builder
    }

    /// The EDNS EXPIRE the primary put in its first message, if any.
    pub fn primary_expire(&self) -> Option<u32> {
        self.primary_expire
    }

    /// The new version of the zone, once [`Receiver::feed`] said the
    /// transfer is complete; [`XfrError::NotComplete`] before.
    pub fn finish(self) -> Result<Outcome, XfrError> {
        if let (count @ 1.., Some(first)) = &self.outside {
            tracing::warn!(
                "zone {}: {count} records outside the zone left out of the {} ({first}, ...)",
                self.origin,
                self.source.display()
            );
        }
        match self.state {
            State::Done(Done::UpToDate) => Ok(Outcome::UpToDate),
            State::Done(Done::Axfr(builder)) => build(builder).map(Outcome::Full),
            State::Done(Done::Ixfr(steps)) => {
                let Request::Ixfr { have } = &self.request else {
                    return Err(malformed("IXFR steps in answer to an AXFR"));
                };
                let (zone, already_present) = apply(have, &steps)?;
                let diffs = steps.iter().map(journal_diff).collect();
                Ok(Outcome::Incremental {
                    zone,
                    diffs,
                    already_present,
                })
            }
            State::Failed(e) => Err(e),
            _ => Err(XfrError::NotComplete),
        }
    }
}

fn build(builder: ZoneBuilder) -> Result<Zone, XfrError> {
    let started = std::time::Instant::now();
    let (zone, warnings) = builder.build().map_err(XfrError::Zone)?;
    tracing::debug!(
        "zone {}: built from the transfer in {} ms",
        zone.origin(),
        started.elapsed().as_millis()
    );
    for w in warnings {
        tracing::warn!("zone {}: {w}", zone.origin());
    }
    Ok(zone)
}

/// A step as the journal keeps it: owners lower-cased, lists in canonical
/// order, as [`heron_zone::diff::diff`] makes them.
fn journal_diff(step: &Step) -> ZoneDiff {
    let mut deleted: Vec<DiffRecord> = step.deleted.iter().map(Rr::to_diff).collect();
    let mut added: Vec<DiffRecord> = step.added.iter().map(Rr::to_diff).collect();
    deleted.sort();
    added.sort();
    ZoneDiff {
        old_soa: step.old_soa.to_diff(),
        new_soa: step.new_soa.as_ref().expect("a finished step").to_diff(),
        deleted,
        added,
    }
}

/// A step as `Zone::apply` takes it: owners as the primary sent them.
fn step_diff(step: &Step) -> ZoneDiff {
    let as_sent = |rr: &Rr| DiffRecord {
        owner: rr.owner.clone(),
        ..rr.to_diff()
    };
    ZoneDiff {
        old_soa: as_sent(&step.old_soa),
        new_soa: as_sent(step.new_soa.as_ref().expect("a finished step")),
        deleted: step.deleted.iter().map(as_sent).collect(),
        added: step.added.iter().map(as_sent).collect(),
    }
}

/// Our version with the IXFR steps applied one after the other, and how
/// many records they added that were there already. Each version shares
/// with the one before every part of the zone its step did not touch, so
/// the cost follows the size of the change, not the zone. A step that does
/// not fit (it deletes what we lack) or leaves the zone broken fails the
/// transfer; the zone we serve stays as it is.
fn apply(have: &Zone, steps: &[Step]) -> Result<(Zone, usize), XfrError> {
    let mut newest: Option<Zone> = None;
    let mut already_present = 0;
    for step in steps {
        let from = newest.as_ref().unwrap_or(have);
        let (next, present) = from
            .apply_counting(&step_diff(step))
            .map_err(XfrError::Zone)?;
        already_present += present;
        newest = Some(next);
    }
    let zone = newest.ok_or_else(|| malformed("an IXFR without steps"))?;
    Ok((zone, already_present))
}
