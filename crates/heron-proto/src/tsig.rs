//! TSIG: transaction signatures with shared secret keys (RFC 8945).
//!
//! A TSIG RR, the last record of a message, carries an HMAC over the
//! message and a few of the RR's own fields (the "TSIG variables", RFC 8945
//! 4.3.3). This module reads and checks that RR, verifies signed requests
//! ([`verify_request`]), builds the TSIG an error response must carry
//! ([`error_response_tsig`]), signs responses and response streams
//! ([`ResponseSigner`]), and does the same for the client side
//! ([`sign_request`], [`ResponseVerifier`]).
//!
//! Every MAC comparison is constant time (`hmac`'s `verify_truncated_left`).
//! Nothing here reads the clock: callers pass `now` in seconds since the
//! epoch, so tests can move time freely.
//!
//! Choices where the RFC leaves room or is easy to misread:
//!
//! * Order of the request checks is RFC 8945 5.2: the TSIG RR must parse
//!   (FORMERR), then key and algorithm (BADKEY), the MAC length rules of
//!   5.2.2.1 (FORMERR), the MAC (BADSIG), and only then the time (BADTIME).
//!   Checking the time after the MAC means only an authentic request gets
//!   a signed BADTIME answer.
//! * A MAC shorter than the RFC minimum, max(10, half the hash), is FORMERR
//!   (5.2.2.1 case 3), not BADTRUNC: BADTRUNC (5.2.4) is for a truncation
//!   the RFC allows but local policy does not, and the local policy here
//!   accepts everything the RFC allows. [`TsigError::BadTrunc`] exists for
//!   error responses built by a caller with a stricter policy and for
//!   reading a peer's error.
//! * A BADTIME response repeats the request's Time Signed and puts the
//!   server's time in Other Data, as BIND and Knot do: the client's own
//!   time check then passes and it can still see the server's clock. The
//!   unsigned BADKEY and BADSIG responses repeat it too (as Knot does);
//!   the RFC leaves their Time Signed open.
//! * Responses are signed with the full MAC, so they are never shorter than
//!   the request's (RFC 8945 6), and with the default fudge.
//! * RFC 8945 5.3.1 has servers sign every message of a stream; clients
//!   must still accept up to 99 unsigned messages between signed ones.
//!   [`ResponseSigner::pass_unsigned`] makes such a stream (for tests and
//!   for old-style peers); [`ResponseVerifier`] accepts one.
//! * Replay protection (5.2.3) is the caller's: this module keeps no state
//!   between requests.

use std::fmt;

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use hmac::{Hmac, Mac};

use crate::message::{HEADER_LEN, Header};
use crate::name::{MAX_NAME_LEN, Name, NameError};
use crate::types::{Class, RType, Rcode};

/// Allowed clock difference, in seconds, when this module signs (RFC 8945
/// 10 recommends 300).
pub const DEFAULT_FUDGE: u16 = 300;

/// Most clock difference, in seconds, accepted from a signed message
/// whatever fudge it gives: a signer naming 65,535 would otherwise keep a
/// captured copy valid, and in the replay cache, for 18 hours.
pub const MAX_ACCEPTED_FUDGE: u16 = DEFAULT_FUDGE;

/// How many unsigned messages a client accepts between two signed ones of a
/// stream (RFC 8945 5.3.1).
pub const MAX_UNSIGNED_RUN: usize = 99;

/// Time Signed is a 48-bit count of seconds.
const TIME_MASK: u64 = (1 << 48) - 1;

/// Fixed part of an RR after its owner: type, class, TTL, RDLENGTH.
const RR_FIXED_LEN: usize = 10;

/// Fixed part of TSIG RDATA besides the algorithm name and the two
/// variable fields: time (6), fudge, MAC size, original ID, error, other
/// length (2 each).
const RDATA_FIXED_LEN: usize = 16;

/// The TSIG algorithms of RFC 8945 6 that this module implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    HmacMd5,
    HmacSha1,
    HmacSha224,
    HmacSha256,
    HmacSha384,
    HmacSha512,
}

impl Algorithm {
    pub const ALL: [Algorithm; 6] = [
        Algorithm::HmacMd5,
        Algorithm::HmacSha1,
        Algorithm::HmacSha224,
        Algorithm::HmacSha256,
        Algorithm::HmacSha384,
        Algorithm::HmacSha512,
    ];

    /// The algorithm whose wire name is `name` (case-insensitive).
    pub fn from_name(name: &Name) -> Option<Algorithm> {
        Algorithm::ALL
            .into_iter()
            .find(|a| a.wire().eq_ignore_ascii_case(name.as_wire()))
    }

    /// The algorithm named as in configuration files: `hmac-sha256`, with or
    /// without a final dot, any case; MD5 also by its wire name
    /// `hmac-md5.sig-alg.reg.int`.
    pub fn from_text(s: &str) -> Option<Algorithm> {
        let s = s.strip_suffix('.').unwrap_or(s);
        if s.eq_ignore_ascii_case("hmac-md5.sig-alg.reg.int") {
            return Some(Algorithm::HmacMd5);
        }
        Algorithm::ALL
            .into_iter()
            .find(|a| a.text().eq_ignore_ascii_case(s))
    }

