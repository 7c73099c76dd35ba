//! Cutting a large zone file into pieces that threads can read at once.
//!
//! A piece starts at the beginning of an entry, with everything a reader
//! needs from the text before it: the `$ORIGIN` and `$TTL` in force and
//! the line number. One quick pass finds such places: it follows quotes,
//! escapes, comments and parentheses (RFC 1035 5.1) without making tokens,
//! and reads the directives with the real lexer. It stops at the last
//! cut; after it, only lines that start with `$` are looked at. A place qualifies when it
//! is outside parentheses, its line names an owner (a blank-led line would
//! need the previous owner), and a `$TTL` is in force (without one an
//! entry's TTL defaults to the previous entry's, which only reading that
//! entry tells). A file with `$INCLUDE` or `$GENERATE` is not cut.
//!
//! The pass agrees with the lexer on every file the lexer reads without
//! errors; where a file has errors the pieces may not, so a caller reads
//! such a file again whole to report its errors as they are.

use heron_proto::Name;

use super::directives::{parse_ttl, served_ttl};
use super::lexer::Lexer;

/// Where a piece starts, and the state the text before it leaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    /// Octet offset in the text.
    pub start: usize,
    /// Line number of `start` (1 is the first line).
    pub line: u32,
    pub origin: Name,
    pub dollar_ttl: Option<u32>,
}

/// Up to `pieces` pieces of about equal size covering `text`, the first at
/// its start with `origin` and `dollar_ttl` as given; each ends where the
/// next starts. None when the text cannot be cut (`$INCLUDE`, a directive
/// the pass cannot read, or no place that qualifies).
pub(crate) fn split(
    text: &[u8],
    origin: &Name,
    dollar_ttl: Option<u32>,
    pieces: usize,
) -> Option<Vec<Piece>> {
    let first = Piece {
        start: 0,
        line: 1,
        origin: origin.clone(),
        dollar_ttl,
    };
    let mut scan = Scan {
        text,
        pos: 0,
        line: 1,
        depth: 0,
    };
    let mut state = first.clone();
    let mut found = vec![first];
    let size = text.len() / pieces.max(1);
    while scan.pos < text.len() {
        let at_entry = scan.depth == 0;
        let wanted = size * found.len();
        let qualifies = at_entry && state.dollar_ttl.is_some() && starts_owner(text[scan.pos]);
        if found.len() < pieces && scan.pos >= wanted && qualifies {
            found.push(Piece {
                start: scan.pos,
                line: scan.line,
                ..state.clone()
            });
            if found.len() == pieces {
                return only_piece_directives(&text[scan.pos..]).then_some(found);
            }
        }
        if at_entry && text[scan.pos] == b'$' {
            scan.directive(&mut state)?;
        } else {
            scan.line_to_end();
        }
    }
    (found.len() > 1).then_some(found)
}

/// Whether every directive after the last cut is one the last piece's
/// reader follows by itself (`$ORIGIN`, `$TTL`), so the pass can stop at
/// that cut. A line that only looks like a directive (inside quotes or
/// parentheses) keeps the file whole, which is merely slower.
fn only_piece_directives(rest: &[u8]) -> bool {
    memchr::memmem::find_iter(rest, b"\n$").all(|at| {
        let line = &rest[at + 2..];
        let word_end = (line.iter())
            .position(|b| b.is_ascii_whitespace() || matches!(b, b';' | b'('))
            .unwrap_or(line.len());
        let word = &line[..word_end];
        word.eq_ignore_ascii_case(b"ORIGIN") || word.eq_ignore_ascii_case(b"TTL")
    })
}

/// Whether a line starting with this octet names its owner.
fn starts_owner(first: u8) -> bool {
    !matches!(
        first,
        b' ' | b'\t' | b'\r' | b'\n' | b';' | b'$' | b'(' | b')' | b'"'
    )
}

/// The pass over the text: position, line, parentheses open.
struct Scan<'t> {
    text: &'t [u8],
    pos: usize,
    line: u32,
    depth: u32,
}

