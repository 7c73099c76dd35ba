//! A streaming reader of zone files in the master-file format of RFC 1035
//! section 5, with the directives BIND, NSD and Knot accept: `$ORIGIN`,
//! `$TTL`, `$INCLUDE` and BIND's `$GENERATE`.
//!
//! The reader resolves names and TTLs and turns RDATA into wire form (through
//! [`heron_proto::rdata::parse_text`]); it does not check that owners are in
//! the zone, nor anything else about the zone's contents (the zone loader
//! does). It keeps reading after an error so that one pass reports every
//! problem, each with its file and line.

mod directives;
mod generate;
mod lexer;
mod split;

pub(crate) use self::split::{Piece, split};

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use heron_proto::text::{TextError, Token};
use heron_proto::{Class, Name, RType};

use self::directives::{parse_ttl, served_ttl};
use self::lexer::Lexer;

/// One resource record read from a zone file.
#[derive(Clone, Debug)]
pub struct Record {
    pub owner: Name,
    pub class: Class,
    pub rtype: RType,
    pub ttl: u32,
    /// Uncompressed wire-form RDATA.
    pub rdata: Vec<u8>,
    /// Where the record's entry starts (for `$GENERATE`, the directive).
    pub location: Location,
}

/// A place in a zone file. Displays as `file:line`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub file: Arc<Path>,
    /// 1-based; 0 for problems with the file as a whole.
    pub line: u32,
}

impl fmt::Display for Location {
    /// `file:line`; the file alone for what is about the whole file (line
    /// 0: no SOA, a ZONEMD that does not verify, a file not read), which
    /// read as a fault of its own (black-box finding AT-4).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            0 => write!(f, "{}", self.file.display()),
            line => write!(f, "{}:{line}", self.file.display()),
        }
    }
}

/// A problem in a zone file. Displays as `file:line: message`.
#[derive(Debug, Clone)]
pub struct ZoneFileError {
    pub location: Location,
    pub message: String,
}

impl fmt::Display for ZoneFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.message)
    }
}

impl std::error::Error for ZoneFileError {}

/// How to read a zone file.
#[derive(Clone, Debug)]
pub struct ReadOptions {
    /// The initial origin (normally the zone's name).
    pub origin: Name,
    /// The zone's class; records of another class are errors.
    pub class: Class,
    /// A `$TTL` in force before the file sets one.
    pub default_ttl: Option<u32>,
    /// How deeply `$INCLUDE`s may nest (the top file is depth 0).
    pub max_include_depth: usize,
    /// Most records one `$GENERATE` may make.
    pub max_generate: usize,
    /// Where to count the octets of text read, for a progress report on
    /// long loads (added to as reading goes, every [`PROGRESS_STEP`]).
    pub progress: Option<Arc<AtomicU64>>,
    /// Most octets one load reads, the file and its `$INCLUDE`s together.
    pub max_size: u64,
    /// Where to put what is worth a warning but loads, each said once a
    /// reader (a file read in pieces has one reader a piece): the SOA
    /// MINIMUM taken as `$TTL` in a file with neither, as BIND does, and
    /// a TTL past 2^31-1 served as 0.
    pub notes: Option<Arc<Mutex<Vec<ZoneFileError>>>>,
}

/// The default of [`max_load_size`]: above the zone files of the largest
/// zones loaded from files in practice (a large ccTLD's is a few GB), and
/// a bound on what a mistaken path (a huge sparse file, a disk image) can
/// make a load hold: the text is read whole into memory.
pub const DEFAULT_MAX_LOAD_SIZE: u64 = 16 << 30;

static MAX_LOAD_SIZE: AtomicU64 = AtomicU64::new(DEFAULT_MAX_LOAD_SIZE);

/// The most octets one zone load reads, its `$INCLUDE`s included: what
/// [`ReadOptions::new`] and [`ZoneFileText::read`] take. One setting for
/// the process (`max-zone-file-size`), set before zones are loaded.
pub fn max_load_size() -> u64 {
    MAX_LOAD_SIZE.load(Ordering::Relaxed)
}

