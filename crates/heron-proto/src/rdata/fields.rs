//! Reading RDATA fields from presentation tokens.

use crate::text::{TextError, Token};
use crate::types::RType;

/// A cursor over the tokens of one record's RDATA.
pub struct Fields<'t, 'a> {
    pub rtype: RType,
    toks: &'t [Token<'a>],
    pos: usize,
}

impl<'t, 'a> Fields<'t, 'a> {
    pub fn new(rtype: RType, toks: &'t [Token<'a>]) -> Fields<'t, 'a> {
        Fields {
            rtype,
            toks,
            pos: 0,
        }
    }

    /// The next token, or "missing field: `what`".
    pub fn next(&mut self, what: &str) -> Result<&'t Token<'a>, TextError> {
        let tok = self.peek().ok_or_else(|| missing(what))?;
        self.pos += 1;
        Ok(tok)
    }

    pub fn peek(&self) -> Option<&'t Token<'a>> {
        self.toks.get(self.pos)
    }

    /// All remaining tokens (possibly none).
    pub fn rest(&mut self) -> &'t [Token<'a>] {
        let rest = &self.toks[self.pos..];
        self.pos = self.toks.len();
        rest
    }

    /// All remaining tokens, at least one.
    pub fn rest_nonempty(&mut self, what: &str) -> Result<&'t [Token<'a>], TextError> {
        if self.peek().is_none() {
            return Err(missing(what));
        }
        Ok(self.rest())
    }

    /// Fails if tokens are left over.
    pub fn finish(&self) -> Result<(), TextError> {
        match self.peek() {
            Some(tok) => Err(TextError::new(format!(
                "unexpected extra field '{}'",
                tok.lossy()
            ))),
            None => Ok(()),
        }
    }

    /// The next token as a decimal number in `0..=max`.
    pub fn number(&mut self, what: &str, max: u64) -> Result<u64, TextError> {
        let tok = self.next(what)?;
        decimal(tok.raw, max).map_err(|e| e.message(self.rtype, what, tok))
    }
}

/// An error of a field's text or wire form.
pub fn err(msg: String) -> TextError {
    TextError::new(msg)
}

pub fn missing(what: &str) -> TextError {
    TextError::new(format!("missing field: {what}"))
}

/// Why a token is not a number in range.
#[derive(Debug, PartialEq, Eq)]
pub enum NumError {
    NotNumber,
    Range(u64),
}

impl NumError {
    pub fn message(&self, rtype: RType, what: &str, tok: &Token) -> TextError {
        let tok = tok.lossy();
        TextError::new(match self {
            NumError::NotNumber => format!("{rtype} {what} '{tok}' is not a number"),
            NumError::Range(max) => {
                format!("{rtype} {what} '{tok}' is out of range 0-{max}")
            }
        })
    }
}

/// Parses a plain decimal number in `0..=max`.
pub fn decimal(raw: &[u8], max: u64) -> Result<u64, NumError> {
    let digits = raw.strip_prefix(b"-").unwrap_or(raw);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(NumError::NotNumber);
    }
    if digits.len() < raw.len() {
        return Err(NumError::Range(max));
    }
    let mut v: u64 = 0;
    for &d in digits {
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add((d - b'0') as u64))
            .ok_or(NumError::Range(max))?;
    }
    if v > max {
        return Err(NumError::Range(max));
    }
    Ok(v)
}

/// Concatenates the raw bytes of several tokens (for hex and base64 that
/// may be split by blanks).
pub fn joined(toks: &[Token]) -> Vec<u8> {
    toks.iter().flat_map(|t| t.raw.iter().copied()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals() {
        assert_eq!(decimal(b"0", 255), Ok(0));
        assert_eq!(decimal(b"65535", 65535), Ok(65535));
        assert_eq!(decimal(b"65536", 65535), Err(NumError::Range(65535)));
        assert_eq!(decimal(b"-1", 65535), Err(NumError::Range(65535)));
        assert_eq!(
            decimal(b"99999999999999999999999", 9),
            Err(NumError::Range(9))
        );
        assert_eq!(decimal(b"", 9), Err(NumError::NotNumber));
        assert_eq!(decimal(b"1a", 9), Err(NumError::NotNumber));
        assert_eq!(decimal(b"+1", 9), Err(NumError::NotNumber));
    }

    #[test]
    fn cursor_messages() {
        let toks = [Token::plain(b"70000"), Token::plain(b"foo")];
        let mut f = Fields::new(RType::MX, &toks);
        assert_eq!(
            f.number("preference", 65535).unwrap_err().0,
            "MX preference '70000' is out of range 0-65535"
        );
        assert_eq!(f.finish().unwrap_err().0, "unexpected extra field 'foo'");
        f.next("x").unwrap();
        assert_eq!(f.next("exchange").unwrap_err().0, "missing field: exchange");
        assert!(f.finish().is_ok());
    }
}
