//! Reading DNS messages.
//!
//! [`parse_query`] is the query path: it reads the header, the one question
//! and the OPT record without allocating, and checks every record in the
//! message so that malformed packets get FORMERR. [`Message::parse`] is the
//! general, allocating reader used for responses, transfers and tests.

use std::fmt;
use std::ops::Range;

use crate::edns::{self, Edns};
use crate::name::{LabelStarts, Name, NameBuf, NameError, skip_compressed};
use crate::rdata;
use crate::types::{Class, Opcode, RType, Rcode};

pub const HEADER_LEN: usize = 12;

/// Header flag bits (RFC 1035 4.1.1, RFC 4035 for AD/CD).
pub mod flags {
    pub const QR: u16 = 0x8000;
    pub const AA: u16 = 0x0400;
    pub const TC: u16 = 0x0200;
    pub const RD: u16 = 0x0100;
    pub const RA: u16 = 0x0080;
    pub const Z: u16 = 0x0040;
    pub const AD: u16 = 0x0020;
    pub const CD: u16 = 0x0010;
}

/// The fixed 12-octet message header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Header {
    pub id: u16,
    pub flags: u16,
    pub qdcount: u16,
    pub ancount: u16,
    pub nscount: u16,
    pub arcount: u16,
}

impl Header {
    /// The RCODE for a message of this header that cannot be read as a
    /// query: NOTIMP for an opcode the server does not implement (a DSO
    /// message has no question, RFC 8490 5.1.1; NSD, Knot and BIND answer
    /// NOTIMP whatever the body), FORMERR for QUERY, NOTIFY and UPDATE.
    pub fn unreadable_rcode(&self) -> crate::Rcode {
        match self.opcode() {
            crate::Opcode::QUERY | crate::Opcode::NOTIFY | crate::Opcode::UPDATE => {
                crate::Rcode::FORMERR
            }
            _ => crate::Rcode::NOTIMP,
        }
    }
    pub fn read(msg: &[u8]) -> Option<Header> {
        if msg.len() < HEADER_LEN {
            return None;
        }
        let word = |i: usize| u16::from_be_bytes([msg[i], msg[i + 1]]);
        Some(Header {
            id: word(0),
            flags: word(2),
            qdcount: word(4),
            ancount: word(6),
            nscount: word(8),
            arcount: word(10),
        })
    }

    pub fn write(&self, out: &mut [u8]) {
        let words = [
            self.id,
            self.flags,
            self.qdcount,
            self.ancount,
            self.nscount,
            self.arcount,
        ];
        for (i, w) in words.iter().enumerate() {
            out[2 * i..2 * i + 2].copy_from_slice(&w.to_be_bytes());
        }
    }

    pub fn opcode(&self) -> Opcode {
        Opcode(((self.flags >> 11) & 0xF) as u8)
    }

    /// The low four bits of the response code (the rest lives in OPT).
    pub fn rcode(&self) -> u16 {
        self.flags & 0xF
    }

    pub fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }
}

/// Why a message could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Shorter than a header: nothing to answer.
    ShortHeader,
    Name(NameError),
    /// A record or question runs past the end of the message.
    Truncated,
    /// Bytes left over after the last record the counts announce.
    TrailingData,
    BadRdata(String),
    /// OPT appears twice, outside the additional section, or not at the root.
    BadOpt(&'static str),
    /// A query whose question count is not one.
    QuestionCount(u16),
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::ShortHeader => f.write_str("message shorter than a header"),
            ParseError::Name(e) => write!(f, "bad name: {e}"),
            ParseError::Truncated => f.write_str("record runs past the end of the message"),
            ParseError::TrailingData => f.write_str("data after the last record"),
            ParseError::BadRdata(e) => write!(f, "bad RDATA: {e}"),
            ParseError::BadOpt(e) => write!(f, "bad OPT record: {e}"),
            ParseError::QuestionCount(n) => write!(f, "{n} questions in a query"),
        }
    }
}

impl std::error::Error for ParseError {}

impl From<NameError> for ParseError {
    fn from(e: NameError) -> Self {
        ParseError::Name(e)
    }
}

/// The fixed fields that follow an owner name.
struct RrFixed {
    rtype: RType,
    class: u16,
    ttl: u32,
    rdata: Range<usize>,
}

