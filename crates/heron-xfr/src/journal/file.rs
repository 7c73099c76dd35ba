//! A zone's journal on disk, so that its IXFR history survives a restart
//! (what BIND's `.jnl` files, Knot's journal and NSD's ixfr files do).
//!
//! One append-only file per zone, `FILE.jnl` next to the zone file
//! ([`path_for`]). Integers are big-endian:
//!
//! ```text
//! file   = header entry*
//! header = "HERONJNL" version:u16 origin                  ; origin in wire form
//! entry  = length:u32 crc32:u32 body                      ; CRC-32 (IEEE) of body
//! body   = old-soa new-soa count:u32 record*              ; deleted records
//!                          count:u32 record*              ; added records
//! record = owner type:u16 ttl:u32 rdlength:u16 rdata      ; owner uncompressed
//! ```
//!
//! A crash in the middle of an append leaves a torn last entry: reading
//! stops at the first entry that is cut short, fails its checksum or does
//! not decode, keeps the entries before it and says where it stopped
//! ([`JournalReader::damage`]); the caller cuts the file there before it
//! appends again. Every length is checked against what is left of the
//! file and [`MAX_ENTRY_BYTES`] before anything is allocated.
//!
//! The file may hold older steps than the journal in memory (those dropped
//! by its size bound stay until the file is compacted, [`FileSize`]):
//! reading it back through [`Journal::record`] drops them again.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use heron_proto::{Name, RType, rdata};

use super::{Journal, serial_of};
use heron_zone::diff::{DiffRecord, ZoneDiff};

pub const MAGIC: &[u8; 8] = b"HERONJNL";
pub const VERSION: u16 = 1;

/// The longest entry body read or written. The journal keeps no step
/// larger than its bound, whose wire form is smaller still, so a longer
/// length can only be damage.
pub const MAX_ENTRY_BYTES: u32 = 64 << 20;
const _: () = assert!(super::DEFAULT_MAX_BYTES <= MAX_ENTRY_BYTES as usize);

/// Length and checksum in front of each entry body.
pub(crate) const ENTRY_HEAD: usize = 8;
/// The smallest record: a root owner, type, TTL and RDATA length.
const RECORD_MIN: usize = 1 + 2 + 4 + 2;

/// The journal file of the zone kept in `zone_file` (as BIND names it).
pub fn path_for(zone_file: &Path) -> PathBuf {
    let mut name = zone_file.as_os_str().to_owned();
    name.push(".jnl");
    PathBuf::from(name)
}

/// The CRC-32 an entry carries of its body.
pub fn checksum(body: &[u8]) -> u32 {
    crc32fast::hash(body)
}

/// The start of the journal file of `origin`.
pub fn header(origin: &Name) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(origin.as_wire());
    out
}

/// Appends `diff` to `out` as one entry. Fails, leaving `out` as it was,
/// if a record cannot be encoded (RDATA over 65535 octets, which no zone
/// holds) or the entry would be longer than [`MAX_ENTRY_BYTES`].
pub fn encode_entry(diff: &ZoneDiff, out: &mut Vec<u8>) -> io::Result<()> {
    let start = out.len();
    let result = encode_body(diff, out, start);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

fn encode_body(diff: &ZoneDiff, out: &mut Vec<u8>, start: usize) -> io::Result<()> {
    out.extend_from_slice(&[0; ENTRY_HEAD]);
    put_record(&diff.old_soa, out)?;
    put_record(&diff.new_soa, out)?;
    for list in [&diff.deleted, &diff.added] {
        out.extend_from_slice(&(list.len() as u32).to_be_bytes());
        for record in list {
            put_record(record, out)?;
        }
    }
    let body = &out[start + ENTRY_HEAD..];
    let len = u32::try_from(body.len())
        .ok()
        .filter(|&n| n <= MAX_ENTRY_BYTES)
        .ok_or_else(|| invalid("a diff too large for a journal entry"))?;
    let crc = checksum(body);
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

fn put_record(r: &DiffRecord, out: &mut Vec<u8>) -> io::Result<()> {
    let rdlength = u16::try_from(r.rdata.len()).map_err(|_| invalid("RDATA over 65535 octets"))?;
    out.extend_from_slice(r.owner.as_wire());
    out.extend_from_slice(&r.rtype.0.to_be_bytes());
    out.extend_from_slice(&r.ttl.to_be_bytes());
    out.extend_from_slice(&rdlength.to_be_bytes());
    out.extend_from_slice(&r.rdata);
    Ok(())
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what)
}

/// The length of `diff`'s entry, without encoding it.
pub fn entry_len(diff: &ZoneDiff) -> u64 {
    let record = |r: &DiffRecord| (r.owner.wire_len() + RECORD_MIN - 1 + r.rdata.len()) as u64;
    let records = diff
        .deleted
        .iter()
        .chain(&diff.added)
        .map(record)
        .sum::<u64>();
    (ENTRY_HEAD + 2 * 4) as u64 + record(&diff.old_soa) + record(&diff.new_soa) + records
}

/// Why a file is not a journal at all.
#[derive(Debug)]
pub enum HeaderError {
    Io(io::Error),
    /// Shorter than a header.
    Short,
    Magic,
    Version(u16),
    Origin,
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderError::Io(e) => write!(f, "cannot read it: {e}"),
            HeaderError::Short => f.write_str("too short for a journal header"),
            HeaderError::Magic => f.write_str("not a Heron journal file"),
            HeaderError::Version(v) => {
                write!(f, "journal format version {v}, this Heron reads {VERSION}")
            }
            HeaderError::Origin => f.write_str("the zone name in its header is malformed"),
        }
    }
}

