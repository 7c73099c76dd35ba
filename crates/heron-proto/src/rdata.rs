//! RDATA of every supported record type: presentation text ⇄ wire.
//!
//! Stored RDATA is always uncompressed wire form; names inside it keep their
//! case. (Being filled in: see the module tests for what each type accepts.)

use crate::name::Name;
use crate::text::{TextError, Token};
use crate::types::RType;

/// Parses the RDATA fields of one record into uncompressed wire form,
/// appended to `out`. Relative names are completed with `origin`. The RFC
/// 3597 generic form `\# LEN HEX` is accepted for every type.
pub fn parse_text(
    rtype: RType,
    tokens: &[Token],
    origin: Option<&Name>,
    out: &mut Vec<u8>,
) -> Result<(), TextError> {
    let _ = (rtype, tokens, origin, out);
    Err(TextError::new("RDATA parsing not yet implemented"))
}

/// Writes uncompressed wire RDATA in presentation form. Unknown types, and
/// RDATA that does not parse as its type, are written in RFC 3597 form.
pub fn format_text(rtype: RType, rdata: &[u8], out: &mut String) {
    let _ = rtype;
    format_generic(rdata, out);
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

/// Reads the RDATA at `msg[start..start + len]` into uncompressed wire form,
/// decompressing names for the types that allow compression and checking
/// that the RDATA is well formed for its type.
pub fn read_wire(
    rtype: RType,
    msg: &[u8],
    start: usize,
    len: usize,
    out: &mut Vec<u8>,
) -> Result<(), TextError> {
    let _ = rtype;
    let end = start.checked_add(len).filter(|&e| e <= msg.len());
    let end = end.ok_or_else(|| TextError::new("RDATA runs past the end of the message"))?;
    out.extend_from_slice(&msg[start..end]);
    Ok(())
}

/// Offsets of the names in `rdata` that a response may compress.
pub fn compressible_name_offsets(rtype: RType, rdata: &[u8]) -> ([usize; 2], usize) {
    let _ = rdata;
    match rtype {
        RType::NS | RType::CNAME | RType::PTR => ([0, 0], 1),
        RType::MX => ([2, 0], 1),
        _ => ([0, 0], 0),
    }
}

/// The target name whose addresses belong in the additional section.
pub fn names_for_additional(rtype: RType, rdata: &[u8]) -> Option<&[u8]> {
    match rtype {
        RType::NS => Some(rdata),
        RType::MX => rdata.get(2..),
        RType::SRV => rdata.get(6..),
        _ => None,
    }
}