    /// The name that identifies the algorithm in a TSIG RR.
    pub fn name(self) -> Name {
        Name::from_wire(self.wire()).expect("algorithm names are valid wire names")
    }

    /// The name used in configuration files and by `dig -y`.
    pub fn text(self) -> &'static str {
        match self {
            Algorithm::HmacMd5 => "hmac-md5",
            Algorithm::HmacSha1 => "hmac-sha1",
            Algorithm::HmacSha224 => "hmac-sha224",
            Algorithm::HmacSha256 => "hmac-sha256",
            Algorithm::HmacSha384 => "hmac-sha384",
            Algorithm::HmacSha512 => "hmac-sha512",
        }
    }

    /// Length of the untruncated MAC.
    pub fn mac_len(self) -> usize {
        match self {
            Algorithm::HmacMd5 => 16,
            Algorithm::HmacSha1 => 20,
            Algorithm::HmacSha224 => 28,
            Algorithm::HmacSha256 => 32,
            Algorithm::HmacSha384 => 48,
            Algorithm::HmacSha512 => 64,
        }
    }

    /// Shortest MAC a receiver may accept: the larger of 10 octets and half
    /// the full length (RFC 8945 5.2.2.1).
    pub fn min_mac_len(self) -> usize {
        10.max(self.mac_len() / 2)
    }

    /// The wire name, lower case (RFC 8945 6, table 3).
    fn wire(self) -> &'static [u8] {
        match self {
            Algorithm::HmacMd5 => b"\x08hmac-md5\x07sig-alg\x03reg\x03int\x00",
            Algorithm::HmacSha1 => b"\x09hmac-sha1\x00",
            Algorithm::HmacSha224 => b"\x0bhmac-sha224\x00",
            Algorithm::HmacSha256 => b"\x0bhmac-sha256\x00",
            Algorithm::HmacSha384 => b"\x0bhmac-sha384\x00",
            Algorithm::HmacSha512 => b"\x0bhmac-sha512\x00",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())
    }
}

/// A shared secret with its name and algorithm.
#[derive(Clone)]
pub struct Key {
    /// Lower-cased, so lookups and the digest see one form.
    pub name: Name,
    pub algorithm: Algorithm,
    secret: Vec<u8>,
}

impl Key {
    /// The same name, algorithm and secret: a configuration read again
    /// that left the key as it was.
    pub fn same_as(&self, other: &Key) -> bool {
        self.name == other.name && self.algorithm == other.algorithm && self.secret == other.secret
    }
}

/// Why a key from a configuration could not be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyError {
    Name(NameError),
    /// The secret is not base64.
    Base64,
    /// An empty secret would make the HMAC a plain, unkeyed hash.
    EmptySecret,
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::Name(e) => write!(f, "bad key name: {e}"),
            KeyError::Base64 => f.write_str("key secret is not valid base64"),
            KeyError::EmptySecret => f.write_str("key secret is empty"),
        }
    }
}

impl std::error::Error for KeyError {}

/// Base64 as BIND and Knot write secrets; padding optional on input, since
/// hand-edited configuration files lose it.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

impl Key {
    pub fn new(name: Name, algorithm: Algorithm, secret: Vec<u8>) -> Key {
        Key {
            name: name.to_lowercase(),
            algorithm,
            secret,
        }
    }

    /// A key as configuration files give it. Blanks inside the base64 text
    /// are ignored (long secrets get wrapped).
    pub fn from_base64(
        name: &str,
        algorithm: Algorithm,
        secret_b64: &str,
    ) -> Result<Key, KeyError> {
        let name = Name::parse(name).map_err(KeyError::Name)?;
        let compact: String = secret_b64
            .chars()
            .filter(|c| !c.is_ascii_whitespace())
            .collect();
        let secret = BASE64.decode(compact).map_err(|_| KeyError::Base64)?;
        if secret.is_empty() {
            return Err(KeyError::EmptySecret);
        }
        Ok(Key::new(name, algorithm, secret))
    }

    /// Base64 text of a new secret for `heron keygen`: the first
    /// `algorithm.mac_len()` octets of `random` (a secret as long as the
    /// hash output is what RFC 8945 8 asks for). The caller reads them from
    /// the system's random source.
    pub fn generate_secret_base64(algorithm: Algorithm, random: &[u8]) -> String {
        let len = random.len().min(algorithm.mac_len());
        BASE64.encode(&random[..len])
    }

    /// Wire length of a TSIG RR this key signs with: full MAC, no other
    /// data. Callers keep this much room below their size limit.
    pub fn rr_len(&self) -> usize {
        self.name.wire_len()
            + RR_FIXED_LEN
            + self.algorithm.wire().len()
            + RDATA_FIXED_LEN
            + self.algorithm.mac_len()
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Key")
            .field("name", &self.name)
            .field("algorithm", &self.algorithm)
            .field("secret", &"<hidden>")
            .finish()
    }
}

/// Where the server finds the key a request names.
pub trait KeyRing {
    fn key(&self, name: &Name) -> Option<&Key>;
}

