//! Domain names.
//!
//! A [`Name`] holds an absolute name in uncompressed wire form with its case
//! preserved. Equality, hashing and ordering ignore ASCII case; ordering is
//! the DNSSEC canonical order of RFC 4034 section 6.1 (labels compared from
//! the root down, each as lower-cased bytes).

use std::cell::RefCell;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

/// Longest name in wire form, including the root label (RFC 1035 2.3.4).
pub const MAX_NAME_LEN: usize = 255;
/// Longest label (RFC 1035 2.3.4).
pub const MAX_LABEL_LEN: usize = 63;

/// Why a name could not be read or built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameError {
    LabelTooLong,
    NameTooLong,
    EmptyLabel,
    BadEscape,
    /// A relative name with no origin to complete it.
    Relative,
    /// Wire form: the name runs past the end of the message.
    Truncated,
    /// Wire form: a compression pointer that does not point strictly backwards.
    BadPointer,
    /// Wire form: a label type other than a normal label or a pointer.
    BadLabelType,
    /// Wire form: a compression pointer where none is allowed.
    Compressed,
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NameError::LabelTooLong => "label longer than 63 octets",
            NameError::NameTooLong => "name longer than 255 octets",
            NameError::EmptyLabel => "empty label in name",
            NameError::BadEscape => "bad escape sequence in name",
            NameError::Relative => "relative name and no origin",
            NameError::Truncated => "name runs past the end of the message",
            NameError::BadPointer => "compression pointer that is not backwards",
            NameError::BadLabelType => "unknown label type",
            NameError::Compressed => "compressed name where none is allowed",
        })
    }
}

impl std::error::Error for NameError {}

/// An absolute domain name in uncompressed wire form, case preserved.
///
/// Cloning shares the bytes, and so does [`Name::to_lowercase`] of a name
/// that is lower-case already: a secondary zone's origin sits in half a
/// dozen tables (by lower-cased origin), and with 100,000 zones a copy
/// each would cost 3 MB a table. One pointer wide ([`Wire`]).
#[derive(Clone)]
pub struct Name {
    wire: Wire,
}

/// Shared bytes behind one pointer, their length stored with them: a
/// `Name` is 8 octets where an `Arc<[u8]>` takes 16, in every table and
/// struct that holds one (100,000 secondary zones hold several each).
/// The allocation is the same size as the `Arc`'s (a count and a length
/// where the `Arc` has two counts).
#[derive(Clone)]
struct Wire(triomphe::ThinArc<(), u8>);

impl From<&[u8]> for Wire {
    fn from(bytes: &[u8]) -> Wire {
        Wire(triomphe::ThinArc::from_header_and_slice((), bytes))
    }
}

impl From<Vec<u8>> for Wire {
    fn from(bytes: Vec<u8>) -> Wire {
        Wire::from(&bytes[..])
    }
}

impl std::ops::Deref for Wire {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0.slice
    }
}

impl Name {
    /// The root name `.`.
    pub fn root() -> Name {
        Name {
            wire: Wire::from(&[0][..]),
        }
    }

    /// Builds a name from uncompressed wire bytes that must hold exactly one
    /// name.
    pub fn from_wire(wire: &[u8]) -> Result<Name, NameError> {
        let len = uncompressed_len(wire, 0)?;
        if len != wire.len() {
            return Err(NameError::Truncated);
        }
        Ok(Name { wire: wire.into() })
    }

    /// Reads a possibly compressed name from `msg` at `pos`; returns the name
    /// and the position just after it. Pointers must point strictly before
    /// the start of the label run that holds them, which rules out loops and
    /// forward references.
    pub fn read(msg: &[u8], pos: usize) -> Result<(Name, usize), NameError> {
        let mut buf = NameBuf::new();
        let end = buf.read_compressed(msg, pos)?;
        Ok((buf.to_name(), end))
    }

    /// Reads an uncompressed name from `msg` at `pos` (for RDATA of types
    /// that must not be compressed).
    pub fn read_uncompressed(msg: &[u8], pos: usize) -> Result<(Name, usize), NameError> {
        let len = uncompressed_len(msg, pos)?;
        Ok((
            Name {
                wire: msg[pos..pos + len].into(),
            },
            pos + len,
        ))
    }

    /// Parses a name in presentation format. `@` stands for the origin; a
    /// name without a final unescaped dot is relative to the origin.
    pub fn from_text(text: &[u8], origin: Option<&Name>) -> Result<Name, NameError> {
        if text == b"@" {
            return origin.cloned().ok_or(NameError::Relative);
        }
        if text == b"." {
            return Ok(Name::root());
        }
        // Without escapes the wire form is one byte longer than the text,
        // plus the origin if relative: one allocation, no copy.
        let origin_len = match (text.last(), origin) {
            (Some(b'.'), _) | (_, None) => 0,
            (_, Some(o)) => o.wire.len(),
        };
        SCRATCH.with_borrow_mut(|wire| {
            wire.clear();
            wire.reserve(text.len() + 1 + origin_len);
            Name::write_text(text, origin, wire)?;
            Ok(Name {
                wire: Wire::from(&wire[..]),
            })
        })
    }

