//! Splits zone-file text into entries of tokens (RFC 1035 section 5.1).
//!
//! An entry is one logical line: a physical line, or several when
//! parentheses are open. Tokens borrow from the input buffer; quotes are
//! removed and escapes (`\X`, `\DDD`) are left in place for the consumer, but
//! `\DDD` is checked here so that a bad escape is reported once, with its
//! token, whatever field it is in.

use heron_proto::text::Token;

/// One logical line of a zone file. Its tokens go to the vector passed to
/// [`Lexer::next_entry`].
#[derive(Debug)]
pub(crate) struct Entry {
    /// Line where the entry's first token is.
    pub line: u32,
    /// Whether the entry's first line starts with a blank (the owner is
    /// omitted).
    pub leading_ws: bool,
    /// Syntax problems found while splitting the entry, each with its line;
    /// an entry with errors should not be used.
    pub errors: Vec<(u32, String)>,
}

pub(crate) struct Lexer<'a> {
    buf: &'a [u8],
    pos: usize,
    line: u32,
    /// A lone CR was said: once is enough (a file of CR line ends has one
    /// on every line, and the lines do not advance; black-box finding
    /// AT-3: the same error came once per CR, all on line 1).
    lone_cr_said: bool,
}

/// A carriage return not followed by a line feed is no line end here
/// (Knot refuses it too; BIND and NSD take it as one): read as a blank, it
/// joined two records into one, unsaid (black-box finding).
const LONE_CR: &str = "a carriage return (CR) not followed by a line feed: \
    convert the file to LF or CR LF line ends";

/// Whether what follows a CR is blanks up to the next LF, a comment or
/// the end of the file: that CR ends a line as BIND and NSD read it and
/// as Heron does, so it is no lone CR (a file ending in CR, or in CR and
/// spaces before the LF, loads; so does a CR before a comment).
fn ends_line(after: &[u8]) -> bool {
    let rest = after.iter().find(|b| !matches!(b, b' ' | b'\t' | b'\r'));
    matches!(rest, None | Some(b'\n' | b';'))
}

/// Bytes that end an unquoted token.
fn is_delimiter(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b';' | b'(' | b')' | b'"')
}

impl<'a> Lexer<'a> {
    /// Says a lone CR, the first time.
    fn lone_cr(&mut self, errors: &mut Vec<(u32, String)>) {
        if !std::mem::replace(&mut self.lone_cr_said, true) {
            errors.push((self.line, LONE_CR.into()));
        }
    }