/// A linear search: servers have a handful of keys. Names compare without
/// regard to case.
impl KeyRing for [Key] {
    fn key(&self, name: &Name) -> Option<&Key> {
        self.iter().find(|k| k.name == *name)
    }
}

impl KeyRing for Vec<Key> {
    fn key(&self, name: &Name) -> Option<&Key> {
        self.as_slice().key(name)
    }
}

/// A ring of one key: a client, or a test.
impl KeyRing for Key {
    fn key(&self, name: &Name) -> Option<&Key> {
        (self.name == *name).then_some(self)
    }
}

impl<const N: usize> KeyRing for [Key; N] {
    fn key(&self, name: &Name) -> Option<&Key> {
        self.as_slice().key(name)
    }
}

/// What went wrong with a TSIG, on either side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TsigError {
    /// The TSIG RR is malformed or misplaced, or its MAC has a length the
    /// RFC forbids: FORMERR, no TSIG in the answer.
    FormErr,
    BadSig,
    BadKey,
    BadTime,
    BadTrunc,
    /// Client side: a response that must be signed is not.
    Unsigned,
}

impl TsigError {
    /// The value for the TSIG RR's Error field. `FormErr` maps to FORMERR
    /// and `Unsigned` to 0; neither is ever written into a TSIG RR.
    pub fn rcode(self) -> u16 {
        match self {
            TsigError::FormErr => Rcode::FORMERR.0,
            TsigError::BadSig => Rcode::BADSIG.0,
            TsigError::BadKey => Rcode::BADKEY.0,
            TsigError::BadTime => Rcode::BADTIME.0,
            TsigError::BadTrunc => Rcode::BADTRUNC.0,
            TsigError::Unsigned => 0,
        }
    }

    /// The RCODE for the header of the error response: FORMERR or NOTAUTH
    /// (RFC 8945 5.2).
    pub fn response_rcode(self) -> Rcode {
        match self {
            TsigError::FormErr => Rcode::FORMERR,
            _ => Rcode::NOTAUTH,
        }
    }

    /// Reads a peer's Error field (non-zero). Codes this module does not
    /// know make the response unusable all the same: FormErr.
    fn from_field(error: u16) -> TsigError {
        match Rcode(error) {
            Rcode::BADSIG => TsigError::BadSig,
            Rcode::BADKEY => TsigError::BadKey,
            Rcode::BADTIME => TsigError::BadTime,
            Rcode::BADTRUNC => TsigError::BadTrunc,
            _ => TsigError::FormErr,
        }
    }
}

impl fmt::Display for TsigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TsigError::FormErr => "malformed TSIG record",
            TsigError::BadSig => "TSIG MAC does not match (BADSIG)",
            TsigError::BadKey => "unknown TSIG key or algorithm (BADKEY)",
            TsigError::BadTime => "TSIG time outside the fudge (BADTIME)",
            TsigError::BadTrunc => "TSIG MAC truncated too much (BADTRUNC)",
            TsigError::Unsigned => "message is not signed",
        })
    }
}

impl std::error::Error for TsigError {}

/// A TSIG RR as read from the end of a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TsigRecord {
    pub key_name: Name,
    pub algorithm: Name,
    /// Seconds since the epoch, 48 bits.
    pub time_signed: u64,
    pub fudge: u16,
    pub mac: Vec<u8>,
    pub original_id: u16,
    pub error: u16,
    pub other: Vec<u8>,
    /// Offset of the TSIG RR in the message; it runs to the end.
    pub start: usize,
}

impl TsigRecord {
    fn variables(&self) -> Variables<'_> {
        Variables {
            key_name: &self.key_name,
            algorithm: &self.algorithm,
            time_signed: self.time_signed,
            fudge: self.fudge,
            error: self.error,
            other: &self.other,
        }
    }

    /// Whether `now` lies within Time Signed ± Fudge, the fudge at most
    /// [`MAX_ACCEPTED_FUDGE`].
    fn in_time(&self, now: u64) -> bool {
        (now & TIME_MASK).abs_diff(self.time_signed) <= u64::from(self.accepted_fudge())
    }

    fn accepted_fudge(&self) -> u16 {
        self.fudge.min(MAX_ACCEPTED_FUDGE)
    }
}

/// Finds the TSIG RR of a message. `Ok(None)`: well-formed and unsigned.
/// FormErr: the message does not parse, or a TSIG RR is not the last record
/// of the additional section (which also rules out two), or its class is
/// not ANY, or its RDATA does not add up to RDLENGTH.
pub fn find(msg: &[u8]) -> Result<Option<TsigRecord>, TsigError> {
    locate(msg)?.map(|start| read_tsig(msg, start)).transpose()
}

/// Takes the TSIG RR off the end of `msg` (ARCOUNT one less): the message
/// as it was before it was signed, as a relay that signs it again with
/// another key needs it. Returns whether there was one; FormErr as
/// [`find`].
pub fn strip(msg: &mut Vec<u8>) -> Result<bool, TsigError> {
    let Some(start) = locate(msg)? else {
        return Ok(false);
    };
    msg.truncate(start);
    let arcount = u16::from_be_bytes([msg[10], msg[11]]) - 1;
    msg[10..12].copy_from_slice(&arcount.to_be_bytes());
    Ok(true)
}

