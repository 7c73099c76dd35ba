//! Reading the files of another server's configuration: where each
//! setting came from (file and line), `include` with globs, and the
//! bounds that keep a hostile or mistaken configuration (an include
//! loop, a huge file, a glob matching a disk) from costing without end.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Octets all the files of one configuration may hold together.
pub const MAX_TOTAL_BYTES: u64 = 512 << 20;
/// Files one configuration may read (a file per zone is common).
pub const MAX_FILES: usize = 200_000;
/// Includes within includes.
pub const MAX_INCLUDE_DEPTH: usize = 16;

/// Where a setting was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loc {
    pub file: Arc<Path>,
    pub line: u32,
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// What stops an import: the configuration cannot be read as a whole.
#[derive(Debug, PartialEq, Eq)]
pub struct ImportError {
    pub loc: Option<Loc>,
    pub message: String,
}

impl ImportError {
    pub fn at(loc: &Loc, message: impl Into<String>) -> ImportError {
        ImportError {
            loc: Some(loc.clone()),
            message: message.into(),
        }
    }

    pub fn plain(message: impl Into<String>) -> ImportError {
        ImportError {
            loc: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let message = shown(&self.message);
        match &self.loc {
            Some(loc) => write!(f, "{loc}: error: {message}"),
            None => write!(f, "error: {message}"),
        }
    }
}

/// Characters of a word a message echoes, as zone-file errors cut theirs.
const SHOWN_WORD: usize = 64;
/// Characters of a path a message echoes (PATH_MAX).
const SHOWN_PATH: usize = 4096;

/// `text` as a message shows it: each word (between spaces) of the input
/// it echoes cut to [`SHOWN_WORD`] characters and `...`, a path to
/// [`SHOWN_PATH`], so that a hostile or mistaken token (a 50 MB quoted
/// string) is not echoed whole.
pub fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    let limit = |w: &str| match w.contains('/') {
        true => SHOWN_PATH,
        false => SHOWN_WORD,
    };
    if text.split(' ').all(|w| w.len() <= limit(w)) {
        return std::borrow::Cow::Borrowed(text);
    }
    let words = text
        .split(' ')
        .map(|w| match w.char_indices().nth(limit(w)) {
            Some((cut, _)) => format!("{}...", &w[..cut]),
            None => w.to_string(),
        });
    std::borrow::Cow::Owned(words.collect::<Vec<_>>().join(" "))
}

/// The files read so far, and the chain of includes being read.
pub struct Reader {
    /// Octets all files may hold together.
    max_bytes: u64,
    bytes: u64,
    files: usize,
    /// Canonical paths of the files being read, outermost first.
    stack: Vec<PathBuf>,
    /// Every file read, and the include patterns with a wildcard.
    read: Sources,
}

/// The files of the old server's configuration: never written over, nor
/// a new file made where an include pattern would read it.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    /// Canonical paths of every file read, in the order read.
    pub files: Vec<PathBuf>,
    /// Include patterns with a wildcard in their file name.
    pub globs: Vec<PathBuf>,
}

impl Sources {
    /// The pattern `path` matches, if one does (`path` need not exist).
    pub fn glob_matching(&self, path: &Path) -> Option<&Path> {
        let folder = |p: &Path| {
            let f = p.parent().filter(|f| !f.as_os_str().is_empty());
            std::fs::canonicalize(f.unwrap_or(Path::new("."))).ok()
        };
        let name = path.file_name()?.to_str()?;
        let within = folder(path)?;
        self.globs
            .iter()
            .filter(|g| folder(g).as_ref() == Some(&within))
            .find(|g| (g.file_name().and_then(|n| n.to_str())).is_some_and(|n| glob_match(n, name)))
            .map(PathBuf::as_path)
    }
}

impl Default for Reader {
    fn default() -> Reader {
        Reader::with_limit(MAX_TOTAL_BYTES)
    }
}

impl Reader {
    /// A reader that refuses files past `max_bytes` in all.
    pub fn with_limit(max_bytes: u64) -> Reader {
        Reader {
            max_bytes,
            bytes: 0,
            files: 0,
            stack: Vec::new(),
            read: Sources::default(),
        }
    }