    /// Appends the wire form of a name in presentation format (see
    /// [`Name::from_text`]) to `out`; on error `out` is left as it was.
    pub fn write_text(
        text: &[u8],
        origin: Option<&Name>,
        out: &mut Vec<u8>,
    ) -> Result<(), NameError> {
        let start = out.len();
        let result = write_text_at(text, origin.map(Name::as_wire), out, start);
        if result.is_err() {
            out.truncate(start);
        }
        result
    }

    /// Parses an absolute name from text (convenience for tests and config).
    pub fn parse(text: &str) -> Result<Name, NameError> {
        // Relative to the root is absolute.
        let mut wire = Vec::with_capacity(text.len() + 2);
        write_text_at(text.as_bytes(), Some(&[0]), &mut wire, 0)?;
        Ok(Name { wire: wire.into() })
    }

    /// The uncompressed wire form, case preserved.
    pub fn as_wire(&self) -> &[u8] {
        &self.wire
    }

    /// Length in wire form.
    pub fn wire_len(&self) -> usize {
        self.wire.len()
    }

    pub fn is_root(&self) -> bool {
        self.wire.len() == 1
    }

    /// The labels from the leftmost to the last before the root.
    pub fn labels(&self) -> Labels<'_> {
        Labels { wire: &self.wire }
    }

    /// Number of labels, not counting the root.
    pub fn label_count(&self) -> usize {
        self.labels().count()
    }

    /// Whether the first label is `*`.
    pub fn is_wildcard(&self) -> bool {
        self.wire.len() >= 2 && self.wire[0] == 1 && self.wire[1] == b'*'
    }

    /// The name with its first label removed; `None` for the root.
    pub fn parent(&self) -> Option<Name> {
        if self.is_root() {
            return None;
        }
        let skip = 1 + self.wire[0] as usize;
        Some(Name {
            wire: self.wire[skip..].into(),
        })
    }

    /// The name with `label` added in front.
    pub fn prepend(&self, label: &[u8]) -> Result<Name, NameError> {
        if label.is_empty() {
            return Err(NameError::EmptyLabel);
        }
        if label.len() > MAX_LABEL_LEN {
            return Err(NameError::LabelTooLong);
        }
        if self.wire.len() + label.len() + 1 > MAX_NAME_LEN {
            return Err(NameError::NameTooLong);
        }
        let mut wire = Vec::with_capacity(self.wire.len() + label.len() + 1);
        wire.push(label.len() as u8);
        wire.extend_from_slice(label);
        wire.extend_from_slice(&self.wire);
        Ok(Name { wire: wire.into() })
    }

    /// `*.` followed by this name.
    pub fn wildcard_child(&self) -> Result<Name, NameError> {
        self.prepend(b"*")
    }

    /// Whether this name equals `other` or lies below it (case-insensitive).
    pub fn is_subdomain_of(&self, other: &Name) -> bool {
        ends_with_name(&self.wire, &other.wire)
    }

    /// Replaces the suffix `old` of this name by `new` (DNAME substitution,
    /// RFC 6672 2.2).
    pub fn replace_suffix(&self, old: &Name, new: &Name) -> Result<Name, NameError> {
        if !self.is_subdomain_of(old) {
            return Err(NameError::Relative);
        }
        let keep = self.wire.len() - old.wire.len();
        let mut wire = Vec::with_capacity(keep + new.wire.len());
        wire.extend_from_slice(&self.wire[..keep]);
        wire.extend_from_slice(&new.wire);
        if wire.len() > MAX_NAME_LEN {
            return Err(NameError::NameTooLong);
        }
        Ok(Name { wire: wire.into() })
    }

    /// A copy with ASCII letters lower-cased (the canonical form): the
    /// same bytes, shared, when there is none to lower.
    pub fn to_lowercase(&self) -> Name {
        if !self.wire.iter().any(u8::is_ascii_uppercase) {
            return self.clone();
        }
        let mut lower = [0u8; MAX_NAME_LEN];
        let lower = &mut lower[..self.wire.len()];
        lower.copy_from_slice(&self.wire);
        lowercase_wire(lower);
        Name {
            wire: Wire::from(&*lower),
        }
    }

    /// Text relative to `origin` when below it, absolute otherwise.
    pub fn to_text_relative(&self, origin: &Name) -> String {
        if self == origin {
            return "@".into();
        }
        if self.is_subdomain_of(origin) && !origin.is_root() {
            let keep = self.wire.len() - origin.wire.len();
            let mut s = String::new();
            write_labels(&mut s, &self.wire[..keep]);
            s.pop(); // the dot after the last label
            return s;
        }
        self.to_string()
    }
}