/// Sets [`max_load_size`].
pub fn set_max_load_size(octets: u64) {
    MAX_LOAD_SIZE.store(octets, Ordering::Relaxed);
}

/// Octets read between two additions to [`ReadOptions::progress`]: often
/// enough for a report every second, rarely enough to cost nothing.
pub const PROGRESS_STEP: usize = 256 << 10;

/// `$INCLUDE`s nested at most this deep (BIND, NSD and Knot load 10;
/// the bound keeps a chain of files from being read without end).
pub const MAX_INCLUDE_DEPTH: usize = 20;

/// Records one `$GENERATE` line may make, and all of a file's together: a
/// typo in a range (`0-10000000`) is an error, not gigabytes of records,
/// and so are many lines (black-box finding: 500 lines of 65,536 records
/// each, an 18 KB file, took the server's memory).
pub const MAX_GENERATE: usize = 1 << 20;

/// Octets of text (owner and RDATA) a file's `$GENERATE` lines may make in
/// all: one line with a 10 KB RDATA would otherwise make gigabytes.
pub const MAX_GENERATE_TEXT: u64 = 256 << 20;

impl ReadOptions {
    /// Options for a zone of class IN at `origin`, with the default limits.
    pub fn new(origin: Name) -> ReadOptions {
        ReadOptions {
            origin,
            class: Class::IN,
            default_ttl: None,
            max_include_depth: MAX_INCLUDE_DEPTH,
            max_generate: MAX_GENERATE,
            progress: None,
            max_size: max_load_size(),
            notes: None,
        }
    }
}

/// Reads a zone file; every record goes to `sink` in file order; returns
/// all errors found (reading continues after an error in one entry so that
/// all problems are reported).
pub fn read_file(
    path: &Path,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(&Record),
) -> Vec<ZoneFileError> {
    match ZoneFileText::read_at_most(path, opts.max_size) {
        Ok(file) => read_file_text(&file.text, path, opts, sink),
        Err(e) => vec![e],
    }
}

/// A zone file read whole, and the file as it was when opened.
pub struct ZoneFileText {
    pub text: Vec<u8>,
    /// Taken from the open file before reading it, so that a change made
    /// while (or after) it is read shows as a later modification.
    pub metadata: std::fs::Metadata,
}

impl ZoneFileText {
    /// [`ZoneFileText::read_at_most`] the [`max_load_size`].
    pub fn read(path: &Path) -> Result<ZoneFileText, ZoneFileError> {
        ZoneFileText::read_at_most(path, max_load_size())
    }

    /// One path lookup: open, `fstat`, read. (A `stat` by path before the
    /// load would walk the path twice; with 100,000 small zone files that
    /// is a tenth of the startup.) Only a regular file of at most `max`
    /// octets is read.
    pub fn read_at_most(path: &Path, max: u64) -> Result<ZoneFileText, ZoneFileError> {
        let (text, metadata) = read_regular(path, max).map_err(|refused| ZoneFileError {
            location: Location {
                file: Arc::from(path),
                line: 0,
            },
            message: match refused {
                Refused::TooLarge(size) => format!(
                    "zone file of {size} octets, more than max-zone-file-size ({max}) allows"
                ),
                Refused::Other(why) => format!("cannot read zone file: {why}"),
            },
        })?;
        // A binary file read as text gave errors that named no cause
        // (black-box finding BT-11: BIND's raw format, "no NS records").
        if text[..text.len().min(BINARY_SNIFF)].contains(&0) {
            return Err(ZoneFileError {
                location: Location {
                    file: Arc::from(path),
                    line: 0,
                },
                message: NOT_TEXT.into(),
            });
        }
        Ok(ZoneFileText { text, metadata })
    }
}

/// Octets looked at for a NUL, which no text zone file holds.
const BINARY_SNIFF: usize = 4096;

const NOT_TEXT: &str = "not a text zone file: it holds NUL octets (BIND's raw and map \
    formats are binary; `named-compilezone -f raw -F text -o FILE.txt ZONE FILE` writes one \
    as text)";

