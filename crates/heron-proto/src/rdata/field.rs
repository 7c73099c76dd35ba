//! Each kind of field in its three directions: text to wire, checked wire
//! reading, and wire to text.

use super::encoding::{base32hex_decode, base32hex_encode, base64_decode, base64_encode};
use super::encoding::{hex_decode, hex_encode};
use super::fields::{Fields, decimal, err, joined, missing};
use super::schema::{ALGORITHMS, CERT_TYPES, Field};
use super::wire::Wire;
use super::{addr, bitmap, loc, rare, svcb, time};
use crate::name::{Name, push_name_text};
use crate::text::{TextError, Token, char_string, push_char_string, push_decimal, unescape};
use crate::types::RType;

/// Reads one field from the tokens, appending its wire form.
pub fn parse(
    field: Field,
    f: &mut Fields,
    origin: Option<&Name>,
    out: &mut Vec<u8>,
) -> Result<(), TextError> {
    use Field::*;
    let rtype = f.rtype;
    match field {
        U8(what) => out.push(f.number(what, 0xFF)? as u8),
        U16(what) => out.extend_from_slice(&(f.number(what, 0xFFFF)? as u16).to_be_bytes()),
        U32(what) => out.extend_from_slice(&(f.number(what, 0xFFFF_FFFF)? as u32).to_be_bytes()),
        Period(what) => {
            let tok = f.next(what)?;
            let v = time::parse_period(tok.raw).ok_or_else(|| {
                err(format!(
                    "{rtype} {what} '{}' is not a number of seconds (0-4294967295) or a period like 1h30m or 2w",
                    tok.lossy()
                ))
            })?;
            out.extend_from_slice(&v.to_be_bytes());
        }
        SigTime(what) => {
            let tok = f.next(what)?;
            let v = time::parse_sig_time(tok.raw)
                .map_err(|hint| err(format!("bad {rtype} {what} '{}': {hint}", tok.lossy())))?;
            out.extend_from_slice(&v.to_be_bytes());
        }
        Algorithm => out.push(mnemonic_or_number(f, "algorithm", ALGORITHMS, 0xFF)? as u8),
        CertType => {
            let v = mnemonic_or_number(f, "certificate type", CERT_TYPES, 0xFFFF)?;
            out.extend_from_slice(&(v as u16).to_be_bytes());
        }
        TypeCovered => {
            let tok = f.next("type covered")?;
            let t = RType::from_mnemonic(tok.raw).ok_or_else(|| {
                err(format!(
                    "unknown type '{}' as {rtype} type covered",
                    tok.lossy()
                ))
            })?;
            out.extend_from_slice(&t.0.to_be_bytes());
        }
        DomainName(what) => parse_name(f.next(what)?, what, origin, out)?,
        CharString(what) => push_counted(out, &string_field(f.next(what)?, rtype, what)?),
        CharStrings => {
            for tok in f.rest_nonempty("text")? {
                push_counted(out, &string_field(tok, rtype, "text")?);
            }
        }
        Ipv4(what) => out.extend(addr::parse_ipv4(f.next(what)?)?),
        Ipv6 => out.extend(addr::parse_ipv6(f.next("address")?)?),
        Eui48 => out.extend(addr::parse_eui::<6>(f.next("address")?)?),
        Eui64 => out.extend(addr::parse_eui::<8>(f.next("address")?)?),
        Ilnp64(what) => out.extend(addr::parse_ilnp64(f.next(what)?)?),
        Hex(what) => out.extend(decode_rest(f, what, "hex", hex_decode)?),
        Base64(what) => out.extend(decode_rest(f, what, "base64", base64_decode)?),
        Salt => parse_salt(f.next("salt")?, out)?,
        NextHashed => parse_next_hashed(f.next("next hashed owner name")?, out)?,
        Bitmap => bitmap::parse(f.rest(), out)?,
        CaaTag => parse_caa_tag(f.next("tag")?, out)?,
        CaaValue => out.extend(unescaped(f.next("value")?, "CAA value")?),
        // RFC 7553 4.5 asks a non-empty target, but BIND, NSD and Knot
        // all load and serve an empty one: a secondary of theirs must take
        // the zone, not refuse it whole for one record.
        UriTarget => out.extend(unescaped(f.next("target")?, "URI target")?),
        SvcParams => svcb::parse(f.rest(), out)?,
        Loc => loc::parse(f, out)?,
        OptCharString(what) => {
            if f.peek().is_some() {
                push_counted(out, &string_field(f.next(what)?, rtype, what)?);
            }
        }
        Apl | IpsecKey | AmtRelay | Hip | Wks | Nsap => rare::parse(field, f, origin, out)?,
    }
    Ok(())
}

