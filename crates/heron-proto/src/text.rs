//! Presentation format (RFC 1035 5.1) pieces shared by zone files and RDATA.
//!
//! A zone-file reader splits an entry into [`Token`]s; escapes stay in place
//! so that each consumer interprets them the way its field needs (`\.` is a
//! literal dot inside a name label, but just a dot in a character-string).

use std::fmt;

/// The decimal digits of `n`, written at the end of `buf`: for text
/// written at every record (TTLs, RDATA numbers) without a string each.
pub fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
}

/// Appends `n` in decimal.
pub fn push_decimal(out: &mut String, n: u64) {
    let mut buf = [0; 20];
    let digits = decimal(n, &mut buf);
    out.push_str(std::str::from_utf8(digits).expect("ASCII digits"));
}

/// One whitespace-separated field of an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token<'a> {
    /// The field's bytes, escapes not yet decoded, quotes removed.
    pub raw: &'a [u8],
    /// Whether the field was written between double quotes.
    pub quoted: bool,
}

impl<'a> Token<'a> {
    pub fn plain(raw: &'a [u8]) -> Token<'a> {
        Token { raw, quoted: false }
    }

    pub fn quoted(raw: &'a [u8]) -> Token<'a> {
        Token { raw, quoted: true }
    }

    /// The raw text as an error message shows it ([`shown`]).
    pub fn lossy(&self) -> String {
        shown(self.raw)
    }
}

/// Octets of text shown in an error message at most.
pub const SHOWN_MAX: usize = 64;

/// `raw` as an error message (and so a log line or a terminal) shows it:
/// lossily as UTF-8, control characters as `\DDD` (an escape sequence in
/// a zone file must not reach the operator's terminal raw), and cut after
/// [`SHOWN_MAX`] octets with `...` (one token of a damaged file can be
/// hundreds of megabytes).
pub fn shown(raw: &[u8]) -> String {
    let mut out = escaped(&raw[..raw.len().min(SHOWN_MAX)]);
    if raw.len() > SHOWN_MAX {
        out.push_str("...");
    }
    out
}

/// `raw` lossily as UTF-8, control characters as `\DDD`, whole: for text
/// bounded already (a path) that an error shows.
pub fn escaped(raw: &[u8]) -> String {
    let mut out = String::with_capacity(raw.len());
    for c in String::from_utf8_lossy(raw).chars() {
        match c {
            c if c.is_control() => out.push_str(&format!("\\{:03}", c as u32 & 0xFF)),
            c => out.push(c),
        }
    }
    out
}

/// An error in presentation-format text; the zone reader adds file and line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextError(pub String);

impl TextError {
    pub fn new(msg: impl Into<String>) -> TextError {
        TextError(msg.into())
    }
}

impl fmt::Display for TextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TextError {}

/// Decodes `\DDD` and `\X` escapes.
pub fn unescape(raw: &[u8]) -> Result<Vec<u8>, TextError> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'\\' {
            let (b, used) = crate::name::unescape_at(raw, i)
                .map_err(|_| TextError::new("bad escape sequence"))?;
            out.push(b);
            i += used;
        } else {
            out.push(raw[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// Decodes a `<character-string>` (at most 255 octets).
pub fn char_string(tok: &Token) -> Result<Vec<u8>, TextError> {
    let bytes = unescape(tok.raw)?;
    if bytes.len() > 255 {
        return Err(TextError::new(format!(
            "character-string of {} octets is longer than 255",
            bytes.len()
        )));
    }
    Ok(bytes)
}

/// Appends a `<character-string>` in quotes, escaping what must be escaped.
pub fn push_char_string(out: &mut String, bytes: &[u8]) {
    out.push('"');
    for &b in bytes {
        match b {
            b'"' | b'\\' => {
                out.push('\\');
                out.push(b as char);
            }
            0x20..=0x7E => out.push(b as char),
            _ => {
                out.push('\\');
                out.push_str(&format!("{b:03}"));
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {

    #[test]
    fn error_text_is_escaped_and_cut() {
        assert_eq!(shown(b"www"), "www");
        assert_eq!(shown(b"a\x1b[31mRED"), "a\\027[31mRED");
        assert_eq!(shown(b"\0\x07"), "\\000\\007");
        let long = shown(&vec![0u8; 1_000_000]);
        assert_eq!(long.len(), SHOWN_MAX * 4 + 3, "{}", &long[..20]);
        assert!(long.ends_with("..."));
    }

    use super::*;

    #[test]
    fn char_strings() {
        let t = Token::quoted(br#"a\"b\010c\\"#);
        assert_eq!(char_string(&t).unwrap(), b"a\"b\nc\\");
        let mut s = String::new();
        push_char_string(&mut s, b"a\"b\nc\\ d");
        assert_eq!(s, r#""a\"b\010c\\ d""#);
        let long = vec![b'x'; 256];
        assert!(char_string(&Token::plain(&long)).is_err());
        assert!(unescape(br"\25").is_err());
    }
}
