//! SvcParams of SVCB and HTTPS (RFC 9460; dohpath RFC 9461, ohttp RFC 9540).

use super::addr;
use super::encoding::{base64_decode, base64_encode};
use super::wire::Wire;
use crate::text::{TextError, Token, push_char_string, unescape};

const MANDATORY: u16 = 0;
const ALPN: u16 = 1;
const NO_DEFAULT_ALPN: u16 = 2;
const PORT: u16 = 3;
const IPV4HINT: u16 = 4;
const ECH: u16 = 5;
const IPV6HINT: u16 = 6;
const OHTTP: u16 = 8;

const NAMES: [&str; 9] = [
    "mandatory",
    "alpn",
    "no-default-alpn",
    "port",
    "ipv4hint",
    "ech",
    "ipv6hint",
    "dohpath",
    "ohttp",
];

fn err(msg: impl Into<String>) -> TextError {
    TextError::new(msg)
}

/// The presentation name of a key.
fn key_name(key: u16) -> String {
    match NAMES.get(key as usize) {
        Some(name) => name.to_string(),
        None => format!("key{key}"),
    }
}

/// A key by name or as `keyNNNNN`.
fn key_number(text: &[u8]) -> Result<u16, TextError> {
    if let Some(k) = NAMES
        .iter()
        .position(|n| n.as_bytes().eq_ignore_ascii_case(text))
    {
        return Ok(k as u16);
    }
    let bad = || {
        err(format!(
            "unknown SvcParam key '{}' (use a registered name or keyNNNNN)",
            crate::text::shown(text)
        ))
    };
    let digits = text
        .get(..3)
        .filter(|p| p.eq_ignore_ascii_case(b"key"))
        .map(|_| &text[3..])
        .ok_or_else(bad)?;
    // key65535 is "reserved (invalid key)" in the registry, but no rule
    // refuses it: BIND, Knot and NSD load it, and a secondary refusing
    // it would refuse its whole zone.
    let key = super::fields::decimal(digits, 65535).map_err(|_| bad())? as u16;
    Ok(key)
}

/// Parses `key[=value]` tokens into wire SvcParams, sorted by key. A value
/// may follow `key=` as a separate quoted token (`alpn="h2,h3"`).
pub fn parse(toks: &[Token], out: &mut Vec<u8>) -> Result<(), TextError> {
    let mut params: Vec<(u16, Vec<u8>)> = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let (key_text, value) = split_param(toks, &mut i)?;
        let key = key_number(key_text)?;
        if params.iter().any(|(k, _)| *k == key) {
            return Err(err(format!("duplicate SvcParam key '{}'", key_name(key))));
        }
        // `keyNNNNN=` gives the value in wire form, known key or not
        // (RFC 9460 2.1), as BIND and Knot read it.
        let generic = key_text
            .get(..3)
            .is_some_and(|p| p.eq_ignore_ascii_case(b"key"));
        let wire = match generic {
            true => wire_value(key, value.unwrap_or_default())?,
            false => encode_value(key, value)?,
        };
        params.push((key, wire));
    }
    params.sort_by_key(|(k, _)| *k);
    for (key, value) in &params {
        let len = u16::try_from(value.len())
            .map_err(|_| err(format!("value of {} is too long", key_name(*key))))?;
        out.extend_from_slice(&key.to_be_bytes());
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(value);
    }
    check_mandatory(
        &params
            .iter()
            .map(|(k, v)| (*k, v.as_slice()))
            .collect::<Vec<_>>(),
    )
}