fn parse_name(
    tok: &Token,
    what: &str,
    origin: Option<&Name>,
    out: &mut Vec<u8>,
) -> Result<(), TextError> {
    Name::write_text(tok.raw, origin, out)
        .map_err(|e| err(format!("bad {what} '{}': {e}", tok.lossy())))
}

fn string_field(tok: &Token, rtype: RType, what: &str) -> Result<Vec<u8>, TextError> {
    char_string(tok).map_err(|e| err(format!("bad {rtype} {what}: {e}")))
}

fn push_counted(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(bytes.len() as u8);
    out.extend_from_slice(bytes);
}

fn unescaped(tok: &Token, what: &str) -> Result<Vec<u8>, TextError> {
    unescape(tok.raw).map_err(|e| err(format!("bad {what} '{}': {e}", tok.lossy())))
}

/// A number, or a name from `table` (either case).
fn mnemonic_or_number<T: Copy + Into<u64>>(
    f: &mut Fields,
    what: &str,
    table: &[(&str, T)],
    max: u64,
) -> Result<u64, TextError> {
    let tok = f.next(what)?;
    if let Some((_, v)) = table
        .iter()
        .find(|(n, _)| n.as_bytes().eq_ignore_ascii_case(tok.raw))
    {
        return Ok((*v).into());
    }
    decimal(tok.raw, max).map_err(|e| match e {
        super::fields::NumError::NotNumber => {
            err(format!("unknown {} {what} '{}'", f.rtype, tok.lossy()))
        }
        e => e.message(f.rtype, what, tok),
    })
}

/// Joins the remaining tokens (at least one) and decodes them.
fn decode_rest(
    f: &mut Fields,
    what: &str,
    encoding: &str,
    decode: fn(&[u8]) -> Option<Vec<u8>>,
) -> Result<Vec<u8>, TextError> {
    let text = joined(f.rest_nonempty(what)?);
    let bytes = decode(&text).ok_or_else(|| {
        err(format!(
            "bad {encoding} in {} {what}: '{}'",
            f.rtype,
            crate::text::shown(&text)
        ))
    })?;
    if bytes.is_empty() {
        return Err(missing(what));
    }
    Ok(bytes)
}

fn parse_salt(tok: &Token, out: &mut Vec<u8>) -> Result<(), TextError> {
    if tok.raw == b"-" {
        out.push(0);
        return Ok(());
    }
    let salt = hex_decode(tok.raw)
        .filter(|s| s.len() <= 255)
        .ok_or_else(|| {
            err(format!(
                "bad salt '{}': expected up to 255 octets in hex, or '-'",
                tok.lossy()
            ))
        })?;
    push_counted(out, &salt);
    Ok(())
}

fn parse_next_hashed(tok: &Token, out: &mut Vec<u8>) -> Result<(), TextError> {
    let hash = base32hex_decode(tok.raw)
        .filter(|h| (1..=255).contains(&h.len()))
        .ok_or_else(|| {
            err(format!(
                "bad next hashed owner name '{}': expected base32hex without padding",
                tok.lossy()
            ))
        })?;
    push_counted(out, &hash);
    Ok(())
}

fn parse_caa_tag(tok: &Token, out: &mut Vec<u8>) -> Result<(), TextError> {
    if !valid_caa_tag(tok.raw) {
        return Err(err(format!(
            "bad CAA tag '{}': expected 1-255 letters and digits, like issue",
            tok.lossy()
        )));
    }
    push_counted(out, tok.raw);
    Ok(())
}

fn valid_caa_tag(tag: &[u8]) -> bool {
    (1..=255).contains(&tag.len()) && tag.iter().all(u8::is_ascii_alphanumeric)
}