fn read_u16(msg: &[u8], pos: usize) -> Result<u16, ParseError> {
    msg.get(pos..pos + 2)
        .map(|b| u16::from_be_bytes([b[0], b[1]]))
        .ok_or(ParseError::Truncated)
}

fn read_rr_fixed(msg: &[u8], pos: usize) -> Result<RrFixed, ParseError> {
    let f = msg.get(pos..pos + 10).ok_or(ParseError::Truncated)?;
    let rdlen = u16::from_be_bytes([f[8], f[9]]) as usize;
    let start = pos + 10;
    if start + rdlen > msg.len() {
        return Err(ParseError::Truncated);
    }
    Ok(RrFixed {
        rtype: RType(u16::from_be_bytes([f[0], f[1]])),
        class: u16::from_be_bytes([f[2], f[3]]),
        ttl: u32::from_be_bytes([f[4], f[5], f[6], f[7]]),
        rdata: start..start + rdlen,
    })
}

/// The flags of every response Heron sends to a query with `query_flags`:
/// QR set; opcode, RD and CD copied (RFC 1035 4.1.1, RFC 4035 3.2.2);
/// everything else clear. AA is the caller's: set only when answering
/// authoritatively for a zone it serves.
#[inline]
pub fn response_flags(query_flags: u16) -> u16 {
    flags::QR | (query_flags & (0x7800 | flags::RD | flags::CD))
}

/// What the answer path needs from a query, read without allocation.
#[derive(Debug)]
pub struct Query {
    pub header: Header,
    /// Where the question name sits in the query (uncompressed, as sent).
    pub qname: Range<usize>,
    /// The question name lower-cased, for lookups.
    pub qname_lower: NameBuf,
    /// Where its labels start: the catalog and the zone look its suffixes
    /// up without walking the labels again.
    pub qname_starts: LabelStarts,
    pub qtype: RType,
    pub qclass: Class,
    /// Where the question sits in the query, to echo it verbatim.
    pub question: Range<usize>,
    pub edns: Option<Edns>,
    /// Position of a TSIG record, the last in the additional section.
    pub tsig: Option<Range<usize>>,
}

/// Why a query gets no normal answer.
#[derive(Debug, PartialEq, Eq)]
pub enum QueryError {
    /// Not worth a response: too short for a header, or a response itself.
    Drop,
    /// Answer FORMERR (with the header and, where readable, the question).
    FormErr(ParseError),
}

/// Reads a query: header, exactly one question, and the records after it
/// (checked for well-formedness; OPT extracted). Or no question and an
/// OPT record: a query for a server cookie (RFC 7873 5.4), whose
/// `question` is empty ([`Query::has_question`]).
pub fn parse_query(msg: &[u8]) -> Result<Query, QueryError> {
    let mut q = Query::new();
    parse_query_into(msg, &mut q)?;
    Ok(q)
}

/// [`parse_query`] into a `Query` the caller owns: the query path reuses
/// one, so nothing is moved or zeroed per query.
pub fn parse_query_into(msg: &[u8], q: &mut Query) -> Result<(), QueryError> {
    let header = Header::read(msg).ok_or(QueryError::Drop)?;
    if header.has(flags::QR) {
        return Err(QueryError::Drop);
    }
    let formerr = QueryError::FormErr;
    if header.qdcount == 0 && header.arcount > 0 {
        return parse_question_less(msg, header, q);
    }
    if header.qdcount != 1 {
        return Err(formerr(ParseError::QuestionCount(header.qdcount)));
    }
    let qend = q
        .qname_lower
        .read_lowercase(msg, HEADER_LEN, &mut q.qname_starts)
        .map_err(|e| formerr(e.into()))?;
    let qtype = read_u16(msg, qend).map_err(formerr)?;
    let qclass = read_u16(msg, qend + 2).map_err(formerr)?;
    let trailer = match bare_opt(msg, qend + 4, &header) {
        Some(edns) => Trailer {
            edns: Some(edns),
            tsig: None,
        },
        None => scan_records(msg, qend + 4, &header).map_err(formerr)?,
    };
    q.header = header;
    q.qname = HEADER_LEN..qend;
    q.qtype = RType(qtype);
    q.qclass = Class(qclass);
    q.question = HEADER_LEN..qend + 4;
    q.edns = trailer.edns;
    q.tsig = trailer.tsig;
    Ok(())
}

