//! RDATA of every supported record type: presentation text ⇄ wire.
//!
//! Stored RDATA is always uncompressed wire form; names inside it keep their
//! case. Each supported type is described by its list of fields
//! (`schema`); one routine per field kind reads it from text, checks it in
//! wire form and writes it back as text (`field`). Types without a schema
//! are handled only in the RFC 3597 generic form `\# LEN HEX`.
//!
//! Supported: A, NS, MD, MF, CNAME, SOA, MB, MG, MR, PTR, HINFO, MINFO, MX,
//! TXT, RP, AFSDB, RT, AAAA, LOC, SRV, NAPTR, KX, CERT, DNAME, DS, SSHFP,
//! RRSIG, NSEC, DNSKEY, DHCID, NSEC3, NSEC3PARAM, TLSA, SMIMEA, CDS,
//! CDNSKEY, OPENPGPKEY, CSYNC, ZONEMD, SVCB, HTTPS, SPF, NID, L32, L64, LP,
//! EUI48, EUI64, URI, CAA, TA, DLV, and the rarer WKS, X25, ISDN, NSAP,
//! SIG, PX, APL, IPSECKEY, HIP, AVC and AMTRELAY. Not: NULL (no text
//! form), NXT, A6, DOA and the types nobody assigned a form to.

mod addr;
mod bitmap;
mod canonical;
mod decompress;
mod encoding;
mod field;
mod fields;
mod loc;
mod rare;
mod schema;
mod svcb;
mod time;

pub use canonical::{canonical_rdata, lowercases_names, rdata_equal};
pub use decompress::rdata_uncompressed;
pub use time::{civil_from_days, format_sig_time};
mod wire;

#[cfg(test)]
mod tests;

use crate::name::Name;
use crate::text::{TextError, Token};
use crate::types::RType;
use fields::{Fields, decimal, joined};
use schema::Field;
use wire::Wire;

/// Longest RDATA (the RDLENGTH field is 16 bits).
const MAX_RDATA: usize = 65535;

/// Parses the RDATA fields of one record into uncompressed wire form,
/// appended to `out`. Relative names are completed with `origin`. The RFC
/// 3597 generic form `\# LEN HEX` is accepted for every type. On error
/// `out` is left as it was.
pub fn parse_text(
    rtype: RType,
    tokens: &[Token],
    origin: Option<&Name>,
    out: &mut Vec<u8>,
) -> Result<(), TextError> {
    let start = out.len();
    let result = parse_into(rtype, tokens, origin, out).and_then(|()| match out.len() - start {
        n if n > MAX_RDATA => Err(TextError::new(format!(
            "RDATA of {n} octets is longer than {MAX_RDATA}"
        ))),
        _ => Ok(()),
    });
    if result.is_err() {
        out.truncate(start);
    }
    result
}

fn parse_into(
    rtype: RType,
    tokens: &[Token],
    origin: Option<&Name>,
    out: &mut Vec<u8>,
) -> Result<(), TextError> {
    let start = out.len();
    if tokens.first().is_some_and(|t| !t.quoted && t.raw == b"\\#") {
        parse_generic(&tokens[1..], out)?;
        if schema::fields(rtype).is_some() && !rare::kept_as_sent(rtype) {
            split(rtype, &out[start..])
                .map_err(|e| TextError::new(format!("\\# data is not valid {rtype} RDATA: {e}")))?;
        }
        return Ok(());
    }
    let Some(schema) = schema::fields(rtype) else {
        return Err(TextError::new(format!(
            "{rtype} RDATA must be written in RFC 3597 generic form: \\# <length> <hex>"
        )));
    };
    let mut f = Fields::new(rtype, tokens);
    for &field in schema {
        field::parse(field, &mut f, origin, out)?;
    }
    f.finish()?;
    split(rtype, &out[start..])?;
    check_text(rtype, &out[start..])
}