/// The text of the regular file at `path`, and the file as it was when
/// opened, if it holds at most `max` octets; anything else refused before
/// a byte is read ([`heron_sys::files::read_regular`]).
pub(crate) fn read_regular(path: &Path, max: u64) -> Result<(Vec<u8>, std::fs::Metadata), Refused> {
    use heron_sys::files::Refused as Why;
    heron_sys::files::read_regular(path, max).map_err(|why| match why {
        Why::TooLarge(size) => Refused::TooLarge(size),
        Why::NotRegular(kind) => Refused::Other(format!(
            "{} is {kind}, not a regular file: only a regular file is read as a zone file",
            path.display()
        )),
        Why::Io(e) => Refused::io(e),
    })
}

/// Why [`read_regular`] read nothing.
pub(crate) enum Refused {
    /// The file holds this many octets, more than allowed.
    TooLarge(u64),
    /// It cannot be read, or is not a regular file.
    Other(String),
}

impl Refused {
    fn io(e: std::io::Error) -> Refused {
        Refused::Other(io_message(&e))
    }
}

/// Same as [`read_file`], from the text of the file at `path` already in
/// memory (see [`ZoneFileText`]).
pub fn read_file_text(
    text: &[u8],
    path: &Path,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(&Record),
) -> Vec<ZoneFileError> {
    read_file_with(text, path, opts, sink, heron_proto::rdata::parse_text)
}

/// Same as [`read_file`], from text already in memory, with `name` used as
/// the file name in locations; `$INCLUDE` paths are relative to `base_dir`.
pub fn read_str(
    text: &str,
    name: &Path,
    base_dir: &Path,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(&Record),
) -> Vec<ZoneFileError> {
    read_str_with(
        text.as_bytes(),
        name,
        base_dir,
        opts,
        sink,
        heron_proto::rdata::parse_text,
    )
}

fn read_file_with(
    text: &[u8],
    path: &Path,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(&Record),
    parser: RdataParser,
) -> Vec<ZoneFileError> {
    let mut reader = Reader::new(opts, sink, parser);
    reader.read_top(text, Arc::from(path), parent_dir(path), path.to_path_buf());
    reader.errors
}

/// Reads one piece of a zone file's text (see [`split`]): from
/// `piece.start` up to `end`, in the state the text before it leaves, as
/// [`read_file_text`] reads that part of the whole file.
pub(crate) fn read_piece(
    text: &[u8],
    (piece, end): (&Piece, usize),
    path: &Path,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(&Record),
) -> Vec<ZoneFileError> {
    let mut reader = Reader::new(opts, sink, heron_proto::rdata::parse_text);
    reader.dollar_ttl = piece.dollar_ttl;
    let file: Arc<Path> = Arc::from(path);
    reader.open_files.push((None, file.clone()));
    let mut ctx = FileCtx {
        file,
        dir: parent_dir(path),
        origin: piece.origin.clone(),
        owner: None,
        owner_bad: false,
        owner_text: Vec::new(),
    };
    let text = &text[..end];
    let lexer = match piece.start {
        0 => Lexer::new(text),
        start => Lexer::resuming(text, start, piece.line),
    };
    reader.read_entries(lexer, &mut ctx);
    reader.errors
}

/// Reads `text` as [`read_file_text`] does, but cut into `pieces` pieces
/// read one after another, giving the records each piece read, in order;
/// None when the text is not cut or a piece has errors. For the tests and
/// the fuzz target that check the pieces agree with the whole.
#[doc(hidden)]
pub fn read_text_in_pieces(
    text: &[u8],
    path: &Path,
    opts: &ReadOptions,
    pieces: usize,
) -> Option<Vec<Record>> {
    let pieces = split(text, &opts.origin, opts.default_ttl, pieces)?;
    let ends = pieces.iter().skip(1).map(|p| p.start).chain([text.len()]);
    let mut records = Vec::new();
    for (piece, end) in pieces.iter().zip(ends) {
        let errors = read_piece(text, (piece, end), path, opts, &mut |r| {
            records.push(r.clone())
        });
        if !errors.is_empty() {
            return None;
        }
    }
    Some(records)
}

