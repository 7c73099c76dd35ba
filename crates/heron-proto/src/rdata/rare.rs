//! The text forms of the less common types that zones moving from BIND,
//! NSD or Knot still carry: APL (RFC 3123), IPSECKEY (RFC 4025), HIP (RFC
//! 8005), AMTRELAY (RFC 8777), WKS (RFC 1035 3.4.2) and NSAP (RFC 1706).
//! Each is read from text, checked in wire form and written back, as the
//! other fields are (`field`).

use std::net::{Ipv4Addr, Ipv6Addr};

use super::addr;
use super::encoding::{base64_decode, base64_encode, hex_decode, hex_encode};
use super::fields::{Fields, decimal, err, joined};
use super::schema::Field;
use super::wire::Wire;
use crate::name::{Name, push_name_text};
use crate::text::{TextError, Token, push_decimal};
use crate::types::RType;

/// The types given a text form here after releases that held them as
/// opaque RDATA, as BIND and NSD take what they cannot check (an AMTRELAY
/// of a relay type not assigned yet, say): RDATA of theirs that does not
/// hold as the type's fields is kept as it came, in the generic form,
/// never refused (regression hunt: a zone, a transfer or a kept copy that
/// loaded before failed whole).
pub fn kept_as_sent(rtype: RType) -> bool {
    matches!(
        rtype,
        RType::WKS
            | RType::X25
            | RType::ISDN
            | RType::NSAP
            | RType::PX
            | RType::APL
            | RType::IPSECKEY
            | RType::HIP
            | RType::AMTRELAY
            | RType::AVC
            | RType::SIG
    )
}

/// Reads one of this module's fields from text.
pub fn parse(
    field: Field,
    f: &mut Fields,
    origin: Option<&Name>,
    out: &mut Vec<u8>,
) -> Result<(), TextError> {
    match field {
        Field::Apl => parse_apl(f, out),
        Field::IpsecKey => parse_ipseckey(f, origin, out),
        Field::AmtRelay => parse_amtrelay(f, origin, out),
        Field::Hip => parse_hip(f, origin, out),
        Field::Wks => parse_wks(f, out),
        _ => parse_nsap(f.next("NSAP address")?, out),
    }
}

/// Checks one of this module's fields in wire form (NSAP is any octets).
pub fn read(field: Field, w: &mut Wire) -> Result<(), TextError> {
    match field {
        Field::Apl => read_apl(w),
        Field::IpsecKey => read_ipseckey(w),
        Field::AmtRelay => read_amtrelay(w),
        Field::Hip => read_hip(w),
        _ => read_wks(w),
    }
}

/// Writes one of this module's fields, checked by [`read`], as text.
pub fn format(field: Field, b: &[u8], out: &mut String) {
    match field {
        Field::Apl => format_apl(b, out),
        Field::IpsecKey => format_ipseckey(b, out),
        Field::AmtRelay => format_amtrelay(b, out),
        Field::Hip => format_hip(b, out),
        Field::Wks => format_wks(b, out),
        _ => format_nsap(b, out),
    }
}

/// APL items `[!]AFI:ADDRESS/PREFIX`, none or more; each goes out as AFI,
/// prefix, negation bit with the address's length, and the address
/// without its trailing zero octets (RFC 3123 4.1).
fn parse_apl(f: &mut Fields, out: &mut Vec<u8>) -> Result<(), TextError> {
    for tok in f.rest() {
        let item = apl_item(tok.raw).ok_or_else(|| {
            err(format!(
                "bad APL item '{}': expected [!]1:IPV4/PREFIX or [!]2:IPV6/PREFIX",
                tok.lossy()
            ))
        })?;
        let (negated, family, address, prefix) = item;
        let kept = address.len() - address.iter().rev().take_while(|&&b| b == 0).count();
        out.extend_from_slice(&family.to_be_bytes());
        out.push(prefix);
        out.push(u8::from(negated) << 7 | kept as u8);
        out.extend_from_slice(&address[..kept]);
    }
    Ok(())
}

/// One APL item: negated, family, the whole address, the prefix length.
fn apl_item(raw: &[u8]) -> Option<(bool, u16, Vec<u8>, u8)> {
    let text = std::str::from_utf8(raw).ok()?;
    let (negated, text) = match text.strip_prefix('!') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (family, rest) = text.split_once(':')?;
    let (address, prefix) = rest.rsplit_once('/')?;
    let prefix = decimal(prefix.as_bytes(), 128).ok()? as u8;
    match family {
        "1" if prefix <= 32 => {
            let a: Ipv4Addr = address.parse().ok()?;
            Some((negated, 1, a.octets().to_vec(), prefix))
        }
        "2" => {
            let a: Ipv6Addr = address.parse().ok()?;
            Some((negated, 2, a.octets().to_vec(), prefix))
        }
        _ => None,
    }
}