thread_local! {
    /// Where [`Name::from_text`] writes a name before it takes its own
    /// allocation (one, of the right size, as with a boxed slice).
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Lower-cases ASCII letters of a wire-form name in place. A length octet
/// is at most 63, below 'A' (65), so the whole name can be lower-cased as
/// one byte string without touching the lengths.
pub fn lowercase_wire(wire: &mut [u8]) {
    wire.make_ascii_lowercase();
}

/// Copies `src` into `dst` (of the same length) lower-cased, eight
/// octets at a time (every query name goes through it; a copy, then byte
/// by byte, took twice the instructions). Label lengths are below 64,
/// never an ASCII capital, so they pass unchanged.
fn lowercase_swar(src: &[u8], dst: &mut [u8]) {
    let len = src.len();
    if len < 8 {
        for (to, from) in dst.iter_mut().zip(src) {
            *to = from.to_ascii_lowercase();
        }
        return;
    }
    let mut at = 0;
    while at + 8 <= len {
        lowercase_word(src, dst, at);
        at += 8;
    }
    if at < len {
        // The last eight octets, overlapping the word before: lower-casing
        // twice changes nothing.
        lowercase_word(src, dst, len - 8);
    }
}

/// `dst[at..at + 8]` = `src[at..at + 8]` lower-cased.
#[inline(always)]
fn lowercase_word(src: &[u8], dst: &mut [u8], at: usize) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let x = u64::from_le_bytes(src[at..at + 8].try_into().expect("8 octets"));
    // Per octet, without carries between octets: its low seven bits plus
    // (0x80 - 'A') sets the top bit from 'A' up, plus (0x80 - 'Z' - 1)
    // from past 'Z' up; capitals have only the first, and octets of 0x80
    // and up are never capitals.
    let low = x & (0x7F * ONES);
    let from_a = low + (0x80 - b'A' as u64) * ONES;
    let past_z = low + (0x80 - b'Z' as u64 - 1) * ONES;
    let upper = (from_a ^ past_z) & !x & (0x80 * ONES);
    dst[at..at + 8].copy_from_slice(&(x | upper >> 2).to_le_bytes());
}

/// [`Name::write_text`] of a name starting at `out[start..]`.
fn write_text_at(
    text: &[u8],
    origin: Option<&[u8]>,
    out: &mut Vec<u8>,
    start: usize,
) -> Result<(), NameError> {
    if text == b"@" {
        out.extend_from_slice(origin.ok_or(NameError::Relative)?);
        return Ok(());
    }
    if text == b"." {
        out.push(0);
        return Ok(());
    }
    if text.is_empty() {
        return Err(NameError::EmptyLabel);
    }
    let mut label_start = start;
    out.push(0);
    let mut i = 0;
    let mut absolute = false;
    while i < text.len() {
        let c = text[i];
        match c {
            b'.' => {
                close_label(out, label_start)?;
                if i + 1 == text.len() {
                    absolute = true;
                } else {
                    label_start = out.len();
                    out.push(0);
                }
                i += 1;
                continue;
            }
            b'\\' => {
                let (byte, used) = unescape_at(text, i)?;
                out.push(byte);
                i += used;
                continue;
            }
            _ => out.push(c),
        }
        i += 1;
    }
    if !absolute {
        close_label(out, label_start)?;
        out.extend_from_slice(origin.ok_or(NameError::Relative)?);
    } else {
        out.push(0);
    }
    if out.len() - start > MAX_NAME_LEN {
        return Err(NameError::NameTooLong);
    }
    Ok(())
}

fn close_label(wire: &mut [u8], label_start: usize) -> Result<(), NameError> {
    let len = wire.len() - label_start - 1;
    if len == 0 {
        return Err(NameError::EmptyLabel);
    }
    if len > MAX_LABEL_LEN {
        return Err(NameError::LabelTooLong);
    }
    wire[label_start] = len as u8;
    Ok(())
}

/// Decodes the escape at `text[i]` (a backslash): `\DDD` or `\X`. Returns the
/// byte and how many input bytes it used.
pub fn unescape_at(text: &[u8], i: usize) -> Result<(u8, usize), NameError> {
    let rest = &text[i + 1..];
    match rest {
        [a, b, c, ..] if a.is_ascii_digit() && b.is_ascii_digit() && c.is_ascii_digit() => {
            let v = (a - b'0') as u32 * 100 + (b - b'0') as u32 * 10 + (c - b'0') as u32;
            if v > 255 {
                return Err(NameError::BadEscape);
            }
            Ok((v as u8, 4))
        }
        [a, ..] if a.is_ascii_digit() => Err(NameError::BadEscape),
        [x, ..] => Ok((*x, 2)),
        [] => Err(NameError::BadEscape),
    }
}

/// Length of the uncompressed name at `msg[pos..]`.
pub(crate) fn uncompressed_len(msg: &[u8], pos: usize) -> Result<usize, NameError> {
    let mut i = pos;
    loop {
        let len = *msg.get(i).ok_or(NameError::Truncated)? as usize;
        match len & 0xC0 {
            0x00 => {}
            0xC0 => return Err(NameError::Compressed),
            _ => return Err(NameError::BadLabelType),
        }
        if i + 1 + len > msg.len() {
            return Err(NameError::Truncated);
        }
        i += 1 + len;
        if i - pos > MAX_NAME_LEN {
            return Err(NameError::NameTooLong);
        }
        if len == 0 {
            return Ok(i - pos);
        }
    }
}

/// Whether the uncompressed wire name `wire` is `suffix` or below it
/// (ASCII case ignored): [`Name::is_subdomain_of`] without a `Name`.
pub fn ends_with_name(wire: &[u8], suffix: &[u8]) -> bool {
    if suffix.len() > wire.len() {
        return false;
    }
    // The suffix must start on a label boundary of `wire`.
    let start = wire.len() - suffix.len();
    let mut i = 0;
    while i < start {
        i += 1 + wire[i] as usize;
    }
    i == start && wire[start..].eq_ignore_ascii_case(suffix)
}

