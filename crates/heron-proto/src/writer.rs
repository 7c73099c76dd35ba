//! Building responses, with name compression (RFC 1035 4.1.4).
//!
//! The writer appends to a caller-owned buffer, so a worker that reuses its
//! buffer allocates nothing per response. Each record is written whole or
//! not at all; [`Writer::mark`] and [`Writer::rollback`] let the caller drop
//! a whole RRset that does not fit.

use crate::message::{HEADER_LEN, Header, flags, response_flags};
use crate::rdata::{self, RdataPiece};
use crate::types::Rcode;
use crate::types::{Class, RType};

/// Compression targets remembered per message; later names beyond this are
/// simply written in full. Most responses are built from pre-encoded
/// records ([`crate::encoded`]) and need none, so the table stays small.
const MAX_TARGETS: usize = 48;
/// Pointers can only reach the first 16 KiB of a message.
pub const MAX_POINTER: usize = 0x3FFF;

/// The message sections that hold records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    Answer = 0,
    Authority = 1,
    Additional = 2,
}

pub use crate::types::Full;

/// A point to roll back to.
#[derive(Clone, Copy, Debug)]
pub struct Mark {
    len: usize,
    counts: [u16; 3],
    targets: usize,
}

pub struct Writer<'a> {
    buf: &'a mut Vec<u8>,
    limit: usize,
    counts: [u16; 3],
    section: Section,
    /// Offsets where a name, or the rest of one, was written in full.
    targets: [u16; MAX_TARGETS],
    /// Uncompressed length of the name from each target on: only a suffix
    /// of the same length can match, which rules out most targets cheaply.
    target_lens: [u8; MAX_TARGETS],
    ntargets: usize,
    /// A question name copied verbatim whose labels are not yet targets:
    /// registered only if a name is ever compressed (most responses are
    /// built from pre-encoded records and never need them).
    pending_question: Option<(usize, usize)>,
    /// How many of the first targets are the question's (never rolled back).
    question_targets: usize,
    /// Names point only at names of the same case: a transfer carries the
    /// zone's spelling (a consumer names a catalog member after it).
    exact_case: bool,
}

/// Writes a pointer to `target` into the two bytes at `at`.
#[inline(always)]
pub fn put_pointer(bytes: &mut [u8], at: usize, target: u16) {
    bytes[at..at + 2].copy_from_slice(&(0xC000 | target).to_be_bytes());
}

impl<'a> Writer<'a> {
    /// Starts a message in `buf` (cleared) that may grow to `limit` octets.
    /// The header is written by [`Writer::finish`].
    pub fn new(buf: &'a mut Vec<u8>, limit: usize) -> Writer<'a> {
        buf.clear();
        buf.resize(HEADER_LEN, 0);
        Writer {
            buf,
            limit,
            counts: [0; 3],
            section: Section::Answer,
            targets: [0; MAX_TARGETS],
            target_lens: [0; MAX_TARGETS],
            ntargets: 0,
            pending_question: None,
            question_targets: 0,
            exact_case: false,
        }
    }

    /// Compresses a name only against names written in the same case
    /// (zone transfers, as BIND writes them); answers to queries point at
    /// any case, as every server's do.
    pub fn preserve_case(&mut self) {
        self.exact_case = true;
    }

    /// Lowers or raises the size limit (e.g. to keep room for OPT).
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.len() <= HEADER_LEN
    }

    /// Writes the question: `qname` exactly as the query had it.
    pub fn question(&mut self, qname: &[u8], qtype: RType, qclass: Class) {
        self.write_name(qname, true);
        self.buf.extend_from_slice(&qtype.0.to_be_bytes());
        self.buf.extend_from_slice(&qclass.0.to_be_bytes());
    }

    /// Copies a question section verbatim from the query (its names are
    /// uncompressed in any sane query; compression targets are recorded).
    pub fn question_raw(&mut self, raw: &[u8]) {
        let start = self.buf.len();
        self.buf.extend_from_slice(raw);
        self.pending_question = Some((start, start + raw.len()));
    }

    /// Makes the labels of a verbatim question name compression targets.
    fn register_question(&mut self) {
        let Some((start, limit)) = self.pending_question.take() else {
            return;
        };
        // Only an uncompressed question name is remembered.
        let mut end = start;
        while end < limit && self.buf[end] != 0 {
            if self.buf[end] & 0xC0 != 0 {
                return;
            }
            end += 1 + self.buf[end] as usize;
        }
        if end < limit {
            self.add_targets(start, end - start, end + 1 - start);
            self.question_targets = self.ntargets;
        }
    }

