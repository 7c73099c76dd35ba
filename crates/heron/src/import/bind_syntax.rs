//! named.conf's syntax: words and quoted strings, `{ }` blocks, `;`
//! ends, comments in three styles (`#`, `//`, `/* */`), and `include`
//! spliced in where it stands. Read into a tree of statements that the
//! interpreter ([`super::bind`]) walks.

use std::path::Path;
use std::sync::Arc;

use super::source::{ImportError, Loc, Reader, expand_include, resolve};

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

    /// The text as written, shortened, for notes.
    pub fn summary(&self) -> String {
        let mut text = self.words.join(" ");
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

/// Reads `path` and every file it includes, as statements.
pub fn parse_file(path: &Path) -> Result<Vec<Statement>, ImportError> {
    let mut reader = Reader::default();
    read(&mut reader, path, None)
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

fn tokens(text: &str, file: &Arc<Path>) -> Result<Vec<(Token, Loc)>, ImportError> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut line = 1u32;
    let mut i = 0;
    let loc = |line| Loc {
        file: file.clone(),
        line,
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            '\n' => line += 1,
            c if c.is_whitespace() => {}
            '#' => i = skip_line(&chars, i),
            '/' if next == Some('/') => i = skip_line(&chars, i),
            '/' if next == Some('*') => {
                let start = line;
                i += 2;
                while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                    line += u32::from(chars[i] == '\n');
                    i += 1;
                }
                if i >= chars.len() {
                    return Err(ImportError::at(&loc(start), "a /* comment is not closed"));
                }
                i += 1;
            }
            '{' => out.push((Token::Open, loc(line))),
            '}' => out.push((Token::Close, loc(line))),
            ';' => out.push((Token::End, loc(line))),
            '"' => {
                let start = line;
                let mut word = String::new();
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' && i + 1 < chars.len() {
                        i += 1;
                    }
                    line += u32::from(chars[i] == '\n');
                    word.push(chars[i]);
                    i += 1;
                }
                if i >= chars.len() {
                    return Err(ImportError::at(
                        &loc(start),
                        "a quoted string is not closed",
                    ));
                }
                out.push((Token::Word(word), loc(start)));
            }
            _ => {
                let mut word = String::new();
                while i < chars.len() && !is_delimiter(chars[i]) {
                    if (chars[i] == '/' && matches!(chars.get(i + 1), Some('/' | '*')))
                        || chars[i] == '#'
                    {
                        break;
                    }
                    word.push(chars[i]);
                    i += 1;
                }
                out.push((Token::Word(word), loc(line)));
                continue;
            }
        }
        i += 1;
    }
    Ok(out)
}

fn is_delimiter(c: char) -> bool {
    c.is_whitespace() || matches!(c, '{' | '}' | ';' | '"')
}

/// The index of the last character before the newline that ends the
/// line `i` is on: the caller's step then lands on the newline.
fn skip_line(chars: &[char], i: usize) -> usize {
    let mut j = i;
    while j + 1 < chars.len() && chars[j + 1] != '\n' {
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
    let files = expand_include(&resolve(base, name)).map_err(|e| ImportError::at(loc, e))?;
    let mut out = Vec::new();
    for file in files {
        out.extend(read(reader, &file, Some(loc))?);
    }
    Ok(out)
}