impl Scan<'_> {
    /// Steps over the rest of the line (and its newline), keeping count of
    /// parentheses outside quotes and comments.
    fn line_to_end(&mut self) {
        let mut quoted = false;
        while let Some(&b) = self.text.get(self.pos) {
            self.pos += 1;
            match b {
                b'\n' => {
                    self.line += 1;
                    return;
                }
                b'\\' => {
                    // An escaped newline continues a quoted string.
                    if self.text.get(self.pos) == Some(&b'\n') {
                        self.line += 1;
                    }
                    self.pos += 1;
                }
                b'"' => quoted = !quoted,
                _ if quoted => {}
                b';' => {
                    let rest = &self.text[self.pos..];
                    self.pos += rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
                }
                b'(' => self.depth += 1,
                b')' => self.depth = self.depth.saturating_sub(1),
                _ => {}
            }
        }
    }

    /// Reads the directive entry at `pos` with the real lexer and applies
    /// `$ORIGIN` and `$TTL` to `state`. None for `$INCLUDE`, `$GENERATE`
    /// (its limits count the whole file's lines) or anything it cannot
    /// read.
    fn directive(&mut self, state: &mut Piece) -> Option<()> {
        let mut lexer = Lexer::resuming(self.text, self.pos, self.line);
        let mut tokens = Vec::new();
        let entry = lexer.next_entry(&mut tokens)?;
        if !entry.errors.is_empty() {
            return None;
        }
        (self.pos, self.line) = lexer.position();
        let name = tokens.first()?.raw;
        let value = tokens.get(1)?;
        if name.eq_ignore_ascii_case(b"$ORIGIN") {
            state.origin = Name::from_text(value.raw, Some(&state.origin)).ok()?;
        } else if name.eq_ignore_ascii_case(b"$TTL") {
            state.dollar_ttl = Some(served_ttl(parse_ttl(value.raw).ok()?));
        } else {
            // `$INCLUDE`, and `$GENERATE`: its limits are the whole file's.
            return None;
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Name {
        Name::parse(s).unwrap()
    }

    fn pieces(text: &str, n: usize) -> Option<Vec<Piece>> {
        split(text.as_bytes(), &name("z.test."), None, n)
    }

    /// Where each piece starts, as (line, first octets of the line).
    fn starts<'t>(text: &'t str, pieces: &[Piece]) -> Vec<(u32, &'t str)> {
        let line_of = |p: &Piece| text[p.start..].lines().next().unwrap_or("");
        pieces.iter().map(|p| (p.line, line_of(p))).collect()
    }

    #[test]
    fn pieces_start_at_owners_with_the_state_before_them() {
        let text = "$TTL 60\na A 192.0.2.1\n$ORIGIN sub\nb A 192.0.2.2\n\
                    c A 192.0.2.3\n$TTL 1h\nd A 192.0.2.4\ne A 192.0.2.5\n";
        let got = pieces(text, 4).unwrap();
        assert_eq!(got[0].start, 0);
        assert_eq!(got[0].dollar_ttl, None, "the first piece starts as told");
        for p in &got[1..] {
            assert!(p.dollar_ttl.is_some());
            let line = text[p.start..].lines().next().unwrap();
            let expected_origin = if p.line >= 4 {
                "sub.z.test."
            } else {
                "z.test."
            };
            assert_eq!(p.origin, name(expected_origin), "{line}");
            assert_eq!(text.lines().nth(p.line as usize - 1), Some(line));
            if p.line >= 7 {
                assert_eq!(p.dollar_ttl, Some(3600));
            }
        }
        assert_eq!(got.len(), 4);
    }

    #[test]
    fn no_piece_starts_inside_parentheses_quotes_or_comments() {
        // Each line that looks like an owner but is not the start of an
        // entry: inside parentheses, after a quote or comment that holds
        // a parenthesis, or led by a blank.
        let mut text = String::from("$TTL 60\n");
        for i in 0..50 {
            text += &format!(
                "s{i} SOA ns h (\nx{i} 2 3\n4 5 )\nt{i} TXT \"(\" ; (\n  TXT \"\\\"(\"\nu{i} TXT \")\"\n"
            );
        }
        let got = pieces(&text, 8).unwrap();
        assert!(got.len() > 2);
        for (line, start) in starts(&text, &got[1..]) {
            assert!(
                start.starts_with('s') || start.starts_with('t') || start.starts_with('u'),
                "line {line}: {start}"
            );
        }
    }

    #[test]
    fn a_file_with_include_or_no_ttl_is_not_cut() {
        let lines: String = (0..100).map(|i| format!("a{i} 60 A 192.0.2.1\n")).collect();
        assert_eq!(
            pieces(&lines, 2),
            None,
            "no $TTL: the previous TTL is needed"
        );
        let with_ttl = format!("$TTL 60\n{lines}");
        assert_eq!(pieces(&with_ttl, 2).map(|p| p.len()), Some(2));
        let include = format!("$TTL 60\n{lines}$INCLUDE other.zone\n{lines}");
        assert_eq!(pieces(&include, 2), None);
        // $GENERATE's limits count the whole file's lines: read whole.
        let generate = format!("$TTL 60\n{lines}$GENERATE 1-2 g$ A 192.0.2.$\n{lines}");
        assert_eq!(pieces(&generate, 2), None);
        assert_eq!(pieces(&format!("$TTL bad\n{lines}"), 2), None);
    }

    #[test]
    fn directives_after_the_last_cut_are_still_seen() {
        let lines: String = (0..100).map(|i| format!("a{i} A 192.0.2.1\n")).collect();
        let near_end =
            |directive: &str| format!("$TTL 60\n{lines}{lines}{directive}\nz A 192.0.2.9\n");
        for stops in [
            "$INCLUDE other.zone",
            "$generate 1-2 g$ A 192.0.2.$",
            "$UNKNOWN x",
        ] {
            assert_eq!(pieces(&near_end(stops), 2), None, "{stops}");
        }
        for follows in ["$origin sub", "$TTL 1h", "$TTL\t1h ; a comment"] {
            let got = pieces(&near_end(follows), 2).map(|p| p.len());
            assert_eq!(got, Some(2), "{follows}");
        }
        // Only looks like one (in quotes): the file is read whole.
        let quoted = format!("$TTL 60\n{lines}{lines}q TXT \"a\n$INCLUDE x\"\n");
        assert_eq!(pieces(&quoted, 2), None);
    }

    #[test]
    fn a_default_ttl_counts_as_in_force() {
        let lines: String = (0..100).map(|i| format!("a{i} A 192.0.2.1\n")).collect();
        let got = split(lines.as_bytes(), &name("z.test."), Some(60), 2).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].dollar_ttl, Some(60));
    }

    #[test]
    fn line_numbers_count_escaped_newlines_in_quotes() {
        let mut text = String::from("$TTL 60\n");
        for i in 0..40 {
            text += &format!("t{i} TXT \"one\\\ntwo\"\n");
        }
        let got = pieces(&text, 4).unwrap();
        for (line, start) in starts(&text, &got[1..]) {
            assert_eq!(text.lines().nth(line as usize - 1), Some(start));
        }
    }

    /// Texts made of entries that cutting must respect, in any order: for
    /// every one the whole reads without errors, the pieces read the same
    /// records, with the same lines.
    mod model {
        use super::*;
        use crate::zonefile::{ReadOptions, Record, read_file_text, read_text_in_pieces};
        use proptest::prelude::*;
        use std::path::Path;

        const ENTRIES: &[&str] = &[
            "a A 192.0.2.1\n",
            "  A 192.0.2.2\n",
            "b 60 IN TXT \"x(\" ; )\n",
            "c TXT \"\\\"(\"\n",
            "d MX ( 10\n  mail ) ; (\n",
            "e SOA ns h (\n 1 2\n 3 4 5 )\n",
            "$ORIGIN sub\n",
            "$ORIGIN z.test.\n",
            "$TTL 1h\n",
            "$TTL 30\n",
            "; a comment (\n",
            "\n",
            "$GENERATE 1-2 g$ A 192.0.2.$\n",
            "f TXT \"one\\\ntwo\"\n",
        ];

        fn shown(records: &[Record]) -> Vec<String> {
            let show = |r: &Record| {
                format!(
                    "{} {} {} {:?} {}",
                    r.owner, r.ttl, r.rtype, r.rdata, r.location.line
                )
            };
            records.iter().map(show).collect()
        }

        proptest! {
            #[test]
            fn pieces_read_what_the_whole_reads(
                picks in prop::collection::vec(0..ENTRIES.len(), 1..80),
                pieces in 2usize..6,
            ) {
                let text: String = std::iter::once("$TTL 60\n")
                    .chain(picks.iter().map(|&i| ENTRIES[i]))
                    .collect();
                let opts = ReadOptions::new(Name::parse("z.test.").unwrap());
                let path = Path::new("z.zone");
                let mut whole = Vec::new();
                let errors = read_file_text(text.as_bytes(), path, &opts, &mut |r| whole.push(r.clone()));
                prop_assume!(errors.is_empty());
                if let Some(read) = read_text_in_pieces(text.as_bytes(), path, &opts, pieces) {
                    prop_assert_eq!(shown(&read), shown(&whole));
                }
            }
        }
    }
}