    pub fn new(buf: &'a [u8]) -> Lexer<'a> {
        // A UTF-8 byte-order mark is not part of the first owner name.
        let pos = if buf.starts_with(b"\xEF\xBB\xBF") {
            3
        } else {
            0
        };
        Lexer {
            buf,
            pos,
            line: 1,
            lone_cr_said: false,
        }
    }

    /// A lexer that goes on from octet `pos` of `buf`, which is on line
    /// `line` (a piece of a file read apart, see `split`).
    pub fn resuming(buf: &'a [u8], pos: usize, line: u32) -> Lexer<'a> {
        Lexer {
            buf,
            pos,
            line,
            lone_cr_said: false,
        }
    }

    /// Where the lexer is: octet offset and line.
    pub fn position(&self) -> (usize, u32) {
        (self.pos, self.line)
    }

    /// Reads the next entry, putting its tokens in `tokens` (cleared first).
    /// Blank and comment-only lines are skipped. Returns `None` at the end
    /// of the input.
    pub fn next_entry(&mut self, tokens: &mut Vec<Token<'a>>) -> Option<Entry> {
        tokens.clear();
        let mut entry = Entry {
            line: self.line,
            leading_ws: false,
            errors: Vec::new(),
        };
        let mut depth = 0u32;
        let mut open_line = 0u32;
        let mut line_start = true;
        loop {
            if line_start {
                line_start = false;
                if depth == 0 && tokens.is_empty() && entry.errors.is_empty() {
                    entry.line = self.line;
                    entry.leading_ws = matches!(self.buf.get(self.pos), Some(b' ' | b'\t'));
                }
            }
            let Some(&c) = self.buf.get(self.pos) else {
                if depth > 0 {
                    entry.errors.push((
                        open_line,
                        "unbalanced parentheses: this '(' has no matching ')' before the end of the file"
                            .into(),
                    ));
                }
                if tokens.is_empty() && entry.errors.is_empty() {
                    return None;
                }
                return Some(entry);
            };
            match c {
                // Within parentheses a line end is a blank: BIND reads
                // the CR as one, and so does Heron.
                b'\r' if depth == 0 && !ends_line(&self.buf[self.pos + 1..]) => {
                    self.lone_cr(&mut entry.errors);
                    self.pos += 1;
                }
                b' ' | b'\t' | b'\r' => self.pos += 1,
                b'\n' => {
                    self.pos += 1;
                    self.line += 1;
                    line_start = true;
                    if depth == 0 && (!tokens.is_empty() || !entry.errors.is_empty()) {
                        return Some(entry);
                    }
                }
                b';' => {
                    let end = match self.buf[self.pos..].iter().position(|&b| b == b'\n') {
                        Some(off) => self.pos + off,
                        None => self.buf.len(),
                    };
                    // A comment up to a CR alone would take the next
                    // line with it, unsaid.
                    let comment = &self.buf[self.pos..end];
                    // Any CR but those only blanks follow to the LF.
                    let lone = (comment.iter().enumerate())
                        .any(|(i, &b)| b == b'\r' && !ends_line(&comment[i + 1..]));
                    if lone {
                        self.lone_cr(&mut entry.errors);
                    }
                    self.pos = end;
                }
                b'(' => {
                    self.pos += 1;
                    if depth > 0 {
                        entry.errors.push((
                            self.line,
                            format!(
                                "nested parentheses: '(' inside the '(' opened on line {open_line}"
                            ),
                        ));
                    } else {
                        open_line = self.line;
                    }
                    depth += 1;
                }
                b')' => {
                    self.pos += 1;
                    if depth == 0 {
                        entry.errors.push((
                            self.line,
                            "unbalanced parentheses: ')' without a matching '('".into(),
                        ));
                    } else {
                        depth -= 1;
                    }
                }
                b'"' => {
                    let tok = self.quoted(&mut entry.errors);
                    tokens.push(tok);
                }
                _ => {
                    let tok = self.plain(&mut entry.errors);
                    tokens.push(tok);
                }
            }
        }
    }

    /// Reads a quoted string; `self.pos` is at the opening quote. A string
    /// must end on the line where it starts (an escaped newline excepted).
    fn quoted(&mut self, errors: &mut Vec<(u32, String)>) -> Token<'a> {
        let qline = self.line;
        self.pos += 1;
        let start = self.pos;
        loop {
            match self.buf.get(self.pos) {
                None => {
                    let raw = &self.buf[start..];
                    errors.push((qline, unterminated(raw, "before the end of the file")));
                    return Token::quoted(raw);
                }
                Some(b'"') => {
                    let raw = &self.buf[start..self.pos];
                    self.pos += 1;
                    return Token::quoted(raw);
                }
                Some(b'\n') => {
                    let raw = &self.buf[start..self.pos];
                    errors.push((qline, unterminated(raw, "on its line")));
                    return Token::quoted(raw);
                }
                Some(b'\\') => {
                    if self.buf.get(self.pos + 1) == Some(&b'\n') {
                        self.line += 1;
                    }
                    self.escape(start, errors, true);
                }
                Some(_) => self.pos += 1,
            }
        }
    }

    /// Reads an unquoted token; `self.pos` is at its first byte.
    fn plain(&mut self, errors: &mut Vec<(u32, String)>) -> Token<'a> {
        let start = self.pos;
        while let Some(&b) = self.buf.get(self.pos) {
            if is_delimiter(b) {
                break;
            }
            if b == b'\\' {
                if self.buf.get(self.pos + 1) == Some(&b'\n') {
                    self.pos += 1;
                    errors.push((
                        self.line,
                        format!(
                            "'\\' at the end of a line after '{}'",
                            lossy(&self.buf[start..self.pos - 1])
                        ),
                    ));
                    break;
                }
                self.escape(start, errors, false);
            } else {
                self.pos += 1;
            }
        }
        Token::plain(&self.buf[start..self.pos])
    }

    /// Steps over the escape at `self.pos` (a backslash), checking `\DDD`.
    /// `start` is where the token began, for the error message.
    fn escape(&mut self, start: usize, errors: &mut Vec<(u32, String)>, quoted: bool) {
        let rest = &self.buf[self.pos + 1..];
        match rest.first() {
            None => {
                self.pos += 1;
                errors.push((self.line, "'\\' at the end of the file".into()));
            }
            Some(d) if d.is_ascii_digit() => {
                let digits = rest
                    .iter()
                    .take(3)
                    .take_while(|b| b.is_ascii_digit())
                    .count();
                let ok = digits == 3
                    && (rest[0] - b'0') as u32 * 100
                        + (rest[1] - b'0') as u32 * 10
                        + (rest[2] - b'0') as u32
                        <= 255;
                let esc_end = self.pos + 1 + digits;
                if !ok {
                    // Report the whole token for context.
                    let mut end = esc_end;
                    while end < self.buf.len()
                        && if quoted {
                            self.buf[end] != b'"' && self.buf[end] != b'\n'
                        } else {
                            !is_delimiter(self.buf[end])
                        }
                    {
                        end += 1;
                    }
                    errors.push((
                        self.line,
                        format!(
                            "bad escape '{}' in '{}': \\DDD needs three decimal digits, at most 255",
                            lossy(&self.buf[self.pos..esc_end]),
                            lossy(&self.buf[start..end])
                        ),
                    ));
                }
                self.pos = esc_end;
            }
            Some(_) => self.pos += 2,
        }
    }
}