/// Where and why reading stopped before the end of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The offset of the entry that could not be read.
    pub offset: u64,
    pub what: DamageKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DamageKind {
    /// The file ends inside the entry (a crash during an append).
    Torn,
    /// A length over [`MAX_ENTRY_BYTES`].
    TooLong(u32),
    Checksum,
    /// The checksum holds but the body does not decode.
    Malformed(&'static str),
    Io(io::ErrorKind),
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = self.offset;
        match &self.what {
            DamageKind::Torn => write!(f, "entry at offset {at} cut short"),
            DamageKind::TooLong(n) => write!(f, "entry at offset {at} claims {n} octets"),
            DamageKind::Checksum => write!(f, "entry at offset {at} fails its checksum"),
            DamageKind::Malformed(why) => write!(f, "entry at offset {at}: {why}"),
            DamageKind::Io(e) => write!(f, "entry at offset {at}: {e}"),
        }
    }
}

/// Reads a journal file entry by entry: an iterator of its steps that
/// ends at the end of the file or at the first damaged entry.
pub struct JournalReader<R> {
    input: R,
    origin: Name,
    /// The end of the header and the entries read so far.
    good: u64,
    len: u64,
    damage: Option<Damage>,
}

impl<R: Read> JournalReader<R> {
    /// Reads the header of a file of `len` octets.
    pub fn new(mut input: R, len: u64) -> Result<JournalReader<R>, HeaderError> {
        let mut fixed = [0; MAGIC.len() + 2];
        read_header_part(&mut input, &mut fixed)?;
        if fixed[..MAGIC.len()] != MAGIC[..] {
            return Err(HeaderError::Magic);
        }
        let version = u16::from_be_bytes([fixed[8], fixed[9]]);
        if version != VERSION {
            return Err(HeaderError::Version(version));
        }
        let origin = read_origin(&mut input)?;
        let good = (fixed.len() + origin.wire_len()) as u64;
        if good > len {
            return Err(HeaderError::Short);
        }
        Ok(JournalReader {
            input,
            origin,
            good,
            len,
            damage: None,
        })
    }

    /// The zone the file says it is the journal of.
    pub fn origin(&self) -> &Name {
        &self.origin
    }

    /// Why reading stopped early, once it has.
    pub fn damage(&self) -> Option<&Damage> {
        self.damage.as_ref()
    }

    /// The length of the header and the good entries read so far: where
    /// the file must be cut before it is appended to, after damage.
    pub fn good_len(&self) -> u64 {
        self.good
    }