/// Where the TSIG RR of `msg` starts, checked as [`find`] says.
fn locate(msg: &[u8]) -> Result<Option<usize>, TsigError> {
    let header = Header::read(msg).ok_or(TsigError::FormErr)?;
    let mut pos = skip_questions(msg, header.qdcount)?;
    let total =
        usize::from(header.ancount) + usize::from(header.nscount) + usize::from(header.arcount);
    let mut tsig_at = None;
    for i in 0..total {
        let start = pos;
        let (rtype, end) = skip_record(msg, pos)?;
        pos = end;
        if rtype == RType::TSIG {
            if i + 1 != total || header.arcount == 0 {
                return Err(TsigError::FormErr);
            }
            tsig_at = Some(start);
        }
    }
    if pos != msg.len() {
        return Err(TsigError::FormErr);
    }
    Ok(tsig_at)
}

fn skip_questions(msg: &[u8], count: u16) -> Result<usize, TsigError> {
    let mut pos = HEADER_LEN;
    for _ in 0..count {
        pos = skip_name(msg, pos)? + 4;
    }
    if pos > msg.len() {
        return Err(TsigError::FormErr);
    }
    Ok(pos)
}

/// Skips one RR; returns its type and the position after it.
fn skip_record(msg: &[u8], pos: usize) -> Result<(RType, usize), TsigError> {
    let end = skip_name(msg, pos)?;
    let mut r = Cursor::new(msg, end);
    let rtype = RType(r.u16()?);
    r.take(6)?; // class, TTL
    let rdlen = usize::from(r.u16()?);
    r.take(rdlen)?;
    Ok((rtype, r.pos))
}

/// The position after the name at `pos`, without following compression
/// pointers: finding the TSIG RR needs only where records end, and
/// whoever uses the message reads its names in full. Following every
/// owner's pointers took half of verifying a zone transfer.
fn skip_name(msg: &[u8], mut pos: usize) -> Result<usize, TsigError> {
    loop {
        let len = usize::from(*msg.get(pos).ok_or(TsigError::FormErr)?);
        match len & 0xC0 {
            0x00 if len == 0 => return Ok(pos + 1),
            0x00 => pos += 1 + len,
            0xC0 if pos + 1 < msg.len() => return Ok(pos + 2),
            _ => return Err(TsigError::FormErr),
        }
    }
}

/// Reads the TSIG RR at `start`, the last record of `msg`.
fn read_tsig(msg: &[u8], start: usize) -> Result<TsigRecord, TsigError> {
    let (key_name, end) = Name::read(msg, start).map_err(|_| TsigError::FormErr)?;
    let mut r = Cursor::new(msg, end);
    r.take(2)?; // type, known to be TSIG
    if Class(r.u16()?) != Class::ANY {
        return Err(TsigError::FormErr);
    }
    r.take(4)?; // TTL: MUST be 0, but its value changes nothing
    let rdlen = usize::from(r.u16()?);
    let rdata = r.take(rdlen)?;
    let mut r = Cursor::new(rdata, 0);
    let (algorithm, after) = Name::read_uncompressed(rdata, 0).map_err(|_| TsigError::FormErr)?;
    r.pos = after;
    let time_signed = r.u48()?;
    let fudge = r.u16()?;
    let mac_len = usize::from(r.u16()?);
    let mac = r.take(mac_len)?.to_vec();
    let original_id = r.u16()?;
    let error = r.u16()?;
    let other_len = usize::from(r.u16()?);
    let other = r.take(other_len)?.to_vec();
    if r.pos != rdata.len() {
        return Err(TsigError::FormErr);
    }
    Ok(TsigRecord {
        key_name,
        algorithm,
        time_signed,
        fudge,
        mac,
        original_id,
        error,
        other,
        start,
    })
}

/// A bounds-checked reader; running past the end is FormErr.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(buf: &'a [u8], pos: usize) -> Cursor<'a> {
        Cursor { buf, pos }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], TsigError> {
        let bytes = self
            .buf
            .get(self.pos..self.pos + n)
            .ok_or(TsigError::FormErr)?;
        self.pos += n;
        Ok(bytes)
    }

    fn u16(&mut self) -> Result<u16, TsigError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u48(&mut self) -> Result<u64, TsigError> {
        let b = self.take(6)?;
        Ok(b.iter().fold(0, |acc, &x| (acc << 8) | u64::from(x)))
    }
}

/// What [`verify_request`] found in a good signed request, and what the
/// response signer needs.
#[derive(Clone, Debug)]
pub struct Verified {
    pub key: Key,
    /// The request's MAC as received (possibly truncated): the first
    /// response's digest starts with it.
    pub mac: Vec<u8>,
    pub time_signed: u64,
    /// The request's fudge, at most [`MAX_ACCEPTED_FUDGE`]: after
    /// `time_signed + fudge` the time check refuses it, so a replay cache
    /// need not remember it longer.
    pub fudge: u16,
}