/// A query without a question: well formed only with an OPT record (RFC
/// 7873 5.4). Its name is the root, its type and class 0, its question
/// empty.
#[cold]
fn parse_question_less(msg: &[u8], header: Header, q: &mut Query) -> Result<(), QueryError> {
    let trailer = scan_records(msg, HEADER_LEN, &header).map_err(QueryError::FormErr)?;
    if trailer.edns.is_none() {
        return Err(QueryError::FormErr(ParseError::QuestionCount(0)));
    }
    q.header = header;
    q.qname_lower.set(&[0]);
    q.qname_starts = LabelStarts::default();
    q.qname = HEADER_LEN..HEADER_LEN;
    q.qtype = RType(0);
    q.qclass = Class(0);
    q.question = HEADER_LEN..HEADER_LEN;
    q.edns = trailer.edns;
    q.tsig = trailer.tsig;
    Ok(())
}

impl Query {
    /// False for a query for a server cookie alone (RFC 7873 5.4).
    #[inline]
    pub fn has_question(&self) -> bool {
        !self.question.is_empty()
    }

    pub fn new() -> Query {
        Query {
            header: Header::default(),
            qname: 0..0,
            qname_lower: NameBuf::new(),
            qname_starts: LabelStarts::default(),
            qtype: RType(0),
            qclass: Class(0),
            question: 0..0,
            edns: None,
            tsig: None,
        }
    }
}

impl Default for Query {
    fn default() -> Self {
        Query::new()
    }
}

struct Trailer {
    edns: Option<Edns>,
    tsig: Option<Range<usize>>,
}

/// The usual end of a query, read at once: one OPT record without options
/// (root owner, RDLENGTH 0) and nothing else after the question. Anything
/// else is None, for [`scan_records`] to walk (it accepts this form too,
/// with the same result).
#[inline]
fn bare_opt(msg: &[u8], pos: usize, header: &Header) -> Option<Edns> {
    if (header.ancount, header.nscount, header.arcount) != (0, 0, 1) {
        return None;
    }
    let r: &[u8; edns::OPT_LEN] = msg.get(pos..)?.try_into().ok()?;
    if r[..3] != [0, 0, 41] || r[9..] != [0, 0] {
        return None;
    }
    let class = u16::from_be_bytes([r[3], r[4]]);
    let ttl = u32::from_be_bytes([r[5], r[6], r[7], r[8]]);
    edns::parse_opt(class, ttl, &[]).ok()
}

/// Walks the answer, authority and additional sections of a query.
fn scan_records(msg: &[u8], mut pos: usize, header: &Header) -> Result<Trailer, ParseError> {
    let before_additional = header.ancount as usize + header.nscount as usize;
    let total = before_additional + header.arcount as usize;
    let mut trailer = Trailer {
        edns: None,
        tsig: None,
    };
    for i in 0..total {
        let start = pos;
        let (end, owner_is_root) = skip_compressed(msg, pos)?;
        pos = end;
        let rr = read_rr_fixed(msg, pos)?;
        pos = rr.rdata.end;
        if trailer.tsig.is_some() {
            return Err(ParseError::BadRdata("record after TSIG".into()));
        }
        match rr.rtype {
            RType::OPT => {
                if i < before_additional {
                    return Err(ParseError::BadOpt("outside the additional section"));
                }
                if trailer.edns.is_some() {
                    return Err(ParseError::BadOpt("more than one"));
                }
                if !owner_is_root {
                    return Err(ParseError::BadOpt("owner is not the root"));
                }
                let opt = edns::parse_opt(rr.class, rr.ttl, &msg[rr.rdata.clone()])
                    .map_err(ParseError::BadOpt)?;
                trailer.edns = Some(opt);
            }
            RType::TSIG if i + 1 == total => trailer.tsig = Some(start..pos),
            RType::TSIG => return Err(ParseError::BadRdata("TSIG is not the last record".into())),
            _ => {}
        }
    }
    if pos != msg.len() {
        return Err(ParseError::TrailingData);
    }
    Ok(trailer)
}

/// One question of a parsed message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    pub name: Name,
    pub qtype: RType,
    pub qclass: Class,
}

/// One resource record of a parsed message; RDATA uncompressed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub name: Name,
    pub rtype: RType,
    pub class: Class,
    pub ttl: u32,
    pub rdata: Vec<u8>,
}