/// `LEN HEX...` after the `\#`.
fn parse_generic(tokens: &[Token], out: &mut Vec<u8>) -> Result<(), TextError> {
    let Some((len_tok, hex)) = tokens.split_first() else {
        return Err(TextError::new("missing field: RDATA length after \\#"));
    };
    let len = decimal(len_tok.raw, MAX_RDATA as u64).map_err(|_| {
        TextError::new(format!(
            "bad \\# RDATA length '{}': expected 0-65535",
            len_tok.lossy()
        ))
    })? as usize;
    let text = joined(hex);
    let data = encoding::hex_decode(&text).ok_or_else(|| {
        TextError::new(format!(
            "bad hex in \\# data: '{}'",
            crate::text::shown(&text)
        ))
    })?;
    if data.len() != len {
        return Err(TextError::new(format!(
            "\\# length {len} does not match the {} octets of hex data",
            data.len()
        )));
    }
    out.extend_from_slice(&data);
    Ok(())
}

/// Most fields of any type's schema (RRSIG has 9).
const MAX_FIELDS: usize = 12;

/// The bytes of each field of one RDATA, held without allocating.
struct Pieces<'a> {
    items: [&'a [u8]; MAX_FIELDS],
    len: usize,
}

impl<'a> std::ops::Deref for Pieces<'a> {
    type Target = [&'a [u8]];
    fn deref(&self) -> &[&'a [u8]] {
        &self.items[..self.len]
    }
}

/// Checks uncompressed RDATA of a type with a schema and returns its
/// fields' bytes.
fn split(rtype: RType, rdata: &[u8]) -> Result<Pieces<'_>, TextError> {
    let schema = schema::fields(rtype).unwrap_or(&[]);
    let mut w = Wire::new(rdata, 0);
    let mut pieces = Pieces {
        items: [&[]; MAX_FIELDS],
        len: schema.len(),
    };
    for (piece, &f) in pieces.items.iter_mut().zip(schema) {
        *piece = field::read(f, &mut w)?;
    }
    w.finish()?;
    check_record(rtype, &pieces)?;
    Ok(pieces)
}

/// Rules across fields.
fn check_record(rtype: RType, pieces: &[&[u8]]) -> Result<(), TextError> {
    match rtype {
        RType::DS | RType::CDS | RType::TA | RType::DLV => {
            let want = match pieces[2][0] {
                1 => Some((20, "SHA-1")),
                2 => Some((32, "SHA-256")),
                3 => Some((32, "GOST R 34.11-94")),
                4 => Some((48, "SHA-384")),
                _ => None,
            };
            check_digest_len(rtype, pieces[2][0], want, pieces[3].len())
        }
        RType::SSHFP => {
            // As BIND reads it off the wire: a wrong length is FORMERR.
            let want = match pieces[1][0] {
                1 => Some((20, "SHA-1")),
                2 => Some((32, "SHA-256")),
                _ => None,
            };
            check_digest_len(rtype, pieces[1][0], want, pieces[2].len())
        }
        RType::ZONEMD => {
            // Lengths are known only in scheme SIMPLE (1); a record of an
            // unknown scheme is kept for verifiers that know it (RFC 8976 4).
            let want = match (pieces[1][0], pieces[2][0]) {
                (1, 1) => Some((48, "SHA-384")),
                (1, 2) => Some((64, "SHA-512")),
                _ => None,
            };
            check_digest_len(rtype, pieces[2][0], want, pieces[3].len())?;
            match pieces[3].len() {
                n if n < 12 => Err(TextError::new(format!(
                    "ZONEMD digest of {n} octets is shorter than 12"
                ))),
                _ => Ok(()),
            }
        }
        _ => Ok(()),
    }
}

fn check_digest_len(
    rtype: RType,
    alg: u8,
    want: Option<(usize, &str)>,
    got: usize,
) -> Result<(), TextError> {
    match want {
        Some((len, name)) if len != got => Err(TextError::new(format!(
            "{rtype} digest type {alg} ({name}) needs a {len}-octet digest, not {got} octets"
        ))),
        _ => Ok(()),
    }
}