/// Why a signed request was refused, with what the error response's TSIG
/// needs (RFC 8945 5.3.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TsigFailure {
    pub error: TsigError,
    /// The request's key and algorithm names; `None` when its TSIG RR could
    /// not be read (FormErr).
    pub key_name: Option<Name>,
    pub algorithm: Option<Name>,
    /// The request's MAC, kept only where the response is signed
    /// (BADTIME): its digest covers the request MAC.
    pub request_mac: Option<Vec<u8>>,
    /// The request's Time Signed (0 for FormErr).
    pub time_signed: u64,
}

impl TsigFailure {
    fn formerr() -> TsigFailure {
        TsigFailure {
            error: TsigError::FormErr,
            key_name: None,
            algorithm: None,
            request_mac: None,
            time_signed: 0,
        }
    }

    fn of(tsig: &TsigRecord, error: TsigError) -> TsigFailure {
        TsigFailure {
            error,
            key_name: Some(tsig.key_name.clone()),
            algorithm: Some(tsig.algorithm.clone()),
            request_mac: (error == TsigError::BadTime).then(|| tsig.mac.clone()),
            time_signed: tsig.time_signed,
        }
    }
}

impl fmt::Display for TsigFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.key_name {
            Some(name) => write!(f, "{} (key {name})", self.error),
            None => write!(f, "{}", self.error),
        }
    }
}

impl std::error::Error for TsigFailure {}

/// Verifies a request (RFC 8945 5.2). `Ok(None)` if it is unsigned.
pub fn verify_request<K: KeyRing + ?Sized>(
    msg: &[u8],
    keys: &K,
    now: u64,
) -> Result<Option<Verified>, TsigFailure> {
    let Some(tsig) = find(msg).map_err(|_| TsigFailure::formerr())? else {
        return Ok(None);
    };
    verify_found(msg, tsig, keys, now).map(Some)
}

/// [`verify_request`] for a message already read by
/// [`parse_query`](crate::message::parse_query), which found where its
/// TSIG record starts (`Query::tsig`; None: unsigned): the message is not
/// walked again.
pub fn verify_request_at<K: KeyRing + ?Sized>(
    msg: &[u8],
    tsig_at: Option<usize>,
    keys: &K,
    now: u64,
) -> Result<Option<Verified>, TsigFailure> {
    let Some(start) = tsig_at else {
        return Ok(None);
    };
    // The query reader takes a TSIG last in any section; it belongs in
    // the additional one.
    if Header::read(msg).is_none_or(|h| h.arcount == 0) {
        return Err(TsigFailure::formerr());
    }
    let tsig = read_tsig(msg, start).map_err(|_| TsigFailure::formerr())?;
    verify_found(msg, tsig, keys, now).map(Some)
}

/// Checks the TSIG record `tsig` read from `msg`.
fn verify_found<K: KeyRing + ?Sized>(
    msg: &[u8],
    tsig: TsigRecord,
    keys: &K,
    now: u64,
) -> Result<Verified, TsigFailure> {
    let fail = |error| TsigFailure::of(&tsig, error);
    let key = Algorithm::from_name(&tsig.algorithm)
        .and_then(|alg| keys.key(&tsig.key_name).filter(|k| k.algorithm == alg))
        .ok_or_else(|| fail(TsigError::BadKey))?;
    check_mac_len(key.algorithm, tsig.mac.len()).map_err(fail)?;
    let mut hasher = Hasher::new(key);
    digest_signed_message(&mut hasher, msg, &tsig);
    tsig.variables().digest(&mut hasher);
    if !hasher.verify(&tsig.mac) {
        return Err(fail(TsigError::BadSig));
    }
    if !tsig.in_time(now) {
        return Err(fail(TsigError::BadTime));
    }
    Ok(Verified {
        key: key.clone(),
        fudge: tsig.accepted_fudge(),
        mac: tsig.mac,
        time_signed: tsig.time_signed,
    })
}

/// RFC 8945 5.2.2.1: longer than the hash, or shorter than max(10, half
/// the hash), is FORMERR.
fn check_mac_len(algorithm: Algorithm, len: usize) -> Result<(), TsigError> {
    if len > algorithm.mac_len() || len < algorithm.min_mac_len() {
        return Err(TsigError::FormErr);
    }
    Ok(())
}