    fn read_entry(&mut self) -> Result<(ZoneDiff, u64), DamageKind> {
        let left = self.len - self.good;
        let mut head = [0; ENTRY_HEAD];
        if left < ENTRY_HEAD as u64 {
            return Err(DamageKind::Torn);
        }
        read_entry_part(&mut self.input, &mut head)?;
        let len = u32::from_be_bytes(head[..4].try_into().expect("4 octets"));
        let crc = u32::from_be_bytes(head[4..].try_into().expect("4 octets"));
        if len > MAX_ENTRY_BYTES {
            return Err(DamageKind::TooLong(len));
        }
        if u64::from(len) > left - ENTRY_HEAD as u64 {
            return Err(DamageKind::Torn);
        }
        let mut body = vec![0; len as usize];
        read_entry_part(&mut self.input, &mut body)?;
        if checksum(&body) != crc {
            return Err(DamageKind::Checksum);
        }
        let diff = decode_body(&body).map_err(DamageKind::Malformed)?;
        Ok((diff, (ENTRY_HEAD + body.len()) as u64))
    }
}

impl<R: Read> Iterator for JournalReader<R> {
    type Item = ZoneDiff;

    fn next(&mut self) -> Option<ZoneDiff> {
        if self.damage.is_some() || self.good >= self.len {
            return None;
        }
        match self.read_entry() {
            Ok((diff, len)) => {
                self.good += len;
                Some(diff)
            }
            Err(what) => {
                self.damage = Some(Damage {
                    offset: self.good,
                    what,
                });
                None
            }
        }
    }
}

fn read_header_part(input: &mut impl Read, buf: &mut [u8]) -> Result<(), HeaderError> {
    input.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => HeaderError::Short,
        _ => HeaderError::Io(e),
    })
}

fn read_entry_part(input: &mut impl Read, buf: &mut [u8]) -> Result<(), DamageKind> {
    input.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => DamageKind::Torn,
        kind => DamageKind::Io(kind),
    })
}

/// The origin in the header, label by label (its length is not known
/// before it is read).
fn read_origin(input: &mut impl Read) -> Result<Name, HeaderError> {
    let mut wire = Vec::new();
    loop {
        let mut len = [0];
        read_header_part(input, &mut len)?;
        wire.push(len[0]);
        if len[0] == 0 {
            break;
        }
        if len[0] as usize > heron_proto::name::MAX_LABEL_LEN {
            return Err(HeaderError::Origin);
        }
        let at = wire.len();
        wire.resize(at + len[0] as usize, 0);
        read_header_part(input, &mut wire[at..])?;
        if wire.len() >= heron_proto::name::MAX_NAME_LEN {
            return Err(HeaderError::Origin);
        }
    }
    Name::from_wire(&wire).map_err(|_| HeaderError::Origin)
}

/// A step from an entry body that passed its checksum.
fn decode_body(body: &[u8]) -> Result<ZoneDiff, &'static str> {
    let mut at = 0;
    let old_soa = soa(body, &mut at)?;
    let new_soa = soa(body, &mut at)?;
    let deleted = records(body, &mut at)?;
    let added = records(body, &mut at)?;
    if at != body.len() {
        return Err("octets after the last record");
    }
    Ok(ZoneDiff {
        old_soa,
        new_soa,
        deleted,
        added,
    })
}

fn soa(body: &[u8], at: &mut usize) -> Result<DiffRecord, &'static str> {
    let r = record(body, at)?;
    if r.rtype != RType::SOA || rdata::soa_serial(&r.rdata).is_none() {
        return Err("a step that does not start with two SOA records");
    }
    Ok(r)
}

fn records(body: &[u8], at: &mut usize) -> Result<Vec<DiffRecord>, &'static str> {
    let count = u32::from_be_bytes(take(body, at, 4)?.try_into().expect("4 octets")) as usize;
    if count > (body.len() - *at) / RECORD_MIN {
        return Err("more records than the entry has room for");
    }
    (0..count).map(|_| record(body, at)).collect()
}

fn record(body: &[u8], at: &mut usize) -> Result<DiffRecord, &'static str> {
    let (owner, end) = Name::read_uncompressed(body, *at).map_err(|_| "a malformed owner name")?;
    *at = end;
    let fixed = take(body, at, 8)?;
    let rtype = RType(u16::from_be_bytes([fixed[0], fixed[1]]));
    let ttl = u32::from_be_bytes(fixed[2..6].try_into().expect("4 octets"));
    let rdlength = u16::from_be_bytes([fixed[6], fixed[7]]) as usize;
    let rdata = take(body, at, rdlength)?.to_vec();
    Ok(DiffRecord {
        owner,
        rtype,
        ttl,
        rdata,
    })
}