/// Rules that zone files must follow but received data need not.
fn check_text(rtype: RType, rdata: &[u8]) -> Result<(), TextError> {
    if rtype == RType::SVCB || rtype == RType::HTTPS {
        let pieces = split(rtype, rdata)?;
        let priority = u16::from_be_bytes([pieces[0][0], pieces[0][1]]);
        // The zone reader names the type before the message.
        return svcb::check_text(priority, pieces[2]);
    }
    if !rare::has_text_form(rtype, rdata) {
        return Err(TextError::new(format!("{rtype} RDATA with no text form")));
    }
    Ok(())
}

/// Writes uncompressed wire RDATA in presentation form. Unknown types, and
/// RDATA that does not parse as its type, are written in RFC 3597 form.
/// Appended to `out` in place: a string per record was a tenth of writing
/// a zone out as text.
pub fn format_text(rtype: RType, rdata: &[u8], out: &mut String) {
    if !format_known(rtype, rdata, out) {
        format_generic(rdata, out);
    }
}

/// Appends the fields of a type with a schema; false (and `out` as it
/// was) when the type has none or the RDATA does not parse as it.
fn format_known(rtype: RType, rdata: &[u8], out: &mut String) -> bool {
    let Some(schema) = schema::fields(rtype) else {
        return false;
    };
    let Ok(pieces) = split(rtype, rdata) else {
        return false;
    };
    if check_text(rtype, rdata).is_err() {
        return false;
    }
    let start = out.len();
    for (&field, &piece) in schema.iter().zip(pieces.iter()) {
        let mark = out.len();
        if mark > start {
            out.push(' ');
        }
        let body = out.len();
        field::format(field, piece, out);
        if out.len() == body {
            out.truncate(mark);
        }
    }
    true
}

/// The RFC 3597 generic form `\# LEN HEX`.
pub fn format_generic(rdata: &[u8], out: &mut String) {
    out.push_str(&format!("\\# {}", rdata.len()));
    if !rdata.is_empty() {
        out.push(' ');
        for b in rdata {
            out.push_str(&format!("{b:02x}"));
        }
    }
}

/// An NSEC or NSEC3 type bitmap (RFC 4034 4.1.2) of sorted, distinct
/// type numbers, appended to `out`.
pub fn encode_type_bitmap(types: &[u16], out: &mut Vec<u8>) {
    bitmap::encode(types, out);
}

/// Reads the RDATA at `msg[start..start + len]` into uncompressed wire form,
/// decompressing names for the types that allow compression and checking
/// that the RDATA is well formed for its type. Unknown types are copied.
/// On error `out` is left as it was.
pub fn read_wire(
    rtype: RType,
    msg: &[u8],
    start: usize,
    len: usize,
    out: &mut Vec<u8>,
) -> Result<(), TextError> {
    let end = start.checked_add(len).filter(|&e| e <= msg.len());
    let end = end.ok_or_else(|| TextError::new("RDATA runs past the end of the message"))?;
    let Some(schema) = schema::fields(rtype) else {
        out.extend_from_slice(&msg[start..end]);
        return Ok(());
    };
    let begin = out.len();
    let result = read_fields(rtype, schema, Wire::new(&msg[..end], start), out)
        .and_then(|()| split(rtype, &out[begin..]).map(|_| ()))
        .map_err(|e| TextError::new(format!("malformed {rtype} RDATA: {e}")));
    if result.is_err() {
        out.truncate(begin);
        // Their names are never compressed: copied as they came.
        if rare::kept_as_sent(rtype) {
            out.extend_from_slice(&msg[start..end]);
            return Ok(());
        }
    }
    result
}