/// Splits the parameter at `toks[*i]` into key and unescaped value,
/// stepping past the tokens it used.
fn split_param<'a>(
    toks: &[Token<'a>],
    i: &mut usize,
) -> Result<(&'a [u8], Option<Vec<u8>>), TextError> {
    let tok = toks[*i];
    *i += 1;
    let Some(eq) = tok.raw.iter().position(|&b| b == b'=') else {
        return Ok((tok.raw, None));
    };
    let key = &tok.raw[..eq];
    let mut value = &tok.raw[eq + 1..];
    if value.is_empty() {
        if let Some(next) = toks.get(*i).filter(|t| t.quoted) {
            value = next.raw;
            *i += 1;
        }
    } else if value.len() >= 2 && value.starts_with(b"\"") && value.ends_with(b"\"") {
        value = &value[1..value.len() - 1];
    }
    let value = unescape(value).map_err(|e| {
        err(format!(
            "bad value for SvcParam '{}': {e}",
            crate::text::shown(key)
        ))
    })?;
    Ok((key, Some(value)))
}

/// A value given in wire form, checked to be well formed for its key
/// where the key is known.
fn wire_value(key: u16, v: Vec<u8>) -> Result<Vec<u8>, TextError> {
    let well_formed = match key {
        MANDATORY => !v.is_empty() && v.len().is_multiple_of(2),
        ALPN => alpn_ids_well_formed(&v),
        NO_DEFAULT_ALPN | OHTTP => v.is_empty(),
        PORT => v.len() == 2,
        IPV4HINT => !v.is_empty() && v.len().is_multiple_of(4),
        IPV6HINT => !v.is_empty() && v.len().is_multiple_of(16),
        _ => true,
    };
    match well_formed {
        true => Ok(v),
        false => Err(err(format!(
            "key{key}: a value in wire form not well formed for {}",
            key_name(key)
        ))),
    }
}

/// Whether `v` is one or more length-prefixed, non-empty ALPN ids.
fn alpn_ids_well_formed(mut v: &[u8]) -> bool {
    if v.is_empty() {
        return false;
    }
    while let Some((&len, rest)) = v.split_first() {
        if len == 0 || rest.len() < len as usize {
            return false;
        }
        v = &rest[len as usize..];
    }
    true
}

/// The wire value of one parameter from its (unescaped) text value.
fn encode_value(key: u16, value: Option<Vec<u8>>) -> Result<Vec<u8>, TextError> {
    let name = key_name(key);
    let required = || {
        value
            .as_deref()
            .filter(|v| !v.is_empty())
            .ok_or_else(|| err(format!("SvcParam {name} needs a value")))
    };
    match key {
        MANDATORY => encode_mandatory(&split_list(required()?, &name)?),
        ALPN => encode_alpn(&split_list(required()?, &name)?),
        NO_DEFAULT_ALPN | OHTTP => match value.as_deref() {
            None | Some([]) => Ok(Vec::new()),
            Some(_) => Err(err(format!("SvcParam {name} takes no value"))),
        },
        PORT => {
            let v = required()?;
            let port = super::fields::decimal(v, 65535)
                .map_err(|_| err(format!("bad port '{}': expected 0-65535", lossy(v))))?;
            Ok((port as u16).to_be_bytes().to_vec())
        }
        IPV4HINT => encode_hints(&split_list(required()?, &name)?, |t| {
            addr::parse_ipv4(t).map(|a| a.to_vec())
        }),
        IPV6HINT => encode_hints(&split_list(required()?, &name)?, |t| {
            addr::parse_ipv6(t).map(|a| a.to_vec())
        }),
        ECH => {
            let v = value.unwrap_or_default();
            base64_decode(&v).ok_or_else(|| err(format!("bad base64 in ech: '{}'", lossy(&v))))
        }
        _ => Ok(value.unwrap_or_default()),
    }
}

/// `b` as an error message shows it ([`crate::text::shown`]).
fn lossy(b: &[u8]) -> String {
    crate::text::shown(b)
}

