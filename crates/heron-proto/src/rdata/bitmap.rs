//! Type bitmaps of NSEC, NSEC3 and CSYNC (RFC 4034 section 4.1.2).

use super::wire::Wire;
use crate::text::{TextError, Token};
use crate::types::RType;

/// Encodes the types named by `toks` (mnemonics or `TYPEnnn`, any order,
/// repeats allowed). No tokens gives an empty bitmap.
pub fn parse(toks: &[Token], out: &mut Vec<u8>) -> Result<(), TextError> {
    let mut types = Vec::with_capacity(toks.len());
    for tok in toks {
        let t = RType::from_mnemonic(tok.raw).ok_or_else(|| {
            TextError::new(format!("unknown type '{}' in type bitmap", tok.lossy()))
        })?;
        types.push(t.0);
    }
    types.sort_unstable();
    types.dedup();
    encode(&types, out);
    Ok(())
}

/// Encodes sorted, distinct type numbers.
pub(super) fn encode(types: &[u16], out: &mut Vec<u8>) {
    let mut i = 0;
    while i < types.len() {
        let window = (types[i] >> 8) as u8;
        let mut bits = [0u8; 32];
        let mut len = 0;
        while i < types.len() && (types[i] >> 8) as u8 == window {
            let low = (types[i] & 0xFF) as usize;
            bits[low / 8] |= 0x80 >> (low % 8);
            len = low / 8 + 1;
            i += 1;
        }
        out.push(window);
        out.push(len as u8);
        out.extend_from_slice(&bits[..len]);
    }
}

/// Checks a bitmap running to the end of the RDATA: windows in increasing
/// order, each 1 to 32 octets long with a non-zero last octet.
pub fn read<'a>(w: &mut Wire<'a>) -> Result<&'a [u8], TextError> {
    let start = w.pos;
    let mut last: Option<u8> = None;
    while !w.is_done() {
        let window = w.u8("type bitmap")?;
        if last.is_some_and(|l| window <= l) {
            return Err(TextError::new("type bitmap windows out of order"));
        }
        last = Some(window);
        let len = w.u8("type bitmap")? as usize;
        if !(1..=32).contains(&len) {
            return Err(TextError::new(format!(
                "type bitmap window of {len} octets (must be 1-32)"
            )));
        }
        if w.take(len, "type bitmap")?[len - 1] == 0 {
            return Err(TextError::new("type bitmap window ends in a zero octet"));
        }
    }
    Ok(w.since(start))
}

/// The types of a checked bitmap, in increasing order.
pub fn types(bitmap: &[u8]) -> impl Iterator<Item = RType> + '_ {
    let mut windows = Vec::new();
    let mut i = 0;
    while i + 1 < bitmap.len() {
        let len = bitmap[i + 1] as usize;
        windows.push((bitmap[i], &bitmap[i + 2..i + 2 + len]));
        i += 2 + len;
    }
    windows.into_iter().flat_map(|(window, bits)| {
        (0..bits.len() * 8)
            .filter(move |&k| bits[k / 8] & (0x80 >> (k % 8)) != 0)
            .map(move |k| RType(u16::from(window) << 8 | k as u16))
    })
}

/// Writes the types of a checked bitmap separated by blanks.
pub fn format(bitmap: &[u8], out: &mut String) {
    for (k, t) in types(bitmap).enumerate() {
        if k > 0 {
            out.push(' ');
        }
        out.push_str(&t.to_string());
    }
}
