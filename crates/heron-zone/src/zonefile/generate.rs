//! BIND's `$GENERATE start-stop[/step] lhs [ttl] [class] type rhs`.
//!
//! In `lhs` and `rhs`, `$` stands for the iterator and `${offset[,width[,base]]}`
//! formats `iterator + offset` zero-padded to `width` in base `d` (decimal),
//! `o` (octal), `x`/`X` (hex) or `n`/`N` (nibbles: hex digits least
//! significant first, separated by dots, `width` counting the dots, exactly as
//! BIND writes them). `$$` and `\$` give a literal `$`; other escapes are left
//! for the name or RDATA parser. `rhs` is one field (quote it when it has
//! blanks); after substitution it is split into fields again and parsed as
//! the RDATA of `type`, like BIND does.

use std::io::Write;

use heron_proto::Name;
use heron_proto::text::Token;

use super::lexer::Lexer;
use super::{FileCtx, MAX_GENERATE_TEXT, Reader, record_type};

/// A quoted rhs with each `\"` made a plain `"` (other escapes kept), as
/// BIND's lexer reads a quoted field: `"\"v=spf1 $ -all\""` then reads
/// again as one quoted string, not three strings with quotes in them.
fn unescape_quotes(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut bytes = raw.iter();
    while let Some(&b) = bytes.next() {
        match (b, bytes.clone().next()) {
            (b'\\', Some(&b'"')) => {
                out.push(b'"');
                bytes.next();
            }
            (b'\\', Some(&next)) => {
                out.extend([b, next]);
                bytes.next();
            }
            _ => out.push(b),
        }
    }
    out
}

/// Widest `${...}` field accepted (a name is at most 255 octets anyway).
const MAX_WIDTH: usize = 255;

#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Range {
    pub start: i64,
    pub stop: i64,
    pub step: i64,
}

impl Range {
    /// How many values the range yields.
    pub fn count(&self) -> u64 {
        ((self.stop - self.start) / self.step + 1) as u64
    }
}

/// Parses `start-stop[/step]` (non-negative, `stop >= start`, `step >= 1`).
pub(crate) fn parse_range(raw: &[u8]) -> Result<Range, String> {
    let text = std::str::from_utf8(raw).map_err(|_| "not text".to_string())?;
    let shape = "expected start-stop or start-stop/step";
    let (bounds, step) = match text.split_once('/') {
        Some((b, s)) => (b, Some(s)),
        None => (text, None),
    };
    let (start, stop) = bounds.split_once('-').ok_or_else(|| shape.to_string())?;
    let num = |s: &str| -> Result<i64, String> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(shape.to_string());
        }
        match s.parse::<i64>() {
            Ok(v) if v <= i32::MAX as i64 => Ok(v),
            _ => Err(format!("{s} is too large (at most {})", i32::MAX)),
        }
    };
    let range = Range {
        start: num(start)?,
        stop: num(stop)?,
        step: step.map(num).transpose()?.unwrap_or(1),
    };
    if range.stop < range.start {
        return Err("stop is less than start".into());
    }
    if range.step < 1 {
        return Err("step must be at least 1".into());
    }
    Ok(range)
}

#[derive(Debug, PartialEq, Eq)]
enum Piece {
    Literal(Vec<u8>),
    Value { offset: i64, width: usize, base: u8 },
}

/// A compiled `lhs` or `rhs`.
#[derive(Debug)]
pub(crate) struct Template {
    pieces: Vec<Piece>,
}