impl fmt::Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rd = String::new();
        rdata::format_text(self.rtype, &self.rdata, &mut rd);
        write!(
            f,
            "{} {} {} {} {}",
            self.name, self.ttl, self.class, self.rtype, rd
        )
    }
}

/// A whole message, every name and RDATA decompressed (allocates).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub header: Header,
    pub questions: Vec<Question>,
    pub answers: Vec<Record>,
    pub authority: Vec<Record>,
    /// Additional records other than OPT.
    pub additional: Vec<Record>,
    pub edns: Option<Edns>,
}

/// The question of a message, if it has one, read without the rest.
pub fn first_question(msg: &[u8]) -> Result<Option<Question>, ParseError> {
    let header = Header::read(msg).ok_or(ParseError::ShortHeader)?;
    if header.qdcount == 0 {
        return Ok(None);
    }
    Ok(Some(read_question(msg, HEADER_LEN)?.0))
}

/// The question at `pos`, and the position after it.
fn read_question(msg: &[u8], pos: usize) -> Result<(Question, usize), ParseError> {
    let (name, end) = Name::read(msg, pos)?;
    let question = Question {
        name,
        qtype: RType(read_u16(msg, end)?),
        qclass: Class(read_u16(msg, end + 2)?),
    };
    Ok((question, end + 4))
}

/// A record read from a message into reused buffers: owner and RDATA
/// uncompressed, borrowed until the next record is read.
#[derive(Clone, Copy, Debug)]
pub struct RecordRef<'a> {
    /// Uncompressed wire form, case as sent.
    pub name: &'a [u8],
    pub rtype: RType,
    pub class: Class,
    pub ttl: u32,
    pub rdata: &'a [u8],
}

impl RecordRef<'_> {
    pub fn to_record(&self) -> Record {
        Record {
            name: Name::from_wire(self.name).expect("read as a name"),
            rtype: self.rtype,
            class: self.class,
            ttl: self.ttl,
            rdata: self.rdata.to_vec(),
        }
    }
}

impl Message {
    pub fn parse(msg: &[u8]) -> Result<Message, ParseError> {
        let mut answers = Vec::new();
        let mut message = Message::parse_answers_with(msg, &mut |r: RecordRef| {
            answers.push(r.to_record());
            Ok::<(), ParseError>(())
        })?;
        message.answers = answers;
        Ok(message)
    }