/// APL items in wire form. An address family other than IPv4 and IPv6
/// is kept as it came (written in the generic form, see
/// [`has_text_form`]).
fn read_apl(w: &mut Wire) -> Result<(), TextError> {
    while !w.is_done() {
        let family = w.u16("APL address family")?;
        let prefix = w.u8("APL prefix")?;
        let len = (w.u8("APL address length")? & 0x7F) as usize;
        let (max_len, max_prefix) = match family {
            1 => (4, 32),
            2 => (16, 128),
            _ => (127, 255),
        };
        if len > max_len || prefix > max_prefix {
            return Err(err(format!(
                "APL item of family {family}: prefix {prefix} or address length {len} out of range"
            )));
        }
        w.take(len, "APL address")?;
    }
    Ok(())
}

/// Whether APL or WKS RDATA read from the wire comes back from its text
/// as it is: APL items of other families than IPv4 and IPv6, addresses
/// and WKS bitmaps that end in zero octets (which the text form drops) are
/// kept, and written in the generic form.
pub fn has_text_form(rtype: RType, rdata: &[u8]) -> bool {
    match rtype {
        RType::APL => apl_items_plain(rdata),
        RType::WKS => rdata.len() <= 5 || rdata.last() != Some(&0),
        _ => true,
    }
}

fn apl_items_plain(mut b: &[u8]) -> bool {
    while b.len() >= 4 {
        let len = (b[3] & 0x7F) as usize;
        let known = matches!(u16::from_be_bytes([b[0], b[1]]), 1 | 2);
        if !known || b.len() < 4 + len || (len > 0 && b[3 + len] == 0) {
            return false;
        }
        b = &b[4 + len..];
    }
    b.is_empty()
}

fn format_apl(mut b: &[u8], out: &mut String) {
    let mut first = true;
    while b.len() >= 4 {
        let family = u16::from_be_bytes([b[0], b[1]]);
        let len = (b[3] & 0x7F) as usize;
        if !first {
            out.push(' ');
        }
        first = false;
        if b[3] & 0x80 != 0 {
            out.push('!');
        }
        push_decimal(out, family.into());
        out.push(':');
        let mut whole = [0u8; 16];
        whole[..len].copy_from_slice(&b[4..4 + len]);
        match family {
            1 => addr::format_ipv4(&whole[..4], out),
            _ => addr::format_ipv6(&whole, out),
        }
        out.push('/');
        push_decimal(out, b[2].into());
        b = &b[4 + len..];
    }
}

/// A gateway or relay of IPSECKEY and AMTRELAY by its type: none (`.`),
/// IPv4, IPv6 or a domain name (uncompressed, case kept).
fn parse_gateway(
    kind: u8,
    tok: &Token,
    origin: Option<&Name>,
    out: &mut Vec<u8>,
) -> Result<(), TextError> {
    match kind {
        0 if tok.raw == b"." => Ok(()),
        0 => Err(err(format!(
            "gateway '{}' with gateway type 0: expected '.'",
            tok.lossy()
        ))),
        1 => {
            out.extend(addr::parse_ipv4(tok)?);
            Ok(())
        }
        2 => {
            out.extend(addr::parse_ipv6(tok)?);
            Ok(())
        }
        _ => Name::write_text(tok.raw, origin, out)
            .map_err(|e| err(format!("bad gateway '{}': {e}", tok.lossy()))),
    }
}

fn read_gateway(kind: u8, w: &mut Wire) -> Result<(), TextError> {
    match kind {
        0 => Ok(()),
        1 => w.take(4, "gateway").map(|_| ()),
        2 => w.take(16, "gateway").map(|_| ()),
        3 => w.name("gateway").map(|_| ()),
        _ => Err(err(format!("unknown gateway type {kind}"))),
    }
}

/// The gateway read by [`read_gateway`] in text, and the rest of `b`.
fn format_gateway<'a>(kind: u8, b: &'a [u8], out: &mut String) -> &'a [u8] {
    match kind {
        1 => {
            addr::format_ipv4(&b[..4], out);
            &b[4..]
        }
        2 => {
            addr::format_ipv6(&b[..16], out);
            &b[16..]
        }
        3 => {
            let len = Name::read_uncompressed(b, 0).map_or(0, |(_, end)| end);
            push_name_text(out, &b[..len]);
            &b[len..]
        }
        _ => {
            out.push('.');
            b
        }
    }
}