fn read_fields(
    rtype: RType,
    schema: &[Field],
    mut w: Wire,
    out: &mut Vec<u8>,
) -> Result<(), TextError> {
    let compressed = rtype.rdata_names_decompressed_on_read();
    for &field in schema {
        match field {
            Field::DomainName(what) if compressed => {
                out.extend_from_slice(w.compressed_name(what)?.as_wire())
            }
            _ => out.extend_from_slice(field::read(field, &mut w)?),
        }
    }
    w.finish()
}

/// The target name whose addresses belong in the additional section: the
/// NS name, the MX exchange, the SRV target. `None` for other types or
/// malformed RDATA.
pub fn names_for_additional(rtype: RType, rdata: &[u8]) -> Option<&[u8]> {
    let offset = match rtype {
        RType::NS => 0,
        RType::MX => 2,
        RType::SRV => 6,
        _ => return None,
    };
    let len = name_len(rdata, offset)?;
    Some(&rdata[offset..offset + len])
}

/// The serial in SOA RDATA (uncompressed wire form), if well-formed.
pub fn soa_serial(rdata: &[u8]) -> Option<u32> {
    let rname = name_len(rdata, 0)?;
    let serial_at = rname + name_len(rdata, rname)?;
    let bytes = rdata.get(serial_at..serial_at + 4)?;
    Some(u32::from_be_bytes(bytes.try_into().ok()?))
}

/// Offsets in `rdata` of the names a response writer may compress (RFC
/// 3597 section 4: NS, MD, MF, CNAME, SOA, MB, MG, MR, PTR, MINFO, MX),
/// and how many there are. No offsets for other types or malformed RDATA.
pub fn compressible_name_offsets(rtype: RType, rdata: &[u8]) -> ([usize; 2], usize) {
    let none = ([0, 0], 0);
    if !rtype.rdata_names_compressible() {
        return none;
    }
    match rtype {
        RType::SOA | RType::MINFO => {
            let Some(first) = name_len(rdata, 0) else {
                return none;
            };
            match name_len(rdata, first) {
                Some(_) => ([0, first], 2),
                None => none,
            }
        }
        RType::MX => match name_len(rdata, 2) {
            Some(_) => ([2, 0], 1),
            None => none,
        },
        _ => match name_len(rdata, 0) {
            Some(_) => ([0, 0], 1),
            None => none,
        },
    }
}

/// A piece of RDATA as a compressing writer sees it: octets to copy, or a
/// whole uncompressed name it may compress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RdataPiece<'a> {
    Octets(&'a [u8]),
    Name(&'a [u8]),
}

/// `rdata` cut at its compressible names ([`compressible_name_offsets`]):
/// octets and names in order, every octet once. The one shape of every
/// writer that compresses RDATA names.
pub fn compressible_pieces(rtype: RType, rdata: &[u8]) -> impl Iterator<Item = RdataPiece<'_>> {
    let (offsets, n) = compressible_name_offsets(rtype, rdata);
    let names = offsets.into_iter().take(n).map(move |off| {
        // Found by the scan; a name not found would go out as octets.
        (off, off + name_len(rdata, off).unwrap_or(0))
    });
    let mut done = 0;
    names
        .chain([(rdata.len(), rdata.len())])
        .flat_map(move |(start, end)| {
            let octets = &rdata[done..start];
            done = end;
            let octets = (!octets.is_empty()).then_some(RdataPiece::Octets(octets));
            let name = (start < end).then(|| RdataPiece::Name(&rdata[start..end]));
            octets.into_iter().chain(name)
        })
}

/// Length of the uncompressed name at `wire[pos..]`, without allocating.
fn name_len(wire: &[u8], pos: usize) -> Option<usize> {
    let mut i = pos;
    loop {
        let len = *wire.get(i)? as usize;
        if len > 63 || i + 1 + len > wire.len() || i + 1 + len - pos > 255 {
            return None;
        }
        i += 1 + len;
        if len == 0 {
            return Some(i - pos);
        }
    }
}