/// Reads one field from wire form, checking it, and returns its bytes.
pub fn read<'a>(field: Field, w: &mut Wire<'a>) -> Result<&'a [u8], TextError> {
    use Field::*;
    let start = w.pos;
    let fixed = |w: &mut Wire<'a>, n: usize, what: &str| w.take(n, what).map(|_| ());
    match field {
        U8(what) => fixed(w, 1, what)?,
        U16(what) => fixed(w, 2, what)?,
        U32(what) | Period(what) | SigTime(what) => fixed(w, 4, what)?,
        Algorithm => fixed(w, 1, "algorithm")?,
        CertType => fixed(w, 2, "certificate type")?,
        TypeCovered => fixed(w, 2, "type covered")?,
        DomainName(what) => w.name(what).map(|_| ())?,
        CharString(what) => w.counted(what).map(|_| ())?,
        CharStrings => loop {
            w.counted("text")?;
            if w.is_done() {
                break;
            }
        },
        Ipv4(what) => fixed(w, 4, what)?,
        Ipv6 => fixed(w, 16, "address")?,
        Eui48 => fixed(w, 6, "address")?,
        Eui64 | Ilnp64(_) => fixed(w, 8, "address")?,
        Hex(what) | Base64(what) => nonempty_rest(w, what)?,
        Salt => w.counted("salt").map(|_| ())?,
        NextHashed => {
            if w.counted("next hashed owner name")?.is_empty() {
                return Err(err("empty next hashed owner name".into()));
            }
        }
        Bitmap => bitmap::read(w).map(|_| ())?,
        CaaTag => {
            if !valid_caa_tag(w.counted("tag")?) {
                return Err(err("CAA tag is empty or not letters and digits".into()));
            }
        }
        CaaValue => {
            w.rest();
        }
        UriTarget => {
            w.rest();
        }
        SvcParams => svcb::read(w).map(|_| ())?,
        Loc => loc::read(w).map(|_| ())?,
        OptCharString(what) => {
            if !w.is_done() {
                w.counted(what)?;
            }
        }
        Apl | IpsecKey | AmtRelay | Hip | Wks => rare::read(field, w)?,
        Nsap => nonempty_rest(w, "NSAP address")?,
    }
    Ok(w.since(start))
}

fn nonempty_rest(w: &mut Wire, what: &str) -> Result<(), TextError> {
    if w.rest().is_empty() {
        return Err(err(format!("empty {what}")));
    }
    Ok(())
}

/// Writes one checked field in presentation form.
pub fn format(field: Field, b: &[u8], out: &mut String) {
    use Field::*;
    let num = |b: &[u8]| b.iter().fold(0u64, |acc, &x| acc << 8 | x as u64);
    match field {
        U8(_) | U16(_) | U32(_) | Period(_) | Algorithm => push_decimal(out, num(b)),
        SigTime(_) => time::format_sig_time(num(b) as u32, out),
        CertType => match CERT_TYPES.iter().find(|(_, v)| *v as u64 == num(b)) {
            Some((name, _)) => out.push_str(name),
            None => push_decimal(out, num(b)),
        },
        TypeCovered => match RType(num(b) as u16).mnemonic() {
            Some(m) => out.push_str(m),
            None => {
                out.push_str("TYPE");
                push_decimal(out, num(b));
            }
        },
        DomainName(_) => push_name_text(out, b),
        CharString(_) => push_char_string(out, &b[1..]),
        CharStrings => format_strings(b, out),
        Ipv4(_) => addr::format_ipv4(b, out),
        Ipv6 => addr::format_ipv6(b, out),
        Eui48 | Eui64 => addr::format_eui(b, out),
        Ilnp64(_) => addr::format_ilnp64(b, out),
        Hex(_) => hex_encode(b, out),
        Base64(_) => base64_encode(b, out),
        Salt if b.len() == 1 => out.push('-'),
        Salt => hex_encode(&b[1..], out),
        NextHashed => base32hex_encode(&b[1..], out),
        Bitmap => bitmap::format(b, out),
        CaaTag => out.push_str(&String::from_utf8_lossy(&b[1..])),
        CaaValue | UriTarget => push_char_string(out, b),
        SvcParams => svcb::format(b, out),
        Loc => loc::format(b, out),
        OptCharString(_) if b.is_empty() => {}
        OptCharString(_) => push_char_string(out, &b[1..]),
        Apl | IpsecKey | AmtRelay | Hip | Wks | Nsap => rare::format(field, b, out),
    }
}

fn format_strings(mut b: &[u8], out: &mut String) {
    let mut first = true;
    while let Some((&len, rest)) = b.split_first() {
        if !first {
            out.push(' ');
        }
        first = false;
        let (s, rest) = rest.split_at(len as usize);
        push_char_string(out, s);
        b = rest;
    }
}