impl Template {
    pub fn compile(raw: &[u8]) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut lit = Vec::new();
        let mut i = 0;
        while i < raw.len() {
            match raw[i] {
                b'\\' => {
                    // Kept with its escaped byte for the name/RDATA parser,
                    // which turns `\$` into `$`.
                    let end = (i + 2).min(raw.len());
                    lit.extend_from_slice(&raw[i..end]);
                    i = end;
                }
                b'$' if raw.get(i + 1) == Some(&b'$') => {
                    lit.push(b'$');
                    i += 2;
                }
                b'$' => {
                    if !lit.is_empty() {
                        pieces.push(Piece::Literal(std::mem::take(&mut lit)));
                    }
                    if raw.get(i + 1) == Some(&b'{') {
                        let body = &raw[i + 2..];
                        let close = body
                            .iter()
                            .position(|&b| b == b'}')
                            .ok_or_else(|| format!("'{}' has no closing '}}'", lossy(&raw[i..])))?;
                        pieces
                            .push(parse_modifier(&body[..close]).map_err(|e| {
                                format!("'{}': {e}", lossy(&raw[i..i + 3 + close]))
                            })?);
                        i += 3 + close;
                    } else {
                        pieces.push(Piece::Value {
                            offset: 0,
                            width: 0,
                            base: b'd',
                        });
                        i += 1;
                    }
                }
                b => {
                    lit.push(b);
                    i += 1;
                }
            }
        }
        if !lit.is_empty() {
            pieces.push(Piece::Literal(lit));
        }
        Ok(Template { pieces })
    }

    /// Appends the text for iterator value `value` to `out`.
    pub fn expand(&self, value: i64, out: &mut Vec<u8>) -> Result<(), String> {
        for p in &self.pieces {
            match *p {
                Piece::Literal(ref l) => out.extend_from_slice(l),
                Piece::Value {
                    offset,
                    width,
                    base,
                } => {
                    let v = value + offset;
                    if v < 0 && base != b'd' {
                        return Err(format!(
                            "value {v} is negative and cannot be written in base '{}'",
                            base as char
                        ));
                    }
                    // Writing to a Vec cannot fail.
                    let _ = match base {
                        b'd' => write!(out, "{v:0width$}"),
                        b'o' => write!(out, "{v:0width$o}"),
                        b'x' => write!(out, "{v:0width$x}"),
                        b'X' => write!(out, "{v:0width$X}"),
                        _ => {
                            nibbles(v as u64, width, base == b'N', out);
                            Ok(())
                        }
                    };
                }
            }
        }
        Ok(())
    }
}

/// Parses the inside of `${offset[,width[,base]]}`.
fn parse_modifier(body: &[u8]) -> Result<Piece, String> {
    let text = std::str::from_utf8(body).map_err(|_| "not text".to_string())?;
    let mut parts = text.split(',');
    let offset_s = parts.next().unwrap_or("").trim();
    let width_s = parts.next().map(str::trim);
    let base_s = parts.next().map(str::trim);
    if parts.next().is_some() {
        return Err("expected ${offset[,width[,base]]}".into());
    }
    let offset = offset_s
        .parse::<i64>()
        .ok()
        .filter(|o| o.unsigned_abs() <= i32::MAX as u64)
        .ok_or_else(|| format!("bad offset '{offset_s}'"))?;
    let width = match width_s {
        None => 0,
        Some(w) => match w.parse::<usize>() {
            Ok(w) if w <= MAX_WIDTH => w,
            Ok(_) => return Err(format!("width {w} is larger than {MAX_WIDTH}")),
            Err(_) => return Err(format!("bad width '{w}'")),
        },
    };
    let base = match base_s {
        None => b'd',
        Some(b) if b.len() == 1 && b"doxXnN".contains(&b.as_bytes()[0]) => b.as_bytes()[0],
        Some(b) => {
            return Err(format!("bad base '{b}' (expected d, o, x, X, n or N)"));
        }
    };
    Ok(Piece::Value {
        offset,
        width,
        base,
    })
}