fn read_str_with(
    text: &[u8],
    name: &Path,
    base_dir: &Path,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(&Record),
    parser: RdataParser,
) -> Vec<ZoneFileError> {
    let mut reader = Reader::new(opts, sink, parser);
    reader.read_top(
        text,
        Arc::from(name),
        base_dir.to_path_buf(),
        base_dir.join(name),
    );
    reader.errors
}

/// The RDATA parser: [`heron_proto::rdata::parse_text`], replaceable in unit
/// tests.
type RdataParser = fn(RType, &[Token], Option<&Name>, &mut Vec<u8>) -> Result<(), TextError>;

/// Errors reported of one file (one piece of it, when read in pieces) at
/// most; reading stops after them. BIND and Knot stop at the first.
pub const MAX_ERRORS: usize = 100;

/// State shared by the whole read, across `$INCLUDE`s.
struct Reader<'r> {
    opts: &'r ReadOptions,
    sink: &'r mut dyn FnMut(&Record),
    parse_rdata: RdataParser,
    errors: Vec<ZoneFileError>,
    /// The `$TTL` in force. Like BIND, `$TTL` and the last explicit TTL carry
    /// over from an included file to the rest of the including file.
    dollar_ttl: Option<u32>,
    /// The last explicit TTL (RFC 1035 5.1), used when there is no `$TTL`.
    last_ttl: Option<u32>,
    /// Whether a TTL past 2^31-1 was said ([`Reader::in_range`]).
    noted_top_bit_ttl: bool,
    /// Whether the last TTL given was said to stand in for `$TTL`.
    noted_last_ttl: bool,
    /// The files being read, outermost first: canonical path (when known)
    /// and the name used in locations.
    open_files: Vec<(Option<PathBuf>, Arc<Path>)>,
    /// Scratch space for RDATA.
    rdata: Vec<u8>,
    /// The outermost file's path, until its canonical form is needed.
    top_path: Option<PathBuf>,
    /// Octets of text read so far, `$INCLUDE`s included, against
    /// [`ReadOptions::max_size`].
    text_read: u64,
    /// Records and octets of text `$GENERATE` made so far, against
    /// [`ReadOptions::max_generate`] and [`MAX_GENERATE_TEXT`].
    generated: (u64, u64),
}

/// State of one file being read; `$ORIGIN` and the current owner are scoped
/// to the file.
struct FileCtx {
    file: Arc<Path>,
    /// Directory that `$INCLUDE` paths are relative to.
    dir: PathBuf,
    origin: Name,
    /// The last owner written, reused by entries that start with a blank.
    owner: Option<Name>,
    /// Whether the last owner written was bad (then entries that reuse it are
    /// skipped without a second error).
    owner_bad: bool,
    /// The text `owner` was read from, under the current origin (empty
    /// when none): the next line that writes the same owner takes it as
    /// it is, not read again (a name made per line was a tenth of reading
    /// a zone whose owners hold an A and an AAAA each).
    owner_text: Vec<u8>,
}

/// TTL and class fields found before the type.
struct TtlClass {
    ttl: Option<u32>,
    class: Option<Class>,
}

