//! named.conf's syntax: words and quoted strings, `{ }` blocks, `;`
//! ends, comments in three styles (`#`, `//`, `/* */`), and `include`
//! spliced in where it stands. Read into a tree of statements that the
//! interpreter ([`super::bind`]) walks.

use std::path::Path;
use std::sync::Arc;

use super::source::{ImportError, Loc, Reader, Sources, resolve};

/// Blocks within blocks.
const MAX_NESTING: usize = 32;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Open,
    Close,
    End,
}

/// One statement: its words (quoted strings unquoted), its block if it
/// has one, the words after the block (`};` usually has none).
#[derive(Clone, Debug, Default)]
pub struct Statement {
    pub words: Vec<String>,
    pub block: Option<Vec<Statement>>,
    pub after: Vec<String>,
    pub loc: Option<Loc>,
}

impl Statement {
    pub fn name(&self) -> &str {
        self.words.first().map_or("", String::as_str)
    }

    pub fn loc(&self) -> &Loc {
        self.loc
            .as_ref()
            .expect("every parsed statement has a place")
    }

    pub fn arg(&self, i: usize) -> Option<&str> {
        self.words.get(i).map(String::as_str)
    }

    /// The statements of its block (none without one).
    pub fn children(&self) -> &[Statement] {
        self.block.as_deref().unwrap_or(&[])
    }

    /// The last child called `name`.
    pub fn child(&self, name: &str) -> Option<&Statement> {
        self.children().iter().rev().find(|c| c.name() == name)
    }

    /// The statement as a note or an error may show it: a secret's value left out
    /// (a malformed `secret` statement must not print the key), at most
    /// 80 characters.
    pub fn summary(&self) -> String {
        let mut text = super::redacted(&self.words.join(" "));
        if self.block.is_some() {
            text.push_str(" { ... }");
        }
        if text.len() > 80 {
            let mut cut = 77;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push_str("...");
        }
        text
    }
}

/// Reads `path` and every file it includes, as statements; and the
/// files read.
pub fn parse_file(path: &Path) -> Result<(Vec<Statement>, Sources), ImportError> {
    let mut reader = Reader::default();
    let statements = read(&mut reader, path, None)?;
    Ok((statements, reader.into_sources()))
}

fn read(
    reader: &mut Reader,
    path: &Path,
    from: Option<&Loc>,
) -> Result<Vec<Statement>, ImportError> {
    let text = reader.enter(path, from)?;
    let file: Arc<Path> = Arc::from(path);
    let tokens = tokens(&text, &file)?;
    let mut at = 0;
    let statements = block(&tokens, &mut at, 0, reader, path)?;
    if let Some((_, loc)) = tokens.get(at) {
        return Err(ImportError::at(loc, "'}' without a matching '{'"));
    }
    reader.leave();
    Ok(statements)
}

/// The file's tokens. Nesting past [`MAX_NESTING`] is refused here, as
/// its `{` is met: what a hostile file costs stays bounded by the tokens
/// before it, not by the whole file (20 MB of `{` took 1.7 GB when the
/// parser refused them). The text is read as octets: every delimiter is
/// ASCII, so words cut there are whole UTF-8.
fn tokens(text: &str, file: &Arc<Path>) -> Result<Vec<(Token, Loc)>, ImportError> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let (mut line, mut i, mut depth) = (1u32, 0, 0usize);
    let loc = |line| Loc {
        file: file.clone(),
        line,
    };
    while i < bytes.len() {
        let c = bytes[i];
        let next = bytes.get(i + 1).copied();
        match c {
            b'\n' => line += 1,
            c if c.is_ascii_whitespace() => {}
            b'#' => i = skip_line(bytes, i),
            b'/' if next == Some(b'/') => i = skip_line(bytes, i),
            b'/' if next == Some(b'*') => i = skip_comment(bytes, i, &mut line, &loc)?,
            b'{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    let said = format!("blocks nested more than {MAX_NESTING} deep");
                    return Err(ImportError::at(&loc(line), said));
                }
                out.push((Token::Open, loc(line)));
            }
            b'}' => {
                depth = depth.saturating_sub(1);
                out.push((Token::Close, loc(line)));
            }
            b';' => out.push((Token::End, loc(line))),
            b'"' => {
                let start = line;
                let mut word = Vec::new();
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    if bytes[i] == b'\\' && i + 1 < bytes.len() {
                        i += 1;
                    }
                    line += u32::from(bytes[i] == b'\n');
                    word.push(bytes[i]);
                    i += 1;
                }
                if i >= bytes.len() {
                    let said = "a quoted string is not closed";
                    return Err(ImportError::at(&loc(start), said));
                }
                out.push((Token::Word(text_of(word)), loc(start)));
            }
            _ => {
                let start = i;
                while i < bytes.len() && !is_delimiter(bytes[i]) {
                    let comment = bytes[i] == b'#'
                        || (bytes[i] == b'/' && matches!(bytes.get(i + 1), Some(b'/' | b'*')));
                    if comment {
                        break;
                    }
                    i += 1;
                }
                out.push((Token::Word(text_of(bytes[start..i].to_vec())), loc(line)));
                continue;
            }
        }
        i += 1;
    }
    Ok(out)
}