/// Appends the TSIG RR an error response carries (RFC 8945 5.3.2) to
/// `response`, a complete message whose header the caller has given the
/// RCODE [`TsigError::response_rcode`]. BADKEY and BADSIG: unsigned (empty
/// MAC), since the key cannot be trusted to sign, and Time Signed repeated
/// from the request. BADTIME and BADTRUNC: signed with the request's key,
/// the request MAC first in the digest; BADTIME repeats the request's Time
/// Signed and holds `now` in Other Data. FormErr (and `Unsigned`): nothing
/// is appended, a FORMERR answer carries no TSIG.
pub fn error_response_tsig<K: KeyRing + ?Sized>(
    response: &mut Vec<u8>,
    failure: &TsigFailure,
    keys: &K,
    now: u64,
) {
    let (Some(key_name), Some(algorithm)) = (&failure.key_name, &failure.algorithm) else {
        return;
    };
    let Some(header) = Header::read(response) else {
        return;
    };
    let now = now & TIME_MASK;
    let server_time = u48_bytes(now);
    let (time_signed, other): (u64, &[u8]) = match failure.error {
        TsigError::FormErr | TsigError::Unsigned => return,
        TsigError::BadTime => (failure.time_signed, &server_time),
        TsigError::BadKey | TsigError::BadSig => (failure.time_signed, &[]),
        TsigError::BadTrunc => (now, &[]),
    };
    let vars = Variables {
        key_name,
        algorithm,
        time_signed,
        fudge: DEFAULT_FUDGE,
        error: failure.error.rcode(),
        other,
    };
    let signing_key = match failure.error {
        TsigError::BadTime | TsigError::BadTrunc => signing_key(failure, keys),
        _ => None,
    };
    let mac = match (signing_key, &failure.request_mac) {
        (Some(key), Some(request_mac)) => {
            let mut hasher = Hasher::new(key);
            digest_prior_mac(&mut hasher, request_mac);
            hasher.update(response);
            vars.digest(&mut hasher);
            hasher.finalize()
        }
        _ => Vec::new(),
    };
    append_tsig(response, &vars, &mac, header.id);
}

/// The key that signs a BADTIME or BADTRUNC answer: the request's, if the
/// ring still has it under the same algorithm.
fn signing_key<'k, K: KeyRing + ?Sized>(failure: &TsigFailure, keys: &'k K) -> Option<&'k Key> {
    let algorithm = Algorithm::from_name(failure.algorithm.as_ref()?)?;
    keys.key(failure.key_name.as_ref()?)
        .filter(|k| k.algorithm == algorithm)
}

/// Signs a request (RFC 8945 5.1): appends a TSIG RR to `msg` with Time
/// Signed `now` and the given fudge; returns the MAC, which the client
/// hands to [`ResponseVerifier::new`]. A buffer shorter than a header is
/// left alone (and the MAC is empty).
pub fn sign_request(msg: &mut Vec<u8>, key: &Key, now: u64, fudge: u16) -> Vec<u8> {
    let Some(header) = Header::read(msg) else {
        return Vec::new();
    };
    let algorithm = key.algorithm.name();
    let vars = Variables {
        key_name: &key.name,
        algorithm: &algorithm,
        time_signed: now & TIME_MASK,
        fudge,
        error: 0,
        other: &[],
    };
    let mut hasher = Hasher::new(key);
    hasher.update(msg);
    vars.digest(&mut hasher);
    let mac = hasher.finalize();
    append_tsig(msg, &vars, &mac, header.id);
    mac
}

/// The running digest of a message stream, shared by the signer and the
/// verifier: each signed message's digest starts with the prior MAC (the
/// request's for the first) and covers the unsigned messages since.
struct Chain {
    key: Key,
    prior_mac: Vec<u8>,
    /// No message signed yet: the next digest takes all TSIG variables,
    /// later ones only the timers (RFC 8945 5.3.1).
    first: bool,
    /// The digest so far, when unsigned messages have been fed to it.
    running: Option<Hasher>,
    unsigned_run: usize,
}

impl Chain {
    fn new(key: Key, prior_mac: Vec<u8>) -> Chain {
        Chain {
            key,
            prior_mac,
            first: true,
            running: None,
            unsigned_run: 0,
        }
    }

    fn digest(&mut self) -> Hasher {
        self.running.take().unwrap_or_else(|| {
            let mut hasher = Hasher::new(&self.key);
            digest_prior_mac(&mut hasher, &self.prior_mac);
            hasher
        })
    }

    fn add_unsigned(&mut self, msg: &[u8]) {
        let mut hasher = self.digest();
        hasher.update(msg);
        self.running = Some(hasher);
        self.unsigned_run += 1;
    }

    fn signed(&mut self, mac: Vec<u8>) {
        self.prior_mac = mac;
        self.first = false;
        self.unsigned_run = 0;
    }

    /// The TSIG variables of the next signed message, or only its timers.
    fn digest_variables(&self, hasher: &mut Hasher, vars: &Variables<'_>) {
        if self.first {
            vars.digest(hasher);
        } else {
            vars.digest_timers(hasher);
        }
    }
}

/// Signs the responses to one verified request: one message, or each of a
/// zone transfer's.
pub struct ResponseSigner {
    chain: Chain,
    algorithm: Name,
}

impl ResponseSigner {
    pub fn new(verified: &Verified) -> ResponseSigner {
        ResponseSigner {
            algorithm: verified.key.algorithm.name(),
            chain: Chain::new(verified.key.clone(), verified.mac.clone()),
        }
    }

    /// Appends a TSIG RR to `msg`, a complete message, and counts it in
    /// ARCOUNT. The first message's digest covers the request MAC, the
    /// message and all TSIG variables; a later one's the prior MAC, the
    /// unsigned messages since, the message and the timers (RFC 8945
    /// 5.3.1). A buffer shorter than a header is left alone.
    pub fn sign(&mut self, msg: &mut Vec<u8>, now: u64) {
        let Some(header) = Header::read(msg) else {
            return;
        };
        let mut hasher = self.chain.digest();
        hasher.update(msg);
        let vars = Variables {
            key_name: &self.chain.key.name,
            algorithm: &self.algorithm,
            time_signed: now & TIME_MASK,
            fudge: DEFAULT_FUDGE,
            error: 0,
            other: &[],
        };
        self.chain.digest_variables(&mut hasher, &vars);
        let mac = hasher.finalize();
        append_tsig(msg, &vars, &mac, header.id);
        self.chain.signed(mac);
    }

