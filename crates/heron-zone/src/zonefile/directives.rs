//! `$ORIGIN`, `$TTL` and `$INCLUDE`, and TTL values with units.

use std::path::Path;
use std::sync::Arc;

use heron_proto::Name;
use heron_proto::text::{Token, unescape};

use super::{FileCtx, Reader, Refused, io_message, parent_dir, read_regular};

/// Largest TTL (RFC 2181 section 8).
pub(crate) const MAX_TTL: u32 = 0x7FFF_FFFF;

/// The TTL a record read with `ttl` is served with: a value with its top
/// bit set is 0 (RFC 2181 8), as BIND loads it (Knot serves it as it is,
/// which resolvers then take as 0).
pub(crate) fn served_ttl(ttl: u32) -> u32 {
    if ttl > MAX_TTL { 0 } else { ttl }
}

const DIRECTIVES: [&[u8]; 4] = [b"$ORIGIN", b"$TTL", b"$INCLUDE", b"$GENERATE"];

/// Whether `raw` names a directive this reader knows.
pub(crate) fn is_directive(raw: &[u8]) -> bool {
    DIRECTIVES.iter().any(|d| raw.eq_ignore_ascii_case(d))
}

/// Parses a TTL: plain seconds (`3600`) or numbers with units `w`, `d`, `h`,
/// `m`, `s` in any case (`1h30m`, `2W`), as BIND accepts them. A number
/// without a unit is allowed only on its own. At most 2^32-1: one past
/// 2^31-1 is read, and served as 0 ([`served_ttl`]).
pub(crate) fn parse_ttl(raw: &[u8]) -> Result<u32, String> {
    if raw.is_empty() {
        return Err("empty TTL".into());
    }
    let mut total: u64 = 0;
    let mut i = 0;
    let mut units = 0;
    while i < raw.len() {
        let start = i;
        while i < raw.len() && raw[i].is_ascii_digit() {
            i += 1;
        }
        if start == i {
            return Err(format!(
                "expected a number at '{}'",
                heron_proto::text::shown(&raw[i..])
            ));
        }
        // Digits only, so this fails only on overflow.
        let n: u64 = std::str::from_utf8(&raw[start..i])
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(u64::MAX);
        let mult: u64 = match raw.get(i).map(u8::to_ascii_lowercase) {
            None if units == 0 => 1,
            None => {
                return Err(format!(
                    "number '{}' has no unit (w, d, h, m or s)",
                    heron_proto::text::shown(&raw[start..i])
                ));
            }
            Some(b'w') => 7 * 86400,
            Some(b'd') => 86400,
            Some(b'h') => 3600,
            Some(b'm') => 60,
            Some(b's') => 1,
            Some(_) => {
                let unit = std::str::from_utf8(&raw[i..])
                    .ok()
                    .and_then(|s| s.chars().next())
                    .map(String::from)
                    .unwrap_or_else(|| format!("\\{:03}", raw[i]));
                return Err(format!("unknown unit '{unit}' (expected w, d, h, m or s)"));
            }
        };
        if i < raw.len() {
            i += 1;
        }
        units += 1;
        total = n
            .checked_mul(mult)
            .and_then(|v| v.checked_add(total))
            .unwrap_or(u64::MAX);
        if total > u64::from(u32::MAX) {
            return Err(format!("larger than {} (2^32-1)", u32::MAX));
        }
    }
    Ok(total as u32)
}