    /// [`Message::parse`], handing each answer record to `answer` as it is
    /// read instead of collecting it (`answers` of the result is empty):
    /// the millions of records of a zone transfer are read without an
    /// allocation each. Stops at the first error, of either kind.
    pub fn parse_answers_with<E: From<ParseError>>(
        msg: &[u8],
        answer: &mut dyn FnMut(RecordRef<'_>) -> Result<(), E>,
    ) -> Result<Message, E> {
        let header = Header::read(msg).ok_or(ParseError::ShortHeader)?;
        let mut pos = HEADER_LEN;
        let mut questions = Vec::with_capacity(header.qdcount as usize);
        for _ in 0..header.qdcount {
            let (question, end) = read_question(msg, pos)?;
            questions.push(question);
            pos = end;
        }
        let mut out = Message {
            header,
            questions,
            answers: Vec::new(),
            authority: Vec::new(),
            additional: Vec::new(),
            edns: None,
        };
        let mut name = NameBuf::new();
        let mut rdata = Vec::new();
        for _ in 0..header.ancount {
            pos = name.read_compressed(msg, pos).map_err(ParseError::from)?;
            let rr = read_rr_fixed(msg, pos)?;
            if rr.rtype == RType::OPT {
                return Err(ParseError::BadOpt("outside the additional section").into());
            }
            rdata.clear();
            rdata::read_wire(rr.rtype, msg, rr.rdata.start, rr.rdata.len(), &mut rdata)
                .map_err(|e| ParseError::BadRdata(e.0))?;
            answer(RecordRef {
                name: name.as_wire(),
                rtype: rr.rtype,
                class: Class(rr.class),
                ttl: rr.ttl,
                rdata: &rdata,
            })?;
            pos = rr.rdata.end;
        }
        for (section, count) in [(1, header.nscount), (2, header.arcount)] {
            for _ in 0..count {
                pos = out.read_record(msg, pos, section)?;
            }
        }
        if pos != msg.len() {
            return Err(ParseError::TrailingData.into());
        }
        Ok(out)
    }

    fn read_record(&mut self, msg: &[u8], pos: usize, section: usize) -> Result<usize, ParseError> {
        let (name, pos) = Name::read(msg, pos)?;
        let rr = read_rr_fixed(msg, pos)?;
        if rr.rtype == RType::OPT {
            if section != 2 {
                return Err(ParseError::BadOpt("outside the additional section"));
            }
            if self.edns.is_some() {
                return Err(ParseError::BadOpt("more than one"));
            }
            let opt = edns::parse_opt(rr.class, rr.ttl, &msg[rr.rdata.clone()])
                .map_err(ParseError::BadOpt)?;
            self.edns = Some(opt);
            return Ok(rr.rdata.end);
        }
        let mut rdata = Vec::with_capacity(rr.rdata.len());
        rdata::read_wire(rr.rtype, msg, rr.rdata.start, rr.rdata.len(), &mut rdata)
            .map_err(|e| ParseError::BadRdata(e.0))?;
        let record = Record {
            name,
            rtype: rr.rtype,
            class: Class(rr.class),
            ttl: rr.ttl,
            rdata,
        };
        match section {
            1 => self.authority.push(record),
            _ => self.additional.push(record),
        }
        Ok(rr.rdata.end)
    }

    /// The full response code, OPT's extended bits included.
    pub fn rcode(&self) -> Rcode {
        let high = self.edns.as_ref().map_or(0, |e| e.ext_rcode as u16);
        Rcode((high << 4) | self.header.rcode())
    }
}

/// A message ID for a query or NOTIFY we send: hard to guess for an
/// off-path spoofer (RFC 5452 9.2), from std's randomly seeded hasher
/// over the clock's nanoseconds.
pub fn random_id() -> u16 {
    use std::hash::BuildHasher;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    std::collections::hash_map::RandomState::new().hash_one(nanos) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(qname: &[u8], qtype: u16) -> Vec<u8> {
        let mut m = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        m.extend_from_slice(qname);
        m.extend_from_slice(&qtype.to_be_bytes());
        m.extend_from_slice(&[0, 1]);
        m
    }

    fn with_opt(mut m: Vec<u8>, count_at: usize) -> Vec<u8> {
        m[count_at + 1] += 1;
        m.extend_from_slice(&[0, 0, 41, 0x04, 0xD0, 0, 0, 0x80, 0, 0, 0]);
        m
    }

    /// RFC 7873 5.4: no question and an OPT record (with a COOKIE
    /// option, for the processor to judge) is a query; no question
    /// without one, or with a broken record, is FORMERR.
    #[test]
    fn a_question_less_query_needs_an_opt_record() {
        let header = vec![0x12, 0x34, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 1];
        let mut m = header.clone();
        m.extend_from_slice(&[0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0, 0, 12, 0, 10, 0, 8]);
        m.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        let q = parse_query(&m).unwrap();
        assert!(!q.has_question());
        assert_eq!((q.qtype, q.qname_lower.as_wire()), (RType(0), &[0u8][..]));
        assert!(q.edns.is_some());
        let mut bare = header.clone();
        bare[11] = 0;
        assert!(matches!(parse_query(&bare), Err(QueryError::FormErr(_))));
        let mut not_opt = header.clone();
        not_opt.extend_from_slice(&[0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, 1, 2, 3, 4]);
        assert!(matches!(parse_query(&not_opt), Err(QueryError::FormErr(_))));
        assert!(matches!(
            parse_query(&m[..m.len() - 3]),
            Err(QueryError::FormErr(_))
        ));
        let plain = query(b"\x03www\x00", 1);
        assert!(parse_query(&plain).unwrap().has_question());
    }

    #[test]
    fn plain_query() {
        let m = query(b"\x03www\x07Example\x03com\x00", 1);
        let q = parse_query(&m).unwrap();
        assert_eq!(q.header.id, 0x1234);
        assert!(q.header.has(flags::RD));
        assert_eq!(&m[q.qname.clone()], b"\x03www\x07Example\x03com\x00");
        assert_eq!(q.qname_lower.as_wire(), b"\x03www\x07example\x03com\x00");
        assert_eq!(q.qtype, RType::A);
        assert_eq!(q.qclass, Class::IN);
        assert_eq!(q.question, 12..m.len());
        assert!(q.edns.is_none());
    }

    #[test]
    fn query_with_opt() {
        let m = with_opt(query(b"\x00", 2), 10);
        let q = parse_query(&m).unwrap();
        let e = q.edns.unwrap();
        assert_eq!(e.udp_size, 1232);
        assert!(e.do_bit);
        assert_eq!(e.version, 0);
    }

    /// A query with an OPT record holding `rdata`.
    fn with_opt_rdata(rdata: &[u8]) -> Vec<u8> {
        let mut m = query(b"\x00", 6);
        m[11] = 1;
        m.extend_from_slice(&[0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0]);
        m.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        m.extend_from_slice(rdata);
        m
    }

    #[test]
    fn query_options_are_read_with_the_opt_record() {
        let m = with_opt_rdata(&[0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0, 3, 0, 0]);
        let options = parse_query(&m).unwrap().edns.unwrap().options;
        assert!(options.nsid && !options.expire);
        let edns::CookieOption::Present(cookie) = options.cookie else {
            panic!("cookie read");
        };
        assert_eq!(cookie.client(), &[1, 2, 3, 4, 5, 6, 7, 8]);
        // A cookie of a wrong length is recorded, not refused here: the
        // cookie layer answers it FORMERR, a server without cookies
        // ignores it (RFC 7873 5.2.2).
        let m = with_opt_rdata(&[0, 10, 0, 7, 1, 2, 3, 4, 5, 6, 7]);
        let options = parse_query(&m).unwrap().edns.unwrap().options;
        assert_eq!(options.cookie, edns::CookieOption::Malformed);
    }

    #[test]
    fn the_bare_opt_shortcut_reads_what_the_general_walk_reads() {
        let walk = |m: &[u8]| {
            let header = Header::read(m).unwrap();
            let end = 12 + uncompressed_question_len(m);
            scan_records(m, end, &header).map(|t| t.edns)
        };
        let opt = with_opt(query(b"\x01a\x00", 1), 10);
        let mut cases = vec![opt.clone()];
        for (at, value) in [
            (3, 0x00),
            (4, 0x01),
            (5, 0x01),
            (6, 0x01),
            (7, 0x00),
            (8, 0x7F),
        ] {
            let mut m = opt.clone();
            let i = m.len() - 11 + at; // class, extended rcode, version, flags
            m[i] = value;
            cases.push(m);
        }
        for m in &cases {
            let header = Header::read(m).unwrap();
            let fast = bare_opt(m, m.len() - 11, &header);
            assert!(fast.is_some(), "{m:?}");
            assert_eq!(fast, walk(m).unwrap(), "{m:?}");
        }
        // Not the bare form: an option, a byte after, a second record, a
        // non-root owner. The walk decides those.
        let mut with_option = opt.clone();
        let n = with_option.len();
        with_option[n - 1] = 4;
        with_option.extend_from_slice(&[0, 10, 0, 0]);
        let mut trailing = opt.clone();
        trailing.push(0);
        let mut owner = opt.clone();
        owner[n - 11] = 1;
        for m in [with_option, trailing, owner, with_opt(opt.clone(), 10)] {
            let header = Header::read(&m).unwrap();
            let pos = 12 + uncompressed_question_len(&m);
            assert_eq!(bare_opt(&m, pos, &header), None, "{m:?}");
        }
    }

    /// Length of the question of a test query (its name uncompressed).
    fn uncompressed_question_len(m: &[u8]) -> usize {
        crate::name::uncompressed_len(m, 12).unwrap() + 4
    }

    #[test]
    fn malformed_queries() {
        let formerr = |m: &[u8]| matches!(parse_query(m), Err(QueryError::FormErr(_)));
        assert_eq!(parse_query(&[0; 11]).unwrap_err(), QueryError::Drop);
        let mut resp = query(b"\x00", 1);
        resp[2] |= 0x80;
        assert_eq!(parse_query(&resp).unwrap_err(), QueryError::Drop);
        // No question, two questions.
        let mut m = query(b"\x00", 1);
        m[5] = 0;
        assert!(formerr(&m));
        m[5] = 2;
        assert!(formerr(&m));
        // Truncated question.
        let m = query(b"\x00", 1);
        assert!(formerr(&m[..m.len() - 1]));
        // Label over 63 (0x40 is an extended label type).
        assert!(formerr(&query(b"\x40aaaa\x00", 1)));
        // Pointer loop in the question.
        assert!(formerr(&query(b"\xC0\x0C", 1)));
        // Forward pointer.
        assert!(formerr(&query(b"\xC0\x20", 1)));
        // Counts beyond the packet.
        let mut m = query(b"\x00", 1);
        m[7] = 1;
        assert!(formerr(&m));
        // Trailing garbage.
        let mut m = query(b"\x00", 1);
        m.push(0);
        assert!(formerr(&m));
        // OPT twice.
        let m = with_opt(with_opt(query(b"\x00", 1), 10), 10);
        assert!(formerr(&m));
        // OPT in the answer section.
        assert!(formerr(&with_opt(query(b"\x00", 1), 6)));
        // OPT with a non-root owner.
        let mut m = query(b"\x00", 1);
        m[11] = 1;
        m.extend_from_slice(&[1, b'a', 0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0, 0, 0]);
        assert!(formerr(&m));
        // OPT option running past RDATA.
        let mut m = query(b"\x00", 1);
        m[11] = 1;
        m.extend_from_slice(&[0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0, 0, 4, 0, 10, 0, 8]);
        assert!(formerr(&m));
    }

    #[test]
    fn message_parse_round_trip() {
        // A response: question, one A answer with a compressed owner.
        let mut m = query(b"\x03www\x07example\x03com\x00", 1);
        m[2] |= 0x84;
        m[7] = 1;
        m.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1, 0, 0, 0x0E, 0x10, 0, 4, 192, 0, 2, 1]);
        let msg = Message::parse(&m).unwrap();
        assert_eq!(msg.questions.len(), 1);
        assert_eq!(msg.answers.len(), 1);
        let a = &msg.answers[0];
        assert_eq!(a.name, Name::parse("www.example.com").unwrap());
        assert_eq!(
            (a.rtype, a.ttl, &a.rdata[..]),
            (RType::A, 3600, &[192, 0, 2, 1][..])
        );
        assert!(Message::parse(&m[..m.len() - 1]).is_err());
    }

    /// A response to `example.com. A` with a compressed CNAME and A answer.
    fn response_with_answers() -> Vec<u8> {
        let mut m = query(b"\x07example\x03com\x00", 1);
        m[2] |= 0x80;
        m[7] = 2;
        // www.example.com CNAME example.com (both compressed).
        m.extend_from_slice(b"\x03www\xc0\x0c\x00\x05\x00\x01\x00\x00\x00\x3c\x00\x02\xc0\x0c");
        m.extend_from_slice(b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x3c\x00\x04\xc0\x00\x02\x01");
        m
    }

    #[test]
    fn answers_handed_over_one_by_one_match_the_parsed_message() {
        let m = response_with_answers();
        let mut seen = Vec::new();
        let streamed = Message::parse_answers_with(&m, &mut |r: RecordRef| {
            seen.push(r.to_record());
            Ok::<(), ParseError>(())
        })
        .unwrap();
        assert!(streamed.answers.is_empty());
        let whole = Message::parse(&m).unwrap();
        assert_eq!(seen, whole.answers);
        assert_eq!(seen[0].name.to_string(), "www.example.com.");
        assert_eq!(seen[0].rdata, b"\x07example\x03com\x00", "decompressed");
        assert_eq!(seen[1].rdata, [192, 0, 2, 1]);
        assert_eq!(
            first_question(&m).unwrap().unwrap().name,
            whole.questions[0].name
        );
    }

    #[test]
    fn reading_answers_stops_at_the_first_error() {
        let m = response_with_answers();
        let mut calls = 0;
        let stopped = Message::parse_answers_with(&m, &mut |_: RecordRef| {
            calls += 1;
            Err(ParseError::TrailingData)
        });
        assert_eq!(stopped.unwrap_err(), ParseError::TrailingData);
        assert_eq!(calls, 1);
        // A cut message: the first answer is handed over, then the error.
        let mut calls = 0;
        let cut = Message::parse_answers_with(&m[..m.len() - 3], &mut |_: RecordRef| {
            calls += 1;
            Ok::<(), ParseError>(())
        });
        assert_eq!(cut.unwrap_err(), ParseError::Truncated);
        assert_eq!(calls, 1);
    }
}
