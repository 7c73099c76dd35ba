//! Any bytes as RDATA of any type: reading must not panic, and what reads
//! must print and read back to the same wire form.
#![no_main]

use heron_proto::rdata::{format_text, parse_text, read_wire};
use heron_proto::text::Token;
use heron_proto::{Name, RType};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let rtype = RType(u16::from_be_bytes([data[0], data[1]]));
    let rdata = &data[2..];
    let mut wire = Vec::new();
    if read_wire(rtype, rdata, 0, rdata.len(), &mut wire).is_err() {
        return;
    }
    let mut text = String::new();
    format_text(rtype, &wire, &mut text);
    let tokens = tokenize(&text);
    let mut again = Vec::new();
    let origin = Name::root();
    parse_text(rtype, &tokens, Some(&origin), &mut again)
        .unwrap_or_else(|e| panic!("{rtype} '{text}' does not parse back: {e}"));
    assert_eq!(wire, again, "{rtype} '{text}'");
});

/// Splits presentation text the way a zone file would: blanks separate, a
/// `"` starts a quoted token and also ends an unquoted one (`key="a b"` is
/// `key=` then `a b`), and a backslash escapes the next byte.
fn tokenize(text: &str) -> Vec<Token<'_>> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b' ' {
            i += 1;
        } else if bytes[i] == b'"' {
            let start = i + 1;
            i = start;
            while i < bytes.len() && bytes[i] != b'"' {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            tokens.push(Token::quoted(&bytes[start..i.min(bytes.len())]));
            i += 1;
        } else {
            let start = i;
            while i < bytes.len() && bytes[i] != b' ' && bytes[i] != b'"' {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            tokens.push(Token::plain(&bytes[start..i.min(bytes.len())]));
        }
    }
    tokens
}