/// Walks the possibly compressed name at `msg[pos..]`, handing each label
/// (with its length octet; the root last) to `label`. Pointers must point
/// strictly before the start of the label run that holds them, which rules
/// out loops and forward references; the name may not exceed 255 octets.
/// Returns the position after the name where it started.
fn walk_compressed(
    msg: &[u8],
    pos: usize,
    mut label: impl FnMut(&[u8]),
) -> Result<usize, NameError> {
    let mut i = pos;
    let mut run_start = pos;
    let mut total = 0;
    let mut end = None;
    loop {
        let len = *msg.get(i).ok_or(NameError::Truncated)? as usize;
        match len & 0xC0 {
            0x00 => {
                let bytes = msg.get(i..i + 1 + len).ok_or(NameError::Truncated)?;
                total += 1 + len;
                if total > MAX_NAME_LEN {
                    return Err(NameError::NameTooLong);
                }
                label(bytes);
                i += 1 + len;
                if len == 0 {
                    return Ok(end.unwrap_or(i));
                }
            }
            0xC0 => {
                let lo = *msg.get(i + 1).ok_or(NameError::Truncated)? as usize;
                let target = ((len & 0x3F) << 8) | lo;
                if target >= run_start {
                    return Err(NameError::BadPointer);
                }
                end.get_or_insert(i + 2);
                i = target;
                run_start = target;
            }
            _ => return Err(NameError::BadLabelType),
        }
    }
}

/// Checks the possibly compressed name at `msg[pos..]` under the same rules
/// as [`Name::read`], without copying it. Returns the position after the
/// name and whether it is the root.
pub fn skip_compressed(msg: &[u8], pos: usize) -> Result<(usize, bool), NameError> {
    let mut labels = 0;
    let end = walk_compressed(msg, pos, |_| labels += 1)?;
    Ok((end, labels == 1))
}

/// A name in wire form held on the stack: what the query path uses so that
/// reading a query name allocates nothing.
#[derive(Clone, Debug)]
pub struct NameBuf {
    bytes: [u8; MAX_NAME_LEN],
    len: usize,
}

impl Default for NameBuf {
    fn default() -> Self {
        Self::new()
    }
}

impl NameBuf {
    pub fn new() -> NameBuf {
        NameBuf {
            bytes: [0; MAX_NAME_LEN],
            len: 0,
        }
    }

    pub fn as_wire(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    pub fn to_name(&self) -> Name {
        Name {
            wire: self.as_wire().into(),
        }
    }

    pub fn set(&mut self, wire: &[u8]) {
        self.bytes[..wire.len()].copy_from_slice(wire);
        self.len = wire.len();
    }

    /// Reads a possibly compressed name (see [`Name::read`]). Returns the
    /// position after the name in the original run.
    pub fn read_compressed(&mut self, msg: &[u8], pos: usize) -> Result<usize, NameError> {
        let mut len = 0;
        let bytes = &mut self.bytes;
        let end = walk_compressed(msg, pos, |label| {
            bytes[len..len + label.len()].copy_from_slice(label);
            len += label.len();
        })?;
        self.len = len;
        Ok(end)
    }

    /// Reads the uncompressed name at `msg[pos..]` lower-cased (the query
    /// path: a question name has nothing before it to point to, so a
    /// pointer there is malformed). Returns the position after the name.
    /// Also notes where each label starts in `starts` (the lookups that
    /// follow walk the name's suffixes): one pass over the labels.
    pub fn read_lowercase(
        &mut self,
        msg: &[u8],
        pos: usize,
        starts: &mut LabelStarts,
    ) -> Result<usize, NameError> {
        let remaining = msg.len().saturating_sub(pos);
        // One test a label for both limits; which one failed is sorted
        // out only then.
        let limit = remaining.min(MAX_NAME_LEN);
        let mut len = 0;
        let mut n = 0;
        loop {
            let label = *msg.get(pos + len).ok_or(NameError::Truncated)? as usize;
            match label & 0xC0 {
                0x00 => {}
                0xC0 => return Err(NameError::Compressed),
                _ => return Err(NameError::BadLabelType),
            }
            let end = len + 1 + label;
            if end > limit {
                return Err(match end > remaining {
                    true => NameError::Truncated,
                    false => NameError::NameTooLong,
                });
            }
            // At most 128 starts: every label but the root takes two
            // octets or more, and the name at most 255 (the mask only
            // spares the compiler a bounds test it cannot prove away).
            starts.at[n & 127] = len as u8;
            n += 1;
            len = end;
            if label == 0 {
                break;
            }
        }
        starts.count = n as u8;
        lowercase_swar(&msg[pos..pos + len], &mut self.bytes[..len]);
        self.len = len;
        Ok(pos + len)
    }

    /// Lower-cases the name in place.
    pub fn make_lowercase(&mut self) {
        lowercase_wire(&mut self.bytes[..self.len]);
    }
}

/// Where each label of a wire name starts, leftmost first, the root label
/// last: the suffix with `k` labels (root not counted) starts at
/// `suffix(k)`. Filled by [`NameBuf::read_lowercase`] or
/// [`LabelStarts::of`]; only the first `count` entries are ever read, so a
/// reused one is never cleared.
#[derive(Clone, Copy, Debug)]
pub struct LabelStarts {
    at: [u8; 128],
    count: u8,
}

impl Default for LabelStarts {
    fn default() -> Self {
        LabelStarts {
            at: [0; 128],
            count: 0,
        }
    }
}

impl LabelStarts {
    /// The starts of an uncompressed, well-formed wire name.
    pub fn of(wire: &[u8]) -> LabelStarts {
        let mut starts = LabelStarts::default();
        for suffix in suffixes(wire) {
            starts.at[starts.count as usize & 127] = (wire.len() - suffix.len()) as u8;
            starts.count += 1;
        }
        starts
    }