/// IPSECKEY: precedence, gateway type, algorithm, gateway, and the public
/// key in base64 (optional: RFC 4025 2.6).
fn parse_ipseckey(
    f: &mut Fields,
    origin: Option<&Name>,
    out: &mut Vec<u8>,
) -> Result<(), TextError> {
    out.push(f.number("precedence", 0xFF)? as u8);
    let kind = f.number("gateway type", 3)? as u8;
    out.push(kind);
    out.push(f.number("algorithm", 0xFF)? as u8);
    parse_gateway(kind, f.next("gateway")?, origin, out)?;
    let key = joined(f.rest());
    let key = base64_decode(&key).ok_or_else(|| {
        err(format!(
            "bad base64 in IPSECKEY public key: '{}'",
            crate::text::shown(&key)
        ))
    })?;
    out.extend(key);
    Ok(())
}

fn read_ipseckey(w: &mut Wire) -> Result<(), TextError> {
    w.u8("precedence")?;
    let kind = w.u8("gateway type")?;
    w.u8("algorithm")?;
    read_gateway(kind, w)?;
    w.rest();
    Ok(())
}

fn format_ipseckey(b: &[u8], out: &mut String) {
    for &n in &b[..3] {
        push_decimal(out, n.into());
        out.push(' ');
    }
    let key = format_gateway(b[1], &b[3..], out);
    if !key.is_empty() {
        out.push(' ');
        base64_encode(key, out);
    }
}

/// AMTRELAY: precedence, discovery-optional bit (0 or 1), relay type and
/// the relay (RFC 8777 4.3).
fn parse_amtrelay(
    f: &mut Fields,
    origin: Option<&Name>,
    out: &mut Vec<u8>,
) -> Result<(), TextError> {
    out.push(f.number("precedence", 0xFF)? as u8);
    let discovery = f.number("discovery optional bit", 1)? as u8;
    let kind = f.number("relay type", 3)? as u8;
    out.push(discovery << 7 | kind);
    parse_gateway(kind, f.next("relay")?, origin, out)
}

fn read_amtrelay(w: &mut Wire) -> Result<(), TextError> {
    w.u8("precedence")?;
    read_gateway(w.u8("relay type")? & 0x7F, w)?;
    Ok(())
}

fn format_amtrelay(b: &[u8], out: &mut String) {
    push_decimal(out, b[0].into());
    out.push(' ');
    push_decimal(out, (b[1] >> 7).into());
    out.push(' ');
    push_decimal(out, (b[1] & 0x7F).into());
    out.push(' ');
    format_gateway(b[1] & 0x7F, &b[2..], out);
}

/// HIP: public key algorithm, HIT in hex, public key in base64, then the
/// rendezvous servers' names (RFC 8005 5).
fn parse_hip(f: &mut Fields, origin: Option<&Name>, out: &mut Vec<u8>) -> Result<(), TextError> {
    let algorithm = f.number("public key algorithm", 0xFF)? as u8;
    let hit = f.next("HIT")?;
    let hit = hex_decode(hit.raw)
        .filter(|h| (1..=255).contains(&h.len()))
        .ok_or_else(|| {
            err(format!(
                "bad HIP HIT '{}': expected 1-255 octets in hex",
                hit.lossy()
            ))
        })?;
    let key = f.next("public key")?;
    let key = base64_decode(key.raw)
        .filter(|k| !k.is_empty())
        .ok_or_else(|| err(format!("bad base64 in HIP public key: '{}'", key.lossy())))?;
    out.push(hit.len() as u8);
    out.push(algorithm);
    out.extend_from_slice(&(key.len().min(0xFFFF) as u16).to_be_bytes());
    out.extend(hit);
    out.extend(key);
    for server in f.rest() {
        Name::write_text(server.raw, origin, out)
            .map_err(|e| err(format!("bad rendezvous server '{}': {e}", server.lossy())))?;
    }
    Ok(())
}

fn read_hip(w: &mut Wire) -> Result<(), TextError> {
    let hit_len = w.u8("HIT length")? as usize;
    w.u8("public key algorithm")?;
    let key_len = w.u16("public key length")? as usize;
    if hit_len == 0 || key_len == 0 {
        return Err(err("HIP with an empty HIT or public key".into()));
    }
    w.take(hit_len, "HIT")?;
    w.take(key_len, "public key")?;
    while !w.is_done() {
        w.name("rendezvous server")?;
    }
    Ok(())
}