fn take<'b>(body: &'b [u8], at: &mut usize, n: usize) -> Result<&'b [u8], &'static str> {
    let bytes = body
        .get(*at..)
        .and_then(|rest| rest.get(..n))
        .ok_or("a record that runs past the end of its entry")?;
    *at += n;
    Ok(bytes)
}

/// The serial the journal file at `path` (of zone `origin`) ends at: the
/// new SOA of its last entry, the entries before it skipped by their
/// lengths, not decoded (a start asks this of every journal of a zone
/// that takes no updates). A last entry cut short or damaged is passed
/// over, as reading the file back cuts it off. None when the file is
/// absent, holds no entry, or is no journal of `origin`.
pub fn last_serial(path: &Path, origin: &Name) -> Option<u32> {
    use std::io::{Seek, SeekFrom};
    let file = File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    let mut input = BufReader::new(file);
    let header = JournalReader::new(&mut input, len).ok()?;
    if header.origin() != origin {
        return None;
    }
    let mut at = header.good;
    let mut starts = Vec::new();
    while len - at >= ENTRY_HEAD as u64 {
        let mut head = [0; ENTRY_HEAD];
        input.seek(SeekFrom::Start(at)).ok()?;
        input.read_exact(&mut head).ok()?;
        let body = u64::from(u32::from_be_bytes(head[..4].try_into().expect("4 octets")));
        if body > u64::from(MAX_ENTRY_BYTES) || body > len - at - ENTRY_HEAD as u64 {
            break;
        }
        starts.push(at);
        at += ENTRY_HEAD as u64 + body;
    }
    // The last entry that reads back whole.
    starts.iter().rev().find_map(|&start| {
        input.seek(SeekFrom::Start(start)).ok()?;
        let mut entry = JournalReader {
            input: &mut input,
            origin: origin.clone(),
            good: start,
            len,
            damage: None,
        };
        entry.next().map(|step| serial_of(&step.new_soa))
    })
}

/// Whether the file at `path` holds something other than a Heron journal
/// (another server's, such as BIND's `FILE.jnl`): such a file is never
/// written over, cut or removed ([`crate::disk::starts_otherwise`]).
pub fn holds_other_data(path: &Path) -> io::Result<bool> {
    crate::disk::starts_otherwise(path, MAGIC)
}

/// Why a journal file is left alone: what to tell the operator.
pub const OTHER_DATA: &str = "it holds no Heron journal (another server's, such as BIND's?) and is left as it is: move it away (the zone's journal is its `file` with `.jnl` after it)";

/// Appends `diffs` to the journal file at `path`, with the header first
/// if the file is new or empty. Not synced: the caller syncs many files
/// at once. A failed write is cut off again, so the file stays readable.
/// Returns whether the file held something before: if not, it may be new,
/// and its folder must be synced too.
pub fn append(path: &Path, origin: &Name, diffs: &[Arc<ZoneDiff>]) -> io::Result<bool> {
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    let was = file.metadata()?.len();
    let mut bytes = if was == 0 { header(origin) } else { Vec::new() };
    for diff in diffs {
        encode_entry(diff, &mut bytes)?;
    }
    file.write_all(&bytes).inspect_err(|_| {
        let _ = file.set_len(was);
    })?;
    Ok(was > 0)
}

/// Cuts the journal file at `path` back to its header and `entries`
/// octets of entries (what a failed batch appended goes); no file: done.
/// Not synced. Cutting needs no room, so it works on a full disk.
pub fn truncate(path: &Path, origin: &Name, entries: u64) -> io::Result<()> {
    let file = match OpenOptions::new().write(true).open(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        opened => opened?,
    };
    let len = header(origin).len() as u64 + entries;
    if file.metadata()?.len() > len {
        file.set_len(len)?;
    }
    Ok(())
}

/// Writes a whole journal file, the header then `diffs`, to `path` (a
/// temporary file that the caller syncs and renames).
pub fn write_file(path: &Path, origin: &Name, diffs: &[Arc<ZoneDiff>]) -> io::Result<()> {
    write_whole(File::create(path)?, origin, diffs)
}

/// Writes a new journal file at `path`, which must not exist (it then
/// fails with `AlreadyExists`). Not synced. A new file has no old version
/// to keep safe, so it needs no temporary file: written in place it
/// costs half as much (100,000 zones journaled for the first time), and
/// if a crash tears it, the reader finds the tear.
pub fn create_file(path: &Path, origin: &Name, diffs: &[Arc<ZoneDiff>]) -> io::Result<()> {
    let file = OpenOptions::new().write(true).create_new(true).open(path)?;
    write_whole(file, origin, diffs).inspect_err(|_| {
        let _ = std::fs::remove_file(path);
    })
}