    /// Labels, the root not counted.
    pub fn labels(&self) -> usize {
        self.count as usize - 1
    }

    /// Where the suffix of `k` labels starts (k at most [`Self::labels`]).
    pub fn suffix(&self, k: usize) -> usize {
        self.at[self.labels() - k] as usize
    }

    /// Every start, the whole name's (0) first, the root's last.
    pub fn as_slice(&self) -> &[u8] {
        &self.at[..self.count as usize]
    }
}

/// Iterator over the labels of a name, leftmost first, without the root.
pub struct Labels<'a> {
    wire: &'a [u8],
}

impl<'a> Iterator for Labels<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        let len = *self.wire.first()? as usize;
        if len == 0 {
            return None;
        }
        let label = &self.wire[1..1 + len];
        self.wire = &self.wire[1 + len..];
        Some(label)
    }
}

/// The suffixes of an uncompressed wire name: the whole name first, then
/// each parent, the root (`\0`) last. Walking a name up to the root is
/// how the catalog finds a zone and the answer engine an encloser.
pub fn suffixes(wire: &[u8]) -> Suffixes<'_> {
    Suffixes {
        wire,
        next: Some(0),
    }
}

/// Iterator of [`suffixes`]. It ends early, never panics, on a name cut
/// short; where each suffix starts is `wire.len() - suffix.len()`.
#[derive(Clone, Debug)]
pub struct Suffixes<'a> {
    wire: &'a [u8],
    next: Option<usize>,
}

impl<'a> Iterator for Suffixes<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let at = self.next?;
        let len = *self.wire.get(at)? as usize;
        self.next = (len != 0).then_some(at + 1 + len);
        Some(&self.wire[at..])
    }
}

/// Canonical order of two wire names (RFC 4034 6.1).
pub fn canonical_cmp(a: &[u8], b: &[u8]) -> Ordering {
    let (sa, sb) = (LabelStarts::of(a), LabelStarts::of(b));
    let (an, bn) = (sa.labels(), sb.labels());
    for k in 1..=an.min(bn) {
        let x = label_at(a, sa.suffix(k));
        let y = label_at(b, sb.suffix(k));
        let ord = cmp_label(x, y);
        if ord != Ordering::Equal {
            return ord;
        }
    }
    an.cmp(&bn)
}

fn label_at(wire: &[u8], off: usize) -> &[u8] {
    &wire[off + 1..off + 1 + wire[off] as usize]
}

fn cmp_label(x: &[u8], y: &[u8]) -> Ordering {
    for (p, q) in x.iter().zip(y) {
        let ord = p.to_ascii_lowercase().cmp(&q.to_ascii_lowercase());
        if ord != Ordering::Equal {
            return ord;
        }
    }
    x.len().cmp(&y.len())
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        self.wire.eq_ignore_ascii_case(&other.wire)
    }
}
impl Eq for Name {}

impl Hash for Name {
    /// Hashes the lower-cased wire form in one write: a write per byte
    /// made a set of 100,000 origins a sixth of reading the configuration.
    fn hash<H: Hasher>(&self, state: &mut H) {
        let mut lower = [0u8; MAX_NAME_LEN];
        let lower = &mut lower[..self.wire.len()];
        lower.copy_from_slice(&self.wire);
        lowercase_wire(lower);
        state.write(lower);
    }
}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Name) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Name {
    fn cmp(&self, other: &Name) -> Ordering {
        canonical_cmp(&self.wire, &other.wire)
    }
}

/// Appends the labels of `wire` in presentation form, each followed by a dot.
fn write_labels(out: &mut String, wire: &[u8]) {
    let mut i = 0;
    while i < wire.len() && wire[i] != 0 {
        let len = wire[i] as usize;
        let label = &wire[i + 1..i + 1 + len];
        // Most labels need no escape: copied whole, not a byte at a time.
        if label.iter().all(|&b| !needs_escape(b)) {
            out.push_str(std::str::from_utf8(label).expect("printable ASCII"));
        } else {
            label.iter().for_each(|&b| push_escaped_name_byte(out, b));
        }
        out.push('.');
        i += 1 + len;
    }
}

/// Appends the uncompressed wire name `wire` in presentation form (`.`
/// for the root), without making a [`Name`] of it.
pub fn push_name_text(out: &mut String, wire: &[u8]) {
    match wire.first() {
        None | Some(0) => out.push('.'),
        Some(_) => write_labels(out, wire),
    }
}