    /// Lets `msg` go out unsigned, folding it into the next signed
    /// message's digest. RFC 8945 5.3.1 has servers sign every message, so
    /// this is for tests and old-style peers. Returns false, and takes
    /// nothing, when the message must be signed instead: nothing has been
    /// signed yet, or 99 unsigned messages have already passed.
    #[must_use]
    pub fn pass_unsigned(&mut self, msg: &[u8]) -> bool {
        if self.chain.first || self.chain.unsigned_run >= MAX_UNSIGNED_RUN {
            return false;
        }
        self.chain.add_unsigned(msg);
        true
    }
}

/// Verifies the response, or the stream of responses, to a request signed
/// with [`sign_request`]. Once a message fails, every later call fails the
/// same way.
pub struct ResponseVerifier {
    chain: Chain,
    last_signed: bool,
    failed: Option<TsigError>,
}

impl ResponseVerifier {
    pub fn new(key: &Key, request_mac: Vec<u8>) -> ResponseVerifier {
        ResponseVerifier {
            chain: Chain::new(key.clone(), request_mac),
            last_signed: false,
            failed: None,
        }
    }

    /// Checks the next message of the stream, in order. The first must be
    /// signed; up to 99 unsigned ones may follow each signed one (RFC 8945
    /// 5.3.1). A TSIG error from the server (BADKEY, BADSIG unsigned;
    /// BADTIME signed) comes back as that error.
    pub fn verify(&mut self, msg: &[u8], now: u64) -> Result<(), TsigError> {
        if let Some(error) = self.failed {
            return Err(error);
        }
        let result = self.check(msg, now);
        if let Err(error) = result {
            self.failed = Some(error);
        }
        result
    }

    /// Whether the stream ended well: something was verified, nothing
    /// failed, and the last message was signed.
    pub fn finish(&self) -> Result<(), TsigError> {
        match self.failed {
            Some(error) => Err(error),
            None if !self.last_signed => Err(TsigError::Unsigned),
            None => Ok(()),
        }
    }

    fn check(&mut self, msg: &[u8], now: u64) -> Result<(), TsigError> {
        let Some(tsig) = find(msg)? else {
            return self.unsigned(msg);
        };
        if tsig.error != 0 && tsig.mac.is_empty() {
            return Err(TsigError::from_field(tsig.error));
        }
        let key = &self.chain.key;
        if tsig.key_name != key.name || Algorithm::from_name(&tsig.algorithm) != Some(key.algorithm)
        {
            return Err(TsigError::BadKey);
        }
        check_mac_len(key.algorithm, tsig.mac.len())?;
        let mut hasher = self.chain.digest();
        digest_signed_message(&mut hasher, msg, &tsig);
        self.chain.digest_variables(&mut hasher, &tsig.variables());
        if !hasher.verify(&tsig.mac) {
            return Err(TsigError::BadSig);
        }
        if tsig.error != 0 {
            return Err(TsigError::from_field(tsig.error));
        }
        if !tsig.in_time(now) {
            return Err(TsigError::BadTime);
        }
        self.chain.signed(tsig.mac);
        self.last_signed = true;
        Ok(())
    }

    fn unsigned(&mut self, msg: &[u8]) -> Result<(), TsigError> {
        if self.chain.first || self.chain.unsigned_run >= MAX_UNSIGNED_RUN {
            return Err(TsigError::Unsigned);
        }
        self.chain.add_unsigned(msg);
        self.last_signed = false;
        Ok(())
    }
}

/// The TSIG RR fields that go into a digest (RFC 8945 4.3.3), and into the
/// RR itself.
struct Variables<'a> {
    key_name: &'a Name,
    algorithm: &'a Name,
    time_signed: u64,
    fudge: u16,
    error: u16,
    other: &'a [u8],
}

impl Variables<'_> {
    /// Names in canonical (lower-case, uncompressed) form, class ANY, TTL
    /// 0, algorithm, timers, error and other data.
    fn digest(&self, hasher: &mut Hasher) {
        digest_lowercase_name(hasher, self.key_name);
        hasher.update(&Class::ANY.0.to_be_bytes());
        hasher.update(&0u32.to_be_bytes());
        digest_lowercase_name(hasher, self.algorithm);
        self.digest_timers(hasher);
        hasher.update(&self.error.to_be_bytes());
        hasher.update(&(self.other.len() as u16).to_be_bytes());
        hasher.update(self.other);
    }

    /// Time Signed and Fudge only: later messages of a stream.
    fn digest_timers(&self, hasher: &mut Hasher) {
        hasher.update(&u48_bytes(self.time_signed));
        hasher.update(&self.fudge.to_be_bytes());
    }
}