    /// Reads `path` (named at `from`, if included) and marks it as being
    /// read until [`Reader::leave`]. Refuses a file already on the
    /// chain (an include loop), a chain too deep, and reading past the
    /// bounds.
    pub fn enter(&mut self, path: &Path, from: Option<&Loc>) -> Result<String, ImportError> {
        let fail = |message: String| match from {
            Some(loc) => ImportError::at(loc, message),
            None => ImportError::plain(message),
        };
        let canonical = path
            .canonicalize()
            .map_err(|e| fail(format!("cannot read {}: {e}", path.display())))?;
        if self.stack.contains(&canonical) {
            return Err(fail(format!(
                "{} includes itself (an include loop)",
                path.display()
            )));
        }
        if self.stack.len() >= MAX_INCLUDE_DEPTH {
            return Err(fail(format!(
                "includes nested more than {MAX_INCLUDE_DEPTH} deep at {}",
                path.display()
            )));
        }
        let meta = std::fs::metadata(&canonical)
            .map_err(|e| fail(format!("cannot read {}: {e}", path.display())))?;
        if !meta.is_file() {
            return Err(fail(format!("{} is not a regular file", path.display())));
        }
        self.files += 1;
        self.bytes += meta.len();
        if self.files > MAX_FILES || self.bytes > self.max_bytes {
            return Err(fail(format!(
                "the configuration is larger than {MAX_FILES} files or {} octets (at {})",
                self.max_bytes,
                path.display()
            )));
        }
        let bytes = std::fs::read(&canonical)
            .map_err(|e| fail(format!("cannot read {}: {e}", path.display())))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| fail(format!("{} is not UTF-8 text", path.display())))?;
        self.read.files.push(canonical.clone());
        self.stack.push(canonical);
        Ok(text)
    }

    /// The files an include names ([`expand_include`]); a pattern with a
    /// wildcard is kept in [`Sources::globs`].
    pub fn include(&mut self, pattern: &Path) -> Result<Vec<PathBuf>, String> {
        let name = pattern.file_name().and_then(|n| n.to_str());
        if name.is_some_and(|n| n.contains(['*', '?', '['])) {
            self.read.globs.push(pattern.to_path_buf());
        }
        expand_include(pattern)
    }

    /// What was read: the old server's configuration, never written over.
    pub fn into_sources(self) -> Sources {
        self.read
    }

    /// Ends the file [`Reader::enter`] began.
    pub fn leave(&mut self) {
        self.stack.pop();
    }
}

/// The files an include names: `pattern` itself, or, when its last
/// part holds `*`, `?` or `[`, the files of its folder that match, in
/// name order (none is not an error, as in NSD, Knot and BIND).
pub fn expand_include(pattern: &Path) -> Result<Vec<PathBuf>, String> {
    let Some(name) = pattern.file_name().and_then(|n| n.to_str()) else {
        return Ok(vec![pattern.to_path_buf()]);
    };
    if !name.contains(['*', '?', '[']) {
        return Ok(vec![pattern.to_path_buf()]);
    }
    let folder = pattern.parent().unwrap_or(Path::new("."));
    if folder.to_string_lossy().contains(['*', '?', '[']) {
        return Err("a wildcard is only understood in the file name, not in its folders".into());
    }
    let entries = match std::fs::read_dir(folder) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot list {}: {e}", folder.display())),
    };
    let mut found: Vec<PathBuf> = entries
        .take(MAX_FILES + 1)
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| glob_match(name, n)))
        .map(|e| e.path())
        .collect();
    if found.len() > MAX_FILES {
        return Err(format!("more than {MAX_FILES} files match"));
    }
    found.sort();
    Ok(found)
}