/// Octets of the text cut at ASCII delimiters: whole UTF-8 (an escaped
/// octet of a character is followed by the rest of it).
fn text_of(word: Vec<u8>) -> String {
    String::from_utf8(word).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Past a `/* */` comment starting at `i`: the index of its `/`.
fn skip_comment(
    bytes: &[u8],
    mut i: usize,
    line: &mut u32,
    loc: &dyn Fn(u32) -> Loc,
) -> Result<usize, ImportError> {
    let start = *line;
    i += 2;
    while i < bytes.len() && !(bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/')) {
        *line += u32::from(bytes[i] == b'\n');
        i += 1;
    }
    if i >= bytes.len() {
        return Err(ImportError::at(&loc(start), "a /* comment is not closed"));
    }
    Ok(i + 1)
}

fn is_delimiter(c: u8) -> bool {
    c.is_ascii_whitespace() || matches!(c, b'{' | b'}' | b';' | b'"')
}

/// The index of the last character before the newline that ends the
/// line `i` is on: the caller's step then lands on the newline.
fn skip_line(bytes: &[u8], i: usize) -> usize {
    let mut j = i;
    while j + 1 < bytes.len() && bytes[j + 1] != b'\n' {
        j += 1;
    }
    j
}

/// Statements up to a `}` (left for the caller) or the end.
fn block(
    tokens: &[(Token, Loc)],
    at: &mut usize,
    depth: usize,
    reader: &mut Reader,
    path: &Path,
) -> Result<Vec<Statement>, ImportError> {
    let mut out = Vec::new();
    while let Some((token, _)) = tokens.get(*at) {
        match token {
            Token::Close => return Ok(out),
            Token::End => *at += 1, // an empty statement
            _ => {
                let statement = statement(tokens, at, depth, reader, path)?;
                if statement.name() == "include" {
                    out.extend(include(&statement, reader, path)?);
                } else {
                    out.push(statement);
                }
            }
        }
    }
    if depth > 0 {
        let loc = tokens.last().map(|(_, l)| l.clone());
        return Err(ImportError {
            loc,
            message: "the file ends inside a { } block (a '}' is missing)".into(),
        });
    }
    Ok(out)
}

fn statement(
    tokens: &[(Token, Loc)],
    at: &mut usize,
    depth: usize,
    reader: &mut Reader,
    path: &Path,
) -> Result<Statement, ImportError> {
    let mut statement = Statement {
        loc: Some(tokens[*at].1.clone()),
        ..Statement::default()
    };
    loop {
        let Some((token, loc)) = tokens.get(*at) else {
            return Err(ImportError::at(
                statement.loc(),
                format!("'{}' is not ended by ';'", statement.summary()),
            ));
        };
        *at += 1;
        match token {
            Token::Word(w) if statement.block.is_none() => statement.words.push(w.clone()),
            Token::Word(w) => statement.after.push(w.clone()),
            Token::End => return Ok(statement),
            Token::Open => {
                if depth + 1 > MAX_NESTING {
                    return Err(ImportError::at(
                        loc,
                        format!("blocks nested more than {MAX_NESTING} deep"),
                    ));
                }
                let inner = block(tokens, at, depth + 1, reader, path)?;
                match tokens.get(*at) {
                    Some((Token::Close, _)) => *at += 1,
                    _ => {
                        return Err(ImportError::at(loc, "this '{' is not closed"));
                    }
                }
                // Blocks after the first (`controls`' `inet ... allow { }
                // keys { };`) are read so that the file reads; no
                // statement translated needs them.
                if statement.block.is_none() {
                    statement.block = Some(inner);
                }
            }
            Token::Close => {
                return Err(ImportError::at(
                    loc,
                    format!("'{}' is not ended by ';' before '}}'", statement.summary()),
                ));
            }
        }
    }
}

fn include(
    statement: &Statement,
    reader: &mut Reader,
    path: &Path,
) -> Result<Vec<Statement>, ImportError> {
    let loc = statement.loc();
    let (Some(name), None) = (statement.arg(1), statement.arg(2)) else {
        return Err(ImportError::at(loc, "include takes one file name"));
    };
    let base = path.parent().unwrap_or(Path::new("/"));
    let files = (reader.include(&resolve(base, name))).map_err(|e| ImportError::at(loc, e))?;
    let mut out = Vec::new();
    for file in files {
        out.extend(read(reader, &file, Some(loc))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deep nesting is refused as its `{` is read, with the tokens before
    /// it only: a file of `{` costs what 33 tokens do, not 85 octets of
    /// memory per octet of the file.
    #[test]
    fn deep_nesting_is_refused_while_the_file_is_read() {
        let file: Arc<Path> = Arc::from(Path::new("named.conf"));
        let text = format!("options {{ }};\n{}", "{".repeat(1_000_000));
        let error = tokens(&text, &file).unwrap_err();
        assert_eq!(error.loc.as_ref().map(|l| l.line), Some(2));
        assert!(error.message.contains("nested more than 32"), "{error}");
        let fine = format!("{}{}", "{".repeat(MAX_NESTING), "}".repeat(MAX_NESTING + 5));
        assert!(tokens(&fine, &file).is_ok());
    }

    #[test]
    fn words_comments_and_strings_are_read_as_octets() {
        let file: Arc<Path> = Arc::from(Path::new("named.conf"));
        let text = "zone \"é\\\"x\" { # c\n file /* a\n b */ naïve//c\n; };";
        let words: Vec<String> = (tokens(text, &file).unwrap().into_iter())
            .filter_map(|(t, _)| match t {
                Token::Word(w) => Some(w),
                _ => None,
            })
            .collect();
        assert_eq!(words, ["zone", "é\"x", "file", "naïve"]);
    }
}