fn write_whole(file: File, origin: &Name, diffs: &[Arc<ZoneDiff>]) -> io::Result<()> {
    let mut out = BufWriter::new(file);
    out.write_all(&header(origin))?;
    let mut entry = Vec::new();
    for diff in diffs {
        entry.clear();
        encode_entry(diff, &mut entry)?;
        out.write_all(&entry)?;
    }
    out.into_inner().map_err(|e| e.into_error())?;
    Ok(())
}

/// A zone's journal file, read back at startup.
#[derive(Debug)]
pub struct Restored {
    /// Its history, within the journal's bound.
    pub journal: Journal,
    /// Where its good entries end; the file is longer after damage.
    pub good_len: u64,
    /// Why reading stopped before the end of the file.
    pub damage: Option<Damage>,
    /// What the file size counts, to tell when to compact it.
    pub size: FileSize,
}

/// Why a journal file's history cannot be used: the zone's history starts
/// over (and the file with it).
#[derive(Debug)]
pub enum StartOver {
    Unreadable(HeaderError),
    /// The header, or a step's SOA, names another zone.
    OtherZone(Name),
    /// One step does not start where the one before it ends.
    Gap {
        newest: u32,
        next_from: u32,
    },
    /// The history does not end at the version served (a zone file edited
    /// while the server was down, or a write lost in a crash).
    Mismatch {
        newest: u32,
        served: u32,
        damage: Option<Damage>,
        /// A step of the history starts at the serial served: what
        /// follows it are changes the zone lacks, however far its serials
        /// run (past 2^31, they compare as older: RFC 1982).
        past_served: bool,
    },
    /// It ends at the serial served, but the zone does not hold its last
    /// change (`record`, added and missing, or deleted and still there):
    /// a zone file edited and given the journal's serial while the server
    /// was down, without the updates the journal holds.
    NotInZone {
        served: u32,
        record: String,
    },
}

impl fmt::Display for StartOver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartOver::Unreadable(e) => e.fmt(f),
            StartOver::OtherZone(origin) => write!(f, "it holds the journal of {origin}"),
            StartOver::Gap { newest, next_from } => write!(
                f,
                "a step from serial {next_from} follows one to serial {newest}"
            ),
            StartOver::Mismatch {
                newest,
                served,
                damage,
                ..
            } => {
                write!(
                    f,
                    "it ends at serial {newest} but the zone is at serial {served}"
                )?;
                match damage {
                    Some(d) => write!(f, " (reading stopped early: {d})"),
                    None => Ok(()),
                }
            }
            StartOver::NotInZone { served, record } => write!(
                f,
                "it ends at serial {served}, the zone's, but the zone does not hold its last \
                 change ({record}): was the zone file edited and given that serial while the \
                 server was down? Its changes are not served"
            ),
        }
    }
}

impl From<HeaderError> for StartOver {
    fn from(e: HeaderError) -> StartOver {
        StartOver::Unreadable(e)
    }
}

/// Reads the journal file at `path` back for the zone `origin`, served at
/// `served` serial: its history is kept if it is one unbroken chain that
/// ends at that serial (an empty file keeps an empty history). At most
/// `max_bytes` of it, the newest, as [`Journal::record`] keeps.
pub fn restore(
    path: &Path,
    origin: &Name,
    served: u32,
    max_bytes: usize,
) -> Result<Restored, StartOver> {
    let file = File::open(path).map_err(HeaderError::Io)?;
    let len = file.metadata().map_err(HeaderError::Io)?.len();
    let mut reader = JournalReader::new(BufReader::new(file), len)?;
    if reader.origin() != origin {
        return Err(StartOver::OtherZone(reader.origin().clone()));
    }
    let header_len = reader.good_len();
    let mut journal = Journal::new(max_bytes);
    let (mut newest, mut past_served) = (None, false);
    for diff in &mut reader {
        // Each step names its zone in its SOAs: a file two zones wrote
        // to never gives one of them the other's records.
        if let Some(soa) = [&diff.old_soa, &diff.new_soa]
            .into_iter()
            .find(|s| s.owner != *origin)
        {
            return Err(StartOver::OtherZone(soa.owner.clone()));
        }
        let (from, to) = (serial_of(&diff.old_soa), serial_of(&diff.new_soa));
        if let Some(newest) = newest.filter(|&n| n != from) {
            let next_from = from;
            return Err(StartOver::Gap { newest, next_from });
        }
        newest = Some(to);
        past_served |= from == served;
        journal.record(diff);
    }
    let damage = reader.damage().cloned();
    if let Some(newest) = newest.filter(|&n| n != served) {
        return Err(StartOver::Mismatch {
            newest,
            served,
            damage,
            past_served,
        });
    }
    Ok(Restored {
        journal,
        good_len: reader.good_len(),
        damage,
        size: FileSize {
            entries: reader.good_len() - header_len,
            rewrite: false,
        },
    })
}