fn u48_bytes(value: u64) -> [u8; 6] {
    let b = (value & TIME_MASK).to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

fn digest_lowercase_name(hasher: &mut Hasher, name: &Name) {
    let mut buf = [0u8; MAX_NAME_LEN];
    let wire = &mut buf[..name.wire_len()];
    wire.copy_from_slice(name.as_wire());
    wire.make_ascii_lowercase();
    hasher.update(wire);
}

/// A prior MAC enters a digest with its two-octet length first.
fn digest_prior_mac(hasher: &mut Hasher, mac: &[u8]) {
    hasher.update(&(mac.len() as u16).to_be_bytes());
    hasher.update(mac);
}

/// The message as its signer saw it: TSIG RR removed, ARCOUNT one less,
/// and the ID back to Original ID (a forwarder may have changed it).
fn digest_signed_message(hasher: &mut Hasher, msg: &[u8], tsig: &TsigRecord) {
    let mut header = [0u8; HEADER_LEN];
    header.copy_from_slice(&msg[..HEADER_LEN]);
    header[0..2].copy_from_slice(&tsig.original_id.to_be_bytes());
    let arcount = u16::from_be_bytes([header[10], header[11]]).saturating_sub(1);
    header[10..12].copy_from_slice(&arcount.to_be_bytes());
    hasher.update(&header);
    hasher.update(&msg[HEADER_LEN..tsig.start]);
}

/// Appends a TSIG RR (names uncompressed) and counts it in ARCOUNT.
fn append_tsig(msg: &mut Vec<u8>, vars: &Variables<'_>, mac: &[u8], original_id: u16) {
    msg.extend_from_slice(vars.key_name.as_wire());
    msg.extend_from_slice(&RType::TSIG.0.to_be_bytes());
    msg.extend_from_slice(&Class::ANY.0.to_be_bytes());
    msg.extend_from_slice(&0u32.to_be_bytes());
    let rdlen = vars.algorithm.wire_len() + RDATA_FIXED_LEN + mac.len() + vars.other.len();
    msg.extend_from_slice(&(rdlen as u16).to_be_bytes());
    msg.extend_from_slice(vars.algorithm.as_wire());
    msg.extend_from_slice(&u48_bytes(vars.time_signed));
    msg.extend_from_slice(&vars.fudge.to_be_bytes());
    msg.extend_from_slice(&(mac.len() as u16).to_be_bytes());
    msg.extend_from_slice(mac);
    msg.extend_from_slice(&original_id.to_be_bytes());
    msg.extend_from_slice(&vars.error.to_be_bytes());
    msg.extend_from_slice(&(vars.other.len() as u16).to_be_bytes());
    msg.extend_from_slice(vars.other);
    // A message of 65535 additional records cannot fit in 64 KiB, so this
    // saturates only on a caller's garbage.
    let arcount = u16::from_be_bytes([msg[10], msg[11]]).saturating_add(1);
    msg[10..12].copy_from_slice(&arcount.to_be_bytes());
}

/// One HMAC in progress, whichever the hash.
enum Hasher {
    Md5(Hmac<md5::Md5>),
    Sha1(Hmac<sha1::Sha1>),
    Sha224(Hmac<sha2::Sha224>),
    Sha256(Hmac<sha2::Sha256>),
    Sha384(Hmac<sha2::Sha384>),
    Sha512(Hmac<sha2::Sha512>),
}

/// Runs `$body` with `$mac` bound to the HMAC inside `$hasher`.
macro_rules! with_mac {
    ($hasher:expr, $mac:ident => $body:expr) => {
        match $hasher {
            Hasher::Md5($mac) => $body,
            Hasher::Sha1($mac) => $body,
            Hasher::Sha224($mac) => $body,
            Hasher::Sha256($mac) => $body,
            Hasher::Sha384($mac) => $body,
            Hasher::Sha512($mac) => $body,
        }
    };
}

impl Hasher {
    fn new(key: &Key) -> Hasher {
        let secret = &key.secret;
        match key.algorithm {
            Algorithm::HmacMd5 => Hasher::Md5(keyed(secret)),
            Algorithm::HmacSha1 => Hasher::Sha1(keyed(secret)),
            Algorithm::HmacSha224 => Hasher::Sha224(keyed(secret)),
            Algorithm::HmacSha256 => Hasher::Sha256(keyed(secret)),
            Algorithm::HmacSha384 => Hasher::Sha384(keyed(secret)),
            Algorithm::HmacSha512 => Hasher::Sha512(keyed(secret)),
        }
    }

    fn update(&mut self, data: &[u8]) {
        with_mac!(self, mac => mac.update(data))
    }

    fn finalize(self) -> Vec<u8> {
        with_mac!(self, mac => mac.finalize().into_bytes().to_vec())
    }

    /// Constant-time comparison of `expected` with the leading octets of
    /// the computed MAC; false for an empty or over-long `expected`.
    fn verify(self, expected: &[u8]) -> bool {
        with_mac!(self, mac => mac.verify_truncated_left(expected).is_ok())
    }
}

fn keyed<M: Mac + hmac::digest::KeyInit>(secret: &[u8]) -> M {
    // HMAC hashes long keys and pads short ones: every length is valid.
    <M as Mac>::new_from_slice(secret).expect("HMAC takes keys of any length")
}

#[cfg(test)]
mod tests;