    pub fn section(&mut self, section: Section) {
        self.section = section;
    }

    pub fn mark(&self) -> Mark {
        Mark {
            len: self.buf.len(),
            counts: self.counts,
            targets: self.ntargets,
        }
    }

    pub fn rollback(&mut self, mark: Mark) {
        self.buf.truncate(mark.len);
        self.counts = mark.counts;
        // Targets registered since the mark may point past the new end, but
        // the lazily registered question's (always the first) never do.
        self.ntargets = mark.targets.max(self.question_targets);
    }

    /// Appends one record; its owner and (for the types that allow it) the
    /// names in its RDATA are compressed.
    pub fn record(
        &mut self,
        owner: &[u8],
        rtype: RType,
        class: Class,
        ttl: u32,
        rdata: &[u8],
    ) -> Result<(), Full> {
        let mark = self.mark();
        self.write_name(owner, true);
        self.buf.extend_from_slice(&rtype.0.to_be_bytes());
        self.buf.extend_from_slice(&class.0.to_be_bytes());
        self.buf.extend_from_slice(&ttl.to_be_bytes());
        let len_at = self.buf.len();
        self.buf.extend_from_slice(&[0, 0]);
        self.write_rdata(rtype, rdata);
        let rdlen = self.buf.len() - len_at - 2;
        if self.buf.len() > self.limit || rdlen > u16::MAX as usize {
            self.rollback(mark);
            return Err(Full);
        }
        self.buf[len_at..len_at + 2].copy_from_slice(&(rdlen as u16).to_be_bytes());
        self.counts[self.section as usize] += 1;
        Ok(())
    }

    /// Appends pre-built record bytes (e.g. an OPT record) counted in the
    /// current section; no compression.
    pub fn raw_record(&mut self, bytes: &[u8]) -> Result<(), Full> {
        if self.buf.len() + bytes.len() > self.limit {
            return Err(Full);
        }
        self.buf.extend_from_slice(bytes);
        self.counts[self.section as usize] += 1;
        Ok(())
    }