/// BIND's nibble format: hex digits from the least significant, each
/// followed by a dot when more digits follow or `width` (which counts the
/// dots too) is not yet filled.
fn nibbles(mut value: u64, mut width: usize, upper: bool, out: &mut Vec<u8>) {
    let digits: &[u8; 16] = if upper {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    loop {
        out.push(digits[(value & 0xF) as usize]);
        value >>= 4;
        width = width.saturating_sub(1);
        if width > 0 || value != 0 {
            out.push(b'.');
            width = width.saturating_sub(1);
        }
        if value == 0 && width == 0 {
            break;
        }
    }
}

fn lossy(b: &[u8]) -> String {
    heron_proto::text::shown(b)
}

impl Reader<'_> {
    /// Expands `$GENERATE` (the arguments after the directive).
    pub(super) fn generate(&mut self, ctx: &mut FileCtx, line: u32, args: &[Token]) {
        const USAGE: &str = "expected '$GENERATE start-stop[/step] lhs [ttl] [class] type rhs'";
        if args.len() < 4 {
            return self.error(ctx, line, format!("$GENERATE: too few fields; {USAGE}"));
        }
        let range = match parse_range(args[0].raw) {
            Ok(r) => r,
            Err(e) => {
                return self.error(
                    ctx,
                    line,
                    format!("$GENERATE: bad range '{}': {e}", args[0].lossy()),
                );
            }
        };
        let lhs = match Template::compile(args[1].raw) {
            Ok(t) => t,
            Err(e) => {
                return self.error(
                    ctx,
                    line,
                    format!("$GENERATE: bad lhs '{}': {e}", args[1].lossy()),
                );
            }
        };
        let rest = &args[2..];
        let mut i = 0;
        let tc = match self.ttl_class(rest, &mut i) {
            Ok(tc) => tc,
            Err(e) => return self.error(ctx, line, format!("$GENERATE: {e}")),
        };
        let (Some(type_tok), Some(rhs_tok)) = (rest.get(i), rest.get(i + 1)) else {
            return self.error(
                ctx,
                line,
                format!("$GENERATE: missing type or rhs; {USAGE}"),
            );
        };
        let rtype = match record_type(type_tok) {
            Ok(t) => t,
            Err(e) => return self.error(ctx, line, format!("$GENERATE: {e}")),
        };
        if let Some(extra) = rest.get(i + 2) {
            return self.error(
                ctx,
                line,
                format!(
                    "$GENERATE: unexpected '{}' after the rhs '{}' (the rhs is one field: \
                     quote it if it contains blanks)",
                    extra.lossy(),
                    rhs_tok.lossy()
                ),
            );
        }
        let rhs_raw = match rhs_tok.quoted {
            true => unescape_quotes(rhs_tok.raw),
            false => rhs_tok.raw.to_vec(),
        };
        let rhs = match Template::compile(&rhs_raw) {
            Ok(t) => t,
            Err(e) => {
                return self.error(
                    ctx,
                    line,
                    format!("$GENERATE: bad rhs '{}': {e}", rhs_tok.lossy()),
                );
            }
        };
        let count = range.count();
        if count > self.opts.max_generate as u64 {
            return self.error(
                ctx,
                line,
                format!(
                    "$GENERATE: range '{}' makes {count} records, more than the limit of {}",
                    args[0].lossy(),
                    self.opts.max_generate
                ),
            );
        }
        if self.generated.0 + count > self.opts.max_generate as u64 {
            return self.error(
                ctx,
                line,
                format!(
                    "$GENERATE: this line's {count} records and the {} made before it are more \
                     than the limit of {} for a zone file",
                    self.generated.0, self.opts.max_generate
                ),
            );
        }
        self.generated.0 += count;
        let ttl = match self.resolve_ttl(ctx, line, &tc) {
            Ok(v) => v,
            Err(e) => return self.error(ctx, line, format!("$GENERATE: {e}")),
        };

        let mut lhs_buf = Vec::with_capacity(64);
        let mut rhs_buf = Vec::with_capacity(64);
        let mut value = range.start;
        while value <= range.stop {
            lhs_buf.clear();
            rhs_buf.clear();
            let result = lhs
                .expand(value, &mut lhs_buf)
                .and_then(|()| rhs.expand(value, &mut rhs_buf))
                .and_then(|()| {
                    Name::from_text(&lhs_buf, Some(&ctx.origin))
                        .map_err(|e| format!("bad owner name '{}': {e}", lossy(&lhs_buf)))
                })
                .and_then(|owner| {
                    let mut tokens = Vec::new();
                    let mut lexer = Lexer::new(&rhs_buf);
                    let errors = lexer.next_entry(&mut tokens).map(|e| e.errors);
                    if let Some((_, e)) = errors.into_iter().flatten().next() {
                        return Err(format!("rhs '{}': {e}", lossy(&rhs_buf)));
                    }
                    self.rdata.clear();
                    (self.parse_rdata)(rtype, &tokens, Some(&ctx.origin), &mut self.rdata)
                        .map_err(|e| format!("{rtype}: {e}"))?;
                    Ok(owner)
                });
            self.generated.1 += (lhs_buf.len() + rhs_buf.len()) as u64;
            if self.generated.1 > MAX_GENERATE_TEXT {
                let why = format!(
                    "$GENERATE: the file's lines make more than {} MiB of text in all",
                    MAX_GENERATE_TEXT >> 20
                );
                return self.error(ctx, line, why);
            }
            match result {
                Ok(owner) => {
                    self.emit(ctx, owner, (rtype, ttl), line);
                }
                Err(e) => {
                    // One error per directive: the others would most likely
                    // repeat it for every value.
                    return self.error(ctx, line, format!("$GENERATE: for {value}: {e}"));
                }
            }
            value += range.step;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand(t: &str, v: i64) -> String {
        let mut out = Vec::new();
        Template::compile(t.as_bytes())
            .unwrap()
            .expand(v, &mut out)
            .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn ranges() {
        assert_eq!(
            parse_range(b"1-10"),
            Ok(Range {
                start: 1,
                stop: 10,
                step: 1
            })
        );
        assert_eq!(parse_range(b"0-10/3").unwrap().count(), 4);
        assert_eq!(parse_range(b"5-5").unwrap().count(), 1);
        assert!(parse_range(b"10-1").unwrap_err().contains("less than"));
        assert!(parse_range(b"1-10/0").unwrap_err().contains("step"));
        assert!(
            parse_range(b"a-b")
                .unwrap_err()
                .contains("expected start-stop")
        );
        assert!(
            parse_range(b"1")
                .unwrap_err()
                .contains("expected start-stop")
        );
        assert!(
            parse_range(b"-1-5")
                .unwrap_err()
                .contains("expected start-stop")
        );
        assert!(
            parse_range(b"1-99999999999")
                .unwrap_err()
                .contains("too large")
        );
    }

    #[test]
    fn substitution() {
        assert_eq!(expand("host-$", 7), "host-7");
        assert_eq!(expand("$.$", 3), "3.3");
        assert_eq!(expand("h${10}", 1), "h11");
        assert_eq!(expand("h${-1,3}", 1), "h000");
        assert_eq!(expand("h${0,4,d}", 42), "h0042");
        assert_eq!(expand("${0,3,o}", 8), "010");
        assert_eq!(expand("${0,2,x}", 255), "ff");
        assert_eq!(expand("${0,4,X}", 255), "00FF");
        assert_eq!(expand("${-5}", 1), "-4");
        assert_eq!(expand(r"a\$b$$c$", 2), r"a\$b$c2");
        assert_eq!(expand(r"x\.$", 1), r"x\.1");
        assert_eq!(expand("${ 1 , 2 , d }", 1), "02");
    }

    #[test]
    fn nibble_mode_as_bind() {
        // From BIND's generate tests: 1024 = 0x400.
        assert_eq!(expand("${0,3,n}", 1024), "0.0.4");
        assert_eq!(expand("${0,0,n}", 0x123), "3.2.1");
        assert_eq!(expand("${0,0,N}", 0xabc), "C.B.A");
        assert_eq!(expand("${0,0,n}", 0), "0");
        // Width counts dots; an even width leaves a final dot, as in BIND.
        assert_eq!(expand("${0,4,n}", 0), "0.0.");
        assert_eq!(expand("${0,7,n}", 0x1f), "f.1.0.0");
    }

    #[test]
    fn bad_templates() {
        let err = |t: &str| Template::compile(t.as_bytes()).unwrap_err();
        assert!(err("a${1").contains("no closing"));
        assert!(err("a${x}").contains("bad offset"));
        assert!(err("a${1,y}").contains("bad width"));
        assert!(err("a${1,2,q}").contains("bad base 'q'"));
        assert!(err("a${1,2,d,4}").contains("expected"));
        assert!(err("a${0,999}").contains("width"));
        let mut out = Vec::new();
        let t = Template::compile(b"${-5,0,x}").unwrap();
        assert!(t.expand(1, &mut out).unwrap_err().contains("negative"));
    }
}