/// Shell-style matching of one file name: `*`, `?` and `[...]` (with
/// `!` or `^` to negate); a leading dot is matched only by a dot.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    if name.starts_with('.') && !pattern.starts_with('.') {
        return false;
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Iterative matching with one star back-track point: linear in
    // practice, never exponential.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
            continue;
        }
        if pi < p.len()
            && let Some(next) = match_one(&p, pi, n[ni])
        {
            pi = next;
            ni += 1;
            continue;
        }
        match star {
            Some((sp, sn)) => {
                pi = sp + 1;
                ni = sn + 1;
                star = Some((sp, sn + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Whether the pattern element at `pi` matches `c`; the index after it.
fn match_one(p: &[char], pi: usize, c: char) -> Option<usize> {
    match p[pi] {
        '?' => Some(pi + 1),
        '[' => match_class(p, pi, c),
        literal => (literal == c).then_some(pi + 1),
    }
}

fn match_class(p: &[char], pi: usize, c: char) -> Option<usize> {
    let mut i = pi + 1;
    let negate = matches!(p.get(i), Some('!' | '^'));
    if negate {
        i += 1;
    }
    let start = i;
    let mut hit = false;
    while i < p.len() && (p[i] != ']' || i == start) {
        if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
            hit |= p[i] <= c && c <= p[i + 2];
            i += 3;
        } else {
            hit |= p[i] == c;
            i += 1;
        }
    }
    if i >= p.len() {
        // No closing bracket: a literal '['.
        return (c == '[').then_some(pi + 1);
    }
    (hit != negate).then_some(i + 1)
}

/// The files the zone file at `file` names in `$INCLUDE` lines, as
/// written; none when it cannot be read. Only the file's own lines are
/// read, a bounded number of octets (an include's includes are not).
pub fn zone_file_includes(file: &Path) -> Vec<String> {
    const READ_AT_MOST: u64 = 64 << 20;
    let Ok(opened) = std::fs::File::open(file) else {
        return Vec::new();
    };
    let mut text = Vec::new();
    let _ = std::io::Read::read_to_end(&mut std::io::Read::take(opened, READ_AT_MOST), &mut text);
    let text = String::from_utf8_lossy(&text);
    let included = text.lines().filter_map(|line| {
        let mut words = line.split_whitespace();
        let directive = words.next()?;
        directive
            .eq_ignore_ascii_case("$INCLUDE")
            .then(|| words.next())?
    });
    included
        .map(|path| path.trim_matches('"').to_string())
        .collect()
}

/// `path` as written, taken from `base` when relative.
pub fn resolve(base: &Path, path: &str) -> PathBuf {
    let path = Path::new(path);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echoed token is cut to 64 characters, a path to 4096; the rest
    /// of the message is kept.
    #[test]
    fn long_words_are_cut_in_messages() {
        let long = "a".repeat(1_000_000);
        let error = ImportError::plain(format!("zone '{long}': bad"));
        let said = error.to_string();
        assert_eq!(said, format!("error: zone '{}... bad", "a".repeat(63)));
        let path = format!("/{}", "p".repeat(200));
        assert_eq!(
            shown(&format!("cannot read {path}")),
            format!("cannot read {path}")
        );
        assert_eq!(shown("short words stay"), "short words stay");
    }

    #[test]
    fn globs_match_as_the_shell_does() {
        assert!(glob_match("*.conf", "a.conf"));
        assert!(!glob_match("*.conf", "a.conf.bak"));
        assert!(!glob_match("*.conf", ".hidden.conf"));
        assert!(glob_match("zone-?.conf", "zone-1.conf"));
        assert!(glob_match("[a-c]*", "beta"));
        assert!(!glob_match("[!a-c]*", "beta"));
        assert!(glob_match("*", "x"));
        assert!(glob_match("[", "["));
        assert!(!glob_match("a*b*c*d*e*f", &"a".repeat(5000)));
    }

    #[test]
    fn an_include_loop_is_an_error_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::write(&a, "x").unwrap();
        let mut reader = Reader::default();
        reader.enter(&a, None).unwrap();
        let again = reader.enter(&a, None).unwrap_err();
        assert!(again.message.contains("include loop"), "{again}");
        reader.leave();
        assert!(reader.enter(&a, None).is_ok());
    }

    #[test]
    fn includes_deeper_than_the_bound_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut reader = Reader::default();
        for i in 0..MAX_INCLUDE_DEPTH {
            let file = dir.path().join(format!("f{i}"));
            std::fs::write(&file, "x").unwrap();
            reader.enter(&file, None).unwrap();
        }
        let last = dir.path().join("last");
        std::fs::write(&last, "x").unwrap();
        let err = reader.enter(&last, None).unwrap_err();
        assert!(err.message.contains("nested more than"), "{err}");
    }

    #[test]
    fn files_up_to_the_size_bound_are_read_and_past_it_refused() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::fs::write(&a, "x".repeat(600)).unwrap();
        std::fs::write(&b, "x".repeat(400)).unwrap();
        let mut reader = Reader::with_limit(1000);
        reader.enter(&a, None).unwrap();
        reader.enter(&b, None).unwrap();
        let mut reader = Reader::with_limit(999);
        reader.enter(&a, None).unwrap();
        let err = reader.enter(&b, None).unwrap_err();
        assert!(err.message.contains("larger than"), "{err}");
    }

    #[test]
    fn a_folder_or_a_device_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut reader = Reader::default();
        assert!(reader.enter(dir.path(), None).is_err());
        assert!(reader.enter(Path::new("/dev/zero"), None).is_err());
        assert!(reader.enter(&dir.path().join("missing"), None).is_err());
    }

    #[test]
    fn a_glob_include_lists_matching_files_in_order() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b.conf", "a.conf", "c.txt"] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        let found = expand_include(&dir.path().join("*.conf")).unwrap();
        let names: Vec<_> = found.iter().map(|p| p.file_name().unwrap()).collect();
        assert_eq!(names, ["a.conf", "b.conf"]);
        assert!(
            expand_include(&dir.path().join("none/*.conf"))
                .unwrap()
                .is_empty()
        );
    }
}