impl Reader<'_> {
    /// Handles an entry whose first token starts with `$`.
    pub(super) fn directive(&mut self, ctx: &mut FileCtx, line: u32, tokens: &[Token]) {
        let name = tokens[0].raw;
        let args = &tokens[1..];
        if name.eq_ignore_ascii_case(b"$ORIGIN") {
            self.origin_directive(ctx, line, args);
        } else if name.eq_ignore_ascii_case(b"$TTL") {
            self.ttl_directive(ctx, line, args);
        } else if name.eq_ignore_ascii_case(b"$INCLUDE") {
            self.include(ctx, line, args);
        } else if name.eq_ignore_ascii_case(b"$GENERATE") {
            self.generate(ctx, line, args);
        } else {
            self.error(
                ctx,
                line,
                format!(
                    "unknown directive '{}' (expected $ORIGIN, $TTL, $INCLUDE or $GENERATE)",
                    tokens[0].lossy()
                ),
            );
        }
    }

    fn origin_directive(&mut self, ctx: &mut FileCtx, line: u32, args: &[Token]) {
        let Some(tok) = args.first() else {
            return self.error(ctx, line, "$ORIGIN: missing domain name");
        };
        if let Some(extra) = args.get(1) {
            return self.error(
                ctx,
                line,
                format!("$ORIGIN: unexpected '{}' after the name", extra.lossy()),
            );
        }
        match Name::from_text(tok.raw, Some(&ctx.origin)) {
            Ok(n) => {
                ctx.origin = n;
                // A relative owner written again now names another name.
                ctx.owner_text.clear();
            }
            Err(e) => self.error(
                ctx,
                line,
                format!("$ORIGIN: bad name '{}': {e}", tok.lossy()),
            ),
        }
    }

    fn ttl_directive(&mut self, ctx: &mut FileCtx, line: u32, args: &[Token]) {
        let Some(tok) = args.first() else {
            return self.error(ctx, line, "$TTL: missing TTL");
        };
        if let Some(extra) = args.get(1) {
            return self.error(
                ctx,
                line,
                format!("$TTL: unexpected '{}' after the TTL", extra.lossy()),
            );
        }
        match parse_ttl(tok.raw) {
            Ok(t) => self.dollar_ttl = Some(self.in_range(ctx, line, t)),
            Err(e) => self.error(ctx, line, format!("$TTL: bad TTL '{}': {e}", tok.lossy())),
        }
    }

    /// `$INCLUDE file [origin]`: reads `file` (relative to the including
    /// file's directory) with its own origin and owner; neither carries back.
    fn include(&mut self, ctx: &mut FileCtx, line: u32, args: &[Token]) {
        let Some(file_tok) = args.first() else {
            return self.error(ctx, line, "$INCLUDE: missing file name");
        };
        if let Some(extra) = args.get(2) {
            return self.error(
                ctx,
                line,
                format!("$INCLUDE: unexpected '{}' after the origin", extra.lossy()),
            );
        }
        let shown = file_tok.lossy();
        let origin = match args.get(1) {
            None => ctx.origin.clone(),
            Some(o) => match Name::from_text(o.raw, Some(&ctx.origin)) {
                Ok(n) => n,
                Err(e) => {
                    return self.error(
                        ctx,
                        line,
                        format!("$INCLUDE '{shown}': bad origin '{}': {e}", o.lossy()),
                    );
                }
            },
        };
        let fname = match unescape(file_tok.raw).map(String::from_utf8) {
            Ok(Ok(f)) if !f.is_empty() => f,
            Ok(Ok(_)) => return self.error(ctx, line, "$INCLUDE: empty file name"),
            Ok(Err(_)) => {
                return self.error(
                    ctx,
                    line,
                    format!("$INCLUDE '{shown}': file name is not valid UTF-8"),
                );
            }
            Err(e) => return self.error(ctx, line, format!("$INCLUDE '{shown}': {e}")),
        };
        let path = ctx.dir.join(&fname);
        let canonical = match std::fs::canonicalize(&path) {
            Ok(c) => c,
            Err(e) => {
                // Say where it was looked for: BIND looks from its
                // `directory`, NSD from its working folder.
                let relative = match Path::new(&fname).is_relative() {
                    true => ", a path taken from the including file's folder",
                    false => "",
                };
                let why = io_message(&e);
                // The path as the name was shown: its text is the file's
                // (black-box finding AT-5: control bytes reached the
                // operator's terminal raw).
                let at = heron_proto::text::escaped(path.as_os_str().as_encoded_bytes());
                let msg = format!("$INCLUDE '{shown}': {at}: {why}{relative}");
                return self.error(ctx, line, msg);
            }
        };
        if let Some(top) = self.top_path.take() {
            self.open_files[0].0 = std::fs::canonicalize(top).ok();
        }
        if let Some(k) = self
            .open_files
            .iter()
            .position(|(c, _)| c.as_deref() == Some(canonical.as_path()))
        {
            let mut chain: Vec<String> = self.open_files[k..]
                .iter()
                .map(|(_, f)| f.display().to_string())
                .collect();
            chain.push(path.display().to_string());
            return self.error(
                ctx,
                line,
                format!("$INCLUDE '{shown}': include cycle: {}", chain.join(" -> ")),
            );
        }
        let depth = self.open_files.len();
        if depth > self.opts.max_include_depth {
            return self.error(
                ctx,
                line,
                format!(
                    "$INCLUDE '{shown}': includes nested more than {} deep",
                    self.opts.max_include_depth
                ),
            );
        }
        let left = self.opts.max_size.saturating_sub(self.text_read);
        let text = match read_regular(&path, left) {
            Ok((text, _)) => text,
            Err(Refused::TooLarge(size)) => {
                let max = self.opts.max_size;
                let why = format!(
                    "{size} octets; with the {} read before, more than max-zone-file-size \
                     ({max}) allows one load, $INCLUDEs together",
                    self.text_read
                );
                return self.error(ctx, line, format!("$INCLUDE '{shown}': {why}"));
            }
            Err(Refused::Other(why)) => {
                return self.error(ctx, line, format!("$INCLUDE '{shown}': {why}"));
            }
        };
        self.text_read += text.len() as u64;
        let file: Arc<Path> = Arc::from(path.as_path());
        self.open_files.push((Some(canonical), file.clone()));
        // A blank-led first line reuses the owner before the `$INCLUDE`
        // (RFC 1035 5.1, as BIND and NSD read it).
        let mut inner = FileCtx {
            file,
            dir: parent_dir(&path),
            origin,
            owner: ctx.owner.clone(),
            owner_bad: ctx.owner_bad,
            owner_text: Vec::new(),
        };
        self.read_text(&text, &mut inner);
        self.open_files.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_values() {
        assert_eq!(parse_ttl(b"0"), Ok(0));
        assert_eq!(parse_ttl(b"3600"), Ok(3600));
        assert_eq!(parse_ttl(b"1h30m"), Ok(5400));
        assert_eq!(parse_ttl(b"1H30M"), Ok(5400));
        assert_eq!(parse_ttl(b"2w"), Ok(1_209_600));
        assert_eq!(parse_ttl(b"1d"), Ok(86400));
        assert_eq!(
            parse_ttl(b"1w2d3h4m5s"),
            Ok(604800 + 172800 + 10800 + 240 + 5)
        );
        assert_eq!(parse_ttl(b"2147483647"), Ok(MAX_TTL));
        assert_eq!(parse_ttl(b"007"), Ok(7));
    }

    #[test]
    fn bad_ttls() {
        let err = |s: &str| parse_ttl(s.as_bytes()).unwrap_err();
        assert!(err("1x").contains("unknown unit 'x'"));
        assert_eq!(parse_ttl(b"2147483648"), Ok(1 << 31));
        assert_eq!(parse_ttl(b"4294967295"), Ok(u32::MAX));
        assert!(err("4294967296").contains("larger than 4294967295"));
        assert!(err("99999999999999999999999").contains("larger than"));
        assert!(err("7102w").contains("larger than"));
        assert_eq!(served_ttl(MAX_TTL), MAX_TTL);
        assert_eq!(served_ttl(MAX_TTL + 1), 0);
        assert_eq!(served_ttl(u32::MAX), 0);
        assert!(err("1h30").contains("number '30' has no unit"));
        assert!(err("h").contains("expected a number"));
        assert!(err("1hh").contains("expected a number"));
        assert!(err("").contains("empty"));
        assert!(err("1h-").contains("expected a number"));
    }

    #[test]
    fn directive_names() {
        assert!(is_directive(b"$ttl"));
        assert!(is_directive(b"$GENERATE"));
        assert!(!is_directive(b"$FOO"));
    }
}