fn format_hip(b: &[u8], out: &mut String) {
    let hit_len = b[0] as usize;
    let key_len = u16::from_be_bytes([b[2], b[3]]) as usize;
    push_decimal(out, b[1].into());
    out.push(' ');
    hex_encode(&b[4..4 + hit_len], out);
    out.push(' ');
    base64_encode(&b[4 + hit_len..4 + hit_len + key_len], out);
    let mut rest = &b[4 + hit_len + key_len..];
    while let Ok((_, end)) = Name::read_uncompressed(rest, 0) {
        out.push(' ');
        push_name_text(out, &rest[..end]);
        rest = &rest[end..];
    }
}

/// Service names WKS takes besides port numbers: the common ones of the
/// IANA registry (BIND and NSD ask the system's services database).
const SERVICES: &[(&str, u16)] = &[
    ("ftp-data", 20),
    ("ftp", 21),
    ("ssh", 22),
    ("telnet", 23),
    ("smtp", 25),
    ("time", 37),
    ("whois", 43),
    ("domain", 53),
    ("bootps", 67),
    ("bootpc", 68),
    ("tftp", 69),
    ("gopher", 70),
    ("finger", 79),
    ("http", 80),
    ("www", 80),
    ("kerberos", 88),
    ("pop3", 110),
    ("sunrpc", 111),
    ("auth", 113),
    ("nntp", 119),
    ("ntp", 123),
    ("imap", 143),
    ("snmp", 161),
    ("ldap", 389),
    ("https", 443),
    ("submission", 587),
];

/// WKS after the address: the protocol (a number, `tcp` or `udp`) and
/// the services (ports or names), a bitmap of ports without its trailing
/// zero octets.
fn parse_wks(f: &mut Fields, out: &mut Vec<u8>) -> Result<(), TextError> {
    let protocol = f.next("protocol")?;
    out.push(match protocol.raw.to_ascii_lowercase().as_slice() {
        b"tcp" => 6,
        b"udp" => 17,
        raw => decimal(raw, 0xFF).map_err(|e| e.message(f.rtype, "protocol", protocol))? as u8,
    });
    let mut bitmap = Vec::new();
    for service in f.rest() {
        let port = port_of(service)?;
        let octet = port as usize / 8;
        if bitmap.len() <= octet {
            bitmap.resize(octet + 1, 0);
        }
        bitmap[octet] |= 0x80 >> (port % 8);
    }
    out.extend(bitmap);
    Ok(())
}

fn port_of(service: &Token) -> Result<u16, TextError> {
    if let Some((_, port)) = SERVICES
        .iter()
        .find(|(name, _)| name.as_bytes().eq_ignore_ascii_case(service.raw))
    {
        return Ok(*port);
    }
    decimal(service.raw, 0xFFFF).map(|p| p as u16).map_err(|_| {
        err(format!(
            "unknown WKS service '{}': use its port number",
            service.lossy()
        ))
    })
}

fn read_wks(w: &mut Wire) -> Result<(), TextError> {
    w.u8("protocol")?;
    if w.rest().len() > 8192 {
        return Err(err("WKS bitmap longer than 8192 octets".into()));
    }
    Ok(())
}

fn format_wks(b: &[u8], out: &mut String) {
    push_decimal(out, b[0].into());
    for (i, &octet) in b[1..].iter().enumerate() {
        for bit in 0..8 {
            if octet & (0x80 >> bit) != 0 {
                out.push(' ');
                push_decimal(out, (i * 8 + bit) as u64);
            }
        }
    }
}

/// NSAP: `0x` and hex digits, dots allowed between them (RFC 1706 5).
fn parse_nsap(tok: &Token, out: &mut Vec<u8>) -> Result<(), TextError> {
    let bad = || {
        err(format!(
            "bad NSAP '{}': expected 0x and hex digits",
            tok.lossy()
        ))
    };
    let digits = tok
        .raw
        .strip_prefix(b"0x")
        .or_else(|| tok.raw.strip_prefix(b"0X"))
        .ok_or_else(bad)?;
    let digits: Vec<u8> = digits.iter().copied().filter(|&c| c != b'.').collect();
    let bytes = hex_decode(&digits)
        .filter(|b| !b.is_empty())
        .ok_or_else(bad)?;
    out.extend(bytes);
    Ok(())
}

fn format_nsap(b: &[u8], out: &mut String) {
    out.push_str("0x");
    hex_encode(b, out);
}