    /// Appends bytes that are part of a record being written piecewise
    /// (see [`crate::encoded`]); the caller counts the record when done.
    pub fn raw_bytes(&mut self, bytes: &[u8]) -> Result<(), Full> {
        if self.buf.len() + bytes.len() > self.limit {
            return Err(Full);
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    /// Appends a compression pointer to `at`.
    pub fn raw_pointer(&mut self, at: u16) -> Result<(), Full> {
        debug_assert!(at as usize <= MAX_POINTER);
        self.raw_bytes(&(0xC000 | at).to_be_bytes())
    }

    /// Overwrites the two bytes at `at` with a pointer to `target`.
    pub fn patch_pointer(&mut self, at: usize, target: u16) {
        put_pointer(self.buf, at, target);
    }

    /// What was written from `from` on, to patch in place. Patching
    /// through this slice rather than [`Writer::patch_pointer`] lets the
    /// compiler keep its bounds in registers: a byte stored through the
    /// buffer might otherwise be the buffer's own length.
    pub fn written_mut(&mut self, from: usize) -> &mut [u8] {
        &mut self.buf[from..]
    }

    /// Counts one record, written piecewise, in the current section.
    pub fn count_record(&mut self) {
        self.counts[self.section as usize] += 1;
    }

    /// Counts `n` records, written piecewise, in the current section.
    pub fn count_records(&mut self, n: u16) {
        self.counts[self.section as usize] += n;
    }

    /// Number of records written so far in `section`.
    pub fn count(&self, section: Section) -> u16 {
        self.counts[section as usize]
    }

    /// Writes the header with the section counts; returns the message length.
    pub fn finish(self, id: u16, flags: u16, qdcount: u16) -> usize {
        let header = Header {
            id,
            flags,
            qdcount,
            ancount: self.counts[0],
            nscount: self.counts[1],
            arcount: self.counts[2],
        };
        header.write(&mut self.buf[..HEADER_LEN]);
        self.buf.len()
    }

    fn write_rdata(&mut self, rtype: RType, rdata: &[u8]) {
        if !rtype.rdata_names_compressible() {
            self.buf.extend_from_slice(rdata);
            return;
        }
        for piece in rdata::compressible_pieces(rtype, rdata) {
            match piece {
                RdataPiece::Octets(octets) => self.buf.extend_from_slice(octets),
                RdataPiece::Name(name) => self.write_name(name, true),
            }
        }
    }

    /// Writes an uncompressed wire name, replacing its longest known suffix
    /// by a pointer.
    fn write_name(&mut self, name: &[u8], compress: bool) {
        // Labels become compression targets only once the whole name is
        // written: a half-written name must never be matched.
        if compress {
            self.register_question();
        }
        let first_label_at = self.buf.len();
        let mut i = 0;
        while name[i] != 0 {
            if compress && let Some(target) = self.find_suffix(&name[i..]) {
                self.buf.push(0xC0 | (target >> 8) as u8);
                self.buf.push(target as u8);
                self.add_targets(first_label_at, i, name.len());
                return;
            }
            let len = name[i] as usize;
            self.buf.extend_from_slice(&name[i..i + 1 + len]);
            i += 1 + len;
        }
        self.buf.push(0);
        self.add_targets(first_label_at, i, name.len());
    }

    /// Records each label of the `literal_len` octets written at `start`,
    /// the start of a name `name_len` octets long uncompressed.
    fn add_targets(&mut self, start: usize, literal_len: usize, name_len: usize) {
        let mut at = start;
        while at < start + literal_len {
            let remaining = name_len - (at - start);
            if at <= MAX_POINTER && self.ntargets < MAX_TARGETS {
                self.targets[self.ntargets] = at as u16;
                self.target_lens[self.ntargets] = remaining as u8;
                self.ntargets += 1;
            }
            at += 1 + self.buf[at] as usize;
        }
    }

    fn find_suffix(&self, suffix: &[u8]) -> Option<u16> {
        let len = suffix.len() as u8;
        (0..self.ntargets)
            .filter(|&k| self.target_lens[k] == len)
            .map(|k| self.targets[k])
            .find(|&t| name_at_equals(self.buf, t as usize, suffix, self.exact_case))
    }
}

/// Whether the (possibly compressed) name in `msg` at `pos` equals the
/// uncompressed `name`, ignoring ASCII case unless `exact_case`. `msg` was
/// written by us, so its pointers are valid and point backwards.
fn name_at_equals(msg: &[u8], mut pos: usize, name: &[u8], exact_case: bool) -> bool {
    let mut i = 0;
    loop {
        let len = msg[pos];
        if len & 0xC0 == 0xC0 {
            pos = (((len & 0x3F) as usize) << 8) | msg[pos + 1] as usize;
            continue;
        }
        let len = len as usize;
        if name[i] as usize != len {
            return false;
        }
        if len == 0 {
            return true;
        }
        let (written, wanted) = (&msg[pos + 1..pos + 1 + len], &name[i + 1..i + 1 + len]);
        let same = match exact_case {
            true => written == wanted,
            false => written.eq_ignore_ascii_case(wanted),
        };
        if !same {
            return false;
        }
        pos += 1 + len;
        i += 1 + len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;
    use crate::name::Name;

    fn wire(s: &str) -> Vec<u8> {
        Name::parse(s).unwrap().as_wire().to_vec()
    }

    #[test]
    fn owner_names_compress_against_question() {
        let mut buf = Vec::new();
        let mut w = Writer::new(&mut buf, 512);
        let q = wire("WWW.example.com");
        w.question(&q, RType::A, Class::IN);
        w.record(
            &wire("www.example.com"),
            RType::A,
            Class::IN,
            60,
            &[1, 2, 3, 4],
        )
        .unwrap();
        w.record(
            &wire("mail.example.com"),
            RType::A,
            Class::IN,
            60,
            &[5, 6, 7, 8],
        )
        .unwrap();
        let len = w.finish(7, 0x8400, 1);
        // Answer owner is a bare pointer to the question name at 12.
        let first = 12 + q.len() + 4;
        assert_eq!(&buf[first..first + 2], &[0xC0, 12]);
        // "mail" label then a pointer to "example.com" at 16.
        let second = first + 2 + 10 + 4;
        assert_eq!(&buf[second..second + 7], b"\x04mail\xC0\x10");
        assert_eq!(len, buf.len());
        let msg = Message::parse(&buf).unwrap();
        assert_eq!(msg.answers.len(), 2);
        assert_eq!(
            msg.answers[1].name,
            Name::parse("mail.example.com").unwrap()
        );
    }

    #[test]
    fn record_over_limit_is_not_written() {
        let mut buf = Vec::new();
        let mut w = Writer::new(&mut buf, 40);
        w.question(&wire("a.example"), RType::TXT, Class::IN);
        let before = w.len();
        assert_eq!(
            w.record(&wire("a.example"), RType::TXT, Class::IN, 1, &[30; 31]),
            Err(Full)
        );
        assert_eq!(w.len(), before);
        assert_eq!(w.count(Section::Answer), 0);
    }

    #[test]
    fn repeated_labels_never_match_a_half_written_name() {
        let mut buf = Vec::new();
        let mut w = Writer::new(&mut buf, 512);
        w.question(&wire("a.a.a.example"), RType::A, Class::IN);
        w.record(&wire("a.a.a.a.a.b"), RType::A, Class::IN, 1, &[1; 4])
            .unwrap();
        w.record(&wire("b.b.b"), RType::A, Class::IN, 1, &[1; 4])
            .unwrap();
        let len = w.finish(1, 0x8000, 1);
        let msg = Message::parse(&buf[..len]).unwrap();
        assert_eq!(msg.answers[0].name, Name::parse("a.a.a.a.a.b").unwrap());
        assert_eq!(msg.answers[1].name, Name::parse("b.b.b").unwrap());
    }

    #[test]
    fn rollback_drops_a_partial_rrset() {
        let mut buf = Vec::new();
        let mut w = Writer::new(&mut buf, 512);
        w.question(&wire("a.example"), RType::A, Class::IN);
        let mark = w.mark();
        w.record(&wire("a.example"), RType::A, Class::IN, 1, &[1; 4])
            .unwrap();
        w.rollback(mark);
        assert_eq!(w.count(Section::Answer), 0);
        assert_eq!(w.len(), mark.len);
    }
}

/// The one response Heron writes without an answer: the query's header
/// turned into a response with `rcode`, the question echoed when
/// `question` (the query's question section, as sent) is not empty, AA
/// only if `authoritative`. Errors, refusals and a NOTIFY's acknowledgement
/// are all written here.
pub fn header_response(
    out: &mut Vec<u8>,
    query: &Header,
    question: &[u8],
    rcode: Rcode,
    authoritative: bool,
) {
    let mut w = Writer::new(out, u16::MAX as usize);
    let qdcount = if question.is_empty() {
        0
    } else {
        w.question_raw(question);
        1
    };
    let aa = if authoritative { flags::AA } else { 0 };
    let flags = response_flags(query.flags) | aa | (rcode.0 & 0xF);
    w.finish(query.id, flags, qdcount);
}

#[cfg(test)]
mod header_response_tests {
    use super::*;

    fn query_header(flags: u16) -> Header {
        Header {
            id: 0x1234,
            flags,
            qdcount: 1,
            ..Header::default()
        }
    }

    #[test]
    fn copies_opcode_rd_cd_and_sets_aa_only_when_asked() {
        // NOTIFY opcode, RD, CD, and AD/TC/Z which a response must not echo.
        let query =
            query_header((4 << 11) | flags::RD | flags::CD | flags::AD | flags::TC | flags::Z);
        let question = [0u8, 0, 6, 0, 1];
        let mut out = Vec::new();
        header_response(&mut out, &query, &question, Rcode::NOTAUTH, false);
        let h = Header::read(&out).unwrap();
        assert_eq!(h.id, 0x1234);
        assert_eq!(h.flags, flags::QR | (4 << 11) | flags::RD | flags::CD | 9);
        assert_eq!((h.qdcount, h.ancount, h.nscount, h.arcount), (1, 0, 0, 0));
        assert_eq!(&out[HEADER_LEN..], &question);
        out.clear();
        header_response(&mut out, &query, &question, Rcode::NOERROR, true);
        assert!(Header::read(&out).unwrap().has(flags::AA));
    }

    #[test]
    fn without_a_question_it_is_a_bare_header() {
        let mut out = Vec::new();
        header_response(&mut out, &query_header(0), &[], Rcode::FORMERR, false);
        assert_eq!(out.len(), HEADER_LEN);
        let h = Header::read(&out).unwrap();
        assert_eq!((h.qdcount, h.rcode()), (0, 1));
    }
}