/// Whether a label byte is written escaped.
fn needs_escape(b: u8) -> bool {
    is_special(b) || !(0x21..=0x7E).contains(&b)
}

/// A printable byte that a label escapes as `\c`: it means something in a
/// zone file.
fn is_special(b: u8) -> bool {
    matches!(b, b'.' | b';' | b'(' | b')' | b'"' | b'\\' | b'@' | b'$')
}

/// Appends one label byte in presentation form.
pub fn push_escaped_name_byte(out: &mut String, b: u8) {
    match b {
        b if is_special(b) => {
            out.push('\\');
            out.push(b as char);
        }
        0x21..=0x7E => out.push(b as char),
        _ => {
            out.push('\\');
            out.push_str(&format!("{b:03}"));
        }
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::with_capacity(self.wire.len() + 4);
        push_name_text(&mut s, &self.wire);
        f.write_str(&s)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Name({self})")
    }
}

impl std::str::FromStr for Name {
    type Err = NameError;
    fn from_str(s: &str) -> Result<Name, NameError> {
        Name::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_one_pointer_wide() {
        assert_eq!(size_of::<Name>(), size_of::<usize>());
        assert_eq!(size_of::<Option<Name>>(), size_of::<usize>());
    }

    #[test]
    fn names_of_every_length_keep_their_bytes() {
        let mut wire = Vec::new();
        for _ in 0..127 {
            wire.splice(0..0, [1, b'a']);
            let mut whole = wire.clone();
            whole.push(0);
            let name = Name::from_wire(&whole).unwrap();
            assert_eq!(name.as_wire(), &whole[..]);
            assert_eq!(name.clone().as_wire(), &whole[..]);
        }
        assert_eq!(Name::root().as_wire(), &[0]);
    }

    #[test]
    fn a_lowercase_copy_shares_the_bytes_of_a_name_already_lowercase() {
        let lower = Name::parse("www.example.com").unwrap();
        let copy = lower.to_lowercase();
        assert_eq!(copy.as_wire().as_ptr(), lower.as_wire().as_ptr());
        let mixed = Name::parse("www.Example.COM").unwrap();
        let lowered = mixed.to_lowercase();
        assert_ne!(lowered.as_wire().as_ptr(), mixed.as_wire().as_ptr());
        assert_eq!(lowered.as_wire(), lower.as_wire());
        assert_eq!(
            mixed.to_string(),
            "www.Example.COM.",
            "the original keeps its case"
        );
    }

    #[test]
    fn names_from_text_one_after_another_are_each_their_own() {
        let origin = Name::parse("example.com").unwrap();
        let a = Name::from_text(b"a.b", Some(&origin)).unwrap();
        let long = Name::from_text(b"longer-label.www", Some(&origin)).unwrap();
        let c = Name::from_text(b"c.", None).unwrap();
        assert_eq!(a.to_string(), "a.b.example.com.");
        assert_eq!(long.to_string(), "longer-label.www.example.com.");
        assert_eq!(c.to_string(), "c.");
        assert!(Name::from_text(b"bad..name", Some(&origin)).is_err());
        assert_eq!(
            Name::from_text(b"d", Some(&origin)).unwrap().to_string(),
            "d.example.com."
        );
    }

    #[test]
    fn suffixes_walk_from_the_name_to_the_root() {
        let name = Name::parse("www.Example.com").unwrap();
        let got: Vec<&[u8]> = suffixes(name.as_wire()).collect();
        let want: [&[u8]; 4] = [
            b"\x03www\x07Example\x03com\x00",
            b"\x07Example\x03com\x00",
            b"\x03com\x00",
            b"\x00",
        ];
        assert_eq!(got, want);
        assert_eq!(suffixes(b"\x00").collect::<Vec<_>>(), [b"\x00"]);
    }

    #[test]
    fn suffixes_of_a_name_cut_short_end_early() {
        assert_eq!(suffixes(b"").count(), 0);
        // A label longer than what follows: its suffix, then nothing.
        assert_eq!(suffixes(b"\x03ab").collect::<Vec<_>>(), [b"\x03ab"]);
        let no_root: Vec<&[u8]> = suffixes(b"\x01a\x01b").collect();
        assert_eq!(no_root, [&b"\x01a\x01b"[..], b"\x01b"]);
    }

    #[test]
    fn label_starts_of_a_name_are_its_suffixes_starts() {
        let wire = Name::parse("a.bc.def").unwrap();
        let starts = LabelStarts::of(wire.as_wire());
        assert_eq!(starts.as_slice(), [0, 2, 5, 9]);
        assert_eq!((starts.labels(), starts.suffix(1)), (3, 5));
    }

    #[test]
    fn word_at_a_time_lowercasing_matches_ascii_lowercasing() {
        // Every octet value at every place of words and of the tail, next
        // to neighbours that could carry into it (0x7F, 0xFF, 'Z', '@').
        for len in 1..=19 {
            for at in 0..len {
                for fill in [0x00, b'@', b'Z', b'[', 0x7F, 0xFF] {
                    for b in 0..=255u8 {
                        let mut slow = vec![fill; len];
                        slow[at] = b;
                        let mut fast = vec![0; len];
                        lowercase_swar(&slow, &mut fast);
                        slow.make_ascii_lowercase();
                        assert_eq!(
                            fast, slow,
                            "len {len}, octet {b:#x} at {at}, fill {fill:#x}"
                        );
                    }
                }
            }
        }
    }

    fn n(s: &str) -> Name {
        Name::parse(s).unwrap()
    }

    /// Every byte value in a label is written as `Display` always wrote
    /// it, one byte at a time; plain labels beside escaped ones.
    #[test]
    fn name_text_escapes_exactly_the_bytes_that_need_it() {
        for b in 0..=255u8 {
            let wire = [1, b, 3, b'a', b'-', b'z', 0];
            let mut one_by_one = String::new();
            push_escaped_name_byte(&mut one_by_one, b);
            let mut out = String::new();
            push_name_text(&mut out, &wire);
            assert_eq!(out, format!("{one_by_one}.a-z."), "byte {b}");
            assert_eq!(Name::parse(&out).unwrap().as_wire(), &wire);
        }
        let mut root = String::new();
        push_name_text(&mut root, &[0]);
        assert_eq!(root, ".");
    }

    #[test]
    fn text_round_trip_with_escapes() {
        let name = Name::from_text(br"a\.b.c\032d.\\.example.", None).unwrap();
        assert_eq!(name.label_count(), 4);
        assert_eq!(name.labels().next().unwrap(), b"a.b");
        assert_eq!(name.to_string(), r"a\.b.c\032d.\\.example.");
        assert_eq!(Name::parse(&name.to_string()).unwrap(), name);
    }

    #[test]
    fn relative_names_and_origin() {
        let origin = n("example.com");
        assert_eq!(
            Name::from_text(b"www", Some(&origin)).unwrap(),
            n("www.example.com")
        );
        assert_eq!(Name::from_text(b"@", Some(&origin)).unwrap(), origin);
        assert_eq!(Name::from_text(b"www", None), Err(NameError::Relative));
        assert!(Name::from_text(b".", None).unwrap().is_root());
    }

    #[test]
    fn writing_text_appends_or_leaves_the_buffer_as_it_was() {
        let origin = n("example.com");
        let mut out = vec![9];
        Name::write_text(b"www", Some(&origin), &mut out).unwrap();
        assert_eq!(out[1..], *n("www.example.com").as_wire());
        let before = out.clone();
        let long = "a.".repeat(130);
        for bad in ["a..b", r"a\256", "", long.as_str()] {
            assert!(Name::write_text(bad.as_bytes(), Some(&origin), &mut out).is_err());
            assert_eq!(out, before, "{bad:?}");
        }
    }

    #[test]
    fn label_and_name_limits() {
        let l63 = "a".repeat(63);
        assert!(Name::parse(&format!("{l63}.com")).is_ok());
        assert_eq!(
            Name::parse(&format!("a{l63}.com")),
            Err(NameError::LabelTooLong)
        );
        // 4 labels of 63 + 4 length octets + root = 257 > 255.
        let long = [l63.as_str(); 4].join(".");
        assert_eq!(Name::parse(&long), Err(NameError::NameTooLong));
        // Exactly 255: 3×(1+63) + (1+61) + 1.
        let max = format!("{l63}.{l63}.{l63}.{}", "b".repeat(61));
        assert_eq!(Name::parse(&max).unwrap().wire_len(), 255);
        assert_eq!(Name::parse("a..b"), Err(NameError::EmptyLabel));
        assert_eq!(Name::parse(r"a\256.b"), Err(NameError::BadEscape));
    }

    #[test]
    fn case_insensitive_equality_preserves_case() {
        let a = n("WwW.Example.COM");
        assert_eq!(a, n("www.example.com"));
        assert_eq!(a.to_string(), "WwW.Example.COM.");
        assert_eq!(a.to_lowercase().to_string(), "www.example.com.");
    }

    #[test]
    fn canonical_order_rfc4034() {
        // The example list of RFC 4034 section 6.1, in order.
        let sorted = [
            "example",
            "a.example",
            "yljkjljk.a.example",
            "Z.a.example",
            r"zABC.a.EXAMPLE",
            "z.example",
            r"\001.z.example",
            "*.z.example",
            r"\200.z.example",
        ];
        let names: Vec<Name> = sorted.iter().map(|s| n(s)).collect();
        for w in names.windows(2) {
            assert_eq!(w[0].cmp(&w[1]), Ordering::Less, "{} < {}", w[0], w[1]);
        }
    }

    #[test]
    fn subdomains_and_parents() {
        let a = n("a.b.example.com");
        assert!(a.is_subdomain_of(&n("example.com")));
        assert!(a.is_subdomain_of(&n("EXAMPLE.com")));
        assert!(!a.is_subdomain_of(&n("b.example.org")));
        assert!(!n("xexample.com").is_subdomain_of(&n("example.com")));
        assert!(a.is_subdomain_of(&Name::root()));
        assert_eq!(a.parent().unwrap(), n("b.example.com"));
        assert!(Name::root().parent().is_none());
        assert!(n("*.example.com").is_wildcard());
        assert_eq!(
            n("example.com").wildcard_child().unwrap(),
            n("*.example.com")
        );
        assert_eq!(
            a.replace_suffix(&n("example.com"), &n("example.net"))
                .unwrap(),
            n("a.b.example.net")
        );
        assert_eq!(a.to_text_relative(&n("example.com")), "a.b");
    }

    #[test]
    fn compressed_read() {
        // "example.com" at 0, then "www" + pointer to 0.
        let mut msg = b"\x07example\x03com\x00".to_vec();
        msg.extend_from_slice(b"\x03www\xC0\x00");
        let (name, end) = Name::read(&msg, 13).unwrap();
        assert_eq!(name, n("www.example.com"));
        assert_eq!(end, msg.len());
    }

    #[test]
    fn compression_loops_and_forward_pointers_rejected() {
        // Pointer to itself.
        assert_eq!(
            Name::read(b"\xC0\x00", 0).unwrap_err(),
            NameError::BadPointer
        );
        // Label then a pointer back to the start of the same run: a loop.
        assert_eq!(
            Name::read(b"\x01a\xC0\x00", 0).unwrap_err(),
            NameError::BadPointer
        );
        // Two pointers pointing at each other.
        let msg = b"\x01a\xC0\x04\x01b\xC0\x00";
        assert_eq!(Name::read(msg, 4).unwrap_err(), NameError::BadPointer);
        // Forward pointer.
        assert_eq!(
            Name::read(b"\xC0\x02\x00", 0).unwrap_err(),
            NameError::BadPointer
        );
        // Truncated.
        assert_eq!(Name::read(b"\x05ab", 0).unwrap_err(), NameError::Truncated);
        assert_eq!(Name::read(b"\xC0", 0).unwrap_err(), NameError::Truncated);
        // Extended label types.
        assert_eq!(
            Name::read(b"\x41a\x00", 0).unwrap_err(),
            NameError::BadLabelType
        );
    }

    #[test]
    fn question_names_are_read_lowercased_and_uncompressed() {
        let mut buf = NameBuf::new();
        let mut starts = LabelStarts::default();
        let msg = b"\x03WwW\x07Example\x00rest";
        assert_eq!(buf.read_lowercase(msg, 0, &mut starts).unwrap(), 13);
        assert_eq!(buf.as_wire(), b"\x03www\x07example\x00");
        assert_eq!(starts.as_slice(), [0, 4, 12]);
        assert_eq!(starts.as_slice(), LabelStarts::of(buf.as_wire()).as_slice());
        assert_eq!(
            (starts.labels(), starts.suffix(2), starts.suffix(1)),
            (2, 0, 4)
        );
        assert_eq!(starts.suffix(0), 12);
        assert_eq!(
            buf.read_lowercase(b"\x01a\xC0\x00", 0, &mut starts),
            Err(NameError::Compressed)
        );
        assert_eq!(
            buf.read_lowercase(b"\x01a\x40\x00", 0, &mut starts),
            Err(NameError::BadLabelType)
        );
        assert_eq!(
            buf.read_lowercase(b"\x05ab", 0, &mut starts),
            Err(NameError::Truncated)
        );
        assert_eq!(
            buf.read_lowercase(b"", 0, &mut starts),
            Err(NameError::Truncated)
        );
        // The longest name there is: 127 one-octet labels and the root.
        let mut most = b"\x01a".repeat(127);
        most.push(0);
        assert_eq!(buf.read_lowercase(&most, 0, &mut starts), Ok(255));
        assert_eq!(starts.labels(), 127);
        assert_eq!(starts.suffix(0), 254);
        most.insert(0, b'a');
        most.insert(0, 1);
        assert_eq!(
            buf.read_lowercase(&most, 0, &mut starts),
            Err(NameError::NameTooLong)
        );
        let l = [b'a'; 63];
        let mut long = Vec::new();
        for _ in 0..4 {
            long.push(63);
            long.extend_from_slice(&l);
        }
        long.push(0);
        assert_eq!(
            buf.read_lowercase(&long, 0, &mut starts),
            Err(NameError::NameTooLong)
        );
    }

    #[test]
    fn decompressed_name_over_255_rejected() {
        // A 250-octet name followed by a name that adds labels via pointer.
        let l = "a".repeat(62);
        let base = Name::parse(&format!("{l}.{l}.{l}.{}", "b".repeat(60))).unwrap();
        let mut msg = base.as_wire().to_vec();
        let second = msg.len();
        msg.extend_from_slice(b"\x05hello\xC0\x00");
        assert_eq!(
            Name::read(&msg, second).unwrap_err(),
            NameError::NameTooLong
        );
    }

    proptest::proptest! {
        #[test]
        fn wire_text_round_trip(labels in proptest::collection::vec(
            proptest::collection::vec(proptest::num::u8::ANY, 1..20), 0..8)) {
            let mut wire = Vec::new();
            for l in &labels { wire.push(l.len() as u8); wire.extend_from_slice(l); }
            wire.push(0);
            let name = Name::from_wire(&wire).unwrap();
            let text = name.to_string();
            let back = Name::from_text(text.as_bytes(), None).unwrap();
            proptest::prop_assert_eq!(back.as_wire(), name.as_wire());
        }
    }
}