fn lossy(b: &[u8]) -> String {
    heron_proto::text::shown(b)
}

fn unterminated(raw: &[u8], where_: &str) -> String {
    const MAX: usize = 24;
    let shown = if raw.len() > MAX {
        format!("{}...", lossy(&raw[..MAX]))
    } else {
        lossy(raw)
    };
    format!("unterminated quoted string \"{shown}: no closing '\"' {where_}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (line, leading_ws, tokens as strings with quoted ones in quotes,
    /// errors) of one entry.
    type Lexed = (u32, bool, Vec<String>, Vec<(u32, String)>);

    fn lex(text: &str) -> Vec<Lexed> {
        let mut lexer = Lexer::new(text.as_bytes());
        let mut tokens = Vec::new();
        let mut out = Vec::new();
        while let Some(e) = lexer.next_entry(&mut tokens) {
            let toks = tokens
                .iter()
                .map(|t| {
                    let s = String::from_utf8_lossy(t.raw).into_owned();
                    if t.quoted { format!("\"{s}\"") } else { s }
                })
                .collect();
            out.push((e.line, e.leading_ws, toks, e.errors));
        }
        out
    }

    fn toks(text: &str) -> Vec<Vec<String>> {
        lex(text)
            .into_iter()
            .map(|(_, _, t, errs)| {
                assert!(errs.is_empty(), "{errs:?}");
                t
            })
            .collect()
    }

    #[test]
    fn simple_lines_blank_lines_and_comments() {
        let e = lex("a A 1.2.3.4 ; comment\n\n   ; only a comment\n\t\nb\tNS ns\n");
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].0, 1);
        assert!(!e[0].1);
        assert_eq!(e[0].2, ["a", "A", "1.2.3.4"]);
        assert_eq!(e[1].0, 5);
        assert_eq!(e[1].2, ["b", "NS", "ns"]);
    }

    #[test]
    fn leading_whitespace_marks_omitted_owner() {
        let e = lex("a A 1.2.3.4\n  A 5.6.7.8\n\tMX 10 x\n");
        assert_eq!(
            e.iter().map(|e| e.1).collect::<Vec<_>>(),
            [false, true, true]
        );
        assert_eq!(e[2].0, 3);
    }

    /// A CR alone, between tokens or ending a comment, is an error, not a
    /// blank that joins two records (black-box finding: `x A ...` became
    /// more TXT strings of the record before it).
    #[test]
    fn a_carriage_return_alone_is_refused() {
        for text in [
            "t TXT \"a\" ; note\rx A 192.0.2.9\r\n",
            "t TXT \"a\"\rx A 192.0.2.9\n",
            "t TXT \"a\" ; note\rx A 192.0.2.9\n",
        ] {
            let mut lexer = Lexer::new(text.as_bytes());
            let entry = lexer.next_entry(&mut Vec::new()).unwrap();
            assert_eq!(entry.errors.len(), 1, "{text:?}");
            assert!(entry.errors[0].1.contains("carriage return"), "{text:?}");
        }
        let mut lexer = Lexer::new(b"t TXT \"a\r\" ; a comment\r\n");
        assert!(lexer.next_entry(&mut Vec::new()).unwrap().errors.is_empty());
        // A file of CR line ends: said once, not once per CR (black-box
        // finding AT-3).
        let mut lexer =
            Lexer::new(b"a A 192.0.2.1\rb A 192.0.2.2\rc A 192.0.2.3\rd A 192.0.2.4\r\n");
        let mut said = 0;
        while let Some(entry) = lexer.next_entry(&mut Vec::new()) {
            said += entry.errors.len();
        }
        assert_eq!(said, 1);
        // Blanks alone after the CR: it ends the line as BIND and NSD read
        // it (regression hunt: such files stopped loading).
        for text in [
            "t TXT \"a\"\r",
            "t TXT \"a\"\r  \t\n",
            "t TXT \"a\" ; note\r \n",
            "t TXT \"a\" ; note\r",
            "t TXT \"a\"\r\r\n",
            "t TXT \"a\"\r; note\n",
            "t TXT ( \"a\"\r \"b\" )\n",
        ] {
            let mut lexer = Lexer::new(text.as_bytes());
            let mut tokens = Vec::new();
            let entry = lexer.next_entry(&mut tokens).unwrap();
            assert!(entry.errors.is_empty(), "{text:?}: {:?}", entry.errors);
            assert!(tokens.len() >= 3, "{text:?}");
            assert!(lexer.next_entry(&mut Vec::new()).is_none(), "{text:?}");
        }
    }

    #[test]
    fn crlf_and_no_final_newline() {
        let e = lex("a A 1.2.3.4\r\nb A 5.6.7.8\r\n  TXT x\r\nc A 9.9.9.9");
        assert_eq!(e.len(), 4);
        assert_eq!(e[0].2, ["a", "A", "1.2.3.4"]);
        assert!(e[2].1);
        assert_eq!(e[3].2, ["c", "A", "9.9.9.9"]);
        assert_eq!(e[3].0, 4);
    }

    #[test]
    fn parentheses_span_lines() {
        let e = lex("@ SOA ns h ( 1 ; serial\n 2\n 3 4\n 5 )\nnext A 1.2.3.4\n");
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].0, 1);
        assert_eq!(e[0].2, ["@", "SOA", "ns", "h", "1", "2", "3", "4", "5"]);
        assert_eq!(e[1].0, 5);
        // Parentheses are delimiters even without blanks around them.
        assert_eq!(toks("a TXT (x)y\n"), [["a", "TXT", "x", "y"]]);
    }

    #[test]
    fn quoted_strings() {
        let e = toks(r##"a TXT "hello world; (not a comment" "say \"hi\"" x"y" """##);
        assert_eq!(
            e,
            [[
                "a",
                "TXT",
                "\"hello world; (not a comment\"",
                r#""say \"hi\"""#,
                "x",
                "\"y\"",
                "\"\"",
            ]]
        );
    }

    #[test]
    fn escapes_stay_in_tokens() {
        let e = toks(r"a\ b\;c\(d \065\. TXT \# 0");
        assert_eq!(e, [[r"a\ b\;c\(d", r"\065\.", "TXT", r"\#", "0"]]);
    }

    #[test]
    fn bad_escapes() {
        let e = lex("a\\256b A 1.2.3.4\nb\\25 A 1.2.3.4\nok A 1.2.3.4\n");
        assert_eq!(e.len(), 3);
        assert_eq!(e[0].3.len(), 1);
        assert_eq!(e[0].3[0].0, 1);
        assert!(
            e[0].3[0].1.contains(r"bad escape '\256' in 'a\256b'"),
            "{:?}",
            e[0].3
        );
        assert!(
            e[1].3[0].1.contains(r"bad escape '\25' in 'b\25'"),
            "{:?}",
            e[1].3
        );
        assert!(e[2].3.is_empty());
        let e = lex("a TXT \"x\\9\"\n");
        assert!(e[0].3[0].1.contains(r"in 'x\9'"), "{:?}", e[0].3);
        let e = lex("a TXT x\\");
        assert!(e[0].3[0].1.contains("end of the file"));
    }

    #[test]
    fn paren_errors() {
        let e = lex("a TXT ( x\n( y )\n z )\nb A 1.2.3.4\n");
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].3.len(), 1);
        assert_eq!(e[0].3[0].0, 2);
        assert!(e[0].3[0].1.contains("nested"));
        assert!(e[0].3[0].1.contains("line 1"));
        assert!(e[1].3.is_empty());

        let e = lex("a A 1.2.3.4 )\nb A 1.2.3.4\n");
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].3[0].0, 1);
        assert!(e[0].3[0].1.contains("')' without"));

        let e = lex("a A 1.2.3.4\nb SOA (\n 1 2\n");
        assert_eq!(e.len(), 2);
        assert_eq!(e[1].3, [(2, e[1].3[0].1.clone())]);
        assert!(e[1].3[0].1.contains("unbalanced"));
    }

    #[test]
    fn unterminated_quote_ends_at_line_end() {
        let e = lex("a TXT \"abc\nb A 1.2.3.4\n");
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].3.len(), 1);
        assert_eq!(e[0].3[0].0, 1);
        assert!(e[0].3[0].1.contains("unterminated quoted string \"abc"));
        assert!(e[1].3.is_empty());
        assert_eq!(e[1].2, ["b", "A", "1.2.3.4"]);
        let e = lex("a TXT \"abc");
        assert!(e[0].3[0].1.contains("end of the file"));
    }

    #[test]
    fn byte_order_mark_skipped() {
        assert_eq!(toks("\u{feff}a A 1.2.3.4\n"), [["a", "A", "1.2.3.4"]]);
    }

    #[test]
    fn empty_input() {
        assert!(lex("").is_empty());
        assert!(lex("\n\n ; x\n   ").is_empty());
    }
}