/// What a zone's journal file must do so that it holds the journal's
/// history: take one more step, or be replaced by these steps (none: the
/// file goes).
#[derive(Debug, Clone)]
pub enum FileChange {
    /// One step appended after `at` octets of entries (where the file is
    /// cut back to before the step is written again after a failure).
    Append {
        step: Arc<ZoneDiff>,
        at: u64,
    },
    Replace(Vec<Arc<ZoneDiff>>),
    /// Cut back to this many octets of entries (after the header): the
    /// steps appended after them were never served.
    Truncate(u64),
}

/// The length of the entries in a zone's journal file, which follows its
/// journal in memory: each step is appended, and once the file holds
/// more than twice the journal's bound it is rewritten with only the
/// steps kept, so it is never more than about twice the bound.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FileSize {
    entries: u64,
    /// A write may have failed: the next step rewrites the file whole.
    rewrite: bool,
}

impl FileSize {
    /// What the file must do after `journal.record(step)` returned
    /// `continued`.
    /// `may_compact`: the journal holds every step the file must keep
    /// (those not yet in the zone file), so it may replace the file.
    pub fn recorded(
        &mut self,
        journal: &Journal,
        step: &Arc<ZoneDiff>,
        continued: bool,
        may_compact: bool,
    ) -> FileChange {
        // A step that does not go on from the journal in memory starts the
        // history over, unless the file holds steps the zone file lacks:
        // the journal in memory may just not have kept them (a step too
        // large), and the file goes on from them.
        if !continued && may_compact {
            return self.replace(journal);
        }
        // A step too large for the journal in memory, or a write that
        // failed, rewrites the file from the journal: only if that loses
        // nothing the zone file lacks. Otherwise the step is appended and
        // a rewrite stays due (the zone's write-back makes it possible).
        if may_compact && (journal.is_empty() || std::mem::take(&mut self.rewrite)) {
            return self.replace(journal);
        }
        let at = self.entries;
        self.entries += entry_len(step);
        if may_compact && self.needs_compaction(journal) {
            return self.replace(journal);
        }
        FileChange::Append {
            step: step.clone(),
            at,
        }
    }

    /// Whether a rewrite is due that could not be made yet.
    pub fn rewrite_due(&self) -> bool {
        self.rewrite
    }

    /// The rewrite due is made (by [`FileSize::replace`] next).
    pub fn rewrite_done(&mut self) {
        self.rewrite = false;
    }

    /// The next step rewrites the file whole (a write of it failed).
    pub fn rewrite_next(&mut self) {
        self.rewrite = true;
    }

    /// The octets of entries the file holds now.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// The file cut back to `entries` octets of entries.
    pub fn truncated(&mut self, entries: u64) -> FileChange {
        self.entries = entries;
        FileChange::Truncate(entries)
    }

    /// What the file must do after the journal was cleared: go.
    pub fn cleared(&mut self) -> FileChange {
        self.entries = 0;
        FileChange::Replace(Vec::new())
    }

    /// Whether the file holds more than twice the journal's bound.
    pub fn needs_compaction(&self, journal: &Journal) -> bool {
        self.entries > 2 * journal.max_bytes() as u64
    }

    /// The file rewritten with exactly the steps `journal` keeps.
    pub fn replace(&mut self, journal: &Journal) -> FileChange {
        self.entries = journal.diffs().map(|d| entry_len(d)).sum();
        FileChange::Replace(journal.diffs().cloned().collect())
    }
}

#[cfg(test)]
mod tests;
