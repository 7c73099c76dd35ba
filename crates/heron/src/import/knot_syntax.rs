//! knot.conf's syntax: the restricted YAML Knot reads. Sections at the
//! left margin (`server:`, `zone:`...), each holding either settings
//! (`  key: value`) or a list of items (`  - id: x` with their settings
//! below), values plain, quoted or `[a, b]` lists (or `- value` lines
//! under an empty key), `#` comments, and `include: FILE` at the left
//! margin, spliced where it stands. No YAML crate: none reads this
//! subset with the line of every value, and the subset is small.

use std::path::Path;
use std::sync::Arc;

use super::source::{ImportError, Loc, Reader, Sources, resolve};

/// A `key: value` setting.
#[derive(Clone, Debug)]
pub struct Field {
    pub key: String,
    pub values: Vec<String>,
    pub loc: Loc,
}

/// A list item (`- id: x`), or the settings of a section without items.
#[derive(Clone, Debug)]
pub struct Item {
    pub loc: Loc,
    pub fields: Vec<Field>,
}

impl Item {
    /// The last setting called `key`.
    pub fn get(&self, key: &str) -> Option<&Field> {
        self.fields.iter().rev().find(|f| f.key == key)
    }

    /// Its one value.
    pub fn value(&self, key: &str) -> Option<&str> {
        self.get(key)
            .and_then(|f| f.values.first())
            .map(String::as_str)
    }
}

#[derive(Clone, Debug)]
pub struct Section {
    pub name: String,
    pub loc: Loc,
    pub items: Vec<Item>,
}

/// Reads `path` and every file it includes; and the files read.
pub fn parse_file(path: &Path) -> Result<(Vec<Section>, Sources), ImportError> {
    let mut reader = Reader::default();
    let mut out = Vec::new();
    read(&mut reader, path, None, &mut out)?;
    Ok((out, reader.into_sources()))
}

fn read(
    reader: &mut Reader,
    path: &Path,
    from: Option<&Loc>,
    out: &mut Vec<Section>,
) -> Result<(), ImportError> {
    let text = reader.enter(path, from)?;
    let file: Arc<Path> = Arc::from(path);
    let base = path.parent().unwrap_or(Path::new("/"));
    for (index, raw) in text.lines().enumerate() {
        let loc = Loc {
            file: file.clone(),
            line: index as u32 + 1,
        };
        let line = strip_comment(raw, &loc)?;
        if line.trim().is_empty() {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        if line[..indent].contains('\t') {
            return Err(ImportError::at(
                &loc,
                "a tab in the indentation (knot.conf indents with spaces)",
            ));
        }
        if indent == 0 {
            top_level(line, &loc, reader, base, out)?;
        } else {
            nested(line.trim_start(), &loc, out)?;
        }
    }
    reader.leave();
    Ok(())
}

fn top_level(
    line: &str,
    loc: &Loc,
    reader: &mut Reader,
    base: &Path,
    out: &mut Vec<Section>,
) -> Result<(), ImportError> {
    let (key, value) = split_key(line, loc)?;
    if key == "include" {
        let values = parse_value(value, loc)?;
        let [name] = values.as_slice() else {
            return Err(ImportError::at(loc, "include: takes one file name"));
        };
        let files = (reader.include(&resolve(base, name))).map_err(|e| ImportError::at(loc, e))?;
        for file in files {
            read(reader, &file, Some(loc), out)?;
        }
        return Ok(());
    }
    if !value.is_empty() {
        return Err(ImportError::at(
            loc,
            format!("{key}: a section takes no value on its own line"),
        ));
    }
    out.push(Section {
        name: key.to_string(),
        loc: loc.clone(),
        items: Vec::new(),
    });
    Ok(())
}

fn nested(line: &str, loc: &Loc, out: &mut [Section]) -> Result<(), ImportError> {
    let Some(section) = out.last_mut() else {
        return Err(ImportError::at(loc, "an indented line before any section"));
    };
    if let Some(rest) = line
        .strip_prefix("- ")
        .or_else(|| (line == "-").then_some(""))
    {
        // `- value` lines under a key with no value of its own.
        if !rest.trim().is_empty() && !is_field(rest.trim_start()) {
            let Some(field) = section.items.last_mut().and_then(|i| i.fields.last_mut()) else {
                return Err(ImportError::at(
                    loc,
                    "a `- value` line with no key above it",
                ));
            };
            field.values.extend(parse_value(rest.trim(), loc)?);
            return Ok(());
        }
        section.items.push(Item {
            loc: loc.clone(),
            fields: Vec::new(),
        });
        if rest.trim().is_empty() {
            return Ok(());
        }
        return nested(rest.trim_start(), loc, std::slice::from_mut(section));
    }
    let (key, value) = split_key(line, loc)?;
    let field = Field {
        key: key.to_string(),
        values: parse_value(value, loc)?,
        loc: loc.clone(),
    };
    if section.items.is_empty() {
        section.items.push(Item {
            loc: loc.clone(),
            fields: Vec::new(),
        });
    }
    section
        .items
        .last_mut()
        .expect("pushed above")
        .fields
        .push(field);
    Ok(())
}

fn is_field(text: &str) -> bool {
    let Some((key, _)) = text.split_once(':') else {
        return false;
    };
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// `key: value` (the value may be empty).
fn split_key<'l>(line: &'l str, loc: &Loc) -> Result<(&'l str, &'l str), ImportError> {
    let line = line.trim_end();
    match line.split_once(':') {
        Some((key, value)) if is_field(line) && (value.is_empty() || value.starts_with(' ')) => {
            Ok((key, value.trim()))
        }
        _ => Err(ImportError::at(
            loc,
            format!("expected `key: value`, found '{}'", shorten(line)),
        )),
    }
}

/// `text` as an error may show it: a secret's value left out (a
/// malformed `secret:VALUE` line must not print the key), at most 60
/// characters.
fn shorten(text: &str) -> String {
    super::redacted(text).chars().take(60).collect()
}

/// The line without its comment: `#` outside quotes.
fn strip_comment<'l>(line: &'l str, loc: &Loc) -> Result<&'l str, ImportError> {
    let mut quote = None;
    for (i, c) in line.char_indices() {
        match (c, quote) {
            ('"' | '\'', None) => quote = Some(c),
            (c, Some(q)) if c == q => quote = None,
            ('#', None) => return Ok(&line[..i]),
            _ => {}
        }
    }
    if quote.is_some() {
        return Err(ImportError::at(
            loc,
            "a quoted string is not closed on its line",
        ));
    }
    Ok(line)
}

/// A value: empty, `"quoted"`, `[a, "b", c]` or plain.
fn parse_value(text: &str, loc: &Loc) -> Result<Vec<String>, ImportError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(Vec::new());
    }
    if let Some(inner) = text.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or_else(|| ImportError::at(loc, "a [ list is not closed on its line"))?;
        return inner
            .split(',')
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(|v| unquote(v, loc))
            .collect();
    }
    Ok(vec![unquote(text, loc)?])
}

fn unquote(text: &str, loc: &Loc) -> Result<String, ImportError> {
    for q in ['"', '\''] {
        if let Some(inner) = text.strip_prefix(q) {
            return inner.strip_suffix(q).map(str::to_string).ok_or_else(|| {
                ImportError::at(loc, "a quoted value has text after its closing quote")
            });
        }
    }
    Ok(text.to_string())
}