impl<'r> Reader<'r> {
    fn new(
        opts: &'r ReadOptions,
        sink: &'r mut dyn FnMut(&Record),
        parse_rdata: RdataParser,
    ) -> Reader<'r> {
        Reader {
            opts,
            sink,
            parse_rdata,
            errors: Vec::new(),
            dollar_ttl: opts.default_ttl,
            last_ttl: None,
            noted_top_bit_ttl: false,
            noted_last_ttl: false,
            open_files: Vec::new(),
            rdata: Vec::with_capacity(512),
            top_path: None,
            text_read: 0,
            generated: (0, 0),
        }
    }

    /// `path` is resolved to a canonical path only when the file has an
    /// `$INCLUDE` (to catch cycles): most zone files have none, and a
    /// hosting provider's 100,000 files would pay a `readlink` per path
    /// component each.
    fn read_top(&mut self, text: &[u8], file: Arc<Path>, dir: PathBuf, path: PathBuf) {
        self.top_path = Some(path);
        self.text_read = text.len() as u64;
        self.open_files.push((None, file.clone()));
        let mut ctx = FileCtx {
            file,
            dir,
            origin: self.opts.origin.clone(),
            owner: None,
            owner_bad: false,
            owner_text: Vec::new(),
        };
        self.read_text(text, &mut ctx);
        self.open_files.pop();
    }

    fn error(&mut self, ctx: &FileCtx, line: u32, message: impl Into<String>) {
        if self.errors.len() > MAX_ERRORS {
            return;
        }
        let message = match self.errors.len() == MAX_ERRORS {
            true => format!("more than {MAX_ERRORS} errors: the rest of the file is not read"),
            false => message.into(),
        };
        self.errors.push(ZoneFileError {
            location: Location {
                file: ctx.file.clone(),
                line,
            },
            message,
        });
    }

    /// Whether reading stops: past [`MAX_ERRORS`], more of a file that is
    /// not a zone file would only cost memory, time and log lines.
    fn gave_up(&self) -> bool {
        self.errors.len() > MAX_ERRORS
    }

    fn read_text(&mut self, text: &[u8], ctx: &mut FileCtx) {
        self.read_entries(Lexer::new(text), ctx);
    }

    fn read_entries(&mut self, mut lexer: Lexer, ctx: &mut FileCtx) {
        let mut tokens: Vec<Token> = Vec::with_capacity(32);
        let mut counted = lexer.position().0;
        while let Some(entry) = lexer.next_entry(&mut tokens) {
            if self.gave_up() {
                break;
            }
            self.count_progress(&mut counted, lexer.position().0, PROGRESS_STEP);
            if !entry.errors.is_empty() {
                for (line, msg) in entry.errors {
                    self.error(ctx, line, msg);
                }
                // Keep track of the owner so that the following lines that
                // reuse it are read correctly.
                let first = tokens.first().filter(|t| t.raw.first() != Some(&b'$'));
                if let (Some(first), false) = (first, entry.leading_ws) {
                    ctx.owner_text.clear();
                    match Name::from_text(first.raw, Some(&ctx.origin)) {
                        Ok(n) => {
                            ctx.owner = Some(n);
                            ctx.owner_bad = false;
                        }
                        Err(_) => {
                            ctx.owner = None;
                            ctx.owner_bad = true;
                        }
                    }
                }
                continue;
            }
            self.entry(ctx, entry.line, entry.leading_ws, &tokens);
        }
        self.count_progress(&mut counted, lexer.position().0, 0);
    }

    /// Adds the octets read since `counted` to the progress count, once
    /// there are at least `step` of them.
    fn count_progress(&self, counted: &mut usize, now: usize, step: usize) {
        if let Some(progress) = &self.opts.progress
            && now - *counted >= step.max(1)
        {
            progress.fetch_add((now - *counted) as u64, Ordering::Relaxed);
            *counted = now;
        }
    }

    /// Handles one entry without syntax errors: a directive or a record.
    fn entry(&mut self, ctx: &mut FileCtx, line: u32, leading_ws: bool, tokens: &[Token]) {
        let Some(first) = tokens.first() else { return };
        if !first.quoted && first.raw.first() == Some(&b'$') {
            if !leading_ws {
                self.directive(ctx, line, tokens);
                return;
            }
            if directives::is_directive(first.raw) {
                self.error(
                    ctx,
                    line,
                    format!(
                        "directive '{}' must start at the beginning of the line",
                        first.lossy()
                    ),
                );
                return;
            }
        }
        // The owner stays in `ctx` (a blank-led line reuses it); the record
        // borrows it, so a record costs no allocation for its owner.
        let rest = if leading_ws {
            match &ctx.owner {
                Some(_) => tokens,
                None if ctx.owner_bad => return,
                None => {
                    self.error(
                        ctx,
                        line,
                        "no owner name: the line starts with a blank, which reuses the previous \
                         owner, but there is no previous owner",
                    );
                    return;
                }
            }
        } else if ctx.owner.is_some() && first.raw == ctx.owner_text.as_slice() {
            &tokens[1..]
        } else {
            ctx.owner_text.clear();
            match Name::from_text(first.raw, Some(&ctx.origin)) {
                Ok(n) => {
                    ctx.owner = Some(n);
                    ctx.owner_bad = false;
                    ctx.owner_text.extend_from_slice(first.raw);
                    &tokens[1..]
                }
                Err(e) => {
                    ctx.owner = None;
                    ctx.owner_bad = true;
                    self.error(
                        ctx,
                        line,
                        format!("bad owner name '{}': {e}", first.lossy()),
                    );
                    return;
                }
            }
        };

        let mut i = 0;
        let tc = match self.ttl_class(rest, &mut i) {
            Ok(tc) => tc,
            Err(msg) => return self.error(ctx, line, msg),
        };
        let Some(type_tok) = rest.get(i) else {
            let msg = match rest.last() {
                Some(t) => format!("missing record type after '{}'", t.lossy()),
                None => format!("missing record type after owner '{}'", first.lossy()),
            };
            return self.error(ctx, line, msg);
        };
        let rtype = match record_type(type_tok) {
            Ok(t) => t,
            Err(msg) => return self.error(ctx, line, msg),
        };
        let ttl = match self.resolve_ttl(ctx, line, &tc) {
            Ok(v) => Some(v),
            // Its own MINIMUM, once its RDATA is read.
            Err(_) if rtype == RType::SOA => None,
            Err(msg) => return self.error(ctx, line, msg),
        };
        self.rdata.clear();
        if let Err(e) =
            (self.parse_rdata)(rtype, &rest[i + 1..], Some(&ctx.origin), &mut self.rdata)
        {
            return self.error(ctx, line, format!("{rtype}: {e}"));
        }
        let ttl = ttl.unwrap_or_else(|| self.ttl_from_soa(ctx, line));
        let owner = ctx.owner.take().expect("set above");
        let record = self.emit(ctx, owner, (rtype, ttl), line);
        ctx.owner = Some(record);
    }

    /// Hands the record in `self.rdata` to the sink, lending it the owner
    /// and the RDATA buffer, and returns the owner.
    fn emit(&mut self, ctx: &FileCtx, owner: Name, (rtype, ttl): (RType, u32), line: u32) -> Name {
        let record = Record {
            owner,
            class: self.opts.class,
            rtype,
            ttl,
            rdata: std::mem::take(&mut self.rdata),
            location: Location {
                file: ctx.file.clone(),
                line,
            },
        };
        (self.sink)(&record);
        self.rdata = record.rdata;
        record.owner
    }

    /// Reads the optional TTL and class (in either order) from `tokens[*i..]`,
    /// advancing `*i` past them. A class other than the zone's is an error.
    fn ttl_class(&self, tokens: &[Token], i: &mut usize) -> Result<TtlClass, String> {
        let mut tc = TtlClass {
            ttl: None,
            class: None,
        };
        while let Some(t) = tokens.get(*i) {
            let class = match tc.class {
                None => Class::from_mnemonic(t.raw),
                Some(_) => None,
            };
            if let Some(c) = class {
                if c != self.opts.class {
                    return Err(format!(
                        "class '{c}' does not match the zone's class '{}'",
                        self.opts.class
                    ));
                }
                tc.class = class;
            } else if tc.ttl.is_none() && t.raw.first().is_some_and(u8::is_ascii_digit) {
                let ttl = parse_ttl(t.raw).map_err(|e| format!("bad TTL '{}': {e}", t.lossy()))?;
                tc.ttl = Some(ttl);
            } else {
                break;
            }
            *i += 1;
        }
        Ok(tc)
    }

    /// Works out the TTL of a record (explicit; else `$TTL`; else the last
    /// explicit TTL). The class has been checked by [`Reader::ttl_class`].
    fn resolve_ttl(&mut self, ctx: &FileCtx, line: u32, tc: &TtlClass) -> Result<u32, String> {
        let ttl = match tc.ttl {
            Some(t) => {
                let t = self.in_range(ctx, line, t);
                self.last_ttl = Some(t);
                t
            }
            None => match (self.dollar_ttl, self.last_ttl) {
                (Some(t), _) => t,
                (None, Some(t)) => {
                    self.note_last_ttl(ctx, line, t);
                    t
                }
                (None, None) => return Err("no TTL given and no $TTL".to_string()),
            },
        };
        Ok(ttl)
    }

    /// Said once a read: a record without a TTL and no `$TTL` in force
    /// takes the last TTL given (RFC 1035 5.1, as BIND), where NSD and
    /// Knot take 3600 (black-box finding: the difference was unsaid).
    fn note_last_ttl(&mut self, ctx: &FileCtx, line: u32, ttl: u32) {
        if std::mem::replace(&mut self.noted_last_ttl, true) {
            return;
        }
        let message = format!(
            "no TTL given and no $TTL: the last TTL given, {ttl}, is taken, as in BIND (NSD and Knot would take 3600); set $TTL to say which"
        );
        self.note(ctx, line, message);
    }

    /// The TTL of an SOA read with none given and none in force: its
    /// MINIMUM (the last 4 octets of its RDATA in `self.rdata`), which
    /// acts as `$TTL` from now on, as in BIND ([`ReadOptions::notes`]
    /// says so).
    fn ttl_from_soa(&mut self, ctx: &FileCtx, line: u32) -> u32 {
        let tail = self.rdata.len().saturating_sub(4);
        let minimum = (self.rdata.get(tail..))
            .and_then(|m| <[u8; 4]>::try_from(m).ok())
            .map_or(0, u32::from_be_bytes);
        let minimum = served_ttl(minimum);
        let message = format!(
            "no TTL given and no $TTL: the SOA MINIMUM, {minimum}, acts as $TTL from here, as in BIND (NSD and Knot would take 3600); set $TTL to say which"
        );
        self.note(ctx, line, message);
        // BIND's rule: as if `$TTL MINIMUM` stood here.
        self.dollar_ttl = Some(minimum);
        minimum
    }

    /// `ttl` as served ([`served_ttl`]): one past 2^31-1 is 0, said for
    /// the first such TTL of the read (a file may hold millions).
    fn in_range(&mut self, ctx: &FileCtx, line: u32, ttl: u32) -> u32 {
        let served = served_ttl(ttl);
        if served != ttl && !self.noted_top_bit_ttl {
            self.noted_top_bit_ttl = true;
            let message = format!(
                "TTL {ttl} is past 2^31-1: served as 0 (RFC 2181 8), as BIND loads it; so is every such TTL after it"
            );
            self.note(ctx, line, message);
        }
        served
    }

    /// Puts `message`, about `line`, among [`ReadOptions::notes`].
    fn note(&self, ctx: &FileCtx, line: u32, message: String) {
        let note = ZoneFileError {
            location: Location {
                file: ctx.file.clone(),
                line,
            },
            message,
        };
        if let Some(notes) = &self.opts.notes {
            notes.lock().unwrap_or_else(|e| e.into_inner()).push(note);
        }
    }
}

/// Looks up a record type mnemonic (or `TYPEnnn`) for loading.
fn record_type(tok: &Token) -> Result<RType, String> {
    let Some(rtype) = RType::from_mnemonic(tok.raw) else {
        return Err(format!("unknown record type '{}'", tok.lossy()));
    };
    if rtype.is_meta() {
        return Err(format!(
            "record type '{}' is a query or meta type and cannot be in a zone file",
            tok.lossy()
        ));
    }
    // Type 0 is reserved (RFC 6895 3.1), as BIND and NSD hold it.
    if rtype.0 == 0 {
        return Err(format!("record type '{}' (0) is reserved", tok.lossy()));
    }
    Ok(rtype)
}

/// The directory a file's `$INCLUDE`s are relative to.
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// An I/O error as a zone author would want to read it ("No such file or
/// directory", without the "(os error 2)").
fn io_message(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.rfind(" (os error ") {
        Some(i) if s.ends_with(')') => s[..i].to_string(),
        _ => s,
    }
}

#[cfg(test)]
mod tests;