/// Splits a comma-separated value list; `\` escapes the next octet
/// (RFC 9460 appendix A.1).
fn split_list(value: &[u8], name: &str) -> Result<Vec<Vec<u8>>, TextError> {
    let mut items = vec![Vec::new()];
    let mut bytes = value.iter();
    while let Some(&b) = bytes.next() {
        match b {
            b'\\' => match bytes.next() {
                Some(&e) => items.last_mut().expect("one item").push(e),
                None => return Err(err(format!("SvcParam {name} ends with a lone '\\'"))),
            },
            b',' => items.push(Vec::new()),
            _ => items.last_mut().expect("one item").push(b),
        }
    }
    if items.iter().any(Vec::is_empty) {
        return Err(err(format!(
            "empty item in the {name} list '{}'",
            lossy(value)
        )));
    }
    Ok(items)
}

fn encode_mandatory(items: &[Vec<u8>]) -> Result<Vec<u8>, TextError> {
    let mut keys = items
        .iter()
        .map(|i| key_number(i))
        .collect::<Result<Vec<_>, _>>()?;
    keys.sort_unstable();
    if keys.first() == Some(&MANDATORY) {
        return Err(err("mandatory must not list the mandatory key itself"));
    }
    if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
        return Err(err(format!(
            "mandatory lists key '{}' twice",
            key_name(w[0])
        )));
    }
    Ok(keys.iter().flat_map(|k| k.to_be_bytes()).collect())
}

fn encode_alpn(items: &[Vec<u8>]) -> Result<Vec<u8>, TextError> {
    let mut out = Vec::new();
    for id in items {
        let len = u8::try_from(id.len())
            .map_err(|_| err(format!("alpn ID '{}' is longer than 255 octets", lossy(id))))?;
        out.push(len);
        out.extend_from_slice(id);
    }
    Ok(out)
}

fn encode_hints(
    items: &[Vec<u8>],
    parse: impl Fn(&Token) -> Result<Vec<u8>, TextError>,
) -> Result<Vec<u8>, TextError> {
    let mut out = Vec::new();
    for item in items {
        out.extend(parse(&Token::plain(item))?);
    }
    Ok(out)
}

/// Every key listed in mandatory must be present (RFC 9460 section 8).
fn check_mandatory(params: &[(u16, &[u8])]) -> Result<(), TextError> {
    let Some((_, list)) = params.iter().find(|(k, _)| *k == MANDATORY) else {
        return Ok(());
    };
    for pair in list.chunks(2) {
        let key = u16::from_be_bytes([pair[0], pair[1]]);
        if !params.iter().any(|(k, _)| *k == key) {
            return Err(err(format!(
                "mandatory lists key '{}' that is not present",
                key_name(key)
            )));
        }
    }
    Ok(())
}

/// The (key, value) pairs of checked SvcParams.
fn pairs(params: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 4 <= params.len() {
        let key = u16::from_be_bytes([params[i], params[i + 1]]);
        let len = u16::from_be_bytes([params[i + 2], params[i + 3]]) as usize;
        out.push((key, &params[i + 4..i + 4 + len]));
        i += 4 + len;
    }
    out
}

/// Checks SvcParams running to the end of the RDATA: keys strictly
/// increasing, each value well formed, mandatory keys present.
pub fn read<'a>(w: &mut Wire<'a>) -> Result<&'a [u8], TextError> {
    let start = w.pos;
    let mut last: Option<u16> = None;
    while !w.is_done() {
        let key = w.u16("SvcParam key")?;
        if last.is_some_and(|l| key <= l) {
            return Err(err("SvcParam keys out of order or repeated"));
        }
        last = Some(key);
        let len = w.u16("SvcParam length")? as usize;
        let value = w.take(len, "SvcParam value")?;
        check_value(key, value).map_err(|e| err(format!("bad {} value: {e}", key_name(key))))?;
    }
    let params = w.since(start);
    check_mandatory(&pairs(params))?;
    Ok(params)
}

fn check_value(key: u16, v: &[u8]) -> Result<(), String> {
    let ok = match key {
        MANDATORY => check_mandatory_list(v),
        ALPN => check_alpn(v),
        NO_DEFAULT_ALPN | OHTTP => v.is_empty(),
        PORT => v.len() == 2,
        IPV4HINT => !v.is_empty() && v.len().is_multiple_of(4),
        IPV6HINT => !v.is_empty() && v.len().is_multiple_of(16),
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("{} octets", v.len()))
    }
}

fn check_mandatory_list(v: &[u8]) -> bool {
    let keys: Vec<u16> = v
        .chunks(2)
        .map(|p| u16::from_be_bytes([p[0], *p.get(1).unwrap_or(&0)]))
        .collect();
    !v.is_empty()
        && v.len().is_multiple_of(2)
        && keys[0] != MANDATORY
        && keys.windows(2).all(|w| w[0] < w[1])
}

fn check_alpn(v: &[u8]) -> bool {
    let mut i = 0;
    while i < v.len() {
        let len = v[i] as usize;
        if len == 0 || i + 1 + len > v.len() {
            return false;
        }
        i += 1 + len;
    }
    !v.is_empty()
}

/// Rules for zone files that received data need not follow:
/// no-default-alpn needs alpn (BIND refuses it too). AliasMode (priority
/// 0) SvcParams are let through: RFC 9460 2.4.2 has recipients ignore
/// them, and BIND, NSD and Knot load them.
pub fn check_text(_priority: u16, params: &[u8]) -> Result<(), TextError> {
    let pairs = pairs(params);
    let has = |key| pairs.iter().any(|(k, _)| *k == key);
    if has(NO_DEFAULT_ALPN) && !has(ALPN) {
        return Err(err("no-default-alpn requires an alpn SvcParam"));
    }
    Ok(())
}

/// Writes checked SvcParams separated by blanks.
pub fn format(params: &[u8], out: &mut String) {
    for (n, (key, value)) in pairs(params).into_iter().enumerate() {
        if n > 0 {
            out.push(' ');
        }
        out.push_str(&key_name(key));
        format_value(key, value, out);
    }
}

fn format_value(key: u16, v: &[u8], out: &mut String) {
    let list = |out: &mut String, items: Vec<String>| {
        out.push('=');
        out.push_str(&items.join(","));
    };
    match key {
        MANDATORY => list(
            out,
            v.chunks(2)
                .map(|p| key_name(u16::from_be_bytes([p[0], p[1]])))
                .collect(),
        ),
        ALPN => push_alpn(v, out),
        NO_DEFAULT_ALPN | OHTTP => {}
        PORT => out.push_str(&format!("={}", u16::from_be_bytes([v[0], v[1]]))),
        IPV4HINT => list(
            out,
            v.chunks(4)
                .map(|a| {
                    let mut s = String::new();
                    addr::format_ipv4(a, &mut s);
                    s
                })
                .collect(),
        ),
        IPV6HINT => list(
            out,
            v.chunks(16)
                .map(|a| {
                    let mut s = String::new();
                    addr::format_ipv6(a, &mut s);
                    s
                })
                .collect(),
        ),
        ECH if v.is_empty() => out.push_str("=\"\""),
        ECH => {
            out.push('=');
            base64_encode(v, out);
        }
        _ if v.is_empty() => {}
        _ => {
            out.push('=');
            push_char_string(out, v);
        }
    }
}

/// `alpn="..."`, escaping `,` and `\` inside IDs twice (RFC 9460 A.1).
fn push_alpn(v: &[u8], out: &mut String) {
    out.push_str("=\"");
    let mut i = 0;
    while i < v.len() {
        let len = v[i] as usize;
        if i > 0 {
            out.push(',');
        }
        for &b in &v[i + 1..i + 1 + len] {
            match b {
                b',' => out.push_str(r"\\,"),
                b'\\' => out.push_str(r"\\\\"),
                b'"' => out.push_str("\\\""),
                0x20..=0x7E => out.push(b as char),
                _ => out.push_str(&format!("\\{b:03}")),
            }
        }
        i += 1 + len;
    }
    out.push('"');
}
